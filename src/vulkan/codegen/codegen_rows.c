/* vf_codegen_row_group: one GLSL kernel per row group (codegen_fused.h,
 * backend.h VF_FUSED_ROWS).
 *
 * A row group is a small program over a row shape [..., C] seen as
 * [rows, C]: elementwise members, last-axis keepdims reductions (sum, mean,
 * max, min, prod, and logsumexp, which takes softmax's two passes),
 * softmax / log_softmax along the last axis and sparse_xent.
 * One workgroup owns one row. Every member value is one of
 *   - row-wide (W): one value per column; never stored unless it is a group
 *     output, recomputed from the group's inputs in every pass that needs it;
 *   - per-row (S, shape [..., 1], or D, shape [...] after sparse_xent): one
 *     value per row, uniform over the workgroup, held in a local.
 * The members are emitted in order. A reduction (and each of the two
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
 * {0, 1} (backend.h vf_row_input_index): the strides are pattern bits,
 * the sizes (rows, C) push constants, so one pipeline serves every batch.
 */
#include "vulkan/codegen/codegen_fused.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define RG_MAX_MEMBERS 64

enum { CL_W = 'W', CL_S = 'S', CL_D = 'D' };

typedef struct {
    const vf_fused_group *grp;
    int row_rank;
    const int64_t *row;          /* the row shape [..., C] */
    char cls[RG_MAX_MEMBERS];
    bool used_w[VF_KERNEL_MAX_BINDINGS];   /* input read in a row-wide context */
    bool used_s[VF_KERNEL_MAX_BINDINGS];   /* input read in a per-row context */
    vf_err *err;
    /* the cached variant: values reduced by a pass are kept per invocation
       in cv<m>[RG_CACHE] (member m) or cvx<t>[RG_CACHE] (input t), column
       lid + jj * WG, for the later passes */
    bool cached_mode, use_cache;
    bool unroll;                 /* the cached loops carry [[unroll]] (rg_unroll) */
    bool cached[RG_MAX_MEMBERS + VF_KERNEL_MAX_BINDINGS];   /* members, then inputs */
    int n_cache;
    int n_loops;                 /* loops over the row in the uncached body */
    bool pushed[CG_MAX_MEMBERS]; /* fills read from push constants (cg_push_fills) */
} rg;

#define RG_MAX_CACHES 3

/* The cached loops run RG_CACHE times (up to 128 on lavapipe); unrolled,
   the caches are registers, but the body is repeated RG_CACHE times and
   llvmpipe compiles it at the first dispatch: a row group of 16 f16 ops
   with tanh, gelu and log unrolled 128 times took LLVM minutes and 3 GB
   (test_differential_limits, f16 seed 51, a CI timeout). So a group whose
   code size (cg_member_cost; a reduction or softmax member 4) times the
   cache length exceeds this keeps its loops rolled: the caches are then
   a local array indexed per lane, the same values. Composed softmax (11)
   and layer norm (about 22) at 128 stay unrolled. */
#define RG_UNROLL_BUDGET 4096u

static bool rg_unroll(const vf_fused_group *grp, uint32_t cache_len)
{
    unsigned cost = 0;
    for (int m = 0; m < grp->n_members; m++)
        cost += cg_member_op(grp->execs[m].op) ? cg_member_cost(grp, m) : 4u;
    return (uint64_t)cost * cache_len <= RG_UNROLL_BUDGET;
}

/* Values are named as vf_fused_member.in names them: a group input t >= 0,
   or VF_FUSED_MEMBER(m). */
static int member_of(int v) { return v < 0 ? VF_FUSED_MEMBER(v) : -1; }
static int input_of(int v) { return v >= 0 ? v : -1; }

static bool is_reduction(vf_op op)
{
    return op == VF_OP_REDUCE_SUM || op == VF_OP_REDUCE_MEAN || op == VF_OP_REDUCE_MAX || op == VF_OP_REDUCE_MIN ||
           op == VF_OP_REDUCE_PROD || op == VF_OP_LOGSUMEXP;
}

static bool is_row_op(vf_op op) { return op == VF_OP_SOFTMAX || op == VF_OP_LOG_SOFTMAX || op == VF_OP_SPARSE_XENT; }

static int row_in(vf_op op) { return vf_op_data_input(op); }

static bool is_row_shape(const rg *r, const vf_tref *t)
{
    if (t->rank != r->row_rank) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] != r->row[d]) return false;
    return true;
}

static const char *op_name(const rg *r, int m) { return vf_op_get(r->grp->execs[m].op)->name; }

/* Classifies every member and checks what the generator relies on. */
static vf_status classify(rg *r)
{
    const vf_fused_group *grp = r->grp;
    int R = r->row_rank;
    uint64_t rows = 1, cols = (uint64_t)r->row[R - 1];
    for (int d = 0; d + 1 < R; d++) rows *= (uint64_t)r->row[d];
    if (rows * cols == 0 || rows * cols > UINT32_MAX)
        return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %llu x %llu elements (1 .. 2^32-1 supported)",
                          (unsigned long long)rows, (unsigned long long)cols);
    for (int m = 0; m < grp->n_members; m++) {
        const vf_exec *e = &grp->execs[m];
        const vf_fused_member *fm = &grp->members[m];
        char c;
        if (is_reduction(e->op) || is_row_op(e->op)) {
            int ri = row_in(e->op), xm = member_of(fm->in[ri]);
            if (!is_row_shape(r, &e->in[ri]) || !vf_dtype_is_float(e->in[ri].dtype) ||
                (xm >= 0 && r->cls[xm] != CL_W && cols > 1))
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (member %d) does not reduce a row of "
                                  "the group's row shape", op_name(r, m), m);
            if (is_reduction(e->op) && (!e->attrs.keepdims || e->attrs.axes_mask != 1u << (R - 1)))
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (member %d) is not a last-axis "
                                  "keepdims reduction", op_name(r, m), m);
            if ((e->op == VF_OP_SOFTMAX || e->op == VF_OP_LOG_SOFTMAX) && e->attrs.axis != R - 1)
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (member %d) not along the last axis",
                                  op_name(r, m), m);
            if (e->op == VF_OP_SPARSE_XENT && e->in[0].dtype != VF_I32 && e->in[0].dtype != VF_U32)
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: sparse_xent labels must be i32 / u32");
            c = is_reduction(e->op) ? CL_S : e->op == VF_OP_SPARSE_XENT ? CL_D : CL_W;
        } else if (e->op == VF_OP_FILL && fm->out < 0) {
            c = CL_S;   /* a literal read by other members: one value for every row, of any shape */
        } else if (cg_member_op(e->op)) {
            bool any_w = false, any_d = false;
            for (int k = 0; k < e->n_in; k++) {
                int pm = member_of(fm->in[k]);
                if (pm >= 0) any_w |= r->cls[pm] == CL_W, any_d |= r->cls[pm] == CL_D;
            }
            vf_row_class rc = vf_row_classify(e->out.rank, e->out.shape, R, r->row);
            if (rc == VF_ROW_NONE)
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (member %d) is not over the group's "
                                  "rows", op_name(r, m), m);
            if (any_w || (rc == VF_ROW_WIDE && cols > 1)) c = CL_W;
            else if (any_d || rc == VF_ROW_DROPPED) c = CL_D;
            else c = CL_S;
        } else {
            return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: %s (member %d) cannot be a member",
                              op_name(r, m), m);
        }
        r->cls[m] = c;
        /* external inputs, and the contexts they are read in */
        for (int k = 0; k < e->n_in; k++) {
            int t = input_of(fm->in[k]);
            if (t < 0) continue;
            bool wide = c == CL_W || ((is_reduction(e->op) || is_row_op(e->op)) && k == row_in(e->op));
            vf_row_class where = wide ? VF_ROW_WIDE : c == CL_D ? VF_ROW_DROPPED : VF_ROW_SCALAR;
            uint32_t rs, cs;
            if (!vf_row_input_index(e->in[k].rank, e->in[k].shape, R, r->row, where, &rs, &cs))
                return vf_err_set(r->err, VF_ERROR_UNSUPPORTED, "row group: input %d of %s (member %d) broadcasts "
                                  "over part of the rows", k, op_name(r, m), m);
            if (wide) r->used_w[t] = true;
            else r->used_s[t] = true;
        }
    }
    return VF_OK;
}

static bool *cache_slot(rg *r, int v)
{
    int m = member_of(v);
    return m >= 0 ? &r->cached[m] : &r->cached[RG_MAX_MEMBERS + input_of(v)];
}

static bool is_cached(const rg *r, int v)
{
    if (!r->cached_mode || !r->use_cache) return false;
    return *cache_slot((rg *)r, v);
}

/* The cache of value v: cv<m> or cvx<t>. */
static void cache_name(vf_sb *s, int v)
{
    if (member_of(v) >= 0) vf_sb_add(s, "cv%d", member_of(v));
    else vf_sb_add(s, "cvx%d", input_of(v));
}

/* Index expression of input t in a context (row-wide: column j). */
static void input_index_expr(vf_sb *s, const rg *r, int t, bool wide)
{
    uint32_t rs, cs;
    vf_row_class where = wide ? VF_ROW_WIDE : VF_ROW_SCALAR;
    const vf_tref *in = &r->grp->tensors[t];
    if (!wide && !vf_row_input_index(in->rank, in->shape, r->row_rank, r->row, where, &rs, &cs))
        vf_row_input_index(in->rank, in->shape, r->row_rank, r->row, VF_ROW_DROPPED, &rs, &cs);
    else
        vf_row_input_index(in->rank, in->shape, r->row_rank, r->row, where, &rs, &cs);
    if (rs == 0 && !(wide && cs)) vf_sb_puts(s, "0u");
    else if (rs == 0) vf_sb_puts(s, "j");
    else vf_sb_add(s, "row%s%s", rs == 1 ? "" : " * pc.cols", wide && cs ? " + j" : "");
}

/* Reference to value v: member tM, else the loaded input (xK row-wide,
   sK per row); in the cached variant a kept value row-wide. */
static void ref(vf_sb *s, const rg *r, int v, bool wide)
{
    if (wide && is_cached(r, v)) {
        cache_name(s, v);
        vf_sb_puts(s, "[jj]");
    } else if (member_of(v) >= 0) {
        vf_sb_add(s, "t%d", member_of(v));
    } else {
        vf_sb_add(s, "%s%d", wide ? "x" : "s", input_of(v));
    }
}

typedef struct {
    const rg *r;
    bool wide;
} ref_ctx;

static void ref_cb(vf_sb *s, int v, void *user)
{
    const ref_ctx *c = user;
    ref(s, c->r, v, c->wide);
}

/* `CT tM = ...;` for elementwise member m. */
static void emit_elementwise(vf_sb *s, const rg *r, int m, bool wide, const char *ind)
{
    ref_ctx c = {r, wide};
    cg_member_eval(s, r->grp, m, ind, ref_cb, &c, r->pushed);
}

/* Evaluates, at column j, the row-wide members that `need` asks for (and
   what they read), loading the row-wide inputs they use first. */
static void emit_cone(vf_sb *s, const rg *r, bool *need, const char *ind)
{
    const vf_fused_group *grp = r->grp;
    bool load[VF_KERNEL_MAX_BINDINGS] = {false};
    for (int m = grp->n_members - 1; m >= 0; m--) {
        if (!need[m]) continue;
        const vf_exec *e = &grp->execs[m];
        const vf_fused_member *fm = &grp->members[m];
        for (int k = 0; k < e->n_in; k++) {
            if (vf_op_input_is_index(e->op, k)) continue;
            if (is_cached(r, fm->in[k])) continue;
            int pm = member_of(fm->in[k]);
            if (pm >= 0 && r->cls[pm] == CL_W) need[pm] = true;
            int t = input_of(fm->in[k]);
            if (t >= 0 && (r->cls[m] == CL_W || k == row_in(e->op))) load[t] = true;
        }
    }
    for (int t = 0; t < grp->n_inputs; t++)
        if (load[t]) {
            vf_dtype dt = grp->tensors[t].dtype;
            vf_sb_add(s, "%s%s x%d = ld%d(", ind, cg_ctype_name(cg_ctype_of(dt)), t, t);
            input_index_expr(s, r, t, true);
            vf_sb_puts(s, ");\n");
        }
    for (int m = 0; m < grp->n_members; m++) {
        if (!need[m] || r->cls[m] != CL_W || is_cached(r, VF_FUSED_MEMBER(m))) continue;
        const vf_exec *e = &grp->execs[m];
        if (e->op == VF_OP_SOFTMAX || e->op == VF_OP_LOG_SOFTMAX) {
            vf_sb ex = {0};
            vf_sb_puts(&ex, e->op == VF_OP_SOFTMAX ? "exp(" : "(");
            ref(&ex, r, grp->members[m].in[0], true);
            vf_sb_add(&ex, e->op == VF_OP_SOFTMAX ? " - m%d) * inv%d" : " - lse%d)", m, m);
            vf_sb_add(s, "%sfloat t%d = ", ind, m);
            if (ex.oom) s->oom = true;
            cg_to_ctype(s, e->out.dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_add(s, ";   // %s\n", op_name(r, m));
        } else if (e->op != VF_OP_SPARSE_XENT && !is_reduction(e->op)) {
            emit_elementwise(s, r, m, true, ind);
        }
    }
}

/* The loop over this invocation's columns j of the row. */
static void loop_begin(vf_sb *s, rg *r)
{
    if (r->cached_mode)
        vf_sb_add(s, "    %sfor (uint jj = 0u; jj < RG_CACHE; jj++) {\n        uint j = lid + jj * WG;\n"
                     "        if (j >= pc.cols) continue;\n", r->unroll ? "[[unroll]] " : "");
    else {
        vf_sb_puts(s, "    for (uint j = lid; j < pc.cols; j += WG) {\n");
        r->n_loops++;
    }
}

/* One pass over the row: acc (declared by the caller) combined with
   `update` (printf-style with the value's reference as %s) of value x.
   In the cached variant x is kept for later passes (at most
   RG_MAX_CACHES values), or read back when an earlier pass kept it. */
static void emit_pass(vf_sb *s, rg *r, int x, const char *acc, const char *update)
{
    bool need[RG_MAX_MEMBERS] = {false};
    int xm = member_of(x);
    bool was = is_cached(r, x), keep = r->cached_mode && !was && r->n_cache < RG_MAX_CACHES;
    if (keep) {
        vf_sb_puts(s, "    float ");
        cache_name(s, x);
        vf_sb_puts(s, "[RG_CACHE];\n");
    }
    loop_begin(s, r);
    if (was) {
        /* read back below */
    } else if (xm < 0) {   /* an input reduced directly */
        int t = input_of(x);
        vf_dtype dt = r->grp->tensors[t].dtype;
        vf_sb_add(s, "        %s x%d = ld%d(", cg_ctype_name(cg_ctype_of(dt)), t, t);
        input_index_expr(s, r, t, true);
        vf_sb_puts(s, ");\n");
    } else {
        need[xm] = true;
        emit_cone(s, r, need, "        ");
    }
    vf_sb val = {0};
    ref(&val, r, x, true);
    if (keep) {
        vf_sb_puts(s, "        ");
        cache_name(s, x);
        vf_sb_add(s, "[jj] = %s;\n", val.buf ? val.buf : "");
    }
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

/* The max and the sum of exp(x - max) of row-op member v's row: mV, sumV. */
static void emit_max_sum(vf_sb *s, rg *r, int v)
{
    int x = r->grp->members[v].in[row_in(r->grp->execs[v].op)];
    char acc[32], upd[64];
    vf_sb_add(s, "    uint mk%d = 0u;\n", v);
    snprintf(acc, sizeof acc, "mk%d", v);
    snprintf(upd, sizeof upd, "max(mk%d, vf_key_f(%%s, true))", v);
    emit_pass(s, r, x, acc, upd);
    vf_sb_add(s, "    float m%d = vf_unkey_f(vf_wg_umax(mk%d));\n    float sa%d = 0.0;\n", v, v, v);
    snprintf(acc, sizeof acc, "sa%d", v);
    snprintf(upd, sizeof upd, "sa%d + exp(%%s - m%d)", v, v);
    emit_pass(s, r, x, acc, upd);
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

/* The members in order, then the stores (see the file comment). */
static void emit_body(vf_sb *s, rg *r)
{
    const vf_fused_group *grp = r->grp;
    int n_out = grp->n_outputs;
    for (int v = 0; v < grp->n_members; v++) {
        const vf_exec *e = &grp->execs[v];
        const vf_fused_member *fm = &grp->members[v];
        vf_sb_add(s, "    // member %d: %s [%c]\n", v, op_name(r, v), r->cls[v]);
        if (e->op == VF_OP_LOGSUMEXP) {
            /* softmax's max and sum; a row of -Inf, any +Inf or a NaN is its max */
            emit_max_sum(s, r, v);
            vf_sb ex = {0};
            vf_sb_add(&ex, "(isnan(m%d) || isinf(m%d) ? m%d : m%d + log(sum%d))", v, v, v, v, v);
            vf_sb_add(s, "    float t%d = ", v);
            if (ex.oom) s->oom = true;
            cg_to_ctype(s, e->out.dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_puts(s, ";\n");
        } else if (is_reduction(e->op)) {
            bool key = e->op == VF_OP_REDUCE_MAX || e->op == VF_OP_REDUCE_MIN;
            bool mx = e->op == VF_OP_REDUCE_MAX;
            char acc[32], upd[64];
            snprintf(acc, sizeof acc, "a%d", v);
            if (key) {
                vf_sb_add(s, "    uint a%d = %s;\n", v, mx ? "0u" : "0xffffffffu");
                snprintf(upd, sizeof upd, "%s(a%d, vf_key_f(%%s, %s))", mx ? "max" : "min", v, mx ? "true" : "false");
            } else if (e->op == VF_OP_REDUCE_PROD) {
                vf_sb_add(s, "    float a%d = 1.0;\n", v);
                snprintf(upd, sizeof upd, "a%d * %%s", v);
            } else {
                vf_sb_add(s, "    float a%d = 0.0;\n", v);
                snprintf(upd, sizeof upd, "a%d + %%s", v);
            }
            emit_pass(s, r, fm->in[0], acc, upd);
            vf_sb ex = {0};
            if (key) vf_sb_add(&ex, "vf_unkey_f(vf_wg_u%s(a%d))", mx ? "max" : "min", v);
            else if (e->op == VF_OP_REDUCE_MEAN) vf_sb_add(&ex, "(vf_wg_fsum(a%d) / float(pc.cols))", v);
            else if (e->op == VF_OP_REDUCE_PROD) vf_sb_add(&ex, "vf_wg_fmul(a%d)", v);
            else vf_sb_add(&ex, "vf_wg_fsum(a%d)", v);
            vf_sb_add(s, "    float t%d = ", v);
            if (ex.oom) s->oom = true;
            cg_to_ctype(s, e->out.dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_puts(s, ";\n");
        } else if (e->op == VF_OP_SOFTMAX || e->op == VF_OP_LOG_SOFTMAX) {
            emit_max_sum(s, r, v);
            if (e->op == VF_OP_SOFTMAX) vf_sb_add(s, "    float inv%d = 1.0 / sum%d;\n", v, v);
            else vf_sb_add(s, "    float lse%d = m%d + log(sum%d);\n", v, v, v);
        } else if (e->op == VF_OP_SPARSE_XENT) {
            emit_max_sum(s, r, v);
            /* loss = logsumexp(row) - row[label]; NaN for a label outside [0, C) */
            vf_dtype ldt = e->in[0].dtype;
            vf_sb_add(s, "    float t%d;\n    {\n        %s l = ", v, ldt == VF_I32 ? "int" : "uint");
            ref(s, r, fm->in[0], false);
            vf_sb_add(s, ";\n        bool ok = %suint(l) < pc.cols;\n        uint j = ok ? uint(l) : 0u;\n",
                      ldt == VF_I32 ? "l >= 0 && " : "");
            bool need[RG_MAX_MEMBERS] = {false}, uc = r->use_cache;
            r->use_cache = false;   /* column `lab` is not this invocation's */
            int x = fm->in[1], xm = member_of(x);
            if (xm >= 0) {
                need[xm] = true;
                emit_cone(s, r, need, "        ");
            } else {
                int t = input_of(x);
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
            cg_to_ctype(s, e->out.dtype, VF_CT_FLOAT, ex.buf ? ex.buf : "");
            vf_sb_free(&ex);
            vf_sb_puts(s, ";\n    }\n");
        } else if (r->cls[v] != CL_W) {
            emit_elementwise(s, r, v, false, "    ");
        }
    }
    /* stores: row-wide outputs in a last pass, per-row ones by lane 0 */
    bool need[RG_MAX_MEMBERS] = {false}, any_w = false;
    for (int o = 0; o < n_out; o++) {
        int m = cg_output_member(grp, o);
        if (r->cls[m] == CL_W) need[m] = any_w = true;
    }
    if (any_w) {
        loop_begin(s, r);
        emit_cone(s, r, need, "        ");
        for (int o = 0; o < n_out; o++)
            if (r->cls[cg_output_member(grp, o)] == CL_W) {
                vf_sb_add(s, "        st%d(row * pc.cols + j, ", o);
                ref(s, r, VF_FUSED_MEMBER(cg_output_member(grp, o)), true);
                vf_sb_puts(s, ");\n");
            }
        vf_sb_puts(s, "    }\n");
    }
    for (int o = 0; o < n_out; o++)
        if (r->cls[cg_output_member(grp, o)] != CL_W)
            vf_sb_add(s, "    if (lid == 0u) st%d(row, t%d);\n", o, cg_output_member(grp, o));
}

vf_status vf_codegen_row_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    int n_in = grp->n_inputs, n_out = grp->n_outputs;
    if (n_in + n_out > VF_KERNEL_MAX_BINDINGS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "row group: %d tensors exceed the %d bindings of a kernel",
                          n_in + n_out, VF_KERNEL_MAX_BINDINGS);
    if (grp->n_members > RG_MAX_MEMBERS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "row group: %d ops (at most %d)", grp->n_members, RG_MAX_MEMBERS);
    if (n_out == 0) {
        k->n_steps = 0;
        return VF_OK;
    }
    int center = grp->center;
    if (center < 0 || center >= grp->n_members ||
        !(is_reduction(grp->execs[center].op) || is_row_op(grp->execs[center].op)))
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "row group: center %d is not a row op of the group", center);
    const vf_tref *row = &grp->execs[center].in[row_in(grp->execs[center].op)];
    rg r = {.grp = grp, .row_rank = row->rank, .row = row->shape, .err = err};
    if (r.row_rank < 1) return vf_err_set(err, VF_ERROR_UNSUPPORTED, "row group: rank-0 row");
    vf_status st = classify(&r);
    if (st) return st;
    uint64_t rows = 1, cols = (uint64_t)r.row[r.row_rank - 1];
    for (int d = 0; d + 1 < r.row_rank; d++) rows *= (uint64_t)r.row[d];

    uint32_t sg = caps->subgroup_size ? caps->subgroup_size : 1;
    bool subgroup = caps->subgroup_arithmetic;
    /* specialisation constants chosen from the device: the workgroup size
       (one subgroup on CPU devices, else 256 within the limits, a power of
       two for the tree) and the per-invocation cache length */
    uint32_t wg = cg_clamp_wg(caps, caps->is_cpu && subgroup ? sg : 256, !subgroup);
    if (subgroup && wg < sg && cg_clamp_wg(caps, sg, false) == sg) wg = sg;
    uint32_t cache_len = caps->is_cpu ? 128u : 4u;
    /* unrolled or not at the longest cache, so the GLSL stays the same
       for every row length (one pipeline per pattern) */
    bool unroll = rg_unroll(grp, cache_len);
    /* A row that fits gets just the cache it needs: the cached loops are
       unrolled to RG_CACHE iterations once the constant is applied (the
       caches become registers, not memory indexed per lane). */
    if (cols > 0 && cols <= (uint64_t)wg * cache_len) cache_len = (uint32_t)((cols + wg - 1) / wg);

    vf_exec fake;
    memset(&fake, 0, sizeof fake);
    fake.op = grp->execs[center].op;
    k->n_steps = 1;
    vf_cg cg;
    cg_begin(&cg, &fake, caps, err, &k->step[0]);
    vf_dispatch *d = cg.d;
    int nl = snprintf(d->name, sizeof d->name, "rows%d", grp->n_members);
    for (int m = 0; m < grp->n_members && nl < 44; m++)
        nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "_%s", op_name(&r, m));
    if (nl > 44) d->name[44] = '\0';
    int cl = snprintf(cg.comment, sizeof cg.comment,
                      "fused row group of %d ops, %d in, %d out, a workgroup per row (%s):", grp->n_members,
                      n_in, n_out, subgroup ? "subgroup ops" : "shared tree");
    for (int m = 0; m < grp->n_members && cl < (int)sizeof cg.comment - 24; m++)
        cl += snprintf(cg.comment + cl, sizeof cg.comment - (size_t)cl, " %s[%c]", op_name(&r, m), r.cls[m]);
    for (int i = 0; i < n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", i);
        cg_bind(&cg, VF_BIND_GROUP + i, grp->tensors[i].dtype, nm, true, false);
    }
    for (int o = 0; o < n_out; o++) {
        char nm[16];
        snprintf(nm, sizeof nm, "out%d", o);
        cg_bind(&cg, VF_BIND_GROUP + n_in + o, grp->tensors[n_in + o].dtype, nm, false, false);
    }
    cg_push_u32(&cg, "n_rows", (uint32_t)rows);
    cg_push_u32(&cg, "cols", (uint32_t)cols);
    cg_push_fills(&cg, grp, r.pushed);
    if (cg.status) {
        cg_abort(&cg);
        return cg.status;
    }
    cg_group_loads(&cg, grp, 0);
    cg_group_stores(&cg, grp, "st", "out");
    for (int m = 0; m < grp->n_members; m++) {
        if (!cg_member_op(grp->execs[m].op)) continue;
        st = cg_member_fn(&cg.decl, grp, m, err);
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
    bool prod = false;   /* only then: the other groups' GLSL stays as it was */
    for (int m = 0; m < grp->n_members; m++) prod = prod || grp->execs[m].op == VF_OP_REDUCE_PROD;
    if (prod) emit_wg_fn(s, "float", "vf_wg_fmul", "vf_fpart", "subgroupMul", "%s * %s%s", "1.0", subgroup);
    if (subgroup) cg.ext |= CG_EXT_SUBGROUP;

    vf_sb_puts(s, "\nvoid main()\n{\n    uint row = vf_group_id();\n    if (row >= pc.n_rows) return;   // uniform\n"
                  "    uint lid = gl_LocalInvocationID.x;\n");
    for (int t = 0; t < n_in; t++)
        if (r.used_s[t]) {
            vf_dtype dt = grp->tensors[t].dtype;
            vf_sb_add(s, "    %s s%d = ld%d(", cg_ctype_name(cg_ctype_of(dt)), t, t);
            input_index_expr(s, &r, t, false);
            vf_sb_puts(s, ");\n");
        }
    vf_sb_puts(s, "    if (pc.cols <= WG * RG_CACHE) {   // the row fits in the invocations' caches\n");
    r.cached_mode = r.use_cache = true;
    r.unroll = unroll;
    emit_body(s, &r);
    vf_sb_puts(s, "    } else {\n");
    r.cached_mode = false;
    emit_body(s, &r);
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
