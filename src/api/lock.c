/* The context's recursive lock (lock.h): a plain mutex plus the owner and
 * depth, so that a thread can tell whether it holds the lock (the debug
 * assertions, the scope and tape holds) without asking pthreads. */
#include "api/api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* One byte per thread: its address identifies the thread while it runs. */
static _Thread_local char thread_token;

static uintptr_t me(void) { return (uintptr_t)&thread_token; }

void vf_ctx_lock_init(vf_ctx_mutex *l)
{
    pthread_mutex_init(&l->mu, NULL);
    atomic_init(&l->owner, 0);
    l->depth = 0;
    pthread_mutex_init(&l->note_mu, NULL);
    atomic_init(&l->noted, false);
    atomic_init(&l->queued, false);
    l->rel = NULL;
    l->rel_n = l->rel_cap = 0;
}

void vf_ctx_lock_destroy(vf_ctx_mutex *l)
{
    free(l->rel); /* the context freed every tensor: nothing left to release */
    pthread_mutex_destroy(&l->note_mu);
    pthread_mutex_destroy(&l->mu);
}

/* The note of a call that could not take the lock joins the sticky error
   (the caller holds the lock). */
static void fold_note(vf_context *ctx)
{
    vf_ctx_mutex *l = &ctx->lock;
    pthread_mutex_lock(&l->note_mu);
    if (atomic_load_explicit(&l->noted, memory_order_relaxed)) {
        vf_err_set(&ctx->err, (vf_status)l->note_status, "%s", l->note);
        atomic_store_explicit(&l->noted, false, memory_order_relaxed);
    }
    pthread_mutex_unlock(&l->note_mu);
}

void vf_ctx_lock(vf_context *ctx)
{
    if (!ctx) return;
    vf_ctx_mutex *l = &ctx->lock;
    /* Only this thread ever stores its own token, so reading it back means
       it holds the lock; any other value (0 or another thread's) means not. */
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) == me()) {
        l->depth++;
    } else {
        pthread_mutex_lock(&l->mu);
        atomic_store_explicit(&l->owner, me(), memory_order_relaxed);
        l->depth = 1;
    }
    if (atomic_load_explicit(&l->noted, memory_order_relaxed)) fold_note(ctx);
}

bool vf_ctx_trylock(vf_context *ctx)
{
    vf_ctx_mutex *l = &ctx->lock;
    if (pthread_mutex_trylock(&l->mu) != 0) return false;
    atomic_store_explicit(&l->owner, me(), memory_order_relaxed);
    l->depth = 1;
    if (atomic_load_explicit(&l->noted, memory_order_relaxed)) fold_note(ctx);
    return true;
}

void vf_ctx_fail_unlocked(vf_context *ctx, int status, const char *fmt, ...)
{
    vf_ctx_mutex *l = &ctx->lock;
    pthread_mutex_lock(&l->note_mu);
    if (!atomic_load_explicit(&l->noted, memory_order_relaxed)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->note, sizeof l->note, fmt, ap);
        va_end(ap);
        l->note_status = status;
        atomic_store_explicit(&l->noted, true, memory_order_relaxed);
    }
    pthread_mutex_unlock(&l->note_mu);
    /* Free now: record it at once, as vf_fail would. Held: the holder's next
       call (or the next thread's first) folds it in. */
    if (vf_ctx_trylock(ctx)) vf_ctx_unlock(ctx);
}

bool vf_ctx_queue_release(vf_context *ctx, void *t)
{
    vf_ctx_mutex *l = &ctx->lock;
    pthread_mutex_lock(&l->note_mu);
    if (l->rel_n == l->rel_cap) {
        int cap = l->rel_cap ? 2 * l->rel_cap : 16;
        void **r = realloc(l->rel, (size_t)cap * sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&l->note_mu);
            return false;
        }
        l->rel = r, l->rel_cap = cap;
    }
    l->rel[l->rel_n++] = t;
    atomic_store(&l->queued, true);
    pthread_mutex_unlock(&l->note_mu);
    /* The holder may have let go between our failed try and the queueing,
       past its look at the queue: then take the lock now and release them
       ourselves (vf_ctx_unlock); still held: the holder does. */
    if (vf_ctx_trylock(ctx)) vf_ctx_unlock(ctx);
    return true;
}

void **vf_ctx_take_releases(vf_context *ctx, int *n)
{
    vf_ctx_mutex *l = &ctx->lock;
    pthread_mutex_lock(&l->note_mu);
    void **r = l->rel;
    *n = l->rel_n;
    l->rel = NULL;
    l->rel_n = l->rel_cap = 0;
    atomic_store(&l->queued, false);
    pthread_mutex_unlock(&l->note_mu);
    return r;
}

void vf_ctx_unlock(vf_context *ctx)
{
    if (!ctx) return;
    vf_ctx_mutex *l = &ctx->lock;
    /* A release by a thread that holds nothing (a scope or tape ended on
       another thread than the one that began it, documented misuse) must
       not abort or release another thread's hold: it does nothing. */
    if (atomic_load_explicit(&l->owner, memory_order_relaxed) != me() || l->depth <= 0) return;
    /* The last hold: first the releases other threads queued meanwhile. */
    if (__builtin_expect(l->depth == 1 && atomic_load_explicit(&l->queued, memory_order_relaxed), 0))
        vf_tensor_release_queued(ctx);
    if (--l->depth > 0) return;
    atomic_store_explicit(&l->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&l->mu);
}

bool vf_ctx_locked_here(const vf_context *ctx)
{
    return atomic_load_explicit(&ctx->lock.owner, memory_order_relaxed) == me();
}

int vf_ctx_lock_depth(const vf_context *ctx) { return vf_ctx_locked_here(ctx) ? ctx->lock.depth : 0; }
