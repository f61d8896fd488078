// ---- matmul for GPUs: classic shared-memory tiling ---------------------------
// A workgroup of TS x TS invocations owns a BM x BN tile (BM = BN = 4 TS) of
// C; each invocation accumulates 4 x 4 outputs in registers (rows ty + TS i,
// columns tx + TS j, so that shared reads are conflict-free). Per BK step
// the workgroup stages a BM x BK slice of A and a BK x BN slice of B in
// shared memory, zero-filled outside the matrices (edge tiles, any m n k).
// TS, BK: specialisation constants (WG == TS * TS, chosen from the device's
// limits and shared memory). Codegen defines: float lda(base, row, k), float ldb(base, k, col),
// void st1(batch, row, col, float) (the store or fused epilogue of one element
// in range), batch_off(b, oa, ob), mm_tile() and mm_k0() / mm_k1() (as in
// matmul_lane.glsl); push M, N, K, tiles_n, tiles_m, batch.

#define BM (4u * TS)
#define BN (4u * TS)
#define NT WG

shared float As[BK][BM];
shared float Bs[BK][BN];

void main()
{
    uint t = mm_tile();
    uint ct = t % pc.tiles_n;
    uint rest = t / pc.tiles_n;
    uint rt = rest % pc.tiles_m;
    uint b = rest / pc.tiles_m;
    if (b >= pc.batch) return;   // uniform over the workgroup
    uint oa, ob;
    batch_off(b, oa, ob);
    uint lid = gl_LocalInvocationID.x;
    uint tx = lid % TS, ty = lid / TS;
    uint r0 = rt * BM, c0 = ct * BN;
    float acc[4][4];
    [[unroll]] for (uint i = 0u; i < 4u; i++)
        [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] = 0.0;
    uint k1 = mm_k1();
    for (uint k0 = mm_k0(); k0 < k1; k0 += BK) {
        for (uint e = lid; e < BM * BK; e += NT) {
            uint r = e / BK, kk = e % BK;
            uint gr = r0 + r, gk = k0 + kk;
            As[kk][r] = (gr < pc.M && gk < k1) ? lda(oa, gr, gk) : 0.0;
        }
        for (uint e = lid; e < BK * BN; e += NT) {
            uint kk = e / BN, cc = e % BN;
            uint gk = k0 + kk, gc = c0 + cc;
            Bs[kk][cc] = (gk < k1 && gc < pc.N) ? ldb(ob, gk, gc) : 0.0;
        }
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; kk++) {
            float a[4], bb[4];
            [[unroll]] for (uint i = 0u; i < 4u; i++) a[i] = As[kk][ty + TS * i];
            [[unroll]] for (uint j = 0u; j < 4u; j++) bb[j] = Bs[kk][tx + TS * j];
            [[unroll]] for (uint i = 0u; i < 4u; i++)
                [[unroll]] for (uint j = 0u; j < 4u; j++) acc[i][j] += a[i] * bb[j];
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < 4u; i++) {
        uint gr = r0 + ty + TS * i;
        if (gr >= pc.M) continue;
        [[unroll]] for (uint j = 0u; j < 4u; j++) {
            uint gc = c0 + tx + TS * j;
            if (gc < pc.N) st1(b, gr, gc, acc[i][j]);
        }
    }
}
