/* The Vulkan backend: the vf_backend_iface over the runtime pieces. */
#include "vulkan/runtime.h"
#include "util/fault.h"
#include "vulkan/plan.h"
#include "vulkan/codegen/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every entry that would use the device fails at once once it is lost
   (issue 15): nothing is queued, waited for or allocated on it again. */
#define VF_LOST_GUARD(rt, where)                                                   \
    do {                                                                           \
        if ((rt)->dev.lost) return vf_vk_lost(&(rt)->dev, (rt)->err, (where));     \
    } while (0)

static vf_status vk_alloc(void *self, size_t bytes, vf_buffer **out)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "allocating device memory");
    vf_status s = vf_vk_mem_alloc(&rt->mem, bytes, 0, out);
    if (s == VF_ERROR_OUT_OF_MEMORY && rt->ef.n_later) {
        /* memory freed while the eager window used it is held until the
           window is recorded: record it, and try again (the memory's own
           retry waits for the work and gives the cache back) */
        vf_err_clear(rt->err);
        s = vf_ef_flush(rt);
        if (!s) s = vf_vk_mem_alloc(&rt->mem, bytes, 0, out);
    }
    return s;
}

static void vk_free(void *self, vf_buffer *buf)
{
    vf_vk_runtime *rt = self;
    /* memory the queued eager window still reads or writes is freed when
       the window is recorded (eager_fuse.h) */
    if (vf_ef_hold_free(rt, buf)) return;
    vf_vk_mem_free(&rt->mem, buf, rt->sched.completed);
}

/* Records the eager window: every entry that records or waits calls it
   first, so what it queued is ordered as it was called. */
#define VF_EF_FLUSH(rt)                                                            \
    do {                                                                           \
        vf_status fs_ = vf_ef_flush(rt);                                           \
        if (fs_) return fs_;                                                       \
    } while (0)

static vf_status check_range(vf_vk_runtime *rt, const vf_buffer *buf, size_t offset, size_t bytes,
                             const char *what)
{
    if (!buf || offset > buf->bytes || bytes > buf->bytes - offset)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT,
                          "%s of %zu bytes at offset %zu outside a %zu-byte buffer", what, bytes,
                          offset, buf ? buf->bytes : 0);
    return VF_OK;
}

/* What an upload or download (what) does before the host touches bytes of
   buf: the device is not lost, the eager window is recorded, the range is
   inside buf, and, where buf is mapped (*map), the work queued earlier that
   uses it has finished (a batch not yet submitted is submitted), since the
   host reads or writes it now. *map is NULL where buf is not host-visible:
   the copy is then recorded into the batch, ordered by hazard tracking. */
static vf_status host_access(vf_vk_runtime *rt, vf_buffer *buf, size_t offset, size_t bytes, const char *what,
                             uint8_t **map)
{
    *map = NULL;
    VF_LOST_GUARD(rt, what);
    VF_EF_FLUSH(rt);
    vf_status s = check_range(rt, buf, offset, bytes, what);
    if (s || bytes == 0) return s;
    *map = vf_vk_buffer_map(buf);
    if (*map && buf->last_use > rt->sched.completed) return vf_vk_sched_wait(&rt->sched, buf->last_use);
    return VF_OK;
}

static vf_status vk_upload(void *self, vf_buffer *buf, size_t offset, const void *src, size_t bytes)
{
    vf_vk_runtime *rt = self;
    uint8_t *map;
    vf_status s = host_access(rt, buf, offset, bytes, "upload", &map);
    if (s || bytes == 0) return s;
    if (!map) return vf_vk_sched_upload(&rt->sched, buf, offset, src, bytes);
    memcpy(map + offset, src, bytes);
    return vf_vk_mem_flush(&rt->mem, buf, offset, bytes);
}

static vf_status vk_download(void *self, vf_buffer *buf, size_t offset, void *dst, size_t bytes)
{
    vf_vk_runtime *rt = self;
    uint8_t *map;
    vf_status s = host_access(rt, buf, offset, bytes, "download", &map);
    if (s || bytes == 0) return s;
    if (!map) return vf_vk_sched_download(&rt->sched, buf, offset, dst, bytes);
    s = vf_vk_mem_invalidate(&rt->mem, buf, offset, bytes);
    if (!s) memcpy(dst, map + offset, bytes);
    /* Validation messages from the batch surface at the read. */
    return s ? s : rt->err->status;
}

static vf_status vk_map(void *self, vf_buffer *buf, size_t offset, size_t bytes, void **out)
{
    vf_vk_runtime *rt = self;
    *out = NULL;
    VF_LOST_GUARD(rt, "mapping a buffer");
    VF_EF_FLUSH(rt); /* ops held for eager fusion may write buf */
    vf_status s = check_range(rt, buf, offset, bytes, "map");
    uint8_t *map = s ? NULL : vf_vk_buffer_map(buf);
    if (!map) return s;
    /* as download: only the work that uses this buffer is waited for */
    if (buf->last_use > rt->sched.completed && (s = vf_vk_sched_wait(&rt->sched, buf->last_use)) != VF_OK) return s;
    if ((s = vf_vk_mem_invalidate(&rt->mem, buf, offset, bytes)) != VF_OK) return s;
    *out = map + offset;
    return rt->err->status;
}

static vf_status vk_unmap(void *self, vf_buffer *buf, size_t offset, size_t bytes)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "unmapping a buffer");
    return vf_vk_mem_flush(&rt->mem, buf, offset, bytes);
}

/* made: VK_NULL_HANDLE, or the pipeline another thread made for it
   (vf_vk_pipeline_adopt, which takes it over whatever happens). */
static vf_status glsl_pipeline(vf_vk_runtime *rt, const char *glsl, const char *name, int n_bindings,
                               uint32_t texel, uint32_t push_size, uint32_t n_spec, const uint32_t *spec,
                               VkPipeline made, VkPipelineLayout made_layout, const vf_vk_pipeline **out)
{
    *out = NULL;
    vf_status s = VF_OK;
    if (n_spec > VF_KERNEL_MAX_SPEC || (n_spec && !spec))
        s = vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "kernel %s: %u specialisation constants (at most %d)",
                       name ? name : "kernel", n_spec, VF_KERNEL_MAX_SPEC);
    const vf_vk_spirv *spv = NULL;
    if (!s) s = vf_vk_shader_get(&rt->shaders, glsl, name, &spv);
    if (s) {
        if (made) rt->dev.vkd.vkDestroyPipeline(rt->dev.device, made, NULL);
        return s;
    }
    VkSpecializationMapEntry map[VF_KERNEL_MAX_SPEC];
    for (uint32_t i = 0; i < n_spec; i++)
        map[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkDescriptorType types[VF_VK_MAX_BINDINGS];
    for (int i = 0; i < n_bindings && i < VF_VK_MAX_BINDINGS; i++)
        types[i] = texel >> i & 1 ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    vf_vk_pipeline_desc pd = {
        .spirv = spv->words,
        .spirv_words = spv->n_words,
        .spirv_key = spv->key,
        .name = name,
        .n_bindings = n_bindings,
        .types = texel ? types : NULL,
        .push_size = push_size,
        .n_spec = n_spec,
        .spec_map = n_spec ? map : NULL,
        .spec_data = n_spec ? spec : NULL,
        .spec_size = 4 * (size_t)n_spec,
    };
    if (made) return vf_vk_pipeline_adopt(&rt->pipes, &pd, made, made_layout, out);
    return vf_vk_pipeline_get(&rt->pipes, &pd, out);
}

vf_status vf_vk_runtime_glsl_pipeline_spec(vf_vk_runtime *rt, const char *glsl, const char *name,
                                           int n_bindings, uint32_t push_size, uint32_t n_spec,
                                           const uint32_t *spec, const vf_vk_pipeline **out)
{
    return glsl_pipeline(rt, glsl, name, n_bindings, 0, push_size, n_spec, spec, VK_NULL_HANDLE, VK_NULL_HANDLE,
                         out);
}

vf_status vf_vk_runtime_glsl_pipeline(vf_vk_runtime *rt, const char *glsl, const char *name,
                                      int n_bindings, uint32_t push_size,
                                      const vf_vk_pipeline **out)
{
    return vf_vk_runtime_glsl_pipeline_spec(rt, glsl, name, n_bindings, push_size, 0, NULL, out);
}

vf_status vf_vk_runtime_dispatch_pipeline(vf_vk_runtime *rt, const vf_dispatch *d, const vf_vk_pipeline **out)
{
    *out = NULL;
    const VkPhysicalDeviceLimits *L = &rt->dev.props.limits;
    uint32_t wg = d->n_spec ? d->spec[0] : 0;
    if (wg == 0 || wg > L->maxComputeWorkGroupSize[0] || wg > L->maxComputeWorkGroupInvocations)
        return vf_err_set(rt->err, VF_ERROR_UNSUPPORTED,
                          "kernel %s: workgroup size %u (the device allows 1..%u invocations, %u in x)", d->name,
                          wg, L->maxComputeWorkGroupInvocations, L->maxComputeWorkGroupSize[0]);
    if (!d->glsl) { /* a user kernel's SPIR-V (codegen_user.c) */
        VkSpecializationMapEntry map[VF_KERNEL_MAX_SPEC];
        for (uint32_t i = 0; i < d->n_spec; i++) map[i] = (VkSpecializationMapEntry){i, 4 * i, 4};
        return vf_vk_pipeline_get(&rt->pipes, &(vf_vk_pipeline_desc){
            .spirv = d->spirv, .spirv_words = d->spirv_words, .spirv_key = d->spirv_key, .name = d->name,
            .n_bindings = d->n_bindings, .push_size = d->push_size, .n_spec = d->n_spec, .spec_map = map,
            .spec_data = d->spec, .spec_size = 4 * d->n_spec}, out);
    }
    return glsl_pipeline(rt, d->glsl, d->name, d->n_bindings, d->texel, d->push_size, d->n_spec, d->spec,
                         VK_NULL_HANDLE, VK_NULL_HANDLE, out);
}

vf_status vf_vk_runtime_dispatch_adopt(vf_vk_runtime *rt, const vf_dispatch *d, VkPipeline made,
                                       VkPipelineLayout made_layout, const vf_vk_pipeline **out)
{
    return glsl_pipeline(rt, d->glsl, d->name, d->n_bindings, d->texel, d->push_size, d->n_spec, d->spec, made,
                         made_layout, out);
}

static size_t tref_bytes(const vf_tref *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return (size_t)n * vf_dtype_size(t->dtype);
}

static bool same_tensor(const vf_tref *a, const vf_tref *b)
{
    return a->buf == b->buf && a->offset == b->offset;
}

static vf_status bind_tensor(vf_vk_runtime *rt, const vf_dispatch *st, int slot, const vf_exec *e,
                             vf_buffer *scratch, size_t scratch_bytes, vf_vk_bind *b)
{
    int which = st->binding[slot];
    const vf_tref *t = NULL;
    memset(b, 0, sizeof *b);
    switch (which) {
    case VF_BIND_IN0: case VF_BIND_IN1: case VF_BIND_IN2:
        if (which >= e->n_in) break;
        t = &e->in[which];
        b->access = VF_VK_READ;
        break;
    case VF_BIND_OUT:
        t = &e->out;
        b->access = VF_VK_WRITE;
        for (int i = 0; i < e->n_in; i++)
            if (same_tensor(&e->in[i], &e->out)) b->access |= VF_VK_READ; /* in-place */
        break;
    case VF_BIND_SCRATCH:
        if (!scratch) break;
        b->buf = scratch;
        b->range = scratch->size;
        (void)scratch_bytes;
        b->access = VF_VK_READ | VF_VK_WRITE;
        return VF_OK;
    default: break;
    }
    if (!t || !t->buf)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT,
                          "kernel %s binding %d refers to tensor slot %d, which this %s op does"
                          " not have", st->name, slot, which, vf_op_get(e->op)->name);
    b->buf = t->buf;
    b->offset = t->offset;
    /* Kernels may read whole 16-byte words past the last element (bool and
       f16 tensors packed in uints); allocations are 16-aligned, so round
       the range up within the reserved size. */
    VkDeviceSize want = (tref_bytes(t) + 15) & ~(VkDeviceSize)15;
    VkDeviceSize room = t->buf->size > t->offset ? t->buf->size - t->offset : 0;
    b->range = want < room ? want : room;
    if (b->range == 0)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT,
                          "kernel %s binding %d: tensor at offset %zu is outside its buffer",
                          st->name, slot, t->offset);
    return VF_OK;
}

/* The kernel of e and its steps' pipelines, generated, compiled (through
   the caches) and memoised: an exec whose pattern and sizes missed the
   memo (kernel_memo.h). *ent holds e's key; it receives the kernel when it
   cannot be memoised (then the caller frees ent->k). */
static vf_status new_kernel(vf_vk_runtime *rt, const vf_exec *e, vf_vk_memo_entry *ent,
                            const vf_vk_memo_entry **out)
{
    vf_status s = vf_codegen_exec(e, &rt->dev.caps, &ent->k, rt->err);
    for (int i = 0; !s && i < ent->k.n_steps; i++) {
        s = vf_vk_runtime_dispatch_pipeline(rt, &ent->k.step[i], &ent->pipe[i]);
        ent->spirv[i] = s ? 0 : vf_vk_shader_key(&rt->shaders, ent->k.step[i].glsl);
    }
    if (s) return s;
    *out = ent;
    if (!ent->n_key) return VF_OK;
    for (int i = 0; i < ent->k.n_steps; i++) { /* compiled: the text is not needed again */
        free(ent->k.step[i].glsl);
        ent->k.step[i].glsl = NULL;
    }
    const vf_vk_memo_entry *kept = vf_vk_memo_add(&rt->memo, ent);
    if (kept) *out = kept; /* out of memory: run it unmemoised */
    return VF_OK;
}

int vf_vk_exec_prepare(vf_vk_runtime *rt, const vf_exec *e)
{
    uint64_t key[VF_VK_MEMO_WORDS];
    int n_key = vf_vk_memo_key(e, key);
    if (!n_key) return 0;
    const vf_vk_memo_entry *me = vf_vk_memo_find(&rt->memo, key, n_key);
    if (!me) {
        vf_vk_memo_entry *ent = vf_calloc(1, sizeof *ent);
        if (!ent) {
            vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
            return -1;
        }
        ent->n_key = n_key;
        memcpy(ent->key, key, sizeof *key * (size_t)n_key);
        vf_status s = new_kernel(rt, e, ent, &me);
        bool kept = !s && me != ent;
        vf_kernel_free(&ent->k);
        free(ent);
        if (s) return -1;
        if (!kept) return 0;
    }
    return me->k.n_steps == 1 && !me->k.scratch_bytes ? 1 : 0;
}

vf_status vf_vk_exec(void *self, const vf_exec *e)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "running an op");
    rt->execs++;
    return vf_ef_exec(rt, e);
}

vf_status vf_vk_exec_now(vf_vk_runtime *rt, const vf_exec *e)
{
    /* A memo hit (the common case of an eager op) allocates nothing: the
       key lives on the stack, an entry is made only for a new kernel. */
    uint64_t key[VF_VK_MEMO_WORDS];
    int n_key = vf_vk_memo_key(e, key);
    const vf_vk_memo_entry *me = n_key ? vf_vk_memo_find(&rt->memo, key, n_key) : NULL;
    vf_vk_memo_entry *ent = NULL;
    vf_status s = VF_OK;
    if (me) {
        for (int i = 0; i < me->k.n_steps; i++) vf_vk_shader_hit(&rt->shaders, me->spirv[i]);
    } else {
        ent = vf_calloc(1, sizeof *ent);
        if (!ent) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
        ent->n_key = n_key;
        memcpy(ent->key, key, sizeof *key * (size_t)n_key);
        s = new_kernel(rt, e, ent, &me);
    }
    const vf_gen_kernel *k = me ? &me->k : NULL;
    vf_buffer *scratch = NULL;
    if (!s && k->scratch_bytes) s = vf_vk_mem_alloc(&rt->mem, k->scratch_bytes, 0, &scratch);
    for (int i = 0; !s && i < k->n_steps; i++) {
        const vf_dispatch *st = &k->step[i];
        vf_vk_bind binds[VF_KERNEL_MAX_BINDINGS];
        for (int j = 0; !s && j < st->n_bindings; j++)
            s = bind_tensor(rt, st, j, e, scratch, k->scratch_bytes, &binds[j]);
        if (s) break;
        vf_vk_dispatch_info di = {
            .pipe = me->pipe[i],
            .n_bindings = st->n_bindings,
            .bindings = binds,
            .push = st->push,
            .push_size = st->push_size,
            .groups = {st->groups[0], st->groups[1], st->groups[2]},
            /* The steps of one kernel hand data on through buffers that
               tracking may not see (scratch reuse, aliasing): always a
               barrier between them, as kernel.h promises codegen. */
            .barrier_before = i > 0,
            .name = st->name,
        };
        s = vf_vk_sched_dispatch(&rt->sched, &di);
    }
    if (scratch) vf_vk_mem_free(&rt->mem, scratch, rt->sched.completed);
    if (ent) {
        vf_kernel_free(&ent->k);
        free(ent);
    }
    return s ? s : rt->err->status;
}

static vf_status vk_sync(void *self)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "sync");
    VF_EF_FLUSH(rt);
    vf_status s = vf_vk_sched_sync(&rt->sched);
    return s ? s : rt->err->status;
}

static void runtime_destroy(vf_vk_runtime *rt)
{
    if (!rt->dev.lost) vf_ef_flush(rt); /* a lost device runs nothing more */
    vf_ef_destroy(rt);
    vf_vk_sched_destroy(&rt->sched);
    vf_vk_memo_free(&rt->memo);
    vf_vk_pipelines_destroy(&rt->pipes); /* saves the pipeline cache */
    vf_vk_shaders_destroy(&rt->shaders);
    vf_vk_mem_destroy(&rt->mem);
    vf_vk_device_destroy(&rt->dev);
    free(rt);
}

static void vk_destroy(void *self)
{
    if (self) runtime_destroy(self);
}

static void vk_stats(void *self, vf_context_stats *out)
{
    vf_vk_runtime *rt = self;
    out->shader_compiles = rt->shaders.compiles;
    out->shader_compile_ms = (double)rt->shaders.compile_ns / 1e6;
    out->pipelines_created = rt->pipes.created;
    out->pipeline_create_ms = (double)rt->pipes.create_ns / 1e6;
    out->shader_memory_hits = rt->shaders.memory_hits;
    out->shader_disk_hits = rt->shaders.disk_hits;
    out->submits = rt->sched.submits;
    out->dispatches = rt->sched.hz.dispatches;
    out->barriers = rt->sched.hz.barriers;
    out->device_bytes_in_use = rt->mem.bytes_in_use;
    out->device_bytes_cached = rt->mem.cached_bytes;
    out->device_bytes_reserved = rt->mem.bytes_reserved;
    out->device_bytes_peak = rt->mem.bytes_peak;
    out->device_allocations = rt->mem.allocations;
    out->device_alloc_retries = rt->mem.retries;
    out->eager_fuse_swaps = rt->ef.swaps;
    out->eager_fused_windows = rt->ef.fused_windows;
    out->eager_fused_ops = rt->ef.fused_ops;
    out->tier_quick_kernels = rt->tier_kernels;
    out->tier_swaps = rt->tier_swaps;
    out->device_memory_budget = vf_vk_mem_budget(&rt->mem);
    out->device_memory_budget_usage = out->device_memory_budget ? rt->mem.budget_usage : 0;
}

static vf_status vk_trim(void *self)
{
    vf_vk_runtime *rt = self;
    /* Ranges freed while queued work used them are released once it is
       done: wait for it, so that their blocks are cached and go too. */
    VF_LOST_GUARD(rt, "trim");
    VF_EF_FLUSH(rt);
    vf_status s = vf_vk_sched_sync(&rt->sched);
    vf_vk_mem_trim(&rt->mem);
    return s ? s : rt->err->status;
}

static vf_status wait_all(void *arg)
{
    vf_vk_runtime *rt = arg;
    return vf_vk_sched_sync(&rt->sched);
}

static vf_status vk_plan_create(void *self, const vf_plan_desc *d, vf_plan **out)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "making a plan");
    VF_EF_FLUSH(rt);
    return vf_vk_plan_create(self, d, out);
}

static vf_status vk_plan_run(void *self, vf_plan *p, const vf_plan_bind *binds, int n_binds)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "running a plan");
    VF_EF_FLUSH(rt);
    return vf_vk_plan_run(self, p, binds, n_binds);
}

static bool vk_lost(void *self) { return ((vf_vk_runtime *)self)->dev.lost; }

static void vk_plan_destroy(void *self, vf_plan *p) { vf_vk_plan_destroy(self, p); }

static void vk_plan_info(void *self, const vf_plan *p, vf_plan_info *out)
{
    (void)self;
    vf_vk_plan_info(p, out);
}

static vf_status vk_plan_profile(void *self, vf_plan *p, vf_plan_prof *out)
{
    vf_vk_runtime *rt = self;
    VF_LOST_GUARD(rt, "a plan's profile");
    VF_EF_FLUSH(rt);
    return vf_vk_plan_profile(self, p, out);
}

static vf_keyset *vk_kernels_track(void *self, vf_keyset *set)
{
    vf_vk_runtime *rt = self;
    vf_keyset *before = rt->shaders.track;
    rt->shaders.track = set;
    return before;
}

static bool vk_kernel_binary(void *self, uint64_t key, const uint32_t **words, size_t *n_words)
{
    vf_vk_runtime *rt = self;
    const vf_vk_spirv *spv = vf_vk_shader_find(&rt->shaders, key);
    if (!spv) return false;
    *words = spv->words;
    *n_words = spv->n_words;
    return true;
}

static vf_status vk_kernel_insert(void *self, uint64_t key, const uint32_t *words, size_t n_words)
{
    vf_vk_runtime *rt = self;
    return vf_vk_shader_insert(&rt->shaders, key, words, n_words);
}

static vf_status vk_ukernel(void *self, const vf_ukernel_exec *e)
{
    vf_vk_runtime *rt = self;
    VF_EF_FLUSH(rt);
    return vf_vk_ukernel_run(self, e);
}

static const vf_backend_iface vk_iface = {
    .name = "vulkan",
    .alloc = vk_alloc,
    .free = vk_free,
    .upload = vk_upload,
    .download = vk_download,
    .exec = vf_vk_exec,
    .sync = vk_sync,
    .destroy = vk_destroy,
    .stats = vk_stats,
    .trim = vk_trim,
    .lost = vk_lost,
    .plan_create = vk_plan_create,
    .plan_run = vk_plan_run,
    .plan_destroy = vk_plan_destroy,
    .plan_info = vk_plan_info,
    .plan_profile = vk_plan_profile,
    .kernels_track = vk_kernels_track,
    .kernel_binary = vk_kernel_binary,
    .kernel_insert = vk_kernel_insert,
    .ukernel = vk_ukernel,
    .map = vk_map,
    .unmap = vk_unmap,
};

vf_vk_runtime *vf_vk_runtime_of(const vf_backend_t *be)
{
    return be && be->iface == &vk_iface ? be->self : NULL;
}

const vf_vk_timing *vf_vk_runtime_timings(vf_vk_runtime *rt, size_t *n)
{
    *n = rt->sched.n_timings;
    return rt->sched.timings;
}

void vf_vk_runtime_timings_clear(vf_vk_runtime *rt) { rt->sched.n_timings = 0; }

/* VKFUSE_MEMORY_CACHE: bytes, or a number with K, M or G (binary: KiB,
   MiB, GiB; a trailing "B" or "iB" is allowed). "0": no cache (-1 here);
   unset: the default (0 here). A typo must not silently become the
   default: anything else is refused. */
static vf_status parse_cache_size(const char *v, int64_t *out, vf_err *err)
{
    *out = 0;
    if (!v || !*v) return VF_OK;
    const char *p = v;
    uint64_t n = 0;
    bool digits = false;
    while (*p >= '0' && *p <= '9') {
        if (n > (UINT64_MAX - 9) / 10) break;
        n = n * 10 + (uint64_t)(*p++ - '0');
        digits = true;
    }
    unsigned shift = 0;
    switch (*p) {
    case 'k': case 'K': shift = 10; p++; break;
    case 'm': case 'M': shift = 20; p++; break;
    case 'g': case 'G': shift = 30; p++; break;
    default: break;
    }
    if (shift && (strcmp(p, "iB") == 0 || strcmp(p, "B") == 0)) p += strlen(p);
    if (!digits || *p || n > ((uint64_t)INT64_MAX >> shift))
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                          "VKFUSE_MEMORY_CACHE=%s is not a size: give bytes, or a number with K, M or G"
                          " (KiB, MiB, GiB), e.g. 512M or 2G; 0 keeps no freed device memory", v);
    *out = n == 0 ? -1 : (int64_t)(n << shift);
    return VF_OK;
}

/* VKFUSE_TIMEOUT_MS: a positive whole number of milliseconds; unset: 0
   (the default). Anything else is refused, as a typo would otherwise
   become "wait two minutes". */
static vf_status parse_timeout(const char *v, int64_t *out, vf_err *err)
{
    *out = 0;
    if (!v || !*v) return VF_OK;
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (end == v || *end || n <= 0 || n > 86400000LL * 365)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                          "VKFUSE_TIMEOUT_MS=%s is not a positive whole number of milliseconds (e.g. 5000);"
                          " unset it for the default, %d ms", v, VF_VK_DEFAULT_TIMEOUT_MS);
    *out = n;
    return VF_OK;
}

vf_status vf_vk_backend_create_ex(vf_err *err, const vf_vk_options *opt,
                                  const vf_vk_extra_options *xopt, vf_backend_t *out,
                                  char *device_name, size_t device_name_len)
{
    static const vf_vk_extra_options none;
    static const vf_vk_options defaults = {.device_index = -1};
    if (!xopt) xopt = &none;
    if (!opt) opt = &defaults;
    out->iface = NULL;
    out->self = NULL;
    int64_t cache_cap = 0, timeout_ms = 0, limit = 0;
    vf_status s = parse_cache_size(opt->memory_cache, &cache_cap, err);
    if (!s) s = parse_timeout(opt->timeout_ms, &timeout_ms, err);
    if (!s && opt->memory_limit && *opt->memory_limit) {
        s = parse_cache_size(opt->memory_limit, &limit, err);
        if (s || limit <= 0) {
            vf_err_clear(err);
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                              "VKFUSE_DEVICE_MEMORY_LIMIT=%s is not a size: give bytes, or a number with K, M or G"
                              " (KiB, MiB, GiB), e.g. 256M", opt->memory_limit);
        }
    }
    if (s) return s;
    if (opt->memory_limit_bytes > 0) limit = opt->memory_limit_bytes;
    if (xopt->cache_cap) cache_cap = xopt->cache_cap;
    vf_vk_runtime *rt = vf_calloc(1, sizeof *rt);
    if (!rt) return vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    rt->err = err;
    vf_vk_device_options dopt = {
        .device_index = opt->device_index,
        .device_env = opt->device_env,
        .gpu_only = opt->gpu_only,
        .validation = opt->validation,
        .no_push_descriptors = xopt->no_push_descriptors,
        .loader = opt->loader,
        .test_caps = opt->test_caps,
        .test_limits = opt->test_limits,
        .no_robust = opt->no_robust,
    };
    s = vf_vk_device_create(&rt->dev, &dopt, err);
    if (s) {
        free(rt);
        return s;
    }
    vf_vk_mem_options mopt = {.block_size = xopt->block_size, .cache_cap = cache_cap,
                              .force_staging = xopt->force_staging || opt->test_staging, .limit = limit};
    vf_vk_sched_options sopt = {.batch_dispatches = xopt->batch_dispatches, .profile = opt->profile,
                                .timeout_ms = timeout_ms};
    s = vf_vk_mem_init(&rt->mem, &rt->dev, &mopt, err);
    if (!s) s = vf_vk_shaders_init(&rt->shaders, &rt->dev, opt->cache_dir, err);
    if (!s) {
        snprintf(rt->shaders.dump_dir, sizeof rt->shaders.dump_dir, "%s", opt->dump_dir ? opt->dump_dir : "");
        rt->shaders.log_info = opt->log_info;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        rt->shaders.compile_threads = opt->compile_threads ? opt->compile_threads
                                    : (int)(cpus < 1 ? 1 : cpus > 16 ? 16 : cpus);
    }
    if (!s) s = vf_vk_pipelines_init(&rt->pipes, &rt->dev, rt->shaders.dir, err);
    if (!s) rt->pipes.log_info = opt->log_info;
    rt->ef.on = opt->eager_fuse;
    /* The quick tier needs the thread that compiles the tuned kernels, and
       only the CPU profile's matmul has a cheaper block to start with. */
    rt->tiered = !opt->tiered_off && rt->dev.caps.is_cpu && rt->shaders.compile_threads > 1;
    rt->driver_cache_off = opt->driver_cache_off;
    if (!s) s = vf_vk_sched_init(&rt->sched, &rt->dev, &rt->mem, &sopt, err);
    if (!s) {
        rt->mem.wait_all = wait_all;
        rt->mem.wait_arg = rt;
    }
    if (s) {
        runtime_destroy(rt);
        return s;
    }
    if (device_name && device_name_len) snprintf(device_name, device_name_len, "%s", rt->dev.name);
    out->iface = &vk_iface;
    out->self = rt;
    return VF_OK;
}

vf_status vf_vulkan_backend_create(vf_err *err, const vf_vk_options *opt, vf_backend_t *out,
                                   char *device_name, size_t device_name_len)
{
    return vf_vk_backend_create_ex(err, opt, NULL, out, device_name, device_name_len);
}
