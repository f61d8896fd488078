/* The Vulkan runtime's internal API, for code inside vkfuse that needs
 * more than the backend iface (tests, the AmberScript runner, benches):
 * raw buffers, SPIR-V or GLSL pipelines with any descriptor types,
 * specialisation and push constants, dispatches, profiles.
 *
 *   vf_backend_t be;
 *   vf_vk_backend_create_ex(&err, &opt, &xopt, &be, name, sizeof name);
 *   vf_vk_runtime *rt = vf_vk_runtime_of(&be);
 *   const vf_vk_spirv *spv;   vf_vk_shader_get(&rt->shaders, glsl, "k", &spv);
 *   const vf_vk_pipeline *p;  vf_vk_pipeline_get(&rt->pipes, &(vf_vk_pipeline_desc){
 *                                 .spirv = spv->words, .spirv_words = spv->n_words,
 *                                 .spirv_key = spv->key, .n_bindings = 2, .push_size = 4}, &p);
 *   vf_buffer *a; be.iface->alloc(be.self, bytes, &a);   (or vf_vk_mem_alloc(&rt->mem, ...))
 *   vf_vk_sched_dispatch(&rt->sched, &(vf_vk_dispatch_info){ .pipe = p, .n_bindings = 2,
 *                                 .bindings = binds, .push = &n, .push_size = 4,
 *                                 .groups = {g, 1, 1}});
 *   be.iface->download(be.self, a, 0, host, bytes);  (waits)
 *   be.iface->destroy(be.self);
 *
 * All of it hangs off one vf_vk_runtime; nothing is global (the test
 * hooks too: rt->dev.test, device.h). Not thread-safe: one runtime per
 * thread (as one vf_context per thread). */
#ifndef VF_VULKAN_RUNTIME_H
#define VF_VULKAN_RUNTIME_H

#include "backend.h"
#include "vulkan/codegen/kernel.h"
#include "vulkan/device.h"
#include "vulkan/eager_fuse.h"
#include "vulkan/kernel_memo.h"
#include "vulkan/memory.h"
#include "vulkan/pipeline.h"
#include "vulkan/scheduler.h"
#include "vulkan/shader_cache.h"

/* Knobs beyond vf_vk_options, mostly for tests. All-zero: defaults. */
typedef struct vf_vk_extra_options {
    VkDeviceSize block_size;       /* memory block size (0: 64 MiB) */
    int64_t cache_cap;             /* != 0: vf_vk_mem_options.cache_cap, over VKFUSE_MEMORY_CACHE */
    uint32_t batch_dispatches;     /* dispatches per submit (0: 64) */
    bool force_staging;            /* copy through staging buffers even if memory is mappable */
    bool no_push_descriptors;      /* descriptor pools even with VK_KHR_push_descriptor */
} vf_vk_extra_options;

typedef struct vf_vk_runtime {
    vf_err *err;
    vf_vk_device dev;
    vf_vk_mem mem;
    vf_vk_shaders shaders;
    vf_vk_pipelines pipes;
    vf_vk_sched sched;
    vf_vk_memo memo;               /* eager execs' kernels (kernel_memo.h) */
    vf_eager_fuse ef;              /* queued eager elementwise ops and their fused kernels (eager_fuse.h) */
    int64_t execs;
    bool tiered;                   /* plans start their matmuls in the quick tier (plan_tier.c) */
    bool driver_cache_off;         /* Mesa's disk cache is off: no warm-up on a second device (tier_warm.h) */
    int64_t tier_kernels, tier_swaps;
    int64_t tier_made_ahead;       /* tuned pipelines made on a tier thread and adopted (plan_tier.c) */
    int64_t tier_warmed;           /* ... of them dispatched once on its second device first */
} vf_vk_runtime;

vf_status vf_vk_backend_create_ex(vf_err *err, const vf_vk_options *opt,
                                  const vf_vk_extra_options *xopt, vf_backend_t *out,
                                  char *device_name, size_t device_name_len);

/* The runtime behind a backend made by vf_vulkan_backend_create(_ex);
   NULL for any other backend. */
vf_vk_runtime *vf_vk_runtime_of(const vf_backend_t *be);

/* GLSL -> cached SPIR-V -> cached pipeline with n storage-buffer bindings. */
vf_status vf_vk_runtime_glsl_pipeline(vf_vk_runtime *rt, const char *glsl, const char *name,
                                      int n_bindings, uint32_t push_size,
                                      const vf_vk_pipeline **out);
/* The same with n_spec specialisation constants: value spec[i] for
   constant_id i (4 bytes each). The SPIR-V is cached by its GLSL alone,
   the pipeline by GLSL and values. */
vf_status vf_vk_runtime_glsl_pipeline_spec(vf_vk_runtime *rt, const char *glsl, const char *name,
                                           int n_bindings, uint32_t push_size, uint32_t n_spec,
                                           const uint32_t *spec, const vf_vk_pipeline **out);
/* The pipeline of a generated dispatch (vulkan/codegen/kernel.h): its GLSL, its
   bindings and push size, its specialisation constants (spec[0], the
   workgroup size, checked against the device's limits first). */
vf_status vf_vk_runtime_dispatch_pipeline(vf_vk_runtime *rt, const vf_dispatch *d, const vf_vk_pipeline **out);
/* The same for a GLSL dispatch whose pipeline another thread made
   (vkCreateComputePipelines on rt's device with made_layout, the layout
   the pipeline gets here; a plan's tier thread): kept as if made here.
   Takes over `made` (destroyed if not kept). */
vf_status vf_vk_runtime_dispatch_adopt(vf_vk_runtime *rt, const vf_dispatch *d, VkPipeline made,
                                       VkPipelineLayout made_layout, const vf_vk_pipeline **out);

/* The backend's exec (one vf_exec, queued) and one user-kernel call
   (user_kernel.c), for code of the runtime that builds on them. */
vf_status vf_vk_exec(void *self, const vf_exec *e);
/* For eager_fuse.c: e's own kernel generated and memoised (1: it is, one
   step without scratch; 0: e is not memoised or has more; -1: it failed,
   the reason in rt->err), and e recorded now, without the window. */
int vf_vk_exec_prepare(vf_vk_runtime *rt, const vf_exec *e);
vf_status vf_vk_exec_now(vf_vk_runtime *rt, const vf_exec *e);
vf_status vf_vk_ukernel_run(vf_vk_runtime *rt, const vf_ukernel_exec *e);

/* Per-dispatch GPU times recorded since the last clear (opt.profile);
   collected when batches complete, so sync first. */
const vf_vk_timing *vf_vk_runtime_timings(vf_vk_runtime *rt, size_t *n);
void vf_vk_runtime_timings_clear(vf_vk_runtime *rt);

#endif
