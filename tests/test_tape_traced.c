/* vf_tape and traced functions, and what has no gradient: a traced
 * function (a cond inside) called under an eager tape gives the eager
 * body's gradients at two batch sizes from one trace, and one that assigns
 * variables cannot be differentiated; targets the tape never recorded,
 * integer sources, traced branches that assign or hold a
 * non-differentiable op fail with a message and leave the tape usable;
 * targets computed from empty tensors, and the call of a function
 * destroyed before the gradient (docs/GRADIENTS.md). Gradients through
 * control flow: tests/test_tape_control.c. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3 /* elements of test_errors' x */

/* ---- a traced function called under an eager tape ---------------------------- */

typedef struct { vf_tensor *w, *var; bool assign; } fmodel;

/* y = tanh(x w) * x (x [n,3], w [3,3]), and a cond on the batch sum */
static vf_status fmodel_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    fmodel *m = user;
    vf_tensor *y = vf_mul(ctx, vf_tanh(ctx, vf_matmul(ctx, in[0], m->w)), in[0]);
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 0));
    vf_tensor *ws = vf_reduce_sum(ctx, m->w, 1, (int[]){0}, false);
    vf_status s = vf_cond(ctx, p, vt_branch_mul, vt_branch_square, 2, (vf_tensor *[]){y, ws}, 1, &out[0], NULL);
    if (s == VF_OK && m->assign) s = vf_assign_add(m->var, vt_scalar(ctx, 1));
    return s;
}

static void test_function_call_under_tape(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        float w0[9], x0[12];
        vt_fill_uniform(w0, 9, -1, 1, 11);
        vt_fill_uniform(x0, 12, -1, 1, 12);
        fmodel m = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 3}, w0), NULL, false};
        vf_tensor_spec sig = {VF_F32, 2, {-1, 3}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "model", .body = fmodel_body,
            .user = &m, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        for (int64_t nb = 4; nb >= 2; nb -= 2) { /* one trace, two batch sizes */
            vf_scope_begin(ctx);
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, 3}, x0);
            vf_tensor *ge[2], *gt[2], *y;
            for (int traced = 0; traced < 2; traced++) {
                vf_tape *tp = vf_tape_begin(ctx);
                if (traced) assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
                else assert_int_equal(fmodel_body(ctx, &x, &y, &m), VF_OK);
                vf_tensor *loss = vt_sum(ctx, vf_mul(ctx, y, y));
                assert_int_equal(vf_tape_gradient(tp, loss, 2, (vf_tensor *[]){x, m.w}, traced ? gt : ge), VF_OK);
                vf_tape_end(tp);
            }
            for (int k = 0; k < 2; k++) {
                float *a = vt_read(gt[k]), *b = vt_read(ge[k]);
                vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(ge[k]), 1e-5, 1e-4, "function call vs eager body");
                float mx = 0;
                for (int64_t i = 0; i < vf_tensor_numel(ge[k]); i++) mx = fmaxf(mx, fabsf(b[i]));
                assert_true(mx > 0.01f); /* not zeros */
                free(a), free(b);
            }
            vf_scope_end(ctx);
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        vf_function_destroy(fn);

        /* a function that assigns cannot be run again to differentiate it */
        m.var = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0));
        m.assign = true;
        fn = vf_function_create(ctx, &(vf_function_desc){.name = "assigning", .body = fmodel_body, .user = &m,
            .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x0), *y, *g = NULL;
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        assert_int_equal(vf_tape_gradient(tp, vt_sum(ctx, y), 1, &x, &g), VF_ERROR_INVALID_ARGUMENT);
        assert_null(g);
        vf_tape_end(tp);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "'assigning'", "assigns variables", NULL);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* A traced cond whose branch assigns a variable: replaying it to
   differentiate would assign again, so the gradient fails naming the node. */
static vf_tensor *g_var;
static vf_status then_assign(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_status s = vf_assign_add(g_var, vt_scalar(ctx, 1));
    out[0] = vf_mul(ctx, in[0], in[0]);
    return s;
}
static vf_status assign_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_assign, vt_branch_square, 1, in, 1, &y, NULL);
    if (s == VF_OK) s = vf_tape_gradient(tp, vt_sum(ctx, y), 1, in, out);
    vf_tape_end(tp);
    return s;
}

/* a non-differentiable op on the path inside a traced branch */
static vf_status then_argmax(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *r = vf_reshape(ctx, in[0], 2, (int64_t[]){1, N});
    out[0] = vf_mul(ctx, in[0], vf_cast(ctx, vf_argmax(ctx, r, 1), VF_F32));
    return VF_OK;
}
static vf_status argmax_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_argmax, vt_branch_square, 1, in, 1, &y, NULL);
    if (s == VF_OK) s = vf_tape_gradient(tp, vt_sum(ctx, y), 1, in, out);
    vf_tape_end(tp);
    return s;
}

/* ---- what has no gradient --------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){N}, 2.0);
    /* a target computed before the tape began: the tape never saw it */
    vf_tensor *y = vt_sum(ctx, vf_mul(ctx, x, x));
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *z = vf_mul(ctx, x, x);
    vf_tensor *g = NULL;
    assert_int_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "target", "not recorded", NULL);
    /* an integer source */
    vf_tensor *ix = vf_fill(ctx, VF_I32, 1, (int64_t[]){N}, 2.0);
    vf_tensor *zi = vt_sum(ctx, vf_mul(ctx, z, vf_cast(ctx, ix, VF_F32)));
    assert_int_equal(vf_tape_gradient(tp, zi, 1, &ix, &g), VF_ERROR_DTYPE);
    assert_null(g);
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_tape_gradient", "source 0", "i32", NULL);
    /* a traced branch that assigns */
    g_var = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0));
    vf_tensor_spec sig = {VF_F32, 1, {N}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "assigning", .body = assign_body,
        .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    vf_tensor *gx = NULL;
    assert_int_equal(vf_function_call(fn, &x, &gx), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "vf_cond", "assign", NULL);
    vf_function_destroy(fn);
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "argmax", .body = argmax_body,
        .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    assert_int_equal(vf_function_call(fn, &x, &gx), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "vf_cast", "not differentiable", NULL);
    vf_function_destroy(fn);
    /* the tape still works: d sum(x*x) = 2x */
    assert_int_equal(vf_tape_gradient(tp, z, 1, &x, &g), VF_OK);
    float *gv = vt_read(g), want[N] = {4, 4, 4};
    vt_assert_close_f32(gv, want, N, 0, 0, "after the errors");
    free(gv);
    vf_tape_end(tp);
    vt_context_done(ctx);
}

/* Found by tests/test_differential and fuzz/fuzz_api after the control-flow
   merge: a target computed from empty tensors (ops that produce nothing
   were not recorded, so "not recorded by this tape"), and a gradient
   through the call of a function destroyed before the gradient (its body
   ran again: use after free of its user data). */
static void test_empty_and_destroyed(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        vf_tensor *x = vf_fill(ctx, VF_F32, 2, (int64_t[]){0, 3}, 1.0);
        vf_tape *tp = vf_tape_begin(ctx);
        vf_tensor *y = vt_sum(ctx, vf_tanh(ctx, vf_mul(ctx, x, vt_scalar(ctx, 2))));
        vf_tensor *yc = vf_reduce_sum(ctx, vf_exp(ctx, x), 1, (int[]){0}, false); /* [3] from an empty set */
        vf_tensor *g = NULL, *gc = NULL;
        assert_int_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_OK);
        assert_int_equal(vf_tensor_rank(g), 2);
        assert_int_equal(vf_tensor_dim(g, 0), 0);
        assert_int_equal(vf_tensor_dim(g, 1), 3);
        assert_int_equal(vf_tape_gradient(tp, yc, 1, &x, &gc), VF_OK);
        assert_int_equal(vf_tensor_numel(gc), 0);
        /* a target made from empty tensors only, with a non-empty source off
           its path: zeros for it, as for any recorded constant */
        vf_tensor *w = vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 1.0), *gw[2] = {0};
        vf_tensor *ye = vf_reduce_sum(ctx, vf_mul(ctx, vf_tanh(ctx, x), x), 0, NULL, false);
        assert_int_equal(vf_tape_gradient(tp, ye, 2, (vf_tensor *[]){x, w}, gw), VF_OK);
        assert_int_equal(vf_tensor_numel(gw[0]), 0);
        float *gwv = vt_read(gw[1]), zero[2] = {0, 0};
        vt_assert_close_f32(gwv, zero, 2, 0, 0, "source off an empty target's path");
        free(gwv);
        vf_tape_end(tp);

        float w0[9], x0[6];
        vt_fill_uniform(w0, 9, -1, 1, 21);
        vt_fill_uniform(x0, 6, -1, 1, 22);
        fmodel *m = calloc(1, sizeof *m);
        m->w = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 3}, w0);
        vf_tensor_spec sig = {VF_F32, 2, {-1, 3}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "gone", .body = fmodel_body,
            .user = m, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        vf_tensor *xi = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x0), *out = NULL;
        tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(fn, &xi, &out), VF_OK);
        vf_tensor *loss = vt_sum(ctx, out);
        vf_function_destroy(fn);
        free(m); /* the body's user data goes with the function, as users write it */
        assert_int_equal(vf_tape_gradient(tp, loss, 1, &xi, &g), VF_ERROR_INVALID_ARGUMENT);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "'gone'", "destroyed", NULL);
        vf_tape_end(tp);
        vt_context_done(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_function_call_under_tape),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_empty_and_destroyed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
