/* GLSL -> SPIR-V with libshaderc, cached in memory and on disk.
 *
 * The key of a shader is a 64-bit hash of its GLSL and of everything that
 * changes the compiler's output (target environment, optimisation level,
 * the SPIR-V version shaderc emits). The memory cache is per backend (no
 * process-wide state); the disk cache is one file per key in cache_dir,
 * validated against the device on every load (vulkan/disk_cache.h).
 *
 * Seeing what runs: with VKFUSE_DUMP=<dir> the GLSL of every kernel this
 * process asks for is written once to <dir>/kernels/<name>.<key>.comp
 * (glslc compiles it as is); with VKFUSE_LOG=info every compile is logged
 * with its time, and compile_ns sums them for vf_context_stats. */
#ifndef VF_VULKAN_SHADER_CACHE_H
#define VF_VULKAN_SHADER_CACHE_H

#include "vulkan/device.h"
#include "util/hash.h"
#include "util/keyset.h"

#include <stddef.h>
#include <stdint.h>

typedef struct vf_vk_spirv {
    uint64_t key;
    uint32_t *words;
    size_t n_words;
} vf_vk_spirv;

/* One compile's result: SPIR-V words (malloc'ed) or a status and message. */
typedef struct vf_vk_compiled {
    uint64_t key;
    uint32_t *words;
    size_t n_words;
    int64_t ns;                  /* wall time in shaderc */
    vf_status status;
    bool ahead, taken;           /* compiled by vf_vk_shaders_prepare; taken by vf_vk_shader_get */
    char message[1024];
} vf_vk_compiled;

typedef struct vf_vk_shaders {
    const vf_vk_device *dev;
    vf_err *err;
    void *compiler;              /* shaderc_compiler_t, created on the first compile */
    uint32_t target_env_version; /* shaderc_env_version_vulkan_1_x */
    uint64_t options_key;        /* folded into every key */
    char dir[4096];              /* "" : no disk cache */
    vf_hmap map;                 /* key -> vf_vk_spirv* */
    int64_t compiles, memory_hits, disk_hits, disk_rejects, disk_write_failures;
    int64_t compile_ns;          /* wall time spent in shaderc */
    int64_t inserted;            /* entries added by vf_vk_shader_insert */
    vf_keyset *track;            /* set: every key vf_vk_shader_get returns is added */
    char dump_dir[4096];         /* VKFUSE_DUMP (set by the runtime's creator): GLSL under <dir>/kernels; "": none */
    bool log_info;               /* VKFUSE_LOG=info: every compile and its time on stderr */
    int compile_threads;         /* vf_vk_shaders_prepare's threads; <= 1: none (VKFUSE_COMPILE_THREADS) */
    vf_vk_compiled *ahead;       /* compiled by vf_vk_shaders_prepare, not yet asked for */
    int n_ahead;
} vf_vk_shaders;

/* cache_dir NULL or "": memory only. The directory is created; failing to
   create it is VF_ERROR_IO. */
vf_status vf_vk_shaders_init(vf_vk_shaders *c, const vf_vk_device *dev, const char *cache_dir,
                             vf_err *err);
void vf_vk_shaders_destroy(vf_vk_shaders *c);

/* SPIR-V for glsl; name is the kernel's name (shaderc's source name, so
   messages read "add_f32:3: error: ..."). A compile error is
   VF_ERROR_COMPILE with the kernel name and the compiler's message. The
   result stays owned by the cache. */
vf_status vf_vk_shader_get(vf_vk_shaders *c, const char *glsl, const char *name,
                           const vf_vk_spirv **out);

/* Counts a lookup of key that a memo in front of the cache answered
   (kernel_memo.h) as vf_vk_shader_get counts a memory hit: tracked, and
   one more memory hit. */
void vf_vk_shader_hit(vf_vk_shaders *c, uint64_t key);

/* The entry under key in the memory cache; NULL: none. */
const vf_vk_spirv *vf_vk_shader_find(const vf_vk_shaders *c, uint64_t key);
/* Adds a copy of words under key to the memory cache (saved functions
   bring the SPIR-V of their kernels), after validating it as a Vulkan 1.2
   compute module with SPIRV-Tools' validator: a module it rejects is
   VF_ERROR_FORMAT with its message, and never reaches the driver. A key
   already cached keeps its entry. */
vf_status vf_vk_shader_insert(vf_vk_shaders *c, uint64_t key, const uint32_t *words, size_t n_words);

/* SPIRV-Tools' validator on words as a Vulkan 1.2 module: VF_OK, or
   VF_ERROR_FORMAT with its message in msg. */
vf_status vf_vk_spirv_validate(const uint32_t *words, size_t n_words, char *msg, size_t msglen);

/* Compiles ahead, on up to compile_threads threads at once, the shaders
   among glsl[0..n) that neither the memory nor the disk cache holds
   (shader_prepare.c): a plan's kernels are independent, and shaderc's
   compiler may be used from several threads. Nothing is counted, logged,
   reported or cached here: the next vf_vk_shader_get of each one takes its
   result as if it compiled it then (so statistics, errors, the disk cache
   and VKFUSE_LOG read the same with or without threads). Only an out of
   host memory before compiling is an error. */
vf_status vf_vk_shaders_prepare(vf_vk_shaders *c, int n, const char *const *glsl, const char *const *names);
/* Whether key is on hand: in memory, on disk, or compiled ahead. */
bool vf_vk_shader_on_hand(const vf_vk_shaders *c, uint64_t key);
/* Hands one compile done elsewhere (eager_fuse.c's background thread,
   with vf_vk_shader_compile_raw) to the next vf_vk_shader_get of its key,
   as vf_vk_shaders_prepare's are; *r is moved (emptied). false: out of
   host memory (*r stays the caller's). */
bool vf_vk_shaders_add_ahead(vf_vk_shaders *c, vf_vk_compiled *r);
/* Frees what was compiled ahead and not asked for. */
void vf_vk_shaders_drop_ahead(vf_vk_shaders *c);

/* For shader_prepare.c: shaderc's compiler, created on first use, and one
   compile with it (thread-safe; fills out, returns out->status). */
vf_status vf_vk_shaders_compiler(vf_vk_shaders *c);
vf_status vf_vk_shader_compile_raw(void *compiler, uint32_t target_env_version, const char *glsl,
                                   const char *name, vf_vk_compiled *out);

/* The key vf_vk_shader_get would use, and the disk path for it. */
uint64_t vf_vk_shader_key(const vf_vk_shaders *c, const char *glsl);
bool vf_vk_shader_path(const vf_vk_shaders *c, uint64_t key, char *buf, size_t len);

#endif
