/* conv2d on the CPU backend: im2col + OpenBLAS sgemm (f32).
 *
 * For each image and group the receptive fields are unrolled into a
 * [OH*OW, KH*KW*Cg] matrix (zeros where the window reads padding), whose
 * product with the group's slice of the HWIO filter, read in place as a
 * [KH*KW*Cg, O] matrix with leading dim O, lands directly in the NHWC
 * output (leading dim O). So no filter or output is ever rearranged; the
 * only scratch is one image-group's unrolled matrix. */
#include "cpu/cpu.h"

#include <cblas.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Unroll image x (H, W, C channels, channels c0 .. c0+Cg-1) into col. */
static void im2col(const float *x, int64_t H, int64_t W, int64_t C, int64_t c0, int64_t Cg, int64_t KH,
                   int64_t KW, int64_t OH, int64_t OW, const vf_conv_attrs *a, float *col)
{
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            float *row = col + (oh * OW + ow) * KH * KW * Cg;
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t ih = oh * a->stride[0] + kh * a->dilation[0] - a->pad[0];
                for (int64_t kw = 0; kw < KW; kw++, row += Cg) {
                    int64_t iw = ow * a->stride[1] + kw * a->dilation[1] - a->pad[2];
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) {
                        memset(row, 0, sizeof *row * (size_t)Cg);
                        continue;
                    }
                    memcpy(row, x + (ih * W + iw) * C + c0, sizeof *row * (size_t)Cg);
                }
            }
        }
}

vf_status vf_cpu_conv2d(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *x = &e->in[0], *w = &e->in[1], *y = &e->out;
    if (e->n_in != 2 || x->rank != 4 || w->rank != 4 || y->rank != 4 || x->dtype != VF_F32 ||
        w->dtype != VF_F32 || y->dtype != VF_F32)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: conv2d takes f32 NHWC input, HWIO filter and output (cast to f32 first)");
    const vf_conv_attrs *a = &e->attrs.conv;
    int64_t N = x->shape[0], H = x->shape[1], W = x->shape[2], C = x->shape[3];
    int64_t KH = w->shape[0], KW = w->shape[1], Cg = w->shape[2], O = w->shape[3];
    int64_t OH = y->shape[1], OW = y->shape[2], G = a->groups;
    if (G < 1 || Cg * G != C || O % G != 0 || y->shape[3] != O || y->shape[0] != N)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: conv2d shapes and groups disagree");
    int64_t Og = O / G, M = OH * OW, K = KH * KW * Cg;
    float *Y = vf_cpu_ptr(y);
    if (K == 0) { /* no input channel: sums of nothing */
        memset(Y, 0, sizeof *Y * (size_t)vf_cpu_numel(y));
        return VF_OK;
    }
    if (M > INT_MAX || K > INT_MAX || O > INT_MAX || (size_t)M > SIZE_MAX / sizeof(float) / (size_t)K)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: conv2d of %lld output pixels by %lld filter taps exceeds the 32-bit "
                          "sizes of sgemm; split the batch or the image", (long long)M, (long long)K);
    float *col = malloc(sizeof *col * (size_t)(M * K));
    if (!col)
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                          "cpu backend: conv2d: out of host memory for the %lld x %lld unrolled image",
                          (long long)M, (long long)K);
    const float *X = vf_cpu_ptr(x), *Wt = vf_cpu_ptr(w);
    for (int64_t n = 0; n < N; n++)
        for (int64_t g = 0; g < G; g++) {
            im2col(X + n * H * W * C, H, W, C, g * Cg, Cg, KH, KW, OH, OW, a, col);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)M, (int)Og, (int)K, 1.0f, col, (int)K,
                        Wt + g * Og, (int)O, 0.0f, Y + n * M * O + g * Og, (int)O);
        }
    free(col);
    return VF_OK;
}
