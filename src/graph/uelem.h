/* User elementwise ops (vf_elementwise_create): what every layer below the
 * frontend knows of one. An op node VF_OP_USER_ELEMENTWISE carries its
 * vf_uelem in attrs.uelem; the node holds one reference (released with the
 * node, graph/graph.c), as do the vf_elementwise_op handle and every tape
 * entry, so a traced function keeps working after vf_elementwise_destroy.
 * Backends read expr / helpers (Vulkan codegen) or cpu (CPU backend). */
#ifndef VF_GRAPH_UELEM_H
#define VF_GRAPH_UELEM_H

#include "vkfuse.h"
#include "graph/op.h"
#include "util/err.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct vf_uelem {
    int refs;
    uint64_t id;               /* unique in the process: the eager kernel memo's key (never a pointer) */
    char name[48];
    int n_in;
    uint32_t dtypes;           /* accepted dtypes (VF_M bits), floats only */
    char *expr;                /* owned; over x0 .. x<n_in-1> (a gradient's: and y) */
    char *helpers;             /* owned, NULL: none */
    vf_elementwise_fn cpu;     /* NULL after a load: no CPU implementation */
    void *user;
    /* gradient per input: an op over the inputs then y; NULL: none */
    struct vf_uelem *grad[VF_ELEMENTWISE_MAX_INPUTS];
    bool grad_of;              /* a gradient's op: its last input is the forward's output, named y */
    bool loaded;               /* made by vf_function_load */
} vf_uelem;

/* A new op of refs 1 with copies of expr and helpers; NULL: out of memory. */
vf_uelem *vf_uelem_new(const char *name, int n_in, uint32_t dtypes, const char *expr, const char *helpers);
static inline vf_uelem *vf_uelem_retain(const vf_uelem *u)
{
    vf_uelem *m = (vf_uelem *)u;   /* attrs hold it const: the count is the only mutable part */
    if (m) m->refs++;
    return m;
}
void vf_uelem_release(const vf_uelem *u);

/* Whether the text of an expression (expr) or of helper functions (!expr)
   may be pasted into a generated kernel: no token that leaves the
   expression or the helpers' file-scope functions; with prefix (the op's
   name), every name the helpers declare starts with it and '_'. false
   with the reason in msg. */
bool vf_uelem_text_ok(const char *text, bool expr, const char *prefix, char *msg, size_t len);

/* The shape-and-dtype rule of a call of u (vf_infer_op's for the op). */
struct vf_shape;
vf_status vf_uelem_infer(const vf_uelem *u, int n_in, const vf_dtype *in_dt, const struct vf_shape *in,
                         vf_dtype *dt, struct vf_shape *out, vf_err *err);

#endif
