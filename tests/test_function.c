/* vf_function: trace counts, signatures, traced == eager for every op,
 * control flow, printing and every error message (variables in traced
 * functions: tests/test_function_variables.c). Each test runs on the CPU
 * backend and, when present, on Vulkan. */
#include "testutil.h"

#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static vf_tensor *f32(vf_context *ctx, int rank, const int64_t *shape, const float *data)
{
    return vf_tensor_from_host(ctx, VF_F32, rank, shape, data);
}

/* ---- trace counts ------------------------------------------------------------ */

static int body_calls;

static vf_status affine(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    body_calls++;
    vf_tensor *two = vf_fill(ctx, VF_F32, 0, NULL, 2.0), *one = vf_fill(ctx, VF_F32, 0, NULL, 1.0);
    out[0] = vf_add(ctx, vf_mul(ctx, in[0], two), one);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* n_outputs -1: a binding's body (Python's vkfuse.function) says how many
   outputs it has by setting them; later traces must set as many. */
static int n_set;

static vf_status sets_n(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    for (int k = 0; k < n_set; k++) out[k] = vf_add(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, (double)k));
    if (n_set == 2) out[3] = in[0]; /* a gap: output 2 NULL */
    return VF_OK;
}

static void test_outputs_from_trace(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sets_n", .body = sets_n,
                                                                     .n_inputs = 1, .n_outputs = -1});
        assert_non_null(fn);
        int n_in = 0, n_out = 0;
        assert_int_equal(vf_function_io_count(fn, &n_in, &n_out), VF_OK);
        assert_int_equal(n_in, 1);
        assert_int_equal(n_out, -1);
        vf_tensor *x = f32(ctx, 1, (int64_t[]){2}, (float[]){1, 2}), *y[VF_FUNCTION_MAX_OUTPUTS] = {NULL};
        /* not traced yet: eagerly the count is unknown */
        vf_run_functions_eagerly(ctx, true);
        assert_int_equal(vf_function_call(fn, &x, y), VF_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vf_error_message(ctx), "n_outputs -1"));
        vf_error_clear(ctx);
        vf_run_functions_eagerly(ctx, false);
        n_set = 2; /* outputs 0, 1 and 3: refused, still undecided */
        assert_int_equal(vf_function_call(fn, &x, y), VF_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vf_error_message(ctx), "set output 3 but left output 2 NULL"));
        vf_error_clear(ctx);
        assert_int_equal(vf_function_io_count(fn, NULL, &n_out), VF_OK);
        assert_int_equal(n_out, -1);
        n_set = 3;
        assert_int_equal(vf_function_call(fn, &x, y), VF_OK);
        assert_int_equal(vf_function_io_count(fn, NULL, &n_out), VF_OK);
        assert_int_equal(n_out, 3);
        float *got = vt_read(y[2]);
        vt_assert_close_f32(got, (float[]){3, 4}, 2, 0, 0, "output 2");
        free(got);
        assert_null(y[3]);
        /* a retrace must set as many */
        vf_tensor *x3 = f32(ctx, 1, (int64_t[]){3}, (float[]){1, 2, 3});
        n_set = 1;
        assert_int_equal(vf_function_call(fn, &x3, y), VF_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vf_error_message(ctx), "left output 1 NULL"));
        vf_error_clear(ctx);
        assert_null(vf_function_create(ctx, &(vf_function_desc){.body = sets_n, .n_outputs = -2}));
        assert_non_null(strstr(vf_error_message(ctx), "or -1 (decided by the first trace)"));
        vf_error_clear(ctx);
        assert_int_equal(vf_function_io_count(NULL, &n_in, &n_out), VF_ERROR_INVALID_ARGUMENT);
        assert_int_equal(n_out, -1);
        vf_function_destroy(fn);
        vf_context_destroy(ctx);
    }
}

static void test_trace_counts(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "affine", .body = affine,
                                                                     .n_inputs = 1, .n_outputs = 1});
        assert_non_null(fn);
        body_calls = 0;
        float x4[4] = {1, 2, 3, 4}, x5[5] = {1, 2, 3, 4, 5};
        vf_tensor *a = f32(ctx, 1, (int64_t[]){4}, x4), *c = f32(ctx, 1, (int64_t[]){5}, x5), *y = NULL;
        for (int i = 0; i < 3; i++) assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
        float *got = vt_read(y);
        vt_assert_close_f32(got, (float[]){3, 5, 7, 9}, 4, 0, 0, "affine");
        free(got);
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        assert_int_equal(st.calls, 3);
        assert_int_equal(body_calls, 1);
        assert_true(st.kernels >= 1);
        assert_int_equal(st.dispatches_per_call, st.kernels);
        /* a new shape retraces, and says why */
        assert_int_equal(vf_function_call(fn, &c, &y), VF_OK);
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 2);
        assert_int_equal(st.retraces, 1);
        assert_string_equal(vf_function_retrace_reason(fn), "input 0 dim 0: traced 4, got 5");
        /* both concrete functions stay cached */
        assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 2);
        /* a new dtype retraces too */
        vf_tensor *ai = vf_cast(ctx, a, VF_I32);
        vf_tensor *two_i = NULL;
        (void)two_i;
        vf_function_call(fn, &ai, &y); /* fails: mul of i32 by an f32 fill */
        vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_mul", NULL);
        assert_string_equal(vf_function_retrace_reason(fn), "input 0 dtype: traced f32, got i32");
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

static void test_retrace_warning(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "grows", .body = affine,
                                                                 .n_inputs = 1, .n_outputs = 1});
    float x[16] = {0};
    vf_tensor *y;
    for (int n = 1; n <= 7; n++) {
        vf_tensor *a = f32(ctx, 1, (int64_t[]){n}, x);
        assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    }
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    assert_int_equal(st.traces, 7);
    assert_int_equal(st.retraces, 6);
    assert_string_equal(vf_function_retrace_reason(fn), "input 0 dim 0: traced 6, got 7");
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- input signatures ----------------------------------------------------------- */

typedef struct { vf_tensor *w; } model;

static vf_status predict(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    body_calls++;
    vf_tensor *h = vf_relu(ctx, vf_matmul(ctx, in[0], m->w));                 /* [B,3] */
    vf_tensor *flat = vf_reshape(ctx, h, 1, (int64_t[]){-1});                  /* [B*3] */
    out[0] = vf_softmax(ctx, h, -1);
    out[1] = vf_reduce_sum(ctx, flat, 0, NULL, false);
    out[2] = vf_reduce_mean(ctx, in[0], 1, (int[]){1}, true);                 /* [B,1] */
    return out[0] && out[1] && out[2] ? VF_OK : vf_status_get(ctx);
}

static void eager_predict(vf_context *ctx, model *m, vf_tensor *x, vf_tensor **out)
{
    vf_run_functions_eagerly(ctx, true);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.body = predict, .user = m, .n_inputs = 1, .n_outputs = 3});
    assert_int_equal(vf_function_call(fn, &x, out), VF_OK);
    vf_function_destroy(fn);
    vf_run_functions_eagerly(ctx, false);
}

static void test_signature(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        float w[12];
        vt_fill_uniform(w, 12, -1, 1, 3);
        model m = {.w = f32(ctx, 2, (int64_t[]){4, 3}, w)};
        vf_tensor_spec sig = {.dtype = VF_F32, .rank = 2, .shape = {-1, 4}};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "predict", .body = predict, .user = &m,
                                                                     .n_inputs = 1, .n_outputs = 3, .input_signature = &sig});
        body_calls = 0;
        for (int batch = 1; batch <= 9; batch += 4) {
            float x[36];
            vt_fill_uniform(x, (size_t)batch * 4, -1, 1, (uint64_t)batch);
            vf_tensor *t = f32(ctx, 2, (int64_t[]){batch, 4}, x), *got[3], *want[3];
            assert_int_equal(vf_function_call(fn, &t, got), VF_OK);
            eager_predict(ctx, &m, t, want);
            for (int k = 0; k < 3; k++) {
                assert_int_equal(vf_tensor_rank(got[k]), vf_tensor_rank(want[k]));
                assert_int_equal(vf_tensor_numel(got[k]), vf_tensor_numel(want[k]));
                float *g = vt_read(got[k]), *e = vt_read(want[k]);
                vt_assert_close_f32(g, e, (size_t)vf_tensor_numel(got[k]), 1e-5, 1e-5, "predict traced vs eager");
                free(g), free(e);
            }
            assert_int_equal(vf_tensor_dim(got[0], 0), batch);
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        assert_int_equal(st.calls, 3);
        /* a call that does not match */
        float x[15] = {0};
        vf_tensor *bad = f32(ctx, 2, (int64_t[]){3, 5}, x), *o[3];
        assert_int_equal(vf_function_call(fn, &bad, o), VF_ERROR_SHAPE);
        vt_expect_error(ctx, VF_ERROR_SHAPE, "'predict' input 0 is f32[3,5]", "f32[-1,4]", NULL);
        vf_tensor *bad_dt = vf_cast(ctx, f32(ctx, 2, (int64_t[]){3, 4}, x), VF_I32);
        assert_int_equal(vf_function_call(fn, &bad_dt, o), VF_ERROR_DTYPE);
        vt_expect_error(ctx, VF_ERROR_DTYPE, "input 0 is i32[3,4]", "f32[-1,4]", NULL);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* A symbolic size that does not fit the traced program: an error at the call. */
static vf_status add_const4(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    float c[4] = {1, 2, 3, 4};
    out[0] = vf_add(ctx, in[0], vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){4}, c));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_symbolic_mismatch(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_tensor_spec sig = {.dtype = VF_F32, .rank = 1, .shape = {-1}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "addc", .body = add_const4,
                                                                 .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    float x[5] = {1, 1, 1, 1, 1};
    vf_tensor *a = f32(ctx, 1, (int64_t[]){4}, x), *b = f32(ctx, 1, (int64_t[]){5}, x), *y;
    assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    assert_int_not_equal(vf_function_call(fn, &b, &y), VF_OK);
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_function 'addc'", "vf_add", "[5]", "[4]", NULL);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- traced == eager for every op ---------------------------------------------------- */

enum { N_OP_CASES = 40 };

static vf_status op_case(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    int c = *(int *)user;
    vf_tensor *x = in[0], *y = in[1];        /* f32 [3,4], f32 [4] */
    vf_tensor *lab = in[2];                  /* i32 [3] */
    vf_tensor *r = NULL;
    switch (c) {
    case 0: r = vf_add(ctx, x, y); break;
    case 1: r = vf_sub(ctx, x, y); break;
    case 2: r = vf_mul(ctx, x, y); break;
    case 3: r = vf_div(ctx, x, y); break;
    case 4: r = vf_pow(ctx, vf_abs(ctx, x), y); break;
    case 5: r = vf_maximum(ctx, x, y); break;
    case 6: r = vf_minimum(ctx, x, y); break;
    case 7: r = vf_cast(ctx, vf_greater(ctx, x, y), VF_F32); break;
    case 8: r = vf_cast(ctx, vf_less_equal(ctx, x, y), VF_F32); break;
    case 9: r = vf_cast(ctx, vf_not_equal(ctx, x, y), VF_F32); break;
    case 10: r = vf_where(ctx, vf_greater_equal(ctx, x, y), x, y); break;
    case 11: r = vf_neg(ctx, x); break;
    case 12: r = vf_exp(ctx, x); break;
    case 13: r = vf_log(ctx, vf_abs(ctx, x)); break;
    case 14: r = vf_sqrt(ctx, vf_abs(ctx, x)); break;
    case 15: r = vf_rsqrt(ctx, vf_abs(ctx, x)); break;
    case 16: r = vf_tanh(ctx, x); break;
    case 17: r = vf_sigmoid(ctx, x); break;
    case 18: r = vf_relu(ctx, x); break;
    case 19: r = vf_gelu(ctx, x); break;
    case 20: r = vf_sin(ctx, x); break;
    case 21: r = vf_cos(ctx, x); break;
    case 22: r = vf_cast(ctx, vf_cast(ctx, vf_mul(ctx, x, y), VF_I32), VF_F32); break;
    case 23: r = vf_reduce_sum(ctx, x, 1, (int[]){0}, false); break;
    case 24: r = vf_reduce_mean(ctx, x, 1, (int[]){-1}, true); break;
    case 25: r = vf_reduce_max(ctx, x, 0, NULL, false); break;
    case 26: r = vf_reduce_min(ctx, x, 1, (int[]){1}, false); break;
    case 27: r = vf_cast(ctx, vf_argmax(ctx, x, 1), VF_F32); break;
    case 28: r = vf_softmax(ctx, x, -1); break;
    case 29: r = vf_log_softmax(ctx, x, 0); break;
    case 30: r = vf_sparse_softmax_cross_entropy(ctx, lab, x); break;
    case 31: r = vf_norm(ctx, x); break;
    case 32: r = vf_matmul(ctx, x, y); break;                          /* matrix @ vector */
    case 33: r = vf_matmul(ctx, y, vf_transpose(ctx, x, NULL)); break; /* vector @ matrix */
    case 34: r = vf_matmul_ex(ctx, x, x, false, true); break;
    case 35: r = vf_reshape(ctx, vf_transpose(ctx, x, (int[]){1, 0}), 2, (int64_t[]){2, -1}); break;
    case 36: r = vf_add(ctx, vf_random_normal(ctx, VF_F32, 2, (int64_t[]){3, 4}, 7), x); break;
    case 37: r = vf_mul(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 1.5), x); break;
    case 38: r = vf_reduce_sum(ctx, vf_reduce_max(ctx, x, 1, (int[]){0}, true), 0, NULL, false); break;
    case 39: r = vf_cast(ctx, vf_equal(ctx, vf_cast(ctx, lab, VF_F32), vf_reduce_min(ctx, x, 1, (int[]){1}, false)), VF_F32); break;
    }
    out[0] = r;
    return r ? VF_OK : vf_status_get(ctx);
}

static void test_every_op(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        float x[12], y[4];
        int32_t lab[3] = {0, 3, 1};
        vt_fill_uniform(x, 12, -2, 2, 11);
        vt_fill_uniform(y, 4, 0.5f, 2, 12);
        vf_tensor *in[3] = {f32(ctx, 2, (int64_t[]){3, 4}, x), f32(ctx, 1, (int64_t[]){4}, y),
                            vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){3}, lab)};
        for (int c = 0; c < N_OP_CASES; c++) {
            vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "op_case", .body = op_case, .user = &c,
                                                                         .n_inputs = 3, .n_outputs = 1});
            vf_tensor *traced = NULL, *eager = NULL;
            vf_status s = vf_function_call(fn, in, &traced);
            if (s != VF_OK) fail_msg("case %d traced: %s", c, vf_error_message(ctx));
            assert_int_equal(vf_function_call(fn, in, &traced), VF_OK); /* the replay */
            vf_run_functions_eagerly(ctx, true);
            s = vf_function_call(fn, in, &eager);
            if (s != VF_OK) fail_msg("case %d eager: %s", c, vf_error_message(ctx));
            vf_run_functions_eagerly(ctx, false);
            assert_int_equal(vf_tensor_rank(traced), vf_tensor_rank(eager));
            for (int d = 0; d < vf_tensor_rank(eager); d++) assert_int_equal(vf_tensor_dim(traced, d), vf_tensor_dim(eager, d));
            float *g = vt_read(traced), *e = vt_read(eager);
            char what[64];
            snprintf(what, sizeof what, "op case %d on %s", c, bs[b] == VF_BACKEND_CPU ? "cpu" : "vulkan");
            /* folding runs on the CPU backend: a folded op matches the CPU within float rounding */
            vt_assert_close_f32(g, e, (size_t)vf_tensor_numel(eager), 1e-5, 1e-5, what);
            free(g), free(e);
            vf_function_stats st;
            vf_function_stats_get(fn, &st);
            assert_int_equal(st.traces, 1);
            vf_function_destroy(fn);
        }
        vt_context_done(ctx);
    }
}

/* ---- dynamic_predict: if mean(x) > 0: x*2 else x*0.5 --------------------------------- */

static vf_status times2(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status halve(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.5));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status dynamic_predict(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    body_calls++;
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0.0));
    return vf_cond(ctx, pred, times2, halve, 1, in, 1, out, NULL);
}

static void test_dynamic_predict(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "dynamic_predict", .body = dynamic_predict,
                                                                     .n_inputs = 1, .n_outputs = 1});
        for (int eager = 0; eager < 2; eager++) {
            vf_run_functions_eagerly(ctx, eager);
            body_calls = 0;
            float pos[3] = {1, 2, 3}, neg[3] = {-1, -2, 2};
            vf_tensor *p = f32(ctx, 1, (int64_t[]){3}, pos), *n = f32(ctx, 1, (int64_t[]){3}, neg), *y;
            assert_int_equal(vf_function_call(fn, &p, &y), VF_OK);
            float *g = vt_read(y);
            vt_assert_close_f32(g, (float[]){2, 4, 6}, 3, 0, 0, "then branch");
            free(g);
            assert_int_equal(vf_function_call(fn, &n, &y), VF_OK);
            g = vt_read(y);
            vt_assert_close_f32(g, (float[]){-0.5f, -1, 1}, 3, 0, 0, "else branch");
            free(g);
            assert_int_equal(body_calls, eager ? 2 : (b == 0 ? 1 : 1));
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        /* both branches are cheap and pure: a select, no host round trip */
        char *txt = vf_function_graph_text(fn);
        assert_non_null(txt);
        assert_non_null(strstr(txt, "where("));
        assert_null(strstr(txt, "cond("));
        free(txt);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* ---- while loops ---------------------------------------------------------------------- */

static vf_status below_limit(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_less(ctx, in[0], *(vf_tensor **)user);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    out[1] = vf_mul(ctx, in[1], vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

typedef struct { vf_tensor *limit; int max_it; } loop_cfg;

static vf_status powers(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    loop_cfg *cfg = user;
    vf_tensor *vars[2] = {vf_fill(ctx, VF_F32, 0, NULL, 0.0), in[0]};
    vf_status s = vf_while_loop(ctx, below_limit, step, 2, vars, cfg->max_it, &cfg->limit);
    out[0] = vars[0];
    out[1] = vars[1];
    return s;
}

static void test_while_loop(void **state)
{
    (void)state;
    vf_backend bs[2];
    for (int b = 0, nb = vt_backends(bs); b < nb; b++) {
        vf_context *ctx = vt_context(bs[b]);
        loop_cfg cfg = {.limit = vf_fill(ctx, VF_F32, 0, NULL, 5.0)};
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "powers", .body = powers, .user = &cfg,
                                                                     .n_inputs = 1, .n_outputs = 2});
        for (int eager = 0; eager < 2; eager++) {
            vf_run_functions_eagerly(ctx, eager);
            float x[2] = {1, 3};
            vf_tensor *a = f32(ctx, 1, (int64_t[]){2}, x), *o[2];
            for (int rep = 0; rep < 2; rep++) {
                assert_int_equal(vf_function_call(fn, &a, o), VF_OK);
                assert_true(vt_read1(o[0]) == 5.0f);
                float *g = vt_read(o[1]);
                vt_assert_close_f32(g, (float[]){32, 96}, 2, 0, 0, "while");
                free(g);
            }
        }
        vf_function_stats st;
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        vf_function_destroy(fn);
        /* max_iterations bounds it */
        cfg.max_it = 3;
        fn = vf_function_create(ctx, &(vf_function_desc){.body = powers, .user = &cfg, .n_inputs = 1, .n_outputs = 2});
        for (int eager = 0; eager < 2; eager++) {
            vf_run_functions_eagerly(ctx, eager);
            vf_tensor *a = vf_fill(ctx, VF_F32, 1, (int64_t[]){2}, 1.0), *o[2];
            assert_int_equal(vf_function_call(fn, &a, o), VF_OK);
            assert_true(vt_read1(o[0]) == 3.0f);
        }
        vf_run_functions_eagerly(ctx, false);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

/* a branch that passes its input through */
static vf_status keep(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    out[0] = in[0];
    return VF_OK;
}

/* ---- trace-time semantics and errors ------------------------------------------------------ */

static vf_status reads(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    float v[4];
    vf_status s = vf_tensor_read(in[0], v, sizeof v);
    out[0] = in[0];
    return s;
}

static vf_tensor *leaked;

static vf_status leaks(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(ctx, in[0]);
    leaked = vf_keep(vf_neg(ctx, in[0]));
    return VF_OK;
}

static vf_status makes_variable(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_variable(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status to_scalar(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_reduce_sum(ctx, in[0], 0, NULL, false);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status mismatched(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *pred = vf_greater(ctx, vf_reduce_sum(ctx, in[0], 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0));
    return vf_cond(ctx, pred, keep, to_scalar, 1, in, 1, out, NULL);
}

static void test_errors(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    float x[4] = {1, 2, 3, 4};
    vf_tensor *a = f32(ctx, 1, (int64_t[]){4}, x), *y = NULL;

    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "reads", .body = reads, .n_inputs = 1, .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, &a, &y), VF_ERROR_TRACE);
    vt_expect_error(ctx, VF_ERROR_TRACE, "vf_tensor_read", "'reads'", "vf_cond", "vf_while_loop", "vf_print", NULL);
    /* eagerly the same body works */
    vf_run_functions_eagerly(ctx, true);
    assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    vf_run_functions_eagerly(ctx, false);
    vf_function_destroy(fn);

    fn = vf_function_create(ctx, &(vf_function_desc){.name = "leaks", .body = leaks, .n_inputs = 1, .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    assert_null(vf_add(ctx, leaked, a));
    vt_expect_error(ctx, VF_ERROR_TRACE, "vf_add", "trace that has ended", NULL);
    assert_int_equal(vf_tensor_read(leaked, x, sizeof x), VF_ERROR_TRACE);
    vt_expect_error(ctx, VF_ERROR_TRACE, "vf_tensor_read", "has ended", NULL);
    vf_function_destroy(fn);

    fn = vf_function_create(ctx, &(vf_function_desc){.name = "makes_variable", .body = makes_variable, .n_inputs = 1, .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, &a, &y), VF_ERROR_TRACE);
    vt_expect_error(ctx, VF_ERROR_TRACE, "vf_variable", "outside the function", NULL);
    vf_function_destroy(fn);

    fn = vf_function_create(ctx, &(vf_function_desc){.name = "mismatched", .body = mismatched, .n_inputs = 1, .n_outputs = 1});
    assert_int_equal(vf_function_call(fn, &a, &y), VF_ERROR_TRACE);
    vt_expect_error(ctx, VF_ERROR_TRACE, "vf_cond", "f32[4] in then_fn", "f32[] in else_fn", NULL);
    vf_function_destroy(fn);

    /* a predicate that is not one bool */
    assert_int_equal(vf_cond(ctx, a, keep, keep, 1, &a, 1, &y, NULL), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_cond", "f32 [4]", "single bool", NULL);

    assert_null(vf_function_create(ctx, &(vf_function_desc){.n_inputs = 1}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_create", "body NULL", NULL);
    vt_context_done(ctx);
}

/* ---- printing: printf once per trace, vf_print at every call ------------------------------- */

static int printf_count;

static vf_status noisy(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    printf_count++; /* stands in for a printf: C code runs once per trace */
    out[0] = vf_add(ctx, in[0], in[0]);
    return vf_print(ctx, "doubled", out[0]);
}

static void test_print(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    char path[] = "/tmp/vf_test_print_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "noisy", .body = noisy, .n_inputs = 1, .n_outputs = 1});
    float x[2] = {1, 2.5f};
    vf_tensor *a = f32(ctx, 1, (int64_t[]){2}, x), *y;
    printf_count = 0;
    for (int i = 0; i < 3; i++) assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    vf_run_functions_eagerly(ctx, true);
    assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    vf_run_functions_eagerly(ctx, false);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    FILE *f = fdopen(fd, "r");
    rewind(f);
    char line[256];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        assert_string_equal(line, "doubled: [2, 5]\n");
        lines++;
    }
    fclose(f);
    unlink(path);
    assert_int_equal(printf_count, 2); /* one trace + one eager call */
    assert_int_equal(lines, 4);        /* every call */
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- VKFUSE_DUMP and nested functions ---------------------------------------------------- */

static vf_function *inner_fn;

static vf_status outer(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *t;
    vf_status s = vf_function_call(inner_fn, in, &t); /* inlined */
    out[0] = s == VF_OK ? vf_neg(ctx, t) : NULL;
    return s;
}

static void test_dump_and_nesting(void **state)
{
    (void)state;
    char dir[] = "/tmp/vf_test_dump_XXXXXX";
    assert_non_null(mkdtemp(dir));
    setenv("VKFUSE_DUMP", dir, 1);
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    inner_fn = vf_function_create(ctx, &(vf_function_desc){.name = "inner", .body = affine, .n_inputs = 1, .n_outputs = 1});
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "outer", .body = outer, .n_inputs = 1, .n_outputs = 1});
    vf_tensor *a = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 1.0), *y;
    assert_int_equal(vf_function_call(fn, &a, &y), VF_OK);
    float *g = vt_read(y);
    vt_assert_close_f32(g, (float[]){-3, -3, -3}, 3, 0, 0, "nested");
    free(g);
    unsetenv("VKFUSE_DUMP");
    char path[512];
    struct stat sb;
    snprintf(path, sizeof path, "%s/outer.trace1.00-traced.txt", dir);
    assert_int_equal(stat(path, &sb), 0);
    snprintf(path, sizeof path, "%s/outer.trace1.01-cond_to_select.dot", dir);
    assert_int_equal(stat(path, &sb), 0);
    snprintf(path, sizeof path, "%s/outer.trace1.06-dce.txt", dir);
    assert_int_equal(stat(path, &sb), 0);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    vf_function_stats st;
    vf_function_stats_get(inner_fn, &st);
    assert_int_equal(st.traces, 0); /* inlined into outer's trace */
    vf_function_destroy(fn);
    vf_function_destroy(inner_fn);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_counts),     cmocka_unit_test(test_retrace_warning),
        cmocka_unit_test(test_outputs_from_trace),
        cmocka_unit_test(test_signature),        cmocka_unit_test(test_symbolic_mismatch),
        cmocka_unit_test(test_every_op),         cmocka_unit_test(test_dynamic_predict),
        cmocka_unit_test(test_while_loop),       cmocka_unit_test(test_errors),
        cmocka_unit_test(test_print),            cmocka_unit_test(test_dump_and_nesting),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
