/* Frontend internals: the context, tensors, scopes and the op helpers
 * shared by the op entry points. Never installed. */
#ifndef VF_FRONTEND_H
#define VF_FRONTEND_H

#include "backend.h"
#include "frontend/handles.h"
#include "frontend/lock.h"
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
/* At vf_context_destroy: every function of ctx loses its graphs and plans
   and its context (function.c); active tapes drop what they hold (tape.c). */
void vf_functions_orphan_all(vf_context *ctx);
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
void vf_tape_slots_init(vf_context *ctx);
/* The generators' slots (generator.c). */
void vf_generator_slots_init(vf_context *ctx);
void vf_tapes_free_all(vf_context *ctx);

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
/* Checks t's dtype as input index of op (the engine's rule), with a message. */
bool vf_check_dtype(vf_context *ctx, vf_op op, const vf_tensor *t, int index);
/* The indices half of vf_top_k alone (ops_index.c; top_k's gradient rule). */
vf_tensor *vf_top_k_indices(vf_context *ctx, vf_tensor *x, int k);
/* Normalises a possibly negative axis for rank; false (error) if out of range. */
bool vf_norm_axis(vf_context *ctx, const char *op, int axis, int rank, int *out);

/* g, the gradient of slice a of x, scattered into zeros of x's shape
   (SLICE_GRAD; ops_movement.c): exact for every size of a symbolic dim. */
vf_tensor *vf_slice_grad(vf_context *ctx, vf_tensor *g, vf_tensor *x, const vf_attrs *a);
/* Symbolic dims (bit d) of t while tracing, 0 for a concrete tensor (trace.c). */
uint32_t vf_trace_sym_dims(vf_context *ctx, vf_tensor *t, const char *op);

/* Tracing hooks (trace.c), called by the op entry points while ctx->trace
   is set: they record graph nodes instead of running the op. */
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
void vf_trace_ref(const vf_tensor *t, vf_tref *r);
/* VF_OK unless t is a symbolic tensor of a trace that has ended. */
vf_status vf_trace_check(vf_context *ctx, const vf_tensor *t, const char *op, int index);
vf_status vf_trace_read_error(const vf_tensor *t);

#endif
