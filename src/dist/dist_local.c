/* vkfuse_dist inside one process: n ranks, one context and one thread
 * each, meeting in shared memory. Every collective is two barriers: after
 * the first every rank's buffer is posted and each rank computes the whole
 * result itself (summing ranks 0, 1, ... in order, so all ranks get the
 * same bits); after the second nobody reads the others' buffers any more
 * and each copies its result in. Waits are bounded by the timeout and end
 * early when a rank says it failed or left, as over MPI. */
#include "dist/dist.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct vf_dist_local {
    int n;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t gen;           /* barrier generation */
    int arrived;
    bool *taken;            /* [n]: a vf_dist holds this rank */
    const void **post;      /* [n]: the buffers of the collective in progress */
    uint64_t *sig;          /* [n] */
    uint64_t *left_after;   /* [n]: UINT64_MAX, or the calls it completed before failing or leaving */
    uint64_t *gave_up;      /* [n]: the call in which it stopped waiting (timeout), or 0 */
    char (*text)[256];      /* [n]: why */
};

vf_dist_local *vf_dist_local_create(int n)
{
    if (n < 1 || n > 4096)
        return vf_dist_create_failed("vf_dist_local_create: %d ranks; a local group has 1 .. 4096", n), NULL;
    vf_dist_local *g = calloc(1, sizeof *g);
    if (!g) return vf_dist_create_failed("vf_dist_local_create: out of host memory"), NULL;
    g->n = n;
    g->taken = calloc((size_t)n, sizeof *g->taken);
    g->post = calloc((size_t)n, sizeof *g->post);
    g->sig = calloc((size_t)n, sizeof *g->sig);
    g->left_after = calloc((size_t)n, sizeof *g->left_after);
    g->gave_up = calloc((size_t)n, sizeof *g->gave_up);
    g->text = calloc((size_t)n, sizeof *g->text);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    bool ok = g->taken && g->post && g->sig && g->left_after && g->gave_up && g->text &&
              pthread_mutex_init(&g->mu, NULL) == 0;
    if (ok && pthread_cond_init(&g->cv, &ca) != 0) {
        pthread_mutex_destroy(&g->mu);
        ok = false;
    }
    pthread_condattr_destroy(&ca);
    if (!ok) {
        free(g->taken), free(g->post), free(g->sig), free(g->left_after), free(g->gave_up), free(g->text), free(g);
        vf_dist_create_failed("vf_dist_local_create: out of host memory");
        return NULL;
    }
    for (int r = 0; r < n; r++) g->left_after[r] = UINT64_MAX;
    return g;
}

void vf_dist_local_destroy(vf_dist_local *g)
{
    if (!g) return;
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g->taken), free(g->post), free(g->sig), free(g->left_after), free(g->gave_up), free(g->text), free(g);
}

vf_status vf_dist_local_open(vf_dist *d, const vf_dist_desc *desc)
{
    vf_dist_local *g = desc->local;
    d->rank = desc->local_rank;
    if (desc->local_rank < 0 || desc->local_rank >= g->n)
        return vf_dist_fail(d, VF_ERROR_INVALID_ARGUMENT, true,
                            "vf_dist_create: desc.local_rank %d is not a rank of the group (0 .. %d)", desc->local_rank,
                            g->n - 1);
    pthread_mutex_lock(&g->mu);
    bool taken = g->taken[d->rank];
    g->taken[d->rank] = true;
    if (!taken) g->left_after[d->rank] = UINT64_MAX, g->gave_up[d->rank] = 0, g->text[d->rank][0] = 0;
    pthread_mutex_unlock(&g->mu);
    if (taken)
        return vf_dist_fail(d, VF_ERROR_INVALID_ARGUMENT, true,
                            "vf_dist_create: rank %d of the local group is held by another vf_dist", d->rank);
    d->local = g;
    d->size = g->n;
    return VF_OK;
}

/* With g->mu held: a rank that will not come to the current call. */
static vf_status check_left(vf_dist *d)
{
    vf_dist_local *g = d->local;
    for (int r = 0; r < g->n; r++)
        if (r != d->rank && g->left_after[r] < d->calls)
            return vf_dist_fail(d, VF_ERROR_DEVICE, true, "%s (call %llu): rank %d failed or left after call %llu: %s",
                                d->what, (unsigned long long)d->calls, r, (unsigned long long)g->left_after[r],
                                g->text[r]);
    return VF_OK;
}

static vf_status barrier(vf_dist *d)
{
    vf_dist_local *g = d->local;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    double t = (double)dl.tv_sec + 1e-9 * (double)dl.tv_nsec + d->timeout_s;
    dl.tv_sec = (time_t)t, dl.tv_nsec = (long)((t - (double)(time_t)t) * 1e9);
    pthread_mutex_lock(&g->mu);
    vf_status s = check_left(d);
    /* a rank that stopped waiting in this call: this one came too late (its
       count must not complete the barrier the others left) */
    for (int r = 0; s == VF_OK && r < g->n; r++)
        if (r != d->rank && g->gave_up[r] == d->calls)
            s = vf_dist_fail(d, VF_ERROR_DEVICE, true,
                             "%s (call %llu): the others gave up waiting for this rank: rank %d's timeout_s ran out "
                             "in this call before this rank came to it; make new vf_dists, and set "
                             "vf_dist_desc.timeout_s above the longest pause between the ranks' calls",
                             d->what, (unsigned long long)d->calls, r);
    uint64_t gen = g->gen;
    if (s == VF_OK && ++g->arrived == g->n) {
        g->arrived = 0;
        g->gen++;
        pthread_cond_broadcast(&g->cv);
    }
    while (s == VF_OK && g->gen == gen) {
        if ((s = check_left(d)) != VF_OK) break;
        if (pthread_cond_timedwait(&g->cv, &g->mu, &dl) == ETIMEDOUT && g->gen == gen) {
            g->arrived--; /* withdrawn: a late rank must not complete the barrier in its name */
            g->gave_up[d->rank] = d->calls;
            s = vf_dist_fail(d, VF_ERROR_DEVICE, true,
                             "%s (call %llu): the other ranks did not arrive within %.3g s: a thread died, stopped "
                             "or does not make the same calls (set vf_dist_desc.timeout_s to wait longer)",
                             d->what, (unsigned long long)d->calls, d->timeout_s);
        }
    }
    pthread_mutex_unlock(&g->mu);
    return s;
}

vf_status vf_dist_local_check(vf_dist *d, uint64_t sig, int *first_bad)
{
    vf_dist_local *g = d->local;
    g->sig[d->rank] = sig; /* read by others only after the barrier */
    vf_status s = barrier(d);
    *first_bad = -1;
    for (int r = 1; s == VF_OK && r < g->n && *first_bad < 0; r++)
        if (g->sig[r] != g->sig[0]) *first_bad = r;
    return s == VF_OK ? barrier(d) : s;
}

vf_status vf_dist_local_sum(vf_dist *d, void *buf, size_t count, vf_dist_class cls)
{
    vf_dist_local *g = d->local;
    size_t es = vf_dist_class_size(cls);
    void *acc = malloc(count > 0 ? count * es : 1);
    if (!acc) return vf_dist_fail(d, VF_ERROR_OUT_OF_MEMORY, true, "%s: out of host memory", d->what);
    g->post[d->rank] = buf;
    vf_status s = barrier(d);
    if (s == VF_OK) {
        memcpy(acc, g->post[0], count * es);
        for (int r = 1; r < g->n; r++) {
            const void *p = g->post[r];
            switch (cls) {
            case VF_DIST_F32:
                for (size_t k = 0; k < count; k++) ((float *)acc)[k] += ((const float *)p)[k];
                break;
            case VF_DIST_I32: /* wraps, as MPI's sum does */
                for (size_t k = 0; k < count; k++)
                    ((int32_t *)acc)[k] = (int32_t)((uint32_t)((int32_t *)acc)[k] + (uint32_t)((const int32_t *)p)[k]);
                break;
            case VF_DIST_U32:
                for (size_t k = 0; k < count; k++) ((uint32_t *)acc)[k] += ((const uint32_t *)p)[k];
                break;
            default:
                for (size_t k = 0; k < count; k++) ((uint8_t *)acc)[k] |= ((const uint8_t *)p)[k];
            }
        }
        s = barrier(d);
    }
    if (s == VF_OK) memcpy(buf, acc, count * es);
    free(acc);
    return s;
}

vf_status vf_dist_local_bcast(vf_dist *d, void *buf, size_t bytes, int root)
{
    vf_dist_local *g = d->local;
    g->post[d->rank] = buf;
    vf_status s = barrier(d);
    if (s == VF_OK && d->rank != root && bytes) memcpy(buf, g->post[root], bytes);
    return s == VF_OK ? barrier(d) : s;
}

static void tell(vf_dist *d, uint64_t done, const char *msg)
{
    vf_dist_local *g = d->local;
    pthread_mutex_lock(&g->mu);
    if (g->left_after[d->rank] == UINT64_MAX) {
        g->left_after[d->rank] = done;
        snprintf(g->text[d->rank], sizeof g->text[d->rank], "%s", msg);
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void vf_dist_local_tell(vf_dist *d, uint64_t done, const char *msg) { tell(d, done, msg); }

void vf_dist_local_close(vf_dist *d)
{
    vf_dist_local *g = d->local;
    tell(d, d->calls, "it called vf_dist_destroy");
    pthread_mutex_lock(&g->mu);
    g->taken[d->rank] = false;
    pthread_mutex_unlock(&g->mu);
}
