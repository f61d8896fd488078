/* Context creation: backend choice, device choice (the default takes a
 * GPU, else the CPU backend; a Vulkan driver on the CPU only when asked
 * for), the CPU fallback when no Vulkan device exists, and its messages. */
#include "testutil.h"
#include "vulkan/device_pick.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether vf_devices lists a GPU (discrete, integrated, virtual). */
static bool have_gpu(void)
{
    vf_device_info info[16];
    char err[256] = "";
    int n = vf_devices(info, 16, err, sizeof err);
    for (int i = 0; i < n && i < 16; i++)
        if (!strcmp(info[i].type, "discrete") || !strcmp(info[i].type, "integrated") || !strcmp(info[i].type, "virtual"))
            return true;
    return false;
}

/* The all-zero desc: the best GPU, else the CPU backend, as vf_auto_backend
   says. On a machine with lavapipe only (CI), the CPU backend, its name
   saying why. ctest sets VKFUSE_BACKEND=vulkan for other entries: unset. */
static void test_defaults(void **state)
{
    (void)state;
    unsetenv("VKFUSE_BACKEND");
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_non_null(ctx);
    char why[1024] = "";
    int dev = 7;
    vf_backend b = vf_auto_backend(&dev, why, sizeof why);
    assert_int_equal(vf_backend_get(ctx), b);
    if (vt_have_vulkan() && !have_gpu()) {
        assert_int_equal(b, VF_BACKEND_CPU);
        assert_int_equal(dev, -1);
        assert_non_null(strstr(why, "no GPU, only Vulkan devices that run on the CPU"));
        assert_non_null(strstr(why, "(cpu)"));
        assert_non_null(strstr(why, "VKFUSE_BACKEND=vulkan"));
        assert_non_null(strstr(vf_device_name(ctx), "CPU (OpenBLAS; no GPU"));
    } else if (have_gpu()) {
        assert_int_equal(b, VF_BACKEND_VULKAN);
        assert_true(dev >= 0);
        assert_non_null(strstr(why, "the best GPU"));
    }
    assert_true(strlen(vf_device_name(ctx)) > 0);
    assert_int_equal(vf_status_get(ctx), VF_OK);
    assert_string_equal(vf_error_message(ctx), "");
    vf_context_destroy(ctx);
    assert_int_equal(vf_context_create(NULL, NULL), VF_ERROR_INVALID_ARGUMENT);
    vf_context_destroy(NULL);
    /* vf_auto_backend's arguments are optional */
    assert_int_equal(vf_auto_backend(NULL, NULL, 0), b);
}

/* A Vulkan driver on the CPU is there when asked for: VKFUSE_BACKEND=vulkan,
   a name (VKFUSE_DEVICE) or an index (pick_device), under AUTO. */
static void test_cpu_device_when_asked(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_device_info info[16];
    char err[256] = "";
    int n = vf_devices(info, 16, err, sizeof err);
    int cpu = -1;
    for (int i = 0; i < n && i < 16; i++)
        if (!strcmp(info[i].type, "cpu")) cpu = i;
    if (cpu < 0) cpu = 0; /* a machine with GPUs only: the same paths with a GPU */
    vf_context *ctx = NULL;
    char why[1024] = "";
    int dev = -1;
    setenv("VKFUSE_BACKEND", "vulkan", 1);
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_VULKAN);
    vf_context_destroy(ctx);
    assert_int_equal(vf_auto_backend(&dev, why, sizeof why), VF_BACKEND_VULKAN);
    assert_true(dev >= 0 && info[dev].chosen);
    assert_non_null(strstr(why, "VKFUSE_BACKEND=vulkan"));
    unsetenv("VKFUSE_BACKEND");
    /* by name, under AUTO */
    setenv("VKFUSE_DEVICE", info[cpu].name, 1);
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_VULKAN);
    assert_string_equal(vf_device_name(ctx), info[cpu].name);
    vf_context_destroy(ctx);
    assert_int_equal(vf_auto_backend(&dev, why, sizeof why), VF_BACKEND_VULKAN);
    assert_int_equal(dev, cpu);
    assert_non_null(strstr(why, "VKFUSE_DEVICE="));
    /* a name that matches nothing: vf_context_create fails, and so says vf_auto_backend */
    setenv("VKFUSE_DEVICE", "no-such-gpu-xyz", 1);
    assert_int_equal(vf_auto_backend(&dev, why, sizeof why), VF_BACKEND_AUTO);
    assert_int_equal(dev, -1);
    assert_non_null(strstr(why, "matches no Vulkan device"));
    unsetenv("VKFUSE_DEVICE");
    /* by index, under AUTO */
    vf_context_desc d = {.pick_device = true, .device_index = cpu};
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    assert_int_equal(vf_backend_get(ctx), VF_BACKEND_VULKAN);
    assert_string_equal(vf_device_name(ctx), info[cpu].name);
    vf_context_destroy(ctx);
    /* (VF_BACKEND_VULKAN on it: every Vulkan test's vt_context) */
    setenv("VKFUSE_BACKEND", "cpu", 1);
    assert_int_equal(vf_auto_backend(&dev, why, sizeof why), VF_BACKEND_CPU);
    assert_string_equal(why, "VKFUSE_BACKEND=cpu");
    setenv("VKFUSE_BACKEND", "tpu", 1);
    assert_int_equal(vf_auto_backend(&dev, why, sizeof why), VF_BACKEND_AUTO);
    assert_non_null(strstr(why, "VKFUSE_BACKEND=tpu"));
    unsetenv("VKFUSE_BACKEND");
}

/* The preference order on made-up device lists (no GPU here to try it on):
   discrete > integrated > virtual, and a driver on the CPU (or of type
   "other") only without gpu_only or when named. */
static void test_pick_order(void **state)
{
    (void)state;
    static const VkPhysicalDeviceType kinds[] = {
        VK_PHYSICAL_DEVICE_TYPE_CPU, VK_PHYSICAL_DEVICE_TYPE_OTHER, VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU,
        VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU, VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU};
    vf_vk_phys p[5];
    memset(p, 0, sizeof p);
    for (int i = 0; i < 5; i++) {
        p[i].props.deviceType = kinds[i];
        snprintf(p[i].props.deviceName, sizeof p[i].props.deviceName, "dev%d", i);
        p[i].usable = true;
    }
    vf_err err = {0};
    /* the best among the first k: cpu, other, virtual, integrated, discrete */
    const int best_gpu[6] = {-1, -1, -1, 2, 3, 4};
    for (int k = 1; k <= 5; k++) {
        assert_int_equal(vf_vk_phys_pick(p, k, -1, NULL, true, &err), best_gpu[k]);
        if (best_gpu[k] < 0) {
            assert_int_equal(err.status, VF_ERROR_UNSUPPORTED);
            assert_non_null(strstr(err.message, "no GPU, only Vulkan devices that run on the CPU"));
            assert_non_null(strstr(err.message, "[0] dev0 (cpu)"));
        }
        vf_err_clear(&err);
        /* without gpu_only (VF_BACKEND_VULKAN): the driver on the CPU last */
        assert_int_equal(vf_vk_phys_pick(p, k, -1, NULL, false, &err), k <= 2 ? 0 : k - 1);
        assert_int_equal(err.status, VF_OK);
    }
    /* an unusable discrete GPU is passed over */
    p[4].usable = false;
    assert_int_equal(vf_vk_phys_pick(p, 5, -1, NULL, true, &err), 3);
    /* named, the driver on the CPU is taken under gpu_only */
    assert_int_equal(vf_vk_phys_pick(p, 5, -1, "DEV0", true, &err), 0);
    assert_int_equal(vf_vk_phys_pick(p, 5, -1, "0", true, &err), 0);
    assert_int_equal(vf_vk_phys_pick(p, 5, 0, NULL, true, &err), 0);
    assert_int_equal(err.status, VF_OK);
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
    assert_null(ctx); /* a failed create hands out nothing (vkfuse.h) */
    assert_non_null(strstr(vf_last_error(), "VF_BACKEND_VULKAN"));
    assert_null(vf_fill(ctx, VF_F32, 1, s, 0));
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
        cmocka_unit_test(test_timeout), cmocka_unit_test(test_cpu_device_when_asked), cmocka_unit_test(test_pick_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
