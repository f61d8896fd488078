/* Profiling: per-kernel records of recorded plans (vf_function_profile),
 * fused, unfused and a traced vf_cond (guarded dispatches), their node
 * coverage against the optimised graph, GPU times against wall time,
 * profiling off / CPU / eager. Results of profiled calls are checked
 * against the CPU backend. The trace JSON: test_profile_trace.c. */
#include "testutil.h"
#include "profile_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The optimised graph's op nodes, from its text dump: ids[i], names[i]. */
static int graph_ops(vf_function *fn, int *ids, char (*names)[32], int max)
{
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    int n = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int id;
        char name[32];
        if (strncmp(line, "  %", 3) != 0) continue; /* top-level nodes only (branches are indented more) */
        if (sscanf(line, " %%%d = %31[a-z_0-9](", &id, name) != 2) continue;
        if (!strcmp(name, "param") || !strcmp(name, "capture") || !strcmp(name, "const") ||
            !strcmp(name, "reshape") || !strcmp(name, "host")) /* a host node runs no kernel */
            continue;
        assert_true(n < max);
        ids[n] = id;
        snprintf(names[n++], 32, "%s", name);
    }
    free(text);
    return n;
}

/* Every op node of the graph is covered by exactly one kernel, under its
   name; kernels, dispatches and totals agree with the stats. */
/* cpu: the CPU backend's plan, whose kernels run one after another
   without barriers */
static void check_profile_on(vf_function *fn, const vf_function_profile *p, bool cpu)
{
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_true(p->profiled);
    assert_true(p->planned);
    assert_true(st.planned);
    assert_int_equal(p->n_kernels, st.kernels);
    assert_int_equal(p->call, st.calls);
    assert_int_equal(p->peak_bytes, st.peak_bytes);
    int ids[64], seen[64] = {0};
    char names[64][32];
    int n_ops = graph_ops(fn, ids, names, 64);
    assert_true(n_ops > 0);
    int disp = 0;
    uint64_t gpu = 0, last_start = 0;
    int64_t rd = 0, wr = 0;
    for (int i = 0; i < p->n_kernels; i++) {
        const vf_kernel_profile *k = &p->kernels[i];
        assert_non_null(k->name);
        assert_true(strlen(k->name) > 0);
        assert_true(k->dispatches >= 1);
        assert_true(k->n_nodes >= 1);
        assert_true(k->bytes_written > 0);
        /* listed in plan order; recorded level by level, so start_ns may go back */
        if (k->start_ns > last_start) last_start = k->start_ns;
        if (p->timestamps) assert_true(k->gpu_ns > 0);
        for (int j = 0; j < k->n_nodes; j++) {
            int at = -1;
            for (int q = 0; q < n_ops; q++)
                if (ids[q] == k->nodes[j]) at = q;
            if (at < 0) fail_msg("kernel %s covers node %%%d, which is not an op node", k->name, k->nodes[j]);
            assert_string_equal(k->node_ops[j], names[at]);
            seen[at]++;
        }
        disp += k->dispatches;
        gpu += k->gpu_ns;
        rd += k->bytes_read;
        wr += k->bytes_written;
    }
    for (int q = 0; q < n_ops; q++)
        if (seen[q] != 1) fail_msg("op node %%%d (%s) is covered by %d kernels", ids[q], names[q], seen[q]);
    assert_int_equal(disp, p->dispatches);
    assert_int_equal(disp, st.dispatches_per_call);
    assert_true(gpu == p->gpu_ns);
    assert_int_equal(rd, p->bytes_read);
    assert_int_equal(wr, p->bytes_written);
    assert_true(p->wall_ns > 0);
    assert_true(p->gpu_ns <= p->wall_ns);
    if (p->timestamps) assert_true(last_start < p->wall_ns); /* every kernel starts inside the call */
    /* a Vulkan plan begins and ends with a full barrier; the CPU backend's
       kernels run one after another and need none */
    if (cpu) assert_int_equal(p->barriers, 0);
    else assert_true(p->barriers >= 2);
    /* every kernel reads x (VT_PROF_R*VT_PROF_C floats) or a value of that size */
    assert_true(p->bytes_read >= (int64_t)sizeof(float) * VT_PROF_R * VT_PROF_C);
}

static void check_profile(vf_function *fn, const vf_function_profile *p) { check_profile_on(fn, p, false); }

static void cpu_reference(vt_prof_run *want)
{
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    vt_prof_run_make(cpu, want);
    vt_prof_run_call(cpu, want);
    vf_function_destroy(want->fn);
    vt_context_done(cpu);
}

static void check_results(const vt_prof_run *got, const vt_prof_run *want)
{
    vt_assert_close_f32(got->y, want->y, VT_PROF_R, 1e-4, 1e-4, "y (profiled) vs cpu");
    vt_assert_close_f32(got->z, want->z, VT_PROF_R * VT_PROF_C, 1e-6, 1e-5, "z (profiled) vs cpu");
}

/* ---- a traced vf_cond: guarded dispatches ---------------------------------- */

/* then: 40 rounds of x = tanh(x) + 0.25 (too big for a select) */
static vf_status big_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *x = in[0];
    for (int i = 0; i < 40; i++) x = vf_add(ctx, vf_tanh(ctx, x), vf_fill(ctx, VF_F32, 0, NULL, 0.25));
    out[0] = x;
    return x ? VF_OK : vf_status_get(ctx);
}

static vf_status small_else(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 0.5));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = cond(mean(x) > 0, big_then, small_else)(x) * 3 */
static vf_status cond_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0.0));
    vf_tensor *y = NULL;
    vf_status s = vf_cond(ctx, pred, big_then, small_else, 1, in, 1, &y, user);
    if (s != VF_OK) return s;
    out[0] = vf_mul(ctx, y, vf_fill(ctx, VF_F32, 0, NULL, 3.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void cond_call(vf_context *ctx, vf_function *fn, float sign, float *y)
{
    float x[257];
    for (int i = 0; i < 257; i++) x[i] = sign * (0.5f + (float)(i % 7) * 0.1f);
    vf_scope_begin(ctx);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){257}, x), *o = NULL;
    if (vf_function_call(fn, &in, &o) != VF_OK) fail_msg("call: %s", vf_error_message(ctx));
    assert_int_equal(vf_tensor_read(o, y, 257 * sizeof(float)), VF_OK);
    vf_scope_end(ctx);
}

/* The guard and the branches' kernels belong to the COND node; the other
   op nodes are covered once each, the top-level mul by its own kernel. */
static void test_profile_cond(void **state)
{
    (void)state;
    vf_context *ctx = vt_profiling_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    vf_function_desc d = {.name = "cond", .body = cond_body, .n_inputs = 1, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &d), *cfn = vf_function_create(cpu, &d);
    for (int call = 0; call < 2; call++) {
        float got[257], want[257];
        cond_call(ctx, fn, call ? -1.f : 1.f, got);
        cond_call(cpu, cfn, call ? -1.f : 1.f, want);
        vt_assert_close_f32(got, want, 257, 1e-5, 1e-5, "guarded cond (profiled) vs cpu");
        vf_function_profile p;
        vf_function_stats st;
        assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
        assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
        assert_true(p.planned && p.timestamps);
        assert_int_equal(p.n_kernels, st.kernels + 1); /* + the guard */
        int ids[64], seen[64] = {0}, guards = 0, in_cond = 0, cond_id = -1;
        char names[64][32];
        int n_ops = graph_ops(fn, ids, names, 64);
        for (int q = 0; q < n_ops; q++)
            if (!strcmp(names[q], "cond")) cond_id = ids[q];
        assert_true(cond_id >= 0);
        int disp = 0;
        uint64_t gpu = 0;
        for (int i = 0; i < p.n_kernels; i++) {
            const vf_kernel_profile *k = &p.kernels[i];
            disp += k->dispatches;
            gpu += k->gpu_ns;
            assert_int_equal(k->n_nodes >= 1, 1);
            if (!strcmp(k->name, "plan_guard")) guards++;
            if (k->nodes[0] == cond_id) {
                assert_int_equal(k->n_nodes, 1);
                assert_string_equal(k->node_ops[0], "cond");
                in_cond++;
                continue;
            }
            for (int j = 0; j < k->n_nodes; j++)
                for (int q = 0; q < n_ops; q++)
                    if (ids[q] == k->nodes[j]) {
                        assert_string_equal(k->node_ops[j], names[q]);
                        seen[q]++;
                    }
        }
        assert_int_equal(guards, 1);
        assert_true(in_cond >= 40 * 2 + 1); /* both branches are in the plan, and the guard */
        for (int q = 0; q < n_ops; q++)
            if (strcmp(names[q], "cond") && strcmp(names[q], "proj") && seen[q] != 1)
                fail_msg("op node %%%d (%s) covered %d times", ids[q], names[q], seen[q]);
        assert_int_equal(disp, p.dispatches);
        assert_true(gpu == p.gpu_ns && p.gpu_ns <= p.wall_ns);
    }
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

/* ---- a plan split at host nodes: every segment's kernels ------------------ */

enum { SPLIT_N = VT_PROF_R * VT_PROF_C }; /* check_profile's least bytes read */

static vf_status add_half(void *user, vf_dtype dt, int64_t n, void *data, char *msg, size_t len)
{
    (void)user, (void)msg, (void)len;
    for (int64_t i = 0; dt == VF_F32 && i < n; i++) ((float *)data)[i] += 0.5f;
    return VF_OK;
}

/* y = host(host(tanh(x) * 2) + 1) * 3 - x, s = sum(x * x): four
   segments, each with kernels (what the first host needs, the
   independent sum, what the second needs, the rest) */
static vf_status split_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *a = vf_host_map(ctx, vf_mul(ctx, vf_tanh(ctx, in[0]), vt_scalar(ctx, 2)), add_half, user, "first");
    vf_tensor *b = vf_host_map(ctx, vf_add(ctx, vf_exp(ctx, a), vt_scalar(ctx, 1)), add_half, user, "second");
    out[0] = vf_sub(ctx, vf_mul(ctx, b, vt_scalar(ctx, 3)), in[0]);
    out[1] = vf_reduce_sum(ctx, vf_mul(ctx, in[0], in[0]), 0, NULL, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static void split_call(vf_context *ctx, vf_function *fn, float *y, float *sum)
{
    float x[SPLIT_N];
    for (int i = 0; i < SPLIT_N; i++) x[i] = (float)(i % 9) * 0.25f - 1.0f;
    vf_scope_begin(ctx);
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){SPLIT_N}, x), *o[2] = {NULL, NULL};
    if (vf_function_call(fn, &in, o) != VF_OK) fail_msg("call: %s", vf_error_message(ctx));
    assert_int_equal(vf_tensor_read(o[0], y, SPLIT_N * sizeof(float)), VF_OK);
    assert_int_equal(vf_tensor_read(o[1], sum, sizeof(float)), VF_OK);
    vf_scope_end(ctx);
}

/* The profile of a split call holds the kernels of every segment (not
   only the last plan run), on one time line. */
static void test_profile_split(void **state)
{
    (void)state;
    vf_context *ctx = vt_profiling_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    vf_function_desc d = {.name = "split", .body = split_body, .n_inputs = 1, .n_outputs = 2};
    vf_function *fn = vf_function_create(ctx, &d), *cfn = vf_function_create(cpu, &d);
    for (int call = 0; call < 2; call++) {
        float got[SPLIT_N], want[SPLIT_N], gs, ws;
        split_call(ctx, fn, got, &gs);
        split_call(cpu, cfn, want, &ws);
        vt_assert_close_f32(got, want, SPLIT_N, 1e-5, 1e-5, "split plan (profiled) vs cpu");
        vt_assert_close_f32(&gs, &ws, 1, 1e-5, 1e-5, "independent sum (profiled) vs cpu");
        vf_function_stats st;
        assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
        assert_int_equal(st.submits_per_call, 4); /* split: four plans ran */
        vf_function_profile p;
        assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
        check_profile(fn, &p); /* every op node, in whichever segment, covered once */
        assert_true(p.timestamps);
        /* the segments' kernels are on one time line: the one reading the
           second host's result starts after the one feeding the first */
        uint64_t first_end = 0, last_start = 0;
        for (int i = 0; i < p.n_kernels; i++)
            for (int j = 0; j < p.kernels[i].n_nodes; j++) {
                if (!strcmp(p.kernels[i].node_ops[j], "tanh")) first_end = p.kernels[i].start_ns + p.kernels[i].gpu_ns;
                if (!strcmp(p.kernels[i].node_ops[j], "sub")) last_start = p.kernels[i].start_ns;
            }
        assert_true(first_end > 0 && last_start >= first_end);
    }
    vf_function_destroy(fn);
    vf_function_destroy(cfn);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_profile_fused(void **state)
{
    (void)state;
    vt_prof_run want;
    cpu_reference(&want);
    vf_context *ctx = vt_profiling_context(VF_BACKEND_VULKAN);
    assert_true(vf_context_profiling(ctx));
    vt_prof_run r;
    vt_prof_run_make(ctx, &r);
    for (int i = 0; i < 3; i++) vt_prof_run_call(ctx, &r);
    check_results(&r, &want);
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    check_profile(r.fn, &p);
    /* lavapipe has timestamps on its compute queue */
    assert_true(p.timestamps);
    assert_string_equal(p.note, "");
    /* fused: fewer kernels than op nodes, some kernel covers several */
    int ids[64], most = 0;
    char names[64][32];
    int n_ops = graph_ops(r.fn, ids, names, 64);
    for (int i = 0; i < p.n_kernels; i++)
        if (p.kernels[i].n_nodes > most) most = p.kernels[i].n_nodes;
    assert_true(p.n_kernels < n_ops);
    assert_true(most >= 5);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

static void test_profile_unfused(void **state)
{
    (void)state;
    vt_prof_run want;
    cpu_reference(&want);
    setenv("VKFUSE_FUSION", "0", 1);
    vf_context *ctx = vt_profiling_context(VF_BACKEND_VULKAN);
    vt_prof_run r;
    vt_prof_run_make(ctx, &r);
    vt_prof_run_call(ctx, &r); /* the plan is built here, unfused */
    unsetenv("VKFUSE_FUSION");
    vt_prof_run_call(ctx, &r);
    check_results(&r, &want);
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    check_profile(r.fn, &p);
    int ids[64];
    char names[64][32];
    int n_ops = graph_ops(r.fn, ids, names, 64);
    assert_int_equal(p.n_kernels, n_ops); /* one kernel per op, one node each (check_profile: each once) */
    for (int i = 0; i < p.n_kernels; i++) {
        assert_int_equal(p.kernels[i].n_nodes, 1);
        bool op = false;
        for (int q = 0; q < n_ops; q++) op = op || p.kernels[i].nodes[0] == ids[q];
        assert_true(op);
    }
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

static void test_profile_off(void **state)
{
    (void)state;
    unsetenv("VKFUSE_PROFILE");
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    assert_false(vf_context_profiling(ctx));
    vt_prof_run r;
    vt_prof_run_make(ctx, &r);
    vt_prof_run_call(ctx, &r);
    vt_prof_run_call(ctx, &r);
    vf_function_profile p;
    memset(&p, 0xab, sizeof p);
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    assert_false(p.profiled);
    assert_false(p.planned);
    assert_int_equal(p.n_kernels, 0);
    assert_null(p.kernels);
    assert_true(p.wall_ns == 0 && p.gpu_ns == 0);
    assert_non_null(strstr(p.note, "VKFUSE_PROFILE=1"));
    /* a trace refuses it */
    vf_trace_file *t = vf_trace_file_create();
    assert_int_equal(vf_trace_file_add(t, "x", &p), VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vf_trace_file_error(t), "not profiled"));
    vf_trace_file_destroy(t);
    /* bad arguments */
    assert_int_equal(vf_function_profile_get(NULL, &p), VF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(vf_function_profile_get(r.fn, NULL), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_profile_get", NULL);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
    /* VKFUSE_PROFILE=1 turns it on without the desc */
    setenv("VKFUSE_PROFILE", "1", 1);
    ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_PROFILE");
    assert_true(vf_context_profiling(ctx));
    vt_prof_run_make(ctx, &r);
    vt_prof_run_call(ctx, &r);
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    check_profile(r.fn, &p);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

static void test_profile_cpu_and_eager(void **state)
{
    (void)state;
    vt_prof_run want;
    cpu_reference(&want);
    vf_context *ctx = vt_profiling_context(VF_BACKEND_CPU);
    vt_prof_run r;
    vt_prof_run_make(ctx, &r);
    vt_prof_run_call(ctx, &r);
    check_results(&r, &want);
    vf_function_profile p;
    /* the CPU backend runs a plan too: its kernels with wall-clock times */
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    check_profile_on(r.fn, &p, true);
    assert_true(p.timestamps);
    assert_int_equal(p.call, 1);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
    /* eagerly on Vulkan: wall time only, said so */
    ctx = vt_profiling_context(VF_BACKEND_VULKAN);
    vf_run_functions_eagerly(ctx, true);
    vt_prof_run_make(ctx, &r);
    vt_prof_run_call(ctx, &r);
    check_results(&r, &want);
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    assert_true(p.profiled);
    assert_false(p.planned);
    assert_int_equal(p.n_kernels, 0);
    assert_non_null(strstr(p.note, "eagerly"));
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

int main(void)
{
    if (!vt_have_vulkan()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_fused),
        cmocka_unit_test(test_profile_unfused),
        cmocka_unit_test(test_profile_off),
        cmocka_unit_test(test_profile_cpu_and_eager),
        cmocka_unit_test(test_profile_cond),
        cmocka_unit_test(test_profile_split),
    };
    return cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
