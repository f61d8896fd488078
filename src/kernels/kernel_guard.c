/* A user kernel's call on the backend (vf_ukernel_launch, frontend.h),
 * eagerly (kernels.c) and node by node (run.c), with the bounds check of
 * desc.check_bounds and VKFUSE_CHECK: each output is bound as a buffer of
 * its own with a guard tail of GUARD_BYTES after its elements, filled with
 * a canary, while the push constants still give the output's element
 * count. After the kernel the elements are copied into the output and the
 * tail is read back: a byte that changed means the kernel wrote past the
 * end of that output, and the call fails naming the kernel, the output
 * and the first element written (docs/KERNELS.md). A stray write within
 * the tail hits nothing else; the check costs a buffer per output, an
 * upload, a copy and a wait per call, so it is a debugging aid. */
#include "api/api.h"
#include "kernels/kernels.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 1024u   /* a multiple of every element size */
#define CANARY 0xa5u

static int64_t numel_of(const vf_tref *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

static vf_status run(vf_context *ctx, const vf_ukernel_exec *x, const char *who)
{
    vf_status s = ctx->be.iface->ukernel ? ctx->be.iface->ukernel(ctx->be.self, x) : VF_ERROR_UNSUPPORTED;
    return s ? vf_backend_failed(ctx, s, "%s: kernel '%s' (%s backend)", who, x->k->name, ctx->be.iface->name) : VF_OK;
}

/* The guarded call; x's outputs get the results. */
static vf_status run_guarded(vf_context *ctx, const vf_ukernel_exec *x, const char *who)
{
    const vf_ukernel *k = x->k;
    const vf_backend_iface *be = ctx->be.iface;
    vf_buffer *buf[VF_KERNEL_MAX_OUTPUTS] = {0};
    vf_tref g[VF_KERNEL_MAX_OUTPUTS];
    size_t bytes[VF_KERNEL_MAX_OUTPUTS], most = 0;
    for (int j = 0; j < k->n_out; j++) {
        bytes[j] = (size_t)numel_of(&x->out[j]) * vf_dtype_size(x->out[j].dtype);
        if (bytes[j] > most) most = bytes[j];
    }
    uint8_t *host = vf_malloc(most + GUARD_BYTES), *tail = vf_malloc(GUARD_BYTES);
    vf_status s = host && tail ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory", who);
    if (host) memset(host, 0, most), memset(host + most, CANARY, GUARD_BYTES);
    /* each output: zeros (what a call starts from), then the canary */
    for (int j = 0; !s && j < k->n_out; j++) {
        s = be->alloc(ctx->be.self, bytes[j] + GUARD_BYTES, &buf[j]);
        if (!s) s = be->upload(ctx->be.self, buf[j], 0, host + most - bytes[j], bytes[j] + GUARD_BYTES);
        if (s) s = vf_backend_failed(ctx, s, "%s: kernel '%s': the bounds check's buffers", who, k->name);
        int64_t n = (int64_t)((bytes[j] + GUARD_BYTES) / vf_dtype_size(x->out[j].dtype));
        g[j] = (vf_tref){.buf = buf[j], .dtype = x->out[j].dtype, .rank = 1, .shape = {n}};
    }
    if (!s) {
        vf_ukernel kc = *k;   /* zeroed above: the backend must not zero the tails too */
        kc.uninit = true;
        vf_ukernel_exec gx = *x;
        gx.k = &kc;
        gx.out = g;
        s = run(ctx, &gx, who);
    }
    for (int j = 0; !s && j < k->n_out; j++) { /* the elements into the output */
        vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = x->out[j], .out = x->out[j]};
        e.in[0].buf = buf[j];
        e.in[0].offset = 0;
        s = be->exec(ctx->be.self, &e);
        if (s) s = vf_backend_failed(ctx, s, "%s: kernel '%s': copying output %d", who, k->name, j);
    }
    for (int j = 0; !s && j < k->n_out; j++) {
        s = be->download(ctx->be.self, buf[j], bytes[j], tail, GUARD_BYTES);
        if (s) {
            s = vf_backend_failed(ctx, s, "%s: kernel '%s': reading the bounds check's guard", who, k->name);
            break;
        }
        size_t at = 0;
        while (at < GUARD_BYTES && tail[at] == CANARY) at++;
        if (at < GUARD_BYTES) {
            size_t es = vf_dtype_size(x->out[j].dtype);
            int64_t n = numel_of(&x->out[j]);
            s = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s' wrote past the end of output %d (%lld "
                        "elements): element %lld was written; compare each index with the element count of the "
                        "push constants (desc.check_bounds)", who, k->name, j, (long long)n,
                        (long long)(n + (int64_t)(at / es)));
        }
    }
    for (int j = 0; j < k->n_out; j++)
        if (buf[j]) be->free(ctx->be.self, buf[j]);
    free(host);
    free(tail);
    return s;
}

vf_status vf_ukernel_launch(vf_context *ctx, const vf_ukernel_exec *x, const char *who)
{
    return x->k->check_bounds || ctx->opt.check ? run_guarded(ctx, x, who) : run(ctx, x, who);
}
