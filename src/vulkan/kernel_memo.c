/* The eager kernel memo (kernel_memo.h). */
#include "vulkan/kernel_memo.h"
#include "graph/uelem.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

static int put_tref(uint64_t *w, int n, const vf_tref *t)
{
    w[n++] = (uint64_t)t->dtype | (uint64_t)(t->offset & 15u) << 8 | (uint64_t)(uint32_t)t->rank << 16;
    for (int d = 0; d < t->rank && d < VF_MAX_RANK; d++) w[n++] = (uint64_t)t->shape[d];
    return n;
}

int vf_vk_memo_key(const vf_exec *e, uint64_t *w)
{
    if (e->op == VF_OP_RANDOM_NORMAL || e->n_in < 0 || e->n_in > 3) return 0;
    const vf_attrs *a = &e->attrs;
    int n = 0;
    w[n++] = (uint64_t)e->op | (uint64_t)(uint32_t)e->n_in << 16;
    w[n++] = (uint64_t)a->axes_mask | (uint64_t)a->keepdims << 32 | (uint64_t)a->trans_a << 33 |
             (uint64_t)a->trans_b << 34 | (uint64_t)a->dtype << 40;
    w[n++] = (uint64_t)(uint32_t)a->axis;
    for (int d = 0; d < VF_MAX_RANK; d++) w[n++] = (uint64_t)(uint32_t)a->perm[d];
    uint64_t bits;
    memcpy(&bits, &a->value, sizeof bits);
    w[n++] = bits;
    w[n++] = a->seed;
    w[n++] = a->uelem ? a->uelem->id : 0;   /* a user op's unique id, never its address (reused once freed) */
    if (vf_op_get(e->op)->attrs & VF_ATTR_WINDOW)
        for (int d = 0; d < VF_MAX_RANK; d++) {
            w[n++] = (uint64_t)a->lo[d];
            w[n++] = (uint64_t)a->hi[d];
            w[n++] = (uint64_t)a->step[d];
        }
    for (int i = 0; i < e->n_in; i++) n = put_tref(w, n, &e->in[i]);
    return put_tref(w, n, &e->out);
}

/* Word by word (vf_hash64 goes byte by byte: about a thousand instructions
   for a binary op's key, at every eager op); the memo lives in memory
   only, so its hash may differ from the disk caches'. Keys are compared in
   full, so a weaker mix costs at most a miss. */
static uint64_t hash_of(const uint64_t *key, int n)
{
    uint64_t h = 0x6d656d6full ^ (uint64_t)n;
    for (int i = 0; i < n; i++) h = (h ^ key[i]) * 0x9e3779b97f4a7c15ull + (h >> 29);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    return (h ^ (h >> 29)) | 1; /* the map's keys are non-zero */
}

const vf_vk_memo_entry *vf_vk_memo_find(vf_vk_memo *m, const uint64_t *key, int n)
{
    const vf_vk_memo_entry *ent = vf_hmap_get(&m->map, hash_of(key, n));
    if (ent && ent->n_key == n && memcmp(ent->key, key, sizeof *key * (size_t)n) == 0) {
        m->hits++;
        return ent;
    }
    m->misses++;
    return NULL;
}

static void clear(vf_vk_memo *m)
{
    for (size_t i = 0; i < m->map.cap; i++)
        if (m->map.keys[i]) {
            vf_vk_memo_entry *ent = m->map.vals[i];
            vf_kernel_free(&ent->k);
            free(ent);
        }
    vf_hmap_free(&m->map);
    memset(&m->map, 0, sizeof m->map);
}

const vf_vk_memo_entry *vf_vk_memo_add(vf_vk_memo *m, vf_vk_memo_entry *ent)
{
    if (m->map.n >= VF_VK_MEMO_MAX) clear(m);
    uint64_t h = hash_of(ent->key, ent->n_key);
    vf_vk_memo_entry *old = vf_hmap_get(&m->map, h);   /* a hash collision: the newer wins */
    vf_vk_memo_entry *copy = vf_malloc(sizeof *copy);
    if (!copy) return NULL;
    *copy = *ent;
    if (!vf_hmap_put(&m->map, h, copy)) {
        free(copy);
        return NULL;
    }
    if (old) {
        vf_kernel_free(&old->k);
        free(old);
    }
    memset(&ent->k, 0, sizeof ent->k);
    return copy;
}

void vf_vk_memo_free(vf_vk_memo *m) { clear(m); }
