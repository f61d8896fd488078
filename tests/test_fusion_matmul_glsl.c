/* The GLSL of matmul groups (VF_GROUP_MATMUL_EPILOGUE), generated straight
 * from hand-built graphs: it compiles for the CPU and the GPU device
 * profiles (f32 and f16, every dtype path of the epilogue, strided batch
 * index), groups a device cannot run fail with VF_ERROR_UNSUPPORTED and a
 * message, and the GPU profile's kernels (shared-memory tiles), run on
 * lavapipe with the GPU profile forced, give the right numbers. The same
 * groups in traced functions: test_fusion_matmul.c. */
#include "testutil.h"
#include "graph_build.h"
#include "vk_test_common.h"

#include "vulkan/codegen/codegen_fused.h"
#include "plan/partition.h"

#include <math.h>
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

static int node(vf_graph *g, vf_node_kind k, vf_op o, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = vf_graph_add(g, k, n_in, in);
    assert_true(id >= 0);
    g->nodes[id].op = o;
    g->nodes[id].attrs.dtype = dt;
    g->nodes[id].dtype = dt;
    g->nodes[id].shape = s;
    if (k == VF_NODE_PARAM) {
        g->nodes[id].index = g->n_params++;
        g->n_explicit = g->n_params;
    }
    return id;
}

/* [2,3,m,k] @ [3,k,n] (b transposed: [3,n,k]) + bias [3,1,n]; where(z > 0,
   z, z * k) with k a scalar param; a bool output (z > 0) and a cast to i32:
   every dtype path of the epilogue and the strided batch index. */
static vf_graph *epilogue_graph(vf_dtype dt, int64_t m, int64_t k, int64_t n)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape o = vt_shape(4, (int64_t[]){2, 3, m, n});
    int a = node(g, VF_NODE_PARAM, 0, 0, NULL, dt, vt_shape(4, (int64_t[]){2, 3, m, k}));
    int b = node(g, VF_NODE_PARAM, 0, 0, NULL, dt, vt_shape(3, (int64_t[]){3, n, k}));
    int bias = node(g, VF_NODE_PARAM, 0, 0, NULL, dt, vt_shape(3, (int64_t[]){3, 1, n}));
    int kk = node(g, VF_NODE_PARAM, 0, 0, NULL, dt, vt_shape(0, NULL));
    int mm = node(g, VF_NODE_OP, VF_OP_MATMUL, 2, (int[]){a, b}, dt, o);
    g->nodes[mm].attrs.trans_b = true;
    int z = node(g, VF_NODE_OP, VF_OP_ADD, 2, (int[]){mm, bias}, dt, o);
    int zero = node(g, VF_NODE_OP, VF_OP_FILL, 0, NULL, dt, o);
    int pos = node(g, VF_NODE_OP, VF_OP_GREATER, 2, (int[]){z, zero}, VF_BOOL, o);
    int sc = node(g, VF_NODE_OP, VF_OP_MUL, 2, (int[]){z, kk}, dt, o);
    int y = node(g, VF_NODE_OP, VF_OP_WHERE, 3, (int[]){pos, z, sc}, dt, o);
    int yi = node(g, VF_NODE_OP, VF_OP_CAST, 1, &y, VF_I32, o);
    assert_true(vf_graph_set_outputs(g, 3, (int[]){y, pos, yi}));
    return g;
}

static void compile_ok(shaderc_compiler_t cc, shaderc_compile_options_t opt, const vf_dispatch *d)
{
    shaderc_compilation_result_t r = shaderc_compile_into_spv(cc, d->glsl, strlen(d->glsl), shaderc_compute_shader,
                                                              d->name, "main", opt);
    bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    if (!ok)
        fprintf(stderr, "---- %s failed to compile:\n%s\n---- source:\n%s\n", d->name,
                shaderc_result_get_error_message(r), d->glsl);
    shaderc_result_release(r);
    assert_true(ok);
}

/* The one matmul group of g: generated for caps, st its status. */
static vf_status gen_group(vf_graph *g, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    vf_shape *shapes = malloc(sizeof *shapes * (size_t)g->n);
    assert_non_null(shapes);
    for (int i = 0; i < g->n; i++) shapes[i] = g->nodes[i].shape;
    vf_partition_t p;
    assert_int_equal(vf_partition(g, NULL, &p, err), VF_OK);
    int found = -1;
    for (int i = 0; i < p.n_groups; i++)
        if (p.groups[i].kind == VF_GROUP_MATMUL_EPILOGUE) {
            assert_int_equal(found, -1);
            found = i;
        }
    assert_true(found >= 0);
    const vf_group *grp = &p.groups[found];
    vf_status st = vt_codegen_group(g, grp, shapes, caps, k, err);
    if (st == VF_OK) {
        assert_int_equal(k->n_steps, 1);
        /* every group tensor bound in order; b (tensor 1) once */
        assert_int_equal(k->step[0].n_bindings, grp->n_inputs + grp->n_outputs);
        for (int j = 0; j < k->step[0].n_bindings; j++) assert_int_equal(k->step[0].binding[j], VF_BIND_GROUP + j);
    }
    vf_partition_free(&p);
    free(shapes);
    return st;
}

static void test_glsl_both_profiles(void **state)
{
    (void)state;
    shaderc_compiler_t cc = shaderc_compiler_initialize();
    shaderc_compile_options_t opt = shaderc_compile_options_initialize();
    assert_true(cc && opt);
    shaderc_compile_options_set_target_env(opt, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    const vf_device_caps *caps[2] = {&caps_cpu, &caps_gpu};
    const vf_dtype dts[2] = {VF_F32, VF_F16};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 2; c++) {
            vf_graph *g = epilogue_graph(dts[d], 9, 16, 12);
            vf_gen_kernel k;
            vf_err err = {0};
            vf_status st = gen_group(g, caps[c], &k, &err);
            if (st) fprintf(stderr, "%s\n", err.message);
            assert_int_equal(st, VF_OK);
            assert_non_null(strstr(k.step[0].glsl, "void epi("));
            assert_non_null(strstr(k.step[0].name, "mmfused"));
            compile_ok(cc, opt, &k.step[0]);
            vf_kernel_free(&k);
            vf_graph_free(g);
        }
    shaderc_compile_options_release(opt);
    shaderc_compiler_release(cc);
}

/* [m,k] @ [k,n] then a chain of unary ops: n_heavy of them call branchy
   prelude helpers (pow, tanh, sqrt), then an add. */
static vf_graph *chain_graph(int n_heavy, int64_t m, int64_t k, int64_t n)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape o = vt_shape(2, (int64_t[]){m, n});
    int a = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(2, (int64_t[]){m, k}));
    int b = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(2, (int64_t[]){k, n}));
    int v = node(g, VF_NODE_OP, VF_OP_MATMUL, 2, (int[]){a, b}, VF_F32, o);
    static const vf_op heavy[3] = {VF_OP_TANH, VF_OP_SQRT, VF_OP_TANH};
    for (int i = 0; i < n_heavy; i++) {
        if (i == 1) v = node(g, VF_NODE_OP, VF_OP_POW, 2, (int[]){v, v}, VF_F32, o);
        else v = node(g, VF_NODE_OP, heavy[i % 3], 1, &v, VF_F32, o);
    }
    v = node(g, VF_NODE_OP, VF_OP_ADD, 2, (int[]){v, a}, VF_F32, o);
    assert_true(vf_graph_set_outputs(g, 1, &v));
    return g;
}

/* The CPU profile's register block per lane (codegen_matmul.c): a small
   product (at most 4M multiply-adds) gets 4 x 4, whose first dispatch
   llvmpipe compiles in a fraction of the 16 x 16 block's time; a larger
   one 16 x 16 (4 rows when M < 16), whatever its epilogue. Stores that are
   not one vec4 each (every epilogue) run in a loop (MM_STORE_LOOP), so an
   epilogue of branchy helpers (pow, tanh, sqrt) is in the kernel once, not
   256 times: repeated, it took lavapipe minutes to compile (the
   differential test's seed 66, test_fusion_random's seed 99). When K is
   a multiple of 4 the k tail loop is left out (MM_K4). */
static void test_lane_block(void **state)
{
    (void)state;
    struct { int heavy; int64_t m, k, n; const char *rm, *cv; } cases[] = {
        {0, 64, 16, 64, "#define RM 4u", "#define CV 1u"},       /* 64K: small */
        {6, 64, 16, 64, "#define RM 4u", "#define CV 1u"},
        {0, 160, 164, 164, "#define RM 16u", "#define CV 4u"},   /* 4.2M: large */
        {6, 256, 256, 256, "#define RM 16u", "#define CV 4u"},
        {0, 8, 1024, 1024, "#define RM 4u", "#define CV 4u"},    /* few rows, large */
        {0, 160, 163, 163, "#define RM 16u", "#define CV 4u"},   /* K % 4 != 0: the k tail */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vf_graph *g = chain_graph(cases[i].heavy, cases[i].m, cases[i].k, cases[i].n);
        vf_gen_kernel k;
        vf_err err = {0};
        vf_status st = gen_group(g, &caps_cpu, &k, &err);
        if (st) fprintf(stderr, "%s\n", err.message);
        assert_int_equal(st, VF_OK);
        const char *glsl = k.step[0].glsl;
        /* vec4 loads of A (K % 4 == 0): no k tail loop (MM_K4) */
        if (!strstr(glsl, "#define MM_K4") != (cases[i].k % 4 != 0))
            fail_msg("case %zu: K = %lld, MM_K4 %s", i, (long long)cases[i].k, cases[i].k % 4 ? "set" : "missing");
        if (!strstr(glsl, cases[i].rm) || !strstr(glsl, cases[i].cv) ||
            !strstr(glsl, "#define MM_STORE_LOOP"))
            fail_msg("case %zu (%lldx%lldx%lld, %d heavy ops): want '%s', '%s' and the store loop in the lane kernel",
                     i, (long long)cases[i].m, (long long)cases[i].k, (long long)cases[i].n, cases[i].heavy,
                     cases[i].rm, cases[i].cv);
        vf_kernel_free(&k);
        vf_graph_free(g);
    }
}

/* f16 on a device without 16-bit storage: UNSUPPORTED with a message (the
   plan then runs the members one by one). */
static void test_unsupported(void **state)
{
    (void)state;
    vf_device_caps no16 = caps_cpu;
    no16.storage16 = false;
    vf_graph *g = epilogue_graph(VF_F16, 4, 4, 4);
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(gen_group(g, &no16, &k, &err), VF_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "16-bit storage"));
    vf_graph_free(g);
    /* a matmul node with a vector operand (its dim dropped from the result) */
    g = vf_graph_new(NULL);
    int v = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(1, (int64_t[]){6}));
    int w = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(2, (int64_t[]){6, 5}));
    int mm = node(g, VF_NODE_OP, VF_OP_MATMUL, 2, (int[]){v, w}, VF_F32, vt_shape(1, (int64_t[]){5}));
    int y = node(g, VF_NODE_OP, VF_OP_RELU, 1, &mm, VF_F32, vt_shape(1, (int64_t[]){5}));
    assert_true(vf_graph_set_outputs(g, 1, &y));
    memset(&err, 0, sizeof err);
    assert_int_equal(gen_group(g, &caps_cpu, &k, &err), VF_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "vector operand"));
    vf_graph_free(g);
}

/* The GPU profile's kernels (shared-memory tiles, barriers) are valid
   Vulkan, only slow on lavapipe: run them there with the device's caps
   but is_cpu off, plain and fused, and check against double references.
   a [2,70,29] @ b [29,67] (2x2 tiles of 64, broadcast batch), + bias [67],
   relu. */
static void dispatch_on(rt_handle *h, const vf_dispatch *d, vf_buffer *const *by_bind, const size_t *bytes,
                        const unsigned *access)
{
    const vf_vk_pipeline *p = NULL;
    vf_status s = vf_vk_runtime_dispatch_pipeline(h->rt, d, &p);
    if (s) fprintf(stderr, "%s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    vf_vk_bind binds[VF_KERNEL_MAX_BINDINGS];
    for (int j = 0; j < d->n_bindings; j++) {
        int id = d->binding[j];
        assert_true(id >= 0 && id < VF_BIND_GROUP + 4 && by_bind[id]);
        binds[j] = (vf_vk_bind){.buf = by_bind[id], .range = bytes[id], .access = access[id]};
    }
    vf_vk_dispatch_info di = {.pipe = p, .n_bindings = d->n_bindings, .bindings = binds, .push = d->push,
                              .push_size = d->push_size, .groups = {d->groups[0], d->groups[1], d->groups[2]},
                              .name = d->name};
    s = vf_vk_sched_dispatch(&h->rt->sched, &di);
    if (s) fprintf(stderr, "%s\n", h->err.message);
    assert_int_equal(s, VF_OK);
}

static void test_gpu_profile_on_lavapipe(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    enum { BT = 2, M = 70, K = 29, N = 67 };
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_device_caps caps = h.rt->dev.caps;
    caps.is_cpu = false;
    float *a = malloc(sizeof(float) * BT * M * K), *b = malloc(sizeof(float) * K * N), bias[N];
    float *got = malloc(sizeof(float) * BT * M * N);
    double *mm = malloc(sizeof(double) * BT * M * N);
    assert_true(a && b && got && mm);
    vt_fill_uniform(a, BT * M * K, -1, 1, 40);
    vt_fill_uniform(b, K * N, -1, 1, 41);
    vt_fill_uniform(bias, N, -1, 1, 42);
    for (int q = 0; q < BT; q++)
        for (int r = 0; r < M; r++)
            for (int c = 0; c < N; c++) {
                double acc = 0;
                for (int x = 0; x < K; x++) acc += (double)a[(q * M + r) * K + x] * b[x * N + c];
                mm[(q * M + r) * N + c] = acc;
            }
    vf_buffer *ba = alloc_upload(&h, a, BT * M * K), *bb = alloc_upload(&h, b, K * N);
    vf_buffer *bbias = alloc_upload(&h, bias, N);
    vf_buffer *by = alloc_upload(&h, NULL, BT * M * N);

    /* the plain matmul op */
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_MATMUL;
    e.n_in = 2;
    e.in[0] = (vf_tref){.dtype = VF_F32, .rank = 3, .shape = {BT, M, K}};
    e.in[1] = (vf_tref){.dtype = VF_F32, .rank = 2, .shape = {K, N}};
    e.out = (vf_tref){.dtype = VF_F32, .rank = 3, .shape = {BT, M, N}};
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(&e, &caps, &k, &err), VF_OK);
    assert_non_null(strstr(k.step[0].name, "tile"));
    vf_buffer *map[VF_BIND_GROUP + 4] = {0};
    size_t bytes[VF_BIND_GROUP + 4] = {0};
    unsigned acc[VF_BIND_GROUP + 4] = {0};
    map[VF_BIND_IN0] = ba, bytes[VF_BIND_IN0] = sizeof(float) * BT * M * K, acc[VF_BIND_IN0] = VF_VK_READ;
    map[VF_BIND_IN1] = bb, bytes[VF_BIND_IN1] = sizeof(float) * K * N, acc[VF_BIND_IN1] = VF_VK_READ;
    map[VF_BIND_OUT] = by, bytes[VF_BIND_OUT] = sizeof(float) * BT * M * N, acc[VF_BIND_OUT] = VF_VK_WRITE;
    dispatch_on(&h, &k.step[0], map, bytes, acc);
    vf_kernel_free(&k);
    assert_int_equal(h.be.iface->download(h.be.self, by, 0, got, sizeof(float) * BT * M * N), VF_OK);
    for (int i = 0; i < BT * M * N; i++) {
        if (fabs(got[i] - mm[i]) > vt_matmul_atol(K)) fprintf(stderr, "tiled matmul [%d]: %g vs %g\n", i, got[i], mm[i]);
        assert_true(fabs(got[i] - mm[i]) <= vt_matmul_atol(K));
    }

    /* the fused group: relu(a @ b + bias) */
    vf_graph *g = vf_graph_new(NULL);
    vf_shape o = vt_shape(3, (int64_t[]){BT, M, N});
    int pa = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(3, (int64_t[]){BT, M, K}));
    int pb = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(2, (int64_t[]){K, N}));
    int pbias = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, vt_shape(1, (int64_t[]){N}));
    int nmm = node(g, VF_NODE_OP, VF_OP_MATMUL, 2, (int[]){pa, pb}, VF_F32, o);
    int z = node(g, VF_NODE_OP, VF_OP_ADD, 2, (int[]){nmm, pbias}, VF_F32, o);
    int y = node(g, VF_NODE_OP, VF_OP_RELU, 1, &z, VF_F32, o);
    assert_true(vf_graph_set_outputs(g, 1, &y));
    assert_int_equal(gen_group(g, &caps, &k, &err), VF_OK);
    assert_non_null(strstr(k.step[0].name, "mmfused3_f32_nn_tile"));
    memset(map, 0, sizeof map);
    map[VF_BIND_GROUP + 0] = ba, bytes[VF_BIND_GROUP + 0] = bytes[VF_BIND_IN0], acc[VF_BIND_GROUP + 0] = VF_VK_READ;
    map[VF_BIND_GROUP + 1] = bb, bytes[VF_BIND_GROUP + 1] = bytes[VF_BIND_IN1], acc[VF_BIND_GROUP + 1] = VF_VK_READ;
    map[VF_BIND_GROUP + 2] = bbias, bytes[VF_BIND_GROUP + 2] = sizeof bias, acc[VF_BIND_GROUP + 2] = VF_VK_READ;
    map[VF_BIND_GROUP + 3] = by, bytes[VF_BIND_GROUP + 3] = bytes[VF_BIND_OUT], acc[VF_BIND_GROUP + 3] = VF_VK_WRITE;
    dispatch_on(&h, &k.step[0], map, bytes, acc);
    vf_kernel_free(&k);
    vf_graph_free(g);
    assert_int_equal(h.be.iface->download(h.be.self, by, 0, got, sizeof(float) * BT * M * N), VF_OK);
    for (int i = 0; i < BT * M * N; i++) {
        double want = mm[i] + bias[i % N];
        want = want < 0 ? 0 : want;
        if (fabs(got[i] - want) > vt_matmul_atol(K)) fprintf(stderr, "tiled fused [%d]: %g vs %g\n", i, got[i], want);
        assert_true(fabs(got[i] - want) <= vt_matmul_atol(K));
    }
    h.be.iface->free(h.be.self, ba);
    h.be.iface->free(h.be.self, bb);
    h.be.iface->free(h.be.self, bbias);
    h.be.iface->free(h.be.self, by);
    free(a), free(b), free(got), free(mm);
    rt_done(&h);
}

int main(void)
{
    pin_vulkan_libraries();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glsl_both_profiles),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_lane_block),
        cmocka_unit_test(test_gpu_profile_on_lavapipe),
    };
    return VT_RUN_GROUP(tests);
}
