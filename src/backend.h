/* The backend interface: a struct of function pointers (ggml's idea).
 *
 * The frontend validates every op, infers its shape and dtype, and then
 * hands a backend one fully described invocation (vf_exec). Backends never
 * see user errors in shapes or dtypes; what they report is resource or
 * device trouble, into the context's vf_err. The frontend never includes a
 * Vulkan header; only src/vulkan does.
 */
#ifndef VF_BACKEND_H
#define VF_BACKEND_H

#include "graph/op.h"
#include "graph/ukernel.h"
#include "util/env.h"
#include "util/err.h"
#include "util/keyset.h"

#include <stddef.h>

typedef struct vf_buffer vf_buffer;   /* backend-defined device memory range */

/* What a kernel sees of one tensor: packed row-major elements at byte
   `offset` of `buf`. numel may be 0 (then buf may be NULL). */
typedef struct vf_tref {
    vf_buffer *buf;
    size_t offset;
    vf_dtype dtype;
    int rank;
    int64_t shape[VF_MAX_RANK];
} vf_tref;

/* One op invocation. Shapes are final and valid:
   - elementwise: inputs broadcast to out.shape (inputs may have lower rank:
     align at the trailing dims); for CAST attrs.dtype == out.dtype;
   - reductions: in[0] is the input, attrs.axes_mask the reduced axes, out
     has keepdims applied as attrs.keepdims says (its numel is what matters);
     ARGMAX reduces attrs.axis;
   - SOFTMAX / LOG_SOFTMAX: along attrs.axis, out.shape == in[0].shape;
   - SPARSE_XENT: in[0] labels (I32/U32) of shape L, in[1] logits L + [C];
   - MATMUL: in[0] [..., m, k] (or [..., k, m] with trans_a), in[1]
     [..., k, n] (or [..., n, k] with trans_b), rank >= 2 both (the frontend
     reshapes vectors), batch dims broadcast to out [..., m, n];
   - TRANSPOSE: out dim i = in dim attrs.perm[i];
   - SLICE, PAD, CONCAT, SLICE_GRAD (window ops): see vf_window below;
   - FILL / RANDOM_NORMAL: no inputs.
   No tensor is empty: the frontend handles empty inputs and outputs.
   out never overlaps an input, except that an elementwise op may be given
   out == in[i] exactly (same buffer, offset and shape: in-place). */
typedef struct vf_exec {
    vf_op op;
    vf_attrs attrs;
    int n_in;
    vf_tref in[3];
    vf_tref out;
    /* VF_OP_USER_KERNEL only: the call resolved at the plan's sizes (its
       in / out pointers unused: in[] and out above are the tensors) */
    const vf_ukernel_exec *ux;
} vf_exec;

/* Window ops, as both backends run them: output element o (coordinates
   o_d) is element (t_kd / div_d) of source k (input k), where
   t_kd = o_d * mul_d + off_kd, when for every dim t_kd >= 0,
   t_kd % div_d == 0 and t_kd / div_d < size_kd. The first source that
   holds o gives its value; none: the fill value (has_fill: pad's value),
   and without a fill the last source holds every o the others do not.
   SLICE: one source, mul = the step, off = the first index, div 1;
   PAD: off = -lo; CONCAT: source 1 at -(in[0]'s size) along the axis;
   SLICE_GRAD: the slice's inverse, mul = +-1, off = -+start, div = |step|,
   fill 0 (in[1] only gives the shape). check[k] bit d: dim d needs the test for source k (a slice
   needs none: every index is in range). */
typedef struct vf_window {
    int rank, n_src;
    bool has_fill;
    int64_t out[VF_MAX_RANK], mul[VF_MAX_RANK], div[VF_MAX_RANK];
    int64_t off[2][VF_MAX_RANK], size[2][VF_MAX_RANK];
    uint32_t check[2];
} vf_window;

/* The window of a SLICE, PAD or CONCAT exec (backend_movement.c); false
   for another op or shapes that do not match its attrs. */
bool vf_window_of(const vf_exec *e, vf_window *w);

/* Plans (optional, see plan_create below): where a tensor of a planned
   exec lives. FIXED: the tref's buf/offset as given (captures, constants,
   variables); ARENA: tref.offset bytes into the plan's own arena (buf
   NULL); BIND: tref.offset bytes past per-call binding `index` (buf NULL;
   inputs and outputs, which change from call to call). */
typedef enum vf_plan_loc_kind { VF_PLAN_FIXED, VF_PLAN_ARENA, VF_PLAN_BIND } vf_plan_loc_kind;

typedef struct vf_plan_loc {
    vf_plan_loc_kind kind;
    int index;                  /* BIND: the binding */
} vf_plan_loc;

/* Fused groups: several execs run as one kernel, the values between
   them never in memory. The plan's partition (plan/partition.h) forms
   them; the backend generates their kernel (vulkan/codegen/codegen_fused.h)
   from this description alone.
   - ELEMENTWISE: elementwise ops (and FILL) of one output shape; group
     inputs broadcast to it.
   - ROWS: a row program over a row shape [..., C]: softmax / log_softmax
     along the last axis, sparse_xent, last-axis keepdims sum / mean / max /
     min (float) and elementwise ops of the row shape, of the per-row shape
     [..., 1] or (after sparse_xent) [...]; group inputs are readable as
     vf_row_input_index says. center: the first row op or reduction.
   - MATMUL: one matmul (center; both operands group inputs of rank >= 2)
     and elementwise consumers of its output shape.
   - CONV: one conv2d (center; both operands group inputs) and elementwise
     consumers of its output shape.
   In every kind a FILL member that is not a group output is a splat: a
   value (a push constant) read by the members, whatever its shape (it
   broadcasts to its reader's; graph/passes_fills.c, plan/partition.c).
   - USER: not a fusion: a user kernel's call with more than 3 inputs or
     more than one output (plan/plan.c), its members the call's parts
     (VF_OP_USER_KERNEL execs, attrs.axis the part, each holding up to 3
     inputs and one output), its tensors the call's inputs then outputs;
     the backend runs the kernel on all of them at once (never its members
     one by one). */
typedef enum vf_fused_kind {
    VF_FUSED_ELEMENTWISE, VF_FUSED_ROWS, VF_FUSED_MATMUL, VF_FUSED_CONV, VF_FUSED_USER
} vf_fused_kind;

/* A member's inputs: in[k] >= 0 is group tensor in[k] (an input: <
   n_inputs); in[k] < 0 is the value of the earlier member -1 - in[k],
   internal to the group. out: the group tensor (an output, >= n_inputs)
   its value is stored to, or -1: internal, never in memory. */
typedef struct vf_fused_member {
    int in[3];
    int out;
} vf_fused_member;

#define VF_FUSED_MEMBER(m) (-1 - (m))   /* vf_fused_member.in of member m's value */

typedef struct vf_fused_group {
    vf_fused_kind kind;
    int n_members;
    const vf_exec *execs;       /* the members in SSA order: op, attrs, the dtype and shape of every
                                   tensor (buf / offset unused: see tensors) */
    const vf_fused_member *members;
    int center;                 /* ROWS, MATMUL, CONV: a member index (above); ELEMENTWISE: -1 */
    int n_inputs, n_outputs;
    const vf_tref *tensors;     /* the group's inputs then its outputs */
} vf_fused_group;

/* Row groups: how a tensor of shape (rank, dim) relates to the row shape
   (row_rank, row_dim) [..., C]: row-wide (the row shape), per-row kept
   ([..., 1]), per-row dropped ([...], sparse_xent losses) or none of
   these. With C == 1 row-wide wins. */
typedef enum { VF_ROW_NONE, VF_ROW_WIDE, VF_ROW_SCALAR, VF_ROW_DROPPED } vf_row_class;
vf_row_class vf_row_classify(int rank, const int64_t *dim, int row_rank, const int64_t *row_dim);
/* Whether an input of shape (rank, dim), broadcast against a value of
   class `where` of a row group, can be read by the row kernel as element
   row * row_stride + col * col_stride (strides 0 where it broadcasts): its
   per-row part is either all of the rows or one, its last dim C or 1.
   False for partial broadcasts ([T, C] in [B, T, C]). */
bool vf_row_input_index(int rank, const int64_t *dim, int row_rank, const int64_t *row_dim, vf_row_class where,
                        uint32_t *row_stride, uint32_t *col_stride);

/* A fused group of a plan: execs [first_exec, first_exec + n_execs) of
   the plan are its members (group.n_members == n_execs; group.execs is
   NULL: the backend points it at them). The backend may run them as one
   kernel whose tensors are group.tensors, at loc. When it cannot, it runs
   the member execs one by one: their internal values have arena offsets
   in [arena_bytes, arena_bytes + spill_bytes). */
typedef struct vf_plan_fused {
    vf_fused_group group;
    int first_exec, n_execs;
    const vf_plan_loc *loc;     /* per tensor of the group */
} vf_plan_fused;

/* A guarded exec runs only when predicate `pred` (one bool, computed
   earlier in the plan) equals `when`: the branches of a traced vf_cond,
   decided on the device without a round trip to the host. */
typedef struct vf_plan_pred {
    vf_tref ref;
    vf_plan_loc loc;
    int node;                   /* the graph node it decides (a top-level COND), for profiles; -1: unknown */
} vf_plan_pred;

typedef struct vf_plan_guard {
    int pred;                   /* index into vf_plan_desc.preds; -1: always runs */
    bool when;
} vf_plan_guard;

typedef struct vf_plan_desc {
    const vf_exec *execs;       /* in dependency (and side-effect) order */
    const vf_plan_loc (*loc)[4];/* per exec: in[0], in[1], in[2], out */
    int n_execs;
    size_t arena_bytes;         /* offsets are multiples of 256 */
    int n_binds;
    const char *name;           /* for messages */
    const vf_plan_fused *fused; /* optional, by first_exec ascending */
    int n_fused;
    size_t spill_bytes;         /* see vf_plan_fused */
    const vf_plan_guard *guards;/* per exec; NULL: none is guarded. The execs of a fused
                                   group share one guard, which covers its every dispatch */
    const vf_plan_pred *preds;
    int n_preds;
    const int *exec_node;       /* per exec: the graph node it runs (a COND's for its branches),
                                   -1 or NULL: unknown. For profiles: execs are not in node order */
    const char *glsl_dir;       /* set (VKFUSE_CHECK): each kernel's GLSL is written to
                                   <glsl_dir>/exec<first exec>.glsl (steps one after another) */
} vf_plan_desc;

/* Per-call binding: a tensor's storage (buf + offset). */
typedef struct vf_plan_bind {
    vf_buffer *buf;
    size_t offset;
    size_t bytes;               /* what the plan may touch from offset */
} vf_plan_bind;

typedef struct vf_plan vf_plan;

typedef struct vf_plan_info {
    int kernels;                /* kernels (a fused group is one) */
    int dispatches;             /* per run */
    int barriers;               /* recorded per run */
} vf_plan_info;

/* Profile of a plan's last run (plan_profile), when the backend was made
   with profiling on: per kernel (a fused group is one; a plan-internal
   kernel such as a vf_cond guard has first_exec -1) its dispatches, the
   bytes its bindings read and write, barriers recorded before its
   dispatches and, with timestamps, its GPU time. */
typedef struct vf_plan_kernel_prof {
    char name[64];              /* its first dispatch's kernel name */
    int first_exec, n_execs;    /* the execs of vf_plan_desc it runs */
    vf_op op;                   /* of its first exec (first_exec >= 0) */
    const int *nodes;           /* fused: the group's graph node ids; else NULL */
    int n_nodes;
    int pred;                   /* guarded (a vf_cond's branch, or its guard): the predicate
                                   index (vf_plan_desc.preds); else -1 */
    int dispatches, barriers;
    int64_t bytes_read, bytes_written;
    uint64_t gpu_ns;            /* sum over its dispatches */
    uint64_t start_ns;          /* its first dispatch's start after the plan's first */
} vf_plan_kernel_prof;

typedef struct vf_plan_prof {
    bool timed;                 /* GPU times are valid (timestamps supported and on) */
    uint64_t t0_ns;             /* timed: the run's first dispatch start on the device's clock,
                                   to place the runs of several plans on one time line */
    int n_kernels;
    const vf_plan_kernel_prof *kernels; /* owned by the plan: valid until its next run */
    int dispatches, barriers;   /* barriers: all of the run, also the first and last */
    uint64_t gpu_ns;
} vf_plan_prof;

typedef struct vf_backend_iface {
    const char *name;  /* "vulkan" or "cpu" */
    /* bytes > 0. Fails with VF_ERROR_OUT_OF_MEMORY (or VF_ERROR_UNSUPPORTED
       when bytes exceeds what one binding can address) and a message. */
    vf_status (*alloc)(void *self, size_t bytes, vf_buffer **out);
    /* May be called while queued work still uses buf: the backend defers
       the reuse of the memory until that work has finished. */
    void (*free)(void *self, vf_buffer *buf);
    /* Copy host data in. Ordered after every op queued before it. */
    vf_status (*upload)(void *self, vf_buffer *buf, size_t offset, const void *src, size_t bytes);
    /* Copy data out; waits for every queued op first. */
    vf_status (*download)(void *self, vf_buffer *buf, size_t offset, void *dst, size_t bytes);
    /* Run (or queue) one op. */
    vf_status (*exec)(void *self, const vf_exec *e);
    /* Submit everything queued and wait for it. */
    vf_status (*sync)(void *self);
    void (*destroy)(void *self);
    /* Counters for vf_context_stats (may be NULL). */
    void (*stats)(void *self, vf_context_stats *out);
    /* Gives cached device memory back (vf_context_trim), after waiting for
       queued work so that memory it still used goes too. NULL: the backend
       caches nothing. */
    vf_status (*trim)(void *self);
    /* Whether the device was lost (a call returned VK_ERROR_DEVICE_LOST, or
       a wait timed out): every later call fails at once. NULL: never. */
    bool (*lost)(void *self);
    /* Plans (may be NULL: the frontend then runs graphs exec by exec).
       plan_create generates and compiles every kernel once, allocates the
       arena and records what it can; plan_run runs the whole plan with
       these bindings as one submission, ordered after every op queued
       before it (results are read with download, as after exec);
       plan_destroy may be called while a run is in flight. */
    vf_status (*plan_create)(void *self, const vf_plan_desc *d, vf_plan **out);
    vf_status (*plan_run)(void *self, vf_plan *p, const vf_plan_bind *binds, int n_binds);
    void (*plan_destroy)(void *self, vf_plan *p);
    void (*plan_info)(void *self, const vf_plan *p, vf_plan_info *out);
    /* The profile of p's last run (waits for that run; may be NULL).
       n_kernels 0: p has not run. */
    vf_status (*plan_profile)(void *self, vf_plan *p, vf_plan_prof *out);
    /* Kernel binaries (SPIR-V words), for saved functions (docs/FORMAT.md);
       NULL on a backend without them (the CPU backend).
       kernels_track: until the next call, the content key of every kernel
       the backend gets (compiled, or found in a cache) is added to set
       (NULL: none); returns the set tracked before.
       kernel_binary: the words stored under key in the backend's memory
       cache (owned by it, valid until it is destroyed); false: none.
       kernel_insert: stores a copy of words under key in that cache, so a
       kernel with this key needs no compile; a key already there keeps its
       entry. A module that fails validation is VF_ERROR_FORMAT with the
       validator's message. */
    vf_keyset *(*kernels_track)(void *self, vf_keyset *set);
    bool (*kernel_binary)(void *self, uint64_t key, const uint32_t **words, size_t *n_words);
    vf_status (*kernel_insert)(void *self, uint64_t key, const uint32_t *words, size_t n_words);
    /* One call of a user kernel (graph/ukernel.h): outputs zeroed first
       unless e->k->uninit, then the SPIR-V (Vulkan) or the C
       implementation (CPU; none: VF_ERROR_UNSUPPORTED). Queued like exec. */
    vf_status (*ukernel)(void *self, const vf_ukernel_exec *e);
    /* Host access in place (a host step of a split plan, plan/segment.h):
       map waits for the work queued that uses buf (only that), then gives
       a host pointer to bytes at offset that sees the device's writes;
       *out NULL: buf is not host-visible (use download / upload). unmap
       makes the host's writes there visible to work queued after it. May
       be NULL. */
    vf_status (*map)(void *self, vf_buffer *buf, size_t offset, size_t bytes, void **out);
    vf_status (*unmap)(void *self, vf_buffer *buf, size_t offset, size_t bytes);
    /* The gradient of a row op in one kernel, for the eager gradient rules
       (may be NULL: the rule's ops run instead). e->op is VF_OP_SOFTMAX or
       VF_OP_LOG_SOFTMAX along e->attrs.axis, in[0] the output's gradient
       g, in[1] the op's output y, out the input's gradient; or
       VF_OP_SPARSE_XENT, in[0] g (the losses' shape), in[1] the logits,
       in[2] the labels, out the logits' gradient. The same values, to the
       bit, as the rule's ops (docs/GRADIENTS.md).
       VF_ERROR_UNSUPPORTED (nothing written): a case it does not take;
       queued like exec. */
    vf_status (*row_grad)(void *self, const vf_exec *e);
    /* The most members a plan's fused group may have on this backend (the
       partition's max_nodes); 0: the partition's default, 64, which the
       Vulkan code generator's member tables hold. */
    int fused_max_nodes;
} vf_backend_iface;

typedef struct vf_backend {
    const vf_backend_iface *iface;
    void *self;
} vf_backend_t;

/* User kernels' shaders, without a device (vulkan/user_kernel.c), so that
   every backend reports the same compile errors and saves the same
   SPIR-V. vf_glsl_compile: GLSL compute source (given `#version 450` and
   `#line 1` when it has no #version line) to SPIR-V for Vulkan 1.2;
   *words malloc'd; VF_ERROR_COMPILE with shaderc's message in msg.
   vf_spirv_inspect: validates a module (VF_ERROR_FORMAT with the
   validator's message) and says what it declares. */
#define VF_SPIRV_PUSH_MEMBERS 48
typedef struct vf_spirv_info {
    int max_binding;          /* the highest binding decorated; -1: none */
    int bad_set;              /* a descriptor set other than 0 (0: none) */
    int bad_set_binding;      /* ... and its binding */
    uint32_t local_size_x;    /* LocalSize x, 0: not declared */
    bool spec0;               /* a specialisation constant has id 0 (local_size_x_id = 0) */
    /* The push-constant block (the first one; a shader has at most one):
       its size (the end of its last member) and its first
       VF_SPIRV_PUSH_MEMBERS members, each's byte offset, size and whether
       it holds 32-bit integers (a scalar, or an array or vector of them).
       push_members 0: no block. */
    uint32_t push_size;
    int push_members;
    struct { uint32_t offset, size; bool u32; } push_member[VF_SPIRV_PUSH_MEMBERS];
} vf_spirv_info;
vf_status vf_glsl_compile(const char *glsl, const char *name, uint32_t **words, size_t *n_words, char *msg,
                          size_t msglen);
vf_status vf_spirv_inspect(const uint32_t *words, size_t n_words, vf_spirv_info *info, char *msg, size_t msglen);
/* A user elementwise op's GLSL compiled on its own (vulkan/uelem_check.c):
   the helpers, then `float f(float x0, ..) { return float(expr); }` and per
   gradient expression the same with a last parameter y, in a shader of no
   bindings and no prelude, so that a name of the generated kernels (a
   buffer, a push constant, a prelude helper) fails too. expr or grads[i]
   may be NULL. VF_ERROR_COMPILE with shaderc's message in msg (line
   numbers count from the failing text's first line) and the failing part
   ("desc.expr", "desc.grad_expr[1]", "desc.helpers") in what. */
vf_status vf_uelem_compile_check(const char *helpers, int n_x, const char *expr, const char *const *grads,
                                 char *what, size_t what_len, char *msg, size_t msglen);

/* Backend constructors. err receives the reason on failure. */
vf_status vf_cpu_backend_create(vf_err *err, vf_backend_t *out); /* threads: the online CPUs */
/* threads: the CPU backend's kernel threads (cpu/cpu_threads.h) and
   OpenBLAS's; 0: the online CPUs, and OpenBLAS keeps its own setting. */
vf_status vf_cpu_backend_create_threads(vf_err *err, int threads, vf_backend_t *out);
/* The CPU backend's settings, read by the frontend: threads as above;
   dnnl_off (VKFUSE_CPU_DNNL=0): convolutions and pools without oneDNN. */
typedef struct vf_cpu_options {
    int threads;
    bool dnnl_off;
} vf_cpu_options;
vf_status vf_cpu_backend_create_opts(vf_err *err, const vf_cpu_options *o, vf_backend_t *out);
/* The OpenBLAS the CPU backend runs, for the device name: its kernel set
   and which copy ("SkylakeX kernels, private copy: the process's own runs
   Prescott"; cpu/blas.h), or why none was loaded. */
void vf_cpu_blas_describe(char *out, size_t len);
/* VKFUSE_THREADS: a whole number from 1 to VF_CPU_MAX_THREADS; NULL or "":
   0 (the default). Anything else: VF_ERROR_INVALID_ARGUMENT with a message. */
#define VF_CPU_MAX_THREADS 256
vf_status vf_cpu_threads_parse(const char *v, int *out, vf_err *err);

/* What the Vulkan backend takes from its creator. The library reads the
   environment only when a context is created (api/context.c), and
   hands the backend its part here; vf_vk_options_read fills the runtime's
   environment knobs for other creators (tests, tools). Strings are read
   while the backend is created; it copies what it keeps. */
typedef struct vf_vk_options {
    int device_index;        /* -1: best, or VKFUSE_DEVICE */
    const char *device_env;  /* VKFUSE_DEVICE value or NULL */
    bool gpu_only;           /* VF_BACKEND_AUTO with no device named: a GPU or nothing; only
                                drivers on the CPU (lavapipe) fail with VF_ERROR_UNSUPPORTED */
    bool validation;
    bool profile;
    const char *cache_dir;   /* resolved directory; NULL or "": no disk cache */
    const char *loader;      /* VKFUSE_VULKAN_LOADER: this Vulkan loader; NULL or "": libvulkan.so.1 */
    const char *test_caps;   /* VKFUSE_TEST_CAPS: the codegen profile (device.c); NULL: the device's */
    const char *test_limits; /* VKFUSE_TEST_LIMITS: smaller device limits (device.h); NULL: none */
    bool no_robust;          /* VKFUSE_ROBUST=0: no robustBufferAccess (device.c) */
    bool test_staging;       /* VKFUSE_TEST_STAGING=1 (testing): device memory treated as not
                                host-visible, as a discrete GPU's device-local memory: every copy
                                through staging buffers, the backend's map gives NULL (memory.h) */
    const char *dump_dir;    /* VKFUSE_DUMP: each compiled kernel's GLSL under <dir>/kernels; NULL: none */
    bool log_info;           /* VKFUSE_LOG=info|debug: every shader compile and its time on stderr */
    const char *timeout_ms;  /* VKFUSE_TIMEOUT_MS: a wait for the device longer than this many
                                milliseconds fails with VF_ERROR_DEVICE and the device is then
                                treated as lost; NULL or "": VF_VK_DEFAULT_TIMEOUT_MS. Not a
                                positive number: VF_ERROR_INVALID_ARGUMENT */
    const char *memory_limit;/* VKFUSE_DEVICE_MEMORY_LIMIT: behave as if the device had this much
                                memory (a size as memory_cache); NULL or "": the device's own */
    int64_t memory_limit_bytes; /* vf_context_desc.device_memory_limit: the same, over the env (> 0) */
    int compile_threads;     /* VKFUSE_COMPILE_THREADS: threads compiling a plan's shaders; 0: the
                                online CPUs (at most 16), 1: none */
    bool eager_fuse;         /* queued eager elementwise ops fused once their pattern repeats
                                (vulkan/eager_fuse.h); the context sets it unless VKFUSE_EAGER_FUSE=0
                                or vf_context_desc.eager_fuse_off; false here: one kernel per op */
    bool tiered_off;         /* VKFUSE_TIERED=0: plans built with their tuned matmul kernels at
                                once, no quick tier (vulkan/plan_tier.c) */
    bool driver_cache_off;   /* MESA_SHADER_CACHE_DISABLE (or MESA_GLSL_CACHE_DISABLE) true: Mesa's
                                disk cache is off, so a plan's tier thread makes no warm-up
                                dispatch on its second device (vulkan/tier_warm.h) */
    const char *memory_cache;/* VKFUSE_MEMORY_CACHE: most bytes of freed device memory kept for
                                reuse ("512M", "2G", "0": none); NULL or "": the device heap's size.
                                Not a size: VF_ERROR_INVALID_ARGUMENT (memory.h) */
} vf_vk_options;

/* Sets o's loader, test_caps, test_limits, test_staging, dump_dir, log_info,
   timeout_ms, compile_threads, tiered_off, driver_cache_off, memory_cache and memory_limit from
   the environment as get looks it up (getenv; the pointers are get's),
   src/backend_vk_options.c. */
void vf_vk_options_read(vf_vk_options *o, vf_env_get get);

/* Fails with VF_ERROR_DEVICE (no loader, no device, device lost, ...) and a
   message; device_name receives the chosen device's name. */
vf_status vf_vulkan_backend_create(vf_err *err, const vf_vk_options *opt, vf_backend_t *out,
                                   char *device_name, size_t device_name_len);
/* vf_devices (vkfuse.h) with the device choice and loader of opt (its
   device_index, device_env, gpu_only and loader); errbuf receives why
   none is chosen. */
int vf_vulkan_devices(const vf_vk_options *opt, vf_device_info *out, int max, char *errbuf, size_t errlen);

#endif
