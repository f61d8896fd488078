/* Building vf_graph IR by hand in tests (fusion, row groups, matmul
 * groups): nodes with their dtype and shape set, as shape inference would. */
#ifndef VF_TEST_GRAPH_BUILD_H
#define VF_TEST_GRAPH_BUILD_H

#include "graph/graph.h"

/* A concrete shape of rank dims. */
vf_shape vt_shape(int rank, const int64_t *d);
/* A node of kind k (asserts it was added). */
int vt_node(vf_graph *g, vf_node_kind k, int n_in, const int *in, vf_dtype dt, vf_shape s);
/* The next explicit parameter. */
int vt_param(vf_graph *g, vf_dtype dt, vf_shape s);
/* An op node (attrs.dtype = dt). */
int vt_op(vf_graph *g, vf_op o, int n_in, const int *in, vf_dtype dt, vf_shape s);

#endif
