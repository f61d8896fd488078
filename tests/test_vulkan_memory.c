/* The Vulkan runtime's memory: sub-allocation from blocks, coalescing,
 * dedicated and aligned allocations, limits, and frees deferred while a
 * batch is in flight. */
#include "vk_test_common.h"

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

    /* free all: ranges coalesce back into one free range per block */
    for (int i = 0; i < N; i++) vf_vk_mem_free(m, b[i], h.rt->sched.completed);
    assert_int_equal(m->bytes_in_use, 0);
    assert_true(m->n_blocks <= 1); /* one spare is kept */
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

/* Idle dedicated blocks are reused by big allocations they fit (wasting at
   most an eighth) and kept up to idle_cap bytes, the oldest going first. */
static void test_idle_blocks(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.block_size = 1 << 20}; /* idle_cap: 4 MiB */
    rt_make(&h, NULL, &x);
    vf_vk_mem *m = &h.rt->mem;
    assert_int_equal(m->idle_cap, 4 << 20);
    vf_buffer *a = NULL, *b = NULL, *c = NULL;
    assert_int_equal(vf_vk_mem_alloc(m, 3 << 20, 0, &a), VF_OK);
    uint64_t first = a->block->id;
    int64_t allocs = m->allocations;
    vf_vk_mem_free(m, a, h.rt->sched.completed);
    assert_int_equal(m->idle_bytes, 3 << 20);
    assert_int_equal(m->bytes_in_use, 0);

    /* a slightly smaller tensor takes the same block: no vkAllocateMemory */
    assert_int_equal(vf_vk_mem_alloc(m, (3 << 20) - 100, 0, &a), VF_OK);
    assert_true(a->block->id == first);
    assert_int_equal(a->offset, 0);
    assert_int_equal(m->allocations, allocs);
    assert_int_equal(m->idle_bytes, 0);
    vf_vk_mem_free(m, a, h.rt->sched.completed);

    /* 600 KiB would waste most of the 3 MiB block: a block of its own */
    assert_int_equal(vf_vk_mem_alloc(m, 600 << 10, 0, &b), VF_OK);
    assert_true(b->block->dedicated && b->block->id != first);
    assert_int_equal(m->allocations, allocs + 1);
    vf_vk_mem_free(m, b, h.rt->sched.completed);
    assert_int_equal(m->idle_bytes, (3 << 20) + (600 << 10)); /* both kept: under 4 MiB */

    /* over the cap: the oldest idle block (the first) is destroyed */
    assert_int_equal(vf_vk_mem_alloc(m, 2 << 20, 0, &c), VF_OK);
    assert_int_equal(m->allocations, allocs + 2);
    vf_vk_mem_free(m, c, h.rt->sched.completed);
    assert_false(has_block(m, first));
    assert_int_equal(m->idle_bytes, (2 << 20) + (600 << 10));
    assert_true(m->idle_bytes <= m->idle_cap);
    rt_done(&h); /* idle blocks are freed with the rest (the validation layer checks) */
}

int main(void)
{
    pin_vulkan_libraries();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_deferred_free),
        cmocka_unit_test(test_idle_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
