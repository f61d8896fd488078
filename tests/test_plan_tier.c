/* Tiered matmul kernels of recorded plans on CPU devices (lavapipe;
 * src/vulkan/plan_tier.c): a plan's first call runs its matmul kernels in
 * the quick tier (4 x 4 register blocks), the tuned kernels are compiled on
 * a thread and swapped in at later calls, one per call, counted in
 * vf_context_stats; results are the same across the swap and equal to a
 * host reference. VKFUSE_TIERED=0 builds the tuned kernels at once, and a
 * process that finds the tuned kernels' SPIR-V in the disk cache starts
 * with them, and a function destroyed while its tuned kernels compile
 * frees everything. No call waits for a tuned kernel's compile: with the
 * tier thread held (the test hook tier_hold, as if its compiles never
 * ended) calls go on in the quick tier, and once it is let go the tuned
 * pipelines come made by the thread (none made on the calling thread) and
 * already dispatched once on its second device, whose driver compile
 * Mesa's disk cache carries over. Each case uses a disk cache directory of its own, so that the
 * suite's shared cache cannot make the first call warm. Sizes: 8 x 1024 x
 * 520 is just past the products that always get the smallest block, and
 * with 8 rows the tuned block is 4 x 16, quick for llvmpipe to compile. */
#include "testutil.h"

#include "api/api.h"
#include "vulkan/runtime.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define M 8
#define K 1024
#define N 520

static float a_host[M * K], b_host[K * N], c_host[K * N], bias_host[N];
static bool cpu_device; /* GPUs have no quick tier: their tiled matmul has no cheaper variant */
static float want_plain[M * N], want_epi[M * N];

/* two matmul kernels: one alone, one with a fused bias + relu epilogue */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_matmul(ctx, in[0], in[1]);
    out[1] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[2]), in[3]));
    return VF_OK;
}

static void reference(void)
{
    vt_fill_uniform(a_host, M * K, -1, 1, 11);
    vt_fill_uniform(b_host, K * N, -1, 1, 12);
    vt_fill_uniform(c_host, K * N, -1, 1, 13);
    vt_fill_uniform(bias_host, N, -1, 1, 14);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double p = 0, q = 0;
            for (int k = 0; k < K; k++) {
                p += (double)a_host[i * K + k] * b_host[k * N + j];
                q += (double)a_host[i * K + k] * c_host[k * N + j];
            }
            want_plain[i * N + j] = (float)p;
            q += bias_host[j];
            want_epi[i * N + j] = (float)(q > 0 ? q : 0);
        }
}

typedef struct run {
    vf_context *ctx;
    vf_function *fn;
    vf_tensor *in[4];
} run;

static void run_open(run *r, const char *cache_dir)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN, .validation = val && strcmp(val, "1") == 0,
                         .cache_dir = cache_dir};
    assert_int_equal(vf_context_create(&d, &r->ctx), VF_OK);
    vf_context *ctx = r->ctx;
    r->in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){M, K}, a_host);
    r->in[1] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){K, N}, b_host);
    r->in[2] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){K, N}, c_host);
    r->in[3] = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, bias_host);
    r->fn = vf_function_create(ctx, &(vf_function_desc){.name = "tiered", .body = body, .n_inputs = 4,
                                                        .n_outputs = 2});
    assert_non_null(r->fn);
}

static void run_close(run *r)
{
    vf_function_destroy(r->fn);
    for (int i = 0; i < 4; i++) vf_tensor_release(r->in[i]);
    vf_context_destroy(r->ctx);
}

static vf_vk_runtime *rt_of(const run *r) { return vf_vk_runtime_of(&r->ctx->be); }

/* Pipelines made on the calling thread so far. */
static int64_t made_here(const run *r) { return rt_of(r)->pipes.created - rt_of(r)->pipes.adopted; }

static float first_plain[M * N], first_epi[M * N]; /* the quick tier's results */

/* One call; its two results checked against the reference, and kept in
   keep[0..1] when not NULL. */
static void call_check(run *r, const char *what, float **keep)
{
    vf_tensor *out[2] = {NULL, NULL};
    assert_int_equal(vf_function_call(r->fn, r->in, out), VF_OK);
    float *p = vt_read(out[0]), *q = vt_read(out[1]);
    double atol = vt_matmul_atol(K);
    vt_assert_close_f32(p, want_plain, M * N, atol, 1e-4, what);
    vt_assert_close_f32(q, want_epi, M * N, atol, 1e-4, what);
    if (keep) {
        memcpy(keep[0], p, sizeof first_plain);
        memcpy(keep[1], q, sizeof first_epi);
    }
    free(p), free(q);
    vf_tensor_release(out[0]), vf_tensor_release(out[1]);
}

static vf_context_stats stats(const run *r)
{
    vf_context_stats s = {0};
    assert_int_equal(vf_context_stats_get(r->ctx, &s), VF_OK);
    return s;
}

static char *fresh_dir(char *buf)
{
    strcpy(buf, "/tmp/vf_test_tier_XXXXXX");
    assert_non_null(mkdtemp(buf));
    return buf;
}

static void remove_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* Cold: quick tier first, then both tuned kernels, one swap per call;
   then a second process-like context on the same disk cache starts tuned. */
static void test_quick_then_tuned(void **state)
{
    (void)state;
    char dir[64];
    fresh_dir(dir);
    run r;
    run_open(&r, dir);
    call_check(&r, "first call (quick tier)", (float *[]){first_plain, first_epi});
    vf_context_stats s = stats(&r);
    if (!cpu_device) {
        assert_int_equal(s.tier_quick_kernels, 0);
        run_close(&r);
        remove_dir(dir);
        return;
    }
    assert_int_equal(s.tier_quick_kernels, 2);
    assert_int_equal(s.tier_swaps, 0); /* the first run never waits for the tuned kernels */
    vf_function_stats f0;
    vf_function_stats_get(r.fn, &f0);
    /* the thread compiles two small shaders; calls until both are in */
    double t0 = vt_now();
    int64_t last = 0;
    for (int calls = 1; last < 2 && vt_now() - t0 < 60; calls++) {
        call_check(&r, "call across the swap", NULL);
        int64_t now = stats(&r).tier_swaps;
        assert_true(now - last <= 1); /* one per call */
        last = now;
    }
    assert_int_equal(last, 2);
    static float tuned_plain[M * N], tuned_epi[M * N];
    call_check(&r, "tuned tier", (float *[]){tuned_plain, tuned_epi});
    /* each element the same sum in the same k order in both tiers; only
       the compiler's contraction into fused multiply-adds may differ */
    vt_assert_close_f32(tuned_plain, first_plain, M * N, 1e-5, 1e-6, "tuned vs quick");
    vt_assert_close_f32(tuned_epi, first_epi, M * N, 1e-5, 1e-6, "tuned vs quick, epilogue");
    s = stats(&r);
    assert_int_equal(s.tier_swaps, 2);
    assert_int_equal(s.tier_quick_kernels, 2);
    vf_function_stats f1;
    vf_function_stats_get(r.fn, &f1);
    assert_int_equal(f1.kernels, f0.kernels); /* the same plan, other code */
    assert_int_equal(f1.traces, f0.traces);
    run_close(&r);

    /* the tuned kernels' SPIR-V is on disk now: no quick tier */
    run_open(&r, dir);
    call_check(&r, "warm process", NULL);
    s = stats(&r);
    assert_int_equal(s.tier_quick_kernels, 0);
    assert_int_equal(s.tier_swaps, 0);
    run_close(&r);
    remove_dir(dir);
}

/* run_open on a fresh cache directory (dir), the tier thread held by the
   test hook (*hold set) from the plan's first build on. */
static void run_open_held(run *r, char *dir, atomic_int *hold)
{
    fresh_dir(dir);
    atomic_store(hold, 1);
    run_open(r, dir);
    rt_of(r)->dev.test.tier_hold = hold;
}

/* A function destroyed right after its first calls, its tuned kernels
   still on the plan's thread (held there by the test hook after the first
   one's compile, pipeline and warm-up, so that the thread is surely still
   at work): the plan stops the thread, which leaves the hold, and frees
   what it made, the pipeline it made included (ASan / LSan builds check
   that nothing leaks or is touched after the free). */
static void test_destroy_while_compiling(void **state)
{
    (void)state;
    char dir[64];
    static atomic_int hold;
    run r;
    run_open_held(&r, dir, &hold);
    call_check(&r, "first call", NULL);
    call_check(&r, "second call", NULL);
    vf_context_stats s = stats(&r);
    assert_int_equal(s.tier_quick_kernels, cpu_device ? 2 : 0);
    assert_int_equal(s.tier_swaps, 0);
    run_close(&r);
    remove_dir(dir);
}

/* The tier thread held: the calls run in the quick tier and never wait for
   it (a call that waited would not return: ctest's timeout fails it); let
   go, the swaps make no pipeline on the calling thread: the thread made
   both, and compiled them on its second device first. */
static void test_calls_never_wait(void **state)
{
    (void)state;
    char dir[64];
    static atomic_int hold;
    run r;
    run_open_held(&r, dir, &hold);
    call_check(&r, "first call (quick tier)", (float *[]){first_plain, first_epi});
    if (!cpu_device) {
        assert_int_equal(stats(&r).tier_quick_kernels, 0);
        run_close(&r);
        remove_dir(dir);
        return;
    }
    assert_int_equal(stats(&r).tier_quick_kernels, 2);
    int64_t here = made_here(&r);
    for (int i = 0; i < 3; i++) call_check(&r, "call while the thread is held", NULL);
    assert_int_equal(stats(&r).tier_swaps, 0);
    atomic_store(&hold, 0);
    double t0 = vt_now();
    while (stats(&r).tier_swaps < 2 && vt_now() - t0 < 60) call_check(&r, "call across the swap", NULL);
    assert_int_equal(stats(&r).tier_swaps, 2);
    static float tuned_plain[M * N], tuned_epi[M * N];
    call_check(&r, "tuned tier", (float *[]){tuned_plain, tuned_epi});
    vt_assert_close_f32(tuned_plain, first_plain, M * N, 1e-5, 1e-6, "tuned vs quick");
    vt_assert_close_f32(tuned_epi, first_epi, M * N, 1e-5, 1e-6, "tuned vs quick, epilogue");
    vf_vk_runtime *rt = rt_of(&r);
    assert_int_equal(made_here(&r), here); /* no vkCreateComputePipelines on this thread since the first call */
    assert_int_equal(rt->tier_made_ahead, 2);
    /* the driver's compile done on the second device (with Mesa's disk
       cache off there is nothing to carry it over, and none is done) */
    assert_int_equal(rt->tier_warmed, rt->driver_cache_off ? 0 : 2);
    run_close(&r);
    remove_dir(dir);
}

/* Mesa's disk cache off (its MESA_SHADER_CACHE_DISABLE, or the older
   MESA_GLSL_CACHE_DISABLE, read as Mesa reads it): nothing would carry
   the second device's compile over, so the runtime knows not to make one. */
static void test_driver_cache_off(void **state)
{
    (void)state;
    const struct { const char *name, *value; bool off; } cases[] = {
        {"MESA_SHADER_CACHE_DISABLE", "true", true}, {"MESA_SHADER_CACHE_DISABLE", "1", true},
        {"MESA_SHADER_CACHE_DISABLE", "YES", true},  {"MESA_SHADER_CACHE_DISABLE", "0", false},
        {"MESA_SHADER_CACHE_DISABLE", "false", false}, {"MESA_GLSL_CACHE_DISABLE", "true", true},
        {NULL, NULL, false},
    };
    const char *saved[2] = {getenv("MESA_SHADER_CACHE_DISABLE"), getenv("MESA_GLSL_CACHE_DISABLE")};
    char keep[2][64] = {"", ""};
    for (int i = 0; i < 2; i++)
        if (saved[i]) snprintf(keep[i], sizeof keep[i], "%s", saved[i]);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        unsetenv("MESA_SHADER_CACHE_DISABLE");
        unsetenv("MESA_GLSL_CACHE_DISABLE");
        if (cases[c].name) setenv(cases[c].name, cases[c].value, 1);
        vf_vk_options o = {0};
        vf_vk_options_read(&o, getenv);
        assert_int_equal(o.driver_cache_off, cases[c].off);
        if (c == 0) { /* ... and a context's runtime takes it */
            vf_context *ctx = NULL;
            assert_int_equal(vf_context_create(&(vf_context_desc){.backend = VF_BACKEND_VULKAN}, &ctx), VF_OK);
            assert_true(vf_vk_runtime_of(&ctx->be)->driver_cache_off);
            vf_context_destroy(ctx);
        }
    }
    unsetenv("MESA_SHADER_CACHE_DISABLE");
    unsetenv("MESA_GLSL_CACHE_DISABLE");
    if (saved[0]) setenv("MESA_SHADER_CACHE_DISABLE", keep[0], 1);
    if (saved[1]) setenv("MESA_GLSL_CACHE_DISABLE", keep[1], 1);
}

/* VKFUSE_TIERED=0: the tuned kernels from the first call. */
static void test_env_off(void **state)
{
    (void)state;
    char dir[64];
    fresh_dir(dir);
    setenv("VKFUSE_TIERED", "0", 1);
    run r;
    run_open(&r, dir);
    unsetenv("VKFUSE_TIERED");
    call_check(&r, "untiered", NULL);
    call_check(&r, "untiered, again", NULL);
    vf_context_stats s = stats(&r);
    assert_int_equal(s.tier_quick_kernels, 0);
    assert_int_equal(s.tier_swaps, 0);
    run_close(&r);
    remove_dir(dir);
}

int main(int argc, char **argv)
{
    if (!vt_have_vulkan()) return 0;
    vf_device_info dev[8];
    int n = vf_devices(dev, 8, NULL, 0);
    for (int i = 0; i < n && i < 8; i++)
        if (dev[i].chosen) cpu_device = strcmp(dev[i].type, "cpu") == 0;
    if (argc > 1) cmocka_set_test_filter(argv[1]);
    setenv("VKFUSE_COMPILE_THREADS", "2", 1); /* the tier needs the compile thread, even on one core */
    reference();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quick_then_tuned),
        cmocka_unit_test(test_destroy_while_compiling),
        cmocka_unit_test(test_calls_never_wait),
        cmocka_unit_test(test_driver_cache_off),
        cmocka_unit_test(test_env_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
