/* A set of 64-bit keys kept sorted (binary search, insertion by memmove):
 * the content keys of the kernels a function has used (saved functions,
 * docs/FORMAT.md). The backend adds to it while the frontend tracks a call
 * (vf_backend_iface.kernels_track); small (a function's kernels), so
 * lookups are cheap and the keys come out in ascending order. */
#ifndef VF_UTIL_KEYSET_H
#define VF_UTIL_KEYSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vf_keyset {
    uint64_t *keys;   /* ascending, distinct */
    size_t n, cap;
    bool oom;         /* an add failed: the set misses keys */
} vf_keyset;

/* false: out of memory (and s->oom set); adding a key already there is a no-op. */
bool vf_keyset_add(vf_keyset *s, uint64_t key);
bool vf_keyset_has(const vf_keyset *s, uint64_t key);
void vf_keyset_free(vf_keyset *s);

#endif
