/* The CPU backend through its iface, against double-precision references
 * written here (independently of the op table's scalar functions). */
#include "backend.h"
#include "util/dtype.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- tolerances (relative unless named _ABS) ------------------------------ */
/* +,-,*,/, max, min, neg, abs, relu, compares, casts: double then one
   rounding is what float arithmetic gives: exact. */
#define TOL_EXACT 0.0
/* Transcendentals: both sides round libm's double result to f32; allow one
   f32 ulp for libm differences and the gelu constant's last digit. */
#define TOL_F32_MATH 2.5e-7
/* f16 results: one f16 ulp (the f32 -> f16 step may round a tie differently). */
#define TOL_F16 1e-3
/* Reductions: double accumulation in a different order, rounded once to
   f32: within 1e-6 of the sum of magnitudes. */
#define TOL_REDUCE_F32 1e-6
#define TOL_REDUCE_F16 1e-3
/* softmax outputs in [0, 1] and log_softmax: double inside, one rounding. */
#define TOL_SOFTMAX 1e-6
#define TOL_SOFTMAX_ABS 1e-7
/* sgemm (f32 accumulation, blocked order): relative to sum |a||b|. */
#define TOL_MATMUL_F32 1e-5
#define TOL_MATMUL_F16 2e-3
/* random_normal pins: f32 logf/cosf/sinf vs. double math. */
#define TOL_RANDOM_PIN_ABS 2e-6
/* mean and std of 1e5 normals: standard error 0.0032 / 0.0022, 6 sigma. */
#define TOL_RANDOM_MOMENT 0.02

/* Let an ASan build report allocation failure as NULL, as glibc does, so
   the out-of-memory path can be tested. Unused without ASan. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- fixture ----------------------------------------------------------------- */

typedef struct fx {
    vf_err err;
    vf_backend_t be;
    vf_buffer *bufs[256];
    int nbufs;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f || vf_cpu_backend_create(&f->err, &f->be) != VF_OK) return -1;
    *state = f;
    return 0;
}

static void free_bufs(fx *f)
{
    for (int i = 0; i < f->nbufs; i++) f->be.iface->free(f->be.self, f->bufs[i]);
    f->nbufs = 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    free_bufs(f);
    f->be.iface->destroy(f->be.self);
    free(f);
    return 0;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(double lo, double hi) { return lo + (hi - lo) * (double)(rng() >> 11) * 0x1p-53; }

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    return n;
}

static vf_tref mk(fx *f, vf_dtype dt, int rank, const int64_t *shape, const void *data)
{
    vf_tref t = {.dtype = dt, .rank = rank};
    for (int d = 0; d < rank; d++) t.shape[d] = shape[d];
    size_t bytes = (size_t)numel(rank, shape) * vf_dtype_size(dt);
    assert_true(f->nbufs < 256);
    assert_int_equal(f->be.iface->alloc(f->be.self, bytes ? bytes : 1, &t.buf), VF_OK);
    f->bufs[f->nbufs++] = t.buf;
    if (data && bytes) assert_int_equal(f->be.iface->upload(f->be.self, t.buf, 0, data, bytes), VF_OK);
    return t;
}

static void *dl(fx *f, const vf_tref *t)
{
    size_t bytes = (size_t)numel(t->rank, t->shape) * vf_dtype_size(t->dtype);
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    assert_int_equal(f->be.iface->download(f->be.self, t->buf, t->offset, p, bytes), VF_OK);
    return p;
}

static void run(fx *f, const vf_exec *e)
{
    vf_status s = f->be.iface->exec(f->be.self, e);
    if (s != VF_OK) fail_msg("exec failed: %s", f->err.message);
}

/* Element i widened (test's own decoding). */
static double getf(const void *p, vf_dtype t, int64_t i)
{
    switch (t) {
    case VF_F32: return ((const float *)p)[i];
    case VF_F16: return vf_f16_to_f32(((const uint16_t *)p)[i]);
    case VF_I32: return ((const int32_t *)p)[i];
    case VF_U32: return ((const uint32_t *)p)[i];
    case VF_BOOL: return ((const uint8_t *)p)[i];
    }
    return 0;
}
static int64_t geti(const void *p, vf_dtype t, int64_t i) { return (int64_t)getf(p, t, i); }

/* Round a double reference to the storage dtype, back as double. */
static double round_to(vf_dtype t, double v)
{
    if (t == VF_F16) return vf_f16_to_f32(vf_f32_to_f16((float)v));
    if (t == VF_F32) return (float)v;
    return v;
}

static void expect_close(const char *what, int64_t i, double got, double want, double rtol, double atol)
{
    if (isnan(want) && isnan(got)) return;
    if (isinf(want) && got == want) return;
    if (fabs(got - want) <= atol + rtol * fabs(want)) return;
    fail_msg("%s: element %lld: got %.9g, want %.9g", what, (long long)i, got, want);
}

/* Random data of a dtype, with some specials in floats and ints. */
static void *gen(vf_dtype t, int64_t n, bool specials)
{
    void *p = malloc((size_t)(n ? n : 1) * vf_dtype_size(t));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        double v = urand(-4, 4);
        switch (t) {
        case VF_F32: ((float *)p)[i] = (float)v; break;
        case VF_F16: ((uint16_t *)p)[i] = vf_f32_to_f16((float)v); break;
        case VF_I32: ((int32_t *)p)[i] = (rng() & 3) ? (int32_t)(rng() % 41) - 20 : (int32_t)(uint32_t)rng(); break;
        case VF_U32: ((uint32_t *)p)[i] = (rng() & 3) ? (uint32_t)(rng() % 41) : (uint32_t)rng(); break;
        case VF_BOOL: ((uint8_t *)p)[i] = rng() & 1; break;
        }
    }
    if (specials && n >= 7 && (t == VF_F32)) {
        float *q = p;
        q[1] = NAN, q[2] = INFINITY, q[3] = -INFINITY, q[4] = 0.0f, q[5] = -0.0f;
    }
    if (specials && n >= 3 && t == VF_I32) {
        int32_t *q = p;
        q[0] = INT32_MAX, q[1] = INT32_MIN, q[2] = 0;
    }
    if (specials && n >= 3 && t == VF_U32) {
        uint32_t *q = p;
        q[0] = UINT32_MAX, q[1] = 0x80000000u, q[2] = 0;
    }
    return p;
}

/* ---- elementwise reference ------------------------------------------------ */

static bool is_cmp(vf_op op) { return op >= VF_OP_GREATER && op <= VF_OP_NOT_EQUAL; }

static double ref_f(vf_op op, double a, double b, double c)
{
    switch (op) {
    case VF_OP_ADD: return a + b;
    case VF_OP_SUB: return a - b;
    case VF_OP_MUL: return a * b;
    case VF_OP_DIV: return a / b;
    case VF_OP_POW: return pow(a, b);
    case VF_OP_MAXIMUM: return isnan(a) || isnan(b) ? NAN : fmax(a, b);
    case VF_OP_MINIMUM: return isnan(a) || isnan(b) ? NAN : fmin(a, b);
    case VF_OP_GREATER: return a > b;
    case VF_OP_GREATER_EQUAL: return a >= b;
    case VF_OP_LESS: return a < b;
    case VF_OP_LESS_EQUAL: return a <= b;
    case VF_OP_EQUAL: return a == b;
    case VF_OP_NOT_EQUAL: return a != b;
    case VF_OP_WHERE: return a != 0 ? b : c;
    case VF_OP_NEG: return -a;
    case VF_OP_EXP: return exp(a);
    case VF_OP_LOG: return log(a);
    case VF_OP_SQRT: return sqrt(a);
    case VF_OP_RSQRT: return 1 / sqrt(a);
    case VF_OP_ABS: return fabs(a);
    case VF_OP_TANH: return tanh(a);
    case VF_OP_SIGMOID: return 1 / (1 + exp(-a));
    case VF_OP_RELU: return a > 0 || isnan(a) ? a : 0.0;
    case VF_OP_GELU: return 0.5 * a * (1 + tanh(sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
    case VF_OP_SIN: return sin(a);
    case VF_OP_COS: return cos(a);
    default: fail_msg("no float reference for op %d", (int)op);
    }
    return 0;
}

/* Integer reference in int64, wrapped at the end to the 32-bit dtype. */
static int64_t ref_i(vf_op op, int64_t a, int64_t b, int64_t c, vf_dtype t)
{
    int64_t r;
    switch (op) {
    case VF_OP_ADD: r = a + b; break;
    case VF_OP_SUB: r = a - b; break;
    case VF_OP_MUL: r = (int64_t)((uint64_t)a * (uint64_t)b); break;
    case VF_OP_DIV:
        if (b == 0) r = 0;
        else r = a / b; /* int64: INT32_MIN / -1 does not trap and wraps below */
        break;
    case VF_OP_MAXIMUM: r = a > b ? a : b; break;
    case VF_OP_MINIMUM: r = a < b ? a : b; break;
    case VF_OP_WHERE: r = a ? b : c; break;
    case VF_OP_NEG: r = -a; break;
    case VF_OP_ABS: r = a < 0 ? -a : a; break;
    case VF_OP_RELU: r = a < 0 ? 0 : a; break;
    default:
        if (is_cmp(op)) return (int64_t)ref_f(op, (double)a, (double)b, 0);
        fail_msg("no integer reference for op %d", (int)op);
        return 0;
    }
    if (t == VF_I32) return (int32_t)(uint32_t)(uint64_t)r;
    if (t == VF_U32) return (uint32_t)(uint64_t)r;
    return r != 0;
}

static double op_tol(vf_op op, vf_dtype out)
{
    if (out == VF_F16) return TOL_F16;
    switch (op) {
    case VF_OP_POW: case VF_OP_EXP: case VF_OP_LOG: case VF_OP_SQRT: case VF_OP_RSQRT:
    case VF_OP_TANH: case VF_OP_SIGMOID: case VF_OP_GELU: case VF_OP_SIN: case VF_OP_COS:
        return TOL_F32_MATH;
    default: return TOL_EXACT;
    }
}

/* Flat index into an input broadcast to out, by div/mod (independent of the
   kernel's stride walk). */
static int64_t bidx(int64_t flat, int orank, const int64_t *os, int irank, const int64_t *is)
{
    int64_t idx = 0, mul = 1;
    for (int d = orank - 1; d >= 0; d--) {
        int64_t c = flat % os[d];
        flat /= os[d];
        int k = d - (orank - irank);
        if (k >= 0) {
            if (is[k] != 1) idx += c * mul;
            mul *= is[k];
        }
    }
    return idx;
}

typedef struct ew_in {
    vf_dtype dt;
    int rank;
    const int64_t *shape;
    const void *data; /* NULL: random */
} ew_in;

/* Runs op on the inputs broadcast to out shape and checks every element. */
static void check_ew(fx *f, vf_op op, int n_in, const ew_in *ins, int orank, const int64_t *os)
{
    vf_exec e = {.op = op, .n_in = n_in};
    void *data[3];
    for (int j = 0; j < n_in; j++) {
        int64_t n = numel(ins[j].rank, ins[j].shape);
        data[j] = gen(ins[j].dt, n, true);
        if (ins[j].data) memcpy(data[j], ins[j].data, (size_t)n * vf_dtype_size(ins[j].dt));
        e.in[j] = mk(f, ins[j].dt, ins[j].rank, ins[j].shape, data[j]);
    }
    vf_dtype data_t = op == VF_OP_WHERE ? ins[1].dt : ins[0].dt;
    vf_dtype ot = is_cmp(op) ? VF_BOOL : data_t;
    e.out = mk(f, ot, orank, os, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    int64_t n = numel(orank, os);
    char what[64];
    snprintf(what, sizeof what, "op %d %s", (int)op, vf_dtype_name(data_t));
    for (int64_t i = 0; i < n; i++) {
        int64_t k[3] = {0, 0, 0};
        for (int j = 0; j < n_in; j++) k[j] = bidx(i, orank, os, ins[j].rank, ins[j].shape);
        if (vf_dtype_is_float(data_t)) {
            double v[3] = {0, 0, 0};
            for (int j = 0; j < n_in; j++) v[j] = getf(data[j], ins[j].dt, k[j]);
            double want = round_to(ot, ref_f(op, v[0], v[1], v[2]));
            expect_close(what, i, getf(got, ot, i), want, op_tol(op, ot), ot == VF_F16 ? 1e-7 : 0);
        } else {
            int64_t v[3] = {0, 0, 0};
            for (int j = 0; j < n_in; j++) v[j] = geti(data[j], ins[j].dt, k[j]);
            int64_t want = ref_i(op, v[0], v[1], v[2], ot);
            if (geti(got, ot, i) != want)
                fail_msg("%s: element %lld: got %lld want %lld (a %lld b %lld)", what, (long long)i,
                         (long long)geti(got, ot, i), (long long)want, (long long)v[0], (long long)v[1]);
        }
    }
    free(got);
    for (int j = 0; j < n_in; j++) free(data[j]);
    free_bufs(f);
}

static const vf_op bin_ops[] = {VF_OP_ADD, VF_OP_SUB, VF_OP_MUL, VF_OP_DIV, VF_OP_POW,
                                VF_OP_MAXIMUM, VF_OP_MINIMUM};
static const vf_op cmp_ops[] = {VF_OP_GREATER, VF_OP_GREATER_EQUAL, VF_OP_LESS,
                                VF_OP_LESS_EQUAL, VF_OP_EQUAL, VF_OP_NOT_EQUAL};
static const vf_op float_unary[] = {VF_OP_NEG, VF_OP_EXP, VF_OP_LOG, VF_OP_SQRT, VF_OP_RSQRT,
                                    VF_OP_ABS, VF_OP_TANH, VF_OP_SIGMOID, VF_OP_RELU, VF_OP_GELU,
                                    VF_OP_SIN, VF_OP_COS};
#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

static void test_binary_sizes(void **state)
{
    static const int64_t sizes[] = {1, 7, 1000003};
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32};
    for (int s = 0; s < 3; s++)
        for (int t = 0; t < 4; t++)
            for (int o = 0; o < COUNT(bin_ops); o++) {
                if (bin_ops[o] == VF_OP_POW && !vf_dtype_is_float(dts[t])) continue;
                if (sizes[s] > 1000 && dts[t] != VF_F32 && o > 3) continue; /* keep it quick */
                ew_in in[2] = {{dts[t], 1, &sizes[s], NULL}, {dts[t], 1, &sizes[s], NULL}};
                check_ew(*state, bin_ops[o], 2, in, 1, &sizes[s]);
            }
}

static void test_scalar_broadcast(void **state)
{
    static const int64_t n[] = {1000003};
    static const float two = 2.5f;
    for (int o = 0; o < 4; o++) {
        ew_in vs[2] = {{VF_F32, 1, n, NULL}, {VF_F32, 0, NULL, &two}};
        check_ew(*state, bin_ops[o], 2, vs, 1, n);
        ew_in sv[2] = {{VF_F32, 0, NULL, &two}, {VF_F32, 1, n, NULL}};
        check_ew(*state, bin_ops[o], 2, sv, 1, n);
        ew_in ss[2] = {{VF_F32, 0, NULL, &two}, {VF_F32, 0, NULL, &two}};
        check_ew(*state, bin_ops[o], 2, ss, 0, NULL);
    }
}

static void test_broadcast_shapes(void **state)
{
    static const int64_t a[] = {3, 1, 5}, b[] = {4, 1}, o[] = {3, 4, 5};
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32};
    for (int t = 0; t < 4; t++)
        for (int k = 0; k < COUNT(bin_ops); k++) {
            if (bin_ops[k] == VF_OP_POW && !vf_dtype_is_float(dts[t])) continue;
            ew_in in[2] = {{dts[t], 3, a, NULL}, {dts[t], 2, b, NULL}};
            check_ew(*state, bin_ops[k], 2, in, 3, o);
            ew_in rev[2] = {{dts[t], 2, b, NULL}, {dts[t], 3, a, NULL}};
            check_ew(*state, bin_ops[k], 2, rev, 3, o);
        }
    /* rank 8, broadcast on alternating dims, lower-rank b */
    static const int64_t a8[] = {2, 1, 2, 1, 2, 1, 2, 3}, b7[] = {2, 1, 2, 1, 2, 1, 1};
    static const int64_t o8[] = {2, 2, 2, 2, 2, 2, 2, 3};
    ew_in r8[2] = {{VF_F32, 8, a8, NULL}, {VF_F32, 7, b7, NULL}};
    check_ew(*state, VF_OP_MUL, 2, r8, 8, o8);
    check_ew(*state, VF_OP_POW, 2, r8, 8, o8);
    ew_in r8i[2] = {{VF_I32, 8, a8, NULL}, {VF_I32, 7, b7, NULL}};
    check_ew(*state, VF_OP_SUB, 2, r8i, 8, o8);
}

static void test_integer_wrap_and_div(void **state)
{
    static const int64_t n[] = {6};
    static const int32_t ia[] = {INT32_MAX, INT32_MIN, -7, 7, 5, INT32_MIN};
    static const int32_t ib[] = {1, -1, 2, -2, 0, 0};
    ew_in in[2] = {{VF_I32, 1, n, ia}, {VF_I32, 1, n, ib}};
    for (int o = 0; o < COUNT(bin_ops); o++)
        if (bin_ops[o] != VF_OP_POW) check_ew(*state, bin_ops[o], 2, in, 1, n);
    /* spot values, written out: wrap, truncation toward zero, x / 0 = 0 */
    fx *f = *state;
    vf_exec e = {.op = VF_OP_DIV, .n_in = 2};
    e.in[0] = mk(f, VF_I32, 1, n, ia);
    e.in[1] = mk(f, VF_I32, 1, n, ib);
    e.out = mk(f, VF_I32, 1, n, NULL);
    run(f, &e);
    int32_t *q = dl(f, &e.out);
    static const int32_t want_div[] = {INT32_MAX, INT32_MIN, -3, -3, 0, 0};
    assert_memory_equal(q, want_div, sizeof want_div);
    free(q);
    e.op = VF_OP_ADD;
    run(f, &e);
    q = dl(f, &e.out);
    assert_int_equal(q[0], INT32_MIN);
    free(q);
    static const uint32_t ua[] = {UINT32_MAX, 0, 7, 0x80000000u, 9, 1};
    static const uint32_t ub[] = {2, 1, 2, 3, 0, UINT32_MAX};
    ew_in u[2] = {{VF_U32, 1, n, ua}, {VF_U32, 1, n, ub}};
    for (int o = 0; o < COUNT(bin_ops); o++)
        if (bin_ops[o] != VF_OP_POW) check_ew(*state, bin_ops[o], 2, u, 1, n);
    free_bufs(f);
}

static void test_comparisons(void **state)
{
    static const int64_t a[] = {3, 1, 5}, b[] = {4, 1}, o[] = {3, 4, 5}, n7[] = {7};
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    static const float fa[] = {NAN, 1, 2, INFINITY, -0.0f, NAN, 3};
    static const float fb[] = {1, NAN, 2, INFINITY, 0.0f, NAN, -3};
    for (int k = 0; k < COUNT(cmp_ops); k++) {
        for (int t = 0; t < 5; t++) {
            ew_in in[2] = {{dts[t], 3, a, NULL}, {dts[t], 2, b, NULL}};
            check_ew(*state, cmp_ops[k], 2, in, 3, o);
        }
        ew_in nan[2] = {{VF_F32, 1, n7, fa}, {VF_F32, 1, n7, fb}};
        check_ew(*state, cmp_ops[k], 2, nan, 1, n7);
    }
}

static void test_where(void **state)
{
    static const int64_t a[] = {3, 1, 5}, c[] = {4, 1}, o[] = {3, 4, 5};
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    for (int t = 0; t < 5; t++) {
        ew_in in[3] = {{VF_BOOL, 2, c, NULL}, {dts[t], 3, a, NULL}, {dts[t], 0, NULL, NULL}};
        check_ew(*state, VF_OP_WHERE, 3, in, 3, o);
        ew_in same[3] = {{VF_BOOL, 3, o, NULL}, {dts[t], 3, o, NULL}, {dts[t], 3, o, NULL}};
        check_ew(*state, VF_OP_WHERE, 3, same, 3, o);
    }
}

static void test_unary(void **state)
{
    static const int64_t sizes[] = {1, 7, 1000003};
    for (int s = 0; s < 3; s++)
        for (int k = 0; k < COUNT(float_unary); k++) {
            ew_in in[1] = {{VF_F32, 1, &sizes[s], NULL}};
            check_ew(*state, float_unary[k], 1, in, 1, &sizes[s]);
            if (s < 2) {
                ew_in h[1] = {{VF_F16, 1, &sizes[s], NULL}};
                check_ew(*state, float_unary[k], 1, h, 1, &sizes[s]);
            }
        }
    static const int64_t n[] = {1001};
    static const vf_op iun[] = {VF_OP_NEG, VF_OP_ABS, VF_OP_RELU};
    for (int k = 0; k < 3; k++) {
        ew_in i[1] = {{VF_I32, 1, n, NULL}};
        check_ew(*state, iun[k], 1, i, 1, n); /* includes INT32_MIN: -x wraps */
        if (iun[k] != VF_OP_NEG) {
            ew_in u[1] = {{VF_U32, 1, n, NULL}};
            check_ew(*state, iun[k], 1, u, 1, n);
        }
    }
}

static void test_in_place(void **state)
{
    fx *f = *state;
    static const int64_t n[] = {1000};
    float *x = gen(VF_F32, 1000, false);
    vf_exec e = {.op = VF_OP_MUL, .n_in = 2};
    e.in[0] = e.in[1] = e.out = mk(f, VF_F32, 1, n, x);
    run(f, &e);
    e.op = VF_OP_EXP; /* generic path in place */
    e.n_in = 1;
    run(f, &e);
    float *y = dl(f, &e.out);
    for (int i = 0; i < 1000; i++)
        expect_close("in place", i, y[i], (float)exp((float)((double)x[i] * x[i])), TOL_F32_MATH, 0);
    free(x);
    free(y);
    free_bufs(f);
}


/* ---- cast and copy -------------------------------------------------------- */

static void *run_cast(fx *f, vf_dtype from, vf_dtype to, int64_t n, const void *src)
{
    vf_exec e = {.op = VF_OP_CAST, .n_in = 1, .attrs.dtype = to};
    e.in[0] = mk(f, from, 1, &n, src);
    e.out = mk(f, to, 1, &n, NULL);
    run(f, &e);
    return dl(f, &e.out);
}

static void cast_case(fx *f, vf_dtype from, vf_dtype to, int64_t n, const void *src, const void *want)
{
    void *got = run_cast(f, from, to, n, src);
    if (memcmp(got, want, (size_t)n * vf_dtype_size(to)) != 0) {
        for (int64_t i = 0; i < n; i++)
            fprintf(stderr, "  cast %s->%s [%lld]: got %.9g want %.9g\n", vf_dtype_name(from),
                    vf_dtype_name(to), (long long)i, getf(got, to, i), getf(want, to, i));
        fail_msg("cast %s -> %s", vf_dtype_name(from), vf_dtype_name(to));
    }
    free(got);
}

static void test_cast(void **state)
{
    fx *f = *state;
    static const float fi[] = {2.7f, -2.7f, 3e9f, -3e9f, NAN, INFINITY, -INFINITY, 0.5f, -0.0f, 2147483520.0f};
    static const int32_t fi_want[] = {2, -2, INT32_MAX, INT32_MIN, 0, INT32_MAX, INT32_MIN, 0, 0, 2147483520};
    cast_case(f, VF_F32, VF_I32, 10, fi, fi_want);
    static const float fu[] = {2.7f, -1.0f, 5e9f, NAN, INFINITY, -INFINITY, 4294967040.0f};
    static const uint32_t fu_want[] = {2, 0, UINT32_MAX, 0, UINT32_MAX, 0, 4294967040u};
    cast_case(f, VF_F32, VF_U32, 7, fu, fu_want);
    /* i32 <-> u32 reinterpret the bits, no saturation */
    static const int32_t iu[] = {-1, INT32_MIN, 5, 0};
    static const uint32_t iu_want[] = {UINT32_MAX, 0x80000000u, 5, 0};
    cast_case(f, VF_I32, VF_U32, 4, iu, iu_want);
    static const uint32_t ui[] = {UINT32_MAX, 0x80000000u, 7};
    static const int32_t ui_want[] = {-1, INT32_MIN, 7};
    cast_case(f, VF_U32, VF_I32, 3, ui, ui_want);
    /* to bool: x != 0 (NaN is != 0) */
    static const float fb[] = {NAN, 0.0f, -0.0f, 0.1f, -INFINITY};
    static const uint8_t fb_want[] = {1, 0, 0, 1, 1};
    cast_case(f, VF_F32, VF_BOOL, 5, fb, fb_want);
    static const int32_t ib[] = {0, -5, 1};
    static const uint8_t ib_want[] = {0, 1, 1};
    cast_case(f, VF_I32, VF_BOOL, 3, ib, ib_want);
    cast_case(f, VF_U32, VF_BOOL, 3, ib, ib_want);
    static const uint16_t hb[] = {0x0000, 0x8000, 0x0001};
    static const uint8_t hb_want[] = {0, 0, 1};
    cast_case(f, VF_F16, VF_BOOL, 3, hb, hb_want);
    /* from bool: 0 / 1 */
    static const uint8_t b01[] = {0, 1};
    static const float bf_want[] = {0.0f, 1.0f};
    static const int32_t bi_want[] = {0, 1};
    static const uint16_t bh_want[] = {0x0000, 0x3C00};
    cast_case(f, VF_BOOL, VF_F32, 2, b01, bf_want);
    cast_case(f, VF_BOOL, VF_I32, 2, b01, bi_want);
    cast_case(f, VF_BOOL, VF_U32, 2, b01, bi_want);
    cast_case(f, VF_BOOL, VF_F16, 2, b01, bh_want);
    /* int -> float rounds to nearest even once */
    static const int32_t i2f[] = {16777217, -16777217, INT32_MAX};
    static const float i2f_want[] = {16777216.0f, -16777216.0f, 2147483648.0f};
    cast_case(f, VF_I32, VF_F32, 3, i2f, i2f_want);
    static const uint32_t u2f[] = {UINT32_MAX};
    static const float u2f_want[] = {4294967296.0f};
    cast_case(f, VF_U32, VF_F32, 1, u2f, u2f_want);
    static const int32_t i2h[] = {2049, 65520, -3};
    static const uint16_t i2h_want[] = {0x6800, 0x7C00, 0xC200};
    cast_case(f, VF_I32, VF_F16, 3, i2h, i2h_want);
    static const uint16_t h2i[] = {0x3E00, 0xFC00, 0x7E00, 0xBE00};
    static const int32_t h2i_want[] = {1, INT32_MIN, 0, -1};
    cast_case(f, VF_F16, VF_I32, 4, h2i, h2i_want);
    /* same-dtype cast keeps the bits, NaN payload included */
    static const uint32_t nanbits[] = {0x7FC00001u, 0xFFC00123u};
    cast_case(f, VF_F32, VF_F32, 2, nanbits, nanbits);
    free_bufs(f);
}

static void test_copy_broadcast(void **state)
{
    fx *f = *state;
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    static const int64_t shapes[][2] = {{1, 3}, {2, 1}, {2, 3}};
    static const int64_t os[] = {2, 3};
    for (int t = 0; t < 5; t++)
        for (int s = 0; s < 3; s++) {
            int rank = s == 0 ? 1 : 2;
            const int64_t *sh = s == 0 ? &shapes[0][1] : shapes[s];
            int64_t n = numel(rank, sh);
            void *src = gen(dts[t], n, false);
            vf_exec e = {.op = VF_OP_COPY, .n_in = 1};
            e.in[0] = mk(f, dts[t], rank, sh, src);
            e.out = mk(f, dts[t], 2, os, NULL);
            run(f, &e);
            unsigned char *got = dl(f, &e.out);
            size_t es = vf_dtype_size(dts[t]);
            for (int64_t i = 0; i < 6; i++)
                assert_memory_equal(got + i * es, (unsigned char *)src + bidx(i, 2, os, rank, sh) * es, es);
            free(got);
            free(src);
        }
    free_bufs(f);
}

/* ---- reductions --------------------------------------------------------- */

static void check_reduce(fx *f, vf_op op, vf_dtype dt, int rank, const int64_t *shape, uint32_t mask,
                         bool keepdims, const void *data)
{
    int64_t n = numel(rank, shape);
    void *x = gen(dt, n, false);
    if (data) memcpy(x, data, (size_t)n * vf_dtype_size(dt));
    int64_t os[VF_MAX_RANK];
    int orank = 0;
    double count = 1;
    for (int d = 0; d < rank; d++) {
        bool r = (mask >> d) & 1;
        if (r) count *= (double)shape[d];
        if (!r) os[orank++] = shape[d];
        else if (keepdims) os[orank++] = 1;
    }
    int64_t on = numel(orank, os);
    double *acc = calloc((size_t)on, sizeof *acc), *mag = calloc((size_t)on, sizeof *mag);
    int64_t *iacc = calloc((size_t)on, sizeof *iacc);
    bool *seen = calloc((size_t)on, sizeof *seen);
    assert_true(acc && mag && iacc && seen);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, o = 0, mul = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t c = rem % shape[d];
            rem /= shape[d];
            if (!((mask >> d) & 1)) {
                o += c * mul;
                mul *= shape[d];
            }
        }
        double v = getf(x, dt, i);
        iacc[o] += geti(x, dt, i);
        switch (op) {
        case VF_OP_REDUCE_SUM: case VF_OP_REDUCE_MEAN: acc[o] += v; mag[o] += fabs(v); break;
        case VF_OP_NORM: acc[o] += v * v; mag[o] += v * v; break;
        case VF_OP_REDUCE_MAX:
            if (!seen[o] || isnan(v) || (!isnan(acc[o]) && v > acc[o])) acc[o] = v;
            break;
        case VF_OP_REDUCE_MIN:
            if (!seen[o] || isnan(v) || (!isnan(acc[o]) && v < acc[o])) acc[o] = v;
            break;
        default: fail_msg("not a reduction");
        }
        if (isnan(acc[o])) acc[o] = NAN; /* sticky */
        seen[o] = true;
    }
    vf_exec e = {.op = op, .n_in = 1, .attrs = {.axes_mask = mask, .keepdims = keepdims}};
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, dt, orank, os, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    double tol = dt == VF_F16 ? TOL_REDUCE_F16 : TOL_REDUCE_F32;
    for (int64_t o = 0; o < on; o++) {
        if (!vf_dtype_is_float(dt) && op == VF_OP_REDUCE_SUM) {
            int64_t want = dt == VF_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)iacc[o]
                                          : (int64_t)(uint32_t)(uint64_t)iacc[o];
            assert_int_equal(geti(got, dt, o), want);
            continue;
        }
        double want = acc[o], atol = 0;
        if (op == VF_OP_REDUCE_MEAN) want /= count, mag[o] /= count;
        if (op == VF_OP_NORM) want = sqrt(want), mag[o] = sqrt(mag[o]);
        if (op != VF_OP_REDUCE_MAX && op != VF_OP_REDUCE_MIN) atol = tol * mag[o];
        else if (vf_dtype_is_float(dt)) want = round_to(dt, want);
        expect_close("reduce", o, getf(got, dt, o), want, 0, atol + 1e-30);
    }
    free(got);
    free(x);
    free(acc);
    free(mag);
    free(iacc);
    free(seen);
    free_bufs(f);
}

static void test_reduce(void **state)
{
    static const int64_t s4[] = {3, 4, 5, 6};
    static const uint32_t masks[] = {0xA, 0x5, 0x1, 0x8, 0xF, 0x6, 0x0};
    static const vf_op fops[] = {VF_OP_REDUCE_SUM, VF_OP_REDUCE_MEAN, VF_OP_REDUCE_MAX,
                                 VF_OP_REDUCE_MIN, VF_OP_NORM};
    for (int m = 0; m < COUNT(masks); m++)
        for (int k = 0; k < 2; k++) {
            for (int o = 0; o < COUNT(fops); o++) check_reduce(*state, fops[o], VF_F32, 4, s4, masks[m], k, NULL);
            check_reduce(*state, VF_OP_REDUCE_SUM, VF_F16, 4, s4, masks[m], k, NULL);
            check_reduce(*state, VF_OP_REDUCE_MAX, VF_F16, 4, s4, masks[m], k, NULL);
            for (vf_dtype t = VF_I32; t <= VF_U32; t++) {
                check_reduce(*state, VF_OP_REDUCE_SUM, t, 4, s4, masks[m], k, NULL);
                check_reduce(*state, VF_OP_REDUCE_MAX, t, 4, s4, masks[m], k, NULL);
                check_reduce(*state, VF_OP_REDUCE_MIN, t, 4, s4, masks[m], k, NULL);
            }
        }
    /* only size-1 axes reduced; long runs; long lanes (more than a chunk) */
    static const int64_t s1[] = {1, 7, 1}, big[] = {1000003}, lanes[] = {7, 1000}, mid[] = {5, 300, 3};
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_F32, 3, s1, 0x5, true, NULL);
    check_reduce(*state, VF_OP_REDUCE_MEAN, VF_F32, 3, s1, 0x7, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_F32, 1, big, 0x1, false, NULL);
    check_reduce(*state, VF_OP_NORM, VF_F32, 1, big, 0x1, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_F32, 2, lanes, 0x1, true, NULL);
    check_reduce(*state, VF_OP_REDUCE_MAX, VF_F32, 2, lanes, 0x1, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_MEAN, VF_F32, 3, mid, 0x2, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_MIN, VF_F32, 3, mid, 0x5, true, NULL);
    /* NaN propagates through max/min/sum; the other outputs stay finite */
    static const int64_t s23[] = {2, 3};
    static const float xn[] = {1, NAN, 3, 4, 5, 6};
    for (int o = 0; o < COUNT(fops); o++) {
        check_reduce(*state, fops[o], VF_F32, 2, s23, 0x2, false, xn);
        check_reduce(*state, fops[o], VF_F32, 2, s23, 0x1, true, xn);
    }
    /* integer sums wrap to 32 bits */
    static const int64_t two[] = {2};
    static const int32_t iw[] = {INT32_MAX, 1};
    static const uint32_t uw[] = {UINT32_MAX, 2};
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_I32, 1, two, 1, false, iw);
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_U32, 1, two, 1, false, uw);
    fx *f = *state;
    vf_exec e = {.op = VF_OP_REDUCE_SUM, .n_in = 1, .attrs.axes_mask = 1};
    e.in[0] = mk(f, VF_I32, 1, two, iw);
    e.out = mk(f, VF_I32, 0, NULL, NULL);
    run(f, &e);
    int32_t *r = dl(f, &e.out);
    assert_int_equal(*r, INT32_MIN);
    free(r);
    free_bufs(f);
}

/* ---- argmax ----------------------------------------------------------------- */

static void check_argmax(fx *f, vf_dtype dt, int rank, const int64_t *shape, int axis, const void *data,
                         const int32_t *want_fixed)
{
    int64_t n = numel(rank, shape);
    void *x = gen(dt, n, false);
    if (data) memcpy(x, data, (size_t)n * vf_dtype_size(dt));
    int64_t outer = 1, len = shape[axis], inner = 1, os[VF_MAX_RANK];
    int orank = 0;
    for (int d = 0; d < rank; d++) {
        if (d < axis) outer *= shape[d];
        if (d > axis) inner *= shape[d];
        if (d != axis) os[orank++] = shape[d];
    }
    vf_exec e = {.op = VF_OP_ARGMAX, .n_in = 1, .attrs.axis = axis};
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, VF_I32, orank, os, NULL);
    run(f, &e);
    int32_t *got = dl(f, &e.out);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < inner; l++) {
            /* the first NaN if there is one, else the first maximum */
            int32_t want = -1;
            for (int64_t j = 0; j < len && want < 0; j++)
                if (isnan(getf(x, dt, (o * len + j) * inner + l))) want = (int32_t)j;
            if (want < 0) {
                want = 0;
                for (int64_t j = 1; j < len; j++)
                    if (getf(x, dt, (o * len + j) * inner + l) > getf(x, dt, (o * len + want) * inner + l))
                        want = (int32_t)j;
            }
            if (want_fixed) assert_int_equal(want, want_fixed[o * inner + l]);
            assert_int_equal(got[o * inner + l], want);
        }
    free(got);
    free(x);
    free_bufs(f);
}

static void test_argmax(void **state)
{
    static const int64_t row[] = {6}, col[] = {6, 1};
    static const float ties[] = {1, 3, 3, 2, -INFINITY, 3};
    static const int32_t ties_want[] = {1};
    check_argmax(*state, VF_F32, 1, row, 0, ties, ties_want);
    static const float nans[] = {1, NAN, 5, NAN, 7, 0};
    static const int32_t nans_want[] = {1};
    check_argmax(*state, VF_F32, 1, row, 0, nans, nans_want);
    check_argmax(*state, VF_F32, 2, col, 0, nans, nans_want);
    static const int32_t iv[] = {-5, 9, 9, INT32_MIN, 9, 2};
    check_argmax(*state, VF_I32, 1, row, 0, iv, ties_want);
    static const uint32_t uv[] = {5, 0x80000000u, UINT32_MAX, 1, UINT32_MAX, 0};
    static const int32_t uv_want[] = {2};
    check_argmax(*state, VF_U32, 1, row, 0, uv, uv_want);
    static const int64_t s3[] = {2, 5, 3}, s2[] = {4, 300}, big[] = {1000003};
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32};
    for (int t = 0; t < 4; t++)
        for (int a = 0; a < 3; a++) check_argmax(*state, dts[t], 3, s3, a, NULL, NULL);
    check_argmax(*state, VF_F32, 2, s2, 0, NULL, NULL);
    check_argmax(*state, VF_F32, 2, s2, 1, NULL, NULL);
    check_argmax(*state, VF_F32, 1, big, 0, NULL, NULL);
}

/* ---- softmax and cross entropy ---------------------------------------------- */

static void check_softmax(fx *f, vf_op op, vf_dtype dt, int rank, const int64_t *shape, int axis,
                          const float *data)
{
    int64_t n = numel(rank, shape);
    void *x = gen(dt, n, false);
    if (data)
        for (int64_t i = 0; i < n; i++) {
            if (dt == VF_F32) ((float *)x)[i] = data[i];
            else ((uint16_t *)x)[i] = vf_f32_to_f16(data[i]);
        }
    vf_exec e = {.op = op, .n_in = 1, .attrs.axis = axis};
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, dt, rank, shape, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    int64_t outer = 1, len = shape[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= shape[d];
    for (int d = axis + 1; d < rank; d++) inner *= shape[d];
    double tol = dt == VF_F16 ? TOL_F16 : TOL_SOFTMAX;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < inner; l++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < len; j++) m = fmax(m, getf(x, dt, (o * len + j) * inner + l));
            for (int64_t j = 0; j < len; j++) s += exp(getf(x, dt, (o * len + j) * inner + l) - m);
            for (int64_t j = 0; j < len; j++) {
                int64_t i = (o * len + j) * inner + l;
                double v = getf(x, dt, i) - m;
                double want = op == VF_OP_SOFTMAX ? exp(v) / s : v - log(s);
                double g = getf(got, dt, i);
                assert_false(isnan(g));
                expect_close("softmax", i, g, want, tol, TOL_SOFTMAX_ABS);
            }
        }
    free(got);
    free(x);
    free_bufs(f);
}

static void test_softmax(void **state)
{
    static const int64_t s2[] = {3, 4}, s3[] = {2, 3, 4}, wide[] = {2, 70000};
    static const float huge[] = {1e30f, 1e30f, -1e30f, 0, 1, 2, 3, 4, -1e30f, 1e30f, 5, -5};
    for (int op = VF_OP_SOFTMAX; op <= VF_OP_LOG_SOFTMAX; op++) {
        check_softmax(*state, op, VF_F32, 2, s2, 0, huge);
        check_softmax(*state, op, VF_F32, 2, s2, 1, huge);
        for (int a = 0; a < 3; a++) check_softmax(*state, op, VF_F32, 3, s3, a, NULL);
        check_softmax(*state, op, VF_F16, 3, s3, 2, NULL);
        check_softmax(*state, op, VF_F16, 3, s3, 0, NULL);
        check_softmax(*state, op, VF_F32, 2, wide, 1, NULL); /* a row longer than a block */
        check_softmax(*state, op, VF_F32, 2, wide, 0, NULL);
    }
    /* the huge row, written out: [0.5, 0.5, 0, 0] */
    fx *f = *state;
    vf_exec e = {.op = VF_OP_SOFTMAX, .n_in = 1, .attrs.axis = 1};
    e.in[0] = mk(f, VF_F32, 2, s2, huge);
    e.out = mk(f, VF_F32, 2, s2, NULL);
    run(f, &e);
    float *y = dl(f, &e.out);
    assert_true(y[0] == 0.5f && y[1] == 0.5f && y[2] == 0.0f && y[3] == 0.0f);
    free(y);
    free_bufs(f);
}

static void test_sparse_xent(void **state)
{
    fx *f = *state;
    static const int64_t ls[] = {5}, gs[] = {5, 4};
    static const float logits[] = {1, 2, 3, 4, 1e30f, 0, -1e30f, 1e30f, 0, 0, 0, 0,
                                   1, 2, 3, 4, 1, 2, 3, 4};
    static const int32_t li[] = {3, 1, 2, 4, -1};
    static const uint32_t lu[] = {0, 0, 3, UINT32_MAX, 4};
    for (int k = 0; k < 2; k++) {
        for (vf_dtype dt = VF_F32; dt <= VF_F16; dt++) {
            void *lg = gen(dt, 20, false);
            for (int i = 0; i < 20; i++) {
                if (dt == VF_F32) ((float *)lg)[i] = logits[i];
                else ((uint16_t *)lg)[i] = vf_f32_to_f16(i < 8 ? logits[i] / 1e26f : logits[i]);
            }
            vf_exec e = {.op = VF_OP_SPARSE_XENT, .n_in = 2};
            e.in[0] = mk(f, k ? VF_U32 : VF_I32, 1, ls, k ? (const void *)lu : (const void *)li);
            e.in[1] = mk(f, dt, 2, gs, lg);
            e.out = mk(f, dt, 1, ls, NULL);
            run(f, &e);
            void *got = dl(f, &e.out);
            for (int r = 0; r < 5; r++) {
                int64_t lab = k ? (int64_t)lu[r] : li[r];
                double want = NAN;
                if (lab >= 0 && lab < 4) {
                    double m = -INFINITY, s = 0;
                    for (int j = 0; j < 4; j++) m = fmax(m, getf(lg, dt, r * 4 + j));
                    for (int j = 0; j < 4; j++) s += exp(getf(lg, dt, r * 4 + j) - m);
                    want = log(s) - (getf(lg, dt, r * 4 + lab) - m); /* m cancels exactly */
                }
                double g = getf(got, dt, r);
                if (isnan(want)) assert_true(isnan(g));
                else expect_close("xent", r, g, want, dt == VF_F16 ? TOL_F16 : TOL_SOFTMAX, TOL_SOFTMAX_ABS);
            }
            free(got);
            free(lg);
            free_bufs(f);
        }
    }
}

/* ---- matmul ------------------------------------------------------------------ */

/* a batch dims ab (rank rab), b batch dims bb (rank rbb), out batch ob. */
static void check_matmul(fx *f, vf_dtype dt, int rab, const int64_t *ab, int rbb, const int64_t *bb,
                         int rob, const int64_t *ob, int64_t m, int64_t k, int64_t n, bool ta, bool tb)
{
    int64_t as[VF_MAX_RANK], bs[VF_MAX_RANK], os[VF_MAX_RANK];
    for (int d = 0; d < rab; d++) as[d] = ab[d];
    for (int d = 0; d < rbb; d++) bs[d] = bb[d];
    for (int d = 0; d < rob; d++) os[d] = ob[d];
    as[rab] = ta ? k : m, as[rab + 1] = ta ? m : k;
    bs[rbb] = tb ? n : k, bs[rbb + 1] = tb ? k : n;
    os[rob] = m, os[rob + 1] = n;
    int64_t na = numel(rab + 2, as), nb = numel(rbb + 2, bs), batches = numel(rob, ob);
    void *a = gen(dt, na, false), *b = gen(dt, nb, false);
    vf_exec e = {.op = VF_OP_MATMUL, .n_in = 2, .attrs = {.trans_a = ta, .trans_b = tb}};
    e.in[0] = mk(f, dt, rab + 2, as, a);
    e.in[1] = mk(f, dt, rbb + 2, bs, b);
    e.out = mk(f, dt, rob + 2, os, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    for (int64_t q = 0; q < batches; q++) {
        int64_t ia = bidx(q, rob, ob, rab, ab) * m * k, ib = bidx(q, rob, ob, rbb, bb) * k * n;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = getf(a, dt, ia + (ta ? p * m + i : i * k + p));
                    double y = getf(b, dt, ib + (tb ? j * k + p : p * n + j));
                    s += x * y;
                    mag += fabs(x * y);
                }
                double tol = dt == VF_F16 ? TOL_MATMUL_F16 : TOL_MATMUL_F32;
                expect_close("matmul", (q * m + i) * n + j, getf(got, dt, (q * m + i) * n + j), s, 0,
                             tol * mag + 1e-30);
            }
    }
    free(got);
    free(a);
    free(b);
    free_bufs(f);
}

static void test_matmul(void **state)
{
    static const int64_t ab[] = {2, 1}, bb[] = {3}, ob[] = {2, 3}, b4[] = {4};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        check_matmul(*state, VF_F32, 2, ab, 1, bb, 2, ob, 5, 7, 3, ta, tb);
        check_matmul(*state, VF_F16, 2, ab, 1, bb, 2, ob, 5, 7, 3, ta, tb);
        check_matmul(*state, VF_F32, 1, b4, 0, NULL, 1, b4, 5, 7, 3, ta, tb); /* b shared */
        check_matmul(*state, VF_F32, 0, NULL, 1, b4, 1, b4, 5, 7, 3, ta, tb); /* a shared */
        check_matmul(*state, VF_F32, 0, NULL, 0, NULL, 0, NULL, 1, 1, 1, ta, tb);
        check_matmul(*state, VF_F32, 0, NULL, 0, NULL, 0, NULL, 33, 65, 17, ta, tb);
    }
}

/* ---- transpose ------------------------------------------------------------ */

static void check_transpose(fx *f, vf_dtype dt, int rank, const int64_t *shape, const int *perm)
{
    int64_t n = numel(rank, shape), os[VF_MAX_RANK], st[VF_MAX_RANK];
    void *x = gen(dt, n, false);
    vf_exec e = {.op = VF_OP_TRANSPOSE, .n_in = 1};
    for (int d = 0; d < rank; d++) os[d] = shape[perm[d]], e.attrs.perm[d] = perm[d];
    st[rank - 1] = 1;
    for (int d = rank - 2; d >= 0; d--) st[d] = st[d + 1] * shape[d + 1];
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, dt, rank, os, NULL);
    run(f, &e);
    unsigned char *got = dl(f, &e.out);
    size_t es = vf_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, src = 0;
        for (int d = rank - 1; d >= 0; d--) {
            src += (rem % os[d]) * st[perm[d]];
            rem /= os[d];
        }
        if (memcmp(got + i * es, (unsigned char *)x + src * es, es) != 0)
            fail_msg("transpose %s: element %lld from %lld differs", vf_dtype_name(dt), (long long)i,
                     (long long)src);
    }
    free(got);
    free(x);
    free_bufs(f);
}

static void test_transpose(void **state)
{
    static const int64_t s4[] = {2, 3, 4, 5}, s2[] = {33, 17}, s8[] = {2, 3, 1, 2, 3, 2, 1, 2};
    static const int p4[] = {2, 0, 3, 1}, p2[] = {1, 0}, p8[] = {7, 6, 5, 4, 3, 2, 1, 0};
    static const int pid[] = {0, 1, 2, 3};
    static const vf_dtype dts[] = {VF_BOOL, VF_F16, VF_F32, VF_I32, VF_U32};
    for (int t = 0; t < 5; t++) {
        check_transpose(*state, dts[t], 4, s4, p4);
        check_transpose(*state, dts[t], 4, s4, pid);
        check_transpose(*state, dts[t], 2, s2, p2);
        check_transpose(*state, dts[t], 8, s8, p8);
    }
}

/* ---- sources ----------------------------------------------------------------- */

static void test_fill(void **state)
{
    fx *f = *state;
    static const int64_t n[] = {7};
    struct { vf_dtype dt; double v; uint32_t want; } cases[] = {
        {VF_F32, 2.5, 0x40200000u}, {VF_I32, -3.7, (uint32_t)-3}, {VF_U32, -1.0, 0},
        {VF_U32, 1e12, UINT32_MAX}, {VF_I32, NAN, 0}, {VF_BOOL, 0.5, 1}, {VF_BOOL, 0.0, 0},
        {VF_F16, 1.0 / 3.0, 0x3555}, {VF_F16, 1e6, 0x7C00},
    };
    for (int c = 0; c < COUNT(cases); c++) {
        vf_exec e = {.op = VF_OP_FILL, .attrs.value = cases[c].v};
        e.out = mk(f, cases[c].dt, 1, n, NULL);
        run(f, &e);
        void *got = dl(f, &e.out);
        for (int i = 0; i < 7; i++) {
            uint32_t g = cases[c].dt == VF_F16 ? ((uint16_t *)got)[i]
                         : cases[c].dt == VF_BOOL ? ((uint8_t *)got)[i] : ((uint32_t *)got)[i];
            if (g != cases[c].want) fail_msg("fill case %d: got 0x%x want 0x%x", c, g, cases[c].want);
        }
        free(got);
    }
    free_bufs(f);
}

static float *random_normal(fx *f, vf_dtype dt, int64_t n, uint64_t seed)
{
    vf_exec e = {.op = VF_OP_RANDOM_NORMAL, .attrs.seed = seed};
    e.out = mk(f, dt, 1, &n, NULL);
    run(f, &e);
    return dl(f, &e.out);
}

static void test_random_normal(void **state)
{
    fx *f = *state;
    int64_t n = 100000;
    float *x = random_normal(f, VF_F32, n, 42);
    /* pinned by an independent Philox-4x32-10 (checked against the Random123
       known answers) + Box-Muller in double: seed 42, pairs 0 and 2 */
    expect_close("philox e0", 0, x[0], -0.970189708191932, 0, TOL_RANDOM_PIN_ABS);
    expect_close("philox e1", 1, x[1], 0.19401902682207053, 0, TOL_RANDOM_PIN_ABS);
    expect_close("philox e4", 4, x[4], -0.3369619546018606, 0, TOL_RANDOM_PIN_ABS);
    expect_close("philox e5", 5, x[5], -0.518748500979729, 0, TOL_RANDOM_PIN_ABS);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += x[i], s2 += (double)x[i] * x[i];
    double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
    assert_true(fabs(mean) < TOL_RANDOM_MOMENT);
    assert_true(fabs(sd - 1) < TOL_RANDOM_MOMENT);
    /* odd numel: element 4 is element 0 of pair 2, same stream */
    float *odd = random_normal(f, VF_F32, 5, 42);
    assert_memory_equal(odd, x, 5 * sizeof *x);
    free(odd);
    /* another seed differs; f16 is the f32 stream rounded */
    float *other = random_normal(f, VF_F32, 8, 43);
    assert_true(memcmp(other, x, 8 * sizeof *x) != 0);
    free(other);
    uint16_t *h = (uint16_t *)random_normal(f, VF_F16, 1001, 42);
    for (int i = 0; i < 1001; i++) assert_int_equal(h[i], vf_f32_to_f16(x[i]));
    free(h);
    free(x);
    free_bufs(f);
}

/* ---- f16 ------------------------------------------------------------------------- */

static void test_f16_roundtrip(void **state)
{
    fx *f = *state;
    /* f16 -> f32, every class: zeros, subnormals, normals, max, Inf, NaN */
    static const uint16_t hb[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xC000,
                                  0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8001};
    static const float hf[] = {0.0f, -0.0f, 0x1p-24f, 1023 * 0x1p-24f, 0x1p-14f, 1.0f, -2.0f,
                               65504.0f, INFINITY, -INFINITY, NAN, -0x1p-24f};
    float *g = run_cast(f, VF_F16, VF_F32, 12, hb);
    for (int i = 0; i < 12; i++) {
        if (isnan(hf[i])) assert_true(isnan(g[i]));
        else assert_true(g[i] == hf[i] && signbit(g[i]) == signbit(hf[i]));
    }
    /* and back: bit-identical (NaN stays a NaN) */
    uint16_t *back = run_cast(f, VF_F32, VF_F16, 12, g);
    for (int i = 0; i < 12; i++) {
        if (i == 10) assert_true((back[i] & 0x7C00) == 0x7C00 && (back[i] & 0x3FF));
        else assert_int_equal(back[i], hb[i]);
    }
    free(g);
    free(back);
    /* f32 -> f16 rounding: to nearest even, overflow to Inf, underflow to 0 */
    static const float fr[] = {65519.0f, 65520.0f, 0x1p-25f, 3 * 0x1p-25f, 1 + 0x1p-11f,
                               1 + 3 * 0x1p-11f, 1e-10f, -1e10f};
    static const uint16_t fr_want[] = {0x7BFF, 0x7C00, 0x0000, 0x0002, 0x3C00, 0x3C02, 0x0000, 0xFC00};
    cast_case(f, VF_F32, VF_F16, 8, fr, fr_want);
    free_bufs(f);
}

/* ---- large buffers, errors, stats ---------------------------------------------- */

static void test_large_add(void **state)
{
    fx *f = *state;
    int64_t n = 16 * 1024 * 1024 + 1001; /* just over 64 MiB per operand */
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000);
    vf_exec e = {.op = VF_OP_ADD, .n_in = 2};
    e.in[0] = mk(f, VF_F32, 1, &n, x);
    e.in[1] = mk(f, VF_F32, 1, &n, x);
    e.out = mk(f, VF_F32, 1, &n, NULL);
    run(f, &e);
    float *y = dl(f, &e.out);
    for (int64_t i = 0; i < n; i++)
        if (y[i] != 2.0f * (float)(i % 1000)) fail_msg("large add: element %lld", (long long)i);
    free(x);
    free(y);
    free_bufs(f);
}

static void test_errors_and_stats(void **state)
{
    fx *f = *state;
    vf_context_stats st = {0};
    vf_buffer *b;
    assert_int_equal(f->be.iface->alloc(f->be.self, 1000, &b), VF_OK);
    f->be.iface->stats(f->be.self, &st);
    assert_int_equal(st.device_bytes_in_use, 1000);
    /* an op whose output lies past the end of its buffer */
    static const int64_t n[] = {300};
    vf_exec e = {.op = VF_OP_FILL};
    e.out = (vf_tref){.buf = b, .offset = 4, .dtype = VF_F32, .rank = 1, .shape = {300}};
    (void)n;
    assert_int_equal(f->be.iface->exec(f->be.self, &e), VF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(f->err.status, VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(f->err.message, "fill"));
    vf_err_clear(&f->err);
    char tmp[16];
    assert_int_equal(f->be.iface->download(f->be.self, b, 995, tmp, 16), VF_ERROR_INVALID_ARGUMENT);
    vf_err_clear(&f->err);
    /* allocation failure is a status and a message, never an abort */
    vf_buffer *huge = NULL;
    assert_int_equal(f->be.iface->alloc(f->be.self, SIZE_MAX / 4, &huge), VF_ERROR_OUT_OF_MEMORY);
    assert_null(huge);
    assert_non_null(strstr(f->err.message, "bytes"));
    vf_err_clear(&f->err);
    f->be.iface->free(f->be.self, b);
    f->be.iface->stats(f->be.self, &st);
    assert_int_equal(st.device_bytes_in_use, 0);
    assert_int_equal(f->be.iface->sync(f->be.self), VF_OK);
    assert_string_equal(f->be.iface->name, "cpu");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_binary_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scalar_broadcast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broadcast_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_integer_wrap_and_div, setup, teardown),
        cmocka_unit_test_setup_teardown(test_comparisons, setup, teardown),
        cmocka_unit_test_setup_teardown(test_where, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_broadcast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_argmax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sparse_xent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_matmul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transpose, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_normal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_f16_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_add, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_and_stats, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
