#include "testutil.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The Vulkan loader unloads drivers and layers at vkDestroyInstance, so the
   leaks they report at exit show up as <unknown module> and the
   suppressions in lsan.supp (by library name) cannot match them. Keeping
   them loaded for the life of the test process fixes that. */
__attribute__((constructor)) static void keep_vulkan_libraries_loaded(void)
{
    static const char *const libs[] = {"libvulkan.so.1", "libvulkan_lvp.so", "libVkLayer_khronos_validation.so",
                                       "libVkLayer_MESA_device_select.so"};
    for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) dlopen(libs[i], RTLD_NOW | RTLD_NODELETE);
}

int vt_have_vulkan(void)
{
    const char *v = getenv("VKFUSE_TEST_NO_VULKAN");
    return !(v && *v && strcmp(v, "0") != 0);
}

int vt_backends(vf_backend b[2])
{
    int n = 0;
    b[n++] = VF_BACKEND_CPU;
    if (vt_have_vulkan()) b[n++] = VF_BACKEND_VULKAN;
    return n;
}

float vt_read1(vf_tensor *t)
{
    float v = 0;
    assert_int_equal(vf_tensor_read(t, &v, sizeof v), VF_OK);
    return v;
}

double vt_central_diff(double (*f)(void *user), void *user, double *x, double rel)
{
    double keep = *x, h = rel * fmax(1.0, fabs(keep));
    *x = keep + h;
    double a = f(user);
    *x = keep - h;
    double b = f(user);
    *x = keep;
    return (a - b) / (2 * h);
}

vf_context *vt_context(vf_backend backend)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = backend, .validation = val && strcmp(val, "1") == 0};
    vf_context *ctx = NULL;
    vf_status s = vf_context_create(&d, &ctx);
    if (s != VF_OK) {
        fprintf(stderr, "vt_context: %s: %s\n", vf_status_name(s), vf_last_error());
        vf_context_destroy(ctx);
        fail_msg("could not create a context on backend %d", (int)backend);
    }
    return ctx;
}

vf_context *vt_group_vk, *vt_group_cpu;

int vt_group_setup(void **state)
{
    (void)state;
    vt_group_vk = vt_have_vulkan() ? vt_context(VF_BACKEND_VULKAN) : NULL;
    vt_group_cpu = vt_context(VF_BACKEND_CPU);
    return 0;
}

int vt_group_teardown(void **state)
{
    (void)state;
    if (vt_group_vk) vt_context_done(vt_group_vk);
    if (vt_group_cpu) vt_context_done(vt_group_cpu);
    vt_group_vk = vt_group_cpu = NULL;
    return 0;
}

void vt_context_done(vf_context *ctx)
{
    vf_status s = vf_context_sync(ctx);
    if (s != VF_OK) {
        fprintf(stderr, "unexpected error left in context: %s: %s\n", vf_status_name(s), vf_error_message(ctx));
        vf_context_destroy(ctx);
        fail_msg("context had an error");
    }
    vf_context_destroy(ctx);
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

void vt_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * (float)((double)next(&s) / 9007199254740992.0);
}

double vt_matmul_atol(int64_t k) { return 1.6e-4 * sqrt((double)k) + 1e-6; }

void vt_fill_int(int32_t *x, size_t n, int32_t lo, int32_t hi, uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 7;
    uint64_t span = (uint64_t)((int64_t)hi - lo + 1);
    for (size_t i = 0; i < n; i++) x[i] = (int32_t)(lo + (int64_t)(next(&s) % span));
}

void vt_assert_close_f32(const float *got, const float *want, size_t n, double atol, double rtol,
                         const char *what)
{
    for (size_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        int ok;
        if (isnan(w)) ok = isnan(g);
        else if (isinf(w)) ok = g == w;
        else ok = !isnan(g) && fabs(g - w) <= atol + rtol * fabs(w);
        if (!ok) fail_msg("%s: element %zu of %zu: got %.9g, want %.9g (atol %g, rtol %g)", what, i, n, g, w,
                          atol, rtol);
    }
}

void vt_assert_equal_bytes(const void *got, const void *want, size_t n, const char *what)
{
    const unsigned char *g = got, *w = want;
    for (size_t i = 0; i < n; i++)
        if (g[i] != w[i]) fail_msg("%s: byte %zu of %zu: got 0x%02x, want 0x%02x", what, i, n, g[i], w[i]);
}

void vt_assert_same_f32(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) && isnan(want[i])) continue;
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            fail_msg("%s: element %zu of %zu: got %.9g (0x%08x), want %.9g", what, i, n, got[i],
                     (unsigned)*(const uint32_t *)(const void *)&got[i], want[i]);
    }
}

void *vt_read(vf_tensor *t)
{
    assert_non_null(t);
    size_t bytes = vf_tensor_bytes(t);
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    vf_status s = vf_tensor_read(t, p, bytes);
    if (s != VF_OK) fail_msg("vf_tensor_read: %s: %s", vf_status_name(s), vf_error_message(vf_tensor_context(t)));
    return p;
}

void vt_expect_error(vf_context *ctx, vf_status st, ...)
{
    vf_status got = vf_status_get(ctx);
    const char *msg = vf_error_message(ctx);
    if (got != st) fail_msg("expected %s, got %s (\"%s\")", vf_status_name(st), vf_status_name(got), msg);
    va_list ap;
    va_start(ap, st);
    for (const char *sub; (sub = va_arg(ap, const char *));)
        if (!strstr(msg, sub)) {
            va_end(ap);
            fail_msg("error message \"%s\" lacks \"%s\"", msg, sub);
        }
    va_end(ap);
    vf_error_clear(ctx);
}

double vt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

long vt_env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

double vt_budget_default(double budget_s)
{
#ifdef VKFUSE_SANITIZE_BUILD
    return budget_s / 2;
#else
    return budget_s;
#endif
}

void vt_seeds_init(vt_seeds *s, long max_cases, long min_cases, double budget_s)
{
    memset(s, 0, sizeof *s);
    s->seed0 = (uint64_t)vt_env_long("VKFUSE_RANDOM_SEED", 1);
    long n = vt_env_long("VKFUSE_RANDOM_CASES", -1);
    s->fixed = n >= 0;
    s->max_cases = s->fixed ? n : max_cases;
    s->min_cases = s->fixed ? n : min_cases;
    s->budget_s = (double)vt_env_long("VKFUSE_RANDOM_BUDGET", -1);
    if (s->budget_s < 0) s->budget_s = vt_budget_default(budget_s);
    s->t0 = vt_now();
}

bool vt_seeds_next(vt_seeds *s, uint64_t *seed)
{
    if (s->done >= s->max_cases) return false;
    if (!s->fixed && s->done >= s->min_cases && vt_now() - s->t0 >= s->budget_s) return false;
    *seed = s->seed0 + (uint64_t)s->done++;
    return true;
}

void vt_seeds_report(const vt_seeds *s, const char *what)
{
    printf("%s: %ld cases, seeds %llu..%llu, %.1f s (%s)\n", what, s->done, (unsigned long long)s->seed0,
           (unsigned long long)(s->seed0 + (uint64_t)(s->done ? s->done - 1 : 0)), vt_now() - s->t0,
           s->fixed ? "VKFUSE_RANDOM_CASES" : "time budget; VKFUSE_RANDOM_CASES=<n> for a fixed count");
}

int vt_run_group(const char *name, const struct CMUnitTest *tests, size_t n)
{
    const char *env = getenv("VKFUSE_TEST_SHARD");
    unsigned k = 0, of = 1;
    if (env && *env && (sscanf(env, "%u/%u", &k, &of) != 2 || of == 0 || k >= of)) {
        fprintf(stderr, "VKFUSE_TEST_SHARD=%s: expected k/n with 0 <= k < n\n", env);
        return 1;
    }
    struct CMUnitTest *pick = malloc((n ? n : 1) * sizeof *pick);
    if (!pick) return 1;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (i % of == k) pick[m++] = tests[i];
    int r = _cmocka_run_group_tests(name, pick, m, NULL, NULL);
    free(pick);
    return r;
}

vf_tensor *vt_scalar(vf_context *ctx, double v) { return vf_fill(ctx, VF_F32, 0, NULL, v); }
vf_tensor *vt_sum(vf_context *ctx, vf_tensor *x) { return vf_reduce_sum(ctx, x, 0, NULL, false); }

vf_status vt_branch_mul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[1]);
    return VF_OK;
}

vf_status vt_branch_square(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[0]);
    return VF_OK;
}

void vt_check_traced_vs_eager(vf_context *ctx, const vt_traced_case *c)
{
    assert_true(c->n_inputs <= 8 && c->n_outputs <= 8);
    for (int fuse = 0; fuse < 2; fuse++) {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = c->name, .body = c->body,
                                                                     .n_inputs = c->n_inputs,
                                                                     .n_outputs = c->n_outputs,
                                                                     .input_signature = c->sig, .unfused = !fuse});
        assert_non_null(fn);
        for (int s = 0; s < c->n_sizes; s++) {
            int64_t n = c->sizes[s];
            vf_tensor *in[8] = {0}, *tr[8] = {0}, *ea[8] = {0};
            c->make(ctx, n, in, c->user);
            assert_int_equal(vf_function_call(fn, in, tr), VF_OK);
            assert_int_equal(c->body(ctx, in, ea, c->user), VF_OK);
            for (int k = 0; k < c->n_outputs; k++) {
                char what[96];
                snprintf(what, sizeof what, "%s %s n=%lld out %d: traced vs eager", c->name,
                         fuse ? "fused" : "unfused", (long long)n, k);
                void *gt = vt_read(tr[k]), *ge = vt_read(ea[k]);
                size_t nel = (size_t)vf_tensor_numel(ea[k]);
                assert_int_equal(vf_tensor_numel(tr[k]), (int64_t)nel);
                if (vf_tensor_dtype(ea[k]) == VF_F32 && (c->atol > 0 || c->rtol > 0))
                    vt_assert_close_f32(gt, ge, nel, c->atol, c->rtol, what);
                else
                    vt_assert_equal_bytes(gt, ge, nel * vf_dtype_size(vf_tensor_dtype(ea[k])), what);
                free(gt), free(ge);
            }
            if (c->check) c->check(n, in, ea, c->user);
        }
        vf_function_stats st;
        assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
        assert_int_equal(st.traces, 1); /* the symbolic dim: one trace for every size */
        vf_function_destroy(fn);
    }
}
