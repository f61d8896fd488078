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

void vf_cpu_load_f64(const void *base, vf_dtype t, int64_t off, int64_t stride, int64_t n,
                     double *dst)
{
    switch (t) {
    case VF_F32: {
        const float *p = (const float *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case VF_F16: {
        const uint16_t *p = (const uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = vf_f16_to_f32(p[i * stride]);
        break;
    }
    case VF_I32: {
        const int32_t *p = (const int32_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case VF_U32: {
        const uint32_t *p = (const uint32_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case VF_BOOL: {
        const uint8_t *p = (const uint8_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride] ? 1.0 : 0.0;
        break;
    }
    }
}

void vf_cpu_load_i64(const void *base, vf_dtype t, int64_t off, int64_t stride, int64_t n,
                     int64_t *dst)
{
    switch (t) {
    case VF_I32: {
        const int32_t *p = (const int32_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case VF_U32: {
        const uint32_t *p = (const uint32_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride];
        break;
    }
    case VF_BOOL: {
        const uint8_t *p = (const uint8_t *)base + off;
        for (int64_t i = 0; i < n; i++) dst[i] = p[i * stride] ? 1 : 0;
        break;
    }
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
    case VF_F32: {
        float *p = (float *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = (float)src[i];
        break;
    }
    case VF_F16: {
        uint16_t *p = (uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = vf_f32_to_f16((float)src[i]);
        break;
    }
    case VF_BOOL: {
        uint8_t *p = (uint8_t *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = src[i] != 0.0;
        break;
    }
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
    case VF_I32: {
        int32_t *p = (int32_t *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = (int32_t)(uint32_t)(uint64_t)src[i];
        break;
    }
    case VF_U32: {
        uint32_t *p = (uint32_t *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = (uint32_t)(uint64_t)src[i];
        break;
    }
    case VF_BOOL: {
        uint8_t *p = (uint8_t *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = src[i] != 0;
        break;
    }
    case VF_F32: {
        float *p = (float *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = (float)src[i];
        break;
    }
    case VF_F16: {
        uint16_t *p = (uint16_t *)base + off;
        for (int64_t i = 0; i < n; i++) p[i] = vf_f32_to_f16((float)src[i]);
        break;
    }
    }
}

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
