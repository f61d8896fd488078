/* vkfuse_dist over MPI, the calls: a duplicated communicator per vf_dist
 * (made by dist_mpi_join.c) with MPI_ERRORS_RETURN, non-blocking
 * collectives polled against a deadline (MPI itself never times out: a
 * peer that stopped calling would hang a blocking call), and one small
 * "notice" message per rank by which a rank that failed, gave up or left
 * tells the others, so that they fail naming it instead of waiting for the
 * timeout.
 *
 * Nothing of a vf_dist may reach a later one. MPI can neither cancel a
 * collective nor take back a message, so what a vf_dist leaves in flight
 * is kept here until it is over: sends until they complete, a collective
 * that never completed (and the memory it writes) until it does, and a
 * destroyed vf_dist's communicator until every other rank's notice has
 * arrived on it. Freeing it earlier would let MPI give its context id to
 * a later communicator, and Open MPI delivers a late message for a freed
 * context id to whichever communicator gets that id next. */
#include "dist/dist_mpi.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOTICE_TAG 7171

double vf_dist_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void vf_dist_nap(int polls)
{
    /* spin briefly (a step's allreduce is usually quick), then sleep longer:
       ranks may share cores (mpirun --oversubscribe) */
    struct timespec ts = {0, polls < 50 ? 0 : polls < 500 ? 20000 : 500000};
    if (ts.tv_nsec) nanosleep(&ts, NULL);
}

const char *vf_dist_mpi_err(int rc, char *buf)
{
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", rc);
    return buf;
}

/* ---- what vf_dists left in flight ---- */

typedef struct leftover {
    struct leftover *next;
    MPI_Request rq;         /* a send or an abandoned collective (MPI_REQUEST_NULL once done) */
    void *buf;              /* freed once rq is done */
    MPI_Comm comm;          /* a destroyed vf_dist's communicator, or MPI_COMM_NULL */
    bool *heard;            /* [size]: whose notice arrived on comm */
    int size, rank;
} leftover;

static leftover *leftovers;
static pthread_mutex_t leftovers_mu = PTHREAD_MUTEX_INITIALIZER;

static void keep(leftover *l)
{
    pthread_mutex_lock(&leftovers_mu);
    l->next = leftovers;
    leftovers = l;
    pthread_mutex_unlock(&leftovers_mu);
}

void vf_dist_mpi_post(const void *bytes, int len, int dest, int tag, MPI_Comm comm)
{
    leftover *l = calloc(1, sizeof *l);
    void *copy = malloc((size_t)len);
    if (!l || !copy) {
        free(l), free(copy);
        return; /* out of host memory: the peer then waits for its timeout */
    }
    memcpy(copy, bytes, (size_t)len);
    *l = (leftover){.rq = MPI_REQUEST_NULL, .buf = copy, .comm = MPI_COMM_NULL};
    if (MPI_Isend(copy, len, MPI_BYTE, dest, tag, comm, &l->rq) != MPI_SUCCESS) {
        free(copy), free(l);
        return;
    }
    keep(l);
}

void vf_dist_mpi_abandon(MPI_Request rq, void *buf)
{
    leftover *l = calloc(1, sizeof *l);
    if (!l) return; /* out of host memory: buf stays allocated, never freed */
    *l = (leftover){.rq = rq, .buf = buf, .comm = MPI_COMM_NULL};
    keep(l);
}

/* Takes the notices that arrived on a destroyed vf_dist's communicator. */
static void drain(leftover *l)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        vf_dist_notice in;
        if (MPI_Iprobe(MPI_ANY_SOURCE, NOTICE_TAG, l->comm, &flag, &st) != MPI_SUCCESS || !flag) return;
        if (MPI_Recv(&in, sizeof in, MPI_BYTE, st.MPI_SOURCE, NOTICE_TAG, l->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return;
        l->heard[st.MPI_SOURCE] = true;
    }
}

void vf_dist_mpi_progress(void)
{
    int fin = 1;
    MPI_Finalized(&fin);
    if (fin) return;
    pthread_mutex_lock(&leftovers_mu);
    for (leftover **p = &leftovers; *p;) {
        leftover *l = *p;
        if (l->rq != MPI_REQUEST_NULL) {
            int done = 0;
            if (MPI_Test(&l->rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 0;
            if (done) l->rq = MPI_REQUEST_NULL, free(l->buf), l->buf = NULL;
        }
        bool over = l->rq == MPI_REQUEST_NULL;
        if (l->comm != MPI_COMM_NULL) {
            drain(l);
            for (int r = 0; r < l->size; r++) over &= r == l->rank || l->heard[r];
            if (over) MPI_Comm_free(&l->comm), free(l->heard);
        }
        if (over) *p = l->next, free(l);
        else p = &l->next;
    }
    pthread_mutex_unlock(&leftovers_mu);
}

/* ---- the calls ---- */

/* A roll call found a silent rank: it may be dead, and Open MPI's
   MPI_Finalize then waits for it forever. */
static bool peer_silent;

void vf_dist_mpi_at_exit(void)
{
    int fin = 1;
    MPI_Finalized(&fin);
    if (!fin && !peer_silent) MPI_Finalize();
}

/* Takes any notices that arrived; fails if one names a rank that will not
   take part in the current call. */
static vf_status poll_notices(vf_dist *d, bool quiet)
{
    struct vf_dist_mpi *m = d->mpi;
    for (;;) {
        int flag = 0;
        MPI_Status st;
        vf_dist_notice in;
        if (MPI_Iprobe(MPI_ANY_SOURCE, NOTICE_TAG, m->comm, &flag, &st) != MPI_SUCCESS || !flag) break;
        if (MPI_Recv(&in, sizeof in, MPI_BYTE, st.MPI_SOURCE, NOTICE_TAG, m->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        in.text[sizeof in.text - 1] = 0;
        int r = st.MPI_SOURCE;
        m->heard[r] = true;
        if (in.left == 2) { /* a roll call is no goodbye */
            m->waited[r] = in.waited;
            if (in.done < d->calls) m->roll = true;
            continue;
        }
        /* kept for the call it stops: it may arrive during an earlier one */
        d->left_after[r] = in.done;
        char why[sizeof in.text + 80];
        snprintf(why, sizeof why, "rank %d %s after call %llu: %s", r, in.left == 1 ? "left (vf_dist_destroy)" : "failed",
                 (unsigned long long)in.done, in.text);
        free(m->why[r]);
        m->why[r] = strdup(why);
    }
    if (quiet) return VF_OK;
    for (int r = 0; r < d->size; r++)
        if (d->left_after[r] < d->calls)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s (call %llu): %s", d->what, (unsigned long long)d->calls,
                                m->why[r] ? m->why[r] : "a rank left or failed (no host memory for its message)");
    return VF_OK;
}

static void send_notice(vf_dist *d, int left, uint64_t done, const char *msg)
{
    struct vf_dist_mpi *m = d->mpi;
    if (!m || m->comm == MPI_COMM_NULL || m->told) return;
    m->told = true;
    vf_dist_notice out = {.rank = d->rank, .left = left, .done = done, .waited = vf_dist_now() - m->call_start};
    snprintf(out.text, sizeof out.text, "%s", msg);
    /* never waited for: a dead peer must not block this rank */
    for (int r = 0; r < d->size; r++)
        if (r != d->rank) vf_dist_mpi_post(&out, sizeof out, r, NOTICE_TAG, m->comm);
}

/* Lists the ranks r != d->rank for which pick(r) holds, "1, 3", into s;
   returns how many. */
static int list_ranks(vf_dist *d, char *s, size_t len, bool (*pick)(vf_dist *, int, double), double arg)
{
    int n = 0;
    size_t k = 0;
    s[0] = 0;
    for (int r = 0; r < d->size && k + 12 < len; r++)
        if (r != d->rank && pick(d, r, arg)) k += (size_t)snprintf(s + k, len - k, "%s%d", n++ ? ", " : "", r);
    return n;
}

static bool is_silent(vf_dist *d, int r, double arg) { return (void)arg, !d->mpi->heard[r]; }
static bool came_late(vf_dist *d, int r, double mine) { return d->mpi->waited[r] >= 0 && d->mpi->waited[r] < 0.5 * mine; }

/* The deadline passed, or another rank gave up in this call. MPI cannot
   say which peer is missing, so ask: tell every rank this one gives up
   (with how long it waited), and listen for a while; live ranks stuck in
   the same call give up about as late and answer. The silent ones are
   named; a rank that came to the call after the others gave up learns so
   from their waits, longer than its own. */
static vf_status roll_call(vf_dist *d, const char *op)
{
    struct vf_dist_mpi *m = d->mpi;
    double mine = vf_dist_now() - m->call_start;
    char msg[128];
    snprintf(msg, sizeof msg, "its %s in call %llu timed out after %.3g s", op, (unsigned long long)d->calls,
             d->timeout_s);
    send_notice(d, 2, d->calls - 1, msg);
    double until = vf_dist_now() + (d->timeout_s < 2 ? d->timeout_s : 2);
    for (int polls = 0; vf_dist_now() < until; polls++) {
        poll_notices(d, true);
        int missing = 0;
        for (int r = 0; r < d->size; r++) missing += r != d->rank && !m->heard[r];
        if (!missing) break;
        vf_dist_nap(polls + 500);
    }
    char ranks[200];
    int n = list_ranks(d, ranks, sizeof ranks, is_silent, 0);
    if (n) {
        peer_silent = true;
        return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                            "%s (call %llu): %s did not complete within %.3g s; rank%s %s did not answer: died, exited, "
                            "or stopped making the same calls (set vf_dist_desc.timeout_s to wait longer)",
                            d->what, (unsigned long long)d->calls, op, d->timeout_s, n > 1 ? "s" : "", ranks);
    }
    int longest = -1;
    for (int r = 0; r < d->size; r++)
        if (r != d->rank && m->waited[r] >= 0 && (longest < 0 || m->waited[r] > m->waited[longest])) longest = r;
    if (longest >= 0 && mine < 0.5 * m->waited[longest])
        return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                            "%s (call %llu): the others gave up waiting for this rank: rank %d had waited %.3g s in "
                            "this call (its timeout_s) when this rank came to it; make a new vf_dist on every rank, "
                            "and set vf_dist_desc.timeout_s above the longest pause between the ranks' calls",
                            d->what, (unsigned long long)d->calls, longest, m->waited[longest]);
    if ((n = list_ranks(d, ranks, sizeof ranks, came_late, mine)))
        return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                            "%s (call %llu): %s did not complete within %.3g s; rank%s %s came to this call only after "
                            "this rank had given up (set vf_dist_desc.timeout_s to wait longer)",
                            d->what, (unsigned long long)d->calls, op, d->timeout_s, n > 1 ? "s" : "", ranks);
    return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                        "%s (call %llu): %s did not complete within %.3g s, though every rank answered: the ranks "
                        "do not make the same calls",
                        d->what, (unsigned long long)d->calls, op, d->timeout_s);
}

/* Before a collective starts: a notice that this call cannot complete. */
static vf_status ready(vf_dist *d, const char *op)
{
    vf_dist_mpi_progress();
    vf_status s = poll_notices(d, false);
    if (s == VF_OK && d->mpi->roll) s = roll_call(d, op);
    return s;
}

/* Waits for rq: VF_OK when done; VF_ERROR_DEVICE on an MPI error, a
   notice from a rank that will not come, or the deadline. A collective
   that did not complete stays pending with buf (heap memory it reads or
   writes), both owned by the vf_dist from then on: MPI cannot cancel it. */
static vf_status wait_for(vf_dist *d, MPI_Request *rq, void *buf, const char *op)
{
    double deadline = vf_dist_now() + d->timeout_s;
    char eb[MPI_MAX_ERROR_STRING];
    vf_status s = VF_OK;
    for (int polls = 0;; polls++) {
        int done = 0;
        int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            s = vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s (call %llu): %s failed: %s", d->what,
                             (unsigned long long)d->calls, op, vf_dist_mpi_err(rc, eb));
            break;
        }
        if (done) return VF_OK;
        if ((s = poll_notices(d, false)) != VF_OK) break;
        if (vf_dist_now() > deadline || d->mpi->roll) {
            s = roll_call(d, op);
            break;
        }
        if (polls % 64 == 63) vf_dist_mpi_progress();
        vf_dist_nap(polls);
    }
    d->mpi->pending = *rq;
    d->mpi->pending_buf = buf;
    return s;
}

vf_status vf_dist_mpi_check(vf_dist *d, uint64_t sig, int *first_bad)
{
    /* max of sig and of ~sig: every rank had the same sig iff max(sig) == sig
       and max(~sig) == ~sig on every rank */
    MPI_Request rq;
    char eb[MPI_MAX_ERROR_STRING];
    d->mpi->call_start = vf_dist_now();
    vf_status s = ready(d, "the signature check");
    if (s != VF_OK) return s;
    uint64_t *v = malloc(4 * sizeof *v); /* on the heap: the collective may outlive this call */
    if (!v) return vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "%s: out of host memory", d->what);
    v[0] = sig, v[1] = ~sig;
    int rc = MPI_Iallreduce(v, v + 2, 2, MPI_UINT64_T, MPI_MAX, d->mpi->comm, &rq);
    if (rc != MPI_SUCCESS) {
        free(v);
        return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Iallreduce failed: %s", d->what, vf_dist_mpi_err(rc, eb));
    }
    if ((s = wait_for(d, &rq, v, "the signature check")) != VF_OK) return s;
    *first_bad = -1;
    bool same = v[2] == v[0] && v[3] == v[1];
    free(v);
    if (same) return VF_OK;
    /* they differ: every rank sees it; gather all to name the first that differs from rank 0 */
    uint64_t *all = malloc(sizeof *all * ((size_t)d->size + 1));
    if (!all) return vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "%s: out of host memory", d->what);
    all[d->size] = sig;
    rc = MPI_Iallgather(all + d->size, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->mpi->comm, &rq);
    if (rc != MPI_SUCCESS) {
        free(all);
        return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Iallgather failed: %s", d->what, vf_dist_mpi_err(rc, eb));
    }
    if ((s = wait_for(d, &rq, all, "the signature gather")) != VF_OK) return s;
    for (int i = 1; i < d->size; i++)
        if (all[i] != all[0]) {
            *first_bad = i;
            break;
        }
    if (*first_bad < 0) *first_bad = 0;
    free(all);
    return VF_OK;
}

static MPI_Datatype mpi_type(vf_dist_class c)
{
    switch (c) {
    case VF_DIST_I32: return MPI_INT32_T;
    case VF_DIST_U32: return MPI_UINT32_T;
    case VF_DIST_BOOL: return MPI_UINT8_T;
    default: return MPI_FLOAT;
    }
}

/* A collective on d->buf did not complete: the buffer is the pending
   collective's now, the next call allocates another. (A traced call
   reduces the plan's memory in place, which vkfuse_dist cannot keep: an
   abandoned collective there completes only if every rank joins it, i.e.
   a late rank started it just before the others' roll-call notices
   reached it.) */
static vf_status lose_buf(vf_dist *d, vf_status s)
{
    if (d->mpi->pending_buf == d->buf) d->buf = NULL, d->cap = 0;
    return s;
}

vf_status vf_dist_mpi_sum(vf_dist *d, void *buf, size_t count, vf_dist_class cls)
{
    size_t es = vf_dist_class_size(cls), step = d->chunk_bytes / es;
    if (step > INT_MAX) step = INT_MAX;
    if (step == 0) step = 1;
    char eb[MPI_MAX_ERROR_STRING];
    /* bool: MAX of 0/1 is the logical or */
    MPI_Op op = cls == VF_DIST_BOOL ? MPI_MAX : MPI_SUM;
    for (size_t at = 0; at < count; at += step) {
        int k = (int)(count - at < step ? count - at : step);
        MPI_Request rq;
        vf_status s = ready(d, "MPI_Iallreduce");
        if (s != VF_OK) return s;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + at * es, k, mpi_type(cls), op, d->mpi->comm, &rq);
        if (rc != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Iallreduce failed: %s", d->what, vf_dist_mpi_err(rc, eb));
        if ((s = wait_for(d, &rq, d->buf, "MPI_Iallreduce")) != VF_OK) return lose_buf(d, s);
    }
    return VF_OK;
}

vf_status vf_dist_mpi_bcast(vf_dist *d, void *buf, size_t bytes, int root)
{
    size_t step = d->chunk_bytes > INT_MAX ? INT_MAX : d->chunk_bytes;
    char eb[MPI_MAX_ERROR_STRING];
    for (size_t at = 0; at < bytes; at += step) {
        int k = (int)(bytes - at < step ? bytes - at : step);
        MPI_Request rq;
        vf_status s = ready(d, "MPI_Ibcast");
        if (s != VF_OK) return s;
        int rc = MPI_Ibcast((char *)buf + at, k, MPI_BYTE, root, d->mpi->comm, &rq);
        if (rc != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Ibcast failed: %s", d->what, vf_dist_mpi_err(rc, eb));
        if ((s = wait_for(d, &rq, d->buf, "MPI_Ibcast")) != VF_OK) return lose_buf(d, s);
    }
    return VF_OK;
}

void vf_dist_mpi_tell(vf_dist *d, uint64_t done, const char *msg) { send_notice(d, 0, done, msg); }

void vf_dist_mpi_close(vf_dist *d)
{
    struct vf_dist_mpi *m = d->mpi;
    int fin = 1;
    MPI_Finalized(&fin);
    if (!fin && m->comm != MPI_COMM_NULL) {
        send_notice(d, 1, d->calls, "it called vf_dist_destroy");
        /* the communicator (and a collective pending on it) stays until the
           other ranks' notices arrived: see the top of this file */
        leftover *l = calloc(1, sizeof *l);
        if (l) {
            *l = (leftover){.rq = m->pending, .buf = m->pending_buf, .comm = m->comm, .heard = m->heard,
                            .size = d->size, .rank = d->rank};
            keep(l);
            m->heard = NULL;
        }
        vf_dist_mpi_progress();
    } else if (fin || m->pending == MPI_REQUEST_NULL) {
        free(m->pending_buf); /* MPI is gone (or nothing pends): nothing writes it any more */
    }
    free(m->heard);
    free(m->waited);
    for (int r = 0; m->why && r < d->size; r++) free(m->why[r]);
    free(m->why);
    free(m);
    d->mpi = NULL;
}
