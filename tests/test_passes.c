/* Graph passes on hand-built graphs, no device: each test checks what the
 * pass changed (and what it must leave alone). */
#include "testutil.h"

#include "graph/passes.h"
#include "plan/host.h"
#include "util/dtype.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Folding evaluates on a host backend of the test's own (the library's
   is the context's). */
static vf_host fold_host;
static vf_evaluator fold_ev;

static int fold_setup(void **state)
{
    (void)state;
    fold_ev = vf_host_evaluator(&fold_host);
    return vf_cpu_backend_create(&fold_host.err, &fold_host.be) == VF_OK ? 0 : -1;
}

static int fold_teardown(void **state)
{
    (void)state;
    fold_host.be.iface->destroy(fold_host.be.self);
    return 0;
}

static vf_shape shp(int rank, const int64_t *d, uint32_t sym)
{
    vf_shape s = {.rank = rank, .sym = sym};
    for (int i = 0; i < rank; i++) s.dim[i] = d[i];
    return s;
}

static int add(vf_graph *g, vf_node_kind k, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = vf_graph_add(g, k, n_in, in);
    assert_true(id >= 0);
    g->nodes[id].dtype = dt;
    g->nodes[id].shape = s;
    return id;
}

static int param(vf_graph *g, vf_dtype dt, vf_shape s)
{
    int id = add(g, VF_NODE_PARAM, 0, NULL, dt, s);
    g->nodes[id].index = g->n_params++;
    g->n_explicit = g->n_params;
    return id;
}

static int op(vf_graph *g, vf_op o, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = add(g, VF_NODE_OP, n_in, in, dt, s);
    g->nodes[id].op = o;
    g->nodes[id].attrs.dtype = dt;
    return id;
}

static int fill(vf_graph *g, vf_dtype dt, vf_shape s, double v)
{
    int id = op(g, VF_OP_FILL, 0, NULL, dt, s);
    g->nodes[id].attrs.value = v;
    return id;
}

static int constant(vf_graph *g, int n, const float *v)
{
    int id = add(g, VF_NODE_CONST, 0, NULL, VF_F32, shp(1, (int64_t[]){n}, 0));
    g->nodes[id].data = malloc(sizeof(float) * (size_t)n);
    memcpy(g->nodes[id].data, v, sizeof(float) * (size_t)n);
    g->nodes[id].bytes = sizeof(float) * (size_t)n;
    return id;
}

static void outputs(vf_graph *g, int n, const int *ids) { assert_true(vf_graph_set_outputs(g, n, ids)); }

static int count_kind(const vf_graph *g, vf_node_kind k, int o)
{
    int c = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].kind == k && (o < 0 || g->nodes[i].op == (vf_op)o)) c++;
    return c;
}

static void test_fold(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s3 = shp(1, (int64_t[]){3}, 0);
    int x = param(g, VF_F32, s3);
    int a = constant(g, 3, (float[]){1, 2, 3});
    int b = fill(g, VF_F32, s3, 0.5);
    int c = op(g, VF_OP_MUL, 2, (int[]){a, b}, VF_F32, s3);      /* foldable: [0.5, 1, 1.5] */
    int e = op(g, VF_OP_EXP, 1, (int[]){c}, VF_F32, s3);          /* foldable after c */
    int y = op(g, VF_OP_ADD, 2, (int[]){x, e}, VF_F32, s3);       /* reads a param: stays */
    int r = op(g, VF_OP_RANDOM_NORMAL, 0, NULL, VF_F32, s3);      /* sources stay */
    outputs(g, 2, (int[]){y, r});
    assert_int_equal(vf_pass_fold(g, &fold_ev, &err), 2);
    assert_int_equal(g->nodes[c].kind, VF_NODE_CONST);
    assert_int_equal(g->nodes[e].kind, VF_NODE_CONST);
    const float *v = g->nodes[e].data;
    vt_assert_close_f32(v, (float[]){expf(0.5f), expf(1), expf(1.5f)}, 3, 0, 1e-6, "folded exp");
    assert_int_equal(g->nodes[y].kind, VF_NODE_OP);
    assert_int_equal(g->nodes[r].kind, VF_NODE_OP);
    assert_int_equal(vf_pass_fold(g, &fold_ev, &err), 0); /* nothing left */
    /* DCE then drops the inputs that folding left unused */
    assert_int_equal(vf_pass_dce(g, &err), 3);  /* a, b, c */
    assert_int_equal(g->n, 4);
    vf_graph_free(g);
}

static void test_fold_symbolic_and_big(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape sym = shp(1, (int64_t[]){3}, 1), big = shp(1, (int64_t[]){100000}, 0);
    int a = fill(g, VF_F32, sym, 1.0), b = fill(g, VF_F32, big, 1.0);
    int c = op(g, VF_OP_NEG, 1, &a, VF_F32, sym), d = op(g, VF_OP_NEG, 1, &b, VF_F32, big);
    outputs(g, 2, (int[]){c, d});
    assert_int_equal(vf_pass_fold(g, &fold_ev, &err), 0);
    vf_graph_free(g);
}

/* vf_pass_splat: a small CONST of one value, bit for bit, becomes a FILL
   of that value (-0, inf, a quiet NaN's payload kept); mixed +0 / -0, a
   signalling NaN (quietened by the trip through double), a large CONST
   and one of several values stay; a reshape or transpose of a
   FILL becomes a FILL of its shape. */
static void test_splat(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s23 = shp(2, (int64_t[]){2, 3}, 0), s32 = shp(2, (int64_t[]){3, 2}, 0);
    float payload, snan;   /* a quiet NaN with a payload survives double; a signalling one is quietened */
    memcpy(&payload, &(uint32_t){0x7fc00123u}, 4);
    memcpy(&snan, &(uint32_t){0x7f800001u}, 4);
    int a = constant(g, 3, (float[]){-0.0f, -0.0f, -0.0f});
    int b = constant(g, 3, (float[]){0.0f, -0.0f, 0.0f});
    int c = constant(g, 3, (float[]){snan, snan, snan});
    int q = constant(g, 3, (float[]){payload, payload, payload});
    int d = constant(g, 3, (float[]){1, 2, 3});
    int e = constant(g, 3, (float[]){INFINITY, INFINITY, INFINITY});
    float *big = malloc(sizeof *big * 5000);
    for (int i = 0; i < 5000; i++) big[i] = 7;
    int f = constant(g, 5000, big);
    free(big);
    int h = fill(g, VF_F32, s23, 2.5);
    int r = add(g, VF_NODE_RESHAPE, 1, &h, VF_F32, s32);
    g->nodes[r].target = s32;
    int t = op(g, VF_OP_TRANSPOSE, 1, &h, VF_F32, s32);
    g->nodes[t].attrs.perm[0] = 1;
    outputs(g, 8, (int[]){a, b, c, d, e, f, r, q});
    assert_int_equal(vf_pass_splat(g, &err), 5);   /* a, e, q, r, t */
    assert_true(vf_node_is_splat(g, a, 0.0) && g->nodes[a].kind == VF_NODE_OP && g->nodes[a].op == VF_OP_FILL);
    assert_true(signbit(g->nodes[a].attrs.value));
    assert_int_equal(g->nodes[a].attrs.dtype, VF_F32);
    assert_int_equal(g->nodes[e].op, VF_OP_FILL);
    assert_true(isinf(g->nodes[e].attrs.value) && g->nodes[e].attrs.value > 0);
    uint32_t back = 0;
    vf_store_f64(&back, VF_F32, 0, g->nodes[q].attrs.value);   /* what codegen and the fill kernel store */
    assert_int_equal(back, 0x7fc00123u);
    const int stay[4] = {b, c, d, f};
    for (int k = 0; k < 4; k++) assert_int_equal(g->nodes[stay[k]].kind, VF_NODE_CONST);
    for (int k = 0; k < 2; k++) {
        const vf_node *n = &g->nodes[k ? t : r];
        assert_true(n->kind == VF_NODE_OP && n->op == VF_OP_FILL && n->n_in == 0 && n->attrs.value == 2.5);
        assert_true(vf_shape_equal(&n->shape, &s32));
    }
    assert_int_equal(vf_pass_splat(g, &err), 0);
    vf_graph_free(g);
}

/* vf_pass_fills: every elementwise reader gets a FILL of its own right
   before it (one for both inputs of k * k); a small FILL
   read by a matmul becomes a CONST of its value; one that is an output,
   and a large one read by a reduction, stay FILLs; a FILL read only by
   elementwise ops is gone. Subgraphs too. */
static void test_fills(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(2, (int64_t[]){4, 4}, 0), sc = shp(0, NULL, 0), big = shp(1, (int64_t[]){5000}, 0);
    int x = param(g, VF_F32, s);
    int k = fill(g, VF_I32, sc, -2147483648.0);             /* read by three elementwise ops */
    int kx = op(g, VF_OP_CAST, 1, &x, VF_I32, s);
    int a = op(g, VF_OP_ADD, 2, (int[]){kx, k}, VF_I32, s);
    int b = op(g, VF_OP_MUL, 2, (int[]){k, k}, VF_I32, sc);
    int c = op(g, VF_OP_MAXIMUM, 2, (int[]){a, k}, VF_I32, s);
    int w = fill(g, VF_F32, s, 0.5);                        /* matmul and add: a CONST and a copy */
    int m = op(g, VF_OP_MATMUL, 2, (int[]){x, w}, VF_F32, s);
    int m2 = op(g, VF_OP_ADD, 2, (int[]){m, w}, VF_F32, s);
    int o = fill(g, VF_F16, sc, 1.0 / 3.0);                 /* an output, and read by neg */
    int on = op(g, VF_OP_NEG, 1, &o, VF_F16, sc);
    int l = fill(g, VF_F32, big, 1.0);                      /* large, read by a reduction */
    int ls = op(g, VF_OP_REDUCE_SUM, 1, &l, VF_F32, sc);
    g->nodes[ls].attrs.axes_mask = 1;
    outputs(g, 6, (int[]){c, b, m2, o, on, ls});
    int before = g->n;
    assert_true(vf_pass_fills(g, &err) > 0);
    /* k: gone, 3 copies; w: a CONST and one copy; o: stays, one copy; l: stays */
    assert_int_equal(g->n, before - 1 + 3 + 1 + 1);
    assert_int_equal(count_kind(g, VF_NODE_CONST, -1), 1);
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) assert_true(n->in[j] < i);   /* still SSA */
        if (n->kind != VF_NODE_OP || vf_op_get(n->op)->kind != VF_KIND_ELEMENTWISE) continue;
        for (int j = 0; j < n->n_in; j++) {
            const vf_node *p = &g->nodes[n->in[j]];
            if (p->kind != VF_NODE_OP || p->op != VF_OP_FILL) continue;
            assert_int_equal(n->in[j], i - 1);   /* its own copy, right before it */
            int readers = 0;
            for (int q = 0; q < g->n; q++)
                for (int r = 0; r < g->nodes[q].n_in; r++)
                    readers += g->nodes[q].in[r] == n->in[j] && (r == 0 || g->nodes[q].in[r - 1] != n->in[j]);
            assert_int_equal(readers, 1);
        }
    }
    /* the outputs: c, b, m2 and on read copies; o and ls keep their FILL and reduction */
    const vf_node *oo = &g->nodes[g->outputs[3]], *ol = &g->nodes[g->nodes[g->outputs[5]].in[0]];
    assert_true(oo->kind == VF_NODE_OP && oo->op == VF_OP_FILL && oo->dtype == VF_F16);
    assert_true(ol->kind == VF_NODE_OP && ol->op == VF_OP_FILL && ol->shape.dim[0] == 5000);
    const vf_node *mm = &g->nodes[g->nodes[g->outputs[2]].in[0]], *wc = &g->nodes[mm->in[1]];
    assert_int_equal(mm->op, VF_OP_MATMUL);
    assert_int_equal(wc->kind, VF_NODE_CONST);
    assert_int_equal(wc->bytes, 16 * sizeof(float));
    for (int i = 0; i < 16; i++) assert_true(((const float *)wc->data)[i] == 0.5f);
    assert_int_equal(vf_pass_fills(g, &err), 0);   /* nothing left to give */
    vf_graph_free(g);
}

static void test_dce_keeps_effects(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(1, (int64_t[]){2}, 0);
    int x = param(g, VF_F32, s);
    int unused = op(g, VF_OP_EXP, 1, &x, VF_F32, s);
    int v = op(g, VF_OP_SIN, 1, &x, VF_F32, s);
    int as = add(g, VF_NODE_ASSIGN, 1, &v, VF_F32, s);          /* a side effect: stays with its input */
    int pr = add(g, VF_NODE_PRINT, 1, &x, VF_F32, s);
    int y = op(g, VF_OP_COS, 1, &x, VF_F32, s);
    outputs(g, 1, &y);
    (void)unused, (void)as, (void)pr;
    assert_int_equal(vf_pass_dce(g, &err), 1);
    assert_int_equal(g->n, 5);
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_EXP), 0);
    assert_int_equal(count_kind(g, VF_NODE_ASSIGN, -1), 1);
    assert_int_equal(count_kind(g, VF_NODE_PRINT, -1), 1);
    /* order of the effects kept: assign before print */
    int ia = -1, ip = -1;
    for (int i = 0; i < g->n; i++) {
        if (g->nodes[i].kind == VF_NODE_ASSIGN) ia = i;
        if (g->nodes[i].kind == VF_NODE_PRINT) ip = i;
    }
    assert_true(ia < ip);
    assert_int_equal(g->nodes[g->outputs[0]].op, VF_OP_COS);
    vf_graph_free(g);
}

static void test_cse(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(1, (int64_t[]){2}, 0);
    int x = param(g, VF_F32, s), w = param(g, VF_F32, s);
    int a1 = op(g, VF_OP_ADD, 2, (int[]){x, w}, VF_F32, s);
    int a2 = op(g, VF_OP_ADD, 2, (int[]){x, w}, VF_F32, s);      /* same as a1 */
    int a3 = op(g, VF_OP_ADD, 2, (int[]){w, x}, VF_F32, s);      /* other order: kept */
    int e1 = op(g, VF_OP_EXP, 1, &a1, VF_F32, s), e2 = op(g, VF_OP_EXP, 1, &a2, VF_F32, s); /* equal once a2 = a1 */
    int c1 = add(g, VF_NODE_CAPTURE, 0, NULL, VF_F32, s), c2 = add(g, VF_NODE_CAPTURE, 0, NULL, VF_F32, s);
    g->nodes[c1].is_var = g->nodes[c2].is_var = true;             /* variable reads never merge */
    int m = op(g, VF_OP_MUL, 2, (int[]){e1, e2}, VF_F32, s);
    int k = op(g, VF_OP_ADD, 2, (int[]){c1, c2}, VF_F32, s);
    outputs(g, 3, (int[]){m, a3, k});
    assert_int_equal(vf_pass_cse(g, &err), 2);
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_EXP), 1);
    assert_int_equal(count_kind(g, VF_NODE_CAPTURE, -1), 2);
    const vf_node *mm = &g->nodes[g->outputs[0]];
    assert_int_equal(mm->in[0], mm->in[1]);
    vf_graph_free(g);
}

static void test_simplify(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(2, (int64_t[]){2, 3}, 1), t = shp(2, (int64_t[]){3, 2}, 2), sc = shp(0, NULL, 0);
    vf_shape si = shp(1, (int64_t[]){4}, 0);
    int x = param(g, VF_F32, s), xi = param(g, VF_I32, si);
    int one = fill(g, VF_F32, sc, 1.0), zero = fill(g, VF_F32, sc, 0.0), izero = fill(g, VF_I32, sc, 0.0);
    int m1 = op(g, VF_OP_MUL, 2, (int[]){x, one}, VF_F32, s);     /* x*1 -> x */
    int a0 = op(g, VF_OP_ADD, 2, (int[]){zero, m1}, VF_F32, s);   /* 0+x -> x */
    int fz = op(g, VF_OP_MUL, 2, (int[]){a0, zero}, VF_F32, s);   /* float x*0: kept (NaN, Inf) */
    int iz = op(g, VF_OP_MUL, 2, (int[]){xi, izero}, VF_I32, si); /* int x*0 -> fill 0 */
    int t1 = op(g, VF_OP_TRANSPOSE, 1, &a0, VF_F32, t);
    g->nodes[t1].attrs.perm[0] = 1, g->nodes[t1].attrs.perm[1] = 0;
    int t2 = op(g, VF_OP_TRANSPOSE, 1, &t1, VF_F32, s);           /* transpose of transpose -> x */
    g->nodes[t2].attrs.perm[0] = 1, g->nodes[t2].attrs.perm[1] = 0;
    vf_shape flat = shp(1, (int64_t[]){6}, 1), back = shp(2, (int64_t[]){2, 3}, 1);
    int r1 = add(g, VF_NODE_RESHAPE, 1, &t2, VF_F32, flat);
    g->nodes[r1].target = shp(1, (int64_t[]){-1}, 0);
    int r2 = add(g, VF_NODE_RESHAPE, 1, &r1, VF_F32, back);        /* reshape of reshape -> reshape of x ... */
    g->nodes[r2].target = shp(2, (int64_t[]){-1, 3}, 0);          /* ... to x's own shape -> x */
    int broad = op(g, VF_OP_ADD, 2, (int[]){one, zero}, VF_F32, sc); /* x+0 where x is the fill: -> fill */
    outputs(g, 4, (int[]){r2, fz, iz, broad});
    int changed = vf_pass_simplify(g, &err);
    assert_true(changed >= 6);
    assert_int_equal(g->outputs[0], x);
    const vf_node *f = &g->nodes[g->outputs[1]];
    assert_int_equal(f->op, VF_OP_MUL);
    assert_int_equal(f->in[0], x);
    assert_int_equal(g->nodes[g->outputs[2]].op, VF_OP_FILL);
    assert_int_equal(g->nodes[g->outputs[2]].n_in, 0);
    assert_int_equal(g->outputs[3], one);
    assert_true(vf_pass_dce(g, &err) > 0);
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_TRANSPOSE), 0);
    assert_int_equal(count_kind(g, VF_NODE_RESHAPE, -1), 0);
    vf_graph_free(g);
}

/* where(c, a, a), the gradient rules' broadcast of a to c's shape
   (vf_ad_broadcast: c = x == x): a when the shapes match; a FILL of its
   shape when a is a FILL and the shape is static; and a condition that
   only such wheres read becomes a FILL of true (so x is no longer read).
   A condition also read elsewhere, and symbolic shapes, stay. */
static void test_simplify_where_same(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(2, (int64_t[]){2, 3}, 0), col = shp(2, (int64_t[]){2, 1}, 0), sc = shp(0, NULL, 0);
    vf_shape sy = shp(2, (int64_t[]){2, 3}, 1);
    int x = param(g, VF_F32, s), k = param(g, VF_F32, col), l = param(g, VF_F32, sc), xs = param(g, VF_F32, sy);
    int one = fill(g, VF_F32, sc, 1.0);
    int c = op(g, VF_OP_EQUAL, 2, (int[]){x, x}, VF_BOOL, s);
    int w1 = op(g, VF_OP_WHERE, 3, (int[]){c, one, one}, VF_F32, s);  /* -> fill 1 of [2,3] */
    int w2 = op(g, VF_OP_WHERE, 3, (int[]){c, k, k}, VF_F32, s);      /* k broadcast: c -> fill true */
    int c0 = op(g, VF_OP_EQUAL, 2, (int[]){l, l}, VF_BOOL, sc);
    int w3 = op(g, VF_OP_WHERE, 3, (int[]){c0, one, one}, VF_F32, sc); /* -> one */
    int c2 = op(g, VF_OP_EQUAL, 2, (int[]){x, x}, VF_BOOL, s);
    int w4 = op(g, VF_OP_WHERE, 3, (int[]){c2, k, k}, VF_F32, s);
    int w5 = op(g, VF_OP_WHERE, 3, (int[]){c2, x, one}, VF_F32, s);     /* c2 picks here: stays */
    int cs = op(g, VF_OP_EQUAL, 2, (int[]){xs, xs}, VF_BOOL, sy);
    int ws = op(g, VF_OP_WHERE, 3, (int[]){cs, k, k}, VF_F32, sy);      /* symbolic: stays */
    outputs(g, 6, (int[]){w1, w2, w3, w4, w5, ws});
    assert_true(vf_pass_simplify(g, &err) >= 3);
    const vf_node *n1 = &g->nodes[w1], *nc = &g->nodes[c];
    assert_int_equal(n1->op, VF_OP_FILL);
    assert_int_equal(n1->n_in, 0);
    assert_true(n1->attrs.value == 1.0 && vf_shape_equal(&n1->shape, &s));
    assert_int_equal(nc->op, VF_OP_FILL);
    assert_int_equal(nc->n_in, 0);
    assert_true(nc->dtype == VF_BOOL && nc->attrs.value == 1.0);
    assert_int_equal(g->nodes[w2].op, VF_OP_WHERE);
    assert_int_equal(g->outputs[2], one);
    assert_int_equal(g->nodes[c2].op, VF_OP_EQUAL);
    assert_int_equal(g->nodes[cs].op, VF_OP_EQUAL);
    assert_int_equal(g->nodes[ws].op, VF_OP_WHERE);
    assert_true(vf_pass_dce(g, &err) > 0);            /* w3, c0 */
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_EQUAL), 2);
    assert_int_equal(vf_pass_simplify(g, &err), 0); /* nothing more */
    vf_graph_free(g);
}

static void test_simplify_keeps_variable_reads(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(1, (int64_t[]){2}, 0);
    int v = add(g, VF_NODE_CAPTURE, 0, NULL, VF_F32, s);
    g->nodes[v].is_var = true;
    int one = fill(g, VF_F32, s, 1.0);
    int m = op(g, VF_OP_MUL, 2, (int[]){v, one}, VF_F32, s); /* the value before a later assign */
    outputs(g, 1, &m);
    assert_int_equal(vf_pass_simplify(g, &err), 0);
    vf_graph_free(g);
}

static void test_cond_to_select(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(1, (int64_t[]){3}, 0), sc = shp(0, NULL, 0);
    int x = param(g, VF_F32, s);
    int m = op(g, VF_OP_REDUCE_MEAN, 1, &x, VF_F32, sc);
    g->nodes[m].attrs.axes_mask = 1;
    int z = fill(g, VF_F32, sc, 0.0);
    int p = op(g, VF_OP_GREATER, 2, (int[]){m, z}, VF_BOOL, sc);
    vf_graph *br[2];
    for (int k = 0; k < 2; k++) {
        br[k] = vf_graph_new(g);
        int bx = param(br[k], VF_F32, s);
        int c = fill(br[k], VF_F32, sc, k ? 0.5 : 2.0);
        int y = op(br[k], VF_OP_MUL, 2, (int[]){bx, c}, VF_F32, s);
        outputs(br[k], 1, &y);
    }
    int cn = add(g, VF_NODE_COND, 2, (int[]){p, x}, VF_F32, s);
    g->nodes[cn].sub[0] = br[0];
    g->nodes[cn].sub[1] = br[1];
    g->nodes[cn].n_out = 1;
    int pj = add(g, VF_NODE_PROJ, 1, &cn, VF_F32, s);
    int out = op(g, VF_OP_NEG, 1, &pj, VF_F32, s);
    outputs(g, 1, &out);
    assert_int_equal(vf_pass_cond_to_select(g, &err), 1);
    assert_int_equal(count_kind(g, VF_NODE_COND, -1), 0);
    assert_int_equal(count_kind(g, VF_NODE_PROJ, -1), 0);
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_WHERE), 1);
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_MUL), 2);
    const vf_node *neg = &g->nodes[g->outputs[0]];
    assert_int_equal(neg->op, VF_OP_NEG);
    assert_int_equal(g->nodes[neg->in[0]].op, VF_OP_WHERE);
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) assert_true(g->nodes[i].in[j] < i); /* still SSA */
    char *txt = vf_graph_to_string(g, "select");
    assert_non_null(strstr(txt, "where("));
    free(txt);
    vf_graph_free(g);
}

static int variable(vf_graph *g, int index, vf_shape s)
{
    int id = add(g, VF_NODE_CAPTURE, 0, NULL, VF_F32, s);
    g->nodes[id].index = index;
    g->nodes[id].is_var = true;
    return id;
}

static int assign(vf_graph *g, int index, int value, vf_shape s)
{
    int id = add(g, VF_NODE_ASSIGN, 1, &value, VF_F32, s);
    g->nodes[id].index = index;
    return id;
}

/* then: y = v * 2 (the old v); v = x; w = v + 1 (the new v); returns y + w.
   else: v = v - x; returns v (the new v).
   Variable 1 is assigned by then only. */
static void test_cond_assign_to_select(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(1, (int64_t[]){3}, 0), sc = shp(0, NULL, 0);
    int p = param(g, VF_BOOL, sc), x = param(g, VF_F32, s);
    vf_graph *br[2];
    br[0] = vf_graph_new(g);
    {
        vf_graph *b = br[0];
        int bx = param(b, VF_F32, s), v = variable(b, 0, s), two = fill(b, VF_F32, sc, 2.0);
        int y = op(b, VF_OP_MUL, 2, (int[]){v, two}, VF_F32, s);
        int a = assign(b, 0, bx, s);
        int one = fill(b, VF_F32, sc, 1.0);
        int w = op(b, VF_OP_ADD, 2, (int[]){a, one}, VF_F32, s);
        assign(b, 1, w, s);
        int r = op(b, VF_OP_ADD, 2, (int[]){y, w}, VF_F32, s);
        outputs(b, 1, &r);
    }
    br[1] = vf_graph_new(g);
    {
        vf_graph *b = br[1];
        int bx = param(b, VF_F32, s), v = variable(b, 0, s);
        int d = op(b, VF_OP_SUB, 2, (int[]){v, bx}, VF_F32, s);
        int a = assign(b, 0, d, s);
        outputs(b, 1, &a);
    }
    int cn = add(g, VF_NODE_COND, 2, (int[]){p, x}, VF_F32, s);
    g->nodes[cn].sub[0] = br[0];
    g->nodes[cn].sub[1] = br[1];
    g->nodes[cn].n_out = 1;
    int pj = add(g, VF_NODE_PROJ, 1, &cn, VF_F32, s);
    int after = variable(g, 0, s); /* a read after the cond */
    int sum = op(g, VF_OP_ADD, 2, (int[]){pj, after}, VF_F32, s);
    outputs(g, 1, &sum);
    assert_int_equal(vf_pass_cond_to_select(g, &err), 1);
    assert_int_equal(count_kind(g, VF_NODE_COND, -1), 0);
    assert_int_equal(count_kind(g, VF_NODE_PROJ, -1), 0);
    assert_int_equal(count_kind(g, VF_NODE_ASSIGN, -1), 2);
    assert_int_equal(count_kind(g, VF_NODE_OP, VF_OP_WHERE), 3);
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) assert_true(g->nodes[i].in[j] < i); /* still SSA */
    int first_assign = -1, n_assign = 0;
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        if (n->kind != VF_NODE_ASSIGN) {
            /* every read of a variable before the assigns: the branches saw the old values */
            if (first_assign >= 0 && n->kind == VF_NODE_OP) assert_true(n->op != VF_OP_WHERE);
            continue;
        }
        if (first_assign < 0) first_assign = i;
        const vf_node *w = &g->nodes[n->in[0]];
        assert_int_equal(w->kind, VF_NODE_OP);
        assert_int_equal(w->op, VF_OP_WHERE);
        assert_int_equal(w->in[0], p);
        const vf_node *a = &g->nodes[w->in[1]], *e = &g->nodes[w->in[2]];
        if (n->index == 0) { /* both assign: where(p, x, v - x) */
            assert_int_equal(w->in[1], x);
            assert_int_equal(e->op, VF_OP_SUB);
            assert_true(g->nodes[e->in[0]].kind == VF_NODE_CAPTURE);
        } else { /* then only: where(p, x + 1, v1) */
            assert_int_equal(n->index, 1);
            assert_int_equal(a->op, VF_OP_ADD);
            assert_int_equal(a->in[0], x); /* read after the assign in then: the new value */
            assert_true(e->kind == VF_NODE_CAPTURE && e->is_var && e->index == 1);
        }
        n_assign++;
    }
    assert_int_equal(n_assign, 2);
    const vf_node *out = &g->nodes[g->outputs[0]];
    assert_int_equal(out->op, VF_OP_ADD);
    assert_true(out->in[1] > first_assign); /* the read after the cond follows the assigns */
    assert_true(g->nodes[out->in[1]].kind == VF_NODE_CAPTURE);
    const vf_node *ow = &g->nodes[out->in[0]];
    assert_int_equal(ow->op, VF_OP_WHERE);
    assert_true(out->in[0] < first_assign);
    const vf_node *t = &g->nodes[ow->in[1]], *y = &g->nodes[t->in[0]];
    assert_int_equal(t->op, VF_OP_ADD);
    assert_int_equal(y->op, VF_OP_MUL);
    assert_true(g->nodes[y->in[0]].kind == VF_NODE_CAPTURE); /* y: the old v */
    assert_int_equal(g->nodes[ow->in[2]].op, VF_OP_SUB);    /* else returns its new v */
    char *txt = vf_graph_to_string(g, "assign_select");
    assert_null(strstr(txt, "cond("));
    assert_non_null(strstr(txt, "assign(%"));
    free(txt);
    vf_graph_free(g);
}

static void test_cond_with_effect_stays(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_graph *g = vf_graph_new(NULL);
    vf_shape sc = shp(0, NULL, 0);
    int p = param(g, VF_BOOL, sc), x = param(g, VF_F32, sc);
    vf_graph *br[2];
    for (int k = 0; k < 2; k++) {
        br[k] = vf_graph_new(g);
        int bx = param(br[k], VF_F32, sc);
        if (k == 0) add(br[k], VF_NODE_PRINT, 1, &bx, VF_F32, sc);
        outputs(br[k], 1, &bx);
    }
    int cn = add(g, VF_NODE_COND, 2, (int[]){p, x}, VF_F32, sc);
    g->nodes[cn].sub[0] = br[0];
    g->nodes[cn].sub[1] = br[1];
    g->nodes[cn].n_out = 1;
    int pj = add(g, VF_NODE_PROJ, 1, &cn, VF_F32, sc);
    outputs(g, 1, &pj);
    assert_int_equal(vf_pass_cond_to_select(g, &err), 0);
    assert_int_equal(vf_pass_dce(g, &err), 0);
    assert_int_equal(count_kind(g, VF_NODE_COND, -1), 1);
    vf_graph_free(g);
}

static void test_shape_inference(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_node n = {.kind = VF_NODE_OP, .op = VF_OP_ADD, .n_in = 2};
    vf_shape in[2] = {shp(2, (int64_t[]){5, 4}, 1), shp(1, (int64_t[]){4}, 0)}, out;
    vf_dtype dts[2] = {VF_F32, VF_F32}, dt;
    assert_int_equal(vf_infer(&n, dts, in, &dt, &out, &err), VF_OK);
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dim[0], 5);
    assert_int_equal(out.sym, 1u);
    in[1] = shp(2, (int64_t[]){128, 4}, 0);
    assert_int_equal(vf_infer(&n, dts, in, &dt, &out, &err), VF_ERROR_SHAPE);
    assert_non_null(strstr(err.message, "vf_add"));
    assert_non_null(strstr(err.message, "[5,4]"));
    assert_non_null(strstr(err.message, "[128,4]"));
    vf_err_clear(&err);
    vf_node mm = {.kind = VF_NODE_OP, .op = VF_OP_MATMUL, .n_in = 2};
    vf_shape ab[2] = {shp(3, (int64_t[]){2, 7, 3}, 2), shp(2, (int64_t[]){3, 5}, 0)};
    assert_int_equal(vf_infer(&mm, dts, ab, &dt, &out, &err), VF_OK);
    assert_int_equal(out.rank, 3);
    assert_int_equal(out.dim[1], 7);
    assert_int_equal(out.dim[2], 5);
    assert_int_equal(out.sym, 2u);
    vf_node r = {.kind = VF_NODE_RESHAPE, .n_in = 1, .target = shp(2, (int64_t[]){-1, 6}, 0)};
    vf_shape rin = shp(2, (int64_t[]){10, 3}, 1);
    assert_int_equal(vf_infer(&r, dts, &rin, &dt, &out, &err), VF_OK);
    assert_int_equal(out.dim[0], 5);
    rin.dim[0] = 11;
    assert_int_equal(vf_infer(&r, dts, &rin, &dt, &out, &err), VF_ERROR_SHAPE);
    assert_non_null(strstr(err.message, "vf_reshape"));
    assert_non_null(strstr(err.message, "[11,3]"));
}

static void test_dump_text(void **state)
{
    (void)state;
    vf_graph *g = vf_graph_new(NULL);
    vf_shape s = shp(2, (int64_t[]){8, 4}, 1);
    int x = param(g, VF_F32, s);
    int y = op(g, VF_OP_RELU, 1, &x, VF_F32, s);
    outputs(g, 1, &y);
    char *txt = vf_graph_to_string(g, "f");
    assert_string_equal(txt, "graph f (1 params) {\n  %0 = param() #0 : f32[?,4]\n  %1 = relu(%0) : f32[?,4]\n"
                             "  return(%1)\n}\n");
    free(txt);
    vf_graph_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold),          cmocka_unit_test(test_fold_symbolic_and_big),
        cmocka_unit_test(test_splat),         cmocka_unit_test(test_fills),
        cmocka_unit_test(test_dce_keeps_effects), cmocka_unit_test(test_cse),
        cmocka_unit_test(test_simplify),      cmocka_unit_test(test_simplify_keeps_variable_reads),
        cmocka_unit_test(test_simplify_where_same),
        cmocka_unit_test(test_cond_to_select), cmocka_unit_test(test_cond_with_effect_stays),
        cmocka_unit_test(test_cond_assign_to_select),
        cmocka_unit_test(test_shape_inference), cmocka_unit_test(test_dump_text),
    };
    return cmocka_run_group_tests(tests, fold_setup, fold_teardown);
}
