/* vf_conv2d (issue 13): it and the tape's gradients of both operands
 * against a double-precision direct convolution written here (TF's conv2d
 * semantics: NHWC, HWIO, SAME padding with the odd pad after) and its
 * exact adjoints, eager and traced, on both backends; odd sizes, strides,
 * dilations, explicit padding, groups and depthwise, an empty batch,
 * height or width, no input or output channel; bad arguments give a status and a message that says what
 * and how to fix; the saved form keeps the geometry. */
#include "conv_common.h"
#include "testutil.h"
#include "cpu/dnnl_conv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const conv_case cases[] = {
    {1, 5, 5, 1, 3, 3, 1, {.groups = 0}},                                              /* all defaults */
    {2, 7, 6, 3, 3, 2, 5, {.strides = {2, 1}}},                              /* odd, strided */
    {1, 9, 8, 2, 3, 3, 4, {.dilations = {2, 3}}},                            /* dilated */
    {2, 7, 5, 3, 3, 3, 2, {.padding = VF_PADDING_SAME}},                     /* SAME */
    {1, 8, 9, 2, 4, 3, 3, {.strides = {3, 2}, .padding = VF_PADDING_SAME}},  /* SAME, odd total pad */
    {1, 6, 5, 2, 3, 2, 3, {.padding = VF_PADDING_EXPLICIT, .pads = {2, 0, 1, 3}, .strides = {2, 2}}},
    {2, 6, 7, 4, 3, 3, 6, {.groups = 2, .padding = VF_PADDING_SAME}},        /* grouped */
    {1, 7, 7, 5, 3, 3, 10, {.groups = 5, .strides = {2, 2}, .padding = VF_PADDING_SAME}}, /* depthwise x2 */
    {3, 4, 5, 6, 1, 1, 7, {.groups = 0}},                                              /* 1x1 */
    {1, 5, 9, 3, 2, 4, 2, {.dilations = {2, 2}, .strides = {1, 3}, .padding = VF_PADDING_SAME}},
    {0, 5, 5, 2, 3, 3, 4, {.groups = 0}},                                              /* empty batch */
    {1, 4, 4, 0, 2, 2, 3, {.groups = 0}},                                              /* no input channel: zeros */
    {1, 0, 5, 2, 3, 3, 4, {.groups = 0}},                                              /* no rows: empty */
    {2, 4, 0, 3, 2, 2, 2, {.padding = VF_PADDING_SAME}},                               /* no columns, SAME */
    {1, 0, 3, 2, 1, 2, 3, {.padding = VF_PADDING_EXPLICIT, .pads = {1, 1, 0, 0}}},     /* rows of padding only: zeros */
    {1, 4, 4, 2, 2, 2, 0, {.groups = 0}},                                              /* no output channel */
    /* input and output channels in fours per group: Vulkan's blocked kernels (forward: 4 channels x 4
       pixels, a row tail; filter gradient: 4 x 4 channels) */
    {2, 7, 9, 8, 3, 3, 8, {.groups = 2, .strides = {1, 2}, .padding = VF_PADDING_SAME}},
};

static vf_status body_conv(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_conv2d(ctx, in[0], in[1], user);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = conv2d(x, w) and the tape's gradients of sum(wt * y): in = {x, w, wt},
   out = {y, dx, dw}; run eagerly or traced alike. */
static vf_status body_conv_grad(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tape *tp = vf_tape_begin(ctx);
    out[0] = vf_conv2d(ctx, in[0], in[1], user);
    vf_status st = vf_tape_gradient(tp, vf_mul(ctx, out[0], in[2]), 2, in, out + 1);
    vf_tape_end(tp);
    return out[0] ? st : vf_status_get(ctx);
}

static void expect(vf_tensor *t, int rank, const int64_t *shape, const double *want, double atol, const char *what)
{
    assert_int_equal(vf_tensor_rank(t), rank);
    size_t n = 1;
    for (int d = 0; d < rank; d++) assert_int_equal(vf_tensor_dim(t, d), shape[d]), n *= (size_t)shape[d];
    if (!n) return;
    float *got = vt_read(t), *wf = malloc(sizeof *wf * n);
    assert_non_null(wf);
    for (size_t i = 0; i < n; i++) wf[i] = (float)want[i];
    vt_assert_close_f32(got, wf, n, atol, 1e-5, what);
    free(got);
    free(wf);
}

/* fn_in: a function of body_conv_grad to call (NULL: one made here). */
static void check_case(vf_context *ctx, const conv_case *k, int idx, vf_function *fn_in)
{
    int64_t G = k->d.groups ? k->d.groups : 1;
    int64_t xs[4] = {k->n, k->h, k->w, k->c}, ws[4] = {k->kh, k->kw, k->c / G, k->o}, out[2], lead[2];
    conv_ref_geometry(k, out, lead);
    int64_t ys[4] = {k->n, out[0], out[1], k->o};
    size_t nx = (size_t)(xs[0] * xs[1] * xs[2] * xs[3]), nw = (size_t)(ws[0] * ws[1] * ws[2] * ws[3]);
    size_t ny = (size_t)(ys[0] * ys[1] * ys[2] * ys[3]);
    float *x = malloc(sizeof *x * (nx + 1)), *w = malloc(sizeof *w * (nw + 1)), *wt = malloc(sizeof *wt * (ny + 1));
    double *dx = calloc(nx + 1, sizeof *dx), *dw = calloc(nw + 1, sizeof *dw);
    assert_true(x && w && wt && dx && dw);
    vt_fill_uniform(x, nx, -1, 1, 100 + (uint64_t)idx);
    vt_fill_uniform(w, nw, -1, 1, 200 + (uint64_t)idx);
    vt_fill_uniform(wt, ny, -1, 1, 300 + (uint64_t)idx);
    double *want = conv_ref(k, x, w, out, wt, dx, dw);
    /* sums of K products (y), of about KH*KW*O/groups (dx) and of N*OH*OW (dw) */
    double atol_y = vt_matmul_atol(k->kh * k->kw * ws[2]), atol_dx = vt_matmul_atol(k->kh * k->kw * k->o);
    double atol_dw = vt_matmul_atol(k->n * out[0] * out[1]);

    vf_tensor *in[3] = {vf_tensor_from_host(ctx, VF_F32, 4, xs, x), vf_tensor_from_host(ctx, VF_F32, 4, ws, w),
                        vf_tensor_from_host(ctx, VF_F32, 4, ys, wt)};
    assert_true(in[0] && in[1] && in[2]);
    vf_function_desc fd = {.name = "conv_grad", .body = body_conv_grad, .user = (void *)&k->d, .n_inputs = 3,
                           .n_outputs = 3};
    vf_function *fn = fn_in ? fn_in : vf_function_create(ctx, &fd);
    assert_non_null(fn);
    for (int traced = 0; traced < 2; traced++) {
        vf_tensor *r[3] = {0};
        if (traced) assert_int_equal(vf_function_call(fn, in, r), VF_OK);
        else assert_int_equal(body_conv_grad(ctx, in, r, (void *)&k->d), VF_OK);
        char what[64];
        const char *mode = traced ? "traced" : "eager";
        snprintf(what, sizeof what, "conv case %d %s: y", idx, mode);
        expect(r[0], 4, ys, want, atol_y, what);
        snprintf(what, sizeof what, "conv case %d %s: dx", idx, mode);
        expect(r[1], 4, xs, dx, atol_dx, what);
        snprintf(what, sizeof what, "conv case %d %s: dw", idx, mode);
        expect(r[2], 4, ws, dw, atol_dw, what);
        for (int i = 0; i < 3; i++) vf_tensor_release(r[i]);
    }
    if (!fn_in) vf_function_destroy(fn);
    for (int i = 0; i < 3; i++) vf_tensor_release(in[i]);
    free(x), free(w), free(wt), free(dx), free(dw), free(want);
}

static void conv_matches_reference(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(ctx, &cases[i], (int)i, NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(conv_matches_reference)

/* The CPU backend runs every non-empty case on oneDNN (three primitives
   per call, eager and traced), and each still matches the reference:
   strides, dilations, SAME and explicit pads, groups, depthwise, 1x1. */
static void conv_cpu_onednn(void **state)
{
    (void)state;
    assert_string_equal(vf_cpu_dnnl_unavailable(), ""); /* scripts/setup.sh installs libdnnl-dev */
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const conv_case *k = &cases[i];
        int64_t before = vf_cpu_dnnl_runs();
        check_case(ctx, k, (int)i, NULL);
        bool empty = k->n == 0 || k->c == 0 || k->h == 0 || k->w == 0 || k->o == 0; /* no kernel runs */
        if (vf_cpu_dnnl_runs() - before != (empty ? 0 : 6))
            fail_msg("conv case %zu: %lld oneDNN runs, want %d", i, (long long)(vf_cpu_dnnl_runs() - before),
                     empty ? 0 : 6);
    }
    vt_context_done(ctx);
}

/* A steady loop reuses its primitives: the first call of a shape makes
   one per op (forward, input and filter gradient), later calls none. */
static void conv_cpu_onednn_cache(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    const conv_case *k = &cases[7]; /* depthwise x2, strided, SAME */
    int64_t made = vf_cpu_dnnl_made();
    check_case(ctx, k, 7, NULL);
    assert_int_equal(vf_cpu_dnnl_made() - made, 3);
    for (int i = 0; i < 2; i++) check_case(ctx, k, 7, NULL);
    assert_int_equal(vf_cpu_dnnl_made() - made, 3);
    /* the same call twice gives the same bits (y, dx, dw), threads and all */
    int64_t xs[4] = {4, 20, 20, 32}, ws[4] = {3, 3, 32, 32}, ys[4] = {4, 20, 20, 32};
    vf_conv2d_desc same = {.padding = VF_PADDING_SAME};
    vf_tensor *in[3] = {vf_random_normal(ctx, VF_F32, 4, xs, 1), vf_random_normal(ctx, VF_F32, 4, ws, 2),
                        vf_random_normal(ctx, VF_F32, 4, ys, 3)};
    float *got[2][3];
    int64_t runs = vf_cpu_dnnl_runs();
    for (int t = 0; t < 2; t++) {
        vf_tensor *r[3] = {0};
        assert_int_equal(body_conv_grad(ctx, in, r, &same), VF_OK);
        for (int i = 0; i < 3; i++) got[t][i] = vt_read(r[i]), vf_tensor_release(r[i]);
    }
    assert_int_equal(vf_cpu_dnnl_runs() - runs, 6);
    size_t n[3] = {4 * 20 * 20 * 32, 4 * 20 * 20 * 32, 3 * 3 * 32 * 32}; /* y, dx, dw */
    for (int i = 0; i < 3; i++) {
        if (memcmp(got[0][i], got[1][i], n[i] * sizeof(float))) fail_msg("output %d differs between runs", i);
        free(got[0][i]), free(got[1][i]);
    }
    for (int i = 0; i < 3; i++) vf_tensor_release(in[i]);
    vt_context_done(ctx);
    /* a new context (a new backend) starts with an empty cache */
    made = vf_cpu_dnnl_made();
    ctx = vt_context(VF_BACKEND_CPU);
    check_case(ctx, k, 7, NULL);
    assert_int_equal(vf_cpu_dnnl_made() - made, 3);
    vt_context_done(ctx);
}

/* VKFUSE_CPU_DNNL=0 when the context is made: im2col + sgemm, which must
   match the reference on its own. */
static void conv_cpu_without_onednn(void **state)
{
    (void)state;
    setenv("VKFUSE_CPU_DNNL", "0", 1);
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    unsetenv("VKFUSE_CPU_DNNL");
    int64_t before = vf_cpu_dnnl_runs();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(ctx, &cases[i], (int)i, NULL);
    assert_int_equal(vf_cpu_dnnl_runs(), before);
    vt_context_done(ctx);
}

/* A symbolic batch (input_signature -1): one trace serves batches 2, 3
   and 1, forward and both gradients, each against the reference. */
static void conv_symbolic_batch(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    conv_case k = cases[6]; /* groups 2, SAME */
    vf_tensor_spec sig[3] = {{VF_F32, 4, {-1, k.h, k.w, k.c}}, {VF_F32, 4, {k.kh, k.kw, k.c / 2, k.o}},
                             {VF_F32, 4, {-1, k.h, k.w, k.o}}};
    vf_function_desc fd = {.name = "conv_sym", .body = body_conv_grad, .user = (void *)&k.d, .n_inputs = 3,
                           .n_outputs = 3, .input_signature = sig};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_non_null(fn);
    int64_t batches[3] = {2, 3, 1};
    for (int i = 0; i < 3; i++) {
        k.n = batches[i];
        check_case(ctx, &k, 20 + i, fn);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_int_equal(st.traces, 1);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}
VT_PER_BACKEND(conv_symbolic_batch)

/* Bad arguments: a status and a message naming what is wrong and the fix. */
static void conv_bad_arguments(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    int64_t xs[4] = {1, 5, 5, 4}, ws[4] = {3, 3, 3, 6}, ws2[4] = {3, 3, 2, 6}, ws3[4] = {3, 3, 2, 5};
    int64_t x3[3] = {5, 5, 4}, big[4] = {7, 7, 4, 2};
    vf_tensor *x = vf_fill(ctx, VF_F32, 4, xs, 1), *w = vf_fill(ctx, VF_F32, 4, ws, 1);
    vf_tensor *w2 = vf_fill(ctx, VF_F32, 4, ws2, 1), *w3 = vf_fill(ctx, VF_F32, 4, ws3, 1);
    vf_tensor *xr3 = vf_fill(ctx, VF_F32, 3, x3, 1), *wbig = vf_fill(ctx, VF_F32, 4, big, 1);
    vf_tensor *xi = vf_fill(ctx, VF_I32, 4, xs, 1);
    assert_null(vf_conv2d(ctx, x, w, NULL)); /* filter has 3 input channels, x 4 */
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_conv2d", "3 input channels", "channels / groups = 4", NULL);
    vf_conv2d_desc d = {.groups = 3};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "groups = 3 must divide", "input channels (4)", NULL);
    d = (vf_conv2d_desc){.groups = 2};
    assert_null(vf_conv2d(ctx, x, w3, &d)); /* 5 out channels in 2 groups */
    vt_expect_error(ctx, VF_ERROR_SHAPE, "groups = 2 must divide", "output channels (5)", NULL);
    d = (vf_conv2d_desc){.strides = {1, -2}};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "strides[1]", "-2", ">= 1", NULL);
    d = (vf_conv2d_desc){.dilations = {-1, 1}};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "dilations[0]", ">= 1", NULL);
    d = (vf_conv2d_desc){.groups = -1};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "groups is -1", NULL);
    d = (vf_conv2d_desc){.pads = {1, 1, 1, 1}};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "pads[0]", "VF_PADDING_EXPLICIT", NULL);
    d = (vf_conv2d_desc){.padding = VF_PADDING_EXPLICIT, .pads = {0, 0, -1, 0}};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "pads[2]", ">= 0", NULL);
    d = (vf_conv2d_desc){.padding = (vf_padding)7};
    assert_null(vf_conv2d(ctx, x, w2, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "padding is 7", "VF_PADDING_SAME", NULL);
    d = (vf_conv2d_desc){.groups = 2};
    assert_null(vf_conv2d(ctx, xr3, w2, &d));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "rank 4", "NHWC", NULL);
    assert_null(vf_conv2d(ctx, x, wbig, NULL)); /* 7x7 window on a 5x5 image, VALID */
    vt_expect_error(ctx, VF_ERROR_SHAPE, "smaller than the dilated filter window", "VF_PADDING_SAME", NULL);
    d = (vf_conv2d_desc){.groups = 2};
    assert_null(vf_conv2d(ctx, xi, w2, &d));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "conv2d", "i32", NULL);
    /* the same argument with SAME works: the error was the window */
    d = (vf_conv2d_desc){.padding = VF_PADDING_SAME};
    vf_tensor *y = vf_conv2d(ctx, x, wbig, &d);
    assert_non_null(y);
    assert_int_equal(vf_tensor_dim(y, 1), 5);
    vf_tensor *all[] = {x, w, w2, w3, xr3, wbig, xi, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) vf_tensor_release(all[i]);
    vt_context_done(ctx);
}
VT_PER_BACKEND(conv_bad_arguments)

/* The traced graph shows the resolved geometry; a saved and loaded
   function keeps it (the window attrs of docs/FORMAT.md). */
static void conv_saved_keeps_geometry(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const conv_case *k = &cases[5]; /* explicit asymmetric pads, strides 2 */
    int64_t xs[4] = {k->n, k->h, k->w, k->c}, ws[4] = {k->kh, k->kw, k->c, k->o};
    vf_tensor *x = vf_random_normal(ctx, VF_F32, 4, xs, 1), *w = vf_random_normal(ctx, VF_F32, 4, ws, 2);
    vf_function_desc fd = {.name = "conv", .body = body_conv, .user = (void *)&k->d, .n_inputs = 2, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &fd);
    vf_tensor *in[2] = {x, w}, *y0 = NULL, *y1 = NULL;
    assert_int_equal(vf_function_call(fn, in, &y0), VF_OK);
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    if (!strstr(text, "strides=2,2 dilations=1,1 pads=2,0,1,3 groups=1"))
        fail_msg("graph text lacks the geometry:\n%s", text);
    free(text);
    char path[64];
    snprintf(path, sizeof path, "/tmp/vkfuse_conv_%d_%d.vfn", (int)b, (int)getpid());
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function *loaded = NULL;
    assert_int_equal(vf_function_load(ctx, path, &loaded), VF_OK);
    remove(path);
    assert_int_equal(vf_function_call(loaded, in, &y1), VF_OK);
    size_t n = (size_t)vf_tensor_numel(y0);
    float *a = vt_read(y0), *c = vt_read(y1);
    vt_assert_close_f32(c, a, n, 0, 0, "conv saved vs traced");
    free(a);
    free(c);
    vf_function_destroy(loaded);
    vf_function_destroy(fn);
    vf_tensor *all[] = {x, w, y0, y1};
    for (size_t i = 0; i < 4; i++) vf_tensor_release(all[i]);
    vt_context_done(ctx);
}
VT_PER_BACKEND(conv_saved_keeps_geometry)

/* ---- pooling ---------------------------------------------------------- */

typedef struct {
    int64_t n, h, w, c;
    bool is_max;
    vf_pool2d_desc d;
} pool_case;

/* y and, for weights wt, dx of sum(wt * y): max to the first maximum of
   each window (padding never counts), avg spread over the positions inside */
static double *ref_pool(const pool_case *k, const float *x, const float *wt, double *dx, int64_t out[2])
{
    int64_t in[2] = {k->h, k->w}, lead[2], s[2];
    for (int i = 0; i < 2; i++) {
        s[i] = k->d.strides[i] ? k->d.strides[i] : k->d.window[i];
        if (k->d.padding == VF_PADDING_SAME) {
            out[i] = (in[i] + s[i] - 1) / s[i];
            int64_t total = (out[i] - 1) * s[i] + k->d.window[i] - in[i];
            lead[i] = total > 0 ? total / 2 : 0;
        } else {
            out[i] = in[i] < k->d.window[i] ? 0 : (in[i] - k->d.window[i]) / s[i] + 1; /* empty input: none */
            lead[i] = 0;
        }
    }
    size_t ny = (size_t)(k->n * out[0] * out[1] * k->c);
    double *y = calloc(ny + 1, sizeof *y);
    assert_non_null(y);
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t oh = 0; oh < out[0]; oh++)
            for (int64_t ow = 0; ow < out[1]; ow++)
                for (int64_t c = 0; c < k->c; c++) {
                    int64_t yi = ((n * out[0] + oh) * out[1] + ow) * k->c + c, best = -1, count = 0;
                    double sum = 0;
                    for (int64_t i = 0; i < k->d.window[0]; i++)
                        for (int64_t j = 0; j < k->d.window[1]; j++) {
                            int64_t ih = oh * s[0] + i - lead[0], iw = ow * s[1] + j - lead[1];
                            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                            int64_t xi = ((n * k->h + ih) * k->w + iw) * k->c + c;
                            count++;
                            sum += x[xi];
                            if (best < 0 || x[xi] > x[best]) best = xi;
                        }
                    y[yi] = k->is_max ? x[best] : sum / (double)count;
                    if (!wt) continue;
                    if (k->is_max) {
                        dx[best] += wt[yi];
                        continue;
                    }
                    for (int64_t i = 0; i < k->d.window[0]; i++)
                        for (int64_t j = 0; j < k->d.window[1]; j++) {
                            int64_t ih = oh * s[0] + i - lead[0], iw = ow * s[1] + j - lead[1];
                            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                            dx[((n * k->h + ih) * k->w + iw) * k->c + c] += wt[yi] / (double)count;
                        }
                }
    return y;
}

static const pool_case pool_cases[] = {
    {1, 4, 4, 1, true, {.window = {2, 2}}},                                          /* strides = window */
    {2, 7, 6, 3, true, {.window = {3, 2}, .strides = {2, 1}}},                       /* overlapping */
    {1, 7, 5, 2, true, {.window = {3, 3}, .strides = {2, 2}, .padding = VF_PADDING_SAME}},
    {2, 5, 8, 3, true, {.window = {2, 4}, .strides = {1, 3}, .padding = VF_PADDING_SAME}},
    {1, 4, 4, 1, false, {.window = {2, 2}}},
    {2, 7, 6, 3, false, {.window = {3, 2}, .strides = {2, 1}}},
    {1, 7, 5, 2, false, {.window = {3, 3}, .strides = {2, 2}, .padding = VF_PADDING_SAME}}, /* padding excluded */
    {2, 5, 8, 3, false, {.window = {2, 4}, .strides = {1, 3}, .padding = VF_PADDING_SAME}},
    {0, 5, 5, 2, true, {.window = {2, 2}}},                                          /* empty batch */
    {1, 0, 5, 2, true, {.window = {2, 2}}},                                          /* no rows */
    {2, 4, 0, 3, false, {.window = {2, 2}, .padding = VF_PADDING_SAME}},             /* no columns, SAME */
    {1, 0, 3, 2, true, {.window = {3, 3}, .strides = {1, 1}, .padding = VF_PADDING_SAME}},
    {1, 4, 4, 0, false, {.window = {2, 2}}},                                         /* no channel */
};

static vf_status body_pool_grad(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const pool_case *k = user;
    vf_tape *tp = vf_tape_begin(ctx);
    out[0] = k->is_max ? vf_max_pool2d(ctx, in[0], &k->d) : vf_avg_pool2d(ctx, in[0], &k->d);
    vf_status st = vf_tape_gradient(tp, vf_mul(ctx, out[0], in[1]), 1, in, out + 1);
    vf_tape_end(tp);
    return out[0] ? st : vf_status_get(ctx);
}

static void check_pool(vf_context *ctx, const pool_case *k, int idx, bool ties)
{
    int64_t xs[4] = {k->n, k->h, k->w, k->c}, out[2];
    size_t nx = (size_t)(k->n * k->h * k->w * k->c);
    float *x = malloc(sizeof *x * (nx + 1));
    assert_non_null(x);
    vt_fill_uniform(x, nx, -1, 1, 400 + (uint64_t)idx);
    if (ties) /* a few values repeated: maxima tie, the gradient goes to the first */
        for (size_t i = 0; i < nx; i++) x[i] = (float)((int)(x[i] * 2.0f)) * 0.5f;
    double *dx = calloc(nx + 1, sizeof *dx);
    double *want0 = ref_pool(k, x, NULL, dx, out); /* y only: sizes */
    int64_t ys[4] = {k->n, out[0], out[1], k->c};
    size_t ny = (size_t)(ys[0] * ys[1] * ys[2] * ys[3]);
    float *wt = malloc(sizeof *wt * (ny + 1));
    assert_true(dx && wt);
    vt_fill_uniform(wt, ny, -1, 1, 500 + (uint64_t)idx);
    memset(dx, 0, sizeof *dx * (nx + 1));
    free(want0);
    double *want = ref_pool(k, x, wt, dx, out);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 4, xs, x), vf_tensor_from_host(ctx, VF_F32, 4, ys, wt)};
    vf_function_desc fd = {.name = "pool_grad", .body = body_pool_grad, .user = (void *)k, .n_inputs = 2,
                           .n_outputs = 2};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_non_null(fn);
    for (int traced = 0; traced < 2; traced++) {
        vf_tensor *r[2] = {0};
        if (traced) assert_int_equal(vf_function_call(fn, in, r), VF_OK);
        else assert_int_equal(body_pool_grad(ctx, in, r, (void *)k), VF_OK);
        char what[80];
        snprintf(what, sizeof what, "pool case %d%s %s: y", idx, ties ? " (ties)" : "", traced ? "traced" : "eager");
        expect(r[0], 4, ys, want, 1e-6, what);
        snprintf(what, sizeof what, "pool case %d%s %s: dx", idx, ties ? " (ties)" : "", traced ? "traced" : "eager");
        expect(r[1], 4, xs, dx, 1e-5, what);
        vf_tensor_release(r[0]);
        vf_tensor_release(r[1]);
    }
    vf_function_destroy(fn);
    vf_tensor_release(in[0]);
    vf_tensor_release(in[1]);
    free(x), free(dx), free(wt), free(want);
}

static void pool_matches_reference(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
        check_pool(ctx, &pool_cases[i], (int)i, false);
        if (pool_cases[i].is_max) check_pool(ctx, &pool_cases[i], (int)i, true);
    }
    vt_context_done(ctx);
}
VT_PER_BACKEND(pool_matches_reference)

/* Windows past the loop budget (lavapipe ends an invocation's loops after
   65535 iterations): Vulkan walks them in chunks and combines the chunks,
   forward and both gradients. A global pool of 256 x 256 (65536
   positions, past lavapipe's real budget of 65471) on a plain context;
   then overlapping, padded and tied windows under VKFUSE_TEST_LIMITS
   max_loop=100 (a budget of 51 positions: 9 x 8 windows walk in two
   chunks, a stride-1 gradient gathers from 72 windows in two, max_groups=2
   makes every invocation stride over groups too). Before the split these
   failed with VF_ERROR_UNSUPPORTED. */
static const pool_case big_pools[] = {
    {1, 256, 256, 2, true, {.window = {256, 256}}},
    {1, 256, 256, 2, false, {.window = {256, 256}}},
    {2, 13, 11, 3, true, {.window = {9, 8}, .strides = {1, 1}}},
    {2, 13, 11, 3, false, {.window = {9, 8}, .strides = {1, 1}}},
    {2, 13, 11, 3, true, {.window = {9, 8}, .strides = {2, 3}, .padding = VF_PADDING_SAME}},
    {2, 13, 11, 3, false, {.window = {9, 8}, .strides = {2, 3}, .padding = VF_PADDING_SAME}},
    {1, 12, 11, 2, true, {.window = {12, 11}}},
};

static void pool_past_loop_budget(vf_backend b)
{
    vf_context *ctx = vt_context(b), *small = ctx;
    if (b == VF_BACKEND_VULKAN) {
        setenv("VKFUSE_TEST_LIMITS", "max_loop=100,max_groups=2", 1);
        small = vt_context(b);
        unsetenv("VKFUSE_TEST_LIMITS");
    }
    for (size_t i = 0; i < sizeof big_pools / sizeof big_pools[0]; i++) {
        vf_context *c = big_pools[i].h == 256 ? ctx : small;
        check_pool(c, &big_pools[i], 100 + (int)i, false);
        if (big_pools[i].is_max) check_pool(c, &big_pools[i], 100 + (int)i, true);
    }
    /* a NaN counts only as the window's first position (the CPU backend's
       rule): a NaN later in the window, in another chunk, is skipped */
    float x[12 * 11];
    vt_fill_uniform(x, 12 * 11, -1, 1, 77);
    vf_pool2d_desc d = {.window = {12, 11}};
    int64_t xs[4] = {1, 12, 11, 1};
    for (int first = 0; first < 2; first++) {
        float v = x[0];
        x[first ? 0 : 70] = NAN;
        float *got = vt_read(vf_max_pool2d(small, vf_tensor_from_host(small, VF_F32, 4, xs, x), &d));
        float want = -INFINITY;
        for (int k = 0; k < 12 * 11; k++)
            if (!isnan(x[k]) && x[k] > want) want = x[k];
        if (first) assert_true(isnan(got[0]));
        else assert_float_equal(got[0], want, 0);
        free(got);
        x[0] = v, x[70] = 0.5f;
    }
    if (small != ctx) vt_context_done(small);
    vt_context_done(ctx);
}
VT_PER_BACKEND(pool_past_loop_budget)

/* The CPU backend's pools and their gradients run on oneDNN (two ops per
   call, eager and traced) and match the reference, ties to the first
   maximum and padding excluded included; with VKFUSE_CPU_DNNL=0 the
   direct loops do, on their own. */
static void pool_cpu_onednn(void **state)
{
    (void)state;
    for (int off = 0; off < 2; off++) {
        if (off) setenv("VKFUSE_CPU_DNNL", "0", 1);
        vf_context *ctx = vt_context(VF_BACKEND_CPU);
        unsetenv("VKFUSE_CPU_DNNL");
        for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) {
            const pool_case *k = &pool_cases[i];
            int64_t before = vf_cpu_dnnl_runs();
            check_pool(ctx, k, (int)i, k->is_max);
            int want = off || k->n == 0 || k->h == 0 || k->w == 0 || k->c == 0 ? 0 : 4; /* empty: no kernel */
            if (vf_cpu_dnnl_runs() - before != want)
                fail_msg("pool case %zu%s: %lld oneDNN runs, want %d", i, off ? " (VKFUSE_CPU_DNNL=0)" : "",
                         (long long)(vf_cpu_dnnl_runs() - before), want);
        }
        vt_context_done(ctx);
    }
}

static void pool_bad_arguments(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    int64_t xs[4] = {1, 3, 3, 2}, x3[3] = {3, 3, 2};
    vf_tensor *x = vf_fill(ctx, VF_F32, 4, xs, 1), *xr3 = vf_fill(ctx, VF_F32, 3, x3, 1);
    vf_tensor *xi = vf_fill(ctx, VF_I32, 4, xs, 1);
    assert_null(vf_max_pool2d(ctx, x, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_max_pool2d", "desc is NULL", NULL);
    assert_null(vf_avg_pool2d(ctx, x, &(vf_pool2d_desc){.window = {0, 2}}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_avg_pool2d", "window[0]", ">= 1", NULL);
    assert_null(vf_max_pool2d(ctx, x, &(vf_pool2d_desc){.window = {2, 2}, .strides = {1, -1}}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "strides[1] is -1", NULL);
    assert_null(vf_max_pool2d(ctx, x, &(vf_pool2d_desc){.window = {2, 2}, .padding = VF_PADDING_EXPLICIT}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "VF_PADDING_VALID or VF_PADDING_SAME", NULL);
    assert_null(vf_max_pool2d(ctx, x, &(vf_pool2d_desc){.window = {4, 2}}));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "max_pool2d", "smaller than", "VF_PADDING_SAME", NULL);
    assert_null(vf_avg_pool2d(ctx, xr3, &(vf_pool2d_desc){.window = {2, 2}}));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "rank 4", NULL);
    assert_null(vf_avg_pool2d(ctx, xi, &(vf_pool2d_desc){.window = {2, 2}}));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "avg_pool2d", "i32", NULL);
    vf_tensor_release(x);
    vf_tensor_release(xr3);
    vf_tensor_release(xi);
    vt_context_done(ctx);
}
VT_PER_BACKEND(pool_bad_arguments)

/* Past the device's loop budget (a small one set by VKFUSE_TEST_LIMITS) a
   Vulkan conv fails with a status saying so; nothing is left broken: a
   small one runs next. (Pooling splits its windows instead:
   pool_past_loop_budget.) */
static void window_past_loop_budget(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    setenv("VKFUSE_TEST_LIMITS", "max_loop=100", 1); /* a budget of 51 iterations */
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_TEST_LIMITS");
    int64_t xs[4] = {1, 9, 9, 8}, ws[4] = {3, 3, 8, 2}, ws1[4] = {1, 1, 8, 2};
    vf_tensor *x = vf_fill(ctx, VF_F32, 4, xs, 1), *w = vf_fill(ctx, VF_F32, 4, ws, 1);
    vf_tensor *w1 = vf_fill(ctx, VF_F32, 4, ws1, 1);
    assert_null(vf_conv2d(ctx, x, w, NULL)); /* 72 terms per output */
    vt_expect_error(ctx, VF_ERROR_UNSUPPORTED, "conv2d", "loop budget", "CPU backend", NULL);
    vf_tensor *y1 = vf_conv2d(ctx, x, w1, NULL); /* 8 terms */
    assert_non_null(y1);
    float *v = vt_read(y1);
    assert_true(v[0] == 8.0f);
    free(v);
    vf_tensor *all[] = {x, w, w1, y1};
    for (int k = 0; k < 4; k++) vf_tensor_release(all[k]);
    vt_context_done(ctx);
}

/* The filter gradient sums N*OH*OW terms per dw element: past the loop
   budget (a small one from VKFUSE_TEST_LIMITS) Vulkan splits the sum into
   chunks and adds them in a second step. y, dx and dw, eager and traced,
   against the double reference: padding, strides, groups, and chunks that
   cross image and row boundaries. */
static void conv_filter_grad_split(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    setenv("VKFUSE_TEST_LIMITS", "max_loop=100", 1); /* a budget of 51 iterations */
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_TEST_LIMITS");
    static const conv_case split[] = {
        {3, 6, 7, 2, 3, 3, 3, {.padding = VF_PADDING_SAME}},                      /* 126 terms: 3 chunks */
        {5, 7, 6, 4, 3, 2, 4, {.groups = 2, .strides = {2, 1}, .padding = VF_PADDING_SAME}}, /* 120 */
        {2, 9, 9, 1, 3, 3, 2, {.dilations = {2, 1}, .padding = VF_PADDING_EXPLICIT, .pads = {1, 2, 0, 1}}},
        {4, 5, 6, 4, 3, 3, 4, {.padding = VF_PADDING_SAME}}, /* blocked 4x4 partial sums: 120 terms */
    };
    for (size_t i = 0; i < sizeof split / sizeof split[0]; i++) check_case(ctx, &split[i], 40 + (int)i, NULL);
    vt_context_done(ctx);
}

/* dw of a batch of 128 28x28 images (100352 terms per element, past
   lavapipe's real loop budget) on Vulkan equals the CPU backend's. */
static void conv_filter_grad_large_batch(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    int64_t xs[4] = {128, 28, 28, 1}, ws[4] = {3, 3, 1, 4}, ys[4] = {128, 28, 28, 4};
    size_t nx = 128 * 28 * 28, ny = nx * 4;
    float *x = malloc(nx * sizeof *x), *dy = malloc(ny * sizeof *dy), *dw[2];
    assert_true(x && dy);
    vt_fill_uniform(x, nx, -1, 1, 7);
    vt_fill_uniform(dy, ny, -1, 1, 8);
    vf_conv2d_desc d = {.padding = VF_PADDING_SAME};
    vf_backend bk[2] = {VF_BACKEND_CPU, VF_BACKEND_VULKAN};
    for (int b = 0; b < 2; b++) {
        vf_context *ctx = vt_context(bk[b]);
        vf_tensor *in[3] = {vf_tensor_from_host(ctx, VF_F32, 4, xs, x), vf_fill(ctx, VF_F32, 4, ws, 0.5),
                            vf_tensor_from_host(ctx, VF_F32, 4, ys, dy)};
        vf_tensor *r[3] = {0};
        assert_int_equal(body_conv_grad(ctx, in, r, &d), VF_OK);
        dw[b] = vt_read(r[2]);
        for (int i = 0; i < 3; i++) vf_tensor_release(in[i]), vf_tensor_release(r[i]);
        vt_context_done(ctx);
    }
    vt_assert_close_f32(dw[1], dw[0], 36, vt_matmul_atol(128 * 28 * 28), 1e-4, "dw, batch 128 at 28x28");
    free(x), free(dy), free(dw[0]), free(dw[1]);
}

/* ---- conv epilogue fusion (traced, Vulkan) ------------------------------ */

static const vf_conv2d_desc epi_desc = {.strides = {2, 1}, .padding = VF_PADDING_SAME};
static const vf_conv2d_desc epi_same = {.padding = VF_PADDING_SAME};

/* relu(conv2d(x, w) + b), b per channel [O] */
static vf_status body_conv_bias_relu(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_conv2d(ctx, in[0], in[1], &epi_desc), in[2]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = conv2d(x, w) (an output too) and tanh((y + b) * 0.5) + x + r: a
   scalar, the operand x read again (a residual, C == O) and r [1, OH, 1, O]
   broadcast over batch and width */
static vf_status body_conv_residual(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_conv2d(ctx, in[0], in[1], &epi_same);
    vf_tensor *h = vf_tanh(ctx, vf_mul(ctx, vf_add(ctx, out[0], in[2]), vf_fill(ctx, VF_F32, 0, NULL, 0.5)));
    out[1] = vf_add(ctx, vf_add(ctx, h, in[0]), in[3]);
    return out[1] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    float *v[2];
    size_t n[2];
    vf_function_stats fs;
} epi_result;

static void epi_run(vf_backend b, bool fuse, vf_body body, int n_in, int n_out, const int64_t (*shape)[4],
                    const int *rank, float *const *data, epi_result *r)
{
    vf_context *ctx = vt_context(b);
    vf_tensor *in[4] = {0}, *out[2] = {0};
    for (int i = 0; i < n_in; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, rank[i], shape[i], data[i]);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "conv_epi", .body = body, .n_inputs = n_in,
                                                                  .n_outputs = n_out, .unfused = !fuse});
    assert_non_null(fn);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    for (int o = 0; o < n_out; o++) vf_tensor_release(out[o]);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK); /* the recorded plan */
    for (int o = 0; o < n_out; o++) {
        r->n[o] = 1;
        for (int d = 0; d < vf_tensor_rank(out[o]); d++) r->n[o] *= (size_t)vf_tensor_dim(out[o], d);
        r->v[o] = vt_read(out[o]);
        vf_tensor_release(out[o]);
    }
    assert_int_equal(vf_function_stats_get(fn, &r->fs), VF_OK);
    vf_function_destroy(fn);
    for (int i = 0; i < n_in; i++) vf_tensor_release(in[i]);
    vt_context_done(ctx);
}

/* conv2d + per-channel bias + relu, and conv2d + bias, scalar, tanh,
   residual and a partly broadcast input, each ONE kernel and dispatch in a
   traced function on Vulkan (one per op unfused); values against the CPU
   backend and the unfused plan. */
static void conv_epilogue_fused(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    struct {
        vf_body body;
        int n_in, n_out, rank[4], fused, unfused;
        int64_t shape[4][4];
    } cs[] = {
        {body_conv_bias_relu, 3, 1, {4, 4, 1}, 1, 3, {{2, 9, 7, 3}, {3, 3, 3, 5}, {5}}},
        {body_conv_residual, 4, 2, {4, 4, 1, 4}, 1, 7, {{2, 6, 5, 4}, {3, 2, 4, 4}, {4}, {1, 6, 1, 4}}},
    };
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        float *data[4];
        for (int i = 0; i < cs[c].n_in; i++) {
            size_t n = 1;
            for (int d = 0; d < cs[c].rank[i]; d++) n *= (size_t)cs[c].shape[i][d];
            data[i] = malloc(n * sizeof *data[i]);
            assert_non_null(data[i]);
            vt_fill_uniform(data[i], n, -1, 1, 60 + (uint64_t)(10 * c + i));
        }
        epi_result f = {0}, u = {0}, cpu = {0};
        epi_run(VF_BACKEND_VULKAN, true, cs[c].body, cs[c].n_in, cs[c].n_out, cs[c].shape, cs[c].rank, data, &f);
        epi_run(VF_BACKEND_VULKAN, false, cs[c].body, cs[c].n_in, cs[c].n_out, cs[c].shape, cs[c].rank, data, &u);
        epi_run(VF_BACKEND_CPU, true, cs[c].body, cs[c].n_in, cs[c].n_out, cs[c].shape, cs[c].rank, data, &cpu);
        assert_int_equal(f.fs.kernels, cs[c].fused);
        assert_int_equal(u.fs.kernels, cs[c].unfused);
        assert_int_equal(f.fs.dispatches_per_call, 1); /* the group ran as one kernel, not its members */
        for (int o = 0; o < cs[c].n_out; o++) {
            char what[64];
            assert_int_equal(f.n[o], cpu.n[o]);
            snprintf(what, sizeof what, "conv epilogue case %zu output %d: fused vs cpu", c, o);
            vt_assert_close_f32(f.v[o], cpu.v[o], f.n[o], vt_matmul_atol(36), 1e-5, what);
            snprintf(what, sizeof what, "conv epilogue case %zu output %d: fused vs unfused", c, o);
            vt_assert_close_f32(f.v[o], u.v[o], f.n[o], 1e-6, 1e-6, what);
            free(f.v[o]), free(u.v[o]), free(cpu.v[o]);
        }
        for (int i = 0; i < cs[c].n_in; i++) free(data[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(conv_matches_reference),
        cmocka_unit_test(conv_cpu_onednn),
        cmocka_unit_test(conv_cpu_onednn_cache),
        cmocka_unit_test(conv_cpu_without_onednn),
        VT_PER_BACKEND_TESTS(conv_symbolic_batch),
        VT_PER_BACKEND_TESTS(conv_bad_arguments),
        VT_PER_BACKEND_TESTS(conv_saved_keeps_geometry),
        VT_PER_BACKEND_TESTS(pool_matches_reference), VT_PER_BACKEND_TESTS(pool_past_loop_budget),
        cmocka_unit_test(pool_cpu_onednn),
        VT_PER_BACKEND_TESTS(pool_bad_arguments),
        cmocka_unit_test(window_past_loop_budget),
        cmocka_unit_test(conv_filter_grad_split),
        cmocka_unit_test(conv_filter_grad_large_batch),
        cmocka_unit_test(conv_epilogue_fused),
    };
    return VT_RUN_GROUP(tests);
}
