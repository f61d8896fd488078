/* vkfuse: traced functions (vf_function, tf.function), saving and
 * loading them, control flow and host callbacks. Part of the public API;
 * included by vkfuse.h (include either). Its own header only to keep
 * vkfuse.h to the core API; docs/FUNCTIONS.md is the guide. */
#ifndef VKFUSE_FUNCTION_H
#define VKFUSE_FUNCTION_H

#include "vkfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Traced functions (tf.function) ---------------------------------------
   A vf_function wraps a body. Its first call with a new input signature
   traces the body: ops inside it record graph nodes on symbolic tensors
   instead of running. The graph is optimised (constant folding, CSE, DCE,
   algebraic simplification, small vf_cond -> select) and cached as a
   concrete function; later calls with the same signature run it without
   calling the body. The signature is the dtype and shape of every input;
   tensors the body uses that were made outside it are captured (held by
   the concrete function): variables by reference, so a call sees their
   current value and assigns in the body change them for everyone.

   While tracing, a symbolic tensor has the sizes of the call being traced
   (vf_tensor_dim works) but no value: vf_tensor_read fails with
   VF_ERROR_TRACE. C code in the body (printf, if on host values) runs once
   per trace, not per call: use vf_print, vf_cond and vf_while_loop for what
   must happen at run time. vf_variable cannot be called while tracing;
   create variables outside the body. A body that calls its own function
   (directly or not) fails with VF_ERROR_TRACE. A function may outlive its
   context: vf_function_destroy then only frees it, and calls return
   VF_ERROR_INVALID_ARGUMENT. VKFUSE_DUMP=<dir> writes each graph before and after every pass
   (text and DOT); VKFUSE_LOG=info explains every retrace. */

/* One input of an input_signature. A dim of -1 is symbolic: one trace
   serves every size of it (the graph re-infers its shapes per call). */
typedef struct {
    vf_dtype dtype;
    int rank;
    int64_t shape[VF_MAX_RANK];
} vf_tensor_spec;

/* A function body: reads in[0..n_inputs-1], sets out[0..n_outputs-1] to
   tensors (made by ops in the body, or inputs, or captured tensors) and
   returns VF_OK, or an error status. Used by vf_function, vf_cond and
   vf_while_loop alike. */
typedef vf_status (*vf_body)(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);

typedef struct {
    const char *name;       /* for messages, logs and dumps; NULL: "function" */
    vf_body body;
    void *user;             /* passed to body */
    int n_inputs, n_outputs;  /* n_outputs -1: the first trace decides (see below) */
    const vf_tensor_spec *input_signature; /* n_inputs specs, copied; NULL:
                               one concrete function per concrete signature */
    bool unfused;           /* one kernel per op, no fusion: the baseline that
                               VKFUSE_FUSION=0 gives every function (for profiles
                               and benchmarks that compare both in one process) */
} vf_function_desc;

typedef struct {
    int traces;             /* times the body was traced */
    int64_t calls;          /* vf_function_call calls that succeeded */
    int kernels;            /* kernels in the plan of the last concrete function called */
    int dispatches_per_call;/* dispatches the last call made (loops count per iteration) */
    int64_t peak_bytes;     /* device bytes the last call used for its values: with a
                               recorded plan the arena plus the outputs, else what it allocated */
    int64_t unplanned_bytes;/* with a recorded plan: the bytes of all op results (intermediates
                               and outputs) without sharing, so peak_bytes <= unplanned_bytes;
                               else equal to peak_bytes */
    int retraces;           /* traces after the first */
    bool eager;             /* the last call ran the body eagerly */
    bool planned;           /* the last call ran a recorded plan (Vulkan; see docs/FUNCTIONS.md) */
    int submits_per_call;   /* queue submissions during the last call (a recorded plan: 1) */
    int barriers_per_call;  /* pipeline barriers the last call submitted (hazards only, plus one at each
                               end of a recorded plan) */
    int plans;              /* recorded plans made so far (one per concrete function and size set) */
    int64_t arena_bytes;    /* the last call's plan: its intermediates' shared arena */
} vf_function_stats;

/* With n_outputs -1 the output count is what the first trace returns, as
   for tf.function (a binding does not know it before its body has run):
   that trace's body gets room for VF_FUNCTION_MAX_OUTPUTS outputs and sets
   the first n of them (the rest stay NULL); n is then the function's
   n_outputs (vf_function_io_count) and later traces must set exactly n.
   Until that first trace the caller's out needs VF_FUNCTION_MAX_OUTPUTS
   entries, and the function can only be called to be traced (not while
   another function traces, nor with bodies run eagerly). */
#define VF_FUNCTION_MAX_OUTPUTS 64
/* NULL with the error recorded in ctx and as the thread's vf_last_error when
   desc is invalid. */
VF_API vf_function *vf_function_create(vf_context *ctx, const vf_function_desc *desc);
/* Runs the function: traces on a new signature (or checks the call against
   the input_signature: a mismatch fails with VF_ERROR_SHAPE / DTYPE and a
   message showing the signature and what was passed), then runs the
   concrete function. out[n_outputs] receives new tensors owned by the
   caller's innermost scope. Inside another function's trace it is inlined.
   With vf_run_functions_eagerly / VKFUSE_EAGER=1 the body runs eagerly. */
VF_API vf_status vf_function_call(vf_function *fn, vf_tensor *const *in, vf_tensor **out);
VF_API vf_status vf_function_stats_get(vf_function *fn, vf_function_stats *out);
/* How many tensors a call takes in in[] and gives in out[]: the desc's
   counts, or a loaded function's from its file (what a binding sizes its
   arrays by); n_outputs is -1 before the first trace of a function
   created with n_outputs -1. -1 in each and VF_ERROR_INVALID_ARGUMENT for
   a NULL, destroyed or orphaned (its context gone) function; either
   pointer may be NULL. */
VF_API vf_status vf_function_io_count(vf_function *fn, int *n_inputs, int *n_outputs);
/* Why the last retrace happened ("input 0 dim 0: traced 128, got 100"), "" if none. */
VF_API const char *vf_function_retrace_reason(vf_function *fn);
/* The text dump of the optimised graph of the last concrete function called
   (malloc'd: free it with vf_free); NULL if none. */
VF_API char *vf_function_graph_text(vf_function *fn);
VF_API void vf_function_destroy(vf_function *fn);

/* Deployment (SavedModel). vf_function_save writes fn's concrete functions
   (their optimised graphs, input signatures and captures), the values of
   the tensors they capture, variables marked as such, and on Vulkan the
   SPIR-V of the kernels its calls used, to path: a versioned, checksummed
   little-endian file (docs/FORMAT.md). Call fn with every signature it
   must serve first (with an input_signature, one call serves every size of
   its -1 dims); a function with no concrete function yet fails with
   VF_ERROR_INVALID_ARGUMENT. I/O failures: VF_ERROR_IO.
   vf_function_load makes *out from such a file in ctx (any backend): a
   function without a body that runs the saved graphs, bit-identical to the
   saved function on the same backend. Loaded into a Vulkan context, the
   file's kernels go into its shader cache (after the SPIR-V validator
   accepts them), so the first call compiles none. It owns fresh copies of
   the saved variables (vf_function_variable). A call whose inputs match no
   saved concrete function fails with VF_ERROR_SHAPE. A truncated,
   corrupted, foreign or newer-version file fails with VF_ERROR_FORMAT and a
   message naming the byte offset and the field; a missing file with
   VF_ERROR_IO. User kernels and user elementwise ops that ctx has created
   with the same name and code are used by the loaded function, with their
   C functions (docs/KERNELS.md, "Saved functions"). A loaded function is
   differentiable wherever its ops are: called under a vf_tape, its graph
   is replayed op by op for the gradient; called inside a traced body, its
   graph is inlined there, as a body would be (docs/GRADIENTS.md). */
VF_API vf_status vf_function_save(vf_function *fn, const char *path);
VF_API vf_status vf_function_load(vf_context *ctx, const char *path, vf_function **out);
/* The variables fn's concrete functions capture, in order of first capture;
   the tensors belong to fn (valid until vf_function_destroy; read them, or
   assign to them, like any variable). Out of range: NULL and an error. */
VF_API int vf_function_variable_count(vf_function *fn);
VF_API vf_tensor *vf_function_variable(vf_function *fn, int i);
/* tf.config.run_functions_eagerly: bodies run eagerly on every call (also
   VKFUSE_EAGER=1). Good for debugging: printf and vf_tensor_read work. */
VF_API void vf_run_functions_eagerly(vf_context *ctx, bool on);

/* ---- Control flow and runtime printing (eager and traced) ----------------
   vf_cond: pred is one bool. Eagerly the host reads it and runs one branch
   on in[0..n_in-1]. Traced, both branches are traced into subgraphs and
   must return the same dtypes and shapes; small branches become a select,
   others (on Vulkan) guarded indirect dispatches decided on the device: no
   host round trip. Branches that print or nest control flow read pred back
   per call (docs/FUNCTIONS.md).
   out[n_out] receives the chosen branch's outputs (caller's scope). */
VF_API vf_status vf_cond(vf_context *ctx, vf_tensor *pred, vf_body then_fn, vf_body else_fn, int n_in,
                         vf_tensor *const *in, int n_out, vf_tensor **out, void *user);
/* while (cond_fn(vars) -> one bool) vars = body_fn(vars); at most
   max_iterations iterations (<= 0: unbounded). vars[n_vars] is updated in
   place with the final values (caller's scope); loop vars keep their dtype
   and shape. Traced, cond and body are recorded once each; the condition
   is read back to the host per iteration. */
VF_API vf_status vf_while_loop(vf_context *ctx, vf_body cond_fn, vf_body body_fn, int n_vars,
                               vf_tensor **vars, int max_iterations, void *user);
/* tf.print: prints "label: [values]" to stdout (at most 64 values) when it
   runs: at once eagerly, at every call in a traced function. */
VF_API vf_status vf_print(vf_context *ctx, const char *label, vf_tensor *t);

/* A host callback (tf.numpy_function's in-place cousin): returns a new
   tensor of x's dtype and shape whose values are x's after fn changed them
   on the host: fn gets x's packed elements in data (numel of them) and
   rewrites them in place; returning non-VF_OK (with a message in msg) makes
   the call fail with that status. Eagerly fn runs at once. In a traced
   function it is a graph node that calls fn at every call: an effect, never
   removed, merged or folded, and kept in order with other effects; the
   kernels it depends on are submitted and waited for before it, the ones
   reading its result in a later submit (on Vulkan the function runs as
   recorded plans split at such nodes, and work that does not depend on it
   is submitted before fn runs: docs/FUNCTIONS.md). No gradient flows through it (vf_stop_gradient's),
   and vf_function_save of a function holding one fails with
   VF_ERROR_UNSUPPORTED. fn runs holding ctx's lock: it must not call vkfuse
   on ctx. name labels it in dumps and messages (NULL: "host"). vkfuse_dist
   uses it for the allreduce inside traced steps. */
typedef vf_status (*vf_host_fn)(void *user, vf_dtype dtype, int64_t numel, void *data, char *msg, size_t msg_len);
VF_API vf_tensor *vf_host_map(vf_context *ctx, vf_tensor *x, vf_host_fn fn, void *user, const char *name);
/* Whether a vf_function body is being traced on ctx (by this thread): ops
   record graph nodes, tensors have no values. */
VF_API bool vf_context_tracing(vf_context *ctx);
/* While tracing: bit d set when dim d of t is symbolic (it follows an
   input_signature -1 dim, so it varies between calls; vf_tensor_dim gives
   the size being traced). 0 for other tensors and eagerly. A slice of a
   symbolic dim whose bounds both count from the same end (x[:1], x[2:5],
   x[-3:], every vf_split part but the one given as -1) has a static
   dim: its size is the same at every call (docs/FUNCTIONS.md). */
VF_API uint32_t vf_tensor_symbolic_dims(vf_tensor *t);

#ifdef __cplusplus
}
#endif
#endif /* VKFUSE_FUNCTION_H */
