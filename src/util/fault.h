/* Fault injection (VKFUSE_FAULT, VKFUSE_FAULT_COUNT): Dawn's and the
 * Vulkan CTS's way of running the error paths nobody else runs.
 *
 * Every call that can fail for reasons outside vkfuse goes through one
 * counter per call site: each Vulkan function that returns a VkResult
 * (vulkan/loader.h, VF_VKD and friends), shaderc compiles, disk-cache
 * reads and writes, and the library's host allocations (vf_malloc below).
 * VKFUSE_FAULT=SITE:N[:KIND][,...] makes the N-th call at SITE fail ("N+":
 * that call and every later one) with KIND, without calling the real
 * function, so nothing is half made. The counters are the process's,
 * counted from the first context (or Vulkan runtime) created, and
 * VKFUSE_FAULT_COUNT=1 prints them when a context is destroyed, so a sweep
 * knows the range of N.
 *
 * Unset, the whole cost is one predictable branch on a global flag at each
 * site (vf_fault_armed). */
#ifndef VF_UTIL_FAULT_H
#define VF_UTIL_FAULT_H

#include "util/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Vulkan functions that return a VkResult, by name (the site's name). */
#define VF_FAULT_VK_SITES(X)                                                      \
    X(vkCreateInstance) X(vkEnumerateInstanceVersion)                            \
    X(vkEnumerateInstanceExtensionProperties) X(vkEnumerateInstanceLayerProperties) \
    X(vkEnumeratePhysicalDevices) X(vkEnumerateDeviceExtensionProperties)        \
    X(vkCreateDevice) X(vkCreateDebugUtilsMessengerEXT) X(vkDeviceWaitIdle)      \
    X(vkQueueSubmit) X(vkAllocateMemory) X(vkMapMemory)                          \
    X(vkFlushMappedMemoryRanges) X(vkInvalidateMappedMemoryRanges)               \
    X(vkCreateBuffer) X(vkBindBufferMemory) X(vkCreateShaderModule)              \
    X(vkCreatePipelineCache) X(vkGetPipelineCacheData) X(vkCreateComputePipelines) \
    X(vkCreatePipelineLayout) X(vkCreateDescriptorSetLayout)                     \
    X(vkCreateDescriptorPool) X(vkResetDescriptorPool) X(vkAllocateDescriptorSets) \
    X(vkCreateCommandPool) X(vkAllocateCommandBuffers) X(vkResetCommandBuffer)   \
    X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCreateFence)               \
    X(vkResetFences) X(vkWaitForFences) X(vkGetFenceStatus) X(vkCreateQueryPool) \
    X(vkGetQueryPoolResults)                                                     \
    /* the Amber runner's images (tools/amber/exec_image.c) */                   \
    X(vkCreateImage) X(vkBindImageMemory) X(vkCreateImageView) X(vkCreateSampler) \
    X(vkCreateBufferView)

#define VF_FAULT_ENUM(name) VF_FAULT_##name,
typedef enum vf_fault_site {
    VF_FAULT_VK_SITES(VF_FAULT_ENUM)
    VF_FAULT_shaderc,      /* one GLSL -> SPIR-V compile */
    VF_FAULT_cache_read,   /* one disk-cache file read (a failure reads as a miss) */
    VF_FAULT_cache_write,  /* one disk-cache file write (a failure: not stored) */
    VF_FAULT_malloc,       /* one host allocation of the library (vf_malloc, ...) */
    VF_FAULT_N_SITES
} vf_fault_site;
#undef VF_FAULT_ENUM

typedef enum vf_fault_kind {
    VF_FAULT_KIND_NONE,
    VF_FAULT_OOM_DEVICE,   /* VK_ERROR_OUT_OF_DEVICE_MEMORY */
    VF_FAULT_OOM_HOST,     /* VK_ERROR_OUT_OF_HOST_MEMORY; malloc: NULL */
    VF_FAULT_DEVICE_LOST,  /* VK_ERROR_DEVICE_LOST */
    VF_FAULT_INIT_FAILED,  /* VK_ERROR_INITIALIZATION_FAILED */
    VF_FAULT_FAIL,         /* the site's own failure: a compile error, an I/O error, ... */
    VF_FAULT_TIMEOUT,      /* VK_TIMEOUT (vkWaitForFences: a batch that never finishes) */
} vf_fault_kind;

extern atomic_bool vf_fault_armed_;

/* Whether any fault spec or counting is on: the one branch at each site. */
static inline bool vf_fault_armed(void)
{
    return __builtin_expect(atomic_load_explicit(&vf_fault_armed_, memory_order_relaxed), 0);
}

/* Counts one call at site; the kind of fault to inject into it, or
   VF_FAULT_KIND_NONE. Only called when armed. */
vf_fault_kind vf_fault_hit(vf_fault_site site);

/* Takes the values of VKFUSE_FAULT and VKFUSE_FAULT_COUNT (read by
   api/context.c, or a tool), once per process: later calls return the
   first one's status and message. A malformed spec:
   VF_ERROR_INVALID_ARGUMENT saying what is wrong and the accepted form. */
vf_status vf_fault_setup(const char *spec, const char *count, vf_err *err);

/* Test hook: replaces the spec (NULL or "": none) and the counting flag,
   and zeroes every counter, as if the process had started with them;
   once called, the environment is no longer read. */
vf_status vf_fault_set(const char *spec, bool count, vf_err *err);

/* With VKFUSE_FAULT_COUNT: one line per site called so far, to stderr
   ("vkfuse: fault count: vkQueueSubmit 12"). */
void vf_fault_report(void);

int64_t vf_fault_count(vf_fault_site site);
const char *vf_fault_site_name(vf_fault_site site);
const char *vf_fault_kind_name(vf_fault_kind kind);

/* The library's host allocations: malloc and friends behind the "malloc"
   site. Free with free(). */
static inline void *vf_malloc(size_t n)
{
    if (vf_fault_armed() && vf_fault_hit(VF_FAULT_malloc)) return NULL;
    return malloc(n);
}
static inline void *vf_calloc(size_t n, size_t size)
{
    if (vf_fault_armed() && vf_fault_hit(VF_FAULT_malloc)) return NULL;
    return calloc(n, size);
}
static inline void *vf_realloc(void *p, size_t n)
{
    if (vf_fault_armed() && vf_fault_hit(VF_FAULT_malloc)) return NULL;
    return realloc(p, n);
}
static inline char *vf_strdup(const char *s)
{
    if (vf_fault_armed() && vf_fault_hit(VF_FAULT_malloc)) return NULL;
    return strdup(s);
}

#endif
