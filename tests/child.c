/* Cases run in child processes (child.h). */
#include "child.h"
#include "testutil.h"

#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *backend_name(vf_backend be) { return be == VF_BACKEND_CPU ? "cpu" : "vulkan"; }

bool vt_child_run(const char *what, void (*fn)(vf_backend be), vf_backend be, unsigned limit_s)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka's handlers would longjmp a crash back into the runner's
           copy in this child: a crash must end the child instead */
        const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGALRM};
        for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
        alarm(limit_s);
        fn(be);
        exit(0); /* exit, not _exit: LeakSanitizer runs at exit under the asan preset */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        fprintf(stderr, "FAIL %s (%s): the child died of signal %d (%s)%s\n", what, backend_name(be), sig,
                strsignal(sig), sig == SIGALRM ? ": it did not finish in time (a deadlock?)" : "");
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL %s (%s): the child exited with %d (its stderr is above)\n", what, backend_name(be),
                WEXITSTATUS(status));
        return false;
    }
    return true;
}

void vt_child_run_all(const vt_child_case *cases, int n, vf_backend be, unsigned limit_s)
{
    int failed = 0;
    for (int i = 0; i < n; i++) failed += !vt_child_run(cases[i].name, cases[i].fn, be, limit_s);
    if (failed) fail_msg("%d of %d cases failed on %s", failed, n, backend_name(be));
}

vf_context *vt_child_context(vf_backend be)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = be, .validation = val && strcmp(val, "1") == 0};
    vf_context *ctx = NULL;
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "could not create a context: %s\n", vf_last_error());
        exit(3);
    }
    return ctx;
}

void vt_child_expect(vf_context *ctx, vf_status st, ...)
{
    vf_status got = vf_status_get(ctx);
    const char *msg = vf_error_message(ctx);
    bool ok = got == st;
    va_list ap;
    va_start(ap, st);
    for (const char *s; (s = va_arg(ap, const char *));)
        if (!strstr(msg, s)) {
            fprintf(stderr, "message lacks \"%s\"\n", s);
            ok = false;
        }
    va_end(ap);
    if (!ok) {
        fprintf(stderr, "want %s, got %s: %s\n", vf_status_name(st), vf_status_name(got), msg);
        exit(1);
    }
    vf_error_clear(ctx);
}

void vt_child_done(vf_context *ctx)
{
    int64_t sh[1] = {3};
    float v[3];
    vf_tensor *a = vf_fill(ctx, VF_F32, 1, sh, 2.0);
    VT_CHECK(vf_tensor_read(vf_add(ctx, a, a), v, sizeof v) == VF_OK && v[2] == 4.0f);
    VT_CHECK(vf_context_sync(ctx) == VF_OK);
    vf_context_destroy(ctx);
}
