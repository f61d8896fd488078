/* Faults at the device's edges (issue 15), beside tests/test_faults.c:
 * the heap's memory budget (VK_EXT_memory_budget) is respected as
 * VKFUSE_DEVICE_MEMORY_LIMIT is, and vf_context_destroy after a wait timed
 * out (a hang) never waits without a bound, and abandons a device whose
 * work does not finish.
 *
 * lavapipe 22.3 has no VK_EXT_memory_budget: the budget is given by the
 * test hook rt->dev.test.memory_budget (vulkan/device.h), which caps the
 * extension's budget where there is one and stands in for it where not.
 *
 * The faults are set in-process through the test hook vf_fault_set
 * (util/fault.h), which also counts each site's calls: the tests read the
 * counts of vkDeviceWaitIdle (unbounded) and vkWaitForFences (bounded). */
#include "faults_common.h"
#include "testutil.h"
#include "api/api.h"
#include "util/fault.h"
#include "vulkan/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x + 1 over n floats, read back and checked: one batch and its wait. */
static vf_status add_one(vf_context *ctx, int64_t n, bool check)
{
    vf_scope_begin(ctx);
    vf_tensor *y = vf_add(ctx, vf_fill(ctx, VF_F32, 1, &n, 2.0), vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    float *got = calloc((size_t)n, sizeof *got);
    assert_non_null(got);
    vf_status s = y ? vf_tensor_read(y, got, (size_t)n * sizeof *got) : vf_status_get(ctx);
    vf_scope_end(ctx);
    if (s == VF_OK && check)
        for (int64_t i = 0; i < n; i++)
            if (got[i] != 3.0f) fail_msg("x + 1: [%lld] = %g, want 3", (long long)i, got[i]);
    free(got);
    return s;
}

/* ---- the memory budget ------------------------------------------------------------ */

static vf_vk_runtime *runtime(vf_context *ctx) { return vf_vk_runtime_of(&ctx->be); }

/* Past the heap's budget an allocation fails, after the idle cached blocks
   were given back, with VF_ERROR_OUT_OF_MEMORY naming the request, what is
   in use and the budget; the context stays usable; the budget is read
   when an allocation would cross it, not per op; vf_context_stats shows
   it. */
static void test_memory_budget(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vf_vk_runtime *rt = runtime(ctx);
    const int64_t budget = 9 << 20, mib3 = (1 << 20) / 4 * 3; /* 3 MiB of f32 */
    rt->dev.test.memory_budget = budget;
    /* two 3 MiB tensors, then freed: their blocks are cached */
    vf_scope_begin(ctx);
    if (!vf_fill(ctx, VF_F32, 1, &mib3, 1.0)) fail_msg("%s", vf_error_message(ctx));
    assert_non_null(vf_fill(ctx, VF_F32, 1, &mib3, 1.0));
    vf_scope_end(ctx);
    assert_int_equal(vf_context_sync(ctx), VF_OK); /* the frees wait for the fills' batch */
    vf_context_stats st;
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_int_equal(st.device_memory_budget, budget);
    if (st.device_bytes_cached != 6 << 20) fail_msg("cached %lld bytes", (long long)st.device_bytes_cached);
    /* a 5 MiB tensor fits in the 9 MiB once the cache (6 MiB) is given back */
    int64_t mib5 = (5 << 20) / 4, retries = st.device_alloc_retries;
    vf_scope_begin(ctx);
    vf_tensor *big = vf_fill(ctx, VF_F32, 1, &mib5, 1.0);
    assert_non_null(big);
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_int_equal(st.device_alloc_retries, retries + 1);
    assert_true(st.device_bytes_reserved <= budget);
    /* and a second one passes the budget (5 + 5 > 9 MiB): refused, naming it */
    assert_null(vf_fill(ctx, VF_F32, 1, &mib5, 1.0));
    assert_int_equal(vf_status_get(ctx), VF_ERROR_OUT_OF_MEMORY);
    const char *msg = vf_error_message(ctx);
    char num[64];
    snprintf(num, sizeof num, "memory budget of %lld bytes", (long long)budget);
    if (!strstr(msg, "5242880 bytes") || !strstr(msg, num) || !strstr(msg, "VK_EXT_memory_budget") ||
        !strstr(msg, "in use by live tensors"))
        fail_msg("the budget's message: %s", msg);
    vf_scope_end(ctx);
    vf_error_clear(ctx);
    assert_false(vf_context_lost(ctx));
    /* usable, and ops read the budget only when a new block would cross
       it (a few blocks here), not per op */
    int64_t reads = rt->mem.budget_reads;
    for (int i = 0; i < 100; i++) assert_int_equal(add_one(ctx, 1000, true), VF_OK);
    if (rt->mem.budget_reads > reads + 3)
        fail_msg("100 ops read the budget %lld times (%lld blocks allocated, budget %lld, usage %lld)",
                 (long long)(rt->mem.budget_reads - reads), (long long)rt->mem.allocations, (long long)rt->mem.budget,
                 (long long)rt->mem.budget_usage);
    vf_context_destroy(ctx);
}

/* ---- destroy after a hang ------------------------------------------------------ */

/* A fence wait timed out (injected VK_TIMEOUT; lavapipe cannot hang): the
   context is lost, and destroying it waits for its batches only with the
   timeout (one more vkWaitForFences, real this time, which finds them
   done), never with vkDeviceWaitIdle, which a hung device may never
   return from. Then everything is destroyed (LeakSanitizer under ASan). */
static void test_destroy_after_timeout(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vt_fault_set("vkWaitForFences:1:timeout", true);
    assert_int_equal(add_one(ctx, 1 << 16, false), VF_ERROR_DEVICE);
    assert_true(vf_context_lost(ctx));
    assert_non_null(strstr(vf_error_message(ctx), "timed out after"));
    vf_context_destroy(ctx);
    int64_t idle = vf_fault_count(VF_FAULT_vkDeviceWaitIdle), waits = vf_fault_count(VF_FAULT_vkWaitForFences);
    vt_fault_set(NULL, false);
    if (idle != 0) fail_msg("destroy after a timeout called vkDeviceWaitIdle %lld times", (long long)idle);
    assert_int_equal(waits, 2); /* the one that timed out, the bounded one at destroy */
    ctx = vt_context(VF_BACKEND_VULKAN);
    assert_int_equal(add_one(ctx, 1000, true), VF_OK);
    vf_context_destroy(ctx);
}

/* The work never finishes (every fence wait times out, the bounded one at
   destroy too): destroy returns anyway, abandons the device's objects (no
   vkDeviceWaitIdle, no destroy of what the work may use) and frees its
   host memory; a new context in the same process works. */
static void test_destroy_after_hang(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vt_fault_set("vkWaitForFences:1+:timeout", true);
    assert_int_equal(add_one(ctx, 1 << 16, false), VF_ERROR_DEVICE);
    assert_true(vf_context_lost(ctx));
    vf_context_destroy(ctx); /* "vkfuse: the device's work did not finish ..." on stderr */
    int64_t idle = vf_fault_count(VF_FAULT_vkDeviceWaitIdle), waits = vf_fault_count(VF_FAULT_vkWaitForFences);
    vt_fault_set(NULL, false);
    if (idle != 0) fail_msg("destroy after a hang called vkDeviceWaitIdle %lld times", (long long)idle);
    assert_int_equal(waits, 2);
    ctx = vt_context(VF_BACKEND_VULKAN);
    assert_int_equal(add_one(ctx, 1000, true), VF_OK);
    vf_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_budget),
        cmocka_unit_test(test_destroy_after_timeout),
        cmocka_unit_test(test_destroy_after_hang),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
