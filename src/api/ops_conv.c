/* Entry points of convolution and pooling (issue 13): the public
 * descriptors are checked and resolved here into the op's explicit
 * geometry (vf_conv_attrs), so that the graph, the saved form and the
 * backends see one meaning (SAME padding becomes pads here). */
#include "api/api.h"
#include "util/dtype.h"

#include <stdint.h>
#include <string.h>

/* desc (NULL: all defaults) into c; the pads of SAME need the input's and
   filter's spatial sizes (taken when both are rank 4; otherwise the shape
   engine reports the ranks). */
static bool resolve_conv(vf_context *ctx, const char *name, const vf_conv2d_desc *desc, const vf_tensor *x,
                         const vf_tensor *w, vf_conv_attrs *c)
{
    static const vf_conv2d_desc defaults;
    const vf_conv2d_desc *d = desc ? desc : &defaults;
    static const char *const dim[2] = {"height", "width"};
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 2; i++) {
        if (d->strides[i] < 0 || d->dilations[i] < 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc %s[%d] (%s) is %d; it must be >= 1 (0 means 1)", name,
                    d->strides[i] < 0 ? "strides" : "dilations", i, dim[i],
                    d->strides[i] < 0 ? d->strides[i] : d->dilations[i]);
            return false;
        }
        c->stride[i] = d->strides[i] ? d->strides[i] : 1;
        c->dilation[i] = d->dilations[i] ? d->dilations[i] : 1;
    }
    if (d->groups < 0) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc groups is %d; it must be >= 1 (0 means 1)", name,
                d->groups);
        return false;
    }
    c->groups = d->groups ? d->groups : 1;
    if ((unsigned)d->padding > VF_PADDING_EXPLICIT) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc padding is %d; use VF_PADDING_VALID, VF_PADDING_SAME or "
                "VF_PADDING_EXPLICIT", name, (int)d->padding);
        return false;
    }
    for (int i = 0; i < 4; i++) {
        if (d->padding != VF_PADDING_EXPLICIT && d->pads[i] != 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc pads[%d] is %d but padding is not "
                    "VF_PADDING_EXPLICIT; set padding = VF_PADDING_EXPLICIT or leave pads 0", name, i, d->pads[i]);
            return false;
        }
        if (d->pads[i] < 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc pads[%d] is %d; pads (top, bottom, left, right) "
                    "must be >= 0", name, i, d->pads[i]);
            return false;
        }
        c->pad[i] = d->pads[i];
    }
    if (d->padding == VF_PADDING_SAME && x->rank == 4 && w->rank == 4) {
        /* TF: out = ceil(in / stride), the total pad split with the odd one after */
        for (int i = 0; i < 2; i++) {
            int64_t in = x->shape[1 + i], s = c->stride[i];
            int64_t span = (int64_t)c->dilation[i] * (w->shape[i] - 1) + 1;
            int64_t out = (in + s - 1) / s;
            int64_t total = (out - 1) * s + span - in;
            if (total < 0) total = 0;
            if (total > INT32_MAX) {
                vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: SAME padding of %lld along %s does not fit 32 bits; "
                        "use a smaller dilation", name, (long long)total, dim[i]);
                return false;
            }
            c->pad[2 * i] = (int32_t)(total / 2);
            c->pad[2 * i + 1] = (int32_t)(total - total / 2);
        }
    }
    return true;
}

vf_tensor *vf_window_op(vf_context *ctx, vf_op op, vf_tensor *a, vf_tensor *b, const vf_conv_attrs *c)
{
    VF_ASSERT_LOCKED(ctx);
    const char *name = op == VF_OP_CONV2D ? "vf_conv2d" : op == VF_OP_MAX_POOL2D ? "vf_max_pool2d"
                     : op == VF_OP_AVG_POOL2D ? "vf_avg_pool2d" : vf_op_get(op)->name;
    int n = vf_op_get(op)->arity;
    if (!vf_check_input(ctx, name, a, 0) || !vf_check_dtype(ctx, op, a, 0)) return NULL;
    if (n == 2 && (!vf_check_input(ctx, name, b, 1) || !vf_check_dtype(ctx, op, b, 1))) return NULL;
    vf_exec e = {.op = op, .n_in = n};
    e.attrs.conv = *c;
    e.in[0] = vf_tensor_ref(a);
    if (n == 2) e.in[1] = vf_tensor_ref(b);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, false, &empty);
    if (!out) return empty;
    if (a->numel == 0 || (n == 2 && b->numel == 0)) {
        /* no channel (conv2d, backprop_filter), no output channel
           (backprop_input) or no image (backprop_filter): the sums are of
           nothing, the row's value over an empty set */
        if (!vf_fill_into(ctx, out, vf_op_empty_value(op))) {
            vf_tensor_release(out);
            return NULL;
        }
        return out;
    }
    return vf_run(ctx, &e, out);
}

vf_tensor *vf_conv2d(vf_context *ctx, vf_tensor *x, vf_tensor *w, const vf_conv2d_desc *desc)
{
    VF_LOCKED(ctx);
    const char *name = "vf_conv2d";
    if (!ctx || !x || !w) return NULL;
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_input(ctx, name, w, 1)) return NULL;
    if (!vf_check_dtype(ctx, VF_OP_CONV2D, x, 0) || !vf_check_dtype(ctx, VF_OP_CONV2D, w, 1)) return NULL;
    vf_conv_attrs c;
    if (!resolve_conv(ctx, name, desc, x, w, &c)) return NULL;
    return vf_window_op(ctx, VF_OP_CONV2D, x, w, &c);
}

/* pool desc into c: window into size, strides (0: the window), SAME pads */
static bool resolve_pool(vf_context *ctx, const char *name, const vf_pool2d_desc *d, const vf_tensor *x,
                         vf_conv_attrs *c)
{
    static const char *const dim[2] = {"height", "width"};
    memset(c, 0, sizeof *c);
    c->groups = 1;
    if (!d) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc is NULL; give at least its window", name);
        return false;
    }
    for (int i = 0; i < 2; i++) {
        if (d->window[i] < 1 || d->strides[i] < 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc window[%d] (%s) is %d and strides[%d] is %d; the "
                    "window must be >= 1 and strides >= 1 (0 means the window)", name, i, dim[i], d->window[i], i,
                    d->strides[i]);
            return false;
        }
        c->size[i] = d->window[i];
        c->stride[i] = d->strides[i] ? d->strides[i] : d->window[i];
        c->dilation[i] = 1;
    }
    if (d->padding != VF_PADDING_VALID && d->padding != VF_PADDING_SAME) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc padding is %d; pooling takes VF_PADDING_VALID or "
                "VF_PADDING_SAME", name, (int)d->padding);
        return false;
    }
    if (d->padding == VF_PADDING_SAME && x->rank == 4)
        for (int i = 0; i < 2; i++) {
            int64_t in = x->shape[1 + i], s = c->stride[i], out = (in + s - 1) / s;
            int64_t total = (out - 1) * s + c->size[i] - in;
            if (total < 0) total = 0;
            c->pad[2 * i] = (int32_t)(total / 2);
            c->pad[2 * i + 1] = (int32_t)(total - total / 2);
        }
    return true;
}

static vf_tensor *pool(vf_context *ctx, vf_op op, const char *name, vf_tensor *x, const vf_pool2d_desc *desc)
{
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_dtype(ctx, op, x, 0)) return NULL;
    vf_conv_attrs c;
    if (!resolve_pool(ctx, name, desc, x, &c)) return NULL;
    return vf_window_op(ctx, op, x, NULL, &c);
}

vf_tensor *vf_max_pool2d(vf_context *ctx, vf_tensor *x, const vf_pool2d_desc *desc)
{
    VF_LOCKED(ctx);
    return pool(ctx, VF_OP_MAX_POOL2D, "vf_max_pool2d", x, desc);
}

vf_tensor *vf_avg_pool2d(vf_context *ctx, vf_tensor *x, const vf_pool2d_desc *desc)
{
    VF_LOCKED(ctx);
    return pool(ctx, VF_OP_AVG_POOL2D, "vf_avg_pool2d", x, desc);
}
