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
enum { OP_TYPE_INT = 21, OP_TYPE_FLOAT = 22, OP_TYPE_VECTOR = 23, OP_TYPE_MATRIX = 24, OP_TYPE_ARRAY = 28,
       OP_TYPE_STRUCT = 30, OP_TYPE_POINTER = 32, OP_CONSTANT = 43, OP_VARIABLE = 59, OP_MEMBER_DECORATE = 72,
       DEC_ARRAY_STRIDE = 6, DEC_MATRIX_STRIDE = 7, DEC_OFFSET = 35, SC_PUSH_CONSTANT = 9 };

/* What the push-constant reflection keeps of an id: its opcode, the
   instruction's word index, and an array type's stride. */
typedef struct pc_id {
    uint32_t op, at, stride;
} pc_id;

typedef struct pc_module {
    const uint32_t *w;
    const pc_id *ids;
    uint32_t bound;
    uint32_t deco_end;        /* decorations come before the first type (the module's layout) */
} pc_module;

/* Member m of struct s: its Offset and MatrixStride decorations. */
static void member_deco(const pc_module *md, uint32_t s, uint32_t m, uint32_t *off, uint32_t *ms)
{
    *off = *ms = 0;
    for (uint32_t i = 5; i < md->deco_end;) {
        uint32_t op = md->w[i] & 0xffffu, l = md->w[i] >> 16;
        if (op == OP_MEMBER_DECORATE && l >= 5 && md->w[i + 1] == s && md->w[i + 2] == m) {
            if (md->w[i + 3] == DEC_OFFSET) *off = md->w[i + 4];
            if (md->w[i + 3] == DEC_MATRIX_STRIDE) *ms = md->w[i + 4];
        }
        i += l ? l : 1;
    }
}

/* The size in bytes type t takes in a block (matrix_stride: the member's
   MatrixStride, 0 if none); 0 for what a push constant cannot hold. */
static uint32_t pc_size(const pc_module *md, uint32_t t, uint32_t matrix_stride, int depth)
{
    if (t >= md->bound || depth > 8 || !md->ids[t].op) return 0;
    const uint32_t *in = md->w + md->ids[t].at;
    uint32_t len = in[0] >> 16;
    switch (md->ids[t].op) {
    case OP_TYPE_INT:
    case OP_TYPE_FLOAT: return in[2] / 8;
    case OP_TYPE_VECTOR: return in[3] * pc_size(md, in[2], 0, depth + 1);
    case OP_TYPE_MATRIX: return in[3] * (matrix_stride ? matrix_stride : pc_size(md, in[2], 0, depth + 1));
    case OP_TYPE_ARRAY: {
        uint32_t c = in[3] < md->bound && md->ids[in[3]].op == OP_CONSTANT ? md->w[md->ids[in[3]].at + 3] : 0;
        return c * (md->ids[t].stride ? md->ids[t].stride : pc_size(md, in[2], 0, depth + 1));
    }
    case OP_TYPE_STRUCT: { /* the end of its furthest member */
        uint32_t end = 0;
        for (uint32_t m = 0; m + 2 < len; m++) {
            uint32_t off, ms;
            member_deco(md, t, m, &off, &ms);
            uint32_t e = off + pc_size(md, in[2 + m], ms, depth + 1);
            if (e > end) end = e;
        }
        return end;
    }
    default: return 0;
    }
}

/* The push-constant block into info (push_size, push_member); ids: bound
   zeroed entries. */
static void push_block(const uint32_t *w, size_t n, pc_id *ids, uint32_t bound, vf_spirv_info *info)
{
    pc_module md = {.w = w, .ids = ids, .bound = bound, .deco_end = (uint32_t)n};
    uint32_t block = 0;
    for (size_t i = 5; i < n;) {
        uint32_t op = w[i] & 0xffffu, len = w[i] >> 16;
        if (len == 0 || i + len > n) break;
        bool type = op == OP_TYPE_INT || op == OP_TYPE_FLOAT || op == OP_TYPE_VECTOR || op == OP_TYPE_MATRIX ||
                    op == OP_TYPE_ARRAY || op == OP_TYPE_STRUCT || op == OP_TYPE_POINTER;
        if (type && md.deco_end == n) md.deco_end = (uint32_t)i;
        uint32_t r = op == OP_CONSTANT ? (len >= 4 ? w[i + 2] : 0) : (len >= 2 ? w[i + 1] : 0);
        if ((type || op == OP_CONSTANT) && r && r < bound) ids[r] = (pc_id){op, (uint32_t)i, ids[r].stride};
        if (op == OP_DECORATE && len >= 4 && w[i + 2] == DEC_ARRAY_STRIDE && w[i + 1] && w[i + 1] < bound)
            ids[w[i + 1]].stride = w[i + 3];
        if (op == OP_VARIABLE && len >= 4 && w[i + 3] == SC_PUSH_CONSTANT && !block && w[i + 1] < bound &&
            ids[w[i + 1]].op == OP_TYPE_POINTER)
            block = w[ids[w[i + 1]].at + 3]; /* the pointer's pointee */
        i += len;
    }
    if (!block || block >= bound || ids[block].op != OP_TYPE_STRUCT) return;
    const uint32_t *st = w + ids[block].at;
    int members = (int)(st[0] >> 16) - 2;
    info->push_size = pc_size(&md, block, 0, 0);
    info->push_members = members < VF_SPIRV_PUSH_MEMBERS ? members : VF_SPIRV_PUSH_MEMBERS;
    for (int m = 0; m < info->push_members; m++) {
        uint32_t off, ms, t = st[2 + m];
        member_deco(&md, block, (uint32_t)m, &off, &ms);
        info->push_member[m].offset = off;
        info->push_member[m].size = pc_size(&md, t, ms, 1);
        info->push_member[m].u32 = t < bound && ids[t].op == OP_TYPE_INT && w[ids[t].at + 2] == 32;
    }
}

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
    pc_id *ids = vf_calloc(bound ? bound : 1, sizeof *ids);
    if (!ids) {
        snprintf(msg, msglen, "out of host memory");
        return VF_ERROR_OUT_OF_MEMORY;
    }
    push_block(w, n, ids, bound, info);
    free(ids);
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
