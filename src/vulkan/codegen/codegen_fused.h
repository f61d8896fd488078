/* GLSL for fused groups (backend.h vf_fused_group).
 *
 * vf_codegen_group(grp, caps, &k, &err) generates the kernel of one group
 * for the concrete shapes of this run, from its description alone:
 *   - grp->execs[m] is member m (op, attrs, every tensor's dtype and
 *     shape), grp->members[m] where its inputs come from and whether its
 *     value is a group output;
 *   - k.step[i].binding[slot] == VF_BIND_GROUP + t: bind group tensor t
 *     (grp->tensors[t]: the inputs, then the outputs), every tensor packed
 *     row-major at a 16-byte aligned offset (kernels named "..._v4" load
 *     vec4);
 *   - sizes are push constants and locals are named by member index: the
 *     GLSL text depends only on the group's pattern (ops, dtypes, which
 *     dims broadcast), so one pipeline serves every batch size; the
 *     runtime's content-hash cache finds it.
 * Kinds: VF_FUSED_ELEMENTWISE (codegen_fused.c), VF_FUSED_ROWS
 * (codegen_rows.c: one workgroup per row, docs/FUSION.md) and
 * VF_FUSED_MATMUL (codegen_matmul_fused.c), VF_FUSED_CONV
 * (codegen_conv_fused.c). Groups the device cannot run
 * (f16 without 16-bit storage, ...) fail with VF_ERROR_UNSUPPORTED and a
 * message: run the group's execs one by one.
 * A group without outputs (dead values) gives k.n_steps == 0: nothing to run.
 * No tensor may be empty (the frontend handles those, as for ops).
 * Outputs may share a buffer with a same-shape input (in place): every
 * invocation loads all its input elements before it stores.
 */
#ifndef VF_CODEGEN_FUSED_H
#define VF_CODEGEN_FUSED_H

#include "vulkan/codegen/codegen_internal.h"
#include "vulkan/codegen/kernel.h"

vf_status vf_codegen_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err);

/* An eager elementwise op (or FILL) as a group of one member: the
   ELEMENTWISE generator, so an op has the same GLSL eagerly and traced;
   bindings are the exec's (VF_BIND_IN0.., VF_BIND_OUT), vec4 only where
   its tensors are 16-byte aligned. The contract of vf_codegen_exec. */
/* A planned user kernel's call (codegen_user.c): its outputs' zeroing
   (a FILL step, unless the kernel asks not to) and its own SPIR-V. */
vf_status vf_codegen_user(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err);
/* One with more than 3 inputs or more than one output: a VF_FUSED_USER
   group, a zeroing step per output, then the SPIR-V on every group tensor. */
vf_status vf_codegen_user_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out,
                                vf_err *err);
vf_status vf_codegen_single(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err);

/* ---- the generators of each kind; same contract as vf_codegen_group ---- */
vf_status vf_codegen_row_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err);
vf_status vf_codegen_matmul_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out,
                                  vf_err *err);
vf_status vf_codegen_conv_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out,
                                vf_err *err);

/* ---- members, shared by the generators (codegen_member.c) ---- */

/* Whether op may be a non-center member: elementwise ops and FILL. */
bool cg_member_op(vf_op op);
/* A rough size of member m's code per element, for generators that
   repeat a member's code (unrolled loops): an op whose GLSL calls a
   prelude helper (vf_pow, vf_tanh, ...: branches and loops) counts 8, any
   other 1; an f16 result 2 more (its rounding). */
unsigned cg_member_cost(const vf_fused_group *grp, int m);
/* Window ops (slice, pad, concat): members of elementwise groups only,
   whose sources are group inputs read at computed indices (codegen_fused.c). */
bool cg_window_op(vf_op op);
/* FILL (or pad) exec e's value as a literal of its dtype's compute type. */
void cg_fill_literal(vf_sb *s, const vf_exec *e);
/* Appends `RT op_<m>(CTa a, ...) { return <op-table GLSL>; }` for
   elementwise member m (nothing for FILL); UNSUPPORTED without an
   expression for its dtype. */
vf_status cg_member_fn(vf_sb *s, const vf_fused_group *grp, int m, vf_err *err);
/* Appends the value of a member input (vf_fused_member.in encoding: a
   group input t >= 0, or VF_FUSED_MEMBER(m)) as the generator names it. */
typedef void (*cg_ref_fn)(vf_sb *s, int src, void *user);
/* Appends `<indent>CT t<m> = <value>;   // <op>` for elementwise member m:
   its op function applied to its inputs (named by ref), converted to the
   compute type of its dtype; FILL: its value as stored, read from push
   constant fill<m> when pushed[m] (pushed may be NULL), else a literal. */
void cg_member_eval(vf_sb *s, const vf_fused_group *grp, int m, const char *indent, cg_ref_fn ref, void *user,
                    const bool *pushed);
/* Most members a generator pushes fills for. */
#define CG_MAX_MEMBERS 64
/* FILL member e's value as stored, as the bits of a push constant (bool
   as 0 / 1, f16 in the low half). */
uint32_t cg_fill_bits(const vf_exec *e);
/* Pushes the value of every FILL member as push constant fill<m> while the
   block has room (two fields left for the generator's own, e.g. a grid
   stride) and marks pushed[m] (CG_MAX_MEMBERS entries). A push constant
   is exact: the compilers cannot fold it, where a literal may be folded
   inexactly (Vulkan allows x * -0.0 -> -0.0 without float controls, and
   lavapipe does it), and one pipeline serves every value. */
void cg_push_fills(vf_cg *g, const vf_fused_group *grp, bool *pushed);
/* Declares load function ld<i> reading buffer in<i> for every input i of
   the group whose bit in skip is clear (bit 63 stands for every i >= 63),
   each in its dtype's compute type. */
void cg_group_loads(vf_cg *g, const vf_fused_group *grp, uint64_t skip);
/* Declares store function <fn><o> writing buffer <buf><o> for every output
   o of the group, each from its dtype's compute type. */
void cg_group_stores(vf_cg *g, const vf_fused_group *grp, const char *fn, const char *buf);
/* Appends pushed fill m read as the compute type of dt. */
void cg_fill_pushed(vf_sb *s, vf_dtype dt, int m);
/* Appends `op_<m>(<inputs>)` of elementwise member m (not FILL): its
   result is of compute type cg_member_result(&grp->execs[m]), not yet
   converted to its dtype's. */
void cg_member_call(vf_sb *s, const vf_fused_group *grp, int m, cg_ref_fn ref, void *user);
vf_ctype cg_member_result(const vf_exec *e);
/* The group output o's member; -1 if none. */
int cg_output_member(const vf_fused_group *grp, int o);

#endif
