/* Workgroup sizes as specialisation constants (vulkan/codegen/kernel.h).
 *
 *  - The GLSL of every kernel kind (elementwise, fused elementwise DAG,
 *    broadcast, reduction along a row and down columns, softmax, fused row
 *    group, transpose, random_normal, matmul and its fused epilogue) has no
 *    numeric local size and is the same text for devices with different
 *    workgroup limits and subgroup sizes (the CPU and GPU tuning profiles
 *    too, except matmul, whose template is per profile); only the
 *    specialisation values differ, and they respect each device's limits.
 *  - The same graphs, generated for two devices with different limits (the
 *    lavapipe caps and the same with 64 invocations; the GPU profile with
 *    1024 and with 64), run on lavapipe with each set of values: one SPIR-V
 *    per kernel, two pipelines, results equal to the CPU backend.
 *  - The pipeline cache tells specialisation values apart (the shader
 *    cache does not: one compile), and a workgroup size over the device's
 *    limits is VF_ERROR_UNSUPPORTED with a message, not a validation error.
 */
#include "vk_test_common.h"

#include "graph_run.h"
#include "util/dtype.h"

#include <math.h>

/* ---- graphs ---------------------------------------------------------------- */

static vf_shape shp(int rank, const int64_t *d)
{
    vf_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++) s.dim[i] = d[i];
    return s;
}

static int add_node(vf_graph *g, vf_node_kind k, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = vf_graph_add(g, k, n_in, in);
    assert_true(id >= 0);
    g->nodes[id].dtype = dt;
    g->nodes[id].shape = s;
    return id;
}

static int param(vf_graph *g, vf_shape s)
{
    int id = add_node(g, VF_NODE_PARAM, 0, NULL, VF_F32, s);
    g->nodes[id].index = g->n_params++;
    g->n_explicit = g->n_params;
    return id;
}

static int op(vf_graph *g, vf_op o, int n_in, const int *in, vf_shape s)
{
    int id = add_node(g, VF_NODE_OP, n_in, in, VF_F32, s);
    g->nodes[id].op = o;
    g->nodes[id].attrs.dtype = VF_F32;
    return id;
}

static int op1(vf_graph *g, vf_op o, int a, vf_shape s) { return op(g, o, 1, &a, s); }
static int op2(vf_graph *g, vf_op o, int a, int b, vf_shape s) { return op(g, o, 2, (int[]){a, b}, s); }

static int reduce(vf_graph *g, vf_op o, int x, int axis, bool keep)
{
    vf_shape s = g->nodes[x].shape;
    if (keep) {
        s.dim[axis] = 1;
    } else {
        for (int d = axis; d + 1 < s.rank; d++) s.dim[d] = s.dim[d + 1];
        s.rank--;
    }
    int id = op1(g, o, x, s);
    g->nodes[id].attrs.axes_mask = 1u << axis;
    g->nodes[id].attrs.keepdims = keep;
    return id;
}

/* One of every kernel kind: a fused DAG with a broadcast input, column and
   row reductions, softmax, transpose, matmul + bias, random_normal. */
static vf_graph *graph_mixed(void)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(2, (int64_t[]){37, 300});
    int x = param(g, s), b = param(g, shp(1, (int64_t[]){300}));
    int w = param(g, shp(2, (int64_t[]){300, 45})), bias = param(g, shp(1, (int64_t[]){45}));
    int u = op1(g, VF_OP_EXP, op2(g, VF_OP_MUL, x, b, s), s);
    int cs = reduce(g, VF_OP_REDUCE_SUM, u, 0, false);
    int rm = reduce(g, VF_OP_REDUCE_MAX, x, 1, false);
    int sm = op1(g, VF_OP_SOFTMAX, x, s);
    g->nodes[sm].attrs.axis = 1;
    int tr = op1(g, VF_OP_TRANSPOSE, u, shp(2, (int64_t[]){300, 37}));
    g->nodes[tr].attrs.perm[0] = 1;
    vf_shape ms = shp(2, (int64_t[]){37, 45});
    int mm = op2(g, VF_OP_MATMUL, x, w, ms);
    int mb = op1(g, VF_OP_RELU, op2(g, VF_OP_ADD, mm, bias, ms), ms);
    int rn = op(g, VF_OP_RANDOM_NORMAL, 0, NULL, shp(1, (int64_t[]){1001}));
    g->nodes[rn].attrs.seed = 7;
    int outs[] = {cs, rm, sm, tr, mb, rn};
    assert_true(vf_graph_set_outputs(g, 6, outs));
    return g;
}

/* Composed softmax exp(x - max(x)) / sum(...) over two row shapes: rows
   that fit the per-invocation caches and rows that do not. */
static vf_graph *graph_rows(void)
{
    vf_graph *g = vf_graph_new(NULL);
    int outs[2];
    static const int64_t rows[2] = {5, 3}, cols[2] = {1000, 3000};
    for (int i = 0; i < 2; i++) {
        vf_shape s = shp(2, (int64_t[]){rows[i], cols[i]});
        int x = param(g, s);
        int m = reduce(g, VF_OP_REDUCE_MAX, x, 1, true);
        int e = op1(g, VF_OP_EXP, op2(g, VF_OP_SUB, x, m, s), s);
        outs[i] = op2(g, VF_OP_DIV, e, reduce(g, VF_OP_REDUCE_SUM, e, 1, true), s);
    }
    assert_true(vf_graph_set_outputs(g, 2, outs));
    return g;
}

/* ---- generating every kernel of a graph for a device ------------------------ */

#define MAX_DISPATCHES 32

typedef struct gen_log {
    int n;
    char *glsl[MAX_DISPATCHES];
    char name[MAX_DISPATCHES][64];
    uint32_t n_spec[MAX_DISPATCHES], spec[MAX_DISPATCHES][VF_KERNEL_MAX_SPEC];
} gen_log;

static void log_free(gen_log *l)
{
    for (int i = 0; i < l->n; i++) free(l->glsl[i]);
    memset(l, 0, sizeof *l);
}

/* The GLSL rules of kernel.h, and the values within the caps' limits. */
static void check_dispatch(const vf_dispatch *d, const vf_device_caps *c)
{
    assert_null(strstr(d->glsl, "local_size_x ="));
    assert_non_null(strstr(d->glsl, "layout(local_size_x_id = 0"));
    assert_true(d->n_spec >= 1 && d->n_spec <= VF_KERNEL_MAX_SPEC);
    assert_true(d->spec[0] >= 1);
    assert_true(d->spec[0] <= c->max_workgroup_invocations && d->spec[0] <= c->max_workgroup_size[0]);
    for (uint32_t i = 1; i < d->n_spec; i++) assert_true(d->spec[i] >= 1);
}

static void record(gen_log *l, const vf_gen_kernel *k, const vf_device_caps *c)
{
    for (int s = 0; s < k->n_steps; s++) {
        const vf_dispatch *d = &k->step[s];
        check_dispatch(d, c);
        assert_true(l->n < MAX_DISPATCHES);
        l->glsl[l->n] = strdup(d->glsl);
        assert_non_null(l->glsl[l->n]);
        snprintf(l->name[l->n], sizeof l->name[0], "%s", d->name);
        l->n_spec[l->n] = d->n_spec;
        memcpy(l->spec[l->n], d->spec, sizeof d->spec);
        l->n++;
    }
}

static void shapes_of(const vf_graph *g, vf_shape *shapes)
{
    for (int v = 0; v < g->n; v++) shapes[v] = g->nodes[v].shape;
}

/* The kernel of group i: the fused kernel, or the single node's. */
static void gen_group(const vf_graph *g, const vf_partition_t *p, int i, const vf_shape *shapes,
                      const vf_device_caps *c, vf_buffer **bufs, vf_gen_kernel *k)
{
    const vf_group *grp = &p->groups[i];
    vf_err err = {0};
    vf_status st;
    if (grp->kind == VF_GROUP_SINGLE) {
        vf_exec e = vt_exec_of(g, grp->nodes[0], bufs);
        st = vf_codegen_exec(&e, c, k, &err);
    } else {
        st = vt_codegen_group(g, grp, shapes, c, k, &err);
    }
    if (st) fprintf(stderr, "codegen: %s\n", err.message);
    assert_int_equal(st, VF_OK);
}

static void gen_graph(const vf_graph *g, const vf_device_caps *c, gen_log *l)
{
    vf_shape *shapes = malloc(sizeof *shapes * (size_t)g->n);
    assert_non_null(shapes);
    shapes_of(g, shapes);
    vf_partition_t p;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    for (int i = 0; i < p.n_groups; i++) {
        if (p.groups[i].kind == VF_GROUP_SINGLE && g->nodes[p.groups[i].nodes[0]].kind != VF_NODE_OP) continue;
        vf_gen_kernel k;
        gen_group(g, &p, i, shapes, c, NULL, &k);
        record(l, &k, c);
        vf_kernel_free(&k);
    }
    vf_partition_free(&p);
    free(shapes);
}

static bool is_matmul(const char *name) { return !strncmp(name, "matmul", 6) || !strncmp(name, "mmfused", 7); }

/* Row ops in registers: a CPU-profile variant (codegen_softmax.c). */
static bool is_reg_row(const char *name) { return strstr(name, "_f32_reg") != NULL; }

/* Same kernels, same GLSL (all of them, or all but matmul, whose template
   is per profile); returns how many kernels got different specialisation
   values. */
static int compare_logs(const gen_log *a, const gen_log *b, bool skip_matmul)
{
    assert_int_equal(a->n, b->n);
    int differ = 0;
    for (int i = 0; i < a->n; i++) {
        if (skip_matmul && is_matmul(a->name[i])) {
            assert_true(is_matmul(b->name[i]));
            continue;
        }
        if (skip_matmul && (is_reg_row(a->name[i]) || is_reg_row(b->name[i]))) continue; /* per profile too */
        assert_string_equal(a->name[i], b->name[i]);
        if (strcmp(a->glsl[i], b->glsl[i]))
            fprintf(stderr, "kernel %s: the GLSL differs between devices\n", a->name[i]);
        assert_string_equal(a->glsl[i], b->glsl[i]);
        differ += a->n_spec[i] != b->n_spec[i] || memcmp(a->spec[i], b->spec[i], sizeof a->spec[i]) != 0;
    }
    return differ;
}

/* ---- (a) the GLSL does not depend on the device's limits -------------------- */

static vf_device_caps caps_base(bool cpu, uint32_t sg, uint32_t inv, uint32_t size_x)
{
    return (vf_device_caps){
        .is_cpu = cpu, .subgroup_size = sg, .subgroup_arithmetic = true, .subgroup_shuffle = true,
        .max_workgroup_invocations = inv, .max_workgroup_size = {size_x, size_x, 64},
        .max_workgroup_count = {65535, 65535, 65535}, .shared_memory_bytes = 32768, .max_push_constants = 128,
        .max_storage_buffer_range = 1u << 30, .min_storage_buffer_offset_alignment = 16, .storage16 = true,
        .storage8 = true};
}

static void test_glsl_independent_of_limits(void **state)
{
    (void)state;
    vf_device_caps fam[2][3] = {
        {caps_base(true, 8, 1024, 1024), caps_base(true, 8, 64, 64), caps_base(true, 4, 128, 96)},
        {caps_base(false, 32, 1024, 1024), caps_base(false, 64, 256, 256), caps_base(false, 32, 128, 64)},
    };
    fam[1][1].shared_memory_bytes = 16384;
    vf_device_caps plain[2] = {caps_base(false, 64, 256, 256), caps_base(false, 16, 1024, 512)};
    for (int i = 0; i < 2; i++) plain[i].subgroup_arithmetic = plain[i].subgroup_shuffle = false;

    vf_graph *graphs[2] = {graph_mixed(), graph_rows()};
    for (int gi = 0; gi < 2; gi++) {
        /* within a profile every kernel is the same text whatever the
           limits and subgroup size; across the CPU and GPU profiles all
           but matmul */
        gen_log ref[2] = {{0}, {0}};
        for (int f = 0; f < 2; f++) gen_graph(graphs[gi], &fam[f][0], &ref[f]);
        assert_true(ref[0].n >= (gi == 0 ? 6 : 2));
        assert_true(compare_logs(&ref[0], &ref[1], true) > 0);
        for (int f = 0; f < 2; f++)
            for (int c = 1; c < 3; c++) {
                gen_log l = {0};
                gen_graph(graphs[gi], &fam[f][c], &l);
                /* values differ where the kernels' sizes hit the limits:
                   always for the mixed graph (256-wide elementwise
                   kernels), for one-subgroup rows on the CPU profile only
                   with another subgroup size */
                int differ = compare_logs(&ref[f], &l, false);
                if (gi == 0 || f == 1 || c == 2) assert_true(differ > 0);
                else assert_int_equal(differ, 0);
                log_free(&l);
            }
        /* without subgroup arithmetic (a shared-memory tree): another
           path, still the same text for both devices */
        gen_log p0 = {0}, p1 = {0};
        gen_graph(graphs[gi], &plain[0], &p0);
        gen_graph(graphs[gi], &plain[1], &p1);
        assert_true(compare_logs(&p0, &p1, false) > 0);
        log_free(&p0);
        log_free(&p1);
        log_free(&ref[0]);
        log_free(&ref[1]);
        vf_graph_free(graphs[gi]);
    }
}

/* The elementwise kernel's values follow the limits: 256 wanted. */
static void test_elementwise_values(void **state)
{
    (void)state;
    int64_t sh[1] = {100003};
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_ADD;
    e.n_in = 2;
    for (int k = 0; k < 3; k++) {
        vf_tref *t = k < 2 ? &e.in[k] : &e.out;
        t->dtype = VF_F32;
        t->rank = 1;
        t->shape[0] = sh[0];
    }
    static const uint32_t limit[3] = {1024, 200, 64}, want[3] = {256, 200, 64};
    char *first = NULL;
    for (int i = 0; i < 3; i++) {
        vf_device_caps c = caps_base(true, 8, limit[i], 1024);
        vf_gen_kernel k;
        vf_err err = {0};
        assert_int_equal(vf_codegen_exec(&e, &c, &k, &err), VF_OK);
        assert_int_equal(k.n_steps, 1);
        const vf_dispatch *d = &k.step[0];
        check_dispatch(d, &c);
        assert_int_equal(d->n_spec, 1);
        assert_int_equal(d->spec[0], want[i]);
        /* 4 elements per invocation: the counts use the same value */
        uint64_t per = 4ull * want[i];
        assert_int_equal((uint64_t)d->groups[0] * d->groups[1], (sh[0] + per - 1) / per);
        if (!first) first = strdup(d->glsl);
        else assert_string_equal(first, d->glsl);
        vf_kernel_free(&k);
    }
    free(first);
}

/* ---- (b) one SPIR-V, two workgroup sizes, results equal the CPU ------------- */

static void fill(const vf_graph *g, int v, uint8_t *host)
{
    int64_t n = vf_shape_numel(&g->nodes[v].shape);
    uint64_t r = 0x9e3779b97f4a7c15ull * (uint64_t)(v + 1);
    for (int64_t i = 0; i < n; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double u = (double)(r >> 11) / 9007199254740992.0;
        vf_store_f64(host, VF_F32, i, g->nodes[v].shape.rank == 1 ? 0.5 + 1.5 * u : 4.0 * u - 2.0);
    }
}

static void dispatch_kernel(rt_handle *h, const vf_graph *g, const vf_group *grp, const vf_gen_kernel *k,
                            vf_buffer **gb)
{
    vf_buffer *scratch = NULL;
    if (k->scratch_bytes) assert_int_equal(h->be.iface->alloc(h->be.self, k->scratch_bytes, &scratch), VF_OK);
    const vf_node *nd = &g->nodes[grp->nodes[0]];
    for (int s = 0; s < k->n_steps; s++) {
        const vf_dispatch *d = &k->step[s];
        const vf_vk_pipeline *pipe = NULL;
        assert_int_equal(vf_vk_runtime_dispatch_pipeline(h->rt, d, &pipe), VF_OK);
        vf_vk_bind binds[VF_KERNEL_MAX_BINDINGS];
        memset(binds, 0, sizeof binds);
        for (int j = 0; j < d->n_bindings; j++) {
            int b = d->binding[j];
            if (b >= VF_BIND_GROUP) {
                int t = b - VF_BIND_GROUP;
                bool in = t < grp->n_inputs;
                binds[j].buf = gb[in ? grp->inputs[t] : grp->outputs[t - grp->n_inputs]];
                binds[j].access = in ? VF_VK_READ : VF_VK_WRITE;
            } else if (b == VF_BIND_SCRATCH) {
                binds[j].buf = scratch;
                binds[j].access = VF_VK_READ | VF_VK_WRITE;
            } else if (b == VF_BIND_OUT) {
                binds[j].buf = gb[grp->nodes[0]];
                binds[j].access = VF_VK_WRITE;
            } else {
                assert_true(b - VF_BIND_IN0 < nd->n_in);
                binds[j].buf = gb[nd->in[b - VF_BIND_IN0]];
                binds[j].access = VF_VK_READ;
            }
        }
        vf_vk_dispatch_info di = {.pipe = pipe, .n_bindings = d->n_bindings, .bindings = binds, .push = d->push,
                                  .push_size = d->push_size, .groups = {d->groups[0], d->groups[1], d->groups[2]},
                                  .barrier_before = s > 0, .name = d->name};
        assert_int_equal(vf_vk_sched_dispatch(&h->rt->sched, &di), VF_OK);
    }
    if (scratch) h->be.iface->free(h->be.self, scratch);
}

/* Runs g on the device with every kernel generated for caps c (logged)
   and compares its outputs with want (the CPU backend's). */
static void run_graph(rt_handle *h, const vf_graph *g, const vf_device_caps *c, uint8_t **want, gen_log *l)
{
    int n = g->n;
    vf_buffer **gb = calloc((size_t)n, sizeof *gb);
    vf_shape *shapes = malloc(sizeof *shapes * (size_t)n);
    assert_true(gb && shapes);
    shapes_of(g, shapes);
    for (int v = 0; v < n; v++) {
        assert_int_equal(h->be.iface->alloc(h->be.self, vt_value_bytes(g, v), &gb[v]), VF_OK);
        if (g->nodes[v].kind != VF_NODE_PARAM) continue;
        uint8_t *host = calloc(1, vt_value_bytes(g, v));
        assert_non_null(host);
        fill(g, v, host);
        assert_int_equal(h->be.iface->upload(h->be.self, gb[v], 0, host, vt_value_bytes(g, v)), VF_OK);
        free(host);
    }
    vf_partition_t p;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    for (int i = 0; i < p.n_groups; i++) {
        if (p.groups[i].kind == VF_GROUP_SINGLE && g->nodes[p.groups[i].nodes[0]].kind != VF_NODE_OP) continue;
        vf_gen_kernel k;
        gen_group(g, &p, i, shapes, c, gb, &k);
        record(l, &k, c);
        dispatch_kernel(h, g, &p.groups[i], &k, gb);
        vf_kernel_free(&k);
    }
    for (int o = 0; o < g->n_outputs; o++) {
        int v = g->outputs[o];
        size_t nb = vt_value_bytes(g, v);
        uint8_t *got = malloc(nb);
        assert_non_null(got);
        assert_int_equal(h->be.iface->download(h->be.self, gb[v], 0, got, nb), VF_OK);
        int64_t nel = vf_shape_numel(&g->nodes[v].shape);
        for (int64_t i = 0; i < nel; i++) {
            double w = vf_load_f64(want[o], VF_F32, i), x = vf_load_f64(got, VF_F32, i);
            bool ok = w == x || fabs(w - x) <= 1e-4 + 2e-4 * fabs(w);
            if (!ok)
                fprintf(stderr, "output %d element %lld: cpu %.9g vulkan %.9g (workgroup limit %u)\n", o,
                        (long long)i, w, x, c->max_workgroup_invocations);
            assert_true(ok);
        }
        free(got);
    }
    for (int v = 0; v < n; v++) h->be.iface->free(h->be.self, gb[v]);
    vf_partition_free(&p);
    free(shapes);
    free(gb);
}

/* The CPU backend's outputs of g, node by node. */
static uint8_t **cpu_outputs(const vf_graph *g)
{
    vf_backend_t cpu;
    vf_err err = {0};
    assert_int_equal(vf_cpu_backend_create(&err, &cpu), VF_OK);
    vf_buffer **cb = calloc((size_t)g->n, sizeof *cb);
    uint8_t **out = calloc((size_t)g->n_outputs, sizeof *out);
    assert_true(cb && out);
    for (int v = 0; v < g->n; v++) {
        assert_int_equal(cpu.iface->alloc(cpu.self, vt_value_bytes(g, v), &cb[v]), VF_OK);
        if (g->nodes[v].kind == VF_NODE_PARAM) {
            uint8_t *host = calloc(1, vt_value_bytes(g, v));
            assert_non_null(host);
            fill(g, v, host);
            assert_int_equal(cpu.iface->upload(cpu.self, cb[v], 0, host, vt_value_bytes(g, v)), VF_OK);
            free(host);
        } else if (g->nodes[v].kind == VF_NODE_OP) {
            vf_exec e = vt_exec_of(g, v, cb);
            assert_int_equal(cpu.iface->exec(cpu.self, &e), VF_OK);
        }
    }
    for (int o = 0; o < g->n_outputs; o++) {
        size_t nb = vt_value_bytes(g, g->outputs[o]);
        out[o] = malloc(nb);
        assert_non_null(out[o]);
        assert_int_equal(cpu.iface->download(cpu.self, cb[g->outputs[o]], 0, out[o], nb), VF_OK);
    }
    for (int v = 0; v < g->n; v++) cpu.iface->free(cpu.self, cb[v]);
    free(cb);
    cpu.iface->destroy(cpu.self);
    return out;
}

static void test_two_workgroup_sizes_run(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const vf_device_caps *dev = &h.rt->dev.caps;
    /* lavapipe's caps and the same device claiming 64 invocations; the
       GPU profile forced (256-invocation rows with subgroups and shared
       memory, 16x16 matmul tiles) and the same with 64 (8x8 tiles) */
    vf_device_caps pairs[2][2] = {{*dev, *dev}, {*dev, *dev}};
    pairs[1][0].is_cpu = pairs[1][1].is_cpu = false;
    for (int i = 0; i < 2; i++) {
        pairs[i][1].max_workgroup_invocations = 64;
        pairs[i][1].max_workgroup_size[0] = 64;
    }
    vf_graph *graphs[2] = {graph_mixed(), graph_rows()};
    int runs = 0;
    for (int gi = 0; gi < 2; gi++) {
        uint8_t **want = cpu_outputs(graphs[gi]);
        gen_log cpu_profile = {0};
        for (int pi = 0; pi < 2; pi++) {
            gen_log l[2] = {{0}, {0}};
            int64_t compiles = h.rt->shaders.compiles;
            run_graph(&h, graphs[gi], &pairs[pi][0], want, &l[0]);
            int64_t first = h.rt->shaders.compiles - compiles;
            int64_t pipes = h.rt->pipes.created;
            run_graph(&h, graphs[gi], &pairs[pi][1], want, &l[1]);
            /* the second device needs no new SPIR-V, only pipelines for
               the kernels whose values differ */
            assert_int_equal(h.rt->shaders.compiles - compiles, first);
            /* rows on the CPU profile are one subgroup either way: the
               same values, the same pipelines */
            int differ = compare_logs(&l[0], &l[1], false);
            if (gi == 0 || pi == 1) {
                assert_true(differ > 0);
                assert_true(h.rt->pipes.created - pipes >= 1);
            } else {
                assert_int_equal(differ, 0);
                assert_int_equal(h.rt->pipes.created - pipes, 0);
            }
            runs += 2;
            /* the GPU profile's kernels but matmul are the CPU profile's
               SPIR-V too: one-subgroup rows (WG == SG) and 256-wide ones
               are the same module specialised differently */
            if (pi == 0) cpu_profile = l[0];
            else compare_logs(&cpu_profile, &l[0], true);
            if (pi == 1) log_free(&l[0]);
            log_free(&l[1]);
        }
        log_free(&cpu_profile);
        for (int o = 0; o < graphs[gi]->n_outputs; o++) free(want[o]);
        free(want);
        vf_graph_free(graphs[gi]);
    }
    printf("specialisation: %d graph runs (pairs of devices with different limits), equal to the CPU backend\n", runs);
    rt_done(&h);
}

/* ---- (c) the pipeline cache keys the values; limits are checked ------------ */

static void test_pipeline_cache_keys_values(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_MUL;
    e.n_in = 2;
    for (int k = 0; k < 3; k++) {
        vf_tref *t = k < 2 ? &e.in[k] : &e.out;
        t->dtype = VF_F32;
        t->rank = 1;
        t->shape[0] = 777;
    }
    vf_device_caps c = h.rt->dev.caps;
    vf_gen_kernel k[2];
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(&e, &c, &k[0], &err), VF_OK);
    c.max_workgroup_invocations = 64;
    assert_int_equal(vf_codegen_exec(&e, &c, &k[1], &err), VF_OK);
    assert_string_equal(k[0].step[0].glsl, k[1].step[0].glsl);
    assert_int_not_equal(k[0].step[0].spec[0], k[1].step[0].spec[0]);
    assert_true(vf_vk_shader_key(&h.rt->shaders, k[0].step[0].glsl) ==
                vf_vk_shader_key(&h.rt->shaders, k[1].step[0].glsl));

    int64_t compiles = h.rt->shaders.compiles, hits = h.rt->shaders.memory_hits, disk = h.rt->shaders.disk_hits;
    int64_t created = h.rt->pipes.created;
    const vf_vk_pipeline *p0 = NULL, *p1 = NULL, *again = NULL;
    assert_int_equal(vf_vk_runtime_dispatch_pipeline(h.rt, &k[0].step[0], &p0), VF_OK);
    assert_int_equal(vf_vk_runtime_dispatch_pipeline(h.rt, &k[1].step[0], &p1), VF_OK);
    assert_true(p0 && p1 && p0 != p1);
    assert_int_equal(h.rt->pipes.created - created, 2);
    /* one SPIR-V: compiled (or read from disk) once, then a memory hit */
    assert_int_equal((h.rt->shaders.compiles - compiles) + (h.rt->shaders.disk_hits - disk), 1);
    assert_true(h.rt->shaders.memory_hits - hits >= 1);
    assert_int_equal(vf_vk_runtime_dispatch_pipeline(h.rt, &k[0].step[0], &again), VF_OK);
    assert_ptr_equal(again, p0);
    assert_int_equal(h.rt->pipes.created - created, 2);

    /* a workgroup size over the device's limits: UNSUPPORTED, no pipeline */
    vf_dispatch bad = k[0].step[0];
    bad.spec[0] = h.rt->dev.props.limits.maxComputeWorkGroupInvocations + 1;
    const vf_vk_pipeline *none = p0;
    assert_int_equal(vf_vk_runtime_dispatch_pipeline(h.rt, &bad, &none), VF_ERROR_UNSUPPORTED);
    assert_null(none);
    assert_non_null(strstr(h.err.message, "workgroup size"));
    vf_err_clear(&h.err);
    bad.n_spec = 0;
    assert_int_equal(vf_vk_runtime_dispatch_pipeline(h.rt, &bad, &none), VF_ERROR_UNSUPPORTED);
    vf_err_clear(&h.err);
    vf_kernel_free(&k[0]);
    vf_kernel_free(&k[1]);
    rt_done(&h);
}

int main(void)
{
    pin_vulkan_libraries();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glsl_independent_of_limits),
        cmocka_unit_test(test_elementwise_values),
        cmocka_unit_test(test_two_workgroup_sizes_run),
        cmocka_unit_test(test_pipeline_cache_keys_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
