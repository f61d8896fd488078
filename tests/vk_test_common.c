/* Shared helpers of the Vulkan runtime tests; see vk_test_common.h. */
#include "vk_test_common.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

bool want_validation(void)
{
    const char *v = getenv("VKFUSE_VALIDATION");
    return v && *v && strcmp(v, "0") != 0;
}

vf_status rt_try(rt_handle *h, const vf_vk_options *o, const vf_vk_extra_options *x)
{
    memset(h, 0, sizeof *h);
    vf_status s = vf_vk_backend_create_ex(&h->err, o, x, &h->be, h->name, sizeof h->name);
    if (!s) h->rt = vf_vk_runtime_of(&h->be);
    return s;
}

void rt_make(rt_handle *h, const char *cache_dir, const vf_vk_extra_options *x)
{
    vf_vk_options o = {.device_index = -1, .validation = want_validation(), .cache_dir = cache_dir};
    vf_vk_options_read(&o, getenv); /* VKFUSE_TEST_CAPS, VKFUSE_DUMP, ... as a context would */
    vf_status s = rt_try(h, &o, x);
    if (s) fprintf(stderr, "backend: %s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    assert_non_null(h->rt);
    if (want_validation()) {
        assert_true(h->rt->dev.validation);
        assert_true(h->rt->dev.sync_validation);
    }
}

void rt_done(rt_handle *h)
{
    vf_status s = h->be.iface->sync(h->be.self);
    if (s) fprintf(stderr, "runtime error: %s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    int64_t msgs = h->rt->dev.validation_messages;
    h->be.iface->destroy(h->be.self);
    assert_int_equal(msgs, 0);
    assert_int_equal(h->err.status, VF_OK);
}

const char *const AXPY =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) readonly buffer A { float a[]; };\n"
    "layout(set = 0, binding = 1) readonly buffer B { float b[]; };\n"
    "layout(set = 0, binding = 2) writeonly buffer C { float c[]; };\n"
    "layout(push_constant) uniform P { uint n; float k; } p;\n"
    "void main() {\n"
    "  uint i = gl_GlobalInvocationID.x;\n"
    "  if (i < p.n) c[i] = a[i] * p.k + b[i];\n"
    "}\n";

void axpy(rt_handle *h, const vf_vk_pipeline *p, vf_buffer *a, vf_buffer *b, vf_buffer *c,
          uint32_t n, float k)
{
    vf_vk_bind binds[3] = {
        {.buf = a, .range = (VkDeviceSize)n * 4, .access = VF_VK_READ},
        {.buf = b, .range = (VkDeviceSize)n * 4, .access = VF_VK_READ},
        {.buf = c, .range = (VkDeviceSize)n * 4, .access = VF_VK_WRITE},
    };
    axpy_push pc = {n, k};
    vf_vk_dispatch_info di = {
        .pipe = p, .n_bindings = 3, .bindings = binds, .push = &pc, .push_size = sizeof pc,
        .groups = {(n + 63) / 64, 1, 1},
    };
    vf_status s = vf_vk_sched_dispatch(&h->rt->sched, &di);
    if (s) fprintf(stderr, "%s\n", h->err.message);
    assert_int_equal(s, VF_OK);
}

vf_buffer *alloc_upload(rt_handle *h, const float *x, uint32_t n)
{
    vf_buffer *b = NULL;
    assert_int_equal(h->be.iface->alloc(h->be.self, (size_t)n * 4, &b), VF_OK);
    if (x) assert_int_equal(h->be.iface->upload(h->be.self, b, 0, x, (size_t)n * 4), VF_OK);
    return b;
}

const vf_vk_pipeline *axpy_pipeline(rt_handle *h)
{
    const vf_vk_pipeline *p = NULL;
    vf_status s = vf_vk_runtime_glsl_pipeline(h->rt, AXPY, "axpy_test", 3, sizeof(axpy_push), &p);
    if (s) fprintf(stderr, "%s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    return p;
}

/* Runs axpy over n elements and checks the result; returns after freeing. */
void run_axpy_check(rt_handle *h, uint32_t n)
{
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) a[i] = (float)i, b[i] = 0.5f * (float)(i % 7);
    vf_buffer *ba = alloc_upload(h, a, n), *bb = alloc_upload(h, b, n), *bc = alloc_upload(h, NULL, n);
    axpy(h, axpy_pipeline(h), ba, bb, bc, n, 3.0f);
    assert_int_equal(h->be.iface->download(h->be.self, bc, 0, c, (size_t)n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(c[i] == a[i] * 3.0f + b[i]);
    h->be.iface->free(h->be.self, ba);
    h->be.iface->free(h->be.self, bb);
    h->be.iface->free(h->be.self, bc);
    free(a);
    free(b);
    free(c);
}

int spawn_self(const char *arg1, const char *arg2, char **envp)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    char *argv[] = {exe, (char *)arg1, (char *)arg2, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, exe, NULL, NULL, argv, envp), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* LeakSanitizer names a leak's library only while it is still mapped; the
   Vulkan loader unloads drivers and layers at vkDestroyInstance (and we
   dlclose the loader), so their known leaks at exit would show up as
   "<unknown module>" and escape tests/lsan.supp. Pinning them keeps them
   mapped. This is the test's business, not the library's. */
void pin_vulkan_libraries(void)
{
    static const char *const libs[] = {"libvulkan.so.1", "libvulkan_lvp.so",
                                       "libVkLayer_khronos_validation.so",
                                       "libVkLayer_MESA_device_select.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        dlopen(libs[i], RTLD_NOW | RTLD_NODELETE); /* absent ones are fine */
}

char *vt_set_caps_env(const char *v)
{
    const char *old = getenv("VKFUSE_TEST_CAPS");
    char *saved = old ? strdup(old) : NULL;
    if (v) setenv("VKFUSE_TEST_CAPS", v, 1);
    else unsetenv("VKFUSE_TEST_CAPS");
    return saved;
}

void vt_restore_caps_env(char *saved)
{
    if (saved) setenv("VKFUSE_TEST_CAPS", saved, 1);
    else unsetenv("VKFUSE_TEST_CAPS");
    free(saved);
}
