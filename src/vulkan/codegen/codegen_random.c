/* RANDOM_NORMAL: Philox-4x32-10 normals (shaders/philox.glsl,
 * util/philox.h), the one source op with a generator of its own (FILL and
 * every elementwise op are one-member elementwise groups: codegen_fused.c
 * vf_codegen_single). The workgroup size WG (256 within the device's
 * limits) is a specialisation constant (kernel.h). */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

#define RN_LOCAL 256u   /* wanted; clamped to the device by cg_clamp_wg */

/* RANDOM_NORMAL: invocation k writes elements 2k and 2k+1 (philox.glsl). */
vf_status vf_codegen_random(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "random_normal_%s", cg_dtype_tag(e->out.dtype));
    snprintf(g.comment, sizeof g.comment,
             "op random_normal -> %s: Philox-4x32-10 pair k = elements 2k, 2k+1 (util/philox.h)",
             cg_dtype_tag(e->out.dtype));
    if (!vf_dtype_is_float(e->out.dtype)) {
        cg_abort(&g);
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "random_normal: dtype %s is not a float type",
                          vf_dtype_name(e->out.dtype));
    }
    cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "seed_lo", (uint32_t)e->attrs.seed);
    cg_push_u32(&g, "seed_hi", (uint32_t)(e->attrs.seed >> 32));
    cg_store_fn(&g, "st", "outv", e->out.dtype, VF_CT_FLOAT);
    const char *philox = vf_shader_template("philox.glsl");
    if (!philox) {
        cg_abort(&g);
        return vf_err_set(err, VF_ERROR_COMPILE, "codegen: embedded shader philox.glsl is missing");
    }
    vf_sb_puts(&g.body, philox);
    cg_workgroup(&g, cg_clamp_wg(caps, RN_LOCAL, false));
    vf_sb_puts(&g.body, "\nvoid main()\n{\n"
                       "    uint k = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                       "    uint i = 2u * k;\n"
                       "    if (i >= pc.numel) return;\n"
                       "    vec2 r = vf_normal_pair(uvec2(pc.seed_lo, pc.seed_hi), k, 0u);\n"
                       "    st(i, r.x);\n"
                       "    if (i + 1u < pc.numel) st(i + 1u, r.y);\n}\n");
    uint64_t pairs = (numel + 1) / 2;
    cg_groups_linear(&g, (pairs + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}
