/* The gradient rule cases (grad_cases.h), shared by the checks of
 * tests/test_tape*.c; their references build on grad_refs.c. */
#include "grad_cases.h"
#include "testutil.h"
#include "util/philox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static double s_add(double a, double b, double c) { (void)c; return a + b; }
static double s_sub(double a, double b, double c) { (void)c; return a - b; }
static double s_mul(double a, double b, double c) { (void)c; return a * b; }
static double s_div(double a, double b, double c) { (void)c; return a / b; }
static double s_pow(double a, double b, double c) { (void)c; return pow(a, b); }
static double s_max(double a, double b, double c) { (void)c; return fmax(a, b); }
static double s_min(double a, double b, double c) { (void)c; return fmin(a, b); }
/* where(a > b, a, b*b): the test's where case */
static double s_where(double a, double b, double c) { (void)c; return a > b ? a : b * b; }
/* where(c > 0, a, b) with c broadcast */
static double s_where3(double a, double b, double c) { return c > 0 ? a : b; }
static double s_neg(double a, double b, double c) { (void)b, (void)c; return -a; }
static double s_exp(double a, double b, double c) { (void)b, (void)c; return exp(a); }
static double s_log(double a, double b, double c) { (void)b, (void)c; return log(a); }
static double s_sqrt(double a, double b, double c) { (void)b, (void)c; return sqrt(a); }
static double s_rsqrt(double a, double b, double c) { (void)b, (void)c; return 1 / sqrt(a); }
static double s_abs(double a, double b, double c) { (void)b, (void)c; return fabs(a); }
static double s_tanh(double a, double b, double c) { (void)b, (void)c; return tanh(a); }
static double s_sigmoid(double a, double b, double c) { (void)b, (void)c; return 1 / (1 + exp(-a)); }
static double s_relu(double a, double b, double c) { (void)b, (void)c; return a > 0 ? a : 0; }
static double s_gelu(double a, double b, double c)
{
    (void)b, (void)c;
    return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
}
static double s_sin(double a, double b, double c) { (void)b, (void)c; return sin(a); }
static double s_cos(double a, double b, double c) { (void)b, (void)c; return cos(a); }
static double s_square(double a, double b, double c) { (void)b, (void)c; return a * a; }
static double s_id(double a, double b, double c) { (void)b, (void)c; return a; }
/* issue 13's math ops; the piecewise-constant ones times x, so that the
   checks see a gradient (x's) besides their own zero */
static double s_xfloor(double a, double b, double c) { (void)b, (void)c; return a * floor(a); }
static double s_xceil(double a, double b, double c) { (void)b, (void)c; return a * ceil(a); }
static double s_xround(double a, double b, double c) { (void)b, (void)c; return a * nearbyint(a); }
static double s_xsign(double a, double b, double c) { (void)b, (void)c; return a * (a > 0 ? 1 : -1); }
static double s_mod(double a, double b, double c) { (void)c; return a - b * floor(a / b); }
static double s_erf(double a, double b, double c) { (void)b, (void)c; return erf(a); }
static double s_log1p(double a, double b, double c) { (void)b, (void)c; return log(1 + a); }
static double s_expm1(double a, double b, double c) { (void)b, (void)c; return exp(a) - 1; }
static double s_softplus(double a, double b, double c) { (void)b, (void)c; return log(1 + exp(a)); }
static double s_leaky(double a, double b, double c) { (void)b, (void)c; return a > 0 ? a : 0.2 * a; }
static double s_clip(double a, double b, double c) { (void)b, (void)c; return fmin(fmax(a, -1.0), 1.5); }


/* ---- indexing (issue 13): gather / scatter_add, squared so that the
   second-order check runs both rules (gather's is scatter_add, and back) */
static const int32_t gi0[4] = {3, 0, 3, 4};            /* x [5, 3], axis 0: a duplicate */
static const int32_t gi1[6] = {1, 3, 1, 0, 2, 3};      /* x [2, 4], indices [2, 3], axis -1 */
static const int32_t si1[5] = {2, 0, 2, 3, 2};         /* x [3, 4], updates [3, 5], axis 1 */

static vf_tensor *gidx(vf_context *ctx, const int32_t *v, int rank, const int64_t *sh)
{
    return vf_tensor_from_host(ctx, VF_I32, rank, sh, v);
}
static vf_tensor *f_gather0(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_gather(ctx, in[0], gidx(ctx, gi0, 1, (int64_t[]){4}), 0));
}
static void r_gather0(const gc_dt *in, gc_dt *out)
{
    out->rank = 2, out->sh[0] = 4, out->sh[1] = 3;
    gc_dgather(&in[0], gi0, 4, 0, out);
    gc_dsquare_all(out);
}
static vf_tensor *f_gather1(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_gather(ctx, in[0], gidx(ctx, gi1, 2, (int64_t[]){2, 3}), -1));
}
static void r_gather1(const gc_dt *in, gc_dt *out)
{
    out->rank = 3, out->sh[0] = 2, out->sh[1] = 2, out->sh[2] = 3;
    gc_dgather(&in[0], gi1, 6, 1, out);
    gc_dsquare_all(out);
}
static vf_tensor *f_scatter1(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_scatter_add(ctx, in[0], gidx(ctx, si1, 1, (int64_t[]){5}), in[1], 1));
}
static void r_scatter1(const gc_dt *in, gc_dt *out)
{
    *out = in[0];
    for (int64_t o = 0; o < 3; o++)
        for (int64_t j = 0; j < 5; j++) out->v[o * 4 + si1[j]] += in[1].v[o * 5 + j];
    gc_dsquare_all(out);
}

static vf_tensor *f_cumsum1(vf_context *ctx, vf_tensor **in) { return vf_square(ctx, vf_cumsum(ctx, in[0], 1, false, false)); }
static void r_cumsum1(const gc_dt *in, gc_dt *out)
{
    gc_dcumsum(&in[0], 1, false, false, out);
    gc_dsquare_all(out);
}
static vf_tensor *f_cumsum0er(vf_context *ctx, vf_tensor **in) { return vf_square(ctx, vf_cumsum(ctx, in[0], -3, true, true)); }
static void r_cumsum0er(const gc_dt *in, gc_dt *out)
{
    gc_dcumsum(&in[0], 0, true, true, out);
    gc_dsquare_all(out);
}

/* top 2 of each row of [3, 4] by selection (the seeded inputs have no ties) */
static vf_tensor *f_topk(vf_context *ctx, vf_tensor **in) { return vf_square(ctx, vf_top_k(ctx, in[0], 2, NULL)); }
static void r_topk(const gc_dt *in, gc_dt *out)
{
    out->rank = 2, out->sh[0] = 3, out->sh[1] = 2;
    for (int r = 0; r < 3; r++) {
        int taken = -1;
        for (int j = 0; j < 2; j++) {
            int best = -1;
            for (int i = 0; i < 4; i++)
                if (i != taken && (best < 0 || in[0].v[r * 4 + i] > in[0].v[r * 4 + best])) best = i;
            out->v[r * 2 + j] = in[0].v[r * 4 + best] * in[0].v[r * 4 + best];
            taken = best;
        }
    }
}

/* ---- the cases --------------------------------------------------------- */


#define XENT_C 5
static int32_t xent_label(int64_t i) { return (int32_t)((i * 2 + 1) % XENT_C); }

static vf_tensor *xent_labels(vf_context *ctx, int64_t n)
{
    int32_t lab[64];
    for (int64_t i = 0; i < n; i++) lab[i] = xent_label(i);
    return vf_tensor_from_host(ctx, VF_I32, 1, &n, lab);
}

#define MAP(nm, call, nin, sf) \
    static vf_tensor *f_##nm(vf_context *ctx, vf_tensor **in) { return call; } \
    static void r_##nm(const gc_dt *in, gc_dt *out) \
    { \
        const gc_dt *x[3] = {&in[0], &in[1], &in[2]}; \
        gc_dmap(nin, x, sf, out); \
    }
MAP(neg, vf_neg(ctx, in[0]), 1, s_neg)
MAP(exp, vf_exp(ctx, in[0]), 1, s_exp)
MAP(log, vf_log(ctx, in[0]), 1, s_log)
MAP(sqrt, vf_sqrt(ctx, in[0]), 1, s_sqrt)
MAP(rsqrt, vf_rsqrt(ctx, in[0]), 1, s_rsqrt)
MAP(abs, vf_abs(ctx, in[0]), 1, s_abs)
MAP(tanh, vf_tanh(ctx, in[0]), 1, s_tanh)
MAP(sigmoid, vf_sigmoid(ctx, in[0]), 1, s_sigmoid)
MAP(relu, vf_relu(ctx, in[0]), 1, s_relu)
MAP(gelu, vf_gelu(ctx, in[0]), 1, s_gelu)
MAP(sin, vf_sin(ctx, in[0]), 1, s_sin)
MAP(cos, vf_cos(ctx, in[0]), 1, s_cos)
MAP(square, vf_square(ctx, in[0]), 1, s_square)
MAP(cast, vf_cast(ctx, in[0], VF_F32), 1, s_id)
MAP(add, vf_add(ctx, in[0], in[1]), 2, s_add)
MAP(sub, vf_sub(ctx, in[0], in[1]), 2, s_sub)
MAP(mul, vf_mul(ctx, in[0], in[1]), 2, s_mul)
MAP(div, vf_div(ctx, in[0], in[1]), 2, s_div)
MAP(pow, vf_pow(ctx, in[0], in[1]), 2, s_pow)
MAP(maximum, vf_maximum(ctx, in[0], in[1]), 2, s_max)
MAP(minimum, vf_minimum(ctx, in[0], in[1]), 2, s_min)
MAP(where, vf_where(ctx, vf_greater(ctx, in[0], in[1]), in[0], vf_mul(ctx, in[1], in[1])), 2, s_where)
MAP(where3, vf_where(ctx, vf_greater(ctx, in[2], vf_fill(ctx, VF_F32, 0, NULL, 0.0)), in[0], in[1]), 3, s_where3)
MAP(xfloor, vf_mul(ctx, in[0], vf_floor(ctx, in[0])), 1, s_xfloor)
MAP(xceil, vf_mul(ctx, in[0], vf_ceil(ctx, in[0])), 1, s_xceil)
MAP(xround, vf_mul(ctx, in[0], vf_round(ctx, in[0])), 1, s_xround)
MAP(xsign, vf_mul(ctx, in[0], vf_sign(ctx, in[0])), 1, s_xsign)
MAP(mod, vf_mod(ctx, in[0], in[1]), 2, s_mod)
MAP(erf, vf_erf(ctx, in[0]), 1, s_erf)
MAP(log1p, vf_log1p(ctx, in[0]), 1, s_log1p)
MAP(expm1, vf_expm1(ctx, in[0]), 1, s_expm1)
MAP(softplus, vf_softplus(ctx, in[0]), 1, s_softplus)
MAP(leaky, vf_leaky_relu(ctx, in[0], 0.2), 1, s_leaky)
MAP(clip, vf_clip(ctx, in[0], -1.0, 1.5), 1, s_clip)
/* identity transpose and a reduction of a scalar run as COPY */
MAP(copy_t, vf_transpose(ctx, in[0], (int[]){0, 1}), 1, s_id)
MAP(copy_r, vf_reduce_sum(ctx, in[0], 0, NULL, false), 1, s_id)

#define RED(nm, call, kind, mask, keep) \
    static vf_tensor *f_##nm(vf_context *ctx, vf_tensor **in) { return call; } \
    static void r_##nm(const gc_dt *in, gc_dt *out) { gc_dreduce(&in[0], kind, mask, keep, out); }
RED(sum1, vf_reduce_sum(ctx, in[0], 1, (int[]){1}, false), GC_R_SUM, 2, false)
RED(sum02k, vf_reduce_sum(ctx, in[0], 2, (int[]){0, -1}, true), GC_R_SUM, 5, true)
RED(mean0k, vf_reduce_mean(ctx, in[0], 1, (int[]){0}, true), GC_R_MEAN, 1, true)
RED(mean12, vf_reduce_mean(ctx, in[0], 2, (int[]){1, 2}, false), GC_R_MEAN, 6, false)
RED(meanall, vf_reduce_mean(ctx, in[0], 0, NULL, false), GC_R_MEAN, 0, false)
RED(max1, vf_reduce_max(ctx, in[0], 1, (int[]){-1}, false), GC_R_MAX, 2, false)
RED(max01k, vf_reduce_max(ctx, in[0], 2, (int[]){0, 1}, true), GC_R_MAX, 3, true)
RED(minall, vf_reduce_min(ctx, in[0], 0, NULL, false), GC_R_MIN, 0, false)
RED(min0, vf_reduce_min(ctx, in[0], 1, (int[]){0}, false), GC_R_MIN, 1, false)
RED(norm, vf_norm(ctx, in[0]), GC_R_NORM, 0, false)
RED(prod1, vf_reduce_prod(ctx, in[0], 1, (int[]){1}, false), GC_R_PROD, 2, false)
RED(prod02k, vf_reduce_prod(ctx, in[0], 2, (int[]){0, -1}, true), GC_R_PROD, 5, true)
RED(lse1, vf_logsumexp(ctx, in[0], 1, (int[]){-1}, false), GC_R_LSE, 2, false)
RED(lse01k, vf_logsumexp(ctx, in[0], 2, (int[]){0, 1}, true), GC_R_LSE, 3, true)

static vf_tensor *f_softmax(vf_context *ctx, vf_tensor **in) { return vf_softmax(ctx, in[0], -1); }
static void r_softmax(const gc_dt *in, gc_dt *out) { gc_dsoftmax(&in[0], in[0].rank - 1, false, out); }
static vf_tensor *f_softmax0(vf_context *ctx, vf_tensor **in) { return vf_softmax(ctx, in[0], 0); }
static void r_softmax0(const gc_dt *in, gc_dt *out) { gc_dsoftmax(&in[0], 0, false, out); }
static vf_tensor *f_lsm(vf_context *ctx, vf_tensor **in) { return vf_log_softmax(ctx, in[0], -1); }
static void r_lsm(const gc_dt *in, gc_dt *out) { gc_dsoftmax(&in[0], in[0].rank - 1, true, out); }
static vf_tensor *f_lsm0(vf_context *ctx, vf_tensor **in) { return vf_log_softmax(ctx, in[0], 0); }
static void r_lsm0(const gc_dt *in, gc_dt *out) { gc_dsoftmax(&in[0], 0, true, out); }
static vf_tensor *f_xent(vf_context *ctx, vf_tensor **in)
{
    return vf_sparse_softmax_cross_entropy(ctx, xent_labels(ctx, vf_tensor_dim(in[0], 0)), in[0]);
}
static void r_xent(const gc_dt *in, gc_dt *out)
{
    gc_dt ls;
    gc_dsoftmax(&in[0], 1, true, &ls);
    out->rank = 1;
    out->sh[0] = in[0].sh[0];
    for (int64_t i = 0; i < in[0].sh[0]; i++) out->v[i] = -ls.v[i * XENT_C + xent_label(i)];
}

#define MM(nm, ta, tb) \
    static vf_tensor *f_##nm(vf_context *ctx, vf_tensor **in) { return vf_matmul_ex(ctx, in[0], in[1], ta, tb); } \
    static void r_##nm(const gc_dt *in, gc_dt *out) { gc_dmatmul(&in[0], &in[1], ta, tb, out); }
MM(mm, false, false)
MM(mm_ta, true, false)
MM(mm_tb, false, true)
MM(mm_tt, true, true)

static vf_tensor *f_reshape(vf_context *ctx, vf_tensor **in)
{
    return vf_mul(ctx, vf_reshape(ctx, in[0], 2, (int64_t[]){2, 6}), vf_reshape(ctx, in[0], 2, (int64_t[]){2, -1}));
}
static void r_reshape(const gc_dt *in, gc_dt *out)
{
    *out = in[0];
    out->rank = 2, out->sh[0] = 2, out->sh[1] = 6;
    for (int k = 0; k < 12; k++) out->v[k] = in[0].v[k] * in[0].v[k];
}
static vf_tensor *f_transpose(vf_context *ctx, vf_tensor **in) { return vf_transpose(ctx, in[0], (int[]){2, 0, 1}); }
static void r_transpose(const gc_dt *in, gc_dt *out) { gc_dtranspose(&in[0], (int[]){2, 0, 1}, out); }

/* a small MLP layer and loss: mean(tanh(x w + x)) over rows */
static vf_tensor *f_chain(vf_context *ctx, vf_tensor **in)
{
    return vf_reduce_mean(ctx, vf_tanh(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[0])), 1, (int[]){0}, false);
}
static void r_chain(const gc_dt *in, gc_dt *out)
{
    gc_dt p, s, t;
    gc_dmatmul(&in[0], &in[1], false, false, &p);
    const gc_dt *x[2] = {&p, &in[0]};
    gc_dmap(2, x, s_add, &s);
    const gc_dt *y[1] = {&s};
    gc_dmap(1, y, s_tanh, &t);
    gc_dreduce(&t, GC_R_MEAN, 1, false, out);
}
/* the same value used twice along different paths (gradients accumulate) */
static vf_tensor *f_fanout(vf_context *ctx, vf_tensor **in)
{
    vf_tensor *e = vf_exp(ctx, in[0]);
    return vf_add(ctx, vf_mul(ctx, e, in[1]), vf_reduce_sum(ctx, vf_mul(ctx, e, e), 1, (int[]){0}, true));
}
static void r_fanout(const gc_dt *in, gc_dt *out)
{
    gc_dt e, m, ee, s;
    const gc_dt *x[1] = {&in[0]};
    gc_dmap(1, x, s_exp, &e);
    const gc_dt *y[2] = {&e, &in[1]};
    gc_dmap(2, y, s_mul, &m);
    const gc_dt *z[2] = {&e, &e};
    gc_dmap(2, z, s_mul, &ee);
    gc_dreduce(&ee, GC_R_SUM, 1, true, &s);
    const gc_dt *w[2] = {&m, &s};
    gc_dmap(2, w, s_add, out);
}

/* ---- movement: index lists per dim (-1: a padded value), squared after so
   that second order sees the rule's own ops ---------------------------------- */

/* out[i0, i1, ...] = x[idx0[i0], idx1[i1], ...] (value where an index is -1). */
static void dwindow(const gc_dt *x, int64_t (*idx)[16], const int *m, double value, gc_dt *out)
{
    out->rank = x->rank;
    for (int d = 0; d < x->rank; d++) out->sh[d] = m[d];
    int64_t c[4];
    for (int64_t k = 0; k < gc_dnumel(out); k++) {
        gc_unflat(k, out->rank, out->sh, c);
        int64_t lin = 0;
        bool hole = false;
        for (int d = 0; d < x->rank; d++) {
            int64_t i = idx[d][c[d]];
            hole = hole || i < 0;
            lin = lin * x->sh[d] + (i < 0 ? 0 : i);
        }
        out->v[k] = hole ? value : x->v[lin];
    }
}
static void dsquare(gc_dt *y)
{
    for (int64_t k = 0; k < gc_dnumel(y); k++) y->v[k] *= y->v[k];
}
/* a range start, start + step, ... of m indices */
static int rng(int64_t *idx, int64_t start, int64_t step, int m)
{
    for (int i = 0; i < m; i++) idx[i] = start + i * step;
    return m;
}

#define BIG INT64_MAX
/* x[4, 5]: x[-2::-1, 3:0:-2] (rows 2, 1, 0; cols 3, 1) */
static vf_tensor *f_slice_neg(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_slice(ctx, in[0], (int64_t[]){-2, 3}, (int64_t[]){BIG, 0}, (int64_t[]){-1, -2}));
}
static void r_slice_neg(const gc_dt *in, gc_dt *out)
{
    int64_t idx[2][16];
    int m[2] = {rng(idx[0], 2, -1, 3), rng(idx[1], 3, -2, 2)};
    dwindow(&in[0], idx, m, 0, out);
    dsquare(out);
}
/* x[2, 7, 3]: x[:, 1::3, -100:2] (cols 1, 4; last 0, 1) */
static vf_tensor *f_slice_step(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_slice(ctx, in[0], (int64_t[]){0, 1, -100}, (int64_t[]){BIG, BIG, 2}, (int64_t[]){1, 3, 1}));
}
static void r_slice_step(const gc_dt *in, gc_dt *out)
{
    int64_t idx[3][16];
    int m[3] = {rng(idx[0], 0, 1, 2), rng(idx[1], 1, 3, 2), rng(idx[2], 0, 1, 2)};
    dwindow(&in[0], idx, m, 0, out);
    dsquare(out);
}
/* x[3, 4] padded by (1, 2) rows and (0, 1) cols of 0.5 */
static vf_tensor *f_pad(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_pad(ctx, in[0], (int64_t[]){1, 0}, (int64_t[]){2, 1}, 0.5));
}
static void r_pad(const gc_dt *in, gc_dt *out)
{
    int64_t idx[2][16] = {{-1, 0, 1, 2, -1, -1}, {0, 1, 2, 3, -1}};
    dwindow(&in[0], idx, (int[]){6, 5}, 0.5, out);
    dsquare(out);
}
/* concat of three along 0 (a tree of two binary concats) */
static vf_tensor *f_concat3(vf_context *ctx, vf_tensor **in) { return vf_square(ctx, vf_concat(ctx, 3, in, 0)); }
static void r_concat3(const gc_dt *in, gc_dt *out)
{
    out->rank = 2;
    out->sh[0] = in[0].sh[0] + in[1].sh[0] + in[2].sh[0];
    out->sh[1] = in[0].sh[1];
    int64_t k = 0;
    for (int i = 0; i < 3; i++)
        for (int64_t j = 0; j < gc_dnumel(&in[i]); j++) out->v[k++] = in[i].v[j];
    dsquare(out);
}
/* stack of two [3, 2] at axis 1 -> [3, 2, 2] */
static vf_tensor *f_stack(vf_context *ctx, vf_tensor **in) { return vf_square(ctx, vf_stack(ctx, 2, in, 1)); }
static void r_stack(const gc_dt *in, gc_dt *out)
{
    out->rank = 3;
    out->sh[0] = 3, out->sh[1] = 2, out->sh[2] = 2;
    for (int i = 0; i < 3; i++)
        for (int p = 0; p < 2; p++)
            for (int j = 0; j < 2; j++) out->v[(i * 2 + p) * 2 + j] = in[p].v[i * 2 + j];
    dsquare(out);
}
/* tile [2, 3] by (2, 2): each element used four times */
static vf_tensor *f_tile(vf_context *ctx, vf_tensor **in) { return vf_square(ctx, vf_tile(ctx, in[0], (int64_t[]){2, 2})); }
static void r_tile(const gc_dt *in, gc_dt *out)
{
    int64_t idx[2][16] = {{0, 1, 0, 1}, {0, 1, 2, 0, 1, 2}};
    dwindow(&in[0], idx, (int[]){4, 6}, 0, out);
    dsquare(out);
}
/* broadcast_to [3, 1] -> [2, 3, 4], then the split parts' product */
static vf_tensor *f_bcast(vf_context *ctx, vf_tensor **in)
{
    return vf_square(ctx, vf_broadcast_to(ctx, in[0], 3, (int64_t[]){2, 3, 4}));
}
static void r_bcast(const gc_dt *in, gc_dt *out)
{
    out->rank = 3;
    out->sh[0] = 2, out->sh[1] = 3, out->sh[2] = 4;
    for (int64_t k = 0; k < 24; k++) out->v[k] = in[0].v[(k / 4) % 3];
    dsquare(out);
}
/* split [5, 2] into 2 and 3 rows, the first padded to 3: parts multiplied;
   squeeze / expand_dims around it */
static vf_tensor *f_split(vf_context *ctx, vf_tensor **in)
{
    vf_tensor *p[2];
    if (vf_split(ctx, in[0], 2, (int64_t[]){2, -1}, 0, p) != VF_OK) return NULL;
    vf_tensor *a = vf_pad(ctx, p[0], (int64_t[]){1, 0}, NULL, 0.0);
    return vf_squeeze(ctx, vf_expand_dims(ctx, vf_mul(ctx, a, p[1]), 0), 0, NULL);
}
static void r_split(const gc_dt *in, gc_dt *out)
{
    out->rank = 2;
    out->sh[0] = 3, out->sh[1] = 2;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) out->v[i * 2 + j] = (i == 0 ? 0.0 : in[0].v[(i - 1) * 2 + j]) * in[0].v[(2 + i) * 2 + j];
}

/* conv2d (NHWC x HWIO) with explicit geometry: strides s, dilations dl,
   pads p (top, bottom, left, right), groups g */
static void dconv(const gc_dt *x, const gc_dt *w, const int s[2], const int dl[2], const int p[4], int g,
                  gc_dt *out)
{
    int64_t N = x->sh[0], H = x->sh[1], W = x->sh[2], C = x->sh[3];
    int64_t KH = w->sh[0], KW = w->sh[1], Cg = w->sh[2], O = w->sh[3], Og = O / g;
    int64_t OH = (H + p[0] + p[1] - dl[0] * (KH - 1) - 1) / s[0] + 1;
    int64_t OW = (W + p[2] + p[3] - dl[1] * (KW - 1) - 1) / s[1] + 1;
    *out = (gc_dt){.rank = 4, .sh = {N, OH, OW, O}};
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t o = 0; o < O; o++) {
                    double acc = 0;
                    for (int64_t i = 0; i < KH; i++)
                        for (int64_t j = 0; j < KW; j++) {
                            int64_t ih = oh * s[0] + i * dl[0] - p[0], iw = ow * s[1] + j * dl[1] - p[2];
                            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                            for (int64_t c = 0; c < Cg; c++)
                                acc += x->v[((n * H + ih) * W + iw) * C + (o / Og) * Cg + c] *
                                       w->v[((i * KW + j) * Cg + c) * O + o];
                        }
                    out->v[((n * OH + oh) * OW + ow) * O + o] = acc;
                }
}
/* SAME on a 4 x 5 image with a 3 x 3 filter: pads 1 all round */
static vf_tensor *f_conv_same(vf_context *ctx, vf_tensor **in)
{
    return vf_conv2d(ctx, in[0], in[1], &(vf_conv2d_desc){.padding = VF_PADDING_SAME});
}
static void r_conv_same(const gc_dt *in, gc_dt *out)
{
    dconv(&in[0], &in[1], (int[]){1, 1}, (int[]){1, 1}, (int[]){1, 1, 1, 1}, 1, out);
}
/* strides 2,1, dilations 1,2, asymmetric pads, two groups, batch 2 */
static vf_tensor *f_conv_sdg(vf_context *ctx, vf_tensor **in)
{
    vf_conv2d_desc d = {.strides = {2, 1}, .dilations = {1, 2}, .padding = VF_PADDING_EXPLICIT,
                        .pads = {1, 0, 0, 1}, .groups = 2};
    return vf_conv2d(ctx, in[0], in[1], &d);
}
static void r_conv_sdg(const gc_dt *in, gc_dt *out)
{
    dconv(&in[0], &in[1], (int[]){2, 1}, (int[]){1, 2}, (int[]){1, 0, 0, 1}, 2, out);
}

/* avg pool, 3 x 3 window, strides 2, SAME on 5 x 5 (pads 1 all round):
   the mean of the window's positions inside the input */
static vf_tensor *f_avg_pool(vf_context *ctx, vf_tensor **in)
{
    return vf_avg_pool2d(ctx, in[0], &(vf_pool2d_desc){.window = {3, 3}, .strides = {2, 2},
                                                        .padding = VF_PADDING_SAME});
}
static void r_avg_pool(const gc_dt *in, gc_dt *out)
{
    const gc_dt *x = &in[0];
    int64_t N = x->sh[0], H = x->sh[1], W = x->sh[2], C = x->sh[3], OH = (H + 1) / 2, OW = (W + 1) / 2;
    *out = (gc_dt){.rank = 4, .sh = {N, OH, OW, C}};
    for (int64_t n = 0; n < N; n++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++)
                for (int64_t c = 0; c < C; c++) {
                    double sum = 0;
                    int count = 0;
                    for (int64_t ih = oh * 2 - 1; ih < oh * 2 + 2; ih++)
                        for (int64_t iw = ow * 2 - 1; iw < ow * 2 + 2; iw++)
                            if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                                sum += x->v[((n * H + ih) * W + iw) * C + c], count++;
                    out->v[((n * OH + oh) * OW + ow) * C + c] = sum / count;
                }
}

/* dropout (issue 13) with its mask held fixed: a fresh generator of one
   seed per evaluation, so every evaluation draws draw 0. The reference
   keeps element i where its f32 uniform of draw 0 (util/philox.h: word
   i % 4 of Philox block i / 4, 24 bits) is >= rate. */
#define DROP_SEED 4242u
#define DROP_RATE 0.4
static vf_tensor *f_dropout(vf_context *ctx, vf_tensor **in)
{
    vf_generator *g = vf_generator_create(ctx, DROP_SEED);
    vf_tensor *y = vf_dropout(ctx, g, in[0], DROP_RATE);
    vf_generator_destroy(g);
    return y;
}
static void r_dropout(const gc_dt *in, gc_dt *out)
{
    *out = in[0];
    for (int64_t i = 0; i < gc_dnumel(&in[0]); i++) {
        uint32_t ctr[4] = {(uint32_t)(i / 4), 0, 0, 0}, key[2] = {DROP_SEED, 0}, r[4];
        vf_philox4x32_10(ctr, key, r);
        bool keep = (float)((r[i % 4] >> 8) / 16777216.0) >= (float)DROP_RATE;
        out->v[i] = keep ? in[0].v[i] / (1 - DROP_RATE) : 0;
    }
}

#define C1(nm, f, r0, s0, lo, hi) {nm, f_##f, r_##f, 1, {r0}, {s0}, lo, hi}
#define C2(nm, f, r0, s0, r1, s1, lo, hi) {nm, f_##f, r_##f, 2, {r0, r1}, {s0, s1}, lo, hi}
#define SH(...) {__VA_ARGS__}
const gc_case gc_cases[] = {
    C1("neg", neg, 2, SH(3, 4), -2, 2),
    C1("exp", exp, 2, SH(3, 4), -2, 2),
    C1("log", log, 2, SH(3, 4), 0.5f, 2),
    C1("sqrt", sqrt, 2, SH(3, 4), 0.5f, 2),
    C1("rsqrt", rsqrt, 2, SH(3, 4), 0.5f, 2),
    C1("abs", abs, 2, SH(3, 4), -2, 2),
    C1("tanh", tanh, 2, SH(3, 4), -2, 2),
    C1("sigmoid", sigmoid, 2, SH(3, 4), -2, 2),
    C1("relu", relu, 2, SH(3, 4), -2, 2),
    C1("gelu", gelu, 2, SH(3, 4), -2, 2),
    C1("sin", sin, 2, SH(3, 4), -2, 2),
    C1("cos", cos, 2, SH(3, 4), -2, 2),
    C1("square", square, 2, SH(3, 4), -2, 2),
    C1("cast f32->f32", cast, 1, SH(5), -2, 2),
    C1("copy (identity transpose)", copy_t, 2, SH(2, 3), -2, 2),
    C1("copy (reduce of a scalar)", copy_r, 0, SH(0), -2, 2),
    C2("add", add, 2, SH(3, 4), 2, SH(3, 4), -2, 2),
    C2("add rank-1 b", add, 2, SH(3, 4), 1, SH(4), -2, 2),
    C2("add size-1 both", add, 2, SH(3, 1), 2, SH(1, 4), -2, 2),
    C2("add rank-1 a", add, 1, SH(4), 3, SH(2, 3, 4), -2, 2),
    C2("add scalar b", add, 2, SH(3, 4), 0, SH(0), -2, 2),
    C2("sub rank-1 b", sub, 2, SH(3, 4), 1, SH(4), -2, 2),
    C2("sub size-1 both", sub, 3, SH(2, 1, 4), 2, SH(3, 1), -2, 2),
    C2("mul", mul, 2, SH(3, 4), 2, SH(3, 4), -2, 2),
    C2("mul rank-1 b", mul, 2, SH(3, 4), 1, SH(4), -2, 2),
    C2("mul size-1 both", mul, 2, SH(3, 1), 2, SH(1, 4), -2, 2),
    C2("div", div, 2, SH(3, 4), 2, SH(3, 4), 0.5f, 2),
    C2("div rank-1 b", div, 2, SH(3, 4), 1, SH(4), 0.5f, 2),
    C2("div size-1 both", div, 3, SH(2, 1, 4), 2, SH(3, 1), 0.5f, 2),
    C2("pow", pow, 2, SH(3, 4), 2, SH(3, 4), 0.5f, 2),
    C2("pow rank-1 b", pow, 2, SH(3, 4), 1, SH(4), 0.5f, 2),
    C2("maximum", maximum, 2, SH(3, 4), 2, SH(3, 4), -2, 2),
    C2("maximum size-1 both", maximum, 2, SH(3, 1), 2, SH(1, 4), -2, 2),
    C2("minimum", minimum, 2, SH(3, 4), 2, SH(3, 4), -2, 2),
    C2("minimum rank-1 b", minimum, 2, SH(3, 4), 1, SH(4), -2, 2),
    C2("where", where, 2, SH(3, 4), 2, SH(3, 4), -2, 2),
    C2("where rank-1 b", where, 2, SH(3, 4), 1, SH(4), -2, 2),
    {"where broadcast cond", f_where3, r_where3, 3, {2, 1, 2}, {SH(3, 4), SH(4), SH(3, 1)}, -2, 2},
    C1("reduce_sum axis 1", sum1, 2, SH(3, 4), -2, 2),
    C1("reduce_sum axes 0,-1 keepdims", sum02k, 3, SH(2, 3, 4), -2, 2),
    C1("reduce_mean axis 0 keepdims", mean0k, 2, SH(3, 4), -2, 2),
    C1("reduce_mean axes 1,2", mean12, 3, SH(2, 3, 4), -2, 2),
    C1("reduce_mean all", meanall, 3, SH(2, 3, 2), -2, 2),
    C1("reduce_max axis -1", max1, 2, SH(3, 4), -2, 2),
    C1("reduce_max axes 0,1 keepdims", max01k, 3, SH(2, 3, 4), -2, 2),
    C1("reduce_min all", minall, 2, SH(3, 4), -2, 2),
    C1("reduce_min axis 0", min0, 2, SH(3, 4), -2, 2),
    C1("norm", norm, 2, SH(3, 4), -2, 2),
    /* issue 13's math ops: ranges away from the kinks (floor and ceil:
       none in [2.1, 2.9], round: none in [2.6, 3.4]) */
    C1("x * floor(x)", xfloor, 2, SH(3, 4), 2.1f, 2.9f),
    C1("x * ceil(x)", xceil, 2, SH(3, 4), 2.1f, 2.9f),
    C1("x * round(x)", xround, 2, SH(3, 4), 2.6f, 3.4f),
    C1("x * sign(x)", xsign, 2, SH(3, 4), -2, 2),
    C2("mod", mod, 2, SH(3, 4), 2, SH(3, 4), 0.5f, 2),
    C2("mod rank-1 b", mod, 2, SH(3, 4), 1, SH(4), 0.5f, 2),
    C1("erf", erf, 2, SH(3, 4), -2, 2),
    C1("log1p", log1p, 2, SH(3, 4), -0.5f, 2),
    C1("expm1", expm1, 2, SH(3, 4), -2, 2),
    C1("softplus", softplus, 2, SH(3, 4), -2, 2),
    C1("leaky_relu", leaky, 2, SH(3, 4), -2, 2),
    C1("clip", clip, 2, SH(3, 4), -2, 2),
    C1("reduce_prod axis 1", prod1, 2, SH(3, 4), 0.5f, 1.5f),
    C1("reduce_prod axes 0,-1 keepdims", prod02k, 3, SH(2, 3, 2), 0.5f, 1.5f),
    C1("logsumexp axis -1", lse1, 2, SH(3, 4), -2, 2),
    C1("logsumexp axes 0,1 keepdims", lse01k, 3, SH(2, 3, 4), -2, 2),
    C1("softmax axis -1", softmax, 2, SH(3, 4), -2, 2),
    C1("softmax axis 0", softmax0, 3, SH(3, 2, 2), -2, 2),
    C1("log_softmax axis -1", lsm, 2, SH(3, 4), -2, 2),
    C1("log_softmax axis 0", lsm0, 2, SH(3, 4), -2, 2),
    C1("sparse xent", xent, 2, SH(4, XENT_C), -2, 2),
    C2("matmul", mm, 2, SH(3, 4), 2, SH(4, 5), -1, 1),
    C2("matmul trans_a", mm_ta, 2, SH(4, 3), 2, SH(4, 5), -1, 1),
    C2("matmul trans_b", mm_tb, 2, SH(3, 4), 2, SH(5, 4), -1, 1),
    C2("matmul trans_ab", mm_tt, 2, SH(4, 3), 2, SH(5, 4), -1, 1),
    C2("matmul batch a", mm, 3, SH(2, 3, 4), 2, SH(4, 5), -1, 1),
    C2("matmul batch a rank 4 trans_b", mm_tb, 4, SH(2, 2, 3, 4), 2, SH(5, 4), -1, 1),
    C2("matmul batch b", mm, 2, SH(3, 4), 3, SH(2, 4, 5), -1, 1),
    C2("matmul batch broadcast both", mm_tb, 4, SH(2, 1, 3, 4), 3, SH(2, 5, 4), -1, 1),
    C2("matmul batch trans_a", mm_ta, 3, SH(2, 4, 3), 3, SH(2, 4, 5), -1, 1),
    C2("matmul vector-matrix", mm, 1, SH(4), 2, SH(4, 5), -1, 1),
    C2("matmul matrix-vector", mm, 2, SH(3, 4), 1, SH(4), -1, 1),
    C2("matmul vector-vector", mm, 1, SH(4), 1, SH(4), -1, 1),
    C1("reshape", reshape, 2, SH(3, 4), -2, 2),
    C1("transpose", transpose, 3, SH(2, 3, 4), -2, 2),
    C2("chain", chain, 2, SH(4, 4), 2, SH(4, 4), -1, 1),
    C2("fan-out", fanout, 2, SH(3, 4), 1, SH(4), -1, 1),
    C1("slice negative steps", slice_neg, 2, SH(4, 5), -2, 2),
    C1("slice strided, clamped", slice_step, 3, SH(2, 7, 3), -2, 2),
    C1("pad", pad, 2, SH(3, 4), -2, 2),
    {"concat of three", f_concat3, r_concat3, 3, {2, 2, 2}, {SH(2, 3), SH(1, 3), SH(3, 3)}, -2, 2},
    C2("stack", stack, 2, SH(3, 2), 2, SH(3, 2), -2, 2),
    C1("tile", tile, 2, SH(2, 3), -2, 2),
    C1("broadcast_to", bcast, 2, SH(3, 1), -2, 2),
    C1("split, expand_dims, squeeze", split, 2, SH(5, 2), -2, 2),
    /* indexing (issue 13) */
    C1("gather axis 0, duplicate index", gather0, 2, SH(5, 3), -2, 2),
    C1("gather axis -1, 2-d indices", gather1, 2, SH(2, 4), -2, 2),
    C2("scatter_add axis 1, duplicates", scatter1, 2, SH(3, 4), 2, SH(3, 5), -2, 2),
    C1("cumsum axis 1", cumsum1, 2, SH(3, 4), -2, 2),
    C1("cumsum axis 0 exclusive reverse", cumsum0er, 3, SH(3, 2, 2), -2, 2),
    C1("top_k k=2", topk, 2, SH(3, 4), -2, 2),
    /* convolution (issue 13) */
    C2("conv2d SAME", conv_same, 4, SH(1, 4, 5, 2), 4, SH(3, 3, 2, 2), -1, 1),
    C2("conv2d strided dilated grouped", conv_sdg, 4, SH(2, 5, 5, 2), 4, SH(2, 2, 1, 4), -1, 1),
    C1("avg_pool2d SAME strided", avg_pool, 4, SH(2, 5, 5, 2), -1, 1),
    /* randomness (issue 13) */
    C1("dropout rate 0.4, mask held fixed", dropout, 2, SH(4, 6), -2, 2),
};
const int gc_n_cases = (int)(sizeof gc_cases / sizeof gc_cases[0]);

int64_t gc_numel(const gc_case *c, int i)
{
    int64_t n = 1;
    for (int d = 0; d < c->rank[i]; d++) n *= c->shape[i][d];
    return n;
}

static double wt(int64_t k) { return 1.0 + 0.1 * (double)(k % 7); }

/* sum_k w_k f(x)_k in double: the objective the finite differences see */
double gc_objective(const gc_case *c, const gc_dt *in, gc_dt *y)
{
    c->r(in, y);
    double s = 0;
    for (int64_t k = 0; k < gc_dnumel(y); k++) s += wt(k) * y->v[k];
    return s;
}

vf_tensor *gc_weights_like(vf_context *ctx, vf_tensor *y)
{
    int64_t n = vf_tensor_numel(y), sh[8];
    float *w = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t k = 0; k < n; k++) w[k] = (float)wt(k);
    for (int d = 0; d < vf_tensor_rank(y); d++) sh[d] = vf_tensor_dim(y, d);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, vf_tensor_rank(y), sh, w);
    free(w);
    return t;
}

/* The forward value and the tape's gradients of every input (malloc'd). */
void gc_tape_grads(vf_context *ctx, const gc_case *c, float **data, float **y_out, float **grads)
{
    vf_scope_begin(ctx);
    vf_tensor *in[3];
    for (int i = 0; i < c->n; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, c->rank[i], c->shape[i], data[i]);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = c->f(ctx, in);
    if (!y) fail_msg("%s: forward failed: %s", c->name, vf_error_message(ctx));
    /* not a scalar: the tape seeds it with ones, so d target = w */
    vf_tensor *target = vf_mul(ctx, y, gc_weights_like(ctx, y));
    vf_tensor *g[3] = {0};
    vf_status s = vf_tape_gradient(tp, target, c->n, in, g);
    if (s != VF_OK) fail_msg("%s: vf_tape_gradient: %s", c->name, vf_error_message(ctx));
    vf_tape_end(tp);
    *y_out = vt_read(y);
    for (int i = 0; i < c->n; i++) {
        assert_int_equal(vf_tensor_rank(g[i]), c->rank[i]);
        for (int d = 0; d < c->rank[i]; d++) assert_int_equal(vf_tensor_dim(g[i], d), c->shape[i][d]);
        grads[i] = vt_read(g[i]);
    }
    vf_scope_end(ctx);
}

void gc_fill_case(const gc_case *c, float **data, uint64_t seed)
{
    for (int i = 0; i < c->n; i++) {
        data[i] = malloc(sizeof(float) * (size_t)(gc_numel(c, i) ? gc_numel(c, i) : 1));
        vt_fill_uniform(data[i], (size_t)gc_numel(c, i), c->lo, c->hi, seed + (uint64_t)i);
        /* keep |x| away from the kinks of abs/relu (at 0) so that x +- h stays on one side */
        for (int64_t k = 0; k < gc_numel(c, i); k++)
            if (fabsf(data[i][k]) < 0.05f) data[i][k] = data[i][k] < 0 ? -0.05f : 0.05f;
    }
}

