/* Views: values a plan makes without a kernel of their own, in the bytes
 * of another intermediate.
 *
 * - A CONCAT whose inputs are contiguous in its result (it joins along its
 *   first axis of more than one element) gets the inputs written in place:
 *   each input that is an intermediate of its own becomes a view of the
 *   result at its offset, so the kernels that make it write it there; an
 *   input that is not (a param, a variable, a value that is already a
 *   view, or an output of the plan) is copied into its view. vf_concat of
 *   n tensors is a chain of binary concats; the chain nests, so every
 *   input of all of them lands in the one buffer: a packed buffer (the
 *   traced vf_dist_allreduce's) costs no copy at all.
 * - A SLICE whose result is contiguous in its input is a view of the
 *   input at the slice's offset (of an intermediate: a view of it; of a
 *   param or a segment's import: the binding at an offset).
 *
 * Only at offsets a binding can take on any device (a multiple of
 * VF_PB_ALIGN bytes: the largest minStorageBufferOffsetAlignment Vulkan
 * allows), so the same plan holds everywhere. A view's lifetime is its
 * root's: the planner gives the root one interval covering every view's
 * uses (plan_order.c vf_pb_reorder), and the dependency levels see a
 * write of a view as a write of its root's bytes. Views and the values
 * they live in never take part in in-place reuse. Never under
 * VKFUSE_CHECK (it reads every value back from a slot of its own) nor
 * with fusion off (the alias-free baseline), never inside a COND branch,
 * never for a value the plan hands out (an output has a buffer of its
 * own) or for a variable's value (an assign would change it). */
#include "plan/plan_build.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <stdlib.h>

int vf_pb_root(const builder *b, int id, size_t *at)
{
    size_t off = 0;
    while (id >= 0 && b->it[id].parent >= 0) {
        off += b->it[id].at;
        id = b->it[id].parent;
    }
    if (at) *at = off;
    return id;
}

/* The node whose storage node i shares (through reshapes). */
static int storage_node(const vf_graph *g, int i)
{
    while (g->nodes[i].kind == VF_NODE_RESHAPE) i = g->nodes[i].in[0];
    return i;
}

bool vf_pb_mark_exported(builder *b, const vf_graph *g)
{
    b->exported = vf_calloc((size_t)g->n + 1, sizeof *b->exported);
    if (!b->exported) return false;
    int n = b->seg ? b->seg->n_outs : g->n_outputs;
    const int *outs = b->seg ? b->seg->outs : g->outputs;
    for (int k = 0; k < n; k++) b->exported[storage_node(g, outs[k])] = true;
    return true;
}

/* Whether input value u (of node `node`) can become a view of another
   intermediate: an intermediate of its own, not shared with the plan's
   outputs, not already a view. */
static bool may_become_view(const builder *b, const vf_graph *g, int node, const pval *u)
{
    if (u->inter < 0 || u->var || b->it[u->inter].parent >= 0 || b->it[u->inter].slot >= 0) return false;
    return !b->exported[storage_node(g, node)];
}

static void make_view(builder *b, int child, int parent, size_t at)
{
    b->it[child].parent = parent;
    b->it[child].at = at;
    b->it[parent].viewed = true;
}

static bool concat_in_place(builder *b, const vf_graph *g, int i, const pval *in, const vf_shape *os, pval *v)
{
    const vf_node *n = &g->nodes[i];
    for (int d = 0; d < n->attrs.axis; d++)
        if (os->dim[d] != 1) return false; /* the inputs interleave */
    size_t at[2] = {0, vf_pb_bytes(&in[0].ref)};
    if (at[1] % VF_PB_ALIGN) return false;
    bool own[2];
    for (int j = 0; j < 2; j++)
        own[j] = may_become_view(b, g, n->in[j], &in[j]) && !(j == 1 && in[1].inter == in[0].inter);
    if (!own[0] && !own[1]) return false; /* every input copied: the concat kernel itself is as good */
    pval r = vf_pb_inter_val(b, in[0].ref.dtype, os);
    if (b->oom) return false;
    for (int j = 0; j < 2; j++) {
        if (own[j]) {
            make_view(b, in[j].inter, r.inter, at[j]);
            continue;
        }
        vf_shape s = vf_tref_shape(&in[j].ref);
        pval c = vf_pb_inter_val(b, in[j].ref.dtype, &s);
        if (b->oom) return false;
        make_view(b, c.inter, r.inter, at[j]);
        vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = in[j].ref, .out = c.ref};
        if (!vf_pb_add_exec(b, &e, &in[j], &c)) return false;
    }
    *v = r;
    return true;
}

/* The byte offset of slice node n's result in its input x when the result
   is one contiguous run of x's elements; false: it is not. */
static bool slice_offset(const vf_node *n, const vf_tref *x, const vf_shape *os, size_t *off)
{
    int last = -1; /* the last axis the slice cuts */
    for (int d = 0; d < x->rank; d++)
        if (os->dim[d] != x->shape[d]) last = d;
    size_t elems = 0, stride = 1;
    for (int d = x->rank - 1; d >= 0; d--) {
        int64_t start;
        vf_slice_dim(x->shape[d], n->attrs.lo[d], n->attrs.hi[d], n->attrs.step[d], &start);
        if (d < last && os->dim[d] != 1) return false;           /* rows of a cut axis: gaps */
        if (os->dim[d] > 1 && n->attrs.step[d] != 1) return false; /* strided or reversed */
        if (d > last && os->dim[d] > 1 && start != 0) return false;
        elems += (size_t)start * stride;
        stride *= (size_t)x->shape[d];
    }
    *off = elems * vf_dtype_size(x->dtype);
    return true;
}

static bool slice_view(builder *b, const vf_graph *g, int i, const pval *in, const vf_shape *os, pval *v)
{
    const vf_node *n = &g->nodes[i];
    size_t off;
    if (in[0].var || b->exported[storage_node(g, i)] || !slice_offset(n, &in[0].ref, os, &off) || off % VF_PB_ALIGN)
        return false;
    if (in[0].inter < 0) { /* a param or import (a binding), a capture or constant: at an offset in it */
        if (in[0].loc.kind == VF_PLAN_ARENA) return false;
        *v = in[0];
    } else {
        pval c = vf_pb_inter_val(b, in[0].ref.dtype, os);
        if (b->oom) return false;
        make_view(b, c.inter, in[0].inter, off);
        *v = c;
        off = 0; /* placed through its parent */
    }
    v->ref.offset += off;
    v->ref.rank = os->rank;
    for (int d = 0; d < VF_MAX_RANK; d++) v->ref.shape[d] = d < os->rank ? os->dim[d] : 0;
    return true;
}

bool vf_pb_try_view(builder *b, const vf_graph *g, int i, const pval *in, const vf_shape *os, pval *v)
{
    const vf_node *n = &g->nodes[i];
    if (b->depth > 0 || b->env->check || b->env->unfused || !b->exported || !b->view || n->kind != VF_NODE_OP)
        return false;
    bool made = n->op == VF_OP_CONCAT ? concat_in_place(b, g, i, in, os, v)
              : n->op == VF_OP_SLICE ? slice_view(b, g, i, in, os, v) : false;
    if (made) b->view[i] = true;
    return made;
}
