/* vkfuse saved show FILE: what a saved function holds (format version,
 * each concrete function's inputs and outputs, node counts by op,
 * captures, variables, the user kernels and elementwise ops it needs and
 * whether this process has them) and, after one call per concrete
 * function on zero-filled inputs at its traced sizes, kernels and
 * dispatches per call on the chosen device. --json: one JSON object. */
#include "cli.h"
#include "saved_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct percall {
    bool ran;
    int kernels, dispatches, barriers;
    bool planned;
    char why[512];
} percall;

typedef struct show_opts {
    const char *file, *backend, *device;
    bool json, run;
} show_opts;

/* One call of concrete function c on zeros at its traced sizes. */
static void measure(vf_context *ctx, vf_function *fn, const vf_concrete_info *c, percall *pc)
{
    vf_scope_begin(ctx);
    vf_tensor *in[SC_MAX_IN] = {0}, **out = calloc((size_t)c->n_outputs + 1, sizeof *out);
    bool ok = out != NULL && c->n_inputs <= SC_MAX_IN;
    for (int j = 0; ok && j < c->n_inputs; j++)
        ok = (in[j] = vf_fill(ctx, c->inputs[j].dtype, c->inputs[j].rank, &c->traced_inputs[j * VF_MAX_RANK], 0)) != NULL;
    ok = ok && vf_function_call(fn, in, out) == VF_OK && vf_context_sync(ctx) == VF_OK;
    vf_function_stats st;
    if (ok && vf_function_stats_get(fn, &st) == VF_OK) {
        pc->ran = true;
        pc->kernels = st.kernels;
        pc->dispatches = st.dispatches_per_call;
        pc->barriers = st.barriers_per_call;
        pc->planned = st.planned;
    } else {
        snprintf(pc->why, sizeof pc->why, "%s", !out ? "out of host memory" : c->n_inputs > SC_MAX_IN ?
                 "more than 64 inputs" : vf_error_message(ctx));
        vf_error_clear(ctx);
    }
    free(out);
    vf_scope_end(ctx);
}

static void jspec(const vf_tensor_spec *s)
{
    printf("{\"dtype\":\"%s\",\"shape\":[", vf_dtype_name(s->dtype));
    for (int d = 0; d < s->rank; d++) printf("%s%lld", d ? "," : "", (long long)s->shape[d]);
    printf("]}");
}

static void print_json(const show_opts *o, uint32_t version, const char *device, const vf_function_info *info,
                       const percall *pc, vf_function *fn)
{
    printf("{\"file\":");
    sc_jstr(o->file);
    printf(",\"format_version\":%u,\"name\":", version);
    sc_jstr(info->name);
    printf(",\"device\":");
    sc_jstr(device);
    printf(",\"n_inputs\":%d,\"n_outputs\":%d,\"input_signature\":", info->n_inputs, info->n_outputs);
    if (info->has_signature) {
        printf("[");
        for (int j = 0; j < info->n_inputs; j++) printf("%s", j ? "," : ""), jspec(&info->signature[j]);
        printf("]");
    } else {
        printf("null");
    }
    printf(",\"concrete\":[");
    for (int c = 0; c < info->n_concrete; c++) {
        const vf_concrete_info *ci = &info->concrete[c];
        printf("%s{\"inputs\":[", c ? "," : "");
        for (int j = 0; j < ci->n_inputs; j++) printf("%s", j ? "," : ""), jspec(&ci->inputs[j]);
        printf("],\"traced_inputs\":[");
        for (int j = 0; j < ci->n_inputs; j++) {
            printf("%s[", j ? "," : "");
            for (int d = 0; d < ci->inputs[j].rank; d++)
                printf("%s%lld", d ? "," : "", (long long)ci->traced_inputs[j * VF_MAX_RANK + d]);
            printf("]");
        }
        printf("],\"outputs\":[");
        for (int j = 0; j < ci->n_outputs; j++) printf("%s", j ? "," : ""), jspec(&ci->outputs[j]);
        printf("],\"nodes\":%d,\"ops\":{", ci->n_nodes);
        for (int k = 0; k < ci->n_ops; k++) {
            printf("%s", k ? "," : "");
            sc_jstr(ci->ops[k].op);
            printf(":%d", ci->ops[k].count);
        }
        printf("},\"captures\":%d,\"variables\":%d,\"per_call\":", ci->n_captures, ci->n_variables);
        if (!o->run) {
            printf("null");
        } else if (pc[c].ran) {
            printf("{\"kernels\":%d,\"dispatches\":%d,\"barriers\":%d,\"planned\":%s}", pc[c].kernels,
                   pc[c].dispatches, pc[c].barriers, pc[c].planned ? "true" : "false");
        } else {
            printf("{\"error\":");
            sc_jstr(pc[c].why);
            printf("}");
        }
        printf("}");
    }
    printf("],\"variables\":[");
    int nv = vf_function_variable_count(fn);
    for (int i = 0; i < nv; i++) {
        vf_tensor *v = vf_function_variable(fn, i);
        vf_tensor_spec s = {.dtype = vf_tensor_dtype(v), .rank = vf_tensor_rank(v)};
        for (int d = 0; d < s.rank; d++) s.shape[d] = vf_tensor_dim(v, d);
        printf("%s{\"name\":\"var%d\",\"dtype\":\"%s\",\"shape\":[", i ? "," : "", i, vf_dtype_name(s.dtype));
        for (int d = 0; d < s.rank; d++) printf("%s%lld", d ? "," : "", (long long)s.shape[d]);
        printf("],\"bytes\":%lld}", (long long)vf_tensor_numel(v) * (long long)vf_dtype_size(s.dtype));
    }
    printf("],\"user_ops\":[");
    for (int i = 0; i < info->n_user_ops; i++) {
        const vf_user_op_info *u = &info->user_ops[i];
        printf("%s{\"name\":", i ? "," : "");
        sc_jstr(u->name);
        printf(",\"kind\":\"%s\",\"in_this_process\":%s}", u->kernel ? "kernel" : "elementwise",
               u->have_c ? "true" : "false");
    }
    printf("]}\n");
}

static void print_text(const show_opts *o, uint32_t version, const char *device, const vf_function_info *info,
                       const percall *pc, vf_function *fn)
{
    char s[200];
    printf("file: %s (format version %u)\n", o->file, version);
    printf("function '%s': %d input%s, %d output%s; input_signature: ", info->name, info->n_inputs,
           info->n_inputs == 1 ? "" : "s", info->n_outputs, info->n_outputs == 1 ? "" : "s");
    if (info->has_signature) {
        printf("(");
        for (int j = 0; j < info->n_inputs; j++) printf("%s%s", j ? ", " : "", sc_spec_str(s, sizeof s, &info->signature[j]));
        printf(")  (-1: any size)\n");
    } else {
        printf("none (each concrete function takes its traced sizes)\n");
    }
    for (int c = 0; c < info->n_concrete; c++) {
        const vf_concrete_info *ci = &info->concrete[c];
        printf("\nconcrete function %d\n  inputs: ", c);
        for (int j = 0; j < ci->n_inputs; j++) printf("%s%s", j ? ", " : "", sc_spec_str(s, sizeof s, &ci->inputs[j]));
        printf("\n  outputs: ");
        for (int j = 0; j < ci->n_outputs; j++) printf("%s%s", j ? ", " : "", sc_spec_str(s, sizeof s, &ci->outputs[j]));
        printf("\n  nodes: %d (", ci->n_nodes);
        for (int k = 0; k < ci->n_ops; k++) printf("%s%s %d", k ? ", " : "", ci->ops[k].op, ci->ops[k].count);
        printf(")\n  captures: %d (%d variable%s)\n", ci->n_captures, ci->n_variables, ci->n_variables == 1 ? "" : "s");
        if (!o->run) continue;
        printf("  per call on %s (zeros at the traced sizes): ", device);
        if (pc[c].ran)
            printf("%d kernel%s, %d dispatch%s, %d barrier%s%s\n", pc[c].kernels, pc[c].kernels == 1 ? "" : "s",
                   pc[c].dispatches, pc[c].dispatches == 1 ? "" : "es", pc[c].barriers, pc[c].barriers == 1 ? "" : "s",
                   pc[c].planned ? " (a recorded plan)" : "");
        else
            printf("cannot run here: %s\n", pc[c].why);
    }
    int nv = vf_function_variable_count(fn);
    printf("\nvariables: %d\n", nv);
    for (int i = 0; i < nv; i++) {
        vf_tensor *v = vf_function_variable(fn, i);
        vf_tensor_spec sp = {.dtype = vf_tensor_dtype(v), .rank = vf_tensor_rank(v)};
        for (int d = 0; d < sp.rank; d++) sp.shape[d] = vf_tensor_dim(v, d);
        printf("  var%d %s, %lld bytes\n", i, sc_spec_str(s, sizeof s, &sp),
               (long long)vf_tensor_numel(v) * (long long)vf_dtype_size(sp.dtype));
    }
    printf("\nuser kernels and elementwise ops: %d\n", info->n_user_ops);
    for (int i = 0; i < info->n_user_ops; i++)
        if (info->user_ops[i].have_c)
            printf("  %s '%s': created in this process (its C function is used)\n",
                   info->user_ops[i].kernel ? "user kernel" : "user elementwise op", info->user_ops[i].name);
    sc_missing_user_ops(info, stdout, "  ");
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vkfuse saved show FILE [--json] [--backend cpu|vulkan|auto] [--device NAME] [--no-run]\n\n"
               "Shows a saved function (vf_function_save): its format version, each concrete\n"
               "function's inputs and outputs (-1: a symbolic dim), node counts by op, captures,\n"
               "variables (dtype, shape, bytes), the user kernels and elementwise ops it needs and\n"
               "whether this process has them, and kernels and dispatches per call on the device\n"
               "(one call per concrete function on zeros at its traced sizes; --no-run: none).\n\n"
               "  --json          one JSON object instead of text\n"
               "  --backend B     cpu, vulkan or auto (default: auto, as VKFUSE_BACKEND)\n"
               "  --device NAME   a Vulkan device by index or name (as VKFUSE_DEVICE)\n\n"
               "Exit codes: 0 shown, 1 the context failed, 2 bad arguments, 3 the file cannot\n"
               "be read or is not a valid saved function. See docs/CLI.md.\n");
}

int cmd_saved(int argc, char **argv)
{
    if (cli_wants_help(argc, argv) || argc < 2) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? SC_USAGE : SC_OK;
    }
    if (strcmp(argv[1], "show")) {
        fprintf(stderr, "vkfuse saved: unknown subcommand '%s' (vkfuse saved show FILE)\n", argv[1]);
        return SC_USAGE;
    }
    show_opts o = {.run = true};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) o.json = true;
        else if (!strcmp(a, "--no-run")) o.run = false;
        else if (!strcmp(a, "--backend") || !strcmp(a, "--device")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "vkfuse saved show: %s needs a value (try --help)\n", a);
                return SC_USAGE;
            }
            *(!strcmp(a, "--backend") ? &o.backend : &o.device) = argv[++i];
        } else if (a[0] == '-') {
            fprintf(stderr, "vkfuse saved show: unknown option '%s' (try --help)\n", a);
            return SC_USAGE;
        } else if (o.file) {
            fprintf(stderr, "vkfuse saved show: one file at a time ('%s' and '%s')\n", o.file, a);
            return SC_USAGE;
        } else {
            o.file = a;
        }
    }
    if (!o.file) {
        fprintf(stderr, "vkfuse saved show: which file? (vkfuse saved show FILE)\n");
        return SC_USAGE;
    }
    if (!sc_backend_ok("saved show", o.backend)) return SC_USAGE;
    vf_context *ctx = sc_context("saved show", o.backend, o.device, false, false, false);
    if (!ctx) return SC_RUN_FAILED;
    int rc = SC_OK;
    vf_function *fn = sc_load(ctx, "saved show", o.file, &rc);
    vf_function_info *info = fn ? vf_function_info_get(fn) : NULL;
    uint32_t version = 0;
    if (fn && !info) {
        fprintf(stderr, "vkfuse saved show: %s\n", vf_error_message(ctx));
        rc = SC_RUN_FAILED;
    }
    if (info) vf_saved_file_version(o.file, &version); /* the load has read the header already */
    percall *pc = info ? calloc((size_t)info->n_concrete + 1, sizeof *pc) : NULL;
    if (info && !pc) {
        fprintf(stderr, "vkfuse saved show: out of host memory\n");
        rc = SC_RUN_FAILED;
    }
    if (pc) {
        int saved = sc_prints_to_stderr();
        for (int c = 0; o.run && c < info->n_concrete; c++) measure(ctx, fn, &info->concrete[c], &pc[c]);
        sc_prints_restore(saved);
        if (o.json) print_json(&o, version, vf_device_name(ctx), info, pc, fn);
        else print_text(&o, version, vf_device_name(ctx), info, pc, fn);
    }
    free(pc);
    vf_free(info);
    vf_function_destroy(fn);
    vf_context_destroy(ctx);
    return rc;
}
