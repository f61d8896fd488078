/* vf_codegen_group: one GLSL kernel per fused elementwise DAG
 * (codegen_fused.h).
 *
 * Every invocation evaluates the whole DAG for its output elements: the
 * group's inputs are loaded once (at their broadcast index), each member
 * becomes one local `tN` computed by a function wrapping its op-table GLSL
 * expression (so a new op row needs nothing here), and each group output
 * is stored once. Values between members never touch memory.
 *
 * Values are held in the compute type of their dtype (float for f32/f16,
 * int, uint for u32 and for bool as 0/1); a member's result is converted
 * to its dtype's compute type with the cast rules, and f16 results are
 * rounded to f16 after every op, as the CPU backend rounds to storage.
 *
 * Shapes are collapsed as in codegen_elementwise.c (size-1 dims dropped,
 * adjacent dims that every input broadcasts alike merged); the broadcast
 * bits are baked in, sizes are push constants. Without broadcasting
 * (inputs of the output's shape, or single elements) and with 4-byte
 * dtypes the kernel moves vec4s, 4 per invocation, workgroup-strided.
 */
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/codegen/codegen_internal.h"
#include "vulkan/codegen/codegen_matmul.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define FU_PER_THREAD 4u
#define FU_MAX_TENSORS VF_KERNEL_MAX_BINDINGS

typedef struct {
    int ndims;
    uint64_t size[VF_MAX_RANK];
    uint32_t bcast[VF_MAX_RANK];   /* bit k: input k broadcasts this dim */
} fu_pattern;

static int64_t numel_of(const vf_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

static void collapse(const vf_shape *out, const vf_shape *const *in, int n_in, fu_pattern *p)
{
    memset(p, 0, sizeof *p);
    int R = out->rank;
    for (int d = 0; d < R; d++) {
        int64_t n = out->dim[d];
        if (n == 1) continue;
        uint32_t bits = 0;
        for (int k = 0; k < n_in; k++) {
            int dk = d - (R - in[k]->rank);
            int64_t ik = dk < 0 ? 1 : in[k]->dim[dk];
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
    if (p->ndims == 0) {
        p->ndims = 1;
        p->size[0] = 1;
        p->bcast[0] = n_in >= 32 ? 0xffffffffu : (1u << n_in) - 1;
    }
}

static bool is4(vf_dtype t) { return t == VF_F32 || t == VF_I32 || t == VF_U32; }

static const char *pick_expr(const vf_op_info *info, vf_dtype data)
{
    switch (data) {
    case VF_F32: case VF_F16: return info->glsl_f;
    case VF_I32: return info->glsl_i;
    default: return info->glsl_u ? info->glsl_u : info->glsl_i;
    }
}

/* Converts expression v of compute type ct to the compute type of dt with
   the cast rules (f16: rounded through f16 bits). */
void vf_fused_to_ctype(vf_sb *s, vf_dtype dt, vf_ctype ct, const char *v)
{
    switch (dt) {
    case VF_F32:
        vf_sb_add(s, ct == VF_CT_BOOL ? "(%s ? 1.0 : 0.0)" : "float(%s)", v);
        break;
    case VF_F16:
        vf_sb_add(s, ct == VF_CT_BOOL ? "(%s ? 1.0 : 0.0)" : "vf_h2f(vf_f2h(float(%s)))", v);
        break;
    case VF_I32:
        if (ct == VF_CT_FLOAT) vf_sb_add(s, "vf_f2i(%s)", v);
        else if (ct == VF_CT_BOOL) vf_sb_add(s, "(%s ? 1 : 0)", v);
        else vf_sb_add(s, "int(%s)", v);
        break;
    case VF_U32:
        if (ct == VF_CT_FLOAT) vf_sb_add(s, "vf_f2u(%s)", v);
        else if (ct == VF_CT_BOOL) vf_sb_add(s, "(%s ? 1u : 0u)", v);
        else vf_sb_add(s, "uint(%s)", v);
        break;
    case VF_BOOL:
        if (ct == VF_CT_BOOL) vf_sb_add(s, "(%s ? 1u : 0u)", v);
        else if (ct == VF_CT_FLOAT) vf_sb_add(s, "(%s != 0.0 ? 1u : 0u)", v);
        else vf_sb_add(s, "(%s != %s ? 1u : 0u)", v, ct == VF_CT_INT ? "0" : "0u");
        break;
    }
}

/* The op function of member v: `RT op_<v>(CTa a, ...)`. */
vf_status vf_fused_op_fn(vf_sb *s, const vf_graph *g, int v, vf_err *err)
{
    const vf_node *nd = &g->nodes[v];
    const vf_op_info *info = vf_op_get(nd->op);
    if (nd->op == VF_OP_FILL) return VF_OK;   /* a constant: no function */
    int data = vf_op_data_input(nd->op);
    vf_dtype dt = g->nodes[nd->in[data]].dtype;
    const char *expr = pick_expr(info, dt);
    if (!expr)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL expression for dtype %s in the op table",
                          info->name, vf_dtype_name(dt));
    vf_ctype rt = info->result == VF_RESULT_BOOL ? VF_CT_BOOL : cg_ctype_of(dt);
    vf_sb_add(s, "%s op_%d(", cg_ctype_name(rt), v);
    static const char *const an[3] = {"a", "b", "c"};
    for (int k = 0; k < nd->n_in; k++) {
        vf_ctype ct = vf_op_input_is_cond(nd->op, k) ? VF_CT_BOOL : cg_ctype_of(g->nodes[nd->in[k]].dtype);
        vf_sb_add(s, "%s%s %s", k ? ", " : "", cg_ctype_name(ct), an[k]);
    }
    vf_sb_add(s, ") { return %s; }   // %s\n", expr, info->name);
    return VF_OK;
}

/* The per-member op functions. */
static vf_status emit_op_fns(vf_cg *cg, const vf_graph *g, const vf_group *grp, vf_err *err)
{
    for (int m = 0; m < grp->n_nodes; m++) {
        vf_status st = vf_fused_op_fn(&cg->decl, g, grp->nodes[m], err);
        if (st) return st;
    }
    return VF_OK;
}

/* The value name of v inside the evaluation: tN for members, xK for inputs. */
static void value_ref(vf_sb *s, const vf_group *grp, int v)
{
    if (vf_group_member_index(grp, v) >= 0) vf_sb_add(s, "t%d", v);
    else vf_sb_add(s, "x%d", vf_group_input_index(grp, v));
}

/* Evaluates the members in order, from the loaded inputs x0.. into t<id>. */
static void emit_eval(vf_sb *s, const vf_graph *g, const vf_group *grp, const char *indent, const uint32_t *fill_bits)
{
    for (int m = 0; m < grp->n_nodes; m++) {
        int v = grp->nodes[m];
        const vf_node *nd = &g->nodes[v];
        const vf_op_info *info = vf_op_get(nd->op);
        vf_ctype ct = cg_ctype_of(nd->dtype);
        vf_sb_add(s, "%s%s t%d = ", indent, cg_ctype_name(ct), v);
        if (nd->op == VF_OP_FILL) {
            vf_fused_fill_literal(s, nd->dtype, fill_bits[m]);
            vf_sb_add(s, ";   // fill\n");
            continue;
        }
        vf_sb call = {0};
        vf_sb_add(&call, "op_%d(", v);
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k];
            vf_dtype pdt = g->nodes[p].dtype;
            if (k) vf_sb_puts(&call, ", ");
            if (vf_op_input_is_cond(nd->op, k)) {
                /* held as its compute type; where wants a bool */
                vf_sb_puts(&call, "(");
                value_ref(&call, grp, p);
                vf_sb_puts(&call, vf_dtype_is_float(pdt) ? " != 0.0)" : pdt == VF_I32 ? " != 0)" : " != 0u)");
            } else {
                value_ref(&call, grp, p);
            }
        }
        vf_sb_puts(&call, ")");
        int data = vf_op_data_input(nd->op);
        vf_dtype dt = g->nodes[nd->in[data]].dtype;
        vf_ctype rt = info->result == VF_RESULT_BOOL ? VF_CT_BOOL : cg_ctype_of(dt);
        if (call.oom) s->oom = true;
        vf_fused_to_ctype(s, nd->dtype, rt, call.buf ? call.buf : "");
        vf_sb_free(&call);
        vf_sb_add(s, ";   // %s\n", info->name);
    }
}

void vf_fused_fill_literal(vf_sb *s, vf_dtype dt, uint32_t b)
{
    /* the fill value, exactly as stored, as a compute-type literal */
    switch (dt) {
    case VF_F32: vf_sb_add(s, "uintBitsToFloat(0x%08xu)", b); break;
    case VF_F16: vf_sb_add(s, "vf_h2f(0x%04xu)", b & 0xffffu); break;
    case VF_I32: vf_sb_add(s, "int(0x%08xu)", b); break;
    default: vf_sb_add(s, "0x%08xu", dt == VF_BOOL ? (b & 0xffu ? 1u : 0u) : b); break;
    }
}

void vf_fused_fill_bits(const vf_node *nd, uint32_t *bits)
{
    uint8_t tmp[8] = {0};
    vf_store_f64(tmp, nd->dtype, 0, nd->attrs.value);
    memcpy(bits, tmp, 4);
}

static vf_status elementwise_dag(const vf_graph *g, const vf_group *grp, const vf_shape *shapes,
                                 const vf_device_caps *caps, vf_kernel *k, vf_err *err)
{
    int n_in = grp->n_inputs, n_out = grp->n_outputs;
    if (n_in + n_out > FU_MAX_TENSORS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %d tensors exceed the %d bindings of a kernel",
                          n_in + n_out, FU_MAX_TENSORS);
    if (n_out == 0) {   /* dead code: nothing is needed, nothing runs */
        k->n_steps = 0;
        return VF_OK;
    }
    for (int m = 0; m < grp->n_nodes; m++)
        if (!vf_fusible_elementwise(&g->nodes[grp->nodes[m]]))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "fused group: node %d (%s) is not elementwise",
                              grp->nodes[m], vf_node_name(&g->nodes[grp->nodes[m]]));
    const vf_shape *oshape = &shapes[grp->outputs[0]];
    for (int m = 0; m < grp->n_nodes; m++)
        if (!vf_shape_equal(&shapes[grp->nodes[m]], oshape))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "fused group: members of different shapes");
    const vf_shape *ins[FU_MAX_TENSORS];
    for (int i = 0; i < n_in; i++) ins[i] = &shapes[grp->inputs[i]];
    fu_pattern p;
    collapse(oshape, ins, n_in, &p);
    uint64_t numel = (uint64_t)numel_of(oshape);
    if (numel == 0 || numel > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %llu elements (1 .. 2^32-1 supported)",
                          (unsigned long long)numel);
    bool vec4 = p.ndims == 1 && numel % 4 == 0;
    for (int i = 0; i < n_in; i++) {
        bool scalar = (p.bcast[0] >> i) & 1;
        if (!scalar && !is4(g->nodes[grp->inputs[i]].dtype)) vec4 = false;
    }
    for (int o = 0; o < n_out; o++)
        if (!is4(g->nodes[grp->outputs[o]].dtype)) vec4 = false;

    uint32_t local = cg_clamp_wg(caps, 256, false);   /* WG: a specialisation constant */

    vf_exec fake;   /* cg_* name the op in messages */
    memset(&fake, 0, sizeof fake);
    fake.op = g->nodes[grp->nodes[0]].op;
    k->n_steps = 1;
    vf_cg cg;
    cg_begin(&cg, &fake, caps, err, &k->step[0]);
    vf_dispatch *d = cg.d;
    cg_workgroup(&cg, local);

    /* name: fused_<first ops>, then pattern tags; the comment lists all */
    int nl = snprintf(d->name, sizeof d->name, "fused%d", grp->n_nodes);
    for (int m = 0; m < grp->n_nodes && nl < 40; m++)
        nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "_%s", vf_node_name(&g->nodes[grp->nodes[m]]));
    if (nl > 40) nl = 40;
    snprintf(d->name + nl, sizeof d->name - (size_t)nl, "%s", vec4 ? "_v4" : p.ndims > 1 ? "_bc" : "");
    int cl = snprintf(cg.comment, sizeof cg.comment, "fused elementwise DAG of %d ops, %d in, %d out, %d dim(s)%s:",
                      grp->n_nodes, n_in, n_out, p.ndims, vec4 ? ", vec4" : "");
    for (int m = 0; m < grp->n_nodes && cl < (int)sizeof cg.comment - 24; m++)
        cl += snprintf(cg.comment + cl, sizeof cg.comment - (size_t)cl, " %s", vf_node_name(&g->nodes[grp->nodes[m]]));

    for (int i = 0; i < n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        bool scalar = (p.bcast[0] >> i) & 1 && p.ndims == 1;
        cg_bind(&cg, VF_BIND_GROUP + i, g->nodes[grp->inputs[i]].dtype, nm, true, vec4 && !scalar);
    }
    for (int o = 0; o < n_out; o++) {
        char nm[16];
        snprintf(nm, sizeof nm, "out%d", o);
        cg_bind(&cg, VF_BIND_GROUP + n_in + o, g->nodes[grp->outputs[o]].dtype, nm, false, vec4);
    }
    cg_push_u32(&cg, "numel", (uint32_t)(vec4 ? numel / 4 : numel));
    if (p.ndims > 1)
        for (int dd = 0; dd < p.ndims; dd++) {
            char nm[16];
            snprintf(nm, sizeof nm, "d%d", dd);
            cg_push_u32(&cg, nm, (uint32_t)p.size[dd]);
        }
    if (cg.status) {
        cg_abort(&cg);
        return cg.status;
    }
    uint32_t fills[64] = {0};
    for (int m = 0; m < grp->n_nodes && m < 64; m++)
        if (g->nodes[grp->nodes[m]].op == VF_OP_FILL) vf_fused_fill_bits(&g->nodes[grp->nodes[m]], &fills[m]);
    if (grp->n_nodes > 64) {
        cg_abort(&cg);
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %d ops (at most 64)", grp->n_nodes);
    }
    for (int i = 0; i < n_in; i++) {
        char fn[16], nm[16];
        snprintf(fn, sizeof fn, "ld%d", i);
        snprintf(nm, sizeof nm, "in%d", i);
        vf_dtype dt = g->nodes[grp->inputs[i]].dtype;
        if (!vec4 || ((p.bcast[0] >> i) & 1)) cg_load_fn(&cg, fn, nm, dt, cg_ctype_of(dt));
    }
    for (int o = 0; o < n_out && !vec4; o++) {
        char fn[16], nm[16];
        snprintf(fn, sizeof fn, "st%d", o);
        snprintf(nm, sizeof nm, "out%d", o);
        vf_dtype dt = g->nodes[grp->outputs[o]].dtype;
        cg_store_fn(&cg, fn, nm, dt, cg_ctype_of(dt));
    }
    vf_status st = emit_op_fns(&cg, g, grp, err);
    if (st) {
        cg_abort(&cg);
        return st;
    }

    vf_sb *s = &cg.body;
    uint32_t per_group = local * FU_PER_THREAD;
    vf_sb_add(s, "void main()\n{\n    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n",
              FU_PER_THREAD);
    if (vec4)
        for (int i = 0; i < n_in; i++)
            if ((p.bcast[0] >> i) & 1) {
                vf_dtype dt = g->nodes[grp->inputs[i]].dtype;
                vf_sb_add(s, "    %s x%d = ld%d(0u);   // a single element\n", cg_ctype_name(cg_ctype_of(dt)), i, i);
            }
    vf_sb_add(s, "    [[unroll]] for (uint j = 0u; j < %uu; j++) {\n        uint i = base + j * WG;\n"
                 "        if (i >= pc.numel) return;\n", FU_PER_THREAD);
    if (vec4) {
        static const char *const vt[] = {"vec4", "ivec4", "uvec4", "bvec4"};
        for (int i = 0; i < n_in; i++)
            if (!((p.bcast[0] >> i) & 1))
                vf_sb_add(s, "        %s v%d = in%d[i];\n", vt[cg_ctype_of(g->nodes[grp->inputs[i]].dtype)], i, i);
        for (int o = 0; o < n_out; o++)
            vf_sb_add(s, "        %s r%d;\n", vt[cg_ctype_of(g->nodes[grp->outputs[o]].dtype)], o);
        vf_sb_puts(s, "        [[unroll]] for (int c = 0; c < 4; c++) {\n");
        for (int i = 0; i < n_in; i++)
            if (!((p.bcast[0] >> i) & 1)) {
                vf_dtype dt = g->nodes[grp->inputs[i]].dtype;
                vf_sb_add(s, "            %s x%d = v%d[c];\n", cg_ctype_name(cg_ctype_of(dt)), i, i);
            }
        emit_eval(s, g, grp, "            ", fills);
        for (int o = 0; o < n_out; o++) vf_sb_add(s, "            r%d[c] = t%d;\n", o, grp->outputs[o]);
        vf_sb_puts(s, "        }\n");
        for (int o = 0; o < n_out; o++) vf_sb_add(s, "        out%d[i] = r%d;\n", o, o);
    } else {
        /* broadcast index of every input, innermost collapsed dim first */
        if (n_in > 0 && p.ndims > 1) vf_sb_puts(s, "        uint rest = i;\n");
        for (int kk = 0; kk < n_in; kk++) {
            if (p.ndims > 1) vf_sb_add(s, "        uint idx%d = 0u, sd%d = 1u;\n", kk, kk);
            else vf_sb_add(s, "        uint idx%d = %s;\n", kk, (p.bcast[0] >> kk) & 1 ? "0u" : "i");
        }
        for (int dd = p.ndims - 1; dd >= 0 && p.ndims > 1 && n_in > 0; dd--) {
            if (dd > 0) vf_sb_add(s, "        {   uint c = rest %% pc.d%d; rest /= pc.d%d;\n", dd, dd);
            else vf_sb_puts(s, "        {   uint c = rest;\n");
            for (int kk = 0; kk < n_in; kk++) {
                if ((p.bcast[dd] >> kk) & 1) continue;
                vf_sb_add(s, "            idx%d += c * sd%d;", kk, kk);
                if (dd > 0) vf_sb_add(s, " sd%d *= pc.d%d;", kk, dd);
                vf_sb_puts(s, "\n");
            }
            vf_sb_puts(s, "        }\n");
        }
        for (int kk = 0; kk < n_in; kk++) {
            vf_dtype dt = g->nodes[grp->inputs[kk]].dtype;
            vf_sb_add(s, "        %s x%d = ld%d(idx%d);\n", cg_ctype_name(cg_ctype_of(dt)), kk, kk, kk);
        }
        emit_eval(s, g, grp, "        ", fills);
        /* every load happened above: outputs may alias same-shape inputs */
        for (int o = 0; o < n_out; o++) vf_sb_add(s, "        st%d(i, t%d);\n", o, grp->outputs[o]);
    }
    vf_sb_puts(s, "    }\n}\n");
    uint64_t items = vec4 ? numel / 4 : numel;
    cg_groups_linear(&cg, (items + per_group - 1) / per_group);
    return cg_finish(&cg, NULL);
}

vf_status vf_codegen_group(const vf_graph *g, const vf_group *grp, const vf_shape *shapes,
                           const vf_device_caps *caps, vf_kernel *out, vf_err *err)
{
    memset(out, 0, sizeof *out);
    if (!g || !grp || !shapes || !caps || grp->n_nodes < 1)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "codegen: invalid group");
    vf_status st;
    switch (grp->kind) {
    case VF_GROUP_ELEMENTWISE_DAG: st = elementwise_dag(g, grp, shapes, caps, out, err); break;
    case VF_GROUP_ROW_EPILOGUE: st = vf_codegen_row_group(g, grp, shapes, caps, out, err); break;
    case VF_GROUP_MATMUL_EPILOGUE: st = vf_codegen_matmul_group(g, grp, shapes, caps, out, err); break;
    default:
        st = vf_err_set(err, VF_ERROR_UNSUPPORTED, "codegen: no fused generator for %s groups yet; run its nodes "
                        "one by one", vf_group_kind_name(grp->kind));
    }
    if (st != VF_OK) vf_kernel_free(out);
    return st;
}
