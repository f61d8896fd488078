/* Entry points of the indexing ops (issue 13): gather, scatter_add, and
 * range and one_hot, built from the IOTA source and elementwise ops (so
 * that they fuse with what uses them).
 * Argument checks and normalisation (negative axes), the empty cases the
 * backends never see, then one vf_exec (vf_run: eager, traced, taped). */
#include "api/api.h"
#include "api/hooks.h"
#include "util/dtype.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* x usable as op's input 0, of rank 1 or more. */
static bool rank1_input(vf_context *ctx, const char *name, vf_op op, vf_tensor *x)
{
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_dtype(ctx, op, x, 0)) return false;
    if (x->rank == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: x is a scalar; it needs rank >= 1 (reshape it to [1])", name);
        return false;
    }
    return true;
}

/* x and indices usable, the indices i32 or u32, the axis normalised. */
static bool index_args(vf_context *ctx, const char *name, vf_op op, vf_tensor *x, vf_tensor *indices, int axis,
                       int *a)
{
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_input(ctx, name, indices, 1)) return false;
    if (!vf_check_dtype(ctx, op, x, 0) || !vf_check_dtype(ctx, op, indices, 1)) return false;
    if (x->rank == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: x is a scalar; it needs rank >= 1 (reshape it to [1])", name);
        return false;
    }
    return vf_norm_axis(ctx, name, axis, x->rank, a);
}

vf_tensor *vf_gather(vf_context *ctx, vf_tensor *x, vf_tensor *indices, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_gather";
    if (!ctx || !x || !indices) return NULL;
    int a;
    if (!index_args(ctx, name, VF_OP_GATHER, x, indices, axis, &a)) return NULL;
    vf_exec e = {.op = VF_OP_GATHER, .n_in = 2, .attrs.axis = a};
    e.in[0] = vf_tensor_ref(x);
    e.in[1] = vf_tensor_ref(indices);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, false, &empty);
    if (!out) return empty;
    if (x->shape[a] == 0) { /* indices but nothing to index: each of them is out of range */
        char xs[VF_SHAPE_STR_LEN];
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: axis %d of x %s has size 0, so every index is out of range",
                name, axis, vf_shape_str(xs, sizeof xs, x->rank, x->shape));
        vf_tensor_release(out);
        return NULL;
    }
    return vf_run(ctx, &e, out);
}

vf_tensor *vf_scatter_add(vf_context *ctx, vf_tensor *x, vf_tensor *indices, vf_tensor *updates, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_scatter_add";
    if (!ctx || !x || !indices || !updates) return NULL;
    int a;
    if (!index_args(ctx, name, VF_OP_SCATTER_ADD, x, indices, axis, &a)) return NULL;
    if (!vf_check_input(ctx, name, updates, 2) || !vf_check_dtype(ctx, VF_OP_SCATTER_ADD, updates, 2)) return NULL;
    vf_exec e = {.op = VF_OP_SCATTER_ADD, .n_in = 3, .attrs.axis = a};
    e.in[0] = vf_tensor_ref(x);
    e.in[1] = vf_tensor_ref(indices);
    e.in[2] = vf_tensor_ref(updates);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, false, &empty);
    if (!out) return empty;
    if (updates->numel == 0) { /* nothing to add: x itself (its gradient the identity's) */
        vf_exec c = {.op = VF_OP_COPY, .n_in = 1};
        c.in[0] = vf_tensor_ref(x);
        return vf_run(ctx, &c, out);
    }
    return vf_run(ctx, &e, out);
}

/* 0, 1, ..., n - 1 (the IOTA source) of dtype dt, shape [n]. */
static vf_tensor *iota(vf_context *ctx, const char *name, vf_dtype dt, int64_t n)
{
    vf_tensor *out = vf_tensor_new(ctx, name, dt, 1, &n);
    if (!out || out->numel == 0) return out;
    vf_exec e = {.op = VF_OP_IOTA};
    return vf_run(ctx, &e, out);
}

vf_tensor *vf_range(vf_context *ctx, vf_dtype dtype, double start, double limit, double delta)
{
    VF_LOCKED(ctx);
    const char *name = "vf_range";
    if (!ctx) return NULL;
    if (!vf_dtype_valid((int)dtype) || dtype == VF_BOOL) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: dtype %s; a range is f32, f16, i32 or u32", name,
                vf_dtype_valid((int)dtype) ? vf_dtype_name(dtype) : "(invalid)");
        return NULL;
    }
    if (!isfinite(start) || !isfinite(limit) || !isfinite(delta) || delta == 0) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: start %g, limit %g, delta %g; all must be finite and delta "
                "non-zero", name, start, limit, delta);
        return NULL;
    }
    /* Every element lies between start and limit (limit excluded), so
       with both representable in the dtype so is every element: nothing
       wraps or overflows to inf (TF refuses such a range too). delta must
       be representable where the elements are computed: |delta| in the
       integer dtype (a u32 range may go down), f32 for floats. */
    bool flt = vf_dtype_is_float(dtype);
    double hi = dtype == VF_I32 ? (double)INT32_MAX : dtype == VF_U32 ? (double)UINT32_MAX
              : dtype == VF_F16 ? 65504.0 : (double)FLT_MAX;
    double lo = dtype == VF_I32 ? (double)INT32_MIN : dtype == VF_U32 ? 0.0 : -hi;
    double dmax = flt ? (double)FLT_MAX : hi, val = 0;
    const char *bad = NULL;
    if (start < lo || start > hi || (!flt && start != floor(start))) bad = "start", val = start;
    else if (limit < lo || limit > hi || (!flt && limit != floor(limit))) bad = "limit", val = limit;
    else if (fabs(delta) > dmax || (!flt && delta != floor(delta))) bad = "delta", val = delta;
    if (bad) {
        /* integers in full (1e10 as 10000000000), other values to f32's precision */
        char nums[4][32];
        const double shown[4] = {val, lo, hi, dmax};
        for (int k = 0; k < 4; k++)
            snprintf(nums[k], sizeof nums[k], fabs(shown[k]) < 1e15 && shown[k] == floor(shown[k]) ? "%.0f" : "%.9g",
                     shown[k]);
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %s %s is not representable in %s; start and limit must be %s "
                "in [%s, %s] and |delta| at most %s", name, bad, nums[0], vf_dtype_name(dtype),
                flt ? "finite values" : "integers", nums[1], nums[2], nums[3]);
        return NULL;
    }
    /* the length exactly: in int64 for integers (|limit - start| < 2^33, no
       32-bit arithmetic to overflow), in double for floats */
    double len;
    if (!flt) {
        int64_t span = (int64_t)limit - (int64_t)start, d = (int64_t)delta;
        len = (span > 0) == (d > 0) && span != 0 ? (double)((span + d + (d > 0 ? -1 : 1)) / d) : 0.0;
    } else {
        len = ceil((limit - start) / delta);
    }
    if (len > (double)INT32_MAX) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: [%g, %g) by %g has %.0f elements; at most %d", name, start,
                limit, delta, len, INT32_MAX);
        return NULL;
    }
    int64_t n = len > 0 ? (int64_t)len : 0;
    /* start + i * delta: in f32 for floats (then rounded to f16), in the
       integer dtype otherwise (i * |delta| may wrap on the way; the sum,
       between start and limit, is exact) */
    vf_dtype ct = flt ? VF_F32 : dtype;
    vf_tensor *i = iota(ctx, name, ct, n);
    if (!i || n == 0) return dtype == ct || !i ? i : vf_cast(ctx, i, dtype);
    /* as start -/+ i * |delta|: a negative fill would saturate to 0 in u32 */
    vf_tensor *v = i;
    if (fabs(delta) != 1) v = vf_mul(ctx, v, vf_fill(ctx, ct, 0, NULL, fabs(delta)));
    if (delta < 0) v = vf_sub(ctx, vf_fill(ctx, ct, 0, NULL, start), v);
    else if (start != 0) v = vf_add(ctx, v, vf_fill(ctx, ct, 0, NULL, start));
    return dtype == ct ? v : vf_cast(ctx, v, dtype);
}

vf_tensor *vf_one_hot(vf_context *ctx, vf_tensor *indices, int64_t depth, vf_dtype dtype)
{
    VF_LOCKED(ctx);
    const char *name = "vf_one_hot";
    if (!ctx || !indices) return NULL;
    if (!vf_check_input(ctx, name, indices, 0)) return NULL;
    if (indices->dtype != VF_I32 && indices->dtype != VF_U32) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: indices are %s but must be i32 or u32; cast them with vf_cast", name,
                vf_dtype_name(indices->dtype));
        return NULL;
    }
    if (!vf_dtype_valid((int)dtype)) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: dtype %d is not a vf_dtype", name, (int)dtype);
        return NULL;
    }
    if (depth < 0 || depth > INT32_MAX || indices->rank >= VF_MAX_RANK) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: depth %lld with rank-%d indices; depth must be in [0, 2^31) "
                "and the indices' rank below %d", name, (long long)depth, indices->rank, VF_MAX_RANK);
        return NULL;
    }
    int r = indices->rank;
    int64_t s[VF_MAX_RANK];
    memcpy(s, indices->shape, sizeof(int64_t) * (size_t)r);
    s[r] = depth;
    if (indices->numel == 0 || depth == 0) return vf_fill(ctx, dtype, r + 1, s, 0.0);
    /* indices[..., None] == [0, depth): a negative or too large index matches nothing (a zero row) */
    s[r] = 1;
    vf_tensor *col = vf_ad_reshape(ctx, indices, r + 1, s);
    vf_tensor *hot = vf_equal(ctx, col, iota(ctx, name, indices->dtype, depth));
    return dtype == VF_BOOL ? hot : vf_cast(ctx, hot, dtype);
}

vf_tensor *vf_cumsum(vf_context *ctx, vf_tensor *x, int axis, bool exclusive, bool reverse)
{
    VF_LOCKED(ctx);
    const char *name = "vf_cumsum";
    if (!ctx || !x) return NULL;
    if (!rank1_input(ctx, name, VF_OP_CUMSUM, x)) return NULL;
    int a;
    if (!vf_norm_axis(ctx, name, axis, x->rank, &a)) return NULL;
    vf_exec e = {.op = VF_OP_CUMSUM, .n_in = 1, .attrs.axis = a, .attrs.trans_a = exclusive, .attrs.trans_b = reverse};
    e.in[0] = vf_tensor_ref(x);
    return vf_op_tail(ctx, name, &e, false);
}

/* One of top_k's two ops (values or indices) on x with k checked. */
static vf_tensor *top_k_op(vf_context *ctx, vf_op op, vf_tensor *x, int k)
{
    vf_exec e = {.op = op, .n_in = 1, .attrs.value = k};
    e.in[0] = vf_tensor_ref(x);
    return vf_op_tail(ctx, "vf_top_k", &e, false);
}

static bool top_k_args(vf_context *ctx, vf_tensor *x)
{
    return rank1_input(ctx, "vf_top_k", VF_OP_TOP_K, x); /* k against the last dim: the shape engine's message */
}

vf_tensor *vf_top_k(vf_context *ctx, vf_tensor *x, int k, vf_tensor **indices)
{
    VF_LOCKED(ctx);
    if (indices) *indices = NULL;
    if (!ctx || !x || !top_k_args(ctx, x)) return NULL;
    vf_tensor *v = top_k_op(ctx, VF_OP_TOP_K, x, k);
    if (v && indices) {
        *indices = top_k_op(ctx, VF_OP_TOP_K_INDICES, x, k);
        if (!*indices) return NULL;   /* v stays in its scope */
    }
    return v;
}

vf_tensor *vf_top_k_indices(vf_context *ctx, vf_tensor *x, int k)
{
    if (!ctx || !x || !top_k_args(ctx, x)) return NULL;
    return top_k_op(ctx, VF_OP_TOP_K_INDICES, x, k);
}
