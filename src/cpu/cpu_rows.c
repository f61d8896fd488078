/* Fused row groups on the CPU backend in one pass per row (cpu_fused.h).
 *
 * A ROWS group (a composed layer norm, a softmax and its gradient, ...)
 * run member by member is a kernel per member, each a walk over the whole
 * row shape with its value written to memory: tens of small kernels per
 * layer norm and its gradient. Here the rows are walked once: for row r
 * every member computes its value for that row (C values of the row
 * shape [..., C] or one of the per-row shape [..., 1]) into a buffer that
 * stays in L1, reading group inputs where they lie (vf_row_input_index's
 * strides) and earlier members' buffers; group outputs get their row when
 * the member computes it.
 *
 * The same bits as member by member: an elementwise member is the fused
 * pass's evaluation (cpu_fused.c: the eager kernels' arithmetic), a
 * reduction or softmax member the eager kernel's own row code
 * (vf_cpu_reduce_row_f32, vf_cpu_softmax_row_f32), each value kept in its
 * dtype as if stored. A softmax or log_softmax gradient's four members
 * (vf_cpu_rows_grad_match) are one call of the gradient's rows
 * (kernels_row_grad.c), which round as the four do.
 */
#include "cpu/cpu_fused.h"
#include "util/dtype.h"

#include <stdatomic.h>
#include <string.h>

#define ROW_MAX VF_CPU_FUSED_CHUNK

/* What a member is in a pass: an op computed as its kernel would, the
   last of a softmax gradient's ops (computed by the gradient's rows), or
   one of the three before it (not computed: only the gradient read it). */
enum { ROLE_OP, ROLE_GRAD, ROLE_SKIP };

static _Atomic int64_t passes;

int64_t vf_cpu_rows_passes(void) { return atomic_load_explicit(&passes, memory_order_relaxed); }

static bool is_reduction(vf_op op)
{
    return op == VF_OP_REDUCE_SUM || op == VF_OP_REDUCE_MEAN || op == VF_OP_REDUCE_MAX || op == VF_OP_REDUCE_MIN;
}

static bool is_softmax(vf_op op) { return op == VF_OP_SOFTMAX || op == VF_OP_LOG_SOFTMAX; }

static bool is_splat(const vf_fused_group *g, int m)
{
    return g->execs[m].op == VF_OP_FILL && g->members[m].out < 0;
}

/* The row shape: the center's input (a row op or reduction). */
static const vf_tref *row_of(const vf_fused_group *g)
{
    if (g->center < 0 || g->center >= g->n_members) return NULL;
    const vf_exec *c = &g->execs[g->center];
    return (is_reduction(c->op) || is_softmax(c->op)) && c->n_in == 1 ? &c->in[0] : NULL;
}

static vf_row_class class_of(const vf_tref *t, const vf_tref *row)
{
    return vf_row_classify(t->rank, t->shape, row->rank, row->shape);
}

/* Whether member m can run here; *cls its value's class. */
static bool member_ok(const vf_fused_group *g, int m, const vf_tref *row, vf_row_class *cls)
{
    const vf_exec *e = &g->execs[m];
    const vf_fused_member *mb = &g->members[m];
    *cls = VF_ROW_SCALAR;
    if (is_splat(g, m)) return true;
    *cls = class_of(&e->out, row);
    if (*cls != VF_ROW_WIDE && *cls != VF_ROW_SCALAR) return false;
    bool row_op = is_reduction(e->op) || is_softmax(e->op);
    if (row_op) {
        int last = e->in[0].rank - 1;
        if (e->n_in != 1 || e->in[0].dtype != VF_F32 || e->out.dtype != VF_F32 ||
            class_of(&e->in[0], row) != VF_ROW_WIDE || last < 0)
            return false;
        if (is_reduction(e->op) && (*cls != VF_ROW_SCALAR || e->attrs.axes_mask != 1u << last)) return false;
        if (is_softmax(e->op) && (*cls != VF_ROW_WIDE || e->attrs.axis != last)) return false;
    } else if (!vf_cpu_fused_op_known(e)) {
        return false;
    }
    /* what each input is read as: the row shape for a row op */
    vf_row_class reader = row_op ? VF_ROW_WIDE : *cls;
    for (int k = 0; k < e->n_in; k++) {
        int src = mb->in[k];
        if (src >= g->n_inputs) return false;
        if (src >= 0) {
            const vf_tref *t = &g->tensors[src];
            uint32_t rs, cs;
            if (!vf_row_input_index(t->rank, t->shape, row->rank, row->shape, reader, &rs, &cs)) return false;
            if (row_op && cs != 1) return false;
            continue;
        }
        int j = -1 - src;
        if (j >= m) return false;
        if (is_splat(g, j)) {
            if (row_op) return false;
            continue;
        }
        vf_row_class v = class_of(&g->execs[j].out, row);
        if (reader == VF_ROW_SCALAR && v != VF_ROW_SCALAR) return false;
        if (row_op && v != VF_ROW_WIDE) return false;
    }
    if (mb->out >= 0) {
        if (mb->out < g->n_inputs || mb->out >= g->n_inputs + g->n_outputs) return false;
        const vf_tref *t = &g->tensors[mb->out];
        if (t->rank != e->out.rank || t->dtype != e->out.dtype) return false;
        for (int d = 0; d < t->rank; d++)
            if (t->shape[d] != e->out.shape[d]) return false;
    }
    return true;
}

/* ---- the softmax gradient's ops (cpu_fused.h) ---------------------------- */

static bool f32_like(const vf_tref *t, const vf_tref *like)
{
    if (t->dtype != VF_F32 || t->rank != like->rank) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] != like->shape[d]) return false;
    return true;
}

/* sum along the last axis, dims kept, f32 */
static bool is_row_sum(const vf_exec *e)
{
    int r = e->in[0].rank;
    return e->op == VF_OP_REDUCE_SUM && e->n_in == 1 && r >= 1 && e->attrs.axes_mask == 1u << (r - 1) &&
           e->out.rank == r && e->in[0].dtype == VF_F32 && e->out.dtype == VF_F32;
}

/* Member src's index (a member's value), else -1 (a group input). */
static int member_of(int src) { return src < 0 ? -1 - src : -1; }

/* Member j (before `before`), of op `op`, read once in the whole group
   and no group output: an intermediate only the next op reads. */
static bool inner(const vf_fused_group *g, int j, int before, vf_op op)
{
    if (j < 0 || j >= before || g->execs[j].op != op || g->members[j].out >= 0) return false;
    int reads = 0;
    for (int k = j + 1; k < g->n_members; k++)
        for (int i = 0; i < g->execs[k].n_in && i < 3; i++) reads += g->members[k].in[i] == VF_FUSED_MEMBER(j);
    return reads == 1;
}

/* softmax: d = y * c, c = g - b, b = sum(a), a = g * y (either order of
   each product) */
static bool match_softmax(const vf_fused_group *g, int d, vf_cpu_row_grad *rg)
{
    const vf_exec *ed = &g->execs[d];
    for (int k = 0; k < 2; k++) {
        int c = member_of(g->members[d].in[k]), ysrc = g->members[d].in[1 - k];
        if (!inner(g, c, d, VF_OP_SUB)) continue;
        int b = member_of(g->members[c].in[1]), gsrc = g->members[c].in[0];
        if (!inner(g, b, c, VF_OP_REDUCE_SUM) || !is_row_sum(&g->execs[b]) || !f32_like(&g->execs[c].in[0], &ed->out))
            continue;
        int a = member_of(g->members[b].in[0]);
        if (!inner(g, a, b, VF_OP_MUL) || !f32_like(&g->execs[a].out, &ed->out)) continue;
        const vf_fused_member *ma = &g->members[a];
        int gk = ma->in[0] == gsrc && ma->in[1] == ysrc ? 0 : ma->in[1] == gsrc && ma->in[0] == ysrc ? 1 : -1;
        if (gk < 0 || !f32_like(&g->execs[a].in[0], &ed->out) || !f32_like(&g->execs[a].in[1], &ed->out)) continue;
        *rg = (vf_cpu_row_grad){.op = VF_OP_SOFTMAX, .m = {a, b, c, d}, .g_at = c, .g_in = 0, .g_src = gsrc,
                                .y_at = d, .y_in = 1 - k, .y_src = ysrc};
        return true;
    }
    return false;
}

/* log_softmax: d = g - c, c = e * b (either order), e = exp(y),
   b = sum(g) */
static bool match_log_softmax(const vf_fused_group *g, int d, vf_cpu_row_grad *rg)
{
    const vf_exec *ed = &g->execs[d];
    int c = member_of(g->members[d].in[1]), gsrc = g->members[d].in[0];
    if (!inner(g, c, d, VF_OP_MUL)) return false;
    for (int k = 0; k < 2; k++) {
        int e = member_of(g->members[c].in[k]), b = member_of(g->members[c].in[1 - k]);
        if (!inner(g, e, c, VF_OP_EXP) || !inner(g, b, c, VF_OP_REDUCE_SUM) || !is_row_sum(&g->execs[b]) ||
            g->members[b].in[0] != gsrc || !f32_like(&g->execs[e].in[0], &ed->out) ||
            !f32_like(&g->execs[e].out, &ed->out) || !f32_like(&g->execs[b].in[0], &ed->out))
            continue;
        *rg = (vf_cpu_row_grad){.op = VF_OP_LOG_SOFTMAX, .m = {b, e, c, d}, .g_at = d, .g_in = 0, .g_src = gsrc,
                                .y_at = e, .y_in = 0, .y_src = g->members[e].in[0]};
        return true;
    }
    return false;
}

bool vf_cpu_rows_grad_match(const vf_fused_group *g, int d, vf_cpu_row_grad *out)
{
    if (d < 0 || d >= g->n_members) return false;
    const vf_exec *ed = &g->execs[d];
    if (ed->n_in != 2 || !f32_like(&ed->in[0], &ed->out) || !f32_like(&ed->in[1], &ed->out) || ed->out.rank < 1)
        return false;
    if (ed->op == VF_OP_MUL) return match_softmax(g, d, out);
    if (ed->op == VF_OP_SUB) return match_log_softmax(g, d, out);
    return false;
}

bool vf_cpu_rows_supported(const vf_fused_group *g)
{
    const vf_tref *row = row_of(g);
    if (g->kind != VF_FUSED_ROWS || !row || row->rank < 1 || g->n_outputs < 1 ||
        g->n_inputs + g->n_outputs > VF_FUSED_MAX_TENSORS)
        return false;
    int64_t cols = row->shape[row->rank - 1], n = 1;
    for (int d = 0; d < row->rank; d++) n *= row->shape[d];
    if (cols < 1 || cols > ROW_MAX || n > VF_CPU_GRAIN_FAST) return false;
    for (int m = 0; m < g->n_members; m++) {
        vf_row_class cls;
        if (!member_ok(g, m, row, &cls)) return false;
    }
    return true;
}

/* Its layout: eval's work arrays, softmax's doubles, three operands
   spread to a block (4 bytes an element: the widest dtype), per member a
   block buffer, its operand, its softmax gradient (when it ends one), its
   class and role. */
size_t vf_cpu_rows_scratch_bytes(int n_members)
{
    return vf_cpu_fused_tmp_bytes() + ROW_MAX * sizeof(double) + 3 * ROW_MAX * 4 +
           (size_t)n_members *
               (ROW_MAX * 4 + sizeof(vf_cpu_opnd) + sizeof(vf_cpu_row_grad) + sizeof(vf_row_class) + 1);
}

static bool same_place(const vf_tref *a, const vf_tref *b)
{
    if (a->buf != b->buf || a->offset != b->offset || a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

static char *data_of(const vf_tref *t) { return (char *)t->buf->data + t->offset; }

/* dst[i * cols + c] = element i * rs + c * cs of src, for kb rows (es-byte
   elements): an operand spread to the block's row-wide layout. The two
   cases that occur (a row vector tiled, rs 0; a per-row value repeated
   along its row, cs 0) as copies and fills of 4-byte values. */
static void spread(void *dst, const char *src, size_t es, int64_t kb, int64_t cols, int64_t rs, int64_t cs)
{
    if (es == 4 && rs == 0 && cs == 1) {
        for (int64_t i = 0; i < kb; i++) memcpy((char *)dst + (size_t)(i * cols) * 4, src, (size_t)cols * 4);
        return;
    }
    if (es == 4 && cs == 0) {
        uint32_t *d = dst;
        for (int64_t i = 0; i < kb; i++) {
            uint32_t v;
            memcpy(&v, src + (size_t)(i * rs) * 4, 4);
            for (int64_t c = 0; c < cols; c++) d[i * cols + c] = v;
        }
        return;
    }
    for (int64_t i = 0; i < kb; i++)
        for (int64_t c = 0; c < cols; c++) {
            const char *from = src + (size_t)(i * rs + c * cs) * es;
            char *to = (char *)dst + (size_t)(i * cols + c) * es;
            switch (es) {
            case 4: memcpy(to, from, 4); break;
            case 2: memcpy(to, from, 2); break;
            default: *to = *from; break;
            }
        }
}

typedef struct rows_run {
    const vf_fused_group *g;
    int64_t cols;
    uint32_t rs[VF_FUSED_MAX_TENSORS], cs[VF_FUSED_MAX_TENSORS];
    vf_cpu_opnd *val;
    vf_row_class *cls;
} rows_run;

/* Operand src of a member over the block of kb rows from row r, as a
   reader of the row shape (wide: kb * cols elements) or of the per-row
   shape (kb elements) reads it; spread into tmp where its layout is not
   already that. */
static vf_cpu_opnd operand(const rows_run *x, int src, bool wide, int64_t r, int64_t kb, void *tmp)
{
    int64_t cols = x->cols;
    if (src < 0) {
        int j = -1 - src;
        vf_cpu_opnd v = x->val[j];
        if (v.st == 0 || !wide || x->cls[j] == VF_ROW_WIDE || cols == 1) return v; /* splat, or as stored */
        spread(tmp, v.p, vf_dtype_size(v.dt), kb, cols, 1, 0);                      /* a per-row value */
        return (vf_cpu_opnd){tmp, 1, v.dt};
    }
    const vf_tref *t = &x->g->tensors[src];
    size_t es = vf_dtype_size(t->dtype);
    int64_t rs = x->rs[src], cs = x->cs[src];
    const char *base = data_of(t) + (size_t)(r * rs) * es;
    if (!wide) return (vf_cpu_opnd){base, rs, t->dtype}; /* column 0 of each row */
    if ((cs == 1 && rs == cols) || (cs == 0 && rs == 0) || kb == 1) return (vf_cpu_opnd){base, cs, t->dtype};
    spread(tmp, base, es, kb, cols, rs, cs);
    return (vf_cpu_opnd){tmp, 1, t->dtype};
}

bool vf_cpu_rows_run(const vf_fused_group *g, void *scratch)
{
    const vf_tref *T = g->tensors, *row = row_of(g);
    int ni = g->n_inputs, nt = ni + g->n_outputs, nm = g->n_members;
    /* an output in place of an input: every member writes its buffer,
       the outputs copied once the block is done, so a block's reads all
       come first; any other overlap: member by member */
    bool in_place = false;
    for (int k = ni; k < nt; k++)
        for (int j = 0; j < ni; j++) {
            if (!vf_cpu_fused_overlaps(&T[k], &T[j])) continue;
            if (!same_place(&T[k], &T[j])) return false;
            in_place = true;
        }
    int64_t cols = row->shape[row->rank - 1], rows = 1;
    for (int d = 0; d + 1 < row->rank; d++) rows *= row->shape[d];
    atomic_fetch_add_explicit(&passes, 1, memory_order_relaxed);
    if (rows == 0 || cols == 0) return true;

    char *tmp = scratch;
    double *dtmp = (double *)(tmp + vf_cpu_fused_tmp_bytes());
    uint8_t *spreads = (uint8_t *)(dtmp + ROW_MAX);
    uint8_t *vals = spreads + 3 * ROW_MAX * 4;
    rows_run x = {.g = g, .cols = cols};
    x.val = (vf_cpu_opnd *)(vals + (size_t)nm * ROW_MAX * 4);
    vf_cpu_row_grad *grads = (vf_cpu_row_grad *)(x.val + nm);
    x.cls = (vf_row_class *)(grads + nm);
    uint8_t *role = (uint8_t *)(x.cls + nm);
    /* the softmax gradients' ops: the last one's value in one call of the
       gradient's rows, the three before it skipped */
    memset(role, ROLE_OP, (size_t)nm);
    for (int m = 0; m < nm; m++) {
        vf_cpu_row_grad *rg = &grads[m];
        if (!vf_cpu_rows_grad_match(g, m, rg) || role[rg->m[0]] || role[rg->m[1]] || role[rg->m[2]]) continue;
        /* g or y a fill: here one value, not a block of rows (plans give
           each reader its own fill, so the four ops never share one now) */
        if ((rg->g_src < 0 && is_splat(g, -1 - rg->g_src)) || (rg->y_src < 0 && is_splat(g, -1 - rg->y_src))) continue;
        role[m] = ROLE_GRAD;
        for (int k = 0; k < 3; k++) role[rg->m[k]] = ROLE_SKIP;
    }
    for (int m = 0; m < nm; m++) {
        member_ok(g, m, row, &x.cls[m]); /* checked at plan creation: sets the class */
        x.val[m] = (vf_cpu_opnd){vals + (size_t)m * ROW_MAX * 4, 1, g->execs[m].out.dtype};
        if (is_splat(g, m)) {
            vf_cpu_fused_eval(&g->execs[m], NULL, vals + (size_t)m * ROW_MAX * 4, 1, tmp);
            x.val[m].st = 0;
        }
    }
    /* each input's strides as a row-wide reader sees them (a per-row
       reader's row stride is the same; it reads column 0) */
    for (int t = 0; t < ni; t++)
        vf_row_input_index(T[t].rank, T[t].shape, row->rank, row->shape, VF_ROW_WIDE, &x.rs[t], &x.cs[t]);

    /* blocks of whole rows, as many as fit a chunk: row-wide values of
       consecutive rows are consecutive */
    int64_t per = ROW_MAX / cols;
    for (int64_t r = 0; r < rows; r += per) {
        int64_t kb = rows - r < per ? rows - r : per;
        for (int m = 0; m < nm; m++) {
            if (is_splat(g, m) || role[m] == ROLE_SKIP) continue;
            const vf_exec *e = &g->execs[m];
            const vf_fused_member *mb = &g->members[m];
            bool wide = x.cls[m] == VF_ROW_WIDE;
            int64_t n = wide ? kb * cols : kb;
            void *dst = vals + (size_t)m * ROW_MAX * 4;
            if (mb->out >= 0 && !in_place)
                dst = data_of(&T[mb->out]) + (size_t)(r * (wide ? cols : 1)) * vf_dtype_size(e->out.dtype);
            if (role[m] == ROLE_GRAD) {
                /* g and y of the row shape: contiguous rows of the block */
                const vf_cpu_row_grad *rg = &grads[m];
                vf_cpu_opnd gv = operand(&x, rg->g_src, true, r, kb, spreads);
                vf_cpu_opnd yv = operand(&x, rg->y_src, true, r, kb, spreads + ROW_MAX * 4);
                vf_cpu_softmax_grad_rows_f32(gv.p, yv.p, dst, kb, cols, rg->op == VF_OP_LOG_SOFTMAX);
            } else if (is_reduction(e->op) || is_softmax(e->op)) {
                /* row by row, the eager kernels' own row code */
                for (int64_t i = 0; i < kb; i++) {
                    vf_cpu_opnd a = operand(&x, mb->in[0], true, r + i, 1, spreads);
                    if (mb->in[0] < 0) a.p = (const float *)a.p + i * cols; /* the value's row i */
                    if (is_reduction(e->op))
                        ((float *)dst)[i] = vf_cpu_reduce_row_f32(e->op, a.p, a.st, cols);
                    else
                        vf_cpu_softmax_row_f32(a.p, a.st, (float *)dst + i * cols, cols,
                                               e->op == VF_OP_LOG_SOFTMAX, dtmp);
                }
            } else {
                vf_cpu_opnd in[3];
                for (int k = 0; k < e->n_in; k++)
                    in[k] = operand(&x, mb->in[k], wide, r, kb, spreads + (size_t)k * ROW_MAX * 4);
                vf_cpu_fused_eval(e, in, dst, n, tmp);
            }
            x.val[m].p = dst;
        }
        for (int m = 0; in_place && m < nm; m++) {
            int t = g->members[m].out;
            if (t < 0) continue;
            size_t n = (size_t)(x.cls[m] == VF_ROW_WIDE ? kb * cols : kb), es = vf_dtype_size(T[t].dtype);
            memcpy(data_of(&T[t]) + (size_t)(r * (x.cls[m] == VF_ROW_WIDE ? cols : 1)) * es, x.val[m].p, n * es);
        }
    }
    return true;
}
