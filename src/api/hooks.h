/* How the API layer reaches the stages above it without calling them by
 * name (docs/ARCHITECTURE.md, "The stages and their inversions").
 *
 * Calls run one way, down: the op entry points and tensors (the API layer)
 * sit below user kernels, tracing and autodiff. Yet an op must be recorded
 * into the active trace and noted on the active tapes, and a context's end
 * must reach every stage's objects. So the upper stages hand the API layer
 * what it needs when they start on a context:
 *
 *   - the tracer (trace.c) sets ctx->tracer when a trace begins: every
 *     symbolic tensor and every ctx->trace comes after that, so the API
 *     layer reaches the tracer only through it;
 *   - the tapes (tape.c) set ctx->tapes_hooks when a tape begins; before
 *     that no tape can record, and the vf_note_* calls below do nothing;
 *   - each stage that keeps objects of a context registers, when it makes
 *     the first, what vf_context_destroy runs for them (vf_context_on_destroy).
 */
#ifndef VF_FRONTEND_HOOKS_H
#define VF_FRONTEND_HOOKS_H

#include "api/api.h"
#include "graph/graph.h"

/* The pseudo-op of a reshape noted on the tapes (not an op of the table: a
   view or a copy). */
#define VF_TAPE_RESHAPE VF_OP_COUNT

struct vf_capture;
struct vf_function;

/* The tracer (trace.c), for the op entry points and tensors while a
   vf_function body is traced: they record graph nodes instead of running. */
typedef struct vf_tracer {
    vf_tensor *(*exec)(vf_context *ctx, const vf_exec *e, vf_tensor *out);
    vf_tensor *(*reshape)(vf_context *ctx, vf_tensor *x, int rank, const int64_t *user, const int64_t *shape);
    vf_tensor *(*view)(vf_tensor *src, vf_tensor *view);
    vf_tensor *(*constant)(vf_tensor *t, const void *data);
    void (*ref)(const vf_tensor *t, vf_tref *r);
    /* VF_OK unless t is a symbolic tensor of a trace that has ended */
    vf_status (*check)(vf_context *ctx, const vf_tensor *t, const char *op, int index);
    vf_status (*read_error)(const vf_tensor *t);
    /* symbolic dims (bit d) of t, 0 for a concrete tensor */
    uint32_t (*sym_dims)(vf_context *ctx, vf_tensor *t, const char *op);
    /* a user kernel's call: a KERNEL node and its PROJs; the node's id, -1: failed */
    int (*kernel)(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                  const uint32_t groups[3], vf_tensor **out);
} vf_tracer;

/* The tapes (tape.c, tape_control.c, grad_kernel.c): what an op made, noted
   on every tape that records now. The meaning of each is that of the
   function it points at (tape.h). */
typedef struct vf_tape_hooks {
    void (*record_exec)(vf_context *ctx, const vf_exec *e, vf_tensor *out);
    void (*record)(vf_context *ctx, int op, const vf_attrs *attrs, int n_in, vf_tensor *const *in,
                   vf_tensor *out);
    void (*record_constant)(vf_context *ctx, vf_tensor *out);
    vf_status (*record_kernel)(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                               vf_tensor *const *out);
    void (*record_control)(vf_context *ctx, vf_node_kind kind, const vf_graph *sub0, const vf_graph *sub1,
                           int n_in, vf_tensor *const *in, int max_iterations, int n_out, vf_tensor *const *out);
    void (*record_call)(vf_context *ctx, const struct vf_function *fn, const char *name, vf_body body, void *user,
                        const vf_graph *g, int n_in, vf_tensor *const *in, const struct vf_capture *caps,
                        int n_caps, int n_out, vf_tensor *const *out);
} vf_tape_hooks;

/* Registers fn (idempotent: the same fn each time a stage makes an object). */
void vf_context_on_destroy(vf_context *ctx, vf_on_destroy which, void (*fn)(vf_context *ctx));

/* The tracer; set whenever ctx->trace is or a symbolic tensor exists. */
static inline const vf_tracer *vf_tracer_of(const vf_context *ctx) { return ctx->tracer; }

/* t's symbolic dims (bit d) while a trace records, else 0. */
static inline uint32_t vf_sym_dims(vf_context *ctx, vf_tensor *t, const char *op)
{
    return ctx->trace ? ctx->tracer->sym_dims(ctx, t, op) : 0;
}

/* Noting on the active tapes: nothing while no tape was ever begun. */
static inline void vf_note_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out)
{
    if (ctx->tapes_hooks) ctx->tapes_hooks->record_exec(ctx, e, out);
}
static inline void vf_note(vf_context *ctx, int op, const vf_attrs *attrs, int n_in, vf_tensor *const *in,
                           vf_tensor *out)
{
    if (ctx->tapes_hooks) ctx->tapes_hooks->record(ctx, op, attrs, n_in, in, out);
}
static inline void vf_note_constant(vf_context *ctx, vf_tensor *out)
{
    if (ctx->tapes_hooks) ctx->tapes_hooks->record_constant(ctx, out);
}
static inline vf_status vf_note_kernel(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                                       vf_tensor *const *out)
{
    return ctx->tapes_hooks ? ctx->tapes_hooks->record_kernel(ctx, k, in, params, out) : VF_OK;
}
static inline void vf_note_control(vf_context *ctx, vf_node_kind kind, const vf_graph *sub0, const vf_graph *sub1,
                                   int n_in, vf_tensor *const *in, int max_iterations, int n_out,
                                   vf_tensor *const *out)
{
    if (ctx->tapes_hooks)
        ctx->tapes_hooks->record_control(ctx, kind, sub0, sub1, n_in, in, max_iterations, n_out, out);
}
static inline void vf_note_call(vf_context *ctx, const struct vf_function *fn, const char *name, vf_body body,
                                void *user, const vf_graph *g, int n_in, vf_tensor *const *in,
                                const struct vf_capture *caps, int n_caps, int n_out, vf_tensor *const *out)
{
    if (ctx->tapes_hooks)
        ctx->tapes_hooks->record_call(ctx, fn, name, body, user, g, n_in, in, caps, n_caps, n_out, out);
}

#endif
