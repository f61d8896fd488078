/* Hazard tracking: where dependent GPU work needs a barrier, and the
 * counting of barriers and dispatches that stats and profiles report.
 *
 * One tracker serves both ways work is recorded:
 * - in call order (the eager scheduler, scheduler.c): vf_vk_hazard_track
 *   puts a barrier before work that conflicts with anything recorded since
 *   the last barrier, which then clears what is tracked. Independent work
 *   runs without barriers.
 * - by level (recorded plans, plan_record.c): a step's level is one above
 *   the highest level of an earlier step it conflicts with
 *   (vf_vk_hazard_level); steps of one level are independent, so recording
 *   level by level needs one barrier between levels (vf_vk_hazard_due).
 *
 * Two accesses conflict when they touch overlapping bytes of one VkBuffer
 * and at least one of them writes: read after write, write after read,
 * write after write. A barrier is one global memory barrier over the
 * compute and transfer stages: its first scope covers everything earlier
 * on the queue, earlier submissions included. */
#ifndef VF_VULKAN_HAZARD_H
#define VF_VULKAN_HAZARD_H

#include "vulkan/loader.h"

#include <stdbool.h>
#include <stdint.h>

#define VF_VK_READ 1u
#define VF_VK_WRITE 2u

/* What a barrier covers beyond compute and transfer work. */
#define VF_VK_BARRIER_INDIRECT 1u /* indirect dispatch arguments written by a shader */
#define VF_VK_BARRIER_HOST 2u     /* host reads after the fence (the end of a plan) */

typedef struct vf_vk_access {
    VkBuffer buffer;
    VkDeviceSize begin, end;     /* bytes [begin, end) of buffer */
    unsigned mode;               /* VF_VK_READ | VF_VK_WRITE */
    int level;                   /* set by vf_vk_hazard_add */
} vf_vk_access;

typedef struct vf_vk_hazards {
    const vf_vk_device_table *vk;
    vf_vk_access *v;             /* tracked accesses, each with its level */
    int n, cap;
    int *drop;                   /* test hook (vf_vk_test_hooks.drop_barriers), or NULL */
    int64_t dispatches, barriers;/* counted for stats and profiles */
} vf_vk_hazards;

/* drop: while *drop > 0, each barrier that vf_vk_hazard_track or
   vf_vk_hazard_due would put (a forced one excepted) is left out and *drop
   decremented, so that synchronization validation can be shown to catch
   the missing barrier (tests/test_sync_validation.c). NULL: never. */
void vf_vk_hazards_init(vf_vk_hazards *h, const vf_vk_device_table *vk, int *drop);
void vf_vk_hazards_free(vf_vk_hazards *h);

/* The level work touching a[0..n) must run at: one above the highest
   level of a tracked access at `floor` or above that it conflicts with;
   floor when there is none. */
int vf_vk_hazard_level(const vf_vk_hazards *h, const vf_vk_access *a, int n, int floor);
/* Tracks a[0..n) at `level`. false: out of host memory. */
bool vf_vk_hazard_add(vf_vk_hazards *h, const vf_vk_access *a, int n, int level);
/* Forgets what is tracked: everything so far is ordered before later work
   (the queue is idle, or a full barrier was recorded elsewhere). */
void vf_vk_hazard_clear(vf_vk_hazards *h);

/* Records a barrier into cmd (flags: VF_VK_BARRIER_*), counts it and
   forgets what is tracked. */
void vf_vk_hazard_barrier(vf_vk_hazards *h, VkCommandBuffer cmd, unsigned flags);
/* A barrier is due (`forced`: the later steps of one kernel, whatever
   they touch): records it as vf_vk_hazard_barrier does, unless the test
   hook leaves it out. Returns whether it was recorded. */
bool vf_vk_hazard_due(vf_vk_hazards *h, VkCommandBuffer cmd, unsigned flags, bool forced);
/* In call order: a barrier first if work touching a[0..n) conflicts with
   what was tracked since the last one (or `force`), then tracks a[0..n).
   false: out of host memory. */
bool vf_vk_hazard_track(vf_vk_hazards *h, VkCommandBuffer cmd, const vf_vk_access *a, int n, bool force);

#endif
