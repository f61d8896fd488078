/* The profiling tests' shared parts (test_profile.c, test_profile_trace.c):
 * a context with profiling on, and a traced function of odd sizes (an
 * elementwise DAG, a reduction and a second DAG output) with its inputs,
 * called and read back. */
#ifndef VKFUSE_TESTS_PROFILE_COMMON_H
#define VKFUSE_TESTS_PROFILE_COMMON_H

#include "testutil.h"

enum { VT_PROF_R = 67, VT_PROF_C = 129 }; /* odd sizes */

/* The function, its captured scalars k, its input x [R, C] and the last
   call's outputs y [R] and z [R, C]. */
typedef struct vt_prof_run {
    vf_function *fn;
    vf_tensor *k[4], *x;
    float y[VT_PROF_R], z[VT_PROF_R * VT_PROF_C];
} vt_prof_run;

/* A context on backend be with profiling on (validation as
   VKFUSE_VALIDATION says); fails the test if there is none. */
vf_context *vt_profiling_context(vf_backend be);
/* vt_group_setup (testutil.h) with profiling on in the Vulkan context. */
int vt_group_setup_profiling(void **state);
/* Creates r's function and inputs in ctx (x holds a NaN and infinities). */
void vt_prof_run_make(vf_context *ctx, vt_prof_run *r);
/* One call of r's function; its outputs read into r->y and r->z. */
void vt_prof_run_call(vf_context *ctx, vt_prof_run *r);

#endif
