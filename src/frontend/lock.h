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
