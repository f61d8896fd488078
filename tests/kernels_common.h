/* User kernels shared by the tests that call them (test_kernels.c,
 * test_plan_cond.c): the usual shape callback, element counts, and the
 * cube kernel y = x^3 with its C implementation and gradient. */
#ifndef VKFUSE_TESTS_KERNELS_COMMON_H
#define VKFUSE_TESTS_KERNELS_COMMON_H

#include "testutil.h"

/* Every output takes input 0's rank and shape. */
vf_status vt_same_shape(vf_kernel_shapes *s, void *user);
/* Elements of a tensor spec. */
int64_t vt_spec_numel(const vf_tensor_spec *t);
/* "cube": one f32 input, y = x^3 (GLSL and C), with the gradient
   3 x^2 dy when with_grad; fails the test if it cannot be made. */
vf_kernel *vt_cube_kernel(vf_context *ctx, bool with_grad);

#endif
