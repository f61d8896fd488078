/* The node rules both walkers of concrete graphs share (plan/node_exec.c:
 * the plan builder and the node-by-node interpreter), without a device:
 * the shape an OP, RESHAPE or ASSIGN node gets at concrete inputs, the
 * execs they become, and what an unreadable node reports. The walkers
 * themselves: test_function.c, test_function_plan.c,
 * test_function_variables.c. */
#include "testutil.h"

#include "plan/node_exec.h"

#include <string.h>

static vf_tref ref(vf_buffer *buf, size_t off, vf_dtype dt, int rank, const int64_t *dims)
{
    vf_tref r = {.buf = buf, .offset = off, .dtype = dt, .rank = rank};
    memcpy(r.shape, dims, sizeof(int64_t) * (size_t)rank);
    return r;
}

static void test_op_node(void **state)
{
    (void)state;
    vf_buffer *buf = (vf_buffer *)(uintptr_t)0x1000; /* never read: a name for a buffer */
    int ids[2] = {0, 1};
    vf_node n = {.kind = VF_NODE_OP, .op = VF_OP_ADD, .n_in = 2, .in = ids};
    vf_tref in[2] = {ref(buf, 0, VF_F32, 2, (int64_t[]){2, 3}), ref(buf, 64, VF_F32, 1, (int64_t[]){3})};
    vf_dtype dt;
    vf_shape os;
    vf_err err = {0};
    assert_int_equal(vf_node_infer_at(&n, in, &dt, &os, &err), VF_OK);
    assert_int_equal(dt, VF_F32);
    assert_int_equal(os.rank, 2);
    assert_int_equal(os.dim[0], 2);
    assert_int_equal(os.dim[1], 3);
    vf_tref out = ref(buf, 256, dt, os.rank, os.dim);
    vf_exec e = vf_node_op_exec(&n, in, &out);
    assert_int_equal(e.op, VF_OP_ADD);
    assert_int_equal(e.n_in, 2);
    assert_int_equal(e.in[1].offset, 64);
    assert_int_equal(e.in[1].rank, 1);
    assert_int_equal(e.out.offset, 256);
    assert_int_equal(vf_tref_numel(&e.out), 6);
    /* shapes that do not broadcast: the rule's own message */
    in[1].shape[0] = 4;
    assert_int_equal(vf_node_infer_at(&n, in, &dt, &os, &err), VF_ERROR_SHAPE);
    assert_true(err.message[0] != '\0');
}

static void test_reshape_node(void **state)
{
    (void)state;
    vf_buffer *buf = (vf_buffer *)(uintptr_t)0x1000;
    int ids[1] = {0};
    vf_node n = {.kind = VF_NODE_RESHAPE, .n_in = 1, .in = ids, .target = {.rank = 2, .dim = {3, -1}}};
    vf_tref x = ref(buf, 32, VF_I32, 2, (int64_t[]){2, 3});
    vf_dtype dt;
    vf_shape os;
    vf_err err = {0};
    assert_int_equal(vf_node_infer_at(&n, &x, &dt, &os, &err), VF_OK);
    assert_int_equal(dt, VF_I32);
    assert_int_equal(os.dim[0], 3);
    assert_int_equal(os.dim[1], 2);
    /* a view: same place, new shape */
    vf_tref v = x;
    vf_tref_reshape(&v, &os);
    assert_ptr_equal(v.buf, buf);
    assert_int_equal(v.offset, 32);
    assert_int_equal(v.shape[0], 3);
    vf_shape back = vf_tref_shape(&v);
    assert_int_equal(back.rank, 2);
    assert_int_equal(back.dim[1], 2);
    /* a variable's copy reads the source with the new shape */
    vf_tref dst = ref(buf, 512, VF_I32, os.rank, os.dim);
    vf_exec c = vf_node_copy_exec(&x, &os, &dst);
    assert_int_equal(c.op, VF_OP_COPY);
    assert_int_equal(c.n_in, 1);
    assert_int_equal(c.in[0].offset, 32);
    assert_int_equal(c.in[0].shape[0], 3);
    assert_int_equal(c.in[0].shape[1], 2);
    assert_int_equal(c.out.offset, 512);
    /* 6 elements do not make [4, -1] */
    n.target.dim[0] = 4;
    assert_int_equal(vf_node_infer_at(&n, &x, &dt, &os, &err), VF_ERROR_SHAPE);
}

static void test_assign_node(void **state)
{
    (void)state;
    vf_buffer *a = (vf_buffer *)(uintptr_t)0x1000, *b = (vf_buffer *)(uintptr_t)0x2000;
    int ids[1] = {0};
    vf_node n = {.kind = VF_NODE_ASSIGN, .n_in = 1, .in = ids};
    vf_tref var = ref(a, 0, VF_F32, 2, (int64_t[]){2, 3});
    vf_tref val = ref(b, 0, VF_F32, 1, (int64_t[]){3});
    vf_dtype dt;
    vf_err err = {0};
    /* the value is checked against the variable's shape, given on entry */
    vf_shape vs = vf_tref_shape(&var);
    assert_int_equal(vf_node_infer_at(&n, &val, &dt, &vs, &err), VF_OK);
    val.shape[0] = 4;
    vs = vf_tref_shape(&var);
    assert_int_equal(vf_node_infer_at(&n, &val, &dt, &vs, &err), VF_ERROR_SHAPE);
    assert_non_null(strstr(err.message, "variable"));
    /* the variable's own storage writes nothing */
    assert_true(vf_node_assign_is_self(&var, &var));
    assert_false(vf_node_assign_is_self(&val, &var));
    vf_tref moved = var;
    moved.offset = 4;
    assert_false(vf_node_assign_is_self(&moved, &var));
}

static void test_too_many_inputs(void **state)
{
    (void)state;
    int ids[4] = {0, 1, 2, 3};
    vf_node n = {.kind = VF_NODE_OP, .op = VF_OP_ADD, .n_in = 4, .in = ids};
    vf_tref in[4] = {0};
    vf_dtype dt;
    vf_shape os;
    vf_err err = {0};
    assert_int_equal(vf_node_infer_at(&n, in, &dt, &os, &err), VF_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "4 inputs"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_op_node),
        cmocka_unit_test(test_reshape_node),
        cmocka_unit_test(test_assign_node),
        cmocka_unit_test(test_too_many_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
