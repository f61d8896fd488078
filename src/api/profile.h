/* The profile of a vf_function's last call (vf_function_profile): kept by
 * the function, filled after each call when the context profiles. */
#ifndef VF_FRONTEND_PROFILE_H
#define VF_FRONTEND_PROFILE_H

#include "api/api.h"
#include "graph/graph.h"
#include "plan/plan.h"

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
   concrete function's graph (node coverage), fp the recorded plan it ran
   (NULL: node by node); the backend's plan_profile gives the kernels of
   each of fp's parts (every segment of a split plan). */
vf_status vf_fprofile_record(vf_context *ctx, vf_fprofile *p, const vf_graph *g, const vf_fplan *fp, bool eager,
                             uint64_t start_ns, uint64_t wall_ns, int64_t peak_bytes, int64_t call);
void vf_fprofile_free(vf_fprofile *p);

#endif
