// ---- Philox-4x32-10 and Box-Muller: the GLSL twin of src/util/philox.h ----
// The integer part is bit-identical to the C specification; umulExtended
// gives the 32x32->64 products.

uvec4 vf_philox4x32_10(uvec4 c, uvec2 k)
{
    for (int round_ = 0; round_ < 10; round_++) {
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
        k += uvec2(0x9E3779B9u, 0xBB67AE85u);
    }
    return c;
}

// Elements 2k and 2k+1 of the stream for seed (k = k_hi:k_lo).
vec2 vf_normal_pair(uvec2 seed, uint k_lo, uint k_hi)
{
    uvec4 r = vf_philox4x32_10(uvec4(k_lo, k_hi, 0u, 0u), seed);
    float u1 = float((r.x >> 8) + 1u) * (1.0 / 16777216.0);
    float u2 = float(r.y >> 8) * (1.0 / 16777216.0);
    float rad = sqrt(-2.0 * log(u1));
    float th = 6.28318530717958647692 * u2;
    return vec2(rad * cos(th), rad * sin(th));
}

// Block k of generator draw d (util/philox.h): counter (k, 0, d_lo, d_hi).
uvec4 vf_philox_block(uvec2 seed, uint k, uint d_lo, uint d_hi)
{
    return vf_philox4x32_10(uvec4(k, 0u, d_lo, d_hi), seed);
}

vec2 vf_box_muller(uvec4 r)
{
    float u1 = float((r.x >> 8) + 1u) * (1.0 / 16777216.0);
    float u2 = float(r.y >> 8) * (1.0 / 16777216.0);
    float rad = sqrt(-2.0 * log(u1));
    float th = 6.28318530717958647692 * u2;
    return vec2(rad * cos(th), rad * sin(th));
}
