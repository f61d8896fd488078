/* scatter_add's kernels (VF_OP_SCATTER_ADD), deterministic and without
 * atomics: x seen as [outer, n, inner], the indices as J flat positions,
 * the updates as [outer, J, inner]. Each row's list of indices is built in
 * index order, then one invocation per output element adds the updates of
 * its row's list to x in that order. An index outside [0, n) is in no
 * list: its update is dropped.
 *
 * Every loop of these kernels runs over indices, so on a device with a
 * loop limit (llvmpipe: cg_loop_budget) long index lists take the blocked
 * path below instead of failing: any J that 32-bit indexing allows. */
#include "vulkan/codegen/codegen_internal.h"

#include <stdio.h>

#define SA_LOCAL 256u

typedef struct {
    vf_dtype dt;
    vf_ctype ct;
    uint64_t outer, n, inner, J, numel;
    uint64_t Bs, nb;   /* blocked path: blocks of Bs indices, nb of them */
} sa_info;

/* The work bound, in loop iterations of all invocations together (each a
   load and a comparison): building the rows' lists costs (n + 1) x J (a
   count per row over the indices) plus J x J / 2 (short path) or J x Bs /
   2 (blocked) to place each index, and the adds one per update. Measured
   on lavapipe on an idle machine (2 cores): 8.9e8 per second (150,000
   rows x 262,144 indices: 44 s); 2^34 is about 19 s there, so within the
   120 s fence timeout on a machine busy enough to run it three times
   slower. A GPU runs 100 times that; 2^40 keeps the margin. Past it the
   op is refused up front, naming the most indices that fit, instead of
   losing the context to a fence timeout. */
#define SA_WORK_MAX_CPU (1ull << 34)
#define SA_WORK_MAX_GPU (1ull << 40)

static double sa_work(const sa_info *s, uint64_t place)
{
    return (double)(s->n + 1) * (double)s->J + (double)s->J * (double)place / 2.0 +
           (double)s->outer * (double)s->inner * (double)s->J;
}

/* The most indices whose work fits max with these rows, each count planned
   as vf_codegen_scatter plans it (sa_plan); 0: none. */
static bool sa_plan(const vf_device_caps *caps, sa_info *s, uint64_t *most);
static uint64_t sa_most_indices(const vf_device_caps *caps, const sa_info *s, double max)
{
    uint64_t lo = 0, hi = s->J;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2, most = 0;
        sa_info t = *s;
        t.J = mid;
        if (sa_plan(caps, &t, &most) && sa_work(&t, t.nb ? t.Bs : t.J) <= max) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static uint64_t sa_rounds(const vf_device_caps *caps, uint64_t items, uint32_t wg)
{
    return cg_grid_rounds(caps, (items + wg - 1) / wg);
}

static const char *sa_zero(vf_ctype ct) { return ct == VF_CT_FLOAT ? "0.0" : ct == VF_CT_INT ? "0" : "0u"; }
static const char *sa_to_bits(vf_ctype ct) { return ct == VF_CT_FLOAT ? "floatBitsToUint" : "uint"; }
static const char *sa_from_bits(vf_ctype ct)
{
    return ct == VF_CT_FLOAT ? "uintBitsToFloat" : ct == VF_CT_INT ? "int" : "uint";
}

/* One dispatch. Short path (nb == 0), scratch = start[n + 1], list[J]:
     0: per row r <= n, start[r] = the valid indices below r (loops J);
     1: per index j, list[start[idx[j]] + earlier equal indices] = j (loops j);
     2: per output element, x plus its row's list in order (loops the list).
   Blocked path, scratch = start, list, cnt[nb][n + 1], part[nb][outer][inner]:
     0: per (block b, row r <= n), cnt = the valid indices of block b below r;
     1: per row, start[r] = the sum of its counts over the blocks;
     2: per index j, its place: start, plus its equals in earlier blocks
        (from cnt), plus its earlier equals in its own block;
     3: per (list block q, column), part = the updates from list position
        q * Bs to the end of that block or of the row holding it;
     4: per output element, x plus its row's list up to the first block
        boundary, then the parts of the blocks its list reaches.
   Each loop is at most Bs + nb long. */
static vf_status sa_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d,
                         const sa_info *s, int step)
{
    bool blocked = s->nb != 0;
    bool adds = blocked ? step >= 3 : step == 2;   /* reads updates */
    bool last = blocked ? step == 4 : step == 2;
    const char *cn = cg_ctype_name(s->ct);
    static const char *const what[2][5] = {
        {"step 1 of 3: per row r <= n, start[r] = the valid indices below r",
         "step 2 of 3: per index j, list[start[idx[j]] + earlier equal indices] = j",
         "step 3 of 3: per output element, x plus the updates of its row's list in index order"},
        {"step 1 of 5: per (index block, row r <= n), the block's valid indices below r",
         "step 2 of 5: per row, start[r] = its counts summed over the blocks",
         "step 3 of 5: per index j, list[start + equals in earlier blocks + earlier equals in its block] = j",
         "step 4 of 5: per (list block, column), the updates from the block's start to the end of the block or row",
         "step 5 of 5: per output element, x plus its row's list to the first block boundary, then block parts"}};
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    snprintf(g.d->name, sizeof g.d->name, "scatter_add_%s_%s_%s%d", cg_dtype_tag(s->dt), cg_dtype_tag(e->in[1].dtype),
             blocked ? "b" : "", step + 1);
    snprintf(g.comment, sizeof g.comment,
             "op scatter_add: %s along axis %d; x as [outer, n, inner], updates [outer, J, inner]; %s",
             vf_dtype_name(s->dt), e->attrs.axis, what[blocked][step]);
    if (last) cg_bind(&g, VF_BIND_IN0, s->dt, "xv", true, false);
    cg_bind(&g, VF_BIND_IN1, e->in[1].dtype, "iv", true, false);
    if (adds) cg_bind(&g, VF_BIND_IN2, s->dt, "uv", true, false);
    if (last) cg_bind(&g, VF_BIND_OUT, s->dt, "outv", false, false);
    cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", last, false);
    if (adds) cg_load_fn(&g, "ld_u", "uv", s->dt, s->ct);
    if (last) {
        cg_load_fn(&g, "ld_x", "xv", s->dt, s->ct);
        cg_store_fn(&g, "st_o", "outv", s->dt, s->ct);
    }
    cg_push_u32(&g, "numel", (uint32_t)s->numel);
    cg_push_u32(&g, "n", (uint32_t)s->n);
    cg_push_u32(&g, "outer", (uint32_t)s->outer);
    cg_push_u32(&g, "inner", (uint32_t)s->inner);
    cg_push_u32(&g, "J", (uint32_t)s->J);
    if (blocked) {
        cg_push_u32(&g, "Bs", (uint32_t)s->Bs);
        cg_push_u32(&g, "nb", (uint32_t)s->nb);
        cg_push_u32(&g, "oc", (uint32_t)(s->n + 1 + s->J));                       /* cnt */
        cg_push_u32(&g, "op", (uint32_t)(s->n + 1 + s->J + s->nb * (s->n + 1)));   /* part */
    }
    cg_workgroup(&g, cg_clamp_wg(caps, adds ? SA_LOCAL : 64, false));
    vf_sb *b = &g.body;
    /* list[p] lives at sc[n + 1 + p]; uint(i32) of a negative index is
       >= 2^31 > n, so one comparison checks both ends */
    vf_sb_puts(b, "void main()\n{\n    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n");
    uint64_t items = 0;
    if (!blocked && step == 0) {
        items = s->n + 1;
        vf_sb_puts(b, "    if (t > pc.n) return;\n"
                      "    uint cnt = 0u;\n"
                      "    for (uint j = 0u; j < pc.J; j++)\n"
                      "        if (uint(iv[j]) < t) cnt++;\n"
                      "    sc[t] = cnt;\n");
    } else if (!blocked && step == 1) {
        items = s->J;
        vf_sb_puts(b, "    if (t >= pc.J) return;\n"
                      "    uint k = uint(iv[t]);\n"
                      "    if (k >= pc.n) return;   // out of range: dropped\n"
                      "    uint pos = sc[k];\n"
                      "    for (uint j = 0u; j < t; j++)\n"
                      "        if (uint(iv[j]) == k) pos++;\n"
                      "    sc[pc.n + 1u + pos] = t;\n");
    } else if (step == 0) {
        items = s->nb * (s->n + 1);
        vf_sb_puts(b, "    if (t >= pc.nb * (pc.n + 1u)) return;\n"
                      "    uint blk = t / (pc.n + 1u), r = t % (pc.n + 1u), cnt = 0u;\n"
                      "    uint j1 = min(pc.J, (blk + 1u) * pc.Bs);\n"
                      "    for (uint j = blk * pc.Bs; j < j1; j++)\n"
                      "        if (uint(iv[j]) < r) cnt++;\n"
                      "    sc[pc.oc + t] = cnt;\n");
    } else if (step == 1) {
        items = s->n + 1;
        vf_sb_puts(b, "    if (t > pc.n) return;\n"
                      "    uint sum = 0u;\n"
                      "    for (uint blk = 0u; blk < pc.nb; blk++) sum += sc[pc.oc + blk * (pc.n + 1u) + t];\n"
                      "    sc[t] = sum;\n");
    } else if (step == 2 && !last) {
        items = s->J;
        vf_sb_puts(b, "    if (t >= pc.J) return;\n"
                      "    uint k = uint(iv[t]);\n"
                      "    if (k >= pc.n) return;   // out of range: dropped\n"
                      "    uint blk = t / pc.Bs, pos = sc[k];\n"
                      "    for (uint q = 0u; q < blk; q++) {\n"
                      "        uint at = pc.oc + q * (pc.n + 1u) + k;\n"
                      "        pos += sc[at + 1u] - sc[at];   // block q's indices equal to k\n"
                      "    }\n"
                      "    for (uint j = blk * pc.Bs; j < t; j++)\n"
                      "        if (uint(iv[j]) == k) pos++;\n"
                      "    sc[pc.n + 1u + pos] = t;\n");
    } else if (step == 3 && !last) {
        items = s->nb * s->outer * s->inner;
        vf_sb_add(b, "    if (t >= pc.nb * pc.outer * pc.inner) return;\n"
                     "    uint c = t %% pc.inner, q = t / pc.inner;\n"
                     "    uint o = q %% pc.outer, blk = q / pc.outer;\n"
                     "    uint p0 = blk * pc.Bs;\n"
                     "    if (blk == 0u || p0 >= sc[pc.n]) return;   // block 0 or past the list: never read\n"
                     "    uint row = uint(iv[sc[pc.n + 1u + p0]]);\n"
                     "    uint end = min(sc[row + 1u], p0 + pc.Bs), ub = o * pc.J * pc.inner + c;\n"
                     "    %s acc = %s;\n"
                     "    for (uint p = p0; p < end; p++)\n"
                     "        acc += ld_u(ub + sc[pc.n + 1u + p] * pc.inner);\n"
                     "    sc[pc.op + t] = %s(acc);\n", cn, sa_zero(s->ct), sa_to_bits(s->ct));
    } else {
        items = s->numel;
        vf_sb_add(b, "    if (t >= pc.numel) return;\n"
                     "    uint c = t %% pc.inner, q = t / pc.inner;\n"
                     "    uint r = q %% pc.n, o = q / pc.n;\n"
                     "    %s acc = ld_x(t);\n"
                     "    uint ub = o * pc.J * pc.inner + c, p0 = sc[r], end = sc[r + 1u];\n",
                  cn);
        if (!blocked)
            vf_sb_puts(b, "    for (uint p = p0; p < end; p++)\n"
                          "        acc += ld_u(ub + sc[pc.n + 1u + p] * pc.inner);\n");
        else
            vf_sb_add(b, "    uint blk = p0 / pc.Bs + 1u;   // the first block boundary past p0\n"
                         "    for (uint p = p0; p < min(end, blk * pc.Bs); p++)\n"
                         "        acc += ld_u(ub + sc[pc.n + 1u + p] * pc.inner);\n"
                         "    for (; blk * pc.Bs < end; blk++)\n"
                         "        acc += %s(sc[pc.op + (blk * pc.outer + o) * pc.inner + c]);\n",
                      sa_from_bits(s->ct));
        vf_sb_puts(b, "    st_o(t, acc);\n");
    }
    vf_sb_puts(b, "}\n");
    cg_groups_linear(&g, (items + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}

/* The most grid rounds any step of the path runs (nb == 0: the short one). */
static uint64_t sa_max_rounds(const vf_device_caps *caps, const sa_info *s, uint64_t nb)
{
    uint32_t w64 = cg_clamp_wg(caps, 64, false), w256 = cg_clamp_wg(caps, SA_LOCAL, false);
    uint64_t r[4] = {sa_rounds(caps, (nb ? nb : 1) * (s->n + 1), w64), sa_rounds(caps, s->J, w64),
                     sa_rounds(caps, s->numel, w256), sa_rounds(caps, nb * s->outer * s->inner, w256)};
    uint64_t m = 1;
    for (int i = 0; i < 4; i++) m = r[i] > m ? r[i] : m;
    return m;
}

/* The fewest blocks nb >= 2 whose loops, Bs + nb with nb x Bs >= J,
   fit `per` iterations: nb x (per - nb) >= J; 0 when none does. *most:
   the most indices blocks can take at this per, (per / 2) x (per - per / 2). */
static uint64_t sa_blocks(uint64_t J, uint64_t per, uint64_t *most)
{
    uint64_t half = per / 2;
    *most = half * (per - half);
    if (half < 2 || *most < J) return 0;
    uint64_t lo = 2, hi = half;   /* nb x (per - nb) grows on [0, per / 2] */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (mid * (per - mid) >= J) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* The path for s (s->nb, s->Bs: 0 for the short path): false when even
   blocks need longer loops than the device runs (*most: the most indices
   that would fit). */
static bool sa_plan(const vf_device_caps *caps, sa_info *s, uint64_t *most)
{
    s->nb = s->Bs = 0;
    uint64_t budget = cg_loop_budget(caps);
    if (s->J * sa_max_rounds(caps, s, 0) <= budget) return true;
    /* blocks of Bs indices: every loop is at most Bs + nb long, times
       the grid rounds, which grow with nb (steps 1 and 4). Placing an
       index costs its block (J x Bs / 2 comparisons in all) and the
       counts take nb x (n + 1) words: blocks of 1024 or J / 64,
       whichever is longer, fewer and longer where the budget demands */
    uint64_t Bs0 = s->J / 64 > 1024 ? s->J / 64 : 1024, nb = 2;
    for (int tries = 0; tries < 8 && !s->nb; tries++) {
        uint64_t per = budget / sa_max_rounds(caps, s, nb), lo = sa_blocks(s->J, per, most);
        if (!lo) break;
        uint64_t want = (s->J + Bs0 - 1) / Bs0;
        nb = want < lo ? lo : want > per - lo ? per - lo : want;
        uint64_t Bs = (s->J + nb - 1) / nb;
        nb = (s->J + Bs - 1) / Bs;
        if (nb >= 2 && (Bs + nb) * sa_max_rounds(caps, s, nb) <= budget) s->nb = nb, s->Bs = Bs;
    }
    uint64_t words = s->n + 1 + s->J + s->nb * (s->n + 1) + s->nb * s->outer * s->inner;
    /* list positions run to J + Bs in the shaders' block arithmetic */
    return s->nb && s->nb * (s->n + 1) <= UINT32_MAX && words <= UINT32_MAX && s->J + 2 * s->Bs <= UINT32_MAX;
}

vf_status vf_codegen_scatter(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    if (!cg_dtype_supported(e, caps, e->out.dtype, err)) return VF_ERROR_UNSUPPORTED;
    const vf_tref *x = &e->in[0];
    int axis = e->attrs.axis;
    sa_info s = {.dt = e->out.dtype, .ct = cg_ctype_of(e->out.dtype), .outer = 1, .n = (uint64_t)x->shape[axis],
                 .inner = 1, .J = (uint64_t)cg_numel(&e->in[1]), .numel = (uint64_t)cg_numel(&e->out)};
    for (int d = 0; d < axis; d++) s.outer *= (uint64_t)x->shape[d];
    for (int d = axis + 1; d < x->rank; d++) s.inner *= (uint64_t)x->shape[d];
    if ((uint64_t)cg_numel(&e->in[2]) > UINT32_MAX || s.n + 1 + s.J > UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "scatter_add: %llu indices and %llu updates; kernels index with 32 bits (at most %u "
                          "updates, and rows + indices below that): split the indices and add the results",
                          (unsigned long long)s.J, (unsigned long long)cg_numel(&e->in[2]), UINT32_MAX);
    uint64_t most = 0;
    if (!sa_plan(caps, &s, &most))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "scatter_add: %llu indices into %llu rows need more loop iterations per invocation "
                          "than this device allows (%u) even in blocks: at most %llu indices per call here; "
                          "split the indices and add the results", (unsigned long long)s.J,
                          (unsigned long long)s.n, caps->max_loop_iterations, (unsigned long long)most);
    k->n_steps = s.nb ? 5 : 3;
    k->scratch_bytes = (size_t)(s.nb ? s.n + 1 + s.J + s.nb * (s.n + 1) + s.nb * s.outer * s.inner : s.n + 1 + s.J) * 4;
    double work = sa_work(&s, s.nb ? s.Bs : s.J), max = (double)(caps->is_cpu ? SA_WORK_MAX_CPU : SA_WORK_MAX_GPU);
    if (work > max)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "scatter_add: %llu indices into %llu rows of %llu elements need about %.3g loop iterations, "
                          "more than one op may take (%.3g) to end well within the fence timeout: at most %llu "
                          "indices per call into these rows here; split the indices and add the results, or use "
                          "the CPU backend", (unsigned long long)s.J, (unsigned long long)s.n,
                          (unsigned long long)s.inner, work, max, (unsigned long long)sa_most_indices(caps, &s, max));
    for (int t = 0; t < k->n_steps; t++) {
        vf_status st = sa_step(e, caps, err, &k->step[t], &s, t);
        if (st != VF_OK) return st;
    }
    return VF_OK;
}
