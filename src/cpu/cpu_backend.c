/* The CPU backend: host buffers (cpu_alloc.c), its worker threads
 * (cpu_threads.c) and synchronous dispatch of each vf_exec to its
 * reference kernel. Every exec is checked against the buffers it names (a
 * bad offset from a planner bug becomes an error, not a wild write). */
#include "cpu/cpu.h"
#include "cpu/blas.h"
#include "cpu/cpu_fused.h"
#include "cpu/cpu_threads.h"
#include "cpu/dnnl_conv.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static vf_status cpu_alloc(void *self, size_t bytes, vf_buffer **out)
{
    return vf_cpu_buf_alloc(self, bytes, out);
}

static void cpu_free(void *self, vf_buffer *buf) { vf_cpu_buf_free(self, buf); }

static vf_status check_range(vf_cpu *cpu, const char *what, const vf_buffer *buf, size_t offset,
                             size_t bytes)
{
    if (!buf || offset > buf->size || bytes > buf->size - offset)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: %s of %zu bytes at offset %zu outside a buffer of %zu bytes",
                          what, bytes, offset, buf ? buf->size : (size_t)0);
    return VF_OK;
}

static vf_status cpu_upload(void *self, vf_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    vf_status s = check_range(self, "upload", buf, offset, bytes);
    if (s == VF_OK && bytes) memcpy((char *)buf->data + offset, src, bytes);
    return s;
}

static vf_status cpu_download(void *self, vf_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    vf_status s = check_range(self, "download", buf, offset, bytes);
    if (s == VF_OK && bytes) memcpy(dst, (char *)buf->data + offset, bytes);
    return s;
}

/* A tensor reference must be a valid dtype/rank, element-aligned and lie
   inside its buffer. */
static vf_status check_tref(vf_cpu *cpu, const char *op, const char *which, const vf_tref *t)
{
    if (!vf_dtype_valid((int)t->dtype) || t->rank < 0 || t->rank > VF_MAX_RANK)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: %s: %s has dtype %d, rank %d", op, which, (int)t->dtype,
                          t->rank);
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) {
        if (t->shape[d] < 0)
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                              "cpu backend: %s: %s dim %d is %lld", op, which, d,
                              (long long)t->shape[d]);
        if (t->shape[d] > 0 && n > INT64_MAX / VF_MAX_RANK / t->shape[d])
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                              "cpu backend: %s: %s has more elements than memory can hold", op, which);
        n *= t->shape[d];
    }
    if (n == 0) return VF_OK;
    size_t es = vf_dtype_size(t->dtype);
    if (t->offset % es != 0)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: %s: %s offset %zu not a multiple of its %zu-byte elements",
                          op, which, t->offset, es);
    if (!t->buf || t->offset > t->buf->size || (size_t)n * es > t->buf->size - t->offset)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: %s: %s of %lld %s elements at offset %zu lies outside its "
                          "buffer of %zu bytes", op, which, (long long)n, vf_dtype_name(t->dtype),
                          t->offset, t->buf ? t->buf->size : (size_t)0);
    return VF_OK;
}

/* A user kernel's C implementation on host pointers; the outputs zeroed
   first as on Vulkan (docs/KERNELS.md). */
vf_status vf_cpu_ukernel(void *self, const vf_ukernel_exec *e)
{
    vf_cpu *cpu = self;
    const vf_ukernel *k = e->k;
    if (!k->cpu)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "kernel '%s' has no C implementation (%s), so it cannot run on the CPU backend; give "
                          "desc.cpu, or use a Vulkan context", k->name,
                          k->loaded ? "a loaded function keeps the SPIR-V but not the C function" : "desc.cpu is NULL");
    const void *in[VF_KERNEL_MAX_INPUTS];
    void *out[VF_KERNEL_MAX_OUTPUTS];
    vf_status s = VF_OK;
    for (int i = 0; s == VF_OK && i < k->n_in; i++) {
        s = check_tref(cpu, k->name, "input", &e->in[i]);
        in[i] = s == VF_OK ? vf_cpu_ptr(&e->in[i]) : NULL;
    }
    for (int j = 0; s == VF_OK && j < k->n_out; j++) {
        s = check_tref(cpu, k->name, "output", &e->out[j]);
        out[j] = s == VF_OK ? vf_cpu_ptr(&e->out[j]) : NULL;
        if (s == VF_OK && !k->uninit)
            memset(out[j], 0, (size_t)vf_cpu_numel(&e->out[j]) * vf_dtype_size(e->out[j].dtype));
    }
    if (s != VF_OK) return s;
    s = k->cpu(e->shapes, in, out, k->user);
    if (s != VF_OK)
        return vf_err_set(cpu->err, (unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_INVALID_ARGUMENT,
                          "kernel '%s': its C implementation (desc.cpu) returned %s", k->name,
                          vf_status_name((unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_INVALID_ARGUMENT));
    return VF_OK;
}

/* A planned user kernel call replayed by VKFUSE_CHECK: its C implementation. */
static vf_status cpu_user_kernel(vf_cpu *cpu, const vf_exec *e)
{
    if (!e->ux) return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: op user_kernel has no kernel");
    vf_ukernel_exec x = *e->ux;
    vf_tref in[3] = {e->in[0], e->in[1], e->in[2]}, out = e->out;
    x.in = in;
    x.out = &out;
    return vf_cpu_ukernel(cpu, &x);
}

typedef vf_status (*cpu_kernel_fn)(vf_cpu *cpu, const vf_exec *e);

/* The CPU kernel of every op, indexed by op. The size check makes a new op
   (appended to the enum, graph/op.h) that has no entry here fail the build;
   test_op_table checks that no entry is NULL (vf_cpu_op_has_kernel). */
static const cpu_kernel_fn cpu_kernels[] = {
    [VF_OP_ADD] = vf_cpu_elementwise, [VF_OP_SUB] = vf_cpu_elementwise, [VF_OP_MUL] = vf_cpu_elementwise,
    [VF_OP_DIV] = vf_cpu_elementwise, [VF_OP_POW] = vf_cpu_elementwise, [VF_OP_MAXIMUM] = vf_cpu_elementwise,
    [VF_OP_MINIMUM] = vf_cpu_elementwise,
    [VF_OP_GREATER] = vf_cpu_elementwise, [VF_OP_GREATER_EQUAL] = vf_cpu_elementwise,
    [VF_OP_LESS] = vf_cpu_elementwise, [VF_OP_LESS_EQUAL] = vf_cpu_elementwise, [VF_OP_EQUAL] = vf_cpu_elementwise,
    [VF_OP_NOT_EQUAL] = vf_cpu_elementwise,
    [VF_OP_WHERE] = vf_cpu_elementwise,
    [VF_OP_NEG] = vf_cpu_elementwise, [VF_OP_EXP] = vf_cpu_elementwise, [VF_OP_LOG] = vf_cpu_elementwise,
    [VF_OP_SQRT] = vf_cpu_elementwise, [VF_OP_RSQRT] = vf_cpu_elementwise, [VF_OP_ABS] = vf_cpu_elementwise,
    [VF_OP_TANH] = vf_cpu_elementwise, [VF_OP_SIGMOID] = vf_cpu_elementwise, [VF_OP_RELU] = vf_cpu_elementwise,
    [VF_OP_GELU] = vf_cpu_elementwise, [VF_OP_SIN] = vf_cpu_elementwise, [VF_OP_COS] = vf_cpu_elementwise,
    [VF_OP_CAST] = vf_cpu_elementwise, [VF_OP_COPY] = vf_cpu_elementwise,
    [VF_OP_REDUCE_SUM] = vf_cpu_reduce, [VF_OP_REDUCE_MEAN] = vf_cpu_reduce, [VF_OP_REDUCE_MAX] = vf_cpu_reduce,
    [VF_OP_REDUCE_MIN] = vf_cpu_reduce, [VF_OP_NORM] = vf_cpu_reduce,
    [VF_OP_ARGMAX] = vf_cpu_argmax,
    [VF_OP_SOFTMAX] = vf_cpu_softmax, [VF_OP_LOG_SOFTMAX] = vf_cpu_softmax,
    [VF_OP_SPARSE_XENT] = vf_cpu_sparse_xent,
    [VF_OP_MATMUL] = vf_cpu_matmul,
    [VF_OP_TRANSPOSE] = vf_cpu_transpose,
    [VF_OP_FILL] = vf_cpu_fill,
    [VF_OP_RANDOM_NORMAL] = vf_cpu_random_normal,
    [VF_OP_SQUARE] = vf_cpu_elementwise,
    [VF_OP_SIGN] = vf_cpu_elementwise, [VF_OP_FLOOR] = vf_cpu_elementwise, [VF_OP_CEIL] = vf_cpu_elementwise,
    [VF_OP_ROUND] = vf_cpu_elementwise, [VF_OP_MOD] = vf_cpu_elementwise,
    [VF_OP_LOGICAL_AND] = vf_cpu_elementwise, [VF_OP_LOGICAL_OR] = vf_cpu_elementwise,
    [VF_OP_LOGICAL_NOT] = vf_cpu_elementwise,
    [VF_OP_ERF] = vf_cpu_elementwise, [VF_OP_LOG1P] = vf_cpu_elementwise, [VF_OP_EXPM1] = vf_cpu_elementwise,
    [VF_OP_SOFTPLUS] = vf_cpu_elementwise, [VF_OP_LEAKY_RELU] = vf_cpu_elementwise,
    [VF_OP_CLIP] = vf_cpu_elementwise, [VF_OP_STOP_GRADIENT] = vf_cpu_elementwise,
    [VF_OP_REDUCE_PROD] = vf_cpu_reduce, [VF_OP_REDUCE_ANY] = vf_cpu_reduce, [VF_OP_REDUCE_ALL] = vf_cpu_reduce,
    [VF_OP_LOGSUMEXP] = vf_cpu_reduce,
    [VF_OP_SLICE] = vf_cpu_window, [VF_OP_PAD] = vf_cpu_window, [VF_OP_CONCAT] = vf_cpu_window,
    [VF_OP_SLICE_GRAD] = vf_cpu_window,
    [VF_OP_GATHER] = vf_cpu_index, [VF_OP_SCATTER_ADD] = vf_cpu_index, [VF_OP_IOTA] = vf_cpu_index,
    [VF_OP_CUMSUM] = vf_cpu_index, [VF_OP_TOP_K] = vf_cpu_index, [VF_OP_TOP_K_INDICES] = vf_cpu_index,
    [VF_OP_CONV2D] = vf_cpu_conv, [VF_OP_CONV2D_BACKPROP_INPUT] = vf_cpu_conv,
    [VF_OP_CONV2D_BACKPROP_FILTER] = vf_cpu_conv,
    [VF_OP_MAX_POOL2D] = vf_cpu_pool, [VF_OP_AVG_POOL2D] = vf_cpu_pool, [VF_OP_MAX_POOL2D_GRAD] = vf_cpu_pool,
    [VF_OP_AVG_POOL2D_GRAD] = vf_cpu_pool,
    [VF_OP_RNG_UNIFORM] = vf_cpu_rng, [VF_OP_RNG_NORMAL] = vf_cpu_rng, [VF_OP_RNG_ADVANCE] = vf_cpu_rng,
    [VF_OP_USER_KERNEL] = cpu_user_kernel,
    [VF_OP_USER_ELEMENTWISE] = vf_cpu_elementwise,
};
_Static_assert(sizeof cpu_kernels / sizeof cpu_kernels[0] == VF_OP_COUNT,
               "every op needs a CPU kernel: add the new op's row to cpu_kernels");

bool vf_cpu_op_has_kernel(vf_op op) { return (unsigned)op < VF_OP_COUNT && cpu_kernels[op]; }

vf_status vf_cpu_exec(void *self, const vf_exec *e)
{
    vf_cpu *cpu = self;
    if ((unsigned)e->op >= VF_OP_COUNT)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: op %d unknown",
                          (int)e->op);
    const vf_op_info *info = vf_op_get(e->op);
    if (e->n_in < 0 || e->n_in > 3)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: %s with %d inputs",
                          info->name, e->n_in);
    static const char *const names[3] = {"input 0", "input 1", "input 2"};
    vf_status s = check_tref(cpu, info->name, "output", &e->out);
    for (int j = 0; j < e->n_in && s == VF_OK; j++) s = check_tref(cpu, info->name, names[j], &e->in[j]);
    if (s != VF_OK) return s;
    if (vf_cpu_numel(&e->out) == 0) return VF_OK;
    if (!cpu_kernels[e->op])
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: op %s has no kernel", info->name);
    return cpu_kernels[e->op](cpu, e);
}

static vf_status cpu_row_grad(void *self, const vf_exec *e)
{
    vf_cpu *cpu = self;
    vf_status s = check_tref(cpu, "row_grad", "output", &e->out);
    static const char *const names[3] = {"g", "y", "labels"};
    if (e->n_in < 2 || e->n_in > 3)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: row_grad with %d inputs", e->n_in);
    for (int j = 0; j < e->n_in && s == VF_OK; j++) s = check_tref(cpu, "row_grad", names[j], &e->in[j]);
    return s == VF_OK ? vf_cpu_softmax_grad(cpu, e) : s;
}

/* exec is synchronous: nothing is ever queued. */
static vf_status cpu_sync(void *self)
{
    (void)self;
    return VF_OK;
}

static void cpu_destroy(void *self)
{
    vf_cpu *cpu = self;
    vf_cpu_cache_trim(cpu);
    vf_cpu_workers_destroy(cpu->workers);
    vf_cpu_dnnl_destroy(cpu->dnnl);
    free(cpu);
}

static vf_status cpu_trim(void *self)
{
    vf_cpu_cache_trim(self);
    return VF_OK;
}

static void cpu_stats(void *self, vf_context_stats *out)
{
    vf_cpu *cpu = self;
    out->device_bytes_in_use = cpu->bytes_in_use;
    out->device_bytes_cached = cpu->bytes_cached;
    out->device_bytes_reserved = cpu->bytes_reserved;
    out->device_bytes_peak = cpu->bytes_peak;
    out->device_allocations = cpu->allocations;
    out->device_alloc_retries = cpu->alloc_retries;
}

static const vf_backend_iface cpu_iface = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_upload,
    .download = cpu_download,
    .exec = vf_cpu_exec,
    .sync = cpu_sync,
    .destroy = cpu_destroy,
    .stats = cpu_stats,
    .trim = cpu_trim,
    .ukernel = vf_cpu_ukernel,
    .plan_create = vf_cpu_plan_create,
    .plan_run = vf_cpu_plan_run,
    .plan_destroy = vf_cpu_plan_destroy,
    .plan_info = vf_cpu_plan_info,
    .plan_profile = vf_cpu_plan_profile,
    .row_grad = cpu_row_grad,
    .fused_max_nodes = VF_CPU_FUSED_MAX_MEMBERS,
};

const vf_backend_iface *vf_cpu_iface(void) { return &cpu_iface; }

vf_status vf_cpu_threads_parse(const char *v, int *out, vf_err *err)
{
    *out = 0;
    if (!v || !*v) return VF_OK;
    char *end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end || n < 1 || n > VF_CPU_MAX_THREADS)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                          "VKFUSE_THREADS=%s is not a thread count: give a whole number from 1 to %d (the threads "
                          "of the CPU backend's kernels and of OpenBLAS), or unset it for one per CPU", v,
                          VF_CPU_MAX_THREADS);
    *out = (int)n;
    return VF_OK;
}

vf_status vf_cpu_backend_create_opts(vf_err *err, const vf_cpu_options *o, vf_backend_t *out)
{
    int threads = o->threads;
    out->iface = NULL;
    out->self = NULL;
    vf_cpu *cpu = vf_calloc(1, sizeof *cpu);
    int n = threads;
    if (n <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus < 1 ? 1 : cpus > VF_CPU_MAX_THREADS ? VF_CPU_MAX_THREADS : (int)cpus;
    }
    vf_cpu_workers *pool = cpu ? vf_cpu_workers_create(n) : NULL;
    if (!pool) {
        free(cpu);
        return vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "cpu backend: out of host memory (malloc failed) for the backend");
    }
    /* one setting for both: OpenBLAS's threads run the matmuls, ours the rest */
    const vf_cpu_blas *blas = vf_cpu_blas_get();
    if (threads > 0 && blas->set_num_threads) blas->set_num_threads(threads);
    cpu->err = err;
    cpu->workers = pool;
    cpu->cache_cap = vf_cpu_cache_default_cap();
    cpu->dnnl = o->dnnl_off ? NULL : vf_cpu_dnnl_create();
    out->iface = &cpu_iface;
    out->self = cpu;
    return VF_OK;
}

vf_status vf_cpu_backend_create_threads(vf_err *err, int threads, vf_backend_t *out)
{
    return vf_cpu_backend_create_opts(err, &(vf_cpu_options){.threads = threads}, out);
}

vf_status vf_cpu_backend_create(vf_err *err, vf_backend_t *out) { return vf_cpu_backend_create_threads(err, 0, out); }
