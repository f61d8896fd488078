/* Synchronization validation catches a missing barrier: with the test hook
 * drop_barriers (vf_vk_test_hooks, vulkan/device.h) one hazard barrier is left
 * out, in the eager scheduler and in a recorded plan, and the Khronos
 * layer (VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT, on
 * with every validated context) must report a SYNC-HAZARD; with the
 * barrier kept it must report nothing and the results must be right.
 *
 * The hazardous runs happen in a child process (this binary run again)
 * whose stderr goes to /dev/null: ctest fails any test whose output shows
 * a validation message, and here the message is the expected outcome. The
 * child answers with its exit status. */
#include "testutil.h"
#include "vk_test_common.h"

#include "api/api.h"

#include <fcntl.h>
#include <math.h>
#include <unistd.h>

enum { CHILD_HAZARD = 10, CHILD_CLEAN = 11, CHILD_WRONG = 12, CHILD_SETUP = 13, CHILD_OTHER_MESSAGE = 14 };

/* What the child saw: a SYNC-HAZARD message, another message, none and
   right results, none and wrong results. */
static int verdict(const char *msg, int64_t n_msgs, bool right)
{
    if (msg && strstr(msg, "SYNC-HAZARD")) return CHILD_HAZARD;
    if (n_msgs > 0) return CHILD_OTHER_MESSAGE;
    return right ? CHILD_CLEAN : CHILD_WRONG;
}

/* c = 2a + a; e = c + c (reads c: read after write). */
static int child_eager(bool drop)
{
    rt_handle h;
    vf_vk_options o = {.device_index = -1, .validation = true};
    if (rt_try(&h, &o, NULL) != VF_OK || !h.rt->dev.sync_validation) return CHILD_SETUP;
    const uint32_t n = 1 << 16;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) x[i] = (float)(i % 1000);
    vf_buffer *a = NULL, *c = NULL, *e = NULL;
    h.be.iface->alloc(h.be.self, n * 4, &a);
    h.be.iface->alloc(h.be.self, n * 4, &c);
    h.be.iface->alloc(h.be.self, n * 4, &e);
    h.be.iface->upload(h.be.self, a, 0, x, n * 4);
    const vf_vk_pipeline *p = NULL;
    if (vf_vk_runtime_glsl_pipeline(h.rt, AXPY, "axpy_sync", 3, sizeof(axpy_push), &p)) return CHILD_SETUP;
    h.be.iface->sync(h.be.self);
    h.rt->dev.test.drop_barriers = drop ? 1 : 0;
    vf_vk_bind b1[3] = {{.buf = a, .range = n * 4, .access = VF_VK_READ},
                        {.buf = a, .range = n * 4, .access = VF_VK_READ},
                        {.buf = c, .range = n * 4, .access = VF_VK_WRITE}};
    vf_vk_bind b2[3] = {{.buf = c, .range = n * 4, .access = VF_VK_READ},
                        {.buf = c, .range = n * 4, .access = VF_VK_READ},
                        {.buf = e, .range = n * 4, .access = VF_VK_WRITE}};
    axpy_push pc = {n, 2.0f};
    vf_vk_dispatch_info di = {.pipe = p, .n_bindings = 3, .bindings = b1, .push = &pc, .push_size = sizeof pc,
                              .groups = {n / 64, 1, 1}};
    vf_vk_sched_dispatch(&h.rt->sched, &di);
    pc.k = 1.0f;
    di.bindings = b2;
    vf_vk_sched_dispatch(&h.rt->sched, &di);
    int dropped = h.rt->dev.test.drop_barriers == 0 && drop;
    h.be.iface->download(h.be.self, e, 0, y, n * 4);
    bool right = true;
    for (uint32_t i = 0; i < n; i++) right = right && y[i] == 6 * x[i];
    if (drop && !dropped) return CHILD_SETUP; /* the hook was never reached */
    return verdict(h.err.message, h.rt->dev.validation_messages, right);
}

static vf_tensor *two;

/* three kernels with VKFUSE_FUSION=0, each reading the last one's result */
static vf_status chain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_exp(ctx, vf_add(ctx, vf_mul(ctx, in[0], two), two));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static int child_plan(bool drop)
{
    setenv("VKFUSE_FUSION", "0", 1);
    vf_context *ctx = NULL;
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN, .validation = true};
    if (vf_context_create(&d, &ctx) != VF_OK) return CHILD_SETUP;
    const float k = 2.0f;
    enum { N = 1 << 16 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = (float)(i % 100) * 0.01f;
    two = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &k);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, x), *out = NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sync_chain", .body = chain,
                                                                   .n_inputs = 1, .n_outputs = 1});
    vf_context_sync(ctx);
    vf_vk_test_hooks *hooks = &vf_vk_runtime_of(&ctx->be)->dev.test;
    hooks->drop_barriers = drop ? 1 : 0;
    vf_status s = vf_function_call(fn, &in, &out);
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    if (!st.planned && s == VF_OK) return CHILD_SETUP;
    if (drop && hooks->drop_barriers != 0) return CHILD_SETUP;
    bool right = s == VF_OK && vf_tensor_read(out, y, sizeof y) == VF_OK;
    vf_context_sync(ctx);
    for (int i = 0; right && i < N; i++) right = fabsf(y[i] - expf(2 * x[i] + 2)) <= 1e-5f * expf(2 * x[i] + 2);
    const char *msg = vf_error_message(ctx);
    return verdict(msg, msg && strstr(msg, "validation") ? 1 : 0, right);
}

static int run_child(const char *mode, const char *drop)
{
    extern char **environ;
    return spawn_self(mode, drop, environ);
}

static void test_eager_missing_barrier(void **state)
{
    (void)state;
    assert_int_equal(run_child("eager", "keep"), CHILD_CLEAN);
    assert_int_equal(run_child("eager", "drop"), CHILD_HAZARD);
}

static void test_plan_missing_barrier(void **state)
{
    (void)state;
    assert_int_equal(run_child("plan", "keep"), CHILD_CLEAN);
    assert_int_equal(run_child("plan", "drop"), CHILD_HAZARD);
}

int main(int argc, char **argv)
{
    pin_vulkan_libraries();
    if (argc == 3) { /* the child: quiet, answers with its exit status */
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0 && !getenv("VF_SYNC_TEST_VERBOSE")) dup2(fd, 2);
        bool drop = strcmp(argv[2], "drop") == 0;
        int r = strcmp(argv[1], "eager") == 0 ? child_eager(drop) : child_plan(drop);
        _exit(r); /* no teardown: a broken run may leave anything behind */
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eager_missing_barrier),
        cmocka_unit_test(test_plan_missing_barrier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
