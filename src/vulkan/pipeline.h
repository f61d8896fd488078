/* Compute pipelines, their layouts, and the VkPipelineCache.
 *
 * A pipeline is keyed by its SPIR-V hash, entry point, descriptor layout,
 * push-constant size and specialisation constants; layouts are shared by
 * every pipeline with the same binding types. The VkPipelineCache is
 * loaded from and saved to cache_dir as one file per device, with our
 * validated header around it and Vulkan's own header checked too. */
#ifndef VF_VULKAN_PIPELINE_H
#define VF_VULKAN_PIPELINE_H

#include "vulkan/device.h"
#include "util/hash.h"

#define VF_VK_MAX_BINDINGS 16

typedef struct vf_vk_layout {
    int n_bindings;
    VkDescriptorType types[VF_VK_MAX_BINDINGS];
    uint32_t push_range;             /* bytes of the push-constant range */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout layout;
} vf_vk_layout;

typedef struct vf_vk_pipeline {
    VkPipeline pipeline;
    const vf_vk_layout *layout;
    uint32_t push_size;              /* what dispatches push (<= layout->push_range) */
    char name[64];
} vf_vk_pipeline;

typedef struct vf_vk_pipeline_desc {
    const uint32_t *spirv;
    size_t spirv_words;
    uint64_t spirv_key;              /* 0: hashed here */
    const char *entry;               /* NULL: "main" */
    const char *name;                /* for messages */
    int n_bindings;
    const VkDescriptorType *types;   /* NULL: all VK_DESCRIPTOR_TYPE_STORAGE_BUFFER */
    uint32_t push_size;              /* bytes, <= maxPushConstantsSize */
    uint32_t n_spec;                 /* specialisation constants */
    const VkSpecializationMapEntry *spec_map;
    const void *spec_data;
    size_t spec_size;
} vf_vk_pipeline_desc;

typedef struct vf_vk_pipelines {
    vf_vk_device *dev;
    vf_err *err;
    VkPipelineCache cache;
    char cache_path[4200];           /* "": not saved */
    bool cache_loaded;               /* initial data came from disk */
    int cache_rejected;              /* a file was there but not valid */
    vf_hmap pipelines;               /* key -> vf_vk_pipeline* */
    vf_hmap layouts;                 /* key -> vf_vk_layout* */
    int64_t created;                 /* kept in the map, adopted ones included */
    int64_t adopted;                 /* made on another thread (vf_vk_pipeline_adopt) */
    int64_t create_ns;               /* wall time in vkCreateComputePipelines */
    bool log_info;                   /* VKFUSE_LOG=info: one line per pipeline created */
} vf_vk_pipelines;

vf_status vf_vk_pipelines_init(vf_vk_pipelines *p, vf_vk_device *dev, const char *cache_dir,
                               vf_err *err);
/* Saves the pipeline cache (atomically) and destroys everything. */
void vf_vk_pipelines_destroy(vf_vk_pipelines *p);
vf_status vf_vk_pipeline_cache_save(vf_vk_pipelines *p);

vf_status vf_vk_pipeline_get(vf_vk_pipelines *p, const vf_vk_pipeline_desc *desc,
                             const vf_vk_pipeline **out);
/* The pipeline of desc where `made` (which another thread created for
   desc with made_layout, the layout vf_vk_pipeline_get gives desc) is the
   pipeline: kept in the map as if made here, or destroyed when desc has
   one already or it cannot be kept. Takes ownership of made. */
vf_status vf_vk_pipeline_adopt(vf_vk_pipelines *p, const vf_vk_pipeline_desc *desc, VkPipeline made,
                               VkPipelineLayout made_layout, const vf_vk_pipeline **out);

#endif
