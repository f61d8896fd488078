/* vf_function: its lifetime, the signature cache, tracing on a miss and
 * the call of a concrete function (signatures and retrace explanations:
 * function_sig.c). */
#include "function/function_impl.h"
#include "util/fault.h"
#include "graph/passes.h"
#include "util/dtype.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static vf_function *function_create(vf_context *ctx, const vf_function_desc *d)
{
    VF_LOCKED(ctx);
    if (!ctx) return NULL;
    if (!d || !d->body || d->n_inputs < 0 || d->n_outputs < -1 || d->n_outputs > VF_FUNCTION_MAX_OUTPUTS) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_create: desc needs a body, n_inputs >= 0 and "
                "n_outputs 0 .. %d or -1 (decided by the first trace) (got %s)", VF_FUNCTION_MAX_OUTPUTS,
                !d ? "desc NULL" : !d->body ? "body NULL" : "a count out of range");
        return NULL;
    }
    const char *name = d->name ? d->name : "function";
    for (int i = 0; d->input_signature && i < d->n_inputs; i++) {
        const vf_tensor_spec *sp = &d->input_signature[i];
        bool ok = vf_dtype_valid((int)sp->dtype) && sp->rank >= 0 && sp->rank <= VF_MAX_RANK;
        for (int k = 0; ok && k < sp->rank; k++) ok = sp->shape[k] >= -1;
        if (!ok) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_create: '%s' input_signature[%d] is invalid: "
                    "dtype a vf_dtype, rank 0..%d, dims >= 0 or -1 (any size)", name, i, VF_MAX_RANK);
            return NULL;
        }
    }
    vf_function *fn = vf_calloc(1, sizeof *fn);
    if (fn) fn->changes = vf_calloc((size_t)d->n_inputs + 1, sizeof *fn->changes);
    if (fn && d->input_signature) fn->sig = vf_malloc(sizeof *fn->sig * (size_t)(d->n_inputs + 1));
    if (!fn || !fn->changes || (d->input_signature && !fn->sig)) {
        if (fn) free(fn->changes), free(fn->sig);
        free(fn);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_create: out of host memory (malloc failed)");
        return NULL;
    }
    if (fn->sig) memcpy(fn->sig, d->input_signature, sizeof *fn->sig * (size_t)d->n_inputs);
    fn->ctx = ctx;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    fn->body = d->body;
    fn->user = d->user;
    fn->n_in = d->n_inputs;
    fn->n_out = d->n_outputs;
    fn->last = -1;
    fn->env_eager = ctx->opt.eager;
    fn->unfused = d->unfused;
    fn->next_fn = ctx->functions;
    ctx->functions = fn;
    vf_context_on_destroy(ctx, VF_ON_DESTROY_FUNCTIONS, vf_functions_orphan_all);
    return fn;
}

/* One convention for failed creates (vkfuse.h): the reason is the
   thread's last error as well as the context's. */
vf_function *vf_function_create(vf_context *ctx, const vf_function_desc *d)
{
    VF_LOCKED(ctx);
    vf_function *fn = function_create(ctx, d);
    return fn ? fn : vf_create_failed(ctx, VF_OK, "vf_function_create");
}

static void concrete_free(vf_context *ctx, concrete *c)
{
    for (int i = 0; i < c->n_plans; i++) vf_fplan_free(&ctx->be, c->plans[i]); /* before the constants they use */
    vf_const_cache_free(&c->consts);
    vf_captures_free(c->caps, c->n_caps);
    vf_graph_free(c->g);
    for (int i = 0; c->var && i < c->n_var; i++) vf_tensor_drop(c->var[i]);
    free(c->var);
    free(c->dt);
    free(c->shape);
}

/* Everything but the struct, its name and its stats. */
static void function_strip(vf_function *fn)
{
    for (int i = 0; i < fn->n_cf; i++) concrete_free(fn->ctx, &fn->cfs[i]);
    free(fn->cfs);
    free(fn->sig);
    free(fn->changes);
    vf_fprofile_free(&fn->prof);
    vf_keyset_free(&fn->kernels);
    fn->cfs = NULL;
    fn->n_cf = 0;
    fn->last = -1;
    fn->last_plan = NULL;
    fn->sig = NULL;
    fn->changes = NULL;
    fn->body = NULL;
    memset(&fn->prof, 0, sizeof fn->prof);
    memset(&fn->kernels, 0, sizeof fn->kernels);
}

void vf_function_destroy(vf_function *fn)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    if (!fn) return;
    if (!fn->ctx) { /* orphaned by vf_context_destroy, already stripped */
        free(fn);
        return;
    }
    if (fn->destroyed) {
        vf_fail(fn->ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_destroy: function '%s' was already destroyed; "
                "destroy each function once", fn->name);
        return;
    }
    function_strip(fn);
    fn->destroyed = true; /* the struct stays on ctx->functions until the context ends */
}

void vf_functions_orphan_all(vf_context *ctx)
{
    vf_function *fn = ctx->functions;
    ctx->functions = NULL;
    while (fn) {
        vf_function *next = fn->next_fn;
        if (fn->destroyed) {
            free(fn);
        } else {
            function_strip(fn);
            fn->ctx = NULL;
            fn->next_fn = NULL;
        }
        fn = next;
    }
}

bool vf_function_destroyed(const vf_function *fn) { return fn && (fn->destroyed || !fn->ctx); }

/* fn can be used: VF_OK, else the status (recorded in its context when it
   still has one). */
vf_status vf_function_usable(const vf_function *fn, const char *op)
{
    if (!fn) return VF_ERROR_INVALID_ARGUMENT;
    if (!fn->ctx) return VF_ERROR_INVALID_ARGUMENT; /* its context was destroyed: nowhere to say more */
    if (fn->destroyed)
        return vf_fail(fn->ctx, VF_ERROR_INVALID_ARGUMENT, "%s: function '%s' was destroyed by vf_function_destroy "
                       "and cannot be used; create it again", op, fn->name);
    return VF_OK;
}

void vf_run_functions_eagerly(vf_context *ctx, bool on)
{
    VF_LOCKED(ctx);
    if (ctx) ctx->run_eagerly = on;
}

vf_status vf_function_stats_get(vf_function *fn, vf_function_stats *out)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    if (!fn || !out) return VF_ERROR_INVALID_ARGUMENT;
    if (fn->destroyed) return vf_function_usable(fn, "vf_function_stats_get"); /* an orphan keeps its stats */
    *out = fn->stats;
    return VF_OK;
}

const char *vf_function_retrace_reason(vf_function *fn)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    return fn ? fn->reason : "";
}

vf_status vf_function_profile_get(vf_function *fn, vf_function_profile *out)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    if (!out) {
        if (fn && fn->ctx) vf_fail(fn->ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_profile_get: out is NULL");
        return VF_ERROR_INVALID_ARGUMENT;
    }
    memset(out, 0, sizeof *out);
    out->note = "";
    vf_status u = vf_function_usable(fn, "vf_function_profile_get");
    if (u != VF_OK) return u;
    if (fn->prof.pub.profiled) *out = fn->prof.pub;
    else if (!fn->ctx->profile) out->note = "profiling is off: set vf_context_desc.profile or VKFUSE_PROFILE=1";
    else out->note = "no call has finished yet";
    return VF_OK;
}

bool vf_context_profiling(vf_context *ctx) { return ctx && ctx->profile; }

/* With profiling on: waits for the call's work and records its profile. */
static vf_status profile_call(vf_function *fn, const concrete *c, uint64_t t0, vf_status s)
{
    vf_context *ctx = fn->ctx;
    if (s != VF_OK || !ctx->profile) return s;
    s = ctx->be.iface->sync(ctx->be.self);
    if (s != VF_OK) return vf_backend_failed(ctx, s, "vf_function_call: '%s': waiting for the call's work", fn->name);
    uint64_t wall = vf_profile_now_ns() - t0;
    return vf_fprofile_record(ctx, &fn->prof, c ? c->g : NULL, !fn->stats.eager && fn->stats.planned ? fn->last_plan : NULL,
                              fn->stats.eager, t0, wall, fn->stats.peak_bytes, fn->stats.calls);
}

vf_status vf_function_io_count(vf_function *fn, int *n_inputs, int *n_outputs)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    if (n_inputs) *n_inputs = -1;
    if (n_outputs) *n_outputs = -1;
    vf_status s = vf_function_usable(fn, "vf_function_io_count");
    if (s != VF_OK) return s;
    if (n_inputs) *n_inputs = fn->n_in;
    if (n_outputs) *n_outputs = fn->n_out;
    return VF_OK;
}

char *vf_function_graph_text(vf_function *fn)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    if (!fn || fn->last < 0) return NULL;
    return vf_graph_to_string(fn->cfs[fn->last].g, fn->name);
}


/* ---- tracing ---------------------------------------------------------------- */

/* VKFUSE_DUMP's directory, made if needed; NULL: none. */
static const char *dump_dir(const vf_context *ctx)
{
    const char *d = ctx->opt.dump_dir;
    if (!*d) return NULL;
    if (mkdir(d, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "vkfuse: warning: VKFUSE_DUMP=%s: cannot create the directory\n", d);
        return NULL;
    }
    return d;
}

static concrete *trace(vf_function *fn, vf_tensor *const *in)
{
    vf_context *ctx = fn->ctx;
    concrete c = {0};
    c.dt = vf_malloc(sizeof *c.dt * (size_t)(fn->n_in + 1));
    c.shape = vf_malloc(sizeof *c.shape * (size_t)(fn->n_in + 1));
    c.var = vf_calloc((size_t)fn->n_in + 1, sizeof *c.var);
    c.n_var = c.var ? fn->n_in : 0;
    concrete *grown = vf_realloc(fn->cfs, sizeof *fn->cfs * (size_t)(fn->n_cf + 1));
    vf_tensor **ins = vf_calloc((size_t)fn->n_in + 1, sizeof *ins);
    /* n_out -1: the body gets room for the most outputs and its first
       trace fixes the count (vf_function_desc.n_outputs) */
    int n_out = fn->n_out < 0 ? VF_FUNCTION_MAX_OUTPUTS : fn->n_out;
    vf_tensor **outs = vf_calloc((size_t)n_out + 1, sizeof *outs);
    int *ids = vf_calloc((size_t)n_out + 1, sizeof *ids);
    if (grown) fn->cfs = grown;
    vf_status s = c.dt && c.shape && c.var && grown && ins && outs && ids ? VF_OK
                : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_call: out of host memory (malloc failed)");
    for (int i = 0; s == VF_OK && i < fn->n_in; i++) {
        c.dt[i] = in[i]->dtype;
        c.shape[i] = fn->sig ? vf_fsig_shape(&fn->sig[i]) : (vf_shape){.rank = in[i]->rank};
        for (int k = 0; k < in[i]->rank; k++) c.shape[i].dim[k] = in[i]->shape[k];
        if (in[i]->is_variable) c.var[i] = vf_tensor_hold(in[i]);
    }
    if (s == VF_OK && !vf_trace_begin(ctx, fn->name)) s = ctx->err.status;
    bool tracing = s == VF_OK;
    if (tracing) {
        vf_status before = ctx->err.status;
        vf_scope_begin(ctx);
        for (int i = 0; s == VF_OK && i < fn->n_in; i++) {
            if (!(ins[i] = vf_trace_param(ctx, c.dt[i], &c.shape[i]))) s = ctx->err.status;
            else if (c.var[i]) ins[i] = c.var[i]; /* by reference (same_var); its param stays unused */
        }
        if (s == VF_OK) {
            fn->active++; /* a call of fn from its own body is an error (call()) */
            __typeof__(ctx->body) outer = ctx->body;
            ctx->body.fn = fn->name, ctx->body.vars = c.var, ctx->body.n = fn->n_in;
            ctx->body.depth = vf_ctx_lock_depth(ctx);
            vf_status b = fn->body(ctx, ins, outs, fn->user);
            ctx->body = outer;
            fn->active--;
            if (b != VF_OK) s = ctx->err.status != VF_OK ? ctx->err.status
                              : vf_fail(ctx, b, "vf_function_call: the body of '%s' returned %s", fn->name, vf_status_name(b));
            else if (before == VF_OK && ctx->err.status != VF_OK) s = ctx->err.status;
            if (s == VF_OK && fn->n_out < 0) {
                n_out = 0;
                while (n_out < VF_FUNCTION_MAX_OUTPUTS && outs[n_out]) n_out++;
                for (int k = n_out; s == VF_OK && k < VF_FUNCTION_MAX_OUTPUTS; k++)
                    if (outs[k]) s = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: the body of '%s' "
                                             "set output %d but left output %d NULL: its outputs are the first "
                                             "ones it sets, without gaps", fn->name, k, n_out);
            }
        }
        /* A variable input is passed to the body by reference: a body that
           released it (misuse) dropped our reference, and twice the
           caller's too; the caller's handle may be dead and the call must
           not read it (run_concrete), nor concrete_free release it again. */
        for (int i = 0; i < fn->n_in; i++)
            if (c.var[i] && vf_handle_state_of(c.var[i], VF_HANDLE_TENSOR).what != VF_HANDLE_LIVE) {
                c.var[i] = NULL;
                if (s == VF_OK)
                    s = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: the body of '%s' released its "
                                "input %d, a variable passed by reference; a body must not release its inputs "
                                "(they belong to the caller)", fn->name, i);
            }
        for (int k = 0; s == VF_OK && k < n_out; k++) {
            if (!outs[k]) s = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: the body of '%s' left output "
                                      "%d NULL", fn->name, k);
            else if (!vf_check_alive(ctx, "vf_function_call: body output", outs[k], -1)) s = ctx->err.status;
            else if ((ids[k] = vf_trace_value(ctx, outs[k], "vf_function_call")) < 0) s = ctx->err.status;
        }
        vf_graph *root = vf_trace_graph(ctx);
        if (s == VF_OK && !vf_graph_set_outputs(root, n_out, ids))
            s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_call: out of host memory (malloc failed)");
        vf_scope_end(ctx);
        c.g = vf_trace_end(ctx, s == VF_OK, &c.caps, &c.n_caps);
    }
    fn->stats.traces += tracing;
    if (s == VF_OK) {
        char name[192];
        snprintf(name, sizeof name, "%s.trace%d", fn->name, fn->stats.traces);
        vf_err err = {0};
        vf_evaluator ev = vf_context_evaluator(ctx);
        if (vf_optimize(c.g, &ev, dump_dir(ctx), name, &err) < 0)
            s = vf_fail(ctx, err.status, "vf_function_call: optimising '%s': %s", fn->name, err.message);
    }
    free(ins);
    free(outs);
    free(ids);
    if (s != VF_OK) {
        concrete_free(ctx, &c);
        return NULL;
    }
    fn->n_out = n_out;
    fn->cfs[fn->n_cf] = c;
    return &fn->cfs[fn->n_cf++];
}

/* ---- calls ------------------------------------------------------------------ */

/* The recorded plan of c for these params' sizes, built on first use and
   kept (at most VF_PLANS_MAX, the oldest dropped); NULL: run node by node. */
static vf_status find_plan(vf_function *fn, concrete *c, vf_run_state *rs, const vf_plan_value *params, vf_fplan **out)
{
    vf_context *ctx = fn->ctx;
    *out = NULL;
    if (!ctx->be.iface->plan_create || c->no_plan || ctx->opt.no_plan) return VF_OK;
    if (!vf_fplan_graph_ok(c->g)) {
        c->no_plan = true;
        return VF_OK;
    }
    for (int i = 0; i < c->n_plans; i++)
        if (vf_fplan_matches(c->plans[i], params)) {
            *out = c->plans[i];
            return VF_OK;
        }
    vf_fplan *fp = NULL;
    vf_status s = vf_run_plan_build(rs, c->g, params, &fp);
    if (s != VF_OK || !fp) return s;
    if (c->n_plans == VF_PLANS_MAX) {
        vf_fplan_free(&ctx->be, c->plans[0]);
        memmove(c->plans, c->plans + 1, sizeof *c->plans * (VF_PLANS_MAX - 1));
        c->n_plans--;
    }
    c->plans[c->n_plans++] = fp;
    fn->stats.plans++;
    *out = fp;
    return VF_OK;
}

static vf_status run_concrete(vf_function *fn, concrete *c, vf_tensor *const *in, vf_tensor **out)
{
    vf_context *ctx = fn->ctx;
    vf_run_state rs = {.ctx = ctx, .fn = fn->name, .caps = c->caps, .n_caps = c->n_caps, .consts = &c->consts,
                       .unfused = fn->unfused};
    vf_rval *params = vf_calloc((size_t)fn->n_in + 1, sizeof *params);
    vf_rval *outs = vf_calloc((size_t)fn->n_out + 1, sizeof *outs);
    vf_status s = params && outs ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_call: out of host memory (malloc failed)");
    for (int i = 0; s == VF_OK && i < fn->n_in; i++)
        params[i] = (vf_rval){.ref = vf_tensor_ref(in[i]), .t = in[i], .var = in[i]->is_variable};
    vf_plan_value *pv = s == VF_OK ? vf_plan_values(params, fn->n_in) : NULL;
    if (s == VF_OK && !pv) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_call: out of host memory (malloc failed)");
    vf_context_stats before = {0}, after = {0};
    if (ctx->be.iface->stats) ctx->be.iface->stats(ctx->be.self, &before);
    vf_scope_begin(ctx);
    vf_fplan *fp = NULL;
    if (s == VF_OK) s = find_plan(fn, c, &rs, pv, &fp);
    if (s == VF_OK && fp) s = vf_run_plan_call(&rs, fp, pv, fn->n_out, outs);
    else if (s == VF_OK) s = vf_graph_run(&rs, c->g, params, outs);
    for (int k = 0; s == VF_OK && k < fn->n_out; k++)
        if (!(out[k] = vf_rval_to_output(&rs, &outs[k]))) s = ctx->err.status;
    if (s != VF_OK)
        for (int k = 0; k < fn->n_out; k++) out[k] = NULL; /* kept ones die with the caller's scope */
    vf_scope_end(ctx);
    vf_run_state_finish(&rs);
    free(params);
    free(pv);
    free(outs);
    if (ctx->be.iface->stats) ctx->be.iface->stats(ctx->be.self, &after);
    fn->stats.kernels = vf_graph_kernels(c->g);
    fn->stats.dispatches_per_call = rs.dispatches;
    fn->stats.peak_bytes = rs.peak_bytes;
    fn->stats.unplanned_bytes = rs.peak_bytes;
    fn->stats.submits_per_call = (int)(after.submits - before.submits);
    fn->stats.barriers_per_call = (int)(after.barriers - before.barriers);
    fn->stats.planned = fp != NULL;
    fn->last_plan = fp;
    if (fp) {
        vf_fplan_stats ps;
        vf_fplan_stats_get(fp, &ps);
        fn->stats.kernels = ps.kernels;
        fn->stats.peak_bytes = ps.arena_bytes + ps.output_bytes;
        fn->stats.unplanned_bytes = ps.intermediate_bytes;
        fn->stats.arena_bytes = ps.arena_bytes;
    }
    return s;
}

bool vf_function_plan_stats(vf_function *fn, vf_fplan_stats *out)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    memset(out, 0, sizeof *out);
    if (!fn || !fn->last_plan || !fn->stats.planned || fn->stats.eager) return false;
    vf_fplan_stats_get(fn->last_plan, out);
    return true;
}

static vf_status call(vf_function *fn, vf_tensor *const *in, vf_tensor **out);

vf_status vf_function_call(vf_function *fn, vf_tensor *const *in_arg, vf_tensor **out)
{
    VF_LOCKED(fn ? fn->ctx : NULL);
    vf_status u = vf_function_usable(fn, "vf_function_call");
    if (u != VF_OK) return u;
    vf_context *ctx = fn->ctx;
    if (fn->n_out > 0 && !out)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: '%s' has %d outputs but out is NULL", fn->name, fn->n_out);
    if (fn->n_in > 0 && !in_arg)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: '%s' has %d inputs but in is NULL", fn->name, fn->n_in);
    /* in and out may be the same array (x = f(x)): read the inputs first */
    vf_tensor *small[8] = {NULL}, **in = fn->n_in <= 8 ? small : vf_malloc(sizeof *in * (size_t)fn->n_in);
    if (!in) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_call: out of host memory (malloc failed)");
    if (fn->n_in > 0) memcpy(in, in_arg, sizeof *in * (size_t)fn->n_in);
    for (int k = 0; k < fn->n_out; k++) out[k] = NULL;
    vf_status s = call(fn, in, out);
    if (in != small) free(in);
    return s;
}

static vf_status call(vf_function *fn, vf_tensor *const *in, vf_tensor **out)
{
    vf_context *ctx = fn->ctx;
    for (int i = 0; i < fn->n_in; i++) {
        if (!in[i]) return ctx->err.status != VF_OK ? ctx->err.status
                         : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: '%s' input %d is NULL", fn->name, i);
        if (!vf_check_input(ctx, "vf_function_call", in[i], i)) return ctx->err.status;
    }
    if (fn->sig && vf_fsig_check(fn, in) != VF_OK) return ctx->err.status;
    bool eager = (ctx->run_eagerly || fn->env_eager) && fn->body; /* a loaded function has only its graphs */
    if (fn->active && ctx->trace)
        return vf_fail(ctx, VF_ERROR_TRACE, "vf_function_call: '%s' called while it is being traced: its body calls "
                       "it (directly or through other functions), so tracing would never end. A traced function "
                       "cannot recurse; repeat with a C loop in the body (unrolled) or with vf_while_loop", fn->name);
    if (fn->n_out < 0 && (eager || ctx->trace))
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: '%s' was created with n_outputs -1 and has "
                       "not been traced yet, so its output count is not known; call it once outside other traced "
                       "bodies and with bodies not run eagerly (vf_run_functions_eagerly, VKFUSE_EAGER)", fn->name);
    if (fn->active >= VF_NEST_MAX)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call: '%s' is running eagerly %d calls deep inside "
                       "itself: a recursion without a base case? (at most %d)", fn->name, fn->active, VF_NEST_MAX);
    uint64_t t0 = ctx->profile ? vf_profile_now_ns() : 0;
    if (eager || (ctx->trace && fn->body)) { /* eager, or inlined into the function being traced */
        fn->active++;
        vf_status s = vf_call_body_scoped(ctx, fn->name, fn->body, in, fn->n_out, out, fn->user);
        fn->active--;
        if (s == VF_OK && !ctx->trace) {
            fn->stats.calls++;
            fn->stats.eager = true;
            s = profile_call(fn, NULL, t0, s);
        }
        return s;
    }
    int hit = -1;
    for (int i = 0; i < fn->n_cf && hit < 0; i++)
        if (vf_fsig_matches(&fn->cfs[i], fn->n_in, in)) hit = i;
    if (hit >= 0 && !fn->body && ctx->trace) {
        /* inlined: its graph replayed op by op into the function being
           traced (and onto its tapes), as a body would be */
        const concrete *c = &fn->cfs[hit];
        vf_replay_fn r = {fn->name, c->g, c->caps, c->n_caps, true};
        return vf_call_body_scoped(ctx, fn->name, vf_replay_body, in, fn->n_out, out, &r);
    }
    if (hit < 0 && !fn->body) {
        char why[256];
        vf_fsig_explain(&fn->cfs[fn->n_cf - 1], fn->n_in, in, why, sizeof why);
        return vf_fail(ctx, VF_ERROR_SHAPE, "vf_function_call: '%s' was loaded from a file and has no concrete "
                       "function for these inputs (%s) and no body to trace one; save it after calling it with "
                       "every signature it needs, or give it an input_signature with -1 dims", fn->name, why);
    }
    /* The backend notes every kernel the trace and the run get, compiled
       or cached: vf_function_save stores their binaries. */
    vf_keyset *prev = ctx->be.iface->kernels_track ? ctx->be.iface->kernels_track(ctx->be.self, &fn->kernels) : NULL;
    vf_status s = VF_OK;
    if (hit < 0) {
        if (fn->n_cf > 0) vf_fsig_note_retrace(fn, in);
        if (trace(fn, in)) hit = fn->n_cf - 1;
        else s = ctx->err.status;
    }
    if (hit >= 0) {
        fn->last = hit;
        s = run_concrete(fn, &fn->cfs[hit], in, out);
        /* an eager tape does not see the plan's kernels: the call is one entry */
        if (s == VF_OK)
            vf_note_call(ctx, fn, fn->name, fn->body, fn->user, fn->cfs[hit].g, fn->n_in, in, fn->cfs[hit].caps,
                                fn->cfs[hit].n_caps, fn->n_out, out);
    }
    if (ctx->be.iface->kernels_track) ctx->be.iface->kernels_track(ctx->be.self, prev);
    if (hit < 0) return s;
    if (s == VF_OK) {
        fn->stats.calls++;
        fn->stats.eager = false;
    }
    return profile_call(fn, &fn->cfs[hit], t0, s);
}

/* ---- accessors for saved functions (saved.h) -------------------------------- */

const char *vf_function_name_get(const vf_function *fn) { return fn->name; }

vf_context *vf_function_context(const vf_function *fn) { return fn->ctx; }

void vf_function_arity(const vf_function *fn, int *n_in, int *n_out, const vf_tensor_spec **sig)
{
    *n_in = fn->n_in;
    *n_out = fn->n_out;
    *sig = fn->sig;
}

int vf_function_n_concrete(const vf_function *fn) { return fn->n_cf; }

void vf_function_concrete_get(const vf_function *fn, int i, const vf_dtype **dt, const vf_shape **shape,
                              const vf_graph **g, const vf_capture **caps, int *n_caps)
{
    const concrete *c = &fn->cfs[i];
    *dt = c->dt;
    *shape = c->shape;
    *g = c->g;
    *caps = c->caps;
    *n_caps = c->n_caps;
}

vf_keyset *vf_function_kernels(vf_function *fn) { return &fn->kernels; }

vf_function *vf_function_new_loaded(vf_context *ctx, const char *name, int n_in, int n_out,
                                    const vf_tensor_spec *sig)
{
    vf_function *fn = vf_calloc(1, sizeof *fn);
    if (fn) fn->changes = vf_calloc((size_t)n_in + 1, sizeof *fn->changes);
    if (fn && sig) fn->sig = vf_malloc(sizeof *fn->sig * (size_t)(n_in + 1));
    if (!fn || !fn->changes || (sig && !fn->sig)) {
        if (fn) free(fn->changes), free(fn->sig);
        free(fn);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
        return NULL;
    }
    if (sig) memcpy(fn->sig, sig, sizeof *fn->sig * (size_t)n_in);
    fn->ctx = ctx;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    fn->n_in = n_in;
    fn->n_out = n_out;
    fn->last = -1;
    fn->next_fn = ctx->functions;
    ctx->functions = fn;
    vf_context_on_destroy(ctx, VF_ON_DESTROY_FUNCTIONS, vf_functions_orphan_all);
    return fn;
}

vf_status vf_function_add_concrete(vf_function *fn, vf_dtype *dt, vf_shape *shape, vf_graph *g,
                                   vf_capture *caps, int n_caps)
{
    concrete c = {.dt = dt, .shape = shape, .g = g, .caps = caps, .n_caps = n_caps};
    concrete *grown = vf_realloc(fn->cfs, sizeof *fn->cfs * (size_t)(fn->n_cf + 1));
    if (!grown) {
        concrete_free(fn->ctx, &c);
        return vf_fail(fn->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
    }
    fn->cfs = grown;
    fn->cfs[fn->n_cf++] = c;
    return VF_OK;
}
