/* Kernels of the indexing ops (VF_KIND_INDEX): gather and scatter_add
 * (see their sections), the IOTA source under vf_range and vf_one_hot;
 * cumsum (codegen_cumsum.c) and top_k (codegen_topk.c) are dispatched
 * from here to their own files.
 *
 * Both see x as [outer, n, inner] around attrs.axis and the indices as J
 * flat positions (gather's result and scatter_add's updates are
 * [outer, J, inner]); sizes are push constants, so one pipeline serves
 * every size of a dtype.
 *
 * gather: one invocation per output element (4 per invocation,
 * workgroup-strided), elements moved as raw bits (any dtype, NaN payloads
 * kept); an index outside [0, n) reads as zero bits, i.e. 0 / 0.0 / false.
 *
 * scatter_add is deterministic: it builds each row's list of indices (in
 * index order, without atomics: (n + 1 + J / 2) x J index comparisons)
 * and then one invocation per output element adds the updates of its
 * row's list to x, one add per update element (see scatter_step), where
 * a loop over all J indices per output element would cost n x inner x J. Its index loops
 * must fit one invocation's loop budget (cg_loop_budget: llvmpipe's loop
 * limit); longer index lists are refused with a message. An index
 * outside [0, n) is in no list: its update is dropped. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define IX_LOCAL 256u
#define IX_PER_THREAD 4u

typedef struct {
    uint64_t outer, n, inner, J;
} ix_split;

static ix_split split_at(const vf_tref *x, const vf_tref *idx, int axis)
{
    ix_split s = {1, (uint64_t)x->shape[axis], 1, (uint64_t)cg_numel(idx)};
    for (int d = 0; d < axis; d++) s.outer *= (uint64_t)x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) s.inner *= (uint64_t)x->shape[d];
    return s;
}

static vf_status too_big(const vf_exec *e, const vf_tref *t, const char *what, vf_err *err)
{
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: %s has %lld elements; kernels index with 32 bits (at most %u)",
                      vf_op_get(e->op)->name, what, (long long)cg_numel(t), UINT32_MAX);
}

static vf_status gen_gather(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_tref *x = &e->in[0], *idx = &e->in[1];
    ix_split s = split_at(x, idx, e->attrs.axis);
    size_t esz = vf_dtype_size(x->dtype);
    vf_dtype st = esz == 4 ? VF_U32 : esz == 2 ? VF_F16 : VF_BOOL;   /* raw bits of that width */
    const char *zero = esz == 4 ? "0u" : esz == 2 ? "uint16_t(0u)" : "uint8_t(0u)";
    if (!cg_dtype_supported(e, caps, x->dtype, err)) return VF_ERROR_UNSUPPORTED;
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "gather_%zub_%s", esz * 8, cg_dtype_tag(idx->dtype));
    snprintf(g.comment, sizeof g.comment,
             "op gather: %s (%zu-byte elements moved as bits) along axis %d; x as [outer, n, inner], out "
             "[outer, J, inner]; an index outside [0, n) gives zero bits", vf_dtype_name(x->dtype), esz,
             e->attrs.axis);
    cg_bind(&g, VF_BIND_IN0, st, "xv", true, false);
    cg_bind(&g, VF_BIND_IN1, idx->dtype, "iv", true, false);
    cg_bind(&g, VF_BIND_OUT, st, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "n", (uint32_t)s.n);
    cg_push_u32(&g, "inner", (uint32_t)s.inner);
    cg_push_u32(&g, "J", (uint32_t)s.J);
    cg_workgroup(&g, cg_clamp_wg(caps, IX_LOCAL, false));
    uint32_t per_group = cg_wg(&g) * IX_PER_THREAD;
    /* uint(i32) of a negative index is >= 2^31 > n: one comparison checks both ends */
    vf_sb_add(&g.body,
              "void main()\n{\n"
              "    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n"
              "    [[unroll]] for (uint t = 0u; t < %uu; t++) {\n"
              "        uint i = base + t * WG;\n"
              "        if (i >= pc.numel) return;\n"
              "        uint c = i %% pc.inner, r = i / pc.inner;\n"
              "        uint j = r %% pc.J, o = r / pc.J;\n"
              "        uint k = uint(iv[j]);\n"
              "        outv[i] = k < pc.n ? xv[(o * pc.n + k) * pc.inner + c] : %s;\n"
              "    }\n}\n", IX_PER_THREAD, IX_PER_THREAD, zero);
    cg_groups_linear(&g, (numel + per_group - 1) / per_group);
    return cg_finish(&g, NULL);
}

/* scatter_add in three steps, scratch = start[n + 1] then list[J]:
   (1) one invocation per row r <= n: start[r] = how many valid indices
       are below r (start[n]: all valid ones);
   (2) one invocation per index j (valid): its place in the rows' lists,
       start[idx[j]] + how many earlier j' have the same index, gets j;
   (3) one invocation per output element: x plus the updates of its row's
       list, in index order.
   Steps 1 and 2 loop over the indices: ((n + 1) + J) * J / 2-ish
   comparisons in all, independent of the row length inner. */
static vf_status scatter_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d,
                              const ix_split *s, int step)
{
    const vf_tref *idx = &e->in[1];
    vf_dtype dt = e->out.dtype;
    vf_ctype ct = cg_ctype_of(dt);
    const char *cn = cg_ctype_name(ct);
    static const char *const what[3] = {
        "step 1 of 3: per row r <= n, start[r] = the valid indices below r",
        "step 2 of 3: per index j, list[start[idx[j]] + earlier equal indices] = j",
        "step 3 of 3: per output element, x plus the updates of its row's list in index order"};
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    snprintf(g.d->name, sizeof g.d->name, "scatter_add_%s_%s_%d", cg_dtype_tag(dt), cg_dtype_tag(idx->dtype),
             step + 1);
    snprintf(g.comment, sizeof g.comment,
             "op scatter_add: %s along axis %d; x as [outer, n, inner], updates [outer, J, inner]; %s",
             vf_dtype_name(dt), e->attrs.axis, what[step]);
    if (step == 2) cg_bind(&g, VF_BIND_IN0, dt, "xv", true, false);
    cg_bind(&g, VF_BIND_IN1, idx->dtype, "iv", true, false);
    if (step == 2) {
        cg_bind(&g, VF_BIND_IN2, dt, "uv", true, false);
        cg_bind(&g, VF_BIND_OUT, dt, "outv", false, false);
    }
    cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", step == 2, false);
    if (step == 2) {
        cg_load_fn(&g, "ld_u", "uv", dt, ct);
        cg_load_fn(&g, "ld_x", "xv", dt, ct);
        cg_store_fn(&g, "st_o", "outv", dt, ct);
    }
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "n", (uint32_t)s->n);
    cg_push_u32(&g, "inner", (uint32_t)s->inner);
    cg_push_u32(&g, "J", (uint32_t)s->J);
    cg_workgroup(&g, cg_clamp_wg(caps, step == 2 ? IX_LOCAL : 64, false));
    vf_sb *b = &g.body;
    vf_sb_puts(b, "void main()\n{\n    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n");
    uint64_t items;
    if (step == 0) {
        items = s->n + 1;
        /* uint(i32) of a negative index is >= 2^31 > n: it counts nowhere */
        vf_sb_puts(b, "    if (t > pc.n) return;\n"
                      "    uint cnt = 0u;\n"
                      "    for (uint j = 0u; j < pc.J; j++)\n"
                      "        if (uint(iv[j]) < t) cnt++;\n"
                      "    sc[t] = cnt;\n}\n");
    } else if (step == 1) {
        items = s->J;
        vf_sb_puts(b, "    if (t >= pc.J) return;\n"
                      "    uint k = uint(iv[t]);\n"
                      "    if (k >= pc.n) return;   // out of range: dropped\n"
                      "    uint pos = sc[k];\n"
                      "    for (uint j = 0u; j < t; j++)\n"
                      "        if (uint(iv[j]) == k) pos++;\n"
                      "    sc[pc.n + 1u + pos] = t;\n}\n");
    } else {
        items = numel;
        vf_sb_add(b, "    if (t >= pc.numel) return;\n"
                     "    uint c = t %% pc.inner, q = t / pc.inner;\n"
                     "    uint r = q %% pc.n, o = q / pc.n;\n"
                     "    %s acc = ld_x(t);\n"
                     "    uint ub = o * pc.J * pc.inner + c, end = sc[r + 1u];\n"
                     "    for (uint p = sc[r]; p < end; p++)\n"
                     "        acc += ld_u(ub + sc[pc.n + 1u + p] * pc.inner);\n"
                     "    st_o(t, acc);\n}\n", cn);
    }
    cg_groups_linear(&g, (items + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}

static vf_status gen_scatter(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    if (!cg_dtype_supported(e, caps, e->out.dtype, err)) return VF_ERROR_UNSUPPORTED;
    if (cg_numel(&e->in[2]) > (int64_t)UINT32_MAX) return too_big(e, &e->in[2], "updates", err);
    ix_split s = split_at(&e->in[0], &e->in[1], e->attrs.axis);
    /* every step loops at most J times per invocation, over its grid rounds */
    uint32_t w64 = cg_clamp_wg(caps, 64, false), w256 = cg_clamp_wg(caps, IX_LOCAL, false);
    uint64_t rounds = cg_grid_rounds(caps, (s.n + 1 + w64 - 1) / w64);
    uint64_t r2 = cg_grid_rounds(caps, (s.J + w64 - 1) / w64);
    uint64_t r3 = cg_grid_rounds(caps, ((uint64_t)cg_numel(&e->out) + w256 - 1) / w256);
    if (r2 > rounds) rounds = r2;
    if (r3 > rounds) rounds = r3;
    uint64_t budget = cg_loop_budget(caps);
    if (s.J * rounds > budget || s.n + 1 + s.J > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "scatter_add: %llu indices need %llu loop iterations per invocation; this device ends "
                          "loops after %u, so at most %llu indices per call here: split the indices and add the "
                          "results", (unsigned long long)s.J, (unsigned long long)(s.J * rounds),
                          caps->max_loop_iterations, (unsigned long long)(budget / rounds));
    k->n_steps = 3;
    k->scratch_bytes = (size_t)(s.n + 1 + s.J) * 4;
    for (int t = 0; t < 3; t++) {
        vf_status st = scatter_step(e, caps, err, &k->step[t], &s, t);
        if (st != VF_OK) return st;
    }
    return VF_OK;
}

/* IOTA: element i is i, converted with the cast rules of the store */
static vf_status gen_iota(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    vf_dtype dt = e->out.dtype;
    if (!cg_dtype_supported(e, caps, dt, err)) return VF_ERROR_UNSUPPORTED;
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "iota_%s", cg_dtype_tag(dt));
    snprintf(g.comment, sizeof g.comment, "op iota: %s, element i is i", vf_dtype_name(dt));
    cg_bind(&g, VF_BIND_OUT, dt, "outv", false, false);
    cg_store_fn(&g, "st_o", "outv", dt, VF_CT_UINT);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_workgroup(&g, cg_clamp_wg(caps, IX_LOCAL, false));
    uint32_t per_group = cg_wg(&g) * IX_PER_THREAD;
    vf_sb_add(&g.body,
              "void main()\n{\n"
              "    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n"
              "    [[unroll]] for (uint t = 0u; t < %uu; t++) {\n"
              "        uint i = base + t * WG;\n"
              "        if (i >= pc.numel) return;\n"
              "        st_o(i, i);\n"
              "    }\n}\n", IX_PER_THREAD, IX_PER_THREAD);
    cg_groups_linear(&g, (numel + per_group - 1) / per_group);
    return cg_finish(&g, NULL);
}

vf_status vf_codegen_index(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    if (e->op == VF_OP_IOTA) return gen_iota(e, caps, k, err);
    if (e->op >= VF_OP_RNG_UNIFORM && e->op <= VF_OP_RNG_ADVANCE) return vf_codegen_rng(e, caps, k, err);
    if (cg_numel(&e->in[0]) > (int64_t)UINT32_MAX) return too_big(e, &e->in[0], "x", err);
    switch (e->op) {
    case VF_OP_GATHER: return gen_gather(e, caps, k, err);
    case VF_OP_SCATTER_ADD: return gen_scatter(e, caps, k, err);
    case VF_OP_CUMSUM: return vf_codegen_cumsum(e, caps, k, err);
    case VF_OP_TOP_K:
    case VF_OP_TOP_K_INDICES: return vf_codegen_top_k(e, caps, k, err);
    default: break;
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL generator", vf_op_get(e->op)->name);
}
