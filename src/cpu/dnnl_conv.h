/* conv2d, max / avg pooling and their gradients (the window ops) on the
 * CPU backend through oneDNN.
 *
 * oneDNN (Debian's libdnnl2) runs f32 convolutions and pools with JIT
 * kernels for this CPU's vector width directly on our NHWC images (only a
 * filter is reordered, into oneDNN's blocked layout), 1.15-6x faster than
 * im2col + sgemm and the pool loops (docs/BENCHMARKS.md, "Convolutions and
 * pools on the CPU backend"). Like OpenBLAS
 * (blas.h) it is not linked: a constructor loads libdnnl.so.2 before main,
 * with OMP_WAIT_POLICY=passive unless the user set it, so that its OpenMP
 * threads sleep between primitives instead of spinning against OpenBLAS's
 * threads and the rest of the program (the runtime reads the variable only
 * when it is loaded). A machine without the library, or a build without
 * dnnl.h, or VKFUSE_CPU_DNNL=0 in the environment when a context is
 * created, gets kernels_conv.c's im2col + sgemm for every convolution and
 * kernels_pool.c's loops for every pool.
 *
 * Each backend keeps its own engine, stream and a small cache of
 * primitives keyed by op and geometry (24, least recently used replaced),
 * so a steady training loop creates its primitives once; each keeps its
 * filter's reordered copy with a copy of the filter's values it was made
 * from, so that a filter whose values have not changed since the last call
 * is not reordered again (compared by value: whatever wrote the filter, a
 * change is seen), and a max pool gradient its forward's result and
 * argmax workspace, until it is replaced or the backend destroyed.
 * That memory is outside vf_context_stats' device bytes. Results
 * are deterministic for a given thread count (OMP_NUM_THREADS, default
 * one per core).
 */
#ifndef VF_CPU_DNNL_CONV_H
#define VF_CPU_DNNL_CONV_H

#include "cpu/cpu.h"

#include <stdbool.h>
#include <stdint.h>

/* A backend's oneDNN state; NULL when oneDNN is not used (see above). */
vf_cpu_dnnl *vf_cpu_dnnl_create(void);
void vf_cpu_dnnl_destroy(vf_cpu_dnnl *d);

/* Runs conv exec e (conv2d, conv2d_backprop_input or
   conv2d_backprop_filter, f32) on oneDNN; bias: NULL, or (conv2d only) an
   f32 vector of O values added to every output pixel as the kernel stores
   it (a plan's conv + bias group, cpu_fused.h). false: not done, nothing
   recorded (oneDNN has no primitive for this geometry, or memory ran
   out); the caller computes it another way. */
bool vf_cpu_dnnl_conv(vf_cpu_dnnl *d, const vf_exec *e, const vf_tref *bias);
/* The same for the pools and their gradients (max_pool2d, avg_pool2d,
   f32, NHWC). */
bool vf_cpu_dnnl_pool(vf_cpu_dnnl *d, const vf_exec *e);

/* For tests: convolutions oneDNN has run in this process and primitives
   made for them, those of them that added a bias, filters not reordered
   again because their values had not changed, over all backends, and why
   oneDNN is not in use ("" when it is available). */
int64_t vf_cpu_dnnl_runs(void);
int64_t vf_cpu_dnnl_made(void);
int64_t vf_cpu_dnnl_bias_runs(void);
int64_t vf_cpu_dnnl_filter_reuses(void);
const char *vf_cpu_dnnl_unavailable(void);

#endif
