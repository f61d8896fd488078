/* Algebraic simplification. Every rewrite is exact for all inputs of the
 * node's dtype except x + 0 on floats, which turns a -0 result into +0
 * (as XLA's and Grappler's simplifiers do; the values compare equal). */
#include "graph/passes.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <stdlib.h>

static bool same_type(const vf_node *a, const vf_node *b)
{
    return a->dtype == b->dtype && vf_shape_equal(&a->shape, &b->shape) && a->shape.sym == b->shape.sym;
}

/* A variable's storage read where it is used: a node computed from it
   holds the value at that point, so it must not be replaced by the read. */
static bool mutable_value(const vf_graph *g, int id)
{
    const vf_node *n = &g->nodes[id];
    return (n->kind == VF_NODE_CAPTURE && n->is_var) || n->kind == VF_NODE_ASSIGN;
}

/* The value that node n (an OP) can be replaced by, or -1. */
static int identity_of(const vf_graph *g, const vf_node *n)
{
    if (n->kind != VF_NODE_OP) return -1;
    int a = n->n_in > 0 ? n->in[0] : -1, b = n->n_in > 1 ? n->in[1] : -1;
    switch (n->op) {
    case VF_OP_ADD:
        if (vf_node_is_splat(g, b, 0.0) && same_type(&g->nodes[a], n)) return a;
        if (vf_node_is_splat(g, a, 0.0) && same_type(&g->nodes[b], n)) return b;
        return -1;
    case VF_OP_SUB:
        return vf_node_is_splat(g, b, 0.0) && same_type(&g->nodes[a], n) ? a : -1;
    case VF_OP_MUL:
        if (vf_node_is_splat(g, b, 1.0) && same_type(&g->nodes[a], n)) return a;
        if (vf_node_is_splat(g, a, 1.0) && same_type(&g->nodes[b], n)) return b;
        return -1;
    case VF_OP_DIV:
        return vf_node_is_splat(g, b, 1.0) && same_type(&g->nodes[a], n) ? a : -1;
    case VF_OP_WHERE: /* where(c, a, a) is a whatever c is */
        return n->in[1] == n->in[2] && same_type(&g->nodes[n->in[1]], n) ? n->in[1] : -1;
    case VF_OP_CAST:
    case VF_OP_COPY:
    case VF_OP_STOP_GRADIENT: /* tapes act while tracing: the graph needs no marker */
        return same_type(&g->nodes[a], n) ? a : -1;
    default: return -1;
    }
}

/* x*0 and 0*x on integers: a fill of zeros when the shape is static. */
static bool to_zero(const vf_graph *g, vf_node *n)
{
    if (n->kind != VF_NODE_OP || n->op != VF_OP_MUL) return false;
    if (n->dtype != VF_I32 && n->dtype != VF_U32) return false;
    if (n->shape.sym) return false;
    if (!vf_node_is_splat(g, n->in[0], 0.0) && !vf_node_is_splat(g, n->in[1], 0.0)) return false;
    n->op = VF_OP_FILL;
    n->attrs = (vf_attrs){.value = 0.0, .dtype = n->dtype};
    n->n_in = 0;
    return true;
}

/* where(c, a, a) that broadcasts a (the gradient rules' way of giving a
   value an input's shape without baking a size into the trace:
   grad_rules.c, vf_ad_broadcast) once every size is static: a FILL of its
   shape when a is a FILL (a sum of ones counting a mean's elements then
   folds to a constant). */
static bool where_same_to_fill(const vf_graph *g, vf_node *n)
{
    if (n->kind != VF_NODE_OP || n->op != VF_OP_WHERE || n->in[1] != n->in[2] || n->shape.sym) return false;
    const vf_node *a = &g->nodes[n->in[1]];
    if (a->kind != VF_NODE_OP || a->op != VF_OP_FILL || a->dtype != n->dtype) return false;
    n->op = VF_OP_FILL;
    n->attrs = (vf_attrs){.value = a->attrs.value, .dtype = n->dtype};
    n->n_in = 0;
    return true;
}

/* Each node's readers, for the condition rewrite below: false when a node
   is read by anything but the condition of a where(c, a, a) (or is an
   output), so it must keep its values. */
static bool *where_same_only(const vf_graph *g)
{
    bool *only = vf_malloc((size_t)(g->n ? g->n : 1) * sizeof *only);
    if (!only) return NULL;
    for (int i = 0; i < g->n; i++) only[i] = true;
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        bool same = n->kind == VF_NODE_OP && n->op == VF_OP_WHERE && n->in[1] == n->in[2];
        for (int j = 0; j < n->n_in; j++)
            if (!(same && j == 0)) only[n->in[j]] = false;
    }
    for (int i = 0; i < g->n_outputs; i++) only[g->outputs[i]] = false;
    return only;
}

/* transpose(transpose(x, p), q) = transpose(x, p o q) */
static int merge_transposes(const vf_graph *g, vf_node *n)
{
    if (n->kind != VF_NODE_OP || n->op != VF_OP_TRANSPOSE) return 0;
    const vf_node *m = &g->nodes[n->in[0]];
    if (m->kind != VF_NODE_OP || m->op != VF_OP_TRANSPOSE || mutable_value(g, m->in[0])) return 0;
    int r[VF_MAX_RANK];
    bool identity = true;
    for (int i = 0; i < n->shape.rank; i++) {
        r[i] = m->attrs.perm[n->attrs.perm[i]];
        identity = identity && r[i] == i;
    }
    if (identity) return mutable_value(g, m->in[0]) ? 0 : 2;
    for (int i = 0; i < n->shape.rank; i++) n->attrs.perm[i] = r[i];
    n->in[0] = m->in[0];
    return 1;
}

/* A reshape that always gives back its input's shape. */
static bool reshape_is_identity(const vf_graph *g, const vf_node *n)
{
    const vf_node *x = &g->nodes[n->in[0]];
    if (n->target.rank != x->shape.rank) return false;
    for (int i = 0; i < n->target.rank; i++) {
        bool sym = (x->shape.sym >> i) & 1u;
        if (n->target.dim[i] == -1) {
            /* the inferred dim matches only if it is the one dim that may vary */
            if (x->shape.sym & ~(1u << i)) return false;
        } else if (sym || n->target.dim[i] != x->shape.dim[i]) {
            return false;
        }
    }
    return true;
}

int vf_pass_simplify(vf_graph *g, vf_err *err)
{
    int changed = 0;
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < 2; k++)
            if (g->nodes[i].sub[k]) {
                int r = vf_pass_simplify(g->nodes[i].sub[k], err);
                if (r < 0) return -1;
                changed += r;
            }
    int *repl = vf_repl_new(g);
    if (!repl) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "simplify: out of host memory (malloc failed)");
        return -1;
    }
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) n->in[j] = repl[n->in[j]];
        int x = identity_of(g, n);
        if (x >= 0 && !mutable_value(g, x)) {
            repl[i] = x;
            changed++;
            continue;
        }
        if (to_zero(g, n) || where_same_to_fill(g, n)) {
            changed++;
            continue;
        }
        int t = merge_transposes(g, n);
        if (t == 2) {
            repl[i] = g->nodes[n->in[0]].in[0];
            changed++;
            continue;
        }
        changed += t;
        if (n->kind == VF_NODE_RESHAPE) {
            const vf_node *m = &g->nodes[n->in[0]];
            if (m->kind == VF_NODE_RESHAPE && !mutable_value(g, m->in[0])) {
                n->in[0] = m->in[0];
                changed++;
            }
            if (reshape_is_identity(g, n) && !mutable_value(g, n->in[0])) {
                repl[i] = n->in[0];
                changed++;
            }
        }
    }
    vf_graph_replace(g, repl);
    free(repl);
    /* A condition read only by where(c, a, a) nodes picks nothing: with a
       static shape it becomes a FILL of true, so the where reads a alone
       and c's inputs (where(x == x, v, v) reads all of x) may die. */
    bool *only = where_same_only(g);
    if (!only) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "simplify: out of host memory (malloc failed)");
        return -1;
    }
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        if (!only[i] || n->kind != VF_NODE_OP || n->dtype != VF_BOOL || n->shape.sym || vf_node_is_splat(g, i, 1.0))
            continue;
        bool read = false; /* by a where(c, a, a) at all (a node nobody reads is DCE's) */
        for (int j = i + 1; j < g->n && !read; j++)
            read = g->nodes[j].kind == VF_NODE_OP && g->nodes[j].op == VF_OP_WHERE && g->nodes[j].in[0] == i;
        if (!read) continue;
        n->op = VF_OP_FILL;
        n->attrs = (vf_attrs){.value = 1.0, .dtype = VF_BOOL};
        n->n_in = 0;
        changed++;
    }
    free(only);
    return changed;
}
