/* Shader source -> SPIR-V words: GLSL through libshaderc, assembly through
 * the SPIRV-Tools C API, hex words decoded here.
 *
 * libshaderc is called directly rather than through the runtime's shader
 * cache because TARGET_ENV picks the target environment and SPIR-V
 * version per shader, which the cache keys do not carry. */
#include "compile.h"

#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* (vulkan minor, spir-v minor) for a TARGET_ENV, given the device's
   Vulkan minor for the default. */
static void env_for(uint32_t target_env, uint32_t dev_minor, uint32_t *vk_minor, uint32_t *spv_minor)
{
    static const uint32_t spv_of_vk[] = {0, 3, 5, 6};
    if (dev_minor > 3) dev_minor = 3;
    if (target_env == 0) {
        /* Default: the device's Vulkan, at most 1.2. glslang's SPIR-V 1.6
           output for Vulkan 1.3 uses LocalSizeId, which needs the
           maintenance4 feature a test would have to ask for. */
        if (dev_minor > 2) dev_minor = 2;
        *vk_minor = dev_minor;
        *spv_minor = spv_of_vk[dev_minor];
    } else if (target_env & AM_ENV_VULKAN) {
        *vk_minor = target_env & 0xf;
        *spv_minor = (target_env & 0x1000) ? 4 : spv_of_vk[*vk_minor];
    } else {
        *spv_minor = target_env & 0xf;
        *vk_minor = *spv_minor <= 0 ? 0 : *spv_minor <= 4 ? 1 : *spv_minor == 5 ? 2 : 3;
    }
}

static bool compile_glsl(const am_shader *sh, uint32_t vk_minor, uint32_t spv_minor, am_spirv *out,
                         char *msg, size_t msg_len)
{
    shaderc_compiler_t c = shaderc_compiler_initialize();
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    if (!c || !o) {
        if (c) shaderc_compiler_release(c);
        if (o) shaderc_compile_options_release(o);
        snprintf(msg, msg_len, "cannot start the GLSL compiler");
        return false;
    }
    static const uint32_t envs[] = {shaderc_env_version_vulkan_1_0, shaderc_env_version_vulkan_1_1,
                                    shaderc_env_version_vulkan_1_2, shaderc_env_version_vulkan_1_3};
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, envs[vk_minor]);
    shaderc_compile_options_set_target_spirv(o, (shaderc_spirv_version)(0x010000u | (spv_minor << 8)));
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(c, sh->source, strlen(sh->source), shaderc_glsl_compute_shader, sh->name,
                                 "main", o);
    bool ok = r && shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    if (ok) {
        size_t n = shaderc_result_get_length(r);
        out->words = malloc(n ? n : 4);
        if (!out->words) {
            ok = false;
            snprintf(msg, msg_len, "out of memory");
        } else {
            memcpy(out->words, shaderc_result_get_bytes(r), n);
            out->n_words = n / 4;
        }
    } else {
        snprintf(msg, msg_len, "%s", r ? shaderc_result_get_error_message(r) : "the compiler failed");
        size_t l = strlen(msg);
        while (l && (msg[l - 1] == '\n' || msg[l - 1] == ' ')) msg[--l] = '\0';
    }
    if (r) shaderc_result_release(r);
    shaderc_compile_options_release(o);
    shaderc_compiler_release(c);
    return ok;
}

static bool assemble(const am_shader *sh, uint32_t vk_minor, uint32_t spv_minor, am_spirv *out, char *msg,
                     size_t msg_len)
{
    spv_target_env env = vk_minor == 0   ? SPV_ENV_VULKAN_1_0
                         : vk_minor == 1 ? (spv_minor == 4 ? SPV_ENV_VULKAN_1_1_SPIRV_1_4 : SPV_ENV_VULKAN_1_1)
                         : vk_minor == 2 ? SPV_ENV_VULKAN_1_2
                                         : SPV_ENV_VULKAN_1_3;
    spv_context ctx = spvContextCreate(env);
    if (!ctx) {
        snprintf(msg, msg_len, "cannot start the SPIR-V assembler");
        return false;
    }
    spv_binary bin = NULL;
    spv_diagnostic diag = NULL;
    spv_result_t r = spvTextToBinary(ctx, sh->source, strlen(sh->source), &bin, &diag);
    bool ok = r == SPV_SUCCESS && bin;
    if (ok) {
        out->words = malloc(bin->wordCount * 4 + 4);
        if (out->words) {
            memcpy(out->words, bin->code, bin->wordCount * 4);
            out->n_words = bin->wordCount;
        } else {
            ok = false;
            snprintf(msg, msg_len, "out of memory");
        }
    } else if (diag) {
        /* Positions are within the shader text; the caller adds its start. */
        snprintf(msg, msg_len, "%zu:%zu: %s", diag->position.line + 1, diag->position.column + 1, diag->error);
    } else {
        snprintf(msg, msg_len, "SPIR-V assembly failed (%d)", (int)r);
    }
    spvDiagnosticDestroy(diag);
    spvBinaryDestroy(bin);
    spvContextDestroy(ctx);
    return ok;
}

/* Whitespace-separated hex bytes (optionally 0x-prefixed), little-endian
   words, as Amber's SPIRV-HEX. */
static bool decode_hex(const am_shader *sh, am_spirv *out, char *msg, size_t msg_len)
{
    size_t cap = strlen(sh->source) / 2 + 4, n = 0;
    uint8_t *bytes = malloc(cap);
    if (!bytes) {
        snprintf(msg, msg_len, "out of memory");
        return false;
    }
    const char *p = sh->source;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) p += 2;
        char *end;
        unsigned long v = strtoul(p, &end, 16);
        if (end == p || v > 0xff || (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
            snprintf(msg, msg_len, "SPIRV-HEX: bad byte near '%.8s'", p);
            free(bytes);
            return false;
        }
        if (n < cap) bytes[n++] = (uint8_t)v;
        p = end;
    }
    if (n % 4 || n < 20) {
        snprintf(msg, msg_len, "SPIRV-HEX: %zu bytes is not a SPIR-V module", n);
        free(bytes);
        return false;
    }
    out->words = (uint32_t *)bytes; /* malloc'd memory is aligned for uint32_t */
    out->n_words = n / 4;
    for (size_t i = 0; i < n / 4; i++)
        out->words[i] = (uint32_t)bytes[4 * i] | (uint32_t)bytes[4 * i + 1] << 8 |
                        (uint32_t)bytes[4 * i + 2] << 16 | (uint32_t)bytes[4 * i + 3] << 24;
    return true;
}

bool am_compile(const am_shader *sh, uint32_t dev_vk_minor, am_spirv *out, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    uint32_t vk, spv;
    env_for(sh->target_env, dev_vk_minor, &vk, &spv);
    switch (sh->kind) {
    case AM_SRC_GLSL: return compile_glsl(sh, vk, spv, out, msg, msg_len);
    case AM_SRC_SPIRV_ASM: return assemble(sh, vk, spv, out, msg, msg_len);
    case AM_SRC_SPIRV_HEX: return decode_hex(sh, out, msg, msg_len);
    }
    return false;
}

uint32_t am_compile_vk_minor(uint32_t target_env, uint32_t dev_vk_minor)
{
    uint32_t vk, spv;
    env_for(target_env, dev_vk_minor, &vk, &spv);
    return vk;
}
