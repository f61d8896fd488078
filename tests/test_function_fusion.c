/* Fusion inside recorded plans of traced functions on Vulkan: an 8-op
 * elementwise chain is one kernel and one dispatch per call (eight with
 * VKFUSE_FUSION=0), a diamond DAG with two outputs is one kernel, a
 * reduction in the middle of a chain stays a kernel of its own unless it
 * reduces the last axis (then the whole chain is one row group), a matmul
 * with its epilogue is one kernel, results equal the CPU backend and the
 * unfused plan, and fusion never needs more memory. The CPU backend's
 * plans too: elementwise groups and matmul epilogues one kernel, bit for
 * bit its unfused plan. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R = 96, C = 80 };

/* The constants are captured scalar tensors (made by vf_fill in the body
   they are literals: tests/test_function_fills.c). */
static const float consts[5] = {1.5f, 0.5f, 0.9f, 2.0f, 1.0f};
static vf_tensor *cst[5], *wmat; /* wmat: [C, C] for the matmul epilogue */

static void make_consts(vf_context *ctx)
{
    for (int i = 0; i < 5; i++) cst[i] = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &consts[i]);
    static float w[C * C];
    vt_fill_uniform(w, C * C, -0.3f, 0.3f, 13);
    wmat = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){C, C}, w);
}

/* relu(x @ W + y) * 0.9: a matmul group with a three-op epilogue (on the
   CPU backend the matmul, then the epilogue as one pass) */
static vf_status mm_epilogue(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], wmat), in[1])), cst[2]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* eight elementwise ops: x*1.5, +0.5, relu, *0.9, sigmoid, *2, -1, abs */
static vf_status chain8(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], cst[0]), cst[1]);
    h = vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), cst[2]));
    out[0] = vf_abs(ctx, vf_sub(ctx, vf_mul(ctx, h, cst[3]), cst[4]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* a = x * y (y [C] broadcast), two uses of a: out0 = exp(a) * (a + 1),
   out1 = sqrt(abs(a + 1)) */
static vf_status diamond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = vf_mul(ctx, in[0], in[1]), *c = vf_add(ctx, a, cst[4]);
    out[0] = vf_mul(ctx, vf_exp(ctx, a), c);
    out[1] = vf_sqrt(ctx, vf_abs(ctx, c));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* h = exp(x) * x; out = sqrt(abs(h / sum(h, axis *user))) */
static vf_status with_reduce(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *h = vf_mul(ctx, vf_exp(ctx, in[0]), in[0]);
    vf_tensor *s = vf_reduce_sum(ctx, h, 1, (int[]){*(const int *)user}, true);
    out[0] = vf_sqrt(ctx, vf_abs(ctx, vf_div(ctx, h, s)));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct result {
    float *out[2];
    vf_function_stats fs;
} result;

/* Calls body twice (trace + plan, then the recorded plan again) on backend
   b with fusion on or off, keeping the outputs of the second call. */
static void run(vf_backend b, bool fuse, vf_body body, void *user, int n_in, int n_out, const float *x,
                const float *y, result *r)
{
    vf_context *ctx = vt_context(b);
    make_consts(ctx);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, x),
                        n_in > 1 ? vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){C}, y) : NULL};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "fused", .body = body, .user = user, .n_inputs = n_in,
                                                                  .n_outputs = n_out, .unfused = !fuse});
    assert_non_null(fn);
    vf_tensor *out[2] = {NULL, NULL};
    vf_status s = vf_function_call(fn, in, out);
    assert_int_equal(s, VF_OK);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    for (int i = 0; i < n_out; i++) r->out[i] = vt_read(out[i]);
    assert_int_equal(vf_function_stats_get(fn, &r->fs), VF_OK);
    assert_int_equal(r->fs.plans, 1); /* the CPU backend records plans too */
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

static void free_result(result *r)
{
    free(r->out[0]);
    free(r->out[1]);
}

/* Runs body fused, unfused and on the CPU (fused and unfused); checks the
   kernel counts and that all agree: the CPU backend's fused plan bit for
   bit with its unfused one (cpu/cpu_fused.c, cpu_rows.c). cpu_kernels: the
   CPU backend's fused kernels (elementwise groups, epilogues and row
   groups each one). */
static void check(const char *what, vf_body body, void *user, int n_in, int n_out, int fused_kernels,
                  int unfused_kernels, int cpu_kernels)
{
    float *x = malloc(sizeof *x * R * C), y[C];
    assert_non_null(x);
    vt_fill_uniform(x, R * C, -2, 2, 11);
    vt_fill_uniform(y, C, -1.5f, 1.5f, 12);
    result f = {0}, u = {0}, cpu = {0}, cpu_u = {0};
    run(VF_BACKEND_VULKAN, true, body, user, n_in, n_out, x, y, &f);
    run(VF_BACKEND_VULKAN, false, body, user, n_in, n_out, x, y, &u);
    run(VF_BACKEND_CPU, true, body, user, n_in, n_out, x, y, &cpu);
    run(VF_BACKEND_CPU, false, body, user, n_in, n_out, x, y, &cpu_u);
    printf("%s: fused %d kernels / %d dispatches, peak %lld bytes; unfused %d / %d, peak %lld bytes\n", what,
           f.fs.kernels, f.fs.dispatches_per_call, (long long)f.fs.peak_bytes, u.fs.kernels,
           u.fs.dispatches_per_call, (long long)u.fs.peak_bytes);
    assert_true(f.fs.planned && u.fs.planned);
    assert_true(cpu.fs.planned && cpu_u.fs.planned);
    assert_int_equal(cpu.fs.kernels, cpu_kernels);
    assert_int_equal(cpu_u.fs.kernels, unfused_kernels);
    assert_int_equal(f.fs.submits_per_call, 1);
    assert_int_equal(f.fs.kernels, fused_kernels);
    assert_int_equal(u.fs.kernels, unfused_kernels);
    assert_true(f.fs.dispatches_per_call >= f.fs.kernels);
    assert_true(f.fs.dispatches_per_call < u.fs.dispatches_per_call);
    assert_true(f.fs.peak_bytes <= u.fs.peak_bytes);
    assert_true(f.fs.arena_bytes <= u.fs.arena_bytes);
    for (int i = 0; i < n_out; i++) {
        char msg[96];
        snprintf(msg, sizeof msg, "%s output %d: fused vs cpu", what, i);
        vt_assert_close_f32(f.out[i], cpu.out[i], R * C, 1e-5, 1e-5, msg);
        snprintf(msg, sizeof msg, "%s output %d: fused vs unfused", what, i);
        vt_assert_close_f32(f.out[i], u.out[i], R * C, 1e-6, 1e-6, msg);
        snprintf(msg, sizeof msg, "%s output %d: cpu fused vs cpu unfused", what, i);
        vt_assert_equal_bytes(cpu.out[i], cpu_u.out[i], sizeof(float) * R * C, msg);
    }
    free_result(&f);
    free_result(&u);
    free_result(&cpu);
    free_result(&cpu_u);
    free(x);
}

static void test_chain(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    check("8-op chain", chain8, NULL, 1, 1, 1, 8, 1);
}

static void test_diamond(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    check("diamond", diamond, NULL, 2, 2, 1, 6, 1);
}

static void test_reduction_in_the_middle(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    /* along axis 0: exp*mul, the reduction, div-abs-sqrt */
    int axis = 0;
    check("reduction in the middle (axis 0)", with_reduce, &axis, 1, 1, 3, 6, 3);
    /* along the last axis: one row group (docs/FUSION.md), one pass on the
       CPU backend too (cpu_rows.c) */
    axis = 1;
    check("reduction in the middle (last axis)", with_reduce, &axis, 1, 1, 1, 6, 1);
}

static void test_matmul_epilogue(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    check("matmul epilogue", mm_epilogue, NULL, 2, 1, 1, 4, 1);
}

/* The fused chain's exact figures: nothing in the arena, one output. */
static void test_chain_memory(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    float *x = calloc(R * C, sizeof *x);
    assert_non_null(x);
    result f = {0};
    run(VF_BACKEND_VULKAN, true, chain8, NULL, 1, 1, x, NULL, &f);
    assert_int_equal(f.fs.dispatches_per_call, 1);
    assert_int_equal(f.fs.arena_bytes, 0);
    assert_int_equal(f.fs.peak_bytes, R * C * 4);
    free_result(&f);
    free(x);
}

/* VKFUSE_FUSION=0 is read when the context is created, as every knob:
   set before, every plan of that context is unfused; set after, it
   changes nothing (it was read at each plan build, so a variable set
   between calls changed an existing context). */
static int chain_kernels(bool env_before, bool env_after)
{
    if (env_before) setenv("VKFUSE_FUSION", "0", 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_FUSION");
    if (env_after) setenv("VKFUSE_FUSION", "0", 1);
    make_consts(ctx);
    float x[R * C];
    vt_fill_uniform(x, R * C, -2, 2, 11);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, x), *out = NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "env", .body = chain8, .n_inputs = 1,
                                                                  .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
    unsetenv("VKFUSE_FUSION");
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_true(fs.planned);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    return fs.kernels;
}

static void test_fusion_env_read_at_creation(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    assert_int_equal(chain_kernels(false, false), 1);
    assert_int_equal(chain_kernels(true, false), 8);
    assert_int_equal(chain_kernels(false, true), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_reduction_in_the_middle),
        cmocka_unit_test(test_matmul_epilogue),
        cmocka_unit_test(test_chain_memory),
        cmocka_unit_test(test_fusion_env_read_at_creation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
