/* vf_tape and traced functions, and what has no gradient: a traced
 * function (a cond inside) called under an eager tape gives the eager
 * body's gradients at two batch sizes from one trace, and one that assigns
 * variables cannot be differentiated; targets the tape never recorded,
 * integer sources, traced branches that assign or hold a
 * non-differentiable op fail with a message and leave the tape usable;
 * targets computed from empty tensors, and the call of a function
 * destroyed before the gradient (docs/GRADIENTS.md); the weight gradient
 * of a batched x @ W as one flattened matmul; slices of a symbolic dim
 * with fixed sizes and the roll's gradient, the gradient of a concat of
 * two symbolic parts. Gradients through
 * control flow: tests/test_tape_control.c. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3 /* elements of test_errors' x */

/* ---- a traced function called under an eager tape ---------------------------- */

typedef struct { vf_tensor *w, *var; bool assign; } fmodel;

/* y = tanh(x w) * x (x [n,3], w [3,3]), and a cond on the batch sum */
static vf_status fmodel_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    fmodel *m = user;
    vf_tensor *y = vf_mul(ctx, vf_tanh(ctx, vf_matmul(ctx, in[0], m->w)), in[0]);
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 0));
    vf_tensor *ws = vf_reduce_sum(ctx, m->w, 1, (int[]){0}, false);
    vf_status s = vf_cond(ctx, p, vt_branch_mul, vt_branch_square, 2, (vf_tensor *[]){y, ws}, 1, &out[0], NULL);
    if (s == VF_OK && m->assign) s = vf_assign_add(m->var, vt_scalar(ctx, 1));
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
                vf_tensor *loss = vt_sum(ctx, vf_mul(ctx, y, y));
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

        /* a function that assigns cannot be run again to differentiate it */
        m.var = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0));
        m.assign = true;
        fn = vf_function_create(ctx, &(vf_function_desc){.name = "assigning", .body = fmodel_body, .user = &m,
            .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x0), *y, *g = NULL;
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        assert_int_equal(vf_tape_gradient(tp, vt_sum(ctx, y), 1, &x, &g), VF_ERROR_INVALID_ARGUMENT);
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
    vf_status s = vf_assign_add(g_var, vt_scalar(ctx, 1));
    out[0] = vf_mul(ctx, in[0], in[0]);
    return s;
}
static vf_status assign_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_assign, vt_branch_square, 1, in, 1, &y, NULL);
    if (s == VF_OK) s = vf_tape_gradient(tp, vt_sum(ctx, y), 1, in, out);
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
    vf_tensor *p = vf_greater(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 0)), *y = NULL;
    vf_status s = vf_cond(ctx, p, then_argmax, vt_branch_square, 1, in, 1, &y, NULL);
    if (s == VF_OK) s = vf_tape_gradient(tp, vt_sum(ctx, y), 1, in, out);
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
    vf_tensor *y = vt_sum(ctx, vf_mul(ctx, x, x));
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *z = vf_mul(ctx, x, x);
    vf_tensor *g = NULL;
    assert_int_equal(vf_tape_gradient(tp, y, 1, &x, &g), VF_ERROR_INVALID_ARGUMENT);
    assert_null(g);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "target", "not recorded", NULL);
    /* an integer source */
    vf_tensor *ix = vf_fill(ctx, VF_I32, 1, (int64_t[]){N}, 2.0);
    vf_tensor *zi = vt_sum(ctx, vf_mul(ctx, z, vf_cast(ctx, ix, VF_F32)));
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
        vf_tensor *y = vt_sum(ctx, vf_tanh(ctx, vf_mul(ctx, x, vt_scalar(ctx, 2))));
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
        vf_tensor *loss = vt_sum(ctx, out);
        vf_function_destroy(fn);
        free(m); /* the body's user data goes with the function, as users write it */
        assert_int_equal(vf_tape_gradient(tp, loss, 1, &xi, &g), VF_ERROR_INVALID_ARGUMENT);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "'gone'", "destroyed", NULL);
        vf_tape_end(tp);
        vt_context_done(ctx);
    }
}

/* ---- the weight gradient of a batched x @ W ------------------------------------ */

#define MK 5 /* x [..., 4, MK] @ W [MK, MN] (or W^T, W [MN, MK]) */
#define MN 3

typedef struct { vf_tensor *w; bool tb; } wmodel;

/* out: d sum(y^2) / dW and / dx, y = x @ op(W) */
static vf_status wgrad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    wmodel *m = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_matmul_ex(ctx, in[0], m->w, false, m->tb);
    vf_status s = vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, y, y)), 2, (vf_tensor *[]){m->w, in[0]}, out);
    vf_tape_end(tp);
    return s;
}

/* The gradients against a double reference: rows of x (all dims but the
   last, flattened) times W; dW = sum over rows of x_r^T 2 y_r. */
static void check_wgrad(const float *x, int64_t rows, const float *w, bool tb, const float *gw, const float *gx)
{
    double dw[MK * MN] = {0};
    float *want_gx = malloc(sizeof(float) * (size_t)(rows * MK) + 1), want_gw[MK * MN];
    for (int64_t r = 0; r < rows; r++) {
        double y[MN];
        for (int n = 0; n < MN; n++) {
            y[n] = 0;
            for (int k = 0; k < MK; k++) y[n] += (double)x[r * MK + k] * w[tb ? n * MK + k : k * MN + n];
        }
        for (int k = 0; k < MK; k++) {
            double gxk = 0;
            for (int n = 0; n < MN; n++) {
                gxk += 2 * y[n] * w[tb ? n * MK + k : k * MN + n];
                dw[tb ? n * MK + k : k * MN + n] += 2 * y[n] * x[r * MK + k];
            }
            want_gx[r * MK + k] = (float)gxk;
        }
    }
    for (int i = 0; i < MK * MN; i++) want_gw[i] = (float)dw[i];
    vt_assert_close_f32(gw, want_gw, MK * MN, vt_matmul_atol(rows * MN), 1e-4, "dW vs double reference");
    vt_assert_close_f32(gx, want_gx, (size_t)(rows * MK), vt_matmul_atol(MN), 1e-4, "dx vs double reference");
    free(want_gx);
}

/* dW of x [..., 4, 5] @ W, W a matrix, traced: one GEMM over all rows of x
   ([rows, 5]^T [rows, 3]), no batched [..., 5, 3] product summed over the
   batch. At two sizes of a symbolic batch from one trace, rank 4, W
   transposed, eagerly, and with two symbolic dims (where the rows cannot be
   flattened by a traced reshape: the batched form, still right). */
static void test_matmul_weight_gradient(void **state)
{
    (void)state;
    static const vf_tensor_spec sigs[4] = {{VF_F32, 3, {-1, 4, MK}}, {VF_F32, 4, {2, 3, 4, MK}},
                                           {VF_F32, 3, {-1, 4, MK}}, {VF_F32, 3, {-1, -1, MK}}};
    float x0[2 * 3 * 4 * MK], w0[MK * MN];
    vt_fill_uniform(x0, sizeof x0 / sizeof *x0, -1, 1, 21);
    vt_fill_uniform(w0, MK * MN, -1, 1, 22);
    vf_backend bes[2];
    for (int bi = 0, nbe = vt_backends(bes); bi < nbe; bi++) {
        vf_context *ctx = vt_context(bes[bi]);
        for (int c = 0; c < 4; c++) {
            bool tb = c == 2;
            wmodel m = {vf_tensor_from_host(ctx, VF_F32, 2, tb ? (int64_t[]){MN, MK} : (int64_t[]){MK, MN}, w0), tb};
            vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "wgrad", .body = wgrad_body,
                .user = &m, .n_inputs = 1, .n_outputs = 2, .input_signature = &sigs[c]});
            for (int64_t nb = 3; nb >= 2; nb--) {
                vf_tensor_spec sh = sigs[c];
                if (sh.shape[0] < 0) sh.shape[0] = nb;
                if (sh.shape[1] < 0) sh.shape[1] = 4;
                int64_t rows = 1;
                for (int d = 0; d + 1 < sh.rank; d++) rows *= sh.shape[d];
                vf_scope_begin(ctx);
                vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, sh.rank, sh.shape, x0), *g[2];
                for (int traced = 0; traced < 2; traced++) {
                    if (traced) assert_int_equal(vf_function_call(fn, &x, g), VF_OK);
                    else assert_int_equal(wgrad_body(ctx, &x, g, &m), VF_OK);
                    assert_int_equal(vf_tensor_rank(g[0]), 2);
                    float *gw = vt_read(g[0]), *gx = vt_read(g[1]);
                    check_wgrad(x0, rows, w0, tb, gw, gx);
                    free(gw), free(gx);
                }
                vf_scope_end(ctx);
            }
            char *text = vf_function_graph_text(fn);
            assert_non_null(text);
            /* the flattened product: [5,3] (W^T: [3,5]) straight from a matmul (the
               batched form is a [...,5,3] matmul and a reduce_sum over the batch) */
            char want[64];
            snprintf(want, sizeof want, "{trans_a=1 trans_b=0} : f32[%d,%d]", tb ? MN : MK, tb ? MK : MN);
            if ((c < 3) != (strstr(text, want) != NULL))
                fail_msg("case %d: dW %s one flattened matmul:\n%s", c, c < 3 ? "is not" : "cannot be", text);
            free(text);
            vf_function_stats st;
            vf_function_stats_get(fn, &st);
            assert_int_equal(st.traces, 1);
            vf_function_destroy(fn);
        }
        vt_context_done(ctx);
    }
}

/* ---- slices of a symbolic dim: fixed sizes and the roll ------------------------- */

#define RC 2 /* columns of the roll's x [-1, RC] */

typedef struct { bool split; uint32_t dims[7]; } roll_case;

/* out[0]: d sum(roll(x) * x) / dx, roll(x) = concat(x[1:], x[:1]) along dim
   0 (or split {1, -1} and the parts swapped); out[1]: roll(x); out[2]: the
   sum of x[2:5]. Notes the
   symbolic dims of its slices while traced (0 when run eagerly). */
static vf_status roll_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    roll_case *c = user;
    vf_tensor *x = in[0], *p[2] = {0};
    vf_tape *tp = vf_tape_begin(ctx);
    vf_status s = VF_OK;
    if (c->split) {
        s = vf_split(ctx, x, 2, (int64_t[]){1, -1}, 0, p);   /* x[:1], x[1:] */
    } else {
        p[0] = vf_slice(ctx, x, (int64_t[]){0, 0}, (int64_t[]){1, INT64_MAX}, NULL);
        p[1] = vf_slice(ctx, x, (int64_t[]){1, 0}, (int64_t[]){INT64_MAX, INT64_MAX}, NULL);
    }
    vf_tensor *more[5] = {
        vf_slice(ctx, x, (int64_t[]){2, 0}, (int64_t[]){5, INT64_MAX}, NULL),           /* x[2:5] */
        vf_slice(ctx, x, (int64_t[]){-3, 0}, (int64_t[]){INT64_MAX, INT64_MAX}, NULL),  /* x[-3:] */
        vf_slice(ctx, x, (int64_t[]){-1, 0}, (int64_t[]){-4, INT64_MAX}, (int64_t[]){-1, 1}), /* x[-1:-4:-1] */
        vf_slice(ctx, x, (int64_t[]){1, 0}, (int64_t[]){-1, INT64_MAX}, NULL),          /* x[1:-1] */
        vf_slice(ctx, x, NULL, NULL, (int64_t[]){-1, 1}),                               /* x[::-1] */
    };
    if (s == VF_OK) {
        c->dims[0] = vf_tensor_symbolic_dims(p[0]);
        c->dims[1] = vf_tensor_symbolic_dims(p[1]);
        for (int k = 0; k < 5; k++) c->dims[2 + k] = vf_tensor_symbolic_dims(more[k]);
        out[1] = vf_concat(ctx, 2, (vf_tensor *[]){p[1], p[0]}, 0);
        out[2] = vt_sum(ctx, more[0]);
        s = vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, out[1], x)), 1, &x, &out[0]);
    }
    vf_tape_end(tp);
    return s;
}

/* A roll along a symbolic dim, traced once and called at two batch sizes:
   x[:1], x[2:5], x[-3:], x[-1:-4:-1] and split {1, -1}'s first part have
   static sizes (x[1:], x[1:-1], x[::-1] do not), so the concat's gradient
   is known; values against eager and a double reference (d/dx_i of
   sum_i x_{i+1} x_i is x_{i+1} + x_{i-1}, cyclically). A call whose dim is
   too small for a fixed slice fails at that slice. */
static void test_roll_symbolic(void **state)
{
    (void)state;
    vf_backend bes[2];
    int nbe = vt_backends(bes);
    for (int be = 0; be < nbe; be++)
        for (int split = 0; split < 2; split++) {
            vf_context *ctx = vt_context(bes[be]);
            roll_case c = {.split = split};
            vf_tensor_spec sig = {VF_F32, 2, {-1, RC}};
            vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "roll", .body = roll_body,
                .user = &c, .n_inputs = 1, .n_outputs = 3, .input_signature = &sig});
            float x0[7 * RC];
            vt_fill_uniform(x0, 7 * RC, -1, 1, 31 + (uint64_t)split);
            for (int64_t nb = 5; nb <= 7; nb += 2) {
                vf_scope_begin(ctx);
                vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, RC}, x0), *t[3], *e[3];
                assert_int_equal(vf_function_call(fn, &x, t), VF_OK);
                if (nb == 5) {
                    uint32_t want[7] = {0, 1, 0, 0, 0, 1, 1};
                    for (int k = 0; k < 7; k++) assert_int_equal(c.dims[k], want[k]);
                }
                assert_int_equal(roll_body(ctx, &x, e, &c), VF_OK);
                double ref[7 * RC];
                float refg[7 * RC], refr[7 * RC];
                for (int64_t i = 0; i < nb; i++)
                    for (int j = 0; j < RC; j++) {
                        int64_t up = (i + 1) % nb, down = (i + nb - 1) % nb;
                        ref[i * RC + j] = (double)x0[up * RC + j] + (double)x0[down * RC + j];
                        refg[i * RC + j] = (float)ref[i * RC + j];
                        refr[i * RC + j] = x0[up * RC + j];
                    }
                for (int k = 0; k < 2; k++) {
                    float *a = vt_read(t[k]), *b = vt_read(e[k]);
                    assert_int_equal(vf_tensor_dim(t[k], 0), nb);
                    vt_assert_close_f32(a, b, (size_t)(nb * RC), 1e-6, 1e-5, "roll traced vs eager");
                    vt_assert_close_f32(a, k ? refr : refg, (size_t)(nb * RC), 1e-6, 1e-5, "roll vs reference");
                    free(a), free(b);
                }
                double s25 = 0;
                for (int i = 2 * RC; i < 5 * RC; i++) s25 += x0[i];
                assert_float_equal(vt_read1(t[2]), s25, 1e-5);
                vf_scope_end(ctx);
            }
            vf_function_stats st;
            vf_function_stats_get(fn, &st);
            assert_int_equal(st.traces, 1);
            /* 4 rows cannot hold x[2:5], whose size the trace fixed at 3 */
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){4, RC}, x0), *t[3] = {0};
            assert_int_equal(vf_function_call(fn, &x, t), VF_ERROR_SHAPE);
            vt_expect_error(ctx, VF_ERROR_SHAPE, "'roll'", "vf_slice of [4,2]", "trace fixed it at 3", NULL);
            vf_tensor_release(x);
            vf_function_destroy(fn);
            vt_context_done(ctx);
        }
}

/* out[0]: d sum(y * y) / dx, y = concat(x, sin(x)) along the symbolic dim 0:
   both parts vary, so the gradient gathers them at positions counted at
   each call. out[1]: d sum(g0 * g0) / dx (second order through the gather). */
static vf_status concat_sym_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *g = NULL;
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_tensor *y = vf_concat(ctx, 2, (vf_tensor *[]){x, vf_sin(ctx, x)}, 0);
    vf_status s = vf_tape_gradient(inner, vt_sum(ctx, vf_mul(ctx, y, y)), 1, &x, &g);
    vf_tape_end(inner);
    if (s == VF_OK) s = vf_tape_gradient(outer, vt_sum(ctx, vf_mul(ctx, g, g)), 1, &x, &out[1]);
    vf_tape_end(outer);
    out[0] = g;
    return s;
}

static void test_concat_symbolic(void **state)
{
    (void)state;
    vf_backend bes[2];
    int nbe = vt_backends(bes);
    for (int be = 0; be < nbe; be++) {
        vf_context *ctx = vt_context(bes[be]);
        vf_tensor_spec sig = {VF_F32, 2, {-1, RC}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "concat_sym", .body = concat_sym_body,
            .n_inputs = 1, .n_outputs = 2, .input_signature = &sig});
        float x0[6 * RC];
        vt_fill_uniform(x0, 6 * RC, -1.5f, 1.5f, 35);
        for (int64_t nb = 3; nb <= 6; nb += 3) {
            vf_scope_begin(ctx);
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, RC}, x0), *t[2];
            if (vf_function_call(fn, &x, t) != VF_OK) fail_msg("nb = %lld: %s", (long long)nb, vf_error_message(ctx));
            /* g = 2x + sin 2x; d sum(g^2) = 2 g (2 + 2 cos 2x) */
            float w0[6 * RC], w1[6 * RC];
            for (int i = 0; i < nb * RC; i++) {
                double v = x0[i], g = 2 * v + sin(2 * v);
                w0[i] = (float)g;
                w1[i] = (float)(2 * g * (2 + 2 * cos(2 * v)));
            }
            float *a = vt_read(t[0]), *b = vt_read(t[1]);
            vt_assert_close_f32(a, w0, (size_t)(nb * RC), 1e-5, 1e-5, "concat of two symbolic parts, first order");
            vt_assert_close_f32(b, w1, (size_t)(nb * RC), 1e-5, 1e-4, "concat of two symbolic parts, second order");
            free(a), free(b);
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
        cmocka_unit_test(test_function_call_under_tape),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_empty_and_destroyed),
        cmocka_unit_test(test_matmul_weight_gradient),
        cmocka_unit_test(test_roll_symbolic),
        cmocka_unit_test(test_concat_symbolic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
