/* What the elementwise and fused generators share (codegen_internal.h,
 * codegen_fused.h): the op-table expression for a dtype, the conversion
 * to a compute type, the collapse of a broadcast pattern, and the
 * emission of one elementwise member of a fused group. One copy each. */
#include "vulkan/codegen/codegen_fused.h"
#include "util/dtype.h"
#include "graph/uelem.h"

#include <stdio.h>
#include <string.h>

const char *cg_pick_expr(const vf_op_info *info, vf_dtype data)
{
    switch (data) {
    case VF_F32: case VF_F16: return info->glsl_f;
    case VF_I32: return info->glsl_i;
    default: return info->glsl_u ? info->glsl_u : info->glsl_i;   /* u32, bool as 0/1 */
    }
}

/* The storage conversion (cg_convert) read back as the compute type: only
   f16 differs, its bits back to float. */
void cg_to_ctype(vf_sb *s, vf_dtype dt, vf_ctype ct, const char *v)
{
    if (dt == VF_F16) vf_sb_puts(s, "vf_h2f(");
    cg_convert(s, dt, ct, v);
    if (dt == VF_F16) vf_sb_puts(s, ")");
}

void cg_collapse(const vf_tref *out, const vf_tref *const *in, int n_in, cg_pattern *p)
{
    memset(p, 0, sizeof *p);
    int R = out->rank;
    for (int d = 0; d < R; d++) {
        int64_t n = out->shape[d];
        if (n == 1) continue;
        uint32_t bits = 0;
        for (int k = 0; k < n_in; k++) {
            int dk = d - (R - in[k]->rank);
            int64_t ik = dk < 0 ? 1 : in[k]->shape[dk];
            if (ik == 1) bits |= 1u << k;
        }
        if (p->ndims > 0 && p->bcast[p->ndims - 1] == bits) {
            p->size[p->ndims - 1] *= (uint64_t)n;
        } else {
            p->size[p->ndims] = (uint64_t)n;
            p->bcast[p->ndims] = bits;
            p->ndims++;
        }
    }
    if (p->ndims == 0) {   /* a scalar output: inputs are all scalars too */
        p->ndims = 1;
        p->size[0] = 1;
        p->bcast[0] = n_in >= 32 ? 0xffffffffu : (1u << n_in) - 1;
    }
}

bool cg_member_op(vf_op op) { return vf_op_get(op)->kind == VF_KIND_ELEMENTWISE || op == VF_OP_FILL; }

unsigned cg_member_cost(const vf_fused_group *grp, int m)
{
    const vf_exec *e = &grp->execs[m];
    const vf_op_info *info = vf_op_get(e->op);
    unsigned cost = info->glsl_f && strstr(info->glsl_f, "vf_") ? 8u : 1u;
    if (e->op == VF_OP_USER_ELEMENTWISE) cost = 8u;   /* unknown: priced like a prelude call */
    return cost + (e->out.dtype == VF_F16 ? 2u : 0u);
}

bool cg_window_op(vf_op op)
{
    return op == VF_OP_SLICE || op == VF_OP_PAD || op == VF_OP_CONCAT || op == VF_OP_SLICE_GRAD;
}

/* The input whose dtype picks the expression: where(cond, a, b) picks a's. */
static vf_ctype result_ctype(const vf_exec *e)
{
    const vf_op_info *info = vf_op_get(e->op);
    return info->result == VF_RESULT_BOOL ? VF_CT_BOOL : cg_ctype_of(e->in[vf_op_data_input(e->op)].dtype);
}

/* A user elementwise member (graph/uelem.h): its helpers once per group
   (the first member with that text brings them), then the user's expression as
   the member's function over x0 .. (and y for a gradient's op: the names
   the expression was checked with at create time). */
static vf_status uelem_fn(vf_sb *s, const vf_fused_group *grp, int m, vf_err *err)
{
    const vf_exec *e = &grp->execs[m];
    const vf_uelem *u = e->attrs.uelem;
    if (!u) return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "codegen: user elementwise member %d has no op", m);
    /* helpers once per text: an op used twice, or with its gradient's op
       (the same helpers), in one kernel defines them once */
    bool first = u->helpers != NULL;
    for (int k = 0; k < m && first; k++) {
        const vf_uelem *v = grp->execs[k].op == VF_OP_USER_ELEMENTWISE ? grp->execs[k].attrs.uelem : NULL;
        first = !(v && v->helpers && !strcmp(v->helpers, u->helpers));
    }
    if (first) vf_sb_add(s, "// helpers of user op '%s'\n%s\n", u->name, u->helpers);
    static const char *const xn[3] = {"x0", "x1", "x2"};
    vf_sb_add(s, "float op_%d(", m);
    for (int k = 0; k < e->n_in && k < 3; k++)
        vf_sb_add(s, "%sfloat %s", k ? ", " : "", u->grad_of && k == e->n_in - 1 ? "y" : xn[k]);
    vf_sb_add(s, ") { return float(%s); }   // user op '%s'\n", u->expr, u->name);
    return VF_OK;
}

vf_status cg_member_fn(vf_sb *s, const vf_fused_group *grp, int m, vf_err *err)
{
    const vf_exec *e = &grp->execs[m];
    const vf_op_info *info = vf_op_get(e->op);
    if (e->op == VF_OP_FILL || cg_window_op(e->op)) return VF_OK;   /* a constant, an indexed read: no function */
    if (e->op == VF_OP_USER_ELEMENTWISE) return uelem_fn(s, grp, m, err);
    vf_dtype dt = e->in[vf_op_data_input(e->op)].dtype;
    const char *expr = cg_pick_expr(info, dt);
    if (!expr)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL expression for dtype %s in the op table",
                          info->name, vf_dtype_name(dt));
    vf_sb_add(s, "%s op_%d(", cg_ctype_name(result_ctype(e)), m);
    static const char *const an[3] = {"a", "b", "c"};
    for (int k = 0; k < e->n_in && k < 3; k++) {
        vf_ctype ct = vf_op_input_is_cond(e->op, k) ? VF_CT_BOOL : cg_ctype_of(e->in[k].dtype);
        vf_sb_add(s, "%s%s %s", k ? ", " : "", cg_ctype_name(ct), an[k]);
    }
    vf_sb_add(s, ") { return %s; }   // %s\n", expr, info->name);
    return VF_OK;
}

/* FILL member e's value exactly as stored, as a compute-type literal. */
void cg_fill_literal(vf_sb *s, const vf_exec *e)
{
    uint8_t tmp[8] = {0};
    uint32_t b;
    vf_store_f64(tmp, e->out.dtype, 0, e->attrs.value);
    memcpy(&b, tmp, 4);   /* little-endian: f16 / bool land in the low bits */
    switch (e->out.dtype) {
    case VF_F32: vf_sb_add(s, "uintBitsToFloat(0x%08xu)", b); break;
    case VF_F16: vf_sb_add(s, "vf_h2f(0x%04xu)", b & 0xffffu); break;
    case VF_I32: vf_sb_add(s, "int(0x%08xu)", b); break;
    default: vf_sb_add(s, "0x%08xu", e->out.dtype == VF_BOOL ? (b & 0xffu ? 1u : 0u) : b); break;
    }
}

vf_ctype cg_member_result(const vf_exec *e) { return result_ctype(e); }

uint32_t cg_fill_bits(const vf_exec *e)
{
    uint8_t tmp[8] = {0};
    uint32_t b;
    vf_store_f64(tmp, e->out.dtype, 0, e->attrs.value);
    memcpy(&b, tmp, 4);   /* little-endian: f16 / bool land in the low bits */
    return e->out.dtype == VF_F16 ? b & 0xffffu : e->out.dtype == VF_BOOL ? (b & 0xffu ? 1u : 0u) : b;
}

void cg_push_fills(vf_cg *g, const vf_fused_group *grp, bool *pushed)
{
    for (int m = 0; m < grp->n_members && m < CG_MAX_MEMBERS; m++)
        if (grp->execs[m].op == VF_OP_FILL && g->n_push + 2 <= CG_MAX_PUSH_FIELDS) {
            char nm[16];
            snprintf(nm, sizeof nm, "fill%d", m);
            cg_push_u32(g, nm, cg_fill_bits(&grp->execs[m]));
            pushed[m] = true;
        }
}

void cg_group_loads(vf_cg *g, const vf_fused_group *grp, uint64_t skip)
{
    for (int i = 0; i < grp->n_inputs; i++) {
        if ((skip >> (i < 63 ? i : 63)) & 1) continue;
        char fn[16], nm[16];
        snprintf(fn, sizeof fn, "ld%d", i);
        snprintf(nm, sizeof nm, "in%d", i);
        vf_dtype dt = grp->tensors[i].dtype;
        cg_load_fn(g, fn, nm, dt, cg_ctype_of(dt));
    }
}

void cg_group_stores(vf_cg *g, const vf_fused_group *grp, const char *fn, const char *buf)
{
    for (int o = 0; o < grp->n_outputs; o++) {
        char f[32], nm[32];
        snprintf(f, sizeof f, "%s%d", fn, o);
        snprintf(nm, sizeof nm, "%s%d", buf, o);
        vf_dtype dt = grp->tensors[grp->n_inputs + o].dtype;
        cg_store_fn(g, f, nm, dt, cg_ctype_of(dt));
    }
}

void cg_fill_pushed(vf_sb *s, vf_dtype dt, int m)
{
    static const char *const from_bits[] = {
        [VF_F32] = "uintBitsToFloat(pc.fill%d)", [VF_F16] = "vf_h2f(pc.fill%d)", [VF_I32] = "int(pc.fill%d)",
        [VF_U32] = "pc.fill%d", [VF_BOOL] = "pc.fill%d"};
    vf_sb_add(s, from_bits[dt], m);
}

void cg_member_call(vf_sb *s, const vf_fused_group *grp, int m, cg_ref_fn ref, void *user)
{
    const vf_exec *e = &grp->execs[m];
    const vf_fused_member *fm = &grp->members[m];
    vf_sb_add(s, "op_%d(", m);
    for (int k = 0; k < e->n_in && k < 3; k++) {
        vf_dtype pdt = e->in[k].dtype;
        if (k) vf_sb_puts(s, ", ");
        bool cond = vf_op_input_is_cond(e->op, k);   /* held as its compute type; where wants a bool */
        if (cond) vf_sb_puts(s, "(");
        ref(s, fm->in[k], user);
        if (cond) vf_sb_puts(s, vf_dtype_is_float(pdt) ? " != 0.0)" : pdt == VF_I32 ? " != 0)" : " != 0u)");
    }
    vf_sb_puts(s, ")");
}

void cg_member_eval(vf_sb *s, const vf_fused_group *grp, int m, const char *indent, cg_ref_fn ref, void *user,
                    const bool *pushed)
{
    const vf_exec *e = &grp->execs[m];
    vf_sb_add(s, "%s%s t%d = ", indent, cg_ctype_name(cg_ctype_of(e->out.dtype)), m);
    if (e->op == VF_OP_FILL && pushed && pushed[m]) {
        cg_fill_pushed(s, e->out.dtype, m);
        vf_sb_puts(s, ";   // fill\n");
        return;
    }
    if (e->op == VF_OP_FILL) {
        cg_fill_literal(s, e);
        vf_sb_puts(s, ";   // fill\n");
        return;
    }
    vf_sb call = {0};
    cg_member_call(&call, grp, m, ref, user);
    if (call.oom) s->oom = true;
    cg_to_ctype(s, e->out.dtype, result_ctype(e), call.buf ? call.buf : "");
    vf_sb_free(&call);
    vf_sb_add(s, ";   // %s\n", vf_op_get(e->op)->name);
}

int cg_output_member(const vf_fused_group *grp, int o)
{
    for (int m = 0; m < grp->n_members; m++)
        if (grp->members[m].out == grp->n_inputs + o) return m;
    return -1;
}
