/* Test graphs by hand (graph_build.h). */
#include "graph_build.h"
#include "testutil.h"

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
