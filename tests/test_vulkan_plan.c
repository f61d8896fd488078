/* The Vulkan backend's plan API (plan_create / plan_run / plan_destroy of
 * src/backend.h), driven directly: a recorded plan run with descriptor sets
 * on a device without push descriptors, and a plan re-recorded when a
 * binding lands elsewhere although its vf_buffer has a freed one's host
 * address, and fused groups under a guard (a vf_cond's branch): the
 * branch not taken writes nothing. Plans of traced functions:
 * test_function_plan.c, test_plan_cond.c. */
#include "testutil.h"
#include "vk_test_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_tref ref1(vf_buffer *b, size_t off, int64_t n)
{
    return (vf_tref){.buf = b, .offset = off, .dtype = VF_F32, .rank = 1, .shape = {n}};
}

static void test_backend_plan_sets(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    vf_vk_extra_options x = {.no_push_descriptors = true};
    rt_make(&h, NULL, &x);
    assert_false(h.rt->dev.push_descriptors);
    enum { N = 1000 };
    float a[N], c[N];
    for (int i = 0; i < N; i++) a[i] = (float)i, c[i] = 1.0f;
    vf_buffer *cb = alloc_upload(&h, c, N), *in[2] = {alloc_upload(&h, a, N), alloc_upload(&h, c, N)};
    vf_buffer *out[2] = {alloc_upload(&h, NULL, N), alloc_upload(&h, NULL, N)};
    /* t = in + c (arena); out = t * t */
    vf_exec ex[2] = {
        {.op = VF_OP_ADD, .n_in = 2, .in = {ref1(NULL, 0, N), ref1(cb, 0, N)}, .out = ref1(NULL, 0, N)},
        {.op = VF_OP_MUL, .n_in = 2, .in = {ref1(NULL, 0, N), ref1(NULL, 0, N)}, .out = ref1(NULL, 0, N)},
    };
    const vf_plan_loc loc[2][4] = {
        {{VF_PLAN_BIND, 0}, {VF_PLAN_FIXED, 0}, {VF_PLAN_FIXED, 0}, {VF_PLAN_ARENA, 0}},
        {{VF_PLAN_ARENA, 0}, {VF_PLAN_ARENA, 0}, {VF_PLAN_FIXED, 0}, {VF_PLAN_BIND, 1}},
    };
    vf_plan_desc d = {.execs = ex, .loc = loc, .n_execs = 2, .arena_bytes = N * 4, .n_binds = 2, .name = "t"};
    vf_plan *p = NULL;
    assert_int_equal(h.be.iface->plan_create(h.be.self, &d, &p), VF_OK);
    vf_plan_info info;
    h.be.iface->plan_info(h.be.self, p, &info);
    assert_int_equal(info.kernels, 2);
    for (int run = 0; run < 4; run++) {
        int k = run / 2; /* two runs with the same bindings, then others: re-recorded once */
        vf_plan_bind b[2] = {{in[k], 0, N * 4}, {out[k], 0, N * 4}};
        int64_t submits = h.rt->sched.submits;
        assert_int_equal(h.be.iface->plan_run(h.be.self, p, b, 2), VF_OK);
        assert_int_equal(h.rt->sched.submits, submits + 1);
        float got[N];
        assert_int_equal(h.be.iface->download(h.be.self, out[k], 0, got, sizeof got), VF_OK);
        for (int i = 0; i < N; i++) {
            float t = (k ? c[i] : a[i]) + 1.0f;
            if (got[i] != t * t) fail_msg("run %d [%d]: %g, want %g", run, i, got[i], t * t);
        }
    }
    h.be.iface->plan_destroy(h.be.self, p);
    for (int i = 0; i < 2; i++) h.be.iface->free(h.be.self, in[i]), h.be.iface->free(h.be.self, out[i]);
    h.be.iface->free(h.be.self, cb);
    rt_done(&h);
}

/* A binding whose vf_buffer is a new allocation at another place but
   whose host address is that of a freed one (malloc hands freed blocks
   back first) must still be re-recorded: the plan compares where a
   binding lands, not the vf_buffer pointer. With glibc the address is
   reused in about two runs of three here (lavapipe's threads move the
   heap); under ASan (quarantine) never. Either way the run is checked. */
static void test_backend_plan_rebind(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    rt_make(&h, NULL, NULL);
    enum { N = 1024, ROUNDS = 16 };
    static float a[N], d[2 * N], got[N];
    /* out = in * in */
    vf_exec ex = {.op = VF_OP_MUL, .n_in = 2, .in = {ref1(NULL, 0, N), ref1(NULL, 0, N)}, .out = ref1(NULL, 0, N)};
    const vf_plan_loc loc[1][4] = {{{VF_PLAN_BIND, 0}, {VF_PLAN_BIND, 0}, {VF_PLAN_FIXED, 0}, {VF_PLAN_BIND, 1}}};
    vf_plan_desc desc = {.execs = &ex, .loc = loc, .n_execs = 1, .n_binds = 2, .name = "square"};
    vf_plan *p = NULL;
    assert_int_equal(h.be.iface->plan_create(h.be.self, &desc, &p), VF_OK);
    int reused = 0;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N; i++) a[i] = (float)(i + round);
        for (int i = 0; i < 2 * N; i++) d[i] = -3.0f - (float)(i + round);
        vf_buffer *in = alloc_upload(&h, a, N), *spacer = alloc_upload(&h, NULL, N);
        vf_buffer *big = alloc_upload(&h, NULL, 2 * N), *out = alloc_upload(&h, NULL, N);
        vf_plan_bind b[2] = {{in, 0, N * 4}, {out, 0, N * 4}};
        assert_int_equal(h.be.iface->plan_run(h.be.self, p, b, 2), VF_OK);
        assert_int_equal(h.be.iface->download(h.be.self, out, 0, got, sizeof got), VF_OK);
        for (int i = 0; i < N; i++)
            if (got[i] != a[i] * a[i]) fail_msg("round %d, first run [%d]: %g, want %g", round, i, got[i], a[i] * a[i]);
        /* Free big, then in: the next allocation of 2N floats often gets
           in's vf_buffer address and big's range (in's is too small; the
           spacer keeps the two from coalescing). After a sync both frees
           are immediate, not deferred behind the run. glibc's calloc skips
           the per-thread cache, so eight small buffers are freed first to
           fill it and the two frees below reach the bins calloc takes
           from. */
        vf_buffer *small[8];
        for (int i = 0; i < 8; i++) small[i] = alloc_upload(&h, NULL, 4);
        assert_int_equal(h.be.iface->sync(h.be.self), VF_OK);
        for (int i = 0; i < 8; i++) h.be.iface->free(h.be.self, small[i]);
        h.be.iface->free(h.be.self, big);
        uintptr_t old = (uintptr_t)in;
        h.be.iface->free(h.be.self, in);
        vf_buffer *fresh = alloc_upload(&h, d, 2 * N);
        reused += (uintptr_t)fresh == old;
        b[0] = (vf_plan_bind){fresh, 0, N * 4};
        assert_int_equal(h.be.iface->plan_run(h.be.self, p, b, 2), VF_OK);
        assert_int_equal(h.be.iface->download(h.be.self, out, 0, got, sizeof got), VF_OK);
        for (int i = 0; i < N; i++)
            if (got[i] != d[i] * d[i])
                fail_msg("round %d, rebound run [%d]: %g, want %g (a stale recording?)", round, i, got[i], d[i] * d[i]);
        h.be.iface->free(h.be.self, fresh);
        h.be.iface->free(h.be.self, spacer);
        h.be.iface->free(h.be.self, out);
    }
    print_message("vf_buffer addresses reused in %d of %d rounds\n", reused, ROUNDS);
    h.be.iface->plan_destroy(h.be.self, p);
    rt_done(&h);
}

/* Two fused groups, one per branch of a predicate: y0 = (a + a) * a when
   it is true, y1 = a * a - a when it is false, each group's first value
   internal (only in memory when run unfused, past the arena). The guard
   must cover every dispatch of a fused kernel: the output of the branch
   not taken keeps what it held. */
static void test_backend_plan_guarded_fused(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    rt_make(&h, NULL, NULL);
    enum { N = 1000 };
    float a[N], sentinel[N];
    for (int i = 0; i < N; i++) a[i] = (float)(i % 13) - 6.0f, sentinel[i] = -7.0f;
    vf_tref f = ref1(NULL, 0, N), t1 = ref1(NULL, 4096, N);
    vf_exec ex[4] = {
        {.op = VF_OP_ADD, .n_in = 2, .in = {f, f}, .out = f},
        {.op = VF_OP_MUL, .n_in = 2, .in = {f, f}, .out = f},
        {.op = VF_OP_MUL, .n_in = 2, .in = {f, f}, .out = t1},
        {.op = VF_OP_SUB, .n_in = 2, .in = {t1, f}, .out = f},
    };
    const vf_plan_loc A = {VF_PLAN_BIND, 1}, T = {VF_PLAN_ARENA, 0}, X = {VF_PLAN_FIXED, 0};
    const vf_plan_loc loc[4][4] = {{A, A, X, T}, {T, A, X, {VF_PLAN_BIND, 2}}, {A, A, X, T}, {T, A, X, {VF_PLAN_BIND, 3}}};
    const vf_fused_member mem[2][2] = {{{{0, 0, 0}, -1}, {{VF_FUSED_MEMBER(0), 0, 0}, 1}},
                                       {{{0, 0, 0}, -1}, {{VF_FUSED_MEMBER(0), 0, 0}, 1}}};
    const vf_tref tens[2] = {f, f};
    const vf_plan_loc tloc[2][2] = {{A, {VF_PLAN_BIND, 2}}, {A, {VF_PLAN_BIND, 3}}};
    vf_plan_fused fused[2];
    for (int g = 0; g < 2; g++)
        fused[g] = (vf_plan_fused){.group = {.kind = VF_FUSED_ELEMENTWISE, .n_members = 2, .members = mem[g],
                                             .center = -1, .n_inputs = 1, .n_outputs = 1, .tensors = tens},
                                   .first_exec = 2 * g, .n_execs = 2, .loc = tloc[g]};
    const vf_plan_guard guards[4] = {{0, true}, {0, true}, {0, false}, {0, false}};
    const vf_plan_pred pred = {.ref = {.dtype = VF_BOOL, .rank = 0}, .loc = {VF_PLAN_BIND, 0}, .node = -1};
    vf_plan_desc d = {.execs = ex, .loc = loc, .n_execs = 4, .n_binds = 4, .name = "guarded_fused", .fused = fused,
                      .n_fused = 2, .spill_bytes = 8192, .guards = guards, .preds = &pred, .n_preds = 1};
    vf_plan *p = NULL;
    assert_int_equal(h.be.iface->plan_create(h.be.self, &d, &p), VF_OK);
    vf_plan_info info;
    h.be.iface->plan_info(h.be.self, p, &info);
    assert_int_equal(info.kernels, 2);         /* each group one kernel */
    assert_int_equal(info.dispatches, 2 + 1);  /* and the guard */
    vf_buffer *pb = alloc_upload(&h, NULL, 1), *in = alloc_upload(&h, a, N);
    for (int run = 0; run < 4; run++) {
        uint8_t pv = run % 2 == 0;
        vf_buffer *y[2] = {alloc_upload(&h, sentinel, N), alloc_upload(&h, sentinel, N)};
        assert_int_equal(h.be.iface->upload(h.be.self, pb, 0, &pv, 1), VF_OK);
        vf_plan_bind b[4] = {{pb, 0, 1}, {in, 0, N * 4}, {y[0], 0, N * 4}, {y[1], 0, N * 4}};
        assert_int_equal(h.be.iface->plan_run(h.be.self, p, b, 4), VF_OK);
        for (int k = 0; k < 2; k++) {
            float got[N];
            assert_int_equal(h.be.iface->download(h.be.self, y[k], 0, got, sizeof got), VF_OK);
            bool taken = (k == 0) == (pv != 0);
            for (int i = 0; i < N; i++) {
                float want = !taken ? -7.0f : k == 0 ? (a[i] + a[i]) * a[i] : a[i] * a[i] - a[i];
                if (got[i] != want)
                    fail_msg("run %d (pred %d), y%d[%d]: %g, want %g (%s)", run, pv, k, i, got[i], want,
                             taken ? "its branch ran" : "its branch did not run: the guard missed a fused kernel");
            }
            h.be.iface->free(h.be.self, y[k]);
        }
    }
    h.be.iface->plan_destroy(h.be.self, p);
    h.be.iface->free(h.be.self, pb);
    h.be.iface->free(h.be.self, in);
    rt_done(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend_plan_sets),
        cmocka_unit_test(test_backend_plan_rebind),
        cmocka_unit_test(test_backend_plan_guarded_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
