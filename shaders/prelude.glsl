// ---- vkfuse prelude: helpers with the C reference semantics ----------------
// Every generated kernel includes this. The op table's GLSL expressions call
// vf_pow / vf_max / vf_min / vf_tanh / vf_log / vf_sqrt / vf_rsqrt (and the
// math ops' helpers at the end: rounding, modulo, erf, log1p...); GLSL's
// built-ins leave their edge cases undefined (log(0), sqrt(-1), pow(-2, 2),
// tanh overflow, NaN in max), so these spell them out as C does.

// Linear workgroup index: dispatches beyond the X limit use a 2D or 3D
// grid; beyond all three main() strides over the groups (VF_GRID_STRIDE).
uint vf_grid_id()
{
    return gl_WorkGroupID.x + gl_NumWorkGroups.x * (gl_WorkGroupID.y + gl_NumWorkGroups.y * gl_WorkGroupID.z);
}
#ifdef VF_GRID_STRIDE
uint vf_gid;
uint vf_group_id() { return vf_gid; }
#else
uint vf_group_id() { return vf_grid_id(); }
#endif

float vf_nan() { return uintBitsToFloat(0x7fc00000u); }
float vf_inf() { return uintBitsToFloat(0x7f800000u); }
bool vf_signbit(float x) { return (floatBitsToUint(x) & 0x80000000u) != 0u; }

// f16 bits <-> f32. Widening is exact; narrowing rounds to nearest even in
// integer arithmetic (bit-identical to util/dtype.c, independent of the
// driver's rounding mode and denormal handling).
float vf_h2f(uint h) { return unpackHalf2x16(h).x; }
uint vf_f2h(float f)
{
    uint x = floatBitsToUint(f);
    uint sign = (x >> 16) & 0x8000u;
    uint ex = (x >> 23) & 0xffu;
    uint man = x & 0x7fffffu;
    if (ex == 0xffu) return sign | 0x7c00u | (man != 0u ? 0x200u : 0u);
    int e = int(ex) - 127 + 15;
    if (e >= 31) return sign | 0x7c00u;
    if (e <= 0) {
        if (e < -10) return sign;
        man |= 0x800000u;
        uint shift = uint(14 - e);
        uint half_ = man >> shift;
        uint rem = man & ((1u << shift) - 1u);
        uint mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half_ & 1u) != 0u)) half_++;
        return sign | half_;
    }
    uint h = sign | (uint(e) << 10) | (man >> 13);
    uint rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u) != 0u)) h++;
    return h;
}

// Float -> integer casts: truncate, saturate, NaN -> 0.
int vf_f2i(float v)
{
    if (isnan(v)) return 0;
    if (v >= 2147483648.0) return 0x7fffffff;
    if (v <= -2147483648.0) return int(0x80000000u);
    return int(v);
}
uint vf_f2u(float v)
{
    if (isnan(v) || v <= 0.0) return 0u;
    if (v >= 4294967296.0) return 0xffffffffu;
    return uint(v);
}

float vf_max(float a, float b) { return (isnan(a) || isnan(b)) ? vf_nan() : max(a, b); }
float vf_min(float a, float b) { return (isnan(a) || isnan(b)) ? vf_nan() : min(a, b); }

float vf_log(float x)
{
    if (isnan(x) || x < 0.0) return vf_nan();
    if (x == 0.0) return -vf_inf();
    if (isinf(x)) return x;
    return log(x);
}
float vf_sqrt(float x)
{
    if (isnan(x) || x < 0.0) return vf_nan();
    if (x == 0.0 || isinf(x)) return x;
    return sqrt(x);
}
float vf_rsqrt(float x)
{
    if (isnan(x) || x < 0.0) return vf_nan();
    if (x == 0.0) return vf_signbit(x) ? -vf_inf() : vf_inf();
    if (isinf(x)) return 0.0;
    return 1.0 / sqrt(x);
}

// tanh without overflow: (1 - e^-2|x|) / (1 + e^-2|x|); a series near 0
// where that form would cancel.
float vf_tanh(float x)
{
    float ax = abs(x);
    float r;
    if (ax < 0.0625) {
        float x2 = x * x;
        r = ax * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0))));
    } else if (ax > 10.0) {
        r = 1.0;          // also +-Inf
    } else {
        float t = exp(-2.0 * ax);
        r = (1.0 - t) / (1.0 + t);
    }
    if (isnan(x)) return x;
    return vf_signbit(x) ? -r : r;
}

// C pow: pow(x, 0) = 1 (even NaN), pow(1, y) = 1, negative base needs an
// integer exponent (sign from its parity), pow(0, -1) = Inf, pow(-0, -1) = -Inf.
float vf_pow(float a, float b)
{
    if (b == 0.0 || a == 1.0) return 1.0;
    if (isnan(a) || isnan(b)) return vf_nan();
    float aa = abs(a);
    if (isinf(b)) {
        if (aa == 1.0) return 1.0;
        return ((aa > 1.0) == (b > 0.0)) ? vf_inf() : 0.0;
    }
    bool bint = floor(b) == b;
    if (a < 0.0 && !isinf(a) && !bint) return vf_nan();
    bool odd = bint && abs(b) < 16777216.0 && (int(abs(b)) & 1) == 1;
    float r;
    if (aa == 0.0) {
        r = b < 0.0 ? vf_inf() : 0.0;
    } else if (isinf(aa)) {
        r = b < 0.0 ? 0.0 : vf_inf();
    } else if (bint && abs(b) <= 64.0) {
        // square-and-multiply for small integer exponents (a few ulps)
        uint n = uint(abs(b));
        float base = aa, acc = 1.0;
        while (n != 0u) {
            if ((n & 1u) != 0u) acc *= base;
            base *= base;
            n >>= 1;
        }
        r = b < 0.0 ? 1.0 / acc : acc;
    } else {
        // a^b = 2^(b (e + log2 m)) with m in [sqrt(1/2), sqrt(2)). b * e is
        // formed exactly (12-bit halves of b times the small integer e), so
        // only b * log2(m) is rounded: exp2(b * log2(a)) would lose
        // |b log2 a| ulps. `precise` keeps the compiler from refactoring.
        int e;
        float m = frexp(aa, e);
        if (m < 0.70710678) {
            m *= 2.0;
            e -= 1;
        }
        precise float fe = float(e);
        precise float bh = uintBitsToFloat(floatBitsToUint(b) & 0xfffff000u);
        precise float bl = b - bh;
        precise float p1 = bh * fe;
        precise float p2 = bl * fe;
        precise float n1 = floor(p1 + 0.5);
        precise float f = ((p1 - n1) + p2) + b * log2(m);
        precise float n2 = floor(f + 0.5);
        f = f - n2;
        float n = n1 + n2;
        if (n > 130.0) {
            r = vf_inf();
        } else if (n < -160.0) {
            r = 0.0;
        } else {
            int ni = int(n);
            r = ldexp(ldexp(exp2(f), ni / 2), ni - ni / 2);
        }
    }
    return (odd && vf_signbit(a)) ? -r : r;
}

// Order-preserving uint keys, so max / min / argmax of any dtype reduce
// with unsigned subgroupMax / subgroupMin. A NaN gets the key that wins
// (max: all ones, min: zero), which makes NaN propagate; keys decode back.
uint vf_key_f(float f, bool nan_high)
{
    if (isnan(f)) return nan_high ? 0xffffffffu : 0u;
    uint k = floatBitsToUint(f);
    return (k & 0x80000000u) != 0u ? ~k : (k | 0x80000000u);
}
float vf_unkey_f(uint k)
{
    if (k == 0xffffffffu || k == 0u) return vf_nan();
    return uintBitsToFloat((k & 0x80000000u) != 0u ? (k & 0x7fffffffu) : ~k);
}
uint vf_key_i(int v) { return uint(v) ^ 0x80000000u; }
int vf_unkey_i(uint k) { return int(k ^ 0x80000000u); }

// sin / cos with a full-range argument reduction (Payne-Hanek): llvmpipe's
// built-ins reduce with a short pi and are wrong for large |x| (sin(1e30)).
// |x| < pi/4 goes straight to the built-in; otherwise x * 2/pi is formed
// exactly enough from 96 bits of 2/pi at the right offset, giving the
// quadrant and a reduced argument in [-pi/4, pi/4].
const uint VF_TWO_OVER_PI[8] = uint[8](0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
                                       0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u);

uint vf_2pi_bits(int j)   // 32 bits of 2/pi starting at bit j >= 1 after the point
{
    int k = (j - 1) >> 5, sh = (j - 1) & 31;
    uint hi = VF_TWO_OVER_PI[k];
    return sh == 0 ? hi : (hi << sh) | (VF_TWO_OVER_PI[k + 1] >> (32 - sh));
}

uint vf_word128(uvec4 w, int i) { return i == 0 ? w.w : i == 1 ? w.z : i == 2 ? w.y : i == 3 ? w.x : 0u; }

uint vf_bits128(uvec4 w, int p)   // bits [p, p + 32) of w (w.x most significant)
{
    int i = p >> 5, sh = p & 31;
    uint lo = vf_word128(w, i), hi = vf_word128(w, i + 1);
    return sh == 0 ? lo : (lo >> sh) | (hi << (32 - sh));
}

float vf_reduce_pio2(float ax, out uint quad)   // ax finite, >= pi/4
{
    uint bits = floatBitsToUint(ax);
    uint m = (bits & 0x7fffffu) | 0x800000u;
    int e = int(bits >> 23) - 150;   // ax = m * 2^e
    int j0 = max(1, e - 1);          // earlier bits of 2/pi only add multiples of 4
    int q = j0 + 95 - e;             // ax * 2/pi = (m * B) / 2^q  (mod 4)
    uint b0 = vf_2pi_bits(j0), b1 = vf_2pi_bits(j0 + 32), b2 = vf_2pi_bits(j0 + 64);
    uint h0, l0, h1, l1, h2, l2, c1, c2, c3;
    umulExtended(m, b2, h2, l2);
    umulExtended(m, b1, h1, l1);
    umulExtended(m, b0, h0, l0);
    uint w1 = uaddCarry(h2, l1, c1);
    uint w2 = uaddCarry(h1, l0, c2);
    w2 = uaddCarry(w2, c1, c3);
    uvec4 w = uvec4(h0 + c2 + c3, w2, w1, l2);
    quad = vf_bits128(w, q) & 3u;
    uint fh = vf_bits128(w, q - 32), fl = vf_bits128(w, q - 64);
    float sgn = 1.0;
    if ((fh & 0x80000000u) != 0u) {   // fraction >= 1/2: round to the next quadrant
        quad = (quad + 1u) & 3u;
        fl = ~fl + 1u;
        fh = ~fh + (fl == 0u ? 1u : 0u);
        sgn = -1.0;
    }
    float f = float(fh) * (1.0 / 4294967296.0) + float(fl) * (1.0 / 18446744073709551616.0);
    return sgn * f * 1.57079632679489662;
}

float vf_sin(float x)
{
    if (isnan(x) || isinf(x)) return vf_nan();
    float ax = abs(x);
    if (ax < 0.78539816) return sin(x);
    uint n;
    float r = vf_reduce_pio2(ax, n);
    float v = (n & 1u) == 0u ? sin(r) : cos(r);
    if ((n & 2u) != 0u) v = -v;
    return x < 0.0 ? -v : v;
}

float vf_cos(float x)
{
    if (isnan(x) || isinf(x)) return vf_nan();
    float ax = abs(x);
    if (ax < 0.78539816) return cos(x);
    uint n;
    float r = vf_reduce_pio2(ax, n);
    n = n + 1u;   // cos(x) = sin(x + pi/2)
    float v = (n & 1u) == 0u ? sin(r) : cos(r);
    return (n & 2u) != 0u ? -v : v;
}

// ---- rounding, modulo and the special functions (issue 13) ----------------
// Zeros keep the input's sign as C does (floor(-0.0) = -0.0,
// ceil(-0.5) = -0.0); NaN and Inf pass through.
float vf_zero_like(float x) { return vf_signbit(x) ? uintBitsToFloat(0x80000000u) : 0.0; }
float vf_floor(float x)
{
    if (isnan(x) || isinf(x)) return x;
    float r = floor(x);
    return r == 0.0 ? vf_zero_like(x) : r;
}
float vf_ceil(float x)
{
    if (isnan(x) || isinf(x)) return x;
    float r = ceil(x);
    return r == 0.0 ? vf_zero_like(x) : r;
}
// Half to even, spelled out rather than roundEven (whose ties and zero
// signs are the driver's): x - floor(x) is exact for every float.
float vf_round(float x)
{
    if (isnan(x) || isinf(x)) return x;
    float r = floor(x), d = x - r;
    if (d > 0.5 || (d == 0.5 && r - 2.0 * floor(0.5 * r) != 0.0)) r += 1.0;
    return r == 0.0 ? vf_zero_like(x) : r;
}

// C fmod, exact: subtract the largest y * 2^k not above x; each subtraction
// is exact (t <= x < 2t), at most one per binade between |a| and |b|.
// GLSL's mod(a, b) = a - b * floor(a / b) rounds a / b and is wrong (even
// outside [0, b)) once |a / b| nears 2^24.
float vf_fmod(float a, float b)
{
    if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) return vf_nan();
    float x = abs(a), y = abs(b);
    if (isinf(y) || x < y) return a;
    int ey;
    frexp(y, ey);
    while (x >= y) {
        int ex;
        frexp(x, ex);
        float t = ldexp(y, ex - ey);
        if (t > x) t = ldexp(y, ex - ey - 1);
        x -= t;
    }
    return vf_signbit(a) ? -x : x;
}
// Floor modulo (tf.math.floormod, Python's %): the sign of the divisor,
// a zero result included.
float vf_mod(float a, float b)
{
    float r = vf_fmod(a, b);
    if (isnan(r)) return r;
    if (r == 0.0) return vf_zero_like(b);
    return (r < 0.0) != (b < 0.0) ? r + b : r;
}
// GLSL leaves % of negative operands undefined: on magnitudes, then signed.
// x mod 0 is 0 (as NumPy); INT_MIN mod -1 is 0.
int vf_imod(int a, int b)
{
    if (b == 0) return 0;
    uint r = uint(abs(a)) % uint(abs(b));   // abs(INT_MIN) reads as 2^31 unsigned
    int ri = a < 0 ? -int(r) : int(r);
    return (ri != 0 && (ri < 0) != (b < 0)) ? ri + b : ri;
}

// erf: Chebyshev interpolants of C's double erf (scripts/erf_cheb.c derives
// the coefficients): |x| < 1: x * P(x^2), P interpolating erf(sqrt t)/sqrt t
// on t in [0, 1]; 1 <= |x| < 4: 1 - e^(-x^2) Q(x), Q interpolating
// erfc(x) e^(x^2) on [1, 4]; beyond, +-1 (erf(3.92) rounds to 1 in f32).
// Max error 9.4e-8 absolute, 1.5e-7 relative in f32 arithmetic.
float vf_cheb_erf_small(float u)
{
    const float c[8] = float[8](1.950953879e+00, -1.422612051e-01, 1.003558219e-02, -5.768764700e-04,
                                2.741993125e-05, -1.104317551e-06, 3.848875522e-08, -1.180858233e-09);
    float b1 = 0.0, b2 = 0.0;
    for (int k = 7; k >= 1; k--) {
        float t = 2.0 * u * b1 - b2 + c[k];
        b2 = b1;
        b1 = t;
    }
    return u * b1 - b2 + 0.5 * c[0];
}
float vf_cheb_erfcx(float u)
{
    const float c[15] = float[15](4.888515057e-01, -1.358986289e-01, 3.563511415e-02, -8.884098618e-03,
                                  2.118423998e-03, -4.853987641e-04, 1.072737545e-04, -2.293663448e-05,
                                  4.756874692e-06, -9.589944833e-07, 1.882900690e-07, -3.606320659e-08,
                                  6.747601816e-09, -1.234906885e-09, 2.213150441e-10);
    float b1 = 0.0, b2 = 0.0;
    for (int k = 14; k >= 1; k--) {
        float t = 2.0 * u * b1 - b2 + c[k];
        b2 = b1;
        b1 = t;
    }
    return u * b1 - b2 + 0.5 * c[0];
}
float vf_erf(float x)
{
    if (isnan(x)) return x;
    float ax = abs(x), r;
    if (ax < 1.0) return x * vf_cheb_erf_small(2.0 * x * x - 1.0);   // keeps -0.0
    if (ax < 4.0) r = 1.0 - exp(-ax * ax) * vf_cheb_erfcx((2.0 * ax - 5.0) / 3.0);
    else r = 1.0;
    return x < 0.0 ? -r : r;
}

// log and exp done here rather than with the built-ins, whose error
// (a few ulps on lavapipe, growing with |x| for exp) the subtractions of
// log1p / expm1 would magnify. ln 2 in two parts: n * VF_LN2_HI is exact
// for |n| < 2^8.
const float VF_LN2_HI = 0.693145751953125;
const float VF_LN2_LO = 1.428606765330187e-06;
// 2 atanh(s) = log((1 + s) / (1 - s)) for |s| <= 1/5: 8 terms reach 2^-24.
float vf_log_series(float s)
{
    float s2 = s * s;
    float p = 1.0 / 15.0;
    p = 1.0 / 13.0 + s2 * p;
    p = 1.0 / 11.0 + s2 * p;
    p = 1.0 / 9.0 + s2 * p;
    p = 1.0 / 7.0 + s2 * p;
    p = 1.0 / 5.0 + s2 * p;
    p = 1.0 / 3.0 + s2 * p;
    return 2.0 * s + 2.0 * s * s2 * p;
}
// e^r - 1 for |r| <= 1/2 by its Taylor series (10 terms: 2^-24).
float vf_expm1_series(float x)
{
    float p = 1.0 / 3628800.0;
    p = 1.0 / 362880.0 + x * p;
    p = 1.0 / 40320.0 + x * p;
    p = 1.0 / 5040.0 + x * p;
    p = 1.0 / 720.0 + x * p;
    p = 1.0 / 120.0 + x * p;
    p = 1.0 / 24.0 + x * p;
    p = 1.0 / 6.0 + x * p;
    p = 0.5 + x * p;
    return x + x * x * p;
}
// log1p: near 0 the series on s = x / (2 + x); elsewhere 1 + x = m 2^e
// (m in [sqrt(1/2), sqrt(2)), m - 1 exact), log(m) by the series, plus
// the rounding of 1 + x, (x - (u - 1)) / u.
float vf_log1p(float x)
{
    if (isnan(x) || x < -1.0) return vf_nan();
    if (x == -1.0) return -vf_inf();
    if (isinf(x)) return x;
    if (x == 0.0) return x;   // keeps -0.0
    if (abs(x) < 0.33333334) return vf_log_series(x / (2.0 + x));
    precise float u = 1.0 + x;
    precise float c = u < 16777216.0 ? (x - (u - 1.0)) / u : 0.0;   // the rounding of 1 + x
    int e;
    float m = frexp(u, e);
    if (m < 0.70710678) {
        m *= 2.0;
        e -= 1;
    }
    precise float f = m - 1.0, fe = float(e);
    precise float lo = fe * VF_LN2_LO + c;
    precise float hi = fe * VF_LN2_HI;
    return hi + (lo + vf_log_series(f / (2.0 + f)));
}
// e^x = 2^n e^r with r = x - n ln 2 in [-0.35, 0.35]; returns e^r - 1 in
// p and n (x finite, |x| < 104).
float vf_exp_reduce(float x, out int n)
{
    // `precise`: the split only works if the compiler neither fuses nor
    // reassociates these (llvmpipe did: 3e-6 errors at x = -60)
    precise float fn = floor(x * 1.4426950408889634 + 0.5);
    n = int(fn);
    precise float hi = fn * VF_LN2_HI;
    precise float lo = fn * VF_LN2_LO;
    precise float r = (x - hi) - lo;
    return vf_expm1_series(r);
}
// 2^n (1 + p) in two steps: 2^n alone may not be a float.
float vf_scale2(float v, int n) { return ldexp(ldexp(v, n / 2), n - n / 2); }
// e^x to about an ulp, also for large |x| (the built-in's error grows).
// Past ln(FLT_MAX) the scaling overflows to Inf; results below the
// normal range are 0 (llvmpipe flushes denormals anyway).
float vf_exp(float x)
{
    if (isnan(x)) return x;
    if (x > 89.0) return vf_inf();
    if (x < -87.33) return 0.0;
    int n;
    float p = vf_exp_reduce(x, n);
    return vf_scale2(1.0 + p, n);
}
// expm1: the series for |x| < 1/2, else 2^n (1 + p) - 1.
float vf_expm1(float x)
{
    if (isnan(x)) return x;
    if (x == 0.0) return x;   // keeps -0.0
    if (abs(x) < 0.5) return vf_expm1_series(x);
    if (x > 89.0) return vf_inf();
    if (x < -17.5) return -1.0;   // e^x below half an ulp of 1
    int n;
    float p = vf_exp_reduce(x, n);
    return vf_scale2(1.0 + p, n) - 1.0;
}
// softplus = max(x, 0) + log1p(exp(-|x|)): no overflow, and exp(x) for a
// very negative x rather than 0.
float vf_softplus(float x)
{
    if (isnan(x)) return x;
    return max(x, 0.0) + vf_log1p(vf_exp(-abs(x)));
}
