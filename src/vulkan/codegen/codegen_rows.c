/* vf_codegen_row_group: one GLSL kernel per row group (codegen_fused.h,
 * partition.h VF_GROUP_ROW_EPILOGUE).
 *
 * A row group is a small program over a row shape [..., C] seen as
 * [rows, C]: elementwise members, last-axis keepdims reductions (sum, mean,
 * max, min), softmax / log_softmax along the last axis and sparse_xent.
 * One workgroup owns one row. Every member value is one of
 *   - row-wide (W): one value per column; never stored unless it is a group
 *     output, recomputed from the group's inputs in every pass that needs it;
 *   - per-row (S, shape [..., 1], or D, shape [...] after sparse_xent): one
 *     value per row, uniform over the workgroup, held in a local.
 * The members are emitted in node order. A reduction (and each of the two
 * reductions of a softmax / log_softmax / sparse_xent: the max, then the
 * sum of exp(x - max)) is a pass over the row: each invocation evaluates
 * the row-wide cone of the reduced value at its columns (j = lid, lid + WG,
 * ...) and accumulates, then the workgroup combines. Per-row members are
 * evaluated once, right where they appear. A last pass evaluates and
 * stores the row-wide outputs; per-row outputs are stored by invocation 0.
 * Rows that fit (C <= WG * RG_CACHE, the cache length: 128 values per
 * invocation on lavapipe, 4 on GPUs, a run-time branch on pc.cols) take a
 * cached variant:
 * the value each pass reduces is kept per invocation in a local array
 * (at most RG_MAX_CACHES of them) and later passes read it back instead of
 * recomputing its cone. Composed softmax exp(x - max(x)) / sum(...) then
 * reads x once, computes one exp per element and writes once; longer rows
 * recompute (x read three times, two exps), like shaders/softmax.glsl.
 *
 * Combining: on lavapipe (caps->is_cpu) the workgroup is one subgroup (8
 * lanes) and every combine is one subgroup op, no barrier (each barrier is
 * a coroutine switch in llvmpipe); on GPUs 256 invocations combine with
 * subgroup ops and shared memory between subgroups, or with a shared-memory
 * tree where subgroup arithmetic is missing. WG, SG and RG_CACHE are
 * specialisation constants (kernel.h): the GLSL is the same for every
 * device limit, WG == SG picks the one-subgroup combine when the pipeline
 * is made. max / min combine the
 * order-preserving keys of the prelude (vf_key_f) so NaN propagates as in
 * the CPU backend; sums are float; mean divides by C.
 *
 * Inputs are read at row * rs + col * cs with rs in {0, 1, C} and cs in
 * {0, 1} (partition.h vf_row_input_index): the strides are pattern bits,
 * the sizes (rows, C) push constants, so one pipeline serves every batch.
 */
#include "vulkan/codegen/codegen_fused.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define RG_MAX_MEMBERS 64

enum { CL_W = 'W', CL_S = 'S', CL_D = 'D' };

typedef struct {
    const vf_graph *g;
    const vf_group *grp;
    const vf_shape *shapes;
    vf_shape row;
    char cls[RG_MAX_MEMBERS];
    bool used_w[VF_KERNEL_MAX_BINDINGS];   /* input read in a row-wide context */
    bool used_s[VF_KERNEL_MAX_BINDINGS];   /* input read in a per-row context */
    vf_err *err;
    /* the cached variant: values reduced by a pass are kept per invocation
       in cv<v>[RG_CACHE] (column lid + jj * WG) for the later passes */
    bool cached_mode, use_cache;
    bool cached[RG_MAX_MEMBERS + VF_KERNEL_MAX_BINDINGS];   /* members, then inputs */
    int n_cache;
    int n_loops;                 /* loops over the row in the uncached body */
} rg;

#define RG_MAX_CACHES 3

static bool is_reduction(vf_op op)
{
    return op == VF_OP_REDUCE_SUM || op == VF_OP_REDUCE_MEAN || op == VF_OP_REDUCE_MAX || op == VF_OP_REDUCE_MIN;
}

static bool is_row_op(vf_op op) { return op == VF_OP_SOFTMAX || op == VF_OP_LOG_SOFTMAX || op == VF_OP_SPARSE_XENT; }

static int row_in(const vf_node *nd) { return vf_op_data_input(nd->op); }

/* Classifies every member and checks what the generator relies on. */
static vf_status classify(rg *r)
{
    const vf_graph *g = r->g;
    const vf_group *grp = r->grp;
    int R = r->row.rank;
    uint64_t rows = 1, cols = (uint64_t)r->row.dim[R - 1];
    for (int d = 0; d + 1 < R; d++) rows *= (uint64_t)r->row.dim[d];
    if (rows * cols == 0 || rows * cols > UINT32_MAX)
        return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %llu x %llu elements (1 .. 2^32-1 supported)",
                          (unsigned long long)rows, (unsigned long long)cols);
    for (int m = 0; m < grp->n_nodes; m++) {
        int v = grp->nodes[m];
        const vf_node *nd = &g->nodes[v];
        if (nd->kind != VF_NODE_OP)
            return vf_err_set(r->err, VF_ERROR_INVALID_ARGUMENT, "row group: node %d is not an op", v);
        char c;
        if (is_reduction(nd->op) || is_row_op(nd->op)) {
            const vf_shape *x = &r->shapes[nd->in[row_in(nd)]];
            int xm = vf_group_member_index(grp, nd->in[row_in(nd)]);
            if (!vf_shape_equal(x, &r->row) || !vf_dtype_is_float(g->nodes[nd->in[row_in(nd)]].dtype) ||
                (xm >= 0 && r->cls[xm] != CL_W && cols > 1))
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (node %d) does not reduce a row of the "
                                  "group's row shape", vf_node_name(nd), v);
            if (is_reduction(nd->op) && (!nd->attrs.keepdims || nd->attrs.axes_mask != 1u << (R - 1)))
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (node %d) is not a last-axis "
                                  "keepdims reduction", vf_node_name(nd), v);
            if ((nd->op == VF_OP_SOFTMAX || nd->op == VF_OP_LOG_SOFTMAX) && nd->attrs.axis != R - 1)
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (node %d) not along the last axis",
                                  vf_node_name(nd), v);
            if (nd->op == VF_OP_SPARSE_XENT && g->nodes[nd->in[0]].dtype != VF_I32 &&
                g->nodes[nd->in[0]].dtype != VF_U32)
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: sparse_xent labels must be i32 / u32");
            c = is_reduction(nd->op) ? CL_S : nd->op == VF_OP_SPARSE_XENT ? CL_D : CL_W;
        } else if (vf_fusible_elementwise(nd)) {
            bool any_w = false, any_d = false;
            for (int k = 0; k < nd->n_in; k++) {
                int pm = vf_group_member_index(grp, nd->in[k]);
                if (pm >= 0) any_w |= r->cls[pm] == CL_W, any_d |= r->cls[pm] == CL_D;
            }
            vf_row_class rc = vf_row_classify(&r->shapes[v], &r->row);
            if (rc == VF_ROW_NONE)
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (node %d) is not over the group's rows",
                                  vf_node_name(nd), v);
            if (any_w || (rc == VF_ROW_WIDE && cols > 1)) c = CL_W;
            else if (any_d || rc == VF_ROW_DROPPED) c = CL_D;
            else c = CL_S;
        } else {
            return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (node %d) cannot be a member",
                              vf_node_name(nd), v);
        }
        r->cls[m] = c;
        /* external inputs, and the contexts they are read in */
        for (int k = 0; k < nd->n_in; k++) {
            int t = vf_group_input_index(grp, nd->in[k]);
            if (t < 0) continue;
            bool wide = c == CL_W || ((is_reduction(nd->op) || is_row_op(nd->op)) && k == row_in(nd));
            vf_row_class where = wide ? VF_ROW_WIDE : c == CL_D ? VF_ROW_DROPPED : VF_ROW_SCALAR;
            uint32_t rs, cs;
            if (!vf_row_input_index(&r->shapes[nd->in[k]], &r->row, where, &rs, &cs))
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: input %d of %s (node %d) broadcasts "
                                  "over part of the rows", k, vf_node_name(nd), v);
            if (wide) r->used_w[t] = true;
            else r->used_s[t] = true;
        }
    }
    return VF_OK;
}

static bool *cache_slot(rg *r, int v)
{
    int m = vf_group_member_index(r->grp, v);
    if (m >= 0) return &r->cached[m];
    int t = vf_group_input_index(r->grp, v);
    return t >= 0 ? &r->cached[RG_MAX_MEMBERS + t] : NULL;
}

static bool is_cached(const rg *r, int v)
{
    if (!r->cached_mode || !r->use_cache) return false;
    bool *c = cache_slot((rg *)r, v);
    return c && *c;
}

/* Index expression of input t in a context (row-wide: column j). */
static void input_index_expr(vf_sb *s, const rg *r, int t, bool wide)
{
    uint32_t rs, cs;
    vf_row_class where = wide ? VF_ROW_WIDE : VF_ROW_SCALAR;
    const vf_shape *in = &r->shapes[r->grp->inputs[t]];
    if (!wide && !vf_row_input_index(in, &r->row, where, &rs, &cs))
        vf_row_input_index(in, &r->row, VF_ROW_DROPPED, &rs, &cs);
    else
        vf_row_input_index(in, &r->row, where, &rs, &cs);
    if (rs == 0 && !(wide && cs)) vf_sb_puts(s, "0u");
    else if (rs == 0) vf_sb_puts(s, "j");
    else vf_sb_add(s, "row%s%s", rs == 1 ? "" : " * pc.cols", wide && cs ? " + j" : "");
}

/* Reference to value v: member tN, else the loaded input (xK row-wide,
   sK per row). */
static void ref(vf_sb *s, const rg *r, int v, bool wide)
{
    if (wide && is_cached(r, v)) vf_sb_add(s, "cv%d[jj]", v);
    else if (vf_group_member_index(r->grp, v) >= 0) vf_sb_add(s, "t%d", v);
    else vf_sb_add(s, "%s%d", wide ? "x" : "s", vf_group_input_index(r->grp, v));
}

/* `CT tN = ...;` for elementwise member v. */
static void emit_elementwise(vf_sb *s, const rg *r, int v, bool wide, const char *ind, const uint32_t *fill)
{
    const vf_graph *g = r->g;
    const vf_node *nd = &g->nodes[v];
    const vf_op_info *info = vf_op_get(nd->op);
    vf_sb_add(s, "%s%s t%d = ", ind, cg_ctype_name(cg_ctype_of(nd->dtype)), v);
    if (nd->op == VF_OP_FILL) {
        vf_fused_fill_literal(s, nd->dtype, fill[vf_group_member_index(r->grp, v)]);
        vf_sb_puts(s, ";   // fill\n");
        return;
    }
    vf_sb call = {0};
    vf_sb_add(&call, "op_%d(", v);
    for (int k = 0; k < nd->n_in; k++) {
        int p = nd->in[k];
        vf_dtype pdt = g->nodes[p].dtype;
        if (k) vf_sb_puts(&call, ", ");
        if (vf_op_input_is_cond(nd->op, k)) {
            vf_sb_puts(&call, "(");
            ref(&call, r, p, wide);
            vf_sb_puts(&call, vf_dtype_is_float(pdt) ? " != 0.0)" : pdt == VF_I32 ? " != 0)" : " != 0u)");
        } else {
            ref(&call, r, p, wide);
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

/* Evaluates, at column j, the row-wide members that `need` asks for (and
   what they read), loading the row-wide inputs they use first. */
static void emit_cone(vf_sb *s, const rg *r, bool *need, const char *ind, const uint32_t *fill)
{
    const vf_graph *g = r->g;
    const vf_group *grp = r->grp;
    bool load[VF_KERNEL_MAX_BINDINGS] = {false};
    for (int m = grp->n_nodes - 1; m >= 0; m--) {
        if (!need[m]) continue;
        const vf_node *nd = &g->nodes[grp->nodes[m]];
        for (int k = 0; k < nd->n_in; k++) {
            if (vf_op_input_is_index(nd->op, k)) continue;
            if (is_cached(r, nd->in[k])) continue;
            int pm = vf_group_member_index(grp, nd->in[k]);
            if (pm >= 0 && r->cls[pm] == CL_W) need[pm] = true;
            int t = vf_group_input_index(grp, nd->in[k]);
            if (t >= 0 && (r->cls[m] == CL_W || k == row_in(nd))) load[t] = true;
        }
    }
    for (int t = 0; t < grp->n_inputs; t++)
        if (load[t]) {
            vf_dtype dt = g->nodes[grp->inputs[t]].dtype;
            vf_sb_add(s, "%s%s x%d = ld%d(", ind, cg_ctype_name(cg_ctype_of(dt)), t, t);
            input_index_expr(s, r, t, true);
            vf_sb_puts(s, ");\n");
        }
    for (int m = 0; m < grp->n_nodes; m++) {
        if (!need[m] || r->cls[m] != CL_W || is_cached(r, grp->nodes[m])) continue;
        int v = grp->nodes[m];
        const vf_node *nd = &g->nodes[v];
        if (nd->op == VF_OP_SOFTMAX || nd->op == VF_OP_LOG_SOFTMAX) {
            vf_sb ex = {0};
            vf_sb_puts(&ex, nd->op == VF_OP_SOFTMAX ? "exp(" : "(");
            ref(&ex, r, nd->in[0], true);
            vf_sb_add(&ex, nd->op == VF_OP_SOFTMAX ? " - m%d) * inv%d" : " - lse%d)", v, v);
            vf_sb_add(s, "%sfloat t%d = ", ind, v);
            if (ex.oom) s->oom = true;
            vf_fused_to_ctype(s, nd->dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_add(s, ";   // %s\n", vf_node_name(nd));
        } else if (nd->op != VF_OP_SPARSE_XENT && !is_reduction(nd->op)) {
            emit_elementwise(s, r, v, true, ind, fill);
        }
    }
}

/* The loop over this invocation's columns j of the row. */
static void loop_begin(vf_sb *s, rg *r)
{
    if (r->cached_mode)
        vf_sb_puts(s, "    [[unroll]] for (uint jj = 0u; jj < RG_CACHE; jj++) {\n        uint j = lid + jj * WG;\n"
                     "        if (j >= pc.cols) continue;\n");
    else {
        vf_sb_puts(s, "    for (uint j = lid; j < pc.cols; j += WG) {\n");
        r->n_loops++;
    }
}

/* One pass over the row: acc (declared by the caller) combined with
   `update` (printf-style with the value's reference as %s) of value x.
   In the cached variant x is kept for later passes (at most
   RG_MAX_CACHES values), or read back when an earlier pass kept it. */
static void emit_pass(vf_sb *s, rg *r, int x, const char *acc, const char *update, const uint32_t *fill)
{
    bool need[RG_MAX_MEMBERS] = {false};
    int xm = vf_group_member_index(r->grp, x);
    bool was = is_cached(r, x), keep = r->cached_mode && !was && r->n_cache < RG_MAX_CACHES;
    if (keep) vf_sb_add(s, "    float cv%d[RG_CACHE];\n", x);
    loop_begin(s, r);
    if (was) {
        /* read back below */
    } else if (xm < 0) {   /* an input reduced directly */
        int t = vf_group_input_index(r->grp, x);
        vf_dtype dt = r->g->nodes[x].dtype;
        vf_sb_add(s, "        %s x%d = ld%d(", cg_ctype_name(cg_ctype_of(dt)), t, t);
        input_index_expr(s, r, t, true);
        vf_sb_puts(s, ");\n");
    } else {
        need[xm] = true;
        emit_cone(s, r, need, "        ", fill);
    }
    vf_sb val = {0};
    ref(&val, r, x, true);
    if (keep) vf_sb_add(s, "        cv%d[jj] = %s;\n", x, val.buf ? val.buf : "");
    vf_sb_add(s, "        %s = ", acc);
    vf_sb_add(s, update, val.buf ? val.buf : "");
    vf_sb_puts(s, ";\n    }\n");
    if (val.oom) s->oom = true;
    vf_sb_free(&val);
    if (keep) {
        *cache_slot(r, x) = true;
        r->n_cache++;
    }
}

/* The max and the sum of exp(x - max) of row-op member v's row: mN, sumN. */
static void emit_max_sum(vf_sb *s, rg *r, int v, const uint32_t *fill)
{
    int x = r->g->nodes[v].in[row_in(&r->g->nodes[v])];
    char acc[32], upd[64];
    vf_sb_add(s, "    uint mk%d = 0u;\n", v);
    snprintf(acc, sizeof acc, "mk%d", v);
    snprintf(upd, sizeof upd, "max(mk%d, vf_key_f(%%s, true))", v);
    emit_pass(s, r, x, acc, upd, fill);
    vf_sb_add(s, "    float m%d = vf_unkey_f(vf_wg_umax(mk%d));\n    float sa%d = 0.0;\n", v, v, v);
    snprintf(acc, sizeof acc, "sa%d", v);
    snprintf(upd, sizeof upd, "sa%d + exp(%%s - m%d)", v, v);
    emit_pass(s, r, x, acc, upd, fill);
    vf_sb_add(s, "    float sum%d = vf_wg_fsum(sa%d);\n", v, v);
}

/* The workgroup combines: each returns the combined value to every lane.
   With subgroup ops: one subgroup op when the workgroup is one subgroup
   (WG == SG, specialisation constants: folded when the pipeline is made),
   else subgroups then shared memory; without: a shared-memory tree. */
static void emit_wg_fn(vf_sb *s, const char *T, const char *name, const char *part, const char *sub,
                       const char *comb, const char *id, bool subgroup)
{
    vf_sb_add(s, "%s %s(%s v)\n{\n", T, name, T);
    if (subgroup) {
        vf_sb_add(s, "    if (WG == SG) return %s(v);\n", sub);
        vf_sb_add(s, "    v = %s(v);\n    if (subgroupElect()) %s[gl_SubgroupID] = v;\n    barrier();\n"
                     "    v = %s;\n    for (uint s = 0u; s < gl_NumSubgroups; s++) v = ", sub, part, id);
        vf_sb_add(s, comb, "v", part, "[s]");
        vf_sb_puts(s, ";\n    barrier();\n    return v;\n}\n");
    } else {
        vf_sb_add(s, "    uint lid = gl_LocalInvocationID.x;\n    %s[lid] = v;\n    barrier();\n"
                     "    for (uint s = WG / 2u; s > 0u; s >>= 1) {\n        if (lid < s) %s[lid] = ", part, part);
        char a[32], b[32];
        snprintf(a, sizeof a, "%s[lid]", part);
        snprintf(b, sizeof b, "%s[lid + s]", part);
        vf_sb_add(s, comb, a, b, "");
        vf_sb_add(s, ";\n        barrier();\n    }\n    v = %s[0];\n    barrier();\n    return v;\n}\n", part);
    }
}

/* The members in node order, then the stores (see the file comment). */
static void emit_body(vf_sb *s, rg *r, const uint32_t *fill)
{
    const vf_graph *g = r->g;
    const vf_group *grp = r->grp;
    int n_out = grp->n_outputs;
    for (int m = 0; m < grp->n_nodes; m++) {
        int v = grp->nodes[m];
        const vf_node *nd = &g->nodes[v];
        vf_sb_add(s, "    // node %d: %s [%c]\n", v, vf_node_name(nd), r->cls[m]);
        if (is_reduction(nd->op)) {
            bool key = nd->op == VF_OP_REDUCE_MAX || nd->op == VF_OP_REDUCE_MIN;
            bool mx = nd->op == VF_OP_REDUCE_MAX;
            char acc[32], upd[64];
            snprintf(acc, sizeof acc, "a%d", v);
            if (key) {
                vf_sb_add(s, "    uint a%d = %s;\n", v, mx ? "0u" : "0xffffffffu");
                snprintf(upd, sizeof upd, "%s(a%d, vf_key_f(%%s, %s))", mx ? "max" : "min", v, mx ? "true" : "false");
            } else {
                vf_sb_add(s, "    float a%d = 0.0;\n", v);
                snprintf(upd, sizeof upd, "a%d + %%s", v);
            }
            emit_pass(s, r, nd->in[0], acc, upd, fill);
            vf_sb ex = {0};
            if (key) vf_sb_add(&ex, "vf_unkey_f(vf_wg_u%s(a%d))", mx ? "max" : "min", v);
            else if (nd->op == VF_OP_REDUCE_MEAN) vf_sb_add(&ex, "(vf_wg_fsum(a%d) / float(pc.cols))", v);
            else vf_sb_add(&ex, "vf_wg_fsum(a%d)", v);
            vf_sb_add(s, "    float t%d = ", v);
            if (ex.oom) s->oom = true;
            vf_fused_to_ctype(s, nd->dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_puts(s, ";\n");
        } else if (nd->op == VF_OP_SOFTMAX || nd->op == VF_OP_LOG_SOFTMAX) {
            emit_max_sum(s, r, v, fill);
            if (nd->op == VF_OP_SOFTMAX) vf_sb_add(s, "    float inv%d = 1.0 / sum%d;\n", v, v);
            else vf_sb_add(s, "    float lse%d = m%d + log(sum%d);\n", v, v, v);
        } else if (nd->op == VF_OP_SPARSE_XENT) {
            emit_max_sum(s, r, v, fill);
            /* loss = logsumexp(row) - row[label]; NaN for a label outside [0, C) */
            vf_dtype ldt = g->nodes[nd->in[0]].dtype;
            vf_sb_add(s, "    float t%d;\n    {\n        %s l = ", v, ldt == VF_I32 ? "int" : "uint");
            ref(s, r, nd->in[0], false);
            vf_sb_add(s, ";\n        bool ok = %suint(l) < pc.cols;\n        uint j = ok ? uint(l) : 0u;\n",
                      ldt == VF_I32 ? "l >= 0 && " : "");
            bool need[RG_MAX_MEMBERS] = {false}, uc = r->use_cache;
            r->use_cache = false;   /* column `lab` is not this invocation's */
            int x = nd->in[1], xm = vf_group_member_index(grp, x);
            if (xm >= 0) need[xm] = true;
            if (xm >= 0) {
                emit_cone(s, r, need, "        ", fill);
            } else {
                int t = vf_group_input_index(grp, x);
                vf_sb_add(s, "        float x%d = ld%d(", t, t);
                input_index_expr(s, r, t, true);
                vf_sb_puts(s, ");\n");
            }
            vf_sb_add(s, "        float xl = ");
            ref(s, r, x, true);
            r->use_cache = uc;
            vf_sb_add(s, ";\n        t%d = ", v);
            vf_sb ex = {0};
            vf_sb_add(&ex, "(ok ? (m%d + log(sum%d)) - xl : vf_nan())", v, v);
            if (ex.oom) s->oom = true;
            vf_fused_to_ctype(s, nd->dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_puts(s, ";\n    }\n");
        } else if (r->cls[m] != CL_W) {
            emit_elementwise(s, r, v, false, "    ", fill);
        }
    }
    /* stores: row-wide outputs in a last pass, per-row ones by lane 0 */
    bool need[RG_MAX_MEMBERS] = {false}, any_w = false;
    for (int o = 0; o < n_out; o++) {
        int m = vf_group_member_index(grp, grp->outputs[o]);
        if (r->cls[m] == CL_W) need[m] = any_w = true;
    }
    if (any_w) {
        loop_begin(s, r);
        emit_cone(s, r, need, "        ", fill);
        for (int o = 0; o < n_out; o++)
            if (r->cls[vf_group_member_index(grp, grp->outputs[o])] == CL_W) {
                vf_sb_add(s, "        st%d(row * pc.cols + j, ", o);
                ref(s, r, grp->outputs[o], true);
                vf_sb_puts(s, ");\n");
            }
        vf_sb_puts(s, "    }\n");
    }
    for (int o = 0; o < n_out; o++)
        if (r->cls[vf_group_member_index(grp, grp->outputs[o])] != CL_W)
            vf_sb_add(s, "    if (lid == 0u) st%d(row, t%d);\n", o, grp->outputs[o]);
}

vf_status vf_codegen_row_group(const vf_graph *g, const vf_group *grp, const vf_shape *shapes,
                               const vf_device_caps *caps, vf_kernel *k, vf_err *err)
{
    int n_in = grp->n_inputs, n_out = grp->n_outputs;
    if (n_in + n_out > VF_KERNEL_MAX_BINDINGS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "row group: %d tensors exceed the %d bindings of a kernel",
                          n_in + n_out, VF_KERNEL_MAX_BINDINGS);
    if (grp->n_nodes > RG_MAX_MEMBERS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "row group: %d ops (at most %d)", grp->n_nodes, RG_MAX_MEMBERS);
    if (n_out == 0) {
        k->n_steps = 0;
        return VF_OK;
    }
    int center = grp->center;
    if (center < 0 || vf_group_member_index(grp, center) < 0 || g->nodes[center].kind != VF_NODE_OP ||
        !(is_reduction(g->nodes[center].op) || is_row_op(g->nodes[center].op)))
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "row group: center %d is not a row op of the group", center);
    rg r = {.g = g, .grp = grp, .shapes = shapes, .err = err};
    r.row = shapes[g->nodes[center].in[row_in(&g->nodes[center])]];
    if (r.row.rank < 1) return vf_err_set(err, VF_ERROR_UNSUPPORTED, "row group: rank-0 row");
    vf_status st = classify(&r);
    if (st) return st;
    uint64_t rows = 1, cols = (uint64_t)r.row.dim[r.row.rank - 1];
    for (int d = 0; d + 1 < r.row.rank; d++) rows *= (uint64_t)r.row.dim[d];

    uint32_t sg = caps->subgroup_size ? caps->subgroup_size : 1;
    bool subgroup = caps->subgroup_arithmetic;
    /* specialisation constants chosen from the device: the workgroup size
       (one subgroup on CPU devices, else 256 within the limits, a power of
       two for the tree) and the per-invocation cache length */
    uint32_t wg = cg_clamp_wg(caps, caps->is_cpu && subgroup ? sg : 256, !subgroup);
    if (subgroup && wg < sg && cg_clamp_wg(caps, sg, false) == sg) wg = sg;
    uint32_t cache_len = caps->is_cpu ? 128u : 4u;
    /* A row that fits gets just the cache it needs: the cached loops are
       unrolled to RG_CACHE iterations once the constant is applied (the
       caches become registers, not memory indexed per lane). */
    if (cols > 0 && cols <= (uint64_t)wg * cache_len) cache_len = (uint32_t)((cols + wg - 1) / wg);

    vf_exec fake;
    memset(&fake, 0, sizeof fake);
    fake.op = g->nodes[center].op;
    k->n_steps = 1;
    vf_cg cg;
    cg_begin(&cg, &fake, caps, err, &k->step[0]);
    vf_dispatch *d = cg.d;
    int nl = snprintf(d->name, sizeof d->name, "rows%d", grp->n_nodes);
    for (int m = 0; m < grp->n_nodes && nl < 44; m++)
        nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "_%s", vf_node_name(&g->nodes[grp->nodes[m]]));
    if (nl > 44) d->name[44] = '\0';
    int cl = snprintf(cg.comment, sizeof cg.comment,
                      "fused row group of %d ops, %d in, %d out, a workgroup per row (%s):", grp->n_nodes,
                      n_in, n_out, subgroup ? "subgroup ops" : "shared tree");
    for (int m = 0; m < grp->n_nodes && cl < (int)sizeof cg.comment - 24; m++)
        cl += snprintf(cg.comment + cl, sizeof cg.comment - (size_t)cl, " %s[%c]",
                       vf_node_name(&g->nodes[grp->nodes[m]]), r.cls[m]);
    for (int i = 0; i < n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        cg_bind(&cg, VF_BIND_GROUP + i, g->nodes[grp->inputs[i]].dtype, nm, true, false);
    }
    for (int o = 0; o < n_out; o++) {
        char nm[16];
        snprintf(nm, sizeof nm, "out%d", o);
        cg_bind(&cg, VF_BIND_GROUP + n_in + o, g->nodes[grp->outputs[o]].dtype, nm, false, false);
    }
    cg_push_u32(&cg, "n_rows", (uint32_t)rows);
    cg_push_u32(&cg, "cols", (uint32_t)cols);
    if (cg.status) {
        cg_abort(&cg);
        return cg.status;
    }
    for (int i = 0; i < n_in; i++) {
        char fn[16], nm[16];
        snprintf(fn, sizeof fn, "ld%d", i);
        snprintf(nm, sizeof nm, "in%d", i);
        vf_dtype dt = g->nodes[grp->inputs[i]].dtype;
        cg_load_fn(&cg, fn, nm, dt, cg_ctype_of(dt));
    }
    for (int o = 0; o < n_out; o++) {
        char fn[16], nm[16];
        snprintf(fn, sizeof fn, "st%d", o);
        snprintf(nm, sizeof nm, "out%d", o);
        vf_dtype dt = g->nodes[grp->outputs[o]].dtype;
        cg_store_fn(&cg, fn, nm, dt, cg_ctype_of(dt));
    }
    uint32_t fill[RG_MAX_MEMBERS] = {0};
    for (int m = 0; m < grp->n_nodes; m++) {
        const vf_node *nd = &g->nodes[grp->nodes[m]];
        if (nd->op == VF_OP_FILL) vf_fused_fill_bits(nd, &fill[m]);
        if (!vf_fusible_elementwise(nd)) continue;
        st = vf_fused_op_fn(&cg.decl, g, grp->nodes[m], err);
        if (st) {
            cg_abort(&cg);
            return st;
        }
    }
    vf_sb *s = &cg.body;
    cg_workgroup(&cg, wg);
    cg_spec(&cg, "SG", sg);
    cg_spec(&cg, "RG_CACHE", cache_len);
    vf_sb_puts(s, "shared float vf_fpart[WG];\nshared uint vf_upart[WG];\n");
    emit_wg_fn(s, "float", "vf_wg_fsum", "vf_fpart", "subgroupAdd", "%s + %s%s", "0.0", subgroup);
    emit_wg_fn(s, "uint", "vf_wg_umax", "vf_upart", "subgroupMax", "max(%s, %s%s)", "0u", subgroup);
    emit_wg_fn(s, "uint", "vf_wg_umin", "vf_upart", "subgroupMin", "min(%s, %s%s)", "0xffffffffu", subgroup);
    if (subgroup) cg.ext |= CG_EXT_SUBGROUP;

    vf_sb_puts(s, "\nvoid main()\n{\n    uint row = vf_group_id();\n    if (row >= pc.n_rows) return;   // uniform\n"
                  "    uint lid = gl_LocalInvocationID.x;\n");
    for (int t = 0; t < n_in; t++)
        if (r.used_s[t]) {
            vf_dtype dt = g->nodes[grp->inputs[t]].dtype;
            vf_sb_add(s, "    %s s%d = ld%d(", cg_ctype_name(cg_ctype_of(dt)), t, t);
            input_index_expr(s, &r, t, false);
            vf_sb_puts(s, ");\n");
        }
    vf_sb_puts(s, "    if (pc.cols <= WG * RG_CACHE) {   // the row fits in the invocations' caches\n");
    r.cached_mode = r.use_cache = true;
    emit_body(s, &r, fill);
    vf_sb_puts(s, "    } else {\n");
    r.cached_mode = false;
    emit_body(s, &r, fill);
    vf_sb_puts(s, "    }\n");
    vf_sb_puts(s, "}\n");
    /* uncached, every pass loops over the row: a workgroup wide enough
       for the device's loop budget (llvmpipe stops loops silently) */
    uint32_t fit = cg_wg_for_loops(caps, wg, cols, (uint32_t)r.n_loops + 1, !subgroup);
    if (!fit) {
        cg_abort(&cg);
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "row group %s: rows of %llu columns need more loop iterations per invocation than"
                          " this device runs (%u, all loops together)", d->name, (unsigned long long)cols,
                          caps->max_loop_iterations);
    }
    cg_workgroup(&cg, fit);
    cg_groups_linear(&cg, rows);
    return cg_finish(&cg, NULL);
}
