/* The per-op limits of docs/LIMITS.md, walked: each row of `rows` below is
 * a row of the doc's table (tests/limits_doc_test.sh checks that both list
 * the same keys with the same lavapipe numbers), and
 *   - its limit at lavapipe's real loop limit (65535 iterations, a budget
 *     of 65471) or binding range equals the number the doc states;
 *   - under the row's VKFUSE_TEST_LIMITS the op runs at the limit on Vulkan
 *     and equals the CPU backend;
 *   - one past the limit it either still runs and equals the CPU backend
 *     (the kernel splits its work: SPLITS) or fails with
 *     VF_ERROR_UNSUPPORTED and a message holding the limit's number
 *     (FAILS), leaving the context usable;
 *   - the CPU backend, which has none of these limits, runs both sizes.
 * So the header comments, the messages and the behaviour cannot drift
 * apart without this test or the doc check failing. */
#include "limits_common.h"

#include "vulkan/codegen/codegen_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SPLITS, FAILS } past_kind;

/* Builds the op at size n; fills out[0..2] (out[1] and out[2] may stay NULL). */
typedef void (*build_fn)(vf_context *ctx, uint64_t n, vf_tensor **out);

typedef struct limit_row {
    const char *key;         /* the doc's first column */
    uint64_t lavapipe;       /* the doc's lavapipe number; 0: "none" */
    const char *limits;      /* VKFUSE_TEST_LIMITS of the walk */
    /* the limit on a device with loop budget B (and binding range rng) */
    uint64_t (*limit)(uint64_t B, uint64_t rng);
    past_kind past;
    build_fn build;
} limit_row;

/* ---- inputs -------------------------------------------------------------- */

static vf_tensor *ramp(vf_context *ctx, int rank, const int64_t *shape, uint64_t seed)
{
    size_t n = 1;
    for (int d = 0; d < rank; d++) n *= (size_t)shape[d];
    float *x = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(x);
    vt_fill_uniform(x, n, -1, 1, seed);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, rank, shape, x);
    free(x);
    return t;
}

static vf_tensor *grad_of(vf_context *ctx, vf_tape *tp, vf_tensor *y, vf_tensor *wrt)
{
    vf_tensor *g = NULL;
    vf_tensor *loss = y ? vf_reduce_sum(ctx, vf_mul(ctx, y, y), 0, NULL, false) : NULL;
    if (loss) vf_tape_gradient(tp, loss, 1, &wrt, &g);
    vf_tape_end(tp);
    return g;
}

/* ---- the ops --------------------------------------------------------------- */

/* n bytes of bool: the binding range */
static void b_binding(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    int64_t s = (int64_t)n;
    out[0] = vf_logical_not(ctx, vf_fill(ctx, VF_BOOL, 1, &s, 0));
}

/* n elements past 2 x 2 x 2 workgroups: every kernel strides over groups */
static void b_workgroups(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    int64_t s = (int64_t)n;
    vf_tensor *x = ramp(ctx, 1, &s, n);
    out[0] = vf_add(ctx, vf_mul(ctx, x, x), x);
    out[1] = vf_reduce_sum(ctx, x, 0, NULL, false);
}

/* n terms per result: a 1 x 1 filter over n channels */
static void b_conv2d(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    int64_t c = (int64_t)n;
    out[0] = vf_conv2d(ctx, ramp(ctx, 4, (int64_t[]){1, 2, 2, c}, 1), ramp(ctx, 4, (int64_t[]){1, 1, c, 2}, 2), NULL);
}

/* n terms per dx element: a 1 x 1 filter to n output channels */
static void b_conv2d_dx(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    vf_tensor *x = ramp(ctx, 4, (int64_t[]){1, 2, 2, 2}, 3);
    vf_tape *tp = vf_tape_begin(ctx);
    out[0] = grad_of(ctx, tp, vf_conv2d(ctx, x, ramp(ctx, 4, (int64_t[]){1, 1, 2, (int64_t)n}, 4), NULL), x);
}

/* n = OH x OW terms per dw element (1 x 1 filter, 1 channel): as square as n
   factors */
static void b_conv2d_dw(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    int64_t h = 1;
    for (int64_t f = 1; f * f <= (int64_t)n; f++)
        if (n % (uint64_t)f == 0) h = f;
    vf_tensor *w = ramp(ctx, 4, (int64_t[]){1, 1, 1, 2}, 5);
    vf_tape *tp = vf_tape_begin(ctx);
    out[0] = grad_of(ctx, tp, vf_conv2d(ctx, ramp(ctx, 4, (int64_t[]){1, h, (int64_t)n / h, 1}, 6), w, NULL), w);
}

static void b_matmul(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    int64_t k = (int64_t)n;
    out[0] = vf_matmul(ctx, ramp(ctx, 2, (int64_t[]){3, k}, 7), ramp(ctx, 2, (int64_t[]){k, 5}, 8));
}

static void b_reduce(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    vf_tensor *x = ramp(ctx, 2, (int64_t[]){(int64_t)n, 2}, 9);
    out[0] = vf_reduce_sum(ctx, x, 1, (int[]){0}, false);
    out[1] = vf_reduce_max(ctx, vf_transpose(ctx, x, (int[]){1, 0}), 1, (int[]){1}, false);
}

static void b_softmax(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    vf_tensor *x = ramp(ctx, 2, (int64_t[]){1, (int64_t)n}, 10);
    out[0] = vf_softmax(ctx, x, -1);
    out[1] = vf_log_softmax(ctx, vf_reshape(ctx, x, 2, (int64_t[]){(int64_t)n, 1}), 0);
    out[2] = vf_sparse_softmax_cross_entropy(ctx, vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){1}, &(int32_t){3}), x);
}

/* n indices into 5 rows of 3, one row taking every third */
static void b_scatter(vf_context *ctx, uint64_t n, vf_tensor **out)
{
    int32_t *idx = malloc(sizeof(int32_t) * n);
    assert_non_null(idx);
    vt_fill_int(idx, n, 0, 4, n);
    for (uint64_t j = 0; j < n; j += 3) idx[j] = 2;
    int64_t J = (int64_t)n;
    out[0] = vf_scatter_add(ctx, ramp(ctx, 2, (int64_t[]){5, 3}, 11), vf_tensor_from_host(ctx, VF_I32, 1, &J, idx),
                            ramp(ctx, 2, (int64_t[]){J, 3}, 12), 0);
    free(idx);
}

/* a window of n = KH x KW positions, stride 1 over twice its size: the
   forward walks n positions, the gradient n windows per element */
static void pool(vf_context *ctx, uint64_t n, vf_tensor **out, bool is_max)
{
    int kh = 1;
    for (int f = 1; (uint64_t)f * (uint64_t)f <= n; f++)
        if (n % (uint64_t)f == 0) kh = f;
    int kw = (int)(n / (uint64_t)kh);
    vf_pool2d_desc d = {.window = {kh, kw}, .strides = {1, 1}};
    vf_tensor *x = ramp(ctx, 4, (int64_t[]){1, 2 * kh, 2 * kw, 1}, 13);
    vf_tape *tp = vf_tape_begin(ctx);
    out[0] = is_max ? vf_max_pool2d(ctx, x, &d) : vf_avg_pool2d(ctx, x, &d);
    out[1] = grad_of(ctx, tp, out[0], x);
}
static void b_max_pool(vf_context *ctx, uint64_t n, vf_tensor **out) { pool(ctx, n, out, true); }
static void b_avg_pool(vf_context *ctx, uint64_t n, vf_tensor **out) { pool(ctx, n, out, false); }

/* ---- limits as functions of the loop budget B and binding range rng ---------- */

static uint64_t l_budget(uint64_t B, uint64_t rng) { return (void)rng, B; }
static uint64_t l_budget_sq(uint64_t B, uint64_t rng) { return (void)rng, B * B; }
static uint64_t l_range(uint64_t B, uint64_t rng) { return (void)B, rng; }
/* none: walked at 8 workgroups of 1024 elements (the largest elementwise
   workgroup covers 1024 / 4 invocations x 4), where a smaller grid strides */
static uint64_t l_groups(uint64_t B, uint64_t rng) { return (void)B, (void)rng, 8 * 1024; }
/* the widest workgroup (1024 invocations on lavapipe), a third of the
   budget each: softmax loops over the axis three times */
static uint64_t l_softmax(uint64_t B, uint64_t rng) { return (void)rng, 1024 * (B / 3); }
static uint64_t l_blocks(uint64_t B, uint64_t rng) { return (void)rng, (B / 2) * (B - B / 2); }

#define LOOP "max_loop=100"   /* a budget of 51 */

/* The rows of docs/LIMITS.md's table, in its order. Not walked here: top_k
   and cumsum (rows up to the maximum tensor size; tested in
   tests/test_ops_scan.c) and elements (2^32 - 1 per tensor on Vulkan: a
   tensor at that limit takes 4 GiB of bools, past lavapipe's binding
   range, so no test device reaches it), scatter_add_work (a bound of
   seconds of work, not of a device limit: at the limit and one past it in
   tests/test_ops_indexing.c's test_scatter_work_bound, by codegen) and
   likewise conv2d_work and pool_work (test_work_bounds below). */
static const char *const not_walked[] = {"top_k", "cumsum", "elements", "scatter_add_work", "conv2d_work", "pool_work"};

static const limit_row rows[] = {
    {"binding", 134217728, "max_buffer=65536", l_range, FAILS, b_binding},
    {"workgroups", 0, "max_groups=2", l_groups, SPLITS, b_workgroups},
    {"conv2d", 65471, LOOP, l_budget, FAILS, b_conv2d},
    {"conv2d_backprop_input", 65471, LOOP, l_budget, FAILS, b_conv2d_dx},
    {"conv2d_backprop_filter", 4286451841, LOOP, l_budget_sq, FAILS, b_conv2d_dw},
    {"matmul", 0, LOOP, l_budget, SPLITS, b_matmul},
    {"reduce", 0, LOOP, l_budget, SPLITS, b_reduce},
    {"softmax", 22346752, LOOP, l_softmax, FAILS, b_softmax},
    {"scatter_add", 65471, LOOP, l_budget, SPLITS, b_scatter},
    {"scatter_add_blocks", 1071612960, LOOP, l_blocks, FAILS, b_scatter},
    {"max_pool2d", 65471, LOOP, l_budget, SPLITS, b_max_pool},
    {"avg_pool2d", 65471, LOOP, l_budget, SPLITS, b_avg_pool},
};

/* The loop budget and binding range a row's VKFUSE_TEST_LIMITS gives. */
static void walk_limits(const char *want, uint64_t *B, uint64_t *rng)
{
    vf_device_caps c = {.max_loop_iterations = 65535};   /* lavapipe's */
    *rng = 134217728;
    const char *l = strstr(want, "max_loop="), *b = strstr(want, "max_buffer=");
    if (l) c.max_loop_iterations = (uint32_t)strtoul(l + 9, NULL, 10);
    if (b) *rng = strtoull(b + 11, NULL, 10);
    *B = cg_loop_budget(&c);
}

/* out[] read to host, compared with the CPU backend's */
static void compare(const limit_row *r, uint64_t n, vf_tensor **got, vf_tensor **want)
{
    for (int i = 0; i < 3; i++) {
        char what[96];
        snprintf(what, sizeof what, "%s at %" PRIu64 ", output %d", r->key, n, i);
        if (!want[i]) {
            assert_null(got[i]);
            continue;
        }
        if (!got[i]) fail_msg("%s: no result", what);
        assert_int_equal(vf_tensor_numel(got[i]), vf_tensor_numel(want[i]));
        float *g = vt_read(got[i]), *w = vt_read(want[i]);
        if (vf_tensor_dtype(want[i]) == VF_F32)
            vt_assert_close_f32(g, w, (size_t)vf_tensor_numel(want[i]), 1e-5, 1e-4, what);
        else
            vt_assert_equal_bytes(g, w, vf_tensor_bytes(want[i]), what);
        free(g), free(w);
    }
}

static void walk(const limit_row *r)
{
    uint64_t B, rng;
    walk_limits("", &B, &rng);
    if (r->lavapipe) {
        if (r->limit(B, rng) != r->lavapipe)
            fail_msg("%s: the limit on lavapipe is %" PRIu64 ", the doc says %" PRIu64, r->key, r->limit(B, rng),
                     r->lavapipe);
    }
    walk_limits(r->limits, &B, &rng);
    uint64_t at = r->limit(B, rng);
    vf_context *cpu = vt_context(VF_BACKEND_CPU), *vk = lim_context(r->limits);
    for (uint64_t n = at; n <= at + 1; n++) {
        vf_scope_begin(cpu);
        vf_scope_begin(vk);
        vf_tensor *want[3] = {0}, *got[3] = {0};
        r->build(cpu, n, want);
        if (vf_status_get(cpu) != VF_OK) fail_msg("%s at %" PRIu64 " on the CPU backend: %s", r->key, n,
                                                  vf_error_message(cpu));
        r->build(vk, n, got);
        if (n == at || r->past == SPLITS) {
            if (vf_status_get(vk) != VF_OK)
                fail_msg("%s at %" PRIu64 " under %s: %s", r->key, n, r->limits, vf_error_message(vk));
            compare(r, n, got, want);
        } else {
            char num[24];
            snprintf(num, sizeof num, "%" PRIu64, at);
            printf("%s at %" PRIu64 " under %s: %s\n", r->key, n, r->limits, vf_error_message(vk));
            vt_expect_error(vk, VF_ERROR_UNSUPPORTED, num, NULL);
        }
        vf_scope_end(vk);
        vf_scope_end(cpu);
    }
    /* usable after the failure: the op at the limit again */
    vf_scope_begin(vk);
    vf_tensor *again[3] = {0};
    r->build(vk, at, again);
    assert_int_equal(vf_status_get(vk), VF_OK);
    vf_scope_end(vk);
    vt_context_done(vk);
    vt_context_done(cpu);
}

/* The work bounds of conv2d (and its gradients) and the pools
   (codegen_internal.h, cg_work_max), by codegen on lavapipe's real limits
   without a device: an op past it is refused up front naming the most
   images per call; that many fit, one more does not. */
static vf_status gen_window_op(vf_op op, int64_t n, int64_t hw, int64_t c, int64_t k, int64_t o, vf_err *err)
{
    vf_exec e;
    memset(&e, 0, sizeof e);
    vf_err_clear(err);
    e.op = op;
    vf_tref x = {.dtype = VF_F32, .rank = 4, .shape = {n, hw, hw, c}};
    vf_tref w = {.dtype = VF_F32, .rank = 4, .shape = {k, k, c, o}};
    vf_tref y = {.dtype = VF_F32, .rank = 4, .shape = {n, hw, hw, op == VF_OP_MAX_POOL2D ? c : o}};
    e.attrs.conv = (vf_conv_attrs){.size = {k, k}, .stride = {1, 1}, .dilation = {1, 1}, .groups = 1,
                                   .pad = {k / 2, k - 1 - k / 2, k / 2, k - 1 - k / 2}};
    if (op == VF_OP_CONV2D) e.n_in = 2, e.in[0] = x, e.in[1] = w, e.out = y;
    else if (op == VF_OP_CONV2D_BACKPROP_FILTER) e.n_in = 2, e.in[0] = x, e.in[1] = y, e.out = w;
    else e.n_in = 1, e.in[0] = x, e.out = y;
    vf_gen_kernel kn;
    memset(&kn, 0, sizeof kn);
    vf_status st = vf_codegen_exec(&e, &lim_caps_lavapipe, &kn, err);
    vf_kernel_free(&kn);
    return st;
}

static void window_bound(vf_op op, int64_t hw, int64_t c, int64_t k, int64_t o)
{
    vf_err err = {0};
    assert_int_equal(gen_window_op(op, 4096, hw, c, k, o, &err), VF_ERROR_UNSUPPORTED);
    const char *at = strstr(err.message, "at most ");
    if (!at || !strstr(err.message, "fence timeout")) fail_msg("%s", err.message);
    long long most = atoll(at + 8);
    assert_true(most >= 1 && most < 4096);
    if (gen_window_op(op, most, hw, c, k, o, &err) != VF_OK) fail_msg("%lld images: %s", most, err.message);
    assert_int_equal(gen_window_op(op, most + 1, hw, c, k, o, &err), VF_ERROR_UNSUPPORTED);
}

static void test_work_bounds(void **state)
{
    (void)state;
    window_bound(VF_OP_CONV2D, 64, 64, 7, 64);                 /* 3136 MACs per output element */
    window_bound(VF_OP_CONV2D_BACKPROP_FILTER, 64, 64, 7, 64); /* the forward's MACs, in chunks */
    window_bound(VF_OP_MAX_POOL2D, 128, 16, 64, 0);            /* 4096 window steps per output */
    vf_err err = {0};
    assert_int_equal(gen_window_op(VF_OP_CONV2D, 32, 28, 16, 3, 32, &err), VF_OK); /* bench_conv's layer */
}

static void test_walk(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) walk(&rows[i]);
}

/* Keys are unique, walked or not. */
static void test_keys(void **state)
{
    (void)state;
    size_t nr = sizeof rows / sizeof rows[0], nn = sizeof not_walked / sizeof not_walked[0];
    for (size_t i = 0; i < nr + nn; i++)
        for (size_t j = i + 1; j < nr + nn; j++) {
            const char *a = i < nr ? rows[i].key : not_walked[i - nr], *b = j < nr ? rows[j].key : not_walked[j - nr];
            if (strcmp(a, b) == 0) fail_msg("key %s twice", a);
        }
}

int main(void)
{
    if (!vt_have_vulkan()) {
        printf("no Vulkan: nothing to run\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_keys), cmocka_unit_test(test_walk),
                                       cmocka_unit_test(test_work_bounds)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
