/* VKFUSE_TEST_CAPS (src/vulkan/device.c): the override that makes codegen
 * take the GPU tuning profile on lavapipe, so that the kernels a GPU runs
 * (shared-memory matmul tiles, 256-wide rows and reductions combining many
 * subgroups through shared memory) are executed and checked in CI, not
 * only compiled. tests/CMakeLists.txt runs the op and fusion tests a second
 * time under VKFUSE_TEST_CAPS=gpu; this file checks the override itself:
 *  - under gpu and cpu the device's caps differ in the profile only (and
 *    gpu-nosubgroup also turns subgroup arithmetic off): the
 *    limits, shared memory and subgroup size stay the driver's, so every
 *    kernel stays within what lavapipe really executes;
 *  - a traced function (matmul + bias + relu, softmax, a column sum) runs
 *    other kernels under each profile (its profile names the matmul
 *    kernel: "_tile_" for shared-memory tiles, "_lane" for the CPU
 *    profile's register blocks) and both equal the CPU backend;
 *  - a value that is not a profile is VF_ERROR_INVALID_ARGUMENT naming the
 *    variable, with VF_BACKEND_AUTO too (no silent fallback to the CPU).
 */
#include "testutil.h"
#include "vk_test_common.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_device_caps caps_under(const char *profile)
{
    char *saved = vt_set_caps_env(profile);
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_device_caps c = h.rt->dev.caps;
    rt_done(&h);
    vt_restore_caps_env(saved);
    return c;
}

static void test_caps_change_only_the_profile(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_device_caps dev = caps_under(NULL), gpu = caps_under("gpu"), cpu = caps_under("CPU");
    vf_device_caps same = caps_under("device"), nosg = caps_under("gpu-nosubgroup");
    assert_false(nosg.is_cpu || nosg.subgroup_arithmetic || nosg.subgroup_shuffle);
    assert_int_equal(nosg.subgroup_size, dev.subgroup_size);
    assert_int_equal(nosg.max_workgroup_invocations, dev.max_workgroup_invocations);
    assert_int_equal(nosg.shared_memory_bytes, dev.shared_memory_bytes);
    assert_false(gpu.is_cpu);
    assert_true(cpu.is_cpu);
    assert_int_equal(same.is_cpu, dev.is_cpu);
    const vf_device_caps *v[3] = {&gpu, &cpu, &same};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(v[i]->subgroup_size, dev.subgroup_size);
        assert_int_equal(v[i]->subgroup_arithmetic, dev.subgroup_arithmetic);
        assert_int_equal(v[i]->subgroup_shuffle, dev.subgroup_shuffle);
        assert_int_equal(v[i]->max_workgroup_invocations, dev.max_workgroup_invocations);
        assert_memory_equal(v[i]->max_workgroup_size, dev.max_workgroup_size, sizeof dev.max_workgroup_size);
        assert_memory_equal(v[i]->max_workgroup_count, dev.max_workgroup_count, sizeof dev.max_workgroup_count);
        assert_int_equal(v[i]->shared_memory_bytes, dev.shared_memory_bytes);
        assert_int_equal(v[i]->max_storage_buffer_range, dev.max_storage_buffer_range);
        assert_int_equal(v[i]->storage16, dev.storage16);
        assert_int_equal(v[i]->storage8, dev.storage8);
    }
}

/* ---- a traced function under both profiles ---------------------------------- */

enum { M = 70, K = 33, N = 67, ROWS = 3000, COLS = 5 };

/* relu(x @ w + b), softmax(x @ w) and the column sums of c */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *mm = vf_matmul(ctx, in[0], in[1]);
    out[0] = vf_relu(ctx, vf_add(ctx, mm, in[2]));
    out[1] = vf_softmax(ctx, mm, -1);
    int axis0 = 0;
    out[2] = vf_reduce_sum(ctx, in[3], 1, &axis0, false);
    return vf_status_get(ctx);
}

typedef struct {
    float *y[3];
    char kernels[1024];   /* the profile's kernel names, space separated */
} run_result;

static const int64_t out_numel[3] = {M * N, M * N, COLS};

static void run(vf_context *ctx, run_result *r)
{
    static const int64_t sx[2] = {M, K}, sw[2] = {K, N}, sb[1] = {N}, sc[2] = {ROWS, COLS};
    float *x = malloc(sizeof(float) * M * K), *w = malloc(sizeof(float) * K * N), b[N];
    float *c = malloc(sizeof(float) * ROWS * COLS);
    assert_true(x && w && c);
    vt_fill_uniform(x, M * K, -1, 1, 1);
    vt_fill_uniform(w, K * N, -1, 1, 2);
    vt_fill_uniform(b, N, -1, 1, 3);
    vt_fill_uniform(c, ROWS * COLS, -1, 1, 4);
    vf_scope_begin(ctx);
    vf_tensor *in[4] = {vf_tensor_from_host(ctx, VF_F32, 2, sx, x), vf_tensor_from_host(ctx, VF_F32, 2, sw, w),
                        vf_tensor_from_host(ctx, VF_F32, 1, sb, b), vf_tensor_from_host(ctx, VF_F32, 2, sc, c)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "gpucaps", .body = body,
                                                                   .n_inputs = 4, .n_outputs = 3});
    assert_non_null(fn);
    vf_tensor *out[3];
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    for (int i = 0; i < 3; i++) {
        r->y[i] = vt_read(out[i]);
        assert_int_equal(vf_tensor_numel(out[i]), out_numel[i]);
    }
    r->kernels[0] = '\0';
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
    if (vf_backend_get(ctx) == VF_BACKEND_VULKAN) {
        assert_true(p.profiled && p.planned);
        for (int k = 0; k < p.n_kernels; k++) {
            strncat(r->kernels, p.kernels[k].name, sizeof r->kernels - strlen(r->kernels) - 2);
            strcat(r->kernels, " ");
        }
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    free(x);
    free(w);
    free(c);
}

static void run_under(const char *profile, vf_backend backend, run_result *r)
{
    char *saved = vt_set_caps_env(profile);
    setenv("VKFUSE_PROFILE", "1", 1);
    vf_context *ctx = vt_context(backend);
    unsetenv("VKFUSE_PROFILE");
    run(ctx, r);
    vt_context_done(ctx);
    vt_restore_caps_env(saved);
}

static void test_profiles_run_other_kernels(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    run_result want, gpu, cpu, nosg;
    run_under(NULL, VF_BACKEND_CPU, &want);
    run_under("gpu", VF_BACKEND_VULKAN, &gpu);
    run_under("cpu", VF_BACKEND_VULKAN, &cpu);
    run_under("gpu-nosubgroup", VF_BACKEND_VULKAN, &nosg);
    assert_non_null(strstr(nosg.kernels, "_tile_"));
    printf("VKFUSE_TEST_CAPS=gpu kernels: %s\nVKFUSE_TEST_CAPS=cpu kernels: %s\n", gpu.kernels, cpu.kernels);
    /* the matmul (fused with its bias and relu) is the shared-memory tile
       kernel under gpu, the register-block one under cpu */
    assert_non_null(strstr(gpu.kernels, "_tile_"));
    assert_null(strstr(gpu.kernels, "_lane"));
    assert_non_null(strstr(cpu.kernels, "_lane"));
    assert_null(strstr(cpu.kernels, "_tile_"));
    static const char *const what[3] = {"relu(x@w+b)", "softmax(x@w)", "column sums"};
    for (int i = 0; i < 3; i++) {
        char msg[64];
        snprintf(msg, sizeof msg, "%s, GPU profile", what[i]);
        vt_assert_close_f32(gpu.y[i], want.y[i], (size_t)out_numel[i], 1e-4, 1e-4, msg);
        snprintf(msg, sizeof msg, "%s, CPU profile", what[i]);
        vt_assert_close_f32(cpu.y[i], want.y[i], (size_t)out_numel[i], 1e-4, 1e-4, msg);
        snprintf(msg, sizeof msg, "%s, GPU profile without subgroups", what[i]);
        vt_assert_close_f32(nosg.y[i], want.y[i], (size_t)out_numel[i], 1e-4, 1e-4, msg);
        free(nosg.y[i]);
        free(want.y[i]);
        free(gpu.y[i]);
        free(cpu.y[i]);
    }
}

/* ---- a bad value ----------------------------------------------------------------- */

static void test_bad_value_is_an_error(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    char *saved = vt_set_caps_env("gpu-ish");
    const vf_backend backends[2] = {VF_BACKEND_VULKAN, VF_BACKEND_AUTO};
    for (int i = 0; i < 2; i++) {
        vf_context *ctx = NULL;
        vf_context_desc d = {.backend = backends[i]};
        assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_INVALID_ARGUMENT);
        assert_null(ctx); /* a failed create hands out nothing; vf_error_message(NULL) is why */
        assert_non_null(strstr(vf_error_message(ctx), "VKFUSE_TEST_CAPS=gpu-ish"));
        assert_non_null(strstr(vf_error_message(ctx), "use gpu, gpu-nosubgroup, cpu, cpu-notexel or device"));
        vf_context_destroy(ctx);
    }
    vt_restore_caps_env(saved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps_change_only_the_profile),
        cmocka_unit_test(test_profiles_run_other_kernels),
        cmocka_unit_test(test_bad_value_is_an_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
