/* Constant folding on the CPU backend: the reference kernels give exactly
 * what the CPU backend would give at run time, and within the tested
 * tolerances what Vulkan would. */
#include "backend.h"
#include "graph/passes.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

/* Results larger than this stay computed at run time: a constant is
   stored in the function and uploaded on every call. */
#define VF_FOLD_MAX_ELEMS 4096

typedef struct folder {
    vf_err err;
    vf_backend_t be;
} folder;

static bool foldable(const vf_graph *g, const vf_node *n)
{
    if (n->shape.sym) return false;
    int64_t numel = vf_shape_numel(&n->shape);
    if (numel <= 0 || numel > VF_FOLD_MAX_ELEMS) return false;
    if (n->kind == VF_NODE_RESHAPE) return g->nodes[n->in[0]].kind == VF_NODE_CONST;
    if (n->kind != VF_NODE_OP || vf_op_get(n->op)->kind == VF_KIND_SOURCE) return false;
    for (int j = 0; j < n->n_in; j++) {
        const vf_node *x = &g->nodes[n->in[j]];
        if (!vf_node_is_const(g, n->in[j]) || vf_shape_numel(&x->shape) <= 0) return false;
    }
    return true;
}

static vf_status materialise(folder *f, const vf_node *x, vf_tref *r)
{
    size_t bytes = (size_t)vf_shape_numel(&x->shape) * vf_dtype_size(x->dtype);
    *r = (vf_tref){.dtype = x->dtype, .rank = x->shape.rank};
    memcpy(r->shape, x->shape.dim, sizeof r->shape);
    vf_status s = f->be.iface->alloc(f->be.self, bytes, &r->buf);
    if (s != VF_OK) return s;
    if (x->kind == VF_NODE_CONST) return f->be.iface->upload(f->be.self, r->buf, 0, x->data, bytes);
    vf_exec e = {.op = VF_OP_FILL, .attrs = x->attrs, .out = *r};
    return f->be.iface->exec(f->be.self, &e);
}

/* Evaluates n into a new CONST payload. */
static vf_status eval(folder *f, const vf_graph *g, vf_node *n, void **data, size_t *bytes)
{
    vf_exec e = {.op = n->op, .attrs = n->attrs, .n_in = n->n_in};
    vf_tref out = {.dtype = n->dtype, .rank = n->shape.rank};
    memcpy(out.shape, n->shape.dim, sizeof out.shape);
    *bytes = (size_t)vf_shape_numel(&n->shape) * vf_dtype_size(n->dtype);
    *data = malloc(*bytes);
    vf_status s = *data ? VF_OK : VF_ERROR_OUT_OF_MEMORY;
    for (int j = 0; s == VF_OK && j < n->n_in; j++) s = materialise(f, &g->nodes[n->in[j]], &e.in[j]);
    if (s == VF_OK) s = f->be.iface->alloc(f->be.self, *bytes, &out.buf);
    e.out = out;
    if (s == VF_OK) s = f->be.iface->exec(f->be.self, &e);
    if (s == VF_OK) s = f->be.iface->download(f->be.self, out.buf, 0, *data, *bytes);
    for (int j = 0; j < n->n_in; j++)
        if (e.in[j].buf) f->be.iface->free(f->be.self, e.in[j].buf);
    if (out.buf) f->be.iface->free(f->be.self, out.buf);
    if (s != VF_OK) {
        free(*data);
        *data = NULL;
    }
    return s;
}

int vf_pass_fold(vf_graph *g, vf_err *err)
{
    int folded = 0;
    folder f = {0};
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        for (int k = 0; k < 2; k++)
            if (n->sub[k]) {
                int r = vf_pass_fold(n->sub[k], err);
                if (r < 0) goto fail;
                folded += r;
            }
        if (!foldable(g, n)) continue;
        void *data = NULL;
        size_t bytes = 0;
        if (n->kind == VF_NODE_RESHAPE) {
            const vf_node *x = &g->nodes[n->in[0]];
            bytes = x->bytes;
            data = malloc(bytes);
            if (!data) {
                vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "fold: out of host memory");
                goto fail;
            }
            memcpy(data, x->data, bytes);
        } else {
            if (!f.be.iface && vf_cpu_backend_create(&f.err, &f.be) != VF_OK) {
                vf_err_set(err, f.err.status, "fold: %s", f.err.message);
                goto fail;
            }
            vf_status s = eval(&f, g, n, &data, &bytes);
            if (s != VF_OK) {
                vf_err_set(err, s, "fold: evaluating %s: %s", vf_op_get(n->op)->name, f.err.message);
                goto fail;
            }
        }
        n->kind = VF_NODE_CONST;
        n->n_in = 0;
        n->data = data;
        n->bytes = bytes;
        n->attrs = (vf_attrs){0};
        folded++;
    }
    if (f.be.iface) f.be.iface->destroy(f.be.self);
    return folded;
fail:
    if (f.be.iface) f.be.iface->destroy(f.be.self);
    return -1;
}
