/* Execution of a concrete function: its optimised graph runs node by node
 * through the backend, in SSA order (a dependency order that keeps the
 * side-effect order). Every node's shape is re-inferred from the concrete
 * inputs, so a graph traced with symbolic dims serves every size. On
 * Vulkan the kernels of one call are queued together and submitted when a
 * value is read; COND and WHILE read their predicate back to the host. */
#include "function/function.h"
#include "kernels/kernels.h"
#include "plan/node_exec.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_status node_fail(vf_run_state *rs, int id, const vf_node *n, vf_status s, const char *msg)
{
    return vf_fail(rs->ctx, s, "vf_function '%s': node %%%d (%s): %s", rs->fn, id, vf_node_name(n), msg);
}

static vf_status new_value(vf_run_state *rs, const char *what, vf_dtype dt, const vf_shape *s, vf_rval *out)
{
    vf_tensor *t = vf_tensor_new(rs->ctx, what, dt, s->rank, s->dim);
    if (!t) return rs->ctx->err.status;
    *out = (vf_rval){.ref = vf_tensor_ref(t), .t = t};
    rs->live_bytes += (int64_t)vf_tensor_bytes(t);
    if (rs->live_bytes > rs->peak_bytes) rs->peak_bytes = rs->live_bytes;
    return VF_OK;
}

static vf_status exec(vf_run_state *rs, const vf_exec *e)
{
    vf_context *ctx = rs->ctx;
    vf_status s = ctx->be.iface->exec(ctx->be.self, e);
    if (s != VF_OK)
        return vf_backend_failed(ctx, s, "vf_function '%s': %s (%s backend)", rs->fn, vf_op_get(e->op)->name,
                                 ctx->be.iface->name);
    rs->dispatches++;
    return VF_OK;
}

static vf_status fill(vf_run_state *rs, const vf_rval *out, double value)
{
    vf_exec e = {.op = VF_OP_FILL, .attrs.value = value, .attrs.dtype = out->ref.dtype, .out = out->ref};
    return exec(rs, &e);
}

/* What the eager entry points do with empty inputs, for sizes that only
   become empty at run time (a symbolic dim of 0): input j is empty, the
   result is not. The rules are the row's (`empty`, `empty_in`). */
static vf_status empty_input(vf_run_state *rs, int id, const vf_node *n, const vf_rval *in, int j,
                             const vf_rval *out)
{
    const vf_op_info *info = vf_op_get(n->op);
    if (info->empty != VF_EMPTY_UNDEFINED) return fill(rs, out, vf_op_empty_value(n->op));
    vf_exec c = {.op = VF_OP_COPY, .n_in = 1, .out = out->ref};
    switch (info->empty_in) {
    case VF_EMPTY_IN_FILL_VALUE: return fill(rs, out, n->attrs.value);
    case VF_EMPTY_IN_FILL_ZERO: return fill(rs, out, 0.0);
    case VF_EMPTY_IN_COPY_OTHER: c.in[0] = in[1 - j].ref; return exec(rs, &c);
    case VF_EMPTY_IN_COPY_FIRST: c.in[0] = in[0].ref; return exec(rs, &c);
    case VF_EMPTY_IN_NO_INDEX:
        return node_fail(rs, id, n, VF_ERROR_INVALID_ARGUMENT, "gathers along an axis of size 0 at this call's "
                         "input sizes: every index is out of range");
    case VF_EMPTY_IN_UNDEFINED: break;
    }
    return node_fail(rs, id, n, VF_ERROR_SHAPE, "reduces an empty set at this call's input sizes; "
                     "max, min and argmax of nothing are undefined");
}

static vf_status const_value(vf_run_state *rs, const vf_node *n, vf_rval *out);

static vf_status run_op(vf_run_state *rs, int id, const vf_node *n, const vf_rval *in, vf_rval *out)
{
    if (vf_node_kept_fill(n)) return const_value(rs, n, out);
    vf_tref refs[3];
    for (int j = 0; j < n->n_in && j < 3; j++) refs[j] = in[j].ref;
    vf_dtype dt;
    vf_shape os;
    vf_err err = {0};
    if (vf_node_infer_at(n, refs, &dt, &os, &err) != VF_OK) return node_fail(rs, id, n, err.status, err.message);
    vf_status s = new_value(rs, "vf_function_call", dt, &os, out);
    if (s != VF_OK || vf_shape_numel(&os) == 0) return s;
    for (int j = 0; j < n->n_in; j++)
        if (vf_tref_numel(&in[j].ref) == 0) return empty_input(rs, id, n, in, j, out);
    vf_exec e = vf_node_op_exec(n, refs, &out->ref);
    return exec(rs, &e);
}

/* A user kernel's node: its call resolved at this call's sizes (as
   vf_kernel_call does eagerly), its outputs into tuple. */
static vf_status run_kernel(vf_run_state *rs, const vf_graph *g, int id, const vf_node *n, const vf_rval *in,
                            vf_rval *tuple)
{
    vf_context *ctx = rs->ctx;
    const vf_ukernel *k = n->uk;
    /* a loaded kernel has no callbacks: its output shapes and workgroup
       counts are those traced, right for the traced input sizes only */
    for (int i = 0; k->loaded && i < k->n_in; i++) {
        vf_shape is = vf_tref_shape(&in[i].ref);
        if (!vf_shape_equal(&is, &g->nodes[n->in[i]].shape)) {
            char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
            return vf_fail(ctx, VF_ERROR_SHAPE, "vf_function '%s': node %%%d: loaded kernel '%s' input %d is %s; a "
                           "loaded kernel runs at its traced sizes only (%s), having no output_shapes or dispatch "
                           "callback", rs->fn, id, k->name, i, vf_shape_str(a, sizeof a, is.rank, is.dim),
                           vf_shape_str(b, sizeof b, g->nodes[n->in[i]].shape.rank, g->nodes[n->in[i]].shape.dim));
        }
    }
    vf_tref refs[VF_KERNEL_MAX_INPUTS], outs[VF_KERNEL_MAX_OUTPUTS];
    bool empty = false;
    for (int i = 0; i < k->n_in; i++) {
        refs[i] = in[i].ref;
        empty = empty || vf_tref_numel(&refs[i]) == 0;
    }
    vf_tensor_spec in_spec[VF_KERNEL_MAX_INPUTS], out_spec[VF_KERNEL_MAX_OUTPUTS];
    vf_kernel_shapes shapes;
    vf_ukernel_exec x = {0};
    char who[160];
    snprintf(who, sizeof who, "vf_function '%s': node %%%d", rs->fn, id);
    vf_status s = vf_ukernel_prepare(ctx, k, refs, n->data, in_spec, out_spec, &shapes, &x, who);
    for (int j = 0; !s && j < k->n_out; j++) {
        vf_shape sh = {.rank = out_spec[j].rank};
        memcpy(sh.dim, out_spec[j].shape, sizeof(int64_t) * (size_t)sh.rank);
        s = new_value(rs, "vf_function_call", out_spec[j].dtype, &sh, &tuple[j]);
        outs[j] = tuple[j].ref;
        empty = empty || vf_tref_numel(&outs[j]) == 0;
    }
    if (s) return s;
    if (empty) { /* nothing to bind: zeros, as vf_kernel_call gives */
        for (int j = 0; !s && j < k->n_out; j++)
            if (vf_tref_numel(&outs[j])) s = fill(rs, &tuple[j], 0.0);
        return s;
    }
    x.in = refs;
    x.out = outs;
    s = vf_ukernel_launch(ctx, &x, who);
    if (s) return s;
    rs->dispatches++;
    return VF_OK;
}

/* A fresh copy of v (for variables, whose storage later assigns change). */
static vf_status copy_value(vf_run_state *rs, const vf_rval *v, const vf_shape *shape, vf_rval *out)
{
    vf_status s = new_value(rs, "vf_function_call", v->ref.dtype, shape, out);
    if (s != VF_OK || vf_shape_numel(shape) == 0) return s;
    vf_exec e = vf_node_copy_exec(&v->ref, shape, &out->ref);
    return exec(rs, &e);
}

/* The value of CONST n, or of a kept FILL (vf_node_kept_fill), made on first
   use and kept by the concrete function: node by node (a while body, the
   CPU backend) a constant made in the body costs nothing per call. */
static vf_status const_value(vf_run_state *rs, const vf_node *n, vf_rval *out)
{
    vf_const_cache *c = rs->consts;
    for (int i = 0; i < c->n; i++)
        if (c->nodes[i] == n) {
            *out = (vf_rval){.ref = vf_tensor_ref(c->tensors[i]), .t = c->tensors[i]};
            return VF_OK;
        }
    if (c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 8;
        const vf_node **nodes = vf_realloc(c->nodes, (size_t)cap * sizeof *nodes);
        if (nodes) c->nodes = nodes;
        vf_tensor **ts = nodes ? vf_realloc(c->tensors, (size_t)cap * sizeof *ts) : NULL;
        if (!ts) return vf_fail(rs->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
        c->tensors = ts;
        c->cap = cap;
    }
    /* made in a scope of its own and kept by the cache alone */
    vf_scope_begin(rs->ctx);
    vf_tensor *t = n->kind == VF_NODE_CONST ? vf_tensor_from_host(rs->ctx, n->dtype, n->shape.rank, n->shape.dim, n->data)
                                            : vf_fill(rs->ctx, n->dtype, n->shape.rank, n->shape.dim, n->attrs.value);
    vf_tensor_hold(t);
    vf_scope_end(rs->ctx);
    if (!t) return rs->ctx->err.status;
    c->nodes[c->n] = n;
    c->tensors[c->n++] = t;
    *out = (vf_rval){.ref = vf_tensor_ref(t), .t = t};
    return VF_OK;
}

vf_status vf_run_const(vf_run_state *rs, const vf_node *n, vf_rval *out) { return const_value(rs, n, out); }

void vf_const_cache_free(vf_const_cache *c)
{
    for (int i = 0; i < c->n; i++) vf_tensor_drop(c->tensors[i]);
    free(c->nodes);
    free(c->tensors);
    *c = (vf_const_cache){0};
}

static vf_status read_pred(vf_run_state *rs, int id, const vf_node *n, const vf_rval *v, bool *out)
{
    if (vf_tref_numel(&v->ref) != 1 || v->ref.dtype != VF_BOOL)
        return node_fail(rs, id, n, VF_ERROR_SHAPE, "the predicate must be one bool");
    uint8_t b = 0;
    vf_context *ctx = rs->ctx;
    vf_status s = ctx->be.iface->download(ctx->be.self, v->ref.buf, v->ref.offset, &b, 1);
    if (s != VF_OK) return vf_backend_failed(ctx, s, "vf_function '%s': reading a predicate", rs->fn);
    *out = b != 0;
    return VF_OK;
}

static vf_status print_value(vf_run_state *rs, const char *label, const vf_rval *v)
{
    vf_context *ctx = rs->ctx;
    size_t bytes = (size_t)vf_tref_numel(&v->ref) * vf_dtype_size(v->ref.dtype);
    void *data = vf_malloc(bytes ? bytes : 1);
    if (!data) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_print: out of host memory (malloc failed)");
    vf_status s = bytes ? ctx->be.iface->download(ctx->be.self, v->ref.buf, v->ref.offset, data, bytes) : VF_OK;
    if (s == VF_OK) vf_print_value(label, v->ref.dtype, v->ref.rank, v->ref.shape, data);
    else vf_backend_failed(ctx, s, "vf_print '%s'", label);
    free(data);
    return s;
}

/* A HOST node: the callback on the input's values (waiting for the
   kernels queued before it that write them) into a new value. */
static vf_status host_value(vf_run_state *rs, const vf_node *n, const vf_rval *x, vf_rval *out)
{
    vf_shape sh = vf_tref_shape(&x->ref);
    vf_status s = new_value(rs, "vf_host_map", x->ref.dtype, &sh, out);
    return s == VF_OK ? vf_host_apply(rs->ctx, n, &x->ref, &out->ref) : s;
}

static bool hold(vf_run_state *rs, vf_tensor *t)
{
    if (!t) return true;
    if (!vf_grow((void **)&rs->held, &rs->cap_held, rs->n_held + 1, sizeof *rs->held)) return false;
    rs->held[rs->n_held++] = vf_tensor_hold(t);
    return true;
}

void vf_run_state_finish(vf_run_state *rs)
{
    for (int i = 0; i < rs->n_held; i++) vf_tensor_drop(rs->held[i]);
    free(rs->held);
    rs->held = NULL;
    rs->n_held = rs->cap_held = 0;
}

/* Params of subgraph k of a COND/WHILE node: explicit ones from args, the
   captures from the node's inputs after `skip`. */
static void sub_params(const vf_graph *s, const vf_rval *args, const vf_rval *caps, vf_rval *out)
{
    for (int p = 0; p < s->n_params; p++) out[p] = p < s->n_explicit ? args[p] : caps[p - s->n_explicit];
}

static vf_status run_cond(vf_run_state *rs, int id, const vf_node *n, const vf_rval *in, vf_rval *tuple)
{
    bool pred = false;
    vf_status s = read_pred(rs, id, n, &in[0], &pred);
    if (s != VF_OK) return s;
    const vf_graph *b = n->sub[pred ? 0 : 1];
    int ne = n->sub[0]->n_explicit;
    const vf_rval *caps = in + 1 + ne + (pred ? 0 : n->split);
    vf_rval *params = vf_malloc(sizeof *params * (size_t)(b->n_params + 1));
    if (!params) return vf_fail(rs->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_cond: out of host memory (malloc failed)");
    sub_params(b, in + 1, caps, params);
    s = vf_graph_run(rs, b, params, tuple);
    free(params);
    return s;
}

static vf_status run_while(vf_run_state *rs, int id, const vf_node *n, const vf_rval *in, vf_rval *tuple)
{
    vf_context *ctx = rs->ctx;
    const vf_graph *cg = n->sub[0], *bg = n->sub[1];
    int nv = n->n_out;
    vf_rval *params = vf_malloc(sizeof *params * (size_t)(cg->n_params + bg->n_params + 1));
    vf_rval *next = vf_malloc(sizeof *next * (size_t)(nv + 1));
    vf_status s = params && next ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_while_loop: out of host memory (malloc failed)");
    /* the loop holds one reference per loop var (tuple = the current vars) */
    for (int k = 0; s == VF_OK && k < nv; k++) {
        tuple[k] = in[k];
        if (tuple[k].t) vf_tensor_hold(tuple[k].t);
    }
    for (int it = 0; s == VF_OK; it++) {
        if (n->max_iterations > 0 && it >= n->max_iterations) break;
        vf_rval pred;
        bool go = false;
        vf_scope_begin(ctx);
        sub_params(cg, tuple, in + nv, params);
        s = vf_graph_run(rs, cg, params, &pred);
        if (s == VF_OK) s = read_pred(rs, id, n, &pred, &go);
        vf_scope_end(ctx);
        if (s != VF_OK || !go) break;
        vf_scope_begin(ctx);
        sub_params(bg, tuple, in + nv + n->split, params);
        s = vf_graph_run(rs, bg, params, next);
        int taken = 0;
        for (int k = 0; s == VF_OK && k < nv; k++) {
            vf_shape a_sh = vf_tref_shape(&tuple[k].ref), b_sh = vf_tref_shape(&next[k].ref);
            if (!vf_shape_equal(&a_sh, &b_sh) || next[k].ref.dtype != tuple[k].ref.dtype) {
                char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
                s = vf_fail(ctx, VF_ERROR_SHAPE, "vf_while_loop in '%s': loop var %d was %s %s and the body "
                            "returned %s %s in iteration %d; loop vars keep their dtype and shape", rs->fn, k,
                            vf_dtype_name(tuple[k].ref.dtype), vf_shape_str(a, sizeof a, tuple[k].ref.rank, tuple[k].ref.shape),
                            vf_dtype_name(next[k].ref.dtype), vf_shape_str(b, sizeof b, next[k].ref.rank, next[k].ref.shape), it);
                break;
            }
            if (next[k].var) { /* a variable's value now, not its later ones */
                vf_shape sh = vf_tref_shape(&next[k].ref);
                s = copy_value(rs, &next[k], &sh, &next[k]);
            }
            if (s == VF_OK && next[k].t) vf_tensor_hold(next[k].t);
            if (s == VF_OK) taken++;
        }
        if (s != VF_OK) { /* drop the references taken for the vars made so far */
            for (int k = 0; k < taken; k++)
                if (next[k].t) vf_tensor_drop(next[k].t);
            vf_scope_end(ctx);
            break;
        }
        vf_scope_end(ctx); /* frees the body's intermediates; the new vars live on */
        for (int k = 0; k < nv; k++) {
            if (tuple[k].t) vf_tensor_drop(tuple[k].t);
            tuple[k] = next[k];
        }
    }
    /* the run keeps the final vars alive until the call ends */
    for (int k = 0; k < nv; k++)
        if (tuple[k].t) {
            if (!hold(rs, tuple[k].t) && s == VF_OK)
                s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_while_loop: out of host memory (malloc failed)");
            vf_tensor_drop(tuple[k].t);
        }
    free(params);
    free(next);
    return s;
}

vf_status vf_graph_run(vf_run_state *rs, const vf_graph *g, const vf_rval *params, vf_rval *outs)
{
    vf_context *ctx = rs->ctx;
    vf_rval *v = vf_calloc((size_t)(g->n ? g->n : 1), sizeof *v);
    vf_rval **tuples = vf_calloc((size_t)(g->n ? g->n : 1), sizeof *tuples);
    vf_rval in[16];
    vf_status s = v && tuples ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
    for (int i = 0; s == VF_OK && i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        vf_rval *args = n->n_in <= 16 ? in : vf_malloc(sizeof *args * (size_t)n->n_in);
        if (!args) {
            s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
            break;
        }
        for (int j = 0; j < n->n_in; j++) args[j] = v[n->in[j]];
        switch (n->kind) {
        case VF_NODE_PARAM: v[i] = params[n->index]; break;
        case VF_NODE_CAPTURE: {
            const vf_capture *c = &rs->caps[n->index];
            v[i] = (vf_rval){.ref = c->ref, .var = c->is_var};
            break;
        }
        case VF_NODE_CONST: s = const_value(rs, n, &v[i]); break;
        case VF_NODE_OP: s = run_op(rs, i, n, args, &v[i]); break;
        case VF_NODE_RESHAPE: {
            vf_dtype dt;
            vf_shape out;
            vf_err err = {0};
            if (vf_node_infer_at(n, &args[0].ref, &dt, &out, &err) != VF_OK) {
                s = node_fail(rs, i, n, err.status, err.message);
                break;
            }
            if (args[0].var) {
                s = copy_value(rs, &args[0], &out, &v[i]);
                break;
            }
            v[i] = args[0];
            vf_tref_reshape(&v[i].ref, &out);
            break;
        }
        case VF_NODE_ASSIGN: {
            const vf_capture *c = &rs->caps[n->index];
            vf_shape vs = vf_tref_shape(&c->ref);
            vf_dtype dt;
            vf_err err = {0};
            if (vf_node_infer_at(n, &args[0].ref, &dt, &vs, &err) != VF_OK) {
                s = node_fail(rs, i, n, err.status, err.message);
                break;
            }
            v[i] = (vf_rval){.ref = c->ref, .var = true};
            if (!vf_node_assign_is_self(&args[0].ref, &c->ref) && vf_tref_numel(&c->ref) > 0) {
                vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = args[0].ref, .out = c->ref};
                s = exec(rs, &e);
            }
            break;
        }
        case VF_NODE_PRINT: s = print_value(rs, n->label, &args[0]); break;
        case VF_NODE_HOST: s = host_value(rs, n, &args[0], &v[i]); break;
        case VF_NODE_COND:
        case VF_NODE_WHILE:
            tuples[i] = vf_calloc((size_t)n->n_out + 1, sizeof **tuples);
            if (!tuples[i]) {
                s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
                break;
            }
            s = n->kind == VF_NODE_COND ? run_cond(rs, i, n, args, tuples[i]) : run_while(rs, i, n, args, tuples[i]);
            break;
        case VF_NODE_KERNEL:
            tuples[i] = vf_calloc((size_t)n->n_out + 1, sizeof **tuples);
            s = tuples[i] ? run_kernel(rs, g, i, n, args, tuples[i])
                          : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
            break;
        case VF_NODE_PROJ: v[i] = tuples[n->in[0]][n->index]; break;
        default: s = node_fail(rs, i, n, VF_ERROR_UNSUPPORTED, "cannot run this node kind"); break;
        }
        if (args != in) free(args);
    }
    for (int k = 0; s == VF_OK && k < g->n_outputs; k++) outs[k] = v[g->outputs[k]];
    if (tuples)
        for (int i = 0; i < g->n; i++) free(tuples[i]);
    free(tuples);
    free(v);
    return s;
}

vf_tensor *vf_rval_to_output(vf_run_state *rs, const vf_rval *v)
{
    vf_context *ctx = rs->ctx;
    int depth = ctx->n_scopes - 1;
    vf_tensor *t = v->t;
    bool exact = t && t->rank == v->ref.rank && memcmp(t->shape, v->ref.shape, sizeof(int64_t) * (size_t)t->rank) == 0;
    if (t && !v->var && exact && t->scope == depth) return vf_keep(t);
    if (t && !v->var) return vf_keep(vf_tensor_view(t, v->ref.rank, v->ref.shape));
    vf_rval c;
    vf_shape sh = vf_tref_shape(&v->ref);
    if (copy_value(rs, v, &sh, &c) != VF_OK) return NULL;
    return vf_keep(c.t);
}
