/* vf_tape: every op with a gradient rule (the grad field of its op-table row,
 * the rule in src/autodiff/grad_rules.c) checked against central finite differences of a
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
#include "grad_cases.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A case's inputs (and a direction) for vt_central_diff, which moves one
   coordinate of in between calls. */
typedef struct {
    const gc_case *c;
    gc_dt *in;
    const gc_dt *v;
} at;

static double objective_at(void *u)
{
    at *a = u;
    gc_dt y;
    return gc_objective(a->c, a->in, &y);
}

static void check_case(vf_context *ctx, const gc_case *c)
{
    float *data[3], *grads[3], *y;
    gc_fill_case(c, data, 17);
    gc_tape_grads(ctx, c, data, &y, grads);
    gc_dt in[3], ref;
    for (int i = 0; i < c->n; i++) {
        in[i].rank = c->rank[i];
        memcpy(in[i].sh, c->shape[i], sizeof in[i].sh);
        for (int64_t k = 0; k < gc_numel(c, i); k++) in[i].v[k] = data[i][k];
    }
    /* the f32 forward against the double reference: a few roundings of
       values of size <= 10 (matmul: a sum of <= 4 products) */
    gc_objective(c, in, &ref);
    float *want = malloc(sizeof(float) * (size_t)(gc_dnumel(&ref) + 1));
    for (int64_t k = 0; k < gc_dnumel(&ref); k++) want[k] = (float)ref.v[k];
    char what[160];
    snprintf(what, sizeof what, "%s: forward vs double reference", c->name);
    vt_assert_close_f32(y, want, (size_t)gc_dnumel(&ref), 1e-5, 1e-5, what);
    free(want);
    for (int i = 0; i < c->n; i++) {
        int64_t n = gc_numel(c, i);
        double *fd = malloc(sizeof(double) * (size_t)(n + 1)), big = 1;
        for (int64_t k = 0; k < n; k++) {
            fd[k] = vt_central_diff(objective_at, &(at){c, in, NULL}, &in[i].v[k], 1e-5);
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
    for (int i = 0; i < gc_n_cases; i++) check_case(ctx, &gc_cases[i]);
    vt_context_done(ctx);
}

/* Second order of every rule: nested tapes give H v (v: a direction for
   every input), against nested central differences of the double
   reference: D(x) = (F(x + h v) - F(x - h v)) / 2h, then dD/dx by central
   differences again; their error is about eps_f64 |F| / h^2 + h^2 < 1e-6. */
static double directional(const gc_case *c, const gc_dt *in, const gc_dt *v)
{
    const double h = 1e-4;
    double f[2];
    for (int s = 0; s < 2; s++) {
        gc_dt a[3], tmp;
        for (int i = 0; i < c->n; i++) {
            a[i] = in[i];
            for (int64_t k = 0; k < gc_numel(c, i); k++) a[i].v[k] += (s ? -h : h) * v[i].v[k];
        }
        f[s] = gc_objective(c, a, &tmp);
    }
    return (f[0] - f[1]) / (2 * h);
}

static double directional_at(void *u)
{
    at *a = u;
    return directional(a->c, a->in, a->v);
}

static void test_second_order_every_rule(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    for (int ci = 0; ci < gc_n_cases; ci++) {
        const gc_case *c = &gc_cases[ci];
        float *data[3], *vdat[3];
        gc_fill_case(c, data, 23);
        gc_fill_case(c, vdat, 57);
        vf_scope_begin(ctx);
        vf_tensor *in[3], *v[3], *g[3] = {0}, *hv[3] = {0};
        for (int i = 0; i < c->n; i++) {
            in[i] = vf_tensor_from_host(ctx, VF_F32, c->rank[i], c->shape[i], data[i]);
            v[i] = vf_tensor_from_host(ctx, VF_F32, c->rank[i], c->shape[i], vdat[i]);
        }
        vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
        vf_tensor *y = c->f(ctx, in);
        assert_int_equal(vf_tape_gradient(inner, vf_mul(ctx, y, gc_weights_like(ctx, y)), c->n, in, g), VF_OK);
        vf_tape_end(inner);
        vf_tensor *d = vf_fill(ctx, VF_F32, 0, NULL, 0);
        for (int i = 0; i < c->n; i++) d = vf_add(ctx, d, vf_reduce_sum(ctx, vf_mul(ctx, g[i], v[i]), 0, NULL, false));
        if (vf_tape_gradient(outer, d, c->n, in, hv) != VF_OK) fail_msg("%s: %s", c->name, vf_error_message(ctx));
        vf_tape_end(outer);
        gc_dt din[3], dv[3];
        for (int i = 0; i < c->n; i++) {
            din[i].rank = dv[i].rank = c->rank[i];
            memcpy(din[i].sh, c->shape[i], sizeof din[i].sh);
            memcpy(dv[i].sh, c->shape[i], sizeof dv[i].sh);
            for (int64_t k = 0; k < gc_numel(c, i); k++) din[i].v[k] = data[i][k], dv[i].v[k] = vdat[i][k];
        }
        for (int i = 0; i < c->n; i++) {
            float *got = vt_read(hv[i]);
            for (int64_t k = 0; k < gc_numel(c, i); k++) {
                double want = vt_central_diff(directional_at, &(at){c, din, dv}, &din[i].v[k], 1e-4);
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
        for (int ci = 0; ci < gc_n_cases; ci++) {
            const gc_case *c = &gc_cases[ci];
            float *data[3], *g1[3], *g2[3], *y1, *y2;
            gc_fill_case(c, data, 99);
            gc_tape_grads(ctx, c, data, &y1, g1);
            gc_tape_grads(ctx, c, data, &y2, g2);
            for (int i = 0; i < c->n; i++) {
                vt_assert_equal_bytes(g1[i], g2[i], sizeof(float) * (size_t)gc_numel(c, i), c->name);
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
    for (int ci = 0; ci < gc_n_cases; ci++) {
        const gc_case *c = &gc_cases[ci];
        float *data[3], *gc[3], *gv[3], *yc, *yv;
        gc_fill_case(c, data, 5);
        gc_tape_grads(cpu, c, data, &yc, gc);
        gc_tape_grads(vk, c, data, &yv, gv);
        char what[160];
        for (int i = 0; i < c->n; i++) {
            /* GLSL exp/tanh/pow on lavapipe are a few ulp off libm; the
               gradients are short chains of them */
            snprintf(what, sizeof what, "%s: d/d in%d Vulkan vs CPU", c->name, i);
            vt_assert_close_f32(gv[i], gc[i], (size_t)gc_numel(c, i), 1e-4, 1e-3, what);
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

/* vf_tape_gradient_ex(VF_TAPE_UNCONNECTED_NULL): NULL for a source off the
   target's path (also one cut by stop_gradient, and every source of a
   target off all their paths), the gradient for the others; unknown flag
   bits are an error that leaves the tape usable. */
static void test_unconnected_null(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 2.0), *u = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 2}, 5.0);
    vf_tensor *s = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 1.0);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_reduce_sum(ctx, vf_add(ctx, vf_mul(ctx, x, x), vf_stop_gradient(ctx, vf_mul(ctx, s, s))), 0,
                                 NULL, false);
    vf_tensor *c = vf_reduce_sum(ctx, vf_mul(ctx, u, u), 0, NULL, false);
    vf_tensor *g[3] = {0};
    assert_int_equal(vf_tape_gradient_ex(tp, y, 3, (vf_tensor *[]){x, u, s}, g, 2u), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient_ex", "flags", NULL);
    assert_int_equal(vf_tape_gradient_ex(tp, y, 3, (vf_tensor *[]){x, u, s}, g, VF_TAPE_UNCONNECTED_NULL), VF_OK);
    assert_non_null(g[0]);
    assert_null(g[1]);
    assert_null(g[2]);
    float *gx = vt_read(g[0]), wx[3] = {4, 4, 4};
    vt_assert_close_f32(gx, wx, 3, 1e-6, 1e-6, "dx");
    free(gx);
    /* a target that depends on none of the sources */
    assert_int_equal(vf_tape_gradient_ex(tp, c, 2, (vf_tensor *[]){x, s}, g, VF_TAPE_UNCONNECTED_NULL), VF_OK);
    assert_null(g[0]);
    assert_null(g[1]);
    vf_tape_end(tp);
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
        cmocka_unit_test(test_unconnected_null),
        cmocka_unit_test(test_not_differentiable),
        cmocka_unit_test(test_traced_matches_eager),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
