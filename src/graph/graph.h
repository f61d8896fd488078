/* The graph IR of traced functions.
 *
 * A graph is a list of nodes in SSA order: a node's value id is its index,
 * and a node only reads values of nodes before it in the same graph. The
 * order of side-effect nodes (assigns, prints, control flow that contains
 * them) is the program order and passes never change it.
 *
 * Control flow is structured: a COND or WHILE node owns two subgraphs
 * (then/else, cond/body). A subgraph only sees its PARAM nodes; values of
 * enclosing graphs reach it as extra params, listed after the explicit
 * ones, whose outer value ids are the node's extra inputs. A COND or WHILE
 * node yields a tuple; PROJ nodes pick its elements, so every other node
 * has exactly one value. A KERNEL node (a user kernel's call) yields a
 * tuple of its outputs too.
 *
 * Shapes carry symbolic dims (the -1 of an input_signature): `sym` marks
 * them, `dim` holds the size seen while tracing. Execution re-infers every
 * shape from the concrete inputs (graph/shape.c), so one trace serves every
 * size of a symbolic dim.
 */
#ifndef VF_GRAPH_GRAPH_H
#define VF_GRAPH_GRAPH_H

#include "graph/op.h"
#include "graph/ukernel.h"
#include "util/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum vf_node_kind {
    VF_NODE_OP,       /* one backend op: op, attrs, inputs as the backend sees them */
    VF_NODE_PARAM,    /* index: the graph's param (function input, branch/loop argument) */
    VF_NODE_CONST,    /* data, bytes: a host constant (vf_tensor_from_host in a body, folding) */
    VF_NODE_CAPTURE,  /* index: a tensor made outside the function; is_var: a variable, by reference */
    VF_NODE_RESHAPE,  /* target (may hold one -1): same elements, another shape */
    VF_NODE_ASSIGN,   /* index: the variable's capture; in[0]: the new value (broadcast) */
    VF_NODE_PRINT,    /* label; in[0]: printed at run time */
    VF_NODE_COND,     /* in[0] pred, in[1..]: then/else params; sub[0] then, sub[1] else */
    VF_NODE_WHILE,    /* in: loop vars then captures; sub[0] cond, sub[1] body */
    VF_NODE_PROJ,     /* index: element of the tuple of in[0] (a COND, WHILE or KERNEL) */
    VF_NODE_HOST,     /* label; host_fn(host_user) maps in[0]'s values on the host at run time
                         (vf_host_map): an effect, never removed, merged or moved */
    /* appended (saved files store kinds): a user kernel's call (graph/ukernel.h):
       uk, in: its inputs, data / bytes: its parameters, n_out: its outputs (a
       tuple: PROJs pick them), kgroups: the workgroup counts at the traced sizes */
    VF_NODE_KERNEL,
    VF_NODE_KIND_COUNT
} vf_node_kind;

typedef struct vf_shape {
    int rank;
    int64_t dim[VF_MAX_RANK];
    uint32_t sym;     /* bit d: dim d is symbolic */
} vf_shape;

typedef struct vf_graph vf_graph;

typedef struct vf_node {
    vf_node_kind kind;
    vf_op op;
    vf_attrs attrs;
    int n_in;
    int *in;
    vf_dtype dtype;   /* of the value; COND/WHILE have none (their PROJs do) */
    vf_shape shape;
    int index;        /* PARAM, CAPTURE, ASSIGN, PROJ */
    bool is_var;      /* CAPTURE */
    vf_shape target;  /* RESHAPE: the requested shape, -1 = inferred */
    void *data;       /* CONST: packed elements */
    size_t bytes;
    char *label;      /* PRINT, HOST */
    vf_host_fn host_fn; /* HOST */
    void *host_user;
    vf_graph *sub[2]; /* COND, WHILE */
    int n_out;        /* COND, WHILE: tuple size */
    int split;        /* COND: params of sub[0] among in[1..]; WHILE: params of sub[0] after the vars */
    int max_iterations; /* WHILE: <= 0: unbounded */
    vf_ukernel *uk;   /* KERNEL: one reference held by the node */
    uint32_t kgroups[3]; /* KERNEL */
} vf_node;

struct vf_graph {
    vf_node *nodes;
    int n, cap;
    int n_params;      /* PARAM nodes, explicit ones first */
    int n_explicit;    /* params that are arguments (inputs, loop vars); the rest are captures */
    int *outputs;
    int n_outputs;
    /* While tracing: outer value id of each capture param (param n_explicit + k). */
    int *outer;
    int n_outer;
    vf_graph *parent;
};

vf_graph *vf_graph_new(vf_graph *parent);
void vf_graph_free(vf_graph *g);

/* Appends a node and returns its id, -1 when out of memory. in is copied. */
int vf_graph_add(vf_graph *g, vf_node_kind kind, int n_in, const int *in);
bool vf_graph_set_outputs(vf_graph *g, int n, const int *ids);

/* Constants of at most this many elements are values made once and kept
   by the concrete function (on the device, and in its saved form):
   folding's results (graph/passes_fold.c), small FILLs that are not
   literals of a fused kernel (passes_fills.c, function/run.c). Larger
   ones are computed at run time. */
#define VF_FOLD_MAX_ELEMS 4096

/* Whether n is a FILL that node-by-node runs make once and keep (static
   shape, 1 .. VF_FOLD_MAX_ELEMS elements): no kernel per call. */
bool vf_node_kept_fill(const vf_node *n);

/* A node whose removal or reordering changes what the program does. */
bool vf_node_has_effect(const vf_node *n);
bool vf_graph_has_effects(const vf_graph *g);
/* The number of nodes of g and its subgraphs that run a kernel at every
   node-by-node run (kept fills do not). */
int vf_graph_kernels(const vf_graph *g);

/* Rewrites every use (inputs and outputs) of value i to repl[i] (repl[i] ==
   i: unchanged). repl must map to earlier values. */
void vf_graph_replace(vf_graph *g, const int *repl);
/* Removes the nodes marked in dead[] (which must be unused) and renumbers. */
bool vf_graph_remove(vf_graph *g, const bool *dead);

const char *vf_node_kind_name(vf_node_kind k);
/* "add", "param", "reshape", ... */
const char *vf_node_name(const vf_node *n);
/* "f32[?,4]" into buf. */
const char *vf_shape_fmt(char *buf, size_t len, vf_dtype dt, const vf_shape *s);
int64_t vf_shape_numel(const vf_shape *s);
bool vf_shape_equal(const vf_shape *a, const vf_shape *b);   /* dims and rank, not sym */

/* The shape-and-dtype engine (graph/shape.c). vf_infer_op: op with
   attributes a on n_in inputs: checks the input count, each input's dtype
   against its role in the row (condition, indices, data of the accepted
   dtypes, data inputs alike), the attributes the op reads against the
   inputs' ranks, and gives the result's dtype and shape (symbolic dims
   carried). Fails with VF_ERROR_DTYPE, VF_ERROR_SHAPE or
   VF_ERROR_INVALID_ARGUMENT and a message naming the op ("vf_add: ..."),
   the dtypes or shapes, and the fix. Source ops have no rule from inputs. */
vf_status vf_infer_op(vf_op op, const vf_attrs *a, int n_in, const vf_dtype *in_dt, const vf_shape *in,
                      vf_dtype *dt, vf_shape *out, vf_err *err);
/* The shape rules of VF_KIND_INDEX ops (graph/shape_index.c), called by
   vf_infer_op after the dtype and attribute checks. */
vf_status vf_infer_index(vf_op op, const vf_attrs *a, const vf_shape *in, vf_shape *out, vf_err *err);
/* Input i's dtype against its role in op's row (one check of vf_infer_op). */
vf_status vf_check_op_dtype(vf_op op, int i, vf_dtype dt, const vf_shape *s, vf_err *err);
/* x's elements as shape t, which may hold one -1 (inferred). */
vf_status vf_infer_reshape(const vf_shape *x, const vf_shape *t, vf_shape *out, vf_err *err);
/* The dtype and shape of node n given its inputs': OP (vf_infer_op; a
   source op keeps its own), RESHAPE (vf_infer_reshape of its target),
   ASSIGN (checks the value against the variable's shape, given as *out on
   entry) and PRINT. */
vf_status vf_infer(const vf_node *n, const vf_dtype *in_dt, const vf_shape *in, vf_dtype *dt,
                   vf_shape *out, vf_err *err);
/* NumPy broadcasting of n shapes (sym bits carried); false if they do not. */
bool vf_broadcast(int n, const vf_shape *const *in, vf_shape *out, int *bad_dim);

/* Dumps (graph/dump.c): a readable text form and Graphviz DOT. */
bool vf_graph_dump_text(const vf_graph *g, const char *name, const char *path);
bool vf_graph_dump_dot(const vf_graph *g, const char *name, const char *path);
/* The text form into a malloc'd string (tests, logs); NULL if out of memory. */
char *vf_graph_to_string(const vf_graph *g, const char *name);

#endif
