/* Time to first result (issue 12), in one run:
 *   - cold and warm first calls, each in a child process of its own: the
 *     seed's traced train_step (softmax regression 784 -> 10, vf_tape,
 *     vf_assign_sub, input signature [-1,784] f32, [-1] i32, batch 128),
 *     the MLP train step of bench_train (batch 256, same signature) and
 *     `vkfuse demo` (the CLI, exec'ed). Cold: a fresh temporary directory
 *     as XDG_CACHE_HOME, VKFUSE_CACHE_DIR and MESA_SHADER_CACHE_DIR: the
 *     library's and the driver's disk caches empty, as on a fresh machine.
 *     Warm: a second process on the same directory. The driver's cache is
 *     empty rather than off (MESA_SHADER_CACHE_DISABLE=true, Mesa 22.3's
 *     name) because lavapipe keeps compiled pipelines only there (the
 *     VkPipelineCache data vkfuse saves is a bare header on lavapipe), so
 *     with it off every process is cold; --driver-cache-off turns it off
 *     in both processes all the same: the warm figure then shows what the
 *     library's own caches buy. "first call" is vf_function_call up to
 *     its loss read back on the host (trace, plan, compiles, run);
 *     "process" is fork to exit as the parent sees it (context creation,
 *     data, teardown too). Medians of --runs cold/warm pairs (default 1: a
 *     cold MLP process alone takes tens of seconds on lavapipe; --runs 3
 *     for the figures of docs/BENCHMARKS.md).
 *   - eager µs per small op: a 256-op chain (add, mul, sub, neg in turn) on
 *     [64,64] f32, queued, one read at the end, on lavapipe and on the CPU
 *     backend; the same chain traced (fused), per op; --chain-mix tanhexp
 *     makes the chain's 4-cycle add, mul, tanh, exp instead (transcendental
 *     ops: tanh keeps exp's argument in [-1,1], so nothing overflows);
 *   - an 8-op elementwise chain (bench_fusion's) whose scalar constants
 *     are made in the body with vf_fill, traced: kernels and dispatches per
 *     call (vf_function_stats) and time per call, against the same chain
 *     with the constants captured from outside and against the unfused
 *     plan (vf_function_desc.unfused, what VKFUSE_FUSION=0 gives).
 *   - with --swaps, each child then calls the step again until every
 *     matmul kernel its plan built in the quick tier has been swapped for
 *     its tuned one (docs/RUNTIME.md, "Tiered kernels"), and once more:
 *     how many calls, the slowest of them (where the driver compiles the
 *     tuned kernels) and the last (the steady state); "process" then
 *     includes them.
 * Usage: bench_startup [--runs N] [--reps N] [--chain8-n N] [--cli PATH]
 *        [--driver-cache-off] [--no-cold] [--no-steady] [--swaps]
 *        [--chain-mix arith|tanhexp]
 * (not a test: nothing asserted). For scripts (bench/peer/vs_torch.py):
 * the steady part ends with a line "summary bench_startup key=value ..."
 * (the chain's µs per op, and the sum and the sum of magnitudes of its
 * result, to check against another library's); `--child
 * mlp|mlp_cpu|train_step [--calls N]` is one child (its line "result
 * ctx_ms=... first_ms=...", written out as soon as the first call's loss
 * is read back, so that a parent can time the process's start to its first
 * result), mlp_cpu the MLP on the CPU backend; --calls N makes it call the
 * step N times in all (a line "calls n=N last_ms=..."), then exit: a
 * program that goes on after its first call, whose exit waits on what the
 * first call started (on lavapipe, the tuned kernels compiled off the
 * calls). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* nftw's FTW_PHYS, mkdtemp (CMake defines it too) */
#endif
#include "common.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vkfuse.h"

#define CHAIN_OPS VB_CHAIN_OPS
#define MAX_RUNS 64

/* --chain-mix tanhexp: the 256-op chain's 4-cycle is add, mul, tanh, exp */
static bool chain_tanhexp;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    if (n <= 0) return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---- children: one first call each, figures on stdout ------------------- */

typedef struct {
    vf_tensor *w, *b, *lr;
} softmax_model;

/* the seed's train_step: softmax regression 784 -> 10 */
static vf_status seed_train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    softmax_model *m = user;
    vf_tensor *loss = NULL, *g[2];
    vf_status s = vb_softmax_regression_grads(ctx, in[0], in[1], m->w, m->b, &loss, g);
    if (s != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, g[0]))) != VF_OK) return s;
    if ((s = vf_assign_sub(m->b, vf_mul(ctx, m->lr, g[1]))) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

/* With --swaps: the calls after the first until every matmul kernel built
   in the quick tier has its tuned kernel (docs/RUNTIME.md, "Tiered
   kernels"), and one more, at most 80 (a busy machine may take that
   long to compile them); one line "later ..." on stdout: how many, the
   slowest, the last one (the steady state) and each call's ms. */
static void later_calls(vf_context *ctx, vf_function *fn, vf_tensor **in)
{
    int calls = 0;
    double slowest = 0, last = 0, total = 0;
    char each[640] = ""; /* every call's ms, in order: where a compile lands */
    size_t used = 0;
    vf_context_stats c = {0};
    vf_context_stats_get(ctx, &c);
    bool tuned = c.tier_swaps >= c.tier_quick_kernels;
    for (int i = 0; i < 80; i++) {
        bool steady = tuned; /* every tuned kernel was in before this call */
        vf_tensor *loss = NULL;
        float v;
        double t0 = vb_now();
        if (vf_function_call(fn, in, &loss) != VF_OK || vf_tensor_read(loss, &v, sizeof v) != VF_OK) break;
        last = vb_now() - t0;
        slowest = last > slowest ? last : slowest;
        total += last;
        if (used < sizeof each - 16)
            used += (size_t)snprintf(each + used, sizeof each - used, "%s%.0f", used ? "," : "", last * 1e3);
        vf_tensor_release(loss);
        calls++;
        vf_context_stats_get(ctx, &c);
        tuned = c.tier_swaps >= c.tier_quick_kernels;
        if (steady) break;
    }
    printf("later calls=%d slowest_ms=%.3f last_ms=%.3f total_ms=%.3f quick=%lld swaps=%lld each_ms=%s\n", calls,
           slowest * 1e3, last * 1e3, total * 1e3, (long long)c.tier_quick_kernels, (long long)c.tier_swaps, each);
}

/* Child: makes the context, the model and the inputs, then times the first
   call of the traced step; prints one line "result ..." on stdout. */
static int child(const char *what, bool swaps, int calls)
{
    /* mlp_cpu: the MLP on the CPU backend (bench/peer/vs_torch.py's cold start) */
    bool on_cpu = !strcmp(what, "mlp_cpu"), mlp = on_cpu || !strcmp(what, "mlp");
    if (!mlp && strcmp(what, "train_step")) return fprintf(stderr, "bench_startup: unknown child %s\n", what), 2;
    double t0 = vb_now();
    vf_context *ctx = NULL;
    vf_context_desc d = {.backend = on_cpu ? VF_BACKEND_CPU : VF_BACKEND_VULKAN};
    if (vf_context_create(&d, &ctx) != VF_OK) return fprintf(stderr, "bench_startup: %s\n", vf_error_message(ctx)), 1;
    double t_ctx = vb_now() - t0;
    int64_t batch = mlp ? 256 : 128;
    float *x = NULL;
    int32_t *y = NULL;
    if (!vb_mlp_data(batch, &x, &y)) return fprintf(stderr, "bench_startup: out of memory\n"), 1;
    vf_scope_begin(ctx);
    vb_mlp mm = {0};
    softmax_model sm = {0};
    if (mlp) mm = vb_mlp_make(ctx);
    else
        sm = (softmax_model){.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){VB_MLP_FEAT, 10}, 0.0)),
                             .b = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){10}, 0.0)),
                             .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.5)};
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){batch, VB_MLP_FEAT}, x),
                        vf_tensor_from_host(ctx, VF_I32, 1, &batch, y)};
    vf_status s = vf_context_sync(ctx); /* the set-up's own kernels are not the step's */
    vf_context_stats c0 = {0}, c1 = {0};
    vf_context_stats_get(ctx, &c0);
    double t1 = vb_now();
    vf_function *fn = NULL;
    vf_tensor *loss = NULL;
    float v = NAN;
    if (s == VF_OK)
        fn = vf_function_create(ctx, &(vf_function_desc){.name = what, .body = mlp ? vb_mlp_train_step : seed_train_step,
                                                         .user = mlp ? (void *)&mm : (void *)&sm, .n_inputs = 2,
                                                         .n_outputs = 1, .input_signature = vb_mlp_signature});
    if (fn) s = vf_function_call(fn, in, &loss);
    if (fn && s == VF_OK) s = vf_tensor_read(loss, &v, sizeof v);
    double t_first = vb_now() - t1;
    vf_context_stats_get(ctx, &c1);
    vf_function_stats fs = {0};
    if (fn) vf_function_stats_get(fn, &fs);
    if (!fn || s != VF_OK) fprintf(stderr, "bench_startup %s: %s\n", what, vf_error_message(ctx));
    else
        printf("result ctx_ms=%.3f first_ms=%.3f compiles=%lld compile_ms=%.3f disk_hits=%lld kernels=%d loss=%.5f\n",
               t_ctx * 1e3, t_first * 1e3, (long long)(c1.shader_compiles - c0.shader_compiles),
               c1.shader_compile_ms - c0.shader_compile_ms, (long long)(c1.shader_disk_hits - c0.shader_disk_hits),
               fs.kernels, v);
    fflush(stdout); /* now: the parent may time the start to this line */
    double t_last = 0;
    for (int i = 1; i < calls && fn && s == VF_OK; i++) {
        vf_tensor *l = NULL;
        double t2 = vb_now();
        s = vf_function_call(fn, in, &l);
        if (s == VF_OK) s = vf_tensor_read(l, &v, sizeof v);
        t_last = vb_now() - t2;
        vf_tensor_release(l);
        if (s != VF_OK) fprintf(stderr, "bench_startup %s: call %d: %s\n", what, i + 1, vf_error_message(ctx));
        else if (i == calls - 1) printf("calls n=%d last_ms=%.3f loss=%.5f\n", calls, t_last * 1e3, v);
    }
    if (fn && s == VF_OK && swaps) later_calls(ctx, fn, in);
    fflush(stdout);
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    vf_context_destroy(ctx);
    free(x), free(y);
    return fn && s == VF_OK ? 0 : 1;
}

/* ---- parent: spawning the children --------------------------------------- */

typedef struct {
    bool ok;
    double process_s, ctx_ms, first_ms, compile_ms;
    long long compiles, disk_hits;
    int kernels;
    int later;                   /* --swaps: calls until every tuned kernel was in */
    double later_slowest_ms, later_last_ms, later_total_ms;
    long long quick;
    char later_each[640];        /* each later call's ms, comma-separated */
} child_result;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st, (void)flag, (void)f;
    return remove(path);
}

static bool driver_cache_off, swaps;

/* Runs argv (argv[0] a path) with the cache environment on dir; its stdout
   is parsed for a "result" line (or discarded when parse is false). */
static child_result spawn(char *const *argv, const char *dir, bool parse)
{
    child_result r = {0};
    int fd[2];
    if (pipe(fd)) return r;
    fflush(stdout), fflush(stderr);
    double t0 = vb_now();
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]), close(fd[1]);
        return r;
    }
    if (pid == 0) {
        char vk[4096 + 32], mesa[4096 + 32];
        snprintf(vk, sizeof vk, "%s/vkfuse", dir);
        snprintf(mesa, sizeof mesa, "%s/mesa_shader_cache", dir);
        setenv("XDG_CACHE_HOME", dir, 1);
        setenv("VKFUSE_CACHE_DIR", vk, 1);
        setenv("MESA_SHADER_CACHE_DIR", mesa, 1);
        unsetenv("MESA_GLSL_CACHE_DIR"); /* Mesa's name before 22.3 */
        /* the demo on Vulkan, as the children: the default is the CPU
           backend where the only Vulkan device is lavapipe */
        setenv("VKFUSE_BACKEND", "vulkan", 1);
        if (driver_cache_off) {
            setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
            setenv("MESA_GLSL_CACHE_DISABLE", "true", 1);
        } else {
            unsetenv("MESA_SHADER_CACHE_DISABLE");
            unsetenv("MESA_GLSL_CACHE_DISABLE");
        }
        close(fd[0]);
        dup2(fd[1], 1);
        close(fd[1]);
        execv(argv[0], argv);
        fprintf(stderr, "bench_startup: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        if (parse && sscanf(line, "result ctx_ms=%lf first_ms=%lf compiles=%lld compile_ms=%lf disk_hits=%lld kernels=%d",
                            &r.ctx_ms, &r.first_ms, &r.compiles, &r.compile_ms, &r.disk_hits, &r.kernels) == 6)
            r.ok = true;
        else if (parse)
            sscanf(line, "later calls=%d slowest_ms=%lf last_ms=%lf total_ms=%lf quick=%lld swaps=%*d each_ms=%639s",
                   &r.later, &r.later_slowest_ms, &r.later_last_ms, &r.later_total_ms, &r.quick, r.later_each);
    if (f) fclose(f);
    else close(fd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    r.process_s = vb_now() - t0;
    bool exited = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    r.ok = exited && (r.ok || !parse);
    if (!exited) fprintf(stderr, "bench_startup: %s %s failed (status %d)\n", argv[0], argv[1] ? argv[1] : "", st);
    return r;
}

enum { P_TRAIN, P_MLP, P_DEMO, N_PROGRAMS };
static const char *const program_name[N_PROGRAMS] = {"seed train_step", "MLP train step", "vkfuse demo"};
static const char *const target[N_PROGRAMS][2] = {{"<= 1.5 s", "<= 0.3 s"}, {"-", "-"}, {"-", "-"}};

typedef struct {
    child_result r[2][MAX_RUNS]; /* cold, warm */
    int n;
} program_runs;

static void print_program(int p, program_runs *pr)
{
    for (int w = 0; w < 2; w++) {
        double proc[MAX_RUNS], first[MAX_RUNS], ctxms[MAX_RUNS], comp[MAX_RUNS];
        int n = 0;
        long long compiles = -1, hits = -1;
        int kernels = -1;
        printf("%-16s %-5s", w ? "" : program_name[p], w ? "warm" : "cold");
        for (int i = 0; i < pr->n; i++) {
            const child_result *c = &pr->r[w][i];
            if (!c->ok) continue;
            proc[n] = c->process_s, first[n] = c->first_ms * 1e-3, ctxms[n] = c->ctx_ms * 1e-3,
            comp[n++] = c->compile_ms * 1e-3;
            compiles = c->compiles, hits = c->disk_hits, kernels = c->kernels;
        }
        if (!n) {
            printf(" failed\n");
            continue;
        }
        double list[MAX_RUNS]; /* in run order, before median() sorts */
        memcpy(list, p == P_DEMO ? proc : first, sizeof(double) * (size_t)n);
        if (p == P_DEMO) printf(" %11s %9s %11s", "-", "-", "-");
        else printf(" %9.3f s %7.3f s %9.3f s", median(first, n), median(ctxms, n), median(comp, n));
        printf(" %9.3f s", median(proc, n));
        if (p == P_DEMO) printf(" %9s %7s %7s", "-", "-", "-");
        else printf(" %9lld %7lld %7d", compiles, hits, kernels);
        printf("  %-9s [", target[p][w]);
        for (int i = 0; i < n; i++) printf("%s%.2f", i ? " " : "", list[i]);
        printf("]\n");
        for (int i = 0; swaps && p != P_DEMO && i < pr->n; i++)
            if (pr->r[w][i].ok)
                printf("%-22s %lld quick kernels; then %d call%s (until tuned, and one more): %.3f s, slowest %.3f s, "
                       "last %.3f s; each (ms): %s\n", "", pr->r[w][i].quick, pr->r[w][i].later,
                       pr->r[w][i].later == 1 ? "" : "s", pr->r[w][i].later_total_ms * 1e-3,
                       pr->r[w][i].later_slowest_ms * 1e-3, pr->r[w][i].later_last_ms * 1e-3, pr->r[w][i].later_each);
    }
}

static bool exists(const char *path) { return path && access(path, X_OK) == 0; }

static void cold_and_warm(int runs, const char *cli)
{
    static char self[4096], cli_buf[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "bench_startup: cannot find its own binary (/proc/self/exe)\n");
        return;
    }
    self[n] = 0;
    if (!cli) { /* build/<preset>/bench/bench_startup -> build/<preset>/tools/vkfuse */
        snprintf(cli_buf, sizeof cli_buf, "%s", self);
        char *slash = strrchr(cli_buf, '/');
        if (slash) snprintf(slash, sizeof cli_buf - (size_t)(slash - cli_buf), "/../tools/vkfuse");
        cli = cli_buf;
    }
    bool have_cli = exists(cli);
    if (!have_cli) fprintf(stderr, "bench_startup: no vkfuse CLI at %s (build the vkfuse_cli target, or --cli PATH)\n", cli);
    static program_runs pr[N_PROGRAMS];
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    printf("cold and warm first calls, %d run%s (each a cold process on a fresh cache directory, then a warm one "
           "on it), medians;\nthe driver's disk cache %s\n", runs, runs == 1 ? "" : "s",
           driver_cache_off ? "off (MESA_SHADER_CACHE_DISABLE=true) in both" : "in the same directory (empty when cold)");
    for (int r = 0; r < runs; r++)
        for (int p = 0; p < N_PROGRAMS; p++) {
            if (p == P_DEMO && !have_cli) continue;
            char dir[4096];
            snprintf(dir, sizeof dir, "%s/bench_startup.XXXXXX", tmp);
            if (!mkdtemp(dir)) {
                fprintf(stderr, "bench_startup: mkdtemp in %s: %s\n", tmp, strerror(errno));
                return;
            }
            char *argv_child[] = {self, "--child", p == P_MLP ? "mlp" : "train_step", swaps ? "--swaps" : NULL, NULL};
            char *argv_demo[] = {(char *)cli, "demo", NULL};
            for (int w = 0; w < 2; w++)
                pr[p].r[w][r] = spawn(p == P_DEMO ? argv_demo : argv_child, dir, p != P_DEMO);
            pr[p].n = r + 1;
            nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
    printf("%-16s %-5s %11s %9s %11s %11s %9s %7s %7s  %-9s %s\n", "program", "", "first call", "context",
           "shaderc", "process", "compiles", "disk", "kernels", "target", "each run (first call; demo: process), s");
    for (int p = 0; p < N_PROGRAMS; p++)
        if (pr[p].n) print_program(p, &pr[p]);
}

/* ---- steady state: the 256-op chain and the 8-op chain -------------------- */

/* The chain: bench/common.h's vb_chain_arith, or with --chain-mix
   tanhexp vb_chain_tanhexp. */
static vf_body chain256(void) { return chain_tanhexp ? vb_chain_tanhexp : vb_chain_arith; }

/* Median and best µs per op of the chain, eager (fn NULL: the body called
   op by op) or traced, over reps runs after one warm-up; each run ends
   with a read of the result. *host (when not NULL): the median µs per op
   until the last op returned, before the read: the calling thread's part
   (on lavapipe the rest is the driver running the queued dispatches). */
static bool time_chain(vf_context *ctx, bool traced, int reps, double *med, double *best, double *host,
                       vf_function_stats *fs, const char *sum_key)
{
    static float hx[64 * 64], ha[64 * 64], hc[64 * 64], out[64 * 64];
    for (int i = 0; i < 64 * 64; i++) hx[i] = (float)(i % 17) * 0.1f, ha[i] = (float)(i % 5) * 0.2f, hc[i] = 0.5f;
    int64_t shape[2] = {64, 64};
    vf_scope_begin(ctx);
    vf_tensor *in[3] = {vf_tensor_from_host(ctx, VF_F32, 2, shape, hx), vf_tensor_from_host(ctx, VF_F32, 2, shape, ha),
                        vf_tensor_from_host(ctx, VF_F32, 2, shape, hc)};
    vf_function *fn = traced ? vf_function_create(ctx, &(vf_function_desc){.name = "chain256", .body = chain256(),
                                                                            .n_inputs = 3, .n_outputs = 1})
                             : NULL;
    double t[MAX_RUNS * 4], th[MAX_RUNS * 4];
    if (reps > MAX_RUNS * 4) reps = MAX_RUNS * 4;
    vf_status s = vf_context_sync(ctx);
    for (int i = 0; i <= reps && s == VF_OK; i++) {
        vf_scope_begin(ctx);
        vf_tensor *y = NULL;
        double t0 = vb_now();
        s = fn ? vf_function_call(fn, in, &y) : chain256()(ctx, in, &y, NULL);
        double t1 = vb_now();
        if (s == VF_OK) s = vf_tensor_read(y, out, sizeof out);
        if (i) t[i - 1] = (vb_now() - t0) * 1e6 / CHAIN_OPS, th[i - 1] = (t1 - t0) * 1e6 / CHAIN_OPS;
        vf_scope_end(ctx);
    }
    if (s != VF_OK) fprintf(stderr, "bench_startup: chain: %s\n", vf_error_message(ctx)), vf_error_clear(ctx);
    if (fn && fs) vf_function_stats_get(fn, fs);
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    if (s != VF_OK) return false;
    *med = median(t, reps);
    *best = t[0];
    if (host) *host = median(th, reps);
    /* the result, for a script to hold against another library's: its sum
       and the sum of its magnitudes (the scale of the tolerance) */
    double sum = 0, mag = 0;
    for (int i = 0; i < 64 * 64; i++) sum += out[i], mag += fabs(out[i]);
    char key[64];
    snprintf(key, sizeof key, "%s_sum", sum_key);
    vb_summary(key, sum);
    snprintf(key, sizeof key, "%s_abssum", sum_key);
    vb_summary(key, mag);
    return true;
}

/* bench_fusion's 8-op chain x*1.5+0.5, relu, *0.9, sigmoid, *2, -1, abs;
   user NULL: the scalars are vf_fill'ed in the body, else captured */
static vf_status chain8(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    static const double kv[5] = {1.5, 0.5, 0.9, 2.0, 1.0};
    vf_tensor *const *kc = user, *kf[5];
    for (int i = 0; i < 5 && !kc; i++) kf[i] = vf_fill(ctx, VF_F32, 0, NULL, kv[i]);
    vf_tensor *const *k = kc ? kc : kf;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], k[0]), k[1]);
    h = vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), k[2]));
    out[0] = vf_abs(ctx, vf_sub(ctx, vf_mul(ctx, h, k[3]), k[4]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    bool ok;
    double med, best; /* seconds per call */
    vf_function_stats fs;
} chain8_figures;

static chain8_figures time_chain8(vf_context *ctx, int64_t n, bool fill, bool unfused, int reps)
{
    chain8_figures f = {0};
    vf_scope_begin(ctx);
    static const float kv[5] = {1.5f, 0.5f, 0.9f, 2.0f, 1.0f};
    vf_tensor *k[5];
    for (int i = 0; i < 5; i++) k[i] = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &kv[i]);
    vf_tensor *x = vf_random_normal(ctx, VF_F32, 1, &n, 1);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "chain8", .body = chain8,
                                                                   .user = fill ? NULL : k, .n_inputs = 1,
                                                                   .n_outputs = 1, .unfused = unfused});
    double t[MAX_RUNS * 4];
    if (reps > MAX_RUNS * 4) reps = MAX_RUNS * 4;
    vf_status s = fn ? vf_context_sync(ctx) : vf_status_get(ctx);
    for (int i = 0; i <= reps && s == VF_OK; i++) {
        vf_scope_begin(ctx);
        vf_tensor *y = NULL;
        double t0 = vb_now();
        s = vf_function_call(fn, &x, &y);
        if (s == VF_OK) s = vf_context_sync(ctx);
        if (i) t[i - 1] = vb_now() - t0;
        vf_scope_end(ctx);
    }
    if (s != VF_OK) fprintf(stderr, "bench_startup: chain8: %s\n", vf_error_message(ctx)), vf_error_clear(ctx);
    else if (vf_function_stats_get(fn, &f.fs) == VF_OK) {
        f.ok = true;
        f.med = median(t, reps);
        f.best = t[0];
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    return f;
}

static void steady(int reps, int64_t n8)
{
    vf_context *vk = NULL, *cpu = NULL;
    vf_context_desc dv = {.backend = VF_BACKEND_VULKAN}, dc = {.backend = VF_BACKEND_CPU};
    if (vf_context_create(&dv, &vk) != VF_OK || vf_context_create(&dc, &cpu) != VF_OK) {
        fprintf(stderr, "bench_startup: could not create the contexts: %s\n", vf_last_error());
        vf_context_destroy(vk), vf_context_destroy(cpu);
        return;
    }
    printf("\n%d-op chain of small elementwise ops (%s) on [64,64] f32, queued, one read at the "
           "end;\nmedian and best of %d chains after a warm-up, in µs per op\n", CHAIN_OPS,
           chain_tanhexp ? "add, mul, tanh, exp" : "add, mul, sub, neg", reps);
    printf("%-30s %9s %9s %8s %11s   %s\n", "run", "median", "best", "kernels", "dispatches", "target (median)");
    double med, best, host;
    vf_function_stats fs = {0};
    /* Vulkan first: OpenBLAS's spinning threads would slow lavapipe down */
    if (time_chain(vk, false, reps, &med, &best, &host, NULL, "chain_vk_eager")) {
        vb_summary("chain_vk_eager_us", med);
        printf("%-30s %9.2f %9.2f %8s %11s   <= 25\n", "vulkan (lavapipe) eager", med, best, "-", "-");
        printf("%-30s %9.2f %9s %8s %11s   -\n", "  of which host (ops queued)", host, "-", "-", "-");
    }
    if (time_chain(vk, true, reps, &med, &best, NULL, &fs, "chain_vk_traced")) {
        vb_summary("chain_vk_traced_us", med);
        printf("%-30s %9.2f %9.2f %8d %11d   <= 3.5\n", "vulkan (lavapipe) traced", med, best, fs.kernels,
               fs.dispatches_per_call);
    }
    chain8_figures f[3] = {time_chain8(vk, n8, true, false, reps), time_chain8(vk, n8, false, false, reps),
                           time_chain8(vk, n8, true, true, reps)};
    if (time_chain(cpu, false, reps, &med, &best, NULL, NULL, "chain_cpu_eager")) {
        vb_summary("chain_cpu_eager_us", med);
        printf("%-30s %9.2f %9.2f %8s %11s   <= 6\n", "cpu eager", med, best, "-", "-");
    }
    if (time_chain(cpu, true, reps, &med, &best, NULL, &fs, "chain_cpu_traced")) {
        vb_summary("chain_cpu_traced_us", med);
        printf("%-30s %9.2f %9.2f %8d %11s   -\n", "cpu traced", med, best, fs.kernels, "-");
    }

    printf("\n8-op elementwise chain (x*1.5+0.5, relu, *0.9, sigmoid, *2, -1, abs) over %lld f32 on lavapipe, "
           "traced;\nmedian and best of %d calls (each synced) after the first\n", (long long)n8, reps);
    printf("%-42s %10s %10s %8s %11s %12s\n", "run", "median", "best", "kernels", "dispatches", "vs unfused");
    static const char *const name[3] = {"constants vf_fill'ed in the body, fused", "constants captured, fused",
                                        "constants vf_fill'ed, unfused (FUSION=0)"};
    for (int i = 0; i < 3; i++) {
        if (!f[i].ok) {
            printf("%-42s failed\n", name[i]);
            continue;
        }
        printf("%-42s %7.3f ms %7.3f ms %8d %11d", name[i], f[i].med * 1e3, f[i].best * 1e3, f[i].fs.kernels,
               f[i].fs.dispatches_per_call);
        if (f[2].ok) printf(" %11.2fx", f[2].med / f[i].med);
        printf("\n");
    }
    printf("target: the vf_fill'ed chain is 1 kernel per call (constants folded at trace time)\n");
    vb_summary_print("bench_startup");
    vf_context_destroy(vk);
    vf_context_destroy(cpu);
}

static void loadavg(const char *when)
{
    char buf[128] = "?";
    FILE *f = fopen("/proc/loadavg", "r");
    if (f && fgets(buf, sizeof buf, f)) buf[strcspn(buf, "\n")] = 0;
    if (f) fclose(f);
    printf("load average %s: %s\n", when, buf);
}

int main(int argc, char **argv)
{
    int runs = 1, reps = 20;
    int64_t n8 = 1 << 20;
    const char *cli = NULL;
    bool cold = true, st = true;
    const char *child_name = NULL;
    int calls = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--child") && i + 1 < argc) child_name = argv[++i];
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chain-mix") && i + 1 < argc &&
                 (!strcmp(argv[i + 1], "arith") || !strcmp(argv[i + 1], "tanhexp")))
            chain_tanhexp = !strcmp(argv[++i], "tanhexp");
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--chain8-n") && i + 1 < argc) n8 = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--cli") && i + 1 < argc) cli = argv[++i];
        else if (!strcmp(argv[i], "--driver-cache-off")) driver_cache_off = true;
        else if (!strcmp(argv[i], "--no-cold")) cold = false;
        else if (!strcmp(argv[i], "--no-steady")) st = false;
        else if (!strcmp(argv[i], "--swaps")) swaps = true;
        else {
            fprintf(stderr, "usage: bench_startup [--runs N] [--reps N] [--chain8-n N] [--cli PATH] "
                            "[--driver-cache-off] [--no-cold] [--no-steady] [--swaps] [--chain-mix arith|tanhexp]\n"
                            "       bench_startup --child mlp|mlp_cpu|train_step [--calls N] [--swaps]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (child_name) return child(child_name, swaps, calls < 1 ? 1 : calls);
    if (runs < 1) runs = 1;
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    if (reps < 1) reps = 1;
    if (n8 < 1) n8 = 1;
    loadavg("at start");
    if (cold) cold_and_warm(runs, cli);
    if (st) steady(reps, n8);
    loadavg("at end");
    return 0;
}
