/* conv2d and its backprop ops on the CPU backend: oneDNN where it is
 * available (dnnl_conv.c), otherwise im2col + OpenBLAS sgemm (f32). backprop_input multiplies dy by the filter's transpose and folds
 * the unrolled rows back (col2im); backprop_filter multiplies the unrolled
 * image's transpose by dy, accumulating over the batch.
 *
 * For each image and group the receptive fields are unrolled into a
 * [OH*OW, KH*KW*Cg] matrix (zeros where the window reads padding), whose
 * product with the group's slice of the HWIO filter, read in place as a
 * [KH*KW*Cg, O] matrix with leading dim O, lands directly in the NHWC
 * output (leading dim O). So no filter or output is ever rearranged; the
 * only scratch is one image-group's unrolled matrix.
 *
 * vf_cpu_conv_bias is conv2d with a per-channel bias added, for a plan's
 * conv + bias group (cpu_fused.h): oneDNN's bias argument, else the add
 * after the sgemm. */
#include "cpu/cpu.h"
#include "cpu/blas.h"
#include "cpu/dnnl_conv.h"
#include "util/fault.h"

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t bias_folds;

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

/* Adds the unrolled rows of col back onto image dx (the adjoint of im2col). */
static void col2im(const float *col, int64_t H, int64_t W, int64_t C, int64_t c0, int64_t Cg, int64_t KH,
                   int64_t KW, int64_t OH, int64_t OW, const vf_conv_attrs *a, float *dx)
{
    for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
            const float *row = col + (oh * OW + ow) * KH * KW * Cg;
            for (int64_t kh = 0; kh < KH; kh++) {
                int64_t ih = oh * a->stride[0] + kh * a->dilation[0] - a->pad[0];
                for (int64_t kw = 0; kw < KW; kw++, row += Cg) {
                    int64_t iw = ow * a->stride[1] + kw * a->dilation[1] - a->pad[2];
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                    float *p = dx + (ih * W + iw) * C + c0;
                    for (int64_t c = 0; c < Cg; c++) p[c] += row[c];
                }
            }
        }
}

/* The forward's sizes, whichever window op e is. */
typedef struct {
    int64_t N, H, W, C, KH, KW, Cg, O, OH, OW, G, Og, M, K;
} conv_dims;

static bool conv_dims_of(const vf_exec *e, conv_dims *d)
{
    const vf_tref *x, *w, *y;
    const vf_tref *a = &e->in[0], *b = &e->in[1], *o = &e->out;
    if (e->n_in != 2 || a->rank != 4 || b->rank != 4 || o->rank != 4 || a->dtype != VF_F32 ||
        b->dtype != VF_F32 || o->dtype != VF_F32)
        return false;
    if (e->op == VF_OP_CONV2D) x = a, w = b, y = o;
    else if (e->op == VF_OP_CONV2D_BACKPROP_INPUT) y = a, w = b, x = o;
    else x = a, y = b, w = o;
    *d = (conv_dims){.N = x->shape[0], .H = x->shape[1], .W = x->shape[2], .C = x->shape[3], .KH = w->shape[0],
                     .KW = w->shape[1], .Cg = w->shape[2], .O = w->shape[3], .OH = y->shape[1], .OW = y->shape[2],
                     .G = e->attrs.conv.groups};
    if (d->G < 1 || d->Cg * d->G != d->C || d->O % d->G != 0 || y->shape[3] != d->O || y->shape[0] != d->N)
        return false;
    d->Og = d->O / d->G;
    d->M = d->OH * d->OW;
    d->K = d->KH * d->KW * d->Cg;
    return true;
}

vf_status vf_cpu_conv(vf_cpu *cpu, const vf_exec *e)
{
    conv_dims d;
    if (!conv_dims_of(e, &d))
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: %s takes f32 NHWC input, HWIO filter and output whose shapes and "
                          "groups agree (cast to f32 first)", vf_op_get(e->op)->name);
    if (vf_cpu_dnnl_conv(cpu->dnnl, e, NULL)) return VF_OK;
    const vf_conv_attrs *a = &e->attrs.conv;
    const vf_cpu_blas *blas = vf_cpu_blas_get();
    if (!blas->ok)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: %s: %s", vf_op_get(e->op)->name, blas->error);
    float *Y = vf_cpu_ptr(&e->out);
    if (d.K == 0 || d.M == 0 || d.Og == 0 || d.N == 0) { /* sums of nothing */
        memset(Y, 0, sizeof *Y * (size_t)vf_cpu_numel(&e->out));
        return VF_OK;
    }
    if (d.M > INT_MAX || d.K > INT_MAX || d.O > INT_MAX || (size_t)d.M > SIZE_MAX / sizeof(float) / (size_t)d.K)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: %s of %lld output pixels by %lld filter taps exceeds the 32-bit "
                          "sizes of sgemm; split the batch or the image", vf_op_get(e->op)->name,
                          (long long)d.M, (long long)d.K);
    float *col = vf_malloc(sizeof *col * (size_t)(d.M * d.K));
    if (!col)
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                          "cpu backend: %s: out of host memory (malloc failed) for the %lld x %lld unrolled image",
                          vf_op_get(e->op)->name, (long long)d.M, (long long)d.K);
    const float *A = vf_cpu_ptr(&e->in[0]), *B = vf_cpu_ptr(&e->in[1]);
    int64_t img = d.H * d.W * d.C, M = d.M, K = d.K, O = d.O, Og = d.Og, Cg = d.Cg;
    if (e->op == VF_OP_CONV2D_BACKPROP_INPUT) memset(Y, 0, sizeof *Y * (size_t)vf_cpu_numel(&e->out));
    for (int64_t n = 0; n < d.N; n++)
        for (int64_t g = 0; g < d.G; g++) {
            switch (e->op) {
            case VF_OP_CONV2D: /* y[M, Og] = col[M, K] @ w[K, Og] */
                im2col(A + n * img, d.H, d.W, d.C, g * Cg, Cg, d.KH, d.KW, d.OH, d.OW, a, col);
                blas->sgemm(VF_BLAS_ROW_MAJOR, VF_BLAS_NO_TRANS, VF_BLAS_NO_TRANS, (int)M, (int)Og, (int)K, 1.0f, col, (int)K,
                            B + g * Og, (int)O, 0.0f, Y + n * M * O + g * Og, (int)O);
                break;
            case VF_OP_CONV2D_BACKPROP_INPUT: /* col[M, K] = dy[M, Og] @ w[K, Og]^T, folded back */
                blas->sgemm(VF_BLAS_ROW_MAJOR, VF_BLAS_NO_TRANS, VF_BLAS_TRANS, (int)M, (int)K, (int)Og, 1.0f,
                            A + n * M * O + g * Og, (int)O, B + g * Og, (int)O, 0.0f, col, (int)K);
                col2im(col, d.H, d.W, d.C, g * Cg, Cg, d.KH, d.KW, d.OH, d.OW, a, Y + n * img);
                break;
            default: /* backprop_filter: dw[K, Og] += col[M, K]^T @ dy[M, Og] over the images */
                im2col(A + n * img, d.H, d.W, d.C, g * Cg, Cg, d.KH, d.KW, d.OH, d.OW, a, col);
                blas->sgemm(VF_BLAS_ROW_MAJOR, VF_BLAS_TRANS, VF_BLAS_NO_TRANS, (int)K, (int)Og, (int)M, 1.0f, col, (int)K,
                            B + n * M * O + g * Og, (int)O, n ? 1.0f : 0.0f, Y + g * Og, (int)O);
                break;
            }
        }
    free(col);
    return VF_OK;
}

vf_status vf_cpu_conv_bias(vf_cpu *cpu, const vf_exec *e, const vf_tref *bias)
{
    conv_dims d;
    if (e->op != VF_OP_CONV2D || !conv_dims_of(e, &d) || bias->dtype != VF_F32 || vf_cpu_numel(bias) != d.O)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: a conv2d + bias takes an f32 bias of the conv's %lld output channels",
                          (long long)(e->out.rank == 4 ? e->out.shape[3] : -1));
    atomic_fetch_add(&bias_folds, 1);
    if (vf_cpu_dnnl_conv(cpu->dnnl, e, bias)) return VF_OK;
    vf_status s = vf_cpu_conv(cpu, e);
    if (s) return s;
    /* the separate add's own arithmetic: the f32 conv value + the bias */
    float *y = vf_cpu_ptr(&e->out);
    const float *b = vf_cpu_ptr(bias);
    int64_t pixels = d.O ? vf_cpu_numel(&e->out) / d.O : 0;
    for (int64_t p = 0; p < pixels; p++, y += d.O)
        for (int64_t o = 0; o < d.O; o++) y[o] += b[o];
    return VF_OK;
}

int64_t vf_cpu_conv_bias_folds(void) { return atomic_load(&bias_folds); }
