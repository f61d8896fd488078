/* VKFUSE_CHECK=1 (plan/check.h): a wrong kernel injected through the
 * test hook wrong_exec (vf_vk_test_hooks, vulkan/device.h) fails the call with
 * VF_ERROR_DEVICE and a report naming that kernel, its graph node and its
 * GLSL file (which exists and holds the wrong kernel's code); correct
 * plans, fused or not, with variables assigned inside them, pass the
 * check with the CPU backend's results and no arena sharing. */
#include "testutil.h"

#include "api/api.h"
#include "vulkan/runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

enum { R = 37, C = 29 };

/* The test hook on the context's Vulkan runtime (-1: off). */
static void wrong_exec(vf_context *ctx, int x) { vf_vk_runtime_of(&ctx->be)->dev.test.wrong_exec = x; }

static vf_tensor *two;
static char dump_dir[256];

static void setup_env(bool fuse)
{
    snprintf(dump_dir, sizeof dump_dir, "%s/vkfuse-test-check-%ld", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (long)getpid());
    setenv("VKFUSE_DUMP", dump_dir, 1); /* the GLSL goes under it */
    setenv("VKFUSE_CHECK", "1", 1);
    if (!fuse) setenv("VKFUSE_FUSION", "0", 1);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static void clear_env(void)
{
    nftw(dump_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    unsetenv("VKFUSE_CHECK");
    unsetenv("VKFUSE_FUSION");
    unsetenv("VKFUSE_DUMP");
}

/* exec 0: h = x * 2, exec 1: e = exp(h), exec 2: out = e + h; then
   out1 = sum(out, axis 1) */
static vf_status chain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = vf_mul(ctx, in[0], two);
    out[0] = vf_add(ctx, vf_exp(ctx, h), h);
    out[1] = vf_reduce_sum(ctx, out[0], 1, (int[]){1}, false);
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static float ref_out(float x) { return expf(2 * x) + 2 * x; }

static vf_function *make(vf_context *ctx, vf_tensor **in, float *x)
{
    vt_fill_uniform(x, R * C, -1, 1, 7);
    const float k = 2.0f;
    two = vf_tensor_from_host(ctx, VF_F32, 0, NULL, &k);
    *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, x);
    return vf_function_create(ctx, &(vf_function_desc){.name = "checked", .body = chain, .n_inputs = 1,
                                                        .n_outputs = 2});
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* The report names kernel 1 (exp), node and GLSL file; the file is there. */
static void test_wrong_kernel_reported(void **state)
{
    (void)state;
    setup_env(false);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float x[R * C];
    vf_tensor *in = NULL, *out[2] = {NULL, NULL};
    vf_function *fn = make(ctx, &in, x);
    wrong_exec(ctx, 1); /* exp's kernel computes neg */
    vf_status s = vf_function_call(fn, &in, out);
    wrong_exec(ctx, -1);
    assert_int_equal(s, VF_ERROR_DEVICE);
    const char *msg = vf_error_message(ctx);
    fprintf(stderr, "(expected) %s\n", msg);
    assert_non_null(strstr(msg, "VKFUSE_CHECK: kernel 1 "));
    assert_non_null(strstr(msg, " exp"));
    assert_non_null(strstr(msg, "disagrees with the CPU backend"));
    assert_null(strstr(msg, "kernel 0 ")); /* the kernel before it was right */
    const char *g = strstr(msg, "its GLSL: ");
    assert_non_null(g);
    char path[512];
    snprintf(path, sizeof path, "%s", g + strlen("its GLSL: "));
    assert_non_null(strstr(path, dump_dir));
    assert_non_null(strstr(path, "/exec1.glsl"));
    char *text = slurp(path);
    assert_non_null(text);
    assert_non_null(strstr(text, "void main"));
    assert_non_null(strstr(text, "neg")); /* the wrong kernel's name is in its header */
    free(text);
    vf_error_clear(ctx);
    /* the next plan (a new function) is right again */
    vf_function *fn2 = vf_function_create(ctx, &(vf_function_desc){.name = "checked2", .body = chain, .n_inputs = 1,
                                                                    .n_outputs = 2});
    assert_int_equal(vf_function_call(fn2, &in, out), VF_OK);
    float *y = vt_read(out[0]);
    for (int i = 0; i < R * C; i++) assert_true(fabsf(y[i] - ref_out(x[i])) <= 1e-5f * (1 + fabsf(ref_out(x[i]))));
    free(y);
    vf_function_destroy(fn2);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    clear_env();
}

/* Right plans pass, fused (one GLSL file per kernel, group kernels
   included) and unfused; a checked plan shares no arena. */
static void run_clean(bool fuse)
{
    setup_env(fuse);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float x[R * C];
    vf_tensor *in = NULL, *out[2] = {NULL, NULL};
    vf_function *fn = make(ctx, &in, x);
    for (int call = 0; call < 2; call++) assert_int_equal(vf_function_call(fn, &in, out), VF_OK);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_true(st.planned);
    assert_int_equal(st.arena_bytes, 0);
    assert_int_equal(st.kernels, fuse ? 2 : 4);
    float *y = vt_read(out[0]), *z = vt_read(out[1]);
    for (int i = 0; i < R; i++) {
        double sum = 0;
        for (int j = 0; j < C; j++) {
            float want = ref_out(x[i * C + j]);
            assert_true(fabsf(y[i * C + j] - want) <= 1e-5f * (1 + fabsf(want)));
            sum += want;
        }
        assert_true(fabs(z[i] - sum) <= 1e-4 * (1 + fabs(sum)));
    }
    free(y);
    free(z);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    clear_env();
}

static void test_clean_unfused(void **state)
{
    (void)state;
    run_clean(false);
}

static void test_clean_fused(void **state)
{
    (void)state;
    run_clean(true);
}

/* acc += x inside the plan; the check replays it with acc as it was. */
static vf_tensor *acc;

static vf_status accumulate(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *before = vf_mul(ctx, acc, two);
    if (vf_assign_add(acc, vf_exp(ctx, in[0])) != VF_OK) return vf_status_get(ctx);
    out[0] = vf_add(ctx, vf_mul(ctx, acc, two), before); /* reads the assigned value */
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void test_variables(void **state)
{
    (void)state;
    setup_env(true);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float x[R * C], zero[R * C] = {0};
    vf_tensor *in = NULL;
    vf_function *unused = make(ctx, &in, x);
    acc = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){R, C}, zero));
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "acc", .body = accumulate, .n_inputs = 1,
                                                                   .n_outputs = 1});
    vf_tensor *out = NULL;
    for (int call = 1; call <= 3; call++) {
        assert_int_equal(vf_function_call(fn, &in, &out), VF_OK);
        float *y = vt_read(out);
        for (int i = 0; i < R * C; i++) {
            double e = exp(x[i]), want = 2 * call * e + 2 * (call - 1) * e;
            assert_true(fabs(y[i] - want) <= 1e-5 * (1 + fabs(want)));
        }
        free(y);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_true(st.planned);
    vf_function_destroy(fn);
    vf_function_destroy(unused);
    vt_context_done(ctx);
    clear_env();
}

/* Layer norm over rows of 20000 with one ill-conditioned row (a large mean,
   a tiny spread): x - mean cancels, so the device's f32 mean and the CPU's
   differ by many ulps of the result, in the fused kernel exactly as in the
   unfused plan. The check scales its threshold with the reduction length
   and the conditioning instead of calling a right kernel wrong. */
enum { LN_ROWS = 3, LN_COLS = 20000 };

static vf_status layer_norm(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    /* the one-pass variance E[x^2] - E[x]^2, as many layer norms write it */
    vf_tensor *mean = vf_reduce_mean(ctx, in[0], 1, (int[]){-1}, true);
    vf_tensor *msq = vf_reduce_mean(ctx, vf_mul(ctx, in[0], in[0]), 1, (int[]){-1}, true);
    vf_tensor *var = vf_relu(ctx, vf_sub(ctx, msq, vf_mul(ctx, mean, mean)));
    vf_tensor *eps = vf_fill(ctx, VF_F32, 0, NULL, 1e-5);
    out[0] = vf_mul(ctx, vf_sub(ctx, in[0], mean), vf_rsqrt(ctx, vf_add(ctx, var, eps)));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static void run_layer_norm(bool fuse)
{
    setup_env(fuse);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float *x = malloc(sizeof *x * LN_ROWS * LN_COLS);
    vt_fill_uniform(x, LN_ROWS * LN_COLS, -1, 1, 11);
    for (int j = 0; j < LN_COLS; j++) x[LN_COLS + j] = 100.0f + 0.1f * x[LN_COLS + j]; /* row 1 */
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){LN_ROWS, LN_COLS}, x), *out = NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "layer_norm", .body = layer_norm,
                                                                   .n_inputs = 1, .n_outputs = 1});
    vf_status s = vf_function_call(fn, &in, &out);
    if (s) fprintf(stderr, "%s: %s\n", fuse ? "fused" : "unfused", vf_error_message(ctx));
    assert_int_equal(s, VF_OK);
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    assert_true(fuse ? st.kernels < 4 : st.kernels >= 6);
    vf_function_destroy(fn);
    free(x);
    vt_context_done(ctx);
    clear_env();
}

static void test_ill_conditioned_layer_norm(void **state)
{
    (void)state;
    run_layer_norm(true);
    run_layer_norm(false);
}

/* The scaled threshold still catches wrong kernels in that ill-conditioned
   program: each unary kernel of the unfused plan (relu, rsqrt) made wrong
   in turn is reported. */
static void test_ill_conditioned_wrong_kernel(void **state)
{
    (void)state;
    setup_env(false);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float *x = malloc(sizeof *x * LN_ROWS * LN_COLS);
    vt_fill_uniform(x, LN_ROWS * LN_COLS, -1, 1, 11);
    for (int j = 0; j < LN_COLS; j++) x[LN_COLS + j] = 100.0f + 0.1f * x[LN_COLS + j];
    vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){LN_ROWS, LN_COLS}, x), *out = NULL;
    int reported = 0;
    bool relu = false, rsqrt = false;
    for (int w = 0; w < 12; w++) {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "layer_norm", .body = layer_norm,
                                                                       .n_inputs = 1, .n_outputs = 1});
        wrong_exec(ctx, w);
        vf_status s = vf_function_call(fn, &in, &out);
        wrong_exec(ctx, -1);
        if (s != VF_OK) {
            assert_int_equal(s, VF_ERROR_DEVICE);
            const char *msg = vf_error_message(ctx);
            assert_non_null(strstr(msg, "disagrees with the CPU backend"));
            relu = relu || strstr(msg, " relu)") != NULL;
            rsqrt = rsqrt || strstr(msg, " rsqrt)") != NULL;
            reported++;
            vf_error_clear(ctx);
        }
        vf_function_destroy(fn);
    }
    assert_int_equal(reported, 2);
    assert_true(relu && rsqrt);
    free(x);
    vt_context_done(ctx);
    clear_env();
}

/* With VKFUSE_CHECK alone (no VKFUSE_DUMP) the GLSL goes under TMPDIR; a
   plan that always agreed leaves nothing there, one that disagreed keeps
   the file its report names. */
static int count_entries(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "find '%s' -mindepth 1 | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1) n = -1;
        pclose(p);
    }
    return n;
}

static void test_no_leftover_files(void **state)
{
    (void)state;
    char tmp[512], old_tmp[256] = "";
    if (getenv("TMPDIR")) snprintf(old_tmp, sizeof old_tmp, "%s", getenv("TMPDIR"));
    snprintf(tmp, sizeof tmp, "%s/vkfuse-test-check-tmp-%ld", old_tmp[0] ? old_tmp : "/tmp", (long)getpid());
    assert_int_equal(mkdir(tmp, 0777), 0);
    setenv("TMPDIR", tmp, 1);
    setenv("VKFUSE_CHECK", "1", 1);
    setenv("VKFUSE_FUSION", "0", 1); /* the test hook makes unfused kernels wrong */
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    float x[R * C];
    vf_tensor *in = NULL, *out[2] = {NULL, NULL};
    vf_function *fn = make(ctx, &in, x);
    for (int call = 0; call < 2; call++) assert_int_equal(vf_function_call(fn, &in, out), VF_OK);
    assert_true(count_entries(tmp) > 0); /* the GLSL is there while the plan lives */
    vf_function_destroy(fn);
    assert_int_equal(count_entries(tmp), 0);
    /* a wrong kernel's file stays */
    fn = make(ctx, &in, x);
    wrong_exec(ctx, 1);
    assert_int_equal(vf_function_call(fn, &in, out), VF_ERROR_DEVICE);
    wrong_exec(ctx, -1);
    vf_error_clear(ctx);
    vf_function_destroy(fn);
    assert_true(count_entries(tmp) >= 2); /* its directory and exec1.glsl */
    vt_context_done(ctx);
    unsetenv("VKFUSE_CHECK");
    unsetenv("VKFUSE_FUSION");
    if (old_tmp[0]) setenv("TMPDIR", old_tmp, 1);
    else unsetenv("TMPDIR");
    nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wrong_kernel_reported),
        cmocka_unit_test(test_clean_unfused),
        cmocka_unit_test(test_clean_fused),
        cmocka_unit_test(test_variables),
        cmocka_unit_test(test_ill_conditioned_layer_norm),
        cmocka_unit_test(test_ill_conditioned_wrong_kernel),
        cmocka_unit_test(test_no_leftover_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
