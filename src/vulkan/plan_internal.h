/* What the two halves of a recorded plan share: plan.c builds a plan's
 * steps (kernels, pipelines, bindings, guards, descriptor sets);
 * plan_record.c records them into its command buffer and runs it. Internal
 * to src/vulkan/plan*.c. */
#ifndef VF_VULKAN_PLAN_INTERNAL_H
#define VF_VULKAN_PLAN_INTERNAL_H

#include "vulkan/codegen/kernel.h"
#include "vulkan/plan.h"
#include "vulkan/profile.h"

typedef struct plan_binding {
    vf_plan_loc_kind kind;
    int index;                   /* BIND */
    vf_buffer *buf;              /* FIXED (captures, constants, scratch) */
    size_t offset;               /* FIXED: in buf; ARENA: in the arena; BIND: past the binding */
    size_t bytes;
    unsigned access;
} plan_binding;

typedef struct plan_step {
    const vf_vk_pipeline *pipe;
    int n_bindings;
    plan_binding b[VF_KERNEL_MAX_BINDINGS];
    uint8_t push[VF_PUSH_MAX];
    uint32_t push_size;
    uint32_t groups[3];
    bool barrier_before;         /* the steps of one kernel (kernel.h) */
    VkDescriptorSet set;
    int pred;                    /* guarded (vf_plan_guard): its predicate, else -1 */
    bool when;
    int slot;                    /* guarded: its entry in the guard table */
    int kernel;                  /* its kernel in the profile records (profile.h) */
} plan_step;

/* Where a per-call binding lands: its block, where in the block, and how
   much room the range has there (descriptor ranges depend on it). The
   vf_buffer pointer cannot say this: a freed vf_buffer's address comes
   back from malloc for a new buffer at quite another place. */
typedef struct bind_key {
    uint64_t block;
    VkDeviceSize at, size;
} bind_key;

struct vf_plan {
    plan_step *steps;
    int n_steps, n_execs, n_kernels;
    vf_buffer *arena;
    size_t arena_size;           /* what ARENA bindings may address */
    vf_buffer **scratch;
    int n_scratch;
    int n_binds;
    bind_key *recorded;          /* the bindings the command buffer holds */
    bool valid;                  /* cmd holds a complete recording */
    VkCommandBuffer cmd;
    VkDescriptorPool pool;
    uint64_t serial;             /* the batch of the last run */
    int barriers;
    vf_buffer *table;            /* guards: n_slots templates {x,y,z,when}, then n_slots indirect args */
    int n_slots;
    vf_vk_prof prof;             /* kernel records and timestamps (profile.h) */
};

#endif
