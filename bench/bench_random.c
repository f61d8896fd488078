/* Generators (issue 13), on Vulkan and on the CPU backend in one run: what
 * a draw costs eagerly next to vf_random_normal (one kernel, a host seed),
 * and what dropout adds to a traced step (x * 2 with and without
 * vf_dropout of rate 0.5 on [256, 256]). Prints milliseconds per call
 * (best of the synced calls) and the traced functions' kernels and
 * dispatches per call.
 * Usage: bench_random [--iters N] [--quick]   (not a test: nothing asserted) */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkfuse.h"

enum { N = 256 };

static vf_generator *gen_of(vf_context *ctx)
{
    static vf_context *c[2];
    static vf_generator *g[2];
    for (int i = 0; i < 2; i++)
        if (c[i] == ctx) return g[i];
    int i = c[0] ? 1 : 0;
    c[i] = ctx;
    return g[i] = vf_generator_create(ctx, 1);
}

static vf_tensor *eager(vf_context *ctx, vf_tensor *x, int which)
{
    const int64_t s[2] = {N, N};
    switch (which) {
    case 0: return vf_random_normal(ctx, VF_F32, 2, s, 1);
    case 1: return vf_generator_normal(ctx, gen_of(ctx), VF_F32, 2, s);
    case 2: return vf_generator_uniform(ctx, gen_of(ctx), VF_F32, 2, s);
    default: return vf_dropout(ctx, gen_of(ctx), x, 0.5);
    }
}

static double time_eager(vf_context *ctx, vf_tensor *x, int which, int iters)
{
    double best = INFINITY;
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        double t0 = vb_now();
        vf_tensor *y = eager(ctx, x, which);
        vf_context_sync(ctx);
        double t = vb_now() - t0;
        if (!y) {
            fprintf(stderr, "bench_random: %s\n", vf_error_message(ctx));
            exit(1);
        }
        if (i > 0 && t < best) best = t;
        vf_scope_end(ctx);
    }
    return best;
}

static vf_status plain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status dropped(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_mul(ctx, vf_dropout(ctx, user, in[0], 0.5), vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

int main(int argc, char **argv)
{
    int iters = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) iters = 2;
        else {
            printf("usage: bench_random [--iters N] [--quick]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    vf_context *ctx[2] = {NULL, NULL};
    vf_context_desc dv = {.backend = VF_BACKEND_VULKAN}, dc = {.backend = VF_BACKEND_CPU};
    if (vf_context_create(&dv, &ctx[0]) != VF_OK || vf_context_create(&dc, &ctx[1]) != VF_OK) {
        fprintf(stderr, "bench_random: no context: %s\n", vf_last_error());
        return 1;
    }
    vf_tensor *x[2];
    for (int c = 0; c < 2; c++) x[c] = vf_random_normal(ctx[c], VF_F32, 2, (int64_t[]){N, N}, 3);
    static const char *const names[4] = {"random_normal [256,256] (host seed)", "generator_normal [256,256]",
                                         "generator_uniform [256,256]", "dropout [256,256] rate 0.5"};
    printf("%-40s %12s %12s\n", "eager (best of synced calls)", "vulkan ms", "cpu ms");
    for (int w = 0; w < 4; w++)
        printf("%-40s %12.3f %12.3f\n", names[w], time_eager(ctx[0], x[0], w, iters) * 1e3,
               time_eager(ctx[1], x[1], w, iters) * 1e3);
    printf("%-40s %12s %12s %18s\n", "traced step", "vulkan ms", "cpu ms", "vk kernels/disp.");
    for (int w = 0; w < 2; w++) {
        vb_figures f[2];
        for (int c = 0; c < 2; c++) {
            vf_function_desc d = {.name = w ? "dropped" : "plain", .body = w ? dropped : plain,
                                  .user = gen_of(ctx[c]), .n_inputs = 1, .n_outputs = 1};
            f[c] = vb_time_function(ctx[c], &d, &x[c], iters, "bench_random");
            if (!f[c].ok) return 1;
        }
        printf("%-40s %12.3f %12.3f %11d / %d\n", w ? "x * 2 with dropout 0.5" : "x * 2", f[0].sec * 1e3,
               f[1].sec * 1e3, f[0].fs.kernels, f[0].fs.dispatches_per_call);
    }
    for (int c = 0; c < 2; c++) {
        vf_generator_destroy(gen_of(ctx[c]));
        vf_context_destroy(ctx[c]);
    }
    return 0;
}
