/* The CPU backend's OpenBLAS when the process has loaded OpenBLAS first
 * (cpu/blas.h): this program links libopenblas itself, so the library is
 * loaded and initialised, with OpenBLAS's own kernel choice, before
 * vkfuse's loader runs, as in a Python program that imported NumPy first.
 * vkfuse must still run the kernel set it chose, from a private copy, and
 * leave the process's copy as it was. */
#include "child.h"
#include "cpu/blas.h"
#include "testutil.h"

#include <cblas.h>
#include <dlfcn.h>
#include <math.h>
#include <string.h>
#include <strings.h>

enum { M = 256, N = 192, K = 320 }; /* large enough for OpenBLAS to use its threads */
static float a[M * K], b[K * N], c_own[M * N], c_ours[M * N];

static void fill(void)
{
    for (int i = 0; i < M * K; i++) a[i] = (float)((i * 7) % 13) / 13.0f - 0.5f;
    for (int i = 0; i < K * N; i++) b[i] = (float)((i * 5) % 11) / 11.0f - 0.5f;
}

/* vkfuse's sgemm agrees with the process's own (each element a sum of K
   products of values under 0.5: within a few ulps of K / 4). */
static bool ours_matches_own(void)
{
    const vf_cpu_blas *bl = vf_cpu_blas_get();
    memset(c_ours, 0, sizeof c_ours);
    bl->sgemm(VF_BLAS_ROW_MAJOR, VF_BLAS_NO_TRANS, VF_BLAS_NO_TRANS, M, N, K, 1.0f, a, K, b, N, 0.0f, c_ours, N);
    for (int i = 0; i < M * N; i++)
        if (fabsf(c_ours[i] - c_own[i]) > 1e-3f) {
            fprintf(stderr, "c[%d]: vkfuse's sgemm %g, the process's %g\n", i, c_ours[i], c_own[i]);
            return false;
        }
    return true;
}

static bool under_sanitizer(void) { return dlsym(RTLD_DEFAULT, "__asan_init") || dlsym(RTLD_DEFAULT, "__tsan_init"); }

static void test_kernel_set_despite_loaded_copy(void **state)
{
    (void)state;
    const vf_cpu_blas *bl = vf_cpu_blas_get();
    assert_true(bl->ok);
    char own_core[64];
    snprintf(own_core, sizeof own_core, "%s", openblas_get_corename());
    const char *want = getenv("OPENBLAS_CORETYPE") ? NULL : vf_cpu_blas_core_for_cpu();
    if (!want || strcasecmp(own_core, want) == 0) {
        /* the process's copy runs what we would ask for: it is used */
        assert_string_equal(bl->how, "shared with the process");
        assert_ptr_equal((void *)bl->sgemm, (void *)cblas_sgemm);
    } else if (under_sanitizer()) {
        /* no private copy under a sanitizer: the process's, and why */
        assert_string_equal(bl->core, own_core);
        assert_non_null(strstr(bl->how, "which loaded it first: a private copy is not loaded under"));
    } else {
        assert_true(strcasecmp(bl->core, want) == 0);
        assert_string_equal(bl->core_set, want);
        assert_non_null(strstr(bl->how, "private copy"));
        assert_ptr_not_equal((void *)bl->sgemm, (void *)cblas_sgemm);
        assert_string_equal(openblas_get_corename(), own_core); /* the process's copy is left as it was */
    }
    /* the context's device name says which kernels run, from which copy */
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(&(vf_context_desc){.backend = VF_BACKEND_CPU}, &ctx), VF_OK);
    const char *name = vf_device_name(ctx);
    assert_non_null(strstr(name, bl->core));
    assert_non_null(strstr(name, bl->how));
    vf_context_destroy(ctx);
}

static void test_same_products(void **state)
{
    (void)state;
    fill();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c_own, N);
    assert_true(ours_matches_own());
}

/* The private copy's thread pool does not survive fork: its own fork
   handler went to its own libc, so vkfuse's must shut the pool down, or
   the child's first threaded sgemm waits forever on threads fork did not
   copy (SIGALRM in vt_child_run). */
static void sgemm_in_child(vf_backend be)
{
    (void)be;
    if (!ours_matches_own()) exit(1);
}

static void test_fork(void **state)
{
    (void)state;
    const vf_cpu_blas *bl = vf_cpu_blas_get();
    if (bl->set_num_threads) bl->set_num_threads(2); /* the pool runs even on one core */
    fill();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c_own, N);
    assert_true(ours_matches_own()); /* the pool is up */
    assert_true(vt_child_run("sgemm after fork", sgemm_in_child, VF_BACKEND_CPU, 20));
    assert_true(ours_matches_own()); /* and in the parent after it */
}

int main(void)
{
    /* the process's own OpenBLAS, called before anything of vkfuse's */
    fill();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a, K, b, N, 0.0f, c_own, N);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel_set_despite_loaded_copy),
        cmocka_unit_test(test_same_products),
        cmocka_unit_test(test_fork),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
