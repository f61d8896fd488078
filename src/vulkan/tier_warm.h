/* Warming the driver's shader cache on a second device (tier_warm.c).
 *
 * llvmpipe (lavapipe) compiles a compute pipeline to machine code at its
 * first dispatch, not in vkCreateComputePipelines, and the one queue of a
 * device runs that compile in line with the work queued on it. A plan's
 * tier thread (plan_tier.c) therefore dispatches each tuned kernel once on
 * a device of its own (vf_vk_device_twin: the same physical device,
 * features and extensions), where the compile blocks nobody; Mesa's disk
 * cache, shared by the devices of a process, then holds the machine code,
 * and the plan's device finds it there at the tuned kernel's first
 * dispatch (so none is made where Mesa's disk cache is off:
 * vf_vk_runtime.driver_cache_off). Everything here runs on the tier
 * thread and reads the main device only (its tables, physical device,
 * memory types). */
#ifndef VF_VULKAN_TIER_WARM_H
#define VF_VULKAN_TIER_WARM_H

#include "vulkan/device.h"
#include "vulkan/pipeline.h"

typedef struct vf_vk_warm {
    const vf_vk_device *main;
    vf_vk_device_table vkd;
    VkDevice device;
    VkQueue queue;
    VkCommandPool pool;
    VkCommandBuffer cmd;
    VkFence fence;
    VkBuffer buf;                /* bound to every binding of every kernel */
    VkDeviceMemory mem;
    bool tried;                  /* vf_vk_warm_run opened it (or failed to) */
} vf_vk_warm;

/* One kernel's pipeline as the main device makes it. */
typedef struct vf_vk_warm_kernel {
    const uint32_t *spirv;
    size_t words;
    const vf_vk_layout *layout;  /* a copy of the main device's layout for it */
    uint32_t n_spec;
    const uint32_t *spec;
} vf_vk_warm_kernel;

/* w zeroed, then: opens the second device at the first call, makes k's
   pipeline there and dispatches it once (one workgroup, push constants
   zero, every binding on one small buffer: the code is compiled whatever
   it does), waits for it and frees the pipeline. false: not done (the
   device could not be made or a call failed); nothing to report, the
   plan's device then compiles the kernel itself. */
bool vf_vk_warm_run(vf_vk_warm *w, const vf_vk_device *main, const vf_vk_warm_kernel *k);
void vf_vk_warm_close(vf_vk_warm *w);

#endif
