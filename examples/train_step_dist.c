/* The seed's train_step (examples/train_step.c: softmax regression
 * 784 -> 10, gradient clipping with vf_cond, assign_sub updates) trained
 * data-parallel: every rank takes BATCH / ranks rows of each batch, the
 * traced step averages the loss and both gradients with one
 * vf_dist_allreduce node, then clips the averaged weight gradient and
 * updates. Rank 0 also runs the seed's step on whole batches in one
 * process and checks the loss at every step; every rank checks its final
 * weights bit-identical to rank 0's. Exits non-zero otherwise.
 *
 *   mpirun -np 2 ./example_train_step_dist */
#include <vkfuse_dist.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FEAT 784
#define CLASSES 10
#define N 480
#define BATCH 120 /* divisible by 1 .. 6 ranks */
#define EPOCHS 4

typedef struct {
    vf_tensor *w, *b, *lr, *threshold;
    vf_dist *d; /* NULL: one process */
} model;

static vf_status clip(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
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
    vf_tensor *t[3] = {vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false)};
    vf_status s = vf_tape_gradient(tape, t[0], 2, (vf_tensor *[]){m->w, m->b}, t + 1);
    vf_tape_end(tape);
    /* the whole batch's loss and gradients: the mean of the shards' */
    if (s == VF_OK && m->d) s = vf_dist_allreduce(m->d, 3, t, VF_DIST_MEAN, t);
    if (s != VF_OK) return s;
    vf_tensor *norm = vf_norm(ctx, t[1]), *dw = NULL;
    s = vf_cond(ctx, vf_greater(ctx, norm, m->threshold), clip, keep, 2, (vf_tensor *[]){t[1], norm}, 1, &dw, m);
    if (s != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, dw))) != VF_OK) return s;
    if ((s = vf_assign_sub(m->b, vf_mul(ctx, m->lr, t[2]))) != VF_OK) return s;
    out[0] = t[0];
    return VF_OK;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static model make_model(vf_context *ctx, vf_dist *d)
{
    return (model){.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){FEAT, CLASSES}, 0.0)),
                   .b = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){CLASSES}, 0.0)),
                   .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.5), .threshold = vf_fill(ctx, VF_F32, 0, NULL, 1.0), .d = d};
}

int main(void)
{
    vf_context *ctx;
    vf_dist *d;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    if (vf_dist_create(ctx, NULL, &d) != VF_OK) return fprintf(stderr, "%s\n", vf_dist_create_error()), 1;
    int rank = vf_dist_rank(d), size = vf_dist_size(d), rc = BATCH % size != 0;
    const int64_t shard = BATCH / size;
    float *x = malloc(sizeof(float) * N * FEAT), *centre = malloc(sizeof(float) * CLASSES * FEAT);
    int32_t *y = malloc(sizeof(int32_t) * N);
    if (!x || !centre || !y) return fprintf(stderr, "out of memory\n"), 1;
    for (int i = 0; i < CLASSES * FEAT; i++) centre[i] = (float)(uniform() * 2.0 - 1.0) * 0.2f;
    for (int i = 0; i < N; i++) {
        y[i] = (int32_t)(uniform() * CLASSES) % CLASSES;
        for (int j = 0; j < FEAT; j++) x[i * FEAT + j] = centre[y[i] * FEAT + j] + (float)(uniform() - 0.5) * 0.2f;
    }
    model m = make_model(ctx, d), ref = make_model(ctx, NULL);
    if (vf_dist_broadcast(d, 2, (vf_tensor *[]){m.w, m.b}, 0) != VF_OK) rc = 1;
    const vf_tensor_spec sig[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}}, {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "train_step_dp", .body = train_step, .user = &m,
                                                                    .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    vf_function *rfn = vf_function_create(ctx, &(vf_function_desc){.name = "train_step", .body = train_step, .user = &ref,
                                                                     .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    float first = NAN, last = NAN;
    for (int step = 0; rc == 0 && step < EPOCHS * (N / BATCH); step++) {
        int64_t start = (int64_t)(step % (N / BATCH)) * BATCH, mine = start + rank * shard, full = BATCH;
        vf_scope_begin(ctx);
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){shard, FEAT}, x + mine * FEAT),
                            vf_tensor_from_host(ctx, VF_I32, 1, &shard, y + mine)};
        vf_tensor *lt = NULL;
        float loss = NAN, rl = NAN;
        if (vf_function_call(fn, in, &lt) != VF_OK || vf_tensor_read(lt, &loss, 4) != VF_OK)
            fprintf(stderr, "rank %d step %d: %s\n", rank, step, vf_error_message(ctx)), rc = 1;
        if (rc == 0 && rank == 0) {
            vf_tensor *rin[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){full, FEAT}, x + start * FEAT),
                                 vf_tensor_from_host(ctx, VF_I32, 1, &full, y + start)};
            if (vf_function_call(rfn, rin, &lt) != VF_OK || vf_tensor_read(lt, &rl, 4) != VF_OK)
                fprintf(stderr, "reference: %s\n", vf_error_message(ctx)), rc = 1;
            else if (!(fabsf(loss - rl) <= 1e-4f * (1e-3f + fabsf(rl))))
                fprintf(stderr, "step %d: %d ranks' loss %.7f, one process %.7f\n", step, size, loss, rl), rc = 1;
            else
                printf("step %2d: loss %.6f (one process: %.6f)\n", step, loss, rl);
        }
        if (step == 0) first = loss;
        last = loss;
        vf_scope_end(ctx);
    }
    /* identical weights: rank 0's broadcast into copies, compared here, any difference summed */
    int32_t diff = 1, all = -1;
    if (rc == 0) {
        vf_scope_begin(ctx);
        vf_tensor *c[2] = {vf_variable(ctx, m.w), vf_variable(ctx, m.b)}, *sum = NULL;
        float a[FEAT * CLASSES], b[FEAT * CLASSES];
        if (vf_dist_broadcast(d, 2, c, 0) == VF_OK) {
            diff = 0;
            for (int i = 0; i < 2; i++) {
                size_t bytes = vf_tensor_bytes(c[i]);
                diff |= vf_tensor_read(i ? m.b : m.w, a, bytes) != VF_OK || vf_tensor_read(c[i], b, bytes) != VF_OK ||
                        memcmp(a, b, bytes) != 0;
            }
            vf_tensor *f = vf_tensor_from_host(ctx, VF_I32, 0, NULL, &diff);
            if (vf_dist_allreduce(d, 1, &f, VF_DIST_SUM, &sum) != VF_OK || vf_tensor_read(sum, &all, 4) != VF_OK) all = -1;
        }
        vf_scope_end(ctx);
    }
    if (rc == 0 && all != 0) fprintf(stderr, "rank %d: final weights differ between ranks\n", rank), rc = 1;
    if (rc == 0 && !(last < 0.25f * first)) fprintf(stderr, "the loss did not fall well below its start\n"), rc = 1;
    if (rank == 0) printf("%d ranks: first loss %.4f, last %.4f; weights identical on every rank: %s\n", size, first, last, all == 0 ? "yes" : "no");
    vf_function_destroy(fn), vf_function_destroy(rfn);
    free(x), free(centre), free(y);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    vf_dist_destroy(d);
    vf_context_destroy(ctx);
    return rc;
}
