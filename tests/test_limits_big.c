/* Real tensors past the sizes where lavapipe's limits bite (docs/TESTING.md,
 * "Device limits"): a 2^25-element f32 tensor (all of lavapipe's 128 MiB
 * maxStorageBufferRange) and a 40M-element f16 tensor, reduced every way
 * (full, row [1,n] over -1, column [n,1] over 0, argmax, norm) eagerly and
 * in a traced function; a column reduction of 200000 rows and a softmax
 * over a row of 600000. llvmpipe ends every shader invocation's loops
 * after 65535 iterations in all, so each of these lost data silently
 * before kernels were sized to that budget. A matmul with K = 600000 gave
 * a partial sum; it now fails with an error saying why.
 *
 * The data are zeros with one marked element at the very end, so every
 * expected value is exact and known without a reference backend. Few big
 * tensors: each pass over 128 MiB costs memory bandwidth on llvmpipe. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N25 ((int64_t)1 << 25)


static float read_f32(vf_tensor *t)
{
    float v = -1.0f;
    assert_non_null(t);
    assert_int_equal(vf_tensor_read(t, &v, sizeof v), VF_OK);
    return v;
}

static int32_t read_i32(vf_tensor *t)
{
    int32_t v = -1;
    assert_non_null(t);
    assert_int_equal(vf_tensor_read(t, &v, sizeof v), VF_OK);
    return v;
}

/* sum, max, argmax, norm of x, of x as [1,n] over -1 and as [n,1] over 0 */
enum { N_OUT = 9 };

static vf_status reductions(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    int64_t n = vf_tensor_numel(x);
    vf_tensor *row = vf_reshape(ctx, x, 2, (int64_t[]){1, n});
    vf_tensor *col = vf_reshape(ctx, x, 2, (int64_t[]){n, 1});
    out[0] = vf_reduce_sum(ctx, x, 0, NULL, false);
    out[1] = vf_reduce_max(ctx, x, 0, NULL, false);
    out[2] = vf_argmax(ctx, x, 0);
    out[3] = vf_norm(ctx, x);
    out[4] = vf_reduce_sum(ctx, row, 1, (int[]){-1}, false);
    out[5] = vf_reduce_max(ctx, row, 1, (int[]){-1}, false);
    out[6] = vf_argmax(ctx, row, -1);
    out[7] = vf_reduce_sum(ctx, col, 1, (int[]){0}, false);
    out[8] = vf_argmax(ctx, col, 0);
    for (int i = 0; i < N_OUT; i++)
        if (!out[i]) return vf_status_get(ctx);
    return VF_OK;
}

static void check_reductions(vf_tensor **out, const char *how)
{
    static const bool is_arg[N_OUT] = {false, false, true, false, false, false, true, false, true};
    double got[N_OUT];
    for (int i = 0; i < N_OUT; i++) got[i] = is_arg[i] ? (double)read_i32(out[i]) : (double)read_f32(out[i]);
    printf("%s: sum %g max %g argmax %.0f norm %g | row sum %g max %g argmax %.0f | col sum %g argmax %.0f\n",
           how, got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8]);
    for (int i = 0; i < N_OUT; i++) {
        double want = is_arg[i] ? (double)(N25 - 1) : 5.0;
        if (got[i] != want) fail_msg("%s: output %d is %.9g, want %.9g", how, i, got[i], want);
    }
}

static void test_f32_2p25_eager_and_traced(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float *x = calloc((size_t)N25, sizeof *x);
    assert_non_null(x);
    x[N25 - 1] = 5.0f;
    vf_scope_begin(ctx);
    vf_tensor *big_f32 = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N25}, x);
    free(x);
    assert_non_null(big_f32);

    vf_tensor *out[N_OUT];
    assert_int_equal(reductions(ctx, &big_f32, out, NULL), VF_OK);
    check_reductions(out, "eager");

    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "big_reductions", .body = reductions,
                                                                 .n_inputs = 1, .n_outputs = N_OUT});
    assert_non_null(fn);
    assert_int_equal(vf_function_call(fn, &big_f32, out), VF_OK);
    check_reductions(out, "traced");
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* 40M f16 elements: 80 MB, within the storage range, past 2^25 elements */
static void test_f16_40m(void **state)
{
    (void)state;
    const int64_t n = 40000000;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    uint16_t *x = calloc((size_t)n, sizeof *x);
    assert_non_null(x);
    x[n / 2] = 0x3c00;   /* 1.0 */
    x[n - 1] = 0x4000;   /* 2.0 */
    vf_scope_begin(ctx);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F16, 1, (int64_t[]){n}, x);
    free(x);
    vf_tensor *col = vf_reshape(ctx, t, 2, (int64_t[]){n, 1});
    uint16_t s = 0, m = 0;
    assert_int_equal(vf_tensor_read(vf_reduce_sum(ctx, t, 0, NULL, false), &s, 2), VF_OK);
    assert_int_equal(vf_tensor_read(vf_reduce_max(ctx, t, 0, NULL, false), &m, 2), VF_OK);
    int32_t a = read_i32(vf_argmax(ctx, t, 0));
    int32_t ac = read_i32(vf_argmax(ctx, col, 0));
    printf("f16 [%lld]: sum %#x max %#x argmax %d column argmax %d\n", (long long)n, s, m, a, ac);
    assert_int_equal(s, 0x4200);   /* 3.0 */
    assert_int_equal(m, 0x4000);
    assert_int_equal(a, n - 1);
    assert_int_equal(ac, n - 1);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* Kernels whose invocations loop over one long dimension: a thread per
   column over 200000 rows, a softmax row of 600000, a dot product of
   600000. Small tensors (a few MB), long loops. */
static void test_long_loops(void **state)
{
    (void)state;
    const int64_t R = 200000, C = 600000;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vf_scope_begin(ctx);
    float *x = calloc((size_t)(R * 3), sizeof *x), *y = calloc((size_t)C, sizeof *y),
          *ones = malloc((size_t)C * sizeof *ones), *sm = malloc((size_t)C * sizeof *sm);
    assert_true(x && y && ones && sm);
    x[(R - 1) * 3 + 1] = 7.0f;
    y[C - 1] = 30.0f;
    for (int64_t i = 0; i < C; i++) ones[i] = 1.0f;

    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, 3}, x);
    float cs[3], cm[3];
    int32_t ca[3];
    assert_int_equal(vf_tensor_read(vf_reduce_sum(ctx, t, 1, (int[]){0}, false), cs, sizeof cs), VF_OK);
    assert_int_equal(vf_tensor_read(vf_reduce_max(ctx, t, 1, (int[]){0}, false), cm, sizeof cm), VF_OK);
    assert_int_equal(vf_tensor_read(vf_argmax(ctx, t, 0), ca, sizeof ca), VF_OK);
    printf("[%lld,3] over 0: sum %g %g %g max %g %g %g argmax %d %d %d\n", (long long)R, cs[0], cs[1], cs[2],
           cm[0], cm[1], cm[2], ca[0], ca[1], ca[2]);
    const float ws[3] = {0, 7, 0};
    const int32_t wa[3] = {0, (int32_t)R - 1, 0};
    vt_assert_close_f32(cs, ws, 3, 0, 0, "column sums");
    vt_assert_close_f32(cm, ws, 3, 0, 0, "column maxima");
    for (int j = 0; j < 3; j++) assert_int_equal(ca[j], wa[j]);

    vf_tensor *u = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){1, C}, y);
    assert_int_equal(vf_tensor_read(vf_softmax(ctx, u, -1), sm, (size_t)C * sizeof *sm), VF_OK);
    /* e^30 / (e^30 + C - 1) and 1 / (e^30 + C - 1) */
    double den = exp(30.0) + (double)(C - 1);
    printf("softmax [1,%lld]: first %g last %g\n", (long long)C, sm[0], sm[C - 1]);
    assert_float_equal(sm[C - 1], exp(30.0) / den, 1e-5);
    assert_float_equal(sm[0] / (1.0 / den), 1.0, 1e-4);

    vf_tensor *a = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){1, C}, ones);
    vf_tensor *b = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){C, 1}, ones);
    /* K past the loop budget: split over workgroups, the whole sum (it
       was VF_ERROR_UNSUPPORTED, and before that a partial sum) */
    vf_tensor *dot = vf_matmul(ctx, a, b);
    float v = -1.0f;
    vf_status st = dot ? vf_tensor_read(dot, &v, sizeof v) : vf_status_get(ctx);
    printf("matmul K=%lld: %s %g %s\n", (long long)C, vf_status_name(st), v, vf_error_message(ctx));
    assert_int_equal(st, VF_OK);
    assert_float_equal(v, (double)C, 0.5);
    /* the same by hand: K in 4 slices, a batched matmul and a sum */
    vf_tensor *as = vf_transpose(ctx, vf_reshape(ctx, a, 3, (int64_t[]){1, 4, C / 4}), (int[]){1, 0, 2});
    vf_tensor *bs = vf_reshape(ctx, b, 3, (int64_t[]){4, C / 4, 1});
    float split = read_f32(vf_reduce_sum(ctx, vf_matmul(ctx, as, bs), 1, (int[]){0}, false));
    printf("matmul K=%lld in 4 slices: %g\n", (long long)C, split);
    assert_float_equal(split, (double)C, 0.5);
    free(x);
    free(y);
    free(ones);
    free(sm);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

int main(void)
{
    if (!vt_have_vulkan()) {
        printf("no Vulkan: nothing to run\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_2p25_eager_and_traced),
        cmocka_unit_test(test_f16_40m),
        cmocka_unit_test(test_long_loops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
