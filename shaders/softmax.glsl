// ---- row template: softmax, log_softmax, sparse softmax cross-entropy -------
// Codegen declares before this text:
//   WG, SG, VF_SUBGROUP     as in reduce.glsl (WG, SG specialisation constants)
//   MODE_ROW                a workgroup per row: rows are contiguous (axis
//                           innermost, ROW_STRIDE 1u) or, when a thread
//                           per column would loop longer than the device
//                           allows, strided (ROW_STRIDE pc.inner);
//                           otherwise (MODE_COL) a thread per (outer,
//                           inner) column walking the axis with stride
//                           pc.inner
//   OP_SOFTMAX / OP_LOG_SOFTMAX / OP_XENT
//   VF_REUSE_OUT            softmax: store exp(x - max) in the first pass and
//                           rescale it in place (f32 output: saves an exp)
//   float ld(uint i)        input element;  void st(uint i, float v)
//   float ld_out(uint i)    (VF_REUSE_OUT) reads the output back
//   bool label(uint row, out uint lab)   (OP_XENT) lab in [0, len)?
//   pc.n_rows, pc.len, pc.inner
// Every row is max-subtracted. On lavapipe a row belongs to one subgroup
// (WG == SG): the reductions are subgroup ops with no barrier at all.

#ifdef MODE_ROW
shared float vf_part[WG];   // unused (and dropped) when WG == SG with subgroups

float vf_wg_max(float v)
{
#if VF_SUBGROUP
    if (WG == SG) return subgroupMax(v);
    v = subgroupMax(v);
    if (subgroupElect()) vf_part[gl_SubgroupID] = v;
    barrier();
    v = -vf_inf();
    for (uint s = 0u; s < gl_NumSubgroups; s++) v = max(v, vf_part[s]);
    barrier();
    return v;
#else
    uint lid = gl_LocalInvocationID.x;
    vf_part[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) vf_part[lid] = max(vf_part[lid], vf_part[lid + s]);
        barrier();
    }
    v = vf_part[0];
    barrier();
    return v;
#endif
}

float vf_wg_sum(float v)
{
#if VF_SUBGROUP
    if (WG == SG) return subgroupAdd(v);
    v = subgroupAdd(v);
    if (subgroupElect()) vf_part[gl_SubgroupID] = v;
    barrier();
    v = 0.0;
    for (uint s = 0u; s < gl_NumSubgroups; s++) v += vf_part[s];
    barrier();
    return v;
#else
    uint lid = gl_LocalInvocationID.x;
    vf_part[lid] = v;
    barrier();
    for (uint s = WG / 2u; s > 0u; s >>= 1) {
        if (lid < s) vf_part[lid] += vf_part[lid + s];
        barrier();
    }
    v = vf_part[0];
    barrier();
    return v;
#endif
}

void main()
{
    uint row = vf_group_id();
    if (row >= pc.n_rows) return;   // uniform over the workgroup
    uint lid = gl_LocalInvocationID.x;
    uint base = (row / ROW_STRIDE) * pc.len * ROW_STRIDE + row % ROW_STRIDE;
    float m = -vf_inf();
    for (uint j = lid; j < pc.len; j += WG) m = max(m, ld(base + j * ROW_STRIDE));
    m = vf_wg_max(m);
    float s = 0.0;
#if defined(OP_SOFTMAX) && defined(VF_REUSE_OUT)
    for (uint j = lid; j < pc.len; j += WG) {
        float e = exp(ld(base + j * ROW_STRIDE) - m);
        st(base + j * ROW_STRIDE, e);
        s += e;
    }
    float inv = 1.0 / vf_wg_sum(s);
    for (uint j = lid; j < pc.len; j += WG) st(base + j * ROW_STRIDE, ld_out(base + j * ROW_STRIDE) * inv);
#else
    for (uint j = lid; j < pc.len; j += WG) s += exp(ld(base + j * ROW_STRIDE) - m);
    s = vf_wg_sum(s);
#if defined(OP_SOFTMAX)
    float inv = 1.0 / s;
    for (uint j = lid; j < pc.len; j += WG) st(base + j * ROW_STRIDE, exp(ld(base + j * ROW_STRIDE) - m) * inv);
#elif defined(OP_LOG_SOFTMAX)
    float lse = m + log(s);
    for (uint j = lid; j < pc.len; j += WG) st(base + j * ROW_STRIDE, ld(base + j * ROW_STRIDE) - lse);
#else // OP_XENT: loss = logsumexp(row) - row[label]; NaN for a bad label
    if (lid == 0u) {
        uint lab;
        bool ok = label(row, lab);
        st(row, ok ? (m + log(s)) - ld(base + lab * ROW_STRIDE) : vf_nan());
    }
#endif
#endif
}

#else // MODE_COL

void main()
{
    uint col = vf_group_id() * WG + gl_LocalInvocationID.x;
    if (col >= pc.n_rows) return;
    uint inner = pc.inner;
    uint base = (col / inner) * pc.len * inner + col % inner;
    float m = -vf_inf();
    for (uint j = 0u; j < pc.len; j++) m = max(m, ld(base + j * inner));
    float s = 0.0;
    for (uint j = 0u; j < pc.len; j++) s += exp(ld(base + j * inner) - m);
#if defined(OP_SOFTMAX)
    float inv = 1.0 / s;
    for (uint j = 0u; j < pc.len; j++) st(base + j * inner, exp(ld(base + j * inner) - m) * inv);
#elif defined(OP_LOG_SOFTMAX)
    float lse = m + log(s);
    for (uint j = 0u; j < pc.len; j++) st(base + j * inner, ld(base + j * inner) - lse);
#else
    uint lab;
    bool ok = label(col, lab);
    st(col, ok ? (m + log(s)) - ld(base + lab * inner) : vf_nan());
#endif
}
#endif
