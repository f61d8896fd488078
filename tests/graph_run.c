/* Runs a hand-built graph on the CPU backend node by node and on the Vulkan
 * runtime partitioned into fused kernels, then compares (graph_run.h). */
#include "graph_run.h"

#include "testutil.h"
#include "util/dtype.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t vt_value_bytes(const vf_graph *g, int v)
{
    size_t n = (size_t)vf_shape_numel(&g->nodes[v].shape) * vf_dtype_size(g->nodes[v].dtype);
    return (n + 15) & ~(size_t)15;
}

vf_exec vt_exec_of(const vf_graph *g, int v, vf_buffer **bufs)
{
    const vf_node *nd = &g->nodes[v];
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = nd->op;
    e.attrs = nd->attrs;
    e.n_in = nd->n_in;
    for (int k = 0; k <= nd->n_in; k++) {
        int u = k < nd->n_in ? nd->in[k] : v;
        vf_tref *t = k < nd->n_in ? &e.in[k] : &e.out;
        t->buf = bufs ? bufs[u] : NULL;
        t->dtype = g->nodes[u].dtype;
        t->rank = g->nodes[u].shape.rank;
        for (int d = 0; d < t->rank; d++) t->shape[d] = g->nodes[u].shape.dim[d];
    }
    return e;
}

/* One fused group on the device: its generated kernel, dispatched with the
   group's values bound. Returns whether a dispatch was made. */
static bool run_group(rt_handle *h, const vf_graph *g, const vf_group *grp, const vf_shape *shapes,
                      vf_buffer **gb, const vt_graph_run *r)
{
    vf_gen_kernel k;
    vf_err err = {0};
    vf_status st = vt_codegen_group(g, grp, shapes, r->caps ? r->caps : &h->rt->dev.caps, &k, &err);
    if (st) fprintf(stderr, "%s: %s\n", r->what, err.message);
    assert_int_equal(st, VF_OK);
    if (r->one_step) assert_int_equal(k.n_steps, 1);
    assert_true(k.n_steps <= 1);
    if (k.n_steps == 0) return false; /* dead values */
    const vf_dispatch *d = &k.step[0];
    const vf_vk_pipeline *pipe = NULL;
    assert_int_equal(vf_vk_runtime_dispatch_pipeline(h->rt, d, &pipe), VF_OK);
    vf_vk_bind binds[VF_KERNEL_MAX_BINDINGS];
    memset(binds, 0, sizeof binds);
    for (int j = 0; j < d->n_bindings; j++) {
        int t = d->binding[j] - VF_BIND_GROUP;
        bool in = t < grp->n_inputs;
        binds[j].buf = gb[in ? grp->inputs[t] : grp->outputs[t - grp->n_inputs]];
        binds[j].access = in ? VF_VK_READ : VF_VK_WRITE;
    }
    vf_vk_dispatch_info di = {.pipe = pipe, .n_bindings = d->n_bindings, .bindings = binds, .push = d->push,
                              .push_size = d->push_size, .groups = {d->groups[0], d->groups[1], d->groups[2]},
                              .name = d->name};
    assert_int_equal(vf_vk_sched_dispatch(&h->rt->sched, &di), VF_OK);
    vf_kernel_free(&k);
    return true;
}

static void compare_output(rt_handle *h, vf_backend_t *cpu, const vf_graph *g, int o, vf_buffer *cb, vf_buffer *gb,
                           const vt_graph_run *r)
{
    int v = g->outputs[o];
    size_t nb = vt_value_bytes(g, v);
    uint8_t *want = malloc(nb), *got = malloc(nb);
    assert_true(want && got);
    assert_int_equal(cpu->iface->download(cpu->self, cb, 0, want, nb), VF_OK);
    assert_int_equal(h->be.iface->download(h->be.self, gb, 0, got, nb), VF_OK);
    int64_t nel = vf_shape_numel(&g->nodes[v].shape);
    for (int64_t i = 0; i < nel; i++) {
        double w = vf_load_f64(want, g->nodes[v].dtype, i), x = vf_load_f64(got, g->nodes[v].dtype, i);
        bool ok = (isnan(w) && isnan(x)) || w == x || (r->close && r->close(g, o, i, w, x, r->user));
        if (!ok) {
            char *txt = vf_graph_to_string(g, r->what);
            fprintf(stderr, "%s: output %d element %lld: cpu %.9g vulkan %.9g\n%s", r->what, o, (long long)i, w, x,
                    txt ? txt : "");
            free(txt);
        }
        assert_true(ok);
    }
    free(want);
    free(got);
}

int vt_run_partitioned(rt_handle *h, vf_backend_t *cpu, const vf_graph *g, const vt_graph_run *r)
{
    int n = g->n, fused = 0;
    vf_buffer **cb = calloc((size_t)n, sizeof *cb), **gb = calloc((size_t)n, sizeof *gb);
    vf_shape *shapes = malloc(sizeof *shapes * (size_t)n);
    assert_true(cb && gb && shapes);
    for (int v = 0; v < n; v++) {
        size_t nb = vt_value_bytes(g, v);
        shapes[v] = g->nodes[v].shape;
        assert_int_equal(cpu->iface->alloc(cpu->self, nb, &cb[v]), VF_OK);
        assert_int_equal(h->be.iface->alloc(h->be.self, nb, &gb[v]), VF_OK);
        if (g->nodes[v].kind != VF_NODE_PARAM) continue;
        uint8_t *host = calloc(1, nb);
        assert_non_null(host);
        r->fill(g, v, host, r->user);
        assert_int_equal(cpu->iface->upload(cpu->self, cb[v], 0, host, nb), VF_OK);
        assert_int_equal(h->be.iface->upload(h->be.self, gb[v], 0, host, nb), VF_OK);
        free(host);
    }
    for (int v = 0; v < n; v++)
        if (g->nodes[v].kind == VF_NODE_OP) {
            vf_exec e = vt_exec_of(g, v, cb);
            assert_int_equal(cpu->iface->exec(cpu->self, &e), VF_OK);
        }
    vf_partition_t p;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    for (int i = 0; i < p.n_groups; i++) {
        const vf_group *grp = &p.groups[i];
        if (grp->kind != VF_GROUP_SINGLE) {
            fused++;
            run_group(h, g, grp, shapes, gb, r);
        } else if (g->nodes[grp->nodes[0]].kind == VF_NODE_OP) {
            vf_exec e = vt_exec_of(g, grp->nodes[0], gb);
            assert_int_equal(h->be.iface->exec(h->be.self, &e), VF_OK);
        }
    }
    for (int o = 0; o < g->n_outputs; o++) compare_output(h, cpu, g, o, cb[g->outputs[o]], gb[g->outputs[o]], r);
    for (int v = 0; v < n; v++) {
        cpu->iface->free(cpu->self, cb[v]);
        h->be.iface->free(h->be.self, gb[v]);
    }
    vf_partition_free(&p);
    free(shapes);
    free(cb);
    free(gb);
    return fused;
}
