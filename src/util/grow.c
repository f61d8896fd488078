#include "util/grow.h"
#include "util/fault.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

bool vf_grow_size(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2) return false;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) return false;
    void *q = vf_realloc(*p, c * elem);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

bool vf_grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = (size_t)*cap;
    if (!vf_grow_size(p, &c, (size_t)need, elem)) return false; /* need > *cap >= 0 */
    if (c > INT_MAX) c = (size_t)INT_MAX; /* still >= need: only the count is clamped */
    *cap = (int)c;
    return true;
}
