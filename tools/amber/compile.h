/* Shader source to SPIR-V (compile.c). */
#ifndef VF_AMBER_COMPILE_H
#define VF_AMBER_COMPILE_H

#include "am.h"

typedef struct am_spirv {
    uint32_t *words;             /* malloc'd */
    size_t n_words;
} am_spirv;

/* Compiles, assembles or decodes a shader for target environment env
   (AM_ENV_*; the shader's TARGET_ENV or am_default_env) and runs the
   SPIR-V validator for that target over the result. On failure msg holds
   the compiler's, assembler's or validator's message. */
bool am_compile(const am_shader *sh, uint32_t env, am_spirv *out, char *msg, size_t msg_len);
/* Amber's default target for a script without TARGET_ENV: spv1.0, or
   spv1.4 when the script needs VK_KHR_spirv_1_4. */
uint32_t am_default_env(const am_script *s);
/* The lowest Vulkan 1.x that runs modules for env. */
uint32_t am_env_min_vk_minor(uint32_t env, bool has_spirv_1_4_ext);
/* Builds glslang's built-in tables in this process (call before forking
   the per-file children, which then inherit them). */
void am_compile_warm(void);
/* "spv1.3", "vulkan1.1spv1.4", ... */
void am_env_name(uint32_t env, char *buf, size_t len);

#endif
