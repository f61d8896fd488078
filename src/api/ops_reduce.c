/* Entry points of reductions, argmax, norm and the row ops (softmax,
 * log_softmax, sparse softmax cross-entropy). Empty inputs are handled
 * here so that backends never see them. */
#include "api/api.h"
#include "api/hooks.h"
#include "util/dtype.h"

#include <math.h>
#include <stdio.h>

static vf_tensor *reduce(vf_context *ctx, vf_op op, vf_tensor *x, int naxes, const int *axes,
                         bool keepdims)
{
    const vf_op_info *info = vf_op_get(op);
    char name[64];
    snprintf(name, sizeof name, "vf_%s", info->name);
    if (!ctx || !x) return NULL;
    /* the dtype first (the engine checks it again): its message comes first */
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_dtype(ctx, op, x, 0)) return NULL;
    if (naxes < 0 || (naxes > 0 && !axes)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: naxes is %d with axes %s; pass naxes >= 0 axes "
                "(naxes == 0: all axes)", name, naxes, axes ? "set" : "NULL");
        return NULL;
    }
    uint32_t mask = 0;
    if (naxes == 0) mask = (uint32_t)((1u << x->rank) - 1);
    for (int i = 0; i < naxes; i++) {
        int a;
        if (!vf_norm_axis(ctx, name, axes[i], x->rank, &a)) return NULL;
        if (mask & (1u << a)) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: axis %d is listed twice", name, axes[i]);
            return NULL;
        }
        mask |= 1u << a;
    }
    vf_exec e = {.op = op, .n_in = 1, .attrs.axes_mask = mask, .attrs.keepdims = keepdims};
    e.in[0] = vf_tensor_ref(x);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, true, &empty);
    if (!out) return empty;
    if (x->numel == 0) { /* an empty set per output: the row's value over it */
        if (info->empty == VF_EMPTY_UNDEFINED) {
            char sh[VF_SHAPE_STR_LEN];
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: reduces an empty set (input %s); max and min of "
                    "nothing are undefined — check the shape or use vf_reduce_sum", name,
                    vf_shape_str(sh, sizeof sh, x->rank, x->shape));
            vf_tensor_release(out);
            return NULL;
        }
        if (!vf_fill_into(ctx, out, vf_op_empty_value(op))) {
            vf_tensor_release(out);
            return NULL;
        }
        vf_note_constant(ctx, out); /* a constant: no input element reaches it */
        return out;
    }
    /* nothing reduced (a scalar input): the value itself, or |x| for norm */
    if (!mask) e.op = op == VF_OP_NORM ? VF_OP_ABS : VF_OP_COPY;
    return vf_run(ctx, &e, out);
}

/* One public entry per reduction op; the work is reduce()'s. */
#define REDUCTION(name, OP)                                                                \
    vf_tensor *name(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims) \
    {                                                                                      \
        VF_LOCKED(ctx);                                                                    \
        return reduce(ctx, OP, x, naxes, axes, keepdims);                                  \
    }
REDUCTION(vf_reduce_sum, VF_OP_REDUCE_SUM)
REDUCTION(vf_reduce_mean, VF_OP_REDUCE_MEAN)
REDUCTION(vf_reduce_max, VF_OP_REDUCE_MAX)
REDUCTION(vf_reduce_min, VF_OP_REDUCE_MIN)
REDUCTION(vf_reduce_prod, VF_OP_REDUCE_PROD)
REDUCTION(vf_reduce_any, VF_OP_REDUCE_ANY)
REDUCTION(vf_reduce_all, VF_OP_REDUCE_ALL)
REDUCTION(vf_logsumexp, VF_OP_LOGSUMEXP)

vf_tensor *vf_norm(vf_context *ctx, vf_tensor *x)
{
    VF_LOCKED(ctx);
    return reduce(ctx, VF_OP_NORM, x, 0, NULL, false);
}

vf_tensor *vf_argmax(vf_context *ctx, vf_tensor *x, int axis)
{
    VF_LOCKED(ctx);
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, "vf_argmax", x, 0) || !vf_check_dtype(ctx, VF_OP_ARGMAX, x, 0)) return NULL;
    int a;
    if (!vf_norm_axis(ctx, "vf_argmax", axis, x->rank, &a)) return NULL;
    vf_exec e = {.op = VF_OP_ARGMAX, .n_in = 1, .attrs.axis = a, .attrs.axes_mask = 1u << a};
    e.in[0] = vf_tensor_ref(x);
    vf_tensor *empty, *out = vf_op_output(ctx, "vf_argmax", &e, false, &empty);
    if (!out) return empty;
    if (x->shape[a] == 0) { /* the row's empty value: undefined */
        vf_fail(ctx, VF_ERROR_SHAPE, "vf_argmax: axis %d has size 0; argmax of nothing is undefined", axis);
        vf_tensor_release(out);
        return NULL;
    }
    return vf_run(ctx, &e, out);
}

static vf_tensor *row_op(vf_context *ctx, vf_op op, vf_tensor *x, int axis)
{
    const char *name = op == VF_OP_SOFTMAX ? "vf_softmax" : "vf_log_softmax";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_dtype(ctx, op, x, 0)) return NULL;
    if (x->rank == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: input is a scalar; softmax needs rank >= 1 (reshape to [1])", name);
        return NULL;
    }
    int a;
    if (!vf_norm_axis(ctx, name, axis, x->rank, &a)) return NULL;
    vf_exec e = {.op = op, .n_in = 1, .attrs.axis = a};
    e.in[0] = vf_tensor_ref(x);
    return vf_op_tail(ctx, name, &e, false);
}

vf_tensor *vf_softmax(vf_context *ctx, vf_tensor *x, int axis)
{
    VF_LOCKED(ctx);
    return row_op(ctx, VF_OP_SOFTMAX, x, axis);
}
vf_tensor *vf_log_softmax(vf_context *ctx, vf_tensor *x, int axis)
{
    VF_LOCKED(ctx);
    return row_op(ctx, VF_OP_LOG_SOFTMAX, x, axis);
}

vf_tensor *vf_sparse_softmax_cross_entropy(vf_context *ctx, vf_tensor *labels, vf_tensor *logits)
{
    VF_LOCKED(ctx);
    const char *name = "vf_sparse_softmax_cross_entropy";
    if (!ctx || !labels || !logits) return NULL;
    if (!vf_check_input(ctx, name, labels, 0) || !vf_check_input(ctx, name, logits, 1)) return NULL;
    /* along the classes dim (a scalar's 0 lets the engine say what is wrong) */
    vf_exec e = {.op = VF_OP_SPARSE_XENT, .n_in = 2, .attrs.axis = logits->rank ? logits->rank - 1 : 0};
    e.in[0] = vf_tensor_ref(labels);
    e.in[1] = vf_tensor_ref(logits);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, false, &empty);
    if (!out) return empty;
    if (logits->shape[logits->rank - 1] == 0) { /* no class can match any label: the row's empty value */
        if (!vf_fill_into(ctx, out, vf_op_empty_value(VF_OP_SPARSE_XENT))) {
            vf_tensor_release(out);
            return NULL;
        }
        return out;
    }
    return vf_run(ctx, &e, out);
}
