/* SLICE, PAD, CONCAT and SLICE_GRAD: one generator for the window ops,
 * walking the vf_window description (backend.h) that the CPU kernel walks
 * too; its index code also serves fused groups that read through a window
 * (codegen_fused.c).
 *
 * Each invocation writes 4 output elements (workgroup-strided): it splits
 * the element's index into output coordinates, maps them to each source's
 * coordinates (t = o * mul + off, then / div), tests only the dims where a
 * source may not hold the element (none for a slice), and copies the bits
 * (uint / uint16_t / uint8_t: every dtype, NaN payloads kept) or stores
 * pad's value (or a slice gradient's 0). The window's sizes and steps are
 * literals in the GLSL (index arithmetic the compiler folds: divisions by
 * constants), so a window of other sizes is another kernel, memoised and
 * disk-cached like every kernel; its offsets (a slice's begin) are push
 * constants, so a loop over x[i:i+k] runs one pipeline. Dims of output
 * size 1 cost nothing. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define WN_LOCAL 256u
#define WN_PER_THREAD 4u

static bool fits_i32(int64_t v) { return v >= -(int64_t)INT32_MAX && v <= (int64_t)INT32_MAX; }

/* The value of pad's fill as the raw storage type. */
static void fill_literal(vf_sb *s, const vf_exec *e)
{
    uint8_t tmp[8] = {0};
    uint32_t b = 0;
    vf_store_f64(tmp, e->out.dtype, 0, e->attrs.value);
    memcpy(&b, tmp, 4);
    size_t es = vf_dtype_size(e->out.dtype);
    if (es == 4) vf_sb_add(s, "0x%08xu", b);
    else if (es == 2) vf_sb_add(s, "uint16_t(0x%04xu)", b & 0xffffu);
    else vf_sb_add(s, "uint8_t(%uu)", b & 0xffu);
}

vf_status cg_window_check(const vf_exec *e, const vf_window *w, vf_err *err)
{
    const char *name = vf_op_get(e->op)->name;
    for (int q = 0; q < w->n_src; q++) {
        if (cg_numel(&e->in[q]) > (int64_t)UINT32_MAX)
            return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: input %d has %lld elements; kernels index with 32 "
                              "bits", name, q, (long long)cg_numel(&e->in[q]));
        if (vf_dtype_size(e->in[q].dtype) != vf_dtype_size(e->out.dtype))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "%s: input %d is %s, output %s", name, q,
                              vf_dtype_name(e->in[q].dtype), vf_dtype_name(e->out.dtype));
        for (int d = 0; d < w->rank; d++)
            if (!fits_i32(w->out[d]) || !fits_i32(w->mul[d]) || !fits_i32(w->div[d]) || !fits_i32(w->off[q][d]) ||
                !fits_i32(w->size[q][d] * w->div[d]) || !fits_i32(w->out[d] * w->mul[d] + w->off[q][d]))
                return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: dim %d (size %lld, offset %lld, step %lld) "
                                  "does not fit the kernel's 32-bit index arithmetic", name, d,
                                  (long long)w->size[q][d], (long long)w->off[q][d], (long long)w->mul[d]);
    }
    return VF_OK;
}

void cg_window_push(vf_cg *g, const vf_window *w, int q, const char *name)
{
    for (int d = 0; d < w->rank; d++) {
        char nm[24];
        snprintf(nm, sizeof nm, "%.16s%d", name, d & 7);
        cg_push_i32(g, nm, (int32_t)w->off[q][d]);
    }
}

void cg_window_source(vf_sb *s, const vf_window *w, int q, const char *coord, const char *ok, const char *idx,
                      const char *push, const char *indent)
{
    int64_t st[VF_MAX_RANK], n = 1;
    for (int d = w->rank - 1; d >= 0; d--) {
        st[d] = n;
        n *= w->size[q][d];
    }
    vf_sb_add(s, "%sbool %s = true;\n%suint %s = 0u;\n", indent, ok, indent, idx);
    for (int d = 0; d < w->rank; d++) {
        vf_sb_add(s, "%s{ int t = %s%d * %lld + ", indent, coord, d, (long long)w->mul[d]);
        if (push) vf_sb_add(s, "pc.%s%d;", push, d);
        else vf_sb_add(s, "%lld;", (long long)w->off[q][d]);
        if ((w->check[q] >> d) & 1u) {
            vf_sb_add(s, " %s = %s && t >= 0 && t < %lld", ok, ok, (long long)(w->size[q][d] * w->div[d]));
            if (w->div[d] > 1) vf_sb_add(s, " && t %% %lld == 0", (long long)w->div[d]);
            vf_sb_puts(s, ";");
        }
        if (w->div[d] > 1) vf_sb_add(s, " t /= %lld;", (long long)w->div[d]);
        vf_sb_add(s, " %s += uint(t) * %lluu; }\n", idx, (unsigned long long)st[d]);
    }
}

void cg_coords(vf_sb *s, int rank, const int64_t *shape, const char *flat, const char *coord, const char *indent)
{
    int first = 0;
    while (first < rank && shape[first] == 1) first++;
    vf_sb_add(s, "%suint %s_r = %s;\n", indent, coord, flat);
    for (int d = rank - 1; d >= 0; d--) {
        if (shape[d] == 1) vf_sb_add(s, "%sint %s%d = 0;\n", indent, coord, d);
        else if (d == first) vf_sb_add(s, "%sint %s%d = int(%s_r);\n", indent, coord, d, coord);
        else vf_sb_add(s, "%sint %s%d = int(%s_r %% %lluu); %s_r /= %lluu;\n", indent, coord, d, coord,
                       (unsigned long long)shape[d], coord, (unsigned long long)shape[d]);
    }
}

vf_status vf_codegen_window(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const char *name = vf_op_get(e->op)->name;
    vf_window w;
    if (!vf_window_of(e, &w))
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "%s: shapes do not match its attributes", name);
    vf_status cs = cg_window_check(e, &w, err);
    if (cs != VF_OK) return cs;
    int r = w.rank;
    size_t es = vf_dtype_size(e->out.dtype);
    vf_dtype bits = es == 4 ? VF_U32 : es == 2 ? VF_F16 : VF_BOOL;   /* raw bits of that width */
    if (!cg_dtype_supported(e, caps, e->out.dtype, err)) return VF_ERROR_UNSUPPORTED;

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "%s_%zub_r%d", name, es * 8, r);
    int cl = snprintf(g.comment, sizeof g.comment, "op %s: %s, %d dim(s), %d source(s)%s", name,
                      vf_dtype_name(e->out.dtype), r, w.n_src, w.has_fill ? " and a fill value" : "");
    (void)cl;
    for (int q = 0; q < w.n_src; q++) {
        char nm[16];
        snprintf(nm, sizeof nm, "in%d", q);
        cg_bind(&g, VF_BIND_IN0 + q, bits, nm, true, false);
    }
    cg_bind(&g, VF_BIND_OUT, bits, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    /* offsets as push constants (at most 2 x 8 of the 32 fields) */
    for (int q = 0; q < w.n_src; q++) cg_window_push(&g, &w, q, q ? "offb" : "offa");

    vf_sb *s = &g.body;
    cg_workgroup(&g, cg_clamp_wg(caps, WN_LOCAL, false));
    uint32_t per_group = cg_wg(&g) * WN_PER_THREAD;
    vf_sb_add(s, "void main()\n{\n"
                 "    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n"
                 "    [[unroll]] for (uint j = 0u; j < %uu; j++) {\n"
                 "        uint i = base + j * WG;\n"
                 "        if (i >= pc.numel) return;\n"
                 , WN_PER_THREAD, WN_PER_THREAD);
    cg_coords(s, r, w.out, "i", "c", "        ");
    for (int q = 0; q < w.n_src; q++) {
        char ok[16], idx[16];
        snprintf(ok, sizeof ok, "ok%d", q);
        snprintf(idx, sizeof idx, "s%d", q);
        cg_window_source(s, &w, q, "c", ok, idx, q ? "offb" : "offa", "        ");
    }
    for (int q = 0; q < w.n_src; q++) {
        bool last = q == w.n_src - 1 && !w.has_fill;
        if (last) vf_sb_add(s, "        %soutv[i] = in%d[s%d];\n", q ? "else " : "", q, q);
        else vf_sb_add(s, "        %sif (ok%d) outv[i] = in%d[s%d];\n", q ? "else " : "", q, q, q);
    }
    if (w.has_fill) {
        vf_sb_puts(s, "        else outv[i] = ");
        fill_literal(s, e);
        vf_sb_puts(s, ";\n");
    }
    vf_sb_puts(s, "    }\n}\n");
    cg_groups_linear(&g, (numel + per_group - 1) / per_group);
    return cg_finish(&g, NULL);
}
