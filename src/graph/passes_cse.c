/* Common-subexpression elimination. */
#include "graph/passes.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

static bool shape_same(const vf_shape *a, const vf_shape *b)
{
    return vf_shape_equal(a, b) && a->sym == b->sym;
}

/* Pure nodes that may merge. Captures stay distinct: two reads of a
   variable around an assign in a subgraph must not become one. */
static bool mergeable(const vf_node *n)
{
    return n->kind == VF_NODE_OP || n->kind == VF_NODE_RESHAPE || n->kind == VF_NODE_CONST ||
           n->kind == VF_NODE_PROJ;
}

static bool same(const vf_node *a, const vf_node *b)
{
    if (a->kind != b->kind || a->dtype != b->dtype || !shape_same(&a->shape, &b->shape)) return false;
    if (a->n_in != b->n_in || (a->n_in && memcmp(a->in, b->in, sizeof(int) * (size_t)a->n_in))) return false;
    switch (a->kind) {
    case VF_NODE_OP: return a->op == b->op && vf_attrs_equal(a->op, &a->attrs, &b->attrs);
    case VF_NODE_RESHAPE: return shape_same(&a->target, &b->target);
    case VF_NODE_CONST: return a->bytes == b->bytes && (!a->bytes || memcmp(a->data, b->data, a->bytes) == 0);
    case VF_NODE_PROJ: return a->index == b->index;
    default: return false;
    }
}

static uint64_t node_hash(const vf_node *n)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(n->kind);
    MIX(n->op);
    MIX(n->dtype);
    MIX(n->shape.rank);
    for (int i = 0; i < n->n_in; i++) MIX(n->in[i]);
    for (int i = 0; i < n->shape.rank; i++) MIX(n->shape.dim[i]);
#undef MIX
    return h;
}

int vf_pass_cse(vf_graph *g, vf_err *err)
{
    int merged = 0;
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < 2; k++)
            if (g->nodes[i].sub[k]) {
                int r = vf_pass_cse(g->nodes[i].sub[k], err);
                if (r < 0) return -1;
                merged += r;
            }
    int *repl = vf_repl_new(g);
    uint64_t *h = vf_malloc((size_t)(g->n ? g->n : 1) * sizeof *h);
    bool *dead = vf_calloc((size_t)(g->n ? g->n : 1), sizeof *dead);
    if (!repl || !h || !dead) {
        free(repl), free(h), free(dead);
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "cse: out of host memory (malloc failed)");
        return -1;
    }
    int here = 0;
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        /* inputs first, so that chains of equal nodes merge in one sweep */
        for (int j = 0; j < n->n_in; j++) n->in[j] = repl[n->in[j]];
        h[i] = node_hash(n);
        if (!mergeable(n)) continue;
        for (int e = 0; e < i; e++)
            if (!dead[e] && h[e] == h[i] && mergeable(&g->nodes[e]) && same(&g->nodes[e], n)) {
                repl[i] = e;
                dead[i] = true;
                here++;
                break;
            }
    }
    bool ok = true;
    if (here) {
        vf_graph_replace(g, repl);
        ok = vf_graph_remove(g, dead);
    }
    free(repl), free(h), free(dead);
    if (!ok) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "cse: out of host memory (malloc failed)");
        return -1;
    }
    return merged + here;
}
