/* Threading misuse: one context shared by threads that break the rules of
 * docs/RUNTIME.md ("Threads"), each case in a child process with an alarm
 * (tests/child.c), so that a deadlock fails the case instead of hanging the
 * suite, on both backends. What the library promises, asserted:
 *
 *  - a scope or tape belongs to the thread that began it: ending it on
 *    another thread is VF_ERROR_INVALID_ARGUMENT naming the rule (and the
 *    tape), at once, and the owner's scope or tape goes on working (it
 *    deadlocked before: the other thread waited for the owner's hold);
 *  - a tensor of a scope released by another thread while the owner uses
 *    it: the release returns at once (it never waits for another thread's
 *    hold) and is done when the scope ends, so the owner's tensor never
 *    dies under it, and then fails ("already released by vf_scope_end");
 *  - a function traced on one thread while another calls it: the call
 *    waits for the trace and reuses it (one trace, two calls, same values);
 *  - a tape recording while another thread runs ops: the other thread's
 *    ops wait until the tape ends and are never recorded; taking a
 *    gradient of that tape from the other thread waits too, then fails
 *    because the tape has ended.
 *
 * scripts/test.sh runs this file under ThreadSanitizer as well. */
#include "child.h"
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const int64_t S4[1] = {4};

/* Time for another thread to reach (and block in) its call. */
static void pause_a_little(void)
{
    struct timespec t = {0, 50 * 1000 * 1000};
    nanosleep(&t, NULL);
}

static bool all_equal(vf_tensor *t, float want)
{
    float v[4];
    if (vf_tensor_read(t, v, sizeof v) != VF_OK) return false;
    for (int i = 0; i < 4; i++)
        if (v[i] != want) return false;
    return true;
}

/* The other thread: runs job(arg) once started; `returned` says it is back. */
typedef struct other {
    pthread_t th;
    vf_context *ctx;
    void *arg;
    void (*job)(struct other *o);
    atomic_int returned;
    vf_tensor *result;
} other;

static void *other_main(void *p)
{
    other *o = p;
    o->job(o);
    atomic_store(&o->returned, 1);
    return NULL;
}

static void start(other *o, vf_context *ctx, void (*job)(other *), void *arg)
{
    o->ctx = ctx;
    o->job = job;
    o->arg = arg;
    atomic_init(&o->returned, 0);
    o->result = NULL;
    VT_CHECK(pthread_create(&o->th, NULL, other_main, o) == 0);
}

static void join(other *o) { VT_CHECK(pthread_join(o->th, NULL) == 0); }

/* ---- a scope ended on another thread ----------------------------------------- */

static void end_scope_job(other *o) { vf_scope_end(o->ctx); }

static void scope_ended_elsewhere(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 3.0);
    other o;
    start(&o, ctx, end_scope_job, NULL);
    join(&o); /* deadlocked before: the other thread waited for this scope's hold */
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_scope_end", "no open scope on this thread",
                    "belongs to the thread that began it", NULL);
    VT_CHECK(all_equal(t, 3.0f)); /* the scope is still open, its tensor alive */
    vf_scope_end(ctx);
    VT_CHECK(vf_status_get(ctx) == VF_OK);
    float v[4];
    VT_CHECK(vf_tensor_read(t, v, sizeof v) == VF_ERROR_INVALID_ARGUMENT); /* now it ended */
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "released by vf_scope_end", NULL);
    /* with no scope open anywhere, the other thread's call is the plain
       "no open scope" error */
    start(&o, ctx, end_scope_job, NULL);
    join(&o);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_scope_end", "no open scope", NULL);
    vt_child_done(ctx);
}

/* ---- a tape ended on another thread ------------------------------------------ */

static void end_tape_job(other *o) { vf_tape_end(o->arg); }

static void tape_ended_elsewhere(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 2.0);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_mul(ctx, x, x);
    other o;
    start(&o, ctx, end_tape_job, tp);
    join(&o);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_end", "tape #",
                    "belongs to the thread that began it", NULL);
    vf_tensor *g = NULL;
    VT_CHECK(vf_tape_gradient(tp, y, 1, &x, &g) == VF_OK); /* still recording, still this thread's */
    VT_CHECK(all_equal(g, 4.0f));
    vf_tape_end(tp);
    VT_CHECK(vf_status_get(ctx) == VF_OK);
    /* ended: the other thread's end is the plain "already ended" */
    start(&o, ctx, end_tape_job, tp);
    join(&o);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_end", "already ended", NULL);
    vt_child_done(ctx);
}

/* ---- a scope's tensor released by another thread while the owner uses it ----- */

static void release_job(other *o) { vf_tensor_release(o->arg); }

static void scope_tensor_released_elsewhere(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 3.0);
    other o;
    start(&o, ctx, release_job, t);
    join(&o); /* it returns while this thread's scope is open: queued, not waiting */
    vf_tensor *u = vf_add(ctx, t, t);        /* the owner's tensor did not die under it */
    VT_CHECK(u && all_equal(u, 6.0f));
    VT_CHECK(vf_status_get(ctx) == VF_OK);
    vf_scope_end(ctx);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "tensor #",
                    "already released by vf_scope_end", NULL);
    vt_child_done(ctx);
}

/* ---- a function traced on one thread while another calls it ------------------- */

static atomic_int tracing; /* 1 once the body runs */

static vf_status slow_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    atomic_store(&tracing, 1);
    pause_a_little(); /* the other thread calls meanwhile */
    out[0] = vf_add(ctx, vf_exp(ctx, in[0]), in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void call_job(other *o)
{
    while (!atomic_load(&tracing)) sched_yield();
    vf_tensor *x = vf_fill(o->ctx, VF_F32, 1, S4, 0.0);
    if (vf_function_call(o->arg, &x, &o->result) != VF_OK) o->result = NULL;
    vf_tensor_release(x);
}

static void traced_while_called(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "slow", .body = slow_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    atomic_store(&tracing, 0);
    other o;
    start(&o, ctx, call_job, fn);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_OK);
    VT_CHECK(all_equal(y, 1.0f));
    join(&o);
    VT_CHECK(o.result && all_equal(o.result, 1.0f));
    vf_function_stats st;
    VT_CHECK(vf_function_stats_get(fn, &st) == VF_OK);
    VT_CHECK(st.traces == 1 && st.calls == 2); /* the second call waited for the trace and reused it */
    vf_function_destroy(fn);
    vt_child_done(ctx);
}

/* ---- a tape recording while another thread runs ops ------------------------- */

static void ops_job(other *o)
{
    vf_tensor *x = o->arg;
    o->result = vf_mul(o->ctx, vf_exp(o->ctx, x), x); /* waits for the tape to end */
}

typedef struct {
    vf_tape *tp;
    vf_tensor *y, *x;
    vf_status status;
} grad_args;

static void gradient_job(other *o)
{
    grad_args *a = o->arg;
    vf_tensor *g = NULL;
    a->status = vf_tape_gradient(a->tp, a->y, 1, &a->x, &g); /* waits for the tape to end */
}

static void tape_while_other_thread_runs_ops(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 2.0);
    vf_tape *tp = vf_tape_begin(ctx);
    other ops, grad;
    start(&ops, ctx, ops_job, x);
    vf_tensor *y = vf_mul(ctx, x, x);
    grad_args ga = {.tp = tp, .y = y, .x = x};
    start(&grad, ctx, gradient_job, &ga);
    pause_a_little();
    VT_CHECK(atomic_load(&ops.returned) == 0 && atomic_load(&grad.returned) == 0); /* both wait */
    vf_tensor *g = NULL;
    VT_CHECK(vf_tape_gradient(tp, y, 1, &x, &g) == VF_OK);
    VT_CHECK(all_equal(g, 4.0f)); /* d(x*x)/dx: the other thread's ops were not recorded */
    vf_tape_end(tp);
    join(&ops);
    join(&grad);
    VT_CHECK(ops.result);
    float v[4];
    VT_CHECK(vf_tensor_read(ops.result, v, sizeof v) == VF_OK && v[0] > 14.77f && v[0] < 14.79f); /* exp(2) * 2 */
    VT_CHECK(ga.status == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "tape #", "ended by vf_tape_end", NULL);
    vt_child_done(ctx);
}

/* ---- the parent side ---------------------------------------------------------- */

static const vt_child_case cases[] = {
    {"scope_ended_elsewhere", scope_ended_elsewhere},
    {"tape_ended_elsewhere", tape_ended_elsewhere},
    {"scope_tensor_released_elsewhere", scope_tensor_released_elsewhere},
    {"traced_while_called", traced_while_called},
    {"tape_while_other_thread_runs_ops", tape_while_other_thread_runs_ops},
};

/* 30 s: each case takes well under a second; the alarm is for deadlocks. */
static void run_all(vf_backend be) { vt_child_run_all(cases, (int)(sizeof cases / sizeof *cases), be, 30); }

VT_PER_BACKEND(run_all)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(run_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
