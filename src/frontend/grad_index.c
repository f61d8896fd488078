/* Gradient rules of the indexing ops (issue 13), op calls like every rule
 * (grad_rules.c): they run eagerly and trace alike. Indices get no
 * gradient. */
#include "frontend/tape.h"

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

const vf_grad_rule vf_grad_gather = {g_gather};
const vf_grad_rule vf_grad_cumsum = {g_cumsum};
const vf_grad_rule vf_grad_scatter_add = {g_scatter_add};
