/* Row kernels, matmul and control flow on a device with tiny limits
 * (VKFUSE_TEST_LIMITS, docs/TESTING.md; the rest of the kernel kinds:
 * test_limits.c): at most 2 workgroups per dimension, 64 KiB bindings and
 * 64 loop iterations per invocation, so softmax rows take wide workgroups,
 * softmax along a leading axis a workgroup per strided row and every kernel
 * strides over its groups. softmax / log_softmax / cross-entropy along the
 * last and a leading axis, fused row groups (layer norm, softmax), matmul
 * (plain, transposed, batched, with an epilogue; and with K past the loop
 * budget, split over workgroups) and a traced vf_cond:
 * eager, traced fused and traced unfused on Vulkan, all equal to the CPU
 * backend. */
#include "limits_common.h"

#include <stdio.h>

/* x [R,C], labels [R]: row ops along both axes, a composed layer norm */
static vf_status p_rows(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *labels = in[1];
    out[0] = vf_softmax(ctx, x, -1);
    out[1] = vf_log_softmax(ctx, x, -1);
    out[2] = vf_softmax(ctx, x, 0);
    out[3] = vf_log_softmax(ctx, x, 0);
    out[4] = vf_sparse_softmax_cross_entropy(ctx, labels, x);
    vf_tensor *mean = vf_reduce_mean(ctx, x, 1, (int[]){-1}, true);
    vf_tensor *d = vf_sub(ctx, x, mean);
    vf_tensor *var = vf_reduce_mean(ctx, vf_mul(ctx, d, d), 1, (int[]){-1}, true);
    out[5] = vf_mul(ctx, d, vf_rsqrt(ctx, vf_add(ctx, var, lim_scalar(ctx, 1e-5f))));
    /* a composed softmax: max, exp, sum, divide in one row group */
    vf_tensor *e = vf_exp(ctx, vf_sub(ctx, x, vf_reduce_max(ctx, x, 1, (int[]){-1}, true)));
    out[6] = vf_div(ctx, e, vf_reduce_sum(ctx, e, 1, (int[]){-1}, true));
    return lim_finish(ctx, out, 7);
}

/* a [64,50], b [50,90], bias [90]: plain, both transposed, an epilogue */
static vf_status p_matmul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = in[0], *b = in[1];
    out[0] = vf_matmul(ctx, a, b);
    out[1] = vf_matmul_ex(ctx, b, a, true, true);
    out[2] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, a, b), in[2]));
    return lim_finish(ctx, out, 3);
}

/* p [3,20,30], q [3,30,25]: batched */
static vf_status p_batched(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_matmul(ctx, in[0], in[1]);
    out[1] = vf_sigmoid(ctx, vf_matmul_ex(ctx, in[1], in[0], true, true));
    return lim_finish(ctx, out, 2);
}

/* a [16,KL], b [KL,20], bias [20] with KL past the loop budget (64 here):
   K split over workgroups, partial sums added in a second step, where the
   epilogue (bias, relu) applies once */
enum { KL = 600 }; /* every tensor within the 64 KiB bindings */
static vf_status p_long_k(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *a = in[0], *b = in[1];
    out[0] = vf_matmul(ctx, a, b);
    out[1] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, a, b), in[2]));
    out[2] = vf_matmul_ex(ctx, b, a, true, true);
    return lim_finish(ctx, out, 3);
}

/* p [2,8,KL], q [2,KL,12]: batched, with a sigmoid epilogue */
static vf_status p_long_k_batched(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_matmul(ctx, in[0], in[1]);
    out[1] = vf_sigmoid(ctx, vf_matmul(ctx, in[0], in[1]));
    return lim_finish(ctx, out, 2);
}

/* guarded dispatches: big branches of a traced vf_cond run as indirect
   dispatches whose counts come from the kernels */
static vf_status br_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_softmax(ctx, vf_mul(ctx, in[0], in[0]), -1);
    return lim_finish(ctx, out, 1);
}

static vf_status br_else(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *t = vf_transpose(ctx, in[0], (int[]){1, 0});
    out[0] = vf_transpose(ctx, vf_exp(ctx, vf_neg(ctx, vf_abs(ctx, t))), (int[]){1, 0});
    return lim_finish(ctx, out, 1);
}

/* x [R,C], s []: cond(sum(x) * s > 0) */
static vf_status p_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *pred = vf_greater(ctx, vf_mul(ctx, vf_reduce_sum(ctx, in[0], 0, NULL, false), in[1]), lim_scalar(ctx, 0));
    vf_status st = vf_cond(ctx, pred, br_then, br_else, 1, in, 1, out, NULL);
    return st ? st : lim_finish(ctx, out, 1);
}

static const program programs[] = {
    {"rows", p_rows, 2, 7, {{VF_F32, 2, {R, C}}, {VF_I32, 1, {R}}}},
    {"matmul", p_matmul, 3, 3, {{VF_F32, 2, {64, 50}}, {VF_F32, 2, {50, 90}}, {VF_F32, 1, {90}}}},
    {"batched matmul", p_batched, 2, 2, {{VF_F32, 3, {3, 20, 30}}, {VF_F32, 3, {3, 30, 25}}}},
    {"cond", p_cond, 2, 1, {{VF_F32, 2, {R, C}}, {VF_F32, 0, {0}}}},
    {"long-K matmul", p_long_k, 3, 3, {{VF_F32, 2, {16, KL}}, {VF_F32, 2, {KL, 20}}, {VF_F32, 1, {20}}}},
    {"long-K batched matmul", p_long_k_batched, 2, 2, {{VF_F32, 3, {2, 8, KL}}, {VF_F32, 3, {2, KL, 12}}}},
};

static void test_programs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) lim_check_program(&programs[i], LIMITS);
}

int main(void)
{
    if (!vt_have_vulkan()) {
        printf("no Vulkan: nothing to run\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_programs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
