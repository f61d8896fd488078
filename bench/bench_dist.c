/* Data-parallel step time split into compute and allreduce, on as many
 * ranks as mpirun starts: the MLP of examples/mlp_dist.c (784 -> 512 ->
 * 512 -> 10, 669,706 parameters), a global batch of 120 rows split over
 * the ranks. Each step: the traced gradient function (compute, waited
 * for), one eager vf_dist_allreduce(MEAN) of the loss and the six
 * gradients (its bytes printed), the traced update. Medians over the
 * steps after the warm-up; every rank's figures, then rank 0's summary.
 *
 *   mpirun -np 1 ./bench_dist [steps]      (then -np 2, -np 3 --oversubscribe)
 *
 * On the default device (VF_BACKEND_AUTO): VKFUSE_BACKEND=vulkan or cpu to choose.
 *
 * The traced variant (the allreduce as a node inside the step: on Vulkan
 * recorded plans split at the node) is timed as a whole step too, split
 * into its allreduce (the time in the node's host steps,
 * vf_dist_traced_seconds) and the rest (compute, partly overlapping it). */
#include <vkfuse_dist.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FEAT 784
#define HIDDEN 512
#define CLASSES 10
#define BATCH 120

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n ? v[n / 2] : NAN;
}

typedef struct {
    vf_tensor *v[6], *lr;
    vf_dist *d;
} model;

static vf_tensor *forward(vf_context *ctx, const model *m, vf_tensor *x)
{
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, x, m->v[0]), m->v[1]));
    h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, m->v[2]), m->v[3]));
    return vf_add(ctx, vf_matmul(ctx, h, m->v[4]), m->v[5]);
}

static vf_status grads(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    out[0] = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], forward(ctx, m, in[0])), 0, NULL, false);
    vf_status s = vf_tape_gradient(tape, out[0], 6, m->v, out + 1);
    vf_tape_end(tape);
    return s;
}

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

static vf_status step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tensor *g[7] = {0}, *avg[7] = {0};
    vf_status s = grads(ctx, in, g, m);
    if (s == VF_OK) s = vf_dist_allreduce(m->d, 7, g, VF_DIST_MEAN, avg);
    if (s == VF_OK) s = apply(ctx, avg + 1, NULL, m);
    out[0] = avg[0];
    return s;
}

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    vf_context *ctx;
    vf_dist *d;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    if (vf_dist_create(ctx, NULL, &d) != VF_OK) return fprintf(stderr, "%s\n", vf_dist_create_error()), 1;
    int rank = vf_dist_rank(d), size = vf_dist_size(d);
    if (BATCH % size || steps < 3) return fprintf(stderr, "ranks must divide %d; steps >= 3\n", BATCH), 1;
    int64_t shard = BATCH / size;
    static const int64_t dims[4] = {FEAT, HIDDEN, HIDDEN, CLASSES};
    model m = {.lr = vf_fill(ctx, VF_F32, 0, NULL, 0.01), .d = d};
    int64_t params = 0;
    for (int i = 0; i < 3; i++) {
        m.v[2 * i] = vf_variable(ctx, vf_mul(ctx, vf_random_normal(ctx, VF_F32, 2, &dims[i], 1 + (uint64_t)i),
                                            vf_fill(ctx, VF_F32, 0, NULL, 0.05)));
        m.v[2 * i + 1] = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, &dims[i + 1], 0.0));
        params += dims[i] * dims[i + 1] + dims[i + 1];
    }
    vf_dist_broadcast(d, 6, m.v, 0);
    float *x = malloc(sizeof(float) * (size_t)shard * FEAT);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)shard);
    for (int64_t i = 0; i < shard * FEAT; i++) x[i] = (float)((i * 7919 + rank) % 1000) / 1000.0f;
    for (int64_t i = 0; i < shard; i++) y[i] = (int32_t)((i + rank) % CLASSES);
    const vf_tensor_spec sig[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}}, {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    vf_function *g_fn = vf_function_create(ctx, &(vf_function_desc){.name = "grads", .body = grads, .user = &m, .n_inputs = 2, .n_outputs = 7, .input_signature = sig});
    vf_function *a_fn = vf_function_create(ctx, &(vf_function_desc){.name = "apply", .body = apply, .user = &m, .n_inputs = 6});
    vf_function *s_fn = vf_function_create(ctx, &(vf_function_desc){.name = "step", .body = step, .user = &m, .n_inputs = 2, .n_outputs = 1, .input_signature = sig});
    double *tc = calloc((size_t)steps, sizeof *tc), *ta = calloc((size_t)steps, sizeof *ta),
           *tu = calloc((size_t)steps, sizeof *tu), *tt = calloc((size_t)steps, sizeof *tt),
           *tr = calloc((size_t)steps, sizeof *tr);
    int rc = 0;
    for (int k = 0; k < steps + 2 && rc == 0; k++) { /* two warm-up steps */
        vf_scope_begin(ctx);
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){shard, FEAT}, x), vf_tensor_from_host(ctx, VF_I32, 1, &shard, y)};
        vf_tensor *g[7] = {0}, *avg[7] = {0}, *l = NULL;
        double t0 = now();
        rc |= vf_function_call(g_fn, in, g) != VF_OK || vf_context_sync(ctx) != VF_OK;
        double t1 = now();
        rc |= rc || vf_dist_allreduce(d, 7, g, VF_DIST_MEAN, avg) != VF_OK;
        double t2 = now();
        rc |= rc || vf_function_call(a_fn, avg + 1, NULL) != VF_OK || vf_context_sync(ctx) != VF_OK;
        double t3 = now(), r0 = vf_dist_traced_seconds(d);
        rc |= rc || vf_function_call(s_fn, in, &l) != VF_OK || vf_context_sync(ctx) != VF_OK;
        double t4 = now();
        if (k >= 2) tc[k - 2] = t1 - t0, ta[k - 2] = t2 - t1, tu[k - 2] = t3 - t2, tt[k - 2] = t4 - t3;
        if (k >= 2) tr[k - 2] = vf_dist_traced_seconds(d) - r0;
        vf_scope_end(ctx);
    }
    if (rc) fprintf(stderr, "rank %d: %s %s\n", rank, vf_error_message(ctx), vf_dist_error_message(d));
    double c = median(tc, steps), a = median(ta, steps), u = median(tu, steps), t = median(tt, steps),
           tred = median(tr, steps);
    vf_function_stats sst = {0};
    vf_function_stats_get(s_fn, &sst);
    size_t bytes = (size_t)(params + 1) * 4;
    printf("rank %d/%d (%s): compute %.2f ms, allreduce %.2f ms, update %.2f ms; traced step with the allreduce node "
           "%.2f ms (allreduce %.2f ms, %s, %d submits)\n", rank, size, vf_device_name(ctx), c * 1e3, a * 1e3, u * 1e3,
           t * 1e3, tred * 1e3, sst.planned ? "split plans" : "node by node", sst.submits_per_call);
    fflush(stdout);
    if (rank == 0)
        printf("SUMMARY ranks %d, rows per rank %lld, %lld parameters, %zu bytes reduced per step (one MPI_Allreduce), "
               "step %.2f ms = compute %.2f + allreduce %.2f + update %.2f; traced step %.2f ms = allreduce %.2f + "
               "the rest %.2f (%s)\n",
               size, (long long)shard, (long long)params, bytes, (c + a + u) * 1e3, c * 1e3, a * 1e3, u * 1e3, t * 1e3,
               tred * 1e3, (t - tred) * 1e3, sst.planned ? "split plans" : "node by node");
    vf_function_destroy(g_fn), vf_function_destroy(a_fn), vf_function_destroy(s_fn);
    free(x), free(y), free(tc), free(ta), free(tu), free(tt), free(tr);
    vf_dist_destroy(d);
    vf_context_destroy(ctx);
    return rc;
}
