/* Running a test: buffers, pipelines, then the commands in order.
 *
 * Deliberately simple and synchronous: every buffer is host-visible and
 * mapped, each RUN is one submit followed by a fence wait, so EXPECT,
 * COPY and VkScript data writes are plain memory accesses on an idle
 * device. Descriptor sets are made per RUN, so a COPY that resizes a
 * buffer never leaves a stale descriptor behind. */
#include "exec.h"
#include "compile.h"
#include "optimize.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define VK (&x->dev.vkd)
#define DEV (x->dev.device)

static am_status vkfail(am_result *res, am_pos pos, const char *what, VkResult r)
{
    return am_fail_at(res, pos, "%s failed: %s", what, vf_vk_result_name(r));
}

/* Every use a test can make of a buffer: the texel bits let any buffer
   be viewed as a texel buffer, the transfer bits let it feed an image. */
static const VkBufferUsageFlags USAGE = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
                                        VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                        VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                                        VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT;

static am_status make_buffer(am_exec *x, int i, uint64_t bytes, am_pos pos, am_result *res)
{
    const VkPhysicalDeviceLimits *lim = &x->dev.props.limits;
    uint64_t heap = 0;
    for (uint32_t h = 0; h < x->dev.mem_props.memoryHeapCount; h++)
        if (x->dev.mem_props.memoryHeaps[h].size > heap) heap = x->dev.mem_props.memoryHeaps[h].size;
    uint64_t cap = heap / 4 < AM_MAX_BUFFER_BYTES ? heap / 4 : AM_MAX_BUFFER_BYTES;
    if (bytes > cap)
        return am_fail_at(res, pos, "buffer of %" PRIu64 " bytes is over this runner's limit (%" PRIu64 ")", bytes,
                          cap);
    (void)lim;
    uint64_t alloc = (bytes + 3) & ~(uint64_t)3; /* vkCmdFillBuffer / copies want multiples of 4 */
    if (!alloc) alloc = 4;
    vf_err e = {0};
    if (vf_vk_raw_create(&x->dev, alloc, USAGE, &x->buf[i], &e) != VF_OK)
        return am_fail_at(res, pos, "cannot create a buffer of %" PRIu64 " bytes: %s", bytes, e.message);
    x->buf[i].size = bytes; /* what the test sees; the allocation may be larger */
    memset(x->buf[i].map, 0, alloc);
    return AM_PASS;
}

static void flush(am_exec *x, int i)
{
    if (x->buf[i].coherent || !x->buf[i].memory) return;
    VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = x->buf[i].memory,
                             .size = VK_WHOLE_SIZE};
    VK->vkFlushMappedMemoryRanges(DEV, 1, &r);
}

static void invalidate(am_exec *x, int i)
{
    if (x->buf[i].coherent || !x->buf[i].memory) return;
    VkMappedMemoryRange r = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, .memory = x->buf[i].memory,
                             .size = VK_WHOLE_SIZE};
    VK->vkInvalidateMappedMemoryRanges(DEV, 1, &r);
}

static VkDescriptorType desc_type(am_bind_kind k)
{
    switch (k) {
    case AM_BIND_UNIFORM: return VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    case AM_BIND_STORAGE_DYNAMIC: return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER_DYNAMIC;
    case AM_BIND_UNIFORM_DYNAMIC: return VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER_DYNAMIC;
    case AM_BIND_STORAGE_IMAGE: return VK_DESCRIPTOR_TYPE_STORAGE_IMAGE;
    case AM_BIND_SAMPLED_IMAGE: return VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE;
    case AM_BIND_COMBINED_IMAGE_SAMPLER: return VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER;
    case AM_BIND_UNIFORM_TEXEL: return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    case AM_BIND_STORAGE_TEXEL: return VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
    case AM_BIND_SAMPLER: return VK_DESCRIPTOR_TYPE_SAMPLER;
    default: return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    }
}

/* Bindings of a pipeline sorted by (set, binding): the order dynamic
   offsets are consumed in. */
static void sorted_bindings(const am_pipeline *pl, int *order)
{
    for (int i = 0; i < pl->n_bind; i++) order[i] = i;
    for (int i = 1; i < pl->n_bind; i++)
        for (int j = i; j > 0; j--) {
            const am_binding *a = &pl->bind[order[j - 1]], *b = &pl->bind[order[j]];
            if (a->set < b->set || (a->set == b->set && a->binding < b->binding)) break;
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
}

static am_status make_pipeline(am_exec *x, am_script *s, int pi, const am_exec_opts *o, am_result *res)
{
    am_pipeline *pl = &s->pipeline[pi];
    const VkPhysicalDeviceLimits *lim = &x->dev.props.limits;
    int si = pl->shader;
    am_shader *sh = &s->shader[si];
    uint32_t dev_minor = (x->dev.api_version >> 12) & 0x3ff;
    /* A pipeline with SHADER_OPTIMIZATION gets its own module (Amber keys
       compiled shaders by pipeline and shader); the others share one. */
    VkShaderModule *mod = pl->n_opt ? &x->opt_module[pi] : &x->module[si];
    if (!*mod) {
        uint32_t env = sh->target_env ? sh->target_env : am_default_env(s);
        bool ext14 = false;
        for (int i = 0; i < s->n_dev_ext; i++) ext14 |= !strcmp(s->dev_ext[i], "VK_KHR_spirv_1_4");
        if (am_env_min_vk_minor(env, ext14) > dev_minor) {
            char name[32];
            am_env_name(env, name, sizeof name);
            res->status = AM_SKIP;
            snprintf(res->msg, sizeof res->msg, "shader '%s' targets %s, newer than the device's Vulkan 1.%u",
                     sh->name, name, dev_minor);
            return AM_SKIP;
        }
        am_spirv spv;
        char msg[900];
        if (!am_compile(sh, env, &spv, msg, sizeof msg))
            return am_fail_at(res, sh->pos, "shader '%s' (source from line %d): %s", sh->name, sh->source_line, msg);
        if (pl->n_opt) {
            am_opt_result o_r = am_optimize(env, pl, &spv, msg, sizeof msg);
            if (o_r != AM_OPT_OK) {
                free(spv.words);
                if (o_r == AM_OPT_FAILED)
                    return am_fail_at(res, pl->pos, "pipeline '%s', SHADER_OPTIMIZATION of '%s': %s", pl->name,
                                      sh->name, msg);
                res->status = AM_SKIP;
                snprintf(res->msg, sizeof res->msg, "%s", msg);
                return AM_SKIP;
            }
        }
        VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                        .codeSize = spv.n_words * 4, .pCode = spv.words};
        VkResult r = VK->vkCreateShaderModule(DEV, &mci, NULL, mod);
        free(spv.words);
        if (r != VK_SUCCESS) return vkfail(res, sh->pos, "vkCreateShaderModule", r);
    }
    /* Descriptor set layouts: one per set up to the highest used. */
    uint32_t n_sets = 0;
    for (int i = 0; i < pl->n_bind; i++)
        if (pl->bind[i].set + 1 > n_sets) n_sets = pl->bind[i].set + 1;
    if (n_sets > lim->maxBoundDescriptorSets)
        return am_fail_at(res, pl->pos, "pipeline '%s' uses %u descriptor sets, the device binds %u", pl->name,
                          n_sets, lim->maxBoundDescriptorSets);
    x->n_sets[pi] = n_sets;
    for (uint32_t set = 0; set < n_sets; set++) {
        VkDescriptorSetLayoutBinding lb[AM_MAX_BINDINGS];
        uint32_t n = 0;
        for (int i = 0; i < pl->n_bind; i++) {
            if (pl->bind[i].set != set) continue;
            lb[n++] = (VkDescriptorSetLayoutBinding){.binding = pl->bind[i].binding,
                                                     .descriptorType = desc_type(pl->bind[i].kind),
                                                     .descriptorCount = (uint32_t)pl->bind[i].n,
                                                     .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
        }
        VkDescriptorSetLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                               .bindingCount = n, .pBindings = lb};
        VkResult r = VK->vkCreateDescriptorSetLayout(DEV, &lci, NULL, &x->set_layout[pi][set]);
        if (r != VK_SUCCESS) return vkfail(res, pl->pos, "vkCreateDescriptorSetLayout", r);
    }
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    if (pl->push_buf >= 0) {
        uint64_t bytes = (am_buffer_bytes(&s->buffer[pl->push_buf]) + 3) & ~(uint64_t)3;
        if (bytes > lim->maxPushConstantsSize)
            return am_fail_at(res, pl->pos, "push constants of %" PRIu64 " bytes, the device allows %u", bytes,
                              lim->maxPushConstantsSize);
        pr.size = (uint32_t)bytes;
    }
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = n_sets, .pSetLayouts = x->set_layout[pi],
                                       .pushConstantRangeCount = pr.size ? 1 : 0, .pPushConstantRanges = &pr};
    VkResult r = VK->vkCreatePipelineLayout(DEV, &plci, NULL, &x->layout[pi]);
    if (r != VK_SUCCESS) return vkfail(res, pl->pos, "vkCreatePipelineLayout", r);

    VkSpecializationMapEntry me[AM_MAX_SPECS];
    uint32_t data[AM_MAX_SPECS];
    for (int i = 0; i < pl->n_spec; i++) {
        me[i] = (VkSpecializationMapEntry){.constantID = pl->spec[i].id, .offset = (uint32_t)(4 * i), .size = 4};
        data[i] = pl->spec[i].bits;
    }
    VkSpecializationInfo spec = {.mapEntryCount = (uint32_t)pl->n_spec, .pMapEntries = me,
                                 .dataSize = 4 * (size_t)pl->n_spec, .pData = data};
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rs = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO};
    uint32_t want = pl->sg_required ? pl->sg_required : s->subgroup_size;
    if (want && x->sg_props_valid) {
        if (want == AM_SG_MIN) want = x->sg_props.minSubgroupSize;
        if (want == AM_SG_MAX) want = x->sg_props.maxSubgroupSize;
        if (want < x->sg_props.minSubgroupSize || want > x->sg_props.maxSubgroupSize ||
            !(x->sg_props.requiredSubgroupSizeStages & VK_SHADER_STAGE_COMPUTE_BIT)) {
            res->status = AM_SKIP;
            snprintf(res->msg, sizeof res->msg, "device lacks a required compute subgroup size of %u (it has %u..%u)",
                     want, x->sg_props.minSubgroupSize, x->sg_props.maxSubgroupSize);
            return AM_SKIP;
        }
        rs.requiredSubgroupSize = want;
    }
    VkPipelineShaderStageCreateFlags flags = 0;
    if (pl->sg_varying) flags |= VK_PIPELINE_SHADER_STAGE_CREATE_ALLOW_VARYING_SUBGROUP_SIZE_BIT;
    if (pl->sg_full) flags |= VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT;
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .pNext = rs.requiredSubgroupSize ? &rs : NULL,
                  .flags = flags,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = *mod,
                  .pName = pl->entry,
                  .pSpecializationInfo = pl->n_spec ? &spec : NULL},
        .layout = x->layout[pi],
    };
    r = VK->vkCreateComputePipelines(DEV, VK_NULL_HANDLE, 1, &ci, NULL, &x->pipe[pi]);
    if (r != VK_SUCCESS) return vkfail(res, pl->pos, "vkCreateComputePipelines", r);
    (void)o;
    return AM_PASS;
}

/* Checks one binding against the buffer and the device limits. */
static am_status check_binding(am_exec *x, const am_script *s, const am_binding *b, int k, am_result *res)
{
    const VkPhysicalDeviceLimits *lim = &x->dev.props.limits;
    const am_buffer *buf = &s->buffer[b->buf[k]];
    uint64_t size = x->buf[b->buf[k]].size;
    if (b->kind > AM_BIND_UNIFORM_DYNAMIC) /* images, texel buffers: checked by am_img_setup */
        return size ? AM_PASS : am_fail_at(res, b->pos, "buffer '%s' is empty", buf->name);
    bool uniform = b->kind == AM_BIND_UNIFORM || b->kind == AM_BIND_UNIFORM_DYNAMIC;
    bool dynamic = b->kind == AM_BIND_STORAGE_DYNAMIC || b->kind == AM_BIND_UNIFORM_DYNAMIC;
    uint64_t align = uniform ? lim->minUniformBufferOffsetAlignment : lim->minStorageBufferOffsetAlignment;
    if (!size) return am_fail_at(res, b->pos, "buffer '%s' is empty", buf->name);
    uint64_t off = b->desc_offset[k] + (dynamic ? b->dyn_offset[k] : 0);
    if (b->desc_offset[k] % align || (dynamic && b->dyn_offset[k] % align))
        return am_fail_at(res, b->pos, "offset of '%s' is not a multiple of the device's %s offset alignment (%" PRIu64 ")",
                          buf->name, uniform ? "uniform" : "storage", align);
    if (off >= size) return am_fail_at(res, b->pos, "offset %" PRIu64 " is past the end of '%s'", off, buf->name);
    uint64_t range = b->desc_range[k] == UINT64_MAX ? size - off : b->desc_range[k];
    if (off + range > size)
        return am_fail_at(res, b->pos, "DESCRIPTOR_RANGE %" PRIu64 " at offset %" PRIu64 " is past the end of '%s'",
                          range, off, buf->name);
    uint64_t max = uniform ? lim->maxUniformBufferRange : lim->maxStorageBufferRange;
    if (range > max)
        return am_fail_at(res, b->pos, "'%s' binds %" PRIu64 " bytes, the device allows %" PRIu64, buf->name, range, max);
    return AM_PASS;
}

static am_status submit_wait(am_exec *x, const am_cmd *c, const am_exec_opts *o, uint32_t timeout_ms, am_result *res)
{
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &x->cb};
    VkResult r = VK->vkQueueSubmit(x->dev.queue, 1, &si, x->fence);
    if (r != VK_SUCCESS) return vkfail(res, c->pos, "vkQueueSubmit", r);
    r = VK->vkWaitForFences(DEV, 1, &x->fence, VK_TRUE, (uint64_t)timeout_ms * 1000000ull);
    if (r == VK_TIMEOUT) {
        x->hung = true;
        return am_fail_at(res, c->pos, "RUN did not finish within %u ms (fence timeout)", timeout_ms);
    }
    if (r != VK_SUCCESS) return vkfail(res, c->pos, "vkWaitForFences", r);
    VK->vkResetFences(DEV, 1, &x->fence);
    (void)o;
    return AM_PASS;
}

static am_status run(am_exec *x, am_script *s, const am_cmd *c, const am_exec_opts *o, uint32_t timeout_ms,
                     am_result *res, char *detail, size_t dlen)
{
    int pi = c->pipeline;
    am_pipeline *pl = &s->pipeline[pi];
    const VkPhysicalDeviceLimits *lim = &x->dev.props.limits;
    for (int i = 0; i < 3; i++)
        if (c->groups[i] > lim->maxComputeWorkGroupCount[i])
            return am_fail_at(res, c->pos, "workgroup count %u in %c is over the device's %u", c->groups[i], "xyz"[i],
                              lim->maxComputeWorkGroupCount[i]);
    if (!x->pipe[pi]) {
        am_status st = make_pipeline(x, s, pi, o, res);
        if (st != AM_PASS) return st;
    }
    uint32_t n_desc[AM_BIND_KINDS] = {0};
    for (int i = 0; i < pl->n_bind; i++) {
        n_desc[pl->bind[i].kind] += (uint32_t)pl->bind[i].n;
        for (int k = 0; k < pl->bind[i].n && pl->bind[i].kind != AM_BIND_SAMPLER; k++) {
            am_status st = check_binding(x, s, &pl->bind[i], k, res);
            if (st != AM_PASS) return st;
            flush(x, pl->bind[i].buf[k]);
        }
    }
    VkDescriptorPoolSize ps[AM_BIND_KINDS];
    uint32_t n_ps = 0;
    for (int k = 0; k < AM_BIND_KINDS; k++)
        if (n_desc[k]) ps[n_ps++] = (VkDescriptorPoolSize){desc_type((am_bind_kind)k), n_desc[k]};
    VkDescriptorPool pool = VK_NULL_HANDLE;
    VkDescriptorSet sets[AM_MAX_SET + 1] = {0};
    VkResult r;
    if (x->n_sets[pi]) {
        VkDescriptorPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                          .maxSets = x->n_sets[pi], .poolSizeCount = n_ps, .pPoolSizes = ps};
        r = VK->vkCreateDescriptorPool(DEV, &pci, NULL, &pool);
        if (r != VK_SUCCESS) return vkfail(res, c->pos, "vkCreateDescriptorPool", r);
        VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                          .descriptorPool = pool, .descriptorSetCount = x->n_sets[pi],
                                          .pSetLayouts = x->set_layout[pi]};
        r = VK->vkAllocateDescriptorSets(DEV, &ai, sets);
        if (r != VK_SUCCESS) {
            VK->vkDestroyDescriptorPool(DEV, pool, NULL);
            return vkfail(res, c->pos, "vkAllocateDescriptorSets", r);
        }
    }
    int order[AM_MAX_BINDINGS];
    sorted_bindings(pl, order);
    am_status ist = am_img_prepare(x, s, pl, order, c->pos, res);
    if (ist != AM_PASS) {
        am_img_finish(x, NULL);
        if (pool) VK->vkDestroyDescriptorPool(DEV, pool, NULL);
        return ist;
    }
    VkDescriptorBufferInfo bi[AM_MAX_BINDINGS][AM_MAX_ARRAY];
    VkWriteDescriptorSet w[AM_MAX_BINDINGS];
    uint32_t dyn[AM_MAX_BINDINGS * AM_MAX_ARRAY], n_dyn = 0;
    for (int j = 0; j < pl->n_bind; j++) {
        const am_binding *b = &pl->bind[order[j]];
        bool dynamic = b->kind == AM_BIND_STORAGE_DYNAMIC || b->kind == AM_BIND_UNIFORM_DYNAMIC;
        for (int k = 0; k < b->n && b->kind <= AM_BIND_UNIFORM_DYNAMIC; k++) {
            bi[j][k] = (VkDescriptorBufferInfo){.buffer = x->buf[b->buf[k]].buffer, .offset = b->desc_offset[k],
                                                .range = b->desc_range[k] == UINT64_MAX ? VK_WHOLE_SIZE
                                                                                        : b->desc_range[k]};
            /* A whole-size range with a dynamic offset would run past the end. */
            if (dynamic && b->desc_range[k] == UINT64_MAX)
                bi[j][k].range = x->buf[b->buf[k]].size - b->desc_offset[k] - b->dyn_offset[k];
            if (dynamic) dyn[n_dyn++] = (uint32_t)b->dyn_offset[k];
        }
        w[j] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = sets[b->set],
                                      .dstBinding = b->binding, .descriptorCount = (uint32_t)b->n,
                                      .descriptorType = desc_type(b->kind)};
        if (b->kind <= AM_BIND_UNIFORM_DYNAMIC)
            w[j].pBufferInfo = bi[j];
        else if (b->kind == AM_BIND_UNIFORM_TEXEL || b->kind == AM_BIND_STORAGE_TEXEL)
            w[j].pTexelBufferView = x->run.view[j];
        else
            w[j].pImageInfo = x->run.ii[j];
    }
    if (pl->n_bind) VK->vkUpdateDescriptorSets(DEV, (uint32_t)pl->n_bind, w, 0, NULL);

    VK->vkResetCommandBuffer(x->cb, 0);
    VkCommandBufferBeginInfo cbi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VK->vkBeginCommandBuffer(x->cb, &cbi);
    VkMemoryBarrier host_to_dev = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                                   .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                                    VK_ACCESS_UNIFORM_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT};
    VK->vkCmdPipelineBarrier(x->cb, VK_PIPELINE_STAGE_HOST_BIT,
                             VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &host_to_dev,
                             0, NULL, 0, NULL);
    am_img_record_upload(x, s);
    VK->vkCmdBindPipeline(x->cb, VK_PIPELINE_BIND_POINT_COMPUTE, x->pipe[pi]);
    if (x->n_sets[pi])
        VK->vkCmdBindDescriptorSets(x->cb, VK_PIPELINE_BIND_POINT_COMPUTE, x->layout[pi], 0, x->n_sets[pi], sets,
                                    n_dyn, dyn);
    if (pl->push_buf >= 0) {
        uint32_t n = (uint32_t)((am_buffer_bytes(&s->buffer[pl->push_buf]) + 3) & ~(uint64_t)3);
        if (n) VK->vkCmdPushConstants(x->cb, x->layout[pi], VK_SHADER_STAGE_COMPUTE_BIT, 0, n, x->buf[pl->push_buf].map);
    }
    VK->vkCmdDispatch(x->cb, c->groups[0], c->groups[1], c->groups[2]);
    VkMemoryBarrier dev_to_host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                   .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                   .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT};
    VK->vkCmdPipelineBarrier(x->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                             &dev_to_host, 0, NULL, 0, NULL);
    am_img_record_readback(x, s);
    r = VK->vkEndCommandBuffer(x->cb);
    am_status st = r == VK_SUCCESS ? AM_PASS : vkfail(res, c->pos, "vkEndCommandBuffer", r);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (st == AM_PASS) st = submit_wait(x, c, o, timeout_ms, res);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (st == AM_PASS && c->timed) {
        size_t used = strlen(detail);
        snprintf(detail + used, dlen - used, "  TIMED_EXECUTION line %d: %s %ux%ux%u: %.3f ms (submit to fence)\n",
                 c->pos.line, pl->name, c->groups[0], c->groups[1], c->groups[2],
                 (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    }
    if (pool && !x->hung) VK->vkDestroyDescriptorPool(DEV, pool, NULL);
    if (!x->hung) am_img_finish(x, st == AM_PASS ? s : NULL);
    for (int i = 0; i < pl->n_bind; i++)
        for (int k = 0; k < pl->bind[i].n && pl->bind[i].kind != AM_BIND_SAMPLER; k++) invalidate(x, pl->bind[i].buf[k]);
    return st;
}

static am_status copy(am_exec *x, const am_cmd *c, am_result *res)
{
    vf_vk_raw *a = &x->buf[c->buf], *b = &x->buf[c->buf2];
    if (b->size != a->size || !b->buffer) {
        /* The destination takes the source's size, as in Amber. */
        if (b->buffer) vf_vk_raw_destroy(&x->dev, b);
        am_status st = make_buffer(x, c->buf2, a->size, c->pos, res);
        if (st != AM_PASS) return st;
    }
    if (a->size) memcpy(b->map, a->map, a->size);
    return AM_PASS;
}

static am_status write_values(am_exec *x, const am_script *s, const am_cmd *c, am_result *res)
{
    vf_vk_raw *b = &x->buf[c->buf];
    const am_fmt *f = &c->fmt;
    int sz = am_scalar_size(f->scalar);
    for (uint32_t i = 0; i < c->n_values; i++) {
        uint64_t off = c->offset + (uint64_t)(i / f->n_comp) * f->stride + f->comp_off[i % f->n_comp];
        if (off + (uint64_t)sz > b->size)
            return am_fail_at(res, c->pos, "write past the end of '%s'", s->buffer[c->buf].name);
        am_store_bits(b->map + off, f->scalar, c->values[i]);
    }
    return AM_PASS;
}

static am_status expect(am_exec *x, const am_script *s, const am_cmd *c, const am_exec_opts *o, am_result *res)
{
    const vf_vk_raw *a = &x->buf[c->buf];
    const vf_vk_raw *b = c->buf2 >= 0 ? &x->buf[c->buf2] : NULL;
    am_status st = am_check(s, c, a->map, a->size, b ? b->map : NULL, b ? b->size : 0, res);
    if (st == AM_FAIL && o->verbose) {
        am_dump(&s->buffer[c->buf], a->map, a->size, res->detail, sizeof res->detail);
        if (b) am_dump(&s->buffer[c->buf2], b->map, b->size, res->detail, sizeof res->detail);
    }
    return st;
}

static am_status run_range(am_exec *x, am_script *s, int from, int to, const am_exec_opts *o, uint32_t timeout_ms,
                           am_result *res, am_result *first_fail, int *n_fail)
{
    for (int i = from; i < to; i++) {
        const am_cmd *c = &s->cmd[i];
        am_status st = AM_PASS;
        switch (c->kind) {
        case AM_CMD_RUN: st = run(x, s, c, o, timeout_ms, res, first_fail->detail, sizeof first_fail->detail); break;
        case AM_CMD_COPY: st = copy(x, c, res); break;
        case AM_CMD_WRITE: st = write_values(x, s, c, res); break;
        case AM_CMD_REPEAT:
            for (uint32_t k = 0; k < c->count && st == AM_PASS; k++)
                st = run_range(x, s, i + 1, i + 1 + (int)c->body, o, timeout_ms, res, first_fail, n_fail);
            i += (int)c->body;
            break;
        default: {
            am_result r = {0};
            st = expect(x, s, c, o, &r);
            if (st == AM_FAIL) {
                if (++*n_fail == 1) {
                    size_t used = strlen(first_fail->detail);
                    first_fail->status = AM_FAIL;
                    first_fail->pos = r.pos;
                    snprintf(first_fail->msg, sizeof first_fail->msg, "%s", r.msg);
                    snprintf(first_fail->detail + used, sizeof first_fail->detail - used, "%s", r.detail);
                }
                st = AM_PASS; /* keep going: report how many expectations failed */
            } else if (st == AM_ERROR) {
                *res = r;
            }
        }
        }
        if (st != AM_PASS) return st;
    }
    return AM_PASS;
}

am_status am_exec_run(am_exec *x, am_script *s, const am_exec_opts *o, am_result *res)
{
    for (int i = 0; i < s->n_buffers; i++) {
        uint64_t bytes = am_buffer_bytes(&s->buffer[i]);
        am_status st = make_buffer(x, i, bytes, s->buffer[i].pos, res);
        if (st != AM_PASS) return st;
        am_buffer_init(&s->buffer[i], x->buf[i].map, bytes);
    }
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = x->dev.queue_family};
    VkResult r = VK->vkCreateCommandPool(DEV, &pci, NULL, &x->pool);
    if (r != VK_SUCCESS) return vkfail(res, (am_pos){0, 0}, "vkCreateCommandPool", r);
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = x->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    r = VK->vkAllocateCommandBuffers(DEV, &ai, &x->cb);
    if (r != VK_SUCCESS) return vkfail(res, (am_pos){0, 0}, "vkAllocateCommandBuffers", r);
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = VK->vkCreateFence(DEV, &fci, NULL, &x->fence);
    if (r != VK_SUCCESS) return vkfail(res, (am_pos){0, 0}, "vkCreateFence", r);
    am_status ist = am_img_setup(x, s, res);
    if (ist != AM_PASS) return ist;
    /* Pipelines are made up front so a compile error is reported even in
       a file whose RUN comes after a failing EXPECT. */
    for (int i = 0; i < s->n_pipelines; i++) {
        am_status st = make_pipeline(x, s, i, o, res);
        if (st != AM_PASS) return st;
    }
    uint32_t timeout_ms = s->fence_timeout_ms ? s->fence_timeout_ms : o->timeout_ms;
    am_result fail = {0};
    int n_fail = 0;
    am_status st = run_range(x, s, 0, s->n_cmds, o, timeout_ms, res, &fail, &n_fail);
    snprintf(res->detail, sizeof res->detail, "%s", fail.detail);
    if (st != AM_PASS) return st;
    if (n_fail) {
        *res = fail;
        if (n_fail > 1) {
            size_t used = strlen(res->msg);
            snprintf(res->msg + used, sizeof res->msg - used, " (and %d more failed expectations)", n_fail - 1);
        }
        return AM_FAIL;
    }
    res->status = AM_PASS;
    return AM_PASS;
}

void am_exec_destroy(am_exec *x)
{
    if (x->hung || !x->have_dev) return;
    if (DEV) {
        VK->vkDeviceWaitIdle(DEV);
        for (int i = 0; i < AM_MAX_PIPELINES; i++) {
            if (x->pipe[i]) VK->vkDestroyPipeline(DEV, x->pipe[i], NULL);
            if (x->layout[i]) VK->vkDestroyPipelineLayout(DEV, x->layout[i], NULL);
            for (int k = 0; k <= AM_MAX_SET; k++)
                if (x->set_layout[i][k]) VK->vkDestroyDescriptorSetLayout(DEV, x->set_layout[i][k], NULL);
        }
        for (int i = 0; i < AM_MAX_SHADERS; i++)
            if (x->module[i]) VK->vkDestroyShaderModule(DEV, x->module[i], NULL);
        for (int i = 0; i < AM_MAX_PIPELINES; i++)
            if (x->opt_module[i]) VK->vkDestroyShaderModule(DEV, x->opt_module[i], NULL);
        for (int i = 0; i < AM_MAX_BUFFERS; i++)
            if (x->buf[i].buffer) vf_vk_raw_destroy(&x->dev, &x->buf[i]);
        if (x->fence) VK->vkDestroyFence(DEV, x->fence, NULL);
        if (x->img_loaded) am_img_finish(x, NULL);
        am_img_destroy(x);
        if (x->pool) VK->vkDestroyCommandPool(DEV, x->pool, NULL);
    }
    vf_vk_device_destroy(&x->dev);
    x->have_dev = false;
}
