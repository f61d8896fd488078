/* The op table (see op.h). Each row's reference functions and GLSL strings
 * must agree: tests run every op on both backends and compare. */
#include "graph/op.h"
#include "util/dtype.h"

#include <math.h>
#include <string.h>

/* ---- reference scalar functions -------------------------------------- */

#define F2(name, expr) \
    static double name(double a, double b, double c) { (void)b; (void)c; return (expr); }
#define I2(name, expr) \
    static int64_t name(int64_t a, int64_t b, int64_t c, bool u) { (void)b; (void)c; (void)u; return (expr); }

/* Integer arithmetic through uint64 so that wrap-around is defined. */
static int64_t wrap(uint64_t v) { return (int64_t)(uint32_t)v; }
static int64_t as_i(int64_t v, bool u) { return u ? (int64_t)(uint32_t)v : (int64_t)(int32_t)v; }

F2(f_add, a + b)
F2(f_sub, a - b)
F2(f_mul, a * b)
F2(f_div, a / b)
static double f_pow(double a, double b, double c) { (void)c; return pow(a, b); }
static double f_max(double a, double b, double c) { (void)c; return isnan(a) || isnan(b) ? NAN : (a > b ? a : b); }
static double f_min(double a, double b, double c) { (void)c; return isnan(a) || isnan(b) ? NAN : (a < b ? a : b); }
F2(f_gt, a > b)
F2(f_ge, a >= b)
F2(f_lt, a < b)
F2(f_le, a <= b)
F2(f_eq, a == b)
F2(f_ne, a != b)
static double f_where(double a, double b, double c) { return a != 0.0 ? b : c; }
F2(f_neg, -a)
F2(f_exp, exp(a))
F2(f_log, log(a))
F2(f_sqrt, sqrt(a))
F2(f_rsqrt, 1.0 / sqrt(a))
F2(f_abs, fabs(a))
F2(f_tanh, tanh(a))
F2(f_sigmoid, 1.0 / (1.0 + exp(-a)))
F2(f_relu, a < 0.0 ? 0.0 : a)
F2(f_gelu, 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))))
F2(f_sin, sin(a))
F2(f_cos, cos(a))
F2(f_copy, a)
F2(f_square, a * a)
/* ---- issue 13's math ops ---- */
F2(f_sign, a > 0.0 ? 1.0 : a < 0.0 ? -1.0 : a) /* NaN and +-0 pass through */
F2(f_floor, floor(a))
F2(f_ceil, ceil(a))
/* half to even, independent of the host's rounding mode (rint's) */
static double f_round(double a, double b, double c)
{
    (void)b, (void)c;
    double r = floor(a), d = a - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    return r == 0.0 ? copysign(0.0, a) : r;
}
/* floor mod: the sign of b, a zero result included; x mod 0 is NaN */
static double f_mod(double a, double b, double c)
{
    (void)c;
    double r = fmod(a, b);
    if (isnan(r)) return r;
    if (r == 0.0) return copysign(0.0, b);
    return (r < 0.0) != (b < 0.0) ? r + b : r;
}
F2(f_erf, erf(a))
F2(f_log1p, log1p(a))
F2(f_expm1, expm1(a))
F2(f_softplus, (a > 0.0 ? a : 0.0) + log1p(exp(-fabs(a)))) /* NaN: log1p(NaN) */
static double f_leaky_relu(double a, double b, double c) { (void)c; return a > 0.0 ? a : a * b; }
static double f_clip(double a, double b, double c) { return a < b ? b : a > c ? c : a; } /* NaN passes */

I2(i_add, wrap((uint64_t)a + (uint64_t)b))
I2(i_sub, wrap((uint64_t)a - (uint64_t)b))
I2(i_mul, wrap((uint64_t)a * (uint64_t)b))
/* x / 0 is 0; INT_MIN / -1 wraps to INT_MIN (C would trap). */
static int64_t i_div(int64_t a, int64_t b, int64_t c, bool u)
{
    (void)c;
    if (b == 0) return 0;
    if (!u && b == -1) return wrap(0u - (uint64_t)a);
    return as_i(a / b, u);
}
I2(i_max, a > b ? a : b)
I2(i_min, a < b ? a : b)
I2(i_gt, a > b)
I2(i_ge, a >= b)
I2(i_lt, a < b)
I2(i_le, a <= b)
I2(i_eq, a == b)
I2(i_ne, a != b)
static int64_t i_where(int64_t a, int64_t b, int64_t c, bool u) { (void)u; return a ? b : c; }
I2(i_neg, wrap(0u - (uint64_t)a))
I2(i_abs, a < 0 ? wrap(0u - (uint64_t)a) : a)
I2(i_relu, a < 0 ? 0 : a)
I2(i_copy, a)
I2(i_square, wrap((uint64_t)a * (uint64_t)a))
I2(i_sign, a > 0 ? 1 : a < 0 ? -1 : 0)
/* floor mod: the sign of b; x mod 0 is 0 (as NumPy); in int64, so
   INT_MIN mod -1 is 0 instead of C's trap */
static int64_t i_mod(int64_t a, int64_t b, int64_t c, bool u)
{
    (void)c, (void)u;
    if (b == 0) return 0;
    int64_t r = a % b;
    return r != 0 && (r < 0) != (b < 0) ? r + b : r;
}
I2(i_logical_and, a != 0 && b != 0)
I2(i_logical_or, a != 0 || b != 0)
I2(i_logical_not, a == 0)
static int64_t i_clip(int64_t a, int64_t b, int64_t c, bool u) { (void)u; return a < b ? b : a > c ? c : a; }

/* ---- op numbers ------------------------------------------------------ */

/* Saved files store op numbers (docs/FORMAT.md): the enum is append only,
   and each number is pinned here so that an edit that moves one fails to
   compile instead of making old files run the wrong op. */
#define PIN(op, n) _Static_assert(VF_OP_##op == n, "VF_OP_" #op " is op " #n " in saved files");
PIN(ADD, 0) PIN(SUB, 1) PIN(MUL, 2) PIN(DIV, 3) PIN(POW, 4) PIN(MAXIMUM, 5)
PIN(MINIMUM, 6) PIN(GREATER, 7) PIN(GREATER_EQUAL, 8) PIN(LESS, 9)
PIN(LESS_EQUAL, 10) PIN(EQUAL, 11) PIN(NOT_EQUAL, 12) PIN(WHERE, 13) PIN(NEG, 14)
PIN(EXP, 15) PIN(LOG, 16) PIN(SQRT, 17) PIN(RSQRT, 18) PIN(ABS, 19) PIN(TANH, 20)
PIN(SIGMOID, 21) PIN(RELU, 22) PIN(GELU, 23) PIN(SIN, 24) PIN(COS, 25)
PIN(CAST, 26) PIN(COPY, 27) PIN(REDUCE_SUM, 28) PIN(REDUCE_MEAN, 29)
PIN(REDUCE_MAX, 30) PIN(REDUCE_MIN, 31) PIN(NORM, 32) PIN(ARGMAX, 33)
PIN(SOFTMAX, 34) PIN(LOG_SOFTMAX, 35) PIN(SPARSE_XENT, 36) PIN(MATMUL, 37)
PIN(TRANSPOSE, 38) PIN(FILL, 39) PIN(RANDOM_NORMAL, 40) PIN(SQUARE, 41)
PIN(SIGN, 42) PIN(FLOOR, 43) PIN(CEIL, 44) PIN(ROUND, 45) PIN(MOD, 46) PIN(LOGICAL_AND, 47)
PIN(LOGICAL_OR, 48) PIN(LOGICAL_NOT, 49) PIN(ERF, 50) PIN(LOG1P, 51) PIN(EXPM1, 52) PIN(SOFTPLUS, 53)
PIN(LEAKY_RELU, 54) PIN(CLIP, 55) PIN(STOP_GRADIENT, 56) PIN(REDUCE_PROD, 57) PIN(REDUCE_ANY, 58)
PIN(REDUCE_ALL, 59) PIN(LOGSUMEXP, 60)
PIN(SLICE, 61) PIN(PAD, 62) PIN(CONCAT, 63) PIN(SLICE_GRAD, 64)
/* indexing (issue 13) */
PIN(GATHER, 65) PIN(SCATTER_ADD, 66) PIN(IOTA, 67) PIN(CUMSUM, 68)
PIN(TOP_K, 69) PIN(TOP_K_INDICES, 70)
/* convolution and pooling (issue 13) */
PIN(CONV2D, 71) PIN(CONV2D_BACKPROP_INPUT, 72) PIN(CONV2D_BACKPROP_FILTER, 73)
PIN(MAX_POOL2D, 74) PIN(AVG_POOL2D, 75) PIN(MAX_POOL2D_GRAD, 76) PIN(AVG_POOL2D_GRAD, 77)
/* generator draws (issue 13) */
PIN(RNG_UNIFORM, 78) PIN(RNG_NORMAL, 79) PIN(RNG_ADVANCE, 80)
PIN(USER_KERNEL, 81)
PIN(USER_ELEMENTWISE, 82)
_Static_assert(sizeof(vf_conv_attrs) == VF_CONV_ATTR_FIELDS * sizeof(int32_t), "vf_conv_attrs is saved field by field");
#undef PIN

/* ---- the table ------------------------------------------------------- */

#define NUM VF_MASK_NUM
#define BOOL VF_M(VF_BOOL)
#define FLT VF_MASK_FLOAT
#define ALL VF_MASK_ALL
#define SIGNED (VF_MASK_FLOAT | VF_M(VF_I32))

#define BIN(op, nm, msk, res, cf, ci, gf, gi, gu) \
    [op] = {.name = nm, .arity = 2, .kind = VF_KIND_ELEMENTWISE, .accepts = msk, .result = res, \
            .cpu_f = cf, .cpu_i = ci, .glsl_f = gf, .glsl_i = gi, .glsl_u = gu}
#define UN(op, nm, msk, cf, ci, gf, gi, gu) \
    [op] = {.name = nm, .arity = 1, .kind = VF_KIND_ELEMENTWISE, .accepts = msk, .result = VF_RESULT_SAME, \
            .cpu_f = cf, .cpu_i = ci, .glsl_f = gf, .glsl_i = gi, .glsl_u = gu}
#define CMP(op, nm, cf, ci, g) \
    [op] = {.name = nm, .arity = 2, .kind = VF_KIND_ELEMENTWISE, .accepts = ALL, .result = VF_RESULT_BOOL, \
            .cpu_f = cf, .cpu_i = ci, .glsl_f = g, .glsl_i = g, .glsl_u = g}
#define RED(op, nm, msk, comb, sq, mean, sqr, emp, rc) \
    [op] = {.name = nm, .arity = 1, .kind = VF_KIND_REDUCTION, .accepts = msk, .result = VF_RESULT_SAME, \
            .combine = comb, .square_first = sq, .divide_by_count = mean, .sqrt_after = sqr, \
            .empty = emp, .row = rc, .attrs = VF_ATTR_AXES}
/* RC: centers a row group over the last axis (plan/partition.c); NRC: does not */
#define RC VF_ROW_CENTER_REDUCE
#define NRC VF_ROW_CENTER_NONE

const vf_op_info vf_op_table[VF_OP_COUNT] = {
    BIN(VF_OP_ADD, "add", NUM, VF_RESULT_SAME, f_add, i_add, "a + b", "a + b", NULL),
    BIN(VF_OP_SUB, "sub", NUM, VF_RESULT_SAME, f_sub, i_sub, "a - b", "a - b", NULL),
    BIN(VF_OP_MUL, "mul", NUM, VF_RESULT_SAME, f_mul, i_mul, "a * b", "a * b", NULL),
    BIN(VF_OP_DIV, "div", NUM, VF_RESULT_SAME, f_div, i_div, "a / b",
        "(b == 0 ? 0 : (b == -1 ? -a : a / b))", "(b == 0u ? 0u : a / b)"),
    BIN(VF_OP_POW, "pow", FLT, VF_RESULT_SAME, f_pow, NULL, "vf_pow(a, b)", NULL, NULL),
    BIN(VF_OP_MAXIMUM, "maximum", NUM, VF_RESULT_SAME, f_max, i_max, "vf_max(a, b)", "max(a, b)", NULL),
    BIN(VF_OP_MINIMUM, "minimum", NUM, VF_RESULT_SAME, f_min, i_min, "vf_min(a, b)", "min(a, b)", NULL),

    CMP(VF_OP_GREATER, "greater", f_gt, i_gt, "a > b"),
    CMP(VF_OP_GREATER_EQUAL, "greater_equal", f_ge, i_ge, "a >= b"),
    CMP(VF_OP_LESS, "less", f_lt, i_lt, "a < b"),
    CMP(VF_OP_LESS_EQUAL, "less_equal", f_le, i_le, "a <= b"),
    CMP(VF_OP_EQUAL, "equal", f_eq, i_eq, "a == b"),
    CMP(VF_OP_NOT_EQUAL, "not_equal", f_ne, i_ne, "a != b"),

    [VF_OP_WHERE] = {.name = "where", .arity = 3, .kind = VF_KIND_ELEMENTWISE, .accepts = ALL,
                     .result = VF_RESULT_SAME, .cond_in = 1u << 0, .cpu_f = f_where, .cpu_i = i_where,
                     .glsl_f = "(a ? b : c)", .glsl_i = "(a ? b : c)"},

    UN(VF_OP_NEG, "neg", SIGNED, f_neg, i_neg, "-a", "-a", NULL),
    UN(VF_OP_EXP, "exp", FLT, f_exp, NULL, "exp(a)", NULL, NULL),
    UN(VF_OP_LOG, "log", FLT, f_log, NULL, "vf_log(a)", NULL, NULL),
    UN(VF_OP_SQRT, "sqrt", FLT, f_sqrt, NULL, "vf_sqrt(a)", NULL, NULL),
    UN(VF_OP_RSQRT, "rsqrt", FLT, f_rsqrt, NULL, "vf_rsqrt(a)", NULL, NULL),
    UN(VF_OP_ABS, "abs", NUM, f_abs, i_abs, "abs(a)", "abs(a)", "a"),
    UN(VF_OP_TANH, "tanh", FLT, f_tanh, NULL, "vf_tanh(a)", NULL, NULL),
    UN(VF_OP_SIGMOID, "sigmoid", FLT, f_sigmoid, NULL, "(1.0 / (1.0 + exp(-a)))", NULL, NULL),
    UN(VF_OP_RELU, "relu", NUM, f_relu, i_relu, "(a < 0.0 ? 0.0 : a)", "(a < 0 ? 0 : a)", "a"),
    UN(VF_OP_GELU, "gelu", FLT, f_gelu, NULL,
       "(0.5 * a * (1.0 + vf_tanh(0.7978845608028654 * (a + 0.044715 * a * a * a))))", NULL, NULL),
    UN(VF_OP_SIN, "sin", FLT, f_sin, NULL, "vf_sin(a)", NULL, NULL),
    UN(VF_OP_COS, "cos", FLT, f_cos, NULL, "vf_cos(a)", NULL, NULL),
    UN(VF_OP_SQUARE, "square", NUM, f_square, i_square, "(a * a)", "(a * a)", NULL),
    /* ---- issue 13's math ops (rows kept together) ---- */
    /* floor, ceil, round, sign: piecewise constant, a zero gradient (rule `zero`) */
    UN(VF_OP_SIGN, "sign", NUM, f_sign, i_sign, "(a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : a))",
       "(a > 0 ? 1 : (a < 0 ? -1 : 0))", "(a > 0u ? 1u : 0u)"),
    UN(VF_OP_FLOOR, "floor", FLT, f_floor, NULL, "vf_floor(a)", NULL, NULL),
    UN(VF_OP_CEIL, "ceil", FLT, f_ceil, NULL, "vf_ceil(a)", NULL, NULL),
    UN(VF_OP_ROUND, "round", FLT, f_round, NULL, "vf_round(a)", NULL, NULL),
    BIN(VF_OP_MOD, "mod", NUM, VF_RESULT_SAME, f_mod, i_mod, "vf_mod(a, b)", "vf_imod(a, b)",
        "(b == 0u ? 0u : a % b)"),
    [VF_OP_LOGICAL_AND] = {.name = "logical_and", .arity = 2, .kind = VF_KIND_ELEMENTWISE, .accepts = BOOL,
                           .result = VF_RESULT_BOOL, .cpu_i = i_logical_and, .glsl_i = "(a != 0u && b != 0u)"},
    [VF_OP_LOGICAL_OR] = {.name = "logical_or", .arity = 2, .kind = VF_KIND_ELEMENTWISE, .accepts = BOOL,
                          .result = VF_RESULT_BOOL, .cpu_i = i_logical_or, .glsl_i = "(a != 0u || b != 0u)"},
    [VF_OP_LOGICAL_NOT] = {.name = "logical_not", .arity = 1, .kind = VF_KIND_ELEMENTWISE, .accepts = BOOL,
                           .result = VF_RESULT_BOOL, .cpu_i = i_logical_not, .glsl_i = "(a == 0u)"},
    UN(VF_OP_ERF, "erf", FLT, f_erf, NULL, "vf_erf(a)", NULL, NULL),
    UN(VF_OP_LOG1P, "log1p", FLT, f_log1p, NULL, "vf_log1p(a)", NULL, NULL),
    UN(VF_OP_EXPM1, "expm1", FLT, f_expm1, NULL, "vf_expm1(a)", NULL, NULL),
    UN(VF_OP_SOFTPLUS, "softplus", FLT, f_softplus, NULL, "vf_softplus(a)", NULL, NULL),
    BIN(VF_OP_LEAKY_RELU, "leaky_relu", FLT, VF_RESULT_SAME, f_leaky_relu, NULL, "(a > 0.0 ? a : a * b)", NULL,
        NULL),
    /* NaN fails both comparisons and passes through */
    [VF_OP_CLIP] = {.name = "clip", .arity = 3, .kind = VF_KIND_ELEMENTWISE, .accepts = NUM,
                    .result = VF_RESULT_SAME, .cpu_f = f_clip, .cpu_i = i_clip,
                    .glsl_f = "(a < b ? b : (a > c ? c : a))", .glsl_i = "(a < b ? b : (a > c ? c : a))"},
    UN(VF_OP_STOP_GRADIENT, "stop_gradient", ALL, f_copy, i_copy, "a", "a", NULL),
    /* cast and copy: the conversion is done by the store (see codegen) */
    [VF_OP_CAST] = {.name = "cast", .arity = 1, .kind = VF_KIND_ELEMENTWISE, .accepts = ALL,
                    .result = VF_RESULT_ATTR, .attrs = VF_ATTR_DTYPE, .cpu_f = f_copy, .cpu_i = i_copy,
                    .glsl_f = "a", .glsl_i = "a"},
    [VF_OP_COPY] = {.name = "copy", .arity = 1, .kind = VF_KIND_ELEMENTWISE, .accepts = ALL,
                    .result = VF_RESULT_SAME, .cpu_f = f_copy, .cpu_i = i_copy,
                    .glsl_f = "a", .glsl_i = "a"},

    /* the empty sum is 0, its mean 0/0; max and min of nothing are undefined */
    RED(VF_OP_REDUCE_SUM, "reduce_sum", NUM, VF_COMBINE_SUM, false, false, false, VF_EMPTY_ZERO, RC),
    RED(VF_OP_REDUCE_MEAN, "reduce_mean", FLT, VF_COMBINE_SUM, false, true, false, VF_EMPTY_NAN, RC),
    RED(VF_OP_REDUCE_MAX, "reduce_max", NUM, VF_COMBINE_MAX, false, false, false, VF_EMPTY_UNDEFINED, RC),
    RED(VF_OP_REDUCE_MIN, "reduce_min", NUM, VF_COMBINE_MIN, false, false, false, VF_EMPTY_UNDEFINED, RC),
    RED(VF_OP_NORM, "norm", FLT, VF_COMBINE_SUM, true, false, true, VF_EMPTY_ZERO, NRC),
    /* ---- issue 13's reductions (rows kept together): the empty product
       is 1, any of nothing false, all of nothing true, logsumexp -inf ---- */
    RED(VF_OP_REDUCE_PROD, "reduce_prod", NUM, VF_COMBINE_PROD, false, false, false, VF_EMPTY_ONE, RC),
    [VF_OP_REDUCE_ANY] = {.name = "reduce_any", .arity = 1, .kind = VF_KIND_REDUCTION, .accepts = BOOL,
                          .result = VF_RESULT_SAME, .combine = VF_COMBINE_MAX, .empty = VF_EMPTY_ZERO,
                          .attrs = VF_ATTR_AXES},
    [VF_OP_REDUCE_ALL] = {.name = "reduce_all", .arity = 1, .kind = VF_KIND_REDUCTION, .accepts = BOOL,
                          .result = VF_RESULT_SAME, .combine = VF_COMBINE_MIN, .empty = VF_EMPTY_ONE,
                          .attrs = VF_ATTR_AXES},
    RED(VF_OP_LOGSUMEXP, "logsumexp", FLT, VF_COMBINE_LSE, false, false, false, VF_EMPTY_NEG_INF, RC),
    [VF_OP_ARGMAX] = {.name = "argmax", .arity = 1, .kind = VF_KIND_REDUCTION, .accepts = NUM,
                      .result = VF_RESULT_I32, .combine = VF_COMBINE_MAX, .attrs = VF_ATTR_AXIS},

    [VF_OP_SOFTMAX] = {.name = "softmax", .arity = 1, .kind = VF_KIND_ROW, .accepts = FLT,
                       .result = VF_RESULT_SAME, .row = VF_ROW_CENTER_AXIS, .attrs = VF_ATTR_AXIS},
    [VF_OP_LOG_SOFTMAX] = {.name = "log_softmax", .arity = 1, .kind = VF_KIND_ROW, .accepts = FLT,
                           .result = VF_RESULT_SAME, .row = VF_ROW_CENTER_AXIS, .attrs = VF_ATTR_AXIS},
    /* no class can match a label: NaN */
    [VF_OP_SPARSE_XENT] = {.name = "sparse_softmax_cross_entropy", .arity = 2, .kind = VF_KIND_ROW,
                           .accepts = FLT, .result = VF_RESULT_SAME, .index_in = 1u << 0,
                           .empty = VF_EMPTY_NAN, .row = VF_ROW_CENTER_LABELS, .attrs = VF_ATTR_AXIS},
    /* k = 0: sums of nothing */
    [VF_OP_MATMUL] = {.name = "matmul", .arity = 2, .kind = VF_KIND_MATMUL, .accepts = FLT,
                      .result = VF_RESULT_SAME, .empty = VF_EMPTY_ZERO, .epilogue = VF_EPILOGUE_MATMUL,
                      .attrs = VF_ATTR_TRANS},
    [VF_OP_TRANSPOSE] = {.name = "transpose", .arity = 1, .kind = VF_KIND_MOVEMENT, .accepts = ALL,
                         .result = VF_RESULT_SAME, .flags = VF_OPF_PERMUTE, .attrs = VF_ATTR_PERM},
    /* window ops: one kernel each (backend.h vf_window), elements moved as bits */
    [VF_OP_SLICE] = {.name = "slice", .arity = 1, .kind = VF_KIND_MOVEMENT, .accepts = ALL,
                     .result = VF_RESULT_SAME, .flags = VF_OPF_WINDOW_READ | VF_OPF_VIEW,
                     .attrs = VF_ATTR_WINDOW},
    [VF_OP_PAD] = {.name = "pad", .arity = 1, .kind = VF_KIND_MOVEMENT, .accepts = ALL,
                   .result = VF_RESULT_SAME, .empty_in = VF_EMPTY_IN_FILL_VALUE, .flags = VF_OPF_WINDOW_READ,
                   .attrs = VF_ATTR_WINDOW | VF_ATTR_VALUE},
    [VF_OP_CONCAT] = {.name = "concat", .arity = 2, .kind = VF_KIND_MOVEMENT, .accepts = ALL,
                      .result = VF_RESULT_SAME, .empty_in = VF_EMPTY_IN_COPY_OTHER,
                      .flags = VF_OPF_WINDOW_READ | VF_OPF_VIEW, .attrs = VF_ATTR_AXIS},
    [VF_OP_SLICE_GRAD] = {.name = "slice_grad", .arity = 2, .kind = VF_KIND_MOVEMENT, .accepts = ALL,
                          .result = VF_RESULT_SAME, .empty_in = VF_EMPTY_IN_FILL_ZERO, .flags = VF_OPF_WINDOW_READ,
                          .attrs = VF_ATTR_WINDOW},
    [VF_OP_FILL] = {.name = "fill", .arity = 0, .kind = VF_KIND_SOURCE, .accepts = ALL,
                    .result = VF_RESULT_ATTR, .flags = VF_OPF_LITERAL, .attrs = VF_ATTR_VALUE},
    [VF_OP_RANDOM_NORMAL] = {.name = "random_normal", .arity = 0, .kind = VF_KIND_SOURCE,
                             .accepts = FLT, .result = VF_RESULT_ATTR, .attrs = VF_ATTR_SEED},

    /* ---- indexing (issue 13) ---- */
    /* x[..., indices[j], ...] along attrs.axis; x of any dtype, moved as bits */
    [VF_OP_GATHER] = {.name = "gather", .arity = 2, .kind = VF_KIND_INDEX, .accepts = ALL,
                      .result = VF_RESULT_SAME, .index_in = 1u << 1, .empty_in = VF_EMPTY_IN_NO_INDEX,
                      .flags = VF_OPF_NO_FOLD, .attrs = VF_ATTR_AXIS},
    /* x with updates added at indices along attrs.axis (duplicates accumulate) */
    [VF_OP_SCATTER_ADD] = {.name = "scatter_add", .arity = 3, .kind = VF_KIND_INDEX, .accepts = NUM,
                           .result = VF_RESULT_SAME, .index_in = 1u << 1, .empty_in = VF_EMPTY_IN_COPY_FIRST,
                           .flags = VF_OPF_NO_FOLD, .attrs = VF_ATTR_AXIS},
    /* 0, 1, 2, ...: the values of vf_range (times delta plus start) and
       what vf_one_hot compares indices with */
    [VF_OP_IOTA] = {.name = "iota", .arity = 0, .kind = VF_KIND_SOURCE, .accepts = NUM,
                    .result = VF_RESULT_ATTR},
    /* running sums along attrs.axis; trans_a = exclusive, trans_b = reverse */
    [VF_OP_CUMSUM] = {.name = "cumsum", .arity = 1, .kind = VF_KIND_INDEX, .accepts = NUM,
                      .result = VF_RESULT_SAME, .attrs = VF_ATTR_AXIS | VF_ATTR_TRANS},
    /* descending along the last axis, ties by lower index, NaN above everything;
       k = attrs.value (an integer, exact in a double) */
    [VF_OP_TOP_K] = {.name = "top_k", .arity = 1, .kind = VF_KIND_INDEX, .accepts = NUM,
                     .result = VF_RESULT_SAME, .attrs = VF_ATTR_VALUE},
    [VF_OP_TOP_K_INDICES] = {.name = "top_k_indices", .arity = 1, .kind = VF_KIND_INDEX, .accepts = NUM,
                             .result = VF_RESULT_I32, .attrs = VF_ATTR_VALUE},
    /* ---- convolution and pooling (issue 13) ---- */
    /* f32 only: the CPU kernel is OpenBLAS sgemm; C/groups = 0 sums nothing */
    [VF_OP_CONV2D] = {.name = "conv2d", .arity = 2, .kind = VF_KIND_CONV, .accepts = VF_M(VF_F32),
                      .result = VF_RESULT_SAME, .empty = VF_EMPTY_ZERO, .epilogue = VF_EPILOGUE_CONV,
                      .attrs = VF_ATTR_CONV},
    [VF_OP_CONV2D_BACKPROP_INPUT] = {.name = "conv2d_backprop_input", .arity = 2, .kind = VF_KIND_CONV,
                                     .accepts = VF_M(VF_F32), .result = VF_RESULT_SAME, .empty = VF_EMPTY_ZERO,
                                     .attrs = VF_ATTR_CONV},
    [VF_OP_CONV2D_BACKPROP_FILTER] = {.name = "conv2d_backprop_filter", .arity = 2, .kind = VF_KIND_CONV,
                                      .accepts = VF_M(VF_F32), .result = VF_RESULT_SAME, .empty = VF_EMPTY_ZERO,
                                      .attrs = VF_ATTR_CONV},
#define POOL(op, nm, ar) \
    [op] = {.name = nm, .arity = ar, .kind = VF_KIND_CONV, .accepts = VF_M(VF_F32), .result = VF_RESULT_SAME, \
            .attrs = VF_ATTR_CONV}
    POOL(VF_OP_MAX_POOL2D, "max_pool2d", 1),
    POOL(VF_OP_AVG_POOL2D, "avg_pool2d", 1),
    /* max_pool2d_grad is not differentiable further (its dy-gradient would
       be one more op, a gather at the argmax) */
    POOL(VF_OP_MAX_POOL2D_GRAD, "max_pool2d_grad", 2),
    POOL(VF_OP_AVG_POOL2D_GRAD, "avg_pool2d_grad", 2),
#undef POOL

    /* ---- generator draws (issue 13) ---- */
    /* in[0]: the state (u32 [2]: the draw number's low and high words),
       in[1]: the shape only (any dtype, never read). No gradient: the
       numbers are constants of the draw. */
#define RNG(op, nm) \
    [op] = {.name = nm, .arity = 2, .kind = VF_KIND_INDEX, .accepts = ALL, .result = VF_RESULT_ATTR, \
            .index_in = 1u, .attrs = VF_ATTR_DTYPE | VF_ATTR_SEED}
    RNG(VF_OP_RNG_UNIFORM, "rng_uniform"),
    RNG(VF_OP_RNG_NORMAL, "rng_normal"),
#undef RNG
    /* the state plus one draw */
    [VF_OP_RNG_ADVANCE] = {.name = "rng_advance", .arity = 1, .kind = VF_KIND_INDEX, .accepts = VF_M(VF_U32),
                           .result = VF_RESULT_SAME},
    /* a user kernel's call in a plan (graph/ukernel.h; the graph holds a
       KERNEL node): its inputs are e->in[0 .. n_in), its output e->out,
       the rest in e->ux; never fused, no gradient of the table's */
    [VF_OP_USER_KERNEL] = {.name = "user_kernel", .arity = 0, .kind = VF_KIND_USER, .accepts = VF_MASK_ALL,
                           .result = VF_RESULT_ATTR},
    /* a user elementwise op (graph/uelem.h): arity 3 is the most it takes;
       its own count, dtypes, expression and C function are attrs.uelem's */
    [VF_OP_USER_ELEMENTWISE] = {.name = "user_elementwise", .arity = 3, .kind = VF_KIND_ELEMENTWISE,
                                .accepts = FLT, .result = VF_RESULT_SAME, .attrs = VF_ATTR_UELEM},
};

/* ---- attributes ------------------------------------------------------ */

vf_attrs vf_attrs_read(vf_op op, const vf_attrs *a)
{
    uint32_t m = vf_op_table[op].attrs;
    vf_attrs r = {0};
    if (m & VF_ATTR_AXES) r.axes_mask = a->axes_mask, r.keepdims = a->keepdims;
    if (m & VF_ATTR_AXIS) r.axis = a->axis;
    if (m & VF_ATTR_PERM) memcpy(r.perm, a->perm, sizeof r.perm);
    if (m & VF_ATTR_TRANS) r.trans_a = a->trans_a, r.trans_b = a->trans_b;
    if (m & VF_ATTR_DTYPE) r.dtype = a->dtype;
    if (m & VF_ATTR_VALUE) r.value = a->value;
    if (m & VF_ATTR_SEED) r.seed = a->seed;
    if (m & VF_ATTR_WINDOW) {
        memcpy(r.lo, a->lo, sizeof r.lo);
        memcpy(r.hi, a->hi, sizeof r.hi);
        memcpy(r.step, a->step, sizeof r.step);
    }
    if (m & VF_ATTR_CONV) r.conv = a->conv;
    if (m & VF_ATTR_UELEM) r.uelem = a->uelem;
    return r;
}

bool vf_attrs_equal(vf_op op, const vf_attrs *a, const vf_attrs *b)
{
    vf_attrs x = vf_attrs_read(op, a), y = vf_attrs_read(op, b);
    /* field by field: padding is not compared, and value bit by bit (NaN == NaN, 0 != -0) */
    return x.axes_mask == y.axes_mask && x.keepdims == y.keepdims && x.axis == y.axis &&
           memcmp(x.perm, y.perm, sizeof x.perm) == 0 && x.trans_a == y.trans_a && x.trans_b == y.trans_b &&
           x.dtype == y.dtype && memcmp(&x.value, &y.value, sizeof x.value) == 0 && x.seed == y.seed &&
           memcmp(x.lo, y.lo, sizeof x.lo) == 0 && memcmp(x.hi, y.hi, sizeof x.hi) == 0 &&
           memcmp(x.step, y.step, sizeof x.step) == 0 &&
           memcmp(&x.conv, &y.conv, sizeof x.conv) == 0 && /* int32 fields only: no padding */
           x.uelem == y.uelem;
}

/* ---- window arithmetic ------------------------------------------------- */

/* Python's slice.indices, without overflow for any int64 begin / end. */
int64_t vf_slice_dim(int64_t n, int64_t begin, int64_t end, int64_t step, int64_t *start)
{
    if (step > 0) {
        int64_t b = begin < 0 ? (begin < -n ? 0 : begin + n) : (begin > n ? n : begin);
        int64_t e = end < 0 ? (end < -n ? 0 : end + n) : (end > n ? n : end);
        *start = b;
        return e > b ? (e - b - 1) / step + 1 : 0;
    }
    if (step == 0) {
        *start = 0;
        return 0;
    }
    /* downwards: -1 stands for "before index 0"; INT64_MAX as end is the
       omitted stop (through index 0), as NumPy's x[::-1] */
    int64_t b = begin < 0 ? (begin < -n ? -1 : begin + n) : (begin > n - 1 ? n - 1 : begin);
    int64_t e = end == INT64_MAX ? -1 : end < 0 ? (end < -n ? -1 : end + n) : (end > n - 1 ? n - 1 : end);
    *start = b;
    return b > e ? (b - e - 1) / (-step) + 1 : 0;
}

/* Which end a bound counts from: false the start, true the end. The
   sentinels clamp in the step's direction: INT64_MAX as an upward bound,
   or as a downward begin, is the end; as a downward end, before index 0. */
static bool from_end(int64_t v, int64_t step, bool is_end)
{
    if (v == INT64_MAX) return !(step < 0 && is_end);
    return v < 0 && v != INT64_MIN;
}

bool vf_slice_fixed(int64_t n, int64_t begin, int64_t end, int64_t step)
{
    if (step == 0 || from_end(begin, step, false) != from_end(end, step, true)) return false;
    /* with both bounds on one side the size never shrinks as n grows, so
       equal at n and at a size beyond any real bound means equal between */
    int64_t s0, s1, big = (int64_t)1 << 62;
    return n >= 0 && n < big && vf_slice_dim(n, begin, end, step, &s0) == vf_slice_dim(big, begin, end, step, &s1);
}

int64_t vf_pad_dim(int64_t n, int64_t lo, int64_t hi, int64_t step)
{
    return lo + hi + (n > 0 ? n + (n - 1) * (step - 1) : 0);
}
