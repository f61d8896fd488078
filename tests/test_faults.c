/* Faults from below (issue 15): VKFUSE_FAULT's spec, device loss, the
 * injected timeout, the device memory limit, and the sweeps: for a
 * workload (context creation, the demo's eager program, a traced train
 * step's first and a later call, save and load, a profile), each run
 * starting with cold caches (fresh contexts with empty private cache
 * directories, so shaderc, pipeline creation and the disk cache are
 * reached in every workload), the number of calls each fault site makes is
 * counted (VKFUSE_FAULT_COUNT's counters),
 * then the workload is run again with the N-th call at that site failing.
 * Every run must end with VF_OK or an error whose message names the site,
 * and once the fault is lifted the same context (unless its device was
 * lost) must compute the right answer, against a double-precision host
 * reference. Under the asan preset LeakSanitizer checks that nothing
 * leaked at exit.
 *
 * The faults are set in-process through the test hook vf_fault_set
 * (util/fault.h). Which N run: each site's first and last call and a few
 * evenly spaced between, within a time budget (VKFUSE_FAULT_BUDGET=<s>,
 * default 15 s, 6 s under ASan); VKFUSE_FAULT_SWEEP=full runs every N of
 * every site without a budget (docs/TESTING.md). */
#include "child.h"
#include "faults_common.h"
#include "testutil.h"
#include "util/fault.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- the spec ---------------------------------------------------------------- */

static void expect_bad_spec(const char *spec, const char *why)
{
    vf_err e = {0};
    assert_int_equal(vf_fault_set(spec, false, &e), VF_ERROR_INVALID_ARGUMENT);
    if (!strstr(e.message, why) || !strstr(e.message, "VKFUSE_FAULT=") || !strstr(e.message, "SITE:N[:KIND]"))
        fail_msg("VKFUSE_FAULT=%s: message \"%s\" lacks \"%s\"", spec, e.message, why);
}

static void test_spec(void **state)
{
    (void)state;
    expect_bad_spec("vkQueueSubmitt:1", "names no fault site");
    expect_bad_spec("vkQueueSubmit", "has no ':N'");
    expect_bad_spec("vkQueueSubmit:0", "N >= 1");
    expect_bad_spec("vkQueueSubmit:x", "N >= 1");
    expect_bad_spec("vkQueueSubmit:3x", "junk after the call number");
    expect_bad_spec("vkQueueSubmit:3:lost", "names no fault kind");
    expect_bad_spec("shaderc:1:device_lost", "cannot have");
    expect_bad_spec("vkQueueSubmit:1:timeout", "cannot have");
    expect_bad_spec("malloc:2,,shaderc:1", "empty entry");
    vf_err e = {0};
    assert_int_equal(vf_fault_set("vkQueueSubmit:3+:device_lost,malloc:5,shaderc:1:oom_host,"
                                  "vkWaitForFences:2:timeout,cache_write:1",
                                  true, &e), VF_OK);
    /* counting: N-th call and N+ */
    for (int i = 1; i <= 6; i++) {
        vf_fault_kind k = vf_fault_hit(VF_FAULT_vkQueueSubmit);
        assert_int_equal(k, i >= 3 ? VF_FAULT_DEVICE_LOST : VF_FAULT_KIND_NONE);
    }
    assert_int_equal(vf_fault_count(VF_FAULT_vkQueueSubmit), 6);
    vt_fault_set(NULL, false);
    assert_int_equal(vf_fault_count(VF_FAULT_vkQueueSubmit), 0);
    assert_false(vf_fault_armed());
}

/* A malformed VKFUSE_FAULT fails context creation, saying what is wrong
   (a child: the environment is read once per process). */
static void bad_env_child(vf_backend be)
{
    setenv("VKFUSE_FAULT", "vkAllocateMemory:two", 1);
    vf_context_desc d = {.backend = be};
    vf_context *ctx = NULL;
    VT_CHECK(vf_context_create(&d, &ctx) == VF_ERROR_INVALID_ARGUMENT);
    VT_CHECK(strstr(vf_error_message(ctx), "VKFUSE_FAULT=vkAllocateMemory:two") != NULL);
    vf_context_destroy(ctx);
}

static void test_bad_env(void **state)
{
    (void)state;
    assert_true(vt_child_run("VKFUSE_FAULT malformed", bad_env_child, VF_BACKEND_CPU, 60));
}

/* ---- workloads ---------------------------------------------------------------- */

enum { DX = 784, DY = 10, TB = 8, TI = 4, TO = 2 };

typedef struct fx {
    float x[DX], w[DX * DY], b[DY];
    double probs[DY];              /* the demo's reference */
    float tx[TB * TI], ty[TB * TO], tw0[TI * TO];
    double loss0, tw1[TI * TO];    /* the train step's reference: loss at tw0, w after one step */
    double loss1;                  /* loss at tw1 (a later call) */
    char path[256];                /* save / load */
} fx;

static fx F;

static void fx_init(void)
{
    vt_fill_uniform(F.x, DX, -1, 1, 1);
    vt_fill_uniform(F.w, DX * DY, -0.1f, 0.1f, 2);
    vt_fill_uniform(F.b, DY, -1, 1, 3);
    double logit[DY], mx = -1e300, sum = 0;
    for (int j = 0; j < DY; j++) {
        logit[j] = F.b[j];
        for (int i = 0; i < DX; i++) logit[j] += (double)F.x[i] * F.w[i * DY + j];
        if (logit[j] > mx) mx = logit[j];
    }
    for (int j = 0; j < DY; j++) sum += exp(logit[j] - mx);
    for (int j = 0; j < DY; j++) F.probs[j] = exp(logit[j] - mx) / sum;
    vt_fill_uniform(F.tx, TB * TI, -1, 1, 4);
    vt_fill_uniform(F.ty, TB * TO, -1, 1, 5);
    vt_fill_uniform(F.tw0, TI * TO, -1, 1, 6);
    /* loss = mean((x w - y)^2); dw = 2/(B*O) x^T (x w - y); w1 = w - 0.1 dw */
    double w[TI * TO], g[TI * TO];
    for (int i = 0; i < TI * TO; i++) w[i] = F.tw0[i];
    for (int step = 0; step < 2; step++) {
        double loss = 0;
        memset(g, 0, sizeof g);
        for (int r = 0; r < TB; r++)
            for (int o = 0; o < TO; o++) {
                double p = -F.ty[r * TO + o];
                for (int i = 0; i < TI; i++) p += (double)F.tx[r * TI + i] * w[i * TO + o];
                loss += p * p;
                for (int i = 0; i < TI; i++) g[i * TO + o] += 2.0 * p * F.tx[r * TI + i] / (TB * TO);
            }
        loss /= TB * TO;
        if (step == 0) F.loss0 = loss;
        else F.loss1 = loss;
        for (int i = 0; i < TI * TO; i++) w[i] -= 0.1 * g[i];
        if (step == 0)
            for (int i = 0; i < TI * TO; i++) F.tw1[i] = w[i];
    }
    snprintf(F.path, sizeof F.path, "%s/vkfuse_faults_%d.vfm", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
}

/* The demo's eager program: softmax(x @ w + b); reads it and compares. */
static vf_status eager_demo(vf_context *ctx, bool check)
{
    int64_t sx[2] = {1, DX}, sw[2] = {DX, DY}, sb[1] = {DY};
    vf_scope_begin(ctx);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, sx, F.x);
    vf_tensor *w = vf_tensor_from_host(ctx, VF_F32, 2, sw, F.w);
    vf_tensor *b = vf_tensor_from_host(ctx, VF_F32, 1, sb, F.b);
    vf_tensor *p = vf_softmax(ctx, vf_add(ctx, vf_matmul(ctx, x, w), b), -1);
    float got[DY];
    vf_status s = p ? vf_tensor_read(p, got, sizeof got) : vf_status_get(ctx);
    vf_scope_end(ctx);
    if (s == VF_OK) s = vf_status_get(ctx);
    if (s == VF_OK && check)
        for (int j = 0; j < DY; j++)
            if (fabs(got[j] - F.probs[j]) > 1e-5) fail_msg("demo: probs[%d] = %g, want %g", j, got[j], F.probs[j]);
    return s;
}

static vf_status train_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *w = *(vf_tensor **)user;
    vf_tape *t = vf_tape_begin(ctx);
    vf_tensor *d = vf_sub(ctx, vf_matmul(ctx, in[0], w), in[1]);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_mul(ctx, d, d), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status s = loss ? vf_tape_gradient(t, loss, 1, &w, &g) : vf_status_get(ctx);
    vf_tape_end(t);
    if (s) return s;
    s = vf_assign_sub(w, vf_mul(ctx, g, vf_fill(ctx, VF_F32, 0, NULL, 0.1)));
    out[0] = loss;
    return s;
}

typedef struct train {
    vf_tensor *w;
    vf_function *fn;
} train;

static vf_status train_make(vf_context *ctx, train *t)
{
    int64_t sw[2] = {TI, TO};
    t->w = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, sw, F.tw0));
    vf_function_desc fd = {.name = "train_step", .body = train_body, .user = &t->w, .n_inputs = 2, .n_outputs = 1};
    t->fn = t->w ? vf_function_create(ctx, &fd) : NULL;
    return t->fn ? VF_OK : vf_status_get(ctx);
}

/* One call from w = tw0 (reset first when reset): the loss and the new w
   against the reference. */
static vf_status train_call(vf_context *ctx, vf_function *fn, vf_tensor *w, bool reset, bool check)
{
    int64_t sx[2] = {TB, TI}, sy[2] = {TB, TO}, sw[2] = {TI, TO};
    vf_scope_begin(ctx);
    vf_status s = VF_OK;
    if (reset) s = vf_assign(w, vf_tensor_from_host(ctx, VF_F32, 2, sw, F.tw0));
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, sx, F.tx), vf_tensor_from_host(ctx, VF_F32, 2, sy, F.ty)};
    vf_tensor *out[1] = {NULL};
    if (!s) s = vf_function_call(fn, in, out);
    float loss = 0, nw[TI * TO];
    if (!s) s = vf_tensor_read(out[0], &loss, sizeof loss);
    if (!s) s = vf_tensor_read(w, nw, sizeof nw);
    vf_scope_end(ctx);
    if (s == VF_OK) s = vf_status_get(ctx);
    if (s == VF_OK && check) {
        if (fabs(loss - F.loss0) > 1e-5 * (1 + F.loss0)) fail_msg("train: loss %g, want %g", loss, F.loss0);
        for (int i = 0; i < TI * TO; i++)
            if (fabs(nw[i] - F.tw1[i]) > 1e-5) fail_msg("train: w[%d] = %g, want %g", i, nw[i], F.tw1[i]);
    }
    return s;
}

/* ---- the sweep harness ------------------------------------------------------- */

typedef enum { W_CREATE, W_EAGER, W_TRAIN_FIRST, W_TRAIN_LATER, W_SAVE_LOAD, W_PROFILE, W_N } workload;
static const char *const wl_names[W_N] = {"context creation", "eager demo", "train step, first call",
                                          "train step, later call", "save and load", "profile"};

/* What a run keeps between the fault window and the check after it. */
typedef struct run {
    vf_context *ctx;
    train t;
    vf_context *ctx2;       /* save and load: the context the function is loaded into */
    vf_function *loaded;    /* ... in ctx2 */
    char dir[2][128];       /* private disk caches (cold), removed after the run */
} run;

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

/* A new empty cache directory of r's: every run starts with cold caches,
   in memory (a fresh context) and on disk (a directory nothing wrote to),
   so that a run reaches shaderc, pipeline creation and the disk cache's
   reads and writes as a first run on a new machine does. */
static const char *cold_dir(run *r, int i)
{
    snprintf(r->dir[i], sizeof r->dir[i], "%s/vkfuse_faults_XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(r->dir[i]));
    return r->dir[i];
}

/* Before the fault window: what the workload needs but does not measure. */
static void prepare(workload wl, run *r)
{
    memset(r, 0, sizeof *r);
    vf_status s = VF_OK;
    if (wl == W_CREATE) return;
    r->ctx = vt_fault_context(cold_dir(r, 0), wl == W_PROFILE, 0, &s);
    assert_int_equal(s, VF_OK);
    if (wl >= W_TRAIN_FIRST) assert_int_equal(train_make(r->ctx, &r->t), VF_OK);
    /* a later call and the function saved: after a first call (whose
       kernels the later one finds compiled: that is what a later call is) */
    if (wl == W_TRAIN_LATER || wl == W_SAVE_LOAD)
        assert_int_equal(train_call(r->ctx, r->t.fn, r->t.w, false, true), VF_OK);
    /* loaded into another context, with caches of its own: the load
       compiles every kernel again, as in a new process */
    if (wl == W_SAVE_LOAD) {
        r->ctx2 = vt_fault_context(cold_dir(r, 1), false, 0, &s);
        assert_int_equal(s, VF_OK);
    }
}

/* The fault window. */
static vf_status window(workload wl, run *r)
{
    vf_status s = VF_OK;
    switch (wl) {
    case W_CREATE: {
        r->ctx = vt_fault_context(cold_dir(r, 0), false, 0, &s);
        if (!s) s = eager_demo(r->ctx, false);
        return s;
    }
    case W_EAGER: return eager_demo(r->ctx, false);
    case W_TRAIN_FIRST: return train_call(r->ctx, r->t.fn, r->t.w, false, false);
    case W_TRAIN_LATER: return train_call(r->ctx, r->t.fn, r->t.w, true, false);
    case W_SAVE_LOAD:
        s = vf_function_save(r->t.fn, F.path);
        if (s) return s;
        s = vf_function_load(r->ctx2, F.path, &r->loaded);
        if (!s) s = train_call(r->ctx2, r->loaded, vf_function_variable(r->loaded, 0), true, false);
        /* the loaded function's errors are ctx2's: the status says where */
        return s;
    case W_PROFILE: {
        /* the first call of a profiled context: its kernels are compiled
           and its batches timed in the window */
        s = train_call(r->ctx, r->t.fn, r->t.w, false, false);
        vf_function_profile p;
        if (!s) s = vf_function_profile_get(r->t.fn, &p);
        if (!s && !p.profiled) fail_msg("profile: the call was not profiled");
        return s;
    }
    default: return VF_ERROR_INVALID_ARGUMENT;
    }
}

/* One context after the window, the fault lifted: if not lost, it
   computes the right answer (the demo, then fn when given); a lost one
   refuses at once. */
static void check_after(workload wl, vf_context *ctx, vf_function *fn, vf_tensor *w, const char *spec)
{
    if (!ctx) return;
    if (vf_backend_get(ctx) != VF_BACKEND_VULKAN) {
        /* creation failed: the context only says why */
        assert_int_not_equal(vf_status_get(ctx), VF_OK);
    } else if (!vf_context_lost(ctx)) {
        vf_error_clear(ctx);
        vf_status s = eager_demo(ctx, true);
        if (s == VF_OK && fn) s = train_call(ctx, fn, w, true, true);
        if (s != VF_OK)
            fail_msg("%s, VKFUSE_FAULT=%s lifted: the context fails: %s", wl_names[wl], spec, vf_error_message(ctx));
    } else {
        vf_error_clear(ctx);
        assert_int_equal(eager_demo(ctx, false), VF_ERROR_DEVICE);
        assert_non_null(strstr(vf_error_message(ctx), "create a new context"));
    }
}

/* After the window, the fault lifted: every context of the run checked,
   then everything goes. */
static void after(workload wl, run *r, const char *spec)
{
    check_after(wl, r->ctx, r->t.fn, r->t.w, spec);
    check_after(wl, r->ctx2, r->loaded, r->loaded ? vf_function_variable(r->loaded, 0) : NULL, spec);
    if (r->loaded) vf_function_destroy(r->loaded);
    if (r->t.fn) vf_function_destroy(r->t.fn);
    vf_context_destroy(r->ctx2);
    vf_context_destroy(r->ctx);
    unlink(F.path);
    for (int i = 0; i < 2; i++)
        if (r->dir[i][0]) nftw(r->dir[i], rm_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* The site's name as a message must show it: the function's name for
   Vulkan, "malloc" for host memory, "shaderc" for a compile. */
static const char *site_word(vf_fault_site site)
{
    return site == VF_FAULT_malloc ? "malloc" : vf_fault_site_name(site);
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool full_sweep(void)
{
    const char *v = getenv("VKFUSE_FAULT_SWEEP");
    return v && strcmp(v, "full") == 0;
}

static double budget_s(void)
{
    const char *v = getenv("VKFUSE_FAULT_BUDGET");
    if (v && *v) return atof(v);
#if defined(__SANITIZE_ADDRESS__)
    return 6.0;
#else
    return 15.0;
#endif
}

static int runs_done, runs_failed_ok;

static void sweep_one(workload wl, vf_fault_site site, int64_t n)
{
    char spec[96];
    snprintf(spec, sizeof spec, "%s:%lld", vf_fault_site_name(site), (long long)n);
    run r;
    if (full_sweep()) fprintf(stderr, "%s: VKFUSE_FAULT=%s\n", wl_names[wl], spec); /* what a crash was in */
    prepare(wl, &r);
    vt_fault_set(spec, false);
    vf_status s = window(wl, &r);
    vt_fault_set(NULL, false);
    /* the message is where the failure was: the loading context's, else
       the run's own */
    const char *msg = r.ctx2 && vf_status_get(r.ctx2) ? vf_error_message(r.ctx2)
                      : r.ctx                          ? vf_error_message(r.ctx)
                                                       : vf_last_error(); /* a failed vf_context_create */
    /* vf_context_create's first allocation failing says only "out of host
       memory": nothing existed yet to name the site */
    bool no_ctx_oom = !r.ctx && s == VF_ERROR_OUT_OF_MEMORY && site == VF_FAULT_malloc;
    if (s != VF_OK && !no_ctx_oom && !strstr(msg, site_word(site)))
        fail_msg("%s, VKFUSE_FAULT=%s: %s does not name the site: %s", wl_names[wl], spec, vf_status_name(s), msg);
    runs_done++;
    runs_failed_ok += s != VF_OK;
    after(wl, &r, spec);
}

/* The N to run of a site called `count` times: all of them (full), else
   the first, the last and up to `k - 2` evenly spaced between. */
static int pick(int64_t count, int k, int64_t *out)
{
    int n = 0;
    if (full_sweep() || count <= k) {
        for (int64_t i = 1; i <= count; i++) out[n++] = i;
        return n;
    }
    for (int i = 0; i < k; i++) out[n++] = 1 + (count - 1) * i / (k - 1);
    return n;
}

static int64_t counts[W_N][VF_FAULT_N_SITES];

static void count_calls(workload wl)
{
    run r;
    prepare(wl, &r);
    vt_fault_set(NULL, true);
    assert_int_equal(window(wl, &r), VF_OK);
    for (int s = 0; s < VF_FAULT_N_SITES; s++) counts[wl][s] = vf_fault_count((vf_fault_site)s);
    vt_fault_set(NULL, false);
    after(wl, &r, "(none)");
}

/* Runs workload wl against its sites, round by round (round i: the i-th
   picked N of every site), until the picks or the time share run out. */
static void sweep(workload wl, double share_s)
{
    if (!vt_have_vulkan()) return;
    fx_init();
    count_calls(wl);
    static int64_t picks[VF_FAULT_N_SITES][4096];
    int n_picks[VF_FAULT_N_SITES], most = 0;
    for (int s = 0; s < VF_FAULT_N_SITES; s++) {
        int64_t c = counts[wl][s] > 4096 ? 4096 : counts[wl][s];
        n_picks[s] = pick(c, 4, picks[s]);
        if (n_picks[s] > most) most = n_picks[s];
    }
    if (full_sweep()) {
        fprintf(stderr, "%s: calls per site:", wl_names[wl]);
        for (int s = 0; s < VF_FAULT_N_SITES; s++)
            if (counts[wl][s]) fprintf(stderr, " %s %lld", vf_fault_site_name((vf_fault_site)s), (long long)counts[wl][s]);
        fprintf(stderr, "\n");
    }
    double t0 = now_s();
    int before = runs_done;
    /* Round 0 starts at a different site for each workload, so that a
       budget that ends within the first round still covers different
       sites in different workloads. */
    int first = (int)wl * VF_FAULT_N_SITES / W_N;
    for (int round = 0; round < most; round++)
        for (int i = 0; i < VF_FAULT_N_SITES; i++) {
            int s = (first + i) % VF_FAULT_N_SITES;
            if (round >= n_picks[s]) continue;
            if (!full_sweep() && now_s() - t0 > share_s) goto out;
            sweep_one(wl, (vf_fault_site)s, picks[s][round]);
        }
out:
    fprintf(stderr, "%s: %d runs in %.1f s\n", wl_names[wl], runs_done - before, now_s() - t0);
}

static void test_sweep_create(void **state) { (void)state; sweep(W_CREATE, budget_s() * 0.25); }
static void test_sweep_eager(void **state) { (void)state; sweep(W_EAGER, budget_s() * 0.15); }
static void test_sweep_train_first(void **state) { (void)state; sweep(W_TRAIN_FIRST, budget_s() * 0.2); }
static void test_sweep_train_later(void **state) { (void)state; sweep(W_TRAIN_LATER, budget_s() * 0.15); }
static void test_sweep_save_load(void **state) { (void)state; sweep(W_SAVE_LOAD, budget_s() * 0.15); }
static void test_sweep_profile(void **state) { (void)state; sweep(W_PROFILE, budget_s() * 0.1); }

/* ---- device loss, timeout, memory limit --------------------------------------- */

/* A loss found by any call (here the first submit, then a later fence
   wait in a traced call): the context is lost, every later call fails at
   once naming it, destroy frees everything, and a new context works. */
static void test_device_lost(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    fx_init();
    const char *specs[] = {"vkQueueSubmit:1:device_lost", "vkWaitForFences:1", "vkCreateComputePipelines:1:device_lost"};
    const char *during[] = {"lost during vkQueueSubmit", "lost during vkWaitForFences", "vkCreateComputePipelines"};
    for (int i = 0; i < 3; i++) {
        vf_status s;
        vf_context *ctx = vt_fault_context(NULL, false, 0, &s);
        assert_int_equal(s, VF_OK);
        train t;
        assert_int_equal(train_make(ctx, &t), VF_OK);
        /* the fence wait's loss in the traced call: the demo runs before
           (how many waits it makes depends on timing: a batch found done
           by a fence poll is not waited for) */
        if (i == 1) assert_int_equal(eager_demo(ctx, true), VF_OK);
        vt_fault_set(specs[i], false);
        s = i == 1 ? VF_OK : eager_demo(ctx, false);
        if (s == VF_OK) s = train_call(ctx, t.fn, t.w, false, false);
        vt_fault_set(NULL, false);
        assert_int_equal(s, VF_ERROR_DEVICE);
        if (!strstr(vf_error_message(ctx), during[i]) || !strstr(vf_error_message(ctx), "lost during"))
            fail_msg("%s: %s", specs[i], vf_error_message(ctx));
        assert_true(vf_context_lost(ctx));
        for (int k = 0; k < 2; k++) { /* at once, eager and traced */
            vf_error_clear(ctx);
            s = k == 0 ? eager_demo(ctx, false) : train_call(ctx, t.fn, t.w, false, false);
            assert_int_equal(s, VF_ERROR_DEVICE);
            assert_non_null(strstr(vf_error_message(ctx), during[i]));
            assert_non_null(strstr(vf_error_message(ctx), "create a new context"));
        }
        vf_error_clear(ctx);
        assert_int_equal(vf_context_sync(ctx), VF_ERROR_DEVICE);
        vf_function_destroy(t.fn);
        vf_context_destroy(ctx);
        /* the same process: a new Vulkan context, and a CPU one */
        ctx = vt_fault_context(NULL, false, 0, &s);
        assert_int_equal(s, VF_OK);
        assert_false(vf_context_lost(ctx));
        assert_int_equal(eager_demo(ctx, true), VF_OK);
        vf_context_destroy(ctx);
    }
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    assert_int_equal(eager_demo(cpu, true), VF_OK);
    assert_false(vf_context_lost(cpu));
    vt_context_done(cpu);
}

/* A fence wait that times out (injected VK_TIMEOUT: lavapipe ends every
   dispatch by its loop limit, so a real hang cannot be made; the real
   timeout is test_context's test_timeout) loses the context. */
static void test_timeout_injected(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    fx_init();
    vf_status s;
    vf_context *ctx = vt_fault_context(NULL, false, 0, &s);
    assert_int_equal(s, VF_OK);
    /* A read waits with vkWaitForFences only while its batch is still in
       flight: one the scheduler already saw finished (vkGetFenceStatus)
       needs no wait, and the armed fault then never fires. On a busy
       machine that happens now and then: try again until a wait happened. */
    s = VF_OK;
    for (int tries = 0; tries < 50 && s == VF_OK; tries++) {
        vt_fault_set("vkWaitForFences:1:timeout", false);
        s = eager_demo(ctx, false);
        vt_fault_set(NULL, false);
    }
    assert_int_equal(s, VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "timed out after 120000 ms in vkWaitForFences"));
    assert_true(vf_context_lost(ctx));
    vf_error_clear(ctx);
    assert_int_equal(eager_demo(ctx, false), VF_ERROR_DEVICE);
    assert_non_null(strstr(vf_error_message(ctx), "lost during vkWaitForFences (a command batch timed out"));
    vf_context_destroy(ctx);
}

/* desc.device_memory_limit (and VKFUSE_DEVICE_MEMORY_LIMIT): past it an
   allocation fails naming the request, what is in use and the limit; the
   context stays usable once tensors are freed. */
static void test_memory_limit(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    fx_init();
    const int64_t limit = 8 << 20;
    vf_status s;
    vf_context *ctx = vt_fault_context(NULL, false, limit, &s);
    assert_int_equal(s, VF_OK);
    int64_t shape[1] = {(1 << 20) / 4 * 3}; /* 3 MiB */
    vf_scope_begin(ctx);
    int made = 0;
    for (int i = 0; i < 8; i++) {
        vf_tensor *t = vf_fill(ctx, VF_F32, 1, shape, 1.0);
        if (!t) break;
        made++;
    }
    assert_true(made >= 1 && made < 3);
    assert_int_equal(vf_status_get(ctx), VF_ERROR_OUT_OF_MEMORY);
    const char *msg = vf_error_message(ctx);
    char num[32];
    snprintf(num, sizeof num, "%lld bytes", (long long)limit);
    assert_non_null(strstr(msg, "3145728 bytes"));           /* the request */
    assert_non_null(strstr(msg, "limit of"));
    assert_non_null(strstr(msg, num));
    assert_non_null(strstr(msg, "in use by live tensors"));
    vf_scope_end(ctx);
    vf_error_clear(ctx);
    assert_false(vf_context_lost(ctx));
    assert_int_equal(eager_demo(ctx, true), VF_OK);
    vf_context_stats st;
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_true(st.device_bytes_reserved <= limit);
    vf_context_destroy(ctx);
    /* the environment's, and a bad one */
    setenv("VKFUSE_DEVICE_MEMORY_LIMIT", "2M", 1);
    ctx = vt_fault_context(NULL, false, 0, &s);
    unsetenv("VKFUSE_DEVICE_MEMORY_LIMIT");
    assert_int_equal(s, VF_OK);
    vf_scope_begin(ctx);
    assert_null(vf_fill(ctx, VF_F32, 1, shape, 1.0));
    assert_non_null(strstr(vf_error_message(ctx), "limit of 2097152 bytes"));
    vf_scope_end(ctx);
    vf_error_clear(ctx);
    assert_int_equal(eager_demo(ctx, true), VF_OK);
    vf_context_destroy(ctx);
    setenv("VKFUSE_DEVICE_MEMORY_LIMIT", "lots", 1);
    ctx = vt_fault_context(NULL, false, 0, &s);
    unsetenv("VKFUSE_DEVICE_MEMORY_LIMIT");
    assert_int_equal(s, VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vf_error_message(ctx), "VKFUSE_DEVICE_MEMORY_LIMIT=lots"));
    vf_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_env), /* first: before any context reads the environment */
        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_device_lost),
        cmocka_unit_test(test_timeout_injected),
        cmocka_unit_test(test_memory_limit),
        cmocka_unit_test(test_sweep_create),
        cmocka_unit_test(test_sweep_eager),
        cmocka_unit_test(test_sweep_train_first),
        cmocka_unit_test(test_sweep_train_later),
        cmocka_unit_test(test_sweep_save_load),
        cmocka_unit_test(test_sweep_profile),
    };
    /* VKFUSE_FAULT_TESTS=<pattern>: only the cases it matches (cmocka's
       filter, '*' as a wildcard), to run one sweep in full */
    if (getenv("VKFUSE_FAULT_TESTS")) cmocka_set_test_filter(getenv("VKFUSE_FAULT_TESTS"));
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fprintf(stderr, "fault sweeps: %d runs, %d ended in an error status\n", runs_done, runs_failed_ok);
    return rc;
}
