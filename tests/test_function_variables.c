/* Variables in traced functions: captured variables assigned in the body
 * (reads before and after an assign), assigns inside vf_cond branches
 * (a select, no host round trip), and variables passed as inputs (by
 * reference, as TF passes them), traced == eager, on every backend.
 * Split from tests/test_function.c, which tests the rest of vf_function. */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static vf_tensor *f32(vf_context *ctx, int rank, const int64_t *shape, const float *data)
{
    return vf_tensor_from_host(ctx, VF_F32, rank, shape, data);
}

/* ---- variables -------------------------------------------------------------------------- */

static vf_status accumulate(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *v = user;
    out[0] = vf_mul(ctx, v, vf_fill(ctx, VF_F32, 0, NULL, 1.0)); /* read before the assign: old value */
    vf_status s = vf_assign_add(v, in[0]);
    out[1] = vf_add(ctx, v, vf_fill(ctx, VF_F32, 0, NULL, 0.0)); /* read after: the new value */
    out[2] = v;
    return s != VF_OK ? s : out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void test_variables(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_tensor *v = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 0.0));
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "accumulate", .body = accumulate, .user = v,
                                                                     .n_inputs = 1, .n_outputs = 3});
        vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 1.5), *o[3];
        for (int i = 1; i <= 3; i++) {
            assert_int_equal(vf_function_call(fn, &x, o), VF_OK);
            float *before = vt_read(o[0]), *after = vt_read(o[1]), *ret = vt_read(o[2]), *now = vt_read(v);
            float want_b = 1.5f * (float)(i - 1), want_a = 1.5f * (float)i;
            vt_assert_close_f32(before, (float[]){want_b, want_b}, 2, 0, 0, "read before assign");
            vt_assert_close_f32(after, (float[]){want_a, want_a}, 2, 0, 0, "read after assign");
            vt_assert_close_f32(ret, (float[]){want_a, want_a}, 2, 0, 0, "variable returned");
            vt_assert_close_f32(now, (float[]){want_a, want_a}, 2, 0, 0, "eager code sees the update");
            free(before), free(after), free(ret), free(now);
        }
        /* the returned tensor is a copy: a later assign does not change it */
        vf_assign(v, vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 9.0));
        float *ret = vt_read(o[2]);
        assert_true(ret[0] == 4.5f);
        free(ret);
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* an assign inside a branch: the cond becomes an assign of a select */
static vf_status bump(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_status s = vf_assign_add(user, vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    out[0] = in[0];
    return s;
}

static vf_status keep(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    out[0] = in[0];
    return VF_OK;
}

static vf_status count_positive(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *pred = vf_greater(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.0));
    vf_status s = vf_cond(ctx, pred, bump, keep, 1, in, 1, out, user);
    if (s == VF_OK) out[1] = vf_mul(ctx, user, vf_fill(ctx, VF_F32, 0, NULL, 1.0)); /* after the cond */
    return s;
}

static void test_cond_with_assign(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_tensor *v = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0.0));
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "count_positive", .body = count_positive,
                                                                     .user = v, .n_inputs = 1, .n_outputs = 2});
        float xs[5] = {1, -1, 2, 3, -4};
        float counts[5] = {1, 1, 2, 3, 3};
        for (int i = 0; i < 5; i++) {
            vf_tensor *x = f32(ctx, 0, NULL, &xs[i]), *o[2];
            assert_int_equal(vf_function_call(fn, &x, o), VF_OK);
            assert_true(vt_read1(o[0]) == xs[i]);
            assert_true(vt_read1(o[1]) == counts[i]);
            assert_true(vt_read1(v) == counts[i]);
        }
        char *txt = vf_function_graph_text(fn);
        assert_null(strstr(txt, "cond("));
        assert_non_null(strstr(txt, "assign("));
        assert_non_null(strstr(txt, "where("));
        free(txt);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* Both branches assign a (then: a += x, else: a -= x), only then assigns
   b, and each branch reads a before its assign (the old value) and b
   after (then: the new a). Traced, the cond has no host round trip. */
typedef struct two_vars {
    vf_tensor *a, *b;
} two_vars;

static vf_status tv_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    two_vars *tv = user;
    vf_tensor *old = vf_mul(ctx, tv->a, vf_fill(ctx, VF_F32, 0, NULL, 1.0)); /* before the assign */
    vf_status s = vf_assign_add(tv->a, in[0]);
    if (s == VF_OK) s = vf_assign(tv->b, vf_add(ctx, tv->b, tv->a)); /* b += the new a */
    out[0] = vf_add(ctx, old, vf_fill(ctx, VF_F32, 0, NULL, 100.0));
    return s != VF_OK ? s : out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status tv_else(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    two_vars *tv = user;
    out[0] = vf_mul(ctx, tv->a, vf_fill(ctx, VF_F32, 0, NULL, 3.0)); /* the old a */
    vf_status s = vf_assign_sub(tv->a, in[0]);
    return s != VF_OK ? s : out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status tv_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    two_vars *tv = user;
    vf_tensor *pred = vf_greater(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.0));
    vf_status s = vf_cond(ctx, pred, tv_then, tv_else, 1, in, 1, out, user);
    if (s == VF_OK) out[1] = vf_add(ctx, vf_mul(ctx, tv->a, vf_fill(ctx, VF_F32, 0, NULL, 10.0)), tv->b);
    return s != VF_OK ? s : out[1] ? VF_OK : vf_status_get(ctx);
}

static void test_cond_assigns_select(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        two_vars tr = {vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 1.0)),
                       vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0.0))};
        two_vars ea = {vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 1.0)),
                       vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0.0))};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "two_vars", .body = tv_body,
                                                                     .user = &tr, .n_inputs = 1, .n_outputs = 2});
        assert_non_null(fn);
        float xs[6] = {2, -1, 3, 0, -5, 4};
        for (int i = 0; i < 6; i++) {
            vf_tensor *x = f32(ctx, 0, NULL, &xs[i]), *o[2], *e[2];
            assert_int_equal(vf_function_call(fn, &x, o), VF_OK);
            assert_int_equal(tv_body(ctx, &x, e, &ea), VF_OK); /* eager */
            assert_true(vt_read1(o[0]) == vt_read1(e[0]));
            assert_true(vt_read1(o[1]) == vt_read1(e[1]));
            assert_true(vt_read1(tr.a) == vt_read1(ea.a));
            assert_true(vt_read1(tr.b) == vt_read1(ea.b));
            if (bs[b] == VF_BACKEND_VULKAN) {
                vf_function_stats st;
                vf_function_stats_get(fn, &st);
                assert_int_equal(st.submits_per_call, 1); /* no predicate read back */
            }
        }
        /* a: 1 -> 3 (b 3) -> 4 -> 7 (b 10) -> 7 -> 12 -> 16 (b 26) */
        assert_true(vt_read1(tr.a) == 16.0f);
        assert_true(vt_read1(tr.b) == 26.0f);
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        char *txt = vf_function_graph_text(fn);
        assert_non_null(txt);
        assert_null(strstr(txt, "cond("));
        assert_non_null(strstr(txt, "where("));
        assert_non_null(strstr(txt, "assign("));
        free(txt);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* ---- variables passed as inputs ------------------------------------------------ */

/* v += 1; y = v * k: TF passes a variable by reference, so the body may
   assign it and later reads see the new value. */
static vf_status bump_input(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    if (vf_assign_add(in[0], vf_fill(ctx, VF_F32, 0, NULL, 1.0)) != VF_OK) return vf_status_get(ctx);
    out[0] = vf_mul(ctx, in[0], in[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void variable_input(vf_context *ctx, bool eager)
{
    float x[2] = {1, 2}, w[2] = {10, 20};
    int64_t n = 2;
    vf_tensor *v = vf_variable(ctx, f32(ctx, 1, &n, x)), *u = vf_variable(ctx, f32(ctx, 1, &n, w));
    vf_tensor *k = vf_fill(ctx, VF_F32, 1, &n, 3.0), *y = NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "bump", .body = bump_input,
                                                                 .n_inputs = 2, .n_outputs = 1});
    for (int call = 1; call <= 3; call++) {
        vf_tensor *in[2] = {v, k};
        assert_int_equal(vf_function_call(fn, in, &y), VF_OK);
        float *got = vt_read(y), *vv = vt_read(v);
        vt_assert_close_f32(got, (float[]){3.0f * (1 + call), 3.0f * (2 + call)}, 2, 0, 0, "y");
        vt_assert_close_f32(vv, (float[]){1.0f + call, 2.0f + call}, 2, 0, 0, "v");
        free(got);
        free(vv);
    }
    /* another variable: its own value, and v is left alone */
    vf_tensor *in[2] = {u, k};
    assert_int_equal(vf_function_call(fn, in, &y), VF_OK);
    float *got = vt_read(y), *uu = vt_read(u), *vv = vt_read(v);
    vt_assert_close_f32(got, (float[]){33, 63}, 2, 0, 0, "y of u");
    vt_assert_close_f32(uu, (float[]){11, 21}, 2, 0, 0, "u");
    vt_assert_close_f32(vv, (float[]){4, 5}, 2, 0, 0, "v untouched");
    free(got);
    free(uu);
    free(vv);
    if (!eager) assert_string_equal(vf_function_retrace_reason(fn),
                                    "input 0: traced with a variable, got another variable (variables go by "
                                    "reference)");
    /* a plain value in the variable's place cannot be assigned */
    in[0] = k;
    assert_int_equal(vf_function_call(fn, in, &y), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_assign_add", "not a variable", NULL);
    vf_function_destroy(fn);
}

/* A train step with the weights passed as an input: the gradient with
   respect to that variable and the update through it, traced == eager. */
static vf_status sgd_input(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    out[0] = vf_reduce_sum(ctx, vf_mul(ctx, vf_mul(ctx, in[0], in[0]), in[1]), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(tp, out[0], 1, &in[0], &g);
    vf_tape_end(tp);
    if (s == VF_OK) s = vf_assign_sub(in[0], vf_mul(ctx, g, vf_fill(ctx, VF_F32, 0, NULL, 0.1)));
    return s;
}

static void variable_input_train_step(vf_context *ctx, bool eager)
{
    (void)eager; /* the same values either way */
    int64_t n = 2;
    vf_tensor *w = vf_variable(ctx, f32(ctx, 1, &n, (float[]){1, 2})), *k = vf_fill(ctx, VF_F32, 1, &n, 3.0);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sgd", .body = sgd_input,
                                                                 .n_inputs = 2, .n_outputs = 1});
    /* loss = sum(3 w^2), w -= 0.1 * 6 w: w shrinks by 0.4 per step */
    double scale = 1;
    for (int step = 0; step < 3; step++, scale *= 0.4) {
        vf_tensor *in[2] = {w, k}, *loss = NULL;
        assert_int_equal(vf_function_call(fn, in, &loss), VF_OK);
        assert_true(fabs(vt_read1(loss) - 15 * scale * scale) <= 1e-5 * 15 * scale * scale);
        float *got = vt_read(w);
        vt_assert_close_f32(got, (float[]){(float)(0.4 * scale), (float)(0.8 * scale)}, 2, 1e-7, 1e-5, "w");
        free(got);
    }
    vf_function_destroy(fn);
}

/* Each variable-input test on every backend, traced and with
   vf_run_functions_eagerly: the same results. */
static void traced_and_eager(void (*fn)(vf_context *ctx, bool eager))
{
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++)
        for (int eager = 0; eager < 2; eager++) {
            vf_context *ctx = vt_context(bs[b]);
            vf_run_functions_eagerly(ctx, eager);
            fn(ctx, eager);
            vt_context_done(ctx);
        }
}

static vf_status times_plus(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user; /* v * x + v: d/dv = x + 1 */
    out[0] = vf_reduce_sum(ctx, vf_add(ctx, vf_mul(ctx, in[0], in[1]), in[0]), 0, NULL, false);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* An eager tape around a call whose input is a variable (TF's
   `with tape: add(v, 1.0)`): the variable is the call's input and, passed
   by reference, also a capture of the concrete function; its gradient
   counts once (it came out twice). */
static void variable_input_gradient(vf_context *ctx, bool eager)
{
    (void)eager;
    int64_t n = 2;
    vf_tensor *v = vf_variable(ctx, f32(ctx, 1, &n, (float[]){1, 2})), *x = f32(ctx, 1, &n, (float[]){3, 5});
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "times_plus", .body = times_plus,
                                                                 .n_inputs = 2, .n_outputs = 1});
    for (int round = 0; round < 2; round++) { /* traces, then replays */
        vf_tape *tp = vf_tape_begin(ctx);
        vf_tensor *y = NULL, *g = NULL;
        assert_int_equal(vf_function_call(fn, (vf_tensor *[]){v, x}, &y), VF_OK);
        assert_int_equal(vf_tape_gradient(tp, y, 1, &v, &g), VF_OK);
        vf_tape_end(tp);
        float *got = vt_read(g);
        vt_assert_close_f32(got, (float[]){4, 6}, 2, 0, 0, "d/dv");
        free(got);
    }
    vf_function_destroy(fn);
}

static void test_variable_input(void **state)
{
    (void)state;
    traced_and_eager(variable_input);
    traced_and_eager(variable_input_gradient);
}

static void test_variable_input_train_step(void **state)
{
    (void)state;
    traced_and_eager(variable_input_train_step);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variable_input),   cmocka_unit_test(test_variable_input_train_step),
        cmocka_unit_test(test_variables),        cmocka_unit_test(test_cond_with_assign),
        cmocka_unit_test(test_cond_assigns_select),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
