/* vf_host_map: a host callback, eager and as a traced graph node (the hook
 * vkfuse_dist's traced allreduce uses). On both backends: the callback sees
 * the input's values and its changes come out; traced, it runs at every
 * call (not once at trace time), between the kernels before and after it;
 * it is an effect (kept when its result is unused, never merged with an
 * identical one); its failure fails the call with its message; a function
 * holding one cannot be saved. */
#include "testutil.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    int calls;
    float add;      /* added to every element */
    double seen;    /* sum of the values it was given, last call */
    bool fail;
} hstate;

static vf_status cb(void *user, vf_dtype dt, int64_t n, void *data, char *msg, size_t len)
{
    hstate *h = user;
    h->calls++;
    if (h->fail) return snprintf(msg, len, "told to fail"), VF_ERROR_DEVICE;
    if (dt != VF_F32) return snprintf(msg, len, "not f32"), VF_ERROR_DTYPE;
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

static void run(vf_backend b)
{
    vf_context *ctx = vt_context(b);
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(run_cpu), cmocka_unit_test(run_vulkan)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
