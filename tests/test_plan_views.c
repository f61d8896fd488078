/* Views in recorded plans (src/plan/plan_view.c): a concat whose inputs
 * are written in place into its result, a contiguous slice read where it
 * lies, at 256-byte boundaries; and every case where the plan must not
 * make a view (an unaligned offset, an interleaving concat, a strided
 * slice, a value the plan hands out, a variable's value before an
 * assign), and must still be right.
 *
 * Each program runs traced on Vulkan with profiling on (the profile says
 * which nodes ran a kernel: a view runs none), eagerly on Vulkan, traced
 * on the CPU backend and traced unfused (the alias-free baseline), and is
 * checked against its double-precision reference. */
#include "testutil.h"
#include "profile_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXN 1024

typedef struct vcase {
    const char *name;
    vf_body body;
    int n_in, n_out;
    int64_t in_n[3];       /* 1-D input sizes */
    int64_t out_n[3];      /* 1-D output sizes */
    bool var;              /* the body reads and assigns the variable in user (a [VAR_N] f32) */
    /* the reference: out[k][i] in double from the inputs (and the variable's first value) */
    void (*ref)(const float *const *in, const float *var0, double *const *out);
    int view_nodes;        /* how many concat/slice nodes must run no kernel */
    int copy_nodes;        /* how many concat/slice nodes must run a kernel */
} vcase;

#define VAR_N 256

static float input_value(int k, int64_t i) { return (float)((i * 37 + k * 11) % 29) / 16.0f - 0.9f; }

/* Runs c once on backend be (traced unless eager; unfused: the baseline)
   into got[k] (out_n[k] floats each); *fn_out: the function, kept for the
   profile when keep. */
static void run_case(const vcase *c, vf_context *ctx, bool eager, bool unfused, float got[3][MAXN], float *var_after,
                     vf_function **keep)
{
    vf_tensor *var = NULL;
    if (c->var) {
        float v0[VAR_N];
        for (int i = 0; i < VAR_N; i++) v0[i] = input_value(9, i);
        var = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){VAR_N}, v0));
        assert_non_null(var);
    }
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = c->name, .body = c->body, .user = var,
                                                                   .n_inputs = c->n_in, .n_outputs = c->n_out,
                                                                   .unfused = unfused});
    assert_non_null(fn);
    vf_scope_begin(ctx);
    vf_tensor *in[3] = {0}, *out[3] = {0};
    for (int k = 0; k < c->n_in; k++) {
        float x[MAXN];
        for (int64_t i = 0; i < c->in_n[k]; i++) x[i] = input_value(k, i);
        in[k] = vf_tensor_from_host(ctx, VF_F32, 1, &c->in_n[k], x);
    }
    vf_status s = eager ? c->body(ctx, in, out, var) : vf_function_call(fn, in, out);
    if (s != VF_OK) fail_msg("%s: %s", c->name, vf_error_message(ctx));
    for (int k = 0; k < c->n_out; k++) {
        assert_int_equal(vf_tensor_numel(out[k]), c->out_n[k]);
        assert_int_equal(vf_tensor_read(out[k], got[k], (size_t)c->out_n[k] * sizeof(float)), VF_OK);
    }
    if (var) assert_int_equal(vf_tensor_read(var, var_after, VAR_N * sizeof(float)), VF_OK);
    vf_scope_end(ctx);
    if (keep) *keep = fn;
    else vf_function_destroy(fn);
}

/* How many of fn's concat / slice nodes ran a kernel of their own in its
   last call (a copy of an input into its place in a concat does not
   count: the concat itself is a view), and how many there are (from the
   optimised graph's text). */
static void window_coverage(vf_function *fn, int *covered, int *total)
{
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
    assert_true(p.planned);
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    int ids[64], n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int id;
        char name[32];
        if (sscanf(line, " %%%d = %31[a-z_0-9](", &id, name) == 2 && (!strcmp(name, "concat") || !strcmp(name, "slice")))
            ids[n++] = id;
    }
    free(text);
    *covered = 0;
    for (int q = 0; q < n; q++) {
        bool hit = false;
        for (int i = 0; i < p.n_kernels; i++)
            for (int j = 0; j < p.kernels[i].n_nodes; j++)
                hit = hit || (p.kernels[i].nodes[j] == ids[q] && strncmp(p.kernels[i].name, "copy", 4) != 0);
        *covered += hit;
    }
    *total = n;
}

static void check_case(const vcase *c)
{
    if (!vt_have_vulkan()) return;
    static float got[4][3][MAXN], var_after[4][VAR_N];
    double want[3][MAXN];
    float in[3][MAXN], v0[VAR_N];
    for (int k = 0; k < c->n_in; k++)
        for (int64_t i = 0; i < c->in_n[k]; i++) in[k][i] = input_value(k, i);
    for (int i = 0; i < VAR_N; i++) v0[i] = input_value(9, i);
    c->ref((const float *const[]){in[0], in[1], in[2]}, v0, (double *const[]){want[0], want[1], want[2]});
    vf_context *ctx = vt_group_vk, *cpu = vt_group_cpu; /* shared by the cases */
    vf_function *fn = NULL;
    run_case(c, ctx, false, false, got[0], var_after[0], &fn);
    int covered, total;
    window_coverage(fn, &covered, &total);
    if (total != c->view_nodes + c->copy_nodes || covered != c->copy_nodes)
        fail_msg("%s: %d of %d concat/slice nodes ran a kernel; want %d of %d (the rest views)", c->name, covered,
                 total, c->copy_nodes, c->view_nodes + c->copy_nodes);
    vf_function_destroy(fn);
    run_case(c, ctx, true, false, got[1], var_after[1], NULL);  /* eager */
    run_case(c, cpu, false, false, got[2], var_after[2], NULL); /* CPU backend */
    run_case(c, ctx, false, true, got[3], var_after[3], NULL);  /* unfused: no views */
    for (int k = 0; k < c->n_out; k++) {
        for (int64_t i = 0; i < c->out_n[k]; i++)
            if (fabs(got[0][k][i] - want[k][i]) > 1e-5 + 1e-5 * fabs(want[k][i]))
                fail_msg("%s: out%d[%lld] = %.9g, want %.9g", c->name, k, (long long)i, got[0][k][i], want[k][i]);
        for (int r = 1; r < 4; r++) vt_assert_close_f32(got[0][k], got[r][k], (size_t)c->out_n[k], 1e-6, 1e-6, c->name);
    }
    if (c->var)
        for (int r = 1; r < 4; r++) vt_assert_close_f32(var_after[0], var_after[r], VAR_N, 0, 0, "variable after");
}

static vf_tensor *slice1(vf_context *ctx, vf_tensor *x, int64_t b, int64_t e, int64_t step)
{
    return vf_slice(ctx, x, &b, &e, &step);
}

/* ---- concat ------------------------------------------------------------- */

/* out = concat(exp(x), tanh(y)), x, y [64]: both written in place into
   the output's buffer */
static vf_status concat_out(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_concat(ctx, 2, (vf_tensor *[]){vf_exp(ctx, in[0]), vf_tanh(ctx, in[1])}, 0);
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void concat_out_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 64; i++) out[0][i] = exp(in[0][i]), out[0][64 + i] = tanh(in[1][i]);
}

/* out = concat(exp(x), y) * 2 with y a param (copied into its place) */
static vf_status concat_param(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *r = vf_concat(ctx, 2, (vf_tensor *[]){vf_exp(ctx, in[0]), in[1]}, 0);
    out[0] = vf_mul(ctx, r, vt_scalar(ctx, 2));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void concat_param_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 64; i++) out[0][i] = 2 * exp(in[0][i]), out[0][64 + i] = 2.0 * in[1][i];
}

/* out = concat(exp(x), tanh(y)) with x [3], y [5]: y's place is off the
   alignment, a concat kernel */
static void concat_odd_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 3; i++) out[0][i] = exp(in[0][i]);
    for (int i = 0; i < 5; i++) out[0][3 + i] = tanh(in[1][i]);
}

/* five parts (a tree of four concats), the last of odd size, summed
   after: every part in place, the reader after all of their writers */
static vf_status concat_tree(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *p[5] = {vf_exp(ctx, in[0]), vf_sin(ctx, in[0]), vf_tanh(ctx, in[1]), vf_neg(ctx, in[1]),
                       vf_abs(ctx, in[2])};
    vf_tensor *r = vf_concat(ctx, 5, p, 0);
    out[0] = vf_mul(ctx, vf_add(ctx, r, vt_scalar(ctx, 1)), vt_scalar(ctx, 3));
    out[1] = vf_reduce_sum(ctx, r, 0, NULL, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}
static void concat_tree_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    double r[64 * 4 + 7], sum = 0;
    for (int i = 0; i < 64; i++)
        r[i] = exp(in[0][i]), r[64 + i] = sin(in[0][i]), r[128 + i] = tanh(in[1][i]), r[192 + i] = -in[1][i];
    for (int i = 0; i < 7; i++) r[256 + i] = fabs(in[2][i]);
    for (int i = 0; i < 263; i++) out[0][i] = (r[i] + 1) * 3, sum += r[i];
    out[1][0] = sum;
}

/* out0 = exp(x), out1 = concat(exp(x), tanh(y)): exp(x) is handed out
   (a buffer of its own), so it is copied into the concat; tanh in place */
static vf_status concat_shared(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_exp(ctx, in[0]);
    out[1] = vf_concat(ctx, 2, (vf_tensor *[]){out[0], vf_tanh(ctx, in[1])}, 0);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}
static void concat_shared_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 64; i++) out[0][i] = out[1][i] = exp(in[0][i]), out[1][64 + i] = tanh(in[1][i]);
}

/* concat along axis 1 of [2, 64] parts: the rows interleave, a kernel */
static vf_status concat_rows(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = vf_reshape(ctx, vf_exp(ctx, in[0]), 2, (int64_t[]){2, 64});
    vf_tensor *b = vf_reshape(ctx, vf_tanh(ctx, in[1]), 2, (int64_t[]){2, 64});
    out[0] = vf_reshape(ctx, vf_concat(ctx, 2, (vf_tensor *[]){a, b}, 1), 1, (int64_t[]){256});
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void concat_rows_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 64; i++)
            out[0][r * 128 + i] = exp(in[0][r * 64 + i]), out[0][r * 128 + 64 + i] = tanh(in[1][r * 64 + i]);
}

/* the same value twice: concat(a, a) with a = exp(x) [64] */
static vf_status concat_twice(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = vf_exp(ctx, in[0]);
    out[0] = vf_add(ctx, vf_concat(ctx, 2, (vf_tensor *[]){a, a}, 0), vt_scalar(ctx, 1));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void concat_twice_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 64; i++) out[0][i] = out[0][64 + i] = exp(in[0][i]) + 1;
}

/* ---- slice -------------------------------------------------------------- */

/* out = slice(exp(x), 64:192) * 2 + slice(x, 128:256): a view of an
   intermediate and one of a param */
static vf_status slice_views(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = slice1(ctx, vf_exp(ctx, in[0]), 64, 192, 1);
    out[0] = vf_add(ctx, vf_mul(ctx, a, vt_scalar(ctx, 2)), slice1(ctx, in[0], 128, 256, 1));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void slice_views_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 128; i++) out[0][i] = 2 * exp(in[0][64 + i]) + in[0][128 + i];
}

/* slices that need a kernel: off the alignment, strided, handed out */
static vf_status slice_copies(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = vf_exp(ctx, in[0]);
    out[0] = vf_add(ctx, slice1(ctx, a, 3, 67, 1), slice1(ctx, a, 0, 128, 2));
    out[1] = slice1(ctx, a, 64, 128, 1);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}
static void slice_copies_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 64; i++) out[0][i] = exp(in[0][3 + i]) + exp(in[0][2 * i]), out[1][i] = exp(in[0][64 + i]);
}

/* s = slice(v, 64:128) of a variable, then v is assigned: s is v's value
   before the assign (never a view of the variable) */
static vf_status slice_var(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *v = user;
    vf_tensor *s = slice1(ctx, v, 64, 128, 1);
    vf_status st = vf_assign(v, vf_add(ctx, v, in[0]));
    if (st != VF_OK) return st;
    out[0] = vf_mul(ctx, s, vt_scalar(ctx, 3));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void slice_var_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)in;
    for (int i = 0; i < 64; i++) out[0][i] = 3.0 * v0[64 + i];
}

/* a slice of a concat (views of views): the middle 128 of
   concat(exp(x), tanh(y), sin(x)) */
static vf_status slice_of_concat(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *r = vf_concat(ctx, 3, (vf_tensor *[]){vf_exp(ctx, in[0]), vf_tanh(ctx, in[1]), vf_sin(ctx, in[0])}, 0);
    out[0] = vf_sub(ctx, slice1(ctx, r, 64, 192, 1), vt_scalar(ctx, 1));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void slice_of_concat_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    for (int i = 0; i < 64; i++) out[0][i] = tanh(in[1][i]) - 1, out[0][64 + i] = sin(in[0][i]) - 1;
}

/* a view read late: s = slice(exp(x), 64:128) is read after other
   values have come and gone, so exp(x)'s bytes must live until then */
static vf_status slice_late(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *s = slice1(ctx, vf_exp(ctx, in[0]), 64, 128, 1);
    vf_tensor *u = vf_reshape(ctx, vf_mul(ctx, vf_sin(ctx, in[0]), vt_scalar(ctx, 2)), 2, (int64_t[]){4, 64});
    vf_tensor *w = vf_reshape(ctx, in[1], 2, (int64_t[]){64, 4});
    vf_tensor *m = vf_reshape(ctx, vf_matmul(ctx, vf_matmul(ctx, u, w), vf_transpose(ctx, w, NULL)), 1, (int64_t[]){256});
    out[0] = vf_add(ctx, s, slice1(ctx, vf_tanh(ctx, m), 0, 64, 1));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static void slice_late_ref(const float *const *in, const float *v0, double *const *out)
{
    (void)v0;
    double mw[4][4] = {{0}}, m[4][64] = {{0}};
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 64; k++) mw[r][c] += 2 * sin(in[0][r * 64 + k]) * in[1][k * 4 + c];
    for (int r = 0; r < 4; r++)
        for (int k = 0; k < 64; k++)
            for (int c = 0; c < 4; c++) m[r][k] += mw[r][c] * in[1][k * 4 + c];
    for (int i = 0; i < 64; i++) out[0][i] = exp(in[0][64 + i]) + tanh(m[0][i]);
}

static const vcase cases[] = {
    {"concat_out", concat_out, 2, 1, {64, 64}, {128}, false, concat_out_ref, 1, 0},
    {"concat_param", concat_param, 2, 1, {64, 64}, {128}, false, concat_param_ref, 1, 0},
    {"concat_odd", concat_out, 2, 1, {3, 5}, {8}, false, concat_odd_ref, 0, 1},
    {"concat_tree", concat_tree, 3, 2, {64, 64, 7}, {263, 1}, false, concat_tree_ref, 4, 0},
    {"concat_shared", concat_shared, 2, 2, {64, 64}, {64, 128}, false, concat_shared_ref, 1, 0},
    {"concat_rows", concat_rows, 2, 1, {128, 128}, {256}, false, concat_rows_ref, 0, 1},
    {"concat_twice", concat_twice, 1, 1, {64}, {128}, false, concat_twice_ref, 1, 0},
    {"slice_views", slice_views, 1, 1, {256}, {128}, false, slice_views_ref, 2, 0},
    {"slice_copies", slice_copies, 1, 2, {256}, {64, 64}, false, slice_copies_ref, 0, 3},
    {"slice_var", slice_var, 1, 1, {VAR_N}, {64}, true, slice_var_ref, 0, 1},
    {"slice_of_concat", slice_of_concat, 2, 1, {64, 64}, {128}, false, slice_of_concat_ref, 3, 0},
    {"slice_late", slice_late, 2, 1, {256, 256}, {64}, false, slice_late_ref, 2, 0},
};

static void test_case(void **state) { check_case(*state); }

int main(void)
{
    enum { N = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[N];
    for (int i = 0; i < N; i++)
        tests[i] = (struct CMUnitTest){.name = cases[i].name, .test_func = test_case, .initial_state = (void *)&cases[i]};
    return cmocka_run_group_tests(tests, vt_group_setup_profiling, vt_group_teardown);
}
