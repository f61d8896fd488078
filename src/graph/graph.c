/* Graph IR: construction, effects, replacement and removal of nodes. */
#include "graph/graph.h"
#include "util/dims.h"
#include "graph/uelem.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vf_graph *vf_graph_new(vf_graph *parent)
{
    vf_graph *g = vf_calloc(1, sizeof *g);
    if (g) g->parent = parent;
    return g;
}

static void node_clear(vf_node *n)
{
    free(n->in);
    free(n->data);
    free(n->label);
    vf_graph_free(n->sub[0]);
    vf_graph_free(n->sub[1]);
    vf_ukernel_release(n->uk);
    if (n->kind == VF_NODE_OP && vf_op_holds_uelem(n->op)) vf_uelem_release(n->attrs.uelem);
}

void vf_ukernel_release(vf_ukernel *k)
{
    if (!k || --k->refs > 0) return;
    free(k->spirv);
    free(k);
}

void vf_graph_free(vf_graph *g)
{
    if (!g) return;
    for (int i = 0; i < g->n; i++) node_clear(&g->nodes[i]);
    free(g->nodes);
    free(g->outputs);
    free(g->outer);
    free(g);
}

int vf_graph_add(vf_graph *g, vf_node_kind kind, int n_in, const int *in)
{
    if (!vf_grow((void **)&g->nodes, &g->cap, g->n + 1, sizeof *g->nodes)) return -1;
    vf_node *n = &g->nodes[g->n];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    if (n_in > 0) {
        n->in = vf_malloc((size_t)n_in * sizeof *n->in);
        if (!n->in) return -1;
        memcpy(n->in, in, (size_t)n_in * sizeof *n->in);
    }
    n->n_in = n_in;
    return g->n++;
}

bool vf_graph_set_outputs(vf_graph *g, int n, const int *ids)
{
    int *o = n ? vf_malloc((size_t)n * sizeof *o) : NULL;
    if (n && !o) return false;
    if (n) memcpy(o, ids, (size_t)n * sizeof *o);
    free(g->outputs);
    g->outputs = o;
    g->n_outputs = n;
    return true;
}

bool vf_node_has_effect(const vf_node *n)
{
    switch (n->kind) {
    case VF_NODE_ASSIGN:
    case VF_NODE_PRINT:
    case VF_NODE_HOST: return true;
    case VF_NODE_KERNEL: return n->uk && n->uk->side_effect;
    case VF_NODE_COND:
    case VF_NODE_WHILE: return vf_graph_has_effects(n->sub[0]) || vf_graph_has_effects(n->sub[1]);
    default: return false;
    }
}

bool vf_graph_has_effects(const vf_graph *g)
{
    if (!g) return false;
    for (int i = 0; i < g->n; i++)
        if (vf_node_has_effect(&g->nodes[i])) return true;
    return false;
}

bool vf_node_kept_fill(const vf_node *n)
{
    int64_t numel = vf_shape_numel(&n->shape);
    return n->kind == VF_NODE_OP && vf_op_is_literal(n->op) && !n->shape.sym && numel > 0 && numel <= VF_FOLD_MAX_ELEMS;
}

int vf_graph_kernels(const vf_graph *g)
{
    int k = 0;
    if (!g) return 0;
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        if ((n->kind == VF_NODE_OP && !vf_node_kept_fill(n)) || n->kind == VF_NODE_ASSIGN ||
            n->kind == VF_NODE_KERNEL)
            k++;
        if (n->kind == VF_NODE_COND || n->kind == VF_NODE_WHILE)
            k += vf_graph_kernels(n->sub[0]) + vf_graph_kernels(n->sub[1]);
    }
    return k;
}

void vf_graph_replace(vf_graph *g, const int *repl)
{
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            int v = g->nodes[i].in[j];
            while (repl[v] != v) v = repl[v];
            g->nodes[i].in[j] = v;
        }
    for (int j = 0; j < g->n_outputs; j++) {
        int v = g->outputs[j];
        while (repl[v] != v) v = repl[v];
        g->outputs[j] = v;
    }
}

bool vf_graph_remove(vf_graph *g, const bool *dead)
{
    int *map = vf_malloc((size_t)(g->n ? g->n : 1) * sizeof *map);
    if (!map) return false;
    int k = 0;
    for (int i = 0; i < g->n; i++) {
        if (dead[i]) {
            node_clear(&g->nodes[i]);
            map[i] = -1;
            continue;
        }
        map[i] = k;
        if (k != i) g->nodes[k] = g->nodes[i];
        k++;
    }
    g->n = k;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) g->nodes[i].in[j] = map[g->nodes[i].in[j]];
    for (int j = 0; j < g->n_outputs; j++) g->outputs[j] = map[g->outputs[j]];
    free(map);
    return true;
}

static const char *const kind_names[VF_NODE_KIND_COUNT] = {
    "op", "param", "const", "capture", "reshape", "assign", "print", "cond", "while", "proj", "host", "kernel",
};

const char *vf_node_kind_name(vf_node_kind k)
{
    return (unsigned)k < VF_NODE_KIND_COUNT ? kind_names[k] : "?";
}

const char *vf_node_name(const vf_node *n)
{
    if (n->kind == VF_NODE_OP && vf_op_holds_uelem(n->op) && n->attrs.uelem)
        return n->attrs.uelem->name; /* profiles and dumps show the user's name */
    if (n->kind == VF_NODE_OP) return vf_op_get(n->op)->name;
    if (n->kind == VF_NODE_CAPTURE && n->is_var) return "variable";
    if (n->kind == VF_NODE_KERNEL && n->uk) return n->uk->name; /* profiles and dumps show the user's name */
    return vf_node_kind_name(n->kind);
}

const char *vf_shape_fmt(char *buf, size_t len, vf_dtype dt, const vf_shape *s)
{
    return vf_dims_fmt(buf, len, vf_dtype_name(dt), s->rank, s->dim, s->sym, "?");
}

int64_t vf_shape_numel(const vf_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

bool vf_shape_equal(const vf_shape *a, const vf_shape *b)
{
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}
