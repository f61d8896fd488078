/* User elementwise ops (vf_elementwise_create / vf_elementwise_call /
 * vf_elementwise_destroy, issue 14 item 2): values against double
 * references eagerly on both backends (f32, f16, broadcasting); traced
 * they join the neighbours' fused kernel (kernel counts equal to the same
 * program with a built-in op, the expression in the VKFUSE_DUMP GLSL);
 * traced == eager == CPU; gradients (analytic and finite differences,
 * eager and traced, the backward fused); save / load; VKFUSE_CHECK;
 * constant folding; lifetime; and every bad input as a status and a
 * message. */
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the ops --------------------------------------------------------------- */

/* squareplus(x) = (x + sqrt(x^2 + 4)) / 2, d/dx = y / sqrt(x^2 + 4) */
#define SQP_EXPR "0.5 * (x0 + sqrt(x0 * x0 + 4.0))"
static double sqp_ref(double x) { return 0.5 * (x + sqrt(x * x + 4.0)); }
static double sqp_dref(double x) { return sqp_ref(x) / sqrt(x * x + 4.0); }

static void sqp_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = 0.5f * (in[0][i] + sqrtf(in[0][i] * in[0][i] + 4.0f));
}
static void sqp_grad_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[1][i] / sqrtf(in[0][i] * in[0][i] + 4.0f);
}

static vf_elementwise_op *make_sqp(vf_context *ctx, bool f16)
{
    vf_elementwise_desc d = {.name = "squareplus", .n_inputs = 1, .expr = SQP_EXPR, .cpu = sqp_cpu,
                             .grad_expr = {"y / sqrt(x0 * x0 + 4.0)"}, .grad_cpu = {sqp_grad_cpu},
                             .dtypes = f16 ? (1u << VF_F32) | (1u << VF_F16) : 0};
    vf_elementwise_op *op = vf_elementwise_create(ctx, &d);
    assert_non_null(op);
    return op;
}

/* mix(a, b) = a * b + mix_sq(b), with a helper; d/da = b, d/db = a + 2 b */
static const char mix_helpers[] = "const float mix_two = 2.0;\nfloat mix_sq(float v) { return v * v * (mix_two - 1.0); }\n";
static double mix_ref(double a, double b) { return a * b + b * b; }
static void mix_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[0][i] * in[1][i] + in[1][i] * in[1][i];
}
static void mix_da_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[1][i];
}
static void mix_db_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[0][i] + 2.0f * in[1][i];
}

static vf_elementwise_op *make_mix(vf_context *ctx)
{
    vf_elementwise_desc d = {.name = "mix", .n_inputs = 2, .expr = "x0 * x1 + mix_sq(x1)", .helpers = mix_helpers,
                             .cpu = mix_cpu, .grad_expr = {"x1", "x0 + 2.0 * x1"},
                             .grad_cpu = {mix_da_cpu, mix_db_cpu}};
    vf_elementwise_op *op = vf_elementwise_create(ctx, &d);
    assert_non_null(op);
    return op;
}

/* lerp3(a, b, t) = a + (b - a) * t: three inputs, no gradient */
static void lerp_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[0][i] + (in[1][i] - in[0][i]) * in[2][i];
}

static void neg2_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = -2.0f * in[0][i];
}

static vf_tensor *from(vf_context *ctx, int rank, const int64_t *shape, const float *v)
{
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, rank, shape, v);
    assert_non_null(t);
    return t;
}

/* ---- eager values --------------------------------------------------------- */

static void eager_values(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    enum { R = 3, C = 5 };
    float a[R * C], b[C], t[R * C];
    vt_fill_uniform(a, R * C, -3.0f, 3.0f, 1);
    vt_fill_uniform(b, C, -2.0f, 2.0f, 2);
    vt_fill_uniform(t, R * C, 0.0f, 1.0f, 3);
    vf_tensor *ta = from(ctx, 2, (int64_t[]){R, C}, a), *tb = from(ctx, 1, (int64_t[]){C}, b);
    vf_tensor *tt = from(ctx, 2, (int64_t[]){R, C}, t);
    vf_elementwise_op *sqp = make_sqp(ctx, true), *mix = make_mix(ctx);
    vf_elementwise_desc ld = {.name = "lerp3", .n_inputs = 3, .expr = "x0 + (x1 - x0) * x2", .cpu = lerp_cpu};
    vf_elementwise_op *lerp = vf_elementwise_create(ctx, &ld);
    assert_non_null(lerp);

    vf_tensor *y1 = vf_elementwise_call(sqp, 1, &ta);
    vf_tensor *y2 = vf_elementwise_call(mix, 2, (vf_tensor *[]){ta, tb}); /* b broadcasts over rows */
    vf_tensor *y3 = vf_elementwise_call(lerp, 3, (vf_tensor *[]){tb, ta, tt});
    assert_non_null(y1);
    assert_int_equal(vf_tensor_rank(y2), 2);
    float *g1 = vt_read(y1), *g2 = vt_read(y2), *g3 = vt_read(y3), w1[R * C], w2[R * C], w3[R * C];
    for (int i = 0; i < R * C; i++) {
        w1[i] = (float)sqp_ref(a[i]);
        w2[i] = (float)mix_ref(a[i], b[i % C]);
        w3[i] = (float)(b[i % C] + ((double)a[i] - b[i % C]) * t[i]);
    }
    vt_assert_close_f32(g1, w1, R * C, 1e-5, 1e-5, "squareplus");
    vt_assert_close_f32(g2, w2, R * C, 1e-5, 1e-5, "mix (broadcast)");
    vt_assert_close_f32(g3, w3, R * C, 1e-5, 1e-5, "lerp3");
    free(g1), free(g2), free(g3);

    /* another unary op on the same shapes: its own kernel (the eager kernel
       memo keys ops by a unique id, not by the op kind alone) */
    vf_elementwise_desc nd = {.name = "neg2", .n_inputs = 1, .expr = "-2.0 * x0", .cpu = neg2_cpu};
    vf_elementwise_op *neg2 = vf_elementwise_create(ctx, &nd);
    float *g4 = vt_read(vf_elementwise_call(neg2, 1, &ta)), w4[R * C];
    for (int i = 0; i < R * C; i++) w4[i] = -2.0f * a[i];
    vt_assert_close_f32(g4, w4, R * C, 0, 0, "neg2 after squareplus");
    free(g4);
    vf_elementwise_destroy(neg2);

    /* f16: read as float, computed in float, rounded to f16 */
    vf_tensor *h = vf_cast(ctx, ta, VF_F16);
    vf_tensor *yh = vf_cast(ctx, vf_elementwise_call(sqp, 1, &h), VF_F32);
    assert_non_null(yh);
    float *gh = vt_read(yh);
    vt_assert_close_f32(gh, w1, R * C, 4e-3, 2e-3, "squareplus f16");
    free(gh);
    vf_elementwise_destroy(sqp);
    vf_elementwise_destroy(mix);
    vf_elementwise_destroy(lerp);
    vt_context_done(ctx);
}
VT_PER_BACKEND(eager_values)

/* ---- traced: fusion, dumps, traced == eager == CPU ------------------------ */

typedef struct {
    vf_elementwise_op *op; /* NULL: the built-in stand-in */
    vf_tensor *w;
} body_user;

/* out = uelem(x * w + 1) * 3 (the stand-in: relu), then x @ w2 -> uelem (a matmul epilogue) */
static vf_status fused_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    body_user *u = user;
    vf_tensor *y = vf_add(ctx, vf_mul(ctx, in[0], u->w), vt_scalar(ctx, 1.0));
    vf_tensor *z = u->op ? vf_elementwise_call(u->op, 1, &y) : vf_relu(ctx, y);
    out[0] = vf_mul(ctx, z, vt_scalar(ctx, 3.0));
    vf_tensor *m = vf_matmul(ctx, in[0], u->w);
    out[1] = u->op ? vf_elementwise_call(u->op, 1, &m) : vf_relu(ctx, m);
    /* a row group: uelem(x) / sum(uelem(x), -1, keepdims) */
    vf_tensor *a = u->op ? vf_elementwise_call(u->op, 1, &in[0]) : vf_relu(ctx, in[0]);
    out[2] = vf_div(ctx, a, vf_reduce_sum(ctx, a, 1, (int[]){-1}, true));
    return out[0] && out[1] && out[2] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

static int run_fused(vf_context *ctx, vf_elementwise_op *op, const float *x, const float *w, float *o0, float *o1,
                     float *o2)
{
    vf_tensor *tw = from(ctx, 2, (int64_t[]){8, 8}, w), *tx = from(ctx, 2, (int64_t[]){8, 8}, x);
    body_user u = {op, tw};
    vf_function_desc fd = {.name = op ? "ue_fused" : "builtin_fused", .body = fused_body, .user = &u,
                           .n_inputs = 1, .n_outputs = 3};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_non_null(fn);
    vf_tensor *out[3];
    assert_int_equal(vf_function_call(fn, &tx, out), VF_OK);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    if (op) { /* the graph names the op and shows its expression */
        char *text = vf_function_graph_text(fn);
        assert_non_null(text);
        assert_non_null(strstr(text, "squareplus("));
        assert_non_null(strstr(text, "{expr=" SQP_EXPR "}"));
        free(text);
    }
    if (o0) {
        float *a = vt_read(out[0]), *b = vt_read(out[1]), *c = vt_read(out[2]);
        memcpy(o0, a, sizeof(float) * 64);
        memcpy(o1, b, sizeof(float) * 64);
        memcpy(o2, c, sizeof(float) * 64);
        free(a), free(b), free(c);
    }
    vf_function_destroy(fn);
    return st.kernels;
}

/* Whether some file of dir/kernels holds text. */
static bool dump_has(const char *dir, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/kernels", dir);
    DIR *d = opendir(path);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char f[2048];
        snprintf(f, sizeof f, "%s/%s", path, e->d_name);
        FILE *fp = fopen(f, "rb");
        if (!fp) continue;
        static char buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
        buf[n] = '\0';
        found = strstr(buf, text) && strstr(buf, "add") && strstr(buf, "mul"); /* with its neighbours */
    }
    closedir(d);
    return found;
}

static void traced_fused(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    char dir[] = "/tmp/vkfuse_ue_dumpXXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("VKFUSE_DUMP", dir, 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_DUMP");
    float x[64], w[64], t0[64], t1[64], t2[64], e0[64], e1[64], e2[64], c0[64], c1[64], c2[64];
    vt_fill_uniform(x, 64, -1.0f, 1.0f, 4);
    vt_fill_uniform(w, 64, -1.0f, 1.0f, 5);
    vf_elementwise_op *op = make_sqp(ctx, false);
    int k_builtin = run_fused(ctx, NULL, x, w, NULL, NULL, NULL);
    int k_user = run_fused(ctx, op, x, w, t0, t1, t2);
    /* it joined the fused kernels: as many as with relu in its place (the
       elementwise chain one kernel, the matmul with its epilogue another,
       the row group a third) */
    assert_int_equal(k_user, k_builtin);
    assert_int_equal(k_user, 3);
    assert_true(dump_has(dir, SQP_EXPR));

    /* the same body eagerly on Vulkan, and on the CPU backend */
    vf_tensor *tx = from(ctx, 2, (int64_t[]){8, 8}, x), *out[3];
    body_user u = {op, from(ctx, 2, (int64_t[]){8, 8}, w)};
    assert_int_equal(fused_body(ctx, &tx, out, &u), VF_OK);
    float *a = vt_read(out[0]), *b = vt_read(out[1]), *c = vt_read(out[2]);
    memcpy(e0, a, sizeof e0), memcpy(e1, b, sizeof e1), memcpy(e2, c, sizeof e2);
    free(a), free(b), free(c);
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    vf_elementwise_op *opc = make_sqp(cpu, false);
    run_fused(cpu, opc, x, w, c0, c1, c2);
    vt_assert_close_f32(t0, e0, 64, 1e-6, 1e-6, "traced == eager");
    vt_assert_close_f32(t1, e1, 64, 1e-6, 1e-6, "traced == eager (matmul epilogue)");
    vt_assert_close_f32(t0, c0, 64, 1e-5, 1e-5, "Vulkan == CPU");
    vt_assert_close_f32(t1, c1, 64, 1e-5, 1e-5, "Vulkan == CPU (matmul epilogue)");
    vt_assert_close_f32(t2, e2, 64, 1e-6, 1e-6, "traced == eager (row group)");
    vt_assert_close_f32(t2, c2, 64, 1e-5, 1e-5, "Vulkan == CPU (row group)");
    vf_elementwise_destroy(opc);
    vt_context_done(cpu);
    vf_elementwise_destroy(op);
    vt_context_done(ctx);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- gradients ------------------------------------------------------------ */

enum { GR = 2, GC = 3 };

typedef struct {
    vf_elementwise_op *sqp, *mix;
    bool builtin; /* tanh / mul stand-ins: the kernel count to match */
} grad_user;

/* loss = sum(sqp(a) * mix(a, b)); grads of a [GR, GC] and b [GC] */
static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    grad_user *g = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *s = g->builtin ? vf_tanh(ctx, in[0]) : vf_elementwise_call(g->sqp, 1, &in[0]);
    vf_tensor *m = g->builtin ? vf_mul(ctx, in[0], in[1]) : vf_elementwise_call(g->mix, 2, in);
    vf_tensor *loss = vt_sum(ctx, vf_mul(ctx, s, m));
    vf_status st = vf_tape_gradient(tp, loss, 2, in, out);
    vf_tape_end(tp);
    out[2] = loss;
    return st;
}

static double loss_ref(const double *a, const double *b)
{
    double l = 0;
    for (int i = 0; i < GR * GC; i++) l += sqp_ref(a[i]) * mix_ref(a[i], b[i % GC]);
    return l;
}

typedef struct {
    vf_context *ctx;
    grad_user *g;
    double *a, *b;
} fd_user;

static double device_loss(void *user)
{
    fd_user *f = user;
    float a[GR * GC], b[GC];
    for (int i = 0; i < GR * GC; i++) a[i] = (float)f->a[i];
    for (int i = 0; i < GC; i++) b[i] = (float)f->b[i];
    vf_tensor *in[2] = {from(f->ctx, 2, (int64_t[]){GR, GC}, a), from(f->ctx, 1, (int64_t[]){GC}, b)};
    vf_tensor *s = vf_elementwise_call(f->g->sqp, 1, &in[0]);
    vf_tensor *m = vf_elementwise_call(f->g->mix, 2, in);
    return vt_read1(vt_sum(f->ctx, vf_mul(f->ctx, s, m)));
}

static void gradients(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    grad_user g = {make_sqp(ctx, false), make_mix(ctx), false};
    float a[GR * GC], b[GC];
    vt_fill_uniform(a, GR * GC, -2.0f, 2.0f, 6);
    vt_fill_uniform(b, GC, -1.0f, 1.0f, 7);
    double ad[GR * GC], bd[GC], wa[GR * GC] = {0}, wb[GC] = {0};
    for (int i = 0; i < GR * GC; i++) ad[i] = a[i];
    for (int i = 0; i < GC; i++) bd[i] = b[i];
    /* analytic: d/da = s' m + s dm/da, d/db = sum over rows of s dm/db */
    for (int i = 0; i < GR * GC; i++) {
        double x = ad[i], y = bd[i % GC], s = sqp_ref(x), m = mix_ref(x, y);
        wa[i] = sqp_dref(x) * m + s * y;
        wb[i % GC] += s * (x + 2.0 * y);
    }
    float wfa[GR * GC], wfb[GC];
    for (int i = 0; i < GR * GC; i++) wfa[i] = (float)wa[i];
    for (int i = 0; i < GC; i++) wfb[i] = (float)wb[i];
    vf_tensor *in[2] = {from(ctx, 2, (int64_t[]){GR, GC}, a), from(ctx, 1, (int64_t[]){GC}, b)}, *out[3];

    /* eager */
    assert_int_equal(grad_body(ctx, in, out, &g), VF_OK);
    float *ea = vt_read(out[0]), *eb = vt_read(out[1]);
    vt_assert_close_f32(ea, wfa, GR * GC, 1e-4, 1e-4, "eager d/da");
    vt_assert_close_f32(eb, wfb, GC, 1e-4, 1e-4, "eager d/db (broadcast: summed)");
    assert_true(fabs(vt_read1(out[2]) - loss_ref(ad, bd)) < 1e-4 * (1 + fabs(loss_ref(ad, bd))));
    /* finite differences of the op itself (f32 on the device: loose) */
    fd_user f = {ctx, &g, ad, bd};
    for (int i = 0; i < 2; i++)
        assert_true(fabs(vt_central_diff(device_loss, &f, &ad[i * 4 % (GR * GC)], 1e-2) - wa[i * 4 % (GR * GC)]) <
                    2e-2 * (1 + fabs(wa[i * 4 % (GR * GC)])));
    assert_true(fabs(vt_central_diff(device_loss, &f, &bd[1], 1e-2) - wb[1]) < 2e-2 * (1 + fabs(wb[1])));

    /* traced: the same values; the backward fuses like the built-in one */
    vf_function_desc fd = {.name = "ue_grad", .body = grad_body, .user = &g, .n_inputs = 2, .n_outputs = 3};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    float *ta = vt_read(out[0]), *tb = vt_read(out[1]);
    vt_assert_close_f32(ta, ea, GR * GC, 1e-5, 1e-5, "traced == eager d/da");
    vt_assert_close_f32(tb, eb, GC, 1e-5, 1e-5, "traced == eager d/db");
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    grad_user gb = {NULL, NULL, true};
    vf_function_desc fb = fd;
    fb.name = "builtin_grad";
    fb.user = &gb;
    vf_function *fn2 = vf_function_create(ctx, &fb);
    assert_int_equal(vf_function_call(fn2, in, out), VF_OK);
    vf_function_stats st2;
    vf_function_stats_get(fn2, &st2);
    if (be == VF_BACKEND_VULKAN) assert_int_equal(st.kernels, st2.kernels);
    free(ea), free(eb), free(ta), free(tb);
    vf_function_destroy(fn);
    vf_function_destroy(fn2);
    vf_elementwise_destroy(g.sqp);
    vf_elementwise_destroy(g.mix);
    vt_context_done(ctx);
}
VT_PER_BACKEND(gradients)

/* y = mix(a, b) and its gradient in one traced function: the forward op and
   its gradient's ops (the same helpers) share a fused kernel, which
   defines the helpers once. */
static vf_status mix_grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_elementwise_call(user, 2, in);
    vf_status st = vf_tape_gradient(tp, vt_sum(ctx, y), 2, in, out);
    vf_tape_end(tp);
    out[2] = y;
    return st;
}

static void helpers_once(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_elementwise_op *mix = make_mix(ctx);
    float a[8], b[8], wa[8], wb[8], wy[8];
    vt_fill_uniform(a, 8, -1.0f, 1.0f, 10);
    vt_fill_uniform(b, 8, -1.0f, 1.0f, 11);
    for (int i = 0; i < 8; i++) wa[i] = b[i], wb[i] = a[i] + 2.0f * b[i], wy[i] = (float)mix_ref(a[i], b[i]);
    vf_tensor *in[2] = {from(ctx, 1, (int64_t[]){8}, a), from(ctx, 1, (int64_t[]){8}, b)}, *out[3];
    vf_function_desc fd = {.name = "ue_helpers_once", .body = mix_grad_body, .user = mix, .n_inputs = 2,
                           .n_outputs = 3};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    float *ga = vt_read(out[0]), *gb = vt_read(out[1]), *gy = vt_read(out[2]);
    vt_assert_close_f32(ga, wa, 8, 1e-6, 1e-6, "d/da");
    vt_assert_close_f32(gb, wb, 8, 1e-6, 1e-6, "d/db");
    vt_assert_close_f32(gy, wy, 8, 1e-6, 1e-6, "y");
    free(ga), free(gb), free(gy);
    vf_function_destroy(fn);
    vf_elementwise_destroy(mix);
    vt_context_done(ctx);
}
VT_PER_BACKEND(helpers_once)

/* ---- save / load, VKFUSE_CHECK, folding, lifetime ------------------------- */

static vf_status sqp_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y = vf_mul(ctx, in[0], vt_scalar(ctx, 2.0));
    out[0] = vf_add(ctx, vf_elementwise_call(user, 1, &y), vt_scalar(ctx, 1.0));
    return out[0] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

/* d sum(squareplus(2 x)) / dx = 2 squareplus'(2 x), traced with its tape */
static vf_status sqp_grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_mul(ctx, in[0], vt_scalar(ctx, 2.0));
    vf_status st = vf_tape_gradient(tp, vt_sum(ctx, vf_elementwise_call(user, 1, &y)), 1, in, out);
    vf_tape_end(tp);
    return st;
}

static void check_dsqp2(vf_tensor *t, const float *x, int n, const char *what)
{
    float *g = vt_read(t), w[16];
    for (int i = 0; i < n; i++) w[i] = (float)(2.0 * sqp_dref(2.0 * x[i]));
    vt_assert_close_f32(g, w, (size_t)n, 1e-5, 1e-5, what);
    free(g);
}

static void check_sqp2(vf_tensor *t, const float *x, int n, const char *what)
{
    float *g = vt_read(t), w[16];
    for (int i = 0; i < n; i++) w[i] = (float)(sqp_ref(2.0 * x[i]) + 1.0);
    vt_assert_close_f32(g, w, (size_t)n, 1e-5, 1e-5, what);
    free(g);
}

static void save_load_lifetime(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vf_elementwise_op *op = make_sqp(ctx, false);
    float x[16];
    vt_fill_uniform(x, 16, -3.0f, 3.0f, 8);
    vf_function_desc fd = {.name = "ue_saved", .body = sqp_body, .user = op, .n_inputs = 1, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &fd);
    vf_tensor *tx = from(ctx, 1, (int64_t[]){16}, x), *y;
    assert_int_equal(vf_function_call(fn, &tx, &y), VF_OK);
    /* the graph keeps the op: destroying the handle leaves the function working */
    vf_elementwise_destroy(op);
    assert_int_equal(vf_function_call(fn, &tx, &y), VF_OK);
    check_sqp2(y, x, 16, "after vf_elementwise_destroy");
    char path[] = "/tmp/vkfuse_ue_savedXXXXXX";
    int fdsc = mkstemp(path);
    assert_true(fdsc >= 0);
    close(fdsc);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function_destroy(fn);
    /* a traced backward: the gradient's op is a node of the file too */
    vf_elementwise_op *op2 = make_sqp(ctx, false);
    vf_function_desc gd = {.name = "ue_saved_grad", .body = sqp_grad_body, .user = op2, .n_inputs = 1, .n_outputs = 1};
    vf_function *gfn = vf_function_create(ctx, &gd);
    assert_int_equal(vf_function_call(gfn, &tx, &y), VF_OK);
    check_dsqp2(y, x, 16, "traced gradient");
    char gpath[] = "/tmp/vkfuse_ue_gradXXXXXX";
    fdsc = mkstemp(gpath);
    assert_true(fdsc >= 0);
    close(fdsc);
    assert_int_equal(vf_function_save(gfn, gpath), VF_OK);
    vf_function_destroy(gfn);
    vf_elementwise_destroy(op2);

    /* loaded on Vulkan: runs the saved expression */
    vf_context *c2 = vt_context(VF_BACKEND_VULKAN);
    vf_function *ld = NULL;
    assert_int_equal(vf_function_load(c2, path, &ld), VF_OK);
    vf_tensor *tx2 = from(c2, 1, (int64_t[]){16}, x), *y2;
    assert_int_equal(vf_function_call(ld, &tx2, &y2), VF_OK);
    check_sqp2(y2, x, 16, "loaded, Vulkan");
    vf_function_destroy(ld);
    assert_int_equal(vf_function_load(c2, gpath, &ld), VF_OK);
    assert_int_equal(vf_function_call(ld, &tx2, &y2), VF_OK);
    check_dsqp2(y2, x, 16, "loaded gradient, Vulkan");
    vf_function_destroy(ld);
    unlink(gpath);
    vt_context_done(c2);

    /* loaded on the CPU backend: no C function was saved */
    vf_context *c3 = vt_context(VF_BACKEND_CPU);
    assert_int_equal(vf_function_load(c3, path, &ld), VF_OK);
    vf_tensor *tx3 = from(c3, 1, (int64_t[]){16}, x), *y3 = NULL;
    assert_int_equal(vf_function_call(ld, &tx3, &y3), VF_ERROR_UNSUPPORTED);
    vt_expect_error(c3, VF_ERROR_UNSUPPORTED, "squareplus", "C function", NULL);
    vf_function_destroy(ld);
    /* the same op created in the loading context: the node takes its C
       function (an op of that name with another expression is not taken) */
    vf_elementwise_op *imp = vf_elementwise_create(c3, &(vf_elementwise_desc){.name = "squareplus", .n_inputs = 1,
                                                                               .expr = "x0 + 1.0", .cpu = sqp_cpu});
    assert_non_null(imp);
    assert_int_equal(vf_function_load(c3, path, &ld), VF_OK);
    assert_int_equal(vf_function_call(ld, &tx3, &y3), VF_ERROR_UNSUPPORTED);
    vt_expect_error(c3, VF_ERROR_UNSUPPORTED, "squareplus", "C function", NULL);
    vf_function_destroy(ld);
    vf_elementwise_destroy(imp);
    vf_elementwise_op *same = make_sqp(c3, false);
    assert_int_equal(vf_function_load(c3, path, &ld), VF_OK);
    assert_int_equal(vf_function_call(ld, &tx3, &y3), VF_OK);
    check_sqp2(y3, x, 16, "loaded on the CPU backend, bound to the context's op");
    vf_function_destroy(ld);
    vf_elementwise_destroy(same);
    vt_context_done(c3);
    unlink(path);

    /* an op outliving its context: destroy only frees, calls give NULL */
    vf_context *c4 = vt_context(VF_BACKEND_CPU);
    vf_elementwise_op *orphan = make_sqp(c4, false);
    vt_context_done(c4);
    assert_null(vf_elementwise_call(orphan, 1, &tx));
    vf_elementwise_destroy(orphan);
    vt_context_done(ctx);
}

/* A C function that disagrees with the expression: VKFUSE_CHECK catches
   it (it replays the op with the C function), the agreeing one passes. */
static void sqp_wrong_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[0][i];
}

static void check_and_fold(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    setenv("VKFUSE_CHECK", "1", 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_CHECK");
    float x[16];
    vt_fill_uniform(x, 16, -3.0f, 3.0f, 9);
    vf_tensor *tx = from(ctx, 1, (int64_t[]){16}, x), *y;
    vf_elementwise_op *good = make_sqp(ctx, false);
    vf_function_desc fd = {.name = "ue_checked", .body = sqp_body, .user = good, .n_inputs = 1, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_int_equal(vf_function_call(fn, &tx, &y), VF_OK);
    check_sqp2(y, x, 16, "VKFUSE_CHECK");
    vf_function_destroy(fn);
    vf_elementwise_desc d = {.name = "liar", .n_inputs = 1, .expr = SQP_EXPR, .cpu = sqp_wrong_cpu};
    vf_elementwise_op *bad = vf_elementwise_create(ctx, &d);
    fd.user = bad;
    fd.name = "ue_checked_bad";
    fn = vf_function_create(ctx, &fd);
    assert_int_equal(vf_function_call(fn, &tx, &y), VF_ERROR_DEVICE);
    vt_expect_error(ctx, VF_ERROR_DEVICE, "ue_checked_bad", "liar", NULL);
    vf_function_destroy(fn);
    vf_elementwise_destroy(bad);
    vf_elementwise_destroy(good);
    vt_context_done(ctx);
}

/* Constant inputs fold through the C function (the folded value is the
   C function's: a liar's output shows it was used, not the GLSL). */
static vf_status const_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    float c[4] = {1, 2, 3, 4};
    vf_tensor *k = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){4}, c);
    out[0] = vf_add(ctx, in[0], vf_elementwise_call(user, 1, &k));
    return out[0] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

static void folding(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_elementwise_op *op = make_sqp(ctx, false);
    vf_function_desc fd = {.name = "ue_fold", .body = const_body, .user = op, .n_inputs = 1, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &fd);
    float z[4] = {0}, *g, w[4];
    vf_tensor *tz = from(ctx, 1, (int64_t[]){4}, z), *y;
    assert_int_equal(vf_function_call(fn, &tz, &y), VF_OK);
    g = vt_read(y);
    for (int i = 0; i < 4; i++) w[i] = (float)sqp_ref(i + 1);
    vt_assert_close_f32(g, w, 4, 1e-6, 1e-6, "folded");
    free(g);
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    assert_null(strstr(text, "squareplus")); /* folded away */
    free(text);
    vf_function_destroy(fn);
    vf_elementwise_destroy(op);
    vt_context_done(ctx);
}
VT_PER_BACKEND(folding)

/* ---- bad input -------------------------------------------------------------- */

static void expect_create_fails(vf_context *ctx, const vf_elementwise_desc *d, vf_status st, const char *m1,
                                const char *m2)
{
    assert_null(vf_elementwise_create(ctx, d));
    vt_expect_error(ctx, st, m1, m2, NULL);
}

static void bad_input(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_elementwise_desc d = {.name = "bad", .n_inputs = 1, .expr = "x0", .cpu = sqp_cpu};
    /* breaking out of the expression */
    static const char *const escapes[] = {"x0); } void main() { (x0", "x0; x0", "x0 }", "#define X x0",
                                          "(x0", "x0)", "x0 // c", "x0 /* c */", "  "};
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
        d.expr = escapes[i];
        expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "bad", "expression");
    }
    /* not compiling: shaderc's message, the expression named */
    d.expr = "x0 + ";
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "desc.expr `x0 + `", "does not compile");
    /* shaderc's line numbers are the expression's, also for an error found at its end */
    d.expr = "x0 +";
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "does not compile", "desc.expr:1: error");
    d.expr = "x0 *\n\n    (x0 +)";
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "does not compile", "desc.expr:3: error");
    d.expr = "x1 * 2.0"; /* a unary op has x0 only */
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "x1", "does not compile");
    d.expr = "pc.n0"; /* the kernel's own names are out of reach */
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "pc", "does not compile");
    d.expr = "x0";
    d.helpers = "layout(binding = 9) buffer B { float b[]; };";
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "layout", "helpers");
    d.helpers = "float bad_f(float v) { return v +; }";
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "desc.helpers", "compile");
    /* names the helpers declare carry the op's name: fused ops cannot clash */
    d.helpers = "float h(float v) { return v; }";
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "'h'", "'bad_'");
    d.helpers = "const float k = 2.0;";
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "'k'", "'bad_'");
    d.helpers = NULL;
    d.grad_expr[0] = "y";
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "grad_cpu[0]", "both");
    d.grad_cpu[0] = sqp_grad_cpu;
    d.grad_expr[0] = "y +* 2.0";
    expect_create_fails(ctx, &d, VF_ERROR_COMPILE, "desc.grad_expr[0]", "x0");
    d.grad_expr[0] = NULL, d.grad_cpu[0] = NULL;
    d.n_inputs = 0;
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "n_inputs", "1 .. 3");
    d.n_inputs = 4;
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "n_inputs", "1 .. 3");
    d.n_inputs = 1;
    d.dtypes = 1u << VF_I32; /* a bad desc, as the header says (not a tensor's dtype) */
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "dtypes", "VF_F16");
    d.dtypes = 0;
    d.cpu = NULL;
    expect_create_fails(ctx, &d, VF_ERROR_INVALID_ARGUMENT, "desc.cpu", "C function");
    d.cpu = sqp_cpu;
    assert_null(vf_elementwise_create(ctx, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "desc is NULL", NULL);

    /* calls */
    vf_elementwise_op *mix = make_mix(ctx);
    float v[6] = {1, 2, 3, 4, 5, 6};
    vf_tensor *a = from(ctx, 2, (int64_t[]){2, 3}, v), *b = from(ctx, 1, (int64_t[]){2}, v);
    assert_null(vf_elementwise_call(mix, 1, &a));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "'mix' takes 2 input(s)", "got 1", NULL);
    assert_null(vf_elementwise_call(mix, 2, (vf_tensor *[]){a, b}));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "mix", "broadcast", NULL);
    vf_tensor *i = vf_cast(ctx, a, VF_I32);
    assert_null(vf_elementwise_call(mix, 2, (vf_tensor *[]){i, i}));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "i32", "vf_cast", NULL);
    assert_null(vf_elementwise_call(mix, 2, (vf_tensor *[]){a, vf_cast(ctx, a, VF_F16)}));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "f16", "mix", NULL);
    /* a NULL input (an earlier failure) propagates NULL, no new error */
    assert_null(vf_elementwise_call(mix, 2, (vf_tensor *[]){a, NULL}));
    assert_int_equal(vf_status_get(ctx), VF_OK);
    /* no gradient: the tape says which op */
    vf_elementwise_desc nd = {.name = "nograd", .n_inputs = 1, .expr = "x0 * 2.0", .cpu = sqp_cpu};
    vf_elementwise_op *ng = vf_elementwise_create(ctx, &nd);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *l = vt_sum(ctx, vf_elementwise_call(ng, 1, &a)), *ga = NULL;
    assert_int_not_equal(vf_tape_gradient(tp, l, 1, &a, &ga), VF_OK);
    vf_tape_end(tp);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "nograd", "no gradient", NULL);
    vf_elementwise_destroy(ng);
    vf_elementwise_destroy(mix);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(eager_values), cmocka_unit_test(traced_fused), VT_PER_BACKEND_TESTS(gradients),
        VT_PER_BACKEND_TESTS(helpers_once), cmocka_unit_test(save_load_lifetime), cmocka_unit_test(check_and_fold), VT_PER_BACKEND_TESTS(folding),
        cmocka_unit_test(bad_input),
    };
    return VT_RUN_GROUP(tests);
}
