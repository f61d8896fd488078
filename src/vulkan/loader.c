#include "vulkan/loader.h"
#include "vulkan/device.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vf_status vf_vk_loader_open(vf_vk_loader *l, const char *env, vf_err *err)
{
    /* libvulkan.so.1 is the ABI name every loader ships; the unversioned
       name only exists with the -dev package, so it is the fallback. */
    static const char *const std_names[] = {"libvulkan.so.1", "libvulkan.so"};
    /* env (VKFUSE_VULKAN_LOADER) names another loader (or a missing one,
       which is how the tests check the no-loader fallback). */
    const char *names[2] = {std_names[0], std_names[1]};
    size_t n_names = 2;
    if (env && *env) names[0] = env, n_names = 1;
    memset(l, 0, sizeof *l);
    const char *why = "";
    for (size_t i = 0; i < n_names && !l->lib; i++) {
        l->lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (l->lib)
            snprintf(l->lib_name, sizeof l->lib_name, "%s", names[i]);
        else
            why = dlerror();
    }
    if (!l->lib)
        return vf_err_set(err, VF_ERROR_DEVICE,
                          "Vulkan loader not found: dlopen(%s) failed (%s); install the Vulkan"
                          " loader (libvulkan1) and a driver", n_names == 1 ? names[0] : "libvulkan.so.1 / libvulkan.so",
                          why ? why : "unknown reason");
    /* POSIX allows converting dlsym's object pointer to a function pointer;
       the memcpy keeps -Wpedantic quiet about it. */
    void *sym = dlsym(l->lib, "vkGetInstanceProcAddr");
    memcpy(&l->gipa, &sym, sizeof l->gipa);
    if (!l->gipa) {
        vf_vk_loader_close(l);
        return vf_err_set(err, VF_ERROR_DEVICE,
                          "Vulkan loader %s has no vkGetInstanceProcAddr", names[0]);
    }
#define VF_LOAD_GLOBAL(name)                                                              \
    l->vk.name = (PFN_##name)l->gipa(VK_NULL_HANDLE, #name);                              \
    if (!l->vk.name) {                                                                    \
        vf_vk_loader_close(l);                                                            \
        return vf_err_set(err, VF_ERROR_DEVICE, "Vulkan loader lacks %s", #name);         \
    }
    VF_VK_GLOBAL_FUNCS(VF_LOAD_GLOBAL)
#undef VF_LOAD_GLOBAL
    l->vk.vkEnumerateInstanceVersion =
        (PFN_vkEnumerateInstanceVersion)l->gipa(VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
    return VF_OK;
}

void vf_vk_loader_close(vf_vk_loader *l)
{
    if (l->lib) dlclose(l->lib);
    memset(l, 0, sizeof *l);
}

vf_status vf_vk_instance_table_load(const vf_vk_loader *l, VkInstance inst,
                                    vf_vk_instance_table *t, vf_err *err)
{
    memset(t, 0, sizeof *t);
#define VF_LOAD_INST(name)                                                                \
    t->name = (PFN_##name)l->gipa(inst, #name);                                           \
    if (!t->name)                                                                         \
        return vf_err_set(err, VF_ERROR_DEVICE, "Vulkan instance lacks %s", #name);
    VF_VK_INSTANCE_FUNCS(VF_LOAD_INST)
#undef VF_LOAD_INST
#define VF_LOAD_INST_OPT(name) t->name = (PFN_##name)l->gipa(inst, #name);
    VF_VK_INSTANCE_OPTIONAL_FUNCS(VF_LOAD_INST_OPT)
#undef VF_LOAD_INST_OPT
    return VF_OK;
}

vf_status vf_vk_device_table_load(const vf_vk_instance_table *it, VkDevice dev,
                                  vf_vk_device_table *t, vf_err *err)
{
    /* Device-level pointers from vkGetDeviceProcAddr skip the loader's
       dispatch trampoline: volk's main point. */
    memset(t, 0, sizeof *t);
#define VF_LOAD_DEV(name)                                                                 \
    t->name = (PFN_##name)it->vkGetDeviceProcAddr(dev, #name);                            \
    if (!t->name)                                                                         \
        return vf_err_set(err, VF_ERROR_DEVICE, "Vulkan device lacks %s", #name);
    VF_VK_DEVICE_FUNCS(VF_LOAD_DEV)
#undef VF_LOAD_DEV
#define VF_LOAD_DEV_OPT(name) t->name = (PFN_##name)it->vkGetDeviceProcAddr(dev, #name);
    VF_VK_DEVICE_OPTIONAL_FUNCS(VF_LOAD_DEV_OPT)
#undef VF_LOAD_DEV_OPT
    return VF_OK;
}

/* The injected result, per thread: the shader compile threads call Vulkan
   too (pipeline.c). */
static _Thread_local VkResult injected;

bool vf_vk_inject(vf_fault_site site)
{
    vf_fault_kind k = vf_fault_hit(site);
    switch (k) {
    case VF_FAULT_KIND_NONE: return false;
    case VF_FAULT_OOM_DEVICE: injected = VK_ERROR_OUT_OF_DEVICE_MEMORY; break;
    case VF_FAULT_OOM_HOST: injected = VK_ERROR_OUT_OF_HOST_MEMORY; break;
    case VF_FAULT_DEVICE_LOST: injected = VK_ERROR_DEVICE_LOST; break;
    case VF_FAULT_INIT_FAILED: injected = VK_ERROR_INITIALIZATION_FAILED; break;
    case VF_FAULT_TIMEOUT: injected = VK_TIMEOUT; break;
    case VF_FAULT_FAIL:
        /* the site's own failure where it has one */
        injected = site == VF_FAULT_vkMapMemory                ? VK_ERROR_MEMORY_MAP_FAILED
                   : site == VF_FAULT_vkAllocateDescriptorSets ? VK_ERROR_OUT_OF_POOL_MEMORY
                                                               : VK_ERROR_UNKNOWN;
        break;
    }
    return true;
}

VkResult vf_vk_injected(void) { return injected; }

VkResult vf_vk_lost_note(vf_vk_device *d, const char *what, VkResult r)
{
    if (d && !d->lost) {
        d->lost = true;
        snprintf(d->lost_during, sizeof d->lost_during, "%s", what);
    }
    return r;
}

/* ---- an abandoned device --------------------------------------------------
 * The no-op stand-ins of the destroy and free entries (abandon in
 * loader.h): one per signature, so that no call goes through a function
 * pointer of another type. */
#define VF_ABANDON_STUB(fn, T)                                                                  \
    static VKAPI_ATTR void VKAPI_CALL abandoned_##fn(VkDevice d, T h, const VkAllocationCallbacks *a) \
    {                                                                                           \
        (void)d, (void)h, (void)a;                                                              \
    }
VF_ABANDON_STUB(vkFreeMemory, VkDeviceMemory)
VF_ABANDON_STUB(vkDestroyBuffer, VkBuffer)
VF_ABANDON_STUB(vkDestroyShaderModule, VkShaderModule)
VF_ABANDON_STUB(vkDestroyPipelineCache, VkPipelineCache)
VF_ABANDON_STUB(vkDestroyPipeline, VkPipeline)
VF_ABANDON_STUB(vkDestroyPipelineLayout, VkPipelineLayout)
VF_ABANDON_STUB(vkDestroyDescriptorSetLayout, VkDescriptorSetLayout)
VF_ABANDON_STUB(vkDestroyDescriptorPool, VkDescriptorPool)
VF_ABANDON_STUB(vkDestroyCommandPool, VkCommandPool)
VF_ABANDON_STUB(vkDestroyFence, VkFence)
VF_ABANDON_STUB(vkDestroyQueryPool, VkQueryPool)
#undef VF_ABANDON_STUB
static VKAPI_ATTR void VKAPI_CALL abandoned_vkDestroyDevice(VkDevice d, const VkAllocationCallbacks *a)
{
    (void)d, (void)a;
}
static VKAPI_ATTR void VKAPI_CALL abandoned_vkUnmapMemory(VkDevice d, VkDeviceMemory m) { (void)d, (void)m; }
static VKAPI_ATTR void VKAPI_CALL abandoned_vkFreeCommandBuffers(VkDevice d, VkCommandPool p, uint32_t n,
                                                                 const VkCommandBuffer *c)
{
    (void)d, (void)p, (void)n, (void)c;
}

void vf_vk_device_table_abandon(vf_vk_device_table *t)
{
#define VF_ABANDON(fn) t->fn = abandoned_##fn;
    VF_ABANDON(vkFreeMemory) VF_ABANDON(vkDestroyBuffer) VF_ABANDON(vkDestroyShaderModule)
    VF_ABANDON(vkDestroyPipelineCache) VF_ABANDON(vkDestroyPipeline) VF_ABANDON(vkDestroyPipelineLayout)
    VF_ABANDON(vkDestroyDescriptorSetLayout) VF_ABANDON(vkDestroyDescriptorPool)
    VF_ABANDON(vkDestroyCommandPool) VF_ABANDON(vkDestroyFence) VF_ABANDON(vkDestroyQueryPool)
    VF_ABANDON(vkDestroyDevice) VF_ABANDON(vkUnmapMemory) VF_ABANDON(vkFreeCommandBuffers)
#undef VF_ABANDON
}

const char *vf_vk_result_name(VkResult r)
{
    switch (r) {
#define VF_CASE(x) case x: return #x;
    VF_CASE(VK_SUCCESS)
    VF_CASE(VK_NOT_READY)
    VF_CASE(VK_TIMEOUT)
    VF_CASE(VK_INCOMPLETE)
    VF_CASE(VK_ERROR_OUT_OF_HOST_MEMORY)
    VF_CASE(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VF_CASE(VK_ERROR_INITIALIZATION_FAILED)
    VF_CASE(VK_ERROR_DEVICE_LOST)
    VF_CASE(VK_ERROR_MEMORY_MAP_FAILED)
    VF_CASE(VK_ERROR_LAYER_NOT_PRESENT)
    VF_CASE(VK_ERROR_EXTENSION_NOT_PRESENT)
    VF_CASE(VK_ERROR_FEATURE_NOT_PRESENT)
    VF_CASE(VK_ERROR_INCOMPATIBLE_DRIVER)
    VF_CASE(VK_ERROR_TOO_MANY_OBJECTS)
    VF_CASE(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VF_CASE(VK_ERROR_FRAGMENTED_POOL)
    VF_CASE(VK_ERROR_OUT_OF_POOL_MEMORY)
    VF_CASE(VK_ERROR_INVALID_SHADER_NV)
    VF_CASE(VK_ERROR_UNKNOWN)
#undef VF_CASE
    default: return "VK_ERROR_UNKNOWN";
    }
}

#ifdef VKFUSE_SANITIZE_BUILD
/* The loader dlcloses drivers and layers at vkDestroyInstance; leaks they
   made are then reported at exit against "<unknown module>", which no
   suppression by library name can match (tests/lsan.supp). Sanitizer
   builds therefore keep every library loaded so far resident. */
static int pin_one(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (info->dlpi_name && info->dlpi_name[0]) dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

void vf_vk_pin_loaded_libraries(void) { dl_iterate_phdr(pin_one, NULL); }
#else
void vf_vk_pin_loaded_libraries(void) {}
#endif
