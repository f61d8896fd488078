/* Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as
 * 1, 2, 3", SC'11) and the Box-Muller mapping used by vf_random_normal.
 *
 * This is the specification both backends follow; shaders/philox.glsl is the
 * GLSL twin and must stay bit-identical in the integer part:
 *
 *   pair k (elements 2k and 2k+1) uses counter (k_lo, k_hi, 0, 0) and key
 *   (seed_lo, seed_hi); of the four outputs r0..r3,
 *     u1 = ((r0 >> 8) + 1) * 2^-24        in (0, 1]
 *     u2 = (r1 >> 8) * 2^-24              in [0, 1)
 *     rad = sqrt(-2 ln u1), th = 2 pi u2
 *     element 2k = rad cos th, element 2k+1 = rad sin th   (computed in f32)
 *
 * Generators (vf_generator_*, function/generator.c) draw from the same
 * block function with their state in the upper counter words: draw number
 * d = d_hi:d_lo (the state, +1 per draw) and element block k give counter
 * (k_lo, k_hi, d_lo, d_hi), key (seed_lo, seed_hi). Every draw so owns its
 * own 2^64 blocks, whatever its size: draws never overlap, and the state
 * advances by one per draw (not by the number of blocks used).
 *   uniform f32: block k gives elements 4k..4k+3, u_j = (r_j >> 8) * 2^-24
 *   uniform f16: u_j = (r_j >> 21) * 2^-11 (exact in f16: rounding 24 bits
 *                to f16 could give 1.0)
 *   normal:      block k gives elements 2k, 2k+1 from r0, r1 as above
 * Draw 0 of a generator's normals is vf_random_normal's stream for its seed.
 */
#ifndef VF_UTIL_PHILOX_H
#define VF_UTIL_PHILOX_H

#include <math.h>
#include <stdint.h>

static inline void vf_philox4x32_10(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t c0 = ctr_in[0], c1 = ctr_in[1], c2 = ctr_in[2], c3 = ctr_in[3];
    uint32_t k0 = key_in[0], k1 = key_in[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n1 = (uint32_t)p1;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        uint32_t n3 = (uint32_t)p0;
        c0 = n0; c1 = n1; c2 = n2; c3 = n3;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

/* Block k of draw d (see above). */
static inline void vf_philox_block(uint64_t seed, uint64_t d, uint64_t k, uint32_t r[4])
{
    uint32_t ctr[4] = {(uint32_t)k, (uint32_t)(k >> 32), (uint32_t)d, (uint32_t)(d >> 32)};
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    vf_philox4x32_10(ctr, key, r);
}

/* The Box-Muller pair of block r (elements 2k, 2k+1). */
static inline void vf_box_muller(const uint32_t r[4], float out[2])
{
    float u1 = (float)((r[0] >> 8) + 1u) * (1.0f / 16777216.0f);
    float u2 = (float)(r[1] >> 8) * (1.0f / 16777216.0f);
    float rad = sqrtf(-2.0f * logf(u1));
    float th = 6.28318530717958647692f * u2;
    out[0] = rad * cosf(th);
    out[1] = rad * sinf(th);
}

/* Elements 2k and 2k+1 of the stream for seed (draw 0's block k). */
static inline void vf_normal_pair(uint64_t seed, uint64_t k, float out[2])
{
    uint32_t r[4];
    vf_philox_block(seed, 0, k, r);
    vf_box_muller(r, out);
}

/* A uniform in [0, 1) from word w: 24 bits (f32) or 11 bits (f16). */
static inline float vf_uniform_of(uint32_t w, int bits)
{
    return bits == 24 ? (float)(w >> 8) * (1.0f / 16777216.0f) : (float)(w >> 21) * (1.0f / 2048.0f);
}

#endif
