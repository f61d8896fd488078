#include "util/hash.h"
#include "util/fault.h"

#include <stdlib.h>

/* key 0 marks an empty slot, so callers' keys are nudged off zero. */
static uint64_t fix(uint64_t k) { return k ? k : 1; }

void *vf_hmap_get(const vf_hmap *m, uint64_t key)
{
    if (!m->cap) return NULL;
    key = fix(key);
    for (size_t i = key & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) return m->vals[i];
        if (m->keys[i] == 0) return NULL;
    }
}

static void insert(uint64_t *keys, void **vals, size_t cap, uint64_t key, void *val)
{
    size_t i = key & (cap - 1);
    while (keys[i] != 0 && keys[i] != key) i = (i + 1) & (cap - 1);
    keys[i] = key;
    vals[i] = val;
}

bool vf_hmap_put(vf_hmap *m, uint64_t key, void *val)
{
    key = fix(key);
    if (2 * (m->n + 1) > m->cap) {
        size_t cap = m->cap ? 2 * m->cap : 64;
        uint64_t *k = vf_calloc(cap, sizeof *k);
        void **v = vf_calloc(cap, sizeof *v);
        if (!k || !v) {
            free(k);
            free(v);
            return false;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) insert(k, v, cap, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        m->keys = k;
        m->vals = v;
        m->cap = cap;
    }
    if (!vf_hmap_get(m, key)) m->n++;
    insert(m->keys, m->vals, m->cap, key, val);
    return true;
}

void vf_hmap_free(vf_hmap *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->n = 0;
}
