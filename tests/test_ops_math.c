/* The elementwise math ops of issue 13 through the public API, beyond the
 * shared tables (test_cpu_elementwise: CPU against double references;
 * grad_cases via test_tape: gradients against finite differences); the
 * reductions are tests/test_ops_math_reduce.c:
 *  - edge values on both backends, bit for bit against expected values
 *    written here (signed zeros, halves, NaN, Inf, ratios past 2^24,
 *    INT_MIN), and Vulkan against the CPU backend on random data, f32,
 *    f16 and i32 where the op takes it;
 *  - erf's error on Vulkan against C's double erf over a dense sweep;
 *  - traced against eager on both backends, saved and loaded against
 *    traced, and on Vulkan fused (one kernel for the whole elementwise
 *    chain) against unfused;
 *  - stop_gradient's gradient, eager and in a traced tape, and the zero
 *    gradients of floor / ceil / round / sign;
 *  - bad arguments: a status and a message naming the problem.
 *
 * Tolerances (|got - want| <= atol + rtol |want|): floor ceil round sign
 * mod (f32) clip leaky_relu logical ops stop_gradient: exact;
 * erf log1p expm1 softplus on Vulkan: 2e-7 absolute + 2e-6 relative (a
 * few ulps; f16: 1e-3, one f16 rounding).
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef vf_tensor *(*unop)(vf_context *, vf_tensor *);

/* ---- fusion and tracing ------------------------------------------------- */

/* Every elementwise op of issue 13 in one chain over x [R, C] (y [C]):
   softplus, erf, log1p, expm1, leaky_relu, clip, floor / ceil / round /
   sign, mod, the logical ops as a where, stop_gradient. */
enum { R = 37, C = 29 };

static vf_status chain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *y = in[1]; /* y only in binary ops: [C] ops alone would be groups of their own */
    vf_tensor *a = vf_add(ctx, vf_softplus(ctx, x), vf_erf(ctx, vf_mul(ctx, x, y)));
    vf_tensor *b = vf_mul(ctx, vf_log1p(ctx, vf_abs(ctx, x)), vf_expm1(ctx, vf_leaky_relu(ctx, x, 0.1)));
    vf_tensor *c = vf_clip(ctx, vf_add(ctx, a, b), -2.0, 3.5);
    vf_tensor *r = vf_add(ctx, vf_add(ctx, vf_floor(ctx, c), vf_ceil(ctx, x)), vf_mul(ctx, vf_round(ctx, b),
                                                                                   vf_sign(ctx, vf_sub(ctx, x, y))));
    /* a divisor away from 0: r mod d amplifies the few ulps between backends by r / d */
    vf_tensor *m = vf_mod(ctx, vf_stop_gradient(ctx, r), vf_clip(ctx, vf_add(ctx, c, y), 0.75, 4.0));
    vf_tensor *p = vf_greater(ctx, x, y), *q = vf_less(ctx, c, m);
    vf_tensor *sel = vf_logical_or(ctx, vf_logical_and(ctx, p, q), vf_logical_not(ctx, p));
    out[0] = vf_where(ctx, sel, m, c);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static float *run_chain(vf_backend b, int mode, const float *x, const float *y, int *kernels)
{
    vf_context *ctx = vt_context(b);
    vf_scope_begin(ctx);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, x),
                        vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){C}, y)};
    vf_tensor *out = NULL;
    if (mode == 0) { /* eager */
        assert_int_equal(chain(ctx, in, &out, NULL), VF_OK);
    } else {         /* traced, 1 fused, 2 unfused, 3 fused then saved and loaded */
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "math", .body = chain, .n_inputs = 2,
                                                                      .n_outputs = 1, .unfused = mode == 2});
        assert_int_equal(vf_function_call(fn, in, &out), VF_OK);
        assert_int_equal(vf_function_call(fn, in, &out), VF_OK); /* the recorded plan */
        vf_function_stats fs;
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        *kernels = fs.kernels;
        /* stop_gradient is an identity the passes remove (the tape acted at trace time) */
        char *g = vf_function_graph_text(fn);
        assert_non_null(g);
        assert_null(strstr(g, "stop_gradient"));
        assert_non_null(strstr(g, "mod("));
        free(g);
        if (mode == 3) { /* saved, loaded, called: op numbers and constants survive the file */
            char path[] = "/tmp/vf_math_XXXXXX";
            int fd = mkstemp(path);
            assert_true(fd >= 0);
            close(fd);
            assert_int_equal(vf_function_save(fn, path), VF_OK);
            vf_function_destroy(fn);
            fn = NULL;
            assert_int_equal(vf_function_load(ctx, path, &fn), VF_OK);
            unlink(path);
            assert_int_equal(vf_function_call(fn, in, &out), VF_OK);
        }
        vf_function_destroy(fn);
    }
    float *r = vt_read(out);
    vf_scope_end(ctx);
    vt_context_done(ctx);
    return r;
}

static void test_chain_traced_fused(void **state)
{
    (void)state;
    float x[R * C], y[C];
    vt_fill_uniform(x, R * C, -3, 3, 1);
    vt_fill_uniform(y, C, -2, 2, 2);
    x[0] = NAN, x[1] = INFINITY, x[2] = -INFINITY, x[3] = -0.0f, x[4] = 2.5f, x[5] = -0.5f;
    int k = 0, kf = 0, ku = 0;
    float *want = run_chain(VF_BACKEND_CPU, 0, x, y, &k);
    float *ct = run_chain(VF_BACKEND_CPU, 1, x, y, &k), *cl = run_chain(VF_BACKEND_CPU, 3, x, y, &k);
    /* the CPU backend's fused plan computes every value as eager does; a
       NaN's sign may differ where two NaNs meet (testutil.h) */
    vt_assert_same_f32(ct, want, R * C, "CPU traced vs eager");
    vt_assert_same_f32(cl, want, R * C, "CPU saved and loaded vs eager");
    free(ct), free(cl);
    if (vt_have_vulkan()) {
        float *ve = run_chain(VF_BACKEND_VULKAN, 0, x, y, &k);
        float *vf = run_chain(VF_BACKEND_VULKAN, 1, x, y, &kf);
        float *vu = run_chain(VF_BACKEND_VULKAN, 2, x, y, &ku), *vl = run_chain(VF_BACKEND_VULKAN, 3, x, y, &k);
        vt_assert_equal_bytes(vl, vf, sizeof x, "Vulkan saved and loaded vs traced");
        free(vl);
        printf("chain: %d kernels fused, %d unfused\n", kf, ku);
        vt_assert_close_f32(ve, want, R * C, 1e-5, 1e-5, "Vulkan eager vs CPU");
        vt_assert_equal_bytes(vf, vu, sizeof x, "Vulkan fused vs unfused");
        vt_assert_close_f32(vf, ve, R * C, 1e-5, 1e-5, "Vulkan traced vs eager");
        assert_int_equal(kf, 1);
        assert_true(ku > 20);
        free(ve), free(vf), free(vu);
    }
    free(want);
}

/* ---- edge values, bit for bit on both backends ---------------------------- */

static vf_tensor *host(vf_context *ctx, vf_dtype dt, int rank, const int64_t *shape, const void *data)
{
    return vf_tensor_from_host(ctx, dt, rank, shape, data);
}

/* got and want equal bit for bit, but any NaN matches any NaN */
static void expect_f32(const float *got, const float *want, int n, const char *what, const char *dev)
{
    for (int i = 0; i < n; i++) {
        if (isnan(want[i]) && isnan(got[i])) continue;
        if (memcmp(&got[i], &want[i], 4) != 0)
            fail_msg("%s on %s: element %d: got %.9g, want %.9g", what, dev, i, got[i], want[i]);
    }
}

static void edges(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const char *dev = vf_device_name(ctx);
    vf_scope_begin(ctx);
    enum { NE = 14 };
    static const float x[NE] = {-0.0f, 0.0f, -0.5f, 0.5f, 1.5f, -1.5f, 2.5f, NAN, INFINITY, -INFINITY, 1e30f, -1e-30f,
                                8388609.0f, 0.49999997f};
    static const float wf[NE] = {-0.0f, 0.0f, -1, 0, 1, -2, 2, NAN, INFINITY, -INFINITY, 1e30f, -1, 8388609.0f, 0};
    static const float wc[NE] = {-0.0f, 0.0f, -0.0f, 1, 2, -1, 3, NAN, INFINITY, -INFINITY, 1e30f, -0.0f, 8388609.0f, 1};
    static const float wr[NE] = {-0.0f, 0.0f, -0.0f, 0, 2, -2, 2, NAN, INFINITY, -INFINITY, 1e30f, -0.0f, 8388609.0f, 0};
    static const float ws[NE] = {-0.0f, 0.0f, -1, 1, 1, -1, 1, NAN, 1, -1, 1, -1, 1, 1};
    const unop fns[4] = {vf_floor, vf_ceil, vf_round, vf_sign};
    const float *wants[4] = {wf, wc, wr, ws};
    const char *names[4] = {"floor", "ceil", "round", "sign"};
    vf_tensor *tx = host(ctx, VF_F32, 1, (int64_t[]){NE}, x);
    for (int k = 0; k < 4; k++) {
        float *got = vt_read(fns[k](ctx, tx));
        expect_f32(got, wants[k], NE, names[k], dev);
        free(got);
    }
    /* f16: halves round to even */
    static const float h[6] = {0.5f, 1.5f, 2.5f, -2.5f, -0.5f, 65504.0f}, wh[6] = {0, 2, 2, -2, -0.0f, 65504.0f};
    float *gh = vt_read(vf_cast(ctx, vf_round(ctx, vf_cast(ctx, host(ctx, VF_F32, 1, (int64_t[]){6}, h), VF_F16)), VF_F32));
    expect_f32(gh, wh, 6, "round f16", dev);
    free(gh);
    static const int32_t si[5] = {INT32_MIN, -7, 0, 7, INT32_MAX}, wsi[5] = {-1, -1, 0, 1, 1};
    int32_t *gsi = vt_read(vf_sign(ctx, host(ctx, VF_I32, 1, (int64_t[]){5}, si)));
    vt_assert_equal_bytes(gsi, wsi, sizeof wsi, "sign i32");
    free(gsi);

    /* mod: floor modulo, b's sign, zeros included */
    enum { NM = 20 };
    static const float ma[NM] = {5.5f, -5.5f, 5.5f, -5.5f, 4, -4, 4, 1e10f, -1e10f, 1e30f, 0.1f, INFINITY, 3, -3, 3,
                                 -0.0f, NAN, 7, 1e-30f, -1e-30f};
    static const float mb[NM] = {2, 2, -2, -2, 2, 2, -2, 3, 3, 7, 0, 2, INFINITY, INFINITY, -INFINITY,
                                 5, 1, NAN, 1, 1};
    /* 1e30f mod 7: 1e30f = 1000000015047466219876688855040, whose remainder by 7 is 1 */
    static const float wm[NM] = {1.5f, 0.5f, -0.5f, -1.5f, 0, 0, -0.0f, 1, 2, 1, NAN, NAN, 3, INFINITY,
                                 -INFINITY, 0, NAN, NAN, 1e-30f, 1};
    float *gm = vt_read(vf_mod(ctx, host(ctx, VF_F32, 1, (int64_t[]){NM}, ma), host(ctx, VF_F32, 1, (int64_t[]){NM}, mb)));
    expect_f32(gm, wm, NM, "mod f32", dev);
    free(gm);
    static const int32_t ia[9] = {7, -7, 7, -7, INT32_MIN, INT32_MIN, 5, INT32_MAX, 0};
    static const int32_t ib[9] = {3, 3, -3, -3, -1, 7, 0, INT32_MIN, -5};
    static const int32_t wi[9] = {1, 2, -2, -1, 0, 5, 0, -1, 0};
    int32_t *gi = vt_read(vf_mod(ctx, host(ctx, VF_I32, 1, (int64_t[]){9}, ia), host(ctx, VF_I32, 1, (int64_t[]){9}, ib)));
    vt_assert_equal_bytes(gi, wi, sizeof wi, "mod i32");
    free(gi);
    static const uint32_t ua[3] = {7, 5, 0xffffffffu}, ub[3] = {3, 0, 10}, wu[3] = {1, 0, 5};
    uint32_t *gu = vt_read(vf_mod(ctx, host(ctx, VF_U32, 1, (int64_t[]){3}, ua), host(ctx, VF_U32, 1, (int64_t[]){3}, ub)));
    vt_assert_equal_bytes(gu, wu, sizeof wu, "mod u32");
    free(gu);

    /* clip, leaky_relu */
    static const float cx[8] = {NAN, -INFINITY, INFINITY, -0.0f, 0.0f, -1, 5, 2.5f};
    static const float wcl[8] = {NAN, -1, 2.5f, -0.0f, 0.0f, -1, 2.5f, 2.5f};
    float *gc = vt_read(vf_clip(ctx, host(ctx, VF_F32, 1, (int64_t[]){8}, cx), -1, 2.5));
    expect_f32(gc, wcl, 8, "clip f32", dev);
    free(gc);
    float *gcinf = vt_read(vf_clip(ctx, host(ctx, VF_F32, 1, (int64_t[]){8}, cx), -INFINITY, 0));
    static const float wcinf[8] = {NAN, -INFINITY, 0, -0.0f, 0.0f, -1, 0, 0};
    expect_f32(gcinf, wcinf, 8, "clip f32 to [-inf, 0]", dev);
    free(gcinf);
    static const int32_t cxi[7] = {-5, -2, 0, 3, 4, INT32_MIN, INT32_MAX}, wci[7] = {-2, -2, 0, 3, 3, -2, 3};
    int32_t *gci = vt_read(vf_clip(ctx, host(ctx, VF_I32, 1, (int64_t[]){7}, cxi), -2.5, 3.7));
    vt_assert_equal_bytes(gci, wci, sizeof wci, "clip i32 to [-2.5, 3.7]");
    free(gci);
    static const uint32_t cxu[4] = {0, 1, 7, 0xffffffffu}, wcu[4] = {0, 1, 2, 2};
    uint32_t *gcu = vt_read(vf_clip(ctx, host(ctx, VF_U32, 1, (int64_t[]){4}, cxu), -5, 2.5));
    vt_assert_equal_bytes(gcu, wcu, sizeof wcu, "clip u32 to [-5, 2.5]");
    free(gcu);
    static const float lx[6] = {-2, 2, -0.0f, NAN, -INFINITY, INFINITY};
    const float wl[6] = {-2 * 0.2f, 2, -0.0f, NAN, -INFINITY, INFINITY};
    float *gl = vt_read(vf_leaky_relu(ctx, host(ctx, VF_F32, 1, (int64_t[]){6}, lx), 0.2));
    expect_f32(gl, wl, 6, "leaky_relu", dev);
    free(gl);

    /* logical ops, broadcast: a [2, 1], b [2] */
    static const uint8_t la[2] = {0, 1}, lb[2] = {0, 1};
    static const uint8_t wand[4] = {0, 0, 0, 1}, wor[4] = {0, 1, 1, 1}, wnot[2] = {1, 0};
    vf_tensor *ta = host(ctx, VF_BOOL, 2, (int64_t[]){2, 1}, la), *tb = host(ctx, VF_BOOL, 1, (int64_t[]){2}, lb);
    uint8_t *g1 = vt_read(vf_logical_and(ctx, ta, tb)), *g2 = vt_read(vf_logical_or(ctx, ta, tb)),
            *g3 = vt_read(vf_logical_not(ctx, ta));
    vt_assert_equal_bytes(g1, wand, 4, "logical_and");
    vt_assert_equal_bytes(g2, wor, 4, "logical_or");
    vt_assert_equal_bytes(g3, wnot, 2, "logical_not");
    free(g1), free(g2), free(g3);

    /* stop_gradient: the value itself, any dtype */
    int32_t *gsg = vt_read(vf_stop_gradient(ctx, host(ctx, VF_I32, 1, (int64_t[]){9}, ia)));
    vt_assert_equal_bytes(gsg, ia, sizeof ia, "stop_gradient i32");
    free(gsg);

    /* empty inputs: empty results of the broadcast shape */
    float none[3] = {0, 0, 0};
    vf_tensor *e0 = host(ctx, VF_F32, 2, (int64_t[]){0, 3}, none), *e1 = host(ctx, VF_F32, 1, (int64_t[]){3}, none);
    vf_tensor *ei0 = host(ctx, VF_I32, 2, (int64_t[]){0, 3}, none);
    vf_tensor *eb0 = host(ctx, VF_BOOL, 2, (int64_t[]){0, 3}, none);
    vf_tensor *empties[] = {vf_erf(ctx, e0), vf_softplus(ctx, e0), vf_round(ctx, e0), vf_mod(ctx, e0, e1),
                            vf_clip(ctx, ei0, -1, 1), vf_leaky_relu(ctx, e0, 0.5), vf_logical_and(ctx, eb0, eb0),
                            vf_logical_not(ctx, eb0), vf_sign(ctx, ei0), vf_stop_gradient(ctx, eb0)};
    for (size_t k = 0; k < sizeof empties / sizeof *empties; k++) {
        assert_non_null(empties[k]);
        assert_int_equal(vf_tensor_numel(empties[k]), 0);
        assert_int_equal(vf_tensor_dim(empties[k], 1), 3);
    }

    /* the special functions at their edges (tolerance: see the top) */
    enum { NS = 7 };
    static const float sx[NS] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-10f, -1e-10f, 0.0f};
    static const float we[NS] = {NAN, 1, -1, -0.0f, 1.1283791e-10f, -1.1283791e-10f, 0.0f};
    static const float wlp[NS] = {NAN, INFINITY, NAN, -0.0f, 1e-10f, -1e-10f, 0.0f};
    static const float wem[NS] = {NAN, INFINITY, -1, -0.0f, 1e-10f, -1e-10f, 0.0f};
    static const float wsp[NS] = {NAN, INFINITY, 0, 0.69314718f, 0.69314718f, 0.69314718f, 0.69314718f};
    vf_tensor *ts = host(ctx, VF_F32, 1, (int64_t[]){NS}, sx);
    const unop sf[4] = {vf_erf, vf_log1p, vf_expm1, vf_softplus};
    const float *sw[4] = {we, wlp, wem, wsp};
    const char *sn[4] = {"erf", "log1p", "expm1", "softplus"};
    for (int k = 0; k < 4; k++) {
        float *got = vt_read(sf[k](ctx, ts));
        char what[64];
        snprintf(what, sizeof what, "%s edges on %s", sn[k], dev);
        vt_assert_close_f32(got, sw[k], NS, 0, 2e-6, what);
        for (int i = 0; i < NS; i++) /* and the signs of zeros */
            if (sw[k][i] == 0 && signbit(got[i]) != signbit(sw[k][i])) fail_msg("%s: element %d: sign of zero", what, i);
        free(got);
    }
    static const float lpx[3] = {-1, -2, 100}, wlp2[3] = {-INFINITY, NAN, 4.6151205f};
    float *glp = vt_read(vf_log1p(ctx, host(ctx, VF_F32, 1, (int64_t[]){3}, lpx)));
    vt_assert_close_f32(glp, wlp2, 3, 0, 2e-6, "log1p(-1, -2, 100)");
    free(glp);
    static const float spx[3] = {-80, 80, 100}, wsp2[3] = {1.8048513e-35f, 80, 100};
    float *gsp = vt_read(vf_softplus(ctx, host(ctx, VF_F32, 1, (int64_t[]){3}, spx)));
    vt_assert_close_f32(gsp, wsp2, 3, 0, 2e-6, "softplus(-80, 80, 100): no overflow, exp(x) below");
    free(gsp);
    static const float emx[2] = {100, -100}, wem2[2] = {INFINITY, -1};
    float *gem = vt_read(vf_expm1(ctx, host(ctx, VF_F32, 1, (int64_t[]){2}, emx)));
    vt_assert_close_f32(gem, wem2, 2, 0, 0, "expm1(100, -100)");
    free(gem);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}
VT_PER_BACKEND(edges)

/* ---- Vulkan against the CPU backend on random data ------------------------ */

typedef vf_tensor *(*build_fn)(vf_context *, vf_tensor **, const void *);
static vf_tensor *b_un(vf_context *ctx, vf_tensor **t, const void *fn) { return ((unop)fn)(ctx, t[0]); }
static vf_tensor *b_mod(vf_context *ctx, vf_tensor **t, const void *u) { (void)u; return vf_mod(ctx, t[0], t[1]); }
static vf_tensor *b_clip(vf_context *ctx, vf_tensor **t, const void *u) { (void)u; return vf_clip(ctx, t[0], -1.25, 3); }
static vf_tensor *b_leaky(vf_context *ctx, vf_tensor **t, const void *u) { (void)u; return vf_leaky_relu(ctx, t[0], 0.3); }

/* Inputs: x [n] and y [n] (random, dtype dt; y for mod only), through
   build on both backends. */
static void vk_vs_cpu(vf_context *cpu, vf_context *vk, const char *what, build_fn build, const void *arg, vf_dtype dt,
                      int64_t n, double atol, double rtol)
{
    float *f = malloc(sizeof(float) * (size_t)n * 2);
    vt_fill_uniform(f, (size_t)n * 2, -6, 6, (uint64_t)n);
    for (int64_t i = 0; i + 8 < n; i += 97) { /* specials */
        f[i] = NAN, f[i + 1] = INFINITY, f[i + 2] = -INFINITY, f[i + 3] = -0.0f, f[i + 4] = 2.5f;
        f[i + 5] = -1e-7f, f[i + 6] = 1e-3f, f[i + 7] = 60;
    }
    int32_t *iv = malloc(sizeof(int32_t) * (size_t)n * 2);
    vt_fill_int(iv, (size_t)n * 2, -1000, 1000, (uint64_t)n);
    void *res[2];
    vf_context *cs[2] = {cpu, vk};
    for (int b = 0; b < 2; b++) {
        vf_scope_begin(cs[b]);
        vf_tensor *t[2];
        for (int k = 0; k < 2; k++) {
            t[k] = dt == VF_I32 ? host(cs[b], VF_I32, 1, &n, iv + k * n) : host(cs[b], VF_F32, 1, &n, f + k * n);
            if (dt == VF_F16) t[k] = vf_cast(cs[b], t[k], VF_F16);
        }
        vf_tensor *out = build(cs[b], t, arg);
        if (dt == VF_F16) out = vf_cast(cs[b], out, VF_F32);
        if (!out) fail_msg("%s: %s", what, vf_error_message(cs[b]));
        res[b] = vt_read(out);
        vf_scope_end(cs[b]);
    }
    if (dt == VF_I32) vt_assert_equal_bytes(res[1], res[0], (size_t)n * 4, what);
    else vt_assert_close_f32(res[1], res[0], (size_t)n, atol, rtol, what);
    free(res[0]), free(res[1]), free(f), free(iv);
}

static void test_vulkan_matches_cpu(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *cpu = vt_context(VF_BACKEND_CPU), *vk = vt_context(VF_BACKEND_VULKAN);
    static const struct {
        const char *name;
        unop fn;
        int ints, exact;
    } un[] = {{"floor", vf_floor, 0, 1}, {"ceil", vf_ceil, 0, 1},       {"round", vf_round, 0, 1},
              {"sign", vf_sign, 1, 1},   {"erf", vf_erf, 0, 0},         {"log1p", vf_log1p, 0, 0},
              {"expm1", vf_expm1, 0, 0}, {"softplus", vf_softplus, 0, 0}, {"stop_gradient", vf_stop_gradient, 1, 1}};
    static const int64_t sizes[] = {1, 1031, 65537};
    char what[96];
    for (size_t o = 0; o < sizeof un / sizeof *un; o++)
        for (int s = 0; s < 3; s++)
            for (int d = 0; d < 3; d++) {
                vf_dtype dt = d == 0 ? VF_F32 : d == 1 ? VF_F16 : VF_I32;
                if (dt == VF_I32 && !un[o].ints) continue;
                if (dt != VF_F32 && s == 2) continue;
                snprintf(what, sizeof what, "%s %s n=%lld", un[o].name, vf_dtype_name(dt), (long long)sizes[s]);
                /* f16: both compute in f32/double and round to f16 */
                double atol = un[o].exact ? 0 : dt == VF_F16 ? 1e-3 : 2e-7, rtol = un[o].exact ? 0 : dt == VF_F16 ? 1e-3 : 2e-6;
                vk_vs_cpu(cpu, vk, what, b_un, (const void *)un[o].fn, dt, sizes[s], atol, rtol);
            }
    for (int d = 0; d < 3; d++) {
        vf_dtype dt = d == 0 ? VF_F32 : d == 1 ? VF_F16 : VF_I32;
        /* mod f32: exact; one rounding of r + b in f32 (Vulkan) or in double then f32 (CPU) */
        snprintf(what, sizeof what, "mod %s", vf_dtype_name(dt));
        vk_vs_cpu(cpu, vk, what, b_mod, NULL, dt, 4099, dt == VF_F16 ? 1e-3 : 0, dt == VF_F16 ? 1e-3 : 1.2e-7);
        snprintf(what, sizeof what, "clip %s", vf_dtype_name(dt));
        vk_vs_cpu(cpu, vk, what, b_clip, NULL, dt, 4099, 0, 0);
        if (dt != VF_I32) {
            snprintf(what, sizeof what, "leaky_relu %s", vf_dtype_name(dt));
            vk_vs_cpu(cpu, vk, what, b_leaky, NULL, dt, 4099, 0, 0);
        }
    }
    vt_context_done(cpu);
    vt_context_done(vk);
}

/* erf on Vulkan over [-5, 5] in steps of 2^-14 against C's double erf:
   the GLSL approximation (shaders/prelude.glsl vf_erf) is within 2e-7
   absolute; log1p and expm1 over |x| in [1e-12, 1], where the naive forms
   lose every digit near 0, within 6 ulps relative (measured: 1.7e-7 and
   2.3e-7 on lavapipe). */
static void test_special_accuracy(void **state)
{
    (void)state;
    vf_backend bs[2];
    int nb = vt_backends(bs);
    enum { N = 163841 };
    float *x = malloc(sizeof(float) * N), *t = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = -5.0f + (float)i * 0x1p-14f;
    for (int i = 0; i < N; i++) { /* tiny to moderate magnitudes, both signs */
        double m = pow(10.0, -12.0 + 12.0 * i / (double)N);
        t[i] = (float)(i & 1 ? -m : m);
    }
    for (int b = 0; b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_scope_begin(ctx);
        float *e = vt_read(vf_erf(ctx, host(ctx, VF_F32, 1, (int64_t[]){N}, x)));
        vf_tensor *tt = host(ctx, VF_F32, 1, (int64_t[]){N}, t);
        float *lp = vt_read(vf_log1p(ctx, tt)), *em = vt_read(vf_expm1(ctx, tt));
        double emax = 0, lmax = 0, mmax = 0;
        for (int i = 0; i < N; i++) {
            double w = erf((double)x[i]);
            emax = fmax(emax, fabs(e[i] - w));
            if (!(fabs(e[i] - w) <= 2e-7 * fmax(fabs(w), 1e-30 / 2e-7) + 2e-7 * fmin(1.0, fabs(w) * 1e3)))
                fail_msg("erf(%.9g) on %s: %.9g, want %.9g", x[i], vf_device_name(ctx), e[i], w);
            double wl = log1p((double)t[i]), wm = expm1((double)t[i]);
            lmax = fmax(lmax, fabs(lp[i] - wl) / fabs(wl));
            mmax = fmax(mmax, fabs(em[i] - wm) / fabs(wm));
        }
        printf("%s: erf max abs error %.3g, log1p / expm1 max rel error near 0 %.3g / %.3g\n", vf_device_name(ctx),
               emax, lmax, mmax);
        assert_true(emax <= 2e-7);
        assert_true(lmax <= 3.6e-7 && mmax <= 3.6e-7);
        free(e), free(lp), free(em);
        vf_scope_end(ctx);
        vt_context_done(ctx);
    }
    free(x), free(t);
}

/* ---- gradients the finite differences cannot check --------------------- */

/* the gradient of sum(x sg(x) + sg(x)) taken inside a traced body: the
   passes drop stop_gradient from the graph after the tape has acted */
static vf_status sg_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *sg = vf_stop_gradient(ctx, x);
    vf_status st = vf_tape_gradient(tp, vf_reduce_sum(ctx, vf_add(ctx, vf_mul(ctx, x, sg), sg), 0, NULL, false), 1,
                                    &in[0], out);
    vf_tape_end(tp);
    return st;
}

static void grads(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_scope_begin(ctx);
    /* stop_gradient: d/dx sum(x * stop_gradient(x) + stop_gradient(x)) = x */
    static const float s[4] = {1.5f, -2, 0.25f, 3};
    vf_tensor *ts = host(ctx, VF_F32, 1, (int64_t[]){4}, s), *gs = NULL;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *sg = vf_stop_gradient(ctx, ts);
    assert_int_equal(vf_tape_gradient(tp, vf_reduce_sum(ctx, vf_add(ctx, vf_mul(ctx, ts, sg), sg), 0, NULL, false), 1,
                                      &ts, &gs), VF_OK);
    vf_tape_end(tp);
    float *gsg = vt_read(gs);
    vt_assert_equal_bytes(gsg, s, sizeof s, "stop_gradient");
    free(gsg);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sg", .body = sg_body, .n_inputs = 1,
                                                                  .n_outputs = 1});
    vf_tensor *gt = NULL;
    assert_int_equal(vf_function_call(fn, &ts, &gt), VF_OK);
    assert_int_equal(vf_function_call(fn, &ts, &gt), VF_OK);
    float *gtr = vt_read(gt);
    vt_assert_equal_bytes(gtr, s, sizeof s, "stop_gradient in a traced tape");
    free(gtr);
    vf_function_destroy(fn);

    /* floor, ceil, round, sign: zeros, not an error; a source only
       reached through stop_gradient: zeros */
    const unop zf[5] = {vf_floor, vf_ceil, vf_round, vf_sign, vf_stop_gradient};
    for (int k = 0; k < 5; k++) {
        vf_tensor *gz = NULL;
        tp = vf_tape_begin(ctx);
        assert_int_equal(vf_tape_gradient(tp, vf_reduce_sum(ctx, zf[k](ctx, ts), 0, NULL, false), 1, &ts, &gz), VF_OK);
        vf_tape_end(tp);
        float *z = vt_read(gz);
        for (int i = 0; i < 4; i++) assert_true(z[i] == 0.0f);
        free(z);
    }
    vf_scope_end(ctx);
    vt_context_done(ctx);
}
VT_PER_BACKEND(grads)

/* ---- bad arguments ---------------------------------------------------------- */

static void test_bad_arguments(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_scope_begin(ctx);
    float f[4] = {1, 2, 3, 4};
    vf_tensor *x = host(ctx, VF_F32, 1, (int64_t[]){4}, f), *i = host(ctx, VF_I32, 1, (int64_t[]){4}, f);
    vf_tensor *bl = host(ctx, VF_BOOL, 1, (int64_t[]){4}, f);
    assert_null(vf_erf(ctx, i));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "erf", "i32", NULL);
    assert_null(vf_floor(ctx, i));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "floor", NULL);
    assert_null(vf_logical_and(ctx, x, x));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "logical_and", "f32", NULL);
    assert_null(vf_logical_not(ctx, i));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "logical_not", NULL);
    assert_null(vf_mod(ctx, x, i));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "mod", NULL);
    assert_null(vf_mod(ctx, bl, bl));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "mod", "bool", NULL);
    assert_null(vf_clip(ctx, x, 2, 1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_clip", "[2, 1]", "lo <= hi", NULL);
    assert_null(vf_clip(ctx, x, NAN, 1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_clip", "NaN", NULL);
    assert_null(vf_clip(ctx, i, 0.2, 0.8));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_clip", "no value", "i32", NULL);
    assert_null(vf_clip(ctx, bl, 0, 1));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "clip", "bool", NULL);
    assert_null(vf_leaky_relu(ctx, x, NAN));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_leaky_relu", "alpha", NULL);
    assert_null(vf_leaky_relu(ctx, i, 0.2));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "leaky_relu", NULL);
    assert_null(vf_reduce_any(ctx, x, 0, NULL, false));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "reduce_any", "f32", NULL);
    assert_null(vf_reduce_all(ctx, i, 0, NULL, false));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "reduce_all", NULL);
    assert_null(vf_reduce_prod(ctx, bl, 0, NULL, false));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "reduce_prod", "bool", NULL);
    assert_null(vf_logsumexp(ctx, i, 0, NULL, false));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "logsumexp", NULL);
    assert_null(vf_logsumexp(ctx, x, 1, (int[]){1}, false));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_logsumexp", "axis 1", NULL);
    assert_null(vf_reduce_prod(ctx, x, 2, (int[]){0, 0}, false));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_reduce_prod", "twice", NULL);
    assert_null(vf_erf(ctx, NULL));
    assert_null(vf_clip(NULL, x, 0, 1));
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_traced_fused),
        VT_PER_BACKEND_TESTS(edges),
        cmocka_unit_test(test_vulkan_matches_cpu),
        cmocka_unit_test(test_special_accuracy),
        VT_PER_BACKEND_TESTS(grads),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
