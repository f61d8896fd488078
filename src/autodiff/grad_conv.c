/* Gradient rules of conv2d and of its two backprop ops (issue 13).
 *
 * conv2d is linear in each operand, y = J(w) x, so its gradients are the
 * transposed maps: dx = backprop_input(dy, w), dw = backprop_filter(x, dy),
 * ops of their own rather than conv2ds of flipped filters, because a
 * strided or dilated forward would need a conv with input dilation, which
 * conv2d does not have. The backprop ops are bilinear too, and the three
 * close under differentiation (second order needs no new op):
 *   <G, bpi(dy, w)> = <conv2d(G, w), dy> = <bpf(G, dy), w>
 *   <G, bpf(x, dy)> = <conv2d(x, G), dy> = <bpi(dy, G), x>
 * Each call keeps the forward's geometry; `size` carries the spatial size
 * a backprop op must produce (a strided forward drops rows, so dy alone
 * does not give it). */
#include "autodiff/tape.h"

#include <string.h>

/* the forward's geometry with the result size of a backprop op */
static vf_conv_attrs with_size(const vf_conv_attrs *c, int64_t h, int64_t w)
{
    vf_conv_attrs r = *c;
    r.size[0] = (int32_t)h;
    r.size[1] = (int32_t)w;
    return r;
}

static bool g_conv2d(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = e->in[0], *w = e->in[1];
    vf_conv_attrs bi = with_size(&e->attrs.conv, x->shape[1], x->shape[2]);
    vf_conv_attrs bf = with_size(&e->attrs.conv, w->shape[0], w->shape[1]);
    gin[0] = vf_window_op(ctx, VF_OP_CONV2D_BACKPROP_INPUT, g, w, &bi);
    gin[1] = vf_window_op(ctx, VF_OP_CONV2D_BACKPROP_FILTER, x, g, &bf);
    return gin[0] && gin[1];
}

/* bpi(dy, w): d dy = conv2d(G, w), d w = bpf(G, dy) */
static bool g_bpi(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *w = e->in[1];
    vf_conv_attrs fw = with_size(&e->attrs.conv, 0, 0);
    vf_conv_attrs bf = with_size(&e->attrs.conv, w->shape[0], w->shape[1]);
    gin[0] = vf_window_op(ctx, VF_OP_CONV2D, g, w, &fw);
    gin[1] = vf_window_op(ctx, VF_OP_CONV2D_BACKPROP_FILTER, g, e->in[0], &bf);
    return gin[0] && gin[1];
}

/* bpf(x, dy): d x = bpi(dy, G), d dy = conv2d(x, G) */
static bool g_bpf(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = e->in[0];
    vf_conv_attrs bi = with_size(&e->attrs.conv, x->shape[1], x->shape[2]);
    vf_conv_attrs fw = with_size(&e->attrs.conv, 0, 0);
    gin[0] = vf_window_op(ctx, VF_OP_CONV2D_BACKPROP_INPUT, e->in[1], g, &bi);
    gin[1] = vf_window_op(ctx, VF_OP_CONV2D, x, g, &fw);
    return gin[0] && gin[1];
}

/* pools: dx from x (max: the argmax; avg: the shape) and dy */
static bool g_max_pool(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_window_op(ctx, VF_OP_MAX_POOL2D_GRAD, e->in[0], g, &e->attrs.conv);
    return gin[0] != NULL;
}

static bool g_avg_pool(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_window_op(ctx, VF_OP_AVG_POOL2D_GRAD, e->in[0], g, &e->attrs.conv);
    return gin[0] != NULL;
}

/* avg_pool2d_grad is linear in dy, its adjoint the pool itself; x gives
   only the shape (no gradient) */
static bool g_avg_pool_grad(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = NULL;
    gin[1] = vf_window_op(ctx, VF_OP_AVG_POOL2D, g, NULL, &e->attrs.conv);
    return gin[1] != NULL;
}

/* The rule objects the op table's rows point at (src/graph/op_table.c). */
const vf_grad_rule vf_grad_conv2d = {g_conv2d};
const vf_grad_rule vf_grad_conv2d_bpi = {g_bpi};
const vf_grad_rule vf_grad_conv2d_bpf = {g_bpf};
const vf_grad_rule vf_grad_max_pool = {g_max_pool};
const vf_grad_rule vf_grad_avg_pool = {g_avg_pool};
const vf_grad_rule vf_grad_avg_pool_grad = {g_avg_pool_grad};
