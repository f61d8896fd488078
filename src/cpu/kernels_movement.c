/* Data movement and sources on the CPU: transpose, broadcast copy, fill,
 * random_normal. Copies move bytes (1, 2 or 4 per element) rather than
 * values, so they work for every dtype and keep NaN payloads. */
#include "cpu/cpu.h"
#include "util/philox.h"

#include <string.h>

#define TILE 32

#define TILE_COPY(T)                                                                        \
    for (int64_t i0 = 0; i0 < rows; i0 += TILE)                                             \
        for (int64_t j0 = 0; j0 < cols; j0 += TILE) {                                       \
            int64_t ie = i0 + TILE < rows ? i0 + TILE : rows;                               \
            int64_t je = j0 + TILE < cols ? j0 + TILE : cols;                               \
            for (int64_t i = i0; i < ie; i++)                                               \
                for (int64_t j = j0; j < je; j++)                                           \
                    ((T *)o)[i * ost + j] = ((const T *)in)[i + j * ist];                   \
        }

/* A transpose-like walk (the innermost output dim strided in the input, some
   outer output dim contiguous in it) reads one cache line per element when
   copied row by row; copying 32x32 tiles of those two dims keeps the reads
   in cache. Returns false when the layout is not of that kind. */
static bool tiled_copy(const vf_cpu_loop *l, size_t esize, void *dst, const void *src)
{
    int r = l->rank;
    if (r < 2 || l->st[1][r - 1] == 1) return false;
    int q = -1;
    for (int d = 0; d < r - 1; d++)
        if (l->st[1][d] == 1) q = d;
    if (q < 0) return false;
    /* the remaining dims, walked by a cursor */
    vf_cpu_loop rest = {.nops = 2};
    for (int d = 0; d < r - 1; d++) {
        if (d == q) continue;
        rest.dim[rest.rank] = l->dim[d];
        rest.st[0][rest.rank] = l->st[0][d];
        rest.st[1][rest.rank++] = l->st[1][d];
    }
    int64_t rows = l->dim[q], cols = l->dim[r - 1], ost = l->st[0][q], ist = l->st[1][r - 1];
    int64_t outer = vf_cpu_loop_count(&rest, 0, rest.rank);
    vf_cpu_cursor cur;
    vf_cpu_cursor_init(&cur, 2);
    for (int64_t k = 0; k < outer; k++) {
        char *o = (char *)dst + (size_t)cur.off[0] * esize;
        const char *in = (const char *)src + (size_t)cur.off[1] * esize;
        if (esize == 4) {
            TILE_COPY(uint32_t)
        } else if (esize == 2) {
            TILE_COPY(uint16_t)
        } else {
            TILE_COPY(uint8_t)
        }
        vf_cpu_cursor_next(&rest, rest.rank, &cur);
    }
    return true;
}

/* Copies the elements of `src` visited by the loop (operand 1 = source
   strides, operand 0 = destination, contiguous) into dst. */
static void strided_copy(vf_cpu_loop *l, size_t esize, void *dst, const void *src)
{
    vf_cpu_loop_simplify(l);
    if (tiled_copy(l, esize, dst, src)) return;
    int64_t inner = l->rank ? l->dim[l->rank - 1] : 1;
    int64_t ist = l->rank ? l->st[1][l->rank - 1] : 0;
    int outer_rank = l->rank ? l->rank - 1 : 0;
    int64_t rows = vf_cpu_loop_count(l, 0, outer_rank);
    vf_cpu_cursor cur;
    vf_cpu_cursor_init(&cur, l->nops);
    for (int64_t r = 0; r < rows; r++) {
        char *o = (char *)dst + (size_t)cur.off[0] * esize;
        const char *i = (const char *)src + (size_t)cur.off[1] * esize;
        if (ist == 1) {
            /* memmove: an in-place COPY has dst == src */
            memmove(o, i, (size_t)inner * esize);
        } else if (esize == 4) {
            uint32_t *po = (uint32_t *)(void *)o;
            const uint32_t *pi = (const uint32_t *)(const void *)i;
            for (int64_t k = 0; k < inner; k++) po[k] = pi[k * ist];
        } else if (esize == 2) {
            uint16_t *po = (uint16_t *)(void *)o;
            const uint16_t *pi = (const uint16_t *)(const void *)i;
            for (int64_t k = 0; k < inner; k++) po[k] = pi[k * ist];
        } else {
            uint8_t *po = (uint8_t *)o;
            const uint8_t *pi = (const uint8_t *)i;
            for (int64_t k = 0; k < inner; k++) po[k] = pi[k * ist];
        }
        vf_cpu_cursor_next(l, outer_rank, &cur);
    }
}

vf_status vf_cpu_transpose(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *in = &e->in[0];
    if (e->n_in != 1 || in->rank != e->out.rank || in->dtype != e->out.dtype)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: transpose wants one input of the output's rank and dtype");
    if (vf_cpu_numel(&e->out) == 0) return VF_OK;
    int64_t in_st[VF_MAX_RANK];
    vf_cpu_contig_strides(in->rank, in->shape, in_st);
    vf_cpu_loop l = {.rank = e->out.rank, .nops = 2};
    for (int d = 0; d < l.rank; d++) {
        int p = e->attrs.perm[d];
        if (p < 0 || p >= in->rank || in->shape[p] != e->out.shape[d])
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                              "cpu backend: transpose perm[%d] = %d does not match the shapes", d, p);
        l.dim[d] = e->out.shape[d];
        l.st[1][d] = in_st[p];
    }
    vf_cpu_contig_strides(l.rank, l.dim, l.st[0]);
    strided_copy(&l, vf_dtype_size(in->dtype), vf_cpu_ptr(&e->out), vf_cpu_ptr(in));
    return VF_OK;
}

vf_status vf_cpu_broadcast_copy(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *in = &e->in[0];
    if (in->dtype != e->out.dtype)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: copy from %s to %s", vf_dtype_name(in->dtype),
                          vf_dtype_name(e->out.dtype));
    if (vf_cpu_numel(&e->out) == 0) return VF_OK;
    vf_cpu_loop l = {.rank = e->out.rank, .nops = 2};
    for (int d = 0; d < l.rank; d++) l.dim[d] = e->out.shape[d];
    vf_cpu_contig_strides(l.rank, l.dim, l.st[0]);
    vf_cpu_broadcast_strides(in->rank, in->shape, l.rank, l.dim, l.st[1]);
    strided_copy(&l, vf_dtype_size(in->dtype), vf_cpu_ptr(&e->out), vf_cpu_ptr(in));
    return VF_OK;
}

vf_status vf_cpu_fill(vf_cpu *cpu, const vf_exec *e)
{
    (void)cpu;
    int64_t n = vf_cpu_numel(&e->out);
    if (n == 0) return VF_OK;
    void *o = vf_cpu_ptr(&e->out);
    /* Store once with the cast rules, then replicate the bytes. */
    union { float f; uint16_t h; int32_t i; uint32_t u; uint8_t b; } v;
    vf_store_f64(&v, e->out.dtype, 0, e->attrs.value);
    switch (e->out.dtype) {
    case VF_F32:
    case VF_I32:
    case VF_U32:
        for (int64_t i = 0; i < n; i++) ((uint32_t *)o)[i] = v.u;
        break;
    case VF_F16:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)o)[i] = v.h;
        break;
    case VF_BOOL:
        memset(o, v.b, (size_t)n);
        break;
    }
    return VF_OK;
}

vf_status vf_cpu_random_normal(vf_cpu *cpu, const vf_exec *e)
{
    vf_dtype t = e->out.dtype;
    if (!vf_dtype_is_float(t))
        return vf_err_set(cpu->err, VF_ERROR_DTYPE, "cpu backend: random_normal of dtype %s",
                          vf_dtype_name(t));
    int64_t n = vf_cpu_numel(&e->out);
    void *o = vf_cpu_ptr(&e->out);
    for (int64_t k = 0; 2 * k < n; k++) {
        float pair[2];
        vf_normal_pair(e->attrs.seed, (uint64_t)k, pair);
        /* odd n: the last element is element 0 of its pair */
        int m = 2 * k + 1 < n ? 2 : 1;
        for (int j = 0; j < m; j++) {
            if (t == VF_F32)
                ((float *)o)[2 * k + j] = pair[j];
            else
                ((uint16_t *)o)[2 * k + j] = vf_f32_to_f16(pair[j]);
        }
    }
    return VF_OK;
}
