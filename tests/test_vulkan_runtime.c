/* The Vulkan runtime below the backend iface: loader, device choice,
 * memory sub-allocation, shader/pipeline caches (memory, disk, a second
 * process, corrupt and stale files), dispatch with hazard tracking,
 * staging copies, descriptor pools, profiling, two runtimes at once.
 *
 * With VKFUSE_VALIDATION=1 (ctest) every runtime runs under the Khronos
 * validation layer with synchronisation validation; any message fails the
 * test (it is recorded in the vf_err, checked by rt_done, and ctest also
 * greps the output for VKFUSE-VALIDATION). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fusion/kernel.h"
#include "vulkan/disk_cache.h"
#include "vulkan/runtime.h"

#include <dirent.h>
#include <dlfcn.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---- helpers ---------------------------------------------------------------- */

static bool want_validation(void)
{
    const char *v = getenv("VKFUSE_VALIDATION");
    return v && *v && strcmp(v, "0") != 0;
}

typedef struct rt_handle {
    vf_err err;
    vf_backend_t be;
    vf_vk_runtime *rt;
    char name[256];
} rt_handle;

static vf_status rt_try(rt_handle *h, const vf_vk_options *o, const vf_vk_extra_options *x)
{
    memset(h, 0, sizeof *h);
    vf_status s = vf_vk_backend_create_ex(&h->err, o, x, &h->be, h->name, sizeof h->name);
    if (!s) h->rt = vf_vk_runtime_of(&h->be);
    return s;
}

static void rt_make(rt_handle *h, const char *cache_dir, const vf_vk_extra_options *x)
{
    vf_vk_options o = {.device_index = -1, .validation = want_validation(), .cache_dir = cache_dir};
    vf_status s = rt_try(h, &o, x);
    if (s) fprintf(stderr, "backend: %s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    assert_non_null(h->rt);
    if (want_validation()) {
        assert_true(h->rt->dev.validation);
        assert_true(h->rt->dev.sync_validation);
    }
}

static void rt_done(rt_handle *h)
{
    vf_status s = h->be.iface->sync(h->be.self);
    if (s) fprintf(stderr, "runtime error: %s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    int64_t msgs = h->rt->dev.validation_messages;
    h->be.iface->destroy(h->be.self);
    assert_int_equal(msgs, 0);
    assert_int_equal(h->err.status, VF_OK);
}

static void make_tmpdir(char *buf, size_t len)
{
    snprintf(buf, len, "%s/vkfuse-rt-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(buf));
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4200];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name), s = strlen(suffix);
        if (l > s && strcmp(e->d_name + l - s, suffix) == 0) n++;
    }
    closedir(d);
    return n;
}

/* c = a * k + b over n floats; push {uint n; float k;}. */
static const char *AXPY =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(set = 0, binding = 0) readonly buffer A { float a[]; };\n"
    "layout(set = 0, binding = 1) readonly buffer B { float b[]; };\n"
    "layout(set = 0, binding = 2) writeonly buffer C { float c[]; };\n"
    "layout(push_constant) uniform P { uint n; float k; } p;\n"
    "void main() {\n"
    "  uint i = gl_GlobalInvocationID.x;\n"
    "  if (i < p.n) c[i] = a[i] * p.k + b[i];\n"
    "}\n";

typedef struct axpy_push {
    uint32_t n;
    float k;
} axpy_push;

static void axpy(rt_handle *h, const vf_vk_pipeline *p, vf_buffer *a, vf_buffer *b, vf_buffer *c,
                 uint32_t n, float k)
{
    vf_vk_bind binds[3] = {
        {.buf = a, .range = (VkDeviceSize)n * 4, .access = VF_VK_READ},
        {.buf = b, .range = (VkDeviceSize)n * 4, .access = VF_VK_READ},
        {.buf = c, .range = (VkDeviceSize)n * 4, .access = VF_VK_WRITE},
    };
    axpy_push pc = {n, k};
    vf_vk_dispatch_info di = {
        .pipe = p, .n_bindings = 3, .bindings = binds, .push = &pc, .push_size = sizeof pc,
        .groups = {(n + 63) / 64, 1, 1},
    };
    vf_status s = vf_vk_sched_dispatch(&h->rt->sched, &di);
    if (s) fprintf(stderr, "%s\n", h->err.message);
    assert_int_equal(s, VF_OK);
}

static vf_buffer *alloc_upload(rt_handle *h, const float *x, uint32_t n)
{
    vf_buffer *b = NULL;
    assert_int_equal(h->be.iface->alloc(h->be.self, (size_t)n * 4, &b), VF_OK);
    if (x) assert_int_equal(h->be.iface->upload(h->be.self, b, 0, x, (size_t)n * 4), VF_OK);
    return b;
}

static const vf_vk_pipeline *axpy_pipeline(rt_handle *h)
{
    const vf_vk_pipeline *p = NULL;
    vf_status s = vf_vk_runtime_glsl_pipeline(h->rt, AXPY, "axpy_test", 3, sizeof(axpy_push), &p);
    if (s) fprintf(stderr, "%s\n", h->err.message);
    assert_int_equal(s, VF_OK);
    return p;
}

/* Runs axpy over n elements and checks the result; returns after freeing. */
static void run_axpy_check(rt_handle *h, uint32_t n)
{
    float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) a[i] = (float)i, b[i] = 0.5f * (float)(i % 7);
    vf_buffer *ba = alloc_upload(h, a, n), *bb = alloc_upload(h, b, n), *bc = alloc_upload(h, NULL, n);
    axpy(h, axpy_pipeline(h), ba, bb, bc, n, 3.0f);
    assert_int_equal(h->be.iface->download(h->be.self, bc, 0, c, (size_t)n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(c[i] == a[i] * 3.0f + b[i]);
    h->be.iface->free(h->be.self, ba);
    h->be.iface->free(h->be.self, bb);
    h->be.iface->free(h->be.self, bc);
    free(a);
    free(b);
    free(c);
}

/* ---- loader and devices --------------------------------------------------- */

static void test_loader(void **state)
{
    (void)state;
    vf_err err = {0};
    vf_vk_loader l;
    assert_int_equal(vf_vk_loader_open(&l, &err), VF_OK);
    assert_non_null(l.lib);
    assert_non_null(l.gipa);
    assert_non_null(l.vk.vkCreateInstance);
    assert_non_null(l.vk.vkEnumerateInstanceVersion);
    vf_vk_loader_close(&l);
    assert_null(l.lib);
    assert_string_equal(vf_vk_result_name(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
}

static void test_devices(void **state)
{
    (void)state;
    char err[512];
    int n = vf_devices(NULL, 0, err, sizeof err);
    assert_true(n >= 1);
    vf_device_info *d = calloc((size_t)n, sizeof *d);
    assert_int_equal(vf_devices(d, n, err, sizeof err), n);
    int chosen = 0, lvp = -1;
    for (int i = 0; i < n; i++) {
        chosen += d[i].chosen;
        assert_true(strlen(d[i].name) > 0);
        assert_true(strlen(d[i].vendor) > 0);
        assert_true(strlen(d[i].type) > 0);
        if (strstr(d[i].name, "llvmpipe")) lvp = i;
    }
    assert_int_equal(chosen, 1);
    assert_true(lvp >= 0);
    assert_string_equal(d[lvp].type, "cpu");
    assert_string_equal(d[lvp].vendor, "Mesa");
    assert_int_equal(d[lvp].subgroup_size, 8);
    assert_int_equal(d[lvp].shared_memory_bytes, 32768);
    assert_int_equal(d[lvp].max_storage_buffer_range, 128u << 20);
    assert_true(d[lvp].fp16);
    assert_true(d[lvp].storage16);
    assert_non_null(strstr(d[lvp].driver, "llvmpipe"));
    assert_true(d[lvp].api_version >= VK_API_VERSION_1_2);
    free(d);
}

static void test_device_choice(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_options o = {.device_index = 0, .validation = want_validation()};
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    assert_int_equal(h.rt->dev.index, 0);
    /* the caps codegen relies on */
    const vf_device_caps *c = &h.rt->dev.caps;
    assert_int_equal(c->subgroup_size, 8);
    assert_true(c->is_cpu);
    assert_true(c->subgroup_arithmetic);
    assert_true(c->storage8 && c->storage16 && c->shader_float16);
    assert_int_equal(c->max_push_constants, 128);
    assert_int_equal(c->max_storage_buffer_range, 128u << 20);
    assert_true(c->min_storage_buffer_offset_alignment >= 1);
    rt_done(&h);

    o.device_index = -1;
    o.device_env = "LLVMpipe"; /* case-insensitive substring */
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    assert_non_null(strstr(h.name, "llvmpipe"));
    rt_done(&h);

    o.device_env = "0";
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    rt_done(&h);

    o.device_env = "NoSuchGPU";
    assert_int_equal(rt_try(&h, &o, NULL), VF_ERROR_DEVICE);
    assert_non_null(strstr(h.err.message, "NoSuchGPU"));
    assert_non_null(strstr(h.err.message, "llvmpipe")); /* lists what there is */
    assert_null(h.be.iface);

    o.device_env = "42";
    assert_int_equal(rt_try(&h, &o, NULL), VF_ERROR_DEVICE);
    assert_non_null(strstr(h.err.message, "available"));

    o.device_env = NULL;
    o.device_index = 99;
    assert_int_equal(rt_try(&h, &o, NULL), VF_ERROR_DEVICE);
    assert_non_null(strstr(h.err.message, "99"));
    assert_non_null(strstr(h.err.message, "llvmpipe"));
}

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

/* ---- dispatch ----------------------------------------------------------- */

static void test_dispatch(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    run_axpy_check(&h, 1000);
    run_axpy_check(&h, 1); /* one element, one workgroup */
    vf_context_stats st = {0};
    h.be.iface->stats(h.be.self, &st);
    assert_int_equal(st.dispatches, 2);
    assert_true(st.submits >= 1);
    assert_int_equal(st.shader_compiles, 1);
    assert_int_equal(st.shader_memory_hits, 1);
    rt_done(&h);
}

/* Barriers only where a range written earlier is read or overwritten, or
   one read earlier is overwritten. */
static void test_hazards(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const uint32_t n = 4096;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) x[i] = (float)i;
    vf_buffer *a = alloc_upload(&h, x, n), *b = alloc_upload(&h, x, n);
    vf_buffer *c = alloc_upload(&h, NULL, n), *d = alloc_upload(&h, NULL, n), *e = alloc_upload(&h, NULL, n);
    const vf_vk_pipeline *p = axpy_pipeline(&h);
    int64_t b0 = h.rt->sched.barriers;
    axpy(&h, p, a, b, c, n, 2.0f); /* c = 2a + b */
    axpy(&h, p, a, b, d, n, 3.0f); /* independent: no barrier */
    assert_int_equal(h.rt->sched.barriers, b0);
    axpy(&h, p, c, d, e, n, 1.0f); /* reads c, d: RAW */
    assert_int_equal(h.rt->sched.barriers, b0 + 1);
    axpy(&h, p, a, b, c, n, 4.0f); /* overwrites c, which e's kernel read: WAR */
    assert_int_equal(h.rt->sched.barriers, b0 + 2);
    axpy(&h, p, a, b, d, n, 5.0f); /* d was read before the last barrier only */
    assert_int_equal(h.rt->sched.barriers, b0 + 2);
    assert_int_equal(h.be.iface->download(h.be.self, e, 0, y, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(y[i] == 2 * x[i] + x[i] + 3 * x[i] + x[i]);
    assert_int_equal(h.be.iface->download(h.be.self, c, 0, y, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(y[i] == 4 * x[i] + x[i]);
    /* disjoint ranges of one buffer are independent too */
    vf_vk_bind lo[3] = {{.buf = a, .range = 2048 * 4, .access = VF_VK_READ},
                        {.buf = b, .range = 2048 * 4, .access = VF_VK_READ},
                        {.buf = e, .range = 2048 * 4, .access = VF_VK_WRITE}};
    vf_vk_bind hi[3] = {{.buf = a, .offset = 2048 * 4, .range = 2048 * 4, .access = VF_VK_READ},
                        {.buf = b, .offset = 2048 * 4, .range = 2048 * 4, .access = VF_VK_READ},
                        {.buf = e, .offset = 2048 * 4, .range = 2048 * 4, .access = VF_VK_WRITE}};
    axpy_push pc = {2048, 1.0f};
    int64_t b1 = h.rt->sched.barriers;
    vf_vk_dispatch_info di = {.pipe = p, .n_bindings = 3, .bindings = lo, .push = &pc,
                              .push_size = sizeof pc, .groups = {32, 1, 1}};
    assert_int_equal(vf_vk_sched_dispatch(&h.rt->sched, &di), VF_OK);
    di.bindings = hi;
    assert_int_equal(vf_vk_sched_dispatch(&h.rt->sched, &di), VF_OK);
    assert_int_equal(h.rt->sched.barriers, b1);
    assert_int_equal(h.be.iface->download(h.be.self, e, 0, y, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(y[i] == 2 * x[i]);
    vf_buffer *all[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++) h.be.iface->free(h.be.self, all[i]);
    free(x);
    free(y);
    rt_done(&h);
}

/* An upload into a buffer that queued work still reads waits for it. */
static void test_upload_ordering(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const uint32_t n = 2048;
    float *one = malloc(n * 4), *two = malloc(n * 4), *zero = calloc(n, 4), *y = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) one[i] = 1.0f, two[i] = 2.0f;
    vf_buffer *a = alloc_upload(&h, one, n), *z = alloc_upload(&h, zero, n);
    vf_buffer *c = alloc_upload(&h, NULL, n), *d = alloc_upload(&h, NULL, n);
    const vf_vk_pipeline *p = axpy_pipeline(&h);
    axpy(&h, p, a, z, c, n, 1.0f); /* queued, reads a == 1 */
    assert_int_equal(h.be.iface->upload(h.be.self, a, 0, two, n * 4), VF_OK);
    axpy(&h, p, a, z, d, n, 1.0f); /* reads a == 2 */
    assert_int_equal(h.be.iface->download(h.be.self, c, 0, y, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(y[i] == 1.0f);
    assert_int_equal(h.be.iface->download(h.be.self, d, 0, y, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(y[i] == 2.0f);
    /* partial upload / download with offsets */
    assert_int_equal(h.be.iface->upload(h.be.self, d, 8, two, 12), VF_OK);
    float part[3];
    assert_int_equal(h.be.iface->download(h.be.self, d, 8, part, 12), VF_OK);
    assert_true(part[0] == 2.0f && part[2] == 2.0f);
    assert_int_equal(h.be.iface->upload(h.be.self, d, n * 4 - 4, two, 8), VF_ERROR_INVALID_ARGUMENT);
    vf_err_clear(&h.err);
    vf_buffer *all[] = {a, z, c, d};
    for (int i = 0; i < 4; i++) h.be.iface->free(h.be.self, all[i]);
    free(one);
    free(two);
    free(zero);
    free(y);
    rt_done(&h);
}

/* Staging copies, descriptor pools instead of push descriptors, and small
   batches: a dependent chain across many submits. */
static void test_staging_pools_batches(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_extra_options x = {.force_staging = true, .no_push_descriptors = true, .batch_dispatches = 2};
    rt_make(&h, NULL, &x);
    assert_false(h.rt->mem.host_visible);
    assert_false(h.rt->dev.push_descriptors);
    const uint32_t n = 3000;
    float *v = malloc(n * 4), *zero = calloc(n, 4);
    for (uint32_t i = 0; i < n; i++) v[i] = (float)(i % 100);
    vf_buffer *cur = alloc_upload(&h, v, n), *z = alloc_upload(&h, zero, n);
    const vf_vk_pipeline *p = axpy_pipeline(&h);
    for (int it = 0; it < 9; it++) { /* cur = 2 * cur, nine times */
        vf_buffer *next = alloc_upload(&h, NULL, n);
        axpy(&h, p, cur, z, next, n, 2.0f);
        h.be.iface->free(h.be.self, cur);
        cur = next;
    }
    float *y = malloc(n * 4);
    assert_int_equal(h.be.iface->download(h.be.self, cur, 0, y, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(y[i] == v[i] * 512.0f);
    assert_true(h.rt->sched.submits >= 5);
    /* a staging upload bigger than the staging buffer */
    const uint32_t big = 3u << 20;
    float *w = malloc((size_t)big * 4), *r = malloc((size_t)big * 4);
    for (uint32_t i = 0; i < big; i++) w[i] = (float)i;
    vf_buffer *bb = alloc_upload(&h, w, big);
    assert_int_equal(h.be.iface->download(h.be.self, bb, 0, r, (size_t)big * 4), VF_OK);
    assert_memory_equal(w, r, (size_t)big * 4);
    h.be.iface->free(h.be.self, bb);
    h.be.iface->free(h.be.self, cur);
    h.be.iface->free(h.be.self, z);
    free(v);
    free(zero);
    free(y);
    free(w);
    free(r);
    rt_done(&h);
}

/* What an AmberScript runner needs: its own SPIR-V, a uniform buffer next
   to a storage buffer, and a specialisation constant. */
static void test_spirv_uniform_spec(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, &(vf_vk_extra_options){.no_push_descriptors = true});
    const char *glsl =
        "#version 450\n"
        "layout(local_size_x = 32) in;\n"
        "layout(constant_id = 7) const uint MUL = 1u;\n"
        "layout(set = 0, binding = 0) uniform U { uint add; } u;\n"
        "layout(set = 0, binding = 1) buffer O { uint o[]; };\n"
        "void main() { uint i = gl_GlobalInvocationID.x; o[i] = i * MUL + u.add; }\n";
    const vf_vk_spirv *spv = NULL;
    assert_int_equal(vf_vk_shader_get(&h.rt->shaders, glsl, "amber_like", &spv), VF_OK);
    VkDescriptorType types[2] = {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
    uint32_t mul = 5;
    VkSpecializationMapEntry me = {.constantID = 7, .offset = 0, .size = 4};
    vf_vk_pipeline_desc pd = {
        .spirv = spv->words, .spirv_words = spv->n_words, /* key 0: hashed from the words */
        .name = "amber_like", .n_bindings = 2, .types = types,
        .n_spec = 1, .spec_map = &me, .spec_data = &mul, .spec_size = 4,
    };
    const vf_vk_pipeline *p = NULL, *p2 = NULL;
    assert_int_equal(vf_vk_pipeline_get(&h.rt->pipes, &pd, &p), VF_OK);
    mul = 6; /* another constant: another pipeline */
    assert_int_equal(vf_vk_pipeline_get(&h.rt->pipes, &pd, &p2), VF_OK);
    assert_true(p != p2);
    mul = 5;
    const vf_vk_pipeline *p3 = NULL;
    assert_int_equal(vf_vk_pipeline_get(&h.rt->pipes, &pd, &p3), VF_OK);
    assert_ptr_equal(p, p3);

    vf_buffer *ub = NULL, *ob = NULL;
    VkDeviceSize ualign = h.rt->dev.props.limits.minUniformBufferOffsetAlignment;
    assert_int_equal(vf_vk_mem_alloc(&h.rt->mem, 16, ualign, &ub), VF_OK);
    assert_int_equal(h.be.iface->alloc(h.be.self, 64 * 4, &ob), VF_OK);
    uint32_t add = 1000;
    assert_int_equal(h.be.iface->upload(h.be.self, ub, 0, &add, 4), VF_OK);
    vf_vk_bind b[2] = {{.buf = ub, .range = 16, .access = VF_VK_READ}, {.buf = ob, .access = VF_VK_WRITE}};
    vf_vk_dispatch_info di = {.pipe = p, .n_bindings = 2, .bindings = b, .groups = {2, 1, 1}};
    assert_int_equal(vf_vk_sched_dispatch(&h.rt->sched, &di), VF_OK);
    uint32_t out[64];
    assert_int_equal(h.be.iface->download(h.be.self, ob, 0, out, sizeof out), VF_OK);
    for (uint32_t i = 0; i < 64; i++) assert_int_equal(out[i], i * 5 + 1000);
    h.be.iface->free(h.be.self, ub);
    h.be.iface->free(h.be.self, ob);
    rt_done(&h);
}

static void test_compile_error(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const char *bad = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undefined_thing = 1; }\n";
    const vf_vk_pipeline *p = NULL;
    assert_int_equal(vf_vk_runtime_glsl_pipeline(h.rt, bad, "broken_kernel", 0, 0, &p), VF_ERROR_COMPILE);
    assert_null(p);
    assert_non_null(strstr(h.err.message, "broken_kernel"));
    assert_non_null(strstr(h.err.message, "undefined_thing"));
    assert_non_null(strstr(h.err.message, "error"));
    vf_err_clear(&h.err);
    /* the runtime is still usable */
    run_axpy_check(&h, 100);
    rt_done(&h);
}

static void test_profile(void **state)
{
    (void)state;
    rt_handle h;
    vf_vk_options o = {.device_index = -1, .validation = want_validation(), .profile = true};
    assert_int_equal(rt_try(&h, &o, NULL), VF_OK);
    run_axpy_check(&h, 50000);
    run_axpy_check(&h, 50000);
    size_t n = 0;
    const vf_vk_timing *t = vf_vk_runtime_timings(h.rt, &n);
    assert_int_equal(n, 2);
    assert_string_equal(t[0].name, "axpy_test");
    assert_true(t[0].ns > 0 && t[0].ns < 10ull * 1000 * 1000 * 1000);
    vf_vk_runtime_timings_clear(h.rt);
    vf_vk_runtime_timings(h.rt, &n);
    assert_int_equal(n, 0);
    rt_done(&h);
}

/* ---- caches ------------------------------------------------------------- */

static void shader_stats(rt_handle *h, int64_t *compiles, int64_t *mem, int64_t *disk)
{
    *compiles = h->rt->shaders.compiles;
    *mem = h->rt->shaders.memory_hits;
    *disk = h->rt->shaders.disk_hits;
}

static void test_cache_memory_and_disk(void **state)
{
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/nested/cache", dir); /* created on demand */
    int64_t c, m, d;
    rt_handle h;
    rt_make(&h, sub, NULL);
    run_axpy_check(&h, 64);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 1);
    assert_int_equal(m, 1);
    assert_int_equal(d, 0);
    assert_false(h.rt->pipes.cache_loaded);
    rt_done(&h); /* saves the pipeline cache */
    assert_int_equal(count_files(sub, ".spv"), 1);
    assert_int_equal(count_files(sub, ".bin"), 1);
    assert_int_equal(count_files(sub, "XXXXXX"), 0);

    /* a second runtime in this process: a disk hit, no compile */
    rt_make(&h, sub, NULL);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 0);
    assert_int_equal(d, 1);
    assert_true(h.rt->pipes.cache_loaded);
    assert_int_equal(h.rt->pipes.cache_rejected, 0);
    rt_done(&h);

    /* no disk cache: "" */
    rt_make(&h, "", NULL);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 1);
    rt_done(&h);
    remove_tree(sub);
    snprintf(sub, sizeof sub, "%s/nested", dir);
    remove_tree(sub);
    remove_tree(dir);
}

/* The child of test_cache_second_process: exit 0 iff the shader came from
   disk with no compile. */
static int child_main(const char *dir)
{
    vf_err err = {0};
    vf_backend_t be;
    vf_vk_options o = {.device_index = -1, .validation = want_validation(), .cache_dir = dir};
    if (vf_vk_backend_create_ex(&err, &o, NULL, &be, NULL, 0)) {
        fprintf(stderr, "child: %s\n", err.message);
        return 2;
    }
    vf_vk_runtime *rt = vf_vk_runtime_of(&be);
    const vf_vk_pipeline *p = NULL;
    vf_status s = vf_vk_runtime_glsl_pipeline(rt, AXPY, "axpy_test", 3, sizeof(axpy_push), &p);
    int rc = s ? 3 : rt->shaders.compiles != 0 ? 4 : rt->shaders.disk_hits != 1 ? 5
           : !rt->pipes.cache_loaded ? 6 : 0;
    be.iface->destroy(be.self);
    if (err.status) rc = 7;
    return rc;
}

/* Child with no driver visible (VK_ICD_FILENAMES points nowhere): creation
   fails with VF_ERROR_DEVICE saying so, and vf_devices finds nothing.
   No validation here: the loader's own warnings about the missing driver
   would go to the messenger. */
static int no_device_child(void)
{
    vf_err err = {0};
    vf_backend_t be;
    vf_vk_options o = {.device_index = -1};
    vf_status s = vf_vk_backend_create_ex(&err, &o, NULL, &be, NULL, 0);
    if (s != VF_ERROR_DEVICE) return 10;
    if (!strstr(err.message, "no Vulkan device")) {
        fprintf(stderr, "child: unexpected message: %s\n", err.message);
        return 11;
    }
    char msg[256];
    if (vf_devices(NULL, 0, msg, sizeof msg) != 0) return 12;
    return 0;
}

static int spawn_self(const char *arg1, const char *arg2, char **envp)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    assert_true(n > 0);
    exe[n] = '\0';
    char *argv[] = {exe, (char *)arg1, (char *)arg2, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, exe, NULL, NULL, argv, envp), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_no_device(void **state)
{
    (void)state;
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 3, sizeof *env);
    size_t j = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "VK_ICD_FILENAMES=", 17) && strncmp(environ[i], "VK_DRIVER_FILES=", 16))
            env[j++] = environ[i];
    env[j++] = "VK_ICD_FILENAMES=/nonexistent/icd.json";
    env[j++] = "VK_DRIVER_FILES=/nonexistent/icd.json";
    assert_int_equal(spawn_self("--no-device-child", "", env), 0);
    free(env);
}

static void test_cache_second_process(void **state)
{
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    rt_handle h;
    rt_make(&h, dir, NULL);
    run_axpy_check(&h, 64);
    rt_done(&h);
    assert_int_equal(spawn_self("--cache-child", dir, environ), 0);
    remove_tree(dir);
}

static void patch_file(const char *path, long offset, uint8_t xor_mask)
{
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    int ch = fgetc(f);
    assert_true(ch != EOF);
    assert_int_equal(fseek(f, offset, SEEK_SET), 0);
    fputc(ch ^ xor_mask, f);
    fclose(f);
}

static void test_cache_corrupt_and_stale(void **state)
{
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    int64_t c, m, d;
    rt_handle h;
    rt_make(&h, dir, NULL);
    run_axpy_check(&h, 64);
    char spv[4200], pc[4200];
    assert_true(vf_vk_shader_path(&h.rt->shaders, vf_vk_shader_key(&h.rt->shaders, AXPY), spv, sizeof spv));
    snprintf(pc, sizeof pc, "%s", h.rt->pipes.cache_path);
    rt_done(&h);

    /* 1. a flipped payload byte: the checksum rejects it; compiled again and
          rewritten */
    patch_file(spv, (long)sizeof(vf_disk_header) + 40, 0x5a);
    patch_file(pc, (long)sizeof(vf_disk_header) + 20, 0x5a);
    rt_make(&h, dir, NULL);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 1);
    assert_int_equal(d, 0);
    assert_int_equal(h.rt->shaders.disk_rejects, 1);
    assert_int_equal(h.rt->pipes.cache_rejected, 1);
    assert_false(h.rt->pipes.cache_loaded);
    rt_done(&h);
    rt_make(&h, dir, NULL); /* the rewritten files are good */
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 0);
    assert_int_equal(d, 1);
    assert_true(h.rt->pipes.cache_loaded);
    rt_done(&h);

    /* 2. made for another device: deviceID in our header (a stale entry) */
    patch_file(spv, (long)offsetof(vf_disk_header, device_id), 0x01);
    patch_file(pc, (long)offsetof(vf_disk_header, uuid), 0x01);
    rt_make(&h, dir, NULL);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 1);
    assert_int_equal(h.rt->shaders.disk_rejects, 1);
    assert_int_equal(h.rt->pipes.cache_rejected, 1);
    rt_done(&h);

    /* 3. Vulkan's own pipeline-cache header names another device: our
          header is consistent (checksum recomputed) but the data is not */
    vf_vk_device tmp_dev;
    vf_vk_device_options dopt = {.device_index = -1};
    vf_err e2 = {0};
    assert_int_equal(vf_vk_device_create(&tmp_dev, &dopt, &e2), VF_OK);
    void *data = NULL;
    size_t size = 0;
    uint64_t key = 0;
    {
        FILE *f = fopen(pc, "rb");
        assert_non_null(f);
        vf_disk_header hd;
        assert_int_equal(fread(&hd, sizeof hd, 1, f), 1);
        key = hd.key;
        fclose(f);
    }
    assert_int_equal(vf_disk_read(&tmp_dev, pc, VF_DISK_MAGIC_PIPELINE, key, &data, &size), VF_DISK_OK);
    ((uint8_t *)data)[12] ^= 0xff; /* VkPipelineCacheHeaderVersionOne.deviceID */
    assert_true(vf_disk_write(&tmp_dev, pc, VF_DISK_MAGIC_PIPELINE, key, data, size));
    free(data);
    /* a truncated SPIR-V file */
    assert_int_equal(truncate(spv, 10), 0);
    vf_vk_device_destroy(&tmp_dev);
    rt_make(&h, dir, NULL);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 1);
    assert_int_equal(h.rt->shaders.disk_rejects, 1);
    assert_int_equal(h.rt->pipes.cache_rejected, 1);
    rt_done(&h);
    rt_make(&h, dir, NULL);
    run_axpy_check(&h, 64);
    shader_stats(&h, &c, &m, &d);
    assert_int_equal(c, 0);
    assert_true(h.rt->pipes.cache_loaded);
    rt_done(&h);
    remove_tree(dir);
}

/* ---- two runtimes, and the iface's exec through codegen ------------------- */

static void test_two_runtimes(void **state)
{
    (void)state;
    rt_handle *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    rt_make(a, NULL, NULL);
    rt_make(b, NULL, &(vf_vk_extra_options){.no_push_descriptors = true});
    assert_true(a->rt->dev.device != b->rt->dev.device);
    assert_true(a->rt->dev.vkd.vkCmdDispatch != NULL && b->rt->dev.vkd.vkCmdDispatch != NULL);
    run_axpy_check(a, 5000);
    run_axpy_check(b, 7000);
    run_axpy_check(a, 300);
    rt_done(a); /* destroying one leaves the other working */
    run_axpy_check(b, 900);
    rt_done(b);
    free(a);
    free(b);
}

static void test_exec_codegen(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const uint32_t n = 1000;
    float *x = malloc(n * 4), *y = malloc(n * 4), *z = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) x[i] = (float)i, y[i] = 0.25f * (float)i;
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_ADD;
    e.n_in = 2;
    vf_tref t = {.dtype = VF_F32, .rank = 1, .shape = {n}};
    e.in[0] = t;
    e.in[1] = t;
    e.out = t;
    e.in[0].buf = alloc_upload(&h, x, n);
    e.in[1].buf = alloc_upload(&h, y, n);
    e.out.buf = alloc_upload(&h, NULL, n);
    vf_status s = h.be.iface->exec(h.be.self, &e);
    if (s) fprintf(stderr, "exec: %s\n", h.err.message);
    assert_int_equal(s, VF_OK);
    assert_int_equal(h.be.iface->download(h.be.self, e.out.buf, 0, z, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(z[i] == x[i] + y[i]);
    /* in place: out == in[0] */
    vf_buffer *out0 = e.out.buf;
    e.out.buf = e.in[0].buf;
    assert_int_equal(h.be.iface->exec(h.be.self, &e), VF_OK);
    assert_int_equal(h.be.iface->download(h.be.self, e.in[0].buf, 0, z, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(z[i] == x[i] + y[i]);
    h.be.iface->free(h.be.self, e.in[0].buf);
    h.be.iface->free(h.be.self, e.in[1].buf);
    free(x);
    free(y);
    free(z);
    vf_context_stats st = {0};
    h.be.iface->stats(h.be.self, &st);
    assert_true(st.device_bytes_in_use > 0); /* out0 */
    h.be.iface->free(h.be.self, out0);
    h.be.iface->stats(h.be.self, &st);
    assert_int_equal(st.device_bytes_in_use, 0);
    rt_done(&h);
}

/* LeakSanitizer names a leak's library only while it is still mapped; the
   Vulkan loader unloads drivers and layers at vkDestroyInstance (and we
   dlclose the loader), so their known leaks at exit would show up as
   "<unknown module>" and escape tests/lsan.supp. Pinning them keeps them
   mapped. This is the test's business, not the library's. */
static void pin_vulkan_libraries(void)
{
    static const char *const libs[] = {"libvulkan.so.1", "libvulkan_lvp.so",
                                       "libVkLayer_khronos_validation.so",
                                       "libVkLayer_MESA_device_select.so"};
    for (size_t i = 0; i < sizeof libs / sizeof libs[0]; i++)
        dlopen(libs[i], RTLD_NOW | RTLD_NODELETE); /* absent ones are fine */
}

int main(int argc, char **argv)
{
    pin_vulkan_libraries();
    if (argc == 3 && strcmp(argv[1], "--cache-child") == 0) return child_main(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--no-device-child") == 0) return no_device_child();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader),
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_device_choice),
        cmocka_unit_test(test_no_device),
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_deferred_free),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_hazards),
        cmocka_unit_test(test_upload_ordering),
        cmocka_unit_test(test_staging_pools_batches),
        cmocka_unit_test(test_spirv_uniform_spec),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_cache_memory_and_disk),
        cmocka_unit_test(test_cache_second_process),
        cmocka_unit_test(test_cache_corrupt_and_stale),
        cmocka_unit_test(test_two_runtimes),
        cmocka_unit_test(test_exec_codegen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
