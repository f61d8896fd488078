/* User kernels shared by the tests (kernels_common.h). */
#include "kernels_common.h"

#include <string.h>

vf_status vt_same_shape(vf_kernel_shapes *s, void *user)
{
    (void)user;
    for (int j = 0; j < s->n_outputs; j++) {
        s->out[j].rank = s->in[0].rank;
        memcpy(s->out[j].shape, s->in[0].shape, sizeof s->in[0].shape);
    }
    return VF_OK;
}

int64_t vt_spec_numel(const vf_tensor_spec *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

static const char cube_glsl[] =
    "layout(local_size_x_id = 0) in;\n"
    "layout(binding = 0) readonly buffer X { float x[]; };\n"
    "layout(binding = 1) writeonly buffer Y { float y[]; };\n"
    "layout(push_constant) uniform P { uint nx; uint ny; };\n"
    "void main() { uint i = gl_GlobalInvocationID.x; if (i < ny) y[i] = x[i] * x[i] * x[i]; }\n";

static vf_status cube_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *x = in[0];
    float *y = out[0];
    for (int64_t i = 0; i < vt_spec_numel(&s->out[0]); i++) y[i] = x[i] * x[i] * x[i];
    return VF_OK;
}

/* d(x^3) = 3 x^2 g */
static vf_status cube_grad(vf_context *ctx, const vf_kernel_shapes *s, vf_tensor *const *in, vf_tensor *const *out,
                           vf_tensor *const *gout, vf_tensor **gin, void *user)
{
    (void)s, (void)out, (void)user;
    gin[0] = vf_mul(ctx, vf_mul(ctx, vf_square(ctx, in[0]), vt_scalar(ctx, 3.0)), gout[0]);
    return gin[0] ? VF_OK : vf_status_get(ctx);
}

vf_kernel *vt_cube_kernel(vf_context *ctx, bool with_grad)
{
    vf_kernel_desc d = {.name = "cube", .glsl = cube_glsl, .n_inputs = 1, .n_outputs = 1,
                        .output_shapes = vt_same_shape, .cpu = cube_cpu, .grad = with_grad ? cube_grad : NULL};
    vf_kernel *k = vf_kernel_create(ctx, &d);
    assert_non_null(k);
    return k;
}
