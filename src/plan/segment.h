/* Splitting a plan at its HOST nodes (vf_host_map): which backend plan
 * (segment) runs each node of the graph, and when each host callback
 * runs between them. Planning knows only "a host node": a callback that
 * needs its input's values on the host and gives its output's, at a cost
 * (a wait for the device and the callback's own time).
 *
 * The model (docs/DISTRIBUTED.md "Traced steps"): nodes are put in
 * phases; phase p runs before the host nodes of phase p and the nodes
 * reading their results are in later phases. A node goes to the earliest
 * phase its inputs allow, so work that does not depend on a host node
 * runs before it whatever its place in the program; a host node goes to
 * the earliest phase its input allows (its latency starts as early as
 * possible). Effects keep their order: an assign (or an effectful COND or
 * kernel) is not moved before any node written before it nor before an
 * earlier host node, nodes written after an assign stay after it, and
 * host nodes keep their program order.
 *
 * A phase followed by host nodes (and holding no effect) is two segments:
 * first the nodes the host nodes depend on, then the rest, submitted
 * before the callbacks run, so the device works on them while the host
 * does (the callback waits only for the buffer it reads). */
#ifndef VF_PLAN_SEGMENT_H
#define VF_PLAN_SEGMENT_H

#include "plan/plan.h"

#define VF_SEG_ANY (-1)   /* a leaf (param, capture, constant, a view of one): every segment reads it in place */
#define VF_SEG_HOST (-2)  /* a HOST node, or a reshape of one (a view of its slot): in no segment */

typedef struct vf_seg_host {
    int node;             /* the HOST node */
    int after;            /* runs once segments 0..after are submitted (-1: before any) */
} vf_seg_host;

typedef struct vf_segs {
    int n_segs;
    int *seg;             /* per top-level node: its segment, VF_SEG_ANY or VF_SEG_HOST */
    int n_hosts;
    vf_seg_host *hosts;   /* in run order */
} vf_segs;

/* Segments of g (which has HOST nodes); params and caps say which leaves
   are variables (a view of a variable is a copy: not a leaf). false: out
   of host memory. */
bool vf_segs_plan(const vf_graph *g, const vf_plan_value *params, const vf_plan_value *caps, vf_segs *out);
void vf_segs_free(vf_segs *s);

/* Whether g has a HOST node at its top level. */
bool vf_graph_has_host(const vf_graph *g);

#endif
