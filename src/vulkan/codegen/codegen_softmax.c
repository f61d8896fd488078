/* Row ops along one axis: SOFTMAX, LOG_SOFTMAX and SPARSE_XENT, from
 * shaders/softmax.glsl.
 *
 * The input is seen as [outer, len, inner] around the axis. With inner == 1
 * the rows are contiguous and a workgroup owns a row: on lavapipe
 * (caps->is_cpu) a row is exactly one subgroup (8 lanes; the register
 * variant puts up to 8 such rows in a workgroup to spread llvmpipe's
 * per-workgroup cost), the reductions are subgroup ops and there is no
 * barrier — every barrier is a
 * coroutine switch in llvmpipe; on GPUs 256 invocations combine through
 * subgroup ops and shared memory. With inner > 1 a thread owns one
 * (outer, inner) column and neighbouring threads read neighbouring memory.
 * SPARSE_XENT: labels [...] (i32 / u32), logits [..., C]: rows are
 * contiguous, one loss per row, NaN for a label outside [0, C). */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

/* At most this many vec4 per invocation in the register variant (with 8
   lanes: rows of up to 2048 floats). */
#define REG_MAX_VEC4 64u

/* Rows per workgroup of the register variant: up to this many subgroups,
   each on its own row with no barrier between them. llvmpipe pays a fixed
   cost per workgroup (about 80 ns); 8 rows a group measured 5-8 % less
   time at [2048,1024] and 3.6x less at [65536,32] than one
   (docs/BENCHMARKS.md). */
#define REG_ROWS_PER_GROUP 8u

/* Fewer rows a group when the rows would not make two workgroups (so both
   of llvmpipe's threads on a 2-core machine get one), or when the device's
   workgroup limit is smaller. */
static uint32_t reg_rows_per_group(const vf_device_caps *caps, uint32_t wg, uint64_t rows)
{
    uint32_t rpw = REG_ROWS_PER_GROUP;
    while (rpw > 1 && (rows < 2ull * rpw || cg_clamp_wg(caps, wg * rpw, false) != wg * rpw)) rpw /= 2;
    return rpw;
}

/* Softmax / log_softmax of contiguous f32 rows on a CPU device, the row in
   registers: a row is one subgroup's (RPW rows, RPW subgroups, a
   workgroup), each invocation loads its rk vec4 of the row once (vec4
   loads, through a texel buffer where the device reads those faster),
   keeps them, and writes once; one exp per element: the hand-written recipe of
   docs/ARCHITECTURE.md, "Platform facts". RK (the row
   length over the lanes, in vec4) is a specialisation constant, so one
   SPIR-V serves every row length and count that qualifies. */
static vf_status reg_row(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, uint32_t wg, uint32_t rk,
                         uint64_t rows, uint64_t len, vf_err *err)
{
    bool soft = e->op == VF_OP_SOFTMAX;
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "%s_f32_reg%s", vf_op_get(e->op)->name, caps->texel_reads ? "_tex" : "");
    snprintf(g.comment, sizeof g.comment,
             "op %s: f32 rows, a subgroup per row (RPW a workgroup), RK vec4 per invocation kept in registers",
             vf_op_get(e->op)->name);
    /* llvmpipe gathers a texel fetch but loops over the lanes for a
       storage-buffer load (vf_device_caps.texel_reads) */
    bool texel = caps->texel_reads;
    if (texel) cg_bind_texel(&g, VF_BIND_IN0, "in0t");
    else cg_bind(&g, VF_BIND_IN0, VF_F32, "in0", true, true);
    cg_bind(&g, VF_BIND_OUT, VF_F32, "outv", false, true);
    cg_push_u32(&g, "n_rows", (uint32_t)rows);
    cg_push_u32(&g, "len", (uint32_t)len);
    if (g.status) {
        cg_abort(&g);
        return g.status;
    }
    uint32_t rpw = reg_rows_per_group(caps, wg, rows);
    cg_workgroup(&g, wg * rpw);
    g.ext |= CG_EXT_SUBGROUP;
    vf_sb *s = &g.body;
    cg_spec(&g, "RK", rk);
    cg_spec(&g, "RPW", rpw);
    vf_sb_puts(s, texel ? "#define LOAD(i) texelFetch(in0t, int(i))\n" : "#define LOAD(i) in0[i]\n");
    vf_sb_puts(s, "const uint LANES = WG / RPW;\n"
                  "void main()\n{\n"
                  "    uint row = vf_group_id() * RPW + gl_SubgroupID;\n"
                  "    if (row >= pc.n_rows) return;   // uniform over the subgroup that owns the row\n"
                  "    uint lid = gl_SubgroupInvocationID, n4 = pc.len / 4u, base = row * n4;\n"
                  "    vec4 r[RK];\n"
                  "    float m = -vf_inf();\n"
                  "    [[unroll]] for (uint q = 0u; q < RK; q++) {\n"
                  "        uint j = lid + q * LANES;\n"
                  "        r[q] = j < n4 ? LOAD(base + j) : vec4(-vf_inf());\n"
                  "        m = max(m, max(max(r[q].x, r[q].y), max(r[q].z, r[q].w)));\n"
                  "    }\n"
                  "    m = subgroupMax(m);\n"
                  "    float sum = 0.0;\n");
    if (soft)
        vf_sb_puts(s, "    [[unroll]] for (uint q = 0u; q < RK; q++) {\n"
                      "        r[q] = exp(r[q] - m);\n"
                      "        if (lid + q * LANES < n4) sum += (r[q].x + r[q].y) + (r[q].z + r[q].w);\n");
    else
        vf_sb_puts(s, "    [[unroll]] for (uint q = 0u; q < RK; q++) {\n"
                      "        r[q] = r[q] - m;\n"
                      "        vec4 t = exp(r[q]);\n"
                      "        if (lid + q * LANES < n4) sum += (t.x + t.y) + (t.z + t.w);\n");
    vf_sb_puts(s, "    }\n    sum = subgroupAdd(sum);\n");
    vf_sb_puts(s, soft ? "    float inv = 1.0 / sum;\n" : "    float ls = log(sum);\n");
    vf_sb_add(s, "    [[unroll]] for (uint q = 0u; q < RK; q++) {\n"
                 "        uint j = lid + q * LANES;\n"
                 "        if (j < n4) outv[base + j] = %s;\n"
                 "    }\n}\n", soft ? "r[q] * inv" : "r[q] - ls");
    cg_groups_linear(&g, (rows + rpw - 1) / rpw);
    return cg_finish(&g, NULL);
}

vf_status vf_codegen_row(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_op_info *info = vf_op_get(e->op);
    bool xent = e->op == VF_OP_SPARSE_XENT;
    const vf_tref *x = xent ? &e->in[1] : &e->in[0];
    int axis = xent ? x->rank - 1 : e->attrs.axis;
    if (axis < 0 || axis >= x->rank)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "%s: axis %d out of range for rank %d", info->name,
                          axis, x->rank);
    if (!vf_dtype_is_float(x->dtype))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: dtype %s is not a float type", info->name,
                          vf_dtype_name(x->dtype));
    if (xent && e->in[0].dtype != VF_I32 && e->in[0].dtype != VF_U32)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: labels must be i32 or u32, got %s", info->name,
                          vf_dtype_name(e->in[0].dtype));
    uint64_t outer = 1, inner = 1, len = (uint64_t)x->shape[axis];
    for (int d = 0; d < axis; d++) outer *= (uint64_t)x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= (uint64_t)x->shape[d];
    if (cg_numel(x) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: input too large for 32-bit indexing", info->name);

    /* a thread per column loops over the axis three times: past the
       device's loop budget (llvmpipe) a workgroup per strided row instead */
    bool row = inner == 1 || 3 * len > cg_loop_budget(caps);
    uint32_t sg = caps->subgroup_size ? caps->subgroup_size : 1;
    /* the workgroup size: a specialisation constant chosen from the device
       (one subgroup on CPU devices, else 256 within the limits; a power of
       two for the shared-memory tree) */
    bool subgroup = row && caps->subgroup_arithmetic;
    uint32_t wg;
    if (!row) {
        wg = cg_clamp_wg(caps, caps->is_cpu ? 64 : 256, false);
    } else {
        wg = cg_clamp_wg(caps, caps->is_cpu ? sg : 256, !subgroup);
        if (subgroup && wg < sg && cg_clamp_wg(caps, sg, false) == sg) wg = sg;
    }
    /* softmax.glsl loops over the row three times (max, sum, write): a
       workgroup wide enough that its invocations stay within the device's
       loop budget (llvmpipe); a thread per column loops over all of it */
    uint32_t fit = row ? cg_wg_for_loops(caps, wg, len, 3, !subgroup) : wg;
    /* the widest workgroup, each invocation a third of the budget per pass */
    if (!fit)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: a length of %llu along axis %d needs more loop iterations per invocation than"
                          " this device runs (%u, all loops together): at most %llu here", info->name,
                          (unsigned long long)len, axis, caps->max_loop_iterations,
                          (unsigned long long)cg_clamp_wg(caps, UINT32_MAX, !subgroup) * (cg_loop_budget(caps) / 3));
    wg = fit;
    bool reuse = e->op == VF_OP_SOFTMAX && e->out.dtype == VF_F32 && row;
    /* lavapipe, f32 rows of a multiple of 4 that fit: the row in registers */
    uint32_t rk = 0;
    if (!xent && inner == 1 && caps->is_cpu && subgroup && wg == sg && x->dtype == VF_F32 && e->out.dtype == VF_F32 &&
        len % 4 == 0 && len > 0 && len / 4 <= (uint64_t)wg * REG_MAX_VEC4)
        rk = (uint32_t)((len / 4 + wg - 1) / wg);
    if (rk) return reg_row(e, caps, k, wg, rk, outer, len, err);

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "%s_%s%s%s_%s", xent ? "xent" : info->name, cg_dtype_tag(x->dtype),
             xent ? "_" : "", xent ? cg_dtype_tag(e->in[0].dtype) : "", row ? "row" : "col");
    snprintf(g.comment, sizeof g.comment,
             "op %s: %s%s%s -> %s along a %s axis (outer, len, inner in push constants); %s",
             info->name, cg_dtype_tag(x->dtype), xent ? ", labels " : "", xent ? cg_dtype_tag(e->in[0].dtype) : "",
             cg_dtype_tag(e->out.dtype), inner == 1 ? "contiguous" : "strided",
             row ? "a workgroup per row" : "a thread per column");

    if (xent) cg_bind(&g, VF_BIND_IN0, e->in[0].dtype, "labels", true, false);
    cg_bind(&g, xent ? VF_BIND_IN1 : VF_BIND_IN0, x->dtype, "in0", true, false);
    cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, false);
    cg_push_u32(&g, "n_rows", (uint32_t)(outer * inner));
    cg_push_u32(&g, "len", (uint32_t)len);
    cg_push_u32(&g, "inner", (uint32_t)inner);
    if (g.status) {
        cg_abort(&g);
        return g.status;
    }
    cg_load_fn(&g, "ld", "in0", x->dtype, VF_CT_FLOAT);
    cg_store_fn(&g, "st", "outv", e->out.dtype, VF_CT_FLOAT);
    if (reuse) cg_load_fn(&g, "ld_out", "outv", e->out.dtype, VF_CT_FLOAT);
    vf_sb *s = &g.body;
    if (xent) {
        if (e->in[0].dtype == VF_I32)
            vf_sb_puts(s, "bool label(uint row, out uint lab)\n{\n    int l = labels[row];\n"
                          "    lab = uint(l);\n    return l >= 0 && uint(l) < pc.len;\n}\n");
        else
            vf_sb_puts(s, "bool label(uint row, out uint lab)\n{\n    lab = labels[row];\n"
                          "    return lab < pc.len;\n}\n");
    }
    cg_workgroup(&g, wg);
    cg_spec(&g, "SG", sg);
    vf_sb_add(s, "#define VF_SUBGROUP %d\n#define %s 1\n", subgroup ? 1 : 0,
              xent ? "OP_XENT" : e->op == VF_OP_SOFTMAX ? "OP_SOFTMAX" : "OP_LOG_SOFTMAX");
    if (row) vf_sb_add(s, "#define MODE_ROW 1\n#define ROW_STRIDE %s\n", inner == 1 ? "1u" : "pc.inner");
    if (reuse) vf_sb_puts(s, "#define VF_REUSE_OUT 1\n");
    if (subgroup) g.ext |= CG_EXT_SUBGROUP;
    uint64_t n = outer * inner;
    cg_groups_linear(&g, row ? n : (n + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, "softmax.glsl");
}
