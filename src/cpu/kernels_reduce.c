/* Reductions (sum, mean, max, min, norm, prod, any, all, logsumexp over
 * any set of axes) and argmax.
 *
 * The input's dims are classed kept/reduced, size-1 dims dropped and
 * neighbours of one class merged. If the innermost remaining dim is kept,
 * a chunk of adjacent outputs ("lanes") is accumulated at once so every
 * load is contiguous; otherwise each output reduces contiguous runs. Float
 * values (and integer max/min, exact in double) accumulate in double;
 * integer sums and products accumulate in uint64 and wrap to 32 bits on
 * store, as the GPU's 32-bit adds and multiplies do. logsumexp keeps a
 * running max m and the sum s of exp(x - m), rescaled when m grows (one
 * pass; s lives VF_CPU_CHUNK doubles after m in the accumulator array).
 */
#include "cpu/cpu.h"
#include "cpu/cpu_sum.h"
#include "cpu/cpu_threads.h"
#include "graph/op.h"

#include <math.h>

typedef enum { ACC_SUM, ACC_SUMSQ, ACC_MAX, ACC_MIN, ACC_PROD, ACC_LSE } acc_kind;

static double acc_init(acc_kind k)
{
    return k == ACC_MAX || k == ACC_LSE ? -INFINITY : k == ACC_MIN ? INFINITY : k == ACC_PROD ? 1.0 : 0.0;
}

/* One element into logsumexp's (m, s). NaN sticks in m; -Inf adds
   nothing; once m is +Inf the result is +Inf whatever s is. */
static inline void lse_step(double *m, double *s, double x)
{
    if (isnan(*m) || x == -INFINITY || *m == INFINITY) return;
    if (isnan(x)) {
        *m = x;
    } else if (x > *m) {
        *s = (*m == -INFINITY ? 0.0 : *s * exp(*m - x)) + 1.0;
        *m = x;
    } else {
        *s += exp(x - *m);
    }
}

static inline double lse_final(double m, double s) { return isnan(m) || isinf(m) ? m : m + log(s); }

/* acc[i] op= x[i] (lanes) */
static void combine_lanes(acc_kind k, double *acc, const double *x, int64_t n)
{
    switch (k) {
    case ACC_SUM: for (int64_t i = 0; i < n; i++) acc[i] += x[i]; break;
    case ACC_SUMSQ: for (int64_t i = 0; i < n; i++) acc[i] += x[i] * x[i]; break;
    case ACC_MAX:
        for (int64_t i = 0; i < n; i++)
            if (x[i] > acc[i] || isnan(x[i])) acc[i] = x[i];
        break;
    case ACC_MIN:
        for (int64_t i = 0; i < n; i++)
            if (x[i] < acc[i] || isnan(x[i])) acc[i] = x[i];
        break;
    case ACC_PROD: for (int64_t i = 0; i < n; i++) acc[i] *= x[i]; break;
    case ACC_LSE: for (int64_t i = 0; i < n; i++) lse_step(&acc[i], &acc[VF_CPU_CHUNK + i], x[i]); break;
    }
}

/* *acc op= x[0..n) (run) */
static void combine_run(acc_kind k, double *acc, const double *x, int64_t n)
{
    double a = *acc;
    switch (k) {
    case ACC_SUM: a += vf_cpu_sum4(x, n, false); break;
    case ACC_SUMSQ: a += vf_cpu_sum4(x, n, true); break;
    case ACC_MAX:
        for (int64_t i = 0; i < n; i++)
            if (x[i] > a || isnan(x[i])) a = x[i];
        break;
    case ACC_MIN:
        for (int64_t i = 0; i < n; i++)
            if (x[i] < a || isnan(x[i])) a = x[i];
        break;
    case ACC_PROD: for (int64_t i = 0; i < n; i++) a *= x[i]; break;
    case ACC_LSE: for (int64_t i = 0; i < n; i++) lse_step(&a, &acc[VF_CPU_CHUNK], x[i]); break;
    }
    *acc = a;
}

typedef struct red {
    acc_kind kind;
    bool int_sum;      /* integer sum or product: uint64 accumulators */
    bool sqrt_after;
    double count;      /* divide by this when > 0 (mean) */
    vf_dtype in_t, out_t;
    const void *in;
    void *out;
} red;

/* Loads n elements at in offset off (stride 1) and folds them in. */
static void fold(const red *r, int64_t off, int64_t n, bool lanes, double *acc, uint64_t *iacc)
{
    if (r->int_sum) {
        int64_t buf[VF_CPU_CHUNK];
        vf_cpu_load_i64(r->in, r->in_t, off, 1, n, buf);
        if (r->kind == ACC_PROD) {
            for (int64_t i = 0; i < n; i++) iacc[lanes ? i : 0] *= (uint64_t)buf[i];
        } else if (lanes) {
            for (int64_t i = 0; i < n; i++) iacc[i] += (uint64_t)buf[i];
        } else {
            for (int64_t i = 0; i < n; i++) iacc[0] += (uint64_t)buf[i];
        }
    } else {
        double buf[VF_CPU_CHUNK];
        vf_cpu_load_f64(r->in, r->in_t, off, 1, n, buf);
        if (lanes)
            combine_lanes(r->kind, acc, buf, n);
        else
            combine_run(r->kind, acc, buf, n);
    }
}

static void finish(const red *r, int64_t off, int64_t n, double *acc, const uint64_t *iacc)
{
    if (r->int_sum) {
        vf_cpu_store_i64(r->out, r->out_t, off, n, (const int64_t *)(const void *)iacc);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        if (r->kind == ACC_LSE) acc[i] = lse_final(acc[i], acc[VF_CPU_CHUNK + i]);
        if (r->count > 0) acc[i] /= r->count;
        if (r->sqrt_after) acc[i] = sqrt(acc[i]);
    }
    vf_cpu_store_f64(r->out, r->out_t, off, n, acc);
}

static void init_acc(const red *r, int64_t n, double *acc, uint64_t *iacc)
{
    for (int64_t i = 0; i < n; i++) {
        acc[i] = acc_init(r->kind);
        acc[VF_CPU_CHUNK + i] = 0.0; /* logsumexp's s */
        iacc[i] = r->kind == ACC_PROD ? 1 : 0;
    }
}

/* A reduction split by outputs across threads: every output is reduced
   by one thread in the order one thread would, so the bits do not depend
   on the thread count. (A reduction to one output stays on one thread.) */
typedef struct red_job {
    const red *r;
    vf_cpu_loop kept, rl;  /* kept: operand 0 the input, 1 the output; rl: the input */
    int64_t w, chunks;     /* lanes: the innermost kept dim, and its chunks of VF_CPU_CHUNK */
} red_job;

static void red_lanes(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)part, (void)parts;
    const red_job *j = arg;
    double acc[2 * VF_CPU_CHUNK]; /* the second half: logsumexp's sums */
    uint64_t iacc[VF_CPU_CHUNK];
    int64_t rcount = vf_cpu_loop_count(&j->rl, 0, j->rl.rank);
    vf_cpu_cursor kc, rc;
    for (int64_t it = lo; it < hi; it++) {
        int64_t g = it / j->chunks, l0 = it % j->chunks * VF_CPU_CHUNK;
        if (it == lo || l0 == 0) vf_cpu_cursor_seek(&j->kept, j->kept.rank - 1, g, &kc);
        int64_t c = j->w - l0 < VF_CPU_CHUNK ? j->w - l0 : VF_CPU_CHUNK;
        init_acc(j->r, c, acc, iacc);
        vf_cpu_cursor_init(&rc, 1);
        for (int64_t k = 0; k < rcount; k++) {
            fold(j->r, kc.off[0] + rc.off[0] + l0, c, true, acc, iacc);
            vf_cpu_cursor_next(&j->rl, j->rl.rank, &rc);
        }
        finish(j->r, kc.off[1] + l0, c, acc, iacc);
    }
}

static void red_runs(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)part, (void)parts;
    const red_job *j = arg;
    double acc[2 * VF_CPU_CHUNK];
    uint64_t iacc[VF_CPU_CHUNK];
    int64_t run = j->rl.dim[j->rl.rank - 1];
    int64_t runs = vf_cpu_loop_count(&j->rl, 0, j->rl.rank - 1);
    vf_cpu_cursor kc, rc;
    vf_cpu_cursor_seek(&j->kept, j->kept.rank, lo, &kc);
    for (int64_t o = lo; o < hi; o++) {
        init_acc(j->r, 1, acc, iacc);
        vf_cpu_cursor_init(&rc, 1);
        for (int64_t k = 0; k < runs; k++) {
            for (int64_t s = 0; s < run; s += VF_CPU_CHUNK) {
                int64_t c = run - s < VF_CPU_CHUNK ? run - s : VF_CPU_CHUNK;
                fold(j->r, kc.off[0] + rc.off[0] + s, c, false, acc, iacc);
            }
            vf_cpu_cursor_next(&j->rl, j->rl.rank - 1, &rc);
        }
        finish(j->r, kc.off[1], 1, acc, iacc);
        vf_cpu_cursor_next(&j->kept, j->kept.rank, &kc);
    }
}

vf_status vf_cpu_reduce(vf_cpu *cpu, const vf_exec *e)
{
    const vf_op_info *info = vf_op_get(e->op);
    const vf_tref *in = &e->in[0];
    if (e->n_in != 1 || in->dtype != e->out.dtype)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: %s wants one input of the output's dtype", info->name);
    if (vf_cpu_numel(&e->out) == 0 || vf_cpu_numel(in) == 0) return VF_OK;

    red r = {.in_t = in->dtype, .out_t = e->out.dtype, .in = vf_cpu_ptr(in),
             .out = vf_cpu_ptr(&e->out), .sqrt_after = info->sqrt_after};
    switch (info->combine) {
    case VF_COMBINE_SUM: r.kind = info->square_first ? ACC_SUMSQ : ACC_SUM; break;
    case VF_COMBINE_MAX: r.kind = ACC_MAX; break;
    case VF_COMBINE_MIN: r.kind = ACC_MIN; break;
    case VF_COMBINE_PROD: r.kind = ACC_PROD; break;
    case VF_COMBINE_LSE: r.kind = ACC_LSE; break;
    default:
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: %s is not a reduction",
                          info->name);
    }
    r.int_sum = (r.kind == ACC_SUM || r.kind == ACC_PROD) && !vf_dtype_is_float(in->dtype);

    /* Class, drop and merge the input's dims. */
    int64_t in_st[VF_MAX_RANK];
    vf_cpu_contig_strides(in->rank, in->shape, in_st);
    int64_t dim[VF_MAX_RANK], st[VF_MAX_RANK];
    bool reduced[VF_MAX_RANK];
    int nd = 0;
    double count = 1;
    for (int d = 0; d < in->rank; d++) {
        bool rd = (e->attrs.axes_mask >> d) & 1u;
        if (rd) count *= (double)in->shape[d];
        if (in->shape[d] == 1) continue;
        if (nd > 0 && reduced[nd - 1] == rd) { /* contiguous input: always mergeable */
            dim[nd - 1] *= in->shape[d];
            st[nd - 1] = in_st[d];
        } else {
            dim[nd] = in->shape[d];
            st[nd] = in_st[d];
            reduced[nd] = rd;
            nd++;
        }
    }
    if (nd == 0) { /* a single element */
        dim[0] = 1, st[0] = 1, reduced[0] = false;
        nd = 1;
    }
    if (info->divide_by_count) r.count = count;

    /* kept: operand 0 = input, 1 = output; red: operand 0 = input */
    vf_cpu_loop kept = {.nops = 2}, rl = {.nops = 1};
    for (int d = 0; d < nd; d++) {
        if (reduced[d]) {
            rl.dim[rl.rank] = dim[d];
            rl.st[0][rl.rank++] = st[d];
        } else {
            kept.dim[kept.rank] = dim[d];
            kept.st[0][kept.rank++] = st[d];
        }
    }
    vf_cpu_contig_strides(kept.rank, kept.dim, kept.st[1]);

    red_job j = {.r = &r, .kept = kept, .rl = rl};
    if (!reduced[nd - 1]) {
        /* lanes: the innermost kept dim is contiguous in input and output;
           an item is a chunk of lanes of one group */
        j.w = kept.dim[kept.rank - 1];
        j.chunks = (j.w + VF_CPU_CHUNK - 1) / VF_CPU_CHUNK;
        int64_t groups = vf_cpu_loop_count(&kept, 0, kept.rank - 1);
        int64_t per = vf_cpu_loop_count(&rl, 0, rl.rank) * (j.w < VF_CPU_CHUNK ? j.w : VF_CPU_CHUNK);
        vf_cpu_parallel(cpu->workers, groups * j.chunks, vf_cpu_grain_items(per), red_lanes, &j);
    } else {
        /* runs: the innermost reduced dim is contiguous in the input; an
           item is an output */
        int64_t outs = vf_cpu_loop_count(&kept, 0, kept.rank);
        vf_cpu_parallel(cpu->workers, outs, vf_cpu_grain_items(vf_cpu_loop_count(&rl, 0, rl.rank)), red_runs, &j);
    }
    return VF_OK;
}

float vf_cpu_reduce_row_f32(vf_op op, const float *x, int64_t stride, int64_t n)
{
    /* red_runs' steps for one output whose reduced dims merged into one
       run: the same chunks, accumulator and finish, so the same bits */
    const vf_op_info *info = vf_op_get(op);
    red r = {.kind = info->combine == VF_COMBINE_MAX ? ACC_MAX
                     : info->combine == VF_COMBINE_MIN ? ACC_MIN
                     : info->square_first ? ACC_SUMSQ
                                          : ACC_SUM,
             .sqrt_after = info->sqrt_after, .count = info->divide_by_count ? (double)n : 0.0,
             .in_t = VF_F32, .out_t = VF_F32};
    double acc[2 * VF_CPU_CHUNK], buf[VF_CPU_CHUNK];
    uint64_t iacc[VF_CPU_CHUNK];
    float out;
    r.out = &out;
    init_acc(&r, 1, acc, iacc);
    for (int64_t s = 0; s < n; s += VF_CPU_CHUNK) {
        int64_t c = n - s < VF_CPU_CHUNK ? n - s : VF_CPU_CHUNK;
        vf_cpu_load_f64(x, VF_F32, s * stride, stride, c, buf);
        combine_run(r.kind, acc, buf, c);
    }
    finish(&r, 0, 1, acc, iacc);
    return out;
}

/* ---- argmax ---------------------------------------------------------------- */

/* x replaces the best so far when best is not NaN yet and x is NaN or
   greater: the first maximum wins, and the first NaN wins over all. */
static inline bool argmax_better(double x, double best)
{
    return !isnan(best) && (isnan(x) || x > best);
}

vf_status vf_cpu_argmax(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *in = &e->in[0];
    int axis = e->attrs.axis;
    if (e->n_in != 1 || axis < 0 || axis >= in->rank || e->out.dtype != VF_I32)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: argmax wants one input, an axis in [0, %d) and an i32 "
                          "output (got axis %d)", in->rank, axis);
    if (vf_cpu_numel(in) == 0 || vf_cpu_numel(&e->out) == 0) return VF_OK;
    int64_t outer = 1, n = in->shape[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= in->shape[d];
    for (int d = axis + 1; d < in->rank; d++) inner *= in->shape[d];
    const void *x = vf_cpu_ptr(in);
    int32_t *out = vf_cpu_ptr(&e->out);
    double buf[VF_CPU_CHUNK], best[VF_CPU_CHUNK];

    for (int64_t o = 0; o < outer; o++) {
        int64_t base = o * n * inner;
        if (inner == 1) {
            double b = 0;
            int64_t bi = 0;
            for (int64_t s = 0; s < n; s += VF_CPU_CHUNK) {
                int64_t c = n - s < VF_CPU_CHUNK ? n - s : VF_CPU_CHUNK;
                vf_cpu_load_f64(x, in->dtype, base + s, 1, c, buf);
                for (int64_t i = 0; i < c; i++) {
                    if ((s == 0 && i == 0) || argmax_better(buf[i], b)) {
                        b = buf[i];
                        bi = s + i;
                    }
                }
            }
            out[o] = (int32_t)bi;
            continue;
        }
        for (int64_t l0 = 0; l0 < inner; l0 += VF_CPU_CHUNK) {
            int64_t c = inner - l0 < VF_CPU_CHUNK ? inner - l0 : VF_CPU_CHUNK;
            int32_t *oi = out + o * inner + l0;
            vf_cpu_load_f64(x, in->dtype, base + l0, 1, c, best);
            for (int64_t i = 0; i < c; i++) oi[i] = 0;
            for (int64_t j = 1; j < n; j++) {
                vf_cpu_load_f64(x, in->dtype, base + j * inner + l0, 1, c, buf);
                for (int64_t i = 0; i < c; i++) {
                    if (argmax_better(buf[i], best[i])) {
                        best[i] = buf[i];
                        oi[i] = (int32_t)j;
                    }
                }
            }
        }
    }
    return VF_OK;
}
