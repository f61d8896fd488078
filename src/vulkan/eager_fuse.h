/* Eager fusion: queued eager elementwise ops run as one generated kernel
 * once their pattern repeats (issue 12, "tiered kernels" for eager chains).
 *
 * On lavapipe about 90 % of an eager small op's CPU is the driver handing
 * each dispatch to its thread pool and back (docs/BENCHMARKS.md, "Eager
 * overhead on lavapipe"), so what makes an eager chain cheaper is fewer
 * dispatches. The backend keeps consecutive eager elementwise ops of one
 * output shape (not fill, not user elementwise ops, not in place) as a
 * pending window instead of recording each at once, and
 * flushes the window before anything that could see its results or its
 * memory: any other op, an upload or download, a sync, a trim, a plan run,
 * a user kernel, the backend's end, a window full (16 bindings: inputs plus
 * results) or an op that does not fit it (another shape; its result in a
 * buffer the window touches; an input that overlaps a result without
 * being it; in place). A tensor freed while the window still uses its
 * memory is freed at the flush, after the window is recorded, so the
 * memory cache never hands its block out before the window ran.
 *
 * At a flush the window is keyed by its structure: each op's memo key
 * (op, attrs, dtypes, shapes, 16-byte alignment: kernel_memo.h), where
 * each input comes from (an earlier op of the window, or which of the
 * window's inputs), and which results the user still holds; never data.
 *   - tier 0: the ops run one kernel each, as without fusion;
 *   - a key seen VF_EF_COMPILE_AFTER times gets a fused kernel (the
 *     traced path's ELEMENTWISE group generator, codegen_fused.c; one
 *     store per result still held, freed intermediates never written),
 *     compiled by shaderc on a background thread (or at once when the
 *     shader cache already holds it, or with VKFUSE_COMPILE_THREADS=1);
 *   - once it is ready, the key's later flushes are one dispatch (a
 *     "swap", counted in vf_context_stats.eager_fuse_swaps).
 * Results are those of the unfused run: each member is the same op-table
 * function with the same conversions (f16 rounded after every op, as
 * stored), and a freed intermediate is never read again.
 * Errors stay at the call: each op's own kernel is generated (and
 * memoised) when it is queued, so a pattern the device cannot run fails
 * there; a fused kernel that cannot be made leaves its key at tier 0
 * (logged with VKFUSE_LOG=info), and a device fault while a window is
 * recorded or run is reported by the call that flushed it.
 * Off: VKFUSE_EAGER_FUSE=0 or vf_context_desc.eager_fuse_off.
 */
#ifndef VF_VULKAN_EAGER_FUSE_H
#define VF_VULKAN_EAGER_FUSE_H

#include "backend.h"
#include "util/hash.h"
#include "vulkan/codegen/kernel.h"
#include "vulkan/shader_cache.h"

#include <pthread.h>
#include <stdatomic.h>

#define VF_EF_MAX_TENSORS VF_KERNEL_MAX_BINDINGS   /* a window's inputs + results */
#define VF_EF_MAX_OPS (VF_EF_MAX_TENSORS - 1)
#define VF_EF_COMPILE_AFTER 2                      /* flushes of a key before its kernel is compiled */
#define VF_EF_MAX_KEYS 256                         /* patterns remembered; past it the table starts over */
#define VF_EF_JOBS 4                               /* background compiles at once */

struct vf_vk_runtime;
struct vf_vk_pipeline;

typedef enum { VF_EF_NEW, VF_EF_COMPILING, VF_EF_READY, VF_EF_FAILED } vf_ef_state;

typedef struct vf_ef_entry {
    int n_key;
    uint64_t *key;
    int seen;                         /* flushes of this key */
    vf_ef_state state;
    vf_gen_kernel k;                  /* the fused kernel (one step; its GLSL until compiled) */
    const struct vf_vk_pipeline *pipe;
    uint64_t spirv;                   /* the shader cache's key, for vf_vk_shader_hit */
} vf_ef_entry;

/* A fused kernel compiling on a background thread. */
typedef struct vf_ef_job {
    bool active;
    pthread_t thread;
    atomic_bool done;
    vf_ef_entry *ent;
    void *compiler;
    uint32_t target_env_version;
    const char *glsl;                 /* ent->k.step[0].glsl: untouched until joined */
    char name[64];
    uint64_t key;
    vf_vk_compiled out;
} vf_ef_job;

typedef struct vf_eager_fuse {
    bool on;
    /* the window */
    int n;                            /* ops */
    vf_exec ops[VF_EF_MAX_OPS];
    int src[VF_EF_MAX_OPS][3];        /* vf_fused_member.in of each op's inputs */
    vf_tref in[VF_EF_MAX_TENSORS];    /* its inputs (tensors no op of the window wrote) */
    int n_in;
    bool freed[VF_EF_MAX_OPS];        /* op i's result was freed by the user */
    vf_buffer *later[2 * VF_EF_MAX_TENSORS]; /* frees held until the window is recorded */
    int n_later;
    /* the patterns */
    vf_hmap map;                      /* hash of key -> vf_ef_entry* */
    vf_ef_job jobs[VF_EF_JOBS];
    int64_t swaps, fused_windows, fused_ops;
} vf_eager_fuse;

/* Queues e (an eager exec) in the window when it can go there, else
   flushes the window and runs e at once. */
vf_status vf_ef_exec(struct vf_vk_runtime *rt, const vf_exec *e);
/* Records the window (fused or not) into the open batch; frees what was
   held. VF_OK when there is none. */
vf_status vf_ef_flush(struct vf_vk_runtime *rt);
/* The backend's free: true when the window uses buf (then it is freed at
   the flush), false: free it now. */
bool vf_ef_hold_free(struct vf_vk_runtime *rt, vf_buffer *buf);
/* Waits for a compile in flight and frees everything (the window must
   have been flushed). */
void vf_ef_destroy(struct vf_vk_runtime *rt);

#endif
