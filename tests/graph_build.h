/* Building vf_graph IR by hand in tests (fusion, row groups, matmul
 * groups): nodes with their dtype and shape set, as shape inference would. */
#ifndef VF_TEST_GRAPH_BUILD_H
#define VF_TEST_GRAPH_BUILD_H

#include "graph/graph.h"
#include "plan/partition.h"
#include "vulkan/codegen/codegen_fused.h"

/* A concrete shape of rank dims. */
vf_shape vt_shape(int rank, const int64_t *d);
/* A node of kind k (asserts it was added). */
int vt_node(vf_graph *g, vf_node_kind k, int n_in, const int *in, vf_dtype dt, vf_shape s);
/* The next explicit parameter. */
int vt_param(vf_graph *g, vf_dtype dt, vf_shape s);
/* An op node (attrs.dtype = dt). */
int vt_op(vf_graph *g, vf_op o, int n_in, const int *in, vf_dtype dt, vf_shape s);

/* The kernel of fused group grp of g at these shapes (per value): the
   group described as the plan describes it (vf_group_describe), its execs
   built from the nodes, then vf_codegen_group. */
vf_status vt_codegen_group(const vf_graph *g, const vf_group *grp, const vf_shape *shapes, const vf_device_caps *caps,
                           vf_gen_kernel *k, vf_err *err);

#endif
