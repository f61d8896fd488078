/* Tiered matmul kernels of a recorded plan (plan_internal.h).
 *
 * llvmpipe (lavapipe) compiles a pipeline to machine code when it first
 * dispatches it, inside the queue submission, and the CPU profile's tuned
 * matmul kernel (16 x 16 register blocks, unrolled: codegen_matmul.c)
 * takes it about a second where the 4 x 4 block takes a tenth of that;
 * shaderc too takes ten times longer on it. So on CPU devices a plan is
 * built with every matmul kernel (alone or with its fused epilogue) in the
 * quick tier, the 4 x 4 block, and the tuned variants are prepared on a
 * thread of the plan's own, one after the other: shaderc's SPIR-V, the
 * pipeline on the plan's device, and the driver's compile, which llvmpipe
 * does at a pipeline's first dispatch on the queue that runs it: so the
 * thread dispatches the variant once on a second device (tier_warm.h),
 * and Mesa's disk cache carries the machine code to the plan's device.
 * At each later run that finds the next one ready, it is swapped in (its
 * pipeline adopted as made, the plan's steps changed, the command buffer
 * recorded again; vf_context_stats.tier_swaps): no call makes a tuned
 * pipeline or waits for a compile.
 * Both tiers run the same sums in the same order per element (a lane's
 * block only changes which elements it holds), so results do not change
 * across a swap.
 *
 * A tuned variant whose SPIR-V is already on hand (vkfuse's shader cache
 * on disk: an earlier process ran this plan and, most likely, the driver's
 * cache holds its machine code too) is used from the start. Guarded steps
 * (vf_cond branches) stay as built: their workgroup counts live in the
 * guard table. Off with VKFUSE_TIERED=0, with VKFUSE_COMPILE_THREADS=1 and
 * on GPUs (their tiled matmul has no cheaper variant). */
#include "vulkan/plan_internal.h"
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/tier_warm.h"
#include "util/clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

bool vf_vk_plan_tiered(const vf_vk_runtime *rt)
{
    return rt->tiered;
}

vf_device_caps vf_vk_plan_quick_caps(const vf_vk_runtime *rt)
{
    vf_device_caps c = rt->dev.caps;
    c.matmul_quick = rt->tiered;
    return c;
}

static bool has_matmul(const vf_plan_desc *d, int x, const vf_plan_fused *f)
{
    int n = f ? f->n_execs : 1;
    for (int i = 0; i < n; i++)
        if (d->execs[x + i].op == VF_OP_MATMUL) return true;
    return false;
}

/* Whether the tuned kernel is the quick one with other code only. */
static bool same_shape(const vf_gen_kernel *q, const vf_gen_kernel *t)
{
    if (q->n_steps != t->n_steps || q->scratch_bytes != t->scratch_bytes) return false;
    bool differs = false;
    for (int i = 0; i < q->n_steps; i++) {
        const vf_dispatch *a = &q->step[i], *b = &t->step[i];
        if (!a->glsl || !b->glsl || a->n_bindings != b->n_bindings || a->push_size != b->push_size ||
            memcmp(a->binding, b->binding, sizeof a->binding))
            return false;
        differs |= strcmp(a->glsl, b->glsl) != 0;
    }
    return differs;
}

/* Puts tier t's tuned kernel into the plan's steps; false (and nothing
   changed) when a pipeline cannot be made. The pipelines the thread made
   are adopted as they are (no driver call here); a step it did not make
   (its SPIR-V was on hand) gets its pipeline made here. */
static bool swap_in(vf_vk_runtime *rt, vf_plan *p, int t)
{
    plan_tier *tr = &p->tiers.t[t];
    const vf_vk_pipeline *pipe[VF_KERNEL_MAX_STEPS] = {0};
    vf_status before = rt->err->status;
    for (int i = 0; i < tr->tuned.n_steps; i++) {
        if (tr->compile[i] && tr->out[i].status == VF_OK && tr->out[i].words &&
            !vf_vk_shaders_add_ahead(&rt->shaders, &tr->out[i])) {
            free(tr->out[i].words); /* out of memory: compiled again below */
            tr->out[i].words = NULL;
        }
        VkPipeline made = tr->made[i];
        tr->made[i] = VK_NULL_HANDLE; /* the runtime's now, kept or destroyed */
        vf_status s = made ? vf_vk_runtime_dispatch_adopt(rt, &tr->tuned.step[i], made, tr->layout[i].layout, &pipe[i])
                           : vf_vk_runtime_dispatch_pipeline(rt, &tr->tuned.step[i], &pipe[i]);
        if (s != VF_OK) {
            if (!before) vf_err_clear(rt->err); /* the quick kernel stays, and works */
            return false;
        }
        if (made && pipe[i]->pipeline == made) {
            rt->tier_made_ahead++;
            rt->tier_warmed += tr->warmed[i];
        }
    }
    for (int i = 0; i < p->n_steps; i++) {
        const plan_step *ps = &p->steps[i];
        if (ps->tier == t && pipe[ps->tier_step]->layout != ps->pipe->layout)
            return false; /* the descriptor sets were made for the quick one's */
    }
    for (int i = 0; i < p->n_steps; i++) {
        plan_step *ps = &p->steps[i];
        if (ps->tier != t) continue;
        const vf_dispatch *st = &tr->tuned.step[ps->tier_step];
        ps->pipe = pipe[ps->tier_step];
        memcpy(ps->push, st->push, sizeof ps->push);
        ps->push_size = st->push_size;
        memcpy(ps->groups, st->groups, sizeof ps->groups);
    }
    return true;
}

vf_status vf_vk_plan_tier_add(vf_vk_runtime *rt, vf_plan *p, const vf_plan_desc *d, int x, const vf_plan_fused *f,
                              const vf_gen_kernel *quick, int first)
{
    if (!rt->tiered || !has_matmul(d, x, f) || first + quick->n_steps != p->n_steps) return VF_OK;
    for (int i = first; i < p->n_steps; i++)
        if (p->steps[i].pred >= 0) return VF_OK; /* guarded: see the top of this file */
    vf_gen_kernel tuned = {0};
    vf_err local = {0};
    vf_status s;
    if (f) {
        vf_fused_group grp = f->group; /* its members: the plan's execs */
        grp.execs = d->execs + f->first_exec;
        s = vf_codegen_group(&grp, &rt->dev.caps, &tuned, &local);
    } else {
        s = vf_codegen_exec(&d->execs[x], &rt->dev.caps, &tuned, &local);
    }
    if (s || !same_shape(quick, &tuned)) { /* no other variant (a small product): nothing to swap */
        vf_kernel_free(&tuned);
        return VF_OK;
    }
    plan_tier *grown = realloc(p->tiers.t, (size_t)(p->tiers.n + 1) * sizeof *grown);
    if (!grown) {
        vf_kernel_free(&tuned);
        return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    }
    p->tiers.t = grown;
    plan_tier *tr = &grown[p->tiers.n];
    memset(tr, 0, sizeof *tr);
    tr->tuned = tuned;
    int t = p->tiers.n++;
    for (int i = first; i < p->n_steps; i++) p->steps[i].tier = t, p->steps[i].tier_step = i - first;
    return VF_OK;
}

/* On the thread: step i's pipeline on the plan's device, with the quick
   kernel's layout; VK_NULL_HANDLE when it cannot be made (the swap then
   tries again on the calling thread, which reports nothing either). */
static VkPipeline make_pipeline(const plan_tiers *ts, const plan_tier *tr, int i)
{
    const vf_vk_device_table *vk = &ts->vkd;
    const vf_dispatch *st = &tr->tuned.step[i];
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                    .codeSize = tr->out[i].n_words * 4, .pCode = tr->out[i].words};
    VkShaderModule mod = VK_NULL_HANDLE;
    if (st->n_spec > VF_KERNEL_MAX_SPEC || vk->vkCreateShaderModule(ts->device, &mci, NULL, &mod) != VK_SUCCESS)
        return VK_NULL_HANDLE;
    VkSpecializationMapEntry map[VF_KERNEL_MAX_SPEC];
    for (uint32_t k = 0; k < st->n_spec; k++) map[k] = (VkSpecializationMapEntry){k, 4 * k, 4};
    VkSpecializationInfo spec = {.mapEntryCount = st->n_spec, .pMapEntries = map, .dataSize = 4 * (size_t)st->n_spec,
                                 .pData = st->spec};
    VkComputePipelineCreateInfo cci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = mod, .pName = "main", .pSpecializationInfo = st->n_spec ? &spec : NULL},
        .layout = tr->layout[i].layout};
    VkPipeline pipe = VK_NULL_HANDLE;
    /* the pipeline cache is internally synchronized (made without
       VK_PIPELINE_CACHE_CREATE_EXTERNALLY_SYNCHRONIZED_BIT) */
    if (vk->vkCreateComputePipelines(ts->device, ts->cache, 1, &cci, NULL, &pipe) != VK_SUCCESS)
        pipe = VK_NULL_HANDLE;
    vk->vkDestroyShaderModule(ts->device, mod, NULL);
    return pipe;
}

static bool stopping(const plan_tiers *ts)
{
    return atomic_load_explicit(&ts->stop, memory_order_relaxed);
}

/* Everything a tuned kernel needs before the calling thread can take it
   without a compile of any kind: shaderc's SPIR-V, the pipeline on the
   plan's device and, on the second device, the driver's machine code
   (which Mesa's disk cache then hands to the plan's device). */
static void *compile_thread(void *arg)
{
    vf_plan *p = arg;
    plan_tiers *ts = &p->tiers;
    vf_vk_warm warm = {0};
    for (int t = 0; t < ts->n; t++) {
        plan_tier *tr = &ts->t[t];
        for (int i = 0; i < tr->tuned.n_steps; i++) {
            if (!tr->compile[i] || stopping(ts)) continue;
            vf_vk_shader_compile_raw(ts->compiler, ts->target_env_version, tr->tuned.step[i].glsl,
                                     tr->tuned.step[i].name, &tr->out[i]);
            if (tr->out[i].status != VF_OK || !tr->out[i].words || stopping(ts)) continue;
            /* the driver's compiles wait for the first call's run: it
               has quick kernels of its own to compile, on the same cores */
            while (atomic_load_explicit(&ts->polls, memory_order_relaxed) < 2 && !stopping(ts))
                nanosleep(&(struct timespec){0, 2000000}, NULL);
            if (stopping(ts)) continue;
            int64_t t0 = vf_now_ns();
            tr->made[i] = make_pipeline(ts, tr, i);
            int64_t t1 = vf_now_ns();
            if (tr->made[i] && ts->warm && !stopping(ts))
                tr->warmed[i] = vf_vk_warm_run(&warm, ts->dev, &(vf_vk_warm_kernel){
                    .spirv = tr->out[i].words, .words = tr->out[i].n_words, .layout = &tr->layout[i],
                    .n_spec = tr->tuned.step[i].n_spec, .spec = tr->tuned.step[i].spec});
            if (ts->log)
                fprintf(stderr, "vkfuse: tuned kernel %s: pipeline made in %.1f ms%s %.1f ms (tier thread)\n",
                        tr->tuned.step[i].name, (double)(t1 - t0) / 1e6,
                        tr->warmed[i] ? ", the driver's compile on the second device in" : ", no warm-up;",
                        (double)(vf_now_ns() - t1) / 1e6);
        }
        while (ts->hold && atomic_load(ts->hold) && !stopping(ts)) /* the test hook: still compiling */
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        atomic_store_explicit(&tr->ready, true, memory_order_release); /* swapped while the next compiles */
    }
    vf_vk_warm_close(&warm);
    atomic_store_explicit(&ts->done, true, memory_order_release);
    return NULL;
}

static void tier_drop(vf_plan *p, int t)
{
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].tier == t) p->steps[i].tier = -1;
}

void vf_vk_plan_tier_start(vf_vk_runtime *rt, vf_plan *p)
{
    plan_tiers *ts = &p->tiers;
    int pending = 0;
    for (int t = 0; t < ts->n; t++) {
        plan_tier *tr = &ts->t[t];
        int n = 0;
        for (int i = 0; i < tr->tuned.n_steps; i++) {
            uint64_t key = vf_vk_shader_key(&rt->shaders, tr->tuned.step[i].glsl);
            tr->out[i].key = key;
            n += tr->compile[i] = !vf_vk_shader_on_hand(&rt->shaders, key);
        }
        if (n == 0) { /* compiled by an earlier process: the tuned kernel at once */
            tr->failed = !swap_in(rt, p, t);
            tr->swapped = !tr->failed;
            tier_drop(p, t);
            continue;
        }
        pending++;
        rt->tier_kernels++;
    }
    if (!pending) return;
    vf_status before = rt->err->status;
    if (vf_vk_shaders_compiler(&rt->shaders) != VF_OK) {
        if (!before) vf_err_clear(rt->err);
        for (int t = 0; t < ts->n; t++) ts->t[t].failed = true; /* the quick kernels stay */
        return;
    }
    ts->compiler = rt->shaders.compiler;
    ts->target_env_version = rt->shaders.target_env_version;
    ts->dev = &rt->dev;
    ts->vkd = rt->dev.vkd; /* a lost device's table may be abandoned meanwhile (loader.h) */
    ts->device = rt->dev.device;
    ts->cache = rt->pipes.cache;
    ts->warm = !rt->driver_cache_off; /* nothing would carry the driver's compile over */
    ts->hold = rt->dev.test.tier_hold;
    ts->log = rt->shaders.log_info;
    for (int i = 0; i < p->n_steps; i++) /* the layouts the tuned pipelines share, read by the thread */
        if (p->steps[i].tier >= 0) ts->t[p->steps[i].tier].layout[p->steps[i].tier_step] = *p->steps[i].pipe->layout;
    atomic_store(&ts->done, false);
    atomic_store(&ts->stop, false);
    atomic_store(&ts->polls, 0);
    if (pthread_create(&ts->thread, NULL, compile_thread, p) != 0) {
        ts->warm = false;
        ts->hold = NULL;
        atomic_store(&ts->polls, 2);
        compile_thread(p); /* no thread: compiled here, swapped from the next run on */
        return;
    }
    ts->thread_on = true;
}

void vf_vk_plan_tier_poll(vf_vk_runtime *rt, vf_plan *p)
{
    plan_tiers *ts = &p->tiers;
    if (!ts->n) return;
    if (atomic_load_explicit(&ts->polls, memory_order_relaxed) < 2)
        atomic_fetch_add_explicit(&ts->polls, 1, memory_order_relaxed); /* the first call's run is over */
    if (ts->thread_on && atomic_load_explicit(&ts->done, memory_order_acquire)) {
        pthread_join(ts->thread, NULL);
        ts->thread_on = false;
    }
    for (int t = 0; t < ts->n; t++) {
        plan_tier *tr = &ts->t[t];
        if (tr->swapped || tr->failed) continue;
        if (!atomic_load_explicit(&tr->ready, memory_order_acquire)) return; /* in the thread's order */
        for (int i = 0; i < tr->tuned.n_steps; i++)
            if (tr->compile[i] && tr->out[i].status) tr->failed = true; /* shaderc refused it: logged below */
        if (!tr->failed && swap_in(rt, p, t)) {
            tr->swapped = true;
            rt->tier_swaps++;
            p->valid = false; /* recorded again with the tuned kernel */
            if (rt->shaders.log_info)
                fprintf(stderr, "vkfuse: tuned kernel %s swapped in for its quick tier\n", tr->tuned.step[0].name);
        } else {
            tr->failed = true;
            if (rt->shaders.log_info)
                fprintf(stderr, "vkfuse: tuned kernel %s could not be made; its quick tier stays\n",
                        tr->tuned.step[0].name);
        }
        tier_drop(p, t);
        return; /* one per run: with Mesa's disk cache off each first dispatch compiles, in a run of its own */
    }
}

void vf_vk_plan_tier_free(vf_plan *p)
{
    plan_tiers *ts = &p->tiers;
    atomic_store(&ts->stop, true); /* a plan destroyed soon after its first call waits for one compile at most */
    if (ts->thread_on) pthread_join(ts->thread, NULL);
    ts->thread_on = false;
    for (int t = 0; t < ts->n; t++) {
        for (int i = 0; i < VF_KERNEL_MAX_STEPS; i++) {
            free(ts->t[t].out[i].words);
            if (ts->t[t].made[i]) ts->dev->vkd.vkDestroyPipeline(ts->dev->device, ts->t[t].made[i], NULL);
        }
        vf_kernel_free(&ts->t[t].tuned);
    }
    free(ts->t);
    ts->t = NULL;
    ts->n = 0;
}
