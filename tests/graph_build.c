/* Test graphs by hand (graph_build.h). */
#include "graph_build.h"
#include "testutil.h"

#include <stdlib.h>

vf_shape vt_shape(int rank, const int64_t *d)
{
    vf_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++) s.dim[i] = d[i];
    return s;
}

int vt_node(vf_graph *g, vf_node_kind k, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = vf_graph_add(g, k, n_in, in);
    assert_true(id >= 0);
    g->nodes[id].dtype = dt;
    g->nodes[id].shape = s;
    return id;
}

int vt_param(vf_graph *g, vf_dtype dt, vf_shape s)
{
    int id = vt_node(g, VF_NODE_PARAM, 0, NULL, dt, s);
    g->nodes[id].index = g->n_params++;
    g->n_explicit = g->n_params;
    return id;
}

int vt_op(vf_graph *g, vf_op o, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = vt_node(g, VF_NODE_OP, n_in, in, dt, s);
    g->nodes[id].op = o;
    g->nodes[id].attrs.dtype = dt;
    return id;
}

static vf_tref tref_of(const vf_graph *g, int v, const vf_shape *shapes)
{
    vf_tref r = {.dtype = g->nodes[v].dtype, .rank = shapes[v].rank};
    for (int d = 0; d < r.rank; d++) r.shape[d] = shapes[v].dim[d];
    return r;
}

vf_status vt_codegen_group(const vf_graph *g, const vf_group *grp, const vf_shape *shapes, const vf_device_caps *caps,
                           vf_gen_kernel *k, vf_err *err)
{
    int n_t = grp->n_inputs + grp->n_outputs;
    vf_fused_member *mem = calloc((size_t)grp->n_nodes + 1, sizeof *mem);
    vf_exec *ex = calloc((size_t)grp->n_nodes + 1, sizeof *ex);
    vf_tref *tens = calloc((size_t)n_t + 1, sizeof *tens);
    assert_true(mem && ex && tens);
    vf_fused_group fg;
    vf_status st;
    if (!vf_group_describe(g, grp, mem, &fg)) {
        st = vf_err_set(err, VF_ERROR_UNSUPPORTED, "group kind %s is not fused", vf_group_kind_name(grp->kind));
    } else {
        for (int m = 0; m < grp->n_nodes; m++) {
            const vf_node *nd = &g->nodes[grp->nodes[m]];
            ex[m] = (vf_exec){.op = nd->op, .attrs = nd->attrs, .n_in = nd->n_in,
                              .out = tref_of(g, grp->nodes[m], shapes)};
            for (int j = 0; j < nd->n_in && j < 3; j++) ex[m].in[j] = tref_of(g, nd->in[j], shapes);
        }
        for (int t = 0; t < n_t; t++)
            tens[t] = tref_of(g, t < grp->n_inputs ? grp->inputs[t] : grp->outputs[t - grp->n_inputs], shapes);
        fg.execs = ex;
        fg.tensors = tens;
        st = vf_codegen_group(&fg, caps, k, err);
    }
    free(mem);
    free(ex);
    free(tens);
    return st;
}
