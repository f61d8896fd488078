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

/* Image, sampler and buffer-view entry points (exec_image.c loads them
   with vkGetDeviceProcAddr: the runtime's device table has no images). */
#define AM_IMG_DEVICE_FUNCS(X)                                                                     \
    X(vkCreateImage) X(vkDestroyImage) X(vkGetImageMemoryRequirements) X(vkBindImageMemory)        \
    X(vkCreateImageView) X(vkDestroyImageView) X(vkCreateSampler) X(vkDestroySampler)              \
    X(vkCreateBufferView) X(vkDestroyBufferView) X(vkCmdCopyBufferToImage) X(vkCmdCopyImageToBuffer)

typedef struct am_img_table {
    AM_IMG_DEVICE_FUNCS(VF_VK_DECLARE)
    PFN_vkGetPhysicalDeviceFormatProperties vkGetPhysicalDeviceFormatProperties;
    PFN_vkGetPhysicalDeviceImageFormatProperties vkGetPhysicalDeviceImageFormatProperties;
} am_img_table;

/* One image made for a RUN from a buffer's data (as Amber makes its
   transfer images per run), or one texel buffer view. */
typedef struct am_run_image {
    int buf;
    VkImage image;
    VkDeviceMemory memory;
    VkImageView view;
    VkImageUsageFlags usage;
    uint32_t base_mip;           /* the first binding's BASE_MIP_LEVEL: the view's base */
    bool read_back;              /* bound as a storage image */
} am_run_image;

typedef struct am_run_res {
    am_run_image img[AM_MAX_BINDINGS * AM_MAX_ARRAY];
    int n_img;
    VkBufferView view[AM_MAX_BINDINGS][AM_MAX_ARRAY];   /* texel buffers, by sorted binding */
    VkDescriptorImageInfo ii[AM_MAX_BINDINGS][AM_MAX_ARRAY];
} am_run_res;

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
    am_img_table img;
    bool img_loaded;
    VkSampler sampler[AM_MAX_SAMPLERS];
    am_run_res run;              /* the current RUN's images and views */
} am_exec;

/* ---- images, samplers, texel buffers (exec_image.c) ---- */

/* Checks every image / texel-buffer binding of s against the device's
   format support (SKIP naming the format and use), makes the samplers. */
am_status am_img_setup(am_exec *x, const am_script *s, am_result *res);
/* For a RUN of pipeline pl (bindings in `order`): makes its images and
   texel views and fills x->run.ii / x->run.view for the descriptor writes. */
am_status am_img_prepare(am_exec *x, const am_script *s, const am_pipeline *pl, const int *order, am_pos pos,
                         am_result *res);
/* Records the uploads and the layout transitions to GENERAL (before the
   dispatch), and the read-back of storage images (after it). */
void am_img_record_upload(am_exec *x, const am_script *s);
void am_img_record_readback(am_exec *x, const am_script *s);
/* After the fence: sizes the read-back buffers as Amber does, destroys
   the RUN's images and views. */
void am_img_finish(am_exec *x, const am_script *s);
void am_img_destroy(am_exec *x);

/* In the parent, before forking the workers: creates and destroys a
   Vulkan instance (with the validation layer when o asks for it) and keeps
   every shared object it loaded (loader, drivers, LLVM, layer) loaded, so
   a worker's instance does not dlopen and relocate them again: that was
   most of a small test's cost. False when it could not, or when it left a
   thread behind (its drivers' libraries stay loaded all the same). */
bool am_exec_preload(const am_exec_opts *o);
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
