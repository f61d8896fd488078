/* The CPU backend's elementwise ops (binary with broadcasting, compares,
 * where, unary, in place), cast and copy, through its iface, against
 * double-precision references written here (independently of the op
 * table's scalar functions). */
#include "cpu_test_common.h"

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
    case VF_OP_SQUARE: return a * a;
    /* issue 13's math ops, written differently from the op table's */
    case VF_OP_SIGN: return isnan(a) ? a : a == 0 ? a : copysign(1.0, a);
    case VF_OP_FLOOR: return floorl(a);
    case VF_OP_CEIL: return ceill(a);
    case VF_OP_ROUND: return nearbyint(a); /* the default rounding mode: half to even */
    case VF_OP_MOD: {                      /* remainder() is exact; then onto b's side */
        if (isnan(a) || isnan(b) || isinf(a) || b == 0) return NAN;
        if (isinf(b)) return a == 0 || (a < 0) == (b < 0) ? (a == 0 ? copysign(0.0, b) : a) : b;
        double r = remainder(a, b);
        if (r != 0 && (r < 0) != (b < 0)) r += b;
        return r == 0 ? copysign(0.0, b) : r;
    }
    case VF_OP_ERF: return erf(a);
    case VF_OP_LOG1P: return (double)log1pl(a);
    case VF_OP_EXPM1: return (double)expm1l(a);
    case VF_OP_SOFTPLUS: return a > 30 ? a : (double)logl(1.0L + expl((long double)a));
    case VF_OP_LEAKY_RELU: return a > 0 ? a : a * b;
    case VF_OP_CLIP: return isnan(a) ? a : fmin(fmax(a, b), c);
    case VF_OP_STOP_GRADIENT: return a;
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
    case VF_OP_SQUARE: r = (int64_t)((uint64_t)a * (uint64_t)a); break;
    case VF_OP_SIGN: r = (a > 0) - (a < 0); break;
    case VF_OP_MOD: /* a - b * floor(a / b), exact in long double */
        r = b == 0 ? 0 : a - b * (int64_t)floorl((long double)a / (long double)b);
        break;
    case VF_OP_LOGICAL_AND: r = a && b; break;
    case VF_OP_LOGICAL_OR: r = a || b; break;
    case VF_OP_LOGICAL_NOT: r = !a; break;
    case VF_OP_CLIP: r = a < b ? b : a > c ? c : a; break;
    case VF_OP_STOP_GRADIENT: r = a; break;
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
    case VF_OP_ERF: case VF_OP_LOG1P: case VF_OP_EXPM1: case VF_OP_SOFTPLUS:
        return TOL_F32_MATH;
    default: return TOL_EXACT;
    }
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
    vf_dtype data_t = ins[vf_op_data_input(op)].dt;
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
                                    VF_OP_SIN, VF_OP_COS, VF_OP_SQUARE,
                                    VF_OP_SIGN, VF_OP_FLOOR, VF_OP_CEIL, VF_OP_ROUND, VF_OP_ERF,
                                    VF_OP_LOG1P, VF_OP_EXPM1, VF_OP_SOFTPLUS, VF_OP_STOP_GRADIENT};

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
    static const vf_op iun[] = {VF_OP_NEG, VF_OP_ABS, VF_OP_RELU, VF_OP_SQUARE, VF_OP_SIGN, VF_OP_STOP_GRADIENT};
    for (int k = 0; k < COUNT(iun); k++) {
        ew_in i[1] = {{VF_I32, 1, n, NULL}};
        check_ew(*state, iun[k], 1, i, 1, n); /* includes INT32_MIN: -x wraps */
        if (iun[k] != VF_OP_NEG) {
            ew_in u[1] = {{VF_U32, 1, n, NULL}};
            check_ew(*state, iun[k], 1, u, 1, n);
        }
    }
}

/* Issue 13's ops with more than one input, and the logical ops: mod on
   every numeric dtype (random and chosen operands: halves, signs, zeros,
   Inf, ratios past 2^24), leaky_relu and clip with scalar parameters,
   and / or / not on bools. */
static void test_math_ops(void **state)
{
    static const int64_t n7[] = {7}, n12[] = {12}, big[] = {1001}, o[] = {3, 4, 5}, a3[] = {3, 1, 5}, b2[] = {4, 1};
    static const vf_dtype num[] = {VF_F32, VF_F16, VF_I32, VF_U32};
    for (int t = 0; t < 4; t++) {
        ew_in in[2] = {{num[t], 3, a3, NULL}, {num[t], 2, b2, NULL}};
        check_ew(*state, VF_OP_MOD, 2, in, 3, o);
        ew_in r[2] = {{num[t], 1, big, NULL}, {num[t], 1, big, NULL}};
        check_ew(*state, VF_OP_MOD, 2, r, 1, big); /* i32: INT_MIN, INT_MAX, 0 (x mod 0) */
    }
    static const float ma[] = {5.5f, -5.5f, 5.5f, -5.5f, 4, -4, 1e10f, -1e10f, 0.1f, INFINITY, 3, -0.0f};
    static const float mb[] = {2, 2, -2, -2, 2, 2, 3, 3e-5f, 0, 2, -INFINITY, 5};
    ew_in m[2] = {{VF_F32, 1, n12, ma}, {VF_F32, 1, n12, mb}};
    check_ew(*state, VF_OP_MOD, 2, m, 1, n12);
    static const int32_t ia[] = {7, -7, 7, -7, INT32_MIN, INT32_MIN, 0}, ib[] = {3, 3, -3, -3, -1, 7, -5};
    ew_in mi[2] = {{VF_I32, 1, n7, ia}, {VF_I32, 1, n7, ib}};
    check_ew(*state, VF_OP_MOD, 2, mi, 1, n7);

    static const float alpha = 0.2f, lo = -1.5f, hi = 2.25f;
    for (int t = 0; t < 2; t++) {
        ew_in l[2] = {{num[t], 1, big, NULL}, {num[t], 0, NULL, NULL}};
        if (t == 0) l[1].data = &alpha;
        check_ew(*state, VF_OP_LEAKY_RELU, 2, l, 1, big);
    }
    ew_in c[3] = {{VF_F32, 1, big, NULL}, {VF_F32, 0, NULL, &lo}, {VF_F32, 0, NULL, &hi}};
    check_ew(*state, VF_OP_CLIP, 3, c, 1, big);
    static const int32_t ilo = -3, ihi = 9;
    ew_in ci[3] = {{VF_I32, 1, big, NULL}, {VF_I32, 0, NULL, &ilo}, {VF_I32, 0, NULL, &ihi}};
    check_ew(*state, VF_OP_CLIP, 3, ci, 1, big);
    static const uint32_t ulo = 3, uhi = 30;
    ew_in cu[3] = {{VF_U32, 1, big, NULL}, {VF_U32, 0, NULL, &ulo}, {VF_U32, 0, NULL, &uhi}};
    check_ew(*state, VF_OP_CLIP, 3, cu, 1, big);

    ew_in and2[2] = {{VF_BOOL, 3, a3, NULL}, {VF_BOOL, 2, b2, NULL}};
    check_ew(*state, VF_OP_LOGICAL_AND, 2, and2, 3, o);
    check_ew(*state, VF_OP_LOGICAL_OR, 2, and2, 3, o);
    check_ew(*state, VF_OP_LOGICAL_NOT, 1, and2, 3, a3);
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
        cmocka_unit_test_setup_teardown(test_math_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cast, setup, teardown),
        cmocka_unit_test_setup_teardown(test_copy_broadcast, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
