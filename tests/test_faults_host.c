/* Host allocations as fault sites (issue 15), beside tests/test_faults.c:
 * every host allocation of one call failed in turn, for calls whose own
 * allocations became malloc sites after the fault wrapper landed (commits
 * 8114d37, 416eefe: vf_host_map eager and traced, vf_tensor_copy_to, the
 * simplify pass) and for what the full sweeps of test_faults.c found
 * (vf_function_load of a function with a capture, its variables, constant
 * folding and its host backend). Each run must end VF_OK or with a message
 * naming malloc, the context must compute the right answer once the fault
 * is lifted, and the call's own allocation must be among the failures,
 * named by its message. All N of the malloc site, on a warm context: a
 * few hundred runs in about a second. */
#include "faults_common.h"
#include "testutil.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int runs;
static char path[256]; /* the saved function */

/* ---- the host copies ------------------------------------------------------------ */

/* The host callback of vf_host_map: x -> 2x + 1, in place. */
static vf_status host_twice(void *user, vf_dtype dtype, int64_t numel, void *data, char *msg, size_t msg_len)
{
    (void)user, (void)msg, (void)msg_len;
    if (dtype != VF_F32) return VF_ERROR_INVALID_ARGUMENT;
    float *x = data;
    for (int64_t i = 0; i < numel; i++) x[i] = 2 * x[i] + 1;
    return VF_OK;
}

static vf_status host_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, vf_host_map(ctx, vf_neg(ctx, in[0]), host_twice, NULL, "twice"), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* where(x == x, x, x) + x: simplify's where pass (passes_simplify.c) */
static vf_status where_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, vf_where(ctx, vf_equal(ctx, in[0], in[0]), in[0], in[0]), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

enum { HN_ = 6 };

/* x * v, v a captured variable (2): a saved function with a capture */
static vf_status scale_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_mul(ctx, in[0], *(vf_tensor **)user);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* x * (exp(0) + 1): the constant folded when the function is optimised */
static vf_status fold_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *c = vf_add(ctx, vf_exp(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){HN_}, 0.0)),
                          vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    out[0] = vf_mul(ctx, in[0], c);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

enum { HN = HN_, H_EAGER = 0, H_TRACED, H_COPY, H_SIMPLIFY, H_LOAD, H_FOLD, H_N };
static const char *const h_names[H_N] = {"vf_host_map eager", "vf_host_map traced", "vf_tensor_copy_to",
                                         "a first call's simplify pass", "vf_function_load and a call",
                                         "a first call's constant folding"};
/* What each one's own allocation failing says (8114d37 made them fault
   sites: control_flow.c, run.c, tensor_copy.c, passes_simplify.c). */
static const char *const h_site_msg[H_N] = {"vf_host_map: out of host memory (malloc failed)",
                                            /* traced, the node runs between two recorded plans
                                               with its buffer mapped in place (no copy to
                                               allocate): the plan run's own allocations */
                                            "vf_function 'host': out of host memory (malloc failed)",
                                            "vf_tensor_copy_to: out of host memory (malloc failed)",
                                            "simplify: out of host memory (malloc failed)",
                                            /* the full sweep's save/load malloc:31 crashed here
                                               (vf_captures_free of a NULL array) */
                                            "vf_function_load: out of host memory (malloc failed)",
                                            /* the full sweep's train step malloc:57 */
                                            "fold: evaluating add: out of host memory (malloc failed)"};

/* One host copy on ctx (to dst for the copy), read back and checked when
   check: eager 2x + 1, traced (2(-x) + 1) + x, copied x. */
static vf_status host_op(int which, vf_context *ctx, vf_context *dst, vf_function *fn, bool check)
{
    static const float x[HN] = {1, -2, 3.5f, 0, 7, -0.25f};
    int64_t sh[1] = {HN};
    vf_scope_begin(ctx);
    vf_scope_begin(dst);
    vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 1, sh, x), *y = NULL;
    vf_status s = t ? VF_OK : vf_status_get(ctx);
    vf_context *at = which == H_COPY ? dst : ctx;
    if (!s && which == H_EAGER) y = vf_host_map(ctx, t, host_twice, NULL, "twice");
    if (!s && which == H_TRACED) s = vf_function_call(fn, &t, &y);
    if (!s && which == H_COPY) y = vf_tensor_copy_to(dst, t);
    vf_function *wf = NULL;
    if (!s && (which == H_SIMPLIFY || which == H_FOLD)) {
        /* a new function each time: its first call optimises its graph */
        vf_function_desc fd = {.name = "where", .body = which == H_FOLD ? fold_body : where_body, .n_inputs = 1,
                               .n_outputs = 1};
        wf = vf_function_create(ctx, &fd);
        s = wf ? vf_function_call(wf, &t, &y) : vf_status_get(ctx);
    }
    if (!s && which == H_LOAD) { /* the scale function, saved by the test */
        s = vf_function_load(ctx, path, &wf);
        /* its variable (the full sweep's save/load malloc:64 said "0
           variables" when the set of them could not grow) */
        if (!s && !vf_function_variable(wf, 0)) s = vf_status_get(ctx);
        if (!s) s = vf_function_call(wf, &t, &y);
    }
    float got[HN];
    if (!s) s = y ? vf_tensor_read(y, got, sizeof got) : vf_status_get(at);
    vf_function_destroy(wf);
    vf_scope_end(dst);
    vf_scope_end(ctx);
    if (s == VF_OK && check)
        for (int i = 0; i < HN; i++) {
            float want = which == H_EAGER ? 2 * x[i] + 1 : which == H_TRACED ? -x[i] + 1
                         : which == H_SIMPLIFY || which == H_LOAD || which == H_FOLD ? 2 * x[i] : x[i];
            if (got[i] != want) fail_msg("%s: [%d] = %g, want %g", h_names[which], i, got[i], want);
        }
    return s;
}

/* Every host allocation of each host copy (and of a first call whose
   simplify pass runs the where pass) failed in turn (all N of the malloc
   site, on one warm context: its kernels are compiled once): each run ends
   VF_OK or naming malloc, the context then computes the right answer, and
   the site's own allocation is among the failures, named by its message. */
static void test_sweep_host_copies(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_status st;
    vf_context *ctx = vt_fault_context(NULL, false, 0, &st);
    assert_int_equal(st, VF_OK);
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    vf_function_desc fd = {.name = "host", .body = host_body, .n_inputs = 1, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &fd);
    assert_non_null(fn);
    snprintf(path, sizeof path, "%s/vkfuse_faults_host_%d.vfm", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    vf_tensor *two = vf_variable(ctx, vf_fill(ctx, VF_F32, 0, NULL, 2.0));
    vf_function_desc wd = {.name = "scale", .body = scale_body, .user = &two, .n_inputs = 1, .n_outputs = 1};
    vf_function *wf = vf_function_create(ctx, &wd);
    assert_non_null(wf);
    {
        static const float x[HN] = {0};
        int64_t sh[1] = {HN};
        vf_scope_begin(ctx);
        vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 1, sh, x), *y = NULL;
        assert_int_equal(vf_function_call(wf, &t, &y), VF_OK);
        vf_scope_end(ctx);
        assert_int_equal(vf_function_save(wf, path), VF_OK);
        vf_function_destroy(wf);
    }
    for (int which = 0; which < H_N; which++) {
        assert_int_equal(host_op(which, ctx, cpu, fn, true), VF_OK); /* warm: a later call */
        vt_fault_set(NULL, true);
        assert_int_equal(host_op(which, ctx, cpu, fn, false), VF_OK);
        int64_t n = vf_fault_count(VF_FAULT_malloc);
        vt_fault_set(NULL, false);
        bool named = false;
        for (int64_t k = 1; k <= n; k++) {
            char spec[32];
            snprintf(spec, sizeof spec, "malloc:%lld", (long long)k);
            vt_fault_set(spec, false);
            vf_status s = host_op(which, ctx, cpu, fn, false);
            vt_fault_set(NULL, false);
            vf_context *at = vf_status_get(cpu) ? cpu : ctx;
            const char *msg = vf_error_message(at);
            if (s != VF_OK && !strstr(msg, "malloc"))
                fail_msg("%s, VKFUSE_FAULT=%s: %s does not name the site: %s", h_names[which], spec,
                         vf_status_name(s), msg);
            named |= s != VF_OK && strstr(msg, h_site_msg[which]) != NULL;
            vf_error_clear(ctx);
            vf_error_clear(cpu);
            if (host_op(which, ctx, cpu, fn, true) != VF_OK)
                fail_msg("%s, VKFUSE_FAULT=%s lifted: %s", h_names[which], spec, vf_error_message(ctx));
        }
        if (!named) fail_msg("%s: none of its %lld allocations failing said \"%s\"", h_names[which], (long long)n,
                             h_site_msg[which]);
        runs += (int)n;
    }
    vf_function_destroy(fn);
    vt_context_done(cpu);
    vf_context_destroy(ctx);
    unlink(path);
}

/* A first call's constant folding on a fresh context: the context's host
   backend, which folding evaluates on, is made then (the full sweep's
   train step malloc:58 said "no memory for the backend", not naming
   malloc). On the CPU backend: a fresh context per run costs nothing. */
static void test_sweep_fold_fresh(void **state)
{
    (void)state;
    static const float x[HN] = {1, -2, 3.5f, 0, 7, -0.25f};
    int64_t sh[1] = {HN}, n = -1;
    bool named = false;
    for (int64_t k = 0; k <= n || n < 0; k++) {
        vf_context *ctx = vt_context(VF_BACKEND_CPU);
        vf_function_desc fd = {.name = "fold", .body = fold_body, .n_inputs = 1, .n_outputs = 1};
        vf_function *fn = vf_function_create(ctx, &fd);
        assert_non_null(fn);
        char spec[32];
        snprintf(spec, sizeof spec, "malloc:%lld", (long long)k);
        vt_fault_set(k ? spec : NULL, k == 0); /* k = 0: count */
        vf_scope_begin(ctx);
        vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 1, sh, x), *y = NULL;
        vf_status s = t ? vf_function_call(fn, &t, &y) : vf_status_get(ctx);
        if (k == 0) n = vf_fault_count(VF_FAULT_malloc);
        vt_fault_set(NULL, false);
        if (s != VF_OK && !strstr(vf_error_message(ctx), "malloc"))
            fail_msg("fold on a fresh context, VKFUSE_FAULT=%s: %s does not name the site: %s", spec,
                     vf_status_name(s), vf_error_message(ctx));
        named |= s != VF_OK && strstr(vf_error_message(ctx), "cpu backend: out of host memory (malloc failed)");
        vf_scope_end(ctx);
        vf_error_clear(ctx);
        assert_int_equal(host_op(H_FOLD, ctx, ctx, NULL, true), VF_OK); /* works once lifted */
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
    if (!named) fail_msg("fold on a fresh context: none of its %lld allocations failing named the host backend's",
                         (long long)n);
    runs += (int)n;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sweep_host_copies),
        cmocka_unit_test(test_sweep_fold_fresh),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fprintf(stderr, "host allocation sweeps: %d runs\n", runs);
    return rc;
}
