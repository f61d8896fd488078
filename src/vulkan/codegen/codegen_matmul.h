/* The matmul kernel generator shared by the plain matmul op
 * (codegen_matmul.c) and fused matmul groups (codegen_matmul_fused.c).
 *
 * cg_matmul builds the tile kernel for e (operands e->in[0], e->in[1],
 * result shape and dtype e->out). Without an epilogue it binds A, B, C
 * itself (VF_BIND_IN0, IN1, OUT). With one, the epilogue binds every
 * tensor of the kernel — the operands under the buffer names the layout
 * gives ("A" or "A4" when vec_a, "B" or "B4") — may push fields of its
 * own, and emits
 *     void epi(uint b, uint r, uint c, float acc)
 * which receives the f32 accumulator of C[b][r][c] (b: linear batch
 * index over the output's batch dims, row-major; r < M, c < N) and stores
 * whatever the kernel writes for that element. The templates call it
 * once per output element in range, after the whole k loop.
 */
#ifndef VF_FUSION_CODEGEN_MATMUL_H
#define VF_FUSION_CODEGEN_MATMUL_H

#include "vulkan/codegen/codegen_internal.h"

typedef struct cg_mm_layout {
    uint64_t M, N, K;
    uint64_t batch;           /* product of the output's batch dims */
    bool lane;                /* CPU profile (matmul_lane.glsl) */
    bool vec_a, vec_b;        /* operands bound as vec4 arrays "A4" / "B4" */
} cg_mm_layout;

typedef struct cg_mm_epilogue {
    vf_status (*bind)(vf_cg *g, const cg_mm_layout *l, void *user);
    vf_status (*emit)(vf_cg *g, const cg_mm_layout *l, void *user);
    void *user;
    const char *tag;          /* kernel name prefix, e.g. "mmfused3" */
    const char *what;         /* for the header comment, e.g. "epilogue add relu" */
} cg_mm_epilogue;

vf_status cg_matmul(const vf_exec *e, const vf_device_caps *caps, const cg_mm_epilogue *epi, vf_gen_kernel *k,
                    vf_err *err);

#endif
