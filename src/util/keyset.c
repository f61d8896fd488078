#include "util/keyset.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

/* The first index whose key is >= key. */
static size_t lower_bound(const vf_keyset *s, uint64_t key)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->keys[mid] < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

bool vf_keyset_has(const vf_keyset *s, uint64_t key)
{
    size_t i = lower_bound(s, key);
    return i < s->n && s->keys[i] == key;
}

bool vf_keyset_add(vf_keyset *s, uint64_t key)
{
    size_t i = lower_bound(s, key);
    if (i < s->n && s->keys[i] == key) return true;
    if (!vf_grow_size((void **)&s->keys, &s->cap, s->n + 1, sizeof *s->keys)) {
        s->oom = true;
        return false;
    }
    memmove(s->keys + i + 1, s->keys + i, sizeof *s->keys * (s->n - i));
    s->keys[i] = key;
    s->n++;
    return true;
}

void vf_keyset_free(vf_keyset *s)
{
    free(s->keys);
    *s = (vf_keyset){0};
}
