/* Constant folding. The values come from the caller's evaluator (the
 * frontend's is the context's host backend: plan/host.h), so the graph
 * layer never picks a backend. */
#include "graph/passes.h"
#include "graph/uelem.h"
#include "util/fault.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

static bool foldable(const vf_graph *g, const vf_node *n, const vf_evaluator *ev)
{
    if (n->shape.sym) return false;
    int64_t numel = vf_shape_numel(&n->shape);
    if (numel <= 0 || numel > VF_FOLD_MAX_ELEMS) return false;
    if (n->kind == VF_NODE_RESHAPE) return g->nodes[n->in[0]].kind == VF_NODE_CONST;
    if (!ev || n->kind != VF_NODE_OP || vf_op_get(n->op)->kind == VF_KIND_SOURCE) return false;
    /* e.g. out-of-range indices are the device's to handle (op.h) */
    if (vf_op_get(n->op)->flags & VF_OPF_NO_FOLD) return false;
    /* a user elementwise op folds through its C function; a loaded one has
       none (the evaluator would fail): it stays a kernel */
    if (vf_op_holds_uelem(n->op) && (!n->attrs.uelem || !n->attrs.uelem->cpu)) return false;
    for (int j = 0; j < n->n_in; j++) {
        const vf_node *x = &g->nodes[n->in[j]];
        if (!vf_node_is_const(g, n->in[j]) || vf_shape_numel(&x->shape) <= 0) return false;
    }
    return true;
}

int vf_pass_fold(vf_graph *g, const vf_evaluator *ev, vf_err *err)
{
    int folded = 0;
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        for (int k = 0; k < 2; k++)
            if (n->sub[k]) {
                int r = vf_pass_fold(n->sub[k], ev, err);
                if (r < 0) return -1;
                folded += r;
            }
        if (!foldable(g, n, ev)) continue;
        void *data = NULL;
        size_t bytes = 0;
        if (n->kind == VF_NODE_RESHAPE) {
            const vf_node *x = &g->nodes[n->in[0]];
            bytes = x->bytes;
            data = vf_malloc(bytes);
            if (!data) {
                vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "fold: out of host memory (malloc failed)");
                return -1;
            }
            memcpy(data, x->data, bytes);
        } else {
            bytes = (size_t)vf_shape_numel(&n->shape) * vf_dtype_size(n->dtype);
            data = vf_malloc(bytes);
            vf_err why = {0};
            vf_status s = data ? ev->eval(ev->self, g, n, data, bytes, &why)
                               : vf_err_set(&why, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
            if (s != VF_OK) {
                free(data);
                vf_err_set(err, s, "fold: evaluating %s: %s", vf_op_get(n->op)->name, why.message);
                return -1;
            }
        }
        if (n->kind == VF_NODE_OP && vf_op_holds_uelem(n->op)) vf_uelem_release(n->attrs.uelem);
        n->kind = VF_NODE_CONST;
        n->n_in = 0;
        n->data = data;
        n->bytes = bytes;
        n->attrs = (vf_attrs){0};
        folded++;
    }
    return folded;
}
