/* Kernels of cumsum: running sums along an axis, a multi-level scan.
 *
 * x as [outer, n, inner]: a lane is one (outer, inner) pair, its n
 * elements strided by inner (adjacent lanes read adjacent memory). The
 * scan runs in "scan order" p = 0..n-1, the axis index k = p, or n-1-p
 * when reversed. A row of at most B elements: one step, one invocation
 * per lane looping over its row. Longer rows are cut into blocks of B
 * scan positions, and the block totals are scanned the same way:
 *   blocks:   one invocation per (lane, block) scans its block of x into
 *             the output and writes the block's total: level 1, nb_1 =
 *             ceil(n / B) totals per lane;
 *   totals l: while level l has more than B totals per lane, one
 *             invocation per (lane, block of them) turns its block into
 *             exclusive prefix sums in place and writes the block's total
 *             to level l + 1;
 *   top:      one invocation per lane turns the last level (at most B
 *             per lane) into exclusive prefix sums;
 *   carry l:  back down, every total of level l adds its block's prefix
 *             from level l + 1;
 *   add:      every element adds its block's prefix from level 1.
 * Every invocation loops at most B times, every step does O(its size)
 * work, so any row runs in 2L + 1 steps for L levels (a row of 2^25 on
 * lavapipe: 3 levels, 7 steps). B is 256, less where the device's loop
 * budget divided by the grid rounds is smaller (VKFUSE_TEST_LIMITS). The
 * levels' totals (as uint bits) lie one after another in scratch. */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>

#define SC_BLOCK 256u
#define SC_LEVELS ((VF_KERNEL_MAX_STEPS - 1) / 2)   /* 2L + 1 steps */

typedef enum { SC_ONE, SC_BLOCKS, SC_TOTALS, SC_TOP, SC_CARRY, SC_ADD } sc_kind;

typedef struct {
    vf_dtype dt;
    vf_ctype ct;
    bool excl, rev;
    uint64_t outer, n, inner, lanes, B;
    int levels;                        /* L: levels of totals, 1.. */
    uint64_t nb[SC_LEVELS + 2];        /* totals per lane of level l (nb[0] = n) */
    uint64_t off[SC_LEVELS + 2];       /* where level l starts in scratch (uints) */
} sc_info;

static const char *sc_zero(vf_ctype ct) { return ct == VF_CT_FLOAT ? "0.0" : ct == VF_CT_INT ? "0" : "0u"; }
static const char *sc_to_bits(vf_ctype ct) { return ct == VF_CT_FLOAT ? "floatBitsToUint" : "uint"; }
static const char *sc_from_bits(vf_ctype ct)
{
    return ct == VF_CT_FLOAT ? "uintBitsToFloat" : ct == VF_CT_INT ? "int" : "uint";
}

/* a row scan over scan positions [p0, p1) of a lane: the body of steps
   ONE and BLOCKS */
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

/* exclusive prefix sums in place over sc[at + b0 .. at + b1), the total in acc */
static void sc_excl(vf_sb *s, const sc_info *c, const char *cn)
{
    vf_sb_add(s,
              "    %s acc = %s;\n"
              "    for (uint b = b0; b < b1; b++) {\n"
              "        %s v = %s(sc[at + b]);\n"
              "        sc[at + b] = %s(acc);\n"
              "        acc += v;\n"
              "    }\n", cn, sc_zero(c->ct), cn, sc_from_bits(c->ct), sc_to_bits(c->ct));
}

/* One step; lv: the level of totals it scans or carries into (TOTALS,
   TOP, CARRY: lo = level lv, hi = level lv + 1; BLOCKS, ADD: hi = 1). */
static vf_status sc_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d, const sc_info *c,
                         sc_kind kind, int lv)
{
    const char *cn = cg_ctype_name(c->ct);
    static const char *const tag[6] = {"one", "blocks", "totals", "top", "carry", "add"};
    static const char *const what[6] = {
        "one invocation per lane scans its row",
        "one invocation per (lane, block) scans the block, its total to level 1",
        "one invocation per (lane, block of level pc.lo's totals): exclusive sums in place, the block's total up",
        "one invocation per lane: exclusive sums of the last level's totals in place",
        "every total of the level below adds its block's prefix from the level above",
        "every element adds its block's prefix from level 1"};
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    snprintf(g.d->name, sizeof g.d->name, "cumsum_%s%s%s_%s", cg_dtype_tag(c->dt), c->excl ? "_excl" : "",
             c->rev ? "_rev" : "", tag[kind]);
    snprintf(g.comment, sizeof g.comment, "op cumsum: %s along axis %d%s%s; x as [outer, n, inner]; %s",
             vf_dtype_name(c->dt), e->attrs.axis, c->excl ? ", exclusive" : "", c->rev ? ", reversed" : "",
             what[kind]);
    bool reads_x = kind == SC_ONE || kind == SC_BLOCKS, writes_out = reads_x || kind == SC_ADD;
    if (reads_x) cg_bind(&g, VF_BIND_IN0, c->dt, "xv", true, false);
    if (writes_out) cg_bind(&g, VF_BIND_OUT, c->dt, "outv", false, false);
    if (kind != SC_ONE) cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", kind == SC_ADD, false);
    if (reads_x) cg_load_fn(&g, "ld_x", "xv", c->dt, c->ct);
    if (kind == SC_ADD) cg_load_fn(&g, "ld_o", "outv", c->dt, c->ct);
    if (writes_out) cg_store_fn(&g, "st_o", "outv", c->dt, c->ct);
    int lo = kind == SC_BLOCKS || kind == SC_ADD ? 0 : lv, hi = lo + 1;
    cg_push_u32(&g, "n", (uint32_t)c->n);
    cg_push_u32(&g, "inner", (uint32_t)c->inner);
    cg_push_u32(&g, "lanes", (uint32_t)c->lanes);
    cg_push_u32(&g, "B", (uint32_t)c->B);
    cg_push_u32(&g, "nb_lo", (uint32_t)c->nb[lo]);
    cg_push_u32(&g, "off_lo", (uint32_t)c->off[lo]);
    cg_push_u32(&g, "nb_hi", (uint32_t)c->nb[hi]);
    cg_push_u32(&g, "off_hi", (uint32_t)c->off[hi]);
    cg_workgroup(&g, cg_clamp_wg(caps, 64, false));
    uint32_t wg = cg_wg(&g);
    vf_sb *s = &g.body;
    vf_sb_puts(s, "void main()\n{\n    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n");
    uint64_t items = 0;
    switch (kind) {
    case SC_ONE:
        items = c->lanes;
        vf_sb_puts(s, "    if (t >= pc.lanes) return;\n    uint lane = t, p0 = 0u, p1 = pc.n;\n");
        sc_loop(s, c, cn);
        break;
    case SC_BLOCKS:
        items = c->lanes * c->nb[1];
        vf_sb_puts(s, "    if (t >= pc.lanes * pc.nb_hi) return;\n"
                      "    uint lane = t / pc.nb_hi, blk = t % pc.nb_hi;\n"
                      "    uint p0 = blk * pc.B, p1 = min(pc.n, p0 + pc.B);\n");
        sc_loop(s, c, cn);
        vf_sb_add(s, "    sc[pc.off_hi + t] = %s(acc);\n", sc_to_bits(c->ct));
        break;
    case SC_TOTALS:
        items = c->lanes * c->nb[hi];
        vf_sb_puts(s, "    if (t >= pc.lanes * pc.nb_hi) return;\n"
                      "    uint lane = t / pc.nb_hi, blk = t % pc.nb_hi, at = pc.off_lo + lane * pc.nb_lo;\n"
                      "    uint b0 = blk * pc.B, b1 = min(pc.nb_lo, b0 + pc.B);\n");
        sc_excl(s, c, cn);
        vf_sb_add(s, "    sc[pc.off_hi + t] = %s(acc);\n", sc_to_bits(c->ct));
        break;
    case SC_TOP:
        items = c->lanes;
        vf_sb_puts(s, "    if (t >= pc.lanes) return;\n"
                      "    uint at = pc.off_lo + t * pc.nb_lo, b0 = 0u, b1 = pc.nb_lo;\n");
        sc_excl(s, c, cn);
        break;
    case SC_CARRY:
        items = c->lanes * c->nb[lo];
        vf_sb_add(s, "    if (t >= pc.lanes * pc.nb_lo) return;\n"
                     "    uint lane = t / pc.nb_lo, blk = (t %% pc.nb_lo) / pc.B;\n"
                     "    if (blk == 0u) return;   // the first block's prefix is zero\n"
                     "    %s v = %s(sc[pc.off_lo + t]) + %s(sc[pc.off_hi + lane * pc.nb_hi + blk]);\n"
                     "    sc[pc.off_lo + t] = %s(v);\n",
                  cn, sc_from_bits(c->ct), sc_from_bits(c->ct), sc_to_bits(c->ct));
        break;
    case SC_ADD:
        items = c->lanes * c->n;
        vf_sb_add(s, "    if (t >= pc.lanes * pc.n) return;\n"
                     "    uint cc = t %% pc.inner, q = t / pc.inner;\n"
                     "    uint k = q %% pc.n, o = q / pc.n;\n"
                     "    uint blk = (%s) / pc.B;\n"
                     "    if (blk == 0u) return;\n"
                     "    st_o(t, ld_o(t) + %s(sc[pc.off_hi + (o * pc.inner + cc) * pc.nb_hi + blk]));\n",
                  c->rev ? "pc.n - 1u - k" : "k", sc_from_bits(c->ct));
        break;
    }
    vf_sb_puts(s, "}\n");
    cg_groups_linear(&g, (items + wg - 1) / wg);
    return cg_finish(&g, NULL);
}

vf_status vf_codegen_cumsum(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_tref *x = &e->in[0];
    if (!cg_dtype_supported(e, caps, x->dtype, err)) return VF_ERROR_UNSUPPORTED;
    sc_info c = {.dt = x->dtype, .ct = cg_ctype_of(x->dtype), .excl = e->attrs.trans_a, .rev = e->attrs.trans_b};
    int axis = e->attrs.axis;
    c.outer = 1, c.n = (uint64_t)x->shape[axis], c.inner = 1;
    for (int d = 0; d < axis; d++) c.outer *= (uint64_t)x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) c.inner *= (uint64_t)x->shape[d];
    c.lanes = c.outer * c.inner;
    /* Every step's invocations loop at most B times per grid round; the
       last step has the most invocations (one per element), hence the
       most rounds. */
    uint64_t budget = cg_loop_budget(caps);
    uint32_t wg = cg_clamp_wg(caps, 64, false);
    uint64_t rounds = cg_grid_rounds(caps, (c.lanes * c.n + wg - 1) / wg);
    c.B = budget / rounds < SC_BLOCK ? budget / rounds : SC_BLOCK;
    c.nb[0] = c.n;
    if (c.n <= c.B) {
        k->n_steps = 1;
        return sc_step(e, caps, err, &k->step[0], &c, SC_ONE, 0);
    }
    uint64_t total = 0;
    c.levels = 0;
    while (c.B >= 2 && c.levels < SC_LEVELS && c.nb[c.levels] > c.B) {
        c.levels++;
        c.nb[c.levels] = (c.nb[c.levels - 1] + c.B - 1) / c.B;
        c.off[c.levels] = total;
        total += c.lanes * c.nb[c.levels];
    }
    if (c.B < 2 || c.nb[c.levels] > c.B || total > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "cumsum: rows of %llu elements need more than %d levels of block sums with blocks of %llu "
                          "(this device runs %u loop iterations per invocation, over %llu grid rounds here): "
                          "split the axis and add the carries", (unsigned long long)c.n, SC_LEVELS,
                          (unsigned long long)c.B, cg_loop_budget(caps), (unsigned long long)rounds);
    if (caps->max_storage_buffer_range && total * 4 > caps->max_storage_buffer_range)   /* only with blocks of 2 */
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "cumsum: rows of %llu elements in blocks of %llu need %llu bytes of block sums, more than "
                          "one storage binding holds here (%llu): split the axis and add the carries",
                          (unsigned long long)c.n, (unsigned long long)c.B, (unsigned long long)(total * 4),
                          (unsigned long long)caps->max_storage_buffer_range);
    int n = 0;
    vf_status st = sc_step(e, caps, err, &k->step[n++], &c, SC_BLOCKS, 0);
    for (int l = 1; !st && l < c.levels; l++) st = sc_step(e, caps, err, &k->step[n++], &c, SC_TOTALS, l);
    if (!st) st = sc_step(e, caps, err, &k->step[n++], &c, SC_TOP, c.levels);
    for (int l = c.levels - 1; !st && l >= 1; l--) st = sc_step(e, caps, err, &k->step[n++], &c, SC_CARRY, l);
    if (!st) st = sc_step(e, caps, err, &k->step[n++], &c, SC_ADD, 0);
    k->n_steps = n;
    k->scratch_bytes = (size_t)(total * 4);
    return st;
}
