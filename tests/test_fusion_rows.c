/* Fused row groups (partition.h VF_GROUP_ROW_EPILOGUE, codegen_rows.c).
 *
 * Graph level: composed softmax, layer norm, softmax / log_softmax ops with
 * a prologue and an epilogue, and sparse_xent are partitioned into one row
 * group each (one kernel per node with fusion off); the fused kernel runs
 * on the Vulkan device in all three combining modes (one subgroup per row
 * as on lavapipe, 256 invocations with subgroups and shared memory as on
 * GPUs, and a shared-memory tree without subgroup arithmetic) and equals
 * the CPU backend running the nodes one by one, on odd sizes (C = 1, 3,
 * 513, 1000, 1027; rows 1 ..), rows of -inf, huge values, NaN and bad labels.
 * The GLSL of a pattern does not depend on the sizes (one pipeline for
 * every batch).
 *
 * Traced functions: composed softmax and layer norm with a symbolic batch
 * dim are one kernel per call at every batch size (one trace), 5 and 9
 * kernels with VKFUSE_FUSION=0, and equal the CPU backend; sparse_xent
 * with a prologue and an epilogue is one kernel (NaN for bad labels); an
 * empty batch runs without error.
 */
#include "testutil.h"
#include "graph_run.h"
#include "vk_test_common.h"

#include "vulkan/codegen/codegen_fused.h"
#include "plan/partition.h"
#include "util/dtype.h"

#include <math.h>

/* ---- graph building ------------------------------------------------------ */


static int op1(vf_graph *g, vf_op o, int a, vf_shape s) { return vt_op(g, o, 1, &a, VF_F32, s); }
static int op2(vf_graph *g, vf_op o, int a, int b, vf_shape s) { return vt_op(g, o, 2, (int[]){a, b}, VF_F32, s); }

/* last-axis keepdims reduction of x ([rows, C]) */
static int red(vf_graph *g, vf_op o, int x)
{
    vf_shape s = g->nodes[x].shape;
    s.dim[s.rank - 1] = 1;
    int id = op1(g, o, x, s);
    g->nodes[id].attrs.axes_mask = 1u << (s.rank - 1);
    g->nodes[id].attrs.keepdims = true;
    return id;
}

typedef enum { P_SOFTMAX, P_LAYERNORM, P_SOFTMAX_OP, P_LOG_SOFTMAX_OP, P_XENT, P_HEAVY, P_COUNT } pattern;
static const char *const pattern_name[P_COUNT] = {"composed softmax", "layer norm", "softmax op",
                                                  "log_softmax op", "sparse_xent", "heavy"};
/* ops of each pattern: the kernel count with fusion off */
static const int pattern_ops[P_COUNT] = {5, 9, 3, 3, 3, 9};

/* Builds a pattern over x [rows, C]; params: x first, then the others. */
static vf_graph *build(pattern pt, int64_t rows, int64_t C)
{
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(2, (int64_t[]){rows, C}), vec = vt_shape(1, (int64_t[]){C}), one = vt_shape(0, NULL);
    vf_shape ds = vt_shape(1, (int64_t[]){rows});
    int x = vt_param(g, VF_F32, s), outs[2], no = 0;
    switch (pt) {
    case P_SOFTMAX: {   /* exp(x - max(x)) / sum(exp(x - max(x))); the max is an output too */
        int m = red(g, VF_OP_REDUCE_MAX, x);
        int e = op1(g, VF_OP_EXP, op2(g, VF_OP_SUB, x, m, s), s);
        outs[no++] = op2(g, VF_OP_DIV, e, red(g, VF_OP_REDUCE_SUM, e), s);
        outs[no++] = m;
        break;
    }
    case P_LAYERNORM: {   /* (x - mean) / sqrt(mean((x - mean)^2) + eps) * gamma + beta; mean an output */
        int gm = vt_param(g, VF_F32, vec), bt = vt_param(g, VF_F32, vec), eps = vt_param(g, VF_F32, one);
        int mean = red(g, VF_OP_REDUCE_MEAN, x);
        int d = op2(g, VF_OP_SUB, x, mean, s);
        int var = red(g, VF_OP_REDUCE_MEAN, op2(g, VF_OP_MUL, d, d, s));
        vf_shape ks = g->nodes[var].shape;
        int sd = op1(g, VF_OP_SQRT, op2(g, VF_OP_ADD, var, eps, ks), ks);
        int y = op2(g, VF_OP_DIV, d, sd, s);
        outs[no++] = op2(g, VF_OP_ADD, op2(g, VF_OP_MUL, y, gm, s), bt, s);
        outs[no++] = mean;
        break;
    }
    case P_SOFTMAX_OP: case P_LOG_SOFTMAX_OP: {   /* (log_)softmax(x * k) + bias */
        int k = vt_param(g, VF_F32, one), bias = vt_param(g, VF_F32, vec);
        int sm = op1(g, pt == P_SOFTMAX_OP ? VF_OP_SOFTMAX : VF_OP_LOG_SOFTMAX, op2(g, VF_OP_MUL, x, k, s), s);
        g->nodes[sm].attrs.axis = 1;
        outs[no++] = op2(g, VF_OP_ADD, sm, bias, s);
        break;
    }
    case P_HEAVY: {   /* helper-calling ops around two reductions: too much code to unroll 128 times */
        int m = red(g, VF_OP_REDUCE_MAX, x);
        int d = op2(g, VF_OP_SUB, x, m, s);
        int t = op1(g, VF_OP_TANH, d, s);
        int r = op1(g, VF_OP_SQRT, op1(g, VF_OP_EXP, d, s), s);
        int y = op2(g, VF_OP_DIV, t, red(g, VF_OP_REDUCE_SUM, r), s);
        outs[no++] = op2(g, VF_OP_MAXIMUM, op1(g, VF_OP_TANH, y, s), t, s);
        break;
    }
    default: {   /* xent(labels, x * k) * k */
        int lab = vt_param(g, VF_I32, ds), k = vt_param(g, VF_F32, one);
        int loss = vt_op(g, VF_OP_SPARSE_XENT, 2, (int[]){lab, op2(g, VF_OP_MUL, x, k, s)}, VF_F32, ds);
        outs[no++] = op2(g, VF_OP_MUL, loss, k, ds);
        break;
    }
    }
    assert_true(vf_graph_set_outputs(g, no, outs));
    return g;
}

static int op_groups(const vf_graph *g, const vf_partition_t *p)
{
    int c = 0;
    for (int i = 0; i < p->n_groups; i++) {
        bool any = false;
        for (int m = 0; m < p->groups[i].n_nodes; m++) any |= g->nodes[p->groups[i].nodes[m]].kind == VF_NODE_OP;
        c += any;
    }
    return c;
}

static void test_partition(void **state)
{
    (void)state;
    for (int pt = 0; pt < P_COUNT; pt++) {
        vf_graph *g = build((pattern)pt, 7, 33);
        vf_fusion_options o;
        vf_fusion_options_default(&o);
        assert_true(o.fuse_rows);
        vf_partition_t p;
        vf_err err = {0};
        assert_int_equal(vf_partition(g, &o, &p, &err), VF_OK);
        assert_int_equal(op_groups(g, &p), 1);
        const vf_group *grp = &p.groups[p.group_of[g->outputs[0]]];
        assert_int_equal(grp->kind, VF_GROUP_ROW_EPILOGUE);
        assert_int_equal(grp->n_nodes, pattern_ops[pt]);
        assert_false(grp->may_alias_input);   /* inputs are read in several passes */
        vf_partition_free(&p);
        o.enabled = false;
        assert_int_equal(vf_partition(g, &o, &p, &err), VF_OK);
        assert_int_equal(op_groups(g, &p), pattern_ops[pt]);
        vf_partition_free(&p);
        vf_graph_free(g);
    }
    /* an input broadcast over part of the rows ([T, C] in [B, T, C]) stays out */
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = vt_shape(3, (int64_t[]){2, 3, 8}), t = vt_shape(2, (int64_t[]){3, 8});
    int x = vt_param(g, VF_F32, s), y = vt_param(g, VF_F32, t);
    int m = red(g, VF_OP_REDUCE_MAX, x);
    int d = op2(g, VF_OP_SUB, x, m, s);
    int e = op2(g, VF_OP_MUL, d, y, s);
    assert_true(vf_graph_set_outputs(g, 1, &e));
    vf_partition_t p;
    vf_err err = {0};
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    assert_true(p.group_of[m] == p.group_of[d]);
    assert_true(p.group_of[e] != p.group_of[d]);
    vf_partition_free(&p);
    vf_graph_free(g);
    /* a side effect between the reductions splits the row program */
    g = vf_graph_new(NULL);
    s = vt_shape(2, (int64_t[]){4, 8});
    x = vt_param(g, VF_F32, s);
    m = red(g, VF_OP_REDUCE_MAX, x);
    d = op2(g, VF_OP_SUB, x, m, s);
    int as = vt_node(g, VF_NODE_ASSIGN, 1, &d, VF_F32, s);
    g->nodes[as].index = 0;
    int sm = red(g, VF_OP_REDUCE_SUM, d);
    assert_true(vf_graph_set_outputs(g, 1, &sm));
    assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
    assert_true(p.group_of[m] == p.group_of[d]);
    assert_true(p.group_of[sm] > p.group_of[as] && p.group_of[as] > p.group_of[d]);
    vf_partition_free(&p);
    vf_graph_free(g);
}

/* ---- running a partitioned graph ---------------------------------------- */

static uint64_t rng;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Parameter values: x uniform in [-3, 3] with special rows (row 0 all -inf,
   row 1 huge values, row 2 a NaN, row 3 some -inf), labels in [0, C) but
   row 1 = C and row 2 = -1 (NaN losses), other params uniform in [0.5, 2]. */
static void fill_param(const vf_graph *g, int v, uint8_t *host, bool special)
{
    const vf_shape *s = &g->nodes[v].shape;
    int64_t n = vf_shape_numel(s);
    int64_t C = s->rank ? s->dim[s->rank - 1] : 1;
    for (int64_t i = 0; i < n; i++) {
        if (g->nodes[v].dtype == VF_I32) {
            int64_t C2 = g->nodes[0].shape.dim[g->nodes[0].shape.rank - 1];
            int32_t l = (int32_t)(urand() * (double)C2);
            if (special && i == 1) l = (int32_t)C2;
            if (special && i == 2) l = -1;
            vf_store_f64(host, VF_I32, i, l);
            continue;
        }
        double x = g->nodes[v].index == 0 ? urand() * 6 - 3 : 0.5 + urand() * 1.5;
        if (g->nodes[v].index == 0 && special && s->rank == 2) {
            int64_t r = i / C, c = i % C;
            if (r == 0) x = -INFINITY;
            if (r == 1) x = 500.0 + 100.0 * urand();   /* exp overflows without the max */
            if (r == 2 && c == C / 2) x = NAN;
            if (r == 3 && c % 2 == 1) x = -INFINITY;
        }
        vf_store_f64(host, VF_F32, i, x);
    }
}

typedef struct rows_run {
    bool special;
} rows_run;

static void fill_rows_param(const vf_graph *g, int v, uint8_t *host, void *user)
{
    fill_param(g, v, host, ((rows_run *)user)->special);
}

/* Row 1 of the special inputs holds values of 500 .. 600: a result formed
   as x - logsumexp(x) carries their rounding (ulp(600) = 6e-5). */
static bool rows_close(const vf_graph *g, int o, int64_t i, double want, double got, void *user)
{
    const vf_shape *os = &g->nodes[g->outputs[o]].shape;
    int64_t oc = os->rank == 2 ? os->dim[1] : 1;
    double atol = ((rows_run *)user)->special && i / oc == 1 ? 3e-4 : 1e-5;
    return fabs(want - got) <= atol + 1e-4 * fabs(want);
}

/* Runs g on the device with the row groups generated for caps and on the
   CPU node by node; compares the outputs. Returns the fused groups run. */
static int run_graph(rt_handle *h, vf_backend_t *cpu, const vf_graph *g, const vf_device_caps *caps, bool special,
                     const char *what)
{
    rows_run rr = {.special = special};
    return vt_run_partitioned(h, cpu, g,
                              &(vt_graph_run){.caps = caps, .fill = fill_rows_param, .close = rows_close,
                                              .user = &rr, .what = what, .one_step = true});
}

static void test_patterns_on_device(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_backend_t cpu;
    vf_err cerr = {0};
    assert_int_equal(vf_cpu_backend_create(&cerr, &cpu), VF_OK);
    /* the device's own profile, a GPU-like one (256 invocations, subgroups
       and shared memory), and no subgroup arithmetic (shared-memory tree) */
    vf_device_caps caps[3] = {h.rt->dev.caps, h.rt->dev.caps, h.rt->dev.caps};
    caps[1].is_cpu = false;
    caps[2].is_cpu = false;
    caps[2].subgroup_arithmetic = false;
    static const int64_t cols[] = {1, 3, 513, 1000, 1027};
    static const int64_t rows[] = {1, 5, 37};
    rng = 977;
    int fused = 0, runs = 0;
    for (int pt = 0; pt < P_COUNT; pt++)
        for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++)
            for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
                for (int c = 0; c < 3; c++) {
                    if (c > 0 && ri != 2) continue;   /* other modes: one size set each */
                    bool special = rows[ri] >= 5;
                    char what[128];
                    snprintf(what, sizeof what, "%s [%lld, %lld] mode %d", pattern_name[pt], (long long)rows[ri],
                             (long long)cols[ci], c);
                    vf_graph *g = build((pattern)pt, rows[ri], cols[ci]);
                    fused += run_graph(&h, &cpu, g, &caps[c], special, what);
                    runs++;
                    vf_graph_free(g);
                }
    printf("row groups: %d runs, %d fused kernels checked against the CPU backend\n", runs, fused);
    assert_int_equal(fused, runs);
    cpu.iface->destroy(cpu.self);
    rt_done(&h);
}

/* A lavapipe-like profile for the GLSL-only tests (no device needed). */
static const vf_device_caps caps_lavapipe = {
    .is_cpu = true, .subgroup_size = 8, .subgroup_arithmetic = true, .max_workgroup_invocations = 1024,
    .max_workgroup_size = {1024, 1024, 64}, .max_workgroup_count = {65535, 65535, 65535},
    .max_push_constants = 128, .shared_memory_bytes = 32768, .storage16 = true, .storage8 = true};

/* The GLSL depends on the pattern, not the sizes: one pipeline per batch. */
static void test_glsl_size_independent(void **state)
{
    (void)state;
    vf_device_caps caps = caps_lavapipe;
    for (int pt = 0; pt < P_COUNT; pt++) {
        char *src[3] = {NULL, NULL, NULL};
        static const int64_t rows[3] = {3, 64, 3}, cols[3] = {1000, 1000, 37};
        for (int i = 0; i < 3; i++) {
            vf_graph *g = build((pattern)pt, rows[i], cols[i]);
            vf_shape *shapes = malloc(sizeof *shapes * (size_t)g->n);
            assert_non_null(shapes);
            for (int v = 0; v < g->n; v++) shapes[v] = g->nodes[v].shape;
            vf_partition_t p;
            vf_err err = {0};
            assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
            vf_gen_kernel k;
            assert_int_equal(vt_codegen_group(g, &p.groups[p.group_of[g->outputs[0]]], shapes, &caps, &k, &err),
                             VF_OK);
            src[i] = k.step[0].glsl;
            k.step[0].glsl = NULL;
            uint32_t pushed[2];
            memcpy(pushed, k.step[0].push, sizeof pushed);
            assert_int_equal(pushed[0], (uint32_t)rows[i]);   /* n_rows, cols: push constants */
            assert_int_equal(pushed[1], (uint32_t)cols[i]);
            assert_int_equal(k.step[0].groups[0] * (k.step[0].groups[1] ? k.step[0].groups[1] : 1), rows[i]);
            vf_kernel_free(&k);
            vf_partition_free(&p);
            free(shapes);
            vf_graph_free(g);
        }
        assert_string_equal(src[0], src[1]);
        assert_string_equal(src[0], src[2]);
        for (int i = 0; i < 3; i++) free(src[i]);
    }
}

/* ---- traced functions ----------------------------------------------------- */

enum { TC = 300 };
static vf_tensor *eps_t;

static vf_status composed_softmax(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *e = vf_exp(ctx, vf_sub(ctx, in[0], vf_reduce_max(ctx, in[0], 1, (int[]){-1}, true)));
    out[0] = vf_div(ctx, e, vf_reduce_sum(ctx, e, 1, (int[]){-1}, true));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status layer_norm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *d = vf_sub(ctx, in[0], vf_reduce_mean(ctx, in[0], 1, (int[]){-1}, true));
    vf_tensor *var = vf_reduce_mean(ctx, vf_mul(ctx, d, d), 1, (int[]){-1}, true);
    vf_tensor *y = vf_div(ctx, d, vf_sqrt(ctx, vf_add(ctx, var, eps_t)));
    out[0] = vf_add(ctx, vf_mul(ctx, y, in[1]), in[2]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* Calls body on batches 1, 9 and 40 ([B, TC] with a symbolic B); returns
   the outputs concatenated and the stats of the last call. */
static float *run_batches(vf_backend b, bool fuse, vf_body body, int n_in, vf_function_stats *fs)
{
    static const int64_t batches[3] = {1, 9, 40};
    vf_context *ctx = vt_context(b);
    const float e = 1e-5f;
    eps_t = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &e);
    vf_tensor_spec sig[3] = {{VF_F32, 2, {-1, TC}}, {VF_F32, 1, {TC}}, {VF_F32, 1, {TC}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "rows", .body = body, .n_inputs = n_in,
                                                                  .n_outputs = 1, .input_signature = sig,
                                                                  .unfused = !fuse});
    assert_non_null(fn);
    float *all = malloc(sizeof *all * 50 * TC), gb[2][TC];
    assert_non_null(all);
    vt_fill_uniform(gb[0], TC, 0.5f, 1.5f, 3);
    vt_fill_uniform(gb[1], TC, -1, 1, 4);
    size_t at = 0;
    for (int i = 0; i < 3; i++) {
        size_t n = (size_t)batches[i] * TC;
        float *x = malloc(sizeof *x * n);
        assert_non_null(x);
        vt_fill_uniform(x, n, -4, 4, 20 + (uint64_t)i);
        vf_tensor *in[3] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){batches[i], TC}, x),
                            vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){TC}, gb[0]),
                            vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){TC}, gb[1])};
        vf_tensor *out = NULL;
        vf_status s = vf_function_call(fn, in, &out);
        assert_int_equal(s, VF_OK);
        float *r = vt_read(out);
        memcpy(all + at, r, sizeof *r * n);
        at += n;
        free(r);
        free(x);
        assert_int_equal(vf_function_stats_get(fn, fs), VF_OK);
        assert_int_equal(fs->traces, 1);
    }
    vf_function_destroy(fn);
    vt_context_done(ctx);
    return all;
}

static void check_fn(const char *what, vf_body body, int n_in, int unfused_kernels)
{
    vf_function_stats f, u, c;
    float *fo = run_batches(VF_BACKEND_VULKAN, true, body, n_in, &f);
    float *uo = run_batches(VF_BACKEND_VULKAN, false, body, n_in, &u);
    float *co = run_batches(VF_BACKEND_CPU, true, body, n_in, &c);
    printf("%s: fused %d kernel(s) / %d dispatch(es), unfused %d, peak %lld vs %lld bytes\n", what, f.kernels,
           f.dispatches_per_call, u.kernels, (long long)f.peak_bytes, (long long)u.peak_bytes);
    assert_true(f.planned && u.planned);
    assert_int_equal(f.kernels, 1);
    assert_int_equal(f.dispatches_per_call, 1);
    assert_int_equal(u.kernels, unfused_kernels);
    assert_true(f.peak_bytes <= u.peak_bytes);
    char msg[96];
    snprintf(msg, sizeof msg, "%s: fused vs cpu", what);
    vt_assert_close_f32(fo, co, 50 * TC, 1e-5, 1e-4, msg);
    snprintf(msg, sizeof msg, "%s: unfused vs cpu", what);
    vt_assert_close_f32(uo, co, 50 * TC, 1e-5, 1e-4, msg);
    free(fo);
    free(uo);
    free(co);
}

/* Row-group loops over the cache are unrolled unless the group's code is
   large (codegen_rows.c RG_UNROLL_BUDGET): unrolled 128 times on lavapipe,
   a heavy group took LLVM minutes at its first dispatch. The values of the
   rolled form are checked with the other patterns (test_patterns_on_device). */
static void test_heavy_rolled(void **state)
{
    (void)state;
    vf_device_caps cpu = caps_lavapipe;
    vf_device_caps gpu = cpu;
    gpu.is_cpu = false;
    gpu.subgroup_size = 32;
    struct { pattern pt; const vf_device_caps *caps; bool unrolled; } cases[] = {
        {P_SOFTMAX, &cpu, true}, {P_LAYERNORM, &cpu, true}, {P_HEAVY, &cpu, false}, {P_HEAVY, &gpu, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        vf_graph *g = build(cases[i].pt, 4, 1000);
        vf_shape *shapes = malloc(sizeof *shapes * (size_t)g->n);
        assert_non_null(shapes);
        for (int v = 0; v < g->n; v++) shapes[v] = g->nodes[v].shape;
        vf_partition_t p;
        vf_err err = {0};
        assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
        vf_gen_kernel k;
        assert_int_equal(vt_codegen_group(g, &p.groups[p.group_of[g->outputs[0]]], shapes, cases[i].caps, &k, &err),
                         VF_OK);
        const char *glsl = k.step[0].glsl;
        assert_non_null(strstr(glsl, "RG_CACHE"));
        if ((strstr(glsl, "[[unroll]]") != NULL) != cases[i].unrolled)
            fail_msg("%s on the %s profile: cached loops %s, want %s", pattern_name[cases[i].pt],
                     cases[i].caps->is_cpu ? "CPU" : "GPU", cases[i].unrolled ? "rolled" : "unrolled",
                     cases[i].unrolled ? "unrolled" : "rolled");
        vf_kernel_free(&k);
        vf_partition_free(&p);
        free(shapes);
        vf_graph_free(g);
    }
}

/* Lanes per row on a CPU device: one subgroup of 8 at every row length
   (no barrier); two or four subgroups for cached rows of more than 64
   values per lane ran about twice as slow on llvmpipe (docs/BENCHMARKS.md,
   "Eager softmax on lavapipe"). GPUs: 256. spec[] is WG, SG, RG_CACHE. */
static void test_cpu_lanes_per_row(void **state)
{
    (void)state;
    vf_device_caps gpu = caps_lavapipe;
    gpu.is_cpu = false;
    gpu.subgroup_size = 32;
    static const struct {
        int64_t cols;
        uint32_t wg, cache, gpu_cache;
    } cases[] = {{37, 8, 5, 1}, {512, 8, 64, 2}, {513, 8, 65, 3}, {1000, 8, 125, 4}, {1024, 8, 128, 4},
                 {1027, 8, 128, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int c = 0; c < 2; c++) {
            vf_graph *g = build(P_SOFTMAX, 4, cases[i].cols);
            vf_shape *shapes = malloc(sizeof *shapes * (size_t)g->n);
            assert_non_null(shapes);
            for (int v = 0; v < g->n; v++) shapes[v] = g->nodes[v].shape;
            vf_partition_t p;
            vf_err err = {0};
            assert_int_equal(vf_partition(g, NULL, &p, &err), VF_OK);
            vf_gen_kernel k;
            assert_int_equal(vt_codegen_group(g, &p.groups[p.group_of[g->outputs[0]]], shapes,
                                              c ? &gpu : &caps_lavapipe, &k, &err),
                             VF_OK);
            const vf_dispatch *d = &k.step[0];
            assert_true(d->n_spec >= 3);
            if (c) {
                assert_int_equal(d->spec[0], 256);
                assert_int_equal(d->spec[2], cases[i].gpu_cache);
            } else {
                assert_int_equal(d->spec[0], cases[i].wg);
                assert_int_equal(d->spec[1], 8);
                assert_int_equal(d->spec[2], cases[i].cache);
            }
            vf_kernel_free(&k);
            vf_partition_free(&p);
            free(shapes);
            vf_graph_free(g);
        }
}

static void test_traced_softmax(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    check_fn("composed softmax", composed_softmax, 1, 5);
}

static void test_traced_layer_norm(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    check_fn("layer norm", layer_norm, 3, 9);
}

/* loss = xent(labels, x * 2) * 0.5 per row: one kernel; labels out of
   range give NaN in both */
static const float two = 2.0f, half = 0.5f;
static vf_tensor *two_t, *half_t;

static vf_status xent_fn(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], vf_mul(ctx, in[0], two_t)), half_t);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static float *run_xent(vf_backend b, bool fuse, vf_function_stats *fs)
{
    enum { XR = 13, XC = 1027 };
    vf_context *ctx = vt_context(b);
    two_t = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &two);
    half_t = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &half);
    float *x = malloc(sizeof *x * XR * XC);
    int32_t lab[XR];
    assert_non_null(x);
    vt_fill_uniform(x, XR * XC, -5, 5, 7);
    vt_fill_int(lab, XR, 0, XC - 1, 8);
    lab[3] = XC;   /* out of range: NaN */
    lab[5] = -1;
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){XR, XC}, x),
                        vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){XR}, lab)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "xent", .body = xent_fn, .n_inputs = 2,
                                                                  .n_outputs = 1, .unfused = !fuse});
    assert_non_null(fn);
    vf_tensor *out = NULL;
    vf_status s = vf_function_call(fn, in, &out);
    assert_int_equal(s, VF_OK);
    assert_int_equal(vf_tensor_rank(out), 1);
    assert_int_equal(vf_tensor_dim(out, 0), XR);
    float *r = vt_read(out);
    assert_int_equal(vf_function_stats_get(fn, fs), VF_OK);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    free(x);
    return r;
}

static void test_traced_xent(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_function_stats f, u, c;
    float *fo = run_xent(VF_BACKEND_VULKAN, true, &f), *uo = run_xent(VF_BACKEND_VULKAN, false, &u);
    float *co = run_xent(VF_BACKEND_CPU, true, &c);
    assert_int_equal(f.kernels, 1);
    assert_int_equal(u.kernels, 3);
    assert_true(isnan(fo[3]) && isnan(fo[5]) && isnan(co[3]) && isnan(co[5]));
    vt_assert_close_f32(fo, co, 13, 1e-5, 1e-5, "xent: fused vs cpu");
    vt_assert_close_f32(uo, co, 13, 1e-5, 1e-5, "xent: unfused vs cpu");
    free(fo);
    free(uo);
    free(co);
}

/* An empty batch: nothing to run, an empty result, no error. */
static void test_traced_empty_batch(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    vf_tensor_spec sig = {VF_F32, 2, {-1, TC}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "empty", .body = composed_softmax,
                                                                  .n_inputs = 1, .n_outputs = 1,
                                                                  .input_signature = &sig});
    assert_non_null(fn);
    for (int64_t b = 2; b >= 0; b -= 2) {   /* 2, then 0 */
        float x[2 * TC];
        vt_fill_uniform(x, 2 * TC, -1, 1, 5);
        vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){b, TC}, x), *out = NULL;
        assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
        assert_int_equal(vf_tensor_dim(out, 0), b);
        if (b) {
            float *r = vt_read(out);
            for (int i = 0; i < 2; i++) {
                double sum = 0;
                for (int j = 0; j < TC; j++) sum += r[i * TC + j];
                assert_true(fabs(sum - 1.0) < 1e-4);
            }
            free(r);
        }
    }
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partition),
        cmocka_unit_test(test_glsl_size_independent),
        cmocka_unit_test(test_heavy_rolled),
        cmocka_unit_test(test_cpu_lanes_per_row),
        cmocka_unit_test(test_patterns_on_device),
        cmocka_unit_test(test_traced_softmax),
        cmocka_unit_test(test_traced_layer_norm),
        cmocka_unit_test(test_traced_xent),
        cmocka_unit_test(test_traced_empty_batch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
