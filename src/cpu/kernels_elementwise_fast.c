/* Plain f32 rows for the elementwise ops whose float result is exactly the
 * reference's (the op table's double function, rounded to float):
 *   - add, sub, mul, div, square, sqrt: IEEE operations are correctly
 *     rounded, and double carries more than 2*24+2 bits, so rounding the
 *     double result to float gives the float operation's result;
 *   - neg, abs, relu, sign, floor, ceil, maximum, minimum, the comparisons
 *     and where only select or move values, with the reference's NaN and
 *     signed-zero rules written out below.
 * The loops have no calls and unit or zero strides, so the compiler
 * vectorises them (release builds). exp, tanh, sigmoid, gelu, log,
 * softplus and rsqrt run fast_math.c's vector rows (float polynomials, the steps whose
 * rounding would show in double: within an ulp of the reference, see
 * fast_math.c for each bound). Other
 * f32 ops of one or two inputs (pow, sin, ...) call the reference
 * function per element straight
 * from float rows (row_ref1/row_ref2): the generic path's arithmetic
 * without its buffers. Other dtypes, three inputs and strided operands
 * take the generic converting path.
 */
#include "cpu/cpu.h"
#include "cpu/fast_math.h"

#include <math.h>

/* Binary f32 rows: o[i] = EXPR(x = a[i], y = b[i]) with a or b broadcast
   (stride 0) as st says. */
#define BIN_ROW(name, T, EXPR)                                                                   \
    static void name(void *o_, const void *a_, const void *b_, const void *c_, const int64_t *st, \
                     int64_t n, vf_scalar_f f)                                                   \
    {                                                                                            \
        T *o = o_;                                                                               \
        const float *a = a_, *b = b_;                                                            \
        (void)c_, (void)f;                                                                       \
        if (st[1] && st[2]) {                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                    \
                const float x = a[i], y = b[i];                                                  \
                o[i] = (EXPR);                                                                   \
            }                                                                                    \
        } else if (st[2]) {                                                                      \
            const float x = a[0];                                                                \
            for (int64_t i = 0; i < n; i++) {                                                    \
                const float y = b[i];                                                            \
                o[i] = (EXPR);                                                                   \
            }                                                                                    \
        } else if (st[1]) {                                                                      \
            const float y = b[0];                                                                \
            for (int64_t i = 0; i < n; i++) {                                                    \
                const float x = a[i];                                                            \
                o[i] = (EXPR);                                                                   \
            }                                                                                    \
        } else {                                                                                 \
            const float x = a[0], y = b[0];                                                      \
            const T r = (EXPR);                                                                  \
            for (int64_t i = 0; i < n; i++) o[i] = r;                                            \
        }                                                                                        \
    }

/* Unary f32 rows: o[i] = EXPR(x = a[i]). */
#define UN_ROW(name, EXPR)                                                                       \
    static void name(void *o_, const void *a_, const void *b_, const void *c_, const int64_t *st, \
                     int64_t n, vf_scalar_f f)                                                   \
    {                                                                                            \
        float *o = o_;                                                                           \
        const float *a = a_;                                                                     \
        (void)b_, (void)c_, (void)f;                                                             \
        if (st[1]) {                                                                             \
            for (int64_t i = 0; i < n; i++) {                                                    \
                const float x = a[i];                                                            \
                o[i] = (EXPR);                                                                   \
            }                                                                                    \
        } else {                                                                                 \
            const float x = a[0];                                                                \
            const float r = (EXPR);                                                              \
            for (int64_t i = 0; i < n; i++) o[i] = r;                                            \
        }                                                                                        \
    }

/* NaN as the reference makes it: (float)NAN */
#define QNAN ((float)NAN)

BIN_ROW(row_add, float, x + y)
BIN_ROW(row_sub, float, x - y)
BIN_ROW(row_mul, float, x * y)
BIN_ROW(row_div, float, x / y)
BIN_ROW(row_max, float, x != x || y != y ? QNAN : (x > y ? x : y))
BIN_ROW(row_min, float, x != x || y != y ? QNAN : (x < y ? x : y))
BIN_ROW(row_gt, uint8_t, x > y)
BIN_ROW(row_ge, uint8_t, x >= y)
BIN_ROW(row_lt, uint8_t, x < y)
BIN_ROW(row_le, uint8_t, x <= y)
BIN_ROW(row_eq, uint8_t, x == y)
BIN_ROW(row_ne, uint8_t, x != y)

UN_ROW(row_neg, -x)
UN_ROW(row_abs, fabsf(x))
UN_ROW(row_relu, x < 0.0f ? 0.0f : x)
UN_ROW(row_square, x * x)
UN_ROW(row_sqrt, sqrtf(x))
UN_ROW(row_sign, x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x)
UN_ROW(row_floor, floorf(x))
UN_ROW(row_ceil, ceilf(x))

/* where(cond: bool, b, c: f32) */
static void row_where(void *o_, const void *a_, const void *b_, const void *c_, const int64_t *st, int64_t n,
                      vf_scalar_f f)
{
    (void)f;
    float *o = o_;
    const uint8_t *k = a_;
    const float *b = b_, *c = c_;
    if (st[1] == 1 && st[2] == 1 && st[3] == 1) {
        for (int64_t i = 0; i < n; i++) o[i] = k[i] ? b[i] : c[i];
    } else {
        const int64_t sk = st[1], sb = st[2], sc = st[3];
        for (int64_t i = 0; i < n; i++) o[i] = k[i * sk] ? b[i * sb] : c[i * sc];
    }
}

/* exp, tanh, sigmoid, gelu, log, softplus, rsqrt (fast_math.h); a broadcast
   input: its one value computed once and spread. */
#define FM_ROW(name, OP)                                                                          \
    static void name(void *o_, const void *a_, const void *b_, const void *c_, const int64_t *st, \
                     int64_t n, vf_scalar_f f)                                                    \
    {                                                                                             \
        float *o = o_;                                                                            \
        (void)b_, (void)c_, (void)f;                                                              \
        if (st[1]) {                                                                              \
            vf_cpu_fm_row(OP, a_, o, n);                                                          \
            return;                                                                               \
        }                                                                                         \
        float r;                                                                                  \
        vf_cpu_fm_row(OP, a_, &r, 1);                                                             \
        for (int64_t i = 0; i < n; i++) o[i] = r;                                                 \
    }

FM_ROW(row_exp, VF_OP_EXP)
FM_ROW(row_tanh, VF_OP_TANH)
FM_ROW(row_sigmoid, VF_OP_SIGMOID)
FM_ROW(row_gelu, VF_OP_GELU)
FM_ROW(row_rsqrt, VF_OP_RSQRT)
FM_ROW(row_log, VF_OP_LOG)
FM_ROW(row_softplus, VF_OP_SOFTPLUS)

/* Any other f32 op of one or two inputs: the reference function itself
   on each element widened to double, rounded to float, as the generic path
   does, without its chunk buffers and dtype switches: the same bits. The
   second and third arguments are as the generic path passes them. */
static void row_ref1(void *o_, const void *a_, const void *b_, const void *c_, const int64_t *st, int64_t n,
                     vf_scalar_f f)
{
    float *o = o_;
    const float *a = a_;
    (void)b_, (void)c_;
    const int64_t sa = st[1];
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i * sa];
        o[i] = (float)f(x, x, x);
    }
}

static void row_ref2(void *o_, const void *a_, const void *b_, const void *c_, const int64_t *st, int64_t n,
                     vf_scalar_f f)
{
    float *o = o_;
    const float *a = a_, *b = b_;
    (void)c_;
    const int64_t sa = st[1], sb = st[2];
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i * sa];
        o[i] = (float)f(x, b[i * sb], x);
    }
}

vf_cpu_fast_row vf_cpu_fast_row_for(const vf_exec *e, const int64_t *st)
{
    if (st[0] != 1) return NULL;
    for (int j = 1; j <= e->n_in; j++)
        if (st[j] != 0 && st[j] != 1) return NULL;
    vf_dtype o = e->out.dtype, a = e->in[0].dtype;
    if (e->op == VF_OP_WHERE)
        return a == VF_BOOL && o == VF_F32 && e->in[1].dtype == VF_F32 && e->in[2].dtype == VF_F32 ? row_where
                                                                                                  : NULL;
    if (a != VF_F32 || (e->n_in == 2 && e->in[1].dtype != VF_F32)) return NULL;
    if (e->n_in == 2 && o == VF_BOOL) {
        switch (e->op) {
        case VF_OP_GREATER: return row_gt;
        case VF_OP_GREATER_EQUAL: return row_ge;
        case VF_OP_LESS: return row_lt;
        case VF_OP_LESS_EQUAL: return row_le;
        case VF_OP_EQUAL: return row_eq;
        case VF_OP_NOT_EQUAL: return row_ne;
        default: return NULL;
        }
    }
    if (o != VF_F32) return NULL;
    if (e->n_in == 2) {
        switch (e->op) {
        case VF_OP_ADD: return row_add;
        case VF_OP_SUB: return row_sub;
        case VF_OP_MUL: return row_mul;
        case VF_OP_DIV: return row_div;
        case VF_OP_MAXIMUM: return row_max;
        case VF_OP_MINIMUM: return row_min;
        default: return vf_op_get(e->op)->cpu_f ? row_ref2 : NULL;
        }
    }
    if (e->n_in != 1) return NULL;
    switch (e->op) {
    case VF_OP_NEG: return row_neg;
    case VF_OP_ABS: return row_abs;
    case VF_OP_RELU: return row_relu;
    case VF_OP_SQUARE: return row_square;
    case VF_OP_SQRT: return row_sqrt;
    case VF_OP_SIGN: return row_sign;
    case VF_OP_FLOOR: return row_floor;
    case VF_OP_CEIL: return row_ceil;
    case VF_OP_EXP: return row_exp;
    case VF_OP_TANH: return row_tanh;
    case VF_OP_SIGMOID: return row_sigmoid;
    case VF_OP_GELU: return row_gelu;
    case VF_OP_RSQRT: return row_rsqrt;
    case VF_OP_LOG: return row_log;
    case VF_OP_SOFTPLUS: return row_softplus;
    default: return vf_op_get(e->op)->cpu_f ? row_ref1 : NULL;
    }
}
