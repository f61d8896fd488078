/* User kernels (issue 14), continued from test_kernels.c: calls with more
 * than 3 inputs or more than one output inside a recorded plan, the
 * push-constant layout check at create, writes past an output, loaded
 * functions bound to the context's kernel (any size, and gradients). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int64_t numel_of(const vf_tensor_spec *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

static vf_status like_input0(vf_kernel_shapes *s, void *user)
{
    (void)user;
    for (int j = 0; j < s->n_outputs; j++) {
        s->out[j].rank = s->in[0].rank;
        memcpy(s->out[j].shape, s->in[0].shape, sizeof s->in[0].shape);
    }
    return VF_OK;
}

/* ---- 4 inputs, 2 outputs: p = a b + c, q += d - a (q starts as zeros) ---- */

static const char four_two_glsl[] =
    "layout(local_size_x_id = 0) in;\n"
    "layout(binding = 0) readonly buffer A { float a[]; };\n"
    "layout(binding = 1) readonly buffer B { float b[]; };\n"
    "layout(binding = 2) readonly buffer C { float c[]; };\n"
    "layout(binding = 3) readonly buffer D { float d[]; };\n"
    "layout(binding = 4) writeonly buffer P { float p[]; };\n"
    "layout(binding = 5) buffer Q { float q[]; };\n"
    "layout(push_constant) uniform K { float s; uint na, nb, nc, nd, np, nq; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < np) { p[i] = a[i] * b[i] + c[i]; q[i] += s * (d[i] - a[i]); }\n"
    "}\n";

static vf_status four_two_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *a = in[0], *b = in[1], *c = in[2], *d = in[3], *sc = s->params;
    float *p = out[0], *q = out[1];
    for (int64_t i = 0; i < numel_of(&s->out[0]); i++) {
        p[i] = a[i] * b[i] + c[i];
        q[i] += sc[0] * (d[i] - a[i]);
    }
    return VF_OK;
}

static vf_kernel *make_four_two(vf_context *ctx)
{
    vf_kernel *k = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "four_two", .glsl = four_two_glsl, .n_inputs = 4, .n_outputs = 2, .output_shapes = like_input0,
        .param_bytes = 4, .cpu = four_two_cpu});
    assert_non_null(k);
    return k;
}

/* out[0] = p * 2, out[1] = q + p: both outputs go through the plan's arena */
static vf_status four_two_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const float s = 0.5f;
    vf_tensor *r[2] = {NULL, NULL};
    vf_status st = vf_kernel_call(user, 4, in, &s, r);
    if (st) return st;
    out[0] = vf_mul(ctx, r[0], vt_scalar(ctx, 2.0));
    out[1] = vf_add(ctx, r[1], r[0]);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void four_in_two_out_planned(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_kernel *k = make_four_two(ctx);
    enum { N = 300 };
    float x[4][N], w0[N], w1[N];
    for (int i = 0; i < 4; i++) vt_fill_uniform(x[i], N, -2, 2, 40 + (uint64_t)i);
    for (int i = 0; i < N; i++) {
        double p = (double)x[0][i] * x[1][i] + x[2][i];
        w0[i] = (float)(2 * p);
        w1[i] = (float)(0.5 * ((double)x[3][i] - x[0][i]) + p);
    }
    int64_t n = N;
    vf_tensor *in[4];
    for (int i = 0; i < 4; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, 1, &n, x[i]);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "four_two", .body = four_two_body,
                                                                   .user = k, .n_inputs = 4, .n_outputs = 2});
    assert_non_null(fn);
    vf_tensor *te[2], *tf[2];
    assert_int_equal(four_two_body(ctx, in, te, k), VF_OK); /* eager */
    float *e0 = vt_read(te[0]), *e1 = vt_read(te[1]);
    vt_assert_close_f32(e0, w0, N, 1e-6, 1e-6, "eager p");
    vt_assert_close_f32(e1, w1, N, 1e-6, 1e-6, "eager q");
    for (int call = 0; call < 2; call++) { /* the second call reruns the plan: q zeroed again */
        assert_int_equal(vf_function_call(fn, in, tf), VF_OK);
        float *f0 = vt_read(tf[0]), *f1 = vt_read(tf[1]);
        vt_assert_equal_bytes(f0, e0, sizeof(float) * N, "traced p = eager p");
        vt_assert_equal_bytes(f1, e1, sizeof(float) * N, "traced q = eager q");
        free(f0);
        free(f1);
    }
    free(e0);
    free(e1);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    if (be == VF_BACKEND_VULKAN) { /* one recorded plan, not node by node */
        assert_true(st.planned);
        assert_int_equal(st.submits_per_call, 1);
    }
    vf_function_destroy(fn);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(four_in_two_out_planned)

/* ---- the most tensors a kernel has: 8 inputs, 8 outputs (8 zeroings) ---- */

static vf_status eight_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    for (int j = 0; j < 8; j++)
        for (int64_t i = 0; i < numel_of(&s->out[j]); i++)
            ((float *)out[j])[i] += ((const float *)in[j])[i] * (float)(j + 1) + ((const float *)in[7 - j])[i];
    return VF_OK;
}

static vf_status eight_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx;
    return vf_kernel_call(user, 8, in, NULL, out);
}

static void eight_by_eight(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    char src[4096];
    size_t len = (size_t)snprintf(src, sizeof src, "layout(local_size_x_id = 0) in;\n");
    for (int t = 0; t < 16; t++)
        len += (size_t)snprintf(src + len, sizeof src - len, "layout(binding = %d) buffer B%d { float v%d[]; };\n",
                                t, t, t);
    len += (size_t)snprintf(src + len, sizeof src - len, "layout(push_constant) uniform P { uint n[16]; };\n"
                            "void main() { uint i = gl_GlobalInvocationID.x; if (i >= n[8]) return;\n");
    for (int j = 0; j < 8; j++) /* += : the outputs must start as zeros */
        len += (size_t)snprintf(src + len, sizeof src - len, "    v%d[i] += v%d[i] * %d.0 + v%d[i];\n", 8 + j, j,
                                j + 1, 7 - j);
    snprintf(src + len, sizeof src - len, "}\n");
    vf_kernel *k = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "eight", .glsl = src, .n_inputs = 8, .n_outputs = 8, .output_shapes = like_input0,
        .cpu = eight_cpu});
    assert_non_null(k);
    enum { N = 50 };
    float x[8][N];
    int64_t n = N;
    vf_tensor *in[8], *out[8];
    for (int i = 0; i < 8; i++) {
        vt_fill_uniform(x[i], N, -1, 1, 60 + (uint64_t)i);
        in[i] = vf_tensor_from_host(ctx, VF_F32, 1, &n, x[i]);
    }
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "eight", .body = eight_body, .user = k,
                                                                   .n_inputs = 8, .n_outputs = 8});
    for (int call = 0; call < 2; call++) assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    for (int j = 0; j < 8; j++) {
        float want[N], *got = vt_read(out[j]);
        for (int i = 0; i < N; i++) want[i] = (float)((double)x[j][i] * (j + 1) + x[7 - j][i]);
        vt_assert_close_f32(got, want, N, 1e-6, 1e-6, "output j");
        free(got);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    if (be == VF_BACKEND_VULKAN) assert_true(st.planned);
    vf_function_destroy(fn);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(eight_by_eight)

/* Under VKFUSE_CHECK such a call stays in the plan and is replayed with
   its C implementation: one that disagrees fails the call. */
static vf_status four_two_cpu_wrong(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    vf_status st = four_two_cpu(s, in, out, user);
    ((float *)out[1])[3] += 1.0f;
    return st;
}

static void checked_parts(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    setenv("VKFUSE_CHECK", "1", 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_CHECK");
    enum { N = 40 };
    float x[N];
    vt_fill_uniform(x, N, -1, 1, 5);
    int64_t n = N;
    vf_tensor *in[4];
    for (int i = 0; i < 4; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, 1, &n, x);
    for (int wrong = 0; wrong < 2; wrong++) {
        vf_kernel *k = vf_kernel_create(ctx, &(vf_kernel_desc){
            .name = "four_two", .glsl = four_two_glsl, .n_inputs = 4, .n_outputs = 2, .output_shapes = like_input0,
            .param_bytes = 4, .cpu = wrong ? four_two_cpu_wrong : four_two_cpu});
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "checked", .body = four_two_body,
                                                                       .user = k, .n_inputs = 4, .n_outputs = 2});
        vf_tensor *out[2];
        vf_function_stats st;
        if (!wrong) {
            assert_int_equal(vf_function_call(fn, in, out), VF_OK);
            assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
            assert_true(st.planned);
        } else {
            assert_int_equal(vf_function_call(fn, in, out), VF_ERROR_DEVICE);
            vt_expect_error(ctx, VF_ERROR_DEVICE, "VKFUSE_CHECK", "disagrees with the CPU backend", "element 3", NULL);
        }
        vf_function_destroy(fn);
        vf_kernel_destroy(k);
    }
    vt_context_done(ctx);
}

/* ---- the push-constant block against desc.param_bytes and the counts ---- */

static void push_constant_layout(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU); /* checked at create, on every backend */
    static const char head[] = "layout(local_size_x = 8) in;\n"
                               "layout(binding = 0) readonly buffer X { float x[]; };\n"
                               "layout(binding = 1) writeonly buffer Y { float y[]; };\n";
    static const char body[] = "void main() { uint i = gl_GlobalInvocationID.x; if (i < n_y) y[i] = x[i]; }\n";
    struct {
        const char *block;
        uint32_t param_bytes;
        const char *want;      /* NULL: accepted */
    } cases[] = {
        {"{ float a; float b; uint n_x; uint n_y; }", 8, NULL},
        {"{ float w[2]; uint n_x; uint n_y; }", 8, NULL},            /* an array of params */
        {"{ uint n_x; uint n_y; }", 0, NULL},
        {"{ float a; uint n_x[1]; uint n_y; }", 4, NULL},              /* a count in an array */
        /* the params forgotten in the desc: 16 bytes, a call pushes 12 */
        {"{ float a; float b; uint n_x; uint n_y; }", 4, "push-constant block is 16 bytes, but a call pushes 12"},
        {"{ vec2 ab; uint n_y; }", 4, "member 0 (8 bytes at offset 0) runs past the params"},
        {"{ float a; uint n_y; }", 0, "member 0 at offset 0 is in the element counts"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char src[1024];
        snprintf(src, sizeof src, "%slayout(push_constant) uniform P %s;\n%s", head, cases[c].block, body);
        vf_kernel *k = vf_kernel_create(ctx, &(vf_kernel_desc){
            .name = "pc", .glsl = src, .n_inputs = 1, .n_outputs = 1, .outputs = {{VF_F32, 1, {4}}},
            .param_bytes = cases[c].param_bytes});
        if (!cases[c].want) {
            assert_non_null(k);
            vf_kernel_destroy(k);
            continue;
        }
        assert_null(k);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "kernel 'pc'", cases[c].want, "desc.param_bytes", NULL);
    }
    vt_context_done(ctx);
}

/* ---- writes past an output: desc.check_bounds reports them --------------- */

/* y[i] = x[i] + 1 for i < n_y + 5: five elements too many */
static const char overrun_glsl[] =
    "layout(local_size_x = 64) in;\n"
    "layout(binding = 0) readonly buffer X { float x[]; };\n"
    "layout(binding = 1) writeonly buffer Y { float y[]; };\n"
    "layout(push_constant) uniform P { uint n_x; uint n_y; };\n"
    "void main() { uint i = gl_GlobalInvocationID.x; if (i < n_y + 5u) y[i] = x[i % n_x] + 1.0; }\n";

static vf_status overrun_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *x = in[0];
    float *y = out[0];
    int64_t n = numel_of(&s->out[0]);
    for (int64_t i = 0; i < n + 5; i++) y[i] = x[i % n] + 1.0f; /* the same bug in C */
    return VF_OK;
}

static void overrun_groups(const vf_kernel_shapes *s, uint32_t wg, uint32_t g[3], void *user)
{
    (void)user;
    g[0] = (uint32_t)((numel_of(&s->out[0]) + 5 + wg - 1) / wg);
    g[1] = g[2] = 1;
}

static vf_status overrun_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx;
    return vf_kernel_call(user, 1, in, NULL, out);
}

static void writes_past_output(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_kernel *k = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "overrun", .glsl = overrun_glsl, .n_inputs = 1, .n_outputs = 1, .output_shapes = like_input0,
        .dispatch = overrun_groups, .cpu = overrun_cpu, .check_bounds = true});
    assert_non_null(k);
    enum { N = 64 };
    int64_t n = N;
    vf_tensor *before = vf_fill(ctx, VF_F32, 1, &n, 7.0), *x = vf_fill(ctx, VF_F32, 1, &n, 2.0);
    vf_tensor *after = vf_fill(ctx, VF_F32, 1, &n, 9.0), *y = (vf_tensor *)&n;
    assert_int_equal(vf_kernel_call(k, 1, &x, NULL, &y), VF_ERROR_INVALID_ARGUMENT);
    assert_null(y);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "kernel 'overrun' wrote past the end of output 0 (64 elements)",
                    "element 64", NULL);
    /* traced: the call runs node by node, checked the same way */
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "overrun_fn", .body = overrun_body,
                                                                   .user = k, .n_inputs = 1, .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, &x, &y), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "wrote past the end of output 0", NULL);
    vf_function_destroy(fn);
    /* the tensors around it kept their values */
    float *b = vt_read(before), *a = vt_read(after), *xv = vt_read(x), w7[N], w9[N], w2[N];
    for (int i = 0; i < N; i++) w7[i] = 7, w9[i] = 9, w2[i] = 2;
    vt_assert_equal_bytes(b, w7, sizeof w7, "tensor before");
    vt_assert_equal_bytes(a, w9, sizeof w9, "tensor after");
    vt_assert_equal_bytes(xv, w2, sizeof w2, "the input");
    free(b), free(a), free(xv);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}
VT_PER_BACKEND(writes_past_output)

/* ---- a loaded function bound to the context's kernel: any size of its
   symbolic dim (four_two traced with an input signature of [-1]) ---- */

enum { NL = 40 }; /* elements of the loaded functions' inputs */
static const vf_tensor_spec sig_1d[4] = {{VF_F32, 1, {-1}}, {VF_F32, 1, {-1}}, {VF_F32, 1, {-1}}, {VF_F32, 1, {-1}}};

/* Fills x from seed, traces four_two_body with the input signature [-1]
   x 4 at 25 elements, saves it to path (named by tag) and ends the context. */
static void save_four_two_sym(vf_backend be, float (*x)[NL], uint64_t seed, const char *tag, char *path, size_t len)
{
    vf_context *ctx = vt_context(be);
    vf_kernel *k = make_four_two(ctx);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "four_two_sym", .body = four_two_body,
                                                                   .user = k, .n_inputs = 4, .n_outputs = 2,
                                                                   .input_signature = sig_1d});
    for (int i = 0; i < 4; i++) vt_fill_uniform(x[i], NL, -2, 2, seed + (uint64_t)i);
    int64_t n = 25;
    vf_tensor *in[4], *out[2];
    for (int i = 0; i < 4; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, 1, &n, x[i]);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    snprintf(path, len, "%s/vkfuse_kernels_%s_%d_%d.vfn", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", tag,
             (int)getpid(), (int)be);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function_destroy(fn);
    vf_kernel_destroy(k);
    vt_context_done(ctx);
}

static void loaded_symbolic(vf_backend be)
{
    enum { N = NL };
    float x[4][N];
    char path[256];
    save_four_two_sym(be, x, 60, "sym", path, sizeof path);
    vf_tensor *in[4], *out[2];
    vf_context *c2 = vt_context(be);
    vf_kernel *k2 = make_four_two(c2); /* the same kernel, registered before the load */
    vf_function *ld = NULL;
    assert_int_equal(vf_function_load(c2, path, &ld), VF_OK);
    for (int64_t m = 7; m <= N; m += 33) { /* 7 and 40: neither the traced 25 */
        for (int i = 0; i < 4; i++) in[i] = vf_tensor_from_host(c2, VF_F32, 1, &m, x[i]);
        vf_status st = vf_function_call(ld, in, out);
        if (st) fail_msg("loaded, bound, n = %lld: %s", (long long)m, vf_error_message(c2));
        float *p = vt_read(out[0]), *q = vt_read(out[1]);
        for (int64_t i = 0; i < m; i++) {
            double pp = (double)x[0][i] * x[1][i] + x[2][i];
            assert_true(fabs(p[i] - 2 * pp) <= 1e-5 * (1 + fabs(2 * pp)));
            double qq = 0.5 * ((double)x[3][i] - x[0][i]) + pp;
            assert_true(fabs(q[i] - qq) <= 1e-5 * (1 + fabs(qq)));
        }
        free(p);
        free(q);
    }
    vf_function_destroy(ld);
    vf_kernel_destroy(k2);
    vt_context_done(c2);
    remove(path);
}
VT_PER_BACKEND(loaded_symbolic)

/* ---- a loaded function's kernel differentiated: four_two re-created with a
   gradient before the load (the same code: the node binds to it), under an
   eager tape and inlined into a traced function with a tape in its body;
   re-created without one, the tape names the kernel ---- */

/* p = a b + c, q = s (d - a): da = gp b - s gq, db = gp a, dc = gp, dd = s gq */
static vf_status four_two_grad(vf_context *ctx, const vf_kernel_shapes *s, vf_tensor *const *in,
                               vf_tensor *const *out, vf_tensor *const *gout, vf_tensor **gin, void *user)
{
    (void)out, (void)user;
    vf_tensor *sc = vt_scalar(ctx, *(const float *)s->params), *gq = vf_mul(ctx, gout[1], sc);
    gin[0] = vf_sub(ctx, vf_mul(ctx, gout[0], in[1]), gq);
    gin[1] = vf_mul(ctx, gout[0], in[0]);
    gin[2] = vf_mul(ctx, gout[0], vt_scalar(ctx, 1.0));
    gin[3] = gq;
    return gin[0] && gin[1] && gin[2] && gin[3] ? VF_OK : vf_status_get(ctx);
}

typedef struct { vf_function *ld; } loaded_user;

/* out: d sum(y0 * y1) / d in[0..3], y = ld(in), the tape in the body */
static vf_status grad_of_loaded(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    loaded_user *u = user;
    vf_tensor *y[2] = {NULL, NULL};
    vf_tape *tp = vf_tape_begin(ctx);
    vf_status s = vf_function_call(u->ld, in, y);
    if (!s) s = vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, y[0], y[1])), 4, in, out);
    vf_tape_end(tp);
    return s;
}

/* y0 = 2p, y1 = q + p: d sum(y0 y1) / dp = 2q + 4p, / dq = 2p */
static void check_loaded_grads(vf_tensor *const *g, float (*x)[NL], int64_t m, const char *what)
{
    for (int i = 0; i < m; i++) {
        double p = (double)x[0][i] * x[1][i] + x[2][i], q = 0.5 * ((double)x[3][i] - x[0][i]);
        double gp = 2 * q + 4 * p, gq = 2 * p;
        double want[4] = {gp * x[1][i] - 0.5 * gq, gp * x[0][i], gp, 0.5 * gq};
        for (int k = 0; k < 4; k++) {
            float *v = vt_read(g[k]);
            if (fabs(v[i] - want[k]) > 1e-5 * (1 + fabs(want[k])))
                fail_msg("%s: d/d in[%d] at %d: %g, want %g", what, k, i, (double)v[i], want[k]);
            free(v);
        }
    }
}

static void loaded_gradient(vf_backend be)
{
    float x[4][NL];
    char path[256];
    save_four_two_sym(be, x, 70, "grad", path, sizeof path);
    vf_tensor *in[4], *out[2], *g[4];
    vf_context *ctx;
    vf_kernel *k;
    ctx = vt_context(be);
    for (int with_grad = 1; with_grad >= 0; with_grad--) {
        k = vf_kernel_create(ctx, &(vf_kernel_desc){.name = "four_two", .glsl = four_two_glsl, .n_inputs = 4,
            .n_outputs = 2, .output_shapes = like_input0, .param_bytes = 4, .cpu = four_two_cpu,
            .grad = with_grad ? four_two_grad : NULL});
        assert_non_null(k);
        loaded_user u = {NULL};
        assert_int_equal(vf_function_load(ctx, path, &u.ld), VF_OK);
        int64_t m = 7;
        for (int i = 0; i < 4; i++) in[i] = vf_tensor_from_host(ctx, VF_F32, 1, &m, x[i]);
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(u.ld, in, out), VF_OK);
        vf_status st = vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, out[0], out[1])), 4, in, g);
        vf_tape_end(tp);
        if (!with_grad) {
            assert_int_equal(st, VF_ERROR_INVALID_ARGUMENT);
            vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "kernel 'four_two'", "no gradient", NULL);
        } else {
            if (st) fail_msg("eager tape: %s", vf_error_message(ctx));
            check_loaded_grads(g, x, m, "loaded kernel, eager tape");
            vf_function *outer = vf_function_create(ctx, &(vf_function_desc){.name = "grad_of_loaded",
                .body = grad_of_loaded, .user = &u, .n_inputs = 4, .n_outputs = 4, .input_signature = sig_1d});
            st = vf_function_call(outer, in, g);
            if (st) fail_msg("inlined: %s", vf_error_message(ctx));
            check_loaded_grads(g, x, m, "loaded kernel, inlined, traced tape");
            vf_function_destroy(outer);
        }
        vf_function_destroy(u.ld);
        vf_kernel_destroy(k);
    }
    vt_context_done(ctx);
    remove(path);
}
VT_PER_BACKEND(loaded_gradient)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(four_in_two_out_planned),
        VT_PER_BACKEND_TESTS(eight_by_eight),
        cmocka_unit_test(checked_parts),
        cmocka_unit_test(push_constant_layout),
        VT_PER_BACKEND_TESTS(writes_past_output),
        VT_PER_BACKEND_TESTS(loaded_symbolic),
        VT_PER_BACKEND_TESTS(loaded_gradient),
    };
    return VT_RUN_GROUP(tests);
}
