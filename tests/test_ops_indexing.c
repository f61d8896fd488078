/* The indexing ops (issue 13; cumsum and top_k: tests/test_ops_scan.c):
 * vf_gather and vf_scatter_add on both
 * backends against host references written here from the definitions
 * (gather moves values exactly; scatter_add sums in double), their
 * documented out-of-range behaviour (an error naming the index on the CPU
 * backend, zeros / dropped updates on Vulkan), empty cases, eager vs
 * traced (fused and unfused, a symbolic batch dim, gradients inside the
 * trace), and the split paths under tiny device limits; vf_one_hot and
 * vf_range against their definitions, eager and traced; a save/load round
 * trip of a function using every indexing op. The gradient
 * rules are checked against finite differences in tests/grad_cases.c
 * (run by test_tape). */
#include "limits_common.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- host references --------------------------------------------------- */

typedef struct {
    int64_t outer, n, inner;
} split3;

static split3 split_at(int rank, const int64_t *shape, int axis)
{
    split3 s = {1, shape[axis], 1};
    for (int d = 0; d < axis; d++) s.outer *= shape[d];
    for (int d = axis + 1; d < rank; d++) s.inner *= shape[d];
    return s;
}

/* gather of es-byte elements; an index outside [0, n) gives zero bytes
   (the Vulkan backend's documented behaviour) */
static void ref_gather(const void *x, size_t es, int rank, const int64_t *shape, const int32_t *idx, int64_t J,
                       int axis, void *out)
{
    split3 s = split_at(rank, shape, axis);
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t j = 0; j < J; j++) {
            char *dst = (char *)out + (size_t)((o * J + j) * s.inner) * es;
            if (idx[j] < 0 || idx[j] >= s.n) memset(dst, 0, (size_t)s.inner * es);
            else memcpy(dst, (const char *)x + (size_t)((o * s.n + idx[j]) * s.inner) * es, (size_t)s.inner * es);
        }
}

/* scatter_add in double; indices outside [0, n) dropped */
static void ref_scatter(const double *x, int rank, const int64_t *shape, const int32_t *idx, int64_t J,
                        const double *upd, int axis, double *out)
{
    split3 s = split_at(rank, shape, axis);
    memcpy(out, x, sizeof(double) * (size_t)(s.outer * s.n * s.inner));
    for (int64_t o = 0; o < s.outer; o++)
        for (int64_t j = 0; j < J; j++)
            if (idx[j] >= 0 && idx[j] < s.n)
                for (int64_t c = 0; c < s.inner; c++)
                    out[(o * s.n + idx[j]) * s.inner + c] += upd[(o * J + j) * s.inner + c];
}

static int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    return n;
}

static void check_shape(vf_tensor *t, int rank, const int64_t *shape, const char *what)
{
    if (!t) fail_msg("%s: no result", what);
    assert_int_equal(vf_tensor_rank(t), rank);
    for (int d = 0; d < rank; d++)
        if (vf_tensor_dim(t, d) != shape[d])
            fail_msg("%s: dim %d is %lld, want %lld", what, d, (long long)vf_tensor_dim(t, d), (long long)shape[d]);
}

/* ---- gather ------------------------------------------------------------- */

static void gather_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const int64_t xs[3] = {4, 5, 3};
    float x[60];
    vt_fill_uniform(x, 60, -3, 3, 11);
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 3, xs, x);
    for (int axis = -1; axis < 3; axis++) {
        int a = axis < 0 ? axis + 3 : axis;
        int32_t idx[6];
        vt_fill_int(idx, 6, 0, (int32_t)xs[a] - 1, 20 + (uint64_t)a);
        idx[5] = idx[0]; /* a duplicate */
        const int64_t is[2] = {2, 3};
        vf_tensor *ti = vf_tensor_from_host(ctx, VF_I32, 2, is, idx);
        int64_t os[4], r = 0;
        for (int d = 0; d < a; d++) os[r++] = xs[d];
        os[r++] = 2, os[r++] = 3;
        for (int d = a + 1; d < 3; d++) os[r++] = xs[d];
        vf_tensor *y = vf_gather(ctx, tx, ti, axis);
        char what[64];
        snprintf(what, sizeof what, "gather axis %d", axis);
        check_shape(y, 4, os, what);
        float want[120];
        ref_gather(x, 4, 3, xs, idx, 6, a, want);
        float *got = vt_read(y);
        vt_assert_equal_bytes(got, want, sizeof(float) * (size_t)numel(4, os), what);
        free(got);
    }
    /* a scalar index drops the axis */
    int32_t two = 2;
    vf_tensor *y = vf_gather(ctx, tx, vf_tensor_from_host(ctx, VF_I32, 0, NULL, &two), 1);
    check_shape(y, 2, (int64_t[]){4, 3}, "gather scalar index");
    float *got = vt_read(y);
    for (int o = 0; o < 4; o++)
        for (int c = 0; c < 3; c++) assert_true(got[o * 3 + c] == x[(o * 5 + 2) * 3 + c]);
    free(got);
    /* every dtype, moved as bits: f16 halves, i32, bool */
    const int64_t s2[2] = {6, 2};
    int32_t idx[4] = {5, 0, 5, 2};
    vf_tensor *ti = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){4}, idx);
    uint16_t h[12];
    int32_t iv[12];
    uint8_t bv[12];
    for (int k = 0; k < 12; k++) h[k] = (uint16_t)(0x3c00 + 97 * k), iv[k] = k * 1000 - 7000, bv[k] = (uint8_t)(k % 3 == 0);
    const void *src[3] = {h, iv, bv};
    const vf_dtype dts[3] = {VF_F16, VF_I32, VF_BOOL};
    const size_t es[3] = {2, 4, 1};
    for (int t = 0; t < 3; t++) {
        vf_tensor *yt = vf_gather(ctx, vf_tensor_from_host(ctx, dts[t], 2, s2, src[t]), ti, 0);
        check_shape(yt, 2, (int64_t[]){4, 2}, "gather dtypes");
        unsigned char want[32];
        ref_gather(src[t], es[t], 2, s2, idx, 4, 0, want);
        void *g = vt_read(yt);
        vt_assert_equal_bytes(g, want, es[t] * 8, "gather f16 / i32 / bool");
        free(g);
    }
    vt_context_done(ctx);
}
VT_PER_BACKEND(gather_values)

/* An index outside [0, n) (7 past the end, -1 negative): the CPU backend
   fails naming it and its position; Vulkan gives zeros for its slice. */
static void gather_out_of_range(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    float x[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){5, 2}, x);
    const int32_t bad[2][4] = {{1, 7, 0, 2}, {1, 0, 2, -1}};
    const char *pos[2] = {"indices[0,1] = 7", "indices[1,1] = -1"};
    for (int k = 0; k < 2; k++) {
        vf_tensor *ti = vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){2, 2}, bad[k]);
        vf_tensor *y = vf_gather(ctx, tx, ti, 0);
        if (b == VF_BACKEND_CPU) {
            assert_null(y);
            vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_gather", pos[k], "axis 0", "[5,2]", NULL);
            continue;
        }
        float want[8], *got = vt_read(y);
        ref_gather(x, 4, 2, (int64_t[]){5, 2}, bad[k], 4, 0, want);
        vt_assert_equal_bytes(got, want, sizeof want, "gather out of range on Vulkan: zeros");
        free(got);
    }
    /* bad arguments: float indices, an axis out of range, a scalar x */
    float f = 1;
    assert_null(vf_gather(ctx, tx, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &f), 0));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_gather", "indices", "i32", NULL);
    int32_t one = 1;
    vf_tensor *ione = vf_tensor_from_host(ctx, VF_I32, 0, NULL, &one);
    assert_null(vf_gather(ctx, tx, ione, 2));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_gather", "axis 2", NULL);
    assert_null(vf_gather(ctx, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &f), ione, 0));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_gather", "scalar", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(gather_out_of_range)

/* What Vulkan cannot report, VKFUSE_CHECK=1 does: its replay of a traced
   plan on the CPU backend names the out-of-range index. */
static vf_status gather_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_gather(ctx, in[0], in[1], 0);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_out_of_range_check(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    setenv("VKFUSE_CHECK", "1", 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_CHECK");
    float x[6] = {1, 2, 3, 4, 5, 6};
    const int32_t idx[3] = {2, 7, 0};
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 2}, x),
                        vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){3}, idx)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "g", .body = gather_body, .n_inputs = 2,
                                                                  .n_outputs = 1});
    vf_tensor *y = NULL;
    assert_int_not_equal(vf_function_call(fn, in, &y), VF_OK);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "VKFUSE_CHECK", "gather", "indices[1] = 7", NULL);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- scatter_add -------------------------------------------------------- */

static void scatter_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const int64_t xs[3] = {3, 4, 2}, us[4] = {3, 2, 3, 2};
    const int32_t idx[6] = {3, 0, 3, 3, 1, 0}; /* duplicates: 3 three times, 0 twice */
    float x[24], u[36];
    vt_fill_uniform(x, 24, -2, 2, 5);
    vt_fill_uniform(u, 36, -2, 2, 6);
    double dx[24], du[36], want[24];
    for (int k = 0; k < 24; k++) dx[k] = x[k];
    for (int k = 0; k < 36; k++) du[k] = u[k];
    ref_scatter(dx, 3, xs, idx, 6, du, 1, want);
    vf_tensor *ti = vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){2, 3}, idx);
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 3, xs, x), *tu = vf_tensor_from_host(ctx, VF_F32, 4, us, u);
    vf_tensor *y = vf_scatter_add(ctx, tx, ti, tu, -2);
    check_shape(y, 3, xs, "scatter_add f32");
    float *got = vt_read(y), wf[24];
    for (int k = 0; k < 24; k++) wf[k] = (float)want[k];
    /* at most 4 terms in f32 against the double sum rounded once */
    vt_assert_close_f32(got, wf, 24, 1e-6, 1e-6, "scatter_add f32");
    free(got);
    /* f16 storage: summed in f32, rounded to f16 once */
    vf_tensor *yh = vf_cast(ctx, vf_scatter_add(ctx, vf_cast(ctx, tx, VF_F16), ti, vf_cast(ctx, tu, VF_F16), 1),
                            VF_F32);
    got = vt_read(yh);
    vt_assert_close_f32(got, wf, 24, 1e-2, 2e-3, "scatter_add f16");
    free(got);
    /* i32: exact, wrapping */
    int32_t xi[24], ui[36], wi[24];
    for (int k = 0; k < 24; k++) xi[k] = k * 3 - 40;
    for (int k = 0; k < 36; k++) ui[k] = k == 7 ? INT32_MAX : k - 17;
    double dxi[24], dui[36], wd[24];
    for (int k = 0; k < 24; k++) dxi[k] = xi[k];
    for (int k = 0; k < 36; k++) dui[k] = ui[k];
    ref_scatter(dxi, 3, xs, idx, 6, dui, 1, wd);
    for (int k = 0; k < 24; k++) wi[k] = (int32_t)(uint32_t)(int64_t)wd[k];
    vf_tensor *yi = vf_scatter_add(ctx, vf_tensor_from_host(ctx, VF_I32, 3, xs, xi), ti,
                                   vf_tensor_from_host(ctx, VF_I32, 4, us, ui), 1);
    int32_t *gi = vt_read(yi);
    vt_assert_equal_bytes(gi, wi, sizeof wi, "scatter_add i32");
    free(gi);
    /* out of range: an error on the CPU backend, dropped on Vulkan */
    const int32_t bad[6] = {3, 0, 4, 3, -1, 0};
    vf_tensor *y2 = vf_scatter_add(ctx, tx, vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){2, 3}, bad), tu, 1);
    if (b == VF_BACKEND_CPU) {
        assert_null(y2);
        vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_scatter_add", "indices[0,2] = 4", "axis 1", NULL);
    } else {
        ref_scatter(dx, 3, xs, bad, 6, du, 1, want);
        for (int k = 0; k < 24; k++) wf[k] = (float)want[k];
        got = vt_read(y2);
        vt_assert_close_f32(got, wf, 24, 1e-6, 1e-6, "scatter_add out of range on Vulkan: dropped");
        free(got);
    }
    /* updates of the wrong shape, bool data */
    assert_null(vf_scatter_add(ctx, tx, ti, tx, 1));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_scatter_add", "updates [3,4,2]", "[3,2,3,2]", NULL);
    uint8_t bb[24] = {0};
    vf_tensor *tb = vf_tensor_from_host(ctx, VF_BOOL, 3, xs, bb);
    assert_null(vf_scatter_add(ctx, tb, ti, tb, 1));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_scatter_add", "bool", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(scatter_values)

/* Empty indices give an empty gather and scatter_add's x unchanged;
   indices into an empty axis are all out of range. */
static void index_empty(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    float x[6] = {1, 2, 3, 4, 5, 6};
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 2}, x);
    vf_tensor *none = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){0}, NULL);
    vf_tensor *y = vf_gather(ctx, tx, none, 0);
    check_shape(y, 2, (int64_t[]){0, 2}, "gather of no index");
    vf_tensor *u = vf_fill(ctx, VF_F32, 2, (int64_t[]){3, 0}, 1.0);
    vf_tensor *s = vf_scatter_add(ctx, tx, none, u, 1);
    float *got = vt_read(s);
    vt_assert_equal_bytes(got, x, sizeof x, "scatter_add of nothing");
    free(got);
    int32_t zero = 0;
    vf_tensor *e = vf_fill(ctx, VF_F32, 2, (int64_t[]){0, 2}, 1.0);
    assert_null(vf_gather(ctx, e, vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){1}, &zero), 0));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_gather", "size 0", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(index_empty)

/* ---- one_hot and range ---------------------------------------------------- */

static void one_hot_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const int32_t idx[6] = {0, 3, -1, 4, 2, 9}; /* -1 and 9 (>= depth 5): zero rows */
    vf_tensor *ti = vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){2, 3}, idx);
    float want[30];
    for (int j = 0; j < 6; j++)
        for (int c = 0; c < 5; c++) want[j * 5 + c] = idx[j] == c ? 1.0f : 0.0f;
    const vf_dtype dts[4] = {VF_F32, VF_F16, VF_I32, VF_BOOL};
    for (int t = 0; t < 4; t++) {
        vf_tensor *h = vf_one_hot(ctx, ti, 5, dts[t]);
        check_shape(h, 3, (int64_t[]){2, 3, 5}, "one_hot");
        assert_int_equal(vf_tensor_dtype(h), dts[t]);
        float *got = vt_read(vf_cast(ctx, h, VF_F32));
        vt_assert_equal_bytes(got, want, sizeof want, "one_hot f32 / f16 / i32 / bool");
        free(got);
    }
    /* u32 indices: 4294967295 is out of range too */
    const uint32_t uidx[3] = {4, UINT32_MAX, 1};
    float *got = vt_read(vf_one_hot(ctx, vf_tensor_from_host(ctx, VF_U32, 1, (int64_t[]){3}, uidx), 5, VF_F32));
    float wu[15] = {0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    vt_assert_equal_bytes(got, wu, sizeof wu, "one_hot u32");
    free(got);
    /* empty: depth 0, no indices */
    check_shape(vf_one_hot(ctx, ti, 0, VF_F32), 3, (int64_t[]){2, 3, 0}, "one_hot depth 0");
    check_shape(vf_one_hot(ctx, vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){0}, NULL), 4, VF_F32), 2,
                (int64_t[]){0, 4}, "one_hot of no index");
    float f = 1;
    assert_null(vf_one_hot(ctx, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &f), 3, VF_F32));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_one_hot", "i32", NULL);
    assert_null(vf_one_hot(ctx, ti, -2, VF_F32));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_one_hot", "depth -2", NULL);
    vt_context_done(ctx);
}
VT_PER_BACKEND(one_hot_values)

/* vf_range against start + i * delta in double (f32: within an ulp of the
   largest term, computed in f32; integers exact) */
static void check_range(vf_context *ctx, vf_dtype dt, double start, double limit, double delta, int64_t n)
{
    char what[96];
    snprintf(what, sizeof what, "range(%s, %g, %g, %g)", dt == VF_F32 ? "f32" : dt == VF_I32 ? "i32" : "u32", start,
             limit, delta);
    vf_tensor *r = vf_range(ctx, dt, start, limit, delta);
    check_shape(r, 1, &n, what);
    if (n == 0) return;
    void *got = vt_read(r);
    for (int64_t i = 0; i < n; i++) {
        double want = start + (double)i * delta;
        if (dt == VF_F32) {
            double tol = 2.4e-7 * (fabs(start) + fabs((double)i * delta));
            if (fabs(((float *)got)[i] - want) > tol) fail_msg("%s[%lld]: %.9g, want %.9g", what, (long long)i, ((float *)got)[i], want);
        } else if (dt == VF_I32) {
            if (((int32_t *)got)[i] != (int32_t)want) fail_msg("%s[%lld]: %d, want %g", what, (long long)i, ((int32_t *)got)[i], want);
        } else if (((uint32_t *)got)[i] != (uint32_t)want) {
            fail_msg("%s[%lld]: %u, want %g", what, (long long)i, ((uint32_t *)got)[i], want);
        }
    }
    free(got);
}

static void range_values(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    check_range(ctx, VF_F32, 0, 10, 1, 10);
    check_range(ctx, VF_F32, 1, -2, -0.7, 5);   /* ceil(3 / 0.7) */
    check_range(ctx, VF_F32, -3.25, 100.5, 0.1, 1038);
    check_range(ctx, VF_F32, 0, 5, -1, 0);      /* the wrong way: empty */
    check_range(ctx, VF_I32, -5, 7, 3, 4);
    check_range(ctx, VF_I32, 7, -5, -3, 4);
    check_range(ctx, VF_U32, 10, 2, -2, 4);
    check_range(ctx, VF_U32, 4000000000.0, 4000000010.0, 4, 3);
    vf_tensor *h = vf_range(ctx, VF_F16, 0, 3, 0.5);
    assert_int_equal(vf_tensor_dtype(h), VF_F16);
    float *got = vt_read(vf_cast(ctx, h, VF_F32));
    vt_assert_equal_bytes(got, (float[]){0, 0.5f, 1, 1.5f, 2, 2.5f}, 6 * sizeof(float), "range f16");
    free(got);
    assert_null(vf_range(ctx, VF_F32, 0, 1, 0));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "delta", NULL);
    assert_null(vf_range(ctx, VF_I32, 0.5, 3, 1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "integers", NULL);
    assert_null(vf_range(ctx, VF_BOOL, 0, 3, 1));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_range", NULL);
    assert_null(vf_range(ctx, VF_F32, 0, 1e12, 1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "elements", NULL);
    /* start, limit and so every element representable in the dtype: no
       silent wrap (TF refuses these too) */
    assert_null(vf_range(ctx, VF_I32, 0, 1e10, 1e9));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "limit 10000000000", "i32", NULL);
    assert_null(vf_range(ctx, VF_I32, 3e9, 0, -1e9));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "start 3000000000", "i32", NULL);
    assert_null(vf_range(ctx, VF_U32, 5, -1, -1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "limit -1", "u32", NULL);
    assert_null(vf_range(ctx, VF_I32, 0, 3.5, 1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "limit 3.5", "integers", NULL);
    assert_null(vf_range(ctx, VF_I32, 0, 10, 3e9));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "delta 3000000000", NULL);
    assert_null(vf_range(ctx, VF_F16, 0, 1e5, 3e4));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "limit 100000", "f16", NULL);
    assert_null(vf_range(ctx, VF_F32, 0, 1e39, 1e38));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_range", "limit 1e+39", "f32", NULL);
    /* the whole 32-bit span: i * |delta| wraps on the way, the elements are exact */
    check_range(ctx, VF_I32, -2e9, 2e9, 1e9, 4);
    check_range(ctx, VF_I32, INT32_MAX, INT32_MIN, -(double)INT32_MAX, 3);
    check_range(ctx, VF_U32, UINT32_MAX, 0, -2147483648.0, 2);
    vt_context_done(ctx);
}
VT_PER_BACKEND(range_values)

/* ---- traced vs eager ------------------------------------------------------ */

enum { V = 7, D = 3 };

/* An embedding lookup, a scatter_add and the table's gradient:
   out[0] = gather(table, ids), out[1] = scatter_add(table, ids, rows * 2),
   out[2] = d sum(w * gather(table, ids)) / d table, w = out[0]. */
static vf_status embed_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *table = in[0], *ids = in[1], *rows = in[2];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *e = vf_gather(ctx, table, ids, 0);
    vf_tensor *loss = vf_reduce_sum(ctx, vf_mul(ctx, e, vf_add(ctx, rows, rows)), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status st = loss ? vf_tape_gradient(tp, loss, 1, &table, &g) : vf_status_get(ctx);
    vf_tape_end(tp);
    out[0] = e;
    out[1] = vf_scatter_add(ctx, table, ids, vf_add(ctx, rows, rows), 0);
    out[2] = g;
    return st != VF_OK ? st : out[0] && out[1] && out[2] ? VF_OK : vf_status_get(ctx);
}

/* in[0] the table (user), in[1] n ids with a repeat, in[2] n rows. */
static void embed_make(vf_context *ctx, int64_t n, vf_tensor **in, void *user)
{
    int32_t ids[9];
    float rows[9 * D];
    vt_fill_int(ids, (size_t)n, 0, V - 1, 40 + (uint64_t)n);
    ids[n - 1] = ids[0];
    vt_fill_uniform(rows, (size_t)(n * D), -1, 1, 50 + (uint64_t)n);
    in[0] = user;
    in[1] = vf_tensor_from_host(ctx, VF_I32, 1, &n, ids);
    in[2] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, D}, rows);
}

/* The gradient against its definition: row r gets 2 * rows[j] for every
   j with ids[j] == r. */
static void embed_check(int64_t n, vf_tensor *const *in, vf_tensor *const *ea, void *user)
{
    (void)user;
    int32_t *ids = vt_read(in[1]);
    float *rows = vt_read(in[2]), *g = vt_read(ea[2]);
    for (int r = 0; r < V; r++)
        for (int c = 0; c < D; c++) {
            double w = 0;
            for (int64_t j = 0; j < n; j++)
                if (ids[j] == r) w += 2.0 * rows[j * D + c];
            if (fabs(g[r * D + c] - w) > 1e-5) fail_msg("embed grad [%d,%d]: %g, want %g", r, c, g[r * D + c], w);
        }
    free(ids), free(rows), free(g);
}

static void traced_vs_eager(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    float table[V * D];
    vt_fill_uniform(table, V * D, -1, 1, 3);
    vf_tensor *tt = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){V, D}, table);
    const vf_tensor_spec sig[3] = {{VF_F32, 2, {V, D}}, {VF_I32, 1, {-1}}, {VF_F32, 2, {-1, D}}};
    vt_check_traced_vs_eager(ctx, &(vt_traced_case){.name = "embed", .body = embed_body, .n_inputs = 3,
                                                   .n_outputs = 3, .sig = sig, .sizes = (int64_t[]){3, 9},
                                                   .n_sizes = 2, .make = embed_make, .check = embed_check,
                                                   .atol = 1e-6, .rtol = 1e-6, .user = tt});
    vt_context_done(ctx);
}
VT_PER_BACKEND(traced_vs_eager)

/* one_hot and range in a traced body with a symbolic batch: out[0] =
   one_hot(ids, 6) * range(0.5, 6.5), out[1] = one_hot(ids, 6, i32) */
static vf_status hot_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, vf_one_hot(ctx, in[0], 6, VF_F32), vf_range(ctx, VF_F32, 0.5, 6.5, 1));
    out[1] = vf_one_hot(ctx, in[0], 6, VF_I32);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void hot_make(vf_context *ctx, int64_t n, vf_tensor **in, void *user)
{
    (void)user;
    int32_t ids[10];
    vt_fill_int(ids, (size_t)(2 * n), -2, 7, 70 + (uint64_t)n);
    in[0] = vf_tensor_from_host(ctx, VF_I32, 2, (int64_t[]){n, 2}, ids);
}

/* out[0] against its definition (ids outside [0, 6) give zero rows). */
static void hot_check(int64_t n, vf_tensor *const *in, vf_tensor *const *ea, void *user)
{
    (void)user;
    int32_t *ids = vt_read(in[0]);
    float *ge = vt_read(ea[0]);
    for (int64_t j = 0; j < 2 * n; j++)
        for (int c = 0; c < 6; c++) assert_true(ge[j * 6 + c] == (ids[j] == c ? (float)c + 0.5f : 0.0f));
    free(ids), free(ge);
}

static void one_hot_traced(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    vt_check_traced_vs_eager(ctx, &(vt_traced_case){.name = "hot", .body = hot_body, .n_inputs = 1, .n_outputs = 2,
                                                   .sig = (vf_tensor_spec[]){{VF_I32, 2, {-1, 2}}},
                                                   .sizes = (int64_t[]){2, 5}, .n_sizes = 2, .make = hot_make,
                                                   .check = hot_check});
    vt_context_done(ctx);
}
VT_PER_BACKEND(one_hot_traced)

/* Every indexing op in one saved function: its attributes (axis, the
   cumsum flags in trans_a / trans_b, top_k's k in value) survive
   vf_function_save / vf_function_load, and the loaded function gives the
   same values. */
static vf_status all_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *ids = in[1];
    vf_tensor *g = vf_gather(ctx, x, ids, 0);
    out[0] = vf_top_k(ctx, vf_cumsum(ctx, g, 1, true, true), 2, &out[1]);
    out[2] = vf_scatter_add(ctx, x, ids, g, -2);
    out[3] = vf_mul(ctx, vf_one_hot(ctx, ids, 5, VF_F32), vf_range(ctx, VF_F32, 5, 0, -1));
    return out[0] && out[1] && out[2] && out[3] ? VF_OK : vf_status_get(ctx);
}

static void saved_round_trip(vf_backend b)
{
    vf_context *ctx = vt_context(b);
    const vf_tensor_spec sig[2] = {{VF_F32, 2, {5, 4}}, {VF_I32, 1, {-1}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "all", .body = all_body, .n_inputs = 2,
                                                                 .n_outputs = 4, .input_signature = sig});
    float x[20];
    vt_fill_uniform(x, 20, -1, 1, 81);
    const int32_t ids[6] = {4, 0, 4, 2, 1, 3};
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){5, 4}, x),
                        vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){6}, ids)};
    vf_tensor *a[4] = {0}, *c[4] = {0};
    assert_int_equal(vf_function_call(fn, in, a), VF_OK);
    char path[96];
    snprintf(path, sizeof path, "/tmp/vkfuse_indexing_%d_%d.vkf", (int)getpid(), (int)b);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function *back = NULL;
    if (vf_function_load(ctx, path, &back) != VF_OK) fail_msg("load: %s", vf_error_message(ctx));
    assert_int_equal(vf_function_call(back, in, c), VF_OK);
    for (int k = 0; k < 4; k++) {
        void *ga = vt_read(a[k]), *gc = vt_read(c[k]);
        vt_assert_equal_bytes(gc, ga, vf_tensor_bytes(a[k]), "saved and loaded vs the original");
        free(ga), free(gc);
    }
    remove(path);
    vf_function_destroy(back);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}
VT_PER_BACKEND(saved_round_trip)

/* ---- device limits --------------------------------------------------------- */

/* Index lists past the loop budget (lavapipe ends an invocation's loops
   after 65535 iterations; 65471 is what kernels plan with): scatter_add
   places and adds them in blocks. An embedding of 7 rows over 70,000 ids
   (the gather's gradient is a scatter_add; each row receives about 10,000
   updates, so its list crosses many blocks) at the real limits, eager and
   traced; then small index lists under VKFUSE_TEST_LIMITS max_loop=64 (a
   budget of 33: 33 indices run in one pass, 34 and 272, the most blocks
   can take, in blocks), f32 and i32 along a middle axis, and with
   max_groups=2 as well, where invocations stride over groups and the
   blocks shrink. Small integers, so every sum is exact and must equal the
   double reference bit for bit. Before the blocks these were
   VF_ERROR_UNSUPPORTED. */
static void scatter_check(vf_context *ctx, vf_dtype dt, int64_t outer, int64_t n, int64_t inner, int64_t J,
                          uint64_t seed)
{
    int64_t xs[3] = {outer, n, inner}, us[3] = {outer, J, inner};
    size_t nx = (size_t)(outer * n * inner), nu = (size_t)(outer * J * inner);
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)J), *xi = malloc(4 * nx), *ui = malloc(4 * nu);
    double *dx = malloc(sizeof(double) * nx), *du = malloc(sizeof(double) * nu), *want = malloc(sizeof(double) * nx);
    float *xf = malloc(4 * nx), *uf = malloc(4 * nu);
    assert_true(idx && xi && ui && dx && du && want && xf && uf);
    vt_fill_int(idx, (size_t)J, 0, (int32_t)n - 1, seed);
    for (int64_t j = 0; j < J; j += 3) idx[j] = 1; /* one long list */
    vt_fill_int(xi, nx, -3, 3, seed + 1);
    vt_fill_int(ui, nu, -3, 3, seed + 2);
    for (size_t k = 0; k < nx; k++) dx[k] = xi[k], xf[k] = (float)xi[k];
    for (size_t k = 0; k < nu; k++) du[k] = ui[k], uf[k] = (float)ui[k];
    ref_scatter(dx, 3, xs, idx, J, du, 1, want);
    vf_tensor *y = vf_scatter_add(ctx, vf_tensor_from_host(ctx, dt, 3, xs, dt == VF_F32 ? (void *)xf : xi),
                                  vf_tensor_from_host(ctx, VF_I32, 1, &J, idx),
                                  vf_tensor_from_host(ctx, dt, 3, us, dt == VF_F32 ? (void *)uf : ui), 1);
    char what[96];
    snprintf(what, sizeof what, "scatter_add of %lld indices into [%lld,%lld,%lld] %s", (long long)J,
             (long long)outer, (long long)n, (long long)inner, vf_dtype_name(dt));
    check_shape(y, 3, xs, what);
    void *got = vt_read(y);
    for (size_t k = 0; k < nx; k++) {
        double g = dt == VF_F32 ? ((float *)got)[k] : ((int32_t *)got)[k];
        if (g != want[k]) fail_msg("%s: element %zu is %g, want %g", what, k, g, want[k]);
    }
    free(got), free(idx), free(xi), free(ui), free(dx), free(du), free(want), free(xf), free(uf);
}

static void scatter_past_loop_limit(vf_backend b)
{
    enum { NE = 70000 };
    vf_context *ctx = vt_context(b);
    float table[V * D];
    int32_t *ids = malloc(sizeof(int32_t) * NE), *ri = malloc(sizeof(int32_t) * NE * D);
    float *rows = malloc(sizeof(float) * NE * D);
    double *zeros = calloc(V * D, sizeof(double)), *dr = malloc(sizeof(double) * NE * D), want[V * D];
    assert_true(ids && ri && rows && zeros && dr);
    vt_fill_int(ids, NE, 0, V - 1, 60);
    vt_fill_int(ri, NE * D, -3, 3, 61);
    for (int k = 0; k < NE * D; k++) rows[k] = (float)ri[k], dr[k] = 2.0 * ri[k];
    for (int k = 0; k < V * D; k++) table[k] = (float)(k % 5);
    ref_scatter(zeros, 2, (int64_t[]){V, D}, ids, NE, dr, 0, want);
    vf_tensor *in[3] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){V, D}, table),
                        vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){NE}, ids),
                        vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){NE, D}, rows)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "embed70k", .body = embed_body,
                                                                   .n_inputs = 3, .n_outputs = 3});
    assert_non_null(fn);
    for (int traced = 0; traced < 2; traced++) {
        vf_tensor *out[3] = {0};
        vf_status st = traced ? vf_function_call(fn, in, out) : embed_body(ctx, in, out, NULL);
        if (st != VF_OK) fail_msg("70,000 ids (%s): %s", traced ? "traced" : "eager", vf_error_message(ctx));
        float *grad = vt_read(out[2]), *sum = vt_read(out[1]);
        for (int k = 0; k < V * D; k++) {
            if (grad[k] != (float)want[k])
                fail_msg("gather gradient over 70,000 ids [%d]: %g, want %g", k, grad[k], want[k]);
            if (sum[k] != (float)(want[k] + table[k]))
                fail_msg("scatter_add of 70,000 ids [%d]: %g, want %g", k, sum[k], want[k] + table[k]);
        }
        free(grad), free(sum);
        for (int k = 0; k < 3; k++) vf_tensor_release(out[k]);
    }
    vf_function_destroy(fn);
    for (int k = 0; k < 3; k++) vf_tensor_release(in[k]);
    free(ids), free(ri), free(rows), free(zeros), free(dr);
    vt_context_done(ctx);

    static const char *const limits[2] = {"max_loop=64", "max_loop=64,max_groups=2"};
    for (int l = 0; l < 2; l++) {
        vf_context *c = b == VF_BACKEND_VULKAN ? lim_context(limits[l]) : vt_context(b);
        static const int64_t Js[] = {33, 34, 100, 272};
        for (size_t k = 0; k < sizeof Js / sizeof Js[0]; k++) {
            if (l == 1 && Js[k] > 64) continue; /* grid rounds halve the budget: at most 64 indices */
            scatter_check(c, VF_F32, 2, 7, 3, Js[k], 70 + k);
            scatter_check(c, VF_I32, 1, 5, 4, Js[k], 80 + k);
        }
        if (l == 1) scatter_check(c, VF_F32, 1, 150, 1, 40, 90); /* 150 rows: step 1 strides over groups */
        vt_context_done(c);
    }
}
VT_PER_BACKEND(scatter_past_loop_limit)


/* Under LIMITS (8 workgroups per dispatch, 64 loop iterations per
   invocation, a budget of 33) gather strides over more workgroups than a
   dispatch has, and so does scatter_add's last step (2400 elements: 10
   groups of 256, 2 rounds, so 16 indices loop 32 times): both equal the
   CPU backend; 300 indices are more than the budget and refused. */
static void test_limits(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *cpu = vt_context(VF_BACKEND_CPU), *vk = lim_context(LIMITS);
    enum { N = 60, W = 40, J = 300, JS = 16 };
    float *x = malloc(sizeof(float) * N * W), *u = malloc(sizeof(float) * JS * W);
    int32_t *idx = malloc(sizeof(int32_t) * J);
    vt_fill_uniform(x, N * W, -1, 1, 8);
    vt_fill_uniform(u, JS * W, -1, 1, 9);
    vt_fill_int(idx, J, 0, N - 1, 10);
    float *res[2][2];
    vf_context *cs[2] = {cpu, vk};
    for (int k = 0; k < 2; k++) {
        vf_context *c = cs[k];
        vf_tensor *tx = vf_tensor_from_host(c, VF_F32, 2, (int64_t[]){N, W}, x);
        vf_tensor *g = vf_gather(c, tx, vf_tensor_from_host(c, VF_I32, 1, (int64_t[]){J}, idx), 0);
        vf_tensor *s = vf_scatter_add(c, tx, vf_tensor_from_host(c, VF_I32, 1, (int64_t[]){JS}, idx),
                                      vf_tensor_from_host(c, VF_F32, 2, (int64_t[]){JS, W}, u), 0);
        res[k][0] = vt_read(g);
        res[k][1] = vt_read(s);
    }
    vt_assert_equal_bytes(res[1][0], res[0][0], sizeof(float) * J * W, "gather past the workgroup limit");
    vt_assert_close_f32(res[1][1], res[0][1], N * W, 1e-5, 1e-5, "scatter_add in steps");
    for (int k = 0; k < 2; k++) free(res[k][0]), free(res[k][1]);
    /* 300 indices: past what blocks take under these limits (a budget of 33,
       halved by grid rounds: at most 64) */
    float *u3 = calloc((size_t)J * W, sizeof(float));
    vf_tensor *s = vf_scatter_add(vk, vf_tensor_from_host(vk, VF_F32, 2, (int64_t[]){N, W}, x),
                                  vf_tensor_from_host(vk, VF_I32, 1, (int64_t[]){J}, idx),
                                  vf_tensor_from_host(vk, VF_F32, 2, (int64_t[]){J, W}, u3), 0);
    assert_null(s);
    vt_expect_error(vk, VF_ERROR_UNSUPPORTED, "scatter_add", "300 indices", "split the indices", NULL);
    free(u3), free(x), free(u), free(idx);
    /* iota past the workgroup limit (16000 elements, computed in f32 under the 64 KiB binding limit: 16 groups of 1024 on a grid of 8) */
    void *rh[2];
    for (int k = 0; k < 2; k++) rh[k] = vt_read(vf_range(cs[k], VF_F16, 0, 16000, 1));
    vt_assert_equal_bytes(rh[1], rh[0], 2 * 16000, "range f16 past the workgroup limit");
    free(rh[0]), free(rh[1]);
    vt_context_done(cpu);
    vt_context_done(vk);
}

/* scatter_add's kernels for x [n, inner] f32 and J i32 indices on caps,
   without a device: VF_OK, or the refusal's message in err. */
static vf_status gen_scatter(const vf_device_caps *caps, int64_t n, int64_t inner, int64_t J, vf_err *err)
{
    vf_exec e;
    memset(&e, 0, sizeof e);
    vf_err_clear(err);
    e.op = VF_OP_SCATTER_ADD;
    e.n_in = 3;
    e.in[0] = (vf_tref){.dtype = VF_F32, .rank = 2, .shape = {n, inner}};
    e.in[1] = (vf_tref){.dtype = VF_I32, .rank = 1, .shape = {J}};
    e.in[2] = (vf_tref){.dtype = VF_F32, .rank = 2, .shape = {J, inner}};
    e.out = e.in[0];
    vf_gen_kernel k;
    memset(&k, 0, sizeof k);
    vf_status st = vf_codegen_exec(&e, caps, &k, err);
    vf_kernel_free(&k);
    return st;
}

/* No op may take work it cannot finish within the fence timeout: a
   scatter_add whose lists would take more loop iterations than its work
   bound (on lavapipe about 19 s of an idle machine) is refused up front,
   naming the most indices that fit these rows; that many fit, one more
   does not. A gather's gradient over 70,000 ids into 50,000 rows (3 s on
   lavapipe) fits; 262,144 ids into a 150,000-word vocabulary (44 s) does
   not, nor does it on a GPU's bound when far bigger. */
static void test_scatter_work_bound(void **state)
{
    (void)state;
    vf_err err = {0};
    assert_int_equal(gen_scatter(&lim_caps_lavapipe, 50000, 16, 70000, &err), VF_OK);
    assert_int_equal(gen_scatter(&lim_caps_lavapipe, 150000, 16, 262144, &err), VF_ERROR_UNSUPPORTED);
    const char *at = strstr(err.message, "at most ");
    if (!at || !strstr(err.message, "fence timeout")) fail_msg("%s", err.message);
    long long most = atoll(at + 8);
    assert_true(most > 65471 && most < 262144);
    assert_int_equal(gen_scatter(&lim_caps_lavapipe, 150000, 16, most, &err), VF_OK);
    assert_int_equal(gen_scatter(&lim_caps_lavapipe, 150000, 16, most + 1, &err), VF_ERROR_UNSUPPORTED);
    vf_device_caps gpu = lim_caps_lavapipe;
    gpu.is_cpu = false;
    assert_int_equal(gen_scatter(&gpu, 150000, 16, 262144, &err), VF_OK);
    assert_int_equal(gen_scatter(&gpu, 1000000, 16, 2000000, &err), VF_ERROR_UNSUPPORTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(gather_values), VT_PER_BACKEND_TESTS(gather_out_of_range),
        cmocka_unit_test(test_out_of_range_check),
        VT_PER_BACKEND_TESTS(scatter_values), VT_PER_BACKEND_TESTS(index_empty),
        VT_PER_BACKEND_TESTS(traced_vs_eager), VT_PER_BACKEND_TESTS(one_hot_values),
        VT_PER_BACKEND_TESTS(range_values), VT_PER_BACKEND_TESTS(one_hot_traced),
        VT_PER_BACKEND_TESTS(saved_round_trip), VT_PER_BACKEND_TESTS(scatter_past_loop_limit),
        cmocka_unit_test(test_limits), cmocka_unit_test(test_scatter_work_bound),
    };
    return VT_RUN_GROUP(tests);
}
