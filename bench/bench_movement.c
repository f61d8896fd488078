/* Movement benchmark: slices, pads and concats traced as a vf_function and
 * run as a fused Vulkan plan (the window op read by its elementwise
 * consumer inside one kernel), an unfused one (one kernel per op) and on
 * the CPU backend, side by side in one run; then the eager window kernel
 * alone against an eager elementwise copy of the same size.
 *   - row differences x[1:] - x[:-1] of [R, 1024] (3 kernels unfused);
 *   - relu(pad(x, 1 on every side)) * 2 of [R, 1024];
 *   - concat(a, b, axis 1) * 2 of two [R, 512];
 * Prints time per call, GB/s (x read once, y written once), kernels and
 * the fused/unfused and fused/CPU ratios.
 * Usage: bench_movement [--iters N] [--quick]   (not a test: nothing asserted) */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkfuse.h"

#define BIG INT64_MAX

static vf_status row_diff(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_sub(ctx, vf_slice(ctx, in[0], (int64_t[]){1, 0}, NULL, NULL),
                    vf_slice(ctx, in[0], NULL, (int64_t[]){-1, BIG}, NULL));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status pad_relu(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    out[0] = vf_mul(ctx, vf_relu(ctx, vf_pad(ctx, in[0], (int64_t[]){1, 1}, (int64_t[]){1, 1}, 0.0)), k[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status concat_mul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    out[0] = vf_mul(ctx, vf_concat(ctx, 2, in, 1), k[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct workload {
    const char *name;
    vf_body body;
    int n_inputs;
    int64_t rows, cols;   /* of each input */
} workload;

static vb_figures measure(vf_context *ctx, const workload *w, bool fuse, int iters)
{
    vf_scope_begin(ctx);
    float two = 2.0f;
    vf_tensor *k[1] = {vf_tensor_from_host(ctx, VF_F32, 0, NULL, &two)};
    vf_tensor *x[2];
    for (int i = 0; i < w->n_inputs; i++)
        x[i] = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){w->rows, w->cols}, 1 + (uint64_t)i);
    vb_figures f = vb_time_function(ctx,
                                    &(vf_function_desc){.name = w->name, .body = w->body, .user = k,
                                                        .n_inputs = w->n_inputs, .n_outputs = 1, .unfused = !fuse},
                                    x, iters, "bench_movement");
    vf_scope_end(ctx);
    return f;
}

static void row(const char *name, const vb_figures *f, double bytes)
{
    if (!f->ok) {
        printf("%-16s failed\n", name);
        return;
    }
    printf("%-16s %10.3f ms %9.2f GB/s %8d\n", name, f->sec * 1e3, bytes / f->sec / 1e9, f->fs.kernels);
}

static void bench(vf_context *vk, vf_context *cpu, const workload *w, int iters)
{
    double bytes = 2.0 * (double)w->n_inputs * (double)(w->rows * w->cols) * 4.0;
    printf("\n%s, %d x [%lld, %lld] f32, best of %d calls (each synced)\n", w->name, w->n_inputs,
           (long long)w->rows, (long long)w->cols, iters);
    printf("%-16s %13s %14s %8s\n", "run", "time/call", "GB/s (x+y)", "kernels");
    vb_figures fu = measure(vk, w, true, iters), un = measure(vk, w, false, iters), c = measure(cpu, w, true, iters);
    row("vulkan fused", &fu, bytes);
    row("vulkan unfused", &un, bytes);
    row("cpu", &c, bytes);
    if (fu.ok && un.ok) printf("fused/unfused: speedup %.2fx\n", un.sec / fu.sec);
    if (fu.ok && c.ok) printf("fused vulkan vs cpu: speedup %.2fx\n", c.sec / fu.sec);
}

/* The eager window kernel (a strided slice copy, x[:, 1:]) against an
   eager copy kernel of the same elements (vf_neg), best of iters. */
static void eager_copy(vf_context *vk, int64_t rows, int iters)
{
    vf_scope_begin(vk);
    vf_tensor *x = vf_random_normal(vk, VF_F32, 2, (int64_t[]){rows, 1025}, 3);
    vf_tensor *y = vf_random_normal(vk, VF_F32, 2, (int64_t[]){rows, 1024}, 4);
    double best[2] = {INFINITY, INFINITY};
    for (int i = 0; i <= iters; i++)
        for (int k = 0; k < 2; k++) {
            vf_scope_begin(vk);
            vf_context_sync(vk);
            double t0 = vb_now();
            vf_tensor *r = k ? vf_neg(vk, y) : vf_slice(vk, x, (int64_t[]){0, 1}, NULL, NULL);
            vf_context_sync(vk);
            double t = vb_now() - t0;
            if (!r) fprintf(stderr, "bench_movement: %s\n", vf_error_message(vk));
            if (i && t < best[k]) best[k] = t;
            vf_scope_end(vk);
        }
    double bytes = 2.0 * (double)(rows * 1024) * 4.0;
    printf("\neager, [%lld, 1024] f32 out, best of %d (each synced)\n", (long long)rows, iters);
    printf("%-30s %10.3f ms %9.2f GB/s\n", "slice x[:, 1:] of [R, 1025]", best[0] * 1e3, bytes / best[0] / 1e9);
    printf("%-30s %10.3f ms %9.2f GB/s\n", "neg (elementwise, vec4)", best[1] * 1e3, bytes / best[1] / 1e9);
    vf_scope_end(vk);
}

int main(int argc, char **argv)
{
    int iters = 10;
    bool quick = false;
    int rc = vb_args(argc, argv, "bench_movement", NULL, &iters, &quick, 3);
    if (rc >= 0) return rc;
    vf_context *vk, *cpu;
    if (!vb_contexts("bench_movement", &vk, &cpu)) return 1;
    int64_t r = quick ? 256 : 4096;
    const workload w[] = {
        {"row differences x[1:] - x[:-1]", row_diff, 1, r, 1024},
        {"relu(pad(x, 1 each side)) * 2", pad_relu, 1, r, 1024},
        {"concat(a, b, axis 1) * 2", concat_mul, 2, r, 512},
    };
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) bench(vk, cpu, &w[i], iters);
    eager_copy(vk, r, iters);
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    return 0;
}
