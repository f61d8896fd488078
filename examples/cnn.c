/* A small convolutional network trained on a synthetic image set that it
 * draws itself: 12x12 grey images of three shapes (a square outline, a
 * plus, an X) of random size and position, with noise. The model is
 * conv 3x3 (8) - relu - max pool 2, conv 3x3 (8) - relu - max pool 2,
 * dense 72 -> 3, trained with SGD by a traced train step (forward pass,
 * mean sparse softmax cross-entropy, gradients of the six variables from a
 * vf_tape, vf_assign_sub updates) with the input signature
 * [-1, 12, 12, 1], [-1]. In the traced step each conv2d, its bias add and
 * its relu are one kernel on Vulkan (a conv epilogue group).
 *
 * The first EAGER_STEPS steps also run eagerly on a second copy of the
 * model (same seeded initialisation): the losses must agree. Exits
 * non-zero unless they do, the loss falls well below its start and the
 * accuracy on held-out images is well above chance (1/3). Runs on the
 * default device (the best GPU, else the CPU backend); VKFUSE_BACKEND=cpu
 * or vulkan picks one. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define SIDE 12
#define PIX (SIDE * SIDE)
#define CLASSES 3
#define N_TRAIN 480
#define N_TEST 240
#define BATCH 48
#define EPOCHS 5
#define EAGER_STEPS 10

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* one image of class k: a shape of radius 2..4 around a random centre */
static void draw(float *img, int k)
{
    int r = 2 + (int)(uniform() * 3), cy = r + (int)(uniform() * (SIDE - 2 * r)), cx = r + (int)(uniform() * (SIDE - 2 * r));
    for (int y = 0; y < SIDE; y++)
        for (int x = 0; x < SIDE; x++) {
            int dy = y - cy, dx = x - cx, ay = abs(dy), ax = abs(dx);
            bool on = k == 0 ? (ay <= r && ax <= r && (ay == r || ax == r))   /* square outline */
                    : k == 1 ? ((ay == 0 && ax <= r) || (ax == 0 && ay <= r)) /* plus */
                             : (ay == ax && ax <= r);                          /* X */
            img[y * SIDE + x] = (on ? 1.0f : 0.0f) + (float)(uniform() - 0.5) * 0.5f;
        }
}

typedef struct {
    vf_tensor *w[3], *b[3]; /* conv 1, conv 2, dense */
    vf_tensor *lr;
} model;

static vf_tensor *conv_relu_pool(vf_context *ctx, vf_tensor *x, vf_tensor *w, vf_tensor *b)
{
    static const vf_conv2d_desc same = {.padding = VF_PADDING_SAME};
    static const vf_pool2d_desc pool = {.window = {2, 2}};
    return vf_max_pool2d(ctx, vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, x, w, &same), b)), &pool);
}

/* logits of x [batch, 12, 12, 1] */
static vf_tensor *forward(vf_context *ctx, const model *m, vf_tensor *x)
{
    vf_tensor *h = conv_relu_pool(ctx, x, m->w[0], m->b[0]);   /* [batch, 6, 6, 8] */
    h = conv_relu_pool(ctx, h, m->w[1], m->b[1]);               /* [batch, 3, 3, 8] */
    h = vf_reshape(ctx, h, 2, (int64_t[]){-1, 3 * 3 * 8});
    return vf_add(ctx, vf_matmul(ctx, h, m->w[2]), m->b[2]);
}

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], forward(ctx, m, in[0])), 0,
                                     NULL, false);
    vf_tensor *vars[6] = {m->w[0], m->b[0], m->w[1], m->b[1], m->w[2], m->b[2]}, *g[6] = {0};
    vf_status s = vf_tape_gradient(tape, loss, 6, vars, g);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    for (int i = 0; i < 6; i++)
        if ((s = vf_assign_sub(vars[i], vf_mul(ctx, m->lr, g[i]))) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

/* He initialisation from a seeded generator, zero biases: the same seed
   gives the same model. */
static model make_model(vf_context *ctx, uint64_t seed)
{
    static const int64_t wshape[3][4] = {{3, 3, 1, 8}, {3, 3, 8, 8}, {72, 3}};
    static const int wrank[3] = {4, 4, 2};
    static const double stddev[3] = {0.4714045207910317, 0.16666666666666666, 0.16666666666666666}; /* sqrt(2 / fan_in) */
    model m = {.lr = vf_fill(ctx, VF_F32, 0, NULL, 0.2)};
    for (int i = 0; i < 3; i++) {
        vf_scope_begin(ctx);
        vf_tensor *scale = vf_fill(ctx, VF_F32, 0, NULL, stddev[i]);
        vf_tensor *w = vf_mul(ctx, vf_random_normal(ctx, VF_F32, wrank[i], wshape[i], seed + (uint64_t)i), scale);
        m.w[i] = vf_keep(vf_variable(ctx, w));
        m.b[i] = vf_keep(vf_variable(ctx, vf_fill(ctx, VF_F32, 1, &wshape[i][wrank[i] - 1], 0.0)));
        vf_scope_end(ctx);
    }
    return m;
}

/* fraction of the n images whose largest logit is their label */
static float accuracy(vf_context *ctx, const model *m, const float *x, const int32_t *y, int64_t n)
{
    float acc = NAN;
    vf_scope_begin(ctx);
    vf_tensor *xt = vf_tensor_from_host(ctx, VF_F32, 4, (int64_t[]){n, SIDE, SIDE, 1}, x);
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
    int n_all = N_TRAIN + N_TEST;
    float *x = malloc(sizeof(float) * (size_t)n_all * PIX);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n_all);
    if (!x || !y) return fprintf(stderr, "out of memory\n"), 1;
    for (int i = 0; i < n_all; i++) {
        y[i] = i % CLASSES;
        draw(x + (size_t)i * PIX, y[i]);
    }
    model traced = make_model(ctx, 7), eager = make_model(ctx, 7);
    vf_tensor_spec sig[2] = {{.dtype = VF_F32, .rank = 4, .shape = {-1, SIDE, SIDE, 1}},
                             {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "cnn_train_step", .body = train_step,
        .user = &traced, .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    int rc = vf_status_get(ctx) == VF_OK && fn ? 0 : 1, step = 0;
    if (rc) fprintf(stderr, "%s\n", vf_error_message(ctx));
    float first = NAN, last = NAN;
    for (int epoch = 0; epoch < EPOCHS && rc == 0; epoch++) {
        double sum = 0.0;
        int batches = 0;
        for (int start = 0; start < N_TRAIN && rc == 0; start += BATCH, step++, batches++) {
            int64_t nb = N_TRAIN - start < BATCH ? N_TRAIN - start : BATCH;
            vf_scope_begin(ctx);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 4, (int64_t[]){nb, SIDE, SIDE, 1},
                                                    x + (size_t)start * PIX),
                                vf_tensor_from_host(ctx, VF_I32, 1, &nb, y + start)};
            vf_tensor *lt = NULL, *le = NULL;
            float vt = NAN, ve = NAN;
            bool both = step < EAGER_STEPS;
            if (vf_function_call(fn, in, &lt) != VF_OK || vf_tensor_read(lt, &vt, sizeof vt) != VF_OK ||
                (both && (train_step(ctx, in, &le, &eager) != VF_OK || vf_tensor_read(le, &ve, sizeof ve) != VF_OK))) {
                fprintf(stderr, "step %d: %s\n", step, vf_error_message(ctx));
                rc = 1;
            } else {
                if (both && !(fabsf(vt - ve) <= 1e-4f + 1e-4f * fabsf(ve))) {
                    fprintf(stderr, "step %d: traced loss %.6f, eager %.6f: they differ\n", step, vt, ve);
                    rc = 1;
                }
                if (step == 0) first = vt;
                last = vt;
                sum += vt;
            }
            vf_scope_end(ctx);
        }
        if (rc == 0) printf("epoch %d: mean loss %.4f (last %.4f)\n", epoch, sum / batches, last);
    }
    vf_function_stats st = {0};
    vf_function_stats_get(fn, &st);
    float acc = rc == 0 ? accuracy(ctx, &traced, x + (size_t)N_TRAIN * PIX, y + N_TRAIN, N_TEST) : NAN;
    printf("first loss %.4f, last %.4f; held-out accuracy %.3f (chance 0.333); traced and eager agreed on the "
           "first %d steps; traces %d, %d kernels and %d dispatches per step\n",
           first, last, acc, EAGER_STEPS, st.traces, st.kernels, st.dispatches_per_call);
    if (rc == 0 && !(last < 0.5f * first)) fprintf(stderr, "the loss did not fall well below its start\n"), rc = 1;
    if (rc == 0 && !(acc >= 0.8f)) fprintf(stderr, "the accuracy is too low\n"), rc = 1;
    if (rc == 0 && st.traces != 1) fprintf(stderr, "retraced: %s\n", vf_function_retrace_reason(fn)), rc = 1;
    vf_function_destroy(fn);
    free(x), free(y);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    vf_context_destroy(ctx);
    return rc;
}
