/* Internals of the CPU backend: the buffer, typed row load/store helpers,
 * the strided loop description shared by the kernels, and the kernel entry
 * points that cpu_backend.c dispatches to.
 *
 * The CPU backend is the reference every other backend is checked against,
 * so kernels favour exactness (double accumulation, op-table scalar
 * functions) over speed; the fast paths (plain f32 loops for the ops whose
 * float result is the double one rounded) are bit-identical to the generic
 * ones, but for exp, tanh, sigmoid, gelu and softmax's exp, whose double
 * polynomials (fast_math.h) may differ from libm by one f32 ulp, f32
 * softmax / log_softmax / cross-entropy rows along the last axis, computed
 * in float (fast_math.c: within 4.1e-7 relative of the double values), and
 * the work split across threads never changes a result's bits (each
 * thread computes whole outputs; see cpu_threads.h). The exceptions
 * are sgemm's matmuls and the window ops (convolutions, pools) on oneDNN
 * (dnnl_conv.h): f32 sums, held to the tolerances of docs/TESTING.md
 * against double references.
 */
#ifndef VF_CPU_CPU_H
#define VF_CPU_CPU_H

#include "backend.h"
#include "util/dtype.h"

#include <stddef.h>
#include <stdint.h>

/* Buffers are 64-byte aligned host allocations of `cap` bytes (the size
   class of `size`, cpu_alloc.c); a freed one waits in its class's cache
   list through `next`. */
struct vf_buffer {
    void *data;
    size_t size;
    size_t cap;
    struct vf_buffer *next;
};

/* Size classes of the buffer cache: 64..256 bytes in steps of 64, then
   four classes per power of two (5/4, 6/4, 7/4, 8/4 of the one below). */
#define VF_CPU_CLASSES 240

typedef struct vf_cpu_workers vf_cpu_workers;

/* oneDNN's engine, stream and primitive cache (dnnl_conv.c). */
typedef struct vf_cpu_dnnl vf_cpu_dnnl;

typedef struct vf_cpu {
    vf_err *err;            /* the context's sticky error */
    vf_cpu_dnnl *dnnl;      /* NULL: convolutions run as im2col + sgemm */
    int64_t bytes_in_use;   /* sum of live buffer sizes, for stats */
    int64_t bytes_peak;     /* the most bytes_in_use has been */
    int64_t allocations;    /* fresh host allocations (a cache hit is none) */
    int64_t alloc_retries;  /* fresh allocations retried after the cache was given back */
    int64_t bytes_reserved; /* capacities of live and cached buffers */
    int64_t bytes_cached;   /* capacities of cached buffers */
    int64_t cache_cap;      /* most bytes_cached may be; 0: no cache */
    vf_buffer *cache[VF_CPU_CLASSES];
    vf_cpu_workers *workers; /* kernels' worker threads (cpu_threads.h) */
} vf_cpu;

/* ---- buffers (cpu_alloc.c) ------------------------------------------------
   alloc serves a freed buffer of the same size class when one is cached,
   else allocates (and on failure gives the cache back and tries once
   more); free caches the buffer while the cache stays under cache_cap. */
vf_status vf_cpu_buf_alloc(vf_cpu *cpu, size_t bytes, vf_buffer **out);
void vf_cpu_buf_free(vf_cpu *cpu, vf_buffer *buf);
/* Gives every cached buffer back to the C library. */
void vf_cpu_cache_trim(vf_cpu *cpu);
/* The default cache capacity: an eighth of the machine's memory. */
int64_t vf_cpu_cache_default_cap(void);

/* Elements processed per chunk by the generic (converting) loops: small
   enough for the temporaries to stay in L1, big enough to amortise the
   per-chunk dispatch. */
#define VF_CPU_CHUNK 256

/* ---- data pointers ------------------------------------------------------ */

static inline void *vf_cpu_ptr(const vf_tref *t)
{
    return t->buf ? (char *)t->buf->data + t->offset : NULL;
}

int64_t vf_cpu_numel(const vf_tref *t);

/* ---- typed row conversion (cpu_util.c) ---------------------------------
   off and stride are in elements; stride may be 0 (broadcast). */

/* Widen n elements to double (bool -> 0/1). */
void vf_cpu_load_f64(const void *base, vf_dtype t, int64_t off, int64_t stride, int64_t n,
                     double *dst);
/* Widen n elements of an integer or bool dtype to int64 (i32 sign-extended,
   u32 zero-extended, bool 0/1). Float dtypes are truncated like a cast. */
void vf_cpu_load_i64(const void *base, vf_dtype t, int64_t off, int64_t stride, int64_t n,
                     int64_t *dst);
/* Store n contiguous values with the cast rules of vf_store_f64. */
void vf_cpu_store_f64(void *base, vf_dtype t, int64_t off, int64_t n, const double *src);
/* Store n contiguous integer values: i32/u32 keep the low 32 bits (wrap),
   bool is v != 0, floats get (double)v. */
void vf_cpu_store_i64(void *base, vf_dtype t, int64_t off, int64_t n, const int64_t *src);

/* ---- strided loops ------------------------------------------------------
   A loop nest over `rank` dims with an element stride per operand and dim.
   Kernels describe their operands' layouts here, simplify (drop size-1 dims,
   merge dims that are contiguous for every operand) and then walk the outer
   dims with a cursor, incrementing a multi-index instead of dividing. */

#define VF_CPU_MAX_OPS 4

typedef struct vf_cpu_loop {
    int rank;
    int nops;
    int64_t dim[VF_MAX_RANK];
    int64_t st[VF_CPU_MAX_OPS][VF_MAX_RANK];
} vf_cpu_loop;

typedef struct vf_cpu_cursor {
    int64_t idx[VF_MAX_RANK];
    int64_t off[VF_CPU_MAX_OPS];
} vf_cpu_cursor;

/* Row-major contiguous strides of shape. */
void vf_cpu_contig_strides(int rank, const int64_t *shape, int64_t *st);
/* Strides of an input of rank `rank`/`shape` broadcast (NumPy, trailing
   alignment) to an output of rank `out_rank`/`out_shape`: 0 on broadcast
   dims. */
void vf_cpu_broadcast_strides(int rank, const int64_t *shape, int out_rank, const int64_t *out_shape,
                              int64_t *st);
/* Drops size-1 dims and merges adjacent dims that are contiguous for every
   operand. Leaves rank >= 0. */
void vf_cpu_loop_simplify(vf_cpu_loop *l);
/* The same on bare arrays, for loops over more than VF_CPU_MAX_OPS
   operands (cpu_fused.c): st[j] is operand j's strides. */
void vf_cpu_dims_simplify(int *rank, int64_t *dim, int nops, int64_t (*st)[VF_MAX_RANK]);
/* Product of dims [lo, hi). */
int64_t vf_cpu_loop_count(const vf_cpu_loop *l, int lo, int hi);

static inline void vf_cpu_cursor_init(vf_cpu_cursor *c, int nops)
{
    for (int d = 0; d < VF_MAX_RANK; d++) c->idx[d] = 0;
    for (int j = 0; j < nops; j++) c->off[j] = 0;
}

/* Advances the multi-index over dims [0, nd) of l (last dim fastest),
   updating every operand's offset. Wraps to zero after the last step. */
static inline void vf_cpu_cursor_next(const vf_cpu_loop *l, int nd, vf_cpu_cursor *c)
{
    for (int d = nd - 1; d >= 0; d--) {
        for (int j = 0; j < l->nops; j++) c->off[j] += l->st[j][d];
        if (++c->idx[d] < l->dim[d]) return;
        for (int j = 0; j < l->nops; j++) c->off[j] -= l->st[j][d] * l->dim[d];
        c->idx[d] = 0;
    }
}

/* Sets c to row r of dims [0, nd) of l (r in [0, count of those dims)). */
static inline void vf_cpu_cursor_seek(const vf_cpu_loop *l, int nd, int64_t r, vf_cpu_cursor *c)
{
    vf_cpu_cursor_init(c, l->nops);
    for (int d = nd - 1; d >= 0; d--) {
        c->idx[d] = r % l->dim[d];
        r /= l->dim[d];
        for (int j = 0; j < l->nops; j++) c->off[j] += c->idx[d] * l->st[j][d];
    }
}

/* Work per thread below which a kernel is not split (cpu_threads.h): in
   elements for plain float loops, and for the converting (generic) loops,
   which spend about ten times longer per element. Waking a worker costs
   some microseconds; a part must be worth more. */
#define VF_CPU_GRAIN_FAST 32768
#define VF_CPU_GRAIN_SLOW 4096

/* Items per part so that a part touches at least VF_CPU_GRAIN_SLOW
   elements, given the elements of one item. */
static inline int64_t vf_cpu_grain_items(int64_t elems_per_item)
{
    return elems_per_item >= VF_CPU_GRAIN_SLOW ? 1 : VF_CPU_GRAIN_SLOW / (elems_per_item > 0 ? elems_per_item : 1);
}

/* ---- the backend's entry points (cpu_backend.c, cpu_plan.c) ----------------- */

const vf_backend_iface *vf_cpu_iface(void);
/* One exec, checked against its buffers. */
vf_status vf_cpu_exec(void *self, const vf_exec *e);
/* One call of a user kernel's C implementation, outputs zeroed first. */
vf_status vf_cpu_ukernel(void *self, const vf_ukernel_exec *e);
vf_status vf_cpu_plan_create(void *self, const vf_plan_desc *d, vf_plan **out);
vf_status vf_cpu_plan_run(void *self, vf_plan *p, const vf_plan_bind *binds, int n_binds);
void vf_cpu_plan_destroy(void *self, vf_plan *p);
void vf_cpu_plan_info(void *self, const vf_plan *p, vf_plan_info *out);
vf_status vf_cpu_plan_profile(void *self, vf_plan *p, vf_plan_prof *out);

/* ---- kernels --------------------------------------------------------------
   Each returns VF_OK or records the reason in cpu->err. */

/* Whether op has an entry in the CPU backend's kernel table (cpu_backend.c). */
bool vf_cpu_op_has_kernel(vf_op op);
vf_status vf_cpu_elementwise(vf_cpu *cpu, const vf_exec *e);
/* A plain f32 row (kernels_elementwise_fast.c): n elements of out (o) from
   the inputs a, b, c at the innermost strides st (st[0] out's, st[1..]
   the inputs'); f: the op table's float function (used by the rows that
   call it). */
typedef void (*vf_cpu_fast_row)(void *o, const void *a, const void *b, const void *c, const int64_t *st,
                                int64_t n, vf_scalar_f f);
/* The fast row for e at innermost strides st, or NULL: the generic path. */
vf_cpu_fast_row vf_cpu_fast_row_for(const vf_exec *e, const int64_t *st);
vf_status vf_cpu_reduce(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_argmax(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_softmax(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_sparse_xent(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_matmul(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_conv(vf_cpu *cpu, const vf_exec *e);     /* conv2d and its backprop ops: kernels_conv.c */
/* conv2d exec e with an f32 vector of its O output channels added to every
   output pixel: a plan's conv2d + bias group in one kernel (oneDNN adds it
   inside its kernel, within the conv's own f32 rounding of the separate
   add; im2col + sgemm: the sgemm's y, then exactly the separate add's
   f32 y + b). For tests: how many such calls there have been in this
   process. */
vf_status vf_cpu_conv_bias(vf_cpu *cpu, const vf_exec *e, const vf_tref *bias);
int64_t vf_cpu_conv_bias_folds(void);
vf_status vf_cpu_pool(vf_cpu *cpu, const vf_exec *e);     /* pools and their gradients: kernels_pool.c */
/* Strided byte copy: TRANSPOSE, and COPY / same-dtype CAST with broadcast. */
vf_status vf_cpu_transpose(vf_cpu *cpu, const vf_exec *e);
/* One row of f32 as the kernels compute it along the last axis (the
   fused row groups' one-pass evaluation, cpu_rows.c): x[i * stride] for i
   < n. The sum / mean / max / min (op, a reduction row of the op table)
   with vf_cpu_reduce's chunks and accumulators; softmax or log_softmax
   into y (contiguous) as vf_cpu_softmax: fast_math.c's float row when
   stride is 1, else in double through tmp (n doubles). */
float vf_cpu_reduce_row_f32(vf_op op, const float *x, int64_t stride, int64_t n);
void vf_cpu_softmax_row_f32(const float *x, int64_t stride, float *y, int64_t n, bool log_out, double *tmp);
/* The softmax (log_out: log_softmax) gradient along the last axis in one
   pass (kernels_row_grad.c): `rows` contiguous f32 rows of n of g (the
   output's gradient) and y (the output) into dx (dx may be g or y), the
   bits of the gradient rule's ops. vf_cpu_softmax_grad: the backend's
   row_grad (backend.h; also sparse cross entropy's gradient), threaded by
   rows. vf_cpu_softmax_grad_rows: rows computed so since the process
   started (tests). */
void vf_cpu_softmax_grad_rows_f32(const float *g, const float *y, float *dx, int64_t rows, int64_t n, bool log_out);
vf_status vf_cpu_softmax_grad(vf_cpu *cpu, const vf_exec *e);
int64_t vf_cpu_softmax_grad_rows(void);
/* slice, pad, concat (kernels_window.c) */
vf_status vf_cpu_window(vf_cpu *cpu, const vf_exec *e);
/* Window calls whose rows were copied as runs (unit steps along the last
   dim: one memcpy per source's stretch of a row) since the process
   started (tests). */
int64_t vf_cpu_window_runs(void);
vf_status vf_cpu_broadcast_copy(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_fill(vf_cpu *cpu, const vf_exec *e);
vf_status vf_cpu_random_normal(vf_cpu *cpu, const vf_exec *e);
/* Indexing ops (kernels_index.c): gather, scatter_add, and the IOTA source. */
vf_status vf_cpu_index(vf_cpu *cpu, const vf_exec *e);
/* Generators (kernels_random.c): RNG_UNIFORM, RNG_NORMAL, RNG_ADVANCE. */
vf_status vf_cpu_rng(vf_cpu *cpu, const vf_exec *e);

#endif
