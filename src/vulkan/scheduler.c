#include "vulkan/scheduler.h"
#include "util/fault.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VF_STAGING_MIN ((VkDeviceSize)4 << 20)

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

/* ---- slots -------------------------------------------------------------- */

static vf_status slot_init(vf_vk_sched *s, vf_vk_slot *sl)
{
    VkDevice d = s->dev->device;
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = s->cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    vf_status st = vf_vk_check(s->err, VF_VKD(s->dev, vkAllocateCommandBuffers, d, &cai, &sl->cmd),
                               "vkAllocateCommandBuffers");
    if (st) return st;
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    st = vf_vk_check(s->err, VF_VKD(s->dev, vkCreateFence, d, &fci, NULL, &sl->fence), "vkCreateFence");
    if (st) return st;
    if (!s->dev->push_descriptors) {
        /* Enough for every dispatch of a full batch at the most bindings. */
        VkDescriptorPoolSize sizes[3] = {
            {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, s->batch_dispatches * VF_VK_MAX_BINDINGS},
            {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, s->batch_dispatches * 4},
            {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, s->batch_dispatches * 4},
        };
        VkDescriptorPoolCreateInfo pci = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
            .maxSets = s->batch_dispatches,
            .poolSizeCount = 3,
            .pPoolSizes = sizes,
        };
        st = vf_vk_check(s->err, VF_VKD(s->dev, vkCreateDescriptorPool, d, &pci, NULL, &sl->pool),
                         "vkCreateDescriptorPool");
        if (st) return st;
    }
    if (s->profile) {
        VkQueryPoolCreateInfo qci = {
            .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
            .queryType = VK_QUERY_TYPE_TIMESTAMP,
            .queryCount = 2 * s->batch_dispatches,
        };
        st = vf_vk_check(s->err, VF_VKD(s->dev, vkCreateQueryPool, d, &qci, NULL, &sl->queries),
                         "vkCreateQueryPool");
        if (st) return st;
        sl->timed_names = vf_calloc(s->batch_dispatches, sizeof *sl->timed_names);
        if (!sl->timed_names) return vf_err_set(s->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    }
    return VF_OK;
}

static void slot_destroy(vf_vk_sched *s, vf_vk_slot *sl)
{
    const vf_vk_device_table *vk = &s->dev->vkd;
    VkDevice d = s->dev->device;
    if (sl->fence) vk->vkDestroyFence(d, sl->fence, NULL);
    if (sl->pool) vk->vkDestroyDescriptorPool(d, sl->pool, NULL);
    if (sl->queries) vk->vkDestroyQueryPool(d, sl->queries, NULL);
    for (uint32_t i = 0; i < sl->n_views; i++) vk->vkDestroyBufferView(d, sl->views[i], NULL);
    free(sl->views);
    vf_vk_raw_destroy(s->dev, &sl->staging);
    free(sl->timed_names);
    memset(sl, 0, sizeof *sl);
}

vf_status vf_vk_sched_init(vf_vk_sched *s, vf_vk_device *dev, vf_vk_mem *mem,
                           const vf_vk_sched_options *opt, vf_err *err)
{
    memset(s, 0, sizeof *s);
    s->dev = dev;
    s->mem = mem;
    s->err = err;
    s->batch_dispatches = opt && opt->batch_dispatches ? opt->batch_dispatches : 64;
    s->profile = opt && opt->profile && dev->timestamp_valid_bits > 0;
    int64_t ms = opt && opt->timeout_ms > 0 ? opt->timeout_ms : VF_VK_DEFAULT_TIMEOUT_MS;
    s->timeout_ns = (uint64_t)ms * 1000000u;
    vf_vk_hazards_init(&s->hz, &dev->vkd, &dev->test.drop_barriers);
    VkCommandPoolCreateInfo cpi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
        .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT |
                 VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
        .queueFamilyIndex = dev->queue_family,
    };
    vf_status st = vf_vk_check(err, VF_VKD(dev, vkCreateCommandPool, dev->device, &cpi, NULL, &s->cmd_pool),
                               "vkCreateCommandPool");
    for (int i = 0; i < VF_VK_SLOTS && !st; i++) st = slot_init(s, &s->slots[i]);
    return st;
}

/* ---- completion ----------------------------------------------------------- */

static vf_status record_timings(vf_vk_sched *s, vf_vk_slot *sl)
{
    if (!sl->queries || !sl->n_timed) return VF_OK;
    uint64_t *t = vf_malloc(2 * sl->n_timed * sizeof *t);
    if (!t) return vf_err_set(s->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    VkResult r = VF_VKD(s->dev, vkGetQueryPoolResults, 
        s->dev->device, sl->queries, 0, 2 * sl->n_timed, 2 * sl->n_timed * sizeof *t, t,
        sizeof *t, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    vf_status st = vf_vk_check(s->err, r, "vkGetQueryPoolResults");
    if (!st && !vf_grow_size((void **)&s->timings, &s->cap_timings, s->n_timings + sl->n_timed, sizeof *s->timings))
        st = vf_err_set(s->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    uint32_t bits = s->dev->timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    for (uint32_t i = 0; !st && i < sl->n_timed; i++) {
        vf_vk_timing *o = &s->timings[s->n_timings++];
        memcpy(o->name, sl->timed_names[i], sizeof o->name);
        uint64_t ticks = ((t[2 * i + 1] & mask) - (t[2 * i] & mask)) & mask;
        o->ns = (uint64_t)((double)ticks * s->dev->timestamp_period);
    }
    free(t);
    sl->n_timed = 0;
    return st;
}

static bool queue_idle(const vf_vk_sched *s)
{
    for (int i = 0; i < VF_VK_SLOTS; i++)
        if (s->slots[i].in_flight || (s->slots[i].recording && s->slots[i].n_commands)) return false;
    return true;
}

static vf_status slot_finished(vf_vk_sched *s, vf_vk_slot *sl)
{
    sl->in_flight = false;
    if (sl->serial > s->completed) s->completed = sl->serial;
    vf_status st = record_timings(s, sl);
    vf_vk_mem_collect(s->mem, s->completed);
    /* Fence wait + the end-of-batch host barrier order everything before:
       nothing earlier can race with later work any more. */
    if (queue_idle(s)) vf_vk_hazard_clear(&s->hz);
    return st;
}

static vf_status slot_wait(vf_vk_sched *s, vf_vk_slot *sl)
{
    if (!sl->in_flight) return VF_OK;
    vf_status st = vf_vk_lost(s->dev, s->err, "waiting for a command batch");
    if (st) return st;
    /* Never forever (VKFUSE_TIMEOUT_MS): a batch that does not finish (a
       kernel that loops, a hung GPU the driver does not report) leaves the
       device in a state nothing can be trusted of, as a lost one. */
    VkResult r = VF_VKD(s->dev, vkWaitForFences, s->dev->device, 1, &sl->fence, VK_TRUE, s->timeout_ns);
    if (r == VK_TIMEOUT) {
        double ms = (double)s->timeout_ns / 1e6;
        char what[160];
        snprintf(what, sizeof what, "vkWaitForFences (a command batch timed out after %g ms)", ms);
        vf_vk_lost_note(s->dev, what, r);
        return vf_err_set(s->err, VF_ERROR_DEVICE,
                          "vulkan: timed out after %g ms in vkWaitForFences: a command batch did not finish"
                          " (a kernel that never ends, or a hung GPU); the device is treated as lost: create"
                          " a new context (VKFUSE_TIMEOUT_MS sets the limit)", ms);
    }
    st = vf_vk_check(s->err, r, "vkWaitForFences");
    if (st) return st;
    return slot_finished(s, sl);
}

/* Advances `completed` over batches that already finished, oldest first. */
static void poll(vf_vk_sched *s)
{
    for (int i = 0; i < VF_VK_SLOTS; i++) {
        vf_vk_slot *sl = &s->slots[(s->cur + i) % VF_VK_SLOTS];
        if (!sl->in_flight) continue;
        if (VF_VKD(s->dev, vkGetFenceStatus, s->dev->device, sl->fence) != VK_SUCCESS) return;
        slot_finished(s, sl);
    }
}

/* ---- batches -------------------------------------------------------------- */

uint64_t vf_vk_sched_open(vf_vk_sched *s)
{
    vf_vk_slot *sl = &s->slots[s->cur];
    if (sl->recording) return sl->serial;
    if (vf_vk_lost(s->dev, s->err, "recording a command batch")) return 0;
    /* The ring is in serial order: the slot we reuse holds the oldest batch. */
    if (slot_wait(s, sl)) return 0;
    const vf_vk_device_table *vk = &s->dev->vkd;
    if (vf_vk_check(s->err, VF_VKD(s->dev, vkResetCommandBuffer, sl->cmd, 0), "vkResetCommandBuffer")) return 0;
    if (sl->pool && vf_vk_check(s->err, VF_VKD(s->dev, vkResetDescriptorPool, s->dev->device, sl->pool, 0),
                                "vkResetDescriptorPool"))
        return 0;
    for (uint32_t i = 0; i < sl->n_views; i++) vk->vkDestroyBufferView(s->dev->device, sl->views[i], NULL);
    sl->n_views = 0;
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    if (vf_vk_check(s->err, VF_VKD(s->dev, vkBeginCommandBuffer, sl->cmd, &bi), "vkBeginCommandBuffer")) return 0;
    if (sl->queries) vk->vkCmdResetQueryPool(sl->cmd, sl->queries, 0, 2 * s->batch_dispatches);
    sl->recording = true;
    sl->serial = ++s->last_serial;
    sl->n_dispatches = sl->n_commands = sl->n_timed = 0;
    sl->staging_used = 0;
    return sl->serial;
}

static vf_status submit_slot(vf_vk_sched *s, VkCommandBuffer extra);

vf_status vf_vk_sched_flush(vf_vk_sched *s)
{
    vf_vk_slot *sl = &s->slots[s->cur];
    if (!sl->recording || sl->n_commands == 0) return VF_OK;
    vf_status st = vf_vk_lost(s->dev, s->err, "submitting a command batch");
    if (st) return st;
    return submit_slot(s, VK_NULL_HANDLE);
}

vf_status vf_vk_sched_submit_with(vf_vk_sched *s, VkCommandBuffer extra, uint64_t *serial)
{
    *serial = vf_vk_sched_open(s);
    if (!*serial) return s->err->status ? s->err->status : VF_ERROR_DEVICE;
    vf_status st = submit_slot(s, extra);
    /* extra ends with a full barrier: later work is ordered after it and
       everything before it, so nothing tracked so far can race any more. */
    if (!st) vf_vk_hazard_clear(&s->hz);
    return st;
}

/* Ends the open batch and submits it, followed by `extra` when given, in
   one vkQueueSubmit whose fence is the batch's. */
static vf_status submit_slot(vf_vk_sched *s, VkCommandBuffer extra)
{
    vf_vk_slot *sl = &s->slots[s->cur];
    const vf_vk_device_table *vk = &s->dev->vkd;
    /* Device writes become visible to the host (mapped downloads) once the
       fence signals only with this barrier (a fence alone does not). */
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT,
    };
    vk->vkCmdPipelineBarrier(sl->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    sl->recording = false;
    vf_status st = vf_vk_check(s->err, VF_VKD(s->dev, vkEndCommandBuffer, sl->cmd), "vkEndCommandBuffer");
    if (!st) st = vf_vk_check(s->err, VF_VKD(s->dev, vkResetFences, s->dev->device, 1, &sl->fence), "vkResetFences");
    VkCommandBuffer cmds[2] = {sl->cmd, extra};
    VkSubmitInfo si = {
        .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
        .commandBufferCount = extra ? 2 : 1,
        .pCommandBuffers = cmds,
    };
    if (!st) st = vf_vk_check(s->err, VF_VKD(s->dev, vkQueueSubmit, s->dev->queue, 1, &si, sl->fence), "vkQueueSubmit");
    if (st) {
        /* The batch is lost; count it completed so nothing waits forever. */
        if (sl->serial > s->completed) s->completed = sl->serial;
        return st;
    }
    sl->in_flight = true;
    s->submits++;
    s->cur = (s->cur + 1) % VF_VK_SLOTS;
    poll(s);
    return VF_OK;
}

vf_status vf_vk_sched_wait(vf_vk_sched *s, uint64_t serial)
{
    if (serial <= s->completed) return VF_OK;
    vf_vk_slot *open = &s->slots[s->cur];
    if (open->recording && open->serial <= serial) {
        vf_status st = vf_vk_sched_flush(s);
        if (st) return st;
    }
    for (int i = 0; i < VF_VK_SLOTS; i++) {
        vf_vk_slot *sl = &s->slots[(s->cur + i) % VF_VK_SLOTS];
        if (sl->in_flight && sl->serial <= serial) {
            vf_status st = slot_wait(s, sl);
            if (st) return st;
        }
    }
    return VF_OK;
}

vf_status vf_vk_sched_sync(vf_vk_sched *s)
{
    vf_status st = vf_vk_sched_flush(s);
    if (st) return st;
    return vf_vk_sched_wait(s, s->last_serial);
}

void vf_vk_sched_destroy(vf_vk_sched *s)
{
    if (!s->dev) return;
    /* a lost device runs nothing more: what is recorded is dropped, and
       vkDeviceWaitIdle (allowed on a lost device) returns at once on a
       really lost one */
    if (!s->dev->lost) vf_vk_sched_sync(s);
    if (s->dev->lost) vf_vk_sched_drain(s); /* a sync that timed out lost it too */
    else if (s->dev->device) VF_VKD(s->dev, vkDeviceWaitIdle, s->dev->device);
    for (int i = 0; i < VF_VK_SLOTS; i++) slot_destroy(s, &s->slots[i]);
    if (s->cmd_pool) s->dev->vkd.vkDestroyCommandPool(s->dev->device, s->cmd_pool, NULL);
    vf_vk_hazards_free(&s->hz);
    free(s->timings);
    memset(s, 0, sizeof *s);
}

void vf_vk_sched_drain(vf_vk_sched *s)
{
    vf_vk_device *d = s->dev;
    if (!d || !d->lost || d->drained || !d->device) return;
    d->drained = true;
    /* vkDeviceWaitIdle is prompt on a really lost device, but a hung one
       (a wait that timed out) may never return from it: the batches' own
       fences are waited for instead, with the timeout. A lost device's
       wait may answer VK_ERROR_DEVICE_LOST: it runs nothing more then. */
    VkFence f[VF_VK_SLOTS];
    uint32_t n = 0;
    for (int i = 0; i < VF_VK_SLOTS; i++)
        if (s->slots[i].in_flight) f[n++] = s->slots[i].fence;
    VkResult r = n ? VF_VKD(d, vkWaitForFences, d->device, n, f, VK_TRUE, s->timeout_ns) : VK_SUCCESS;
    if (r == VK_SUCCESS || r == VK_ERROR_DEVICE_LOST) {
        for (int i = 0; i < VF_VK_SLOTS; i++)
            if (s->slots[i].in_flight) {
                s->slots[i].in_flight = false;
                if (s->slots[i].serial > s->completed) s->completed = s->slots[i].serial;
            }
        vf_vk_mem_collect(s->mem, s->completed);
        return;
    }
    d->abandoned = true;
    vf_vk_device_table_abandon(&d->vkd);
    fprintf(stderr, "vkfuse: the device's work did not finish within %g ms after it was lost (%s): its Vulkan"
            " objects are left in place, not destroyed (host memory is freed)\n",
            (double)s->timeout_ns / 1e6, d->lost_during);
}

/* Puts a barrier first if any of the n accesses conflicts, then tracks
   them (hazard.h). */
static vf_status track(vf_vk_sched *s, VkCommandBuffer cmd, const vf_vk_access *a, int n, bool force)
{
    if (!vf_vk_hazard_track(&s->hz, cmd, a, n, force))
        return vf_err_set(s->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    return VF_OK;
}

/* ---- dispatch ------------------------------------------------------------- */

static vf_status alloc_set(vf_vk_sched *s, const vf_vk_pipeline *p, VkDescriptorSet *set)
{
    vf_vk_slot *sl = &s->slots[s->cur];
    VkDescriptorSetAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
        .descriptorPool = sl->pool,
        .descriptorSetCount = 1,
        .pSetLayouts = &p->layout->set_layout,
    };
    VkResult r = VF_VKD(s->dev, vkAllocateDescriptorSets, s->dev->device, &ai, set);
    if (r == VK_ERROR_OUT_OF_POOL_MEMORY || r == VK_ERROR_FRAGMENTED_POOL) {
        /* This batch's pool is full: submit it and use the next slot's. */
        vf_status st = vf_vk_sched_flush(s);
        if (st) return st;
        if (!vf_vk_sched_open(s)) return s->err->status ? s->err->status : VF_ERROR_DEVICE;
        ai.descriptorPool = s->slots[s->cur].pool;
        r = VF_VKD(s->dev, vkAllocateDescriptorSets, s->dev->device, &ai, set);
    }
    return vf_vk_check(s->err, r, "vkAllocateDescriptorSets");
}

/* A texel view of [off, off + range) of buf for the open batch (slot
   sl): kept in the slot and destroyed when it is reused, its work done
   (vf_vk_sched_open). */
static vf_status slot_view(vf_vk_sched *s, vf_vk_slot *sl, VkBuffer buf, VkDeviceSize off, VkDeviceSize range,
                           const char *kernel, int binding, VkBufferView *out)
{
    if (sl->n_views == sl->cap_views) {
        uint32_t cap = sl->cap_views ? 2 * sl->cap_views : 16;
        VkBufferView *nv = realloc(sl->views, sizeof *nv * cap);
        if (!nv) return vf_err_set(s->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
        sl->views = nv, sl->cap_views = cap;
    }
    char what[96];
    snprintf(what, sizeof what, "kernel %s binding %d", kernel, binding);
    vf_status st = vf_vk_texel_view(s->dev, buf, off, range, what, out, s->err);
    if (!st) sl->views[sl->n_views++] = *out;
    return st;
}

vf_status vf_vk_sched_dispatch(vf_vk_sched *s, const vf_vk_dispatch_info *d)
{
    const vf_vk_pipeline *p = d->pipe;
    const char *name = d->name ? d->name : p->name;
    const VkPhysicalDeviceLimits *L = &s->dev->props.limits;
    if (d->n_bindings != p->layout->n_bindings)
        return vf_err_set(s->err, VF_ERROR_INVALID_ARGUMENT,
                          "kernel %s: %d bindings given, its layout has %d", name, d->n_bindings,
                          p->layout->n_bindings);
    for (int i = 0; i < 3; i++)
        if (d->groups[i] == 0 || d->groups[i] > L->maxComputeWorkGroupCount[i])
            return vf_err_set(s->err, VF_ERROR_INVALID_ARGUMENT,
                              "kernel %s: %u workgroups in dimension %d (device allows 1..%u)",
                              name, d->groups[i], i, L->maxComputeWorkGroupCount[i]);
    if (d->push_size > p->layout->push_range)
        return vf_err_set(s->err, VF_ERROR_INVALID_ARGUMENT,
                          "kernel %s: %u push-constant bytes, layout has %u", name, d->push_size,
                          p->layout->push_range);

    if (s->slots[s->cur].recording && s->slots[s->cur].n_dispatches >= s->batch_dispatches) {
        vf_status st = vf_vk_sched_flush(s);
        if (st) return st;
    }
    if (!vf_vk_sched_open(s)) return s->err->status ? s->err->status : VF_ERROR_DEVICE;
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (!s->dev->push_descriptors) {
        vf_status st = alloc_set(s, p, &set);
        if (st) return st;
    }
    vf_vk_slot *sl = &s->slots[s->cur];
    VkCommandBuffer cmd = sl->cmd;

    VkDescriptorBufferInfo info[VF_VK_MAX_BINDINGS];
    VkBufferView views[VF_VK_MAX_BINDINGS];
    VkWriteDescriptorSet w[VF_VK_MAX_BINDINGS];
    vf_vk_access acc[VF_VK_MAX_BINDINGS];
    for (int i = 0; i < d->n_bindings; i++) {
        const vf_vk_bind *b = &d->bindings[i];
        VkDescriptorType type = p->layout->types[i];
        bool uniform = type == VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
        bool texel = type == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
        VkBuffer buf;
        VkDeviceSize off, range = b->range;
        if (b->buf) {
            buf = vf_vk_buffer_handle(b->buf);
            off = b->buf->offset + b->offset;
            if (b->offset >= b->buf->size || (range && b->offset + range > b->buf->size))
                return vf_err_set(s->err, VF_ERROR_INVALID_ARGUMENT,
                                  "kernel %s binding %d: range [%llu, +%llu) outside its %llu-byte"
                                  " buffer", name, i, (unsigned long long)b->offset,
                                  (unsigned long long)range, (unsigned long long)b->buf->size);
            if (!range) range = b->buf->size - b->offset;
            b->buf->last_use = sl->serial;
        } else {
            buf = b->raw;
            off = b->offset;
            if (!buf || !range)
                return vf_err_set(s->err, VF_ERROR_INVALID_ARGUMENT,
                                  "kernel %s binding %d: no buffer or no range", name, i);
        }
        if (texel) {
            vf_status vst = slot_view(s, sl, buf, off, range, name, i, &views[i]);
            if (vst) return vst;
        } else {
            VkDeviceSize align = uniform ? L->minUniformBufferOffsetAlignment : L->minStorageBufferOffsetAlignment;
            VkDeviceSize max = uniform ? L->maxUniformBufferRange : L->maxStorageBufferRange;
            if (align && off % align)
                return vf_err_set(s->err, VF_ERROR_UNSUPPORTED,
                                  "kernel %s binding %d: offset %llu is not a multiple of the device's"
                                  " %s offset alignment %llu", name, i, (unsigned long long)off,
                                  uniform ? "uniform" : "storage", (unsigned long long)align);
            if (range > max)
                return vf_err_set(s->err, VF_ERROR_UNSUPPORTED,
                                  "kernel %s binding %d: %llu bytes exceed the device's max %s range %llu",
                                  name, i, (unsigned long long)range, uniform ? "uniform" : "storage",
                                  (unsigned long long)max);
            info[i] = (VkDescriptorBufferInfo){buf, off, range};
        }
        w[i] = (VkWriteDescriptorSet){
            .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
            .dstSet = set,
            .dstBinding = (uint32_t)i,
            .descriptorCount = 1,
            .descriptorType = type,
            .pBufferInfo = texel ? NULL : &info[i],
            .pTexelBufferView = texel ? &views[i] : NULL,
        };
        unsigned dflt = texel ? VF_VK_READ : VF_VK_READ | VF_VK_WRITE; /* a texel binding is read-only */
        acc[i] = (vf_vk_access){buf, off, off + range, b->access ? b->access : dflt, 0};
    }
    vf_status st = track(s, cmd, acc, d->n_bindings, d->barrier_before);
    if (st) return st;

    const vf_vk_device_table *vk = &s->dev->vkd;
    vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
    if (d->n_bindings) {
        if (s->dev->push_descriptors) {
            vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout->layout, 0,
                                          (uint32_t)d->n_bindings, w);
        } else {
            vk->vkUpdateDescriptorSets(s->dev->device, (uint32_t)d->n_bindings, w, 0, NULL);
            vk->vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->layout->layout, 0, 1,
                                        &set, 0, NULL);
        }
    }
    if (d->push_size && d->push) {
        /* vkCmdPushConstants wants a multiple of 4 bytes: pad with zeros. */
        uint8_t pc[256] = {0};
        uint32_t n = (d->push_size + 3) & ~3u;
        if (n > sizeof pc) n = sizeof pc;
        memcpy(pc, d->push, d->push_size < n ? d->push_size : n);
        vk->vkCmdPushConstants(cmd, p->layout->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, n, pc);
    }
    bool timed = sl->queries && sl->n_timed < s->batch_dispatches;
    if (timed)
        vk->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, sl->queries, 2 * sl->n_timed);
    vk->vkCmdDispatch(cmd, d->groups[0], d->groups[1], d->groups[2]);
    if (timed) {
        vk->vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, sl->queries,
                                2 * sl->n_timed + 1);
        snprintf(sl->timed_names[sl->n_timed], sizeof sl->timed_names[0], "%s", name);
        sl->n_timed++;
    }
    sl->n_dispatches++;
    sl->n_commands++;
    s->hz.dispatches++;
    return VF_OK;
}

/* ---- staging copies ------------------------------------------------------- */

/* n bytes of the open batch's staging buffer; may submit the batch (when
   its staging buffer is full) and start the next. */
static vf_status staging_reserve(vf_vk_sched *s, VkDeviceSize n, VkDeviceSize *off)
{
    if (!vf_vk_sched_open(s)) return s->err->status ? s->err->status : VF_ERROR_DEVICE;
    VkDeviceSize need = align_up(n, 16);
    vf_vk_slot *sl = &s->slots[s->cur];
    if (sl->staging.size - sl->staging_used < need) {
        if (sl->staging_used) {
            vf_status st = vf_vk_sched_flush(s);
            if (st) return st;
            if (!vf_vk_sched_open(s)) return s->err->status ? s->err->status : VF_ERROR_DEVICE;
            sl = &s->slots[s->cur];
        }
        if (sl->staging.size < need) {
            /* The slot is not in flight (open just waited for it). */
            vf_vk_raw_destroy(s->dev, &sl->staging);
            VkDeviceSize size = need > VF_STAGING_MIN ? align_up(need, VF_STAGING_MIN) : VF_STAGING_MIN;
            vf_status st = vf_vk_raw_create(s->dev, size, VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                              VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                                            &sl->staging, s->err);
            if (st) return st;
        }
    }
    *off = sl->staging_used;
    sl->staging_used += need;
    return VF_OK;
}

static vf_status staging_sync(vf_vk_sched *s, vf_vk_raw *r, bool flush)
{
    if (r->coherent) return VF_OK;
    VkMappedMemoryRange mr = {
        .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
        .memory = r->memory,
        .size = VK_WHOLE_SIZE,
    };
    return flush ? vf_vk_check(s->err, VF_VKD(s->dev, vkFlushMappedMemoryRanges, s->dev->device, 1, &mr), "flush")
                 : vf_vk_check(s->err, VF_VKD(s->dev, vkInvalidateMappedMemoryRanges, s->dev->device, 1, &mr),
                               "invalidate");
}

static vf_status record_copy(vf_vk_sched *s, vf_buffer *b, VkDeviceSize off, VkDeviceSize n,
                             VkDeviceSize staging_off, bool to_device)
{
    vf_vk_slot *sl = &s->slots[s->cur];
    VkBuffer dev_buf = vf_vk_buffer_handle(b);
    vf_vk_access a = {dev_buf, b->offset + off, b->offset + off + n, to_device ? VF_VK_WRITE : VF_VK_READ, 0};
    vf_status st = track(s, sl->cmd, &a, 1, false);
    if (st) return st;
    VkBufferCopy c = {
        .srcOffset = to_device ? staging_off : b->offset + off,
        .dstOffset = to_device ? b->offset + off : staging_off,
        .size = n,
    };
    s->dev->vkd.vkCmdCopyBuffer(sl->cmd, to_device ? sl->staging.buffer : dev_buf,
                                to_device ? dev_buf : sl->staging.buffer, 1, &c);
    b->last_use = sl->serial;
    sl->n_commands++;
    s->copies++;
    return VF_OK;
}

vf_status vf_vk_sched_upload(vf_vk_sched *s, vf_buffer *dst, VkDeviceSize off, const void *src,
                             VkDeviceSize n)
{
    VkDeviceSize so = 0;
    vf_status st = staging_reserve(s, n, &so);
    if (st) return st;
    vf_vk_slot *sl = &s->slots[s->cur];
    memcpy(sl->staging.map + so, src, n);
    st = staging_sync(s, &sl->staging, true);
    if (st) return st;
    return record_copy(s, dst, off, n, so, true);
}

vf_status vf_vk_sched_download(vf_vk_sched *s, vf_buffer *src, VkDeviceSize off, void *dst,
                               VkDeviceSize n)
{
    VkDeviceSize so = 0;
    vf_status st = staging_reserve(s, n, &so);
    if (st) return st;
    vf_vk_slot *sl = &s->slots[s->cur];
    uint64_t serial = sl->serial;
    st = record_copy(s, src, off, n, so, false);
    if (!st) st = vf_vk_sched_wait(s, serial);
    if (!st) st = staging_sync(s, &sl->staging, false);
    if (!st) memcpy(dst, sl->staging.map + so, n);
    return st;
}
