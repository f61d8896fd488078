/* The conv2d kernel generator shared by the plain conv ops
 * (codegen_conv.c) and fused conv groups (codegen_conv_fused.c).
 *
 * cg_conv2d builds the kernel(s) of e: conv2d or one of its backprop ops.
 * Without an epilogue it binds its operands and result itself (VF_BIND_IN0,
 * IN1, OUT; the split filter gradient also VF_BIND_SCRATCH). An epilogue
 * (conv2d only) binds every tensor of the kernel, the operands under the
 * buffer names "in0" (x) and "in1" (w), may push fields of its own after
 * the conv's geometry, and emits
 *     void epi(uint i, uint n, uint oh, uint ow, uint o, float acc)
 * which receives the f32 sum of y[n][oh][ow][o] (i: its flat NHWC index)
 * and stores whatever the kernel writes for that element; the kernel calls
 * it once per output element.
 */
#ifndef VF_FUSION_CODEGEN_CONV_H
#define VF_FUSION_CODEGEN_CONV_H

#include "vulkan/codegen/codegen_internal.h"

typedef struct cg_conv_epilogue {
    vf_status (*bind)(vf_cg *g, void *user);
    vf_status (*emit)(vf_cg *g, void *user);
    void *user;
    const char *tag;          /* kernel name prefix, e.g. "convfused3" */
    const char *what;         /* for the header comment */
} cg_conv_epilogue;

vf_status cg_conv2d(const vf_exec *e, const vf_device_caps *caps, const cg_conv_epilogue *epi, vf_gen_kernel *k,
                    vf_err *err);

#endif
