/* conv2d and its backprop ops (f32, NHWC input, HWIO filter): direct
 * kernels. The backprop ones gather too (one invocation per element of dx
 * or dw, no atomics), so each result element is written once.
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

/* The main() of each op: one invocation per element of the result. */
static const char *const conv_main =
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
    "            for (uint c = 0u; c < pc.Cg; c++) acc += in0[xb + c] * in1[wb + c * pc.O];\n"
    "        }\n"
    "    }\n";

/* dx[n, ih, iw, c]: the outputs whose window tap (kh, kw) lands on (ih, iw):
   oh * stride = ih + pad - kh * dilation, when that divides. */
static const char *const bpi_main =
    "    uint c = i % pc.C, r = i / pc.C;\n"
    "    int iw = int(r % pc.W); r /= pc.W;\n"
    "    int ih = int(r % pc.H);\n"
    "    uint n = r / pc.H;\n"
    "    uint g = c / pc.Cg, cc = c % pc.Cg, o0 = g * pc.Og;\n"
    "    float acc = 0.0;\n"
    "    for (uint kh = 0u; kh < pc.KH; kh++) {\n"
    "        int th = ih + pc.pt - int(kh) * pc.dh;\n"
    "        if (th < 0 || th % pc.sh != 0 || th / pc.sh >= int(pc.OH)) continue;\n"
    "        for (uint kw = 0u; kw < pc.KW; kw++) {\n"
    "            int tw = iw + pc.pl - int(kw) * pc.dw;\n"
    "            if (tw < 0 || tw % pc.sw != 0 || tw / pc.sw >= int(pc.OW)) continue;\n"
    "            uint yb = ((n * pc.OH + uint(th / pc.sh)) * pc.OW + uint(tw / pc.sw)) * pc.O + o0;\n"
    "            uint wb = ((kh * pc.KW + kw) * pc.Cg + cc) * pc.O + o0;\n"
    "            for (uint k = 0u; k < pc.Og; k++) acc += in0[yb + k] * in1[wb + k];\n"
    "        }\n"
    "    }\n";

/* dw[kh, kw, cc, o]: every image's output pixels against the input pixel
   their window put under tap (kh, kw). */
static const char *const bpf_main =
    "    uint o = i % pc.O, r = i / pc.O;\n"
    "    uint cc = r % pc.Cg; r /= pc.Cg;\n"
    "    uint kw = r % pc.KW, kh = r / pc.KW;\n"
    "    uint c = (o / pc.Og) * pc.Cg + cc;\n"
    "    float acc = 0.0;\n"
    "    for (uint n = 0u; n < pc.N; n++)\n"
    "        for (uint oh = 0u; oh < pc.OH; oh++) {\n"
    "            int ih = int(oh) * pc.sh + int(kh) * pc.dh - pc.pt;\n"
    "            if (ih < 0 || ih >= int(pc.H)) continue;\n"
    "            for (uint ow = 0u; ow < pc.OW; ow++) {\n"
    "                int iw = int(ow) * pc.sw + int(kw) * pc.dw - pc.pl;\n"
    "                if (iw < 0 || iw >= int(pc.W)) continue;\n"
    "                acc += in0[((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c] *\n"
    "                       in1[((n * pc.OH + oh) * pc.OW + ow) * pc.O + o];\n"
    "            }\n"
    "        }\n";

vf_status vf_codegen_conv2d(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const char *name = vf_op_get(e->op)->name;
    const vf_tref *a = &e->in[0], *b = &e->in[1], *out = &e->out;
    if (e->n_in != 2 || a->rank != 4 || b->rank != 4 || out->rank != 4 || a->dtype != VF_F32 ||
        b->dtype != VF_F32 || out->dtype != VF_F32)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: takes f32 NHWC input, HWIO filter and output (cast to f32 first)", name);
    /* the forward's x, w and y, whichever op this is */
    const vf_tref *x = a, *w = b, *y = out;
    const char *body = conv_main;
    if (e->op == VF_OP_CONV2D_BACKPROP_INPUT) y = a, x = out, body = bpi_main;
    else if (e->op == VF_OP_CONV2D_BACKPROP_FILTER) y = b, w = out, body = bpf_main;
    const vf_conv_attrs *at = &e->attrs.conv;
    int64_t C = x->shape[3], KH = w->shape[0], KW = w->shape[1], Cg = w->shape[2], O = w->shape[3];
    if (at->groups < 1 || O % at->groups != 0 || Cg * at->groups != C)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "%s: shapes and groups disagree", name);
    if (cg_numel(x) > (int64_t)UINT32_MAX || cg_numel(w) > (int64_t)UINT32_MAX || cg_numel(y) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: an operand has more than %u elements; kernels index with 32 bits (split the batch)",
                          name, UINT32_MAX);
    /* the sum each invocation runs */
    uint64_t taps = e->op == VF_OP_CONV2D ? (uint64_t)(KH * KW * Cg)
                  : e->op == VF_OP_CONV2D_BACKPROP_INPUT ? (uint64_t)(KH * KW * (O / at->groups))
                  : (uint64_t)(y->shape[0] * y->shape[1] * y->shape[2]);
    if (taps > cg_loop_budget(caps))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: %llu terms per result element exceed this device's loop budget (%u); use "
                          "smaller filters, groups or batches, or the CPU backend", name, (unsigned long long)taps,
                          cg_loop_budget(caps));

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "%s_f32", name);
    snprintf(g.comment, sizeof g.comment,
             "op %s: f32 NHWC input, HWIO filter; one invocation per result element, a direct sum "
             "(geometry in push constants)", name);
    cg_bind(&g, VF_BIND_IN0, VF_F32, "in0", true, false);
    cg_bind(&g, VF_BIND_IN1, VF_F32, "in1", true, false);
    cg_bind(&g, VF_BIND_OUT, VF_F32, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "N", (uint32_t)x->shape[0]);
    cg_push_u32(&g, "H", (uint32_t)x->shape[1]);
    cg_push_u32(&g, "W", (uint32_t)x->shape[2]);
    cg_push_u32(&g, "C", (uint32_t)C);
    cg_push_u32(&g, "OH", (uint32_t)y->shape[1]);
    cg_push_u32(&g, "OW", (uint32_t)y->shape[2]);
    cg_push_u32(&g, "O", (uint32_t)O);
    cg_push_u32(&g, "KH", (uint32_t)KH);
    cg_push_u32(&g, "KW", (uint32_t)KW);
    cg_push_u32(&g, "Cg", (uint32_t)Cg);
    cg_push_u32(&g, "Og", (uint32_t)(O / at->groups));
    cg_push_i32(&g, "sh", at->stride[0]);
    cg_push_i32(&g, "sw", at->stride[1]);
    cg_push_i32(&g, "dh", at->dilation[0]);
    cg_push_i32(&g, "dw", at->dilation[1]);
    cg_push_i32(&g, "pt", at->pad[0]);
    cg_push_i32(&g, "pl", at->pad[2]);

    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, CONV_LOCAL, false));
    vf_sb_puts(s, "void main()\n{\n"
                  "    uint i = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                  "    if (i >= pc.numel) return;\n");
    vf_sb_puts(s, body);
    vf_sb_puts(s, "    outv[i] = acc;\n}\n");
    cg_groups_linear(&g, (numel + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}
