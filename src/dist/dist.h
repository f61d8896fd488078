/* vkfuse_dist internals: the vf_dist object and its two transports (MPI,
 * src/dist/dist_mpi.c; threads of one process, src/dist/dist_local.c).
 * dist.c packs tensors into host buffers and calls a transport; a
 * transport only moves and sums flat arrays. Not part of libvkfuse: this
 * folder builds libvkfuse_dist, which sees vkfuse.h only. */
#ifndef VF_DIST_INTERNAL_H
#define VF_DIST_INTERNAL_H

#include <vkfuse_dist.h>

#include <stdint.h>

/* How a packed region is summed: f16 travels as f32. */
typedef enum { VF_DIST_F32, VF_DIST_I32, VF_DIST_U32, VF_DIST_BOOL, VF_DIST_NCLASS } vf_dist_class;

struct vf_dist {
    vf_context *ctx;
    int rank, size;
    double timeout_s;
    size_t chunk_bytes;
    uint64_t calls;         /* collective calls started; the current one's number */
    bool broken;            /* a call failed: later calls fail with err */
    char err[640];
    const char *what;       /* the call in progress, for messages */
    void *buf;              /* packed host buffer, grown on demand */
    size_t cap;
    uint64_t *left_after;   /* [size]: calls a rank said it completed before it failed
                               or left; UINT64_MAX: still in */
    struct vf_dist_node *nodes;  /* the graph nodes of traced calls (dist_traced.c) */
    double traced_s;             /* time in their host steps (vf_dist_traced_seconds) */
    struct vf_dist_mpi *mpi;     /* one of the two transports */
    vf_dist_local *local;
};

/* Both transports: VF_OK, or VF_ERROR_DEVICE with d->err set and d->broken. */
vf_status vf_dist_mpi_open(vf_dist *d, const vf_dist_desc *desc);
/* vf_dist_create's arguments were bad on this rank (why): tells the others,
   which fail at once, instead of joining (nothing if MPI is not running). */
void vf_dist_mpi_refuse(const vf_dist_desc *desc, const char *why);
vf_status vf_dist_mpi_check(vf_dist *d, uint64_t sig, int *first_bad);
vf_status vf_dist_mpi_sum(vf_dist *d, void *buf, size_t count, vf_dist_class cls);
vf_status vf_dist_mpi_bcast(vf_dist *d, void *buf, size_t bytes, int root);
void vf_dist_mpi_tell(vf_dist *d, uint64_t done, const char *msg);
void vf_dist_mpi_close(vf_dist *d);

vf_status vf_dist_local_open(vf_dist *d, const vf_dist_desc *desc);
vf_status vf_dist_local_check(vf_dist *d, uint64_t sig, int *first_bad);
vf_status vf_dist_local_sum(vf_dist *d, void *buf, size_t count, vf_dist_class cls);
vf_status vf_dist_local_bcast(vf_dist *d, void *buf, size_t bytes, int root);
void vf_dist_local_tell(vf_dist *d, uint64_t done, const char *msg);
void vf_dist_local_close(vf_dist *d);

/* d->err = "vf_dist rank R: <fmt>", d->broken when fatal; returns st. */
/* A create of vkfuse_dist failed (vf_dist_create, vf_dist_local_create):
   the message vf_dist_create_error() gives this thread. */
void vf_dist_create_failed(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
vf_status vf_dist_fail(vf_dist *d, vf_status st, bool fatal, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Starts a call (refused when broken; counts it). */
vf_status vf_dist_begin(vf_dist *d, const char *what);
/* The signature check of a call: VF_ERROR_SHAPE naming the rank when the
   ranks' sigs differ; desc is this rank's tensors, for the message. */
vf_status vf_dist_check(vf_dist *d, uint64_t sig, const char *desc);
/* vf_dist_allreduce while tracing (dist_traced.c): in[] were inspected
   (sig, desc); out[] set to the symbolic results. */
vf_status vf_dist_traced_allreduce(vf_dist *d, int n, vf_tensor *const *in, vf_dist_op op, vf_tensor **out,
                                   const char *desc, uint64_t sig);
void vf_dist_traced_free(vf_dist *d);

/* Bytes per element of a class in the packed buffer. */
size_t vf_dist_class_size(vf_dist_class c);

#endif
