/* Warming the driver's shader cache on a second device (tier_warm.h).
 *
 * Vulkan calls go straight through the second device's own table, not
 * through VF_VKD: fault injection (VKFUSE_FAULT) counts the calls of the
 * calling thread, and a failure here is not the user's call's to report. */
#include "vulkan/tier_warm.h"

#include <string.h>

enum { WARM_BUF_BYTES = 64 << 10 };

static bool warm_open(vf_vk_warm *w, const vf_vk_device *main)
{
    w->main = main;
    vf_err err = {0};
    if (vf_vk_device_twin(main, &w->device, &w->vkd, &w->queue, &err) != VF_OK) return false;
    const vf_vk_device_table *vk = &w->vkd;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = main->queue_family};
    if (vk->vkCreateCommandPool(w->device, &pci, NULL, &w->pool) != VK_SUCCESS) return false;
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = w->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    if (vk->vkAllocateCommandBuffers(w->device, &cai, &w->cmd) != VK_SUCCESS) return false;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    if (vk->vkCreateFence(w->device, &fci, NULL, &w->fence) != VK_SUCCESS) return false;
    VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = WARM_BUF_BYTES,
                              .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT,
                              .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    if (vk->vkCreateBuffer(w->device, &bci, NULL, &w->buf) != VK_SUCCESS) return false;
    VkMemoryRequirements req;
    vk->vkGetBufferMemoryRequirements(w->device, w->buf, &req);
    int type = vf_vk_find_memory_type(main, req.memoryTypeBits, 0);
    if (type < 0) return false;
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size,
                                .memoryTypeIndex = (uint32_t)type};
    if (vk->vkAllocateMemory(w->device, &mai, NULL, &w->mem) != VK_SUCCESS) return false;
    return vk->vkBindBufferMemory(w->device, w->buf, w->mem, 0) == VK_SUCCESS;
}

/* The kernel's layout as the main device's: the same binding types and
   push range, push descriptors where the main device uses them. */
static bool make_layout(vf_vk_warm *w, const vf_vk_layout *l, VkDescriptorSetLayout *set, VkPipelineLayout *lay)
{
    VkDescriptorSetLayoutBinding b[VF_VK_MAX_BINDINGS];
    for (int i = 0; i < l->n_bindings; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i, .descriptorType = l->types[i],
                                              .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = w->main->push_descriptors ? VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR : 0,
        .bindingCount = (uint32_t)l->n_bindings, .pBindings = b};
    if (w->vkd.vkCreateDescriptorSetLayout(w->device, &dci, NULL, set) != VK_SUCCESS) return false;
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = l->push_range};
    VkPipelineLayoutCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, .setLayoutCount = 1,
                                      .pSetLayouts = set, .pushConstantRangeCount = l->push_range ? 1 : 0,
                                      .pPushConstantRanges = &pr};
    return w->vkd.vkCreatePipelineLayout(w->device, &pci, NULL, lay) == VK_SUCCESS;
}

/* Records the one dispatch: every binding on the buffer, push constants
   zero (the kernel's sizes zero: it returns at once once compiled). */
static bool record(vf_vk_warm *w, const vf_vk_layout *l, VkPipeline pipe, VkPipelineLayout lay,
                   VkDescriptorSetLayout set_layout, VkDescriptorPool *pool)
{
    const vf_vk_device_table *vk = &w->vkd;
    for (int i = 0; i < l->n_bindings; i++) /* tiered kernels (matmuls) bind storage buffers only */
        if (l->types[i] != VK_DESCRIPTOR_TYPE_STORAGE_BUFFER) return false;
    VkDescriptorBufferInfo bi = {.buffer = w->buf, .offset = 0, .range = VK_WHOLE_SIZE};
    VkWriteDescriptorSet wr[VF_VK_MAX_BINDINGS];
    VkDescriptorPoolSize sizes[VF_VK_MAX_BINDINGS];
    for (int i = 0; i < l->n_bindings; i++) {
        wr[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstBinding = (uint32_t)i,
                                       .descriptorCount = 1, .descriptorType = l->types[i], .pBufferInfo = &bi};
        sizes[i] = (VkDescriptorPoolSize){.type = l->types[i], .descriptorCount = 1};
    }
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (!w->main->push_descriptors && l->n_bindings) {
        VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, .maxSets = 1,
                                          .poolSizeCount = (uint32_t)l->n_bindings, .pPoolSizes = sizes};
        if (vk->vkCreateDescriptorPool(w->device, &dpi, NULL, pool) != VK_SUCCESS) return false;
        VkDescriptorSetAllocateInfo dsa = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                           .descriptorPool = *pool, .descriptorSetCount = 1,
                                           .pSetLayouts = &set_layout};
        if (vk->vkAllocateDescriptorSets(w->device, &dsa, &set) != VK_SUCCESS) return false;
        for (int i = 0; i < l->n_bindings; i++) wr[i].dstSet = set;
        vk->vkUpdateDescriptorSets(w->device, (uint32_t)l->n_bindings, wr, 0, NULL);
    }
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    if (vk->vkBeginCommandBuffer(w->cmd, &cbi) != VK_SUCCESS) return false;
    vk->vkCmdBindPipeline(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
    if (l->n_bindings && w->main->push_descriptors)
        vk->vkCmdPushDescriptorSetKHR(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, lay, 0, (uint32_t)l->n_bindings, wr);
    else if (l->n_bindings)
        vk->vkCmdBindDescriptorSets(w->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, lay, 0, 1, &set, 0, NULL);
    if (l->push_range) {
        static const uint8_t zeros[VF_PUSH_MAX * 4];
        if (l->push_range > sizeof zeros) return false;
        vk->vkCmdPushConstants(w->cmd, lay, VK_SHADER_STAGE_COMPUTE_BIT, 0, l->push_range, zeros);
    }
    vk->vkCmdDispatch(w->cmd, 1, 1, 1);
    return vk->vkEndCommandBuffer(w->cmd) == VK_SUCCESS;
}

bool vf_vk_warm_run(vf_vk_warm *w, const vf_vk_device *main, const vf_vk_warm_kernel *k)
{
    if (!w->tried) {
        w->tried = true;
        if (!warm_open(w, main)) {
            vf_vk_warm_close(w);
            w->tried = true;
        }
    }
    if (!w->device || k->layout->n_bindings > VF_VK_MAX_BINDINGS) return false;
    const vf_vk_device_table *vk = &w->vkd;
    VkShaderModule mod = VK_NULL_HANDLE;
    VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
    VkPipelineLayout lay = VK_NULL_HANDLE;
    VkPipeline pipe = VK_NULL_HANDLE;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    bool ok = false;
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = k->words * 4, .pCode = k->spirv};
    VkSpecializationMapEntry map[VF_KERNEL_MAX_SPEC];
    for (uint32_t i = 0; i < k->n_spec && i < VF_KERNEL_MAX_SPEC; i++)
        map[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo spec = {.mapEntryCount = k->n_spec, .pMapEntries = map, .dataSize = 4 * (size_t)k->n_spec,
                                 .pData = k->spec};
    if (k->n_spec > VF_KERNEL_MAX_SPEC || vk->vkCreateShaderModule(w->device, &mci, NULL, &mod) != VK_SUCCESS ||
        !make_layout(w, k->layout, &set_layout, &lay))
        goto out;
    VkComputePipelineCreateInfo cci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod, .pName = "main", .pSpecializationInfo = k->n_spec ? &spec : NULL},
        .layout = lay};
    if (vk->vkCreateComputePipelines(w->device, VK_NULL_HANDLE, 1, &cci, NULL, &pipe) != VK_SUCCESS ||
        !record(w, k->layout, pipe, lay, set_layout, &pool))
        goto out;
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &w->cmd};
    if (vk->vkResetFences(w->device, 1, &w->fence) != VK_SUCCESS ||
        vk->vkQueueSubmit(w->queue, 1, &si, w->fence) != VK_SUCCESS)
        goto out;
    /* the driver's compile: seconds at most; nothing else runs here */
    ok = vk->vkWaitForFences(w->device, 1, &w->fence, VK_TRUE, UINT64_MAX) == VK_SUCCESS;
out:
    if (!ok && w->device) vk->vkDeviceWaitIdle(w->device); /* nothing of it may still run */
    if (pool) vk->vkDestroyDescriptorPool(w->device, pool, NULL);
    if (pipe) vk->vkDestroyPipeline(w->device, pipe, NULL);
    if (lay) vk->vkDestroyPipelineLayout(w->device, lay, NULL);
    if (set_layout) vk->vkDestroyDescriptorSetLayout(w->device, set_layout, NULL);
    if (mod) vk->vkDestroyShaderModule(w->device, mod, NULL);
    if (w->cmd) vk->vkResetCommandBuffer(w->cmd, 0);
    return ok;
}

void vf_vk_warm_close(vf_vk_warm *w)
{
    if (w->device) {
        const vf_vk_device_table *vk = &w->vkd;
        vk->vkDeviceWaitIdle(w->device);
        if (w->buf) vk->vkDestroyBuffer(w->device, w->buf, NULL);
        if (w->mem) vk->vkFreeMemory(w->device, w->mem, NULL);
        if (w->fence) vk->vkDestroyFence(w->device, w->fence, NULL);
        if (w->pool) vk->vkDestroyCommandPool(w->device, w->pool, NULL); /* frees cmd */
        vk->vkDestroyDevice(w->device, NULL);
    }
    memset(w, 0, sizeof *w);
}
