/* The sum of a run of doubles as the CPU backend's reductions add it
 * (kernels_reduce.c), shared with the softmax gradient's row sums
 * (kernels_row_grad.c) so that both give the same bits. Inline: each
 * caller's loop vectorises it for its own target. (Sixteen lanes were
 * tried: long rows 15% faster in the gradient, but the reduction's own
 * rows of 10 twice as slow; four it is.)
 */
#ifndef VF_CPU_SUM_H
#define VF_CPU_SUM_H

#include <stdbool.h>
#include <stdint.h>

/* Sum of x[0..n) (squares when sq) in four interleaved double partial
   sums added at the end: four independent add chains instead of one. The
   order is fixed, so the result is too; each partial sum has the error
   bound of a plain double sum of a quarter of the run. */
static inline double vf_cpu_sum4(const double *x, int64_t n, bool sq)
{
    double s[4] = {0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) s[l] += sq ? x[i + l] * x[i + l] : x[i + l];
    for (; i < n; i++) s[0] += sq ? x[i] * x[i] : x[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}

#endif
