/* vf_cond -> select. A traced vf_cond normally runs as a COND node: the
 * host reads the predicate and runs one branch. When both branches are
 * small and free of host effects, computing both and picking per output
 * with `where` is cheaper than a round trip to the host, and keeps the
 * whole call in one submit on a GPU.
 *
 * Assigns to variables inside the branches are turned into unconditional
 * ones: each assigned variable gets `assign(var, where(pred, then_value,
 * else_value))`, where a branch that does not assign it gives the value
 * the variable had before the cond. Both branches are inlined before any
 * of these assigns, so a read of a variable inside a branch sees the old
 * value until that branch assigns it and the branch's own new value after
 * (reads are renamed to it), whatever the other branch did. PRINT stays a
 * host decision: printing is host I/O and only the taken branch may print. */
#include "graph/passes.h"
#include "util/fault.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

/* "Cheap": each branch of at most this many nodes; both are always run. */
#define VF_SELECT_MAX_NODES 64

static bool cheap(const vf_graph *s)
{
    if (!s || s->n > VF_SELECT_MAX_NODES) return false;
    for (int i = 0; i < s->n; i++) {
        const vf_node *n = &s->nodes[i];
        if (n->kind == VF_NODE_PRINT || n->kind == VF_NODE_HOST || n->kind == VF_NODE_COND || n->kind == VF_NODE_WHILE ||
            n->kind == VF_NODE_KERNEL)
            return false;
        /* the selected value is stored as is: it must already be the variable's dtype */
        if (n->kind == VF_NODE_ASSIGN && s->nodes[n->in[0]].dtype != n->dtype) return false;
    }
    return true;
}

static bool selectable(const vf_graph *g, const vf_node *n)
{
    if (n->kind != VF_NODE_COND || !cheap(n->sub[0]) || !cheap(n->sub[1])) return false;
    const vf_node *pred = &g->nodes[n->in[0]];
    if (pred->shape.sym || vf_shape_numel(&pred->shape) != 1) return false;
    for (int k = 0; k < n->n_out; k++) {
        const vf_node *a = &n->sub[0]->nodes[n->sub[0]->outputs[k]];
        const vf_node *b = &n->sub[1]->nodes[n->sub[1]->outputs[k]];
        if (a->dtype != b->dtype || !vf_shape_equal(&a->shape, &b->shape) || a->shape.sym != b->shape.sym)
            return false;
    }
    return true;
}

/* A variable assigned in a branch being inlined: ref, an outer read of it
   (by reference, so it holds the old value until the assigns at the end);
   cur[b], the value branch b gave it last, -1 while b has not assigned it. */
typedef struct var_state {
    int index, ref, cur[2];
} var_state;

typedef struct var_list {
    var_state *v;
    int n, cap;
} var_list;

static var_state *find_var(var_list *vl, int index)
{
    for (int i = 0; i < vl->n; i++)
        if (vl->v[i].index == index) return &vl->v[i];
    return NULL;
}

/* Value id as branch b reads it: a read of a variable that b has assigned
   is its new value (a plain id for reads of any other kind). */
static int resolve(const vf_graph *g, var_list *vl, int b, int id)
{
    const vf_node *x = &g->nodes[id];
    bool var = (x->kind == VF_NODE_CAPTURE && x->is_var) || x->kind == VF_NODE_ASSIGN;
    const var_state *e = var && vl ? find_var(vl, x->index) : NULL;
    return e && e->cur[b] >= 0 ? e->cur[b] : id;
}

/* Moves node src into dst with its inputs renamed by map (and, inside
   branch b of a cond, reads of assigned variables by vl); -1: out of memory. */
static int move_node(vf_graph *dst, vf_node *src, const int *map, var_list *vl, int b)
{
    int tmp[16] = {0}, *in = src->n_in <= 16 ? tmp : vf_malloc(sizeof(int) * (size_t)src->n_in);
    if (!in) return -1;
    for (int j = 0; j < src->n_in; j++) in[j] = resolve(dst, vl, b, map[src->in[j]]);
    int id = vf_graph_add(dst, src->kind, src->n_in, in);
    if (in != tmp) free(in);
    if (id < 0) return -1;
    vf_node *d = &dst->nodes[id];
    int *keep = d->in;
    *d = *src;
    d->in = keep;
    free(src->in);
    src->in = NULL;
    src->n_in = 0;
    src->data = NULL;
    src->label = NULL;
    src->sub[0] = src->sub[1] = NULL;
    src->uk = NULL;               /* the references moved with the node */
    src->attrs.uelem = NULL;
    return id;
}

static int add_node(vf_graph *dst, vf_node_kind kind, int n_in, const int *in, vf_dtype dt,
                    const vf_shape *shape)
{
    int id = vf_graph_add(dst, kind, n_in, in);
    if (id >= 0) {
        dst->nodes[id].dtype = dt;
        dst->nodes[id].shape = *shape;
    }
    return id;
}

/* The record of an assign to variable x->index in branch b: no node is
   emitted here (the assign happens after both branches). sub_id: what
   later uses of the assign node (a variable read) are renamed to. */
static bool branch_assign(vf_graph *dst, var_list *vl, int b, const vf_node *x, int value, int *sub_id)
{
    var_state *e = find_var(vl, x->index);
    if (!e) {
        if (!vf_grow((void **)&vl->v, &vl->cap, vl->n + 1, sizeof *vl->v)) return false;
        int ref = add_node(dst, VF_NODE_CAPTURE, 0, NULL, x->dtype, &x->shape);
        if (ref < 0) return false;
        dst->nodes[ref].index = x->index;
        dst->nodes[ref].is_var = true;
        e = &vl->v[vl->n++];
        *e = (var_state){.index = x->index, .ref = ref, .cur = {-1, -1}};
    }
    e->cur[b] = resolve(dst, vl, b, value);
    *sub_id = e->ref;
    return true;
}

/* Inlines branch s of cond node n (params from outer ids) into dst; fills
   out[k] with the ids of its outputs. */
static bool inline_branch(vf_graph *dst, vf_graph *s, const vf_node *n, int branch, const int *map, int *out,
                          var_list *vl)
{
    int *sub = vf_malloc(sizeof(int) * (size_t)(s->n ? s->n : 1));
    if (!sub) return false;
    int ne = s->n_explicit, nt = n->split;
    bool ok = true;
    for (int j = 0; ok && j < s->n; j++) {
        vf_node *x = &s->nodes[j];
        if (x->kind == VF_NODE_PARAM) {
            int p = x->index;
            sub[j] = map[n->in[branch == 0 || p < ne ? 1 + p : 1 + nt + p]];
            continue;
        }
        if (x->kind == VF_NODE_ASSIGN) {
            ok = branch_assign(dst, vl, branch, x, sub[x->in[0]], &sub[j]);
            continue;
        }
        sub[j] = move_node(dst, x, sub, vl, branch);
        ok = sub[j] >= 0;
    }
    for (int k = 0; ok && k < s->n_outputs; k++) out[k] = resolve(dst, vl, branch, sub[s->outputs[k]]);
    free(sub);
    return ok;
}

/* where(pred, a, b) appended to g; -1: out of memory or shapes that do not
   broadcast (err set). */
static int add_where(vf_graph *g, int pred, int a, int b, vf_err *err)
{
    int in[3] = {pred, a, b};
    vf_node w = {.kind = VF_NODE_OP, .op = VF_OP_WHERE, .n_in = 3, .in = in};
    vf_dtype dts[3], dt;
    vf_shape sh[3], out;
    for (int k = 0; k < 3; k++) {
        dts[k] = g->nodes[in[k]].dtype;
        sh[k] = g->nodes[in[k]].shape;
    }
    w.attrs.dtype = dts[1];
    if (vf_infer(&w, dts, sh, &dt, &out, err) != VF_OK) return -1;
    int id = add_node(g, VF_NODE_OP, 3, in, dt, &out);
    if (id < 0) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "cond_to_select: out of host memory (malloc failed)");
        return -1;
    }
    g->nodes[id].op = VF_OP_WHERE;
    g->nodes[id].attrs.dtype = dt;
    return id;
}

static int rebuild(vf_graph *g, vf_err *err)
{
    vf_graph *ng = vf_graph_new(g->parent);
    int *map = vf_malloc(sizeof(int) * (size_t)(g->n ? g->n : 1));
    int *base = vf_malloc(sizeof(int) * (size_t)(g->n ? g->n : 1));
    int changed = 0;
    bool ok = ng && map && base, err_set = false;
    var_list vl = {0};
    for (int i = 0; ok && i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        base[i] = -1;
        if (n->kind == VF_NODE_PROJ && base[n->in[0]] >= 0) {
            map[i] = base[n->in[0]] + n->index;
            continue;
        }
        if (!selectable(g, n)) {
            map[i] = move_node(ng, n, map, NULL, 0);
            ok = map[i] >= 0;
            continue;
        }
        int pred = map[n->in[0]];
        if (ng->nodes[pred].shape.rank != 0) {
            vf_shape scalar = {0};
            int rid = add_node(ng, VF_NODE_RESHAPE, 1, &pred, ng->nodes[pred].dtype, &scalar);
            ok = rid >= 0;
            if (!ok) break;
            ng->nodes[rid].target = scalar;
            pred = rid;
        }
        int *t = vf_malloc(sizeof(int) * (size_t)(2 * n->n_out + 1));
        vl.n = 0;
        ok = t && inline_branch(ng, n->sub[0], n, 0, map, t, &vl) &&
             inline_branch(ng, n->sub[1], n, 1, map, t + n->n_out, &vl);
        for (int k = 0; ok && k < n->n_out; k++) {
            int in[3] = {pred, t[k], t[n->n_out + k]};
            vf_dtype dt = ng->nodes[t[k]].dtype;
            vf_shape sh = ng->nodes[t[k]].shape; /* copied: add_node may move the nodes */
            int w = add_node(ng, VF_NODE_OP, 3, in, dt, &sh);
            ok = w >= 0;
            if (!ok) break;
            ng->nodes[w].op = VF_OP_WHERE;
            ng->nodes[w].attrs.dtype = dt;
            if (k == 0) base[i] = w;
        }
        /* The assigns, after both branches so that neither saw the other's
           writes; all selects first, so each reads the values from before
           the cond, then the assigns in the order the variables were first
           assigned (no other effect is in the branches to observe it). */
        int *sel = ok && vl.n ? vf_malloc(sizeof(int) * (size_t)vl.n) : NULL;
        ok = ok && (!vl.n || sel);
        for (int v = 0; ok && v < vl.n; v++) {
            const var_state *e = &vl.v[v];
            sel[v] = add_where(ng, pred, e->cur[0] >= 0 ? e->cur[0] : e->ref, e->cur[1] >= 0 ? e->cur[1] : e->ref, err);
            ok = sel[v] >= 0;
            err_set = !ok;
        }
        for (int v = 0; ok && v < vl.n; v++) {
            const vf_node *r = &ng->nodes[vl.v[v].ref];
            vf_dtype dt = r->dtype;
            vf_shape sh = r->shape; /* copied: add_node may move the nodes */
            int a = add_node(ng, VF_NODE_ASSIGN, 1, &sel[v], dt, &sh);
            ok = a >= 0;
            if (ok) ng->nodes[a].index = vl.v[v].index;
        }
        free(sel);
        free(t);
        map[i] = -1;
        changed++;
    }
    free(vl.v);
    if (!ok) {
        free(map), free(base);
        vf_graph_free(ng);
        if (!err_set) vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "cond_to_select: out of host memory (malloc failed)");
        return -1;
    }
    for (int j = 0; j < g->n_outputs; j++) g->outputs[j] = map[g->outputs[j]];
    /* the old nodes were moved out (or are the inlined conds): free the rest */
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        free(n->in), free(n->data), free(n->label);
        vf_graph_free(n->sub[0]);
        vf_graph_free(n->sub[1]);
    }
    free(g->nodes);
    g->nodes = ng->nodes;
    g->n = ng->n;
    g->cap = ng->cap;
    ng->nodes = NULL;
    ng->n = ng->cap = 0;
    vf_graph_free(ng);
    free(map), free(base);
    return changed;
}

int vf_pass_cond_to_select(vf_graph *g, vf_err *err)
{
    int changed = 0;
    bool any = false;
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        for (int k = 0; k < 2; k++)
            if (n->sub[k]) {
                int r = vf_pass_cond_to_select(n->sub[k], err);
                if (r < 0) return -1;
                changed += r;
            }
        any = any || selectable(g, n);
    }
    if (!any) return changed;
    int r = rebuild(g, err);
    return r < 0 ? -1 : changed + r;
}
