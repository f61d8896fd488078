/* The CPU backend's worker threads: see cpu_threads.h.
 *
 * One job at a time. The caller publishes it under the mutex with a new
 * generation number and broadcasts; each worker whose index is below the
 * job's part count runs its part; the caller runs part 0 and then any part
 * whose worker could not be started, and waits until the started workers
 * have reported. Workers wait on `go` between jobs, so an idle pool costs
 * nothing.
 */
#include "cpu/cpu_threads.h"
#include "util/fault.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 256

typedef struct worker {
    vf_cpu_workers *pool;
    int index;          /* 1..threads-1 */
    pthread_t tid;
} worker;

struct vf_cpu_workers {
    pid_t pid;          /* the process that started the workers: a forked child has none of them */
    int threads;
    int started;        /* workers 1..started are running */
    worker *w;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;       /* the current job's number */
    bool stop;
    /* the current job */
    vf_cpu_task_fn fn;
    void *arg;
    int64_t n;
    int parts;
    int pending;        /* started workers with a part that have not finished it */
};

static void part_range(int64_t n, int parts, int i, int64_t *lo, int64_t *hi)
{
    /* n * i / parts without overflow for any n a buffer can hold */
    int64_t q = n / parts, r = n % parts;
    *lo = q * i + (i < r ? i : r);
    *hi = *lo + q + (i < r ? 1 : 0);
}

static void *worker_main(void *arg)
{
    worker *self = arg;
    vf_cpu_workers *p = self->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        if (self->index >= p->parts) continue;
        vf_cpu_task_fn fn = p->fn;
        void *a = p->arg;
        int parts = p->parts;
        int64_t lo, hi;
        part_range(p->n, parts, self->index, &lo, &hi);
        pthread_mutex_unlock(&p->mu);
        fn(a, self->index, parts, lo, hi);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

vf_cpu_workers *vf_cpu_workers_create(int threads)
{
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    vf_cpu_workers *p = vf_calloc(1, sizeof *p);
    if (!p) return NULL;
    p->threads = threads;
    p->pid = getpid();
    if (threads > 1) {
        p->w = vf_calloc((size_t)threads, sizeof *p->w);
        if (!p->w) p->threads = 1; /* no workers: everything on the caller */
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    return p;
}

void vf_cpu_workers_destroy(vf_cpu_workers *p)
{
    if (!p) return;
    if (p->started > 0 && getpid() != p->pid) return; /* a forked child: the workers are the parent's */
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->started; i++) pthread_join(p->w[i].tid, NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->go);
    pthread_mutex_destroy(&p->mu);
    free(p->w);
    free(p);
}

int vf_cpu_workers_threads(const vf_cpu_workers *p) { return p ? p->threads : 1; }

int vf_cpu_workers_started(const vf_cpu_workers *p) { return p ? p->started : 0; }

int vf_cpu_parts(const vf_cpu_workers *p, int64_t n, int64_t grain)
{
    if (grain < 1) grain = 1;
    int64_t parts = n / grain;
    int t = vf_cpu_workers_threads(p);
    if (parts > t) parts = t;
    return parts < 1 ? 1 : (int)parts;
}

/* Starts workers up to `want` (called by the one caller, so `started` is
   only written here and under no race with the workers, which never read
   it). Stops at the first failure. */
static void start_workers(vf_cpu_workers *p, int want)
{
    while (p->started + 1 < want) {
        worker *w = &p->w[p->started + 1];
        w->pool = p;
        w->index = p->started + 1;
        if (pthread_create(&w->tid, NULL, worker_main, w) != 0) return;
        p->started++;
    }
}

void vf_cpu_parallel(vf_cpu_workers *p, int64_t n, int64_t grain, vf_cpu_task_fn fn, void *arg)
{
    int parts = vf_cpu_parts(p, n, grain);
    int64_t lo, hi;
    if (parts == 1) {
        fn(arg, 0, 1, 0, n);
        return;
    }
    if (getpid() != p->pid) { /* a forked child: no workers; the same cut, on this thread */
        for (int i = 0; i < parts; i++) {
            part_range(n, parts, i, &lo, &hi);
            fn(arg, i, parts, lo, hi);
        }
        return;
    }
    start_workers(p, parts);
    int helped = p->started + 1 < parts ? p->started + 1 : parts; /* parts with a thread */
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n = n;
    p->parts = parts;
    p->pending = helped - 1;
    p->gen++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);

    part_range(n, parts, 0, &lo, &hi);
    fn(arg, 0, parts, lo, hi);
    for (int i = helped; i < parts; i++) { /* workers that could not be started */
        part_range(n, parts, i, &lo, &hi);
        fn(arg, i, parts, lo, hi);
    }
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
