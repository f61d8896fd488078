/* The print-once pitfall: printf in a traced body runs once per trace (like
   Python's print under tf.function); vf_print runs at every call. */
#include <vkfuse.h>

#include <stdio.h>

static vf_status step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    printf("printf: tracing step (you see this once)\n");
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    return vf_print(ctx, "vf_print: every call", out[0]);
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "step", .body = step, .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 0.0);
    for (int i = 0; i < 3; i++)
        if (vf_function_call(fn, &x, &x) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    vf_function_destroy(fn);
    int rc = vf_status_get(ctx) == VF_OK ? 0 : 1;
    vf_context_destroy(ctx);
    return rc;
}
