/* The op table's rows (src/graph/op_table.c): every row consistent with
 * itself, and the per-op facts the layers read from it — the attributes an
 * op reads (CSE equality, the dump, saving and loading, including a file
 * written before the mask existed) and the shape-and-dtype engine's
 * messages for graphs from elsewhere. */
#include "testutil.h"

#include "cpu/cpu.h"
#include "saved/saved.h"
#include "autodiff/tape.h"
#include "graph/passes.h"
#include "util/dtype.h"
#include "util/err.h"
#include "vulkan/codegen/kernel.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rows ------------------------------------------------------------- */

/* Each backend's dispatch is a table indexed by op: a new op appended to
   the enum without an entry fails the build (their size checks); an entry
   left out in the middle is NULL, which this finds. */
static void test_every_op_has_kernels(void **state)
{
    (void)state;
    for (int o = 0; o < VF_OP_COUNT; o++) {
        if (!vf_cpu_op_has_kernel((vf_op)o)) fail_msg("op %s has no CPU kernel (cpu_backend.c)", vf_op_get((vf_op)o)->name);
        if (!vf_codegen_op_has_generator((vf_op)o))
            fail_msg("op %s has no GLSL generator (codegen.c)", vf_op_get((vf_op)o)->name);
    }
}

static void test_rows(void **state)
{
    (void)state;
    for (int o = 0; o < VF_OP_COUNT; o++) {
        const vf_op_info *r = vf_op_get((vf_op)o);
        char what[64];
        snprintf(what, sizeof what, "op %d", o);
        if (!r->name) fail_msg("%s has no row", what);
        assert_true(r->arity >= 0 && r->arity <= 3);
        assert_int_equal((r->cond_in | r->index_in) >> r->arity, 0);
        assert_int_equal(r->cond_in & r->index_in, 0);
        if (r->arity) assert_true(vf_op_data_input((vf_op)o) < r->arity);
        assert_int_equal(r->attrs & ~(uint32_t)(VF_ATTR_UELEM * 2 - 1), 0);
        /* a user elementwise op's functions and GLSL are its attrs.uelem's */
        if (o == VF_OP_USER_ELEMENTWISE) assert_true(r->attrs == VF_ATTR_UELEM && !r->cpu_f && !r->glsl_f);
        /* a convolution op reads its geometry */
        if (r->kind == VF_KIND_CONV) assert_true(r->attrs & VF_ATTR_CONV);
        assert_int_not_equal(r->accepts, 0);
        assert_int_equal(r->accepts & ~(uint32_t)VF_MASK_ALL, 0);
        if (r->kind == VF_KIND_SOURCE) assert_int_equal(r->arity, 0);
        if (r->kind == VF_KIND_ELEMENTWISE && o != VF_OP_USER_ELEMENTWISE) {
            /* a reference function for each class of dtype it takes, and its GLSL */
            if (!r->cpu_f && !r->cpu_i) fail_msg("%s (%s): no reference function", what, r->name);
            assert_true(!r->cpu_f == !r->glsl_f);
            assert_true(!r->cpu_i == !r->glsl_i);
            assert_true(!(r->accepts & VF_MASK_FLOAT) || r->cpu_f);
            assert_int_equal(r->empty, VF_EMPTY_UNDEFINED); /* an empty input makes an empty result */
        }
        if (r->kind == VF_KIND_REDUCTION) assert_int_not_equal(r->combine, VF_COMBINE_NONE);
        /* only float results carry gradients: a comparison or argmax has no rule */
        if (r->result == VF_RESULT_BOOL || r->result == VF_RESULT_I32) assert_null(vf_grad_rule_of(o));
        /* the partitioner's, the passes' and the interpreter's facts agree
           with the rest of the row */
        if (r->empty_in != VF_EMPTY_IN_UNDEFINED) assert_int_equal(r->empty, VF_EMPTY_UNDEFINED);
        if (r->empty_in == VF_EMPTY_IN_COPY_OTHER) assert_int_equal(r->arity, 2);
        if (r->empty_in == VF_EMPTY_IN_FILL_VALUE || (r->flags & VF_OPF_LITERAL))
            assert_true(r->attrs & VF_ATTR_VALUE);
        if (r->flags & VF_OPF_LITERAL) assert_int_equal(r->kind, VF_KIND_SOURCE);
        if (r->flags & (VF_OPF_WINDOW_READ | VF_OPF_VIEW | VF_OPF_PERMUTE)) assert_int_equal(r->kind, VF_KIND_MOVEMENT);
        if (r->flags & VF_OPF_PERMUTE) assert_int_equal(r->arity, 1);
        if (r->flags & VF_OPF_NO_FOLD) assert_int_not_equal(r->index_in, 0);
        if (r->row == VF_ROW_CENTER_REDUCE) assert_true(r->kind == VF_KIND_REDUCTION && (r->attrs & VF_ATTR_AXES));
        if (r->row == VF_ROW_CENTER_AXIS) assert_true(r->kind == VF_KIND_ROW && (r->attrs & VF_ATTR_AXIS));
        if (r->row == VF_ROW_CENTER_LABELS) assert_true(r->kind == VF_KIND_ROW && r->index_in);
        if (r->kind == VF_KIND_ROW) assert_int_not_equal(r->row, VF_ROW_CENTER_NONE);
        if (r->epilogue == VF_EPILOGUE_MATMUL) assert_int_equal(r->kind, VF_KIND_MATMUL);
        if (r->epilogue == VF_EPILOGUE_CONV) assert_int_equal(r->kind, VF_KIND_CONV);
    }
    /* the facts that passes, the partitioner, the plan, the check and the
       interpreter used to spell out by op (a switch or an if on the op)
       are the rows' */
    assert_true(vf_op_is_literal(VF_OP_FILL));
    assert_false(vf_op_is_literal(VF_OP_IOTA));
    assert_true(vf_op_holds_uelem(VF_OP_USER_ELEMENTWISE));
    assert_false(vf_op_holds_uelem(VF_OP_USER_KERNEL));
    int window = 0, view = 0, no_fold = 0, centers = 0;
    for (int o = 0; o < VF_OP_COUNT; o++) {
        const vf_op_info *r = vf_op_get((vf_op)o);
        window += !!(r->flags & VF_OPF_WINDOW_READ);
        view += !!(r->flags & VF_OPF_VIEW);
        no_fold += !!(r->flags & VF_OPF_NO_FOLD);
        centers += r->row != VF_ROW_CENTER_NONE;
    }
    assert_int_equal(window, 4); /* slice, pad, concat, slice_grad */
    assert_int_equal(view, 2);   /* slice, concat */
    assert_int_equal(no_fold, 2); /* gather, scatter_add */
    assert_int_equal(centers, 9); /* softmax, log_softmax, xent, sum, mean, max, min, prod, logsumexp */
    assert_int_equal(vf_op_get(VF_OP_NORM)->row, VF_ROW_CENTER_NONE);
    assert_true(vf_op_get(VF_OP_TRANSPOSE)->flags & VF_OPF_PERMUTE);
    assert_int_equal(vf_op_get(VF_OP_MATMUL)->epilogue, VF_EPILOGUE_MATMUL);
    assert_int_equal(vf_op_get(VF_OP_CONV2D)->epilogue, VF_EPILOGUE_CONV);
    assert_int_equal(vf_op_get(VF_OP_CONV2D_BACKPROP_INPUT)->epilogue, VF_EPILOGUE_NONE);
    assert_int_equal(vf_op_get(VF_OP_SCATTER_ADD)->empty_in, VF_EMPTY_IN_COPY_FIRST);
    /* the facts layers used to spell out by op */
    assert_int_equal(vf_op_data_input(VF_OP_WHERE), 1);
    assert_true(vf_op_input_is_cond(VF_OP_WHERE, 0));
    assert_int_equal(vf_op_data_input(VF_OP_SPARSE_XENT), 1);
    assert_true(vf_op_input_is_index(VF_OP_SPARSE_XENT, 0));
    assert_int_equal(vf_op_data_input(VF_OP_ADD), 0);
    assert_true(vf_op_empty_value(VF_OP_REDUCE_SUM) == 0.0);
    assert_true(isnan(vf_op_empty_value(VF_OP_REDUCE_MEAN)));
    assert_int_equal(vf_op_get(VF_OP_REDUCE_MAX)->empty, VF_EMPTY_UNDEFINED);
}

/* ---- attributes ----------------------------------------------------------- */

static vf_shape shp(int rank, const int64_t *d)
{
    vf_shape s = {.rank = rank};
    for (int i = 0; i < rank; i++) s.dim[i] = d[i];
    return s;
}

static int node(vf_graph *g, vf_node_kind k, vf_op op, int n_in, const int *in, vf_dtype dt, vf_shape s)
{
    int id = vf_graph_add(g, k, n_in, in);
    assert_true(id >= 0);
    g->nodes[id].op = op;
    g->nodes[id].dtype = dt;
    g->nodes[id].shape = s;
    return id;
}

/* Two argmax nodes that differ only in a field argmax does not read (the
   axes_mask the entry point derives from the axis) are one value; two sums
   over different axes are two. */
static void test_cse_compares_read_fields(void **state)
{
    (void)state;
    vf_graph *g = vf_graph_new(NULL);
    int64_t d[2] = {3, 4};
    int x = node(g, VF_NODE_PARAM, 0, 0, NULL, VF_F32, shp(2, d));
    g->nodes[x].index = g->n_params++;
    g->n_explicit = g->n_params;
    int a = node(g, VF_NODE_OP, VF_OP_ARGMAX, 1, &x, VF_I32, shp(1, d));
    int b = node(g, VF_NODE_OP, VF_OP_ARGMAX, 1, &x, VF_I32, shp(1, d));
    g->nodes[a].attrs = (vf_attrs){.axis = 1, .axes_mask = 2};
    g->nodes[b].attrs = (vf_attrs){.axis = 1};
    int s0 = node(g, VF_NODE_OP, VF_OP_REDUCE_SUM, 1, &x, VF_F32, shp(1, d));
    int s1 = node(g, VF_NODE_OP, VF_OP_REDUCE_SUM, 1, &x, VF_F32, shp(1, d));
    g->nodes[s0].attrs.axes_mask = 1;
    g->nodes[s1].attrs = (vf_attrs){.axes_mask = 2, .axis = 1};
    assert_true(vf_graph_set_outputs(g, 4, (int[]){a, b, s0, s1}));
    vf_err err = {0};
    assert_int_equal(vf_pass_cse(g, &err), 1);
    assert_int_equal(g->outputs[0], g->outputs[1]);
    assert_int_not_equal(g->outputs[2], g->outputs[3]);
    /* the dump shows what each op reads, nothing else */
    char *text = vf_graph_to_string(g, "t");
    assert_non_null(text);
    assert_non_null(strstr(text, "argmax(%0) {axis=1} : i32[3]"));
    assert_non_null(strstr(text, "reduce_sum(%0) {axes=0x1} : f32[3]"));
    assert_null(strstr(text, "{axes=0x2}{axis"));
    free(text);
    vf_graph_free(g);
}

static void test_attrs_read(void **state)
{
    (void)state;
    vf_attrs all = {.axes_mask = 3, .keepdims = true, .axis = 1, .perm = {1, 0}, .trans_a = true,
                    .trans_b = true, .dtype = VF_I32, .value = 2.5, .seed = 9};
    vf_attrs r = vf_attrs_read(VF_OP_ADD, &all);
    vf_attrs zero = {0};
    assert_true(vf_attrs_equal(VF_OP_ADD, &all, &zero));
    assert_int_equal(r.axes_mask, 0);
    r = vf_attrs_read(VF_OP_MATMUL, &all);
    assert_true(r.trans_a && r.trans_b && r.axis == 0 && r.seed == 0);
    assert_false(vf_attrs_equal(VF_OP_MATMUL, &all, &zero));
    r = vf_attrs_read(VF_OP_CAST, &all);
    assert_int_equal(r.dtype, VF_I32);
    assert_true(r.value == 0.0);
    r = vf_attrs_read(VF_OP_FILL, &all);
    assert_true(r.value == 2.5);
    assert_int_equal(r.dtype, VF_F32);
    /* the window fields: read by slice and pad (pad also the value), not by others */
    vf_attrs sl = all;
    sl.lo[1] = 2, sl.hi[0] = -1, sl.step[1] = -3;
    r = vf_attrs_read(VF_OP_SLICE, &sl);
    assert_true(r.lo[1] == 2 && r.hi[0] == -1 && r.step[1] == -3 && r.value == 0.0 && r.axis == 0);
    r = vf_attrs_read(VF_OP_PAD, &sl);
    assert_true(r.lo[1] == 2 && r.value == 2.5);
    r = vf_attrs_read(VF_OP_CONCAT, &sl);
    assert_true(r.lo[1] == 0 && r.step[1] == 0 && r.axis == 1);
    assert_false(vf_attrs_equal(VF_OP_SLICE, &sl, &all));
    assert_true(vf_attrs_equal(VF_OP_ADD, &sl, &all));
    /* NumPy's rules for one dim */
    int64_t start;
    assert_int_equal(vf_slice_dim(10, -3, INT64_MAX, 1, &start), 3);
    assert_int_equal(start, 7);
    assert_int_equal(vf_slice_dim(10, INT64_MAX, INT64_MAX, -1, &start), 10);
    assert_int_equal(start, 9);
    assert_int_equal(vf_slice_dim(10, 5, 100, 2, &start), 3);
    assert_int_equal(vf_slice_dim(10, -100, 3, -1, &start), 0);
    assert_int_equal(vf_slice_dim(0, 0, INT64_MAX, -2, &start), 0);
    assert_int_equal(vf_slice_dim(10, INT64_MIN, INT64_MIN, 1, &start), 0);
    /* sizes that do not depend on a symbolic dim's: both bounds on one side,
       and the traced size holding them */
    assert_true(vf_slice_fixed(5, 0, 1, 1));                     /* x[:1] */
    assert_false(vf_slice_fixed(0, 0, 1, 1));                    /* x[:1] of 0: 0 now, 1 later */
    assert_true(vf_slice_fixed(5, 2, 5, 1) && !vf_slice_fixed(4, 2, 5, 1)); /* x[2:5] */
    assert_true(vf_slice_fixed(5, -3, INT64_MAX, 1));            /* x[-3:] */
    assert_true(vf_slice_fixed(5, -1, -4, -1));                  /* x[-1:-4:-1] */
    assert_true(vf_slice_fixed(5, 2, INT64_MAX, -1));            /* x[2::-1] */
    assert_false(vf_slice_fixed(5, 1, INT64_MAX, 1));            /* x[1:] */
    assert_false(vf_slice_fixed(5, 1, -1, 1));                   /* x[1:-1] */
    assert_false(vf_slice_fixed(5, INT64_MAX, INT64_MAX, -1));   /* x[::-1] */
    assert_true(vf_slice_fixed(5, INT64_MIN, 2, 1));             /* from before the start */
    assert_int_equal(vf_pad_dim(3, 1, 2, 3), 1 + 2 + 3 + 2 * 2);
    assert_int_equal(vf_pad_dim(0, 1, 2, 3), 3);
    /* conv2d reads its geometry and nothing else; two geometries are two values */
    vf_attrs c1 = all, c2 = all;
    c1.conv = (vf_conv_attrs){.stride = {2, 1}, .dilation = {1, 1}, .pad = {0, 1, 0, 1}, .groups = 1};
    c2.conv = c1.conv;
    c2.conv.pad[3] = 0;
    r = vf_attrs_read(VF_OP_CONV2D, &c1);
    assert_true(r.conv.stride[0] == 2 && r.conv.pad[3] == 1 && r.seed == 0 && !r.trans_a);
    assert_false(vf_attrs_equal(VF_OP_CONV2D, &c1, &c2));
    assert_true(vf_attrs_equal(VF_OP_MATMUL, &c1, &c2));
}

/* ---- saved files with fields an op does not read --------------------------- */

static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_cast(ctx, vf_argmax(ctx, in[0], 1), VF_F32);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* The offset of the attrs of the first argmax node in a saved file: a node
   is u8 kind, u8 dtype, u32 op, u32 n_in, the inputs, a shape (u8 rank, u32
   sym, u64 dims), u32 index, u8 is_var, then the attrs (docs/FORMAT.md). */
static size_t argmax_attrs(const uint8_t *b, size_t n)
{
    for (size_t i = 0; i + 16 < n; i++) {
        if (b[i] != VF_NODE_OP || b[i + 1] != VF_I32 || rd32(b + i + 2) != VF_OP_ARGMAX || rd32(b + i + 6) != 1) continue;
        size_t at = i + 10 + 4;                 /* past the input */
        unsigned rank = b[at];
        at += 1 + 4 + 8 * (size_t)rank + 4 + 1; /* shape, index, is_var */
        return at;
    }
    fail_msg("no argmax node in the saved file");
    return 0;
}

/* Before the attrs mask, the writer kept every field as the node had it:
   argmax carried the axes_mask its entry point derives. Such a file loads
   and runs the same, and saving it again writes 0 there. */
static void test_old_file_with_unread_fields(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "am", .body = body, .n_inputs = 1,
                                                                   .n_outputs = 1});
    float x[6] = {1, 5, 2, 7, 0, 3};
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 3}, x), *out = NULL;
    assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
    uint8_t *b = NULL;
    size_t n = 0;
    assert_int_equal(vf_saved_write_mem(fn, NULL, 0, &b, &n), VF_OK);
    size_t at = argmax_attrs(b, n);
    assert_int_equal(rd32(b + at), 0); /* written as 0: argmax reads axis only */
    uint8_t *old = malloc(n);
    memcpy(old, b, n);
    wr32(old + at, 1u << 1); /* as the old writer kept it */
    wr64(old + n - 8, vf_fnv1a64(VF_FNV_INIT, old, n - 8));
    vf_function *loaded = NULL;
    if (vf_saved_load_mem(ctx, old, n, "old", &loaded) != VF_OK) fail_msg("old file: %s", vf_error_message(ctx));
    vf_tensor *got = NULL;
    assert_int_equal(vf_function_call(loaded, &in, &got), VF_OK);
    float *g = vt_read(got), want[2] = {1, 0};
    vt_assert_close_f32(g, want, 2, 0, 0, "argmax of a loaded old file");
    free(g);
    uint8_t *again = NULL;
    size_t n2 = 0;
    assert_int_equal(vf_saved_write_mem(loaded, NULL, 0, &again, &n2), VF_OK);
    assert_int_equal(n2, n);
    assert_int_equal(rd32(again + argmax_attrs(again, n2)), 0);
    free(again);
    free(old);
    free(b);
    vf_function_destroy(loaded);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* A loaded node is checked by the same engine as a call: its input dtypes
   against the row, and the attributes the op reads. */
static void test_engine_on_foreign_nodes(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_dtype dts[3] = {VF_F32, VF_F32, VF_F32}, dt;
    int64_t d[2] = {2, 3};
    vf_shape in[3] = {shp(2, d), shp(2, d), shp(2, d)}, out;
    assert_int_equal(vf_infer_op(VF_OP_WHERE, &(vf_attrs){0}, 3, dts, in, &dt, &out, &err), VF_ERROR_DTYPE);
    assert_non_null(strstr(err.message, "vf_where: cond is f32 but must be bool"));
    vf_err_clear(&err);
    assert_int_equal(vf_infer_op(VF_OP_SPARSE_XENT, &(vf_attrs){.axis = 1}, 2, dts, in, &dt, &out, &err),
                     VF_ERROR_DTYPE);
    assert_non_null(strstr(err.message, "labels are f32"));
    vf_err_clear(&err);
    assert_int_equal(vf_infer_op(VF_OP_ADD, &(vf_attrs){0}, 1, dts, in, &dt, &out, &err), VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "vf_add: 1 inputs given; the op takes 2"));
    vf_err_clear(&err);
    assert_int_equal(vf_infer_op(VF_OP_TRANSPOSE, &(vf_attrs){.perm = {0, 0}}, 1, dts, in, &dt, &out, &err),
                     VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "perm is not a permutation"));
    vf_err_clear(&err);
    assert_int_equal(vf_infer_op(VF_OP_REDUCE_SUM, &(vf_attrs){.axes_mask = 4}, 1, dts, in, &dt, &out, &err),
                     VF_ERROR_INVALID_ARGUMENT);
    vf_err_clear(&err);
    assert_int_equal(vf_infer_op(VF_OP_SOFTMAX, &(vf_attrs){.axis = 2}, 1, dts, in, &dt, &out, &err),
                     VF_ERROR_INVALID_ARGUMENT);
    vf_err_clear(&err);
    assert_int_equal(vf_infer_op(VF_OP_CAST, &(vf_attrs){.dtype = (vf_dtype)9}, 1, dts, in, &dt, &out, &err),
                     VF_ERROR_DTYPE);
    vf_err_clear(&err);
    /* and what it accepts: argmax drops its axis, where takes its data dtype from input 1 */
    assert_int_equal(vf_infer_op(VF_OP_ARGMAX, &(vf_attrs){.axis = 1}, 1, dts, in, &dt, &out, &err), VF_OK);
    assert_int_equal(dt, VF_I32);
    assert_int_equal(out.rank, 1);
    vf_dtype wd[3] = {VF_BOOL, VF_I32, VF_I32};
    assert_int_equal(vf_infer_op(VF_OP_WHERE, &(vf_attrs){0}, 3, wd, in, &dt, &out, &err), VF_OK);
    assert_int_equal(dt, VF_I32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_every_op_has_kernels),
        cmocka_unit_test(test_cse_compares_read_fields),
        cmocka_unit_test(test_attrs_read),
        cmocka_unit_test(test_old_file_with_unread_fields),
        cmocka_unit_test(test_engine_on_foreign_nodes),
    };
    return VT_RUN_GROUP(tests);
}
