// ---- matmul for CPU devices (lavapipe): register blocking over a subgroup --
// A workgroup is one subgroup of SG lanes and owns an SG x 4*SG tile of C:
// lane l holds columns c..c+3 (c = tile column + 4l) of all SG rows in SG
// vec4 accumulators. Per step of 4 k, lane l loads A[row l][k..k+3] (one
// vec4) and, per k, one vec4 of B; subgroupBroadcast hands every lane the
// A value of each row. No shared memory, no barriers (llvmpipe pays a
// coroutine switch for each), which is what makes this beat classic
// shared-memory tiling several times over on lavapipe.
// Codegen defines: SG, float lda(base, row, k), vec4 lda4(base, row, k)
// (rows clamped, 4 consecutive k), vec4 ldb4(base, k, col) (columns
// clamped), void st4(batch, row, col, vec4) (guarded: the kernel's store or
// fused epilogue of C[batch][row][col..col+3]), batch_off(b, oa, ob);
// push M, N, K, tiles_n, tiles_m, batch.

void main()
{
    uint t = vf_group_id();
    uint ct = t % pc.tiles_n;
    uint rest = t / pc.tiles_n;
    uint rt = rest % pc.tiles_m;
    uint b = rest / pc.tiles_m;
    if (b >= pc.batch) return;   // uniform over the workgroup
    uint oa, ob;
    batch_off(b, oa, ob);
    uint lane = gl_LocalInvocationID.x;
    uint r0 = rt * SG;
    uint c = ct * (4u * SG) + 4u * lane;
    uint ra = r0 + lane;
    vec4 acc[SG];
    [[unroll]] for (uint r = 0u; r < SG; r++) acc[r] = vec4(0.0);
    uint K4 = pc.K & ~3u;
    for (uint k = 0u; k < K4; k += 4u) {
        vec4 a = lda4(oa, ra, k);
        [[unroll]] for (uint kk = 0u; kk < 4u; kk++) {
            vec4 bv = ldb4(ob, k + kk, c);
            [[unroll]] for (uint r = 0u; r < SG; r++) acc[r] += subgroupBroadcast(a[kk], r) * bv;
        }
    }
    for (uint k = K4; k < pc.K; k++) {   // k tail
        float a = lda(oa, min(ra, pc.M - 1u), k);
        vec4 bv = ldb4(ob, k, c);
        [[unroll]] for (uint r = 0u; r < SG; r++) acc[r] += subgroupBroadcast(a, r) * bv;
    }
    [[unroll]] for (uint r = 0u; r < SG; r++) st4(b, r0 + r, c, acc[r]);
}
