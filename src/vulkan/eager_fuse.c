/* Eager fusion (eager_fuse.h): the window of queued eager elementwise ops,
   its flush, and the fused kernels of its patterns. */
#include "vulkan/runtime.h"
#include "util/fault.h"
#include "vulkan/codegen/codegen_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- what may join the window ---------------------------------------------- */

static bool same_ref(const vf_tref *a, const vf_tref *b)
{
    return a->buf == b->buf && a->offset == b->offset && a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

static bool same_shape(const vf_tref *a, const vf_tref *b)
{
    return a->rank == b->rank && memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* Elementwise ops with inputs, not in place: FILL's value would be data in
   the key, in-place writes (vf_assign_add) read and write one buffer. Not
   user elementwise ops: the exec's attrs.uelem is only borrowed for the
   call (vf_elementwise_destroy may free it before the flush). */
static bool windowable(const vf_exec *e)
{
    if (e->op == VF_OP_FILL || !cg_member_op(e->op) || e->n_in < 1 || e->n_in > 3 || !e->out.buf || e->attrs.uelem)
        return false;
    for (int i = 0; i < e->n_in; i++)
        if (!e->in[i].buf || e->in[i].buf == e->out.buf) return false;
    return true;
}

/* Whether the window touches buf (an input or a result). */
static bool uses(const vf_eager_fuse *w, const vf_buffer *buf)
{
    for (int i = 0; i < w->n_in; i++)
        if (w->in[i].buf == buf) return true;
    for (int i = 0; i < w->n; i++)
        if (w->ops[i].out.buf == buf) return true;
    return false;
}

/* Where input t of a new op comes from: VF_FUSED_MEMBER(m) (< 0) for the
   result of op m, a window input's index, SRC_NEW: a new input,
   SRC_OVERLAP: it overlaps a result without being it (the op cannot join). */
enum { SRC_NEW = 1 << 20, SRC_OVERLAP };

static int source_of(const vf_eager_fuse *w, const vf_tref *t)
{
    for (int m = w->n - 1; m >= 0; m--)
        if (w->ops[m].out.buf == t->buf) return same_ref(&w->ops[m].out, t) ? VF_FUSED_MEMBER(m) : SRC_OVERLAP;
    for (int i = 0; i < w->n_in; i++)
        if (same_ref(&w->in[i], t)) return i;
    return SRC_NEW;
}

/* Whether e can join the window as it is (an empty one takes any
   windowable e). */
static bool fits(const vf_eager_fuse *w, const vf_exec *e)
{
    if (w->n == 0) return true;
    if (w->n >= VF_EF_MAX_OPS || !same_shape(&w->ops[0].out, &e->out) || uses(w, e->out.buf)) return false;
    int fresh = 0;
    for (int k = 0; k < e->n_in; k++) {
        int s = source_of(w, &e->in[k]);
        if (s == SRC_OVERLAP) return false;
        bool dup = false;
        for (int j = 0; j < k && s == SRC_NEW; j++) dup = same_ref(&e->in[j], &e->in[k]);
        if (s == SRC_NEW && !dup) fresh++;
    }
    /* every result counts: which ones the user frees is known at the flush only */
    return w->n_in + fresh + w->n + 1 <= VF_EF_MAX_TENSORS;
}

static void append(vf_eager_fuse *w, const vf_exec *e)
{
    int m = w->n;
    for (int k = 0; k < 3; k++) w->src[m][k] = 0;
    for (int k = 0; k < e->n_in; k++) {
        int s = source_of(w, &e->in[k]);   /* the earlier ops only: w->n is not counted up yet */
        if (s == SRC_NEW) {
            s = w->n_in;
            w->in[w->n_in++] = e->in[k];
        }
        w->src[m][k] = s;
    }
    w->ops[m] = *e;
    w->freed[m] = false;
    w->n++;
}

vf_status vf_ef_exec(vf_vk_runtime *rt, const vf_exec *e)
{
    vf_eager_fuse *w = &rt->ef;
    /* the op's own kernel first: a pattern the device cannot run fails at
       the call, with the window untouched */
    int ready = w->on && windowable(e) ? vf_vk_exec_prepare(rt, e) : 0;
    if (ready < 0) return rt->err->status ? rt->err->status : VF_ERROR_DEVICE;
    if (ready == 0) {
        vf_status s = vf_ef_flush(rt);
        if (s) return s;
        return vf_vk_exec_now(rt, e);
    }
    if (!fits(w, e)) {
        vf_status s = vf_ef_flush(rt);
        if (s) return s;
    }
    append(w, e);
    return VF_OK;
}

bool vf_ef_hold_free(vf_vk_runtime *rt, vf_buffer *buf)
{
    vf_eager_fuse *w = &rt->ef;
    if (w->n == 0 || !uses(w, buf)) return false;
    for (int m = 0; m < w->n; m++)
        if (w->ops[m].out.buf == buf) w->freed[m] = true;
    if (w->n_later == (int)(sizeof w->later / sizeof w->later[0])) {
        /* cannot happen (a window touches at most 16 buffers); be safe */
        vf_ef_flush(rt);
        return false;
    }
    w->later[w->n_later++] = buf;
    return true;
}

/* ---- keys and entries -------------------------------------------------------- */

/* The window's structure: each op's memo key, its inputs' sources, and
   whether its result is still held. */
static int window_key(const vf_eager_fuse *w, uint64_t *key, int cap)
{
    int n = 0;
    key[n++] = (uint64_t)w->n | (uint64_t)w->n_in << 16;
    uint64_t k1[VF_VK_MEMO_WORDS];
    for (int m = 0; m < w->n; m++) {
        int nk = vf_vk_memo_key(&w->ops[m], k1);
        if (nk == 0 || n + nk + 2 > cap) return 0;
        key[n++] = (uint64_t)nk;
        memcpy(key + n, k1, sizeof *k1 * (size_t)nk);
        n += nk;
        key[n++] = (uint64_t)(uint16_t)w->src[m][0] | (uint64_t)(uint16_t)w->src[m][1] << 16 |
                   (uint64_t)(uint16_t)w->src[m][2] << 32 | (uint64_t)!w->freed[m] << 48;
    }
    return n;
}

static uint64_t key_hash(const uint64_t *key, int n)
{
    uint64_t h = 0x65616765ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++) h = (h ^ key[i]) * 0x9e3779b97f4a7c15ull + (h >> 29);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return (h ^ (h >> 29)) | 1;
}

static void entry_free(vf_ef_entry *ent)
{
    if (!ent) return;
    vf_kernel_free(&ent->k);
    free(ent->key);
    free(ent);
}

static void job_join(vf_ef_job *j)
{
    if (!j->active) return;
    pthread_join(j->thread, NULL);
    j->active = false;
}

static bool compiling(const vf_eager_fuse *w, const vf_ef_entry *ent)
{
    for (int i = 0; i < VF_EF_JOBS; i++)
        if (w->jobs[i].active && w->jobs[i].ent == ent) return true;
    return false;
}

static void entries_clear(vf_eager_fuse *w)
{
    for (int i = 0; i < VF_EF_JOBS; i++) { /* their entries go: wait for them and drop what they made */
        vf_ef_job *j = &w->jobs[i];
        if (!j->active) continue;
        job_join(j);
        free(j->out.words);
        memset(&j->out, 0, sizeof j->out);
    }
    for (size_t i = 0; i < w->map.cap; i++)
        if (w->map.keys[i]) entry_free(w->map.vals[i]);
    vf_hmap_free(&w->map);
    memset(&w->map, 0, sizeof w->map);
}

static vf_ef_entry *entry_get(vf_eager_fuse *w, const uint64_t *key, int n)
{
    uint64_t h = key_hash(key, n);
    vf_ef_entry *ent = vf_hmap_get(&w->map, h);
    if (ent && ent->n_key == n && memcmp(ent->key, key, sizeof *key * (size_t)n) == 0) return ent;
    if (ent && compiling(w, ent)) return NULL;   /* a collision with one compiling: tier 0 */
    if (w->map.n >= VF_EF_MAX_KEYS) {
        entries_clear(w);
        ent = NULL;
    }
    vf_ef_entry *fresh = vf_calloc(1, sizeof *fresh);
    uint64_t *copy = vf_malloc(sizeof *key * (size_t)n);
    if (!fresh || !copy || !vf_hmap_put(&w->map, h, fresh)) {
        free(fresh);
        free(copy);
        return NULL;   /* out of host memory: this flush runs at tier 0 */
    }
    entry_free(ent);   /* a hash collision: the newer key wins */
    memcpy(copy, key, sizeof *key * (size_t)n);
    fresh->key = copy;
    fresh->n_key = n;
    return fresh;
}

/* ---- the fused kernel ---------------------------------------------------------- */

/* The window as a fused ELEMENTWISE group: its inputs, then the results
   still held (in op order). */
static void window_group(const vf_eager_fuse *w, vf_fused_member *mem, vf_tref *tens, vf_fused_group *g)
{
    int n_out = 0;
    for (int i = 0; i < w->n_in; i++) tens[i] = w->in[i];
    for (int m = 0; m < w->n; m++) {
        for (int k = 0; k < 3; k++) mem[m].in[k] = k < w->ops[m].n_in ? w->src[m][k] : 0;
        mem[m].out = -1;
        if (!w->freed[m]) {
            mem[m].out = w->n_in + n_out;
            tens[w->n_in + n_out++] = w->ops[m].out;
        }
    }
    *g = (vf_fused_group){.kind = VF_FUSED_ELEMENTWISE, .n_members = w->n, .execs = w->ops, .members = mem,
                          .center = -1, .n_inputs = w->n_in, .n_outputs = n_out, .tensors = tens};
}

static void note(vf_vk_runtime *rt, const char *what, const char *name, const vf_err *e)
{
    if (rt->shaders.log_info)
        fprintf(stderr, "vkfuse: eager fusion: %s %s%s%s\n", what, name, e && e->status ? ": " : "",
                e && e->status ? e->message : "");
}

/* Compiles (through the caches) and makes the pipeline of ent's kernel;
   a failure leaves the key at tier 0 and is not the user's error. */
static void make_pipeline(vf_vk_runtime *rt, vf_ef_entry *ent)
{
    vf_status before = rt->err->status;
    vf_dispatch *d = &ent->k.step[0];
    vf_status s = vf_vk_runtime_dispatch_pipeline(rt, d, &ent->pipe);
    if (s) {
        note(rt, "no fused kernel for", d->name, rt->err);
        if (!before && !rt->dev.lost) vf_err_clear(rt->err);
        ent->state = VF_EF_FAILED;
    } else {
        ent->spirv = vf_vk_shader_key(&rt->shaders, d->glsl);
        ent->state = VF_EF_READY;
        rt->ef.swaps++;
        note(rt, "swapped in", d->name, NULL);
    }
    free(d->glsl);
    d->glsl = NULL;
}

static void *compile_thread(void *arg)
{
    vf_ef_job *j = arg;
    vf_vk_shader_compile_raw(j->compiler, j->target_env_version, j->glsl, j->name, &j->out);
    j->out.key = j->key;
    atomic_store_explicit(&j->done, true, memory_order_release);
    return NULL;
}

/* Background compiles that finished: the SPIR-V goes to the shader cache
   (counted and reported there, as if compiled now), then the pipeline. */
static void job_poll(vf_vk_runtime *rt)
{
    for (int i = 0; i < VF_EF_JOBS; i++) {
        vf_ef_job *j = &rt->ef.jobs[i];
        if (!j->active || !atomic_load_explicit(&j->done, memory_order_acquire)) continue;
        job_join(j);
        if (!vf_vk_shaders_add_ahead(&rt->shaders, &j->out)) {
            free(j->out.words);   /* compiled again by make_pipeline */
            memset(&j->out, 0, sizeof j->out);
        }
        make_pipeline(rt, j->ent);
    }
}

/* The K-th flush of a key: its kernel is generated here; compiled here
   when a cache holds it or threads are off, else on a thread. With every
   job slot busy nothing is done: the next flush tries again. */
static void start_kernel(vf_vk_runtime *rt, vf_ef_entry *ent)
{
    vf_eager_fuse *w = &rt->ef;
    vf_ef_job *j = NULL;
    for (int i = 0; i < VF_EF_JOBS && !j; i++)
        if (!w->jobs[i].active) j = &w->jobs[i];
    if (!j) return;
    vf_fused_member mem[VF_EF_MAX_OPS];
    vf_tref tens[VF_EF_MAX_TENSORS];
    vf_fused_group g;
    window_group(w, mem, tens, &g);
    vf_err local = {0};
    if (vf_codegen_group(&g, &rt->dev.caps, &ent->k, &local) || ent->k.n_steps != 1 || ent->k.scratch_bytes) {
        note(rt, "no fused kernel:", "", &local);
        vf_kernel_free(&ent->k);
        ent->state = VF_EF_FAILED;
        return;
    }
    vf_dispatch *d = &ent->k.step[0];
    uint64_t key = vf_vk_shader_key(&rt->shaders, d->glsl);
    if (rt->shaders.compile_threads <= 1 || vf_vk_shader_on_hand(&rt->shaders, key)) {
        make_pipeline(rt, ent);
        return;
    }
    vf_status before = rt->err->status;
    if (vf_vk_shaders_compiler(&rt->shaders) != VF_OK) {
        if (!before) vf_err_clear(rt->err);
        vf_kernel_free(&ent->k);
        ent->state = VF_EF_FAILED;
        return;
    }
    j->ent = ent;
    j->compiler = rt->shaders.compiler;
    j->target_env_version = rt->shaders.target_env_version;
    j->glsl = d->glsl;
    j->key = key;
    snprintf(j->name, sizeof j->name, "%s", d->name);
    memset(&j->out, 0, sizeof j->out);
    atomic_store(&j->done, false);
    if (pthread_create(&j->thread, NULL, compile_thread, j) != 0) {
        make_pipeline(rt, ent);   /* no thread: compile here */
        return;
    }
    j->active = true;
    ent->state = VF_EF_COMPILING;
}

/* One dispatch of ent's kernel over the window's tensors. */
static vf_status run_fused(vf_vk_runtime *rt, const vf_ef_entry *ent)
{
    vf_eager_fuse *w = &rt->ef;
    vf_fused_member mem[VF_EF_MAX_OPS];
    vf_tref tens[VF_EF_MAX_TENSORS];
    vf_fused_group g;
    window_group(w, mem, tens, &g);
    const vf_dispatch *st = &ent->k.step[0];
    vf_vk_bind binds[VF_KERNEL_MAX_BINDINGS];
    for (int j = 0; j < st->n_bindings; j++) {
        int t = st->binding[j] - VF_BIND_GROUP;
        if (t < 0 || t >= g.n_inputs + g.n_outputs)
            return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "eager fusion: kernel %s binding %d refers to "
                              "tensor %d of a group of %d", st->name, j, t, g.n_inputs + g.n_outputs);
        const vf_tref *r = &tens[t];
        int64_t numel = 1;
        for (int d = 0; d < r->rank; d++) numel *= r->shape[d];
        VkDeviceSize want = ((VkDeviceSize)numel * vf_dtype_size(r->dtype) + 15) & ~(VkDeviceSize)15;
        VkDeviceSize room = r->buf->size > r->offset ? r->buf->size - r->offset : 0;
        binds[j] = (vf_vk_bind){.buf = r->buf, .offset = r->offset, .range = want < room ? want : room,
                                .access = t < g.n_inputs ? VF_VK_READ : VF_VK_WRITE};
    }
    vf_vk_shader_hit(&rt->shaders, ent->spirv);
    vf_vk_dispatch_info di = {.pipe = ent->pipe, .n_bindings = st->n_bindings, .bindings = binds, .push = st->push,
                              .push_size = st->push_size, .groups = {st->groups[0], st->groups[1], st->groups[2]},
                              .name = st->name};
    vf_status s = vf_vk_sched_dispatch(&rt->sched, &di);
    if (!s) {
        w->fused_windows++;
        w->fused_ops += w->n;
    }
    return s;
}

/* ---- flush ------------------------------------------------------------------------ */

vf_status vf_ef_flush(vf_vk_runtime *rt)
{
    vf_eager_fuse *w = &rt->ef;
    if (w->n == 0) return VF_OK;
    vf_status s = VF_OK;
    if (rt->dev.lost) {
        s = vf_vk_lost(&rt->dev, rt->err, "running queued ops");
    } else {
        job_poll(rt);
        uint64_t key[VF_EF_MAX_OPS * (VF_VK_MEMO_WORDS + 2) + 1];
        int nk = window_key(w, key, (int)(sizeof key / sizeof key[0]));
        vf_ef_entry *ent = nk && w->n > 1 ? entry_get(w, key, nk) : NULL;
        if (ent && ent->state == VF_EF_NEW && ++ent->seen >= VF_EF_COMPILE_AFTER) start_kernel(rt, ent);
        if (ent && ent->state == VF_EF_READY) {
            s = run_fused(rt, ent);
        } else {
            for (int m = 0; m < w->n && !s; m++) s = vf_vk_exec_now(rt, &w->ops[m]);
        }
    }
    /* Recorded (or failed): the memory held for the window can go, its
       reuse deferred by the buffers' last use as any free's. */
    w->n = w->n_in = 0;
    int n_later = w->n_later;
    w->n_later = 0;
    for (int i = 0; i < n_later; i++) vf_vk_mem_free(&rt->mem, w->later[i], rt->sched.completed);
    return s ? s : rt->err->status;
}

void vf_ef_destroy(vf_vk_runtime *rt)
{
    vf_eager_fuse *w = &rt->ef;
    for (int i = 0; i < w->n_later; i++) vf_vk_mem_free(&rt->mem, w->later[i], rt->sched.completed);
    w->n = w->n_in = w->n_later = 0;
    entries_clear(w);
}
