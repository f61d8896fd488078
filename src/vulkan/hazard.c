#include "vulkan/hazard.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

void vf_vk_hazards_init(vf_vk_hazards *h, const vf_vk_device_table *vk, int *drop)
{
    memset(h, 0, sizeof *h);
    h->vk = vk;
    h->drop = drop;
}

void vf_vk_hazards_free(vf_vk_hazards *h)
{
    free(h->v);
    h->v = NULL;
    h->n = h->cap = 0;
}

int vf_vk_hazard_level(const vf_vk_hazards *h, const vf_vk_access *a, int n, int floor)
{
    int level = floor;
    for (int k = 0; k < n; k++)
        for (int e = 0; e < h->n; e++) {
            const vf_vk_access *o = &h->v[e];
            /* below the level already reached: cannot raise it */
            if (o->level < level || !((o->mode | a[k].mode) & VF_VK_WRITE)) continue;
            if (o->buffer == a[k].buffer && o->begin < a[k].end && a[k].begin < o->end) level = o->level + 1;
        }
    return level;
}

bool vf_vk_hazard_add(vf_vk_hazards *h, const vf_vk_access *a, int n, int level)
{
    if (!vf_grow((void **)&h->v, &h->cap, h->n + n, sizeof *h->v)) return false;
    for (int k = 0; k < n; k++) {
        h->v[h->n] = a[k];
        h->v[h->n++].level = level;
    }
    return true;
}

void vf_vk_hazard_clear(vf_vk_hazards *h) { h->n = 0; }

void vf_vk_hazard_barrier(vf_vk_hazards *h, VkCommandBuffer cmd, unsigned flags)
{
    bool indirect = flags & VF_VK_BARRIER_INDIRECT, host = flags & VF_VK_BARRIER_HOST;
    VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                              (indirect ? VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT : 0);
    VkMemoryBarrier mb = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT | (indirect ? VK_ACCESS_INDIRECT_COMMAND_READ_BIT : 0) |
                         (host ? VK_ACCESS_HOST_READ_BIT : 0),
    };
    h->vk->vkCmdPipelineBarrier(cmd, st, st | (host ? VK_PIPELINE_STAGE_HOST_BIT : 0), 0, 1, &mb, 0, NULL, 0,
                                NULL);
    h->barriers++;
    vf_vk_hazard_clear(h);
}

bool vf_vk_hazard_due(vf_vk_hazards *h, VkCommandBuffer cmd, unsigned flags, bool forced)
{
    if (!forced && h->drop && *h->drop > 0) {
        (*h->drop)--; /* test hook (hazard.h): a hazard left unguarded */
        return false;
    }
    vf_vk_hazard_barrier(h, cmd, flags);
    return true;
}

bool vf_vk_hazard_track(vf_vk_hazards *h, VkCommandBuffer cmd, const vf_vk_access *a, int n, bool force)
{
    /* Everything tracked is since the last barrier, at level 0. */
    if (force || vf_vk_hazard_level(h, a, n, 0) > 0) vf_vk_hazard_due(h, cmd, 0, force);
    return vf_vk_hazard_add(h, a, n, 0);
}
