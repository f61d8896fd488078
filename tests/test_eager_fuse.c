/* Eager fusion (src/vulkan/eager_fuse.h): queued eager elementwise ops of
 * a repeated pattern run as one fused kernel once it is compiled.
 *
 * Each program below runs on three contexts: Vulkan with eager fusion (no
 * disk cache, so its fused kernels compile on the background thread), the
 * same with vf_context_desc.eager_fuse_off (one kernel per op, as before),
 * and the CPU backend. The fused context runs the program again and again
 * until a run goes through fused windows (vf_context_stats), and every
 * run's results must equal the unfused ones bit for bit and the CPU
 * backend's within rounding. The programs cover the hazards of holding
 * ops back: reads mid-chain, tensors released before the flush, freed
 * memory handed out again, variables written, other ops interleaved,
 * broadcasting, mixed dtypes, chains longer than a window. */
#include "testutil.h"
#include "util/fault.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 64
#define MAX_OUT 6
#define MAX_IN 6

typedef struct {
    vf_dtype dt;
    int rank;
    int64_t shape[2];
    bool plain;   /* no NaN, infinities or -0 */
} in_spec;

/* A program: fills out (at most MAX_OUT tensors, owned by the run's
   scope) and returns how many; mid receives bytes it read mid-chain (or
   nothing). */
typedef int (*prog_fn)(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

static double elem(const uint8_t *p, vf_dtype dt, int64_t i)
{
    switch (dt) {
    case VF_F32: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case VF_F16: { uint16_t h; memcpy(&h, p + 2 * i, 2); return half_to_double(h); }
    case VF_I32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case VF_U32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    default: return p[i];
    }
}

/* Host data of input k: a mix of signs, with a NaN, infinities and -0 in
   float inputs, so propagation is compared too. */
static void *make_input(const in_spec *s, int k)
{
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->shape[d];
    size_t es = vf_dtype_size(s->dt);
    uint8_t *p = calloc((size_t)n, es);
    float *f = malloc(sizeof *f * (size_t)n);
    vt_fill_uniform(f, (size_t)n, -2.0f, 2.0f, 100 + (uint64_t)k);
    if (n > 8 && !s->plain && (s->dt == VF_F32 || s->dt == VF_F16)) f[3] = NAN, f[5] = INFINITY, f[7] = -INFINITY, f[8] = -0.0f;
    for (int64_t i = 0; i < n; i++) {
        if (s->dt == VF_F32) memcpy(p + 4 * i, &f[i], 4);
        else if (s->dt == VF_I32) { int32_t v = (int32_t)(f[i] * 50); memcpy(p + 4 * i, &v, 4); }
        else if (s->dt == VF_BOOL) p[i] = f[i] > 0;
        else if (s->dt == VF_F16) { /* exact halves: multiples of 1/64 in [-2, 2] */
            float v = isfinite(f[i]) ? roundf(f[i] * 64) / 64 : f[i];
            uint16_t h;
            if (isnan(v)) h = 0x7e00;
            else if (isinf(v)) h = v > 0 ? 0x7c00 : 0xfc00;
            else if (v == 0) h = signbit(v) ? 0x8000 : 0;
            else { /* normal: |v| in [1/64, 2] */
                int e;
                double fr = frexp(fabs(v), &e);   /* |v| = fr * 2^e, fr in [0.5, 1) */
                h = (uint16_t)(((e - 1 + 15) << 10) | ((int)(fr * 2048) - 1024));
                if (v < 0) h |= 0x8000;
            }
            memcpy(p + 2 * i, &h, 2);
        }
    }
    free(f);
    return p;
}

typedef struct {
    int n_out;
    vf_dtype dt[MAX_OUT];
    int64_t numel[MAX_OUT];
    uint8_t *data[MAX_OUT];
    uint8_t mid[N * N * 4];
    int64_t dispatches, fused_windows, swaps;
} result;

static void result_free(result *r)
{
    for (int i = 0; i < r->n_out; i++) free(r->data[i]);
    memset(r, 0, sizeof *r);
}

/* One run of p on ctx in a scope of its own, its outputs read. */
static void run_once(vf_context *ctx, prog_fn p, const in_spec *spec, int n_in, result *r)
{
    memset(r, 0, sizeof *r);
    vf_context_stats s0, s1;
    vf_scope_begin(ctx);
    vf_tensor *in[MAX_IN] = {0};
    for (int k = 0; k < n_in; k++) {
        void *h = make_input(&spec[k], k);
        in[k] = vf_tensor_from_host(ctx, spec[k].dt, spec[k].rank, spec[k].shape, h);
        free(h);
        assert_non_null(in[k]);
    }
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    vf_context_stats_get(ctx, &s0);
    vf_tensor *out[MAX_OUT] = {0};
    memset(r->mid, 0xa5, sizeof r->mid);
    r->n_out = p(ctx, in, out, r->mid);
    if (vf_status_get(ctx) != VF_OK) fail_msg("program failed: %s", vf_error_message(ctx));
    for (int i = 0; i < r->n_out; i++) {
        assert_non_null(out[i]);
        r->dt[i] = vf_tensor_dtype(out[i]);
        r->numel[i] = vf_tensor_numel(out[i]);
        size_t bytes = (size_t)r->numel[i] * vf_dtype_size(r->dt[i]);
        r->data[i] = malloc(bytes);
        assert_int_equal(vf_tensor_read(out[i], r->data[i], bytes), VF_OK);
    }
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    vf_context_stats_get(ctx, &s1);
    r->dispatches = s1.dispatches - s0.dispatches;
    r->fused_windows = s1.eager_fused_windows - s0.eager_fused_windows;
    r->swaps = s1.eager_fuse_swaps;
    vf_scope_end(ctx);
}

static void compare(const result *got, const result *want, bool exact, const char *what)
{
    assert_int_equal(got->n_out, want->n_out);
    for (int i = 0; i < got->n_out; i++) {
        assert_int_equal(got->dt[i], want->dt[i]);
        assert_int_equal(got->numel[i], want->numel[i]);
        for (int64_t j = 0; j < got->numel[i]; j++) {
            double g = elem(got->data[i], got->dt[i], j), w = elem(want->data[i], want->dt[i], j);
            bool ok = exact ? (isnan(g) && isnan(w)) || (g == w && signbit(g) == signbit(w))
                            : (isnan(g) && isnan(w)) || g == w || fabs(g - w) <= 1e-4 + 1e-5 * fabs(w) ||
                                  (got->dt[i] == VF_F16 && fabs(g - w) <= 1e-3 * fabs(w));
            if (!ok)
                fail_msg("%s: output %d element %lld: got %.9g, want %.9g (%s)", what, i, (long long)j, g, w,
                         exact ? "bit for bit against unfused" : "against the CPU backend");
        }
    }
}

/* No disk cache: a fused kernel is compiled here, on the background
   thread, or (sync) at the second flush of its pattern on the calling
   thread (VKFUSE_COMPILE_THREADS=1), which is quicker to wait for. */
static vf_context *make_ctx_ex(vf_backend b, bool fuse_off, bool sync)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = b, .validation = val && strcmp(val, "1") == 0, .cache_dir = "",
                         .eager_fuse_off = fuse_off};
    if (sync) setenv("VKFUSE_COMPILE_THREADS", "1", 1);
    vf_context *ctx = NULL;
    vf_status st = vf_context_create(&d, &ctx);
    if (sync) unsetenv("VKFUSE_COMPILE_THREADS");
    if (st != VF_OK) fail_msg("no context on backend %d", (int)b);
    return ctx;
}

static vf_context *make_ctx(vf_backend b, bool fuse_off) { return make_ctx_ex(b, fuse_off, false); }

/* Runs p on the three contexts; the fused one until a run has min_fused
   fused windows (at most 60 s: a busy machine), its kernels compiled on
   the background thread or at their second flush. Every fused-context run equals the unfused run bit for bit.
   Returns the fused run's and the unfused run's dispatches. */
static void check_prog_n(prog_fn p, const in_spec *spec, int n_in, int min_fused, bool background,
                         int64_t *fused_dispatches, int64_t *unfused_dispatches)
{
    vf_context *fu = make_ctx_ex(VF_BACKEND_VULKAN, false, !background), *off = make_ctx(VF_BACKEND_VULKAN, true),
               *cpu = make_ctx(VF_BACKEND_CPU, false);
    result want, ref, got;
    run_once(off, p, spec, n_in, &want);
    run_once(cpu, p, spec, n_in, &ref);
    compare(&ref, &want, false, "unfused vulkan vs cpu");
    assert_int_equal(want.fused_windows, 0);
    double t0 = now_s();
    int runs = 0;
    for (;;) {
        run_once(fu, p, spec, n_in, &got);
        runs++;
        compare(&got, &want, true, runs == 1 ? "first run (tier 0)" : "a later run");
        if (got.fused_windows >= min_fused) break;
        if (now_s() - t0 > 60) fail_msg("no fused window after %d runs (%.1f s)", runs, now_s() - t0);
        result_free(&got);
        if (background) nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);   /* let the compile run */
    }
    assert_true(got.swaps > 0);
    assert_true(runs >= 2);   /* the first sighting of a pattern runs unfused */
    if (!background) assert_int_equal(runs, 2);   /* compiled at its second flush, run fused there */
    compare(&got, &ref, false, "fused vulkan vs cpu");
    if (fused_dispatches) *fused_dispatches = got.dispatches;
    if (unfused_dispatches) *unfused_dispatches = want.dispatches;
    result_free(&got);
    result_free(&want);
    result_free(&ref);
    vt_context_done(fu);
    vt_context_done(off);
    vt_context_done(cpu);
}

static void check_prog(prog_fn p, const in_spec *spec, int n_in, int64_t *fused_dispatches,
                       int64_t *unfused_dispatches)
{
    check_prog_n(p, spec, n_in, 1, false, fused_dispatches, unfused_dispatches);
}

static const in_spec sq3[3] = {{VF_F32, 2, {N, N}}, {VF_F32, 2, {N, N}}, {VF_F32, 2, {N, N}}};

/* ---- programs ---------------------------------------------------------------- */

/* Ten ops, every intermediate held: one window, ten results written. */
static int p_chain(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *a = in[0], *b = in[1], *c = in[2];
    vf_tensor *t1 = vf_add(ctx, a, b), *t2 = vf_mul(ctx, t1, c), *t3 = vf_sub(ctx, t2, b), *t4 = vf_neg(ctx, t3);
    vf_tensor *t5 = vf_maximum(ctx, t4, a), *t6 = vf_abs(ctx, t5), *t7 = vf_div(ctx, t6, c);
    vf_tensor *t8 = vf_tanh(ctx, t7), *t9 = vf_exp(ctx, t8), *t10 = vf_minimum(ctx, t9, t3);
    out[0] = t10, out[1] = t3, out[2] = t7;
    return 3;
}

static void test_chain_swaps(void **state)
{
    (void)state;
    int64_t fd = 0, ud = 0;
    check_prog_n(p_chain, sq3, 3, 1, true, &fd, &ud);   /* compiled on the background thread */
    assert_int_equal(ud, 10);   /* one kernel per op */
    assert_int_equal(fd, 1);    /* the window as one */
}

/* Each intermediate released as soon as the next op has it: only the
   last result is held at the flush, so the fused kernel writes only it. */
static int p_release(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *h = vf_add(ctx, in[0], in[1]);
    for (int i = 0; i < 8; i++) {
        vf_tensor *nx = i % 3 == 0 ? vf_mul(ctx, h, in[2]) : i % 3 == 1 ? vf_sub(ctx, h, in[0]) : vf_neg(ctx, h);
        vf_tensor_release(h);
        h = nx;
    }
    out[0] = h;
    return 1;
}

static void test_release_intermediates(void **state)
{
    (void)state;
    check_prog(p_release, sq3, 3, NULL, NULL);
}

/* An intermediate read mid-chain: the read must see the value (the window
   flushed first), and the chain goes on after it. */
static int p_read_mid(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    vf_tensor *t1 = vf_add(ctx, in[0], in[1]), *t2 = vf_mul(ctx, t1, in[2]), *t3 = vf_sub(ctx, t2, in[1]);
    if (vf_tensor_read(t2, mid, N * N * 4) != VF_OK) return 0;
    vf_tensor *t4 = vf_neg(ctx, t3), *t5 = vf_add(ctx, t4, t2);
    float got[N * N];
    if (vf_tensor_read(t2, got, sizeof got) != VF_OK) return 0;
    if (memcmp(got, mid, sizeof got) != 0) fail_msg("the read mid-chain differs from the value read later");
    out[0] = t5, out[1] = t2;
    return 2;
}

static void test_read_mid_chain(void **state)
{
    (void)state;
    check_prog(p_read_mid, sq3, 3, NULL, NULL);
}

/* A tensor released while the window still reads it, then a tensor of
   the same size made from host data: the memory cache must not hand the
   released memory out (and the host write land in it) before the window
   ran. At tier 0 the released t1 is written and read by the queued ops. */
static int p_reuse(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *t1 = vf_add(ctx, in[0], in[1]), *t2 = vf_mul(ctx, t1, in[2]), *t3 = vf_sub(ctx, t2, t1);
    vf_tensor_release(t1);
    float junk[N * N];
    for (int i = 0; i < N * N; i++) junk[i] = 1000.0f + (float)i;
    int64_t shape[2] = {N, N};
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, shape, junk);
    vf_tensor *t4 = vf_add(ctx, t3, x);
    out[0] = t4, out[1] = t3, out[2] = x;
    return 3;
}

static void test_freed_block_reuse(void **state)
{
    (void)state;
    check_prog(p_reuse, sq3, 3, NULL, NULL);
}

/* Writes into a variable: vf_assign (a copy into the variable's memory,
   read by the next op of the window) and vf_assign_add (in place: the
   window is flushed and the op runs alone). */
static int p_assign(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *v = vf_variable(ctx, in[2]);
    vf_tensor *t1 = vf_mul(ctx, in[0], in[1]);
    vf_tensor *r0 = vf_add(ctx, v, in[0]);   /* reads v before the assign */
    if (vf_assign(v, t1) != VF_OK) return 0;
    vf_tensor *t2 = vf_add(ctx, v, in[2]);
    if (vf_assign_add(v, t2) != VF_OK) return 0;
    vf_tensor *t3 = vf_mul(ctx, v, in[1]);
    out[0] = r0, out[1] = t2, out[2] = t3, out[3] = v;
    return 4;
}

static void test_assign_variable(void **state)
{
    (void)state;
    check_prog(p_assign, sq3, 3, NULL, NULL);
}

/* A matmul in the middle: it reads a queued result, and later queued ops
   read its result and the earlier ones. */
static int p_matmul(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *t1 = vf_add(ctx, in[0], in[1]), *t2 = vf_mul(ctx, t1, in[2]);
    vf_tensor *t2c = vf_minimum(ctx, vf_maximum(ctx, t2, in[1]), in[0]);
    vf_tensor *m = vf_matmul(ctx, t2c, in[1]);
    vf_tensor *t3 = vf_add(ctx, m, t1), *t4 = vf_sub(ctx, t3, t2c), *t5 = vf_neg(ctx, t4);
    out[0] = m, out[1] = t5, out[2] = t1;
    return 3;
}

static void test_matmul_interleaved(void **state)
{
    (void)state;
    /* inputs without NaN / Inf: the matmul would spread them everywhere */
    static const in_spec spec[3] = {{VF_F32, 2, {N, N}, true}, {VF_F32, 2, {N, N}, true}, {VF_F32, 2, {N, N}, true}};
    check_prog(p_matmul, spec, 3, NULL, NULL);
}

/* Broadcasting inputs ([64,1], [1,64], a scalar) to one window of [64,64],
   then an op of another shape (a window of its own). */
static int p_bcast(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *r = in[0], *c = in[1], *s = in[2];
    vf_tensor *t1 = vf_add(ctx, r, c), *t2 = vf_mul(ctx, t1, s), *t3 = vf_sub(ctx, t2, r), *t4 = vf_maximum(ctx, t3, c);
    vf_tensor *u1 = vf_mul(ctx, r, s), *u2 = vf_neg(ctx, u1);   /* [64,1] */
    vf_tensor *t5 = vf_add(ctx, t4, u2);
    out[0] = t5, out[1] = u2, out[2] = t2;
    return 3;
}

static void test_broadcast(void **state)
{
    (void)state;
    static const in_spec spec[3] = {{VF_F32, 2, {N, 1}}, {VF_F32, 2, {1, N}}, {VF_F32, 0, {0, 0}}};
    check_prog(p_bcast, spec, 3, NULL, NULL);
}

/* f16 arithmetic (rounded after every op), a comparison to bool, casts,
   where, and i32 arithmetic in one window. */
static int p_dtypes(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *h1 = in[0], *h2 = in[1], *i1 = in[2], *i2 = in[3];
    vf_tensor *t1 = vf_add(ctx, h1, h2), *t2 = vf_mul(ctx, t1, h1), *t3 = vf_sub(ctx, t2, h2);
    vf_tensor *g = vf_greater(ctx, t3, h2);
    vf_tensor *c = vf_cast(ctx, t3, VF_F32), *c2 = vf_cast(ctx, h1, VF_F32);
    vf_tensor *w = vf_where(ctx, g, c, c2);
    vf_tensor *ia = vf_mul(ctx, vf_add(ctx, i1, i2), i1);
    vf_tensor *o = vf_add(ctx, w, vf_cast(ctx, ia, VF_F32));
    out[0] = t3, out[1] = g, out[2] = o, out[3] = ia;
    return 4;
}

static void test_mixed_dtypes(void **state)
{
    (void)state;
    static const in_spec spec[4] = {{VF_F16, 2, {N, N}}, {VF_F16, 2, {N, N}}, {VF_I32, 2, {N, N}},
                                    {VF_I32, 2, {N, N}}};
    check_prog(p_dtypes, spec, 4, NULL, NULL);
}

/* 40 ops: longer than a window (at most 15 ops, 16 tensors), so several
   windows of the pattern each get their kernel. */
static int p_long(vf_context *ctx, vf_tensor **in, vf_tensor **out, uint8_t *mid)
{
    (void)mid;
    vf_tensor *h = in[0];
    for (int i = 0; i < 40; i++)
        switch (i % 4) {
        case 0: h = vf_add(ctx, h, in[1]); break;
        case 1: h = vf_mul(ctx, h, in[2]); break;
        case 2: h = vf_sub(ctx, h, in[1]); break;
        default: h = vf_neg(ctx, h); break;
        }
    out[0] = h;
    return 1;
}

static void test_longer_than_window(void **state)
{
    (void)state;
    int64_t fd = 0, ud = 0;
    /* 13 ops per window (3 inputs and 13 results: 16 bindings): 13 + 13 + 13
       fused, the last op alone */
    check_prog_n(p_long, sq3, 3, 3, true, &fd, &ud);
    assert_int_equal(ud, 40);
    assert_int_equal(fd, 4);
}

/* VKFUSE_EAGER_FUSE=0 turns it off: a repeated chain never swaps. With
   VKFUSE_COMPILE_THREADS=1 the fused kernel is compiled at the second
   flush of its pattern, so with fusion on the second run would be fused. */
static void test_env_off(void **state)
{
    (void)state;
    setenv("VKFUSE_EAGER_FUSE", "0", 1);
    setenv("VKFUSE_COMPILE_THREADS", "1", 1);
    vf_context *ctx = make_ctx(VF_BACKEND_VULKAN, false);
    unsetenv("VKFUSE_EAGER_FUSE");
    unsetenv("VKFUSE_COMPILE_THREADS");
    result r;
    for (int i = 0; i < 4; i++) {
        run_once(ctx, p_chain, sq3, 3, &r);
        assert_int_equal(r.dispatches, 10);
        assert_int_equal(r.fused_windows, 0);
        assert_int_equal(r.swaps, 0);
        result_free(&r);
    }
    vt_context_done(ctx);
}

/* A device fault while a fused window runs is reported by the call that
   flushed it (the read), as for unfused ops: the submit fails (device
   lost) after the window was recorded as one fused dispatch. */
static void test_fault_in_fused_flush(void **state)
{
    (void)state;
    setenv("VKFUSE_COMPILE_THREADS", "1", 1);   /* fused from the second run on */
    vf_context *ctx = make_ctx(VF_BACKEND_VULKAN, false);
    unsetenv("VKFUSE_COMPILE_THREADS");
    result r;
    for (int i = 0; i < 2; i++) {
        run_once(ctx, p_chain, sq3, 3, &r);
        result_free(&r);
    }
    vf_scope_begin(ctx);
    vf_tensor *in[3];
    for (int k = 0; k < 3; k++) {
        void *h = make_input(&sq3[k], k);
        in[k] = vf_tensor_from_host(ctx, VF_F32, 2, sq3[k].shape, h);
        free(h);
    }
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    vf_context_stats s0, s1;
    vf_context_stats_get(ctx, &s0);
    vf_tensor *out[MAX_OUT];
    uint8_t mid[N * N * 4];
    p_chain(ctx, in, out, mid);
    vf_err e = {0};
    assert_int_equal(vf_fault_set("vkQueueSubmit:1+:device_lost", false, &e), VF_OK);
    float got[N * N];
    vf_status st = vf_tensor_read(out[0], got, sizeof got);
    assert_int_equal(vf_fault_set(NULL, false, &e), VF_OK);
    assert_int_equal(st, VF_ERROR_DEVICE);
    vf_context_stats_get(ctx, &s1);
    assert_int_equal(s1.eager_fused_windows - s0.eager_fused_windows, 1);   /* it was the fused window */
    assert_true(vf_context_lost(ctx));
    vf_error_clear(ctx);
    vf_scope_end(ctx);
    vf_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    if (!vt_have_vulkan()) return 0;
    if (argc > 1) cmocka_set_test_filter(argv[1]);   /* one test by name, e.g. test_broadcast */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_swaps),
        cmocka_unit_test(test_release_intermediates),
        cmocka_unit_test(test_read_mid_chain),
        cmocka_unit_test(test_freed_block_reuse),
        cmocka_unit_test(test_assign_variable),
        cmocka_unit_test(test_matmul_interleaved),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_mixed_dtypes),
        cmocka_unit_test(test_longer_than_window),
        cmocka_unit_test(test_env_off),
        cmocka_unit_test(test_fault_in_fused_flush),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
