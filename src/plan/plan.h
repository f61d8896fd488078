/* Plans of concrete functions: a graph made only of kernel nodes, at one
 * set of concrete input sizes, turned into a backend plan (backend.h
 * plan_*) that runs a whole call as one submission. A graph with HOST
 * nodes (vf_host_map) is split at them (plan/segment.h): one submission
 * per segment, the host callbacks between them.
 *
 * Planning knows graphs, ops and the backend contract, never tensors or
 * scopes: its caller (function/run_plan.c) hands it the storage of the
 * params, captures and constants as trefs, and makes the output storage
 * (slots) of each call. */
#ifndef VF_PLAN_PLAN_H
#define VF_PLAN_PLAN_H

#include "backend.h"
#include "graph/graph.h"
#include "plan/host.h"

typedef struct vf_fplan vf_fplan;

/* A value a plan reads where it lives: a param, capture or constant. */
typedef struct vf_plan_value {
    vf_tref ref;     /* buf NULL: no storage (empty): not plannable */
    bool var;        /* a variable's storage: it changes on assign, never aliased */
} vf_plan_value;

/* What building and running a plan needs from its caller. */
typedef struct vf_plan_env {
    const vf_backend_t *be;     /* records and runs the plan */
    vf_err *err;                /* where failures are reported */
    vf_err *be_err;             /* where be reports (folded into err, as vf_err_backend says) */
    const char *name;           /* the function's, for messages */
    const vf_plan_value *caps;  /* the graph's captures (CAPTURE and ASSIGN index them) */
    /* The storage of CONST node n (made once and kept by the caller);
       failure: the status, reported in err. */
    vf_status (*const_ref)(void *user, const vf_node *n, vf_tref *out);
    void *user;
    bool unfused;               /* one kernel per op (VKFUSE_FUSION=0, vf_function_desc.unfused) */
    vf_host *check;             /* VKFUSE_CHECK: every kernel replayed on this host backend; NULL: off */
    const char *check_root;     /* where a checked plan's GLSL directory goes */
    bool check_keep;            /* keep it even if every call agrees (it is under VKFUSE_DUMP) */
    /* A HOST node between the segments of a split plan: n's callback on
       in's values, the result into out (out may be in: in place). The
       kernels writing in were submitted; nothing queued after them waits
       for it. Failure: the status, reported in err. */
    vf_status (*host)(void *user, const vf_node *n, const vf_tref *in, const vf_tref *out);
} vf_plan_env;

/* Whether g holds only nodes a plan can run: PARAM, CAPTURE, CONST, OP,
   RESHAPE, ASSIGN, user kernels (KERNEL, PROJ), HOST at the top level
   (a split plan), and CONDs whose branches hold no other kinds but
   KERNEL and PROJ (guarded on the device). No WHILE or PRINT: those need
   the host in the middle of a call. */
bool vf_fplan_graph_ok(const vf_graph *g);
/* Builds the plan of g for these params' shapes (params[g->n_params]).
   *out NULL and VF_OK: not plannable at these sizes (an empty tensor, a
   shape error the node-by-node run reports properly): run node by node. */
vf_status vf_fplan_build(const vf_plan_env *env, const vf_graph *g, const vf_plan_value *params, vf_fplan **out);
/* Whether fp was built for these params' shapes. */
bool vf_fplan_matches(const vf_fplan *fp, const vf_plan_value *params);
/* The output storage a call binds: slot k holds a dt tensor of this shape,
   made by the caller for every call. */
int vf_fplan_n_slots(const vf_fplan *fp);
void vf_fplan_slot(const vf_fplan *fp, int k, vf_dtype *dt, vf_shape *shape);
/* Graph output k: the slot holding it, seen with shape *view. */
int vf_fplan_output(const vf_fplan *fp, int k, vf_shape *view);
/* Runs one call with the params' storage and the slots' (slots[n_slots]). */
vf_status vf_fplan_run(const vf_plan_env *env, vf_fplan *fp, const vf_plan_value *params, const vf_tref *slots);
/* The backend plans a call of fp runs, in run order: one, or one per
   segment of a plan split at HOST nodes (for profiles: each part's
   kernels are read from the backend's plan_profile). */
int vf_fplan_n_parts(const vf_fplan *fp);
vf_plan *vf_fplan_part(const vf_fplan *fp, int i);
/* be: the backend fp was built on. */
void vf_fplan_free(const vf_backend_t *be, vf_fplan *fp);

typedef struct vf_fplan_stats {
    int kernels, dispatches;
    int64_t arena_bytes, output_bytes, intermediate_bytes;
    int64_t arena_lower_bound; /* vf_memplan_lower_bound of the arena's intervals */
} vf_fplan_stats;
void vf_fplan_stats_get(const vf_fplan *fp, vf_fplan_stats *out);

#endif
