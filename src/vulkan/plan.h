/* Recorded plans: the Vulkan side of the backend's plan_* entry points
 * (backend.h). A plan is the kernels of a traced function's graph at one
 * set of input sizes, compiled once, with a plan-owned arena for the
 * intermediates, persistent descriptor sets and one command buffer. */
#ifndef VF_VULKAN_PLAN_H
#define VF_VULKAN_PLAN_H

#include "vulkan/runtime.h"

vf_status vf_vk_plan_create(vf_vk_runtime *rt, const vf_plan_desc *d, vf_plan **out);
vf_status vf_vk_plan_run(vf_vk_runtime *rt, vf_plan *p, const vf_plan_bind *binds, int n_binds);
void vf_vk_plan_destroy(vf_vk_runtime *rt, vf_plan *p);
void vf_vk_plan_info(const vf_plan *p, vf_plan_info *out);
/* The profile of p's last run, after waiting for that run (n_kernels 0: p has not run). */
vf_status vf_vk_plan_profile(vf_vk_runtime *rt, vf_plan *p, vf_plan_prof *out);

#endif
