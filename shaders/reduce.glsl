// ---- reduction template ----------------------------------------------------
// Codegen declares before this text:
//   WG, SG           specialisation constants: the workgroup size and the
//                    subgroup size it was chosen for (`WG == SG` is folded
//                    when the pipeline is made, so the dead path costs nothing)
//   VF_SUBGROUP      1: combine with subgroup ops (+ shared memory between
//                    subgroups when WG != SG); 0: shared-memory tree (WG a
//                    power of two)
//   MODE_ROW         a workgroup per output (reduced dims innermost);
//                    otherwise a thread per output (MODE_COL)
//   ACC_T, ACC_IDENTITY
//   uint  red_len(uint o)           elements reduced into output o
//   ACC_T acc_elem(uint o, uint t)  element t of output o, as an accumulator
//   ACC_T acc_combine(ACC_T a, ACC_T b)
//   ACC_T acc_subgroup(ACC_T v)     combine over the subgroup (VF_SUBGROUP)
//   void  acc_store(uint o, ACC_T v)
//   pc.n_out                        number of outputs
// Float sums: each invocation adds a strided subset in order, then the
// partial sums are combined as a tree (subgroup, then across subgroups).

#ifdef MODE_ROW
shared ACC_T vf_part[WG];   // unused (and dropped) when WG == SG with subgroups

// Combines v over the workgroup; the result is valid in invocation 0.
ACC_T vf_wg_reduce(ACC_T v)
{
#if VF_SUBGROUP
    // one subgroup per workgroup: no barrier at all (each one is a
    // coroutine switch on llvmpipe)
    if (WG == SG) return acc_subgroup(v);
    v = acc_subgroup(v);
    if (subgroupElect()) vf_part[gl_SubgroupID] = v;
    barrier();
    if (gl_SubgroupID == 0u) {
        v = ACC_IDENTITY;
        for (uint s = gl_SubgroupInvocationID; s < gl_NumSubgroups; s += gl_SubgroupSize)
            v = acc_combine(v, vf_part[s]);
        v = acc_subgroup(v);
    }
    return v;
#else
    uint lid = gl_LocalInvocationID.x;
    vf_part[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) vf_part[lid] = acc_combine(vf_part[lid], vf_part[lid + s]);
        barrier();
    }
    return vf_part[0];
#endif
}

void main()
{
    uint o = vf_group_id();
    if (o >= pc.n_out) return;   // uniform over the workgroup
    uint lid = gl_LocalInvocationID.x;
    uint n = red_len(o);
    ACC_T acc = ACC_IDENTITY;
    for (uint t = lid; t < n; t += WG) acc = acc_combine(acc, acc_elem(o, t));
    acc = vf_wg_reduce(acc);
    if (lid == 0u) acc_store(o, acc);
}

#else // MODE_COL: a thread per output, neighbours read neighbouring memory

void main()
{
    uint o = vf_group_id() * WG + gl_LocalInvocationID.x;
    if (o >= pc.n_out) return;
    uint n = red_len(o);
    ACC_T acc = ACC_IDENTITY;
    for (uint t = 0u; t < n; t++) acc = acc_combine(acc, acc_elem(o, t));
    acc_store(o, acc);
}
#endif
