/* Frontend internals: the context, tensors, scopes and the op helpers
 * shared by the op entry points. Never installed. */
#ifndef VF_FRONTEND_H
#define VF_FRONTEND_H

#include "backend.h"
#include "api/handles.h"
#include "api/lock.h"
#include "plan/host.h"
#include "util/err.h"
#include "vkfuse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Device memory shared by a tensor and its views (reshape). */
typedef struct vf_storage {
    int refs;
    vf_buffer *buf;
    size_t bytes;
} vf_storage;

struct vf_tensor {
    vf_context *ctx;
    int refs;              /* all references: the owning scope's, the caller's, the library's */
    int held;              /* of those, the library's (tapes, functions: vf_tensor_hold) */
    int scope;             /* depth of the owning scope, -1: none */
    int slot;              /* index in that scope's list */
    vf_tensor *prev, *next;/* the context's list of live tensors */
    vf_dtype dtype;
    int rank;
    int64_t shape[VF_MAX_RANK];
    int64_t numel;
    vf_storage *st;        /* NULL when numel == 0 */
    size_t offset;         /* bytes into st */
    bool is_variable;
    /* Symbolic tensors (made while a vf_function traces; see trace.h): no
       storage; the value sym_value of graph sym_graph of trace sym_gen. */
    uint64_t sym_gen;      /* 0: a concrete tensor */
    int sym_graph, sym_value;
};

typedef struct vf_trace vf_trace;

/* The environment as the frontend uses it, read once when the context is
   created (context.c: the only place the library calls getenv) and passed
   down from here. The Vulkan backend gets its part as vf_vk_options at
   creation. */
typedef struct vf_options {
    bool eager;            /* VKFUSE_EAGER: vf_function bodies run eagerly */
    bool log_info;         /* VKFUSE_LOG=info|debug: retraces and their reasons */
    bool no_plan;          /* VKFUSE_NO_PLAN: traced functions run node by node */
    bool fusion_off;       /* VKFUSE_FUSION=0: every plan unfused (per function:
                              vf_function_desc.unfused) */
    bool check;            /* VKFUSE_CHECK: plans are checked on the host backend (plan/check.h) */
    char dump_dir[4096];   /* VKFUSE_DUMP: graphs and kernels are written there; "": none */
    char check_root[4096]; /* where a checked plan's GLSL goes: VKFUSE_DUMP, else TMPDIR, else /tmp */
    int cpu_threads;       /* VKFUSE_THREADS: the CPU backends' threads (also the host backend's);
                              0: the online CPUs */
    bool cpu_dnnl_off;     /* VKFUSE_CPU_DNNL=0: the CPU backends' convolutions and pools without oneDNN */
} vf_options;

typedef struct vf_scope {
    vf_tensor **items;
    int n, cap;
} vf_scope;

/* What vf_context_destroy runs for a stage's objects, in this order:
   functions first (their plans and captures need the backend and the
   tensors), then user kernels and user elementwise ops, then tapes; the
   tensors, the backend and the handle slabs after them. */
typedef enum {
    VF_ON_DESTROY_FUNCTIONS,
    VF_ON_DESTROY_KERNELS,
    VF_ON_DESTROY_UELEMS,
    VF_ON_DESTROY_TAPES,
    VF_ON_DESTROY_COUNT
} vf_on_destroy;
struct vf_context {
    vf_err err;            /* the sticky first error the user sees */
    vf_err be_err;         /* where the backend reports; folded into err by vf_backend_failed */
    vf_backend_t be;       /* be.iface NULL: creation failed, every op fails */
    vf_backend kind;
    char device_name[512];
    char cache_dir[1024];
    vf_scope *scopes;      /* scopes[0] is the root scope */
    int n_scopes, cap_scopes;
    vf_tensor *live;       /* every tensor not yet freed, so destroy frees all */
    vf_trace *trace;       /* non-NULL while a vf_function body is traced */
    uint64_t trace_gen;    /* traces started so far */
    bool run_eagerly;      /* vf_run_functions_eagerly */
    bool profile;          /* desc.profile or VKFUSE_PROFILE=1: calls are timed (profile.c) */
    struct vf_tape *tapes; /* active gradient tapes, innermost first (tape.c) */
    /* What the stages above registered (hooks.h): the tracer once a trace
       began, the tapes' recording once a tape began, and what destroy runs
       for each stage's objects. */
    const struct vf_tracer *tracer;
    const struct vf_tape_hooks *tapes_hooks;
    void (*on_destroy[VF_ON_DESTROY_COUNT])(vf_context *ctx);
    int tape_mute;         /* > 0: ops are not recorded (a tape computing gradients, reshape internals) */
    vf_ctx_mutex lock;     /* taken by every public entry point (lock.h) */
    /* Lifetime (handles.h, function.c): tensors and tapes live in slots that
       are never reused, so a stale handle is an error, not a crash. */
    vf_handles tensor_slots, tape_slots, generator_slots;
    struct vf_function *functions; /* every function of ctx (destroyed ones too), orphaned at destroy */
    struct vf_kernel *kernels;     /* live user kernels (kernels.c), orphaned at destroy */
    struct vf_elementwise_op *uelems; /* live user elementwise ops (user_elementwise.c), orphaned too */
    vf_host host;          /* the host (CPU) backend of constant folding and VKFUSE_CHECK, made on first use */
    vf_options opt;        /* the environment, read at creation */
    /* The function body being traced (function.c sets it around the call):
       its variable inputs go by reference, so the body's own release of one
       is refused (vf_tensor_release); depth: the lock depth at the call. */
    struct {
        const char *fn;
        vf_tensor *const *vars; /* n entries, NULL where the input is no variable */
        int n, depth;
    } body;
};

/* A create on ctx failed (ctx may be NULL) with status (VF_OK: the
   context's): records the reason as the calling thread's last error too
   (vkfuse.h, "Failed creates"); NULL. */
void *vf_create_failed(vf_context *ctx, vf_status status, const char *who);
/* Records an error in ctx (first one wins) and returns status. */
vf_status vf_fail(vf_context *ctx, vf_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records a backend failure: "<what>: <backend's message>". Also used to
   pick up messages the backend recorded on its own (validation layer). */
vf_status vf_backend_failed(vf_context *ctx, vf_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The context's host backend (made here on first use: context.c picks
   every backend). NULL: it could not be made, the reason in ctx->host.err. */
vf_host *vf_context_host(vf_context *ctx);
/* Constant folding's evaluator: the host backend, made when first needed. */
vf_evaluator vf_context_evaluator(vf_context *ctx);

/* Formats a shape as "[2,3,4]" into buf (always NUL-terminated). */
const char *vf_shape_str(char *buf, size_t len, int rank, const int64_t *shape);
#define VF_SHAPE_STR_LEN 128

/* A new tensor owned by the innermost scope, with storage allocated when
   numel > 0. NULL (error recorded, naming op) on failure. */
vf_tensor *vf_tensor_new(vf_context *ctx, const char *op, vf_dtype dtype, int rank,
                         const int64_t *shape);
/* A view sharing t's storage with another shape (same numel). */
vf_tensor *vf_tensor_view(vf_tensor *t, int rank, const int64_t *shape);
vf_tref vf_tensor_ref(const vf_tensor *t);
/* The library's own references (a tape's record, a function's variable or
   capture, a run's values), apart from the caller's: vf_tensor_release
   drops a reference the caller retained, else the scope's ownership, never
   one of these, so a caller's early release cannot take a tape's reference
   and leave its scope to drop one again. hold returns t (NULL for NULL);
   drop frees t with its last reference. */
vf_tensor *vf_tensor_hold(vf_tensor *t);
void vf_tensor_drop(vf_tensor *t);
/* Releases what other threads queued while this one held ctx's lock
   (lock.h: vf_tensor_release never waits); called with the lock held. */
void vf_tensor_release_queued(vf_context *ctx);
/* Ends the scope's ownership of t (nothing when no scope owns it), whoever
   else holds it: the library's release of a value it put in the caller's
   scope and no longer needs, which the caller may have retained. */
void vf_tensor_disown(vf_tensor *t);

/* Checks that a shape is valid (rank, dims >= 0, size fits); op names the caller. */
bool vf_check_shape(vf_context *ctx, const char *op, int rank, const int64_t *shape, int64_t *numel);
/* Checks that t is usable in ctx: alive (not released, not of an ended
   scope or trace) and of ctx. index < 0: t is not an input ("op: tensor #3
   was released..."). */
bool vf_check_input(vf_context *ctx, const char *op, const vf_tensor *t, int index);
/* Only the first part: t is a live tensor handle. ctx NULL: record the
   error in t's own context. */
bool vf_check_alive(vf_context *ctx, const char *op, const vf_tensor *t, int index);
/* The status vf_check_alive recorded for dead t. */
vf_status vf_tensor_dead_status(const vf_tensor *t);

void vf_tensor_free_all(vf_context *ctx);

/* Runs an op on the backend; releases out and returns NULL on failure. */
vf_tensor *vf_run(vf_context *ctx, vf_exec *e, vf_tensor *out);
/* Fills t (already allocated) with value: the backend's FILL op. */
bool vf_fill_into(vf_context *ctx, vf_tensor *t, double value);

/* The common path of every elementwise op: in[0..arity-1], result dtype by
   the table's rule (VF_RESULT_ATTR: to). */
vf_tensor *vf_elementwise(vf_context *ctx, vf_op op, vf_tensor *const *in, vf_dtype to);
/* A window op (conv2d or its backprop ops, ops_conv.c) with its geometry
   already resolved: what vf_conv2d and the gradient rules call. */
vf_tensor *vf_window_op(vf_context *ctx, vf_op op, vf_tensor *a, vf_tensor *b, const vf_conv_attrs *c);
/* The shape-and-dtype engine (vf_infer_op) on the refs an exec will get:
   the result's dtype and shape, or false with the engine's message
   recorded. Entry points call it after normalising their arguments. */
bool vf_infer_refs(vf_context *ctx, vf_op op, const vf_attrs *a, int n, const vf_tref *in, vf_dtype *dt,
                   int *rank, int64_t *shape);
/* The tail every entry point shares once its exec e is built (op, attrs,
   inputs): the engine's result dtype and shape, the output tensor in the
   innermost scope, the empty check. vf_op_output returns the tensor when
   there is work to do; NULL when the caller returns *empty instead: NULL
   (failed, the error recorded) or an empty result, nothing to compute
   (note_empty: noted on the tapes as a constant, so that a target made
   from it is recorded, off every source's path). vf_op_tail is the whole
   tail: vf_op_output, then vf_run. */
vf_tensor *vf_op_output(vf_context *ctx, const char *name, const vf_exec *e, bool note_empty, vf_tensor **empty);
vf_tensor *vf_op_tail(vf_context *ctx, const char *name, vf_exec *e, bool note_empty);
/* Checks t's dtype as input index of op (the engine's rule), with a message. */
bool vf_check_dtype(vf_context *ctx, vf_op op, const vf_tensor *t, int index);
/* The indices half of vf_top_k alone (ops_index.c; top_k's gradient rule). */
vf_tensor *vf_top_k_indices(vf_context *ctx, vf_tensor *x, int k);
/* g reshaped (ops_shape.c) to shape; while tracing the first non-1 dim is left to be
   inferred (-1), so that a symbolic batch dim stays symbolic. */
vf_tensor *vf_ad_reshape(vf_context *ctx, vf_tensor *g, int rank, const int64_t *shape);
/* Normalises a possibly negative axis for rank; false (error) if out of range. */
bool vf_norm_axis(vf_context *ctx, const char *op, int axis, int rank, int *out);

/* g, the gradient of slice a of x, scattered into zeros of x's shape
   (SLICE_GRAD; ops_movement.c): exact for every size of a symbolic dim. */
vf_tensor *vf_slice_grad(vf_context *ctx, vf_tensor *g, vf_tensor *x, const vf_attrs *a);

#endif
