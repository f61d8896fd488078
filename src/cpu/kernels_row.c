/* Row ops: softmax / log_softmax along any axis, and sparse softmax cross
 * entropy, with the row maximum subtracted, so 1e30 logits stay finite.
 * f32 rows along the last axis (the common case: logits, attention) run
 * fast_math.c's float rows, vectorised; other dtypes and strided rows
 * (inner > 1) are computed in double, softmax's exp fast_math.h's (no libm
 * call per element).
 *
 * For softmax the tensor is viewed as [outer, n, inner] (n along the axis).
 * A block of `c` adjacent lanes of the inner dim (c = 1 when inner == 1) is
 * gathered into a double buffer laid out [n][c], processed, and scattered
 * back; the buffer is sized so one block stays modest even for long rows.
 * Blocks are split across the backend's threads (cpu_threads.h), each
 * computed as on one thread: the bits do not depend on the thread count.
 */
#include "cpu/cpu.h"
#include "cpu/cpu_threads.h"
#include "cpu/fast_math.h"
#include "util/fault.h"

#include <math.h>
#include <stdlib.h>

/* Target doubles per block buffer: 512 KiB. */
#define ROW_BLOCK_ELEMS 65536
/* Elements per part for the float rows (about a nanosecond each): a part
   is worth waking a worker. */
#define FAST_ROW_GRAIN 8192

static void softmax_block(double *b, int64_t n, int64_t c, bool log_out)
{
    for (int64_t l = 0; l < c; l++) {
        double m = -INFINITY;
        for (int64_t j = 0; j < n; j++) {
            double v = b[j * c + l];
            if (v > m || isnan(v)) m = v; /* NaN propagates to the row */
        }
        double s = 0;
        if (log_out) {
            for (int64_t j = 0; j < n; j++) s += vf_fm_exp(b[j * c + l] - m);
            double ls = log(s);
            for (int64_t j = 0; j < n; j++) b[j * c + l] = b[j * c + l] - m - ls;
        } else {
            /* keep the exponentials: one exp per element */
            for (int64_t j = 0; j < n; j++) s += b[j * c + l] = vf_fm_exp(b[j * c + l] - m);
            for (int64_t j = 0; j < n; j++) b[j * c + l] /= s;
        }
    }
}

void vf_cpu_softmax_row_f32(const float *x, int64_t stride, float *y, int64_t n, bool log_out, double *tmp)
{
    if (stride == 1) { /* softmax_part's fast rows */
        vf_cpu_fm_softmax_rows_f32(x, y, 1, n, log_out);
        return;
    }
    /* softmax_part's steps for a row along the last axis (one lane) */
    vf_cpu_load_f64(x, VF_F32, 0, stride, n, tmp);
    softmax_block(tmp, n, 1, log_out);
    vf_cpu_store_f64(y, VF_F32, 0, n, tmp);
}

/* Softmax split across threads by blocks (an item: block l0 of outer row
   o); each part has its own block buffer. */
typedef struct sm_job {
    const vf_exec *e;
    int64_t n, inner, c, blocks;
    bool log_out;
    bool fast;      /* f32 rows along the last axis: fast_math.c's */
    double *b;      /* parts buffers of n * c (unless fast) */
} sm_job;

static void softmax_part(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)parts;
    const sm_job *j = arg;
    const vf_tref *in = &j->e->in[0], *out = &j->e->out;
    const void *x = vf_cpu_ptr(in);
    void *y = vf_cpu_ptr(out);
    int64_t n = j->n, inner = j->inner;
    if (j->fast) {
        vf_cpu_fm_softmax_rows_f32((const float *)x + lo * n, (float *)y + lo * n, hi - lo, n, j->log_out);
        return;
    }
    double *b = j->b + (size_t)part * (size_t)(n * j->c);
    for (int64_t it = lo; it < hi; it++) {
        int64_t o = it / j->blocks, l0 = it % j->blocks * j->c;
        int64_t base = o * n * inner;
        int64_t w = inner - l0 < j->c ? inner - l0 : j->c;
        if (inner == 1) {
            vf_cpu_load_f64(x, in->dtype, base, 1, n, b);
        } else {
            for (int64_t k = 0; k < n; k++)
                vf_cpu_load_f64(x, in->dtype, base + k * inner + l0, 1, w, b + k * w);
        }
        softmax_block(b, n, w, j->log_out);
        if (inner == 1) {
            vf_cpu_store_f64(y, out->dtype, base, n, b);
        } else {
            for (int64_t k = 0; k < n; k++)
                vf_cpu_store_f64(y, out->dtype, base + k * inner + l0, w, b + k * w);
        }
    }
}

vf_status vf_cpu_softmax(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *in = &e->in[0];
    int axis = e->attrs.axis;
    if (e->n_in != 1 || axis < 0 || axis >= in->rank || !vf_dtype_is_float(in->dtype))
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: softmax wants one float input and an axis in [0, %d) "
                          "(got axis %d)", in->rank, axis);
    if (vf_cpu_numel(in) == 0) return VF_OK;
    int64_t outer = 1, n = in->shape[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= in->shape[d];
    for (int d = axis + 1; d < in->rank; d++) inner *= in->shape[d];

    int64_t c = ROW_BLOCK_ELEMS / n;
    if (c < 1) c = 1;
    if (c > inner) c = inner;
    sm_job j = {.e = e, .n = n, .inner = inner, .c = c, .blocks = (inner + c - 1) / c,
                .log_out = e->op == VF_OP_LOG_SOFTMAX,
                .fast = inner == 1 && in->dtype == VF_F32 && e->out.dtype == VF_F32};
    if (j.fast) {
        vf_cpu_parallel(cpu->workers, outer, FAST_ROW_GRAIN / n > 1 ? FAST_ROW_GRAIN / n : 1, softmax_part, &j);
        return VF_OK;
    }
    int parts = vf_cpu_parts(cpu->workers, outer * j.blocks, vf_cpu_grain_items(n * c));
    j.b = vf_malloc((size_t)(n * c) * (size_t)parts * sizeof *j.b);
    if (!j.b)
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                          "cpu backend: softmax: out of host memory (malloc failed) for a %lld x %lld row block",
                          (long long)n, (long long)c);
    vf_cpu_parallel(cpu->workers, outer * j.blocks, vf_cpu_grain_items(n * c), softmax_part, &j);
    free(j.b);
    return VF_OK;
}

/* Sparse cross entropy split across threads by rows; each part has its
   own row buffer. */
typedef struct xent_job {
    const vf_exec *e;
    int64_t classes;
    bool fast;      /* f32 logits: fast_math.c's rows */
    double *b;      /* parts buffers of classes (unless fast) */
} xent_job;

static void xent_part(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)parts;
    const xent_job *j = arg;
    const vf_tref *lab = &j->e->in[0], *lg = &j->e->in[1];
    const void *labels = vf_cpu_ptr(lab), *x = vf_cpu_ptr(lg);
    void *y = vf_cpu_ptr(&j->e->out);
    int64_t classes = j->classes;
    double *b = j->fast ? NULL : j->b + (size_t)part * (size_t)(classes > 0 ? classes : 1);
    int64_t fast_rows = 0;
    for (int64_t r = lo; r < hi; r++) {
        int64_t label;
        vf_cpu_load_i64(labels, lab->dtype, r, 0, 1, &label);
        double loss = NAN;
        if (label >= 0 && label < classes && j->fast) {
            loss = vf_cpu_fm_xent_row((const float *)x + r * classes, classes, label); /* f32 logits */
            fast_rows++;
        } else if (label >= 0 && label < classes) {
            vf_cpu_load_f64(x, lg->dtype, r * classes, 1, classes, b);
            double m = -INFINITY;
            for (int64_t k = 0; k < classes; k++)
                if (b[k] > m || isnan(b[k])) m = b[k];
            double s = 0;
            for (int64_t k = 0; k < classes; k++) s += exp(b[k] - m);
            /* logsumexp - x[label], with m taken out of both terms */
            loss = log(s) - (b[label] - m);
        }
        vf_cpu_store_f64(y, j->e->out.dtype, r, 1, &loss);
    }
    if (fast_rows) vf_cpu_fm_softmax_rows_add(fast_rows);
}

vf_status vf_cpu_sparse_xent(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *lab = &e->in[0], *lg = &e->in[1];
    if (e->n_in != 2 || lg->rank < 1 || lab->rank != lg->rank - 1 ||
        (lab->dtype != VF_I32 && lab->dtype != VF_U32) || !vf_dtype_is_float(lg->dtype))
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: sparse_softmax_cross_entropy wants i32/u32 labels [L] and "
                          "float logits [L, C]");
    int64_t rows = vf_cpu_numel(lab), classes = lg->shape[lg->rank - 1];
    if (rows == 0) return VF_OK;
    xent_job j = {.e = e, .classes = classes, .fast = lg->dtype == VF_F32};
    if (j.fast) { /* no buffer */
        int64_t grain = classes > 0 && FAST_ROW_GRAIN / classes > 1 ? FAST_ROW_GRAIN / classes : 1;
        vf_cpu_parallel(cpu->workers, rows, grain, xent_part, &j);
        return VF_OK;
    }
    int64_t grain = vf_cpu_grain_items(classes);
    int parts = vf_cpu_parts(cpu->workers, rows, grain);
    j.b = vf_malloc((size_t)(classes > 0 ? classes : 1) * (size_t)parts * sizeof *j.b);
    if (!j.b)
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                          "cpu backend: sparse_softmax_cross_entropy: out of host memory (malloc failed) for a row of %lld",
                          (long long)classes);
    vf_cpu_parallel(cpu->workers, rows, grain, xent_part, &j);
    free(j.b);
    return VF_OK;
}
