/* Fusion: partitions of hand-built graphs (group counts per pattern), the
 * fused kernels' GLSL compiled with libshaderc for a lavapipe-like and a
 * GPU-like device, and seeded random elementwise DAGs run fused on the
 * Vulkan device and compared with running their nodes one by one on the
 * CPU backend. */
#include "testutil.h"
#include "graph_run.h"
#include "vk_test_common.h"

#include "vulkan/codegen/codegen_fused.h"
#include "plan/partition.h"
#include "util/dtype.h"

#include <math.h>
#include <shaderc/shaderc.h>


static void outputs(vf_graph *g, int n, const int *ids) { assert_true(vf_graph_set_outputs(g, n, ids)); }

/* Groups that contain an OP node: the kernels the partition asks for. */
static int kernel_groups(const vf_graph *g, const vf_partition_t *p)
{
    int c = 0;
    for (int i = 0; i < p->n_groups; i++) {
        bool any = false;
        for (int m = 0; m < p->groups[i].n_nodes; m++) any |= g->nodes[p->groups[i].nodes[m]].kind == VF_NODE_OP;
        c += any;
    }
    return c;
}

static vf_fusion_options opts(bool on)
{
    vf_fusion_options o;
    vf_fusion_options_default(&o);
    o.enabled = on;
    o.fuse_rows = o.fuse_matmul = true;
    return o;
}

static int count_with(const vf_graph *g, bool on, vf_partition_t *keep)
{
    vf_fusion_options o = opts(on);
    vf_partition_t p;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, &o, &p, &err), VF_OK);
    /* every node in exactly one group; groups in a valid order */
    int seen = 0;
    for (int i = 0; i < p.n_groups; i++) {
        seen += p.groups[i].n_nodes;
        for (int k = 0; k < p.groups[i].n_inputs; k++) assert_true(p.group_of[p.groups[i].inputs[k]] < i);
    }
    assert_int_equal(seen, g->n);
    int n = kernel_groups(g, &p);
    if (keep) *keep = p;
    else vf_partition_free(&p);
    return n;
}

static const vf_op chain_ops[8] = {VF_OP_EXP, VF_OP_NEG, VF_OP_TANH, VF_OP_ABS,
                                   VF_OP_SIGMOID, VF_OP_RELU, VF_OP_SIN, VF_OP_COS};

static vf_graph *chain8(void)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(2, (int64_t[]){64, 32});
    int v = vt_param(g, VF_F32, s);
    for (int i = 0; i < 8; i++) v = vt_op(g, chain_ops[i], 1, &v, VF_F32, s);
    outputs(g, 1, &v);
    return g;
}

static void test_chain_and_disabled(void **state)
{
    (void)state;
    vf_graph *g = chain8();
    vf_partition_t p;
    assert_int_equal(count_with(g, true, &p), 1);
    assert_int_equal(p.groups[p.group_of[8]].kind, VF_GROUP_ELEMENTWISE_DAG);
    assert_int_equal(p.groups[p.group_of[8]].n_outputs, 1);
    assert_int_equal(p.groups[p.group_of[8]].n_inputs, 1);
    assert_true(p.groups[p.group_of[8]].may_alias_input);
    vf_partition_free(&p);
    assert_int_equal(count_with(g, false, &p), 8);
    for (int i = 0; i < p.n_groups; i++) {
        assert_int_equal(p.groups[i].kind, VF_GROUP_SINGLE);
        assert_false(p.groups[i].may_alias_input);
    }
    vf_partition_free(&p);
    vf_graph_free(g);
}

static vf_graph *diamond(void)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(2, (int64_t[]){5, 7});
    vf_shape row = vt_shape(1, (int64_t[]){7});
    int x = vt_param(g, VF_F32, s);
    int b = vt_param(g, VF_F32, row);
    int a1 = vt_op(g, VF_OP_EXP, 1, &x, VF_F32, s);
    int a2 = vt_op(g, VF_OP_ADD, 2, (int[]){x, b}, VF_F32, s);   /* broadcast */
    int c = vt_op(g, VF_OP_MUL, 2, (int[]){a1, a2}, VF_F32, s);
    int d = vt_op(g, VF_OP_GREATER, 2, (int[]){c, a1}, VF_BOOL, s);
    int e = vt_op(g, VF_OP_WHERE, 3, (int[]){d, c, a2}, VF_F32, s);
    outputs(g, 2, (int[]){e, a1});   /* two outputs */
    return g;
}

static void test_diamond(void **state)
{
    (void)state;
    vf_graph *g = diamond();
    vf_partition_t p;
    assert_int_equal(count_with(g, true, &p), 1);
    const vf_group *grp = &p.groups[p.group_of[g->n - 1]];
    assert_int_equal(grp->n_nodes, 5);
    assert_int_equal(grp->n_outputs, 2);
    assert_int_equal(grp->n_inputs, 2);
    vf_partition_free(&p);
    vf_graph_free(g);
}

/* {exp, mul} -> sum over `axis` (keepdims) -> {div, sqrt} */
static vf_graph *reduce_middle(int axis)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(2, (int64_t[]){4, 9}), r = vt_shape(2, (int64_t[]){axis ? 4 : 1, axis ? 1 : 9});
    int x = vt_param(g, VF_F32, s);
    int a = vt_op(g, VF_OP_EXP, 1, &x, VF_F32, s);
    int a2 = vt_op(g, VF_OP_MUL, 2, (int[]){a, a}, VF_F32, s);
    int sum = vt_op(g, VF_OP_REDUCE_SUM, 1, &a2, VF_F32, r);
    g->nodes[sum].attrs.axes_mask = 1u << axis;
    g->nodes[sum].attrs.keepdims = true;
    int c = vt_op(g, VF_OP_DIV, 2, (int[]){a2, sum}, VF_F32, s);
    int d = vt_op(g, VF_OP_SQRT, 1, &c, VF_F32, s);
    outputs(g, 1, &d);
    return g;
}

static void test_reduce_in_the_middle(void **state)
{
    (void)state;
    /* not along the last axis: {exp, mul} -> sum -> {div, sqrt}, the
       reduction is a kernel of its own and is not recomputed */
    vf_graph *g = reduce_middle(0);
    vf_partition_t p;
    assert_int_equal(count_with(g, true, &p), 3);
    assert_int_equal(p.groups[p.group_of[2]].n_nodes, 2);
    assert_int_equal(p.groups[p.group_of[3]].kind, VF_GROUP_SINGLE);
    assert_int_equal(p.groups[p.group_of[5]].n_nodes, 2);
    vf_partition_free(&p);
    vf_graph_free(g);
    /* along the last axis: one row group, the sum its center */
    g = reduce_middle(1);
    assert_int_equal(count_with(g, true, &p), 1);
    assert_int_equal(p.groups[p.group_of[3]].kind, VF_GROUP_ROW_EPILOGUE);
    assert_int_equal(p.groups[p.group_of[3]].center, 3);
    assert_int_equal(p.groups[p.group_of[3]].n_nodes, 5);
    assert_false(p.groups[p.group_of[3]].may_alias_input);
    vf_partition_free(&p);
    /* without row fusion: 3 again */
    vf_fusion_options o = opts(true);
    o.fuse_rows = false;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, &o, &p, &err), VF_OK);
    assert_int_equal(kernel_groups(g, &p), 3);
    vf_partition_free(&p);
    vf_graph_free(g);
}

static void test_softmax_and_matmul(void **state)
{
    (void)state;
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(2, (int64_t[]){8, 16});
    int x = vt_param(g, VF_F32, s);
    int k = vt_param(g, VF_F32, vt_shape(0, NULL));
    int a = vt_op(g, VF_OP_MUL, 2, (int[]){x, k}, VF_F32, s);
    int sm = vt_op(g, VF_OP_SOFTMAX, 1, &a, VF_F32, s);
    g->nodes[sm].attrs.axis = 1;
    int y = vt_op(g, VF_OP_LOG, 1, &sm, VF_F32, s);
    outputs(g, 1, &y);
    vf_partition_t p;
    assert_int_equal(count_with(g, true, &p), 1);
    assert_int_equal(p.groups[p.group_of[sm]].kind, VF_GROUP_ROW_EPILOGUE);
    assert_int_equal(p.groups[p.group_of[sm]].center, sm);
    vf_partition_free(&p);
    vf_graph_free(g);

    g = vf_graph_new(NULL);
    vf_shape o = vt_shape(2, (int64_t[]){8, 4});
    int A = vt_param(g, VF_F32, s);
    int B = vt_param(g, VF_F32, vt_shape(2, (int64_t[]){16, 4}));
    int bias = vt_param(g, VF_F32, vt_shape(1, (int64_t[]){4}));
    int mm = vt_op(g, VF_OP_MATMUL, 2, (int[]){A, B}, VF_F32, o);
    int ba = vt_op(g, VF_OP_ADD, 2, (int[]){mm, bias}, VF_F32, o);
    int re = vt_op(g, VF_OP_RELU, 1, &ba, VF_F32, o);
    outputs(g, 1, &re);
    assert_int_equal(count_with(g, true, &p), 1);
    assert_int_equal(p.groups[p.group_of[mm]].kind, VF_GROUP_MATMUL_EPILOGUE);
    vf_partition_free(&p);
    /* default options: what codegen generates, matmul groups included
       (codegen_matmul_fused.c) */
    vf_err err = {0};
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    assert_int_equal(kernel_groups(g, &p), 1);
    vf_partition_free(&p);
    vf_graph_free(g);
}

static void test_side_effect_splits(void **state)
{
    (void)state;
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(1, (int64_t[]){10});
    int x = vt_param(g, VF_F32, s);
    int var = vt_node(g, VF_NODE_CAPTURE, 0, NULL, VF_F32, s);
    g->nodes[var].is_var = true;
    int a = vt_op(g, VF_OP_EXP, 1, &x, VF_F32, s);
    int b = vt_op(g, VF_OP_NEG, 1, &a, VF_F32, s);
    int as = vt_node(g, VF_NODE_ASSIGN, 1, &b, VF_F32, s);
    g->nodes[as].index = 0;
    int c = vt_op(g, VF_OP_ABS, 1, &b, VF_F32, s);
    int d = vt_op(g, VF_OP_ADD, 2, (int[]){c, var}, VF_F32, s);
    outputs(g, 1, &d);
    vf_partition_t p;
    assert_int_equal(count_with(g, true, &p), 2);   /* {exp, neg} | assign | {abs, add} */
    assert_true(p.group_of[a] == p.group_of[b]);
    assert_true(p.group_of[c] == p.group_of[d]);
    assert_true(p.group_of[b] < p.group_of[as] && p.group_of[as] < p.group_of[c]);
    char *txt = vf_partition_to_string(g, &p);
    assert_non_null(txt);
    assert_non_null(strstr(txt, "elementwise_dag"));
    free(txt);
    vf_partition_free(&p);
    vf_graph_free(g);
}

/* ---- GLSL compiles ------------------------------------------------------- */

static const vf_device_caps caps_cpu = {
    .is_cpu = true, .subgroup_size = 8, .subgroup_arithmetic = true, .subgroup_shuffle = true,
    .max_workgroup_invocations = 1024, .max_workgroup_size = {1024, 1024, 1024},
    .max_workgroup_count = {65535, 65535, 65535}, .shared_memory_bytes = 32768, .max_push_constants = 128,
    .max_storage_buffer_range = 1u << 27, .min_storage_buffer_offset_alignment = 16, .storage16 = true,
    .storage8 = true, .shader_float16 = true, .shader_int8 = true};
static const vf_device_caps caps_gpu = {
    .vendor_id = 0x10de, .subgroup_size = 32, .subgroup_arithmetic = true, .subgroup_shuffle = true,
    .max_workgroup_invocations = 1024, .max_workgroup_size = {1024, 1024, 64},
    .max_workgroup_count = {2147483647u, 65535, 65535}, .shared_memory_bytes = 49152,
    .max_push_constants = 256, .max_storage_buffer_range = 1ull << 32,
    .min_storage_buffer_offset_alignment = 16, .storage16 = true, .storage8 = true};

static void compile_ok(const vf_dispatch *d)
{
    shaderc_compiler_t c = shaderc_compiler_initialize();
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(c, d->glsl, strlen(d->glsl), shaderc_compute_shader, d->name, "main", o);
    bool ok = shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success;
    if (!ok) fprintf(stderr, "---- %s:\n%s\n---- source:\n%s\n", d->name, shaderc_result_get_error_message(r), d->glsl);
    shaderc_result_release(r);
    shaderc_compile_options_release(o);
    shaderc_compiler_release(c);
    assert_true(ok);
}

static void compile_groups(vf_graph *g)
{
    vf_shape *shapes = malloc(sizeof *shapes * (size_t)g->n);
    assert_non_null(shapes);
    for (int i = 0; i < g->n; i++) shapes[i] = g->nodes[i].shape;
    vf_partition_t p;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    const vf_device_caps *caps[2] = {&caps_cpu, &caps_gpu};
    for (int i = 0; i < p.n_groups; i++) {
        if (p.groups[i].kind != VF_GROUP_ELEMENTWISE_DAG) continue;
        for (int c = 0; c < 2; c++) {
            vf_gen_kernel k;
            vf_status st = vt_codegen_group(g, &p.groups[i], shapes, caps[c], &k, &err);
            if (st) fprintf(stderr, "%s\n", err.message);
            assert_int_equal(st, VF_OK);
            if (k.n_steps == 0) continue;
            for (int j = 0; j < k.step[0].n_bindings; j++)
                assert_int_equal(k.step[0].binding[j], VF_BIND_GROUP + j);
            compile_ok(&k.step[0]);
            vf_kernel_free(&k);
        }
    }
    vf_partition_free(&p);
    free(shapes);
}

static void test_glsl_compiles(void **state)
{
    (void)state;
    vf_graph *g = chain8();
    compile_groups(g);   /* vec4 path */
    vf_graph_free(g);
    g = diamond();
    compile_groups(g);   /* broadcast, bool, where, two outputs */
    vf_graph_free(g);
}

/* ---- random DAGs: fused on the device vs node by node on the CPU -------- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

/* A DAG of out shape [A, B]: param 0 is [A, B]; other params broadcast.
   Integer DAGs are compared exactly; float ones with a tolerance. */
static vf_graph *random_dag(bool ints)
{
    vf_graph *g = vf_graph_new(NULL);
    int64_t A = 1 + rnd(9), B = 1 + rnd(40);
    vf_shape full = vt_shape(2, (int64_t[]){A, B});
    vf_shape kinds[4] = {full, vt_shape(1, (int64_t[]){B}), vt_shape(2, (int64_t[]){A, 1}), vt_shape(0, NULL)};
    vf_dtype dt = ints ? VF_I32 : VF_F32;
    int n_par = 1 + (int)rnd(3);
    int fullv[32], nf = 0, anyv[48], na = 0;
    for (int i = 0; i < n_par; i++) {
        int v = vt_param(g, dt, i == 0 ? full : kinds[rnd(4)]);
        anyv[na++] = v;
        if (i == 0) fullv[nf++] = v;
    }
    static const vf_op bin_f[] = {VF_OP_ADD, VF_OP_SUB, VF_OP_MUL, VF_OP_MAXIMUM, VF_OP_MINIMUM};
    static const vf_op un_f[] = {VF_OP_NEG, VF_OP_TANH, VF_OP_SIGMOID, VF_OP_RELU, VF_OP_ABS, VF_OP_SIN, VF_OP_COS};
    static const vf_op un_i[] = {VF_OP_NEG, VF_OP_ABS, VF_OP_RELU};
    int n_ops = 1 + (int)rnd(10);
    for (int i = 0; i < n_ops && nf < 30; i++) {
        int a = fullv[rnd((uint32_t)nf)], b = anyv[rnd((uint32_t)na)], v;
        uint32_t r = rnd(10);
        if (r < 4) {
            v = vt_op(g, bin_f[rnd(5)], 2, (int[]){a, b}, dt, full);
        } else if (r < 8) {
            v = ints ? vt_op(g, un_i[rnd(3)], 1, &a, dt, full) : vt_op(g, un_f[rnd(7)], 1, &a, dt, full);
        } else {
            int c = vt_op(g, VF_OP_GREATER, 2, (int[]){a, b}, VF_BOOL, full);
            v = vt_op(g, VF_OP_WHERE, 3, (int[]){c, a, b}, dt, full);
        }
        fullv[nf++] = v;
        anyv[na++] = v;
    }
    int outs[3], no = 0;
    int last = fullv[nf - 1];
    if (ints && rnd(2)) {
        last = vt_op(g, VF_OP_CAST, 1, &last, VF_F32, full);
        g->nodes[last].attrs.dtype = VF_F32;
    }
    outs[no++] = last;
    if (nf > 2 && rnd(2)) outs[no++] = fullv[1 + rnd((uint32_t)(nf - 2))];
    outputs(g, no, outs);
    return g;
}

/* Parameters: i32 in [-20, 20], floats in [-2, 2] (steps of 1e-3). */
static void fill_dag_param(const vf_graph *g, int v, uint8_t *host, void *user)
{
    (void)user;
    int64_t nel = vf_shape_numel(&g->nodes[v].shape);
    for (int64_t i = 0; i < nel; i++)
        vf_store_f64(host, g->nodes[v].dtype, i,
                     g->nodes[v].dtype == VF_I32 ? (double)((int)rnd(41) - 20) : (double)rnd(4001) / 1000.0 - 2.0);
}

static bool dag_close(const vf_graph *g, int o, int64_t i, double want, double got, void *user)
{
    (void)g, (void)o, (void)i, (void)user;
    return fabs(want - got) <= 2e-3 * fmax(1.0, fabs(want));
}

static void test_random_dags(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_backend_t cpu;
    vf_err cerr = {0};
    assert_int_equal(vf_cpu_backend_create(&cerr, &cpu), VF_OK);
    /* up to 300 DAGs (at least 100) within a time budget, halved under the
       sanitizers (vt_seeds): case i is seed i's DAG whatever ran before it */
    vt_seeds sd;
    vt_seeds_init(&sd, 300, 100, 20.0);
    uint64_t seed;
    int fused = 0, cases = 0;
    while (vt_seeds_next(&sd, &seed)) {
        rng_state = 20240611u + (uint32_t)seed * 2654435761u;
        vf_graph *g = random_dag(seed % 3 == 2);
        fused += vt_run_partitioned(&h, &cpu, g, &(vt_graph_run){.fill = fill_dag_param, .close = dag_close, .what = "dag"});
        vf_graph_free(g);
        cases++;
    }
    vt_seeds_report(&sd, "fusion: random DAGs");
    printf("fusion: %d random DAGs, %d fused kernels checked against the CPU backend\n", cases, fused);
    assert_true(fused > cases / 2);
    cpu.iface->destroy(cpu.self);
    rt_done(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain_and_disabled),  cmocka_unit_test(test_diamond),
        cmocka_unit_test(test_reduce_in_the_middle), cmocka_unit_test(test_softmax_and_matmul),
        cmocka_unit_test(test_side_effect_splits),  cmocka_unit_test(test_glsl_compiles),
        cmocka_unit_test(test_random_dags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
