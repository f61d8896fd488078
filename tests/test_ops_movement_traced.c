/* The movement ops in traced functions (the eager ones and their host
 * references: test_ops_movement.c): traced against eager on both backends,
 * fused and unfused, with symbolic (-1) dims sliced, padded, tiled, split
 * and concatenated, gradients included, at sizes where slices clamp or are
 * empty (one trace for all); slices, pads and concats fused into their
 * consumers' kernels; a function with them saved and loaded; and the
 * device's dispatch limits (few workgroups: the grid-stride paths), eager,
 * fused and unfused, against the CPU backend. */
#include "limits_common.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BIG INT64_MAX

/* ---- traced against eager, symbolic dims -------------------------------------- */

#define TR_OUT 12

/* x [N, 6] (N symbolic), y [3, 6]: every op, on and along the symbolic
   dim, and a gradient through the ones whose rules follow it. */
static vf_status traced_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *y = in[1], *p[2];
    out[0] = vf_slice(ctx, x, (int64_t[]){1, 0}, (int64_t[]){BIG, BIG}, NULL);                 /* x[1:] */
    out[1] = vf_slice(ctx, x, (int64_t[]){0, 1}, (int64_t[]){-1, BIG}, (int64_t[]){1, 2});      /* x[:-1, 1::2] */
    out[2] = vf_slice(ctx, x, NULL, NULL, (int64_t[]){-2, 1});                                   /* x[::-2] */
    out[3] = vf_pad(ctx, x, (int64_t[]){1, 0}, (int64_t[]){2, 1}, 3.0);
    out[4] = vf_concat(ctx, 2, (vf_tensor *[]){x, y}, 0);
    out[5] = vf_tile(ctx, x, (int64_t[]){2, 1});
    out[6] = vf_broadcast_to(ctx, vf_expand_dims(ctx, x, 0), 3, (int64_t[]){2, -1, 6});
    out[7] = vf_squeeze(ctx, vf_expand_dims(ctx, x, 1), 1, (int[]){1});
    out[9] = vf_stack(ctx, 2, (vf_tensor *[]){x, vf_neg(ctx, x)}, 1);
    /* d/dx sum(w * f(x)) through the rules, whose shapes follow the symbolic dim */
    vf_tape *tp = vf_tape_begin(ctx);
    if (vf_split(ctx, x, 2, (int64_t[]){1, -1}, 0, p) != VF_OK) return vf_status_get(ctx);
    out[8] = p[1];
    vf_tensor *f = vf_concat(ctx, 2, (vf_tensor *[]){vf_slice(ctx, x, (int64_t[]){1, 0}, (int64_t[]){-1, BIG}, NULL),
                                                     vf_pad(ctx, vf_square(ctx, y), NULL, (int64_t[]){0, 0}, 0)}, 0);
    f = vf_add(ctx, vf_reduce_sum(ctx, vf_square(ctx, f), 0, NULL, false),
               vf_reduce_sum(ctx, vf_mul(ctx, vf_tile(ctx, x, (int64_t[]){2, 2}), vf_tile(ctx, x, (int64_t[]){2, 2})), 0,
                             NULL, false));
    f = vf_add(ctx, f, vf_reduce_sum(ctx, vf_square(ctx, vf_pad(ctx, p[0], (int64_t[]){0, 2}, NULL, 1.0)), 0, NULL, false));
    vf_tensor *g[2] = {0};
    vf_status st = vf_tape_gradient(tp, f, 2, (vf_tensor *[]){x, y}, g);
    vf_tape_end(tp);
    if (st != VF_OK) return st;
    out[10] = g[0];
    out[11] = g[1];
    for (int i = 0; i < TR_OUT; i++)
        if (!out[i]) return vf_status_get(ctx);
    return VF_OK;
}

static void traced(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_tensor_spec sig[2] = {{VF_F32, 2, {-1, 6}}, {VF_F32, 2, {3, 6}}};
    for (int fused = 0; fused < 2; fused++) {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "movement", .body = traced_body,
                                                                      .n_inputs = 2, .n_outputs = TR_OUT,
                                                                      .input_signature = sig, .unfused = !fused});
        assert_non_null(fn);
        int64_t sizes[4] = {5, 8, 2, 1};   /* 1: x[1:], x[:-1] and a split part are empty */
        for (int k = 0; k < 4; k++) {
            vf_scope_begin(ctx);
            int64_t n = sizes[k], shx[2] = {n, 6}, shy[2] = {3, 6};
            float *xv = malloc(sizeof(float) * (size_t)(n * 6)), yv[18];
            vt_fill_uniform(xv, (size_t)(n * 6), -2, 2, 7 + (uint64_t)k);
            vt_fill_uniform(yv, 18, -2, 2, 99);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, shx, xv), vf_tensor_from_host(ctx, VF_F32, 2, shy, yv)};
            vf_tensor *want[TR_OUT] = {0}, *got[TR_OUT] = {0};
            if (traced_body(ctx, in, want, NULL) != VF_OK) fail_msg("eager: %s", vf_error_message(ctx));
            if (vf_function_call(fn, in, got) != VF_OK) fail_msg("traced: %s", vf_error_message(ctx));
            for (int i = 0; i < TR_OUT; i++) {
                char what[96];
                snprintf(what, sizeof what, "output %d at N = %lld (%s)", i, (long long)n, fused ? "fused" : "unfused");
                assert_int_equal(vf_tensor_rank(got[i]), vf_tensor_rank(want[i]));
                for (int d = 0; d < vf_tensor_rank(want[i]); d++)
                    if (vf_tensor_dim(got[i], d) != vf_tensor_dim(want[i], d))
                        fail_msg("%s: dim %d is %lld, eager %lld", what, d, (long long)vf_tensor_dim(got[i], d),
                                 (long long)vf_tensor_dim(want[i], d));
                float *a = vt_read(got[i]), *b = vt_read(want[i]);
                vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(want[i]), 1e-5, 1e-5, what);
                free(a), free(b);
            }
            free(xv);
            vf_scope_end(ctx);
        }
        vf_function_stats st;
        assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
        assert_int_equal(st.traces, 1);   /* one trace served every N */
        vf_function_destroy(fn);
    }
    vt_context_done(ctx);
}

/* Slices, pads and concats read by elementwise consumers fuse with them
   into one kernel (an indexed read of the group's input), on Vulkan; the
   values equal the unfused plan's and the eager ones. */
static vf_status fused_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *y = in[1];
    vf_tensor *a = vf_slice(ctx, x, (int64_t[]){1, BIG}, NULL, (int64_t[]){1, -2});       /* x[1:, ::-2] [N-1, 3] */
    vf_tensor *b = vf_pad(ctx, vf_slice(ctx, y, NULL, (int64_t[]){BIG, 2}, NULL), (int64_t[]){0, 1}, NULL, 0.5);
    vf_tensor *c = vf_concat(ctx, 2, (vf_tensor *[]){vf_slice(ctx, x, (int64_t[]){1, 0}, NULL, NULL), y}, 1);
    out[0] = vf_relu(ctx, vf_mul(ctx, vf_add(ctx, a, b), a));                                /* one kernel */
    out[1] = vf_exp(ctx, vf_neg(ctx, c));                                                     /* one kernel */
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void fused(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_tensor_spec sig[2] = {{VF_F32, 2, {-1, 6}}, {VF_F32, 2, {-1, 3}}};
    int kernels[2];
    for (int f = 0; f < 2; f++) {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "fused", .body = fused_body,
                                                                      .n_inputs = 2, .n_outputs = 2,
                                                                      .input_signature = sig, .unfused = f == 0});
        for (int64_t n = 3; n < 12; n += 7) {
            vf_scope_begin(ctx);
            float xv[66], yv[33];
            vt_fill_uniform(xv, (size_t)(n * 6), -2, 2, 5);
            vt_fill_uniform(yv, (size_t)((n - 1) * 3), -2, 2, 6);
            vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n, 6}, xv),
                                vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){n - 1, 3}, yv)};
            vf_tensor *want[2], *got[2];
            assert_int_equal(fused_body(ctx, in, want, NULL), VF_OK);
            if (vf_function_call(fn, in, got) != VF_OK) fail_msg("%s", vf_error_message(ctx));
            for (int i = 0; i < 2; i++) {
                assert_int_equal(vf_tensor_numel(got[i]), vf_tensor_numel(want[i]));
                float *a = vt_read(got[i]), *b = vt_read(want[i]);
                vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(want[i]), 1e-6, 1e-6, f ? "fused" : "unfused");
                free(a), free(b);
            }
            vf_scope_end(ctx);
        }
        vf_function_stats st;
        assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
        kernels[f] = st.kernels;
        vf_function_destroy(fn);
    }
    if (be == VF_BACKEND_VULKAN) {
        /* unfused: 5 window kernels and 5 elementwise ones; fused: one per
           output, the slice the pad reads and the one the concat reads (a
           window reads memory: windows of windows do not fuse) */
        assert_int_equal(kernels[0], 10);
        assert_int_equal(kernels[1], 4);
    }
    vt_context_done(ctx);
}

/* Saved and loaded (the window attrs in the file): the same values at a
   size not traced before. */
static void saved(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_tensor_spec sig[2] = {{VF_F32, 2, {-1, 6}}, {VF_F32, 2, {3, 6}}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "movement", .body = traced_body,
                                                                  .n_inputs = 2, .n_outputs = TR_OUT,
                                                                  .input_signature = sig});
    char path[128];
    snprintf(path, sizeof path, "%s/vkfuse_movement_%d_%d.vfn", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid(), (int)be);
    vf_scope_begin(ctx);
    float xv[42], yv[18];
    vt_fill_uniform(xv, 42, -2, 2, 3);
    vt_fill_uniform(yv, 18, -2, 2, 4);
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){4, 6}, xv),
                        vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 6}, yv)};
    vf_tensor *o[TR_OUT];
    assert_int_equal(vf_function_call(fn, in, o), VF_OK);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function *ld = NULL;
    if (vf_function_load(ctx, path, &ld) != VF_OK) fail_msg("load: %s", vf_error_message(ctx));
    remove(path);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){7, 6}, xv);
    vf_tensor *want[TR_OUT], *got[TR_OUT];
    assert_int_equal(traced_body(ctx, in, want, NULL), VF_OK);
    if (vf_function_call(ld, in, got) != VF_OK) fail_msg("loaded: %s", vf_error_message(ctx));
    for (int i = 0; i < TR_OUT; i++) {
        char what[64];
        snprintf(what, sizeof what, "loaded function output %d", i);
        assert_int_equal(vf_tensor_numel(got[i]), vf_tensor_numel(want[i]));
        float *a = vt_read(got[i]), *b = vt_read(want[i]);
        vt_assert_close_f32(a, b, (size_t)vf_tensor_numel(want[i]), 1e-5, 1e-5, what);
        free(a), free(b);
    }
    vf_scope_end(ctx);
    vf_function_destroy(ld);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* Strided and reversed slices of a symbolic dim, and their gradients
   (scattered by slice_grad, resolved per call), traced against eager at
   sizes where the slices clamp differently or are empty. (A slice with
   both bounds on one side, x[-3:-1], has a fixed size instead: the roll
   case of tests/test_tape_traced.c.) */
static vf_status strided_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *a = vf_slice(ctx, x, (int64_t[]){1, 0}, (int64_t[]){BIG, BIG}, (int64_t[]){3, 1});      /* x[1::3] */
    vf_tensor *b = vf_slice(ctx, x, (int64_t[]){-2, BIG}, (int64_t[]){BIG, BIG}, (int64_t[]){-2, -1}); /* x[-2::-2, ::-1] */
    vf_tensor *c = vf_slice(ctx, x, (int64_t[]){1, 0}, (int64_t[]){-1, 2}, NULL);                      /* x[1:-1, :2] */
    vf_tensor *f = vf_add(ctx, vf_add(ctx, vt_sum(ctx, vf_square(ctx, a)), vt_sum(ctx, vf_sin(ctx, b))),
                          vt_sum(ctx, vf_exp(ctx, c)));
    vf_status st = vf_tape_gradient(tp, f, 1, in, &out[1]);
    vf_tape_end(tp);
    out[0] = f;
    return st;
}

static void traced_strided(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_tensor_spec sig = {VF_F32, 2, {-1, 3}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "strided", .body = strided_body,
                                                                  .n_inputs = 1, .n_outputs = 2, .input_signature = &sig});
    int64_t sizes[5] = {7, 4, 1, 2, 10};
    for (int k = 0; k < 5; k++) {
        vf_scope_begin(ctx);
        float xv[30];
        vt_fill_uniform(xv, (size_t)(sizes[k] * 3), -2, 2, 40 + (uint64_t)k);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){sizes[k], 3}, xv), *want[2], *got[2];
        assert_int_equal(strided_body(ctx, &x, want, NULL), VF_OK);
        if (vf_function_call(fn, &x, got) != VF_OK) fail_msg("N = %lld: %s", (long long)sizes[k], vf_error_message(ctx));
        for (int i = 0; i < 2; i++) {
            char what[64];
            snprintf(what, sizeof what, "strided output %d at N = %lld", i, (long long)sizes[k]);
            assert_int_equal(vf_tensor_numel(got[i]), vf_tensor_numel(want[i]));
            float *p = vt_read(got[i]), *q = vt_read(want[i]);
            vt_assert_close_f32(p, q, (size_t)vf_tensor_numel(want[i]), 1e-5, 1e-5, what);
            free(p), free(q);
        }
        vf_scope_end(ctx);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_int_equal(st.traces, 1);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- the device's dispatch limits (few workgroups per dispatch: the
   kernels' grid-stride paths), eager, traced fused and unfused against
   the CPU backend ------------------------------------------------------------ */

static vf_status limits_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0], *y = in[1];
    out[0] = vf_slice(ctx, x, (int64_t[]){1, BIG}, (int64_t[]){BIG, BIG}, (int64_t[]){2, -3});
    out[1] = vf_pad(ctx, x, (int64_t[]){2, 1}, (int64_t[]){0, 3}, -1.0);
    out[2] = vf_concat(ctx, 2, (vf_tensor *[]){x, y}, 1);
    out[3] = vf_relu(ctx, vf_add(ctx, vf_slice(ctx, x, NULL, (int64_t[]){60, BIG}, NULL),
                                  vf_slice(ctx, y, (int64_t[]){60, 0}, NULL, NULL)));
    out[4] = vf_stack(ctx, 2, (vf_tensor *[]){x, y}, 0);
    out[5] = vf_mul(ctx, vf_tile(ctx, vf_slice(ctx, x, NULL, (int64_t[]){BIG, 5}, NULL), (int64_t[]){1, 3}),
                    vf_broadcast_to(ctx, vf_slice(ctx, y, NULL, (int64_t[]){1, 15}, NULL), 2, (int64_t[]){R, 15}));
    return lim_finish(ctx, out, 6);
}

static void limits(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    program p = {"movement under limits", limits_body, 2, 6, {{VF_F32, 2, {R, C}}, {VF_F32, 2, {R, C}}}};
    lim_check_program(&p, "max_groups=7");
    lim_check_program(&p, "max_groups=2");
}

/* A split of a symbolic dim: the -1 part takes what varies, the parts
   after it are cut from the end; equal parts are refused. */
static vf_status split_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    return vf_split(ctx, in[0], 4, (int64_t[]){1, -1, 2, 0}, 0, out);
}

static vf_status split_equal_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    return vf_split(ctx, in[0], 2, NULL, 0, out);
}

static void split_symbolic(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    vf_tensor_spec sig = {VF_F32, 2, {-1, 2}};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "split", .body = split_body, .n_inputs = 1,
                                                                  .n_outputs = 4, .input_signature = &sig});
    int64_t sizes[3] = {6, 3, 9};
    for (int k = 0; k < 3; k++) {
        vf_scope_begin(ctx);
        float xv[18];
        vt_fill_uniform(xv, 18, -2, 2, 70 + (uint64_t)k);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){sizes[k], 2}, xv), *got[4];
        if (vf_function_call(fn, &x, got) != VF_OK) fail_msg("%s", vf_error_message(ctx));
        int64_t len[4] = {1, sizes[k] - 3, 2, 0}, at = 0;
        for (int i = 0; i < 4; i++) {
            char what[64];
            snprintf(what, sizeof what, "split part %d at N = %lld", i, (long long)sizes[k]);
            assert_int_equal(vf_tensor_dim(got[i], 0), len[i]);
            if (len[i]) {
                float *g = vt_read(got[i]);
                vt_assert_close_f32(g, xv + 2 * at, (size_t)(2 * len[i]), 0, 0, what);
                free(g);
            }
            at += len[i];
        }
        vf_scope_end(ctx);
    }
    vf_function_destroy(fn);
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "split_equal", .body = split_equal_body, .n_inputs = 1,
                                                     .n_outputs = 2, .input_signature = &sig});
    vf_scope_begin(ctx);
    vf_tensor *x = vf_fill(ctx, VF_F32, 2, (int64_t[]){4, 2}, 1), *o[2];
    assert_int_not_equal(vf_function_call(fn, &x, o), VF_OK);
    vt_expect_error(ctx, VF_ERROR_UNSUPPORTED, "vf_split", "symbolic", "equal parts", "-1", NULL);
    vf_scope_end(ctx);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

/* ---- random programs ------------------------------------------------------- */

/* A program from a seed: a pool of rank-2 f32 values (the two inputs
   first); each step adds a slice (random bounds, steps, clamping), a pad,
   a concat of two values that fit, an elementwise op of one or two
   same-shaped values, or a tile; the last three values are the outputs. The
   same code runs eagerly and traced, so both see one program. */
#define RP_STEPS 10
static uint64_t rp_state;
static int64_t rp(int64_t lo, int64_t hi)
{
    rp_state = rp_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (int64_t)((rp_state >> 33) % (uint64_t)(hi - lo + 1));
}

static vf_status random_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    rp_state = *(const uint64_t *)user;
    vf_tensor *v[2 + RP_STEPS] = {in[0], in[1]};
    int n = 2;
    for (int step = 0; step < RP_STEPS; step++) {
        vf_tensor *a = v[rp(0, n - 1)], *b = v[rp(0, n - 1)], *r = NULL;
        switch (rp(0, 5)) {
        case 0:
        case 1: {
            int64_t bg[2], en[2], st[2];
            for (int d = 0; d < 2; d++) {
                st[d] = rp(0, 3) ? rp(1, 2) : -rp(1, 2);
                bg[d] = rp(0, 4) ? rp(-4, 4) : BIG;
                en[d] = rp(0, 2) ? BIG : rp(-6, 6);
            }
            r = vf_slice(ctx, a, bg, en, st);
            break;
        }
        case 2: r = vf_pad(ctx, a, (int64_t[]){rp(0, 2), rp(0, 2)}, (int64_t[]){rp(0, 2), rp(0, 2)}, 0.25); break;
        case 3:
            if (vf_tensor_dim(a, 1) == vf_tensor_dim(b, 1)) r = vf_concat(ctx, 2, (vf_tensor *[]){a, b}, 0);
            else if (vf_tensor_dim(a, 0) == vf_tensor_dim(b, 0)) r = vf_concat(ctx, 2, (vf_tensor *[]){a, b}, 1);
            else r = vf_tanh(ctx, a);
            break;
        case 4:
            if (vf_tensor_dim(a, 0) == vf_tensor_dim(b, 0) && vf_tensor_dim(a, 1) == vf_tensor_dim(b, 1))
                r = vf_add(ctx, vf_mul(ctx, a, b), a);
            else r = vf_sin(ctx, a);
            break;
        default: r = vf_tensor_numel(a) < 200 ? vf_tile(ctx, a, (int64_t[]){rp(1, 2), 1}) : vf_neg(ctx, a); break;
        }
        if (!r) return vf_status_get(ctx);
        v[n++] = r;
    }
    for (int i = 0; i < 3; i++) out[i] = v[n - 3 + i];
    return VF_OK;
}

static void random_programs(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *cpu = vt_context(VF_BACKEND_CPU), *vk = vt_context(VF_BACKEND_VULKAN);
    int kernels[2] = {0, 0}, empty = 0;
    for (uint64_t seed = 1; seed <= 24; seed++) {
        float xv[7 * 5], yv[5 * 7];
        vt_fill_uniform(xv, 35, -1, 1, seed);
        vt_fill_uniform(yv, 35, -1, 1, seed + 100);
        float *want[3];
        int64_t wn[3];
        vf_scope_begin(cpu);
        vf_tensor *ci[2] = {vf_tensor_from_host(cpu, VF_F32, 2, (int64_t[]){7, 5}, xv),
                            vf_tensor_from_host(cpu, VF_F32, 2, (int64_t[]){5, 7}, yv)}, *co[3];
        if (random_body(cpu, ci, co, &seed) != VF_OK) fail_msg("seed %llu: %s", (unsigned long long)seed, vf_error_message(cpu));
        for (int i = 0; i < 3; i++) want[i] = vt_read(co[i]), wn[i] = vf_tensor_numel(co[i]);
        vf_scope_end(cpu);
        for (int f = 0; f < 2; f++) {
            vf_function *fn = vf_function_create(vk, &(vf_function_desc){.name = "random", .body = random_body,
                                                                         .user = &seed, .n_inputs = 2, .n_outputs = 3,
                                                                         .unfused = f == 0});
            vf_scope_begin(vk);
            vf_tensor *vi[2] = {vf_tensor_from_host(vk, VF_F32, 2, (int64_t[]){7, 5}, xv),
                                vf_tensor_from_host(vk, VF_F32, 2, (int64_t[]){5, 7}, yv)}, *vo[3];
            if (vf_function_call(fn, vi, vo) != VF_OK)
                fail_msg("seed %llu: %s", (unsigned long long)seed, vf_error_message(vk));
            for (int i = 0; i < 3; i++) {
                char what[64];
                snprintf(what, sizeof what, "seed %llu output %d (%s)", (unsigned long long)seed, i, f ? "fused" : "unfused");
                assert_int_equal(vf_tensor_numel(vo[i]), wn[i]);
                float *got = vt_read(vo[i]);
                vt_assert_close_f32(got, want[i], (size_t)wn[i], 1e-5, 1e-5, what);
                free(got);
            }
            vf_scope_end(vk);
            vf_function_stats st;
            assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
            kernels[f] += st.kernels;
            vf_function_destroy(fn);
        }
        for (int i = 0; i < 3; i++) empty += wn[i] == 0, free(want[i]);
    }
    /* the programs did fuse windows with their consumers, and some outputs were empty */
    printf("random movement programs: %d kernels unfused, %d fused, %d empty outputs\n", kernels[0], kernels[1], empty);
    assert_true(kernels[1] < kernels[0]);
    assert_true(empty > 0);
    vt_context_done(cpu);
    vt_context_done(vk);
}

VT_PER_BACKEND(traced)
VT_PER_BACKEND(traced_strided)
VT_PER_BACKEND(saved)
VT_PER_BACKEND(fused)
VT_PER_BACKEND(split_symbolic)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(traced),
        VT_PER_BACKEND_TESTS(traced_strided),
        VT_PER_BACKEND_TESTS(saved),
        VT_PER_BACKEND_TESTS(fused),
        VT_PER_BACKEND_TESTS(split_symbolic),
        cmocka_unit_test(limits),
        cmocka_unit_test(random_programs),
    };
    return VT_RUN_GROUP(tests);
}
