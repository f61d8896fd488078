/* vkfuse_dist: data-parallel training across processes (MPI) or across
 * contexts in one process (threads), on top of vkfuse's public API.
 *
 * A separate library (libvkfuse_dist, pkg-config vkfuse_dist, CMake target
 * vkfuse::vkfuse_dist): programs that do not use it never link MPI.
 *
 * The recipe (Horovod's): broadcast the variables from rank 0 once, then
 * after every step average the gradients with one allreduce:
 *
 *      vf_dist *d;
 *      vf_dist_create(ctx, NULL, &d);                 // MPI_COMM_WORLD
 *      vf_dist_broadcast(d, 6, vars, 0);               // same start on every rank
 *      ... each step: grads of this rank's shard of the batch ...
 *      vf_dist_allreduce(d, 6, grads, VF_DIST_MEAN, avg);
 *      ... apply avg ...
 *      vf_dist_destroy(d);
 *
 * Every rank must make the same calls in the same order with tensors of the
 * same dtypes and shapes (a rank is one process, or one context of a local
 * group). Calls are collective: they return when every rank has taken part.
 *
 * Errors: each call returns a status; vf_dist_error_message(d) says what
 * was wrong. A rank that fails inside a call (a NULL or unreadable tensor,
 * a bad argument) tells the others, which fail at once with
 * VF_ERROR_DEVICE naming it; shapes that differ give VF_ERROR_SHAPE on
 * every rank; a rank that called vf_dist_destroy makes the others' next
 * call fail at once ("rank N left"); a rank that died or stopped calling
 * makes the others fail with VF_ERROR_DEVICE after desc.timeout_s, and a
 * rank that comes to a call after that is told the others gave up waiting
 * for it. Any of these breaks the vf_dist on every rank: every later call
 * fails at once with the same message (the ranks cannot be trusted to be
 * in step any more). To go on, destroy it and make a new one on every
 * rank: a new vf_dist never sees anything of an earlier one.
 * docs/DISTRIBUTED.md has the details and Open MPI's own behaviour when a
 * process dies.
 *
 * Threads: one vf_dist is used by one thread at a time.
 */
#ifndef VKFUSE_DIST_H
#define VKFUSE_DIST_H

#include <mpi.h>
#include <vkfuse.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vf_dist vf_dist;

/* An in-process group: n ranks, one context each, each used by its own
   thread; collectives go through shared memory, no MPI at all. Create it
   once, give it to the n vf_dist_create calls (desc.local, desc.local_rank),
   destroy it after every member is destroyed. NULL when n is not 1 ..
   4096 or memory runs out, vf_dist_create_error() saying which. */
typedef struct vf_dist_local vf_dist_local;
VF_API vf_dist_local *vf_dist_local_create(int n);
VF_API void vf_dist_local_destroy(vf_dist_local *g);

/* All-zero is the default: MPI_COMM_WORLD, a 300 s timeout. */
typedef struct {
    MPI_Comm comm;          /* 0: MPI_COMM_WORLD. vf_dist duplicates it, so its
                               messages never mix with the caller's. MPI is
                               initialised (MPI_Init) if the caller has not, and
                               then finalised at exit. */
    double timeout_s;       /* how long a call (and vf_dist_create) waits for the
                               other ranks before it fails with VF_ERROR_DEVICE;
                               0: 300 s (a first call may wait for a slow rank's
                               shader compilation) */
    size_t chunk_bytes;     /* the largest single MPI message; bigger packs are
                               reduced in several pieces (0: 1 GiB) */
    vf_dist_local *local;   /* non-NULL: a rank of this in-process group, no MPI */
    int local_rank;         /* with local: this context's rank, 0 .. n-1 */
} vf_dist_desc;

typedef enum { VF_DIST_SUM, VF_DIST_MEAN } vf_dist_op;

/* Collective over the communicator (or the local group). desc may be NULL.
   On error *out is NULL and vf_dist_create_error() says why.
   Over MPI every rank must call it within timeout_s of rank 0 (of
   desc.comm): rank 0 waits timeout_s for the others, then all fail with
   VF_ERROR_DEVICE naming the ranks that did not come ("rank 2 did not call
   vf_dist_create within ..."); a rank that comes later is told "the
   others gave up waiting for this rank". The others wait for rank 0 up to
   timeout_s plus a grace of timeout_s (at least 0.5 s, at most 5 s). A
   rank whose arguments are refused (ctx NULL, a bad timeout_s) tells the
   others, which fail at once naming it. After such a failure every rank
   simply calls vf_dist_create again. It
   exchanges small messages with tag 7170 on desc.comm (before it
   duplicates it): a program's own receives on that communicator should not
   use MPI_ANY_TAG. */
VF_API vf_status vf_dist_create(vf_context *ctx, const vf_dist_desc *desc, vf_dist **out);
/* The message of the last vf_dist_create that failed on this thread. */
VF_API const char *vf_dist_create_error(void);
VF_API int vf_dist_rank(const vf_dist *d);   /* -1 for NULL */
VF_API int vf_dist_size(const vf_dist *d);   /* -1 for NULL */
VF_API vf_context *vf_dist_context(const vf_dist *d);

/* Sets every tensors[i] (variables of d's context) to root's value, in
   place, with one message for all of them. */
VF_API vf_status vf_dist_broadcast(vf_dist *d, int n, vf_tensor *const *tensors, int root);

/* out[i] = the sum (VF_DIST_SUM) or mean (VF_DIST_MEAN) over the ranks of
   in[i], a new tensor of in[i]'s dtype and shape owned by the innermost
   scope, identical on every rank. All tensors of one dtype are packed into
   one buffer reduced by one MPI_Allreduce (f16 is summed in f32 and rounded
   once). Integers: the mean truncates toward zero. bool: SUM is the logical
   or; MEAN is VF_ERROR_DTYPE. Ranks add in an order fixed by the MPI
   library, so results are identical on every rank but a float sum may
   differ in the last bits from one left-to-right sum. out may alias in
   (the inputs are then replaced, not released). Empty tensors are allowed.
   Inside a vf_function body it records a graph node per dtype class that
   reduces at every call (docs/DISTRIBUTED.md); such a function refers to
   d: destroy it before d. There a tensor may have one symbolic
   (input_signature -1) dim; two are VF_ERROR_UNSUPPORTED. */
VF_API vf_status vf_dist_allreduce(vf_dist *d, int n, vf_tensor *const *in, vf_dist_op op, vf_tensor **out);

/* What the last failed call on d was about ("" if none). */
VF_API const char *vf_dist_error_message(const vf_dist *d);
/* Wall seconds this rank has spent inside the host steps of traced
   allreduces (signature check, collective call, mean) since d was made:
   the allreduce part of a traced step, for benchmarks (-1 for NULL). */
VF_API double vf_dist_traced_seconds(const vf_dist *d);

/* Not collective; NULL is a no-op. Tell the others this rank has left: a
   rank still waiting in a call this one will never make fails at once.
   Over MPI what d left in flight (its communicator, a collective another
   rank never joined) is kept until MPI is done with it and freed during
   later vf_dist calls; it never reaches a later vf_dist. */
VF_API void vf_dist_destroy(vf_dist *d);

#ifdef __cplusplus
}
#endif

#endif
