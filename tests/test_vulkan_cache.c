/* The Vulkan runtime's shader and pipeline caches: in memory, on disk, in
 * a second process, and corrupt or stale files. */
#include "vk_test_common.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

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

/* VKFUSE_DUMP writes each kernel's GLSL once to <dir>/kernels; the compile
   time is summed. */
static void test_dump_and_compile_time(void **state)
{
    (void)state;
    char dir[256], kdir[300];
    make_tmpdir(dir, sizeof dir);
    snprintf(kdir, sizeof kdir, "%s/kernels", dir);
    assert_int_equal(setenv("VKFUSE_DUMP", dir, 1), 0);
    rt_handle h;
    rt_make(&h, "", NULL);
    run_axpy_check(&h, 64);
    run_axpy_check(&h, 64); /* a memory hit: not written again */
    assert_int_equal(h.rt->shaders.compiles, 1);
    assert_true(h.rt->shaders.compile_ns > 0);
    rt_done(&h);
    unsetenv("VKFUSE_DUMP");
    assert_int_equal(count_files(kdir, ".comp"), 1);
    DIR *d = opendir(kdir);
    assert_non_null(d);
    struct dirent *e;
    char path[4400] = "";
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".comp")) snprintf(path, sizeof path, "%s/%s", kdir, e->d_name);
    closedir(d);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, AXPY);
    remove_tree(kdir);
    remove_tree(dir);
}

/* Compiling ahead on threads (shader_prepare.c): duplicates and shaders
   already on hand are skipped, nothing is counted until vf_vk_shader_get
   takes a result, and then the counts, the error of a shader that does not
   compile and the disk cache read as if it compiled each one itself. */
static void test_compile_ahead(void **state)
{
    (void)state;
    char dir[256];
    make_tmpdir(dir, sizeof dir);
    char *variant = malloc(strlen(AXPY) + 64);
    assert_non_null(variant);
    sprintf(variant, "%s// another kernel\n", AXPY);
    const char *bad = "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { undefined_thing = 1; }\n";
    const char *glsl[4] = {AXPY, variant, AXPY, bad};
    const char *names[4] = {"axpy_a", "axpy_b", "axpy_a", "broken"};
    for (int threads = 1; threads <= 2; threads++) {
        rt_handle h;
        rt_make(&h, dir, NULL);
        vf_vk_shaders *c = &h.rt->shaders;
        c->compile_threads = threads;
        assert_int_equal(vf_vk_shaders_prepare(c, 4, glsl, names), VF_OK);
        assert_int_equal(c->n_ahead, threads == 1 ? 0 : 3);   /* AXPY once */
        assert_int_equal(c->compiles, 0);
        const vf_vk_spirv *spv = NULL;
        for (int i = 0; i < 3; i++) assert_int_equal(vf_vk_shader_get(c, glsl[i], names[i], &spv), VF_OK);
        assert_int_equal(vf_vk_shader_get(c, bad, "broken", &spv), VF_ERROR_COMPILE);
        assert_non_null(strstr(h.err.message, "broken failed to compile"));
        assert_non_null(strstr(h.err.message, "undefined_thing"));
        h.err = (vf_err){0};
        assert_int_equal(c->compiles, 3);
        assert_int_equal(c->memory_hits, 1);
        assert_true(c->compile_ns > 0);
        vf_vk_shaders_drop_ahead(c);
        /* on hand now (memory): nothing to compile ahead */
        assert_int_equal(vf_vk_shaders_prepare(c, 3, glsl, names), VF_OK);
        assert_int_equal(c->n_ahead, 0);
        run_axpy_check(&h, 64);   /* the SPIR-V compiled ahead runs */
        rt_done(&h);
        assert_int_equal(count_files(dir, ".spv"), 2);
        /* a second runtime finds both on disk: only the broken one is compiled ahead */
        rt_make(&h, dir, NULL);
        h.rt->shaders.compile_threads = 2;
        assert_int_equal(vf_vk_shaders_prepare(&h.rt->shaders, 4, glsl, names), VF_OK);
        assert_int_equal(h.rt->shaders.n_ahead, 0);   /* one job: not worth a thread */
        rt_done(&h);
        remove_tree(dir);
        assert_int_equal(mkdir(dir, 0700), 0);
    }
    remove_tree(dir);
    free(variant);
}

int main(int argc, char **argv)
{
    pin_vulkan_libraries();
    if (argc == 3 && strcmp(argv[1], "--cache-child") == 0) return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_memory_and_disk),
        cmocka_unit_test(test_cache_second_process),
        cmocka_unit_test(test_cache_corrupt_and_stale),
        cmocka_unit_test(test_dump_and_compile_time),
        cmocka_unit_test(test_compile_ahead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
