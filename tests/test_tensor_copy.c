/* vf_tensor_copy_to between contexts: CPU -> Vulkan -> a second Vulkan
 * context on the same device -> CPU, every dtype, empty and scalar tensors
 * bit-exact; misuse (NULL, a released tensor, a tracing destination) is an
 * error in the destination, never a crash. */
#include "testutil.h"

#include <string.h>

static vf_status copy_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_tensor_copy_to(ctx, user); /* refused: ctx is tracing */
    (void)in;
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_copy_chain(void **state)
{
    (void)state;
    vf_context *c[4] = {vt_context(VF_BACKEND_CPU), NULL, NULL, NULL};
    int n = 1;
    if (vt_have_vulkan()) c[n++] = vt_context(VF_BACKEND_VULKAN), c[n++] = vt_context(VF_BACKEND_VULKAN);
    c[n++] = vt_context(VF_BACKEND_CPU);
    static const vf_dtype types[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    const int64_t shapes[3][2] = {{3, 7}, {0, 4}, {1, 1}};
    const int ranks[3] = {2, 2, 0};
    uint8_t src[3 * 7 * 4], got[3 * 7 * 4];
    for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)(i * 37 + 11);
    for (size_t ti = 0; ti < 5; ti++)
        for (int si = 0; si < 3; si++) {
            if (types[ti] == VF_BOOL) for (size_t i = 0; i < sizeof src; i++) src[i] &= 1;
            if (types[ti] == VF_F16) for (size_t i = 1; i < sizeof src; i += 2) src[i] &= 0x3b; /* finite halves */
            vf_scope_begin(c[0]);
            vf_tensor *t = vf_tensor_from_host(c[0], types[ti], ranks[si], shapes[si], src);
            for (int k = 1; k < n; k++) vf_scope_begin(c[k]);
            for (int k = 1; k < n; k++) {
                t = vf_tensor_copy_to(c[k], t);
                assert_non_null(t);
                assert_ptr_equal(vf_tensor_context(t), c[k]);
            }
            assert_int_equal(vf_tensor_dtype(t), types[ti]);
            assert_int_equal(vf_tensor_rank(t), ranks[si]);
            for (int a = 0; a < ranks[si]; a++) assert_int_equal(vf_tensor_dim(t, a), shapes[si][a]);
            size_t bytes = vf_tensor_bytes(t);
            assert_int_equal(vf_tensor_read(t, got, sizeof got), VF_OK);
            assert_memory_equal(got, src, bytes);
            for (int k = n - 1; k >= 0; k--) vf_scope_end(c[k]);
        }
    /* misuse */
    assert_null(vf_tensor_copy_to(c[1], NULL));
    vt_expect_error(c[1], VF_ERROR_INVALID_ARGUMENT, "tensor is NULL", NULL);
    vf_tensor *gone = vf_fill(c[0], VF_F32, 0, NULL, 1.0);
    vf_tensor_release(gone);
    assert_null(vf_tensor_copy_to(c[1], gone));
    vt_expect_error(c[1], VF_ERROR_INVALID_ARGUMENT, "vf_tensor_copy_to", NULL);
    vt_expect_error(c[0], VF_ERROR_INVALID_ARGUMENT, "released", NULL);
    vf_tensor *keep = vf_fill(c[0], VF_F32, 0, NULL, 1.0), *o = NULL;
    vf_function *fn = vf_function_create(c[1], &(vf_function_desc){.body = copy_body, .user = keep, .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, NULL, &o), VF_ERROR_TRACE);
    vt_expect_error(c[1], VF_ERROR_TRACE, "is tracing", NULL);
    vf_function_destroy(fn);
    vf_tensor_release(keep);
    for (int k = 0; k < n; k++) vt_context_done(c[k]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_copy_chain)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
