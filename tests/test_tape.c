/* vf_tape: every op with a gradient rule (vf_grad_table in
 * src/frontend/grad_rules.c) checked against central finite differences of a
 * double-precision host reference of the same function; the forward value
 * checked against that reference too; Vulkan gradients against the CPU
 * backend's; unused sources; non-differentiable paths; a tape inside a
 * traced function against the same body run eagerly.
 *
 * Why a double reference: finite differences of the f32 forward have an
 * error of about eps_f32 * |f| / h (1e-7 * 10 / 1e-2 = 1e-4) plus h^2 terms,
 * as large as the tolerance one wants, so they pass wrong rules and fail
 * right ones at random. With the forward in double and h = 1e-5 the
 * finite-difference error is about h^2 |f'''| + eps_f64 |f| / h < 1e-9,
 * negligible: what remains is the f32 rounding of the tape's own gradient. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXE 256 /* elements of a reference tensor */

/* ---- double-precision host reference ----------------------------------- */

typedef struct {
    int rank;
    int64_t sh[4];
    double v[MAXE];
} dt;

static int64_t dnumel(const dt *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->sh[d];
    return n;
}

/* The flat index into t of multi-index idx (of a rank-r broadcast result):
   right-aligned, size-1 dims of t broadcast. */
static int64_t bidx(const dt *t, int r, const int64_t *idx)
{
    int64_t k = 0;
    for (int d = 0; d < t->rank; d++) {
        int64_t i = idx[r - t->rank + d];
        k = k * t->sh[d] + (t->sh[d] == 1 ? 0 : i);
    }
    return k;
}

static void unflat(int64_t k, int r, const int64_t *sh, int64_t *idx)
{
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = sh[d] ? k % sh[d] : 0;
        k = sh[d] ? k / sh[d] : 0;
    }
}

typedef double (*f3)(double, double, double);

/* out = f(a, b, c) with NumPy broadcasting of the n given operands. */
static void dmap(int n, const dt *const *x, f3 f, dt *out)
{
    out->rank = 0;
    for (int i = 0; i < n; i++)
        if (x[i]->rank > out->rank) out->rank = x[i]->rank;
    for (int d = 0; d < out->rank; d++) {
        out->sh[d] = 1;
        for (int i = 0; i < n; i++) {
            int od = d - (out->rank - x[i]->rank);
            if (od >= 0 && x[i]->sh[od] != 1) out->sh[d] = x[i]->sh[od];
        }
    }
    int64_t idx[4];
    for (int64_t k = 0; k < dnumel(out); k++) {
        unflat(k, out->rank, out->sh, idx);
        double a = x[0]->v[bidx(x[0], out->rank, idx)];
        double b = n > 1 ? x[1]->v[bidx(x[1], out->rank, idx)] : 0;
        double c = n > 2 ? x[2]->v[bidx(x[2], out->rank, idx)] : 0;
        out->v[k] = f(a, b, c);
    }
}

enum { R_SUM, R_MEAN, R_MAX, R_MIN, R_NORM };

/* Reduction over the axes in mask (0: all). */
static void dreduce(const dt *x, int kind, uint32_t mask, bool keep, dt *out)
{
    if (!mask) mask = (1u << x->rank) - 1;
    int64_t osh[4] = {1, 1, 1, 1};
    for (int d = 0; d < x->rank; d++) osh[d] = (mask >> d) & 1 ? 1 : x->sh[d];
    dt full = {.rank = x->rank};
    memcpy(full.sh, osh, sizeof osh);
    int64_t no = dnumel(&full), cnt[MAXE] = {0};
    for (int64_t k = 0; k < no; k++) full.v[k] = kind == R_MAX ? -INFINITY : kind == R_MIN ? INFINITY : 0;
    int64_t idx[4];
    for (int64_t k = 0; k < dnumel(x); k++) {
        unflat(k, x->rank, x->sh, idx);
        int64_t o = bidx(&full, x->rank, idx);
        double v = x->v[k];
        if (kind == R_MAX) full.v[o] = fmax(full.v[o], v);
        else if (kind == R_MIN) full.v[o] = fmin(full.v[o], v);
        else full.v[o] += kind == R_NORM ? v * v : v;
        cnt[o]++;
    }
    for (int64_t k = 0; k < no; k++) {
        if (kind == R_MEAN) full.v[k] /= (double)cnt[k];
        if (kind == R_NORM) full.v[k] = sqrt(full.v[k]);
    }
    *out = full;
    if (!keep) {
        out->rank = 0;
        for (int d = 0; d < x->rank; d++)
            if (!((mask >> d) & 1)) out->sh[out->rank++] = x->sh[d];
    }
}

/* softmax / log_softmax along axis */
static void dsoftmax(const dt *x, int axis, bool lg, dt *out)
{
    *out = *x;
    int64_t n = x->sh[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < x->rank; d++) inner *= x->sh[d];
    for (int d = 0; d < axis; d++) outer *= x->sh[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < n; j++) m = fmax(m, x->v[(o * n + j) * inner + i]);
            for (int64_t j = 0; j < n; j++) s += exp(x->v[(o * n + j) * inner + i] - m);
            for (int64_t j = 0; j < n; j++) {
                double z = x->v[(o * n + j) * inner + i] - m;
                out->v[(o * n + j) * inner + i] = lg ? z - log(s) : exp(z) / s;
            }
        }
}

/* matmul with transposes, vector operands and batch broadcasting */
static void dmatmul(const dt *a0, const dt *b0, bool ta, bool tb, dt *out)
{
    dt a = *a0, b = *b0;
    bool av = a.rank == 1, bv = b.rank == 1;
    if (av) a.rank = 2, a.sh[1] = a.sh[0], a.sh[0] = 1;
    if (bv) b.rank = 2, b.sh[1] = 1;
    int ra = a.rank, rb = b.rank;
    int64_t m = ta ? a.sh[ra - 1] : a.sh[ra - 2], kk = ta ? a.sh[ra - 2] : a.sh[ra - 1];
    int64_t n = tb ? b.sh[rb - 2] : b.sh[rb - 1];
    dt ba = {.rank = ra - 2}, bb = {.rank = rb - 2};
    memcpy(ba.sh, a.sh, sizeof(int64_t) * (size_t)(ra - 2));
    memcpy(bb.sh, b.sh, sizeof(int64_t) * (size_t)(rb - 2));
    dt bo;
    const dt *bx[2] = {&ba, &bb};
    ba.v[0] = bb.v[0] = 0;
    int rbo = ba.rank > bb.rank ? ba.rank : bb.rank;
    bo.rank = rbo;
    for (int d = 0; d < rbo; d++) {
        bo.sh[d] = 1;
        for (int i = 0; i < 2; i++) {
            int od = d - (rbo - bx[i]->rank);
            if (od >= 0 && bx[i]->sh[od] != 1) bo.sh[d] = bx[i]->sh[od];
        }
    }
    int64_t nb = dnumel(&bo), idx[4];
    out->rank = 0;
    for (int d = 0; d < rbo; d++) out->sh[out->rank++] = bo.sh[d];
    if (!av) out->sh[out->rank++] = m;
    if (!bv) out->sh[out->rank++] = n;
    for (int64_t q = 0; q < nb; q++) {
        unflat(q, rbo, bo.sh, idx);
        int64_t qa = bidx(&ba, rbo, idx), qb = bidx(&bb, rbo, idx);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t p = 0; p < kk; p++) {
                    double x = a.v[qa * m * kk + (ta ? p * m + i : i * kk + p)];
                    double y = b.v[qb * kk * n + (tb ? j * kk + p : p * n + j)];
                    s += x * y;
                }
                out->v[(q * m + i) * n + j] = s;
            }
    }
}

static void dtranspose(const dt *x, const int *perm, dt *out)
{
    out->rank = x->rank;
    for (int d = 0; d < x->rank; d++) out->sh[d] = x->sh[perm[d]];
    int64_t idx[4], src[4];
    for (int64_t k = 0; k < dnumel(out); k++) {
        unflat(k, out->rank, out->sh, idx);
        for (int d = 0; d < x->rank; d++) src[perm[d]] = idx[d];
        int64_t f = 0;
        for (int d = 0; d < x->rank; d++) f = f * x->sh[d] + src[d];
        out->v[k] = x->v[f];
    }
}

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
static double s_id(double a, double b, double c) { (void)b, (void)c; return a; }
static double s_square(double a, double b, double c) { (void)b, (void)c; return a * a; }

/* ---- the cases --------------------------------------------------------- */

typedef vf_tensor *(*fn_t)(vf_context *ctx, vf_tensor **in);
typedef void (*ref_t)(const dt *in, dt *out);

typedef struct {
    const char *name;
    fn_t f;
    ref_t r;
    int n;
    int rank[3];
    int64_t shape[3][4];
    float lo, hi;
} gcase;

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
    static void r_##nm(const dt *in, dt *out) \
    { \
        const dt *x[3] = {&in[0], &in[1], &in[2]}; \
        dmap(nin, x, sf, out); \
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
/* identity transpose and a reduction of a scalar run as COPY */
MAP(copy_t, vf_transpose(ctx, in[0], (int[]){0, 1}), 1, s_id)
MAP(copy_r, vf_reduce_sum(ctx, in[0], 0, NULL, false), 1, s_id)

#define RED(nm, call, kind, mask, keep) \
    static vf_tensor *f_##nm(vf_context *ctx, vf_tensor **in) { return call; } \
    static void r_##nm(const dt *in, dt *out) { dreduce(&in[0], kind, mask, keep, out); }
RED(sum1, vf_reduce_sum(ctx, in[0], 1, (int[]){1}, false), R_SUM, 2, false)
RED(sum02k, vf_reduce_sum(ctx, in[0], 2, (int[]){0, -1}, true), R_SUM, 5, true)
RED(mean0k, vf_reduce_mean(ctx, in[0], 1, (int[]){0}, true), R_MEAN, 1, true)
RED(mean12, vf_reduce_mean(ctx, in[0], 2, (int[]){1, 2}, false), R_MEAN, 6, false)
RED(meanall, vf_reduce_mean(ctx, in[0], 0, NULL, false), R_MEAN, 0, false)
RED(max1, vf_reduce_max(ctx, in[0], 1, (int[]){-1}, false), R_MAX, 2, false)
RED(max01k, vf_reduce_max(ctx, in[0], 2, (int[]){0, 1}, true), R_MAX, 3, true)
RED(minall, vf_reduce_min(ctx, in[0], 0, NULL, false), R_MIN, 0, false)
RED(min0, vf_reduce_min(ctx, in[0], 1, (int[]){0}, false), R_MIN, 1, false)
RED(norm, vf_norm(ctx, in[0]), R_NORM, 0, false)

static vf_tensor *f_softmax(vf_context *ctx, vf_tensor **in) { return vf_softmax(ctx, in[0], -1); }
static void r_softmax(const dt *in, dt *out) { dsoftmax(&in[0], in[0].rank - 1, false, out); }
static vf_tensor *f_softmax0(vf_context *ctx, vf_tensor **in) { return vf_softmax(ctx, in[0], 0); }
static void r_softmax0(const dt *in, dt *out) { dsoftmax(&in[0], 0, false, out); }
static vf_tensor *f_lsm(vf_context *ctx, vf_tensor **in) { return vf_log_softmax(ctx, in[0], -1); }
static void r_lsm(const dt *in, dt *out) { dsoftmax(&in[0], in[0].rank - 1, true, out); }
static vf_tensor *f_lsm0(vf_context *ctx, vf_tensor **in) { return vf_log_softmax(ctx, in[0], 0); }
static void r_lsm0(const dt *in, dt *out) { dsoftmax(&in[0], 0, true, out); }
static vf_tensor *f_xent(vf_context *ctx, vf_tensor **in)
{
    return vf_sparse_softmax_cross_entropy(ctx, xent_labels(ctx, vf_tensor_dim(in[0], 0)), in[0]);
}
static void r_xent(const dt *in, dt *out)
{
    dt ls;
    dsoftmax(&in[0], 1, true, &ls);
    out->rank = 1;
    out->sh[0] = in[0].sh[0];
    for (int64_t i = 0; i < in[0].sh[0]; i++) out->v[i] = -ls.v[i * XENT_C + xent_label(i)];
}

#define MM(nm, ta, tb) \
    static vf_tensor *f_##nm(vf_context *ctx, vf_tensor **in) { return vf_matmul_ex(ctx, in[0], in[1], ta, tb); } \
    static void r_##nm(const dt *in, dt *out) { dmatmul(&in[0], &in[1], ta, tb, out); }
MM(mm, false, false)
MM(mm_ta, true, false)
MM(mm_tb, false, true)
MM(mm_tt, true, true)

static vf_tensor *f_reshape(vf_context *ctx, vf_tensor **in)
{
    return vf_mul(ctx, vf_reshape(ctx, in[0], 2, (int64_t[]){2, 6}), vf_reshape(ctx, in[0], 2, (int64_t[]){2, -1}));
}
static void r_reshape(const dt *in, dt *out)
{
    *out = in[0];
    out->rank = 2, out->sh[0] = 2, out->sh[1] = 6;
    for (int k = 0; k < 12; k++) out->v[k] = in[0].v[k] * in[0].v[k];
}
static vf_tensor *f_transpose(vf_context *ctx, vf_tensor **in) { return vf_transpose(ctx, in[0], (int[]){2, 0, 1}); }
static void r_transpose(const dt *in, dt *out) { dtranspose(&in[0], (int[]){2, 0, 1}, out); }

/* a small MLP layer and loss: mean(tanh(x w + x)) over rows */
static vf_tensor *f_chain(vf_context *ctx, vf_tensor **in)
{
    return vf_reduce_mean(ctx, vf_tanh(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[0])), 1, (int[]){0}, false);
}
static void r_chain(const dt *in, dt *out)
{
    dt p, s, t;
    dmatmul(&in[0], &in[1], false, false, &p);
    const dt *x[2] = {&p, &in[0]};
    dmap(2, x, s_add, &s);
    const dt *y[1] = {&s};
    dmap(1, y, s_tanh, &t);
    dreduce(&t, R_MEAN, 1, false, out);
}
/* the same value used twice along different paths (gradients accumulate) */
static vf_tensor *f_fanout(vf_context *ctx, vf_tensor **in)
{
    vf_tensor *e = vf_exp(ctx, in[0]);
    return vf_add(ctx, vf_mul(ctx, e, in[1]), vf_reduce_sum(ctx, vf_mul(ctx, e, e), 1, (int[]){0}, true));
}
static void r_fanout(const dt *in, dt *out)
{
    dt e, m, ee, s;
    const dt *x[1] = {&in[0]};
    dmap(1, x, s_exp, &e);
    const dt *y[2] = {&e, &in[1]};
    dmap(2, y, s_mul, &m);
    const dt *z[2] = {&e, &e};
    dmap(2, z, s_mul, &ee);
    dreduce(&ee, R_SUM, 1, true, &s);
    const dt *w[2] = {&m, &s};
    dmap(2, w, s_add, out);
}

#define C1(nm, f, r0, s0, lo, hi) {nm, f_##f, r_##f, 1, {r0}, {s0}, lo, hi}
#define C2(nm, f, r0, s0, r1, s1, lo, hi) {nm, f_##f, r_##f, 2, {r0, r1}, {s0, s1}, lo, hi}
#define SH(...) {__VA_ARGS__}
static const gcase cases[] = {
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
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static int64_t numel(const gcase *c, int i)
{
    int64_t n = 1;
    for (int d = 0; d < c->rank[i]; d++) n *= c->shape[i][d];
    return n;
}

static double wt(int64_t k) { return 1.0 + 0.1 * (double)(k % 7); }

/* sum_k w_k f(x)_k in double: the objective the finite differences see */
static double objective(const gcase *c, const dt *in, dt *y)
{
    c->r(in, y);
    double s = 0;
    for (int64_t k = 0; k < dnumel(y); k++) s += wt(k) * y->v[k];
    return s;
}

static vf_tensor *weights_like(vf_context *ctx, vf_tensor *y)
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
static void tape_grads(vf_context *ctx, const gcase *c, float **data, float **y_out, float **grads)
{
    vf_scope_begin(ctx);
    vf_tensor *in[3];
    for (int i = 0; i < c->n; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, c->rank[i], c->shape[i], data[i]);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = c->f(ctx, in);
    if (!y) fail_msg("%s: forward failed: %s", c->name, vf_error_message(ctx));
    /* not a scalar: the tape seeds it with ones, so d target = w */
    vf_tensor *target = vf_mul(ctx, y, weights_like(ctx, y));
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

static void fill_case(const gcase *c, float **data, uint64_t seed)
{
    for (int i = 0; i < c->n; i++) {
        data[i] = malloc(sizeof(float) * (size_t)(numel(c, i) ? numel(c, i) : 1));
        vt_fill_uniform(data[i], (size_t)numel(c, i), c->lo, c->hi, seed + (uint64_t)i);
        /* keep |x| away from the kinks of abs/relu (at 0) so that x +- h stays on one side */
        for (int64_t k = 0; k < numel(c, i); k++)
            if (fabsf(data[i][k]) < 0.05f) data[i][k] = data[i][k] < 0 ? -0.05f : 0.05f;
    }
}

static void check_case(vf_context *ctx, const gcase *c)
{
    float *data[3], *grads[3], *y;
    fill_case(c, data, 17);
    tape_grads(ctx, c, data, &y, grads);
    dt in[3], ref;
    for (int i = 0; i < c->n; i++) {
        in[i].rank = c->rank[i];
        memcpy(in[i].sh, c->shape[i], sizeof in[i].sh);
        for (int64_t k = 0; k < numel(c, i); k++) in[i].v[k] = data[i][k];
    }
    /* the f32 forward against the double reference: a few roundings of
       values of size <= 10 (matmul: a sum of <= 4 products) */
    objective(c, in, &ref);
    float *want = malloc(sizeof(float) * (size_t)(dnumel(&ref) + 1));
    for (int64_t k = 0; k < dnumel(&ref); k++) want[k] = (float)ref.v[k];
    char what[160];
    snprintf(what, sizeof what, "%s: forward vs double reference", c->name);
    vt_assert_close_f32(y, want, (size_t)dnumel(&ref), 1e-5, 1e-5, what);
    free(want);
    for (int i = 0; i < c->n; i++) {
        int64_t n = numel(c, i);
        double *fd = malloc(sizeof(double) * (size_t)(n + 1)), big = 1;
        for (int64_t k = 0; k < n; k++) {
            double x0 = in[i].v[k], h = 1e-5 * fmax(1.0, fabs(x0));
            dt tmp;
            in[i].v[k] = x0 + h;
            double fp = objective(c, in, &tmp);
            in[i].v[k] = x0 - h;
            double fm = objective(c, in, &tmp);
            in[i].v[k] = x0;
            fd[k] = (fp - fm) / (2 * h);
            big = fmax(big, fabs(fd[k]));
        }
        /* Tolerance: the finite differences are exact to < 1e-9 (see the top
           of the file). The tape's gradient is f32: every value on its path
           carries a relative rounding of about 2^-24 per op (<= ~20 ops here),
           and sums over <= 24 terms add about 24 * 2^-24 * big, so its error
           is below 1e-5 * big. 1e-4 * big + 1e-4 relative leaves a 10x
           margin, while a wrong rule (a missing factor, a sign, a broadcast
           summed wrongly) is off by O(big). */
        for (int64_t k = 0; k < n; k++) {
            double got = grads[i][k];
            if (!(fabs(got - fd[k]) <= 1e-4 * big + 1e-4 * fabs(fd[k])))
                fail_msg("%s: d/d in%d[%lld]: tape %.7f, finite differences of the double reference %.7f", c->name, i,
                         (long long)k, got, fd[k]);
        }
        free(fd);
        free(grads[i]);
        free(data[i]);
    }
    free(y);
}

static void test_finite_differences(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    for (int i = 0; i < N_CASES; i++) check_case(ctx, &cases[i]);
    vt_context_done(ctx);
}

/* Second order of every rule: nested tapes give H v (v: a direction for
   every input), against nested central differences of the double
   reference: D(x) = (F(x + h v) - F(x - h v)) / 2h, then dD/dx by central
   differences again; their error is about eps_f64 |F| / h^2 + h^2 < 1e-6. */
static double directional(const gcase *c, const dt *in, const dt *v)
{
    const double h = 1e-4;
    double f[2];
    for (int s = 0; s < 2; s++) {
        dt a[3], tmp;
        for (int i = 0; i < c->n; i++) {
            a[i] = in[i];
            for (int64_t k = 0; k < numel(c, i); k++) a[i].v[k] += (s ? -h : h) * v[i].v[k];
        }
        f[s] = objective(c, a, &tmp);
    }
    return (f[0] - f[1]) / (2 * h);
}

static void test_second_order_every_rule(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        float *data[3], *vdat[3];
        fill_case(c, data, 23);
        fill_case(c, vdat, 57);
        vf_scope_begin(ctx);
        vf_tensor *in[3], *v[3], *g[3] = {0}, *hv[3] = {0};
        for (int i = 0; i < c->n; i++) {
            in[i] = vf_tensor_from_host(ctx, VF_F32, c->rank[i], c->shape[i], data[i]);
            v[i] = vf_tensor_from_host(ctx, VF_F32, c->rank[i], c->shape[i], vdat[i]);
        }
        vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
        vf_tensor *y = c->f(ctx, in);
        assert_int_equal(vf_tape_gradient(inner, vf_mul(ctx, y, weights_like(ctx, y)), c->n, in, g), VF_OK);
        vf_tape_end(inner);
        vf_tensor *d = vf_fill(ctx, VF_F32, 0, NULL, 0);
        for (int i = 0; i < c->n; i++) d = vf_add(ctx, d, vf_reduce_sum(ctx, vf_mul(ctx, g[i], v[i]), 0, NULL, false));
        if (vf_tape_gradient(outer, d, c->n, in, hv) != VF_OK) fail_msg("%s: %s", c->name, vf_error_message(ctx));
        vf_tape_end(outer);
        dt din[3], dv[3];
        for (int i = 0; i < c->n; i++) {
            din[i].rank = dv[i].rank = c->rank[i];
            memcpy(din[i].sh, c->shape[i], sizeof din[i].sh);
            memcpy(dv[i].sh, c->shape[i], sizeof dv[i].sh);
            for (int64_t k = 0; k < numel(c, i); k++) din[i].v[k] = data[i][k], dv[i].v[k] = vdat[i][k];
        }
        for (int i = 0; i < c->n; i++) {
            float *got = vt_read(hv[i]);
            for (int64_t k = 0; k < numel(c, i); k++) {
                double x0 = din[i].v[k], h = 1e-4 * fmax(1.0, fabs(x0));
                din[i].v[k] = x0 + h;
                double dp = directional(c, din, dv);
                din[i].v[k] = x0 - h;
                double dm = directional(c, din, dv);
                din[i].v[k] = x0;
                double want = (dp - dm) / (2 * h);
                if (!(fabs(got[k] - want) <= 1e-3 * (1 + fabs(want))))
                    fail_msg("%s: (H v) wrt in%d[%lld]: nested tapes %.7f, finite differences %.7f", c->name, i,
                             (long long)k, got[k], want);
            }
            free(got), free(data[i]), free(vdat[i]);
        }
        vf_scope_end(ctx);
    }
    vt_context_done(ctx);
}

/* The same check twice in one process, with the other cases in between:
   gradients must not depend on what ran before (buffer reuse). */
static void test_repeatable(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    for (int rep = 0; rep < 3; rep++)
        for (int ci = 0; ci < N_CASES; ci++) {
            const gcase *c = &cases[ci];
            float *data[3], *g1[3], *g2[3], *y1, *y2;
            fill_case(c, data, 99);
            tape_grads(ctx, c, data, &y1, g1);
            tape_grads(ctx, c, data, &y2, g2);
            for (int i = 0; i < c->n; i++) {
                vt_assert_equal_bytes(g1[i], g2[i], sizeof(float) * (size_t)numel(c, i), c->name);
                free(g1[i]), free(g2[i]), free(data[i]);
            }
            free(y1), free(y2);
        }
    vt_context_done(ctx);
}

static void test_vulkan_matches_cpu(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *cpu = vt_context(VF_BACKEND_CPU), *vk = vt_context(VF_BACKEND_VULKAN);
    for (int ci = 0; ci < N_CASES; ci++) {
        const gcase *c = &cases[ci];
        float *data[3], *gc[3], *gv[3], *yc, *yv;
        fill_case(c, data, 5);
        tape_grads(cpu, c, data, &yc, gc);
        tape_grads(vk, c, data, &yv, gv);
        char what[160];
        for (int i = 0; i < c->n; i++) {
            /* GLSL exp/tanh/pow on lavapipe are a few ulp off libm; the
               gradients are short chains of them */
            snprintf(what, sizeof what, "%s: d/d in%d Vulkan vs CPU", c->name, i);
            vt_assert_close_f32(gv[i], gc[i], (size_t)numel(c, i), 1e-4, 1e-3, what);
            free(gc[i]), free(gv[i]), free(data[i]);
        }
        free(yc), free(yv);
    }
    vt_context_done(cpu);
    vt_context_done(vk);
}

/* max/min with ties: the gradient is split among the tied entries */
static void test_reduce_max_ties(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    float x[6] = {1, 3, 3, 2, 2, 2};
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_reduce_max(ctx, t, 1, (int[]){1}, false);
    vf_tensor *g = NULL;
    assert_int_equal(vf_tape_gradient(tp, y, 1, &t, &g), VF_OK);
    vf_tape_end(tp);
    float *gv = vt_read(g), want[6] = {0, 0.5f, 0.5f, 1.0f / 3, 1.0f / 3, 1.0f / 3};
    vt_assert_close_f32(gv, want, 6, 1e-7, 1e-6, "max ties");
    free(gv);
    vt_context_done(ctx);
}

static void test_unused_source_is_zeros(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 2.0), *u = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 2}, 5.0);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_reduce_sum(ctx, vf_mul(ctx, x, x), 0, NULL, false);
    vf_tensor *g[2] = {0};
    assert_int_equal(vf_tape_gradient(tp, y, 2, (vf_tensor *[]){x, u}, g), VF_OK);
    vf_tape_end(tp);
    float *gx = vt_read(g[0]), *gu = vt_read(g[1]);
    float wx[3] = {4, 4, 4}, wu[4] = {0};
    vt_assert_close_f32(gx, wx, 3, 1e-6, 1e-6, "dx");
    vt_assert_close_f32(gu, wu, 4, 0, 0, "du");
    assert_int_equal(vf_tensor_rank(g[1]), 2);
    free(gx), free(gu);
    vt_context_done(ctx);
}

static void test_not_differentiable(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor *x = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 3}, 1.0);
    /* argmax cast to float */
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_add(ctx, vf_reduce_sum(ctx, x, 1, (int[]){1}, false), vf_cast(ctx, vf_argmax(ctx, x, 1), VF_F32));
    vf_tensor *g = NULL;
    assert_int_not_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_OK);
    assert_null(g);
    vf_tape_end(tp);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "vf_cast", "not differentiable", NULL);
    /* a comparison's result cast to float */
    tp = vf_tape_begin(ctx);
    y = vf_mul(ctx, x, vf_cast(ctx, vf_greater(ctx, x, vf_fill(ctx, VF_F32, 0, NULL, 0.5)), VF_F32));
    assert_int_not_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_OK);
    assert_null(g);
    vf_tape_end(tp);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "vf_cast", "not differentiable", NULL);
    /* an integer target */
    tp = vf_tape_begin(ctx);
    y = vf_argmax(ctx, x, 1);
    assert_int_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_ERROR_DTYPE);
    vf_tape_end(tp);
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_tape_gradient", "float target", NULL);
    vt_context_done(ctx);
}

typedef struct { vf_tensor *w; } tmodel;

static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    tmodel *m = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], vf_matmul(ctx, in[0], m->w)),
                                     0, NULL, false);
    vf_status s = vf_tape_gradient(tp, loss, 2, (vf_tensor *[]){m->w, in[0]}, out);
    vf_tape_end(tp);
    return s;
}

/* A tape inside a traced body with a symbolic batch dim: one trace serves
   every batch size and matches the body run eagerly. */
static void test_traced_matches_eager(void **state)
{
    (void)state;
    vf_backend bes[2] = {VF_BACKEND_CPU, VF_BACKEND_VULKAN};
    for (int bi = 0; bi < (vt_have_vulkan() ? 2 : 1); bi++) {
        vf_context *ctx = vt_context(bes[bi]);
        float w0[12];
        vt_fill_uniform(w0, 12, -1, 1, 3);
        tmodel m = {vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){4, 3}, w0))};
        vf_tensor_spec sig[2] = {{VF_F32, 2, {-1, 4}}, {VF_I32, 1, {-1}}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "grads", .body = grad_body,
            .user = &m, .n_inputs = 2, .n_outputs = 2, .input_signature = sig});
        for (int64_t nb = 6; nb >= 2; nb -= 2) {
            vf_scope_begin(ctx);
            float x[24];
            int32_t y[6] = {0, 1, 2, 2, 1, 0};
            vt_fill_uniform(x, 24, -1, 1, (uint64_t)nb);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, 4}, x),
                                vf_tensor_from_host(ctx, VF_I32, 1, &nb, y)};
            vf_tensor *gt[2], *ge[2];
            assert_int_equal(vf_function_call(fn, in, gt), VF_OK);
            assert_int_equal(grad_body(ctx, in, ge, &m), VF_OK);
            for (int i = 0; i < 2; i++) {
                float *a = vt_read(gt[i]), *b = vt_read(ge[i]);
                vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(ge[i]), 1e-5, 1e-4, "traced vs eager");
                free(a), free(b);
            }
            vf_scope_end(ctx);
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finite_differences),
        cmocka_unit_test(test_second_order_every_rule),
        cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_vulkan_matches_cpu),
        cmocka_unit_test(test_reduce_max_ties),
        cmocka_unit_test(test_unused_source_is_zeros),
        cmocka_unit_test(test_not_differentiable),
        cmocka_unit_test(test_traced_matches_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
