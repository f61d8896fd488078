/* vkfuse profile WORKLOAD: runs a built-in workload (profile_workloads.c)
 * as a traced function fused and unfused on Vulkan with profiling on, and
 * on the CPU backend, in one run; prints per kernel and in total kernels,
 * dispatches, barriers, bytes read and written, GPU time, wall time per
 * call and peak memory, with the fused/unfused ratios (--json: one JSON
 * object; --trace FILE: Chrome / Perfetto trace of the last call of each). */
#include "cli.h"
#include "profile_workloads.h"
#include "saved_cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define WARMUP 2 /* the first call traces, builds and compiles the plan */

typedef struct kstat {
    char name[64];
    int dispatches, barriers, n_nodes;
    double gpu_ns;                /* summed over the timed calls */
    int64_t bytes_read, bytes_written;
    int nodes[64];
    char ops[64][48];             /* copies: a user op's name goes with its function */
} kstat;

typedef struct vstat {
    bool ok, planned, timestamps;
    char note[256];
    int kernels, dispatches, barriers;
    int64_t bytes_read, bytes_written, peak, unplanned;
    double gpu_ns, wall_ns, best_ns; /* gpu and wall: means per call */
    kstat *k;
    int nk;
    float *out;
    int64_t out_n;
} vstat;

typedef struct opts {
    int iters;
    int shrink;                   /* leading dimensions divided by this */
    bool json, cpu;
    const char *trace;
} opts;

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static void vstat_free(vstat *v)
{
    free(v->k);
    free(v->out);
    memset(v, 0, sizeof *v);
}

/* Keeps the kernel records of a timed call (the first defines the list). */
static bool take_profile(vstat *v, const vf_function_profile *p, bool first)
{
    if (first) {
        v->k = calloc((size_t)p->n_kernels + 1, sizeof *v->k);
        if (!v->k) return false;
        v->nk = p->n_kernels;
        for (int i = 0; i < p->n_kernels; i++) {
            const vf_kernel_profile *k = &p->kernels[i];
            kstat *o = &v->k[i];
            snprintf(o->name, sizeof o->name, "%s", k->name);
            o->dispatches = k->dispatches;
            o->barriers = k->barriers;
            o->bytes_read = k->bytes_read;
            o->bytes_written = k->bytes_written;
            o->n_nodes = k->n_nodes < 64 ? k->n_nodes : 64;
            for (int j = 0; j < o->n_nodes; j++) {
                o->nodes[j] = k->nodes[j];
                snprintf(o->ops[j], sizeof o->ops[j], "%s", k->node_ops[j] ? k->node_ops[j] : "?");
            }
        }
        v->planned = p->planned;
        v->timestamps = p->timestamps;
        v->dispatches = p->dispatches;
        v->barriers = p->barriers;
        v->bytes_read = p->bytes_read;
        v->bytes_written = p->bytes_written;
        snprintf(v->note, sizeof v->note, "%s", p->note ? p->note : "");
    }
    for (int i = 0; i < v->nk && i < p->n_kernels; i++) v->k[i].gpu_ns += (double)p->kernels[i].gpu_ns;
    v->gpu_ns += (double)p->gpu_ns;
    return true;
}

/* What is profiled: a built-in workload, or a saved function (file) and
   its .npy inputs. */
typedef struct subject {
    const char *name, *summary;
    const workload *wl;
    const char *file;
    const sc_inputs *in;
    int n_out;
} subject;

/* Every output of the last call, as floats, one after the other. */
static bool keep_outputs(vf_context *ctx, vf_tensor **y, int n_out, vstat *v)
{
    int64_t total = 0;
    for (int k = 0; k < n_out; k++) total += vf_tensor_numel(y[k]);
    v->out = malloc(sizeof(float) * (size_t)(total + 1));
    if (!v->out) return false;
    for (int k = 0; k < n_out; k++) {
        size_t bytes;
        void *p = sc_read_tensor(ctx, "profile", y[k], &bytes);
        if (!p) return false;
        for (int64_t e = 0; e < vf_tensor_numel(y[k]); e++) v->out[v->out_n++] = (float)sc_value(vf_tensor_dtype(y[k]), p, e);
        free(p);
    }
    return true;
}

/* Runs the subject on ctx: WARMUP calls, then iters timed ones (each waited
   for). fuse false: vf_function_desc.unfused (one kernel per op, as
   VKFUSE_FUSION=0); a saved function gets that from a context made with
   VKFUSE_FUSION=0 instead. */
static bool run_variant(vf_context *ctx, const subject *sj, bool fuse, const opts *o, vf_trace_file *trace,
                        const char *label, vstat *v)
{
    memset(v, 0, sizeof *v);
    v->best_ns = INFINITY;
    vf_scope_begin(ctx);
    wl_data d;
    memset(&d, 0, sizeof d);
    vf_function *fn = NULL;
    vf_tensor *in[SC_MAX_IN] = {0}, *y[SC_MAX_IN] = {0};
    bool ok;
    if (sj->wl) {
        const workload *wl = sj->wl;
        ok = wl->make(ctx, &d, o->shrink) == VF_OK;
        if (ok)
            fn = vf_function_create(ctx, &(vf_function_desc){.name = wl->name, .body = wl->body, .user = d.cap,
                                                             .n_inputs = wl->n_in, .n_outputs = 1, .unfused = !fuse});
        memcpy(in, d.in, sizeof d.in);
    } else {
        int rc;
        fn = sc_load(ctx, "profile", sj->file, &rc);
        ok = fn && sc_make_tensors(ctx, "profile", sj->in, in);
    }
    ok = ok && fn;
    for (int i = 0; ok && i < WARMUP + o->iters; i++) {
        vf_scope_begin(ctx);
        double t0 = now_ns();
        ok = vf_function_call(fn, in, y) == VF_OK && vf_context_sync(ctx) == VF_OK;
        double t = now_ns() - t0;
        if (ok && i >= WARMUP) {
            v->wall_ns += t / o->iters;
            if (t < v->best_ns) v->best_ns = t;
            vf_function_profile p;
            ok = vf_function_profile_get(fn, &p) == VF_OK;
            if (ok && p.profiled) ok = take_profile(v, &p, i == WARMUP);
            if (ok && p.profiled && trace && i == WARMUP + o->iters - 1) {
                char track[128];
                snprintf(track, sizeof track, "%s call %lld", label, (long long)p.call);
                if (vf_trace_file_add(trace, track, &p) != VF_OK)
                    fprintf(stderr, "vkfuse profile: %s\n", vf_trace_file_error(trace));
            }
        }
        if (ok && i == WARMUP + o->iters - 1) ok = keep_outputs(ctx, y, sj->n_out, v);
        vf_scope_end(ctx);
    }
    if (ok) {
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        v->kernels = st.kernels;
        v->peak = st.peak_bytes;
        v->unplanned = st.unplanned_bytes;
        if (!v->k) v->dispatches = st.dispatches_per_call, v->planned = st.planned;
        v->gpu_ns /= o->iters;
        for (int i = 0; i < v->nk; i++) v->k[i].gpu_ns /= o->iters;
    } else {
        fprintf(stderr, "vkfuse profile %s (%s): %s\n", sj->name, label, vf_error_message(ctx));
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
    v->ok = ok;
    return ok;
}

static double max_diff(const vstat *a, const vstat *b)
{
    if (!a->ok || !b->ok || !a->out || !b->out || a->out_n != b->out_n) return NAN;
    double m = 0;
    for (int64_t i = 0; i < a->out_n; i++) {
        double d = fabs((double)a->out[i] - (double)b->out[i]);
        if (isnan(d)) return NAN;
        if (d > m) m = d;
    }
    return m;
}

static double ratio(double a, double b) { return b != 0 ? a / b : NAN; }

/* ---- printing -------------------------------------------------------------- */

static void jnum(double v)
{
    if (isfinite(v)) printf("%.6g", v);
    else printf("null");
}

static void print_variant_json(const vstat *v)
{
    if (!v->ok) {
        printf("null");
        return;
    }
    printf("{\"kernels\":%d,\"dispatches\":%d,\"barriers\":%d,\"bytes_read\":%lld,\"bytes_written\":%lld,"
           "\"gpu_us\":", v->kernels, v->dispatches, v->barriers, (long long)v->bytes_read, (long long)v->bytes_written);
    jnum(v->timestamps ? v->gpu_ns / 1e3 : NAN);
    printf(",\"wall_us\":");
    jnum(v->wall_ns / 1e3);
    printf(",\"best_wall_us\":");
    jnum(v->best_ns / 1e3);
    printf(",\"peak_bytes\":%lld,\"unplanned_bytes\":%lld,\"planned\":%s,\"timestamps\":%s,\"note\":",
           (long long)v->peak, (long long)v->unplanned, v->planned ? "true" : "false", v->timestamps ? "true" : "false");
    sc_jstr(v->note);
    printf(",\"kernel_list\":[");
    for (int i = 0; i < v->nk; i++) {
        const kstat *k = &v->k[i];
        printf("%s{\"name\":", i ? "," : "");
        sc_jstr(k->name);
        printf(",\"dispatches\":%d,\"barriers\":%d,\"gpu_us\":", k->dispatches, k->barriers);
        jnum(v->timestamps ? k->gpu_ns / 1e3 : NAN);
        printf(",\"bytes_read\":%lld,\"bytes_written\":%lld,\"nodes\":[", (long long)k->bytes_read,
               (long long)k->bytes_written);
        for (int j = 0; j < k->n_nodes; j++) printf("%s%d", j ? "," : "", k->nodes[j]);
        printf("],\"ops\":[");
        for (int j = 0; j < k->n_nodes; j++) {
            if (j) putchar(',');
            sc_jstr(k->ops[j]);
        }
        printf("]}");
    }
    printf("]}");
}

static void print_variant_text(const char *title, const vstat *v)
{
    printf("\n%s\n", title);
    if (!v->ok) {
        printf("  failed (see the message above)\n");
        return;
    }
    if (v->nk) {
        printf("  %3s %-44s %5s %5s %10s %6s %9s %9s  %s\n", "#", "kernel", "disp", "barr", "GPU us", "GPU %",
               "MB read", "MB write", "graph nodes");
        for (int i = 0; i < v->nk; i++) {
            const kstat *k = &v->k[i];
            char nodes[200] = "";
            size_t n = 0;
            for (int j = 0; j < k->n_nodes && n + 24 < sizeof nodes; j++)
                n += (size_t)snprintf(nodes + n, sizeof nodes - n, "%s%%%d %s", j ? ", " : "", k->nodes[j],
                                      k->ops[j]);
            if (k->n_nodes == 0) snprintf(nodes, sizeof nodes, "(none)");
            printf("  %3d %-44.44s %5d %5d %10.1f %6.1f %9.2f %9.2f  %s\n", i, k->name, k->dispatches, k->barriers,
                   k->gpu_ns / 1e3, v->gpu_ns > 0 ? 100.0 * k->gpu_ns / v->gpu_ns : 0.0, (double)k->bytes_read / 1e6,
                   (double)k->bytes_written / 1e6, nodes);
        }
    }
    printf("  total: %d kernels, %d dispatches, %d barriers, %.2f MB read, %.2f MB written\n", v->kernels,
           v->dispatches, v->barriers, (double)v->bytes_read / 1e6, (double)v->bytes_written / 1e6);
    if (v->timestamps) printf("         GPU %.3f ms/call, ", v->gpu_ns / 1e6);
    else printf("         GPU time n/a, ");
    printf("wall %.3f ms/call (best %.3f), peak %.2f MB (unplanned %.2f MB)\n", v->wall_ns / 1e6, v->best_ns / 1e6,
           (double)v->peak / 1e6, (double)v->unplanned / 1e6);
    if (v->note[0]) printf("  note: %s\n", v->note);
}

typedef struct result {
    subject sj;
    vstat fu, un, cpu;
    bool have_cpu;
    char cpu_skipped[512];        /* why the CPU backend did not run, "" when it did or --no-cpu */
} result;

static void print_json(const result *r, const char *device, const opts *o)
{
    const vstat *f = &r->fu, *u = &r->un;
    printf("{\"workload\":");
    sc_jstr(r->sj.name);
    printf(",\"summary\":");
    sc_jstr(r->sj.summary);
    if (r->sj.file) {
        printf(",\"file\":");
        sc_jstr(r->sj.file);
    }
    printf(",\"cpu_skipped\":");
    if (r->cpu_skipped[0]) sc_jstr(r->cpu_skipped);
    else printf("null");
    printf(",\"device\":");
    sc_jstr(device);
    printf(",\"iters\":%d,\"warmup\":%d,\"shrink\":%d,\"fused\":", o->iters, WARMUP, o->shrink);
    print_variant_json(f);
    printf(",\"unfused\":");
    print_variant_json(u);
    printf(",\"cpu\":");
    if (r->have_cpu && r->cpu.ok) {
        printf("{\"wall_us\":");
        jnum(r->cpu.wall_ns / 1e3);
        printf(",\"best_wall_us\":");
        jnum(r->cpu.best_ns / 1e3);
        printf("}");
    } else {
        printf("null");
    }
    bool both = f->ok && u->ok;
    printf(",\"ratios\":{\"kernels\":");
    jnum(both ? ratio(f->kernels, u->kernels) : NAN);
    printf(",\"dispatches\":");
    jnum(both ? ratio(f->dispatches, u->dispatches) : NAN);
    printf(",\"barriers\":");
    jnum(both ? ratio(f->barriers, u->barriers) : NAN);
    printf(",\"bytes_read\":");
    jnum(both ? ratio((double)f->bytes_read, (double)u->bytes_read) : NAN);
    printf(",\"bytes_written\":");
    jnum(both ? ratio((double)f->bytes_written, (double)u->bytes_written) : NAN);
    printf(",\"gpu_time\":");
    jnum(both && f->timestamps && u->timestamps ? ratio(f->gpu_ns, u->gpu_ns) : NAN);
    printf(",\"wall_time\":");
    jnum(both ? ratio(f->best_ns, u->best_ns) : NAN);
    printf(",\"peak_bytes\":");
    jnum(both ? ratio((double)f->peak, (double)u->peak) : NAN);
    printf(",\"fused_peak_over_unplanned\":");
    jnum(f->ok ? ratio((double)f->peak, (double)f->unplanned) : NAN);
    printf(",\"speedup_over_unfused\":");
    jnum(both ? ratio(u->best_ns, f->best_ns) : NAN);
    printf(",\"speedup_over_cpu\":");
    jnum(f->ok && r->have_cpu && r->cpu.ok ? ratio(r->cpu.best_ns, f->best_ns) : NAN);
    printf("},\"max_abs_diff\":{\"fused_vs_unfused\":");
    jnum(max_diff(f, u));
    printf(",\"fused_vs_cpu\":");
    jnum(r->have_cpu ? max_diff(f, &r->cpu) : NAN);
    printf(",\"unfused_vs_cpu\":");
    jnum(r->have_cpu ? max_diff(u, &r->cpu) : NAN);
    printf("}}");
}

static void print_text(const result *r, const char *device, const opts *o)
{
    const vstat *f = &r->fu, *u = &r->un;
    printf("== vkfuse profile %s: %s\n", r->sj.name, r->sj.summary);
    if (o->shrink > 1) printf("leading dimension divided by %d (--shrink)\n", o->shrink);
    printf("device: %s; %d timed calls after %d warm-up calls, each waited for\n", device, o->iters, WARMUP);
    print_variant_text("fused (vulkan)", f);
    print_variant_text(r->sj.file ? "unfused (vulkan, one kernel per op: VKFUSE_FUSION=0)"
                                  : "unfused (vulkan, one kernel per op: vf_function_desc.unfused)", u);
    if (r->cpu_skipped[0]) printf("\ncpu backend: not run: %s\n", r->cpu_skipped);
    if (r->have_cpu) {
        if (r->cpu.ok) printf("\ncpu backend: wall %.3f ms/call (best %.3f)\n", r->cpu.wall_ns / 1e6, r->cpu.best_ns / 1e6);
        else printf("\ncpu backend: failed (see the message above)\n");
    }
    if (f->ok && u->ok) {
        printf("\nfused/unfused: kernels %d/%d, dispatches %d/%d, barriers %d/%d, bytes read %.3f, written %.3f, "
               "peak memory %.3f\n", f->kernels, u->kernels, f->dispatches, u->dispatches, f->barriers, u->barriers,
               ratio((double)f->bytes_read, (double)u->bytes_read),
               ratio((double)f->bytes_written, (double)u->bytes_written), ratio((double)f->peak, (double)u->peak));
        if (f->timestamps && u->timestamps)
            printf("               GPU time %.3f (speedup %.2fx), ", ratio(f->gpu_ns, u->gpu_ns), ratio(u->gpu_ns, f->gpu_ns));
        else
            printf("               GPU time n/a, ");
        printf("wall time (best) %.3f (speedup %.2fx)\n", ratio(f->best_ns, u->best_ns), ratio(u->best_ns, f->best_ns));
    }
    if (f->ok)
        printf("fused peak memory / unplanned: %.3f (%.1f%% below)\n", ratio((double)f->peak, (double)f->unplanned),
               100.0 * (1.0 - ratio((double)f->peak, (double)f->unplanned)));
    if (f->ok && r->have_cpu && r->cpu.ok)
        printf("cpu backend / fused vulkan wall time (best): %.2f (above 1: fused vulkan is faster)\n",
               ratio(r->cpu.best_ns, f->best_ns));
    printf("max |difference| of the output: fused-unfused %.3g", max_diff(f, u));
    if (r->have_cpu) printf(", fused-cpu %.3g, unfused-cpu %.3g", max_diff(f, &r->cpu), max_diff(u, &r->cpu));
    printf("\n");
}

static void print_summary(const result *rs, int n)
{
    printf("\n== summary (wall time per call, best of the timed calls)\n");
    printf("%-13s %9s %11s %11s %11s %9s %9s %9s\n", "workload", "kernels", "fused ms", "unfused ms", "cpu ms",
           "unf/fused", "cpu/fused", "peak/unpl");
    for (int i = 0; i < n; i++) {
        const result *r = &rs[i];
        char k[24];
        snprintf(k, sizeof k, "%d/%d", r->fu.kernels, r->un.kernels);
        printf("%-13s %9s %11.3f %11.3f %11.3f %9.2f %9.2f %9.3f\n", r->sj.name, k, r->fu.best_ns / 1e6,
               r->un.best_ns / 1e6, r->have_cpu && r->cpu.ok ? r->cpu.best_ns / 1e6 : NAN,
               ratio(r->un.best_ns, r->fu.best_ns), r->have_cpu && r->cpu.ok ? ratio(r->cpu.best_ns, r->fu.best_ns) : NAN,
               ratio((double)r->fu.peak, (double)r->fu.unplanned));
    }
}

/* ---- the command -------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: vkfuse profile WORKLOAD|all [--iters N] [--shrink N] [--json] [--trace FILE] [--no-cpu]\n"
               "       vkfuse profile FILE --in A.npy [--in B.npy ...] [--iters N] [--json] [--trace T] [--no-cpu]\n"
               "       vkfuse profile --list\n\n"
               "Runs a built-in workload as a traced function, or a saved function (vf_function_save)\n"
               "on .npy inputs (one --in per input, in order, as `vkfuse run` takes them), fused and\n"
               "unfused (one kernel per op, as VKFUSE_FUSION=0 gives) on Vulkan with profiling on, and\n"
               "on the CPU backend, in one run.\n"
               "Prints per kernel and in total: kernels, dispatches, barriers, bytes read and written,\n"
               "GPU time (timestamp queries), wall time per call, peak memory, and the ratios.\n\n"
               "  --iters N     timed calls per run after %d warm-up calls (default 10)\n"
               "  --shrink N    divide the workload's leading dimension (elements, rows or batch)\n"
               "                by N, 1 to %d (default 1: the sizes --list shows)\n"
               "  --json        print one JSON object instead of tables ({\"workloads\": [...]} for all)\n"
               "  --trace FILE  write a Chrome / Perfetto trace of the last call of each run\n"
               "                (open it in ui.perfetto.dev)\n"
               "  --no-cpu      skip the CPU backend run\n"
               "  --list        list the workloads\n\n"
               "Exit codes: 0 done, 1 a run failed, 2 bad arguments, 3 (FILE) a file cannot be read,\n"
               "is not valid or does not fit the signature. See docs/PROFILING.md and docs/CLI.md.\n",
               WARMUP, WL_MAX_SHRINK);
}

/* Whether the trace file can be written: opened for appending (so an
   existing file is left as it is) and removed again if it was not there. */
static bool writable(const char *path)
{
    struct stat st;
    bool existed = stat(path, &st) == 0;
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "vkfuse profile: --trace %s: cannot write it: %s\n", path, strerror(errno));
        return false;
    }
    fclose(f);
    if (!existed) remove(path);
    return true;
}

static int list(void)
{
    for (int i = 0; i < vf_n_workloads; i++) printf("%-13s %s\n", vf_workloads[i].name, vf_workloads[i].summary);
    return 0;
}

static vf_context *make_context(vf_backend be, bool profile)
{
    vf_context *ctx = NULL;
    vf_context_desc d = {.backend = be, .profile = profile};
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "vkfuse profile: cannot create a %s context: %s\n", be == VF_BACKEND_CPU ? "CPU" : "Vulkan",
                vf_last_error());
        vf_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}

/* The subject for a saved function: its inputs checked against its
   signatures (on ctx), and whether the CPU backend can run it. */
static int saved_subject(vf_context *ctx, const char *file, const sc_inputs *in, subject *sj, char *summary,
                         size_t len, char *cpu_skip, size_t skip_len)
{
    int rc = SC_OK;
    vf_function *fn = sc_load(ctx, "profile", file, &rc);
    vf_function_info *info = fn ? vf_function_info_get(fn) : NULL;
    if (fn && !info) {
        fprintf(stderr, "vkfuse profile: %s\n", vf_error_message(ctx));
        rc = SC_RUN_FAILED;
    }
    if (info && !sc_check_inputs("profile", file, info, in)) rc = SC_BAD_FILE;
    if (info && rc == SC_OK && info->n_outputs > SC_MAX_IN) {
        fprintf(stderr, "vkfuse profile: %s has %d outputs; this command takes at most %d\n", file, info->n_outputs,
                SC_MAX_IN);
        rc = SC_RUN_FAILED;
    }
    if (info && rc == SC_OK) {
        *sj = (subject){.name = file, .summary = summary, .file = file, .in = in, .n_out = info->n_outputs};
        snprintf(summary, len, "saved function '%s' (%d input%s, %d output%s)", info->name, info->n_inputs,
                 info->n_inputs == 1 ? "" : "s", info->n_outputs, info->n_outputs == 1 ? "" : "s");
        size_t n = 0;
        for (int i = 0; i < info->n_user_ops && n < skip_len; i++)
            if (!info->user_ops[i].have_c)
                n += (size_t)snprintf(cpu_skip + n, skip_len - n, "%s%s '%s'", n ? ", " : "it needs ",
                                      info->user_ops[i].kernel ? "user kernel" : "user elementwise op",
                                      info->user_ops[i].name);
        if (n && n < skip_len)
            snprintf(cpu_skip + n, skip_len - n, ", which this process has not created (their C functions are the "
                     "saving program's): Vulkan only");
    }
    vf_free(info);
    vf_function_destroy(fn);
    return rc;
}

int cmd_profile(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    opts o = {.iters = 10, .shrink = 1, .cpu = true};
    const char *name = NULL;
    bool shrink_given = false;
    sc_inputs in = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--list")) return list();
        if (!strcmp(a, "--json")) o.json = true;
        else if (!strcmp(a, "--no-cpu")) o.cpu = false;
        else if (!strcmp(a, "--iters") || !strcmp(a, "--shrink") || !strcmp(a, "--trace") || !strcmp(a, "--in")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vkfuse profile: %s needs a value (try --help)\n", a);
                return 2;
            }
            const char *val = argv[++i];
            if (!strcmp(a, "--trace")) {
                o.trace = val;
                continue;
            }
            if (!strcmp(a, "--in")) {
                if (in.n == SC_MAX_IN) {
                    fprintf(stderr, "vkfuse profile: more than %d --in files\n", SC_MAX_IN);
                    return 2;
                }
                in.path[in.n++] = val;
                continue;
            }
            char *end;
            long n = strtol(val, &end, 10);
            if (!strcmp(a, "--shrink")) {
                if (*end || end == val || n < 1 || n > WL_MAX_SHRINK) {
                    fprintf(stderr, "vkfuse profile: --shrink %s: give a whole number from 1 to %d\n", val,
                            WL_MAX_SHRINK);
                    return 2;
                }
                o.shrink = (int)n;
                shrink_given = true;
                continue;
            }
            if (*end || end == val || n < 1 || n > 100000) {
                fprintf(stderr, "vkfuse profile: --iters %s: give a whole number from 1 to 100000\n", val);
                return 2;
            }
            o.iters = (int)n;
        } else if (a[0] == '-') {
            fprintf(stderr, "vkfuse profile: unknown option '%s' (try --help)\n", a);
            return 2;
        } else if (name) {
            fprintf(stderr, "vkfuse profile: one workload or file at a time ('%s' and '%s'); use 'all' for every "
                    "workload\n", name, a);
            return 2;
        } else {
            name = a;
        }
    }
    if (!name) {
        fprintf(stderr, "vkfuse profile: which workload or saved file? (vkfuse profile --list)\n");
        return 2;
    }
    /* a saved file: a path that exists, or any name given --in files */
    struct stat st;
    bool file = in.n > 0 || (stat(name, &st) == 0 && S_ISREG(st.st_mode));
    const workload *one = !file && strcmp(name, "all") ? wl_find(name) : NULL;
    if (file && shrink_given) {
        fprintf(stderr, "vkfuse profile: --shrink is for the built-in workloads; a saved function runs at the sizes of "
                "its --in files\n");
        return 2;
    }
    if (!file && !one && strcmp(name, "all")) {
        fprintf(stderr, "vkfuse profile: unknown workload '%s' (and no such file); the workloads are:", name);
        for (int i = 0; i < vf_n_workloads; i++) fprintf(stderr, " %s", vf_workloads[i].name);
        fprintf(stderr, " (or all)\n");
        return 2;
    }
    if (o.trace && !writable(o.trace)) return 2; /* before minutes of profiling, not after */
    if (file && !sc_read_inputs("profile", &in)) {
        sc_free_inputs(&in);
        return SC_BAD_FILE;
    }
    vf_context *vk = make_context(VF_BACKEND_VULKAN, true), *cpu = o.cpu ? make_context(VF_BACKEND_CPU, false) : NULL;
    /* a loaded function has no vf_function_desc: its unfused run is a context made with VKFUSE_FUSION=0 */
    vf_context *vk_un = file && vk ? sc_context("profile", "vulkan", NULL, true, true, false) : NULL;
    if (!vk || (o.cpu && !cpu) || (file && !vk_un)) {
        vf_context_destroy(vk);
        vf_context_destroy(vk_un);
        vf_context_destroy(cpu);
        sc_free_inputs(&in);
        return 1;
    }
    vf_trace_file *trace = o.trace ? vf_trace_file_create() : NULL;
    int n = one || file ? 1 : vf_n_workloads, rc = 0;
    result *rs = calloc((size_t)n, sizeof *rs);
    static char summary[300];
    if (!rs || (o.trace && !trace)) {
        fprintf(stderr, "vkfuse profile: out of host memory\n");
        rc = 1;
        n = 0;
    } else if (file) {
        rc = saved_subject(vk, name, &in, &rs[0].sj, summary, sizeof summary, rs[0].cpu_skipped,
                           sizeof rs[0].cpu_skipped);
        if (rc) n = 0;
    }
    const char *device = vf_device_name(vk);
    if (o.json && !one && !file && n) printf("{\"workloads\":[");
    for (int i = 0; i < n; i++) {
        result *r = &rs[i];
        if (!file) {
            r->sj.wl = one ? one : &vf_workloads[i];
            r->sj.name = r->sj.wl->name;
            r->sj.summary = r->sj.wl->summary;
            r->sj.n_out = 1;
        }
        char label[96];
        int saved = sc_prints_to_stderr(); /* a saved function's vf_print is not the report */
        snprintf(label, sizeof label, "%s fused", r->sj.name);
        bool ok = run_variant(vk, &r->sj, true, &o, trace, label, &r->fu);
        snprintf(label, sizeof label, "%s unfused", r->sj.name);
        ok = run_variant(file ? vk_un : vk, &r->sj, false, &o, trace, label, &r->un) && ok;
        if (cpu && !r->cpu_skipped[0]) {
            r->have_cpu = true;
            ok = run_variant(cpu, &r->sj, true, &o, NULL, "cpu", &r->cpu) && ok;
        }
        sc_prints_restore(saved);
        if (!ok) rc = 1;
        if (o.json) {
            if (i) printf(",");
            print_json(r, device, &o);
            printf("\n");
        } else {
            print_text(r, device, &o);
        }
        fflush(stdout);
    }
    if (o.json && !one && !file && n) printf("]}\n");
    if (!o.json && !one && !file && n) print_summary(rs, n);
    if (trace && rc == 0) {
        if (vf_trace_file_write(trace, o.trace) != VF_OK) {
            fprintf(stderr, "vkfuse profile: %s\n", vf_trace_file_error(trace));
            rc = 1;
        } else if (!o.json) {
            printf("\ntrace written to %s (open it in ui.perfetto.dev)\n", o.trace);
        }
    }
    for (int i = 0; i < n; i++) vstat_free(&rs[i].fu), vstat_free(&rs[i].un), vstat_free(&rs[i].cpu);
    free(rs);
    vf_trace_file_destroy(trace);
    vf_context_destroy(cpu);
    vf_context_destroy(vk_un);
    vf_context_destroy(vk);
    sc_free_inputs(&in);
    return rc;
}
