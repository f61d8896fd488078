/* vkfuse: what a traced or loaded function holds (vf_function_info), for
 * tools that show a saved function without its C code (`vkfuse saved
 * show`). Part of the public API; include it after vkfuse.h or alone.
 * docs/CLI.md shows the command built on it; docs/FORMAT.md the file. */
#ifndef VKFUSE_SAVED_H
#define VKFUSE_SAVED_H

#include "vkfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Node count of one op (or node kind) in a concrete function's graph. */
typedef struct {
    char op[48];               /* "add", "matmul", "param", "const", a user op's or kernel's own name */
    int count;
} vf_op_count;

/* A user kernel (vf_kernel_create) or user elementwise op
   (vf_elementwise_create) that a function's graphs call. */
typedef struct {
    char name[64];
    bool kernel;               /* true: a user kernel; false: a user elementwise op */
    bool have_c;               /* this process created the same op with its C
                                  function, so the function uses it: it runs on
                                  the CPU backend too (and a kernel at any size).
                                  false (a loaded function whose process never
                                  created it): Vulkan only, from the saved SPIR-V
                                  or GLSL, a kernel at its traced sizes only */
} vf_user_op_info;

/* One concrete function (one traced signature). Shapes: -1 for a dim
   that is symbolic (an input_signature -1 dim); those in the saved
   graph keep no size. */
typedef struct {
    int n_inputs, n_outputs;
    vf_tensor_spec *inputs;    /* n_inputs */
    vf_tensor_spec *outputs;   /* n_outputs */
    int64_t *traced_inputs;    /* n_inputs * VF_MAX_RANK: the sizes it was traced
                                  at, symbolic dims included (a call with these runs) */
    int n_nodes;               /* nodes of its graph and of its subgraphs (vf_cond, vf_while_loop) */
    int n_ops;
    vf_op_count *ops;          /* n_ops, by count (most first), then by name */
    int n_captures;            /* captured tensors, variables included */
    int n_variables;           /* captures that are variables */
} vf_concrete_info;

typedef struct {
    char name[128];
    int n_inputs, n_outputs;
    bool has_signature;        /* made with an input_signature (then signature[n_inputs]) */
    vf_tensor_spec *signature;
    int n_concrete;
    vf_concrete_info *concrete;
    int n_user_ops;            /* distinct by name and kind, in order of first use */
    vf_user_op_info *user_ops;
} vf_function_info;

/* What fn holds: one block (the arrays point into it) that the caller
   frees with vf_free. NULL when fn is
   NULL, destroyed or without a context (the error recorded in its context
   where it has one), or when out of host memory (VF_ERROR_OUT_OF_MEMORY).
   Kernels and dispatches per call are vf_function_stats' after a call. */
VF_API vf_function_info *vf_function_info_get(vf_function *fn);

/* The format version of the saved function at path (docs/FORMAT.md) from
   its header alone: VF_OK, VF_ERROR_IO (cannot be read) or
   VF_ERROR_FORMAT (too short or not a saved function). */
VF_API vf_status vf_saved_file_version(const char *path, uint32_t *version);

#ifdef __cplusplus
}
#endif

#endif
