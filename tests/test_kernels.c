/* User kernels (vf_kernel_create / vf_kernel_call / vf_kernel_destroy,
 * issue 14): GLSL and SPIR-V kernels eager and traced on both backends
 * (Vulkan runs the shader, the CPU backend the C implementation), against
 * references computed here in double; shape and dispatch callbacks,
 * several outputs, zeroed outputs (atomics), and every kind of bad input
 * as a status and a message. */
#include "testutil.h"
#include "kernels_common.h"
#include "backend.h" /* vf_glsl_compile: SPIR-V words for the desc.spirv path */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- y = a x + b: one input, params, a fixed local size of 32 ------------ */

static const char axpb_glsl[] =
    "layout(local_size_x = 32) in;\n"
    "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
    "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
    "layout(push_constant) uniform P { float a; float b; uint nx; uint ny; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < ny) y[i] = a * x[i] + b;\n"
    "}\n";

/* axpb again, other code (another local size): another kernel to a loader */
static const char axpb_other_glsl[] =
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
    "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
    "layout(push_constant) uniform P { float a; float b; uint nx; uint ny; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < ny) y[i] = a * x[i] + b;\n"
    "}\n";

static vf_status axpb_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *p = s->params, *x = in[0];
    float *y = out[0];
    for (int64_t i = 0; i < vt_spec_numel(&s->out[0]); i++) y[i] = p[0] * x[i] + p[1];
    return VF_OK;
}

static vf_kernel *make_axpb(vf_context *ctx, bool with_cpu)
{
    vf_kernel_desc d = {.name = "axpb", .glsl = axpb_glsl, .n_inputs = 1, .n_outputs = 1,
                        .output_shapes = vt_same_shape, .param_bytes = 8, .cpu = with_cpu ? axpb_cpu : NULL};
    vf_kernel *k = vf_kernel_create(ctx, &d);
    assert_non_null(k);
    return k;
}

static void eager_axpb(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_kernel *k = make_axpb(ctx, true);
    enum { N = 1000 }; /* not a multiple of the local size: the tail is bounds-checked */
    float x[N], want[N];
    vt_fill_uniform(x, N, -3, 3, 1);
    const float p[2] = {1.5f, -0.25f};
    for (int i = 0; i < N; i++) want[i] = (float)(1.5 * (double)x[i] - 0.25);
    int64_t shape[2] = {10, 100};
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 2, shape, x), *y = NULL;
    assert_int_equal(vf_kernel_call(k, 1, &tx, p, &y), VF_OK);
    assert_int_equal(vf_tensor_rank(y), 2);
    assert_int_equal(vf_tensor_dim(y, 1), 100);
    float *got = vt_read(y);
    vt_assert_close_f32(got, want, N, 1e-6, 1e-6, "axpb");
    free(got);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(eager_axpb)

/* ---- a histogram: atomics into an output that starts as zeros -------------- */

static const char hist_glsl[] =
    "layout(local_size_x_id = 0) in;\n"
    "layout(std430, binding = 0) readonly buffer In { int v[]; };\n"
    "layout(std430, binding = 1) buffer Out { uint hist[]; };\n"
    "layout(push_constant) uniform P { uint nbins; uint nv; uint nhist; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i >= nv) return;\n"
    "    int b = v[i];\n"
    "    if (b >= 0 && uint(b) < nhist) atomicAdd(hist[b], 1u);\n"
    "}\n";

static vf_status hist_shape(vf_kernel_shapes *s, void *user)
{
    (void)user;
    uint32_t nbins;
    memcpy(&nbins, s->params, 4);
    if (nbins == 0) return VF_ERROR_INVALID_ARGUMENT; /* tested below: a failing callback */
    s->out[0].rank = 1;
    s->out[0].shape[0] = nbins;
    return VF_OK;
}

static void hist_dispatch(const vf_kernel_shapes *s, uint32_t wg, uint32_t groups[3], void *user)
{
    (void)user;
    int64_t n = vt_spec_numel(&s->in[0]);
    groups[0] = (uint32_t)((n + wg - 1) / wg);
    groups[1] = groups[2] = 1;
}

static vf_status hist_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const int32_t *v = in[0];
    uint32_t *h = out[0];
    int64_t nb = s->out[0].shape[0];
    for (int64_t i = 0; i < vt_spec_numel(&s->in[0]); i++)
        if (v[i] >= 0 && v[i] < nb) h[v[i]]++;
    return VF_OK;
}

static vf_kernel *make_hist(vf_context *ctx)
{
    vf_kernel_desc d = {.name = "histogram", .glsl = hist_glsl, .n_inputs = 1, .n_outputs = 1,
                        .inputs = {VF_I32}, .outputs = {{.dtype = VF_U32}}, .output_shapes = hist_shape,
                        .param_bytes = 4, .workgroup_size = 128, .dispatch = hist_dispatch, .cpu = hist_cpu};
    vf_kernel *k = vf_kernel_create(ctx, &d);
    assert_non_null(k);
    return k;
}

static void eager_histogram(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_kernel *k = make_hist(ctx);
    enum { N = 5000, BINS = 10 };
    int32_t v[N];
    vt_fill_int(v, N, -2, BINS + 1, 7); /* some out of range: not counted */
    uint32_t want[BINS] = {0};
    for (int i = 0; i < N; i++)
        if (v[i] >= 0 && v[i] < BINS) want[v[i]]++;
    int64_t n = N;
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 1, &n, v), *h = NULL;
    uint32_t nbins = BINS;
    /* twice: the second call's output must start from zeros again */
    for (int rep = 0; rep < 2; rep++) {
        assert_int_equal(vf_kernel_call(k, 1, &t, &nbins, &h), VF_OK);
        assert_int_equal(vf_tensor_dtype(h), VF_U32);
        assert_int_equal(vf_tensor_dim(h, 0), BINS);
        uint32_t *got = vt_read(h);
        vt_assert_equal_bytes(got, want, sizeof want, "histogram");
        free(got);
    }
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(eager_histogram)

/* ---- two inputs, two outputs, given output shapes, SPIR-V input ----------- */

static const char two_glsl[] =
    "#version 450\n"
    "layout(local_size_x_id = 0) in;\n"
    "layout(binding = 0) readonly buffer A { float a[]; };\n"
    "layout(binding = 1) readonly buffer B { float b[]; };\n"
    "layout(binding = 2) buffer S { float s[]; };\n"
    "layout(binding = 3) buffer D { float d[]; };\n"
    "layout(push_constant) uniform P { uint na; uint nb; uint ns; uint nd; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < ns) { s[i] = a[i] + b[i]; d[i] = a[i] - b[i]; }\n"
    "}\n";

static vf_status two_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *a = in[0], *b = in[1];
    float *sum = out[0], *dif = out[1];
    for (int64_t i = 0; i < vt_spec_numel(&s->out[0]); i++) {
        sum[i] = a[i] + b[i];
        dif[i] = a[i] - b[i];
    }
    return VF_OK;
}

static vf_kernel_desc two_desc(void)
{
    return (vf_kernel_desc){.name = "sum_diff", .glsl = two_glsl, .n_inputs = 2, .n_outputs = 2,
                            .outputs = {{VF_F32, 1, {6}}, {VF_F32, 1, {6}}}, .workgroup_size = 4,
                            .cpu = two_cpu};
}

static void eager_two_outputs(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_kernel_desc d = two_desc();
    /* the SPIR-V path: the same shader as words */
    uint32_t *words;
    size_t n_words;
    char msg[256];
    assert_int_equal(vf_glsl_compile(two_glsl, "sum_diff", &words, &n_words, msg, sizeof msg), VF_OK);
    d.glsl = NULL;
    d.spirv = words;
    d.spirv_words = n_words;
    vf_kernel *k = vf_kernel_create(ctx, &d);
    free(words); /* the kernel keeps its own copy */
    assert_non_null(k);
    float a[6] = {1, 2, 3, 4, 5, 6}, bb[6] = {0.5f, -1, 2, 8, 0, 3}, ws[6], wd[6];
    for (int i = 0; i < 6; i++) ws[i] = a[i] + bb[i], wd[i] = a[i] - bb[i];
    int64_t n = 6;
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, a), vf_tensor_from_host(ctx, VF_F32, 1, &n, bb)};
    vf_tensor *out[2];
    assert_int_equal(vf_kernel_call(k, 2, in, NULL, out), VF_OK);
    float *s = vt_read(out[0]), *df = vt_read(out[1]);
    vt_assert_close_f32(s, ws, 6, 0, 0, "sum");
    vt_assert_close_f32(df, wd, 6, 0, 0, "diff");
    free(s);
    free(df);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(eager_two_outputs)

/* ---- traced: a function body calling kernels, symbolic sizes -------------- */

typedef struct {
    vf_kernel *axpb, *hist;
} traced_kernels;

/* out[0] = histogram(in[1]), out[1] = relu(axpb(in[0])) * 2 */
static vf_status traced_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    traced_kernels *tk = user;
    const float p[2] = {2.0f, 1.0f};
    uint32_t nbins = 5;
    vf_tensor *y = NULL, *h = NULL;
    vf_status s = vf_kernel_call(tk->axpb, 1, &in[0], p, &y);
    if (s) return s;
    s = vf_kernel_call(tk->hist, 1, &in[1], &nbins, &h);
    if (s) return s;
    out[0] = h;
    out[1] = vf_mul(ctx, vf_relu(ctx, y), vt_scalar(ctx, 2.0));
    return out[1] ? VF_OK : vf_status_get(ctx);
}

static void traced_kernels_test(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    traced_kernels tk = {make_axpb(ctx, true), make_hist(ctx)};
    vf_tensor_spec sig[2] = {{VF_F32, 1, {-1}}, {VF_I32, 1, {-1}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "uses_kernels", .body = traced_body,
                                                                   .user = &tk, .n_inputs = 2, .n_outputs = 2,
                                                                   .input_signature = sig});
    assert_non_null(fn);
    /* two sizes through one trace: the kernel's shape callback and the
       default dispatch run per call */
    for (int64_t n = 37; n <= 300; n += 263) {
        float x[300], want[300];
        int32_t v[300];
        uint32_t wh[5] = {0};
        vt_fill_uniform(x, (size_t)n, -2, 2, (uint64_t)n);
        vt_fill_int(v, (size_t)n, 0, 6, (uint64_t)n + 1);
        for (int64_t i = 0; i < n; i++) {
            double t = 2.0 * x[i] + 1.0;
            want[i] = (float)((t > 0 ? t : 0) * 2.0);
            if (v[i] < 5) wh[v[i]]++;
        }
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, x), vf_tensor_from_host(ctx, VF_I32, 1, &n, v)};
        vf_tensor *out[2];
        assert_int_equal(vf_function_call(fn, in, out), VF_OK);
        assert_int_equal(vf_tensor_dim(out[1], 0), n);
        uint32_t *h = vt_read(out[0]);
        float *y = vt_read(out[1]);
        vt_assert_equal_bytes(h, wh, sizeof wh, "traced histogram");
        vt_assert_close_f32(y, want, (size_t)n, 1e-6, 1e-6, "traced axpb");
        free(h);
        free(y);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_int_equal(st.traces, 1);
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    assert_non_null(strstr(text, "histogram(")); /* the node goes by the kernel's name */
    free(text);
    /* the function keeps working after its kernels are destroyed */
    vf_kernel_destroy(tk.axpb);
    vf_kernel_destroy(tk.hist);
    int64_t n = 3;
    float x[3] = {-1, 0, 1};
    int32_t v[3] = {4, 4, 0};
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, x), vf_tensor_from_host(ctx, VF_I32, 1, &n, v)};
    vf_tensor *out[2];
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    uint32_t *h = vt_read(out[0]);
    uint32_t wh[5] = {1, 0, 0, 0, 2};
    vt_assert_equal_bytes(h, wh, sizeof wh, "histogram after destroy");
    free(h);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}
VT_PER_BACKEND(traced_kernels_test)

/* On Vulkan the traced call is one recorded plan: the kernels in its arena,
   barriers from hazard tracking (the validation layer's synchronisation
   checks run in ctest), and the profile names each user kernel with its
   bytes; the Perfetto trace too. */
static void planned_and_profiled(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc cd = {.backend = VF_BACKEND_VULKAN, .validation = val && !strcmp(val, "1"), .profile = true};
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(&cd, &ctx), VF_OK);
    traced_kernels tk = {make_axpb(ctx, true), make_hist(ctx)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "planned", .body = traced_body,
                                                                   .user = &tk, .n_inputs = 2, .n_outputs = 2});
    enum { N = 64 };
    float x[N];
    int32_t v[N];
    vt_fill_uniform(x, N, -1, 1, 3);
    vt_fill_int(v, N, 0, 4, 4);
    int64_t n = N;
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, x), vf_tensor_from_host(ctx, VF_I32, 1, &n, v)};
    vf_tensor *out[2];
    for (int call = 0; call < 2; call++) assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    uint32_t *h = vt_read(out[0]), want[5] = {0};
    for (int i = 0; i < N; i++) want[v[i]]++;
    vt_assert_equal_bytes(h, want, sizeof want, "planned histogram");
    free(h);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_true(st.planned);
    assert_int_equal(st.submits_per_call, 1);
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
    assert_true(p.planned);
    int seen = 0;
    for (int i = 0; i < p.n_kernels; i++) {
        const vf_kernel_profile *k = &p.kernels[i];
        if (!strcmp(k->name, "histogram")) {
            seen |= 1;
            assert_int_equal(k->dispatches, 2); /* the zeroing, then the shader */
            assert_int_equal(k->bytes_read, N * 4);
            assert_int_equal(k->n_nodes, 1);
            assert_string_equal(k->node_ops[0], "user_kernel"); /* the record's name is the kernel's */
        }
        if (!strcmp(k->name, "axpb")) seen |= 2;
    }
    assert_int_equal(seen, 3);
    vf_trace_file *tf = vf_trace_file_create();
    assert_int_equal(vf_trace_file_add(tf, "planned", &p), VF_OK);
    char *json = vf_trace_file_json(tf);
    assert_non_null(strstr(json, "\"histogram\""));
    free(json);
    vf_trace_file_destroy(tf);
    vf_function_destroy(fn);
    vf_kernel_destroy(tk.axpb);
    vf_kernel_destroy(tk.hist);
    vt_context_done(ctx);
}

/* ---- gradients: the kernel's grad callback builds the backward from ops --- */

/* loss = sum(cube(w * x)); out[0] = loss, out[1] = d loss / d w */
static vf_status cube_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_kernel *k = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *wx = vf_mul(ctx, in[0], in[1]), *y = NULL;
    vf_status s = vf_kernel_call(k, 1, &wx, NULL, &y);
    vf_tensor *loss = s ? NULL : vt_sum(ctx, y);
    if (loss) s = vf_tape_gradient(tp, loss, 1, &in[0], &out[1]);
    vf_tape_end(tp);
    out[0] = loss;
    return loss ? s : vf_status_get(ctx);
}

static void kernel_gradient(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_kernel *k = vt_cube_kernel(ctx, true);
    enum { N = 40 };
    float w[N], x[N], want[N];
    vt_fill_uniform(w, N, -1, 1, 11);
    vt_fill_uniform(x, N, -1, 1, 12);
    double loss = 0;
    for (int i = 0; i < N; i++) {
        double t = (double)w[i] * x[i];
        loss += t * t * t;
        want[i] = (float)(3.0 * t * t * x[i]);
    }
    int64_t n = N;
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, w), vf_tensor_from_host(ctx, VF_F32, 1, &n, x)};
    vf_tensor *out[2];
    assert_int_equal(cube_step(ctx, in, out, k), VF_OK); /* eager */
    float *g = vt_read(out[1]);
    vt_assert_close_f32(g, want, N, 1e-6, 1e-5, "eager gradient");
    free(g);
    assert_true(fabs(vt_read1(out[0]) - loss) < 1e-5);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "cube_step", .body = cube_step, .user = k,
                                                                   .n_inputs = 2, .n_outputs = 2});
    assert_int_equal(vf_function_call(fn, in, out), VF_OK); /* traced */
    g = vt_read(out[1]);
    vt_assert_close_f32(g, want, N, 1e-6, 1e-5, "traced gradient");
    free(g);
    vf_function_destroy(fn);
    /* no grad callback: the tape names the kernel */
    vf_kernel *nog = vt_cube_kernel(ctx, false);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = NULL;
    assert_int_equal(vf_kernel_call(nog, 1, &in[0], NULL, &y), VF_OK);
    vf_tensor *gw = NULL;
    assert_int_not_equal(vf_tape_gradient(tp, vt_sum(ctx, y), 1, &in[0], &gw), VF_OK);
    vf_tape_end(tp);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "kernel 'cube'", "no gradient", NULL);
    vf_kernel_destroy(nog);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(kernel_gradient)

/* A kernel in a traced vf_cond branch: the gradient replays the branch,
   kernel included (replay.c), then differentiates it. */
static vf_kernel *g_cube; /* the branch bodies' kernel (vf_cond passes one user pointer to both) */

static vf_status cube_branch(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    return vf_kernel_call(g_cube, 1, in, NULL, out);
}

static vf_status double_branch(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vt_scalar(ctx, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status cond_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = NULL;
    vf_status s = vf_cond(ctx, in[1], cube_branch, double_branch, 1, &in[0], 1, &y, NULL);
    if (!s) s = vf_tape_gradient(tp, vt_sum(ctx, y), 1, &in[0], &out[0]);
    vf_tape_end(tp);
    return s;
}

static void kernel_in_cond_gradient(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    g_cube = vt_cube_kernel(ctx, true);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "cond_step", .body = cond_step,
                                                                   .n_inputs = 2, .n_outputs = 1});
    float w[5] = {-2, -0.5f, 0, 1, 3};
    int64_t n = 5;
    for (int p = 0; p < 2; p++) {
        bool pred = p == 0;
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, w), vf_tensor_from_host(ctx, VF_BOOL, 0, NULL, &pred)};
        vf_tensor *g = NULL;
        assert_int_equal(vf_function_call(fn, in, &g), VF_OK);
        float *got = vt_read(g), want[5];
        for (int i = 0; i < 5; i++) want[i] = pred ? 3 * w[i] * w[i] : 2;
        vt_assert_close_f32(got, want, 5, 1e-6, 1e-6, pred ? "d cube" : "d 2x");
        free(got);
    }
    vf_function_destroy(fn);
    vf_kernel_destroy(g_cube);
    vt_context_done(ctx);
}
VT_PER_BACKEND(kernel_in_cond_gradient)

/* ---- save and load: the SPIR-V travels, the C callbacks cannot ---------- */

static void save_load(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    traced_kernels tk = {make_axpb(ctx, true), make_hist(ctx)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "saved_kernels", .body = traced_body,
                                                                   .user = &tk, .n_inputs = 2, .n_outputs = 2});
    enum { N = 50 };
    float x[N], want[N];
    int32_t v[N];
    uint32_t wh[5] = {0};
    vt_fill_uniform(x, N, -2, 2, 21);
    vt_fill_int(v, N, 0, 6, 22);
    for (int i = 0; i < N; i++) {
        double t = 2.0 * x[i] + 1.0;
        want[i] = (float)((t > 0 ? t : 0) * 2.0);
        if (v[i] < 5) wh[v[i]]++;
    }
    int64_t n = N;
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 1, &n, x), vf_tensor_from_host(ctx, VF_I32, 1, &n, v)};
    vf_tensor *out[2];
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/vkfuse_test_kernels_%d_%d.vfn", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), (int)b);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function_destroy(fn);
    vf_kernel_destroy(tk.axpb);
    vf_kernel_destroy(tk.hist);
    vt_context_done(ctx);
    /* a fresh context of each backend, no kernel registered */
    vf_backend all[2];
    int nb = vt_backends(all);
    for (int k = 0; k < nb; k++) {
        vf_context *c2 = vt_context(all[k]);
        vf_function *lf = NULL;
        assert_int_equal(vf_function_load(c2, path, &lf), VF_OK);
        vf_tensor *in2[2] = {vf_tensor_from_host(c2, VF_F32, 1, &n, x), vf_tensor_from_host(c2, VF_I32, 1, &n, v)};
        vf_status s = vf_function_call(lf, in2, out);
        if (all[k] == VF_BACKEND_CPU) {
            /* the C implementations are not in the file */
            assert_int_equal(s, VF_ERROR_UNSUPPORTED);
            vt_expect_error(c2, VF_ERROR_UNSUPPORTED, "no C implementation", "loaded function", NULL);
        } else {
            assert_int_equal(s, VF_OK);
            uint32_t *h = vt_read(out[0]);
            float *y = vt_read(out[1]);
            vt_assert_equal_bytes(h, wh, sizeof wh, "loaded histogram");
            vt_assert_close_f32(y, want, N, 1e-6, 1e-6, "loaded axpb");
            free(h);
            free(y);
            /* other sizes: the traced ones only (no shape callback after a load) */
            int64_t m = 7;
            vf_tensor *in3[2] = {vf_tensor_from_host(c2, VF_F32, 1, &m, x), vf_tensor_from_host(c2, VF_I32, 1, &m, v)};
            assert_int_not_equal(vf_function_call(lf, in3, out), VF_OK);
            vf_error_clear(c2);
        }
        vf_function_destroy(lf);
        vt_context_done(c2);
    }
    /* the same kernels created in the loading context (as a TensorFlow
       custom-op library is loaded first): the nodes run them, with their C
       implementations, on both backends; an axpb of other GLSL under the
       same name is not taken for the saved one */
    for (int k = 0; k < nb; k++) {
        vf_context *c2 = vt_context(all[k]);
        vf_kernel *hist = make_hist(c2);
        vf_kernel *other = vf_kernel_create(c2, &(vf_kernel_desc){.name = "axpb", .glsl = axpb_other_glsl,
                                                                  .n_inputs = 1, .n_outputs = 1,
                                                                  .output_shapes = vt_same_shape, .param_bytes = 8,
                                                                  .cpu = axpb_cpu});
        assert_non_null(other);
        vf_function *lf = NULL;
        assert_int_equal(vf_function_load(c2, path, &lf), VF_OK);
        vf_tensor *in2[2] = {vf_tensor_from_host(c2, VF_F32, 1, &n, x), vf_tensor_from_host(c2, VF_I32, 1, &n, v)};
        vf_status s = vf_function_call(lf, in2, out);
        if (all[k] == VF_BACKEND_CPU) { /* histogram bound, axpb not (its SPIR-V differs) */
            assert_int_equal(s, VF_ERROR_UNSUPPORTED);
            vt_expect_error(c2, VF_ERROR_UNSUPPORTED, "axpb", "no C implementation", NULL);
        } else {
            assert_int_equal(s, VF_OK);
        }
        vf_function_destroy(lf);
        vf_kernel *axpb = make_axpb(c2, true);
        assert_int_equal(vf_function_load(c2, path, &lf), VF_OK);
        assert_int_equal(vf_function_call(lf, in2, out), VF_OK);
        uint32_t *h = vt_read(out[0]);
        float *y = vt_read(out[1]);
        vt_assert_equal_bytes(h, wh, sizeof wh, "loaded histogram, bound to the context's");
        vt_assert_close_f32(y, want, N, 1e-6, 1e-6, "loaded axpb, bound to the context's");
        free(h);
        free(y);
        vf_function_destroy(lf);
        vf_kernel_destroy(axpb);
        vf_kernel_destroy(other);
        vf_kernel_destroy(hist);
        vt_context_done(c2);
    }
    remove(path);
}
VT_PER_BACKEND(save_load)

/* ---- bad input: a status and a message, never a crash ------------------- */

static void bad_glsl(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    /* the error is on the user's line 3, whatever vkfuse prepends */
    static const char src[] = "layout(local_size_x = 1) in;\n"
                              "void main() {\n"
                              "    undeclared_thing = 1;\n"
                              "}\n";
    vf_kernel_desc d = {.name = "broken", .glsl = src, .n_inputs = 0, .n_outputs = 1, .outputs = {{VF_F32, 1, {1}}}};
    assert_null(vf_kernel_create(ctx, &d));
    /* one error, one line: shaderc's trailing newline is not kept inside the message */
    if (strchr(vf_error_message(ctx), '\n')) fail_msg("message has a newline: \"%s\"", vf_error_message(ctx));
    vt_expect_error(ctx, VF_ERROR_COMPILE, "broken:3:", "undeclared_thing", NULL);
    /* with its own #version line the numbering is the user's too */
    static const char src2[] = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { nope(); }\n";
    d.glsl = src2;
    assert_null(vf_kernel_create(ctx, &d));
    vt_expect_error(ctx, VF_ERROR_COMPILE, "broken:3:", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(bad_glsl)

static void bad_desc(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    assert_null(vf_kernel_create(ctx, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "desc is NULL", NULL);
    vf_kernel_desc zero = {0};
    assert_null(vf_kernel_create(ctx, &zero));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "desc.glsl and desc.spirv are both NULL", NULL);
    vf_kernel_desc d = two_desc();
    d.n_outputs = 0;
    assert_null(vf_kernel_create(ctx, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "n_outputs is 0", NULL);
    d = two_desc();
    d.param_bytes = 6;
    assert_null(vf_kernel_create(ctx, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "param_bytes is 6", NULL);
    /* the shader declares bindings 0..3, the desc has 1 input and 1 output */
    d = two_desc();
    d.n_inputs = 1;
    d.n_outputs = 1;
    assert_null(vf_kernel_create(ctx, &d));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "declares binding 3", "bindings 0 .. 1", NULL);
    /* a binding in another set */
    static const char set1[] = "layout(local_size_x = 1) in;\n"
                               "layout(set = 1, binding = 0) buffer O { float o[]; };\n"
                               "void main() { o[0] = 1.0; }\n";
    vf_kernel_desc s1 = {.glsl = set1, .n_outputs = 1, .outputs = {{VF_F32, 1, {1}}}};
    assert_null(vf_kernel_create(ctx, &s1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "set 1", NULL);
    /* SPIR-V words that are not a module */
    uint32_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    vf_kernel_desc sj = {.spirv = junk, .spirv_words = 8, .n_outputs = 1};
    assert_null(vf_kernel_create(ctx, &sj));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "not a SPIR-V module", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(bad_desc)

static void bad_call(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_kernel *h = make_hist(ctx);
    int64_t n = 4;
    int32_t v[4] = {0, 1, 2, 3};
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 1, &n, v), *out = (vf_tensor *)&n;
    uint32_t zero = 0, three = 3;
    /* the output_shapes callback fails: its status, the kernel's name and the shapes */
    assert_int_equal(vf_kernel_call(h, 1, &t, &zero, &out), VF_ERROR_INVALID_ARGUMENT);
    assert_null(out);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "histogram", "output_shapes callback failed", "i32 [4]", NULL);
    assert_int_equal(vf_kernel_call(h, 2, &t, &three, &out), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "takes 1 input(s), got 2", NULL);
    assert_int_equal(vf_kernel_call(h, 1, &t, NULL, &out), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "params is NULL", NULL);
    vf_tensor *f = vf_fill(ctx, VF_F32, 1, &n, 1.0);
    assert_int_equal(vf_kernel_call(h, 1, &f, &three, &out), VF_ERROR_DTYPE);
    vt_expect_error(ctx, VF_ERROR_DTYPE, "input 0 is f32", "says i32", NULL);
    vf_tensor_release(t);
    assert_int_not_equal(vf_kernel_call(h, 1, &t, &three, &out), VF_OK);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "released", NULL);
    /* empty input: no dispatch, zeros */
    int64_t z = 0;
    vf_tensor *e = vf_fill(ctx, VF_I32, 1, &z, 0);
    assert_int_equal(vf_kernel_call(h, 1, &e, &three, &out), VF_OK);
    uint32_t *got = vt_read(out), want[3] = {0};
    vt_assert_equal_bytes(got, want, sizeof want, "empty input");
    free(got);
    vf_kernel_destroy(h);
    assert_int_equal(vf_kernel_call(NULL, 0, NULL, NULL, NULL), VF_ERROR_INVALID_ARGUMENT);
    vt_context_done(ctx);
}
VT_PER_BACKEND(bad_call)

/* No C implementation: the CPU backend says so; Vulkan runs the shader. */
static void no_cpu_impl(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vf_kernel *k = make_axpb(ctx, false);
    int64_t n = 3;
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, &n, 2.0), *y = NULL;
    const float p[2] = {3, 1};
    vf_status s = vf_kernel_call(k, 1, &x, p, &y);
    if (b == VF_BACKEND_CPU) {
        assert_int_equal(s, VF_ERROR_UNSUPPORTED);
        vt_expect_error(ctx, VF_ERROR_UNSUPPORTED, "axpb", "no C implementation", "desc.cpu", NULL);
    } else {
        assert_int_equal(s, VF_OK);
        float *got = vt_read(y), want[3] = {7, 7, 7};
        vt_assert_close_f32(got, want, 3, 0, 0, "no cpu impl on vulkan");
        free(got);
    }
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(no_cpu_impl)

/* A kernel outliving its context: destroy only frees it. */
static void outlives_context(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_kernel *k = make_axpb(ctx, true);
    vt_context_done(ctx);
    assert_int_equal(vf_kernel_call(k, 0, NULL, NULL, NULL), VF_ERROR_INVALID_ARGUMENT);
    vf_kernel_destroy(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(eager_axpb),
        VT_PER_BACKEND_TESTS(eager_histogram),
        VT_PER_BACKEND_TESTS(eager_two_outputs),
        VT_PER_BACKEND_TESTS(traced_kernels_test),
        VT_PER_BACKEND_TESTS(bad_glsl),
        VT_PER_BACKEND_TESTS(bad_desc),
        VT_PER_BACKEND_TESTS(bad_call),
        VT_PER_BACKEND_TESTS(no_cpu_impl),
        VT_PER_BACKEND_TESTS(kernel_gradient),
        VT_PER_BACKEND_TESTS(kernel_in_cond_gradient),
        VT_PER_BACKEND_TESTS(save_load),
        cmocka_unit_test(planned_and_profiled),
        cmocka_unit_test(outlives_context),
    };
    return VT_RUN_GROUP(tests);
}
