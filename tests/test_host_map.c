/* vf_host_map: a host callback, eager and as a traced graph node (the hook
 * vkfuse_dist's traced allreduce uses). On both backends: the callback sees
 * the input's values and its changes come out; traced, it runs at every
 * call (not once at trace time), between the kernels before and after it;
 * it is an effect (kept when its result is unused, never merged with an
 * identical one); its failure fails the call with its message; a function
 * holding one cannot be saved.
 *
 * Split plans (plan/segment.h): on Vulkan a traced function with host
 * nodes runs as recorded plans split at them, one submit per segment;
 * the values equal eager, node by node (VKFUSE_NO_PLAN) and the CPU
 * backend, and work that does not depend on a host node is submitted
 * before its callback runs.
 *
 * Memory the host cannot map: on a discrete GPU tensors live in
 * device-local memory the backend's map cannot reach, and a host node
 * takes vf_host_apply's fallback (download, callback, upload). lavapipe's
 * memory is all host-visible, so VKFUSE_TEST_STAGING=1 (docs/TESTING.md)
 * makes a context treat it as not: the eager case and every split-plan
 * case run again so and must give the same values. */
#include "testutil.h"
#include "api/api.h"
#include "vulkan/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int calls;
    float add;      /* added to every element */
    double seen;    /* sum of the values it was given, last call */
    bool fail;
    vf_context *ctx; /* set: the submits made so far are noted at each call */
    int64_t submits_seen;
} hstate;

static vf_status cb(void *user, vf_dtype dt, int64_t n, void *data, char *msg, size_t len)
{
    hstate *h = user;
    h->calls++;
    if (h->fail) return snprintf(msg, len, "told to fail"), VF_ERROR_DEVICE;
    if (dt != VF_F32) return snprintf(msg, len, "not f32"), VF_ERROR_DTYPE;
    if (h->ctx) { /* the lock is recursive: reading counters here is safe */
        vf_context_stats st;
        vf_context_stats_get(h->ctx, &st);
        h->submits_seen = st.submits;
    }
    h->seen = 0;
    for (int64_t i = 0; i < n; i++) h->seen += ((float *)data)[i], ((float *)data)[i] += h->add;
    return VF_OK;
}

/* out[0] = host(x * 2) * 3; a second, identical host call with an unused
   result (kept: an effect; not merged with the first). */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y = vf_host_map(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 2)), cb, user, "probe");
    (void)vf_host_map(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 2)), cb, user, "probe");
    out[0] = vf_mul(ctx, y, vt_scalar(ctx, 3));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static bool staging; /* the next Vulkan contexts made here: VKFUSE_TEST_STAGING=1 */

/* before each test: a failed one may have left the flag or the variable set */
static int hook_off(void **state)
{
    (void)state;
    staging = false;
    unsetenv("VKFUSE_TEST_STAGING");
    return 0;
}

static vf_context *context(vf_backend b)
{
    if (!staging || b != VF_BACKEND_VULKAN) return vt_context(b);
    setenv("VKFUSE_TEST_STAGING", "1", 1);
    vf_context *ctx = vt_context(b);
    unsetenv("VKFUSE_TEST_STAGING");
    assert_false(vf_vk_runtime_of(&ctx->be)->mem.host_visible); /* so map gives NULL: the fallback runs */
    return ctx;
}

/* The split cases' staging runs share one context (made at the first, gone
   with the group): a Vulkan context costs about 0.25 s under ASan. */
static vf_context *staged;

static int staged_done(void **state)
{
    (void)state;
    if (staged) vt_context_done(staged);
    staged = NULL;
    return 0;
}

static void run(vf_backend b)
{
    vf_context *ctx = context(b);
    hstate h = {.add = 1};
    float x[6] = {1, 2, 3, 4, 5, 6}, got[6];
    const int64_t shape[2] = {2, 3};
    /* eager */
    vf_scope_begin(ctx);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, shape, x);
    vf_tensor *y = vf_host_map(ctx, t, cb, &h, NULL);
    assert_non_null(y);
    assert_int_equal(vf_tensor_read(y, got, sizeof got), VF_OK);
    for (int i = 0; i < 6; i++) assert_float_equal(got[i], x[i] + 1, 0);
    assert_int_equal(h.calls, 1);
    vf_scope_end(ctx);
    /* traced: twice, with different inputs */
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "host_map", .body = body, .user = &h,
                                                                    .n_inputs = 1, .n_outputs = 1});
    for (int call = 0; call < 2; call++) {
        h.calls = 0;
        h.add = (float)(call + 1);
        vf_scope_begin(ctx);
        for (int i = 0; i < 6; i++) x[i] = (float)(i + 10 * call);
        vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, shape, x), *o = NULL;
        assert_int_equal(vf_function_call(fn, &in, &o), VF_OK);
        assert_int_equal(vf_tensor_read(o, got, sizeof got), VF_OK);
        double sum = 0;
        for (int i = 0; i < 6; i++) {
            assert_float_equal(got[i], (2 * x[i] + h.add) * 3, 1e-5);
            sum += 2 * x[i];
        }
        assert_int_equal(h.calls, 2); /* both nodes ran, at this call */
        assert_float_equal(h.seen, sum, 1e-4);
        vf_scope_end(ctx);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_int_equal(st.traces, 1);
    /* no file can hold a callback */
    assert_int_equal(vf_function_save(fn, "/tmp/vkfuse_host_map_unsaved.vf"), VF_ERROR_UNSUPPORTED);
    vt_expect_error(ctx, VF_ERROR_UNSUPPORTED, "host callback 'probe'", NULL);
    /* the callback's failure fails the call, with its message */
    h.fail = true;
    vf_scope_begin(ctx);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, shape, x), *o = NULL;
    assert_int_equal(vf_function_call(fn, &in, &o), VF_ERROR_DEVICE);
    vt_expect_error(ctx, VF_ERROR_DEVICE, "vf_host_map 'probe'", "told to fail", NULL);
    vf_scope_end(ctx);
    assert_false(vf_context_tracing(ctx));
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

VT_PER_BACKEND(run)

/* the same, eager and traced, with the device's memory not host-visible */
static void run_vulkan_staging(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    staging = true;
    run(VF_BACKEND_VULKAN);
    staging = false;
}

/* ---- split plans ---------------------------------------------------------- */

#define SN 64

/* one host node in the middle: out = host(2x + 1) * 3 - x */
static vf_status body_one(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *a = vf_add(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 2)), vt_scalar(ctx, 1));
    vf_tensor *y = vf_host_map(ctx, a, cb, user, "one");
    out[0] = vf_sub(ctx, vf_mul(ctx, y, vt_scalar(ctx, 3)), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* two in a row: out = host(host(2x) + 1) * 3 */
static vf_status body_two(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y1 = vf_host_map(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 2)), cb, user, "first");
    vf_tensor *y2 = vf_host_map(ctx, vf_add(ctx, y1, vt_scalar(ctx, 1)), cb, user, "second");
    out[0] = vf_mul(ctx, y2, vt_scalar(ctx, 3));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* work written after the host node that does not depend on it:
   out0 = host(2x) * 3, out1 = sum(x * x) (may run while the callback does) */
static vf_status body_indep(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y = vf_host_map(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 2)), cb, user, "indep");
    out[1] = vt_sum(ctx, vf_mul(ctx, in[0], in[0]));
    out[0] = vf_mul(ctx, y, vt_scalar(ctx, 3));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    float out[2][SN];
    int n_out;
    vf_function_stats st;
    int64_t submits_before_cb; /* submits of the call before the (last) callback ran */
    int calls;
} split_run;

/* Calls body twice on a fresh context of backend b (eager: the body run
   directly); the second call's outputs, stats and callback observations. */
static void run_split(vf_backend b, vf_body fb, int n_out, bool eager, split_run *r)
{
    vf_context *ctx = staging && b == VF_BACKEND_VULKAN ? (staged ? staged : (staged = context(b))) : context(b);
    hstate h = {.add = 0.5f, .ctx = ctx};
    float x[SN];
    for (int i = 0; i < SN; i++) x[i] = (float)(i % 7) - 2.5f;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "split", .body = fb, .user = &h,
                                                                    .n_inputs = 1, .n_outputs = n_out});
    for (int call = 0; call < 2; call++) {
        vf_scope_begin(ctx);
        vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){SN}, x), *o[2] = {NULL, NULL};
        assert_int_equal(vf_context_sync(ctx), VF_OK);
        vf_context_stats before;
        vf_context_stats_get(ctx, &before);
        h.calls = 0;
        assert_int_equal(eager ? fb(ctx, &in, o, &h) : vf_function_call(fn, &in, o), VF_OK);
        r->submits_before_cb = h.submits_seen - before.submits;
        r->calls = h.calls;
        for (int k = 0; k < n_out; k++)
            assert_int_equal(vf_tensor_read(o[k], r->out[k], k ? sizeof(float) : sizeof r->out[k]), VF_OK);
        vf_scope_end(ctx);
    }
    r->n_out = n_out;
    assert_int_equal(vf_function_stats_get(fn, &r->st), VF_OK);
    vf_function_destroy(fn);
    if (ctx == staged) assert_int_equal(vf_context_sync(ctx), VF_OK);
    else vt_context_done(ctx);
}

/* Vulkan's split plan against eager, node by node and the CPU backend, and
   against the double-precision reference want (n values of out0); then
   the split plan again with memory the host cannot map (its host nodes
   through the staging fallback) against the same. */
static void check_split(vf_body fb, int n_out, const double *want, int submits, split_run *plan)
{
    split_run ref[4];
    run_split(VF_BACKEND_CPU, fb, n_out, false, &ref[0]);
    run_split(VF_BACKEND_VULKAN, fb, n_out, true, &ref[1]);
    setenv("VKFUSE_NO_PLAN", "1", 1);
    run_split(VF_BACKEND_VULKAN, fb, n_out, false, &ref[2]);
    unsetenv("VKFUSE_NO_PLAN");
    assert_false(ref[2].st.planned);
    run_split(VF_BACKEND_VULKAN, fb, n_out, false, plan);
    assert_true(plan->st.planned); /* recorded plans, not node by node */
    assert_int_equal(plan->st.submits_per_call, submits);
    for (int i = 0; i < SN; i++) assert_float_equal(plan->out[0][i], want[i], 1e-4);
    staging = true;
    run_split(VF_BACKEND_VULKAN, fb, n_out, false, &ref[3]);
    staging = false;
    assert_true(ref[3].st.planned); /* split plans, their host steps on unmappable memory */
    for (int i = 0; i < SN; i++) assert_float_equal(ref[3].out[0][i], want[i], 1e-4);
    assert_memory_equal(ref[3].out[0], plan->out[0], sizeof plan->out[0]); /* the same kernels: bit for bit */
    for (int k = 0; k < 4; k++) {
        assert_int_equal(ref[k].calls, plan->calls);
        vt_assert_close_f32(plan->out[0], ref[k].out[0], SN, 1e-6, 1e-6, "split plan vs reference");
        if (n_out > 1) vt_assert_close_f32(plan->out[1], ref[k].out[1], 1, 1e-4, 1e-6, "independent output");
    }
}

static void split_one(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    double want[SN];
    for (int i = 0; i < SN; i++) {
        double x = (double)(i % 7) - 2.5;
        want[i] = (2 * x + 1 + 0.5) * 3 - x;
    }
    split_run r;
    check_split(body_one, 1, want, 2, &r); /* kernels before, the callback, kernels after */
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.submits_before_cb, 1);
}

static void split_two(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    double want[SN];
    for (int i = 0; i < SN; i++) {
        double x = (double)(i % 7) - 2.5;
        want[i] = (2 * x + 0.5 + 1 + 0.5) * 3;
    }
    split_run r;
    check_split(body_two, 1, want, 3, &r); /* three segments */
    assert_int_equal(r.calls, 2);
    assert_int_equal(r.submits_before_cb, 2); /* the second callback: after the second segment */
}

static void split_independent(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    double want[SN], sq = 0;
    for (int i = 0; i < SN; i++) {
        double x = (double)(i % 7) - 2.5;
        want[i] = (2 * x + 0.5) * 3;
        sq += x * x;
    }
    split_run r;
    check_split(body_indep, 2, want, 3, &r);
    assert_float_equal(r.out[1][0], sq, 1e-3);
    /* what the host node needs, then the independent sum, both submitted
       before the callback runs; the rest after it */
    assert_int_equal(r.submits_before_cb, 2);
}



int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(run_cpu, hook_off),   cmocka_unit_test_setup(run_vulkan, hook_off),
        cmocka_unit_test_setup(run_vulkan_staging, hook_off), cmocka_unit_test_setup(split_one, hook_off),
        cmocka_unit_test_setup(split_two, hook_off), cmocka_unit_test_setup(split_independent, hook_off)};
    return cmocka_run_group_tests(tests, NULL, staged_done);
}
