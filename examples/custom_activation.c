/* A custom activation as a user elementwise op (docs/KERNELS.md, "User
 * elementwise ops"): squareplus(x) = (x + sqrt(x^2 + b)) / 2 as a GLSL
 * expression and a C function, with its gradient, used eagerly and inside
 * a traced train step, where it is fused into the kernels vkfuse
 * generates (the matmul's epilogue, the loss's elementwise ops). Runs on
 * the default device, VKFUSE_BACKEND=vulkan or cpu (the C functions); exits non-zero when
 * a result is wrong or the model does not learn. VKFUSE_DUMP=<dir> shows
 * the fused kernels' GLSL, the expression inside. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(c, ...)                                                              \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "custom_activation: " __VA_ARGS__);                    \
            fprintf(stderr, " (%s)\n", ctx ? vf_error_message(ctx) : "");          \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* The C side: called on rows of n floats (the CPU backend, constant
   folding, VKFUSE_CHECK). in[0] is x; a gradient's in[1] is y. */
static void squareplus(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = 0.5f * (in[0][i] + sqrtf(in[0][i] * in[0][i] + 4.0f));
}
/* dy/dx = (1 + x / sqrt(x^2 + 4)) / 2 = y / sqrt(x^2 + 4) */
static void squareplus_grad(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[1][i] / sqrtf(in[0][i] * in[0][i] + 4.0f);
}

#define N 64
#define F 4

typedef struct {
    vf_elementwise_op *act;
    vf_tensor *w, *lr;
} model;

/* loss = mean((squareplus(x w) - t)^2); w -= lr dloss/dw */
static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *z = vf_matmul(ctx, in[0], m->w);
    vf_tensor *y = vf_elementwise_call(m->act, 1, &z);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_square(ctx, vf_sub(ctx, y, in[1])), 0, NULL, false);
    vf_tensor *dw = NULL;
    vf_status s = loss ? vf_tape_gradient(tp, loss, 1, &m->w, &dw) : vf_status_get(ctx);
    vf_tape_end(tp);
    if (s) return s;
    s = vf_assign_sub(m->w, vf_mul(ctx, dw, m->lr));
    out[0] = loss;
    return s;
}

int main(void)
{
    vf_context *ctx = NULL;
    vf_status st = vf_context_create(&(vf_context_desc){0}, &ctx);
    CHECK(st == VF_OK, "no context");
    printf("custom_activation on %s\n", vf_device_name(ctx));

    vf_elementwise_op *act = vf_elementwise_create(ctx, &(vf_elementwise_desc){
        .name = "squareplus", .n_inputs = 1, .expr = "0.5 * (x0 + sqrt(x0 * x0 + 4.0))", .cpu = squareplus,
        .grad_expr = {"y / sqrt(x0 * x0 + 4.0)"}, .grad_cpu = {squareplus_grad}});
    CHECK(act, "vf_elementwise_create");

    /* eagerly, against the formula in double */
    float xs[8] = {-4, -2, -1, -0.5f, 0, 0.5f, 2, 7}, ys[8];
    int64_t n8 = 8;
    vf_tensor *tx8 = vf_tensor_from_host(ctx, VF_F32, 1, &n8, xs);
    vf_tensor *ty8 = vf_elementwise_call(act, 1, &tx8);
    CHECK(ty8 && vf_tensor_read(ty8, ys, sizeof ys) == VF_OK, "eager call");
    for (int i = 0; i < 8; i++)
        CHECK(fabs(ys[i] - 0.5 * (xs[i] + sqrt((double)xs[i] * xs[i] + 4.0))) < 1e-5, "squareplus(%g) = %g", xs[i],
              ys[i]);
    printf("eager squareplus: ok\n");

    /* a regression whose targets squareplus made: traced and eager steps agree, the loss falls */
    float x[N * F], t[N], w_true[F] = {0.5f, -1.0f, 2.0f, 0.25f}, zeros[F] = {0};
    for (int i = 0; i < N * F; i++) x[i] = (float)sin(0.37 * i) * 1.5f;
    for (int i = 0; i < N; i++) {
        double z = 0;
        for (int f = 0; f < F; f++) z += (double)x[i * F + f] * w_true[f];
        t[i] = (float)(0.5 * (z + sqrt(z * z + 4.0)));
    }
    int64_t xsh[2] = {N, F}, tsh[2] = {N, 1}, wsh[2] = {F, 1};
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 2, xsh, x), *tt = vf_tensor_from_host(ctx, VF_F32, 2, tsh, t);
    vf_tensor *lr = vf_fill(ctx, VF_F32, 0, NULL, 0.1);
    model traced = {act, vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, wsh, zeros)), lr};
    model eager = {act, vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, wsh, zeros)), lr};
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
    vf_function_stats fs;
    vf_function_stats_get(step, &fs);
    printf("squareplus regression: loss %.5f -> %.5f; the traced step runs %d kernels%s\n", first, last,
           fs.kernels, fs.planned ? " (squareplus fused into them)" : "");
    CHECK(last < 0.1f * first, "the loss did not fall enough");

    vf_function_destroy(step);
    vf_elementwise_destroy(act);
    st = vf_status_get(ctx);
    vf_context_destroy(ctx);
    return st == VF_OK ? 0 : 1;
}
