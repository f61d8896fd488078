/* Shared by the benchmarks: a clock, and timing a traced function. */
#ifndef VF_BENCH_COMMON_H
#define VF_BENCH_COMMON_H

#include <stdbool.h>
#include <vkfuse.h>

/* Monotonic seconds. */
double vb_now(void);

typedef struct vb_figures {
    double sec;              /* best seconds per call; INFINITY if none ran */
    vf_function_stats fs;
    bool ok;
} vb_figures;

/* Creates the function of d on ctx and calls it on in iters + 1 times,
   each call synced: the first traces, builds the plan and compiles and is
   not timed; sec is the best of the others. Failures print `who: message`
   and return ok = false. */
vb_figures vb_time_function(vf_context *ctx, const vf_function_desc *d, vf_tensor **in, int iters, const char *who);

#endif
