/* Reductions (sum, mean, max, min, norm, prod, any, all, logsumexp over
 * attrs.axes_mask) and ARGMAX
 * (along attrs.axis), instantiating shaders/reduce.glsl.
 *
 * The input is collapsed into alternating kept / reduced dim groups (size-1
 * dims dropped). Offsets of output o and reduced element r are generated
 * from that pattern; sizes are push constants. Modes:
 *  - ROW: the innermost group is reduced and long enough: a workgroup per
 *    output. On lavapipe the workgroup is one subgroup (8 lanes) combined
 *    with subgroup ops and no barrier; on GPUs 256 invocations, subgroup
 *    ops and a little shared memory (a shared-memory tree without subgroup
 *    arithmetic).
 *  - COL: the innermost group is kept (or rows are short): a thread per
 *    output looping over its reduced elements; neighbouring threads read
 *    neighbouring memory.
 *  - two steps: few outputs with long rows (reduce-all of a big tensor),
 *    or any output whose loop would pass the device's loop budget
 *    (cg_loop_budget: llvmpipe stops loops silently): step 1 reduces
 *    chunks of every output into a scratch buffer, step 2 reduces each
 *    output's chunk results. Rows and columns alike.
 * max / min / argmax reduce order-preserving uint keys (prelude vf_key_*),
 * so NaN propagates (and is argmax's maximum) and one code path serves
 * every dtype; argmax keeps (key, index) and resolves ties to the lowest
 * index. Integer sums and products wrap; any / all are max / min of the
 * bool values. logsumexp accumulates (max m, sum of exp(x - m)) pairs,
 * rescaled to the larger max when two combine: one pass, no overflow.
 *
 * Float sum tolerance: each invocation adds about R / WG elements in order,
 * then partials combine as a tree, so the error is bounded by roughly
 * (R / WG + log2 WG) * 2^-24 * sum|x| — with two steps R is the chunk
 * length. Tests should allow a relative 1e-5 * sqrt(R)-ish margin.
 */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    int nd;
    uint64_t size[VF_MAX_RANK];
    bool red[VF_MAX_RANK];
    uint64_t n_out, n_red;
} red_pattern;

static void collapse(const vf_tref *in, uint32_t mask, red_pattern *p)
{
    memset(p, 0, sizeof *p);
    p->n_out = p->n_red = 1;
    for (int d = 0; d < in->rank; d++) {
        uint64_t n = (uint64_t)in->shape[d];
        if (n == 1) continue;
        bool r = (mask >> d) & 1u;
        if (r) p->n_red *= n;
        else p->n_out *= n;
        if (p->nd > 0 && p->red[p->nd - 1] == r) {
            p->size[p->nd - 1] *= n;
        } else {
            p->size[p->nd] = n;
            p->red[p->nd] = r;
            p->nd++;
        }
    }
}

/* stride of collapsed dim j: product of the sizes after it */
static void stride_expr(vf_sb *s, const red_pattern *p, int j)
{
    if (j == p->nd - 1) {
        vf_sb_puts(s, "1u");
        return;
    }
    for (int t = j + 1; t < p->nd; t++) vf_sb_add(s, "%spc.d%d", t > j + 1 ? " * " : "", t);
}

/* uint name(uint x): offset of linear index x over the kept (red=false) or
   reduced (red=true) dims */
static void emit_offset_fn(vf_sb *s, const char *name, const red_pattern *p, bool red)
{
    vf_sb_add(s, "uint %s(uint x)\n{\n    uint off = 0u;\n", name);
    int first = -1;
    for (int j = 0; j < p->nd; j++)
        if (p->red[j] == red) {
            first = j;
            break;
        }
    for (int j = p->nd - 1; j >= 0; j--) {
        if (p->red[j] != red) continue;
        if (j != first) {
            vf_sb_add(s, "    { uint c = x %% pc.d%d; x /= pc.d%d; off += c * (", j, j);
            stride_expr(s, p, j);
            vf_sb_add(s, "); }   // dim %d\n", j);
        } else {
            vf_sb_puts(s, "    off += x * (");
            stride_expr(s, p, j);
            vf_sb_add(s, ");   // dim %d\n", j);
        }
    }
    vf_sb_puts(s, "    return off;\n}\n");
}

typedef enum { ACC_FSUM, ACC_ISUM, ACC_KEY, ACC_ARG, ACC_NORM, ACC_PROD, ACC_LSE } acc_kind;

/* norm: a sum of squares in f32 overflows for |x| above ~1.8e19 and
   underflows below ~1e-19 (and on lavapipe anything under 2^-126 is
   flushed), so ||{1e30, 1e30}|| was inf and ||{1e-30, 1e-30}|| 0. Blue's
   scaled sums of squares fix both at no extra pass: each element goes to
   one of three accumulators by magnitude, squared after a power-of-two
   scale that keeps the square and any sum of up to 2^32 of them inside the
   normal f32 range:
     small  |x| <  2^-60  (x * 2^90)^2    -> [2^-118, 2^60] even for denormals
     medium otherwise     x^2             -> [2^-120, 2^88]
     big    |x| >  2^44   (x * 2^-82)^2   -> [2^-76, 2^92]
   The accumulator is a vec3 combined by plain addition (subgroupAdd and the
   shared-memory tree work unchanged); vf_norm_final scales back once. NaN
   and Inf fail both comparisons or land in big and propagate as in the
   CPU backend's double sum. */
static const char norm_glsl[] =
    "const float VF_NRM_TSML = 8.673617379884035e-19;   // 2^-60\n"
    "const float VF_NRM_TBIG = 17592186044416.0;        // 2^44\n"
    "const float VF_NRM_SSML = 1.2379400392853803e27;   // 2^90\n"
    "const float VF_NRM_SBIG = 2.0679515313825692e-25;  // 2^-82\n"
    "vec3 vf_norm_acc(float v)\n{\n"
    "    // selects, not branches: lanes of one subgroup take different classes\n"
    "    float a = abs(v);\n"
    "    bool big = a > VF_NRM_TBIG, sml = a < VF_NRM_TSML;   // NaN: neither, so medium\n"
    "    float y = a * (big ? VF_NRM_SBIG : sml ? VF_NRM_SSML : 1.0), q = y * y;\n"
    "    return vec3(sml ? q : 0.0, big || sml ? 0.0 : q, big ? q : 0.0);\n}\n"
    "float vf_norm_final(vec3 s)\n{\n"
    "    if (isnan(s.y)) return s.y;\n"
    "    if (s.z > 0.0) return sqrt(s.z + (s.y * VF_NRM_SBIG) * VF_NRM_SBIG) / VF_NRM_SBIG;\n"
    "    if (s.x > 0.0) {\n"
    "        float sm = sqrt(s.x) / VF_NRM_SSML;\n"
    "        if (s.y == 0.0) return sm;\n"
    "        float md = sqrt(s.y), hi = max(sm, md), lo = min(sm, md);\n"
    "        return hi * sqrt(1.0 + (lo / hi) * (lo / hi));\n    }\n"
    "    return sqrt(s.y);\n}\n";

/* logsumexp's (m, s) pairs: m NaN sticks, m = -Inf holds nothing (its s
   is ignored), m = +Inf gives +Inf; the subgroup's max goes through the
   order-preserving keys, whose NaN wins. */
static const char lse_glsl[] =
    "float vf_lse_w(vec2 a, float m) { return a.x == -vf_inf() ? 0.0 : a.y * exp(a.x - m); }\n"
    "vec2 acc_combine(vec2 a, vec2 b)\n{\n"
    "    if (isnan(a.x) || isnan(b.x)) return vec2(vf_nan(), 1.0);\n"
    "    float m = max(a.x, b.x);\n"
    "    if (isinf(m)) return vec2(m, 1.0);\n"
    "    return vec2(m, vf_lse_w(a, m) + vf_lse_w(b, m));\n}\n";
static const char lse_subgroup_glsl[] =
    "vec2 acc_subgroup(vec2 v)\n{\n"
    "    float m = vf_unkey_f(subgroupMax(vf_key_f(v.x, true)));\n"
    "    if (isnan(m) || isinf(m)) return vec2(m, 1.0);   // uniform: m is the subgroup's\n"
    "    return vec2(m, subgroupAdd(vf_lse_w(v, m)));\n}\n";

typedef struct {
    acc_kind kind;
    const char *type, *identity;
    int words;   /* uints per accumulator in scratch */
} acc_info;

static void emit_acc_ops(vf_sb *s, const acc_info *a, vf_combine comb, bool subgroup)
{
    vf_sb_add(s, "#define ACC_T %s\n#define ACC_IDENTITY %s\n", a->type, a->identity);
    switch (a->kind) {
    case ACC_FSUM: case ACC_ISUM: case ACC_NORM:
        if (a->kind == ACC_NORM) vf_sb_puts(s, norm_glsl);
        vf_sb_puts(s, "ACC_T acc_combine(ACC_T a, ACC_T b) { return a + b; }\n");
        if (subgroup) vf_sb_puts(s, "ACC_T acc_subgroup(ACC_T v) { return subgroupAdd(v); }\n");
        break;
    case ACC_KEY: {
        const char *f = comb == VF_COMBINE_MAX ? "Max" : "Min";
        vf_sb_add(s, "ACC_T acc_combine(ACC_T a, ACC_T b) { return %s(a, b); }\n",
                  comb == VF_COMBINE_MAX ? "max" : "min");
        if (subgroup) vf_sb_add(s, "ACC_T acc_subgroup(ACC_T v) { return subgroup%s(v); }\n", f);
        break;
    }
    case ACC_PROD:
        vf_sb_puts(s, "ACC_T acc_combine(ACC_T a, ACC_T b) { return a * b; }\n");
        if (subgroup) vf_sb_puts(s, "ACC_T acc_subgroup(ACC_T v) { return subgroupMul(v); }\n");
        break;
    case ACC_LSE:
        vf_sb_puts(s, lse_glsl);
        if (subgroup) vf_sb_puts(s, lse_subgroup_glsl);
        break;
    case ACC_ARG:
        /* (key, index): larger key wins, ties go to the lower index */
        vf_sb_puts(s, "ACC_T acc_combine(ACC_T a, ACC_T b)\n{\n"
                      "    return (b.x > a.x || (b.x == a.x && b.y < a.y)) ? b : a;\n}\n");
        if (subgroup)
            vf_sb_puts(s, "ACC_T acc_subgroup(ACC_T v)\n{\n    uint m = subgroupMax(v.x);\n"
                          "    return uvec2(m, subgroupMin(v.x == m ? v.y : 0xffffffffu));\n}\n");
        break;
    }
}

/* element value -> accumulator (v is the loaded compute-type value) */
static void emit_to_acc(vf_sb *s, const acc_info *a, const vf_op_info *info, vf_ctype ct)
{
    vf_sb_add(s, "ACC_T to_acc(%s v, uint r)\n{\n", cg_ctype_name(ct));
    switch (a->kind) {
    case ACC_FSUM: case ACC_PROD: vf_sb_puts(s, "    return v;\n"); break;
    case ACC_LSE: vf_sb_puts(s, "    return vec2(v, 1.0);\n"); break;
    case ACC_NORM: vf_sb_puts(s, "    return vf_norm_acc(v);\n"); break;
    case ACC_ISUM: vf_sb_puts(s, "    return v;\n"); break;
    case ACC_KEY: case ACC_ARG: {
        bool high = info->combine == VF_COMBINE_MAX;
        const char *key = ct == VF_CT_FLOAT ? (high ? "vf_key_f(v, true)" : "vf_key_f(v, false)")
                        : ct == VF_CT_INT ? "vf_key_i(v)" : "v";
        if (a->kind == ACC_KEY) vf_sb_add(s, "    return %s;\n", key);
        else vf_sb_add(s, "    return uvec2(%s, r);\n", key);
        break;
    }
    }
    vf_sb_puts(s, "}\n");
}

/* accumulator -> final value, stored with the cast rules */
static void emit_final_store(vf_sb *s, const acc_info *a, const vf_op_info *info, vf_ctype ct, vf_dtype out)
{
    vf_sb_puts(s, "void acc_store(uint o, ACC_T v)\n{\n");
    switch (a->kind) {
    case ACC_FSUM:
        if (info->divide_by_count) vf_sb_puts(s, "    v = v / pc.count;\n");
        vf_sb_puts(s, "    st(o, v);\n");
        break;
    case ACC_NORM: vf_sb_puts(s, "    st(o, vf_norm_final(v));\n"); break;
    case ACC_ISUM: case ACC_PROD: vf_sb_puts(s, "    st(o, v);\n"); break;
    case ACC_LSE: vf_sb_puts(s, "    st(o, isnan(v.x) || isinf(v.x) ? v.x : v.x + vf_log(v.y));\n"); break;
    case ACC_KEY:
        vf_sb_add(s, "    st(o, %s);\n", ct == VF_CT_FLOAT ? "vf_unkey_f(v)" : ct == VF_CT_INT ? "vf_unkey_i(v)" : "v");
        break;
    case ACC_ARG: vf_sb_puts(s, "    st(o, int(v.y));\n"); break;
    }
    (void)out;
    vf_sb_puts(s, "}\n");
}

static void emit_scratch_store(vf_sb *s, const acc_info *a)
{
    vf_sb_puts(s, "void acc_store(uint o, ACC_T v)\n{\n");
    if (a->kind == ACC_ARG) vf_sb_puts(s, "    scratch[2u * o] = v.x;\n    scratch[2u * o + 1u] = v.y;\n");
    else if (a->kind == ACC_LSE)
        vf_sb_puts(s, "    scratch[2u * o] = floatBitsToUint(v.x);\n    scratch[2u * o + 1u] = floatBitsToUint(v.y);\n");
    else if (a->kind == ACC_FSUM || (a->kind == ACC_PROD && !strcmp(a->type, "float")))
        vf_sb_puts(s, "    scratch[o] = floatBitsToUint(v);\n");
    else if (a->kind == ACC_NORM)
        vf_sb_puts(s, "    scratch[3u * o] = floatBitsToUint(v.x);\n    scratch[3u * o + 1u] = floatBitsToUint(v.y);\n"
                      "    scratch[3u * o + 2u] = floatBitsToUint(v.z);\n");
    else vf_sb_puts(s, "    scratch[o] = uint(v);\n");
    vf_sb_puts(s, "}\n");
}

/* Scratch holds part t of output o at o * parts + t (rows: a workgroup
   reads one output's parts together) or at t * n_out + o (columns:
   neighbouring threads, neighbouring outputs). */
static void emit_scratch_load(vf_sb *s, const acc_info *a, bool row)
{
    vf_sb_add(s, "ACC_T acc_elem(uint o, uint t)\n{\n    uint i = %s;\n",
              row ? "o * pc.parts + t" : "t * pc.n_out + o");
    if (a->kind == ACC_ARG) vf_sb_puts(s, "    return uvec2(scratch[2u * i], scratch[2u * i + 1u]);\n");
    else if (a->kind == ACC_LSE) vf_sb_puts(s, "    return uintBitsToFloat(uvec2(scratch[2u * i], scratch[2u * i + 1u]));\n");
    else if (a->kind == ACC_FSUM || (a->kind == ACC_PROD && !strcmp(a->type, "float")))
        vf_sb_puts(s, "    return uintBitsToFloat(scratch[i]);\n");
    else if (a->kind == ACC_NORM)
        vf_sb_puts(s, "    return uintBitsToFloat(uvec3(scratch[3u * i], scratch[3u * i + 1u], scratch[3u * i + 2u]));\n");
    else vf_sb_add(s, "    return ACC_T(scratch[i]);\n");
    vf_sb_puts(s, "}\n");
}

enum { STEP_ONE, STEP_PARTIAL, STEP_FINAL };

static vf_status gen_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d,
                          const red_pattern *p, const acc_info *a, int step, bool row, uint32_t wg,
                          uint32_t parts, uint32_t chunk)
{
    const vf_op_info *info = vf_op_get(e->op);
    const vf_tref *in = &e->in[0];
    vf_ctype ct = cg_ctype_of(in->dtype);
    bool subgroup = caps->subgroup_arithmetic && row;
    vf_cg g;
    cg_begin(&g, e, caps, err, d);

    int nl = snprintf(d->name, sizeof d->name, "%s_%s_r", info->name, cg_dtype_tag(in->dtype));
    for (int j = 0; j < p->nd && nl < (int)sizeof d->name - 1; j++)
        nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "%d", p->red[j]);
    if (nl < (int)sizeof d->name - 1)
        snprintf(d->name + nl, sizeof d->name - (size_t)nl, "%s",
                 step == STEP_PARTIAL ? "_s1" : step == STEP_FINAL ? "_s2" : row ? "_row" : "_col");
    int cl = snprintf(g.comment, sizeof g.comment, "op %s: %s -> %s; collapsed dims (1 = reduced):",
                      info->name, cg_dtype_tag(in->dtype), cg_dtype_tag(e->out.dtype));
    for (int j = 0; j < p->nd && cl < (int)sizeof g.comment; j++)
        cl += snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, " %d", p->red[j]);
    if (cl < (int)sizeof g.comment)
        snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, "; %s%s",
                 row ? "a workgroup per output" : "a thread per output",
                 step == STEP_PARTIAL ? ", step 1 of 2 (chunks -> scratch)"
                 : step == STEP_FINAL ? ", step 2 of 2 (scratch -> out)" : "");

    if (step != STEP_FINAL) cg_bind(&g, VF_BIND_IN0, in->dtype, "in0", true, false);
    if (step != STEP_ONE) cg_bind(&g, VF_BIND_SCRATCH, -1, "scratch", step == STEP_FINAL, false);
    if (step != STEP_PARTIAL) cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, false);

    cg_push_u32(&g, "n_out", (uint32_t)(step == STEP_PARTIAL ? p->n_out * parts : p->n_out));
    cg_push_u32(&g, "n_red", (uint32_t)p->n_red);
    if (step != STEP_ONE) cg_push_u32(&g, "parts", parts);
    if (step == STEP_PARTIAL && !row) cg_push_u32(&g, "n_kept", (uint32_t)p->n_out);
    if (step == STEP_PARTIAL) cg_push_u32(&g, "chunk", chunk);
    if (info->divide_by_count && step != STEP_PARTIAL) cg_push_f32(&g, "count", (float)p->n_red);
    if (step != STEP_FINAL)
        for (int j = 0; j < p->nd; j++) {
            char nm[16];
            snprintf(nm, sizeof nm, "d%d", j);
            cg_push_u32(&g, nm, (uint32_t)p->size[j]);
        }
    if (g.status) {
        cg_abort(&g);
        return g.status;
    }

    vf_sb *s = &g.body;
    /* WG and SG are specialisation constants; only the path is baked */
    cg_workgroup(&g, wg);
    cg_spec(&g, "SG", caps->subgroup_size ? caps->subgroup_size : 1);
    vf_sb_add(s, "#define VF_SUBGROUP %d\n", subgroup ? 1 : 0);
    if (row) vf_sb_puts(s, "#define MODE_ROW 1\n");
    if (subgroup) g.ext |= CG_EXT_SUBGROUP;
    if (step != STEP_PARTIAL) {
        vf_ctype st_ct = a->kind == ACC_ARG ? VF_CT_INT : ct;
        cg_store_fn(&g, "st", "outv", e->out.dtype, st_ct);
    }
    emit_acc_ops(s, a, info->combine, subgroup);
    if (step == STEP_FINAL) {
        vf_sb_puts(s, "uint red_len(uint o) { return pc.parts; }\n");
        emit_scratch_load(s, a, row);
        emit_final_store(s, a, info, ct, e->out.dtype);
    } else {
        cg_load_fn(&g, "ld", "in0", in->dtype, ct);
        emit_offset_fn(s, "kept_off", p, false);
        emit_offset_fn(s, "red_off", p, true);
        emit_to_acc(s, a, info, ct);
        if (step == STEP_ONE) {
            vf_sb_puts(s, "uint red_len(uint o) { return pc.n_red; }\n"
                          "ACC_T acc_elem(uint o, uint t) { return to_acc(ld(kept_off(o) + red_off(t)), t); }\n");
            emit_final_store(s, a, info, ct, e->out.dtype);
        } else {
            /* virtual output v covers chunk p of output o: v = o * parts + p
               (rows), v = p * n_kept + o (columns); v is its scratch index */
            if (row)
                vf_sb_puts(s, "uint part_of(uint v) { return v % pc.parts; }\n"
                              "uint out_of(uint v) { return v / pc.parts; }\n");
            else
                vf_sb_puts(s, "uint part_of(uint v) { return v / pc.n_kept; }\n"
                              "uint out_of(uint v) { return v % pc.n_kept; }\n");
            vf_sb_puts(s, "uint red_len(uint v) { return min(pc.chunk, pc.n_red - part_of(v) * pc.chunk); }\n"
                          "ACC_T acc_elem(uint v, uint t)\n{\n"
                          "    uint r = part_of(v) * pc.chunk + t;\n"
                          "    return to_acc(ld(kept_off(out_of(v)) + red_off(r)), r);\n}\n");
            emit_scratch_store(s, a);
        }
    }
    uint64_t outs = step == STEP_PARTIAL ? p->n_out * parts : p->n_out;
    cg_groups_linear(&g, row ? outs : (outs + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, "reduce.glsl");
}

vf_status vf_codegen_reduce(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_op_info *info = vf_op_get(e->op);
    const vf_tref *in = &e->in[0];
    if (!cg_dtype_supported(e, caps, in->dtype, err) || !cg_dtype_supported(e, caps, e->out.dtype, err))
        return VF_ERROR_UNSUPPORTED;
    if (cg_numel(in) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: input too large for 32-bit indexing", info->name);
    bool arg = e->op == VF_OP_ARGMAX;
    uint32_t mask = arg ? (1u << e->attrs.axis) : e->attrs.axes_mask;
    red_pattern p;
    collapse(in, mask, &p);

    vf_ctype ct = cg_ctype_of(in->dtype);
    acc_info a;
    if (arg) a = (acc_info){ACC_ARG, "uvec2", "uvec2(0u, 0xffffffffu)", 2};
    else if (info->square_first)
        a = (acc_info){ACC_NORM, "vec3", "vec3(0.0)", 3};
    else if (info->combine == VF_COMBINE_SUM)
        a = ct == VF_CT_FLOAT ? (acc_info){ACC_FSUM, "float", "0.0", 1}
          : ct == VF_CT_INT ? (acc_info){ACC_ISUM, "int", "0", 1} : (acc_info){ACC_ISUM, "uint", "0u", 1};
    else if (info->combine == VF_COMBINE_PROD)
        a = ct == VF_CT_FLOAT ? (acc_info){ACC_PROD, "float", "1.0", 1}
          : ct == VF_CT_INT ? (acc_info){ACC_PROD, "int", "1", 1} : (acc_info){ACC_PROD, "uint", "1u", 1};
    else if (info->combine == VF_COMBINE_LSE)
        a = (acc_info){ACC_LSE, "vec2", "vec2(-vf_inf(), 1.0)", 2};
    else
        a = (acc_info){ACC_KEY, "uint", info->combine == VF_COMBINE_MAX ? "0u" : "0xffffffffu", 1};

    bool inner_red = p.nd == 0 || p.red[p.nd - 1];
    bool row = inner_red && p.n_red >= 32;
    uint32_t sg = caps->subgroup_size ? caps->subgroup_size : 1;
    /* the workgroup size (a specialisation constant, chosen here from the
       device): one subgroup on CPU devices (no barriers), else 256 within
       the limits; a power of two for the shared-memory tree */
    uint32_t wg;
    if (!row) {
        wg = cg_clamp_wg(caps, caps->is_cpu ? 64 : 256, false);
    } else {
        wg = cg_clamp_wg(caps, caps->is_cpu ? sg : 256, !caps->subgroup_arithmetic);
        if (caps->subgroup_arithmetic && wg < sg && cg_clamp_wg(caps, sg, false) == sg) wg = sg;
    }

    /* Two steps when a few long rows could not fill the device, or when
       one invocation would loop longer than the device lets it (llvmpipe:
       cg_loop_budget): step 1 reduces chunks of every output into scratch,
       step 2 the chunks' results. */
    uint64_t budget = cg_loop_budget(caps);
    uint64_t lanes = row ? wg : 1;   /* invocations sharing one output's loop */
    uint64_t target = caps->is_cpu ? 64 : 1024;
    uint64_t parts = 1;
    if (row && p.n_out < target && p.n_red >= 65536) {
        parts = (target + p.n_out - 1) / p.n_out;
        uint64_t maxparts = p.n_red / ((uint64_t)wg * 64);
        if (parts > maxparts) parts = maxparts;
    }
    uint64_t need = ((p.n_red + lanes - 1) / lanes + budget - 1) / budget;
    if (parts < need) parts = need;
    if (parts >= 2) {
        uint64_t chunk = (p.n_red + parts - 1) / parts;
        parts = (p.n_red + chunk - 1) / chunk;
        if ((parts + lanes - 1) / lanes > budget)
            return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                              "%s: reducing %llu elements needs %llu loop iterations per invocation in"
                              " two steps; this device ends loops after %u", info->name,
                              (unsigned long long)p.n_red, (unsigned long long)((parts + lanes - 1) / lanes),
                              caps->max_loop_iterations);
        k->n_steps = 2;
        k->scratch_bytes = (size_t)(p.n_out * parts * (uint64_t)a.words * 4);
        vf_status st = gen_step(e, caps, err, &k->step[0], &p, &a, STEP_PARTIAL, row, wg,
                                (uint32_t)parts, (uint32_t)chunk);
        if (st) return st;
        return gen_step(e, caps, err, &k->step[1], &p, &a, STEP_FINAL, row, wg, (uint32_t)parts, 0);
    }
    k->n_steps = 1;
    return gen_step(e, caps, err, &k->step[0], &p, &a, STEP_ONE, row, wg, 1, 0);
}
