/* The pre-forked worker pool that runs the files of `vkfuse amber` (pool.c). */
#ifndef VF_AMBER_POOL_H
#define VF_AMBER_POOL_H

#include "exec.h"

/* Runs files[0..n_files) on min(jobs, n_files) worker processes forked
   from the caller (which should have called am_compile_warm and
   am_exec_preload first), each running files one after another. A file
   whose worker runs past kill_after seconds is killed (ERROR); a crash is
   that file's ERROR and the worker is replaced. results[i] gets file i's
   verdict; report(i, ctx) is called for 0, 1, 2... in order, as soon as
   each file and all before it are done. */
void am_pool_run(char *const *files, int n_files, int jobs, const am_exec_opts *o, double kill_after,
                 am_result *results, void (*report)(int index, void *ctx), void *ctx);

#endif
