/* The CPU backend's matmul, transpose, sources (fill, random_normal), f16
 * conversion, large buffers, errors and stats, through its iface, against
 * references written here. */
#include "cpu_test_common.h"
#include "cpu/blas.h"

#include <stdlib.h>

/* Let an ASan build report allocation failure as NULL, as glibc does, so
   the out-of-memory path can be tested. Unused without ASan. Exported
   despite the build's hidden visibility preset, or the ASan runtime does
   not find it. */
const char *__asan_default_options(void);
__attribute__((visibility("default"))) const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1";
}

/* ---- matmul ------------------------------------------------------------------ */

/* a batch dims ab (rank rab), b batch dims bb (rank rbb), out batch ob. */
static void check_matmul(fx *f, vf_dtype dt, int rab, const int64_t *ab, int rbb, const int64_t *bb,
                         int rob, const int64_t *ob, int64_t m, int64_t k, int64_t n, bool ta, bool tb)
{
    int64_t as[VF_MAX_RANK], bs[VF_MAX_RANK], os[VF_MAX_RANK];
    for (int d = 0; d < rab; d++) as[d] = ab[d];
    for (int d = 0; d < rbb; d++) bs[d] = bb[d];
    for (int d = 0; d < rob; d++) os[d] = ob[d];
    as[rab] = ta ? k : m, as[rab + 1] = ta ? m : k;
    bs[rbb] = tb ? n : k, bs[rbb + 1] = tb ? k : n;
    os[rob] = m, os[rob + 1] = n;
    int64_t na = numel(rab + 2, as), nb = numel(rbb + 2, bs), batches = numel(rob, ob);
    void *a = gen(dt, na, false), *b = gen(dt, nb, false);
    vf_exec e = {.op = VF_OP_MATMUL, .n_in = 2, .attrs = {.trans_a = ta, .trans_b = tb}};
    e.in[0] = mk(f, dt, rab + 2, as, a);
    e.in[1] = mk(f, dt, rbb + 2, bs, b);
    e.out = mk(f, dt, rob + 2, os, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    for (int64_t q = 0; q < batches; q++) {
        int64_t ia = bidx(q, rob, ob, rab, ab) * m * k, ib = bidx(q, rob, ob, rbb, bb) * k * n;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0, mag = 0;
                for (int64_t p = 0; p < k; p++) {
                    double x = getf(a, dt, ia + (ta ? p * m + i : i * k + p));
                    double y = getf(b, dt, ib + (tb ? j * k + p : p * n + j));
                    s += x * y;
                    mag += fabs(x * y);
                }
                double tol = dt == VF_F16 ? TOL_MATMUL_F16 : TOL_MATMUL_F32;
                expect_close("matmul", (q * m + i) * n + j, getf(got, dt, (q * m + i) * n + j), s, 0,
                             tol * mag + 1e-30);
            }
    }
    free(got);
    free(a);
    free(b);
    free_bufs(f);
}

static void test_matmul(void **state)
{
    static const int64_t ab[] = {2, 1}, bb[] = {3}, ob[] = {2, 3}, b4[] = {4};
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        check_matmul(*state, VF_F32, 2, ab, 1, bb, 2, ob, 5, 7, 3, ta, tb);
        check_matmul(*state, VF_F16, 2, ab, 1, bb, 2, ob, 5, 7, 3, ta, tb);
        check_matmul(*state, VF_F32, 1, b4, 0, NULL, 1, b4, 5, 7, 3, ta, tb); /* b shared */
        check_matmul(*state, VF_F32, 0, NULL, 1, b4, 1, b4, 5, 7, 3, ta, tb); /* a shared */
        check_matmul(*state, VF_F32, 0, NULL, 0, NULL, 0, NULL, 1, 1, 1, ta, tb);
        check_matmul(*state, VF_F32, 0, NULL, 0, NULL, 0, NULL, 33, 65, 17, ta, tb);
    }
}

/* ---- transpose ------------------------------------------------------------ */

static void check_transpose(fx *f, vf_dtype dt, int rank, const int64_t *shape, const int *perm)
{
    int64_t n = numel(rank, shape), os[VF_MAX_RANK], st[VF_MAX_RANK];
    void *x = gen(dt, n, false);
    vf_exec e = {.op = VF_OP_TRANSPOSE, .n_in = 1};
    for (int d = 0; d < rank; d++) os[d] = shape[perm[d]], e.attrs.perm[d] = perm[d];
    st[rank - 1] = 1;
    for (int d = rank - 2; d >= 0; d--) st[d] = st[d + 1] * shape[d + 1];
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, dt, rank, os, NULL);
    run(f, &e);
    unsigned char *got = dl(f, &e.out);
    size_t es = vf_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, src = 0;
        for (int d = rank - 1; d >= 0; d--) {
            src += (rem % os[d]) * st[perm[d]];
            rem /= os[d];
        }
        if (memcmp(got + i * es, (unsigned char *)x + src * es, es) != 0)
            fail_msg("transpose %s: element %lld from %lld differs", vf_dtype_name(dt), (long long)i,
                     (long long)src);
    }
    free(got);
    free(x);
    free_bufs(f);
}

static void test_transpose(void **state)
{
    static const int64_t s4[] = {2, 3, 4, 5}, s2[] = {33, 17}, s8[] = {2, 3, 1, 2, 3, 2, 1, 2};
    static const int p4[] = {2, 0, 3, 1}, p2[] = {1, 0}, p8[] = {7, 6, 5, 4, 3, 2, 1, 0};
    static const int pid[] = {0, 1, 2, 3};
    static const vf_dtype dts[] = {VF_BOOL, VF_F16, VF_F32, VF_I32, VF_U32};
    for (int t = 0; t < 5; t++) {
        check_transpose(*state, dts[t], 4, s4, p4);
        check_transpose(*state, dts[t], 4, s4, pid);
        check_transpose(*state, dts[t], 2, s2, p2);
        check_transpose(*state, dts[t], 8, s8, p8);
    }
}

/* ---- sources ----------------------------------------------------------------- */

static void test_fill(void **state)
{
    fx *f = *state;
    static const int64_t n[] = {7};
    struct { vf_dtype dt; double v; uint32_t want; } cases[] = {
        {VF_F32, 2.5, 0x40200000u}, {VF_I32, -3.7, (uint32_t)-3}, {VF_U32, -1.0, 0},
        {VF_U32, 1e12, UINT32_MAX}, {VF_I32, NAN, 0}, {VF_BOOL, 0.5, 1}, {VF_BOOL, 0.0, 0},
        {VF_F16, 1.0 / 3.0, 0x3555}, {VF_F16, 1e6, 0x7C00},
    };
    for (int c = 0; c < COUNT(cases); c++) {
        vf_exec e = {.op = VF_OP_FILL, .attrs.value = cases[c].v};
        e.out = mk(f, cases[c].dt, 1, n, NULL);
        run(f, &e);
        void *got = dl(f, &e.out);
        for (int i = 0; i < 7; i++) {
            uint32_t g = cases[c].dt == VF_F16 ? ((uint16_t *)got)[i]
                         : cases[c].dt == VF_BOOL ? ((uint8_t *)got)[i] : ((uint32_t *)got)[i];
            if (g != cases[c].want) fail_msg("fill case %d: got 0x%x want 0x%x", c, g, cases[c].want);
        }
        free(got);
    }
    free_bufs(f);
}

static float *random_normal(fx *f, vf_dtype dt, int64_t n, uint64_t seed)
{
    vf_exec e = {.op = VF_OP_RANDOM_NORMAL, .attrs.seed = seed};
    e.out = mk(f, dt, 1, &n, NULL);
    run(f, &e);
    return dl(f, &e.out);
}

static void test_random_normal(void **state)
{
    fx *f = *state;
    int64_t n = 100000;
    float *x = random_normal(f, VF_F32, n, 42);
    /* pinned by an independent Philox-4x32-10 (checked against the Random123
       known answers) + Box-Muller in double: seed 42, pairs 0 and 2 */
    expect_close("philox e0", 0, x[0], -0.970189708191932, 0, TOL_RANDOM_PIN_ABS);
    expect_close("philox e1", 1, x[1], 0.19401902682207053, 0, TOL_RANDOM_PIN_ABS);
    expect_close("philox e4", 4, x[4], -0.3369619546018606, 0, TOL_RANDOM_PIN_ABS);
    expect_close("philox e5", 5, x[5], -0.518748500979729, 0, TOL_RANDOM_PIN_ABS);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) s += x[i], s2 += (double)x[i] * x[i];
    double mean = s / (double)n, sd = sqrt(s2 / (double)n - mean * mean);
    assert_true(fabs(mean) < TOL_RANDOM_MOMENT);
    assert_true(fabs(sd - 1) < TOL_RANDOM_MOMENT);
    /* odd numel: element 4 is element 0 of pair 2, same stream */
    float *odd = random_normal(f, VF_F32, 5, 42);
    assert_memory_equal(odd, x, 5 * sizeof *x);
    free(odd);
    /* another seed differs; f16 is the f32 stream rounded */
    float *other = random_normal(f, VF_F32, 8, 43);
    assert_true(memcmp(other, x, 8 * sizeof *x) != 0);
    free(other);
    uint16_t *h = (uint16_t *)random_normal(f, VF_F16, 1001, 42);
    for (int i = 0; i < 1001; i++) assert_int_equal(h[i], vf_f32_to_f16(x[i]));
    free(h);
    free(x);
    free_bufs(f);
}

/* ---- f16 ------------------------------------------------------------------------- */

static void test_f16_roundtrip(void **state)
{
    fx *f = *state;
    /* f16 -> f32, every class: zeros, subnormals, normals, max, Inf, NaN */
    static const uint16_t hb[] = {0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xC000,
                                  0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8001};
    static const float hf[] = {0.0f, -0.0f, 0x1p-24f, 1023 * 0x1p-24f, 0x1p-14f, 1.0f, -2.0f,
                               65504.0f, INFINITY, -INFINITY, NAN, -0x1p-24f};
    float *g = run_cast(f, VF_F16, VF_F32, 12, hb);
    for (int i = 0; i < 12; i++) {
        if (isnan(hf[i])) assert_true(isnan(g[i]));
        else assert_true(g[i] == hf[i] && signbit(g[i]) == signbit(hf[i]));
    }
    /* and back: bit-identical (NaN stays a NaN) */
    uint16_t *back = run_cast(f, VF_F32, VF_F16, 12, g);
    for (int i = 0; i < 12; i++) {
        if (i == 10) assert_true((back[i] & 0x7C00) == 0x7C00 && (back[i] & 0x3FF));
        else assert_int_equal(back[i], hb[i]);
    }
    free(g);
    free(back);
    /* f32 -> f16 rounding: to nearest even, overflow to Inf, underflow to 0 */
    static const float fr[] = {65519.0f, 65520.0f, 0x1p-25f, 3 * 0x1p-25f, 1 + 0x1p-11f,
                               1 + 3 * 0x1p-11f, 1e-10f, -1e10f};
    static const uint16_t fr_want[] = {0x7BFF, 0x7C00, 0x0000, 0x0002, 0x3C00, 0x3C02, 0x0000, 0xFC00};
    cast_case(f, VF_F32, VF_F16, 8, fr, fr_want);
    free_bufs(f);
}

/* ---- large buffers, errors, stats ---------------------------------------------- */

static void test_large_add(void **state)
{
    fx *f = *state;
    int64_t n = 16 * 1024 * 1024 + 1001; /* just over 64 MiB per operand */
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 1000);
    vf_exec e = {.op = VF_OP_ADD, .n_in = 2};
    e.in[0] = mk(f, VF_F32, 1, &n, x);
    e.in[1] = mk(f, VF_F32, 1, &n, x);
    e.out = mk(f, VF_F32, 1, &n, NULL);
    run(f, &e);
    float *y = dl(f, &e.out);
    for (int64_t i = 0; i < n; i++)
        if (y[i] != 2.0f * (float)(i % 1000)) fail_msg("large add: element %lld", (long long)i);
    free(x);
    free(y);
    free_bufs(f);
}

static void test_errors_and_stats(void **state)
{
    fx *f = *state;
    vf_context_stats st = {0};
    vf_buffer *b;
    assert_int_equal(f->be.iface->alloc(f->be.self, 1000, &b), VF_OK);
    f->be.iface->stats(f->be.self, &st);
    assert_int_equal(st.device_bytes_in_use, 1000);
    /* an op whose output lies past the end of its buffer */
    static const int64_t n[] = {300};
    vf_exec e = {.op = VF_OP_FILL};
    e.out = (vf_tref){.buf = b, .offset = 4, .dtype = VF_F32, .rank = 1, .shape = {300}};
    (void)n;
    assert_int_equal(f->be.iface->exec(f->be.self, &e), VF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(f->err.status, VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(f->err.message, "fill"));
    vf_err_clear(&f->err);
    char tmp[16];
    assert_int_equal(f->be.iface->download(f->be.self, b, 995, tmp, 16), VF_ERROR_INVALID_ARGUMENT);
    vf_err_clear(&f->err);
    /* allocation failure is a status and a message, never an abort */
    vf_buffer *huge = NULL;
    assert_int_equal(f->be.iface->alloc(f->be.self, SIZE_MAX / 4, &huge), VF_ERROR_OUT_OF_MEMORY);
    assert_null(huge);
    assert_non_null(strstr(f->err.message, "bytes"));
    vf_err_clear(&f->err);
    f->be.iface->free(f->be.self, b);
    f->be.iface->stats(f->be.self, &st);
    assert_int_equal(st.device_bytes_in_use, 0);
    assert_int_equal(f->be.iface->sync(f->be.self), VF_OK);
    assert_string_equal(f->be.iface->name, "cpu");
}

/* OpenBLAS runs the widest kernel set the CPU's features allow: an AVX2 or
   AVX-512 CPU that OpenBLAS's model table does not know must not get its
   SSE3 kernels ("Prescott"), a quarter of the speed (cpu/blas.h). When
   the environment names a kernel set, OpenBLAS keeps that one. */
static void test_blas_kernel_set(void **state)
{
    (void)state;
    const vf_cpu_blas *b = vf_cpu_blas_get();
    assert_true(b->ok);
    const char *env = getenv("OPENBLAS_CORETYPE");
    if (env) { /* the user's choice is left alone */
        assert_string_equal(b->core_set, "");
        return;
    }
    assert_null(getenv("OPENBLAS_CORETYPE")); /* the environment as it was */
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char *old[] = {"Prescott", "Core2", "Penryn", "Dunnington", "Nehalem", "Atom", "Sandybridge", "Katmai",
                         "Coppermine", "Northwood", "Banias", "Barcelona", "Opteron"};
    if (avx2 || avx512) {
        assert_true(b->core[0] != 0);
        for (size_t i = 0; i < sizeof old / sizeof *old; i++)
            if (strcmp(b->core, old[i]) == 0) fail_msg("OpenBLAS runs its %s kernels on an AVX2 CPU", b->core);
    }
    if (avx512) assert_string_equal(b->core_set, "SkylakeX");
    else if (avx2) assert_string_equal(b->core_set, "Haswell");
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_matmul, setup, teardown),
        cmocka_unit_test_setup_teardown(test_transpose, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_normal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_f16_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_large_add, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_and_stats, setup, teardown),
        cmocka_unit_test(test_blas_kernel_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
