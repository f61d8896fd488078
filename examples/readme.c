/* The README's example: softmax(x @ w + b), eager, on the default device. */
#include <stdio.h>
#include <vkfuse.h>

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) {
        fprintf(stderr, "vkfuse: %s\n", vf_last_error());
        return 1;
    }
    int64_t xs[2] = {2, 3}, ws[2] = {3, 4};
    float x[6] = {1, 2, 3, 4, 5, 6};
    vf_tensor *w = vf_random_normal(ctx, VF_F32, 2, ws, 42);
    vf_tensor *b = vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 0.5);
    vf_tensor *y = vf_softmax(ctx, vf_add(ctx, vf_matmul(ctx, vf_tensor_from_host(ctx, VF_F32, 2, xs, x), w), b), -1);
    float out[8];
    if (!y || vf_tensor_read(y, out, sizeof out) != VF_OK) { /* one check for the whole chain */
        fprintf(stderr, "vkfuse: %s\n", vf_error_message(ctx));
        vf_context_destroy(ctx);
        return 1;
    }
    printf("on %s:\n", vf_device_name(ctx));
    for (int i = 0; i < 2; i++)
        printf("  %.4f %.4f %.4f %.4f\n", out[4 * i], out[4 * i + 1], out[4 * i + 2], out[4 * i + 3]);
    vf_context_destroy(ctx); /* frees every tensor of the context */
    return 0;
}
