/* Gradient tapes (vf_tape): what is recorded and the gradient rules.
 *
 * While a tape is active on a context, every op that runs (eagerly) or is
 * traced (symbolically) appends an entry: the op, its attributes, its
 * input tensors and its output, each retained so that their storage (and
 * so their identity) outlives the tape. Tensors are identified by their
 * tref (buffer, offset, dtype, shape; for symbolic tensors the graph value),
 * so a view that aliases a tensor with the same shape is the same value.
 * vf_tape_gradient walks the entries backwards and calls the rule of each
 * op (src/graph/autodiff.c); the rules are made of ordinary op calls, so
 * inside a traced body the backward pass is traced into the same graph. */
#ifndef VF_TAPE_H
#define VF_TAPE_H

#include "frontend/frontend.h"

/* The pseudo-op of a reshape (not an op of the table: a view or a copy). */
#define VF_TAPE_RESHAPE VF_OP_COUNT

typedef struct vf_tape_entry {
    int op;                 /* a vf_op, or VF_TAPE_RESHAPE */
    vf_attrs attrs;
    int n_in;
    vf_tensor *in[3];       /* retained; NULL: an input no tensor holds (a constant) */
    vf_tref in_key[3];
    vf_tensor *out;         /* retained */
    vf_tref out_key;
} vf_tape_entry;

/* A gradient rule: given the entry and g (the gradient of its output, of
   the output's shape), sets gin[i] to the gradient of input i (of that
   input's shape) or leaves it NULL (no gradient: integer or bool inputs).
   Returns false with the error recorded in ctx. */
typedef bool (*vf_grad_fn)(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin);

/* The rule of an entry's op; NULL: not differentiable. */
vf_grad_fn vf_grad_rule(const vf_tape_entry *e);
/* The rule table, indexed by vf_op: a row per differentiable op. */
extern const vf_grad_fn vf_grad_table[VF_OP_COUNT];

/* Recording hooks. vf_tape_record_exec is called by vf_run after an op ran
   or was traced (inputs are resolved from the exec's trefs);
   vf_tape_record by entry points that have their tensors at hand (matmul,
   reshape). Both do nothing unless a tape is active and not muted. */
void vf_tape_record_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out);
void vf_tape_record(vf_context *ctx, int op, const vf_attrs *attrs, int n_in, vf_tensor *const *in,
                    vf_tensor *out);

/* Helpers for the rules (autodiff.c). */
vf_tensor *vf_ad_scalar(vf_context *ctx, vf_dtype dt, double v);
/* v (broadcastable to like's shape) broadcast to like's shape. */
vf_tensor *vf_ad_broadcast(vf_context *ctx, vf_tensor *v, vf_tensor *like);
/* g reduced (summed) to x's shape: the gradient of a broadcast. */
vf_tensor *vf_ad_unbroadcast(vf_context *ctx, vf_tensor *g, vf_tensor *x);
/* g reshaped to shape; while tracing the first non-1 dim is left to be
   inferred (-1), so that a symbolic batch dim stays symbolic. */
vf_tensor *vf_ad_reshape(vf_context *ctx, vf_tensor *g, int rank, const int64_t *shape);

#endif
