/* Batched matmul with NumPy-broadcast batch dims, through OpenBLAS sgemm.
 *
 * f16 operands are widened to f32 temporaries first (f16 is a storage
 * type; the arithmetic is f32 as on the GPU) and the f32 result is rounded
 * back. When b is shared by every batch and a is a plain stack of row-major
 * matrices, the batch folds into m: one big sgemm instead of many small.
 */
#include "cpu/cpu.h"
#include "cpu/blas.h"
#include "util/fault.h"

#include <limits.h>
#include <stdlib.h>

typedef struct mm_dims {
    int64_t m, n, k;
    int64_t a_mat, b_mat, c_mat; /* elements per matrix */
} mm_dims;

static float *widen_f16(const vf_tref *t, int64_t n)
{
    float *f = vf_malloc((size_t)(n > 0 ? n : 1) * sizeof *f);
    if (!f) return NULL;
    const uint16_t *h = vf_cpu_ptr(t);
    for (int64_t i = 0; i < n; i++) f[i] = vf_f16_to_f32(h[i]);
    return f;
}

static void run_gemm(const vf_exec *e, const mm_dims *d, const float *A, const float *B, float *C)
{
    const vf_tref *a = &e->in[0], *b = &e->in[1];
    int ob = e->out.rank - 2;
    /* batch loop: operand 0 = out, 1 = a, 2 = b (in matrices) */
    vf_cpu_loop l = {.rank = ob, .nops = 3};
    for (int i = 0; i < ob; i++) l.dim[i] = e->out.shape[i];
    vf_cpu_contig_strides(ob, l.dim, l.st[0]);
    vf_cpu_broadcast_strides(a->rank - 2, a->shape, ob, l.dim, l.st[1]);
    vf_cpu_broadcast_strides(b->rank - 2, b->shape, ob, l.dim, l.st[2]);
    vf_cpu_loop_simplify(&l);

    int64_t batches = vf_cpu_loop_count(&l, 0, l.rank);
    bool b_shared = true, a_stacked = true;
    for (int i = 0; i < l.rank; i++) {
        if (l.st[2][i] != 0) b_shared = false;
        if (l.st[1][i] != l.st[0][i]) a_stacked = false;
    }
    int64_t m = d->m;
    if (batches > 1 && b_shared && a_stacked && !e->attrs.trans_a &&
        batches * m <= (int64_t)INT_MAX) {
        /* rows of every batch of a are consecutive: one [batches*m, k] @ [k, n] */
        m *= batches;
        batches = 1;
        l.rank = 0;
    }
    int ta = e->attrs.trans_a ? VF_BLAS_TRANS : VF_BLAS_NO_TRANS;
    int tb = e->attrs.trans_b ? VF_BLAS_TRANS : VF_BLAS_NO_TRANS;
    const vf_cpu_blas *blas = vf_cpu_blas_get();
    int64_t lda = e->attrs.trans_a ? d->m : d->k;
    int64_t ldb = e->attrs.trans_b ? d->k : d->n;
    if (lda < 1) lda = 1;
    if (ldb < 1) ldb = 1;
    int64_t ldc = d->n < 1 ? 1 : d->n;

    vf_cpu_cursor cur;
    vf_cpu_cursor_init(&cur, 3);
    for (int64_t i = 0; i < batches; i++) {
        blas->sgemm(VF_BLAS_ROW_MAJOR, ta, tb, (int)m, (int)d->n, (int)d->k, 1.0f,
                    A + cur.off[1] * d->a_mat, (int)lda, B + cur.off[2] * d->b_mat, (int)ldb, 0.0f,
                    C + cur.off[0] * d->c_mat, (int)ldc);
        vf_cpu_cursor_next(&l, l.rank, &cur);
    }
}

vf_status vf_cpu_matmul(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *a = &e->in[0], *b = &e->in[1];
    if (e->n_in != 2 || a->rank < 2 || b->rank < 2 || e->out.rank < 2 || a->dtype != b->dtype ||
        a->dtype != e->out.dtype || !vf_dtype_is_float(a->dtype))
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: matmul wants two float inputs of rank >= 2 and the "
                          "output's dtype");
    mm_dims d;
    d.m = e->attrs.trans_a ? a->shape[a->rank - 1] : a->shape[a->rank - 2];
    d.k = e->attrs.trans_a ? a->shape[a->rank - 2] : a->shape[a->rank - 1];
    d.n = e->attrs.trans_b ? b->shape[b->rank - 2] : b->shape[b->rank - 1];
    int64_t kb = e->attrs.trans_b ? b->shape[b->rank - 1] : b->shape[b->rank - 2];
    if (kb != d.k || e->out.shape[e->out.rank - 2] != d.m || e->out.shape[e->out.rank - 1] != d.n)
        return vf_err_set(cpu->err, VF_ERROR_SHAPE,
                          "cpu backend: matmul inner dims %lld and %lld (out %lld x %lld) disagree",
                          (long long)d.k, (long long)kb, (long long)e->out.shape[e->out.rank - 2],
                          (long long)e->out.shape[e->out.rank - 1]);
    if (d.m > INT_MAX || d.n > INT_MAX || d.k > INT_MAX)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: matmul dims %lld x %lld x %lld exceed BLAS int range",
                          (long long)d.m, (long long)d.k, (long long)d.n);
    d.a_mat = d.m * d.k;
    d.b_mat = d.k * d.n;
    d.c_mat = d.m * d.n;
    int64_t out_n = vf_cpu_numel(&e->out);
    if (out_n == 0) return VF_OK;
    if (!vf_cpu_blas_get()->ok)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: matmul: %s", vf_cpu_blas_get()->error);

    if (a->dtype == VF_F32) {
        run_gemm(e, &d, vf_cpu_ptr(a), vf_cpu_ptr(b), vf_cpu_ptr(&e->out));
        return VF_OK;
    }
    float *A = widen_f16(a, vf_cpu_numel(a));
    float *B = widen_f16(b, vf_cpu_numel(b));
    float *C = vf_malloc((size_t)out_n * sizeof *C);
    vf_status s = VF_OK;
    if (!A || !B || !C) {
        s = vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                       "cpu backend: matmul: out of host memory (malloc failed) for f32 copies of f16 operands (%lld "
                       "output elements)", (long long)out_n);
    } else {
        run_gemm(e, &d, A, B, C);
        uint16_t *o = vf_cpu_ptr(&e->out);
        for (int64_t i = 0; i < out_n; i++) o[i] = vf_f32_to_f16(C[i]);
    }
    free(A);
    free(B);
    free(C);
    return s;
}
