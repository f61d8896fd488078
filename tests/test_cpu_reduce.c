/* The CPU backend's reductions, argmax and row ops (softmax, log_softmax,
 * sparse cross entropy), through its iface, against double-precision
 * references written here. */
#include "cpu_test_common.h"

/* ---- reductions --------------------------------------------------------- */

static void check_reduce(fx *f, vf_op op, vf_dtype dt, int rank, const int64_t *shape, uint32_t mask,
                         bool keepdims, const void *data)
{
    int64_t n = numel(rank, shape);
    void *x = gen(dt, n, false);
    if (data) memcpy(x, data, (size_t)n * vf_dtype_size(dt));
    int64_t os[VF_MAX_RANK];
    int orank = 0;
    double count = 1;
    for (int d = 0; d < rank; d++) {
        bool r = (mask >> d) & 1;
        if (r) count *= (double)shape[d];
        if (!r) os[orank++] = shape[d];
        else if (keepdims) os[orank++] = 1;
    }
    int64_t on = numel(orank, os);
    double *acc = calloc((size_t)on, sizeof *acc), *mag = calloc((size_t)on, sizeof *mag);
    int64_t *iacc = calloc((size_t)on, sizeof *iacc);
    bool *seen = calloc((size_t)on, sizeof *seen);
    assert_true(acc && mag && iacc && seen);
    for (int64_t i = 0; i < n; i++) {
        int64_t rem = i, o = 0, mul = 1;
        for (int d = rank - 1; d >= 0; d--) {
            int64_t c = rem % shape[d];
            rem /= shape[d];
            if (!((mask >> d) & 1)) {
                o += c * mul;
                mul *= shape[d];
            }
        }
        double v = getf(x, dt, i);
        iacc[o] += geti(x, dt, i);
        switch (op) {
        case VF_OP_REDUCE_SUM: case VF_OP_REDUCE_MEAN: acc[o] += v; mag[o] += fabs(v); break;
        case VF_OP_NORM: acc[o] += v * v; mag[o] += v * v; break;
        case VF_OP_REDUCE_MAX:
            if (!seen[o] || isnan(v) || (!isnan(acc[o]) && v > acc[o])) acc[o] = v;
            break;
        case VF_OP_REDUCE_MIN:
            if (!seen[o] || isnan(v) || (!isnan(acc[o]) && v < acc[o])) acc[o] = v;
            break;
        default: fail_msg("not a reduction");
        }
        if (isnan(acc[o])) acc[o] = NAN; /* sticky */
        seen[o] = true;
    }
    vf_exec e = {.op = op, .n_in = 1, .attrs = {.axes_mask = mask, .keepdims = keepdims}};
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, dt, orank, os, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    double tol = dt == VF_F16 ? TOL_REDUCE_F16 : TOL_REDUCE_F32;
    for (int64_t o = 0; o < on; o++) {
        if (!vf_dtype_is_float(dt) && op == VF_OP_REDUCE_SUM) {
            int64_t want = dt == VF_I32 ? (int64_t)(int32_t)(uint32_t)(uint64_t)iacc[o]
                                          : (int64_t)(uint32_t)(uint64_t)iacc[o];
            assert_int_equal(geti(got, dt, o), want);
            continue;
        }
        double want = acc[o], atol = 0;
        if (op == VF_OP_REDUCE_MEAN) want /= count, mag[o] /= count;
        if (op == VF_OP_NORM) want = sqrt(want), mag[o] = sqrt(mag[o]);
        if (op != VF_OP_REDUCE_MAX && op != VF_OP_REDUCE_MIN) atol = tol * mag[o];
        else if (vf_dtype_is_float(dt)) want = round_to(dt, want);
        expect_close("reduce", o, getf(got, dt, o), want, 0, atol + 1e-30);
    }
    free(got);
    free(x);
    free(acc);
    free(mag);
    free(iacc);
    free(seen);
    free_bufs(f);
}

static void test_reduce(void **state)
{
    static const int64_t s4[] = {3, 4, 5, 6};
    static const uint32_t masks[] = {0xA, 0x5, 0x1, 0x8, 0xF, 0x6, 0x0};
    static const vf_op fops[] = {VF_OP_REDUCE_SUM, VF_OP_REDUCE_MEAN, VF_OP_REDUCE_MAX,
                                 VF_OP_REDUCE_MIN, VF_OP_NORM};
    for (int m = 0; m < COUNT(masks); m++)
        for (int k = 0; k < 2; k++) {
            for (int o = 0; o < COUNT(fops); o++) check_reduce(*state, fops[o], VF_F32, 4, s4, masks[m], k, NULL);
            check_reduce(*state, VF_OP_REDUCE_SUM, VF_F16, 4, s4, masks[m], k, NULL);
            check_reduce(*state, VF_OP_REDUCE_MAX, VF_F16, 4, s4, masks[m], k, NULL);
            for (vf_dtype t = VF_I32; t <= VF_U32; t++) {
                check_reduce(*state, VF_OP_REDUCE_SUM, t, 4, s4, masks[m], k, NULL);
                check_reduce(*state, VF_OP_REDUCE_MAX, t, 4, s4, masks[m], k, NULL);
                check_reduce(*state, VF_OP_REDUCE_MIN, t, 4, s4, masks[m], k, NULL);
            }
        }
    /* only size-1 axes reduced; long runs; long lanes (more than a chunk) */
    static const int64_t s1[] = {1, 7, 1}, big[] = {1000003}, lanes[] = {7, 1000}, mid[] = {5, 300, 3};
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_F32, 3, s1, 0x5, true, NULL);
    check_reduce(*state, VF_OP_REDUCE_MEAN, VF_F32, 3, s1, 0x7, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_F32, 1, big, 0x1, false, NULL);
    check_reduce(*state, VF_OP_NORM, VF_F32, 1, big, 0x1, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_F32, 2, lanes, 0x1, true, NULL);
    check_reduce(*state, VF_OP_REDUCE_MAX, VF_F32, 2, lanes, 0x1, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_MEAN, VF_F32, 3, mid, 0x2, false, NULL);
    check_reduce(*state, VF_OP_REDUCE_MIN, VF_F32, 3, mid, 0x5, true, NULL);
    /* NaN propagates through max/min/sum; the other outputs stay finite */
    static const int64_t s23[] = {2, 3};
    static const float xn[] = {1, NAN, 3, 4, 5, 6};
    for (int o = 0; o < COUNT(fops); o++) {
        check_reduce(*state, fops[o], VF_F32, 2, s23, 0x2, false, xn);
        check_reduce(*state, fops[o], VF_F32, 2, s23, 0x1, true, xn);
    }
    /* integer sums wrap to 32 bits */
    static const int64_t two[] = {2};
    static const int32_t iw[] = {INT32_MAX, 1};
    static const uint32_t uw[] = {UINT32_MAX, 2};
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_I32, 1, two, 1, false, iw);
    check_reduce(*state, VF_OP_REDUCE_SUM, VF_U32, 1, two, 1, false, uw);
    fx *f = *state;
    vf_exec e = {.op = VF_OP_REDUCE_SUM, .n_in = 1, .attrs.axes_mask = 1};
    e.in[0] = mk(f, VF_I32, 1, two, iw);
    e.out = mk(f, VF_I32, 0, NULL, NULL);
    run(f, &e);
    int32_t *r = dl(f, &e.out);
    assert_int_equal(*r, INT32_MIN);
    free(r);
    free_bufs(f);
}

/* ---- argmax ----------------------------------------------------------------- */

static void check_argmax(fx *f, vf_dtype dt, int rank, const int64_t *shape, int axis, const void *data,
                         const int32_t *want_fixed)
{
    int64_t n = numel(rank, shape);
    void *x = gen(dt, n, false);
    if (data) memcpy(x, data, (size_t)n * vf_dtype_size(dt));
    int64_t outer = 1, len = shape[axis], inner = 1, os[VF_MAX_RANK];
    int orank = 0;
    for (int d = 0; d < rank; d++) {
        if (d < axis) outer *= shape[d];
        if (d > axis) inner *= shape[d];
        if (d != axis) os[orank++] = shape[d];
    }
    vf_exec e = {.op = VF_OP_ARGMAX, .n_in = 1, .attrs.axis = axis};
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, VF_I32, orank, os, NULL);
    run(f, &e);
    int32_t *got = dl(f, &e.out);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < inner; l++) {
            /* the first NaN if there is one, else the first maximum */
            int32_t want = -1;
            for (int64_t j = 0; j < len && want < 0; j++)
                if (isnan(getf(x, dt, (o * len + j) * inner + l))) want = (int32_t)j;
            if (want < 0) {
                want = 0;
                for (int64_t j = 1; j < len; j++)
                    if (getf(x, dt, (o * len + j) * inner + l) > getf(x, dt, (o * len + want) * inner + l))
                        want = (int32_t)j;
            }
            if (want_fixed) assert_int_equal(want, want_fixed[o * inner + l]);
            assert_int_equal(got[o * inner + l], want);
        }
    free(got);
    free(x);
    free_bufs(f);
}

static void test_argmax(void **state)
{
    static const int64_t row[] = {6}, col[] = {6, 1};
    static const float ties[] = {1, 3, 3, 2, -INFINITY, 3};
    static const int32_t ties_want[] = {1};
    check_argmax(*state, VF_F32, 1, row, 0, ties, ties_want);
    static const float nans[] = {1, NAN, 5, NAN, 7, 0};
    static const int32_t nans_want[] = {1};
    check_argmax(*state, VF_F32, 1, row, 0, nans, nans_want);
    check_argmax(*state, VF_F32, 2, col, 0, nans, nans_want);
    static const int32_t iv[] = {-5, 9, 9, INT32_MIN, 9, 2};
    check_argmax(*state, VF_I32, 1, row, 0, iv, ties_want);
    static const uint32_t uv[] = {5, 0x80000000u, UINT32_MAX, 1, UINT32_MAX, 0};
    static const int32_t uv_want[] = {2};
    check_argmax(*state, VF_U32, 1, row, 0, uv, uv_want);
    static const int64_t s3[] = {2, 5, 3}, s2[] = {4, 300}, big[] = {1000003};
    static const vf_dtype dts[] = {VF_F32, VF_F16, VF_I32, VF_U32};
    for (int t = 0; t < 4; t++)
        for (int a = 0; a < 3; a++) check_argmax(*state, dts[t], 3, s3, a, NULL, NULL);
    check_argmax(*state, VF_F32, 2, s2, 0, NULL, NULL);
    check_argmax(*state, VF_F32, 2, s2, 1, NULL, NULL);
    check_argmax(*state, VF_F32, 1, big, 0, NULL, NULL);
}

/* ---- softmax and cross entropy ---------------------------------------------- */

static void check_softmax(fx *f, vf_op op, vf_dtype dt, int rank, const int64_t *shape, int axis,
                          const float *data)
{
    int64_t n = numel(rank, shape);
    void *x = gen(dt, n, false);
    if (data)
        for (int64_t i = 0; i < n; i++) {
            if (dt == VF_F32) ((float *)x)[i] = data[i];
            else ((uint16_t *)x)[i] = vf_f32_to_f16(data[i]);
        }
    vf_exec e = {.op = op, .n_in = 1, .attrs.axis = axis};
    e.in[0] = mk(f, dt, rank, shape, x);
    e.out = mk(f, dt, rank, shape, NULL);
    run(f, &e);
    void *got = dl(f, &e.out);
    int64_t outer = 1, len = shape[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= shape[d];
    for (int d = axis + 1; d < rank; d++) inner *= shape[d];
    double tol = dt == VF_F16 ? TOL_F16 : TOL_SOFTMAX;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t l = 0; l < inner; l++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < len; j++) m = fmax(m, getf(x, dt, (o * len + j) * inner + l));
            for (int64_t j = 0; j < len; j++) s += exp(getf(x, dt, (o * len + j) * inner + l) - m);
            for (int64_t j = 0; j < len; j++) {
                int64_t i = (o * len + j) * inner + l;
                double v = getf(x, dt, i) - m;
                double want = op == VF_OP_SOFTMAX ? exp(v) / s : v - log(s);
                double g = getf(got, dt, i);
                assert_false(isnan(g));
                expect_close("softmax", i, g, want, tol, TOL_SOFTMAX_ABS);
            }
        }
    free(got);
    free(x);
    free_bufs(f);
}

static void test_softmax(void **state)
{
    static const int64_t s2[] = {3, 4}, s3[] = {2, 3, 4}, wide[] = {2, 70000};
    static const float huge[] = {1e30f, 1e30f, -1e30f, 0, 1, 2, 3, 4, -1e30f, 1e30f, 5, -5};
    for (int op = VF_OP_SOFTMAX; op <= VF_OP_LOG_SOFTMAX; op++) {
        check_softmax(*state, op, VF_F32, 2, s2, 0, huge);
        check_softmax(*state, op, VF_F32, 2, s2, 1, huge);
        for (int a = 0; a < 3; a++) check_softmax(*state, op, VF_F32, 3, s3, a, NULL);
        check_softmax(*state, op, VF_F16, 3, s3, 2, NULL);
        check_softmax(*state, op, VF_F16, 3, s3, 0, NULL);
        check_softmax(*state, op, VF_F32, 2, wide, 1, NULL); /* a row longer than a block */
        check_softmax(*state, op, VF_F32, 2, wide, 0, NULL);
    }
    /* the huge row, written out: [0.5, 0.5, 0, 0] */
    fx *f = *state;
    vf_exec e = {.op = VF_OP_SOFTMAX, .n_in = 1, .attrs.axis = 1};
    e.in[0] = mk(f, VF_F32, 2, s2, huge);
    e.out = mk(f, VF_F32, 2, s2, NULL);
    run(f, &e);
    float *y = dl(f, &e.out);
    assert_true(y[0] == 0.5f && y[1] == 0.5f && y[2] == 0.0f && y[3] == 0.0f);
    free(y);
    free_bufs(f);
}

static void test_sparse_xent(void **state)
{
    fx *f = *state;
    static const int64_t ls[] = {5}, gs[] = {5, 4};
    static const float logits[] = {1, 2, 3, 4, 1e30f, 0, -1e30f, 1e30f, 0, 0, 0, 0,
                                   1, 2, 3, 4, 1, 2, 3, 4};
    static const int32_t li[] = {3, 1, 2, 4, -1};
    static const uint32_t lu[] = {0, 0, 3, UINT32_MAX, 4};
    for (int k = 0; k < 2; k++) {
        for (vf_dtype dt = VF_F32; dt <= VF_F16; dt++) {
            void *lg = gen(dt, 20, false);
            for (int i = 0; i < 20; i++) {
                if (dt == VF_F32) ((float *)lg)[i] = logits[i];
                else ((uint16_t *)lg)[i] = vf_f32_to_f16(i < 8 ? logits[i] / 1e26f : logits[i]);
            }
            vf_exec e = {.op = VF_OP_SPARSE_XENT, .n_in = 2};
            e.in[0] = mk(f, k ? VF_U32 : VF_I32, 1, ls, k ? (const void *)lu : (const void *)li);
            e.in[1] = mk(f, dt, 2, gs, lg);
            e.out = mk(f, dt, 1, ls, NULL);
            run(f, &e);
            void *got = dl(f, &e.out);
            for (int r = 0; r < 5; r++) {
                int64_t lab = k ? (int64_t)lu[r] : li[r];
                double want = NAN;
                if (lab >= 0 && lab < 4) {
                    double m = -INFINITY, s = 0;
                    for (int j = 0; j < 4; j++) m = fmax(m, getf(lg, dt, r * 4 + j));
                    for (int j = 0; j < 4; j++) s += exp(getf(lg, dt, r * 4 + j) - m);
                    want = log(s) - (getf(lg, dt, r * 4 + lab) - m); /* m cancels exactly */
                }
                double g = getf(got, dt, r);
                if (isnan(want)) assert_true(isnan(g));
                else expect_close("xent", r, g, want, dt == VF_F16 ? TOL_F16 : TOL_SOFTMAX, TOL_SOFTMAX_ABS);
            }
            free(got);
            free(lg);
            free_bufs(f);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reduce, setup, teardown),
        cmocka_unit_test_setup_teardown(test_argmax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sparse_xent, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
