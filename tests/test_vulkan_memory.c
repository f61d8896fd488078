/* The Vulkan runtime's memory: sub-allocation from blocks, coalescing,
 * dedicated and aligned allocations, limits, frees deferred while a batch
 * is in flight, and the cache of freed blocks (size classes, capacity,
 * trim, release and retry when the device is out of memory), in the
 * runtime and through the public API. */
#include "vk_test_common.h"
#include "testutil.h"

#include <math.h>

/* ---- memory ----------------------------------------------------------------- */

static int cmp_buf(const void *x, const void *y)
{
    const vf_buffer *a = *(vf_buffer *const *)x, *b = *(vf_buffer *const *)y;
    if (a->block != b->block) return a->block < b->block ? -1 : 1;
    return a->offset < b->offset ? -1 : a->offset > b->offset;
}

static void test_memory(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20};
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    assert_true(m->align >= 16 && m->align >= h.rt->dev.props.limits.minStorageBufferOffsetAlignment);
    assert_true(m->host_visible); /* lavapipe: one device-local, host-visible type */

    enum { N = 300 };
    vf_buffer *b[N];
    size_t want = 0;
    for (int i = 0; i < N; i++) {
        size_t sz = 1 + (size_t)(i * 37 % 4093);
        want += (sz + m->align - 1) / m->align * m->align;
        assert_int_equal(vf_vk_mem_alloc(m, sz, 0, &b[i]), VF_OK);
        assert_int_equal(b[i]->offset % m->align, 0);
        assert_true(b[i]->size >= sz);
    }
    assert_int_equal(m->bytes_in_use, (int64_t)want);
    assert_true(m->n_blocks <= 2); /* ~600 KiB in 1 MiB blocks */
    int64_t allocs = m->allocations;
    assert_true(allocs <= 2);
    vf_buffer *sorted[N];
    memcpy(sorted, b, sizeof b);
    qsort(sorted, N, sizeof sorted[0], cmp_buf);
    for (int i = 1; i < N; i++)
        if (sorted[i]->block == sorted[i - 1]->block)
            assert_true(sorted[i - 1]->offset + sorted[i - 1]->size <= sorted[i]->offset);

    /* free every other; same sizes fit back into the holes, no new block */
    for (int i = 0; i < N; i += 2) vf_vk_mem_free(m, b[i], h.rt->sched.completed);
    for (int i = 0; i < N; i += 2) assert_int_equal(vf_vk_mem_alloc(m, 1 + (size_t)(i * 37 % 4093), 0, &b[i]), VF_OK);
    assert_int_equal(m->allocations, allocs);
    assert_int_equal(m->bytes_in_use, (int64_t)want);

    /* free all: ranges coalesce back into one free range per block, and
       the blocks are cached, not destroyed */
    for (int i = 0; i < N; i++) vf_vk_mem_free(m, b[i], h.rt->sched.completed);
    assert_int_equal(m->bytes_in_use, 0);
    assert_int_equal(m->allocations, allocs);
    assert_int_equal(m->cached_bytes, m->bytes_reserved);
    for (int i = 0; i < m->n_blocks; i++) {
        assert_int_equal(m->blocks[i]->n_free, 1);
        assert_int_equal(m->blocks[i]->free[0].size, m->blocks[i]->size);
    }

    /* a whole-block-sized request after fragmentation and coalescing */
    vf_buffer *big = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 400 << 10, 0, &big), VF_OK);
    vf_buffer *ded = NULL; /* > block/2: dedicated */
    assert_int_equal(vf_vk_mem_alloc(m, 3 << 20, 0, &ded), VF_OK);
    assert_true(ded->block->dedicated);
    assert_int_equal(ded->offset, 0);
    vf_vk_mem_free(m, ded, h.rt->sched.completed);
    vf_vk_mem_free(m, big, h.rt->sched.completed);

    /* explicit alignment */
    vf_buffer *al = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 10, 0, &al), VF_OK);
    vf_buffer *al2 = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 10, 256, &al2), VF_OK);
    assert_int_equal(al2->offset % 256, 0);
    vf_vk_mem_free(m, al, 0);
    vf_vk_mem_free(m, al2, 0);

    /* over maxStorageBufferRange */
    vf_buffer *huge = NULL;
    size_t too_big = (size_t)h.rt->dev.props.limits.maxStorageBufferRange + 1;
    assert_int_equal(h.be.iface->alloc(h.be.self, too_big, &huge), VF_ERROR_UNSUPPORTED);
    assert_null(huge);
    char num[32];
    snprintf(num, sizeof num, "%zu", too_big);
    assert_non_null(strstr(h.err.message, num));
    assert_non_null(strstr(h.err.message, "maxStorageBufferRange"));
    vf_err_clear(&h.err);
    rt_done(&h);
}

/* A range freed while its batch is in flight is not handed out again
   until the batch completed. */
static void test_deferred_free(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const uint32_t n = 1 << 16;
    float *a = calloc(n, 4);
    vf_buffer *ba = alloc_upload(&h, a, n), *bb = alloc_upload(&h, a, n), *bc = alloc_upload(&h, NULL, n);
    axpy(&h, axpy_pipeline(&h), ba, bb, bc, n, 1.0f);
    VkDeviceSize off = bc->offset;
    vf_vk_block *blk = bc->block;
    h.be.iface->free(h.be.self, bc); /* still referenced by the open batch */
    assert_int_equal(h.rt->mem.n_pending, 1);
    vf_buffer *again = alloc_upload(&h, NULL, n);
    assert_false(again->block == blk && again->offset == off);
    assert_int_equal(h.be.iface->sync(h.be.self), VF_OK);
    assert_int_equal(h.rt->mem.n_pending, 0);
    vf_buffer *third = alloc_upload(&h, NULL, n); /* now the range is back */
    assert_true(third->block == blk && third->offset == off);
    h.be.iface->free(h.be.self, ba);
    h.be.iface->free(h.be.self, bb);
    h.be.iface->free(h.be.self, again);
    h.be.iface->free(h.be.self, third);
    free(a);
    rt_done(&h);
}

static bool has_block(const vf_vk_mem *m, uint64_t id)
{
    for (int i = 0; i < m->n_blocks; i++)
        if (m->blocks[i]->id == id) return true;
    return false;
}

/* A dedicated block goes to the cache when its tensor is freed and is
   taken by the next big allocation of its size class (or one that fits it
   wasting at most an eighth); classes are eight per power of two. */
static void test_size_classes(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20}; /* dedicated: > 512 KiB */
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    const VkDeviceSize K = 1024;
    assert_int_equal(vf_vk_mem_size_class(m, 600 * K), 640 * K);   /* 512 KiB octave: 64 KiB steps */
    assert_int_equal(vf_vk_mem_size_class(m, 640 * K), 640 * K);
    assert_int_equal(vf_vk_mem_size_class(m, 3 << 20), 3 << 20);   /* 2 MiB octave: 256 KiB steps */
    assert_int_equal(vf_vk_mem_size_class(m, (3 << 20) + 1), (3 << 20) + 256 * K);
    assert_int_equal(vf_vk_mem_size_class(m, 64 << 20), 64 << 20);
    assert_int_equal(vf_vk_mem_size_class(m, (64 << 20) + 16), 72 << 20);

    vf_buffer *a = NULL, *b = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 600 * K, 0, &a), VF_OK);
    assert_true(a->block->dedicated);
    assert_int_equal(a->block->size, 640 * K);
    uint64_t first = a->block->id;
    int64_t allocs = m->allocations;
    vf_vk_mem_free(m, a, h.rt->sched.completed);
    assert_int_equal(m->cached_bytes, 640 * K);
    assert_int_equal(m->bytes_in_use, 0);

    /* a larger tensor of the same class takes the block: no vkAllocateMemory */
    assert_int_equal(vf_vk_mem_alloc(m, 630 * K, 0, &a), VF_OK);
    assert_true(a->block->id == first);
    assert_int_equal(a->offset, 0);
    assert_int_equal(m->allocations, allocs);
    assert_int_equal(m->cached_bytes, 0);
    vf_vk_mem_free(m, a, h.rt->sched.completed);

    /* 3 MiB does not fit it: a block of its own; 560 KiB would waste more
       than an eighth of the 640 KiB block: one of its own too */
    assert_int_equal(vf_vk_mem_alloc(m, 3 << 20, 0, &b), VF_OK);
    assert_true(b->block->id != first);
    assert_int_equal(vf_vk_mem_alloc(m, 560 * K, 0, &a), VF_OK);
    assert_true(a->block->id != first);
    assert_int_equal(a->block->size, 576 * K);
    assert_int_equal(m->allocations, allocs + 2);
    assert_int_equal(m->cached_bytes, 640 * K);
    vf_vk_mem_free(m, a, h.rt->sched.completed);
    vf_vk_mem_free(m, b, h.rt->sched.completed);
    assert_int_equal(m->cached_bytes, (640 + 576) * K + (3 << 20));
    assert_int_equal(m->cached_bytes, m->bytes_reserved);
    rt_done(&h); /* cached blocks are freed with the rest (the validation layer checks) */
}

/* The cache's capacity is honoured: cached blocks beyond it are destroyed,
   the oldest first; pool blocks (small tensors) are cached like dedicated
   ones. */
static void test_cache_cap(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20, .cache_cap = 5 << 20};
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    assert_int_equal(m->cache_cap, 5 << 20);
    vf_buffer *d[3], *small = NULL;
    uint64_t id[3];
    for (int i = 0; i < 3; i++) {
        assert_int_equal(vf_vk_mem_alloc(m, 2 << 20, 0, &d[i]), VF_OK);
        id[i] = d[i]->block->id;
    }
    assert_int_equal(vf_vk_mem_alloc(m, 1000, 0, &small), VF_OK);
    assert_false(small->block->dedicated);
    uint64_t pool = small->block->id;
    for (int i = 0; i < 3; i++) {
        vf_vk_mem_free(m, d[i], h.rt->sched.completed);
        assert_true(m->cached_bytes <= m->cache_cap);
    }
    /* 6 MiB freed, 4 fit: the first block freed went */
    assert_int_equal(m->cached_bytes, 4 << 20);
    assert_false(has_block(m, id[0]));
    assert_true(has_block(m, id[1]) && has_block(m, id[2]));
    vf_vk_mem_free(m, small, h.rt->sched.completed); /* 5 MiB: all kept */
    assert_int_equal(m->cached_bytes, 5 << 20);
    assert_true(has_block(m, pool));
    vf_buffer *big = NULL; /* over the cap by itself: destroyed when freed, and all older ones with it */
    assert_int_equal(vf_vk_mem_alloc(m, 6 << 20, 0, &big), VF_OK);
    uint64_t big_id = big->block->id;
    vf_vk_mem_free(m, big, h.rt->sched.completed);
    assert_false(has_block(m, big_id));
    assert_int_equal(m->cached_bytes, 0);
    assert_int_equal(m->bytes_reserved, 0);
    rt_done(&h);
}

/* A loop that allocates and frees the same tensors stops allocating
   device memory after its first round, even when a round needs far more
   than a few blocks (8 dedicated blocks and 3 pool blocks here). */
static void test_reuse_loop(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20};
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    enum { BIG = 8, SMALL = 40 };
    int64_t after_first = 0;
    for (int round = 0; round < 4; round++) {
        vf_buffer *big[BIG], *small[SMALL];
        for (int i = 0; i < BIG; i++) assert_int_equal(vf_vk_mem_alloc(m, (2 << 20) - 64 * (size_t)i, 0, &big[i]), VF_OK);
        for (int i = 0; i < SMALL; i++) assert_int_equal(vf_vk_mem_alloc(m, 64 << 10, 0, &small[i]), VF_OK);
        for (int i = 0; i < BIG; i++) vf_vk_mem_free(m, big[i], h.rt->sched.completed);
        for (int i = 0; i < SMALL; i++) vf_vk_mem_free(m, small[i], h.rt->sched.completed);
        if (round == 0) after_first = m->allocations;
        assert_int_equal(m->allocations, after_first);
        assert_int_equal(m->cached_bytes, m->bytes_reserved);
    }
    assert_true(after_first >= BIG + 3);
    /* trim gives every cached block back */
    int64_t cached = m->cached_bytes;
    assert_int_equal(vf_vk_mem_trim(m), cached);
    assert_int_equal(m->cached_bytes, 0);
    assert_int_equal(m->bytes_reserved, 0);
    assert_int_equal(m->n_blocks, 0);
    rt_done(&h);
}

/* A block freed while queued work still uses it is not cached (so not
   handed out) until that work has completed; the backend's trim waits for
   it and gives it back too. */
static void test_in_flight(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20};
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    const uint32_t n = 1 << 19; /* 2 MiB: dedicated blocks */
    float *a = malloc((size_t)n * 4), *c = malloc((size_t)n * 4);
    for (uint32_t i = 0; i < n; i++) a[i] = (float)(i % 1000);
    vf_buffer *ba = alloc_upload(&h, a, n), *bb = alloc_upload(&h, a, n), *bc = alloc_upload(&h, NULL, n);
    const vf_vk_pipeline *p = axpy_pipeline(&h);
    axpy(&h, p, ba, bb, bc, n, 2.0f); /* queued, not submitted */
    uint64_t busy = bc->block->id;
    h.be.iface->free(h.be.self, bc);
    assert_int_equal(m->n_pending, 1);
    assert_int_equal(m->cached_bytes, 0); /* not cached while the batch may write it */
    vf_buffer *again = alloc_upload(&h, NULL, n);
    assert_true(again->block->id != busy);
    axpy(&h, p, ba, bb, again, n, 3.0f);
    assert_int_equal(h.be.iface->download(h.be.self, again, 0, c, (size_t)n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(c[i] == a[i] * 3.0f + a[i]);
    /* the download waited: the batch is done, the block cached and reused */
    assert_int_equal(m->n_pending, 0);
    assert_int_equal(m->cached_bytes, 2 << 20);
    vf_buffer *third = alloc_upload(&h, NULL, n);
    assert_true(third->block->id == busy);
    h.be.iface->free(h.be.self, third);

    /* trim: what queued work still uses is waited for and given back too */
    axpy(&h, p, ba, bb, again, n, 1.0f);
    h.be.iface->free(h.be.self, again);
    assert_int_equal(m->n_pending, 1);
    assert_non_null(h.be.iface->trim);
    assert_int_equal(h.be.iface->trim(h.be.self), VF_OK);
    assert_int_equal(m->n_pending, 0);
    assert_int_equal(m->cached_bytes, 0);
    assert_int_equal(m->bytes_reserved, 4 << 20); /* a and b */
    h.be.iface->free(h.be.self, ba);
    h.be.iface->free(h.be.self, bb);
    free(a);
    free(c);
    rt_done(&h);
}

/* When the driver is out of device memory (simulated by the test hook
   memory_limit), the cache is given back and the allocation tried again;
   ranges that wait for queued work are waited for first when that is what
   it takes. An allocation that fails even so is VF_ERROR_OUT_OF_MEMORY with
   the driver's error in the message, and leaves everything consistent. */
static void test_out_of_memory(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20};
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    vf_buffer *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 2 << 20, 0, &a), VF_OK);
    assert_int_equal(vf_vk_mem_alloc(m, 2 << 20, 0, &b), VF_OK);
    vf_vk_mem_free(m, a, h.rt->sched.completed);
    vf_vk_mem_free(m, b, h.rt->sched.completed);
    assert_int_equal(m->cached_bytes, 4 << 20);
    /* the device holds 5 MiB: 3 MiB (another class) fits only once the cache is gone */
    h.rt->dev.test.memory_limit = 5 << 20;
    int64_t allocs = m->allocations;
    assert_int_equal(vf_vk_mem_alloc(m, 3 << 20, 0, &c), VF_OK);
    assert_int_equal(h.err.status, VF_OK);
    assert_int_equal(m->retries, 1);
    assert_int_equal(m->cached_bytes, 0);
    assert_int_equal(m->bytes_reserved, 3 << 20);
    assert_int_equal(m->allocations, allocs + 1);

    /* more than the device has, cache or not: an error naming the driver's */
    vf_buffer *huge = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 4 << 20, 0, &huge), VF_ERROR_OUT_OF_MEMORY);
    assert_null(huge);
    assert_non_null(strstr(h.err.message, "vkAllocateMemory"));
    assert_non_null(strstr(h.err.message, "VK_ERROR_OUT_OF_DEVICE_MEMORY"));
    assert_int_equal(m->retries, 1); /* nothing cached: nothing to retry with */
    assert_int_equal(m->bytes_reserved, 3 << 20);
    vf_err_clear(&h.err);

    /* room for the tensor but not for its size class (1920 KiB): a block of
       exactly its size */
    const size_t K = 1024;
    vf_buffer *e = NULL;
    assert_int_equal(vf_vk_mem_size_class(m, 1900 * K), 1920 * K);
    h.rt->dev.test.memory_limit = (int64_t)((3072 + 1910) * K);
    assert_int_equal(vf_vk_mem_alloc(m, 1900 * K, 0, &e), VF_OK);
    assert_int_equal(h.err.status, VF_OK);
    assert_int_equal(e->block->size, 1900 * K);
    vf_vk_mem_free(m, e, h.rt->sched.completed);
    assert_int_equal(vf_vk_mem_trim(m), 1900 * K);

    /* a range freed while a batch uses it: waited for, then given back */
    const uint32_t n = (3 << 20) / 4;
    vf_buffer *in = NULL;
    h.rt->dev.test.memory_limit = 0;
    assert_int_equal(vf_vk_mem_alloc(m, (size_t)n * 4, 0, &in), VF_OK);
    float *host = calloc(n, 4);
    assert_int_equal(h.be.iface->upload(h.be.self, in, 0, host, (size_t)n * 4), VF_OK);
    axpy(&h, axpy_pipeline(&h), in, in, c, n, 1.0f);
    h.be.iface->free(h.be.self, c);
    assert_int_equal(m->n_pending, 1);
    h.rt->dev.test.memory_limit = m->bytes_reserved; /* no new block without c's */
    vf_buffer *d = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 2 << 20, 0, &d), VF_OK);
    assert_int_equal(h.err.status, VF_OK);
    assert_int_equal(m->retries, 2);
    assert_int_equal(m->n_pending, 0);
    h.rt->dev.test.memory_limit = 0;
    h.be.iface->free(h.be.self, d);
    h.be.iface->free(h.be.self, in);
    free(host);
    rt_done(&h);
}

/* VKFUSE_MEMORY_CACHE sizes the cache, 0 turns it off, and a value that
   is not a size is refused, not ignored. */
static void test_cache_env(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20};
    setenv("VKFUSE_MEMORY_CACHE", "3M", 1);
    rt_make(&h, NULL, &x);
    assert_int_equal(h.rt->mem.cache_cap, 3 << 20);
    rt_done(&h);
    setenv("VKFUSE_MEMORY_CACHE", "2GiB", 1);
    rt_make(&h, NULL, &x);
    assert_int_equal(h.rt->mem.cache_cap, (int64_t)2 << 30);
    rt_done(&h);

    setenv("VKFUSE_MEMORY_CACHE", "0", 1);
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    assert_int_equal(m->cache_cap, 0);
    for (int i = 0; i < 3; i++) {
        vf_buffer *a = NULL, *b = NULL;
        assert_int_equal(vf_vk_mem_alloc(m, 2 << 20, 0, &a), VF_OK);
        assert_int_equal(vf_vk_mem_alloc(m, 100, 0, &b), VF_OK);
        vf_vk_mem_free(m, a, h.rt->sched.completed);
        vf_vk_mem_free(m, b, h.rt->sched.completed);
        assert_int_equal(m->cached_bytes, 0);
        assert_int_equal(m->bytes_reserved, 0);
        assert_int_equal(m->allocations, 2 * (i + 1));
    }
    rt_done(&h);

    const char *bad[] = {"12x", "-1", "1.5G", "M", "99999999999G"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("VKFUSE_MEMORY_CACHE", bad[i], 1);
        vf_vk_options o = {.device_index = -1};
        vf_vk_options_read(&o, getenv);
        rt_handle hb;
        memset(&hb, 0, sizeof hb);
        assert_int_equal(rt_try(&hb, &o, &x), VF_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(hb.err.message, "VKFUSE_MEMORY_CACHE"));
        assert_non_null(strstr(hb.err.message, bad[i]));
        /* and through the API: no silent fallback to the CPU under AUTO */
        vf_context *ctx = NULL;
        assert_int_equal(vf_context_create(NULL, &ctx), VF_ERROR_INVALID_ARGUMENT);
        assert_non_null(strstr(vf_error_message(ctx), "VKFUSE_MEMORY_CACHE"));
        vf_context_destroy(ctx);
    }
    unsetenv("VKFUSE_MEMORY_CACHE");
}

/* ---- through the public API ------------------------------------------------ */

enum { N_ELEMS = 1 << 20, CHAIN = 40 }; /* 4 MiB tensors: 40 of them fill 3 pool blocks */

/* x = a + b + b ... (CHAIN adds) in a scope, repeated: the loop a user
   writes. After the first round the device allocates nothing more, and
   every round's result is right. */
static void run_chain(vf_context *ctx, vf_tensor *a, vf_tensor *b, const double *want, float *got)
{
    vf_scope_begin(ctx);
    vf_tensor *x = a;
    for (int k = 0; k < CHAIN; k++) x = vf_add(ctx, x, b);
    assert_non_null(x);
    assert_int_equal(vf_tensor_read(x, got, (size_t)N_ELEMS * 4), VF_OK);
    for (int i = 0; i < N_ELEMS; i++)
        if (fabs(got[i] - want[i]) > 1e-4) fail_msg("element %d: %g, want %g", i, (double)got[i], want[i]);
    vf_scope_end(ctx);
}

static void test_api_reuse_trim(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    int64_t shape[1] = {N_ELEMS};
    float *ha = malloc(N_ELEMS * 4), *hb = malloc(N_ELEMS * 4), *got = malloc(N_ELEMS * 4);
    double *want = malloc(N_ELEMS * sizeof *want);
    vt_fill_uniform(ha, N_ELEMS, -1, 1, 1);
    vt_fill_uniform(hb, N_ELEMS, -1, 1, 2);
    for (int i = 0; i < N_ELEMS; i++) want[i] = ha[i] + (double)CHAIN * hb[i];
    vf_tensor *a = vf_tensor_from_host(ctx, VF_F32, 1, shape, ha);
    vf_tensor *b = vf_tensor_from_host(ctx, VF_F32, 1, shape, hb);
    vf_context_stats st;
    int64_t allocs = 0;
    for (int round = 0; round < 3; round++) {
        run_chain(ctx, a, b, want, got);
        assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
        if (round == 0) allocs = st.device_allocations;
        assert_int_equal(st.device_allocations, allocs);
        assert_int_equal(st.device_bytes_in_use, 2 * N_ELEMS * 4);
        /* the chain's 40 results: two pool blocks cached, the rest free in the inputs' block */
        assert_true(st.device_bytes_cached >= 2 * (64 << 20));
        assert_true(st.device_bytes_reserved - st.device_bytes_in_use >= CHAIN * N_ELEMS * 4);
        assert_true(st.device_bytes_peak >= (CHAIN + 2) * N_ELEMS * 4);
    }
    assert_true(allocs >= 3);
    assert_int_equal(st.device_alloc_retries, 0);

    /* trim gives the cache back: the next round allocates again */
    int64_t reserved = st.device_bytes_reserved;
    assert_int_equal(vf_context_trim(ctx), VF_OK);
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_int_equal(st.device_bytes_cached, 0);
    assert_true(st.device_bytes_reserved < reserved);
    assert_int_equal(st.device_bytes_in_use, 2 * N_ELEMS * 4);
    run_chain(ctx, a, b, want, got);
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_true(st.device_allocations > allocs);
    assert_int_equal(vf_context_trim(NULL), VF_ERROR_INVALID_ARGUMENT);
    free(ha);
    free(hb);
    free(got);
    free(want);
    vt_context_done(ctx);

    /* the CPU backend caches nothing: trim is a no-op that succeeds */
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    vf_scope_begin(cpu);
    assert_non_null(vf_fill(cpu, VF_F32, 1, shape, 1.0));
    vf_scope_end(cpu);
    assert_int_equal(vf_context_trim(cpu), VF_OK);
    assert_int_equal(vf_context_stats_get(cpu, &st), VF_OK);
    assert_int_equal(st.device_bytes_cached, 0);
    assert_int_equal(st.device_bytes_reserved, 0);
    assert_int_equal(st.device_allocations, 1);
    assert_int_equal(st.device_bytes_peak, N_ELEMS * 4);
    vt_context_done(cpu);
}

/* Results written into reused memory (first filled with NaN by tensors
   that are then freed) are the CPU backend's, element for element: no
   stale byte shows through, for f32, bool and f16 outputs, reductions,
   softmax and matmul. And the freed tensors' handles stay dead: using one
   is an error naming it, and does not touch the tensors that now own its
   memory. */
enum { ROUNDS = 14, OPS = 6 };

static void reuse_ops(vf_context *ctx, vf_tensor *x, vf_tensor *y, vf_tensor **out)
{
    int64_t mm_a[2] = {256, 4096}, mm_b[2] = {4096, 256};
    int axis0 = 0;
    out[0] = vf_add(ctx, x, y);
    out[1] = vf_softmax(ctx, x, -1);
    out[2] = vf_reduce_sum(ctx, x, 1, &axis0, false);
    out[3] = vf_less(ctx, x, y);
    out[4] = vf_cast(ctx, y, VF_F16);
    out[5] = vf_matmul(ctx, vf_reshape(ctx, x, 2, mm_a), vf_reshape(ctx, y, 2, mm_b));
}

static void test_api_values_after_reuse(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    int64_t shape[2] = {1024, 1024}, flat[1] = {N_ELEMS};
    float *hx = malloc(N_ELEMS * 4), *hy = malloc(N_ELEMS * 4);
    vt_fill_uniform(hx, N_ELEMS, -3, 3, 3);
    vt_fill_uniform(hy, N_ELEMS, -3, 3, 4);
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, shape, hx), *y = vf_tensor_from_host(ctx, VF_F32, 2, shape, hy);
    vf_tensor *cx = vf_tensor_from_host(cpu, VF_F32, 2, shape, hx), *cy = vf_tensor_from_host(cpu, VF_F32, 2, shape, hy);
    vf_tensor *ref[OPS];
    reuse_ops(cpu, cx, cy, ref);

    vf_tensor *dead[CHAIN];
    vf_scope_begin(ctx);
    for (int i = 0; i < CHAIN; i++) dead[i] = vf_fill(ctx, VF_F32, 1, flat, NAN);
    assert_int_equal(vf_tensor_read(dead[CHAIN - 1], hx, 4 * N_ELEMS), VF_OK);
    assert_true(isnan(hx[0]));
    vf_scope_end(ctx);
    vf_context_stats st;
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    int64_t allocs = st.device_allocations;
    assert_true(st.device_bytes_cached > 0);
    assert_true(st.device_bytes_reserved - st.device_bytes_in_use >= CHAIN * N_ELEMS * 4);

    vf_scope_begin(ctx);
    vf_tensor *out[ROUNDS][OPS];
    for (int r = 0; r < ROUNDS; r++) reuse_ops(ctx, x, y, out[r]);
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_int_equal(st.device_allocations, allocs); /* all of it in reused memory */

    /* the dead handles: errors, and the new tensors keep their values */
    assert_null(vf_neg(ctx, dead[0]));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "tensor #", "vf_scope_end", NULL);
    assert_int_equal(vf_tensor_read(dead[CHAIN - 1], hx, 4 * N_ELEMS), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "tensor #", NULL);
    vf_tensor_release(dead[1]);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "tensor #", NULL);

    for (int k = 0; k < OPS; k++) {
        void *want = vt_read(ref[k]);
        size_t bytes = vf_tensor_bytes(ref[k]);
        for (int r = 0; r < ROUNDS; r++) {
            assert_int_equal(vf_tensor_bytes(out[r][k]), bytes);
            void *got = vt_read(out[r][k]);
            char what[64];
            snprintf(what, sizeof what, "op %d, round %d", k, r);
            /* sums in another order: rounding grows like sqrt(terms), times the terms' size
               (3 for the sum's, 9 for the matmul's products) */
            double atol = k == 2 ? 3 * vt_matmul_atol(1024) : k == 5 ? 9 * vt_matmul_atol(4096) : 1e-6;
            if (vf_tensor_dtype(ref[k]) == VF_F32)
                vt_assert_close_f32(got, want, bytes / 4, atol, 1e-5, what);
            else
                vt_assert_equal_bytes(got, want, bytes, what);
            free(got);
        }
        free(want);
    }
    vf_scope_end(ctx);
    free(hx);
    free(hy);
    vt_context_done(ctx);
    vt_context_done(cpu);
}

int main(void)
{
    pin_vulkan_libraries();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_deferred_free),
        cmocka_unit_test(test_size_classes),
        cmocka_unit_test(test_cache_cap),
        cmocka_unit_test(test_reuse_loop),
        cmocka_unit_test(test_in_flight),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_cache_env),
        cmocka_unit_test(test_api_reuse_trim),
        cmocka_unit_test(test_api_values_after_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
