/* Profiling of recorded plans: the kernels of a plan with what they
 * touch, a timestamp query pool with two queries per dispatch (written
 * around it when the runtime profiles), and reading them back after a run.
 *
 *   vf_vk_prof_kernel(rt, &pr, ...)       per kernel, while the plan is built
 *   vf_vk_prof_finish(rt, &pr, n_steps)   step_kernel[] filled; the query pool
 *   vf_vk_prof_reset / _stamp             while recording
 *   vf_vk_prof_collect(rt, &pr)           after the run finished: GPU times
 */
#ifndef VF_VULKAN_PROFILE_H
#define VF_VULKAN_PROFILE_H

#include "vulkan/runtime.h"

typedef struct vf_vk_prof {
    vf_plan_kernel_prof *k;
    int n_k, cap_k;
    int *step_kernel;            /* per step of the plan: its kernel */
    int n_steps;
    VkQueryPool pool;            /* 2 per step; VK_NULL_HANDLE: not timed */
    uint64_t *ticks;
} vf_vk_prof;

/* Adds a kernel record; *index receives its index. nodes (n_nodes) is copied. */
vf_status vf_vk_prof_kernel(vf_vk_runtime *rt, vf_vk_prof *pr, const char *name, int first_exec, int n_execs,
                            vf_op op, const int *nodes, int n_nodes, int *index);
/* Allocates step_kernel for n_steps and, when rt profiles with
   timestamps, the query pool. */
vf_status vf_vk_prof_finish(vf_vk_runtime *rt, vf_vk_prof *pr, int n_steps);
/* Recording: reset every query (at the start of the command buffer) and
   write query q after all earlier commands completed the compute stage. */
void vf_vk_prof_reset(vf_vk_runtime *rt, const vf_vk_prof *pr, VkCommandBuffer cmd);
void vf_vk_prof_stamp(vf_vk_runtime *rt, const vf_vk_prof *pr, VkCommandBuffer cmd, uint32_t q);
/* Reads the timestamps of the last finished run into the kernels' gpu_ns
   and start_ns; fills out. The run must have finished. */
vf_status vf_vk_prof_collect(vf_vk_runtime *rt, vf_vk_prof *pr, int barriers, vf_plan_prof *out);
void vf_vk_prof_free(vf_vk_runtime *rt, vf_vk_prof *pr);

#endif
