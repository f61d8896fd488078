/* 64-bit content hashes and a small open-addressing map keyed by them. */
#ifndef VF_UTIL_HASH_H
#define VF_UTIL_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* FNV-1a with a final avalanche (splitmix64's finaliser): FNV alone mixes
   the last bytes poorly, and cache file names use all 64 bits. */
static inline uint64_t vf_hash64(const void *data, size_t n, uint64_t seed)
{
    const uint8_t *p = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static inline uint64_t vf_hash_combine(uint64_t a, uint64_t b)
{
    return vf_hash64(&b, sizeof b, a);
}

/* Map from a non-zero 64-bit key to a pointer; grows at 1/2 load. */
typedef struct vf_hmap {
    uint64_t *keys;
    void **vals;
    size_t cap, n;
} vf_hmap;

void *vf_hmap_get(const vf_hmap *m, uint64_t key);
bool vf_hmap_put(vf_hmap *m, uint64_t key, void *val);   /* false: out of memory */
void vf_hmap_free(vf_hmap *m);                           /* the values are the caller's */

#endif
