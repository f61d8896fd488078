/* Internal to vf_function (function.c: lifetime, tracing, calls;
 * function_sig.c: signatures and retrace explanations): its state and
 * that of its concrete functions. Never installed. */
#ifndef VF_FRONTEND_FUNCTION_IMPL_H
#define VF_FRONTEND_FUNCTION_IMPL_H

#include "function/function.h"
#include "api/profile.h"
#include "util/keyset.h"

#define VF_RETRACE_WARN 5
#define VF_PLANS_MAX 8 /* recorded plans kept per concrete function (one per size set) */
#define VF_NEST_MAX 256 /* eager calls of one function inside itself: deeper is a recursion without end */

typedef struct concrete {
    vf_dtype *dt;          /* per input */
    vf_shape *shape;       /* per input; sym bits for input_signature -1 dims */
    vf_tensor **var;       /* per input: the variable passed there (retained), NULL: a value.
                              NULL array: a loaded function (it has its own restored variables) */
    int n_var;
    vf_graph *g;
    vf_capture *caps;
    int n_caps;
    vf_const_cache consts;
    vf_fplan *plans[VF_PLANS_MAX]; /* newest last */
    int n_plans;
    bool no_plan;          /* the graph has nodes a plan cannot run */
} concrete;

struct vf_function {
    vf_context *ctx;
    char name[128];
    vf_body body;
    void *user;
    int n_in, n_out;
    vf_tensor_spec *sig;   /* NULL: specialise per concrete signature */
    concrete *cfs;
    int n_cf;
    int last;              /* the concrete function called last, -1: none */
    const vf_fplan *last_plan; /* the plan its last call ran, NULL: none */
    bool env_eager;
    bool unfused;          /* vf_function_desc.unfused */
    vf_function_stats stats;
    char reason[256];
    int *changes;          /* per input: retraces it caused */
    bool warned;
    vf_fprofile prof;      /* the last call's, when the context profiles */
    vf_keyset kernels;     /* content keys of the kernels its calls used (saved with it) */
    /* Lifetime: every function is on its context's list. A destroyed one
       keeps this struct (its graphs, plans and captures are freed) until
       the context ends, so a second destroy or a call is an error; when
       the context ends first the function is orphaned (ctx NULL, the same
       freeing) and vf_function_destroy frees what is left. */
    struct vf_function *next_fn;
    bool destroyed;
    int active;            /* calls of it in progress: traced, inlined or eager */
};

/* input_signature entry sp as a shape (-1 dims symbolic). */
vf_shape vf_fsig_shape(const vf_tensor_spec *sp);
/* Checks the call against fn's input_signature (set). */
vf_status vf_fsig_check(vf_function *fn, vf_tensor *const *in);
/* Whether in matches concrete function c (dtypes, ranks, fixed dims, variables). */
bool vf_fsig_matches(const concrete *c, int n, vf_tensor *const *in);
/* Why in does not match c, into buf: "input 0 dim 0: traced 128, got 100";
   returns the input that differs, -1: none found. */
int vf_fsig_explain(const concrete *c, int n, vf_tensor *const *in, char *buf, size_t len);
/* Counts a retrace of fn for in, logs it (VKFUSE_LOG=info) and warns once
   when an input keeps changing. */
void vf_fsig_note_retrace(vf_function *fn, vf_tensor *const *in);

#endif
