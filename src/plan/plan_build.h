/* Internal to the plan builder (plan.c builds, plan_order.c orders):
 * the state of a plan being built. Never installed. */
#ifndef VF_PLAN_PLAN_BUILD_H
#define VF_PLAN_PLAN_BUILD_H

#include "plan/plan.h"
#include "plan/node_exec.h"
#include "plan/partition.h"
#include "plan/check.h"
#include "plan/segment.h"
#include "util/dtype.h"

#include <string.h>

/* Offsets of arena values, and of views (plan_view.c): the largest
   minStorageBufferOffsetAlignment Vulkan allows, so a plan holds on any
   device. */
#define VF_PB_ALIGN 256

typedef struct pval {
    vf_tref ref;
    vf_plan_loc loc;
    int inter;             /* intermediate id, -1: none */
    bool var;
    bool absent;           /* a node of another segment this one does not import */
} pval;

typedef struct inter {
    vf_dtype dt;
    vf_shape shape;
    size_t bytes;
    int first, last, slot; /* slot: output slot, -1: arena */
    bool internal;         /* inside a fused group: never in memory when fused */
    /* A view (plan_view.c): the bytes of intermediate `parent` from byte
       `at` on, no memory of its own (a concat's input written in place,
       a contiguous slice). -1: memory of its own (or a slot). */
    int parent;
    size_t at;
    bool viewed;           /* some intermediate is a view of it */
    bool fixed;            /* assigned in place (plan_assign.c): it lives in fixed_ref, a variable's buffer */
    vf_tref fixed_ref;
} inter;

/* A user kernel's call resolved at the plan's sizes: what its exec's ux
   points at, owned by the plan (the backend and VKFUSE_CHECK's replay
   read it while the plan lives). */
typedef struct plan_ucall {
    vf_ukernel_exec x;
    vf_tensor_spec in[VF_KERNEL_MAX_INPUTS], out[VF_KERNEL_MAX_OUTPUTS];
    vf_kernel_shapes shapes;
    void *params;
} plan_ucall;

/* One segment of a plan split at HOST nodes (plan_split.c): the nodes
   it runs, the values it reads from other segments (bound after the
   graph's params, as params n_params + k) and those it hands on (its
   outputs, in place of the graph's). */
typedef struct vf_pb_seg {
    const int *node_seg;   /* per top-level node: segment id, VF_SEG_ANY, VF_SEG_HOST (plan/segment.h) */
    int s;                 /* this one */
    const int *import_of;  /* per top-level node: its import index here, -1: none */
    const vf_plan_value *imports; /* n_imports: dtype and shape (buf ignored) */
    int n_imports;
    const int *outs;       /* n_outs node ids */
    int n_outs;
} vf_pb_seg;

/* A plan split at HOST nodes (plan_split.c): the segments' plans run in
   order, the host steps between them. */
typedef struct vf_fsplit_host {
    const vf_node *node;
    int after;             /* runs once segments 0..after are submitted */
    int in_slot, out_slot; /* the plan's slots (out_slot == in_slot: in place) */
    vf_shape shape;        /* the value's (its view of in_slot) */
} vf_fsplit_host;

typedef struct vf_fsplit {
    int n_segs;
    vf_fplan **segs;
    int *slot0;            /* per segment: its first slot among the plan's */
    int *n_imp;            /* per segment: its imports ... */
    int **imp_slot;        /* ... the plan slot each reads */
    vf_shape **imp_view;   /* ... and its shape */
    int n_hosts;
    vf_fsplit_host *hosts;
} vf_fsplit;

struct vf_fplan {
    int n_params;
    vf_shape *pshape;      /* per param: the sizes the plan is for */
    vf_plan *plan;
    int n_slots;           /* output buffers made per call */
    vf_dtype *slot_dt;
    vf_shape *slot_shape;
    int n_outs;
    int *out_slot;         /* per graph output */
    vf_shape *out_view;    /* per graph output: its shape (a view of the slot) */
    vf_fplan_stats st;
    vf_fcheck *check;      /* VKFUSE_CHECK: every kernel against the CPU backend */
    plan_ucall **ucalls;   /* its user kernels' calls (their execs point at them) */
    int n_ucalls;
    vf_fsplit *split;      /* split at HOST nodes: the segments (plan NULL) */
};

/* Builds one plan of g (seg NULL: all of it; else that segment). */
vf_status vf_pb_build(const vf_plan_env *env, const vf_graph *g, const vf_plan_value *params, const vf_pb_seg *seg,
                      vf_fplan **out);
/* Builds the plan of g, which has HOST nodes, split at them (*out NULL
   and VF_OK: not plannable). */
vf_status vf_pb_build_split(const vf_plan_env *env, const vf_graph *g, const vf_plan_value *params, vf_fplan **out);
vf_status vf_pb_run_split(const vf_plan_env *env, vf_fplan *fp, const vf_plan_value *params, const vf_tref *slots);
void vf_pb_split_free(const vf_backend_t *be, vf_fsplit *sp);

/* A branch of a COND at the top level as walked into the plan: its
   graph, each of its nodes' execs and values (plan_order.c fuses the
   branch's groups as it fuses the top level's). The branch's node execs
   are [x0, x1) in build order; the copies of its results into the COND's
   outputs follow them. */
typedef struct vf_pb_branch {
    const vf_graph *g;
    int cond;              /* its COND node (top level) */
    int x0, x1;
    int *node_ex, *node_nex; /* per node of g, as builder's */
    pval **tuple;          /* per node of g: a user kernel's outputs */
    pval *v;               /* per node of g: its value */
} vf_pb_branch;

typedef struct builder {
    const vf_plan_env *env;
    const vf_pb_seg *seg;  /* building one segment; NULL: the whole graph */
    vf_exec *ex;
    vf_plan_loc (*loc)[4];
    int (*ref_inter)[4];
    int n_ex, cap_ex;
    inter *it;
    int n_it, cap_it;
    int *node_ex;          /* per top-level node: its first exec, -1: none */
    int *node_nex;         /* per top-level node: how many execs (a COND: its branches) */
    pval **tuple;          /* per top-level COND: its outputs */
    vf_plan_guard *guard;  /* per exec */
    int *ex_node;          /* per exec: its top-level node */
    int cur_node;          /* given to the execs being added */
    vf_plan_guard cur;     /* given to the execs being added */
    pval *preds;           /* of the CONDs */
    int n_preds, cap_preds;
    int *pred_node;        /* per predicate: its COND node */
    int cap_pred_node;
    int depth;             /* inside a COND branch: > 0 */
    vf_pb_branch *br;      /* the branches of the top-level CONDs, in walk order */
    int n_br, cap_br;
    int cur_br;            /* depth > 0: the branch being walked */
    bool *view;            /* per top-level node: made a view, no kernel of its own (plan_view.c) */
    bool *exported;        /* per top-level node: its storage is an output of the plan (a slot) */
    bool oom;
    plan_ucall **ucalls;   /* the user kernels' calls, handed to the plan */
    int n_ucalls, cap_ucalls;
} builder;

/* plan.c's exec and value makers, for plan_view.c. */
bool vf_pb_add_exec(builder *b, const vf_exec *e, const pval *in, const pval *out);
pval vf_pb_inter_val(builder *b, vf_dtype dt, const vf_shape *s);

/* Views (plan_view.c): node i (a CONCAT or SLICE at the top level, inputs
   in) made without a kernel of its own where memory allows: true and
   v[i] set; false: it needs its usual exec (or b->oom). Off under
   VKFUSE_CHECK and with fusion off (the baselines). */
bool vf_pb_try_view(builder *b, const vf_graph *g, int i, const pval *in, const vf_shape *os, pval *v);
/* The intermediate whose memory id lives in (id itself, or the root of
   its views), and id's byte offset there (at may be NULL). */
int vf_pb_root(const builder *b, int id, size_t *at);
/* Which top-level nodes' storage leaves the plan (b->exported): the
   outputs and the values sharing their storage (reshapes of them). false:
   out of host memory. */
bool vf_pb_mark_exported(builder *b, const vf_graph *g);

/* The fused groups of a plan being built. */
typedef struct fusion {
    vf_partition_t part;
    bool have_part;
    vf_fused_member *members; /* every fused group's members, in a row */
    vf_plan_fused *fused;
    int n_fused;
    vf_tref *tens;         /* every fused group's tensors, in a row */
    vf_plan_loc *tloc;
    int *tinter;
    int n_tens;
    vf_partition_t *bpart; /* per branch (builder.br): its partition ... */
    bool *have_bpart;      /* ... if it was made */
    int n_bpart;
} fusion;

static inline size_t vf_pb_bytes(const vf_tref *r) { return (size_t)vf_tref_numel(r) * vf_dtype_size(r->dtype); }

/* Whether a and o have as many elements of one size (an elementwise
   kernel reads a at the index it writes o). */
static inline bool vf_pb_same_elements(const vf_tref *a, const vf_tref *o)
{
    return vf_tref_numel(a) == vf_tref_numel(o) && vf_dtype_size(a->dtype) == vf_dtype_size(o->dtype);
}

void vf_pb_fusion_free(fusion *f);
/* Partitions g and puts the execs in group order (ord: old index per new
   position, step: the kernel each exec belongs to). false: out of host
   memory. Without fusion, or if the graph cannot be partitioned, the order
   stays the node order. */
bool vf_pb_fusion(builder *b, const vf_graph *g, const pval *v, fusion *f, int *ord, int *step);
/* Assigns written in place (plan_assign.c): with the kernel order known
   (after vf_pb_fusion, before vf_pb_schedule_levels), the copies of
   assigns whose value's kernel can write the variable itself go; ord,
   step, fz and b->n_ex are rewritten. */
bool vf_pb_assign_in_place(builder *b, fusion *fz, int *ord, int *step);

/* Kernels in dependency-level order; step becomes the level. */
bool vf_pb_schedule_levels(builder *b, fusion *fz, int *ord, int *step);
/* Applies the permutation ord to the builder's execs. */
bool vf_pb_reorder(builder *b, const int *ord, const int *step);
/* alias[a] = the arena value a may share bytes with (in place), or -1. */
void vf_pb_inplace_candidates(const builder *b, const fusion *fz, const int *step, const int *arena_id, int n,
                              int *alias, bool *taken);

#endif
