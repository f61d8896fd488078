/* Kernels of the indexing ops (VF_KIND_INDEX): gather, scatter_add,
 * cumsum and top_k (see their sections); and
 * the IOTA source under vf_range and vf_one_hot.
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

/* Linear workgroups each invocation runs when `total` exceed the device's
   grid (cg_groups_linear strides over them): its loops run that often. */
static uint64_t grid_rounds(const vf_device_caps *caps, uint64_t total)
{
    uint64_t grid = 1;
    for (int i = 0; i < 3; i++) grid *= caps->max_workgroup_count[i] ? caps->max_workgroup_count[i] : 65535;
    return total <= grid ? 1 : (total + grid - 1) / grid;
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

/* ---- cumsum ---------------------------------------------------------------
   x as [outer, n, inner]: a lane is one (outer, inner) pair, its n
   elements strided by inner (adjacent lanes read adjacent memory). The
   scan runs in "scan order" p = 0..n-1, the axis index k = p, or n-1-p
   when reversed. Rows of at most SC_BLOCK elements: one step, one
   invocation per lane looping over its row (O(n) work in all). Longer
   rows: three steps over blocks of B scan positions: (1) one invocation
   per (lane, block) scans its block and keeps the block's total in scratch,
   (2) one invocation per lane turns its totals into exclusive prefix sums
   (the carries), (3) one invocation per element adds its block's carry.
   B and the work per invocation stay within the loop budget. */
#define SC_BLOCK 256u

typedef struct {
    vf_dtype dt;
    vf_ctype ct;
    bool excl, rev;
    uint64_t outer, n, inner, lanes, nb, B;
} sc_info;

static const char *sc_zero(vf_ctype ct) { return ct == VF_CT_FLOAT ? "0.0" : ct == VF_CT_INT ? "0" : "0u"; }
static const char *sc_to_bits(vf_ctype ct) { return ct == VF_CT_FLOAT ? "floatBitsToUint" : "uint"; }
static const char *sc_from_bits(vf_ctype ct) { return ct == VF_CT_FLOAT ? "uintBitsToFloat" : ct == VF_CT_INT ? "int" : "uint"; }

static void sc_common(vf_cg *g, const sc_info *c, const char *what, int step)
{
    snprintf(g->d->name, sizeof g->d->name, "cumsum_%s%s%s_%d", cg_dtype_tag(c->dt), c->excl ? "_excl" : "",
             c->rev ? "_rev" : "", step);
    snprintf(g->comment, sizeof g->comment, "op cumsum: %s along axis %d%s%s; x as [outer, n, inner]; %s",
             vf_dtype_name(c->dt), g->e->attrs.axis, c->excl ? ", exclusive" : "", c->rev ? ", reversed" : "", what);
    cg_push_u32(g, "n", (uint32_t)c->n);
    cg_push_u32(g, "inner", (uint32_t)c->inner);
    cg_push_u32(g, "lanes", (uint32_t)c->lanes);
    cg_push_u32(g, "nb", (uint32_t)c->nb);
    cg_push_u32(g, "B", (uint32_t)c->B);
}

/* a row scan over scan positions [p0, p1) of a lane: the body of steps
   "one" and "blocks" */
static void sc_loop(vf_sb *s, const sc_info *c, const char *cn)
{
    vf_sb_add(s,
              "    uint cc = lane %% pc.inner, o = lane / pc.inner;\n"
              "    uint base = o * pc.n * pc.inner + cc;\n"
              "    %s acc = %s;\n"
              "    for (uint p = p0; p < p1; p++) {\n"
              "        uint at = base + (%s) * pc.inner;\n"
              "        %s v = ld_x(at);\n"
              "        %s\n"
              "    }\n", cn, sc_zero(c->ct), c->rev ? "pc.n - 1u - p" : "p", cn,
              c->excl ? "st_o(at, acc); acc += v;" : "acc += v; st_o(at, acc);");
}

static vf_status sc_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d, const sc_info *c,
                         int step)
{
    const char *cn = cg_ctype_name(c->ct);
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    static const char *const what[4] = {"one invocation per lane scans its row",
                                        "step 1 of 3: one invocation per (lane, block) scans the block, its total to scratch",
                                        "step 2 of 3: per lane, the block totals become exclusive prefix sums (carries)",
                                        "step 3 of 3: every element adds its block's carry"};
    sc_common(&g, c, what[step], step);
    if (step <= 1) cg_bind(&g, VF_BIND_IN0, c->dt, "xv", true, false);
    if (step != 2) cg_bind(&g, VF_BIND_OUT, c->dt, "outv", false, false);
    if (step >= 1) cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", step == 3, false);
    if (step <= 1) cg_load_fn(&g, "ld_x", "xv", c->dt, c->ct);
    if (step == 3) cg_load_fn(&g, "ld_o", "outv", c->dt, c->ct);
    if (step != 2) cg_store_fn(&g, "st_o", "outv", c->dt, c->ct);
    cg_workgroup(&g, cg_clamp_wg(caps, 64, false));
    uint32_t wg = cg_wg(&g);
    vf_sb *s = &g.body;
    vf_sb_puts(s, "void main()\n{\n    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n");
    uint64_t items = 0;
    if (step == 0) {
        items = c->lanes;
        vf_sb_puts(s, "    if (t >= pc.lanes) return;\n    uint lane = t, p0 = 0u, p1 = pc.n;\n");
        sc_loop(s, c, cn);
    } else if (step == 1) {
        items = c->lanes * c->nb;
        vf_sb_puts(s, "    if (t >= pc.lanes * pc.nb) return;\n"
                      "    uint lane = t / pc.nb, blk = t % pc.nb;\n"
                      "    uint p0 = blk * pc.B, p1 = min(pc.n, p0 + pc.B);\n");
        sc_loop(s, c, cn);
        vf_sb_add(s, "    sc[t] = %s(acc);\n", sc_to_bits(c->ct));
    } else if (step == 2) {
        items = c->lanes;
        vf_sb_add(s, "    if (t >= pc.lanes) return;\n"
                     "    %s acc = %s;\n"
                     "    for (uint b = 0u; b < pc.nb; b++) {\n"
                     "        %s v = %s(sc[t * pc.nb + b]);\n"
                     "        sc[t * pc.nb + b] = %s(acc);\n"
                     "        acc += v;\n"
                     "    }\n", cn, sc_zero(c->ct), cn, sc_from_bits(c->ct), sc_to_bits(c->ct));
    } else {
        items = c->outer * c->n * c->inner;
        vf_sb_add(s, "    if (t >= pc.lanes * pc.n) return;\n"
                     "    uint cc = t %% pc.inner, q = t / pc.inner;\n"
                     "    uint k = q %% pc.n, o = q / pc.n;\n"
                     "    uint blk = (%s) / pc.B;\n"
                     "    if (blk == 0u) return;\n"
                     "    st_o(t, ld_o(t) + %s(sc[(o * pc.inner + cc) * pc.nb + blk]));\n",
                  c->rev ? "pc.n - 1u - k" : "k", sc_from_bits(c->ct));
    }
    vf_sb_puts(s, "}\n");
    cg_groups_linear(&g, (items + wg - 1) / wg);
    return cg_finish(&g, NULL);
}

static vf_status gen_cumsum(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_tref *x = &e->in[0];
    if (!cg_dtype_supported(e, caps, x->dtype, err)) return VF_ERROR_UNSUPPORTED;
    sc_info c = {.dt = x->dtype, .ct = cg_ctype_of(x->dtype), .excl = e->attrs.trans_a, .rev = e->attrs.trans_b};
    int axis = e->attrs.axis;
    c.outer = 1, c.n = (uint64_t)x->shape[axis], c.inner = 1;
    for (int d = 0; d < axis; d++) c.outer *= (uint64_t)x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) c.inner *= (uint64_t)x->shape[d];
    c.lanes = c.outer * c.inner;
    uint64_t budget = cg_loop_budget(caps);
    uint32_t wg = cg_clamp_wg(caps, 64, false);
    uint64_t B = SC_BLOCK < budget ? SC_BLOCK : budget;
    if (c.n <= B && c.n * grid_rounds(caps, (c.lanes + wg - 1) / wg) <= budget) {
        c.nb = 1, c.B = c.n;
        k->n_steps = 1;
        return sc_step(e, caps, err, &k->step[0], &c, 0);
    }
    /* blocks short enough for the loop budget at the grid rounds they need */
    for (int tries = 0; tries < 8; tries++) {
        c.nb = (c.n + B - 1) / B;
        uint64_t r = grid_rounds(caps, (c.lanes * c.nb + wg - 1) / wg);
        if (B * r <= budget || B == 1) break;
        B = budget / r ? budget / r : 1;
    }
    c.nb = (c.n + B - 1) / B;
    c.B = B;
    uint64_t r1 = grid_rounds(caps, (c.lanes * c.nb + wg - 1) / wg), r2 = grid_rounds(caps, (c.lanes + wg - 1) / wg);
    if (B * r1 > budget || c.nb * r2 > budget || c.lanes * c.nb > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "cumsum: rows of %llu elements need more loop iterations per invocation than this device "
                          "allows (%u); split the axis and add the carries", (unsigned long long)c.n,
                          caps->max_loop_iterations);
    k->n_steps = 3;
    k->scratch_bytes = (size_t)(c.lanes * c.nb * 4);
    for (int st = 1; st <= 3; st++) {
        vf_status s = sc_step(e, caps, err, &k->step[st - 1], &c, st);
        if (s != VF_OK) return s;
    }
    return VF_OK;
}

/* ---- top_k ------------------------------------------------------------------
   One invocation per input element finds its rank in its row (how many
   elements come before it: larger, NaN above numbers, ties by lower index)
   and, when the rank is below k, writes its value (TOP_K) or index
   (TOP_K_INDICES) there: the ranks are a permutation, so every output is
   written once and the result is sorted and deterministic. An element
   stops counting once k elements come before it (it is not taken), so a
   row costs about k n log(n / k) comparisons on shuffled data and n^2 at
   worst (a sorted ascending row). Where n
   is longer than one invocation may loop, the count is split over up to 4
   steps that carry partial counts in scratch. */
static vf_status tk_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d, uint64_t n,
                         uint64_t rows, uint64_t kk, uint64_t j0, uint64_t j1, bool first, bool last)
{
    const vf_tref *x = &e->in[0];
    vf_ctype ct = cg_ctype_of(x->dtype);
    const char *cn = cg_ctype_name(ct);
    bool want_idx = e->op == VF_OP_TOP_K_INDICES;
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    snprintf(g.d->name, sizeof g.d->name, "%s_%s%s%s", want_idx ? "top_k_idx" : "top_k", cg_dtype_tag(x->dtype),
             first ? "" : "_more", last ? "" : "_part");
    snprintf(g.comment, sizeof g.comment,
             "op %s: %s rows of n along the last axis; each element counts the elements before it "
             "(larger; NaN above numbers; ties by lower index) over [pc.j0, pc.j1)%s%s",
             vf_op_get(e->op)->name, vf_dtype_name(x->dtype), first ? "" : ", adding the count so far",
             last ? ", and writes itself at that rank when it is below k" : ", the count to scratch");
    cg_bind(&g, VF_BIND_IN0, x->dtype, "xv", true, false);
    if (last) cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, false);
    if (!(first && last)) cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", false, false);
    cg_load_fn(&g, "ld_x", "xv", x->dtype, ct);
    if (last) cg_store_fn(&g, "st_o", "outv", e->out.dtype, want_idx ? VF_CT_UINT : ct);
    if (ct == VF_CT_FLOAT)
        vf_sb_puts(&g.decl, "bool before(float a, uint ia, float b, uint ib)\n"
                            "{\n    bool na = isnan(a), nb = isnan(b);\n"
                            "    if (na || nb) return na && (!nb || ia < ib);\n"
                            "    return a > b || (a == b && ia < ib);\n}\n");
    else
        vf_sb_add(&g.decl, "bool before(%s a, uint ia, %s b, uint ib) { return a > b || (a == b && ia < ib); }\n", cn,
                  cn);
    cg_push_u32(&g, "n", (uint32_t)n);
    cg_push_u32(&g, "numel", (uint32_t)(n * rows));
    cg_push_u32(&g, "k", (uint32_t)kk);
    cg_push_u32(&g, "j0", (uint32_t)j0);
    cg_push_u32(&g, "j1", (uint32_t)j1);
    cg_workgroup(&g, cg_clamp_wg(caps, 64, false));
    vf_sb_add(&g.body,
              "void main()\n{\n"
              "    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
              "    if (t >= pc.numel) return;\n"
              "    uint i = t %% pc.n, base = t - i;\n"
              "    %s v = ld_x(t);\n"
              "    uint rank = %s;\n"
              "    for (uint j = pc.j0; j < pc.j1 && rank < pc.k; j++)   // past k it is not taken: stop\n"
              "        if (before(ld_x(base + j), j, v, i)) rank++;\n",
              cn, first ? "0u" : "sc[t]");
    if (!last) vf_sb_puts(&g.body, "    sc[t] = rank;\n}\n");
    else
        vf_sb_add(&g.body, "    if (rank < pc.k) st_o((base / pc.n) * pc.k + rank, %s);\n}\n", want_idx ? "i" : "v");
    cg_groups_linear(&g, (n * rows + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}

static vf_status gen_top_k(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_tref *x = &e->in[0];
    if (!cg_dtype_supported(e, caps, x->dtype, err)) return VF_ERROR_UNSUPPORTED;
    uint64_t n = (uint64_t)x->shape[x->rank - 1], rows = (uint64_t)cg_numel(x) / n, kk = (uint64_t)e->attrs.value;
    uint32_t wg = cg_clamp_wg(caps, 64, false);
    uint64_t chunk = cg_loop_budget(caps) / grid_rounds(caps, (n * rows + wg - 1) / wg);
    if (chunk == 0) chunk = 1;
    uint64_t steps = (n + chunk - 1) / chunk;
    if (steps > VF_KERNEL_MAX_STEPS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "top_k: rows of %llu elements need %llu loop iterations per invocation; this device ends "
                          "loops after %u (at most %llu elements per row here): reshape the row into parts, take "
                          "top_k of each and then of the winners", (unsigned long long)n, (unsigned long long)n,
                          caps->max_loop_iterations, (unsigned long long)(chunk * VF_KERNEL_MAX_STEPS));
    chunk = (n + steps - 1) / steps;
    k->n_steps = (int)steps;
    if (steps > 1) k->scratch_bytes = (size_t)(n * rows * 4);
    for (uint64_t t = 0; t < steps; t++) {
        uint64_t j0 = t * chunk, j1 = j0 + chunk < n ? j0 + chunk : n;
        vf_status st = tk_step(e, caps, err, &k->step[t], n, rows, kk, j0, j1, t == 0, t + 1 == steps);
        if (st != VF_OK) return st;
    }
    return VF_OK;
}

vf_status vf_codegen_index(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    if (e->op == VF_OP_IOTA) return gen_iota(e, caps, k, err);
    if (e->op >= VF_OP_RNG_UNIFORM && e->op <= VF_OP_RNG_ADVANCE) return vf_codegen_rng(e, caps, k, err);
    if (cg_numel(&e->in[0]) > (int64_t)UINT32_MAX) return too_big(e, &e->in[0], "x", err);
    switch (e->op) {
    case VF_OP_GATHER: return gen_gather(e, caps, k, err);
    case VF_OP_SCATTER_ADD: return vf_codegen_scatter(e, caps, k, err);
    case VF_OP_CUMSUM: return gen_cumsum(e, caps, k, err);
    case VF_OP_TOP_K:
    case VF_OP_TOP_K_INDICES: return gen_top_k(e, caps, k, err);
    default: break;
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL generator", vf_op_get(e->op)->name);
}
