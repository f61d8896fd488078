/* vkfuse run FILE --in A.npy ... --out DIR: runs a saved function on
 * NumPy inputs (positional order) and writes DIR/out0.npy, out1.npy, ...;
 * --check runs it under VKFUSE_CHECK and again on the CPU backend and
 * reports the largest difference per output; --save-variables FILE saves
 * the function again with its variables' values after the call (the file
 * to run for the next step of a saved train step) and writes them as
 * DIR/var0.npy, .... */
#include "cli.h"
#include "saved_cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct run_opts {
    const char *file, *out, *backend, *device, *save_vars;
    bool check;
    double tol;
    sc_inputs in;
} run_opts;

typedef struct outputs {
    int n;
    vf_dtype dt[SC_MAX_IN];
    int rank[SC_MAX_IN];
    int64_t shape[SC_MAX_IN][VF_MAX_RANK];
    void *data[SC_MAX_IN];
} outputs;

static void outputs_free(outputs *o)
{
    for (int i = 0; i < o->n; i++) free(o->data[i]);
    memset(o, 0, sizeof *o);
}

/* Loads and calls the function in ctx; outputs read back into *res. */
static int call_once(vf_context *ctx, const run_opts *o, const char *label, vf_function **fn_out, outputs *res)
{
    int rc = SC_OK;
    vf_function *fn = sc_load(ctx, "run", o->file, &rc);
    if (!fn) return rc;
    vf_function_info *info = vf_function_info_get(fn);
    if (!info) {
        fprintf(stderr, "vkfuse run: %s\n", vf_error_message(ctx));
        vf_function_destroy(fn);
        return SC_RUN_FAILED;
    }
    if (!sc_check_inputs("run", o->file, info, &o->in)) rc = SC_BAD_FILE;
    else if (info->n_outputs > SC_MAX_IN) {
        fprintf(stderr, "vkfuse run: %s has %d outputs; this command writes at most %d\n", o->file, info->n_outputs, SC_MAX_IN);
        rc = SC_RUN_FAILED;
    }
    int n_out = info->n_outputs;
    if (rc == SC_OK && vf_backend_get(ctx) == VF_BACKEND_CPU && sc_missing_user_ops(info, NULL, "")) {
        fprintf(stderr, "vkfuse run: %s cannot run on the CPU backend (%s): it needs\n", o->file, label);
        sc_missing_user_ops(info, stderr, "  ");
        fprintf(stderr, "  run it with --backend vulkan\n");
        rc = SC_RUN_FAILED;
    }
    vf_free(info);
    if (rc != SC_OK) {
        vf_function_destroy(fn);
        return rc;
    }
    vf_scope_begin(ctx);
    vf_tensor *in[SC_MAX_IN] = {0}, *out[SC_MAX_IN] = {0};
    bool ok = sc_make_tensors(ctx, "run", &o->in, in);
    if (ok && (vf_function_call(fn, in, out) != VF_OK || vf_context_sync(ctx) != VF_OK)) {
        fprintf(stderr, "vkfuse run: %s on %s: %s\n", o->file, label, vf_error_message(ctx));
        ok = false;
    }
    for (int i = 0; ok && i < n_out; i++) {
        size_t bytes;
        res->dt[i] = vf_tensor_dtype(out[i]);
        res->rank[i] = vf_tensor_rank(out[i]);
        for (int d = 0; d < res->rank[i]; d++) res->shape[i][d] = vf_tensor_dim(out[i], d);
        ok = (res->data[i] = sc_read_tensor(ctx, "run", out[i], &bytes)) != NULL;
        res->n = i + 1;
    }
    vf_scope_end(ctx);
    if (!ok) {
        outputs_free(res);
        vf_function_destroy(fn);
        return SC_RUN_FAILED;
    }
    if (fn_out) *fn_out = fn;
    else vf_function_destroy(fn);
    return SC_OK;
}

static bool make_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return true;
        fprintf(stderr, "vkfuse run: --out %s is not a directory\n", dir);
        return false;
    }
    if (mkdir(dir, 0777) == 0) return true;
    fprintf(stderr, "vkfuse run: --out %s: cannot make the directory: %s\n", dir, strerror(errno));
    return false;
}

static int write_outputs(const char *dir, const outputs *r)
{
    char path[4096], msg[600];
    for (int i = 0; i < r->n; i++) {
        snprintf(path, sizeof path, "%s/out%d.npy", dir, i);
        if (!npy_write(path, r->dt[i], r->rank[i], r->shape[i], r->data[i], msg, sizeof msg)) {
            fprintf(stderr, "vkfuse run: %s\n", msg);
            return SC_BAD_FILE;
        }
    }
    return SC_OK;
}

/* Variables after the call: the function saved again (the next step's
   file), written first to a temporary so that FILE may be the input. */
static int save_variables(vf_context *ctx, vf_function *fn, const run_opts *o)
{
    char tmp[4096], path[4096], msg[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", o->save_vars);
    if (vf_function_save(fn, tmp) != VF_OK || rename(tmp, o->save_vars) != 0) {
        fprintf(stderr, "vkfuse run: --save-variables %s: %s\n", o->save_vars,
                vf_status_get(ctx) != VF_OK ? vf_error_message(ctx) : strerror(errno));
        remove(tmp);
        return SC_BAD_FILE;
    }
    int nv = vf_function_variable_count(fn);
    for (int i = 0; i < nv; i++) {
        vf_tensor *v = vf_function_variable(fn, i);
        int64_t shape[VF_MAX_RANK];
        for (int d = 0; d < vf_tensor_rank(v); d++) shape[d] = vf_tensor_dim(v, d);
        size_t bytes;
        void *data = sc_read_tensor(ctx, "run", v, &bytes);
        if (!data) return SC_RUN_FAILED;
        snprintf(path, sizeof path, "%s/var%d.npy", o->out, i);
        bool ok = npy_write(path, vf_tensor_dtype(v), vf_tensor_rank(v), shape, data, msg, sizeof msg);
        free(data);
        if (!ok) {
            fprintf(stderr, "vkfuse run: %s\n", msg);
            return SC_BAD_FILE;
        }
    }
    return SC_OK;
}

/* The largest |difference| of every output from the CPU backend's. */
static int compare(const outputs *dev, const outputs *cpu, double tol)
{
    int rc = SC_OK;
    printf("check: largest |difference| from the CPU backend (tolerance %g * (1 + |cpu|)):\n", tol);
    for (int i = 0; i < dev->n && i < cpu->n; i++) {
        int64_t n = 1;
        for (int d = 0; d < dev->rank[i]; d++) n *= dev->shape[i][d];
        double worst = 0;
        bool bad = false;
        for (int64_t k = 0; k < n; k++) {
            double a = sc_value(dev->dt[i], dev->data[i], k), b = sc_value(cpu->dt[i], cpu->data[i], k);
            double d = fabs(a - b);
            if (isnan(a) != isnan(b)) d = INFINITY;
            else if (isnan(a) || a == b) d = 0;
            if (d > worst) worst = d;
            if (d > tol * (1 + fabs(b))) bad = true;
        }
        printf("  out%d: %.3g%s\n", i, worst, bad ? "  (beyond the tolerance)" : "");
        if (bad) rc = SC_MISMATCH;
    }
    return rc;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vkfuse run FILE --in A.npy [--in B.npy ...] --out DIR [--backend cpu|vulkan|auto]\n"
               "                  [--device NAME] [--check [--tol X]] [--save-variables FILE2]\n\n"
               "Runs a saved function (vf_function_save) on NumPy .npy inputs, one --in per input\n"
               "in order (float32, float16, int32, uint32 or bool; C or Fortran order; any shape\n"
               "its signature accepts), and writes DIR/out0.npy, DIR/out1.npy, ... (DIR is made\n"
               "if missing).\n\n"
               "  --backend B          cpu, vulkan or auto (default: auto, as VKFUSE_BACKEND)\n"
               "  --device NAME        a Vulkan device by index or name (as VKFUSE_DEVICE)\n"
               "  --check              run under VKFUSE_CHECK (every kernel against the CPU backend)\n"
               "                       and again on the CPU backend; print each output's largest\n"
               "                       |difference|\n"
               "  --tol X              --check fails past X * (1 + |cpu value|) (default 1e-3)\n"
               "  --save-variables F2  after the call, save the function with its variables' new\n"
               "                       values to F2 (may be FILE: run it again for the next step)\n"
               "                       and write them as DIR/var0.npy, ...\n\n"
               "Exit codes: 0 done, 1 the run failed, 2 bad arguments, 3 a file cannot be read,\n"
               "is not valid, does not fit the signature or cannot be written, 4 --check found\n"
               "a difference past --tol. See docs/CLI.md.\n");
}

static int parse(int argc, char **argv, run_opts *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--check")) {
            o->check = true;
            continue;
        }
        if (a[0] != '-') {
            if (o->file) {
                fprintf(stderr, "vkfuse run: one saved file at a time ('%s' and '%s'); inputs take --in\n", o->file, a);
                return SC_USAGE;
            }
            o->file = a;
            continue;
        }
        static const char *const valued[] = {"--in", "--out", "--backend", "--device", "--save-variables", "--tol"};
        int k = 0;
        while (k < 6 && strcmp(a, valued[k])) k++;
        if (k == 6) {
            fprintf(stderr, "vkfuse run: unknown option '%s' (try --help)\n", a);
            return SC_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "vkfuse run: %s needs a value (try --help)\n", a);
            return SC_USAGE;
        }
        const char *v = argv[++i];
        if (k == 0) {
            if (o->in.n == SC_MAX_IN) {
                fprintf(stderr, "vkfuse run: more than %d --in files\n", SC_MAX_IN);
                return SC_USAGE;
            }
            o->in.path[o->in.n++] = v;
        } else if (k == 5) {
            char *end;
            o->tol = strtod(v, &end);
            if (*end || end == v || !(o->tol >= 0)) {
                fprintf(stderr, "vkfuse run: --tol %s: give a number >= 0\n", v);
                return SC_USAGE;
            }
        } else {
            *(k == 1 ? &o->out : k == 2 ? &o->backend : k == 3 ? &o->device : &o->save_vars) = v;
        }
    }
    if (!o->file || !o->out) {
        fprintf(stderr, "vkfuse run: %s (vkfuse run FILE --in A.npy ... --out DIR; try --help)\n",
                !o->file ? "which saved file?" : "--out DIR is needed");
        return SC_USAGE;
    }
    return sc_backend_ok("run", o->backend) ? SC_OK : SC_USAGE;
}

int cmd_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return SC_OK;
    }
    run_opts o = {.tol = 1e-3};
    int rc = parse(argc, argv, &o);
    if (rc != SC_OK) return rc;
    if (!sc_read_inputs("run", &o.in)) {
        sc_free_inputs(&o.in);
        return SC_BAD_FILE;
    }
    /* --check replays every kernel on the CPU backend and runs the function there
       too: a function with user ops this process lacks cannot be checked */
    bool check = o.check, uncheckable = false;
    vf_context *cpu = check ? sc_context("run --check", "cpu", NULL, false, false, false) : NULL;
    if (check && !cpu) rc = SC_RUN_FAILED;
    if (cpu) {
        vf_function *probe = sc_load(cpu, "run", o.file, &rc);
        vf_function_info *info = probe ? vf_function_info_get(probe) : NULL;
        if (info && sc_missing_user_ops(info, NULL, "")) {
            fprintf(stderr, "vkfuse run: --check: %s cannot run on the CPU backend, so it cannot be checked; it needs\n",
                    o.file);
            sc_missing_user_ops(info, stderr, "  ");
            uncheckable = true;
        }
        vf_free(info);
        vf_function_destroy(probe);
    }
    vf_context *ctx = rc == SC_OK ? sc_context("run", o.backend, o.device, false, false, check && !uncheckable) : NULL;
    vf_function *fn = NULL;
    outputs res = {0}, ref = {0};
    if (rc == SC_OK) rc = ctx ? call_once(ctx, &o, vf_device_name(ctx), &fn, &res) : SC_RUN_FAILED;
    if (rc == SC_OK) rc = make_dir(o.out) ? write_outputs(o.out, &res) : SC_BAD_FILE;
    if (rc == SC_OK && o.save_vars) rc = save_variables(ctx, fn, &o);
    if (rc == SC_OK) printf("wrote %d output%s to %s (%s)\n", res.n, res.n == 1 ? "" : "s", o.out, vf_device_name(ctx));
    if (rc == SC_OK && check) {
        if (uncheckable) {
            fprintf(stderr, "vkfuse run: --check: not checked (the outputs are written)\n");
            rc = SC_RUN_FAILED;
        } else if (vf_backend_get(ctx) == VF_BACKEND_CPU) {
            printf("check: the function ran on the CPU backend itself; nothing to compare\n");
        } else {
            rc = call_once(cpu, &o, "the CPU backend (--check)", NULL, &ref);
            if (rc == SC_OK) rc = compare(&res, &ref, o.tol);
        }
    }
    vf_context_destroy(cpu);
    outputs_free(&res);
    outputs_free(&ref);
    vf_function_destroy(fn);
    vf_context_destroy(ctx);
    sc_free_inputs(&o.in);
    return rc;
}
