/* vkfuse amber [options] FILE...: run AmberScript / VkScript tests.
 *
 * Each file runs in a child process of its own (fork before any Vulkan
 * call in this process): a driver crash or a shader that never finishes
 * costs that file an ERROR, not the run, and -j N is N children at once,
 * each with its own instance and device. The child sends its am_result
 * through a pipe; the parent prints verdicts in the order files were
 * given, then the summary line, and writes JUnit XML if asked. */
#include "../cli.h"
#include "compile.h"
#include "exec.h"
#include "feature_table.h"
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

typedef struct job {
    pid_t pid;
    int fd;
    size_t got;
    double start;
    bool done;
    am_result res;
} job;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
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

static void child(const char *path, const am_exec_opts *o, int fd)
{
    am_result *r = calloc(1, sizeof *r);
    if (r) am_run_file(path, o, r);
    bool hung = r && r->hung;
    if (r) {
        const char *p = (const char *)r;
        size_t left = sizeof *r;
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
    }
    close(fd);
    free(r);
    fflush(NULL);
    /* A hung device cannot be torn down: leave without exit handlers. */
    if (hung) _exit(0);
    exit(0);
}

static bool start(job *j, const char *path, const am_exec_opts *o)
{
    int p[2];
    if (pipe(p) != 0) return false;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return false;
    }
    if (pid == 0) {
        close(p[0]);
        child(path, o, p[1]);
    }
    close(p[1]);
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    j->pid = pid;
    j->fd = p[0];
    j->start = now_s();
    return true;
}

static void drain(job *j)
{
    for (;;) {
        if (j->got >= sizeof j->res) return;
        ssize_t n = read(j->fd, (char *)&j->res + j->got, sizeof j->res - j->got);
        if (n > 0) {
            j->got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        return;
    }
}

static void finish(job *j, int status, bool timed_out, double timeout)
{
    drain(j);
    close(j->fd);
    j->done = true;
    if (timed_out) {
        memset(&j->res, 0, sizeof j->res);
        am_fail_at(&j->res, (am_pos){0, 0}, "did not finish within %.0f s (killed)", timeout);
    } else if (j->got != sizeof j->res) {
        memset(&j->res, 0, sizeof j->res);
        if (WIFSIGNALED(status))
            am_fail_at(&j->res, (am_pos){0, 0}, "the runner crashed (signal %d: %s)", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
        else
            am_fail_at(&j->res, (am_pos){0, 0}, "the runner exited (status %d) without a result",
                       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    j->res.msg[sizeof j->res.msg - 1] = '\0';
    j->res.detail[sizeof j->res.detail - 1] = '\0';
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
    char **files = calloc((size_t)argc, sizeof *files);
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
    job *j = calloc((size_t)n_files, sizeof *j);
    if (!j) {
        free(files);
        return 2;
    }
    am_report rep;
    am_report_begin(&rep, tap, n_files);
    /* Each child would otherwise rebuild glslang's tables (see compile.c). */
    if (n_files > 1) am_compile_warm();
    int next = 0, running = 0, printed = 0;
    /* The child's own fence timeout fires first; the kill is the backstop. */
    double kill_after = timeout + 30;
    while (printed < n_files) {
        while (running < jobs && next < n_files) {
            if (!start(&j[next], files[next], &o)) {
                am_fail_at(&j[next].res, (am_pos){0, 0}, "cannot start a child process: %s", strerror(errno));
                j[next].done = true;
                j[next].pid = 0;
            } else {
                running++;
            }
            next++;
        }
        bool progressed = false;
        for (int i = 0; i < next; i++) {
            if (j[i].done || !j[i].pid) continue;
            drain(&j[i]);
            int status = 0;
            pid_t r = waitpid(j[i].pid, &status, WNOHANG);
            bool timed_out = false;
            if (r == 0 && now_s() - j[i].start > kill_after) {
                kill(j[i].pid, SIGKILL);
                waitpid(j[i].pid, &status, 0);
                timed_out = true;
                r = j[i].pid;
            }
            if (r == j[i].pid || (r < 0 && errno == ECHILD)) {
                finish(&j[i], status, timed_out, kill_after);
                running--;
                progressed = true;
            }
        }
        while (printed < n_files && j[printed].done) {
            am_report_file(&rep, files[printed], &j[printed].res, o.verbose);
            printed++;
            progressed = true;
        }
        if (!progressed) {
            struct pollfd pf[256];
            int n = 0;
            for (int i = 0; i < next && n < 256; i++)
                if (!j[i].done && j[i].pid) pf[n++] = (struct pollfd){.fd = j[i].fd, .events = POLLIN};
            poll(pf, (nfds_t)n, 20);
        }
    }
    int rc = am_report_end(&rep);
    if (junit) {
        const am_result **rs = calloc((size_t)n_files, sizeof *rs);
        for (int i = 0; rs && i < n_files; i++) rs[i] = &j[i].res;
        if (!rs || am_report_junit(junit, (const char *const *)files, rs, n_files) != 0) {
            fprintf(stderr, "vkfuse amber: cannot write %s\n", junit);
            rc = 1;
        }
        free(rs);
    }
    free(j);
    free(files);
    return rc;
}
