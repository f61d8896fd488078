/* The MLP of examples/mlp.c (784 -> 512 -> 512 -> 10, ReLU, SGD) trained
 * data-parallel with vkfuse_dist, Horovod's recipe:
 *
 *   - every rank makes the model from its own seed, then vf_dist_broadcast
 *     sets all of them to rank 0's values;
 *   - each step every rank takes its shard (BATCH / ranks rows) of the
 *     global batch; one traced function computes its loss and gradients,
 *     averages the loss and the six gradients with one
 *     vf_dist_allreduce(VF_DIST_MEAN) (a graph node: one packed buffer, one
 *     MPI_Allreduce per call) and applies them.
 *
 * Synchronous averaging computes the same steps as one process with the
 * whole batch: rank 0 also trains a single-process copy of the model on the
 * full batch (seed of rank 0) and checks that the losses agree within f32
 * tolerance at every step; at the end every rank's weights must be
 * bit-identical (checked against rank 0's by a broadcast). Exits non-zero
 * otherwise.
 *
 *   mpirun -np 2 ./example_mlp_dist        (also -np 1, 3, 4, 5, 6)
 *   mpirun -np 2 -H host1,host2 ./example_mlp_dist
 *
 * The data set is the generated one of examples/mlp.c, made identically on
 * every rank. */
#include <vkfuse_dist.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FEAT 784
#define HIDDEN 512
#define CLASSES 10
#define N 960
#define BATCH 120 /* divisible by 1 .. 6 ranks; 8 steps an epoch */
#define EPOCHS 2

typedef struct {
    vf_tensor *v[6]; /* w0 b0 w1 b1 w2 b2: variables */
    vf_tensor *lr;
} model;

static vf_tensor *forward(vf_context *ctx, const model *m, vf_tensor *x)
{
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, x, m->v[0]), m->v[1]));
    h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, m->v[2]), m->v[3]));
    return vf_add(ctx, vf_matmul(ctx, h, m->v[4]), m->v[5]);
}

/* in: x, y. out: the mean loss over these rows, then the six gradients. */
static vf_status grads(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], forward(ctx, m, in[0])), 0, NULL,
                                     false);
    vf_status s = vf_tape_gradient(tape, loss, 6, m->v, out + 1);
    vf_tape_end(tape);
    out[0] = loss;
    return s;
}

/* in: the six (averaged) gradients. SGD. */
static vf_status apply(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)out;
    model *m = user;
    for (int i = 0; i < 6; i++) {
        vf_status s = vf_assign_sub(m->v[i], vf_mul(ctx, m->lr, in[i]));
        if (s != VF_OK) return s;
    }
    return VF_OK;
}

typedef struct {
    model *m;
    vf_dist *d;
} dp;

/* The data-parallel step: this rank's gradients, averaged over the ranks,
   applied. out: the mean loss over the whole batch. */
static vf_status dp_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    dp *p = user;
    vf_tensor *g[7] = {0}, *avg[7] = {0};
    vf_status s = grads(ctx, in, g, p->m);
    if (s == VF_OK) s = vf_dist_allreduce(p->d, 7, g, VF_DIST_MEAN, avg);
    if (s == VF_OK) s = apply(ctx, avg + 1, NULL, p->m);
    out[0] = avg[0];
    return s;
}

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static model make_model(vf_context *ctx, uint64_t seed)
{
    static const int64_t dims[4] = {FEAT, HIDDEN, HIDDEN, CLASSES};
    static const double stddev[3] = {0.0505076272276105, 0.0625, 0.0625}; /* sqrt(2 / fan_in) */
    model m = {.lr = vf_fill(ctx, VF_F32, 0, NULL, 0.2)};
    for (int i = 0; i < 3; i++) {
        vf_scope_begin(ctx);
        vf_tensor *scale = vf_fill(ctx, VF_F32, 0, NULL, stddev[i]);
        vf_tensor *w = vf_mul(ctx, vf_random_normal(ctx, VF_F32, 2, &dims[i], seed + (uint64_t)i), scale);
        m.v[2 * i] = vf_keep(vf_variable(ctx, w));
        m.v[2 * i + 1] = vf_keep(vf_variable(ctx, vf_fill(ctx, VF_F32, 1, &dims[i + 1], 0.0)));
        vf_scope_end(ctx);
    }
    return m;
}

static vf_function *make_fn(vf_context *ctx, const char *name, vf_body body, model *m, int nin, int nout,
                            const vf_tensor_spec *sig)
{
    return vf_function_create(ctx, &(vf_function_desc){.name = name, .body = body, .user = m, .n_inputs = nin,
                                                       .n_outputs = nout, .input_signature = sig});
}

/* 1 if every rank's variables are bit-identical to rank 0's, 0 if not, -1 on error */
static int same_everywhere(vf_dist *d, const model *m)
{
    vf_context *ctx = vf_dist_context(d);
    int same = -1;
    vf_scope_begin(ctx);
    vf_tensor *copy[6], *diff = NULL;
    for (int i = 0; i < 6; i++) copy[i] = vf_variable(ctx, m->v[i]);
    if (vf_dist_broadcast(d, 6, copy, 0) == VF_OK) {
        int32_t mine = 0;
        for (int i = 0; i < 6; i++) {
            size_t bytes = vf_tensor_bytes(m->v[i]);
            char *a = malloc(bytes), *b = malloc(bytes);
            if (!a || !b || vf_tensor_read(m->v[i], a, bytes) != VF_OK || vf_tensor_read(copy[i], b, bytes) != VF_OK)
                mine |= 2;
            else if (memcmp(a, b, bytes) != 0) mine |= 1;
            free(a), free(b);
        }
        vf_tensor *flag = vf_tensor_from_host(ctx, VF_I32, 0, NULL, &mine);
        int32_t all = -1;
        if (vf_dist_allreduce(d, 1, &flag, VF_DIST_SUM, &diff) == VF_OK && vf_tensor_read(diff, &all, 4) == VF_OK)
            same = all == 0;
    }
    vf_scope_end(ctx);
    return same;
}

int main(void)
{
    vf_context *ctx;
    vf_dist *d;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    if (vf_dist_create(ctx, NULL, &d) != VF_OK) return fprintf(stderr, "%s\n", vf_dist_create_error()), 1;
    int rank = vf_dist_rank(d), size = vf_dist_size(d), rc = 0;
    if (BATCH % size) {
        if (rank == 0) fprintf(stderr, "run on a number of ranks that divides %d\n", BATCH);
        vf_dist_destroy(d);
        vf_context_destroy(ctx);
        return 1;
    }
    const int64_t shard = BATCH / size;
    float *x = malloc(sizeof(float) * N * FEAT), *centre = malloc(sizeof(float) * CLASSES * FEAT);
    int32_t *y = malloc(sizeof(int32_t) * N);
    if (!x || !centre || !y) return fprintf(stderr, "out of memory\n"), 1;
    for (int i = 0; i < CLASSES * FEAT; i++) centre[i] = (float)(uniform() * 2.0 - 1.0) * 0.2f;
    for (int i = 0; i < N; i++) {
        y[i] = (int32_t)(uniform() * CLASSES) % CLASSES;
        for (int j = 0; j < FEAT; j++) x[i * FEAT + j] = centre[y[i] * FEAT + j] + (float)(uniform() - 0.5) * 0.4f;
    }

    /* each rank starts from its own seed: the broadcast makes them rank 0's */
    model m = make_model(ctx, 42 + 1000 * (uint64_t)rank), ref = {0};
    if (vf_dist_broadcast(d, 6, m.v, 0) != VF_OK) {
        fprintf(stderr, "%s\n", vf_dist_error_message(d));
        rc = 1;
    }
    const vf_tensor_spec xy[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}},
                                  {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    dp p = {&m, d};
    vf_function *step_fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp_dp_step", .body = dp_step,
                                                                         .user = &p, .n_inputs = 2, .n_outputs = 1,
                                                                         .input_signature = xy});
    vf_function *rg_fn = NULL, *ra_fn = NULL;
    if (rank == 0) { /* the single-process reference: whole batches */
        ref = make_model(ctx, 42);
        rg_fn = make_fn(ctx, "ref_grads", grads, &ref, 2, 7, xy);
        ra_fn = make_fn(ctx, "ref_apply", apply, &ref, 6, 0, NULL);
    }
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    float first = NAN, last = NAN, worst = 0;
    for (int step = 0; rc == 0 && step < EPOCHS * (N / BATCH); step++) {
        int64_t start = (int64_t)(step % (N / BATCH)) * BATCH, mine = start + rank * shard, full = BATCH;
        vf_scope_begin(ctx);
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){shard, FEAT}, x + mine * FEAT),
                            vf_tensor_from_host(ctx, VF_I32, 1, &shard, y + mine)};
        vf_tensor *lt = NULL;
        float loss = NAN;
        if (vf_function_call(step_fn, in, &lt) != VF_OK || vf_tensor_read(lt, &loss, 4) != VF_OK) {
            fprintf(stderr, "rank %d step %d: %s%s\n", rank, step, vf_error_message(ctx), vf_dist_error_message(d));
            rc = 1;
        }
        if (rc == 0 && rank == 0) {
            vf_tensor *rin[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){full, FEAT}, x + start * FEAT),
                                 vf_tensor_from_host(ctx, VF_I32, 1, &full, y + start)};
            vf_tensor *rg[7] = {0};
            float rl = NAN;
            if (vf_function_call(rg_fn, rin, rg) != VF_OK || vf_function_call(ra_fn, rg + 1, NULL) != VF_OK ||
                vf_tensor_read(rg[0], &rl, 4) != VF_OK) {
                fprintf(stderr, "reference step %d: %s\n", step, vf_error_message(ctx));
                rc = 1;
            } else {
                float err = fabsf(loss - rl) / (1e-3f + fabsf(rl));
                if (!(err <= 1e-4f)) {
                    fprintf(stderr, "step %d: %d ranks' loss %.7f, one process %.7f: they differ\n", step, size, loss,
                            rl);
                    rc = 1;
                }
                worst = fmaxf(worst, err);
                printf("step %2d: loss %.6f (one process: %.6f)\n", step, loss, rl);
            }
        }
        if (step == 0) first = loss;
        last = loss;
        vf_scope_end(ctx);
    }
    /* one rank failing must not leave the others waiting: vf_dist_destroy
       below tells them (they fail naming this rank) */
    int same = rc == 0 ? same_everywhere(d, &m) : -1;
    if (rc == 0 && same != 1) fprintf(stderr, "rank %d: the final weights differ between ranks\n", rank), rc = 1;
    if (rc == 0 && !(last < 0.3f * first)) fprintf(stderr, "the loss did not fall well below its start\n"), rc = 1;
    if (rank == 0)
        printf("%d ranks, %lld rows each: first loss %.4f, last %.4f; largest relative difference from one "
               "process %.2g; weights identical on every rank: %s\n",
               size, (long long)shard, first, last, worst, same == 1 ? "yes" : "no");
    vf_function_destroy(step_fn), vf_function_destroy(rg_fn), vf_function_destroy(ra_fn);
    free(x), free(centre), free(y);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "%s\n", vf_error_message(ctx)), rc = 1;
    vf_dist_destroy(d);
    vf_context_destroy(ctx);
    return rc;
}
