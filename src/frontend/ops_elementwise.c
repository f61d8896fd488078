/* Entry points of the elementwise ops: dtype checks, broadcasting, cast. */
#include "frontend/frontend.h"
#include "frontend/tape.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

/* NumPy broadcasting of n shapes into out; false (error recorded) if they
   do not broadcast. */
static bool broadcast(vf_context *ctx, const char *op, int n, vf_tensor *const *in, int *rank,
                      int64_t *shape)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        if (in[i]->rank > r) r = in[i]->rank;
    for (int d = 0; d < r; d++) {
        int64_t size = 1;
        for (int i = 0; i < n; i++) {
            int k = d - (r - in[i]->rank);
            if (k < 0) continue;
            int64_t s = in[i]->shape[k];
            if (s == size || s == 1) continue;
            if (size == 1) {
                size = s;
                continue;
            }
            char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
            vf_fail(ctx, VF_ERROR_SHAPE,
                    "vf_%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld); sizes must "
                    "be equal or 1 when aligned at the last dim — reshape one input (vf_reshape)",
                    op, vf_shape_str(a, sizeof a, in[0]->rank, in[0]->shape),
                    vf_shape_str(b, sizeof b, in[i]->rank, in[i]->shape), d - r, (long long)size,
                    (long long)s);
            return false;
        }
        shape[d] = size;
    }
    *rank = r;
    return true;
}

bool vf_check_dtype(vf_context *ctx, vf_op op, const vf_tensor *t, int index)
{
    const vf_op_info *info = vf_op_get(op);
    if (info->accepts & VF_M(t->dtype)) return true;
    char accepted[64] = "";
    for (int d = 0; d < VF_DTYPE_COUNT; d++)
        if (info->accepts & VF_M(d)) {
            strncat(accepted, accepted[0] ? ", " : "", sizeof accepted - strlen(accepted) - 1);
            strncat(accepted, vf_dtype_name((vf_dtype)d), sizeof accepted - strlen(accepted) - 1);
        }
    char sh[VF_SHAPE_STR_LEN];
    vf_fail(ctx, VF_ERROR_DTYPE, "vf_%s: input %d is %s %s but %s takes %s; convert it with vf_cast",
            info->name, index, vf_dtype_name(t->dtype), vf_shape_str(sh, sizeof sh, t->rank, t->shape),
            info->name, accepted);
    return false;
}

vf_tensor *vf_elementwise(vf_context *ctx, vf_op op, vf_tensor *const *in, vf_dtype to)
{
    const vf_op_info *info = vf_op_get(op);
    if (!ctx) return NULL;
    for (int i = 0; i < info->arity; i++)
        if (!in[i]) return NULL;
    for (int i = 0; i < info->arity; i++)
        if (!vf_check_input(ctx, info->name, in[i], i)) return NULL;
    int first_data = vf_op_data_input(op);
    for (int i = 0; i < first_data; i++)
        if (in[i]->dtype != VF_BOOL) {
            vf_fail(ctx, VF_ERROR_DTYPE,
                    "vf_%s: cond is %s but must be bool; make it with a comparison (vf_greater, ...) "
                    "or vf_cast(ctx, cond, VF_BOOL)", info->name, vf_dtype_name(in[i]->dtype));
            return NULL;
        }
    for (int i = first_data; i < info->arity; i++) {
        if (!vf_check_dtype(ctx, op, in[i], i)) return NULL;
        if (in[i]->dtype != in[first_data]->dtype) {
            vf_fail(ctx, VF_ERROR_DTYPE,
                    "vf_%s: inputs have different dtypes (%s and %s); vkfuse does not promote "
                    "implicitly — cast one with vf_cast", info->name,
                    vf_dtype_name(in[first_data]->dtype), vf_dtype_name(in[i]->dtype));
            return NULL;
        }
    }
    if (op == VF_OP_CAST && !vf_dtype_valid((int)to)) {
        vf_fail(ctx, VF_ERROR_DTYPE, "vf_cast: target dtype %d is not a vf_dtype", (int)to);
        return NULL;
    }
    int rank;
    int64_t shape[VF_MAX_RANK];
    if (!broadcast(ctx, info->name, info->arity, in, &rank, shape)) return NULL;
    vf_dtype dt = info->result == VF_RESULT_BOOL ? VF_BOOL
                : info->result == VF_RESULT_ATTR ? to
                : in[first_data]->dtype;
    char name[64];
    snprintf(name, sizeof name, "vf_%s", info->name);
    vf_tensor *out = vf_tensor_new(ctx, name, dt, rank, shape);
    if (!out) return out;
    if (out->numel == 0) { /* nothing to compute; a tape still sees the value made */
        vf_tape_record_constant(ctx, out);
        return out;
    }
    vf_exec e = {.op = op, .n_in = info->arity, .attrs.dtype = dt};
    for (int i = 0; i < info->arity; i++) e.in[i] = vf_tensor_ref(in[i]);
    return vf_run(ctx, &e, out);
}

bool vf_norm_axis(vf_context *ctx, const char *op, int axis, int rank, int *out)
{
    int a = axis < 0 ? axis + rank : axis;
    if (a < 0 || a >= rank) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                "%s: axis %d is out of range for a rank-%d tensor; use -%d..%d", op, axis, rank, rank,
                rank - 1);
        return false;
    }
    *out = a;
    return true;
}

#define BINARY(fn, OP) \
    vf_tensor *fn(vf_context *ctx, vf_tensor *a, vf_tensor *b) \
    { \
        VF_LOCKED(ctx); \
        vf_tensor *in[2] = {a, b}; \
        return vf_elementwise(ctx, OP, in, VF_F32); \
    }
#define UNARY(fn, OP) \
    vf_tensor *fn(vf_context *ctx, vf_tensor *x) \
    { \
        VF_LOCKED(ctx); \
        vf_tensor *in[1] = {x}; \
        return vf_elementwise(ctx, OP, in, VF_F32); \
    }

BINARY(vf_add, VF_OP_ADD)
BINARY(vf_sub, VF_OP_SUB)
BINARY(vf_mul, VF_OP_MUL)
BINARY(vf_div, VF_OP_DIV)
BINARY(vf_pow, VF_OP_POW)
BINARY(vf_maximum, VF_OP_MAXIMUM)
BINARY(vf_minimum, VF_OP_MINIMUM)
BINARY(vf_greater, VF_OP_GREATER)
BINARY(vf_greater_equal, VF_OP_GREATER_EQUAL)
BINARY(vf_less, VF_OP_LESS)
BINARY(vf_less_equal, VF_OP_LESS_EQUAL)
BINARY(vf_equal, VF_OP_EQUAL)
BINARY(vf_not_equal, VF_OP_NOT_EQUAL)
UNARY(vf_neg, VF_OP_NEG)
UNARY(vf_exp, VF_OP_EXP)
UNARY(vf_log, VF_OP_LOG)
UNARY(vf_sqrt, VF_OP_SQRT)
UNARY(vf_rsqrt, VF_OP_RSQRT)
UNARY(vf_abs, VF_OP_ABS)
UNARY(vf_tanh, VF_OP_TANH)
UNARY(vf_sigmoid, VF_OP_SIGMOID)
UNARY(vf_relu, VF_OP_RELU)
UNARY(vf_gelu, VF_OP_GELU)
UNARY(vf_sin, VF_OP_SIN)
UNARY(vf_cos, VF_OP_COS)

vf_tensor *vf_where(vf_context *ctx, vf_tensor *cond, vf_tensor *a, vf_tensor *b)
{
    VF_LOCKED(ctx);
    vf_tensor *in[3] = {cond, a, b};
    return vf_elementwise(ctx, VF_OP_WHERE, in, VF_F32);
}

vf_tensor *vf_cast(vf_context *ctx, vf_tensor *x, vf_dtype to)
{
    VF_LOCKED(ctx);
    vf_tensor *in[1] = {x};
    return vf_elementwise(ctx, VF_OP_CAST, in, to);
}
