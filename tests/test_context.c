/* Context creation: backend choice, device choice, the CPU fallback when
 * no Vulkan device exists, and its messages. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_defaults(void **state)
{
    (void)state;
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_non_null(ctx);
    if (vt_have_vulkan()) assert_int_equal(vf_backend_get(ctx), VF_BACKEND_VULKAN);
    assert_true(strlen(vf_device_name(ctx)) > 0);
    assert_int_equal(vf_status_get(ctx), VF_OK);
    assert_string_equal(vf_error_message(ctx), "");
    vf_context_destroy(ctx);
    assert_int_equal(vf_context_create(NULL, NULL), VF_ERROR_INVALID_ARGUMENT);
    vf_context_destroy(NULL);
}

static void test_cpu(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_CPU);
    assert_non_null(strstr(vf_device_name(ctx), "CPU"));
    vt_context_done(ctx);
    /* VKFUSE_BACKEND=cpu steers AUTO */
    setenv("VKFUSE_BACKEND", "cpu", 1);
    vf_context *c2 = NULL;
    assert_int_equal(vf_context_create(NULL, &c2), VF_OK);
    assert_int_equal(vf_backend_get(c2), VF_BACKEND_CPU);
    vf_context_destroy(c2);
    setenv("VKFUSE_BACKEND", "tpu", 1);
    assert_int_equal(vf_context_create(NULL, &c2), VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vf_error_message(c2), "VKFUSE_BACKEND=tpu"));
    vf_context_destroy(c2);
    unsetenv("VKFUSE_BACKEND");
}

static void test_bad_backend(void **state)
{
    (void)state;
    vf_context_desc d = {.backend = (vf_backend)9};
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vf_error_message(ctx), "backend 9"));
    int64_t s[1] = {1};
    assert_null(vf_fill(ctx, VF_F32, 1, s, 0)); /* no backend: ops fail cleanly */
    vf_context_destroy(ctx);
}

/* With no Vulkan driver (an ICD list that names nothing), AUTO falls back
   to the CPU and says why; VULKAN fails with a clear message. */
static void test_fallback(void **state)
{
    (void)state;
    setenv("VK_ICD_FILENAMES", "/nonexistent/vkfuse_no_icd.json", 1);
    setenv("VK_DRIVER_FILES", "/nonexistent/vkfuse_no_icd.json", 1);
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_CPU);
    assert_non_null(strstr(vf_device_name(ctx), "no Vulkan device"));
    int64_t s[1] = {3};
    float v[3];
    assert_int_equal(vf_tensor_read(vf_exp(ctx, vf_fill(ctx, VF_F32, 1, s, 0)), v, sizeof v), VF_OK);
    assert_true(v[2] == 1.0f);
    vf_context_destroy(ctx);

    vf_context_desc d = {.backend = VF_BACKEND_VULKAN};
    assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_DEVICE);
    assert_non_null(ctx);
    assert_non_null(strstr(vf_error_message(ctx), "VF_BACKEND_VULKAN"));
    assert_null(vf_fill(ctx, VF_F32, 1, s, 0));
    vf_context_destroy(ctx);
    unsetenv("VK_ICD_FILENAMES");
    unsetenv("VK_DRIVER_FILES");
}

/* With no Vulkan loader at all (VKFUSE_VULKAN_LOADER names a missing
   library), the same fallback, and the message says what to install. */
static void test_no_loader(void **state)
{
    (void)state;
    setenv("VKFUSE_VULKAN_LOADER", "/nonexistent/libvulkan.so.1", 1);
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_CPU);
    assert_non_null(strstr(vf_device_name(ctx), "Vulkan loader not found"));
    vf_context_destroy(ctx);
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN};
    assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "libvulkan1"));
    vf_context_destroy(ctx);
    vf_device_info info[2];
    char err[256] = "";
    assert_int_equal(vf_devices(info, 2, err, sizeof err), 0);
    unsetenv("VKFUSE_VULKAN_LOADER");
}

static void test_device_choice(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_device_info info[8];
    char err[256] = "";
    int n = vf_devices(info, 8, err, sizeof err);
    assert_true(n >= 1);
    int chosen = -1;
    for (int i = 0; i < n && i < 8; i++)
        if (info[i].chosen) chosen = i;
    assert_true(chosen >= 0);
    /* by index */
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN, .pick_device = true, .device_index = n - 1};
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    assert_non_null(strstr(vf_device_name(ctx), info[n - 1].name));
    vf_context_destroy(ctx);
    /* by name substring through VKFUSE_DEVICE, case-insensitive */
    char sub[8];
    snprintf(sub, sizeof sub, "%.3s", info[0].name);
    for (char *p = sub; *p; p++) *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
    setenv("VKFUSE_DEVICE", sub, 1);
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_VULKAN);
    vf_context_destroy(ctx);
    /* a name that matches nothing: the message lists the devices */
    setenv("VKFUSE_DEVICE", "no-such-gpu-xyz", 1);
    d = (vf_context_desc){.backend = VF_BACKEND_VULKAN};
    assert_int_not_equal(vf_context_create(&d, &ctx), VF_OK);
    assert_non_null(strstr(vf_error_message(ctx), "no-such-gpu-xyz"));
    assert_non_null(strstr(vf_error_message(ctx), info[0].name));
    vf_context_destroy(ctx);
    /* under VF_BACKEND_AUTO too: no silent CPU fallback for a named device
       (VKFUSE_DEVICE=7 used to run on the CPU) */
    char idx[16];
    snprintf(idx, sizeof idx, "%d", n + 6);
    setenv("VKFUSE_DEVICE", idx, 1);
    assert_int_equal(vf_context_create(NULL, &ctx), VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "no device with that index"));
    assert_non_null(strstr(vf_error_message(ctx), info[0].name));
    vf_context_destroy(ctx);
    setenv("VKFUSE_DEVICE", "no-such-gpu-xyz", 1);
    assert_int_equal(vf_context_create(NULL, &ctx), VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "matches no Vulkan device"));
    vf_context_destroy(ctx);
    /* VF_BACKEND_CPU does not look at it */
    d = (vf_context_desc){.backend = VF_BACKEND_CPU};
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    vf_context_destroy(ctx);
    unsetenv("VKFUSE_DEVICE");
    d = (vf_context_desc){.pick_device = true, .device_index = n + 5};
    assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_DEVICE);
    vf_context_destroy(ctx);
    /* an index out of range */
    d = (vf_context_desc){.backend = VF_BACKEND_VULKAN, .pick_device = true, .device_index = n + 5};
    assert_int_not_equal(vf_context_create(&d, &ctx), VF_OK);
    vf_context_destroy(ctx);
}

/* VKFUSE_TIMEOUT_MS: a wait for a batch running past it fails with
   VF_ERROR_DEVICE "timed out after ... in vkWaitForFences", and the context
   is then lost: later calls fail at once, destroy still frees everything
   (lavapipe finishes the batch: its loops end), and a new context works.
   Values that are no positive whole number are refused at creation. */
static void test_timeout(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    setenv("VKFUSE_TIMEOUT_MS", "1", 1);
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN};
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    unsetenv("VKFUSE_TIMEOUT_MS"); /* read at creation only */
    int64_t shape[2] = {768, 768};
    vf_tensor *a = vf_fill(ctx, VF_F32, 2, shape, 0.5);
    vf_tensor *m = vf_matmul(ctx, a, a); /* ~0.9 GFLOP: far over 1 ms on lavapipe */
    size_t n = (size_t)768 * 768;
    float *out = calloc(n, sizeof *out);
    assert_non_null(out);
    assert_int_equal(vf_tensor_read(m, out, n * sizeof *out), VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "timed out after 1 ms in vkWaitForFences"));
    assert_true(vf_context_lost(ctx));
    vf_error_clear(ctx);
    assert_int_equal(vf_tensor_read(m, out, n * sizeof *out), VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "the device was lost during vkWaitForFences"));
    assert_non_null(strstr(vf_error_message(ctx), "create a new context"));
    vf_error_clear(ctx);
    assert_null(vf_add(ctx, a, a));
    assert_int_equal(vf_status_get(ctx), VF_ERROR_DEVICE);
    vf_context_destroy(ctx);
    /* a new context in the same process, with the default limit */
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    assert_false(vf_context_lost(ctx));
    a = vf_fill(ctx, VF_F32, 2, shape, 0.5);
    m = vf_matmul(ctx, a, a);
    assert_int_equal(vf_tensor_read(m, out, n * sizeof *out), VF_OK);
    assert_true(out[0] == 192.0f && out[n - 1] == 192.0f); /* 768 * 0.25 */
    vf_context_destroy(ctx);
    free(out);
    const char *bad[] = {"abc", "-3", "0", "5s"};
    for (int v = 0; v < 4; v++) {
        setenv("VKFUSE_TIMEOUT_MS", bad[v], 1);
        ctx = NULL;
        assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_INVALID_ARGUMENT);
        unsetenv("VKFUSE_TIMEOUT_MS");
        assert_non_null(strstr(vf_error_message(ctx), "VKFUSE_TIMEOUT_MS"));
        assert_non_null(strstr(vf_error_message(ctx), bad[v]));
        vf_context_destroy(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults), cmocka_unit_test(test_cpu), cmocka_unit_test(test_bad_backend),
        cmocka_unit_test(test_fallback), cmocka_unit_test(test_no_loader), cmocka_unit_test(test_device_choice),
        cmocka_unit_test(test_timeout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
