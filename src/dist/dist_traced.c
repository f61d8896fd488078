/* vf_dist_allreduce inside a traced function: a graph node, not a host
 * round trip at trace time. Per element class the call records
 *
 *   flatten + (f16: cast to f32) each tensor -> concat: the packed buffer,
 *   made by a kernel on the device
 *   vf_host_map(packed): at every call the core waits for the kernels before
 *   it, hands the packed values to reduce() on the host, which runs the
 *   signature check and ONE MPI allreduce over them, and uploads the result
 *   split -> reshape (+ cast back): the outputs
 *
 * so a step of gradients of one dtype costs one MPI_Allreduce. Each part
 * starts at a multiple of PACK_ALIGN bytes, so on Vulkan the plan makes the
 * concat and the split views (no copies: the kernels making the gradients
 * write them into the packed buffer, the update reads them from it). The node
 * state lives in the vf_dist (a function using it must be destroyed before
 * the vf_dist). */
#include "dist/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Where the packed buffer's parts start: a multiple of the largest
   storage-buffer offset alignment Vulkan allows, so a traced plan can
   write each part in place and read each result where it lands. */
#define PACK_ALIGN 256

struct vf_dist_node {
    vf_dist *d;
    vf_dist_class cls;
    vf_dist_op op;
    uint64_t sig;       /* the call's signature (every tensor's dtype and shape) */
    char desc[256];     /* this rank's tensors, for a mismatch message */
    struct vf_dist_node *next;
};

static vf_dist_class class_of(vf_dtype t)
{
    return t == VF_I32 ? VF_DIST_I32 : t == VF_U32 ? VF_DIST_U32 : t == VF_BOOL ? VF_DIST_BOOL : VF_DIST_F32;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double vf_dist_traced_seconds(const vf_dist *d) { return d ? d->traced_s : -1; }

/* The vf_host_fn: one collective call, at every call of the function. */
static vf_status reduce(void *user, vf_dtype dt, int64_t numel, void *data, char *msg, size_t len)
{
    struct vf_dist_node *k = user;
    vf_dist *d = k->d;
    double t0 = now_s();
    (void)dt;
    vf_status s = vf_dist_begin(d, "vf_dist_allreduce (traced)");
    uint64_t sig = k->sig ^ ((uint64_t)numel * 0x9e3779b97f4a7c15ull) ^ (uint64_t)k->cls;
    if (s == VF_OK) s = vf_dist_check(d, sig, k->desc);
    if (s == VF_OK)
        s = d->local ? vf_dist_local_sum(d, data, (size_t)numel, k->cls) : vf_dist_mpi_sum(d, data, (size_t)numel, k->cls);
    if (s == VF_OK && k->op == VF_DIST_MEAN) {
        if (k->cls == VF_DIST_F32)
            for (int64_t i = 0; i < numel; i++) ((float *)data)[i] /= (float)d->size;
        else if (k->cls == VF_DIST_I32)
            for (int64_t i = 0; i < numel; i++) ((int32_t *)data)[i] /= d->size;
        else if (k->cls == VF_DIST_U32)
            for (int64_t i = 0; i < numel; i++) ((uint32_t *)data)[i] /= (uint32_t)d->size;
    }
    if (s != VF_OK) snprintf(msg, len, "%s", d->err);
    d->traced_s += now_s() - t0;
    return s;
}

vf_status vf_dist_traced_allreduce(vf_dist *d, int n, vf_tensor *const *in, vf_dist_op op, vf_tensor **out,
                                   const char *desc, uint64_t sig)
{
    vf_context *ctx = d->ctx;
    vf_tensor **res = calloc((size_t)n + 1, sizeof *res), **parts = calloc((size_t)n + 1, sizeof *parts);
    int64_t *sizes = calloc((size_t)n + 1, sizeof *sizes);
    int *idx = calloc((size_t)n + 1, sizeof *idx);
    vf_status s = res && parts && sizes && idx ? VF_OK : VF_ERROR_OUT_OF_MEMORY;
    /* Per class one packed buffer and one host node. Its split back needs
       every size but one fixed: a tensor with a symbolic (input_signature
       -1) dim takes the -1 of its class's split; a second one in the class
       goes to a pass of its own (one more collective call per step). */
    bool *done = calloc((size_t)n + 1, sizeof *done);
    if (!done) s = VF_ERROR_OUT_OF_MEMORY;
    for (int c = 0; s == VF_OK && c < VF_DIST_NCLASS;) {
        int k = 0, sym = -1;
        vf_dist_class cls = (vf_dist_class)c;
        bool more = false;
        for (int i = 0; i < n && s == VF_OK; i++) {
            if (done[i] || class_of(vf_tensor_dtype(in[i])) != (vf_dist_class)c) continue;
            uint32_t symd = vf_tensor_symbolic_dims(in[i]);
            if (symd & (symd - 1)) { /* its shape back would need two inferred dims */
                s = VF_ERROR_UNSUPPORTED;
                vf_dist_fail(d, s, false, "vf_dist_allreduce (tracing): tensor %d has %d symbolic (input_signature -1) "
                             "dims; a traced allreduce takes tensors with at most one (reshape it to one varying dim "
                             "first)", i, __builtin_popcount(symd));
                break;
            }
            if (symd) {
                if (sym >= 0) {
                    more = true;
                    continue;
                }
                sym = k;
            }
            done[i] = true;
            if (vf_tensor_numel(in[i]) == 0) { /* nothing to reduce: an empty result */
                int64_t sh[VF_MAX_RANK];
                for (int a = 0; a < vf_tensor_rank(in[i]); a++) sh[a] = vf_tensor_dim(in[i], a);
                res[i] = vf_fill(ctx, vf_tensor_dtype(in[i]), vf_tensor_rank(in[i]), sh, 0);
                continue;
            }
            vf_tensor *flat = vf_reshape(ctx, in[i], 1, (int64_t[]){-1});
            if (vf_tensor_dtype(in[i]) == VF_F16) flat = vf_cast(ctx, flat, VF_F32);
            parts[k] = flat, sizes[k] = vf_tensor_numel(in[i]), idx[k++] = i;
        }
        if (!more) c++; // else: this class again, for what this pass left
        if (k == 0) continue;
        if (sym >= 0) sizes[sym] = -1; /* what varies */
        struct vf_dist_node *node = calloc(1, sizeof *node);
        if (!node) {
            s = VF_ERROR_OUT_OF_MEMORY;
            break;
        }
        *node = (struct vf_dist_node){.d = d, .cls = cls, .op = op, .sig = sig, .next = d->nodes};
        snprintf(node->desc, sizeof node->desc, "%s", desc);
        d->nodes = node;
        /* The packed order: every part at a multiple of PACK_ALIGN bytes
           (zero padding after a part that ends off it), the symbolic one
           last; then the plan writes each part in place and reads each
           result where it lands (no copies; docs/RUNTIME.md "Views"). */
        int m = 0, *at = calloc((size_t)(2 * k) + 1, sizeof *at);
        vf_tensor **seq = calloc((size_t)(2 * k) + 1, sizeof *seq), **pieces = calloc((size_t)(2 * k) + 1, sizeof *pieces);
        int64_t *seqsz = calloc((size_t)(2 * k) + 1, sizeof *seqsz), per = PACK_ALIGN / (cls == VF_DIST_BOOL ? 1 : 4);
        if (!at || !seq || !pieces || !seqsz) {
            free(at), free(seq), free(pieces), free(seqsz);
            s = VF_ERROR_OUT_OF_MEMORY;
            break;
        }
        int lastu = -1; /* the last part off the alignment: no padding after it when it ends the buffer */
        for (int j = 0; j < k; j++)
            if (j != sym && sizes[j] % per) lastu = j;
        for (int pass = 0; pass < 3; pass++) /* aligned sizes, the others, the symbolic one */
            for (int j = 0; j < k; j++) {
                bool fits = sizes[j] % per == 0;
                if (j == sym ? pass != 2 : pass != (fits ? 0 : 1)) continue;
                at[j] = m, seq[m] = parts[j], seqsz[m++] = sizes[j];
                if (pass == 1 && (j != lastu || sym >= 0)) {
                    int64_t pad = per - sizes[j] % per;
                    seq[m] = vf_fill(ctx, vf_tensor_dtype(parts[j]), 1, &pad, 0), seqsz[m++] = pad;
                }
            }
        /* a part and its padding as one unit: every unit but the last then
           spans whole PACK_ALIGN blocks, so vf_concat's tree of pairs puts
           each of its inputs at an aligned offset in its result */
        int u = 0;
        for (int j = 0; j < m; j++)
            if (j + 1 < m && seqsz[j] % per && seqsz[j] > 0) {
                seq[u++] = vf_concat(ctx, 2, (vf_tensor *[]){seq[j], seq[j + 1]}, 0);
                j++;
            } else {
                seq[u++] = seq[j];
            }
        vf_tensor *packed = u == 1 ? seq[0] : vf_concat(ctx, u, seq, 0);
        vf_tensor *red = vf_host_map(ctx, packed, reduce, node, "vf_dist_allreduce");
        if (m == 1) pieces[0] = red;
        else if (red && vf_split(ctx, red, m, seqsz, 0, pieces) != VF_OK) red = NULL;
        for (int j = 0; j < k; j++) {
            vf_tensor *x = in[idx[j]];
            int64_t sh[VF_MAX_RANK];
            uint32_t symd = vf_tensor_symbolic_dims(x);
            for (int a = 0; a < vf_tensor_rank(x); a++) sh[a] = symd >> a & 1 ? -1 : vf_tensor_dim(x, a); /* at most one: below */
            vf_tensor *y = red ? vf_reshape(ctx, pieces[at[j]], vf_tensor_rank(x), sh) : NULL;
            if (vf_tensor_dtype(x) == VF_F16) y = vf_cast(ctx, y, VF_F16);
            res[idx[j]] = y;
        }
        free(at), free(seq), free(pieces), free(seqsz);
    }
    for (int i = 0; s == VF_OK && i < n; i++)
        if (!res[i]) s = vf_status_get(ctx) ? vf_status_get(ctx) : VF_ERROR_TRACE;
    if (s == VF_OK)
        for (int i = 0; i < n; i++) out[i] = res[i];
    else if (s != VF_ERROR_UNSUPPORTED)
        vf_dist_fail(d, s, false, "vf_dist_allreduce (tracing): %s", s == VF_ERROR_OUT_OF_MEMORY ? "out of host memory"
                                                                                                 : vf_error_message(ctx));
    free(res), free(parts), free(sizes), free(idx), free(done);
    return s;
}

void vf_dist_traced_free(vf_dist *d)
{
    while (d->nodes) {
        struct vf_dist_node *k = d->nodes;
        d->nodes = k->next;
        free(k);
    }
}
