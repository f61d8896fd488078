/* vkfuse_dist over MPI: a duplicated communicator with MPI_ERRORS_RETURN,
 * non-blocking collectives polled against a deadline (MPI itself never
 * times out: a peer that stopped calling would hang a blocking call), and
 * small "notice" messages by which a rank that failed or left tells the
 * others, so that they fail naming it instead of waiting for the timeout. */
#include "dist/dist.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOTICE_TAG 7171

typedef struct {
    int32_t rank;
    int32_t left; /* 1: vf_dist_destroy, 0: failed, 2: timed out (the roll call) */
    uint64_t done; /* calls completed before it failed or left */
    char text[496];
} notice;

struct vf_dist_mpi {
    MPI_Comm comm;
    bool *heard;            /* [size]: a notice came from this rank (the roll call) */
    bool roll;              /* another rank gave up: answer its roll call */
    bool told;              /* sent its notice: one per rank, later failures are consequences */
    notice in;
};

/* Sent notices are never waited for (a dead peer must not block the
   sender), so MPI may read them after the vf_dist is gone: they live here,
   one slot per vf_dist ever created, reused after 64. */
static notice sent[64];
static unsigned sent_next;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void nap(int polls)
{
    /* spin briefly (a step's allreduce is usually quick), then sleep longer:
       ranks may share cores (mpirun --oversubscribe) */
    struct timespec ts = {0, polls < 50 ? 0 : polls < 500 ? 20000 : 500000};
    if (ts.tv_nsec) nanosleep(&ts, NULL);
}

static const char *mpi_err(int rc, char *buf)
{
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, MPI_MAX_ERROR_STRING, "MPI error %d", rc);
    return buf;
}

/* A roll call found a silent rank: it may be dead, and Open MPI's
   MPI_Finalize then waits for it forever. */
static bool peer_silent;

static void at_exit_finalize(void)
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
        if (MPI_Iprobe(MPI_ANY_SOURCE, NOTICE_TAG, m->comm, &flag, &st) != MPI_SUCCESS || !flag) break;
        if (MPI_Recv(&m->in, sizeof m->in, MPI_BYTE, st.MPI_SOURCE, NOTICE_TAG, m->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            break;
        m->in.text[sizeof m->in.text - 1] = 0;
        int r = st.MPI_SOURCE;
        m->heard[r] = true;
        if (m->in.left != 2) d->left_after[r] = m->in.done; /* a roll call is no goodbye */
        if (m->in.left == 2 && m->in.done < d->calls) m->roll = true;
        else if (m->in.done < d->calls && !quiet)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s (call %llu): rank %d %s: %s", d->what,
                                (unsigned long long)d->calls, r,
                                m->in.left == 1 ? "left (vf_dist_destroy) before this call"
                                : m->in.left == 2 ? "gave up"
                                                  : "failed",
                                m->in.text);
    }
    if (quiet) return VF_OK;
    for (int r = 0; r < d->size; r++)
        if (d->left_after[r] < d->calls)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s (call %llu): rank %d left or failed after call %llu",
                                d->what, (unsigned long long)d->calls, r, (unsigned long long)d->left_after[r]);
    return VF_OK;
}

static void send_notice(vf_dist *d, int left, uint64_t done, const char *msg);

/* The deadline passed. MPI cannot say which peer is missing, so ask: tell
   every rank this one gives up, and listen for a while; live ranks stuck in
   the same call give up about as late and answer. The silent ones are named. */
static vf_status roll_call(vf_dist *d, const char *op)
{
    struct vf_dist_mpi *m = d->mpi;
    char msg[128];
    snprintf(msg, sizeof msg, "its %s in call %llu timed out after %.3g s", op, (unsigned long long)d->calls,
             d->timeout_s);
    send_notice(d, 2, d->calls - 1, msg);
    double until = now() + (d->timeout_s < 2 ? d->timeout_s : 2);
    for (int polls = 0; now() < until; polls++) {
        poll_notices(d, true);
        int missing = 0;
        for (int r = 0; r < d->size; r++) missing += r != d->rank && !m->heard[r];
        if (!missing) break;
        nap(polls + 500);
    }
    char silent[200] = "";
    int k = 0, n = 0;
    for (int r = 0; r < d->size && k < (int)sizeof silent - 12; r++)
        if (r != d->rank && !m->heard[r]) k += snprintf(silent + k, sizeof silent - (size_t)k, "%s%d", n++ ? ", " : "", r);
    if (n) peer_silent = true;
    if (n)
        return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                            "%s (call %llu): %s did not complete within %.3g s; rank%s %s did not answer: died, exited, "
                            "or stopped making the same calls (set vf_dist_desc.timeout_s to wait longer)",
                            d->what, (unsigned long long)d->calls, op, d->timeout_s, n > 1 ? "s" : "", silent);
    return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                        "%s (call %llu): %s did not complete within %.3g s, though every rank answered: the ranks "
                        "do not make the same calls",
                        d->what, (unsigned long long)d->calls, op, d->timeout_s);
}

/* Waits for rq: VF_OK when done; VF_ERROR_DEVICE on an MPI error, a
   notice from a rank that will not come, or the deadline. */
static vf_status wait_for(vf_dist *d, MPI_Request *rq, const char *op)
{
    double deadline = now() + d->timeout_s;
    char eb[MPI_MAX_ERROR_STRING];
    for (int polls = 0;; polls++) {
        int done = 0;
        int rc = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s (call %llu): %s failed: %s", d->what,
                                (unsigned long long)d->calls, op, mpi_err(rc, eb));
        if (done) return VF_OK;
        vf_status s = poll_notices(d, false);
        if (s != VF_OK) return s;
        if (now() > deadline || d->mpi->roll) return roll_call(d, op);
        nap(polls);
    }
}

vf_status vf_dist_mpi_open(vf_dist *d, const vf_dist_desc *desc)
{
    int inited = 0, fin = 0;
    char eb[MPI_MAX_ERROR_STRING];
    MPI_Finalized(&fin);
    if (fin) return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI was finalised already");
    MPI_Initialized(&inited);
    if (!inited) {
        int rc = MPI_Init(NULL, NULL);
        if (rc != MPI_SUCCESS) return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI_Init failed: %s", mpi_err(rc, eb));
        atexit(at_exit_finalize);
    }
    MPI_Comm base = desc->comm == (MPI_Comm)0 ? MPI_COMM_WORLD : desc->comm;
    if (base == MPI_COMM_NULL)
        return vf_dist_fail(d, VF_ERROR_INVALID_ARGUMENT, true, "vf_dist_create: desc.comm is MPI_COMM_NULL");
    int n = 0;
    MPI_Comm_size(base, &n);
    d->mpi = calloc(1, sizeof *d->mpi);
    if (d->mpi) d->mpi->heard = calloc(n > 0 ? (size_t)n : 1, sizeof *d->mpi->heard);
    if (d->mpi && !d->mpi->heard) free(d->mpi), d->mpi = NULL;
    if (!d->mpi) return vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "vf_dist_create: out of host memory");
    d->mpi->comm = MPI_COMM_NULL;
    MPI_Comm_rank(base, &d->rank);
    MPI_Comm_size(base, &d->size);
    MPI_Request rq;
    int rc = MPI_Comm_idup(base, &d->mpi->comm, &rq);
    if (rc != MPI_SUCCESS) return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI_Comm_idup failed: %s", mpi_err(rc, eb));
    double deadline = now() + d->timeout_s;
    for (int polls = 0, done = 0; !done; polls++) {
        if ((rc = MPI_Test(&rq, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI_Comm_idup failed: %s", mpi_err(rc, eb));
        if (!done && now() > deadline)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                                "vf_dist_create: the other ranks did not call vf_dist_create within %.3g s", d->timeout_s);
        if (!done) nap(polls);
    }
    MPI_Comm_set_errhandler(d->mpi->comm, MPI_ERRORS_RETURN);
    return VF_OK;
}

vf_status vf_dist_mpi_check(vf_dist *d, uint64_t sig, int *first_bad)
{
    /* max of sig and of ~sig: every rank had the same sig iff max(sig) == sig
       and max(~sig) == ~sig on every rank */
    uint64_t v[2] = {sig, ~sig}, r[2];
    MPI_Request rq;
    char eb[MPI_MAX_ERROR_STRING];
    vf_status s = poll_notices(d, false);
    if (s != VF_OK) return s;
    int rc = MPI_Iallreduce(v, r, 2, MPI_UINT64_T, MPI_MAX, d->mpi->comm, &rq);
    if (rc != MPI_SUCCESS) return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Iallreduce failed: %s", d->what, mpi_err(rc, eb));
    if ((s = wait_for(d, &rq, "the signature check")) != VF_OK) return s;
    *first_bad = -1;
    if (r[0] == v[0] && r[1] == v[1]) return VF_OK;
    /* they differ: every rank sees it; gather all to name the first that differs from rank 0 */
    uint64_t *all = malloc(sizeof *all * (size_t)d->size);
    if (!all) return vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "%s: out of host memory", d->what);
    rc = MPI_Iallgather(&sig, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, d->mpi->comm, &rq);
    if (rc == MPI_SUCCESS) s = wait_for(d, &rq, "the signature gather");
    else s = vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Iallgather failed: %s", d->what, mpi_err(rc, eb));
    for (int i = 1; s == VF_OK && i < d->size; i++)
        if (all[i] != all[0]) {
            *first_bad = i;
            break;
        }
    if (s == VF_OK && *first_bad < 0) *first_bad = 0;
    free(all);
    return s;
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
        int rc = MPI_Iallreduce(MPI_IN_PLACE, (char *)buf + at * es, k, mpi_type(cls), op, d->mpi->comm, &rq);
        if (rc != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Iallreduce failed: %s", d->what, mpi_err(rc, eb));
        vf_status s = wait_for(d, &rq, "MPI_Iallreduce");
        if (s != VF_OK) return s;
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
        int rc = MPI_Ibcast((char *)buf + at, k, MPI_BYTE, root, d->mpi->comm, &rq);
        if (rc != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s: MPI_Ibcast failed: %s", d->what, mpi_err(rc, eb));
        vf_status s = wait_for(d, &rq, "MPI_Ibcast");
        if (s != VF_OK) return s;
    }
    return VF_OK;
}

static void send_notice(vf_dist *d, int left, uint64_t done, const char *msg)
{
    struct vf_dist_mpi *m = d->mpi;
    if (!m || m->comm == MPI_COMM_NULL || m->told) return;
    m->told = true;
    notice *out = &sent[__atomic_fetch_add(&sent_next, 1, __ATOMIC_RELAXED) % 64];
    *out = (notice){.rank = d->rank, .left = left, .done = done};
    snprintf(out->text, sizeof out->text, "%s", msg);
    /* small messages go eagerly: the sends complete without the peers
       receiving; they are never waited for, a dead peer must not block us */
    for (int r = 0; r < d->size; r++) {
        if (r == d->rank) continue;
        MPI_Request rq;
        if (MPI_Isend(out, sizeof *out, MPI_BYTE, r, NOTICE_TAG, m->comm, &rq) == MPI_SUCCESS)
            MPI_Request_free(&rq);
    }
}

void vf_dist_mpi_tell(vf_dist *d, uint64_t done, const char *msg) { send_notice(d, 0, done, msg); }

void vf_dist_mpi_close(vf_dist *d)
{
    struct vf_dist_mpi *m = d->mpi;
    int fin = 1;
    MPI_Finalized(&fin);
    if (!fin && m->comm != MPI_COMM_NULL) {
        send_notice(d, 1, d->calls, "it called vf_dist_destroy");
        /* a broken communicator may have collectives that never end: keep it */
        if (!d->broken) MPI_Comm_free(&m->comm);
    }
    free(m->heard);
    free(m);
    d->mpi = NULL;
}
