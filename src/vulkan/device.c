/* The Vulkan instance (with the validation layer and its messages) and the
 * logical device: what the chosen device has (caps, the codegen profile,
 * VKFUSE_TEST_CAPS) and what is enabled. Choosing and listing physical
 * devices is device_pick.c. */
#include "vulkan/device.h"
#include "util/fault.h"
#include "vulkan/device_pick.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define VF_VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"

vf_status vf_vk_check(vf_err *err, VkResult r, const char *what)
{
    if (r == VK_SUCCESS) return VF_OK;
    if (r == VK_ERROR_DEVICE_LOST)
        return vf_err_set(err, VF_ERROR_DEVICE,
                          "vulkan: the device was lost during %s (VK_ERROR_DEVICE_LOST): its work and memory"
                          " are gone; create a new context", what);
    vf_status s = (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY)
                      ? VF_ERROR_OUT_OF_MEMORY
                      : VF_ERROR_DEVICE;
    return vf_err_set(err, s, "vulkan: %s failed: %s (%d)", what, vf_vk_result_name(r), (int)r);
}

/* ---- validation messages ------------------------------------------------ */

static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user)
{
    (void)types;
    vf_vk_device *d = user;
    if (!(severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
        return VK_FALSE;
    const char *id = data && data->pMessageIdName ? data->pMessageIdName : "";
    const char *msg = data && data->pMessage ? data->pMessage : "(no message)";
    /* The loader reports through the same messenger ("found no drivers"
       when falling back to the CPU is the plan): not a validation finding. */
    if (strcmp(id, "Loader Message") == 0) {
        if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
            fprintf(stderr, "vkfuse: Vulkan loader: %s\n", msg);
        return VK_FALSE;
    }
    /* The prefix is what the tests (and users' CI) grep for. */
    fprintf(stderr, "VKFUSE-VALIDATION: [%s] %s\n", id, msg);
    if (d) {
        d->validation_messages++;
        vf_err_set(d->err, VF_ERROR_DEVICE, "Vulkan validation: [%s] %s", id, msg);
    }
    return VK_FALSE; /* never abort the call that triggered it */
}

/* ---- instance ----------------------------------------------------------- */

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(e[i].extensionName, name) == 0) return true;
    return false;
}

static bool has_layer(vf_vk_device *d, const char *name)
{
    uint32_t n = 0;
    if (VF_VKG(d, vkEnumerateInstanceLayerProperties, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkLayerProperties *p = vf_calloc(n, sizeof *p);
    if (!p) return false;
    bool found = false;
    if (VF_VKG(d, vkEnumerateInstanceLayerProperties, &n, p) == VK_SUCCESS)
        for (uint32_t i = 0; i < n; i++)
            if (strcmp(p[i].layerName, name) == 0) found = true;
    free(p);
    return found;
}

/* Extensions of the implementation (layer NULL) or of one layer. */
static VkExtensionProperties *instance_exts(vf_vk_device *d, const char *layer, uint32_t *n)
{
    *n = 0;
    if (VF_VKG(d, vkEnumerateInstanceExtensionProperties, layer, n, NULL) != VK_SUCCESS) return NULL;
    VkExtensionProperties *e = vf_calloc(*n ? *n : 1, sizeof *e);
    if (e && VF_VKG(d, vkEnumerateInstanceExtensionProperties, layer, n, e) != VK_SUCCESS) *n = 0;
    return e;
}

vf_status vf_vk_instance_create(vf_vk_device *d, bool validation, const char *loader, vf_err *err)
{
    vf_status s = vf_vk_loader_open(&d->loader, loader, err);
    if (s) return s;
    uint32_t loader_version = VK_API_VERSION_1_0;
    if (d->loader.vk.vkEnumerateInstanceVersion) {
        VkResult r = VF_VKG(d, vkEnumerateInstanceVersion, &loader_version);
        if (r != VK_SUCCESS)
            return vf_err_set(err, VF_ERROR_DEVICE, "vkEnumerateInstanceVersion failed: %s", vf_vk_result_name(r));
    }
    if (loader_version < VK_API_VERSION_1_2)
        return vf_err_set(err, VF_ERROR_DEVICE,
                          "Vulkan loader %s supports Vulkan %u.%u; vkfuse needs 1.2",
                          d->loader.lib_name, VK_API_VERSION_MAJOR(loader_version),
                          VK_API_VERSION_MINOR(loader_version));

    uint32_t n_ext = 0, n_layer_ext = 0;
    VkExtensionProperties *ext = instance_exts(d, NULL, &n_ext);
    const char *exts[4];
    uint32_t n_exts = 0;
    const char *layers[1];
    uint32_t n_layers = 0;
    VkInstanceCreateFlags flags = 0;
    /* Portability drivers (MoltenVK) are only listed when asked for. */
    if (ext && has_ext(ext, n_ext, VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME)) {
        exts[n_exts++] = VK_KHR_PORTABILITY_ENUMERATION_EXTENSION_NAME;
        flags |= VK_INSTANCE_CREATE_ENUMERATE_PORTABILITY_BIT_KHR;
    }
    bool sync_val = false;
    if (validation) {
        if (!has_layer(d, VF_VALIDATION_LAYER)) {
            /* Not an error: a user's VKFUSE_VALIDATION=1 should not turn the
               GPU off. Tests check vf_vk_device.validation themselves. */
            fprintf(stderr, "vkfuse: validation requested but %s is not installed;"
                            " running without it\n", VF_VALIDATION_LAYER);
            validation = false;
        } else {
            layers[n_layers++] = VF_VALIDATION_LAYER;
            VkExtensionProperties *lext = instance_exts(d, VF_VALIDATION_LAYER, &n_layer_ext);
            bool du = (ext && has_ext(ext, n_ext, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) ||
                      (lext && has_ext(lext, n_layer_ext, VK_EXT_DEBUG_UTILS_EXTENSION_NAME));
            sync_val = lext && has_ext(lext, n_layer_ext, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
            free(lext);
            if (!du) {
                free(ext);
                return vf_err_set(err, VF_ERROR_DEVICE, "validation requested but %s is missing",
                                  VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
            }
            exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
            if (sync_val) exts[n_exts++] = VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME;
        }
    }
    free(ext);

    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "vkfuse",
        .pEngineName = "vkfuse",
        .engineVersion = VK_MAKE_API_VERSION(0, VKFUSE_VERSION_MAJOR, VKFUSE_VERSION_MINOR,
                                             VKFUSE_VERSION_PATCH),
        .apiVersion = loader_version >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
    };
    VkDebugUtilsMessengerCreateInfoEXT dbg = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = on_debug_message,
        .pUserData = d,
    };
    const VkValidationFeatureEnableEXT enables[] = {
        VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
    VkValidationFeaturesEXT features = {
        .sType = VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT,
        .pNext = &dbg,
        .enabledValidationFeatureCount = 1,
        .pEnabledValidationFeatures = enables,
    };
    VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        /* Chaining the messenger info also reports messages of
           vkCreateInstance / vkDestroyInstance themselves. */
        .pNext = validation ? (sync_val ? (const void *)&features : (const void *)&dbg) : NULL,
        .flags = flags,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = VF_VKG(d, vkCreateInstance, &ici, NULL, &d->instance);
    vf_vk_pin_loaded_libraries();
    if (r != VK_SUCCESS) {
        d->instance = VK_NULL_HANDLE;
        if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
            return vf_err_set(err, VF_ERROR_DEVICE,
                              "no Vulkan device: the loader found no driver for Vulkan %u.%u"
                              " (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER); install one,"
                              " e.g. mesa-vulkan-drivers for lavapipe",
                              VK_API_VERSION_MAJOR(app.apiVersion), VK_API_VERSION_MINOR(app.apiVersion));
        return vf_err_set(err, VF_ERROR_DEVICE, "vkCreateInstance (Vulkan %u.%u%s) failed: %s",
                          VK_API_VERSION_MAJOR(app.apiVersion), VK_API_VERSION_MINOR(app.apiVersion),
                          validation ? ", validation" : "", vf_vk_result_name(r));
    }
    s = vf_vk_instance_table_load(&d->loader, d->instance, &d->vki, err);
    if (s) return s;
    if (validation) {
        if (!d->vki.vkCreateDebugUtilsMessengerEXT)
            return vf_err_set(err, VF_ERROR_DEVICE, "vkCreateDebugUtilsMessengerEXT is missing");
        s = vf_vk_check(err, VF_VKI(d, vkCreateDebugUtilsMessengerEXT, d->instance, &dbg, NULL,
                                                                   &d->messenger),
                        "vkCreateDebugUtilsMessengerEXT");
        if (s) return s;
    }
    d->validation = validation;
    d->sync_validation = validation && sync_val;
    return VF_OK;
}

/* ---- logical device ----------------------------------------------------- */

static void fill_caps(vf_vk_device *d, const VkPhysicalDeviceSubgroupProperties *sg,
                      const VkPhysicalDeviceVulkan11Features *f11,
                      const VkPhysicalDeviceVulkan12Features *f12)
{
    const VkPhysicalDeviceLimits *L = &d->props.limits;
    vf_device_caps *c = &d->caps;
    memset(c, 0, sizeof *c);
    c->vendor_id = d->props.vendorID;
    c->is_cpu = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    c->subgroup_size = sg->subgroupSize;
    bool compute = (sg->supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
    c->subgroup_arithmetic = compute && (sg->supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
    /* subgroupBroadcast is in the ballot set, subgroupShuffle in shuffle. */
    c->subgroup_shuffle = compute && (sg->supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT) &&
                          (sg->supportedOperations & VK_SUBGROUP_FEATURE_BALLOT_BIT);
    c->max_workgroup_invocations = L->maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) {
        c->max_workgroup_size[i] = L->maxComputeWorkGroupSize[i];
        c->max_workgroup_count[i] = L->maxComputeWorkGroupCount[i];
    }
    c->shared_memory_bytes = L->maxComputeSharedMemorySize;
    c->max_push_constants = L->maxPushConstantsSize;
    c->max_storage_buffer_range = L->maxStorageBufferRange;
    c->min_storage_buffer_offset_alignment = (uint32_t)L->minStorageBufferOffsetAlignment;
    c->storage16 = f11->storageBuffer16BitAccess;
    c->storage8 = f12->storageBuffer8BitAccess;
    c->shader_float16 = f12->shaderFloat16;
    c->shader_int8 = f12->shaderInt8;
}

/* llvmpipe's storage-buffer loads are a loop over the lanes; its texel
   fetches are vector gathers (vf_device_caps.texel_reads). */
static bool driver_texel_reads(VkDriverId id) { return id == VK_DRIVER_ID_MESA_LLVMPIPE; }

/* llvmpipe (lavapipe) counts the iterations of all loops of a shader
   invocation together and leaves every loop once 65535 are done
   (LP_MAX_TGSI_LOOP_ITERATIONS in Mesa's gallivm): no error, no message,
   the rest of the work is silently skipped. A column sum over 65536 rows
   lost its last row. Codegen keeps loops short on such a driver. */
static uint32_t driver_loop_limit(VkDriverId id)
{
    return id == VK_DRIVER_ID_MESA_LLVMPIPE ? 65535u : 0u;
}

/* VKFUSE_TEST_CAPS=gpu|gpu-nosubgroup|cpu|device (testing): the tuning
   profile codegen takes, whatever the device's type. The GPU profile
   (shared-memory matmul tiles, 256-wide rows and reductions that combine
   many subgroups through shared memory, short row caches) is what discrete
   GPUs run; forced on lavapipe it runs and is checked in every CI run.
   Only is_cpu changes: the limits, shared memory and subgroup size stay
   the device's real ones, so every kernel stays within what the driver
   executes (the subgroup size a kernel assumes is the one it gets).
   gpu-nosubgroup also drops subgroup arithmetic, as on GPUs without it
   (shared-memory trees; using fewer features is valid on any device).
   cpu-notexel is the CPU profile with every input read through storage
   buffers, as before llvmpipe's texel reads (texel_reads), so both are
   checked on lavapipe. Unset, empty or "device": the device's own profile. Read once, when the
   device (the context) is created: v is the option's value. */
static vf_status apply_test_caps(vf_device_caps *c, const char *v, vf_err *err)
{
    if (!v || !*v || strcasecmp(v, "device") == 0) return VF_OK;
    if (strcasecmp(v, "gpu") == 0) c->is_cpu = false;
    else if (strcasecmp(v, "gpu-nosubgroup") == 0)
        c->is_cpu = c->subgroup_arithmetic = c->subgroup_shuffle = false;
    else if (strcasecmp(v, "cpu") == 0) c->is_cpu = true;
    else if (strcasecmp(v, "cpu-notexel") == 0) c->is_cpu = true, c->texel_reads = false;
    else
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                          "VKFUSE_TEST_CAPS=%s is not a codegen profile; use gpu, gpu-nosubgroup, cpu, cpu-notexel"
                          " or device (or unset it)", v);
    return VF_OK;
}

static vf_status create_logical(vf_vk_device *d, const vf_vk_phys *pi, const vf_vk_device_options *opt, vf_err *err)
{
    d->phys = pi->phys;
    d->props = pi->props;
    d->queue_family = (uint32_t)vf_vk_compute_family(d, pi->phys, &d->timestamp_valid_bits);
    d->timestamp_period = d->props.limits.timestampPeriod;
    if (!d->props.limits.timestampComputeAndGraphics) d->timestamp_valid_bits = 0;
    d->vki.vkGetPhysicalDeviceMemoryProperties(d->phys, &d->mem_props);
    snprintf(d->name, sizeof d->name, "%s", d->props.deviceName);

    /* What the device has ... */
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
                                             .pNext = &drv};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
    d->vki.vkGetPhysicalDeviceProperties2(d->phys, &p2);
    VkPhysicalDeviceVulkan12Features h12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceVulkan11Features h11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &h12};
    VkPhysicalDeviceFeatures2 hf = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &h11};
    d->vki.vkGetPhysicalDeviceFeatures2(d->phys, &hf);

    /* ... and what we turn on: only what kernels may use, so validation
       catches a kernel that needs something we did not ask for. */
    VkPhysicalDeviceVulkan12Features e12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .storageBuffer8BitAccess = h12.storageBuffer8BitAccess,
        .uniformAndStorageBuffer8BitAccess = h12.uniformAndStorageBuffer8BitAccess,
        .shaderFloat16 = h12.shaderFloat16,
        .shaderInt8 = h12.shaderInt8,
        .hostQueryReset = h12.hostQueryReset,
    };
    VkPhysicalDeviceVulkan11Features e11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &e12,
        .storageBuffer16BitAccess = h11.storageBuffer16BitAccess,
        .uniformAndStorageBuffer16BitAccess = h11.uniformAndStorageBuffer16BitAccess,
    };
    VkPhysicalDeviceFeatures2 ef = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
        .pNext = &e11,
        /* robustBufferAccess: a user kernel's access outside its bindings'
           ranges (docs/KERNELS.md) is discarded (a write) or reads zeros or
           in-range values, never another tensor's memory nor a fault. It is
           device-wide (lavapipe 22.3 has no VK_EXT_pipeline_robustness to
           ask it for user kernels only); VKFUSE_ROBUST=0 turns it off.
           docs/BENCHMARKS.md: its cost on the generated kernels. */
        .features = {.shaderInt16 = hf.features.shaderInt16,
                     .shaderInt64 = hf.features.shaderInt64,
                     .shaderFloat64 = hf.features.shaderFloat64,
                     .robustBufferAccess = hf.features.robustBufferAccess && !opt->no_robust},
    };

    uint32_t n_ext = 0;
    VF_VKI(d, vkEnumerateDeviceExtensionProperties, d->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = vf_calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    VF_VKI(d, vkEnumerateDeviceExtensionProperties, d->phys, NULL, &n_ext, ext);
    const char *exts[3];
    uint32_t n_exts = 0;
    if (!opt->no_push_descriptors && has_ext(ext, n_ext, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME))
        exts[n_exts++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
    bool push = n_exts == 1;
    /* the heap budget, respected as VKFUSE_DEVICE_MEMORY_LIMIT is (memory.c) */
    bool budget = has_ext(ext, n_ext, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    if (budget) exts[n_exts++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    if (has_ext(ext, n_ext, "VK_KHR_portability_subset")) exts[n_exts++] = "VK_KHR_portability_subset";
    free(ext);

    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
        .queueFamilyIndex = d->queue_family,
        .queueCount = 1,
        .pQueuePriorities = &prio,
    };
    VkDeviceCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
        .pNext = &ef,
        .queueCreateInfoCount = 1,
        .pQueueCreateInfos = &qci,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    d->enabled = ef.features;
    d->enabled11 = e11;
    d->enabled12 = e12;
    for (uint32_t i = 0; i < n_exts; i++) d->enabled_exts[i] = exts[i];
    d->n_enabled_exts = n_exts;
    VkResult r = VF_VKI(d, vkCreateDevice, d->phys, &dci, NULL, &d->device);
    vf_vk_pin_loaded_libraries();
    if (r != VK_SUCCESS) {
        d->device = VK_NULL_HANDLE;
        return vf_err_set(err, VF_ERROR_DEVICE, "vkCreateDevice on %s failed: %s", d->name,
                          vf_vk_result_name(r));
    }
    vf_status s = vf_vk_device_table_load(&d->vki, d->device, &d->vkd, err);
    if (s) return s;
    d->push_descriptors = push && d->vkd.vkCmdPushDescriptorSetKHR != NULL;
    d->memory_budget = budget;
    d->vkd.vkGetDeviceQueue(d->device, d->queue_family, 0, &d->queue);
    fill_caps(d, &sg, &h11, &h12);
    /* the driver's loop limit (gallivm's LP_MAX_TGSI_LOOP_ITERATIONS on
       llvmpipe: one counter for all the loops of an invocation, and past
       it the loops just stop); then the test overrides: smaller limits
       (VKFUSE_TEST_LIMITS), then the codegen profile (VKFUSE_TEST_CAPS) */
    d->caps.max_loop_iterations = driver_loop_limit(drv.driverID);
    d->caps.texel_reads = driver_texel_reads(drv.driverID);
    s = vf_vk_test_limits_apply(d, opt->test_limits, err);
    return s == VF_OK ? apply_test_caps(&d->caps, opt->test_caps, err) : s;
}

/* VKFUSE_TEST_LIMITS and VKFUSE_TEST_CAPS parsed on a scratch device. */
static vf_status check_test_settings(const vf_vk_device_options *opt, vf_err *err)
{
    if ((!opt->test_limits || !*opt->test_limits) && (!opt->test_caps || !*opt->test_caps)) return VF_OK;
    vf_vk_device *scratch = vf_calloc(1, sizeof *scratch);
    if (!scratch) return vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    vf_status s = vf_vk_test_limits_apply(scratch, opt->test_limits, err);
    if (!s) s = apply_test_caps(&scratch->caps, opt->test_caps, err);
    free(scratch);
    return s;
}

vf_status vf_vk_device_create(vf_vk_device *d, const vf_vk_device_options *opt, vf_err *err)
{
    memset(d, 0, sizeof *d);
    d->test.wrong_exec = -1; /* off (device.h) */
    d->err = err;
    vf_status s = vf_vk_instance_create(d, opt->validation, opt->loader, err);
    vf_vk_phys p[VF_VK_MAX_PHYS];
    int n = 0, idx = -1;
    if (!s) {
        n = vf_vk_phys_enumerate(d, p, err);
        if (n < 0) s = VF_ERROR_DEVICE;
    }
    /* The settings are checked before the pick: a wrong one is an error
       even where the default then goes to the CPU backend (no GPU). */
    if (!s) s = check_test_settings(opt, err);
    if (!s) {
        idx = vf_vk_phys_pick(p, n, opt->device_index, opt->device_env, opt->gpu_only, err);
        if (idx < 0) s = err->status ? err->status : VF_ERROR_DEVICE;
    }
    if (!s) {
        d->index = idx;
        d->api_version = p[idx].props.apiVersion;
        s = create_logical(d, &p[idx], opt, err);
    }
    if (s) {
        vf_vk_device_destroy(d);
        d->err = err;
    }
    return s;
}

vf_status vf_vk_device_twin(const vf_vk_device *d, VkDevice *dev, vf_vk_device_table *vkd, VkQueue *queue,
                            vf_err *err)
{
    *dev = VK_NULL_HANDLE;
    VkPhysicalDeviceVulkan12Features e12 = d->enabled12;
    VkPhysicalDeviceVulkan11Features e11 = d->enabled11;
    e12.pNext = NULL;
    e11.pNext = &e12;
    VkPhysicalDeviceFeatures2 ef = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &e11,
                                    .features = d->enabled};
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = d->queue_family, .queueCount = 1, .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &ef, .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci, .enabledExtensionCount = d->n_enabled_exts,
                              .ppEnabledExtensionNames = d->enabled_exts};
    /* no VF_VKI: fault injection counts the calling thread's calls */
    VkResult r = d->vki.vkCreateDevice(d->phys, &dci, NULL, dev);
    if (r != VK_SUCCESS) {
        *dev = VK_NULL_HANDLE;
        return vf_err_set(err, VF_ERROR_DEVICE, "vkCreateDevice (a second device on %s) failed: %s", d->name,
                          vf_vk_result_name(r));
    }
    vf_status s = vf_vk_device_table_load(&d->vki, *dev, vkd, err);
    if (s) { /* the main device loaded the same table: not expected */
        PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)d->vki.vkGetDeviceProcAddr(*dev, "vkDestroyDevice");
        if (destroy) destroy(*dev, NULL);
        *dev = VK_NULL_HANDLE;
        return s;
    }
    vkd->vkGetDeviceQueue(*dev, d->queue_family, 0, queue);
    return VF_OK;
}

void vf_vk_device_destroy(vf_vk_device *d)
{
    if (d->abandoned) {
        /* its work may still run: the device cannot go, so neither can its
           instance nor the driver's code (the loader stays open) */
        memset(d, 0, sizeof *d);
        return;
    }
    if (d->device) {
        if (!d->lost) VF_VKD(d, vkDeviceWaitIdle, d->device);
        d->vkd.vkDestroyDevice(d->device, NULL);
    }
    if (d->messenger && d->vki.vkDestroyDebugUtilsMessengerEXT)
        d->vki.vkDestroyDebugUtilsMessengerEXT(d->instance, d->messenger, NULL);
    if (d->instance) d->vki.vkDestroyInstance(d->instance, NULL);
    vf_vk_loader_close(&d->loader);
    memset(d, 0, sizeof *d);
}

bool vf_vk_heap_budget(const vf_vk_device *d, uint32_t heap, int64_t *budget, int64_t *usage)
{
    *budget = 0;
    *usage = -1;
    if (heap >= VK_MAX_MEMORY_HEAPS) return false;
    if (d->memory_budget) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                                .pNext = &b};
        d->vki.vkGetPhysicalDeviceMemoryProperties2(d->phys, &mp);
        *budget = (int64_t)b.heapBudget[heap];
        *usage = (int64_t)b.heapUsage[heap];
    }
    if (d->test.memory_budget > 0 && (*budget <= 0 || d->test.memory_budget < *budget))
        *budget = d->test.memory_budget;
    return *budget > 0;
}

int vf_vk_find_memory_type(const vf_vk_device *d, uint32_t type_bits, VkMemoryPropertyFlags want)
{
    for (uint32_t i = 0; i < d->mem_props.memoryTypeCount; i++)
        if ((type_bits & (1u << i)) && (d->mem_props.memoryTypes[i].propertyFlags & want) == want)
            return (int)i;
    return -1;
}

vf_status vf_vk_lost(vf_vk_device *d, vf_err *err, const char *where)
{
    if (!d->lost) return VF_OK;
    return vf_err_set(err, VF_ERROR_DEVICE,
                      "%s: the device was lost during %s (earlier; VK_ERROR_DEVICE_LOST or a wait that timed out);"
                      " nothing more runs on it: create a new context", where, d->lost_during);
}
