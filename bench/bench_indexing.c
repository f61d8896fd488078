/* Indexing ops (issue 13), eager, on Vulkan and on the CPU backend side by
 * side in one run: an embedding lookup (gather of 2048 rows of a
 * [32768, 256] table) and its gradient (scatter_add of 2048 rows into it),
 * cumsum along rows of [64, 16384], top_k (k = 10) of [256, 1024] and
 * top_k (k = 50) of one row of 65536 and of 262144 (a vocabulary).
 * Prints milliseconds per call (best of the timed calls, each synced) and
 * the CPU / Vulkan ratio.
 * Usage: bench_indexing [--iters N] [--quick]   (not a test: nothing asserted) */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkfuse.h"

enum { V = 32768, D = 256, T = 2048 };

typedef struct {
    vf_tensor *table, *ids, *rows, *scan, *scores, *vocab;
} inputs;

static inputs make_inputs(vf_context *ctx)
{
    inputs in;
    in.table = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){V, D}, 1);
    int32_t *ids = malloc(sizeof(int32_t) * T);
    for (int j = 0; j < T; j++) ids[j] = (int32_t)(((uint32_t)j * 2654435761u) % V);
    in.ids = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){T}, ids);
    free(ids);
    in.rows = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){T, D}, 2);
    in.scan = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){64, 16384}, 3);
    in.scores = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){256, 1024}, 4);
    in.vocab = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){1, 262144}, 5);
    return in;
}

static vf_tensor *run(vf_context *ctx, const inputs *in, int which)
{
    switch (which) {
    case 0: return vf_gather(ctx, in->table, in->ids, 0);
    case 1: return vf_scatter_add(ctx, in->table, in->ids, in->rows, 0);
    case 2: return vf_cumsum(ctx, in->scan, 1, false, false);
    case 3: return vf_top_k(ctx, in->scores, 10, NULL);
    case 4: return vf_top_k(ctx, vf_slice(ctx, in->vocab, (int64_t[]){0, 0}, (int64_t[]){1, 65536}, NULL), 50, NULL);
    default: return vf_top_k(ctx, in->vocab, 50, NULL);
    }
}

static double time_op(vf_context *ctx, const inputs *in, int which, int iters)
{
    double best = INFINITY;
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        double t0 = vb_now();
        vf_tensor *y = run(ctx, in, which);
        vf_context_sync(ctx);
        double t = vb_now() - t0;
        if (!y) {
            fprintf(stderr, "bench_indexing: %s\n", vf_error_message(ctx));
            exit(1);
        }
        if (i > 0 && t < best) best = t;
        vf_scope_end(ctx);
    }
    return best;
}

int main(int argc, char **argv)
{
    int iters = 5;
    bool quick = false;
    int rc = vb_args(argc, argv, "bench_indexing", NULL, &iters, &quick, 1);
    if (rc >= 0) return rc;
    vf_context *vk, *cpu;
    if (!vb_contexts("bench_indexing", &vk, &cpu)) return 1;
    inputs iv = make_inputs(vk), ic = make_inputs(cpu);
    vf_context_sync(vk);
    static const char *const names[6] = {"gather [32768,256] x 2048 ids", "scatter_add 2048 rows into [32768,256]",
                                         "cumsum [64,16384] along 16384", "top_k k=10 of [256,1024]",
                                         "top_k k=50 of [1,65536]", "top_k k=50 of [1,262144]"};
    printf("%-42s %12s %12s %10s\n", "op (eager, best of synced calls)", "vulkan ms", "cpu ms", "cpu/vk");
    for (int w = 0; w < 6; w++) {
        double tv = time_op(vk, &iv, w, iters), tc = time_op(cpu, &ic, w, iters);
        printf("%-42s %12.3f %12.3f %10.2f\n", names[w], tv * 1e3, tc * 1e3, tc / tv);
    }
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    return 0;
}
