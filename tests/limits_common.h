/* Shared by the device-limit tests (test_limits*.c): small programs run
 * on the CPU backend and, under VKFUSE_TEST_LIMITS, on Vulkan eagerly,
 * traced fused and traced unfused, every output compared. */
#ifndef VF_LIMITS_COMMON_H
#define VF_LIMITS_COMMON_H

#include "testutil.h"
#include "vulkan/codegen/kernel.h"

/* lavapipe's real limits, for codegen without a device: 65535 workgroups
   per dimension, 128 MiB bindings, loops ended after 65535 iterations */
extern const vf_device_caps lim_caps_lavapipe;

/* 8 workgroups per dispatch (2 x 2 x 2), 64 KiB bindings, 64 loop
   iterations per invocation */
#define LIMITS "max_groups=2,max_buffer=65536,max_loop=64"

enum { R = 120, C = 130, MAX_IN = 3, MAX_OUT = 12 };

typedef struct spec {
    vf_dtype dtype;
    int rank;
    int64_t shape[3];
} spec;

typedef struct program {
    const char *name;
    vf_body body;
    int n_in, n_out;
    spec in[MAX_IN];
} program;

/* A scalar f32 constant. */
vf_tensor *lim_scalar(vf_context *ctx, float v);
/* VF_OK when out[0..n-1] are all set, else the context's status. */
vf_status lim_finish(vf_context *ctx, vf_tensor **out, int n);
/* A Vulkan context made with VKFUSE_TEST_LIMITS=limits. */
vf_context *lim_context(const char *limits);
/* Runs p on the CPU backend and under limits on Vulkan (eager, traced
   fused, traced unfused); every output equal within 1e-4 (floats) or
   exactly. Inputs: floats in [-2, 2), integers (labels) in [0, C). */
void lim_check_program(const program *p, const char *limits);

#endif
