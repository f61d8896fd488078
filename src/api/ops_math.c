/* Entry points of the math ops of issue 13: rounding, floor mod, logical
 * ops, the special functions, leaky_relu, clip and stop_gradient. Each is
 * one op-table row run through vf_elementwise; leaky_relu's alpha and
 * clip's bounds become scalar tensors of x's dtype made from host values
 * (in a trace: constants, which a fused group loads once; a vf_fill would
 * be a FILL node, a kernel of its own since a scalar FILL does not join a
 * larger group, docs/FUSION.md), so the row stays a plain elementwise op
 * and its kernel does not depend on the numbers. */
#include "api/api.h"
#include "util/dtype.h"

#include <math.h>

#define UNARY(fn, OP) \
    vf_tensor *fn(vf_context *ctx, vf_tensor *x) \
    { \
        VF_LOCKED(ctx); \
        return vf_elementwise(ctx, OP, (vf_tensor *[]){x}, VF_F32); \
    }
#define BINARY(fn, OP) \
    vf_tensor *fn(vf_context *ctx, vf_tensor *a, vf_tensor *b) \
    { \
        VF_LOCKED(ctx); \
        return vf_elementwise(ctx, OP, (vf_tensor *[]){a, b}, VF_F32); \
    }

UNARY(vf_sign, VF_OP_SIGN)
UNARY(vf_floor, VF_OP_FLOOR)
UNARY(vf_ceil, VF_OP_CEIL)
UNARY(vf_round, VF_OP_ROUND)
BINARY(vf_mod, VF_OP_MOD)
BINARY(vf_logical_and, VF_OP_LOGICAL_AND)
BINARY(vf_logical_or, VF_OP_LOGICAL_OR)
UNARY(vf_logical_not, VF_OP_LOGICAL_NOT)
UNARY(vf_erf, VF_OP_ERF)
UNARY(vf_log1p, VF_OP_LOG1P)
UNARY(vf_expm1, VF_OP_EXPM1)
UNARY(vf_softplus, VF_OP_SOFTPLUS)
UNARY(vf_stop_gradient, VF_OP_STOP_GRADIENT)

/* x checked before any fill is made, so a bad x is reported as such. */
static bool check_x(vf_context *ctx, vf_op op, vf_tensor *x)
{
    return ctx && x && vf_check_input(ctx, vf_op_get(op)->name, x, 0) && vf_check_dtype(ctx, op, x, 0);
}

/* Runs op on x and scalars of x's dtype holding v[0..n). */
static vf_tensor *with_scalars(vf_context *ctx, vf_op op, vf_tensor *x, int n, const double *v)
{
    vf_tensor *in[3] = {x, NULL, NULL};
    vf_tensor *out = NULL;
    for (int i = 0; i < n; i++) {
        uint8_t bytes[8] = {0};
        vf_store_f64(bytes, x->dtype, 0, v[i]);
        if (!(in[i + 1] = vf_tensor_from_host(ctx, x->dtype, 0, NULL, bytes))) goto done;
    }
    out = vf_elementwise(ctx, op, in, VF_F32);
done:
    /* the tape and the trace hold what they need: these are ours */
    for (int i = 1; i <= n; i++)
        if (in[i]) vf_tensor_release(in[i]);
    return out;
}

vf_tensor *vf_leaky_relu(vf_context *ctx, vf_tensor *x, double alpha)
{
    VF_LOCKED(ctx);
    if (!check_x(ctx, VF_OP_LEAKY_RELU, x)) return NULL;
    if (!isfinite(alpha)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_leaky_relu: alpha is %g; pass a finite slope (0.2 is usual)",
                alpha);
        return NULL;
    }
    return with_scalars(ctx, VF_OP_LEAKY_RELU, x, 1, &alpha);
}

vf_tensor *vf_clip(vf_context *ctx, vf_tensor *x, double lo, double hi)
{
    VF_LOCKED(ctx);
    if (!check_x(ctx, VF_OP_CLIP, x)) return NULL;
    if (isnan(lo) || isnan(hi) || lo > hi) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_clip: the range [%g, %g] is %s; pass lo <= hi (either may be "
                "infinite)", lo, hi, lo > hi ? "empty" : "not a range (NaN)");
        return NULL;
    }
    double b[2] = {lo, hi};
    if (!vf_dtype_is_float(x->dtype)) {
        /* the integers of [lo, hi], within the dtype's range */
        double tmin = x->dtype == VF_I32 ? -2147483648.0 : 0.0;
        double tmax = x->dtype == VF_I32 ? 2147483647.0 : 4294967295.0;
        double l = ceil(lo), h = floor(hi);
        if (l > h || l > tmax || h < tmin) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_clip: [%g, %g] holds no value of x's dtype %s", lo, hi,
                    vf_dtype_name(x->dtype));
            return NULL;
        }
        b[0] = fmax(l, tmin);
        b[1] = fmin(h, tmax);
    }
    return with_scalars(ctx, VF_OP_CLIP, x, 2, b);
}
