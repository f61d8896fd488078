/* Device memory: a sub-allocator over large blocks, and a cache of the
 * blocks nothing uses (PyTorch's caching allocator, for Vulkan).
 *
 * Tensors are ranges of a few big VkDeviceMemory blocks, each bound to one
 * VkBuffer over the whole block, so an allocation is (VkBuffer, offset)
 * and costs no Vulkan call. Small tensors share 64 MiB pool blocks; free
 * ranges of a block are a sorted array searched best-fit and coalesced
 * with their neighbours on free. Big tensors get a dedicated block of
 * their own, its size rounded up to a size class (eight per power of two).
 * A block nothing uses any more is not destroyed but cached: the next
 * tensor of its size class (or, a pool block, any small tensor) takes it
 * without a Vulkan call and without the page faults of fresh memory.
 * Cached blocks are destroyed, oldest first, when they exceed the cache's
 * capacity (VKFUSE_MEMORY_CACHE), by vf_vk_mem_trim (vf_context_trim), and
 * all of them when the driver runs out of memory, before the allocation
 * is tried again.
 *
 * A range freed while a batch that used it is still in flight goes to a
 * pending list and only returns to its block once that batch's serial has
 * completed: a block is cached, and so handed out again, only when no
 * queued or running work can touch it. */
#ifndef VF_VULKAN_MEMORY_H
#define VF_VULKAN_MEMORY_H

#include "backend.h"
#include "vulkan/device.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct vf_vk_range {
    VkDeviceSize offset, size;
} vf_vk_range;

typedef struct vf_vk_block {
    VkDeviceMemory memory;
    VkBuffer buffer;             /* covers the whole block */
    uint64_t id;                 /* unique in its vf_vk_mem, never reused: handles and
                                    host pointers of destroyed blocks can be */
    uint8_t *map;                /* persistent mapping; NULL when not host-visible */
    VkDeviceSize size;
    VkDeviceSize used;           /* reserved bytes of live + pending allocations */
    bool dedicated;              /* one allocation at a time (a big tensor, an arena) */
    bool cached;                 /* no allocation in it: counted in vf_vk_mem.cached_bytes */
    uint64_t idle_since;         /* cached: when it became so (vf_vk_mem.tick), oldest go first */
    int live;                    /* allocations not yet returned to the free list */
    vf_vk_range *free;           /* sorted by offset, never adjacent (coalesced) */
    int n_free, cap_free;
} vf_vk_block;

/* The backend's vf_buffer: one range of one block. */
struct vf_buffer {
    vf_vk_block *block;
    VkDeviceSize offset;         /* in the block's VkBuffer */
    VkDeviceSize size;           /* reserved (rounded up to the alignment) */
    size_t bytes;                /* as requested */
    uint64_t last_use;           /* serial of the last batch that referenced it (0: none) */
    uint64_t free_after;         /* pending free: reusable once this serial completed */
    vf_buffer *prev, *next;      /* the live list, so destroy frees what callers forgot */
};

typedef struct vf_vk_mem_options {
    VkDeviceSize block_size;     /* 0: 64 MiB */
    int64_t cache_cap;           /* most bytes of cached blocks kept; 0: the size of the memory
                                    heap tensors live in; < 0: none (a block nothing uses is
                                    destroyed at once) */
    bool force_staging;          /* testing: pretend device memory is not host-visible
                                    (vf_vk_extra_options, VKFUSE_TEST_STAGING) */
    int64_t limit;               /* > 0: VKFUSE_DEVICE_MEMORY_LIMIT, the device's memory as far as
                                    vkfuse is concerned (bytes_reserved never passes it) */
} vf_vk_mem_options;

typedef struct vf_vk_mem {
    vf_vk_device *dev;
    vf_err *err;
    uint32_t mem_type;
    bool host_visible;           /* blocks are mapped: upload/download by memcpy */
    bool coherent;               /* no flush / invalidate needed */
    VkDeviceSize block_size, align, max_range, atom;
    VkBufferUsageFlags usage;
    vf_vk_block **blocks;
    int n_blocks, cap_blocks;
    vf_buffer **pending;
    int n_pending, cap_pending;
    int64_t bytes_in_use;        /* live allocations (reserved sizes) */
    int64_t bytes_peak;          /* the most bytes_in_use has been */
    int64_t bytes_reserved;      /* all blocks */
    int64_t allocations;         /* blocks allocated (successful vkAllocateMemory calls) */
    int64_t retries;             /* allocations retried after the driver ran out of memory */
    int64_t cached_bytes;        /* blocks with no allocation in them, kept for reuse */
    int64_t cache_cap;           /* at most this many cached bytes (oldest go first); 0: none */
    int64_t limit;               /* > 0: a block that would take bytes_reserved past this is refused
                                    as VK_ERROR_OUT_OF_DEVICE_MEMORY without calling the driver
                                    (VKFUSE_DEVICE_MEMORY_LIMIT, or the test hook device.h's) */
    const char *limit_from;      /* what set limit, for messages */
    /* VK_EXT_memory_budget (vf_vk_heap_budget): the heap's budget and the
       process's usage of it at the last read, and bytes_reserved then.
       Read at init and again only when a new block would take the usage
       estimated since (usage + blocks made since - blocks freed since)
       past the budget: a block the budget still refuses then fails as
       the driver's out of memory (cache given back, tried again), with a
       message naming the budget. budget 0: none known. */
    int64_t budget, budget_usage, budget_own;
    int64_t budget_reads;        /* how many reads (not per op: tests check) */
    bool budget_refused;         /* the last block_create was refused by the budget */
    /* Waits for all queued work (the runtime's scheduler sync), so that
       pending frees are collected; called when the driver is out of
       memory and ranges wait for in-flight batches. NULL: never. */
    vf_status (*wait_all)(void *arg);
    void *wait_arg;
    uint64_t tick;
    uint64_t next_block_id;
    vf_buffer *live;             /* allocated, not yet freed */
} vf_vk_mem;

vf_status vf_vk_mem_init(vf_vk_mem *m, vf_vk_device *dev, const vf_vk_mem_options *opt, vf_err *err);
/* Frees every block and every vf_buffer still allocated; the device must
   be idle. */
void vf_vk_mem_destroy(vf_vk_mem *m);

/* bytes > 0. align 0: the default (max(minStorageBufferOffsetAlignment, 16)).
   Over maxStorageBufferRange: VF_ERROR_UNSUPPORTED naming both sizes. */
vf_status vf_vk_mem_alloc(vf_vk_mem *m, size_t bytes, VkDeviceSize align, vf_buffer **out);
/* The same for a buffer that is only ever bound in pieces (a plan's arena
   of intermediates, each binding within maxStorageBufferRange): no range
   limit on the whole. */
vf_status vf_vk_mem_alloc_arena(vf_vk_mem *m, size_t bytes, VkDeviceSize align, vf_buffer **out);
/* Returns buf's range now if no batch after `completed` used it, else
   when vf_vk_mem_collect sees its last batch complete. */
void vf_vk_mem_free(vf_vk_mem *m, vf_buffer *buf, uint64_t completed);
/* Reclaims pending frees whose batch serial is <= completed. */
void vf_vk_mem_collect(vf_vk_mem *m, uint64_t completed);
/* Destroys every cached block; returns the bytes given back to the driver.
   Pending frees stay pending (wait for their batches and collect first to
   release them too). */
int64_t vf_vk_mem_trim(vf_vk_mem *m);
/* The size of the dedicated block a big allocation of `size` bytes gets:
   size rounded up to a multiple of an eighth of its highest power of two
   (and of the alignment), so that tensors of nearly equal sizes share
   cached blocks and no block wastes more than an eighth. */
VkDeviceSize vf_vk_mem_size_class(const vf_vk_mem *m, VkDeviceSize size);

/* Reads the heap's budget again (for vf_context_stats); 0: none known. */
int64_t vf_vk_mem_budget(vf_vk_mem *m);

/* Host-visible blocks only: make host writes visible to the device /
   device writes visible to the host (no-ops on coherent memory). */
vf_status vf_vk_mem_flush(vf_vk_mem *m, const vf_buffer *b, VkDeviceSize off, VkDeviceSize n);
vf_status vf_vk_mem_invalidate(vf_vk_mem *m, const vf_buffer *b, VkDeviceSize off, VkDeviceSize n);

static inline VkBuffer vf_vk_buffer_handle(const vf_buffer *b) { return b->block->buffer; }
static inline uint8_t *vf_vk_buffer_map(const vf_buffer *b)
{
    return b->block->map ? b->block->map + b->offset : NULL;
}

/* A standalone buffer with its own memory (staging, readback). */
typedef struct vf_vk_raw {
    VkBuffer buffer;
    VkDeviceMemory memory;
    uint8_t *map;
    VkDeviceSize size;
    bool coherent;
} vf_vk_raw;

/* Host-visible (HOST_CACHED preferred for readback), mapped. */
vf_status vf_vk_raw_create(vf_vk_device *dev, VkDeviceSize size, VkBufferUsageFlags usage,
                           vf_vk_raw *out, vf_err *err);
void vf_vk_raw_destroy(vf_vk_device *dev, vf_vk_raw *r);

/* A uniform texel buffer view (R32G32B32A32_SFLOAT: a vec4 per 16 bytes)
   of range bytes of buf at off, for kernels that read an input through
   texelFetch (vf_device_caps.texel_reads). Checks the device's texel
   offset alignment and element limit first; `what` names the binding in
   the message. The caller destroys it (vkDestroyBufferView) once the work
   that uses it has completed. */
vf_status vf_vk_texel_view(vf_vk_device *dev, VkBuffer buf, VkDeviceSize off, VkDeviceSize range, const char *what,
                           VkBufferView *out, vf_err *err);

#endif
