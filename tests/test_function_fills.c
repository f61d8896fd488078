/* Constants made inside a traced body (vf_fill, and ops computed only from
 * them) cost no kernel per call: they are literals of the fused kernels
 * that read them (graph/passes_fills.c, plan/partition.c) or values made
 * once. Every case runs the same body with its constants made by vf_fill
 * in the body and with the same constants made outside and captured, on
 * the fused plan, the unfused plan and the CPU backend: the vf_fill'ed
 * body has the captured one's kernels and dispatches per call, and every
 * output is bit for bit the captured one's, the unfused plan's and the CPU
 * backend's (any NaN equal to any NaN), or, for the chain with
 * transcendental ops, within float rounding of them. Cases: the 8-op chain
 * of bench_fusion, edge values (NaN, +-inf, -0, FLT_MAX, f16 rounding and
 * its largest value, i32 extremes with wrapping, bool), a fill that is a
 * function output or read by a matmul or a reduction, fills inside
 * vf_cond branches and a vf_while_loop body, and a gradient taken inside
 * the body. */
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R = 96, C = 80, MAX_K = 12, MAX_OUT = 6 };

/* A constant of a case: made by vf_fill in the body, or outside and captured. */
typedef struct kdef {
    vf_dtype dt;
    int rank;
    int64_t dim[2];
    double v;
} kdef;

typedef struct fcase {
    const char *what;
    vf_body body;
    int n_k;
    kdef k[MAX_K];
    int n_in, n_out;
    vf_dtype in_dt;    /* every input is [R, C] of this dtype */
    bool exact;        /* outputs bit for bit; else within float rounding */
    int extra;         /* kernels allowed over the captured body's */
} fcase;

typedef struct fuser {
    const fcase *fc;
    bool captured;
    vf_tensor *cap[MAX_K];
} fuser;

/* Constant i of the case: vf_fill'ed here, or the captured tensor. */
static vf_tensor *K(vf_context *ctx, void *user, int i)
{
    fuser *u = user;
    const kdef *d = &u->fc->k[i];
    return u->captured ? u->cap[i] : vf_fill(ctx, d->dt, d->rank, d->dim, d->v);
}

typedef struct fres {
    void *out[MAX_OUT];
    int64_t numel[MAX_OUT];
    vf_dtype dt[MAX_OUT];
    vf_function_stats fs;
} fres;

static float x_f32[R * C];
static int32_t x_i32[R * C];

/* Calls the case twice (trace and plan, then the plan again) on backend b,
   fused or not, its constants made in the body or captured. */
static void frun(vf_backend b, bool fuse, bool captured, const fcase *fc, fres *r)
{
    vf_context *ctx = vt_context(b);
    fuser u = {.fc = fc, .captured = captured};
    for (int i = 0; captured && i < fc->n_k; i++)
        u.cap[i] = vf_fill(ctx, fc->k[i].dt, fc->k[i].rank, fc->k[i].dim, fc->k[i].v);
    vf_tensor *in[2];
    for (int i = 0; i < fc->n_in; i++)
        in[i] = vf_tensor_from_host(ctx, fc->in_dt, 2, (int64_t[]){R, C},
                                    fc->in_dt == VF_I32 ? (const void *)x_i32 : (const void *)x_f32);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "fills", .body = fc->body, .user = &u,
                                                                  .n_inputs = fc->n_in, .n_outputs = fc->n_out,
                                                                  .unfused = !fuse});
    assert_non_null(fn);
    vf_tensor *out[MAX_OUT] = {NULL};
    for (int call = 0; call < 2; call++)
        if (vf_function_call(fn, in, out) != VF_OK) fail_msg("%s: %s", fc->what, vf_error_message(ctx));
    for (int i = 0; i < fc->n_out; i++) {
        r->out[i] = vt_read(out[i]);
        r->numel[i] = vf_tensor_numel(out[i]);
        r->dt[i] = vf_tensor_dtype(out[i]);
    }
    assert_int_equal(vf_function_stats_get(fn, &r->fs), VF_OK);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

static bool is_nan(const uint8_t *p, vf_dtype dt)
{
    if (dt == VF_F32) {
        float f;
        memcpy(&f, p, 4);
        return isnan(f);
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return dt == VF_F16 && (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
}

/* Output o of a and b: the same elements bit for bit (NaN: any NaN), or
   within float rounding (f32 outputs) when the case is not exact. */
static void same(const fcase *fc, const fres *a, const fres *b, int o, const char *vs)
{
    assert_int_equal(a->numel[o], b->numel[o]);
    assert_int_equal(a->dt[o], b->dt[o]);
    char msg[160];
    snprintf(msg, sizeof msg, "%s, output %d: %s", fc->what, o, vs);
    if (!fc->exact) {   /* f32 within rounding; NaN, infinities and the sign of zeros exactly */
        const float *x = a->out[o], *y = b->out[o];
        for (int64_t i = 0; i < a->numel[o]; i++) {
            bool ok = isnan(x[i]) || isnan(y[i]) ? isnan(x[i]) && isnan(y[i])
                    : isinf(x[i]) || isinf(y[i]) || x[i] == 0 || y[i] == 0 ? memcmp(&x[i], &y[i], 4) == 0
                    : fabs((double)x[i] - y[i]) <= 1e-5 * (1 + fabs((double)y[i]));
            if (!ok) fail_msg("%s: element %lld: %.9g vs %.9g", msg, (long long)i, x[i], y[i]);
        }
        return;
    }
    size_t es = a->dt[o] == VF_BOOL ? 1 : a->dt[o] == VF_F16 ? 2 : 4;
    const uint8_t *p = a->out[o], *q = b->out[o];
    for (int64_t i = 0; i < a->numel[o]; i++, p += es, q += es) {
        bool fl = a->dt[o] == VF_F32 || a->dt[o] == VF_F16;
        if (fl && is_nan(p, a->dt[o]) && is_nan(q, a->dt[o])) continue;
        if (memcmp(p, q, es) != 0) fail_msg("%s: element %lld differs", msg, (long long)i);
    }
}

static void free_res(fres *r)
{
    for (int i = 0; i < MAX_OUT; i++) free(r->out[i]);
}

/* The checks of the file comment. The vf_fill'ed body never has more
   kernels or dispatches than the captured one (fewer where folding
   computes at trace time what the captured body computes per call; at
   most fc->extra more where splats stay out of row and matmul groups);
   fused_kernels: exactly that many kernels, -1: exactly the captured
   body's kernels and dispatches, -3: no more. Returns whether the
   vf_fill'ed body ran a recorded plan. */
static bool fcheck(const fcase *fc, int fused_kernels)
{
    vt_fill_uniform(x_f32, R * C, -2, 2, 21);
    for (int i = 0; i < R * C; i++) x_i32[i] = (int32_t)lrintf(x_f32[i] * 1000.0f);
    x_i32[0] = INT32_MAX, x_i32[1] = INT32_MIN, x_i32[2] = -1, x_i32[3] = 0;
    fres fill = {0}, cap = {0}, unf = {0}, cpu = {0};
    frun(VF_BACKEND_VULKAN, true, false, fc, &fill);
    frun(VF_BACKEND_VULKAN, true, true, fc, &cap);
    frun(VF_BACKEND_VULKAN, false, false, fc, &unf);
    frun(VF_BACKEND_CPU, true, false, fc, &cpu);
    printf("%s: vf_fill'ed %d kernels / %d dispatches, captured %d / %d, unfused %d / %d\n", fc->what,
           fill.fs.kernels, fill.fs.dispatches_per_call, cap.fs.kernels, cap.fs.dispatches_per_call,
           unf.fs.kernels, unf.fs.dispatches_per_call);
    assert_int_equal(fill.fs.planned, unf.fs.planned);
    assert_true(fill.fs.planned || !cap.fs.planned);
    assert_true(fill.fs.kernels <= cap.fs.kernels + fc->extra);
    assert_true(fill.fs.dispatches_per_call <= cap.fs.dispatches_per_call + fc->extra);
    if (fused_kernels >= 0) {
        assert_int_equal(fill.fs.kernels, fused_kernels);
    } else if (fused_kernels == -1) {
        assert_int_equal(fill.fs.kernels, cap.fs.kernels);
        assert_int_equal(fill.fs.dispatches_per_call, cap.fs.dispatches_per_call);
    }
    for (int o = 0; o < fc->n_out; o++) {
        same(fc, &fill, &cpu, o, "vf_fill'ed fused vs CPU backend");
        same(fc, &fill, &unf, o, "vf_fill'ed fused vs unfused");
        same(fc, &fill, &cap, o, "vf_fill'ed vs captured, fused");
    }
    free_res(&fill), free_res(&cap), free_res(&unf), free_res(&cpu);
    return fill.fs.planned;
}

#define SCALAR(t, x) {t, 0, {0, 0}, x}

/* ---- bench_fusion's chain --------------------------------------------------------------- */

/* x*1.5+0.5, relu, *0.9, sigmoid, *2, -1, abs */
static vf_status chain8(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], K(ctx, u, 0)), K(ctx, u, 1));
    h = vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), K(ctx, u, 2)));
    out[0] = vf_abs(ctx, vf_sub(ctx, vf_mul(ctx, h, K(ctx, u, 3)), K(ctx, u, 4)));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_chain8(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"chain8", chain8, 5, {SCALAR(VF_F32, 1.5), SCALAR(VF_F32, 0.5), SCALAR(VF_F32, 0.9),
                                                SCALAR(VF_F32, 2.0), SCALAR(VF_F32, 1.0)}, 1, 1, VF_F32, false};
    assert_true(fcheck(&fc, 1));
}

/* ---- edge values ------------------------------------------------------------------------- */

/* f32: signed zeros, infinities, a NaN of a [C] fill (smaller than its
   reader), FLT_MAX overflowing, a scalar fill as the first operand, and
   constants folded at trace time (0.25 * 4 - 1 = 0). */
static vf_status edge_f32(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *x = in[0];
    out[0] = vf_mul(ctx, x, K(ctx, u, 0));
    out[1] = vf_add(ctx, vf_minimum(ctx, x, K(ctx, u, 1)), K(ctx, u, 2));
    out[2] = vf_where(ctx, vf_greater(ctx, x, K(ctx, u, 3)), K(ctx, u, 4), x);
    out[3] = vf_mul(ctx, x, K(ctx, u, 5));
    out[4] = vf_abs(ctx, vf_sub(ctx, K(ctx, u, 6), x));
    out[5] = vf_mul(ctx, x, vf_sub(ctx, vf_mul(ctx, K(ctx, u, 7), K(ctx, u, 8)), K(ctx, u, 9)));
    return out[5] ? VF_OK : vf_status_get(ctx);
}

static void test_edge_f32(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"edge f32", edge_f32, 10,
                             {SCALAR(VF_F32, -0.0), SCALAR(VF_F32, INFINITY), SCALAR(VF_F32, -INFINITY),
                              SCALAR(VF_F32, 0.0), {VF_F32, 1, {C, 0}, NAN}, SCALAR(VF_F32, 3.4028234663852886e38),
                              SCALAR(VF_F32, 0.1), SCALAR(VF_F32, 0.25), SCALAR(VF_F32, 4.0), SCALAR(VF_F32, 1.0)},
                             1, 6, VF_F32, true};
    /* six independent chains from x: one kernel each (the captured body
       computes 0.25 * 4 - 1 in a seventh) */
    assert_true(fcheck(&fc, 6));
}

/* f16: products are exact in float, so the fused kernel and the CPU
   backend round once alike: 1/3 rounded to f16 when stored, the largest
   f16 (overflows to inf for |x| > 1), -0, and a value that rounds to 1. */
static vf_status edge_f16(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *h = vf_cast(ctx, in[0], VF_F16);
    out[0] = vf_mul(ctx, h, K(ctx, u, 0));
    out[1] = vf_mul(ctx, h, K(ctx, u, 1));
    out[2] = vf_maximum(ctx, vf_mul(ctx, h, K(ctx, u, 2)), K(ctx, u, 2));
    out[3] = vf_mul(ctx, h, K(ctx, u, 3));
    return out[3] ? VF_OK : vf_status_get(ctx);
}

static void test_edge_f16(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"edge f16", edge_f16, 4,
                             {SCALAR(VF_F16, 1.0 / 3.0), SCALAR(VF_F16, 65504.0), SCALAR(VF_F16, -0.0),
                              SCALAR(VF_F16, 1.0000001)},
                             1, 4, VF_F32, true};
    /* every output reads the cast: one group */
    assert_true(fcheck(&fc, 1));
}

/* i32: the extremes, wrapping on overflow; bool: a fill as a where
   condition and compared with a comparison's result. */
static vf_status edge_i32_bool(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *x = in[0];
    out[0] = vf_add(ctx, x, K(ctx, u, 0));
    out[1] = vf_maximum(ctx, vf_sub(ctx, x, K(ctx, u, 1)), K(ctx, u, 1));
    out[2] = vf_mul(ctx, x, K(ctx, u, 2));
    out[3] = vf_where(ctx, K(ctx, u, 3), x, K(ctx, u, 2));
    out[4] = vf_not_equal(ctx, vf_greater(ctx, x, K(ctx, u, 4)), K(ctx, u, 5));
    return out[4] ? VF_OK : vf_status_get(ctx);
}

static void test_edge_i32_bool(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"edge i32 and bool", edge_i32_bool, 6,
                             {SCALAR(VF_I32, 2147483647.0), SCALAR(VF_I32, -2147483648.0), SCALAR(VF_I32, -1.0),
                              SCALAR(VF_BOOL, 1.0), SCALAR(VF_I32, 0.0), SCALAR(VF_BOOL, 0.0)},
                             1, 5, VF_I32, true};
    /* five independent chains from x */
    assert_true(fcheck(&fc, 5));
}

/* Fills in row and matmul kernels: push constants, exact for zeros of
   either sign, infinities and NaN (a literal -0 was folded inexactly by
   the driver in a row kernel: (sm - 0.0125) * -0 gave -0 everywhere). */
static vf_status edge_rows_matmul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *x = in[0], *sm = vf_softmax(ctx, x, -1);
    out[0] = vf_mul(ctx, vf_sub(ctx, sm, K(ctx, u, 1)), K(ctx, u, 0));               /* zeros of either sign */
    out[1] = vf_add(ctx, vf_mul(ctx, sm, K(ctx, u, 2)), K(ctx, u, 3));               /* inf, NaN */
    vf_tensor *mm = vf_matmul(ctx, x, vf_reshape(ctx, x, 2, (int64_t[]){C, R}));
    out[2] = vf_maximum(ctx, vf_mul(ctx, mm, K(ctx, u, 4)), K(ctx, u, 5));           /* 0.5 joins; 0 stays out */
    out[3] = vf_reduce_sum(ctx, vf_mul(ctx, x, K(ctx, u, 0)), 1, (int[]){-1}, true); /* -0 in a prologue */
    return out[3] ? VF_OK : vf_status_get(ctx);
}

static void test_edge_rows_matmul(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"edge values in row and matmul groups", edge_rows_matmul, 6,
                             {SCALAR(VF_F32, -0.0), SCALAR(VF_F32, 0.0125), SCALAR(VF_F32, INFINITY),
                              SCALAR(VF_F32, NAN), SCALAR(VF_F32, 0.5), SCALAR(VF_F32, 0.0)},
                             1, 4, VF_F32, false, 0};
    /* the softmax's row group, the matmul with its epilogue, the sum's row
       group with its prologue: the captured body's three */
    assert_true(fcheck(&fc, 3));
}

/* ---- fills that stay values ---------------------------------------------------------------- */

/* A small fill that is an output and read by a matmul and an elementwise
   op; a large fill that is an output; a large one read by a reduction
   over the first axis (neither fusable nor folded); a fill in a matmul's
   epilogue and in a row group. */
static vf_status kept(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *x = in[0], *w = K(ctx, u, 0);
    out[0] = vf_add(ctx, vf_matmul(ctx, x, w), K(ctx, u, 1));
    out[1] = w;
    out[2] = K(ctx, u, 2);
    out[3] = vf_mul(ctx, vf_reduce_sum(ctx, K(ctx, u, 3), 1, (int[]){0}, false), vf_reduce_max(ctx, x, 1, (int[]){0}, false));
    out[4] = vf_reduce_sum(ctx, vf_mul(ctx, x, K(ctx, u, 4)), 1, (int[]){1}, true);
    out[5] = vf_add(ctx, vf_reshape(ctx, w, 1, (int64_t[]){C * 8}), K(ctx, u, 4));
    return out[5] ? VF_OK : vf_status_get(ctx);
}

static void test_kept_fills(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"fills that stay values", kept, 5,
                             {{VF_F32, 2, {C, 8}, 0.25}, SCALAR(VF_F32, 1.0), {VF_F32, 2, {R, C}, -3.0},
                              {VF_F32, 2, {R, C}, 0.5}, SCALAR(VF_F32, 2.0)},
                             1, 6, VF_F32, false};
    /* one recorded plan (a function returning a capture runs node by node):
       the matmul with its epilogue (+1 a literal), the three fills that are
       outputs, the max, its product with the folded sum of the [R, C] fill
       (a literal), the row group (*2 a literal); w, read by the matmul, is
       read from its output */
    assert_true(fcheck(&fc, 7));
}

/* ---- control flow ---------------------------------------------------------------------------- */

static vf_status then_fn(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    out[0] = vf_add(ctx, vf_mul(ctx, in[0], K(ctx, u, 0)), K(ctx, u, 1));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status else_fn(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    out[0] = vf_sub(ctx, K(ctx, u, 2), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status loop_cond(vf_context *ctx, vf_tensor *const *v, vf_tensor **out, void *u)
{
    out[0] = vf_less(ctx, v[0], K(ctx, u, 3));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status loop_body(vf_context *ctx, vf_tensor *const *v, vf_tensor **out, void *u)
{
    out[0] = vf_add(ctx, v[0], K(ctx, u, 4));
    out[1] = vf_add(ctx, vf_mul(ctx, v[1], K(ctx, u, 5)), K(ctx, u, 1));
    return out[1] ? VF_OK : vf_status_get(ctx);
}

/* a vf_cond on sum(x) > 0 with fills in both branches, then a loop of 3
   iterations with fills in its condition and body */
static vf_status control(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), K(ctx, u, 6));
    vf_status s = vf_cond(ctx, p, then_fn, else_fn, 1, in, 1, &out[0], u);
    vf_tensor *v[2] = {K(ctx, u, 7), in[0]};
    if (s == VF_OK) s = vf_while_loop(ctx, loop_cond, loop_body, 2, v, 0, u);
    out[1] = v[1];
    return s;
}

static void test_control_flow(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"cond and while", control, 8,
                             {SCALAR(VF_F32, 0.5), SCALAR(VF_F32, 1.0), SCALAR(VF_F32, 3.0), SCALAR(VF_I32, 3.0),
                              SCALAR(VF_I32, 1.0), SCALAR(VF_F32, 0.75), SCALAR(VF_F32, 0.0), SCALAR(VF_I32, 0.0)},
                             1, 2, VF_F32, true};
    /* run node by node (the loop): small fills are made once, as captures */
    assert_false(fcheck(&fc, -1));
}

/* ---- a gradient through a body whose constants fold ------------------------------------------ */

/* loss = sum(((x * 2 + 1) * (0.25 * 2))^2), returned with d loss / d x =
   2 * (2x + 1) * 0.5 * (2 * 0.5) = 2x + 1 */
static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *u)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *h = vf_mul(ctx, vf_add(ctx, vf_mul(ctx, in[0], K(ctx, u, 0)), K(ctx, u, 1)),
                          vf_mul(ctx, K(ctx, u, 2), K(ctx, u, 0)));
    out[0] = vt_sum(ctx, vf_mul(ctx, h, h));
    vf_status s = out[0] ? vf_tape_gradient(tp, out[0], 1, in, &out[1]) : vf_status_get(ctx);
    vf_tape_end(tp);
    return s;
}

static void test_gradient(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const fcase fc = {"gradient", grad_body, 3, {SCALAR(VF_F32, 2.0), SCALAR(VF_F32, 1.0), SCALAR(VF_F32, 0.25)},
                             1, 2, VF_F32, false};
    /* the forward chain, the loss's sum, the backward chain: the constants
       are literals, and the seed (where(loss == loss, 1, 1), a scalar) is
       the fill 1 (simplify: where(c, a, a) is a), no kernel of its own */
    assert_true(fcheck(&fc, 3));
    /* against the analytic gradient, in double */
    vt_fill_uniform(x_f32, R * C, -2, 2, 21);
    fres r = {0};
    frun(VF_BACKEND_VULKAN, true, false, &fc, &r);
    const float *g = r.out[1];
    for (int i = 0; i < R * C; i++) {
        double want = 2.0 * x_f32[i] + 1.0;
        if (fabs(g[i] - want) > 1e-5 * (1 + fabs(want))) fail_msg("gradient %d: %g, want %g", i, g[i], want);
    }
    free_res(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain8),        cmocka_unit_test(test_edge_f32),     cmocka_unit_test(test_edge_f16),
        cmocka_unit_test(test_edge_i32_bool), cmocka_unit_test(test_edge_rows_matmul),
        cmocka_unit_test(test_kept_fills),    cmocka_unit_test(test_control_flow),
        cmocka_unit_test(test_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
