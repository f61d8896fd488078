/* Shared helpers of the cmocka tests: contexts per backend, data, and
 * comparisons with NaN/Inf handled. */
#ifndef VF_TESTUTIL_H
#define VF_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vkfuse.h"

/* A context on the given backend with the validation layer when
   VKFUSE_VALIDATION=1 (ctest sets it). Fails the test if it cannot be made:
   lavapipe is part of the test environment, so a missing Vulkan device is
   a failure, not a skip (set VKFUSE_TEST_NO_VULKAN=1 to run CPU-only). */
vf_context *vt_context(vf_backend backend);
/* Destroys ctx after asserting that it recorded no error. */
void vt_context_done(vf_context *ctx);
/* A Vulkan and a CPU context shared by every case of a cmocka group (a
   context costs about 0.1 s, 0.25 s under ASan): vt_group_setup (plain)
   or vt_group_setup_profiling (profile_common.h) as the group's setup,
   vt_group_teardown as its teardown. vt_group_vk is NULL without Vulkan. */
extern vf_context *vt_group_vk, *vt_group_cpu;
int vt_group_setup(void **state);
int vt_group_teardown(void **state);
/* Whether Vulkan tests should run. */
int vt_have_vulkan(void);
/* The backends a test runs on: the CPU backend, then Vulkan when
   vt_have_vulkan(); returns how many (1 or 2). */
int vt_backends(vf_backend b[2]);
/* Two cmocka tests, fn_cpu and fn_vulkan, running fn(backend); the Vulkan
   one does nothing when vt_have_vulkan() is false. */
#define VT_PER_BACKEND(fn)                                  \
    static void fn##_cpu(void **state)                      \
    {                                                       \
        (void)state;                                        \
        fn(VF_BACKEND_CPU);                                 \
    }                                                       \
    static void fn##_vulkan(void **state)                   \
    {                                                       \
        (void)state;                                        \
        if (vt_have_vulkan()) fn(VF_BACKEND_VULKAN);        \
    }
#define VT_PER_BACKEND_TESTS(fn) cmocka_unit_test(fn##_cpu), cmocka_unit_test(fn##_vulkan)

/* Deterministic pseudo-random floats in [lo, hi) and ints in [lo, hi]. */
void vt_fill_uniform(float *x, size_t n, float lo, float hi, uint64_t seed);
void vt_fill_int(int32_t *x, size_t n, int32_t lo, int32_t hi, uint64_t seed);

/* Element-wise |got-want| <= atol + rtol*|want|; NaN matches NaN, Inf must
   match Inf of the same sign. Prints the first mismatch and fails. */
void vt_assert_close_f32(const float *got, const float *want, size_t n, double atol, double rtol,
                         const char *what);
void vt_assert_equal_bytes(const void *got, const void *want, size_t n, const char *what);
/* f32 values bit for bit, except that a NaN equals any NaN: IEEE 754 leaves
   the sign and payload of an operation's NaN result open (NaN + NaN gives
   either operand's, by the order the compiled loop gives them), so two
   kernel paths that agree on every value may differ there. */
void vt_assert_same_f32(const float *got, const float *want, size_t n, const char *what);
/* The absolute tolerance of an f32 matmul with inner size k against a
   double (or OpenBLAS) reference: rounding grows like sqrt(k). */
double vt_matmul_atol(int64_t k);

/* Reads t into a malloc'd buffer (caller frees); fails the test on error. */
void *vt_read(vf_tensor *t);
/* The one f32 element of t (a scalar or a size-1 tensor). */
float vt_read1(vf_tensor *t);
/* An f32 scalar holding v, and the sum of all of x's elements (a scalar). */
vf_tensor *vt_scalar(vf_context *ctx, double v);
vf_tensor *vt_sum(vf_context *ctx, vf_tensor *x);
/* vf_cond branches of two inputs (the gradient tests'): out = in[0] * in[1]
   and out = in[0] * in[0]. */
vf_status vt_branch_mul(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);
vf_status vt_branch_square(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);

/* Traced vs eager over a symbolic dim: for the fused and the unfused plan,
   a function of body with signature sig is called at each size n of
   sizes[n_sizes] on the inputs make() builds (new tensors in the current
   scope), and body is also run eagerly on them; every traced output must
   equal the eager one (f32 within atol + rtol*|x|, bit for bit when both
   are 0; other dtypes bit for bit), check() (NULL: none) then tests the
   eager outputs against the test's own reference, and one trace must have
   served every size. */
typedef struct vt_traced_case {
    const char *name;
    vf_body body;
    int n_inputs, n_outputs;
    const vf_tensor_spec *sig;
    const int64_t *sizes;
    int n_sizes;
    void (*make)(vf_context *ctx, int64_t n, vf_tensor **in, void *user);
    void (*check)(int64_t n, vf_tensor *const *in, vf_tensor *const *eager, void *user);
    double atol, rtol;
    void *user;
} vt_traced_case;
void vt_check_traced_vs_eager(vf_context *ctx, const vt_traced_case *c);

/* Central difference of f along one coordinate *x (f reads it through
   its user pointer): (f(x + h) - f(x - h)) / 2h with h = rel * max(1,
   |x|); *x is restored. The finite differences of the gradient tests
   (test_tape*.c) against double-precision references. */
double vt_central_diff(double (*f)(void *user), void *user, double *x, double rel);

/* Asserts that the context's status is st and its message contains all
   the given substrings (NULL-terminated list), then clears the error. */
void vt_expect_error(vf_context *ctx, vf_status st, ...);

/* Seeded random-program tests under a time budget. Case i uses seed
   seed0 + i, seed0 from VKFUSE_RANDOM_SEED (default 1). With
   VKFUSE_RANDOM_CASES=<n> exactly n cases run, whatever the time; else
   cases run until max_cases or until budget_s seconds have passed
   (VKFUSE_RANDOM_BUDGET=<s> overrides it), at least min_cases, so a busy
   machine runs fewer seeds instead of timing out. The seeds that ran are
   always the same prefix, so a failing seed fails on every run that
   reaches it. */
typedef struct vt_seeds {
    uint64_t seed0;
    long done, max_cases, min_cases;
    double budget_s, t0;
    bool fixed; /* VKFUSE_RANDOM_CASES was given */
} vt_seeds;
void vt_seeds_init(vt_seeds *s, long max_cases, long min_cases, double budget_s);
/* Default time budgets are halved in the sanitizer build (it runs the
   same cases 2-5x slower, and its job is memory errors, which the first
   cases find as well as the last); a budget given by the environment is
   taken as it is. */
double vt_budget_default(double budget_s);
/* The next seed into *seed; false when the count or the budget is spent. */
bool vt_seeds_next(vt_seeds *s, uint64_t *seed);
/* "n cases from seed s in t s (budget b s)" for the test's summary line. */
void vt_seeds_report(const vt_seeds *s, const char *what);

/* Runs the group, or with VKFUSE_TEST_SHARD=k/n only tests[i] with
   i % n == k: a file too slow for one ctest entry under the sanitizers
   runs as n entries (VF_SHARDED_TESTS in tests/CMakeLists.txt). */
int vt_run_group(const char *name, const struct CMUnitTest *tests, size_t n);
#define VT_RUN_GROUP(tests) vt_run_group(#tests, tests, sizeof(tests) / sizeof((tests)[0]))
/* Monotonic seconds. */
double vt_now(void);
/* An integer from the environment, dflt when unset or empty. */
long vt_env_long(const char *name, long dflt);

#endif
