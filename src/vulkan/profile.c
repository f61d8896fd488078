/* Profiling of recorded plans (profile.h). */
#include "vulkan/profile.h"
#include "util/fault.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vf_status vf_vk_prof_kernel(vf_vk_runtime *rt, vf_vk_prof *pr, const char *name, int first_exec, int n_execs,
                            vf_op op, const int *nodes, int n_nodes, int *index)
{
    if (!vf_grow((void **)&pr->k, &pr->cap_k, pr->n_k + 1, sizeof *pr->k))
        return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    vf_plan_kernel_prof *k = &pr->k[pr->n_k];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name ? name : "kernel");
    k->first_exec = first_exec;
    k->n_execs = n_execs;
    k->op = op;
    k->pred = -1;
    if (nodes && n_nodes > 0) {
        int *copy = vf_malloc((size_t)n_nodes * sizeof *copy);
        if (!copy) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
        memcpy(copy, nodes, (size_t)n_nodes * sizeof *copy);
        k->nodes = copy;
        k->n_nodes = n_nodes;
    }
    *index = pr->n_k++;
    return VF_OK;
}

vf_status vf_vk_prof_finish(vf_vk_runtime *rt, vf_vk_prof *pr, int n_steps)
{
    pr->n_steps = n_steps;
    pr->step_kernel = vf_calloc((size_t)n_steps + 1, sizeof *pr->step_kernel);
    if (!pr->step_kernel) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    /* The scheduler profiles only when the queue family has timestamps
       (timestampValidBits > 0 and timestampComputeAndGraphics). */
    if (!rt->sched.profile || n_steps == 0) return VF_OK;
    pr->ticks = vf_calloc(2 * (size_t)n_steps, sizeof *pr->ticks);
    if (!pr->ticks) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    VkQueryPoolCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = 2 * (uint32_t)n_steps,
    };
    return vf_vk_check(rt->err, VF_VKD(&rt->dev, vkCreateQueryPool, rt->dev.device, &qci, NULL, &pr->pool),
                       "vkCreateQueryPool");
}

void vf_vk_prof_reset(vf_vk_runtime *rt, const vf_vk_prof *pr, VkCommandBuffer cmd)
{
    if (pr->pool) rt->dev.vkd.vkCmdResetQueryPool(cmd, pr->pool, 0, 2 * (uint32_t)pr->n_steps);
}

void vf_vk_prof_stamp(vf_vk_runtime *rt, const vf_vk_prof *pr, VkCommandBuffer cmd, uint32_t q)
{
    /* COMPUTE_SHADER for both ends: a dispatch's start is written once the
       work before it is done, so the times of a plan's dispatches never
       overlap and add up to at most the run. */
    if (pr->pool) rt->dev.vkd.vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, pr->pool, q);
}

vf_status vf_vk_prof_collect(vf_vk_runtime *rt, vf_vk_prof *pr, int barriers, vf_plan_prof *out)
{
    memset(out, 0, sizeof *out);
    out->barriers = barriers;
    for (int i = 0; i < pr->n_k; i++) {
        out->dispatches += pr->k[i].dispatches;
        pr->k[i].gpu_ns = pr->k[i].start_ns = 0;
    }
    out->kernels = pr->k;
    out->n_kernels = pr->n_k;
    if (!pr->pool) return VF_OK;
    uint32_t n = 2 * (uint32_t)pr->n_steps;
    VkResult r = VF_VKD(&rt->dev, vkGetQueryPoolResults, rt->dev.device, pr->pool, 0, n, n * sizeof *pr->ticks, pr->ticks,
                                                   sizeof *pr->ticks, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    vf_status s = vf_vk_check(rt->err, r, "vkGetQueryPoolResults");
    if (s) return s;
    uint32_t bits = rt->dev.timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : ((1ull << bits) - 1);
    double period = rt->dev.timestamp_period;
    /* Steps are recorded level by level (plan.c), not in step order: the
       run starts at the earliest stamp. */
    uint64_t first = pr->ticks[0] & mask;
    for (int i = 1; i < pr->n_steps; i++)
        if (((first - (pr->ticks[2 * i] & mask)) & mask) < (mask >> 1) && (pr->ticks[2 * i] & mask) != first)
            first = pr->ticks[2 * i] & mask;
    bool *seen = vf_calloc((size_t)pr->n_k + 1, sizeof *seen);
    if (!seen) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    for (int i = 0; i < pr->n_steps; i++) {
        vf_plan_kernel_prof *k = &pr->k[pr->step_kernel[i]];
        uint64_t a = pr->ticks[2 * i] & mask, b = pr->ticks[2 * i + 1] & mask;
        uint64_t ns = (uint64_t)((double)((b - a) & mask) * period);
        k->gpu_ns += ns;
        out->gpu_ns += ns;
        if (!seen[pr->step_kernel[i]]) {
            seen[pr->step_kernel[i]] = true;
            k->start_ns = (uint64_t)((double)((a - first) & mask) * period);
        }
    }
    free(seen);
    out->t0_ns = (uint64_t)((double)first * period);
    out->timed = true;
    return VF_OK;
}

void vf_vk_prof_free(vf_vk_runtime *rt, vf_vk_prof *pr)
{
    if (pr->pool) rt->dev.vkd.vkDestroyQueryPool(rt->dev.device, pr->pool, NULL);
    for (int i = 0; i < pr->n_k; i++) free((void *)pr->k[i].nodes);
    free(pr->k);
    free(pr->step_kernel);
    free(pr->ticks);
    memset(pr, 0, sizeof *pr);
}
