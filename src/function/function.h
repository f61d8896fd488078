/* Running concrete functions (run.c) and printing values (control_flow.c). */
#ifndef VF_FRONTEND_FUNCTION_H
#define VF_FRONTEND_FUNCTION_H

#include "function/trace.h"
#include "plan/plan.h"

/* A value while a graph runs: what a kernel reads (ref), the tensor that
   holds the storage (NULL for captures, which the function holds), and
   whether it is a variable's storage (it changes on assign: never alias). */
typedef struct vf_rval {
    vf_tref ref;
    vf_tensor *t;
    bool var;
} vf_rval;

/* Device copies of a concrete function's CONST nodes, made on first use. */
typedef struct vf_const_cache {
    const vf_node **nodes;
    vf_tensor **tensors;
    int n, cap;
} vf_const_cache;
void vf_const_cache_free(vf_const_cache *c);

typedef struct vf_run_state {
    vf_context *ctx;
    const char *fn;            /* the function's name, for messages */
    bool unfused;              /* plans: one kernel per op (vf_function_desc.unfused) */
    const vf_capture *caps;
    int n_caps;
    vf_const_cache *consts;
    int dispatches;
    int64_t live_bytes, peak_bytes;
    vf_tensor **held;          /* references taken by loops, dropped at the end */
    int n_held, cap_held;
} vf_run_state;

/* Runs g with params; fills outs[g->n_outputs]. Tensors made here are
   owned by the innermost scope (the caller opens one per call). */
vf_status vf_graph_run(vf_run_state *rs, const vf_graph *g, const vf_rval *params, vf_rval *outs);
/* The device copy of CONST node n (uploaded on first use, then cached). */
vf_status vf_run_const(vf_run_state *rs, const vf_node *n, vf_rval *out);
/* Drops the references the run still holds. */
void vf_run_state_finish(vf_run_state *rs);
/* A tensor of the caller's scope (one below the innermost) with v's value. */
vf_tensor *vf_rval_to_output(vf_run_state *rs, const vf_rval *v);

/* Recorded plans (run_plan.c): the tensors and scopes bound around
   src/plan. The plan's view of values (NULL: out of host memory). */
vf_plan_value *vf_plan_values(const vf_rval *v, int n);
/* vf_fplan_build with the run's captures and constants and the context's
   backend and options; *out NULL and VF_OK: run node by node. */
vf_status vf_run_plan_build(vf_run_state *rs, const vf_graph *g, const vf_plan_value *params, vf_fplan **out);
/* Runs one call: output tensors in the innermost scope, outs[n_out]. */
vf_status vf_run_plan_call(vf_run_state *rs, vf_fplan *fp, const vf_plan_value *params, int n_out, vf_rval *outs);
/* The stats of the plan fn's last call ran (function.c; for tests): false
   if that call ran no recorded plan. */
bool vf_function_plan_stats(vf_function *fn, vf_fplan_stats *out);

/* Runs fn(in) eagerly in a scope of its own; out[n_out] end in the caller's
   scope (control_flow.c). */
/* fn was destroyed (or orphaned by its context's end): its body must not
   run again (a tape's rule for an eager call checks this). */
bool vf_function_destroyed(const vf_function *fn);

vf_status vf_call_body_scoped(vf_context *ctx, const char *op, vf_body fn, vf_tensor *const *in, int n_out,
                              vf_tensor **out, void *user);

/* Prints "label: [[1, 2], [3, 4]]" (at most 64 values, then "...") to stdout. */
void vf_print_value(const char *label, vf_dtype dt, int rank, const int64_t *shape, const void *data);

#endif
