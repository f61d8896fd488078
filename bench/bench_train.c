/* Training benchmark: the train step of examples/mlp.c (784-512-512-10,
 * ReLU, mean sparse softmax cross-entropy, vf_tape gradients of the six
 * variables, SGD with vf_assign_sub) at one batch size, in steps per
 * second, side by side in one run:
 *   - eager on Vulkan (the body called directly, op by op);
 *   - traced on Vulkan, unfused (vf_function_desc.unfused: one kernel per op);
 *   - traced on Vulkan, fused (the default);
 *   - eager on the CPU backend;
 *   - traced on the CPU backend.
 * Each run makes its own model (same seed) and warms up (the first traced
 * call traces and records the plan); then the runs of a backend take turns,
 * --rounds rounds of a few timed steps each (so that the load of other
 * processes on a shared machine falls on all of them alike), every step
 * synced; it reports the median and the best. Every Vulkan run comes before the CPU
 * runs: OpenBLAS's worker threads keep spinning for a while after a CPU
 * matmul and would slow lavapipe down on a small machine.
 * Between them (unless --no-profile) the fused and the unfused plan are
 * profiled in turns over a few calls in a profiling context: their kernels,
 * bytes and least GPU times.
 * Usage: bench_train [--batch N] [--iters N] [--rounds N] [--warmup N] [--quick]
 *        [--no-profile] [--no-signature: traced at the concrete batch size]
 *        [--kernels: also list the unfused plan's kernels]
 *        [--assign-last: the six assigns after all six new values, not assign_sub in turn]
 * (not a test: nothing asserted; the last line, "summary bench_train key=value ...",
 * is for scripts: bench/peer/vs_torch.py) */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vkfuse.h"

#define FEAT VB_MLP_FEAT

/* --assign-last: compute the six new values first, then assign them (see
   docs/BENCHMARKS.md: fusion groups do not span an assign, so with
   assign_sub in turn only the first weight's update joins its gradient's
   matmul kernel) */
static bool assign_last;

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
static const vf_tensor_spec *sig = vb_mlp_signature;

/* One of the five runs: its own model (same seed), inputs and function.
   The runs of a context take turns (rounds), so that the load of other
   processes on a shared machine falls on all of them alike. */
typedef struct {
    vf_context *ctx;
    vb_mlp m;
    vf_tensor *in[2];
    vf_function *fn;            /* NULL: eager */
    double *t;                  /* seconds of each timed step */
    int n, steps;
    vf_status s;
    int64_t dispatches, submits;
    figures f;
} run;

/* in the context's current scope, which must outlive the run */
static void run_open(run *r, vf_context *ctx, mode md, int64_t batch, int iters)
{
    *r = (run){.ctx = ctx, .f = {.first_loss = NAN, .last_loss = NAN}};
    r->t = malloc(sizeof(double) * (size_t)iters);
    r->m = vb_mlp_make(ctx);
    r->m.assign_last = assign_last;
    r->in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){batch, FEAT}, host_x);
    r->in[1] = vf_tensor_from_host(ctx, VF_I32, 1, &batch, host_y);
    if (md != EAGER)
        r->fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp_train_step", .body = vb_mlp_train_step,
                                                            .user = &r->m, .n_inputs = 2, .n_outputs = 1,
                                                            .input_signature = sig,
                                                            .unfused = md == TRACED_UNFUSED});
    r->s = !r->t ? VF_ERROR_OUT_OF_MEMORY : vf_status_get(ctx);
    if (r->s != VF_OK) {
        fprintf(stderr, "bench_train: %s\n", r->t ? vf_error_message(ctx) : "out of memory");
        vf_error_clear(ctx);
    }
}

/* one train step, synced; timed ones are recorded */
static void run_step(run *r, bool timed)
{
    if (r->s != VF_OK) return;
    vf_context *ctx = r->ctx;
    vf_context_stats c0 = {0}, c1 = {0};
    vf_scope_begin(ctx);
    vf_tensor *loss = NULL;
    vf_status s = vf_context_sync(ctx);
    vf_context_stats_get(ctx, &c0);
    double t0 = vb_now();
    if (s == VF_OK) s = r->fn ? vf_function_call(r->fn, r->in, &loss) : vb_mlp_train_step(ctx, r->in, &loss, &r->m);
    if (s == VF_OK) s = vf_context_sync(ctx);
    double dt = vb_now() - t0;
    vf_context_stats_get(ctx, &c1);
    float v = NAN;
    if (s == VF_OK) s = vf_tensor_read(loss, &v, sizeof v);
    if (r->steps++ == 0) r->f.first_loss = v;
    r->f.last_loss = v;
    if (timed) {
        r->t[r->n++] = dt;
        r->dispatches += c1.dispatches - c0.dispatches;
        r->submits += c1.submits - c0.submits;
    }
    vf_scope_end(ctx);
    if ((r->s = s) != VF_OK) {
        fprintf(stderr, "bench_train: %s\n", vf_error_message(ctx));
        vf_error_clear(ctx);
    }
}

static figures run_close(run *r)
{
    figures f = r->f;
    if (r->s == VF_OK && r->n > 0) {
        qsort(r->t, (size_t)r->n, sizeof *r->t, cmp_double);
        f.best = r->t[0];
        f.median = r->n % 2 ? r->t[r->n / 2] : 0.5 * (r->t[r->n / 2 - 1] + r->t[r->n / 2]);
        f.dispatches = (double)r->dispatches / r->n;
        f.submits = (double)r->submits / r->n;
        f.ok = !r->fn || vf_function_stats_get(r->fn, &f.fs) == VF_OK;
    }
    vf_function_destroy(r->fn);
    free(r->t);
    return f;
}

/* runs[n] of one context: warm-up steps, then rounds of `per` timed steps each */
static void measure(run *runs, int n, int warmup, int rounds, int per)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < warmup; k++) run_step(&runs[i], false);
    for (int q = 0; q < rounds; q++)
        for (int i = 0; i < n; i++)
            for (int k = 0; k < per; k++) run_step(&runs[i], true);
}

static void row(const char *name, const figures *f, bool traced)
{
    if (!f->ok) {
        printf("%-22s failed\n", name);
        return;
    }
    printf("%-22s %9.2f %9.2f %10.2f ms", name, 1.0 / f->median, 1.0 / f->best, f->median * 1e3);
    if (f->dispatches > 0) printf(" %9.1f %9.1f", f->dispatches, f->submits);
    else printf(" %9s %9s", "-", "-"); /* the CPU backend counts none */
    if (traced) printf(" %8d %11d %6s", f->fs.kernels, f->fs.dispatches_per_call, f->fs.planned ? "yes" : "no");
    else printf(" %8s %11s %6s", "-", "-", "-");
    printf("   %.4f -> %.4f\n", f->first_loss, f->last_loss);
}

static void ratio(const char *what, const figures *a, const figures *b)
{
    if (a->ok && b->ok) printf("  %-46s %6.2fx\n", what, a->median / b->median);
}

/* The fused and the unfused plan in a profiling context, called in turns
   (after a warm-up call each): each kernel's least GPU time over the calls,
   so that other processes on a shared machine disturb the figures less. */
typedef struct {
    run r;
    vf_function_profile p;
    uint64_t *least, wall;
    int n;
} profiled;

static bool profiled_call(profiled *q, bool record)
{
    vf_context *ctx = q->r.ctx;
    vf_scope_begin(ctx);
    vf_tensor *loss = NULL;
    bool ok = vf_function_call(q->r.fn, q->r.in, &loss) == VF_OK && vf_function_profile_get(q->r.fn, &q->p) == VF_OK &&
              q->p.planned;
    vf_scope_end(ctx);
    if (!ok || !record) return ok;
    if (!q->least) {
        q->n = q->p.n_kernels;
        if (!(q->least = malloc(sizeof *q->least * (size_t)(q->n > 0 ? q->n : 1)))) return false;
        for (int k = 0; k < q->n; k++) q->least[k] = UINT64_MAX;
    }
    if (q->p.n_kernels != q->n) return false;
    for (int k = 0; k < q->n; k++)
        if (q->p.kernels[k].gpu_ns < q->least[k]) q->least[k] = q->p.kernels[k].gpu_ns;
    if (q->p.wall_ns < q->wall) q->wall = q->p.wall_ns;
    return true;
}

static void profiled_print(const profiled *q, const char *name, int calls, bool list)
{
    const vf_function_profile *p = &q->p;
    double gpu = 0.0, mm = 0.0;
    for (int k = 0; k < q->n; k++) {
        gpu += (double)q->least[k];
        for (int j = 0; j < p->kernels[k].n_nodes; j++)
            if (!strcmp(p->kernels[k].node_ops[j], "matmul")) {
                mm += (double)q->least[k];
                break;
            }
    }
    printf("\n%s plan, %d profiled calls: %d kernels, %d dispatches, %d barriers, %.2f MB read, "
           "%.2f MB written;\n  sum of each kernel's least GPU time %.2f ms (kernels with a matmul: %.2f ms, "
           "%.0f%%), least wall time %.2f ms\n", name, calls, q->n, p->dispatches, p->barriers,
           (double)p->bytes_read * 1e-6, (double)p->bytes_written * 1e-6, gpu * 1e-6, mm * 1e-6, 100.0 * mm / gpu,
           (double)q->wall * 1e-6);
    for (int k = 0; list && k < q->n; k++) {
        const vf_kernel_profile *kp = &p->kernels[k];
        printf("  %-34.34s %8.3f ms %7.3f MB r %7.3f MB w  ", kp->name, (double)q->least[k] * 1e-6,
               (double)kp->bytes_read * 1e-6, (double)kp->bytes_written * 1e-6);
        for (int j = 0; j < kp->n_nodes; j++) printf("%s%s", j ? "+" : "", kp->node_ops[j]);
        printf("\n");
    }
}

static void profile(vf_context *ctx, int64_t batch, int calls, bool list_unfused)
{
    vf_scope_begin(ctx);
    profiled q[2] = {{.wall = UINT64_MAX}, {.wall = UINT64_MAX}}; /* fused, unfused */
    run_open(&q[0].r, ctx, TRACED_FUSED, batch, 1);
    run_open(&q[1].r, ctx, TRACED_UNFUSED, batch, 1);
    bool ok = q[0].r.s == VF_OK && q[1].r.s == VF_OK;
    for (int i = 0; i <= calls && ok; i++)
        ok = profiled_call(&q[0], i > 0) && profiled_call(&q[1], i > 0);
    if (!ok || vf_status_get(ctx) != VF_OK) {
        fprintf(stderr, "bench_train: profile failed: %s\n", vf_error_message(ctx));
        vf_error_clear(ctx);
    } else {
        profiled_print(&q[0], "fused", calls, true);
        profiled_print(&q[1], "unfused", calls, list_unfused);
    }
    for (int i = 1; i >= 0; i--) {
        free(q[i].least);
        run_close(&q[i].r);
    }
    vf_scope_end(ctx);
}

int main(int argc, char **argv)
{
    int iters = 20, warmup = 3, rounds = 5;
    int64_t batch = 256;
    bool prof = true, list_unfused = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--quick")) iters = 3, warmup = 1, rounds = 3;
        else if (!strcmp(argv[i], "--no-profile")) prof = false;
        else if (!strcmp(argv[i], "--no-signature")) sig = NULL;
        else if (!strcmp(argv[i], "--kernels")) list_unfused = true;
        else if (!strcmp(argv[i], "--assign-last")) assign_last = true;
        else return fprintf(stderr, "usage: bench_train [--batch N] [--iters N] [--rounds N] [--warmup N] [--quick] "
                                    "[--no-profile] [--no-signature] [--kernels] [--assign-last]\n"), 2;
    }
    if (iters < 1) iters = 1;
    if (warmup < 1) warmup = 1;
    if (rounds < 1) rounds = 1;
    if (rounds > iters) rounds = iters;
    const int per = (iters + rounds - 1) / rounds; /* timed steps per run and round */
    if (batch < 1) batch = 1;
    if (!vb_mlp_data(batch, &host_x, &host_y)) return fprintf(stderr, "bench_train: out of memory\n"), 1;
    vf_context *vk = NULL, *cpu = NULL, *pk = NULL;
    vf_context_desc dv = {.backend = VF_BACKEND_VULKAN}, dc = {.backend = VF_BACKEND_CPU};
    vf_context_desc dp = {.backend = VF_BACKEND_VULKAN, .profile = true};
    if (vf_context_create(&dv, &vk) != VF_OK || vf_context_create(&dc, &cpu) != VF_OK ||
        (prof && vf_context_create(&dp, &pk) != VF_OK)) {
        fprintf(stderr, "bench_train: could not create the contexts\n");
        vf_context_destroy(vk), vf_context_destroy(cpu), vf_context_destroy(pk);
        return 1;
    }
    printf("MLP 784-512-512-10 train step (forward, tape backward, 6 SGD updates%s), batch %lld, f32\n"
           "median and best of %d steps (%d rounds of %d, the runs of a backend taking turns) after %d warm-up "
           "steps, each step synced;\ntraced with %s\n\n",
           assign_last ? ", assigned last" : "", (long long)batch, rounds * per, rounds, per, warmup,
           sig ? "the input signature [-1,784], [-1]" : "concrete shapes");
    printf("%-22s %9s %9s %13s %9s %9s %8s %11s %6s   %s\n", "run", "steps/s", "best", "median/step",
           "disp/step", "subm/step", "kernels", "dispatches", "plan", "loss first -> last");
    run r[5];
    figures fig[5];
    vf_scope_begin(vk);
    run_open(&r[0], vk, EAGER, batch, rounds * per);
    run_open(&r[1], vk, TRACED_UNFUSED, batch, rounds * per);
    run_open(&r[2], vk, TRACED_FUSED, batch, rounds * per);
    measure(r, 3, warmup, rounds, per);
    for (int i = 2; i >= 0; i--) fig[i] = run_close(&r[i]);
    vf_scope_end(vk);
    if (prof) { /* before the CPU runs (OpenBLAS threads) */
        profile(pk, batch, per * rounds < 5 ? per * rounds : 5, list_unfused);
        printf("\n");
    }
    vf_scope_begin(cpu);
    run_open(&r[3], cpu, EAGER, batch, rounds * per);
    run_open(&r[4], cpu, TRACED_FUSED, batch, rounds * per);
    measure(r + 3, 2, warmup, rounds, per);
    for (int i = 4; i >= 3; i--) fig[i] = run_close(&r[i]);
    vf_scope_end(cpu);
    const figures *ve = &fig[0], *vu = &fig[1], *vfu = &fig[2], *ce = &fig[3], *ct = &fig[4];
    row("vulkan eager", ve, false);
    row("vulkan traced unfused", vu, true);
    row("vulkan traced fused", vfu, true);
    row("cpu eager", ce, false);
    row("cpu traced", ct, true);
    printf("\nsteps/s ratios (medians):\n");
    ratio("vulkan traced+fused vs vulkan eager", ve, vfu);
    ratio("vulkan traced+fused vs vulkan traced unfused", vu, vfu);
    ratio("vulkan traced unfused vs vulkan eager", ve, vu);
    ratio("vulkan traced+fused vs cpu eager", ce, vfu);
    ratio("vulkan traced+fused vs cpu traced", ct, vfu);
    ratio("cpu traced vs cpu eager", ce, ct);
    static const char *const keys[5] = {"vk_eager_steps_s", "vk_unfused_steps_s", "vk_fused_steps_s", "cpu_eager_steps_s",
                                        "cpu_traced_steps_s"};
    for (int i = 0; i < 5; i++) vb_summary(keys[i], fig[i].ok ? 1.0 / fig[i].median : NAN);
    vb_summary("batch", (double)batch);
    vb_summary_print("bench_train");
    vf_context_destroy(pk);
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
    free(host_x), free(host_y);
    return 0;
}
