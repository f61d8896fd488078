/* vf_dist_create over MPI: the ranks agree to make a vf_dist, then
 * duplicate desc.comm for it.
 *
 * Why not just MPI_Comm_idup with a deadline: a collective cannot be
 * cancelled, so a rank that gave up waiting would leave it pending, and a
 * late rank's MPI_Comm_idup would then complete against it: the late rank
 * would get a communicator the others had given up on, and every later
 * vf_dist_create would pair with the wrong one on the other ranks. So the
 * ranks first agree with small point-to-point messages (tag JOIN_TAG on
 * desc.comm), which a late rank can always read and the others can always
 * ignore, and only make the communicator once all of them are known to be
 * there:
 *
 *  - every rank counts its vf_dist_create calls on desc.comm (the serial,
 *    cached on the communicator as an MPI attribute): the k-th calls of
 *    all ranks belong together, older messages are ignored;
 *  - every rank but 0 sends rank 0 HELLO, then waits for rank 0's answer:
 *    GO, or GIVE_UP naming the ranks that did not come (with a flag for
 *    the rank it was waiting for: it is told it came too late);
 *  - rank 0 decides: GO once every HELLO arrived; GIVE_UP at its deadline,
 *    or at once when a rank says it quit;
 *  - a rank whose deadline passed without an answer sends QUIT and waits
 *    a grace period more: rank 0 may have answered just then. Rank 0 alone
 *    decides, so the ranks agree unless its answer takes longer than the
 *    grace period to arrive;
 *  - a rank whose vf_dist_create refuses its arguments still takes its
 *    turn: FAILED to rank 0 (or, as rank 0, GIVE_UP to all), so that the
 *    others fail at once naming it and every rank's count stays in step;
 *  - after GO, MPI_Comm_idup (all ranks are there: it completes at once).
 */
#include "dist/dist_mpi.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOIN_TAG 7170

enum { HELLO = 1, QUIT, FAILED, GO, GIVE_UP };

typedef struct {
    int32_t kind;
    int32_t late;     /* GIVE_UP: the receiver is one of the ranks that did not come in time */
    uint64_t serial;  /* which vf_dist_create of desc.comm */
    char text[240];   /* GIVE_UP, FAILED: why */
} join_msg;

/* Per communicator (an MPI attribute, freed with it): the count of
   vf_dist_create calls and, on rank 0, the latest HELLO, QUIT and FAILED
   of each rank (serials) with the last FAILED's text. */
typedef struct {
    uint64_t serial;
    int size;
    uint64_t *hello, *quit, *failed;
    char (*why)[240];
} join_state;

static int join_key = MPI_KEYVAL_INVALID;
static pthread_mutex_t join_mu = PTHREAD_MUTEX_INITIALIZER;

static int free_state(MPI_Comm comm, int key, void *val, void *extra)
{
    (void)comm, (void)key, (void)extra;
    join_state *js = val;
    free(js->hello);
    free(js->why);
    free(js);
    return MPI_SUCCESS;
}

static join_state *state_of(MPI_Comm base, int size)
{
    pthread_mutex_lock(&join_mu);
    if (join_key == MPI_KEYVAL_INVALID) MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, free_state, &join_key, NULL);
    pthread_mutex_unlock(&join_mu);
    join_state *js = NULL;
    int found = 0;
    MPI_Comm_get_attr(base, join_key, &js, &found);
    if (found && js) return js;
    js = calloc(1, sizeof *js);
    uint64_t *arrays = calloc(3 * (size_t)size, sizeof *arrays);
    char(*why)[240] = calloc((size_t)size, sizeof *why);
    if (!js || !arrays || !why || MPI_Comm_set_attr(base, join_key, js) != MPI_SUCCESS) {
        free(js), free(arrays), free(why);
        return NULL;
    }
    *js = (join_state){.size = size, .hello = arrays, .quit = arrays + size, .failed = arrays + 2 * size, .why = why};
    return js;
}

static void send_msg(int kind, int late, uint64_t serial, const char *text, int dest, MPI_Comm base)
{
    join_msg msg = {.kind = kind, .late = late, .serial = serial};
    snprintf(msg.text, sizeof msg.text, "%s", text ? text : "");
    vf_dist_mpi_post(&msg, sizeof msg, dest, JOIN_TAG, base);
}

/* Receives one join message from src (MPI_ANY_SOURCE) if one is there. */
static bool take_msg(MPI_Comm base, int src, join_msg *msg, int *from)
{
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(src, JOIN_TAG, base, &flag, &st) != MPI_SUCCESS || !flag) return false;
    if (MPI_Recv(msg, sizeof *msg, MPI_BYTE, st.MPI_SOURCE, JOIN_TAG, base, MPI_STATUS_IGNORE) != MPI_SUCCESS)
        return false;
    msg->text[sizeof msg->text - 1] = 0;
    *from = st.MPI_SOURCE;
    return true;
}

static void list_ranks(char *s, size_t len, const join_state *js, uint64_t serial, int *n)
{
    size_t k = 0;
    *n = 0;
    s[0] = 0;
    for (int r = 1; r < js->size && k + 12 < len; r++)
        if (js->hello[r] < serial) k += (size_t)snprintf(s + k, len - k, "%s%d", (*n)++ ? ", " : "", r);
}

/* Rank 0: waits for every HELLO, answers GO or GIVE_UP. */
static vf_status decide(vf_dist *d, MPI_Comm base, join_state *js, uint64_t serial)
{
    double deadline = vf_dist_now() + d->timeout_s;
    for (int polls = 0;; polls++) {
        join_msg msg;
        int from;
        while (take_msg(base, MPI_ANY_SOURCE, &msg, &from)) {
            if (msg.kind == HELLO && msg.serial > js->hello[from]) js->hello[from] = msg.serial;
            if (msg.kind == QUIT && msg.serial > js->quit[from]) js->quit[from] = msg.serial;
            if (msg.kind == FAILED && msg.serial > js->failed[from])
                js->failed[from] = msg.serial, snprintf(js->why[from], sizeof js->why[from], "%s", msg.text);
        }
        int quitter = -1, failed = -1, missing = 0;
        for (int r = 1; r < d->size; r++) {
            /* a QUIT of a later serial implies this one's: a rank leaves a
               vf_dist_create without an answer only by quitting it */
            if (js->quit[r] >= serial && quitter < 0) quitter = r;
            if (js->failed[r] == serial && failed < 0) failed = r;
            missing += js->hello[r] < serial;
        }
        if (quitter < 0 && failed >= 0) {
            char why[240];
            snprintf(why, sizeof why, "rank %d failed: %.200s", failed, js->why[failed]);
            for (int r = 1; r < d->size; r++)
                if (r != failed) send_msg(GIVE_UP, 0, serial, why, r, base);
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: %s: make a new vf_dist on every rank", why);
        }
        if (quitter < 0 && !missing) { /* (a rank that failed sends no HELLO) */
            for (int r = 1; r < d->size; r++) send_msg(GO, 0, serial, NULL, r, base);
            return VF_OK;
        }
        if (quitter >= 0 || vf_dist_now() > deadline) {
            char ranks[160], why[240];
            int n;
            list_ranks(ranks, sizeof ranks, js, serial, &n);
            if (n)
                snprintf(why, sizeof why, "rank%s %s did not call vf_dist_create within %.3g s (timeout_s)",
                         n > 1 ? "s" : "", ranks, d->timeout_s);
            else
                snprintf(why, sizeof why, "rank 0 did not call vf_dist_create within rank %d's timeout_s", quitter);
            for (int r = 1; r < d->size; r++) send_msg(GIVE_UP, js->hello[r] < serial, serial, why, r, base);
            if (n)
                return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: %s: make a new vf_dist on every rank", why);
            return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                                "vf_dist_create: the others gave up waiting for this rank: rank %d's timeout_s ran out "
                                "before this rank called vf_dist_create; make a new vf_dist on every rank, and set "
                                "vf_dist_desc.timeout_s above the longest delay between the ranks' calls",
                                quitter);
        }
        vf_dist_mpi_progress();
        vf_dist_nap(polls);
    }
}

/* Every other rank: HELLO, then rank 0's answer. */
static vf_status await(vf_dist *d, MPI_Comm base, uint64_t serial)
{
    double deadline = vf_dist_now() + d->timeout_s;
    double grace = d->timeout_s < 0.5 ? 0.5 : d->timeout_s > 5 ? 5 : d->timeout_s;
    bool quit = false;
    send_msg(HELLO, 0, serial, NULL, 0, base);
    for (int polls = 0;; polls++) {
        join_msg msg;
        int from;
        bool last = vf_dist_now() > deadline + grace;
        while (take_msg(base, 0, &msg, &from)) {
            if (msg.serial != serial) continue; /* an answer to an earlier vf_dist_create */
            if (msg.kind == GO) return VF_OK;
            if (msg.late)
                return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                                    "vf_dist_create: the others gave up waiting for this rank (%s); make a new "
                                    "vf_dist on every rank, and set vf_dist_desc.timeout_s above the longest delay "
                                    "between the ranks' calls",
                                    msg.text);
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: %s: make a new vf_dist on every rank", msg.text);
        }
        if (last)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                                "vf_dist_create: rank 0 did not call vf_dist_create within %.3g s (timeout_s), or "
                                "died; make a new vf_dist on every rank",
                                d->timeout_s);
        if (!quit && vf_dist_now() > deadline) {
            send_msg(QUIT, 0, serial, NULL, 0, base);
            quit = true;
        }
        vf_dist_mpi_progress();
        vf_dist_nap(polls);
    }
}

void vf_dist_mpi_refuse(const vf_dist_desc *desc, const char *why)
{
    int inited = 0, fin = 1, rank = 0, size = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    MPI_Comm base = desc->comm == (MPI_Comm)0 ? MPI_COMM_WORLD : desc->comm;
    if (!inited || fin || base == MPI_COMM_NULL) return;
    MPI_Comm_rank(base, &rank);
    MPI_Comm_size(base, &size);
    join_state *js = state_of(base, size);
    if (!js) return;
    uint64_t serial = ++js->serial;
    char text[240];
    snprintf(text, sizeof text, "%s", why);
    if (rank != 0) {
        send_msg(FAILED, 0, serial, text, 0, base);
        return;
    }
    char msg[240];
    snprintf(msg, sizeof msg, "rank 0 failed: %.200s", text);
    for (int r = 1; r < size; r++) send_msg(GIVE_UP, 0, serial, msg, r, base);
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
        if (rc != MPI_SUCCESS)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI_Init failed: %s", vf_dist_mpi_err(rc, eb));
        atexit(vf_dist_mpi_at_exit);
    }
    MPI_Comm base = desc->comm == (MPI_Comm)0 ? MPI_COMM_WORLD : desc->comm;
    if (base == MPI_COMM_NULL)
        return vf_dist_fail(d, VF_ERROR_INVALID_ARGUMENT, true, "vf_dist_create: desc.comm is MPI_COMM_NULL");
    MPI_Comm_rank(base, &d->rank);
    MPI_Comm_size(base, &d->size);
    struct vf_dist_mpi *m = d->mpi = calloc(1, sizeof *d->mpi);
    if (m) {
        m->comm = MPI_COMM_NULL;
        m->pending = MPI_REQUEST_NULL;
        m->heard = calloc((size_t)d->size, sizeof *m->heard);
        m->waited = malloc((size_t)d->size * sizeof *m->waited);
        m->why = calloc((size_t)d->size, sizeof *m->why);
        for (int r = 0; m->waited && r < d->size; r++) m->waited[r] = -1;
    }
    join_state *js = m && m->heard && m->waited && m->why ? state_of(base, d->size) : NULL;
    if (!js) return vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "vf_dist_create: out of host memory");
    uint64_t serial = ++js->serial;
    vf_dist_mpi_progress();
    vf_status s = d->rank == 0 ? decide(d, base, js, serial) : await(d, base, serial);
    if (s != VF_OK) return s;

    MPI_Comm *comm = malloc(sizeof *comm); /* on the heap: an abandoned idup writes it later */
    MPI_Request rq;
    int rc = comm ? MPI_Comm_idup(base, comm, &rq) : MPI_ERR_NO_MEM;
    if (rc != MPI_SUCCESS) {
        free(comm);
        return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI_Comm_idup failed: %s", vf_dist_mpi_err(rc, eb));
    }
    double deadline = vf_dist_now() + d->timeout_s;
    for (int polls = 0, done = 0; !done; polls++) {
        if ((rc = MPI_Test(&rq, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS || (!done && vf_dist_now() > deadline)) {
            vf_dist_mpi_abandon(rq, comm);
            if (rc != MPI_SUCCESS)
                return vf_dist_fail(d, VF_ERROR_DEVICE, true, "vf_dist_create: MPI_Comm_idup failed: %s",
                                    vf_dist_mpi_err(rc, eb));
            return vf_dist_fail(d, VF_ERROR_DEVICE, true,
                                "vf_dist_create: every rank called it, but duplicating the communicator did not "
                                "complete within %.3g s (a rank died?)",
                                d->timeout_s);
        }
        if (!done) vf_dist_nap(polls);
    }
    m->comm = *comm;
    free(comm);
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    return VF_OK;
}
