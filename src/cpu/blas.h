/* OpenBLAS, loaded at run time with the kernel set this CPU can run.
 *
 * OpenBLAS picks its kernels when it is loaded, from the CPU's model
 * number. A model it does not know gets its oldest x86-64 kernels: on an
 * AVX-512 Xeon that Debian 12's OpenBLAS 0.3.21 does not recognise,
 * sgemm then runs SSE3 code at a quarter of the speed the CPU has
 * (docs/BENCHMARKS.md, "OpenBLAS's kernel set"). The variable
 * OPENBLAS_CORETYPE overrides the choice, but only before the library is
 * loaded, so the library is not linked: blas.c loads it once, from a
 * constructor of ours (before main, when no other thread can be reading
 * the environment), with OPENBLAS_CORETYPE set from the CPU's features
 * (AVX-512 F/BW/DQ/VL: SkylakeX; AVX2 + FMA: Haswell) unless the user set
 * it, and then restores the environment as it was.
 *
 * A process may have loaded libopenblas.so.0 before us (a program linked
 * with it; Python with NumPy imported first, through Debian's libblas.so.3)
 * with OpenBLAS's own choice; dlopen would hand us that same, initialised
 * copy. When its kernel set is not the one we want, blas.c loads a private
 * copy with dlmopen into a link-map namespace of its own (one per process,
 * shared by every context: glibc has 16), where it initialises afresh
 * with our choice; it brings its own libc, libgfortran and thread pool,
 * and a fork handler of ours shuts that pool down before fork as the
 * copy's own handler (registered with its own libc) would. Under a
 * sanitizer runtime (ASan, TSan, MSan), or when dlmopen fails, vkfuse
 * uses the process's copy and its kernels, and `how` says why; the CPU
 * context's device name (vf_device_name) shows the kernel set and `how`.
 */
#ifndef VF_CPU_BLAS_H
#define VF_CPU_BLAS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vf_cpu_blas {
    bool ok;                   /* loaded, sgemm found */
    char error[256];           /* !ok: why (dlopen's or dlsym's message) */
    char core[64];             /* the kernel set OpenBLAS runs ("SkylakeX"), "" when it does not say */
    char core_set[32];         /* what vkfuse set OPENBLAS_CORETYPE to for the copy it uses; "": left as it was */
    char how[256];             /* which copy: "loaded by vkfuse", "shared with the process", "private copy: ...",
                                  or "shared with the process, which loaded it first: <why no private copy>" */
    void (*sgemm)(int order, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc);
    void (*set_num_threads)(int n);     /* NULL when absent */
    int (*get_num_threads)(void);       /* NULL when absent */
} vf_cpu_blas;

/* The kernel set vkfuse asks for on this CPU ("SkylakeX", "Haswell");
   NULL: OpenBLAS's own choice. */
const char *vf_cpu_blas_core_for_cpu(void);

/* The library as the constructor left it (never NULL; check ok). */
const vf_cpu_blas *vf_cpu_blas_get(void);

/* CBLAS's enums, as OpenBLAS's cblas.h numbers them (the header is not
   included: nothing here links against the library). */
enum { VF_BLAS_ROW_MAJOR = 101, VF_BLAS_NO_TRANS = 111, VF_BLAS_TRANS = 112 };

#endif
