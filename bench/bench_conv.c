/* Convolution benchmark: y = relu(conv2d(x, w) + b) (3x3, SAME, NHWC /
 * HWIO, f32) traced as a vf_function, run on Vulkan fused (one kernel: the
 * direct conv kernel with its epilogue), unfused (vf_function_desc.unfused:
 * conv2d, add, relu as three kernels) and on the CPU backend (oneDNN, or
 * im2col + OpenBLAS sgemm with VKFUSE_CPU_DNNL=0; then the epilogue), side
 * by side in one run; then
 * the same layer's training kernels (the input and filter gradients of
 * sum(y * g)) on both backends, and a plain matmul with the conv's FLOPs
 * (M = N*OH*OW, K = 9*C, N = O: the im2col GEMM) on both backends, so the
 * direct kernel's GFLOP/s compare with the matmul kernels'; last, on the
 * CPU backend, max and avg 2x2 pools of a tensor of y's shape with their
 * input gradient (traced, one call). Timing is
 * vb_time_function (common.c). GFLOP/s counts 2*N*OH*OW*O*9*C per
 * conv (and per gradient op: each has the forward's FLOPs).
 * Usage: bench_conv [--iters N] [--quick] [--core]
 * (not a test: nothing asserted; --core: only the fused conv, the CPU's and
 * the gradients; the last line, "summary bench_conv key=value ...", with
 * l<i>_ for layer i, is for scripts: bench/peer/vs_torch.py) */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkfuse.h"

static const vf_conv2d_desc same = {.padding = VF_PADDING_SAME};

static vf_status conv_layer(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, in[0], in[1], &same), in[2]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* the backward pass of conv2d: dx and dw of sum(conv2d(x, w) * g) */
static vf_status conv_grads(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_conv2d(ctx, in[0], in[1], &same);
    vf_status s = vf_tape_gradient(tp, vf_mul(ctx, y, in[2]), 2, in, out);
    vf_tape_end(tp);
    return y ? s : vf_status_get(ctx);
}

/* 2x2 pools of the layer's output and their gradients (the CPU rows) */
static const vf_pool2d_desc pool2 = {.window = {2, 2}};

static vf_status pools(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *m = vf_max_pool2d(ctx, in[0], &pool2), *a = vf_avg_pool2d(ctx, in[0], &pool2);
    vf_status s = m && a ? vf_tape_gradient(tp, vf_add(ctx, vf_mul(ctx, m, in[1]), vf_mul(ctx, a, in[1])), 1, in,
                                            out)
                         : vf_status_get(ctx);
    vf_tape_end(tp);
    return s;
}

static vf_status plain_matmul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_matmul(ctx, in[0], in[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    int64_t n, hw, c, o;
} layer;

static vb_figures measure(vf_context *ctx, vf_body body, int n_in, int n_out, const int64_t (*shape)[4],
                          const int *rank, bool fuse, int iters)
{
    vf_scope_begin(ctx);
    vf_tensor *in[3] = {0};
    for (int i = 0; i < n_in; i++) in[i] = vf_random_normal(ctx, VF_F32, rank[i], shape[i], (uint64_t)i + 1);
    vb_figures f = vb_time_function(ctx,
                                    &(vf_function_desc){.name = "conv", .body = body, .n_inputs = n_in,
                                                        .n_outputs = n_out, .unfused = !fuse},
                                    in, iters, "bench_conv");
    vf_scope_end(ctx);
    return f;
}

static void row(const char *name, const vb_figures *f, double flops)
{
    if (!f->ok) {
        printf("  %-28s failed\n", name);
        return;
    }
    printf("  %-28s %10.3f ms %9.2f GFLOP/s %8d %11d\n", name, f->sec * 1e3, flops / f->sec * 1e-9, f->fs.kernels,
           f->fs.dispatches_per_call);
}

static bool core_only; /* --core: no unfused plan, no matmul rows (what bench/peer/vs_torch.py compares) */

static void size(vf_context *vk, vf_context *cpu, const layer *l, int li, int iters)
{
    double flops = 2.0 * (double)(l->n * l->hw * l->hw) * (double)l->o * 9.0 * (double)l->c;
    int64_t shp[3][4] = {{l->n, l->hw, l->hw, l->c}, {3, 3, l->c, l->o}, {l->o}};
    int64_t gshp[3][4] = {{l->n, l->hw, l->hw, l->c}, {3, 3, l->c, l->o}, {l->n, l->hw, l->hw, l->o}};
    int64_t mshp[2][4] = {{l->n * l->hw * l->hw, 9 * l->c}, {9 * l->c, l->o}};
    int r3[3] = {4, 4, 1}, g3[3] = {4, 4, 4}, m2[2] = {2, 2};
    printf("\nx [%lld, %lld, %lld, %lld], w [3, 3, %lld, %lld], SAME: %.1f MFLOP per conv; best of %d calls (each "
           "synced)\n",
           (long long)l->n, (long long)l->hw, (long long)l->hw, (long long)l->c, (long long)l->c, (long long)l->o,
           flops * 1e-6, iters);
    printf("  %-28s %13s %17s %8s %11s\n", "run", "time/call", "GFLOP/s", "kernels", "dispatches");
    vb_figures fu = measure(vk, conv_layer, 3, 1, shp, r3, true, iters);
    vb_figures none = {.sec = INFINITY};
    vb_figures un = core_only ? none : measure(vk, conv_layer, 3, 1, shp, r3, false, iters);
    vb_figures c = measure(cpu, conv_layer, 3, 1, shp, r3, true, iters);
    vb_figures gv = measure(vk, conv_grads, 3, 2, gshp, g3, true, iters);
    vb_figures gc = measure(cpu, conv_grads, 3, 2, gshp, g3, true, iters);
    vb_figures mv = core_only ? none : measure(vk, plain_matmul, 2, 1, mshp, m2, true, iters);
    vb_figures mc = core_only ? none : measure(cpu, plain_matmul, 2, 1, mshp, m2, true, iters);
    int64_t pshp[2][4] = {{l->n, l->hw, l->hw, l->o}, {l->n, l->hw / 2, l->hw / 2, l->o}};
    int p2[2] = {4, 4};
    vb_figures pc = core_only ? none : measure(cpu, pools, 2, 1, pshp, p2, true, iters);
    row("vulkan conv+bias+relu fused", &fu, flops);
    if (!core_only) row("vulkan unfused", &un, flops);
    row("cpu conv+bias+relu", &c, flops);
    row("vulkan dx + dw", &gv, 2 * flops);
    row("cpu dx + dw", &gc, 2 * flops);
    const vb_figures *keyed[4] = {&fu, &c, &gv, &gc};
    static const char *const what[4] = {"vk_fwd_ms", "cpu_fwd_ms", "vk_grad_ms", "cpu_grad_ms"};
    for (int i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof key, "l%d_%s", li, what[i]);
        vb_summary(key, keyed[i]->ok ? keyed[i]->sec * 1e3 : NAN);
    }
    if (core_only) return;
    char mm[64];
    snprintf(mm, sizeof mm, "vulkan matmul %lldx%lldx%lld", (long long)mshp[0][0], (long long)mshp[0][1],
             (long long)l->o);
    row(mm, &mv, flops);
    row("cpu matmul, same size", &mc, flops);
    if (pc.ok) printf("  cpu max + avg pool 2x2 of y, forward and dx: %.3f ms\n", pc.sec * 1e3);
    else printf("  cpu pools failed\n");
    if (fu.ok && un.ok) printf("  fused/unfused time ratio %.3f\n", fu.sec / un.sec);
    if (fu.ok && c.ok) printf("  conv: vulkan fused / cpu time ratio %.2f\n", fu.sec / c.sec);
    if (fu.ok && mv.ok) printf("  vulkan: conv fused / matmul of the same FLOPs time ratio %.2f\n", fu.sec / mv.sec);
    if (gv.ok && gc.ok) printf("  gradients: vulkan / cpu time ratio %.2f\n", gv.sec / gc.sec);
}

int main(int argc, char **argv)
{
    int iters = 5;
    bool quick = false;
    int rc = vb_args(argc, argv, "bench_conv", (vb_flag[]){{"--core", &core_only}, {0}}, &iters, &quick, 2);
    if (rc >= 0) return rc;
    vf_context *vk, *cpu;
    if (!vb_contexts("bench_conv", &vk, &cpu)) return 1;
    printf("conv2d 3x3 + bias + relu, f32; vulkan device: %s\n", vf_device_name(vk));
    static const layer layers[] = {
        {32, 12, 8, 8},    /* the second layer of examples/cnn.c, batch 32 */
        {32, 28, 16, 32},  /* a MNIST-sized layer */
        {8, 14, 64, 64},   /* a deeper stage: more channels, smaller images */
    };
    int n = quick ? 2 : 3;
    for (int i = 0; i < n; i++) size(vk, cpu, &layers[i], i, iters);
    vb_summary_print("bench_conv");
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    return 0;
}
