/* Slabs of never-reused slots for tensors and tapes (handles.h). */
#include "api/handles.h"
#include "api/api.h"
#include "util/fault.h"
#include "util/grow.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define VF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VF_ASAN 1
#endif
#endif
#ifdef VF_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/lsan_interface.h>
/* A dead slot stays poisoned: a use of it inside the library (a missed
   check) is still a use-after-free report, not a silent read. */
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
/* LeakSanitizer scans globals, stacks and heap blocks, not our mmap'd
   slabs: a live tensor's storage (or a tape's records), pointed to only
   from its slot, would be reported as a direct leak while the context
   still owns it (a tensor kept into the root scope of a context that is
   checked before vf_context_destroy). Slabs are roots while mapped. */
#define LSAN_ROOT(p, n) __lsan_register_root_region((p), (n))
#define LSAN_UNROOT(p, n) __lsan_unregister_root_region((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define LSAN_ROOT(p, n) ((void)(p), (void)(n))
#define LSAN_UNROOT(p, n) ((void)(p), (void)(n))
#endif

/* 16 MiB: ~95,000 tensor slots. A slab is reserved address space; pages
   become resident only as slots are handed out. */
#define SLAB_BYTES ((size_t)16 << 20)
#define SLAB_MAGIC 0x76666861u /* "vfha" */

/* Pages of state bytes a slab can have: one byte per slot of >= 16 bytes,
   in 4 KiB pages (larger pages: fewer). */
#define VF_STATE_PAGES (SLAB_BYTES / 17 / 4096 + 2)

enum { ST_FREE = 0, ST_LIVE = 1, ST_DEAD = 2 }; /* low 2 bits; dead: death << 2, symbolic 0x80 */

typedef struct slab {
    uint32_t magic;
    uint32_t kind;
    vf_context *ctx;
    uint64_t first_id;     /* id of slot 0 */
    size_t slot_size;
    size_t first;          /* byte offset of slot 0 (page-aligned, after the state bytes) */
    uint32_t n_slots, used;
    /* dead slots per page of state bytes: once every slot of a page is
       dead, the page goes back to the system (state_page_dead) */
    uint32_t dead[VF_STATE_PAGES];
    uint8_t state[];       /* per slot */
} slab;

static size_t page_size(void)
{
    static size_t ps;
    if (!ps) ps = (size_t)sysconf(_SC_PAGESIZE);
    return ps;
}

void vf_handles_init(vf_handles *h, vf_handle_kind kind, size_t object_size)
{
    memset(h, 0, sizeof *h);
    h->kind = kind;
    h->slot_size = (object_size + 15) & ~(size_t)15;
}

/* A SLAB_BYTES region aligned to SLAB_BYTES: map twice the size, trim. */
static slab *slab_map(void)
{
    size_t len = 2 * SLAB_BYTES;
    uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)p + SLAB_BYTES - 1) & ~(uintptr_t)(SLAB_BYTES - 1);
    size_t head = a - (uintptr_t)p, tail = len - head - SLAB_BYTES;
    if (head) munmap(p, head);
    if (tail) munmap((uint8_t *)a + SLAB_BYTES, tail);
    LSAN_ROOT((void *)a, SLAB_BYTES);
    return (slab *)a;
}

void *vf_handle_alloc(vf_handles *h, vf_context *ctx)
{
    slab *s = h->n_slabs ? h->slabs[h->n_slabs - 1] : NULL;
    if (!s || s->used == s->n_slots) {
        if (!vf_grow((void **)&h->slabs, &h->cap_slabs, h->n_slabs + 1, sizeof *h->slabs)) return NULL;
        s = slab_map();
        if (!s) return NULL;
        size_t ps = page_size();
        /* n slots and their n state bytes: solve header + n + n * size <= SLAB */
        size_t n = (SLAB_BYTES - sizeof(slab) - ps) / (h->slot_size + 1);
        s->magic = SLAB_MAGIC;
        s->kind = (uint32_t)h->kind;
        s->ctx = ctx;
        s->slot_size = h->slot_size;
        s->first = (sizeof(slab) + n + ps - 1) / ps * ps;
        size_t fit = (SLAB_BYTES - s->first) / h->slot_size;
        s->n_slots = (uint32_t)(fit < n ? fit : n); /* never more slots than state bytes */
        s->first_id = 1;
        if (h->n_slabs > 0) {
            const slab *prev = h->slabs[h->n_slabs - 1];
            s->first_id = prev->first_id + prev->n_slots;
        }
        h->slabs[h->n_slabs++] = s;
    }
    uint32_t i = s->used++;
    s->state[i] = ST_LIVE;
    return (uint8_t *)s + s->first + (size_t)i * s->slot_size; /* fresh pages are zero */
}

static slab *slab_of(const void *p) { return (slab *)((uintptr_t)p & ~(uintptr_t)(SLAB_BYTES - 1)); }

/* The page of slot i's state byte, and the slots whose state bytes it
   holds: [*lo, *hi). 0 for the first page (the header's: never given back). */
static size_t state_page(const slab *s, size_t i, size_t *lo, size_t *hi)
{
    size_t ps = page_size(), pg = (offsetof(slab, state) + i) / ps;
    if (pg == 0 || pg >= VF_STATE_PAGES) return 0;
    *lo = pg * ps - offsetof(slab, state);
    *hi = *lo + ps < s->n_slots ? *lo + ps : s->n_slots;
    return pg;
}

/* Whether handed-out slot i is dead, without reading a state byte whose
   page went back: a read maps it again (as a zero page, still resident by
   mincore, and the soak's slabs grew a byte per tensor by such reads). */
static bool slot_dead(const slab *s, size_t i)
{
    size_t lo, hi, pg = state_page(s, i, &lo, &hi);
    return (pg && s->dead[pg] == hi - lo) || (s->state[i] & 3) == ST_DEAD;
}

/* Gives back the pages of the slot at off once every slot on them is dead.
   A page with slots not handed out yet is kept: the next allocations
   would fault it back in at once (a tensor per scope would pay a madvise
   and a page fault each); the last kill on it reclaims it later. */
static void reclaim(slab *s, size_t off)
{
#ifdef MADV_DONTNEED
    size_t ps = page_size();
    for (size_t pg = off / ps * ps; pg < off + s->slot_size; pg += ps) {
        if (pg < s->first) continue;
        size_t lo = (pg - s->first) / s->slot_size, hi = (pg + ps - 1 - s->first) / s->slot_size;
        if (hi >= s->used && hi < s->n_slots) continue;
        bool all_dead = true;
        for (size_t i = lo; i <= hi && i < s->used && all_dead; i++) all_dead = slot_dead(s, i);
        if (all_dead) madvise((uint8_t *)s + pg, ps, MADV_DONTNEED);
    }
#else
    (void)s, (void)off;
#endif
}

/* The state byte of slot i died: once all the slots whose state bytes
   share its page are dead, that page goes back too, so that a long run
   of tensors made and released keeps no byte per tensor (the slab's first
   page, which holds the header, stays). A state byte read back from a
   given-back page is 0: vf_handle_state_of reads that, for a slot already
   handed out, as dead, how no longer recorded (VF_DEATH_FORGOTTEN). */
static void state_page_dead(slab *s, size_t i)
{
#ifdef MADV_DONTNEED
    size_t lo, hi, pg = state_page(s, i, &lo, &hi);
    if (pg && ++s->dead[pg] == hi - lo) madvise((uint8_t *)s + pg * page_size(), page_size(), MADV_DONTNEED);
#else
    (void)s, (void)i;
#endif
}

void vf_handle_kill(void *p, vf_death death, bool symbolic)
{
    slab *s = slab_of(p);
    size_t off = (size_t)((uint8_t *)p - (uint8_t *)s);
    size_t i = (off - s->first) / s->slot_size;
    if ((s->state[i] & 3) != ST_LIVE) return; /* dies once: the page counts stay true */
    s->state[i] = (uint8_t)(ST_DEAD | (unsigned)death << 2 | (symbolic ? 0x80u : 0u));
    POISON(p, s->slot_size);
    reclaim(s, off);
    state_page_dead(s, i);
}

/* Reads only the slab header's fields, which are written once before the
   slab's first slot is handed out: safe without the context's lock, which
   is what the entry points need to find the lock to take. */
vf_context *vf_handle_context(const void *p, vf_handle_kind kind)
{
    const slab *s = slab_of(p);
    return s->magic == SLAB_MAGIC && s->kind == (uint32_t)kind ? s->ctx : NULL;
}

uint64_t vf_handle_id(const void *p, vf_handle_kind kind)
{
    const slab *s = slab_of(p);
    if (s->magic != SLAB_MAGIC || s->kind != (uint32_t)kind) return 0;
    size_t off = (size_t)((const uint8_t *)p - (const uint8_t *)s);
    if (off < s->first || (off - s->first) % s->slot_size != 0) return 0;
    size_t i = (off - s->first) / s->slot_size;
    return i < s->n_slots ? s->first_id + i : 0;
}

vf_handle_state vf_handle_state_of(const void *p, vf_handle_kind kind)
{
    vf_handle_state r = {.what = VF_HANDLE_FOREIGN};
    const slab *s = slab_of(p);
    if (s->magic != SLAB_MAGIC || s->kind != (uint32_t)kind) return r;
    size_t off = (size_t)((const uint8_t *)p - (const uint8_t *)s);
    if (off < s->first || (off - s->first) % s->slot_size != 0) return r;
    size_t i = (off - s->first) / s->slot_size;
    if (i >= s->used) return r;
    uint8_t st = s->state[i];
    r.ctx = s->ctx;
    r.id = s->first_id + i;
    if ((st & 3) == ST_LIVE) {
        r.what = VF_HANDLE_LIVE;
    } else if (st == ST_FREE) { /* its state page was given back */
        r.what = VF_HANDLE_DEAD;
        r.death = VF_DEATH_FORGOTTEN;
    } else {
        r.what = VF_HANDLE_DEAD;
        r.death = (vf_death)((st >> 2) & 0x1f);
        r.symbolic = (st & 0x80) != 0;
    }
    return r;
}

void vf_handles_free(vf_handles *h)
{
    for (int i = 0; i < h->n_slabs; i++) {
#ifdef VF_ASAN
        ASAN_UNPOISON_MEMORY_REGION(h->slabs[i], SLAB_BYTES); /* the next mapping here starts clean */
#endif
        LSAN_UNROOT(h->slabs[i], SLAB_BYTES);
        munmap(h->slabs[i], SLAB_BYTES);
    }
    free(h->slabs);
    h->slabs = NULL;
    h->n_slabs = h->cap_slabs = 0;
}

size_t vf_handles_resident_bytes(const vf_handles *h)
{
    size_t ps = page_size(), total = 0, pages = SLAB_BYTES / ps;
    unsigned char *vec = vf_malloc(pages);
    if (!vec) return 0;
    for (int i = 0; i < h->n_slabs; i++)
        if (mincore(h->slabs[i], SLAB_BYTES, vec) == 0)
            for (size_t k = 0; k < pages; k++) total += (vec[k] & 1) * ps;
    free(vec);
    return total;
}

const char *vf_death_name(vf_death d)
{
    switch (d) {
    case VF_DEATH_RELEASE: return "vf_tensor_release";
    case VF_DEATH_SCOPE: return "vf_scope_end";
    case VF_DEATH_TAPE_END: return "vf_tape_end";
    case VF_DEATH_DESTROY: return "vf_generator_destroy";
    case VF_DEATH_FORGOTTEN: return "vf_scope_end or vf_tensor_release (which one is no longer recorded)";
    default: return "the library (an op that failed)";
    }
}

void *vf_handle_new(vf_context *ctx, vf_handles *h, size_t object_size, const char *who)
{
    if (!h->slot_size) vf_handles_init(h, h->kind, object_size);
    void *p = vf_handle_alloc(h, ctx);
    if (!p) vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", who);
    return p;
}
