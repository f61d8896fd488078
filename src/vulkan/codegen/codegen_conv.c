/* conv2d (f32, NHWC input, HWIO filter): a direct kernel.
 *
 * One invocation per output element (NHWC order, so neighbouring
 * invocations share a pixel and read the same input window, which the
 * caches serve; their filter reads are consecutive along O). It walks the
 * window's taps, skips those that fall in the padding, and sums the group's
 * channels in float. The geometry is push constants, so one pipeline
 * serves every shape. Taps per invocation (KH * KW * C/groups) are bounded
 * by the device's loop budget. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

#define CONV_LOCAL 256u

vf_status vf_codegen_conv2d(const vf_exec *e, const vf_device_caps *caps, vf_kernel *k, vf_err *err)
{
    const vf_tref *x = &e->in[0], *w = &e->in[1], *y = &e->out;
    if (e->n_in != 2 || x->rank != 4 || w->rank != 4 || y->rank != 4 || x->dtype != VF_F32 ||
        w->dtype != VF_F32 || y->dtype != VF_F32)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "conv2d: takes f32 NHWC input, HWIO filter and output (cast to f32 first)");
    const vf_conv_attrs *a = &e->attrs.conv;
    int64_t C = x->shape[3], KH = w->shape[0], KW = w->shape[1], Cg = w->shape[2], O = w->shape[3];
    if (a->groups < 1 || O % a->groups != 0 || Cg * a->groups != C)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "conv2d: shapes and groups disagree");
    if (cg_numel(x) > (int64_t)UINT32_MAX || cg_numel(w) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "conv2d: input or filter has more than %u elements; kernels index with 32 bits "
                          "(split the batch)", UINT32_MAX);
    uint64_t taps = (uint64_t)(KH * KW * Cg);
    if (taps > cg_loop_budget(caps))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "conv2d: %llu filter taps per output exceed this device's loop budget (%u); use "
                          "groups or a smaller filter, or the CPU backend", (unsigned long long)taps,
                          cg_loop_budget(caps));

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "conv2d_f32");
    snprintf(g.comment, sizeof g.comment,
             "op conv2d: f32 NHWC input, HWIO filter; one invocation per output element, direct sum over "
             "the window (geometry in push constants)");
    cg_bind(&g, VF_BIND_IN0, VF_F32, "xv", true, false);
    cg_bind(&g, VF_BIND_IN1, VF_F32, "wv", true, false);
    cg_bind(&g, VF_BIND_OUT, VF_F32, "yv", false, false);
    uint64_t numel = (uint64_t)cg_numel(y);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "H", (uint32_t)x->shape[1]);
    cg_push_u32(&g, "W", (uint32_t)x->shape[2]);
    cg_push_u32(&g, "C", (uint32_t)C);
    cg_push_u32(&g, "OH", (uint32_t)y->shape[1]);
    cg_push_u32(&g, "OW", (uint32_t)y->shape[2]);
    cg_push_u32(&g, "O", (uint32_t)O);
    cg_push_u32(&g, "KH", (uint32_t)KH);
    cg_push_u32(&g, "KW", (uint32_t)KW);
    cg_push_u32(&g, "Cg", (uint32_t)Cg);
    cg_push_u32(&g, "Og", (uint32_t)(O / a->groups));
    cg_push_i32(&g, "sh", a->stride[0]);
    cg_push_i32(&g, "sw", a->stride[1]);
    cg_push_i32(&g, "dh", a->dilation[0]);
    cg_push_i32(&g, "dw", a->dilation[1]);
    cg_push_i32(&g, "pt", a->pad[0]);
    cg_push_i32(&g, "pl", a->pad[2]);

    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, CONV_LOCAL, false));
    vf_sb_puts(s, "void main()\n{\n"
                  "    uint i = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                  "    if (i >= pc.numel) return;\n"
                  "    uint o = i % pc.O, r = i / pc.O;\n"
                  "    int ow = int(r % pc.OW); r /= pc.OW;\n"
                  "    int oh = int(r % pc.OH);\n"
                  "    uint n = r / pc.OH;\n"
                  "    uint c0 = (o / pc.Og) * pc.Cg;   // the group's first input channel\n"
                  "    float acc = 0.0;\n"
                  "    for (uint kh = 0u; kh < pc.KH; kh++) {\n"
                  "        int ih = oh * pc.sh + int(kh) * pc.dh - pc.pt;\n"
                  "        if (ih < 0 || ih >= int(pc.H)) continue;   // padding reads 0\n"
                  "        for (uint kw = 0u; kw < pc.KW; kw++) {\n"
                  "            int iw = ow * pc.sw + int(kw) * pc.dw - pc.pl;\n"
                  "            if (iw < 0 || iw >= int(pc.W)) continue;\n"
                  "            uint xb = ((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c0;\n"
                  "            uint wb = ((kh * pc.KW + kw) * pc.Cg) * pc.O + o;\n"
                  "            for (uint c = 0u; c < pc.Cg; c++) acc += xv[xb + c] * wv[wb + c * pc.O];\n"
                  "        }\n"
                  "    }\n"
                  "    yv[i] = acc;\n"
                  "}\n");
    cg_groups_linear(&g, (numel + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}
