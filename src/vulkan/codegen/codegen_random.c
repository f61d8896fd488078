/* Philox-4x32-10 kernels (shaders/philox.glsl, util/philox.h):
 * RANDOM_NORMAL, the one source op with a generator of its own (FILL and
 * every elementwise op are one-member elementwise groups: codegen_fused.c
 * vf_codegen_single), and the generator draws RNG_UNIFORM / RNG_NORMAL
 * (index-kind ops that read their draw number from the state buffers). The workgroup size WG (256 within the device's
 * limits) is a specialisation constant (kernel.h). */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

#define RN_LOCAL 256u   /* wanted; clamped to the device by cg_clamp_wg */

/* philox.glsl into g's body; false (g aborted, err set) if it is missing. */
static bool put_philox(vf_cg *g, vf_err *err)
{
    const char *philox = vf_shader_template("philox.glsl");
    if (!philox) {
        cg_abort(g);
        vf_err_set(err, VF_ERROR_COMPILE, "codegen: embedded shader philox.glsl is missing");
        return false;
    }
    vf_sb_puts(&g->body, philox);
    return true;
}

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
    if (!put_philox(&g, err)) return err->status;
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

/* RNG_ADVANCE: one invocation adds one to the state (d_lo, d_hi), carry
   included; in place when the generator assigns it (both words are read
   before either is written). */
static vf_status gen_advance(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "rng_advance");
    snprintf(g.comment, sizeof g.comment, "op rng_advance: the u32 [2] draw number (lo, hi) plus 1");
    cg_bind(&g, VF_BIND_IN0, VF_U32, "sv", true, false);
    cg_bind(&g, VF_BIND_OUT, VF_U32, "outv", false, false);
    cg_workgroup(&g, 1);
    vf_sb_puts(&g.body, "void main()\n{\n"
                        "    uint lo = sv[0] + 1u, hi = sv[1] + (lo == 0u ? 1u : 0u);\n"
                        "    outv[0] = lo;\n"
                        "    outv[1] = hi;\n}\n");
    cg_groups_linear(&g, 1);
    return cg_finish(&g, NULL);
}

/* RNG_UNIFORM / RNG_NORMAL (generator draws): invocation k computes Philox
   block k of draw d (read from the state buffer, so one pipeline serves
   every draw of a generator) and writes its 4 (uniform) or 2 (normal)
   elements. in[1] gives only the shape: it is not bound. */
vf_status vf_codegen_rng(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    if (e->op == VF_OP_RNG_ADVANCE) return gen_advance(e, caps, k, err);
    bool uni = e->op == VF_OP_RNG_UNIFORM;
    vf_dtype dt = e->out.dtype;
    if (dt != VF_F32 && dt != VF_F16)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: dtype %s (f32 or f16 only)", vf_op_get(e->op)->name,
                          vf_dtype_name(dt));
    if (!cg_dtype_supported(e, caps, dt, err)) return VF_ERROR_UNSUPPORTED;
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    if (numel > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: %llu elements; kernels index with 32 bits (at most %u)",
                          vf_op_get(e->op)->name, (unsigned long long)numel, UINT32_MAX);
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "%s_%s", uni ? "rng_uniform" : "rng_normal", cg_dtype_tag(dt));
    snprintf(g.comment, sizeof g.comment,
             "op %s -> %s: Philox-4x32-10 block k of draw d (state buffers) = elements %s (util/philox.h)",
             uni ? "rng_uniform" : "rng_normal", cg_dtype_tag(dt), uni ? "4k..4k+3" : "2k, 2k+1");
    cg_bind(&g, VF_BIND_IN0, VF_U32, "sv", true, false);
    cg_bind(&g, VF_BIND_OUT, dt, "outv", false, false);
    cg_store_fn(&g, "st", "outv", dt, VF_CT_FLOAT);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "seed_lo", (uint32_t)e->attrs.seed);
    cg_push_u32(&g, "seed_hi", (uint32_t)(e->attrs.seed >> 32));
    if (!put_philox(&g, err)) return err->status;
    cg_workgroup(&g, cg_clamp_wg(caps, RN_LOCAL, false));
    unsigned per = uni ? 4u : 2u;
    vf_sb_add(&g.body,
              "\nvoid main()\n{\n"
              "    uint k = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
              "    uint i = %uu * k;\n"
              "    if (i >= pc.numel) return;\n"
              "    uvec4 r = vf_philox_block(uvec2(pc.seed_lo, pc.seed_hi), k, sv[0], sv[1]);\n",
              per);
    if (uni) /* f32: 24 bits, f16: 11 bits (util/philox.h) */
        vf_sb_add(&g.body,
                  "    vec4 v = vec4(r >> %uu) * %s;\n"
                  "    for (uint j = 0u; j < 4u && i + j < pc.numel; j++) st(i + j, v[j]);\n}\n",
                  dt == VF_F32 ? 8u : 21u, dt == VF_F32 ? "(1.0 / 16777216.0)" : "(1.0 / 2048.0)");
    else
        vf_sb_puts(&g.body, "    vec2 v = vf_box_muller(r);\n"
                            "    st(i, v.x);\n"
                            "    if (i + 1u < pc.numel) st(i + 1u, v.y);\n}\n");
    uint64_t blocks = (numel + per - 1) / per;
    cg_groups_linear(&g, (blocks + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}
