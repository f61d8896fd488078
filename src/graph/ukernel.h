/* User kernels (vf_kernel_create): what every layer below the frontend
 * knows of one. A graph node of kind VF_NODE_KERNEL points at its
 * vf_ukernel (reference-counted: the vf_kernel handle and every graph
 * that calls it hold one), backends run a vf_ukernel_exec. The frontend
 * (src/kernels/kernels.c) fills both; the SPIR-V is the kernel's own copy,
 * so a traced function keeps working after vf_kernel_destroy and a saved
 * one carries it (docs/KERNELS.md). */
#ifndef VF_GRAPH_UKERNEL_H
#define VF_GRAPH_UKERNEL_H

#include "vkfuse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Push constants: the user's parameters, then one uint element count per
   input and output. */
#define VF_UKERNEL_PUSH_MAX (VF_KERNEL_MAX_PARAM_BYTES + 4 * (VF_KERNEL_MAX_INPUTS + VF_KERNEL_MAX_OUTPUTS))

/* The execs of a planned call with more than 3 inputs or more than one
   output (plan/plan.c): part p holds inputs 3p .. 3p+2 and output p. */
#define VF_UKERNEL_PARTS(n_in, n_out) ((n_out) > ((n_in) + 2) / 3 ? (n_out) : ((n_in) + 2) / 3)

typedef struct vf_ukernel {
    int refs;
    char name[48];
    uint32_t *spirv;               /* owned */
    size_t n_words;
    uint64_t key;                  /* content hash of the SPIR-V */
    int n_in, n_out;
    vf_dtype in_dt[VF_KERNEL_MAX_INPUTS];
    vf_tensor_spec out_spec[VF_KERNEL_MAX_OUTPUTS];
    uint32_t param_bytes, workgroup_size, groups[3];
    uint32_t per_group;            /* invocations per workgroup along x (the default dispatch) */
    bool uninit, side_effect;
    bool check_bounds;             /* desc.check_bounds: guard tails (kernels/kernel_guard.c); never planned */
    /* Callbacks; NULL after a load (the C side cannot be saved) */
    vf_kernel_shape_fn output_shapes;
    vf_kernel_dispatch_fn dispatch;
    vf_kernel_cpu_fn cpu;
    vf_kernel_grad_fn grad;
    void *user;
    bool loaded;                   /* made by vf_function_load: no callbacks, shapes as saved */
} vf_ukernel;

/* One call of a user kernel, as a backend runs it: shapes resolved,
   outputs allocated (a backend zeroes them first unless k->uninit),
   push bytes and workgroup counts computed. */
typedef struct vf_ukernel_exec {
    const vf_ukernel *k;
    const vf_kernel_shapes *shapes;     /* for the C implementation */
    struct vf_tref *in, *out;           /* k->n_in, k->n_out */
    uint8_t push[VF_UKERNEL_PUSH_MAX];
    uint32_t push_size;
    uint32_t groups[3];
    bool empty;                         /* an input or output has no element: nothing to run */
} vf_ukernel_exec;

/* One call of k on inputs in_spec[k->n_in] with params: the outputs'
   dtypes and shapes (callback or desc) into out_spec, the callbacks' view
   into *shapes (pointing at in_spec, out_spec, params), and x's push,
   push_size, groups, empty, k and shapes. A failure is a status and what
   went wrong in msg, which the caller prefixes with where. */
vf_status vf_ukernel_resolve(const vf_ukernel *k, const vf_tensor_spec *in_spec, const void *params,
                             vf_tensor_spec *out_spec, vf_kernel_shapes *shapes, vf_ukernel_exec *x, char *msg,
                             size_t len);

static inline vf_ukernel *vf_ukernel_retain(vf_ukernel *k)
{
    if (k) k->refs++;
    return k;
}
void vf_ukernel_release(vf_ukernel *k);   /* graph/graph.c */

#endif
