// ---- matmul for CPU devices (lavapipe): register blocking per lane ----------
// llvmpipe runs a subgroup as one SIMD vector but does every storage-buffer
// load, and every cross-lane operation (subgroupBroadcast), as a loop over
// the lanes; arithmetic is cheap. So here lanes never talk: each lane owns
// an RM x 4*CV block of C (RM rows, CV vec4s of consecutive columns) in
// registers and loads what it needs itself, RM + 4*CV vec4 loads per four
// k for 16*RM*CV multiply-adds. A workgroup is WG lanes (a specialisation
// constant: the subgroup size within the device's limits) along the
// columns: an RM x (4*CV*WG) tile; row tiles are numbered fastest so
// that neighbouring workgroups share the same panel of B in the caches.
// No shared memory, no barriers.
// Codegen defines: RM, CV, float lda(base, row, k), vec4 lda4(base, row, k)
// (rows clamped, 4 consecutive k), vec4 ldb4(base, k, col) (columns
// clamped), void st4(batch, row, col, vec4) (guarded), batch_off(b, oa, ob),
// mm_tile() (this workgroup's tile) and mm_k0() / mm_k1() (its k range: all
// of K, or one chunk of a K split over workgroups); push M, N, K, tiles_n,
// tiles_m, batch.

void main()
{
    uint t = mm_tile();
    uint rt = t % pc.tiles_m;
    uint rest = t / pc.tiles_m;
    uint ct = rest % pc.tiles_n;
    uint b = rest / pc.tiles_n;
    if (b >= pc.batch) return;   // uniform over the workgroup
    uint oa, ob;
    batch_off(b, oa, ob);
    uint r0 = rt * RM;
    uint c0 = (ct * WG + gl_LocalInvocationID.x) * (4u * CV);
    vec4 acc[RM * CV];
    [[unroll]] for (uint i = 0u; i < RM * CV; i++) acc[i] = vec4(0.0);
    uint k0 = mm_k0(), k1 = mm_k1();
    uint K4 = k0 + ((k1 - k0) & ~3u);
    for (uint k = k0; k < K4; k += 4u) {
        vec4 a[RM];
        [[unroll]] for (uint i = 0u; i < RM; i++) a[i] = lda4(oa, r0 + i, k);
        [[unroll]] for (uint kk = 0u; kk < 4u; kk++)
            [[unroll]] for (uint j = 0u; j < CV; j++) {
                vec4 bv = ldb4(ob, k + kk, c0 + 4u * j);
                [[unroll]] for (uint i = 0u; i < RM; i++) acc[i * CV + j] += a[i][kk] * bv;
            }
    }
#ifndef MM_K4   // K (and so every chunk of it) a multiple of 4: no tail, no code for it
    for (uint k = K4; k < k1; k++) {   // k tail
        float a[RM];
        [[unroll]] for (uint i = 0u; i < RM; i++) a[i] = lda(oa, min(r0 + i, pc.M - 1u), k);
        [[unroll]] for (uint j = 0u; j < CV; j++) {
            vec4 bv = ldb4(ob, k, c0 + 4u * j);
            [[unroll]] for (uint i = 0u; i < RM; i++) acc[i * CV + j] += a[i] * bv;
        }
    }
#endif
#ifdef MM_STORE_LOOP
    // An epilogue (or scalar stores) repeated RM * CV times unrolled is most
    // of the kernel's code, and llvmpipe's compile time grows faster than
    // the code: the block is copied out and stored by a loop instead, so
    // the epilogue's code is there once. acc itself stays indexed by
    // constants only (in registers); res is indexed by the loop.
    vec4 res[RM * CV];
    [[unroll]] for (uint i = 0u; i < RM * CV; i++) res[i] = acc[i];
    [[dont_unroll]] for (uint i = 0u; i < RM * CV; i++) st4(b, r0 + i / CV, c0 + 4u * (i % CV), res[i]);
#else
    [[unroll]] for (uint i = 0u; i < RM; i++)
        [[unroll]] for (uint j = 0u; j < CV; j++) st4(b, r0 + i, c0 + 4u * j, acc[i * CV + j]);
#endif
}
