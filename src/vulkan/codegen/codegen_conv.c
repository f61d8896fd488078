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
 * by the device's loop budget. When a group's output channels come in
 * fours the forward kernel is blocked instead (conv4_main: 4 channels x 4
 * pixels per invocation), and so are the input gradient (4 channels x 4
 * pixels of dx) and the filter gradient (4 x 4 channels of dw) when their
 * channels allow.
 *
 * The forward kernel takes an epilogue (codegen_conv.h: fused conv groups,
 * codegen_conv_fused.c). The filter gradient sums over N * OH * OW terms,
 * which grows with the batch: past the loop budget, or when dw has too few
 * elements to keep the device busy, it is two steps (a split reduction):
 * step 1 sums chunks of the (n, oh, ow) range into scratch, one invocation
 * per (chunk, dw element), step 2 adds each element's chunks in order, so
 * any batch runs and the result does not depend on scheduling. */
#include "vulkan/codegen/codegen_conv.h"
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

/* The forward kernel blocked when a group's output channels come in
   fours: one invocation per 4 channels x 4 pixels along a row (16 sums).
   Per input channel it loads 4 inputs and 4 filter values for 16
   multiply-adds instead of 2 loads per multiply-add: on llvmpipe each
   load is a scalar loop over the lanes and dominates (docs/BENCHMARKS.md).
   A pixel past the row's end or a tap in the padding adds nothing (its
   load reads a valid element that is not used). */
static const char *const conv4_main =
    "    uint o0 = (i % pc.Ob) * 4u, r = i / pc.Ob;\n"
    "    uint owb = r % pc.OWb; r /= pc.OWb;\n"
    "    int oh = int(r % pc.OH);\n"
    "    uint n = r / pc.OH;\n"
    "    int ow0 = int(owb * 4u);\n"
    "    uint c0 = (o0 / pc.Og) * pc.Cg;   // the group's first input channel\n"
    "    vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);\n"
    "    for (uint kh = 0u; kh < pc.KH; kh++) {\n"
    "        int ih = oh * pc.sh + int(kh) * pc.dh - pc.pt;\n"
    "        if (ih < 0 || ih >= int(pc.H)) continue;   // padding reads 0\n"
    "        uint rowb = (n * pc.H + uint(ih)) * pc.W;\n"
    "        for (uint kw = 0u; kw < pc.KW; kw++) {\n"
    "            int iw = ow0 * pc.sw + int(kw) * pc.dw - pc.pl;\n"
    "            bvec4 ok;\n"
    "            uvec4 xb;\n"
    "            for (int p = 0; p < 4; p++) {\n"
    "                int q = iw + p * pc.sw;\n"
    "                ok[p] = q >= 0 && q < int(pc.W) && ow0 + p < int(pc.OW);\n"
    "                xb[p] = ok[p] ? (rowb + uint(q)) * pc.C + c0 : c0;\n"
    "            }\n"
    "            uint wb = ((kh * pc.KW + kw) * pc.Cg) * pc.O + o0;\n"
    "            for (uint c = 0u; c < pc.Cg; c++) {\n"
    "                uint wi = wb + c * pc.O;\n"
    "                vec4 wv = vec4(in1[wi], in1[wi + 1u], in1[wi + 2u], in1[wi + 3u]);\n"
    "                a0 += ok.x ? in0[xb.x + c] * wv : vec4(0.0);\n"
    "                a1 += ok.y ? in0[xb.y + c] * wv : vec4(0.0);\n"
    "                a2 += ok.z ? in0[xb.z + c] * wv : vec4(0.0);\n"
    "                a3 += ok.w ? in0[xb.w + c] * wv : vec4(0.0);\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "    vec4 acc4[4] = vec4[4](a0, a1, a2, a3);\n"
    "    for (uint p = 0u; p < 4u; p++) {\n"
    "        uint ow = uint(ow0) + p;\n"
    "        if (ow >= pc.OW) break;\n"
    "        uint yi = ((n * pc.OH + uint(oh)) * pc.OW + ow) * pc.O + o0;\n";

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

/* The input gradient blocked when a group's input channels come in fours:
   one invocation per 4 channels x 4 pixels of a row of dx, 8 loads per 16
   multiply-adds (as conv4_main). A pixel past the row's end, or one that
   no output reads through this tap, adds nothing. */
static const char *const bpi4_main =
    "    uint c0 = (i % pc.Cq) * 4u, r = i / pc.Cq;\n"
    "    uint iwb = r % pc.Wb; r /= pc.Wb;\n"
    "    int ih = int(r % pc.H);\n"
    "    uint n = r / pc.H;\n"
    "    int iw0 = int(iwb * 4u);\n"
    "    uint cc0 = c0 % pc.Cg, o0 = (c0 / pc.Cg) * pc.Og;\n"
    "    vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);\n"
    "    for (uint kh = 0u; kh < pc.KH; kh++) {\n"
    "        int th = ih + pc.pt - int(kh) * pc.dh;\n"
    "        if (th < 0 || th % pc.sh != 0 || th / pc.sh >= int(pc.OH)) continue;\n"
    "        uint rowb = (n * pc.OH + uint(th / pc.sh)) * pc.OW;\n"
    "        for (uint kw = 0u; kw < pc.KW; kw++) {\n"
    "            bvec4 ok;\n"
    "            uvec4 yb;\n"
    "            for (int p = 0; p < 4; p++) {\n"
    "                int tw = iw0 + p + pc.pl - int(kw) * pc.dw;\n"
    "                ok[p] = tw >= 0 && iw0 + p < int(pc.W) && tw % pc.sw == 0 && tw / pc.sw < int(pc.OW);\n"
    "                yb[p] = ok[p] ? (rowb + uint(tw / pc.sw)) * pc.O + o0 : o0;\n"
    "            }\n"
    "            uint wb = ((kh * pc.KW + kw) * pc.Cg + cc0) * pc.O + o0;\n"
    "            for (uint k = 0u; k < pc.Og; k++) {\n"
    "                uint wi = wb + k;\n"
    "                vec4 wv = vec4(in1[wi], in1[wi + pc.O], in1[wi + 2u * pc.O], in1[wi + 3u * pc.O]);\n"
    "                a0 += ok.x ? in0[yb.x + k] * wv : vec4(0.0);\n"
    "                a1 += ok.y ? in0[yb.y + k] * wv : vec4(0.0);\n"
    "                a2 += ok.z ? in0[yb.z + k] * wv : vec4(0.0);\n"
    "                a3 += ok.w ? in0[yb.w + k] * wv : vec4(0.0);\n"
    "            }\n"
    "        }\n"
    "    }\n"
    "    vec4 acc4[4] = vec4[4](a0, a1, a2, a3);\n"
    "    for (uint p = 0u; p < 4u; p++) {\n"
    "        uint iw = uint(iw0) + p;\n"
    "        if (iw >= pc.W) break;\n"
    "        uint xi = ((n * pc.H + uint(ih)) * pc.W + iw) * pc.C + c0;\n"
    "        for (uint q = 0u; q < 4u; q++) outv[xi + q] = acc4[p][q];\n"
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

/* Step 1 of the split filter gradient: invocation i = part * numel + e
   sums dw element e over output pixels [part * chunk, + chunk) of the flat
   (n, oh, ow) range (one loop, its counters stepped, not divided). */
static const char *const bpf_part_main =
    "    uint part = i / pc.numel; i %= pc.numel;\n"
    "    uint o = i % pc.O, r = i / pc.O;\n"
    "    uint cc = r % pc.Cg; r /= pc.Cg;\n"
    "    uint kw = r % pc.KW, kh = r / pc.KW;\n"
    "    uint c = (o / pc.Og) * pc.Cg + cc;\n"
    "    uint j0 = part * pc.chunk, j1 = min(j0 + pc.chunk, pc.N * pc.OH * pc.OW);\n"
    "    uint ow = j0 % pc.OW, oh = (j0 / pc.OW) % pc.OH, n = j0 / (pc.OW * pc.OH);\n"
    "    float acc = 0.0;\n"
    "    for (uint j = j0; j < j1; j++) {\n"
    "        int ih = int(oh) * pc.sh + int(kh) * pc.dh - pc.pt;\n"
    "        int iw = int(ow) * pc.sw + int(kw) * pc.dw - pc.pl;\n"
    "        if (ih >= 0 && ih < int(pc.H) && iw >= 0 && iw < int(pc.W))\n"
    "            acc += in0[((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c] * in1[j * pc.O + o];\n"
    "        if (++ow == pc.OW) { ow = 0u; if (++oh == pc.OH) { oh = 0u; n++; } }\n"
    "    }\n"
    "    scratch[part * pc.numel + i] = floatBitsToUint(acc);\n";

/* Step 1 blocked, when a group's input and output channels both come in
   fours: invocation i = part * nb + b sums the 4 x 4 dw elements of block
   b (4 input channels x 4 output channels of one tap): per term 4 input
   and 4 dy loads for 16 multiply-adds instead of 32 loads (as conv4_main). */
static const char *const bpf4_part_main =
    "    uint part = i / pc.nb; i %= pc.nb;\n"
    "    uint o0 = (i % pc.Ob) * 4u, r = i / pc.Ob;\n"
    "    uint cc0 = (r % pc.Cb) * 4u; r /= pc.Cb;\n"
    "    uint kw = r % pc.KW, kh = r / pc.KW;\n"
    "    uint c = (o0 / pc.Og) * pc.Cg + cc0;\n"
    "    uint j0 = part * pc.chunk, j1 = min(j0 + pc.chunk, pc.N * pc.OH * pc.OW);\n"
    "    uint ow = j0 % pc.OW, oh = (j0 / pc.OW) % pc.OH, n = j0 / (pc.OW * pc.OH);\n"
    "    vec4 a0 = vec4(0.0), a1 = vec4(0.0), a2 = vec4(0.0), a3 = vec4(0.0);\n"
    "    for (uint j = j0; j < j1; j++) {\n"
    "        int ih = int(oh) * pc.sh + int(kh) * pc.dh - pc.pt;\n"
    "        int iw = int(ow) * pc.sw + int(kw) * pc.dw - pc.pl;\n"
    "        if (ih >= 0 && ih < int(pc.H) && iw >= 0 && iw < int(pc.W)) {\n"
    "            uint xi = ((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c, gi = j * pc.O + o0;\n"
    "            vec4 g = vec4(in1[gi], in1[gi + 1u], in1[gi + 2u], in1[gi + 3u]);\n"
    "            a0 += in0[xi] * g;\n"
    "            a1 += in0[xi + 1u] * g;\n"
    "            a2 += in0[xi + 2u] * g;\n"
    "            a3 += in0[xi + 3u] * g;\n"
    "        }\n"
    "        if (++ow == pc.OW) { ow = 0u; if (++oh == pc.OH) { oh = 0u; n++; } }\n"
    "    }\n"
    "    vec4 acc4[4] = vec4[4](a0, a1, a2, a3);\n"
    "    uint sb = part * pc.numel + ((kh * pc.KW + kw) * pc.Cg + cc0) * pc.O + o0;\n"
    "    for (uint q = 0u; q < 4u; q++)\n"
    "        for (uint p = 0u; p < 4u; p++) scratch[sb + q * pc.O + p] = floatBitsToUint(acc4[q][p]);\n";

/* Step 2: each dw element's chunks, added in chunk order. */
static const char *const bpf_sum_main =
    "    float acc = 0.0;\n"
    "    for (uint p = 0u; p < pc.parts; p++) acc += uintBitsToFloat(scratch[p * pc.numel + i]);\n"
    "    outv[i] = acc;\n";

/* The geometry every conv kernel reads: x, w, y the forward's tensors. */
static void push_geometry(vf_cg *g, const vf_tref *x, const vf_tref *w, const vf_tref *y, const vf_conv_attrs *at,
                          uint32_t numel)
{
    cg_push_u32(g, "numel", numel);
    cg_push_u32(g, "N", (uint32_t)x->shape[0]);
    cg_push_u32(g, "H", (uint32_t)x->shape[1]);
    cg_push_u32(g, "W", (uint32_t)x->shape[2]);
    cg_push_u32(g, "C", (uint32_t)x->shape[3]);
    cg_push_u32(g, "OH", (uint32_t)y->shape[1]);
    cg_push_u32(g, "OW", (uint32_t)y->shape[2]);
    cg_push_u32(g, "O", (uint32_t)w->shape[3]);
    cg_push_u32(g, "KH", (uint32_t)w->shape[0]);
    cg_push_u32(g, "KW", (uint32_t)w->shape[1]);
    cg_push_u32(g, "Cg", (uint32_t)w->shape[2]);
    cg_push_u32(g, "Og", (uint32_t)(w->shape[3] / at->groups));
    cg_push_i32(g, "sh", at->stride[0]);
    cg_push_i32(g, "sw", at->stride[1]);
    cg_push_i32(g, "dh", at->dilation[0]);
    cg_push_i32(g, "dw", at->dilation[1]);
    cg_push_i32(g, "pt", at->pad[0]);
    cg_push_i32(g, "pl", at->pad[2]);
}

enum { STEP_ONE, STEP_PART, STEP_SUM };

/* One dispatch of e: `invocations` of body, which leaves acc (STEP_ONE:
   stored, or handed to the epilogue) or stores itself. */
static vf_status gen_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d, int step,
                          const char *body, const vf_tref *x, const vf_tref *w, const vf_tref *y, uint64_t invocations,
                          uint32_t parts, uint32_t chunk, const cg_conv_epilogue *epi, bool blocked)
{
    const char *name = vf_op_get(e->op)->name;
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    const char *suffix = step == STEP_PART ? "_part" : step == STEP_SUM ? "_sum" : "";
    if (epi) snprintf(g.d->name, sizeof g.d->name, "%s_%s_f32%s", epi->tag, name, blocked ? "_b4x4" : "");
    else snprintf(g.d->name, sizeof g.d->name, "%s_f32%s%s", name, suffix, blocked ? "_b4x4" : "");
    snprintf(g.comment, sizeof g.comment,
             "op %s: f32 NHWC input, HWIO filter; %s (geometry in push constants)%s%s", name,
             step == STEP_PART ? (blocked ? "step 1 of 2: one invocation per (chunk of N*OH*OW, 4x4 block of dw "
                                            "(input x output channels)), partial sums -> scratch"
                                          : "step 1 of 2: one invocation per (chunk of N*OH*OW, dw element), "
                                            "partial sums -> scratch")
             : step == STEP_SUM ? "step 2 of 2: one invocation per dw element, its chunks (scratch) added in order"
                : blocked ? "one invocation per 4 channels x 4 pixels of a row, direct sums"
                                : "one invocation per result element, a direct sum",
             epi ? "; " : "", epi ? epi->what : "");
    if (epi) {
        vf_status st = epi->bind(&g, epi->user);
        if (st) {
            cg_abort(&g);
            return st;
        }
    } else {
        if (step != STEP_SUM) {
            cg_bind(&g, VF_BIND_IN0, VF_F32, "in0", true, false);
            cg_bind(&g, VF_BIND_IN1, VF_F32, "in1", true, false);
        }
        if (step != STEP_ONE) cg_bind(&g, VF_BIND_SCRATCH, -1, "scratch", step == STEP_SUM, false);
        if (step != STEP_PART) cg_bind(&g, VF_BIND_OUT, VF_F32, "outv", false, false);
    }
    push_geometry(&g, x, w, y, &e->attrs.conv, (uint32_t)cg_numel(&e->out));
    if (step == STEP_PART) cg_push_u32(&g, "chunk", chunk);
    if (step != STEP_ONE) cg_push_u32(&g, "parts", parts);
    if (blocked && e->op == VF_OP_CONV2D_BACKPROP_INPUT) {
        cg_push_u32(&g, "Cq", (uint32_t)(x->shape[3] / 4));
        cg_push_u32(&g, "Wb", (uint32_t)((x->shape[2] + 3) / 4));
        cg_push_u32(&g, "nblk", (uint32_t)invocations);
    } else if (blocked && step == STEP_ONE) {
        cg_push_u32(&g, "Ob", (uint32_t)(w->shape[3] / 4));
        cg_push_u32(&g, "OWb", (uint32_t)((y->shape[2] + 3) / 4));
        cg_push_u32(&g, "nblk", (uint32_t)invocations);
    } else if (blocked) {
        cg_push_u32(&g, "Ob", (uint32_t)(w->shape[3] / 4));
        cg_push_u32(&g, "Cb", (uint32_t)(w->shape[2] / 4));
        cg_push_u32(&g, "nb", (uint32_t)(invocations / parts));
    }
    if (epi) {
        vf_status st = epi->emit(&g, epi->user);
        if (st) {
            cg_abort(&g);
            return st;
        }
    }
    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, CONV_LOCAL, false));
    vf_sb_add(s, "void main()\n{\n"
                 "    uint i = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                 "    if (i >= %s) return;\n",
              step == STEP_PART ? (blocked ? "pc.nb * pc.parts" : "pc.numel * pc.parts")
              : blocked ? "pc.nblk" : "pc.numel");
    vf_sb_puts(s, body);
    if (blocked && e->op == VF_OP_CONV2D_BACKPROP_INPUT) vf_sb_puts(s, "}\n");   /* it stores itself */
    else if (blocked && step == STEP_ONE)   /* the body ends inside the loop over its valid pixels */
        vf_sb_puts(s, epi ? "        for (uint q = 0u; q < 4u; q++) epi(yi + q, n, uint(oh), ow, o0 + q, acc4[p][q]);\n"
                            "    }\n}\n"
                          : "        for (uint q = 0u; q < 4u; q++) outv[yi + q] = acc4[p][q];\n    }\n}\n");
    else if (step == STEP_ONE)
        vf_sb_puts(s, epi ? "    epi(i, n, uint(oh), uint(ow), o, acc);\n}\n" : "    outv[i] = acc;\n}\n");
    else vf_sb_puts(s, "}\n");
    cg_groups_linear(&g, (invocations + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}

vf_status cg_conv2d(const vf_exec *e, const vf_device_caps *caps, const cg_conv_epilogue *epi, vf_gen_kernel *k,
                    vf_err *err)
{
    const char *name = vf_op_get(e->op)->name;
    const vf_tref *a = &e->in[0], *b = &e->in[1], *out = &e->out;
    if (e->n_in != 2 || a->rank != 4 || b->rank != 4 || out->rank != 4 || a->dtype != VF_F32 ||
        b->dtype != VF_F32 || out->dtype != VF_F32)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: takes f32 NHWC input, HWIO filter and output (cast to f32 first)", name);
    if (epi && e->op != VF_OP_CONV2D)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "%s: only conv2d takes an epilogue", name);
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
    /* the work bound: one op's multiply-adds (the forward's, which each
       gradient repeats) must end well within the fence timeout */
    double macs = (double)cg_numel(y) * (double)(KH * KW * Cg);
    if (macs > cg_work_max(caps)) return cg_work_refused(caps, name, "multiply-adds", macs, y->shape[0], err);
    uint64_t budget = cg_loop_budget(caps), numel = (uint64_t)cg_numel(out);
    if (e->op == VF_OP_CONV2D_BACKPROP_FILTER) {
        /* N * OH * OW terms per dw element: split into chunks when they
           exceed the loop budget, or when dw alone is too few invocations
           to fill the device (a small filter, a big batch) */
        uint64_t total = (uint64_t)(y->shape[0] * y->shape[1] * y->shape[2]);
        uint64_t target = caps->is_cpu ? 1024 : 16384, min_chunk = 64;
        /* 4x4 blocks (bpf4_part_main) when channels allow: always two steps */
        bool blocked = Cg % 4 == 0 && (O / at->groups) % 4 == 0;
        uint64_t inv = blocked ? numel / 16 : numel;   /* invocations per chunk */
        uint64_t parts = (total + budget - 1) / budget;
        if (inv && inv < target && total >= 2 * min_chunk) {
            uint64_t fill = (target + inv - 1) / inv, most = total / min_chunk;
            if (fill > most) fill = most;
            if (parts < fill) parts = fill;
        }
        if (parts < 1) parts = 1;
        if ((parts >= 2 || blocked) && numel) {
            uint64_t chunk = (total + parts - 1) / parts;
            parts = (total + chunk - 1) / chunk;
            if (parts > budget || numel * parts > UINT32_MAX)
                return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                                  "%s: %llu terms per filter element need %llu chunks; this device ends loops "
                                  "after %u iterations, so at most %llu terms (split the batch, or use the CPU "
                                  "backend)", name, (unsigned long long)total, (unsigned long long)parts,
                                  (unsigned)budget, (unsigned long long)budget * budget);
            k->n_steps = 2;
            k->scratch_bytes = (size_t)(numel * parts * 4);
            vf_status st = gen_step(e, caps, err, &k->step[0], STEP_PART, blocked ? bpf4_part_main : bpf_part_main, x,
                                    w, y, inv * parts, (uint32_t)parts, (uint32_t)chunk, NULL, blocked);
            if (st) return st;
            return gen_step(e, caps, err, &k->step[1], STEP_SUM, bpf_sum_main, x, w, y, numel, (uint32_t)parts, 0,
                            NULL, false);
        }
    } else {
        /* the sum each invocation runs */
        uint64_t taps = e->op == VF_OP_CONV2D ? (uint64_t)(KH * KW * Cg) : (uint64_t)(KH * KW * (O / at->groups));
        if (taps > budget)
            return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                              "%s: %llu terms per result element exceed this device's loop budget (%u); use "
                              "smaller filters or groups, or the CPU backend", name, (unsigned long long)taps,
                              (unsigned)budget);
    }
    k->n_steps = 1;
    if (e->op == VF_OP_CONV2D && (O / at->groups) % 4 == 0) {
        uint64_t blocks = (uint64_t)(y->shape[0] * y->shape[1] * ((y->shape[2] + 3) / 4) * (O / 4));
        return gen_step(e, caps, err, &k->step[0], STEP_ONE, conv4_main, x, w, y, blocks, 1, 0, epi, true);
    }
    if (e->op == VF_OP_CONV2D_BACKPROP_INPUT && Cg % 4 == 0) {
        uint64_t blocks = (uint64_t)(x->shape[0] * x->shape[1] * ((x->shape[2] + 3) / 4) * (C / 4));
        return gen_step(e, caps, err, &k->step[0], STEP_ONE, bpi4_main, x, w, y, blocks, 1, 0, NULL, true);
    }
    return gen_step(e, caps, err, &k->step[0], STEP_ONE, body, x, w, y, numel, 1, 0, epi, false);
}

vf_status vf_codegen_conv2d(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    return cg_conv2d(e, caps, NULL, k, err);
}
