/* The profiling tests' context and traced function (profile_common.h). */
#include "profile_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vf_context *vt_profiling_context(vf_backend be)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = be, .validation = val && !strcmp(val, "1"), .profile = true};
    vf_context *ctx = NULL;
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "%s\n", vf_last_error());
        vf_context_destroy(ctx);
        fail_msg("could not create a profiling context on backend %d", (int)be);
    }
    return ctx;
}

int vt_group_setup_profiling(void **state)
{
    (void)state;
    vt_group_vk = vt_have_vulkan() ? vt_profiling_context(VF_BACKEND_VULKAN) : NULL;
    vt_group_cpu = vt_context(VF_BACKEND_CPU);
    return 0;
}

/* y = reduce_sum(abs(sigmoid(relu(x*k0 + k1) * k2) - k3), axis 1) and z = exp(-x):
   an elementwise DAG, a reduction and a second DAG output. */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], k[0]), k[1]);
    h = vf_abs(ctx, vf_sub(ctx, vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), k[2])), k[3]));
    out[0] = vf_reduce_sum(ctx, h, 1, (int[]){1}, false);
    out[1] = vf_exp(ctx, vf_neg(ctx, in[0]));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

void vt_prof_run_make(vf_context *ctx, vt_prof_run *r)
{
    static const float kv[4] = {1.5f, 0.25f, 0.9f, 0.5f};
    float *x = malloc(sizeof(float) * VT_PROF_R * VT_PROF_C);
    vt_fill_uniform(x, VT_PROF_R * VT_PROF_C, -3.f, 3.f, 7);
    x[5] = NAN, x[6] = INFINITY, x[7] = -INFINITY;
    for (int i = 0; i < 4; i++) r->k[i] = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &kv[i]);
    r->x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){VT_PROF_R, VT_PROF_C}, x);
    free(x);
    r->fn = vf_function_create(ctx, &(vf_function_desc){.name = "prof", .body = body, .user = r->k,
                                                        .n_inputs = 1, .n_outputs = 2});
    assert_non_null(r->fn);
}

void vt_prof_run_call(vf_context *ctx, vt_prof_run *r)
{
    vf_scope_begin(ctx);
    vf_tensor *o[2] = {NULL, NULL};
    if (vf_function_call(r->fn, &r->x, o) != VF_OK) fail_msg("call: %s", vf_error_message(ctx));
    assert_int_equal(vf_tensor_read(o[0], r->y, sizeof r->y), VF_OK);
    assert_int_equal(vf_tensor_read(o[1], r->z, sizeof r->z), VF_OK);
    vf_scope_end(ctx);
}
