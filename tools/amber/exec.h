/* Running a parsed test on a Vulkan device (exec_device.c, exec.c). */
#ifndef VF_AMBER_EXEC_H
#define VF_AMBER_EXEC_H

#include "am.h"
#include "vulkan/device.h"
#include "vulkan/memory.h"

typedef struct am_exec_opts {
    int device_index;            /* -1: device_env, else the best */
    const char *device_env;      /* a name substring or index (VKFUSE_DEVICE); NULL: none */
    bool validation;
    uint32_t timeout_ms;         /* per fence wait */
    bool verbose;                /* buffer dumps on failure */
    const char *dir;             /* the test's directory, for SHADER FILE */
} am_exec_opts;

typedef struct am_exec {
    vf_vk_device dev;            /* instance from vf_vk_device_create, our own VkDevice */
    vf_err err;
    bool have_dev;
    bool hung;                   /* a fence timed out: the device cannot be torn down */
    VkPhysicalDeviceSubgroupSizeControlProperties sg_props;
    bool sg_props_valid;
    vf_vk_raw buf[AM_MAX_BUFFERS];
    VkCommandPool pool;
    VkCommandBuffer cb;
    VkFence fence;
    VkPipeline pipe[AM_MAX_PIPELINES];
    VkPipelineLayout layout[AM_MAX_PIPELINES];
    VkDescriptorSetLayout set_layout[AM_MAX_PIPELINES][AM_MAX_SET + 1];
    uint32_t n_sets[AM_MAX_PIPELINES];
    VkShaderModule module[AM_MAX_SHADERS];
    VkShaderModule opt_module[AM_MAX_PIPELINES]; /* a pipeline's SHADER_OPTIMIZATION result */
} am_exec;

/* Creates the device for s, or says why it cannot: SKIP naming the
   missing feature / extension / version, ERROR when there is no device. */
am_status am_exec_device(am_exec *x, const am_script *s, const am_exec_opts *o, am_result *res);
/* Runs every command of s on x's device. */
am_status am_exec_run(am_exec *x, am_script *s, const am_exec_opts *o, am_result *res);
/* Destroys what x holds (nothing when x->hung: the process is exiting). */
void am_exec_destroy(am_exec *x);

/* Parse, load shader files, create the device, run: one file's verdict. */
void am_run_file(const char *path, const am_exec_opts *o, am_result *res);

#endif
