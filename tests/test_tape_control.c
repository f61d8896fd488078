/* vf_tape through control flow and of higher order: gradients through
 * vf_cond and vf_while_loop, eager and traced (fused and unfused, select-
 * lowered and real conds), on both backends, checked against central
 * finite differences of a double-precision host reference of the same
 * program, and with a symbolic batch dim (docs/GRADIENTS.md). A traced
 * function called under an eager tape and what has no gradient:
 * tests/test_tape_traced.c; second order (nested tapes):
 * tests/test_tape_higher.c.
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

/* ---- vf_cond: then x*w, else x*x, on sum(x) > 0 -------------------------- */

static vf_tensor *f_cond(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, x), vt_scalar(ctx, 0));
    vf_tensor *y = NULL;
    if (vf_cond(ctx, p, vt_branch_mul, vt_branch_square, 2, (vf_tensor *[]){x, w}, 1, &y, NULL) != VF_OK) return NULL;
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
    vf_tensor *p = vf_less(ctx, vf_reduce_max(ctx, in[0], 0, NULL, false), vt_scalar(ctx, 100));
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
    caps k = {w, vf_exp(ctx, vf_mul(ctx, x, vt_scalar(ctx, 0.5)))};
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, x), vt_scalar(ctx, 0));
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
    out[0] = vf_less(ctx, vt_sum(ctx, vf_mul(ctx, in[0], in[0])), vt_scalar(ctx, 30));
    return VF_OK;
}
static vf_status wb_grow(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *k = user;
    out[0] = vf_add(ctx, vf_mul(ctx, in[0], vt_scalar(ctx, 1.5)), vf_mul(ctx, k->w, k->h));
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
    out[0] = vf_less(ctx, vt_sum(ctx, vf_abs(ctx, in[0])), vt_scalar(ctx, 1e30));
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
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[1]), vt_scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, vt_branch_mul, vt_branch_square, 2, (vf_tensor *[]){in[1], k->w}, 1, &y, NULL);
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
    vf_tensor *p = vf_less(ctx, vt_sum(ctx, x), vt_scalar(ctx, 5)), *y = NULL;
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
    vf_tensor *p = vf_less(ctx, vf_reduce_max(ctx, z, 0, NULL, false), vt_scalar(ctx, 100)), *t = NULL;
    vf_status s = vf_cond(ctx, p, vt_branch_mul, vt_branch_square, 2, (vf_tensor *[]){vf_softmax(ctx, z, -1), in[1]}, 1, &t, NULL);
    out[0] = s == VF_OK ? vf_add(ctx, t, vf_reduce_max(ctx, z, 0, NULL, true)) : NULL;
    return s;
}
static vf_tensor *f_mm(vf_context *ctx, const tcase *c, vf_tensor *x, vf_tensor *w)
{
    (void)c;
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, x), vt_scalar(ctx, 0)), *y = NULL;
    if (vf_cond(ctx, p, then_mm, vt_branch_square, 2, (vf_tensor *[]){x, w}, 1, &y, NULL) != VF_OK) return NULL;
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
    vf_tensor *loss = y ? vt_sum(ctx, y) : NULL;
    vf_status s = vf_tape_gradient(tp, loss, 2, (vf_tensor *[]){in[0], c->wt}, out);
    vf_tape_end(tp);
    out[2] = loss;
    return s;
}

typedef struct {
    const tcase *c;
    double x[N], w[N];
} at;

static double ref_at(void *u)
{
    at *a = u;
    return a->c->ref(a->x, a->w);
}

/* d ref / d (x, w) by central differences in double. */
static void ref_grads(const tcase *c, double *gx, double *gw)
{
    at a = {.c = c};
    for (int i = 0; i < N; i++) a.x[i] = c->x[i], a.w[i] = c->w[i];
    for (int i = 0; i < N; i++) {
        gx[i] = vt_central_diff(ref_at, &a, &a.x[i], 1e-6);
        gw[i] = vt_central_diff(ref_at, &a, &a.w[i], 1e-6);
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
    /* traced: fused, then unfused */
    for (int fused = 1; fused >= 0; fused--) {
        vf_tensor_spec sig = {VF_F32, 1, {N}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "grads", .body = grad_body,
            .user = c, .n_inputs = 1, .n_outputs = 3, .input_signature = &sig, .unfused = !fused});
        vf_status s = vf_function_call(fn, &x, out);
        if (s != VF_OK) fail_msg("%s traced: %s", c->name, vf_error_message(ctx));
        check_out(c, out, fused ? "traced" : "traced unfused", be);
        vf_function_destroy(fn);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_control_flow_gradients),
        cmocka_unit_test(test_symbolic_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
