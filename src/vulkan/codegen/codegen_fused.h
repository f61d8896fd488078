/* GLSL for fused groups (partition.h).
 *
 * vf_codegen_group(g, grp, shapes, caps, &k, &err) generates the kernel of
 * one group for the concrete shapes of this run:
 *   - shapes[v] for every value v of g (at least every member, input and
 *     output of grp) — the shapes graph/shape.c inferred from the concrete
 *     inputs; dtypes come from g->nodes[v].dtype;
 *   - k.step[i].binding[slot] == VF_BIND_GROUP + t: bind tensor t of the
 *     group, t < grp->n_inputs: value grp->inputs[t], else value
 *     grp->outputs[t - grp->n_inputs]; every tensor packed row-major at a
 *     16-byte aligned offset (kernels named "..._v4" load vec4);
 *   - sizes are push constants: the GLSL text depends only on the group's
 *     pattern (ops, dtypes, which dims broadcast), so one pipeline serves
 *     every batch size; the runtime's content-hash cache finds it.
 * Supported: VF_GROUP_ELEMENTWISE_DAG (here), VF_GROUP_ROW_EPILOGUE
 * (codegen_rows.c: one workgroup per row, docs/FUSION.md) and
 * VF_GROUP_MATMUL_EPILOGUE (codegen_matmul_fused.c). Other kinds, and groups the device
 * cannot run (f16 without 16-bit storage, ...), fail with
 * VF_ERROR_UNSUPPORTED and a message: run the group's nodes one by one.
 * A group without outputs (dead values) gives k.n_steps == 0: nothing to run.
 * No tensor may be empty (the frontend handles those, as for ops).
 * Outputs may share a buffer with a same-shape input (in place): every
 * invocation loads all its input elements before it stores.
 */
#ifndef VF_FUSION_CODEGEN_FUSED_H
#define VF_FUSION_CODEGEN_FUSED_H

#include "vulkan/codegen/codegen_internal.h"
#include "vulkan/codegen/kernel.h"
#include "plan/partition.h"

vf_status vf_codegen_group(const vf_graph *g, const vf_group *grp, const vf_shape *shapes,
                           const vf_device_caps *caps, vf_kernel *out, vf_err *err);

/* ---- shared by the fused generators (codegen_fused.c, codegen_rows.c) ---- */

/* Row groups (codegen_rows.c); same contract as vf_codegen_group. */
vf_status vf_codegen_row_group(const vf_graph *g, const vf_group *grp, const vf_shape *shapes,
                               const vf_device_caps *caps, vf_kernel *out, vf_err *err);
/* Appends the conversion of expression v (compute type ct) to the compute
   type of dt with the cast rules (f16 rounded through f16 bits). */
void vf_fused_to_ctype(vf_sb *s, vf_dtype dt, vf_ctype ct, const char *v);
/* Appends `RT op_<v>(CTa a, ...) { return <op-table GLSL>; }` for
   elementwise node v (nothing for FILL); UNSUPPORTED without an expression. */
vf_status vf_fused_op_fn(vf_sb *s, const vf_graph *g, int v, vf_err *err);
/* FILL node nd's value as stored (bits) and as a compute-type literal. */
void vf_fused_fill_bits(const vf_node *nd, uint32_t *bits);
void vf_fused_fill_literal(vf_sb *s, vf_dtype dt, uint32_t bits);

#endif
