/* One context shared by several threads, on both backends: eager ops and
 * reads, scopes, gradient tapes, eager vf_cond (a body that calls back
 * into the API), a traced function that the threads race to trace first,
 * per-thread and shared variables. Every thread's results must be
 * bit-identical to the same work done by one thread; the shared
 * variable's increments must all land. The same work with a context per
 * thread (nothing may be shared between contexts), a scope that keeps the
 * other threads waiting until it ends (docs/RUNTIME.md, Threads), and
 * threads reading the sticky error while another sets and clears it, and
 * a release by one thread while another holds the context (never waits).
 *
 * Without the context's lock this fails: wrong values or NULL results
 * (another thread's scope ends and frees a tensor, or a tape records the
 * other thread's ops), crashes, and data-race reports under
 * ThreadSanitizer (scripts/test.sh runs this test in its tsan stage). */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { THREADS = 4, ITERS = 24, N = 64, OUTS = 5 };

/* The traced function: a fusable chain of elementwise ops and a reduction. */
static vf_status fused_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *t = vf_add(ctx, vf_mul(ctx, vf_tanh(ctx, in[0]), in[1]), in[0]);
    out[0] = vf_add(ctx, t, vf_reduce_sum(ctx, vf_mul(ctx, in[1], in[1]), 0, NULL, true));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status then_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status else_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_sub(ctx, in[0], in[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    vf_context *ctx;
    vf_function *fn;     /* shared by all workers */
    vf_tensor *counter;  /* a shared variable every worker increments */
    int id;
    bool scoped;         /* each iteration in a vf_scope_begin/end, else explicit releases */
    float out[ITERS][OUTS][N];
    int failures;        /* calls that returned NULL or an error */
    char first_failure[256];
} worker;

static void failed(worker *w, int iter, const char *what)
{
    if (w->failures++ == 0)
        snprintf(w->first_failure, sizeof w->first_failure, "worker %d iteration %d: %s", w->id, iter, what);
}

/* Reads t into dst (N floats) and releases it unless a scope owns it. */
static void take(worker *w, int iter, vf_tensor *t, float *dst, const char *what)
{
    if (!t || vf_tensor_read(t, dst, N * sizeof(float)) != VF_OK) failed(w, iter, what);
    if (!w->scoped) vf_tensor_release(t);
}

static void one_iteration(worker *w, int i)
{
    vf_context *ctx = w->ctx;
    float xs[N], ys[N];
    vt_fill_uniform(xs, N, -2.0f, 2.0f, (uint64_t)(w->id * 1000 + i));
    vt_fill_uniform(ys, N, -1.0f, 1.0f, (uint64_t)(w->id * 1000 + i + 500));
    int64_t sh[1] = {N};
    if (w->scoped) vf_scope_begin(ctx);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, sh, xs);
    vf_tensor *y = vf_tensor_from_host(ctx, VF_F32, 1, sh, ys);
    if (!x || !y) {
        failed(w, i, "vf_tensor_from_host");
        if (w->scoped) vf_scope_end(ctx);
        else vf_tensor_release(x), vf_tensor_release(y);
        return;
    }

    /* eager ops: a chain whose intermediates are released at once */
    vf_tensor *xy = vf_mul(ctx, x, y);
    vf_tensor *e = vf_add(ctx, xy, vf_exp(ctx, y));
    if (!w->scoped) vf_tensor_release(xy);
    take(w, i, e, w->out[i][0], "eager ops");

    /* the traced function, shared by every worker */
    vf_tensor *in[2] = {x, y}, *f = NULL;
    if (vf_function_call(w->fn, in, &f) != VF_OK) failed(w, i, "vf_function_call");
    take(w, i, f, w->out[i][1], "vf_function_call");

    /* a gradient tape: d sum(x^3 * y) / dx = 3 x^2 y */
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *x2 = vf_mul(ctx, x, x);
    vf_tensor *x3y = vf_mul(ctx, vf_mul(ctx, x2, x), y);
    vf_tensor *g = NULL;
    if (!tape || vf_tape_gradient(tape, x3y, 1, &x, &g) != VF_OK) failed(w, i, "vf_tape_gradient");
    vf_tape_end(tape);
    if (!w->scoped) vf_tensor_release(x2), vf_tensor_release(x3y);
    take(w, i, g, w->out[i][2], "gradient");

    /* eager vf_cond: the chosen body calls back into the API */
    float sx = 0;
    for (int k = 0; k < N; k++) sx += xs[k];
    vf_tensor *pred = vf_fill(ctx, VF_BOOL, 0, NULL, sx > 0 ? 1.0 : 0.0);
    vf_tensor *c = NULL;
    if (vf_cond(ctx, pred, then_body, else_body, 2, in, 1, &c, NULL) != VF_OK) failed(w, i, "vf_cond");
    if (!w->scoped) vf_tensor_release(pred);
    take(w, i, c, w->out[i][3], "vf_cond");

    /* a variable of this worker's, assigned and read back; the shared counter */
    vf_tensor *v = vf_variable(ctx, x);
    if (!v || vf_assign_add(v, y) != VF_OK || vf_assign_sub(v, x) != VF_OK) failed(w, i, "own variable");
    take(w, i, v, w->out[i][4], "own variable");
    vf_tensor *one = vf_fill(ctx, VF_F32, 1, sh, 1.0);
    if (vf_assign_add(w->counter, one) != VF_OK) failed(w, i, "vf_assign_add on the shared variable");
    if (!w->scoped) vf_tensor_release(one);

    if (w->scoped) vf_scope_end(ctx);
    else vf_tensor_release(x), vf_tensor_release(y);
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    for (int i = 0; i < ITERS; i++) one_iteration(w, i);
    return NULL;
}

static vf_function *make_function(vf_context *ctx)
{
    vf_function_desc d = {.name = "fused", .body = fused_body, .n_inputs = 2, .n_outputs = 1};
    return vf_function_create(ctx, &d);
}

static vf_tensor *make_counter(vf_context *ctx)
{
    int64_t sh[1] = {N};
    vf_tensor *zero = vf_fill(ctx, VF_F32, 1, sh, 0.0);
    vf_tensor *counter = vf_variable(ctx, zero);
    vf_tensor_release(zero);
    return counter;
}

/* Whether every element of the counter is want. */
static bool counter_is(vf_tensor *counter, float want)
{
    float got[N];
    if (vf_tensor_read(counter, got, sizeof got) != VF_OK) return false;
    for (int k = 0; k < N; k++)
        if (got[k] != want) return false;
    return true;
}

static void check_same(const worker *par, const worker *ref)
{
    static const char *const what[OUTS] = {"eager ops", "traced function", "gradient", "vf_cond", "variable"};
    for (int t = 0; t < THREADS; t++) {
        if (par[t].failures) fail_msg("%d failed calls; the first: %s", par[t].failures, par[t].first_failure);
        for (int i = 0; i < ITERS; i++)
            for (int o = 0; o < OUTS; o++)
                if (memcmp(par[t].out[i][o], ref[t].out[i][o], sizeof ref[t].out[i][o]) != 0)
                    fail_msg("worker %d iteration %d: %s differs from the single-threaded result", t, i, what[o]);
    }
}

static worker ref[THREADS], par[THREADS];

/* Each worker's iterations run by this thread alone, on ctx. */
static void reference(vf_context *ctx)
{
    vf_function *fn = make_function(ctx);
    vf_tensor *counter = make_counter(ctx);
    assert_non_null(fn);
    assert_non_null(counter);
    for (int t = 0; t < THREADS; t++) {
        ref[t] = (worker){.ctx = ctx, .fn = fn, .counter = counter, .id = t, .scoped = t % 2 == 0};
        run_worker(&ref[t]);
        if (ref[t].failures) fail_msg("single-threaded reference: %s", ref[t].first_failure);
    }
    assert_true(counter_is(counter, (float)(THREADS * ITERS)));
    vf_tensor_release(counter);
    vf_function_destroy(fn);
}

static void shared_context(vf_backend backend)
{
    vf_context *ctx = vt_context(backend);
    reference(ctx);
    /* the same work from THREADS threads at once; a new function, so that
       the first calls race to trace it */
    vf_function *fn = make_function(ctx);
    vf_tensor *counter = make_counter(ctx);
    assert_non_null(fn);
    assert_non_null(counter);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        par[t] = (worker){.ctx = ctx, .fn = fn, .counter = counter, .id = t, .scoped = t % 2 == 0};
        assert_int_equal(pthread_create(&th[t], NULL, run_worker, &par[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    if (vf_status_get(ctx) != VF_OK) fail_msg("error in the shared context: %s", vf_error_message(ctx));
    check_same(par, ref);
    if (!counter_is(counter, (float)(THREADS * ITERS))) fail_msg("increments of the shared variable were lost");
    vf_tensor_release(counter);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_int_equal(st.traces, 1);
    assert_int_equal(st.calls, THREADS * ITERS);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

VT_PER_BACKEND(shared_context)

/* ---- a context per thread: no state shared between contexts ------------------- */

static vf_backend own_backend;

static void *run_own_context(void *arg)
{
    worker *w = arg;
    vf_context_desc d = {.backend = own_backend, .validation = getenv("VKFUSE_VALIDATION") &&
                                                              strcmp(getenv("VKFUSE_VALIDATION"), "1") == 0};
    if (vf_context_create(&d, &w->ctx) != VF_OK) {
        failed(w, -1, "vf_context_create");
        vf_context_destroy(w->ctx);
        return NULL;
    }
    w->fn = make_function(w->ctx);
    w->counter = make_counter(w->ctx);
    if (!w->fn || !w->counter) failed(w, -1, "setup");
    else run_worker(w);
    if (w->counter && !counter_is(w->counter, (float)ITERS)) failed(w, ITERS, "the counter");
    if (vf_context_sync(w->ctx) != VF_OK) failed(w, ITERS, vf_error_message(w->ctx));
    vf_function_destroy(w->fn);
    vf_context_destroy(w->ctx);
    return NULL;
}

static void context_per_thread(vf_backend backend)
{
    vf_context *ctx = vt_context(backend);
    reference(ctx);
    vt_context_done(ctx);
    own_backend = backend;
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        par[t] = (worker){.id = t, .scoped = t % 2 == 0};
        assert_int_equal(pthread_create(&th[t], NULL, run_own_context, &par[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
    check_same(par, ref);
}

VT_PER_BACKEND(context_per_thread)

/* ---- the sticky error across threads ---------------------------------------- */

enum { ERR_ROUNDS = 400 };
static const char *const want_message_part = "vf_reshape";

typedef struct {
    vf_context *ctx;
    int torn;            /* messages that were neither "" nor the whole expected one */
    char seen[256];
} reader;

static vf_context *err_ctx;
static char err_expected[2048];

static void *make_errors(void *arg)
{
    (void)arg;
    int64_t sh[1] = {6}, bad[1] = {4};
    vf_tensor *t = vf_fill(err_ctx, VF_F32, 1, sh, 1.0);
    for (int i = 0; i < ERR_ROUNDS; i++) {
        vf_tensor_release(vf_reshape(err_ctx, t, 1, bad)); /* fails: 6 elements do not fit [4] */
        vf_error_clear(err_ctx);
    }
    vf_tensor_release(t);
    return NULL;
}

static void *read_errors(void *arg)
{
    reader *r = arg;
    for (int i = 0; i < ERR_ROUNDS; i++) {
        const char *m = vf_error_message(r->ctx);
        vf_status s = vf_status_get(r->ctx);
        (void)s;
        if (m[0] != '\0' && strcmp(m, err_expected) != 0 && r->torn++ == 0)
            snprintf(r->seen, sizeof r->seen, "%s", m);
    }
    return NULL;
}

static void error_across_threads(vf_backend backend)
{
    err_ctx = vt_context(backend);
    /* the message one failure records, to compare the readers' copies with */
    int64_t sh[1] = {6}, bad[1] = {4};
    vf_tensor *t = vf_fill(err_ctx, VF_F32, 1, sh, 1.0);
    assert_null(vf_reshape(err_ctx, t, 1, bad));
    snprintf(err_expected, sizeof err_expected, "%s", vf_error_message(err_ctx));
    assert_non_null(strstr(err_expected, want_message_part));
    vf_error_clear(err_ctx);
    vf_tensor_release(t);

    pthread_t maker, th[2];
    reader rd[2] = {{.ctx = err_ctx}, {.ctx = err_ctx}};
    assert_int_equal(pthread_create(&maker, NULL, make_errors, NULL), 0);
    for (int k = 0; k < 2; k++) assert_int_equal(pthread_create(&th[k], NULL, read_errors, &rd[k]), 0);
    pthread_join(maker, NULL);
    for (int k = 0; k < 2; k++) pthread_join(th[k], NULL);
    for (int k = 0; k < 2; k++)
        if (rd[k].torn) fail_msg("%d torn error messages, e.g. \"%s\"", rd[k].torn, rd[k].seen);
    vf_error_clear(err_ctx);
    vt_context_done(err_ctx);
}

VT_PER_BACKEND(error_across_threads)

/* ---- a scope is its thread's: the others wait until it ends ------------------- */

static atomic_int phase; /* 1: A's scope is open; 2: A is about to end it; 3: B's call returned */
static int phase_when_b_returned;

static void *other_thread(void *arg)
{
    vf_context *ctx = arg;
    while (atomic_load(&phase) < 1) sched_yield();
    int64_t sh[1] = {4};
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, sh, 7.0); /* waits for A's vf_scope_end */
    phase_when_b_returned = atomic_load(&phase);
    atomic_store(&phase, 3);
    return t; /* owned by the root scope, not by A's scope: still alive after it ended */
}

static void scope_owned_by_thread(vf_backend backend)
{
    vf_context *ctx = vt_context(backend);
    atomic_store(&phase, 0);
    pthread_t b;
    assert_int_equal(pthread_create(&b, NULL, other_thread, ctx), 0);
    vf_scope_begin(ctx);
    int64_t sh[1] = {4};
    vf_tensor *mine = vf_fill(ctx, VF_F32, 1, sh, 1.0);
    atomic_store(&phase, 1);
    struct timespec pause = {0, 50 * 1000 * 1000};
    nanosleep(&pause, NULL); /* B has had time to call and must still be waiting */
    assert_int_equal(atomic_load(&phase), 1);
    float v[4];
    assert_int_equal(vf_tensor_read(mine, v, sizeof v), VF_OK);
    atomic_store(&phase, 2);
    vf_scope_end(ctx);
    void *bt = NULL;
    pthread_join(b, &bt);
    assert_int_equal(phase_when_b_returned, 2);
    assert_non_null(bt);
    assert_int_equal(vf_tensor_read(bt, v, sizeof v), VF_OK);
    assert_true(v[0] == 7.0f && v[3] == 7.0f);
    vf_tensor_release(bt);
    vt_context_done(ctx);
}

VT_PER_BACKEND(scope_owned_by_thread)

/* ---- a release never waits for another thread's hold ------------------------- */

/* B releases two tensors while A holds the context (an open scope) and waits
   for B: a root-scope tensor, and one of A's scope, which A's scope end then
   frees. Waiting for the lock there would deadlock (A waits for B: Python's
   garbage collector releases on any thread, and a LocalGroup rank waits in
   a collective for the others), so the release is queued and done by A as
   it lets go of the lock; the tensor A's scope freed first is then the
   usual "already released" error, as when the release waited. */
typedef struct {
    vf_tensor *root, *scoped;
    atomic_int done;
} release_job;

static void *release_both(void *arg)
{
    release_job *j = arg;
    vf_tensor_release(j->root);
    vf_tensor_release(j->scoped);
    atomic_store(&j->done, 1);
    return NULL;
}

static void release_does_not_wait(vf_backend backend)
{
    vf_context *ctx = vt_context(backend);
    int64_t sh[1] = {4};
    release_job j = {.root = vf_fill(ctx, VF_F32, 1, sh, 2.0)};
    atomic_init(&j.done, 0);
    vf_scope_begin(ctx);
    j.scoped = vf_fill(ctx, VF_F32, 1, sh, 3.0);
    assert_non_null(j.root);
    assert_non_null(j.scoped);
    pthread_t b;
    assert_int_equal(pthread_create(&b, NULL, release_both, &j), 0);
    /* waits at most 5 s, so that the old behaviour fails instead of hanging */
    for (int i = 0; i < 5000 && !atomic_load(&j.done); i++) nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
    bool returned = atomic_load(&j.done);
    float v[4];
    assert_int_equal(vf_tensor_read(j.root, v, sizeof v), VF_OK); /* queued: alive while A holds the lock */
    vf_scope_end(ctx);
    pthread_join(b, NULL);
    assert_true(returned);
    assert_int_equal(vf_status_get(ctx), VF_ERROR_INVALID_ARGUMENT); /* the scoped one died first */
    assert_non_null(strstr(vf_error_message(ctx), "already released by vf_scope_end"));
    vf_error_clear(ctx);
    assert_int_not_equal(vf_tensor_read(j.root, v, sizeof v), VF_OK); /* released once A let go */
    assert_non_null(strstr(vf_error_message(ctx), "vf_tensor_release"));
    vf_error_clear(ctx);
    vt_context_done(ctx);
}

VT_PER_BACKEND(release_does_not_wait)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(shared_context),
        VT_PER_BACKEND_TESTS(context_per_thread),
        VT_PER_BACKEND_TESTS(scope_owned_by_thread),
        VT_PER_BACKEND_TESTS(error_across_threads),
        VT_PER_BACKEND_TESTS(release_does_not_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
