/* The softmax and log_softmax gradients on the CPU backend
 * (src/cpu/kernels_row_grad.c): the eager gradient runs the one-pass row
 * kernel (its row counter shows it), with the bits of the rule's ops
 * (multiply, last-axis sum, subtract, multiply; exp for log_softmax) run
 * one by one, and within a few f32 roundings of a double reference
 * written here; long rows (several reduction chunks, several exp blocks),
 * -inf in the forward's input (y = 0, log y = -inf), zero gradients. Traced
 * (fused and unfused plans) gives the same bits as eager, and so does a
 * plan whose row group is too big for the one-pass rows. Sparse softmax
 * cross entropy's eager gradient likewise (labels out of range
 * included). While a second tape records, the rule runs its ops (for
 * higher order) and the kernel is not taken. */
#include "autodiff/tape.h"
#include "cpu/cpu.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct sg_shape {
    int rank;
    int64_t dim[4];
} sg_shape;

static const sg_shape shapes[] = {
    {2, {3, 1}},           /* one element a row */
    {2, {5, 7}},           /* shorter than a vector block */
    {2, {256, 10}},        /* an MLP's logits */
    {4, {32, 2, 12, 12}},  /* attention */
    {2, {4, 300}},         /* two reduction chunks */
    {2, {2, 5000}},        /* log_softmax's exps in two blocks of a row */
    {3, {3, 5, 1000}},     /* several rows to an exp block, a last short block */
};

static int64_t numel(const sg_shape *s)
{
    int64_t n = 1;
    for (int d = 0; d < s->rank; d++) n *= s->dim[d];
    return n;
}

/* x in [-8, 8) with every 37th element -inf (not a whole row: row 0
   starts finite), g in [-2, 2) with every 11th element 0 and row 1 all
   zeros. */
static void make_inputs(const sg_shape *s, float *x, float *g, uint64_t seed)
{
    int64_t n = numel(s), cols = s->dim[s->rank - 1];
    vt_fill_uniform(x, (size_t)n, -8.0f, 8.0f, seed);
    vt_fill_uniform(g, (size_t)n, -2.0f, 2.0f, seed + 1);
    for (int64_t i = 0; i < n; i++) {
        if (i % 37 == 36 && cols > 1) x[i] = -INFINITY;
        if (i % 11 == 5) g[i] = 0.0f;
        if (i / cols == 1) g[i] = 0.0f;
    }
}

static vf_tensor *row_op(vf_context *ctx, bool log, vf_tensor *x)
{
    return log ? vf_log_softmax(ctx, x, -1) : vf_softmax(ctx, x, -1);
}

/* The rule's ops, one by one (grad_rules.c's g_softmax / g_log_softmax). */
static vf_tensor *rule_ops(vf_context *ctx, bool log, vf_tensor *g, vf_tensor *y)
{
    int ax = y->rank - 1;
    if (log) return vf_sub(ctx, g, vf_mul(ctx, vf_exp(ctx, y), vf_reduce_sum(ctx, g, 1, &ax, true)));
    return vf_mul(ctx, y, vf_sub(ctx, g, vf_reduce_sum(ctx, vf_mul(ctx, g, y), 1, &ax, true)));
}

/* dx against the double reference from the f32 y and g: within a few f32
   roundings of the terms' magnitudes (each product, the sum, the
   difference and the exp each rounded once). */
static void check_reference(const float *y, const float *g, const float *dx, int64_t rows, int64_t cols, bool log,
                            const char *what)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *yr = y + r * cols, *gr = g + r * cols;
        double s = 0, mag = 0;
        for (int64_t c = 0; c < cols; c++) {
            double t = log ? (double)gr[c] : (double)gr[c] * yr[c];
            s += t;
            mag += fabs(t);
        }
        for (int64_t c = 0; c < cols; c++) {
            double want, scale;
            if (log) {
                double e = exp((double)yr[c]);
                want = gr[c] - e * s;
                scale = fabs((double)gr[c]) + e * mag;
            } else {
                want = yr[c] * (gr[c] - s);
                scale = fabs((double)yr[c]) * (fabs((double)gr[c]) + mag);
            }
            double got = dx[r * cols + c];
            if (!(fabs(got - want) <= 4.0 * 0x1p-24 * scale + 1e-37))
                fail_msg("%s: row %lld col %lld: got %.9g, want %.17g (y %.9g g %.9g, bound %.3g)", what,
                         (long long)r, (long long)c, got, want, (double)yr[c], (double)gr[c],
                         4.0 * 0x1p-24 * scale + 1e-37);
        }
    }
}

/* d y / d x seeded with g by the tape (which it ends), the kernel's row
   counter moved by `rows`: the gradient took the kernel. */
static vf_tensor *kernel_vjp(vf_tape *tape, vf_tensor *y, vf_tensor *g, vf_tensor *x, int64_t rows, const char *what)
{
    vf_tensor *dx = NULL;
    int64_t before = vf_cpu_softmax_grad_rows();
    assert_int_equal(vf_tape_vjp(tape, 1, &y, &g, 1, &x, &dx), VF_OK);
    int64_t ran = vf_cpu_softmax_grad_rows() - before;
    vf_tape_end(tape);
    if (ran != rows) fail_msg("%s: the kernel ran %lld rows, want %lld", what, (long long)ran, (long long)rows);
    return dx;
}

/* The eager gradient: the kernel ran (its counter moved by the rows), the
   rule's ops' bits, the reference's values. */
static void eager_case(vf_context *ctx, const sg_shape *s, bool log, uint64_t seed)
{
    int64_t n = numel(s), cols = s->dim[s->rank - 1], rows = n / cols;
    float *hx = malloc((size_t)n * sizeof *hx), *hg = malloc((size_t)n * sizeof *hg);
    assert_true(hx && hg);
    make_inputs(s, hx, hg, seed);
    char what[96];
    snprintf(what, sizeof what, "%s [%lld rows x %lld]", log ? "log_softmax" : "softmax", (long long)rows,
             (long long)cols);
    vf_scope_begin(ctx);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, s->rank, s->dim, hx);
    vf_tensor *g = vf_tensor_from_host(ctx, VF_F32, s->rank, s->dim, hg);
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *y = row_op(ctx, log, x);
    vf_tensor *dx = kernel_vjp(tape, y, g, x, rows, what);
    vf_tensor *ops = rule_ops(ctx, log, g, y);
    assert_non_null(ops);
    float *got = vt_read(dx), *want = vt_read(ops), *hy = vt_read(y);
    vt_assert_same_f32(got, want, (size_t)n, what);
    check_reference(hy, hg, got, rows, cols, log, what);
    free(got), free(want), free(hy);
    vf_scope_end(ctx);
    free(hx), free(hg);
}

static void eager_kernel_has_the_ops_bits(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    for (int k = 0; k < (int)(sizeof shapes / sizeof shapes[0]); k++)
        for (int log = 0; log < 2; log++) eager_case(ctx, &shapes[k], log, 100 + (uint64_t)k);
    vt_context_done(ctx);
}

/* The rule's ops for sparse cross entropy (grad_rules.c's g_xent):
   g [L, 1] * (softmax(logits) - cast(labels [L, 1] == iota [C])). */
static vf_tensor *xent_ops(vf_context *ctx, vf_tensor *g, vf_tensor *logits, vf_tensor *labels)
{
    int64_t L = logits->shape[0], C = logits->shape[1];
    int32_t *iota = malloc((size_t)C * sizeof *iota);
    assert_non_null(iota);
    for (int64_t i = 0; i < C; i++) iota[i] = (int32_t)i;
    vf_tensor *ids = vf_tensor_from_host(ctx, VF_I32, 1, &C, iota);
    free(iota);
    int64_t col[2] = {L, 1};
    vf_tensor *onehot = vf_cast(ctx, vf_equal(ctx, vf_reshape(ctx, labels, 2, col), ids), VF_F32);
    return vf_mul(ctx, vf_reshape(ctx, g, 2, col), vf_sub(ctx, vf_softmax(ctx, logits, -1), onehot));
}

/* Sparse cross entropy's gradient by the logits, eager: the kernel (its
   counter), the ops' bits, the double reference g (softmax - onehot)
   within the softmax rows' 4.1e-7 and two f32 roundings; labels out of
   range (-1, C) give no onehot (the loss is NaN there). */
static void eager_xent_kernel_has_the_ops_bits(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    static const int64_t sizes[][2] = {{256, 10}, {7, 1}, {5, 300}, {3, 5000}};
    for (int k = 0; k < (int)(sizeof sizes / sizeof sizes[0]); k++) {
        int64_t L = sizes[k][0], C = sizes[k][1], n = L * C;
        float *hx = malloc((size_t)n * sizeof *hx), *hg = malloc((size_t)L * sizeof *hg);
        int32_t *hl = malloc((size_t)L * sizeof *hl);
        assert_true(hx && hg && hl);
        vt_fill_uniform(hx, (size_t)n, -8.0f, 8.0f, 300 + (uint64_t)k);
        vt_fill_uniform(hg, (size_t)L, -2.0f, 2.0f, 400 + (uint64_t)k);
        for (int64_t i = 0; i < n; i++)
            if (i % 37 == 36 && C > 1) hx[i] = -INFINITY;
        for (int64_t r = 0; r < L; r++) hl[r] = r == 1 ? -1 : r == 2 ? (int32_t)C : (int32_t)((r * 7) % C);
        if (L > 3) hg[3] = 0.0f;
        vf_scope_begin(ctx);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, sizes[k], hx);
        vf_tensor *g = vf_tensor_from_host(ctx, VF_F32, 1, &L, hg);
        vf_tensor *labels = vf_tensor_from_host(ctx, VF_I32, 1, &L, hl);
        char what[64];
        snprintf(what, sizeof what, "xent [%lld, %lld]", (long long)L, (long long)C);
        vf_tape *tape = vf_tape_begin(ctx);
        vf_tensor *loss = vf_sparse_softmax_cross_entropy(ctx, labels, x);
        vf_tensor *dx = kernel_vjp(tape, loss, g, x, L, what);
        float *got = vt_read(dx), *want = vt_read(xent_ops(ctx, g, x, labels));
        vt_assert_same_f32(got, want, (size_t)n, what);
        for (int64_t r = 0; r < L; r++) {
            const float *xr = hx + r * C;
            double m = -INFINITY, s = 0;
            for (int64_t c = 0; c < C; c++) m = xr[c] > m ? xr[c] : m;
            for (int64_t c = 0; c < C; c++) s += exp((double)xr[c] - m);
            for (int64_t c = 0; c < C; c++) {
                double p = exp((double)xr[c] - m) / s, oh = c == hl[r] ? 1.0 : 0.0;
                double ref = hg[r] * (p - oh), tol = fabs((double)hg[r]) * (4.2e-7 * p + 2.4e-7 * fabs(p - oh)) + 1e-37;
                if (!(fabs(got[r * C + c] - ref) <= tol))
                    fail_msg("%s: row %lld col %lld: got %.9g, want %.17g", what, (long long)r, (long long)c,
                             (double)got[r * C + c], ref);
            }
        }
        free(got), free(want);
        vf_scope_end(ctx);
        free(hx), free(hg), free(hl);
    }
    vt_context_done(ctx);
}

/* in: x, g. out: the gradient of op at x with seed g. */
static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const bool *log = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *y = row_op(ctx, *log, in[0]);
    vf_status s = vf_tape_vjp(tape, 1, &y, &in[1], 1, &in[0], &out[0]);
    vf_tape_end(tape);
    return s;
}

/* Traced: the fused plan runs the gradient's kernel, in the one-pass row
   group (cpu_rows.c) or, [2048, 64] and [4, 300] being past its size, in
   the group's members one by one (cpu_plan.c); the unfused plan the
   rule's ops; all with eager's bits. */
static void traced_has_eager_bits(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    static const sg_shape more[] = {{2, {256, 10}}, {4, {32, 2, 12, 12}}, {2, {4, 300}}, {2, {2048, 64}}};
    for (int k = 0; k < (int)(sizeof more / sizeof more[0]); k++)
        for (int lg = 0; lg < 2; lg++) {
            bool log = lg;
            const sg_shape *s = &more[k];
            int64_t n = numel(s);
            float *hx = malloc((size_t)n * sizeof *hx), *hg = malloc((size_t)n * sizeof *hg);
            assert_true(hx && hg);
            make_inputs(s, hx, hg, 200 + (uint64_t)k);
            vf_scope_begin(ctx);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, s->rank, s->dim, hx),
                                vf_tensor_from_host(ctx, VF_F32, s->rank, s->dim, hg)};
            vf_tensor *eager = NULL, *fused = NULL, *unfused = NULL;
            assert_int_equal(grad_body(ctx, in, &eager, &log), VF_OK);
            vf_function_desc d = {.name = "sm_grad", .body = grad_body, .user = &log, .n_inputs = 2, .n_outputs = 1};
            vf_function *ff = vf_function_create(ctx, &d);
            d.unfused = true;
            vf_function *fu = vf_function_create(ctx, &d);
            assert_non_null(ff);
            assert_non_null(fu);
            int64_t rows = n / s->dim[s->rank - 1], before = vf_cpu_softmax_grad_rows();
            assert_int_equal(vf_function_call(ff, in, &fused), VF_OK);
            int64_t ran = vf_cpu_softmax_grad_rows() - before;
            if (ran != rows)
                fail_msg("%s shape %d: the fused plan ran %lld rows of the gradient's kernel, want %lld",
                         log ? "log_softmax" : "softmax", k, (long long)ran, (long long)rows);
            before = vf_cpu_softmax_grad_rows();
            assert_int_equal(vf_function_call(fu, in, &unfused), VF_OK);
            assert_int_equal(vf_cpu_softmax_grad_rows() - before, 0); /* node by node: the rule's ops */
            float *ge = vt_read(eager), *gf = vt_read(fused), *gu = vt_read(unfused);
            char what[96];
            snprintf(what, sizeof what, "%s shape %d: fused vs eager", log ? "log_softmax" : "softmax", k);
            vt_assert_same_f32(gf, ge, (size_t)n, what);
            snprintf(what, sizeof what, "%s shape %d: unfused vs eager", log ? "log_softmax" : "softmax", k);
            vt_assert_same_f32(gu, ge, (size_t)n, what);
            free(ge), free(gf), free(gu);
            vf_function_destroy(ff);
            vf_function_destroy(fu);
            vf_scope_end(ctx);
            free(hx), free(hg);
        }
    vt_context_done(ctx);
}

/* An SGD step on a variable by the gradient: w -= 0.5 * dx, dx the
   softmax (user: log_softmax) gradient at x with seed g; the group holds
   the gradient's ops and the update after them, and its output is the
   variable it reads. */
typedef struct sgd_case {
    bool log;
    vf_tensor *w;
} sgd_case;

static vf_status sgd_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    sgd_case *c = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *y = row_op(ctx, c->log, in[0]), *dx = NULL;
    vf_status s = vf_tape_vjp(tape, 1, &y, &in[1], 1, &in[0], &dx);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    s = vf_assign_sub(c->w, vf_mul(ctx, dx, vt_scalar(ctx, 0.5)));
    out[0] = vf_reduce_sum(ctx, c->w, 1, (int[]){-1}, true);
    return s;
}

/* Two traced steps (fused) against two eager ones: the same bits in the
   variable, the kernel taken in the plan. */
static void traced_update_has_eager_bits(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    static const int64_t sizes[][2] = {{64, 10}, {2048, 64}, {8, 700}};
    for (int k = 0; k < 3; k++)
        for (int lg = 0; lg < 2; lg++) {
            int64_t n = sizes[k][0] * sizes[k][1];
            float *hx = malloc((size_t)n * sizeof *hx), *hg = malloc((size_t)n * sizeof *hg);
            float *hw = malloc((size_t)n * sizeof *hw);
            assert_true(hx && hg && hw);
            sg_shape sh = {2, {sizes[k][0], sizes[k][1]}};
            make_inputs(&sh, hx, hg, 500 + (uint64_t)k);
            vt_fill_uniform(hw, (size_t)n, -1.0f, 1.0f, 600 + (uint64_t)k);
            vf_scope_begin(ctx);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, sizes[k], hx),
                                vf_tensor_from_host(ctx, VF_F32, 2, sizes[k], hg)};
            sgd_case eager = {lg, vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, sizes[k], hw))};
            sgd_case traced = {lg, vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, sizes[k], hw))};
            vf_function_desc d = {.name = "sgd", .body = sgd_body, .user = &traced, .n_inputs = 2, .n_outputs = 1};
            vf_function *fn = vf_function_create(ctx, &d);
            assert_non_null(fn);
            int64_t before = vf_cpu_softmax_grad_rows();
            for (int step = 0; step < 2; step++) {
                vf_tensor *oe = NULL, *ot = NULL;
                assert_int_equal(sgd_body(ctx, in, &oe, &eager), VF_OK);
                assert_int_equal(vf_function_call(fn, in, &ot), VF_OK);
            }
            assert_int_equal(vf_cpu_softmax_grad_rows() - before, 4 * sizes[k][0]); /* 2 eager, 2 traced */
            float *we = vt_read(eager.w), *wt = vt_read(traced.w);
            char what[64];
            snprintf(what, sizeof what, "%s sgd [%lld, %lld]", lg ? "log_softmax" : "softmax", (long long)sizes[k][0],
                     (long long)sizes[k][1]);
            vt_assert_same_f32(wt, we, (size_t)n, what);
            free(we), free(wt);
            vf_function_destroy(fn);
            vf_scope_end(ctx);
            free(hx), free(hg), free(hw);
        }
    vt_context_done(ctx);
}

/* in: x. out: d sum(2 op(x)) / dx: g is 2 everywhere, a fill in the plan
   (of ones the simplify pass would take the products away). */
static vf_status seed_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const bool *log = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *y = vf_mul(ctx, row_op(ctx, *log, in[0]), vt_scalar(ctx, 2.0));
    vf_status s = vf_tape_gradient(tape, y, 1, &in[0], &out[0]);
    vf_tape_end(tape);
    return s;
}

/* The gradient with g a constant, traced fused against eager: the same
   bits. The plan makes the constant a fill per reader (passes_fills.c),
   one value in a row group, so the rule's ops there read two fills and
   are not the gradient's pattern; cpu_rows.c would not hand a fill to
   the kernel either way. */
static void traced_fill_seed_has_eager_bits(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    static const int64_t sizes[][2] = {{64, 10}, {2048, 64}};
    for (int k = 0; k < 2; k++)
        for (int lg = 0; lg < 2; lg++) {
            bool log = lg;
            int64_t n = sizes[k][0] * sizes[k][1];
            float *hx = malloc((size_t)n * sizeof *hx), *hg = malloc((size_t)n * sizeof *hg);
            assert_true(hx && hg);
            sg_shape sh = {2, {sizes[k][0], sizes[k][1]}};
            make_inputs(&sh, hx, hg, 700 + (uint64_t)k);
            vf_scope_begin(ctx);
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, sizes[k], hx), *eager = NULL, *traced = NULL;
            assert_int_equal(seed_body(ctx, &x, &eager, &log), VF_OK);
            vf_function_desc d = {.name = "seed", .body = seed_body, .user = &log, .n_inputs = 1, .n_outputs = 1};
            vf_function *fn = vf_function_create(ctx, &d);
            assert_non_null(fn);
            assert_int_equal(vf_function_call(fn, &x, &traced), VF_OK);
            float *ge = vt_read(eager), *gt = vt_read(traced);
            char what[64];
            snprintf(what, sizeof what, "%s seed ones [%lld, %lld]", log ? "log_softmax" : "softmax",
                     (long long)sizes[k][0], (long long)sizes[k][1]);
            vt_assert_same_f32(gt, ge, (size_t)n, what);
            free(ge), free(gt);
            vf_function_destroy(fn);
            vf_scope_end(ctx);
            free(hx), free(hg);
        }
    vt_context_done(ctx);
}

/* Under a second recording tape the rule's ops run (they are recorded
   there, so the gradient can be differentiated again): the kernel's
   counter does not move, and the second-order gradient of
   sum(softmax(x) * w) along v, d/dx sum(v * dx), is there. */
static void recording_tape_takes_the_ops(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    int64_t shape[2] = {4, 6};
    float hx[24], hw[24];
    vt_fill_uniform(hx, 24, -2.0f, 2.0f, 7);
    vt_fill_uniform(hw, 24, -1.0f, 1.0f, 8);
    vf_scope_begin(ctx);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, shape, hx);
    vf_tensor *w = vf_tensor_from_host(ctx, VF_F32, 2, shape, hw);
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_tensor *loss = vt_sum(ctx, vf_mul(ctx, vf_softmax(ctx, x, -1), w));
    vf_tensor *dx = NULL, *ddx = NULL;
    int64_t before = vf_cpu_softmax_grad_rows();
    assert_int_equal(vf_tape_gradient(inner, loss, 1, &x, &dx), VF_OK);
    assert_int_equal(vf_cpu_softmax_grad_rows() - before, 0);
    vf_tape_end(inner);
    assert_int_equal(vf_tape_gradient(outer, vt_sum(ctx, vf_mul(ctx, dx, w)), 1, &x, &ddx), VF_OK);
    vf_tape_end(outer);
    assert_non_null(ddx);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(eager_kernel_has_the_ops_bits),
        cmocka_unit_test(eager_xent_kernel_has_the_ops_bits),
        cmocka_unit_test(traced_has_eager_bits),
        cmocka_unit_test(traced_update_has_eager_bits),
        cmocka_unit_test(traced_fill_seed_has_eager_bits),
        cmocka_unit_test(recording_tape_takes_the_ops),
    };
    return vt_run_group("cpu_softmax_grad", tests, sizeof tests / sizeof tests[0]);
}
