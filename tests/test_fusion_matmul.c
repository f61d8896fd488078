/* Matmul groups (VF_GROUP_MATMUL_EPILOGUE) in recorded plans of traced
 * functions on Vulkan: matmul + bias + activation is ONE kernel and one
 * dispatch per call (one kernel per op with VKFUSE_FUSION=0), for odd and
 * large sizes, bias [N] and [1,N], several epilogue ops, values of the
 * group that are also graph outputs or read outside it (then stored too),
 * transposed operands, broadcast batch dims (strided and full), f16 and a
 * symbolic batch dim. Every result is compared with the CPU backend (node
 * by node, OpenBLAS sgemm) and with the unfused plan. The generated GLSL of
 * matmul groups, for both device profiles, is tested in
 * test_fusion_matmul_glsl.c. */
#include "testutil.h"
#include "vk_test_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#define MAX_IO 4

typedef struct tensor_in {
    int rank;
    int64_t shape[4];
    float *data;
} tensor_in;

typedef struct result {
    float *out[MAX_IO];
    size_t n[MAX_IO];
    vf_function_stats fs;
} result;

typedef struct fn_case {
    const char *what;
    vf_body body;
    int n_in, n_out;
    tensor_in in[MAX_IO];
    const vf_tensor_spec *signature;
    int fused_kernels, unfused_kernels;
    double atol, rtol;   /* vs the CPU backend */
} fn_case;

static vf_tensor *scalar_k;   /* a captured scalar (scale) */
static const float scale_value = 0.75f;

static size_t numel(const tensor_in *t)
{
    size_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= (size_t)t->shape[i];
    return n;
}

static void new_input(tensor_in *t, int rank, const int64_t *shape, uint64_t seed)
{
    t->rank = rank;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)rank);
    size_t n = numel(t);
    t->data = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(t->data);
    vt_fill_uniform(t->data, n, -1, 1, seed);
}

/* Calls the function twice (trace and plan, then the recorded plan) and
   keeps the second call's outputs. */
static void run(vf_backend b, bool fuse, const fn_case *fc, result *r)
{
    vf_context *ctx = vt_context(b);
    scalar_k = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &scale_value);
    vf_tensor *in[MAX_IO] = {0};
    for (int i = 0; i < fc->n_in; i++)
        in[i] = vf_tensor_from_host(ctx, VF_F32, fc->in[i].rank, fc->in[i].shape, fc->in[i].data);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mm", .body = fc->body, .n_inputs = fc->n_in,
                                                                  .n_outputs = fc->n_out,
                                                                  .input_signature = fc->signature,
                                                                  .unfused = !fuse});
    assert_non_null(fn);
    vf_tensor *out[MAX_IO] = {0};
    vf_status s = vf_function_call(fn, in, out);
    if (s) fprintf(stderr, "%s: %s\n", fc->what, vf_error_message(ctx));
    assert_int_equal(s, VF_OK);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    for (int i = 0; i < fc->n_out; i++) {
        size_t n = 1;
        for (int d = 0; d < vf_tensor_rank(out[i]); d++) n *= (size_t)vf_tensor_dim(out[i], d);
        r->n[i] = n;
        r->out[i] = vt_read(out[i]);
    }
    assert_int_equal(vf_function_stats_get(fn, &r->fs), VF_OK);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

static void free_result(result *r)
{
    for (int i = 0; i < MAX_IO; i++) free(r->out[i]);
}

/* Fused, unfused and CPU runs: kernel and dispatch counts, results. */
static void check(const fn_case *fc)
{
    result f = {0}, u = {0}, c = {0};
    run(VF_BACKEND_VULKAN, true, fc, &f);
    run(VF_BACKEND_VULKAN, false, fc, &u);
    run(VF_BACKEND_CPU, true, fc, &c);
    printf("%s: fused %d kernels / %d dispatches, unfused %d / %d\n", fc->what, f.fs.kernels,
           f.fs.dispatches_per_call, u.fs.kernels, u.fs.dispatches_per_call);
    assert_true(f.fs.planned && u.fs.planned);
    assert_int_equal(f.fs.kernels, fc->fused_kernels);
    assert_int_equal(u.fs.kernels, fc->unfused_kernels);
    /* the group really ran as one dispatch (no fallback to its members) */
    assert_true(f.fs.dispatches_per_call < u.fs.dispatches_per_call);
    assert_true(f.fs.peak_bytes <= u.fs.peak_bytes);
    for (int i = 0; i < fc->n_out; i++) {
        char msg[160];
        assert_int_equal(f.n[i], c.n[i]);
        snprintf(msg, sizeof msg, "%s output %d: fused vs cpu", fc->what, i);
        vt_assert_close_f32(f.out[i], c.out[i], f.n[i], fc->atol, fc->rtol, msg);
        snprintf(msg, sizeof msg, "%s output %d: unfused vs cpu", fc->what, i);
        vt_assert_close_f32(u.out[i], c.out[i], u.n[i], fc->atol, fc->rtol, msg);
        snprintf(msg, sizeof msg, "%s output %d: fused vs unfused", fc->what, i);
        vt_assert_close_f32(f.out[i], u.out[i], f.n[i], 1e-5, 1e-5, msg);
    }
    free_result(&f);
    free_result(&u);
    free_result(&c);
}

static void free_case(fn_case *fc)
{
    for (int i = 0; i < fc->n_in; i++) free(fc->in[i].data);
}

/* ---- bodies -------------------------------------------------------------- */

/* relu(a @ w + bias) */
static vf_status mlp(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[2]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* sigmoid((a @ w) * k + r) and gelu(tanh(...)): several epilogue ops and
   a full-shape extra input; bias after the scale */
static vf_status several(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *z = vf_add(ctx, vf_mul(ctx, vf_matmul(ctx, in[0], in[1]), scalar_k), in[2]);
    out[0] = vf_gelu(ctx, vf_tanh(ctx, vf_sigmoid(ctx, z)));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* h = r * 2 (a graph output and an epilogue input), z = a @ w + h (also a
   graph output), y = relu(z) * k */
static vf_status shared_outputs(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = vf_add(ctx, in[2], in[2]);
    vf_tensor *z = vf_add(ctx, vf_matmul(ctx, in[0], in[1]), h);
    out[0] = vf_mul(ctx, vf_relu(ctx, z), scalar_k);
    out[1] = h;
    out[2] = z;
    return out[0] && out[2] ? VF_OK : vf_status_get(ctx);
}

/* the matmul value read outside the group: y = relu(mm + bias), s = sum(mm, 1) */
static vf_status read_outside(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *mm = vf_matmul(ctx, in[0], in[1]);
    out[0] = vf_relu(ctx, vf_add(ctx, mm, in[2]));
    out[1] = vf_reduce_sum(ctx, mm, 1, (int[]){1}, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* a^T @ w^T + bias, then maximum with 0.1 * itself (leaky relu) */
static vf_status transposed(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *z = vf_add(ctx, vf_matmul_ex(ctx, in[0], in[1], true, true), in[2]);
    out[0] = vf_maximum(ctx, z, vf_mul(ctx, z, scalar_k));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* the operand in its own epilogue, twice an operand: relu(x @ x + x) */
static vf_status self_mm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[0]), in[0]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* a vector operand: relu(v @ w + bias), v [k] */
static vf_status vec_mm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[2]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* bool and where in the epilogue: y = where(z > k, z, z * k), and
   (z > k) cast to f32 */
static vf_status selects(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *z = vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[2]);
    vf_tensor *pos = vf_greater(ctx, z, scalar_k);
    out[0] = vf_where(ctx, pos, z, vf_mul(ctx, z, scalar_k));
    out[1] = vf_cast(ctx, pos, VF_F32);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* f16 storage: casts in, matmul + bias + relu in f16, cast out (the cast
   is an epilogue op with another dtype) */
static vf_status half(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = vf_cast(ctx, in[0], VF_F16), *w = vf_cast(ctx, in[1], VF_F16), *b = vf_cast(ctx, in[2], VF_F16);
    out[0] = vf_cast(ctx, vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, a, w), b)), VF_F32);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* batched, broadcast: a [2,3,m,k] @ w [3,k,n] + bias [3,1,n] (strided
   batch), + r [2,3,m,n] (full batch), tanh */
static vf_status batched(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *z = vf_add(ctx, vf_add(ctx, vf_matmul(ctx, in[0], in[1]), in[2]), in[3]);
    out[0] = vf_tanh(ctx, z);
    return out[0] ? VF_OK : vf_status_get(ctx);
}


/* ---- traced functions on Vulkan ------------------------------------------ */

static void mlp_case(int64_t m, int64_t k, int64_t n, bool bias_2d)
{
    char what[96];
    snprintf(what, sizeof what, "relu(a@w+b) %lldx%lldx%lld bias %s", (long long)m, (long long)k, (long long)n,
             bias_2d ? "[1,N]" : "[N]");
    fn_case fc = {.what = what, .body = mlp, .n_in = 3, .n_out = 1, .fused_kernels = 1, .unfused_kernels = 3,
                  .atol = vt_matmul_atol(k), .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){m, k}, 1);
    new_input(&fc.in[1], 2, (int64_t[]){k, n}, 2);
    if (bias_2d) new_input(&fc.in[2], 2, (int64_t[]){1, n}, 3);
    else new_input(&fc.in[2], 1, (int64_t[]){n}, 3);
    check(&fc);
    free_case(&fc);
}

static void test_bias_relu_sizes(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    mlp_case(1, 1, 1, false);
    mlp_case(3, 5, 7, false);
    mlp_case(3, 5, 7, true);
    mlp_case(127, 129, 65, false);
    mlp_case(127, 129, 65, true);
    mlp_case(256, 256, 256, false);
    /* past 4M multiply-adds: the 16 x 16 register block (smaller products
       get 4 x 4), odd sizes clamp its rows and columns */
    mlp_case(127, 257, 131, false);
    mlp_case(64, 784, 512, true);   /* an MLP layer (vec4 loads and stores) */
}

/* a column bias [M,1] (the row part of the index only) */
static void test_column_bias(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    fn_case fc = {.what = "relu(a@w+b), b [M,1]", .body = mlp, .n_in = 3, .n_out = 1, .fused_kernels = 1,
                  .unfused_kernels = 3, .atol = vt_matmul_atol(27), .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){21, 27}, 36);
    new_input(&fc.in[1], 2, (int64_t[]){27, 18}, 37);
    new_input(&fc.in[2], 2, (int64_t[]){21, 1}, 38);
    check(&fc);
    free_case(&fc);
}

/* NaN and Inf in the bias reach the output as the CPU backend has them. */
static void test_nan_inf(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    fn_case fc = {.what = "relu(a@w+b) NaN/Inf bias", .body = mlp, .n_in = 3, .n_out = 1, .fused_kernels = 1,
                  .unfused_kernels = 3, .atol = vt_matmul_atol(16), .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){9, 16}, 4);
    new_input(&fc.in[1], 2, (int64_t[]){16, 12}, 5);
    new_input(&fc.in[2], 1, (int64_t[]){12}, 6);
    fc.in[2].data[1] = NAN;
    fc.in[2].data[4] = INFINITY;
    fc.in[2].data[7] = -INFINITY;
    fc.in[0].data[3] = INFINITY;   /* row 0: inf * w, of either sign, or NaN */
    check(&fc);
    free_case(&fc);
}

static void test_several_ops(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    fn_case fc = {.what = "gelu(tanh(sigmoid(a@w*k+r)))", .body = several, .n_in = 3, .n_out = 1,
                  .fused_kernels = 1, .unfused_kernels = 6, .atol = vt_matmul_atol(33), .rtol = 2e-5};
    new_input(&fc.in[0], 2, (int64_t[]){37, 33}, 7);
    new_input(&fc.in[1], 2, (int64_t[]){33, 45}, 8);
    new_input(&fc.in[2], 2, (int64_t[]){37, 45}, 9);
    check(&fc);
    free_case(&fc);
}

static void test_group_values_as_outputs(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    /* r+r, matmul, add, relu, mul: one group with three outputs */
    fn_case fc = {.what = "epilogue values as graph outputs", .body = shared_outputs, .n_in = 3, .n_out = 3,
                  .fused_kernels = 1, .unfused_kernels = 5, .atol = vt_matmul_atol(20), .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){19, 20}, 10);
    new_input(&fc.in[1], 2, (int64_t[]){20, 24}, 11);
    new_input(&fc.in[2], 2, (int64_t[]){19, 24}, 12);
    check(&fc);
    free_case(&fc);
}

static void test_matmul_read_outside(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    /* the group (matmul value stored too) and the reduction */
    fn_case fc = {.what = "matmul value read outside", .body = read_outside, .n_in = 3, .n_out = 2,
                  .fused_kernels = 2, .unfused_kernels = 4, .atol = vt_matmul_atol(31) * 8, .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){17, 31}, 13);
    new_input(&fc.in[1], 2, (int64_t[]){31, 23}, 14);
    new_input(&fc.in[2], 1, (int64_t[]){23}, 15);
    check(&fc);
    free_case(&fc);
}

static void test_transposed(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    fn_case fc = {.what = "leaky_relu(a^T@w^T+b)", .body = transposed, .n_in = 3, .n_out = 1, .fused_kernels = 1,
                  .unfused_kernels = 4, .atol = vt_matmul_atol(29), .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){29, 13}, 16);   /* a^T: [13, 29] */
    new_input(&fc.in[1], 2, (int64_t[]){21, 29}, 17);   /* w^T: [29, 21] */
    new_input(&fc.in[2], 1, (int64_t[]){21}, 18);
    check(&fc);
    free_case(&fc);
}

static void test_operand_in_epilogue(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    for (int64_t n = 11; n <= 12; n++) {   /* scalar and vec4 views of x */
        char what[64];
        snprintf(what, sizeof what, "relu(x@x+x) %lldx%lld", (long long)n, (long long)n);
        fn_case fc = {.what = what, .body = self_mm, .n_in = 1, .n_out = 1, .fused_kernels = 1,
                      .unfused_kernels = 3, .atol = vt_matmul_atol(n), .rtol = 1e-5};
        new_input(&fc.in[0], 2, (int64_t[]){n, n}, 32);
        check(&fc);
        free_case(&fc);
    }
}

/* A vector operand: the traced matmul's result is reshaped to drop the
   vector's dim, so the epilogue (of the dropped shape) is a group of its
   own: two dispatches; the result equals the CPU backend. */
static void test_vector_operand(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    tensor_in in[3];
    new_input(&in[0], 1, (int64_t[]){20}, 33);
    new_input(&in[1], 2, (int64_t[]){20, 9}, 34);
    new_input(&in[2], 1, (int64_t[]){9}, 35);
    fn_case fc = {.what = "relu(v@w+b), v a vector", .body = vec_mm, .n_in = 3, .n_out = 1, .atol = vt_matmul_atol(20),
                  .rtol = 1e-5};
    memcpy(fc.in, in, sizeof in);
    result f = {0}, c = {0};
    run(VF_BACKEND_VULKAN, true, &fc, &f);
    run(VF_BACKEND_CPU, true, &fc, &c);
    assert_true(f.fs.planned);
    assert_int_equal(f.fs.dispatches_per_call, 2);
    assert_int_equal(f.n[0], 9);
    vt_assert_close_f32(f.out[0], c.out[0], 9, fc.atol, fc.rtol, "vector operand vs cpu");
    free_result(&f);
    free_result(&c);
    free_case(&fc);
}

static void test_where_bool_cast(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    fn_case fc = {.what = "where(z > k, z, z*k), cast(z > k)", .body = selects, .n_in = 3, .n_out = 2,
                  .fused_kernels = 1, .unfused_kernels = 6, .atol = vt_matmul_atol(24), .rtol = 1e-5};
    new_input(&fc.in[0], 2, (int64_t[]){15, 24}, 29);
    new_input(&fc.in[1], 2, (int64_t[]){24, 16}, 30);
    new_input(&fc.in[2], 2, (int64_t[]){1, 16}, 31);
    check(&fc);
    free_case(&fc);
}

static void test_f16(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    /* three casts, then one group: matmul add relu cast */
    fn_case fc = {.what = "f16 relu(a@w+b)", .body = half, .n_in = 3, .n_out = 1, .fused_kernels = 4,
                  .unfused_kernels = 7, .atol = vt_matmul_atol(40) + 4e-3, .rtol = 2e-3};
    new_input(&fc.in[0], 2, (int64_t[]){35, 40}, 19);
    new_input(&fc.in[1], 2, (int64_t[]){40, 28}, 20);
    new_input(&fc.in[2], 1, (int64_t[]){28}, 21);
    check(&fc);
    free_case(&fc);
}

static void test_batch_broadcast(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    fn_case fc = {.what = "tanh(a@w+b+r) batched", .body = batched, .n_in = 4, .n_out = 1, .fused_kernels = 1,
                  .unfused_kernels = 4, .atol = vt_matmul_atol(14), .rtol = 2e-5};
    new_input(&fc.in[0], 4, (int64_t[]){2, 3, 11, 14}, 22);
    new_input(&fc.in[1], 3, (int64_t[]){3, 14, 10}, 23);
    new_input(&fc.in[2], 3, (int64_t[]){3, 1, 10}, 24);
    new_input(&fc.in[3], 4, (int64_t[]){2, 3, 11, 10}, 25);
    check(&fc);
    free_case(&fc);
}

/* A symbolic batch dim: one trace, one plan per size, each fused. */
static void test_symbolic_batch(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    static const vf_tensor_spec sig[3] = {
        {.dtype = VF_F32, .rank = 3, .shape = {-1, 12, 18}},
        {.dtype = VF_F32, .rank = 2, .shape = {18, 20}},
        {.dtype = VF_F32, .rank = 1, .shape = {20}},
    };
    for (int64_t bsz = 1; bsz <= 3; bsz += 2) {
        char what[64];
        snprintf(what, sizeof what, "relu(a@w+b) symbolic batch %lld", (long long)bsz);
        fn_case fc = {.what = what, .body = mlp, .n_in = 3, .n_out = 1, .signature = sig, .fused_kernels = 1,
                      .unfused_kernels = 3, .atol = vt_matmul_atol(18), .rtol = 1e-5};
        new_input(&fc.in[0], 3, (int64_t[]){bsz, 12, 18}, 26);
        new_input(&fc.in[1], 2, (int64_t[]){18, 20}, 27);
        new_input(&fc.in[2], 1, (int64_t[]){20}, 28);
        check(&fc);
        free_case(&fc);
    }
    /* the same function object across sizes: traced once */
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "mm", .body = mlp, .n_inputs = 3,
                                                                  .n_outputs = 1, .input_signature = sig});
    assert_non_null(fn);
    vf_tensor *w = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){18, 20}, 1);
    vf_tensor *b = vf_random_normal(ctx, VF_F32, 1, (int64_t[]){20}, 2);
    for (int64_t bsz = 2; bsz <= 5; bsz += 3) {
        vf_tensor *a = vf_random_normal(ctx, VF_F32, 3, (int64_t[]){bsz, 12, 18}, 3);
        vf_tensor *out = NULL;
        assert_int_equal(vf_function_call(fn, (vf_tensor *[]){a, w, b}, &out), VF_OK);
        assert_int_equal(vf_tensor_dim(out, 0), bsz);
        vf_tensor *ref = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, a, w), b));   /* eager */
        float *got = vt_read(out), *want = vt_read(ref);
        vt_assert_close_f32(got, want, (size_t)(bsz * 12 * 20), 1e-6, 1e-6, "symbolic batch vs eager");
        free(got);
        free(want);
    }
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_int_equal(fs.traces, 1);
    assert_int_equal(fs.plans, 2);
    assert_int_equal(fs.kernels, 1);
    assert_int_equal(fs.dispatches_per_call, 1);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

int main(void)
{
    pin_vulkan_libraries();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_relu_sizes), cmocka_unit_test(test_column_bias), cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_several_ops),       cmocka_unit_test(test_group_values_as_outputs),
        cmocka_unit_test(test_matmul_read_outside), cmocka_unit_test(test_transposed),
        cmocka_unit_test(test_operand_in_epilogue), cmocka_unit_test(test_vector_operand),
        cmocka_unit_test(test_where_bool_cast), cmocka_unit_test(test_f16),
        cmocka_unit_test(test_batch_broadcast),
        cmocka_unit_test(test_symbolic_batch),
    };
    return VT_RUN_GROUP(tests); /* ctest runs it in shards (tests/CMakeLists.txt) */
}
