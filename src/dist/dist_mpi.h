/* vkfuse_dist's MPI transport, shared by its two files: dist_mpi.c (the
 * calls, the notices, vf_dist_destroy and what a vf_dist leaves in flight)
 * and dist_mpi_join.c (vf_dist_create: the ranks agree to make a vf_dist,
 * then duplicate the communicator). */
#ifndef VF_DIST_MPI_INTERNAL_H
#define VF_DIST_MPI_INTERNAL_H

#include "dist/dist.h"

/* The one notice a rank sends every other rank over a vf_dist's
   communicator: when it fails inside a call, gives up waiting (roll call)
   or calls vf_dist_destroy. Exactly one per rank and communicator, so a
   rank knows when nothing more can arrive on it (then it frees it). */
typedef struct {
    int32_t rank;
    int32_t left;   /* 1: vf_dist_destroy, 0: failed, 2: timed out (the roll call) */
    uint64_t done;  /* calls completed before it failed or left */
    double waited;  /* roll call: seconds it had waited in the call */
    char text[488];
} vf_dist_notice;

struct vf_dist_mpi {
    MPI_Comm comm;          /* this vf_dist's own duplicate of desc.comm */
    bool *heard;            /* [size]: this rank's notice arrived */
    double *waited;         /* [size]: its roll call's vf_dist_notice.waited (-1: none) */
    bool roll;              /* another rank gave up in the current call: answer its roll call */
    bool told;              /* sent its notice */
    char **why;             /* [size]: its failure or goodbye notice, as the message that names it */
    double call_start;      /* when the current call began (for vf_dist_notice.waited) */
    MPI_Request pending;    /* a collective that never completed (MPI cannot cancel one) ... */
    void *pending_buf;      /* ... and the heap memory it reads and writes, owned from then on */
};

double vf_dist_now(void);
/* Pauses a polling loop: spins at first, then sleeps (ranks may share cores). */
void vf_dist_nap(int polls);
/* MPI's text for an error code, in buf (MPI_MAX_ERROR_STRING bytes). */
const char *vf_dist_mpi_err(int rc, char *buf);
/* Sends bytes (copied) to rank dest without waiting: the copy lives until
   MPI is done with it (vf_dist_mpi_progress frees it). */
void vf_dist_mpi_post(const void *bytes, int len, int dest, int tag, MPI_Comm comm);
/* Keeps an abandoned request and frees the heap memory it uses (buf, may
   be NULL) once it completes. A communicator an abandoned MPI_Comm_idup
   makes is never freed: another rank may still send on it. */
void vf_dist_mpi_abandon(MPI_Request rq, void *buf);
/* Moves what vf_dist's MPI calls left in flight along: completed sends
   and abandoned requests are freed; a destroyed vf_dist's communicator is
   freed once every rank's notice has arrived on it and nothing is
   pending there. Called by every wait loop. */
void vf_dist_mpi_progress(void);
/* atexit: MPI_Finalize when vkfuse_dist initialised MPI, unless a roll call
   found a silent (maybe dead) rank: Open MPI's would wait for it forever. */
void vf_dist_mpi_at_exit(void);

#endif
