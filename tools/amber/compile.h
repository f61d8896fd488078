/* Shader source to SPIR-V (compile.c). */
#ifndef VF_AMBER_COMPILE_H
#define VF_AMBER_COMPILE_H

#include "am.h"

typedef struct am_spirv {
    uint32_t *words;             /* malloc'd */
    size_t n_words;
} am_spirv;

/* dev_vk_minor: the device's Vulkan 1.x, the default target. On failure
   msg holds the compiler's or assembler's message. */
bool am_compile(const am_shader *sh, uint32_t dev_vk_minor, am_spirv *out, char *msg, size_t msg_len);
/* The Vulkan 1.x a shader targets (a device older than that cannot run it). */
uint32_t am_compile_vk_minor(uint32_t target_env, uint32_t dev_vk_minor);

#endif
