/* The context: backend choice (the device backend and the host backend of
 * folding and VKFUSE_CHECK), the sticky error, environment knobs. */
#include "api/api.h"
#include "api/hooks.h"
#include "util/env.h"
#include "util/fault.h"
#include "util/last_error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

vf_status vf_fail(vf_context *ctx, vf_status status, const char *fmt, ...)
{
    VF_ASSERT_LOCKED(ctx);
    va_list ap;
    va_start(ap, fmt);
    vf_err_vset(&ctx->err, status, fmt, ap);
    va_end(ap);
    return status;
}

vf_status vf_backend_failed(vf_context *ctx, vf_status status, const char *fmt, ...)
{
    VF_ASSERT_LOCKED(ctx);
    va_list ap;
    va_start(ap, fmt);
    status = vf_err_vbackend(&ctx->err, &ctx->be_err, status, fmt, ap);
    va_end(ap);
    return status;
}

/* Messages the backend recorded by itself (e.g. the validation layer). */
static void pick_up_backend_errors(vf_context *ctx)
{
    if (ctx->be_err.status != VF_OK) vf_backend_failed(ctx, VF_OK, "%s backend", ctx->be.iface ? ctx->be.iface->name : "?");
}

/* A create on ctx failed: its reason becomes the calling thread's last
   error as well (vkfuse.h, "Failed creates"), readable without the
   context. status: the one the create returns (VF_OK for a create that
   returns NULL: the context's). Returns NULL, for `return vf_create_failed(...)`. */
void *vf_create_failed(vf_context *ctx, vf_status status, const char *who)
{
    if (!ctx) {
        vf_last_error_set(status ? status : VF_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL; pass a context vf_context_create made", who);
        return NULL;
    }
    VF_LOCKED(ctx);
    pick_up_backend_errors(ctx);
    vf_last_error_take(status, &ctx->err, who);
    return NULL;
}

/* ---- the environment: every getenv of the library -------------------------- */

static bool env_true(const char *name) { return vf_env_on(getenv(name)); }
static bool env_log_info(void) { return vf_env_log_info(getenv("VKFUSE_LOG")); }
static const char *env_set(const char *name) { return vf_env_value(getenv(name)); }

/* The frontend's knobs (vf_options). */
static void read_options(vf_options *o)
{
    const char *check = getenv("VKFUSE_CHECK");
    const char *dump = env_set("VKFUSE_DUMP"), *tmp = env_set("TMPDIR");
    o->eager = env_true("VKFUSE_EAGER");
    o->log_info = env_log_info();
    o->no_plan = getenv("VKFUSE_NO_PLAN") != NULL;
    const char *fusion = getenv("VKFUSE_FUSION");
    o->fusion_off = fusion && strcmp(fusion, "0") == 0;
    o->check = check && *check && strcmp(check, "0") != 0;
    snprintf(o->dump_dir, sizeof o->dump_dir, "%s", dump ? dump : "");
    snprintf(o->check_root, sizeof o->check_root, "%s", dump ? dump : tmp ? tmp : "/tmp");
}

/* No context: the environment is read here, as a context would. */
int vf_devices(vf_device_info *out, int max, char *errbuf, size_t errlen)
{
    vf_vk_options o = {.device_index = -1, .device_env = getenv("VKFUSE_DEVICE")};
    vf_vk_options_read(&o, getenv);
    return vf_vulkan_devices(&o, out, max, errbuf, errlen);
}

/* VKFUSE_CACHE_DIR, else $XDG_CACHE_HOME/vkfuse, else ~/.cache/vkfuse. */
static void resolve_cache_dir(const vf_context_desc *d, char *out, size_t len)
{
    const char *env = getenv("VKFUSE_CACHE_DIR");
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    out[0] = '\0';
    if (d->cache_dir) snprintf(out, len, "%s", d->cache_dir);
    else if (env) snprintf(out, len, "%s", env);
    else if (xdg && *xdg) snprintf(out, len, "%s/vkfuse", xdg);
    else if (home && *home) snprintf(out, len, "%s/.cache/vkfuse", home);
}

/* why: the reason AUTO did not take Vulkan ("" or NULL: the CPU was asked
   for); no_gpu: there are Vulkan devices, all drivers on the CPU. */
static vf_status make_cpu(vf_context *ctx, const char *why, bool no_gpu)
{
    vf_status s = vf_cpu_backend_create_opts(&ctx->be_err, &(vf_cpu_options){ctx->opt.cpu_threads, ctx->opt.cpu_dnnl_off},
                                             &ctx->be);
    if (s != VF_OK) return s;
    ctx->kind = VF_BACKEND_CPU;
    char blas[256]; /* which OpenBLAS kernels run, and whose copy (cpu/blas.h) */
    vf_cpu_blas_describe(blas, sizeof blas);
    if (why && *why)
        snprintf(ctx->device_name, sizeof ctx->device_name, "CPU (OpenBLAS; %s%.200s; %s)", no_gpu ? "" : "no Vulkan device: ",
                 why, blas);
    else
        snprintf(ctx->device_name, sizeof ctx->device_name, "CPU (OpenBLAS; %s)", blas);
    return VF_OK;
}

/* Whether the user named a device (desc->pick_device or VKFUSE_DEVICE). */
static bool device_named(const vf_context_desc *d)
{
    return d->pick_device ? d->device_index >= 0 : env_set("VKFUSE_DEVICE") != NULL;
}

/* gpu_only: the default (AUTO, no device named) takes a GPU or nothing. */
static vf_status make_vulkan(vf_context *ctx, const vf_context_desc *d, bool gpu_only)
{
    vf_vk_options opt = {
        .device_index = d->pick_device ? d->device_index : -1,
        .device_env = d->pick_device ? NULL : getenv("VKFUSE_DEVICE"),
        .gpu_only = gpu_only,
        .validation = d->validation || env_true("VKFUSE_VALIDATION"),
        .profile = ctx->profile,
        .cache_dir = ctx->cache_dir,
    };
    vf_vk_options_read(&opt, getenv);
    opt.memory_limit_bytes = d->device_memory_limit;
    const char *ef = getenv("VKFUSE_EAGER_FUSE");
    opt.eager_fuse = !d->eager_fuse_off && !(ef && strcmp(ef, "0") == 0);
    vf_status s = vf_vulkan_backend_create(&ctx->be_err, &opt, &ctx->be, ctx->device_name, sizeof ctx->device_name);
    if (s == VF_OK) ctx->kind = VF_BACKEND_VULKAN;
    return s;
}

vf_host *vf_context_host(vf_context *ctx)
{
    if (ctx->host.be.iface) return &ctx->host;
    vf_err_clear(&ctx->host.err);
    return vf_cpu_backend_create_opts(&ctx->host.err, &(vf_cpu_options){ctx->opt.cpu_threads, ctx->opt.cpu_dnnl_off},
                                      &ctx->host.be) == VF_OK
               ? &ctx->host : NULL;
}

static vf_status fold_eval(void *self, const vf_graph *g, const vf_node *n, void *data, size_t bytes, vf_err *err)
{
    vf_context *ctx = self;
    vf_host *h = vf_context_host(ctx);
    if (!h) return vf_err_set(err, ctx->host.err.status, "%s", ctx->host.err.message);
    vf_evaluator ev = vf_host_evaluator(h);
    return ev.eval(ev.self, g, n, data, bytes, err);
}

vf_evaluator vf_context_evaluator(vf_context *ctx) { return (vf_evaluator){.eval = fold_eval, .self = ctx}; }

/* VKFUSE_BACKEND: VF_BACKEND_AUTO when unset or "auto"; -1 when not a
   backend's name. */
static int env_backend(void)
{
    const char *env = getenv("VKFUSE_BACKEND");
    if (!env || !*env || strcasecmp(env, "auto") == 0) return VF_BACKEND_AUTO;
    if (strcasecmp(env, "cpu") == 0) return VF_BACKEND_CPU;
    if (strcasecmp(env, "vulkan") == 0) return VF_BACKEND_VULKAN;
    return -1;
}

/* Picks and creates the backend of a new context (its lock held). AUTO
   takes the best GPU, else the CPU backend: a Vulkan driver that runs on
   the CPU (lavapipe, SwiftShader) only when asked for (VF_BACKEND_VULKAN,
   VKFUSE_BACKEND=vulkan, or a device named). */
static vf_status create_backend(vf_context *ctx, const vf_context_desc *d)
{
    vf_backend want = d->backend;
    if (want < VF_BACKEND_AUTO || want > VF_BACKEND_CPU)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                       "vf_context_create: backend %d is not a vf_backend; use VF_BACKEND_AUTO, "
                       "VF_BACKEND_VULKAN or VF_BACKEND_CPU", (int)want);
    if (want == VF_BACKEND_AUTO) {
        int e = env_backend();
        if (e < 0)
            return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                           "vf_context_create: VKFUSE_BACKEND=%s is not one of cpu, vulkan, auto", getenv("VKFUSE_BACKEND"));
        want = (vf_backend)e;
    }
    if (want == VF_BACKEND_CPU) return make_cpu(ctx, NULL, false);

    /* Vulkan, or AUTO: try a GPU and fall back to the CPU with the reason. */
    bool picked = device_named(d);
    vf_status s = make_vulkan(ctx, d, want == VF_BACKEND_AUTO && !picked);
    if (s == VF_OK) return VF_OK;
    char why[sizeof ctx->be_err.message];
    snprintf(why, sizeof why, "%s", ctx->be_err.message);
    vf_err_clear(&ctx->be_err);
    /* a bad setting (VKFUSE_TEST_CAPS=...) is the user's to fix, not a
       missing driver: no silent fallback to the CPU */
    if (s == VF_ERROR_INVALID_ARGUMENT) return vf_fail(ctx, s, "vf_context_create: %s", why);
    /* A device the user named (VKFUSE_DEVICE, or desc->pick_device) that
       cannot be had is an error even under AUTO: running on the CPU
       instead would hide a typo in the name or index. */
    if (want == VF_BACKEND_AUTO && picked) {
        snprintf(ctx->device_name, sizeof ctx->device_name, "none (the requested device is unavailable)");
        return vf_fail(ctx, s, "vf_context_create: %s; name an existing device (vkfuse devices lists them), or "
                       "unset VKFUSE_DEVICE for the best one", why);
    }
    if (want == VF_BACKEND_VULKAN) {
        snprintf(ctx->device_name, sizeof ctx->device_name, "none (Vulkan unavailable)");
        return vf_fail(ctx, s, "vf_context_create: VF_BACKEND_VULKAN requested but %s. Install a "
                       "Vulkan driver (e.g. mesa-vulkan-drivers) or use VF_BACKEND_AUTO / "
                       "VF_BACKEND_CPU", why);
    }
    /* VF_ERROR_UNSUPPORTED: no GPU, only drivers on the CPU (device_pick.h) */
    return make_cpu(ctx, why, s == VF_ERROR_UNSUPPORTED);
}

enum { VF_MAX_DEVICE_INFO = 16 }; /* VF_VK_MAX_PHYS: vf_vulkan_devices lists no more */

/* create_backend's choice for the all-zero desc, without a context: one
   vf_devices pass with the default's rule (gpu_only unless a backend or
   device is named). */
vf_backend vf_auto_backend(int *device, char *why, size_t whylen)
{
    char scratch[8];
    if (!why || !whylen) why = scratch, whylen = sizeof scratch;
    why[0] = '\0';
    if (device) *device = -1;
    int e = env_backend();
    if (e < 0) {
        snprintf(why, whylen, "VKFUSE_BACKEND=%s is not one of cpu, vulkan, auto (vf_context_create fails)",
                 getenv("VKFUSE_BACKEND"));
        return VF_BACKEND_AUTO;
    }
    if (e == VF_BACKEND_CPU) {
        snprintf(why, whylen, "VKFUSE_BACKEND=cpu");
        return VF_BACKEND_CPU;
    }
    const char *named = env_set("VKFUSE_DEVICE");
    vf_vk_options o = {.device_index = -1, .device_env = named, .gpu_only = e == VF_BACKEND_AUTO && !named};
    vf_vk_options_read(&o, getenv);
    vf_device_info *info = vf_calloc(VF_MAX_DEVICE_INFO, sizeof *info);
    if (!info) {
        snprintf(why, whylen, "out of host memory (malloc failed)");
        return VF_BACKEND_AUTO;
    }
    char err[1024] = "";
    int n = vf_vulkan_devices(&o, info, VF_MAX_DEVICE_INFO, err, sizeof err);
    int chosen = -1;
    for (int i = 0; i < n && i < VF_MAX_DEVICE_INFO; i++)
        if (info[i].chosen) chosen = i;
    vf_backend b = VF_BACKEND_CPU;
    if (chosen >= 0) {
        b = VF_BACKEND_VULKAN;
        if (device) *device = chosen;
        if (named)
            snprintf(why, whylen, "VKFUSE_DEVICE=%s names [%d] %s (%s)", named, chosen, info[chosen].name, info[chosen].type);
        else if (e == VF_BACKEND_VULKAN)
            snprintf(why, whylen, "VKFUSE_BACKEND=vulkan: [%d] %s (%s), the best Vulkan device", chosen,
                     info[chosen].name, info[chosen].type);
        else
            snprintf(why, whylen, "[%d] %s, the best GPU (%s; discrete > integrated > virtual)", chosen,
                     info[chosen].name, info[chosen].type);
    } else if (named || e == VF_BACKEND_VULKAN) {
        b = VF_BACKEND_AUTO; /* asked for Vulkan that cannot be had: vf_context_create fails */
        snprintf(why, whylen, "%s (vf_context_create fails)", err[0] ? err : "no Vulkan device");
    } else if (n > 0) {
        snprintf(why, whylen, "%s", err); /* only drivers on the CPU (device_pick.c says so) */
    } else {
        snprintf(why, whylen, "no Vulkan device: %s", err[0] ? err : "none found");
    }
    free(info);
    return b;
}

vf_status vf_context_create(const vf_context_desc *desc, vf_context **out)
{
    static const vf_context_desc defaults = {0};
    const vf_context_desc *d = desc ? desc : &defaults;
    if (!out) return vf_last_error_set(VF_ERROR_INVALID_ARGUMENT, "vf_context_create: out is NULL; pass the "
                                       "address of a vf_context * to receive the context");
    *out = NULL;
    static const char oom[] = "vf_context_create: out of host memory (malloc failed)";
    vf_context *ctx = vf_calloc(1, sizeof *ctx);
    if (!ctx) return vf_last_error_set(VF_ERROR_OUT_OF_MEMORY, oom);
    ctx->scopes = vf_calloc(8, sizeof *ctx->scopes);
    if (!ctx->scopes) {
        free(ctx);
        return vf_last_error_set(VF_ERROR_OUT_OF_MEMORY, oom);
    }
    vf_ctx_lock_init(&ctx->lock);
    ctx->cap_scopes = 8;
    ctx->n_scopes = 1; /* the root scope */
    vf_handles_init(&ctx->tensor_slots, VF_HANDLE_TENSOR, sizeof(vf_tensor));
    /* the slots of tapes and generators get their size from their stage,
       with the first one made (tape.c, generator.c) */
    vf_handles_init(&ctx->tape_slots, VF_HANDLE_TAPE, 0);
    vf_handles_init(&ctx->generator_slots, VF_HANDLE_GENERATOR, 0);
    resolve_cache_dir(d, ctx->cache_dir, sizeof ctx->cache_dir);
    ctx->profile = d->profile || env_true("VKFUSE_PROFILE");
    read_options(&ctx->opt);
    vf_ctx_lock(ctx); /* no other thread knows ctx yet; the internal helpers check the lock is held */
    /* VKFUSE_FAULT / VKFUSE_FAULT_COUNT (util/fault.h), read once per process */
    vf_status s = vf_fault_setup(getenv("VKFUSE_FAULT"), getenv("VKFUSE_FAULT_COUNT"), &ctx->err);
    /* VKFUSE_THREADS is checked whatever the backend: a Vulkan context's
       host backend (folding, VKFUSE_CHECK) uses it too */
    if (s == VF_OK) s = vf_cpu_threads_parse(getenv("VKFUSE_THREADS"), &ctx->opt.cpu_threads, &ctx->err);
    const char *dnnl = getenv("VKFUSE_CPU_DNNL");
    ctx->opt.cpu_dnnl_off = dnnl && strcmp(dnnl, "0") == 0;
    if (s == VF_OK) s = create_backend(ctx, d);
    if (s != VF_OK) {
        /* one convention for failed creates (vkfuse.h): nothing is handed
           out, nothing kept; the reason outlives the context */
        pick_up_backend_errors(ctx);
        vf_last_error_take(s, &ctx->err, "vf_context_create");
        vf_ctx_unlock(ctx);
        vf_context_destroy(ctx);
        return s;
    }
    vf_ctx_unlock(ctx);
    *out = ctx;
    return s;
}

void vf_context_on_destroy(vf_context *ctx, vf_on_destroy which, void (*fn)(vf_context *ctx))
{
    ctx->on_destroy[which] = fn;
}

/* Not VF_LOCKED: ctx is freed before the function returns. Another thread
   still using ctx is the caller's bug (as with free); this thread's own
   open scopes and tapes end here, with the lock holds they kept. */
void vf_context_destroy(vf_context *ctx)
{
    if (!ctx) return;
    vf_ctx_lock(ctx);
    if (ctx->be.iface) ctx->be.iface->sync(ctx->be.self);
    /* What the stages registered, in the order of vf_on_destroy: functions
       first (their plans and captures need the backend and the tensors;
       they stay the user's, orphaned, and vf_function_destroy frees them
       later), user kernels and elementwise ops, tapes. Then tensors, the
       backend, the handle slabs. */
    for (int i = 0; i < VF_ON_DESTROY_COUNT; i++)
        if (ctx->on_destroy[i]) ctx->on_destroy[i](ctx);
    vf_tensor_free_all(ctx);
    for (int i = 0; i < ctx->cap_scopes; i++) free(ctx->scopes[i].items);
    free(ctx->scopes);
    if (ctx->be.iface) ctx->be.iface->destroy(ctx->be.self);
    if (ctx->host.be.iface) ctx->host.be.iface->destroy(ctx->host.be.self);
    vf_handles_free(&ctx->tensor_slots);
    vf_handles_free(&ctx->tape_slots);
    vf_handles_free(&ctx->generator_slots);
    int n_queued; /* releases other threads queued: their tensors went above */
    free(vf_ctx_take_releases(ctx, &n_queued));
    while (vf_ctx_lock_depth(ctx) > 0) vf_ctx_unlock(ctx);
    vf_ctx_lock_destroy(&ctx->lock);
    free(ctx);
    vf_fault_report(); /* VKFUSE_FAULT_COUNT: the range of a sweep */
}

bool vf_context_lost(vf_context *ctx)
{
    if (!ctx) return false;
    VF_LOCKED(ctx);
    return ctx->be.iface && ctx->be.iface->lost && ctx->be.iface->lost(ctx->be.self);
}

vf_status vf_status_get(vf_context *ctx)
{
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    VF_LOCKED(ctx);
    pick_up_backend_errors(ctx);
    return ctx->err.status;
}

/* The message is copied, under the lock, into a buffer of the calling
   thread: another thread's vf_error_clear or new error cannot change the
   string while the caller reads it. Valid until this thread's fourth next
   call (vkfuse.h). */
const char *vf_error_message(vf_context *ctx)
{
    /* a few, so that printf("%s %s", vf_error_message(a), vf_error_message(b)) works */
    static _Thread_local char copies[4][sizeof ctx->err.message];
    static _Thread_local unsigned next;
    if (!ctx) return vf_last_error(); /* after a failed vf_context_create (vkfuse.h) */
    VF_LOCKED(ctx);
    pick_up_backend_errors(ctx);
    char *copy = copies[next++ % 4];
    memcpy(copy, ctx->err.message, sizeof copies[0]);
    return copy;
}

void vf_error_clear(vf_context *ctx)
{
    if (!ctx) return;
    VF_LOCKED(ctx);
    vf_err_clear(&ctx->err);
    vf_err_clear(&ctx->be_err);
}

const char *vf_device_name(vf_context *ctx) { return ctx ? ctx->device_name : "(no context)"; }

vf_backend vf_backend_get(vf_context *ctx) { return ctx ? ctx->kind : VF_BACKEND_AUTO; }

vf_status vf_context_sync(vf_context *ctx)
{
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    VF_LOCKED(ctx);
    if (ctx->be.iface) {
        vf_status s = ctx->be.iface->sync(ctx->be.self);
        if (s != VF_OK) vf_backend_failed(ctx, s, "vf_context_sync");
    }
    return vf_status_get(ctx);
}

vf_status vf_context_trim(vf_context *ctx)
{
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    VF_LOCKED(ctx);
    if (ctx->be.iface && ctx->be.iface->trim) {
        vf_status s = ctx->be.iface->trim(ctx->be.self);
        if (s != VF_OK) vf_backend_failed(ctx, s, "vf_context_trim");
    }
    /* the host backend (folding, VKFUSE_CHECK) caches buffers too */
    if (ctx->host.be.iface && ctx->host.be.iface->trim) ctx->host.be.iface->trim(ctx->host.be.self);
    return vf_status_get(ctx);
}

vf_status vf_context_stats_get(vf_context *ctx, vf_context_stats *out)
{
    if (!ctx || !out) return VF_ERROR_INVALID_ARGUMENT;
    VF_LOCKED(ctx);
    memset(out, 0, sizeof *out);
    if (ctx->be.iface && ctx->be.iface->stats) ctx->be.iface->stats(ctx->be.self, out);
    return VF_OK;
}

bool vf_context_tracing(vf_context *ctx)
{
    VF_LOCKED(ctx);
    return ctx && ctx->trace;
}
