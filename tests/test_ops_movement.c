/* The movement ops (vf_slice, vf_concat, vf_stack, vf_split, vf_pad,
 * vf_tile, vf_broadcast_to, vf_expand_dims, vf_squeeze) eagerly on both
 * backends against host references written here independently of the
 * library (element loops over index lists, Python's slice rules spelled
 * out), in every dtype as bits; their edge cases and error messages; the
 * eager view of a contiguous slice and the kernel shared by every offset.
 * Traced, fused, saved and under the device's limits:
 * test_ops_movement_traced.c. Gradients against finite differences are
 * gc_cases in grad_cases.c (test_tape). */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG INT64_MAX

/* ---- host references ------------------------------------------------------ */

/* Python's slice.indices(n) as CPython writes it (PySlice_AdjustIndices),
   then the index list walked one by one. */
static int ref_indices(int64_t n, int64_t b, int64_t e, int64_t s, int64_t *idx)
{
    bool bnone = b == BIG && s < 0, enone = e == BIG;
    int64_t lo = s < 0 ? -1 : 0, hi = s < 0 ? n - 1 : n;
    int64_t start, stop;
    if (bnone) start = hi;
    else if (b < 0) start = b + n < lo ? lo : b + n;
    else start = b > hi ? hi : b;
    if (enone) stop = s < 0 ? -1 : n;
    else if (e < 0) stop = e + n < lo ? lo : e + n;
    else stop = e > hi ? hi : e;
    int m = 0;
    for (int64_t i = start; s > 0 ? i < stop : i > stop; i += s) idx[m++] = i;
    return m;
}

/* Elements of x (rank r, shape sh, es bytes each) at the cartesian product
   of per-dim index lists (-1: the fill value) into out, row-major. */
static void gather(const uint8_t *x, int r, const int64_t *sh, size_t es, int64_t *const *idx, const int *m,
                   const uint8_t *fill, uint8_t *out)
{
    int64_t total = 1, c[8] = {0};
    for (int d = 0; d < r; d++) total *= m[d];
    for (int64_t k = 0; k < total; k++) {
        int64_t lin = 0;
        bool hole = false;
        for (int d = 0; d < r; d++) {
            int64_t i = idx[d][c[d]];
            hole = hole || i < 0;
            lin = lin * sh[d] + (i < 0 ? 0 : i);
        }
        memcpy(out + (size_t)k * es, hole ? fill : x + (size_t)lin * es, es);
        for (int d = r - 1; d >= 0; d--) {
            if (++c[d] < m[d]) break;
            c[d] = 0;
        }
    }
}

static int64_t numel_of(int r, const int64_t *sh)
{
    int64_t n = 1;
    for (int d = 0; d < r; d++) n *= sh[d];
    return n;
}

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return rng_state >> 33;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* i32 data 1, 2, 3, ... (bits distinct per element). */
static int32_t *iota32(int64_t n)
{
    int32_t *v = malloc((size_t)(n ? n : 1) * 4);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = (int32_t)(i + 1);
    return v;
}

static void expect_shape(vf_tensor *t, int r, const int64_t *sh, const char *what)
{
    if (!t) fail_msg("%s: NULL", what);
    if (vf_tensor_rank(t) != r) fail_msg("%s: rank %d, want %d", what, vf_tensor_rank(t), r);
    for (int d = 0; d < r; d++)
        if (vf_tensor_dim(t, d) != sh[d])
            fail_msg("%s: dim %d is %lld, want %lld", what, d, (long long)vf_tensor_dim(t, d), (long long)sh[d]);
}

/* t's bytes against want's (n elements of es bytes). */
static void expect_bytes(vf_tensor *t, const void *want, int64_t n, size_t es, const char *what)
{
    if (n == 0) {
        assert_int_equal(vf_tensor_numel(t), 0);
        return;
    }
    void *got = vt_read(t);
    vt_assert_equal_bytes(got, want, (size_t)n * es, what);
    free(got);
}

/* ---- slice ------------------------------------------------------------------ */

/* One slice of x (rank r, shape sh, i32 iota) against the reference. */
static void check_slice(vf_context *ctx, int r, const int64_t *sh, const int64_t *b, const int64_t *e,
                        const int64_t *s, const char *what)
{
    vf_scope_begin(ctx);
    int64_t n = numel_of(r, sh);
    int32_t *x = iota32(n);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, r, sh, x);
    vf_tensor *y = vf_slice(ctx, t, b, e, s);
    if (!y) fail_msg("%s: %s", what, vf_error_message(ctx));
    int64_t store[8][64], *idx[8], osh[8] = {0};
    int m[8];
    for (int d = 0; d < r; d++) {
        idx[d] = store[d];
        m[d] = ref_indices(sh[d], b ? b[d] : (s && s[d] < 0 ? BIG : 0), e ? e[d] : BIG, s ? s[d] : 1, idx[d]);
        osh[d] = m[d];
    }
    expect_shape(y, r, osh, what);
    int64_t on = numel_of(r, osh);
    int32_t *want = malloc((size_t)(on ? on : 1) * 4);
    gather((const uint8_t *)x, r, sh, 4, idx, m, NULL, (uint8_t *)want);
    expect_bytes(y, want, on, 4, what);
    free(want);
    free(x);
    vf_scope_end(ctx);
}

/* Random slices: ranks 0-4, dims 0-6, begin / end in -9..9 or the ends,
   steps -3..3 (not 0): clamping, negative indices and steps, empty
   results, and every view/copy decision. */
static void slice_random(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    rng_state = 12345;
    int cases = be == VF_BACKEND_CPU ? 400 : 80;
    for (int c = 0; c < cases; c++) {
        int r = (int)rnd_in(0, 4);
        int64_t sh[8], b[8], e[8], s[8];
        for (int d = 0; d < r; d++) {
            sh[d] = rnd_in(0, 6);
            int kind = (int)rnd_in(0, 9);
            b[d] = kind == 0 ? BIG : kind == 1 ? INT64_MIN : rnd_in(-9, 9);
            kind = (int)rnd_in(0, 9);
            e[d] = kind < 2 ? BIG : kind == 2 ? INT64_MIN : rnd_in(-9, 9);
            do s[d] = rnd_in(-3, 3);
            while (s[d] == 0);
        }
        char what[64];
        snprintf(what, sizeof what, "random slice case %d (rank %d)", c, r);
        check_slice(ctx, r, sh, b, e, s, what);
    }
    vt_context_done(ctx);
}

static void slice_fixed(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    int64_t sh[2] = {5, 7};
    check_slice(ctx, 2, sh, NULL, NULL, NULL, "x[:, :]");
    check_slice(ctx, 2, sh, NULL, NULL, (int64_t[]){-1, -1}, "x[::-1, ::-1]");
    check_slice(ctx, 2, sh, (int64_t[]){-3, 1}, (int64_t[]){BIG, -1}, NULL, "x[-3:, 1:-1]");
    check_slice(ctx, 2, sh, (int64_t[]){2, 100}, (int64_t[]){100, 200}, NULL, "x[2:100, 100:200] (empty)");
    check_slice(ctx, 2, sh, (int64_t[]){-100, 0}, (int64_t[]){100, 7}, (int64_t[]){2, 3}, "x[-100:100:2, 0:7:3]");
    check_slice(ctx, 2, sh, (int64_t[]){4, 6}, (int64_t[]){-100, 0}, (int64_t[]){-2, -4}, "x[4:-100:-2, 6:0:-4]");
    vt_context_done(ctx);
}

/* Every dtype moves as bits: f16 (with a NaN payload), bool, f32 -0. */
static void slice_dtypes(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    uint16_t h[6] = {0x3c00, 0x7e01, 0x8000, 0xc000, 0x0001, 0x7bff};
    uint8_t bo[6] = {1, 0, 0, 1, 1, 0};
    float f[6] = {-0.0f, 1.5f, NAN, -INFINITY, 3.0f, 1e-40f};
    int64_t sh = 6, b = 4, e = BIG, s = -2; /* x[4::-2]: elements 4, 2, 0 */
    vf_tensor *th = vf_slice(ctx, vf_tensor_from_host(ctx, VF_F16, 1, &sh, h), &b, &e, &s);
    vf_tensor *tb = vf_slice(ctx, vf_tensor_from_host(ctx, VF_BOOL, 1, &sh, bo), &b, &e, &s);
    vf_tensor *tf = vf_slice(ctx, vf_tensor_from_host(ctx, VF_F32, 1, &sh, f), &b, &e, &s);
    uint16_t wh[3] = {h[4], h[2], h[0]};
    uint8_t wb[3] = {bo[4], bo[2], bo[0]};
    float wf[3] = {f[4], f[2], f[0]};
    expect_bytes(th, wh, 3, 2, "f16 slice");
    expect_bytes(tb, wb, 3, 1, "bool slice");
    expect_bytes(tf, wf, 3, 4, "f32 slice");
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* Leading rows of a matrix whose rows are 256-byte multiples: a view (no
   dispatch); the same slice of a variable, or at an unaligned row, a copy;
   the values equal either way. */
static void slice_view(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    int64_t sh[2] = {8, 64};
    int32_t *x = iota32(512);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 2, sh, x);
    vf_tensor *v = vf_variable(ctx, t);
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    vf_context_stats s0, s1, s2;
    vf_context_stats_get(ctx, &s0);
    vf_tensor *a = vf_slice(ctx, t, (int64_t[]){2, 0}, (int64_t[]){5, BIG}, NULL);
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    vf_context_stats_get(ctx, &s1);
    assert_int_equal(s1.dispatches, s0.dispatches);   /* a view */
    vf_tensor *bv = vf_slice(ctx, v, (int64_t[]){2, 0}, (int64_t[]){5, BIG}, NULL);
    vf_tensor *c = vf_slice(ctx, t, (int64_t[]){1, 1}, (int64_t[]){3, BIG}, NULL);
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    vf_context_stats_get(ctx, &s2);
    if (be == VF_BACKEND_VULKAN) assert_int_equal(s2.dispatches, s1.dispatches + 2);
    expect_bytes(a, x + 128, 192, 4, "rows 2:5 (view)");
    expect_bytes(bv, x + 128, 192, 4, "rows 2:5 of a variable (copy)");
    /* the copy keeps its value after the variable changes */
    assert_int_equal(vf_assign(v, vf_fill(ctx, VF_I32, 2, sh, 0)), VF_OK);
    expect_bytes(bv, x + 128, 192, 4, "rows 2:5 of a variable after an assign");
    int32_t want[2 * 63];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 63; j++) want[i * 63 + j] = x[(1 + i) * 64 + 1 + j];
    expect_bytes(c, want, 126, 4, "x[1:3, 1:]");
    free(x);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* ---- concat, stack, split ---------------------------------------------------- */

/* Reference concat of n i32 parts along axis: every output element's part
   found by walking the parts' sizes. */
static void ref_concat(int n, int32_t *const *xs, int r, int64_t (*sh)[8], int axis, int32_t *out, int64_t *osh)
{
    memcpy(osh, sh[0], sizeof(int64_t) * (size_t)r);
    osh[axis] = 0;
    for (int i = 0; i < n; i++) osh[axis] += sh[i][axis];
    int64_t total = numel_of(r, osh), c[8] = {0};
    for (int64_t k = 0; k < total; k++) {
        int p = 0;
        int64_t at = c[axis];
        while (at >= sh[p][axis]) at -= sh[p++][axis];
        int64_t lin = 0;
        for (int d = 0; d < r; d++) lin = lin * sh[p][d] + (d == axis ? at : c[d]);
        out[k] = xs[p][lin];
        for (int d = r - 1; d >= 0; d--) {
            if (++c[d] < osh[d]) break;
            c[d] = 0;
        }
    }
}

static void check_concat(vf_context *ctx, int n, int r, int64_t (*sh)[8], int axis, bool stack, const char *what)
{
    vf_scope_begin(ctx);
    int32_t *xs[8];
    vf_tensor *ts[8];
    int32_t base = 0;
    for (int i = 0; i < n; i++) {
        int64_t m = numel_of(r, sh[i]);
        xs[i] = iota32(m);
        for (int64_t k = 0; k < m; k++) xs[i][k] += base;
        base += 1000;
        ts[i] = vf_tensor_from_host(ctx, VF_I32, r, sh[i], xs[i]);
    }
    vf_tensor *y = stack ? vf_stack(ctx, n, ts, axis) : vf_concat(ctx, n, ts, axis);
    if (!y) fail_msg("%s: %s", what, vf_error_message(ctx));
    /* stack = concat of the parts with a size-1 dim at axis */
    int rr = r, ax = axis < 0 ? axis + r + (stack ? 1 : 0) : axis;
    int64_t sh2[8][8], osh[8];
    for (int i = 0; i < n; i++) {
        if (!stack) {
            memcpy(sh2[i], sh[i], sizeof sh2[i]);
            continue;
        }
        for (int d = 0, k = 0; d <= r; d++) sh2[i][d] = d == ax ? 1 : sh[i][k++];
    }
    if (stack) rr = r + 1;
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += numel_of(rr, sh2[i]);
    int32_t *want = malloc((size_t)(total ? total : 1) * 4);
    ref_concat(n, xs, rr, sh2, ax, want, osh);
    expect_shape(y, rr, osh, what);
    expect_bytes(y, want, total, 4, what);
    free(want);
    for (int i = 0; i < n; i++) free(xs[i]);
    vf_scope_end(ctx);
}

static void concat_stack(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    int64_t a[8][8] = {{2, 3, 4}, {2, 5, 4}, {2, 1, 4}, {2, 0, 4}, {2, 2, 4}};
    check_concat(ctx, 2, 3, a, 1, false, "concat 2 along 1");
    check_concat(ctx, 5, 3, a, -2, false, "concat 5 along -2 (one part empty)");
    int64_t b[8][8] = {{3, 4}, {1, 4}, {6, 4}};
    check_concat(ctx, 3, 2, b, 0, false, "concat 3 along 0");
    int64_t c[8][8] = {{0, 4}, {0, 4}};
    check_concat(ctx, 2, 2, c, 0, false, "concat of empty parts");
    int64_t d[8][8] = {{3, 4}};
    check_concat(ctx, 1, 2, d, 1, false, "concat of one part");
    int64_t e[8][8] = {{3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 4}, {3, 4}};
    check_concat(ctx, 7, 2, e, -1, false, "concat 7 along -1");
    check_concat(ctx, 3, 2, e, 0, true, "stack 3 at 0");
    check_concat(ctx, 4, 2, e, -1, true, "stack 4 at -1");
    check_concat(ctx, 2, 2, e, 1, true, "stack 2 at 1");
    int64_t f[8][8] = {{0}, {0}};
    check_concat(ctx, 2, 0, f, 0, true, "stack of scalars");
    vt_context_done(ctx);
}

static void split(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    int64_t sh[3] = {2, 9, 3};
    int32_t *x = iota32(54);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 3, sh, x);
    vf_tensor *p[4];
    int64_t sizes[3][4] = {{3, 3, 3}, {2, -1, 0, 4}, {9}};
    int counts[3] = {3, 4, 1};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(vf_split(ctx, t, counts[k], k == 0 ? NULL : sizes[k], -2, p), VF_OK);
        int64_t at = 0;
        for (int i = 0; i < counts[k]; i++) {
            int64_t len = sizes[k][i] == -1 ? 3 : sizes[k][i];
            int64_t b[3] = {0, at, 0}, e[3] = {BIG, at + len, BIG}, idx_store[3][16], *idx[3] = {idx_store[0], idx_store[1], idx_store[2]};
            int m[3];
            for (int d = 0; d < 3; d++) m[d] = ref_indices(sh[d], b[d], e[d], 1, idx[d]);
            int32_t want[64];
            gather((const uint8_t *)x, 3, sh, 4, idx, m, NULL, (uint8_t *)want);
            int64_t osh[3] = {2, len, 3};
            char what[64];
            snprintf(what, sizeof what, "split %d part %d", k, i);
            expect_shape(p[i], 3, osh, what);
            expect_bytes(p[i], want, 6 * len, 4, what);
            at += len;
        }
    }
    free(x);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* ---- pad, tile, broadcast_to, expand_dims, squeeze --------------------------- */

static void check_pad(vf_context *ctx, vf_dtype dt, int r, const int64_t *sh, const int64_t *lo, const int64_t *hi,
                      double value, const void *x, const void *fill, const char *what)
{
    vf_scope_begin(ctx);
    size_t es = vf_dtype_size(dt);
    vf_tensor *y = vf_pad(ctx, vf_tensor_from_host(ctx, dt, r, sh, x), lo, hi, value);
    if (!y) fail_msg("%s: %s", what, vf_error_message(ctx));
    int64_t store[8][64], *idx[8], osh[8];
    int m[8];
    for (int d = 0; d < r; d++) {
        idx[d] = store[d];
        m[d] = 0;
        for (int64_t i = 0; i < lo[d]; i++) idx[d][m[d]++] = -1;
        for (int64_t i = 0; i < sh[d]; i++) idx[d][m[d]++] = i;
        for (int64_t i = 0; i < hi[d]; i++) idx[d][m[d]++] = -1;
        osh[d] = m[d];
    }
    expect_shape(y, r, osh, what);
    int64_t on = numel_of(r, osh);
    uint8_t *want = malloc((size_t)(on ? on : 1) * es);
    gather(x, r, sh, es, idx, m, fill, want);
    expect_bytes(y, want, on, es, what);
    free(want);
    vf_scope_end(ctx);
}

static void pad(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    int32_t *x = iota32(60);
    int32_t f7 = -7;
    check_pad(ctx, VF_I32, 3, (int64_t[]){3, 4, 5}, (int64_t[]){1, 0, 2}, (int64_t[]){0, 3, 1}, -7, x, &f7, "i32 pad");
    check_pad(ctx, VF_I32, 2, (int64_t[]){0, 4}, (int64_t[]){2, 1}, (int64_t[]){1, 0}, -7, x, &f7, "pad of empty");
    check_pad(ctx, VF_I32, 2, (int64_t[]){3, 4}, (int64_t[]){0, 0}, (int64_t[]){0, 0}, -7, x, &f7, "pad of nothing");
    check_pad(ctx, VF_I32, 0, NULL, NULL, NULL, -7, x, &f7, "pad of a scalar");
    uint16_t h[6] = {0x3c00, 0x7e01, 0x8000, 0xc000, 0x0001, 0x7bff}, h15 = 0x3e00; /* 1.5 */
    check_pad(ctx, VF_F16, 2, (int64_t[]){2, 3}, (int64_t[]){1, 2}, (int64_t[]){2, 0}, 1.5, h, &h15, "f16 pad");
    uint8_t bo[6] = {1, 0, 0, 1, 1, 0}, one = 1;
    check_pad(ctx, VF_BOOL, 1, (int64_t[]){6}, (int64_t[]){3}, (int64_t[]){2}, 1, bo, &one, "bool pad");
    float fx[4] = {1, -0.0f, NAN, 2}, fv = -2.5f;
    check_pad(ctx, VF_F32, 2, (int64_t[]){2, 2}, (int64_t[]){1, 1}, (int64_t[]){1, 1}, -2.5, fx, &fv, "f32 pad");
    free(x);
    vt_context_done(ctx);
}

static void tile_broadcast(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    int64_t sh[3] = {2, 1, 3};
    int32_t *x = iota32(6);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 3, sh, x);
    /* tile: out[i] = x[i mod n] per dim */
    int64_t reps[3] = {2, 3, 2}, osh[3] = {4, 3, 6};
    vf_tensor *y = vf_tile(ctx, t, reps);
    expect_shape(y, 3, osh, "tile");
    int32_t want[72];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 6; k++) want[(i * 3 + j) * 6 + k] = x[(i % 2) * 3 + (k % 3)];
    expect_bytes(y, want, 72, 4, "tile");
    vf_tensor *y0 = vf_tile(ctx, t, (int64_t[]){1, 0, 1});
    expect_shape(y0, 3, (int64_t[]){2, 0, 3}, "tile by 0");
    vf_tensor *y1 = vf_tile(ctx, t, (int64_t[]){1, 1, 1});
    expect_bytes(y1, x, 6, 4, "tile by 1");
    /* broadcast_to [2, 2, 4, 3] with a -1 keeping x's 2: x[a, 0, c] at [., a, b, c] */
    vf_tensor *b = vf_broadcast_to(ctx, t, 4, (int64_t[]){2, -1, 4, 3});
    expect_shape(b, 4, (int64_t[]){2, 2, 4, 3}, "broadcast_to");
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 3; k++) want[((l * 2 + i) * 4 + j) * 3 + k] = x[i * 3 + k];
    expect_bytes(b, want, 48, 4, "broadcast_to");
    /* expand_dims / squeeze: shapes; values unchanged */
    vf_tensor *e0 = vf_expand_dims(ctx, t, 0), *e3 = vf_expand_dims(ctx, t, -1), *e2 = vf_expand_dims(ctx, t, 2);
    expect_shape(e0, 4, (int64_t[]){1, 2, 1, 3}, "expand_dims 0");
    expect_shape(e3, 4, (int64_t[]){2, 1, 3, 1}, "expand_dims -1");
    expect_shape(e2, 4, (int64_t[]){2, 1, 1, 3}, "expand_dims 2");
    vf_tensor *q = vf_squeeze(ctx, e0, 0, NULL), *q1 = vf_squeeze(ctx, e3, 1, (int[]){-1});
    expect_shape(q, 2, (int64_t[]){2, 3}, "squeeze all");
    expect_shape(q1, 3, (int64_t[]){2, 1, 3}, "squeeze -1");
    expect_bytes(q, x, 6, 4, "squeeze values");
    expect_bytes(e2, x, 6, 4, "expand_dims values");
    free(x);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* ---- bad arguments ---------------------------------------------------------- */

static void errors(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    int64_t sh[2] = {3, 4};
    vf_tensor *x = vf_fill(ctx, VF_F32, 2, sh, 1), *xi = vf_fill(ctx, VF_I32, 2, sh, 1);
    vf_tensor *y = vf_fill(ctx, VF_F32, 2, (int64_t[]){3, 5}, 1);
    assert_null(vf_slice(ctx, x, NULL, NULL, (int64_t[]){1, 0}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_slice", "step[1] is 0", NULL);
    /* INT64_MIN cannot be negated (a negative step is walked as -step): refused, saying so */
    assert_null(vf_slice(ctx, x, NULL, NULL, (int64_t[]){INT64_MIN, 1}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_slice", "step[0] is INT64_MIN", "-INT64_MAX", NULL);
    assert_null(vf_pad(ctx, x, (int64_t[]){0, -1}, NULL, 0));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_pad", "dim 1", ">= 0", NULL);
    assert_null(vf_concat(ctx, 2, (vf_tensor *[]){x, y}, 0));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_concat", "[3,5]", "[3,4]", NULL);
    assert_null(vf_concat(ctx, 2, (vf_tensor *[]){x, xi}, 0));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_concat", "i32", "f32", NULL);
    assert_null(vf_concat(ctx, 0, NULL, 0));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_concat", "n >= 1", NULL);
    assert_null(vf_concat(ctx, 1, &x, 2));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_concat", "axis 2", NULL);
    assert_null(vf_concat(ctx, 1, (vf_tensor *[]){vf_fill(ctx, VF_F32, 0, NULL, 1)}, 0));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_concat", "scalar", NULL);
    assert_null(vf_stack(ctx, 2, (vf_tensor *[]){x, y}, 0));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_stack", "same shape", NULL);
    vf_tensor *p[3] = {x, x, x};
    assert_int_equal(vf_split(ctx, x, 3, NULL, 1, p), VF_ERROR_SHAPE);
    assert_null(p[0]);
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_split", "3 equal parts", NULL);
    assert_int_equal(vf_split(ctx, x, 2, (int64_t[]){1, 4}, 1, p), VF_ERROR_SHAPE);
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_split", "add up to 5", NULL);
    assert_int_equal(vf_split(ctx, x, 2, (int64_t[]){-2, 4}, 1, p), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_split", "sizes[0] is -2", NULL);
    assert_null(vf_broadcast_to(ctx, x, 2, (int64_t[]){3, 5}));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_broadcast_to", "does not broadcast", NULL);
    assert_null(vf_broadcast_to(ctx, x, 1, (int64_t[]){4}));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_broadcast_to", "rank 1", NULL);
    assert_null(vf_squeeze(ctx, x, 1, (int[]){0}));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_squeeze", "not 1", NULL);
    assert_null(vf_expand_dims(ctx, x, 4));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_expand_dims", "axis 4", NULL);
    assert_null(vf_tile(ctx, x, (int64_t[]){1, -1}));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tile", "reps[1]", NULL);
    /* NULL in, NULL out, no new error */
    assert_null(vf_slice(ctx, NULL, NULL, NULL, NULL));
    assert_null(vf_concat(ctx, 2, (vf_tensor *[]){x, NULL}, 0));
    assert_int_equal(vf_status_get(ctx), VF_OK);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* A loop over windows of one size (x[i:i+3, 1:] for every i) makes one
   pipeline: offsets are push constants, not GLSL. */
static void slice_offsets(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    int64_t sh[2] = {12, 5};
    int32_t *x = iota32(60);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 2, sh, x);
    vf_context_stats s0, s1;
    for (int64_t i = 0; i < 9; i++) {
        vf_tensor *y = vf_slice(ctx, t, (int64_t[]){i, 1}, (int64_t[]){i + 3, BIG}, NULL);
        int32_t want[12];
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) want[r * 4 + c] = x[(i + r) * 5 + 1 + c];
        expect_bytes(y, want, 12, 4, "x[i:i+3, 1:]");
        if (i == 0) vf_context_stats_get(ctx, &s0);
    }
    vf_context_stats_get(ctx, &s1);
    assert_int_equal(s1.pipelines_created, s0.pipelines_created);
    free(x);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

/* Steps whose size is not a 32-bit number (-INT64_MAX: the stand-in
   for the refused INT64_MIN) on dims they leave one element of: every
   kernel takes them (such a dim reads its start only), forward and the
   gradient. */
static void slice_huge_steps(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_scope_begin(ctx);
    int64_t sh[2] = {3, 4};
    int32_t *x = iota32(12); /* 1 .. 12 */
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, 2, sh, x);
    expect_bytes(vf_slice(ctx, t, NULL, NULL, (int64_t[]){-INT64_MAX, 1}), (int32_t[]){9, 10, 11, 12}, 4, 4,
                 "x[::-INT64_MAX]");
    expect_bytes(vf_slice(ctx, t, NULL, NULL, (int64_t[]){1, -INT64_MAX}), (int32_t[]){4, 8, 12}, 3, 4,
                 "x[:, ::-INT64_MAX]");
    expect_bytes(vf_slice(ctx, t, (int64_t[]){1, -1}, NULL, (int64_t[]){INT64_MAX, -((int64_t)1 << 40)}),
                 (int32_t[]){8}, 1, 4, "x[1::INT64_MAX, -1::-2^40]");
    float xf[12], wt[4] = {1, 2, 3, 4}, want[12] = {0};
    for (int i = 0; i < 12; i++) xf[i] = (float)i;
    memcpy(want + 8, wt, sizeof wt);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, sh, xf), *w = vf_tensor_from_host(ctx, VF_F32, 2,
                                                                                         (int64_t[]){1, 4}, wt), *g;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_mul(ctx, vf_slice(ctx, in, NULL, NULL, (int64_t[]){-INT64_MAX, 1}), w);
    assert_int_equal(vf_tape_gradient(tp, y, 1, &in, &g), VF_OK);
    vf_tape_end(tp);
    expect_bytes(g, want, 12, 4, "d x[::-INT64_MAX] * w / dx");
    free(x);
    vf_scope_end(ctx);
    vt_context_done(ctx);
}

VT_PER_BACKEND(slice_random)
VT_PER_BACKEND(slice_huge_steps)
VT_PER_BACKEND(slice_fixed)
VT_PER_BACKEND(slice_dtypes)
VT_PER_BACKEND(slice_view)
VT_PER_BACKEND(slice_offsets)
VT_PER_BACKEND(concat_stack)
VT_PER_BACKEND(split)
VT_PER_BACKEND(pad)
VT_PER_BACKEND(tile_broadcast)
VT_PER_BACKEND(errors)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(slice_random),
        VT_PER_BACKEND_TESTS(slice_fixed),
        VT_PER_BACKEND_TESTS(slice_dtypes),
        VT_PER_BACKEND_TESTS(slice_view),
        VT_PER_BACKEND_TESTS(slice_offsets),
        VT_PER_BACKEND_TESTS(slice_huge_steps),
        VT_PER_BACKEND_TESTS(concat_stack),
        VT_PER_BACKEND_TESTS(split),
        VT_PER_BACKEND_TESTS(pad),
        VT_PER_BACKEND_TESTS(tile_broadcast),
        VT_PER_BACKEND_TESTS(errors),
    };
    return VT_RUN_GROUP(tests);
}
