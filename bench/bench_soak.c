/* Soak (issue 15, not in CI): a traced MLP train step called many times,
 * then many small eager ops, printing at intervals what must stay flat:
 * device bytes in use and reserved, host RSS, the Vulkan memory blocks
 * alive, and the Vulkan objects created since the last line (every
 * vkCreate* / vkAllocate* call, counted by the fault counters of
 * util/fault.h, armed here for counting only).
 *
 *   bench_soak [--steps N] [--ops N] [--batch B] [--every N]
 *
 * Defaults: 20000 steps at batch 32, 1000000 eager ops, 10 lines each. */
#include "common.h"
#include "api/api.h"
#include "util/fault.h"
#include "vulkan/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

/* vkCreate* and vkAllocate* calls so far: a new Vulkan object each */
static int64_t objects_made(void)
{
    static const vf_fault_site made[] = {
        VF_FAULT_vkAllocateMemory,       VF_FAULT_vkCreateBuffer,          VF_FAULT_vkCreateShaderModule,
        VF_FAULT_vkCreatePipelineCache,  VF_FAULT_vkCreateComputePipelines, VF_FAULT_vkCreatePipelineLayout,
        VF_FAULT_vkCreateDescriptorSetLayout, VF_FAULT_vkCreateDescriptorPool, VF_FAULT_vkAllocateDescriptorSets,
        VF_FAULT_vkCreateCommandPool,    VF_FAULT_vkAllocateCommandBuffers, VF_FAULT_vkCreateFence,
        VF_FAULT_vkCreateQueryPool,
    };
    int64_t n = 0;
    for (size_t i = 0; i < sizeof made / sizeof *made; i++) n += vf_fault_count(made[i]);
    return n;
}

static int64_t last_made;

static void report(vf_context *ctx, const char *phase, int64_t done, double t0)
{
    vf_context_stats st;
    vf_context_stats_get(ctx, &st);
    vf_vk_runtime *rt = vf_vk_runtime_of(&ctx->be);
    int64_t made = objects_made();
    printf("%-6s %9lld  %7.1f s  device in use %9lld B  reserved %10lld B  RSS %7ld KiB (handle slabs %zu KiB)"
           "  blocks %3d  pipelines %4lld  Vulkan objects made since last line %lld\n",
           phase, (long long)done, vb_now() - t0, (long long)st.device_bytes_in_use,
           (long long)st.device_bytes_reserved, rss_kib(), vf_handles_resident_bytes(&ctx->tensor_slots) / 1024,
           rt ? rt->mem.n_blocks : -1,
           (long long)st.pipelines_created, (long long)(made - last_made));
    fflush(stdout);
    last_made = made;
}

int main(int argc, char **argv)
{
    long steps = 20000, ops = 1000000, batch = 32, lines = 10;
    for (int i = 1; i + 1 < argc; i += 2) {
        long v = atol(argv[i + 1]);
        if (!strcmp(argv[i], "--steps")) steps = v;
        else if (!strcmp(argv[i], "--ops")) ops = v;
        else if (!strcmp(argv[i], "--batch")) batch = v;
        else if (!strcmp(argv[i], "--lines")) lines = v;
        else {
            fprintf(stderr, "usage: bench_soak [--steps N] [--ops N] [--batch B] [--lines N]\n");
            return 2;
        }
    }
    if (lines < 1) lines = 1;
    vf_err e = {0};
    vf_fault_set(NULL, true, &e); /* counting only: no fault */
    vf_context *ctx = NULL;
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN};
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "bench_soak: %s\n", vf_last_error());
        vf_context_destroy(ctx);
        return 1;
    }
    printf("bench_soak on %s: %ld traced MLP train steps (batch %ld), then %ld eager ops\n", vf_device_name(ctx),
           steps, batch, ops);
    vb_mlp m = vb_mlp_make(ctx);
    float *hx = NULL;
    int32_t *hy = NULL;
    if (!vb_mlp_data(batch, &hx, &hy)) return 1;
    int64_t sx[2] = {batch, VB_MLP_FEAT}, sy[1] = {batch};
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, sx, hx), vf_tensor_from_host(ctx, VF_I32, 1, sy, hy)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp_train_step", .body = vb_mlp_train_step,
                                                                   .user = &m, .n_inputs = 2, .n_outputs = 1,
                                                                   .input_signature = vb_mlp_signature});
    double t0 = vb_now();
    vf_status s = vf_status_get(ctx);
    last_made = objects_made();
    report(ctx, "start", 0, t0);
    for (long i = 1; s == VF_OK && i <= steps; i++) {
        vf_scope_begin(ctx);
        vf_tensor *loss = NULL;
        s = vf_function_call(fn, in, &loss);
        float v;
        if (s == VF_OK && (i % 100 == 0 || i == steps)) s = vf_tensor_read(loss, &v, sizeof v);
        vf_scope_end(ctx);
        if (i % (steps / lines > 0 ? steps / lines : 1) == 0) report(ctx, "step", i, t0);
    }
    if (s == VF_OK) s = vf_context_sync(ctx);
    /* eager: y = relu(x * a + b) on 64 floats, the result read every 1000 */
    int64_t sv[1] = {64};
    vf_tensor *a = vf_fill(ctx, VF_F32, 1, sv, 0.5), *b = vf_fill(ctx, VF_F32, 1, sv, 0.25);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, sv, 1.0);
    t0 = vb_now();
    for (long i = 1; s == VF_OK && i <= ops; i += 3) {
        vf_scope_begin(ctx);
        vf_tensor *y = vf_relu(ctx, vf_add(ctx, vf_mul(ctx, x, a), b));
        float v[64];
        if (i % 999 == 1) s = y ? vf_tensor_read(y, v, sizeof v) : vf_status_get(ctx);
        vf_scope_end(ctx);
        long every = ops / lines > 3 ? ops / lines : 3;
        if ((i + 2) / every != (i - 1) / every) report(ctx, "eager", i + 2, t0);
    }
    if (s == VF_OK) s = vf_context_sync(ctx);
    if (s != VF_OK) fprintf(stderr, "bench_soak: %s\n", vf_error_message(ctx));
    free(hx);
    free(hy);
    vf_function_destroy(fn);
    vf_fault_set(NULL, false, &e); /* no count lines at destroy */
    vf_context_destroy(ctx);
    return s == VF_OK ? 0 : 1;
}
