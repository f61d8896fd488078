/* The CPU backend's fast row paths. Its float rows (src/cpu/fast_math.c):
 * exp, tanh, sigmoid, gelu and rsqrt on f32, against the test's own
 * double references (libm) over the whole f32 range, specials included;
 * that eager ops and fused traced groups take them (the rows' run
 * counter), with the same bits both ways. The window ops' rows copied as
 * runs (kernels_window.c): slice, pad and concat against references
 * written here, the counter showing the path. Fused row groups run row by
 * row in one pass (cpu_rows.c): a composed layer norm, softmax,
 * log_softmax, last-axis reductions and their gradients traced, the same
 * bits as the unfused plan and as eager, the pass counter showing the
 * path; rows too long for one pass fall back to member by member. */
#include "cpu/cpu.h"
#include "cpu/cpu_fused.h"
#include "cpu/fast_math.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const vf_op fm_ops[] = {VF_OP_EXP, VF_OP_TANH, VF_OP_SIGMOID, VF_OP_GELU, VF_OP_LOG, VF_OP_SOFTPLUS, VF_OP_RSQRT};

/* The references, written out here (not the op table's functions). gelu
   as x / (1 + e^-2u), which equals 0.5 x (1 + tanh u) but does not cancel
   for x < -5.5, where the op table's double form is off by up to
   2^-53 / (1 + tanh u) relative (60 f32 ulps at x = -6). */
static double ref(vf_op op, double x)
{
    switch (op) {
    case VF_OP_EXP: return exp(x);
    case VF_OP_TANH: return tanh(x);
    case VF_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case VF_OP_GELU: return x / (1.0 + exp(-2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case VF_OP_LOG: return log(x);
    case VF_OP_SOFTPLUS: return (x > 0.0 ? x : 0.0) + log1p(exp(-fabs(x)));
    case VF_OP_RSQRT: return 1.0 / sqrt(x);
    default: fail_msg("no reference for op %d", (int)op);
    }
    return 0;
}

/* The rows' error bounds against the exact value, in f32 ulps of it
   (fast_math.c: the largest seen over every f32 input, rounded up). */
static double ulp_bound(vf_op op)
{
    switch (op) {
    case VF_OP_EXP: return 1.25;
    case VF_OP_TANH: return 0.9;
    case VF_OP_SIGMOID: return 0.65;
    case VF_OP_GELU: return 0.7;
    case VF_OP_LOG: return 0.6;
    case VF_OP_SOFTPLUS: return 0.65;
    default: return 0.5 + 0x1p-20; /* rsqrt: a double result rounded once */
    }
}

/* |got - exact| in ulps of exact (2^-149 below FLT_MIN); an exact value
   that rounds past FLT_MAX must give inf of its sign. */
static double err_ulps(float got, double exact)
{
    if (isinf(exact)) return (double)got == exact ? 0.0 : INFINITY;
    double a = fabs(exact);
    if (a >= 0x1p128 - 0x1p103) return isinf(got) && signbit(got) == signbit(exact) ? 0.0 : INFINITY;
    if (isinf(got)) return INFINITY;
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    double ulp = ldexp(1.0, e - 24);
    return fabs((double)got - exact) / (ulp < 0x1p-149 ? 0x1p-149 : ulp);
}

/* f32 values in one order of the integers: the distance is in ulps, +0
   and -0 one apart. */
static int64_t ordered(float f)
{
    int32_t i;
    memcpy(&i, &f, sizeof i);
    return i < 0 ? -(int64_t)(i & 0x7fffffff) - 1 : (int64_t)i;
}

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* got must be the reference rounded to f32, or one ulp from it, and
   within the op's bound of the exact value; NaN exactly where the
   reference is NaN. */
static void expect_ulp(vf_op op, float x, float got)
{
    float want = (float)ref(op, x);
    if (isnan(want) || isnan(got)) {
        if (isnan(want) != isnan(got))
            fail_msg("op %s x=%.9g: got %.9g want %.9g", vf_op_get(op)->name, x, got, want);
        return;
    }
    int64_t d = ordered(got) - ordered(want);
    if (d < -1 || d > 1)
        fail_msg("op %s x=%.9g (bits %08x): got %.9g want %.9g (%lld ulps)", vf_op_get(op)->name, x,
                 (unsigned)ordered(x), got, want, (long long)d);
    double u = err_ulps(got, ref(op, x));
    if (u > ulp_bound(op))
        fail_msg("op %s x=%.9g (bits %08x): got %.9g, %.3f ulps from the exact value (bound %.3g)",
                 vf_op_get(op)->name, x, (unsigned)ordered(x), got, u, ulp_bound(op));
}

/* Every 12289th bit pattern (both signs, every exponent: zeros, denormals,
   normals, infinities, NaNs), the specials written out, and the edges of
   each row's branches: within one ulp of the reference. Odd lengths and
   offsets reach the vector loops' tails; a == o is allowed. */
static void rows_within_an_ulp(void **state)
{
    (void)state;
    static const float special[] = {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-40f, -1e-40f, FLT_MIN, -FLT_MIN,
                                    FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN, -NAN, 1e-30f, -1e-30f,
                                    0.0625f, -0.0625f, 0.06249999f, 0.06250001f, 88.72283f, 88.72284f, 89.0f,
                                    -87.33654f, -103.97208f, -104.0f, -745.2f, 710.0f, -5.5f, -6.3f, -9.0f,
                                    -10.0f, -20.0f, 9.0f, 20.0f, 1.0f, -1.0f, 0.5f, 3.0f, 1e30f, -1e30f};
    enum { STEP = 12289 };
    size_t n = (size_t)(UINT64_C(1) << 32) / STEP + 1 + sizeof special / sizeof special[0];
    float *x = malloc((n + 1) * sizeof *x), *o = malloc((n + 1) * sizeof *o);
    assert_non_null(x);
    assert_non_null(o);
    size_t k = 1; /* x[0] unused: the rows start one element in */
    for (uint64_t b = 0; b < (UINT64_C(1) << 32); b += STEP) x[k++] = from_bits((uint32_t)b);
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[k++] = special[i];
    assert_int_equal(k, n + 1);
    for (size_t j = 0; j < sizeof fm_ops / sizeof fm_ops[0]; j++) {
        vf_op op = fm_ops[j];
        /* in pieces of odd lengths, out of place */
        for (size_t at = 1, len = 1; at <= n; at += len, len = len * 3 + 2) {
            size_t m = at + len <= n + 1 ? len : n + 1 - at;
            vf_cpu_fm_row(op, x + at, o + at, (int64_t)m);
        }
        for (size_t i = 1; i <= n; i++) expect_ulp(op, x[i], o[i]);
        /* in place: the same bits */
        float *y = malloc((n + 1) * sizeof *y);
        assert_non_null(y);
        memcpy(y, x, (n + 1) * sizeof *y);
        vf_cpu_fm_row(op, y + 1, y + 1, (int64_t)n);
        assert_memory_equal(y + 1, o + 1, n * sizeof *y);
        free(y);
    }
    free(x);
    free(o);
}

/* tanh and gelu where libm's result is known to the last bit: odd
   symmetry, saturation and the small-argument series. */
static void rows_spot_values(void **state)
{
    (void)state;
    const float x[] = {0.0f, -0.0f, 1e-20f, -1e-20f, 30.0f, -30.0f, -INFINITY, INFINITY};
    float t[8], g[8];
    vf_cpu_fm_row(VF_OP_TANH, x, t, 8);
    vf_cpu_fm_row(VF_OP_GELU, x, g, 8);
    assert_true(t[0] == 0.0f && !signbit(t[0]));
    assert_true(t[1] == 0.0f && signbit(t[1]));
    assert_true(t[2] == 1e-20f && t[3] == -1e-20f);
    assert_true(t[4] == 1.0f && t[5] == -1.0f && t[6] == -1.0f && t[7] == 1.0f);
    assert_true(g[4] == 30.0f && g[5] == 0.0f && isnan(g[6]) && g[7] == INFINITY);
}

/* vf_fm_exp_wide (sigmoid's and gelu's exponential): relative error
   below 0.25 * 2^-24 (0.18 seen) over [-150, 89], at every 12289th f32
   in it and on a grid of double arguments (gelu passes -2|u| unrounded);
   0 below -150, the clamp above, NaN through. */
static void exp_wide_within_bound(void **state)
{
    (void)state;
    double worst = 0, at = 0;
    for (uint64_t b = 0; b < (UINT64_C(1) << 32); b += 12289) {
        double y = from_bits((uint32_t)b);
        if (!(y >= -150.0 && y <= 89.0)) continue;
        double r = fabs(vf_fm_exp_wide(y) - exp(y)) / exp(y);
        if (r > worst) worst = r, at = y;
    }
    for (double y = -150.0; y <= 89.0; y += 0.000731) {
        double r = fabs(vf_fm_exp_wide(y) - exp(y)) / exp(y);
        if (r > worst) worst = r, at = y;
    }
    if (worst > 0.25 * 0x1p-24)
        fail_msg("vf_fm_exp_wide(%.17g): relative error %.3g * 2^-24, bound 0.25", at, worst / 0x1p-24);
    assert_true(vf_fm_exp_wide(-150.5) == 0.0 && vf_fm_exp_wide(-INFINITY) == 0.0);
    assert_true(vf_fm_exp_wide(1e300) == vf_fm_exp_wide(89.0) && isnan(vf_fm_exp_wide(NAN)));
}

/* The rows are the float formulas fast_math.c states, bit for bit: exp is
   vf_fm_expf, tanh above 0.625 (1 - e) / (1 + e) with a float e. (A
   double evaluation rounded once differs in some of these elements.) */
static void rows_are_the_float_formulas(void **state)
{
    (void)state;
    enum { N = 4096 };
    float x[N], e[N], t[N];
    vt_fill_uniform(x, N, -12.0f, 12.0f, 5);
    vf_cpu_fm_row(VF_OP_EXP, x, e, N);
    vf_cpu_fm_row(VF_OP_TANH, x, t, N);
    for (int i = 0; i < N; i++) {
        float want = vf_fm_expf(x[i], 0.0f);
        if (memcmp(&e[i], &want, sizeof want))
            fail_msg("exp(%.9g): %.9g, vf_fm_expf gives %.9g", x[i], e[i], want);
        if (fabsf(x[i]) < 0.625f) continue;
        double f = vf_fm_expf(-2.0f * fabsf(x[i]), 0.0f);
        want = copysignf((float)((1.0 - f) / (1.0 + f)), x[i]);
        if (memcmp(&t[i], &want, sizeof want))
            fail_msg("tanh(%.9g): %.9g, the float formula gives %.9g", x[i], t[i], want);
    }
}

/* ---- the paths that take the rows ------------------------------------------------ */

static vf_tensor *apply(vf_context *ctx, vf_op op, vf_tensor *x)
{
    switch (op) {
    case VF_OP_EXP: return vf_exp(ctx, x);
    case VF_OP_TANH: return vf_tanh(ctx, x);
    case VF_OP_SIGMOID: return vf_sigmoid(ctx, x);
    case VF_OP_GELU: return vf_gelu(ctx, x);
    case VF_OP_LOG: return vf_log(ctx, x);
    case VF_OP_SOFTPLUS: return vf_softplus(ctx, x);
    default: return vf_rsqrt(ctx, x);
    }
}

/* Eager ops on the CPU backend, a tensor and a single element (its value
   spread), run the rows: the counter moves, the values are the
   reference's. */
static void eager_ops_take_the_rows(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { N = 1000 };
    float h[N];
    vt_fill_uniform(h, N, -6.0f, 6.0f, 7);
    for (size_t j = 0; j < sizeof fm_ops / sizeof fm_ops[0]; j++) {
        vf_scope_begin(ctx);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, h);
        vf_tensor *x1 = vf_tensor_from_host(ctx, VF_F32, 0, NULL, h);
        int64_t before = vf_cpu_fm_rows();
        vf_tensor *y = apply(ctx, fm_ops[j], x), *y1 = apply(ctx, fm_ops[j], x1);
        float *got = vt_read(y), *got1 = vt_read(y1);
        if (vf_cpu_fm_rows() < before + 2)
            fail_msg("eager %s on the CPU backend did not run fast_math.c's rows", vf_op_get(fm_ops[j])->name);
        for (int i = 0; i < N; i++) expect_ulp(fm_ops[j], h[i], got[i]);
        assert_memory_equal(got1, got, sizeof *got);
        free(got);
        free(got1);
        vf_scope_end(ctx);
    }
    vt_context_done(ctx);
}

/* gelu(x * 2 + 1) * tanh(x) - sigmoid(x) * exp(x) + rsqrt(x * x + 1)
   + log(x * x + 1) - softplus(x): one fused elementwise group on the CPU
   backend. */
static vf_status fused_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tensor *a = vf_mul(ctx, vf_gelu(ctx, vf_add(ctx, vf_mul(ctx, x, vt_scalar(ctx, 2.0)), vt_scalar(ctx, 1.0))),
                          vf_tanh(ctx, x));
    vf_tensor *b = vf_mul(ctx, vf_sigmoid(ctx, x), vf_exp(ctx, x));
    vf_tensor *q = vf_add(ctx, vf_mul(ctx, x, x), vt_scalar(ctx, 1.0));
    out[0] = vf_sub(ctx, vf_add(ctx, vf_add(ctx, vf_sub(ctx, a, b), vf_rsqrt(ctx, q)), vf_log(ctx, q)),
                    vf_softplus(ctx, x));
    return out[0] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

/* The fused pass (cpu_fused.c) takes the rows too, and its result is the
   eager ops' bit for bit (shape 3 x 700: rows of the pass cut into chunks
   with a tail). */
static void fused_group_takes_the_rows(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { R = 3, C = 700 };
    float h[R * C];
    vt_fill_uniform(h, R * C, -5.0f, 5.0f, 11);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, h);
    vf_tensor *eager = NULL;
    assert_int_equal(fused_body(ctx, &x, &eager, NULL), VF_OK);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "fm", .body = fused_body, .n_inputs = 1,
                                                                 .n_outputs = 1});
    assert_non_null(fn);
    vf_tensor *y = NULL;
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK); /* traces */
    int64_t before = vf_cpu_fm_rows();
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
    int64_t rows = vf_cpu_fm_rows() - before;
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    if (st.kernels != 1) fail_msg("the body ran as %d kernels, not one fused pass", st.kernels);
    /* seven ops, each over every chunk of 256 in each row of 700 */
    if (rows < 7 * R * 3)
        fail_msg("the fused pass ran %lld fast rows, want at least %d", (long long)rows, 7 * R * 3);
    float *gt = vt_read(y), *ge = vt_read(eager);
    vt_assert_same_f32(gt, ge, R * C, "fused vs eager");
    free(gt);
    free(ge);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* 256 ops (add, mul, tanh, exp in turn; a scalar made in the body, the
   chain's first value read again at the end, a second output midway):
   one pass on the CPU backend, past the Vulkan code generator's 64
   members (cpu_fused.h), its values sharing a few chunk temporaries. */
static vf_status long_chain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = vf_add(ctx, in[0], vt_scalar(ctx, 0.25)), *first = h;
    for (int i = 0; i < 256; i++) {
        switch (i % 4) {
        case 0: h = vf_add(ctx, h, in[1]); break;
        case 1: h = vf_mul(ctx, h, vt_scalar(ctx, 0.5)); break;
        case 2: h = vf_tanh(ctx, h); break;
        default: h = vf_exp(ctx, h); break;
        }
        if (i == 101) out[1] = h;
    }
    out[0] = vf_sub(ctx, h, first);
    return out[0] && out[1] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

static void long_chain_one_pass(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    enum { R = 5, C = 300 };
    float h[R * C], a[R * C];
    vt_fill_uniform(h, R * C, -2.0f, 2.0f, 21);
    vt_fill_uniform(a, R * C, 0.0f, 1.0f, 22);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, h),
                        vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, a)};
    vf_tensor *eager[2] = {NULL, NULL}, *y[2] = {NULL, NULL};
    assert_int_equal(long_chain(ctx, in, eager, NULL), VF_OK);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "long", .body = long_chain,
                                                                   .n_inputs = 2, .n_outputs = 2});
    assert_non_null(fn);
    assert_int_equal(vf_function_call(fn, in, y), VF_OK);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    if (st.kernels != 1) fail_msg("the 258-op chain ran as %d kernels, not one fused pass", st.kernels);
    for (int k = 0; k < 2; k++) {
        float *gt = vt_read(y[k]), *ge = vt_read(eager[k]);
        vt_assert_same_f32(gt, ge, R * C, k ? "midway output, fused vs eager" : "fused vs eager");
        free(gt);
        free(ge);
    }
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- window rows as runs --------------------------------------------------------- */

static void expect_f32(vf_tensor *t, const float *want, int64_t n, const char *what)
{
    assert_int_equal(vf_tensor_numel(t), n);
    float *got = vt_read(t);
    vt_assert_same_f32(got, want, (size_t)n, what);
    free(got);
}

/* x [5, 7] = 0..34, y [5, 3] = 100..114: pad (fill on both sides of the
   last dim and above), concat on either axis, a column slice (runs), and a
   step-2 slice (element by element) against loops written here. */
static void window_rows_as_runs(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    float hx[35], hy[15], want[120];
    for (int i = 0; i < 35; i++) hx[i] = (float)i;
    for (int i = 0; i < 15; i++) hy[i] = (float)(100 + i);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){5, 7}, hx);
    vf_tensor *y = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){5, 3}, hy);
    int64_t before = vf_cpu_window_runs();

    vf_tensor *p = vf_pad(ctx, x, (int64_t[]){1, 2}, (int64_t[]){0, 3}, -1.0); /* [6, 12] */
    for (int r = 0; r < 6; r++)
        for (int c = 0; c < 12; c++)
            want[r * 12 + c] = r >= 1 && c >= 2 && c < 9 ? hx[(r - 1) * 7 + c - 2] : -1.0f;
    expect_f32(p, want, 72, "pad");

    vf_tensor *c1 = vf_concat(ctx, 2, (vf_tensor *[]){x, y}, 1); /* [5, 10] */
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 10; c++) want[r * 10 + c] = c < 7 ? hx[r * 7 + c] : hy[r * 3 + c - 7];
    expect_f32(c1, want, 50, "concat on the last axis");

    vf_tensor *c0 = vf_concat(ctx, 2, (vf_tensor *[]){x, x}, 0); /* [10, 7] */
    for (int i = 0; i < 70; i++) want[i] = hx[i % 35];
    expect_f32(c0, want, 70, "concat on axis 0");

    vf_tensor *s = vf_slice(ctx, x, (int64_t[]){1, 2}, (int64_t[]){4, 6}, NULL); /* [3, 4] */
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) want[r * 4 + c] = hx[(r + 1) * 7 + c + 2];
    expect_f32(s, want, 12, "column slice");
    int64_t runs = vf_cpu_window_runs() - before;
    if (runs < 4) fail_msg("%lld of the 4 unit-step window calls copied runs", (long long)runs);

    vf_tensor *s2 = vf_slice(ctx, x, (int64_t[]){0, 0}, (int64_t[]){5, 7}, (int64_t[]){1, 2}); /* [5, 4] */
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 4; c++) want[r * 4 + c] = hx[r * 7 + 2 * c];
    expect_f32(s2, want, 20, "step-2 slice");
    vt_context_done(ctx);
}

/* ---- row groups in one pass ------------------------------------------------------------ */

static vf_tensor *layer_norm(vf_context *ctx, vf_tensor *x, vf_tensor *g, vf_tensor *b)
{
    vf_tensor *c = vf_sub(ctx, x, vf_reduce_mean(ctx, x, 1, (int[]){-1}, true));
    vf_tensor *var = vf_reduce_mean(ctx, vf_square(ctx, c), 1, (int[]){-1}, true);
    vf_tensor *n = vf_mul(ctx, c, vf_rsqrt(ctx, vf_add(ctx, var, vt_scalar(ctx, 1e-5))));
    return vf_add(ctx, vf_mul(ctx, n, g), b);
}

/* in: x [B, T, C], g [C], b [C], w [B, T, C]. out: the layer norm, a
   softmax and log_softmax mix, x minus its row max over its row min, and
   the gradients of sum((ln + softmax) * w) by x and g. */
static vf_status rows_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *g = in[1], *b = in[2], *w = in[3];
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *ln = layer_norm(ctx, x, g, b);
    vf_tensor *sm = vf_softmax(ctx, vf_mul(ctx, ln, vt_scalar(ctx, 3.0)), -1);
    vf_tensor *loss = vt_sum(ctx, vf_mul(ctx, vf_add(ctx, ln, sm), w));
    vf_tensor *grads[2] = {NULL, NULL};
    vf_status s = vf_tape_gradient(tape, loss, 2, (vf_tensor *[]){x, g}, grads);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    out[0] = ln;
    out[1] = vf_add(ctx, sm, vf_log_softmax(ctx, x, -1));
    out[2] = vf_div(ctx, vf_sub(ctx, x, vf_reduce_max(ctx, x, 1, (int[]){-1}, true)),
                    vf_sub(ctx, vt_scalar(ctx, 1.0), vf_reduce_min(ctx, x, 1, (int[]){-1}, true)));
    out[3] = grads[0];
    out[4] = grads[1];
    return VF_OK;
}

/* The body on x [4, 5, C] traced fused and unfused and run eagerly: the
   same bits everywhere, and row passes ran when wanted (C <= 256: one
   pass; C = 300: member by member). */
static void check_rows(vf_context *ctx, int64_t C, bool want_pass)
{
    enum { B = 4, T = 5, NOUT = 5 };
    float *hx = malloc((size_t)(B * T * C) * sizeof *hx), *hw = malloc((size_t)(B * T * C) * sizeof *hw);
    float *hg = malloc((size_t)C * sizeof *hg), *hb = malloc((size_t)C * sizeof *hb);
    assert_true(hx && hw && hg && hb);
    vt_fill_uniform(hx, (size_t)(B * T * C), -3.0f, 3.0f, 21);
    vt_fill_uniform(hw, (size_t)(B * T * C), -1.0f, 1.0f, 22);
    vt_fill_uniform(hg, (size_t)C, 0.5f, 1.5f, 23);
    vt_fill_uniform(hb, (size_t)C, -0.5f, 0.5f, 24);
    vf_scope_begin(ctx);
    vf_tensor *in[4] = {vf_tensor_from_host(ctx, VF_F32, 3, (int64_t[]){B, T, C}, hx),
                        vf_tensor_from_host(ctx, VF_F32, 1, &C, hg), vf_tensor_from_host(ctx, VF_F32, 1, &C, hb),
                        vf_tensor_from_host(ctx, VF_F32, 3, (int64_t[]){B, T, C}, hw)};
    vf_tensor *eager[NOUT] = {0}, *fused[NOUT] = {0}, *unfused[NOUT] = {0};
    assert_int_equal(rows_body(ctx, in, eager, NULL), VF_OK);
    vf_function *ff = vf_function_create(ctx, &(vf_function_desc){.name = "rows", .body = rows_body, .n_inputs = 4,
                                                                 .n_outputs = NOUT});
    vf_function *fu = vf_function_create(ctx, &(vf_function_desc){.name = "rows_unfused", .body = rows_body,
                                                                 .n_inputs = 4, .n_outputs = NOUT, .unfused = true});
    assert_non_null(ff);
    assert_non_null(fu);
    assert_int_equal(vf_function_call(ff, in, fused), VF_OK); /* traces */
    int64_t before = vf_cpu_rows_passes();
    assert_int_equal(vf_function_call(ff, in, fused), VF_OK);
    int64_t fused_passes = vf_cpu_rows_passes() - before;
    before = vf_cpu_rows_passes();
    assert_int_equal(vf_function_call(fu, in, unfused), VF_OK);
    assert_int_equal(vf_cpu_rows_passes() - before, 0);
    if (want_pass && fused_passes < 3)
        fail_msg("C=%lld: %lld row groups ran in one pass, want the forward's and the gradient's (>= 3)",
                 (long long)C, (long long)fused_passes);
    if (!want_pass && fused_passes != 0)
        fail_msg("C=%lld: rows too long ran %lld passes", (long long)C, (long long)fused_passes);
    for (int k = 0; k < NOUT; k++) {
        char what[64];
        size_t n = (size_t)vf_tensor_numel(eager[k]);
        float *ge = vt_read(eager[k]), *gf = vt_read(fused[k]), *gu = vt_read(unfused[k]);
        snprintf(what, sizeof what, "C=%lld output %d: fused vs unfused", (long long)C, k);
        vt_assert_same_f32(gf, gu, n, what);
        snprintf(what, sizeof what, "C=%lld output %d: fused vs eager", (long long)C, k);
        vt_assert_same_f32(gf, ge, n, what);
        free(ge), free(gf), free(gu);
    }
    vf_function_destroy(ff);
    vf_function_destroy(fu);
    vf_scope_end(ctx);
    free(hx), free(hw), free(hg), free(hb);
}

static void row_groups_in_one_pass(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    check_rows(ctx, 24, true);
    check_rows(ctx, 7, true);   /* odd: no whole vector of a row; all 20 rows one block */
    check_rows(ctx, 40, true);  /* blocks of 6 rows and a last one of 2 */
    check_rows(ctx, 256, true); /* the longest row of one pass */
    check_rows(ctx, 300, false);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rows_within_an_ulp),
        cmocka_unit_test(rows_spot_values),
        cmocka_unit_test(exp_wide_within_bound),
        cmocka_unit_test(rows_are_the_float_formulas),
        cmocka_unit_test(eager_ops_take_the_rows),
        cmocka_unit_test(fused_group_takes_the_rows),
        cmocka_unit_test(long_chain_one_pass),
        cmocka_unit_test(window_rows_as_runs),
        cmocka_unit_test(row_groups_in_one_pass),
    };
    return vt_run_group("cpu_rows", tests, sizeof tests / sizeof tests[0]);
}
