/* What `vkfuse saved show`, `vkfuse run` and `vkfuse profile FILE` share
 * (saved_cli.c): contexts from --backend / --device, loading a saved
 * function, its .npy inputs checked against its signatures, outputs read
 * back, and the exit codes (docs/CLI.md). Public API only. */
#ifndef VF_TOOLS_SAVED_CLI_H
#define VF_TOOLS_SAVED_CLI_H

#include "npy.h"
#include "vkfuse.h"
#include "vkfuse_saved.h"

#include <stdio.h>

/* Exit codes of the saved-function commands (docs/CLI.md). */
enum {
    SC_OK = 0,
    SC_RUN_FAILED = 1,   /* the context, the load's device work or the call failed */
    SC_USAGE = 2,        /* bad arguments */
    SC_BAD_FILE = 3,     /* a file cannot be read, is not valid, does not match the signature, or cannot be written */
    SC_MISMATCH = 4,     /* --check: an output differs from the CPU backend's beyond --tol */
};

#define SC_MAX_IN 64

typedef struct sc_inputs {
    int n;
    const char *path[SC_MAX_IN];
    npy_array a[SC_MAX_IN];
} sc_inputs;

/* A context for --backend (NULL, "cpu", "vulkan", "auto") and --device
   (NULL or a name / index, as VKFUSE_DEVICE); fusion_off: every plan
   unfused (as VKFUSE_FUSION=0), check: VKFUSE_CHECK. NULL after printing why. */
vf_context *sc_context(const char *cmd, const char *backend, const char *device, bool profile, bool fusion_off,
                       bool check);
/* Whether --backend's value is one of cpu, vulkan, auto (prints why not). */
bool sc_backend_ok(const char *cmd, const char *backend);
/* Loads file into ctx; NULL after printing why (*rc: SC_BAD_FILE or SC_RUN_FAILED). */
vf_function *sc_load(vf_context *ctx, const char *cmd, const char *file, int *rc);
/* Reads every --in file; false after printing why. */
bool sc_read_inputs(const char *cmd, sc_inputs *in);
void sc_free_inputs(sc_inputs *in);
/* Whether some concrete function of info takes the inputs (count, dtypes,
   ranks, fixed dims); false after printing which file differs and what
   the function accepts. */
bool sc_check_inputs(const char *cmd, const char *file, const vf_function_info *info, const sc_inputs *in);
/* The user ops info needs that this process lacks, on stream f, one line
   each after prefix; returns how many. */
int sc_missing_user_ops(const vf_function_info *info, FILE *f, const char *prefix);
/* Tensors of the inputs in ctx's innermost scope; false with the context's error printed. */
bool sc_make_tensors(vf_context *ctx, const char *cmd, const sc_inputs *in, vf_tensor **t);
/* t's elements, packed, malloc'd; NULL with the error printed. */
void *sc_read_tensor(vf_context *ctx, const char *cmd, vf_tensor *t, size_t *bytes);
/* Element i of packed data of dtype dt as a double. */
double sc_value(vf_dtype dt, const void *data, int64_t i);
/* What the function prints (vf_print) while stdout is a report (show's
   measuring calls, profile's): stdout goes to stderr until
   sc_prints_restore(the returned descriptor). */
int sc_prints_to_stderr(void);
void sc_prints_restore(int saved);
/* s as a JSON string on stdout (quotes, backslashes and control characters escaped). */
void sc_jstr(const char *s);
/* "f32[2,-1]" */
const char *sc_spec_str(char *buf, size_t len, const vf_tensor_spec *s);

#endif
