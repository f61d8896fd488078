/* GLSL codegen (src/vulkan/codegen): every op, every dtype it accepts, broadcast
 * patterns, reduction axis sets, row ops along every axis, matmul with
 * transposes / odd sizes / broadcast batches, transposes of every rank —
 * generated for a lavapipe-like and a GPU-like device and compiled with
 * libshaderc (Vulkan 1.2). Also checks the dispatch metadata (push
 * constants, workgroup counts, bindings), UNSUPPORTED for f16 / bool
 * without 16- / 8-bit storage, and that sizes never change the GLSL of a
 * pattern (one pipeline per pattern); the workgroup size is always a
 * specialisation constant within the device's limits (test_vulkan_spec). Numerical results are checked end to
 * end by test_ops (Vulkan vs CPU). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vulkan/codegen/kernel.h"
#include "util/dtype.h"

#include <shaderc/shaderc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const vf_device_caps caps_cpu = {
    .is_cpu = true, .subgroup_size = 8, .subgroup_arithmetic = true, .subgroup_shuffle = true,
    .max_workgroup_invocations = 1024, .max_workgroup_size = {1024, 1024, 1024},
    .max_workgroup_count = {65535, 65535, 65535}, .shared_memory_bytes = 32768, .max_push_constants = 128,
    .max_storage_buffer_range = 1u << 27, .min_storage_buffer_offset_alignment = 16, .storage16 = true,
    .storage8 = true, .shader_float16 = true, .shader_int8 = true};
static const vf_device_caps caps_gpu = {
    .vendor_id = 0x10de, .is_cpu = false, .subgroup_size = 32, .subgroup_arithmetic = true,
    .subgroup_shuffle = true, .max_workgroup_invocations = 1024, .max_workgroup_size = {1024, 1024, 64},
    .max_workgroup_count = {2147483647u, 65535, 65535}, .shared_memory_bytes = 49152,
    .max_push_constants = 256, .max_storage_buffer_range = 1ull << 32,
    .min_storage_buffer_offset_alignment = 16, .storage16 = true, .storage8 = true};
/* no subgroup arithmetic: shared-memory trees */
static const vf_device_caps caps_plain = {
    .is_cpu = false, .subgroup_size = 64, .subgroup_arithmetic = false, .subgroup_shuffle = false,
    .max_workgroup_invocations = 256, .max_workgroup_size = {256, 256, 64},
    .max_workgroup_count = {65535, 65535, 65535}, .shared_memory_bytes = 16384, .max_push_constants = 128,
    .storage16 = true, .storage8 = true};

static const vf_device_caps *const all_caps[] = {&caps_cpu, &caps_gpu, &caps_plain};
#define N_CAPS 3

/* ---- compiling, with a cache of texts already compiled ------------------ */

static shaderc_compiler_t compiler;
static shaderc_compile_options_t options;
static uint64_t *seen;
static size_t n_seen, cap_seen;
static int n_compiled, n_kernels;

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static int setup(void **state)
{
    (void)state;
    compiler = shaderc_compiler_initialize();
    options = shaderc_compile_options_initialize();
    shaderc_compile_options_set_target_env(options, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_optimization_level(options, shaderc_optimization_level_zero);
    return compiler && options ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    shaderc_compile_options_release(options);
    shaderc_compiler_release(compiler);
    free(seen);
    printf("codegen: %d kernels generated, %d distinct shaders compiled\n", n_kernels, n_compiled);
    return 0;
}

static void compile_ok(const vf_dispatch *d)
{
    uint64_t h = fnv(d->glsl);
    for (size_t i = 0; i < n_seen; i++)
        if (seen[i] == h) return;
    shaderc_compilation_result_t r = shaderc_compile_into_spv(compiler, d->glsl, strlen(d->glsl),
                                                              shaderc_compute_shader, d->name, "main", options);
    bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    if (!ok) {
        fprintf(stderr, "---- %s failed to compile:\n%s\n---- source:\n%s\n", d->name,
                shaderc_result_get_error_message(r), d->glsl);
    }
    shaderc_result_release(r);
    assert_true(ok);
    n_compiled++;
    if (n_seen == cap_seen) {
        cap_seen = cap_seen ? 2 * cap_seen : 256;
        seen = realloc(seen, cap_seen * sizeof *seen);
        assert_non_null(seen);
    }
    seen[n_seen++] = h;
}

/* dispatch metadata the runtime relies on */
static void check_kernel(const vf_exec *e, const vf_device_caps *c, const vf_gen_kernel *k)
{
    assert_true(k->n_steps >= 1 && k->n_steps <= VF_KERNEL_MAX_STEPS);
    bool uses_scratch = false, writes_out = false;
    for (int i = 0; i < k->n_steps; i++) {
        const vf_dispatch *d = &k->step[i];
        assert_non_null(d->glsl);
        assert_true(d->name[0] != '\0');
        assert_non_null(strstr(d->glsl, "// vkfuse generated kernel"));
        assert_true(strncmp(d->name, vf_op_get(e->op)->name, 3) == 0 || e->op == VF_OP_SPARSE_XENT);
        assert_true(d->push_size >= 4 && d->push_size <= VF_PUSH_MAX && d->push_size <= c->max_push_constants);
        assert_true(d->push_size % 4 == 0);
        for (int j = 0; j < 3; j++) {
            assert_true(d->groups[j] >= 1);
            assert_true(d->groups[j] <= c->max_workgroup_count[j]);
        }
        /* the workgroup size is specialisation constant 0, within the limits */
        assert_null(strstr(d->glsl, "local_size_x ="));
        assert_non_null(strstr(d->glsl, "local_size_x_id = 0"));
        assert_true(d->n_spec >= 1 && d->n_spec <= VF_KERNEL_MAX_SPEC);
        assert_true(d->spec[0] >= 1 && d->spec[0] <= c->max_workgroup_invocations &&
                    d->spec[0] <= c->max_workgroup_size[0]);
        assert_true(d->n_bindings >= 1 && d->n_bindings <= VF_KERNEL_MAX_BINDINGS);
        for (int j = 0; j < d->n_bindings; j++) {
            int b = d->binding[j];
            assert_true(b == VF_BIND_OUT || b == VF_BIND_SCRATCH || (b >= VF_BIND_IN0 && b < VF_BIND_IN0 + e->n_in));
            for (int t = 0; t < j; t++) assert_int_not_equal(d->binding[t], b);   /* one slot per tensor */
            uses_scratch |= b == VF_BIND_SCRATCH;
            writes_out |= b == VF_BIND_OUT;
        }
        compile_ok(d);
    }
    assert_true(writes_out);
    assert_int_equal(uses_scratch, k->scratch_bytes > 0);
    n_kernels++;
}

static void gen_ok(const vf_exec *e, const vf_device_caps *c)
{
    vf_gen_kernel k;
    vf_err err = {0};
    vf_status st = vf_codegen_exec(e, c, &k, &err);
    if (st != VF_OK) fprintf(stderr, "codegen of %s failed: %s\n", vf_op_get(e->op)->name, err.message);
    assert_int_equal(st, VF_OK);
    check_kernel(e, c, &k);
    vf_kernel_free(&k);
}

static void gen_all_caps(const vf_exec *e)
{
    for (int i = 0; i < N_CAPS; i++) gen_ok(e, all_caps[i]);
}

static vf_tref tref(vf_dtype t, int rank, const int64_t *shape)
{
    vf_tref r;
    memset(&r, 0, sizeof r);
    r.dtype = t;
    r.rank = rank;
    for (int i = 0; i < rank; i++) r.shape[i] = shape[i];
    return r;
}

/* ---- elementwise ---------------------------------------------------------- */

typedef struct { int rank_out; int64_t out[4]; int rank[3]; int64_t in[3][4]; } bshape;

static const bshape patterns[] = {
    {2, {16, 64}, {2, 2, 2}, {{16, 64}, {16, 64}, {16, 64}}},     /* same shape, vec4 */
    {2, {3, 7}, {2, 2, 2}, {{3, 7}, {3, 7}, {3, 7}}},             /* same shape, odd */
    {2, {4, 5}, {2, 1, 2}, {{4, 5}, {5}, {4, 5}}},                /* row broadcast */
    {2, {4, 5}, {2, 2, 0}, {{4, 1}, {4, 5}, {0}}},                /* column broadcast, scalar */
    {0, {0}, {0, 1, 2}, {{0}, {1}, {1, 1}}},                      /* scalars */
    {3, {2, 4, 3}, {3, 2, 1}, {{2, 1, 3}, {4, 1}, {3}}},          /* alternating */
    {4, {2, 3, 4, 8}, {4, 0, 4}, {{2, 3, 4, 8}, {0}, {1, 3, 1, 8}}}, /* scalar + tensor, 16 elems */
};

static vf_dtype result_dtype(const vf_op_info *info, vf_dtype data)
{
    return info->result == VF_RESULT_BOOL ? VF_BOOL : data;
}

static void test_elementwise_all(void **state)
{
    (void)state;
    for (int op = 0; op < VF_OP_COUNT; op++) {
        const vf_op_info *info = vf_op_get((vf_op)op);
        /* user elementwise ops: their expressions are tests/test_user_elementwise.c's */
        if (info->kind != VF_KIND_ELEMENTWISE || op == VF_OP_CAST || op == VF_OP_USER_ELEMENTWISE) continue;
        for (int t = 0; t < VF_DTYPE_COUNT; t++) {
            if (!(info->accepts & VF_M(t))) continue;
            for (size_t p = 0; p < sizeof patterns / sizeof patterns[0]; p++) {
                const bshape *b = &patterns[p];
                vf_exec e;
                memset(&e, 0, sizeof e);
                e.op = (vf_op)op;
                e.n_in = info->arity;
                for (int i = 0; i < e.n_in; i++) {
                    vf_dtype dt = vf_op_input_is_cond((vf_op)op, i) ? VF_BOOL : (vf_dtype)t;
                    e.in[i] = tref(dt, b->rank[i], b->in[i]);
                }
                e.out = tref(result_dtype(info, (vf_dtype)t), b->rank_out, b->out);
                gen_all_caps(&e);
            }
        }
    }
}

static void test_cast_all_pairs(void **state)
{
    (void)state;
    int64_t s1[] = {64}, s2[] = {5, 3};
    for (int a = 0; a < VF_DTYPE_COUNT; a++)
        for (int b = 0; b < VF_DTYPE_COUNT; b++) {
            vf_exec e;
            memset(&e, 0, sizeof e);
            e.op = VF_OP_CAST;
            e.n_in = 1;
            e.attrs.dtype = (vf_dtype)b;
            e.in[0] = tref((vf_dtype)a, 1, s1);
            e.out = tref((vf_dtype)b, 1, s1);
            gen_all_caps(&e);
            e.in[0] = tref((vf_dtype)a, 2, (int64_t[]){5, 1});
            e.out = tref((vf_dtype)b, 2, s2);
            gen_all_caps(&e);
        }
}

static void test_sources(void **state)
{
    (void)state;
    int64_t sh[] = {3, 5}, sh4[] = {64, 4};
    for (int t = 0; t < VF_DTYPE_COUNT; t++) {
        vf_exec e;
        memset(&e, 0, sizeof e);
        e.op = VF_OP_FILL;
        e.attrs.value = -2.5;
        e.out = tref((vf_dtype)t, 2, sh);
        gen_all_caps(&e);
        e.out = tref((vf_dtype)t, 2, sh4);
        gen_all_caps(&e);
        e.out = tref((vf_dtype)t, 0, NULL);
        gen_all_caps(&e);
        if (!vf_dtype_is_float((vf_dtype)t)) continue;
        e.op = VF_OP_RANDOM_NORMAL;
        e.attrs.seed = 0x123456789abcull;
        e.out = tref((vf_dtype)t, 2, sh);
        gen_all_caps(&e);
    }
}

/* the vec4 fast path really is taken, and big tensors get a 2D grid */
static void test_fast_path_and_big_grids(void **state)
{
    (void)state;
    int64_t big[] = {1 << 24};
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_ADD;
    e.n_in = 2;
    e.in[0] = e.in[1] = e.out = tref(VF_F32, 1, big);
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(&e, &caps_cpu, &k, &err), VF_OK);
    assert_non_null(strstr(k.step[0].glsl, "vec4"));
    assert_non_null(strstr(k.step[0].name, "add_f32"));
    vf_kernel_free(&k);

    int64_t huge[] = {1 << 28};   /* bool output: scalar path, 262144 groups */
    e.op = VF_OP_GREATER;
    e.in[0] = e.in[1] = tref(VF_F32, 1, huge);
    e.out = tref(VF_BOOL, 1, huge);
    vf_device_caps small = caps_cpu;
    small.max_workgroup_count[0] = small.max_workgroup_count[1] = 1000;
    assert_int_equal(vf_codegen_exec(&e, &caps_cpu, &k, &err), VF_OK);
    assert_true(k.step[0].groups[1] > 1);
    assert_true((uint64_t)k.step[0].groups[0] * k.step[0].groups[1] * 1024 >= (1u << 28));
    check_kernel(&e, &caps_cpu, &k);
    vf_kernel_free(&k);
    assert_int_equal(vf_codegen_exec(&e, &small, &k, &err), VF_OK);
    assert_true(k.step[0].groups[0] <= 1000 && k.step[0].groups[1] <= 1000);
    vf_kernel_free(&k);
}

/* ---- reductions ----------------------------------------------------------- */

static void test_reductions(void **state)
{
    (void)state;
    int64_t sh[] = {3, 4, 5, 40};
    static const vf_op ops[] = {VF_OP_REDUCE_SUM, VF_OP_REDUCE_MEAN, VF_OP_REDUCE_MAX, VF_OP_REDUCE_MIN, VF_OP_NORM};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        const vf_op_info *info = vf_op_get(ops[o]);
        for (int t = 0; t < VF_DTYPE_COUNT; t++) {
            if (!(info->accepts & VF_M(t))) continue;
            for (uint32_t mask = 0; mask < 16; mask++) {
                vf_exec e;
                memset(&e, 0, sizeof e);
                e.op = ops[o];
                e.n_in = 1;
                e.attrs.axes_mask = mask;
                e.in[0] = tref((vf_dtype)t, 4, sh);
                int64_t os[4];
                int r = 0;
                for (int d = 0; d < 4; d++)
                    if (!(mask >> d & 1)) os[r++] = sh[d];
                e.out = tref((vf_dtype)t, r, os);
                gen_all_caps(&e);
            }
        }
    }
}

static void test_argmax(void **state)
{
    (void)state;
    int64_t sh[] = {3, 70, 5};
    for (int t = 0; t < VF_DTYPE_COUNT; t++) {
        if (!(vf_op_get(VF_OP_ARGMAX)->accepts & VF_M(t))) continue;
        for (int axis = 0; axis < 3; axis++) {
            vf_exec e;
            memset(&e, 0, sizeof e);
            e.op = VF_OP_ARGMAX;
            e.n_in = 1;
            e.attrs.axis = axis;
            e.in[0] = tref((vf_dtype)t, 3, sh);
            int64_t os[2];
            int r = 0;
            for (int d = 0; d < 3; d++)
                if (d != axis) os[r++] = sh[d];
            e.out = tref(VF_I32, 2, os);
            gen_all_caps(&e);
        }
    }
}

/* reduce-all of a big tensor goes through scratch in two steps */
static void test_two_step(void **state)
{
    (void)state;
    int64_t sh[] = {1 << 24}, sh2[] = {4, 1 << 20};
    static const vf_op ops[] = {VF_OP_REDUCE_SUM, VF_OP_REDUCE_MEAN, VF_OP_REDUCE_MAX, VF_OP_NORM, VF_OP_ARGMAX};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int c = 0; c < N_CAPS; c++) {
            vf_exec e;
            memset(&e, 0, sizeof e);
            e.op = ops[o];
            e.n_in = 1;
            e.attrs.axes_mask = 1;
            e.in[0] = tref(VF_F32, 1, sh);
            e.out = tref(ops[o] == VF_OP_ARGMAX ? VF_I32 : VF_F32, 0, NULL);
            vf_gen_kernel k;
            vf_err err = {0};
            assert_int_equal(vf_codegen_exec(&e, all_caps[c], &k, &err), VF_OK);
            assert_int_equal(k.n_steps, 2);
            assert_true(k.scratch_bytes > 0);
            check_kernel(&e, all_caps[c], &k);
            vf_kernel_free(&k);
            e.attrs.axes_mask = 2;
            e.attrs.axis = 1;
            e.in[0] = tref(VF_I32, 2, sh2);
            e.out = tref(ops[o] == VF_OP_ARGMAX ? VF_I32 : VF_I32, 1, sh2);
            if (ops[o] == VF_OP_REDUCE_MEAN || ops[o] == VF_OP_NORM) e.in[0].dtype = e.out.dtype = VF_F16;
            if (ops[o] == VF_OP_ARGMAX) e.out.dtype = VF_I32;
            gen_all_caps(&e);
        }
}

/* ---- row ops ---------------------------------------------------------------- */

static void test_row_ops(void **state)
{
    (void)state;
    int64_t sh[] = {6, 100, 3};
    static const vf_op ops[] = {VF_OP_SOFTMAX, VF_OP_LOG_SOFTMAX};
    for (size_t o = 0; o < 2; o++)
        for (int t = VF_F32; t <= VF_F16; t++)
            for (int axis = 0; axis < 3; axis++) {
                vf_exec e;
                memset(&e, 0, sizeof e);
                e.op = ops[o];
                e.n_in = 1;
                e.attrs.axis = axis;
                e.in[0] = e.out = tref((vf_dtype)t, 3, sh);
                gen_all_caps(&e);
            }
    int64_t lab[] = {4, 6}, logits[] = {4, 6, 1000};
    for (int lt = VF_I32; lt <= VF_U32; lt++)
        for (int t = VF_F32; t <= VF_F16; t++) {
            vf_exec e;
            memset(&e, 0, sizeof e);
            e.op = VF_OP_SPARSE_XENT;
            e.n_in = 2;
            e.in[0] = tref((vf_dtype)lt, 2, lab);
            e.in[1] = tref((vf_dtype)t, 3, logits);
            e.out = tref((vf_dtype)t, 2, lab);
            gen_all_caps(&e);
        }
}

/* the register row kernel's mapping on a CPU device: one subgroup of 8
   lanes per row (no barrier), RK = the row's vec4 over the 8 lanes, rows
   up to 2048 floats; longer rows and GPUs take the row template. Two or
   four subgroups per row (RK <= 16, barriers through shared memory) ran
   slower on llvmpipe (docs/BENCHMARKS.md, "Eager softmax on lavapipe").
   A workgroup holds RPW = 8 such rows (64 invocations, each subgroup on
   its own row): fewer when the rows would not make two workgroups. */
static void test_row_reg_mapping(void **state)
{
    (void)state;
    static const struct {
        int64_t rows, len;
        uint32_t rk;   /* 0: not the register variant */
        uint32_t rpw;
    } cases[] = {{2048, 4, 1, 8},     {2048, 512, 16, 8}, {2048, 516, 17, 8}, {2048, 1024, 32, 8},
                 {2048, 1028, 33, 8}, {2048, 2048, 64, 8}, {2048, 2052, 0, 0}, {2048, 1022, 0, 0},
                 {2049, 1024, 32, 8}, {16, 1024, 32, 8},  {15, 64, 2, 4},     {3, 64, 2, 1},
                 {1, 1024, 32, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int lg = 0; lg < 2; lg++) {
            vf_exec e;
            memset(&e, 0, sizeof e);
            e.op = lg ? VF_OP_LOG_SOFTMAX : VF_OP_SOFTMAX;
            e.n_in = 1;
            e.attrs.axis = 1;
            e.in[0] = e.out = tref(VF_F32, 2, (int64_t[]){cases[i].rows, cases[i].len});
            for (int c = 0; c < 2; c++) {
                vf_gen_kernel k;
                vf_err err = {0};
                assert_int_equal(vf_codegen_exec(&e, c ? &caps_gpu : &caps_cpu, &k, &err), VF_OK);
                check_kernel(&e, c ? &caps_gpu : &caps_cpu, &k);
                compile_ok(&k.step[0]);
                const vf_dispatch *d = &k.step[0];
                bool reg = strstr(d->name, "_reg") != NULL;
                if (c || !cases[i].rk) {
                    assert_false(reg);
                } else {
                    assert_true(reg);
                    assert_int_equal(d->n_spec, 3);   /* WG, RK, RPW */
                    assert_int_equal(d->spec[0], 8 * cases[i].rpw);
                    assert_int_equal(d->spec[1], cases[i].rk);
                    assert_int_equal(d->spec[2], cases[i].rpw);
                    uint64_t groups = (uint64_t)d->groups[0] * d->groups[1] * d->groups[2];
                    assert_int_equal(groups, (cases[i].rows + cases[i].rpw - 1) / cases[i].rpw);
                }
                vf_kernel_free(&k);
            }
        }
}

/* ---- matmul ------------------------------------------------------------------ */

static void matmul_case(vf_dtype t, bool ta, bool tb, int ra, const int64_t *ba, int rb, const int64_t *bb,
                        int ro, const int64_t *bo, int64_t m, int64_t n, int64_t k)
{
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_MATMUL;
    e.n_in = 2;
    e.attrs.trans_a = ta;
    e.attrs.trans_b = tb;
    int64_t sa[8], sb[8], so[8];
    memcpy(sa, ba, sizeof(int64_t) * (size_t)ra);
    memcpy(sb, bb, sizeof(int64_t) * (size_t)rb);
    memcpy(so, bo, sizeof(int64_t) * (size_t)ro);
    sa[ra] = ta ? k : m;
    sa[ra + 1] = ta ? m : k;
    sb[rb] = tb ? n : k;
    sb[rb + 1] = tb ? k : n;
    so[ro] = m;
    so[ro + 1] = n;
    e.in[0] = tref(t, ra + 2, sa);
    e.in[1] = tref(t, rb + 2, sb);
    e.out = tref(t, ro + 2, so);
    gen_all_caps(&e);
}

static void test_matmul(void **state)
{
    (void)state;
    static const int64_t sizes[][3] = {{64, 64, 64}, {1, 1, 1}, {7, 7, 7}, {1000, 1, 7}, {7, 1000, 1}, {33, 12, 1000}};
    int64_t none[1] = {0};
    for (int t = VF_F32; t <= VF_F16; t++)
        for (int tr = 0; tr < 4; tr++)
            for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
                matmul_case((vf_dtype)t, tr & 1, tr & 2, 0, none, 0, none, 0, none, sizes[s][0], sizes[s][1],
                            sizes[s][2]);
    /* broadcast batch dims: [2,1,3] x [4,1] -> [2,4,3] */
    int64_t ba[] = {2, 1, 3}, bb[] = {4, 1}, bo[] = {2, 4, 3};
    matmul_case(VF_F32, false, false, 3, ba, 2, bb, 3, bo, 16, 32, 8);
    matmul_case(VF_F32, true, false, 3, ba, 2, bb, 3, bo, 5, 9, 3);
    int64_t b6[] = {2, 2, 2, 2, 2, 2}, b6x[] = {2, 1, 2, 1, 2, 1};
    matmul_case(VF_F32, false, true, 6, b6, 6, b6x, 6, b6, 8, 8, 8);
}

/* ---- transpose ---------------------------------------------------------------- */

static void test_transpose(void **state)
{
    (void)state;
    uint64_t rng = 12345;
    for (int rank = 1; rank <= VF_MAX_RANK; rank++)
        for (int t = 0; t < VF_DTYPE_COUNT; t++)
            for (int rep = 0; rep < 3; rep++) {
                vf_exec e;
                memset(&e, 0, sizeof e);
                e.op = VF_OP_TRANSPOSE;
                e.n_in = 1;
                int64_t sh[VF_MAX_RANK], os[VF_MAX_RANK];
                int perm[VF_MAX_RANK];
                for (int d = 0; d < rank; d++) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    sh[d] = 1 + (int64_t)((rng >> 33) % 4);
                    perm[d] = d;
                }
                for (int d = rank - 1; d > 0; d--) {   /* Fisher-Yates */
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    int j = (int)((rng >> 33) % (uint64_t)(d + 1));
                    int x = perm[d];
                    perm[d] = perm[j];
                    perm[j] = x;
                }
                for (int d = 0; d < rank; d++) {
                    os[d] = sh[perm[d]];
                    e.attrs.perm[d] = perm[d];
                }
                e.in[0] = tref((vf_dtype)t, rank, sh);
                e.out = tref((vf_dtype)t, rank, os);
                gen_all_caps(&e);
            }
}

/* ---- device limits and pipeline sharing ------------------------------------------ */

static void expect_unsupported(const vf_exec *e, const vf_device_caps *c, const char *word)
{
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(e, c, &k, &err), VF_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err.message, vf_op_get(e->op)->name));
    assert_non_null(strstr(err.message, word));
    assert_int_equal(k.n_steps, 0);
}

static void test_unsupported_storage(void **state)
{
    (void)state;
    vf_device_caps no16 = caps_cpu, no8 = caps_cpu;
    no16.storage16 = false;
    no8.storage8 = false;
    int64_t sh[] = {8, 8};
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_ADD;
    e.n_in = 2;
    e.in[0] = e.in[1] = e.out = tref(VF_F16, 2, sh);
    expect_unsupported(&e, &no16, "f16");
    e.op = VF_OP_MATMUL;
    expect_unsupported(&e, &no16, "16-bit");
    e.op = VF_OP_SOFTMAX;
    e.n_in = 1;
    expect_unsupported(&e, &no16, "f16");
    e.op = VF_OP_GREATER;
    e.n_in = 2;
    e.in[0] = e.in[1] = tref(VF_F32, 2, sh);
    e.out = tref(VF_BOOL, 2, sh);
    expect_unsupported(&e, &no8, "bool");
    gen_ok(&e, &no16);   /* f32 -> bool needs no 16-bit storage */
}

static char *glsl_of(const vf_exec *e, const vf_device_caps *c, int step)
{
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(e, c, &k, &err), VF_OK);
    char *s = k.step[step].glsl;
    k.step[step].glsl = NULL;
    vf_kernel_free(&k);
    return s;
}

static void same_glsl(const vf_exec *a, const vf_exec *b)
{
    for (int c = 0; c < N_CAPS; c++) {
        char *x = glsl_of(a, all_caps[c], 0), *y = glsl_of(b, all_caps[c], 0);
        assert_string_equal(x, y);
        free(x);
        free(y);
    }
}

static void test_one_pipeline_per_pattern(void **state)
{
    (void)state;
    vf_exec a, b;
    memset(&a, 0, sizeof a);
    a.op = VF_OP_ADD;
    a.n_in = 2;
    b = a;
    a.in[0] = a.out = tref(VF_F32, 2, (int64_t[]){4, 1024});
    a.in[1] = tref(VF_F32, 1, (int64_t[]){1024});
    b.in[0] = b.out = tref(VF_F32, 3, (int64_t[]){1, 12, 100});
    b.in[1] = tref(VF_F32, 2, (int64_t[]){1, 100});
    same_glsl(&a, &b);
    a.in[1] = a.in[0];   /* same shapes, vec4 */
    b.in[0] = b.in[1] = b.out = tref(VF_F32, 1, (int64_t[]){1 << 20});
    same_glsl(&a, &b);

    a.op = b.op = VF_OP_REDUCE_SUM;
    a.n_in = b.n_in = 1;
    a.attrs.axes_mask = b.attrs.axes_mask = 2;
    a.in[0] = tref(VF_F32, 2, (int64_t[]){10, 300});
    a.out = tref(VF_F32, 1, (int64_t[]){10});
    b.in[0] = tref(VF_F32, 2, (int64_t[]){20, 5000});
    b.out = tref(VF_F32, 1, (int64_t[]){20});
    same_glsl(&a, &b);

    /* softmax: rows of a multiple of 4 that fit the lanes' registers take
       the register variant (its size a specialisation constant), others
       the row template; within each, one GLSL for every size */
    a.op = b.op = VF_OP_SOFTMAX;
    a.attrs.axis = b.attrs.axis = 1;
    b.in[0] = tref(VF_F32, 2, (int64_t[]){20, 1000});
    a.out = a.in[0];
    b.out = b.in[0];
    same_glsl(&a, &b);
    a.in[0] = a.out = tref(VF_F32, 2, (int64_t[]){10, 301});
    b.in[0] = b.out = tref(VF_F32, 2, (int64_t[]){20, 5000});
    same_glsl(&a, &b);

    a.op = b.op = VF_OP_MATMUL;
    a.n_in = b.n_in = 2;
    /* sizes are push constants within a block class: products past 4M
       multiply-adds share one kernel (those up to 4M share the 4 x 4 one) */
    a.in[0] = tref(VF_F32, 2, (int64_t[]){64, 1040});
    a.in[1] = tref(VF_F32, 2, (int64_t[]){1040, 64});
    a.out = tref(VF_F32, 2, (int64_t[]){64, 64});
    b.in[0] = tref(VF_F32, 2, (int64_t[]){128, 512});
    b.in[1] = tref(VF_F32, 2, (int64_t[]){512, 256});
    b.out = tref(VF_F32, 2, (int64_t[]){128, 256});
    same_glsl(&a, &b);
    a.in[0] = a.in[1] = a.out = tref(VF_F32, 2, (int64_t[]){64, 64});
    b.in[0] = tref(VF_F32, 2, (int64_t[]){16, 1024});
    b.in[1] = tref(VF_F32, 2, (int64_t[]){1024, 128});
    b.out = tref(VF_F32, 2, (int64_t[]){16, 128});
    same_glsl(&a, &b);
}

static void test_templates_embedded(void **state)
{
    (void)state;
    static const char *const names[] = {"prelude.glsl", "philox.glsl", "reduce.glsl", "softmax.glsl",
                                        "matmul_lane.glsl", "matmul_tiled.glsl"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) assert_non_null(vf_shader_template(names[i]));
    assert_null(vf_shader_template("nope.glsl"));
    assert_non_null(strstr(vf_shader_template("philox.glsl"), "umulExtended"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_templates_embedded),
        cmocka_unit_test(test_elementwise_all),
        cmocka_unit_test(test_cast_all_pairs),
        cmocka_unit_test(test_sources),
        cmocka_unit_test(test_fast_path_and_big_grids),
        cmocka_unit_test(test_reductions),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_two_step),
        cmocka_unit_test(test_row_ops),
        cmocka_unit_test(test_row_reg_mapping),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_unsupported_storage),
        cmocka_unit_test(test_one_pipeline_per_pattern),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
