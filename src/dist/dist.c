/* vkfuse_dist's API: argument checks, the signature of a call, packing the
 * tensors of a call into one host buffer per element class, and unpacking
 * the result into new tensors (or into variables, for a broadcast). The
 * transports (dist_mpi.c, dist_local.c) only move flat arrays. Uses
 * vkfuse's public API only. */
#include "dist/dist.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char create_err[sizeof ((vf_dist *)0)->err];

const char *vf_dist_create_error(void) { return create_err; }

void vf_dist_create_failed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(create_err, sizeof create_err, fmt, ap);
    va_end(ap);
}

vf_status vf_dist_fail(vf_dist *d, vf_status st, bool fatal, const char *fmt, ...)
{
    int k = snprintf(d->err, sizeof d->err, "vf_dist rank %d: ", d->rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err + k, sizeof d->err - (size_t)k, fmt, ap);
    va_end(ap);
    if (fatal) d->broken = true;
    return st;
}

size_t vf_dist_class_size(vf_dist_class c) { return c == VF_DIST_BOOL ? 1 : 4; }

static vf_dist_class class_of(vf_dtype t)
{
    switch (t) {
    case VF_I32: return VF_DIST_I32;
    case VF_U32: return VF_DIST_U32;
    case VF_BOOL: return VF_DIST_BOOL;
    default: return VF_DIST_F32; /* f32, f16 */
    }
}

/* IEEE half <-> float, round to nearest even (f16 is summed in f32). */
static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31u, m = h & 1023u, bits;
    if (e == 0) {
        float f = ldexpf((float)m, -24);
        return sign ? -f : f;
    }
    bits = e == 31 ? sign | 0x7f800000u | (m << 13) : sign | ((e + 112u) << 23) | (m << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (ax < 0x38800000u) { /* subnormal half: add 0.5 to move the bits down with RNE */
        float a;
        memcpy(&a, &ax, 4);
        a += 0.5f;
        uint32_t b;
        memcpy(&b, &a, 4);
        return (uint16_t)(sign | (b - 0x3f000000u));
    }
    uint32_t odd = (ax >> 13) & 1u;
    ax += 0xc8000fffu + odd; /* rebias exponent (-112 << 23) and round */
    return (uint16_t)(sign | (ax >> 13));
}

typedef struct {
    vf_dtype dtype;
    int rank;
    int64_t shape[VF_MAX_RANK];
    int64_t numel;
    vf_dist_class cls;
    size_t off; /* element offset within its class region */
} tinfo;

static void describe(char *s, size_t len, int n, const tinfo *ti)
{
    int k = snprintf(s, len, "%d tensor%s", n, n == 1 ? "" : "s");
    for (int i = 0; i < n && i < 8 && k > 0 && (size_t)k < len; i++) {
        k += snprintf(s + k, len - (size_t)k, "%s %s[", i ? "," : ":", vf_dtype_name(ti[i].dtype));
        for (int a = 0; a < ti[i].rank && (size_t)k < len; a++)
            k += snprintf(s + k, len - (size_t)k, "%s%lld", a ? "," : "", (long long)ti[i].shape[a]);
        if ((size_t)k < len) k += snprintf(s + k, len - (size_t)k, "]");
    }
    if (n > 8 && (size_t)k < len) snprintf(s + k, len - (size_t)k, ", ...");
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* A local failure inside a call: tell the other ranks (they fail naming
   this one) and return st with the message. */
static vf_status local_fail(vf_dist *d, vf_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static vf_status local_fail(vf_dist *d, vf_status st, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    vf_dist_fail(d, st, true, "%s: %s", d->what, msg);
    if (d->local) vf_dist_local_tell(d, d->calls - 1, d->err);
    else vf_dist_mpi_tell(d, d->calls - 1, d->err);
    return st;
}

/* Starts a call: refuses a broken vf_dist, counts the call. */
vf_status vf_dist_begin(vf_dist *d, const char *what)
{
    if (d->broken) return VF_ERROR_DEVICE;
    d->what = what;
    d->calls++;
    d->err[0] = 0;
    return VF_OK;
}

/* Reads the shapes of tensors[0..n-1] into ti; the signature of the call
   (the call's kind and every dtype and shape) into *sig. */
static vf_status inspect(vf_dist *d, int n, vf_tensor *const *ts, tinfo *ti, uint64_t salt, uint64_t *sig,
                         size_t count[VF_DIST_NCLASS])
{
    uint64_t h = fnv(0xcbf29ce484222325ull, &salt, sizeof salt);
    h = fnv(h, &n, sizeof n);
    for (int c = 0; c < VF_DIST_NCLASS; c++) count[c] = 0;
    for (int i = 0; i < n; i++) {
        vf_tensor *t = ts[i];
        if (!t)
            return local_fail(d, VF_ERROR_INVALID_ARGUMENT,
                              "tensor %d is NULL (an op before this call failed; see vf_error_message)", i);
        if (vf_tensor_context(t) != d->ctx)
            return local_fail(d, VF_ERROR_INVALID_ARGUMENT,
                              "tensor %d belongs to another context than the vf_dist's", i);
        tinfo *x = &ti[i];
        memset(x, 0, sizeof *x);
        x->dtype = vf_tensor_dtype(t);
        x->rank = vf_tensor_rank(t);
        x->numel = vf_tensor_numel(t);
        if (x->rank < 0 || x->rank > VF_MAX_RANK || x->numel < 0)
            return local_fail(d, VF_ERROR_INVALID_ARGUMENT, "tensor %d cannot be used: %s", i,
                              vf_error_message(d->ctx));
        for (int a = 0; a < x->rank; a++) x->shape[a] = vf_tensor_dim(t, a);
        x->cls = class_of(x->dtype);
        x->off = count[x->cls];
        count[x->cls] += (size_t)x->numel;
        h = fnv(h, &x->dtype, sizeof x->dtype);
        h = fnv(h, &x->rank, sizeof x->rank);
        h = fnv(h, x->shape, sizeof(int64_t) * (size_t)x->rank);
    }
    *sig = h;
    return VF_OK;
}

/* The cheap check that every rank called with the same tensors: one
   16-byte collective, before any data moves. */
vf_status vf_dist_check(vf_dist *d, uint64_t sig, const char *desc)
{
    int bad = -1;
    vf_status s = d->local ? vf_dist_local_check(d, sig, &bad) : vf_dist_mpi_check(d, sig, &bad);
    if (s != VF_OK || bad < 0) return s;
    return vf_dist_fail(d, VF_ERROR_SHAPE, true,
                        "%s: the ranks called it with different tensors: rank %d's differ from rank 0's "
                        "(this rank has %s); every rank must pass the same dtypes and shapes in the same order",
                        d->what, bad, desc);
}

static vf_status check_sig(vf_dist *d, uint64_t sig, int n, const tinfo *ti)
{
    char desc[256];
    describe(desc, sizeof desc, n, ti);
    return vf_dist_check(d, sig, desc);
}

/* Grows the packed buffer to hold count[] (regions one after another). */
static vf_status pack_space(vf_dist *d, const size_t count[VF_DIST_NCLASS], size_t region[VF_DIST_NCLASS])
{
    size_t total = 0;
    for (int c = 0; c < VF_DIST_NCLASS; c++) {
        region[c] = total;
        total += count[c] * vf_dist_class_size((vf_dist_class)c);
        total = (total + 7) & ~(size_t)7;
    }
    if (total > d->cap) {
        void *p = realloc(d->buf, total);
        if (!p) return local_fail(d, VF_ERROR_OUT_OF_MEMORY, "no host memory for the %zu-byte packed buffer", total);
        d->buf = p, d->cap = total;
    }
    return VF_OK;
}

static vf_status read_tensor(vf_dist *d, int i, vf_tensor *t, const tinfo *x, void *dst)
{
    size_t bytes = (size_t)x->numel * vf_dtype_size(x->dtype);
    if (x->dtype != VF_F16) {
        if (bytes && vf_tensor_read(t, dst, bytes) != VF_OK)
            return local_fail(d, vf_status_get(d->ctx) ? vf_status_get(d->ctx) : VF_ERROR_INVALID_ARGUMENT,
                              "reading tensor %d failed: %s", i, vf_error_message(d->ctx));
        return VF_OK;
    }
    uint16_t *h = malloc(bytes ? bytes : 1);
    if (!h) return local_fail(d, VF_ERROR_OUT_OF_MEMORY, "no host memory to read tensor %d", i);
    vf_status s = bytes ? vf_tensor_read(t, h, bytes) : VF_OK;
    for (int64_t k = 0; s == VF_OK && k < x->numel; k++) ((float *)dst)[k] = half_to_float(h[k]);
    free(h);
    if (s != VF_OK) return local_fail(d, s, "reading tensor %d failed: %s", i, vf_error_message(d->ctx));
    return VF_OK;
}

static vf_tensor *make_tensor(vf_dist *d, const tinfo *x, const void *src)
{
    if (x->dtype != VF_F16) return vf_tensor_from_host(d->ctx, x->dtype, x->rank, x->shape, src);
    uint16_t *h = malloc(x->numel ? (size_t)x->numel * 2 : 1);
    if (!h) return NULL;
    for (int64_t k = 0; k < x->numel; k++) h[k] = float_to_half(((const float *)src)[k]);
    vf_tensor *t = vf_tensor_from_host(d->ctx, x->dtype, x->rank, x->shape, h);
    free(h);
    return t;
}

static vf_status common_args(vf_dist *d, int n, const void *ts, const char *what)
{
    if (!d) return VF_ERROR_INVALID_ARGUMENT;
    vf_status s = vf_dist_begin(d, what);
    if (s != VF_OK) return s;
    if (n < 0 || (n > 0 && !ts))
        return local_fail(d, VF_ERROR_INVALID_ARGUMENT, "n is %d and the tensor array is %s: need n >= 0 and an array of n tensors",
                          n, ts ? "given" : "NULL");
    return VF_OK;
}

vf_status vf_dist_allreduce(vf_dist *d, int n, vf_tensor *const *in, vf_dist_op op, vf_tensor **out)
{
    vf_status s = common_args(d, n, in, "vf_dist_allreduce");
    if (s != VF_OK) return s;
    if (n > 0 && !out) return local_fail(d, VF_ERROR_INVALID_ARGUMENT, "out is NULL: pass an array of n tensor pointers");
    if (op != VF_DIST_SUM && op != VF_DIST_MEAN)
        return local_fail(d, VF_ERROR_INVALID_ARGUMENT, "op %d is not VF_DIST_SUM or VF_DIST_MEAN", (int)op);
    tinfo *ti = calloc((size_t)n + 1, sizeof *ti);
    if (!ti) return local_fail(d, VF_ERROR_OUT_OF_MEMORY, "no host memory for %d tensors", n);
    uint64_t sig;
    size_t count[VF_DIST_NCLASS], region[VF_DIST_NCLASS];
    if ((s = inspect(d, n, in, ti, 1000 + (uint64_t)op, &sig, count)) != VF_OK) goto done;
    for (int i = 0; i < n; i++)
        if (op == VF_DIST_MEAN && ti[i].dtype == VF_BOOL) {
            s = local_fail(d, VF_ERROR_DTYPE, "tensor %d is bool: VF_DIST_MEAN needs a number (VF_DIST_SUM of bool is the logical or)", i);
            goto done;
        }
    if (vf_context_tracing(d->ctx)) {
        char desc[256];
        describe(desc, sizeof desc, n, ti);
        s = vf_dist_traced_allreduce(d, n, in, op, out, desc, sig);
        goto done;
    }
    if ((s = pack_space(d, count, region)) != VF_OK) goto done;
    for (int i = 0; i < n; i++) {
        char *dst = (char *)d->buf + region[ti[i].cls] + ti[i].off * vf_dist_class_size(ti[i].cls);
        if ((s = read_tensor(d, i, in[i], &ti[i], dst)) != VF_OK) goto done;
    }
    if ((s = check_sig(d, sig, n, ti)) != VF_OK) goto done;
    for (int c = 0; c < VF_DIST_NCLASS && s == VF_OK; c++)
        if (count[c])
            s = d->local ? vf_dist_local_sum(d, (char *)d->buf + region[c], count[c], (vf_dist_class)c)
                         : vf_dist_mpi_sum(d, (char *)d->buf + region[c], count[c], (vf_dist_class)c);
    if (s != VF_OK) goto done;
    if (op == VF_DIST_MEAN) {
        float *f = (float *)((char *)d->buf + region[VF_DIST_F32]);
        int32_t *i32 = (int32_t *)((char *)d->buf + region[VF_DIST_I32]);
        uint32_t *u32 = (uint32_t *)((char *)d->buf + region[VF_DIST_U32]);
        for (size_t k = 0; k < count[VF_DIST_F32]; k++) f[k] /= (float)d->size;
        for (size_t k = 0; k < count[VF_DIST_I32]; k++) i32[k] /= d->size;
        for (size_t k = 0; k < count[VF_DIST_U32]; k++) u32[k] /= (uint32_t)d->size;
    }
    /* outputs only once all of them exist, so a failure leaves out as it was */
    vf_tensor **res = calloc((size_t)n + 1, sizeof *res);
    if (!res) {
        s = vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, false, "vf_dist_allreduce: no host memory");
        goto done;
    }
    for (int i = 0; i < n && s == VF_OK; i++) {
        res[i] = make_tensor(d, &ti[i], (char *)d->buf + region[ti[i].cls] + ti[i].off * vf_dist_class_size(ti[i].cls));
        if (!res[i])
            s = vf_dist_fail(d, vf_status_get(d->ctx) ? vf_status_get(d->ctx) : VF_ERROR_OUT_OF_MEMORY, false,
                             "vf_dist_allreduce: making result %d failed: %s", i, vf_error_message(d->ctx));
    }
    for (int i = 0; i < n; i++) {
        if (s == VF_OK) out[i] = res[i];
        else if (res[i]) vf_tensor_release(res[i]);
    }
    free(res);
done:
    free(ti);
    return s;
}

vf_status vf_dist_broadcast(vf_dist *d, int n, vf_tensor *const *tensors, int root)
{
    vf_status s = common_args(d, n, tensors, "vf_dist_broadcast");
    if (s != VF_OK) return s;
    if (root < 0 || root >= d->size)
        return local_fail(d, VF_ERROR_INVALID_ARGUMENT, "root %d is not a rank (0 .. %d)", root, d->size - 1);
    tinfo *ti = calloc((size_t)n + 1, sizeof *ti);
    if (!ti) return local_fail(d, VF_ERROR_OUT_OF_MEMORY, "no host memory for %d tensors", n);
    uint64_t sig;
    size_t count[VF_DIST_NCLASS], offs = 0;
    if ((s = inspect(d, n, tensors, ti, 2000 + (uint64_t)root, &sig, count)) != VF_OK) goto done;
    for (int i = 0; i < n && s == VF_OK; i++)
        if (!vf_tensor_is_variable(tensors[i]))
            s = local_fail(d, VF_ERROR_INVALID_ARGUMENT,
                           "tensor %d is not a variable: the broadcast writes in place (make it with vf_variable)", i);
    /* raw bytes, one tensor after another (no conversion: nothing is summed) */
    size_t *off = calloc((size_t)n + 1, sizeof *off);
    if (!off && s == VF_OK) s = local_fail(d, VF_ERROR_OUT_OF_MEMORY, "no host memory");
    for (int i = 0; i < n && s == VF_OK; i++) off[i] = offs, offs += (size_t)ti[i].numel * vf_dtype_size(ti[i].dtype);
    if (s == VF_OK && offs > d->cap) {
        void *p = realloc(d->buf, offs);
        if (!p) s = local_fail(d, VF_ERROR_OUT_OF_MEMORY, "no host memory for the %zu-byte packed buffer", offs);
        else d->buf = p, d->cap = offs;
    }
    for (int i = 0; i < n && s == VF_OK && d->rank == root; i++) {
        size_t b = (size_t)ti[i].numel * vf_dtype_size(ti[i].dtype);
        if (b && vf_tensor_read(tensors[i], (char *)d->buf + off[i], b) != VF_OK)
            s = local_fail(d, VF_ERROR_INVALID_ARGUMENT, "reading tensor %d failed: %s", i, vf_error_message(d->ctx));
    }
    if (s == VF_OK) s = check_sig(d, sig, n, ti);
    if (s == VF_OK)
        s = d->local ? vf_dist_local_bcast(d, d->buf, offs, root) : vf_dist_mpi_bcast(d, d->buf, offs, root);
    for (int i = 0; i < n && s == VF_OK && d->rank != root; i++) {
        vf_scope_begin(d->ctx);
        vf_tensor *v = vf_tensor_from_host(d->ctx, ti[i].dtype, ti[i].rank, ti[i].shape, (char *)d->buf + off[i]);
        vf_status a = v ? vf_assign(tensors[i], v) : vf_status_get(d->ctx);
        vf_scope_end(d->ctx);
        if (a != VF_OK)
            s = vf_dist_fail(d, a, false, "vf_dist_broadcast: writing variable %d failed: %s", i,
                             vf_error_message(d->ctx));
    }
    free(off);
done:
    free(ti);
    return s;
}

/* vf_dist_create failed on this rank before it could join the others:
   over MPI it still takes its turn (the others fail at once naming it, and
   everyone's next vf_dist_create pairs up). */
static vf_status refuse(const vf_dist_desc *desc, vf_status st)
{
    if (!desc->local) vf_dist_mpi_refuse(desc, create_err);
    return st;
}

vf_status vf_dist_create(vf_context *ctx, const vf_dist_desc *desc, vf_dist **out)
{
    static const vf_dist_desc zero = {0};
    if (!desc) desc = &zero;
    create_err[0] = 0;
    if (!out)
        return snprintf(create_err, sizeof create_err, "vf_dist_create: out is NULL"), refuse(desc, VF_ERROR_INVALID_ARGUMENT);
    *out = NULL;
    if (!ctx)
        return snprintf(create_err, sizeof create_err, "vf_dist_create: ctx is NULL"), refuse(desc, VF_ERROR_INVALID_ARGUMENT);
    if (!(desc->timeout_s >= 0) || desc->timeout_s > 1e9)
        return snprintf(create_err, sizeof create_err, "vf_dist_create: timeout_s %g is not 0 (default) or a number of seconds",
                        desc->timeout_s), refuse(desc, VF_ERROR_INVALID_ARGUMENT);
    vf_dist *d = calloc(1, sizeof *d);
    if (!d)
        return snprintf(create_err, sizeof create_err, "vf_dist_create: out of host memory"), refuse(desc, VF_ERROR_OUT_OF_MEMORY);
    d->ctx = ctx;
    d->timeout_s = desc->timeout_s > 0 ? desc->timeout_s : 300.0;
    d->chunk_bytes = desc->chunk_bytes ? desc->chunk_bytes : (size_t)1 << 30;
    if (d->chunk_bytes < 8) d->chunk_bytes = 8;
    d->what = "vf_dist_create";
    vf_status s = desc->local ? vf_dist_local_open(d, desc) : vf_dist_mpi_open(d, desc);
    if (s == VF_OK) {
        d->left_after = malloc(sizeof *d->left_after * (size_t)d->size);
        if (!d->left_after) s = vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "vf_dist_create: out of host memory");
        for (int r = 0; s == VF_OK && r < d->size; r++) d->left_after[r] = UINT64_MAX;
    }
    if (s != VF_OK) {
        snprintf(create_err, sizeof create_err, "%s", d->err);
        vf_dist_destroy(d);
        return s;
    }
    *out = d;
    return VF_OK;
}

int vf_dist_rank(const vf_dist *d) { return d ? d->rank : -1; }
int vf_dist_size(const vf_dist *d) { return d ? d->size : -1; }
vf_context *vf_dist_context(const vf_dist *d) { return d ? d->ctx : NULL; }
const char *vf_dist_error_message(const vf_dist *d) { return d ? d->err : "vf_dist is NULL"; }

void vf_dist_destroy(vf_dist *d)
{
    if (!d) return;
    vf_dist_traced_free(d);
    if (d->local) vf_dist_local_close(d);
    else if (d->mpi) vf_dist_mpi_close(d);
    free(d->left_after);
    free(d->buf);
    free(d);
}
