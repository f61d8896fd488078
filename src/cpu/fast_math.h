/* Vectorisable exp for the CPU backend's float rows (exp, tanh, sigmoid,
 * gelu, softplus; log and rsqrt too: fast_math.c), its double softmax path (kernels_row.c) and
 * its f32 softmax rows.
 *
 * The op table's references evaluate these ops in double and round once
 * to f32; the tests hold the f32 rows to within one ulp of that rounded
 * value, and to a stated bound in ulps of the exact value (fast_math.c
 * lists them). A plain float evaluation cannot meet them everywhere:
 * gelu's 1 + tanh(u) cancels for negative u, exp(y) of a rounded f32
 * argument y carries |y| times the argument's relative error (up to 88
 * ulps near the ends of the f32 range), and each float step of a
 * composite formula (1 / (1 + e), (1 - e) / (1 + e)) adds up to half an
 * ulp. So the polynomial, where the time goes, is float (twice the lanes
 * of double), and the steps whose rounding would show stay in double:
 *   - vf_fm_expf: e^(y + lo) in float, for exp itself (within 1.2 ulps)
 *     and the softmax rows (lo: the argument's rounding error);
 *   - vf_fm_exp_wide: e^y as a double within 0.3 f32 ulps (reduction and
 *     the last two polynomial steps in double), for sigmoid and gelu,
 *     whose results carry e's error unscaled;
 *   - vf_fm_exp: e^y in double to 2e-16, for the double softmax path.
 * Branch-free, no calls: each caller's loop vectorises them for its own
 * target (inline).
 */
#ifndef VF_CPU_FAST_MATH_H
#define VF_CPU_FAST_MATH_H

#include "graph/op.h"

#include <math.h>
#include <stdbool.h>
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

static inline uint32_t vf_fm_bits_f(float x)
{
    uint32_t i;
    memcpy(&i, &x, sizeof i);
    return i;
}

static inline float vf_fm_float(uint32_t i)
{
    float x;
    memcpy(&x, &i, sizeof x);
    return x;
}

/* (e^r - 1 - r) / r^2 by its Taylor series to r^5 (the series of e^r to
   r^7): the head of vf_fm_expf's polynomial, shared with vf_fm_exp_wide. */
static inline float vf_fm_expf_q(float r)
{
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    return p * r + 0.5f;
}

/* e^(y + lo) in float, for softmax's rows (fast_math.c), whose outputs the
   tests hold to 1e-6 relative, not to an ulp of the double reference: lo
   carries the rounding error of an argument computed as y (softmax's
   x - max, see fast_math.c), so that a large |y| does not turn
   that error into |y| ulps. y = k ln2 + r: k's product with ln2's high
   part (9 bits, 355/512) is exact and so is y minus it (Sterbenz), the low
   part and lo added after; e^r by its Taylor series to r^7 (truncation
   below 6e-9 relative for |r| <= 0.35), times 2^k built as two factors so
   that results down to the smallest subnormal round once. Within 1.2
   ulps of e^(y + lo) (tests/test_cpu_softmax.c measures it).
   For y <= 88 (softmax's are <= 0; no upper clamp: GCC's vector code for
   the loops was five times slower with one); below -104, e^y rounds to 0
   and y is clamped there, lo dropped; a NaN passes through. */
static inline float vf_fm_expf(float y, float lo)
{
    const float shift = 0x1.8p23f; /* adding it rounds to an integer, kept in the low bits */
    lo = y < -104.0f ? 0.0f : lo;
    y = y < -104.0f ? -104.0f : y;
    float tk = y * 1.44269504f + shift;
    float kd = tk - shift;                   /* k = round(y / ln2) */
    float r = y - kd * 0.693359375f;         /* both steps exact */
    r = (r - kd * -2.12194440e-4f) + lo;     /* ln2 - 355/512, then the argument's own error */
    float p = vf_fm_expf_q(r);
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    /* 2^k as 2^k1 2^k2, each a normal float: k from tk's low bits, made
       non-negative (k + 256, k >= -150) to halve it by a logical shift,
       k1 = floor((k + 256) / 2) - 128 in [-75, 63], k2 = k - k1 */
    uint32_t kb = vf_fm_bits_f(tk) - vf_fm_bits_f(shift) + 256u;
    uint32_t h = kb >> 1;
    return p * vf_fm_float((h - 1u) << 23) * vf_fm_float((kb - h + 127u - 128u) << 23);
}

/* e^y as a double, for f32 results that carry its error unscaled
   (sigmoid's e / (1 + e) for y << 0, gelu's x e / (1 + e)): within 0.3
   f32 ulps (2^-24 * 0.3 relative; tests/test_cpu_rows.c measures the
   rows built on it). As vf_fm_expf, y = k ln2 + r and vf_fm_expf_q's
   float polynomial, but r is reduced in double (from y itself: a double
   argument such as gelu's -2|u| brings no rounding error of its own) and
   the polynomial's last steps, 1 + r + r^2 q, are double, as is 2^k, so
   that no step rounds to f32 and a result far below FLT_MIN keeps its
   bits. k comes from y rounded to float (only its integer matters). y is
   clamped to [-150, 89]; below -150 the result is 0 (every f32 result
   built on it is then 0, and gelu(-inf) = -inf * 0 is NaN, as its
   reference); a NaN passes through. */
static inline double vf_fm_exp_wide(double y)
{
    const float shift = 0x1.8p23f;
    double yc = y < -150.0 ? -150.0 : y;
    yc = yc > 89.0 ? 89.0 : yc;
    float tk = (float)yc * 1.44269504f + shift;
    float kd = tk - shift;
    /* ln2 as 355/512 (kd * it exact) and the rest, in double */
    double r = (yc - (double)kd * 0.693359375) - (double)kd * -2.12194440054690583e-4;
    double q = vf_fm_expf_q((float)r);
    double p = 1.0 + (r + r * r * q);
    /* 2^k in a double's exponent bits, k from tk's low bits (unsigned:
       a NaN's garbage k wraps instead of overflowing) */
    uint64_t k = (uint64_t)(int64_t)(int32_t)(vf_fm_bits_f(tk) - vf_fm_bits_f(shift));
    double e = p * vf_fm_double((k + 1023u) << 52);
    return y < -150.0 ? 0.0 : e;
}

/* o[i] = op(a[i]) for n contiguous f32 elements (a == o allowed), op one
   of VF_OP_EXP, _TANH, _SIGMOID, _GELU, _LOG, _SOFTPLUS, _RSQRT (others:
   nothing), within
   the bounds fast_math.c states of the exact value (the op table's
   double reference rounded once, or an ulp from it). */
void vf_cpu_fm_row(vf_op op, const float *a, float *o, int64_t n);

/* Softmax (log_out: log_softmax) of `rows` contiguous f32 rows of n >= 1
   elements each into y (y == x allowed), in float with vf_fm_expf; see
   fast_math.c for the steps and their error. Adds rows to the counter
   below. */
void vf_cpu_fm_softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t n, bool log_out);

/* logsumexp(x) - x[label] of a contiguous f32 row (n >= 1, label in
   [0, n)), the max taken out as in vf_cpu_fm_softmax_rows_f32: sparse
   softmax cross entropy's loss, in double. The caller counts its rows
   (vf_cpu_fm_softmax_rows_add, once per batch: an atomic per row costs
   a tenth of a row of 10). */
double vf_cpu_fm_xent_row(const float *x, int64_t n, int64_t label);

/* Rows that vf_cpu_fm_softmax_rows_f32 and cross entropy have run
   (relaxed: tests read it to see that a path took them), and the adding
   to it. */
int64_t vf_cpu_fm_softmax_rows(void);
void vf_cpu_fm_softmax_rows_add(int64_t rows);

/* Rows vf_cpu_fm_row has run since the process started (relaxed: tests
   read it to see that a path took the fast rows). */
int64_t vf_cpu_fm_rows(void);

#endif
