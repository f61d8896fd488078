#include "vulkan/shader_cache.h"
#include "util/fault.h"
#include "util/clock.h"
#include "vulkan/disk_cache.h"

#include <shaderc/shaderc.h>
/* libspirv.h defines (in C: with external linkage) kDefaultMaxIdBound, so
   a second includer (tools/amber/compile.c) clashes at link time: here it
   goes by another name. */
#define kDefaultMaxIdBound vf_spirv_tools_max_id_bound
#include <spirv-tools/libspirv.h>
#undef kDefaultMaxIdBound
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define VF_SPIRV_MAGIC 0x07230203u

vf_status vf_vk_shaders_init(vf_vk_shaders *c, const vf_vk_device *dev, const char *cache_dir,
                             vf_err *err)
{
    memset(c, 0, sizeof *c);
    c->dev = dev;
    c->err = err;
    /* Vulkan 1.3 devices take SPIR-V 1.6 but gain nothing from it for our
       kernels; 1.2 keeps one key (and one disk entry) for both. */
    c->target_env_version = shaderc_env_version_vulkan_1_2;
    unsigned int spv_version = 0, spv_rev = 0;
    shaderc_get_spv_version(&spv_version, &spv_rev);
    char opts[128];
    int n = snprintf(opts, sizeof opts, "vkfuse-spirv|env=%u|opt=performance|spv=%u.%u|glsl450",
                     c->target_env_version, spv_version, spv_rev);
    c->options_key = vf_hash64(opts, (size_t)n, 0);
    if (cache_dir && *cache_dir) {
        /* A cache is an optimisation: an unusable directory turns the disk
           cache off (with a note) rather than the GPU. */
        vf_err local = {0};
        if (vf_disk_mkdirs(cache_dir, &local) != VF_OK ||
            snprintf(c->dir, sizeof c->dir, "%s", cache_dir) >= (int)sizeof c->dir) {
            fprintf(stderr, "vkfuse: disk cache off: %s\n",
                    local.status ? local.message : "cache dir path too long");
            c->dir[0] = '\0';
        }
    }
    return VF_OK;
}

void vf_vk_shaders_destroy(vf_vk_shaders *c)
{
    for (size_t i = 0; i < c->map.cap; i++)
        if (c->map.keys[i]) {
            vf_vk_spirv *s = c->map.vals[i];
            free(s->words);
            free(s);
        }
    vf_hmap_free(&c->map);
    vf_vk_shaders_drop_ahead(c);
    if (c->compiler) shaderc_compiler_release(c->compiler);
    c->compiler = NULL;
}

uint64_t vf_vk_shader_key(const vf_vk_shaders *c, const char *glsl)
{
    return vf_hash64(glsl, strlen(glsl), c->options_key);
}

bool vf_vk_shader_path(const vf_vk_shaders *c, uint64_t key, char *buf, size_t len)
{
    if (!c->dir[0]) return false;
    return snprintf(buf, len, "%s/%016llx.spv", c->dir, (unsigned long long)key) < (int)len;
}

static vf_status remember(vf_vk_shaders *c, uint64_t key, uint32_t *words, size_t n_words,
                          const vf_vk_spirv **out)
{
    vf_vk_spirv *s = vf_malloc(sizeof *s);
    if (!s || !vf_hmap_put(&c->map, key, s)) {
        free(s);
        free(words);
        return vf_err_set(c->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed) (shader cache)");
    }
    *s = (vf_vk_spirv){key, words, n_words};
    *out = s;
    return VF_OK;
}


/* VKFUSE_DUMP: the kernel's GLSL, once per key and process (a failure to
   write is a warning: dumps are for people, not for the run). */
static void dump_glsl(const vf_vk_shaders *c, const char *glsl, const char *name, uint64_t key)
{
    const char *dir = c->dump_dir;
    if (!*dir) return;
    char sub[4200], path[4400];
    vf_err err = {0};
    if (snprintf(sub, sizeof sub, "%s/kernels", dir) >= (int)sizeof sub || vf_disk_mkdirs(sub, &err) != VF_OK) {
        fprintf(stderr, "vkfuse: warning: VKFUSE_DUMP=%s: cannot create %s/kernels\n", dir, dir);
        return;
    }
    char safe[128];
    size_t n = 0;
    for (const char *p = name; *p && n + 1 < sizeof safe; p++) /* names are identifiers; keep paths plain */
        safe[n++] = (*p == '/' || *p == ' ') ? '_' : *p;
    safe[n] = '\0';
    snprintf(path, sizeof path, "%s/%s.%016llx.comp", sub, safe, (unsigned long long)key);
    FILE *f = fopen(path, "wb");
    bool ok = f && fputs(glsl, f) >= 0;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fprintf(stderr, "vkfuse: warning: VKFUSE_DUMP: could not write %s\n", path);
}

vf_status vf_vk_shader_compile_raw(void *compiler, uint32_t target_env_version, const char *glsl,
                                   const char *name, vf_vk_compiled *out)
{
    memset(out, 0, sizeof *out);
    vf_fault_kind fault = vf_fault_armed() ? vf_fault_hit(VF_FAULT_shaderc) : VF_FAULT_KIND_NONE;
    if (fault) { /* injected (fault.h): as shaderc would fail */
        bool oom = fault == VF_FAULT_OOM_HOST;
        snprintf(out->message, sizeof out->message, "kernel %s: %s (injected by VKFUSE_FAULT at site shaderc)",
                 name, oom ? "shaderc ran out of host memory (malloc failed)" : "failed to compile");
        return out->status = oom ? VF_ERROR_OUT_OF_MEMORY : VF_ERROR_COMPILE;
    }
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    if (!o) {
        snprintf(out->message, sizeof out->message, "shaderc options: out of host memory (malloc failed)");
        return out->status = VF_ERROR_OUT_OF_MEMORY;
    }
    shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_performance);
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, target_env_version);
    shaderc_compile_options_set_source_language(o, shaderc_source_language_glsl);
    int64_t t0 = vf_now_ns();
    shaderc_compilation_result_t r = shaderc_compile_into_spv(compiler, glsl, strlen(glsl), shaderc_compute_shader,
                                                              name, "main", o);
    shaderc_compile_options_release(o);
    out->ns = vf_now_ns() - t0;
    if (!r) {
        snprintf(out->message, sizeof out->message, "kernel %s: shaderc returned no result", name);
        out->status = VF_ERROR_COMPILE;
    } else if (shaderc_result_get_compilation_status(r) != shaderc_compilation_status_success) {
        const char *msg = shaderc_result_get_error_message(r);
        snprintf(out->message, sizeof out->message, "kernel %s failed to compile: %s", name,
                 msg && *msg ? msg : "(no message)");
        /* shaderc ends its message with a newline: callers append to it */
        size_t n = strlen(out->message);
        while (n && (out->message[n - 1] == '\n' || out->message[n - 1] == ' ')) out->message[--n] = '\0';
        out->status = VF_ERROR_COMPILE;
    } else {
        size_t bytes = shaderc_result_get_length(r);
        out->words = vf_malloc(bytes ? bytes : 4);
        if (!out->words) {
            snprintf(out->message, sizeof out->message, "out of host memory (malloc failed)");
            out->status = VF_ERROR_OUT_OF_MEMORY;
        } else {
            memcpy(out->words, shaderc_result_get_bytes(r), bytes);
            out->n_words = bytes / 4;
        }
    }
    if (r) shaderc_result_release(r);
    return out->status;
}

vf_status vf_vk_shaders_compiler(vf_vk_shaders *c)
{
    if (!c->compiler) c->compiler = shaderc_compiler_initialize();
    return c->compiler ? VF_OK : vf_err_set(c->err, VF_ERROR_COMPILE, "shaderc_compiler_initialize failed");
}

/* Counts, logs and reports a compile done here or ahead (shader_prepare.c);
   on success words are the caller's. */
static vf_status compiled(vf_vk_shaders *c, const char *glsl, const char *name, const vf_vk_compiled *r)
{
    c->compiles++;
    c->compile_ns += r->ns;
    if (c->log_info)
        fprintf(stderr, "vkfuse: compiled kernel %s (%zu bytes of GLSL -> %zu of SPIR-V) in %.2f ms%s%s\n", name,
                strlen(glsl), r->status ? (size_t)0 : r->n_words * 4, (double)r->ns / 1e6,
                r->ahead ? " (ahead, in parallel)" : "", r->status ? ": FAILED" : "");
    return r->status ? vf_err_set(c->err, r->status, "%s", r->message) : VF_OK;
}

void vf_vk_shader_hit(vf_vk_shaders *c, uint64_t key)
{
    if (c->track) vf_keyset_add(c->track, key); /* a failure is the set's oom flag */
    c->memory_hits++;
}

vf_status vf_vk_shader_get(vf_vk_shaders *c, const char *glsl, const char *name,
                           const vf_vk_spirv **out)
{
    *out = NULL;
    if (!name || !*name) name = "kernel";
    uint64_t key = vf_vk_shader_key(c, glsl);
    if (c->track) vf_keyset_add(c->track, key); /* a failure is the set's oom flag */
    vf_vk_spirv *hit = vf_hmap_get(&c->map, key);
    if (hit) {
        c->memory_hits++;
        *out = hit;
        return VF_OK;
    }
    dump_glsl(c, glsl, name, key);
    char path[4200];
    bool disk = vf_vk_shader_path(c, key, path, sizeof path);
    if (disk) {
        void *payload = NULL;
        size_t size = 0;
        vf_disk_result dr = vf_disk_read(c->dev, path, VF_DISK_MAGIC_SPIRV, key, &payload, &size);
        /* Beyond the header: it must look like SPIR-V, or it is corrupt. */
        if (dr == VF_DISK_OK && (size < 20 || size % 4 || ((uint32_t *)payload)[0] != VF_SPIRV_MAGIC)) {
            free(payload);
            dr = VF_DISK_CORRUPT;
        }
        if (dr == VF_DISK_OK) {
            c->disk_hits++;
            return remember(c, key, payload, size / 4, out);
        }
        if (dr != VF_DISK_MISSING) c->disk_rejects++;
    }
    vf_vk_compiled r;
    vf_vk_compiled *ahead = NULL;
    for (int i = 0; i < c->n_ahead && !ahead; i++)
        if (c->ahead[i].key == key && !c->ahead[i].taken) ahead = &c->ahead[i];
    if (ahead) {   /* compiled by vf_vk_shaders_prepare: counted here, as if compiled now */
        r = *ahead;
        ahead->taken = true;
        ahead->words = NULL;
    } else {
        vf_status s = vf_vk_shaders_compiler(c);
        if (s) return s;
        vf_vk_shader_compile_raw(c->compiler, c->target_env_version, glsl, name, &r);
    }
    vf_status s = compiled(c, glsl, name, &r);
    if (s) {
        free(r.words);
        return s;
    }
    if (disk && !vf_disk_write(c->dev, path, VF_DISK_MAGIC_SPIRV, key, r.words, r.n_words * 4))
        c->disk_write_failures++;
    return remember(c, key, r.words, r.n_words, out);
}

const vf_vk_spirv *vf_vk_shader_find(const vf_vk_shaders *c, uint64_t key)
{
    return vf_hmap_get(&c->map, key);
}

vf_status vf_vk_spirv_validate(const uint32_t *words, size_t n_words, char *msg, size_t msglen)
{
    if (!words || n_words < 5 || words[0] != VF_SPIRV_MAGIC) {
        snprintf(msg, msglen, "not a SPIR-V module (%zu words%s)", n_words,
                 words && n_words ? ", no SPIR-V magic number" : "");
        return VF_ERROR_FORMAT;
    }
    /* The kernels are compiled for Vulkan 1.2 (vf_vk_shaders_init). */
    spv_context sc = spvContextCreate(SPV_ENV_VULKAN_1_2);
    if (!sc) {
        snprintf(msg, msglen, "out of host memory (SPIR-V validator)");
        return VF_ERROR_OUT_OF_MEMORY;
    }
    spv_diagnostic diag = NULL;
    spv_result_t r = spvValidateBinary(sc, words, n_words, &diag);
    vf_status s = VF_OK;
    if (r != SPV_SUCCESS) {
        snprintf(msg, msglen, "the SPIR-V validator rejects it: %s", diag && diag->error ? diag->error : "(no message)");
        s = VF_ERROR_FORMAT;
    }
    spvDiagnosticDestroy(diag);
    spvContextDestroy(sc);
    return s;
}

vf_status vf_vk_shader_insert(vf_vk_shaders *c, uint64_t key, const uint32_t *words, size_t n_words)
{
    if (vf_hmap_get(&c->map, key)) return VF_OK;
    if (n_words < 5 || words[0] != VF_SPIRV_MAGIC)
        return vf_err_set(c->err, VF_ERROR_FORMAT, "kernel %016llx: not a SPIR-V module", (unsigned long long)key);
    char msg[1024];
    vf_status vs = vf_vk_spirv_validate(words, n_words, msg, sizeof msg);
    if (vs != VF_OK) return vf_err_set(c->err, vs, "kernel %016llx: %s", (unsigned long long)key, msg);
    uint32_t *copy = vf_malloc(sizeof *copy * n_words);
    if (!copy) return vf_err_set(c->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed) (shader cache)");
    memcpy(copy, words, sizeof *copy * n_words);
    const vf_vk_spirv *out;
    vf_status s = remember(c, key, copy, n_words, &out);
    if (!s) c->inserted++;
    return s;
}
