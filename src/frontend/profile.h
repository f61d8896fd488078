/* The profile of a vf_function's last call (vf_function_profile): kept by
 * the function, filled after each call when the context profiles. */
#ifndef VF_FRONTEND_PROFILE_H
#define VF_FRONTEND_PROFILE_H

#include "frontend/frontend.h"
#include "graph/graph.h"

typedef struct vf_fprofile {
    vf_function_profile pub;
    vf_kernel_profile *k;
    char (*names)[64];
    int *nodes;
    const char **ops;
    char note[256];
} vf_fprofile;

/* CLOCK_MONOTONIC in ns. */
uint64_t vf_profile_now_ns(void);

/* Records the call that just finished (its work has finished): g is the
   concrete function's graph (node coverage), planned whether it ran a
   recorded plan (then the backend's plan_profile has its kernels). */
vf_status vf_fprofile_record(vf_context *ctx, vf_fprofile *p, const vf_graph *g, bool planned, bool eager,
                             uint64_t start_ns, uint64_t wall_ns, int64_t peak_bytes, int64_t call);
void vf_fprofile_free(vf_fprofile *p);

#endif
