/* Writes the saved functions, .npy inputs and reference outputs that
 * tests/saved_cli_test.sh runs `vkfuse saved show`, `vkfuse run` and
 * `vkfuse profile FILE` on; the references are this program's own calls
 * on the CPU backend. Usage: saved_cli_make DIR
 *   mlp.vkf    x f32[-1,4] -> relu(x @ w + b) f32[-1,3], its sum f32[]
 *              (traced at 5 rows; inputs and references at 3: x.npy, mlp_ref0/1.npy)
 *   step.vkf   the saved tests' train step (a variable, a tape, vf_cond, vf_while_loop)
 *              after one step; sx/sy.npy a batch; step2_ref0..2.npy and step2_w.npy
 *              the next step's outputs and variable, step3_ref0..2.npy the one after
 *   dtypes.vkf f16, i32, u32, bool inputs (dt_h/i/u/b.npy) -> h+h, i*i, u+u, !b
 *              (dt_ref0..3.npy)
 *   uelem.vkf  2 * softplus(x) through a user elementwise op 'softplus' (ue_x.npy,
 *              ue_ref0.npy): a loaded function has its GLSL but not its C function
 *   kernel.vkf x^3 + 1 through the tests' user kernel 'cube' (ue_x.npy, k_ref0.npy):
 *              a loaded function has its SPIR-V, not its C function */
#include "kernels_common.h"
#include "npy.h"
#include "saved_common.h"
#include "vkfuse_kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static const char *dir;

static void die(vf_context *ctx, const char *what)
{
    fprintf(stderr, "saved_cli_make: %s: %s\n", what, ctx ? vf_error_message(ctx) : "");
    exit(1);
}

static void put(const char *name, vf_dtype dt, int rank, const int64_t *shape, const void *data)
{
    char path[4096], msg[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!npy_write(path, dt, rank, shape, data, msg, sizeof msg)) die(NULL, msg);
}

/* Tensor t written as DIR/name. */
static void put_tensor(vf_context *ctx, const char *name, vf_tensor *t)
{
    int64_t shape[VF_MAX_RANK];
    int rank = vf_tensor_rank(t);
    for (int d = 0; d < rank; d++) shape[d] = vf_tensor_dim(t, d);
    size_t bytes = (size_t)vf_tensor_numel(t) * vf_dtype_size(vf_tensor_dtype(t));
    void *p = malloc(bytes + 1);
    if (!p || vf_tensor_read(t, p, bytes) != VF_OK) die(ctx, name);
    put(name, vf_tensor_dtype(t), rank, shape, p);
    free(p);
}

static void save(vf_function *fn, vf_context *ctx, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (vf_function_save(fn, path) != VF_OK) die(ctx, name);
}

static vf_status mlp_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **c = user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], c[0]), c[1]));
    out[1] = vf_reduce_sum(ctx, out[0], 0, NULL, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void make_mlp(vf_context *ctx)
{
    float w[12], b[3], x5[20], x3[12];
    vt_fill_uniform(w, 12, -1, 1, 11);
    vt_fill_uniform(b, 3, -0.5f, 0.5f, 12);
    vt_fill_uniform(x5, 20, -1, 1, 13);
    vt_fill_uniform(x3, 12, -1, 1, 14);
    vf_tensor *cap[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){4, 3}, w),
                         vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){3}, b)};
    const vf_tensor_spec sig = {VF_F32, 2, {-1, 4}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mlp", .body = mlp_body, .user = cap,
                                                                   .n_inputs = 1, .n_outputs = 2, .input_signature = &sig});
    vf_tensor *out[2], *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){5, 4}, x5);
    if (!fn || vf_function_call(fn, &x, out) != VF_OK) die(ctx, "mlp");
    save(fn, ctx, "mlp.vkf");
    x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 4}, x3);
    if (vf_function_call(fn, &x, out) != VF_OK) die(ctx, "mlp at 3 rows");
    put_tensor(ctx, "x.npy", x);
    put_tensor(ctx, "mlp_ref0.npy", out[0]);
    put_tensor(ctx, "mlp_ref1.npy", out[1]);
    vf_function_destroy(fn);
}

static void make_step(vf_context *ctx)
{
    float w0[VT_FEAT * VT_CLS];
    vt_fill_uniform(w0, VT_FEAT * VT_CLS, -0.5f, 0.5f, 21);
    vt_step_model m = {
        .w = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){VT_FEAT, VT_CLS}, w0)),
        .b = vf_fill(ctx, VF_F32, 1, (int64_t[]){VT_CLS}, 0.1),
        .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.5),
    };
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "train_step", .body = vt_train_step,
                                                                   .user = &m, .n_inputs = 2, .n_outputs = 3,
                                                                   .input_signature = vt_step_sig});
    vf_tensor *in[2], *out[3];
    vt_step_inputs(ctx, 6, 31, in);
    if (!fn || vf_function_call(fn, in, out) != VF_OK) die(ctx, "train step 1");
    save(fn, ctx, "step.vkf");
    vt_step_inputs(ctx, 4, 41, in);
    put_tensor(ctx, "sx.npy", in[0]);
    put_tensor(ctx, "sy.npy", in[1]);
    char name[64];
    for (int step = 2; step <= 3; step++) {
        if (vf_function_call(fn, in, out) != VF_OK) die(ctx, "train step");
        for (int k = 0; k < 3; k++) {
            snprintf(name, sizeof name, "step%d_ref%d.npy", step, k);
            put_tensor(ctx, name, out[k]);
        }
        if (step == 2) put_tensor(ctx, "step2_w.npy", m.w);
    }
    vf_function_destroy(fn);
}

static vf_status dt_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, in[0], in[0]);
    out[1] = vf_mul(ctx, in[1], in[1]);
    out[2] = vf_add(ctx, in[2], in[2]);
    out[3] = vf_logical_not(ctx, in[3]);
    return out[0] && out[1] && out[2] && out[3] ? VF_OK : vf_status_get(ctx);
}

static void make_dtypes(vf_context *ctx)
{
    const int64_t n = 4;
    const uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x0000}; /* 1, -2, 0.5, 0 */
    const int32_t i[4] = {-3, 0, 7, 46340};
    const uint32_t u[4] = {0, 1, 0x7fffffffu, 12345};
    const uint8_t b[4] = {1, 0, 0, 1};
    vf_tensor *in[4] = {vf_tensor_from_host(ctx, VF_F16, 1, &n, h), vf_tensor_from_host(ctx, VF_I32, 1, &n, i),
                        vf_tensor_from_host(ctx, VF_U32, 1, &n, u), vf_tensor_from_host(ctx, VF_BOOL, 1, &n, b)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "dtypes", .body = dt_body, .n_inputs = 4,
                                                                   .n_outputs = 4});
    vf_tensor *out[4];
    if (!fn || vf_function_call(fn, in, out) != VF_OK) die(ctx, "dtypes");
    save(fn, ctx, "dtypes.vkf");
    const char *names[4] = {"dt_h.npy", "dt_i.npy", "dt_u.npy", "dt_b.npy"};
    char ref[32];
    for (int k = 0; k < 4; k++) {
        put_tensor(ctx, names[k], in[k]);
        snprintf(ref, sizeof ref, "dt_ref%d.npy", k);
        put_tensor(ctx, ref, out[k]);
    }
    vf_function_destroy(fn);
}

static void softplus_c(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t k = 0; k < n; k++) out[k] = log1pf(expf(in[0][k]));
}

static vf_status ue_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y = vf_elementwise_call(user, 1, in);
    out[0] = vf_mul(ctx, y, vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void make_uelem(vf_context *ctx)
{
    vf_elementwise_op *op = vf_elementwise_create(ctx, &(vf_elementwise_desc){
        .name = "softplus", .n_inputs = 1, .expr = "log(1.0 + exp(x0))", .cpu = softplus_c});
    float xv[6] = {-2, -0.5f, 0, 0.25f, 1, 3};
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){6}, xv), *out;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "uelem", .body = ue_body, .user = op,
                                                                   .n_inputs = 1, .n_outputs = 1});
    if (!op || !fn || vf_function_call(fn, &x, &out) != VF_OK) die(ctx, "uelem");
    save(fn, ctx, "uelem.vkf");
    put_tensor(ctx, "ue_x.npy", x);
    put_tensor(ctx, "ue_ref0.npy", out);
    vf_function_destroy(fn);
    vf_elementwise_destroy(op);
}

static vf_status k_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y = NULL;
    vf_status s = vf_kernel_call(user, 1, in, NULL, &y);
    if (s != VF_OK) return s;
    out[0] = vf_add(ctx, y, vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void make_kernel(vf_context *ctx)
{
    vf_kernel *k = vt_cube_kernel(ctx, false);
    float xv[6] = {-2, -0.5f, 0, 0.25f, 1, 3};
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){6}, xv), *out;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "kernel", .body = k_body, .user = k,
                                                                   .n_inputs = 1, .n_outputs = 1});
    if (!fn || vf_function_call(fn, &x, &out) != VF_OK) die(ctx, "kernel");
    save(fn, ctx, "kernel.vkf");
    put_tensor(ctx, "k_ref0.npy", out);
    vf_function_destroy(fn);
    vf_kernel_destroy(k);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: saved_cli_make DIR\n");
        return 2;
    }
    dir = argv[1];
    vf_context *ctx = NULL;
    if (vf_context_create(&(vf_context_desc){.backend = VF_BACKEND_CPU}, &ctx) != VF_OK) die(ctx, "context");
    make_mlp(ctx);
    make_step(ctx);
    make_dtypes(ctx);
    make_uelem(ctx);
    make_kernel(ctx);
    vf_context_destroy(ctx);
    return 0;
}
