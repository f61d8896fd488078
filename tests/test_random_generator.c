/* Generators (issue 13 item 5): vf_generator_create / _uniform / _normal,
 * vf_dropout.
 *
 * - values: a call sequence (uniform and normal, f32 and f16, odd sizes)
 *   on each backend against a host reference written here from the
 *   specification in src/util/philox.h (counter (k, 0, d_lo, d_hi), key
 *   seed; uniforms bit for bit, normals in double to atol 2e-5 / f16 to
 *   1e-3 relative); draw 0's normals equal vf_random_normal(seed).
 * - traced: a vf_function that draws gives new numbers at every call
 *   (the bug of a host seed), equal to the eager sequence of the same
 *   seed, and eager draws after it continue the sequence; two draws in one
 *   body are ordered.
 * - backends: the same traced + eager sequence with dropout on the CPU
 *   backend and on Vulkan: uniforms and dropout bit for bit.
 * - statistics: 2^18 uniforms in [0, 1) (f16: below 1 too) and normals
 *   (VKFUSE_GENERATOR_DRAWS=<n> for more), mean and variance within 6
 *   standard errors.
 * - dropout: kept fraction, the scale, the expectation, rate 0 (x, no
 *   draw), f16; its gradient mask * dy / (1 - rate) exactly, eager and
 *   traced.
 * - save / load: a loaded function continues the saved state.
 * - the 64-bit draw number: RNG_ADVANCE carries into the high word and a
 *   draw reads it (the backends' kernels run directly on a state past
 *   2^32, which no test could reach by drawing).
 * - control flow: a draw in a vf_cond branch advances the state only when
 *   the branch is taken (traced).
 * - limits: under 8 workgroups per dispatch the kernels stride over more
 *   workgroups (eager and traced) and still give the reference.
 * - errors: rates, dtypes, NULL / destroyed / foreign generators, creation
 *   while tracing; empty draws advance the state. */
#include "api/api.h"
#include "limits_common.h"
#include "testutil.h"
#include "util/dtype.h"
#include "util/philox.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SEED 0x0123456789abcdefull

/* ---- the host reference -------------------------------------------------- */

/* Element i of draw d of seed: uniform (f32: 24 bits, f16: 11) or normal
   (Box-Muller in double on the block's first two words). */
static double ref_elem(uint64_t seed, uint64_t d, bool uniform, vf_dtype dt, int64_t i)
{
    int64_t per = uniform ? 4 : 2;
    uint64_t k = (uint64_t)(i / per);
    uint32_t ctr[4] = {(uint32_t)k, (uint32_t)(k >> 32), (uint32_t)d, (uint32_t)(d >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)}, r[4];
    vf_philox4x32_10(ctr, key, r);
    int j = (int)(i % per);
    if (uniform) return dt == VF_F32 ? (r[j] >> 8) / 16777216.0 : (r[j] >> 21) / 2048.0;
    double u1 = ((r[0] >> 8) + 1u) / 16777216.0, u2 = (r[1] >> 8) / 16777216.0;
    double rad = sqrt(-2.0 * log(u1)), th = 2.0 * M_PI * u2;
    return j == 0 ? rad * cos(th) : rad * sin(th);
}

/* t's elements as floats (f32 or f16). */
static float *read_f(vf_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < vf_tensor_rank(t); d++) n *= vf_tensor_dim(t, d);
    void *raw = vt_read(t);
    float *f = malloc(sizeof *f * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        f[i] = vf_tensor_dtype(t) == VF_F32 ? ((float *)raw)[i] : vf_f16_to_f32(((uint16_t *)raw)[i]);
    free(raw);
    return f;
}

static int64_t numel_of(vf_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < vf_tensor_rank(t); d++) n *= vf_tensor_dim(t, d);
    return n;
}

/* t is draw d of seed: uniforms exact, normals within the tolerance. */
static void check_draw(vf_tensor *t, uint64_t seed, uint64_t d, bool uniform, const char *what)
{
    assert_non_null(t);
    vf_dtype dt = vf_tensor_dtype(t);
    int64_t n = numel_of(t);
    float *got = read_f(t);
    for (int64_t i = 0; i < n; i++) {
        double want = ref_elem(seed, d, uniform, dt, i);
        if (uniform) want = dt == VF_F32 ? want : vf_f16_to_f32(vf_f32_to_f16((float)want));
        double tol = uniform ? 0 : dt == VF_F32 ? 2e-5 + 1e-5 * fabs(want) : 1e-3 * (1 + fabs(want));
        if (!(fabs(got[i] - want) <= tol))
            fail_msg("%s: draw %llu element %lld is %.9g, want %.9g", what, (unsigned long long)d, (long long)i,
                     got[i], want);
    }
    free(got);
}

/* ---- values -------------------------------------------------------------- */

static void values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, SEED);
    assert_non_null(g);
    vf_scope_begin(ctx);
    check_draw(vf_generator_uniform(ctx, g, VF_F32, 2, (int64_t[]){37, 29}), SEED, 0, true, "uniform f32");
    check_draw(vf_generator_normal(ctx, g, VF_F32, 1, (int64_t[]){1001}), SEED, 1, false, "normal f32");
    check_draw(vf_generator_uniform(ctx, g, VF_F16, 1, (int64_t[]){1023}), SEED, 2, true, "uniform f16");
    check_draw(vf_generator_normal(ctx, g, VF_F16, 0, NULL), SEED, 3, false, "normal f16 scalar");
    check_draw(vf_generator_uniform(ctx, g, VF_F32, 3, (int64_t[]){3, 1, 2}), SEED, 4, true, "uniform rank 3");
    vf_scope_end(ctx);
    /* draw 0 of normals is vf_random_normal's stream of the seed */
    vf_generator *h = vf_generator_create(ctx, 42);
    float *a = read_f(vf_generator_normal(ctx, h, VF_F32, 1, (int64_t[]){513}));
    float *r = read_f(vf_random_normal(ctx, VF_F32, 1, (int64_t[]){513}, 42));
    vt_assert_equal_bytes(a, r, sizeof(float) * 513, "draw 0 vs vf_random_normal");
    free(a), free(r);
    vf_generator_destroy(h);
    vf_generator_destroy(g);
    vt_context_done(ctx);
}
VT_PER_BACKEND(values)

/* ---- traced -------------------------------------------------------------- */

typedef struct {
    vf_generator *g;
    int64_t n;
} body_user;

/* out[0] uniform [n], out[1] normal [n]: draws d and d + 1 of a call */
static vf_status two_draws(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)in;
    body_user *u = user;
    out[0] = vf_generator_uniform(ctx, u->g, VF_F32, 1, &u->n);
    out[1] = vf_generator_normal(ctx, u->g, VF_F32, 1, &u->n);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void traced(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    body_user u = {vf_generator_create(ctx, SEED), 301};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "draws", .body = two_draws,
                                                                 .user = &u, .n_outputs = 2});
    for (uint64_t call = 0; call < 3; call++) {
        vf_tensor *out[2] = {0};
        assert_int_equal(vf_function_call(fn, NULL, out), VF_OK);
        /* call c draws 2c and 2c + 1: new numbers at every call */
        check_draw(out[0], SEED, 2 * call, true, "traced uniform");
        check_draw(out[1], SEED, 2 * call + 1, false, "traced normal");
        vf_tensor_release(out[0]), vf_tensor_release(out[1]);
    }
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    assert_int_equal(st.traces, 1); /* the numbers changed without a retrace */
    /* eager draws continue the sequence the calls advanced */
    check_draw(vf_generator_uniform(ctx, u.g, VF_F32, 1, (int64_t[]){9}), SEED, 6, true, "eager after traced");
    vf_tensor *out[2] = {0};
    assert_int_equal(vf_function_call(fn, NULL, out), VF_OK);
    check_draw(out[0], SEED, 7, true, "traced after eager");
    vf_function_destroy(fn);
    vf_generator_destroy(u.g);
    vt_context_done(ctx);
}
VT_PER_BACKEND(traced)

/* ---- the same numbers on both backends ------------------------------------ */

static vf_status drop_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_dropout(ctx, user, in[0], 0.25);
    out[1] = vf_generator_uniform(ctx, user, VF_F16, 1, (int64_t[]){77});
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* Eager and traced draws with dropout, all outputs as bytes in order. */
static void sequence(vf_backend b, void **bytes, size_t *sizes, int *n)
{
    vf_context *ctx = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, 7);
    const vf_tensor_spec sig = {VF_F32, 2, {-1, 33}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "drop", .body = drop_body, .user = g,
                                                                 .n_inputs = 1, .n_outputs = 2,
                                                                 .input_signature = &sig});
    *n = 0;
    for (int step = 0; step < 3; step++) {
        int64_t rows = 5 + step; /* a symbolic batch: the mask follows x */
        float *xd = malloc(sizeof *xd * (size_t)(rows * 33));
        vt_fill_uniform(xd, (size_t)(rows * 33), 0.5f, 2, 11 + (uint64_t)step);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){rows, 33}, xd);
        free(xd);
        vf_tensor *t[4] = {0};
        assert_int_equal(vf_function_call(fn, &x, t), VF_OK);
        t[2] = vf_dropout(ctx, g, x, 0.5);
        t[3] = vf_generator_uniform(ctx, g, VF_F32, 1, (int64_t[]){1000});
        for (int k = 0; k < 4; k++) {
            assert_non_null(t[k]);
            sizes[*n] = (size_t)numel_of(t[k]) * (vf_tensor_dtype(t[k]) == VF_F16 ? 2 : 4);
            bytes[(*n)++] = vt_read(t[k]);
            vf_tensor_release(t[k]);
        }
        vf_tensor_release(x);
    }
    vf_function_destroy(fn);
    vf_generator_destroy(g);
    vt_context_done(ctx);
}

static void test_backends_agree(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    void *c[12], *v[12];
    size_t sc[12], sv[12];
    int nc, nv;
    sequence(VF_BACKEND_CPU, c, sc, &nc);
    sequence(VF_BACKEND_VULKAN, v, sv, &nv);
    assert_int_equal(nc, nv);
    for (int i = 0; i < nc; i++) {
        assert_int_equal(sc[i], sv[i]);
        char what[64];
        snprintf(what, sizeof what, "output %d of the sequence, Vulkan vs CPU", i);
        vt_assert_equal_bytes(v[i], c[i], sc[i], what);
        free(c[i]), free(v[i]);
    }
}

/* ---- statistics ------------------------------------------------------------ */

static void statistics(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, 2026);
    const int64_t n = vt_env_long("VKFUSE_GENERATOR_DRAWS", 1 << 18); /* more: tighter bounds, slower */
    for (int k = 0; k < 3; k++) {
        vf_dtype dt = k == 1 ? VF_F16 : VF_F32;
        bool uni = k < 2;
        vf_tensor *t = uni ? vf_generator_uniform(ctx, g, dt, 1, &n) : vf_generator_normal(ctx, g, dt, 1, &n);
        float *x = read_f(t);
        vf_tensor_release(t);
        double s = 0, s2 = 0;
        for (int64_t i = 0; i < n; i++) {
            if (uni && !(x[i] >= 0.0f && x[i] < 1.0f)) fail_msg("uniform %d element %lld is %g", k, (long long)i, x[i]);
            s += x[i];
        }
        double mean = s / (double)n;
        for (int64_t i = 0; i < n; i++) s2 += (x[i] - mean) * (x[i] - mean);
        double var = s2 / (double)(n - 1);
        /* uniform: mean 1/2 (f16: 1/2 - 2^-12, its 11-bit grid), var 1/12, 4th central moment 1/80;
           normal: 0, 1, 3 */
        double m = uni ? (dt == VF_F16 ? 0.5 - 1.0 / 4096 : 0.5) : 0, v = uni ? 1.0 / 12 : 1, m4 = uni ? 1.0 / 80 : 3;
        double se_m = sqrt(v / (double)n), se_v = sqrt((m4 - v * v) / (double)n);
        if (fabs(mean - m) > 6 * se_m || fabs(var - v) > 6 * se_v + (uni && dt == VF_F16 ? 1e-6 : 0))
            fail_msg("draw %d: mean %.6f (want %.6f +- %.6f), var %.6f (want %.6f +- %.6f)", k, mean, m, 6 * se_m,
                     var, v, 6 * se_v);
        free(x);
    }
    vf_generator_destroy(g);
    vt_context_done(ctx);
}
VT_PER_BACKEND(statistics)

/* ---- dropout --------------------------------------------------------------- */

static void dropout_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, 5);
    const int64_t n = 200000;
    float *xd = malloc(sizeof *xd * (size_t)n);
    vt_fill_uniform(xd, (size_t)n, 1, 3, 3);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, &n, xd);
    /* rate 0: x itself, and nothing drawn (the next draw is draw 0) */
    float *y0 = read_f(vf_dropout(ctx, g, x, 0.0));
    vt_assert_equal_bytes(y0, xd, sizeof(float) * (size_t)n, "dropout rate 0");
    free(y0);
    const double rates[2] = {0.3, 0.9};
    for (int r = 0; r < 2; r++) {
        double rate = rates[r];
        float *y = read_f(vf_dropout(ctx, g, x, rate));
        /* the mask is draw r's f32 uniforms: u >= rate keeps */
        float scale = (float)(1.0 / (1.0 - rate));
        int64_t kept = 0;
        double sx = 0, sy = 0;
        for (int64_t i = 0; i < n; i++) {
            bool keep = ref_elem(5, (uint64_t)r, true, VF_F32, i) >= (float)rate;
            float want = keep ? xd[i] * scale : 0.0f;
            if (y[i] != want) fail_msg("rate %g element %lld: %g, want %g", rate, (long long)i, y[i], want);
            kept += keep;
            sx += xd[i], sy += y[i];
        }
        double p = 1 - rate, se = sqrt(p * (1 - p) / (double)n);
        if (fabs((double)kept / (double)n - p) > 6 * se) fail_msg("rate %g kept %lld of %lld", rate, (long long)kept, (long long)n);
        /* E[y] = E[x]: the mean of y within 6 standard errors of x's (x <= 3) */
        double sem = 3 * sqrt((1 - p) / p / (double)n);
        if (fabs(sy / (double)n - sx / (double)n) > 6 * sem) fail_msg("rate %g: mean %g vs x's %g", rate, sy / n, sx / n);
        free(y);
    }
    /* f16 x: the same mask (draw 2's f32 uniforms), scale rounded to f16 */
    vf_tensor *xh = vf_cast(ctx, x, VF_F16);
    float *yh = read_f(vf_dropout(ctx, g, xh, 0.5)), *xr = read_f(xh);
    for (int64_t i = 0; i < n; i++) {
        bool keep = ref_elem(5, 2, true, VF_F32, i) >= 0.5f;
        float want = keep ? vf_f16_to_f32(vf_f32_to_f16(xr[i] * 2.0f)) : 0.0f;
        if (yh[i] != want) fail_msg("f16 element %lld: %g, want %g", (long long)i, yh[i], want);
    }
    free(yh), free(xr), free(xd);
    vf_tensor_release(xh);
    vf_tensor_release(x);
    vf_generator_destroy(g);
    vt_context_done(ctx);
}
VT_PER_BACKEND(dropout_values)

/* loss = sum(dropout(x) * w); dL/dx = mask * w / (1 - rate), where the mask
   is where the output is not 0 (x has no zeros). */
static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_dropout(ctx, user, in[0], 0.4);
    vf_tensor *loss = vt_sum(ctx, vf_mul(ctx, y, in[1]));
    vf_status s = vf_tape_gradient(tp, loss, 1, &in[0], &out[1]);
    vf_tape_end(tp);
    out[0] = y;
    return s;
}

static void check_grad(vf_tensor *y, vf_tensor *dx, const float *w, int64_t n, const char *what)
{
    float *yv = read_f(y), *gv = read_f(dx);
    float scale = (float)(1.0 / (1.0 - 0.4));
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = yv[i] != 0 ? w[i] * scale : 0.0f;
        kept += yv[i] != 0;
        if (gv[i] != want) fail_msg("%s: dx[%lld] = %g, want %g", what, (long long)i, gv[i], want);
    }
    assert_true(kept > 0 && kept < n); /* both kinds of element are checked */
    free(yv), free(gv);
}

static void dropout_gradient(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const int64_t n = 4000;
    float xd[4000], w[4000];
    vt_fill_uniform(xd, n, 0.5f, 1.5f, 1);
    vt_fill_uniform(w, n, -1, 1, 2);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, xd), vf_tensor_from_host(ctx, VF_F32, 1, &n, w)};
    vf_generator *ge = vf_generator_create(ctx, 9), *gt = vf_generator_create(ctx, 9);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "grad", .body = grad_body, .user = gt,
                                                                 .n_inputs = 2, .n_outputs = 2});
    for (int step = 0; step < 2; step++) {
        vf_tensor *e[2] = {0}, *t[2] = {0};
        assert_int_equal(grad_body(ctx, in, e, ge), VF_OK);
        check_grad(e[0], e[1], w, n, "eager");
        assert_int_equal(vf_function_call(fn, in, t), VF_OK);
        check_grad(t[0], t[1], w, n, "traced");
        /* the same draw: traced equals eager step by step */
        float *a = read_f(e[0]), *c = read_f(t[0]);
        vt_assert_equal_bytes(c, a, sizeof(float) * (size_t)n, "traced vs eager dropout");
        free(a), free(c);
    }
    vf_function_destroy(fn);
    vf_generator_destroy(ge);
    vf_generator_destroy(gt);
    vt_context_done(ctx);
}
VT_PER_BACKEND(dropout_gradient)

/* ---- save / load ------------------------------------------------------------ */

static vf_status one_draw(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)in;
    out[0] = vf_generator_uniform(ctx, user, VF_F32, 1, (int64_t[]){50});
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void saved(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, 31);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "draw", .body = one_draw, .user = g,
                                                                 .n_outputs = 1});
    vf_tensor *o = NULL;
    assert_int_equal(vf_function_call(fn, NULL, &o), VF_OK);
    check_draw(o, 31, 0, true, "before save");
    char path[96];
    snprintf(path, sizeof path, "/tmp/vkfuse_generator_%d_%d.vkf", (int)getpid(), (int)b);
    assert_int_equal(vf_function_save(fn, path), VF_OK); /* the state: draw 1 is next */
    vf_function *back = NULL;
    if (vf_function_load(ctx, path, &back) != VF_OK) fail_msg("load: %s", vf_error_message(ctx));
    remove(path);
    for (uint64_t d = 1; d < 3; d++) {
        assert_int_equal(vf_function_call(back, NULL, &o), VF_OK);
        check_draw(o, 31, d, true, "loaded function");
    }
    /* the loaded function has its own copy: the original moves on alone */
    assert_int_equal(vf_function_call(fn, NULL, &o), VF_OK);
    check_draw(o, 31, 1, true, "original after load");
    vf_function_destroy(back);
    vf_function_destroy(fn);
    vf_generator_destroy(g);
    vt_context_done(ctx);
}
VT_PER_BACKEND(saved)

/* ---- errors and edges ---------------------------------------------------------- */

static vf_status make_in_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)in, (void)user;
    vf_generator *g = vf_generator_create(ctx, 1);
    out[0] = NULL;
    return g ? VF_OK : vf_status_get(ctx);
}

static void errors(vf_backend b)
{
    vf_context *ctx = vt_context(b), *other = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, 3);
    float one = 1;
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){1}, &one);
    const double bad[5] = {1.0, 1.5, INFINITY, NAN, -0.1};
    for (int i = 0; i < 5; i++) {
        assert_null(vf_dropout(ctx, g, x, bad[i]));
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_dropout", "[0, 1)", NULL);
    }
    int32_t iv = 1;
    vf_tensor *xi = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){1}, &iv);
    assert_null(vf_dropout(ctx, g, xi, 0.5));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_dropout", "f32 or f16", NULL);
    vf_tensor *xh = vf_cast(ctx, x, VF_F16);
    assert_null(vf_dropout(ctx, g, xh, 0.99999)); /* scale 100000: not an f16 */
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_dropout", "65504", NULL);
    vf_tensor_release(vf_dropout(ctx, g, xh, 0.999)); /* scale 1000: fine (and draws: draw 0) */
    assert_null(vf_generator_uniform(ctx, g, VF_I32, 1, (int64_t[]){4}));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_generator_uniform", "f32 or f16", NULL);
    assert_null(vf_generator_normal(ctx, g, VF_F32, 1, (int64_t[]){-2}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_generator_normal", "dim 0", NULL);
    assert_null(vf_generator_normal(ctx, NULL, VF_F32, 0, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "NULL", NULL);
    /* a generator of another context */
    vf_generator *og = vf_generator_create(other, 3);
    assert_null(vf_dropout(ctx, og, x, 0.5));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "another vf_context", NULL);
    /* not a generator at all */
    assert_null(vf_generator_uniform(ctx, (vf_generator *)x, VF_F32, 0, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "not a vf_generator", NULL);
    /* creation inside a traced body */
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mk", .body = make_in_body, .n_outputs = 1});
    vf_tensor *o = NULL;
    assert_int_not_equal(vf_function_call(fn, NULL, &o), VF_OK);
    vt_expect_error(ctx, VF_ERROR_TRACE, "vf_generator_create", "outside the function body", NULL);
    vf_function_destroy(fn);
    /* empty draws: empty tensors, and the state still advances */
    vf_tensor *e = vf_generator_uniform(ctx, g, VF_F32, 2, (int64_t[]){0, 5});
    assert_non_null(e);
    assert_int_equal(vf_tensor_dim(e, 0), 0);
    vf_tensor *ex = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){0}, NULL);
    vf_tensor *ed = vf_dropout(ctx, g, ex, 0.5);
    assert_non_null(ed);
    assert_int_equal(vf_tensor_dim(ed, 0), 0);
    check_draw(vf_generator_uniform(ctx, g, VF_F32, 1, (int64_t[]){8}), 3, 3, true, "after two empty draws");
    /* destroyed: an error, not a crash, for draws and a second destroy */
    vf_generator_destroy(g);
    assert_null(vf_generator_uniform(ctx, g, VF_F32, 0, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_generator_uniform", "destroyed", NULL);
    vf_generator_destroy(g);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_generator_destroy", "destroyed", NULL);
    vf_generator_destroy(NULL);
    vf_generator_destroy(og);
    vt_context_done(other);
    vt_context_done(ctx);
}
VT_PER_BACKEND(errors)

/* ---- the draw number's high word ----------------------------------------------- */

/* state [lo, hi] through the backend's RNG_ADVANCE, in place as the
   generator runs it */
static void advance_case(vf_context *ctx, uint32_t lo, uint32_t hi, uint32_t want_lo, uint32_t want_hi)
{
    const uint32_t s0[2] = {lo, hi};
    vf_tensor *s = vf_tensor_from_host(ctx, VF_U32, 1, (int64_t[]){2}, s0);
    vf_exec e = {.op = VF_OP_RNG_ADVANCE, .n_in = 1, .in[0] = vf_tensor_ref(s), .out = vf_tensor_ref(s)};
    assert_int_equal(ctx->be.iface->exec(ctx->be.self, &e), VF_OK);
    uint32_t got[2];
    assert_int_equal(vf_tensor_read(s, got, sizeof got), VF_OK);
    if (got[0] != want_lo || got[1] != want_hi)
        fail_msg("advance of [%#x, %#x]: [%#x, %#x], want [%#x, %#x]", lo, hi, got[0], got[1], want_lo, want_hi);
    vf_tensor_release(s);
}

static void high_word(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    advance_case(ctx, 0xffffffffu, 5, 0, 6);
    advance_case(ctx, 7, 0xffffffffu, 8, 0xffffffffu);
    advance_case(ctx, 0xffffffffu, 0xffffffffu, 0, 0);
    /* draw d = 2^32 + 3 of a uniform and a normal */
    const uint32_t s0[2] = {3, 1};
    vf_tensor *s = vf_tensor_from_host(ctx, VF_U32, 1, (int64_t[]){2}, s0);
    for (int k = 0; k < 2; k++) {
        vf_tensor *like = vf_fill(ctx, VF_BOOL, 1, (int64_t[]){21}, 0);
        vf_tensor *out = vf_fill(ctx, VF_F32, 1, (int64_t[]){21}, 0);
        vf_exec e = {.op = k ? VF_OP_RNG_NORMAL : VF_OP_RNG_UNIFORM, .n_in = 2, .attrs.seed = SEED,
                     .attrs.dtype = VF_F32, .in[0] = vf_tensor_ref(s), .in[1] = vf_tensor_ref(like),
                     .out = vf_tensor_ref(out)};
        assert_int_equal(ctx->be.iface->exec(ctx->be.self, &e), VF_OK);
        check_draw(out, SEED, ((uint64_t)1 << 32) + 3, k == 0, "a draw past 2^32");
        vf_tensor_release(out), vf_tensor_release(like);
    }
    vf_tensor_release(s);
    vt_context_done(ctx);
}
VT_PER_BACKEND(high_word)

/* ---- control flow ------------------------------------------------------------- */

static vf_status draw_branch(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_add(ctx, in[0], vf_generator_uniform(ctx, user, VF_F32, 1, (int64_t[]){6}));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status no_draw(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* vf_cond(pred, draw, no draw); then a draw after it */
static vf_status cond_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *z = vf_fill(ctx, VF_F32, 1, (int64_t[]){6}, 0.0);
    vf_status s = vf_cond(ctx, in[0], draw_branch, no_draw, 1, &z, 1, &out[0], user);
    out[1] = vf_generator_uniform(ctx, user, VF_F32, 1, (int64_t[]){6});
    return s != VF_OK ? s : out[1] ? VF_OK : vf_status_get(ctx);
}

/* A draw inside a vf_cond branch advances the state only when the branch
   is taken, traced as eagerly: calls with pred true, false, true draw
   (0, 1), (-, 2), (3, 4). */
static void control_flow(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_generator *g = vf_generator_create(ctx, 12);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "cond", .body = cond_body, .user = g,
                                                                 .n_inputs = 1, .n_outputs = 2});
    const bool preds[3] = {true, false, true};
    uint64_t d = 0;
    for (int i = 0; i < 3; i++) {
        vf_tensor *p = vf_tensor_from_host(ctx, VF_BOOL, 0, NULL, &preds[i]), *o[2] = {0};
        assert_int_equal(vf_function_call(fn, &p, o), VF_OK);
        if (preds[i]) check_draw(o[0], 12, d++, true, "drawn in the branch taken");
        else assert_true(fabsf(vt_read1(vf_reduce_sum(ctx, vf_abs(ctx, o[0]), 0, NULL, false))) == 0);
        check_draw(o[1], 12, d++, true, "drawn after the cond");
        vf_tensor_release(p);
    }
    vf_function_destroy(fn);
    vf_generator_destroy(g);
    vt_context_done(ctx);
}
VT_PER_BACKEND(control_flow)

/* ---- device limits ------------------------------------------------------------ */

static vf_status big_draws(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)in;
    out[0] = vf_generator_uniform(ctx, user, VF_F32, 1, (int64_t[]){10001});
    out[1] = vf_generator_normal(ctx, user, VF_F16, 1, (int64_t[]){5003});
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* Under LIMITS (8 workgroups of at most 256 per dispatch) 10001 uniforms
   are 2501 blocks, 5003 normals 2502: both kernels loop over their
   workgroups (grid stride), eager and traced. */
static void test_limits(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *vk = lim_context(LIMITS);
    vf_generator *g = vf_generator_create(vk, 77);
    vf_tensor *t[2] = {0};
    assert_int_equal(big_draws(vk, NULL, t, g), VF_OK);
    check_draw(t[0], 77, 0, true, "eager uniform past the workgroup limit");
    check_draw(t[1], 77, 1, false, "eager normal past the workgroup limit");
    vf_function *fn = vf_function_create(vk, &(vf_function_desc){.name = "big", .body = big_draws, .user = g,
                                                                .n_outputs = 2});
    assert_int_equal(vf_function_call(fn, NULL, t), VF_OK);
    check_draw(t[0], 77, 2, true, "traced uniform past the workgroup limit");
    check_draw(t[1], 77, 3, false, "traced normal past the workgroup limit");
    vf_function_destroy(fn);
    vf_generator_destroy(g);
    vt_context_done(vk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(values),           VT_PER_BACKEND_TESTS(traced),
        cmocka_unit_test(test_backends_agree),  VT_PER_BACKEND_TESTS(statistics),
        VT_PER_BACKEND_TESTS(dropout_values),   VT_PER_BACKEND_TESTS(dropout_gradient),
        VT_PER_BACKEND_TESTS(saved),            VT_PER_BACKEND_TESTS(errors),
        VT_PER_BACKEND_TESTS(control_flow),     VT_PER_BACKEND_TESTS(high_word),
        cmocka_unit_test(test_limits),
    };
    return VT_RUN_GROUP(tests);
}
