/* The scan and sort ops of issue 13 (the indexing ops' other half; gather,
 * scatter_add, one_hot and range: tests/test_ops_indexing.c): vf_cumsum
 * against double sums (every axis and flag, long rows through the
 * multi-pass path, exact with integer-valued floats), traced with a
 * symbolic scan axis and its gradient; vf_top_k against a selection
 * reference (ties, NaN, infinities, every numeric dtype, k = 0 and k = n),
 * traced with its gradient; both split paths under tiny device limits.
 * The gradient rules are also cases of tests/grad_cases.c (test_tape). */
#include "limits_common.h"
#include "testutil.h"
#include "vulkan/codegen/kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t outer, n, inner;
} split3;

static split3 split_at(int rank, const int64_t *shape, int axis)
{
    split3 s = {1, shape[axis], 1};
    for (int d = 0; d < axis; d++) s.outer *= shape[d];
    for (int d = axis + 1; d < rank; d++) s.inner *= shape[d];
    return s;
}

static void check_shape(vf_tensor *t, int rank, const int64_t *shape, const char *what)
{
    if (!t) fail_msg("%s: no result", what);
    assert_int_equal(vf_tensor_rank(t), rank);
    for (int d = 0; d < rank; d++)
        if (vf_tensor_dim(t, d) != shape[d])
            fail_msg("%s: dim %d is %lld, want %lld", what, d, (long long)vf_tensor_dim(t, d), (long long)shape[d]);
}

/* ---- cumsum ------------------------------------------------------------------ */

static void ref_cumsum(const double *x, int rank, const int64_t *shape, int axis, bool excl, bool rev, double *y)
{
    split3 s = split_at(rank, shape, axis);
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t c = 0; c < s.inner; c++) {
            double acc = 0;
            for (int64_t p = 0; p < s.n; p++) {
                int64_t at = (o * s.n + (rev ? s.n - 1 - p : p)) * s.inner + c;
                if (!excl) acc += x[at];
                double v = x[at];
                y[at] = acc;
                if (excl) acc += v;
            }
        }
}

/* every axis and flag combination against double sums: random floats
   (f32 rounding per step: atol 1e-5), f16 within its rounding, i32 exact */
static void cumsum_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const int64_t xs[3] = {3, 5, 4};
    float x[60], want[60];
    int32_t ii[60];
    vt_fill_uniform(x, 60, -2, 2, 12);
    vt_fill_int(ii, 60, -9, 9, 13);
    double dx[60], di[60], y[60];
    for (int k = 0; k < 60; k++) dx[k] = x[k], di[k] = ii[k];
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 3, xs, x), *ti = vf_tensor_from_host(ctx, VF_I32, 3, xs, ii);
    for (int axis = -1; axis < 3; axis++)
        for (int fl = 0; fl < 4; fl++) {
            bool excl = fl & 1, rev = fl & 2;
            int a = axis < 0 ? axis + 3 : axis;
            char what[96];
            snprintf(what, sizeof what, "cumsum axis %d%s%s", axis, excl ? " exclusive" : "", rev ? " reverse" : "");
            ref_cumsum(dx, 3, xs, a, excl, rev, y);
            for (int k = 0; k < 60; k++) want[k] = (float)y[k];
            float *got = vt_read(vf_cumsum(ctx, tx, axis, excl, rev));
            vt_assert_close_f32(got, want, 60, 1e-5, 1e-6, what);
            free(got);
            got = vt_read(vf_cast(ctx, vf_cumsum(ctx, vf_cast(ctx, tx, VF_F16), axis, excl, rev), VF_F32));
            vt_assert_close_f32(got, want, 60, 2e-2, 4e-3, what);
            free(got);
            ref_cumsum(di, 3, xs, a, excl, rev, y);
            int32_t wi[60];
            for (int k = 0; k < 60; k++) wi[k] = (int32_t)y[k];
            int32_t *gi = vt_read(vf_cumsum(ctx, ti, axis, excl, rev));
            vt_assert_equal_bytes(gi, wi, sizeof wi, what);
            free(gi);
        }
    /* empty, scalar, bool */
    check_shape(vf_cumsum(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){0, 3}, 1), 0, false, false), 2, (int64_t[]){0, 3},
                "cumsum of nothing");
    float one = 1;
    assert_null(vf_cumsum(ctx, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &one), 0, false, false));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_cumsum", "scalar", NULL);
    assert_null(vf_cumsum(ctx, vf_fill(ctx, VF_BOOL, 1, (int64_t[]){3}, 1), 0, false, false));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_cumsum", "bool", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(cumsum_values)

/* Rows far past one invocation's block (5000 and 70000: the three-pass
   path on Vulkan), integer-valued floats so that every partial sum is
   exact in f32 and the results must be equal; i32 wrapping */
static void cumsum_long(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const int64_t shapes[2][2] = {{3, 5000}, {1, 70000}};
    for (int t = 0; t < 2; t++) {
        int64_t n = shapes[t][0] * shapes[t][1];
        int32_t *ii = malloc(sizeof(int32_t) * (size_t)n);
        float *xf = malloc(sizeof(float) * (size_t)n), *want = malloc(sizeof(float) * (size_t)n);
        double *dx = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
        vt_fill_int(ii, (size_t)n, -8, 9, 30 + (uint64_t)t);
        for (int64_t k = 0; k < n; k++) xf[k] = (float)ii[k], dx[k] = ii[k];
        for (int fl = 0; fl < 4; fl += 3) { /* plain, and exclusive reverse */
            bool excl = fl & 1, rev = fl & 2;
            ref_cumsum(dx, 2, shapes[t], 1, excl, rev, y);
            for (int64_t k = 0; k < n; k++) want[k] = (float)y[k];
            float *got = vt_read(vf_cumsum(ctx, vf_tensor_from_host(ctx, VF_F32, 2, shapes[t], xf), 1, excl, rev));
            vt_assert_equal_bytes(got, want, sizeof(float) * (size_t)n, "cumsum of a long row");
            free(got);
        }
        free(ii), free(xf), free(want), free(dx), free(y);
    }
    int32_t big[600];
    for (int k = 0; k < 600; k++) big[k] = INT32_MAX / 7;
    int32_t *gi = vt_read(vf_cumsum(ctx, vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){600}, big), 0, false, false));
    uint32_t acc = 0;
    for (int k = 0; k < 600; k++) {
        acc += (uint32_t)big[k];
        if (gi[k] != (int32_t)acc) fail_msg("i32 cumsum [%d]: %d, want %d (wrapping)", k, gi[k], (int32_t)acc);
    }
    free(gi);
    vt_context_done(ctx);
}
VT_PER_BACKEND(cumsum_long)

/* ---- top_k ------------------------------------------------------------------ */

/* a comes before b (values va, vb at positions ia, ib): larger first, NaN
   above numbers, ties by lower index */
static bool tk_before(double va, int64_t ia, double vb, int64_t ib)
{
    if (isnan(va) || isnan(vb)) return isnan(va) && (!isnan(vb) || ia < ib);
    return va > vb || (va == vb && ia < ib);
}

/* selection: the k first of each row of n in that order */
static void ref_top_k(const double *x, int64_t rows, int64_t n, int64_t k, double *val, int32_t *idx)
{
    bool *used = calloc((size_t)n, 1);
    for (int64_t r = 0; r < rows; r++) {
        memset(used, 0, (size_t)n);
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t i = 0; i < n; i++)
                if (!used[i] && (best < 0 || tk_before(x[r * n + i], i, x[r * n + best], best))) best = i;
            used[best] = true;
            val[r * k + j] = x[r * n + best];
            idx[r * k + j] = (int32_t)best;
        }
    }
    free(used);
}

static void check_top_k(vf_context *ctx, vf_tensor *t, const double *x, int64_t rows, int64_t n, int64_t k,
                        const char *what)
{
    vf_tensor *ti = NULL;
    vf_tensor *tv = vf_top_k(ctx, t, (int)k, &ti);
    if (!tv || !ti) fail_msg("%s: %s", what, vf_error_message(ctx));
    assert_int_equal(vf_tensor_dim(tv, vf_tensor_rank(tv) - 1), k);
    assert_int_equal(vf_tensor_dtype(ti), VF_I32);
    double *wv = malloc(sizeof(double) * (size_t)(rows * k + 1));
    int32_t *wi = malloc(sizeof(int32_t) * (size_t)(rows * k + 1));
    ref_top_k(x, rows, n, k, wv, wi);
    if (rows * k > 0) {
        float *gv = vt_read(vf_cast(ctx, tv, VF_F32));
        int32_t *gi = vt_read(ti);
        vt_assert_equal_bytes(gi, wi, sizeof(int32_t) * (size_t)(rows * k), what);
        for (int64_t j = 0; j < rows * k; j++)
            if (!(gv[j] == (float)wv[j] || (isnan(gv[j]) && isnan(wv[j]))))
                fail_msg("%s: value %lld: %g, want %g", what, (long long)j, gv[j], wv[j]);
        free(gv), free(gi);
    }
    free(wv), free(wi);
}

static void top_k_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    /* ties, NaNs, infinities and signed zeros */
    const float x[21] = {1, 3, 3, -1, NAN, 2, 3,   -INFINITY, 0.0f, -0.0f, 5, INFINITY, NAN, 5,
                         4, 4, 4, 4, 4, 4, -2};
    double dx[21];
    for (int k = 0; k < 21; k++) dx[k] = x[k];
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 7}, x);
    const int ks[4] = {0, 1, 3, 7};
    for (int q = 0; q < 4; q++) check_top_k(ctx, t, dx, 3, 7, ks[q], "top_k f32 with ties and NaN");
    /* f16 (the NaN and infinities survive the cast), rank 3 */
    check_top_k(ctx, vf_reshape(ctx, vf_cast(ctx, t, VF_F16), 3, (int64_t[]){3, 1, 7}), dx, 3, 7, 4, "top_k f16");
    /* integers */
    int32_t xi[40];
    double di[40];
    vt_fill_int(xi, 40, -5, 5, 77);
    xi[3] = INT32_MIN, xi[9] = INT32_MAX;
    for (int k = 0; k < 40; k++) di[k] = xi[k];
    check_top_k(ctx, vf_tensor_from_host(ctx, VF_I32, 3, (int64_t[]){2, 2, 10}, xi), di, 4, 10, 6, "top_k i32");
    uint32_t xu[8] = {7, UINT32_MAX, 0, 7, 2147483648u, 1, 7, 3};
    double du[8];
    for (int k = 0; k < 8; k++) du[k] = xu[k];
    check_top_k(ctx, vf_tensor_from_host(ctx, VF_U32, 1, (int64_t[]){8}, xu), du, 1, 8, 5, "top_k u32");
    /* a long row (one step on lavapipe's loop budget) */
    enum { N = 3000 };
    float *xl = malloc(sizeof(float) * N);
    double *dl = malloc(sizeof(double) * N);
    vt_fill_uniform(xl, N, -1, 1, 78);
    for (int k = 0; k < N; k += 97) xl[k] = 0.25f; /* ties */
    for (int k = 0; k < N; k++) dl[k] = xl[k];
    check_top_k(ctx, vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, xl), dl, 1, N, 50, "top_k of 3000");
    /* sorted ascending (the worst case of a rank count), and every k up to n
       (a full sort through the merges) with ties, NaN and infinities */
    for (int k = 0; k < N; k++) xl[k] = (float)(k / 3), dl[k] = xl[k];
    check_top_k(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, N / 2}, xl), dl, 2, N / 2, 700,
                "top_k of ascending rows");
    vt_fill_uniform(xl, N, -4, 4, 79);
    for (int k = 0; k < N; k++) xl[k] = k % 11 == 0 ? NAN : k % 13 == 0 ? INFINITY : k % 17 == 0 ? -INFINITY
                                      : roundf(xl[k] * 8) / 8;
    for (int k = 0; k < N; k++) dl[k] = xl[k];
    vf_tensor *tl = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, N / 2}, xl);
    check_top_k(ctx, tl, dl, 2, N / 2, N / 2, "top_k with k = n of rows of 1500 (ties, NaN, infinities)");
    check_top_k(ctx, vf_cast(ctx, tl, VF_F16), dl, 2, N / 2, 600, "top_k f16 of rows of 1500");
    int32_t *il = malloc(sizeof(int32_t) * N);
    vt_fill_int(il, N, -40, 40, 80);
    for (int k = 0; k < N; k++) dl[k] = il[k];
    check_top_k(ctx, vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){3, N / 3}, il), dl, 3, N / 3, 999,
                "top_k i32 of rows of 1000");
    free(il), free(xl), free(dl);
    /* errors */
    assert_null(vf_top_k(ctx, t, 8, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_top_k", "k = 8", "[3,7]", NULL);
    assert_null(vf_top_k(ctx, t, -1, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_top_k", "k = -1", NULL);
    float one = 1;
    assert_null(vf_top_k(ctx, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &one), 1, NULL));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_top_k", "scalar", NULL);
    assert_null(vf_top_k(ctx, vf_fill(ctx, VF_BOOL, 1, (int64_t[]){3}, 1), 1, NULL));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_top_k", "bool", NULL);
    /* empty rows: k = 0 of nothing */
    vf_tensor *ei = NULL;
    check_shape(vf_top_k(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){4, 0}, 1), 0, &ei), 2, (int64_t[]){4, 0}, "top_k empty");
    check_shape(ei, 2, (int64_t[]){4, 0}, "top_k empty indices");
    vt_context_done(ctx);
}
VT_PER_BACKEND(top_k_values)

/* One row of 262144 (a language model's vocabulary), k = 50, the
   multi-level path on Vulkan (7 dispatches on lavapipe): well under a
   second, where a rank count per element took seconds and a sorted row
   would pass the fence timeout. */
static void top_k_vocabulary(vf_backend b)
{
    enum { V = 262144, K = 50 };
    vf_context *ctx = vt_context(b);
    float *x = malloc(sizeof(float) * V);
    double *dx = malloc(sizeof(double) * V);
    vt_fill_uniform(x, V, -10, 10, 81);
    for (int k = 0; k < V; k += 4099) x[k] = 9.999f; /* ties among the winners */
    for (int k = 0; k < V; k++) dx[k] = x[k];
    check_top_k(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){1, V}, x), dx, 1, V, K, "top_k 50 of 262144");
    free(x), free(dx);
    vt_context_done(ctx);
}
VT_PER_BACKEND(top_k_vocabulary)

/* top_k in a traced body with a symbolic number of rows, and its gradient:
   out[0] values, out[1] indices, out[2] = d sum(w * top_k(x, 3)) / dx */
static vf_status topk_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *idx = NULL;
    vf_tensor *v = vf_top_k(ctx, x, 3, &idx);
    vf_tensor *loss = vf_reduce_sum(ctx, vf_mul(ctx, v, vf_range(ctx, VF_F32, 1, 4, 1)), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status st = loss ? vf_tape_gradient(tp, loss, 1, &x, &g) : vf_status_get(ctx);
    vf_tape_end(tp);
    out[0] = v, out[1] = idx, out[2] = g;
    return st != VF_OK ? st : v && idx && g ? VF_OK : vf_status_get(ctx);
}

static void topk_make(vf_context *ctx, int64_t n, vf_tensor **in, void *user)
{
    (void)user;
    float x[30];
    vt_fill_uniform(x, (size_t)(6 * n), -1, 1, 60 + (uint64_t)n);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, 6}, x);
}

/* The gradient: 1, 2, 3 at the positions of the largest, second, third. */
static void topk_check(int64_t n, vf_tensor *const *in, vf_tensor *const *ea, void *user)
{
    (void)in, (void)user;
    int32_t *id = vt_read(ea[1]);
    float *g = vt_read(ea[2]);
    for (int64_t r = 0; r < n; r++)
        for (int i = 0; i < 6; i++) {
            float want = 0;
            for (int j = 0; j < 3; j++)
                if (id[r * 3 + j] == i) want = (float)(j + 1);
            assert_true(g[r * 6 + i] == want);
        }
    free(id), free(g);
}

static void top_k_traced(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vt_check_traced_vs_eager(ctx, &(vt_traced_case){.name = "topk", .body = topk_body, .n_inputs = 1, .n_outputs = 3,
                                                   .sig = (vf_tensor_spec[]){{VF_F32, 2, {-1, 6}}},
                                                   .sizes = (int64_t[]){2, 5}, .n_sizes = 2, .make = topk_make,
                                                   .check = topk_check});
    vt_context_done(ctx);
}
VT_PER_BACKEND(top_k_traced)

/* cumsum along the symbolic axis and its gradient, traced vs eager:
   out[0] = cumsum(x, 0, exclusive), out[1] = d sum(w * cumsum(x, 0, reverse)) / dx */
static vf_status scan_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *c = vf_cumsum(ctx, x, 0, false, true);
    vf_tensor *loss = vf_reduce_sum(ctx, vf_mul(ctx, c, vf_add(ctx, x, x)), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status st = loss ? vf_tape_gradient(tp, loss, 1, &x, &g) : vf_status_get(ctx);
    vf_tape_end(tp);
    out[0] = vf_cumsum(ctx, x, 0, true, false);
    out[1] = g;
    return st != VF_OK ? st : out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void scan_make(vf_context *ctx, int64_t n, vf_tensor **in, void *user)
{
    (void)user;
    float *x = malloc(sizeof(float) * (size_t)(3 * n));
    assert_non_null(x);
    vt_fill_uniform(x, (size_t)(3 * n), -1, 1, 90 + (uint64_t)n);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, 3}, x);
    free(x);
}

/* The gradient's definition: d/dx[k] of sum_j w_j c_j (c = reverse
   cumsum, w = 2x) = sum_{j <= k} w_j + 2 c_k. */
static void scan_check(int64_t n, vf_tensor *const *in, vf_tensor *const *ea, void *user)
{
    (void)user;
    float *x = vt_read(in[0]), *g = vt_read(ea[1]);
    double *cs = malloc(sizeof(double) * (size_t)n);
    assert_non_null(cs);
    for (int cc = 0; cc < 3; cc++) {
        double pre = 0, suf = 0;
        for (int64_t j = n - 1; j >= 0; j--) suf += x[j * 3 + cc], cs[j] = suf;
        for (int64_t k = 0; k < n; k++) {
            pre += 2.0 * x[k * 3 + cc];
            double want = pre + 2.0 * cs[k];
            if (fabs(g[k * 3 + cc] - want) > 1e-4 * (1 + fabs(want)))
                fail_msg("cumsum grad [%lld,%d]: %g, want %g", (long long)k, cc, g[k * 3 + cc], want);
        }
    }
    free(cs), free(g), free(x);
}

static void cumsum_traced(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vt_check_traced_vs_eager(ctx, &(vt_traced_case){.name = "scan", .body = scan_body, .n_inputs = 1, .n_outputs = 2,
                                                   .sig = (vf_tensor_spec[]){{VF_F32, 2, {-1, 3}}},
                                                   .sizes = (int64_t[]){4, 300}, .n_sizes = 2, .make = scan_make,
                                                   .check = scan_check, .atol = 1e-5, .rtol = 1e-5});
    vt_context_done(ctx);
}
VT_PER_BACKEND(cumsum_traced)


/* ---- device limits --------------------------------------------------------- */

/* x's cumsum (every flag) equal on cpu and vk */
static void cumsum_same(vf_context *cpu, vf_context *vk, const int32_t *x, int64_t rows, int64_t n, const char *what)
{
    vf_context *cs[2] = {cpu, vk};
    for (int fl = 0; fl < 4; fl++) {
        int32_t *cr[2];
        for (int k = 0; k < 2; k++) {
            vf_tensor *y = vf_cumsum(cs[k], vf_tensor_from_host(cs[k], VF_I32, 2, (int64_t[]){rows, n}, x), -1,
                                     fl & 1, fl & 2);
            if (!y) fail_msg("%s: %s", what, vf_error_message(cs[k]));
            cr[k] = vt_read(y);
        }
        vt_assert_equal_bytes(cr[1], cr[0], sizeof(int32_t) * (size_t)(rows * n), what);
        free(cr[0]), free(cr[1]);
    }
}

/* top_k (values and indices) of x [rows, n] equal on cpu and vk */
static void top_k_same(vf_context *cpu, vf_context *vk, const float *x, int64_t rows, int64_t n, int k,
                       const char *what)
{
    vf_context *cs[2] = {cpu, vk};
    void *tk[2][2];
    for (int c = 0; c < 2; c++) {
        vf_tensor *ti = NULL;
        vf_tensor *tv = vf_top_k(cs[c], vf_tensor_from_host(cs[c], VF_F32, 2, (int64_t[]){rows, n}, x), k, &ti);
        if (!tv || !ti) fail_msg("%s: %s", what, vf_error_message(cs[c]));
        tk[c][0] = vt_read(tv);
        tk[c][1] = vt_read(ti);
    }
    vt_assert_equal_bytes(tk[1][0], tk[0][0], sizeof(float) * (size_t)(rows * k), what);
    vt_assert_equal_bytes(tk[1][1], tk[0][1], sizeof(int32_t) * (size_t)(rows * k), what);
    for (int c = 0; c < 2; c++) free(tk[c][0]), free(tk[c][1]);
}

/* Under tiny device limits, equal to the CPU backend: cumsum with 4
   levels of block sums (LIMITS: 8 workgroups per dispatch, a loop budget
   of 33, so blocks of 4 over 8 grid rounds: 900 -> 225 -> 57 -> 15 -> 4,
   9 steps) and 3 levels without the grid limit (40000 -> 1213 -> 37 -> 2,
   7 steps); top_k in merge levels (max_loop=64: heaps of 3 elements, so
   1667 lists of a row of 5000 merged 3 at a time in 7 levels; with
   k = n, a full sort), and past the grid (max_groups=2: the heaps of 600
   rows, the merges of 30 rows of 2000 with k = 40); a shape whose loops
   cannot fit the limits is refused, naming them. */
static void test_limits(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *cpu = vt_context(VF_BACKEND_CPU), *vk = lim_context(LIMITS), *vl = lim_context("max_loop=64");
    vf_context *vg = lim_context("max_groups=2,max_loop=8192");
    int32_t *ci = malloc(sizeof(int32_t) * 40000);
    vt_fill_int(ci, 40000, -50, 50, 14);
    cumsum_same(cpu, vk, ci, 4, 900, "cumsum in 4 levels under the limits");
    cumsum_same(cpu, vl, ci, 1, 40000, "cumsum in 3 levels under max_loop=64");
    free(ci);
    float *tx = malloc(sizeof(float) * 60000);
    vt_fill_uniform(tx, 60000, -1, 1, 15);
    for (int k = 0; k < 60000; k += 7) tx[k] = 0.5f;
    top_k_same(cpu, vl, tx, 1, 5000, 2, "top_k in 7 merge levels");
    top_k_same(cpu, vl, tx, 2, 600, 600, "top_k with k = n in merge levels");
    top_k_same(cpu, vg, tx, 600, 40, 5, "top_k heaps past the workgroup grid");
    top_k_same(cpu, vg, tx, 30, 2000, 40, "top_k merges past the workgroup grid");
    assert_null(vf_top_k(vk, vf_tensor_from_host(vk, VF_F32, 2, (int64_t[]){60, 200}, tx), 9, NULL));
    vt_expect_error(vk, VF_ERROR_UNSUPPORTED, "top_k", "60 row(s) of 200", "loop iterations", "(33,", NULL);
    free(tx);
    vt_context_done(cpu);
    vt_context_done(vk);
    vt_context_done(vl);
    vt_context_done(vg);
}

/* x [3, 4000] scaled (an elementwise producer), its top_k 40 (values,
   indices), k = n (a full sort), and cumsum along the rows: eager,
   traced fused and traced unfused under max_loop=64 (top_k in 7 merge
   levels, cumsum in 3 levels of block sums, the plan's scratch) equal to
   the CPU backend. */
static vf_status p_scan(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = vf_mul(ctx, in[0], lim_scalar(ctx, 3.0f));
    out[0] = vf_top_k(ctx, h, 40, &out[1]);
    out[2] = vf_top_k(ctx, h, 4000, &out[3]);
    out[4] = vf_cumsum(ctx, h, 1, false, true);
    return lim_finish(ctx, out, 5);
}

static void test_limits_traced(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    static const program p = {"scan", p_scan, 1, 5, {{VF_F32, 2, {3, 4000}}}};
    lim_check_program(&p, "max_loop=64");
}


/* The kernel of op over x [rows, n] (k: top_k's k); its status, the
   message in err. */
static vf_status gen_scan(const vf_device_caps *caps, vf_op op, vf_dtype dt, int64_t rows, int64_t n, int64_t k,
                          vf_gen_kernel *out, vf_err *err)
{
    vf_exec e;
    memset(&e, 0, sizeof e);
    memset(out, 0, sizeof *out);
    vf_err_clear(err);
    e.op = op;
    e.n_in = 1;
    e.in[0].dtype = e.out.dtype = dt;
    e.in[0].rank = e.out.rank = 2;
    e.in[0].shape[0] = e.out.shape[0] = rows;
    e.in[0].shape[1] = e.out.shape[1] = n;
    e.attrs.axis = 1;
    if (op == VF_OP_TOP_K || op == VF_OP_TOP_K_INDICES) {
        e.attrs.value = (double)k;
        e.out.shape[1] = k;
        if (op == VF_OP_TOP_K_INDICES) e.out.dtype = VF_I32;
    }
    return vf_codegen_exec(&e, caps, out, err);
}

/* x [rows, n] top_k's kernel with k on caps: fits, or is refused with
   the largest k that fits, which then fits while one more does not. */
static void top_k_bound(const vf_device_caps *caps, int64_t rows, int64_t n, int64_t k, const char *why)
{
    vf_gen_kernel kn;
    vf_err err = {0};
    vf_status st = gen_scan(caps, VF_OP_TOP_K_INDICES, VF_F32, rows, n, k, &kn, &err);
    if (!why) {
        if (st) fail_msg("top_k %lld of [%lld, %lld]: %s", (long long)k, (long long)rows, (long long)n, err.message);
        assert_true(kn.n_steps <= VF_KERNEL_MAX_STEPS);
        assert_true(kn.scratch_bytes <= caps->max_storage_buffer_range);
        vf_kernel_free(&kn);
        return;
    }
    assert_int_equal(st, VF_ERROR_UNSUPPORTED);
    if (!strstr(err.message, why) || !strstr(err.message, "at most k = ")) fail_msg("%s", err.message);
    long long best = atoll(strstr(err.message, "at most k = ") + 12);
    assert_true(best > 0 && best < k);
    top_k_bound(caps, rows, n, best, NULL);
    assert_int_equal(gen_scan(caps, VF_OP_TOP_K_INDICES, VF_F32, rows, n, best + 1, &kn, &err), VF_ERROR_UNSUPPORTED);
}

/* Codegen on lavapipe's limits, no device: the largest tensors (2^25 f32,
   2^26 f16) in one row, cumsum in levels of block sums (the totals of
   one level scanned like the row), top_k with k = 50 in at most 9
   dispatches and one binding of scratch; a k whose work could pass the
   fence timeout, or whose lists pass one binding, is refused up front
   with the largest k that fits. */
static void test_codegen_bounds(void **state)
{
    (void)state;
    vf_gen_kernel k;
    vf_err err = {0};
    /* cumsum: 2^25 -> 131072 -> 512 -> 2 (7 steps); 2^26 f16 likewise */
    const vf_dtype dts[2] = {VF_F32, VF_F16};
    for (int d = 0; d < 2; d++) {
        vf_status st = gen_scan(&lim_caps_lavapipe, VF_OP_CUMSUM, dts[d], 1, (int64_t)1 << (25 + d), 0, &k, &err);
        if (st) fail_msg("cumsum of 2^%d: %s", 25 + d, err.message);
        assert_int_equal(k.n_steps, 7);
        assert_true(k.scratch_bytes <= (size_t)1 << 27);
        vf_kernel_free(&k);
    }
    /* blocks of 2 (a loop budget of 9 over 4 grid rounds): 16 lanes of 16 keep 16 x (8 + 4 + 2) block
       sums, 896 bytes, more than a binding of 512 */
    vf_device_caps tiny = lim_caps_lavapipe;
    tiny.max_loop_iterations = 16;
    tiny.max_storage_buffer_range = 512;
    for (int d = 0; d < 3; d++) tiny.max_workgroup_count[d] = 1;
    assert_int_equal(gen_scan(&tiny, VF_OP_CUMSUM, VF_F32, 16, 16, 0, &k, &err), VF_ERROR_UNSUPPORTED);
    if (!strstr(err.message, "896 bytes of block sums")) fail_msg("%s", err.message);
    /* top_k: 2^26 f16 in a row, k = 50 */
    assert_int_equal(gen_scan(&lim_caps_lavapipe, VF_OP_TOP_K, VF_F16, 1, (int64_t)1 << 26, 50, &k, &err), VF_OK);
    assert_true(k.n_steps <= VF_KERNEL_MAX_STEPS);
    vf_kernel_free(&k);
    top_k_bound(&lim_caps_lavapipe, 1, (int64_t)1 << 25, 50, NULL);
    top_k_bound(&lim_caps_lavapipe, 128, 262144, 50, NULL);
    top_k_bound(&lim_caps_lavapipe, 1, 262144, 262144, NULL);
    top_k_bound(&lim_caps_lavapipe, 128, 262144, 1000, NULL);
    top_k_bound(&lim_caps_lavapipe, 128, 262144, 5000, "scratch");
    top_k_bound(&lim_caps_lavapipe, 1, (int64_t)1 << 23, (int64_t)1 << 23, "fence timeout");
    /* a GPU's work bound is higher: there the lists of a full sort of 2^25 pass 128 MiB */
    vf_device_caps gpu = lim_caps_lavapipe;
    gpu.is_cpu = false;
    top_k_bound(&gpu, 1, (int64_t)1 << 25, (int64_t)1 << 25, "scratch");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(cumsum_values), VT_PER_BACKEND_TESTS(cumsum_long), VT_PER_BACKEND_TESTS(cumsum_traced),
        VT_PER_BACKEND_TESTS(top_k_values), VT_PER_BACKEND_TESTS(top_k_vocabulary), VT_PER_BACKEND_TESTS(top_k_traced),
        cmocka_unit_test(test_limits), cmocka_unit_test(test_limits_traced), cmocka_unit_test(test_codegen_bounds),
    };
    return VT_RUN_GROUP(tests);
}
