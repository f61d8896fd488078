/* Recorded plans (plan.h): recording and running one.
 *
 * Per run: the plan's command buffer is submitted behind the scheduler's
 * open batch in ONE vkQueueSubmit. What changes between calls is only the
 * per-call bindings (inputs and outputs). Why re-record instead of
 * updating bound descriptors: updating a set that a recorded command
 * buffer binds invalidates that buffer unless the set layout was made with
 * UPDATE_AFTER_BIND (descriptor indexing, which the device setup does not
 * enable and push-descriptor layouts cannot use), and copying inputs and
 * outputs through plan-owned buffers costs a full extra pass over every
 * input and output. So when the bindings differ from the ones recorded,
 * the plan (after its previous run has finished) rewrites the affected
 * descriptors and re-records the command buffer from its prepared steps
 * (plan.c): a few Vulkan calls per dispatch, no codegen, no pipeline or
 * descriptor creation. When they are the same, the recording is
 * resubmitted as is. */
#include "vulkan/plan_internal.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

static bind_key key_of(const vf_plan_bind *b)
{
    if (!b->buf) return (bind_key){0};
    return (bind_key){b->buf->block->id, b->buf->offset + b->offset, b->buf->size - b->offset};
}

/* Where binding b points in this call: buffer, offset in its VkBuffer, range. */
static vf_status resolve(vf_vk_runtime *rt, const vf_plan *p, const plan_binding *b, const vf_plan_bind *binds,
                         VkDescriptorBufferInfo *info, vf_buffer **owner)
{
    vf_buffer *buf = b->kind == VF_PLAN_ARENA ? p->arena : b->kind == VF_PLAN_BIND ? binds[b->index].buf : b->buf;
    size_t off = b->kind == VF_PLAN_BIND ? binds[b->index].offset + b->offset : b->offset;
    if (!buf || off >= buf->size)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "plan binding outside its buffer");
    /* As for eager dispatches: kernels may read whole 16-byte words past
       the last element; ranges round up within the reserved size. */
    VkDeviceSize want = ((VkDeviceSize)b->bytes + 15) & ~(VkDeviceSize)15, room = buf->size - off;
    const VkPhysicalDeviceLimits *L = &rt->dev.props.limits;
    VkDeviceSize at = buf->offset + off;
    if (L->minStorageBufferOffsetAlignment && at % L->minStorageBufferOffsetAlignment)
        return vf_err_set(rt->err, VF_ERROR_UNSUPPORTED,
                          "plan binding offset %llu is not a multiple of the device's storage offset"
                          " alignment %llu", (unsigned long long)at,
                          (unsigned long long)L->minStorageBufferOffsetAlignment);
    *info = (VkDescriptorBufferInfo){vf_vk_buffer_handle(buf), at, want < room ? want : room};
    if (info->range > L->maxStorageBufferRange)
        return vf_err_set(rt->err, VF_ERROR_UNSUPPORTED, "plan binding of %llu bytes exceeds the device's"
                          " max storage range %u", (unsigned long long)info->range, L->maxStorageBufferRange);
    *owner = buf;
    return VF_OK;
}


/* A texel view of the binding at info for this recording (kept in
   p->views until the next recording or the plan's end). */
static vf_status add_view(vf_vk_runtime *rt, vf_plan *p, const VkDescriptorBufferInfo *info, const char *kernel,
                          int binding, VkBufferView *out)
{
    VkBufferView *nv = realloc(p->views, sizeof *nv * (size_t)(p->n_views + 1));
    if (!nv) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    p->views = nv;
    char what[96];
    snprintf(what, sizeof what, "plan kernel %s binding %d", kernel, binding);
    vf_status s = vf_vk_texel_view(&rt->dev, info->buffer, info->offset, info->range, what, out, rt->err);
    if (!s) p->views[p->n_views++] = *out;
    return s;
}

/* Batching barriers. A step's level (hazard.h) is one more than the
   highest level of the earlier steps it depends on (it reads or overwrites
   a range one of them wrote, overwrites a range one of them read, or is a
   later step of the same kernel); steps of one level are independent.
   Recording level by level with one barrier between levels gives as few
   barriers as the dependency chains allow, where recording in plan order
   would put one before every step that conflicts with something since the
   last barrier: independent chains (the two branches of a cond, the
   outputs of a function) then share their barriers. Any order that keeps
   the dependencies is correct, whatever the arena aliasing, because the
   dependencies are computed on the ranges the steps really touch. */
#define VF_PLAN_REORDER_MAX_STEPS 4096 /* above: plan order (the scan is quadratic) */

static vf_status record(vf_vk_runtime *rt, vf_plan *p, const vf_plan_bind *binds)
{
    const vf_vk_device_table *vk = &rt->dev.vkd;
    VkCommandBuffer cmd = p->cmd;
    p->valid = false;
    int n = p->n_steps;
    bool reorder = n <= VF_PLAN_REORDER_MAX_STEPS;
    vf_vk_hazards hz;
    vf_vk_hazards_init(&hz, vk, &rt->dev.test.drop_barriers);
    /* the last recording's texel views: its run has completed (vf_vk_plan_run waited) */
    for (int i = 0; i < p->n_views; i++) vk->vkDestroyBufferView(rt->dev.device, p->views[i], NULL);
    p->n_views = 0;
    VkDescriptorBufferInfo *info = vf_malloc(sizeof *info * (size_t)(n * VF_KERNEL_MAX_BINDINGS + 1));
    int *level = vf_malloc(sizeof *level * (size_t)(n + 1)), *order = vf_malloc(sizeof *order * (size_t)(n + 1));
    VkDeviceSize *args = vf_calloc((size_t)n + 1, sizeof *args);
    VkBufferView *views = vf_calloc((size_t)(n * VF_KERNEL_MAX_BINDINGS + 1), sizeof *views);
    vf_status s = info && level && order && args && views ? VF_OK
                : vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    /* Where every binding points in this call, and each step's level. */
    int levels = 0;
    for (int i = 0; !s && i < n; i++) {
        plan_step *ps = &p->steps[i];
        vf_vk_access mine[VF_KERNEL_MAX_BINDINGS + 1];
        int n_mine = 0;
        for (int j = 0; !s && j < ps->n_bindings; j++) {
            vf_buffer *owner = NULL;
            VkDescriptorBufferInfo *in = &info[i * VF_KERNEL_MAX_BINDINGS + j];
            s = resolve(rt, p, &ps->b[j], binds, in, &owner);
            if (!s && ps->pipe->layout->types[j] == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER)
                s = add_view(rt, p, in, ps->pipe->name, j, &views[i * VF_KERNEL_MAX_BINDINGS + j]);
            if (s) break;
            if (ps->b[j].access)
                mine[n_mine++] = (vf_vk_access){in->buffer, in->offset, in->offset + in->range, ps->b[j].access, 0};
        }
        if (s) break;
        if (ps->slot >= 0) { /* guarded: reads its indirect args */
            args[i] = p->table->offset + (VkDeviceSize)(p->n_slots + ps->slot) * 16;
            mine[n_mine++] = (vf_vk_access){vf_vk_buffer_handle(p->table), args[i], args[i] + 16, VF_VK_READ, 0};
        }
        /* In plan order (too many steps to reorder) a barrier at each
           conflict with what came since the last one, as the scheduler. */
        int last = i ? level[i - 1] : 0;
        level[i] = vf_vk_hazard_level(&hz, mine, n_mine, ps->barrier_before && i ? last + 1 : reorder ? 0 : last);
        if (!reorder && level[i] > last) vf_vk_hazard_clear(&hz);
        if (!vf_vk_hazard_add(&hz, mine, n_mine, level[i]))
            s = vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
        if (level[i] + 1 > levels) levels = level[i] + 1;
    }
    /* Steps by level, plan order within a level (a counting sort). */
    int *start = s ? NULL : vf_calloc((size_t)levels + 2, sizeof *start);
    if (!s && !start) s = vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    for (int i = 0; !s && i < n; i++) start[level[i] + 1]++;
    for (int l = 0; !s && l < levels; l++) start[l + 1] += start[l];
    for (int i = 0; !s && i < n; i++) order[start[level[i]]++] = i;
    free(start);
    if (!s) s = vf_vk_check(rt->err, VF_VKD(&rt->dev, vkResetCommandBuffer, cmd, 0), "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    if (!s) s = vf_vk_check(rt->err, VF_VKD(&rt->dev, vkBeginCommandBuffer, cmd, &bi), "vkBeginCommandBuffer");
    if (s) {
        free(info), free(level), free(order), free(args), free(views);
        vf_vk_hazards_free(&hz);
        return s;
    }
    vf_vk_hazard_barrier(&hz, cmd, VF_VK_BARRIER_INDIRECT); /* after everything submitted before */
    vf_vk_prof_reset(rt, &p->prof, cmd);
    for (int k = 0; k < p->prof.n_k; k++) p->prof.k[k].barriers = 0;
    for (int x = 0; x < n; x++) {
        int i = order[x];
        plan_step *ps = &p->steps[i];
        /* DRAW_INDIRECT: guarded steps read their dispatch args (add_guards) */
        if (x > 0 && level[i] != level[order[x - 1]] &&
            vf_vk_hazard_due(&hz, cmd, VF_VK_BARRIER_INDIRECT, ps->barrier_before))
            p->prof.k[ps->kernel].barriers++;
        VkWriteDescriptorSet w[VF_KERNEL_MAX_BINDINGS];
        for (int j = 0; j < ps->n_bindings; j++) {
            VkDescriptorType type = ps->pipe->layout->types[j];
            bool texel = type == VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
            w[j] = (VkWriteDescriptorSet){
                .sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                .dstSet = ps->set,
                .dstBinding = (uint32_t)j,
                .descriptorCount = 1,
                .descriptorType = type,
                .pBufferInfo = texel ? NULL : &info[i * VF_KERNEL_MAX_BINDINGS + j],
                .pTexelBufferView = texel ? &views[i * VF_KERNEL_MAX_BINDINGS + j] : NULL,
            };
        }
        vk->vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ps->pipe->pipeline);
        if (ps->n_bindings && rt->dev.push_descriptors) {
            vk->vkCmdPushDescriptorSetKHR(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ps->pipe->layout->layout, 0,
                                          (uint32_t)ps->n_bindings, w);
        } else if (ps->n_bindings) {
            /* The previous run has finished (vf_vk_plan_run waited) and the
               old recording is being replaced: updating is allowed. */
            vk->vkUpdateDescriptorSets(rt->dev.device, (uint32_t)ps->n_bindings, w, 0, NULL);
            vk->vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, ps->pipe->layout->layout, 0, 1,
                                        &ps->set, 0, NULL);
        }
        if (ps->push_size) {
            uint8_t pc[VF_PUSH_MAX] = {0};
            uint32_t np = (ps->push_size + 3) & ~3u;
            if (np > sizeof pc) np = sizeof pc;
            memcpy(pc, ps->push, np);
            vk->vkCmdPushConstants(cmd, ps->pipe->layout->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, np, pc);
        }
        vf_vk_prof_stamp(rt, &p->prof, cmd, 2 * (uint32_t)i);
        if (ps->slot >= 0) vk->vkCmdDispatchIndirect(cmd, vf_vk_buffer_handle(p->table), args[i]);
        else vk->vkCmdDispatch(cmd, ps->groups[0], ps->groups[1], ps->groups[2]);
        vf_vk_prof_stamp(rt, &p->prof, cmd, 2 * (uint32_t)i + 1);
    }
    free(info), free(level), free(order), free(args), free(views);
    vf_vk_hazard_barrier(&hz, cmd, VF_VK_BARRIER_INDIRECT | VF_VK_BARRIER_HOST); /* before later work and host reads */
    p->barriers = (int)hz.barriers;
    vf_vk_hazards_free(&hz);
    s = vf_vk_check(rt->err, VF_VKD(&rt->dev, vkEndCommandBuffer, cmd), "vkEndCommandBuffer");
    if (s) return s;
    for (int i = 0; i < p->n_binds; i++) p->recorded[i] = key_of(&binds[i]);
    p->valid = true;
    return VF_OK;
}

static void mark_used(vf_plan *p, const vf_plan_bind *binds, uint64_t serial)
{
    if (p->arena) p->arena->last_use = serial;
    if (p->table) p->table->last_use = serial;
    for (int i = 0; i < p->n_scratch; i++) p->scratch[i]->last_use = serial;
    for (int i = 0; i < p->n_binds; i++)
        if (binds[i].buf) binds[i].buf->last_use = serial;
    for (int i = 0; i < p->n_steps; i++)
        for (int j = 0; j < p->steps[i].n_bindings; j++)
            if (p->steps[i].b[j].buf) p->steps[i].b[j].buf->last_use = serial;
}

vf_status vf_vk_plan_run(vf_vk_runtime *rt, vf_plan *p, const vf_plan_bind *binds, int n_binds)
{
    if (n_binds != p->n_binds)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "plan run with %d bindings, the plan has %d",
                          n_binds, p->n_binds);
    /* One recording, not SIMULTANEOUS_USE: it may be neither re-recorded
       nor resubmitted while the previous run is pending. */
    vf_status s = vf_vk_sched_wait(&rt->sched, p->serial);
    if (s) return s;
    vf_vk_plan_tier_poll(rt, p); /* a tuned kernel ready: the plan is recorded again */
    bool same = p->valid;
    for (int i = 0; same && i < n_binds; i++) {
        bind_key k = key_of(&binds[i]);
        same = k.block == p->recorded[i].block && k.at == p->recorded[i].at && k.size == p->recorded[i].size;
    }
    if (!same) s = record(rt, p, binds);
    uint64_t serial = 0;
    if (!s) s = vf_vk_sched_submit_with(&rt->sched, p->cmd, &serial);
    if (s) return s;
    p->serial = serial;
    mark_used(p, binds, serial);
    rt->sched.hz.dispatches += p->n_steps;
    rt->sched.hz.barriers += p->barriers;
    rt->execs += p->n_kernels;
    return rt->err->status;
}
