/* Shared by the convolution tests (test_ops_conv.c, test_conv_cpu_bias.c):
 * a conv2d case and a double-precision direct convolution written here
 * (TF's conv2d semantics: NHWC, HWIO, SAME padding with the odd pad after)
 * with its exact adjoints. */
#ifndef VF_CONV_COMMON_H
#define VF_CONV_COMMON_H

#include "vkfuse.h"

#include <stdint.h>

typedef struct {
    int64_t n, h, w, c, kh, kw, o;
    vf_conv2d_desc d;
} conv_case;

/* The reference's own reading of a desc: out size and leading pads. */
void conv_ref_geometry(const conv_case *k, int64_t out[2], int64_t lead[2]);

/* y[n, oh, ow, o] = sum over kh, kw, c of x[n, oh*s + kh*d - pad, ..., g*Cg + c] * w[kh, kw, c, o],
   malloc'd (the caller frees), its out size in out. With wt (weights of
   y): also dx and dw of sum(wt * y), accumulated from the same loops (each
   product's partials), so they are the exact adjoints. */
double *conv_ref(const conv_case *k, const float *x, const float *w, int64_t out[2], const float *wt, double *dx,
                 double *dw);

#endif
