/* Handles that never dangle: the memory of tensors, tapes and generators.
 *
 * A vf_tensor * (and a vf_tape *) is the address of a slot in a slab that
 * its context owns. A slot is handed out once and never reused, so an
 * address names one tensor for the life of the context: a handle used
 * after its tensor died finds its slot marked dead (with how it died) and
 * the call fails with a message instead of reading freed memory. Dead
 * slots keep only their state byte: once every slot on a page is dead the
 * page goes back to the system (MADV_DONTNEED), and so does a page of
 * state bytes once all its slots are dead (a stale handle there is still
 * refused, with how it died no longer recorded), so a long run of
 * released tensors costs no resident memory per tensor, only address
 * space and page tables (16 MiB and 32 KiB per ~95,000 tensors).
 *
 * Why slots are not reused with a generation counter (sokol_gfx's way):
 * a handle is the address of its tensor's struct, which the library
 * dereferences after the check; a reused slot's stale handle would be the
 * very pointer of the new tensor, silently accepted as it. sokol_gfx can
 * reuse slots because its handles are ids with the generation inside. Slabs are aligned to their size, so a
 * slot's slab (and so its context) is found from the address alone.
 *
 * Handles die with their context: the slabs are unmapped by
 * vf_context_destroy, and any use of a tensor or tape after it is
 * undefined. */
#ifndef VF_FRONTEND_HANDLES_H
#define VF_FRONTEND_HANDLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vf_context vf_context;

typedef enum { VF_HANDLE_TENSOR = 1, VF_HANDLE_TAPE = 2, VF_HANDLE_GENERATOR = 3 } vf_handle_kind;

/* How a handle died: what the messages say. */
typedef enum {
    VF_DEATH_RELEASE = 1, /* its last reference went with vf_tensor_release */
    VF_DEATH_SCOPE,       /* the scope that owned it ended */
    VF_DEATH_TAPE_END,    /* vf_tape_end */
    VF_DEATH_INTERNAL,    /* an op that failed before returning it */
    VF_DEATH_DESTROY,     /* vf_generator_destroy */
    VF_DEATH_FORGOTTEN,   /* dead long enough that its state byte went back with its page */
} vf_death;

typedef struct vf_handles {
    vf_handle_kind kind;
    size_t slot_size;     /* bytes per slot, a multiple of 16 */
    void **slabs;         /* slabs[i] has slab number i */
    int n_slabs, cap_slabs;
} vf_handles;

/* The state of a handle as its slot records it. */
typedef struct vf_handle_state {
    enum { VF_HANDLE_LIVE, VF_HANDLE_DEAD, VF_HANDLE_FOREIGN } what; /* FOREIGN: not a handle of this kind */
    vf_death death;       /* when DEAD */
    bool symbolic;        /* when DEAD: it was a symbolic tensor of a trace */
    uint64_t id;          /* 1, 2, ... per context and kind, in creation order */
    vf_context *ctx;      /* its context (NULL when FOREIGN) */
} vf_handle_state;

void vf_handles_init(vf_handles *h, vf_handle_kind kind, size_t object_size);
/* A zeroed slot; NULL when out of memory (nothing recorded). */
void *vf_handle_alloc(vf_handles *h, vf_context *ctx);
/* The same for the stage that owns h's kind: slots the context made with
   no size (it does not know a tape's or a generator's) get object_size
   here; NULL with "who: out of host memory" recorded in ctx. */
void *vf_handle_new(vf_context *ctx, vf_handles *h, size_t object_size, const char *who);
/* Marks p dead; its memory must not be touched afterwards. */
void vf_handle_kill(void *p, vf_death death, bool symbolic);
/* Reads p's slot (never p itself): safe on dead handles of a live context;
   call it with the context's lock held. */
vf_handle_state vf_handle_state_of(const void *p, vf_handle_kind kind);
/* p's context from its slab header alone, without the lock (NULL when p
   is not in a slab of this kind): the lock an entry point takes before it
   checks p with vf_handle_state_of, which needs the lock (the slab's
   slot count and state bytes change as handles are made and die). */
vf_context *vf_handle_context(const void *p, vf_handle_kind kind);
/* p's id from the slab header alone, like vf_handle_context (0 when p is
   no slot of this kind): for messages of calls that cannot take the lock. */
uint64_t vf_handle_id(const void *p, vf_handle_kind kind);
/* Unmaps every slab (the context is going away). */
void vf_handles_free(vf_handles *h);
/* Resident bytes of the slabs, for tests: pages not given back. */
size_t vf_handles_resident_bytes(const vf_handles *h);

/* "released by vf_scope_end" etc. */
const char *vf_death_name(vf_death d);

#endif
