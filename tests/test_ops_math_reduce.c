/* The reductions of issue 13 (reduce_prod, reduce_any, reduce_all,
 * logsumexp) through the public API:
 *  - on both backends against double references written here, in every
 *    mode of the reduction kernel (rows: a workgroup per output; columns;
 *    two steps for few long rows), several axes, keepdims, f32 / f16 / i32
 *    (wrapping) / bool; logsumexp's edges in each mode; empty inputs and
 *    outputs;
 *  - row groups: a last-axis keepdims logsumexp / reduce_prod and the
 *    elementwise ops around it are one kernel on Vulkan, equal to the CPU
 *    backend eager and traced and to the unfused plan;
 *  - reduce_prod's gradient with zeros in a row (exact).
 *
 * Tolerances (|got - want| <= atol + rtol |want|): reduce_any / all and
 * i32 products: exact; reduce_prod: 6e-8 n relative (n roundings);
 * logsumexp: 1e-6 + 2.4e-7 sqrt(n) absolute, 2e-7 relative; f16 results
 * add 1e-3 relative (one f16 rounding).
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_tensor *host(vf_context *ctx, vf_dtype dt, int rank, const int64_t *shape, const void *data)
{
    return vf_tensor_from_host(ctx, dt, rank, shape, data);
}

typedef enum { K_PROD, K_LSE, K_ANY, K_ALL } red_kind;

/* The double reference over the axes in mask (logsumexp shifted by the max;
   its edge rules spelled out). */
static void dref(red_kind k, const double *x, int rank, const int64_t *sh, uint32_t mask, double *out, int64_t nout)
{
    double *m = malloc(sizeof(double) * (size_t)nout);
    for (int64_t o = 0; o < nout; o++) out[o] = k == K_PROD || k == K_ALL ? 1 : 0, m[o] = -INFINITY;
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= sh[d];
    for (int pass = 0; pass < (k == K_LSE ? 2 : 1); pass++)
        for (int64_t i = 0; i < n; i++) {
            int64_t rem = i, o = 0, mul = 1;
            for (int d = rank - 1; d >= 0; d--) {
                int64_t c = rem % sh[d];
                rem /= sh[d];
                if (!((mask >> d) & 1)) o += c * mul, mul *= sh[d];
            }
            double v = x[i];
            if (k == K_PROD) out[o] *= v;
            else if (k == K_ANY) out[o] = out[o] || v != 0;
            else if (k == K_ALL) out[o] = out[o] && v != 0;
            else if (pass == 0) m[o] = isnan(v) || isnan(m[o]) ? NAN : fmax(m[o], v);
            else if (isfinite(m[o])) out[o] += exp(v - m[o]);
        }
    if (k == K_LSE)
        for (int64_t o = 0; o < nout; o++) out[o] = isfinite(m[o]) ? m[o] + log(out[o]) : m[o];
    free(m);
}

typedef struct {
    red_kind k;
    vf_dtype dt;
    int rank;
    int64_t sh[3];
    int naxes;
    int axes[3];
    bool keep;
    float lo, hi;
} red_case;

static vf_tensor *call_red(vf_context *ctx, red_kind k, vf_tensor *x, int naxes, const int *axes, bool keep)
{
    switch (k) {
    case K_PROD: return vf_reduce_prod(ctx, x, naxes, axes, keep);
    case K_LSE: return vf_logsumexp(ctx, x, naxes, axes, keep);
    case K_ANY: return vf_reduce_any(ctx, x, naxes, axes, keep);
    default: return vf_reduce_all(ctx, x, naxes, axes, keep);
    }
}

/* Runs c on backend ctx with data x (as f32; converted to c->dt) and checks
   against the double reference. Specials may be planted by the caller. */
static void check_red(vf_context *ctx, const red_case *c, const float *x, const char *what)
{
    int64_t n = 1, nout = 1, osh[3];
    uint32_t mask = 0;
    for (int i = 0; i < c->naxes; i++) mask |= 1u << (c->axes[i] < 0 ? c->axes[i] + c->rank : c->axes[i]);
    if (!c->naxes) mask = (1u << c->rank) - 1;
    for (int d = 0; d < c->rank; d++) {
        n *= c->sh[d];
        osh[d] = (mask >> d) & 1 ? 1 : c->sh[d];
        nout *= osh[d];
    }
    double *xd = malloc(sizeof(double) * (size_t)(n + 1)), *want = malloc(sizeof(double) * (size_t)nout);
    void *buf = malloc((size_t)(n + 1) * 4);
    for (int64_t i = 0; i < n; i++) {
        if (c->dt == VF_F32 || c->dt == VF_F16) xd[i] = x[i], ((float *)buf)[i] = x[i];
        else if (c->dt == VF_I32) xd[i] = (int32_t)x[i], ((int32_t *)buf)[i] = (int32_t)x[i];
        else xd[i] = x[i] > 0, ((uint8_t *)buf)[i] = x[i] > 0;
    }
    vf_scope_begin(ctx);
    vf_tensor *in;
    if (c->dt == VF_F16) { /* x rounded to f16 on the backend; the reference takes the rounded values */
        in = vf_cast(ctx, host(ctx, VF_F32, c->rank, c->sh, buf), VF_F16);
        float *r = vt_read(vf_cast(ctx, in, VF_F32));
        for (int64_t i = 0; i < n; i++) xd[i] = r[i];
        free(r);
    } else {
        in = host(ctx, c->dt, c->rank, c->sh, buf);
    }
    dref(c->k, xd, c->rank, c->sh, mask, want, nout);
    vf_tensor *t = call_red(ctx, c->k, in, c->naxes, c->axes, c->keep);
    if (t && c->dt == VF_F16) t = vf_cast(ctx, t, VF_F32);
    if (!t) fail_msg("%s on %s: %s", what, vf_device_name(ctx), vf_error_message(ctx));
    assert_int_equal(vf_tensor_numel(t), nout);
    assert_int_equal(vf_tensor_rank(t), c->keep ? c->rank : c->rank - __builtin_popcount(mask));
    void *got = vt_read(t);
    char label[160];
    snprintf(label, sizeof label, "%s on %s", what, vf_device_name(ctx));
    if (c->dt == VF_F32 || c->dt == VF_F16) {
        float *w = malloc(sizeof(float) * (size_t)nout);
        for (int64_t o = 0; o < nout; o++) w[o] = (float)want[o];
        double r = (double)n / (double)nout; /* elements per output */
        /* prod: r f32 roundings of at most 2^-24 each; errors of products
           near 1 are correlated (an f32 emulation of the kernel's order
           reproduces its -4.6e-4 over 70000 values), so the bound is linear */
        double rtol = c->k == K_PROD ? 1e-6 + 6e-8 * r : 2e-7, atol = c->k == K_LSE ? 1e-6 + 2.4e-7 * sqrt(r) : 0;
        if (c->dt == VF_F16) rtol += 1e-3, atol *= 1e3; /* f32 arithmetic, one f16 rounding of the result */
        vt_assert_close_f32(got, w, (size_t)nout, atol, rtol, label);
        free(w);
    } else {
        /* i32 products wrap at 32 bits: the reference multiplies in uint64 */
        uint64_t *ip = malloc(sizeof(uint64_t) * (size_t)nout);
        for (int64_t o = 0; o < nout; o++) ip[o] = 1;
        for (int64_t i = 0; i < n && c->dt == VF_I32; i++) {
            int64_t rem = i, o = 0, mul = 1;
            for (int d = c->rank - 1; d >= 0; d--) {
                int64_t cc = rem % c->sh[d];
                rem /= c->sh[d];
                if (!((mask >> d) & 1)) o += cc * mul, mul *= c->sh[d];
            }
            ip[o] *= (uint64_t)(int64_t)xd[i];
        }
        for (int64_t o = 0; o < nout; o++) {
            int64_t g = c->dt == VF_I32 ? ((int32_t *)got)[o] : ((uint8_t *)got)[o];
            int64_t w = c->dt == VF_I32 ? (int32_t)(uint32_t)ip[o] : (int64_t)want[o];
            if (g != w) fail_msg("%s: output %lld: got %lld, want %lld", label, (long long)o, (long long)g, (long long)w);
        }
        free(ip);
    }
    free(got), free(xd), free(want), free(buf);
    vf_scope_end(ctx);
}

static void reductions(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    /* rows (>= 32 reduced innermost: a workgroup per output), columns,
       two steps (few outputs, long rows), several axes, keepdims */
    static const red_case cases[] = {
        {K_PROD, VF_F32, 2, {7, 33}, 1, {1}, false, -1.5f, 1.5f},
        {K_PROD, VF_F32, 2, {1000, 3}, 1, {0}, false, 0.99f, 1.01f},
        {K_PROD, VF_F32, 1, {70000}, 0, {0}, false, 0.9999f, 1.0001f},
        {K_PROD, VF_F32, 2, {4, 300}, 1, {-1}, true, 0.95f, 1.05f},
        {K_PROD, VF_F32, 3, {5, 6, 7}, 2, {0, 2}, false, -1.2f, 1.2f},
        {K_PROD, VF_I32, 2, {9, 40}, 1, {1}, false, -7, 7},
        {K_PROD, VF_I32, 2, {40, 9}, 1, {0}, true, -7, 7},
        {K_LSE, VF_F32, 2, {7, 33}, 1, {1}, false, -50, 50},
        {K_LSE, VF_F32, 2, {1000, 3}, 1, {0}, true, -50, 50},
        {K_LSE, VF_F32, 1, {200000}, 0, {0}, false, -80, 80},
        {K_LSE, VF_F32, 3, {5, 6, 7}, 2, {0, 2}, false, -3, 3},
        {K_LSE, VF_F32, 2, {3, 300}, 1, {-1}, true, -1000, 1000},
        {K_ANY, VF_BOOL, 2, {6, 40}, 1, {0}, false, -40, 1},
        {K_ANY, VF_BOOL, 2, {6, 40}, 1, {1}, true, -40, 1},
        {K_ALL, VF_BOOL, 2, {6, 40}, 1, {1}, false, -1, 40},
        {K_ALL, VF_BOOL, 3, {3, 4, 50}, 0, {0}, false, -1, 400},
        {K_ANY, VF_BOOL, 1, {100000}, 0, {0}, false, -100000, 1},
        {K_PROD, VF_F16, 2, {6, 40}, 1, {1}, false, 0.9f, 1.1f},
        {K_LSE, VF_F16, 2, {40, 6}, 1, {0}, true, -8, 8},
    };
    char what[96];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const red_case *c = &cases[i];
        int64_t n = c->sh[0] * (c->rank > 1 ? c->sh[1] : 1) * (c->rank > 2 ? c->sh[2] : 1);
        float *x = malloc(sizeof(float) * (size_t)n);
        vt_fill_uniform(x, (size_t)n, c->lo, c->hi, 7 + i);
        if (c->dt == VF_I32) {
            for (int64_t j = 0; j < n; j++) x[j] = floorf(x[j]);
        }
        snprintf(what, sizeof what, "reduction case %zu", i);
        check_red(ctx, c, x, what);
        free(x);
    }

    /* logsumexp's edges in each mode: a row of -Inf, a +Inf, a NaN, -Inf
       with finite values, and values whose exp overflows (columns: 4 wide;
       rows: 64 wide; two steps: 100000 long) */
    static const int64_t widths[3] = {4, 64, 100000};
    for (int w = 0; w < 3; w++) {
        int64_t W = widths[w], rows = w == 2 ? 1 : 5;
        float *x = malloc(sizeof(float) * (size_t)(rows * W));
        vt_fill_uniform(x, (size_t)(rows * W), -5, 5, 3);
        for (int64_t j = 0; j < W && rows > 1; j++) x[j] = -INFINITY;  /* row 0: all -Inf */
        if (rows > 1) {
            x[W + W / 2] = INFINITY;                                  /* row 1: +Inf */
            x[2 * W + W - 1] = NAN;                                   /* row 2: NaN */
            for (int64_t j = 0; j < W; j += 2) x[3 * W + j] = -INFINITY; /* row 3: half -Inf */
            for (int64_t j = 0; j < W; j++) x[4 * W + j] = 1000.0f + (float)(j % 3); /* row 4: exp overflows */
        } else {
            x[W / 3] = -INFINITY;
            x[W - 5] = 500;
        }
        red_case c = {K_LSE, VF_F32, 2, {rows, W}, 1, {1}, false, 0, 0};
        snprintf(what, sizeof what, "logsumexp edges, rows of %lld", (long long)W);
        check_red(ctx, &c, x, what);
        if (rows == 1) { /* and a NaN in the long row */
            x[W / 2] = NAN;
            check_red(ctx, &c, x, "logsumexp of a long row with a NaN");
        }
        free(x);
    }

    /* empty inputs: the value over an empty set */
    vf_scope_begin(ctx);
    float none[1] = {0};
    vf_tensor *e = host(ctx, VF_F32, 2, (int64_t[]){3, 0}, none);
    vf_tensor *eb = host(ctx, VF_BOOL, 2, (int64_t[]){3, 0}, none);
    vf_tensor *ei = host(ctx, VF_I32, 2, (int64_t[]){3, 0}, none);
    float *p = vt_read(vf_reduce_prod(ctx, e, 1, (int[]){1}, false)), *l = vt_read(vf_logsumexp(ctx, e, 0, NULL, true));
    int32_t *pi = vt_read(vf_reduce_prod(ctx, ei, 1, (int[]){1}, false));
    uint8_t *an = vt_read(vf_reduce_any(ctx, eb, 1, (int[]){1}, false)), *al = vt_read(vf_reduce_all(ctx, eb, 1, (int[]){1}, false));
    for (int i = 0; i < 3; i++) {
        assert_true(p[i] == 1.0f && pi[i] == 1 && an[i] == 0 && al[i] == 1);
    }
    assert_true(isinf(l[0]) && l[0] < 0);
    free(p), free(l), free(pi), free(an), free(al);
    /* and outputs that are empty themselves */
    assert_int_equal(vf_tensor_numel(vf_logsumexp(ctx, host(ctx, VF_F32, 2, (int64_t[]){0, 5}, none), 1, (int[]){1}, false)), 0);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}
VT_PER_BACKEND(reductions)

/* Row groups: a last-axis keepdims logsumexp and reduce_prod join the
   elementwise ops around them in one kernel, like reduce_sum / max. */
static vf_status lse_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = vf_mul(ctx, in[0], in[0]);
    out[0] = vf_sub(ctx, x, vf_logsumexp(ctx, x, 1, (int[]){-1}, true)); /* a log_softmax */
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status prod_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *s = vf_sigmoid(ctx, in[0]);
    out[0] = vf_mul(ctx, in[0], vf_reduce_prod(ctx, vf_add(ctx, s, s), 1, (int[]){-1}, true));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static float *run_body(vf_backend b, vf_body body, int mode, const float *x, int64_t rows, int64_t cols, int *kernels)
{
    vf_context *ctx = vt_context(b);
    vf_scope_begin(ctx);
    vf_tensor *in = host(ctx, VF_F32, 2, (int64_t[]){rows, cols}, x), *out = NULL;
    if (mode == 0) {
        assert_int_equal(body(ctx, &in, &out, NULL), VF_OK);
    } else {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "rows", .body = body, .n_inputs = 1,
                                                                      .n_outputs = 1, .unfused = mode == 2});
        assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
        vf_function_stats fs;
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        *kernels = fs.kernels;
        vf_function_destroy(fn);
    }
    float *r = vt_read(out);
    vf_scope_end(ctx);
    vt_context_done(ctx);
    return r;
}

static void test_row_groups(void **state)
{
    (void)state;
    const vf_body bodies[2] = {lse_body, prod_body};
    static const int64_t cols[3] = {5, 300, 3000}; /* the row cached or not */
    for (int bi = 0; bi < 2; bi++)
        for (int ci = 0; ci < 3; ci++) {
            int64_t Rn = 17, Cn = cols[ci];
            float *x = malloc(sizeof(float) * (size_t)(Rn * Cn));
            vt_fill_uniform(x, (size_t)(Rn * Cn), -3, 3, 11);
            if (bi == 1) /* a product of thousands of values in (1, 2): keep it finite */
                for (int64_t i = 0; i < Rn * Cn; i++) x[i] = x[i] * 0.01f - 4.0f / (float)Cn;
            x[0] = bi == 0 ? INFINITY : 0.0f; /* lse: a row with +Inf; prod: a zero factor... of sigmoid */
            int k = 0, kf = 0, ku = 0;
            float *want = run_body(VF_BACKEND_CPU, bodies[bi], 0, x, Rn, Cn, &k);
            float *ct = run_body(VF_BACKEND_CPU, bodies[bi], 1, x, Rn, Cn, &k);
            char what[96];
            snprintf(what, sizeof what, "%s rows of %lld: CPU traced vs eager", bi ? "reduce_prod" : "logsumexp", (long long)Cn);
            vt_assert_equal_bytes(ct, want, sizeof(float) * (size_t)(Rn * Cn), what);
            if (vt_have_vulkan()) {
                float *vf = run_body(VF_BACKEND_VULKAN, bodies[bi], 1, x, Rn, Cn, &kf);
                float *vu = run_body(VF_BACKEND_VULKAN, bodies[bi], 2, x, Rn, Cn, &ku);
                double tol = 2e-6 + 2.4e-7 * sqrt((double)Cn);
                snprintf(what, sizeof what, "%s rows of %lld: Vulkan row group vs CPU", bi ? "reduce_prod" : "logsumexp",
                         (long long)Cn);
                vt_assert_close_f32(vf, want, (size_t)(Rn * Cn), tol, tol, what);
                vt_assert_close_f32(vu, want, (size_t)(Rn * Cn), tol, tol, what);
                assert_int_equal(kf, 1); /* one row group */
                assert_true(ku >= 3);
                free(vf), free(vu);
            }
            free(want), free(ct), free(x);
        }
}

/* reduce_prod with zeros: one zero in a row (its gradient is the product
   of the others), two zeros (all 0), none; prod / x would give NaN or Inf */
static void prod_grad(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_scope_begin(ctx);
    static const float x[9] = {2, 0, 3, 0, 0, 5, 1, 2, 4};
    static const float want[9] = {0, 6, 0, 0, 0, 0, 8, 4, 2};
    vf_tensor *tx = host(ctx, VF_F32, 2, (int64_t[]){3, 3}, x), *g = NULL;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_reduce_sum(ctx, vf_reduce_prod(ctx, tx, 1, (int[]){1}, false), 0, NULL, false);
    assert_int_equal(vf_tape_gradient(tp, y, 1, &tx, &g), VF_OK);
    vf_tape_end(tp);
    float *gp = vt_read(g);
    vt_assert_equal_bytes(gp, want, sizeof want, "d sum(reduce_prod(x, 1)) / dx with zeros");
    free(gp);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}
VT_PER_BACKEND(prod_grad)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(reductions),
        cmocka_unit_test(test_row_groups),
        VT_PER_BACKEND_TESTS(prod_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
