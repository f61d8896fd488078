/* The seed's train_step: softmax regression 784 -> 10 trained with a
 * gradient tape, gradient clipping with vf_cond and assign_sub updates,
 * traced with the input signature [-1,784], [-1]. The same step also runs
 * eagerly on a second copy of the model; the losses must agree, the loss
 * must fall well below its start, and the smaller last batch must not
 * retrace. Exits non-zero otherwise.
 *
 * The smaller batch comes once, at the very end. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FEAT 784
#define CLASSES 10
#define N 544
#define BATCH 128 /* epochs of 4 full batches, then one last batch of 32 */
#define EPOCHS 4

typedef struct {
    vf_tensor *w, *b;
    vf_tensor *lr, *threshold;
} model;

static vf_status clip(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user; /* dw * threshold / |dw| */
    out[0] = vf_mul(ctx, in[0], vf_div(ctx, m->threshold, in[1]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status keep(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    out[0] = in[0];
    return VF_OK;
}

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, in[0], m->w), m->b);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    vf_tensor *g[2] = {NULL, NULL};
    vf_status s = vf_tape_gradient(tape, loss, 2, (vf_tensor *[]){m->w, m->b}, g);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    vf_tensor *norm = vf_norm(ctx, g[0]);
    vf_tensor *dw = NULL;
    s = vf_cond(ctx, vf_greater(ctx, norm, m->threshold), clip, keep, 2, (vf_tensor *[]){g[0], norm}, 1, &dw, m);
    if (s != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, dw))) != VF_OK) return s;
    if ((s = vf_assign_sub(m->b, vf_mul(ctx, m->lr, g[1]))) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static model make_model(vf_context *ctx)
{
    model m = {.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){FEAT, CLASSES}, 0.0)),
               .b = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){CLASSES}, 0.0)),
               .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.5),
               .threshold = vf_fill(ctx, VF_F32, 0, NULL, 1.0)};
    return m;
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    printf("device: %s (VKFUSE_BACKEND=cpu or vulkan to choose)\n", vf_device_name(ctx));
    /* a separable data set: each class is a random centre plus noise */
    float *x = malloc(sizeof(float) * N * FEAT), *centre = malloc(sizeof(float) * CLASSES * FEAT);
    int32_t *y = malloc(sizeof(int32_t) * N);
    if (!x || !centre || !y) return fprintf(stderr, "out of memory\n"), 1;
    for (int i = 0; i < CLASSES * FEAT; i++) centre[i] = (float)(uniform() * 2.0 - 1.0) * 0.2f;
    for (int i = 0; i < N; i++) {
        y[i] = (int32_t)(uniform() * CLASSES) % CLASSES;
        for (int j = 0; j < FEAT; j++) x[i * FEAT + j] = centre[y[i] * FEAT + j] + (float)(uniform() - 0.5) * 0.2f;
    }
    model traced = make_model(ctx), eager = make_model(ctx);
    vf_tensor_spec sig[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}},
                             {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "train_step", .body = train_step,
        .user = &traced, .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    int rc = 0, step = 0;
    float first = NAN, last = NAN;
    const int full = N / BATCH;
    for (int k = 0; k < EPOCHS * full + 1 && rc == 0; k++, step++) {
            int start = k < EPOCHS * full ? (k % full) * BATCH : full * BATCH;
            int64_t nb = N - start < BATCH ? N - start : BATCH;
            vf_scope_begin(ctx);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, FEAT}, x + start * FEAT),
                                vf_tensor_from_host(ctx, VF_I32, 1, &nb, y + start)};
            vf_tensor *lt = NULL, *le = NULL;
            float vt = NAN, ve = NAN;
            if (vf_function_call(fn, in, &lt) != VF_OK || train_step(ctx, in, &le, &eager) != VF_OK ||
                vf_tensor_read(lt, &vt, sizeof vt) != VF_OK || vf_tensor_read(le, &ve, sizeof ve) != VF_OK) {
                fprintf(stderr, "step %d: %s\n", step, vf_error_message(ctx));
                rc = 1;
            } else {
                printf("step %2d (batch %3lld): loss traced %.5f eager %.5f\n", step, (long long)nb, vt, ve);
                if (!(fabsf(vt - ve) <= 1e-3f + 1e-3f * fabsf(ve))) {
                    fprintf(stderr, "step %d: traced and eager losses differ\n", step);
                    rc = 1;
                }
                if (step == 0) first = vt;
                last = vt;
            }
            vf_scope_end(ctx);
        }
    vf_function_stats st = {0};
    vf_function_stats_get(fn, &st);
    printf("first loss %.4f, last %.4f; traces %d, retraces %d\n", first, last, st.traces, st.retraces);
    if (rc == 0 && !(last < 0.25f * first)) fprintf(stderr, "the loss did not fall well below its start\n"), rc = 1;
    if (rc == 0 && st.traces != 1) fprintf(stderr, "retraced: %s\n", vf_function_retrace_reason(fn)), rc = 1;
    vf_function_destroy(fn);
    free(x), free(centre), free(y);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    vf_context_destroy(ctx);
    return rc;
}
