/* vkfuse amber [options] FILE...: run AmberScript / VkScript tests.
 *
 * Files run in worker processes (pool.c), forked before any Vulkan call
 * in this process: a driver crash or a shader that never finishes costs
 * that file an ERROR, not the run, and -j N is N workers at once, each
 * file with its own instance and device. Workers send their am_results
 * through pipes; the parent prints verdicts in the order files were
 * given, then the summary line, and writes JUnit XML if asked. */
#include "../cli.h"
#include "util/fault.h"
#include "compile.h"
#include "exec.h"
#include "feature_table.h"
#include "pool.h"
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct report_ctx {
    am_report *rep;
    char **files;
    am_result *res;
    bool verbose;
} report_ctx;

static void report_one(int i, void *ctx)
{
    report_ctx *c = ctx;
    am_report_file(c->rep, c->files[i], &c->res[i], c->verbose);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: vkfuse amber [options] FILE...\n"
            "Runs AmberScript (files starting #!amber) and VkScript compute tests.\n\n"
            "  -j N            run N files at once (each in its own process and device)\n"
            "  --tap           TAP output instead of PASS/FAIL lines\n"
            "  --junit FILE    also write JUnit XML to FILE\n"
            "  --device D      device index or name substring (default: VKFUSE_DEVICE, else the best)\n"
            "  --timeout S     seconds per file, also the fence timeout (default 60)\n"
            "  --validation    Khronos validation layer on (also VKFUSE_VALIDATION=1); any message fails\n"
            "  -v              print buffer contents on failure, timings of TIMED_EXECUTION\n"
            "  --list-features print every Struct.member DEVICE_FEATURE name known (from the Vulkan headers)\n\n"
            "Each file is PASS, FAIL, SKIP or ERROR; the last line is\n"
            "'N passed, N failed, N skipped, N errors'. Exit status 0 only if nothing failed or errored.\n");
}

int cmd_amber(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    am_exec_opts o = {.device_index = -1, .timeout_ms = 60000};
    const char *env = getenv("VKFUSE_VALIDATION");
    o.validation = env && *env && strcmp(env, "0") != 0;
    o.device_env = getenv("VKFUSE_DEVICE");
    const char *junit = NULL;
    bool tap = false;
    long jobs = 1;
    double timeout = 60;
    char **files = vf_calloc((size_t)argc, sizeof *files);
    int n_files = 0;
    if (!files) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_val = i + 1 < argc;
        if (!strcmp(a, "--list-features")) {
            /* The generated table, for users and for the test that checks
               it against vulkan_core.h (tests/amber/feature_table_test.sh). */
            for (int k = 0; k < am_feat_struct_count(); k++) {
                const am_feat_struct *fs = am_feat_struct_get(k);
                for (int m = 0; m < fs->count; m++) printf("%s.%s\n", fs->name, am_feat_member_get(fs->first + m)->name);
            }
            free(files);
            return 0;
        }
        if (!strcmp(a, "--tap")) {
            tap = true;
        } else if (!strcmp(a, "-v")) {
            o.verbose = true;
        } else if (!strcmp(a, "--validation")) {
            o.validation = true;
        } else if (!strcmp(a, "--junit") && has_val) {
            junit = argv[++i];
        } else if ((!strcmp(a, "-j") && has_val) || !strncmp(a, "-j", 2)) {
            const char *v = a[2] ? a + 2 : argv[++i];
            char *end;
            jobs = strtol(v, &end, 10);
            if (*end || jobs < 1 || jobs > 256) {
                fprintf(stderr, "vkfuse amber: -j takes 1..256\n");
                free(files);
                return 2;
            }
        } else if (!strcmp(a, "--device") && has_val) {
            const char *v = argv[++i];
            char *end;
            long d = strtol(v, &end, 10);
            if (!*end && d >= 0) {
                o.device_index = (int)d;
            } else {
                o.device_env = v;
            }
        } else if (!strcmp(a, "--timeout") && has_val) {
            char *end;
            timeout = strtod(argv[++i], &end);
            if (*end || !(timeout > 0) || timeout > 86400) {
                fprintf(stderr, "vkfuse amber: --timeout takes seconds (0 < S <= 86400)\n");
                free(files);
                return 2;
            }
            o.timeout_ms = (uint32_t)(timeout * 1000);
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "vkfuse amber: unknown option '%s'\n\n", a);
            usage(stderr);
            free(files);
            return 2;
        } else {
            files[n_files++] = argv[i];
        }
    }
    if (!n_files) {
        usage(stderr);
        free(files);
        return 2;
    }
    am_result *res = vf_calloc((size_t)n_files, sizeof *res);
    if (!res) {
        free(files);
        return 2;
    }
    am_report rep;
    am_report_begin(&rep, tap, n_files);
    /* The workers inherit glslang's built-in tables (compile.c) and the
       loaded Vulkan drivers instead of each rebuilding / reloading them. */
    if (n_files > 1) {
        am_compile_warm();
        am_exec_preload(&o);
    }
    /* The file's own fence timeout fires first; the kill is the backstop. */
    report_ctx rc_ctx = {.rep = &rep, .files = files, .res = res, .verbose = o.verbose};
    am_pool_run(files, n_files, (int)jobs, &o, timeout + 30, res, report_one, &rc_ctx);
    int rc = am_report_end(&rep);
    if (junit) {
        const am_result **rs = vf_calloc((size_t)n_files, sizeof *rs);
        for (int i = 0; rs && i < n_files; i++) rs[i] = &res[i];
        if (!rs || am_report_junit(junit, (const char *const *)files, rs, n_files) != 0) {
            fprintf(stderr, "vkfuse amber: cannot write %s\n", junit);
            rc = 1;
        }
        free(rs);
    }
    free(res);
    free(files);
    return rc;
}
