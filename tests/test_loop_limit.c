/* Kernels whose invocations loop long, on both codegen profiles
 * (VKFUSE_TEST_CAPS=cpu and gpu), against the CPU backend.
 *
 * llvmpipe (lavapipe) counts the iterations of all loops of one shader
 * invocation together and leaves every loop after 65535 of them, silently
 * (vf_device_caps.max_loop_iterations; src/vulkan/device.c). Before codegen
 * knew, a column sum over 65536 rows lost its last row, a reduce-all of
 * 2^25 elements missed its last element (sum 0 instead of 5), long
 * softmax rows and strided softmax columns came out wrong: all with VF_OK.
 * Now reductions split such loops into two steps, row ops and row groups
 * widen their workgroup (or give a strided column a workgroup), and a
 * matmul with a huge inner dimension splits K over workgroups (it was
 * VF_ERROR_UNSUPPORTED) — never a wrong number with VF_OK.
 * Data are small integers where sums are compared, so they are exact.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const profiles[2] = {"cpu", "gpu"};

/* A Vulkan context under codegen profile p, and a CPU one. */
static vf_context *vk_under(const char *p)
{
    const char *old = getenv("VKFUSE_TEST_CAPS");
    char *saved = old ? strdup(old) : NULL;
    setenv("VKFUSE_TEST_CAPS", p, 1);
    setenv("VKFUSE_PROFILE", "1", 1);   /* kernel names for test_long_row_group */
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_PROFILE");
    if (saved) setenv("VKFUSE_TEST_CAPS", saved, 1);
    else unsetenv("VKFUSE_TEST_CAPS");
    free(saved);
    return ctx;
}

static float *small_ints(size_t n, uint64_t seed)
{
    int32_t *iv = malloc(sizeof(int32_t) * n);
    float *x = malloc(sizeof(float) * n);
    assert_true(iv && x);
    vt_fill_int(iv, n, -3, 3, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)iv[i];
    free(iv);
    return x;
}

typedef vf_tensor *(*unary_fn)(vf_context *ctx, vf_tensor *x);

static vf_tensor *sum0(vf_context *c, vf_tensor *x) { int a = 0; return vf_reduce_sum(c, x, 1, &a, false); }
static vf_tensor *max0(vf_context *c, vf_tensor *x) { int a = 0; return vf_reduce_max(c, x, 1, &a, false); }
static vf_tensor *argmax0(vf_context *c, vf_tensor *x) { return vf_argmax(c, x, 0); }
static vf_tensor *softmax0(vf_context *c, vf_tensor *x) { return vf_softmax(c, x, 0); }
static vf_tensor *log_softmax1(vf_context *c, vf_tensor *x) { return vf_log_softmax(c, x, -1); }

/* op(x) on Vulkan equals op(x) on the CPU backend (exactly when atol is 0) */
static void check_op(vf_context *vk, vf_context *cpu, const char *what, unary_fn op, int rank, const int64_t *shape,
                     const float *x, double atol, double rtol)
{
    vf_scope_begin(vk);
    vf_scope_begin(cpu);
    vf_tensor *a = op(vk, vf_tensor_from_host(vk, VF_F32, rank, shape, x));
    vf_tensor *b = op(cpu, vf_tensor_from_host(cpu, VF_F32, rank, shape, x));
    assert_int_equal(vf_status_get(vk), VF_OK);
    assert_int_equal(vf_tensor_numel(a), vf_tensor_numel(b));
    void *ga = vt_read(a), *gb = vt_read(b);
    if (vf_tensor_dtype(a) == VF_F32)
        vt_assert_close_f32(ga, gb, (size_t)vf_tensor_numel(a), atol, rtol, what);
    else
        vt_assert_equal_bytes(ga, gb, vf_tensor_bytes(a), what);
    free(ga);
    free(gb);
    vf_scope_end(vk);
    vf_scope_end(cpu);
}

/* Column reductions and a strided softmax over 70001 rows: one thread per
   column looped 70001 (softmax: 3 x 70001) times. Rows of 300007: eight
   lanes (the CPU profile) loop 3 x 37501 times. */
static void test_long_rows_and_columns(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    enum { R = 70001, C = 3, L = 300007 };
    float *col = small_ints((size_t)R * C, 1), *row = malloc(sizeof(float) * 2 * L);
    assert_non_null(row);
    vt_fill_uniform(row, 2 * L, -4, 4, 2);
    const int64_t sc[2] = {R, C}, sr[2] = {2, L};
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    for (int p = 0; p < 2; p++) {
        vf_context *vk = vk_under(profiles[p]);
        char what[96];
        snprintf(what, sizeof what, "sum over 70001 rows (%s profile)", profiles[p]);
        check_op(vk, cpu, what, sum0, 2, sc, col, 0, 0);
        snprintf(what, sizeof what, "max over 70001 rows (%s profile)", profiles[p]);
        check_op(vk, cpu, what, max0, 2, sc, col, 0, 0);
        snprintf(what, sizeof what, "argmax over 70001 rows (%s profile)", profiles[p]);
        check_op(vk, cpu, what, argmax0, 2, sc, col, 0, 0);
        snprintf(what, sizeof what, "softmax over 70001 rows (%s profile)", profiles[p]);
        check_op(vk, cpu, what, softmax0, 2, sc, col, 1e-9, 1e-4);
        snprintf(what, sizeof what, "log_softmax of rows of 300007 (%s profile)", profiles[p]);
        check_op(vk, cpu, what, log_softmax1, 2, sr, row, 1e-4, 1e-5);
        vt_context_done(vk);
    }
    vt_context_done(cpu);
    free(col);
    free(row);
}

/* A fused row group (x * 0.5 + 1, softmax) over rows of 300007: on the CPU
   profile eight lanes walk each row three times. */
static vf_status group_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.5)),
                          vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    out[0] = vf_softmax(ctx, h, -1);
    return vf_status_get(ctx);
}

static float *run_group(vf_context *ctx, const float *x, const int64_t *shape, char *kernels, size_t klen)
{
    vf_scope_begin(ctx);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "long_rows", .body = group_body,
                                                                   .n_inputs = 1, .n_outputs = 1});
    assert_non_null(fn);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, shape, x), *out = NULL;
    assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
    float *y = vt_read(out);
    if (kernels) {
        vf_function_profile pr;
        assert_int_equal(vf_function_profile_get(fn, &pr), VF_OK);
        kernels[0] = '\0';
        for (int k = 0; pr.profiled && k < pr.n_kernels; k++) {
            strncat(kernels, pr.kernels[k].name, klen - strlen(kernels) - 2);
            strcat(kernels, " ");
        }
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    return y;
}

static void test_long_row_group(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    enum { L = 300007 };
    const int64_t shape[2] = {2, L};
    float *x = malloc(sizeof(float) * 2 * L);
    assert_non_null(x);
    vt_fill_uniform(x, 2 * L, -8, 8, 3);
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    float *want = run_group(cpu, x, shape, NULL, 0);
    vt_context_done(cpu);
    for (int p = 0; p < 2; p++) {
        vf_context *vk = vk_under(profiles[p]);
        char kernels[512], what[64];
        float *got = run_group(vk, x, shape, kernels, sizeof kernels);
        /* the row group kernel ran (named rows<n>_...), not a split plan */
        fprintf(stderr, "%s profile kernels: %s\n", profiles[p], kernels);
        assert_non_null(strstr(kernels, "rows"));
        snprintf(what, sizeof what, "fused softmax(x * 0.5 + 1), %s profile", profiles[p]);
        vt_assert_close_f32(got, want, 2 * L, 1e-10, 1e-4, what);
        free(got);
        vt_context_done(vk);
    }
    free(want);
    free(x);
}

/* The case: 2^25 zeros with a 5 at the end (f16: 64 MiB). */
static void test_reduce_all_2_pow_25(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    const int64_t n = (int64_t)1 << 25;
    uint16_t *x = calloc((size_t)n, sizeof *x);
    assert_non_null(x);
    x[n - 1] = 0x4500;   /* 5.0 in f16 */
    for (int p = 0; p < 2; p++) {
        vf_context *vk = vk_under(profiles[p]);
        vf_scope_begin(vk);
        vf_tensor *t = vf_tensor_from_host(vk, VF_F16, 1, &n, x);
        vf_tensor *r[3] = {vf_cast(vk, vf_reduce_sum(vk, t, 0, NULL, false), VF_F32),
                           vf_cast(vk, vf_reduce_max(vk, t, 0, NULL, false), VF_F32), vf_argmax(vk, t, 0)};
        float s = 0, m = 0;
        int32_t a = 0;
        assert_int_equal(vf_tensor_read(r[0], &s, sizeof s), VF_OK);
        assert_int_equal(vf_tensor_read(r[1], &m, sizeof m), VF_OK);
        assert_int_equal(vf_tensor_read(r[2], &a, sizeof a), VF_OK);
        if (s != 5 || m != 5 || a != n - 1)
            fprintf(stderr, "%s profile: sum %g max %g argmax %d (want 5 5 %lld)\n", profiles[p], s, m, a,
                    (long long)(n - 1));
        assert_true(s == 5 && m == 5 && a == n - 1);
        vf_scope_end(vk);
        vt_context_done(vk);
    }
    free(x);
}

/* A matmul whose inner dimension no invocation may loop over on lavapipe:
   K is split over workgroups (partial sums added in a second step) and the
   numbers are exact (small integers), under both codegen profiles. */
static void test_matmul_long_k(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    enum { K = 300000 };
    float *a = small_ints(2 * K, 4), *b = small_ints(2 * K, 5);
    double want[4] = {0};
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < K; k++) want[i * 2 + j] += (double)a[i * K + k] * b[k * 2 + j];
    const int64_t sa[2] = {2, K}, sb[2] = {K, 2};
    for (int p = 0; p < 2; p++) {
        vf_context *vk = vk_under(profiles[p]);
        vf_scope_begin(vk);
        vf_tensor *c = vf_matmul(vk, vf_tensor_from_host(vk, VF_F32, 2, sa, a), vf_tensor_from_host(vk, VF_F32, 2, sb, b));
        if (vf_status_get(vk) != VF_OK) fail_msg("%s: %s", profiles[p], vf_error_message(vk));
        float got[4];
        assert_int_equal(vf_tensor_read(c, got, sizeof got), VF_OK);
        for (int i = 0; i < 4; i++)
            if (got[i] != (float)want[i]) fail_msg("%s profile: C[%d] = %.1f, want %.1f", profiles[p], i, got[i], want[i]);
        vf_scope_end(vk);
        vt_context_done(vk);
    }
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_rows_and_columns),
        cmocka_unit_test(test_long_row_group),
        cmocka_unit_test(test_reduce_all_2_pow_25),
        cmocka_unit_test(test_matmul_long_k),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
