/* User kernels on Vulkan (vf_kernel_create, docs/KERNELS.md): GLSL to
 * SPIR-V without a device (so a CPU context reports the same compile
 * errors and can save the same SPIR-V), what a module declares (bindings,
 * its local size), and one call run by the eager scheduler, with hazard
 * tracking as for every generated kernel. */
#include "vulkan/runtime.h"
#include "util/hash.h"
#include "util/fault.h"

#include <shaderc/shaderc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether src has its own #version line (then it goes to shaderc as is). */
static bool has_version(const char *src)
{
    for (const char *p = src; (p = strstr(p, "#version")) != NULL; p++) {
        const char *q = p;
        while (q > src && (q[-1] == ' ' || q[-1] == '\t')) q--;
        if (q == src || q[-1] == '\n') return true;
    }
    return false;
}

vf_status vf_glsl_compile(const char *glsl, const char *name, uint32_t **words, size_t *n_words, char *msg,
                          size_t msglen)
{
    *words = NULL;
    *n_words = 0;
    /* The prelude ends with #line 1, so shaderc's messages count the
       user's lines, not ours. */
    static const char prelude[] = "#version 450\n#line 1\n";
    char *src = NULL;
    if (!has_version(glsl)) {
        size_t n = strlen(glsl);
        src = vf_malloc(sizeof prelude + n);
        if (!src) {
            snprintf(msg, msglen, "out of host memory");
            return VF_ERROR_OUT_OF_MEMORY;
        }
        memcpy(src, prelude, sizeof prelude - 1);
        memcpy(src + sizeof prelude - 1, glsl, n + 1);
    }
    shaderc_compiler_t c = shaderc_compiler_initialize();
    if (!c) {
        free(src);
        snprintf(msg, msglen, "shaderc_compiler_initialize failed");
        return VF_ERROR_COMPILE;
    }
    vf_vk_compiled r;
    vf_status s = vf_vk_shader_compile_raw(c, shaderc_env_version_vulkan_1_2, src ? src : glsl, name, &r);
    shaderc_compiler_release(c);
    free(src);
    if (s) {
        snprintf(msg, msglen, "%s", r.message);
        free(r.words);
        return s;
    }
    *words = r.words;
    *n_words = r.n_words;
    return VF_OK;
}

enum { OP_ENTRY_POINT = 15, OP_EXECUTION_MODE = 16, OP_DECORATE = 71, DEC_SPEC_ID = 1, DEC_BINDING = 33,
       DEC_SET = 34, MODE_LOCAL_SIZE = 17, MODEL_GLCOMPUTE = 5 };

vf_status vf_spirv_inspect(const uint32_t *w, size_t n, vf_spirv_info *info, char *msg, size_t msglen)
{
    memset(info, 0, sizeof *info);
    info->max_binding = -1;
    vf_status s = vf_vk_spirv_validate(w, n, msg, msglen);
    if (s) return s;
    uint32_t bound = w[3];
    /* per id: its binding + 1 and set + 1 (0: none) */
    int32_t *bind = vf_calloc(bound ? bound : 1, sizeof *bind), *set = vf_calloc(bound ? bound : 1, sizeof *set);
    if (!bind || !set) {
        free(bind);
        free(set);
        snprintf(msg, msglen, "out of host memory");
        return VF_ERROR_OUT_OF_MEMORY;
    }
    bool compute = false;
    for (size_t i = 5; i < n;) {
        uint32_t op = w[i] & 0xffffu, len = w[i] >> 16;
        if (len == 0 || i + len > n) break; /* the validator accepted it: cannot happen */
        if (op == OP_ENTRY_POINT && len >= 3 && w[i + 1] == MODEL_GLCOMPUTE) compute = true;
        if (op == OP_EXECUTION_MODE && len >= 6 && w[i + 2] == MODE_LOCAL_SIZE) info->local_size_x = w[i + 3];
        if (op == OP_DECORATE && len >= 4 && w[i + 1] < bound) {
            if (w[i + 2] == DEC_BINDING) bind[w[i + 1]] = (int32_t)w[i + 3] + 1;
            if (w[i + 2] == DEC_SET) set[w[i + 1]] = (int32_t)w[i + 3] + 1;
            if (w[i + 2] == DEC_SPEC_ID && w[i + 3] == 0) info->spec0 = true;
        }
        i += len;
    }
    for (uint32_t id = 0; id < bound; id++) {
        if (!bind[id] && !set[id]) continue;
        if (set[id] > 1) {
            info->bad_set = set[id] - 1;
            info->bad_set_binding = bind[id] - 1;
        }
        if (bind[id] - 1 > info->max_binding) info->max_binding = bind[id] - 1;
    }
    free(bind);
    free(set);
    if (!compute) {
        snprintf(msg, msglen, "the module has no GLCompute entry point");
        return VF_ERROR_INVALID_ARGUMENT;
    }
    return VF_OK;
}

/* What a kernel may touch of tensor t: its bytes rounded up to whole
   16-byte words within the buffer (as generated kernels' bindings). */
static VkDeviceSize tref_range(const vf_tref *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    VkDeviceSize want = ((VkDeviceSize)n * vf_dtype_size(t->dtype) + 15) & ~(VkDeviceSize)15;
    VkDeviceSize room = t->buf->size > t->offset ? t->buf->size - t->offset : 0;
    return want < room ? want : room;
}

vf_status vf_vk_ukernel_run(vf_vk_runtime *rt, const vf_ukernel_exec *e)
{
    const vf_ukernel *k = e->k;
    const uint32_t *maxg = rt->dev.caps.max_workgroup_count;
    for (int d = 0; d < 3; d++)
        if (e->groups[d] < 1 || e->groups[d] > maxg[d])
            return vf_err_set(rt->err, VF_ERROR_UNSUPPORTED,
                              "kernel '%s': %u x %u x %u workgroups; this device allows 1 .. %u x %u x %u "
                              "(split the work, or give fewer groups from desc.dispatch)",
                              k->name, e->groups[0], e->groups[1], e->groups[2], maxg[0], maxg[1], maxg[2]);
    vf_status s = VF_OK;
    for (int j = 0; !s && !k->uninit && j < k->n_out; j++) {
        vf_exec f = {.op = VF_OP_FILL, .attrs.dtype = e->out[j].dtype, .out = e->out[j]};
        s = vf_vk_exec(rt, &f);
    }
    if (s) return s;
    uint32_t wg = k->workgroup_size;
    VkSpecializationMapEntry map = {.constantID = 0, .offset = 0, .size = 4};
    const vf_vk_pipeline *pipe;
    s = vf_vk_pipeline_get(&rt->pipes, &(vf_vk_pipeline_desc){
        .spirv = k->spirv, .spirv_words = k->n_words, .spirv_key = k->key, .name = k->name,
        .n_bindings = k->n_in + k->n_out, .push_size = e->push_size,
        .n_spec = 1, .spec_map = &map, .spec_data = &wg, .spec_size = 4}, &pipe);
    if (s) return s;
    vf_vk_bind b[VF_KERNEL_MAX_INPUTS + VF_KERNEL_MAX_OUTPUTS];
    for (int i = 0; i < k->n_in + k->n_out; i++) {
        const vf_tref *t = i < k->n_in ? &e->in[i] : &e->out[i - k->n_in];
        /* outputs may be read too (atomics, read-modify-write) */
        b[i] = (vf_vk_bind){.buf = t->buf, .offset = t->offset, .range = tref_range(t),
                            .access = i < k->n_in ? VF_VK_READ : VF_VK_READ | VF_VK_WRITE};
    }
    s = vf_vk_sched_dispatch(&rt->sched, &(vf_vk_dispatch_info){
        .pipe = pipe, .n_bindings = k->n_in + k->n_out, .bindings = b, .push = e->push,
        .push_size = e->push_size, .groups = {e->groups[0], e->groups[1], e->groups[2]}, .name = k->name});
    rt->execs++;
    return s ? s : rt->err->status;
}
