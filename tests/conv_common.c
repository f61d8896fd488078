/* The convolution tests' double-precision reference (conv_common.h). */
#include "conv_common.h"
#include "testutil.h"

#include <stdlib.h>

/* the reference's own reading of a desc: out size and leading pads */
void conv_ref_geometry(const conv_case *k, int64_t out[2], int64_t lead[2])
{
    int64_t in[2] = {k->h, k->w}, kk[2] = {k->kh, k->kw};
    for (int i = 0; i < 2; i++) {
        int64_t s = k->d.strides[i] ? k->d.strides[i] : 1, dl = k->d.dilations[i] ? k->d.dilations[i] : 1;
        int64_t span = dl * (kk[i] - 1) + 1;
        if (k->d.padding == VF_PADDING_SAME) {
            out[i] = (in[i] + s - 1) / s;
            int64_t total = (out[i] - 1) * s + span - in[i];
            lead[i] = total > 0 ? total / 2 : 0;
        } else {
            int64_t p0 = k->d.padding == VF_PADDING_EXPLICIT ? k->d.pads[2 * i] : 0;
            int64_t p1 = k->d.padding == VF_PADDING_EXPLICIT ? k->d.pads[2 * i + 1] : 0;
            /* an empty input that no window fits gives no rows (TF's size clamped at 0) */
            int64_t room = in[i] + p0 + p1 - span;
            out[i] = room < 0 ? 0 : room / s + 1;
            lead[i] = p0;
        }
    }
}

double *conv_ref(const conv_case *k, const float *x, const float *w, int64_t out[2], const float *wt,
             double *dx, double *dw)
{
    int64_t lead[2];
    conv_ref_geometry(k, out, lead);
    int64_t G = k->d.groups ? k->d.groups : 1, Cg = k->c / G, Og = k->o / G;
    int64_t sh = k->d.strides[0] ? k->d.strides[0] : 1, sw = k->d.strides[1] ? k->d.strides[1] : 1;
    int64_t dh = k->d.dilations[0] ? k->d.dilations[0] : 1, dlw = k->d.dilations[1] ? k->d.dilations[1] : 1;
    size_t total = (size_t)(k->n * out[0] * out[1] * k->o);
    double *y = calloc(total ? total : 1, sizeof *y);
    assert_non_null(y);
    for (int64_t n = 0; n < k->n; n++)
        for (int64_t oh = 0; oh < out[0]; oh++)
            for (int64_t ow = 0; ow < out[1]; ow++)
                for (int64_t o = 0; o < k->o; o++) {
                    double acc = 0;
                    int64_t g = o / Og;
                    for (int64_t i = 0; i < k->kh; i++)
                        for (int64_t j = 0; j < k->kw; j++) {
                            int64_t ih = oh * sh + i * dh - lead[0], iw = ow * sw + j * dlw - lead[1];
                            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                            for (int64_t c = 0; c < Cg; c++) {
                                int64_t xi = ((n * k->h + ih) * k->w + iw) * k->c + g * Cg + c;
                                int64_t wi = ((i * k->kw + j) * Cg + c) * k->o + o;
                                acc += (double)x[xi] * (double)w[wi];
                                if (!wt) continue;
                                double gy = wt[((n * out[0] + oh) * out[1] + ow) * k->o + o];
                                dx[xi] += gy * w[wi];
                                dw[wi] += gy * x[xi];
                            }
                        }
                    y[((n * out[0] + oh) * out[1] + ow) * k->o + o] = acc;
                }
    return y;
}
