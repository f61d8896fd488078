/* The context's lock: one context may be used from several threads, and
 * every public entry point that touches a context, its tensors, functions
 * or tapes serialises on it (as TensorFlow's eager context does).
 *
 * It is recursive because the API re-enters itself on the same thread:
 * vf_cond / vf_while_loop bodies and function bodies being traced call
 * public ops, and public ops call each other (vf_matmul -> vf_matmul_ex).
 * It is held for a whole scope (vf_scope_begin .. vf_scope_end) and a whole
 * tape (vf_tape_begin .. vf_tape_end), so the tensors a scope owns and the
 * ops a tape records are the opening thread's only (docs/RUNTIME.md).
 *
 * A thread that holds no hold has no open scope or tape, so ending one
 * there is misuse that waiting for the lock would turn into a deadlock
 * (the scope's thread may be waiting for this one): vf_scope_end and
 * vf_tape_end, on a thread that does not hold the lock and cannot take it
 * at once (vf_ctx_trylock), fail without it through vf_ctx_fail_unlocked, whose error the next thread to take the
 * lock folds into the sticky error (the error record is the lock's).
 *
 * Entry points write VF_LOCKED(ctx) as their first statement: it takes
 * the lock and drops it when the function returns, whichever return.
 * tests/api_lock_test.sh checks that every VF_API function does (or is on
 * its list of functions that touch no mutable context state), and the
 * internal helpers every op goes through (vf_fail, vf_tensor_new, vf_run,
 * ...) assert VF_ASSERT_LOCKED in debug builds. */
#ifndef VF_FRONTEND_LOCK_H
#define VF_FRONTEND_LOCK_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct vf_ctx_mutex {
    pthread_mutex_t mu;
    _Atomic uintptr_t owner; /* the holding thread's token (lock.c), 0: none */
    int depth;               /* acquisitions by the owner; only the owner touches it */
    /* An error of a call that could not take the lock (vf_ctx_fail_unlocked),
       folded into the context's sticky error by the next vf_ctx_lock. */
    pthread_mutex_t note_mu;
    atomic_bool noted;
    /* Tensors vf_tensor_release was asked to release while another thread
       held the lock: it never waits (a thread releasing a tensor it got
       from another, or Python's garbage collector running on any thread,
       must not deadlock against the holder, which may be waiting for this
       thread in a collective). The holder releases them as it lets go of
       the lock (vf_ctx_unlock). Under note_mu; `queued` sits by `noted`,
       on the cache line every lock and unlock reads anyway. */
    atomic_bool queued;
    void **rel;
    int rel_n, rel_cap;
    int note_status;         /* a vf_status */
    char note[512];
} vf_ctx_mutex;

typedef struct vf_context vf_context;

void vf_ctx_lock_init(vf_ctx_mutex *l);
void vf_ctx_lock_destroy(vf_ctx_mutex *l);
/* Take / drop one level; NULL ctx: nothing. */
void vf_ctx_lock(vf_context *ctx);
void vf_ctx_unlock(vf_context *ctx);
/* Whether the calling thread holds ctx's lock, and how many times. */
bool vf_ctx_locked_here(const vf_context *ctx);
int vf_ctx_lock_depth(const vf_context *ctx);
/* Takes a hold if no thread holds the lock, without waiting; false (none
   taken) when one does. */
bool vf_ctx_trylock(vf_context *ctx);
/* Records an error for ctx without waiting for its lock (first error wins,
   as with vf_fail): taken at once if the lock is free, else by the next
   thread that takes it, so every reader of the sticky error sees it. */
void vf_ctx_fail_unlocked(vf_context *ctx, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Queues t for release by whichever thread holds ctx's lock, for a caller
   that does not hold it and could not take it at once; false (nothing
   queued) when out of host memory. */
bool vf_ctx_queue_release(vf_context *ctx, void *t);
/* The queued tensors, taken off the queue (the caller frees the array);
   *n of them. */
void **vf_ctx_take_releases(vf_context *ctx, int *n);

static inline vf_context *vf_ctx_guard_take(vf_context *ctx)
{
    vf_ctx_lock(ctx);
    return ctx;
}
static inline void vf_ctx_guard_drop(vf_context **ctx) { vf_ctx_unlock(*ctx); }

/* Holds ctx's lock until the enclosing block (the function) is left. */
#define VF_LOCKED(ctx) \
    vf_context *vf_ctx_guard_ __attribute__((cleanup(vf_ctx_guard_drop), unused)) = vf_ctx_guard_take(ctx)

/* Internal helpers that touch context state check that the entry point
   that called them took the lock (debug builds). */
#define VF_ASSERT_LOCKED(ctx) assert(!(ctx) || vf_ctx_locked_here(ctx))

#endif
