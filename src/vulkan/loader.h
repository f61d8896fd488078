/* Vulkan loader: dlopen of libvulkan and function tables (volk's idea).
 *
 * Nothing here is global: a vf_vk_loader owns the library handle and the
 * global-level functions; instance and device tables are filled per
 * instance / device and stored next to the handles they belong to, so two
 * contexts (even on different drivers) coexist. The library is compiled
 * with VK_NO_PROTOTYPES: every Vulkan call goes through these tables. */
#ifndef VF_VULKAN_LOADER_H
#define VF_VULKAN_LOADER_H

#include "util/err.h"
#include "util/fault.h"

#include <vulkan/vulkan.h>

/* Functions available before an instance exists. */
#define VF_VK_GLOBAL_FUNCS(X)                                                      \
    X(vkCreateInstance)                                                            \
    X(vkEnumerateInstanceExtensionProperties)                                      \
    X(vkEnumerateInstanceLayerProperties)

/* Instance-level functions every instance must provide. */
#define VF_VK_INSTANCE_FUNCS(X)                                                    \
    X(vkDestroyInstance)                                                           \
    X(vkEnumeratePhysicalDevices)                                                  \
    X(vkGetPhysicalDeviceProperties)                                               \
    X(vkGetPhysicalDeviceProperties2)                                              \
    X(vkGetPhysicalDeviceFeatures)                                                 \
    X(vkGetPhysicalDeviceFeatures2)                                                \
    X(vkGetPhysicalDeviceMemoryProperties)                                         \
    X(vkGetPhysicalDeviceMemoryProperties2)                                        \
    X(vkGetPhysicalDeviceQueueFamilyProperties)                                    \
    X(vkEnumerateDeviceExtensionProperties)                                        \
    X(vkCreateDevice)                                                              \
    X(vkGetDeviceProcAddr)

/* Instance-level functions that exist only with an extension. */
#define VF_VK_INSTANCE_OPTIONAL_FUNCS(X)                                           \
    X(vkCreateDebugUtilsMessengerEXT)                                              \
    X(vkDestroyDebugUtilsMessengerEXT)

#define VF_VK_DEVICE_FUNCS(X)                                                      \
    X(vkDestroyDevice)                                                             \
    X(vkGetDeviceQueue)                                                            \
    X(vkDeviceWaitIdle)                                                            \
    X(vkQueueSubmit)                                                               \
    X(vkAllocateMemory)                                                            \
    X(vkFreeMemory)                                                                \
    X(vkMapMemory)                                                                 \
    X(vkUnmapMemory)                                                               \
    X(vkFlushMappedMemoryRanges)                                                   \
    X(vkInvalidateMappedMemoryRanges)                                              \
    X(vkCreateBuffer)                                                              \
    X(vkDestroyBuffer)                                                             \
    X(vkGetBufferMemoryRequirements)                                               \
    X(vkBindBufferMemory)                                                          \
    X(vkCreateBufferView)                                                          \
    X(vkDestroyBufferView)                                                         \
    X(vkCreateShaderModule)                                                        \
    X(vkDestroyShaderModule)                                                       \
    X(vkCreatePipelineCache)                                                       \
    X(vkDestroyPipelineCache)                                                      \
    X(vkGetPipelineCacheData)                                                      \
    X(vkCreateComputePipelines)                                                    \
    X(vkDestroyPipeline)                                                           \
    X(vkCreatePipelineLayout)                                                      \
    X(vkDestroyPipelineLayout)                                                     \
    X(vkCreateDescriptorSetLayout)                                                 \
    X(vkDestroyDescriptorSetLayout)                                                \
    X(vkCreateDescriptorPool)                                                      \
    X(vkDestroyDescriptorPool)                                                     \
    X(vkResetDescriptorPool)                                                       \
    X(vkAllocateDescriptorSets)                                                    \
    X(vkUpdateDescriptorSets)                                                      \
    X(vkCreateCommandPool)                                                         \
    X(vkDestroyCommandPool)                                                        \
    X(vkAllocateCommandBuffers)                                                    \
    X(vkFreeCommandBuffers)                                                        \
    X(vkResetCommandBuffer)                                                        \
    X(vkBeginCommandBuffer)                                                        \
    X(vkEndCommandBuffer)                                                          \
    X(vkCmdBindPipeline)                                                           \
    X(vkCmdBindDescriptorSets)                                                     \
    X(vkCmdPushConstants)                                                          \
    X(vkCmdDispatch)                                                               \
    X(vkCmdDispatchIndirect)                                                       \
    X(vkCmdPipelineBarrier)                                                        \
    X(vkCmdCopyBuffer)                                                             \
    X(vkCmdFillBuffer)                                                             \
    X(vkCreateFence)                                                               \
    X(vkDestroyFence)                                                              \
    X(vkResetFences)                                                               \
    X(vkWaitForFences)                                                             \
    X(vkGetFenceStatus)                                                            \
    X(vkCreateQueryPool)                                                           \
    X(vkDestroyQueryPool)                                                          \
    X(vkCmdResetQueryPool)                                                         \
    X(vkCmdWriteTimestamp)                                                         \
    X(vkGetQueryPoolResults)

#define VF_VK_DEVICE_OPTIONAL_FUNCS(X) X(vkCmdPushDescriptorSetKHR)

#define VF_VK_DECLARE(name) PFN_##name name;

typedef struct vf_vk_global_table {
    VF_VK_GLOBAL_FUNCS(VF_VK_DECLARE)
    PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion; /* NULL on 1.0 loaders */
} vf_vk_global_table;

typedef struct vf_vk_instance_table {
    VF_VK_INSTANCE_FUNCS(VF_VK_DECLARE)
    VF_VK_INSTANCE_OPTIONAL_FUNCS(VF_VK_DECLARE)
} vf_vk_instance_table;

typedef struct vf_vk_device_table {
    VF_VK_DEVICE_FUNCS(VF_VK_DECLARE)
    VF_VK_DEVICE_OPTIONAL_FUNCS(VF_VK_DECLARE)
} vf_vk_device_table;

typedef struct vf_vk_loader {
    void *lib;                       /* dlopen handle */
    char lib_name[32];               /* which name was found */
    PFN_vkGetInstanceProcAddr gipa;
    vf_vk_global_table vk;
} vf_vk_loader;

/* Opens the Vulkan loader library and fills the global table. Fails with
   VF_ERROR_DEVICE naming what is missing (the library, or a function). */
vf_status vf_vk_loader_open(vf_vk_loader *l, const char *path, vf_err *err);
/* Sanitizer builds only (a no-op otherwise): keeps the drivers and layers
   loaded so far resident, so LeakSanitizer names them (see loader.c). */
void vf_vk_pin_loaded_libraries(void);
void vf_vk_loader_close(vf_vk_loader *l);

vf_status vf_vk_instance_table_load(const vf_vk_loader *l, VkInstance inst,
                                    vf_vk_instance_table *t, vf_err *err);
vf_status vf_vk_device_table_load(const vf_vk_instance_table *it, VkDevice dev,
                                  vf_vk_device_table *t, vf_err *err);

/* A device whose work never finished (a wait timed out, and the bounded
   wait at destroy timed out again) may still be running it: the spec
   allows destroying none of the objects that work uses, nor the device,
   and waiting for it may never return. This turns every destroy and free
   entry of t into a no-op, so that the runtime's destroy paths free their
   host memory and leave the device's objects (and the driver's memory
   behind them) alone. */
void vf_vk_device_table_abandon(vf_vk_device_table *t);

/* ---- calls ----------------------------------------------------------------
 * Every Vulkan call that returns a VkResult is written
 *
 *     VF_VKD(dev, vkQueueSubmit, queue, 1, &si, fence)
 *
 * (VF_VKI for instance-level functions, VF_VKG for the loader's): the one
 * wrapper of issue 15. It counts the call for fault injection (fault.h)
 * and, when a fault is due, returns the injected result without calling
 * the driver; and a VK_ERROR_DEVICE_LOST, real or injected, marks dev lost
 * (vf_vk_lost_note), which every later entry of the runtime checks. dev
 * is a vf_vk_device * (device.h). */
typedef struct vf_vk_device vf_vk_device;

/* Whether a fault is due at site (counting the call); its VkResult is then
   vf_vk_injected()'s. */
bool vf_vk_inject(vf_fault_site site);
VkResult vf_vk_injected(void);
/* Notes a DEVICE_LOST result of function `what` in d; returns r. */
VkResult vf_vk_lost_note(vf_vk_device *d, const char *what, VkResult r);

static inline VkResult vf_vk_seen(vf_vk_device *d, const char *what, VkResult r)
{
    return __builtin_expect(r == VK_ERROR_DEVICE_LOST, 0) ? vf_vk_lost_note(d, what, r) : r;
}

#define VF_VK_CALL(d, table, fn, ...)                                                          \
    vf_vk_seen((d), #fn,                                                                     \
               vf_fault_armed() && vf_vk_inject(VF_FAULT_##fn) ? vf_vk_injected()             \
                                                               : (table).fn(__VA_ARGS__))
#define VF_VKD(d, fn, ...) VF_VK_CALL((d), (d)->vkd, fn, __VA_ARGS__)
#define VF_VKI(d, fn, ...) VF_VK_CALL((d), (d)->vki, fn, __VA_ARGS__)
#define VF_VKG(d, fn, ...) VF_VK_CALL((d), (d)->loader.vk, fn, __VA_ARGS__)

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY", ... for messages. */
const char *vf_vk_result_name(VkResult r);

#endif
