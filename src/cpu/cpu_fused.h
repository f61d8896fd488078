/* Fused elementwise groups on the CPU backend: one pass over cache-sized
 * chunks of the output (numexpr's idea), every member computed on the
 * chunk in turn, values between members never written to memory.
 * Bit for bit the eager kernels' results (cpu_fused.c says how). */
#ifndef VF_CPU_FUSED_H
#define VF_CPU_FUSED_H

#include "cpu/cpu.h"

/* The most tensors (inputs + outputs) a group run in one pass may have. */
#define VF_FUSED_MAX_TENSORS 32

/* The most members of a fused group on this backend (the partition's
   limit, vf_backend_iface.fused_max_nodes). The Vulkan code generator
   stops at 64; a pass here has no table of that size, and its values
   share a few chunk temporaries (cpu_fused.c), so a 256-op elementwise
   chain is one pass rather than four groups writing their values to
   memory. 1024 bounds the scratch a plan allocates (about 1 KiB per
   member). */
#define VF_CPU_FUSED_MAX_MEMBERS 1024

/* Whether vf_cpu_fused_run can run g (group.execs set; tensors may be
   unresolved): an ELEMENTWISE group whose members all have the group's
   output shape (or are FILL splats) and whose ops this file knows. */
bool vf_cpu_fused_supported(const vf_fused_group *g);

/* The bytes of scratch vf_cpu_fused_run needs for a group of n members
   (chunk temporaries: made once per plan, not per call). */
size_t vf_cpu_fused_scratch_bytes(int n_members);
/* Runs g on its resolved tensors (g->tensors: inputs, then outputs), its
   temporaries in scratch (vf_cpu_fused_scratch_bytes, 16-byte aligned). */
vf_status vf_cpu_fused_run(vf_cpu *cpu, const vf_fused_group *g, void *scratch);

/* ---- parts shared with the row groups' pass (cpu_rows.c) ---- */

/* Elements a pass computes per member at a time. */
#define VF_CPU_FUSED_CHUNK 256

/* One operand of a member over a chunk: element i at p + i * st (st 0:
   one value broadcast). */
typedef struct vf_cpu_opnd {
    const void *p;
    int64_t st;
    vf_dtype dt;
} vf_cpu_opnd;

/* Whether vf_cpu_fused_eval computes e (an elementwise op, or FILL). */
bool vf_cpu_fused_op_known(const vf_exec *e);
/* The bytes of vf_cpu_fused_eval's work arrays. */
size_t vf_cpu_fused_tmp_bytes(void);
/* Member e over m <= VF_CPU_FUSED_CHUNK elements into out (its dtype,
   contiguous), as the eager kernel computes each element; tmp:
   vf_cpu_fused_tmp_bytes. in: NULL for a FILL. */
void vf_cpu_fused_eval(const vf_exec *e, const vf_cpu_opnd *in, void *out, int64_t m, void *tmp);
/* Whether two resolved tensors share bytes. */
bool vf_cpu_fused_overlaps(const vf_tref *a, const vf_tref *b);

/* ROWS groups (cpu_rows.c): softmax / log_softmax along the last axis,
   last-axis keepdims sum / mean / max / min and elementwise ops of the row
   shape [..., C] or the per-row shape [..., 1], all f32 for the row ops,
   evaluated row by row in one pass, each member's value for the row in
   L1 (the eager kernels' bits). Whether vf_cpu_rows_run can run g:
   C <= VF_CPU_FUSED_CHUNK and the row shape small enough that the member
   kernels would not split it across threads (VF_CPU_GRAIN_FAST). */
bool vf_cpu_rows_supported(const vf_fused_group *g);
size_t vf_cpu_rows_scratch_bytes(int n_members);
/* Runs g on its resolved tensors; false (nothing written) when an output
   overlaps an input other than exactly (same bytes, same shape): then the
   caller runs the members one by one. */
bool vf_cpu_rows_run(const vf_fused_group *g, void *scratch);
/* Row groups run in one pass since the process started (tests). */
int64_t vf_cpu_rows_passes(void);
/* The softmax / log_softmax gradient rule's four ops in a row group
   (docs/GRADIENTS.md; grad_rules.c's g_softmax and g_log_softmax), ending
   at member m[3]: softmax y * (g - sum(g * y)) as MUL, REDUCE_SUM, SUB,
   MUL; log_softmax g - exp(y) * sum(g) as REDUCE_SUM and EXP, MUL, SUB.
   The other three members' values are read by the next of the four only
   and are no group output, every tensor f32, g and y of the row shape and
   the sum along the last axis: m[3]'s value is then
   vf_cpu_softmax_grad_rows_f32's (kernels_row_grad.c, the same bits) and
   m[0..2] need not run. g is operand g_in of member g_at (its source
   g_src, vf_fused_member.in's form), y likewise. vf_cpu_rows_grad_match:
   whether member d of g ends such a gradient. */
typedef struct vf_cpu_row_grad {
    vf_op op; /* VF_OP_SOFTMAX or VF_OP_LOG_SOFTMAX: whose gradient */
    int m[4];
    int g_at, g_in, g_src;
    int y_at, y_in, y_src;
} vf_cpu_row_grad;
bool vf_cpu_rows_grad_match(const vf_fused_group *g, int d, vf_cpu_row_grad *out);

/* MATMUL and CONV groups: the center (the matmul or conv2d) runs as its
   own kernel, then the epilogue, an elementwise group of the other
   members that reads the center's value as one more input. An epilogue
   holds the center's value, the group's tensors and its members with the
   center's value as group input n_inputs (the tensors after it shift by
   one). vf_cpu_epilogue_make: false when g has no such epilogue that
   vf_cpu_fused_run can run (then the group runs member by member). The
   arrays are owned by ep (vf_cpu_epilogue_free).
   A CONV group whose conv2d's value is read only by an add of an f32
   vector of its output channels (a bias, a group input) folds that add
   into the center: bias names the input, the center runs as
   vf_cpu_conv_bias and its value is conv + bias; the add leaves the
   epilogue (a copy when it was a group output). Small layers spent most
   of their time in that add's pass: a bias broadcast along the last dim
   cuts the pass into rows of O values (docs/BENCHMARKS.md). */
typedef struct vf_cpu_epilogue {
    vf_fused_group group;       /* ELEMENTWISE; execs point into the plan's, tensors at run time */
    vf_exec *execs;
    vf_fused_member *members;
    int center;                 /* the center's member index in the original group */
    int bias;                   /* the bias's group input, -1: none folded */
    /* bit k: the epilogue reads group input k. The pass is given the
       others (the center's operands, a folded bias) as scalars: their
       shapes, unrelated to the output's, would keep it from merging dims
       (a [32,12,12,8] output walked as 4608 rows of 8 instead of one). */
    uint64_t reads;
} vf_cpu_epilogue;

bool vf_cpu_epilogue_make(const vf_fused_group *g, vf_cpu_epilogue *ep);
void vf_cpu_epilogue_free(vf_cpu_epilogue *ep);

#endif
