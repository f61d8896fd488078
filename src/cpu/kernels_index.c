/* Indexing ops on the CPU (VF_KIND_INDEX): gather and scatter_add; and
 * the IOTA source under vf_range and vf_one_hot.
 *
 * Both see x as [outer, n, inner] around attrs.axis and the indices as J
 * flat positions, so gather's result is [outer, J, inner] and
 * scatter_add's updates are too. An index outside [0, n) is an error here
 * (the reference backend says which index and where it is); the Vulkan
 * kernels document what they do instead (include/vkfuse.h). */
#include "cpu/cpu.h"
#include "util/fault.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t outer, n, inner, J;
} axis_split;

static axis_split split_at(const vf_tref *x, const vf_tref *idx, int axis)
{
    axis_split s = {1, x->shape[axis], 1, vf_cpu_numel(idx)};
    for (int d = 0; d < axis; d++) s.outer *= x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) s.inner *= x->shape[d];
    return s;
}

/* The indices widened to int64 (i32 or u32), checked against [0, n): on
   the first one outside, the error names it and its position. */
static int64_t *load_indices(vf_cpu *cpu, const char *op, const vf_tref *idx, int64_t n, int axis,
                             const vf_tref *x, vf_status *st)
{
    int64_t J = vf_cpu_numel(idx);
    int64_t *v = vf_malloc(sizeof *v * (size_t)J);
    if (!v) {
        *st = vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY, "vf_%s: out of host memory (malloc failed) for %lld indices", op, (long long)J);
        return NULL;
    }
    vf_cpu_load_i64(vf_cpu_ptr(idx), idx->dtype, 0, 1, J, v);
    for (int64_t j = 0; j < J; j++) {
        if (v[j] >= 0 && v[j] < n) continue;
        char pos[160], xs[160];
        size_t p = 0, q = 0;
        int64_t rest = j, at[VF_MAX_RANK];
        for (int d = idx->rank - 1; d >= 0; d--) at[d] = rest % idx->shape[d], rest /= idx->shape[d];
        for (int d = 0; d < idx->rank && p < sizeof pos; d++)
            p += (size_t)snprintf(pos + p, sizeof pos - p, "%s%lld", d ? "," : "", (long long)at[d]);
        if (idx->rank == 0) snprintf(pos, sizeof pos, "(scalar)");
        for (int d = 0; d < x->rank && q < sizeof xs; d++)
            q += (size_t)snprintf(xs + q, sizeof xs - q, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        *st = vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                   "vf_%s: indices[%s] = %lld is out of range for axis %d of x [%s] (valid: 0 to %lld); "
                   "clamp the indices (vf_minimum / vf_maximum) or mask them before the op", op, pos,
                   (long long)v[j], axis, xs, (long long)n - 1);
        free(v);
        return NULL;
    }
    return v;
}

static vf_status gather(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *x = &e->in[0], *idx = &e->in[1];
    axis_split s = split_at(x, idx, e->attrs.axis);
    vf_status st = VF_OK;
    int64_t *iv = load_indices(cpu, "gather", idx, s.n, e->attrs.axis, x, &st);
    if (!iv) return st;
    size_t es = vf_dtype_size(x->dtype), row = (size_t)s.inner * es;
    const char *src = vf_cpu_ptr(x);
    char *dst = vf_cpu_ptr(&e->out);
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t j = 0; j < s.J; j++)
            memcpy(dst + (size_t)(o * s.J + j) * row, src + (size_t)(o * s.n + iv[j]) * row, row);
    free(iv);
    return VF_OK;
}

/* Sums in double (integers in int64, wrapped to 32 bits on store), each
   output rounded once: duplicates accumulate in index order. */
static vf_status scatter_add(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *x = &e->in[0], *idx = &e->in[1], *upd = &e->in[2];
    axis_split s = split_at(x, idx, e->attrs.axis);
    vf_status st = VF_OK;
    int64_t *iv = load_indices(cpu, "scatter_add", idx, s.n, e->attrs.axis, x, &st);
    if (!iv) return st;
    int64_t N = vf_cpu_numel(x);
    bool flt = vf_dtype_is_float(x->dtype);
    double *fa = flt ? vf_malloc(sizeof *fa * (size_t)N) : NULL;
    int64_t *ia = flt ? NULL : vf_malloc(sizeof *ia * (size_t)N);
    double *fu = flt ? vf_malloc(sizeof *fu * (size_t)s.inner) : NULL;
    int64_t *iu = flt ? NULL : vf_malloc(sizeof *iu * (size_t)s.inner);
    if ((flt && (!fa || !fu)) || (!flt && (!ia || !iu))) {
        free(iv), free(fa), free(ia), free(fu), free(iu);
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY, "vf_scatter_add: out of host memory (malloc failed)");
    }
    if (flt) vf_cpu_load_f64(vf_cpu_ptr(x), x->dtype, 0, 1, N, fa);
    else vf_cpu_load_i64(vf_cpu_ptr(x), x->dtype, 0, 1, N, ia);
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t j = 0; j < s.J; j++) {
            int64_t from = (o * s.J + j) * s.inner, to = (o * s.n + iv[j]) * s.inner;
            if (flt) {
                vf_cpu_load_f64(vf_cpu_ptr(upd), upd->dtype, from, 1, s.inner, fu);
                for (int64_t c = 0; c < s.inner; c++) fa[to + c] += fu[c];
            } else {
                vf_cpu_load_i64(vf_cpu_ptr(upd), upd->dtype, from, 1, s.inner, iu);
                for (int64_t c = 0; c < s.inner; c++) ia[to + c] = (int64_t)((uint64_t)ia[to + c] + (uint64_t)iu[c]);
            }
        }
    if (flt) vf_cpu_store_f64(vf_cpu_ptr(&e->out), e->out.dtype, 0, N, fa);
    else vf_cpu_store_i64(vf_cpu_ptr(&e->out), e->out.dtype, 0, N, ia);
    free(iv), free(fa), free(ia), free(fu), free(iu);
    return VF_OK;
}

/* 0, 1, 2, ... converted with the cast rules (f16 past 2048 rounds) */
static vf_status iota(const vf_exec *e)
{
    int64_t N = vf_cpu_numel(&e->out), v[VF_CPU_CHUNK];
    for (int64_t b = 0; b < N; b += VF_CPU_CHUNK) {
        int64_t m = N - b < VF_CPU_CHUNK ? N - b : VF_CPU_CHUNK;
        for (int64_t k = 0; k < m; k++) v[k] = b + k;
        vf_cpu_store_i64(vf_cpu_ptr(&e->out), e->out.dtype, b, m, v);
    }
    return VF_OK;
}

/* Running sums along the axis in double (integers in int64, wrapped on
   store), each output rounded once; trans_a: exclusive, trans_b: reverse. */
static vf_status cumsum(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *x = &e->in[0];
    int axis = e->attrs.axis;
    bool excl = e->attrs.trans_a, rev = e->attrs.trans_b, flt = vf_dtype_is_float(x->dtype);
    int64_t outer = 1, n = x->shape[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->shape[d];
    double *fv = flt ? vf_malloc(sizeof *fv * (size_t)n) : NULL;
    int64_t *iv = flt ? NULL : vf_malloc(sizeof *iv * (size_t)n);
    if (!fv && !iv) return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY, "vf_cumsum: out of host memory (malloc failed)");
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < inner; c++) {
            int64_t base = o * n * inner + c;
            if (flt) vf_cpu_load_f64(vf_cpu_ptr(x), x->dtype, base, inner, n, fv);
            else vf_cpu_load_i64(vf_cpu_ptr(x), x->dtype, base, inner, n, iv);
            double fa = 0;
            uint64_t ia = 0;
            for (int64_t p = 0; p < n; p++) {
                int64_t k = rev ? n - 1 - p : p;
                if (flt) {
                    double v = fv[k];
                    if (!excl) fa += v;
                    fv[k] = fa;
                    if (excl) fa += v;
                } else {
                    uint64_t v = (uint64_t)iv[k];
                    if (!excl) ia += v;
                    iv[k] = (int64_t)ia;
                    if (excl) ia += v;
                }
            }
            /* strided store, one element at a time (the store helpers are contiguous) */
            for (int64_t k = 0; k < n; k++) {
                if (flt) vf_cpu_store_f64(vf_cpu_ptr(&e->out), e->out.dtype, base + k * inner, 1, &fv[k]);
                else vf_cpu_store_i64(vf_cpu_ptr(&e->out), e->out.dtype, base + k * inner, 1, &iv[k]);
            }
        }
    free(fv), free(iv);
    return VF_OK;
}

/* top_k order: descending, NaN above every number, ties (and NaNs) by
   lower index first: a total order, so qsort's instability does not show */
typedef struct {
    double v;
    int64_t i;
} tk_item;

static int tk_cmp(const void *pa, const void *pb)
{
    const tk_item *a = pa, *b = pb;
    bool na = isnan(a->v), nb = isnan(b->v);
    if (na != nb) return na ? -1 : 1;
    if (!na && a->v != b->v) return a->v > b->v ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

static vf_status top_k(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *x = &e->in[0];
    int64_t n = x->shape[x->rank - 1], k = (int64_t)e->attrs.value, rows = vf_cpu_numel(x) / n;
    tk_item *it = vf_malloc(sizeof *it * (size_t)n);
    double *row = vf_malloc(sizeof *row * (size_t)n), *val = vf_malloc(sizeof *val * (size_t)k);
    int64_t *idx = vf_malloc(sizeof *idx * (size_t)k);
    if (!it || !row || !val || !idx) {
        free(it), free(row), free(val), free(idx);
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY, "vf_top_k: out of host memory (malloc failed)");
    }
    bool want_idx = e->op == VF_OP_TOP_K_INDICES;
    for (int64_t r = 0; r < rows; r++) {
        vf_cpu_load_f64(vf_cpu_ptr(x), x->dtype, r * n, 1, n, row);   /* exact for every numeric dtype */
        for (int64_t i = 0; i < n; i++) it[i] = (tk_item){row[i], i};
        qsort(it, (size_t)n, sizeof *it, tk_cmp);
        for (int64_t j = 0; j < k; j++) val[j] = it[j].v, idx[j] = it[j].i;
        if (want_idx) vf_cpu_store_i64(vf_cpu_ptr(&e->out), VF_I32, r * k, k, idx);
        else vf_cpu_store_f64(vf_cpu_ptr(&e->out), e->out.dtype, r * k, k, val);
    }
    free(it), free(row), free(val), free(idx);
    return VF_OK;
}

vf_status vf_cpu_index(vf_cpu *cpu, const vf_exec *e)
{
    switch (e->op) {
    case VF_OP_TOP_K:
    case VF_OP_TOP_K_INDICES: return top_k(cpu, e);
    case VF_OP_CUMSUM: return cumsum(cpu, e);
    case VF_OP_IOTA: return iota(e);
    case VF_OP_GATHER: return gather(cpu, e);
    case VF_OP_SCATTER_ADD: return scatter_add(cpu, e);
    default: break;
    }
    return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: op %s has no kernel", vf_op_get(e->op)->name);
}
