/* vkfuse_dist over MPI, eager: run by ctest under `mpirun -np 2` and
 * `-np 3` (tests/CMakeLists.txt), on Vulkan and with VKFUSE_BACKEND=cpu.
 * Every rank runs every test; each test is collective. References are
 * computed on the host in double from the values every rank is known to
 * contribute (rank-dependent formulas), so nothing is hard-coded. */
#include <vkfuse_dist.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include "sym_step.h"

static vf_context *ctx;
static vf_dist *world;
static int rank_, size_;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* value of element k on rank r: small integers and halves, exact in f16 */
static double val(int r, int64_t k, int salt) { return (double)((k * 7 + salt) % 13 - 6) * 0.5 + (double)r; }

static vf_tensor *make_on(vf_context *c, vf_dtype t, int rank, const int64_t *shape, int r, int salt)
{
    int64_t n = 1;
    for (int a = 0; a < rank; a++) n *= shape[a];
    void *buf = malloc(n ? (size_t)n * 4 : 4);
    for (int64_t k = 0; k < n; k++) {
        double v = val(r, k, salt);
        switch (t) {
        case VF_F32: ((float *)buf)[k] = (float)v; break;
        case VF_I32: ((int32_t *)buf)[k] = (int32_t)floor(v * 2); break;
        case VF_U32: ((uint32_t *)buf)[k] = (uint32_t)(floor(v * 2) + 100); break;
        case VF_BOOL: ((uint8_t *)buf)[k] = (uint8_t)(((k + salt) % (r + 2)) == 0); break;
        case VF_F16: {
            /* exact halves in [-3, 3+size]: build the bits by conversion through f32 */
            float f = (float)v;
            uint32_t x;
            memcpy(&x, &f, 4);
            uint16_t h = (uint16_t)(((x >> 16) & 0x8000u) | (f == 0 ? 0 : (((x >> 23) & 0xff) - 112) << 10) |
                                    ((x >> 13) & 0x3ff));
            ((uint16_t *)buf)[k] = h;
            break;
        }
        }
    }
    vf_tensor *x = vf_tensor_from_host(c, t, rank, shape, buf);
    free(buf);
    return x;
}

static vf_tensor *make(vf_dtype t, int rank, const int64_t *shape, int r, int salt)
{
    return make_on(ctx, t, rank, shape, r, salt);
}

/* expected element k of the reduction over ranks, as the dtype holds it */
static double expect(vf_dtype t, int64_t k, int salt, vf_dist_op op)
{
    double s = 0;
    bool any = false;
    for (int r = 0; r < size_; r++) {
        double v = val(r, k, salt);
        switch (t) {
        case VF_I32: s += floor(v * 2); break;
        case VF_U32: s += floor(v * 2) + 100; break;
        case VF_BOOL: any |= ((k + salt) % (r + 2)) == 0; break;
        default: s += v;
        }
    }
    if (t == VF_BOOL) return any;
    if (op == VF_DIST_MEAN) return t == VF_F32 || t == VF_F16 ? s / size_ : trunc(s / size_);
    return s;
}

static double as_double(vf_dtype t, const void *p, int64_t k)
{
    switch (t) {
    case VF_F32: return ((const float *)p)[k];
    case VF_I32: return ((const int32_t *)p)[k];
    case VF_U32: return ((const uint32_t *)p)[k];
    case VF_BOOL: return ((const uint8_t *)p)[k];
    default: {
        uint16_t h = ((const uint16_t *)p)[k];
        int e = (h >> 10) & 31, m = h & 1023;
        double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
        return h >> 15 ? -v : v;
    }
    }
}

static void check_result(vf_tensor *got, vf_dtype t, int rank, const int64_t *shape, int salt, vf_dist_op op)
{
    assert_non_null(got);
    assert_int_equal(vf_tensor_dtype(got), t);
    assert_int_equal(vf_tensor_rank(got), rank);
    int64_t n = 1;
    for (int a = 0; a < rank; a++) assert_int_equal(vf_tensor_dim(got, a), shape[a]), n *= shape[a];
    void *buf = malloc(n ? (size_t)n * 4 : 4);
    assert_int_equal(vf_tensor_read(got, buf, vf_tensor_bytes(got)), VF_OK);
    for (int64_t k = 0; k < n; k++) {
        double e = expect(t, k, salt, op), g = as_double(t, buf, k);
        /* f32 mean of small halves: the sum is exact, the division rounds once */
        double tol = op == VF_DIST_MEAN && (t == VF_F32 || t == VF_F16) ? fabs(e) * 1e-3 : 0;
        if (!(fabs(g - e) <= tol)) fail_msg("rank %d: %s element %lld: got %g, want %g", rank_, vf_dtype_name(t), (long long)k, g, e);
    }
    free(buf);
}

static void test_world(void **state)
{
    (void)state;
    int s = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &s);
    assert_int_equal(vf_dist_size(world), s);
    assert_true(vf_dist_rank(world) >= 0 && vf_dist_rank(world) < s);
    assert_ptr_equal(vf_dist_context(world), ctx);
}

/* every dtype, SUM and MEAN, one call each */
static void test_allreduce_each_dtype(void **state)
{
    (void)state;
    static const vf_dtype types[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    const int64_t shape[2] = {3, 5};
    for (int o = 0; o < 2; o++)
        for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
            vf_dist_op op = o ? VF_DIST_MEAN : VF_DIST_SUM;
            if (op == VF_DIST_MEAN && types[i] == VF_BOOL) continue; /* test_bool_mean */
            vf_scope_begin(ctx);
            vf_tensor *x = make(types[i], 2, shape, rank_, (int)i), *y = NULL;
            vf_status st = vf_dist_allreduce(world, 1, &x, op, &y);
            if (st != VF_OK) fail_msg("%s", vf_dist_error_message(world));
            check_result(y, types[i], 2, shape, (int)i, op);
            vf_scope_end(ctx);
        }
}

/* several dtypes, a scalar and empty tensors in one call (one packed
   buffer per dtype); out aliasing in */
static void test_allreduce_mixed_empty(void **state)
{
    (void)state;
    const int64_t s0[1] = {0}, s1[2] = {4, 0}, s2[1] = {7}, s3[3] = {2, 3, 2};
    vf_scope_begin(ctx);
    vf_tensor *t[6] = {make(VF_F32, 1, s0, rank_, 1), make(VF_F32, 1, s2, rank_, 2), make(VF_I32, 2, s1, rank_, 3),
                       make(VF_F32, 0, NULL, rank_, 4), make(VF_F16, 3, s3, rank_, 5), make(VF_I32, 1, s2, rank_, 6)};
    vf_status st = vf_dist_allreduce(world, 6, t, VF_DIST_SUM, t);
    if (st != VF_OK) fail_msg("%s", vf_dist_error_message(world));
    check_result(t[0], VF_F32, 1, s0, 1, VF_DIST_SUM);
    check_result(t[1], VF_F32, 1, s2, 2, VF_DIST_SUM);
    check_result(t[2], VF_I32, 2, s1, 3, VF_DIST_SUM);
    check_result(t[3], VF_F32, 0, NULL, 4, VF_DIST_SUM);
    check_result(t[4], VF_F16, 3, s3, 5, VF_DIST_SUM);
    check_result(t[5], VF_I32, 1, s2, 6, VF_DIST_SUM);
    assert_int_equal(vf_dist_allreduce(world, 0, NULL, VF_DIST_MEAN, NULL), VF_OK);
    vf_scope_end(ctx);
}

/* 2^21 floats (8 MiB), once in one message and once in 1 MiB pieces */
static void test_allreduce_large(void **state)
{
    (void)state;
    const int64_t shape[1] = {1 << 21};
    vf_dist *chunked = NULL;
    assert_int_equal(vf_dist_create(ctx, &(vf_dist_desc){.chunk_bytes = 1 << 20, .timeout_s = 60}, &chunked), VF_OK);
    vf_dist *ds[2] = {world, chunked};
    for (int i = 0; i < 2; i++) {
        vf_scope_begin(ctx);
        vf_tensor *x = make(VF_F32, 1, shape, rank_, 9), *y = NULL;
        vf_status st = vf_dist_allreduce(ds[i], 1, &x, VF_DIST_MEAN, &y);
        if (st != VF_OK) fail_msg("%s", vf_dist_error_message(ds[i]));
        check_result(y, VF_F32, 1, shape, 9, VF_DIST_MEAN);
        vf_scope_end(ctx);
    }
    vf_dist_destroy(chunked);
}

/* variables of every dtype take root's value, from rank 0 and from the last rank */
static void test_broadcast(void **state)
{
    (void)state;
    static const vf_dtype types[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    const int64_t shape[2] = {2, 9}, empty[1] = {0};
    for (int root = 0; root < size_; root += size_ - 1 ? size_ - 1 : 1) {
        vf_tensor *v[6];
        for (int i = 0; i < 5; i++) {
            vf_scope_begin(ctx);
            v[i] = vf_keep(vf_variable(ctx, make(types[i], 2, shape, rank_, i)));
            vf_scope_end(ctx);
        }
        vf_scope_begin(ctx);
        v[5] = vf_keep(vf_variable(ctx, make(VF_F32, 1, empty, rank_, 0)));
        vf_scope_end(ctx);
        vf_status st = vf_dist_broadcast(world, 6, v, root);
        if (st != VF_OK) fail_msg("%s", vf_dist_error_message(world));
        for (int i = 0; i < 5; i++) {
            unsigned char got[18 * 4], want[18 * 4];
            vf_scope_begin(ctx);
            vf_tensor *w = make(types[i], 2, shape, root, i);
            assert_int_equal(vf_tensor_read(v[i], got, vf_tensor_bytes(v[i])), VF_OK);
            assert_int_equal(vf_tensor_read(w, want, vf_tensor_bytes(w)), VF_OK);
            assert_memory_equal(got, want, vf_tensor_bytes(w));
            vf_scope_end(ctx);
        }
        for (int i = 0; i < 6; i++) vf_tensor_release(v[i]);
        if (size_ == 1) break;
    }
}

/* A failure on one rank: the others fail with VF_ERROR_DEVICE naming it,
   well before the timeout. Each case on a vf_dist of its own (a failed one
   stays broken). */
static void test_rank_error_named(void **state)
{
    (void)state;
    vf_dist *d = NULL;
    assert_int_equal(vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = 30}, &d), VF_OK);
    vf_scope_begin(ctx);
    const int64_t shape[1] = {4};
    vf_tensor *x = rank_ == 1 ? NULL : make(VF_F32, 1, shape, rank_, 0), *y = NULL;
    double t0 = now();
    vf_status st = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y);
    double waited = now() - t0;
    if (rank_ == 1) {
        assert_int_equal(st, VF_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vf_dist_error_message(d), "tensor 0 is NULL"));
    } else {
        assert_int_equal(st, VF_ERROR_DEVICE);
        if (!strstr(vf_dist_error_message(d), "rank 1 failed")) fail_msg("message: %s", vf_dist_error_message(d));
        assert_true(waited < 10);
    }
    assert_null(y);
    /* broken from now on, at once */
    assert_int_equal(vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y), rank_ == 1 ? VF_ERROR_DEVICE : VF_ERROR_DEVICE);
    vf_scope_end(ctx);
    vf_dist_destroy(d);
}

/* Different shapes on different ranks: VF_ERROR_SHAPE on every rank,
   naming the first rank that differs from rank 0. */
static void test_shape_mismatch(void **state)
{
    (void)state;
    vf_dist *d = NULL;
    assert_int_equal(vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = 30}, &d), VF_OK);
    vf_scope_begin(ctx);
    const int64_t shape[2] = {2, rank_ == size_ - 1 ? 4 : 3};
    vf_tensor *x = make(VF_F32, 2, shape, rank_, 0), *y = NULL;
    vf_status st = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y);
    assert_int_equal(st, VF_ERROR_SHAPE);
    char want[64];
    snprintf(want, sizeof want, "rank %d's differ from rank 0's", size_ - 1);
    if (!strstr(vf_dist_error_message(d), want)) fail_msg("message: %s", vf_dist_error_message(d));
    assert_non_null(strstr(vf_dist_error_message(d), rank_ == size_ - 1 ? "f32[2,4]" : "f32[2,3]"));
    assert_null(y);
    vf_scope_end(ctx);
    vf_dist_destroy(d);
}

/* A rank that leaves (vf_dist_destroy) while the others still call: they
   fail naming it, at once; a rank that just stops calling: they fail at
   the timeout. */
static void test_rank_left_and_timeout(void **state)
{
    (void)state;
    for (int left = 1; left >= 0; left--) {
        vf_dist *d = NULL;
        assert_int_equal(vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = left ? 30 : 1.0}, &d), VF_OK);
        vf_scope_begin(ctx);
        const int64_t shape[1] = {4};
        vf_tensor *x = make(VF_F32, 1, shape, rank_, 0), *y = NULL;
        if (rank_ != 1) {
            double t0 = now();
            vf_status st = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y);
            double waited = now() - t0;
            assert_int_equal(st, VF_ERROR_DEVICE);
            const char *m = vf_dist_error_message(d);
            if (left ? !strstr(m, "rank 1 left") : !strstr(m, "did not complete within 1 s") || !strstr(m, "rank 1 did not answer"))
                fail_msg("message: %s", m);
            assert_true(left ? waited < 10 : waited >= 1.0 && waited < 12);
        }
        vf_scope_end(ctx);
        if (left || rank_ != 1) vf_dist_destroy(d);
        /* the one that stopped: destroy only after the others timed out */
        MPI_Barrier(MPI_COMM_WORLD);
        if (!left && rank_ == 1) vf_dist_destroy(d);
    }
}

/* In a traced function: kernels before the allreduce, the node, a kernel
   after it; three f32 tensors are one packed host node (one MPI call), an
   f16 and an i32 tensor one node each; results as eager's formulas. */
static vf_status traced_body(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *x = in[0];
    vf_tensor *ts[5] = {vf_mul(c, x, vf_fill(c, VF_F32, 0, NULL, 2.0)), vf_reduce_sum(c, x, 0, NULL, false),
                        vf_reshape(c, x, 1, (int64_t[]){20}), vf_cast(c, x, VF_F16), vf_cast(c, x, VF_I32)};
    vf_tensor *r[5] = {0};
    vf_status st = vf_dist_allreduce(user, 5, ts, VF_DIST_SUM, r);
    if (st != VF_OK) return st;
    out[0] = vf_add(c, r[0], vf_fill(c, VF_F32, 0, NULL, 1.0));
    for (int i = 1; i < 5; i++) out[i] = r[i];
    return VF_OK;
}

/* Calls traced_body `calls` times on d's context; the results against
   eager's formulas. Vulkan: a recorded plan split at the host nodes, in
   `submits` submits per call (-1: not checked). */
static void check_traced(vf_dist *d, int calls, int submits)
{
    vf_context *c = vf_dist_context(d);
    const int64_t shape[2] = {4, 5};
    vf_function *fn = vf_function_create(c, &(vf_function_desc){.name = "traced_allreduce", .body = traced_body,
                                                                  .user = d, .n_inputs = 1, .n_outputs = 5});
    assert_non_null(fn);
    for (int call = 0; call < calls; call++) {
        vf_scope_begin(c);
        vf_tensor *x = make_on(c, VF_F32, 2, shape, rank_, call), *o[5] = {0};
        if (vf_function_call(fn, &x, o) != VF_OK) fail_msg("%s", vf_error_message(c));
        float a[20], b, cc[20];
        uint16_t h[20];
        int32_t i32[20];
        assert_int_equal(vf_tensor_read(o[0], a, sizeof a), VF_OK);
        assert_int_equal(vf_tensor_read(o[1], &b, sizeof b), VF_OK);
        assert_int_equal(vf_tensor_read(o[2], cc, sizeof cc), VF_OK);
        assert_int_equal(vf_tensor_read(o[3], h, sizeof h), VF_OK);
        assert_int_equal(vf_tensor_read(o[4], i32, sizeof i32), VF_OK);
        double total = 0;
        for (int k = 0; k < 20; k++) {
            double e = expect(VF_F32, k, call, VF_DIST_SUM), ei = 0;
            for (int r = 0; r < size_; r++) ei += trunc(val(r, k, call));
            total += e;
            assert_float_equal(a[k], 2 * e + 1, 1e-5);
            assert_float_equal(cc[k], e, 1e-5);
            assert_float_equal(as_double(VF_F16, h, k), e, 1e-5);
            assert_int_equal(i32[k], (int32_t)ei);
        }
        assert_float_equal(b, total, 1e-4);
        vf_scope_end(c);
    }
    vf_function_stats st = {0};
    vf_function_stats_get(fn, &st);
    assert_int_equal(st.traces, 1);
    if (vf_backend_get(c) == VF_BACKEND_VULKAN) {
        assert_true(st.planned);
        if (submits >= 0) assert_int_equal(st.submits_per_call, submits);
    }
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    int nodes = 0;
    for (const char *p = text; (p = strstr(p, "\"vf_dist_allreduce\"")); p++) nodes++;
    if (nodes != 2) fail_msg("%d host nodes (want 2: f32 with f16 as f32, i32):\n%s", nodes, text);
    free(text);
    vf_function_destroy(fn);
}

static void test_allreduce_traced(void **state)
{
    (void)state;
    check_traced(world, 2, 2); /* the kernels before the host nodes, the two MPI calls, the kernels after */
}

/* The same on a context whose device memory the host cannot map
   (VKFUSE_TEST_STAGING, docs/TESTING.md), as a discrete GPU's: the host
   nodes take vf_host_map's download -> reduce -> upload fallback. Vulkan
   only: the CPU backend maps nothing, test_allreduce_traced already runs
   it through that fallback. On 2 ranks only: the fallback is the same for
   any number, and a context costs each rank about 0.3 s (CI time). */
static void test_allreduce_traced_staging(void **state)
{
    (void)state;
    if (vf_backend_get(ctx) != VF_BACKEND_VULKAN || size_ != 2) return;
    vf_context *c = NULL;
    setenv("VKFUSE_TEST_STAGING", "1", 1);
    vf_status s = vf_context_create(NULL, &c);
    unsetenv("VKFUSE_TEST_STAGING");
    if (s != VF_OK) fail_msg("context: %s", vf_error_message(c));
    vf_dist *d = NULL;
    assert_int_equal(vf_dist_create(c, &(vf_dist_desc){.timeout_s = 20}, &d), VF_OK);
    check_traced(d, 1, -1); /* the staging copies add submits */
    vf_dist_destroy(d);
    assert_int_equal(vf_status_get(c), VF_OK);
    vf_context_destroy(c);
}

/* A symbolic batch (sym_step.h): one trace for two batch sizes, the
   gradients reduced inside the step; a split plan per size on Vulkan. */
static void test_allreduce_symbolic(void **state)
{
    (void)state;
    vf_scope_begin(ctx);
    sym_step ss = {.d = world, .w = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 2}, sym_w)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sym", .body = sym_body, .user = &ss,
                                                                    .n_inputs = 1, .n_outputs = 2, .input_signature = sym_sig});
    for (int64_t b = 4; b <= 7; b += 3) {
        float xs[7 * 3], g[6], per[7];
        for (int64_t i = 0; i < b; i++)
            for (int j = 0; j < 3; j++) xs[i * 3 + j] = sym_x(rank_, i, j);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){b, 3}, xs), *o[2] = {0};
        if (vf_function_call(fn, &x, o) != VF_OK) fail_msg("%s", vf_error_message(ctx));
        assert_int_equal(vf_tensor_read(o[0], g, sizeof g), VF_OK);
        assert_int_equal(vf_tensor_read(o[1], per, sizeof(float) * (size_t)b), VF_OK);
        double e = sym_error(size_, b, g, per);
        if (e > 1e-3) fail_msg("batch %ld: off by %g", (long)b, e);
        vf_function_stats st = {0};
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        if (vf_backend_get(ctx) == VF_BACKEND_VULKAN) {
            assert_true(st.planned);
            assert_int_equal(st.submits_per_call, 2);
        }
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
}

/* Two f32 tensors with the symbolic batch dim in one call (sym2_body):
   the class is packed twice, two host nodes; one trace for both sizes. */
static void test_allreduce_symbolic_two(void **state)
{
    (void)state;
    vf_scope_begin(ctx);
    sym_step ss = {.d = world, .w = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 2}, sym_w)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sym2", .body = sym2_body, .user = &ss,
                                                                    .n_inputs = 1, .n_outputs = 3, .input_signature = sym_sig});
    for (int64_t b = 4; b <= 7; b += 3) {
        float xs[7 * 3], g[6], per[7], p[7 * 2];
        for (int64_t i = 0; i < b; i++)
            for (int j = 0; j < 3; j++) xs[i * 3 + j] = sym_x(rank_, i, j);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){b, 3}, xs), *o[3] = {0};
        if (vf_function_call(fn, &x, o) != VF_OK) fail_msg("%s", vf_error_message(ctx));
        assert_int_equal(vf_tensor_dim(o[2], 0), b);
        assert_int_equal(vf_tensor_read(o[0], g, sizeof g), VF_OK);
        assert_int_equal(vf_tensor_read(o[1], per, sizeof(float) * (size_t)b), VF_OK);
        assert_int_equal(vf_tensor_read(o[2], p, sizeof(float) * 2 * (size_t)b), VF_OK);
        double e = sym2_error(size_, b, g, per, p);
        if (e > 1e-3) fail_msg("batch %ld: off by %g", (long)b, e);
        vf_function_stats st = {0};
        vf_function_stats_get(fn, &st);
        assert_int_equal(st.traces, 1);
        if (vf_backend_get(ctx) == VF_BACKEND_VULKAN) assert_true(st.planned);
    }
    assert_int_equal(sym_host_nodes(fn), 2);
    vf_function_destroy(fn);
    vf_scope_end(ctx);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    vf_dist *d = NULL;
    assert_int_equal(vf_dist_create(NULL, NULL, &d), VF_ERROR_INVALID_ARGUMENT);
    assert_null(d);
    assert_non_null(strstr(vf_dist_create_error(), "ctx is NULL"));
    assert_int_equal(vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = -1}, &d), VF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vf_dist_rank(NULL), -1);
    assert_int_equal(vf_dist_allreduce(NULL, 0, NULL, VF_DIST_SUM, NULL), VF_ERROR_INVALID_ARGUMENT);
    vf_dist_destroy(NULL);
}

int main(void)
{
    MPI_Init(NULL, NULL);
    if (vf_context_create(NULL, &ctx) != VF_OK) {
        fprintf(stderr, "context: %s\n", vf_error_message(ctx));
        return 1;
    }
    if (vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = 20}, &world) != VF_OK) {
        fprintf(stderr, "vf_dist_create: %s\n", vf_dist_create_error());
        return 1;
    }
    rank_ = vf_dist_rank(world), size_ = vf_dist_size(world);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_world),
        cmocka_unit_test(test_allreduce_each_dtype),
        cmocka_unit_test(test_allreduce_mixed_empty),
        cmocka_unit_test(test_allreduce_large),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_allreduce_traced),
        cmocka_unit_test(test_allreduce_traced_staging),
        cmocka_unit_test(test_allreduce_symbolic),
        cmocka_unit_test(test_allreduce_symbolic_two),
        cmocka_unit_test(test_rank_error_named),
        cmocka_unit_test(test_shape_mismatch),
        cmocka_unit_test(test_rank_left_and_timeout),
        cmocka_unit_test(test_bad_arguments),
    };
    char name[32];
    snprintf(name, sizeof name, "dist rank %d of %d", rank_, size_);
    int rc = cmocka_run_group_tests_name(name, tests, NULL, NULL);
    vf_dist_destroy(world);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "rank %d: %s\n", rank_, vf_error_message(ctx)), rc = 1;
    vf_context_destroy(ctx);
    MPI_Finalize();
    return rc != 0;
}
