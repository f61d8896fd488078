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

#include "frontend/frontend.h"
#include "frontend/hooks.h"
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

#endif
