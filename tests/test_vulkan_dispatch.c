/* The Vulkan runtime's dispatch: kernels, hazard tracking and barriers,
 * upload ordering, staging copies, descriptor pools and small batches, its
 * own SPIR-V with a uniform buffer and a specialisation constant, compile
 * errors, profiling, and the iface's exec through codegen and its kernel
 * memo. */
#include "vk_test_common.h"

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
    /* one pipeline, timed (the second kernel found it in the memory cache) */
    assert_int_equal(st.pipelines_created, 1);
    assert_true(st.pipeline_create_ms > 0.0);
    assert_true(st.shader_compile_ms > 0.0);
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
    int64_t b0 = h.rt->sched.hz.barriers;
    axpy(&h, p, a, b, c, n, 2.0f); /* c = 2a + b */
    axpy(&h, p, a, b, d, n, 3.0f); /* independent: no barrier */
    assert_int_equal(h.rt->sched.hz.barriers, b0);
    axpy(&h, p, c, d, e, n, 1.0f); /* reads c, d: RAW */
    assert_int_equal(h.rt->sched.hz.barriers, b0 + 1);
    axpy(&h, p, a, b, c, n, 4.0f); /* overwrites c, which e's kernel read: WAR */
    assert_int_equal(h.rt->sched.hz.barriers, b0 + 2);
    axpy(&h, p, a, b, d, n, 5.0f); /* d was read before the last barrier only */
    assert_int_equal(h.rt->sched.hz.barriers, b0 + 2);
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
    int64_t b1 = h.rt->sched.hz.barriers;
    vf_vk_dispatch_info di = {.pipe = p, .n_bindings = 3, .bindings = lo, .push = &pc,
                              .push_size = sizeof pc, .groups = {32, 1, 1}};
    assert_int_equal(vf_vk_sched_dispatch(&h.rt->sched, &di), VF_OK);
    di.bindings = hi;
    assert_int_equal(vf_vk_sched_dispatch(&h.rt->sched, &di), VF_OK);
    assert_int_equal(h.rt->sched.hz.barriers, b1);
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

/* ---- the iface's exec through codegen ------------------------------------ */

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
/* The eager kernel memo (vulkan/kernel_memo.h): an exec with the same
   pattern and sizes as an earlier one runs the kernel generated then, still
   counted as a shader memory hit and tracked for saved functions; other
   sizes generate again; random_normal (its seed a push constant) is never
   memoised. */
static void test_exec_memo(void **state)
{
    (void)state;
    rt_handle h;
    rt_make(&h, NULL, NULL);
    const uint32_t n = 1000;
    float *x = malloc(n * 4), *z = malloc(n * 4);
    for (uint32_t i = 0; i < n; i++) x[i] = (float)i;
    vf_exec e;
    memset(&e, 0, sizeof e);
    e.op = VF_OP_MUL;
    e.n_in = 2;
    vf_tref t = {.dtype = VF_F32, .rank = 1, .shape = {n}};
    e.in[0] = e.in[1] = e.out = t;
    e.in[0].buf = e.in[1].buf = alloc_upload(&h, x, n);
    e.out.buf = alloc_upload(&h, NULL, n);
    assert_int_equal(h.be.iface->exec(h.be.self, &e), VF_OK);
    assert_int_equal(h.rt->memo.misses, 1);
    assert_int_equal(h.rt->memo.hits, 0);
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(&e, &h.rt->dev.caps, &k, &err), VF_OK);
    uint64_t key = vf_vk_shader_key(&h.rt->shaders, k.step[0].glsl);
    vf_kernel_free(&k);

    vf_keyset track = {0};
    assert_null(h.be.iface->kernels_track(h.be.self, &track));
    int64_t mem = h.rt->shaders.memory_hits, compiles = h.rt->shaders.compiles;
    e.in[1].buf = e.out.buf; /* other buffers, same pattern: x * (x * x) */
    assert_int_equal(h.be.iface->exec(h.be.self, &e), VF_OK);
    assert_int_equal(h.rt->memo.hits, 1);
    assert_int_equal(h.rt->shaders.memory_hits, mem + 1);
    assert_int_equal(h.rt->shaders.compiles, compiles);
    assert_true(vf_keyset_has(&track, key));
    assert_ptr_equal(h.be.iface->kernels_track(h.be.self, NULL), &track);
    vf_keyset_free(&track);
    assert_int_equal(h.be.iface->download(h.be.self, e.out.buf, 0, z, n * 4), VF_OK);
    for (uint32_t i = 0; i < n; i++) assert_true(z[i] == x[i] * (x[i] * x[i]));

    e.in[0].shape[0] = e.in[1].shape[0] = e.out.shape[0] = n - 1; /* other sizes */
    assert_int_equal(h.be.iface->exec(h.be.self, &e), VF_OK);
    assert_int_equal(h.rt->memo.misses, 2);

    vf_exec r;
    memset(&r, 0, sizeof r);
    r.op = VF_OP_RANDOM_NORMAL;
    r.out = t;
    r.out.buf = e.out.buf;
    float first[4];
    for (uint64_t seed = 1; seed <= 2; seed++) {
        r.attrs.seed = seed;
        assert_int_equal(h.be.iface->exec(h.be.self, &r), VF_OK);
        assert_int_equal(h.be.iface->download(h.be.self, r.out.buf, 0, z, 16), VF_OK);
        if (seed == 1) memcpy(first, z, sizeof first);
    }
    assert_true(memcmp(first, z, sizeof first) != 0);
    assert_int_equal(h.rt->memo.misses + h.rt->memo.hits, 3);
    h.be.iface->free(h.be.self, e.in[0].buf);
    h.be.iface->free(h.be.self, e.out.buf);
    free(x);
    free(z);
    rt_done(&h);
}

int main(void)
{
    pin_vulkan_libraries();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_hazards),
        cmocka_unit_test(test_upload_ordering),
        cmocka_unit_test(test_staging_pools_batches),
        cmocka_unit_test(test_spirv_uniform_spec),
        cmocka_unit_test(test_compile_error),
        cmocka_unit_test(test_profile),
        cmocka_unit_test(test_exec_codegen),
        cmocka_unit_test(test_exec_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
