/* The host (CPU) backend as planning and the passes use it: evaluating a
 * node of constants for folding (graph/passes.h vf_evaluator) and running
 * one exec on host values for the VKFUSE_CHECK replay (plan/check.h).
 *
 * The context owns the one vf_host (context.c, where every backend is
 * chosen) and makes its backend on first use; nothing here creates a
 * backend. */
#ifndef VF_PLAN_HOST_H
#define VF_PLAN_HOST_H

#include "backend.h"
#include "graph/passes.h"

typedef struct vf_host {
    vf_backend_t be;   /* be.iface NULL: not made (yet) */
    vf_err err;        /* where it reports; cleared before each use */
} vf_host;

/* Computes op node n of g, whose inputs are all compile-time values (CONST
   nodes with data, or FILLs: vf_node_is_const), into data (bytes: n's
   size). Failure: the status, the reason in h->err. */
vf_status vf_host_eval_node(vf_host *h, const vf_graph *g, const vf_node *n, void *data, size_t bytes);

/* Runs exec e with packed host inputs in[0..e->n_in-1] (the size of each
   tref) and writes its output to out (the size of e->out). The trefs' buf
   and offset are ignored. Failure: the status, the reason in h->err. */
vf_status vf_host_exec(vf_host *h, const vf_exec *e, const void *const *in, void *out);

/* An evaluator for vf_pass_fold backed by h, whose backend must be made. */
vf_evaluator vf_host_evaluator(vf_host *h);

#endif
