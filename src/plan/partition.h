/* Fusion: partitioning a traced graph into kernels (groups).
 *
 *   vf_fusion_options opt;
 *   vf_fusion_options_default(&opt);            // everything on
 *   vf_partition_t p;
 *   if (vf_partition(g, &opt, &p, &err)) ...;   // status + message
 *   for (int i = 0; i < p.n_groups; i++) {      // a valid execution order
 *       const vf_group *grp = &p.groups[i];
 *       if (grp->kind == VF_GROUP_SINGLE) run node grp->nodes[0] as today;
 *       else the plan hands it to the backend as one vf_plan_fused
 *            (backend.h), its tensors grp->inputs then grp->outputs;
 *   }
 *   vf_partition_free(&p);
 *
 * The partition covers every node of g (not its subgraphs: partition each
 * subgraph of a COND / WHILE separately) exactly once. Nodes that run no
 * kernel (PARAM, CONST, CAPTURE, RESHAPE, PROJ) and the side-effect and
 * control-flow nodes (ASSIGN, PRINT, COND, WHILE) are always one
 * VF_GROUP_SINGLE group each, in their own place, so program order of side
 * effects is kept. Groups appear in an order where every group's external
 * inputs are produced by earlier groups (or are params / consts /
 * captures), and every side-effect node keeps its position relative to all
 * other nodes reading or writing state: no group contains nodes on both
 * sides of a side-effect node.
 *
 * Splats: a FILL read by one node only and not a graph output joins the
 * group of its elementwise reader whatever its shape (a value broadcast
 * to the reader's; graph/passes_fills.c gives every elementwise reader a
 * FILL of its own), so constants made in a body cost no kernel.
 *
 * Values: a value id is a node id (graph.h). A group's `inputs` are the
 * values its members read that are produced outside it, in order of first
 * use, without duplicates; its `outputs` are the member values used by
 * nodes outside the group or listed in g->outputs, in node order. Values
 * that stay inside a group never exist in memory.
 *
 * Aliasing: `may_alias_input` says whether the integrator may give an
 * output the same buffer as an input (in place, exactly the same buffer,
 * offset and shape) when that input is dead after the group. Only
 * elementwise groups whose input has the output's shape allow it; with
 * fusion disabled nothing may alias (the unfused baseline).
 *
 * Not thread-safe per partition; no global state.
 */
#ifndef VF_FUSION_PARTITION_H
#define VF_FUSION_PARTITION_H

#include "backend.h"
#include "graph/graph.h"

#include <stdbool.h>
#include <stdint.h>

/* Most tensors (inputs + outputs) one fused group binds: kernels bind every
   tensor as a storage buffer and the runtime's layouts hold 16, minus room
   for a scratch buffer. */
#define VF_GROUP_MAX_TENSORS 15

typedef enum vf_group_kind {
    VF_GROUP_SINGLE,          /* one node, executed exactly as without fusion */
    VF_GROUP_ELEMENTWISE_DAG, /* elementwise ops (and FILL) of one output shape; inputs broadcast */
    VF_GROUP_ROW_EPILOGUE,    /* a row program over a row shape [..., C]: softmax / log_softmax
                                 along the last axis, sparse_xent, last-axis keepdims sum / mean /
                                 max / min (float), and elementwise ops of the row shape, of the
                                 per-row shape [..., 1] or (after sparse_xent) [...]; one
                                 workgroup per row (codegen_rows.c) */
    VF_GROUP_MATMUL_EPILOGUE, /* one matmul and elementwise consumers of its output shape
                                 (bias add, activation, scale) */
    VF_GROUP_CONV_EPILOGUE,   /* one conv2d and elementwise consumers of its output shape
                                 (bias add over channels, activation) */
    VF_GROUP_KIND_COUNT
} vf_group_kind;

typedef struct vf_group {
    vf_group_kind kind;
    int n_nodes;
    int *nodes;               /* member node ids, ascending (an SSA order of the group) */
    int n_inputs;
    int *inputs;              /* external value ids read by members */
    int n_outputs;
    int *outputs;             /* member values needed outside (or graph outputs) */
    int center;               /* ROW: the first row op or reduction; MATMUL / CONV: the matmul / conv2d;
                                 else -1 */
    bool may_alias_input;     /* see the header comment */
} vf_group;

typedef struct vf_fusion_options {
    bool enabled;             /* false: one SINGLE group per node, no aliasing (VKFUSE_FUSION=0) */
    bool fuse_rows;           /* form VF_GROUP_ROW_EPILOGUE groups */
    bool fuse_matmul;         /* form VF_GROUP_MATMUL_EPILOGUE groups */
    bool fuse_conv;           /* form VF_GROUP_CONV_EPILOGUE groups */
    int max_nodes;            /* most members of one group (0: 64) */
    const bool *view;         /* per node, may be NULL: the plan makes it a view of another value (no
                                 kernel, plan/plan_view.c): a SINGLE group, like a RESHAPE */
} vf_fusion_options;

typedef struct vf_partition {
    int n_groups;
    vf_group *groups;         /* in execution order */
    int *group_of;            /* [g->n]: index in groups of each node */
} vf_partition_t;

/* Defaults: everything codegen_fused.c can generate is enabled (the
   caller turns fusion off for VKFUSE_FUSION=0: planning reads no
   environment). */
void vf_fusion_options_default(vf_fusion_options *opt);

/* Partitions g (see the header comment). opt NULL: defaults. On failure
   (out of memory, invalid graph) returns the status with a message in err
   and leaves *out empty. */
vf_status vf_partition(const vf_graph *g, const vf_fusion_options *opt, vf_partition_t *out, vf_err *err);
void vf_partition_free(vf_partition_t *p);

/* Whether node n is an elementwise op that fusion may put in a DAG group
   (every VF_KIND_ELEMENTWISE op and FILL). */
bool vf_fusible_elementwise(const vf_node *n);

/* Row groups: the contract's row shape rules (backend.h) over graph shapes. */
static inline vf_row_class vf_row_classify_shape(const vf_shape *s, const vf_shape *row)
{
    return vf_row_classify(s->rank, s->dim, row->rank, row->dim);
}
static inline bool vf_row_input_index_shape(const vf_shape *in, const vf_shape *row, vf_row_class where,
                                            uint32_t *row_stride, uint32_t *col_stride)
{
    return vf_row_input_index(in->rank, in->dim, row->rank, row->dim, where, row_stride, col_stride);
}

/* The backend's description of group grp (backend.h vf_fused_group; plan_order.c):
   per member (mem: grp->n_nodes of them), where each input comes from and
   which output it is. execs and tensors are left to the caller. false:
   grp is not a kind the backend fuses. */
bool vf_group_describe(const vf_graph *g, const vf_group *grp, vf_fused_member *mem, vf_fused_group *out);
const char *vf_group_kind_name(vf_group_kind k);
/* Position of value v among the group's members / inputs, or -1. */
int vf_group_member_index(const vf_group *grp, int v);
int vf_group_input_index(const vf_group *grp, int v);
/* "group 3 elementwise_dag nodes [4 5 7] in [1 2] out [7]" into a malloc'd
   string, one line per group (tests, VKFUSE_DUMP); NULL when out of memory. */
char *vf_partition_to_string(const vf_graph *g, const vf_partition_t *p);

#endif
