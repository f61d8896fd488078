/* The kernels stage: user kernels (kernels.c, kernel_guard.c) and user
 * elementwise ops (user_elementwise.c), what users write, called like ops.
 * Above the API layer (they make tensors and run on the backend through
 * it), below tracing and autodiff, which they reach through api/hooks.h. */
#ifndef VF_KERNELS_KERNELS_H
#define VF_KERNELS_KERNELS_H

#include "api/api.h"

/* At vf_context_destroy (registered with the first of each, api/hooks.h):
   the context's user kernels and user elementwise ops lose their context. */
void vf_kernels_orphan_all(vf_context *ctx);
void vf_uelems_orphan_all(vf_context *ctx);
/* User elementwise op u on in[u->n_in] (user_elementwise.c): the common
   path of vf_elementwise_call and of gradients; NULL with the error
   recorded (or an input's). */
struct vf_uelem;
vf_tensor *vf_uelem_apply(vf_context *ctx, const struct vf_uelem *u, vf_tensor *const *in);
/* At vf_function_load: the live user kernel / elementwise op of ctx that a
   loaded one is (same name and the same code: SPIR-V, or expression and
   helpers; same arity, dtypes and layout), so the loaded function gets its
   C callbacks back (docs/KERNELS.md, "Saving and loading"); NULL: none. */
struct vf_ukernel;
struct vf_ukernel *vf_kernel_match_live(vf_context *ctx, const struct vf_ukernel *k);
struct vf_uelem *vf_uelem_match_live(vf_context *ctx, const struct vf_uelem *u);
/* One call of user kernel k on checked inputs (vf_kernel_call after its
   argument checks; a gradient's replay of a KERNEL node): eager, traced
   and taped as any op. out[k->n_out] receives tensors of the innermost scope. */
vf_status vf_ukernel_call(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params, vf_tensor **out);
/* Resolves one call of k on inputs of these dtypes and shapes (kernels.c):
   output shapes (callback or desc), workgroup counts, push constants
   (x->push / push_size / groups; in / out / shapes left to the caller).
   who names the caller in messages. */
vf_status vf_ukernel_prepare(vf_context *ctx, const vf_ukernel *k, const vf_tref *in, const void *params,
                             vf_tensor_spec *in_spec, vf_tensor_spec *out_spec, vf_kernel_shapes *shapes,
                             vf_ukernel_exec *x, const char *who);
/* Runs the resolved call x on the backend (in, out set), with the bounds
   check of desc.check_bounds / VKFUSE_CHECK (kernel_guard.c); a failure
   is recorded in ctx, prefixed with who. */
vf_status vf_ukernel_launch(vf_context *ctx, const vf_ukernel_exec *x, const char *who);

#endif
