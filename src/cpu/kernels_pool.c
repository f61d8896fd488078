/* max_pool2d, avg_pool2d and their gradients on the CPU backend (f32, NHWC):
 * oneDNN where it is available (dnnl_conv.c), otherwise these loops.
 * The window's positions that fall in the padding never count: max ignores
 * them, avg divides by the positions inside the input (TF). The max's
 * argmax is the first maximum in row-major window order; its gradient adds
 * dy there. The gradients scatter each output's dy over its window into a
 * zeroed dx, which is the same sum as the Vulkan kernels' gather. */
#include "cpu/cpu.h"
#include "cpu/dnnl_conv.h"

#include <string.h>

typedef struct {
    int64_t N, H, W, C, OH, OW;
} pool_dims;

/* The window of output (oh, ow) clipped to the input: rows r[0] .. r[1),
   columns r[2] .. r[3). */
static void window(const vf_conv_attrs *a, const pool_dims *d, int64_t oh, int64_t ow, int64_t r[4])
{
    int64_t h0 = oh * a->stride[0] - a->pad[0], w0 = ow * a->stride[1] - a->pad[2];
    r[0] = h0 < 0 ? 0 : h0;
    r[1] = h0 + a->size[0] > d->H ? d->H : h0 + a->size[0];
    r[2] = w0 < 0 ? 0 : w0;
    r[3] = w0 + a->size[1] > d->W ? d->W : w0 + a->size[1];
}

static bool has_nan(const vf_tref *t)
{
    const float *p = vf_cpu_ptr(t);
    int64_t n = vf_cpu_numel(t);
    bool nan = false;
    for (int64_t i = 0; i < n; i++) nan |= p[i] != p[i]; /* no early exit: the loop vectorises */
    return nan;
}

vf_status vf_cpu_pool(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *x = &e->in[0];
    bool grad = e->op == VF_OP_MAX_POOL2D_GRAD || e->op == VF_OP_AVG_POOL2D_GRAD;
    const vf_tref *y = grad ? &e->in[1] : &e->out;
    if (x->rank != 4 || y->rank != 4 || x->dtype != VF_F32 || y->dtype != VF_F32 || e->out.dtype != VF_F32 ||
        e->n_in != (grad ? 2 : 1) || y->shape[3] != x->shape[3] || y->shape[0] != x->shape[0])
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: %s takes f32 NHWC tensors of one batch "
                          "and channel count", vf_op_get(e->op)->name);
    /* oneDNN's max skips NaNs; ours counts a NaN at a window's first
       position (the rule every backend shares): with a NaN in x, the loops */
    bool max = e->op == VF_OP_MAX_POOL2D || e->op == VF_OP_MAX_POOL2D_GRAD;
    if (!(max && has_nan(x)) && vf_cpu_dnnl_pool(cpu->dnnl, e)) return VF_OK;
    const vf_conv_attrs *a = &e->attrs.conv;
    pool_dims d = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], y->shape[1], y->shape[2]};
    bool is_max = e->op == VF_OP_MAX_POOL2D || e->op == VF_OP_MAX_POOL2D_GRAD;
    const float *X = vf_cpu_ptr(x), *DY = grad ? vf_cpu_ptr(y) : NULL;
    float *OUT = vf_cpu_ptr(&e->out);
    if (grad) memset(OUT, 0, sizeof *OUT * (size_t)vf_cpu_numel(&e->out));
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                int64_t r[4];
                window(a, &d, oh, ow, r);
                int64_t count = (r[1] - r[0]) * (r[3] - r[2]);
                for (int64_t c = 0; c < d.C; c++) {
                    int64_t yi = ((n * d.OH + oh) * d.OW + ow) * d.C + c, best = -1;
                    double acc = 0;
                    for (int64_t ih = r[0]; ih < r[1]; ih++)
                        for (int64_t iw = r[2]; iw < r[3]; iw++) {
                            int64_t xi = ((n * d.H + ih) * d.W + iw) * d.C + c;
                            if (!is_max) acc += grad ? 0 : X[xi];
                            else if (best < 0 || X[xi] > X[best]) best = xi;
                            if (grad && !is_max) OUT[xi] += DY[yi] / (float)count;
                        }
                    if (count == 0) { /* cannot happen for VALID / SAME; an empty window is 0 */
                        if (!grad) OUT[yi] = 0;
                        continue;
                    }
                    if (!grad) OUT[yi] = is_max ? X[best] : (float)(acc / (double)count);
                    else if (is_max) OUT[best] += DY[yi];
                }
            }
    return VF_OK;
}
