/* Recorded plans of traced functions: one submit per call on Vulkan with
 * no compiles or pipeline creations after the first, results equal to
 * eager and to the CPU backend, variables assigned inside a plan, symbolic
 * dims (one plan per size set), the memory figures, vf_cond as guarded
 * branches decided on the device, the unfused option, barrier batching and
 * in-place writes in one level. The offset planner: test_memplan.c; the
 * backend plan API with descriptor sets: test_vulkan_plan.c. */
#include "testutil.h"
#include "vk_test_common.h"

#include "api/api.h"
#include "vulkan/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- functions --------------------------------------------------------------- */

enum { R = 64, C = 48 };

/* y = sum(relu(x*w + b) * 0.5, axis 1) and z = exp(-x) (a chain of kernels) */
static vf_status chain_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **cap = user; /* w, b: captures */
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], cap[0]), cap[1]));
    h = vf_mul(ctx, h, vf_fill(ctx, VF_F32, 0, NULL, 0.5));
    h = vf_tanh(ctx, vf_add(ctx, h, h));
    out[0] = vf_reduce_sum(ctx, h, 1, (int[]){1}, false);
    out[1] = vf_exp(ctx, vf_neg(ctx, in[0]));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void make_inputs(vf_context *ctx, uint64_t seed, vf_tensor **x, vf_tensor **cap)
{
    static float xs[R * C], w[C * C], b[C];
    vt_fill_uniform(xs, R * C, -1, 1, seed);
    vt_fill_uniform(w, C * C, -0.5f, 0.5f, 7);
    vt_fill_uniform(b, C, -0.1f, 0.1f, 8);
    *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, xs);
    if (cap) {
        cap[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){C, C}, w);
        cap[1] = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){C}, b);
    }
}

static vf_vk_runtime *runtime(vf_context *ctx) { return vf_vk_runtime_of(&ctx->be); }

static void stats(vf_context *ctx, vf_context_stats *s)
{
    assert_int_equal(vf_context_stats_get(ctx, s), VF_OK);
}

static void test_one_submit(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    vf_tensor *cap[2], *ccap[2], *x, *cx;
    make_inputs(ctx, 1, &x, cap);
    make_inputs(cpu, 1, &cx, ccap);
    vf_function_desc d = {.name = "chain", .body = chain_body, .user = cap, .n_inputs = 1, .n_outputs = 2};
    vf_function *fn = vf_function_create(ctx, &d);
    d.user = ccap;
    vf_function *cfn = vf_function_create(cpu, &d);
    vf_tensor *y[2], *cy[2], *ey[2];
    assert_int_equal(vf_function_call(cfn, &cx, cy), VF_OK);
    float *want0 = vt_read(cy[0]), *want1 = vt_read(cy[1]);
    /* eager on the same device */
    vf_run_functions_eagerly(ctx, true);
    assert_int_equal(vf_function_call(fn, &x, ey), VF_OK);
    vf_run_functions_eagerly(ctx, false);
    float *eager0 = vt_read(ey[0]);
    assert_int_equal(vf_function_call(fn, &x, y), VF_OK); /* traces, builds the plan */
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_true(fs.planned);
    assert_int_equal(fs.plans, 1);
    assert_int_equal(fs.submits_per_call, 1);
    /* one at each end, and hazards in between: the two outputs' chains are
       independent, so fewer than one per dispatch */
    if (fs.barriers_per_call < 2 || fs.barriers_per_call > fs.dispatches_per_call + 1)
        fail_msg("%d barriers for %d dispatches", fs.barriers_per_call, fs.dispatches_per_call);
    for (int call = 0; call < 3; call++) {
        vf_tensor *in;
        make_inputs(ctx, 1, &in, NULL); /* a new input tensor each call */
        assert_int_equal(vf_context_sync(ctx), VF_OK);
        vf_context_stats s0, s1, s2;
        stats(ctx, &s0);
        int64_t pipes0 = runtime(ctx)->pipes.created;
        assert_int_equal(vf_function_call(fn, &in, y), VF_OK);
        stats(ctx, &s1);
        assert_int_equal(s1.submits - s0.submits, 1);
        float *got0 = vt_read(y[0]), *got1 = vt_read(y[1]);
        stats(ctx, &s2);
        /* mapped memory is read in place after the fence; else one staging copy per read */
        int reads = runtime(ctx)->mem.host_visible ? 0 : 2;
        assert_int_equal(s2.submits - s1.submits, reads);
        assert_int_equal(s2.shader_compiles, s0.shader_compiles);
        assert_int_equal(s2.shader_memory_hits, s0.shader_memory_hits); /* no lookups at all */
        assert_int_equal(runtime(ctx)->pipes.created, pipes0);
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        assert_int_equal(fs.submits_per_call, 1);
        assert_int_equal(fs.dispatches_per_call, s1.dispatches - s0.dispatches);
        /* the matmul with its epilogue add-relu-mul-add-tanh (the 0.5 made by
           vf_fill a literal in it), the reduction, the fused exp(-x) */
        assert_true(fs.dispatches_per_call >= fs.kernels);
        assert_int_equal(fs.kernels, 3);
        assert_true(fs.peak_bytes <= fs.unplanned_bytes);
        vt_assert_close_f32(got0, want0, R, 1e-4, 1e-4, "plan vs cpu y");
        vt_assert_close_f32(got0, eager0, R, 1e-5, 1e-5, "plan vs eager y");
        vt_assert_close_f32(got1, want1, R * C, 1e-5, 1e-5, "plan vs cpu z");
        free(got0);
        free(got1);
    }
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_int_equal(fs.traces, 1);
    assert_int_equal(fs.plans, 1);
    printf("chain: %d kernels, %d dispatches, %d submit(s) per call, peak %lld bytes (arena %lld), unplanned %lld\n",
           fs.kernels, fs.dispatches_per_call, fs.submits_per_call, (long long)fs.peak_bytes,
           (long long)fs.arena_bytes, (long long)fs.unplanned_bytes);
    /* the CPU backend runs a plan too: the elementwise group one pass, the
       matmul group and the reduction exec by exec (cpu/cpu_plan.c) */
    assert_int_equal(vf_function_stats_get(cfn, &fs), VF_OK);
    assert_true(fs.planned);
    assert_int_equal(fs.plans, 1);
    assert_true(fs.kernels >= 3);
    free(want0);
    free(want1);
    free(eager0);
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

/* acc += x; out = acc * 2 (the read after the assign sees the new value) */
static vf_status accum_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *acc = user;
    if (vf_assign_add(acc, in[0]) != VF_OK) return vf_status_get(ctx);
    out[0] = vf_mul(ctx, acc, vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_variables(void **state)
{
    (void)state;
    vf_backend bs[2] = {VF_BACKEND_CPU, VF_BACKEND_VULKAN};
    for (int b = 0; b < (vt_have_vulkan() ? 2 : 1); b++) {
        vf_context *ctx = vt_context(bs[b]);
        float zero[6] = {0}, xs[6] = {1, 2, 3, 4, 5, 6};
        vf_tensor *acc = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, zero));
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "accum", .body = accum_body,
                                                                     .user = acc, .n_inputs = 1, .n_outputs = 1});
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, xs), *y = NULL;
        for (int call = 1; call <= 4; call++) {
            assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
            float *got = vt_read(y), *a = vt_read(acc), want[6], wa[6];
            for (int i = 0; i < 6; i++) wa[i] = xs[i] * (float)call, want[i] = 2 * wa[i];
            vt_assert_equal_bytes(a, wa, sizeof wa, "variable after the call");
            vt_assert_equal_bytes(got, want, sizeof want, "output");
            free(got);
            free(a);
        }
        /* Fresh inputs every call, freed at the end of it, as a training
           loop does: each call must see its own input (train_step). */
        float sum[6];
        for (int i = 0; i < 6; i++) sum[i] = xs[i] * 4;
        for (int call = 0; call < 12; call++) {
            vf_scope_begin(ctx);
            float fresh[6];
            for (int i = 0; i < 6; i++) fresh[i] = (float)(call * 7 % 5) - (float)i, sum[i] += fresh[i];
            vf_tensor *fx = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, fresh), *fy = NULL;
            float scratch[64] = {0}; /* other allocations between calls */
            vf_tensor *other = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){(call % 3 + 1) * 16}, scratch);
            assert_non_null(other);
            assert_int_equal(vf_function_call(fn, &fx, &fy), VF_OK);
            float *got = vt_read(fy), want[6];
            for (int i = 0; i < 6; i++) want[i] = 2 * sum[i];
            vt_assert_equal_bytes(got, want, sizeof want, "output with a fresh input");
            free(got);
            vf_scope_end(ctx);
        }
        vf_function_stats fs;
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        assert_true(fs.planned); /* both backends record plans */
        if (bs[b] == VF_BACKEND_VULKAN) assert_int_equal(fs.submits_per_call, 1);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* softmax(x) + 1 over rows of any count */
static vf_status sym_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, vf_softmax(ctx, in[0], 1), vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_symbolic(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    vf_tensor_spec sig = {.dtype = VF_F32, .rank = 2, .shape = {-1, 16}};
    vf_function_desc d = {.name = "sym", .body = sym_body, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig};
    vf_function *fn = vf_function_create(ctx, &d), *cfn = vf_function_create(cpu, &d);
    int rows[] = {3, 10, 3, 10};
    for (int k = 0; k < 4; k++) {
        float xs[10 * 16];
        vt_fill_uniform(xs, (size_t)rows[k] * 16, -2, 2, (uint64_t)k);
        int64_t shape[2] = {rows[k], 16};
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, shape, xs), *cx = vf_tensor_from_host(cpu, VF_F32, 2, shape, xs);
        vf_tensor *y, *cy;
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        assert_int_equal(vf_function_call(cfn, &cx, &cy), VF_OK);
        assert_int_equal(vf_tensor_dim(y, 0), rows[k]);
        float *got = vt_read(y), *want = vt_read(cy);
        vt_assert_close_f32(got, want, (size_t)rows[k] * 16, 1e-5, 1e-5, "symbolic plan vs cpu");
        free(got);
        free(want);
    }
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_int_equal(fs.traces, 1);
    assert_int_equal(fs.plans, 2);
    assert_true(fs.planned);
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

/* eight elementwise ops in a row on 256 x 256 */
static vf_status long_chain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = in[0];
    for (int i = 0; i < 8; i++) h = i % 2 ? vf_tanh(ctx, h) : vf_add(ctx, h, in[0]);
    out[0] = h;
    return h ? VF_OK : vf_status_get(ctx);
}

static void test_memory_figures(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float *xs = malloc(256 * 256 * sizeof *xs);
    vt_fill_uniform(xs, 256 * 256, -1, 1, 3);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){256, 256}, xs), *y;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "long_chain", .body = long_chain,
                                                                 .n_inputs = 1, .n_outputs = 1, .unfused = true});
    /* the unfused figures; tests/test_function_fusion.c checks the fused ones */
    vf_status st = vf_function_call(fn, &x, &y);
    assert_int_equal(st, VF_OK);
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    const int64_t one = 256 * 256 * 4;
    assert_true(fs.planned);
    assert_int_equal(fs.kernels, 8);
    assert_int_equal(fs.unplanned_bytes, 8 * one);
    assert_int_equal(fs.arena_bytes, 2 * one); /* two values live at a time */
    assert_int_equal(fs.peak_bytes, 3 * one);
    float *got = vt_read(y);
    for (int i = 0; i < 256 * 256; i++) {
        float h = xs[i];
        for (int k = 0; k < 8; k++) h = k % 2 ? tanhf(h) : h + xs[i];
        if (fabsf(got[i] - h) > 1e-5f + 1e-5f * fabsf(h)) fail_msg("long chain [%d]: %g, want %g", i, got[i], h);
    }
    printf("long chain: peak %lld bytes, unplanned %lld bytes\n", (long long)fs.peak_bytes, (long long)fs.unplanned_bytes);
    free(got);
    free(xs);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- vf_cond in a plan: guarded branches, decided on the device ------------- */

/* then: 40 rounds of x = tanh(x) + 0.25 (too big for a select), counter += 1 */
static vf_status big_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *x = in[0];
    for (int i = 0; i < 40; i++) x = vf_add(ctx, vf_tanh(ctx, x), vf_fill(ctx, VF_F32, 0, NULL, 0.25));
    vf_status s = vf_assign_add(user, vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    out[0] = x;
    return s != VF_OK ? s : x ? VF_OK : vf_status_get(ctx);
}

/* else: x * 0.5 (a param passed through a one-op branch), counter -= 10 */
static vf_status small_else(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_status s = vf_assign_sub(user, vf_fill(ctx, VF_F32, 0, NULL, 10.0));
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.5));
    return s != VF_OK ? s : out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = cond(mean(x) > 0, big_then, small_else)(x) * 3 */
static vf_status guarded_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0.0));
    vf_tensor *y = NULL;
    vf_status s = vf_cond(ctx, pred, big_then, small_else, 1, in, 1, &y, user);
    if (s != VF_OK) return s;
    out[0] = vf_mul(ctx, y, vf_fill(ctx, VF_F32, 0, NULL, 3.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_guarded_cond(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    float zero = 0.0f;
    vf_tensor *cnt = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &zero));
    vf_tensor *ccnt = vf_variable(cpu, vf_tensor_from_host(cpu, VF_F32, 0, NULL, &zero));
    vf_tensor_spec sig = {.dtype = VF_F32, .rank = 1, .shape = {-1}};
    vf_function_desc d = {.name = "guarded", .body = guarded_body, .user = cnt, .n_inputs = 1, .n_outputs = 1,
                          .input_signature = &sig};
    vf_function *fn = vf_function_create(ctx, &d);
    d.user = ccnt;
    vf_function *cfn = vf_function_create(cpu, &d);
    enum { N = 1000 };
    static float xs[N];
    float want_cnt = 0;
    int disp = 0;
    const double sign[] = {1, -1, -1, 1, 1, -1};
    for (int call = 0; call < 6; call++) {
        vf_scope_begin(ctx);
        vf_scope_begin(cpu);
        for (int i = 0; i < N; i++) xs[i] = (float)(sign[call] * (0.5 + (i % 7) * 0.1));
        int64_t n = call < 4 ? N : 257;
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, &n, xs), *cx = vf_tensor_from_host(cpu, VF_F32, 1, &n, xs);
        vf_tensor *y = NULL, *cy = NULL;
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        assert_int_equal(vf_function_call(cfn, &cx, &cy), VF_OK);
        float *got = vt_read(y), *want = vt_read(cy);
        vt_assert_close_f32(got, want, (size_t)n, 1e-5, 1e-5, "guarded cond vs cpu");
        free(got);
        free(want);
        want_cnt += sign[call] > 0 ? 1.0f : -10.0f;
        float c = 0, cc = 0;
        assert_int_equal(vf_tensor_read(cnt, &c, sizeof c), VF_OK);
        assert_int_equal(vf_tensor_read(ccnt, &cc, sizeof cc), VF_OK);
        if (c != want_cnt || cc != want_cnt) fail_msg("call %d: counter %g (cpu %g), want %g", call, c, cc, want_cnt);
        vf_function_stats fs;
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        assert_true(fs.planned);
        assert_int_equal(fs.submits_per_call, 1);
        /* both branches and the guard are in the plan, whichever runs: the
           same dispatches at one size; the 80 ops of the then branch fused
           into a few kernels (test_plan_cond.c counts them exactly) */
        if (call == 0 || call == 4) disp = fs.dispatches_per_call;
        if (fs.dispatches_per_call != disp || disp > 20)
            fail_msg("call %d: %d dispatches (first at this size: %d)", call, fs.dispatches_per_call, disp);
        vf_scope_end(cpu);
        vf_scope_end(ctx);
    }
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_int_equal(fs.traces, 1);
    assert_int_equal(fs.plans, 2);
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

/* vf_function_desc.unfused: one kernel per op in the same process as the
   fused function; both give the same values. */
static void test_unfused_option(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vf_tensor *x, *cap[2];
    make_inputs(ctx, 3, &x, cap);
    vf_function_desc d = {.name = "chain", .body = chain_body, .user = cap, .n_inputs = 1, .n_outputs = 2};
    vf_function *fused = vf_function_create(ctx, &d);
    d.unfused = true;
    vf_function *unfused = vf_function_create(ctx, &d);
    vf_tensor *a[2], *b[2];
    assert_int_equal(vf_function_call(fused, &x, a), VF_OK);
    assert_int_equal(vf_function_call(unfused, &x, b), VF_OK);
    vf_function_stats fs, us;
    assert_int_equal(vf_function_stats_get(fused, &fs), VF_OK);
    assert_int_equal(vf_function_stats_get(unfused, &us), VF_OK);
    assert_true(fs.planned && us.planned);
    /* matmul, add, relu, mul, add, tanh, reduce_sum, neg, exp (+ fills) */
    assert_true(us.kernels >= 9);
    if (fs.kernels >= us.kernels) fail_msg("fused %d kernels, unfused %d", fs.kernels, us.kernels);
    for (int k = 0; k < 2; k++) {
        float *p = vt_read(a[k]), *q = vt_read(b[k]);
        vt_assert_close_f32(p, q, (size_t)vf_tensor_numel(a[k]), 1e-5, 1e-5, "fused vs unfused");
        free(p);
        free(q);
    }
    vf_function_destroy(fused);
    vf_function_destroy(unfused);
    vt_context_done(ctx);
}

/* two independent chains of four ops, one after the other in the graph */
static vf_status two_chains(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = in[0], *b = in[1];
    for (int i = 0; i < 2; i++) a = vf_neg(ctx, vf_exp(ctx, a));
    for (int i = 0; i < 2; i++) b = vf_abs(ctx, vf_tanh(ctx, b));
    out[0] = a, out[1] = b;
    return a && b ? VF_OK : vf_status_get(ctx);
}

/* Barrier batching: the chains share their barriers (3 between the four
   levels, one at each end), where plan order would need 6 in between. */
static void test_barrier_batching(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    vf_function_desc d = {.name = "two_chains", .body = two_chains, .n_inputs = 2, .n_outputs = 2, .unfused = true};
    vf_function *fn = vf_function_create(ctx, &d), *cfn = vf_function_create(cpu, &d);
    static float xs[2][3000];
    vt_fill_uniform(xs[0], 3000, -2, 2, 5);
    vt_fill_uniform(xs[1], 3000, -2, 2, 6);
    vf_tensor *in[2], *cin[2], *y[2], *cy[2];
    for (int k = 0; k < 2; k++) {
        in[k] = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){3000}, xs[k]);
        cin[k] = vf_tensor_from_host(cpu, VF_F32, 1, (int64_t[]){3000}, xs[k]);
    }
    for (int call = 0; call < 2; call++) {
        assert_int_equal(vf_function_call(fn, in, y), VF_OK);
        assert_int_equal(vf_function_call(cfn, cin, cy), VF_OK);
        for (int k = 0; k < 2; k++) {
            float *got = vt_read(y[k]), *want = vt_read(cy[k]);
            vt_assert_close_f32(got, want, 3000, 1e-5, 1e-5, "two chains vs cpu");
            free(got);
            free(want);
        }
        vf_function_stats fs;
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        assert_true(fs.planned);
        assert_int_equal(fs.dispatches_per_call, 8);
        assert_int_equal(fs.barriers_per_call, 2 + 3);
    }
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

/* t dies at two kernels of one level: exp(t) (elementwise, an arena value
   that may take t's bytes) and the sum of t (a reduction of its own). */
static vf_status exp_and_sum(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *t = vf_transpose(ctx, in[0], (int[]){1, 0});
    out[0] = vf_reduce_max(ctx, vf_exp(ctx, t), 0, NULL, false);
    out[1] = vf_reduce_sum(ctx, t, 0, NULL, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* In-place reuse must not let a kernel write over a value another kernel
   of the same level still reads: nothing orders them. On lavapipe the
   dispatches of a level run in plan order, so without the check
   (read_beside in src/plan/plan_order.c) the sum reads exp(t): 3604 instead
   of -4.47, seen. */
static void test_inplace_same_level(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    vf_function_desc d = {.name = "exp_and_sum", .body = exp_and_sum, .n_inputs = 1, .n_outputs = 2};
    vf_function *fn = vf_function_create(ctx, &d), *cfn = vf_function_create(cpu, &d);
    static float xs[64 * 48];
    vt_fill_uniform(xs, 64 * 48, -1, 1, 9);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){64, 48}, xs);
    vf_tensor *cin = vf_tensor_from_host(cpu, VF_F32, 2, (int64_t[]){64, 48}, xs);
    for (int call = 0; call < 2; call++) {
        vf_tensor *y[2], *cy[2];
        assert_int_equal(vf_function_call(fn, &in, y), VF_OK);
        assert_int_equal(vf_function_call(cfn, &cin, cy), VF_OK);
        for (int k = 0; k < 2; k++) {
            float *got = vt_read(y[k]), *want = vt_read(cy[k]);
            vt_assert_close_f32(got, want, 1, 1e-4, 1e-4, k ? "sum(t) vs cpu" : "max(exp(t)) vs cpu");
            free(got), free(want);
        }
    }
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_submit),
        cmocka_unit_test(test_variables),
        cmocka_unit_test(test_symbolic),
        cmocka_unit_test(test_memory_figures),
        cmocka_unit_test(test_guarded_cond),
        cmocka_unit_test(test_unfused_option),
        cmocka_unit_test(test_barrier_batching),
        cmocka_unit_test(test_inplace_same_level),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}