/* Gradient rules of the indexing ops (issue 13), op calls like every rule
 * (grad_rules.c): they run eagerly and trace alike. Indices get no
 * gradient. */
#include "autodiff/tape.h"

#define IN(i) (e->in[i])

/* y = gather(x, idx): dx = scatter_add(zeros like x, idx, g) */
static bool g_gather(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *zero = vf_ad_broadcast(ctx, vf_ad_scalar(ctx, g->dtype, 0.0), IN(0));
    gin[0] = vf_scatter_add(ctx, zero, IN(1), g, e->attrs.axis);
    return gin[0] != NULL;
}

/* y = x + scatter(idx, u): dx = g, du = gather(g, idx) */
static bool g_scatter_add(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = g;
    gin[2] = vf_gather(ctx, g, IN(1), e->attrs.axis);
    return gin[2] != NULL;
}

/* y = cumsum(x): each x[k] feeds the outputs after it (or, exclusive,
   strictly after it) in scan order, so dx is the same scan of g the other
   way round */
static bool g_cumsum(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_cumsum(ctx, g, e->attrs.axis, e->attrs.trans_a, !e->attrs.trans_b);
    return gin[0] != NULL;
}

/* v = top_k(x): each value's gradient goes back to the position it came
   from, sum_j one_hot(idx[..., j], n) * g[..., j] (k x n per row: the
   positions are distinct within a row, so nothing collides) */
static bool g_top_k(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    int r = x->rank, k = (int)e->attrs.value;
    vf_tensor *idx = vf_top_k_indices(ctx, x, k);
    if (!idx) return false;
    int64_t s[VF_MAX_RANK];
    for (int d = 0; d < r; d++) s[d] = g->shape[d];
    s[r] = 1;
    /* a bool mask in where() (not a cast times g): the mask depends on x
       but carries no gradient, so higher orders see no cast of a bool */
    vf_tensor *hot = vf_one_hot(ctx, idx, x->shape[r - 1], VF_BOOL);    /* [..., k, n] */
    vf_tensor *gk = vf_ad_reshape(ctx, g, r + 1, s);                    /* [..., k, 1] */
    int ax = -2;
    gin[0] = vf_reduce_sum(ctx, vf_where(ctx, hot, gk, vf_ad_scalar(ctx, g->dtype, 0.0)), 1, &ax, false);
    return gin[0] != NULL;
}

const vf_grad_rule vf_grad_gather = {g_gather};
const vf_grad_rule vf_grad_top_k = {g_top_k};
const vf_grad_rule vf_grad_cumsum = {g_cumsum};
const vf_grad_rule vf_grad_scatter_add = {g_scatter_add};
