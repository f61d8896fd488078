/* Tracing: while a vf_function's body runs for a new signature, ctx->trace
 * is set and op entry points record graph nodes instead of running (the
 * hooks in tensor.c, ops_shape.c, variables.c call into trace.c).
 *
 * Tensors made while tracing are symbolic: no storage, a (graph, value)
 * pair and the concrete shape of the call being traced. Tensors made
 * outside the body are captured: constants by value of their storage
 * (retained), variables by reference. The frame stack follows vf_cond
 * branches and vf_while_loop bodies, each traced into its own subgraph.
 */
#ifndef VF_FRONTEND_TRACE_H
#define VF_FRONTEND_TRACE_H

#include "api/api.h"
#include "api/hooks.h"
#include "graph/graph.h"

typedef struct vf_capture {
    vf_tensor *t;     /* retained: keeps the storage alive */
    vf_tref ref;      /* what the graph reads */
    bool is_var;
} vf_capture;

typedef struct vf_frame {
    vf_graph *g;
    int gid;
    int *cap_val;     /* per capture: its current value id in g, -1: none yet */
    int n_cap_val;
} vf_frame;

struct vf_trace {
    uint64_t gen;
    char name[128];   /* the function's name, for messages */
    vf_graph **graphs;/* by graph id; graphs[0] is the root */
    int n_graphs, cap_graphs;
    vf_frame *frames; /* frames[depth - 1] is the graph being recorded */
    int depth, cap_frames;
    vf_capture *caps;
    int n_caps, cap_caps;
};

/* Starts a trace of function `name` on ctx (ctx->trace must be NULL). */
vf_trace *vf_trace_begin(vf_context *ctx, const char *name);
/* Ends it: returns the root graph (caller owns it, NULL after a failure)
   and moves the captures into *caps / *n_caps. */
vf_graph *vf_trace_end(vf_context *ctx, bool ok, vf_capture **caps, int *n_caps);
void vf_captures_free(vf_capture *caps, int n);

/* Subgraphs of control flow: push makes g the graph being recorded. */
bool vf_trace_push(vf_context *ctx, vf_graph *g);
void vf_trace_pop(vf_context *ctx);
vf_graph *vf_trace_graph(vf_context *ctx);

/* The value id of tensor t in the graph being recorded (captures it if it
   is concrete or lives in an enclosing graph); -1 with an error set. */
int vf_trace_value(vf_context *ctx, vf_tensor *t, const char *op);
/* A new PARAM node (explicit: before any capture) and its tensor. */
vf_tensor *vf_trace_param(vf_context *ctx, vf_dtype dt, const vf_shape *shape);
/* A symbolic tensor for an existing node of the graph being recorded. */
vf_tensor *vf_trace_tensor_for(vf_context *ctx, int id);
/* A symbolic tensor for value id of the graph being recorded, bound to the
   graph the value comes from: a capture param lifted from an enclosing
   graph gives that graph's value (the key the user's tensor has). */
vf_tensor *vf_trace_tensor_origin(vf_context *ctx, int id);
/* A symbolic tensor reading trace capture ci in the graph being recorded
   (the gradient of control flow replays subgraphs that read captures). */
vf_tensor *vf_trace_capture_tensor(vf_context *ctx, int ci, const char *op);
/* After control flow with side effects: later reads of variables must see
   what it wrote, so they get fresh capture nodes. */
void vf_trace_forget_variables(vf_context *ctx);

/* The value's shape with sym bits, for params of subgraphs. */
vf_shape vf_trace_shape_of(vf_context *ctx, int id);

/* ---- the tracer's calls (trace.c, control_flow.c) ---- */

/* Symbolic dims (bit d) of t while tracing, 0 for a concrete tensor (trace.c). */
uint32_t vf_trace_sym_dims(vf_context *ctx, vf_tensor *t, const char *op);

/* What the tracer hands the API layer (api/hooks.h vf_tracer), and the
   function stage's own tracing calls. */
vf_tensor *vf_trace_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out);
vf_tensor *vf_trace_reshape(vf_context *ctx, vf_tensor *x, int rank, const int64_t *user,
                            const int64_t *shape);
vf_tensor *vf_trace_view(vf_tensor *src, vf_tensor *view);
vf_tensor *vf_trace_const(vf_tensor *t, const void *data);
vf_status vf_trace_assign(vf_context *ctx, const vf_exec *e, const char *op);
vf_status vf_trace_print(vf_context *ctx, const char *label, vf_tensor *t);
/* fn of vf_host_map on host data; its failure recorded in ctx with name. */
vf_status vf_host_call(vf_context *ctx, const char *name, vf_host_fn fn, void *user, vf_dtype dt, int64_t n, void *data);
/* HOST node n at run time: in's values through its callback into out (out
   may be in), mapped in place where the backend allows, else through a
   host copy. Failure recorded in ctx. */
vf_status vf_host_apply(vf_context *ctx, const vf_node *n, const vf_tref *in, const vf_tref *out);
/* vf_host_map while tracing: a HOST node on t's value; its symbolic result. */
vf_tensor *vf_trace_host(vf_context *ctx, vf_tensor *t, vf_host_fn fn, void *user, const char *name);
/* A user kernel's call: a KERNEL node on in[k->n_in] and a PROJ per output,
   out[j] (symbolic tensors the caller made at the traced shapes) bound to
   them. The node's id, -1 with the error recorded. */
int vf_trace_kernel(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                    const uint32_t groups[3], vf_tensor **out);
void vf_trace_ref(const vf_tensor *t, vf_tref *r);
/* VF_OK unless t is a symbolic tensor of a trace that has ended. */
vf_status vf_trace_check(vf_context *ctx, const vf_tensor *t, const char *op, int index);
vf_status vf_trace_read_error(const vf_tensor *t);

/* At vf_context_destroy (registered with the first function, api/hooks.h):
   every function of ctx loses its graphs and plans and its context. */
void vf_functions_orphan_all(vf_context *ctx);

/* ---- replay (replay.c) ---- */

/* Replays graph g (a subgraph of the trace being recorded) as op calls:
   traced into the graph being recorded now, and noted on the tapes like
   any op. params[i] stands for PARAM index i; a CAPTURE of trace capture
   cc[k] reads cc_t[k] (others are captured again). outs[g->n_outputs]. A
   node that cannot be replayed (an assign) fails naming it. */
vf_status vf_replay_graph(vf_context *ctx, const vf_graph *g, vf_tensor *const *params, int n_cc, const int *cc,
                          vf_tensor *const *cc_t, vf_tensor **outs);

/* A loaded function's graph run as its body (it has no C body): every node
   issued again through the frontend as vf_replay_graph does, so a call is
   inlined into a trace and recorded by the tapes op by op, and its eager
   call's gradient replays it on an inner tape. effects: assigns and prints
   run (inlining); else an assign fails naming the node (a gradient). */
typedef struct vf_replay_fn {
    const char *name;           /* the function's, for messages */
    const vf_graph *g;
    const vf_capture *caps;     /* the concrete function's: CAPTURE k reads caps[k].t */
    int n_caps;
    bool effects;
} vf_replay_fn;
/* A vf_body whose user is a vf_replay_fn. */
vf_status vf_replay_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);

#endif
