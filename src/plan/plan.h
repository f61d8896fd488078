/* Plans of concrete functions: a graph made only of kernel nodes, at one
 * set of concrete input sizes, turned into a backend plan (backend.h
 * plan_*) that runs a whole call as one submission. */
#ifndef VF_FRONTEND_PLAN_H
#define VF_FRONTEND_PLAN_H

#include "frontend/function.h"

typedef struct vf_fplan vf_fplan;

/* Whether g holds only nodes a plan can run: PARAM, CAPTURE, CONST, OP,
   RESHAPE, ASSIGN (no COND, WHILE, PROJ or PRINT: those need the host in
   the middle of a call). */
bool vf_fplan_graph_ok(const vf_graph *g);
/* Builds the plan of g for these params' shapes. *out NULL and VF_OK: not
   plannable at these sizes (an empty tensor, a shape error the node-by-
   node run reports properly): run node by node. */
vf_status vf_fplan_build(vf_run_state *rs, const vf_graph *g, const vf_rval *params, vf_fplan **out);
/* Whether fp was built for these params' shapes. */
bool vf_fplan_matches(const vf_fplan *fp, const vf_rval *params);
/* Runs one call: output tensors in the innermost scope, outs[g->n_outputs]. */
vf_status vf_fplan_call(vf_run_state *rs, vf_fplan *fp, const vf_rval *params, vf_rval *outs);
void vf_fplan_free(vf_context *ctx, vf_fplan *fp);

typedef struct vf_fplan_stats {
    int kernels, dispatches;
    int64_t arena_bytes, output_bytes, intermediate_bytes;
    int64_t arena_lower_bound; /* vf_memplan_lower_bound of the arena's intervals */
} vf_fplan_stats;
void vf_fplan_stats_get(const vf_fplan *fp, vf_fplan_stats *out);
/* The stats of the plan fn's last call ran (function.c; for tests): false
   if that call ran no recorded plan. */
bool vf_function_plan_stats(vf_function *fn, vf_fplan_stats *out);

#endif
