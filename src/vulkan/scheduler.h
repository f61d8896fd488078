/* Command recording, batching, hazard tracking and completion.
 *
 * Work is recorded into the open batch (one command buffer of one of a few
 * slots) and submitted when the batch holds `batch_dispatches` dispatches,
 * or when someone needs a result (wait/sync/download) or destroys the
 * backend. Each batch has a serial; a buffer remembers the serial of the
 * last batch that referenced it, so uploads, downloads and frees wait for
 * exactly the work that touches the buffer.
 *
 * Barriers come from the hazard tracker (hazard.h), in call order: a
 * dispatch (or copy) that conflicts with work recorded since the last
 * barrier gets one first. What is tracked survives submits (a barrier's
 * first scope covers earlier submissions on the queue) and is forgotten
 * when the queue is idle. The tracker also counts the dispatches and
 * barriers, recorded plans' runs included (hz.dispatches, hz.barriers). */
#ifndef VF_VULKAN_SCHEDULER_H
#define VF_VULKAN_SCHEDULER_H

#include "vulkan/hazard.h"
#include "vulkan/memory.h"
#include "vulkan/pipeline.h"

#define VF_VK_SLOTS 3

typedef struct vf_vk_bind {
    vf_buffer *buf;              /* a sub-allocated buffer; or NULL and `raw` */
    VkBuffer raw;                /* a buffer the caller owns (kept alive until completion) */
    VkDeviceSize offset;         /* from the start of buf (or raw) */
    VkDeviceSize range;          /* bytes; 0: to the end of buf (not allowed with raw) */
    unsigned access;             /* VF_VK_READ | VF_VK_WRITE */
} vf_vk_bind;

typedef struct vf_vk_dispatch_info {
    const vf_vk_pipeline *pipe;
    int n_bindings;              /* == pipe->layout->n_bindings */
    const vf_vk_bind *bindings;
    const void *push;            /* push_size bytes, or NULL */
    uint32_t push_size;
    uint32_t groups[3];
    bool barrier_before;         /* force a barrier (the steps of one kernel) */
    const char *name;            /* for profiles; NULL: the pipeline's name */
} vf_vk_dispatch_info;

typedef struct vf_vk_timing {
    char name[64];
    uint64_t ns;
} vf_vk_timing;

typedef struct vf_vk_slot {
    VkCommandBuffer cmd;
    VkFence fence;
    VkDescriptorPool pool;       /* without push descriptors */
    VkQueryPool queries;         /* with profiling */
    uint64_t serial;
    bool recording, in_flight;
    uint32_t n_dispatches, n_commands, n_timed;
    char (*timed_names)[64];
    VkBufferView *views;         /* texel views its dispatches bound, destroyed when it is reused */
    uint32_t n_views, cap_views;
    vf_vk_raw staging;           /* staging mode only */
    VkDeviceSize staging_used;
} vf_vk_slot;

/* VKFUSE_TIMEOUT_MS's default: two minutes, so that no wait is forever,
   yet far above any batch vkfuse makes (on lavapipe a kernel's machine
   code is compiled inside its first submission: seconds under load). */
#define VF_VK_DEFAULT_TIMEOUT_MS 120000

typedef struct vf_vk_sched_options {
    uint32_t batch_dispatches;   /* 0: 64 */
    bool profile;
    int64_t timeout_ms;          /* a batch not done after this long fails and the device is lost;
                                    0: VF_VK_DEFAULT_TIMEOUT_MS */
} vf_vk_sched_options;

typedef struct vf_vk_sched {
    vf_vk_device *dev;
    vf_vk_mem *mem;
    vf_err *err;
    VkCommandPool cmd_pool;
    vf_vk_slot slots[VF_VK_SLOTS];
    int cur;                     /* slot of the open (or next) batch */
    uint64_t last_serial;        /* the newest batch begun */
    uint64_t completed;          /* every batch <= this has finished */
    uint32_t batch_dispatches;
    bool profile;
    uint64_t timeout_ns;         /* of every fence wait */
    vf_vk_hazards hz;            /* what may race, and the dispatch and barrier counts */
    vf_vk_timing *timings;
    size_t n_timings, cap_timings;
    int64_t submits, copies;
} vf_vk_sched;

vf_status vf_vk_sched_init(vf_vk_sched *s, vf_vk_device *dev, vf_vk_mem *mem,
                           const vf_vk_sched_options *opt, vf_err *err);
/* Submits what is queued, waits, frees everything. On a lost device (or
   one whose wait timed out) it never waits without a bound: see
   vf_vk_sched_drain. */
void vf_vk_sched_destroy(vf_vk_sched *s);
/* Once the device is lost, before objects its queued work may use are
   destroyed: one wait for every batch still in flight, bounded by the
   timeout (VKFUSE_TIMEOUT_MS), the first time only. A device whose work
   does not finish within it (a hang) is abandoned
   (vf_vk_device_table_abandon, loader.h). No-op on a healthy device. */
void vf_vk_sched_drain(vf_vk_sched *s);

/* Serial of the open batch, beginning one if needed (0 on failure). */
uint64_t vf_vk_sched_open(vf_vk_sched *s);
vf_status vf_vk_sched_dispatch(vf_vk_sched *s, const vf_vk_dispatch_info *d);
/* Submits the open batch, if it has commands. */
vf_status vf_vk_sched_flush(vf_vk_sched *s);
/* Submits the open batch (an empty one if none is open) followed by the
   caller's command buffer `extra` in one vkQueueSubmit; *serial receives
   the batch's serial, whose fence covers both. extra must begin and end
   with a full compute/transfer barrier (a recorded plan does). */
vf_status vf_vk_sched_submit_with(vf_vk_sched *s, VkCommandBuffer extra, uint64_t *serial);
/* Waits until batch `serial` (and all before it) finished, submitting it
   first if it is still open. */
vf_status vf_vk_sched_wait(vf_vk_sched *s, uint64_t serial);
vf_status vf_vk_sched_sync(vf_vk_sched *s);
/* Staging copies, for memory the host cannot map: upload is recorded into
   the open batch (ordered after earlier work by hazard tracking); download
   submits and waits. */
vf_status vf_vk_sched_upload(vf_vk_sched *s, vf_buffer *dst, VkDeviceSize off, const void *src,
                             VkDeviceSize n);
vf_status vf_vk_sched_download(vf_vk_sched *s, vf_buffer *src, VkDeviceSize off, void *dst,
                               VkDeviceSize n);

#endif
