/* The CPU backend's worker threads (cpu_threads.c): a fixed number of
 * threads that split one kernel's work at a time.
 *
 * vf_cpu_parallel cuts [0, n) into `parts` contiguous ranges of at least
 * `grain` items, at most the pool's thread count, and runs part 0 on the
 * caller and part i on worker i. The cut depends only on n, grain and the
 * thread count, so a kernel whose parts compute disjoint outputs gives the
 * same bits for every thread count, and one that combines per-part values
 * in part order gives the same bits for a given thread count.
 *
 * Idle workers sleep on a condition variable (no spinning against
 * OpenBLAS's threads or other processes); they are started at the first
 * call that needs them, so a context that never runs a large kernel
 * starts none. One caller at a time: the context's lock guarantees it.
 * In a child forked from the process that started them there are no
 * workers: the child runs every part itself (same cut, same bits) and
 * leaves the pool to the parent on destroy.
 */
#ifndef VF_CPU_CPU_THREADS_H
#define VF_CPU_CPU_THREADS_H

#include <stdint.h>

typedef struct vf_cpu_workers vf_cpu_workers;

/* Work of part `part` of `parts`: items [lo, hi). */
typedef void (*vf_cpu_task_fn)(void *arg, int part, int parts, int64_t lo, int64_t hi);

/* A pool of `threads` threads (the caller counts as one; >= 1). NULL when
   out of memory. */
vf_cpu_workers *vf_cpu_workers_create(int threads);
void vf_cpu_workers_destroy(vf_cpu_workers *p);
/* The thread count it was created with (1 for NULL). */
int vf_cpu_workers_threads(const vf_cpu_workers *p);
/* Threads started so far, the caller not counted (tests). */
int vf_cpu_workers_started(const vf_cpu_workers *p);
/* How many parts vf_cpu_parallel cuts n items into. */
int vf_cpu_parts(const vf_cpu_workers *p, int64_t n, int64_t grain);
/* Runs fn on every part and returns when all are done. A worker that
   cannot be started leaves its part to the caller (same cut, same bits). */
void vf_cpu_parallel(vf_cpu_workers *p, int64_t n, int64_t grain, vf_cpu_task_fn fn, void *arg);

#endif
