/* OpenBLAS loaded at run time with the kernels this CPU can run (blas.h). */
#include "cpu/blas.h"

#include "backend.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static vf_cpu_blas blas;

/* The private copy's pool shutdown, run before each fork (see blas_load). */
static void (*private_shutdown)(void);

/* From the CPU's features, which the compiler's runtime reads with the
   OS's support for the wider registers checked. */
const char *vf_cpu_blas_core_for_cpu(void)
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

/* The kernel set a loaded OpenBLAS runs; "" when it does not say. */
static const char *core_of(void *h)
{
    char *(*corename)(void) = NULL;
    *(void **)&corename = dlsym(h, "openblas_get_corename");
    const char *c = corename ? corename() : NULL;
    return c ? c : "";
}

/* A sanitizer runtime in the process (whether or not vkfuse itself was
   built with one): its interceptors see only the base namespace, so a
   private copy's allocations and threads would escape it, and ASan/TSan
   abort or report on them. */
static const char *sanitizer_loaded(void)
{
    static const char *const rt[][2] = {{"__asan_init", "AddressSanitizer"}, {"__tsan_init", "ThreadSanitizer"},
                                        {"__msan_init", "MemorySanitizer"}, {"__hwasan_init", "HWAddressSanitizer"}};
    for (size_t i = 0; i < sizeof rt / sizeof *rt; i++)
        if (dlsym(RTLD_DEFAULT, rt[i][0])) return rt[i][1];
    return NULL;
}

static void before_fork(void)
{
    if (private_shutdown) private_shutdown();
}

/* A copy of OpenBLAS of our own, in a link-map namespace of its own, so
   that it initialises with the kernel set we ask for although the process
   already runs one with another (NULL when that cannot be had; why says). */
static void *load_private(char *why, size_t len)
{
    const char *san = sanitizer_loaded();
    if (san) {
        snprintf(why, len, "a private copy is not loaded under %s", san);
        return NULL;
    }
    void *h = dlmopen(LM_ID_NEWLM, "libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, len, "a private copy could not be loaded (dlmopen: %s)", e ? e : "failed");
        return NULL;
    }
    /* The copy registered its own fork handler with its own copy of libc,
       whose list the process's fork never runs: without ours, a child
       would wait forever on pool threads that fork did not copy. */
    *(void **)&private_shutdown = dlsym(h, "blas_thread_shutdown_");
    if (private_shutdown) pthread_atfork(before_fork, NULL, NULL);
    return h;
}

/* Before main (or when a program dlopens us, before it can call us): the
   only moment the environment can be changed without racing a reader. */
__attribute__((constructor)) static void blas_load(void)
{
    const char *want = getenv("OPENBLAS_CORETYPE") ? NULL : vf_cpu_blas_core_for_cpu();
    /* Loaded already (a program linked with it, NumPy imported first)? A
       plain dlopen would return that one, initialised with its own choice. */
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    bool wrong = h && want && strcasecmp(core_of(h), want) != 0;
    if (h && !wrong) {
        snprintf(blas.how, sizeof blas.how, "shared with the process");
    } else {
        if (want) {
            snprintf(blas.core_set, sizeof blas.core_set, "%s", want);
            setenv("OPENBLAS_CORETYPE", want, 0);
        }
        void *own = NULL;
        char why[200] = "";
        if (wrong) {
            own = load_private(why, sizeof why);
            if (own) snprintf(blas.how, sizeof blas.how, "private copy: the process's own runs %s", core_of(h));
            else {
                snprintf(blas.how, sizeof blas.how, "shared with the process, which loaded it first: %s", why);
                blas.core_set[0] = 0; /* the one we use was not given it */
            }
        } else {
            own = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
            if (!own) own = dlopen("libopenblas.so", RTLD_NOW | RTLD_LOCAL);
            if (own) snprintf(blas.how, sizeof blas.how, "loaded by vkfuse");
        }
        if (want) unsetenv("OPENBLAS_CORETYPE"); /* as it was: unset */
        if (own) h = own;
    }
    if (!h) {
        const char *e = dlerror();
        snprintf(blas.error, sizeof blas.error, "OpenBLAS could not be loaded (%s); install Debian's libopenblas0",
                 e ? e : "libopenblas.so.0 not found");
        return;
    }
    *(void **)&blas.sgemm = dlsym(h, "cblas_sgemm");
    *(void **)&blas.set_num_threads = dlsym(h, "openblas_set_num_threads");
    *(void **)&blas.get_num_threads = dlsym(h, "openblas_get_num_threads");
    snprintf(blas.core, sizeof blas.core, "%s", core_of(h));
    if (!blas.sgemm) {
        snprintf(blas.error, sizeof blas.error, "the OpenBLAS library loaded has no cblas_sgemm");
        return;
    }
    blas.ok = true;
    /* h stays open for the life of the process: the kernels call into it */
}

const vf_cpu_blas *vf_cpu_blas_get(void) { return &blas; }

void vf_cpu_blas_describe(char *out, size_t len)
{
    if (!blas.ok) snprintf(out, len, "not loaded: %s", blas.error);
    else snprintf(out, len, "%s kernels, %s", blas.core[0] ? blas.core : "unnamed", blas.how);
}
