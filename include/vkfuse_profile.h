/* vkfuse: profiling traced calls (vf_function_profile) and writing
 * Chrome/Perfetto trace files. Part of the public API; included by
 * vkfuse.h (include either). Its own header only to keep vkfuse.h to the
 * core API; docs/PROFILING.md is the guide. */
#ifndef VKFUSE_PROFILE_H
#define VKFUSE_PROFILE_H

#include "vkfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Profiling ------------------------------------------------------------
   Profiling is a context option: vf_context_desc.profile, or VKFUSE_PROFILE=1
   in the environment (read by vf_context_create). With it on:

   - every recorded plan (a traced function's call on Vulkan, see
     docs/FUNCTIONS.md) writes a timestamp query before and after each of
     its dispatches (one query pool per plan), and eager dispatches are
     timed by the scheduler;
   - every vf_function_call waits until its work has finished, so that its
     wall time covers the GPU work (profiling changes timing: calls no
     longer overlap the host's next steps).

   When the device has no timestamps on its compute queue (timestampValidBits
   0 or timestampComputeAndGraphics false) profiles carry wall times only
   and say so in `note`. A call that ran node by node (CPU backend, a graph
   with a vf_while_loop or printing) has no kernel records either. GPU
   times come from timestampPeriod; the start of a dispatch is written
   once the work before it has finished, so on lavapipe kernel times never
   overlap and their sum is at most the call's wall time (a GPU may overlap
   independent dispatches between two barriers). Kernels are listed in plan
   order; a plan records independent kernels together between barriers, so
   start_ns, not the list, gives the order they ran in. See docs/PROFILING.md. */

/* One kernel of the last profiled call (a fused group is one kernel). */
typedef struct {
    const char *name;          /* the kernel's name (its first dispatch's): "fused_ew_...", "matmul_..." */
    int dispatches;            /* dispatches per call (a multi-pass reduction has several) */
    int barriers;              /* pipeline barriers recorded right before its dispatches */
    uint64_t gpu_ns;           /* GPU time of its dispatches; 0 without timestamps */
    uint64_t start_ns;         /* its first dispatch's start, after the call's first dispatch */
    int64_t bytes_read;        /* sizes of the bindings it reads (per dispatch, summed) */
    int64_t bytes_written;     /* ... and writes; a read-write binding counts in both */
    int n_nodes;               /* graph nodes it computes; the guard of a traced vf_cond and the
                                  ops of its branches list the cond node ("cond") */
    const int *nodes;          /* their ids, numbered as vf_function_graph_text prints them (%id) */
    const char *const *node_ops; /* their op names ("mul", "relu"; "assign" for an assign's copy) */
} vf_kernel_profile;

/* The last call's profile. Pointers are owned by the function and stay
   valid until its next call or vf_function_destroy. */
typedef struct {
    bool profiled;             /* profiling was on for the last call; false: nothing below is set */
    bool planned;              /* it ran a recorded plan: kernels[] are filled */
    bool timestamps;           /* the gpu_ns values are measured */
    const char *note;          /* "" or what is missing and why */
    int n_kernels;
    const vf_kernel_profile *kernels; /* in execution order */
    int dispatches;            /* per call, all kernels */
    int barriers;              /* per call, also the plan's first and last (full) barrier */
    uint64_t gpu_ns;           /* sum over kernels */
    uint64_t wall_ns;          /* the call on the host, from entry until its work finished */
    uint64_t start_ns;         /* CLOCK_MONOTONIC at the call's entry, in ns (for traces) */
    int64_t bytes_read, bytes_written; /* sums over kernels */
    int64_t peak_bytes;        /* as vf_function_stats.peak_bytes */
    int64_t call;              /* which call it was: 1 for the first */
} vf_function_profile;

/* Fills *out with the last call's profile (out->profiled false when
   profiling is off or no call has succeeded yet). VF_ERROR_INVALID_ARGUMENT
   when fn or out is NULL. */
VF_API vf_status vf_function_profile_get(vf_function *fn, vf_function_profile *out);
/* Whether ctx profiles (desc.profile or VKFUSE_PROFILE=1). */
VF_API bool vf_context_profiling(vf_context *ctx);

/* Chrome / Perfetto trace files (JSON "traceEvents", open them in
   ui.perfetto.dev or chrome://tracing). Each added call is one track: an
   "X" event spanning its wall time, and one "X" event per kernel (ts and
   dur in microseconds, args: dispatches, bytes, nodes) placed at the
   call's start plus the kernel's start_ns. Times are relative to the
   first call added. */
typedef struct vf_trace_file vf_trace_file;
/* NULL when out of host memory (vf_last_error says so). */
VF_API vf_trace_file *vf_trace_file_create(void);
/* Copies p (a profiled call) onto a new track named `track` (NULL: "call N").
   VF_ERROR_INVALID_ARGUMENT when p was not profiled. */
VF_API vf_status vf_trace_file_add(vf_trace_file *t, const char *track, const vf_function_profile *p);
/* The JSON text (malloc'd: free it with vf_free); NULL when out of host memory. */
VF_API char *vf_trace_file_json(const vf_trace_file *t);
/* Writes the JSON to path: VF_ERROR_IO when it cannot (vf_trace_file_error says why). */
VF_API vf_status vf_trace_file_write(vf_trace_file *t, const char *path);
VF_API const char *vf_trace_file_error(const vf_trace_file *t); /* "" if none */
VF_API void vf_trace_file_destroy(vf_trace_file *t);

#ifdef __cplusplus
}
#endif
#endif /* VKFUSE_PROFILE_H */
