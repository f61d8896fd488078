/* Gradient tapes (vf_tape): what is recorded and the gradient rules.
 *
 * While a tape is active on a context, every op that runs (eagerly) or is
 * traced (symbolically) appends an entry: the op, its attributes, its
 * input tensors and its output, each retained so that their storage (and
 * so their identity) outlives the tape. Tensors are identified by their
 * tref (buffer, offset, dtype, shape; for symbolic tensors the graph value),
 * so a view that aliases a tensor with the same shape is the same value.
 * vf_tape_gradient walks the entries backwards and calls the rule of each
 * op (src/autodiff/grad_rules.c); the rules are made of ordinary op calls, so
 * inside a traced body the backward pass is traced into the same graph,
 * and other active tapes record them (higher order). A traced vf_cond /
 * vf_while_loop, and a traced vf_function called eagerly, are one entry
 * each (vf_tape_cf) whose rule is in tape_control.c. */
#ifndef VF_TAPE_H
#define VF_TAPE_H

#include "api/api.h"
#include "api/hooks.h"
#include "function/trace.h"
#include "graph/graph.h"

/* The pseudo-op of a traced vf_cond / vf_while_loop (entry.cf is set). */
#define VF_TAPE_CONTROL (VF_OP_COUNT + 1)

/* A traced vf_cond or vf_while_loop on the tape (tape_control.c): the node's
   subgraphs and every value it reads, so that its gradient can replay the
   branches / body (a cond's gradient is a cond over the branches' VJPs, a
   loop's a reverse loop that recomputes each iteration's state). Shared by
   every tape that recorded it (refs). Inputs, in this order:
     COND:  pred, the n_explicit inputs, then_fn's outer captures (split),
            else_fn's outer captures, the float concrete captures (n_cc);
     WHILE: the n_explicit loop vars, cond_fn's outer captures (split),
            body_fn's outer captures, the float concrete captures (n_cc).
   Outer captures are values of the enclosing graph a branch reads without
   taking them as inputs; concrete captures are tensors made outside the
   traced function (weights, variables) that any subgraph reads, by index
   into the trace's captures (cc[]). */
typedef struct vf_tape_cf {
    int refs;
    vf_node_kind kind;          /* VF_NODE_COND or VF_NODE_WHILE */
    const vf_graph *sub[2];     /* owned by the node, which lives as long as the trace */
    int n_explicit, split, n_outer1, max_iterations;
    int n_cc;
    int *cc;                    /* trace capture indices */
    int n_in, n_out;
    vf_tensor **in;             /* retained; NULL for concrete captures (the key is enough) */
    vf_tref *in_key;
    vf_tensor **out;            /* retained */
    vf_tref *out_key;
    uint64_t trace_gen;
    /* A traced vf_function called eagerly under a tape (call is true): its
       inputs are the call's inputs then the float captures (cc[] index the
       concrete function's captures); the rule runs the body again eagerly
       on an inner tape. body NULL: loaded from a file, no body: its graph g
       runs in its place (vf_replay_body with the concrete function's
       captures caps). */
    bool call, assigns;
    vf_body body;
    void *user;
    const vf_graph *g;          /* owned by the function, alive until it is destroyed */
    const vf_capture *caps;
    int n_caps;
    char name[64];
    /* The function called: its struct outlives vf_function_destroy until
       the context ends (function.c), so the rule can see that it was
       destroyed instead of running a body whose user data may be gone. */
    const struct vf_function *fn;
    /* A user kernel's call (kind VF_NODE_KERNEL, kernels.c): the kernel (one
       reference) and its params; its gradient is the kernel's grad callback. */
    vf_ukernel *uk;
    void *params;
} vf_tape_cf;

typedef struct vf_tape_entry {
    int op;                 /* a vf_op, or VF_TAPE_RESHAPE */
    vf_attrs attrs;
    int n_in;
    vf_tensor *in[3];       /* retained; NULL: an input no tensor holds (a constant) */
    vf_tref in_key[3];
    vf_tensor *out;         /* retained */
    vf_tref out_key;
    vf_tape_cf *cf;         /* op == VF_TAPE_CONTROL: the control flow; NULL otherwise */
} vf_tape_entry;

/* A gradient rule: given the entry and g (the gradient of its output, of
   the output's shape), sets gin[i] to the gradient of input i (of that
   input's shape) or leaves it NULL (no gradient: integer or bool inputs).
   Returns false with the error recorded in ctx. */
typedef bool (*vf_grad_fn)(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin);

/* A rule object (one per rule, `vf_grad_<rule>`, in the file of its rule). */
typedef struct vf_grad_rule {
    vf_grad_fn fn;
} vf_grad_rule;

/* The rule of op, from the autodiff stage's table (grad_table.c; the op
   table below keeps no pointer up); NULL: not differentiable. */
const vf_grad_rule *vf_grad_rule_of(vf_op op);

/* The rule of an entry's op (its row's, or the reshape rule); NULL: not
   differentiable (no rule, a non-float value, an input no tensor holds). */
vf_grad_fn vf_grad_fn_of(const vf_tape_entry *e);

/* Recording hooks. vf_tape_record_exec is called by vf_run after an op ran
   or was traced (inputs are resolved from the exec's trefs);
   vf_tape_record by entry points that have their tensors at hand (matmul,
   reshape). Both do nothing unless a tape is active and not muted. */
void vf_tape_record_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out);
void vf_tape_record(vf_context *ctx, int op, const vf_attrs *attrs, int n_in, vf_tensor *const *in,
                    vf_tensor *out);

/* Records a traced vf_cond / vf_while_loop that was just added as node `kind`
   with subgraphs sub0, sub1 (tape_control.c; a no-op unless a tape
   records). in: the explicit inputs (cond: pred first, then the inputs;
   while: the initial loop vars); the subgraphs' outer captures and float
   concrete captures are taken from the subgraphs; out: the node's outputs. */
void vf_tape_record_control(vf_context *ctx, vf_node_kind kind, const vf_graph *sub0, const vf_graph *sub1,
                            int n_in, vf_tensor *const *in, int max_iterations, int n_out,
                            vf_tensor *const *out);
/* Records out as a constant the tape saw made (no inputs, no gradient):
   results computed without vf_run from empty inputs (an empty result, a
   sum over an empty set), so that a target made from them is "recorded
   but off every source's path" (zero gradients), not "never recorded". */
void vf_tape_record_constant(vf_context *ctx, vf_tensor *out);
/* Records a traced vf_function's eager call (its plan runs kernels the tape
   does not see) as one entry (tape_control.c). g, caps: the concrete
   function's graph and captures (a loaded function's rule replays them). */
void vf_tape_record_call(vf_context *ctx, const struct vf_function *fn, const char *name, vf_body body, void *user,
                         const vf_graph *g, int n_in,
                         vf_tensor *const *in, const vf_capture *caps, int n_caps, int n_out, vf_tensor *const *out);
/* Records a user kernel's call (eager or traced) as one entry with its
   inputs and outputs (grad_kernel.c); VF_OK or out of host memory. */
vf_status vf_tape_record_kernel(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                                vf_tensor *const *out);
/* Its gradient: the kernel's grad callback, checked (grad_kernel.c). */
bool vf_grad_kernel(vf_context *ctx, const vf_tape_cf *cf, vf_tensor *const *gout, vf_tensor **gin);
/* Appends en to every tape that records now (a control-flow entry's cf is
   shared: each tape takes a reference). */
void vf_tape_record_entry(vf_context *ctx, const vf_tape_entry *en);
/* Whether some tape records ops made now (a cheap check before building an entry). */
bool vf_tape_recording(vf_context *ctx);
/* The rule of a control-flow entry: gout[k] (NULL: no gradient) for each
   output, gin[j] for each input (NULL: none). Returns false with the error
   recorded in ctx. */
bool vf_grad_control(vf_context *ctx, const vf_tape_entry *e, vf_tensor *const *gout, vf_tensor **gin);
void vf_tape_cf_release(vf_tape_cf *cf);

/* The vector-Jacobian product sum_t seeds[t] . d targets[t] / d sources on an
   internal tape (control-flow rules): tapes begun with vf_tape_begin, but
   targets the tape did not record (a constant output of a branch) give
   nothing instead of an error. grads[i] is zeros where nothing flows. */
vf_status vf_tape_vjp(vf_tape *tp, int n_t, vf_tensor *const *targets, vf_tensor *const *seeds, int n,
                      vf_tensor *const *sources, vf_tensor **grads);


/* Helpers for the rules (grad_rules.c). */
vf_tensor *vf_ad_scalar(vf_context *ctx, vf_dtype dt, double v);
/* v (broadcastable to like's shape) broadcast to like's shape. */
vf_tensor *vf_ad_broadcast(vf_context *ctx, vf_tensor *v, vf_tensor *like);
/* g reduced (summed) to x's shape: the gradient of a broadcast. */
vf_tensor *vf_ad_unbroadcast(vf_context *ctx, vf_tensor *g, vf_tensor *x);

/* At vf_context_destroy (registered with the first tape, api/hooks.h):
   active tapes drop what they hold. */
void vf_tapes_free_all(vf_context *ctx);

#endif
