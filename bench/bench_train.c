/* Training benchmark: the train step of examples/mlp.c (784-512-512-10,
 * ReLU, mean sparse softmax cross-entropy, vf_tape gradients of the six
 * variables, SGD with vf_assign_sub) at one batch size, in steps per
 * second, side by side in one run:
 *   - eager on Vulkan (the body called directly, op by op);
 *   - traced on Vulkan, unfused (vf_function_desc.unfused: one kernel per op);
 *   - traced on Vulkan, fused (the default);
 *   - eager on the CPU backend;
 *   - traced on the CPU backend.
 * Each run makes its own model (same seed), warms up (the first traced call
 * traces and records the plan), then times single steps, each synced; it
 * reports the median and the best. Every Vulkan run comes before the CPU
 * runs: OpenBLAS's worker threads keep spinning for a while after a CPU
 * matmul and would slow lavapipe down on a small machine.
 * Then (unless --no-profile) the fused and the unfused plan profiled over a
 * few calls in a profiling context: their kernels, bytes and GPU times.
 * Usage: bench_train [--batch N] [--iters N] [--warmup N] [--quick] [--no-profile] [--no-signature]
 *        [--kernels]   (also list the unfused plan's kernels)
 * (not a test: nothing asserted) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkfuse.h"

#define FEAT 784
#define HIDDEN 512
#define CLASSES 10

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    vf_tensor *w[3], *b[3];
    vf_tensor *lr;
} model;

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], m->w[0]), m->b[0]));
    h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, m->w[1]), m->b[1]));
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, h, m->w[2]), m->b[2]);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    vf_tensor *vars[6] = {m->w[0], m->b[0], m->w[1], m->b[1], m->w[2], m->b[2]}, *g[6] = {0};
    vf_status s = vf_tape_gradient(tape, loss, 6, vars, g);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    for (int i = 0; i < 6; i++)
        if ((s = vf_assign_sub(vars[i], vf_mul(ctx, m->lr, g[i]))) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

/* He-initialised model owned by the current scope */
static model make_model(vf_context *ctx)
{
    static const int64_t dims[4] = {FEAT, HIDDEN, HIDDEN, CLASSES};
    model m = {.lr = vf_fill(ctx, VF_F32, 0, NULL, 0.05)};
    for (int i = 0; i < 3; i++) {
        vf_tensor *w = vf_mul(ctx, vf_random_normal(ctx, VF_F32, 2, &dims[i], 42 + (uint64_t)i),
                              vf_fill(ctx, VF_F32, 0, NULL, sqrt(2.0 / (double)dims[i])));
        m.w[i] = vf_variable(ctx, w);
        m.b[i] = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, &dims[i + 1], 0.0));
    }
    return m;
}

typedef enum { EAGER, TRACED_UNFUSED, TRACED_FUSED } mode;

typedef struct {
    bool ok;
    double median, best;        /* seconds per step */
    float first_loss, last_loss;
    vf_function_stats fs;       /* traced runs */
    double dispatches, submits; /* per step, from the context's counters */
} figures;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* x [batch, 784] and labels [batch] on the host: class centres plus noise */
static float *host_x;
static int32_t *host_y;
/* the traced runs' input signature [-1,784], [-1] (NULL with --no-signature:
   traced at the concrete batch size) */
static const vf_tensor_spec signature[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}},
                                            {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
static const vf_tensor_spec *sig = signature;

static figures measure(vf_context *ctx, mode md, int64_t batch, int warmup, int iters)
{
    figures f = {.first_loss = NAN, .last_loss = NAN};
    double *t = malloc(sizeof(double) * (size_t)iters);
    if (!t) return f;
    vf_scope_begin(ctx);
    model m = make_model(ctx);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){batch, FEAT}, host_x),
                        vf_tensor_from_host(ctx, VF_I32, 1, &batch, host_y)};
    vf_function *fn = NULL;
    if (md != EAGER)
        fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp_train_step", .body = train_step, .user = &m,
                                                         .n_inputs = 2, .n_outputs = 1, .input_signature = sig,
                                                         .unfused = md == TRACED_UNFUSED});
    vf_context_stats c0 = {0}, c1 = {0};
    vf_status s = vf_status_get(ctx);
    for (int i = 0; i < warmup + iters && s == VF_OK; i++) {
        vf_scope_begin(ctx);
        vf_tensor *loss = NULL;
        s = vf_context_sync(ctx);
        if (i == warmup) vf_context_stats_get(ctx, &c0);
        double t0 = now();
        if (s == VF_OK) s = fn ? vf_function_call(fn, in, &loss) : train_step(ctx, in, &loss, &m);
        if (s == VF_OK) s = vf_context_sync(ctx);
        double dt = now() - t0;
        if (i >= warmup) t[i - warmup] = dt;
        if (s == VF_OK && (i == 0 || i == warmup + iters - 1)) {
            float v = NAN;
            s = vf_tensor_read(loss, &v, sizeof v);
            if (i == 0) f.first_loss = v;
            else f.last_loss = v;
        }
        vf_scope_end(ctx);
    }
    vf_context_stats_get(ctx, &c1);
    if (s != VF_OK) {
        fprintf(stderr, "bench_train: %s\n", vf_error_message(ctx));
        vf_error_clear(ctx);
    } else {
        qsort(t, (size_t)iters, sizeof *t, cmp_double);
        f.best = t[0];
        f.median = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
        f.dispatches = (double)(c1.dispatches - c0.dispatches) / iters;
        f.submits = (double)(c1.submits - c0.submits) / iters;
        f.ok = !fn || vf_function_stats_get(fn, &f.fs) == VF_OK;
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    free(t);
    return f;
}

static void row(const char *name, const figures *f, bool traced)
{
    if (!f->ok) {
        printf("%-22s failed\n", name);
        return;
    }
    printf("%-22s %9.2f %9.2f %10.2f ms %9.1f %9.1f", name, 1.0 / f->median, 1.0 / f->best, f->median * 1e3,
           f->dispatches, f->submits);
    if (traced) printf(" %8d %11d %6s", f->fs.kernels, f->fs.dispatches_per_call, f->fs.planned ? "yes" : "no");
    else printf(" %8s %11s %6s", "-", "-", "-");
    printf("   %.4f -> %.4f\n", f->first_loss, f->last_loss);
}

static void ratio(const char *what, const figures *a, const figures *b)
{
    if (a->ok && b->ok) printf("  %-40s %6.2fx\n", what, a->median / b->median);
}

/* calls profiled calls of the traced step (after a warm-up call) in a
   profiling context: each kernel's least GPU time over the calls, so that
   the other processes on a shared machine disturb the figures less */
static void profile(vf_context *ctx, bool unfused, int64_t batch, int calls, bool list)
{
    vf_scope_begin(ctx);
    model m = make_model(ctx);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){batch, FEAT}, host_x),
                        vf_tensor_from_host(ctx, VF_I32, 1, &batch, host_y)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp_train_step", .body = train_step,
                                                                  .user = &m, .n_inputs = 2, .n_outputs = 1,
                                                                  .input_signature = sig, .unfused = unfused});
    vf_function_profile p = {0};
    uint64_t *least = NULL, wall = UINT64_MAX;
    int n = -1;
    bool ok = fn != NULL;
    for (int i = 0; i <= calls && ok; i++) {
        vf_scope_begin(ctx);
        vf_tensor *loss = NULL;
        ok = vf_function_call(fn, in, &loss) == VF_OK && vf_function_profile_get(fn, &p) == VF_OK && p.planned;
        vf_scope_end(ctx);
        if (!ok || i == 0) continue;
        if (!least) {
            n = p.n_kernels;
            least = malloc(sizeof *least * (size_t)(n > 0 ? n : 1));
            if (!least) break;
            for (int k = 0; k < n; k++) least[k] = UINT64_MAX;
        }
        ok = p.n_kernels == n;
        for (int k = 0; ok && k < n; k++)
            if (p.kernels[k].gpu_ns < least[k]) least[k] = p.kernels[k].gpu_ns;
        if (p.wall_ns < wall) wall = p.wall_ns;
    }
    if (!ok || !least || vf_status_get(ctx) != VF_OK) {
        fprintf(stderr, "bench_train: profile failed: %s\n", vf_error_message(ctx));
        vf_error_clear(ctx);
    } else {
        double gpu = 0.0, mm = 0.0;
        for (int k = 0; k < n; k++) {
            gpu += (double)least[k];
            for (int j = 0; j < p.kernels[k].n_nodes; j++)
                if (!strcmp(p.kernels[k].node_ops[j], "matmul")) {
                    mm += (double)least[k];
                    break;
                }
        }
        printf("\n%s plan, %d profiled calls: %d kernels, %d dispatches, %d barriers, %.2f MB read, "
               "%.2f MB written;\n  sum of each kernel's least GPU time %.2f ms (kernels with a matmul: %.2f ms, "
               "%.0f%%), least wall time %.2f ms\n", unfused ? "unfused" : "fused", calls, n, p.dispatches,
               p.barriers, (double)p.bytes_read * 1e-6, (double)p.bytes_written * 1e-6, gpu * 1e-6, mm * 1e-6,
               100.0 * mm / gpu, (double)wall * 1e-6);
        for (int k = 0; list && k < n; k++) {
            const vf_kernel_profile *kp = &p.kernels[k];
            printf("  %-34.34s %8.3f ms %7.3f MB r %7.3f MB w  ", kp->name, (double)least[k] * 1e-6,
                   (double)kp->bytes_read * 1e-6, (double)kp->bytes_written * 1e-6);
            for (int j = 0; j < kp->n_nodes; j++) printf("%s%s", j ? "+" : "", kp->node_ops[j]);
            printf("\n");
        }
    }
    free(least);
    vf_function_destroy(fn);
    vf_scope_end(ctx);
}

int main(int argc, char **argv)
{
    int iters = 20, warmup = 3;
    int64_t batch = 256;
    bool prof = true, list_unfused = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) iters = 3, warmup = 1;
        else if (!strcmp(argv[i], "--no-profile")) prof = false;
        else if (!strcmp(argv[i], "--no-signature")) sig = NULL;
        else if (!strcmp(argv[i], "--kernels")) list_unfused = true;
        else return fprintf(stderr, "usage: bench_train [--batch N] [--iters N] [--warmup N] [--quick] "
                                    "[--no-profile] [--no-signature] [--kernels]\n"), 2;
    }
    if (iters < 1) iters = 1;
    if (warmup < 1) warmup = 1;
    if (batch < 1) batch = 1;
    host_x = malloc(sizeof(float) * (size_t)batch * FEAT);
    host_y = malloc(sizeof(int32_t) * (size_t)batch);
    float *centre = malloc(sizeof(float) * CLASSES * FEAT);
    if (!host_x || !host_y || !centre) return fprintf(stderr, "bench_train: out of memory\n"), 1;
    uint64_t r = 88172645463325252ull;
#define UNIFORM() (r ^= r << 13, r ^= r >> 7, r ^= r << 17, (double)(r >> 11) / 9007199254740992.0)
    for (int i = 0; i < CLASSES * FEAT; i++) centre[i] = (float)(UNIFORM() * 2.0 - 1.0) * 0.2f;
    for (int64_t i = 0; i < batch; i++) {
        host_y[i] = (int32_t)(UNIFORM() * CLASSES) % CLASSES;
        for (int j = 0; j < FEAT; j++)
            host_x[i * FEAT + j] = centre[host_y[i] * FEAT + j] + (float)(UNIFORM() - 0.5) * 0.4f;
    }
    free(centre);
    vf_context *vk = NULL, *cpu = NULL, *pk = NULL;
    vf_context_desc dv = {.backend = VF_BACKEND_VULKAN}, dc = {.backend = VF_BACKEND_CPU};
    vf_context_desc dp = {.backend = VF_BACKEND_VULKAN, .profile = true};
    if (vf_context_create(&dv, &vk) != VF_OK || vf_context_create(&dc, &cpu) != VF_OK ||
        (prof && vf_context_create(&dp, &pk) != VF_OK)) {
        fprintf(stderr, "bench_train: could not create the contexts\n");
        vf_context_destroy(vk), vf_context_destroy(cpu), vf_context_destroy(pk);
        return 1;
    }
    printf("MLP 784-512-512-10 train step (forward, tape backward, 6 SGD updates), batch %lld, f32\n"
           "median and best of %d steps after %d warm-up steps, each step synced; traced with %s\n\n",
           (long long)batch, iters, warmup, sig ? "the input signature [-1,784], [-1]" : "concrete shapes");
    printf("%-22s %9s %9s %13s %9s %9s %8s %11s %6s   %s\n", "run", "steps/s", "best", "median/step",
           "disp/step", "subm/step", "kernels", "dispatches", "plan", "loss first -> last");
    figures ve = measure(vk, EAGER, batch, warmup, iters);
    figures vu = measure(vk, TRACED_UNFUSED, batch, warmup, iters);
    figures vfu = measure(vk, TRACED_FUSED, batch, warmup, iters);
    if (prof) { /* before the CPU runs (OpenBLAS threads) */
        profile(pk, false, batch, iters < 5 ? iters : 5, true);
        profile(pk, true, batch, iters < 5 ? iters : 5, list_unfused);
        printf("\n");
    }
    figures ce = measure(cpu, EAGER, batch, warmup, iters);
    figures ct = measure(cpu, TRACED_FUSED, batch, warmup, iters);
    row("vulkan eager", &ve, false);
    row("vulkan traced unfused", &vu, true);
    row("vulkan traced fused", &vfu, true);
    row("cpu eager", &ce, false);
    row("cpu traced", &ct, true);
    printf("\nsteps/s ratios (medians):\n");
    ratio("vulkan traced+fused vs vulkan eager", &ve, &vfu);
    ratio("vulkan traced+fused vs vulkan traced unfused", &vu, &vfu);
    ratio("vulkan traced unfused vs vulkan eager", &ve, &vu);
    ratio("vulkan traced+fused vs cpu eager", &ce, &vfu);
    ratio("vulkan traced+fused vs cpu traced", &ct, &vfu);
    ratio("cpu traced vs cpu eager", &ce, &ct);
    vf_context_destroy(pk);
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    free(host_x), free(host_y);
    return 0;
}
