/* Texel reads (vf_device_caps.texel_reads): on llvmpipe a kernel may read
 * a read-only f32 input through a uniform texel buffer (texelFetch, a
 * vector gather there) instead of a storage buffer (a loop over the
 * lanes). The softmax row kernel in registers does (codegen_softmax.c).
 * Checked here:
 *  - the caps: set on lavapipe, cleared by VKFUSE_TEST_CAPS=cpu-notexel;
 *  - codegen: the kernel binds its input as a texel buffer (the dispatch's
 *    texel mask, a samplerBuffer in its GLSL) only where the caps say so;
 *  - results: softmax and log_softmax, eager and traced, with and without
 *    push descriptors, inputs at offsets inside shared memory blocks, are
 *    bit-identical to the storage-buffer kernel's (the arithmetic is the
 *    same, only the loads differ) and close to a double reference;
 *  - the view's checks: a misaligned offset is an error that names the
 *    binding, not a crash.
 */
#include "testutil.h"
#include "vk_test_common.h"

#include "vulkan/memory.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The device's own caps, and the CPU profile without texel reads. */
static void test_caps(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_device_caps dev = h.rt->dev.caps;
    bool lavapipe = strstr(h.name, "llvmpipe") != NULL;
    rt_done(&h);
    assert_int_equal(dev.texel_reads, lavapipe);
    char *saved = vt_set_caps_env("cpu-notexel");
    rt_make(&h, NULL, NULL);
    assert_true(h.rt->dev.caps.is_cpu);
    assert_false(h.rt->dev.caps.texel_reads);
    rt_done(&h);
    vt_restore_caps_env(saved);
}

/* ---- codegen ------------------------------------------------------------------ */

static vf_exec softmax_exec(vf_op op, int64_t rows, int64_t cols)
{
    vf_exec e = {.op = op, .n_in = 1};
    e.in[0] = (vf_tref){.dtype = VF_F32, .rank = 2, .shape = {rows, cols}};
    e.out = e.in[0];
    e.attrs.axis = 1;
    return e;
}

static void test_codegen_binds_a_texel_buffer_where_the_caps_say(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_device_caps caps = h.rt->dev.caps;
    rt_done(&h);
    caps.is_cpu = true;
    const vf_op ops[2] = {VF_OP_SOFTMAX, VF_OP_LOG_SOFTMAX};
    for (int t = 0; t < 2; t++) {
        caps.texel_reads = t == 1;
        for (int o = 0; o < 2; o++) {
            vf_exec e = softmax_exec(ops[o], 37, 1024);
            vf_gen_kernel k;
            vf_err err = {0};
            assert_int_equal(vf_codegen_exec(&e, &caps, &k, &err), VF_OK);
            assert_int_equal(k.n_steps, 1);
            const vf_dispatch *d = &k.step[0];
            assert_non_null(strstr(d->name, "_f32_reg"));
            assert_int_equal(d->n_bindings, 2);
            assert_int_equal(d->texel, caps.texel_reads ? 1u : 0u); /* the input, slot 0; never the output */
            assert_int_equal(strstr(d->glsl, "samplerBuffer") != NULL, caps.texel_reads);
            assert_int_equal(strstr(d->name, "_tex") != NULL, caps.texel_reads);
            vf_kernel_free(&k);
        }
    }
    /* the GPU profile's row kernels never do */
    caps.is_cpu = false;
    caps.texel_reads = true;
    vf_exec e = softmax_exec(VF_OP_SOFTMAX, 37, 1024);
    vf_gen_kernel k;
    vf_err err = {0};
    assert_int_equal(vf_codegen_exec(&e, &caps, &k, &err), VF_OK);
    for (int i = 0; i < k.n_steps; i++) assert_int_equal(k.step[i].texel, 0u);
    vf_kernel_free(&k);
}

/* ---- results -------------------------------------------------------------------- */

static void ref_softmax(const float *x, double *y, int64_t rows, int64_t cols, bool log_out)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < cols; c++) m = fmax(m, xr[c]);
        for (int64_t c = 0; c < cols; c++) s += exp((double)xr[c] - m);
        for (int64_t c = 0; c < cols; c++)
            y[r * cols + c] = log_out ? (double)xr[c] - m - log(s) : exp((double)xr[c] - m) / s;
    }
}

enum { N_SHAPES = 4 };
static const int64_t shapes[N_SHAPES][2] = {{37, 1024}, {8, 2048}, {3, 512}, {130, 16}};

static vf_status traced_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_softmax(ctx, in[0], -1);
    out[1] = vf_log_softmax(ctx, in[0], -1);
    return vf_status_get(ctx);
}

/* softmax, log_softmax eager and the same traced, for every shape: 4
   arrays per shape; the traced function's kernel names in *kernels. */
static float **run_all(const char *profile, char *kernels, size_t kernels_len)
{
    char *saved = vt_set_caps_env(profile);
    setenv("VKFUSE_PROFILE", "1", 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_PROFILE");
    vt_restore_caps_env(saved);
    float **res = calloc(4 * N_SHAPES, sizeof *res);
    assert_non_null(res);
    kernels[0] = '\0';
    for (int s = 0; s < N_SHAPES; s++) {
        int64_t n = shapes[s][0] * shapes[s][1];
        float *x = malloc(sizeof *x * (size_t)n);
        assert_non_null(x);
        vt_fill_uniform(x, (size_t)n, -30, 30, 11 + (uint64_t)s);
        vf_scope_begin(ctx);
        /* small tensors first: the input then lies at an offset inside a
           shared memory block, so its view does not start the buffer */
        const int64_t one = 3;
        float pad[3] = {1, 2, 3};
        for (int i = 0; i <= s; i++) (void)vf_tensor_from_host(ctx, VF_F32, 1, &one, pad);
        vf_tensor *t = vf_tensor_from_host(ctx, VF_F32, 2, shapes[s], x);
        res[4 * s + 0] = vt_read(vf_softmax(ctx, t, -1));
        res[4 * s + 1] = vt_read(vf_log_softmax(ctx, t, -1));
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "sm", .body = traced_body,
                                                                       .n_inputs = 1, .n_outputs = 2});
        assert_non_null(fn);
        vf_tensor *out[2];
        assert_int_equal(vf_function_call(fn, &t, out), VF_OK);
        res[4 * s + 2] = vt_read(out[0]);
        res[4 * s + 3] = vt_read(out[1]);
        vf_function_profile p;
        assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
        assert_true(p.profiled);
        for (int k = 0; k < p.n_kernels; k++) {
            strncat(kernels, p.kernels[k].name, kernels_len - strlen(kernels) - 2);
            strcat(kernels, " ");
        }
        vf_function_destroy(fn);
        vf_scope_end(ctx);
        free(x);
    }
    vt_context_done(ctx);
    return res;
}

static void test_results_equal_the_storage_kernel(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    char ktex[2048], kplain[2048];
    float **tex = run_all(NULL, ktex, sizeof ktex), **plain = run_all("cpu-notexel", kplain, sizeof kplain);
    rt_handle h;
    rt_make(&h, NULL, NULL);
    bool texel = h.rt->dev.caps.texel_reads && h.rt->dev.caps.is_cpu;
    rt_done(&h);
    /* the traced plans ran the texel kernel where the device has texel reads */
    assert_int_equal(strstr(ktex, "_reg_tex") != NULL, texel);
    assert_null(strstr(kplain, "_reg_tex"));
    for (int s = 0; s < N_SHAPES; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
        float *x = malloc(sizeof *x * (size_t)n);
        double *y = malloc(sizeof *y * (size_t)n);
        float *want = malloc(sizeof *want * (size_t)n);
        assert_true(x && y && want);
        vt_fill_uniform(x, (size_t)n, -30, 30, 11 + (uint64_t)s);
        for (int v = 0; v < 4; v++) {
            char what[96];
            snprintf(what, sizeof what, "%s %s [%lld, %lld]", v & 1 ? "log_softmax" : "softmax",
                     v & 2 ? "traced" : "eager", (long long)rows, (long long)cols);
            vt_assert_same_f32(tex[4 * s + v], plain[4 * s + v], (size_t)n, what);
            ref_softmax(x, y, rows, cols, v & 1);
            for (int64_t i = 0; i < n; i++) want[i] = (float)y[i];
            vt_assert_close_f32(tex[4 * s + v], want, (size_t)n, v & 1 ? 2e-5 : 1e-7, 1e-5, what);
            free(tex[4 * s + v]);
            free(plain[4 * s + v]);
        }
        free(x);
        free(y);
        free(want);
    }
    free(tex);
    free(plain);
}

/* The runtime's own path without push descriptors (descriptor pools):
   the eager exec of a softmax through the backend interface. */
static void test_without_push_descriptors(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    vf_vk_extra_options xo = {.no_push_descriptors = true};
    rt_make(&h, NULL, &xo);
    assert_false(h.rt->dev.push_descriptors);
    enum { R = 19, C = 1024 };
    float *x = malloc(sizeof(float) * R * C), *got = malloc(sizeof(float) * R * C);
    double *y = malloc(sizeof(double) * R * C);
    float *want = malloc(sizeof(float) * R * C);
    assert_true(x && got && y && want);
    vt_fill_uniform(x, R * C, -5, 5, 3);
    vf_buffer *pad = alloc_upload(&h, x, 4); /* the input at an offset of its block */
    vf_buffer *a = alloc_upload(&h, x, R * C), *b = alloc_upload(&h, NULL, R * C);
    vf_exec e = softmax_exec(VF_OP_SOFTMAX, R, C);
    e.in[0].buf = a;
    e.out.buf = b;
    for (int rep = 0; rep < 3; rep++) /* views made and retired as slots are reused */
        assert_int_equal(h.be.iface->exec(h.be.self, &e), VF_OK);
    assert_int_equal(h.be.iface->download(h.be.self, b, 0, got, sizeof(float) * R * C), VF_OK);
    ref_softmax(x, y, R, C, false);
    for (int i = 0; i < R * C; i++) want[i] = (float)y[i];
    vt_assert_close_f32(got, want, R * C, 1e-7, 1e-5, "softmax without push descriptors");
    h.be.iface->free(h.be.self, pad);
    h.be.iface->free(h.be.self, a);
    h.be.iface->free(h.be.self, b);
    rt_done(&h);
    free(x), free(got), free(y), free(want);
}

/* A view the device cannot make is an error naming what, not a crash. */
static void test_view_checks(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    rt_handle h;
    rt_make(&h, NULL, NULL);
    vf_buffer *a = alloc_upload(&h, NULL, 64);
    VkBuffer vb = vf_vk_buffer_handle(a);
    VkBufferView v = VK_NULL_HANDLE;
    vf_err err = {0};
    VkDeviceSize align = h.rt->dev.props.limits.minTexelBufferOffsetAlignment;
    if (align > 1) {
        assert_int_equal(vf_vk_texel_view(&h.rt->dev, vb, a->offset + 4, 64, "test binding", &v, &err),
                         VF_ERROR_UNSUPPORTED);
        assert_non_null(strstr(err.message, "test binding"));
        assert_non_null(strstr(err.message, "alignment"));
        assert_ptr_equal(v, VK_NULL_HANDLE);
    }
    memset(&err, 0, sizeof err);
    assert_int_equal(vf_vk_texel_view(&h.rt->dev, vb, a->offset, 40, "test binding", &v, &err), VF_ERROR_UNSUPPORTED);
    assert_non_null(strstr(err.message, "16-byte"));
    memset(&err, 0, sizeof err);
    assert_int_equal(vf_vk_texel_view(&h.rt->dev, vb, a->offset, 256, "test binding", &v, &err), VF_OK);
    assert_true(v != VK_NULL_HANDLE);
    h.rt->dev.vkd.vkDestroyBufferView(h.rt->dev.device, v, NULL);
    h.be.iface->free(h.be.self, a);
    rt_done(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_codegen_binds_a_texel_buffer_where_the_caps_say),
        cmocka_unit_test(test_results_equal_the_storage_kernel),
        cmocka_unit_test(test_without_push_descriptors),
        cmocka_unit_test(test_view_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
