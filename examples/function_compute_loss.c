/* compute_loss as a traced function: traced once, replayed on later calls. */
#include <vkfuse.h>

#include <stdio.h>

typedef struct { vf_tensor *w, *b; } model;

static vf_status compute_loss(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, in[0], m->w), m->b);
    out[0] = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    model m = {.w = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){4, 3}, 1),
               .b = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 0.0)};
    vf_function *loss = vf_function_create(ctx, &(vf_function_desc){.name = "compute_loss", .body = compute_loss,
                                                                   .user = &m, .n_inputs = 2, .n_outputs = 1});
    int32_t labels[8] = {0, 1, 2, 0, 1, 2, 0, 1};
    for (int step = 0; step < 3; step++) {
        vf_scope_begin(ctx);
        vf_tensor *in[2] = {vf_random_normal(ctx, VF_F32, 2, (int64_t[]){8, 4}, 10 + (uint64_t)step),
                            vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){8}, labels)};
        vf_tensor *l;
        float v = 0;
        if (vf_function_call(loss, in, &l) != VF_OK || vf_tensor_read(l, &v, sizeof v) != VF_OK) {
            fprintf(stderr, "%s\n", vf_error_message(ctx));
            return 1;
        }
        printf("step %d: loss %.4f\n", step, v);
        vf_scope_end(ctx);
    }
    vf_function_stats st;
    vf_function_stats_get(loss, &st);
    printf("traces %d, calls %lld, kernels %d\n", st.traces, (long long)st.calls, st.kernels);
    vf_function_destroy(loss);
    int rc = st.traces == 1 && vf_status_get(ctx) == VF_OK ? 0 : 1;
    vf_context_destroy(ctx);
    return rc;
}
