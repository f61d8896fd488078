/* Work on the host backend for folding and the VKFUSE_CHECK replay
 * (host.h). The CPU backend's reference kernels give exactly what the CPU
 * backend gives at run time, and within the tested tolerances what Vulkan
 * gives. */
#include "plan/host.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

static size_t tref_bytes(const vf_tref *r)
{
    int64_t n = 1;
    for (int i = 0; i < r->rank; i++) n *= r->shape[i];
    return (size_t)n * vf_dtype_size(r->dtype);
}

/* A buffer of the host holding node x's value (a CONST's data, or a FILL
   run into it). */
static vf_status materialise(vf_host *h, const vf_node *x, vf_tref *r)
{
    const vf_backend_iface *be = h->be.iface;
    size_t bytes = (size_t)vf_shape_numel(&x->shape) * vf_dtype_size(x->dtype);
    *r = (vf_tref){.dtype = x->dtype, .rank = x->shape.rank};
    memcpy(r->shape, x->shape.dim, sizeof r->shape);
    vf_status s = be->alloc(h->be.self, bytes, &r->buf);
    if (s != VF_OK) return s;
    if (x->kind == VF_NODE_CONST) return be->upload(h->be.self, r->buf, 0, x->data, bytes);
    vf_exec e = {.op = VF_OP_FILL, .attrs = x->attrs, .out = *r};
    return be->exec(h->be.self, &e);
}

vf_status vf_host_eval_node(vf_host *h, const vf_graph *g, const vf_node *n, void *data, size_t bytes)
{
    const vf_backend_iface *be = h->be.iface;
    vf_err_clear(&h->err);
    vf_exec e = {.op = n->op, .attrs = n->attrs, .n_in = n->n_in};
    vf_tref out = {.dtype = n->dtype, .rank = n->shape.rank};
    memcpy(out.shape, n->shape.dim, sizeof out.shape);
    vf_status s = VF_OK;
    for (int j = 0; s == VF_OK && j < n->n_in; j++) s = materialise(h, &g->nodes[n->in[j]], &e.in[j]);
    if (s == VF_OK) s = be->alloc(h->be.self, bytes, &out.buf);
    e.out = out;
    if (s == VF_OK) s = be->exec(h->be.self, &e);
    if (s == VF_OK) s = be->download(h->be.self, out.buf, 0, data, bytes);
    for (int j = 0; j < n->n_in; j++)
        if (e.in[j].buf) be->free(h->be.self, e.in[j].buf);
    if (out.buf) be->free(h->be.self, out.buf);
    return s;
}

vf_status vf_host_exec(vf_host *h, const vf_exec *ex, const void *const *in, void *out)
{
    const vf_backend_iface *be = h->be.iface;
    vf_err_clear(&h->err);
    vf_exec e = *ex;
    vf_buffer *bufs[4] = {NULL};
    vf_status s = VF_OK;
    for (int j = 0; !s && j < e.n_in; j++) {
        size_t bytes = tref_bytes(&e.in[j]);
        s = be->alloc(h->be.self, bytes ? bytes : 1, &bufs[j]);
        if (!s) s = be->upload(h->be.self, bufs[j], 0, in[j], bytes);
        e.in[j].buf = bufs[j], e.in[j].offset = 0;
    }
    size_t out_bytes = tref_bytes(&e.out);
    if (!s) s = be->alloc(h->be.self, out_bytes ? out_bytes : 1, &bufs[3]);
    e.out.buf = bufs[3], e.out.offset = 0;
    if (!s) s = be->exec(h->be.self, &e);
    if (!s) s = be->download(h->be.self, bufs[3], 0, out, out_bytes);
    for (int j = 0; j < 4; j++)
        if (bufs[j]) be->free(h->be.self, bufs[j]);
    return s;
}

static vf_status host_eval(void *self, const vf_graph *g, const vf_node *n, void *data, size_t bytes, vf_err *err)
{
    vf_host *h = self;
    vf_status s = vf_host_eval_node(h, g, n, data, bytes);
    if (s != VF_OK) vf_err_set(err, s, "%s", h->err.message);
    return s;
}

vf_evaluator vf_host_evaluator(vf_host *h) { return (vf_evaluator){.eval = host_eval, .self = h}; }
