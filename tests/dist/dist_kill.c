/* Helper of kill_test.sh: ranks allreduce in a loop; rank 1 kills itself
 * (SIGKILL) at step 3. Every survivor prints "rank R: STATUS after S s:
 * MESSAGE" when its call fails, and exits 0 if that is VF_ERROR_DEVICE. */
#include <vkfuse_dist.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    double timeout = argc > 1 ? atof(argv[1]) : 3;
    vf_context *ctx;
    vf_dist *d;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 2;
    if (vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = timeout}, &d) != VF_OK)
        return fprintf(stderr, "%s\n", vf_dist_create_error()), 2;
    int rank = vf_dist_rank(d), rc = 2;
    for (int step = 0; step < 100; step++) {
        if (rank == 1 && step == 3) raise(SIGKILL);
        vf_scope_begin(ctx);
        vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){1000}, rank), *y = NULL;
        double t0 = now();
        vf_status s = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y);
        vf_scope_end(ctx);
        if (s != VF_OK) {
            printf("rank %d: %s after %.1f s: %s\n", rank, vf_status_name(s), now() - t0, vf_dist_error_message(d));
            fflush(stdout);
            rc = s == VF_ERROR_DEVICE ? 0 : 1;
            break;
        }
    }
    vf_dist_destroy(d);
    vf_context_destroy(ctx);
    return rc;
}
