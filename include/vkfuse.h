/*
 * vkfuse — tensor programs on any Vulkan GPU, eager or traced.
 *
 * This is the whole public API. Conventions:
 *
 *  - Every call that can fail records the first error in its context (a
 *    sticky status, as cairo does). Ops that fail return NULL; an op given a
 *    NULL input returns NULL without recording a new error, so a chained
 *    expression needs one check at the end:
 *
 *        vf_tensor *y = vf_softmax(ctx, vf_add(ctx, vf_matmul(ctx, x, w), b), -1);
 *        if (!y) fprintf(stderr, "%s\n", vf_error_message(ctx));
 *
 *  - Ops return a new tensor owned by the innermost open scope
 *    (vf_scope_begin / vf_scope_end). A context always has a root scope,
 *    released by vf_context_destroy. vf_keep moves a tensor to the enclosing
 *    scope; vf_tensor_retain gives the caller a reference of its own.
 *
 *  - Shapes follow NumPy: row-major, broadcasting aligned at the trailing
 *    dims, negative axes count from the end. Rank is at most VF_MAX_RANK.
 *
 *  - Desc structs are zero-initialised to get the defaults.
 *
 *  - Failed creates, one convention for all (vf_context_create,
 *    vf_function_create, vf_function_load, vf_generator_create,
 *    vf_tape_begin, vf_kernel_create, vf_elementwise_create,
 *    vf_trace_file_create): a create that fails returns NULL, or its status
 *    with *out set to NULL, and frees everything it made. Why it failed is
 *    the calling thread's vf_last_status() and vf_last_error(), readable
 *    even when no context exists (also recorded in the context, when there
 *    is one). vkfuse_dist's vf_dist_create and vf_dist_local_create do
 *    the same, their message in vf_dist_create_error().
 *
 *  - Memory the library returns to the caller (vf_function_graph_text,
 *    vf_trace_file_json) is given back with vf_free (free underneath, so
 *    older code that calls free keeps working). Arrays are passed and
 *    returned with their lengths (vf_tensor_shape, vf_function_io_count).
 */
#ifndef VKFUSE_H
#define VKFUSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32) && defined(VKFUSE_SHARED_BUILD)
#define VF_API __declspec(dllexport)
#elif defined(__GNUC__)
#define VF_API __attribute__((visibility("default")))
#else
#define VF_API
#endif

/* The version of these headers; vf_version() gives the library's. */
#define VF_VERSION_MAJOR 0
#define VF_VERSION_MINOR 2
#define VF_VERSION_PATCH 0
#define VF_VERSION_STRING "0.2.0"
#define VKFUSE_VERSION_MAJOR VF_VERSION_MAJOR /* the older names */
#define VKFUSE_VERSION_MINOR VF_VERSION_MINOR
#define VKFUSE_VERSION_PATCH VF_VERSION_PATCH

#define VF_MAX_RANK 8

typedef struct vf_context vf_context;   /* one device, its caches, its errors */
typedef struct vf_tensor vf_tensor;     /* ref-counted, opaque */

typedef enum {
    VF_OK = 0,
    VF_ERROR_INVALID_ARGUMENT,
    VF_ERROR_SHAPE,
    VF_ERROR_DTYPE,
    VF_ERROR_OUT_OF_MEMORY,
    VF_ERROR_DEVICE,
    VF_ERROR_UNSUPPORTED,
    VF_ERROR_COMPILE,
    VF_ERROR_TRACE,
    VF_ERROR_IO,
    VF_ERROR_FORMAT
} vf_status;

/* Element types. Packed sizes: f32/i32/u32 4 bytes, f16 2, bool 1 (0 or 1).
   f16 is a storage type: arithmetic on it is done in f32 and rounded back
   (round-to-nearest-even) on store. */
typedef enum { VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL } vf_dtype;

typedef enum { VF_BACKEND_AUTO, VF_BACKEND_VULKAN, VF_BACKEND_CPU } vf_backend;

/* All-zero is the default: the AUTO backend (the fastest device: see
   vf_auto_backend), no validation, no profiling, the default cache. */
typedef struct {
    vf_backend backend;     /* AUTO: the best GPU (discrete > integrated > virtual), else the CPU
                               backend; a Vulkan driver that runs on the CPU (lavapipe,
                               SwiftShader) only when asked for: VULKAN, VKFUSE_BACKEND=vulkan,
                               or a device named (VKFUSE_DEVICE, pick_device). VKFUSE_BACKEND
                               overrides AUTO */
    int device_index;       /* -1: best. Read only when pick_device is true, so
                               that the all-zero desc means "best", not "device 0" */
    bool validation;        /* enable VK_LAYER_KHRONOS_validation (also VKFUSE_VALIDATION=1);
                               any message it prints is recorded as VF_ERROR_DEVICE */
    bool profile;           /* timestamp queries around dispatches (also VKFUSE_PROFILE=1; see Profiling) */
    const char *cache_dir;  /* NULL: VKFUSE_CACHE_DIR, else $XDG_CACHE_HOME/vkfuse,
                               else ~/.cache/vkfuse; "" disables the disk cache */
    bool pick_device;       /* true: use device_index as given */
    int64_t device_memory_limit; /* > 0: behave as if the device had this many bytes of memory (a
                               small GPU): past it, after cached memory is given back, an op fails
                               with VF_ERROR_OUT_OF_MEMORY; over VKFUSE_DEVICE_MEMORY_LIMIT */
    bool eager_fuse_off;    /* true: every eager op is its own kernel, as VKFUSE_EAGER_FUSE=0 (default:
                               repeated chains of queued eager elementwise ops run fused; see
                               vf_context_stats.eager_fuse_swaps) */
} vf_context_desc;

/* Threads: a context may be shared by threads; each call holds the
   context's lock. A scope or tape is its opening thread's: until it ends,
   other threads' calls on the context wait (never wait for such a thread
   while holding one open), but vf_tensor_release, which never waits
   (queued for the holder); ending it on another thread is
   VF_ERROR_INVALID_ARGUMENT, at once. The sticky error is the context's, seen by
   every thread. Destroy a context when no other thread uses it. See the
   README, "Rules of the API". */
/* On failure *out is NULL, nothing is kept, and vf_last_error() says why
   (a bad desc or environment variable, no such device, ...). */
VF_API vf_status vf_context_create(const vf_context_desc *desc, vf_context **out);
VF_API void vf_context_destroy(vf_context *ctx);
VF_API vf_status vf_status_get(vf_context *ctx);        /* first error since last clear */
/* Whether ctx's device was lost: a Vulkan call returned VK_ERROR_DEVICE_LOST
   or a wait for the device passed VKFUSE_TIMEOUT_MS. Every later call that
   needs the device fails at once with VF_ERROR_DEVICE ("the device was lost
   during ...; create a new context"); vf_context_destroy still frees
   everything, and a new context works. false on the CPU backend. */
VF_API bool vf_context_lost(vf_context *ctx);
/* Says what, where, with shapes; "" if none. A copy private to the calling
   thread, valid until its fourth next vf_error_message call. ctx NULL:
   vf_last_error() (so that code printing vf_error_message(ctx) after a
   failed vf_context_create prints why). */
VF_API const char *vf_error_message(vf_context *ctx);
/* The calling thread's last failed create (see the conventions above):
   its status (VF_OK if none failed yet) and its message ("" if none). A
   create that succeeds leaves both as they were, as errno; the message is
   the thread's own, valid until its next failed create. */
VF_API vf_status vf_last_status(void);
VF_API const char *vf_last_error(void);
/* Gives back memory the library returned (see the conventions above). NULL
   is a no-op. */
VF_API void vf_free(void *p);
/* The library's version, "0.2.0": compare with VF_VERSION_STRING to catch a
   header and library that do not match. */
VF_API const char *vf_version(void);
VF_API void vf_error_clear(vf_context *ctx);
VF_API const char *vf_device_name(vf_context *ctx);     /* on CPU fallback it says why */
VF_API vf_backend vf_backend_get(vf_context *ctx);
VF_API const char *vf_status_name(vf_status s);         /* "VF_ERROR_SHAPE", ... */
VF_API const char *vf_dtype_name(vf_dtype t);           /* "f32", ... */
VF_API size_t vf_dtype_size(vf_dtype t);                /* bytes per element */
/* Waits until every queued op of ctx has finished; returns the context's status. */
VF_API vf_status vf_context_sync(vf_context *ctx);

/* Counters for tests and tools: shader compiles done in this context (cache
   misses of both the memory and the disk cache), cache hits, submits. */
typedef struct {
    int64_t shader_compiles;
    int64_t shader_memory_hits;
    int64_t shader_disk_hits;
    int64_t submits;
    int64_t dispatches;
    int64_t barriers;           /* pipeline barriers recorded (eager batches and plan runs) */
    int64_t device_bytes_in_use;
    double shader_compile_ms;   /* wall time spent compiling GLSL (VKFUSE_LOG=info logs each) */
    int64_t pipelines_created;  /* Vulkan compute pipelines created (0 on the CPU backend) */
    /* wall time in vkCreateComputePipelines (VKFUSE_LOG=info logs each). Drivers
       that compile lazily (lavapipe: at a kernel's first dispatch) spend
       their compile time in the first run instead. */
    double pipeline_create_ms;
    /* Device memory (docs/RUNTIME.md, "Memory"). Memory a freed tensor
       used is cached: kept for the next tensor of its size class, since a
       fresh allocation costs the driver's work and a page fault at every
       first touch. The cache is sized by VKFUSE_MEMORY_CACHE (default: the
       device heap's size); all of it goes back to the driver when an
       allocation fails for want of memory (then retried) and on
       vf_context_trim. The CPU backend caches freed host buffers the same
       way (docs/RUNTIME.md, "The CPU backend"): at most an eighth of the
       machine's memory, given back as above and when the context is
       destroyed. */
    int64_t device_bytes_cached;   /* freed memory kept for reuse */
    int64_t device_bytes_reserved; /* all device memory vkfuse holds: in use, cached, freed but still
                                      used by queued work, and the free space of shared blocks */
    int64_t device_bytes_peak;     /* the highest device_bytes_in_use so far */
    int64_t device_allocations;    /* memory blocks allocated from the driver (vkAllocateMemory; on
                                      the CPU backend host buffers not served by its cache): in a
                                      steady loop it stops growing when the cache serves every tensor */
    int64_t device_alloc_retries;  /* allocations the driver refused for want of memory and that
                                      were tried again after the cache was given back */
    /* Eager fusion (Vulkan; docs/RUNTIME.md, "Eager fusion"): queued eager
       elementwise ops of one shape wait in a window, and a window whose
       pattern (ops, dtypes, shapes, wiring, results still held; never data)
       repeats gets one fused kernel, compiled in the background; from then
       on that pattern is one dispatch instead of one per op. 0 on the CPU
       backend and with VKFUSE_EAGER_FUSE=0 / eager_fuse_off. */
    int64_t eager_fuse_swaps;      /* patterns whose fused kernel replaced their one-kernel-per-op run */
    int64_t eager_fused_windows;   /* windows run as one fused dispatch */
    int64_t eager_fused_ops;       /* eager ops those windows ran */
    /* Where the device has VK_EXT_memory_budget: the budget of the memory
       heap tensors live in, read when the stats are (what this process may
       use of it, other programs' use taken off), and this process's usage
       of it. An allocation that would pass the budget fails as one past
       VKFUSE_DEVICE_MEMORY_LIMIT does. 0 where unknown (no extension, the
       CPU backend). */
    int64_t device_memory_budget;
    int64_t device_memory_budget_usage;
    /* Tiered matmul kernels (Vulkan, CPU devices such as lavapipe;
       docs/RUNTIME.md, "Tiered kernels"): a plan's matmul kernels start
       with a small register block that the driver compiles quickly, while
       the tuned kernel is compiled on a thread (the driver's compile too,
       on a second device); at a later call that finds it ready it is
       swapped in (one per call), no call waiting for it. 0 on GPUs, on
       the CPU backend, with VKFUSE_TIERED=0 and with
       VKFUSE_COMPILE_THREADS=1. */
    int64_t tier_quick_kernels;    /* kernels plans were built with in the quick tier */
    int64_t tier_swaps;            /* of those, the ones whose tuned kernel replaced them */
} vf_context_stats;
VF_API vf_status vf_context_stats_get(vf_context *ctx, vf_context_stats *out);
/* Gives the context's cached device memory back to the driver (see
   vf_context_stats.device_bytes_cached), after waiting for queued work so
   that memory freed while that work still used it goes too; tensors keep
   theirs. Call it before handing the device to someone else, or after a
   phase that used much more memory than what follows. The cached host
   buffers of the CPU backend (and of the host backend of constant folding
   and VKFUSE_CHECK) go back to the C library. Returns the context's
   status, as vf_context_sync. */
VF_API vf_status vf_context_trim(vf_context *ctx);

/* Devices, for tools: fills up to max entries and returns how many Vulkan
   devices there are (0 if no loader). `chosen` marks the one a Vulkan
   context uses (VF_BACKEND_VULKAN, VKFUSE_DEVICE; AUTO too when it picks
   Vulkan: vf_auto_backend says whether it does). */
typedef struct {
    char name[256];
    uint32_t vendor_id, device_id, driver_version, api_version;
    char vendor[32];        /* "AMD", "NVIDIA", "Intel", "Mesa", ... */
    char type[16];          /* "discrete", "integrated", "virtual", "cpu", "other" */
    char driver[256];       /* driver name and info */
    uint32_t subgroup_size;
    bool subgroup_arithmetic; /* compute shaders may use GL_KHR_shader_subgroup_arithmetic
                                 (user kernels choose their shader by it) */
    uint32_t shared_memory_bytes;
    uint64_t max_storage_buffer_range;
    bool fp16;              /* shaderFloat16 */
    bool storage16;         /* storageBuffer16BitAccess */
    bool chosen;
    uint64_t memory_heap_bytes;   /* the largest device-local memory heap */
    uint64_t memory_budget_bytes; /* its budget now (VK_EXT_memory_budget); 0: not reported */
} vf_device_info;
VF_API int vf_devices(vf_device_info *out, int max, char *err, size_t errlen);
/* What VF_BACKEND_AUTO (vf_context_create(NULL, ...)) picks here now, with
   VKFUSE_BACKEND and VKFUSE_DEVICE as a context reads them:
   VF_BACKEND_VULKAN (*device, if not NULL, receives its vf_devices index),
   VF_BACKEND_CPU (*device = -1), or VF_BACKEND_AUTO when vf_context_create
   would fail (a bad VKFUSE_BACKEND, a named device that is not there). why
   (optional) receives one line saying why, e.g. "no GPU, only Vulkan
   devices that run on the CPU ([0] llvmpipe (cpu)), slower than the CPU
   backend; ...". */
VF_API vf_backend vf_auto_backend(int *device, char *why, size_t whylen);

/* ---- Tensors ----------------------------------------------------------- */

VF_API void vf_scope_begin(vf_context *ctx);
VF_API void vf_scope_end(vf_context *ctx);             /* releases what the scope owns */
VF_API vf_tensor *vf_keep(vf_tensor *t);               /* move to the enclosing scope */
VF_API vf_tensor *vf_tensor_retain(vf_tensor *t);      /* caller owns one reference */
/* Drops one reference the caller owns; on a tensor the caller never
   retained (or whose retains were all released) it ends the scope's
   ownership early. A tensor has three kinds of owners: its scope (until
   the scope ends, vf_keep moves it, or this early release), the caller
   (one reference per vf_tensor_retain) and the library (a tape that
   recorded it holds it until vf_tape_end, a function holds the variables
   and tensors it captured until vf_function_destroy); it is freed when
   the last one lets go, in any order. A release never takes the
   library's reference: with neither a retain nor the scope's ownership
   left, it is VF_ERROR_INVALID_ARGUMENT ("released once too often") and
   changes nothing.
   Handles are never reused within a context: a tensor used after it was
   released (or after its scope ended), or released once too often, is
   VF_ERROR_INVALID_ARGUMENT naming it ("tensor #12 was released by
   vf_scope_end"), never a crash; after vf_context_destroy its tensors must
   not be used at all.
   It never waits for the context's lock: while another thread holds it
   (inside a call, a scope or a tape) the release is queued and done by
   that thread as it lets go (docs/RUNTIME.md, "Threads"). */
VF_API void vf_tensor_release(vf_tensor *t);

/* rank 0 is a scalar (shape may be NULL). data is packed row-major.
   Inside a traced vf_function body the data is copied when the body is
   traced and becomes a constant of the graph (uploaded once, kept by the
   concrete function, saved with it): later calls use those values, not
   what the host buffer holds then (pass values that change as inputs).
   The tensor has static dims and no gradient (a tape sees a constant). */
VF_API vf_tensor *vf_tensor_from_host(vf_context *ctx, vf_dtype dtype, int rank,
                                      const int64_t *shape, const void *data);
VF_API vf_tensor *vf_fill(vf_context *ctx, vf_dtype dtype, int rank, const int64_t *shape,
                          double value);
/* Standard normal samples from a Philox-4x32-10 counter-based generator
   with Box-Muller: the same seed gives the same numbers on every backend
   (to within a few ulps of libm's log/cos/sin). The seed is a host value:
   a traced function draws the same numbers at every call; for numbers
   that change at every call (dropout in a traced train step) use a
   vf_generator. */
VF_API vf_tensor *vf_random_normal(vf_context *ctx, vf_dtype dtype, int rank,
                                   const int64_t *shape, uint64_t seed);

/* Generators (tf.random.Generator): a random stream whose state lives on
   the device, like a variable, and advances by one at every draw, eager or
   traced. A vf_function that draws from a generator captures its state by
   reference, so each call draws new numbers and the state moves on for
   eager draws after it; eager and traced draws continue one sequence.
   A seed and a sequence of draws give the same numbers on every backend:
   uniforms bit for bit, normals to within a few ulps (libm's vs the
   GPU's log/cos/sin). The state is saved with a function that draws
   from it (vf_function_save), and a loaded function continues from there
   (with its own copy: it no longer moves the generator it was traced
   with). Draw d of seed s is counter-based Philox-4x32-10 with key s and
   the draw number in the upper counter words, so draws never overlap.
   Create a generator outside function bodies (as a variable); it belongs
   to its context. Draws are f32 or f16: uniforms in [0, 1) with 24 bits
   (f32) or 11 bits (f16), normals by Box-Muller (draw 0 of a fresh
   generator's normals equals vf_random_normal with the same seed).
   Empty shapes give empty tensors and still advance the state. */
typedef struct vf_generator vf_generator;
VF_API vf_generator *vf_generator_create(vf_context *ctx, uint64_t seed);
/* Frees the generator; a function that captured its state keeps its own
   reference. Using a destroyed generator is an error, never a crash. NULL
   is a no-op. */
VF_API void vf_generator_destroy(vf_generator *gen);
/* A new tensor of uniform [0, 1) or standard normal numbers. */
VF_API vf_tensor *vf_generator_uniform(vf_context *ctx, vf_generator *gen, vf_dtype dtype, int rank,
                                       const int64_t *shape);
VF_API vf_tensor *vf_generator_normal(vf_context *ctx, vf_generator *gen, vf_dtype dtype, int rank,
                                      const int64_t *shape);
/* Inverted dropout (tf.nn.dropout): each element of x (f32 or f16) is
   kept with probability 1 - rate and scaled by 1 / (1 - rate), else 0,
   so the expectation is x. The mask is an f32 uniform draw of x's shape
   (u >= rate keeps), so it follows x's symbolic dims in a trace. The
   gradient flows through the mask: dx = mask * dy / (1 - rate). rate 0
   returns x unchanged (a view) and does not draw; rate must be in [0, 1)
   (1, above, negative or NaN: VF_ERROR_INVALID_ARGUMENT). In f16 the
   scale 1 / (1 - rate) is rounded to f16, and a rate whose scale passes
   f16's largest value (65504) is VF_ERROR_INVALID_ARGUMENT. Pass rate 0
   at inference. */
VF_API vf_tensor *vf_dropout(vf_context *ctx, vf_generator *gen, vf_tensor *x, double rate);
/* Waits for the value. bytes smaller than the tensor: VF_ERROR_INVALID_ARGUMENT. */
VF_API vf_status vf_tensor_read(vf_tensor *t, void *dst, size_t bytes);
VF_API vf_dtype vf_tensor_dtype(const vf_tensor *t);
VF_API int vf_tensor_rank(const vf_tensor *t);
VF_API int64_t vf_tensor_dim(const vf_tensor *t, int axis);   /* negative axes allowed; -1 on error */
/* Copies t's dims into shape[0 .. min(rank, max) - 1] and returns the rank
   (-1 for a NULL or released tensor, shape untouched): a binding sizes its
   array with max = VF_MAX_RANK, or asks with max 0 first. */
VF_API int vf_tensor_shape(const vf_tensor *t, int64_t *shape, int max);
VF_API int64_t vf_tensor_numel(const vf_tensor *t);
VF_API size_t vf_tensor_bytes(const vf_tensor *t);
VF_API vf_context *vf_tensor_context(const vf_tensor *t);
/* A new tensor of dst holding t's value (t of any context: another device,
   or another context on the same one), owned by dst's innermost scope;
   through the host (t's value is waited for). NULL on error, recorded in
   dst (a failed read also in t's context). Not while dst traces a body. */
VF_API vf_tensor *vf_tensor_copy_to(vf_context *dst, vf_tensor *t);

/* ---- Ops ----------------------------------------------------------------
   Binary ops broadcast (NumPy rules) and need both inputs of one dtype
   (cast first with vf_cast). Integer division truncates toward zero and
   x / 0 is 0 for integers; pow on integers is not supported. */
VF_API vf_tensor *vf_add(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_sub(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_mul(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_div(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_pow(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_maximum(vf_context *ctx, vf_tensor *a, vf_tensor *b);  /* NaN if either is NaN */
VF_API vf_tensor *vf_minimum(vf_context *ctx, vf_tensor *a, vf_tensor *b);
/* Comparisons give VF_BOOL; any comparison with NaN is false but not_equal. */
VF_API vf_tensor *vf_greater(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_greater_equal(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_less(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_less_equal(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_equal(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_not_equal(vf_context *ctx, vf_tensor *a, vf_tensor *b);
/* cond must be VF_BOOL; a and b one dtype; all three broadcast. */
VF_API vf_tensor *vf_where(vf_context *ctx, vf_tensor *cond, vf_tensor *a, vf_tensor *b);

/* Unary ops. exp log sqrt rsqrt tanh sigmoid gelu sin cos need a float
   dtype; neg abs relu also take i32 (abs/relu also u32), square i32 and
   u32 (x*x, wrapping like vf_mul). gelu is the tanh approximation
   0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))). */
VF_API vf_tensor *vf_neg(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_exp(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_log(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_sqrt(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_rsqrt(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_abs(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_tanh(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_sigmoid(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_relu(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_gelu(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_sin(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_cos(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_square(vf_context *ctx, vf_tensor *x);
/* Math ops (issue 13), all elementwise (they fuse):
   - sign: -1, 0 or 1 (float, i32, u32); NaN and +-0 pass through.
   - floor, ceil, round (float): round is half to even (as TF and NumPy);
     NaN, Inf and the sign of a zero pass through. Their gradient is 0.
   - mod(a, b): floor modulo (tf.math.floormod, Python's %): the result has
     b's sign, a zero one included; float and integer. Float x mod 0 and
     Inf mod y are NaN, x mod +-Inf is x or +-Inf (Python's); integer
     x mod 0 is 0 (as NumPy), INT_MIN mod -1 is 0. Gradients: d/da = 1,
     d/db = -floor(a/b).
   - logical_and, logical_or, logical_not: VF_BOOL in and out.
   - erf (|error| < 1e-7 in f32), log1p, expm1 (accurate near 0),
     softplus = log(1 + e^x) computed as max(x, 0) + log1p(e^-|x|), so it
     neither overflows nor loses a very negative x: float only.
   - leaky_relu(x, alpha) = x > 0 ? x : alpha x, alpha finite; float only.
   - clip(x, lo, hi) = min(max(x, lo), hi), NaN passes through; float,
     i32, u32. lo <= hi, either may be infinite (NaN or lo > hi:
     VF_ERROR_INVALID_ARGUMENT); the bounds are converted to x's dtype
     (integers: the integers inside [lo, hi], an error if there are none).
     The gradient passes where lo <= x <= hi, else 0.
   - stop_gradient: x itself, any dtype; a tape sends no gradient through
     it (tf.stop_gradient). */
VF_API vf_tensor *vf_sign(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_floor(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_ceil(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_round(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_mod(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_logical_and(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_logical_or(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_logical_not(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_erf(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_log1p(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_expm1(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_softplus(vf_context *ctx, vf_tensor *x);
VF_API vf_tensor *vf_leaky_relu(vf_context *ctx, vf_tensor *x, double alpha);
VF_API vf_tensor *vf_clip(vf_context *ctx, vf_tensor *x, double lo, double hi);
VF_API vf_tensor *vf_stop_gradient(vf_context *ctx, vf_tensor *x);
/* Float to int truncates toward zero (NaN gives 0, out of range saturates);
   to bool is x != 0. */
VF_API vf_tensor *vf_cast(vf_context *ctx, vf_tensor *x, vf_dtype to);

/* Reductions over the listed axes (naxes == 0: all axes); keepdims keeps
   them as size 1. Sum of an empty set is 0, mean of it NaN, max/min of it
   an error. Float inputs only for mean; sum/max/min also take i32/u32. */
VF_API vf_tensor *vf_reduce_sum(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
VF_API vf_tensor *vf_reduce_mean(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
VF_API vf_tensor *vf_reduce_max(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
VF_API vf_tensor *vf_reduce_min(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
/* Issue 13's reductions, same axes and keepdims rules:
   - reduce_prod (float, i32, u32; integers wrap): the empty product is 1.
     Its gradient is exact with zeros in the row (no division by x).
   - reduce_any / reduce_all: VF_BOOL in and out; of nothing, false / true.
   - logsumexp (float): log(sum(exp(x))) shifted by the max, so it neither
     overflows nor underflows; a row of -Inf (or an empty one) gives -Inf,
     any +Inf gives +Inf, NaN propagates. Its gradient is the softmax. */
VF_API vf_tensor *vf_reduce_prod(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
VF_API vf_tensor *vf_reduce_any(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
VF_API vf_tensor *vf_reduce_all(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
VF_API vf_tensor *vf_logsumexp(vf_context *ctx, vf_tensor *x, int naxes, const int *axes, bool keepdims);
/* Index of the first maximum along axis, VF_I32; a NaN counts as the maximum. */
VF_API vf_tensor *vf_argmax(vf_context *ctx, vf_tensor *x, int axis);

/* Matrix product over the last two dims, batch dims broadcast
   ([..., m, k] @ [..., k, n] -> [..., m, n]); rank-1 operands are treated as
   a row (a) or column (b) vector and that dim is dropped, as in NumPy.
   f32 (and f16 storage) only. */
VF_API vf_tensor *vf_matmul(vf_context *ctx, vf_tensor *a, vf_tensor *b);
VF_API vf_tensor *vf_matmul_ex(vf_context *ctx, vf_tensor *a, vf_tensor *b, bool transpose_a,
                               bool transpose_b);

/* Numerically stable (max subtracted) along axis. On Vulkan with a loop
   budget B (lavapipe: 65,471; GPUs: none) the axis may be at most
   1024 x B / 3 long (22,346,752 on lavapipe), for vf_log_softmax and the
   classes of vf_sparse_softmax_cross_entropy too; past that
   VF_ERROR_UNSUPPORTED says so (docs/LIMITS.md). */
VF_API vf_tensor *vf_softmax(vf_context *ctx, vf_tensor *x, int axis);
VF_API vf_tensor *vf_log_softmax(vf_context *ctx, vf_tensor *x, int axis);
/* labels [...] i32 (or u32) class indices, logits [..., classes] float:
   per-example losses [...], as tf.nn.sparse_softmax_cross_entropy_with_logits.
   A label outside [0, classes) gives a NaN loss for that example. */
VF_API vf_tensor *vf_sparse_softmax_cross_entropy(vf_context *ctx, vf_tensor *labels, vf_tensor *logits);
/* L2 norm over all elements: a scalar. */
VF_API vf_tensor *vf_norm(vf_context *ctx, vf_tensor *x);

/* One dim may be -1 (inferred). The result shares storage when it can. */
VF_API vf_tensor *vf_reshape(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape);
/* perm NULL: reverse the dims. */
VF_API vf_tensor *vf_transpose(vf_context *ctx, vf_tensor *x, const int *perm);

/* ---- Movement -------------------------------------------------------------
   Every dtype. Arrays of int64_t are one entry per dim of x (rank-length).
   Gradients flow through all of them (float dtypes).

   vf_slice: NumPy basic slicing x[begin:end:step] per dim. Negative begin
   / end count from the end; both are clamped to the dim (out of range is
   no error: x[5:100] of 10 elements is x[5:10], x[20:] is empty);
   end = INT64_MAX runs to the end in the step's direction (NumPy's omitted
   stop, also for negative steps: x[::-1] is begin INT64_MAX, end INT64_MAX,
   step -1). begin NULL: from the first element in the step's direction;
   end NULL: to the end; step NULL: 1 everywhere; a step of 0 or INT64_MIN
   is VF_ERROR_INVALID_ARGUMENT (INT64_MIN cannot be negated; -INT64_MAX
   takes the same single element).
   The result has x's rank (no dim is dropped; vf_squeeze drops them).
   Eagerly, a slice that is one contiguous block of x starting at a
   256-byte boundary (leading rows of a matrix, a split's first part...)
   shares x's storage as vf_reshape does; others are one copy kernel. In a
   traced function the slice is resolved against every call's sizes, so
   symbolic (-1) dims may be sliced (x[1:], x[:-1], x[::2]), gradients
   included. In a traced function a contiguous slice at a 256-byte
   boundary is a view there too; other slices, pads and concats fuse with
   their elementwise consumers (one kernel reading the input at the sliced
   indices). */
VF_API vf_tensor *vf_slice(vf_context *ctx, vf_tensor *x, const int64_t *begin, const int64_t *end,
                           const int64_t *step);
/* Joins 1 <= n <= 64 tensors of one dtype and rank along axis (negative:
   from the end); every other dim must match. Empty parts contribute
   nothing. The gradient of a concat along a symbolic dim needs the size of
   one of each two joined parts fixed (concat works as a balanced tree of
   pairs). In a traced function, parts that are contiguous in the result
   at 256-byte boundaries are computed straight into it (no copy). */
VF_API vf_tensor *vf_concat(vf_context *ctx, int n, vf_tensor *const *xs, int axis);
/* Joins 1 <= n <= 64 tensors of one dtype and shape along a new axis (in
   -rank-1 .. rank): the result has rank + 1 dims, size n at axis. */
VF_API vf_tensor *vf_stack(vf_context *ctx, int n, vf_tensor *const *xs, int axis);
/* Splits x along axis into n parts, written to out[0 .. n-1] (tf.split):
   sizes NULL: n equal parts (x's dim must divide by n); else sizes[i] is
   part i's size, one of them may be -1 (the rest), and they must add up
   to the dim. Parts are slices (views where vf_slice gives one). On error
   out[] is all NULL. Splitting a symbolic (-1) dim of a traced function
   needs sizes with a -1: that part takes what varies, the parts after it
   are cut from the end (equal parts fail with VF_ERROR_UNSUPPORTED). */
VF_API vf_status vf_split(vf_context *ctx, vf_tensor *x, int n, const int64_t *sizes, int axis, vf_tensor **out);
/* before[d] / after[d] >= 0 elements of value (converted to x's dtype with
   the cast rules) around dim d; NULL: 0. Constant padding (tf.pad). */
VF_API vf_tensor *vf_pad(vf_context *ctx, vf_tensor *x, const int64_t *before, const int64_t *after, double value);
/* reps[d] >= 1 (or 0: an empty dim) copies of x along dim d (np.tile with
   len(reps) == rank). */
VF_API vf_tensor *vf_tile(vf_context *ctx, vf_tensor *x, const int64_t *reps);
/* x broadcast to shape (NumPy rules: x's dims align with the last ones and
   must equal them or be 1). shape[d] == -1 keeps x's size there (a
   symbolic dim of a traced function: give -1 for it). */
VF_API vf_tensor *vf_broadcast_to(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape);
/* A size-1 dim inserted at axis (-rank-1 .. rank) / the listed size-1 dims
   removed (naxes 0: every size-1 dim; a listed dim that is not 1 is an
   error). Both share x's storage as vf_reshape does. While tracing, these
   two and vf_tile are reshapes: an x with more than one symbolic (-1) dim
   fails with VF_ERROR_UNSUPPORTED (a traced reshape follows one). */
VF_API vf_tensor *vf_expand_dims(vf_context *ctx, vf_tensor *x, int axis);
VF_API vf_tensor *vf_squeeze(vf_context *ctx, vf_tensor *x, int naxes, const int *axes);
/* ---- Indexing ------------------------------------------------------------
   Indices are i32 (u32 is taken too); axes may be negative. */
/* tf.gather: the slices of x at indices along axis; the result has shape
   x.shape[:axis] + indices.shape + x.shape[axis+1:], any dtype. An index
   outside [0, x.shape[axis]) (negative ones included) is an error on the
   CPU backend (VF_ERROR_INVALID_ARGUMENT naming the index and its
   position); on Vulkan, which cannot report it, its slice reads as zeros
   (VKFUSE_CHECK=1 replays traced plans on the CPU backend and so reports
   it there too).
   Gradient: scatter_add of the output gradient into zeros shaped like x. */
VF_API vf_tensor *vf_gather(vf_context *ctx, vf_tensor *x, vf_tensor *indices, int axis);
/* x with updates added at indices along axis: the adjoint of vf_gather,
   updates shaped like vf_gather(x, indices, axis)'s result; duplicate
   indices accumulate. x and updates one numeric dtype (not bool). Out of
   range indices: an error on the CPU backend, dropped on Vulkan. On
   Vulkan the sums are deterministic (each output element adds its updates
   in index order, no atomics): the kernel first lists each row's indices,
   (x.shape[axis] + numel(indices)) x numel(indices) comparisons, then
   adds every update once. On a device with a loop limit more indices than
   its loop budget (65,471 on lavapipe) are listed and added in blocks, in
   the same order: up to (budget / 2)^2 indices per call (about 1.07
   billion on lavapipe; docs/LIMITS.md). The comparisons are bounded too,
   so that no call can pass the fence timeout: past 2^34 loop iterations
   in all on a CPU-type device (about 19 s on lavapipe; 2^40 on a GPU)
   the call fails up front with VF_ERROR_UNSUPPORTED naming the most
   indices that fit those rows (150,000 rows: 113,844; split the indices
   and add the results). Gradients: the identity for x,
   vf_gather of the output gradient for updates. */
VF_API vf_tensor *vf_scatter_add(vf_context *ctx, vf_tensor *x, vf_tensor *indices, vf_tensor *updates, int axis);
/* tf.one_hot: indices [...] (i32 or u32) -> [..., depth] of dtype (any),
   1 where the last index equals the index, else 0; a negative or >= depth
   index gives an all-zero row. Made of an equal and a cast, so it fuses
   with its consumers in a traced function. No gradient. */
VF_API vf_tensor *vf_one_hot(vf_context *ctx, vf_tensor *indices, int64_t depth, vf_dtype dtype);
/* tf.range: [start, limit) by delta, length max(0, ceil((limit - start) /
   delta)), of dtype f32, f16, i32 or u32. Element i is start + i * delta,
   computed in f32 for float dtypes (f16: then rounded), in the integer
   dtype otherwise, exactly. start and limit must be representable in the
   dtype (integers of its range; finite floats within its range), so that
   every element is too (nothing wraps or becomes inf: i32 0 .. 1e10 is
   refused; a u32 range down to 0 would need limit -1: count up and
   reverse it, vf_slice step -1); |delta| must fit the integer dtype (a
   u32 range may go down) or f32. delta 0, a non-finite or
   unrepresentable argument (the message names it and the dtype) or more
   than 2^31 - 1 elements is VF_ERROR_INVALID_ARGUMENT. No gradient. */
VF_API vf_tensor *vf_range(vf_context *ctx, vf_dtype dtype, double start, double limit, double delta);
/* tf.cumsum: running sums along axis (x numeric, not bool; rank >= 1);
   exclusive: each output leaves out its own element (the first is 0);
   reverse: sums run from the end. Integers wrap. On Vulkan a row of up
   to 256 elements is scanned by one invocation; longer rows in blocks of
   256 (scan each block, scan the block totals the same way - in blocks
   again while there are more than 256 - then add each block's prefix):
   O(n) work, any row up to the maximum tensor size (no limit of its
   own), floats summed in f32 per block and the block totals in f32.
   Gradient: the cumsum of the output gradient with reverse flipped. */
VF_API vf_tensor *vf_cumsum(vf_context *ctx, vf_tensor *x, int axis, bool exclusive, bool reverse);
/* tf.math.top_k: the k largest elements along the last axis, sorted
   descending ([..., n] -> [..., k]); *indices (when indices is not NULL)
   receives their positions, VF_I32. Ties go to the lower index first; a
   NaN counts as larger than every number (NaNs first, by index). k must
   be in [0, n] (else VF_ERROR_INVALID_ARGUMENT); x numeric, not bool. On
   Vulkan (deterministic) each block of up to 2048 elements of a row keeps
   its best min(k, 2048) in a heap, then the sorted lists are merged a few
   at a time until one is left: O(n log k) per row for small k, a merge
   sort when k is near n (a row of 262144 with k = 50: 7 kernels,
   milliseconds on lavapipe). Rows of any length up to the maximum tensor
   size work; what bounds k is the op's work and scratch, so that it ends
   well within the fence timeout: on a CPU device (lavapipe) at most 2^30
   loop iterations in all, counted for the worst case, on a GPU 2^36; and
   the candidate lists (4 bytes each, about n k / 2048 per row, up to 2n
   for a large k) within one storage binding. On lavapipe: k = n up to
   n = 2^21; one row of 2^25 f32 up to k = 827, 128 rows of 262144 up to
   k = 1176, one row of 2^26 f16 up to k = 261. Past them the call fails
   up front with VF_ERROR_UNSUPPORTED naming the largest k that fits the
   shape (use fewer rows, a smaller k or the CPU backend). Gradient
   (values): the output gradient scattered back to the positions taken,
   zero elsewhere. */
VF_API vf_tensor *vf_top_k(vf_context *ctx, vf_tensor *x, int k, vf_tensor **indices);
/* ---- Convolution and pooling (NHWC) --------------------------------------
   A vf_conv2d_desc whose every field is 0 (or a NULL desc) is the default:
   strides 1, dilations 1, VALID padding, one group. */
typedef enum {
    VF_PADDING_VALID = 0,    /* no padding: windows lie inside the input */
    VF_PADDING_SAME = 1,     /* out = ceil(in / stride); the extra pad goes at the bottom/right, as in TF */
    VF_PADDING_EXPLICIT = 2, /* desc.pads */
} vf_padding;

typedef struct vf_conv2d_desc {
    int strides[2];    /* height, width; 0 = 1 */
    int dilations[2];  /* height, width; 0 = 1 (TF's dilation_rate) */
    vf_padding padding;
    int pads[4];       /* VF_PADDING_EXPLICIT: top, bottom, left, right (>= 0); otherwise must be 0 */
    int groups;        /* 0 = 1; must divide channels and out channels; groups = channels: depthwise */
} vf_conv2d_desc;

/* 2-D convolution (cross-correlation, as tf.nn.conv2d): x NHWC [N, H, W, C],
   w HWIO [KH, KW, C / groups, O] -> [N, OH, OW, O] with
   OH = (H + pad_top + pad_bottom - dilation_h * (KH - 1) - 1) / stride_h + 1.
   Output channel o sees input channels of group o / (O / groups). f32 only
   (VF_ERROR_DTYPE otherwise: cast first). A batch of 0 gives an empty
   result; so does H or W = 0 (OH / OW clamped at 0 where the window does
   not fit the padded empty input; explicit pads around it are rows of
   padding: zeros); C = 0 gives zeros. A non-empty H or W smaller than the
   window (with padding) is VF_ERROR_SHAPE. Differentiable in x and w (to any order: the
   gradients are ops of their own, conv2d_backprop_input / _filter, which
   show in graph dumps and profiles). On Vulkan each result element is one
   invocation's sum: KH*KW*C/groups terms (forward), KH*KW*O/groups (input
   gradient); past the device's loop budget (65471 on lavapipe) the op fails
   with VF_ERROR_UNSUPPORTED saying so (use the CPU backend). The filter
   gradient's N*OH*OW terms are summed in chunks and the chunks added in a
   second step, so any batch runs (up to the budget squared). An op of
   more than 2^35 multiply-adds on a CPU-type Vulkan device (2^41 on a
   GPU) is refused up front, naming the most images per call, so that no
   call can pass the fence timeout. In a traced
   function a conv2d followed by elementwise ops of its output shape (bias
   add, activation) runs as one kernel (docs/FUSION.md). */
VF_API vf_tensor *vf_conv2d(vf_context *ctx, vf_tensor *x, vf_tensor *w, const vf_conv2d_desc *desc);

typedef struct vf_pool2d_desc {
    int window[2];     /* height, width; >= 1 (required) */
    int strides[2];    /* 0 = the window (non-overlapping, as Keras) */
    vf_padding padding; /* VF_PADDING_VALID or VF_PADDING_SAME */
} vf_pool2d_desc;

/* Max / mean over each window of each channel of x NHWC -> [N, OH, OW, C]
   (OH as for vf_conv2d). Padded positions never count: a max ignores them
   and a mean divides by the window's positions inside the input (TF's
   avg_pool). f32 only. An empty x (N, H, W or C 0) gives the empty
   result (OH or OW 0 for H or W 0), and so do the gradients. Gradients:
   max pool's goes to the window's first maximum (ties to the first in
   row-major window order) and is not differentiable again; avg pool's to
   every position it averaged. A window of any size runs (a global pool of
   a whole image included): on Vulkan one invocation walks each window, or
   each dx element the windows that hold it; a walk longer than the
   device's loop budget (65,471 on lavapipe; docs/LIMITS.md) goes in chunks
   that a second step combines. On a CPU-type Vulkan device a pool whose
   walks take more than 2^35 steps in all (2^41 on a GPU) is refused up
   front, naming the most images per call, so that no call can pass the
   fence timeout. */
VF_API vf_tensor *vf_max_pool2d(vf_context *ctx, vf_tensor *x, const vf_pool2d_desc *desc);
VF_API vf_tensor *vf_avg_pool2d(vf_context *ctx, vf_tensor *x, const vf_pool2d_desc *desc);

/* ---- Variables ----------------------------------------------------------
   Persistent and mutable: a variable keeps its dtype and shape; assigning
   changes its value for every later reader. Ops that read a variable see
   the value it had when the op was called. */
VF_API vf_tensor *vf_variable(vf_context *ctx, vf_tensor *initial);
VF_API bool vf_tensor_is_variable(const vf_tensor *t);
/* value must have the variable's dtype and broadcast to its shape. */
VF_API vf_status vf_assign(vf_tensor *var, vf_tensor *value);
VF_API vf_status vf_assign_add(vf_tensor *var, vf_tensor *value);
VF_API vf_status vf_assign_sub(vf_tensor *var, vf_tensor *value);

/* ---- Traced functions, saved functions, control flow ---------------------
   In include/vkfuse_function.h, included at the end of this header. */
typedef struct vf_function vf_function;

/* ---- Gradients (tf.GradientTape), eager and traced alike ------------------
   vf_tape_begin starts recording every op of ctx (on every active tape, so
   tapes nest). vf_tape_gradient computes d sum(target) / d sources[i] into
   grads[i] (the caller's scope, like op results; each has its source's
   shape and dtype) by reverse mode over what was recorded: target may be a
   scalar or of any shape (the seed is ones of its shape). A source the
   target does not depend on gets zeros, not an error; a path through an op
   that is not differentiable (comparisons, argmax, casts from or to
   integers) fails with VF_ERROR_INVALID_ARGUMENT naming the op. Sources
   must be float (VF_ERROR_DTYPE otherwise) and the target must have been
   computed by ops this tape recorded (VF_ERROR_INVALID_ARGUMENT otherwise).
   In a traced body the gradient is built symbolically into the same graph,
   so the backward pass is optimised and fused with the forward one.
   Gradients flow through vf_cond and vf_while_loop (eager and traced) and
   through calls of traced vf_functions. The gradient's own ops are recorded
   by the other active tapes (not by the tape computing it), so a tape
   inside a tape gives second-order gradients. A tape holds the tensors it
   recorded until vf_tape_end; end it before the context. See
   docs/GRADIENTS.md for each op's rule.
   vf_tape_gradient_ex is vf_tape_gradient with flags: VF_TAPE_UNCONNECTED_NULL
   sets grads[i] to NULL (not zeros) for a source the target does not depend
   on (a path cut by stop_gradient counts as none), as TF's default
   UnconnectedGradients.NONE; an empty source (no elements) still gets
   zeros. Unknown flag bits fail with VF_ERROR_INVALID_ARGUMENT. */
typedef struct vf_tape vf_tape;
#define VF_TAPE_UNCONNECTED_NULL 1u
VF_API vf_tape *vf_tape_begin(vf_context *ctx);
VF_API vf_status vf_tape_gradient(vf_tape *tape, vf_tensor *target, int n, vf_tensor *const *sources,
                                  vf_tensor **grads);
VF_API vf_status vf_tape_gradient_ex(vf_tape *tape, vf_tensor *target, int n, vf_tensor *const *sources,
                                     vf_tensor **grads, unsigned flags);
VF_API void vf_tape_end(vf_tape *tape);

#ifdef __cplusplus
}
#endif
/* Traced functions, profiling and user kernels (their own installed
   headers, included for every user). */
#include "vkfuse_function.h"
#include "vkfuse_profile.h"
#include "vkfuse_kernel.h"

#endif /* VKFUSE_H */
