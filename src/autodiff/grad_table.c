/* The gradient rule of each op, indexed by op. The table belongs to the
 * autodiff stage: the rules are op calls, above the graph layer, so the op
 * table (src/graph/op_table.c) keeps no pointer to them and src/graph/ links
 * without the frontend. */
#include "autodiff/tape.h"

/* grad_rules.c, grad_index.c, grad_conv.c and user_elementwise.c */
extern const vf_grad_rule vf_grad_abs, vf_grad_add, vf_grad_avg_pool, vf_grad_avg_pool_grad, vf_grad_cast,
    vf_grad_clip, vf_grad_concat, vf_grad_conv2d, vf_grad_conv2d_bpf, vf_grad_conv2d_bpi, vf_grad_copy,
    vf_grad_cos, vf_grad_cumsum, vf_grad_div, vf_grad_erf, vf_grad_exp, vf_grad_expm1, vf_grad_gather,
    vf_grad_gelu, vf_grad_leaky_relu, vf_grad_log, vf_grad_log1p, vf_grad_log_softmax, vf_grad_logsumexp,
    vf_grad_matmul, vf_grad_max_pool, vf_grad_maxmin, vf_grad_maxred, vf_grad_mean, vf_grad_mod, vf_grad_mul,
    vf_grad_neg, vf_grad_norm, vf_grad_pad, vf_grad_pow, vf_grad_prod, vf_grad_relu, vf_grad_rsqrt,
    vf_grad_scatter_add, vf_grad_sigmoid, vf_grad_sin, vf_grad_slice, vf_grad_slice_grad, vf_grad_softmax,
    vf_grad_softplus, vf_grad_sqrt, vf_grad_square, vf_grad_sub, vf_grad_sum, vf_grad_tanh, vf_grad_top_k,
    vf_grad_transpose, vf_grad_uelem, vf_grad_where, vf_grad_xent, vf_grad_zero;

/* NULL: not differentiable (comparisons, argmax, the logical ops, sources,
   max_pool2d_grad, the generator's draws, user kernels, whose gradient is
   their own). Cast is float -> float only: vf_grad_fn_of refuses integer
   ends. */
static const vf_grad_rule *const rules[] = {
    [VF_OP_ADD] = &vf_grad_add,
    [VF_OP_SUB] = &vf_grad_sub,
    [VF_OP_MUL] = &vf_grad_mul,
    [VF_OP_DIV] = &vf_grad_div,
    [VF_OP_POW] = &vf_grad_pow,
    [VF_OP_MAXIMUM] = &vf_grad_maxmin,
    [VF_OP_MINIMUM] = &vf_grad_maxmin,
    [VF_OP_WHERE] = &vf_grad_where,
    [VF_OP_NEG] = &vf_grad_neg,
    [VF_OP_EXP] = &vf_grad_exp,
    [VF_OP_LOG] = &vf_grad_log,
    [VF_OP_SQRT] = &vf_grad_sqrt,
    [VF_OP_RSQRT] = &vf_grad_rsqrt,
    [VF_OP_ABS] = &vf_grad_abs,
    [VF_OP_TANH] = &vf_grad_tanh,
    [VF_OP_SIGMOID] = &vf_grad_sigmoid,
    [VF_OP_RELU] = &vf_grad_relu,
    [VF_OP_GELU] = &vf_grad_gelu,
    [VF_OP_SIN] = &vf_grad_sin,
    [VF_OP_COS] = &vf_grad_cos,
    [VF_OP_CAST] = &vf_grad_cast,
    [VF_OP_COPY] = &vf_grad_copy,
    [VF_OP_REDUCE_SUM] = &vf_grad_sum,
    [VF_OP_REDUCE_MEAN] = &vf_grad_mean,
    [VF_OP_REDUCE_MAX] = &vf_grad_maxred,
    [VF_OP_REDUCE_MIN] = &vf_grad_maxred,
    [VF_OP_NORM] = &vf_grad_norm,
    [VF_OP_SOFTMAX] = &vf_grad_softmax,
    [VF_OP_LOG_SOFTMAX] = &vf_grad_log_softmax,
    [VF_OP_SPARSE_XENT] = &vf_grad_xent,
    [VF_OP_MATMUL] = &vf_grad_matmul,
    [VF_OP_TRANSPOSE] = &vf_grad_transpose,
    [VF_OP_SQUARE] = &vf_grad_square,
    [VF_OP_SIGN] = &vf_grad_zero,
    [VF_OP_FLOOR] = &vf_grad_zero,
    [VF_OP_CEIL] = &vf_grad_zero,
    [VF_OP_ROUND] = &vf_grad_zero,
    [VF_OP_MOD] = &vf_grad_mod,
    [VF_OP_ERF] = &vf_grad_erf,
    [VF_OP_LOG1P] = &vf_grad_log1p,
    [VF_OP_EXPM1] = &vf_grad_expm1,
    [VF_OP_SOFTPLUS] = &vf_grad_softplus,
    [VF_OP_LEAKY_RELU] = &vf_grad_leaky_relu,
    [VF_OP_CLIP] = &vf_grad_clip,
    [VF_OP_STOP_GRADIENT] = &vf_grad_zero,
    [VF_OP_REDUCE_PROD] = &vf_grad_prod,
    [VF_OP_LOGSUMEXP] = &vf_grad_logsumexp,
    [VF_OP_SLICE] = &vf_grad_slice,
    [VF_OP_PAD] = &vf_grad_pad,
    [VF_OP_CONCAT] = &vf_grad_concat,
    [VF_OP_SLICE_GRAD] = &vf_grad_slice_grad,
    [VF_OP_GATHER] = &vf_grad_gather,
    [VF_OP_SCATTER_ADD] = &vf_grad_scatter_add,
    [VF_OP_CUMSUM] = &vf_grad_cumsum,
    [VF_OP_TOP_K] = &vf_grad_top_k,
    [VF_OP_CONV2D] = &vf_grad_conv2d,
    [VF_OP_CONV2D_BACKPROP_INPUT] = &vf_grad_conv2d_bpi,
    [VF_OP_CONV2D_BACKPROP_FILTER] = &vf_grad_conv2d_bpf,
    [VF_OP_MAX_POOL2D] = &vf_grad_max_pool,
    [VF_OP_AVG_POOL2D] = &vf_grad_avg_pool,
    [VF_OP_AVG_POOL2D_GRAD] = &vf_grad_avg_pool_grad,
    [VF_OP_USER_ELEMENTWISE] = &vf_grad_uelem,
};
/* Sized by its last row, so an op added after VF_OP_USER_ELEMENTWISE without a row
   here (NULL where it has no gradient) fails the build. */
_Static_assert(sizeof rules / sizeof *rules == VF_OP_COUNT, "a gradient row for every op (NULL: none)");

const vf_grad_rule *vf_grad_rule_of(vf_op op)
{
    return (unsigned)op < VF_OP_COUNT ? rules[op] : NULL;
}
