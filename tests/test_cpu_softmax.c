/* The CPU backend's f32 softmax rows (src/cpu/fast_math.c): softmax,
 * log_softmax and sparse cross entropy along the last axis of f32 tensors
 * computed in float, vectorised. Against the test's own double references
 * (libm), to the bounds fast_math.c states: softmax within 4.1e-7 of its
 * magnitude (plus 2^-149 for subnormal results), log_softmax and cross
 * entropy within 2.1e-7 of theirs; over long rows (1e5 columns),
 * short rows and partial blocks, -inf entries, huge magnitudes and
 * results below FLT_MIN (subnormal). The specials keep the double path's
 * answers: NaN anywhere, a row of -inf or one with +inf give a NaN row. The
 * float exp itself (vf_fm_expf) against exp over [-110, 0]. That eager ops
 * take the rows (their counter), strided and f16 rows do not, a fused
 * traced softmax does with the eager bits, and the bits do not depend on
 * the thread count. */
#include "cpu/fast_math.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* fast_math.c's bounds (relative): e^x within 1.2 ulps (1.43e-7) for the
   terms and so the sum, the reciprocal and the product rounded (2^-24
   each) for softmax; for log_softmax the sum's error scales with log(sum)
   <= |output|, plus the output's rounding. */
#define SOFTMAX_BOUND 4.1e-7
#define LOG_BOUND 2.1e-7

/* |got - want| in units of the f32 spacing at want (2^-149 below FLT_MIN). */
static double ulps(float got, double want)
{
    float w = fabsf((float)want);
    double spacing = w < FLT_MIN ? 0x1p-149 : (double)nextafterf(w, INFINITY) - (double)w;
    return fabs((double)got - want) / spacing;
}

/* softmax / log_softmax of each row of x [rows, n], in double. */
static void ref_rows(const float *x, int64_t rows, int64_t n, bool log_out, double *want)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        double m = -INFINITY, s = 0;
        bool nan = false;
        for (int64_t j = 0; j < n; j++) {
            nan |= isnan(xr[j]);
            if (xr[j] > m) m = xr[j];
        }
        for (int64_t j = 0; j < n; j++) s += exp((double)xr[j] - m);
        for (int64_t j = 0; j < n; j++) {
            double v = (double)xr[j] - m;
            want[r * n + j] = nan || isnan(v) || isnan(s) ? NAN : log_out ? v - log(s) : exp(v) / s;
        }
    }
}

/* got is within the stated bound of want, element by element; NaN where
   want is NaN, -inf where want is -inf. */
static void expect_rows(const float *got, const double *want, int64_t count, bool log_out, const char *what)
{
    for (int64_t i = 0; i < count; i++) {
        double w = want[i];
        float g = got[i];
        bool ok;
        if (isnan(w)) ok = isnan(g);
        else if (isinf((float)w)) ok = g == (float)w; /* -inf, or beyond -FLT_MAX: -inf too */
        else if (log_out) ok = fabs((double)g - w) <= LOG_BOUND * fabs(w);
        else ok = fabs((double)g - w) <= SOFTMAX_BOUND * fabs(w) + 0x1p-149;
        if (!ok) fail_msg("%s: element %lld: got %.9g, want %.17g (%.2f ulps)", what, (long long)i, g, w, ulps(g, w));
    }
}

static vf_tensor *row_op(vf_context *ctx, vf_tensor *x, bool log_out, int axis)
{
    return log_out ? vf_log_softmax(ctx, x, axis) : vf_softmax(ctx, x, axis);
}

/* softmax and log_softmax of x [rows, n] on the CPU backend, each taking
   the float rows (the counter moves by rows), against the references. */
static void check_rows(vf_context *ctx, const float *x, int64_t rows, int64_t n, const char *what)
{
    double *want = malloc((size_t)(rows * n) * sizeof *want);
    assert_non_null(want);
    for (int lo = 0; lo < 2; lo++) {
        vf_scope_begin(ctx);
        vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){rows, n}, x);
        int64_t before = vf_cpu_fm_softmax_rows();
        float *got = vt_read(row_op(ctx, t, lo, -1));
        if (vf_cpu_fm_softmax_rows() - before != rows)
            fail_msg("%s: %s ran %lld float rows, want %lld", what, lo ? "log_softmax" : "softmax",
                     (long long)(vf_cpu_fm_softmax_rows() - before), (long long)rows);
        ref_rows(x, rows, n, lo, want);
        char name[96];
        snprintf(name, sizeof name, "%s %s", what, lo ? "log_softmax" : "softmax");
        expect_rows(got, want, rows * n, lo, name);
        free(got);
        vf_scope_end(ctx);
    }
    free(want);
}

/* Two rows of 100000 (one spread over [-30, 30], one over [-3, 3]): the
   16 double lanes of the sum over 6250 terms each. */
static void long_rows(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { N = 100000 };
    float *x = malloc(2 * N * sizeof *x);
    assert_non_null(x);
    vt_fill_uniform(x, N, -30.0f, 30.0f, 3);
    vt_fill_uniform(x + N, N, -3.0f, 3.0f, 4);
    check_rows(ctx, x, 2, N, "long rows");
    free(x);
    vt_context_done(ctx);
}

/* Rows of 1 to 40 columns (a partial block of 16 padded, alone or after
   full ones) and the shapes of logits and attention: [256, 10] and
   [768, 12]. */
static void short_rows(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    float x[768 * 12];
    vt_fill_uniform(x, 768 * 12, -8.0f, 8.0f, 5);
    for (int64_t n = 1; n <= 40; n++) {
        char what[32];
        snprintf(what, sizeof what, "rows of %lld", (long long)n);
        check_rows(ctx, x, 3, n, what);
    }
    check_rows(ctx, x, 256, 10, "logits [256, 10]");
    check_rows(ctx, x, 768, 12, "attention [768, 12]");
    vt_context_done(ctx);
}

/* -inf entries (0 and -inf out), huge magnitudes (1e30, FLT_MAX: x - max
   overflows to -inf), outputs far below FLT_MIN (subnormal, and 0 below
   the smallest), and rows of 20 so that a special sits in a full block
   and in the padded one. */
static void special_values(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { N = 20 };
    static const float rows[][N] = {
        {-INFINITY, 1, 2, -INFINITY, 0, 3, -INFINITY, -1, 5, 2, 1, 0, -2, -3, 4, 1, 2, -INFINITY, 0, 1},
        {1e30f, -1e30f, 1e30f, 0, 5, -5, 1e30f, -1e30f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1e30f},
        {FLT_MAX, -FLT_MAX, 0, 1, FLT_MAX, -FLT_MAX, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, -FLT_MAX},
        {0, -87, -88, -90, -95, -100, -102, -103, -103.5f, -104, -104.5f, -110, -200, -1, -2, -50, -86, -87.5f,
         -89, -101},
        {-5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5, -5},
    };
    float x[5 * N];
    memcpy(x, rows, sizeof x);
    check_rows(ctx, x, 5, N, "special values");
    vt_context_done(ctx);
}

/* What the double path gives, kept: NaN anywhere, every entry -inf, or a
   +inf entry make the whole row NaN (softmax and log_softmax), and a NaN
   row stays NaN whatever the block it falls in. */
static void nan_rows(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { R = 4, N = 18 };
    float x[R * N];
    vt_fill_uniform(x, R * N, -2.0f, 2.0f, 6);
    for (int j = 0; j < N; j++) x[j] = -INFINITY;
    x[N + 3] = NAN;
    x[2 * N + 17] = -NAN;
    x[3 * N + 5] = INFINITY;
    for (int lo = 0; lo < 2; lo++) {
        vf_scope_begin(ctx);
        vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, N}, x);
        float *got = vt_read(row_op(ctx, t, lo, -1));
        for (int i = 0; i < R * N; i++)
            if (!isnan(got[i])) fail_msg("%s: element %d is %g, want NaN", lo ? "log_softmax" : "softmax", i, got[i]);
        vf_scope_end(ctx);
        free(got);
    }
    /* and the double path (an f16 tensor) agrees on the row of -inf */
    vf_scope_begin(ctx);
    vf_tensor *h = vf_cast(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){1, N}, x), VF_F16);
    float *got = vt_read(vf_cast(ctx, vf_softmax(ctx, h, -1), VF_F32));
    for (int i = 0; i < N; i++) assert_true(isnan(got[i]));
    free(got);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* Sparse cross entropy of f32 logits: log(sum e^(x - max)) - (x[label] -
   max) in double, against the reference, on long and short rows with
   specials; a label out of range gives NaN. */
static void cross_entropy(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    static const int64_t widths[] = {10, 12, 17, 100000};
    for (size_t k = 0; k < sizeof widths / sizeof widths[0]; k++) {
        enum { R = 4 };
        int64_t n = widths[k];
        float *x = malloc((size_t)(R * n) * sizeof *x);
        assert_non_null(x);
        vt_fill_uniform(x, (size_t)(R * n), -20.0f, 20.0f, 7 + k);
        x[n] = 1e30f;      /* row 1: the max far above the rest */
        x[2 * n] = -INFINITY;
        int32_t labels[R] = {(int32_t)(n - 1), 0, 1, (int32_t)n};
        vf_scope_begin(ctx);
        vf_tensor *lg = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, n}, x);
        vf_tensor *lb = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){R}, labels);
        int64_t before = vf_cpu_fm_softmax_rows();
        float *got = vt_read(vf_sparse_softmax_cross_entropy(ctx, lb, lg));
        if (vf_cpu_fm_softmax_rows() - before != R - 1) /* the out-of-range label runs no row */
            fail_msg("cross entropy ran %lld float rows, want %d", (long long)(vf_cpu_fm_softmax_rows() - before), R - 1);
        for (int r = 0; r < R; r++) {
            const float *xr = x + r * n;
            if (labels[r] >= n) {
                assert_true(isnan(got[r]));
                continue;
            }
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < n; j++) m = xr[j] > m ? xr[j] : m;
            for (int64_t j = 0; j < n; j++) s += exp((double)xr[j] - m);
            double want = log(s) - ((double)xr[labels[r]] - m);
            if (!(fabs((double)got[r] - want) <= LOG_BOUND * fabs(want)))
                fail_msg("cross entropy, rows of %lld: row %d: got %.9g, want %.17g", (long long)n, r, got[r], want);
        }
        free(got);
        vf_scope_end(ctx);
        free(x);
    }
    vt_context_done(ctx);
}

/* vf_fm_expf over the floats in [-110, 0] (every 997th bit pattern, 2.4
   million): within 1.25 ulps of exp (2^-149 spacing below FLT_MIN), 0
   below -104 and at -inf, NaN through. */
static void float_exp(void **state)
{
    (void)state;
    double worst = 0;
    float at = 0;
    uint32_t last;
    float lim = -110.0f;
    memcpy(&last, &lim, sizeof last);
    for (uint32_t b = 0x80000000u; b <= last; b += 997) {
        float y;
        memcpy(&y, &b, sizeof y);
        double e = ulps(vf_fm_expf(y, 0.0f), exp((double)y));
        if (e > worst) {
            worst = e;
            at = y;
        }
    }
    if (worst > 1.25) fail_msg("vf_fm_expf: %.3f ulps at %.9g", worst, at);
    assert_true(vf_fm_expf(-INFINITY, NAN) == 0.0f);
    assert_true(vf_fm_expf(-104.5f, 0.0f) == 0.0f);
    assert_true(vf_fm_expf(0.0f, 0.0f) == 1.0f);
    assert_true(isnan(vf_fm_expf(NAN, 0.0f)));
    /* lo counts: e^(-20 + 1e-6) is not e^-20 */
    assert_true(ulps(vf_fm_expf(-20.0f, 1e-6f), exp(-20.0 + (double)1e-6f)) <= 1.25);
}

/* Eager softmax along a leading axis (strided rows) and on f16 stays on
   the double path: the counter does not move, the values still right. */
static void other_rows_stay_double(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    float x[6 * 5];
    vt_fill_uniform(x, 30, -3.0f, 3.0f, 8);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){6, 5}, x);
    int64_t before = vf_cpu_fm_softmax_rows();
    vf_tensor *a = vf_softmax(ctx, t, 0), *b = vf_log_softmax(ctx, vf_cast(ctx, t, VF_F16), -1);
    float *ga = vt_read(a), *gb = vt_read(vf_cast(ctx, b, VF_F32));
    assert_int_equal(vf_cpu_fm_softmax_rows(), before);
    for (int c = 0; c < 5; c++) {
        double m = -INFINITY, s = 0;
        for (int r = 0; r < 6; r++) m = fmax(m, x[r * 5 + c]);
        for (int r = 0; r < 6; r++) s += exp(x[r * 5 + c] - m);
        for (int r = 0; r < 6; r++) assert_true(fabs(ga[r * 5 + c] - exp(x[r * 5 + c] - m) / s) <= 1e-7);
    }
    assert_true(fabs(gb[0] - (double)gb[0]) == 0 && !isnan(gb[0]));
    free(ga);
    free(gb);
    vt_context_done(ctx);
}

/* softmax(x * 3) and log_softmax(x) of [40, 300] in a traced function:
   a fused row group on the CPU backend, which runs the same float rows
   (the counter moves) with eager's bits. */
static vf_status fused_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, vf_softmax(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 3.0)), -1), vf_log_softmax(ctx, in[0], -1));
    return out[0] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

static void fused_same_bits(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { R = 40, C = 300 };
    float *h = malloc(R * C * sizeof *h);
    assert_non_null(h);
    vt_fill_uniform(h, R * C, -4.0f, 4.0f, 9);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, h);
    vf_tensor *eager = NULL;
    assert_int_equal(fused_body(ctx, &x, &eager, NULL), VF_OK);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sm", .body = fused_body, .n_inputs = 1,
                                                                 .n_outputs = 1});
    assert_non_null(fn);
    vf_tensor *y = NULL;
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK); /* traces */
    int64_t before = vf_cpu_fm_softmax_rows();
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
    if (vf_cpu_fm_softmax_rows() - before < 2 * R)
        fail_msg("the traced call ran %lld float softmax rows, want %d", (long long)(vf_cpu_fm_softmax_rows() - before),
                 2 * R);
    float *gt = vt_read(y), *ge = vt_read(eager);
    vt_assert_same_f32(gt, ge, R * C, "traced vs eager");
    free(gt);
    free(ge);
    free(h);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* The rows split across 1 and 3 threads give the same bits (each row on
   one thread, computed as on one). */
static void thread_count(void **state)
{
    (void)state;
    enum { R = 600, C = 1000 };
    float *h = malloc(R * C * sizeof *h);
    assert_non_null(h);
    vt_fill_uniform(h, R * C, -10.0f, 10.0f, 10);
    float *got[2][2];
    for (int k = 0; k < 2; k++) {
        setenv("VKFUSE_THREADS", k ? "3" : "1", 1);
        vf_context *ctx = vt_context(VF_BACKEND_CPU);
        unsetenv("VKFUSE_THREADS");
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, h);
        for (int lo = 0; lo < 2; lo++) got[k][lo] = vt_read(row_op(ctx, x, lo, -1));
        vt_context_done(ctx);
    }
    for (int lo = 0; lo < 2; lo++) {
        vt_assert_same_f32(got[1][lo], got[0][lo], R * C, lo ? "log_softmax, 3 threads vs 1" : "softmax, 3 threads vs 1");
        free(got[0][lo]);
        free(got[1][lo]);
    }
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(long_rows),       cmocka_unit_test(short_rows),
        cmocka_unit_test(special_values),  cmocka_unit_test(nan_rows),
        cmocka_unit_test(cross_entropy),   cmocka_unit_test(float_exp),
        cmocka_unit_test(other_rows_stay_double), cmocka_unit_test(fused_same_bits),
        cmocka_unit_test(thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
