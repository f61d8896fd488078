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
 * scatter_add has its own file (codegen_scatter.c). */
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

/* The loop both gather and iota run: IX_PER_THREAD elements an invocation,
   a workgroup apart (coalesced). ix_loop_open sets the workgroup and opens
   main() up to an element i in range; the caller appends the loop's body;
   ix_loop_close closes it, sizes the grid for numel and finishes. */
static void ix_loop_open(vf_cg *g, const vf_device_caps *caps)
{
    cg_workgroup(g, cg_clamp_wg(caps, IX_LOCAL, false));
    vf_sb_add(&g->body,
              "void main()\n{\n"
              "    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n"
              "    [[unroll]] for (uint t = 0u; t < %uu; t++) {\n"
              "        uint i = base + t * WG;\n"
              "        if (i >= pc.numel) return;\n", IX_PER_THREAD, IX_PER_THREAD);
}

static vf_status ix_loop_close(vf_cg *g, uint64_t numel)
{
    vf_sb_puts(&g->body, "    }\n}\n");
    uint32_t per_group = cg_wg(g) * IX_PER_THREAD;
    cg_groups_linear(g, (numel + per_group - 1) / per_group);
    return cg_finish(g, NULL);
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
    ix_loop_open(&g, caps);
    /* uint(i32) of a negative index is >= 2^31 > n: one comparison checks both ends */
    vf_sb_add(&g.body,
              "        uint c = i %% pc.inner, r = i / pc.inner;\n"
              "        uint j = r %% pc.J, o = r / pc.J;\n"
              "        uint k = uint(iv[j]);\n"
              "        outv[i] = k < pc.n ? xv[(o * pc.n + k) * pc.inner + c] : %s;\n", zero);
    return ix_loop_close(&g, numel);
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
    ix_loop_open(&g, caps);
    vf_sb_puts(&g.body, "        st_o(i, i);\n");
    return ix_loop_close(&g, numel);
}

vf_status vf_codegen_index(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    if (e->op == VF_OP_IOTA) return gen_iota(e, caps, k, err);
    if (e->op >= VF_OP_RNG_UNIFORM && e->op <= VF_OP_RNG_ADVANCE) return vf_codegen_rng(e, caps, k, err);
    if (cg_numel(&e->in[0]) > (int64_t)UINT32_MAX) return too_big(e, &e->in[0], "x", err);
    switch (e->op) {
    case VF_OP_GATHER: return gen_gather(e, caps, k, err);
    case VF_OP_SCATTER_ADD: return vf_codegen_scatter(e, caps, k, err);
    case VF_OP_CUMSUM: return vf_codegen_cumsum(e, caps, k, err);
    case VF_OP_TOP_K:
    case VF_OP_TOP_K_INDICES: return vf_codegen_top_k(e, caps, k, err);
    default: break;
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL generator", vf_op_get(e->op)->name);
}
