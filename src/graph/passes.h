/* Graph passes. Each takes a graph (and recurses into subgraphs), returns
 * how many nodes it changed (0: nothing to do) or -1 on failure with err
 * set, and keeps the side-effect order. */
#ifndef VF_GRAPH_PASSES_H
#define VF_GRAPH_PASSES_H

#include "graph/graph.h"

/* What constant folding needs from its caller: computing op node n of g,
   whose inputs are all compile-time values (vf_node_is_const), into data
   (bytes: n's size, packed). On failure: the status, the reason in err.
   The graph layer never picks a backend: the frontend passes one backed by
   the context's host (CPU) backend (plan/host.h). */
typedef struct vf_evaluator {
    vf_status (*eval)(void *self, const vf_graph *g, const vf_node *n, void *data, size_t bytes, vf_err *err);
    void *self;
} vf_evaluator;

/* Constant folding: an op whose inputs are all constants (CONST nodes or
   fills) and whose result is small is evaluated by ev and becomes a
   CONST. Reshapes of constants fold too. Variables never fold. ev NULL:
   only reshapes fold. */
int vf_pass_fold(vf_graph *g, const vf_evaluator *ev, vf_err *err);
/* Dead-code elimination: removes nodes that neither reach an output nor
   have a side effect. Params stay (their positions are the signature). */
int vf_pass_dce(vf_graph *g, vf_err *err);
/* Common-subexpression elimination: a pure node equal to an earlier one
   (kind, op, attributes, inputs, dtype, shape) is replaced by it. */
int vf_pass_cse(vf_graph *g, vf_err *err);
/* Algebraic simplification: x*1, 1*x, x/1, x+0, 0+x, x-0 -> x (when the
   result has x's shape and dtype); x*0 -> 0 for integer types only (for
   floats it is not exact: NaN, Inf, -0); cast to the same dtype and
   same-shape copies -> x; transpose of transpose -> one (or x); reshape of
   reshape -> one reshape; a reshape that keeps the shape -> x. */
int vf_pass_simplify(vf_graph *g, vf_err *err);
/* Constants as splats (passes_fills.c): a small CONST whose elements are
   all one value becomes a FILL, and a reshape or transpose of a FILL a
   FILL of its shape. */
int vf_pass_splat(vf_graph *g, vf_err *err);
/* Run once after the others (CSE would merge what it makes): every
   elementwise reader of a FILL gets a FILL of its own right before it (a
   value of its fusion group); the FILL's other uses (outputs,
   non-elementwise readers) read one value, a CONST when it is not an
   output and has at most VF_FOLD_MAX_ELEMS elements (graph.h; made once,
   kept). */
int vf_pass_fills(vf_graph *g, vf_err *err);
/* A vf_cond whose branches are small and side-effect free becomes both
   branches inline plus a `where` per output: no host round trip. */
int vf_pass_cond_to_select(vf_graph *g, vf_err *err);

/* Runs the passes until nothing changes (at most 4 rounds), folding with
   ev, then vf_pass_fills. With dump_dir set, writes
   <dir>/<name>.NN-<pass>.txt and .dot after every pass, and .00-traced
   before the first. Returns the total of changes or -1. */
int vf_optimize(vf_graph *g, const vf_evaluator *ev, const char *dump_dir, const char *name, vf_err *err);

/* Helpers shared by the passes (passes.c). */
/* Whether node id of g is a constant whose every element equals v. */
bool vf_node_is_splat(const vf_graph *g, int id, double v);
/* Whether node id is a CONST or a FILL op (a compile-time value). */
bool vf_node_is_const(const vf_graph *g, int id);
/* Identity map for vf_graph_replace; NULL when out of memory. */
int *vf_repl_new(const vf_graph *g);

#endif
