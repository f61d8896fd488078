#include "vulkan/pipeline.h"
#include "util/fault.h"
#include "util/clock.h"
#include "vulkan/disk_cache.h"
#include "vulkan/codegen/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Vulkan's own header at the start of pipeline-cache data
   (VkPipelineCacheHeaderVersionOne), checked before handing data back. */
static bool vulkan_header_ok(const vf_vk_device *d, const uint8_t *data, size_t size)
{
    if (size < 32) return false;
    uint32_t len, version, vendor, device;
    memcpy(&len, data, 4);
    memcpy(&version, data + 4, 4);
    memcpy(&vendor, data + 8, 4);
    memcpy(&device, data + 12, 4);
    return len >= 32 && len <= size && version == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
           vendor == d->props.vendorID && device == d->props.deviceID &&
           memcmp(data + 16, d->props.pipelineCacheUUID, VK_UUID_SIZE) == 0;
}

static uint64_t pipeline_cache_key(const vf_vk_device *d)
{
    uint32_t ids[3] = {d->props.vendorID, d->props.deviceID, d->props.driverVersion};
    return vf_hash64(ids, sizeof ids, 0x5043);
}

vf_status vf_vk_pipelines_init(vf_vk_pipelines *p, vf_vk_device *dev, const char *cache_dir,
                               vf_err *err)
{
    memset(p, 0, sizeof *p);
    p->dev = dev;
    p->err = err;
    void *data = NULL;
    size_t size = 0;
    if (cache_dir && *cache_dir) {
        /* One file per device so two GPUs sharing a cache dir do not
           overwrite each other's entries. */
        snprintf(p->cache_path, sizeof p->cache_path, "%s/pipeline-%04x-%04x.bin", cache_dir,
                 dev->props.vendorID, dev->props.deviceID);
        vf_disk_result r = vf_disk_read(dev, p->cache_path, VF_DISK_MAGIC_PIPELINE,
                                        pipeline_cache_key(dev), &data, &size);
        if (r == VF_DISK_OK && !vulkan_header_ok(dev, data, size)) r = VF_DISK_STALE;
        if (r != VF_DISK_OK) {
            free(data);
            data = NULL;
            size = 0;
            if (r != VF_DISK_MISSING) p->cache_rejected++;
        }
    }
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = size,
        .pInitialData = data,
    };
    VkResult r = VF_VKD(dev, vkCreatePipelineCache, dev->device, &ci, NULL, &p->cache);
    if (r != VK_SUCCESS && data) {
        /* The driver refused the data: start empty rather than fail. */
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        p->cache_rejected++;
        free(data);
        data = NULL;
        r = VF_VKD(dev, vkCreatePipelineCache, dev->device, &ci, NULL, &p->cache);
    }
    p->cache_loaded = data != NULL && r == VK_SUCCESS;
    free(data);
    if (r != VK_SUCCESS) p->cache = VK_NULL_HANDLE;
    return vf_vk_check(err, r, "vkCreatePipelineCache");
}

vf_status vf_vk_pipeline_cache_save(vf_vk_pipelines *p)
{
    if (!p->cache || !p->cache_path[0]) return VF_OK;
    size_t size = 0;
    if (VF_VKD(p->dev, vkGetPipelineCacheData, p->dev->device, p->cache, &size, NULL) != VK_SUCCESS || !size)
        return VF_OK;
    void *data = vf_malloc(size);
    if (!data) return VF_OK;
    VkResult r = VF_VKD(p->dev, vkGetPipelineCacheData, p->dev->device, p->cache, &size, data);
    vf_status s = VF_OK;
    if (r == VK_SUCCESS &&
        !vf_disk_write(p->dev, p->cache_path, VF_DISK_MAGIC_PIPELINE, pipeline_cache_key(p->dev),
                       data, size))
        s = VF_ERROR_IO; /* a cache: reported to the caller, not as a context error */
    free(data);
    return s;
}

void vf_vk_pipelines_destroy(vf_vk_pipelines *p)
{
    if (!p->dev) return;
    const vf_vk_device_table *vk = &p->dev->vkd;
    VkDevice d = p->dev->device;
    vf_vk_pipeline_cache_save(p);
    for (size_t i = 0; i < p->pipelines.cap; i++)
        if (p->pipelines.keys[i]) {
            vf_vk_pipeline *pl = p->pipelines.vals[i];
            vk->vkDestroyPipeline(d, pl->pipeline, NULL);
            free(pl);
        }
    for (size_t i = 0; i < p->layouts.cap; i++)
        if (p->layouts.keys[i]) {
            vf_vk_layout *l = p->layouts.vals[i];
            vk->vkDestroyPipelineLayout(d, l->layout, NULL);
            vk->vkDestroyDescriptorSetLayout(d, l->set_layout, NULL);
            free(l);
        }
    vf_hmap_free(&p->pipelines);
    vf_hmap_free(&p->layouts);
    if (p->cache) vk->vkDestroyPipelineCache(d, p->cache, NULL);
    memset(p, 0, sizeof *p);
}

static vf_status get_layout(vf_vk_pipelines *p, int n, const VkDescriptorType *types,
                            uint32_t push_range, const vf_vk_layout **out)
{
    VkDescriptorType t[VF_VK_MAX_BINDINGS];
    for (int i = 0; i < n; i++) t[i] = types ? types[i] : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    uint64_t key = vf_hash64(t, (size_t)n * sizeof t[0], ((uint64_t)push_range << 8) | (uint64_t)n);
    vf_vk_layout *l = vf_hmap_get(&p->layouts, key);
    if (l) {
        *out = l;
        return VF_OK;
    }
    const vf_vk_device_table *vk = &p->dev->vkd;
    VkDevice d = p->dev->device;
    l = vf_calloc(1, sizeof *l);
    if (!l) return vf_err_set(p->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    l->n_bindings = n;
    memcpy(l->types, t, (size_t)n * sizeof t[0]);
    l->push_range = push_range;
    VkDescriptorSetLayoutBinding b[VF_VK_MAX_BINDINGS];
    for (int i = 0; i < n; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = (uint32_t)i,
            .descriptorType = t[i],
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = p->dev->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = (uint32_t)n,
        .pBindings = b,
    };
    vf_status s = vf_vk_check(p->err, VF_VKD(p->dev, vkCreateDescriptorSetLayout, d, &dci, NULL, &l->set_layout),
                              "vkCreateDescriptorSetLayout");
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = push_range};
    VkPipelineLayoutCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &l->set_layout,
        .pushConstantRangeCount = push_range ? 1 : 0,
        .pPushConstantRanges = &pr,
    };
    if (!s) s = vf_vk_check(p->err, VF_VKD(p->dev, vkCreatePipelineLayout, d, &pci, NULL, &l->layout),
                            "vkCreatePipelineLayout");
    if (!s && !vf_hmap_put(&p->layouts, key, l))
        s = vf_err_set(p->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    if (s) {
        if (l->layout) vk->vkDestroyPipelineLayout(d, l->layout, NULL);
        if (l->set_layout) vk->vkDestroyDescriptorSetLayout(d, l->set_layout, NULL);
        free(l);
        return s;
    }
    *out = l;
    return VF_OK;
}

/* The pipeline map's key of desc, and the push range of its layout. */
static uint64_t pipeline_key(const vf_vk_pipelines *p, const vf_vk_pipeline_desc *desc, uint32_t *push_range)
{
    const char *entry = desc->entry ? desc->entry : "main";
    uint32_t max_push = p->dev->props.limits.maxPushConstantsSize;
    /* Every layout gets at least VF_PUSH_MAX bytes, so kernels with
       different push sizes share layouts. */
    uint32_t range = (desc->push_size + 3) & ~3u;
    if (range < VF_PUSH_MAX) range = VF_PUSH_MAX < max_push ? VF_PUSH_MAX : max_push;
    *push_range = range;
    uint64_t key = desc->spirv_key ? desc->spirv_key
                                   : vf_hash64(desc->spirv, desc->spirv_words * 4, 0x5350);
    key = vf_hash64(entry, strlen(entry), key);
    key = vf_hash_combine(key, ((uint64_t)range << 32) | (uint64_t)desc->n_bindings);
    for (int i = 0; i < desc->n_bindings; i++)
        key = vf_hash_combine(key, desc->types ? (uint64_t)desc->types[i] : 7u);
    if (desc->n_spec) {
        key = vf_hash64(desc->spec_map, desc->n_spec * sizeof *desc->spec_map, key);
        key = vf_hash64(desc->spec_data, desc->spec_size, key);
    }
    return key;
}

/* pipe, made for key, into the map (the caller destroys it on failure). */
static vf_status keep(vf_vk_pipelines *p, uint64_t key, VkPipeline pipe, const vf_vk_layout *layout,
                      uint32_t push_size, const char *name, const vf_vk_pipeline **out)
{
    vf_vk_pipeline *pl = vf_calloc(1, sizeof *pl);
    if (!pl || !vf_hmap_put(&p->pipelines, key, pl)) {
        free(pl);
        return vf_err_set(p->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    }
    pl->pipeline = pipe;
    pl->layout = layout;
    pl->push_size = push_size;
    snprintf(pl->name, sizeof pl->name, "%s", name);
    p->created++;
    *out = pl;
    return VF_OK;
}

/* made: VK_NULL_HANDLE, or a pipeline made elsewhere with made_layout. */
static vf_status get_or_adopt(vf_vk_pipelines *p, const vf_vk_pipeline_desc *desc, VkPipeline made,
                              VkPipelineLayout made_layout, const vf_vk_pipeline **out)
{
    *out = NULL;
    const char *name = desc->name && *desc->name ? desc->name : "kernel";
    const char *entry = desc->entry ? desc->entry : "main";
    uint32_t max_push = p->dev->props.limits.maxPushConstantsSize;
    if (desc->n_bindings < 0 || desc->n_bindings > VF_VK_MAX_BINDINGS)
        return vf_err_set(p->err, VF_ERROR_INVALID_ARGUMENT, "kernel %s: %d bindings (at most %d)",
                          name, desc->n_bindings, VF_VK_MAX_BINDINGS);
    if (desc->push_size > max_push)
        return vf_err_set(p->err, VF_ERROR_UNSUPPORTED,
                          "kernel %s: %u bytes of push constants, the device allows %u", name,
                          desc->push_size, max_push);
    if (!desc->spirv || desc->spirv_words == 0)
        return vf_err_set(p->err, VF_ERROR_INVALID_ARGUMENT, "kernel %s: no SPIR-V", name);
    uint32_t push_range = 0;
    uint64_t key = pipeline_key(p, desc, &push_range);
    vf_vk_pipeline *hit = vf_hmap_get(&p->pipelines, key);
    if (hit) {
        *out = hit;
        return VF_OK;
    }

    const vf_vk_layout *layout = NULL;
    vf_status s = get_layout(p, desc->n_bindings, desc->types, push_range, &layout);
    if (s) return s;
    if (made) { /* made on another thread with that layout (vf_vk_pipeline_adopt) */
        if (made_layout != layout->layout)
            return vf_err_set(p->err, VF_ERROR_INVALID_ARGUMENT, "kernel %s: made with another layout", name);
        return keep(p, key, made, layout, desc->push_size, name, out);
    }
    const vf_vk_device_table *vk = &p->dev->vkd;
    VkDevice d = p->dev->device;
    VkShaderModuleCreateInfo mci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
        .codeSize = desc->spirv_words * 4,
        .pCode = desc->spirv,
    };
    VkShaderModule mod = VK_NULL_HANDLE;
    VkResult r = VF_VKD(p->dev, vkCreateShaderModule, d, &mci, NULL, &mod);
    char what[160];
    if (r != VK_SUCCESS) {
        snprintf(what, sizeof what, "kernel %s: vkCreateShaderModule", name);
        return vf_vk_check(p->err, r, what);
    }
    VkSpecializationInfo spec = {
        .mapEntryCount = desc->n_spec,
        .pMapEntries = desc->spec_map,
        .dataSize = desc->spec_size,
        .pData = desc->spec_data,
    };
    VkComputePipelineCreateInfo cci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = mod,
            .pName = entry,
            .pSpecializationInfo = desc->n_spec ? &spec : NULL,
        },
        .layout = layout->layout,
    };
    VkPipeline pipe = VK_NULL_HANDLE;
    int64_t t0 = vf_now_ns();
    r = VF_VKD(p->dev, vkCreateComputePipelines, d, p->cache, 1, &cci, NULL, &pipe);
    int64_t dt = vf_now_ns() - t0;
    p->create_ns += dt;
    if (p->log_info)
        fprintf(stderr, "vkfuse: created pipeline %s in %.2f ms%s\n", name, (double)dt / 1e6,
                r == VK_SUCCESS ? "" : ": FAILED");
    vk->vkDestroyShaderModule(d, mod, NULL);
    if (r != VK_SUCCESS) {
        snprintf(what, sizeof what, "kernel %s: vkCreateComputePipelines", name);
        return vf_vk_check(p->err, r, what);
    }
    s = keep(p, key, pipe, layout, desc->push_size, name, out);
    if (s) vk->vkDestroyPipeline(d, pipe, NULL);
    return s;
}

vf_status vf_vk_pipeline_get(vf_vk_pipelines *p, const vf_vk_pipeline_desc *desc,
                             const vf_vk_pipeline **out)
{
    return get_or_adopt(p, desc, VK_NULL_HANDLE, VK_NULL_HANDLE, out);
}

vf_status vf_vk_pipeline_adopt(vf_vk_pipelines *p, const vf_vk_pipeline_desc *desc, VkPipeline made,
                               VkPipelineLayout made_layout, const vf_vk_pipeline **out)
{
    vf_status s = get_or_adopt(p, desc, made, made_layout, out);
    if (s || (*out)->pipeline != made) p->dev->vkd.vkDestroyPipeline(p->dev->device, made, NULL); /* not kept */
    else p->adopted++;
    return s;
}
