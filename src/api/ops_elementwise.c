/* Entry points of the elementwise ops, and the frontend's door to the
 * shape-and-dtype engine (graph/shape.c): the entry points normalise the
 * user's arguments and leave dtype and shape rules to the engine. */
#include "api/api.h"
#include "api/hooks.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

bool vf_infer_refs(vf_context *ctx, vf_op op, const vf_attrs *a, int n, const vf_tref *in, vf_dtype *dt,
                   int *rank, int64_t *shape)
{
    vf_dtype dts[3];
    vf_shape sh[3], out;
    for (int i = 0; i < n && i < 3; i++) {
        dts[i] = in[i].dtype;
        sh[i] = (vf_shape){.rank = in[i].rank};
        memcpy(sh[i].dim, in[i].shape, sizeof(int64_t) * (size_t)in[i].rank);
    }
    vf_err err = {0};
    if (vf_infer_op(op, a, n, dts, sh, dt, &out, &err) != VF_OK) {
        vf_fail(ctx, err.status, "%s", err.message);
        return false;
    }
    *rank = out.rank;
    memcpy(shape, out.dim, sizeof(int64_t) * (size_t)out.rank);
    return true;
}

vf_tensor *vf_op_output(vf_context *ctx, const char *name, const vf_exec *e, bool note_empty, vf_tensor **empty)
{
    *empty = NULL;
    vf_dtype dt;
    int rank;
    int64_t shape[VF_MAX_RANK];
    if (!vf_infer_refs(ctx, e->op, &e->attrs, e->n_in, e->in, &dt, &rank, shape)) return NULL;
    vf_tensor *out = vf_tensor_new(ctx, name, dt, rank, shape);
    if (!out || out->numel > 0) return out;
    if (note_empty) vf_note_constant(ctx, out); /* nothing to compute; a tape still sees the value made */
    *empty = out;
    return NULL;
}

vf_tensor *vf_op_tail(vf_context *ctx, const char *name, vf_exec *e, bool note_empty)
{
    vf_tensor *empty, *out = vf_op_output(ctx, name, e, note_empty, &empty);
    return out ? vf_run(ctx, e, out) : empty;
}

bool vf_check_dtype(vf_context *ctx, vf_op op, const vf_tensor *t, int index)
{
    vf_shape s = {.rank = t->rank};
    memcpy(s.dim, t->shape, sizeof(int64_t) * (size_t)t->rank);
    vf_err err = {0};
    if (vf_check_op_dtype(op, index, t->dtype, &s, &err) == VF_OK) return true;
    vf_fail(ctx, err.status, "%s", err.message);
    return false;
}

/* api: the entry point's name for messages ("vf_add"); the macros below
   pass it as a literal, so no name is built per call. */
static vf_tensor *elementwise(vf_context *ctx, const char *api, vf_op op, vf_tensor *const *in, vf_dtype to)
{
    const vf_op_info *info = vf_op_get(op);
    if (!ctx) return NULL;
    for (int i = 0; i < info->arity; i++)
        if (!in[i]) return NULL;
    vf_exec e = {.op = op, .n_in = info->arity, .attrs.dtype = to};
    for (int i = 0; i < info->arity; i++) {
        if (!vf_check_input(ctx, info->name, in[i], i)) return NULL;
        e.in[i] = vf_tensor_ref(in[i]);
    }
    int rank;
    int64_t shape[VF_MAX_RANK];
    if (!vf_infer_refs(ctx, op, &e.attrs, info->arity, e.in, &e.attrs.dtype, &rank, shape)) return NULL;
    vf_tensor *out = vf_tensor_new(ctx, api, e.attrs.dtype, rank, shape);
    if (!out) return out;
    if (out->numel == 0) { /* nothing to compute; a tape still sees the value made */
        vf_note_constant(ctx, out);
        return out;
    }
    return vf_run(ctx, &e, out);
}

vf_tensor *vf_elementwise(vf_context *ctx, vf_op op, vf_tensor *const *in, vf_dtype to)
{
    char name[64];
    snprintf(name, sizeof name, "vf_%s", vf_op_get(op)->name);
    return elementwise(ctx, name, op, in, to);
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
        return elementwise(ctx, #fn, OP, in, VF_F32); \
    }
#define UNARY(fn, OP) \
    vf_tensor *fn(vf_context *ctx, vf_tensor *x) \
    { \
        VF_LOCKED(ctx); \
        vf_tensor *in[1] = {x}; \
        return elementwise(ctx, #fn, OP, in, VF_F32); \
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
UNARY(vf_square, VF_OP_SQUARE)

vf_tensor *vf_where(vf_context *ctx, vf_tensor *cond, vf_tensor *a, vf_tensor *b)
{
    VF_LOCKED(ctx);
    vf_tensor *in[3] = {cond, a, b};
    return elementwise(ctx, "vf_where", VF_OP_WHERE, in, VF_F32);
}

vf_tensor *vf_cast(vf_context *ctx, vf_tensor *x, vf_dtype to)
{
    VF_LOCKED(ctx);
    vf_tensor *in[1] = {x};
    return elementwise(ctx, "vf_cast", VF_OP_CAST, in, to);
}
