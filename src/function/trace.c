/* Tracing: the hooks that turn op calls into graph nodes (see trace.h). */
#include "function/trace.h"
#include "graph/uelem.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VF_NO_VALUE 0xffffffffu

static vf_status oom(vf_context *ctx, const char *op)
{
    return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed) while tracing", op);
}

static vf_frame *top(vf_trace *tr) { return &tr->frames[tr->depth - 1]; }

vf_graph *vf_trace_graph(vf_context *ctx) { return top(ctx->trace)->g; }

/* What the API layer calls while a body is traced (hooks.h); defined below. */
static const vf_tracer tracer;

vf_trace *vf_trace_begin(vf_context *ctx, const char *name)
{
    vf_trace *tr = vf_calloc(1, sizeof *tr);
    vf_graph *root = vf_graph_new(NULL);
    if (!tr || !root) {
        free(tr);
        vf_graph_free(root);
        oom(ctx, "vf_function_call");
        return NULL;
    }
    tr->gen = ++ctx->trace_gen;
    snprintf(tr->name, sizeof tr->name, "%s", name);
    ctx->trace = tr;
    ctx->tracer = &tracer; /* before any symbolic tensor (hooks.h) */
    if (!vf_trace_push(ctx, root)) {
        ctx->trace = NULL;
        free(tr->graphs); /* grown before the frames' growth failed */
        free(tr->frames);
        free(tr);
        vf_graph_free(root);
        oom(ctx, "vf_function_call");
        return NULL;
    }
    return tr;
}

void vf_captures_free(vf_capture *caps, int n)
{
    for (int i = 0; caps && i < n; i++) vf_tensor_drop(caps[i].t); /* NULL: its allocation failed */
    free(caps);
}

vf_graph *vf_trace_end(vf_context *ctx, bool ok, vf_capture **caps, int *n_caps)
{
    vf_trace *tr = ctx->trace;
    vf_graph *root = tr->graphs[0];
    while (tr->depth > 0) vf_trace_pop(ctx);
    ctx->trace = NULL;
    if (ok) {
        *caps = tr->caps;
        *n_caps = tr->n_caps;
    } else {
        vf_captures_free(tr->caps, tr->n_caps);
        vf_graph_free(root);
        root = NULL;
    }
    free(tr->graphs);
    free(tr->frames);
    free(tr);
    return root;
}

bool vf_trace_push(vf_context *ctx, vf_graph *g)
{
    vf_trace *tr = ctx->trace;
    if (!vf_grow((void **)&tr->graphs, &tr->cap_graphs, tr->n_graphs + 1, sizeof *tr->graphs)) return false;
    if (!vf_grow((void **)&tr->frames, &tr->cap_frames, tr->depth + 1, sizeof *tr->frames)) return false;
    tr->graphs[tr->n_graphs] = g;
    tr->frames[tr->depth++] = (vf_frame){.g = g, .gid = tr->n_graphs++};
    return true;
}

void vf_trace_pop(vf_context *ctx)
{
    vf_trace *tr = ctx->trace;
    free(top(tr)->cap_val);
    tr->depth--;
}

void vf_trace_forget_variables(vf_context *ctx)
{
    vf_frame *f = top(ctx->trace);
    for (int i = 0; i < f->n_cap_val; i++)
        if (ctx->trace->caps[i].is_var) f->cap_val[i] = -1;
}

/* ---- tensors and refs ---------------------------------------------------- */

void vf_trace_ref(const vf_tensor *t, vf_tref *r)
{
    /* never a real buffer: a backend given it would be a bug; the hooks
       decode it before anything reaches a backend */
    r->buf = (vf_buffer *)t->ctx->trace;
    r->offset = ((size_t)(uint32_t)t->sym_graph << 32) | (uint32_t)t->sym_value;
}

vf_status vf_trace_check(vf_context *ctx, const vf_tensor *t, const char *op, int index)
{
    if (!t->sym_gen || (ctx->trace && ctx->trace->gen == t->sym_gen)) return VF_OK;
    return vf_fail(ctx, VF_ERROR_TRACE,
                   "%s%s: input %d is a symbolic tensor of a vf_function trace that has ended (it "
                   "leaked out of the function body); return it as an output of the function instead",
                   strncmp(op, "vf_", 3) ? "vf_" : "", op, index);
}

vf_status vf_trace_read_error(const vf_tensor *t)
{
    vf_context *ctx = t->ctx;
    char sh[VF_SHAPE_STR_LEN];
    vf_shape_str(sh, sizeof sh, t->rank, t->shape);
    if (ctx->trace && ctx->trace->gen == t->sym_gen)
        return vf_fail(ctx, VF_ERROR_TRACE,
                       "vf_tensor_read: the %s %s tensor is symbolic while vf_function '%s' is being "
                       "traced: its value exists only when the function runs. Use vf_cond / "
                       "vf_while_loop for control flow that depends on it, vf_print to print it at "
                       "run time, or return it as an output", vf_dtype_name(t->dtype), sh, ctx->trace->name);
    return vf_fail(ctx, VF_ERROR_TRACE,
                   "vf_tensor_read: the %s %s tensor is a symbolic tensor of a vf_function trace that "
                   "has ended; return it from the function to read its value (or use vf_print, "
                   "vf_cond, vf_while_loop inside the body)", vf_dtype_name(t->dtype), sh);
}

static vf_shape shape_of_ref(const vf_tref *r)
{
    vf_shape s = {.rank = r->rank};
    memcpy(s.dim, r->shape, sizeof s.dim);
    return s;
}

static int new_node(vf_context *ctx, vf_node_kind kind, int n_in, const int *in, vf_dtype dt,
                    const vf_shape *shape, const char *op)
{
    vf_graph *g = vf_trace_graph(ctx);
    vf_shape s = *shape;
    int id = vf_graph_add(g, kind, n_in, in);
    if (id < 0) {
        oom(ctx, op);
        return -1;
    }
    g->nodes[id].dtype = dt;
    g->nodes[id].shape = s;
    return id;
}

vf_shape vf_trace_shape_of(vf_context *ctx, int id) { return vf_trace_graph(ctx)->nodes[id].shape; }

/* ---- captures ------------------------------------------------------------ */

static int capture_index(vf_context *ctx, const vf_tref *r, const char *op)
{
    vf_trace *tr = ctx->trace;
    for (int i = 0; i < tr->n_caps; i++) {
        const vf_tref *c = &tr->caps[i].ref;
        if (c->buf == r->buf && c->offset == r->offset && c->dtype == r->dtype && c->rank == r->rank &&
            memcmp(c->shape, r->shape, sizeof(int64_t) * (size_t)r->rank) == 0)
            return i;
    }
    vf_tensor *owner = NULL;
    for (vf_tensor *t = ctx->live; t; t = t->next)
        if (t->st && t->st->buf == r->buf && t->offset == r->offset && (!owner || t->is_variable)) owner = t;
    if (!owner) {
        vf_fail(ctx, VF_ERROR_TRACE, "%s: internal error: an input of a traced op belongs to no tensor", op);
        return -1;
    }
    if (!vf_grow((void **)&tr->caps, &tr->cap_caps, tr->n_caps + 1, sizeof *tr->caps)) return oom(ctx, op), -1;
    tr->caps[tr->n_caps] = (vf_capture){.t = vf_tensor_hold(owner), .ref = *r, .is_var = owner->is_variable};
    return tr->n_caps++;
}

static int capture_value(vf_context *ctx, const vf_tref *r, const char *op)
{
    int ci = capture_index(ctx, r, op);
    if (ci < 0) return -1;
    vf_trace *tr = ctx->trace;
    vf_frame *f = top(tr);
    if (f->n_cap_val < tr->n_caps) {
        int *cv = vf_realloc(f->cap_val, (size_t)tr->n_caps * sizeof *cv);
        if (!cv) return oom(ctx, op), -1;
        for (int i = f->n_cap_val; i < tr->n_caps; i++) cv[i] = -1;
        f->cap_val = cv;
        f->n_cap_val = tr->n_caps;
    }
    if (f->cap_val[ci] >= 0) return f->cap_val[ci];
    vf_shape s = shape_of_ref(r);
    int id = new_node(ctx, VF_NODE_CAPTURE, 0, NULL, r->dtype, &s, op);
    if (id < 0) return -1;
    f->g->nodes[id].index = ci;
    f->g->nodes[id].is_var = tr->caps[ci].is_var;
    f->cap_val[ci] = id;
    return id;
}

/* Value v of graph frames[d].g made visible in the top graph: each graph
   below gets a capture param for it. */
static int lift(vf_context *ctx, int d, int v, const char *op)
{
    vf_trace *tr = ctx->trace;
    for (int level = d + 1; level < tr->depth; level++) {
        vf_graph *g = tr->frames[level].g, *parent = tr->frames[level - 1].g;
        int found = -1;
        for (int k = 0; k < g->n_outer && found < 0; k++)
            if (g->outer[k] == v)
                for (int i = 0; i < g->n && found < 0; i++)
                    if (g->nodes[i].kind == VF_NODE_PARAM && g->nodes[i].index == g->n_explicit + k) found = i;
        if (found < 0) {
            int *outer = vf_realloc(g->outer, (size_t)(g->n_outer + 1) * sizeof *outer);
            if (!outer) return oom(ctx, op), -1;
            g->outer = outer;
            int id = vf_graph_add(g, VF_NODE_PARAM, 0, NULL);
            if (id < 0) return oom(ctx, op), -1;
            g->nodes[id].dtype = parent->nodes[v].dtype;
            g->nodes[id].shape = parent->nodes[v].shape;
            g->nodes[id].index = g->n_params++;
            g->outer[g->n_outer++] = v;
            found = id;
        }
        v = found;
    }
    return v;
}

vf_tensor *vf_trace_capture_tensor(vf_context *ctx, int ci, const char *op)
{
    int id = capture_value(ctx, &ctx->trace->caps[ci].ref, op);
    return id < 0 ? NULL : vf_trace_tensor_for(ctx, id);
}

static int value_of_ref(vf_context *ctx, const vf_tref *r, const char *op)
{
    vf_trace *tr = ctx->trace;
    if (r->buf != (vf_buffer *)tr) return capture_value(ctx, r, op);
    int gid = (int)(r->offset >> 32);
    uint32_t v = (uint32_t)(r->offset & 0xffffffffu);
    int d = -1;
    for (int i = 0; i < tr->depth; i++)
        if (tr->frames[i].gid == gid) d = i;
    if (d < 0) {
        vf_fail(ctx, VF_ERROR_TRACE,
                "%s: an input was made inside a vf_cond branch or vf_while_loop body of '%s' and is "
                "used outside it; return it from the branch or body as an output instead", op, tr->name);
        return -1;
    }
    if (v == VF_NO_VALUE) {
        /* an empty tensor: the frontend made it without running anything */
        vf_shape s = shape_of_ref(r);
        int id = new_node(ctx, VF_NODE_OP, 0, NULL, r->dtype, &s, op);
        if (id >= 0) vf_trace_graph(ctx)->nodes[id].op = VF_OP_FILL;
        return id;
    }
    return lift(ctx, d, (int)v, op);
}

int vf_trace_value(vf_context *ctx, vf_tensor *t, const char *op)
{
    if (vf_trace_check(ctx, t, op, 0) != VF_OK) return -1;
    vf_tref r = vf_tensor_ref(t);
    return value_of_ref(ctx, &r, op);
}

static void bind(vf_context *ctx, vf_tensor *t, int id)
{
    t->sym_graph = top(ctx->trace)->gid;
    t->sym_value = id;
}

vf_tensor *vf_trace_tensor_for(vf_context *ctx, int id)
{
    const vf_node *n = &vf_trace_graph(ctx)->nodes[id];
    vf_tensor *t = vf_tensor_new(ctx, "vf_function", n->dtype, n->shape.rank, n->shape.dim);
    if (t) bind(ctx, t, id);
    return t;
}

vf_tensor *vf_trace_tensor_origin(vf_context *ctx, int id)
{
    vf_trace *tr = ctx->trace;
    int d = tr->depth - 1;
    for (; d > 0; d--) { /* a capture param: the value it lifts from the graph below */
        const vf_graph *g = tr->frames[d].g;
        const vf_node *n = &g->nodes[id];
        if (n->kind != VF_NODE_PARAM || n->index < g->n_explicit) break;
        id = g->outer[n->index - g->n_explicit];
    }
    const vf_node *n = &tr->frames[d].g->nodes[id];
    vf_tensor *t = vf_tensor_new(ctx, "vf_function", n->dtype, n->shape.rank, n->shape.dim);
    if (t) {
        t->sym_graph = tr->frames[d].gid;
        t->sym_value = id;
    }
    return t;
}

vf_tensor *vf_trace_param(vf_context *ctx, vf_dtype dt, const vf_shape *shape)
{
    vf_graph *g = vf_trace_graph(ctx);
    int id = new_node(ctx, VF_NODE_PARAM, 0, NULL, dt, shape, "vf_function");
    if (id < 0) return NULL;
    g->nodes[id].index = g->n_params++;
    g->n_explicit = g->n_params;
    return vf_trace_tensor_for(ctx, id);
}

/* ---- recording ops -------------------------------------------------------- */

/* The target of a reshape from `from` to dims: -1 where a symbolic dim went. */
static vf_shape target_for(const vf_shape *from, int rank, const int64_t *dims)
{
    vf_shape t = {.rank = rank};
    memcpy(t.dim, dims, sizeof(int64_t) * (size_t)rank);
    if (!from->sym) return t;
    int64_t symsize = -1;
    for (int i = 0; i < from->rank; i++)
        if ((from->sym >> i) & 1u) symsize = from->dim[i];
    for (int i = 0; i < rank; i++)
        if (dims[i] == symsize) {
            t.dim[i] = -1;
            break;
        }
    return t;
}

/* The entry points sized the result with the same engine (graph/shape.c);
   inferring again here carries the symbolic dims into the node's shape. */
static int add_reshape(vf_context *ctx, int x, const vf_shape *target, const char *op)
{
    vf_graph *g = vf_trace_graph(ctx);
    vf_dtype dt = g->nodes[x].dtype;
    vf_shape in = g->nodes[x].shape, out;
    int id = new_node(ctx, VF_NODE_RESHAPE, 1, &x, dt, target, op);
    if (id < 0) return -1;
    g = vf_trace_graph(ctx);
    g->nodes[id].target = *target;
    vf_err err = {0};
    vf_dtype odt;
    if (vf_infer(&g->nodes[id], &dt, &in, &odt, &out, &err) != VF_OK) {
        vf_fail(ctx, err.status, "%s (while tracing '%s'): %s", op, ctx->trace->name, err.message);
        return -1;
    }
    g->nodes[id].shape = out;
    return id;
}

/* An input of an exec as a value of the graph, reshaped when the exec sees
   it with another shape than its tensor has (matmul's vectors). */
static int input_value(vf_context *ctx, const vf_tref *r, const char *op)
{
    int v = value_of_ref(ctx, r, op);
    if (v < 0) return -1;
    const vf_node *n = &vf_trace_graph(ctx)->nodes[v];
    if (n->shape.rank == r->rank && memcmp(n->shape.dim, r->shape, sizeof(int64_t) * (size_t)r->rank) == 0)
        return v;
    vf_shape from = n->shape, t = target_for(&from, r->rank, r->shape);
    return add_reshape(ctx, v, &t, op);
}

/* Records e as a node; returns its id. The entry point sized e->out with
   the shape engine; the node's shape comes from the same engine on the
   input nodes' shapes, which carries their symbolic dims. */
static int record(vf_context *ctx, const vf_exec *e, const char *op)
{
    int in[3];
    vf_dtype dts[3];
    vf_shape shapes[3];
    for (int j = 0; j < e->n_in; j++) {
        in[j] = input_value(ctx, &e->in[j], op);
        if (in[j] < 0) return -1;
        const vf_node *x = &vf_trace_graph(ctx)->nodes[in[j]];
        dts[j] = x->dtype;
        shapes[j] = x->shape;
    }
    vf_shape out = shape_of_ref(&e->out);
    int id = new_node(ctx, VF_NODE_OP, e->n_in, in, e->out.dtype, &out, op);
    if (id < 0) return -1;
    vf_node *n = &vf_trace_graph(ctx)->nodes[id];
    n->op = e->op;
    n->attrs = e->attrs;
    if (vf_op_holds_uelem(e->op)) vf_uelem_retain(n->attrs.uelem); /* the node's reference */
    if (vf_op_get(e->op)->kind == VF_KIND_SOURCE) n->attrs.dtype = e->out.dtype;
    vf_err err = {0};
    vf_dtype dt;
    vf_shape inferred;
    if (vf_infer(n, dts, shapes, &dt, &inferred, &err) != VF_OK) {
        vf_fail(ctx, err.status, "%s (while tracing '%s'): %s", op, ctx->trace->name, err.message);
        return -1;
    }
    n->shape = inferred;
    return id;
}

/* Binds out to node id, reshaping when out's shape differs (matmul's vectors). */
static vf_tensor *finish(vf_context *ctx, int id, vf_tensor *out, const char *op)
{
    const vf_node *n = &vf_trace_graph(ctx)->nodes[id];
    if (n->shape.rank != out->rank ||
        memcmp(n->shape.dim, out->shape, sizeof(int64_t) * (size_t)out->rank) != 0) {
        vf_shape from = n->shape, t = target_for(&from, out->rank, out->shape);
        id = add_reshape(ctx, id, &t, op);
        if (id < 0) {
            vf_tensor_release(out);
            return NULL;
        }
    }
    bind(ctx, out, id);
    return out;
}

vf_tensor *vf_trace_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out)
{
    const char *op = vf_op_get(e->op)->name;
    int id = record(ctx, e, op);
    if (id < 0) {
        vf_tensor_release(out);
        return NULL;
    }
    return finish(ctx, id, out, op);
}

vf_tensor *vf_trace_reshape(vf_context *ctx, vf_tensor *x, int rank, const int64_t *user, const int64_t *shape)
{
    int v = vf_trace_value(ctx, x, "vf_reshape");
    if (v < 0) return NULL;
    vf_shape t = {.rank = rank};
    if (rank > 0) memcpy(t.dim, user, sizeof(int64_t) * (size_t)rank);
    /* a symbolic input needs the -1 for its varying dim; add it if the user
       gave every size (they came from the traced sizes) */
    bool has_infer = false;
    for (int i = 0; i < rank; i++) has_infer = has_infer || user[i] == -1;
    vf_shape from = vf_trace_graph(ctx)->nodes[v].shape;
    if (!has_infer) t = target_for(&from, rank, shape);
    int id = add_reshape(ctx, v, &t, "vf_reshape");
    if (id < 0) return NULL;
    vf_tensor *out = vf_tensor_new(ctx, "vf_reshape", x->dtype, rank, shape);
    if (out) bind(ctx, out, id);
    return out;
}

vf_tensor *vf_trace_view(vf_tensor *src, vf_tensor *view)
{
    vf_context *ctx = src->ctx;
    int v = vf_trace_value(ctx, src, "vf_reshape");
    if (v < 0) {
        vf_tensor_release(view);
        return NULL;
    }
    vf_shape from = vf_trace_graph(ctx)->nodes[v].shape, t = target_for(&from, view->rank, view->shape);
    int id = add_reshape(ctx, v, &t, "vf_reshape");
    if (id < 0) {
        vf_tensor_release(view);
        return NULL;
    }
    bind(ctx, view, id);
    return view;
}

vf_tensor *vf_trace_const(vf_tensor *t, const void *data)
{
    vf_context *ctx = t->ctx;
    size_t bytes = (size_t)t->numel * vf_dtype_size(t->dtype);
    vf_shape s = {.rank = t->rank};
    memcpy(s.dim, t->shape, sizeof s.dim);
    void *copy = vf_malloc(bytes ? bytes : 1);
    int id = copy ? new_node(ctx, VF_NODE_CONST, 0, NULL, t->dtype, &s, "vf_tensor_from_host") : -1;
    if (id < 0) {
        free(copy);
        if (!copy) oom(ctx, "vf_tensor_from_host");
        vf_tensor_release(t);
        return NULL;
    }
    memcpy(copy, data, bytes);
    vf_trace_graph(ctx)->nodes[id].data = copy;
    vf_trace_graph(ctx)->nodes[id].bytes = bytes;
    bind(ctx, t, id);
    return t;
}

vf_status vf_trace_assign(vf_context *ctx, const vf_exec *e, const char *op)
{
    int ci = capture_value(ctx, &e->out, op); /* the variable, captured by reference */
    if (ci < 0) return ctx->err.status;
    int cap = vf_trace_graph(ctx)->nodes[ci].index;
    int value;
    if (e->op == VF_OP_COPY) {
        value = input_value(ctx, &e->in[0], op);
    } else { /* assign_add / assign_sub: the op, then a copy into the variable */
        vf_exec ee = *e;
        value = record(ctx, &ee, op);
    }
    if (value < 0) return ctx->err.status;
    vf_shape vs = shape_of_ref(&e->out);
    int id = new_node(ctx, VF_NODE_ASSIGN, 1, &value, e->out.dtype, &vs, op);
    if (id < 0) return ctx->err.status;
    vf_trace_graph(ctx)->nodes[id].index = cap;
    top(ctx->trace)->cap_val[cap] = id; /* later reads in this body see the new value */
    return VF_OK;
}

vf_status vf_trace_print(vf_context *ctx, const char *label, vf_tensor *t)
{
    int v = vf_trace_value(ctx, t, "vf_print");
    if (v < 0) return ctx->err.status;
    const vf_node *x = &vf_trace_graph(ctx)->nodes[v];
    vf_shape s = x->shape;
    int id = new_node(ctx, VF_NODE_PRINT, 1, &v, x->dtype, &s, "vf_print");
    if (id < 0) return ctx->err.status;
    char *l = vf_strdup(label ? label : "");
    if (!l) return oom(ctx, "vf_print");
    vf_trace_graph(ctx)->nodes[id].label = l;
    return VF_OK;
}

vf_tensor *vf_trace_host(vf_context *ctx, vf_tensor *t, vf_host_fn fn, void *user, const char *name)
{
    int v = vf_trace_value(ctx, t, "vf_host_map");
    if (v < 0) return NULL;
    const vf_node *x = &vf_trace_graph(ctx)->nodes[v];
    vf_shape s = x->shape;
    int id = new_node(ctx, VF_NODE_HOST, 1, &v, x->dtype, &s, "vf_host_map");
    if (id < 0) return NULL;
    vf_node *n = &vf_trace_graph(ctx)->nodes[id];
    n->host_fn = fn, n->host_user = user;
    if (!(n->label = vf_strdup(name))) return oom(ctx, "vf_host_map"), NULL;
    return vf_trace_tensor_for(ctx, id);
}

uint32_t vf_trace_sym_dims(vf_context *ctx, vf_tensor *t, const char *op)
{
    if (!ctx->trace || !t->sym_gen || t->sym_gen != ctx->trace->gen) return 0;
    int v = vf_trace_value(ctx, t, op);
    return v < 0 ? 0 : vf_trace_shape_of(ctx, v).sym;
}

int vf_trace_kernel(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                    const uint32_t groups[3], vf_tensor **out)
{
    const char *op = k->name;
    int ids[VF_KERNEL_MAX_INPUTS];
    uint32_t sym = 0;
    for (int i = 0; i < k->n_in; i++) {
        vf_tref r = vf_tensor_ref(in[i]);
        ids[i] = input_value(ctx, &r, op);
        if (ids[i] < 0) return -1;
        sym |= vf_trace_graph(ctx)->nodes[ids[i]].shape.sym;
    }
    vf_shape none = {0};
    int id = new_node(ctx, VF_NODE_KERNEL, k->n_in, ids, VF_F32, &none, op);
    if (id < 0) return -1;
    vf_node *n = &vf_trace_graph(ctx)->nodes[id];
    n->uk = vf_ukernel_retain(k);
    n->n_out = k->n_out;
    memcpy(n->kgroups, groups, sizeof n->kgroups);
    if (k->param_bytes) {
        n->data = vf_malloc(k->param_bytes);
        if (!n->data) return oom(ctx, op), -1;
        memcpy(n->data, params, k->param_bytes);
        n->bytes = k->param_bytes;
    }
    for (int j = 0; j < k->n_out; j++) {
        vf_shape s = {.rank = out[j]->rank};
        memcpy(s.dim, out[j]->shape, sizeof(int64_t) * (size_t)s.rank);
        /* a callback's output sizes may follow a symbolic input's: re-computed per call */
        if (sym && k->output_shapes) s.sym = (1u << s.rank) - 1u;
        int p = new_node(ctx, VF_NODE_PROJ, 1, &id, out[j]->dtype, &s, op);
        if (p < 0) return -1;
        vf_trace_graph(ctx)->nodes[p].index = j;
        bind(ctx, out[j], p);
    }
    return id;
}

static const vf_tracer tracer = {
    .exec = vf_trace_exec,
    .reshape = vf_trace_reshape,
    .view = vf_trace_view,
    .constant = vf_trace_const,
    .ref = vf_trace_ref,
    .check = vf_trace_check,
    .read_error = vf_trace_read_error,
    .sym_dims = vf_trace_sym_dims,
    .kernel = vf_trace_kernel,
};
