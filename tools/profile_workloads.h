/* The built-in workloads of `vkfuse profile`: each makes its inputs and
 * captures (the same on every backend: vf_random_normal with fixed seeds)
 * and has a body for vf_function. */
#ifndef VF_TOOLS_PROFILE_WORKLOADS_H
#define VF_TOOLS_PROFILE_WORKLOADS_H

#include "vkfuse.h"

#define WL_MAX_IN 4
#define WL_MAX_CAP 8
#define WL_MAX_SHRINK 256 /* every leading dimension stays >= 1 */

typedef struct wl_data {
    vf_tensor *in[WL_MAX_IN];
    vf_tensor *cap[WL_MAX_CAP];   /* what the body captures (user points here) */
} wl_data;

typedef struct workload {
    const char *name;
    const char *summary;
    int n_in;                     /* n_outputs is 1 for all */
    /* Makes the inputs and captures in ctx's innermost scope, the leading
       dimension (elements, rows or batch) divided by shrink (1..WL_MAX_SHRINK);
       VF_OK or the context's error. */
    vf_status (*make)(vf_context *ctx, wl_data *d, int64_t shrink);
    vf_body body;                 /* user: the wl_data's cap array */
} workload;

extern const workload vf_workloads[];
extern const int vf_n_workloads;

const workload *wl_find(const char *name);

#endif
