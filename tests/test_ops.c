/* Every eager op through the public API: the Vulkan backend against the
 * CPU backend (which tests/test_cpu_*.c check against double
 * references), with odd sizes, broadcasting, empty tensors, NaN/Inf and a
 * tensor over 64 MiB.
 *
 * Tolerances (|vk - cpu| <= atol + rtol*|cpu|), written per op class:
 *   exact ops (add sub mul max min neg abs relu square compare where cast copy
 *     transpose fill, integer arithmetic): bit-identical;
 *   div, sqrt, rsqrt: rtol 3e-7 (GLSL allows 2.5 ulp for division);
 *   exp log sin cos tanh sigmoid gelu: atol 1e-6, rtol 2e-6 on inputs in [-8, 8];
 *   pow: atol 1e-6, rtol 2e-5 (exp2(b*log2(a)): the error grows with |b log a|);
 *   sum/mean/norm reductions: atol 1e-5 * sqrt(n), rtol 1e-5 (summation order differs);
 *   softmax/log_softmax/xent: atol 1e-6, rtol 1e-5;
 *   matmul: atol 1e-5 * sqrt(k), rtol 1e-5;
 *   random_normal: atol 1e-5 (libm vs GPU log/cos/sin on identical Philox bits).
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    vf_context *cpu, *vk;
} ctxs;

static int setup(void **state)
{
    ctxs *c = calloc(1, sizeof *c);
    c->cpu = vt_context(VF_BACKEND_CPU);
    c->vk = vt_have_vulkan() ? vt_context(VF_BACKEND_VULKAN) : NULL;
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    ctxs *c = *state;
    vt_context_done(c->cpu);
    if (c->vk) vt_context_done(c->vk);
    free(c);
    return 0;
}

/* An input: dtype, shape, and how to make its data. */
typedef enum { D_UNIFORM, D_POSITIVE, D_SPECIAL, D_SPECIAL_SMALL, D_INT, D_SMALLINT, D_BOOL } datakind;
typedef struct {
    vf_dtype dtype;
    int rank;
    int64_t shape[VF_MAX_RANK];
    datakind kind;
} inspec;

static int64_t numel_of(const inspec *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->shape[i];
    return n;
}

static void *make_data(const inspec *s, uint64_t seed)
{
    int64_t n = numel_of(s);
    size_t bytes = (size_t)n * vf_dtype_size(s->dtype) + 4;
    void *p = calloc(1, bytes);
    if (s->dtype == VF_F32) {
        float *f = p;
        if (s->kind == D_POSITIVE) vt_fill_uniform(f, (size_t)n, 0.05f, 4.0f, seed);
        else vt_fill_uniform(f, (size_t)n, -8.0f, 8.0f, seed);
        if (s->kind == D_SPECIAL || s->kind == D_SPECIAL_SMALL) {
            /* D_SPECIAL_SMALL: for sin/cos, whose GPU versions are only
               accurate for moderate arguments (as on every GPU) */
            const float big = s->kind == D_SPECIAL ? 1e30f : 30.0f;
            const float sp[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, big, -1e-30f, 2.0f};
            for (int64_t i = 0; i < n; i += 3) f[i] = sp[(i / 3) % 8];
        }
    } else if (s->dtype == VF_I32 || s->dtype == VF_U32) {
        int32_t *x = p;
        if (s->kind == D_SMALLINT) vt_fill_int(x, (size_t)n, -5, 5, seed);
        else vt_fill_int(x, (size_t)n, INT32_MIN, INT32_MAX, seed);
        for (int64_t i = 0; i < n; i += 7) x[i] = (int32_t)(i % 3) - 1; /* zeros and -1 for div */
    } else if (s->dtype == VF_BOOL) {
        uint8_t *b = p;
        for (int64_t i = 0; i < n; i++) b[i] = (uint8_t)(((uint64_t)i * 2654435761u + seed) >> 7 & 1);
    } else if (s->dtype == VF_F16) {
        uint16_t *h = p;
        for (int64_t i = 0; i < n; i++) h[i] = (uint16_t)(0x3c00 + (i * 37 % 1024) - 512 * (i & 1));
    }
    return p;
}

typedef vf_tensor *(*build_fn)(vf_context *, vf_tensor **, const void *arg);

/* Runs build on both backends with the same inputs and compares. */
static void check_case(ctxs *c, const char *what, build_fn build, const void *arg, int n_in, const inspec *in,
                       double atol, double rtol)
{
    void *data[3];
    for (int i = 0; i < n_in; i++) data[i] = make_data(&in[i], 100 + (uint64_t)i);
    void *res[2] = {0};
    size_t bytes[2] = {0};
    vf_dtype dt[2];
    vf_context *cs[2] = {c->cpu, c->vk};
    int nb = c->vk ? 2 : 1;
    for (int b = 0; b < nb; b++) {
        vf_scope_begin(cs[b]);
        vf_tensor *t[3];
        for (int i = 0; i < n_in; i++)
            t[i] = vf_tensor_from_host(cs[b], in[i].dtype, in[i].rank, in[i].shape, data[i]);
        vf_tensor *out = build(cs[b], t, arg);
        if (!out) fail_msg("%s on %s: %s", what, vf_device_name(cs[b]), vf_error_message(cs[b]));
        res[b] = vt_read(out);
        bytes[b] = vf_tensor_bytes(out);
        dt[b] = vf_tensor_dtype(out);
        vf_scope_end(cs[b]);
        assert_int_equal(vf_status_get(cs[b]), VF_OK);
    }
    if (nb == 2) {
        assert_int_equal(bytes[0], bytes[1]);
        assert_int_equal(dt[0], dt[1]);
        char label[160];
        snprintf(label, sizeof label, "%s (vulkan vs cpu)", what);
        if (dt[0] == VF_F32 && (atol > 0 || rtol > 0))
            vt_assert_close_f32(res[1], res[0], bytes[0] / 4, atol, rtol, label);
        else
            vt_assert_equal_bytes(res[1], res[0], bytes[0], label);
    }
    for (int b = 0; b < nb; b++) free(res[b]);
    for (int i = 0; i < n_in; i++) free(data[i]);
}

/* ---- elementwise -------------------------------------------------------- */

typedef vf_tensor *(*binop)(vf_context *, vf_tensor *, vf_tensor *);
typedef vf_tensor *(*unop)(vf_context *, vf_tensor *);

static vf_tensor *b_bin(vf_context *ctx, vf_tensor **t, const void *arg) { return ((binop)arg)(ctx, t[0], t[1]); }
static vf_tensor *b_un(vf_context *ctx, vf_tensor **t, const void *arg) { return ((unop)arg)(ctx, t[0]); }

static const struct {
    const char *name;
    binop fn;
    int float_only, ints, tol; /* tol: 0 exact, 1 div-like, 2 transcendental */
} binops[] = {
    {"add", vf_add, 0, 1, 0}, {"sub", vf_sub, 0, 1, 0}, {"mul", vf_mul, 0, 1, 0},
    {"div", vf_div, 0, 1, 1}, {"pow", vf_pow, 1, 0, 3}, {"maximum", vf_maximum, 0, 1, 0},
    {"minimum", vf_minimum, 0, 1, 0}, {"greater", vf_greater, 0, 1, 0},
    {"greater_equal", vf_greater_equal, 0, 1, 0}, {"less", vf_less, 0, 1, 0},
    {"less_equal", vf_less_equal, 0, 1, 0}, {"equal", vf_equal, 0, 1, 0},
    {"not_equal", vf_not_equal, 0, 1, 0},
};

static const struct {
    const char *name;
    unop fn;
    int ints, positive, tol;
} unops[] = { /* positive 2: no huge arguments */
    {"neg", vf_neg, 1, 0, 0}, {"exp", vf_exp, 0, 0, 2}, {"log", vf_log, 0, 1, 2},
    {"sqrt", vf_sqrt, 0, 1, 1}, {"rsqrt", vf_rsqrt, 0, 1, 1}, {"abs", vf_abs, 1, 0, 0},
    {"tanh", vf_tanh, 0, 0, 2}, {"sigmoid", vf_sigmoid, 0, 0, 2}, {"relu", vf_relu, 1, 0, 0},
    {"gelu", vf_gelu, 0, 0, 2}, {"sin", vf_sin, 0, 2, 2}, {"cos", vf_cos, 0, 2, 2},
    {"square", vf_square, 1, 0, 0},
};

static const double tol_atol[] = {0, 0, 1e-6, 1e-6}, tol_rtol[] = {0, 3e-7, 2e-6, 2e-5};

static const struct {
    int ra;
    int64_t a[4];
    int rb;
    int64_t b[4];
} bshapes[] = {
    {1, {1}, 1, {1}},           {1, {7}, 1, {7}},          {1, {1031}, 1, {1031}},
    {1, {4096}, 1, {4096}},     {3, {3, 1, 5}, 2, {4, 1}}, {0, {0}, 2, {5, 3}},
    {2, {33, 17}, 1, {17}},     {2, {1, 9}, 2, {6, 1}},    {1, {100003}, 1, {100003}},
};

static void test_binary(void **state)
{
    ctxs *c = *state;
    for (size_t o = 0; o < sizeof binops / sizeof *binops; o++)
        for (size_t s = 0; s < sizeof bshapes / sizeof *bshapes; s++)
            for (int d = 0; d < 3; d++) {
                vf_dtype dt = d == 0 ? VF_F32 : d == 1 ? VF_I32 : VF_U32;
                if (dt != VF_F32 && !binops[o].ints) continue;
                inspec in[2] = {{dt, bshapes[s].ra, {0}, D_SPECIAL}, {dt, bshapes[s].rb, {0}, D_UNIFORM}};
                memcpy(in[0].shape, bshapes[s].a, sizeof bshapes[s].a);
                memcpy(in[1].shape, bshapes[s].b, sizeof bshapes[s].b);
                if (dt != VF_F32) in[0].kind = in[1].kind = binops[o].tol ? D_SMALLINT : D_INT;
                char what[96];
                snprintf(what, sizeof what, "%s %s shape #%zu", binops[o].name, vf_dtype_name(dt), s);
                int tol = dt == VF_F32 ? binops[o].tol : 0;
                check_case(c, what, b_bin, (const void *)binops[o].fn, 2, in, tol_atol[tol], tol_rtol[tol]);
            }
}

static void test_unary(void **state)
{
    ctxs *c = *state;
    static const int64_t sizes[] = {1, 5, 1024, 4099, 262147};
    for (size_t o = 0; o < sizeof unops / sizeof *unops; o++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
            for (int d = 0; d < 2; d++) {
                vf_dtype dt = d ? VF_I32 : VF_F32;
                if (d && !unops[o].ints) continue;
                inspec in = {dt, 1, {sizes[s]}, unops[o].positive == 1 ? D_POSITIVE : D_UNIFORM};
                if (s == 2 && !d) in.kind = unops[o].positive == 2 ? D_SPECIAL_SMALL : D_SPECIAL; /* NaN, Inf, -0 */
                if (d) in.kind = D_INT;
                char what[96];
                snprintf(what, sizeof what, "%s %s n=%lld", unops[o].name, vf_dtype_name(dt), (long long)sizes[s]);
                int tol = d ? 0 : unops[o].tol;
                check_case(c, what, b_un, (const void *)unops[o].fn, 1, &in, tol_atol[tol], tol_rtol[tol]);
            }
}

static vf_tensor *b_where(vf_context *ctx, vf_tensor **t, const void *arg)
{
    (void)arg;
    return vf_where(ctx, t[0], t[1], t[2]);
}

static void test_where(void **state)
{
    ctxs *c = *state;
    inspec in[3] = {{VF_BOOL, 2, {5, 1}, D_BOOL}, {VF_F32, 2, {5, 7}, D_SPECIAL}, {VF_F32, 1, {7}, D_UNIFORM}};
    check_case(c, "where f32 broadcast", b_where, NULL, 3, in, 0, 0);
    inspec in2[3] = {{VF_BOOL, 1, {1001}, D_BOOL}, {VF_I32, 1, {1001}, D_INT}, {VF_I32, 0, {0}, D_INT}};
    check_case(c, "where i32 scalar", b_where, NULL, 3, in2, 0, 0);
}

static vf_tensor *b_cast(vf_context *ctx, vf_tensor **t, const void *arg)
{
    return vf_cast(ctx, t[0], *(const vf_dtype *)arg);
}

static void test_cast(void **state)
{
    ctxs *c = *state;
    static const vf_dtype all[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            inspec in = {all[i], 1, {1029}, all[i] == VF_F32 ? D_SPECIAL : all[i] == VF_BOOL ? D_BOOL : D_INT};
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s", vf_dtype_name(all[i]), vf_dtype_name(all[j]));
            check_case(c, what, b_cast, &all[j], 1, &in, 0, 0);
        }
}

static vf_tensor *b_exp16(vf_context *ctx, vf_tensor **t, const void *arg)
{
    (void)arg;
    return vf_cast(ctx, vf_exp(ctx, t[0]), VF_F32);
}

/* f16 storage: arithmetic in f32, rounded on store. */
static void test_f16(void **state)
{
    ctxs *c = *state;
    inspec in[2] = {{VF_F16, 2, {3, 333}, D_UNIFORM}, {VF_F16, 1, {333}, D_UNIFORM}};
    check_case(c, "add f16", b_bin, (const void *)vf_add, 2, in, 0, 0);
    /* exp may round differently by one f16 ulp (GPU exp vs libm): compare in f32 */
    check_case(c, "exp f16", b_exp16, NULL, 1, in, 0, 1e-3);
}

/* ---- reductions ---------------------------------------------------------- */

typedef struct {
    int which; /* 0 sum 1 mean 2 max 3 min */
    int naxes;
    int axes[4];
    bool keep;
} redarg;

static vf_tensor *b_reduce(vf_context *ctx, vf_tensor **t, const void *arg)
{
    const redarg *r = arg;
    vf_tensor *(*fn[])(vf_context *, vf_tensor *, int, const int *, bool) = {
        vf_reduce_sum, vf_reduce_mean, vf_reduce_max, vf_reduce_min};
    return fn[r->which](ctx, t[0], r->naxes, r->axes, r->keep);
}

static void test_reduce(void **state)
{
    ctxs *c = *state;
    static const struct {
        int rank;
        int64_t shape[4];
        int naxes;
        int axes[4];
    } cases[] = {
        {1, {1}, 0, {0}},           {1, {100003}, 0, {0}},        {2, {37, 1023}, 1, {1}},
        {2, {37, 1023}, 1, {0}},    {3, {5, 6, 7}, 2, {0, 2}},    {3, {5, 6, 7}, 1, {-2}},
        {4, {2, 3, 4, 5}, 2, {1, 3}}, {2, {1000, 3}, 1, {0}},     {2, {2048, 1024}, 1, {-1}},
        {1, {1 << 20}, 1, {0}},
    };
    const char *names[] = {"sum", "mean", "max", "min"};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int w = 0; w < 4; w++)
            for (int keep = 0; keep < 2; keep++)
                for (int d = 0; d < 2; d++) {
                    if (d && w == 1) continue; /* mean is float-only */
                    redarg r = {w, cases[k].naxes, {0}, keep};
                    memcpy(r.axes, cases[k].axes, sizeof r.axes);
                    inspec in = {d ? VF_I32 : VF_F32, cases[k].rank, {0}, d ? D_SMALLINT : D_UNIFORM};
                    memcpy(in.shape, cases[k].shape, sizeof cases[k].shape);
                    int64_t n = numel_of(&in);
                    char what[96];
                    snprintf(what, sizeof what, "reduce_%s %s case %zu keep=%d", names[w],
                             d ? "i32" : "f32", k, keep);
                    double atol = w < 2 ? 8e-6 * sqrt((double)n) : 0, rtol = w < 2 ? 1e-5 : 0;
                    check_case(c, what, b_reduce, &r, 1, &in, atol, rtol);
                }
    /* NaN propagates through max/min */
    inspec sp = {VF_F32, 2, {9, 31}, D_SPECIAL};
    redarg mx = {2, 1, {1}, false};
    check_case(c, "reduce_max with NaN", b_reduce, &mx, 1, &sp, 0, 0);
}

static vf_tensor *b_norm(vf_context *ctx, vf_tensor **t, const void *arg)
{
    (void)arg;
    return vf_norm(ctx, t[0]);
}

static vf_tensor *b_argmax(vf_context *ctx, vf_tensor **t, const void *arg)
{
    return vf_argmax(ctx, t[0], *(const int *)arg);
}

static void test_norm_argmax(void **state)
{
    ctxs *c = *state;
    inspec in = {VF_F32, 2, {513, 129}, D_UNIFORM};
    check_case(c, "norm", b_norm, NULL, 1, &in, 1e-3, 1e-5);
    static const int axes[] = {0, 1, -1};
    for (int i = 0; i < 3; i++) {
        check_case(c, "argmax f32", b_argmax, &axes[i], 1, &in, 0, 0);
        inspec ii = {VF_I32, 2, {77, 1000}, D_SMALLINT}; /* many ties: first index wins */
        check_case(c, "argmax i32 ties", b_argmax, &axes[i], 1, &ii, 0, 0);
    }
    inspec sp = {VF_F32, 2, {20, 17}, D_SPECIAL};
    check_case(c, "argmax with NaN", b_argmax, &axes[2], 1, &sp, 0, 0);
}

/* ---- row ops --------------------------------------------------------------- */

static vf_tensor *b_softmax(vf_context *ctx, vf_tensor **t, const void *arg)
{
    const int *a = arg;
    return a[1] ? vf_log_softmax(ctx, t[0], a[0]) : vf_softmax(ctx, t[0], a[0]);
}

static vf_tensor *b_xent(vf_context *ctx, vf_tensor **t, const void *arg)
{
    (void)arg;
    return vf_sparse_softmax_cross_entropy(ctx, t[0], t[1]);
}

static void test_softmax(void **state)
{
    ctxs *c = *state;
    static const struct {
        int rank;
        int64_t shape[3];
        int axis;
    } cases[] = {{1, {1}, 0}, {2, {3, 10}, -1}, {2, {64, 1000}, 1}, {2, {2048, 1024}, -1},
                 {3, {4, 33, 5}, 1}, {2, {17, 9}, 0},
                 /* lavapipe's register variant (rows of 4k floats up to 2048) and its edges */
                 {2, {7, 12}, -1}, {2, {5, 2048}, -1}, {2, {3, 2052}, -1}, {3, {2, 3, 4}, 2},
                 /* RK (vec4 per lane) around 16, 32 and 64 */
                 {2, {3, 508}, -1}, {2, {3, 512}, -1}, {2, {3, 516}, -1}, {2, {3, 1020}, -1}, {2, {4, 1028}, -1},
                 {2, {3, 1540}, -1}, {2, {2, 2044}, -1},
                 /* 8 rows a workgroup, the last group part full (21 = 2 x 8 + 5) */
                 {2, {21, 64}, -1}, {2, {37, 1024}, -1}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++)
        for (int lg = 0; lg < 2; lg++) {
            int arg[2] = {cases[k].axis, lg};
            inspec in = {VF_F32, cases[k].rank, {0}, D_UNIFORM};
            memcpy(in.shape, cases[k].shape, sizeof cases[k].shape);
            check_case(c, lg ? "log_softmax" : "softmax", b_softmax, arg, 1, &in, 1e-6, 1e-5);
        }
    /* huge logits stay finite (max subtracted) */
    vf_context *cs[2] = {c->cpu, c->vk};
    for (int b = 0; b < (c->vk ? 2 : 1); b++) {
        float big[4] = {1e30f, 1e30f, -1e30f, 0}, got[4];
        int64_t sh[1] = {4};
        vf_tensor *y = vf_softmax(cs[b], vf_tensor_from_host(cs[b], VF_F32, 1, sh, big), 0);
        assert_int_equal(vf_tensor_read(y, got, sizeof got), VF_OK);
        float want[4] = {0.5f, 0.5f, 0, 0};
        vt_assert_close_f32(got, want, 4, 1e-7, 0, "softmax of 1e30");
    }
    /* special rows, through the register variant (rows of 8, 1024 and
       2048: RK 1, 32, 64) as through the CPU backend: all -inf, a NaN,
       some -inf, +inf, ordinary (the row of 8 stretched over the length),
       and one spike in one lane */
    float sp[5][8] = {{-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
                      {1, 2, NAN, 4, 5, 6, 7, 8},
                      {-INFINITY, 0, -INFINITY, 1, -INFINITY, 2, -INFINITY, 3},
                      {0, 1, 2, INFINITY, 4, 5, 6, 7},
                      {-3, -2, -1, 0, 1, 2, 3, 4}};
    static const int64_t lens[] = {8, 1024, 2048};
    float *xs = malloc(6 * 2048 * sizeof *xs), *sw = malloc(6 * 2048 * sizeof *sw),
          *sg = malloc(6 * 2048 * sizeof *sg);
    assert_non_null(xs);
    assert_non_null(sw);
    assert_non_null(sg);
    for (size_t li = 0; li < 3 && c->vk; li++) {
        int64_t L = lens[li], sh[2] = {6, L};
        size_t n = (size_t)(6 * L);
        for (int64_t r = 0; r < 5; r++)
            for (int64_t j = 0; j < L; j++) xs[r * L + j] = sp[r][j * 8 / L];
        for (int64_t j = 0; j < L; j++) xs[5 * L + j] = -3.0f;
        xs[5 * L + L / 2 + 4 * 8 + 1] = 50.0f;
        for (int lg = 0; lg < 2; lg++) {
            for (int b = 0; b < 2; b++) {
                vf_tensor *x = vf_tensor_from_host(cs[b], VF_F32, 2, sh, xs);
                vf_tensor *y = lg ? vf_log_softmax(cs[b], x, -1) : vf_softmax(cs[b], x, -1);
                assert_int_equal(vf_tensor_read(y, b ? sg : sw, n * sizeof *sg), VF_OK);
            }
            vt_assert_close_f32(sg, sw, n, 1e-6, 1e-5, lg ? "log_softmax special rows" : "softmax special rows");
        }
    }
    free(xs);
    free(sw);
    free(sg);
    /* cross-entropy: labels in range, plus one out of range -> NaN */
    inspec xin[2] = {{VF_I32, 1, {300}, D_INT}, {VF_F32, 2, {300, 10}, D_UNIFORM}};
    int32_t labels[300];
    for (int i = 0; i < 300; i++) labels[i] = i % 10;
    labels[7] = 10;
    labels[8] = -1;
    check_case(c, "sparse xent (random labels: mostly out of range -> NaN)", b_xent, NULL, 2, xin, 1e-6, 1e-5);
    for (int b = 0; b < (c->vk ? 2 : 1); b++) {
        int64_t ls[1] = {300}, gs[2] = {300, 10};
        float logits[3000], got[300];
        vt_fill_uniform(logits, 3000, -5, 5, 9);
        vf_tensor *l = vf_tensor_from_host(cs[b], VF_I32, 1, ls, labels);
        vf_tensor *g = vf_tensor_from_host(cs[b], VF_F32, 2, gs, logits);
        assert_int_equal(vf_tensor_read(vf_sparse_softmax_cross_entropy(cs[b], l, g), got, sizeof got), VF_OK);
        for (int i = 0; i < 300; i++) {
            double m = -1e300, s = 0;
            for (int j = 0; j < 10; j++) m = fmax(m, logits[i * 10 + j]);
            for (int j = 0; j < 10; j++) s += exp(logits[i * 10 + j] - m);
            float want = (labels[i] < 0 || labels[i] >= 10) ? NAN : (float)(m + log(s) - logits[i * 10 + labels[i]]);
            vt_assert_close_f32(&got[i], &want, 1, 1e-5, 1e-5, "sparse xent vs double reference");
        }
    }
}

/* ---- matmul, transpose, reshape -------------------------------------------- */

typedef struct {
    bool ta, tb;
} mmarg;

static vf_tensor *b_matmul(vf_context *ctx, vf_tensor **t, const void *arg)
{
    const mmarg *m = arg;
    return vf_matmul_ex(ctx, t[0], t[1], m->ta, m->tb);
}

static void test_matmul(void **state)
{
    ctxs *c = *state;
    static const int64_t mnk[][3] = {{1, 1, 1}, {7, 5, 3}, {64, 64, 64}, {33, 129, 65}, {1, 1000, 784}, {256, 256, 256}};
    for (size_t i = 0; i < sizeof mnk / sizeof *mnk; i++)
        for (int t = 0; t < 4; t++) {
            mmarg m = {t & 1, t >> 1};
            int64_t M = mnk[i][0], N = mnk[i][1], K = mnk[i][2];
            inspec in[2] = {{VF_F32, 2, {m.ta ? K : M, m.ta ? M : K}, D_UNIFORM},
                            {VF_F32, 2, {m.tb ? N : K, m.tb ? K : N}, D_UNIFORM}};
            char what[96];
            snprintf(what, sizeof what, "matmul %lldx%lldx%lld ta=%d tb=%d", (long long)M, (long long)N,
                     (long long)K, m.ta, m.tb);
            check_case(c, what, b_matmul, &m, 2, in, 2e-5 * sqrt((double)K) * 8, 1e-5);
        }
    /* batched with broadcast batch dims, and vectors */
    mmarg m = {false, false};
    inspec bat[2] = {{VF_F32, 3, {4, 9, 11}, D_UNIFORM}, {VF_F32, 2, {11, 6}, D_UNIFORM}};
    check_case(c, "matmul batch broadcast", b_matmul, &m, 2, bat, 1e-4, 1e-5);
    inspec bat2[2] = {{VF_F32, 4, {2, 1, 5, 3}, D_UNIFORM}, {VF_F32, 3, {4, 3, 2}, D_UNIFORM}};
    check_case(c, "matmul batch 2x1 vs 4", b_matmul, &m, 2, bat2, 1e-4, 1e-5);
    inspec vec[2] = {{VF_F32, 1, {13}, D_UNIFORM}, {VF_F32, 2, {13, 4}, D_UNIFORM}};
    check_case(c, "matmul vector @ matrix", b_matmul, &m, 2, vec, 1e-4, 1e-5);
}

static vf_tensor *b_transpose(vf_context *ctx, vf_tensor **t, const void *arg)
{
    return vf_transpose(ctx, t[0], arg);
}

static void test_transpose(void **state)
{
    ctxs *c = *state;
    static const int p2[] = {1, 0}, p4[] = {2, 0, 3, 1};
    inspec a = {VF_F32, 2, {37, 129}, D_UNIFORM};
    check_case(c, "transpose 2d", b_transpose, p2, 1, &a, 0, 0);
    inspec b = {VF_BOOL, 4, {3, 4, 5, 6}, D_BOOL};
    check_case(c, "transpose 4d bool", b_transpose, p4, 1, &b, 0, 0);
    inspec h = {VF_F16, 4, {3, 4, 5, 6}, D_UNIFORM};
    check_case(c, "transpose 4d f16", b_transpose, p4, 1, &h, 0, 0);
    check_case(c, "transpose reverse", b_transpose, NULL, 1, &b, 0, 0);
}

/* ---- sources ----------------------------------------------------------------- */

static vf_tensor *b_random(vf_context *ctx, vf_tensor **t, const void *arg)
{
    (void)t;
    const int64_t *shape = arg;
    return vf_random_normal(ctx, VF_F32, 2, shape, 42);
}

static vf_tensor *b_fill(vf_context *ctx, vf_tensor **t, const void *arg)
{
    (void)t;
    const int64_t *shape = arg;
    return vf_add(ctx, vf_fill(ctx, VF_F32, 2, shape, 0.25), vf_cast(ctx, vf_fill(ctx, VF_I32, 2, shape, -3.7), VF_F32));
}

static void test_sources(void **state)
{
    ctxs *c = *state;
    static const int64_t shape[2] = {333, 7};
    check_case(c, "random_normal seed 42", b_random, shape, 0, NULL, 1e-5, 0);
    check_case(c, "fill", b_fill, shape, 0, NULL, 0, 0);
}

/* ---- big and empty ------------------------------------------------------------- */

static void test_large(void **state)
{
    ctxs *c = *state;
    /* 17M f32 = 68 MiB per tensor: over 64 MiB, under lavapipe's 128 MiB binding limit */
    inspec in[2] = {{VF_F32, 1, {17 * 1024 * 1024}, D_UNIFORM}, {VF_F32, 1, {17 * 1024 * 1024}, D_UNIFORM}};
    check_case(c, "add over 64 MiB", b_bin, (const void *)vf_add, 2, in, 0, 0);
    redarg r = {0, 0, {0}, false};
    check_case(c, "sum over 64 MiB", b_reduce, &r, 1, in, 1e-1, 1e-5);
    /* over the device's binding limit (128 MiB on lavapipe): a clear error, the context stays usable */
    if (c->vk) {
        vf_device_info info[4];
        char err[128];
        int n = vf_devices(info, 4, err, sizeof err);
        uint64_t limit = 0;
        for (int i = 0; i < n && i < 4; i++)
            if (info[i].chosen) limit = info[i].max_storage_buffer_range;
        int64_t big[1] = {(int64_t)(limit / 4) + 1024};
        if (limit && limit < ((uint64_t)1 << 33)) {
            assert_null(vf_fill(c->vk, VF_F32, 1, big, 1.0));
            vt_expect_error(c->vk, VF_ERROR_UNSUPPORTED, "vf_fill", "maxStorageBufferRange", NULL);
            int64_t ok[1] = {4};
            assert_non_null(vf_fill(c->vk, VF_F32, 1, ok, 1.0));
        }
    }
}

static void test_empty(void **state)
{
    ctxs *c = *state;
    vf_context *cs[2] = {c->cpu, c->vk};
    for (int b = 0; b < (c->vk ? 2 : 1); b++) {
        vf_context *ctx = cs[b];
        int64_t s0[2] = {0, 3}, s1[1] = {3}, sk[2] = {4, 0}, sk2[2] = {0, 5};
        vf_tensor *e = vf_fill(ctx, VF_F32, 2, s0, 1.0);
        vf_tensor *y = vf_add(ctx, e, vf_fill(ctx, VF_F32, 1, s1, 2.0));
        assert_non_null(y);
        assert_int_equal(vf_tensor_numel(y), 0);
        assert_int_equal(vf_tensor_dim(y, 1), 3);
        float v[3];
        int ax0 = 0;
        assert_int_equal(vf_tensor_read(vf_reduce_sum(ctx, e, 1, &ax0, false), v, sizeof v), VF_OK);
        assert_true(v[0] == 0 && v[2] == 0);
        assert_int_equal(vf_tensor_read(vf_reduce_mean(ctx, e, 1, &ax0, false), v, sizeof v), VF_OK);
        assert_true(isnan(v[0]));
        assert_null(vf_reduce_max(ctx, e, 1, &ax0, false));
        vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_reduce_max", "empty", NULL);
        float mm[20];
        vf_tensor *p = vf_matmul(ctx, vf_fill(ctx, VF_F32, 2, sk, 1), vf_fill(ctx, VF_F32, 2, sk2, 1));
        assert_int_equal(vf_tensor_read(p, mm, sizeof mm), VF_OK);
        for (int i = 0; i < 20; i++) assert_true(mm[i] == 0.0f);
        assert_int_equal(vf_tensor_numel(vf_softmax(ctx, e, -1)), 0);
        assert_int_equal(vf_tensor_numel(vf_transpose(ctx, e, NULL)), 0);
        assert_int_equal(vf_status_get(ctx), VF_OK);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary),    cmocka_unit_test(test_unary),   cmocka_unit_test(test_where),
        cmocka_unit_test(test_cast),      cmocka_unit_test(test_f16),     cmocka_unit_test(test_reduce),
        cmocka_unit_test(test_norm_argmax), cmocka_unit_test(test_softmax), cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_transpose), cmocka_unit_test(test_sources), cmocka_unit_test(test_large),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
