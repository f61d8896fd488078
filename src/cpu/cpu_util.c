/* Shared helpers of the CPU kernels: typed row conversion and loop
 * simplification. The conversions have the dtype switch outside the element
 * loop so each case is a tight (vectorisable) loop. */
#include "cpu/cpu.h"

#include <math.h>

int64_t vf_cpu_numel(const vf_tref *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

/* Each dtype case of the conversions below is one tight loop, written once:
   LOAD_CASE reads n elements of type T a stride apart into dst, STORE_CASE
   writes n contiguous elements of type T from src; CONV converts one. */
#define LOAD_CASE(DT, T, CONV)                                                \
    case DT: {                                                                \
        const T *p = (const T *)base + off;                                   \
        for (int64_t i = 0; i < n; i++) dst[i] = CONV(p[i * stride]);         \
        break;                                                                \
    }
#define STORE_CASE(DT, T, CONV)                                               \
    case DT: {                                                                \
        T *p = (T *)base + off;                                               \
        for (int64_t i = 0; i < n; i++) p[i] = CONV(src[i]);                  \
        break;                                                                \
    }
#define CV_SAME(x) (x)
#define CV_BOOL01(x) ((x) ? 1 : 0)
#define CV_NONZERO(x) ((x) != 0)
#define CV_TO_F32(x) ((float)(x))
#define CV_TO_F16(x) vf_f32_to_f16((float)(x))
#define CV_TO_U32(x) ((uint32_t)(uint64_t)(x))
#define CV_TO_I32(x) ((int32_t)CV_TO_U32(x)) /* wraps, as the GPU's int cast */
/* the cases both directions share: integers and bools read as they are,
   floats and bools written from either source type */
#define LOAD_INT_CASES                                                        \
    LOAD_CASE(VF_I32, int32_t, CV_SAME)                                       \
    LOAD_CASE(VF_U32, uint32_t, CV_SAME)                                      \
    LOAD_CASE(VF_BOOL, uint8_t, CV_BOOL01)
#define STORE_FLOAT_CASES                                                     \
    STORE_CASE(VF_F32, float, CV_TO_F32)                                      \
    STORE_CASE(VF_F16, uint16_t, CV_TO_F16)                                   \
    STORE_CASE(VF_BOOL, uint8_t, CV_NONZERO)

void vf_cpu_load_f64(const void *base, vf_dtype t, int64_t off, int64_t stride, int64_t n,
                     double *dst)
{
    switch (t) {
    LOAD_CASE(VF_F32, float, CV_SAME)
    LOAD_CASE(VF_F16, uint16_t, vf_f16_to_f32)
    LOAD_INT_CASES
    }
}

void vf_cpu_load_i64(const void *base, vf_dtype t, int64_t off, int64_t stride, int64_t n,
                     int64_t *dst)
{
    switch (t) {
    LOAD_INT_CASES
    case VF_F32:
    case VF_F16:
        /* Not used by the kernels (float sources take the f64 path); kept
           defined: truncate through an i32 cast so the result is bounded. */
        for (int64_t i = 0; i < n; i++) {
            double v[1];
            int32_t r;
            vf_cpu_load_f64(base, t, off + i * stride, 0, 1, v);
            vf_store_f64(&r, VF_I32, 0, v[0]);
            dst[i] = r;
        }
        break;
    }
}

void vf_cpu_store_f64(void *base, vf_dtype t, int64_t off, int64_t n, const double *src)
{
    switch (t) {
    STORE_FLOAT_CASES
    case VF_I32:
    case VF_U32:
        /* Saturation and NaN -> 0 live in vf_store_f64: one definition. */
        for (int64_t i = 0; i < n; i++) vf_store_f64(base, t, off + i, src[i]);
        break;
    }
}

void vf_cpu_store_i64(void *base, vf_dtype t, int64_t off, int64_t n, const int64_t *src)
{
    switch (t) {
    STORE_CASE(VF_I32, int32_t, CV_TO_I32)
    STORE_CASE(VF_U32, uint32_t, CV_TO_U32)
    STORE_FLOAT_CASES
    }
}

#undef LOAD_INT_CASES
#undef STORE_FLOAT_CASES
#undef LOAD_CASE
#undef STORE_CASE

void vf_cpu_contig_strides(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; d--) {
        st[d] = s;
        s *= shape[d];
    }
}

void vf_cpu_broadcast_strides(int rank, const int64_t *shape, int out_rank, const int64_t *out_shape,
                              int64_t *st)
{
    int64_t own[VF_MAX_RANK];
    vf_cpu_contig_strides(rank, shape, own);
    for (int d = 0; d < out_rank; d++) {
        int k = d - (out_rank - rank);
        if (k < 0 || (shape[k] == 1 && out_shape[d] != 1))
            st[d] = 0;
        else
            st[d] = own[k];
    }
}

void vf_cpu_dims_simplify(int *rank, int64_t *dim, int nops, int64_t (*st)[VF_MAX_RANK])
{
    /* Size-1 dims never move any offset. */
    int r = 0;
    for (int d = 0; d < *rank; d++) {
        if (dim[d] == 1) continue;
        dim[r] = dim[d];
        for (int j = 0; j < nops; j++) st[j][r] = st[j][d];
        r++;
    }
    *rank = r;
    if (r == 0) return;
    /* Merge d into its inner neighbour when stepping d is the same as
       stepping the neighbour dim[inner] times, for every operand. */
    int w = 0;
    for (int d = 1; d < r; d++) {
        bool mergeable = true;
        for (int j = 0; j < nops; j++)
            if (st[j][w] != st[j][d] * dim[d]) mergeable = false;
        if (mergeable) {
            dim[w] *= dim[d];
        } else {
            w++;
            dim[w] = dim[d];
        }
        for (int j = 0; j < nops; j++) st[j][w] = st[j][d];
    }
    *rank = w + 1;
}

void vf_cpu_loop_simplify(vf_cpu_loop *l) { vf_cpu_dims_simplify(&l->rank, l->dim, l->nops, l->st); }

int64_t vf_cpu_loop_count(const vf_cpu_loop *l, int lo, int hi)
{
    int64_t n = 1;
    for (int d = lo; d < hi; d++) n *= l->dim[d];
    return n;
}
