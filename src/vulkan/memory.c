#include "vulkan/memory.h"
#include "util/fault.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

#define VF_MIB ((VkDeviceSize)1 << 20)

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return (v + a - 1) / a * a; }

/* Device-local + host-visible is what lavapipe and integrated GPUs offer
   for all memory: mapped once, uploads and downloads are memcpy. On a
   discrete GPU without resizable BAR that combination is a 256 MiB window
   we should not fill with tensors, so it is only taken when its heap is
   large (>= 1 GiB) or the device is not discrete. */
static void choose_type(vf_vk_mem *m, bool force_staging)
{
    const vf_vk_device *d = m->dev;
    const VkPhysicalDeviceMemoryProperties *mp = &d->mem_props;
    const VkMemoryPropertyFlags DL = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT,
                                HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    bool discrete = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
    int best = -1, best_score = -1;
    for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
        VkDeviceSize heap = mp->memoryHeaps[mp->memoryTypes[i].heapIndex].size;
        if (f & (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT))
            continue;
        bool big = !discrete || heap >= 1024 * VF_MIB;
        int score;
        if (!force_staging && (f & DL) && (f & HV) && (f & HC) && big) score = 4;
        else if (!force_staging && (f & DL) && (f & HV) && big) score = 3;
        else if (f & DL) score = 2;
        else score = 1; /* host memory as device memory: last resort */
        if (score > best_score) best = (int)i, best_score = score;
    }
    m->mem_type = best < 0 ? 0 : (uint32_t)best;
    VkMemoryPropertyFlags f = mp->memoryTypes[m->mem_type].propertyFlags;
    m->host_visible = !force_staging && (f & HV);
    m->coherent = (f & HC) != 0;
}

static void budget_read(vf_vk_mem *m, int64_t own);

vf_status vf_vk_mem_init(vf_vk_mem *m, vf_vk_device *dev, const vf_vk_mem_options *opt, vf_err *err)
{
    memset(m, 0, sizeof *m);
    m->dev = dev;
    m->err = err;
    choose_type(m, opt && opt->force_staging);
    const VkPhysicalDeviceLimits *L = &dev->props.limits;
    m->atom = L->nonCoherentAtomSize ? L->nonCoherentAtomSize : 1;
    m->align = L->minStorageBufferOffsetAlignment > 16 ? L->minStorageBufferOffsetAlignment : 16;
    /* Non-coherent memory is flushed in whole atoms: keeping every range
       atom-aligned means a flush never touches a neighbour's bytes. */
    if (m->host_visible && !m->coherent && m->atom > m->align) m->align = m->atom;
    m->max_range = L->maxStorageBufferRange;
    m->block_size = opt && opt->block_size ? align_up(opt->block_size, m->align) : 64 * VF_MIB;
    m->limit = opt ? opt->limit : 0;
    m->limit_from = "VKFUSE_DEVICE_MEMORY_LIMIT";
    /* A small limit (a small GPU) gets pool blocks of at most a quarter of
       it, so that small tensors are not refused for want of one 64 MiB
       block; never below 1 MiB. */
    if (m->limit > 0 && !(opt && opt->block_size))
        while (m->block_size > VF_MIB && (int64_t)m->block_size > m->limit / 4) m->block_size /= 2;
    /* By default the cache may hold as much as the heap: like PyTorch's,
       it gives memory back when the driver runs short (block_new), not
       before; VKFUSE_MEMORY_CACHE sizes it for users who share the device. */
    const VkPhysicalDeviceMemoryProperties *mp = &dev->mem_props;
    VkDeviceSize heap = mp->memoryTypeCount ? mp->memoryHeaps[mp->memoryTypes[m->mem_type].heapIndex].size : 0;
    int64_t cap = opt ? opt->cache_cap : 0;
    m->cache_cap = cap < 0 ? 0 : cap > 0 ? cap : heap ? (int64_t)heap : 4 * (int64_t)m->block_size;
    if (dev->memory_budget) budget_read(m, 0);
    m->usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
               VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT | /* texel reads (vf_vk_texel_view) */
               VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
               VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT; /* guarded plan steps (plan.c) */
    return VF_OK;
}

/* ---- the heap's budget (VK_EXT_memory_budget) --------------------------------- */

static uint32_t heap_of(const vf_vk_mem *m)
{
    return m->dev->mem_props.memoryTypeCount ? m->dev->mem_props.memoryTypes[m->mem_type].heapIndex : 0;
}

/* own: the bytes of this context's blocks now. Where the usage is not
   reported (the test hook alone), this context's blocks are the usage. */
static void budget_read(vf_vk_mem *m, int64_t own)
{
    int64_t b, u;
    m->budget_reads++;
    if (!vf_vk_heap_budget(m->dev, heap_of(m), &b, &u)) b = 0;
    m->budget = b;
    m->budget_usage = u >= 0 ? u : own;
    m->budget_own = own;
}

int64_t vf_vk_mem_budget(vf_vk_mem *m)
{
    budget_read(m, m->bytes_reserved);
    return m->budget;
}

/* Whether a new block of `size` bytes (already counted in bytes_reserved)
   would pass the budget. The last read's usage plus what this context's
   blocks grew by since is the estimate; only when that would pass the
   budget is it read again (the driver's query is not free, and the budget
   moves with other programs' use), and the fresh figures decide. */
static bool budget_refuses(vf_vk_mem *m, VkDeviceSize size)
{
    if (!m->dev->memory_budget && m->dev->test.memory_budget <= 0) return false;
    int64_t own = m->bytes_reserved - (int64_t)size;
    if (m->budget > 0 && m->budget_usage + (own - m->budget_own) + (int64_t)size <= m->budget) return false;
    budget_read(m, own);
    return m->budget > 0 && m->budget_usage + (int64_t)size > m->budget;
}

static void block_destroy(vf_vk_mem *m, vf_vk_block *b)
{
    const vf_vk_device_table *vk = &m->dev->vkd;
    if (b->map) vk->vkUnmapMemory(m->dev->device, b->memory);
    if (b->buffer) vk->vkDestroyBuffer(m->dev->device, b->buffer, NULL);
    if (b->memory) vk->vkFreeMemory(m->dev->device, b->memory, NULL);
    m->bytes_reserved -= (int64_t)b->size;
    free(b->free);
    free(b);
}

/* A new block. When the driver (or the test hook device.h's memory_limit)
   has no memory for it, *alloc_result is that VkResult and the status
   VF_ERROR_OUT_OF_MEMORY with no message yet: block_new releases the cache
   and tries again before it reports. Other failures set the message. */
static vf_status block_create(vf_vk_mem *m, VkDeviceSize size, bool dedicated, vf_vk_block **out,
                              VkResult *alloc_result)
{
    *alloc_result = VK_SUCCESS;
    const vf_vk_device_table *vk = &m->dev->vkd;
    VkDevice dev = m->dev->device;
    if (!vf_grow((void **)&m->blocks, &m->cap_blocks, m->n_blocks + 1, sizeof *m->blocks))
        return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    vf_vk_block *b = vf_calloc(1, sizeof *b);
    if (!b) return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    b->size = size;
    b->dedicated = dedicated;
    b->id = ++m->next_block_id;
    m->bytes_reserved += (int64_t)size;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = m->usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    vf_status s = vf_vk_check(m->err, VF_VKD(m->dev, vkCreateBuffer, dev, &bci, NULL, &b->buffer), "vkCreateBuffer");
    VkMemoryRequirements req = {0};
    if (!s) {
        vk->vkGetBufferMemoryRequirements(dev, b->buffer, &req);
        if (!(req.memoryTypeBits & (1u << m->mem_type)))
            s = vf_err_set(m->err, VF_ERROR_DEVICE, "storage buffers cannot use memory type %u",
                           m->mem_type);
    }
    if (!s) {
        VkMemoryAllocateInfo mai = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
            .allocationSize = req.size,
            .memoryTypeIndex = m->mem_type,
        };
        int64_t limit = m->dev->test.memory_limit > 0 ? m->dev->test.memory_limit : m->limit;
        m->budget_refused = !(limit > 0 && m->bytes_reserved > limit) && budget_refuses(m, size);
        VkResult r = (limit > 0 && m->bytes_reserved > limit) || m->budget_refused
                         ? VK_ERROR_OUT_OF_DEVICE_MEMORY
                         : VF_VKD(m->dev, vkAllocateMemory, dev, &mai, NULL, &b->memory);
        if (r == VK_SUCCESS) {
            m->allocations++;
        } else {
            b->memory = VK_NULL_HANDLE;
            *alloc_result = r;
            s = VF_ERROR_OUT_OF_MEMORY;
        }
    }
    if (!s) s = vf_vk_check(m->err, VF_VKD(m->dev, vkBindBufferMemory, dev, b->buffer, b->memory, 0),
                            "vkBindBufferMemory");
    if (!s && m->host_visible) {
        void *p = NULL;
        s = vf_vk_check(m->err, VF_VKD(m->dev, vkMapMemory, dev, b->memory, 0, VK_WHOLE_SIZE, 0, &p), "vkMapMemory");
        b->map = p;
    }
    if (!s) {
        b->free = vf_malloc(4 * sizeof *b->free);
        if (!b->free) s = vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
        else {
            b->cap_free = 4;
            b->n_free = 1;
            b->free[0] = (vf_vk_range){0, size};
        }
    }
    if (s) {
        block_destroy(m, b);
        return s;
    }
    m->blocks[m->n_blocks++] = b;
    *out = b;
    return VF_OK;
}

static void block_remove(vf_vk_mem *m, vf_vk_block *b)
{
    for (int i = 0; i < m->n_blocks; i++)
        if (m->blocks[i] == b) {
            m->blocks[i] = m->blocks[--m->n_blocks];
            break;
        }
    block_destroy(m, b);
}

VkDeviceSize vf_vk_mem_size_class(const vf_vk_mem *m, VkDeviceSize size)
{
    VkDeviceSize top = 1;
    while (top <= size / 2) top *= 2;
    VkDeviceSize step = top / 8 < m->align ? m->align : align_up(top / 8, m->align);
    return align_up(size, step);
}

static void uncache(vf_vk_mem *m, vf_vk_block *b)
{
    if (!b->cached) return;
    b->cached = false;
    m->cached_bytes -= (int64_t)b->size;
}

/* Big tensors come and go in loops (a traced call's outputs, the
   intermediates of eager ops), and a fresh VkDeviceMemory costs more than
   the call: the driver maps new pages and every first touch faults (on
   lavapipe a 64 MiB output costs as much again as the kernel writing it).
   So the next big allocation takes the smallest cached dedicated block
   that holds it without wasting more than an eighth: its own size class,
   or the next one up. The block keeps its id: a recorded plan that bound
   it needs no re-recording. */
static vf_vk_block *take_cached(vf_vk_mem *m, VkDeviceSize size)
{
    vf_vk_block *best = NULL;
    for (int i = 0; i < m->n_blocks; i++) {
        vf_vk_block *b = m->blocks[i];
        if (!b->dedicated || !b->cached || b->size < size || b->size - size > size / 8) continue;
        if (!best || b->size < best->size) best = b;
    }
    if (best) uncache(m, best);
    return best;
}

/* Destroys cached blocks, oldest first, until at most cap bytes are. */
static void release_cached(vf_vk_mem *m, int64_t cap)
{
    while (m->cached_bytes > cap) {
        vf_vk_block *old = NULL;
        for (int i = 0; i < m->n_blocks; i++) {
            vf_vk_block *b = m->blocks[i];
            if (b->cached && (!old || b->idle_since < old->idle_since)) old = b;
        }
        if (!old) break;
        uncache(m, old);
        block_remove(m, old);
    }
}

int64_t vf_vk_mem_trim(vf_vk_mem *m)
{
    int64_t before = m->cached_bytes;
    release_cached(m, 0);
    return before;
}

/* A new block; when the driver is out of memory, the cache goes back to
   it first (and, if freed ranges wait for in-flight batches, those batches
   are waited for so that their blocks can go back too), then the
   allocation is tried again: PyTorch's free-and-retry. Last, a block of
   exactly `need` bytes is tried when size (a size class) is more. */
static vf_status block_new(vf_vk_mem *m, VkDeviceSize size, VkDeviceSize need, bool dedicated,
                           vf_vk_block **out)
{
    VkResult r;
    vf_status s = block_create(m, size, dedicated, out, &r);
    if (r == VK_SUCCESS) return s; /* made, or failed for another reason (message set) */
    int64_t released = 0;
    bool retried = false;
    for (int round = 0; round < 2 && r != VK_SUCCESS; round++) {
        if (round == 1) {
            if (!m->n_pending || !m->wait_all) break;
            s = m->wait_all(m->wait_arg); /* collects the pending frees into the cache */
            if (s) return s;
        }
        if (m->cached_bytes == 0) continue;
        released += vf_vk_mem_trim(m);
        retried = true;
        s = block_create(m, size, dedicated, out, &r);
    }
    if (retried) m->retries++;
    if (r != VK_SUCCESS && need < size) s = block_create(m, need, dedicated, out, &r);
    if (r == VK_SUCCESS) return s;
    /* the test hook (device.h) stands for a driver out of memory: its
       message is the driver's */
    if (m->limit > 0 && m->dev->test.memory_limit <= 0 && m->bytes_reserved + (int64_t)need > m->limit)
        return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY,
                          "a device memory block of %llu bytes would pass the limit of %lld bytes (%s): %lld bytes"
                          " are in use by live tensors, %lld more held (%lld cached bytes were given back first);"
                          " free tensors (end scopes), use smaller ones or raise the limit",
                          (unsigned long long)need, (long long)m->limit, m->limit_from,
                          (long long)m->bytes_in_use, (long long)(m->bytes_reserved - m->bytes_in_use),
                          (long long)released);
    if (m->budget_refused)
        return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY,
                          "a device memory block of %llu bytes would pass the device's memory budget of %lld bytes"
                          " (VK_EXT_memory_budget, heap %u, %lld bytes of it used by this process): %lld bytes are"
                          " in use by live tensors, %lld more held (%lld cached bytes were given back first);"
                          " free tensors (end scopes), use smaller ones, or free device memory other programs"
                          " hold", (unsigned long long)need, (long long)m->budget, heap_of(m),
                          (long long)m->budget_usage, (long long)m->bytes_in_use,
                          (long long)(m->bytes_reserved - m->bytes_in_use), (long long)released);
    return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY,
                      "vkAllocateMemory of %llu bytes failed: %s (%lld bytes of device memory in use by"
                      " live tensors, %lld more held; %lld cached bytes were given back to the driver"
                      " and the allocation tried again); free tensors (end scopes) or use smaller ones",
                      (unsigned long long)size, vf_vk_result_name(r), (long long)m->bytes_in_use,
                      (long long)(m->bytes_reserved - m->bytes_in_use), (long long)released);
}

/* Best fit: the smallest free range that holds `size` at `align`. */
static bool find_fit(vf_vk_mem *m, VkDeviceSize size, VkDeviceSize align, vf_vk_block **ob, int *oi)
{
    VkDeviceSize best = 0;
    bool found = false;
    for (int bi = 0; bi < m->n_blocks; bi++) {
        vf_vk_block *b = m->blocks[bi];
        if (b->dedicated) continue;
        for (int i = 0; i < b->n_free; i++) {
            vf_vk_range r = b->free[i];
            VkDeviceSize a = align_up(r.offset, align);
            if (a + size > r.offset + r.size) continue;
            if (!found || r.size < best) {
                found = true;
                best = r.size;
                *ob = b;
                *oi = i;
            }
        }
    }
    return found;
}

static bool free_insert(vf_vk_block *b, int at, vf_vk_range r)
{
    if (!vf_grow((void **)&b->free, &b->cap_free, b->n_free + 1, sizeof *b->free)) return false;
    memmove(&b->free[at + 1], &b->free[at], (size_t)(b->n_free - at) * sizeof *b->free);
    b->free[at] = r;
    b->n_free++;
    return true;
}

static void free_erase(vf_vk_block *b, int at)
{
    memmove(&b->free[at], &b->free[at + 1], (size_t)(b->n_free - at - 1) * sizeof *b->free);
    b->n_free--;
}

/* Carves [a, a+size) out of free range i. */
static bool carve(vf_vk_block *b, int i, VkDeviceSize a, VkDeviceSize size)
{
    vf_vk_range r = b->free[i];
    VkDeviceSize end = r.offset + r.size;
    vf_vk_range head = {r.offset, a - r.offset}, tail = {a + size, end - (a + size)};
    if (head.size && tail.size) {
        b->free[i] = head;
        return free_insert(b, i + 1, tail);
    }
    if (head.size) b->free[i] = head;
    else if (tail.size) b->free[i] = tail;
    else free_erase(b, i);
    return true;
}

static vf_status mem_alloc(vf_vk_mem *m, size_t bytes, VkDeviceSize align, bool one_range, vf_buffer **out);

vf_status vf_vk_mem_alloc(vf_vk_mem *m, size_t bytes, VkDeviceSize align, vf_buffer **out)
{
    return mem_alloc(m, bytes, align, true, out);
}

vf_status vf_vk_mem_alloc_arena(vf_vk_mem *m, size_t bytes, VkDeviceSize align, vf_buffer **out)
{
    return mem_alloc(m, bytes, align, false, out);
}

static vf_status mem_alloc(vf_vk_mem *m, size_t bytes, VkDeviceSize align, bool one_range, vf_buffer **out)
{
    *out = NULL;
    if (bytes == 0) return vf_err_set(m->err, VF_ERROR_INVALID_ARGUMENT, "alloc of 0 bytes");
    if (one_range && (VkDeviceSize)bytes > m->max_range)
        return vf_err_set(m->err, VF_ERROR_UNSUPPORTED,
                          "a tensor of %zu bytes exceeds this device's maxStorageBufferRange of"
                          " %llu bytes (%s); split it into smaller tensors", bytes,
                          (unsigned long long)m->max_range, m->dev->name);
    if (align < m->align) align = m->align;
    VkDeviceSize size = align_up(bytes, align);
    vf_buffer *buf = vf_calloc(1, sizeof *buf);
    if (!buf) return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    vf_vk_block *b = NULL;
    int fi = -1;
    vf_status s = VF_OK;
    if (size > m->block_size / 2) {
        /* Big tensors: a block of their own, no fragmentation of the pool. */
        b = take_cached(m, size);
        if (!b) s = block_new(m, vf_vk_mem_size_class(m, size), size, true, &b);
        if (!s) fi = 0;
    } else if (!find_fit(m, size, align, &b, &fi)) {
        /* a device with less room than a pool block (a budget nearly
           used up) still gets a smaller one: at least 1 MiB, at least the
           tensor */
        VkDeviceSize least = size > VF_MIB ? size : VF_MIB;
        s = block_new(m, m->block_size, least < m->block_size ? least : m->block_size, false, &b);
        if (!s) fi = 0;
    }
    if (s) {
        free(buf);
        return s;
    }
    uncache(m, b); /* an empty pool block find_fit chose */
    VkDeviceSize a = align_up(b->free[fi].offset, align);
    if (!carve(b, fi, a, size)) {
        free(buf);
        return vf_err_set(m->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    }
    b->used += size;
    b->live++;
    buf->block = b;
    buf->offset = a;
    buf->size = size;
    buf->bytes = bytes;
    m->bytes_in_use += (int64_t)size;
    if (m->bytes_in_use > m->bytes_peak) m->bytes_peak = m->bytes_in_use;
    buf->next = m->live;
    if (m->live) m->live->prev = buf;
    m->live = buf;
    *out = buf;
    return VF_OK;
}

/* Gives the range back to its block's free list, coalescing. */
static void release(vf_vk_mem *m, vf_buffer *buf)
{
    vf_vk_block *b = buf->block;
    vf_vk_range r = {buf->offset, buf->size};
    free(buf);
    b->used -= r.size;
    b->live--;
    if (b->live == 0) {
        /* Nothing in it, and no queued work touches it (pending frees come
           here only once their batch completed): cached, up to cache_cap. */
        b->n_free = 1;
        b->free[0] = (vf_vk_range){0, b->size};
        b->cached = true;
        b->idle_since = ++m->tick;
        m->cached_bytes += (int64_t)b->size;
        release_cached(m, m->cache_cap);
        return;
    }
    int i = 0;
    while (i < b->n_free && b->free[i].offset < r.offset) i++;
    bool left = i > 0 && b->free[i - 1].offset + b->free[i - 1].size == r.offset;
    bool right = i < b->n_free && r.offset + r.size == b->free[i].offset;
    if (left && right) {
        b->free[i - 1].size += r.size + b->free[i].size;
        free_erase(b, i);
    } else if (left) {
        b->free[i - 1].size += r.size;
    } else if (right) {
        b->free[i].offset = r.offset;
        b->free[i].size += r.size;
    } else if (!free_insert(b, i, r)) {
        /* No host memory for the list entry: the range is leaked until the
           block is destroyed, which is safe. */
    }
}

static void unlink_live(vf_vk_mem *m, vf_buffer *buf)
{
    if (buf->prev) buf->prev->next = buf->next;
    else m->live = buf->next;
    if (buf->next) buf->next->prev = buf->prev;
    buf->prev = buf->next = NULL;
}

void vf_vk_mem_free(vf_vk_mem *m, vf_buffer *buf, uint64_t completed)
{
    if (!buf) return;
    if (buf->last_use > completed) {
        if (!vf_grow((void **)&m->pending, &m->cap_pending, m->n_pending + 1, sizeof *m->pending)) {
            /* Cannot defer: leave it allocated (destroy frees it) rather
               than reuse it while the GPU may still touch it. */
            return;
        }
        m->bytes_in_use -= (int64_t)buf->size;
        unlink_live(m, buf);
        buf->free_after = buf->last_use;
        m->pending[m->n_pending++] = buf;
        return;
    }
    m->bytes_in_use -= (int64_t)buf->size;
    unlink_live(m, buf);
    release(m, buf);
}

void vf_vk_mem_collect(vf_vk_mem *m, uint64_t completed)
{
    int j = 0;
    for (int i = 0; i < m->n_pending; i++) {
        vf_buffer *b = m->pending[i];
        if (b->free_after <= completed) release(m, b);
        else m->pending[j++] = b;
    }
    m->n_pending = j;
}

void vf_vk_mem_destroy(vf_vk_mem *m)
{
    for (int i = 0; i < m->n_pending; i++) free(m->pending[i]);
    while (m->live) {
        vf_buffer *next = m->live->next;
        free(m->live);
        m->live = next;
    }
    free(m->pending);
    for (int i = 0; i < m->n_blocks; i++) block_destroy(m, m->blocks[i]);
    free(m->blocks);
    memset(m, 0, sizeof *m);
}

static vf_status sync_range(vf_vk_mem *m, const vf_buffer *b, VkDeviceSize off, VkDeviceSize n,
                            bool flush)
{
    if (!b->block->map || m->coherent || n == 0) return VF_OK;
    VkDeviceSize start = (b->offset + off) / m->atom * m->atom;
    VkDeviceSize end = align_up(b->offset + off + n, m->atom);
    if (end > b->block->size) end = b->block->size;
    VkMappedMemoryRange r = {
        .sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
        .memory = b->block->memory,
        .offset = start,
        .size = end - start,
    };
    VkDevice d = m->dev->device;
    return flush ? vf_vk_check(m->err, VF_VKD(m->dev, vkFlushMappedMemoryRanges, d, 1, &r),
                               "vkFlushMappedMemoryRanges")
                 : vf_vk_check(m->err, VF_VKD(m->dev, vkInvalidateMappedMemoryRanges, d, 1, &r),
                               "vkInvalidateMappedMemoryRanges");
}

vf_status vf_vk_mem_flush(vf_vk_mem *m, const vf_buffer *b, VkDeviceSize off, VkDeviceSize n)
{
    return sync_range(m, b, off, n, true);
}

vf_status vf_vk_mem_invalidate(vf_vk_mem *m, const vf_buffer *b, VkDeviceSize off, VkDeviceSize n)
{
    return sync_range(m, b, off, n, false);
}

vf_status vf_vk_raw_create(vf_vk_device *dev, VkDeviceSize size, VkBufferUsageFlags usage,
                           vf_vk_raw *out, vf_err *err)
{
    const vf_vk_device_table *vk = &dev->vkd;
    memset(out, 0, sizeof *out);
    out->size = size;
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = usage,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    vf_status s = vf_vk_check(err, VF_VKD(dev, vkCreateBuffer, dev->device, &bci, NULL, &out->buffer),
                              "vkCreateBuffer (staging)");
    if (s) return s;
    VkMemoryRequirements req;
    vk->vkGetBufferMemoryRequirements(dev->device, out->buffer, &req);
    const VkMemoryPropertyFlags HV = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                                HC = VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
                                CA = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    int t = vf_vk_find_memory_type(dev, req.memoryTypeBits, HV | HC | CA);
    if (t < 0) t = vf_vk_find_memory_type(dev, req.memoryTypeBits, HV | HC);
    if (t < 0) t = vf_vk_find_memory_type(dev, req.memoryTypeBits, HV);
    if (t < 0) {
        vf_vk_raw_destroy(dev, out);
        return vf_err_set(err, VF_ERROR_DEVICE, "no host-visible memory for staging buffers");
    }
    out->coherent = (dev->mem_props.memoryTypes[t].propertyFlags & HC) != 0;
    VkMemoryAllocateInfo mai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = req.size,
        .memoryTypeIndex = (uint32_t)t,
    };
    s = vf_vk_check(err, VF_VKD(dev, vkAllocateMemory, dev->device, &mai, NULL, &out->memory),
                    "vkAllocateMemory (staging)");
    if (s) out->memory = VK_NULL_HANDLE;
    if (!s) s = vf_vk_check(err, VF_VKD(dev, vkBindBufferMemory, dev->device, out->buffer, out->memory, 0),
                            "vkBindBufferMemory (staging)");
    void *p = NULL;
    if (!s) s = vf_vk_check(err, VF_VKD(dev, vkMapMemory, dev->device, out->memory, 0, VK_WHOLE_SIZE, 0, &p),
                            "vkMapMemory (staging)");
    out->map = p;
    if (s) vf_vk_raw_destroy(dev, out);
    return s;
}

void vf_vk_raw_destroy(vf_vk_device *dev, vf_vk_raw *r)
{
    const vf_vk_device_table *vk = &dev->vkd;
    if (r->map) vk->vkUnmapMemory(dev->device, r->memory);
    if (r->buffer) vk->vkDestroyBuffer(dev->device, r->buffer, NULL);
    if (r->memory) vk->vkFreeMemory(dev->device, r->memory, NULL);
    memset(r, 0, sizeof *r);
}

vf_status vf_vk_texel_view(vf_vk_device *dev, VkBuffer buf, VkDeviceSize off, VkDeviceSize range, const char *what,
                           VkBufferView *out, vf_err *err)
{
    *out = VK_NULL_HANDLE;
    const VkPhysicalDeviceLimits *L = &dev->props.limits;
    if (L->minTexelBufferOffsetAlignment && off % L->minTexelBufferOffsetAlignment)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: offset %llu is not a multiple of the device's texel buffer offset alignment %llu",
                          what, (unsigned long long)off, (unsigned long long)L->minTexelBufferOffsetAlignment);
    if (range == 0 || range % 16 || range / 16 > L->maxTexelBufferElements)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: a texel buffer of %llu bytes (whole 16-byte texels, at most %u of them here)", what,
                          (unsigned long long)range, L->maxTexelBufferElements);
    VkBufferViewCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
        .buffer = buf,
        .format = VK_FORMAT_R32G32B32A32_SFLOAT,
        .offset = off,
        .range = range,
    };
    return vf_vk_check(err, VF_VKD(dev, vkCreateBufferView, dev->device, &ci, NULL, out), "vkCreateBufferView");
}
