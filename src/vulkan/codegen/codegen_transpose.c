/* TRANSPOSE of any rank <= 8 and any element size (1, 2 or 4 bytes).
 *
 * Size-1 dims are dropped and input dims that stay adjacent and in order
 * in the output merge, so e.g. [B, M, N] -> [B, N, M] becomes a 3-dim
 * pattern and a reshape-like permutation becomes a plain copy. The
 * collapsed permutation is baked into the GLSL; the collapsed sizes are
 * push constants. Elements are moved as raw bits (uint / uint16_t /
 * uint8_t), so NaN payloads survive. Each output element is written by one
 * invocation (4 per invocation, workgroup-strided); reads gather. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define TR_LOCAL 256u   /* wanted; the workgroup size WG is a specialisation constant */
#define TR_PER_THREAD 4u

vf_status vf_codegen_transpose(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_tref *in = &e->in[0];
    int R = in->rank;
    /* input dims that matter, in out order */
    int newidx[VF_MAX_RANK], nkeep = 0;
    for (int d = 0; d < R; d++) newidx[d] = in->shape[d] > 1 ? nkeep++ : -1;
    int q[VF_MAX_RANK], nq = 0;
    uint64_t keep_size[VF_MAX_RANK];
    for (int d = 0; d < R; d++)
        if (newidx[d] >= 0) keep_size[newidx[d]] = (uint64_t)in->shape[d];
    for (int i = 0; i < e->out.rank; i++) {
        int p = e->attrs.perm[i];
        if (p < 0 || p >= R)
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "transpose: perm[%d] = %d out of range", i, p);
        if (newidx[p] >= 0) q[nq++] = newidx[p];
    }
    /* runs of consecutive input dims in out order merge into one dim */
    int run_start[VF_MAX_RANK], run_len[VF_MAX_RANK], nruns = 0;
    for (int j = 0; j < nq; j++) {
        if (nruns > 0 && q[j] == run_start[nruns - 1] + run_len[nruns - 1]) {
            run_len[nruns - 1]++;
        } else {
            run_start[nruns] = q[j];
            run_len[nruns] = 1;
            nruns++;
        }
    }
    /* collapsed input dim of each run: rank of its start among runs */
    int cperm[VF_MAX_RANK];       /* out collapsed dim j = in collapsed dim cperm[j] */
    uint64_t csize[VF_MAX_RANK];  /* input collapsed sizes */
    for (int j = 0; j < nruns; j++) {
        int r = 0;
        for (int t = 0; t < nruns; t++) r += run_start[t] < run_start[j];
        cperm[j] = r;
        uint64_t sz = 1;
        for (int t = 0; t < run_len[j]; t++) sz *= keep_size[run_start[j] + t];
        csize[r] = sz;
    }
    int nd = nruns;

    size_t esz = vf_dtype_size(in->dtype);
    vf_dtype st = esz == 4 ? VF_U32 : esz == 2 ? VF_F16 : VF_BOOL;   /* raw bits of that width */
    if (!cg_dtype_supported(e, caps, in->dtype, err)) return VF_ERROR_UNSUPPORTED;

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    int nl = snprintf(g.d->name, sizeof g.d->name, "transpose_%zub_p", esz * 8);
    for (int j = 0; j < nd && nl < (int)sizeof g.d->name - 1; j++)
        nl += snprintf(g.d->name + nl, sizeof g.d->name - (size_t)nl, "%d", cperm[j]);
    int cl = snprintf(g.comment, sizeof g.comment,
                      "op transpose: %s (%zu-byte elements moved as bits), %d collapsed dim(s), out dim j = in dim perm[j] with perm =",
                      vf_dtype_name(in->dtype), esz, nd);
    for (int j = 0; j < nd && cl < (int)sizeof g.comment; j++)
        cl += snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, " %d", cperm[j]);

    cg_bind(&g, VF_BIND_IN0, st, "in0", true, false);
    cg_bind(&g, VF_BIND_OUT, st, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    for (int t = 0; t < nd; t++) {
        char nm[16];
        snprintf(nm, sizeof nm, "n%d", t);
        cg_push_u32(&g, nm, (uint32_t)csize[t]);
    }

    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, TR_LOCAL, false));
    uint32_t per_group = cg_wg(&g) * TR_PER_THREAD;
    vf_sb_add(s, "void main()\n{\n");
    /* input strides of the collapsed dims */
    for (int t = nd - 1; t >= 0; t--) {
        if (t == nd - 1) vf_sb_add(s, "    uint is%d = 1u;\n", t);
        else vf_sb_add(s, "    uint is%d = is%d * pc.n%d;\n", t, t + 1, t + 1);
    }
    vf_sb_add(s, "    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n"
                 "    [[unroll]] for (uint j = 0u; j < %uu; j++) {\n"
                 "        uint i = base + j * WG;\n"
                 "        if (i >= pc.numel) return;\n"
                 "        uint rest = i, src = 0u;\n", TR_PER_THREAD, TR_PER_THREAD);
    for (int j = nd - 1; j >= 0; j--) {
        if (j > 0)
            vf_sb_add(s, "        { uint c = rest %% pc.n%d; rest /= pc.n%d; src += c * is%d; }   // out dim %d\n",
                      cperm[j], cperm[j], cperm[j], j);
        else
            vf_sb_add(s, "        src += rest * is%d;   // out dim 0\n", cperm[0]);
    }
    if (nd == 0) vf_sb_puts(s, "        src = i;\n");
    vf_sb_puts(s, "        outv[i] = in0[src];\n    }\n}\n");
    cg_groups_linear(&g, (numel + per_group - 1) / per_group);
    return cg_finish(&g, NULL);
}
