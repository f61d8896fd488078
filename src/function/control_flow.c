/* vf_cond, vf_while_loop and vf_print: eager (the host decides, values
 * print at once) or traced (branches and bodies become subgraphs of COND
 * and WHILE nodes; prints become PRINT nodes that run at every call). */
#include "function/function.h"
#include "util/fault.h"
#include "util/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- printing -------------------------------------------------------------- */

#define VF_PRINT_MAX 64

static void print_rec(const void *data, vf_dtype dt, int rank, const int64_t *shape, int d, int64_t *i,
                      int *printed)
{
    if (d == rank) {
        if (*printed >= VF_PRINT_MAX) return;
        double v = vf_load_f64(data, dt, *i);
        if (dt == VF_BOOL) printf("%s", v != 0.0 ? "true" : "false");
        else if (vf_dtype_is_float(dt)) printf("%g", v);
        else printf("%lld", (long long)v);
        (*i)++;
        (*printed)++;
        return;
    }
    printf("[");
    for (int64_t k = 0; k < shape[d]; k++) {
        if (*printed >= VF_PRINT_MAX) {
            printf("...");
            break;
        }
        if (k) printf(", ");
        print_rec(data, dt, rank, shape, d + 1, i, printed);
    }
    printf("]");
}

void vf_print_value(const char *label, vf_dtype dt, int rank, const int64_t *shape, const void *data)
{
    int64_t i = 0;
    int printed = 0;
    if (label && *label) printf("%s: ", label);
    print_rec(data, dt, rank, shape, 0, &i, &printed);
    printf("\n");
    fflush(stdout);
}

vf_status vf_print(vf_context *ctx, const char *label, vf_tensor *t)
{
    VF_LOCKED(ctx);
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    if (!t) return ctx->err.status != VF_OK ? ctx->err.status
                                            : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_print: tensor is NULL");
    if (!vf_check_input(ctx, "vf_print", t, 0)) return ctx->err.status;
    if (ctx->trace) return vf_trace_print(ctx, label, t);
    size_t bytes = vf_tensor_bytes(t);
    void *data = vf_malloc(bytes ? bytes : 1);
    if (!data) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_print: out of host memory (malloc failed)");
    vf_status s = vf_tensor_read(t, data, bytes);
    if (s == VF_OK) vf_print_value(label, t->dtype, t->rank, t->shape, data);
    free(data);
    return s;
}

/* Runs fn on n elements of dt in data; its failure recorded in ctx. */
vf_status vf_host_call(vf_context *ctx, const char *name, vf_host_fn fn, void *user, vf_dtype dt, int64_t n, void *data)
{
    char msg[512] = "";
    vf_status s = fn(user, dt, n, data, msg, sizeof msg);
    if (s == VF_OK) return VF_OK;
    if ((unsigned)s > VF_ERROR_FORMAT) s = VF_ERROR_INVALID_ARGUMENT;
    return vf_fail(ctx, s, "vf_host_map '%s': the callback failed: %s", name, msg[0] ? msg : "(no message)");
}

vf_status vf_host_apply(vf_context *ctx, const vf_node *n, const vf_tref *in, const vf_tref *out)
{
    const vf_backend_iface *be = ctx->be.iface;
    void *self = ctx->be.self;
    int64_t numel = 1;
    for (int i = 0; i < in->rank; i++) numel *= in->shape[i];
    size_t bytes = (size_t)numel * vf_dtype_size(in->dtype);
    bool same = in->buf == out->buf && in->offset == out->offset;
    void *pin = NULL, *pout = NULL;
    vf_status s = bytes && be->map ? be->map(self, in->buf, in->offset, bytes, &pin) : VF_OK;
    if (s == VF_OK && pin) s = same ? (pout = pin, VF_OK) : be->map(self, out->buf, out->offset, bytes, &pout);
    if (s != VF_OK) return vf_backend_failed(ctx, s, "vf_host_map '%s': mapping its buffers", n->label);
    if (pin && pout) { /* in place in host-visible memory: no staging copy */
        if (pout != pin) memcpy(pout, pin, bytes);
        s = vf_host_call(ctx, n->label, n->host_fn, n->host_user, in->dtype, numel, pout);
        vf_status u = be->unmap ? be->unmap(self, out->buf, out->offset, bytes) : VF_OK;
        if (s == VF_OK && u != VF_OK) s = vf_backend_failed(ctx, u, "vf_host_map '%s': writing its result", n->label);
        return s;
    }
    void *data = vf_malloc(bytes ? bytes : 1);
    if (!data) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_host_map '%s': out of host memory (malloc failed)", n->label);
    s = bytes ? be->download(self, in->buf, in->offset, data, bytes) : VF_OK;
    if (s != VF_OK) vf_backend_failed(ctx, s, "vf_host_map '%s': reading its input", n->label);
    if (s == VF_OK) s = vf_host_call(ctx, n->label, n->host_fn, n->host_user, in->dtype, numel, data);
    if (s == VF_OK && bytes && (s = be->upload(self, out->buf, out->offset, data, bytes)) != VF_OK)
        vf_backend_failed(ctx, s, "vf_host_map '%s': writing its result", n->label);
    free(data);
    return s;
}

uint32_t vf_tensor_symbolic_dims(vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    vf_context *ctx = vf_tensor_context(t);
    return ctx && ctx->trace ? vf_trace_sym_dims(ctx, t, "vf_tensor_symbolic_dims") : 0;
}

vf_tensor *vf_host_map(vf_context *ctx, vf_tensor *x, vf_host_fn fn, void *user, const char *name)
{
    VF_LOCKED(ctx);
    if (!ctx) return NULL;
    if (!x) {
        if (ctx->err.status == VF_OK) vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_host_map: tensor is NULL");
        return NULL;
    }
    if (!fn) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_host_map: fn is NULL"), NULL;
    if (!vf_check_input(ctx, "vf_host_map", x, 0)) return NULL;
    if (!name) name = "host";
    if (ctx->trace) return vf_trace_host(ctx, x, fn, user, name);
    size_t bytes = vf_tensor_bytes(x);
    void *data = vf_malloc(bytes ? bytes : 1);
    if (!data) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_host_map: out of host memory (malloc failed)"), NULL;
    vf_tensor *t = NULL;
    if (vf_tensor_read(x, data, bytes) == VF_OK && vf_host_call(ctx, name, fn, user, x->dtype, x->numel, data) == VF_OK)
        t = vf_tensor_from_host(ctx, x->dtype, x->rank, x->shape, data);
    free(data);
    return t;
}

/* ---- shared checks ----------------------------------------------------------- */

static vf_status check_tensors(vf_context *ctx, const char *op, const char *what, int n, vf_tensor *const *ts)
{
    if (n < 0 || (n > 0 && !ts)) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d %s but the array is NULL", op, n, what);
    for (int i = 0; i < n; i++) {
        if (!ts[i]) return ctx->err.status != VF_OK ? ctx->err.status
                                                    : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %s %d is NULL", op, what, i);
        if (!vf_check_input(ctx, op, ts[i], i)) return ctx->err.status;
    }
    return VF_OK;
}

static vf_status check_pred(vf_context *ctx, const char *op, const vf_tensor *p)
{
    if (p->dtype == VF_BOOL && p->numel == 1) return VF_OK;
    char sh[VF_SHAPE_STR_LEN];
    return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the predicate is %s %s but must be a single bool; "
                   "make it with a comparison and a reduction (e.g. vf_greater(ctx, vf_reduce_mean(...), zero))",
                   op, vf_dtype_name(p->dtype), vf_shape_str(sh, sizeof sh, p->rank, p->shape));
}

/* Runs fn(in) -> out[n_out] and checks that every output was set. */
static vf_status call_body(vf_context *ctx, const char *op, const char *which, vf_body fn, vf_tensor *const *in,
                           int n_out, vf_tensor **out, void *user)
{
    vf_status before = ctx->err.status;
    for (int k = 0; k < n_out; k++) out[k] = NULL;
    vf_status s = fn(ctx, in, out, user);
    if (s != VF_OK) return ctx->err.status != VF_OK ? ctx->err.status
                                                    : vf_fail(ctx, s, "%s: %s returned %s", op, which, vf_status_name(s));
    if (before == VF_OK && ctx->err.status != VF_OK) return ctx->err.status;
    for (int k = 0; k < n_out; k++) {
        if (!out[k]) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %s left output %d NULL", op, which, k);
        char what[96];
        snprintf(what, sizeof what, "%s: %s output %d", op, which, k);
        if (!vf_check_alive(ctx, what, out[k], -1)) return ctx->err.status; /* released in the body */
    }
    return VF_OK;
}

/* Moves the body's outputs to the caller's scope (the one below the
   innermost): made in the body they move; from outside they get a view
   (a copy for variables) made after the scope closes. */
static vf_status close_scope(vf_context *ctx, int n, vf_tensor **out)
{
    int depth = ctx->n_scopes - 1;
    bool *outside = vf_calloc((size_t)n + 1, sizeof *outside);
    if (!outside) {
        vf_scope_end(ctx);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    }
    for (int k = 0; k < n; k++) {
        bool dup = false;
        for (int j = 0; j < k; j++) dup = dup || out[j] == out[k];
        if (out[k]->scope == depth && !dup) out[k] = vf_keep(out[k]);
        else outside[k] = true;
        if (outside[k]) vf_tensor_hold(out[k]);
    }
    vf_scope_end(ctx);
    vf_status s = VF_OK;
    for (int k = 0; k < n; k++) {
        if (!outside[k]) continue;
        vf_tensor *t = out[k];
        out[k] = vf_reshape(ctx, t, t->rank, t->shape); /* a view, or a copy of a variable */
        vf_tensor_drop(t);
        if (!out[k]) s = ctx->err.status;
    }
    free(outside);
    return s;
}

vf_status vf_call_body_scoped(vf_context *ctx, const char *op, vf_body fn, vf_tensor *const *in, int n_out,
                              vf_tensor **out, void *user)
{
    vf_scope_begin(ctx);
    vf_status s = call_body(ctx, op, "the body", fn, in, n_out, out, user);
    if (s != VF_OK) {
        vf_scope_end(ctx);
        for (int k = 0; k < n_out; k++) out[k] = NULL;
        return s;
    }
    return close_scope(ctx, n_out, out);
}

static bool read_bool(vf_tensor *p, bool *out)
{
    uint8_t b = 0;
    if (vf_tensor_read(p, &b, 1) != VF_OK) return false;
    *out = b != 0;
    return true;
}

/* ---- vf_cond ------------------------------------------------------------------- */

/* Traces fn into a new subgraph of the graph being recorded. */
static vf_graph *trace_branch(vf_context *ctx, const char *op, const char *which, vf_body fn, int n_in,
                              vf_tensor *const *in, const int *in_ids, int n_out, vf_tensor **out, void *user)
{
    vf_graph *parent = vf_trace_graph(ctx);
    vf_graph *g = vf_graph_new(parent);
    if (!g || !vf_trace_push(ctx, g)) {
        vf_graph_free(g);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        return NULL;
    }
    vf_scope_begin(ctx);
    vf_tensor **params = vf_calloc((size_t)n_in + 1, sizeof *params);
    vf_status s = params ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    for (int j = 0; s == VF_OK && j < n_in; j++) {
        vf_shape sh = parent->nodes[in_ids[j]].shape;
        params[j] = vf_trace_param(ctx, in[j]->dtype, &sh);
        if (!params[j]) s = ctx->err.status;
    }
    if (s == VF_OK) s = call_body(ctx, op, which, fn, params, n_out, out, user);
    int *ids = vf_calloc((size_t)n_out + 1, sizeof *ids);
    for (int k = 0; s == VF_OK && k < n_out; k++) {
        ids[k] = vf_trace_value(ctx, out[k], op);
        if (ids[k] < 0) s = ctx->err.status;
    }
    if (s == VF_OK && !vf_graph_set_outputs(g, n_out, ids)) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    free(ids);
    free(params);
    vf_scope_end(ctx);
    vf_trace_pop(ctx);
    if (s != VF_OK) {
        vf_graph_free(g);
        return NULL;
    }
    return g;
}

static vf_status outputs_match(vf_context *ctx, const char *op, const char *a_name, const vf_graph *a,
                               const char *b_name, const vf_graph *b, int n)
{
    for (int k = 0; k < n; k++) {
        const vf_node *x = &a->nodes[a->outputs[k]], *y = &b->nodes[b->outputs[k]];
        if (x->dtype == y->dtype && vf_shape_equal(&x->shape, &y->shape) && x->shape.sym == y->shape.sym) continue;
        char sa[128], sb[128];
        return vf_fail(ctx, VF_ERROR_TRACE, "%s: output %d is %s in %s but %s in %s; traced, both must give "
                       "the same dtypes and shapes", op, k, vf_shape_fmt(sa, sizeof sa, x->dtype, &x->shape), a_name,
                       vf_shape_fmt(sb, sizeof sb, y->dtype, &y->shape), b_name);
    }
    return VF_OK;
}

static void copy_tensors(vf_tensor **dst, vf_tensor *const *src, int n)
{
    if (n > 0) memcpy(dst, src, sizeof *dst * (size_t)n);
}

static void copy_ids(int *dst, const int *src, int n)
{
    if (n > 0) memcpy(dst, src, sizeof(int) * (size_t)n); /* src may be NULL when n == 0 */
}

/* Appends a COND/WHILE node with ins, then PROJ nodes bound to out[]. */
static vf_status add_control(vf_context *ctx, const char *op, vf_node_kind kind, int n_in, const int *ins,
                             vf_graph *sub0, vf_graph *sub1, int n_out, int split, int max_it, vf_tensor **out)
{
    vf_graph *g = vf_trace_graph(ctx);
    int id = vf_graph_add(g, kind, n_in, ins);
    if (id < 0) {
        vf_graph_free(sub0);
        vf_graph_free(sub1);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    }
    vf_node *n = &g->nodes[id];
    n->sub[0] = sub0;
    n->sub[1] = sub1;
    n->n_out = n_out;
    n->split = split;
    n->max_iterations = max_it;
    bool effects = vf_node_has_effect(n);
    for (int k = 0; k < n_out; k++) {
        const vf_node *o = &sub1->nodes[sub1->outputs[k]];
        vf_dtype dt = o->dtype;
        vf_shape sh = o->shape;
        int p = vf_graph_add(g, VF_NODE_PROJ, 1, &id);
        if (p < 0) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        g->nodes[p].dtype = dt;
        g->nodes[p].shape = sh;
        g->nodes[p].index = k;
        out[k] = vf_trace_tensor_for(ctx, p);
        if (!out[k]) return ctx->err.status;
    }
    if (effects) vf_trace_forget_variables(ctx);
    return VF_OK;
}

static vf_status cond_impl(vf_context *ctx, vf_tensor *pred, vf_body then_fn, vf_body else_fn, int n_in,
                           vf_tensor *const *in, int n_out, vf_tensor **out, void *user);

vf_status vf_cond(vf_context *ctx, vf_tensor *pred, vf_body then_fn, vf_body else_fn, int n_in,
                  vf_tensor *const *in, int n_out, vf_tensor **out, void *user)
{
    VF_LOCKED(ctx);
    const char *op = "vf_cond";
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    if (!then_fn || !else_fn || n_out < 0 || (n_out > 0 && !out))
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: then_fn, else_fn and out (for %d outputs) must be set", op, n_out);
    if (!pred) return ctx->err.status != VF_OK ? ctx->err.status : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: pred is NULL", op);
    if (!vf_check_input(ctx, op, pred, 0) || check_tensors(ctx, op, "inputs", n_in, in) != VF_OK) return ctx->err.status;
    if (check_pred(ctx, op, pred) != VF_OK) return ctx->err.status;
    /* in and out may be the same array: read the inputs first */
    vf_tensor **in_copy = vf_calloc((size_t)n_in + 1, sizeof *in_copy);
    if (!in_copy) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    if (n_in) memcpy(in_copy, in, sizeof *in * (size_t)n_in);
    for (int k = 0; k < n_out; k++) out[k] = NULL;
    vf_status s = cond_impl(ctx, pred, then_fn, else_fn, n_in, in_copy, n_out, out, user);
    free(in_copy);
    return s;
}

static vf_status cond_impl(vf_context *ctx, vf_tensor *pred, vf_body then_fn, vf_body else_fn, int n_in,
                           vf_tensor *const *in, int n_out, vf_tensor **out, void *user)
{
    const char *op = "vf_cond";
    if (!ctx->trace) { /* eager: the host reads the predicate and runs one branch */
        bool p;
        if (!read_bool(pred, &p)) return ctx->err.status;
        return vf_call_body_scoped(ctx, op, p ? then_fn : else_fn, in, n_out, out, user);
    }
    int *in_ids = vf_calloc((size_t)n_in + 2, sizeof *in_ids);
    if (!in_ids) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    in_ids[0] = vf_trace_value(ctx, pred, op);
    vf_status s = in_ids[0] < 0 ? ctx->err.status : VF_OK;
    for (int j = 0; s == VF_OK && j < n_in; j++) {
        in_ids[1 + j] = vf_trace_value(ctx, in[j], op);
        if (in_ids[1 + j] < 0) s = ctx->err.status;
    }
    vf_tensor **tmp = vf_calloc((size_t)n_out + 1, sizeof *tmp);
    vf_graph *then_g = NULL, *else_g = NULL;
    if (s == VF_OK && !tmp) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    if (s == VF_OK) then_g = trace_branch(ctx, op, "then_fn", then_fn, n_in, in, in_ids + 1, n_out, tmp, user);
    if (s == VF_OK && !then_g) s = ctx->err.status;
    if (s == VF_OK) else_g = trace_branch(ctx, op, "else_fn", else_fn, n_in, in, in_ids + 1, n_out, tmp, user);
    if (s == VF_OK && !else_g) s = ctx->err.status;
    if (s == VF_OK) s = outputs_match(ctx, op, "then_fn", then_g, "else_fn", else_g, n_out);
    int *ins = NULL;
    if (s == VF_OK) {
        /* pred, the inputs, then_fn's captures, else_fn's captures */
        int total = 1 + n_in + then_g->n_outer + else_g->n_outer;
        ins = vf_malloc(sizeof(int) * (size_t)total);
        if (!ins) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        else {
            memcpy(ins, in_ids, sizeof(int) * (size_t)(1 + n_in));
            copy_ids(ins + 1 + n_in, then_g->outer, then_g->n_outer);
            copy_ids(ins + 1 + n_in + then_g->n_outer, else_g->outer, else_g->n_outer);
            int split = then_g->n_outer;
            const vf_graph *g0 = then_g, *g1 = else_g;
            s = add_control(ctx, op, VF_NODE_COND, total, ins, then_g, else_g, n_out, split, 0, out);
            then_g = else_g = NULL; /* owned by the node now */
            if (s == VF_OK) { /* gradient tapes: the cond as one entry (tape_control.c) */
                vf_tensor **pin = vf_malloc(sizeof *pin * (size_t)(n_in + 1));
                if (!pin) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
                else {
                    pin[0] = pred;
                    copy_tensors(pin + 1, in, n_in);
                    vf_note_control(ctx, VF_NODE_COND, g0, g1, n_in + 1, pin, 0, n_out, out);
                    free(pin);
                }
            }
        }
    }
    vf_graph_free(then_g);
    vf_graph_free(else_g);
    free(ins);
    free(tmp);
    free(in_ids);
    return s;
}

/* ---- vf_while_loop --------------------------------------------------------------- */

static vf_status while_eager(vf_context *ctx, vf_body cond_fn, vf_body body_fn, int n, vf_tensor **vars,
                             int max_it, void *user)
{
    const char *op = "vf_while_loop";
    vf_tensor **next = vf_calloc((size_t)n + 1, sizeof *next);
    bool *mine = vf_calloc((size_t)n + 1, sizeof *mine); /* vars[k] was made by an iteration */
    vf_status s = next && mine ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    for (int it = 0; s == VF_OK && (max_it <= 0 || it < max_it); it++) {
        vf_tensor *pred = NULL;
        bool go = false;
        vf_scope_begin(ctx);
        s = call_body(ctx, op, "cond_fn", cond_fn, vars, 1, &pred, user);
        if (s == VF_OK) s = check_pred(ctx, op, pred);
        if (s == VF_OK && !read_bool(pred, &go)) s = ctx->err.status;
        vf_scope_end(ctx);
        if (s != VF_OK || !go) break;
        s = vf_call_body_scoped(ctx, op, body_fn, vars, n, next, user);
        for (int k = 0; s == VF_OK && k < n; k++)
            if (next[k]->dtype != vars[k]->dtype || next[k]->rank != vars[k]->rank ||
                memcmp(next[k]->shape, vars[k]->shape, sizeof(int64_t) * (size_t)vars[k]->rank) != 0) {
                char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
                s = vf_fail(ctx, VF_ERROR_SHAPE, "%s: loop var %d is %s %s but body_fn returned %s %s in iteration "
                            "%d; loop vars keep their dtype and shape", op, k, vf_dtype_name(vars[k]->dtype),
                            vf_shape_str(a, sizeof a, vars[k]->rank, vars[k]->shape), vf_dtype_name(next[k]->dtype),
                            vf_shape_str(b, sizeof b, next[k]->rank, next[k]->shape), it);
            }
        for (int k = 0; k < n; k++) {
            if (s != VF_OK) { /* drop this iteration's results, keep the last good vars */
                if (next && next[k]) vf_tensor_release(next[k]);
                continue;
            }
            /* An earlier iteration's value, owned by the caller's scope: the
               scope lets go now, and it is freed unless a tape that recorded
               it (or the body, by retaining it) still holds it. */
            if (mine[k]) vf_tensor_disown(vars[k]);
            vars[k] = next[k];
            mine[k] = true;
        }
    }
    free(next);
    free(mine);
    return s;
}

vf_status vf_while_loop(vf_context *ctx, vf_body cond_fn, vf_body body_fn, int n_vars, vf_tensor **vars,
                        int max_iterations, void *user)
{
    VF_LOCKED(ctx);
    const char *op = "vf_while_loop";
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    if (!cond_fn || !body_fn) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: cond_fn and body_fn must be set", op);
    if (check_tensors(ctx, op, "loop vars", n_vars, vars) != VF_OK) return ctx->err.status;
    if (!ctx->trace) return while_eager(ctx, cond_fn, body_fn, n_vars, vars, max_iterations, user);

    int *init = vf_calloc((size_t)n_vars + 1, sizeof *init);
    vf_tensor **tmp = vf_calloc((size_t)n_vars + 1, sizeof *tmp);
    vf_status s = init && tmp ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
    for (int k = 0; s == VF_OK && k < n_vars; k++) {
        init[k] = vf_trace_value(ctx, vars[k], op);
        if (init[k] < 0) s = ctx->err.status;
    }
    vf_graph *cg = NULL, *bg = NULL;
    if (s == VF_OK) cg = trace_branch(ctx, op, "cond_fn", cond_fn, n_vars, vars, init, 1, tmp, user);
    if (s == VF_OK && !cg) s = ctx->err.status;
    if (s == VF_OK) {
        const vf_node *p = &cg->nodes[cg->outputs[0]];
        if (p->dtype != VF_BOOL || vf_shape_numel(&p->shape) != 1 || p->shape.sym) {
            char sh[128];
            s = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: cond_fn returned %s but must return a single bool",
                        op, vf_shape_fmt(sh, sizeof sh, p->dtype, &p->shape));
        }
    }
    if (s == VF_OK) bg = trace_branch(ctx, op, "body_fn", body_fn, n_vars, vars, init, n_vars, tmp, user);
    if (s == VF_OK && !bg) s = ctx->err.status;
    for (int k = 0; s == VF_OK && k < n_vars; k++) {
        const vf_node *o = &bg->nodes[bg->outputs[k]], *v = &vf_trace_graph(ctx)->nodes[init[k]];
        if (o->dtype == v->dtype && vf_shape_equal(&o->shape, &v->shape)) continue;
        char a[128], b[128];
        s = vf_fail(ctx, VF_ERROR_SHAPE, "%s: loop var %d is %s but body_fn returns %s; loop vars keep their "
                    "dtype and shape", op, k, vf_shape_fmt(a, sizeof a, v->dtype, &v->shape),
                    vf_shape_fmt(b, sizeof b, o->dtype, &o->shape));
    }
    int *ins = NULL;
    if (s == VF_OK) {
        int total = n_vars + cg->n_outer + bg->n_outer;
        ins = vf_malloc(sizeof(int) * (size_t)(total + 1));
        if (!ins) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        else {
            copy_ids(ins, init, n_vars);
            copy_ids(ins + n_vars, cg->outer, cg->n_outer);
            copy_ids(ins + n_vars + cg->n_outer, bg->outer, bg->n_outer);
            int split = cg->n_outer;
            const vf_graph *g0 = cg, *g1 = bg;
            vf_tensor **init_t = vf_malloc(sizeof *init_t * (size_t)(n_vars + 1)); /* vars is overwritten */
            if (init_t) copy_tensors(init_t, vars, n_vars);
            s = add_control(ctx, op, VF_NODE_WHILE, total, ins, cg, bg, n_vars, split, max_iterations, vars);
            cg = bg = NULL;
            if (s == VF_OK && !init_t) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
            if (s == VF_OK) vf_note_control(ctx, VF_NODE_WHILE, g0, g1, n_vars, init_t, max_iterations, n_vars, vars);
            free(init_t);
        }
    }
    vf_graph_free(cg);
    vf_graph_free(bg);
    free(ins);
    free(tmp);
    free(init);
    return s;
}
