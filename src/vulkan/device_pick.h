/* Choosing a physical device (device.c's vf_vk_device_create) and listing
 * them (vf_devices): enumeration, the preference order discrete >
 * integrated > virtual > CPU (the CPU type only when asked for: gpu_only), VKFUSE_DEVICE by index or name, and messages
 * that list what is available. */
#ifndef VF_VULKAN_DEVICE_PICK_H
#define VF_VULKAN_DEVICE_PICK_H

#include "vulkan/device.h"

#define VF_VK_MAX_PHYS 16

typedef struct vf_vk_phys {
    VkPhysicalDevice phys;
    VkPhysicalDeviceProperties props;
    int compute_family;   /* -1: none */
    bool usable;          /* Vulkan 1.2 and a compute queue */
} vf_vk_phys;

/* d's instance's devices into out[VF_VK_MAX_PHYS]; their count, or -1 with
   err set. */
int vf_vk_phys_enumerate(vf_vk_device *d, vf_vk_phys *out, vf_err *err);
/* The device to use among p[n]: index >= 0 that one, else env
   (VKFUSE_DEVICE: an index or a name substring, case-insensitive), else
   the best usable; -1 with err set (listing the devices) when none fits.
   gpu_only (VF_BACKEND_AUTO): the best must be a GPU (discrete, integrated
   or virtual), not a driver running on the CPU; when only such drivers
   are there, -1 with VF_ERROR_UNSUPPORTED and a message saying so. A
   device named by index or env is used whatever its type. */
int vf_vk_phys_pick(const vf_vk_phys *p, int n, int index, const char *env, bool gpu_only, vf_err *err);
/* A queue family with compute, one without graphics first (async compute
   queues on discrete GPUs do not compete with the display); -1: none.
   ts_bits (optional) receives its timestampValidBits. */
int vf_vk_compute_family(vf_vk_device *d, VkPhysicalDevice p, uint32_t *ts_bits);

#endif
