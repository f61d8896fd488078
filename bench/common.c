/* Benchmark helpers (common.h). */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <time.h>

double vb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

vb_figures vb_time_function(vf_context *ctx, const vf_function_desc *d, vf_tensor **in, int iters, const char *who)
{
    vb_figures f = {.sec = INFINITY};
    vf_function *fn = vf_function_create(ctx, d);
    if (!fn) {
        fprintf(stderr, "%s: %s\n", who, vf_error_message(ctx));
        return f;
    }
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        vf_tensor *y[8] = {NULL};
        vf_context_sync(ctx);
        double t0 = vb_now();
        vf_status s = vf_function_call(fn, in, y);
        if (s == VF_OK) s = vf_context_sync(ctx);
        double t = vb_now() - t0;
        vf_scope_end(ctx);
        if (s != VF_OK) {
            fprintf(stderr, "%s: %s\n", who, vf_error_message(ctx));
            vf_function_destroy(fn);
            return f;
        }
        if (i && t < f.sec) f.sec = t;
    }
    f.ok = vf_function_stats_get(fn, &f.fs) == VF_OK;
    vf_function_destroy(fn);
    return f;
}
