/* A multi-layer perceptron 784 -> 512 -> 512 -> 10 with ReLU, trained with
 * a traced train step: forward pass, mean sparse softmax cross-entropy,
 * gradients of all six variables from a vf_tape, and SGD updates with
 * vf_assign_sub, all in one vf_function traced with the input signature
 * [-1,784], [-1]. The same step also runs eagerly on a second copy of the
 * model (same seeded initialisation); the losses must agree, the loss must
 * fall well below its start, the final accuracy must be high, and the
 * smaller last batch of every epoch must not retrace. Exits non-zero
 * otherwise.
 *
 * The data set is generated: each class is a random centre plus noise. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define FEAT 784
#define HIDDEN 512
#define CLASSES 10
#define N 1000
#define BATCH 128 /* epochs of 7 full batches and one last batch of 104 */
#define EPOCHS 3

typedef struct {
    vf_tensor *w[3], *b[3]; /* variables */
    vf_tensor *lr;
} model;

/* logits of x [batch, 784] */
static vf_tensor *forward(vf_context *ctx, const model *m, vf_tensor *x)
{
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, x, m->w[0]), m->b[0]));
    h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, m->w[1]), m->b[1]));
    return vf_add(ctx, vf_matmul(ctx, h, m->w[2]), m->b[2]);
}

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *logits = forward(ctx, m, in[0]);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    vf_tensor *vars[6] = {m->w[0], m->b[0], m->w[1], m->b[1], m->w[2], m->b[2]}, *g[6] = {0};
    vf_status s = vf_tape_gradient(tape, loss, 6, vars, g);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    for (int i = 0; i < 6; i++)
        if ((s = vf_assign_sub(vars[i], vf_mul(ctx, m->lr, g[i]))) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* He initialisation: normal(0, 2 / fan_in) weights from a seeded generator,
   zero biases. The same seed gives the same model. */
static model make_model(vf_context *ctx, uint64_t seed)
{
    static const int64_t dims[4] = {FEAT, HIDDEN, HIDDEN, CLASSES};
    static const double stddev[3] = {0.0505076272276105, 0.0625, 0.0625}; /* sqrt(2 / fan_in) */
    model m = {.lr = vf_fill(ctx, VF_F32, 0, NULL, 0.2)};
    for (int i = 0; i < 3; i++) {
        vf_scope_begin(ctx);
        vf_tensor *scale = vf_fill(ctx, VF_F32, 0, NULL, stddev[i]);
        vf_tensor *w = vf_mul(ctx, vf_random_normal(ctx, VF_F32, 2, &dims[i], seed + (uint64_t)i), scale);
        m.w[i] = vf_keep(vf_variable(ctx, w));
        m.b[i] = vf_keep(vf_variable(ctx, vf_fill(ctx, VF_F32, 1, &dims[i + 1], 0.0)));
        vf_scope_end(ctx);
    }
    return m;
}

/* fraction of the n rows of x whose largest logit is their label */
static float accuracy(vf_context *ctx, const model *m, const float *x, const int32_t *y, int64_t n)
{
    float acc = NAN;
    vf_scope_begin(ctx);
    vf_tensor *xt = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, FEAT}, x);
    vf_tensor *yt = vf_tensor_from_host(ctx, VF_I32, 1, &n, y);
    vf_tensor *hit = vf_equal(ctx, vf_argmax(ctx, forward(ctx, m, xt), 1), yt);
    vf_tensor *a = vf_reduce_mean(ctx, vf_cast(ctx, hit, VF_F32), 0, NULL, false);
    if (!a || vf_tensor_read(a, &acc, sizeof acc) != VF_OK) acc = NAN;
    vf_scope_end(ctx);
    return acc;
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    /* a separable data set: each class is a random centre plus noise */
    float *x = malloc(sizeof(float) * N * FEAT), *centre = malloc(sizeof(float) * CLASSES * FEAT);
    int32_t *y = malloc(sizeof(int32_t) * N);
    if (!x || !centre || !y) return fprintf(stderr, "out of memory\n"), 1;
    for (int i = 0; i < CLASSES * FEAT; i++) centre[i] = (float)(uniform() * 2.0 - 1.0) * 0.2f;
    for (int i = 0; i < N; i++) {
        y[i] = (int32_t)(uniform() * CLASSES) % CLASSES;
        for (int j = 0; j < FEAT; j++) x[i * FEAT + j] = centre[y[i] * FEAT + j] + (float)(uniform() - 0.5) * 0.4f;
    }
    model traced = make_model(ctx, 42), eager = make_model(ctx, 42);
    vf_tensor_spec sig[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}},
                             {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp_train_step", .body = train_step,
        .user = &traced, .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    int rc = vf_status_get(ctx) == VF_OK && fn ? 0 : 1, step = 0;
    if (rc) fprintf(stderr, "%s\n", vf_error_message(ctx));
    float first = NAN, last = NAN;
    for (int epoch = 0; epoch < EPOCHS && rc == 0; epoch++) {
        double sum = 0.0;
        int batches = 0;
        for (int start = 0; start < N && rc == 0; start += BATCH, step++, batches++) {
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
                if (!(fabsf(vt - ve) <= 1e-3f + 1e-3f * fabsf(ve))) {
                    fprintf(stderr, "step %d: traced loss %.6f, eager %.6f: they differ\n", step, vt, ve);
                    rc = 1;
                }
                if (step == 0) first = vt;
                last = vt;
                sum += vt;
            }
            vf_scope_end(ctx);
        }
        if (rc == 0)
            printf("epoch %d: mean loss %.5f (%d batches, last loss %.5f)\n", epoch, sum / batches, batches, last);
    }
    vf_function_stats st = {0};
    vf_function_stats_get(fn, &st);
    float acc = rc == 0 ? accuracy(ctx, &traced, x, y, N) : NAN;
    printf("first loss %.4f, last %.4f; accuracy %.4f; traces %d, retraces %d, plans %d, "
           "%d kernels and %d dispatches per call\n",
           first, last, acc, st.traces, st.retraces, st.plans, st.kernels, st.dispatches_per_call);
    if (rc == 0 && !(last < 0.3f * first)) fprintf(stderr, "the loss did not fall well below its start\n"), rc = 1;
    if (rc == 0 && !(acc >= 0.95f)) fprintf(stderr, "the accuracy is too low\n"), rc = 1;
    if (rc == 0 && st.traces != 1) fprintf(stderr, "retraced: %s\n", vf_function_retrace_reason(fn)), rc = 1;
    vf_function_destroy(fn);
    free(x), free(centre), free(y);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    vf_context_destroy(ctx);
    return rc;
}
