/* f32 rows of exp, tanh, sigmoid, gelu, log, softplus and rsqrt
 * (fast_math.h). The
 * transcendental ones are evaluated mostly in float, the steps whose
 * rounding would show in double; the bounds below are of the error
 * against the exact value, in f32 ulps of it, the largest seen over every
 * f32 input (tests/test_cpu_rows.c checks them on every 12289th bit
 * pattern and the specials, and that each result is the op table's double
 * reference rounded once, or an ulp from it):
 *   exp      vf_fm_expf(x) (x clamped above at 89: inf past FLT_MAX):
 *            float throughout, 1.22 ulps;
 *   tanh     |x| < 0.625: its odd Taylor series to x^21 in float (no
 *            cancellation near 0, terms below 2^-28 relative); above,
 *            (1 - e) / (1 + e) with e = vf_fm_expf(-2|x|) in float and
 *            the quotient in double (a float quotient adds a rounding in
 *            each of its three steps: 1.5 ulps), the sign put back:
 *            0.89 ulps;
 *   sigmoid  e = vf_fm_exp_wide(-|x|), 1 / (1 + e) for x >= 0 and
 *            e / (1 + e) below, in double: for x << 0 the result is e
 *            itself, so e may not carry a float rounding: 0.62 ulps;
 *   gelu     0.5 x (1 + tanh u) = x / (1 + e^-2u), u = c (x + k x^3) in
 *            double as the reference computes it (e^-2u carries 2|u|
 *            times u's relative error); e = vf_fm_exp_wide(-2|u|) and
 *            x / (1 + e) or x e / (1 + e) in double. This form does not
 *            cancel where the reference's 1 + tanh u does (x < -5.5:
 *            there the double reference itself is off by up to
 *            2^-53 / (1 + tanh u) relative; the tests compare with
 *            x / (1 + exp(-2u)) in double): 0.66 ulps;
 *   log      x = 2^k (1 + f), fdlibm's float polynomial in s = f / (2 + f)
 *            and the sum with k ln2 in double (row_ln): 0.58 ulps;
 *   softplus max(x, 0) + log(1 + e), e = vf_fm_exp_wide(-|x|), the log
 *            as log's, on a double argument (row_softplus): 0.64 ulps;
 *   rsqrt    IEEE sqrt and divide in double, libm's bits exactly.
 * The loops have no calls or branches, so they vectorise, compiled for
 * the wider vector units too (the best picked at load). Built with
 * -fno-math-errno (CMakeLists.txt): sqrt may then be the vector
 * instruction; the library never reads errno.
 *
 * And softmax / log_softmax / cross-entropy rows of f32 (contiguous), in
 * float where the op table's references are double, since their tests hold
 * them to 1e-6 relative (docs/TESTING.md), not to an ulp. Three passes over
 * a row that stays in L1: the max, as an unsigned max of order-preserving
 * keys (a float max with NaN rules does not vectorise); e^(x - max) by
 * vf_fm_expf with x - max's rounding error passed along (TwoSum), each
 * within 1.2 ulps (1.43e-7 relative), summed in 16 double lanes (element i
 * in lane i % 16, the lanes then in order: relative error below
 * n / 16 * 2^-53 for n terms in [0, 1], 1e-12 for a row of 1e5); then
 * the exponentials times (float)(1 / sum), or (x - max) - log(sum) in
 * double rounded once for log_softmax. Error bounds (relative, worst
 * case; tests/test_cpu_softmax.c checks them, and sees less than half):
 * softmax 4.1e-7 (the term's and the sum's 1.43e-7 each, the reciprocal's
 * and the product's roundings; plus 2^-149 absolute for a subnormal
 * output); log_softmax and cross entropy 2.1e-7 (the max's term is exactly
 * 1, so the sum's error is at most 1.43e-7 (sum - 1) / sum <= 1.43e-7
 * log(sum) <= 1.43e-7 |output|, plus the output's rounding). NaN anywhere
 * in a row makes the whole row NaN, and so does a row of -inf (-inf minus
 * -inf) or one with +inf, as in the double path: the sum is then NaN.
 * These loops are built with FMA contraction (SM_CLONES), so the bits of
 * the FMA clones (x86-64-v3 and up) and of the default one differ in the
 * last place; every call in a process, eager or fused, runs the same one.
 */
#include "cpu/fast_math.h"

#include <stdatomic.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define FM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
/* The softmax rows: with FMA where the CPU has it (x86-64-v3 and up) and
   a * b + c contracted into it, 16-22% faster; the default clone's bits
   differ in the last place, and a process always runs one clone. */
#define SM_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), optimize("fp-contract=fast")))
#else
#define FM_CLONES
#define SM_CLONES
#endif

static _Atomic int64_t rows_run;

int64_t vf_cpu_fm_rows(void) { return atomic_load_explicit(&rows_run, memory_order_relaxed); }

/* The constants of op_table.c's gelu reference. */
#define GELU_C 0.7978845608028654
#define GELU_K 0.044715

FM_CLONES static void row_exp(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = a[i];
        o[i] = vf_fm_expf(x > 89.0f ? 89.0f : x, 0.0f);
    }
}

/* tanh |x| for |x| < 0.625: x - x^3 / 3 + 2 x^5 / 15 - ..., the
   coefficients rounded from their exact fractions. */
static inline float tanh_series(float a)
{
    float a2 = a * a;
    float s = (float)(18888466084.0 / 194896477400625.0);
    s = s * a2 - (float)(443861162.0 / 1856156927625.0);
    s = s * a2 + (float)(6404582.0 / 10854718875.0);
    s = s * a2 - (float)(929569.0 / 638512875.0);
    s = s * a2 + (float)(21844.0 / 6081075.0);
    s = s * a2 - (float)(1382.0 / 155925.0);
    s = s * a2 + (float)(62.0 / 2835.0);
    s = s * a2 - (float)(17.0 / 315.0);
    s = s * a2 + (float)(2.0 / 15.0);
    s = s * a2 - (float)(1.0 / 3.0);
    return a + a * a2 * s;
}

FM_CLONES static void row_tanh(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = a[i], m = fabsf(x);
        double e = vf_fm_expf(-2.0f * m, 0.0f); /* -inf clamped: 0 */
        float big = (float)((1.0 - e) / (1.0 + e));
        o[i] = copysignf(m < 0.625f ? tanh_series(m) : big, x);
    }
}

FM_CLONES static void row_sigmoid(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = a[i];
        double e = vf_fm_exp_wide(-fabsf(x));
        o[i] = (float)((x < 0.0f ? e : 1.0) / (1.0 + e));
    }
}

FM_CLONES static void row_gelu(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        double u = GELU_C * (x + GELU_K * x * x * x);
        double e = vf_fm_exp_wide(-2.0 * fabs(u));
        o[i] = (float)(x * ((u < 0.0 ? e : 1.0) / (1.0 + e)));
    }
}

/* k ln2 + log(1 + d) for d in [sqrt(1/2) - 1, sqrt(2) - 1]:
   log(1 + d) = d - (d^2/2 - s (d^2/2 + R)) with s = d / (2 + d) and R(s^2)
   fdlibm's float minimax polynomial for logf; s (from d rounded to float,
   f) and R in float, the sum (where their errors are scaled down by
   |s (d^2/2 + R)| <= 0.05 |log(1 + d)|) and k ln2 in double. */
static inline double ln_core(double d, float f, double k)
{
    float s = f / (2.0f + f), z = s * s, w = z * z;
    float r = z * (0.66666662693f + w * 0.28498786688f) + w * (0.40000972152f + w * 0.24279078841f);
    double hf = 0.5 * d * d;
    return k * 0.6931471805599453 + (d - (hf - (double)s * (hf + (double)r)));
}

/* log x: x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) (f exact),
   then ln_core. Subnormal x scaled by 2^25 first; log 0 = -inf,
   log inf = inf, x < 0 or NaN: NaN. */
FM_CLONES static void row_ln(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = a[i];
        bool tiny = x < 0x1p-126f;
        float xs = tiny ? x * 0x1p25f : x;
        /* the exponent of xs / sqrt(1/2), and the mantissa put back in
           [sqrt(1/2), sqrt(2)) (unsigned: garbage for x <= 0 wraps) */
        uint32_t ix = vf_fm_bits_f(xs) + (0x3f800000u - 0x3f3504f3u);
        int32_t k = (int32_t)((ix >> 23) - 127u - (tiny ? 25u : 0u));
        float f = vf_fm_float((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
        float y = (float)ln_core(f, f, k);
        y = x == 0.0f ? -INFINITY : y;
        y = x == INFINITY ? INFINITY : y;
        /* NaN as libm makes it: an input NaN quieted, else the invalid
           operation's default NaN */
        o[i] = x != x ? x + x : x < 0.0f ? (x - x) / (x - x) : y;
    }
}

/* softplus x = max(x, 0) + log(1 + e), e = e^-|x| in (0, 1] by
   vf_fm_exp_wide (a double: for x << 0 the result is about e itself);
   log(1 + e) by ln_core on d = e (e < sqrt(2) - 1) or on d = (e - 1) / 2,
   k = 1 (1 + e = 2 (1 + d)); the sum in double. No cancellation: both
   terms are >= 0. */
FM_CLONES static void row_softplus(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float x = a[i];
        double e = vf_fm_exp_wide(-fabsf(x));
        bool hi = e > 0.41421356237309503;
        double d = hi ? (e - 1.0) * 0.5 : e;
        o[i] = (float)((x > 0.0f ? (double)x : 0.0) + ln_core(d, (float)d, hi ? 1.0 : 0.0));
    }
}

FM_CLONES static void row_rsqrt(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = (float)(1.0 / sqrt((double)a[i]));
}

void vf_cpu_fm_row(vf_op op, const float *a, float *o, int64_t n)
{
    switch (op) {
    case VF_OP_EXP: row_exp(a, o, n); break;
    case VF_OP_TANH: row_tanh(a, o, n); break;
    case VF_OP_SIGMOID: row_sigmoid(a, o, n); break;
    case VF_OP_GELU: row_gelu(a, o, n); break;
    case VF_OP_RSQRT: row_rsqrt(a, o, n); break;
    case VF_OP_LOG: row_ln(a, o, n); break;
    case VF_OP_SOFTPLUS: row_softplus(a, o, n); break;
    default: return;
    }
    atomic_fetch_add_explicit(&rows_run, 1, memory_order_relaxed);
}

/* ---- softmax rows ------------------------------------------------------------ */

#define SM_LANES 16

static _Atomic int64_t softmax_rows_run;

int64_t vf_cpu_fm_softmax_rows(void) { return atomic_load_explicit(&softmax_rows_run, memory_order_relaxed); }

void vf_cpu_fm_softmax_rows_add(int64_t rows)
{
    atomic_fetch_add_explicit(&softmax_rows_run, rows, memory_order_relaxed);
}

/* Float order as unsigned order (-NaN < -inf < ... < -0 < +0 < ... < +inf
   < +NaN): the sign bit set on positives, all bits flipped on negatives. */
static inline uint32_t order_key(float v)
{
    uint32_t b = vf_fm_bits_f(v);
    return b ^ ((0u - (b >> 31)) | 0x80000000u);
}

static inline float order_float(uint32_t k) { return vf_fm_float(k ^ (((k >> 31) - 1u) | 0x80000000u)); }

/* The row's max; a +NaN is the max, a -NaN below everything: either way
   the NaN reaches the sum through its own exponential. Lane l takes the
   elements i with i % 16 == l; the last partial block is padded with key
   0 (below every float), so that short rows (attention's 12, logits' 10)
   run vector code too. */
SM_CLONES static float row_max(const float *x, int64_t n)
{
    uint32_t m[SM_LANES] = {0}, r = 0;
    int64_t i = 0;
    for (; i + SM_LANES <= n; i += SM_LANES)
        for (int l = 0; l < SM_LANES; l++) {
            uint32_t k = order_key(x[i + l]);
            m[l] = k > m[l] ? k : m[l];
        }
    if (i < n) {
        uint32_t kt[SM_LANES];
        for (int l = 0; l < SM_LANES; l++) kt[l] = i + l < n ? order_key(x[i + l]) : 0u;
        for (int l = 0; l < SM_LANES; l++) m[l] = kt[l] > m[l] ? kt[l] : m[l];
    }
    for (int l = 0; l < SM_LANES; l++) r = m[l] > r ? m[l] : r;
    return order_float(r);
}

/* e^(x - m), x - m's rounding error recovered exactly (TwoSum: t + lo is
   x - m; an infinite t makes lo NaN, which vf_fm_expf drops). */
static inline float exp_diff(float x, float m)
{
    float t = x - m, b = t - x;
    float lo = (x - (t - b)) + (-m - b);
    return vf_fm_expf(t, lo);
}

/* Sum of e^(x - m), each stored into e unless e is NULL: element i added
   to lane i % 16 of 16 double sums, then the lanes in order. The last
   partial block is padded with -inf, whose e^(-inf - m) adds +0 (m is
   finite; a row whose m is not is NaN anyway). */
SM_CLONES static double row_exp_sum(const float *x, float *e, int64_t n, float m)
{
    double s[SM_LANES] = {0}, r = 0;
    int64_t i = 0;
    if (e) {
        for (; i + SM_LANES <= n; i += SM_LANES)
            for (int l = 0; l < SM_LANES; l++) {
                float v = exp_diff(x[i + l], m);
                e[i + l] = v;
                s[l] += v;
            }
    } else {
        for (; i + SM_LANES <= n; i += SM_LANES)
            for (int l = 0; l < SM_LANES; l++) s[l] += exp_diff(x[i + l], m);
    }
    if (i < n) {
        float xt[SM_LANES], et[SM_LANES];
        for (int l = 0; l < SM_LANES; l++) xt[l] = i + l < n ? x[i + l] : -INFINITY;
        for (int l = 0; l < SM_LANES; l++) {
            et[l] = exp_diff(xt[l], m);
            s[l] += et[l];
        }
        for (int l = 0; e && i + l < n; l++) e[i + l] = et[l];
    }
    for (int l = 0; l < SM_LANES; l++) r += s[l];
    return r;
}

SM_CLONES static void row_scale(float *y, int64_t n, float by)
{
    for (int64_t i = 0; i < n; i++) y[i] *= by;
}

SM_CLONES static void row_log(const float *x, float *y, int64_t n, double m, double ls)
{
    for (int64_t i = 0; i < n; i++) y[i] = (float)(((double)x[i] - m) - ls);
}

void vf_cpu_fm_softmax_rows_f32(const float *x, float *y, int64_t rows, int64_t n, bool log_out)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        float m = row_max(xr, n);
        if (log_out) {
            row_log(xr, yr, n, m, log(row_exp_sum(xr, NULL, n, m)));
        } else {
            row_scale(yr, n, (float)(1.0 / row_exp_sum(xr, yr, n, m)));
        }
    }
    vf_cpu_fm_softmax_rows_add(rows);
}

double vf_cpu_fm_xent_row(const float *x, int64_t n, int64_t label)
{
    float m = row_max(x, n);
    double s = row_exp_sum(x, NULL, n, m);
    return log(s) - ((double)x[label] - m); /* m taken out of both terms */
}
