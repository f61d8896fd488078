/* Generators on the CPU (RNG_UNIFORM, RNG_NORMAL, RNG_ADVANCE): the
 * reference for the Vulkan kernels (codegen_random.c), both following
 * util/philox.h. The state (the draw number d) is the u32 [2] input;
 * in[1] of a draw gives the shape only. Normal values go through libm (the GPU's log, cos,
 * sin may differ in the last bits); uniform values are exact on both. */
#include "cpu/cpu.h"
#include "util/dtype.h"
#include "util/philox.h"

static void put(const vf_tref *o, int64_t i, float v)
{
    if (o->dtype == VF_F32)
        ((float *)vf_cpu_ptr(o))[i] = v;
    else
        ((uint16_t *)vf_cpu_ptr(o))[i] = vf_f32_to_f16(v);
}

vf_status vf_cpu_rng(vf_cpu *cpu, const vf_exec *e)
{
    const uint32_t *state = vf_cpu_ptr(&e->in[0]);
    if (e->op == VF_OP_RNG_ADVANCE) { /* may be in place: both words read first */
        uint32_t lo = state[0] + 1u, hi = state[1] + (lo == 0u);
        uint32_t *o = vf_cpu_ptr(&e->out);
        o[0] = lo;
        o[1] = hi;
        return VF_OK;
    }
    const vf_tref *o = &e->out;
    if (o->dtype != VF_F32 && o->dtype != VF_F16)
        return vf_err_set(cpu->err, VF_ERROR_DTYPE, "cpu backend: %s of dtype %s (f32 or f16 only)",
                          vf_op_get(e->op)->name, vf_dtype_name(o->dtype));
    uint64_t d = (uint64_t)state[0] | (uint64_t)state[1] << 32;
    int64_t n = vf_cpu_numel(o);
    int per = e->op == VF_OP_RNG_UNIFORM ? 4 : 2; /* elements per Philox block */
    int bits = o->dtype == VF_F32 ? 24 : 11;
    for (int64_t k = 0; k * per < n; k++) {
        uint32_t r[4];
        float v[4];
        vf_philox_block(e->attrs.seed, d, (uint64_t)k, r);
        if (per == 4)
            for (int j = 0; j < 4; j++) v[j] = vf_uniform_of(r[j], bits);
        else
            vf_box_muller(r, v);
        for (int j = 0; j < per && k * per + j < n; j++) put(o, k * per + j, v[j]);
    }
    return VF_OK;
}
