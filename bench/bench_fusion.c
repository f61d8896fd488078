/* Fusion benchmark, each workload traced as a vf_function and run as a
 * fused Vulkan plan, an unfused one (vf_function_desc.unfused: one kernel
 * per op, no aliasing) and on the CPU backend, side by side in one run:
 *   - an 8-op elementwise chain (x*1.5, +0.5, relu, *0.9, sigmoid, *2, -1,
 *     abs) over 16M f32;
 *   - composed softmax exp(x - max(x)) / sum(exp(x - max(x))) over the last
 *     axis of [2048, 1024] and [4096, 1024] (one row group fused, 5 kernels
 *     unfused);
 *   - layer norm (x - mean) / sqrt(mean((x - mean)^2) + eps) * g + b over
 *     the last axis of [4096, 1024] (one row group fused, 9 kernels unfused).
 * Prints time per call, GB/s (one read of x and one write of y per call:
 * what the fused kernel must move at least), kernels, dispatches and the
 * fused/unfused and fused/CPU ratios.
 * The chain runs twice: its five scalars captured from outside (user: the
 * tensors) and made in the body by vf_fill (user NULL), which trace-time
 * constant folding turns into literals of the fused kernel.
 * Usage: bench_fusion [--iters N] [--quick]   (not a test: nothing asserted) */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkfuse.h"

/* x*1.5+0.5, relu, *0.9, sigmoid, *2, -1, abs; user: the captured scalars,
   NULL: the scalars made by vf_fill in the body */
static vf_status chain8(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    static const double kv[5] = {1.5, 0.5, 0.9, 2.0, 1.0};
    vf_tensor *kf[5], *const *k = user;
    for (int i = 0; i < 5 && !user; i++) kf[i] = vf_fill(ctx, VF_F32, 0, NULL, kv[i]);
    if (!user) k = kf;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], k[0]), k[1]);
    h = vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), k[2]));
    out[0] = vf_abs(ctx, vf_sub(ctx, vf_mul(ctx, h, k[3]), k[4]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* exp(x - max(x)) / sum(exp(x - max(x))) along the last axis */
static vf_status softmax_composed(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *e = vf_exp(ctx, vf_sub(ctx, in[0], vf_reduce_max(ctx, in[0], 1, (int[]){-1}, true)));
    out[0] = vf_div(ctx, e, vf_reduce_sum(ctx, e, 1, (int[]){-1}, true));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* the softmax op (shaders/softmax.glsl, one kernel either way): the ceiling */
static vf_status softmax_op(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_softmax(ctx, in[0], -1);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* (x - mean) / sqrt(mean((x - mean)^2) + eps) * g + b along the last axis;
   user: the captured scalar eps */
static vf_status layer_norm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    vf_tensor *d = vf_sub(ctx, in[0], vf_reduce_mean(ctx, in[0], 1, (int[]){-1}, true));
    vf_tensor *var = vf_reduce_mean(ctx, vf_mul(ctx, d, d), 1, (int[]){-1}, true);
    vf_tensor *y = vf_div(ctx, d, vf_sqrt(ctx, vf_add(ctx, var, k[5])));
    out[0] = vf_add(ctx, vf_mul(ctx, y, in[1]), in[2]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct workload {
    const char *name;
    vf_body body;
    int rank;          /* x: [n] or [rows, cols]; other inputs [cols] */
    int64_t dim[2];
    int n_inputs;
    bool fill;         /* the body makes its scalars (user NULL) */
} workload;

typedef vb_figures figures;

/* Best seconds per call (each call synced) over iters calls after one
   warm-up call that traces and builds the plan. */
static figures measure(vf_context *ctx, const workload *w, bool fuse, int iters)
{
    static const float kv[6] = {1.5f, 0.5f, 0.9f, 2.0f, 1.0f, 1e-5f};
    vf_scope_begin(ctx);
    vf_tensor *k[6];
    for (int i = 0; i < 6; i++) k[i] = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &kv[i]);
    vf_tensor *x[3] = {vf_random_normal(ctx, VF_F32, w->rank, w->dim, 1), NULL, NULL};
    for (int i = 1; i < w->n_inputs; i++) x[i] = vf_random_normal(ctx, VF_F32, 1, &w->dim[w->rank - 1], 1 + (uint64_t)i);
    figures f = vb_time_function(ctx,
                                 &(vf_function_desc){.name = w->name, .body = w->body, .user = w->fill ? NULL : k,
                                                     .n_inputs = w->n_inputs, .n_outputs = 1, .unfused = !fuse},
                                 x, iters, "bench_fusion");
    vf_scope_end(ctx);
    return f;
}

static void row(const char *name, const figures *f, int64_t n)
{
    if (!f->ok) {
        printf("%-16s failed\n", name);
        return;
    }
    double gbs = 2.0 * (double)n * 4.0 / f->sec / 1e9;
    printf("%-16s %10.3f ms %9.2f GB/s %8d %11d %8s\n", name, f->sec * 1e3, gbs, f->fs.kernels,
           f->fs.dispatches_per_call, f->fs.planned ? "yes" : "no");
}

static void bench(vf_context *vk, vf_context *cpu, const workload *w, int iters)
{
    int64_t n = w->rank == 1 ? w->dim[0] : w->dim[0] * w->dim[1];
    if (w->rank == 1) printf("\n%s, %lld f32, best of %d calls (each synced)\n", w->name, (long long)n, iters);
    else printf("\n%s, [%lld, %lld] f32, best of %d calls (each synced)\n", w->name, (long long)w->dim[0],
                (long long)w->dim[1], iters);
    printf("%-16s %13s %14s %8s %11s %8s\n", "run", "time/call", "GB/s (x+y)", "kernels", "dispatches", "planned");
    figures fu = measure(vk, w, true, iters), un = measure(vk, w, false, iters), c = measure(cpu, w, true, iters);
    row("vulkan fused", &fu, n);
    row("vulkan unfused", &un, n);
    row("cpu", &c, n);
    if (fu.ok && un.ok) printf("fused/unfused time ratio: %.3f (speedup %.2fx)\n", fu.sec / un.sec, un.sec / fu.sec);
    if (fu.ok && c.ok) printf("fused vulkan vs cpu: speedup %.2fx\n", c.sec / fu.sec);
}

int main(int argc, char **argv)
{
    int iters = 10;
    bool quick = false;
    int rc = vb_args(argc, argv, "bench_fusion", NULL, &iters, &quick, 3);
    if (rc >= 0) return rc;
    vf_context *vk, *cpu;
    if (!vb_contexts("bench_fusion", &vk, &cpu)) return 1;
    int64_t r = quick ? 256 : 2048;
    const workload w[] = {
        {"8-op elementwise chain", chain8, 1, {quick ? 1 << 20 : 16 << 20, 0}, 1, false},
        {"8-op elementwise chain, scalars made by vf_fill in the body", chain8, 1, {quick ? 1 << 20 : 16 << 20, 0}, 1,
         true},
        {"composed softmax (last axis)", softmax_composed, 2, {r, 1024}, 1},
        {"composed softmax (last axis)", softmax_composed, 2, {2 * r, 1024}, 1},
        {"softmax op (hand-written kernel, for reference)", softmax_op, 2, {2 * r, 1024}, 1},
        {"layer norm (last axis)", layer_norm, 2, {2 * r, 1024}, 3},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) bench(vk, cpu, &w[i], iters);
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    return 0;
}
