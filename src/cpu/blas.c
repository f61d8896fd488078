/* OpenBLAS loaded at run time with the kernels this CPU can run (blas.h). */
#include "cpu/blas.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_cpu_blas blas;

/* The kernel set to ask for, from the CPU's features (which the compiler's
   runtime reads with the OS's support for the wider registers checked);
   NULL: leave OpenBLAS's own choice. */
static const char *coretype_for_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
    return NULL;
}

/* Before main (or when a program dlopens us, before it can call us): the
   only moment the environment can be changed without racing a reader. */
__attribute__((constructor)) static void blas_load(void)
{
    const char *want = getenv("OPENBLAS_CORETYPE") ? NULL : coretype_for_cpu();
    if (want) {
        snprintf(blas.core_set, sizeof blas.core_set, "%s", want);
        setenv("OPENBLAS_CORETYPE", want, 0);
    }
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
    if (want) unsetenv("OPENBLAS_CORETYPE"); /* as it was: unset */
    if (!h) {
        const char *e = dlerror();
        snprintf(blas.error, sizeof blas.error, "OpenBLAS could not be loaded (%s); install Debian's libopenblas0",
                 e ? e : "libopenblas.so.0 not found");
        return;
    }
    *(void **)&blas.sgemm = dlsym(h, "cblas_sgemm");
    *(void **)&blas.set_num_threads = dlsym(h, "openblas_set_num_threads");
    *(void **)&blas.get_num_threads = dlsym(h, "openblas_get_num_threads");
    char *(*corename)(void) = NULL;
    *(void **)&corename = dlsym(h, "openblas_get_corename");
    if (corename && corename()) snprintf(blas.core, sizeof blas.core, "%s", corename());
    if (!blas.sgemm) {
        snprintf(blas.error, sizeof blas.error, "the OpenBLAS library loaded has no cblas_sgemm");
        return;
    }
    blas.ok = true;
    /* h stays open for the life of the process: the kernels call into it */
}

const vf_cpu_blas *vf_cpu_blas_get(void) { return &blas; }
