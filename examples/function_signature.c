/* An input_signature with a -1 batch dim: one trace serves every batch size
   (without it each new size would retrace; VKFUSE_LOG=info says why). */
#include <vkfuse.h>

#include <stdio.h>

static vf_status classify(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *w = user;
    out[0] = vf_argmax(ctx, vf_softmax(ctx, vf_matmul(ctx, in[0], w), -1), -1);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    vf_tensor *w = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){4, 3}, 5);
    vf_tensor_spec sig = {.dtype = VF_F32, .rank = 2, .shape = {-1, 4}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "classify", .body = classify, .user = w,
                                                                 .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    for (int64_t batch = 1; batch <= 64; batch *= 4) {
        vf_tensor *x = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){batch, 4}, (uint64_t)batch), *y;
        if (vf_function_call(fn, &x, &y) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
        printf("batch %3lld -> %lld classes\n", (long long)batch, (long long)vf_tensor_dim(y, 0));
    }
    /* a call that does not fit the signature says so */
    vf_tensor *bad = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 5}, 0.0), *y;
    if (vf_function_call(fn, &bad, &y) != VF_OK) printf("as expected: %s\n", vf_error_message(ctx));
    vf_error_clear(ctx);
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    printf("traces: %d for 4 batch sizes\n", st.traces);
    vf_function_destroy(fn);
    int rc = st.traces == 1 ? 0 : 1;
    vf_context_destroy(ctx);
    return rc;
}
