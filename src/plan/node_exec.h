/* What one node of a concrete graph does at concrete input tensors, written
 * once for both walkers of such graphs: the plan builder (plan.c), which
 * records execs into a plan, and the node-by-node interpreter
 * (function/run.c), which runs them at once. Each walker keeps only its own
 * bookkeeping (where a value lives, who owns it); the shape rule, the exec
 * an op node becomes and the copy a reshape or an assign needs are these. */
#ifndef VF_PLAN_NODE_EXEC_H
#define VF_PLAN_NODE_EXEC_H

#include "backend.h"
#include "graph/graph.h"

#include <stdbool.h>

/* The shape of r as a vf_shape (its rank and dims). */
vf_shape vf_tref_shape(const vf_tref *r);
/* How many elements r holds. */
int64_t vf_tref_numel(const vf_tref *r);
/* r read with shape s: same buffer, offset and elements (a reshape's view). */
void vf_tref_reshape(vf_tref *r, const vf_shape *s);

/* The dtype and shape of node n (OP, RESHAPE or ASSIGN: each reads the
   n->n_in <= 3 inputs in) at these concrete inputs; on a failure err says
   what, as vf_infer does. ASSIGN checks the value against the variable's
   shape, which *out holds on entry (vf_infer's rule). */
vf_status vf_node_infer_at(const vf_node *n, const vf_tref *in, vf_dtype *dt, vf_shape *out, vf_err *err);
/* The exec of OP node n reading in (n->n_in refs) into out. */
vf_exec vf_node_op_exec(const vf_node *n, const vf_tref *in, const vf_tref *out);
/* A COPY of src's elements read with shape s into out: a reshape of a
   variable takes its value now, not after later assigns change it. */
vf_exec vf_node_copy_exec(const vf_tref *src, const vf_shape *s, const vf_tref *out);
/* Whether ASSIGN of value to var writes nothing: the value is the
   variable's own storage (same buffer and offset). */
bool vf_node_assign_is_self(const vf_tref *value, const vf_tref *var);

#endif
