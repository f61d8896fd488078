/* vf_tape through control flow and of higher order: gradients through
 * vf_cond and vf_while_loop, eager and traced (fused and unfused, select-
 * lowered and real conds), on both backends, checked against central
 * finite differences of a double-precision host reference of the same
 * program; nested tapes (second order: x^3 -> 6x, a Hessian-vector
 * product, second order through a traced cond and loop); and the errors
 * of sources and targets that have no gradient (docs/GRADIENTS.md).
 *
 * Each case's body begins a tape, computes loss = sum(f(x, w)) with w a
 * tensor made outside the body (captured when traced), and returns
 * d loss/dx and d loss/dw. The body runs eagerly and as a traced
 * vf_function; all must match the reference within f32 rounding. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3

typedef struct tcase tcase;
typedef vf_tensor *(*fwd_fn)(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w);
typedef double (*ref_fn)(const double *x, const double *w);

struct tcase {
    const char *name;
    fwd_fn f;
    ref_fn ref;
    float x[N], w[N];
    vf_tensor *wt; /* set per context */
};

static vf_tensor *scalar(vf_context *ctx, double v) { return vf_fill(ctx, VF_F32, 0, NULL, v); }
static vf_tensor *sum(vf_context *ctx, vf_tensor *x) { return vf_reduce_sum(ctx, x, 0, NULL, false); }

/* ---- vf_cond: then x*w, else x*x, on sum(x) > 0 -------------------------- */

static vf_status then_mul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[1]);
    return VF_OK;
}
static vf_status else_sq(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[0]);
    return VF_OK;
}
static vf_tensor *f_cond(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    vf_tensor *p = vf_greater(ctx, sum(ctx, x), scalar(ctx, 0));
    vf_tensor *y = NULL;
    if (vf_cond(ctx, p, then_mul, else_sq, 2, (vf_tensor *[]){x, w}, 1, &y, NULL) != VF_OK) return NULL;
    return y;
}
static double r_cond(const double *x, const double *w)
{
    double s = 0, l = 0;
    for (int i = 0; i < N; i++) s += x[i];
    for (int i = 0; i < N; i++) l += s > 0 ? x[i] * w[i] : x[i] * x[i];
    return l;
}

/* ---- a real cond (a nested cond keeps it from becoming a select) whose
   branches capture w and an outer value h = exp(x) instead of taking them
   as inputs ---------------------------------------------------------------- */

typedef struct { vf_tensor *w, *h; } caps;

static vf_status inner_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    out[0] = vf_mul(ctx, vf_sin(ctx, in[0]), k->w);
    return VF_OK;
}
static vf_status inner_else(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(ctx, in[0]);
    return VF_OK;
}
static vf_status then_nested(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    vf_tensor *p = vf_less(ctx, vf_reduce_max(ctx, in[0], 0, NULL, false), scalar(ctx, 100));
    vf_tensor *t = NULL;
    vf_status s = vf_cond(ctx, p, inner_then, inner_else, 1, in, 1, &t, user);
    if (s != VF_OK) return s;
    out[0] = vf_add(ctx, vf_mul(ctx, t, k->h), in[0]);
    return VF_OK;
}
static vf_status else_capture(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    out[0] = vf_mul(ctx, vf_mul(ctx, in[0], k->h), k->w);
    return VF_OK;
}
static vf_tensor *f_cond_real(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    caps k = {w, vf_exp(ctx, vf_mul(ctx, x, scalar(ctx, 0.5)))};
    vf_tensor *p = vf_greater(ctx, sum(ctx, x), scalar(ctx, 0));
    vf_tensor *y = NULL;
    if (vf_cond(ctx, p, then_nested, else_capture, 1, &x, 1, &y, &k) != VF_OK) return NULL;
    return y;
}
static double r_cond_real(const double *x, const double *w)
{
    double s = 0, mx = -INFINITY, l = 0;
    for (int i = 0; i < N; i++) s += x[i], mx = fmax(mx, x[i]);
    for (int i = 0; i < N; i++) {
        double h = exp(0.5 * x[i]);
        if (s > 0) l += (mx < 100 ? sin(x[i]) * w[i] : -x[i]) * h + x[i];
        else l += x[i] * h * w[i];
    }
    return l;
}

/* ---- vf_while_loop: i < 3 (an i32 loop var); y = sin(y) * w + x ---------- */

static vf_status wc_count(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 3));
    return VF_OK;
}
static vf_status wb_sin(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user; /* k->h is x here, captured */
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 1));
    out[1] = vf_add(ctx, vf_mul(ctx, vf_sin(ctx, in[1]), k->w), k->h);
    return VF_OK;
}
static vf_tensor *f_while(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    caps k = {w, x};
    vf_tensor *v[2] = {vf_fill(ctx, VF_I32, 0, NULL, 0), x};
    if (vf_while_loop(ctx, wc_count, wb_sin, 2, v, 0, &k) != VF_OK) return NULL;
    return v[1];
}
static double r_while(const double *x, const double *w)
{
    double y[N], l = 0;
    memcpy(y, x, sizeof y);
    for (int it = 0; it < 3; it++)
        for (int i = 0; i < N; i++) y[i] = sin(y[i]) * w[i] + x[i];
    for (int i = 0; i < N; i++) l += y[i];
    return l;
}

/* ---- a data-dependent loop: while sum(y*y) < 30: y = y*1.5 + w*x; at most
   20 iterations -------------------------------------------------------------- */

static vf_status wc_norm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, sum(ctx, vf_mul(ctx, in[0], in[0])), scalar(ctx, 30));
    return VF_OK;
}
static vf_status wb_grow(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    out[0] = vf_add(ctx, vf_mul(ctx, in[0], scalar(ctx, 1.5)), vf_mul(ctx, k->w, k->h));
    return VF_OK;
}
static vf_tensor *f_while_data(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    caps k = {w, x};
    vf_tensor *y = vf_tanh(ctx, x);
    if (vf_while_loop(ctx, wc_norm, wb_grow, 1, &y, 20, &k) != VF_OK) return NULL;
    return vf_mul(ctx, y, y);
}
static double r_while_data(const double *x, const double *w)
{
    double y[N], l = 0;
    for (int i = 0; i < N; i++) y[i] = tanh(x[i]);
    for (int it = 0; it < 20; it++) {
        double s = 0;
        for (int i = 0; i < N; i++) s += y[i] * y[i];
        if (!(s < 30)) break;
        for (int i = 0; i < N; i++) y[i] = y[i] * 1.5 + w[i] * x[i];
    }
    for (int i = 0; i < N; i++) l += y[i] * y[i];
    return l;
}

/* max_iterations ends the loop (cond_fn is always true): 4 steps */
static vf_status wc_true(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, sum(ctx, vf_abs(ctx, in[0])), scalar(ctx, 1e30));
    return VF_OK;
}
static vf_status wb_tanh(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    out[0] = vf_tanh(ctx, vf_add(ctx, vf_mul(ctx, in[0], k->w), k->h));
    return VF_OK;
}
static vf_tensor *f_while_max(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    caps k = {w, x};
    vf_tensor *y = x;
    if (vf_while_loop(ctx, wc_true, wb_tanh, 1, &y, 4, &k) != VF_OK) return NULL;
    return y;
}
static double r_while_max(const double *x, const double *w)
{
    double y[N], l = 0;
    memcpy(y, x, sizeof y);
    for (int it = 0; it < 4; it++)
        for (int i = 0; i < N; i++) y[i] = tanh(y[i] * w[i] + x[i]);
    for (int i = 0; i < N; i++) l += y[i];
    return l;
}

/* a cond inside a loop body, a loop inside a cond branch */
static vf_status wb_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    vf_tensor *p = vf_greater(ctx, sum(ctx, in[1]), scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_mul, else_sq, 2, (vf_tensor *[]){in[1], k->w}, 1, &y, NULL);
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 1));
    out[1] = s == VF_OK ? vf_add(ctx, vf_sin(ctx, y), k->h) : NULL;
    return s;
}
static vf_status then_loop(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    vf_tensor *v[2] = {vf_fill(ctx, VF_I32, 0, NULL, 0), in[0]};
    vf_status s = vf_while_loop(ctx, wc_count, wb_cond, 2, v, 0, k);
    out[0] = v[1];
    return s;
}
static vf_tensor *f_nested(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    caps k = {w, x};
    vf_tensor *p = vf_less(ctx, sum(ctx, x), scalar(ctx, 5)), *y = NULL;
    if (vf_cond(ctx, p, then_loop, inner_else, 1, &x, 1, &y, &k) != VF_OK) return NULL;
    return y;
}
static double r_nested(const double *x, const double *w)
{
    double y[N], l = 0, s = 0;
    for (int i = 0; i < N; i++) s += x[i];
    memcpy(y, x, sizeof y);
    if (s < 5) {
        for (int it = 0; it < 3; it++) {
            double t = 0;
            for (int i = 0; i < N; i++) t += y[i];
            for (int i = 0; i < N; i++) y[i] = sin(t > 0 ? y[i] * w[i] : y[i] * y[i]) + x[i];
        }
    } else {
        for (int i = 0; i < N; i++) y[i] = -x[i];
    }
    for (int i = 0; i < N; i++) l += y[i];
    return l;
}

/* matmul (a vector operand: reshapes in the graph), softmax and a max in a
   real cond's branch (nested cond), A a constant made in the branch (a
   CONST node when traced) */
static const float mA[N * N] = {0.5f, -0.3f, 0.8f, 0.2f, 0.9f, -0.4f, -0.7f, 0.1f, 0.6f};
static vf_status then_mm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *z = vf_matmul(ctx, in[0], vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){N, N}, mA));
    vf_tensor *p = vf_less(ctx, vf_reduce_max(ctx, z, 0, NULL, false), scalar(ctx, 100)), *t = NULL;
    vf_status s = vf_cond(ctx, p, then_mul, else_sq, 2, (vf_tensor *[]){vf_softmax(ctx, z, -1), in[1]}, 1, &t, NULL);
    out[0] = s == VF_OK ? vf_add(ctx, t, vf_reduce_max(ctx, z, 0, NULL, true)) : NULL;
    return s;
}
static vf_tensor *f_mm(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    vf_tensor *p = vf_greater(ctx, sum(ctx, x), scalar(ctx, 0)), *y = NULL;
    if (vf_cond(ctx, p, then_mm, else_sq, 2, (vf_tensor *[]){x, w}, 1, &y, NULL) != VF_OK) return NULL;
    return y;
}
static double r_mm(const double *x, const double *w)
{
    double s = 0, z[N], mx = -INFINITY, e = 0, l = 0;
    for (int i = 0; i < N; i++) s += x[i];
    if (s <= 0) {
        for (int i = 0; i < N; i++) l += x[i] * x[i];
        return l;
    }
    for (int j = 0; j < N; j++) {
        z[j] = 0;
        for (int i = 0; i < N; i++) z[j] += x[i] * mA[i * N + j];
        mx = fmax(mx, z[j]);
    }
    for (int j = 0; j < N; j++) e += exp(z[j] - mx);
    for (int j = 0; j < N; j++) l += exp(z[j] - mx) / e * w[j] + mx;
    return l;
}

static tcase cases[] = {
    {"cond then", f_cond, r_cond, {1, -2, 3}, {3, -1, 4}, NULL},
    {"cond else", f_cond, r_cond, {-1, -2, 1.5f}, {3, -1, 4}, NULL},
    {"real cond then", f_cond_real, r_cond_real, {0.5f, -0.25f, 1}, {0.7f, -1.2f, 0.4f}, NULL},
    {"real cond else", f_cond_real, r_cond_real, {-0.5f, -0.25f, 0.3f}, {0.7f, -1.2f, 0.4f}, NULL},
    {"while", f_while, r_while, {0.3f, -0.6f, 0.9f}, {0.8f, 1.1f, -0.7f}, NULL},
    {"while data-dependent", f_while_data, r_while_data, {0.4f, -0.3f, 0.2f}, {1.0f, 0.5f, -2.0f}, NULL},
    {"loop in a cond, cond in the loop", f_nested, r_nested, {0.3f, -0.1f, 0.4f}, {0.9f, -0.6f, 1.2f}, NULL},
    {"matmul, softmax, max in a branch", f_mm, r_mm, {0.7f, -0.2f, 0.4f}, {1.3f, -0.8f, 0.5f}, NULL},
    {"while to max_iterations", f_while_max, r_while_max, {0.4f, -0.3f, 0.2f}, {1.5f, 0.5f, -2.0f}, NULL},
};
#define N_CASES (int)(sizeof cases / sizeof *cases)

/* The body: in[0] = x; out = {dloss/dx, dloss/dw, loss}. */
static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const tcase *c = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = c->f(ctx, c, in[0], c->wt);
    vf_tensor *loss = y ? sum(ctx, y) : NULL;
    vf_status s = vf_tape_gradient(tp, loss, 2, (vf_tensor *[]){in[0], c->wt}, out);
    vf_tape_end(tp);
    out[2] = loss;
    return s;
}

/* d ref / d (x, w) by central differences in double. */
static void ref_grads(const tcase *c, double *gx, double *gw)
{
    double x[N], w[N];
    for (int i = 0; i < N; i++) x[i] = c->x[i], w[i] = c->w[i];
    for (int v = 0; v < 2; v++)
        for (int i = 0; i < N; i++) {
            double *p = v ? w : x, keep = p[i], h = 1e-6 * fmax(1, fabs(keep));
            p[i] = keep + h;
            double a = c->ref(x, w);
            p[i] = keep - h;
            double b = c->ref(x, w);
            p[i] = keep;
            (v ? gw : gx)[i] = (a - b) / (2 * h);
        }
}

static void check_out(const tcase *c, vf_tensor **out, const char *how, int be)
{
    double gx[N], gw[N], x[N], w[N];
    ref_grads(c, gx, gw);
    for (int i = 0; i < N; i++) x[i] = c->x[i], w[i] = c->w[i];
    float want[2][N], wl = (float)c->ref(x, w);
    for (int i = 0; i < N; i++) want[0][i] = (float)gx[i], want[1][i] = (float)gw[i];
    char what[160];
    for (int k = 0; k < 2; k++) {
        float *got = vt_read(out[k]);
        snprintf(what, sizeof what, "%s (%s, %s): d/d%s", c->name, how, be ? "vulkan" : "cpu", k ? "w" : "x");
        vt_assert_close_f32(got, want[k], N, 2e-4, 2e-4, what);
        free(got);
    }
    float *l = vt_read(out[2]);
    snprintf(what, sizeof what, "%s (%s, %s): loss", c->name, how, be ? "vulkan" : "cpu");
    vt_assert_close_f32(l, &wl, 1, 1e-4, 1e-5, what);
    free(l);
}

static void run_case(vf_context *ctx, tcase *c, int be)
{
    vf_scope_begin(ctx);
    c->wt = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, c->w);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, c->x);
    vf_tensor *out[3];
    assert_int_equal(grad_body(ctx, &x, out, c), VF_OK);
    check_out(c, out, "eager", be);
    /* traced: fused, then unfused (VKFUSE_FUSION=0 is read when a plan is made) */
    for (int fused = 1; fused >= 0; fused--) {
        if (!fused) setenv("VKFUSE_FUSION", "0", 1);
        vf_tensor_spec sig = {VF_F32, 1, {N}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "grads", .body = grad_body,
            .user = c, .n_inputs = 1, .n_outputs = 3, .input_signature = &sig});
        vf_status s = vf_function_call(fn, &x, out);
        if (s != VF_OK) fail_msg("%s traced: %s", c->name, vf_error_message(ctx));
        check_out(c, out, fused ? "traced" : "traced unfused", be);
        vf_function_destroy(fn);
        unsetenv("VKFUSE_FUSION");
    }
    vf_scope_end(ctx);
}

static void test_control_flow_gradients(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        for (int i = 0; i < N_CASES; i++) run_case(ctx, &cases[i], be);
        vt_context_done(ctx);
    }
}

/* A symbolic batch dim: x [-1,3] through a cond and two loops; one trace
   serves two batch sizes and matches the body run eagerly. */
static vf_tensor *f_batch(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    vf_tensor *y = f_cond(ctx, c, x, w);
    y = y ? f_while(ctx, c, y, w) : NULL;      /* unbounded: recomputed states */
    return y ? f_while_max(ctx, c, y, w) : NULL; /* bounded: a stack [4, ?, 3] */
}

static void test_symbolic_batch(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        tcase c = {"batch", f_batch, NULL, {0}, {0.5f, -1.5f, 0.8f}, NULL};
        c.wt = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, c.w);
        vf_tensor_spec sig = {VF_F32, 2, {-1, N}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "batch", .body = grad_body,
            .user = &c, .n_inputs = 1, .n_outputs = 3, .input_signature = &sig});
        for (int64_t nb = 4; nb >= 2; nb -= 2) {
            vf_scope_begin(ctx);
            float xv[4 * N];
            vt_fill_uniform(xv, 4 * N, -1, 1, (uint64_t)(nb + 40 * be));
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, N}, xv);
            vf_tensor *e[3], *t[3];
            assert_int_equal(grad_body(ctx, &x, e, &c), VF_OK);
            if (vf_function_call(fn, &x, t) != VF_OK) fail_msg("traced: %s", vf_error_message(ctx));
            for (int k = 0; k < 3; k++) {
                float *a = vt_read(t[k]), *b = vt_read(e[k]);
                vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(e[k]), 1e-5, 1e-4, "symbolic batch: traced vs eager");
                free(a), free(b);
            }
            vf_scope_end(ctx);
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* ---- second order ----------------------------------------------------------- */

/* d/dx sum(d/dx sum(x^3)) = 6x, by a tape inside a tape. */
static vf_status second_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_tensor *y = sum(ctx, vf_mul(ctx, vf_mul(ctx, x, x), x));
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(inner, y, 1, &x, &g);
    vf_tape_end(inner);
    if (s == VF_OK) s = vf_tape_gradient(outer, sum(ctx, g), 1, &x, &out[0]);
    vf_tape_end(outer);
    out[1] = g;
    return s;
}

/* Hessian-vector product of f(w) = sum(tanh(A w)^2) with v, and a
   gradient penalty |grad f|^2, both by nested tapes. */
typedef struct { vf_tensor *a, *v; } hvp_data;
static vf_status hvp_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    hvp_data *d = user;
    vf_tensor *w = in[0];
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_tensor *t = vf_tanh(ctx, vf_matmul(ctx, d->a, w));
    vf_tensor *f = sum(ctx, vf_mul(ctx, t, t));
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(inner, f, 1, &w, &g);
    vf_tape_end(inner);
    vf_tensor *gv = s == VF_OK ? sum(ctx, vf_mul(ctx, g, d->v)) : NULL;
    vf_tensor *pen = s == VF_OK ? sum(ctx, vf_mul(ctx, g, g)) : NULL;
    if (s == VF_OK) s = vf_tape_gradient(outer, gv, 1, &w, &out[0]);
    if (s == VF_OK) s = vf_tape_gradient(outer, pen, 1, &w, &out[1]);
    vf_tape_end(outer);
    return s;
}

#define HM 4
static const float hA[HM * N] = {0.3f, -0.5f, 0.2f, 0.1f, 0.4f, -0.3f, -0.2f, 0.6f, 0.5f, 0.7f, 0.1f, -0.4f};
static const float hW[N] = {0.5f, -0.8f, 0.3f}, hV[N] = {1.0f, -0.5f, 2.0f};

/* grad f in double */
static void hvp_grad(const double *w, double *g)
{
    for (int j = 0; j < N; j++) g[j] = 0;
    for (int i = 0; i < HM; i++) {
        double z = 0;
        for (int j = 0; j < N; j++) z += hA[i * N + j] * w[j];
        double t = tanh(z), dz = 2 * t * (1 - t * t);
        for (int j = 0; j < N; j++) g[j] += dz * hA[i * N + j];
    }
}
static double hvp_gv(const double *w)
{
    double g[N], s = 0;
    hvp_grad(w, g);
    for (int j = 0; j < N; j++) s += g[j] * hV[j];
    return s;
}
static double hvp_pen(const double *w)
{
    double g[N], s = 0;
    hvp_grad(w, g);
    for (int j = 0; j < N; j++) s += g[j] * g[j];
    return s;
}
static void fd(double (*f)(const double *), const float *w0, double *out)
{
    double w[N];
    for (int j = 0; j < N; j++) w[j] = w0[j];
    for (int j = 0; j < N; j++) {
        double keep = w[j], h = 1e-6;
        w[j] = keep + h;
        double a = f(w);
        w[j] = keep - h;
        double b = f(w);
        w[j] = keep;
        out[j] = (a - b) / (2 * h);
    }
}

/* x^3 inside a traced cond and a loop (y = y * x three times from y = x),
   then second order: 6x for the cond, 12 x^2 for x^4 from the loop
   (unbounded: recomputed states; bounded: a stack). */
static vf_status cube_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, vf_mul(ctx, in[0], in[0]), in[0]);
    return VF_OK;
}
static vf_status loop2(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 3));
    return VF_OK;
}
static vf_status loop2_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *x = user;
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_I32, 0, NULL, 1));
    out[1] = vf_mul(ctx, in[1], x);
    return VF_OK;
}
static vf_status second_cf_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_status s = VF_OK;
    for (int k = 0; k < 3 && s == VF_OK; k++) { /* cond, unbounded loop, bounded loop (a stack) */
        vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
        vf_tensor *y = NULL;
        if (k == 0) {
            vf_tensor *p = vf_greater(ctx, sum(ctx, x), scalar(ctx, -100));
            s = vf_cond(ctx, p, cube_then, else_sq, 1, &x, 1, &y, NULL);
        } else {
            vf_tensor *v[2] = {vf_fill(ctx, VF_I32, 0, NULL, 0), x};
            s = vf_while_loop(ctx, loop2, loop2_body, 2, v, k == 1 ? 0 : 10, x);
            y = v[1];
        }
        vf_tensor *g = NULL;
        if (s == VF_OK) s = vf_tape_gradient(inner, sum(ctx, y), 1, &x, &g);
        vf_tape_end(inner);
        if (s == VF_OK) s = vf_tape_gradient(outer, sum(ctx, g), 1, &x, &out[k]);
        vf_tape_end(outer);
    }
    return s;
}

static void call_both(vf_context *ctx, vf_body body, void *user, int n_out, vf_tensor *x, vf_tensor **eager,
                      vf_tensor **traced)
{
    assert_int_equal(body(ctx, &x, eager, user), VF_OK);
    vf_tensor_spec sig = {VF_F32, 1, {N}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "second", .body = body, .user = user,
        .n_inputs = 1, .n_outputs = n_out, .input_signature = &sig});
    vf_status s = vf_function_call(fn, &x, traced);
    if (s != VF_OK) fail_msg("traced: %s", vf_error_message(ctx));
    vf_function_destroy(fn);
}

static void expect(vf_tensor *t, const double *want, const char *what)
{
    float w[N], *got = vt_read(t);
    for (int i = 0; i < N; i++) w[i] = (float)want[i];
    vt_assert_close_f32(got, w, N, 1e-4, 1e-4, what);
    free(got);
}

static void test_second_order(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        float xv[N] = {1, -2, 0.5f};
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, xv);
        double six[N], three[N], twelve[N];
        for (int i = 0; i < N; i++) six[i] = 6 * xv[i], three[i] = 3 * xv[i] * xv[i], twelve[i] = 12.0 * xv[i] * xv[i];
        vf_tensor *e[2], *t[2];
        call_both(ctx, second_body, NULL, 2, x, e, t);
        expect(e[1], three, "x^3: first order, eager");
        expect(e[0], six, "x^3: second order, eager");
        expect(t[1], three, "x^3: first order, traced");
        expect(t[0], six, "x^3: second order, traced");

        hvp_data d = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){HM, N}, hA),
                      vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, hV)};
        vf_tensor *w = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, hW);
        double hv[N], gp[N];
        fd(hvp_gv, hW, hv);
        fd(hvp_pen, hW, gp);
        call_both(ctx, hvp_body, &d, 2, w, e, t);
        expect(e[0], hv, "Hessian-vector product, eager");
        expect(e[1], gp, "gradient penalty, eager");
        expect(t[0], hv, "Hessian-vector product, traced");
        expect(t[1], gp, "gradient penalty, traced");

        vf_tensor *e3[3], *t3[3];
        call_both(ctx, second_cf_body, NULL, 3, x, e3, t3);
        e[0] = e3[0], e[1] = e3[1], t[0] = t3[0], t[1] = t3[1];
        expect(e3[2], twelve, "x^4 from a bounded loop: second order, eager");
        expect(t3[2], twelve, "x^4 from a bounded loop: second order, traced");
        expect(e[0], six, "x^3 in a cond: second order, eager");
        expect(t[0], six, "x^3 in a cond: second order, traced");
        expect(e[1], twelve, "x^4 from a loop: second order, eager");
        expect(t[1], twelve, "x^4 from a loop: second order, traced");
        vt_context_done(ctx);
    }
}

/* ---- a traced function called under an eager tape ---------------------------- */

typedef struct { vf_tensor *w, *var; bool assign; } fmodel;

/* y = tanh(x w) * x (x [n,3], w [3,3]), and a cond on the batch sum */
static vf_status fmodel_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    fmodel *m = user;
    vf_tensor *y = vf_mul(ctx, vf_tanh(ctx, vf_matmul(ctx, in[0], m->w)), in[0]);
    vf_tensor *p = vf_greater(ctx, sum(ctx, in[0]), scalar(ctx, 0));
    vf_tensor *ws = vf_reduce_sum(ctx, m->w, 1, (int[]){0}, false);
    vf_status s = vf_cond(ctx, p, then_mul, else_sq, 2, (vf_tensor *[]){y, ws}, 1, &out[0], NULL);
    if (s == VF_OK && m->assign) s = vf_assign_add(m->var, scalar(ctx, 1));
    return s;
}

static void test_function_call_under_tape(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        float w0[9], x0[12];
        vt_fill_uniform(w0, 9, -1, 1, 11);
        vt_fill_uniform(x0, 12, -1, 1, 12);
        fmodel m = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 3}, w0), NULL, false};
        vf_tensor_spec sig = {VF_F32, 2, {-1, 3}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "model", .body = fmodel_body,
            .user = &m, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        for (int64_t nb = 4; nb >= 2; nb -= 2) { /* one trace, two batch sizes */
            vf_scope_begin(ctx);
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, 3}, x0);
            vf_tensor *ge[2], *gt[2], *y;
            for (int traced = 0; traced < 2; traced++) {
                vf_tape *tp = vf_tape_begin(ctx);
                if (traced) assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
                else assert_int_equal(fmodel_body(ctx, &x, &y, &m), VF_OK);
                vf_tensor *loss = sum(ctx, vf_mul(ctx, y, y));
                assert_int_equal(vf_tape_gradient(tp, loss, 2, (vf_tensor *[]){x, m.w}, traced ? gt : ge), VF_OK);
                vf_tape_end(tp);
            }
            for (int k = 0; k < 2; k++) {
                float *a = vt_read(gt[k]), *b = vt_read(ge[k]);
                vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(ge[k]), 1e-5, 1e-4, "function call vs eager body");
                float mx = 0;
                for (int64_t i = 0; i < vf_tensor_numel(ge[k]); i++) mx = fmaxf(mx, fabsf(b[i]));
                assert_true(mx > 0.01f); /* not zeros */
                free(a), free(b);
            }
            vf_scope_end(ctx);
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        vf_function_destroy(fn);

        /* second order through a call: the function returns d sum(x^3)/dx
           (a tape in its body); an eager tape around the call gives 6x */
        {
            vf_tensor_spec s3 = {VF_F32, 1, {N}};
            vf_function *f2 = vf_function_create(ctx, &(vf_function_desc){.name = "grad3", .body = second_body,
                .n_inputs = 1, .n_outputs = 2, .input_signature = &s3});
            float xv[N] = {1, -2, 0.5f};
            double six[N] = {6, -12, 3};
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, xv), *o[2], *g = NULL;
            vf_tape *tp = vf_tape_begin(ctx);
            assert_int_equal(vf_function_call(f2, &x, o), VF_OK);
            assert_int_equal(vf_tape_gradient(tp, sum(ctx, o[1]), 1, &x, &g), VF_OK);
            vf_tape_end(tp);
            expect(g, six, "second order through a function call");
            vf_function_destroy(f2);
        }
        /* a function that assigns cannot be run again to differentiate it */
        m.var = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0));
        m.assign = true;
        fn = vf_function_create(ctx, &(vf_function_desc){.name = "assigning", .body = fmodel_body, .user = &m,
            .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x0), *y, *g = NULL;
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        assert_int_equal(vf_tape_gradient(tp, sum(ctx, y), 1, &x, &g), VF_ERROR_INVALID_ARGUMENT);
        assert_null(g);
        vf_tape_end(tp);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "'assigning'", "assigns variables", NULL);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* A traced cond whose branch assigns a variable: replaying it to
   differentiate would assign again, so the gradient fails naming the node. */
static vf_tensor *g_var;
static vf_status then_assign(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_status s = vf_assign_add(g_var, scalar(ctx, 1));
    out[0] = vf_mul(ctx, in[0], in[0]);
    return s;
}
static vf_status assign_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *p = vf_greater(ctx, sum(ctx, in[0]), scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_assign, else_sq, 1, in, 1, &y, NULL);
    if (s == VF_OK) s = vf_tape_gradient(tp, sum(ctx, y), 1, in, out);
    vf_tape_end(tp);
    return s;
}

/* a non-differentiable op on the path inside a traced branch */
static vf_status then_argmax(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *r = vf_reshape(ctx, in[0], 2, (int64_t[]){1, N});
    out[0] = vf_mul(ctx, in[0], vf_cast(ctx, vf_argmax(ctx, r, 1), VF_F32));
    return VF_OK;
}
static vf_status argmax_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *p = vf_greater(ctx, sum(ctx, in[0]), scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_argmax, else_sq, 1, in, 1, &y, NULL);
    if (s == VF_OK) s = vf_tape_gradient(tp, sum(ctx, y), 1, in, out);
    vf_tape_end(tp);
    return s;
}

/* ---- what has no gradient --------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){N}, 2.0);
    /* a target computed before the tape began: the tape never saw it */
    vf_tensor *y = sum(ctx, vf_mul(ctx, x, x));
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *z = vf_mul(ctx, x, x);
    vf_tensor *g = NULL;
    assert_int_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "target", "not recorded", NULL);
    /* an integer source */
    vf_tensor *ix = vf_fill(ctx, VF_I32, 1, (int64_t[]){N}, 2.0);
    vf_tensor *zi = sum(ctx, vf_mul(ctx, z, vf_cast(ctx, ix, VF_F32)));
    assert_int_equal(vf_tape_gradient(tp, zi, 1, &ix, &g), VF_ERROR_DTYPE);
    assert_null(g);
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_tape_gradient", "source 0", "i32", NULL);
    /* a traced branch that assigns */
    g_var = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0));
    vf_tensor_spec sig = {VF_F32, 1, {N}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "assigning", .body = assign_body,
        .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    vf_tensor *gx = NULL;
    assert_int_equal(vf_function_call(fn, &x, &gx), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "vf_cond", "assign", NULL);
    vf_function_destroy(fn);
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "argmax", .body = argmax_body,
        .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    assert_int_equal(vf_function_call(fn, &x, &gx), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "vf_cast", "not differentiable", NULL);
    vf_function_destroy(fn);
    /* the tape still works: d sum(x*x) = 2x */
    assert_int_equal(vf_tape_gradient(tp, z, 1, &x, &g), VF_OK);
    float *gv = vt_read(g), want[N] = {4, 4, 4};
    vt_assert_close_f32(gv, want, N, 0, 0, "after the errors");
    free(gv);
    vf_tape_end(tp);
    vt_context_done(ctx);
}

/* Found by tests/test_differential and fuzz/fuzz_api after the control-flow
   merge: a target computed from empty tensors (ops that produce nothing
   were not recorded, so "not recorded by this tape"), and a gradient
   through the call of a function destroyed before the gradient (its body
   ran again: use after free of its user data). */
static void test_empty_and_destroyed(void **state)
{
    (void)state;
    for (int be = 0; be < (vt_have_vulkan() ? 2 : 1); be++) {
        vf_context *ctx = vt_context(be ? VF_BACKEND_VULKAN : VF_BACKEND_CPU);
        vf_tensor *x = vf_fill(ctx, VF_F32, 2, (int64_t[]){0, 3}, 1.0);
        vf_tape *tp = vf_tape_begin(ctx);
        vf_tensor *y = sum(ctx, vf_tanh(ctx, vf_mul(ctx, x, scalar(ctx, 2))));
        vf_tensor *yc = vf_reduce_sum(ctx, vf_exp(ctx, x), 1, (int[]){0}, false); /* [3] from an empty set */
        vf_tensor *g = NULL, *gc = NULL;
        assert_int_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_OK);
        assert_int_equal(vf_tensor_rank(g), 2);
        assert_int_equal(vf_tensor_dim(g, 0), 0);
        assert_int_equal(vf_tensor_dim(g, 1), 3);
        assert_int_equal(vf_tape_gradient(tp, yc, 1, &x, &gc), VF_OK);
        assert_int_equal(vf_tensor_numel(gc), 0);
        /* a target made from empty tensors only, with a non-empty source off
           its path: zeros for it, as for any recorded constant */
        vf_tensor *w = vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 1.0), *gw[2] = {0};
        vf_tensor *ye = vf_reduce_sum(ctx, vf_mul(ctx, vf_tanh(ctx, x), x), 0, NULL, false);
        assert_int_equal(vf_tape_gradient(tp, ye, 2, (vf_tensor *[]){x, w}, gw), VF_OK);
        assert_int_equal(vf_tensor_numel(gw[0]), 0);
        float *gwv = vt_read(gw[1]), zero[2] = {0, 0};
        vt_assert_close_f32(gwv, zero, 2, 0, 0, "source off an empty target's path");
        free(gwv);
        vf_tape_end(tp);

        float w0[9], x0[6];
        vt_fill_uniform(w0, 9, -1, 1, 21);
        vt_fill_uniform(x0, 6, -1, 1, 22);
        fmodel *m = calloc(1, sizeof *m);
        m->w = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 3}, w0);
        vf_tensor_spec sig = {VF_F32, 2, {-1, 3}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "gone", .body = fmodel_body,
            .user = m, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        vf_tensor *xi = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x0), *out = NULL;
        tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(fn, &xi, &out), VF_OK);
        vf_tensor *loss = sum(ctx, out);
        vf_function_destroy(fn);
        free(m); /* the body's user data goes with the function, as users write it */
        assert_int_equal(vf_tape_gradient(tp, loss, 1, &xi, &g), VF_ERROR_INVALID_ARGUMENT);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "'gone'", "destroyed", NULL);
        vf_tape_end(tp);
        vt_context_done(ctx);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_flow_gradients),
        cmocka_unit_test(test_symbolic_batch),
        cmocka_unit_test(test_second_order),
        cmocka_unit_test(test_function_call_under_tape),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_empty_and_destroyed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
