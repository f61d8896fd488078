/* Kernel kinds on a device with tiny limits (VKFUSE_TEST_LIMITS,
 * docs/TESTING.md): at most 2 workgroups per dimension (8 per dispatch, so
 * kernels stride over their groups), 64 KiB storage-buffer ranges and 64
 * loop iterations per invocation (reductions split in two steps).
 * Elementwise ops and their fused chains, casts, comparisons, reductions
 * of every kind (rows, columns, all, argmax, norm), transposes, fill and
 * random numbers: eager, traced fused and traced unfused on Vulkan, all
 * equal to the CPU backend (row kernels, matmul and control flow:
 * test_limits_rows.c). A tensor over the storage range fails with a
 * message naming the limit; bad VKFUSE_TEST_LIMITS values fail context
 * creation. Without a device: codegen for lavapipe's real loop limit and a
 * 7 x 7 x 7 grid (2^25-element reductions, 600000-long rows, a matmul
 * with K split over workgroups).
 *
 * The limits are read when a context is made, so the tests set the
 * variable around context creation (lim_context) and unset it after. */
#include "limits_common.h"

#include "vulkan/codegen/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x [R,C], y [C]: a fused chain, broadcast, comparisons, where, casts */
static vf_status p_elementwise(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *y = in[1];
    vf_tensor *h = vf_add(ctx, vf_exp(ctx, vf_mul(ctx, x, lim_scalar(ctx, 0.5f))), y);
    out[0] = vf_tanh(ctx, vf_sub(ctx, vf_mul(ctx, h, h), x));
    vf_tensor *pos = vf_greater(ctx, x, y);
    out[1] = pos;
    out[2] = vf_where(ctx, pos, x, vf_neg(ctx, y));
    out[3] = vf_cast(ctx, vf_cast(ctx, x, VF_F16), VF_F32);
    out[4] = vf_cast(ctx, vf_mul(ctx, x, lim_scalar(ctx, 100.0f)), VF_I32);
    return lim_finish(ctx, out, 5);
}

/* x [R,C]: every reduction kind */
static vf_status p_reduce(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    out[0] = vf_reduce_sum(ctx, x, 0, NULL, false);
    out[1] = vf_reduce_sum(ctx, x, 1, (int[]){0}, false);
    out[2] = vf_reduce_sum(ctx, x, 1, (int[]){1}, false);
    out[3] = vf_reduce_mean(ctx, x, 1, (int[]){1}, true);
    out[4] = vf_reduce_max(ctx, x, 1, (int[]){0}, false);
    out[5] = vf_reduce_min(ctx, x, 0, NULL, false);
    out[6] = vf_argmax(ctx, x, 0);
    out[7] = vf_argmax(ctx, x, 1);
    out[8] = vf_norm(ctx, x);
    vf_tensor *col = vf_reshape(ctx, x, 2, (int64_t[]){(int64_t)R * C, 1});
    out[9] = vf_argmax(ctx, col, 0);
    out[10] = vf_reduce_max(ctx, vf_reshape(ctx, x, 3, (int64_t[]){R / 4, 4, C}), 2, (int[]){0, 2}, false);
    out[11] = vf_reduce_sum(ctx, vf_cast(ctx, vf_mul(ctx, x, lim_scalar(ctx, 10.0f)), VF_I32), 1, (int[]){0}, false);
    return lim_finish(ctx, out, 12);
}

/* x [R,C], z [10,12,13]: transposes (plain and fed by / feeding others) */
static vf_status p_movement(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_transpose(ctx, in[0], (int[]){1, 0});
    out[1] = vf_transpose(ctx, in[1], (int[]){2, 0, 1});
    out[2] = vf_exp(ctx, vf_transpose(ctx, vf_abs(ctx, in[1]), (int[]){1, 2, 0}));
    return lim_finish(ctx, out, 3);
}

/* x [R,C]: fill and random numbers (the same on every backend) */
static vf_status p_sources(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_F32, 2, (int64_t[]){R, C}, 0.25));
    out[1] = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){R, C}, 7);
    out[2] = vf_fill(ctx, VF_I32, 1, (int64_t[]){15000}, 3);
    return lim_finish(ctx, out, 3);
}

static const program programs[] = {
    {"elementwise", p_elementwise, 2, 5, {{VF_F32, 2, {R, C}}, {VF_F32, 1, {C}}}},
    {"reductions", p_reduce, 1, 12, {{VF_F32, 2, {R, C}}}},
    {"movement", p_movement, 2, 3, {{VF_F32, 2, {R, C}}, {VF_F32, 3, {10, 12, 13}}}},
    {"sources", p_sources, 1, 3, {{VF_F32, 2, {R, C}}}},
};

static void test_programs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) lim_check_program(&programs[i], LIMITS);
}

/* A tensor over the (lowered) storage range: a clear error, the context
   still usable. */
static void test_buffer_range(void **state)
{
    (void)state;
    vf_context *ctx = lim_context(LIMITS);
    vf_scope_begin(ctx);
    float *x = calloc(20000, sizeof *x);
    assert_non_null(x);
    vf_tensor *big = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){20000}, x);
    free(x);
    assert_null(big);
    vt_expect_error(ctx, VF_ERROR_UNSUPPORTED, "80000 bytes", "maxStorageBufferRange", "65536", NULL);
    vf_tensor *ok = vf_fill(ctx, VF_F32, 1, (int64_t[]){16384}, 2.0);
    float s = 0;
    assert_int_equal(vf_tensor_read(vf_reduce_sum(ctx, ok, 0, NULL, false), &s, sizeof s), VF_OK);
    assert_float_equal(s, 32768.0, 0);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

static void test_bad_spec(void **state)
{
    (void)state;
    static const char *const bad[] = {"max_groups=0", "max_buffer=12", "max_loop=abc", "speed=9", "max_groups"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("VKFUSE_TEST_LIMITS", bad[i], 1);
        vf_context *ctx = NULL;
        vf_status st = vf_context_create(&(vf_context_desc){.backend = VF_BACKEND_VULKAN}, &ctx);
        unsetenv("VKFUSE_TEST_LIMITS");
        printf("VKFUSE_TEST_LIMITS=%s: %s: %s\n", bad[i], vf_status_name(st), vf_last_error());
        assert_int_not_equal(st, VF_OK);
        assert_null(ctx); /* a failed create hands out nothing (vkfuse.h) */
        assert_non_null(strstr(vf_last_error(), "VKFUSE_TEST_LIMITS"));
    }
}

/* ---- codegen against the limits, without a device ------------------------ */

/* lavapipe's caps with its loop limit, and 7 workgroups per dimension */
static const vf_device_caps caps_lvp = {
    .is_cpu = true, .subgroup_size = 8, .subgroup_arithmetic = true, .subgroup_shuffle = true,
    .max_workgroup_invocations = 1024, .max_workgroup_size = {1024, 1024, 1024},
    .max_workgroup_count = {7, 7, 7}, .shared_memory_bytes = 32768, .max_push_constants = 128,
    .max_storage_buffer_range = 1u << 27, .min_storage_buffer_offset_alignment = 16, .storage16 = true,
    .storage8 = true, .shader_float16 = true, .shader_int8 = true, .max_loop_iterations = 65535};

static vf_tref tref(vf_dtype dt, int rank, const int64_t *shape)
{
    vf_tref t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.rank = rank;
    for (int i = 0; i < rank; i++) t.shape[i] = shape[i];
    return t;
}

static uint32_t push_u32(const vf_dispatch *d, int field)
{
    uint32_t v;
    memcpy(&v, d->push + 4 * field, 4);
    return v;
}

/* every step within 7 workgroups per dimension; past 343 it strides */
static void check_grid(const vf_gen_kernel *k)
{
    for (int i = 0; i < k->n_steps; i++)
        for (int g = 0; g < 3; g++) {
            assert_true(k->step[i].groups[g] >= 1);
            assert_true(k->step[i].groups[g] <= 7);
        }
}

static void gen(const vf_exec *e, vf_gen_kernel *k)
{
    vf_err err = {0};
    vf_status st = vf_codegen_exec(e, &caps_lvp, k, &err);
    if (st) fail_msg("%s: %s", vf_status_name(st), err.message);
    check_grid(k);
}

static void test_codegen_within_limits(void **state)
{
    (void)state;
    vf_gen_kernel k;
    vf_exec e;
    /* elementwise over 2^22: more groups than a 7 x 7 x 7 grid */
    memset(&e, 0, sizeof e);
    e.op = VF_OP_ADD;
    e.n_in = 2;
    e.in[0] = e.in[1] = e.out = tref(VF_F32, 1, (int64_t[]){1 << 22});
    gen(&e, &k);
    assert_non_null(strstr(k.step[0].glsl, "vf_groups"));
    vf_kernel_free(&k);

    /* reduce-all of 2^25 and a column reduction over 200000 rows: each
       invocation's loop within llvmpipe's 65535 iterations */
    const int64_t shapes[2][2] = {{1, 1 << 25}, {200000, 3}};
    const uint32_t masks[2] = {3u, 1u};
    for (int c = 0; c < 2; c++)
        for (int op = 0; op < 2; op++) {
            memset(&e, 0, sizeof e);
            e.op = op ? VF_OP_ARGMAX : VF_OP_REDUCE_SUM;
            e.n_in = 1;
            e.in[0] = tref(VF_F32, 2, shapes[c]);
            if (op) e.attrs.axis = c ? 0 : 1;
            else e.attrs.axes_mask = masks[c];
            e.out = tref(op ? VF_I32 : VF_F32, 1, (int64_t[]){c ? 3 : 1});
            gen(&e, &k);
            assert_int_equal(k.n_steps, 2);
            const vf_dispatch *d = &k.step[0];
            /* push: n_out, n_red, parts, [n_kept,] chunk */
            uint32_t chunk = push_u32(d, c ? 4 : 3), lanes = c ? 1 : d->spec[0];
            printf("%s %s: %u parts of %u over %u lanes\n", op ? "argmax" : "sum", c ? "column" : "all",
                   push_u32(d, 2), chunk, lanes);
            assert_true((chunk + lanes - 1) / lanes <= 65535);
            assert_true(push_u32(d, 2) * chunk >= (uint32_t)(shapes[c][0] * shapes[c][1]) / (c ? 3 : 1));
            vf_kernel_free(&k);
        }

    /* softmax over a row of 600000: three passes within the budget */
    memset(&e, 0, sizeof e);
    e.op = VF_OP_SOFTMAX;
    e.n_in = 1;
    e.attrs.axis = 1;
    e.in[0] = e.out = tref(VF_F32, 2, (int64_t[]){1, 600000});
    gen(&e, &k);
    assert_true(3 * ((600000 + k.step[0].spec[0] - 1) / k.step[0].spec[0]) <= 65535);
    vf_kernel_free(&k);

    /* a matmul with K past the budget: K split over workgroups in chunks of
       at most 65535 loop steps (4 k each), partial sums in the scratch
       buffer, then added in a second step */
    memset(&e, 0, sizeof e);
    e.op = VF_OP_MATMUL;
    e.n_in = 2;
    e.in[0] = tref(VF_F32, 2, (int64_t[]){1, 600000});
    e.in[1] = tref(VF_F32, 2, (int64_t[]){600000, 1});
    e.out = tref(VF_F32, 2, (int64_t[]){1, 1});
    gen(&e, &k);
    assert_int_equal(k.n_steps, 2);
    uint32_t chunks = (uint32_t)(k.scratch_bytes / 4);
    assert_true(chunks >= 3 && chunks <= 4); /* 600000 / 4 = 150000 steps of a lane, at most ~65k per chunk */
    assert_non_null(strstr(k.step[0].glsl, "mm_chunk()"));
    assert_non_null(strstr(k.step[1].glsl, "acc += P[s * total + i]"));
    vf_kernel_free(&k);
}

int main(void)
{
    if (!vt_have_vulkan()) {
        const struct CMUnitTest cg[] = {cmocka_unit_test(test_codegen_within_limits)};
        return cmocka_run_group_tests(cg, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codegen_within_limits),
        cmocka_unit_test(test_programs),
        cmocka_unit_test(test_buffer_range),
        cmocka_unit_test(test_bad_spec),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
