/* Fused elementwise groups on the CPU backend: one pass over cache-sized
 * chunks of the output (numexpr's idea), every member computed on the
 * chunk in turn, values between members never written to memory.
 * Bit for bit the eager kernels' results (cpu_fused.c says how). */
#ifndef VF_CPU_FUSED_H
#define VF_CPU_FUSED_H

#include "cpu/cpu.h"

/* The most tensors (inputs + outputs) a group run in one pass may have. */
#define VF_FUSED_MAX_TENSORS 32

/* Whether vf_cpu_fused_run can run g (group.execs set; tensors may be
   unresolved): an ELEMENTWISE group whose members all have the group's
   output shape (or are FILL splats) and whose ops this file knows. */
bool vf_cpu_fused_supported(const vf_fused_group *g);

/* Runs g on its resolved tensors (g->tensors: inputs, then outputs). */
vf_status vf_cpu_fused_run(vf_cpu *cpu, const vf_fused_group *g);

#endif
