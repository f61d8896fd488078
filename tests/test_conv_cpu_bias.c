/* The CPU backend's conv2d + bias in a traced function: a plan's conv
 * group whose conv value only an add of a per-channel vector reads runs
 * the add inside the conv kernel (cpu_fused.h, vf_cpu_conv_bias), with
 * oneDNN and with im2col + sgemm (VKFUSE_CPU_DNNL=0); the rest of the group
 * (relu) stays a pass of its own, so NaN and infinities keep relu's
 * meaning. Values against the double reference (conv_common.h) and the
 * unfused plan (one kernel per op); groups that must not fold (the conv's
 * value read elsewhere, a bias that is not a vector) still run right.
 * The epilogue vf_cpu_epilogue_make builds for such groups (which inputs
 * its pass reads). And oneDNN's reordered filter: reused while the
 * filter's values are the same, made again after an assign
 * (dnnl_conv.h). */
#include "conv_common.h"
#include "testutil.h"
#include "cpu/cpu.h"
#include "cpu/cpu_fused.h"
#include "cpu/dnnl_conv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const vf_conv2d_desc strided = {.strides = {2, 1}, .padding = VF_PADDING_SAME};

/* relu(conv2d(x, w) + b) */
static vf_status body_bias_relu(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, in[0], in[1], &strided), in[2]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = b + conv2d(x, w) (an output: the folded add becomes a copy; b
   first, of shape [1, 1, 1, O]) and relu(y) */
static vf_status body_bias_out(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, in[2], vf_conv2d(ctx, in[0], in[1], &strided));
    out[1] = vf_relu(ctx, out[0]);
    return out[1] ? VF_OK : vf_status_get(ctx);
}

/* conv2d(x, w) an output too, and relu(conv + b): no fold (the conv's own
   value is needed) */
static vf_status body_conv_out(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_conv2d(ctx, in[0], in[1], &strided);
    out[1] = vf_relu(ctx, vf_add(ctx, out[0], in[2]));
    return out[1] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    vf_body body;
    int n_out;
    int64_t bias_shape[4];
    int bias_rank;
    bool folds;
    const char *name;
} bias_case;

/* x [2, 7, 6, 3], w [3, 3, 3, 5], strides (2, 1), SAME: y [2, 4, 6, 5] */
static const conv_case geo = {2, 7, 6, 3, 3, 3, 5, {.strides = {2, 1}, .padding = VF_PADDING_SAME}};
enum { NX = 2 * 7 * 6 * 3, NW = 3 * 3 * 3 * 5, NY = 2 * 4 * 6 * 5, O = 5 };

static const bias_case cases[] = {
    {body_bias_relu, 1, {O}, 1, true, "relu(conv + b)"},
    {body_bias_out, 2, {1, 1, 1, O}, 4, true, "b + conv and its relu"},
    {body_conv_out, 2, {O}, 1, false, "conv and relu(conv + b)"},
    {body_bias_relu, 1, {6, O}, 2, false, "relu(conv + b), b [OW, O]"},
};

/* The wanted outputs of case c: y = conv + b (b[i % bn]), relu(y) */
static void want_of(const bias_case *c, const float *x, const float *w, const float *b, int64_t bn, float *want[2])
{
    int64_t out[2];
    double *y = conv_ref(&geo, x, w, out, NULL, NULL, NULL);
    assert_true(out[0] == 4 && out[1] == 6);
    for (int i = 0; i < NY; i++) {
        double v = c->body == body_conv_out ? y[i] : y[i] + b[i % bn];
        double r = y[i] + b[i % bn];
        double relu = r < 0 ? 0 : r; /* NaN stays NaN */
        if (c->n_out == 1) want[0][i] = (float)relu;
        else want[0][i] = (float)v, want[1][i] = (float)relu;
    }
    free(y);
}

static vf_context *context(bool dnnl)
{
    if (!dnnl) setenv("VKFUSE_CPU_DNNL", "0", 1);
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    unsetenv("VKFUSE_CPU_DNNL");
    return ctx;
}

/* Runs case c's function (fused or not) twice on x, w, b; the second call
   (the recorded plan's) returns its outputs into got and the folds and
   oneDNN bias runs it made. */
static void run_case(vf_context *ctx, const bias_case *c, bool fuse, float *const *data, float *got[2],
                     int64_t *folds, int64_t *dnnl_bias)
{
    int64_t shape[3][4] = {{2, 7, 6, 3}, {3, 3, 3, O}};
    int rank[3] = {4, 4, c->bias_rank};
    memcpy(shape[2], c->bias_shape, sizeof shape[2]);
    vf_tensor *in[3], *out[2] = {0};
    for (int i = 0; i < 3; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, rank[i], shape[i], data[i]);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "conv_bias", .body = c->body,
                                                                  .n_inputs = 3, .n_outputs = c->n_out,
                                                                  .unfused = !fuse});
    assert_non_null(fn);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    for (int o = 0; o < c->n_out; o++) vf_tensor_release(out[o]);
    int64_t f0 = vf_cpu_conv_bias_folds(), d0 = vf_cpu_dnnl_bias_runs();
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    *folds = vf_cpu_conv_bias_folds() - f0;
    *dnnl_bias = vf_cpu_dnnl_bias_runs() - d0;
    for (int o = 0; o < c->n_out; o++) got[o] = vt_read(out[o]), vf_tensor_release(out[o]);
    vf_function_destroy(fn);
    for (int i = 0; i < 3; i++) vf_tensor_release(in[i]);
}

/* Every case, with and without oneDNN, fused and unfused, against the
   reference; x may hold NaN and infinities (nan_x). */
static void check_all(bool nan_x)
{
    float x[NX], w[NW], b[6 * O];
    vt_fill_uniform(x, NX, -1, 1, 11);
    vt_fill_uniform(w, NW, -1, 1, 12);
    vt_fill_uniform(b, 6 * O, -1, 1, 13);
    if (nan_x) {
        x[3 * 6 * 3 + 3 * 3 + 1] = NAN;               /* image 0, row 3, column 3 */
        x[NX / 2 + 5 * 6 * 3 + 0 * 3 + 2] = -INFINITY; /* image 1, row 5, column 0 */
        x[NX / 2 + 1 * 6 * 3 + 5 * 3 + 0] = INFINITY;  /* image 1, row 1, column 5 */
    }
    float *data[3] = {x, w, b};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const bias_case *c = &cases[i];
        int64_t bn = c->bias_rank == 2 ? 6 * O : O;
        float want0[NY], want1[NY], *want[2] = {want0, want1};
        want_of(c, x, w, b, bn, want);
        float *unf[2] = {0};
        for (int dnnl = 0; dnnl < 2; dnnl++) {
            vf_context *ctx = context(dnnl);
            float *got[2] = {0};
            int64_t folds, dnnl_bias;
            run_case(ctx, c, true, data, got, &folds, &dnnl_bias);
            if (folds != (c->folds ? 1 : 0) || dnnl_bias != (c->folds && dnnl ? 1 : 0))
                fail_msg("%s, oneDNN %s: %lld folds, %lld oneDNN bias runs in a call", c->name, dnnl ? "on" : "off",
                         (long long)folds, (long long)dnnl_bias);
            if (!unf[0]) {
                run_case(ctx, c, false, data, unf, &folds, &dnnl_bias);
                assert_int_equal(folds, 0); /* one kernel per op: nothing folds */
            }
            for (int o = 0; o < c->n_out; o++) {
                char what[160];
                snprintf(what, sizeof what, "%s%s, oneDNN %s, output %d vs the reference", c->name,
                         nan_x ? " (NaN, Inf in x)" : "", dnnl ? "on" : "off", o);
                vt_assert_close_f32(got[o], want[o], NY, vt_matmul_atol(27), 1e-5, what);
                snprintf(what, sizeof what, "%s%s, oneDNN %s, output %d vs unfused", c->name,
                         nan_x ? " (NaN, Inf in x)" : "", dnnl ? "on" : "off", o);
                vt_assert_close_f32(got[o], unf[o], NY, vt_matmul_atol(27), 1e-5, what);
                free(got[o]);
            }
            vt_context_done(ctx);
        }
        for (int o = 0; o < c->n_out; o++) free(unf[o]);
    }
}

static void bias_folds_match_reference(void **state)
{
    (void)state;
    check_all(false);
}

/* relu stays relu: a NaN reaches the output (oneDNN's relu post-op would
   make it 0), -Inf gives 0, +Inf stays; the reference has each. */
static void bias_folds_keep_nan(void **state)
{
    (void)state;
    check_all(true);
}

/* ---- the epilogue the plan makes ------------------------------------------ */

static vf_tref tref(int rank, int64_t d0, int64_t d1, int64_t d2, int64_t d3)
{
    vf_tref t = {.dtype = VF_F32, .rank = rank, .shape = {d0, d1, d2, d3}};
    return t;
}

static vf_exec member_exec(vf_op op, int n_in, const vf_tref *a, const vf_tref *b, const vf_tref *out)
{
    vf_exec e = {.op = op, .n_in = n_in, .out = *out};
    if (a) e.in[0] = *a;
    if (b) e.in[1] = *b;
    if (op == VF_OP_CONV2D) e.attrs.conv = (vf_conv_attrs){.stride = {2, 1}, .dilation = {1, 1}, .pad = {1, 1, 1, 1},
                                                           .groups = 1};
    return e;
}

/* vf_cpu_epilogue_make on a conv group made here: inputs x, w, b, r
   (0-3), then the outputs. conv + b + relu (+ r): the add leaves the
   pass and its bias is input 2; the pass reads neither x, w nor b (so
   they cannot keep its dims apart), only r where it adds it. The conv's
   value read again after the add: nothing folds, the pass reads b. */
static void epilogue_folds_the_bias(void **state)
{
    (void)state;
    vf_tref x = tref(4, 2, 7, 6, 3), w = tref(4, 3, 3, 3, O), b = tref(1, O, 0, 0, 0), y = tref(4, 2, 4, 6, O);
    vf_tref tensors[6] = {x, w, b, y, y, y};
    vf_exec ex[4] = {member_exec(VF_OP_CONV2D, 2, &x, &w, &y), member_exec(VF_OP_ADD, 2, &y, &b, &y),
                     member_exec(VF_OP_RELU, 1, &y, NULL, &y), member_exec(VF_OP_ADD, 2, &y, &y, &y)};
    struct {
        int n_members, n_inputs, n_outputs;
        vf_fused_member m[4];
        int bias, pass_members;
        uint64_t reads; /* of the group inputs */
    } cs[] = {
        /* relu(conv + b) */
        {3, 3, 1, {{{0, 1}, -1}, {{VF_FUSED_MEMBER(0), 2}, -1}, {{VF_FUSED_MEMBER(1)}, 3}}, 2, 1, 0},
        /* relu(conv + b) + r, and relu(...) an output too */
        {4, 4, 2, {{{0, 1}, -1}, {{VF_FUSED_MEMBER(0), 2}, -1}, {{VF_FUSED_MEMBER(1)}, 4}, {{VF_FUSED_MEMBER(2), 3}, 5}},
         2, 2, 1u << 3},
        /* relu(conv + b) + conv: the conv's value read twice, no fold */
        {4, 3, 1, {{{0, 1}, -1}, {{VF_FUSED_MEMBER(0), 2}, -1}, {{VF_FUSED_MEMBER(1)}, -1},
                   {{VF_FUSED_MEMBER(2), VF_FUSED_MEMBER(0)}, 3}}, -1, 3, 1u << 2},
    };
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
        vf_fused_group g = {.kind = VF_FUSED_CONV, .n_members = cs[i].n_members, .execs = ex, .members = cs[i].m,
                            .center = 0, .n_inputs = cs[i].n_inputs, .n_outputs = cs[i].n_outputs,
                            .tensors = tensors};
        vf_cpu_epilogue ep;
        if (!vf_cpu_epilogue_make(&g, &ep)) fail_msg("group %zu: no epilogue", i);
        uint64_t inputs = ep.reads & ((1u << cs[i].n_inputs) - 1);
        if (ep.bias != cs[i].bias || ep.group.n_members != cs[i].pass_members || inputs != cs[i].reads)
            fail_msg("group %zu: bias input %d, %d members in the pass reading inputs %#llx; want %d, %d, %#llx", i,
                     ep.bias, ep.group.n_members, (unsigned long long)inputs, cs[i].bias, cs[i].pass_members,
                     (unsigned long long)cs[i].reads);
        vf_cpu_epilogue_free(&ep);
    }
}

/* ---- the reordered filter ------------------------------------------------ */

/* relu(conv2d(x, w) + b) with w a variable the function reads (user) */
static vf_status body_var(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, in[0], user, &strided), in[1]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void expect_layer(vf_tensor *y, const float *x, const float *w, const float *b, const char *what)
{
    float want[NY], *got = vt_read(y);
    int64_t out[2];
    double *r = conv_ref(&geo, x, w, out, NULL, NULL, NULL);
    for (int i = 0; i < NY; i++) want[i] = (float)(r[i] + b[i % O] < 0 ? 0 : r[i] + b[i % O]);
    vt_assert_close_f32(got, want, NY, vt_matmul_atol(27), 1e-5, what);
    free(r), free(got);
}

/* The same filter values: not reordered again; new values, whatever
   wrote them (an assign, here, between calls of a recorded plan and
   eagerly): the new filter is used. */
static void filter_reused_until_assigned(void **state)
{
    (void)state;
    if (*vf_cpu_dnnl_unavailable()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    float x[NX], w[2][NW], b[O];
    vt_fill_uniform(x, NX, -1, 1, 21);
    vt_fill_uniform(w[0], NW, -1, 1, 22);
    vt_fill_uniform(w[1], NW, -1, 1, 23);
    vt_fill_uniform(b, O, -1, 1, 24);
    int64_t xs[4] = {2, 7, 6, 3}, ws[4] = {3, 3, 3, O}, bs[1] = {O};
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 4, xs, x), vf_tensor_from_host(ctx, VF_F32, 1, bs, b)};
    vf_tensor *w0 = vf_tensor_from_host(ctx, VF_F32, 4, ws, w[0]), *w1 = vf_tensor_from_host(ctx, VF_F32, 4, ws, w[1]);
    vf_tensor *var = vf_variable(ctx, w0);
    assert_non_null(var);
    vf_function *fn = vf_function_create(
        ctx, &(vf_function_desc){.name = "conv_var", .body = body_var, .user = var, .n_inputs = 2, .n_outputs = 1});
    assert_non_null(fn);
    vf_tensor *y = NULL;
    for (int call = 0; call < 3; call++) {
        int64_t reuses = vf_cpu_dnnl_filter_reuses();
        assert_int_equal(vf_function_call(fn, in, &y), VF_OK);
        if (call == 2) assert_int_equal(vf_cpu_dnnl_filter_reuses() - reuses, 1); /* the plan, unchanged w */
        expect_layer(y, x, w[0], b, "before the assign");
        vf_tensor_release(y);
    }
    assert_int_equal(vf_assign(var, w1), VF_OK);
    int64_t reuses = vf_cpu_dnnl_filter_reuses();
    assert_int_equal(vf_function_call(fn, in, &y), VF_OK);
    expect_layer(y, x, w[1], b, "traced, after the assign");
    assert_int_equal(vf_cpu_dnnl_filter_reuses(), reuses); /* new values: reordered */
    vf_tensor_release(y);
    /* eagerly, the same primitive's shape: the assigned values, then the
       first ones again in another tensor */
    y = vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, in[0], var, &strided), in[1]));
    expect_layer(y, x, w[1], b, "eager, after the assign");
    vf_tensor_release(y);
    y = vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, in[0], w0, &strided), in[1]));
    expect_layer(y, x, w[0], b, "eager, the first filter again");
    vf_tensor_release(y);
    vf_function_destroy(fn);
    vf_tensor_release(var), vf_tensor_release(w0), vf_tensor_release(w1);
    for (int i = 0; i < 2; i++) vf_tensor_release(in[i]);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bias_folds_match_reference),
        cmocka_unit_test(bias_folds_keep_nan),
        cmocka_unit_test(epilogue_folds_the_bias),
        cmocka_unit_test(filter_reused_until_assigned),
    };
    return VT_RUN_GROUP(tests);
}
