/* Profiling: per-kernel records of recorded plans (vf_function_profile),
 * their node coverage against the optimised graph, GPU times against wall
 * time, profiling off / CPU / eager, and the Chrome / Perfetto trace JSON
 * (checked with a small JSON parser). Results of profiled calls are
 * checked against the CPU backend. */
#include "testutil.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a small JSON parser (a DOM, for structure checks) -------------------- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jkind;

typedef struct jval {
    jkind kind;
    double num;
    char *str;                  /* J_STR; also the key of an object member */
    struct jval *items;         /* J_ARR, J_OBJ (members: str is the key) */
    int n;
} jval;

typedef struct jp {
    const char *s;
    bool bad;
} jp;

static void jskip(jp *p)
{
    while (*p->s && isspace((unsigned char)*p->s)) p->s++;
}

static char *jstring(jp *p)
{
    if (*p->s != '"') return p->bad = true, NULL;
    p->s++;
    size_t cap = 16, n = 0;
    char *o = malloc(cap);
    while (*p->s && *p->s != '"') {
        char c = *p->s++;
        if ((unsigned char)c < 0x20) p->bad = true;
        if (c == '\\') {
            char e = *p->s++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!isxdigit((unsigned char)*p->s++)) p->bad = true;
                c = '?';
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else {
                p->bad = true;
                break;
            }
        }
        if (n + 2 > cap) o = realloc(o, cap *= 2);
        o[n++] = c;
    }
    if (*p->s != '"') p->bad = true;
    else p->s++;
    o[n] = '\0';
    return o;
}

static void jparse(jp *p, jval *v, int depth)
{
    memset(v, 0, sizeof *v);
    jskip(p);
    if (depth > 32) {
        p->bad = true;
        return;
    }
    char c = *p->s;
    if (c == '{' || c == '[') {
        v->kind = c == '{' ? J_OBJ : J_ARR;
        p->s++;
        jskip(p);
        if (*p->s == (c == '{' ? '}' : ']')) {
            p->s++;
            return;
        }
        for (;;) {
            v->items = realloc(v->items, sizeof *v->items * (size_t)(v->n + 1));
            jval *it = &v->items[v->n++];
            char *key = NULL;
            if (c == '{') {
                jskip(p);
                key = jstring(p);
                jskip(p);
                if (*p->s != ':') p->bad = true;
                else p->s++;
            }
            jparse(p, it, depth + 1);
            if (c == '{') {
                if (it->kind != J_STR) it->str = key;
                else {
                    /* keep the key; a string value's text moves to num-less str2 via swap */
                    char *val = it->str;
                    it->str = key;
                    it->items = malloc(sizeof *it->items);
                    memset(it->items, 0, sizeof *it->items);
                    it->items[0].kind = J_STR;
                    it->items[0].str = val;
                    it->n = -1; /* a string member: its value is items[0].str */
                }
            }
            jskip(p);
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s == (c == '{' ? '}' : ']')) {
                p->s++;
                return;
            }
            p->bad = true;
            return;
        }
    } else if (c == '"') {
        v->kind = J_STR;
        v->str = jstring(p);
    } else if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "false", 5)) {
        v->kind = J_BOOL;
        v->num = *p->s == 't';
        p->s += *p->s == 't' ? 4 : 5;
    } else if (!strncmp(p->s, "null", 4)) {
        p->s += 4;
    } else {
        char *end;
        v->kind = J_NUM;
        v->num = strtod(p->s, &end);
        if (end == p->s) p->bad = true;
        p->s = end;
    }
}

static void jfree(jval *v)
{
    if (v->n < 0) {
        free(v->items[0].str);
        free(v->items);
        free(v->str);
        return;
    }
    for (int i = 0; i < v->n; i++) jfree(&v->items[i]);
    free(v->items);
    free(v->str);
}

/* Member `key` of object o (NULL if none). */
static const jval *jget(const jval *o, const char *key)
{
    if (!o || o->kind != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (o->items[i].str && !strcmp(o->items[i].str, key)) return &o->items[i];
    return NULL;
}

static const char *jget_str(const jval *o, const char *key)
{
    const jval *v = jget(o, key);
    return v && v->n == -1 ? v->items[0].str : NULL;
}

static bool jparse_text(const char *text, jval *root)
{
    jp p = {text, false};
    jparse(&p, root, 0);
    jskip(&p);
    return !p.bad && *p.s == '\0';
}

static void test_json_parser(void **state)
{
    (void)state;
    jval v;
    assert_true(jparse_text("{\"a\":[1,2.5,-3e2],\"b\":\"x\\\"y\",\"c\":{\"d\":true}}", &v));
    assert_int_equal(jget(&v, "a")->n, 3);
    assert_true(jget(&v, "a")->items[2].num == -300.0);
    assert_string_equal(jget_str(&v, "b"), "x\"y");
    jfree(&v);
    const char *bad[] = {"{\"a\":1,}", "[1 2]", "{\"a\" 1}", "\"open", "{} x", "[1,]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        jval w;
        if (jparse_text(bad[i], &w)) fail_msg("accepted bad JSON: %s", bad[i]);
        jfree(&w);
    }
}

/* ---- helpers --------------------------------------------------------------- */

static vf_context *profiling_context(vf_backend be)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = be, .validation = val && !strcmp(val, "1"), .profile = true};
    vf_context *ctx = NULL;
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "%s\n", ctx ? vf_error_message(ctx) : "");
        vf_context_destroy(ctx);
        fail_msg("could not create a profiling context on backend %d", (int)be);
    }
    return ctx;
}

enum { R = 67, C = 129 }; /* odd sizes */

/* y = reduce_sum(abs(sigmoid(relu(x*k0 + k1) * k2) - k3), axis 1) and z = exp(-x):
   an elementwise DAG, a reduction and a second DAG output. */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], k[0]), k[1]);
    h = vf_abs(ctx, vf_sub(ctx, vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), k[2])), k[3]));
    out[0] = vf_reduce_sum(ctx, h, 1, (int[]){1}, false);
    out[1] = vf_exp(ctx, vf_neg(ctx, in[0]));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

typedef struct run {
    vf_function *fn;
    vf_tensor *k[4], *x;
    float y[R], z[R * C];
} run;

static void run_make(vf_context *ctx, run *r)
{
    static const float kv[4] = {1.5f, 0.25f, 0.9f, 0.5f};
    float *x = malloc(sizeof(float) * R * C);
    vt_fill_uniform(x, R * C, -3.f, 3.f, 7);
    x[5] = NAN, x[6] = INFINITY, x[7] = -INFINITY;
    for (int i = 0; i < 4; i++) r->k[i] = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &kv[i]);
    r->x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, x);
    free(x);
    r->fn = vf_function_create(ctx, &(vf_function_desc){.name = "prof", .body = body, .user = r->k,
                                                        .n_inputs = 1, .n_outputs = 2});
    assert_non_null(r->fn);
}

static void run_call(vf_context *ctx, run *r)
{
    vf_scope_begin(ctx);
    vf_tensor *o[2] = {NULL, NULL};
    if (vf_function_call(r->fn, &r->x, o) != VF_OK) fail_msg("call: %s", vf_error_message(ctx));
    assert_int_equal(vf_tensor_read(o[0], r->y, sizeof r->y), VF_OK);
    assert_int_equal(vf_tensor_read(o[1], r->z, sizeof r->z), VF_OK);
    vf_scope_end(ctx);
}

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
            !strcmp(name, "reshape"))
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
static void check_profile(vf_function *fn, const vf_function_profile *p)
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
    /* a plan begins and ends with a full barrier */
    assert_true(p->barriers >= 2);
    /* every kernel reads x (R*C floats) or a value of that size */
    assert_true(p->bytes_read >= (int64_t)sizeof(float) * R * C);
}

static void cpu_reference(run *want)
{
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    run_make(cpu, want);
    run_call(cpu, want);
    vf_function_destroy(want->fn);
    vt_context_done(cpu);
}

static void check_results(const run *got, const run *want)
{
    vt_assert_close_f32(got->y, want->y, R, 1e-4, 1e-4, "y (profiled) vs cpu");
    vt_assert_close_f32(got->z, want->z, R * C, 1e-6, 1e-5, "z (profiled) vs cpu");
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
    vf_context *ctx = profiling_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
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

/* ---- tests ------------------------------------------------------------------ */

static void test_profile_fused(void **state)
{
    (void)state;
    run want;
    cpu_reference(&want);
    vf_context *ctx = profiling_context(VF_BACKEND_VULKAN);
    assert_true(vf_context_profiling(ctx));
    run r;
    run_make(ctx, &r);
    for (int i = 0; i < 3; i++) run_call(ctx, &r);
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
    run want;
    cpu_reference(&want);
    setenv("VKFUSE_FUSION", "0", 1);
    vf_context *ctx = profiling_context(VF_BACKEND_VULKAN);
    run r;
    run_make(ctx, &r);
    run_call(ctx, &r); /* the plan is built here, unfused */
    unsetenv("VKFUSE_FUSION");
    run_call(ctx, &r);
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
    run r;
    run_make(ctx, &r);
    run_call(ctx, &r);
    run_call(ctx, &r);
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
    run_make(ctx, &r);
    run_call(ctx, &r);
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    check_profile(r.fn, &p);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

static void test_profile_cpu_and_eager(void **state)
{
    (void)state;
    run want;
    cpu_reference(&want);
    vf_context *ctx = profiling_context(VF_BACKEND_CPU);
    run r;
    run_make(ctx, &r);
    run_call(ctx, &r);
    check_results(&r, &want);
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    assert_true(p.profiled);
    assert_false(p.planned);
    assert_false(p.timestamps);
    assert_int_equal(p.n_kernels, 0);
    assert_true(p.wall_ns > 0);
    assert_int_equal(p.call, 1);
    assert_non_null(strstr(p.note, "node by node"));
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
    /* eagerly on Vulkan: wall time only, said so */
    ctx = profiling_context(VF_BACKEND_VULKAN);
    vf_run_functions_eagerly(ctx, true);
    run_make(ctx, &r);
    run_call(ctx, &r);
    check_results(&r, &want);
    assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
    assert_true(p.profiled);
    assert_false(p.planned);
    assert_int_equal(p.n_kernels, 0);
    assert_non_null(strstr(p.note, "eagerly"));
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

/* Two profiled calls as two tracks: the JSON parses, has one thread_name
   and one call event per track and one event per kernel, with ts and dur
   numbers in microseconds that sit inside their call. */
static void test_trace_json(void **state)
{
    (void)state;
    vf_context *ctx = profiling_context(VF_BACKEND_VULKAN);
    run r;
    run_make(ctx, &r);
    vf_trace_file *t = vf_trace_file_create();
    assert_non_null(t);
    int kernels = 0;
    for (int i = 0; i < 2; i++) {
        run_call(ctx, &r);
        vf_function_profile p;
        assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
        assert_int_equal(vf_trace_file_add(t, i ? "second \"call\"" : NULL, &p), VF_OK);
        kernels += p.n_kernels;
    }
    char *json = vf_trace_file_json(t);
    assert_non_null(json);
    jval root;
    if (!jparse_text(json, &root)) fail_msg("the trace is not valid JSON:\n%s", json);
    const jval *ev = jget(&root, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(ev->kind, J_ARR);
    int names = 0, calls = 0, kern = 0;
    double call_ts[3] = {0}, call_end[3] = {0};
    for (int i = 0; i < ev->n; i++) {
        const jval *e = &ev->items[i];
        assert_int_equal(e->kind, J_OBJ);
        const char *ph = jget_str(e, "ph"), *name = jget_str(e, "name"), *cat = jget_str(e, "cat");
        assert_non_null(ph);
        assert_non_null(name);
        const jval *tid = jget(e, "tid"), *pid = jget(e, "pid");
        assert_true(tid && tid->kind == J_NUM && pid && pid->kind == J_NUM);
        if (!strcmp(ph, "M")) {
            if (!strcmp(name, "thread_name")) {
                names++;
                const char *tn = jget_str(jget(e, "args"), "name");
                assert_non_null(tn);
                if (tid->num == 1) assert_string_equal(tn, "call 1");
                if (tid->num == 2) assert_string_equal(tn, "second \"call\"");
            }
            continue;
        }
        assert_string_equal(ph, "X");
        const jval *ts = jget(e, "ts"), *dur = jget(e, "dur");
        assert_true(ts && ts->kind == J_NUM && dur && dur->kind == J_NUM);
        assert_true(ts->num >= 0 && dur->num >= 0);
        int k = (int)tid->num;
        assert_true(k == 1 || k == 2);
        assert_non_null(cat);
        if (!strcmp(cat, "call")) {
            calls++;
            call_ts[k] = ts->num;
            call_end[k] = ts->num + dur->num;
            assert_non_null(jget(jget(e, "args"), "gpu_us"));
        } else {
            assert_string_equal(cat, "kernel");
            kern++;
            const jval *a = jget(e, "args");
            assert_non_null(jget(a, "dispatches"));
            assert_non_null(jget(a, "bytes_read"));
            assert_non_null(strstr(jget_str(a, "nodes"), "%"));
            /* inside its call (calls come before their kernels) */
            assert_true(ts->num >= call_ts[k] - 1e-3 && ts->num + dur->num <= call_end[k] + 1e-3);
        }
    }
    assert_int_equal(names, 2);
    assert_int_equal(calls, 2);
    assert_int_equal(kern, kernels);
    assert_true(call_ts[1] == 0.0); /* relative to the first call */
    assert_true(call_ts[2] >= call_end[1]);
    jfree(&root);
    /* the file holds the same text */
    char path[] = "/tmp/vkfuse_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vf_trace_file_write(t, path), VF_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = strlen(json);
    char *back = calloc(n + 2, 1);
    assert_int_equal(fread(back, 1, n + 1, f), n);
    fclose(f);
    assert_string_equal(back, json);
    free(back);
    remove(path);
    free(json);
    /* a file that cannot be written */
    assert_int_equal(vf_trace_file_write(t, "/nonexistent-dir/x/trace.json"), VF_ERROR_IO);
    assert_non_null(strstr(vf_trace_file_error(t), "/nonexistent-dir/x/trace.json"));
    assert_int_equal(vf_trace_file_write(t, ""), VF_ERROR_INVALID_ARGUMENT);
    vf_trace_file_destroy(t);
    /* an empty trace is valid JSON with no events but the process name */
    t = vf_trace_file_create();
    json = vf_trace_file_json(t);
    assert_true(jparse_text(json, &root));
    assert_int_equal(jget(&root, "traceEvents")->n, 1);
    jfree(&root);
    free(json);
    vf_trace_file_destroy(t);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest cpu_tests[] = {
        cmocka_unit_test(test_json_parser),
    };
    int fails = cmocka_run_group_tests_name("profile_host", cpu_tests, NULL, NULL);
    if (!vt_have_vulkan()) return fails;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_fused),
        cmocka_unit_test(test_profile_unfused),
        cmocka_unit_test(test_profile_off),
        cmocka_unit_test(test_profile_cpu_and_eager),
        cmocka_unit_test(test_trace_json),
        cmocka_unit_test(test_profile_cond),
    };
    return fails + cmocka_run_group_tests_name("profile", tests, NULL, NULL);
}
