/* Matmul epilogue benchmark: y = relu(a @ w + bias) traced as a
 * vf_function, run as a fused Vulkan plan (one kernel: matmul tile kernel
 * with the epilogue), an unfused plan (vf_function_desc.unfused, as
 * VKFUSE_FUSION=0: matmul, add, relu as three kernels) and on the CPU backend
 * (OpenBLAS sgemm + two elementwise ops), side by side in one run, at
 * 1024^3, at an MLP layer size (256x784 @ 784x512) and at a small batch of
 * that layer (16x784 @ 784x512). Also a plain
 * matmul (traced, one kernel) at each size: the kernel's GFLOP/s.
 * GFLOP/s counts 2*m*k*n per call.
 * Usage: bench_matmul [--iters N] [--quick] [--matmul-only]
 * (not a test: nothing asserted; --matmul-only: the plain matmul rows, on
 * Vulkan and on the CPU backend). The last line, "summary bench_matmul
 * key=value ...", is for scripts (bench/peer/vs_torch.py). */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkfuse.h"

static vf_status mlp(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[2]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status plain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_matmul(ctx, in[0], in[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef vb_figures figures;

/* Best seconds per call (each synced) over iters calls after one warm-up
   call that traces, builds the plan and compiles. */
static figures measure(vf_context *ctx, vf_body body, int64_t m, int64_t k, int64_t n, bool fuse, int iters)
{
    vf_scope_begin(ctx);
    vf_tensor *in[3] = {vf_random_normal(ctx, VF_F32, 2, (int64_t[]){m, k}, 1),
                        vf_random_normal(ctx, VF_F32, 2, (int64_t[]){k, n}, 2),
                        vf_random_normal(ctx, VF_F32, 1, (int64_t[]){n}, 3)};
    figures f = vb_time_function(ctx,
                                 &(vf_function_desc){.name = "mlp", .body = body, .n_inputs = 3, .n_outputs = 1,
                                                     .unfused = !fuse},
                                 in, iters, "bench_matmul");
    vf_scope_end(ctx);
    return f;
}

static void row(const char *name, const figures *f, double flops)
{
    if (!f->ok) {
        printf("  %-22s failed\n", name);
        return;
    }
    printf("  %-22s %10.3f ms %9.2f GFLOP/s %8d %11d\n", name, f->sec * 1e3, flops / f->sec * 1e-9, f->fs.kernels,
           f->fs.dispatches_per_call);
}

static bool matmul_only;

static void size(vf_context *vk, vf_context *cpu, int64_t m, int64_t k, int64_t n, int iters)
{
    double flops = 2.0 * (double)m * (double)k * (double)n;
    printf("\n%lld x %lld @ %lld x %lld, best of %d calls (each synced)\n", (long long)m, (long long)k, (long long)k,
           (long long)n, iters);
    printf("  %-22s %13s %17s %8s %11s\n", "run", "time/call", "GFLOP/s", "kernels", "dispatches");
    figures pv = measure(vk, plain, m, k, n, true, iters);
    char key[64];
    snprintf(key, sizeof key, "mm%lldx%lldx%lld_vk_gflops", (long long)m, (long long)k, (long long)n);
    vb_summary(key, pv.ok ? flops / pv.sec * 1e-9 : NAN);
    if (matmul_only) {
        figures pc = measure(cpu, plain, m, k, n, true, iters);
        row("vulkan matmul alone", &pv, flops);
        row("cpu matmul alone", &pc, flops);
        snprintf(key, sizeof key, "mm%lldx%lldx%lld_cpu_gflops", (long long)m, (long long)k, (long long)n);
        vb_summary(key, pc.ok ? flops / pc.sec * 1e-9 : NAN);
        return;
    }
    figures fu = measure(vk, mlp, m, k, n, true, iters), un = measure(vk, mlp, m, k, n, false, iters);
    figures c = measure(cpu, mlp, m, k, n, true, iters);
    row("vulkan fused", &fu, flops);
    row("vulkan unfused", &un, flops);
    row("cpu (OpenBLAS)", &c, flops);
    row("vulkan matmul alone", &pv, flops);
    if (fu.ok && un.ok) printf("  fused/unfused time ratio %.3f (speedup %.2fx)\n", fu.sec / un.sec, un.sec / fu.sec);
    if (fu.ok && c.ok) printf("  fused vulkan / cpu time ratio %.2f\n", fu.sec / c.sec);
    if (fu.ok && pv.ok) printf("  epilogue cost: fused / matmul alone %.3f\n", fu.sec / pv.sec);
}

int main(int argc, char **argv)
{
    int iters = 5;
    bool quick = false;
    int rc = vb_args(argc, argv, "bench_matmul", (vb_flag[]){{"--matmul-only", &matmul_only}, {0}}, &iters, &quick, 2);
    if (rc >= 0) return rc;
    vf_context *vk, *cpu;
    if (!vb_contexts("bench_matmul", &vk, &cpu)) return 1;
    printf("matmul + bias + relu, f32; vulkan device: %s\n", vf_device_name(vk));
    size(vk, cpu, 256, 784, 512, iters);
    size(vk, cpu, 16, 784, 512, iters);   /* a small batch: dispatch costs show */
    if (!quick) size(vk, cpu, 1024, 1024, 1024, iters);
    vb_summary_print("bench_matmul");
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    return 0;
}
