/* Gradients through loaded functions (vf_function_load has no C body, but
 * the whole graph): an eager call under a tape (at two sizes of a
 * symbolic batch, gradients for the input and for a loaded variable),
 * second order through two tapes, a loaded function called inside another
 * traced function (a tape in that body, and the outer function called
 * under an eager tape), and a loaded function that assigns, inlined into a
 * trace: its assign runs at every call (its eager call's gradient is
 * refused, pointing there); a roll along the symbolic dim
 * (x[:1], a slice of fixed size) saved and loaded, also from a file whose
 * slice marks that dim symbolic (as files written before fixed slice
 * sizes do). Values against double references, on both backends. User kernels in loaded functions:
 * test_kernels.c. */
#include "testutil.h"
#include "saved/saved.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define C 3      /* x [-1, C] */
#define NMAX 5

typedef struct { vf_tensor *w, *b; } lmodel;

/* y = tanh(x @ w + b) * x; w a variable [C, C], b a plain tensor [C] */
static vf_status model_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    lmodel *m = user;
    out[0] = vf_mul(ctx, vf_tanh(ctx, vf_add(ctx, vf_matmul(ctx, in[0], m->w), m->b)), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = x * x * x */
static vf_status cube_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, vf_mul(ctx, in[0], in[0]), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = 2x, and the captured variable counts the calls */
static vf_status count_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_status s = vf_assign_add(user, vt_scalar(ctx, 1));
    out[0] = vf_mul(ctx, in[0], vt_scalar(ctx, 2));
    return s ? s : out[0] ? VF_OK : vf_status_get(ctx);
}

static float g_w[C * C], g_b[C], g_x[NMAX * C];

static const vf_tensor_spec sig = {VF_F32, 2, {-1, C}};

/* Traces body (user) at a batch of 4 in a context of backend be, saves it
   and loads it into a fresh context *out_ctx. */
static vf_function *save_and_load(vf_backend be, const char *name, vf_body body, int what, vf_context **out_ctx)
{
    vf_context *ctx = vt_context(be);
    lmodel m = {vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){C, C}, g_w)),
                vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){C}, g_b)};
    vf_tensor *counter = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 0));
    void *user = what == 0 ? (void *)&m : what == 2 ? (void *)counter : NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = name, .body = body, .user = user,
        .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){4, C}, g_x), *y = NULL;
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/vkfuse_saved_tape_%d_%d_%s.vfn", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), (int)be, name);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    *out_ctx = vt_context(be);
    vf_function *ld = NULL;
    if (vf_function_load(*out_ctx, path, &ld) != VF_OK) fail_msg("load: %s", vf_error_message(*out_ctx));
    remove(path);
    return ld;
}

/* d sum(y^2) / dx and / dw of model_body, in double */
static void model_ref(int64_t n, double *gx, double *gw)
{
    memset(gx, 0, sizeof(double) * (size_t)(n * C));
    memset(gw, 0, sizeof(double) * C * C);
    for (int64_t i = 0; i < n; i++)
        for (int j = 0; j < C; j++) {
            double z = g_b[j];
            for (int k = 0; k < C; k++) z += (double)g_x[i * C + k] * g_w[k * C + j];
            double t = tanh(z), xij = g_x[i * C + j], y = t * xij;
            gx[i * C + j] += 2 * y * t;
            double dz = 2 * y * xij * (1 - t * t);
            for (int k = 0; k < C; k++) {
                gx[i * C + k] += dz * g_w[k * C + j];
                gw[k * C + j] += dz * g_x[i * C + k];
            }
        }
}

static void check_grads(vf_tensor *gx, vf_tensor *gw, int64_t n, const char *what)
{
    double rx[NMAX * C], rw[C * C];
    float fx[NMAX * C], fw[C * C];
    model_ref(n, rx, rw);
    for (int i = 0; i < n * C; i++) fx[i] = (float)rx[i];
    for (int i = 0; i < C * C; i++) fw[i] = (float)rw[i];
    assert_int_equal(vf_tensor_dim(gx, 0), n);
    float *a = vt_read(gx), *b = vt_read(gw);
    vt_assert_close_f32(a, fx, (size_t)(n * C), 1e-5, 1e-4, what);
    vt_assert_close_f32(b, fw, C * C, 1e-5, 1e-4, what);
    free(a), free(b);
}

static void init_data(void)
{
    vt_fill_uniform(g_w, C * C, -1, 1, 51);
    vt_fill_uniform(g_b, C, -0.5f, 0.5f, 52);
    vt_fill_uniform(g_x, NMAX * C, -1, 1, 53);
}

/* ---- an eager call of a loaded function under a tape -------------------------- */

static void eager_call(vf_backend be)
{
    init_data();
    vf_context *ctx;
    vf_function *ld = save_and_load(be, "model", model_body, 0, &ctx);
    assert_int_equal(vf_function_variable_count(ld), 1);
    vf_tensor *w = vf_function_variable(ld, 0);
    for (int64_t n = 3; n <= NMAX; n += 2) { /* neither the traced 4 */
        vf_scope_begin(ctx);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, C}, g_x), *y = NULL, *g[2] = {0};
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(ld, &x, &y), VF_OK);
        vf_status st = vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, y, y)), 2, (vf_tensor *[]){x, w}, g);
        if (st) fail_msg("n = %lld: %s", (long long)n, vf_error_message(ctx));
        vf_tape_end(tp);
        check_grads(g[0], g[1], n, "loaded, eager call");
        vf_scope_end(ctx);
    }
    vf_function_destroy(ld);
    vt_context_done(ctx);

    /* second order: d/dx sum(d/dx sum(x^3)) = 6x */
    ld = save_and_load(be, "cube", cube_body, 1, &ctx);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){NMAX, C}, g_x), *y = NULL, *g1 = NULL, *g2 = NULL;
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    assert_int_equal(vf_function_call(ld, &x, &y), VF_OK);
    assert_int_equal(vf_tape_gradient(inner, vt_sum(ctx, y), 1, &x, &g1), VF_OK);
    vf_tape_end(inner);
    assert_int_equal(vf_tape_gradient(outer, vt_sum(ctx, g1), 1, &x, &g2), VF_OK);
    vf_tape_end(outer);
    float w1[NMAX * C], w2[NMAX * C];
    for (int i = 0; i < NMAX * C; i++) {
        w1[i] = (float)(3.0 * g_x[i] * g_x[i]);
        w2[i] = (float)(6.0 * g_x[i]);
    }
    float *a = vt_read(g1), *b = vt_read(g2);
    vt_assert_close_f32(a, w1, NMAX * C, 1e-6, 1e-5, "loaded cube, first order");
    vt_assert_close_f32(b, w2, NMAX * C, 1e-6, 1e-5, "loaded cube, second order");
    free(a), free(b);
    vf_function_destroy(ld);
    vt_context_done(ctx);
}

/* ---- a loaded function inside another traced function ------------------------- */

typedef struct { vf_function *ld; vf_tensor *w; } outer_user;

/* out: d sum(ld(x)^2) / dx and / dw, the tape in the body */
static vf_status grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    outer_user *u = user;
    vf_tensor *y = NULL;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_status s = vf_function_call(u->ld, in, &y);
    if (s == VF_OK) s = vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, y, y)), 2, (vf_tensor *[]){in[0], u->w}, out);
    vf_tape_end(tp);
    return s;
}

/* out: sum(ld(x)^2) */
static vf_status loss_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    outer_user *u = user;
    vf_tensor *y = NULL;
    vf_status s = vf_function_call(u->ld, in, &y);
    if (s == VF_OK) out[0] = vt_sum(ctx, vf_mul(ctx, y, y));
    return s ? s : out[0] ? VF_OK : vf_status_get(ctx);
}

static void inlined(vf_backend be)
{
    init_data();
    vf_context *ctx;
    outer_user u;
    u.ld = save_and_load(be, "model", model_body, 0, &ctx);
    u.w = vf_function_variable(u.ld, 0);
    vf_function *gf = vf_function_create(ctx, &(vf_function_desc){.name = "outer_grad", .body = grad_body,
        .user = &u, .n_inputs = 1, .n_outputs = 2, .input_signature = &sig});
    vf_function *lf = vf_function_create(ctx, &(vf_function_desc){.name = "outer_loss", .body = loss_body,
        .user = &u, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    for (int64_t n = 3; n <= NMAX; n += 2) {
        vf_scope_begin(ctx);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, C}, g_x), *g[2] = {0}, *l = NULL;
        vf_status st = vf_function_call(gf, &x, g);
        if (st) fail_msg("traced tape, n = %lld: %s", (long long)n, vf_error_message(ctx));
        check_grads(g[0], g[1], n, "loaded, inlined, tape in the body");
        vf_tape *tp = vf_tape_begin(ctx);
        assert_int_equal(vf_function_call(lf, &x, &l), VF_OK);
        st = vf_tape_gradient(tp, l, 2, (vf_tensor *[]){x, u.w}, g);
        if (st) fail_msg("eager tape, n = %lld: %s", (long long)n, vf_error_message(ctx));
        vf_tape_end(tp);
        check_grads(g[0], g[1], n, "loaded, inlined, outer call under a tape");
        vf_scope_end(ctx);
    }
    vf_function_stats st;
    vf_function_stats_get(gf, &st);
    assert_int_equal(st.traces, 1);
    vf_function_destroy(gf);
    vf_function_destroy(lf);
    vf_function_destroy(u.ld);
    vt_context_done(ctx);

    /* inlined, a loaded function's assign runs at every call (saved after
       one call: the counter starts at 1) */
    u.ld = save_and_load(be, "count", count_body, 2, &ctx);
    vf_function *twice = vf_function_create(ctx, &(vf_function_desc){.name = "twice", .body = loss_body,
        .user = &u, .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, C}, g_x), *l = NULL;
    double want = 0;
    for (int i = 0; i < 2 * C; i++) want += 4.0 * g_x[i] * g_x[i];
    for (int call = 0; call < 2; call++) {
        assert_int_equal(vf_function_call(twice, &x, &l), VF_OK);
        assert_float_equal(vt_read1(l), want, 1e-5);
    }
    assert_float_equal(vt_read1(vf_function_variable(u.ld, 0)), 3.0, 0);
    /* its eager call cannot be replayed for a gradient (it would assign
       again): the message points to a traced body with the tape */
    vf_tensor *y = NULL, *gx = NULL;
    vf_tape *tp = vf_tape_begin(ctx);
    assert_int_equal(vf_function_call(u.ld, &x, &y), VF_OK);
    assert_int_equal(vf_tape_gradient(tp, vt_sum(ctx, y), 1, &x, &gx), VF_ERROR_INVALID_ARGUMENT);
    vf_tape_end(tp);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "'count'", "assigns variables", "loaded from a file",
                    "inside a traced function", NULL);
    vf_function_destroy(twice);
    vf_function_destroy(u.ld);
    vt_context_done(ctx);
}

/* ---- a roll saved and loaded: slices of fixed size in the file -------------- */

/* concat(x[1:], x[:1]) along the symbolic dim 0 */
static vf_status roll_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *head = vf_slice(ctx, in[0], (int64_t[]){0, 0}, (int64_t[]){1, INT64_MAX}, NULL);
    vf_tensor *rest = vf_slice(ctx, in[0], (int64_t[]){1, 0}, (int64_t[]){INT64_MAX, INT64_MAX}, NULL);
    out[0] = vf_concat(ctx, 2, (vf_tensor *[]){rest, head}, 0);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void roll_saved(vf_backend be)
{
    init_data();
    for (int old = 0; old < 2; old++) {
        vf_context *ctx = vt_context(be);
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "roll", .body = roll_body,
            .n_inputs = 1, .n_outputs = 1, .input_signature = &sig});
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){4, C}, g_x), *y = NULL;
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        const vf_dtype *dt;
        const vf_shape *sh;
        const vf_graph *g;
        const vf_capture *caps;
        int n_caps, slices = 0;
        vf_function_concrete_get(fn, 0, &dt, &sh, &g, &caps, &n_caps);
        for (int i = 0; i < g->n; i++) {
            vf_node *n = &g->nodes[i];
            if (n->kind != VF_NODE_OP || n->op != VF_OP_SLICE || n->attrs.hi[0] != 1) continue;
            assert_int_equal(n->shape.sym & 1u, 0); /* x[:1]: fixed */
            if (old) n->shape.sym |= 1u;           /* what older writers stored */
            slices++;
        }
        assert_int_equal(slices, 1);
        uint8_t *bytes = NULL;
        size_t size = 0;
        assert_int_equal(vf_saved_write_mem(fn, NULL, 0, &bytes, &size), VF_OK);
        vf_function_destroy(fn);
        vf_function *ld = NULL;
        if (vf_saved_load_mem(ctx, bytes, size, "roll", &ld) != VF_OK) fail_msg("load: %s", vf_error_message(ctx));
        free(bytes);
        for (int64_t n = 3; n <= NMAX; n += 2) {
            vf_scope_begin(ctx);
            vf_tensor *xn = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, C}, g_x), *gx = NULL;
            vf_tape *tp = vf_tape_begin(ctx);
            assert_int_equal(vf_function_call(ld, &xn, &y), VF_OK);
            /* d sum(roll(x) * x) / dx_i = x_{i+1} + x_{i-1}, cyclically */
            assert_int_equal(vf_tape_gradient(tp, vt_sum(ctx, vf_mul(ctx, y, xn)), 1, &xn, &gx), VF_OK);
            vf_tape_end(tp);
            float wy[NMAX * C], wg[NMAX * C];
            for (int64_t i = 0; i < n; i++)
                for (int j = 0; j < C; j++) {
                    int64_t up = (i + 1) % n, down = (i + n - 1) % n;
                    wy[i * C + j] = g_x[up * C + j];
                    wg[i * C + j] = (float)((double)g_x[up * C + j] + g_x[down * C + j]);
                }
            float *a = vt_read(y), *b = vt_read(gx);
            vt_assert_close_f32(a, wy, (size_t)(n * C), 0, 0, old ? "old file's roll" : "loaded roll");
            vt_assert_close_f32(b, wg, (size_t)(n * C), 1e-6, 1e-5, old ? "old file's roll gradient" : "loaded roll gradient");
            free(a), free(b);
            vf_scope_end(ctx);
        }
        vf_function_destroy(ld);
        vt_context_done(ctx);
    }
}

VT_PER_BACKEND(eager_call)
VT_PER_BACKEND(inlined)
VT_PER_BACKEND(roll_saved)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(eager_call),
        VT_PER_BACKEND_TESTS(inlined),
        VT_PER_BACKEND_TESTS(roll_saved),
    };
    return VT_RUN_GROUP(tests);
}
