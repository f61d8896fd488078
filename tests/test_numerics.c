/* Numerics and small API edges the backends must agree on: bool bytes from
 * the host, vf_norm near the ends of the f32 range, reshape with -1 and a
 * zero dim; eagerly and traced (fused and unfused), on the CPU backend and
 * on Vulkan. */
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_backends(vf_backend *b)
{
    int n = 0;
    b[n++] = VF_BACKEND_CPU;
    if (vt_have_vulkan()) b[n++] = VF_BACKEND_VULKAN;
    return n;
}

static const char *backend_name(vf_backend b) { return b == VF_BACKEND_CPU ? "cpu" : "vulkan"; }

/* ---- bools from host bytes ------------------------------------------------- */

/* A mask made from a uint8_t image: any non-zero byte is true. */
static const uint8_t mask_bytes[8] = {0, 1, 2, 255, 0, 128, 7, 1};
static const uint8_t mask_want[8] = {0, 1, 1, 1, 0, 1, 1, 1};

static vf_status mask_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *yes = vf_fill(ctx, VF_BOOL, 0, NULL, 1.0);
    int64_t n = 8;
    /* a constant of the traced graph made from the same raw bytes */
    vf_tensor *k = vf_tensor_from_host(ctx, VF_BOOL, 1, &n, mask_bytes);
    out[0] = vf_equal(ctx, in[0], yes);
    out[1] = vf_equal(ctx, k, yes);
    out[2] = vf_cast(ctx, in[0], VF_F32);
    return out[0] && out[1] && out[2] ? VF_OK : vf_status_get(ctx);
}

static void check_mask(vf_tensor *const *out, const char *what)
{
    for (int k = 0; k < 2; k++) {
        uint8_t *got = vt_read(out[k]);
        vt_assert_equal_bytes(got, mask_want, 8, what);
        free(got);
    }
    float *f = vt_read(out[2]);
    for (int i = 0; i < 8; i++) {
        if (f[i] != (float)mask_want[i]) {
            fprintf(stderr, "%s: cast to f32 [%d] = %g, want %d\n", what, i, (double)f[i], mask_want[i]);
            fail();
        }
    }
    free(f);
}

static void test_bool_bytes(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = n_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        int64_t n = 8;
        vf_tensor *t = vf_tensor_from_host(ctx, VF_BOOL, 1, &n, mask_bytes);
        /* the stored bytes read back as 0/1 */
        uint8_t *raw = vt_read(t);
        vt_assert_equal_bytes(raw, mask_want, 8, backend_name(bs[b]));
        free(raw);
        vf_tensor *out[3];
        /* eager */
        vf_run_functions_eagerly(ctx, true);
        vf_function *fe = vf_function_create(ctx, &(vf_function_desc){.name = "mask", .body = mask_body,
                                                                     .n_inputs = 1, .n_outputs = 3});
        assert_int_equal(vf_function_call(fe, &t, out), VF_OK);
        check_mask(out, "eager");
        vf_function_destroy(fe);
        vf_run_functions_eagerly(ctx, false);
        /* traced, fused and unfused */
        for (int unfused = 0; unfused < 2; unfused++) {
            vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mask", .body = mask_body,
                                                                         .n_inputs = 1, .n_outputs = 3,
                                                                         .unfused = unfused});
            for (int call = 0; call < 2; call++) {
                assert_int_equal(vf_function_call(fn, &t, out), VF_OK);
                check_mask(out, unfused ? "traced unfused" : "traced fused");
            }
            vf_function_destroy(fn);
        }
        /* variables assigned from raw bytes */
        vf_tensor *v = vf_variable(ctx, vf_fill(ctx, VF_BOOL, 1, &n, 0.0));
        assert_int_equal(vf_assign(v, t), VF_OK);
        raw = vt_read(vf_equal(ctx, v, vf_fill(ctx, VF_BOOL, 0, NULL, 1.0)));
        vt_assert_equal_bytes(raw, mask_want, 8, "assigned variable");
        free(raw);
        vt_context_done(ctx);
    }
}

/* ---- vf_norm over the f32 range ---------------------------------------------- */

typedef struct {
    const char *what;
    int n;
    float x[4];
    double want;   /* exact; above FLT_MAX the result is inf */
} norm_case;

static const norm_case norm_cases[] = {
    {"big", 2, {1e30f, 1e30f}, 1.4142135623730951e30},
    {"near max", 3, {2e38f, -2e38f, 1.0f}, 2.8284271247461903e38},
    {"tiny", 2, {1e-30f, 1e-30f}, 1.4142135623730951e-30},
    {"mixed", 3, {1e-30f, 3.0f, 4.0f}, 5.0},
    {"big and small", 4, {1e30f, 1e-30f, 2e30f, 0.0f}, 2.23606797749979e30},
    {"ordinary", 3, {3.0f, -4.0f, 12.0f}, 13.0},
    {"zeros", 2, {0.0f, -0.0f}, 0.0},
    {"overflows", 2, {3e38f, 3e38f}, 4.242640687119285e38}, /* halved: 2.1e38 */
    {"inf", 2, {1.0f, -INFINITY}, INFINITY},
    {"nan", 3, {1e30f, NAN, 1.0f}, NAN},
};

static vf_status norm_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_norm(ctx, in[0]);
    /* the row norms of [n,1] (no reduction of length 1 left over) and the
       norm of 2*x/2 (an elementwise producer the plan may fuse) */
    vf_tensor *two = vf_fill(ctx, VF_F32, 0, NULL, 0.5);
    out[1] = vf_norm(ctx, vf_mul(ctx, vf_abs(ctx, in[0]), two));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void check_norm(const norm_case *c, vf_tensor *const *out, const char *how)
{
    for (int k = 0; k < 2; k++) {
        float got;
        assert_int_equal(vf_tensor_read(out[k], &got, sizeof got), VF_OK);
        double want = k ? c->want * 0.5 : c->want;
        if (want > FLT_MAX) want = INFINITY;
        bool ok = isnan(want) ? isnan(got) : isinf(want) ? got == (float)want
                : fabs((double)got - want) <= 2e-6 * want;
        if (!ok) {
            fprintf(stderr, "norm %s (%s, output %d): got %.9g, want %.9g\n", c->what, how, k, (double)got, want);
            fail();
        }
    }
}

static void test_norm_range(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = n_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        for (size_t i = 0; i < sizeof norm_cases / sizeof *norm_cases; i++) {
            const norm_case *c = &norm_cases[i];
            int64_t n = c->n;
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, &n, c->x), *out[2];
            char how[64];
            snprintf(how, sizeof how, "%s eager", backend_name(bs[b]));
            out[0] = vf_norm(ctx, x);
            out[1] = vf_norm(ctx, vf_mul(ctx, vf_abs(ctx, x), vf_fill(ctx, VF_F32, 0, NULL, 0.5)));
            check_norm(c, out, how);
            for (int unfused = 0; unfused < 2; unfused++) {
                vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "norm", .body = norm_body,
                                                                             .n_inputs = 1, .n_outputs = 2,
                                                                             .unfused = unfused});
                snprintf(how, sizeof how, "%s traced %s", backend_name(bs[b]), unfused ? "unfused" : "fused");
                assert_int_equal(vf_function_call(fn, &x, out), VF_OK);
                check_norm(c, out, how);
                vf_function_destroy(fn);
            }
        }
        vt_context_done(ctx);
    }
}

/* Long vectors take every reduction path of the Vulkan kernel (a thread per
   output, a workgroup per output, two steps): norms of big, tiny and
   ordinary values over 1, 40, 1000 and 300000 elements. */
static void test_norm_long(void **state)
{
    (void)state;
    vf_backend bs[2];
    static const int64_t lens[] = {1, 40, 1000, 300000};
    static const double scales[] = {1e30, 1e-30, 1.0};
    for (int b = 0, nb = n_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        for (size_t l = 0; l < sizeof lens / sizeof *lens; l++) {
            int64_t n = lens[l];
            float *x = malloc((size_t)n * sizeof *x);
            vt_fill_uniform(x, (size_t)n, -1, 1, (uint64_t)n);
            for (size_t s = 0; s < sizeof scales / sizeof *scales; s++) {
                double ss = 0;
                float *xs = malloc((size_t)n * sizeof *xs);
                for (int64_t i = 0; i < n; i++) {
                    xs[i] = (float)(x[i] * scales[s]);
                    ss += (double)xs[i] * (double)xs[i] / (scales[s] * scales[s]);
                }
                double want = sqrt(ss) * scales[s];
                vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 1, &n, xs);
                float got;
                assert_int_equal(vf_tensor_read(vf_norm(ctx, t), &got, sizeof got), VF_OK);
                if (!(fabs((double)got - want) <= 1e-5 * want)) {
                    fprintf(stderr, "%s: norm of %lld values of scale %g: got %.9g, want %.9g\n",
                            backend_name(bs[b]), (long long)n, scales[s], (double)got, want);
                    fail();
                }
                free(xs);
            }
            free(x);
        }
        vt_context_done(ctx);
    }
}

/* ---- range and denormals, as docs/TESTING.md states them --------------------- */

static float first(vf_tensor *t)
{
    float v = 0;
    assert_int_equal(vf_tensor_read(t, &v, sizeof v), VF_OK);
    return v;
}

/* The table "Range, denormals and bools" of docs/TESTING.md: the CPU
   backend's double sums survive an f32 overflow of a partial sum, Vulkan's
   f32 sums do not; denormals survive arithmetic on both; lavapipe's exp
   flushes results below 2^-126 (other drivers may differ: checked on
   lavapipe only). */
static void test_range_documented(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = n_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        bool lavapipe = bs[b] == VF_BACKEND_VULKAN && strstr(vf_device_name(ctx), "llvmpipe") != NULL;
        int64_t n3 = 3, n2 = 2;
        vf_tensor *big = vf_tensor_from_host(ctx, VF_F32, 1, &n3, (float[]){3e38f, 3e38f, -3e38f});
        float sum = first(vf_reduce_sum(ctx, big, 0, NULL, false));
        if (bs[b] == VF_BACKEND_CPU) assert_true(sum == 3e38f);
        else assert_true(isinf(sum) && sum > 0);
        vf_tensor *den = vf_tensor_from_host(ctx, VF_F32, 1, &n2, (float[]){1e-40f, 1e-20f});
        float prod[2];
        assert_int_equal(vf_tensor_read(vf_mul(ctx, den, den), prod, sizeof prod), VF_OK);
        if (bs[b] == VF_BACKEND_CPU || lavapipe) {
            assert_true(prod[0] == 0.0f && fabsf(prod[1] - 1e-40f) <= 1e-45f); /* 1e-40: a denormal, kept */
            float e = first(vf_exp(ctx, vf_fill(ctx, VF_F32, 0, NULL, -100.0)));
            if (bs[b] == VF_BACKEND_CPU) assert_true(e > 3.7e-44f && e < 3.9e-44f);
            else assert_true(e == 0.0f);
        }
        vt_context_done(ctx);
    }
}

/* ---- reshape with -1 and a zero dim ------------------------------------------ */

static vf_status reshape_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const int64_t *target = user;
    out[0] = vf_reshape(ctx, in[0], 2, target);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* [0,3] -> [-1,0]: any size fits the -1, so it is an error (it inferred 0);
   [0,3] -> [-1,3] is [0,3]. Eager and traced, both backends. */
static void test_reshape_infer_zero(void **state)
{
    (void)state;
    vf_backend bs[2];
    static const int64_t ambiguous[2][2] = {{-1, 0}, {0, -1}}, fine[2] = {-1, 3};
    for (int b = 0, nb = n_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_tensor *x = vf_fill(ctx, VF_F32, 2, (int64_t[]){0, 3}, 1.0), *y = NULL;
        for (int k = 0; k < 2; k++) {
            assert_null(vf_reshape(ctx, x, 2, ambiguous[k]));
            vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_reshape", "ambiguous", NULL);
            vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "reshape", .body = reshape_body,
                                                                         .user = (void *)ambiguous[k],
                                                                         .n_inputs = 1, .n_outputs = 1});
            assert_int_equal(vf_function_call(fn, &x, &y), VF_ERROR_SHAPE);
            vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_reshape", "ambiguous", NULL);
            vf_function_destroy(fn);
        }
        y = vf_reshape(ctx, x, 2, fine);
        assert_non_null(y);
        assert_int_equal(vf_tensor_dim(y, 0), 0);
        assert_int_equal(vf_tensor_dim(y, 1), 3);
        vt_context_done(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bool_bytes),
        cmocka_unit_test(test_norm_range),
        cmocka_unit_test(test_norm_long),
        cmocka_unit_test(test_reshape_infer_zero),
        cmocka_unit_test(test_range_documented),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
