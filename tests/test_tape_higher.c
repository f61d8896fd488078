/* vf_tape of higher order: a tape inside a tape, eager and in a traced
 * function, on both backends: x^3 -> 6x, a Hessian-vector product and a
 * gradient penalty of sum(tanh(A w)^2) against central differences of the
 * double-precision gradient, and second order through a traced cond, an
 * unbounded loop (recomputed states) and a bounded one (a stack).
 * Split from tests/test_tape_control.c (first order through control flow). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define N 3

static vf_tensor *scalar(vf_context *ctx, double v) { return vf_fill(ctx, VF_F32, 0, NULL, v); }
static vf_tensor *sum(vf_context *ctx, vf_tensor *x) { return vf_reduce_sum(ctx, x, 0, NULL, false); }

/* the cond's else branch: x*x */
static vf_status else_sq(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[0]);
    return VF_OK;
}

/* d/dx sum(d/dx sum(x^3)) = 6x, by a tape inside a tape. */
static vf_status second_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_tensor *y = sum(ctx, vf_mul(ctx, vf_mul(ctx, x, x), x));
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(inner, y, 1, &x, &g);
    vf_tape_end(inner);
    if (s == VF_OK) s = vf_tape_gradient(outer, sum(ctx, g), 1, &x, &out[0]);
    vf_tape_end(outer);
    out[1] = g;
    return s;
}

/* Hessian-vector product of f(w) = sum(tanh(A w)^2) with v, and a
   gradient penalty |grad f|^2, both by nested tapes. */
typedef struct { vf_tensor *a, *v; } hvp_data;
static vf_status hvp_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    hvp_data *d = user;
    vf_tensor *w = in[0];
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_tensor *t = vf_tanh(ctx, vf_matmul(ctx, d->a, w));
    vf_tensor *f = sum(ctx, vf_mul(ctx, t, t));
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(inner, f, 1, &w, &g);
    vf_tape_end(inner);
    vf_tensor *gv = s == VF_OK ? sum(ctx, vf_mul(ctx, g, d->v)) : NULL;
    vf_tensor *pen = s == VF_OK ? sum(ctx, vf_mul(ctx, g, g)) : NULL;
    if (s == VF_OK) s = vf_tape_gradient(outer, gv, 1, &w, &out[0]);
    if (s == VF_OK) s = vf_tape_gradient(outer, pen, 1, &w, &out[1]);
    vf_tape_end(outer);
    return s;
}

#define HM 4
static const float hA[HM * N] = {0.3f, -0.5f, 0.2f, 0.1f, 0.4f, -0.3f, -0.2f, 0.6f, 0.5f, 0.7f, 0.1f, -0.4f};
static const float hW[N] = {0.5f, -0.8f, 0.3f}, hV[N] = {1.0f, -0.5f, 2.0f};

/* grad f in double */
static void hvp_grad(const double *w, double *g)
{
    for (int j = 0; j < N; j++) g[j] = 0;
    for (int i = 0; i < HM; i++) {
        double z = 0;
        for (int j = 0; j < N; j++) z += hA[i * N + j] * w[j];
        double t = tanh(z), dz = 2 * t * (1 - t * t);
        for (int j = 0; j < N; j++) g[j] += dz * hA[i * N + j];
    }
}
static double hvp_gv(const double *w)
{
    double g[N], s = 0;
    hvp_grad(w, g);
    for (int j = 0; j < N; j++) s += g[j] * hV[j];
    return s;
}
static double hvp_pen(const double *w)
{
    double g[N], s = 0;
    hvp_grad(w, g);
    for (int j = 0; j < N; j++) s += g[j] * g[j];
    return s;
}
typedef struct {
    double (*f)(const double *w);
    double w[N];
} at;

static double f_at(void *u)
{
    at *a = u;
    return a->f(a->w);
}

/* d f / d w at w0 by central differences (|w0| < 1: h = 1e-6) */
static void fd(double (*f)(const double *), const float *w0, double *out)
{
    at a = {.f = f};
    for (int j = 0; j < N; j++) a.w[j] = w0[j];
    for (int j = 0; j < N; j++) out[j] = vt_central_diff(f_at, &a, &a.w[j], 1e-6);
}

/* x^3 inside a traced cond and a loop (y = y * x three times from y = x),
   then second order: 6x for the cond, 12 x^2 for x^4 from the loop
   (unbounded: recomputed states; bounded: a stack). */
static vf_status cube_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, vf_mul(ctx, in[0], in[0]), in[0]);
    return VF_OK;
}
static vf_status loop2(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 3));
    return VF_OK;
}
static vf_status loop2_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *x = user;
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 1));
    out[1] = vf_mul(ctx, in[1], x);
    return VF_OK;
}
static vf_status second_cf_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_status s = VF_OK;
    for (int k = 0; k < 3 && s == VF_OK; k++) { /* cond, unbounded loop, bounded loop (a stack) */
        vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
        vf_tensor *y = NULL;
        if (k == 0) {
            vf_tensor *p = vf_greater(ctx, sum(ctx, x), scalar(ctx, -100));
            s = vf_cond(ctx, p, cube_then, else_sq, 1, &x, 1, &y, NULL);
        } else {
            vf_tensor *v[2] = {vf_fill(ctx, VF_I32, 0, NULL, 0), x};
            s = vf_while_loop(ctx, loop2, loop2_body, 2, v, k == 1 ? 0 : 10, x);
            y = v[1];
        }
        vf_tensor *g = NULL;
        if (s == VF_OK) s = vf_tape_gradient(inner, sum(ctx, y), 1, &x, &g);
        vf_tape_end(inner);
        if (s == VF_OK) s = vf_tape_gradient(outer, sum(ctx, g), 1, &x, &out[k]);
        vf_tape_end(outer);
    }
    return s;
}

static void call_both(vf_context *ctx, vf_body body, void *user, int n_out, vf_tensor *x, vf_tensor **eager,
                      vf_tensor **traced)
{
    assert_int_equal(body(ctx, &x, eager, user), VF_OK);
    vf_tensor_spec sig = {VF_F32, 1, {N}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "second", .body = body, .user = user,
        .n_inputs = 1, .n_outputs = n_out, .input_signature = &sig});
    vf_status s = vf_function_call(fn, &x, traced);
    if (s != VF_OK) fail_msg("traced: %s", vf_error_message(ctx));
    vf_function_destroy(fn);
}

static void expect(vf_tensor *t, const double *want, const char *what)
{
    float w[N], *got = vt_read(t);
    for (int i = 0; i < N; i++) w[i] = (float)want[i];
    vt_assert_close_f32(got, w, N, 1e-4, 1e-4, what);
    free(got);
}

static void test_second_order(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        float xv[N] = {1, -2, 0.5f};
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, xv);
        double six[N], three[N], twelve[N];
        for (int i = 0; i < N; i++) six[i] = 6 * xv[i], three[i] = 3 * xv[i] * xv[i], twelve[i] = 12.0 * xv[i] * xv[i];
        vf_tensor *e[2], *t[2];
        call_both(ctx, second_body, NULL, 2, x, e, t);
        expect(e[1], three, "x^3: first order, eager");
        expect(e[0], six, "x^3: second order, eager");
        expect(t[1], three, "x^3: first order, traced");
        expect(t[0], six, "x^3: second order, traced");

        hvp_data d = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){HM, N}, hA),
                      vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, hV)};
        vf_tensor *w = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, hW);
        double hv[N], gp[N];
        fd(hvp_gv, hW, hv);
        fd(hvp_pen, hW, gp);
        call_both(ctx, hvp_body, &d, 2, w, e, t);
        expect(e[0], hv, "Hessian-vector product, eager");
        expect(e[1], gp, "gradient penalty, eager");
        expect(t[0], hv, "Hessian-vector product, traced");
        expect(t[1], gp, "gradient penalty, traced");

        vf_tensor *e3[3], *t3[3];
        call_both(ctx, second_cf_body, NULL, 3, x, e3, t3);
        e[0] = e3[0], e[1] = e3[1], t[0] = t3[0], t[1] = t3[1];
        expect(e3[2], twelve, "x^4 from a bounded loop: second order, eager");
        expect(t3[2], twelve, "x^4 from a bounded loop: second order, traced");
        expect(e[0], six, "x^3 in a cond: second order, eager");
        expect(t[0], six, "x^3 in a cond: second order, traced");
        expect(e[1], twelve, "x^4 from a loop: second order, eager");
        expect(t[1], twelve, "x^4 from a loop: second order, traced");
        vt_context_done(ctx);
    }
}

/* Second order through a call: the function returns d sum(x^3)/dx (a
   tape in its body); an eager tape around the call gives 6x. */
static void test_second_order_through_call(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        vf_tensor_spec s3 = {VF_F32, 1, {N}};
        vf_function *f2 = vf_function_create(ctx, &(vf_function_desc){.name = "grad3", .body = second_body,
            .n_inputs = 1, .n_outputs = 2, .input_signature = &s3});
        float xv[N] = {1, -2, 0.5f};
        double six[N] = {6, -12, 3};
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, xv), *o[2], *g = NULL;
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(f2, &x, o), VF_OK);
        assert_int_equal(vf_tape_gradient(tp, sum(ctx, o[1]), 1, &x, &g), VF_OK);
        vf_tape_end(tp);
        expect(g, six, "second order through a function call");
        vf_function_destroy(f2);
        vt_context_done(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_order),
        cmocka_unit_test(test_second_order_through_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
