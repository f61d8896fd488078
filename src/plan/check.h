/* VKFUSE_CHECK=1: every kernel of a recorded plan checked against the CPU
 * backend after each call (docs/TESTING.md).
 *
 * A checked plan is built without arena sharing: every intermediate that
 * exists in memory (all but the values internal to a fused group) gets a
 * per-call output binding, so after the run each kernel's outputs can be
 * downloaded. The check then replays the plan's execs in order on a CPU
 * backend of its own: each kernel gets the inputs the device kernel read
 * (params, captures, variables as they were before the call, and the
 * device's values of earlier kernels' outputs; values internal to a fused
 * group come from the CPU's own replay of the group), and each of its
 * outputs is compared by NMSE with the device's. The first kernel that
 * disagrees fails the call with VF_ERROR_DEVICE and a message naming the
 * kernel, the graph nodes it covers and the file with its GLSL; the same
 * text goes to stderr. */
#ifndef VF_PLAN_CHECK_H
#define VF_PLAN_CHECK_H

#include "backend.h"
#include "plan/host.h"

typedef struct vf_fcheck vf_fcheck;

/* What a check needs of a plan, copied by vf_fcheck_create. */
typedef struct vf_fcheck_desc {
    const char *fn;                  /* the function's name */
    const vf_exec *execs;            /* in plan order, trefs as given to the backend */
    const vf_plan_loc (*loc)[4];
    const int (*inter)[4];           /* per exec: intermediate of in[0..2], out; -1: none */
    const int *kernel;               /* per exec: its kernel (a fused group is one) */
    const int *node;                 /* per exec: the graph node it comes from */
    const char *const *node_op;      /* per exec: that node's op name */
    int n_execs;
    const bool *internal;            /* per intermediate: only inside a fused group */
    const int *bind;                 /* per intermediate: its binding, -1: none */
    int n_inter;
    const vf_plan_guard *guards;     /* per exec, or NULL */
    const vf_plan_pred *preds;
    const int *pred_inter;           /* per pred: its intermediate, -1: none */
    int n_preds;
    const char *glsl_dir;            /* where the backend writes exec<x>.glsl */
    bool keep_glsl;                  /* keep that directory even if every call agrees (asked for: VKFUSE_DUMP) */
} vf_fcheck_desc;

/* A check replaying on host, reading the plan's values back from dev (the
   backend that runs the plan), reporting into err (also later, from
   before and after). NULL with the error in err (out of host memory). */
vf_fcheck *vf_fcheck_create(const vf_fcheck_desc *d, vf_host *host, const vf_backend_t *dev, vf_err *err);
/* Before the plan runs: copies of what it reads in place (captures,
   constants, variables), since assigns may change them. */
vf_status vf_fcheck_before(vf_fcheck *c);
/* After the run: replays and compares; VF_ERROR_DEVICE on the first
   kernel that disagrees (the message also goes to stderr). */
vf_status vf_fcheck_after(vf_fcheck *c, const vf_plan_bind *binds);
void vf_fcheck_free(vf_fcheck *c);

/* A fresh directory for a checked plan's GLSL under root (the frontend's
   choice: VKFUSE_DUMP if set, else TMPDIR, else /tmp). false: none could
   be made (out gets ""). */
bool vf_fcheck_glsl_dir(const char *root, const char *fn, char *out, size_t len);

#endif
