/* vf_function_info_get and vf_saved_file_version (include/vkfuse_saved.h):
 * a traced function's concrete functions, node counts and user ops; the
 * same function saved and loaded into a context without its user ops
 * (have_c false) and into the one that has them (both matched by name
 * and code, so have_c true); symbolic dims;
 * misuse. The CLI built on it is tested by cli_saved. */
#include "kernels_common.h"
#include "vkfuse_kernel.h"
#include "vkfuse_saved.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void halve_c(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = in[0][i] * 0.5f;
}

typedef struct ops {
    vf_kernel *cube;
    vf_elementwise_op *halve;
} ops;

/* cube(x) -> halve -> + x, and its sum */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    ops *o = user;
    vf_tensor *c = NULL;
    vf_status s = vf_kernel_call(o->cube, 1, in, NULL, &c);
    if (s != VF_OK) return s;
    vf_tensor *h = vf_elementwise_call(o->halve, 1, &c);
    out[0] = vf_add(ctx, h, in[0]);
    out[1] = vf_reduce_sum(ctx, out[0], 0, NULL, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static const vf_user_op_info *find_user(const vf_function_info *info, const char *name)
{
    for (int i = 0; i < info->n_user_ops; i++)
        if (!strcmp(info->user_ops[i].name, name)) return &info->user_ops[i];
    fail_msg("no user op '%s'", name);
    return NULL;
}

static int count_of(const vf_concrete_info *c, const char *op)
{
    for (int k = 0; k < c->n_ops; k++)
        if (!strcmp(c->ops[k].op, op)) return c->ops[k].count;
    return 0;
}

static void traced_saved_loaded(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    ops o = {vt_cube_kernel(ctx, false),
             vf_elementwise_create(ctx, &(vf_elementwise_desc){.name = "halve", .n_inputs = 1, .expr = "x0 * 0.5",
                                                               .cpu = halve_c})};
    assert_non_null(o.halve);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "infofn", .body = body, .user = &o,
                                                                   .n_inputs = 1, .n_outputs = 2});
    float x[6] = {1, 2, 3, 4, 5, 6};
    for (int64_t n = 3; n <= 6; n += 3) { /* two signatures: two concrete functions */
        vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 1, &n, x), *out[2];
        assert_int_equal(vf_function_call(fn, &in, out), VF_OK);
    }
    vf_function_info *info = vf_function_info_get(fn);
    assert_non_null(info);
    assert_string_equal(info->name, "infofn");
    assert_int_equal(info->n_inputs, 1);
    assert_int_equal(info->n_outputs, 2);
    assert_false(info->has_signature);
    assert_null(info->signature);
    assert_int_equal(info->n_concrete, 2);
    for (int c = 0; c < 2; c++) {
        const vf_concrete_info *ci = &info->concrete[c];
        assert_int_equal(ci->inputs[0].dtype, VF_F32);
        assert_int_equal(ci->inputs[0].rank, 1);
        assert_int_equal(ci->inputs[0].shape[0], 3 * (c + 1));
        assert_int_equal(ci->traced_inputs[0], 3 * (c + 1));
        assert_int_equal(ci->n_outputs, 2);
        assert_int_equal(ci->outputs[0].shape[0], 3 * (c + 1));
        assert_int_equal(ci->outputs[1].rank, 0);
        int total = 0;
        for (int k = 0; k < ci->n_ops; k++) {
            total += ci->ops[k].count;
            if (k) assert_true(ci->ops[k - 1].count > ci->ops[k].count ||
                               (ci->ops[k - 1].count == ci->ops[k].count && strcmp(ci->ops[k - 1].op, ci->ops[k].op) < 0));
        }
        assert_int_equal(total, ci->n_nodes);
        assert_int_equal(count_of(ci, "cube"), 1);
        assert_int_equal(count_of(ci, "halve"), 1);
        assert_int_equal(count_of(ci, "reduce_sum"), 1);
        assert_int_equal(ci->n_captures, 0);
    }
    assert_int_equal(info->n_user_ops, 2);
    assert_true(find_user(info, "cube")->kernel && find_user(info, "cube")->have_c);
    assert_true(!find_user(info, "halve")->kernel && find_user(info, "halve")->have_c);
    vf_free(info);

    char path[] = "/tmp/test_saved_info_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    uint32_t version = 0;
    assert_int_equal(vf_saved_file_version(path, &version), VF_OK);
    assert_int_equal(version, 2);

    /* a fresh context has neither op: both named, without their C functions */
    vf_context *other = vt_context(VF_BACKEND_CPU);
    vf_function *bare = NULL;
    assert_int_equal(vf_function_load(other, path, &bare), VF_OK);
    info = vf_function_info_get(bare);
    assert_non_null(info);
    assert_int_equal(info->n_concrete, 2);
    assert_int_equal(info->n_user_ops, 2);
    assert_false(find_user(info, "cube")->have_c);
    assert_false(find_user(info, "halve")->have_c);
    assert_int_equal(count_of(&info->concrete[1], "halve"), 1);
    vf_free(info);
    vf_function_destroy(bare);
    vt_context_done(other);

    /* the saving context: its ops are matched (name and code) and used */
    vf_function *again = NULL;
    assert_int_equal(vf_function_load(ctx, path, &again), VF_OK);
    info = vf_function_info_get(again);
    assert_true(find_user(info, "cube")->have_c);
    assert_true(find_user(info, "halve")->have_c);
    vf_free(info);
    vf_function_destroy(again);
    remove(path);

    vf_function_destroy(fn);
    vf_kernel_destroy(o.cube);
    vf_elementwise_destroy(o.halve);
    vt_context_done(ctx);
}

static vf_status scale_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_mul(ctx, in[0], user);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void symbolic_dims_and_variables(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor *w = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 2.0));
    const vf_tensor_spec sig = {VF_F32, 2, {-1, 4}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "scale", .body = scale_body, .user = w,
                                                                   .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    vf_tensor *in = vf_fill(ctx, VF_F32, 2, (int64_t[]){5, 4}, 1.0), *out;
    assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
    vf_function_info *info = vf_function_info_get(fn);
    assert_non_null(info);
    assert_true(info->has_signature);
    assert_int_equal(info->signature[0].shape[0], -1);
    assert_int_equal(info->signature[0].shape[1], 4);
    const vf_concrete_info *c = &info->concrete[0];
    assert_int_equal(c->inputs[0].shape[0], -1);
    assert_int_equal(c->traced_inputs[0], 5);
    assert_int_equal(c->traced_inputs[1], 4);
    assert_int_equal(c->outputs[0].shape[0], -1);
    assert_int_equal(c->outputs[0].shape[1], 4);
    assert_int_equal(c->n_captures, 1);
    assert_int_equal(c->n_variables, 1);
    assert_int_equal(count_of(c, "variable"), 1);
    assert_int_equal(info->n_user_ops, 0);
    vf_free(info);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

static void misuse(void **state)
{
    (void)state;
    assert_null(vf_function_info_get(NULL));
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.body = scale_body, .n_inputs = 1, .n_outputs = 1});
    vf_function_info *info = vf_function_info_get(fn); /* no concrete function yet: an empty answer */
    assert_non_null(info);
    assert_int_equal(info->n_concrete, 0);
    vf_free(info);
    vf_function_destroy(fn);
    assert_null(vf_function_info_get(fn));
    assert_int_equal(vf_status_get(ctx), VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vf_error_message(ctx), "was destroyed"));
    vf_error_clear(ctx);
    vt_context_done(ctx);

    uint32_t v = 7;
    assert_int_equal(vf_saved_file_version("/nonexistent/x.vkf", &v), VF_ERROR_IO);
    char path[] = "/tmp/test_saved_info_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "VKFUSEFN\x02", 9), 9); /* too short for the version */
    close(fd);
    assert_int_equal(vf_saved_file_version(path, &v), VF_ERROR_FORMAT);
    assert_int_equal(vf_saved_file_version(NULL, &v), VF_ERROR_INVALID_ARGUMENT);
    remove(path);
    assert_int_equal(v, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(traced_saved_loaded),
        cmocka_unit_test(symbolic_dims_and_variables),
        cmocka_unit_test(misuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
