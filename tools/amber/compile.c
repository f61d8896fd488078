/* Shader source -> SPIR-V words: GLSL through libshaderc, assembly through
 * the SPIRV-Tools C API, hex words decoded here.
 *
 * libshaderc is called directly rather than through the runtime's shader
 * cache because TARGET_ENV picks the target environment and SPIR-V
 * version per shader, which the cache keys do not carry. */
#include "compile.h"
#include "util/fault.h"

#include <shaderc/shaderc.h>
#include <spirv-tools/libspirv.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The name Amber and SPIRV-Tools give a target ("spv1.3", "vulkan1.1spv1.4"). */
void am_env_name(uint32_t env, char *buf, size_t len)
{
    if (env & AM_ENV_VULKAN)
        snprintf(buf, len, "vulkan1.%u%s", env & 0xf, (env & 0x1000) ? "spv1.4" : "");
    else
        snprintf(buf, len, "spv1.%u", env & 0xf);
}

/* (vulkan minor, spir-v minor) glslang targets for an environment, as
   Amber maps them (its ParseSpvEnv): spvX.Y names the lowest Vulkan that
   accepts SPIR-V 1.Y without an extension (1.4 -> Vulkan 1.2, as Amber),
   vulkanX.Y that Vulkan's own SPIR-V version. */
static void env_for(uint32_t env, uint32_t *vk_minor, uint32_t *spv_minor)
{
    static const uint32_t spv_of_vk[] = {0, 3, 5, 6};
    static const uint32_t vk_of_spv[] = {0, 1, 1, 1, 2, 2, 3};
    if (env & AM_ENV_VULKAN) {
        *vk_minor = env & 0xf;
        *spv_minor = (env & 0x1000) ? 4 : spv_of_vk[*vk_minor];
    } else {
        *spv_minor = env & 0xf;
        *vk_minor = vk_of_spv[*spv_minor];
    }
}

uint32_t am_default_env(const am_script *s)
{
    for (int i = 0; i < s->n_dev_ext; i++)
        if (!strcmp(s->dev_ext[i], "VK_KHR_spirv_1_4")) return AM_ENV_SPV | 4;
    return AM_ENV_SPV | 0;
}

uint32_t am_env_min_vk_minor(uint32_t env, bool has_spirv_1_4_ext)
{
    uint32_t vk, spv;
    env_for(env, &vk, &spv);
    if (env & AM_ENV_VULKAN) return vk;
    /* SPIR-V 1.4 runs on Vulkan 1.1 with VK_KHR_spirv_1_4. */
    if (spv == 4 && has_spirv_1_4_ext) return 1;
    return vk;
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
        out->words = vf_malloc(n ? n : 4);
        if (!out->words) {
            ok = false;
            snprintf(msg, msg_len, "out of host memory (malloc failed)");
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

/* The SPIRV-Tools environment of a target: Amber hands the target's name
   to spvParseTargetEnv, so spvX.Y is the universal SPIR-V 1.Y environment
   (no Vulkan rules) and vulkanX.Y the Vulkan one. */
static spv_target_env tools_env(uint32_t env)
{
    char name[32];
    am_env_name(env, name, sizeof name);
    spv_target_env e = SPV_ENV_UNIVERSAL_1_0;
    if (!spvParseTargetEnv(name, &e)) e = SPV_ENV_UNIVERSAL_1_0; /* every name we parse is known */
    return e;
}

static bool assemble(const am_shader *sh, uint32_t env, am_spirv *out, char *msg, size_t msg_len)
{
    spv_context ctx = spvContextCreate(tools_env(env));
    if (!ctx) {
        snprintf(msg, msg_len, "cannot start the SPIR-V assembler");
        return false;
    }
    spv_binary bin = NULL;
    spv_diagnostic diag = NULL;
    spv_result_t r = spvTextToBinary(ctx, sh->source, strlen(sh->source), &bin, &diag);
    bool ok = r == SPV_SUCCESS && bin;
    if (ok) {
        out->words = vf_malloc(bin->wordCount * 4 + 4);
        if (out->words) {
            memcpy(out->words, bin->code, bin->wordCount * 4);
            out->n_words = bin->wordCount;
        } else {
            ok = false;
            snprintf(msg, msg_len, "out of host memory (malloc failed)");
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
    uint8_t *bytes = vf_malloc(cap);
    if (!bytes) {
        snprintf(msg, msg_len, "out of host memory (malloc failed)");
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

/* The validator's message spans lines (the offending instruction
   follows): one line for the verdict, "; " between the parts. */
static void one_line(char *m, size_t len)
{
    char *t = vf_malloc(len);
    if (!t) return;
    size_t o = 0;
    for (size_t i = 0; m[i] && o + 3 < len; i++) {
        if (m[i] != '\n') {
            t[o++] = m[i];
            continue;
        }
        while (o && t[o - 1] == ' ') o--;
        while (m[i + 1] == ' ' || m[i + 1] == '\n') i++;
        if (m[i + 1]) {
            t[o++] = ';';
            t[o++] = ' ';
        }
    }
    while (o && t[o - 1] == ' ') o--;
    t[o] = '\0';
    memcpy(m, t, o + 1);
    free(t);
}

/* Runs the SPIR-V validator for the target over a module, as Amber does
   before it creates a pipeline: a module the driver would reject (or
   worse, accept and miscompile) is an ERROR that says why. */
static bool validate(uint32_t env, const am_spirv *m, char *msg, size_t msg_len)
{
    spv_context ctx = spvContextCreate(tools_env(env));
    if (!ctx) {
        snprintf(msg, msg_len, "cannot start the SPIR-V validator");
        return false;
    }
    spv_const_binary_t bin = {.code = m->words, .wordCount = m->n_words};
    spv_diagnostic diag = NULL;
    spv_result_t r = spvValidate(ctx, &bin, &diag);
    if (r != SPV_SUCCESS) {
        char name[32];
        am_env_name(env, name, sizeof name);
        uint32_t ver = m->n_words > 1 ? m->words[1] : 0;
        snprintf(msg, msg_len, "invalid SPIR-V %u.%u module for target %s: %s", (ver >> 16) & 0xff, (ver >> 8) & 0xff,
                 name, diag && diag->error ? diag->error : "the validator failed");
        one_line(msg, msg_len);
    }
    spvDiagnosticDestroy(diag);
    spvContextDestroy(ctx);
    return r == SPV_SUCCESS;
}

bool am_compile(const am_shader *sh, uint32_t env, am_spirv *out, char *msg, size_t msg_len)
{
    memset(out, 0, sizeof *out);
    uint32_t vk, spv;
    env_for(env, &vk, &spv);
    bool ok = false;
    switch (sh->kind) {
    case AM_SRC_GLSL: ok = compile_glsl(sh, vk, spv, out, msg, msg_len); break;
    case AM_SRC_SPIRV_ASM: ok = assemble(sh, env, out, msg, msg_len); break;
    case AM_SRC_SPIRV_HEX: ok = decode_hex(sh, out, msg, msg_len); break;
    }
    if (ok && !validate(env, out, msg, msg_len)) {
        free(out->words);
        memset(out, 0, sizeof *out);
        ok = false;
    }
    return ok;
}

/* glslang builds its built-in symbol tables on the first compile for a
   GLSL version in a process (about 0.15 s of CPU), and every test file runs
   in a child forked from the runner. Compiling a trivial shader for the
   common versions once in the runner, before any fork, leaves those tables
   in the children's copy of memory. The compiler stays alive so glslang
   keeps them; nothing else (no Vulkan) is touched. */
void am_compile_warm(void)
{
    static shaderc_compiler_t keep;
    if (keep) return;
    keep = shaderc_compiler_initialize();
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    if (!keep || !o) {
        if (o) shaderc_compile_options_release(o);
        return;
    }
    static const char *src[] = {"#version 450\nlayout(local_size_x = 1) in;\nvoid main() {}\n",
                                "#version 460\nlayout(local_size_x = 1) in;\nvoid main() {}\n"};
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_0);
    for (size_t i = 0; i < sizeof src / sizeof *src; i++) {
        shaderc_compilation_result_t r =
            shaderc_compile_into_spv(keep, src[i], strlen(src[i]), shaderc_glsl_compute_shader, "warm", "main", o);
        if (r) shaderc_result_release(r);
    }
    shaderc_compile_options_release(o);
}
