/* Vectorisable exp and tanh for the CPU backend's float rows (exp, tanh,
 * sigmoid, gelu, rsqrt: fast_math.c) and its softmax.
 *
 * Why double: the op table's references evaluate these ops in double and
 * round once to f32, and the tests hold the CPU backend to that within an
 * ulp. A float evaluation cannot: gelu's 1 + tanh(u) cancels for negative
 * u, and exp(y) of a rounded f32 argument y carries |y| times the
 * argument's relative error (up to 88 ulps near the ends of the f32
 * range). So the arithmetic stays in double, but as branch-free
 * polynomials that the compiler turns into vector code, instead of one
 * libm call per element. The functions below are within a few 1e-16 of
 * libm's (relative), so the f32 results are libm's rounded, but for an
 * element whose double value lies within that distance of a rounding
 * boundary (then they differ by one ulp).
 *
 * Inline: each caller's loop vectorises them for its own target.
 */
#ifndef VF_CPU_FAST_MATH_H
#define VF_CPU_FAST_MATH_H

#include "graph/op.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Bits as unsigned: the exponent arithmetic below wraps (a NaN's
   garbage k included) instead of overflowing a signed type. */
static inline uint64_t vf_fm_bits(double x)
{
    uint64_t i;
    memcpy(&i, &x, sizeof i);
    return i;
}

static inline double vf_fm_double(uint64_t i)
{
    double x;
    memcpy(&x, &i, sizeof x);
    return x;
}

/* e^y. y = k ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to
   r^12 (truncation below 2e-16 relative), times 2^k built in the exponent
   bits as two factors (k reaches -1077 before the result is 0). y is
   clamped to [-746, 710] (outside, e^y is 0 or inf in double); a NaN
   passes through every step. */
static inline double vf_fm_exp(double y)
{
    const double shift = 0x1.8p52; /* adding it rounds to an integer, kept in the low bits */
    y = y > 710.0 ? 710.0 : y;
    y = y < -746.0 ? -746.0 : y;
    double t = y * 1.4426950408889634 + shift;
    double kd = t - shift;
    double r = y - kd * 0x1.62e42fefa39efp-1; /* ln2's high part: kd * it is exact */
    r = r - kd * 0x1.abc9e3b39803fp-56;       /* and its low part */
    double p = 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* 2^k as 2^k1 2^k2, k1 = round(k / 2), each an integer read from the
       low bits of a double holding it plus shift (no 64-bit division or
       arithmetic shift: those have no AVX2 instruction) */
    double k1d = (kd * 0.5 + shift) - shift;
    uint64_t k1 = vf_fm_bits(k1d + shift) - vf_fm_bits(shift);
    uint64_t k2 = vf_fm_bits((kd - k1d) + shift) - vf_fm_bits(shift);
    return p * vf_fm_double((k1 + 1023u) << 52) * vf_fm_double((k2 + 1023u) << 52);
}

/* tanh x: below |x| = 1/16 its odd Taylor series to x^13 (no cancellation
   near 0), else 1 - 2 / (e^2|x| + 1) (libm's form), the sign put back. */
static inline double vf_fm_tanh(double x)
{
    double a = fabs(x), a2 = a * a;
    double s = -21844.0 / 6081075.0;
    s = s * a2 + 1382.0 / 155925.0;
    s = s * a2 - 62.0 / 2835.0;
    s = s * a2 + 17.0 / 315.0;
    s = s * a2 - 2.0 / 15.0;
    s = s * a2 + 1.0 / 3.0;
    s = a - a * a2 * s;
    double b = 1.0 - 2.0 / (vf_fm_exp(2.0 * a) + 1.0);
    return copysign(a < 0.0625 ? s : b, x);
}

/* o[i] = op(a[i]) for n contiguous f32 elements (a == o allowed), op one
   of VF_OP_EXP, _TANH, _SIGMOID, _GELU, _RSQRT (others: nothing), as its
   op-table reference computes it (in double,
   rounded once). */
void vf_cpu_fm_row(vf_op op, const float *a, float *o, int64_t n);

/* Rows vf_cpu_fm_row has run since the process started (relaxed: tests
   read it to see that a path took the fast rows). */
int64_t vf_cpu_fm_rows(void);

#endif
