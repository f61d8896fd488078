/* dynamic_predict: `if mean(x) > 0: x*2 else x*0.5` with vf_cond, traced
   (one trace serves both branches) and eager. */
#include <vkfuse.h>

#include <stdio.h>

static vf_status twice(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status half(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.5));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status dynamic_predict(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    /* a C `if` on a traced value cannot work: the value exists only at run time */
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0.0));
    return vf_cond(ctx, pred, twice, half, 1, in, 1, out, NULL);
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "dynamic_predict", .body = dynamic_predict,
                                                                 .n_inputs = 1, .n_outputs = 1});
    float pos[3] = {1, 2, 3}, neg[3] = {-3, -2, 1};
    for (int eager = 0; eager < 2; eager++) {
        vf_run_functions_eagerly(ctx, eager);
        for (int k = 0; k < 2; k++) {
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){3}, k ? neg : pos), *y;
            if (vf_function_call(fn, &x, &y) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
            vf_print(ctx, eager ? "eager " : "traced", y);
        }
    }
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    printf("traces: %d (both branches, one trace)\n", st.traces);
    vf_function_destroy(fn);
    int rc = st.traces == 1 && vf_status_get(ctx) == VF_OK ? 0 : 1;
    vf_context_destroy(ctx);
    return rc;
}
