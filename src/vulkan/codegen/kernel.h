/* A generated compute kernel: the contract between codegen (src/vulkan/codegen)
 * and the Vulkan runtime (src/vulkan).
 *
 * Codegen turns one vf_exec, or a fused group (codegen_fused.h), into a
 * short sequence of dispatches. Each dispatch is GLSL source plus
 * what the runtime needs to run it: which tensors go to which storage
 * buffer binding, the push-constant bytes and the workgroup counts. The
 * runtime compiles the GLSL (cached by content hash), binds, pushes,
 * dispatches, and puts a compute->compute barrier between the dispatches
 * of one sequence.
 *
 * GLSL conventions every generated kernel follows:
 *   #version 450, set 0, bindings 0..n_bindings-1 are storage buffers in
 *   binding order (or, where the dispatch's texel mask says so, uniform
 *   texel buffers), one push-constant block (at most VF_PUSH_MAX bytes),
 *   entry point main, local size (WG, 1, 1) with WG a specialisation
 *   constant: `layout(local_size_x_id = 0) in;`, `const uint WG =
 *   gl_WorkGroupSize.x;`. Other sizes the code needs (the subgroup size it
 *   assumed, tile edges, cache lengths) are specialisation constants too
 *   (`layout(constant_id = i) const uint NAME = 1u;`), so the GLSL - and
 *   its SPIR-V - depends only on the pattern and the device's features,
 *   never on its limits. Every default is 1, itself a valid configuration
 *   (the dumped GLSL runs as is). The dispatch carries the values:
 *   spec[i] is constant_id i, spec[0] the workgroup size, and groups[] is
 *   computed from those same values. The runtime passes them as
 *   VkSpecializationInfo; the pipeline cache keys them, the shader cache
 *   does not.
 */
#ifndef VF_FUSION_KERNEL_H
#define VF_FUSION_KERNEL_H

#include "backend.h"

#include <stdbool.h>
#include <stdint.h>

#define VF_PUSH_MAX 128
/* 16: the Vulkan runtime's descriptor layouts (VF_VK_MAX_BINDINGS) hold
   16; fused group kernels bind every input and output of their group. */
#define VF_KERNEL_MAX_BINDINGS 16
/* 9: a planned user kernel with VF_KERNEL_MAX_OUTPUTS outputs zeroes each
   (a step each) before its own dispatch (codegen_user.c); generated
   kernels have at most 4. */
#define VF_KERNEL_MAX_STEPS 9
#define VF_KERNEL_MAX_SPEC 4

/* What codegen may rely on, filled by the Vulkan runtime from the device. */
typedef struct vf_device_caps {
    uint32_t vendor_id;
    bool is_cpu;                     /* VK_PHYSICAL_DEVICE_TYPE_CPU (lavapipe): tuning profile */
    uint32_t subgroup_size;          /* e.g. 8 on lavapipe, 32 NVIDIA, 64 AMD */
    bool subgroup_arithmetic;        /* subgroupAdd / Max / Min in compute */
    bool subgroup_shuffle;           /* subgroupBroadcast / Shuffle */
    uint32_t max_workgroup_invocations;
    uint32_t max_workgroup_size[3];
    uint32_t max_workgroup_count[3];
    uint32_t shared_memory_bytes;
    uint32_t max_push_constants;
    uint64_t max_storage_buffer_range;
    /* Loop iterations one invocation may run, all its loops together; 0:
       unbounded. llvmpipe (lavapipe) silently ends a shader's loops after
       65535 iterations in all, so kernels split their work to stay within
       it (docs/TESTING.md, "Device limits"). */
    uint32_t max_loop_iterations;
    uint32_t min_storage_buffer_offset_alignment;
    bool storage16;                  /* storageBuffer16BitAccess: f16 tensors */
    bool storage8;                   /* storageBuffer8BitAccess: bool tensors */
    bool shader_float16, shader_int8;
    /* Not the device's: the quick tier of a plan's first kernels
       (src/vulkan/plan_tier.c). A CPU-profile matmul then takes its
       smallest register block, whose code llvmpipe compiles in a tenth of
       the time of the tuned one. */
    bool matmul_quick;
    /* Read-only f32 inputs may be bound as uniform texel buffers
       (R32G32B32A32_SFLOAT views, texelFetch) instead of storage buffers:
       llvmpipe (lavapipe) compiles a storage-buffer load into a loop over
       the lanes, one scalar load and bounds check per component, and a
       texel fetch into a vector gather: a softmax over [2048, 1024] that
       reads its row through a texel buffer takes two thirds of the time
       (docs/BENCHMARKS.md). Set for llvmpipe only; other drivers load
       storage buffers well. */
    bool texel_reads;
} vf_device_caps;

/* A binding refers to a tensor of the vf_exec or to the scratch buffer. */
enum { VF_BIND_IN0 = 0, VF_BIND_IN1 = 1, VF_BIND_IN2 = 2, VF_BIND_OUT = 3, VF_BIND_SCRATCH = 4 };
/* Kernels of fused groups (vulkan/codegen/codegen_fused.h): binding value
   VF_BIND_GROUP + k is tensor k of the group, grp->tensors[k] (backend.h
   vf_fused_group: its inputs, then its outputs). */
enum { VF_BIND_GROUP = 8 };

typedef struct vf_dispatch {
    char *glsl;                      /* malloc'd, NUL-terminated; NULL: spirv below */
    /* a user kernel's step (codegen_user.c): its SPIR-V, owned by the
       vf_ukernel, used when glsl is NULL */
    const uint32_t *spirv;
    size_t spirv_words;
    uint64_t spirv_key;
    char name[64];                   /* for logs and dumps: "add_f32_b01" */
    int n_bindings;
    int binding[VF_KERNEL_MAX_BINDINGS];   /* VF_BIND_* per binding slot */
    /* bit i set: slot i is a uniform texel buffer (`uniform samplerBuffer`,
       one vec4 texel of R32G32B32A32_SFLOAT per 16 bytes of the tensor)
       instead of a storage buffer; only where caps->texel_reads */
    uint32_t texel;
    uint8_t push[VF_PUSH_MAX];
    uint32_t push_size;
    uint32_t groups[3];              /* workgroup counts, each >= 1 */
    uint32_t n_spec;                 /* >= 1: constant_id 0 .. n_spec-1 */
    uint32_t spec[VF_KERNEL_MAX_SPEC];   /* [0]: workgroup size (local_size_x_id = 0) */
} vf_dispatch;

typedef struct vf_gen_kernel {
    int n_steps;
    vf_dispatch step[VF_KERNEL_MAX_STEPS];
    size_t scratch_bytes;            /* > 0: the runtime provides a scratch buffer */
} vf_gen_kernel;

/* Generates the kernel for e (never an op with an empty input or output:
   the frontend handles those). Fails with VF_ERROR_UNSUPPORTED (e.g. f16
   on a device without 16-bit storage) and a message naming the op. */
/* Whether op has an entry in codegen's table of generators (codegen.c). */
bool vf_codegen_op_has_generator(vf_op op);
vf_status vf_codegen_exec(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err);
void vf_kernel_free(vf_gen_kernel *k);

/* Embedded shaders/ files by name ("prelude.glsl"); NULL if absent. */
const char *vf_shader_template(const char *name);

#endif
