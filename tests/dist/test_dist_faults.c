/* vkfuse_dist over MPI when ranks misbehave: run by ctest under `mpirun
 * -np 2`, `-np 3` and `-np 4` (tests/CMakeLists.txt), on the CPU backend
 * (the transport is the same on every backend). Each failure kind runs
 * after 0 to 5 earlier vf_dists of the job (made, used and destroyed right
 * before it), several rounds, with the failing rank rotating over the
 * ranks: a race that strikes one run in eight shows. After every failure
 * the ranks make a new vf_dist and check that an allreduce on it works.
 * Then a rank whose vf_dist_create refuses its arguments, and a rank late
 * to a call, told that the others gave up on it.
 *
 * Short timeouts keep a failing run short; "at once" means well under the
 * call's timeout_s (a wrong wait lasts the whole of it). */
#include <vkfuse_dist.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#define ROUNDS 6 /* rounds of prior = 0..5 per failure kind: 36 runs, a 1-in-8 race is missed 1 time in 120 */
#define CALL_TIMEOUT 6 /* timeout_s of the vf_dist that fails; "at once" is under half of it */

static vf_context *ctx;
static int rank_, size_;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static vf_dist *make_dist(double timeout_s)
{
    vf_dist *d = NULL;
    vf_status st = vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = timeout_s}, &d);
    if (st != VF_OK) fail_msg("rank %d: vf_dist_create: %s: %s", rank_, vf_status_name(st), vf_dist_create_error());
    return d;
}

/* An allreduce of (rank + 1) + k on d must give the sum over the ranks. */
static void check_works(vf_dist *d, const char *when)
{
    vf_scope_begin(ctx);
    float v[3] = {0};
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, (double)rank_ + 1), *y = NULL;
    vf_status st = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y);
    if (st != VF_OK) fail_msg("rank %d, %s: allreduce: %s: %s", rank_, when, vf_status_name(st), vf_dist_error_message(d));
    assert_int_equal(vf_tensor_read(y, v, sizeof v), VF_OK);
    float want = (float)(size_ * (size_ + 1) / 2);
    for (int i = 0; i < 3; i++)
        if (v[i] != want) fail_msg("rank %d, %s: got %g, want %g", rank_, when, (double)v[i], (double)want);
    vf_scope_end(ctx);
}

/* `n` vf_dists made, used once and destroyed: the history a failure
   follows (their communicators, tags and notices must not reach it). */
static void earlier_dists(int n)
{
    for (int i = 0; i < n; i++) {
        vf_dist *d = make_dist(20);
        check_works(d, "an earlier vf_dist");
        vf_dist_destroy(d);
    }
}

/* After a failure: a new vf_dist works. */
static void recover(const char *kind)
{
    vf_dist *d = make_dist(20);
    char when[96];
    snprintf(when, sizeof when, "a new vf_dist after %s", kind);
    check_works(d, when);
    vf_dist_destroy(d);
}

static void expect_msg(const char *msg, const char *want, const char *kind, int prior)
{
    if (!strstr(msg, want))
        fail_msg("rank %d, %s after %d earlier vf_dists: want \"%s\" in: %s", rank_, kind, prior, want, msg);
}

static void expect_fast(double waited, const char *kind, int prior, const char *msg)
{
    if (waited >= CALL_TIMEOUT / 2.0)
        fail_msg("rank %d, %s after %d earlier vf_dists: waited %.1f s (timeout_s %d): %s", rank_, kind, prior, waited,
                 CALL_TIMEOUT, msg);
}

/* An allreduce that is to fail: its status, message and wait. */
typedef struct {
    vf_status st;
    const char *msg;
    double waited;
} outcome;

static outcome failing_call(vf_dist *d, int64_t n, bool null_tensor)
{
    vf_scope_begin(ctx);
    vf_tensor *x = null_tensor ? NULL : vf_fill(ctx, VF_F32, 1, &n, 1.0), *y = NULL;
    double t0 = now();
    outcome o = {.st = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y)};
    o.waited = now() - t0;
    vf_scope_end(ctx);
    o.msg = vf_dist_error_message(d);
    return o;
}

static void expect(outcome o, vf_status st, const char *want, const char *kind, int bad, int prior)
{
    if (o.st != st)
        fail_msg("rank %d, %s (rank %d) after %d earlier vf_dists: %s, want %s: %s", rank_, kind, bad, prior,
                 vf_status_name(o.st), vf_status_name(st), o.msg);
    expect_msg(o.msg, want, kind, prior);
    expect_fast(o.waited, kind, prior, o.msg);
}

/* One failure kind: on a vf_dist that worked, rank `bad` misbehaves; the
   trial destroys d. */
typedef void (*trial_fn)(vf_dist *d, int bad, int prior);

/* ROUNDS rounds of 0..5 earlier vf_dists, the failing rank rotating, and a
   new vf_dist after each failure. */
static void run_trials(const char *kind, trial_fn trial)
{
    for (int round = 0; round < ROUNDS; round++)
        for (int prior = 0; prior <= 5; prior++) {
            earlier_dists(prior);
            vf_dist *d = make_dist(CALL_TIMEOUT);
            check_works(d, "before the failure");
            trial(d, (round * 6 + prior) % size_, prior);
            recover(kind);
        }
}

/* One rank passes another shape: VF_ERROR_SHAPE on every rank, at once,
   naming the first rank whose tensors differ from rank 0's. */
static void shape_differs(vf_dist *d, int bad, int prior)
{
    outcome o = failing_call(d, rank_ == bad ? 5 : 4, false);
    char want[48];
    snprintf(want, sizeof want, "rank %d's differ from rank 0's", bad ? bad : 1);
    expect(o, VF_ERROR_SHAPE, want, "a differing shape", bad, prior);
    expect_msg(o.msg, rank_ == bad ? "f32[5]" : "f32[4]", "a differing shape", prior);
    vf_dist_destroy(d);
}

static void test_shape_differs(void **state)
{
    (void)state;
    run_trials("a differing shape", shape_differs);
}

/* One rank passes a NULL tensor: it gets VF_ERROR_INVALID_ARGUMENT, the
   others VF_ERROR_DEVICE naming it, at once. */
static void null_tensor(vf_dist *d, int bad, int prior)
{
    outcome o = failing_call(d, 4, rank_ == bad);
    char want[32];
    snprintf(want, sizeof want, "rank %d failed", bad);
    if (rank_ == bad) expect(o, VF_ERROR_INVALID_ARGUMENT, "tensor 0 is NULL", "a NULL tensor", bad, prior);
    else expect(o, VF_ERROR_DEVICE, want, "a NULL tensor", bad, prior);
    vf_dist_destroy(d);
}

static void test_null_tensor(void **state)
{
    (void)state;
    run_trials("a NULL tensor", null_tensor);
}

/* One rank destroys its vf_dist while the others still call: they fail
   naming it, at once. */
static void rank_leaves(vf_dist *d, int bad, int prior)
{
    if (rank_ != bad) {
        char want[32];
        snprintf(want, sizeof want, "rank %d left", bad);
        expect(failing_call(d, 4, false), VF_ERROR_DEVICE, want, "a rank leaving", bad, prior);
    }
    vf_dist_destroy(d);
}

static void test_rank_leaves(void **state)
{
    (void)state;
    run_trials("a rank leaving", rank_leaves);
}

/* One rank calls vf_dist_create after the others' timeout_s: they fail
   naming it, it is told that they gave up waiting for it; nothing
   crashes, and the next vf_dist_create works on every rank. */
static void test_late_create(void **state)
{
    (void)state;
    const double timeout = 0.1;
    for (int prior = 0; prior <= 5; prior++) {
        int late = prior % size_;
        earlier_dists(prior);
        /* after the others' timeout_s (with a margin for a loaded machine).
           Rank 0 decides at its timeout_s; the others wait 0.5 s more for
           its answer (docs/DISTRIBUTED.md). A late rank 0 comes after that
           once (prior 0) and within it otherwise: the answers are the same */
        if (rank_ == late) nap(timeout + (prior == 0 ? 0.7 : 0.35));
        vf_dist *d = NULL;
        double t0 = now();
        vf_status st = vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = timeout}, &d);
        double waited = now() - t0;
        const char *m = vf_dist_create_error();
        if (st != VF_ERROR_DEVICE || d)
            fail_msg("rank %d, rank %d late to create after %d earlier vf_dists: %s: %s", rank_, late, prior,
                     vf_status_name(st), m);
        char want[48];
        snprintf(want, sizeof want, "rank %d did not call vf_dist_create", late);
        expect_msg(m, rank_ == late ? "gave up waiting for this rank" : want, "a late vf_dist_create", prior);
        if (waited > 10 * timeout + 2)
            fail_msg("rank %d: vf_dist_create took %.1f s with timeout_s %g: %s", rank_, waited, timeout, m);
        recover("a late vf_dist_create");
    }
}

/* One rank's vf_dist_create refuses its arguments: it gets
   VF_ERROR_INVALID_ARGUMENT, the others VF_ERROR_DEVICE naming it, at
   once; the next vf_dist_create of every rank pairs up. */
static void test_bad_create(void **state)
{
    (void)state;
    for (int prior = 0; prior <= 5; prior++) {
        int bad = prior % size_;
        earlier_dists(prior);
        vf_dist *d = NULL;
        double t0 = now();
        vf_status st = vf_dist_create(ctx, &(vf_dist_desc){.timeout_s = rank_ == bad ? -1 : CALL_TIMEOUT}, &d);
        double waited = now() - t0;
        const char *m = vf_dist_create_error();
        if (st != (rank_ == bad ? VF_ERROR_INVALID_ARGUMENT : VF_ERROR_DEVICE) || d)
            fail_msg("rank %d, rank %d's vf_dist_create refused after %d earlier vf_dists: %s: %s", rank_, bad, prior,
                     vf_status_name(st), m);
        char want[32];
        snprintf(want, sizeof want, "rank %d failed", bad);
        expect_msg(m, rank_ == bad ? "timeout_s -1 is not" : want, "a refused vf_dist_create", prior);
        expect_fast(waited, "a refused vf_dist_create", prior, m);
        recover("a refused vf_dist_create");
    }
}

/* One rank comes to a call after the others gave up on it (timeout and
   roll call over): they fail naming it as silent; it is told that they
   gave up waiting for it (not that the ranks make different calls). */
static void test_late_call(void **state)
{
    (void)state;
    const double timeout = 0.3;
    int late = size_ - 1;
    earlier_dists(2);
    vf_dist *d = make_dist(timeout);
    check_works(d, "before a rank is late");
    /* the others wait timeout_s, then listen timeout_s for the roll call */
    if (rank_ == late) nap(2 * timeout + 0.4);
    vf_scope_begin(ctx);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 1.0), *y = NULL;
    vf_status st = vf_dist_allreduce(d, 1, &x, VF_DIST_SUM, &y);
    vf_scope_end(ctx);
    const char *m = vf_dist_error_message(d);
    if (st != VF_ERROR_DEVICE) fail_msg("rank %d, rank %d late to a call: %s: %s", rank_, late, vf_status_name(st), m);
    /* the others: it was silent in their roll call, or (on a loaded
       machine) it came during their roll call */
    char silent[48], came[48];
    snprintf(silent, sizeof silent, "rank %d did not answer", late);
    snprintf(came, sizeof came, "rank %d came to this call", late);
    if (rank_ != late && strstr(m, came)) expect_msg(m, came, "a rank late to a call", 2);
    else expect_msg(m, rank_ == late ? "the others gave up waiting for this rank" : silent, "a rank late to a call", 2);
    vf_dist_destroy(d);
    recover("a rank late to a call");
}

int main(void)
{
    MPI_Init(NULL, NULL);
    if (vf_context_create(NULL, &ctx) != VF_OK) {
        fprintf(stderr, "context: %s\n", vf_error_message(ctx));
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_differs),
        cmocka_unit_test(test_null_tensor),
        cmocka_unit_test(test_rank_leaves),
        cmocka_unit_test(test_late_create),
        cmocka_unit_test(test_bad_create),
        cmocka_unit_test(test_late_call),
    };
    char name[40];
    snprintf(name, sizeof name, "dist faults rank %d of %d", rank_, size_);
    int rc = cmocka_run_group_tests_name(name, tests, NULL, NULL);
    if (vf_status_get(ctx) != VF_OK) fprintf(stderr, "rank %d: %s\n", rank_, vf_error_message(ctx)), rc = 1;
    vf_context_destroy(ctx);
    MPI_Finalize();
    return rc != 0;
}
