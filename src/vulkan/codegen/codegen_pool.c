/* max_pool2d, avg_pool2d and their gradients (f32, NHWC): direct kernels,
 * one invocation per result element. Window positions in the padding never
 * count (max ignores them, avg divides by the positions inside the input);
 * the argmax is the window's first maximum in row-major order, as on the
 * CPU backend. The gradients gather: each dx element visits the outputs
 * whose window holds it (oh * stride = ih + pad - kh when that divides),
 * so each is written once and no atomics are needed. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

#define POOL_LOCAL 256u

/* vf_win(n, oh, ow, c): the window clipped to the input, and for max its
   first argmax (as the input's flat index) */
static const char *const pool_helpers =
    "ivec4 vf_win(int oh, int ow)\n"
    "{\n"
    "    int h0 = oh * pc.sh - pc.pt, w0 = ow * pc.sw - pc.pl;\n"
    "    return ivec4(max(h0, 0), min(h0 + int(pc.KH), int(pc.H)), max(w0, 0), min(w0 + int(pc.KW), int(pc.W)));\n"
    "}\n"
    "uint vf_argmax(uint n, ivec4 r, uint c)\n"
    "{\n"
    "    uint best = 0xffffffffu;\n"
    "    float bv = 0.0;\n"
    "    for (int ih = r.x; ih < r.y; ih++)\n"
    "        for (int iw = r.z; iw < r.w; iw++) {\n"
    "            uint xi = ((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c;\n"
    "            float v = in0[xi];\n"
    "            if (best == 0xffffffffu || v > bv) { best = xi; bv = v; }\n"
    "        }\n"
    "    return best;\n"
    "}\n";

static const char *const fwd_main =
    "    uint c = i % pc.C, r = i / pc.C;\n"
    "    int ow = int(r % pc.OW); r /= pc.OW;\n"
    "    int oh = int(r % pc.OH);\n"
    "    uint n = r / pc.OH;\n"
    "    ivec4 w = vf_win(oh, ow);\n"
    "    float acc = 0.0;\n"
    "#if VF_POOL_MAX\n"
    "    uint b = vf_argmax(n, w, c);\n"
    "    if (b != 0xffffffffu) acc = in0[b];\n"
    "#else\n"
    "    for (int ih = w.x; ih < w.y; ih++)\n"
    "        for (int iw = w.z; iw < w.w; iw++) acc += in0[((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c];\n"
    "    int count = (w.y - w.x) * (w.w - w.z);\n"
    "    if (count > 0) acc /= float(count);\n"
    "#endif\n";

static const char *const grad_main =
    "    uint c = i % pc.C, r = i / pc.C;\n"
    "    int iw = int(r % pc.W); r /= pc.W;\n"
    "    int ih = int(r % pc.H);\n"
    "    uint n = r / pc.H;\n"
    "    float acc = 0.0;\n"
    "    for (uint kh = 0u; kh < pc.KH; kh++) {\n"
    "        int th = ih + pc.pt - int(kh);\n"
    "        if (th < 0 || th % pc.sh != 0 || th / pc.sh >= int(pc.OH)) continue;\n"
    "        for (uint kw = 0u; kw < pc.KW; kw++) {\n"
    "            int tw = iw + pc.pl - int(kw);\n"
    "            if (tw < 0 || tw % pc.sw != 0 || tw / pc.sw >= int(pc.OW)) continue;\n"
    "            int oh = th / pc.sh, ow = tw / pc.sw;\n"
    "            float dy = in1[((n * pc.OH + uint(oh)) * pc.OW + uint(ow)) * pc.C + c];\n"
    "            ivec4 w = vf_win(oh, ow);\n"
    "#if VF_POOL_MAX\n"
    "            if (vf_argmax(n, w, c) == i) acc += dy;\n"
    "#else\n"
    "            acc += dy / float((w.y - w.x) * (w.w - w.z));\n"
    "#endif\n"
    "        }\n"
    "    }\n";

vf_status vf_codegen_pool(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const char *name = vf_op_get(e->op)->name;
    bool grad = e->op == VF_OP_MAX_POOL2D_GRAD || e->op == VF_OP_AVG_POOL2D_GRAD;
    bool is_max = e->op == VF_OP_MAX_POOL2D || e->op == VF_OP_MAX_POOL2D_GRAD;
    const vf_tref *x = &e->in[0], *y = grad ? &e->in[1] : &e->out;
    if (e->n_in != (grad ? 2 : 1) || x->rank != 4 || y->rank != 4 || x->dtype != VF_F32 || y->dtype != VF_F32 ||
        e->out.dtype != VF_F32)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: takes f32 NHWC tensors (cast to f32 first)", name);
    const vf_conv_attrs *a = &e->attrs.conv;
    if (cg_numel(x) > (int64_t)UINT32_MAX || cg_numel(y) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: an operand has more than %u elements; kernels index with 32 bits (split the batch)",
                          name, UINT32_MAX);
    uint64_t win = (uint64_t)a->size[0] * (uint64_t)a->size[1];
    uint64_t loops = grad && is_max ? win * win : win;
    if (loops > cg_loop_budget(caps))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: a %d x %d window needs %llu loop iterations, past this "
                          "device's loop budget (%u); use a smaller window or the CPU backend", name, a->size[0],
                          a->size[1], (unsigned long long)loops, cg_loop_budget(caps));

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "%s_f32", name);
    snprintf(g.comment, sizeof g.comment, "op %s: f32 NHWC; one invocation per result element, %s", name,
             grad ? "gathering dy from the windows that hold it" : "a direct walk of its window");
    cg_bind(&g, VF_BIND_IN0, VF_F32, "in0", true, false);
    if (grad) cg_bind(&g, VF_BIND_IN1, VF_F32, "in1", true, false);
    cg_bind(&g, VF_BIND_OUT, VF_F32, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "H", (uint32_t)x->shape[1]);
    cg_push_u32(&g, "W", (uint32_t)x->shape[2]);
    cg_push_u32(&g, "C", (uint32_t)x->shape[3]);
    cg_push_u32(&g, "OH", (uint32_t)y->shape[1]);
    cg_push_u32(&g, "OW", (uint32_t)y->shape[2]);
    cg_push_u32(&g, "KH", (uint32_t)a->size[0]);
    cg_push_u32(&g, "KW", (uint32_t)a->size[1]);
    cg_push_i32(&g, "sh", a->stride[0]);
    cg_push_i32(&g, "sw", a->stride[1]);
    cg_push_i32(&g, "pt", a->pad[0]);
    cg_push_i32(&g, "pl", a->pad[2]);

    vf_sb_add(&g.decl, "#define VF_POOL_MAX %d\n", is_max ? 1 : 0);
    vf_sb_puts(&g.decl, pool_helpers);
    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, POOL_LOCAL, false));
    vf_sb_puts(s, "void main()\n{\n"
                  "    uint i = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                  "    if (i >= pc.numel) return;\n");
    vf_sb_puts(s, grad ? grad_main : fwd_main);
    vf_sb_puts(s, "    outv[i] = acc;\n}\n");
    cg_groups_linear(&g, (numel + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}
