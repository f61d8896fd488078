/* max_pool2d, avg_pool2d and their gradients (f32, NHWC): one invocation
 * per result element walks a rectangle: a forward its window (clipped to
 * the input), a gradient the outputs whose window holds its element
 * (oh * stride = ih + pad - kh for some kh), so each dx element is
 * written once and no atomics are needed. Window positions in the padding
 * never count (max ignores them, avg divides by the positions inside the
 * input); the argmax is the window's first maximum in row-major order, as
 * on the CPU backend. Max pool's gradient finds each window's argmax in
 * place for small windows, else first in a step of its own (into
 * scratch), then gathers.
 *
 * A rectangle longer than one invocation may loop (llvmpipe's loop limit:
 * cg_loop_budget; a global pool of 256 x 256 is 65536 positions) is split
 * into chunks: one step walks each (element, chunk) into scratch, the next
 * combines the chunks in order, so a window of any size runs. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

#define POOL_LOCAL 256u
#define NONE "0xffffffffu"

/* What one dispatch computes; each walks rectangles of positions. */
typedef enum {
    P_FWD,     /* per output element, its window: the pooled value */
    P_ARG,     /* per output element, its window: the argmax into scratch A */
    P_GRAD,    /* per dx element, the outputs holding it: the gradient */
} pool_walk;

typedef struct {
    bool is_max, grad;
    uint64_t items;        /* result elements of the walk */
    uint64_t len;          /* the longest rectangle */
    uint64_t chunk, nc;    /* nc chunks of chunk positions (nc == 1: one step) */
    bool inline_arg;       /* max pool's gradient: each window's argmax found in place */
} pool_plan;

/* vf_win(oh, ow): the window clipped to the input; vf_cands(ih, iw): the
   outputs whose window holds input position (ih, iw) */
static const char *const pool_helpers =
    "ivec4 vf_win(int oh, int ow)\n"
    "{\n"
    "    int h0 = oh * pc.sh - pc.pt, w0 = ow * pc.sw - pc.pl;\n"
    "    return ivec4(max(h0, 0), min(h0 + int(pc.KH), int(pc.H)), max(w0, 0), min(w0 + int(pc.KW), int(pc.W)));\n"
    "}\n"
    "ivec4 vf_cands(int ih, int iw)\n"
    "{\n"
    "    int a = ih + pc.pt - int(pc.KH) + 1, b = iw + pc.pl - int(pc.KW) + 1;\n"
    "    return ivec4(a <= 0 ? 0 : (a + pc.sh - 1) / pc.sh, min(int(pc.OH), (ih + pc.pt) / pc.sh + 1),\n"
    "                 b <= 0 ? 0 : (b + pc.sw - 1) / pc.sw, min(int(pc.OW), (iw + pc.pl) / pc.sw + 1));\n"
    "}\n";

/* a window's first maximum, found in place by a small max pool gradient */
static const char *const argmax_helper =
    "uint vf_argmax(uint n, ivec4 r, uint c)\n"
    "{\n"
    "    uint best = " NONE ";\n"
    "    float bv = 0.0;\n"
    "    for (int ih = r.x; ih < r.y; ih++)\n"
    "        for (int iw = r.z; iw < r.w; iw++) {\n"
    "            uint xi = ((n * pc.H + uint(ih)) * pc.W + uint(iw)) * pc.C + c;\n"
    "            float v = in0[xi];\n"
    "            if (best == " NONE " || v > bv) { best = xi; bv = v; }\n"
    "        }\n"
    "    return best;\n"
    "}\n";

/* Element e of the walk (an output element, or a dx element) and its
   rectangle r; chunk ch of it is positions [q0, q1) in row-major order. */
static void emit_rect(vf_sb *s, pool_walk w)
{
    if (w == P_GRAD)
        vf_sb_puts(s, "    uint c = e % pc.C, rr = e / pc.C;\n"
                      "    int iw = int(rr % pc.W); rr /= pc.W;\n"
                      "    int ih = int(rr % pc.H);\n"
                      "    uint n = rr / pc.H;\n"
                      "    ivec4 r = vf_cands(ih, iw);\n");
    else
        vf_sb_puts(s, "    uint c = e % pc.C, rr = e / pc.C;\n"
                      "    int ow = int(rr % pc.OW); rr /= pc.OW;\n"
                      "    int oh = int(rr % pc.OH);\n"
                      "    uint n = rr / pc.OH;\n"
                      "    ivec4 r = vf_win(oh, ow);\n");
    vf_sb_puts(s, "    int rw = r.w - r.z;\n"
                  "    uint len = r.y > r.x && rw > 0 ? uint(r.y - r.x) * uint(rw) : 0u;\n"
                  "    uint q0 = ch * pc.CH, q1 = min(len, q0 + pc.CH);\n");
}

/* The walk over [q0, q1): a max keeps the first maximum (a NaN only as the
   window's very first position, as a sequential walk would: chunks after
   the first skip NaNs until they hold a number), sums add in order. */
static void emit_walk(vf_sb *s, pool_walk w, bool is_max, bool inline_arg)
{
    if (w == P_GRAD)
        vf_sb_puts(s, "    float acc = 0.0;\n");
    else if (is_max)
        vf_sb_puts(s, "    uint best = " NONE ";\n    float bv = 0.0;\n");
    else
        vf_sb_puts(s, "    float acc = 0.0;\n");
    vf_sb_puts(s, "    for (uint q = q0; q < q1; q++) {\n"
                  "        int a = r.x + int(q / uint(rw)), b = r.z + int(q % uint(rw));\n");
    if (w == P_GRAD) {
        vf_sb_puts(s, "        uint o = ((n * pc.OH + uint(a)) * pc.OW + uint(b)) * pc.C + c;\n");
        if (is_max && inline_arg) vf_sb_puts(s, "        if (vf_argmax(n, vf_win(a, b), c) == e) acc += in1[o];\n");
        else if (is_max) vf_sb_puts(s, "        if (sc[pc.oA + o] == e) acc += in1[o];\n");
        else vf_sb_puts(s, "        ivec4 w = vf_win(a, b);\n"
                           "        acc += in1[o] / float((w.y - w.x) * (w.w - w.z));\n");
    } else {
        vf_sb_puts(s, "        uint xi = ((n * pc.H + uint(a)) * pc.W + uint(b)) * pc.C + c;\n"
                      "        float v = in0[xi];\n");
        if (is_max) vf_sb_puts(s, "        if (v > bv || (best == " NONE " && (q == 0u || !isnan(v)))) { best = xi; bv = v; }\n");
        else vf_sb_puts(s, "        acc += v;\n");
    }
    vf_sb_puts(s, "    }\n");
}

/* The value of element e from its walk (acc, or best / bv): forward max
   and avg, the argmax, the gradient. */
static void emit_store(vf_sb *s, pool_walk w, bool is_max)
{
    if (w == P_ARG) vf_sb_puts(s, "    sc[pc.oA + e] = best;\n");
    else if (w == P_GRAD) vf_sb_puts(s, "    outv[e] = acc;\n");
    else if (is_max) vf_sb_puts(s, "    outv[e] = best == " NONE " ? 0.0 : bv;\n");
    else vf_sb_puts(s, "    outv[e] = len > 0u ? acc / float(len) : 0.0;\n");
}

/* step: 0 the whole rectangle, 1 chunks into scratch P, 2 P combined */
static vf_status pool_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d,
                           const pool_plan *pl, pool_walk w, int step, uint64_t oA, uint64_t oP)
{
    const char *name = vf_op_get(e->op)->name;
    const vf_tref *x = &e->in[0], *y = pl->grad ? &e->in[1] : &e->out;
    const vf_conv_attrs *a = &e->attrs.conv;
    static const char *const walk_name[3] = {"fwd", "arg", "grad"}, *const step_name[3] = {"", "_part", "_sum"};
    static const char *const what[3] = {"a direct walk of its window", "the window's argmax to scratch",
                                        "gathering dy from the windows that hold it"};
    static const char *const how[3] = {"", "; step 1 of 2: each chunk of the walk to scratch",
                                       "; step 2 of 2: the chunks combined in order"};
    bool need_sc = step != 0 || w == P_ARG || (w == P_GRAD && pl->is_max && !pl->inline_arg);
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    snprintf(g.d->name, sizeof g.d->name, "%s_%s%s_f32", name, walk_name[w], step_name[step]);
    snprintf(g.comment, sizeof g.comment, "op %s: f32 NHWC; one invocation per result element, %s%s", name,
             what[w], how[step]);
    cg_bind(&g, VF_BIND_IN0, VF_F32, "in0", true, false);
    if (pl->grad && w == P_GRAD) cg_bind(&g, VF_BIND_IN1, VF_F32, "in1", true, false);
    if (w != P_ARG && step != 1) cg_bind(&g, VF_BIND_OUT, VF_F32, "outv", false, false);
    if (need_sc) cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", false, false);
    uint64_t items = step == 1 ? pl->items * pl->nc : pl->items;
    cg_push_u32(&g, "numel", (uint32_t)items);
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
    cg_push_u32(&g, "CH", (uint32_t)pl->chunk);
    cg_push_u32(&g, "NC", (uint32_t)pl->nc);
    cg_push_u32(&g, "oA", (uint32_t)oA);
    cg_push_u32(&g, "oP", (uint32_t)oP);
    vf_sb_puts(&g.decl, pool_helpers);
    if (pl->inline_arg) vf_sb_puts(&g.decl, argmax_helper);
    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, POOL_LOCAL, false));
    vf_sb_puts(s, "void main()\n{\n"
                  "    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                  "    if (t >= pc.numel) return;\n");
    bool max_walk = w != P_GRAD && pl->is_max;
    if (step == 0) {
        vf_sb_puts(s, "    uint e = t, ch = 0u;\n");
        emit_rect(s, w);
        emit_walk(s, w, pl->is_max, pl->inline_arg);
        emit_store(s, w, pl->is_max);
    } else if (step == 1) {
        vf_sb_puts(s, "    uint e = t / pc.NC, ch = t % pc.NC;\n");
        emit_rect(s, w);
        emit_walk(s, w, pl->is_max, pl->inline_arg);
        vf_sb_puts(s, max_walk ? "    sc[pc.oP + t] = best;\n" : "    sc[pc.oP + t] = floatBitsToUint(acc);\n");
    } else {
        vf_sb_puts(s, "    uint e = t;\n");
        if (max_walk)
            vf_sb_puts(s, "    uint best = " NONE ";\n    float bv = 0.0;\n"
                          "    for (uint ch = 0u; ch < pc.NC; ch++) {\n"
                          "        uint p = sc[pc.oP + e * pc.NC + ch];\n"
                          "        if (p != " NONE " && (best == " NONE " || in0[p] > bv)) { best = p; bv = in0[p]; }\n"
                          "    }\n");
        else
            vf_sb_puts(s, "    float acc = 0.0;\n"
                          "    for (uint ch = 0u; ch < pc.NC; ch++) acc += uintBitsToFloat(sc[pc.oP + e * pc.NC + ch]);\n");
        if (w == P_FWD && !pl->is_max) {
            /* the mean's divisor: the window's positions inside the input */
            vf_sb_puts(s, "    uint c = e % pc.C, rr = e / pc.C;\n"
                          "    int ow = int(rr % pc.OW); rr /= pc.OW;\n"
                          "    ivec4 r = vf_win(int(rr % pc.OH), ow);\n"
                          "    uint len = r.y > r.x && r.w > r.z ? uint(r.y - r.x) * uint(r.w - r.z) : 0u;\n");
        }
        emit_store(s, w, pl->is_max);
    }
    vf_sb_puts(s, "}\n");
    cg_groups_linear(&g, (items + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}

static uint64_t pool_rounds(const vf_device_caps *caps, uint64_t items)
{
    uint32_t wg = cg_clamp_wg(caps, POOL_LOCAL, false);
    return cg_grid_rounds(caps, (items + wg - 1) / wg);
}

/* Chunks of the walk that keep both steps within the loop budget. */
static vf_status pool_chunks(const vf_exec *e, const vf_device_caps *caps, pool_plan *pl, vf_err *err)
{
    uint64_t budget = cg_loop_budget(caps);
    pl->nc = 1, pl->chunk = pl->len ? pl->len : 1;
    if (pl->len * pool_rounds(caps, pl->items) <= budget) return VF_OK;
    for (int tries = 0; tries < 64; tries++) {
        uint64_t r = pool_rounds(caps, pl->items * pl->nc), per = budget / r;
        if (per && (pl->len + pl->nc - 1) / pl->nc <= per && pl->nc * pool_rounds(caps, pl->items) <= budget &&
            pl->nc > 1) {
            pl->chunk = (pl->len + pl->nc - 1) / pl->nc;
            pl->nc = (pl->len + pl->chunk - 1) / pl->chunk;
            return VF_OK;
        }
        uint64_t want = per ? (pl->len + per - 1) / per : pl->nc * 2;
        pl->nc = want > pl->nc ? want : pl->nc + 1;
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                      "%s: walks of %llu positions for %llu elements need more loop iterations per invocation than "
                      "this device allows (%u) even in chunks; use a smaller window or batch, or the CPU backend",
                      vf_op_get(e->op)->name, (unsigned long long)pl->len, (unsigned long long)pl->items,
                      caps->max_loop_iterations);
}

/* Steps of one walk: the whole rectangle, or chunks then their sum. */
static vf_status pool_walk_steps(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_gen_kernel *k,
                                 const pool_plan *pl, pool_walk w, uint64_t oA, uint64_t oP)
{
    if (pl->nc == 1) return pool_step(e, caps, err, &k->step[k->n_steps++], pl, w, 0, oA, oP);
    vf_status st = pool_step(e, caps, err, &k->step[k->n_steps++], pl, w, 1, oA, oP);
    return st ? st : pool_step(e, caps, err, &k->step[k->n_steps++], pl, w, 2, oA, oP);
}

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

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
    uint64_t ny = (uint64_t)cg_numel(y), nx = (uint64_t)cg_numel(x);
    /* the forward's (or the argmax's) walk: windows; the gradient's: the
       outputs holding a position, ceil(window / stride) per dim at most */
    pool_plan fw = {.is_max = is_max, .grad = grad, .items = ny,
                    .len = (uint64_t)a->size[0] * (uint64_t)a->size[1]};
    pool_plan gw = {.is_max = is_max, .grad = true, .items = nx,
                    .len = min_u64(((uint64_t)a->size[0] + a->stride[0] - 1) / a->stride[0], (uint64_t)y->shape[1]) *
                           min_u64(((uint64_t)a->size[1] + a->stride[1] - 1) / a->stride[1], (uint64_t)y->shape[2])};
    /* the work bound: every walk's steps together must end well within
       the fence timeout */
    double work = (!grad || is_max ? (double)fw.items * (double)fw.len : 0.0) +
                  (grad ? (double)gw.items * (double)gw.len : 0.0);
    if (work > cg_work_max(caps)) return cg_work_refused(caps, name, "window steps", work, y->shape[0], err);
    vf_status st = VF_OK;
    if (!grad || is_max) st = pool_chunks(e, caps, &fw, err);
    if (!st && grad) st = pool_chunks(e, caps, &gw, err);
    if (st) return st;
    /* a small max pool gradient (a 2 x 2 or 3 x 3 window: at most 256
       window positions over the windows holding an element) finds each
       argmax in place, one dispatch; larger ones find them first */
    gw.inline_arg = grad && is_max && fw.nc == 1 && gw.nc == 1 && fw.len * gw.len <= 256 &&
                    fw.len * gw.len * pool_rounds(caps, nx) <= cg_loop_budget(caps);
    if (gw.inline_arg) {
        k->n_steps = 0;
        k->scratch_bytes = 0;
        return pool_walk_steps(e, caps, err, k, &gw, P_GRAD, 0, 0);
    }
    /* scratch: the argmax A[ny] (max pool's gradient), then the chunks of
       the walk that has them */
    uint64_t oA = 0, oP = grad && is_max ? ny : 0;
    uint64_t words = oP + (fw.nc > 1 && (!grad || is_max) ? ny * fw.nc : 0);
    uint64_t oP2 = words;
    if (grad && gw.nc > 1) words += nx * gw.nc;
    if (words > UINT32_MAX || ny * fw.nc > UINT32_MAX || nx * gw.nc > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: the window's chunks need %llu words of scratch; kernels index with 32 bits (split "
                          "the batch)", name, (unsigned long long)words);
    k->n_steps = 0;
    k->scratch_bytes = (size_t)words * 4;
    if (!grad) return pool_walk_steps(e, caps, err, k, &fw, P_FWD, oA, oP);
    if (is_max && (st = pool_walk_steps(e, caps, err, k, &fw, P_ARG, oA, oP))) return st;
    return pool_walk_steps(e, caps, err, k, &gw, P_GRAD, oA, oP2);
}
