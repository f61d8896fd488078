/* The CPU backend's float transcendental rows in a model-like setting:
 *   - a 256-op chain on [64,64] f32 (add, mul, tanh, exp in turn, values
 *     kept in [0.3, 3]), eager (op by op, one read at the end) and traced
 *     (vf_function: fused), µs per op, median and best of --reps chains
 *     after a warm-up; the traced plan's kernels per call;
 *   - eager tanh and exp alone on [64,64] and [2048,1024], µs per op.
 * Usage: bench_cpu_math [--reps N] (not a test: nothing asserted). The
 * last line, "summary bench_cpu_math key=value ...", is for scripts
 * (docs/BENCHMARKS.md's figures pair it with PyTorch, alternating). */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vkfuse.h"

#define CHAIN_OPS VB_CHAIN_OPS
#define MAX_REPS 400


static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and best µs per op of `ops` ops run by one call of body (or of
   its traced function), each call ending with a read. */
static bool timed(vf_context *ctx, vf_body body, int n_in, int64_t r, int64_t c, int ops, bool traced, int reps,
                  double *med, double *best, int *kernels)
{
    size_t n = (size_t)(r * c);
    float *h = malloc(n * sizeof *h), *o = malloc(n * sizeof *o);
    if (!h || !o) return free(h), free(o), false;
    int64_t shape[2] = {r, c};
    vf_scope_begin(ctx);
    vf_tensor *in[3];
    for (int k = 0; k < n_in; k++) {
        for (size_t i = 0; i < n; i++) h[i] = k == 2 ? 0.5f : (float)((i * (k + 3)) % 17) * (k ? 0.05f : 0.1f);
        in[k] = vf_tensor_from_host(ctx, VF_F32, 2, shape, h);
    }
    vf_function *fn = traced ? vf_function_create(ctx, &(vf_function_desc){.name = "cpu_math", .body = body,
                                                                            .n_inputs = n_in, .n_outputs = 1})
                             : NULL;
    static double t[MAX_REPS];
    if (reps > MAX_REPS) reps = MAX_REPS;
    vf_status s = vf_context_sync(ctx);
    for (int i = 0; i <= reps && s == VF_OK; i++) {
        vf_scope_begin(ctx);
        vf_tensor *y = NULL;
        double t0 = vb_now();
        s = fn ? vf_function_call(fn, in, &y) : body(ctx, in, &y, NULL);
        if (s == VF_OK) s = vf_tensor_read(y, o, n * sizeof *o);
        if (i) t[i - 1] = (vb_now() - t0) * 1e6 / ops;
        vf_scope_end(ctx);
    }
    if (s != VF_OK) fprintf(stderr, "bench_cpu_math: %s\n", vf_error_message(ctx)), vf_error_clear(ctx);
    vf_function_stats fs = {0};
    if (fn) vf_function_stats_get(fn, &fs);
    if (kernels) *kernels = fs.kernels;
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    free(h);
    free(o);
    if (s != VF_OK) return false;
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    *med = t[reps / 2];
    *best = t[0];
    return true;
}

static vf_status one_tanh(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_tanh(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status one_exp(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_exp(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

int main(int argc, char **argv)
{
    int reps = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_cpu_math [--reps N]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (reps < 1) reps = 1;
    vf_context *cpu = NULL;
    if (vf_context_create(&(vf_context_desc){.backend = VF_BACKEND_CPU}, &cpu) != VF_OK) {
        fprintf(stderr, "bench_cpu_math: no CPU context\n");
        return 1;
    }
    double em = 0, eb = 0, tm = 0, tb = 0, m[4] = {0}, b[4];
    int kernels = 0;
    bool ok = timed(cpu, vb_chain_tanhexp, 3, 64, 64, CHAIN_OPS, false, reps, &em, &eb, NULL) &&
              timed(cpu, vb_chain_tanhexp, 3, 64, 64, CHAIN_OPS, true, reps, &tm, &tb, &kernels);
    ok = ok && timed(cpu, one_tanh, 1, 64, 64, 1, false, reps * 20, &m[0], &b[0], NULL) &&
         timed(cpu, one_exp, 1, 64, 64, 1, false, reps * 20, &m[1], &b[1], NULL) &&
         timed(cpu, one_tanh, 1, 2048, 1024, 1, false, reps, &m[2], &b[2], NULL) &&
         timed(cpu, one_exp, 1, 2048, 1024, 1, false, reps, &m[3], &b[3], NULL);
    if (!ok) return vf_context_destroy(cpu), 1;
    printf("%d-op chain (add, mul, tanh, exp in turn) on [64,64] f32, CPU backend, µs per op (median / best of %d)\n",
           CHAIN_OPS, reps);
    printf("  eager   %8.2f  %8.2f\n  traced  %8.2f  %8.2f   (%d kernels per call)\n", em, eb, tm, tb, kernels);
    printf("eager ops alone, µs per op (median / best)\n");
    printf("  tanh [64,64]      %8.2f  %8.2f\n  exp  [64,64]      %8.2f  %8.2f\n", m[0], b[0], m[1], b[1]);
    printf("  tanh [2048,1024]  %8.1f  %8.1f\n  exp  [2048,1024]  %8.1f  %8.1f\n", m[2], b[2], m[3], b[3]);
    printf("summary bench_cpu_math chain_eager_us=%.3f chain_traced_us=%.3f chain_kernels=%d tanh64_us=%.3f "
           "exp64_us=%.3f tanh2m_us=%.1f exp2m_us=%.1f\n",
           em, tm, kernels, m[0], m[1], m[2], m[3]);
    vf_context_destroy(cpu);
    return 0;
}
