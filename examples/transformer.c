/* A tiny transformer language model that learns to reverse a sequence.
 *
 * Each training sequence is x[0..L-1] SEP y[0..L-1] with y the reverse of
 * x, over digits 0..DIGITS-1 (SEP is token DIGITS). The model reads the
 * sequence without its last token and predicts every next token (a causal
 * language model); the loss counts only the L predictions of y, since x is
 * random and cannot be predicted.
 *
 * The model: token + position embeddings (vf_gather), BLOCKS pre-layer-norm
 * blocks of multi-head causal self-attention (the mask built with
 * vf_range / vf_greater_equal and applied with vf_where) and a GELU MLP,
 * dropout (vf_dropout from a vf_generator made once; new masks at every
 * call of the traced step, none when predicting) on the attention and MLP
 * outputs, a final layer norm and a projection to the vocabulary; sparse softmax
 * cross-entropy; Adam with bias correction written with the library's own
 * ops. The whole train step (forward, vf_tape gradients, Adam updates of
 * every variable) is one traced vf_function. Layer norm is composed: the
 * library has no layer norm op.
 *
 * Checks (non-zero exit otherwise):
 *  - for the first EAGER_STEPS steps the same step also runs eagerly on a
 *    second copy of the model made from the same seeds (its own generator
 *    of the same seed, so the same dropout masks): the losses must agree,
 *    and so must every parameter afterwards;
 *  - the loss falls well below its start;
 *  - on held-out sequences, decoded greedily one token at a time (each
 *    prediction fed back as the next input), the token accuracy is far
 *    above chance (1 / DIGITS);
 *  - the train step was traced once, and so was the predict function,
 *    whose input signature has a symbolic batch (-1), for two batch sizes. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DIGITS 8          /* tokens 0..7; SEP = 8 */
#define SEP DIGITS
#define VOCAB (DIGITS + 1)
#define L 6               /* digits to reverse */
#define T (2 * L)         /* model input length: x, SEP, y without its last token */
#define D 32              /* d_model */
#define HEADS 2
#define HD (D / HEADS)
#define FF (4 * D)
#define BLOCKS 1
#define BATCH 32
#define STEPS 60
#define EAGER_STEPS 3
#define TEST 256          /* held-out sequences */
#define DROPOUT 0.1       /* in training; none when predicting */

/* The variables of one block, in the order params() lists them. */
enum { LN1_G, LN1_B, WQKV, WO, LN2_G, LN2_B, W1, B1, W2, B2, PER_BLOCK };
#define NPARAM (2 + BLOCKS * PER_BLOCK + 3) /* tok, pos, blocks, lnf_g, lnf_b, wout */

typedef struct {
    vf_tensor *p[NPARAM];     /* parameters (variables) */
    vf_generator *gen;        /* dropout's random stream */
    vf_tensor *m[NPARAM], *v[NPARAM]; /* Adam's moments (variables) */
    vf_tensor *t;             /* step count, f32 scalar variable */
} model;

#define TOK 0
#define POS 1
#define BLK(b, i) (2 + (b) * PER_BLOCK + (i))
#define LNF_G (2 + BLOCKS * PER_BLOCK)
#define LNF_B (LNF_G + 1)
#define WOUT (LNF_G + 2)

static vf_tensor *scalar(vf_context *ctx, double v) { return vf_fill(ctx, VF_F32, 0, NULL, v); }

/* Layer norm over the last axis, composed: (x - mean) / sqrt(var + eps) * g + b. */
static vf_tensor *layer_norm(vf_context *ctx, vf_tensor *x, vf_tensor *g, vf_tensor *b)
{
    vf_tensor *c = vf_sub(ctx, x, vf_reduce_mean(ctx, x, 1, (int[]){-1}, true));
    vf_tensor *var = vf_reduce_mean(ctx, vf_square(ctx, c), 1, (int[]){-1}, true);
    vf_tensor *n = vf_mul(ctx, c, vf_rsqrt(ctx, vf_add(ctx, var, scalar(ctx, 1e-5))));
    return vf_add(ctx, vf_mul(ctx, n, g), b);
}

/* [B, T, D] -> [B, HEADS, T, HD]; B is -1, so that a symbolic batch of a
   traced function (the predict function's) stays symbolic. */
static vf_tensor *heads(vf_context *ctx, vf_tensor *x)
{
    vf_tensor *r = vf_reshape(ctx, x, 4, (int64_t[]){-1, T, HEADS, HD});
    return vf_transpose(ctx, r, (int[]){0, 2, 1, 3});
}

/* Multi-head causal self-attention of h [B, T, D]. */
static vf_tensor *attention(vf_context *ctx, vf_tensor *const *p, vf_tensor *h)
{
    vf_tensor *qkv[3] = {NULL, NULL, NULL};
    if (vf_split(ctx, vf_matmul(ctx, h, p[WQKV]), 3, NULL, -1, qkv) != VF_OK) return NULL;
    vf_tensor *q = heads(ctx, qkv[0]), *k = heads(ctx, qkv[1]), *v = heads(ctx, qkv[2]);
    vf_tensor *s = vf_mul(ctx, vf_matmul_ex(ctx, q, k, false, true), scalar(ctx, 1.0 / sqrt(HD)));
    /* position i sees positions j <= i: the mask is [T, T], broadcast over batch and heads */
    vf_tensor *pos = vf_range(ctx, VF_I32, 0, T, 1);
    vf_tensor *causal = vf_greater_equal(ctx, vf_reshape(ctx, pos, 2, (int64_t[]){T, 1}),
                                         vf_reshape(ctx, pos, 2, (int64_t[]){1, T}));
    s = vf_where(ctx, causal, s, scalar(ctx, -INFINITY));
    vf_tensor *o = vf_matmul(ctx, vf_softmax(ctx, s, -1), v);                 /* [B, H, T, HD] */
    o = vf_reshape(ctx, vf_transpose(ctx, o, (int[]){0, 2, 1, 3}), 3, (int64_t[]){-1, T, D});
    return vf_matmul(ctx, o, p[WO]);
}

/* Logits [B, T, VOCAB] of the token ids [B, T]; dropout at rate on each
   block's attention and MLP outputs (rate 0: none, nothing drawn). */
static vf_tensor *forward(vf_context *ctx, const model *m, vf_tensor *ids, double rate)
{
    vf_tensor *x = vf_add(ctx, vf_gather(ctx, m->p[TOK], ids, 0),
                          vf_gather(ctx, m->p[POS], vf_range(ctx, VF_I32, 0, T, 1), 0));
    for (int b = 0; b < BLOCKS; b++) {
        vf_tensor *const *p = &m->p[BLK(b, 0)];
        vf_tensor *a = attention(ctx, p, layer_norm(ctx, x, p[LN1_G], p[LN1_B]));
        x = vf_add(ctx, x, vf_dropout(ctx, m->gen, a, rate));
        vf_tensor *h = layer_norm(ctx, x, p[LN2_G], p[LN2_B]);
        h = vf_gelu(ctx, vf_add(ctx, vf_matmul(ctx, h, p[W1]), p[B1]));
        x = vf_add(ctx, x, vf_dropout(ctx, m->gen, vf_add(ctx, vf_matmul(ctx, h, p[W2]), p[B2]), rate));
    }
    return vf_matmul(ctx, layer_norm(ctx, x, m->p[LNF_G], m->p[LNF_B]), m->p[WOUT]);
}

/* in[0]: ids [B, T]; in[1]: the answer y [B, L]. out[0]: the mean loss over y. */
static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *logits = forward(ctx, m, in[0], DROPOUT);
    /* position L+j holds SEP (j = 0) or y[j-1] and predicts y[j] */
    vf_tensor *ans = vf_slice(ctx, logits, (int64_t[]){0, L, 0}, NULL, NULL);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], ans), 0, NULL, false);
    vf_tensor *g[NPARAM] = {0};
    vf_status s = vf_tape_gradient(tape, loss, NPARAM, m->p, g);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    /* Adam: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t); p -= lr_t m / (sqrt(v) + eps) */
    const double lr = 1e-2, b1 = 0.9, b2 = 0.98, eps = 1e-8;
    vf_tensor *t = vf_add(ctx, m->t, scalar(ctx, 1.0));
    vf_tensor *lr_t = vf_div(ctx, vf_mul(ctx, scalar(ctx, lr),
                                         vf_sqrt(ctx, vf_sub(ctx, scalar(ctx, 1.0), vf_pow(ctx, scalar(ctx, b2), t)))),
                             vf_sub(ctx, scalar(ctx, 1.0), vf_pow(ctx, scalar(ctx, b1), t)));
    /* every new value first, then the assigns: a traced function's kernels
       do not fuse across an assign, so the update math fuses with the
       gradients that feed it only when no assign comes between them */
    vf_tensor *nm[NPARAM], *nv[NPARAM], *np[NPARAM];
    for (int i = 0; i < NPARAM; i++) {
        nm[i] = vf_add(ctx, vf_mul(ctx, scalar(ctx, b1), m->m[i]), vf_mul(ctx, scalar(ctx, 1 - b1), g[i]));
        nv[i] = vf_add(ctx, vf_mul(ctx, scalar(ctx, b2), m->v[i]), vf_mul(ctx, scalar(ctx, 1 - b2), vf_square(ctx, g[i])));
        np[i] = vf_sub(ctx, m->p[i], vf_div(ctx, vf_mul(ctx, lr_t, nm[i]), vf_add(ctx, vf_sqrt(ctx, nv[i]), scalar(ctx, eps))));
    }
    for (int i = 0; i < NPARAM; i++)
        if ((s = vf_assign(m->m[i], nm[i])) != VF_OK || (s = vf_assign(m->v[i], nv[i])) != VF_OK ||
            (s = vf_assign(m->p[i], np[i])) != VF_OK)
            return s;
    if ((s = vf_assign(m->t, t)) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

/* A variable of shape dims: normal(0, stddev) from seed, or `fill` everywhere when stddev is 0. */
static vf_tensor *param(vf_context *ctx, int rank, const int64_t *dims, double stddev, double fill, uint64_t seed)
{
    vf_scope_begin(ctx);
    vf_tensor *init = stddev > 0 ? vf_mul(ctx, vf_random_normal(ctx, VF_F32, rank, dims, seed), scalar(ctx, stddev))
                                 : vf_fill(ctx, VF_F32, rank, dims, fill);
    vf_tensor *var = vf_keep(vf_variable(ctx, init));
    vf_scope_end(ctx);
    return var;
}

/* The same seed gives the same model, and the same dropout masks. */
static model make_model(vf_context *ctx, uint64_t seed)
{
    model m = {.gen = vf_generator_create(ctx, seed + 1000)};
    const double s_in = 1.0 / sqrt(D), s_out = s_in / sqrt(2.0 * BLOCKS); /* residual branches scaled down */
    m.p[TOK] = param(ctx, 2, (int64_t[]){VOCAB, D}, 0.5, 0, seed++);
    m.p[POS] = param(ctx, 2, (int64_t[]){T, D}, 0.5, 0, seed++);
    for (int b = 0; b < BLOCKS; b++) {
        vf_tensor **p = &m.p[BLK(b, 0)];
        p[LN1_G] = param(ctx, 1, (int64_t[]){D}, 0, 1, 0);
        p[LN1_B] = param(ctx, 1, (int64_t[]){D}, 0, 0, 0);
        p[WQKV] = param(ctx, 2, (int64_t[]){D, 3 * D}, s_in, 0, seed++);
        p[WO] = param(ctx, 2, (int64_t[]){D, D}, s_out, 0, seed++);
        p[LN2_G] = param(ctx, 1, (int64_t[]){D}, 0, 1, 0);
        p[LN2_B] = param(ctx, 1, (int64_t[]){D}, 0, 0, 0);
        p[W1] = param(ctx, 2, (int64_t[]){D, FF}, s_in, 0, seed++);
        p[B1] = param(ctx, 1, (int64_t[]){FF}, 0, 0, 0);
        p[W2] = param(ctx, 2, (int64_t[]){FF, D}, 1.0 / sqrt(FF) / sqrt(2.0 * BLOCKS), 0, seed++);
        p[B2] = param(ctx, 1, (int64_t[]){D}, 0, 0, 0);
    }
    m.p[LNF_G] = param(ctx, 1, (int64_t[]){D}, 0, 1, 0);
    m.p[LNF_B] = param(ctx, 1, (int64_t[]){D}, 0, 0, 0);
    m.p[WOUT] = param(ctx, 2, (int64_t[]){D, VOCAB}, s_in, 0, seed++);
    for (int i = 0; i < NPARAM; i++) {
        vf_scope_begin(ctx);
        vf_tensor *z = vf_mul(ctx, m.p[i], scalar(ctx, 0.0));
        m.m[i] = vf_keep(vf_variable(ctx, z));
        m.v[i] = vf_keep(vf_variable(ctx, z));
        vf_scope_end(ctx);
    }
    m.t = param(ctx, 0, NULL, 0, 0, 0);
    return m;
}

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng = 88172645463325252ull;
static int digit(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (int)((rng >> 11) % DIGITS);
}

/* n random sequences: ids [n, T] (x, SEP, y[0..L-2]) and answers y [n, L]. */
static void make_batch(int n, int32_t *ids, int32_t *y)
{
    for (int i = 0; i < n; i++) {
        int32_t *s = ids + i * T;
        for (int j = 0; j < L; j++) s[j] = digit();
        s[L] = SEP;
        for (int j = 0; j < L; j++) y[i * L + j] = s[L - 1 - j];
        for (int j = 0; j + 1 < L; j++) s[L + 1 + j] = y[i * L + j];
    }
}

/* The predicted next token at every position: argmax of the logits [B, T]. */
static vf_status predict(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_argmax(ctx, forward(ctx, user, in[0], 0.0), -1);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* Greedy decoding with the traced predict function: the answer positions
   of ids start unknown (SEP) and are filled one at a time with the
   model's prediction, which the next step reads (the causal mask keeps
   the unknown positions from affecting the earlier ones). Returns the
   fraction of answer tokens equal to y; *seq the fraction of sequences
   reversed without a mistake. */
static double decode_accuracy(vf_context *ctx, vf_function *pred_fn, int32_t *ids, const int32_t *y, int n, double *seq)
{
    int32_t *pred = malloc(sizeof(int32_t) * n * T);
    if (!pred) return NAN;
    for (int i = 0; i < n; i++)
        for (int j = L + 1; j < T; j++) ids[i * T + j] = SEP;
    bool ok = true;
    for (int j = 0; j < L && ok; j++) {
        vf_scope_begin(ctx);
        vf_tensor *in = vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){n, T}, ids), *a = NULL;
        ok = vf_function_call(pred_fn, &in, &a) == VF_OK && vf_tensor_read(a, pred, sizeof(int32_t) * n * T) == VF_OK;
        /* position L+j predicts y[j]; it becomes the input at L+j+1 */
        for (int i = 0; i < n && ok && j + 1 < L; i++) ids[i * T + L + 1 + j] = pred[i * T + L + j];
        vf_scope_end(ctx);
    }
    int hits = 0, whole = 0;
    for (int i = 0; ok && i < n; i++) {
        int row = 0;
        for (int j = 0; j < L; j++) row += (j + 1 < L ? ids[i * T + L + 1 + j] : pred[i * T + L + j]) == y[i * L + j];
        hits += row, whole += row == L;
    }
    free(pred);
    *seq = ok ? (double)whole / n : NAN;
    return ok ? (double)hits / (n * L) : NAN;
}

/* Largest |a - b| over all parameters of two models; -1 on error. */
static double max_param_diff(const model *a, const model *b)
{
    double worst = 0;
    for (int i = 0; i < NPARAM; i++) {
        size_t bytes = vf_tensor_bytes(a->p[i]);
        float *x = malloc(bytes), *y = malloc(bytes);
        int ok = x && y && vf_tensor_read(a->p[i], x, bytes) == VF_OK && vf_tensor_read(b->p[i], y, bytes) == VF_OK;
        for (size_t k = 0; ok && k < bytes / sizeof(float); k++)
            if (!(fabs((double)x[k] - y[k]) <= worst)) worst = fabs((double)x[k] - y[k]);
        free(x), free(y);
        if (!ok) return -1;
    }
    return worst;
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    printf("device: %s (VKFUSE_BACKEND=cpu or vulkan to choose)\n", vf_device_name(ctx));
    model traced = make_model(ctx, 7), eager = make_model(ctx, 7);
    vf_tensor_spec sig[2] = {{.dtype = VF_I32, .rank = 2, .shape = {BATCH, T}},
                             {.dtype = VF_I32, .rank = 2, .shape = {BATCH, L}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "lm_train_step", .body = train_step,
        .user = &traced, .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    int rc = vf_status_get(ctx) == VF_OK && fn ? 0 : 1;
    if (rc) fprintf(stderr, "%s\n", vf_error_message(ctx));
    int32_t ids[BATCH * T], y[BATCH * L];
    float first = NAN, last = NAN;
    double avg = 0, step_s[STEPS];
    int timed = 0;
    for (int step = 0; step < STEPS && rc == 0; step++) {
        double t0 = now_s();
        make_batch(BATCH, ids, y);
        vf_scope_begin(ctx);
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){BATCH, T}, ids),
                            vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){BATCH, L}, y)};
        vf_tensor *lt = NULL, *le = NULL;
        float vt = NAN, ve = NAN;
        if (vf_function_call(fn, in, &lt) != VF_OK || vf_tensor_read(lt, &vt, sizeof vt) != VF_OK ||
            (step < EAGER_STEPS &&
             (train_step(ctx, in, &le, &eager) != VF_OK || vf_tensor_read(le, &ve, sizeof ve) != VF_OK))) {
            fprintf(stderr, "step %d: %s\n", step, vf_error_message(ctx));
            rc = 1;
        } else if (step < EAGER_STEPS) {
            printf("step %3d: loss traced %.5f eager %.5f\n", step, vt, ve);
            if (!(fabsf(vt - ve) <= 1e-4f + 1e-4f * fabsf(ve)))
                fprintf(stderr, "step %d: traced and eager losses differ\n", step), rc = 1;
        }
        vf_scope_end(ctx);
        /* the traced step alone (batch, upload, call, loss read), once the
           eager comparison is over: bench/peer/vs_torch.py reads it */
        if (step >= EAGER_STEPS + 2) step_s[timed++] = now_s() - t0;
        if (step == 0) first = vt;
        avg = step == 0 ? vt : 0.9 * avg + 0.1 * vt;
        last = vt;
        if (rc == 0 && step + 1 == EAGER_STEPS) {
            double d = max_param_diff(&traced, &eager);
            printf("after %d steps the traced and eager parameters differ by at most %.3g\n", EAGER_STEPS, d);
            if (!(d >= 0 && d <= 1e-3)) fprintf(stderr, "traced and eager parameters differ\n"), rc = 1;
        }
        if (rc == 0 && (step + 1) % 50 == 0) printf("step %3d: loss %.4f (running mean %.4f)\n", step + 1, vt, avg);
    }
    vf_function_stats st = {0};
    vf_function_stats_get(fn, &st);
    if (rc == 0 && timed > 0) {
        qsort(step_s, (size_t)timed, sizeof *step_s, cmp_double);
        printf("traced step: median %.3f ms over steps %d-%d\n", step_s[timed / 2] * 1e3, STEPS - timed, STEPS - 1);
    }
    static int32_t tids[TEST * T], ty[TEST * L];
    rng = 0x9e3779b97f4a7c15ull; /* held out: another stream than the training batches */
    make_batch(TEST, tids, ty);
    vf_function *pred_fn = vf_function_create(ctx, &(vf_function_desc){.name = "lm_predict", .body = predict,
        .user = &traced, .n_inputs = 1, .n_outputs = 1,
        .input_signature = (vf_tensor_spec[]){{.dtype = VF_I32, .rank = 2, .shape = {-1, T}}}});
    /* two batch sizes, one trace of the predict function (its batch is symbolic) */
    double seq = NAN, seq2 = NAN, acc = NAN, acc2 = NAN;
    vf_function_stats ps = {0};
    if (rc == 0 && pred_fn) {
        acc = decode_accuracy(ctx, pred_fn, tids, ty, TEST - 56, &seq);
        acc2 = decode_accuracy(ctx, pred_fn, tids + (TEST - 56) * T, ty + (TEST - 56) * L, 56, &seq2);
        acc = (acc * (TEST - 56) + acc2 * 56) / TEST, seq = (seq * (TEST - 56) + seq2 * 56) / TEST;
        vf_function_stats_get(pred_fn, &ps);
    }
    vf_function_destroy(pred_fn);
    printf("first loss %.4f, last %.4f; held-out token accuracy %.4f (chance %.4f), whole sequences %.4f; "
           "traces %d, %d kernels and %d dispatches per step\n",
           first, last, acc, 1.0 / DIGITS, seq, st.traces, st.kernels, st.dispatches_per_call);
    if (rc == 0 && !(avg < 0.25 * first)) fprintf(stderr, "the loss did not fall well below its start\n"), rc = 1;
    if (rc == 0 && !(acc >= 0.9)) fprintf(stderr, "the held-out accuracy is too low\n"), rc = 1;
    if (rc == 0 && st.traces != 1) fprintf(stderr, "retraced: %s\n", vf_function_retrace_reason(fn)), rc = 1;
    if (rc == 0 && ps.traces != 1) fprintf(stderr, "the predict function traced %d times\n", ps.traces), rc = 1;
    vf_function_destroy(fn);
    vf_generator_destroy(traced.gen), vf_generator_destroy(eager.gen);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    vf_context_destroy(ctx);
    return rc;
}
