/* vf_cond -> select. A traced vf_cond normally runs as a COND node: the
 * host reads the predicate and runs one branch. When both branches are
 * small and free of side effects, computing both and picking per output
 * with `where` is cheaper than a round trip to the host, and keeps the
 * whole call in one submit on a GPU. */
#include "graph/passes.h"

#include <stdlib.h>
#include <string.h>

#define VF_SELECT_MAX_NODES 64

static bool cheap(const vf_graph *s)
{
    if (!s || s->n > VF_SELECT_MAX_NODES) return false;
    for (int i = 0; i < s->n; i++) {
        const vf_node *n = &s->nodes[i];
        if (vf_node_has_effect(n) || n->kind == VF_NODE_COND || n->kind == VF_NODE_WHILE) return false;
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

/* Moves node src into dst with its inputs renamed by map; -1: out of memory. */
static int move_node(vf_graph *dst, vf_node *src, const int *map)
{
    int tmp[16] = {0}, *in = src->n_in <= 16 ? tmp : malloc(sizeof(int) * (size_t)src->n_in);
    if (!in) return -1;
    for (int j = 0; j < src->n_in; j++) in[j] = map[src->in[j]];
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

/* Inlines branch s of cond node n (params from outer ids) into dst; fills
   out[k] with the ids of its outputs. */
static bool inline_branch(vf_graph *dst, vf_graph *s, const vf_node *n, int branch, const int *map, int *out)
{
    int *sub = malloc(sizeof(int) * (size_t)(s->n ? s->n : 1));
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
        sub[j] = move_node(dst, x, sub);
        ok = sub[j] >= 0;
    }
    for (int k = 0; ok && k < s->n_outputs; k++) out[k] = sub[s->outputs[k]];
    free(sub);
    return ok;
}

static int rebuild(vf_graph *g, vf_err *err)
{
    vf_graph *ng = vf_graph_new(g->parent);
    int *map = malloc(sizeof(int) * (size_t)(g->n ? g->n : 1));
    int *base = malloc(sizeof(int) * (size_t)(g->n ? g->n : 1));
    int changed = 0;
    bool ok = ng && map && base;
    for (int i = 0; ok && i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        base[i] = -1;
        if (n->kind == VF_NODE_PROJ && base[n->in[0]] >= 0) {
            map[i] = base[n->in[0]] + n->index;
            continue;
        }
        if (!selectable(g, n)) {
            map[i] = move_node(ng, n, map);
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
        int *t = malloc(sizeof(int) * (size_t)(2 * n->n_out + 1));
        ok = t && inline_branch(ng, n->sub[0], n, 0, map, t) && inline_branch(ng, n->sub[1], n, 1, map, t + n->n_out);
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
        free(t);
        map[i] = -1;
        changed++;
    }
    if (!ok) {
        free(map), free(base);
        vf_graph_free(ng);
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "cond_to_select: out of host memory");
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
