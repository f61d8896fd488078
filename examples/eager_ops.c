/* Eager ops: every op runs as it is called and can be read at once. */
#include <vkfuse.h>

#include <stdio.h>

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    float a[6] = {1, 2, 3, 4, 5, 6};
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, a);
    vf_tensor *y = vf_softmax(ctx, vf_mul(ctx, x, vf_fill(ctx, VF_F32, 0, NULL, 0.5)), -1);
    vf_tensor *s = vf_reduce_sum(ctx, y, 1, (int[]){1}, false);
    if (!s) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    vf_print(ctx, "softmax", y);
    vf_print(ctx, "row sums", s);
    int rc = vf_status_get(ctx) == VF_OK ? 0 : 1;
    vf_context_destroy(ctx);
    return rc;
}
