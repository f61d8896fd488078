/* Eager benchmarks: elementwise add over 16M f32, a chain of 20 such adds
 * in one scope (repeated, as a user's loop is), softmax over [2048,1024]
 * (one synced call, and a chain of 10 in one scope), log_softmax over
 * [2048,1024], softmax over [256,10] and [32,2,12,12] (microseconds per
 * call) and a 1024^3 f32 matmul, on Vulkan and on the CPU backend (OpenBLAS),
 * measured side by side in one run. Prints GB/s, GFLOP/s and the ratios.
 * Usage: bench_eager [--iters N] [--quick]   (not a test: nothing asserted) */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkfuse.h"

typedef vf_tensor *(*op_fn)(vf_context *, vf_tensor *, vf_tensor *);

static vf_tensor *op_add(vf_context *c, vf_tensor *a, vf_tensor *b) { return vf_add(c, a, b); }
static vf_tensor *op_softmax(vf_context *c, vf_tensor *a, vf_tensor *b) { (void)b; return vf_softmax(c, a, -1); }
static vf_tensor *op_log_softmax(vf_context *c, vf_tensor *a, vf_tensor *b) { (void)b; return vf_log_softmax(c, a, -1); }
static vf_tensor *op_matmul(vf_context *c, vf_tensor *a, vf_tensor *b) { return vf_matmul(c, a, b); }

/* Best seconds per call over `iters` timed calls, after one warm-up call
   (which compiles the pipeline). Each call is synced: eager latency. */
static double time_op(vf_context *ctx, op_fn fn, int rank, const int64_t *sa, const int64_t *sb, int iters)
{
    vf_scope_begin(ctx);
    vf_tensor *a = vf_random_normal(ctx, VF_F32, rank, sa, 1);
    vf_tensor *b = vf_random_normal(ctx, VF_F32, rank, sb, 2);
    vf_context_sync(ctx);
    double best = INFINITY;
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        double t0 = vb_now();
        vf_tensor *y = fn(ctx, a, b);
        vf_context_sync(ctx);
        double t = vb_now() - t0;
        if (!y) {
            fprintf(stderr, "bench: %s\n", vf_error_message(ctx));
            exit(1);
        }
        if (i > 0 && t < best) best = t;
        vf_scope_end(ctx);
    }
    vf_scope_end(ctx);
    return best;
}

/* Best seconds per chain of `len` ops y = fn(y, b) over a and b (adds, or
   softmaxes of the last result), each chain
   in a scope of its own that ends (freeing its len results) before the
   next begins: the loop a user writes. The results are all alive until the
   scope ends, so each chain needs len fresh tensors of the size of a: what
   the device memory cache (docs/RUNTIME.md, Memory) has to serve. One
   warm-up chain first; each chain synced once, at its end. *allocs
   receives the device memory blocks allocated per timed chain
   (vf_context_stats.device_allocations): 0 when the cache serves them all. */
static double time_chain(vf_context *ctx, op_fn fn, int rank, const int64_t *shape, int len, int iters, double *allocs)
{
    vf_context_stats st0 = {0}, st1 = {0};
    vf_scope_begin(ctx);
    vf_tensor *a = vf_random_normal(ctx, VF_F32, rank, shape, 1);
    vf_tensor *b = vf_random_normal(ctx, VF_F32, rank, shape, 2);
    vf_context_sync(ctx);
    double best = INFINITY;
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        double t0 = vb_now();
        vf_tensor *y = a;
        for (int k = 0; k < len && y; k++) y = fn(ctx, y, b);
        vf_context_sync(ctx);
        double t = vb_now() - t0;
        if (!y) {
            fprintf(stderr, "bench: %s\n", vf_error_message(ctx));
            exit(1);
        }
        if (i > 0 && t < best) best = t;
        vf_scope_end(ctx);
        if (i == 0) vf_context_stats_get(ctx, &st0);
    }
    vf_context_stats_get(ctx, &st1);
    *allocs = iters > 0 ? (double)(st1.device_allocations - st0.device_allocations) / iters : 0.0;
    vf_scope_end(ctx);
    return best;
}

int main(int argc, char **argv)
{
    int iters = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) iters = 2;
        else {
            printf("usage: bench_eager [--iters N] [--quick]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    vf_context *vk = NULL, *cpu = NULL;
    vf_context_desc dv = {.backend = VF_BACKEND_VULKAN}, dc = {.backend = VF_BACKEND_CPU};
    if (vf_context_create(&dv, &vk) != VF_OK || vf_context_create(&dc, &cpu) != VF_OK) {
        fprintf(stderr, "bench: %s\n", vf_last_error());
        return 1;
    }
    printf("vulkan device: %s\ncpu backend:   %s\nbest of %d calls each, synced per call\n\n", vf_device_name(vk),
           vf_device_name(cpu), iters);
    printf("%-26s %14s %14s %10s\n", "workload", "vulkan", "cpu", "vk/cpu");

    int64_t n16[1] = {16 << 20};
    double tv = time_op(vk, op_add, 1, n16, n16, iters), tc = time_op(cpu, op_add, 1, n16, n16, iters);
    double bytes = 3.0 * 4 * (double)n16[0];
    printf("%-26s %9.2f GB/s %9.2f GB/s %9.2fx\n", "add 16M f32", bytes / tv * 1e-9, bytes / tc * 1e-9, tc / tv);

    enum { CHAIN = 20 };
    double av = 0, ac = 0;
    tv = time_chain(vk, op_add, 1, n16, CHAIN, iters, &av);
    tc = time_chain(cpu, op_add, 1, n16, CHAIN, iters, &ac);
    bytes = CHAIN * 3.0 * 4 * (double)n16[0];
    printf("%-26s %9.2f GB/s %9.2f GB/s %9.2fx\n", "20 adds 16M f32 in a scope", bytes / tv * 1e-9, bytes / tc * 1e-9,
           tc / tv);
    printf("%-26s %9.1f       %9.1f\n", "  allocations per chain", av, ac);

    int64_t sm[2] = {2048, 1024};
    tv = time_op(vk, op_softmax, 2, sm, sm, iters);
    tc = time_op(cpu, op_softmax, 2, sm, sm, iters);
    bytes = 2.0 * 4 * 2048 * 1024;
    printf("%-26s %9.2f GB/s %9.2f GB/s %9.2fx\n", "softmax [2048,1024]", bytes / tv * 1e-9, bytes / tc * 1e-9, tc / tv);
    enum { SOFTMAXES = 10 };
    tv = time_chain(vk, op_softmax, 2, sm, SOFTMAXES, iters, &av);
    tc = time_chain(cpu, op_softmax, 2, sm, SOFTMAXES, iters, &ac);
    printf("%-26s %9.2f GB/s %9.2f GB/s %9.2fx\n", "10 softmaxes in a scope", SOFTMAXES * bytes / tv * 1e-9,
           SOFTMAXES * bytes / tc * 1e-9, tc / tv);
    tv = time_op(vk, op_log_softmax, 2, sm, sm, iters);
    tc = time_op(cpu, op_log_softmax, 2, sm, sm, iters);
    printf("%-26s %9.2f GB/s %9.2f GB/s %9.2fx\n", "log_softmax [2048,1024]", bytes / tv * 1e-9, bytes / tc * 1e-9,
           tc / tv);
    /* short rows, per synced call: an MLP's logits, a tiny transformer's
       attention (examples/transformer.c: batch 32, 2 heads, 12 tokens) */
    static const struct { const char *name; int rank; int64_t shape[4]; } small[] = {
        {"softmax [256,10]", 2, {256, 10}}, {"softmax [32,2,12,12]", 4, {32, 2, 12, 12}}};
    for (int k = 0; k < 2; k++) {
        tv = time_op(vk, op_softmax, small[k].rank, small[k].shape, small[k].shape, 10 * iters);
        tc = time_op(cpu, op_softmax, small[k].rank, small[k].shape, small[k].shape, 10 * iters);
        printf("%-26s %9.1f us   %9.1f us   %9.2fx\n", small[k].name, tv * 1e6, tc * 1e6, tc / tv);
    }

    int64_t mm[2] = {1024, 1024};
    tv = time_op(vk, op_matmul, 2, mm, mm, iters);
    tc = time_op(cpu, op_matmul, 2, mm, mm, iters);
    double flops = 2.0 * 1024 * 1024 * 1024;
    printf("%-26s %6.2f GFLOP/s %6.2f GFLOP/s %9.2fx\n", "matmul 1024^3 f32", flops / tv * 1e-9, flops / tc * 1e-9,
           tc / tv);

    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    return 0;
}
