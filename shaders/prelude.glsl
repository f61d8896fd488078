// ---- vkfuse prelude: helpers with the C reference semantics ----------------
// Every generated kernel includes this. The op table's GLSL expressions call
// vf_pow / vf_max / vf_min / vf_tanh / vf_log / vf_sqrt / vf_rsqrt; GLSL's
// built-ins leave their edge cases undefined (log(0), sqrt(-1), pow(-2, 2),
// tanh overflow, NaN in max), so these spell them out as C does.

// Linear workgroup index: dispatches beyond the X limit use a 2D grid.
uint vf_group_id() { return gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y; }

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
        // exact-ish square-and-multiply for small integer exponents
        uint n = uint(abs(b));
        float base = aa, acc = 1.0;
        while (n != 0u) {
            if ((n & 1u) != 0u) acc *= base;
            base *= base;
            n >>= 1;
        }
        r = b < 0.0 ? 1.0 / acc : acc;
    } else {
        r = exp2(b * log2(aa));
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
