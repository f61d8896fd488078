/* Kernels of top_k and top_k_indices: the k first elements of each row
 * (the last axis) in the order "larger first, NaN above every number,
 * ties by lower index", a strict total order on (value, index), so the
 * result is unique and deterministic.
 *
 * Block-wise selection, then merges of the winners:
 *   level 0: one invocation per block of B0 (<= 2048) elements of a row
 *     keeps the block's best cap = min(k, B0) in a heap (in scratch, by
 *     index; its root the worst kept): each element is compared with the
 *     root and, when better, replaces it (log2(cap) steps). A heap sort
 *     then leaves the block's list sorted. Work per element: one
 *     comparison, plus log2(cap) steps for those that enter the heap (few
 *     on shuffled data; all of them on an ascending row, the worst case).
 *   level l >= 1: G consecutive lists merge into one. A candidate at
 *     place p of its list has rank p + (how many of each other list of
 *     its group come before it): a binary search per other list, since
 *     the lists are sorted. Ranks below cap_l = min(k, span_l) are kept,
 *     each written once (the ranks are a permutation of the group's
 *     candidates). The last level (one list per row) writes the result:
 *     values (read back from x by index) or indices.
 * Lists hold indices (uint32) in a scratch buffer, levels alternating
 * between two regions. Work: O(n log k) per row at level 0, then
 * (G - 1) log2(cap) comparisons per candidate per level, over n k / B0
 * candidates and fewer each level once the lists hold k: a row of 262144
 * with k = 50 is 128 heaps and 6 small merges.
 *
 * Bounds: every dispatch stays within the device's loop budget (level 0
 * blocks shrink, the merges are checked); the steps fit
 * VF_KERNEL_MAX_STEPS (G is the smallest count that merges every row in
 * that many levels); the scratch fits one binding (maxStorageBufferRange);
 * and the op's loop iterations in all stay under a work bound, so that it
 * ends well within the fence timeout (120 s) even on a busy CPU device
 * such as lavapipe. Past a bound the op is refused up front, naming the
 * largest k that fits the shape. */
#include "vulkan/codegen/codegen_internal.h"

#include <stdio.h>

/* level 0's largest block: its heap's loops stay within lavapipe's budget */
#define TK_BLOCK 2048u
#define TK_LEVELS VF_KERNEL_MAX_STEPS
/* The work bound, in loop iterations of all invocations together (each a
   few loads and a comparison, counted for the worst case, an ascending
   row). Measured on lavapipe with the 2 cores shared by many processes
   (load 18): 3e7 - 5e7 per second, so 2^30 is about 35 s there (a few
   seconds on an idle machine), well within the 120 s fence timeout of a
   submission (scheduler.c). A GPU runs 100 times that; 2^36 keeps the
   same margin. */
#define TK_WORK_MAX_CPU (1ull << 30)
#define TK_WORK_MAX_GPU (1ull << 36)

typedef enum { TK_FITS, TK_LOOPS, TK_SCRATCH, TK_WORK } tk_why;

typedef struct {
    uint64_t n, rows, k;
    uint64_t B0, G;
    int levels;                    /* dispatches: level 0, then the merges */
    uint64_t span[TK_LEVELS];      /* elements of the row one list of level l covers */
    uint64_t cap[TK_LEVELS];       /* slots per list: min(k, span) */
    uint64_t lists[TK_LEVELS];     /* lists per row */
    uint64_t off[TK_LEVELS];       /* the level's list region in scratch (uints) */
    uint64_t scratch;              /* uints */
    double work;                   /* loop iterations of all invocations, worst case */
} tk_plan;

static uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

static double tk_work_max(const vf_device_caps *caps)
{
    return (double)(caps->is_cpu ? TK_WORK_MAX_CPU : TK_WORK_MAX_GPU);
}

static uint64_t log2_floor(uint64_t v)
{
    uint64_t r = 0;
    while (v >>= 1) r++;
    return r;
}

/* Binary-search steps over a sorted list of at most cap: floor(log2) + 1. */
static uint64_t search_steps(uint64_t cap) { return log2_floor(cap) + 1; }

/* Loop iterations of a level-0 invocation: the scan of its block, a
   heap step per element at most, the heap sort and the copy out. */
static uint64_t heap_loops(uint64_t B0, uint64_t cap)
{
    uint64_t depth = search_steps(cap);
    return B0 * (1 + depth) + cap * (depth + 1) + cap;
}

/* Level 0's block B0: the row, at most TK_BLOCK, halved until its heap's
   loops fit the budget at their grid rounds; then the smallest merge count
   G that needs at most TK_LEVELS levels in all, the levels' lists and
   scratch, and the bounds. */
static tk_why tk_plan_for(tk_plan *p, const vf_device_caps *caps, uint64_t k)
{
    uint64_t budget = cg_loop_budget(caps);
    uint32_t wg = cg_clamp_wg(caps, 64, false);
    p->k = k;
    p->B0 = p->n < TK_BLOCK ? p->n : TK_BLOCK;
    for (;; p->B0 = (p->B0 + 1) / 2) {
        uint64_t cap = p->k < p->B0 ? p->k : p->B0;
        if (heap_loops(p->B0, cap) * cg_grid_rounds(caps, ceil_div(p->rows * ceil_div(p->n, p->B0), wg)) <= budget)
            break;
        if (p->B0 == 1) return TK_LOOPS;
    }
    uint64_t m0 = ceil_div(p->n, p->B0);
    p->G = 2;
    for (uint64_t reach = 1, l = 0;; p->G++, reach = 1, l = 0) {
        while (l + 1 < TK_LEVELS && reach < m0) reach *= p->G, l++;
        if (reach >= m0) break;
    }
    p->levels = 1;
    p->span[0] = p->B0;
    p->lists[0] = m0;
    p->cap[0] = p->k < p->B0 ? p->k : p->B0;
    p->work = (double)(p->rows * m0) * (double)heap_loops(p->B0, p->cap[0]);
    while (p->lists[p->levels - 1] > 1) {
        int l = p->levels;   /* < TK_LEVELS by the choice of G */
        uint64_t in = p->rows * p->lists[l - 1] * p->cap[l - 1];
        p->span[l] = p->span[l - 1] * p->G;
        p->lists[l] = ceil_div(p->n, p->span[l]);
        p->cap[l] = p->lists[l] == 1 || p->k < p->span[l] ? p->k : p->span[l];
        uint64_t steps = search_steps(p->cap[l - 1]);
        p->work += (double)in * (double)(p->G - 1) * (double)steps;
        if (((p->G - 1) * steps + p->G) * cg_grid_rounds(caps, ceil_div(in, wg)) > budget) return TK_LOOPS;
        p->levels++;
    }
    /* even levels from 0, odd ones after the largest even one; the last
       level writes the result itself */
    uint64_t even = 0, odd = 0;
    for (int l = 0; l == 0 || l + 1 < p->levels; l++) {   /* level 0's heaps even when it is the last */
        uint64_t sz = p->rows * p->lists[l] * p->cap[l];
        if (l % 2 == 0 && sz > even) even = sz;
        if (l % 2 == 1 && sz > odd) odd = sz;
    }
    for (int l = 0; l < p->levels; l++) p->off[l] = l % 2 ? even : 0;
    p->scratch = even + odd;
    if (p->scratch > UINT32_MAX ||
        (caps->max_storage_buffer_range && p->scratch * 4 > caps->max_storage_buffer_range))
        return TK_SCRATCH;
    return p->work > tk_work_max(caps) ? TK_WORK : TK_FITS;
}

static void tk_before_fn(vf_cg *g, vf_ctype ct)
{
    const char *cn = cg_ctype_name(ct);
    if (ct == VF_CT_FLOAT)
        vf_sb_puts(&g->decl, "// a comes before b: larger; NaN above numbers; ties by lower index\n"
                             "bool before(float a, uint ia, float b, uint ib)\n"
                             "{\n    bool na = isnan(a), nb = isnan(b);\n"
                             "    if (na || nb) return na && (!nb || ia < ib);\n"
                             "    return a > b || (a == b && ia < ib);\n}\n");
    else
        vf_sb_add(&g->decl, "// a comes before b: larger; ties by lower index\n"
                            "bool before(%s a, uint ia, %s b, uint ib) { return a > b || (a == b && ia < ib); }\n",
                  cn, cn);
}

/* Dispatch l of plan p. */
static vf_status tk_step(const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d, const tk_plan *p,
                         int l)
{
    const vf_tref *x = &e->in[0];
    vf_ctype ct = cg_ctype_of(x->dtype);
    const char *cn = cg_ctype_name(ct);
    bool want_idx = e->op == VF_OP_TOP_K_INDICES, last = l + 1 == p->levels;
    vf_cg g;
    cg_begin(&g, e, caps, err, d);
    snprintf(g.d->name, sizeof g.d->name, "%s_%s_%s", want_idx ? "top_k_idx" : "top_k", cg_dtype_tag(x->dtype),
             l == 0 ? (last ? "one" : "blocks") : (last ? "merge_last" : "merge"));
    snprintf(g.comment, sizeof g.comment,
             "op %s: %s rows of n along the last axis; %s%s", vf_op_get(e->op)->name, vf_dtype_name(x->dtype),
             l == 0 ? "each invocation keeps its block's best pc.cap in a heap in scratch, then sorts them"
                    : "each candidate of a sorted list ranks itself in the merge of pc.G lists (binary searches)",
             last ? ", the first k write the result" : ", ranks below pc.cap write their index to the next lists");
    cg_bind(&g, VF_BIND_IN0, x->dtype, "xv", true, false);
    if (last) cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, false);
    cg_bind(&g, VF_BIND_SCRATCH, -1, "sc", false, false);
    cg_load_fn(&g, "ld_x", "xv", x->dtype, ct);
    if (last) cg_store_fn(&g, "st_o", "outv", e->out.dtype, want_idx ? VF_CT_UINT : ct);
    tk_before_fn(&g, ct);
    uint64_t items = l == 0 ? p->rows * p->lists[0] : p->rows * p->lists[l - 1] * p->cap[l - 1];
    cg_push_u32(&g, "n", (uint32_t)p->n);
    cg_push_u32(&g, "items", (uint32_t)items);
    cg_push_u32(&g, "k", (uint32_t)p->k);
    cg_push_u32(&g, "cap", (uint32_t)p->cap[l]);
    cg_push_u32(&g, "lists", (uint32_t)p->lists[l]);
    cg_push_u32(&g, "out_off", (uint32_t)p->off[l]);
    if (l == 0) {
        cg_push_u32(&g, "B", (uint32_t)p->B0);
    } else {
        cg_push_u32(&g, "G", (uint32_t)p->G);
        cg_push_u32(&g, "span_in", (uint32_t)p->span[l - 1]);
        cg_push_u32(&g, "cap_in", (uint32_t)p->cap[l - 1]);
        cg_push_u32(&g, "lists_in", (uint32_t)p->lists[l - 1]);
        cg_push_u32(&g, "in_off", (uint32_t)p->off[l - 1]);
        cg_push_u32(&g, "top", 1u << log2_floor(p->cap[l - 1]));
    }
    cg_workgroup(&g, cg_clamp_wg(caps, 64, false));
    vf_sb *s = &g.body;
    if (l == 0) {
        /* slot a's entry comes before slot b's; padding (index ~0u) after all */
        /* The heap holds indices; a parent comes after its children (the
           root is the worst kept). sift() puts candidate (v, i) at pos and
           moves it down past children it comes before. */
        vf_sb_add(&g.decl, "uint hb;   // the row's first element\n"
                           "void sift(uint at, uint h, uint pos, %s v, uint i)\n{\n"
                           "    for (uint c = 2u * pos + 1u; c < h; c = 2u * pos + 1u) {\n"
                           "        uint ci = sc[at + c];\n"
                           "        %s cv = ld_x(hb + ci);\n"
                           "        if (c + 1u < h) {   // the worse child: the one after the other\n"
                           "            uint di = sc[at + c + 1u];\n"
                           "            %s dv = ld_x(hb + di);\n"
                           "            if (before(cv, ci, dv, di)) c++, ci = di, cv = dv;\n"
                           "        }\n"
                           "        if (!before(v, i, cv, ci)) break;\n"
                           "        sc[at + pos] = ci;\n"
                           "        pos = c;\n"
                           "    }\n"
                           "    sc[at + pos] = i;\n}\n", cn, cn, cn);
        vf_sb_add(s, "void main()\n{\n"
                     "    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                     "    if (t >= pc.items) return;\n"
                     "    uint r = t / pc.lists, j0 = (t %% pc.lists) * pc.B;\n"
                     "    hb = r * pc.n;\n"
                     "    uint len = min(pc.B, pc.n - j0), cap = min(pc.cap, len);\n"
                     "    uint at = pc.out_off + t * pc.cap, h = 0u;\n"
                     "    for (uint i = j0; i < j0 + len; i++) {\n"
                     "        %s v = ld_x(hb + i);\n"
                     "        if (h < cap) {   // filling: up past parents that come before it\n"
                     "            uint pos = h++;\n"
                     "            for (uint q = (pos - 1u) / 2u; pos > 0u; q = (pos - 1u) / 2u) {\n"
                     "                uint qi = sc[at + q];\n"
                     "                if (!before(ld_x(hb + qi), qi, v, i)) break;\n"
                     "                sc[at + pos] = qi;\n"
                     "                pos = q;\n"
                     "            }\n"
                     "            sc[at + pos] = i;\n"
                     "        } else {\n"
                     "            uint wi = sc[at];\n"
                     "            // better than the worst kept: it takes the root's place\n"
                     "            if (before(v, i, ld_x(hb + wi), wi)) sift(at, h, 0u, v, i);\n"
                     "        }\n"
                     "    }\n"
                     "    // heap sort: the worst kept to the end, ... so the list runs best first\n"
                     "    for (uint e = h - 1u; e > 0u; e--) {\n"
                     "        uint wi = sc[at], i = sc[at + e];\n"
                     "        sc[at + e] = wi;\n"
                     "        sift(at, e, 0u, ld_x(hb + i), i);\n"
                     "    }\n", cn);
        if (last)
            vf_sb_add(s, "    for (uint rank = 0u; rank < cap; rank++) {\n"
                         "        uint i = sc[at + rank];\n"
                         "        st_o(r * pc.k + rank, %s);\n"
                         "    }\n}\n", want_idx ? "i" : "ld_x(hb + i)");
        else
            vf_sb_puts(s, "}\n");
    } else {
        /* the list length: its span of the row, at most cap_in */
        vf_sb_puts(&g.decl, "uint list_len(uint j)\n{\n"
                            "    uint s = j * pc.span_in;\n"
                            "    return min(pc.cap_in, min(pc.n - s, pc.span_in));\n}\n");
        vf_sb_add(s,
                  "void main()\n{\n"
                  "    uint t = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                  "    if (t >= pc.items) return;\n"
                  "    uint p = t %% pc.cap_in, q = t / pc.cap_in;\n"
                  "    uint j = q %% pc.lists_in, r = q / pc.lists_in, base = r * pc.n;\n"
                  "    if (p >= list_len(j)) return;\n"
                  "    uint i = sc[pc.in_off + t];\n"
                  "    %s v = ld_x(base + i);\n"
                  "    uint g0 = j - j %% pc.G, g1 = min(pc.lists_in, g0 + pc.G);\n"
                  "    uint rank = p;   // the list's own earlier entries\n"
                  "    for (uint o = g0; o < g1 && rank < pc.cap; o++) {\n"
                  "        if (o == j) continue;\n"
                  "        // how many of list o come before v: they are a prefix of it\n"
                  "        uint len = list_len(o), at = pc.in_off + (r * pc.lists_in + o) * pc.cap_in, lo = 0u;\n"
                  "        for (uint step = pc.top; step > 0u; step >>= 1)\n"
                  "            if (lo + step <= len) {\n"
                  "                uint c = sc[at + lo + step - 1u];\n"
                  "                if (before(ld_x(base + c), c, v, i)) lo += step;\n"
                  "            }\n"
                  "        rank += lo;\n"
                  "    }\n"
                  "    if (rank >= pc.cap) return;\n", cn);
        if (last)
            vf_sb_add(s, "    st_o(r * pc.k + rank, %s);\n}\n", want_idx ? "i" : "v");
        else
            vf_sb_puts(s, "    sc[pc.out_off + (r * pc.lists + j / pc.G) * pc.cap + rank] = i;\n}\n");
    }
    cg_groups_linear(&g, ceil_div(items, cg_wg(&g)));
    return cg_finish(&g, NULL);
}

/* The largest k in [0, k) whose plan fits, 0 when none does. */
static uint64_t tk_largest_k(tk_plan p, const vf_device_caps *caps, uint64_t k)
{
    uint64_t lo = 0, hi = k;   /* lo fits (or is 0), hi does not */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (tk_plan_for(&p, caps, mid) == TK_FITS) lo = mid;
        else hi = mid;
    }
    return lo;
}

vf_status vf_codegen_top_k(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    const vf_tref *x = &e->in[0];
    if (!cg_dtype_supported(e, caps, x->dtype, err)) return VF_ERROR_UNSUPPORTED;
    tk_plan p = {.n = (uint64_t)x->shape[x->rank - 1]};
    p.rows = (uint64_t)cg_numel(x) / p.n;
    uint64_t kk = (uint64_t)e->attrs.value;
    tk_why why = tk_plan_for(&p, caps, kk);
    if (why == TK_LOOPS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "top_k: %llu row(s) of %llu elements need more loop iterations per invocation than this "
                          "device runs (%u, over the grid rounds of its workgroup limits): take fewer rows per "
                          "call, or use the CPU backend", (unsigned long long)p.rows, (unsigned long long)p.n,
                          cg_loop_budget(caps));
    if (why != TK_FITS) {
        char what[160];
        if (why == TK_SCRATCH)
            snprintf(what, sizeof what, "%llu bytes of scratch, more than one storage binding holds here (%llu)",
                     (unsigned long long)(p.scratch * 4), (unsigned long long)caps->max_storage_buffer_range);
        else
            snprintf(what, sizeof what, "about %.3g loop iterations, more than one op may take (%.3g) to end "
                     "well within the fence timeout", p.work, tk_work_max(caps));
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "top_k: k = %llu of %llu row(s) of %llu elements needs %s; at most k = %llu fits this "
                          "shape on this device: take a smaller k or fewer rows per call, or use the CPU backend",
                          (unsigned long long)kk, (unsigned long long)p.rows, (unsigned long long)p.n, what,
                          (unsigned long long)tk_largest_k(p, caps, kk));
    }
    k->n_steps = p.levels;
    k->scratch_bytes = (size_t)(p.scratch * 4);
    for (int l = 0; l < p.levels; l++) {
        vf_status st = tk_step(e, caps, err, &k->step[l], &p, l);
        if (st != VF_OK) return st;
    }
    return VF_OK;
}
