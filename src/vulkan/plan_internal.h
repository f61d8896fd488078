/* What the two halves of a recorded plan share: plan.c builds a plan's
 * steps (kernels, pipelines, bindings, guards, descriptor sets);
 * plan_record.c records them into its command buffer and runs it. Internal
 * to src/vulkan/plan*.c. */
#ifndef VF_VULKAN_PLAN_INTERNAL_H
#define VF_VULKAN_PLAN_INTERNAL_H

#include "vulkan/codegen/kernel.h"
#include "vulkan/plan.h"
#include "vulkan/profile.h"
#include "vulkan/shader_cache.h"

#include <pthread.h>
#include <stdatomic.h>

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
    int tier;                    /* built in the quick tier: its entry in vf_plan.tiers, else -1 */
    int tier_step;               /* ... and which step of that kernel it is */
} plan_step;

/* A kernel built in the quick tier (plan_tier.c) and its tuned variant:
   the same steps, bindings and scratch, other code, workgroup counts and
   push constants. */
typedef struct plan_tier {
    /* the thread is done with this one; away from the calling thread's
       flags below, which a compiler may load together as one word */
    atomic_bool ready;
    vf_gen_kernel tuned;
    vf_vk_compiled out[VF_KERNEL_MAX_STEPS];  /* the background thread's compiles */
    bool compile[VF_KERNEL_MAX_STEPS];        /* not on hand at planning: the thread compiles it */
    vf_vk_layout layout[VF_KERNEL_MAX_STEPS]; /* the quick kernel's, which the tuned one shares (a copy) */
    VkPipeline made[VF_KERNEL_MAX_STEPS];     /* the thread's pipelines on the plan's device */
    bool warmed[VF_KERNEL_MAX_STEPS];         /* ... dispatched once on its second device (tier_warm.h) */
    bool swapped, failed;                     /* the calling thread's */
} plan_tier;

typedef struct plan_tiers {
    /* shared with the thread; first, away from the calling thread's fields */
    atomic_bool done;            /* the thread compiled every tuned shader it had */
    atomic_bool stop;            /* the plan is going: no further compile starts */
    atomic_int polls;            /* runs that polled, up to 2: the second means the first is over */
    plan_tier *t;
    int n;
    void *compiler;              /* shaderc's, shared with the runtime (thread-safe) */
    uint32_t target_env_version;
    const vf_vk_device *dev;     /* read only by the thread: its instance table, handles, caps */
    vf_vk_device_table vkd;      /* the thread's copy of dev's table, and dev's device */
    VkDevice device;
    VkPipelineCache cache;       /* the runtime's (internally synchronized) */
    bool warm;                   /* Mesa's disk cache is on: warm it on a second device */
    atomic_int *hold;            /* the test hook tier_hold (device.h), or NULL */
    bool log;                    /* VKFUSE_LOG=info: the thread logs each kernel's times */
    pthread_t thread;
    bool thread_on;              /* started and not joined */
} plan_tiers;

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
    VkBufferView *views;         /* the recording's texel views (texel reads), remade with it */
    int n_views;
    uint64_t serial;             /* the batch of the last run */
    int barriers;
    vf_buffer *table;            /* guards: n_slots templates {x,y,z,when}, then n_slots indirect args */
    int n_slots;
    vf_vk_prof prof;             /* kernel records and timestamps (profile.h) */
    plan_tiers tiers;            /* kernels waiting for their tuned variant (plan_tier.c) */
};

/* plan_tier.c. Whether plans of rt start their matmul kernels in the quick
   tier; caps: the codegen profile for a plan's first kernels. */
bool vf_vk_plan_tiered(const vf_vk_runtime *rt);
vf_device_caps vf_vk_plan_quick_caps(const vf_vk_runtime *rt);
/* After add_kernel put the quick kernel's steps at p->steps[first..]: its
   tuned variant from codegen with the device's own caps (x the exec, f its
   group or NULL); kept when only its code differs. Fails only for want
   of host memory: a variant that cannot be made leaves the quick kernel. */
vf_status vf_vk_plan_tier_add(vf_vk_runtime *rt, vf_plan *p, const vf_plan_desc *d, int x, const vf_plan_fused *f,
                              const vf_gen_kernel *quick, int first);
/* Once the plan is built: the tuned shaders' compiles start on a thread. */
void vf_vk_plan_tier_start(vf_vk_runtime *rt, vf_plan *p);
/* At a run, before recording: swaps in the next tuned kernel if the
   thread has compiled it. */
void vf_vk_plan_tier_poll(vf_vk_runtime *rt, vf_plan *p);
/* Joins the thread and frees the variants. */
void vf_vk_plan_tier_free(vf_plan *p);

#endif
