/* The worker pool behind `vkfuse amber [-j N] FILE...`.
 *
 * N worker processes are forked once, after the parent has warmed glslang
 * and loaded the Vulkan libraries (am_compile_warm, am_exec_preload), and
 * each runs file after file: the parent hands a worker a file's index
 * through its command pipe, the worker runs it (its own instance and
 * device, as before) and sends back the index and the am_result through
 * its result pipe. So a file no longer pays for a fork, for faulting in a
 * fresh copy of the process, nor for dlopen-ing the drivers.
 *
 * Isolation is kept where it matters: a worker that crashes, exits, or
 * outlives the file's time limit (then killed) costs that file an ERROR
 * and is replaced by a fresh worker for the files still to run. A worker
 * whose device hung (x->hung: it cannot be torn down) leaves after
 * reporting, and is replaced too. */
#include "pool.h"
#include "util/fault.h"

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

#define MAX_WORKERS 256

typedef struct worker {
    pid_t pid;                   /* 0: none */
    int cmd, res;                /* pipes: parent -> worker, worker -> parent */
    int file;                    /* running this file, or -1 */
    double start;
    size_t got;                  /* bytes of msg received */
    struct {
        uint32_t index;
        am_result r;
    } msg;
} worker;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static bool full_io(int fd, void *buf, size_t len, bool wr)
{
    char *p = buf;
    while (len) {
        ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        len -= (size_t)n;
    }
    return true;
}

/* The worker: runs the files it is handed until its command pipe closes. */
static void work(int cmd, int res, char *const *files, const am_exec_opts *o)
{
    worker *m = vf_calloc(1, sizeof *m);
    if (!m) _exit(1);
    /* Testing only (docs/TESTING.md): the worker aborts on a file whose
       path contains this text, as a driver crash would. */
    const char *crash = getenv("VKFUSE_TEST_AMBER_CRASH");
    uint32_t idx;
    while (full_io(cmd, &idx, sizeof idx, false)) {
        if (crash && *crash && strstr(files[idx], crash)) {
            signal(SIGABRT, SIG_DFL);
            abort();
        }
        memset(&m->msg, 0, sizeof m->msg);
        m->msg.index = idx;
        am_run_file(files[idx], o, &m->msg.r);
        bool hung = m->msg.r.hung;
        if (!full_io(res, &m->msg, sizeof m->msg, true)) break;
        /* A hung device cannot be torn down: leave without exit handlers. */
        if (hung) _exit(0);
    }
    free(m);
    fflush(NULL);
    exit(0);
}

static bool spawn(worker *w, worker *all, int n_all, bool *done, char *const *files, const am_exec_opts *o)
{
    int c[2], r[2];
    if (pipe(c) != 0) return false;
    if (pipe(r) != 0) {
        close(c[0]);
        close(c[1]);
        return false;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(c[0]), close(c[1]), close(r[0]), close(r[1]);
        return false;
    }
    if (pid == 0) {
        /* Other workers' pipes stay with the parent: a worker must not
           keep a sibling's command pipe open (it would never see EOF). */
        for (int i = 0; i < n_all; i++)
            if (all[i].pid) close(all[i].cmd), close(all[i].res);
        /* The parent's bookkeeping is not the worker's (and would show as
           a leak when the worker exits). */
        free(all);
        free(done);
        close(c[1]);
        close(r[0]);
        /* Not inherited by spirv-opt (optimize.c runs it). */
        fcntl(c[0], F_SETFD, FD_CLOEXEC);
        fcntl(r[1], F_SETFD, FD_CLOEXEC);
        signal(SIGPIPE, SIG_DFL);
        work(c[0], r[1], files, o);
    }
    close(c[0]);
    close(r[1]);
    fcntl(r[0], F_SETFL, O_NONBLOCK);
    fcntl(c[1], F_SETFD, FD_CLOEXEC);
    fcntl(r[0], F_SETFD, FD_CLOEXEC);
    *w = (worker){.pid = pid, .cmd = c[1], .res = r[0], .file = -1};
    return true;
}

/* Reads what the worker sent; true when a whole result is in. */
static bool drain(worker *w)
{
    while (w->got < sizeof w->msg) {
        ssize_t n = read(w->res, (char *)&w->msg + w->got, sizeof w->msg - w->got);
        if (n > 0) {
            w->got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        break;
    }
    return w->got == sizeof w->msg;
}

static void take(worker *w, am_result *results, bool *done)
{
    am_result *r = &results[w->file];
    *r = w->msg.r;
    r->msg[sizeof r->msg - 1] = '\0';
    r->detail[sizeof r->detail - 1] = '\0';
    done[w->file] = true;
    w->file = -1;
    w->got = 0;
}

/* The worker is gone (exited, crashed or killed): its file, if any, gets
   an ERROR saying how. */
static void bury(worker *w, int status, bool killed, double limit, am_result *results, bool *done)
{
    if (w->file >= 0 && drain(w) && w->msg.index == (uint32_t)w->file) {
        take(w, results, done); /* it reported before leaving (a hung device) */
    } else if (w->file >= 0) {
        am_result *r = &results[w->file];
        memset(r, 0, sizeof *r);
        if (killed)
            am_fail_at(r, (am_pos){0, 0}, "did not finish within %.0f s (killed)", limit);
        else if (WIFSIGNALED(status))
            am_fail_at(r, (am_pos){0, 0}, "the runner crashed (signal %d: %s)", WTERMSIG(status),
                       strsignal(WTERMSIG(status)));
        else
            am_fail_at(r, (am_pos){0, 0}, "the runner exited (status %d) without a result",
                       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        done[w->file] = true;
    }
    close(w->cmd);
    close(w->res);
    *w = (worker){.file = -1};
}

void am_pool_run(char *const *files, int n_files, int jobs, const am_exec_opts *o, double kill_after,
                 am_result *results, void (*report)(int index, void *ctx), void *ctx)
{
    if (jobs > n_files) jobs = n_files;
    if (jobs > MAX_WORKERS) jobs = MAX_WORKERS;
    worker *w = vf_calloc((size_t)jobs, sizeof *w);
    bool *done = vf_calloc((size_t)n_files, sizeof *done);
    if (!w || !done) {
        for (int i = 0; i < n_files; i++) {
            memset(&results[i], 0, sizeof results[i]);
            am_fail_at(&results[i], (am_pos){0, 0}, "out of host memory (malloc failed)");
            report(i, ctx);
        }
        free(w);
        free(done);
        return;
    }
    /* Handing a file to a worker that has just died must be an EPIPE (the
       worker is then buried), not a SIGPIPE that ends the run. */
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    int next = 0, printed = 0;
    /* A worker that cannot be started leaves its files to the others; with
       none at all, each remaining file says why. */
    int spawn_errno = 0;
    while (printed < n_files) {
        bool any_worker = false;
        for (int i = 0; i < jobs; i++) {
            if (!w[i].pid && next < n_files && !spawn(&w[i], w, jobs, done, files, o)) spawn_errno = errno;
            if (w[i].pid && w[i].file < 0 && next < n_files) {
                uint32_t idx = (uint32_t)next;
                if (full_io(w[i].cmd, &idx, sizeof idx, true)) {
                    w[i].file = next++;
                    w[i].start = now_s();
                    w[i].got = 0;
                }
            }
            any_worker |= w[i].pid != 0;
        }
        if (!any_worker && next < n_files) {
            am_fail_at(&results[next], (am_pos){0, 0}, "cannot start a worker process: %s", strerror(spawn_errno));
            done[next++] = true;
        }
        bool progressed = false;
        for (int i = 0; i < jobs; i++) {
            if (!w[i].pid) continue;
            if (w[i].file >= 0 && drain(&w[i])) {
                take(&w[i], results, done);
                progressed = true;
            }
            int status = 0;
            pid_t r = waitpid(w[i].pid, &status, WNOHANG);
            bool killed = false;
            if (r == 0 && w[i].file >= 0 && now_s() - w[i].start > kill_after) {
                kill(w[i].pid, SIGKILL);
                waitpid(w[i].pid, &status, 0);
                killed = true;
                r = w[i].pid;
            }
            if (r == w[i].pid || (r < 0 && errno == ECHILD)) {
                bury(&w[i], status, killed, kill_after, results, done);
                progressed = true;
            }
        }
        while (printed < n_files && done[printed]) report(printed++, ctx), progressed = true;
        if (!progressed) {
            struct pollfd pf[MAX_WORKERS];
            nfds_t n = 0;
            for (int i = 0; i < jobs; i++)
                if (w[i].pid && w[i].file >= 0) pf[n++] = (struct pollfd){.fd = w[i].res, .events = POLLIN};
            poll(pf, n, 20);
        }
    }
    /* Closing the command pipes ends the workers. */
    for (int i = 0; i < jobs; i++)
        if (w[i].pid) {
            close(w[i].cmd);
            close(w[i].res);
            waitpid(w[i].pid, NULL, 0);
        }
    free(w);
    free(done);
    signal(SIGPIPE, old_pipe);
}
