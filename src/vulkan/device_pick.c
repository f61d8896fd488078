#include "vulkan/device_pick.h"
#include "util/fault.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int type_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

static const char *type_name(VkPhysicalDeviceType t)
{
    static const char *const names[] = {"discrete", "integrated", "virtual", "cpu", "other"};
    return names[type_rank(t)];
}

int vf_vk_compute_family(vf_vk_device *d, VkPhysicalDevice p, uint32_t *ts_bits)
{
    uint32_t n = 0;
    d->vki.vkGetPhysicalDeviceQueueFamilyProperties(p, &n, NULL);
    VkQueueFamilyProperties q[32];
    if (n > 32) n = 32;
    d->vki.vkGetPhysicalDeviceQueueFamilyProperties(p, &n, q);
    int best = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || q[i].queueCount == 0) continue;
        if (best < 0 || (!(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) &&
                         (q[best].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            best = (int)i;
    }
    if (ts_bits) *ts_bits = best >= 0 ? q[best].timestampValidBits : 0;
    return best;
}

int vf_vk_phys_enumerate(vf_vk_device *d, vf_vk_phys *out, vf_err *err)
{
    uint32_t n = VF_VK_MAX_PHYS;
    VkPhysicalDevice ph[VF_VK_MAX_PHYS];
    VkResult r = VF_VKI(d, vkEnumeratePhysicalDevices, d->instance, &n, ph);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
        vf_vk_check(err, r, "vkEnumeratePhysicalDevices");
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        out[i].phys = ph[i];
        d->vki.vkGetPhysicalDeviceProperties(ph[i], &out[i].props);
        out[i].compute_family = vf_vk_compute_family(d, ph[i], NULL);
        out[i].usable = out[i].props.apiVersion >= VK_API_VERSION_1_2 && out[i].compute_family >= 0;
    }
    return (int)n;
}

static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (i == n) return true;
    }
    return n == 0;
}

static void list_devices(const vf_vk_phys *p, int n, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && used < len; i++) {
        int w = snprintf(buf + used, len - used, "%s[%d] %s (%s%s)", i ? ", " : "", i,
                         p[i].props.deviceName, type_name(p[i].props.deviceType),
                         p[i].usable ? "" : ", unusable: needs Vulkan 1.2 and a compute queue");
        if (w < 0) break;
        used += (size_t)w;
    }
    if (n == 0) snprintf(buf, len, "none");
}

int vf_vk_phys_pick(const vf_vk_phys *p, int n, int index, const char *env, bool gpu_only, vf_err *err)
{
    char list[1024];
    list_devices(p, n, list, sizeof list);
    if (n == 0) {
        vf_err_set(err, VF_ERROR_DEVICE, "no Vulkan device found (install a driver, e.g. "
                                         "mesa-vulkan-drivers for lavapipe)");
        return -1;
    }
    if (index < 0 && env && *env) {
        char *end = NULL;
        long v = strtol(env, &end, 10);
        if (end != env && *end == '\0') {
            index = (int)v;
            if (v < 0 || v >= n) {
                vf_err_set(err, VF_ERROR_DEVICE, "VKFUSE_DEVICE=%s: no device with that index;"
                                                 " available: %s", env, list);
                return -1;
            }
        } else {
            for (int i = 0; i < n && index < 0; i++)
                if (contains_nocase(p[i].props.deviceName, env)) index = i;
            if (index < 0) {
                vf_err_set(err, VF_ERROR_DEVICE, "VKFUSE_DEVICE='%s' matches no Vulkan device;"
                                                 " available: %s", env, list);
                return -1;
            }
        }
    }
    if (index >= 0) {
        if (index >= n) {
            vf_err_set(err, VF_ERROR_DEVICE, "device index %d out of range; available: %s",
                       index, list);
            return -1;
        }
        if (!p[index].usable) {
            vf_err_set(err, VF_ERROR_DEVICE, "device [%d] %s is not usable; available: %s",
                       index, p[index].props.deviceName, list);
            return -1;
        }
        return index;
    }
    int best = -1;
    for (int i = 0; i < n; i++)
        if (p[i].usable && (best < 0 || type_rank(p[i].props.deviceType) <
                                            type_rank(p[best].props.deviceType)))
            best = i;
    if (best < 0) {
        vf_err_set(err, VF_ERROR_DEVICE, "no usable Vulkan device (needs Vulkan 1.2 and a"
                                         " compute queue); available: %s", list);
        return -1;
    }
    /* A driver that runs on the CPU (lavapipe, SwiftShader) is slower than
       the CPU backend's C and OpenBLAS on the same cores: the default goes
       there unless the user asked for Vulkan (context.c). */
    if (gpu_only && type_rank(p[best].props.deviceType) > 2) {
        vf_err_set(err, VF_ERROR_UNSUPPORTED, "no GPU, only Vulkan devices that run on the CPU (%s), slower than the CPU"
                   " backend; VKFUSE_BACKEND=vulkan, VF_BACKEND_VULKAN or VKFUSE_DEVICE=<index or name> uses one", list);
        return -1;
    }
    return best;
}

/* ---- vf_devices ---------------------------------------------------------- */

static const char *vendor_name(uint32_t id, char *buf, size_t len)
{
    switch (id) {
    case 0x1002: return "AMD";
    case 0x10DE: return "NVIDIA";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x1010: return "ImgTec";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: snprintf(buf, len, "0x%04x", id); return buf;
    }
}

/* The largest device-local heap, and its budget where the device has
   VK_EXT_memory_budget (a physical-device query: the extension need only
   be supported, not enabled). */
static void memory_info(vf_vk_device *d, VkPhysicalDevice phys, uint32_t api, vf_device_info *o)
{
    VkPhysicalDeviceMemoryProperties mp;
    d->vki.vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    uint32_t heap = 0;
    for (uint32_t h = 0; h < mp.memoryHeapCount; h++)
        if ((mp.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            mp.memoryHeaps[h].size > o->memory_heap_bytes) {
            o->memory_heap_bytes = mp.memoryHeaps[h].size;
            heap = h;
        }
    uint32_t n = 0;
    if (api < VK_API_VERSION_1_1 || VF_VKI(d, vkEnumerateDeviceExtensionProperties, phys, NULL, &n, NULL) != VK_SUCCESS)
        return;
    VkExtensionProperties *e = vf_calloc(n ? n : 1, sizeof *e);
    bool has = false;
    if (e && VF_VKI(d, vkEnumerateDeviceExtensionProperties, phys, NULL, &n, e) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++) has |= strcmp(e[i].extensionName, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME) == 0;
    free(e);
    if (!has) return;
    VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
    VkPhysicalDeviceMemoryProperties2 mp2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2, .pNext = &b};
    d->vki.vkGetPhysicalDeviceMemoryProperties2(phys, &mp2);
    o->memory_budget_bytes = b.heapBudget[heap];
}

int vf_vulkan_devices(const vf_vk_options *opt, vf_device_info *out, int max, char *errbuf, size_t errlen)
{
    vf_err err = {0};
    vf_vk_device *d = vf_calloc(1, sizeof *d);
    if (!d) {
        if (errbuf && errlen) snprintf(errbuf, errlen, "out of host memory (malloc failed)");
        return 0;
    }
    int n = 0;
    vf_vk_phys p[VF_VK_MAX_PHYS];
    if (vf_vk_instance_create(d, false, opt->loader, &err) == VF_OK) n = vf_vk_phys_enumerate(d, p, &err);
    if (n < 0) n = 0;
    vf_err pick_err = {0};
    int chosen = n > 0 ? vf_vk_phys_pick(p, n, opt->device_index, opt->device_env, opt->gpu_only, &pick_err) : -1;
    if (chosen < 0 && n > 0 && err.status == VF_OK) err = pick_err;
    for (int i = 0; i < n && i < max && out; i++) {
        vf_device_info *o = &out[i];
        memset(o, 0, sizeof *o);
        const VkPhysicalDeviceProperties *pr = &p[i].props;
        snprintf(o->name, sizeof o->name, "%s", pr->deviceName);
        o->vendor_id = pr->vendorID;
        o->device_id = pr->deviceID;
        o->driver_version = pr->driverVersion;
        o->api_version = pr->apiVersion;
        char vb[32];
        snprintf(o->vendor, sizeof o->vendor, "%s", vendor_name(pr->vendorID, vb, sizeof vb));
        snprintf(o->type, sizeof o->type, "%s", type_name(pr->deviceType));
        o->shared_memory_bytes = pr->limits.maxComputeSharedMemorySize;
        o->max_storage_buffer_range = pr->limits.maxStorageBufferRange;
        o->chosen = i == chosen;
        memory_info(d, p[i].phys, pr->apiVersion, o);
        if (pr->apiVersion < VK_API_VERSION_1_1) continue; /* no *2 queries */
        VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
        VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                                 .pNext = pr->apiVersion >= VK_API_VERSION_1_2 ? &drv : NULL};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
        d->vki.vkGetPhysicalDeviceProperties2(p[i].phys, &p2);
        o->subgroup_size = sg.subgroupSize;
        o->subgroup_arithmetic = (sg.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                                 (sg.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
        if (drv.driverName[0])
            snprintf(o->driver, sizeof o->driver, "%.120s %.120s", drv.driverName, drv.driverInfo);
        if (pr->apiVersion >= VK_API_VERSION_1_2) {
            VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
            VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                                    .pNext = &f12};
            VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
            d->vki.vkGetPhysicalDeviceFeatures2(p[i].phys, &f2);
            o->fp16 = f12.shaderFloat16;
            o->storage16 = f11.storageBuffer16BitAccess;
        }
    }
    if (errbuf && errlen) snprintf(errbuf, errlen, "%s", err.status ? err.message : "");
    vf_vk_device_destroy(d);
    free(d);
    return n;
}
