/* Gradient rules: one function per differentiable op, reached from the op
 * table (each row's `grad` points at its vf_grad_<rule> object, defined at
 * the end of this file). Every rule is written with ordinary op calls, so
 * the same rule runs eagerly and, inside a traced body, is traced into the
 * graph (and then optimised and fused like the forward pass). Shapes that
 * may be symbolic (a batch dim of -1) are never baked into a fill or a
 * reshape when it can be avoided: broadcasts go through where(), and
 * reductions of broadcast dims through reduce_sum. */
#include "autodiff/tape.h"
#include "util/fault.h"
#include "util/dtype.h"

#include <stdlib.h>

vf_tensor *vf_ad_scalar(vf_context *ctx, vf_dtype dt, double v) { return vf_fill(ctx, dt, 0, NULL, v); }

vf_tensor *vf_ad_broadcast(vf_context *ctx, vf_tensor *v, vf_tensor *like)
{
    /* where(c, v, v) is v whatever c is (also for NaNs in like); it only
       gives the result like's shape, and stays correct for symbolic dims */
    vf_tensor *c = vf_equal(ctx, like, like);
    return vf_where(ctx, c, v, v);
}

vf_tensor *vf_ad_unbroadcast(vf_context *ctx, vf_tensor *g, vf_tensor *x)
{
    if (!g) return NULL;
    int lead = g->rank - x->rank;
    if (lead > 0) {
        int axes[VF_MAX_RANK];
        for (int i = 0; i < lead; i++) axes[i] = i;
        g = vf_reduce_sum(ctx, g, lead, axes, false);
        if (!g) return NULL;
    }
    int axes[VF_MAX_RANK], n = 0;
    for (int d = 0; d < x->rank; d++)
        if (x->shape[d] == 1 && g->shape[d] != 1) axes[n++] = d;
    if (n) g = vf_reduce_sum(ctx, g, n, axes, true);
    return g;
}

static vf_tensor *scal(vf_context *ctx, vf_tensor *like, double v) { return vf_ad_scalar(ctx, like->dtype, v); }

/* where(mask, v, 0) */
static vf_tensor *masked(vf_context *ctx, vf_tensor *mask, vf_tensor *v)
{
    return vf_where(ctx, mask, v, scal(ctx, v, 0.0));
}

/* ---- elementwise --------------------------------------------------------- */

#define IN(i) (e->in[i])
#define OUT (e->out)

static bool g_add(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_ad_unbroadcast(ctx, g, IN(0));
    gin[1] = vf_ad_unbroadcast(ctx, g, IN(1));
    return gin[0] && gin[1];
}
static bool g_sub(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_ad_unbroadcast(ctx, g, IN(0));
    gin[1] = vf_ad_unbroadcast(ctx, vf_neg(ctx, g), IN(1));
    return gin[0] && gin[1];
}
static bool g_mul(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_ad_unbroadcast(ctx, vf_mul(ctx, g, IN(1)), IN(0));
    gin[1] = vf_ad_unbroadcast(ctx, vf_mul(ctx, g, IN(0)), IN(1));
    return gin[0] && gin[1];
}
static bool g_div(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *ga = vf_div(ctx, g, IN(1));
    gin[0] = vf_ad_unbroadcast(ctx, ga, IN(0));
    /* d(a/b)/db = -(a/b)/b */
    gin[1] = vf_ad_unbroadcast(ctx, vf_neg(ctx, vf_mul(ctx, ga, vf_div(ctx, IN(0), IN(1)))), IN(1));
    return gin[0] && gin[1];
}
static bool g_pow(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *a = IN(0), *b = IN(1);
    vf_tensor *bm1 = vf_sub(ctx, b, scal(ctx, b, 1.0));
    gin[0] = vf_ad_unbroadcast(ctx, vf_mul(ctx, g, vf_mul(ctx, b, vf_pow(ctx, a, bm1))), a);
    /* d/db = a^b log a; TF's convention: 0 where a <= 0 (log undefined) */
    vf_tensor *pos = vf_greater(ctx, a, scal(ctx, a, 0.0));
    vf_tensor *safe = vf_where(ctx, pos, a, scal(ctx, a, 1.0));
    vf_tensor *lg = masked(ctx, pos, vf_log(ctx, safe));
    gin[1] = vf_ad_unbroadcast(ctx, vf_mul(ctx, g, vf_mul(ctx, OUT, lg)), b);
    return gin[0] && gin[1];
}
/* maximum/minimum: the gradient goes to a where a wins or ties, else to b. */
static bool g_maxmin(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *m = e->op == VF_OP_MAXIMUM ? vf_greater_equal(ctx, IN(0), IN(1))
                                          : vf_less_equal(ctx, IN(0), IN(1));
    vf_tensor *z = scal(ctx, g, 0.0);
    gin[0] = vf_ad_unbroadcast(ctx, vf_where(ctx, m, g, z), IN(0));
    gin[1] = vf_ad_unbroadcast(ctx, vf_where(ctx, m, z, g), IN(1));
    return gin[0] && gin[1];
}
static bool g_where(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *z = scal(ctx, g, 0.0);
    gin[1] = vf_ad_unbroadcast(ctx, vf_where(ctx, IN(0), g, z), IN(1));
    gin[2] = vf_ad_unbroadcast(ctx, vf_where(ctx, IN(0), z, g), IN(2));
    return gin[1] && gin[2];
}

#define UNARY_RULE(fn, expr) \
    static bool fn(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin) \
    { \
        vf_tensor *x = IN(0), *y = OUT; \
        (void)x; (void)y; \
        gin[0] = (expr); \
        return gin[0] != NULL; \
    }

UNARY_RULE(g_neg, vf_neg(ctx, g))
UNARY_RULE(g_exp, vf_mul(ctx, g, y))
UNARY_RULE(g_log, vf_div(ctx, g, x))
UNARY_RULE(g_sqrt, vf_div(ctx, vf_mul(ctx, g, scal(ctx, g, 0.5)), y))
/* d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3 */
UNARY_RULE(g_rsqrt, vf_mul(ctx, g, vf_mul(ctx, scal(ctx, g, -0.5), vf_mul(ctx, y, vf_mul(ctx, y, y)))))
UNARY_RULE(g_abs, vf_where(ctx, vf_greater(ctx, x, scal(ctx, x, 0.0)), g,
                           masked(ctx, vf_less(ctx, x, scal(ctx, x, 0.0)), vf_neg(ctx, g))))
UNARY_RULE(g_tanh, vf_mul(ctx, g, vf_sub(ctx, scal(ctx, g, 1.0), vf_mul(ctx, y, y))))
UNARY_RULE(g_sigmoid, vf_mul(ctx, g, vf_mul(ctx, y, vf_sub(ctx, scal(ctx, g, 1.0), y))))
UNARY_RULE(g_relu, masked(ctx, vf_greater(ctx, x, scal(ctx, x, 0.0)), g))
UNARY_RULE(g_sin, vf_mul(ctx, g, vf_cos(ctx, x)))
UNARY_RULE(g_cos, vf_neg(ctx, vf_mul(ctx, g, vf_sin(ctx, x))))
UNARY_RULE(g_copy, vf_ad_unbroadcast(ctx, g, x))
UNARY_RULE(g_square, vf_mul(ctx, g, vf_mul(ctx, scal(ctx, x, 2.0), x)))

/* gelu (tanh form): with u = c(x + k x^3), t = tanh u,
   d/dx = 0.5(1 + t) + 0.5 x (1 - t^2) c (1 + 3k x^2) */
static bool g_gelu(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    const double c = 0.7978845608028654, k = 0.044715;
    vf_tensor *x = IN(0);
    vf_tensor *x2 = vf_mul(ctx, x, x);
    vf_tensor *u = vf_mul(ctx, scal(ctx, x, c), vf_add(ctx, x, vf_mul(ctx, scal(ctx, x, k), vf_mul(ctx, x2, x))));
    vf_tensor *t = vf_tanh(ctx, u);
    vf_tensor *one = scal(ctx, x, 1.0), *half = scal(ctx, x, 0.5);
    vf_tensor *a = vf_mul(ctx, half, vf_add(ctx, one, t));
    vf_tensor *du = vf_mul(ctx, scal(ctx, x, c), vf_add(ctx, one, vf_mul(ctx, scal(ctx, x, 3 * k), x2)));
    vf_tensor *b = vf_mul(ctx, vf_mul(ctx, half, x), vf_mul(ctx, vf_sub(ctx, one, vf_mul(ctx, t, t)), du));
    gin[0] = vf_mul(ctx, g, vf_add(ctx, a, b));
    return gin[0] != NULL;
}

/* float -> float casts pass the gradient through; integer and bool ends are
   not differentiable (vf_grad_fn_of refuses them). */
static bool g_cast(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = g->dtype == IN(0)->dtype ? g : vf_cast(ctx, g, IN(0)->dtype);
    return gin[0] != NULL;
}

/* ---- reductions ---------------------------------------------------------- */

/* g (the reduction's output gradient) with the reduced axes back as size 1. */
static vf_tensor *keepdims_of(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g)
{
    if (e->attrs.keepdims || !e->attrs.axes_mask) return g;
    vf_tensor *x = IN(0);
    int64_t s[VF_MAX_RANK];
    for (int d = 0; d < x->rank; d++) s[d] = (e->attrs.axes_mask >> d) & 1 ? 1 : x->shape[d];
    return vf_ad_reshape(ctx, g, x->rank, s);
}

static bool g_sum(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_ad_broadcast(ctx, keepdims_of(ctx, e, g), IN(0));
    return gin[0] != NULL;
}
/* The count is computed in the graph (a sum of ones), not taken from this
   trace's shapes, so that a symbolic reduced dim (a batch of -1) stays right. */
static bool g_mean(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    int axes[VF_MAX_RANK], n = 0;
    for (int d = 0; d < x->rank; d++)
        if ((e->attrs.axes_mask >> d) & 1) axes[n++] = d;
    vf_tensor *cnt = vf_reduce_sum(ctx, vf_ad_broadcast(ctx, scal(ctx, x, 1.0), x), n, axes, true);
    gin[0] = vf_div(ctx, vf_ad_broadcast(ctx, keepdims_of(ctx, e, g), x), cnt);
    return gin[0] != NULL;
}
/* max/min: the gradient is split evenly among the tied extrema (as TF). */
static bool g_maxred(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    /* The mask is piecewise constant in x: not recorded by the tapes that
       differentiate this gradient again (higher order), which would refuse
       the cast of a comparison. */
    ctx->tape_mute++;
    vf_tensor *mask = vf_cast(ctx, vf_equal(ctx, x, keepdims_of(ctx, e, OUT)), x->dtype);
    ctx->tape_mute--;
    int axes[VF_MAX_RANK], n = 0;
    for (int d = 0; d < x->rank; d++)
        if ((e->attrs.axes_mask >> d) & 1) axes[n++] = d;
    vf_tensor *cnt = vf_reduce_sum(ctx, mask, n, axes, true);
    gin[0] = vf_mul(ctx, mask, vf_div(ctx, keepdims_of(ctx, e, g), cnt));
    return gin[0] != NULL;
}
/* d|x|/dx = x/|x|; 0 at x == 0 (the subgradient TF uses for the norm). */
static bool g_norm(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    vf_tensor *pos = vf_greater(ctx, OUT, scal(ctx, x, 0.0));
    vf_tensor *safe = vf_where(ctx, pos, OUT, scal(ctx, x, 1.0));
    gin[0] = vf_mul(ctx, vf_ad_broadcast(ctx, keepdims_of(ctx, e, g), x),
                    masked(ctx, pos, vf_div(ctx, x, safe)));
    return gin[0] != NULL;
}

/* ---- row ops ------------------------------------------------------------- */

/* The rule's value (its ops' below, to the bit) in one kernel of the
   backend's row_grad (backend.h; the CPU backend's: one pass over the
   rows instead of four to seven kernels), where the ops would run at once
   on concrete tensors: eager (not traced: a trace's group is fused by the
   plan instead), no tape recording them (an outer tape differentiates
   the ops again: higher order), f32, along the last axis. x: the exec
   (op, axis, in[0] g, in[1] y or the logits, in[2] the labels) with
   shape `like` for the output. *dx NULL: run the ops; false: failed, the
   error recorded. */
static bool row_grad(vf_context *ctx, vf_exec *x, int n_in, vf_tensor *const *in, const vf_tensor *like,
                     vf_tensor **dx)
{
    const vf_backend_iface *be = ctx->be.iface;
    *dx = NULL;
    if (ctx->trace || !be->row_grad || vf_tape_recording(ctx) || like->numel == 0 || like->dtype != VF_F32)
        return true;
    for (int k = 0; k < n_in; k++)
        if (!in[k]) return true;
    vf_tensor *t = vf_tensor_new(ctx, "vf_tape_gradient", VF_F32, like->rank, like->shape);
    if (!t) return false;
    x->n_in = n_in;
    for (int k = 0; k < n_in; k++) x->in[k] = vf_tensor_ref(in[k]);
    x->out = vf_tensor_ref(t);
    vf_status s = be->row_grad(ctx->be.self, x);
    if (s == VF_OK) {
        *dx = t;
        return true;
    }
    vf_tensor_release(t);
    if (s == VF_ERROR_UNSUPPORTED) return true;
    vf_backend_failed(ctx, s, "vf_tape_gradient: the %s gradient (%s backend)", vf_op_get(x->op)->name, be->name);
    return false;
}

static bool same_shape(const vf_tensor *a, const vf_tensor *b)
{
    if (a->rank != b->rank) return false;
    for (int d = 0; d < a->rank; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

/* softmax / log_softmax: g and y f32 of one shape, the last axis */
static bool softmax_row_grad(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **dx)
{
    *dx = NULL;
    if (g->dtype != VF_F32 || !same_shape(g, OUT) || e->attrs.axis != OUT->rank - 1) return true;
    vf_exec x = {.op = (vf_op)e->op, .attrs.axis = e->attrs.axis};
    return row_grad(ctx, &x, 2, (vf_tensor *[]){g, OUT}, OUT, dx);
}

/* dx = y * (g - sum(g * y)) */
static bool g_softmax(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    int ax = e->attrs.axis;
    if (!softmax_row_grad(ctx, e, g, &gin[0]) || gin[0]) return gin[0] != NULL;
    vf_tensor *gy = vf_mul(ctx, g, OUT);
    gin[0] = vf_mul(ctx, OUT, vf_sub(ctx, g, vf_reduce_sum(ctx, gy, 1, &ax, true)));
    return gin[0] != NULL;
}
/* dx = g - exp(y) * sum(g) */
static bool g_log_softmax(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    int ax = e->attrs.axis;
    if (!softmax_row_grad(ctx, e, g, &gin[0]) || gin[0]) return gin[0] != NULL;
    gin[0] = vf_sub(ctx, g, vf_mul(ctx, vf_exp(ctx, OUT), vf_reduce_sum(ctx, g, 1, &ax, true)));
    return gin[0] != NULL;
}
/* d xent / d logits = softmax(logits) - onehot(labels); labels get none. */
static bool g_xent(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *labels = IN(0), *logits = IN(1);
    int r = logits->rank;
    int64_t classes = logits->shape[r - 1];
    if (g->dtype == VF_F32 && same_shape(g, labels)) { /* in one kernel: see row_grad */
        vf_exec x = {.op = VF_OP_SPARSE_XENT, .attrs.axis = r - 1};
        if (!row_grad(ctx, &x, 3, (vf_tensor *[]){g, logits, labels}, logits, &gin[1]) || gin[1])
            return gin[1] != NULL;
    }
    int32_t *iota = vf_malloc((size_t)classes * sizeof *iota);
    if (!iota) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape_gradient: out of host memory (malloc failed)"), false;
    for (int64_t i = 0; i < classes; i++) iota[i] = (int32_t)i;
    vf_tensor *ids = vf_tensor_from_host(ctx, labels->dtype, 1, &classes, iota);
    free(iota);
    int64_t s[VF_MAX_RANK];
    for (int d = 0; d < r - 1; d++) s[d] = labels->shape[d];
    s[r - 1] = 1;
    vf_tensor *lk = vf_ad_reshape(ctx, labels, r, s);
    vf_tensor *onehot = vf_cast(ctx, vf_equal(ctx, lk, ids), logits->dtype);
    vf_tensor *d = vf_sub(ctx, vf_softmax(ctx, logits, -1), onehot);
    gin[1] = vf_mul(ctx, vf_ad_reshape(ctx, g, r, s), d);
    return gin[1] != NULL;
}

/* ---- issue 13's math ops -------------------------------------------------- */

/* floor, ceil, round, sign (piecewise constant) and stop_gradient: no
   gradient reaches the input (the tape gives a source without one zeros). */
static bool g_zero(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    (void)ctx, (void)e, (void)g, (void)gin;
    return true;
}
/* a mod b = a - floor(a/b) b: d/da = 1, d/db = -floor(a/b) */
static bool g_mod(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_ad_unbroadcast(ctx, g, IN(0));
    vf_tensor *q = vf_floor(ctx, vf_div(ctx, IN(0), IN(1)));
    gin[1] = vf_ad_unbroadcast(ctx, vf_neg(ctx, vf_mul(ctx, g, q)), IN(1));
    return gin[0] && gin[1];
}
/* d erf = 2/sqrt(pi) e^(-x^2) */
UNARY_RULE(g_erf, vf_mul(ctx, g, vf_mul(ctx, scal(ctx, x, 1.1283791670955126),
                                         vf_exp(ctx, vf_neg(ctx, vf_mul(ctx, x, x))))))
UNARY_RULE(g_log1p, vf_div(ctx, g, vf_add(ctx, x, scal(ctx, x, 1.0))))
UNARY_RULE(g_expm1, vf_mul(ctx, g, vf_add(ctx, y, scal(ctx, y, 1.0))))
UNARY_RULE(g_softplus, vf_mul(ctx, g, vf_sigmoid(ctx, x)))
/* alpha (a scalar made by vf_leaky_relu) gets none */
static bool g_leaky_relu(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    gin[0] = vf_where(ctx, vf_greater(ctx, x, scal(ctx, x, 0.0)), g, vf_mul(ctx, g, IN(1)));
    return gin[0] != NULL;
}
/* passes where lo <= x <= hi (TF's clip_by_value: zero only where x is
   outside); the bounds (scalars made by vf_clip) get none */
static bool g_clip(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    vf_tensor *out = vf_logical_or(ctx, vf_less(ctx, x, IN(1)), vf_greater(ctx, x, IN(2)));
    gin[0] = vf_where(ctx, out, scal(ctx, g, 0.0), g);
    return gin[0] != NULL;
}
/* d prod / d x_i = the product of the others, computed without dividing by
   x_i where that is 0: with z zeros in the row and p the product of its
   nonzero elements, it is p / x_i when z = 0, p at the zero when z = 1,
   and 0 otherwise. The zero count and the masks are piecewise constant:
   not recorded for a higher-order tape (as g_maxred's mask). */
static bool g_prod(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    int axes[VF_MAX_RANK], n = 0;
    for (int d = 0; d < x->rank; d++)
        if ((e->attrs.axes_mask >> d) & 1) axes[n++] = d;
    vf_tensor *zero = scal(ctx, x, 0.0), *one = scal(ctx, x, 1.0);
    ctx->tape_mute++;
    vf_tensor *isz = vf_equal(ctx, x, zero);
    vf_tensor *z = vf_reduce_sum(ctx, vf_where(ctx, isz, one, zero), n, axes, true);
    vf_tensor *z0 = vf_equal(ctx, z, zero), *z1 = vf_equal(ctx, z, one);
    ctx->tape_mute--;
    vf_tensor *safe = vf_where(ctx, isz, one, x);
    vf_tensor *p = vf_reduce_prod(ctx, safe, n, axes, true);
    vf_tensor *at_zero = vf_where(ctx, z1, p, zero);
    vf_tensor *at_other = vf_where(ctx, z0, vf_div(ctx, p, safe), zero);
    vf_tensor *d = vf_where(ctx, isz, at_zero, at_other);
    gin[0] = vf_mul(ctx, vf_ad_broadcast(ctx, keepdims_of(ctx, e, g), x), d);
    return gin[0] != NULL;
}
/* the softmax over the reduced axes: exp(x - logsumexp) */
static bool g_logsumexp(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0);
    vf_tensor *sm = vf_exp(ctx, vf_sub(ctx, x, keepdims_of(ctx, e, OUT)));
    gin[0] = vf_mul(ctx, keepdims_of(ctx, e, g), sm);
    return gin[0] != NULL;
}

/* ---- matmul and movement ------------------------------------------------- */

/* C = op(A) op(B) with op a transpose where flagged:
     --: dA = g B^T,     dB = A^T g
     T-: dA = B g^T,     dB = A g
     -T: dA = g B,       dB = g^T A
     TT: dA = B^T g^T,   dB = g^T A^T
   Vectors are matrices with a size-1 dim (as the forward op does); batch
   dims that were broadcast are summed back. */

/* dB of a matrix B under a batched, untransposed A ([..., m, k] @ op(B),
   x @ W in every sequence model): the per-batch products summed over the
   batch are one product over A's rows flattened, A2 = [M, k] and
   g2 = [M, n] with M = batch * m: dB = A2^T g2 (g2^T A2 when B is
   transposed). One GEMM whose inner dim is M, instead of a batched GEMM
   with inner dim m, its [..., k, n] result and a reduction over the batch.
   NULL (with no error) where the flattening cannot follow the sizes: a
   symbolic last dim, more than one symbolic dim (a traced reshape follows
   one), or an empty last dim (-1 is then ambiguous). */
static vf_tensor *matmul_db_flat(vf_context *ctx, vf_tensor *a, vf_tensor *b, vf_tensor *g, bool tb)
{
    if (b->rank != 2 || a->rank < 3 || g->rank != a->rank) return NULL;
    int r = a->rank;
    uint32_t sa = vf_trace_sym_dims(ctx, a, "vf_tape_gradient"), sg = vf_trace_sym_dims(ctx, g, "vf_tape_gradient");
    if (((sa | sg) >> (r - 1)) & 1u) return NULL;
    if ((sa & (sa - 1)) || (sg & (sg - 1))) return NULL;
    int64_t k = a->shape[r - 1], n = g->shape[r - 1];
    if (k <= 0 || n <= 0) return NULL;
    vf_tensor *a2 = vf_reshape(ctx, a, 2, (int64_t[]){-1, k}), *g2 = vf_reshape(ctx, g, 2, (int64_t[]){-1, n});
    return tb ? vf_matmul_ex(ctx, g2, a2, true, false) : vf_matmul_ex(ctx, a2, g2, true, false);
}

static bool g_matmul(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *a = IN(0), *b = IN(1);
    bool ta = e->attrs.trans_a, tb = e->attrs.trans_b;
    bool av = a->rank == 1, bv = b->rank == 1;
    int64_t s[VF_MAX_RANK];
    if (av) { s[0] = 1; s[1] = a->shape[0]; a = vf_reshape(ctx, a, 2, s); }
    if (bv) { s[0] = b->shape[0]; s[1] = 1; b = vf_reshape(ctx, b, 2, s); }
    if (!a || !b) return false;
    if (av || bv) { /* g back to [..., m, n] */
        int r = g->rank;
        for (int d = 0; d < r; d++) s[d] = g->shape[d];
        if (av && bv) { s[0] = 1; s[1] = 1; r = 2; }
        else if (av) { s[r] = s[r - 1]; s[r - 1] = 1; r++; }
        else { s[r] = 1; r++; }
        g = vf_ad_reshape(ctx, g, r, s);
    }
    vf_tensor *da, *db = !ta && !av && !bv ? matmul_db_flat(ctx, a, b, g, tb) : NULL;
    bool flat = db != NULL;
    if (!ta && !tb) { da = vf_matmul_ex(ctx, g, b, false, true); if (!flat) db = vf_matmul_ex(ctx, a, g, true, false); }
    else if (ta && !tb) { da = vf_matmul_ex(ctx, b, g, false, true); db = vf_matmul_ex(ctx, a, g, false, false); }
    else if (!ta && tb) { da = vf_matmul_ex(ctx, g, b, false, false); if (!flat) db = vf_matmul_ex(ctx, g, a, true, false); }
    else { da = vf_matmul_ex(ctx, b, g, true, true); db = vf_matmul_ex(ctx, g, a, true, true); }
    da = vf_ad_unbroadcast(ctx, da, a);
    db = vf_ad_unbroadcast(ctx, db, b);
    if (av && da) da = vf_reshape(ctx, da, 1, IN(0)->shape);
    if (bv && db) db = vf_reshape(ctx, db, 1, IN(1)->shape);
    gin[0] = da;
    gin[1] = db;
    return da && db;
}

static bool g_transpose(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    int inv[VF_MAX_RANK];
    for (int i = 0; i < IN(0)->rank; i++) inv[e->attrs.perm[i]] = i;
    gin[0] = vf_transpose(ctx, g, inv);
    return gin[0] != NULL;
}

/* Slice: g scattered into zeros of x's shape (SLICE_GRAD reads only x's
   shape, resolved per call: right at every size of a symbolic dim). */
static bool g_slice(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_slice_grad(ctx, g, IN(0), &e->attrs);
    return gin[0] != NULL;
}

/* Slice_grad is linear in g: its gradient is the slice of its own
   gradient; the shape input gets none. */
static bool g_slice_grad(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    gin[0] = vf_slice(ctx, g, e->attrs.lo, e->attrs.hi, e->attrs.step);
    return gin[0] != NULL;
}

/* Pad: the slice of g where x went (its end counted from the end, so that
   a symbolic dim stays right). */
static bool g_pad(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    int64_t b[VF_MAX_RANK], en[VF_MAX_RANK];
    for (int d = 0; d < IN(0)->rank; d++) {
        b[d] = e->attrs.lo[d];
        en[d] = e->attrs.hi[d] ? -e->attrs.hi[d] : INT64_MAX;
    }
    gin[0] = vf_slice(ctx, g, b, en, e->attrs.step);
    return gin[0] != NULL;
}

/* The positions 0 .. n-1 along dim ax of x (n: its size there, at each
   call), plus off (an i32 scalar, or NULL), as an i32 vector: gather
   indices that follow a symbolic dim. */
static vf_tensor *positions(vf_context *ctx, vf_tensor *x, int ax, vf_tensor *off, vf_tensor **count)
{
    vf_tensor *ones = vf_ad_broadcast(ctx, vf_ad_scalar(ctx, VF_I32, 1.0), x);
    int64_t b[VF_MAX_RANK] = {0}, e[VF_MAX_RANK];
    for (int d = 0; d < x->rank; d++) e[d] = d == ax ? INT64_MAX : 1;
    vf_tensor *row = ones ? vf_reshape(ctx, vf_slice(ctx, ones, b, e, NULL), 1, (int64_t[]){-1}) : NULL;
    if (count) *count = row ? vf_reduce_sum(ctx, row, 0, NULL, false) : NULL;
    vf_tensor *idx = row ? vf_cumsum(ctx, row, 0, true, false) : NULL;
    return off && idx ? vf_add(ctx, idx, off) : idx;
}

/* Concat: g's two parts. A part of fixed size along the axis bounds the
   other's slice (from the end when the first part varies); when both vary
   (symbolic, e.g. concat(x, x)), the parts are gathered at their positions
   counted at run time. */
static bool g_concat(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    vf_tensor *x = IN(0), *y = IN(1);
    int ax = e->attrs.axis;
    bool sx = (vf_trace_sym_dims(ctx, x, "vf_tape_gradient") >> ax) & 1u;
    bool sy = (vf_trace_sym_dims(ctx, y, "vf_tape_gradient") >> ax) & 1u;
    if (sx && sy) {
        vf_tensor *nx = NULL, *ix = positions(ctx, x, ax, NULL, &nx);
        vf_tensor *iy = ix && nx ? positions(ctx, y, ax, nx, NULL) : NULL;
        gin[0] = ix ? vf_gather(ctx, g, ix, ax) : NULL;
        gin[1] = iy ? vf_gather(ctx, g, iy, ax) : NULL;
        return gin[0] && gin[1];
    }
    int64_t b[VF_MAX_RANK], en[VF_MAX_RANK];
    for (int d = 0; d < g->rank; d++) b[d] = 0, en[d] = INT64_MAX;
    int64_t cut = !sx ? x->shape[ax] : y->shape[ax] ? -y->shape[ax] : INT64_MAX;
    en[ax] = cut;
    gin[0] = vf_slice(ctx, g, b, en, NULL);
    b[ax] = cut;
    en[ax] = INT64_MAX;
    gin[1] = vf_slice(ctx, g, b, en, NULL);
    return gin[0] && gin[1];
}

static bool g_reshape(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    /* back to x's shape with the -1 where x's symbolic dim is (tile's
       [2, N, 2, 6] -> [2N, 12] has it second); vf_ad_reshape guesses */
    uint32_t sym = vf_trace_sym_dims(ctx, IN(0), "vf_tape_gradient");
    if (sym && !(sym & (sym - 1))) {
        int64_t s[VF_MAX_RANK];
        for (int d = 0; d < IN(0)->rank; d++) s[d] = (sym >> d) & 1u ? -1 : IN(0)->shape[d];
        gin[0] = vf_reshape(ctx, g, IN(0)->rank, s);
        return gin[0] != NULL;
    }
    gin[0] = vf_ad_reshape(ctx, g, IN(0)->rank, IN(0)->shape);
    return gin[0] != NULL;
}

/* The rule objects the autodiff stage's table (grad_table.c) points at. */
#define RULE(name, fn) const vf_grad_rule vf_grad_##name = {fn};
RULE(add, g_add) RULE(sub, g_sub) RULE(mul, g_mul) RULE(div, g_div) RULE(pow, g_pow) RULE(maxmin, g_maxmin)
RULE(where, g_where) RULE(neg, g_neg) RULE(exp, g_exp) RULE(log, g_log) RULE(sqrt, g_sqrt) RULE(rsqrt, g_rsqrt)
RULE(abs, g_abs) RULE(tanh, g_tanh) RULE(sigmoid, g_sigmoid) RULE(relu, g_relu) RULE(gelu, g_gelu)
RULE(sin, g_sin) RULE(cos, g_cos) RULE(cast, g_cast) RULE(copy, g_copy)
RULE(sum, g_sum) RULE(mean, g_mean) RULE(maxred, g_maxred) RULE(norm, g_norm)
RULE(softmax, g_softmax) RULE(log_softmax, g_log_softmax) RULE(xent, g_xent)
RULE(matmul, g_matmul) RULE(transpose, g_transpose) RULE(square, g_square)
/* issue 13's math ops */
RULE(zero, g_zero) RULE(mod, g_mod) RULE(erf, g_erf) RULE(log1p, g_log1p) RULE(expm1, g_expm1)
RULE(softplus, g_softplus) RULE(leaky_relu, g_leaky_relu) RULE(clip, g_clip) RULE(prod, g_prod)
RULE(logsumexp, g_logsumexp)
RULE(slice, g_slice) RULE(pad, g_pad) RULE(concat, g_concat) RULE(slice_grad, g_slice_grad)
#undef RULE

vf_grad_fn vf_grad_fn_of(const vf_tape_entry *e)
{
    if (e->op == VF_TAPE_RESHAPE) return g_reshape;
    const vf_grad_rule *rule = e->op < 0 || e->op >= VF_OP_COUNT ? NULL : vf_grad_rule_of((vf_op)e->op);
    if (!rule) return NULL;
    /* only float values carry gradients */
    if (!vf_dtype_is_float(e->out->dtype)) return NULL;
    if (e->op == VF_OP_CAST && (!e->in[0] || !vf_dtype_is_float(e->in[0]->dtype))) return NULL;
    for (int i = 0; i < e->n_in; i++)
        if (!e->in[i]) return NULL;
    return rule->fn;
}
