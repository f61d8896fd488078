/* The AmberScript parser (tools/amber/parse_amber*.c) on inputs that fail
 * half-way: every error path frees what the statement had made, so a
 * failed parse followed by am_script_free leaves no heap behind. The
 * inputs of fuzz/seeds_amber/ (fuzz_amber's findings, kept as regressions
 * and as seeds of its corpus) run here too, so the check does not need
 * clang or libFuzzer. Under ASan LeakSanitizer checks after each input;
 * elsewhere glibc's count of bytes in use must not grow. */
#include "am.h"
#include "testutil.h"

#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define AP_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AP_ASAN 1
#endif
#endif
#ifdef AP_ASAN
#include <sanitizer/lsan_interface.h>
#endif

/* Parses src as AmberScript and frees the script; returns the status and
   leaves the message in res. */
static am_status parse_and_free(const char *src, size_t len, am_result *res)
{
    am_script *s = calloc(1, sizeof *s);
    assert_non_null(s);
    memset(res, 0, sizeof *res);
    am_status st = am_parse_amber(src, len, s, res);
    am_script_free(s);
    free(s);
    return st;
}

/* Parses src and fails the test if the parse left heap behind. The first
   parse warms up whatever the parser allocates once (none today, but a
   lazily made table must not read as a leak); the second one is measured. */
static am_status parse_no_leak(const char *src, size_t len, am_result *res, const char *what)
{
    parse_and_free(src, len, res);
#ifdef AP_ASAN
    am_status st = parse_and_free(src, len, res);
    if (__lsan_do_recoverable_leak_check() != 0) fail_msg("%s: the parse leaked (LeakSanitizer report above)", what);
#else
    size_t before = mallinfo2().uordblks;
    am_status st = parse_and_free(src, len, res);
    size_t after = mallinfo2().uordblks;
    if (after != before) fail_msg("%s: the parse left %zu bytes on the heap", what, after - before);
#endif
    return st;
}

static void expect_error(const char *src, const char *text)
{
    am_result res;
    am_status st = parse_no_leak(src, strlen(src), &res, text);
    assert_int_equal(st, AM_ERROR);
    if (!strstr(res.msg, text)) fail_msg("expected an error with '%s', got '%s'", text, res.msg);
}

#define VFILE "#!amber\nVIRTUAL_FILE a.comp\n#version 450\nvoid main() {}\nEND\n"

/* A SHADER whose VIRTUAL_FILE copied its source, then a later word failed:
   the copy was lost (fuzz_amber's leak). */
static void shader_fails_after_its_file(void **state)
{
    (void)state;
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp BOGUS\n", "unexpected 'BOGUS' in SHADER");
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp TARGET_ENV nope\n", "unknown TARGET_ENV 'nope'");
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp TARGET_ENV\n", "target environment");
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp VIRTUAL_FILE b.comp\n", "b.comp");
}

/* Two files for one shader: the first copy was overwritten and lost; now
   the second is an error naming it. */
static void shader_with_two_files(void **state)
{
    (void)state;
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp VIRTUAL_FILE a.comp\n",
                 "a second shader file ('a.comp')");
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp FILE x.comp\n", "a second shader file ('x.comp')");
}

/* The good path keeps its source, and a later statement's failure frees it. */
static void shader_from_virtual_file(void **state)
{
    (void)state;
    const char *src = VFILE "SHADER compute s GLSL TARGET_ENV spv1.3 VIRTUAL_FILE a.comp\n";
    am_script s;
    am_result res = {0};
    assert_int_equal(am_parse_amber(src, strlen(src), &s, &res), AM_PASS);
    assert_int_equal(s.n_shaders, 1);
    assert_string_equal(s.shader[0].source, "#version 450\nvoid main() {}\n");
    am_script_free(&s);
    expect_error(VFILE "SHADER compute s GLSL VIRTUAL_FILE a.comp\nBOGUS\n", "unknown command 'BOGUS'");
}

/* Every input of fuzz/seeds_amber/, whatever its verdict, frees everything. */
static void fuzz_seeds(void **state)
{
    (void)state;
    DIR *d = opendir(VF_AMBER_SEEDS);
    if (!d) fail_msg("cannot open %s", VF_AMBER_SEEDS);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", VF_AMBER_SEEDS, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) fail_msg("cannot open %s", path);
        char *buf = malloc(1 << 20);
        assert_non_null(buf);
        size_t len = fread(buf, 1, 1 << 20, f);
        fclose(f);
        am_result res;
        am_status st = parse_no_leak(buf, len, &res, path);
        print_message("%s: status %d %d:%d %s\n", e->d_name, (int)st, res.pos.line, res.pos.col, res.msg);
        free(buf);
        n++;
    }
    closedir(d);
    assert_true(n > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shader_fails_after_its_file),
        cmocka_unit_test(shader_with_two_files),
        cmocka_unit_test(shader_from_virtual_file),
        cmocka_unit_test(fuzz_seeds),
    };
    return VT_RUN_GROUP(tests);
}
