/* vf_function_save / vf_function_load: a traced train step (a tape, an
 * assign_sub on a variable, a vf_cond that stays a COND node, a
 * vf_while_loop, a symbolic batch dim: saved_common.c) saved, loaded in
 * this process and in a fresh one (this binary run with --child, which
 * never creates the function from its body), outputs and updated variables
 * compared bit for bit, on the CPU backend and on Vulkan; a fresh process
 * compiles no kernel (the file's kernel section); saved bool constants
 * whose true bytes are not 1. Damaged files: test_saved_damaged.c. */
#include "testutil.h"
#include "saved_common.h"
#include "saved/saved.h"

#include <dirent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Calls fn on batch (3, seed 7) and returns its 3 outputs and variable v
   concatenated as bytes (malloc'd, *n bytes). */
static uint8_t *call_and_dump(vf_context *ctx, vf_function *fn, vf_tensor *v, size_t *n)
{
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    vt_step_inputs(ctx, 3, 7, in);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    size_t total = 0;
    vf_tensor *all[4] = {out[0], out[1], out[2], v};
    for (int i = 0; i < 4; i++) total += vf_tensor_bytes(all[i]);
    uint8_t *buf = malloc(total), *p = buf;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(vf_tensor_read(all[i], p, vf_tensor_bytes(all[i])), VF_OK);
        p += vf_tensor_bytes(all[i]);
    }
    vf_scope_end(ctx);
    *n = total;
    return buf;
}

static const char *bk_name(vf_backend b) { return b == VF_BACKEND_CPU ? "cpu" : "vulkan"; }

static char self_path[4096];

/* The child: loads path on backend, calls, writes the dump to outpath.
   no_compiles: the call must compile no shader and find none on disk (the
   kernels come from the file's kernel section). */
static int child_main(const char *backend, const char *path, const char *outpath, bool no_compiles)
{
    vf_context_desc d = {.backend = strcmp(backend, "cpu") == 0 ? VF_BACKEND_CPU : VF_BACKEND_VULKAN, .device_index = -1,
                         .validation = getenv("VKFUSE_VALIDATION") && strcmp(getenv("VKFUSE_VALIDATION"), "1") == 0};
    vf_context *ctx = NULL;
    if (vf_context_create(&d, &ctx) != VF_OK) return fprintf(stderr, "child: %s\n", vf_error_message(ctx)), 2;
    vf_function *fn = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (vf_function_load(ctx, path, &fn) != VF_OK) return fprintf(stderr, "child: %s\n", vf_error_message(ctx)), 3;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double load_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (vf_function_variable_count(fn) != 1) return fprintf(stderr, "child: %d variables\n", vf_function_variable_count(fn)), 4;
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    float x[64];
    int32_t y[16];
    vt_fill_uniform(x, 3 * VT_FEAT, -1, 1, 7);
    vt_fill_int(y, 3, 0, VT_CLS - 1, 8);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, VT_FEAT}, x);
    in[1] = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){3}, y);
    if (vf_function_call(fn, in, out) != VF_OK) return fprintf(stderr, "child: %s\n", vf_error_message(ctx)), 5;
    FILE *f = fopen(outpath, "wb");
    if (!f) return 6;
    vf_tensor *all[4] = {out[0], out[1], out[2], vf_function_variable(fn, 0)};
    for (int i = 0; i < 4; i++) {
        size_t n = vf_tensor_bytes(all[i]);
        void *b = malloc(n);
        if (vf_tensor_read(all[i], b, n) != VF_OK || fwrite(b, 1, n, f) != n) return 7;
        free(b);
    }
    fclose(f);
    vf_scope_end(ctx);
    vf_context_stats st = {0};
    if (vf_context_stats_get(ctx, &st) != VF_OK) return 9;
    fprintf(stderr, "child (%s, VKFUSE_CACHE_DIR='%s'): load %.1f ms; %lld shader compiles, %lld memory hits, "
            "%lld disk hits\n", backend, getenv("VKFUSE_CACHE_DIR") ? getenv("VKFUSE_CACHE_DIR") : "(unset)", load_ms,
            (long long)st.shader_compiles, (long long)st.shader_memory_hits, (long long)st.shader_disk_hits);
    if (no_compiles && (st.shader_compiles != 0 || st.shader_disk_hits != 0 || st.shader_memory_hits == 0)) return 8;
    vf_function_destroy(fn);
    vf_context_destroy(ctx);
    return 0;
}

/* Runs this binary as the child; cache_dir non-NULL: its VKFUSE_CACHE_DIR
   ("" turns the disk cache off). Returns the child's exit status. */
static int spawn_child(const char *backend, const char *path, const char *outp, const char *cache_dir, bool no_compiles)
{
    char *argv[] = {self_path, "--child", (char *)backend, (char *)path, (char *)outp,
                    no_compiles ? "--no-compiles" : NULL, NULL};
    size_t n = 0;
    while (environ[n]) n++;
    char **env = calloc(n + 2, sizeof *env), var[4200];
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!cache_dir || strncmp(environ[i], "VKFUSE_CACHE_DIR=", 17) != 0) env[k++] = environ[i];
    if (cache_dir) {
        snprintf(var, sizeof var, "VKFUSE_CACHE_DIR=%s", cache_dir);
        env[k++] = var;
    }
    env[k] = NULL;
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, self_path, NULL, NULL, argv, env), 0);
    free(env);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4400];
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            remove(p);
        }
    if (d) closedir(d);
    rmdir(dir);
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    assert_int_equal(fread(b, 1, (size_t)sz, f), (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static void tmp_path(char *buf, size_t len, const char *what, vf_backend b)
{
    snprintf(buf, len, "/tmp/vkfuse_test_saved_%d_%s_%s", (int)getpid(), bk_name(b), what);
}

static void save_load_roundtrip(vf_backend be)
{
    vf_context *ctx = vt_context(be);
    float w0[VT_FEAT * VT_CLS];
    vt_fill_uniform(w0, VT_FEAT * VT_CLS, -1, 1, 3);
    vt_step_model m = {.w = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){VT_FEAT, VT_CLS}, w0)),
               .b = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){VT_CLS}, (float[]){0.1f, -0.2f, 0.3f}),
               .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.25)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "step", .body = vt_train_step, .user = &m,
        .n_inputs = 2, .n_outputs = 3, .input_signature = vt_step_sig});
    char path[256], outp[256];
    tmp_path(path, sizeof path, "fn.vkf", be);
    tmp_path(outp, sizeof outp, "child.out", be);
    /* not called yet: nothing to save */
    assert_int_equal(vf_function_save(fn, path), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save", "no concrete function", NULL);
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    vt_step_inputs(ctx, 6, 1, in);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    vf_scope_end(ctx);
    char *text = vf_function_graph_text(fn);
    assert_non_null(strstr(text, "cond"));
    assert_non_null(strstr(text, "while"));
    assert_non_null(strstr(text, "assign"));
    free(text);
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    /* the original goes on: batch 3 (the symbolic dim: no retrace) */
    size_t na, nb;
    uint8_t *a = call_and_dump(ctx, fn, m.w, &na);
    vf_function_stats st;
    vf_function_stats_get(fn, &st);
    assert_int_equal(st.traces, 1);
    /* loaded here: its variable holds the saved value, then the same step */
    vf_function *ld = NULL;
    if (vf_function_load(ctx, path, &ld) != VF_OK) fail_msg("load: %s", vf_error_message(ctx));
    assert_int_equal(vf_function_variable_count(ld), 1);
    assert_null(vf_function_variable(ld, 1));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_variable", "out of range", NULL);
    uint8_t *b = call_and_dump(ctx, ld, vf_function_variable(ld, 0), &nb);
    assert_int_equal(na, nb);
    vt_assert_equal_bytes(b, a, na, "loaded in the same process vs the original");
    free(b);
    /* a signature the loaded function has no concrete function for */
    vf_scope_begin(ctx);
    vf_tensor *bad = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 5}, 1.0), *o3[3];
    vf_tensor *lab = vf_fill(ctx, VF_I32, 1, (int64_t[]){2}, 0.0);
    assert_int_not_equal(vf_function_call(ld, (vf_tensor *[]){bad, lab}, o3), VF_OK);
    vf_scope_end(ctx);
    vt_expect_error(ctx, VF_ERROR_SHAPE, NULL);
    vf_function_destroy(ld);
    /* a fresh process that has no body */
    assert_int_equal(spawn_child(bk_name(be), path, outp, NULL, false), 0);
    b = read_all(outp, &nb);
    assert_int_equal(na, nb);
    vt_assert_equal_bytes(b, a, na, "loaded in a fresh process vs the original");
    free(b);
    /* the file's kernel section: empty on the CPU backend; on Vulkan the
       SPIR-V of every kernel the calls used, so a fresh process with an
       empty disk cache, or none, compiles nothing */
    size_t nf;
    uint8_t *file = read_all(path, &nf);
    uint32_t nk;
    vt_saved_kernel_section(file, &nk);
    free(file);
    if (be == VF_BACKEND_CPU) assert_int_equal(nk, 0);
    else {
        print_message("saved on Vulkan: %zu bytes, %u kernels\n", nf, nk);
        assert_true(nk > 0);
        char dir[] = "/tmp/vkfuse_test_saved_cacheXXXXXX";
        assert_non_null(mkdtemp(dir));
        const char *dirs[2] = {dir, ""};
        for (int k = 0; k < 2; k++) {
            remove(outp);
            assert_int_equal(spawn_child("vulkan", path, outp, dirs[k], true), 0);
            b = read_all(outp, &nb);
            assert_int_equal(na, nb);
            vt_assert_equal_bytes(b, a, na, k ? "fresh process, no disk cache" : "fresh process, empty disk cache");
            free(b);
        }
        remove_dir(dir);
    }
    free(a);
    remove(path), remove(outp);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

static void test_roundtrip_cpu(void **state)
{
    (void)state;
    save_load_roundtrip(VF_BACKEND_CPU);
}

static void test_roundtrip_vulkan(void **state)
{
    (void)state;
    if (vt_have_vulkan()) save_load_roundtrip(VF_BACKEND_VULKAN);
}

/* ---- bool constants from a file ----------------------------------------- */

static const uint8_t bool_pattern[13] = {1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 0, 1};

static vf_status bool_const_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *k = vf_tensor_from_host(ctx, VF_BOOL, 1, (int64_t[]){13}, bool_pattern);
    out[0] = vf_equal(ctx, k, in[0]); /* not foldable: reads the input */
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* A saved bool constant whose true bytes are not 1 (a file written by
   something else, or damaged in a way the checksum was fixed for) loads as
   true on every backend, as vf_tensor_from_host stores it. */
static void test_bool_constant_bytes(void **state)
{
    (void)state;
    vf_backend bs[2] = {VF_BACKEND_CPU, VF_BACKEND_VULKAN};
    for (int bi = 0; bi < (vt_have_vulkan() ? 2 : 1); bi++) {
        vf_context *ctx = vt_context(bs[bi]);
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "bools", .body = bool_const_body,
                                                                     .n_inputs = 1, .n_outputs = 1});
        uint8_t ones[13];
        memset(ones, 1, sizeof ones);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_BOOL, 1, (int64_t[]){13}, ones), *y = NULL;
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        uint8_t *b = NULL;
        size_t n = 0;
        assert_int_equal(vf_saved_write_mem(fn, NULL, 0, &b, &n), VF_OK);
        vf_function_destroy(fn);
        size_t at = 0;
        while (at + sizeof bool_pattern <= n && memcmp(b + at, bool_pattern, sizeof bool_pattern)) at++;
        assert_true(at + sizeof bool_pattern <= n); /* the constant's bytes are in the file */
        for (size_t i = 0; i < sizeof bool_pattern; i++)
            if (b[at + i]) b[at + i] = (uint8_t)(2 + 50 * i); /* true, but not 1 */
        vt_saved_fix_up(b, n);
        assert_int_equal(vf_saved_load_mem(ctx, b, n, "bools", &fn), VF_OK);
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        uint8_t *got = vt_read(y);
        vt_assert_equal_bytes(got, bool_pattern, sizeof bool_pattern, bk_name(bs[bi]));
        free(got);
        free(b);
        vf_function_destroy(fn);
        vt_context_done(ctx);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 5 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2], argv[3], argv[4], argc > 5 && strcmp(argv[5], "--no-compiles") == 0);
    ssize_t k = readlink("/proc/self/exe", self_path, sizeof self_path - 1);
    if (k <= 0) snprintf(self_path, sizeof self_path, "%s", argv[0]);
    else self_path[k] = '\0';
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_cpu),
        cmocka_unit_test(test_roundtrip_vulkan),
        cmocka_unit_test(test_bool_constant_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}