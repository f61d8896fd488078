/* Vulkan instance, physical-device choice and logical device.
 *
 * One vf_vk_device is one instance + one device + one compute queue, with
 * its own function tables. It must not move after vf_vk_device_create
 * (the validation messenger keeps a pointer to it). */
#ifndef VF_VULKAN_DEVICE_H
#define VF_VULKAN_DEVICE_H

#include "vulkan/codegen/kernel.h"
#include "vulkan/loader.h"

#include <stdatomic.h>
#include <stdbool.h>

typedef struct vf_vk_device_options {
    int device_index;        /* >= 0: that index; -1: device_env, else the best */
    const char *device_env;  /* VKFUSE_DEVICE: an index or a name substring; NULL/"": none */
    bool gpu_only;           /* the best device must be a GPU (vf_vk_phys_pick): VF_BACKEND_AUTO */
    bool validation;         /* Khronos validation layer + sync validation */
    bool no_push_descriptors;/* testing: ignore VK_KHR_push_descriptor */
    const char *loader;      /* VKFUSE_VULKAN_LOADER (vf_vk_loader_open); NULL: the standard one */
    const char *test_caps;   /* VKFUSE_TEST_CAPS (apply_test_caps in device.c); NULL: none */
    const char *test_limits; /* VKFUSE_TEST_LIMITS (vf_vk_test_limits_apply); NULL: none */
    bool no_robust;          /* VKFUSE_ROBUST=0: robustBufferAccess off */
} vf_vk_device_options;

/* Test hooks, set by tests on a live runtime (rt->dev.test) through the
   internal API; never by the library. */
typedef struct vf_vk_test_hooks {
    int drop_barriers;       /* while > 0, each hazard barrier the scheduler or a recorded
                                plan would put is left out, and this decremented (hazard.h) */
    int wrong_exec;          /* >= 0: the unfused exec of that index in the next plans made
                                gets a wrong kernel (an elementwise unary op's kernel is made
                                for neg instead, neg's for abs), so that VKFUSE_CHECK can be
                                shown to name it (tests/test_check.c); -1 (the default): none */
    int64_t memory_limit;    /* > 0: a memory block that would take the bytes of all blocks
                                (vf_vk_mem.bytes_reserved) past this fails as the driver's
                                VK_ERROR_OUT_OF_DEVICE_MEMORY, without calling it: a device that
                                runs out of memory (tests/test_vulkan_memory.c) */
    int64_t memory_budget;   /* > 0: the heap budget VK_EXT_memory_budget reports is at most
                                this; on a device without the extension (lavapipe 22.3) it
                                stands in for it, the heap's usage then being this context's
                                blocks (tests/test_faults_device.c) */
    atomic_int *tier_hold;   /* non-NULL: while *tier_hold != 0, a plan's tier thread
                                publishes no tuned kernel, as if its compile were still
                                under way (tests/test_plan_tier.c) */
} vf_vk_test_hooks;

typedef struct vf_vk_device {
    vf_vk_loader loader;
    vf_vk_instance_table vki;
    vf_vk_device_table vkd;
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;
    VkPhysicalDevice phys;
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    int index;                        /* of phys in vkEnumeratePhysicalDevices */
    uint32_t api_version;             /* min(instance, device) */
    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceMemoryProperties mem_props;
    vf_device_caps caps;
    bool push_descriptors;            /* VK_KHR_push_descriptor enabled */
    bool memory_budget;               /* VK_EXT_memory_budget enabled (vf_vk_heap_budget) */
    uint32_t timestamp_valid_bits;    /* of the queue family; 0: no timestamps */
    float timestamp_period;           /* ns per tick */
    bool validation;                  /* the layer is actually active */
    bool sync_validation;             /* ... with synchronization validation */
    int64_t validation_messages;      /* warnings + errors the layer reported */
    vf_err *err;                      /* where validation messages land */
    vf_vk_test_hooks test;
    /* what vkCreateDevice was given, for vf_vk_device_twin */
    VkPhysicalDeviceFeatures enabled;
    VkPhysicalDeviceVulkan11Features enabled11;
    VkPhysicalDeviceVulkan12Features enabled12;
    const char *enabled_exts[3];
    uint32_t n_enabled_exts;
    /* A call returned VK_ERROR_DEVICE_LOST (VF_VKD, loader.h) or a wait
       timed out: the device's objects are used again only to destroy
       them, and every entry of the runtime fails at once (vf_vk_lost). */
    bool lost;
    char lost_during[192];            /* the call (and what it was for) that found it */
    bool drained;                     /* lost: vf_vk_sched_drain waited (bounded) once */
    bool abandoned;                   /* lost and its work did not finish within the timeout:
                                         vf_vk_device_table_abandon made destroys no-ops, and
                                         the device, instance and driver are left in place */
    char name[256];
} vf_vk_device;

/* Creates the instance and device. Fails with VF_ERROR_DEVICE (no loader,
   no Vulkan 1.2 device, no compute queue, bad VKFUSE_DEVICE naming the
   available devices, ...). On failure *d is cleaned up. */
vf_status vf_vk_device_create(vf_vk_device *d, const vf_vk_device_options *opt, vf_err *err);
/* The instance alone (d zeroed; the loader opened from `loader`, NULL: the
   standard one): device_pick.c lists devices with it. */
vf_status vf_vk_instance_create(vf_vk_device *d, bool validation, const char *loader, vf_err *err);
/* Waits idle and destroys everything; safe on a zeroed or failed device.
   A lost device is not waited for here (vkDeviceWaitIdle may never return
   on a hung one): the scheduler's bounded drain did that. An abandoned one
   keeps its device, instance and driver. */
void vf_vk_device_destroy(vf_vk_device *d);
/* A second logical device of d's physical device, made with exactly what
   d was made with (features, extensions, one queue of the same family),
   so that the driver compiles a shader for it as it would for d: a
   plan's tier thread warms the driver's shader cache on it
   (tier_warm.c). Safe on a thread other than d's (it reads d only). The
   caller destroys it with vkd->vkDestroyDevice. */
vf_status vf_vk_device_twin(const vf_vk_device *d, VkDevice *dev, vf_vk_device_table *vkd, VkQueue *queue,
                            vf_err *err);

/* VKFUSE_TEST_LIMITS (testing only; docs/TESTING.md): spec is
   "name=value,..." with max_groups (maxComputeWorkGroupCount, every
   dimension), max_buffer (maxStorageBufferRange, bytes) and max_loop (loop
   iterations per invocation, caps.max_loop_iterations). Each lowers the
   device's limit in d->props.limits and d->caps, never raises it, so every
   layer sees the same smaller device and its split paths run on small
   tensors. NULL or "": nothing. A bad spec: VF_ERROR_INVALID_ARGUMENT. */
vf_status vf_vk_test_limits_apply(vf_vk_device *d, const char *spec, vf_err *err);

/* Once d is lost: VF_ERROR_DEVICE "the device was lost during <call>
   (in <where>); create a new context", recorded in err. VF_OK otherwise. */
vf_status vf_vk_lost(vf_vk_device *d, vf_err *err, const char *where);

/* The budget of memory heap `heap` (VK_EXT_memory_budget's heapBudget:
   what this process may use of it now, other programs' use taken off) and
   the process's usage of it (heapUsage), read now; *usage is -1 where only
   the test hook (test.memory_budget) gives a budget. false: no budget is
   known (no extension, no hook). */
bool vf_vk_heap_budget(const vf_vk_device *d, uint32_t heap, int64_t *budget, int64_t *usage);

/* Memory type index with all `want` flags among `type_bits`, or -1. */
int vf_vk_find_memory_type(const vf_vk_device *d, uint32_t type_bits, VkMemoryPropertyFlags want);

/* Records a VkResult failure as VF_ERROR_DEVICE ("what: VK_ERROR_..."),
   VF_ERROR_OUT_OF_MEMORY for the out-of-memory results. */
vf_status vf_vk_check(vf_err *err, VkResult r, const char *what);

#endif
