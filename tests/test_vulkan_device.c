/* The Vulkan runtime below the backend iface: the loader, the devices and
 * the choice among them, no driver at all (a child process), and two
 * runtimes at once. */
#include "vk_test_common.h"

#include <unistd.h>

extern char **environ;

/* ---- loader and devices --------------------------------------------------- */

static void test_loader(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_vk_loader l;
    assert_int_equal(vf_vk_loader_open(&l, NULL, &err), VF_OK);
    assert_non_null(l.lib);
    assert_non_null(l.gipa);
    assert_non_null(l.vk.vkCreateInstance);
    assert_non_null(l.vk.vkEnumerateInstanceVersion);
    vf_vk_loader_close(&l);
    assert_null(l.lib);
    assert_string_equal(vf_vk_result_name(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
}

static void test_devices(void **state)
{
    (void)state;
    char err[512];
    int n = vf_devices(NULL, 0, err, sizeof err);
    assert_true(n >= 1);
    vf_device_info *d = calloc((size_t)n, sizeof *d);
    assert_int_equal(vf_devices(d, n, err, sizeof err), n);
    int chosen = 0, lvp = -1;
    for (int i = 0; i < n; i++) {
        chosen += d[i].chosen;
        assert_true(strlen(d[i].name) > 0);
        assert_true(strlen(d[i].vendor) > 0);
        assert_true(strlen(d[i].type) > 0);
        if (strstr(d[i].name, "llvmpipe")) lvp = i;
    }
    assert_int_equal(chosen, 1);
    assert_true(lvp >= 0);
    assert_string_equal(d[lvp].type, "cpu");
    assert_string_equal(d[lvp].vendor, "Mesa");
    assert_int_equal(d[lvp].subgroup_size, 8);
    assert_int_equal(d[lvp].shared_memory_bytes, 32768);
    assert_int_equal(d[lvp].max_storage_buffer_range, 128u << 20);
    assert_true(d[lvp].fp16);
    assert_true(d[lvp].storage16);
    assert_non_null(strstr(d[lvp].driver, "llvmpipe"));
    assert_true(d[lvp].api_version >= VK_API_VERSION_1_2);
    free(d);
}

static void test_device_choice(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_options o = {.device_index = 0, .validation = want_validation()};
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    assert_int_equal(h.rt->dev.index, 0);
    /* the caps codegen relies on */
    const vf_device_caps *c = &h.rt->dev.caps;
    assert_int_equal(c->subgroup_size, 8);
    assert_true(c->is_cpu);
    assert_true(c->subgroup_arithmetic);
    assert_true(c->storage8 && c->storage16 && c->shader_float16);
    assert_int_equal(c->max_push_constants, 128);
    assert_int_equal(c->max_storage_buffer_range, 128u << 20);
    assert_true(c->min_storage_buffer_offset_alignment >= 1);
    rt_done(&h);

    o.device_index = -1;
    o.device_env = "LLVMpipe"; /* case-insensitive substring */
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    assert_non_null(strstr(h.name, "llvmpipe"));
    rt_done(&h);

    o.device_env = "0";
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    rt_done(&h);

    o.device_env = "NoSuchGPU";
    assert_int_equal(rt_try(&h, &o, NULL), VF_ERROR_DEVICE);
    assert_non_null(strstr(h.err.message, "NoSuchGPU"));
    assert_non_null(strstr(h.err.message, "llvmpipe")); /* lists what there is */
    assert_null(h.be.iface);

    o.device_env = "42";
    assert_int_equal(rt_try(&h, &o, NULL), VF_ERROR_DEVICE);
    assert_non_null(strstr(h.err.message, "available"));

    o.device_env = NULL;
    o.device_index = 99;
    assert_int_equal(rt_try(&h, &o, NULL), VF_ERROR_DEVICE);
    assert_non_null(strstr(h.err.message, "99"));
    assert_non_null(strstr(h.err.message, "llvmpipe"));
}

/* Child with no driver visible (VK_ICD_FILENAMES points nowhere): creation
   fails with VF_ERROR_DEVICE saying so, and vf_devices finds nothing.
   No validation here: the loader's own warnings about the missing driver
   would go to the messenger. */
static int no_device_child(void)
{
    vf_err err = {0};
    vf_backend_t be;
    vf_vk_options o = {.device_index = -1};
    vf_status s = vf_vk_backend_create_ex(&err, &o, NULL, &be, NULL, 0);
    if (s != VF_ERROR_DEVICE) return 10;
    if (!strstr(err.message, "no Vulkan device")) {
        fprintf(stderr, "child: unexpected message: %s\n", err.message);
        return 11;
    }
    char msg[256];
    if (vf_devices(NULL, 0, msg, sizeof msg) != 0) return 12;
    return 0;
}

static void test_no_device(void **state)
{
    (void)state;
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 3, sizeof *env);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "VK_ICD_FILENAMES=", 17) && strncmp(environ[i], "VK_DRIVER_FILES=", 16))
            env[j++] = environ[i];
    env[j++] = "VK_ICD_FILENAMES=/nonexistent/icd.json";
    env[j++] = "VK_DRIVER_FILES=/nonexistent/icd.json";
    assert_int_equal(spawn_self("--no-device-child", "", env), 0);
    free(env);
}

/* ---- two runtimes ------------------------------------------------------- */

static void test_two_runtimes(void **state)
{
    (void)state;
    rt_handle *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    rt_make(a, NULL, NULL);
    rt_make(b, NULL, &(vf_vk_extra_options){.no_push_descriptors = true});
    assert_true(a->rt->dev.device != b->rt->dev.device);
    assert_true(a->rt->dev.vkd.vkCmdDispatch != NULL && b->rt->dev.vkd.vkCmdDispatch != NULL);
    run_axpy_check(a, 5000);
    run_axpy_check(b, 7000);
    run_axpy_check(a, 300);
    rt_done(a); /* destroying one leaves the other working */
    run_axpy_check(b, 900);
    rt_done(b);
    free(a);
    free(b);
}

int main(int argc, char **argv)
{
    pin_vulkan_libraries();
    if (argc == 3 && strcmp(argv[1], "--no-device-child") == 0) return no_device_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_device_choice),
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_two_runtimes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
