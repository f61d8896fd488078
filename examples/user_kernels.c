/* Your own kernels (docs/KERNELS.md): a histogram with atomics, and a
 * custom activation (squareplus, (x + sqrt(x^2 + 4)) / 2) with its
 * gradient, each used eagerly and inside a traced train step. Runs on the
 * default device, VKFUSE_BACKEND=vulkan (the shaders) or cpu (the C implementations);
 * exits non-zero when a result is wrong or the loss does not fall. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c, ...)                                                              \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "user_kernels: " __VA_ARGS__);                         \
            fprintf(stderr, " (%s)\n", ctx ? vf_error_message(ctx) : "");          \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static int64_t numel(const vf_tensor_spec *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

/* ---- histogram: bins[v[i]] += 1 with atomicAdd; the output starts as zeros */

static const char hist_glsl[] =
    "layout(local_size_x_id = 0) in;\n"                                  /* desc.workgroup_size */
    "layout(std430, binding = 0) readonly buffer In { int v[]; };\n"     /* input 0 */
    "layout(std430, binding = 1) buffer Out { uint bins[]; };\n"         /* output 0 */
    "layout(push_constant) uniform P { uint nbins; uint n_v; uint n_bins; };\n" /* params, then counts */
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i >= n_v) return;\n"
    "    int b = v[i];\n"
    "    if (b >= 0 && uint(b) < n_bins) atomicAdd(bins[b], 1u);\n"
    "}\n";

static vf_status hist_shape(vf_kernel_shapes *s, void *user)
{
    (void)user;
    uint32_t nbins;
    memcpy(&nbins, s->params, 4);
    s->out[0].rank = 1;
    s->out[0].shape[0] = nbins;
    return nbins ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

/* one invocation per input element (the default is one per output element) */
static void hist_groups(const vf_kernel_shapes *s, uint32_t wg, uint32_t groups[3], void *user)
{
    (void)user;
    groups[0] = (uint32_t)((numel(&s->in[0]) + wg - 1) / wg);
    groups[1] = groups[2] = 1;
}

static vf_status hist_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const int32_t *v = in[0];
    uint32_t *bins = out[0];
    for (int64_t i = 0; i < numel(&s->in[0]); i++)
        if (v[i] >= 0 && v[i] < s->out[0].shape[0]) bins[v[i]]++;
    return VF_OK;
}

/* ---- squareplus and its gradient -------------------------------------- */

static const char sqp_glsl[] =
    "layout(local_size_x_id = 0) in;\n"
    "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
    "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
    "layout(push_constant) uniform P { uint n_x; uint n_y; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < n_y) y[i] = 0.5 * (x[i] + sqrt(x[i] * x[i] + 4.0));\n"
    "}\n";

static vf_status like_input(vf_kernel_shapes *s, void *user)
{
    (void)user;
    s->out[0].rank = s->in[0].rank;
    memcpy(s->out[0].shape, s->in[0].shape, sizeof s->in[0].shape);
    return VF_OK;
}

static vf_status sqp_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *x = in[0];
    float *y = out[0];
    for (int64_t i = 0; i < numel(&s->out[0]); i++) y[i] = (float)(0.5 * (x[i] + sqrt((double)x[i] * x[i] + 4.0)));
    return VF_OK;
}

/* dy/dx = (1 + x / sqrt(x^2 + 4)) / 2, built from ops (so it traces) */
static vf_status sqp_grad(vf_context *ctx, const vf_kernel_shapes *s, vf_tensor *const *in, vf_tensor *const *out,
                          vf_tensor *const *gout, vf_tensor **gin, void *user)
{
    (void)s, (void)out, (void)user;
    vf_tensor *x = in[0];
    vf_tensor *four = vf_fill(ctx, VF_F32, 0, NULL, 4.0), *half = vf_fill(ctx, VF_F32, 0, NULL, 0.5);
    vf_tensor *r = vf_div(ctx, x, vf_sqrt(ctx, vf_add(ctx, vf_square(ctx, x), four)));
    gin[0] = vf_mul(ctx, vf_mul(ctx, vf_add(ctx, r, vf_fill(ctx, VF_F32, 0, NULL, 1.0)), half), gout[0]);
    return gin[0] ? VF_OK : vf_status_get(ctx);
}

/* in[0] -> its histogram of 16 bins, traced */
static vf_status hist_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx;
    uint32_t nbins = 16;
    return vf_kernel_call(user, 1, in, &nbins, out);
}

/* ---- a train step: loss = mean((squareplus(x w) - t)^2), w -= lr dloss/dw */

#define N 64
#define F 4

typedef struct {
    vf_kernel *sqp;
    vf_tensor *w, *lr;
} model;

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *z = vf_matmul(ctx, in[0], m->w), *y = NULL;
    vf_status s = vf_kernel_call(m->sqp, 1, &z, NULL, &y);
    vf_tensor *loss = s ? NULL : vf_reduce_mean(ctx, vf_square(ctx, vf_sub(ctx, y, in[1])), 0, NULL, false);
    vf_tensor *dw = NULL;
    if (loss) s = vf_tape_gradient(tp, loss, 1, &m->w, &dw);
    vf_tape_end(tp);
    if (!loss || s) return loss ? s : vf_status_get(ctx);
    s = vf_assign_sub(m->w, vf_mul(ctx, dw, m->lr));
    out[0] = loss;
    return s;
}

int main(void)
{
    vf_context *ctx = NULL;
    vf_status st = vf_context_create(&(vf_context_desc){0}, &ctx);
    CHECK(st == VF_OK, "no context");
    printf("user_kernels on %s\n", vf_device_name(ctx));

    /* histogram, eagerly */
    vf_kernel *hist = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "histogram", .glsl = hist_glsl, .n_inputs = 1, .n_outputs = 1, .inputs = {VF_I32},
        .outputs = {{.dtype = VF_U32}}, .output_shapes = hist_shape, .param_bytes = 4, .workgroup_size = 128,
        .dispatch = hist_groups, .cpu = hist_cpu});
    CHECK(hist, "vf_kernel_create(histogram)");
    enum { NV = 10000, BINS = 16 };
    int32_t *v = malloc(sizeof *v * NV);
    uint32_t want[BINS] = {0}, got[BINS];
    for (int i = 0; i < NV; i++) {
        v[i] = (int32_t)((i * 7919u) % (BINS + 3)) - 1; /* some outside [0, BINS) */
        if (v[i] >= 0 && v[i] < BINS) want[v[i]]++;
    }
    int64_t nv = NV;
    uint32_t nbins = BINS;
    vf_tensor *tv = vf_tensor_from_host(ctx, VF_I32, 1, &nv, v), *bins = NULL;
    CHECK(vf_kernel_call(hist, 1, &tv, &nbins, &bins) == VF_OK, "histogram call");
    CHECK(vf_tensor_read(bins, got, sizeof got) == VF_OK && !memcmp(got, want, sizeof got), "eager histogram wrong");
    printf("histogram of %d values into %d bins: ok\n", NV, BINS);

    /* squareplus with its gradient, in a traced train step and eagerly */
    vf_kernel *sqp = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "squareplus", .glsl = sqp_glsl, .n_inputs = 1, .n_outputs = 1, .output_shapes = like_input,
        .cpu = sqp_cpu, .grad = sqp_grad});
    CHECK(sqp, "vf_kernel_create(squareplus)");
    float x[N * F], t[N], w_true[F] = {0.5f, -1.0f, 2.0f, 0.25f}, zeros[F] = {0};
    for (int i = 0; i < N * F; i++) x[i] = (float)sin(0.37 * i) * 1.5f;
    for (int i = 0; i < N; i++) {
        double z = 0;
        for (int f = 0; f < F; f++) z += (double)x[i * F + f] * w_true[f];
        t[i] = (float)(0.5 * (z + sqrt(z * z + 4.0)));
    }
    int64_t xs[2] = {N, F}, ts[2] = {N, 1}, ws[2] = {F, 1};
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 2, xs, x), *tt = vf_tensor_from_host(ctx, VF_F32, 2, ts, t);
    model traced = {sqp, vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, ws, zeros)),
                    vf_fill(ctx, VF_F32, 0, NULL, 0.1)};
    model eager = {sqp, vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, ws, zeros)), traced.lr};
    vf_function *step = vf_function_create(ctx, &(vf_function_desc){.name = "train_step", .body = train_step,
                                                                     .user = &traced, .n_inputs = 2, .n_outputs = 1});
    CHECK(step, "vf_function_create");
    vf_tensor *in[2] = {tx, tt};
    float first = 0, last = 0;
    for (int it = 0; it < 60; it++) {
        vf_scope_begin(ctx);
        vf_tensor *lt = NULL, *le = NULL;
        CHECK(vf_function_call(step, in, &lt) == VF_OK, "traced step %d", it);
        CHECK(train_step(ctx, in, &le, &eager) == VF_OK, "eager step %d", it);
        float a, b;
        CHECK(vf_tensor_read(lt, &a, 4) == VF_OK && vf_tensor_read(le, &b, 4) == VF_OK, "read loss");
        CHECK(fabsf(a - b) <= 1e-5f * (1 + fabsf(b)), "step %d: traced loss %g, eager %g", it, a, b);
        if (it == 0) first = a;
        last = a;
        vf_scope_end(ctx);
    }
    printf("squareplus regression: loss %.5f -> %.5f\n", first, last);
    CHECK(last < 0.1f * first, "the loss did not fall enough");

    /* the histogram in a traced function too */
    vf_function *hf = vf_function_create(ctx, &(vf_function_desc){.name = "histogram_fn", .body = hist_body,
                                                                   .user = hist, .n_inputs = 1, .n_outputs = 1});
    vf_tensor *tb = NULL;
    CHECK(hf && vf_function_call(hf, &tv, &tb) == VF_OK, "traced histogram");
    CHECK(vf_tensor_read(tb, got, sizeof got) == VF_OK && !memcmp(got, want, sizeof got), "traced histogram wrong");
    printf("traced histogram: ok\n");
    vf_function_destroy(hf);
    vf_function_destroy(step);
    vf_kernel_destroy(sqp);
    vf_kernel_destroy(hist);
    free(v);
    st = vf_status_get(ctx);
    vf_context_destroy(ctx);
    return st == VF_OK ? 0 : 1;
}
