/* MATMUL (f32, f16 storage): batched, broadcast batch dims, trans_a/trans_b.
 *
 * Batch dims of the output are collapsed (size-1 dims dropped, adjacent
 * dims merged where both operands stay contiguous across them) and each
 * operand gets a stride per collapsed dim, 0 where it broadcasts; sizes
 * and strides are push constants, only the number of batch dims is baked.
 * Operand access is generated as lda(base, row, k) / ldb(base, k, col) for
 * the transposition at hand, so the templates never see trans flags.
 *  - CPU devices (lavapipe): shaders/matmul_lane.glsl, each lane owns an
 *    RM x 4*CV block of C in registers and lanes never communicate
 *    (llvmpipe runs buffer loads and subgroupBroadcast as loops over the
 *    lanes; see the template); a workgroup is the subgroup size of lanes
 *    (capped by the workgroup limits) side by side along the columns; vec4
 *    loads where layout and alignment allow (A untransposed with
 *    k % 4 == 0, B untransposed with n % 4 == 0, f32), else the same
 *    kernel with scalar loads (transposed operands, odd sizes, f16).
 *  - GPUs: shaders/matmul_tiled.glsl, shared-memory tiles sized from caps.
 * Tiles are numbered linearly (lane kernel: row tile fastest, so that
 * neighbouring workgroups share a panel of B in the caches; tiled: column
 * tile fastest; then batch) over a 1D/2D grid, so no dimension limit is
 * hit before 2^32 tiles.
 * The stores go through st4(b, r, c, vec4) / st1(b, r, c, float): plain
 * stores here, a fused epilogue for matmul groups (codegen_matmul.h).
 */
#include "vulkan/codegen/codegen_matmul.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define MM_MAX_BATCH (VF_MAX_RANK - 2)

/* The CPU profile's register block per lane: RM rows x 4*CV columns. 16 x 16
   measured best on lavapipe at 1024^3 and 256x784x512 among 4..16 rows x
   4..48 columns (docs/BENCHMARKS.md, "Matmul epilogue"): llvmpipe spills
   the accumulators it cannot hold to the stack, which costs far less than
   the per-lane loops of its buffer loads. Fewer than 16 rows: 4-row blocks,
   so a short matrix (a batch of 1) does not compute 16 clamped rows. */
#define MM_LANE_ROWS 16u
#define MM_LANE_ROWS_SMALL 4u
#define MM_LANE_VEC4S 4u
/* A product of at most this many multiply-adds (all batches) gets the
   smallest block, 4 x 4: llvmpipe compiles the lane kernel at its first
   dispatch, and its time grows much faster than the block (the seed's
   train_step, 128x784x10 and its 784x128x10 gradient: 16 x 16 took 4-5 s
   of LLVM per kernel, 4 x 4 about 0.1 s), while such a product runs in
   well under a millisecond with any block. 16x784x512 (6.4M) keeps the
   16 x 16 block and its speed (docs/BENCHMARKS.md, "Time to first
   result"). The quick tier of a plan (caps->matmul_quick) takes it for
   every product until the tuned kernel is swapped in (plan_tier.c). */
#define MM_LANE_SMALL_WORK (4u << 20)

typedef struct {
    int nd;
    uint64_t size[MM_MAX_BATCH];
    uint64_t sa[MM_MAX_BATCH], sb[MM_MAX_BATCH];
    uint64_t count;
} batch_pattern;

static void batch_collapse(const vf_exec *e, uint64_t ma, uint64_t mb, batch_pattern *p)
{
    memset(p, 0, sizeof *p);
    p->count = 1;
    int ob = e->out.rank - 2;
    const vf_tref *op[2] = {&e->in[0], &e->in[1]};
    uint64_t msz[2] = {ma, mb};
    for (int d = 0; d < ob; d++) {
        uint64_t n = (uint64_t)e->out.shape[d];
        if (n == 1) continue;
        p->count *= n;
        uint64_t st[2];
        for (int w = 0; w < 2; w++) {
            int rb = op[w]->rank - 2;
            int dx = d - (ob - rb);
            if (dx < 0 || op[w]->shape[dx] == 1) {
                st[w] = 0;
                continue;
            }
            uint64_t s = msz[w];
            for (int t = dx + 1; t < rb; t++) s *= (uint64_t)op[w]->shape[t];
            st[w] = s;
        }
        if (p->nd > 0 && p->sa[p->nd - 1] == st[0] * n && p->sb[p->nd - 1] == st[1] * n) {
            p->size[p->nd - 1] *= n;
            p->sa[p->nd - 1] = st[0];
            p->sb[p->nd - 1] = st[1];
        } else {
            p->size[p->nd] = n;
            p->sa[p->nd] = st[0];
            p->sb[p->nd] = st[1];
            p->nd++;
        }
    }
}

static void emit_batch_off(vf_sb *s, const batch_pattern *p)
{
    vf_sb_puts(s, "void batch_off(uint b, out uint oa, out uint ob)\n{\n    oa = 0u;\n    ob = 0u;\n");
    for (int d = p->nd - 1; d >= 0; d--) {
        if (d > 0)
            vf_sb_add(s, "    { uint c = b %% pc.bd%d; b /= pc.bd%d; oa += c * pc.sa%d; ob += c * pc.sb%d; }\n", d, d, d, d);
        else
            vf_sb_add(s, "    oa += b * pc.sa0;\n    ob += b * pc.sb0;\n");
    }
    vf_sb_puts(s, "}\n");
}

/* ---- K split over workgroups (a loop budget, llvmpipe's 65535) ----------
   Step 0 is the tile kernel run once per (tile, chunk of kc k's): it sums
   its chunk and stores the partial to the scratch buffer P[chunk][b][r][c]
   (f32). Step 1 (ksum_step) adds the chunks' partials of each element in
   a fixed order and stores it with st1: the plain store or the fused
   epilogue, applied once, after the last chunk. */
typedef struct cg_ksplit {
    uint64_t chunks;          /* 0: K is not split */
    uint64_t kc;              /* k per chunk, a multiple of the loop's k step */
} cg_ksplit;

/* Chunks of K that keep every invocation of both steps within the loop
   budget: unit k per loop step, per_step iterations each, tail: at most
   that many more (the lane kernel's k % 4). */
static vf_status ksplit_plan(const vf_exec *e, const vf_device_caps *caps, uint64_t K, uint64_t unit,
                             uint64_t per_step, uint64_t tail, uint64_t elems, cg_ksplit *ks, vf_err *err)
{
    uint64_t budget = cg_loop_budget(caps);
    uint64_t steps = budget > tail ? (budget - tail) / per_step : 0;
    ks->kc = steps * unit;
    ks->chunks = ks->kc ? (K + ks->kc - 1) / ks->kc : 0;
    uint64_t bytes = ks->chunks * elems * 4;
    if (!ks->kc || ks->chunks > budget || ks->chunks * elems > UINT32_MAX ||
        (caps->max_storage_buffer_range && bytes > caps->max_storage_buffer_range))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: K = %llu split into %llu chunks of %llu needs %llu bytes of partial sums (device"
                          " binding limit %llu) and %llu additions per output; this device runs at most %u loop"
                          " iterations per invocation. Split the matmul by rows or columns of the output first",
                          vf_op_get(e->op)->name, (unsigned long long)K, (unsigned long long)ks->chunks,
                          (unsigned long long)ks->kc, (unsigned long long)bytes,
                          (unsigned long long)caps->max_storage_buffer_range, (unsigned long long)ks->chunks,
                          caps->max_loop_iterations);
    return VF_OK;
}

/* mm_tile(), mm_k0(), mm_k1() of the templates: all of K per tile, or a
   tile and a chunk per workgroup (chunk fastest). */
static void emit_k_range(vf_sb *s, bool split)
{
    if (!split) {
        vf_sb_puts(s, "uint mm_tile() { return vf_group_id(); }\nuint mm_k0() { return 0u; }\n"
                      "uint mm_k1() { return pc.K; }\n");
        return;
    }
    vf_sb_puts(s, "uint mm_chunk() { return vf_group_id() % pc.kchunks; }\n"
                  "uint mm_tile() { return vf_group_id() / pc.kchunks; }\n"
                  "uint mm_k0() { return mm_chunk() * pc.kc; }\n"
                  "uint mm_k1() { return min(pc.K, mm_k0() + pc.kc); }\n");
}

/* Step 1 of a split K: one invocation per output element. */
static vf_status ksum_step(const vf_exec *e, const vf_device_caps *caps, const cg_mm_epilogue *epi,
                           const cg_mm_layout *lay, const cg_ksplit *ks, vf_gen_kernel *k, vf_err *err)
{
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[1]);
    snprintf(g.d->name, sizeof g.d->name, "%.50s_ksum", k->step[0].name);
    snprintf(g.comment, sizeof g.comment, "the %llu partial sums of a K split over workgroups, added in chunk order,"
             " then stored%s", (unsigned long long)ks->chunks, epi ? " through the fused epilogue" : "");
    if (epi) {
        if (epi->bind(&g, lay, epi->user) != VF_OK && !g.status) g.status = VF_ERROR_UNSUPPORTED;
    } else {
        cg_bind(&g, VF_BIND_OUT, e->out.dtype, "C", false, false);
    }
    cg_bind(&g, VF_BIND_SCRATCH, VF_F32, "P", true, false);
    cg_push_u32(&g, "M", (uint32_t)lay->M);
    cg_push_u32(&g, "N", (uint32_t)lay->N);
    cg_push_u32(&g, "batch", (uint32_t)lay->batch);
    cg_push_u32(&g, "kchunks", (uint32_t)ks->chunks);
    if (g.status) {
        cg_abort(&g);
        return g.status;
    }
    vf_sb *s = &g.body;
    if (epi) {
        if (epi->emit(&g, lay, epi->user) != VF_OK && !g.status) g.status = VF_ERROR_UNSUPPORTED;
        vf_sb_puts(s, "void st1(uint b, uint r, uint c, float v) { epi(b, r, c, v); }\n");
    } else {
        cg_store_fn(&g, "st", "C", e->out.dtype, VF_CT_FLOAT);
        vf_sb_puts(s, "void st1(uint b, uint r, uint c, float v) { st((b * pc.M + r) * pc.N + c, v); }\n");
    }
    vf_sb_puts(s, "\nvoid main()\n{\n"
                  "    uint i = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                  "    uint total = pc.batch * pc.M * pc.N;\n"
                  "    if (i >= total) return;\n"
                  "    float acc = 0.0;\n"
                  "    for (uint s = 0u; s < pc.kchunks; s++) acc += P[s * total + i];\n"
                  "    uint rest = i / pc.N;\n"
                  "    st1(rest / pc.M, rest % pc.M, i % pc.N, acc);\n}\n");
    uint32_t wg = cg_clamp_wg(caps, 64, false);
    cg_workgroup(&g, wg);
    cg_groups_linear(&g, (lay->batch * lay->M * lay->N + wg - 1) / wg);
    return cg_finish(&g, NULL);
}

vf_status cg_matmul(const vf_exec *e, const vf_device_caps *caps, const cg_mm_epilogue *epi, vf_gen_kernel *k,
                    vf_err *err)
{
    const vf_tref *A = &e->in[0], *B = &e->in[1];
    bool ta = e->attrs.trans_a, tb = e->attrs.trans_b;
    if (A->rank < 2 || B->rank < 2 || e->out.rank < 2)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "matmul: operands need rank >= 2 (got %d and %d)",
                          A->rank, B->rank);
    if (!vf_dtype_is_float(A->dtype) || !vf_dtype_is_float(B->dtype))
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "matmul: dtype %s is not a float type",
                          vf_dtype_name(vf_dtype_is_float(A->dtype) ? B->dtype : A->dtype));
    uint64_t M = (uint64_t)e->out.shape[e->out.rank - 2], N = (uint64_t)e->out.shape[e->out.rank - 1];
    uint64_t K = (uint64_t)A->shape[A->rank - (ta ? 2 : 1)];
    if (cg_numel(A) > (int64_t)UINT32_MAX || cg_numel(B) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "matmul: operand too large for 32-bit indexing");
    batch_pattern bp;
    batch_collapse(e, M * K, K * N, &bp);

    /* CPU profile: lanes of LANES invocations (the subgroup size, within
       the device's workgroup limits), each an RM x 4*CV register block */
    uint32_t lanes = cg_clamp_wg(caps, caps->subgroup_size ? caps->subgroup_size : 8, false);
    bool lane_kernel = caps->is_cpu;
    uint32_t rm = M >= MM_LANE_ROWS ? MM_LANE_ROWS : MM_LANE_ROWS_SMALL, cv = MM_LANE_VEC4S;
    if (lane_kernel && (caps->matmul_quick || M * N * K * bp.count <= MM_LANE_SMALL_WORK))
        rm = MM_LANE_ROWS_SMALL, cv = 1u;
    bool f32 = A->dtype == VF_F32 && B->dtype == VF_F32 && e->out.dtype == VF_F32;
    bool vec_a = lane_kernel && f32 && !ta && K % 4 == 0 && A->offset % 16 == 0;
    bool vec_b = lane_kernel && f32 && !tb && N % 4 == 0 && B->offset % 16 == 0;
    bool vec_c = !epi && lane_kernel && f32 && N % 4 == 0 && e->out.offset % 16 == 0;
    cg_ksplit ks = {0};

    uint32_t ts = 16, bk = 16;
    if (!lane_kernel) {
        while (ts > 4 && (ts * ts > caps->max_workgroup_invocations || ts * ts > caps->max_workgroup_size[0] ||
                          2u * bk * 4u * ts * 4u > caps->shared_memory_bytes))
            ts /= 2;
        if (2u * bk * 4u * ts * 4u > caps->shared_memory_bytes) bk = 4;
    }
    /* Loop iterations of one invocation: K / 4 (lanes) or, per BK step,
       the loads of two BK-deep tiles shared by TS x TS invocations (tiled),
       each load loop one more for its exit (measured: llvmpipe lost part of
       a K = 300000 sum at 9 per step, not at 11). Past the device's loop
       budget (llvmpipe stops loops silently) K is split over workgroups
       (ksplit_plan). */
    uint64_t per_step = lane_kernel ? 1 : 2 * ((4ull * ts * bk + ts * ts - 1) / (ts * ts) + 1) + 1;
    uint64_t k_iters = lane_kernel ? K / 4 + K % 4 : (K + bk - 1) / bk * per_step;
    if (k_iters > cg_loop_budget(caps)) {
        vf_status st = ksplit_plan(e, caps, K, lane_kernel ? 4 : bk, per_step, lane_kernel ? 4 : 0,
                                   M * N * bp.count, &ks, err);
        if (st) return st;
        vec_c = false; /* partial sums go to the scratch buffer */
    }
    uint64_t tile_m = lane_kernel ? rm : 4u * ts, tile_n = lane_kernel ? 4u * cv * lanes : 4u * ts;
    uint64_t tiles_m = (M + tile_m - 1) / tile_m, tiles_n = (N + tile_n - 1) / tile_n;

    k->n_steps = ks.chunks ? 2 : 1;
    k->scratch_bytes = ks.chunks ? (size_t)(ks.chunks * M * N * bp.count * 4) : 0;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    const char *tag = epi ? epi->tag : "matmul";
    if (lane_kernel)
        snprintf(g.d->name, sizeof g.d->name, "%s_%s_%c%c_lane%ux%u%s%s%s_b%d", tag, cg_dtype_tag(A->dtype),
                 ta ? 't' : 'n', tb ? 't' : 'n', rm, 4 * cv, vec_a ? "_va" : "", vec_b ? "_vb" : "",
                 vec_c ? "_vc" : "", bp.nd);
    else
        snprintf(g.d->name, sizeof g.d->name, "%s_%s_%c%c_tile_b%d", tag, cg_dtype_tag(A->dtype), ta ? 't' : 'n',
                 tb ? 't' : 'n', bp.nd);
    snprintf(g.comment, sizeof g.comment,
             "op matmul%s%s: %s x %s -> %s, %s A, %s B, %d collapsed batch dim(s); %s%s",
             epi ? " with " : "", epi ? epi->what : "", cg_dtype_tag(A->dtype), cg_dtype_tag(B->dtype),
             cg_dtype_tag(e->out.dtype), ta ? "transposed" : "plain", tb ? "transposed" : "plain", bp.nd,
             lane_kernel ? "register blocking per lane (CPU profile)" : "shared-memory tiling (GPU profile)",
             ks.chunks ? "; K split: partial sums per chunk of k to the scratch buffer" : "");
    if (ks.chunks) strncat(g.d->name, "_ks", sizeof g.d->name - strlen(g.d->name) - 1);

    /* one binding per tensor: a vec4 view where it is used, scalars read
       through it (A4[i >> 2][i & 3]) */
    cg_mm_layout lay = {.M = M, .N = N, .K = K, .batch = bp.count, .lane = lane_kernel,
                        .vec_a = vec_a, .vec_b = vec_b};
    if (epi) {
        if (epi->bind(&g, &lay, epi->user) != VF_OK && !g.status) g.status = VF_ERROR_UNSUPPORTED;
    } else {
        cg_bind(&g, VF_BIND_IN0, A->dtype, vec_a ? "A4" : "A", true, vec_a);
        cg_bind(&g, VF_BIND_IN1, B->dtype, vec_b ? "B4" : "B", true, vec_b);
        cg_bind(&g, VF_BIND_OUT, e->out.dtype, vec_c ? "C4" : "C", false, vec_c);
    }
    cg_push_u32(&g, "M", (uint32_t)M);
    cg_push_u32(&g, "N", (uint32_t)N);
    cg_push_u32(&g, "K", (uint32_t)K);
    cg_push_u32(&g, "tiles_n", (uint32_t)tiles_n);
    cg_push_u32(&g, "tiles_m", (uint32_t)tiles_m);
    cg_push_u32(&g, "batch", (uint32_t)bp.count);
    if (ks.chunks) {
        cg_push_u32(&g, "kchunks", (uint32_t)ks.chunks);
        cg_push_u32(&g, "kc", (uint32_t)ks.kc);
        cg_bind(&g, VF_BIND_SCRATCH, VF_F32, "P", false, false);
    }
    for (int d = 0; d < bp.nd; d++) {
        char nm[16];
        snprintf(nm, sizeof nm, "bd%d", d);
        cg_push_u32(&g, nm, (uint32_t)bp.size[d]);
        snprintf(nm, sizeof nm, "sa%d", d);
        cg_push_u32(&g, nm, (uint32_t)bp.sa[d]);
        snprintf(nm, sizeof nm, "sb%d", d);
        cg_push_u32(&g, nm, (uint32_t)bp.sb[d]);
    }
    if (g.status) {
        cg_abort(&g);
        return g.status;
    }
    vf_sb *s = &g.body;
    if (vec_a) vf_sb_puts(s, "float lda_at(uint i) { return A4[i >> 2][i & 3u]; }\n");
    else cg_load_fn(&g, "lda_at", "A", A->dtype, VF_CT_FLOAT);
    if (vec_b) vf_sb_puts(s, "float ldb_at(uint i) { return B4[i >> 2][i & 3u]; }\n");
    else cg_load_fn(&g, "ldb_at", "B", B->dtype, VF_CT_FLOAT);
    emit_k_range(s, ks.chunks != 0);
    if (ks.chunks) {
        vf_sb_puts(s, "void st1(uint b, uint r, uint c, float v) { P[((mm_chunk() * pc.batch + b) * pc.M + r) * pc.N + c] = v; }\n");
    } else if (epi) {
        if (epi->emit(&g, &lay, epi->user) != VF_OK && !g.status) g.status = VF_ERROR_UNSUPPORTED;
        vf_sb_puts(s, "void st1(uint b, uint r, uint c, float v) { epi(b, r, c, v); }\n");
    } else {
        if (vec_c) vf_sb_puts(s, "void st(uint i, float v) { C4[i >> 2][i & 3u] = v; }\n");
        else cg_store_fn(&g, "st", "C", e->out.dtype, VF_CT_FLOAT);
        vf_sb_puts(s, "void st1(uint b, uint r, uint c, float v) { st((b * pc.M + r) * pc.N + c, v); }\n");
    }
    emit_batch_off(s, &bp);
    vf_sb_add(s, "float lda(uint base, uint r, uint k) { return lda_at(base + %s); }\n",
              ta ? "k * pc.M + r" : "r * pc.K + k");
    vf_sb_add(s, "float ldb(uint base, uint k, uint c) { return ldb_at(base + %s); }\n",
              tb ? "c * pc.K + k" : "k * pc.N + c");
    if (lane_kernel) {
        vf_sb_add(s, "#define RM %uu\n#define CV %uu\n", rm, cv);
        /* stores that are not one vec4 each (an epilogue, an odd N, f16)
           run in a loop: their code once, not RM * CV times */
        if (!vec_c) vf_sb_puts(s, "#define MM_STORE_LOOP 1\n");
        /* vec4 loads of A need K % 4 == 0, and a K split's chunks are
           multiples of 4: the k tail loop never runs, so it is left out */
        if (vec_a) vf_sb_puts(s, "#define MM_K4 1\n");
        if (vec_a)
            vf_sb_puts(s, "vec4 lda4(uint base, uint r, uint k) { return A4[(base + min(r, pc.M - 1u) * pc.K + k) >> 2]; }\n");
        else
            vf_sb_puts(s, "vec4 lda4(uint base, uint r, uint k)\n{\n    r = min(r, pc.M - 1u);\n"
                          "    return vec4(lda(base, r, k), lda(base, r, k + 1u), lda(base, r, k + 2u), lda(base, r, k + 3u));\n}\n");
        if (vec_b)
            vf_sb_puts(s, "vec4 ldb4(uint base, uint k, uint c) { return B4[(base + k * pc.N + min(c, pc.N - 4u)) >> 2]; }\n");
        else
            vf_sb_puts(s, "vec4 ldb4(uint base, uint k, uint c)\n{\n    uint l = pc.N - 1u;\n"
                          "    return vec4(ldb(base, k, min(c, l)), ldb(base, k, min(c + 1u, l)),\n"
                          "                ldb(base, k, min(c + 2u, l)), ldb(base, k, min(c + 3u, l)));\n}\n");
        if (vec_c)
            vf_sb_puts(s, "void st4(uint b, uint r, uint c, vec4 v)\n{\n"
                          "    if (r < pc.M && c < pc.N) C4[((b * pc.M + r) * pc.N + c) >> 2] = v;\n}\n");
        else
            vf_sb_puts(s, "void st4(uint b, uint r, uint c, vec4 v)\n{\n    if (r >= pc.M) return;\n"
                          "    [[unroll]] for (uint j = 0u; j < 4u; j++)\n"
                          "        if (c + j < pc.N) st1(b, r, c + j, v[j]);\n}\n");
    }
    /* sizes chosen from the device are specialisation constants: the
       lanes of a lane workgroup, the tile edge TS (TS x TS invocations)
       and k step BK of a tiled one; RM and CV stay baked (unrolled
       register blocks, chosen from M, not from the device) */
    cg_workgroup(&g, lane_kernel ? lanes : ts * ts);
    if (!lane_kernel) {
        cg_spec(&g, "TS", ts);
        cg_spec(&g, "BK", bk);
    }
    cg_groups_linear(&g, tiles_m * tiles_n * bp.count * (ks.chunks ? ks.chunks : 1));
    vf_status st = cg_finish(&g, lane_kernel ? "matmul_lane.glsl" : "matmul_tiled.glsl");
    if (st || !ks.chunks) return st;
    st = ksum_step(e, caps, epi, &lay, &ks, k, err);
    if (st) vf_kernel_free(k);
    return st;
}

vf_status vf_codegen_matmul(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    return cg_matmul(e, caps, NULL, k, err);
}
