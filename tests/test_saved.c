/* vf_function_save / vf_function_load: a traced train step (a tape, an
 * assign_sub on a variable, a vf_cond that stays a COND node, a
 * vf_while_loop, a symbolic batch dim) saved, loaded in this process and in
 * a fresh one (this binary run with --child, which never creates the
 * function from its body), outputs and updated variables compared bit for
 * bit, on the CPU backend and on Vulkan; damaged files (truncated at every
 * section boundary and at random points, bit flips, a newer version, huge
 * counts, flips behind a recomputed checksum) fail with VF_ERROR_FORMAT. */
#include "testutil.h"
#include "frontend/saved.h"

#include <dirent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define FEAT 4
#define CLS 3

typedef struct {
    vf_tensor *w, *b, *lr;
} model;

static vf_status loud(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    /* a print keeps the cond a COND node (only the taken branch may print) */
    vf_status s = vf_print(ctx, "test_saved: positive branch, mean", vf_reduce_mean(ctx, in[0], 0, NULL, false));
    out[0] = vf_relu(ctx, in[0]);
    return s != VF_OK ? s : out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status quiet(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status loop_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, in[1], vf_fill(ctx, VF_F32, 0, NULL, 3.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status loop_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 1.5));
    out[1] = vf_add(ctx, in[1], vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

/* in: x [-1,4] f32, y [-1] i32; out: loss, cond result [-1,3], loop value */
static vf_status step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, in[0], m->w), m->b);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(tp, loss, 1, &m->w, &g);
    vf_tape_end(tp);
    if (s != VF_OK) return s;
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, logits, 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, -100.0));
    if ((s = vf_cond(ctx, pred, loud, quiet, 1, &logits, 1, &out[1], NULL)) != VF_OK) return s;
    vf_tensor *vars[2] = {vf_reduce_sum(ctx, logits, 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0.0)};
    if ((s = vf_while_loop(ctx, loop_cond, loop_body, 2, vars, 0, NULL)) != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, g))) != VF_OK) return s;
    out[0] = loss;
    out[2] = vars[0];
    return VF_OK;
}

/* A minimal valid compute module (spirv-val --target-env vulkan1.2): main,
   local size 1, returns. */
#define MIN_SPIRV_WORDS 35
static const uint32_t min_spirv[MIN_SPIRV_WORDS] = {
    0x07230203, 0x00010000, 0, 5, 0,
    (2 << 16) | 17, 1,                        /* OpCapability Shader */
    (3 << 16) | 14, 0, 1,                     /* OpMemoryModel Logical GLSL450 */
    (5 << 16) | 15, 5, 1, 0x6E69616D, 0,      /* OpEntryPoint GLCompute %1 "main" */
    (6 << 16) | 16, 1, 17, 1, 1, 1,           /* OpExecutionMode %1 LocalSize 1 1 1 */
    (2 << 16) | 19, 2,                        /* %2 = OpTypeVoid */
    (3 << 16) | 33, 3, 2,                     /* %3 = OpTypeFunction %2 */
    (5 << 16) | 54, 2, 1, 0, 3,               /* %1 = OpFunction %2 None %3 */
    (2 << 16) | 248, 4,                       /* %4 = OpLabel */
    (1 << 16) | 253,                          /* OpReturn */
    (1 << 16) | 56,                           /* OpFunctionEnd */
};

static const vf_tensor_spec sig[2] = {{VF_F32, 2, {-1, FEAT}}, {VF_I32, 1, {-1}}};

static void inputs(vf_context *ctx, int64_t nb, uint64_t seed, vf_tensor **in)
{
    float x[64];
    int32_t y[16];
    vt_fill_uniform(x, (size_t)(nb * FEAT), -1, 1, seed);
    vt_fill_int(y, (size_t)nb, 0, CLS - 1, seed + 1);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, FEAT}, x);
    in[1] = vf_tensor_from_host(ctx, VF_I32, 1, &nb, y);
}

/* Calls fn on batch (3, seed 7) and returns its 3 outputs and variable v
   concatenated as bytes (malloc'd, *n bytes). */
static uint8_t *call_and_dump(vf_context *ctx, vf_function *fn, vf_tensor *v, size_t *n)
{
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    inputs(ctx, 3, 7, in);
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
    vt_fill_uniform(x, 3 * FEAT, -1, 1, 7);
    vt_fill_int(y, 3, 0, CLS - 1, 8);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, FEAT}, x);
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

/* The kernel section of a version-2 file (the last section): its offset
   and its kernel count. */
static size_t kernel_section(const uint8_t *b, uint32_t *count)
{
    uint32_t nsec = (uint32_t)b[16] | (uint32_t)b[17] << 8;
    const uint8_t *e = b + VF_SAVED_HEADER + (size_t)(nsec - 1) * VF_SAVED_ENTRY;
    assert_int_equal(b[8], 2);
    assert_int_equal(e[0], VF_SEC_KERNELS);
    size_t off = 0;
    for (int i = 0; i < 8; i++) off |= (size_t)e[8 + i] << (8 * i);
    *count = (uint32_t)b[off] | (uint32_t)b[off + 1] << 8 | (uint32_t)b[off + 2] << 16 | (uint32_t)b[off + 3] << 24;
    return off;
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
    float w0[FEAT * CLS];
    vt_fill_uniform(w0, FEAT * CLS, -1, 1, 3);
    model m = {.w = vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){FEAT, CLS}, w0)),
               .b = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){CLS}, (float[]){0.1f, -0.2f, 0.3f}),
               .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.25)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "step", .body = step, .user = &m,
        .n_inputs = 2, .n_outputs = 3, .input_signature = sig});
    char path[256], outp[256];
    tmp_path(path, sizeof path, "fn.vkf", be);
    tmp_path(outp, sizeof outp, "child.out", be);
    /* not called yet: nothing to save */
    assert_int_equal(vf_function_save(fn, path), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save", "no concrete function", NULL);
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    inputs(ctx, 6, 1, in);
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
    kernel_section(file, &nk);
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

/* ---- damaged files ------------------------------------------------------- */

static uint8_t *saved_bytes(vf_context *ctx, size_t *n)
{
    static model m;
    m = (model){.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){FEAT, CLS}, 0.5)),
                .b = vf_fill(ctx, VF_F32, 1, (int64_t[]){CLS}, 0.1), .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.1)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "step", .body = step, .user = &m,
        .n_inputs = 2, .n_outputs = 3, .input_signature = sig});
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    inputs(ctx, 2, 1, in);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    vf_scope_end(ctx);
    /* the CPU backend has no kernel binaries: two small valid modules stand
       in for them, so the damage below reaches the kernel section too */
    vf_saved_kernel extra[2] = {{0x2222222222222222ull, min_spirv, MIN_SPIRV_WORDS},
                                {0x1111111111111111ull, min_spirv, MIN_SPIRV_WORDS}};
    uint8_t *b = NULL;
    assert_int_equal(vf_saved_write_mem(fn, extra, 2, &b, n), VF_OK);
    vf_function_destroy(fn);
    return b;
}

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { uint64_t v = 0; for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i); return v; }
static void wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* n bytes of b as a consistent file: size field and checksum fixed up */
static void fix_up(uint8_t *b, size_t n)
{
    wr64(b + 24, n);
    wr64(b + n - 8, vf_fnv1a64(VF_FNV_INIT, b, n - 8));
}

/* loads n bytes; must fail with VF_ERROR_FORMAT (or, if allowed, succeed) */
static int expect_format(vf_context *ctx, const uint8_t *b, size_t n, bool may_load, const char *what, size_t at)
{
    vf_function *fn = NULL;
    vf_status s = vf_saved_load_mem(ctx, b, n, "damaged", &fn);
    if (s == VF_OK && may_load) {
        vf_function_destroy(fn);
        return 1;
    }
    if (s != VF_ERROR_FORMAT) fail_msg("%s at %zu: got %s (%s)", what, at, vf_status_name(s), vf_error_message(ctx));
    assert_null(fn);
    assert_non_null(strstr(vf_error_message(ctx), "at byte"));
    vf_error_clear(ctx);
    return 0;
}

static void test_damaged_files(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    size_t n;
    uint8_t *orig = saved_bytes(ctx, &n), *b = malloc(n);
    uint32_t nsec = (uint32_t)orig[16] | (uint32_t)orig[17] << 8;
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, orig, n, "intact", &fn) != VF_OK) fail_msg("intact: %s", vf_error_message(ctx));
    vf_function_destroy(fn);
    int loaded = 0;
    /* truncated at every section boundary, as is and made consistent */
    for (uint32_t i = 0; i < nsec; i++) {
        const uint8_t *e = orig + VF_SAVED_HEADER + (size_t)i * VF_SAVED_ENTRY;
        size_t cuts[2] = {(size_t)rd64(e + 8), (size_t)(rd64(e + 8) + rd64(e + 16))};
        for (int k = 0; k < 2; k++) {
            if (cuts[k] >= n) continue;
            memcpy(b, orig, n);
            expect_format(ctx, b, cuts[k], false, "truncated at a section boundary", cuts[k]);
            if (cuts[k] >= VF_SAVED_HEADER + VF_SAVED_TRAILER && cuts[k] + 8 < n) {
                fix_up(b, cuts[k] + 8);
                expect_format(ctx, b, cuts[k] + 8, false, "truncated at a section boundary (consistent)", cuts[k]);
            }
        }
    }
    /* truncated at random points; every byte of the header and table */
    uint64_t r = 12345;
    for (int t = 0; t < 300; t++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t cut = t < 100 ? (size_t)t : (size_t)(r >> 33) % n;
        memcpy(b, orig, n);
        expect_format(ctx, b, cut, false, "truncated", cut);
        if (cut >= VF_SAVED_HEADER + VF_SAVED_TRAILER + 8) {
            fix_up(b, cut);
            expect_format(ctx, b, cut, false, "truncated (consistent)", cut);
        }
    }
    /* one flipped bit anywhere: the checksum (or the header) catches it */
    for (size_t i = 0; i < n; i++) {
        memcpy(b, orig, n);
        b[i] ^= (uint8_t)(1u << (i % 8));
        expect_format(ctx, b, n, false, "bit flip", i);
    }
    /* flips behind a recomputed checksum: the parser's checks; loading may
       succeed (a changed constant), it must never crash or leak */
    for (int t = 0; t < 2000; t++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = VF_SAVED_HEADER + (size_t)(r >> 33) % (n - VF_SAVED_HEADER - 8);
        memcpy(b, orig, n);
        b[i] ^= (uint8_t)(1u << ((r >> 20) % 8));
        fix_up(b, n);
        loaded += expect_format(ctx, b, n, true, "bit flip (checksum fixed)", i);
    }
    /* most flips land in checked fields; some in data (constants, values) */
    print_message("flips behind a fixed checksum: %d of 2000 still loaded (changed data)\n", loaded);
    assert_true(loaded < 2000);
    /* a newer version */
    memcpy(b, orig, n);
    wr32(b + 8, VF_SAVED_VERSION + 1);
    fix_up(b, n);
    assert_int_equal(vf_saved_load_mem(ctx, b, n, "newer", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "version 3", "newer", NULL);
    /* huge counts: the name length, the tensor count, the node count */
    const char *fields[3] = {"name length", "tensor count", "node count"};
    for (int k = 0; k < 3; k++) {
        memcpy(b, orig, n);
        size_t off;
        if (k < 2) off = (size_t)rd64(orig + VF_SAVED_HEADER + (size_t)k * VF_SAVED_ENTRY + 8);
        else { /* the graph of the first concrete function: after the inputs and captures */
            size_t p = (size_t)rd64(orig + VF_SAVED_HEADER + 2 * VF_SAVED_ENTRY + 8);
            for (int i = 0; i < 2; i++) p += 1 + 5 + 8 * (size_t)orig[p + 1];
            uint32_t nc = (uint32_t)orig[p] | (uint32_t)orig[p + 1] << 8;
            p += 4;
            for (uint32_t c = 0; c < nc; c++) p += 4 + 5 + 8 * (size_t)orig[p + 4];
            off = p;
        }
        wr32(b + off, 0xFFFFFFF0u);
        fix_up(b, n);
        assert_int_equal(vf_saved_load_mem(ctx, b, n, "huge", &fn), VF_ERROR_FORMAT);
        vt_expect_error(ctx, VF_ERROR_FORMAT, fields[k], "at byte", NULL);
    }
    /* not a saved function; no file */
    memcpy(b, orig, n);
    b[0] = 'X';
    assert_int_equal(vf_saved_load_mem(ctx, b, n, "foreign", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "magic", NULL);
    assert_int_equal(vf_function_load(ctx, "/nonexistent/vkfuse.vkf", &fn), VF_ERROR_IO);
    vt_expect_error(ctx, VF_ERROR_IO, "cannot open", NULL);
    /* a directory opens but is no file (it gave VF_ERROR_FORMAT "9223372036854775807 bytes") */
    assert_int_equal(vf_function_load(ctx, "/", &fn), VF_ERROR_IO);
    vt_expect_error(ctx, VF_ERROR_IO, "'/' is a directory, not a file", NULL);
    assert_null(fn);
    free(b);
    free(orig);
    vt_context_done(ctx);
}

/* ---- the kernel section -------------------------------------------------- */

/* b (n bytes, a consistent file) damaged by f at the kernel section (off,
   its first kernel at off + 4): VF_ERROR_FORMAT naming want. */
static void expect_kernel_damage(vf_context *ctx, uint8_t *b, size_t n, const char *what, const char *want)
{
    fix_up(b, n);
    vf_function *fn = NULL;
    vf_status s = vf_saved_load_mem(ctx, b, n, "damaged", &fn);
    if (s != VF_ERROR_FORMAT) fail_msg("%s: got %s (%s)", what, vf_status_name(s), vf_error_message(ctx));
    assert_null(fn);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "kernel section at byte", want, NULL);
}

/* Damage to the kernel section of orig (n bytes, at least two kernels):
   every structural check fails with VF_ERROR_FORMAT; a module that is
   well-formed but invalid SPIR-V is rejected on Vulkan (the validator)
   and ignored on the CPU backend. */
static void kernel_damage(vf_context *ctx, const uint8_t *orig, size_t n, bool vulkan)
{
    uint32_t nk;
    size_t off = kernel_section(orig, &nk), k0 = off + 4;
    assert_true(nk >= 2);
    uint32_t nw0 = rd32(orig + k0 + 8);
    size_t k1 = k0 + 12 + 4 * (size_t)nw0, w0 = k0 + 12;
    uint8_t *b = malloc(n);
    vf_function *fn = NULL;
    /* a flipped bit in the SPIR-V: the checksum covers it */
    memcpy(b, orig, n);
    b[w0 + 4 * 7] ^= 0x10;
    assert_int_equal(vf_saved_load_mem(ctx, b, n, "flipped", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "checksum", NULL);
    struct { size_t at; uint32_t v; bool wide; const char *want; } cases[] = {
        {off, 0xFFFFFFF0u, false, "kernel count is 4294967280"},
        {off, nk - 1, false, "left over"},
        {k0, 0, true, "key 0000000000000000 is zero"},
        {k1, 0, true, "not above the one before"},
        {k0 + 8, 0xFFFFFFF0u, false, "4294967280 SPIR-V words"},
        {k0 + 8, 4, false, "4 SPIR-V words"},
        {w0, 0xDEADBEEFu, false, "SPIR-V magic is 0xdeadbeef"},
        {w0 + 4, 0x00020000u, false, "SPIR-V version word"},
        {w0 + 12, 0, false, "id bound 0"},
        {w0 + 20, 0x00000011u, false, "has 0 words"},       /* the first instruction's word count */
        {w0 + 20, 0xFFFF0011u, false, "has 65535 words"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(b, orig, n);
        if (cases[i].wide) wr64(b + cases[i].at, cases[i].at == k1 ? rd64(orig + k0) : cases[i].v);
        else wr32(b + cases[i].at, cases[i].v);
        expect_kernel_damage(ctx, b, n, cases[i].want, cases[i].want);
    }
    /* no GLCompute entry point: the entry point's execution model */
    memcpy(b, orig, n);
    for (size_t i = 5; i < nw0; i += rd32(b + w0 + 4 * i) >> 16)
        if ((rd32(b + w0 + 4 * i) & 0xffffu) == 15) wr32(b + w0 + 4 * (i + 1), 4); /* Kernel */
    expect_kernel_damage(ctx, b, n, "no entry point", "no GLCompute entry point");
    /* truncated inside the kernel section, made consistent */
    for (size_t cut = off; cut < n - 8; cut += (n - 8 - off) / 7 + 1) {
        memcpy(b, orig, n);
        fix_up(b, cut + 8);
        expect_format(ctx, b, cut + 8, false, "truncated in the kernel section", cut);
    }
    /* well-formed but not valid SPIR-V: OpFunctionEnd (the last word of the
       last module) made an unknown opcode, under a key nothing cached has */
    size_t last = k0;
    for (uint32_t k = 0; k + 1 < nk; k++) last += 12 + 4 * (size_t)rd32(orig + last + 8);
    uint32_t nwl = rd32(orig + last + 8);
    memcpy(b, orig, n);
    wr64(b + last, ~0ull);
    assert_int_equal(rd32(b + last + 12 + 4 * ((size_t)nwl - 1)), (1u << 16) | 56u);
    wr32(b + last + 12 + 4 * ((size_t)nwl - 1), (1u << 16) | 0x7FFFu);
    fix_up(b, n);
    vf_status s = vf_saved_load_mem(ctx, b, n, "invalid module", &fn);
    if (vulkan) {
        assert_int_equal(s, VF_ERROR_FORMAT);
        vt_expect_error(ctx, VF_ERROR_FORMAT, "kernel section at byte", "SPIR-V validator rejects it", NULL);
        assert_null(fn);
    } else {
        if (s != VF_OK) fail_msg("invalid module on the CPU backend: %s", vf_error_message(ctx));
        vf_function_destroy(fn);
    }
    free(b);
}

/* A version-2 file as version 1 wrote it: no kernel section. */
static uint8_t *as_version1(const uint8_t *b, size_t n, size_t *n1)
{
    uint32_t nk, nsec = rd32(b + 16);
    size_t off = kernel_section(b, &nk), table_end = VF_SAVED_HEADER + (size_t)nsec * VF_SAVED_ENTRY;
    *n1 = off - VF_SAVED_ENTRY + 8;
    uint8_t *v = malloc(*n1);
    memcpy(v, b, VF_SAVED_HEADER + (size_t)(nsec - 1) * VF_SAVED_ENTRY);
    memcpy(v + table_end - VF_SAVED_ENTRY, b + table_end, off - table_end);
    wr32(v + 8, 1);
    wr32(v + 16, nsec - 1);
    for (uint32_t i = 0; i + 1 < nsec; i++) {
        uint8_t *e = v + VF_SAVED_HEADER + (size_t)i * VF_SAVED_ENTRY;
        wr64(e + 8, rd64(e + 8) - VF_SAVED_ENTRY);
    }
    fix_up(v, *n1);
    (void)n;
    return v;
}

static void test_kernel_section_cpu(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    size_t n, n1;
    uint8_t *orig = saved_bytes(ctx, &n);
    kernel_damage(ctx, orig, n, false);
    /* version 1 (no kernel section) still loads; a version-1 file with one is wrong */
    uint8_t *v1 = as_version1(orig, n, &n1);
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, v1, n1, "version 1", &fn) != VF_OK) fail_msg("version 1: %s", vf_error_message(ctx));
    assert_int_equal(vf_function_variable_count(fn), 1);
    vf_function_destroy(fn);
    wr32(orig + 8, 1);
    fix_up(orig, n);
    assert_int_equal(vf_saved_load_mem(ctx, orig, n, "v1 with kernels", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "has type 4; expected 3", NULL);
    free(v1);
    free(orig);
    vt_context_done(ctx);
}

/* On Vulkan: the kernels of a real saved function, damaged; loaded into a
   fresh context (its memory cache does not hold them yet). */
static void test_kernel_section_vulkan(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    size_t n;
    uint8_t *orig = saved_bytes(ctx, &n);
    uint32_t nk;
    kernel_section(orig, &nk);
    print_message("saved on Vulkan (with two stand-ins): %u kernels\n", nk);
    vt_context_done(ctx);
    ctx = vt_context(VF_BACKEND_VULKAN);
    kernel_damage(ctx, orig, n, true);
    /* the intact file loads, its kernels validated and cached: no compiles */
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, orig, n, "intact", &fn) != VF_OK) fail_msg("intact: %s", vf_error_message(ctx));
    vf_context_stats st;
    vf_context_stats_get(ctx, &st);
    assert_int_equal(st.shader_compiles, 0);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    /* the CPU backend checks the kernels and ignores them */
    ctx = vt_context(VF_BACKEND_CPU);
    if (vf_saved_load_mem(ctx, orig, n, "on cpu", &fn) != VF_OK) fail_msg("on cpu: %s", vf_error_message(ctx));
    vf_function_destroy(fn);
    free(orig);
    vt_context_done(ctx);
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
        fix_up(b, n);
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
        cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_kernel_section_cpu),
        cmocka_unit_test(test_kernel_section_vulkan),
        cmocka_unit_test(test_bool_constant_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
