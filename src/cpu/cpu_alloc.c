/* The CPU backend's buffers and their cache.
 *
 * Every eager result is a fresh buffer; taking each from the C library
 * costs an mmap and a page fault per 4 KiB at first touch for the large
 * ones (glibc maps blocks above its mmap threshold and unmaps them on
 * free). So a freed buffer is kept, by size class, for the next buffer of
 * its class: a steady loop (a training step) then allocates nothing and
 * touches no new page. The classes are powers of two split in four (a
 * buffer wastes at most a fifth of its capacity); the cache holds at most
 * cpu->cache_cap bytes (an eighth of the machine's memory) and is given
 * back on vf_context_trim, when an allocation fails, and when the context
 * is destroyed.
 *
 * Under AddressSanitizer a cached buffer is poisoned, and a reused one is
 * unpoisoned only up to its new size: a use after free, or a read past the
 * end of a buffer that came from a bigger one's class, is still reported.
 */
#include "cpu/cpu.h"
#include "util/fault.h"

#include <stdlib.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define VF_CPU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VF_CPU_ASAN 1
#endif
#endif
#ifdef VF_CPU_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define VF_CPU_ALIGN 64
/* Above this a size has no class (no machine has that much memory). */
#define MAX_CLASSED ((size_t)1 << 58)

/* The class of a request and its capacity; -1: too big for a class. */
static int size_class(size_t bytes, size_t *cap)
{
    if (bytes <= 4 * VF_CPU_ALIGN) {
        size_t c = bytes ? (bytes + VF_CPU_ALIGN - 1) / VF_CPU_ALIGN * VF_CPU_ALIGN : VF_CPU_ALIGN;
        *cap = c;
        return (int)(c / VF_CPU_ALIGN) - 1;
    }
    if (bytes > MAX_CLASSED) {
        *cap = (bytes + VF_CPU_ALIGN - 1) / VF_CPU_ALIGN * VF_CPU_ALIGN;
        return -1;
    }
    size_t b = bytes - 1;                      /* 2^k <= b < 2^(k+1), k >= 8 */
    int k = 63 - __builtin_clzll((unsigned long long)b);
    size_t step = (size_t)1 << (k - 2);        /* a quarter of 2^k: a multiple of 64 */
    size_t q = b / step + 1;                   /* 5..8 */
    *cap = q * step;
    return 4 + (k - 8) * 4 + (int)(q - 5);
}

int64_t vf_cpu_cache_default_cap(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) return (int64_t)1 << 30;
    return (int64_t)pages / 8 * page;
}

static void release(vf_cpu *cpu, vf_buffer *b)
{
    UNPOISON(b->data, b->cap);
    cpu->bytes_reserved -= (int64_t)b->cap;
    free(b->data);
    free(b);
}

void vf_cpu_cache_trim(vf_cpu *cpu)
{
    for (int c = 0; c < VF_CPU_CLASSES; c++) {
        while (cpu->cache[c]) {
            vf_buffer *b = cpu->cache[c];
            cpu->cache[c] = b->next;
            cpu->bytes_cached -= (int64_t)b->cap;
            release(cpu, b);
        }
    }
}

static void account(vf_cpu *cpu, vf_buffer *b, size_t bytes)
{
    b->size = bytes;
    b->next = NULL;
    UNPOISON(b->data, bytes);
    cpu->bytes_in_use += (int64_t)bytes;
    if (cpu->bytes_in_use > cpu->bytes_peak) cpu->bytes_peak = cpu->bytes_in_use;
}

vf_status vf_cpu_buf_alloc(vf_cpu *cpu, size_t bytes, vf_buffer **out)
{
    *out = NULL;
    if (bytes == 0)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: alloc of 0 bytes");
    if (bytes > SIZE_MAX - VF_CPU_ALIGN)
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                          "cpu backend: cannot allocate %zu bytes", bytes);
    size_t cap;
    int c = size_class(bytes, &cap);
    if (c >= 0 && cpu->cache[c]) {
        vf_buffer *b = cpu->cache[c];
        cpu->cache[c] = b->next;
        cpu->bytes_cached -= (int64_t)b->cap;
        account(cpu, b, bytes);
        *out = b;
        return VF_OK;
    }
    vf_buffer *b = vf_malloc(sizeof *b);
    void *data = b ? aligned_alloc(VF_CPU_ALIGN, cap) : NULL;
    if (b && !data && cpu->bytes_cached > 0) { /* memory pressure: the cache goes first */
        vf_cpu_cache_trim(cpu);
        cpu->alloc_retries++;
        data = aligned_alloc(VF_CPU_ALIGN, cap);
    }
    if (!data) {
        free(b);
        return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY,
                          "cpu backend: out of host memory (malloc failed) allocating a buffer of %zu bytes", bytes);
    }
    b->data = data;
    b->cap = cap;
    POISON(data, cap); /* account() opens the first `bytes` */
    cpu->bytes_reserved += (int64_t)cap;
    cpu->allocations++;
    account(cpu, b, bytes);
    *out = b;
    return VF_OK;
}

void vf_cpu_buf_free(vf_cpu *cpu, vf_buffer *buf)
{
    if (!buf) return;
    cpu->bytes_in_use -= (int64_t)buf->size;
    size_t cap;
    int c = size_class(buf->size, &cap);
    if (c < 0 || cpu->bytes_cached + (int64_t)buf->cap > cpu->cache_cap) {
        release(cpu, buf);
        return;
    }
    POISON(buf->data, buf->cap);
    buf->next = cpu->cache[c];
    cpu->cache[c] = buf;
    cpu->bytes_cached += (int64_t)buf->cap;
}
