/* src/graph/ and src/util/ alone: this program links only their objects
 * (the vkfuse_base_obj target), not the library, so any call from those
 * folders up into plan/, the backends or the frontend fails its link. It
 * builds a graph, infers its shapes, runs the graph passes over it and
 * names a status, the graph layer's API end to end. */
#include "graph/graph.h"
#include "graph/passes.h"
#include "util/dims.h"
#include "util/err.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int op_node(vf_graph *g, vf_op op, int a, int b, const vf_shape *sa, const vf_shape *sb)
{
    int in[2] = {a, b};
    int id = vf_graph_add(g, VF_NODE_OP, 2, in);
    assert_true(id >= 0);
    vf_err err = {0};
    vf_dtype dts[2] = {VF_F32, VF_F32};
    vf_shape shapes[2] = {*sa, *sb};
    g->nodes[id].op = op;
    assert_int_equal(vf_infer_op(op, &g->nodes[id].attrs, 2, dts, shapes, &g->nodes[id].dtype, &g->nodes[id].shape,
                                 &err),
                     VF_OK);
    return id;
}

static void graph_links_alone(void **state)
{
    (void)state;
    vf_graph *g = vf_graph_new(NULL);
    assert_non_null(g);
    vf_shape s23 = {.rank = 2, .dim = {2, 3}}, s3 = {.rank = 1, .dim = {3}};
    int p[2];
    for (int i = 0; i < 2; i++) {
        p[i] = vf_graph_add(g, VF_NODE_PARAM, 0, NULL);
        assert_true(p[i] >= 0);
        g->nodes[p[i]].dtype = VF_F32;
        g->nodes[p[i]].shape = i ? s3 : s23;
        g->nodes[p[i]].index = g->n_params++;
    }
    g->n_explicit = g->n_params;
    /* (x + y) * (x + y): the second add is the first (CSE), broadcast [2,3] + [3] */
    int a1 = op_node(g, VF_OP_ADD, p[0], p[1], &s23, &s3);
    int a2 = op_node(g, VF_OP_ADD, p[0], p[1], &s23, &s3);
    int m = op_node(g, VF_OP_MUL, a1, a2, &g->nodes[a1].shape, &g->nodes[a2].shape);
    assert_int_equal(g->nodes[m].shape.rank, 2);
    assert_int_equal(g->nodes[m].shape.dim[0], 2);
    assert_int_equal(g->nodes[m].shape.dim[1], 3);
    assert_true(vf_graph_set_outputs(g, 1, &m));
    vf_err err = {0};
    assert_true(vf_pass_cse(g, &err) > 0);
    assert_true(vf_pass_dce(g, &err) >= 0);
    assert_int_equal(vf_graph_kernels(g), 2); /* one add, one mul */
    char *text = vf_graph_to_string(g, "alone");
    assert_non_null(text);
    assert_non_null(strstr(text, "mul"));
    free(text);
    vf_graph_free(g);

    /* a shape error: a status and a message, named by util/ */
    vf_shape s4 = {.rank = 1, .dim = {4}};
    vf_dtype dts[2] = {VF_F32, VF_F32};
    vf_shape in[2] = {s23, s4}, out;
    vf_dtype dt;
    vf_status st = vf_infer_op(VF_OP_ADD, &(vf_attrs){0}, 2, dts, in, &dt, &out, &err);
    assert_string_equal(vf_status_name(st), "VF_ERROR_SHAPE");
    assert_true(err.message[0] != '\0');
}

/* One formatter of dims for every layer (util/dims.c): messages, dumps and
   signatures write shapes alike. */
static void dims_as_text(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(vf_dims_fmt(buf, sizeof buf, "", 3, (int64_t[]){2, 3, 4}, 0, NULL), "[2,3,4]");
    assert_string_equal(vf_dims_fmt(buf, sizeof buf, "", 0, NULL, 0, NULL), "[]");
    vf_shape s = {.rank = 2, .dim = {8, 5}, .sym = 1u};
    assert_string_equal(vf_shape_fmt(buf, sizeof buf, VF_F32, &s), "f32[?,5]");
    assert_string_equal(vf_dims_fmt(buf, sizeof buf, "i32", 2, s.dim, s.sym, "-1"), "i32[-1,5]");
    /* cut to the buffer, always terminated */
    char small[5];
    assert_string_equal(vf_dims_fmt(small, sizeof small, "", 3, (int64_t[]){100, 200, 300}, 0, NULL), "[100");
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(graph_links_alone), cmocka_unit_test(dims_as_text)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
