/* vf_codegen_group: one GLSL kernel per fused elementwise DAG
 * (codegen_fused.h), and vf_codegen_single: an eager elementwise op (or
 * FILL) as a DAG of one member, so it has the same GLSL as in a plan.
 *
 * Every invocation evaluates the whole DAG for its output elements: the
 * group's inputs are loaded once (at their broadcast index), each member
 * m becomes one local `tm` computed by a function wrapping its op-table GLSL
 * expression (codegen_member.c; a new op row needs nothing here), and each group output
 * is stored once. Values between members never touch memory.
 *
 * Values are held in the compute type of their dtype (float for f32/f16,
 * int, uint for u32 and for bool as 0/1); a member's result is converted
 * to its dtype's compute type with the cast rules, and f16 results are
 * rounded to f16 after every op, as the CPU backend rounds to storage.
 *
 * Shapes are collapsed by cg_collapse, as for eager ops (size-1 dims dropped,
 * adjacent dims that every input broadcasts alike merged); the broadcast
 * bits are baked in, sizes are push constants. Without broadcasting
 * (inputs of the output's shape, or single elements) and with 4-byte
 * dtypes the kernel moves vec4s, 4 per invocation, workgroup-strided.
 */
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define FU_PER_THREAD 4u
#define FU_MAX_TENSORS VF_KERNEL_MAX_BINDINGS

static bool is4(vf_dtype t) { return t == VF_F32 || t == VF_I32 || t == VF_U32; }

/* The value names inside the evaluation: tM for members, xK for inputs. */
static void value_ref(vf_sb *s, int src, void *user)
{
    (void)user;
    if (src < 0) vf_sb_add(s, "t%d", VF_FUSED_MEMBER(src));
    else vf_sb_add(s, "x%d", src);
}

/* A window member (slice, pad, concat, slice_grad) reads its sources
   (group inputs) at the indices vf_window gives for the output coordinates oc0.. (see
   elementwise_dag): the indexed read of codegen_window.c, with the value
   in the compute type instead of raw bits. */
static void emit_window(vf_sb *s, const vf_fused_group *grp, int m, const bool *wpush, const char *indent)
{
    const vf_exec *e = &grp->execs[m];
    vf_window w;
    vf_window_of(e, &w);   /* checked by window_members_ok */
    for (int q = 0; q < w.n_src; q++) {
        char ok[32], idx[32];
        snprintf(ok, sizeof ok, "w%d_ok%d", m, q);
        snprintf(idx, sizeof idx, "w%d_s%d", m, q);
        char push[24];
        snprintf(push, sizeof push, "w%do%d_", m & 63, q & 1);
        cg_window_source(s, &w, q, "oc", ok, idx, wpush[2 * m + q] ? push : NULL, indent);
    }
    vf_sb_add(s, "%s%s t%d = ", indent, cg_ctype_name(cg_ctype_of(e->out.dtype)), m);
    for (int q = 0; q < w.n_src; q++) {
        bool last = q == w.n_src - 1 && !w.has_fill;
        if (!last) vf_sb_add(s, "w%d_ok%d ? ", m, q);
        vf_sb_add(s, "ld%d(w%d_s%d)%s", grp->members[m].in[q], m, q, last ? "" : " : ");
    }
    if (w.has_fill) cg_fill_literal(s, e);
    vf_sb_add(s, ";   // %s, an indexed read\n", vf_op_get(e->op)->name);
}

/* Whether every window member reads group inputs (not member values: an
   indexed read needs memory) through a window that fits the kernel's
   32-bit index arithmetic; marks the inputs that only they read. */
static vf_status window_members_ok(const vf_fused_group *grp, bool *win_only, bool *any, vf_err *err)
{
    bool direct_read[FU_MAX_TENSORS] = {false};
    *any = false;
    for (int m = 0; m < grp->n_members; m++) {
        const vf_exec *e = &grp->execs[m];
        bool win = cg_window_op(e->op);
        /* a window's sources are its first inputs (slice_grad's second only gives a shape) */
        int n_src = e->op == VF_OP_CONCAT ? 2 : 1;
        for (int k = 0; k < e->n_in && k < 3; k++) {
            int src = grp->members[m].in[k];
            if (win && k >= n_src) continue;
            if (win && src < 0)
                return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %s member %d reads a member value; "
                                  "an indexed read needs a group input", vf_op_get(e->op)->name, m);
            if (src >= 0 && src < FU_MAX_TENSORS) {
                if (win) win_only[src] = true;
                else direct_read[src] = true;
            }
        }
        if (!win) continue;
        *any = true;
        vf_window w;
        if (!vf_window_of(e, &w))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "fused group: %s member %d: shapes do not match its "
                              "attributes", vf_op_get(e->op)->name, m);
        vf_status st = cg_window_check(e, &w, err);
        if (st != VF_OK) return st;
    }
    for (int k = 0; k < grp->n_inputs && k < FU_MAX_TENSORS; k++) win_only[k] = win_only[k] && !direct_read[k];
    return VF_OK;
}

/* Evaluates the members in order, from the loaded inputs x0.. into tM.
   A FILL member whose value is the push constant fillM (pushed) reads it
   there, so the GLSL does not depend on the value. A member only stored
   (direct, see elementwise_dag) keeps its op's result type, or a FILL its
   bits: its store converts once, as an unfused kernel does. */
static void emit_eval(vf_sb *s, const vf_fused_group *grp, const char *indent, const bool *pushed,
                      const bool *direct, const bool *wpush)
{
    for (int m = 0; m < grp->n_members; m++) {
        const vf_exec *e = &grp->execs[m];
        bool fill = e->op == VF_OP_FILL, raw = direct && direct[m];
        if (cg_window_op(e->op)) {
            emit_window(s, grp, m, wpush, indent);
            continue;
        }
        if (raw && !fill) {
            vf_sb_add(s, "%s%s t%d = ", indent, cg_ctype_name(cg_member_result(e)), m);
            cg_member_call(s, grp, m, value_ref, NULL);
            vf_sb_add(s, ";   // %s\n", vf_op_get(e->op)->name);
        } else if (raw) {
            vf_sb_add(s, "%suint t%d = pc.fill%d;   // fill, its bits\n", indent, m, m);
        } else if (pushed[m]) {
            cg_member_eval(s, grp, m, indent, value_ref, NULL, pushed);
        } else {
            cg_member_eval(s, grp, m, indent, value_ref, NULL, NULL);
        }
    }
}

/* The name of a one-member kernel, as eager kernels are named: the op,
   the dtypes, then "_v4" or which dims each input broadcasts ("_b01_10"). */
static void single_name(char *name, size_t size, const vf_fused_group *grp, const cg_pattern *p, bool vec4)
{
    const vf_exec *e = &grp->execs[0];
    int n_in = grp->n_inputs, nl = snprintf(name, size, "%s", vf_op_get(e->op)->name), max = (int)size - 1;
    vf_dtype last = (vf_dtype)-1;
    for (int i = 0; i < n_in && nl < max; i++) {
        if (grp->tensors[i].dtype != last)
            nl += snprintf(name + nl, size - (size_t)nl, "_%s", cg_dtype_tag(grp->tensors[i].dtype));
        last = grp->tensors[i].dtype;
    }
    if (grp->tensors[n_in].dtype != last && nl < max)
        nl += snprintf(name + nl, size - (size_t)nl, "_%s", cg_dtype_tag(grp->tensors[n_in].dtype));
    bool any_b = false;
    for (int dd = 0; dd < p->ndims; dd++) any_b |= p->bcast[dd] != 0;
    if (vec4 && nl < max) {
        snprintf(name + nl, size - (size_t)nl, "_v4");
    } else if (any_b && n_in > 0) {
        for (int i = 0; i < n_in && nl < max; i++) {
            nl += snprintf(name + nl, size - (size_t)nl, i ? "_" : "_b");
            for (int dd = 0; dd < p->ndims && nl < max; dd++)
                nl += snprintf(name + nl, size - (size_t)nl, "%d", (int)((p->bcast[dd] >> i) & 1));
        }
    }
}

static vf_status elementwise_dag(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    int n_in = grp->n_inputs, n_out = grp->n_outputs;
    if (n_in + n_out > FU_MAX_TENSORS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %d tensors exceed the %d bindings of a kernel",
                          n_in + n_out, FU_MAX_TENSORS);
    if (n_out == 0) {   /* dead code: nothing is needed, nothing runs */
        k->n_steps = 0;
        return VF_OK;
    }
    const vf_tref *oshape = &grp->tensors[n_in];
    for (int m = 0; m < grp->n_members; m++) {
        const vf_exec *e = &grp->execs[m];
        if (!cg_member_op(e->op) && !cg_window_op(e->op))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "fused group: member %d (%s) is not elementwise", m,
                              vf_op_get(e->op)->name);
        bool splat = e->op == VF_OP_FILL && grp->members[m].out < 0;   /* a literal: any shape */
        if (!splat &&
            (e->out.rank != oshape->rank || memcmp(e->out.shape, oshape->shape, sizeof(int64_t) * (size_t)oshape->rank)))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "fused group: members of different shapes");
    }
    bool win_only[FU_MAX_TENSORS] = {false}, any_win;
    vf_status wst = window_members_ok(grp, win_only, &any_win, err);
    if (wst != VF_OK) return wst;
    /* inputs only window members read are indexed by them: out of the
       broadcast pattern (a single element to it) */
    const vf_tref *ins[FU_MAX_TENSORS];
    vf_tref one = {.rank = 0};
    for (int i = 0; i < n_in; i++) ins[i] = win_only[i] ? &one : &grp->tensors[i];
    cg_pattern p;
    cg_collapse(oshape, ins, n_in, &p);
    uint64_t numel = (uint64_t)cg_numel(oshape);
    if (numel == 0 || numel > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %llu elements (1 .. 2^32-1 supported)",
                          (unsigned long long)numel);
    /* vec4: every tensor but single elements moved as vec4s (4-byte
       dtypes at 16-byte aligned offsets) */
    bool vec4 = p.ndims == 1 && numel % 4 == 0 && !any_win;
    for (int i = 0; i < n_in; i++) {
        bool scalar = (p.bcast[0] >> i) & 1;
        if (!scalar && (!is4(grp->tensors[i].dtype) || grp->tensors[i].offset % 16 != 0)) vec4 = false;
    }
    for (int o = 0; o < n_out; o++)
        if (!is4(grp->tensors[n_in + o].dtype) || grp->tensors[n_in + o].offset % 16 != 0) vec4 = false;

    uint32_t local = cg_clamp_wg(caps, 256, false);   /* WG: a specialisation constant */

    vf_exec fake;   /* cg_* name the op in messages */
    memset(&fake, 0, sizeof fake);
    fake.op = grp->execs[0].op;
    k->n_steps = 1;
    vf_cg cg;
    cg_begin(&cg, &fake, caps, err, &k->step[0]);
    vf_dispatch *d = cg.d;
    cg_workgroup(&cg, local);

    /* name: fused_<first ops>, then pattern tags; the comment lists all */
    if (grp->n_members == 1) {
        single_name(d->name, sizeof d->name, grp, &p, vec4);
    } else {
        int nl = snprintf(d->name, sizeof d->name, "fused%d", grp->n_members);
        for (int m = 0; m < grp->n_members && nl < 40; m++)
            nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "_%s", vf_op_get(grp->execs[m].op)->name);
        if (nl > 40) nl = 40;
        snprintf(d->name + nl, sizeof d->name - (size_t)nl, "%s", vec4 ? "_v4" : p.ndims > 1 ? "_bc" : "");
    }
    int cl = snprintf(cg.comment, sizeof cg.comment, "fused elementwise DAG of %d ops, %d in, %d out, %d dim(s)%s:",
                      grp->n_members, n_in, n_out, p.ndims, vec4 ? ", vec4" : "");
    for (int m = 0; m < grp->n_members && cl < (int)sizeof cg.comment - 24; m++)
        cl += snprintf(cg.comment + cl, sizeof cg.comment - (size_t)cl, " %s", vf_op_get(grp->execs[m].op)->name);

    for (int i = 0; i < n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        bool scalar = (p.bcast[0] >> i) & 1 && p.ndims == 1;
        cg_bind(&cg, VF_BIND_GROUP + i, grp->tensors[i].dtype, nm, true, vec4 && !scalar);
    }
    for (int o = 0; o < n_out; o++) {
        char nm[16];
        snprintf(nm, sizeof nm, "out%d", o);
        cg_bind(&cg, VF_BIND_GROUP + n_in + o, grp->tensors[n_in + o].dtype, nm, false, vec4);
    }
    cg_push_u32(&cg, "numel", (uint32_t)(vec4 ? numel / 4 : numel));
    if (p.ndims > 1)
        for (int dd = 0; dd < p.ndims; dd++) {
            char nm[16];
            snprintf(nm, sizeof nm, "d%d", dd);
            cg_push_u32(&cg, nm, (uint32_t)p.size[dd]);
        }
    if (grp->n_members > 64) {
        cg_abort(&cg);
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "fused group: %d ops (at most 64)", grp->n_members);
    }
    /* fill values as push constants while there is room (cg_push_fills) */
    bool pushed[CG_MAX_MEMBERS] = {false};
    cg_push_fills(&cg, grp, pushed);
    /* window members' offsets likewise, while there is room */
    bool wpush[128] = {false};
    for (int m = 0; m < grp->n_members; m++) {
        vf_window w;
        if (!cg_window_op(grp->execs[m].op) || !vf_window_of(&grp->execs[m], &w)) continue;
        for (int q = 0; q < w.n_src; q++)
            if (cg.n_push + w.rank + 1 <= CG_MAX_PUSH_FIELDS) {
                char nm[24];
                snprintf(nm, sizeof nm, "w%do%d_", m & 63, q & 1);
                cg_window_push(&cg, &w, q, nm);
                wpush[2 * m + q] = true;
            }
    }
    if (cg.status) {
        cg_abort(&cg);
        return cg.status;
    }
    /* vec4: only the broadcast (scalar) inputs are read one by one */
    cg_group_loads(&cg, grp, vec4 ? ~(uint64_t)p.bcast[0] : 0);
    /* direct: a member that is stored and read by no other member skips
       the conversion to its dtype's compute type (f16: a second rounding
       in software); its store converts from what it holds */
    bool direct[64] = {false};
    for (int m = 0; m < grp->n_members && !vec4; m++) {
        bool read = false;
        for (int q = m + 1; q < grp->n_members; q++)
            for (int j = 0; j < 3; j++) read |= j < grp->execs[q].n_in && grp->members[q].in[j] == VF_FUSED_MEMBER(m);
        direct[m] = grp->members[m].out >= 0 && !read && (grp->execs[m].op != VF_OP_FILL || pushed[m]) &&
                    !cg_window_op(grp->execs[m].op);
    }
    for (int o = 0; o < n_out && !vec4; o++) {
        char fn[16], nm[16];
        snprintf(fn, sizeof fn, "st%d", o);
        snprintf(nm, sizeof nm, "out%d", o);
        vf_dtype dt = grp->tensors[n_in + o].dtype;
        int m = cg_output_member(grp, o);
        const vf_exec *e = &grp->execs[m];
        if (!direct[m]) {
            cg_store_fn(&cg, fn, nm, dt, cg_ctype_of(dt));
        } else if (e->op != VF_OP_FILL) {
            cg_store_fn(&cg, fn, nm, dt, cg_member_result(e));
        } else {   /* a fill's bits, as stored */
            static const char *const as[] = {[VF_F32] = "uintBitsToFloat(v)", [VF_F16] = "uint16_t(v)",
                                             [VF_I32] = "int(v)", [VF_U32] = "v", [VF_BOOL] = "uint8_t(v)"};
            vf_sb_add(&cg.decl, "void %s(uint i, uint v) { %s[i] = %s; }\n", fn, nm, as[dt]);
        }
    }
    for (int m = 0; m < grp->n_members; m++) {
        vf_status st = cg_member_fn(&cg.decl, grp, m, err);
        if (st) {
            cg_abort(&cg);
            return st;
        }
    }

    vf_sb *s = &cg.body;
    uint32_t per_group = local * FU_PER_THREAD;
    vf_sb_add(s, "void main()\n{\n    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n",
              FU_PER_THREAD);
    if (vec4)
        for (int i = 0; i < n_in; i++)
            if ((p.bcast[0] >> i) & 1) {
                vf_dtype dt = grp->tensors[i].dtype;
                vf_sb_add(s, "    %s x%d = ld%d(0u);   // a single element\n", cg_ctype_name(cg_ctype_of(dt)), i, i);
            }
    vf_sb_add(s, "    [[unroll]] for (uint j = 0u; j < %uu; j++) {\n        uint i = base + j * WG;\n"
                 "        if (i >= pc.numel) return;\n", FU_PER_THREAD);
    if (vec4) {
        static const char *const vt[] = {"vec4", "ivec4", "uvec4", "bvec4"};
        for (int i = 0; i < n_in; i++)
            if (!((p.bcast[0] >> i) & 1))
                vf_sb_add(s, "        %s v%d = in%d[i];\n", vt[cg_ctype_of(grp->tensors[i].dtype)], i, i);
        for (int o = 0; o < n_out; o++)
            vf_sb_add(s, "        %s r%d;\n", vt[cg_ctype_of(grp->tensors[n_in + o].dtype)], o);
        vf_sb_puts(s, "        [[unroll]] for (int c = 0; c < 4; c++) {\n");
        for (int i = 0; i < n_in; i++)
            if (!((p.bcast[0] >> i) & 1)) {
                vf_dtype dt = grp->tensors[i].dtype;
                vf_sb_add(s, "            %s x%d = v%d[c];\n", cg_ctype_name(cg_ctype_of(dt)), i, i);
            }
        emit_eval(s, grp, "            ", pushed, NULL, wpush);
        for (int o = 0; o < n_out; o++) vf_sb_add(s, "            r%d[c] = t%d;\n", o, cg_output_member(grp, o));
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
            vf_dtype dt = grp->tensors[kk].dtype;
            if (!win_only[kk])
                vf_sb_add(s, "        %s x%d = ld%d(idx%d);\n", cg_ctype_name(cg_ctype_of(dt)), kk, kk, kk);
        }
        if (any_win) cg_coords(s, oshape->rank, oshape->shape, "i", "oc", "        ");
        emit_eval(s, grp, "        ", pushed, direct, wpush);
        /* every load happened above: outputs may alias same-shape inputs */
        for (int o = 0; o < n_out; o++) vf_sb_add(s, "        st%d(i, t%d);\n", o, cg_output_member(grp, o));
    }
    vf_sb_puts(s, "    }\n}\n");
    uint64_t items = vec4 ? numel / 4 : numel;
    cg_groups_linear(&cg, (items + per_group - 1) / per_group);
    return cg_finish(&cg, NULL);
}

vf_status vf_codegen_single(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err)
{
    vf_exec x = *e;
    x.n_in = vf_op_get(e->op)->arity;   /* what the op takes, as the other generators read it */
    if (e->op == VF_OP_USER_ELEMENTWISE) x.n_in = e->n_in;   /* its own count (graph/uelem.h) */
    vf_fused_member mem = {.in = {0, 1, 2}, .out = x.n_in};
    vf_tref tens[4];
    for (int i = 0; i < x.n_in; i++) tens[i] = x.in[i];
    tens[x.n_in] = x.out;
    vf_fused_group grp = {.kind = VF_FUSED_ELEMENTWISE, .n_members = 1, .execs = &x, .members = &mem,
                          .center = -1, .n_inputs = x.n_in, .n_outputs = 1, .tensors = tens};
    vf_status st = vf_codegen_group(&grp, caps, out, err);
    for (int i = 0; !st && i < out->n_steps; i++)   /* group tensor t: the exec's input t, then its output */
        for (int j = 0; j < out->step[i].n_bindings; j++) {
            int t = out->step[i].binding[j] - VF_BIND_GROUP;
            out->step[i].binding[j] = t < x.n_in ? VF_BIND_IN0 + t : VF_BIND_OUT;
        }
    return st;
}

vf_status vf_codegen_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err)
{
    memset(out, 0, sizeof *out);
    if (!grp || !grp->execs || !grp->members || !grp->tensors || !caps || grp->n_members < 1)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "codegen: invalid group");
    vf_status st;
    switch (grp->kind) {
    case VF_FUSED_ELEMENTWISE: st = elementwise_dag(grp, caps, out, err); break;
    case VF_FUSED_ROWS: st = vf_codegen_row_group(grp, caps, out, err); break;
    case VF_FUSED_MATMUL: st = vf_codegen_matmul_group(grp, caps, out, err); break;
    case VF_FUSED_CONV: st = vf_codegen_conv_group(grp, caps, out, err); break;
    case VF_FUSED_USER: st = vf_codegen_user_group(grp, caps, out, err); break;
    default:
        st = vf_err_set(err, VF_ERROR_UNSUPPORTED, "codegen: no fused generator for group kind %d; run its execs "
                        "one by one", (int)grp->kind);
    }
    if (st != VF_OK) vf_kernel_free(out);
    return st;
}
