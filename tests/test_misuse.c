/* The misuse suite: every lifetime and API misuse a user can commit, each
 * in a child process of its own, on both backends. A case passes when the
 * child exits normally after the library returned the expected status and
 * message; a signal (SIGSEGV, ASan's SIGABRT on a use-after-free, a stack
 * overflow) or a wrong message fails it. Under the asan preset the child
 * also runs LeakSanitizer at exit, so a misuse may not leak either.
 *
 * Threading misuse has its own section at the end (cases that share one
 * context between threads). */
#include "testutil.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the child side: plain checks, no cmocka (its state is the parent's) -- */

static vf_context *make(vf_backend be)
{
    const char *val = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = be, .validation = val && strcmp(val, "1") == 0};
    vf_context *ctx = NULL;
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "could not create a context: %s\n", ctx ? vf_error_message(ctx) : "");
        exit(3);
    }
    return ctx;
}

/* ctx's status is st and its message has every substring; then clears it.
   Exits the child (status 1) with what it got otherwise. */
static void expect(vf_context *ctx, vf_status st, ...)
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

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

/* The context still works after the misuse, then goes away cleanly. */
static void done(vf_context *ctx)
{
    int64_t sh[1] = {3};
    float v[3];
    vf_tensor *a = vf_fill(ctx, VF_F32, 1, sh, 2.0);
    CHECK(vf_tensor_read(vf_add(ctx, a, a), v, sizeof v) == VF_OK && v[2] == 4.0f);
    CHECK(vf_context_sync(ctx) == VF_OK);
    vf_context_destroy(ctx);
}

static const int64_t S4[1] = {4};

/* ---- tensors ---------------------------------------------------------------- */

static void use_after_release(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(t);
    vf_tensor *keep_busy = vf_fill(ctx, VF_F32, 1, S4, 7.0); /* would reuse t's memory */
    CHECK(vf_add(ctx, t, keep_busy) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_add", "input 0", "tensor #", "released by vf_tensor_release", NULL);
    float v[4];
    CHECK(vf_tensor_read(t, v, sizeof v) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_read", "released by vf_tensor_release", NULL);
    done(ctx);
}

static void use_after_scope(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_scope_end(ctx);
    vf_tensor *other = vf_fill(ctx, VF_F32, 1, S4, 3.0);
    CHECK(vf_mul(ctx, other, t) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_mul", "input 1", "tensor #", "released by vf_scope_end", "vf_keep",
           NULL);
    float v[4];
    CHECK(vf_tensor_read(t, v, sizeof v) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_read", "vf_scope_end", NULL);
    CHECK(vf_reduce_sum(ctx, t, 0, NULL, false) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_reduce_sum", "vf_scope_end", NULL);
    CHECK(vf_matmul(ctx, t, t) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_matmul", "vf_scope_end", NULL);
    CHECK(vf_reshape(ctx, t, 1, S4) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_reshape", "vf_scope_end", NULL);
    done(ctx);
}

static void double_release(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(t);
    vf_tensor_release(t);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "tensor #", "already released", NULL);
    /* a retained tensor released once more than retained */
    vf_tensor *r = vf_tensor_retain(vf_fill(ctx, VF_F32, 1, S4, 1.0));
    vf_tensor_release(r);
    vf_tensor_release(r);
    CHECK(vf_status_get(ctx) == VF_OK);
    vf_tensor_release(r);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "already released", NULL);
    done(ctx);
}

static void release_after_scope(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_scope_end(ctx);
    vf_tensor_release(t);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "already released by vf_scope_end", NULL);
    CHECK(vf_keep(t) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_keep", "vf_scope_end", NULL);
    CHECK(vf_tensor_retain(t) == NULL);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_retain", "vf_scope_end", NULL);
    done(ctx);
}

static void accessors_after_release(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_tensor *t = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 2}, 1.0);
    vf_tensor_release(t);
    CHECK(vf_tensor_rank(t) == -1);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_rank", "released", NULL);
    CHECK(vf_tensor_dim(t, 0) == -1);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_dim", "released", NULL);
    CHECK(vf_tensor_numel(t) == -1);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_numel", "released", NULL);
    CHECK(vf_tensor_bytes(t) == 0);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_bytes", "released", NULL);
    CHECK(!vf_tensor_is_variable(t));
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_is_variable", "released", NULL);
    vf_tensor_dtype(t);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_dtype", "released", NULL);
    CHECK(vf_tensor_context(t) == ctx); /* where its errors go: still known */
    done(ctx);
}

static void variable_after_release(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_tensor *w = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 1.0));
    vf_tensor *one = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(w);
    CHECK(vf_assign_add(w, one) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_assign_add", "released", NULL);
    vf_tensor *v = vf_variable(ctx, one);
    vf_tensor_release(one);
    CHECK(vf_assign(v, one) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_assign", "input 1", "released", NULL);
    done(ctx);
}

static vf_status never(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)in, (void)out, (void)user;
    fprintf(stderr, "a body ran on a released tensor\n");
    exit(1);
}

static void released_into_control_flow(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(x);
    CHECK(vf_print(ctx, "x", x) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_print", "released", NULL);
    vf_tensor *vars[1] = {x};
    CHECK(vf_while_loop(ctx, never, never, 1, vars, 1, NULL) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_while_loop", "released", NULL);
    vf_tensor *pred = vf_fill(ctx, VF_BOOL, 0, NULL, 1);
    CHECK(vf_cond(ctx, pred, never, never, 1, vars, 0, NULL, NULL) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_cond", "released", NULL);
    vf_tensor *src[1] = {x}, *g[1];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_fill(ctx, VF_F32, 1, S4, 2.0);
    CHECK(vf_tape_gradient(tp, y, 1, src, g) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "released", NULL);
    vf_tape_end(tp);
    done(ctx);
}

/* ---- symbolic tensors that escape a trace ----------------------------------- */

static vf_tensor *escaped, *escaped_retained;

static vf_status leaky_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    escaped_retained = vf_tensor_retain(vf_neg(ctx, in[0])); /* outlives the trace, still symbolic */
    escaped = vf_exp(ctx, in[0]); /* stored in a global: dies with the trace */
    out[0] = vf_add(ctx, escaped, in[0]);
    return VF_OK;
}

static void escaped_symbolic(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "leaky", .body = leaky_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y;
    CHECK(vf_function_call(fn, &x, &y) == VF_OK);
    vf_tensor *filler = vf_fill(ctx, VF_F32, 1, S4, 1.0); /* would reuse the escaped tensor's memory */
    CHECK(vf_add(ctx, escaped, filler) == NULL);
    expect(ctx, VF_ERROR_TRACE, "vf_add", "input 0", "symbolic", "trace", "has ended", NULL);
    float v[4];
    CHECK(vf_tensor_read(escaped, v, sizeof v) == VF_ERROR_TRACE);
    expect(ctx, VF_ERROR_TRACE, "vf_tensor_read", "symbolic", NULL);
    vf_tensor_release(escaped);
    expect(ctx, VF_ERROR_TRACE, "vf_tensor_release", "symbolic", NULL);
    CHECK(vf_mul(ctx, filler, escaped_retained) == NULL);
    expect(ctx, VF_ERROR_TRACE, "vf_mul", "input 1", "symbolic", "has ended", NULL);
    CHECK(vf_tensor_read(escaped_retained, v, sizeof v) == VF_ERROR_TRACE);
    expect(ctx, VF_ERROR_TRACE, "vf_tensor_read", "symbolic", "has ended", NULL);
    vf_tensor_release(escaped_retained); /* the caller's reference: fine to drop */
    CHECK(vf_status_get(ctx) == VF_OK);
    vf_function_destroy(fn);
    done(ctx);
}

/* ---- functions ------------------------------------------------------------- */

static vf_status releasing_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_exp(ctx, in[0]);
    vf_tensor_release(out[0]); /* and returns it anyway */
    return VF_OK;
}

static void released_body_output(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "giver", .body = releasing_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call", "output", "released by vf_tensor_release", NULL);
    vf_tensor *pred = vf_fill(ctx, VF_BOOL, 0, NULL, 1);
    CHECK(vf_cond(ctx, pred, releasing_body, releasing_body, 1, &x, 1, &y, NULL) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_cond", "output 0", "released by vf_tensor_release", NULL);
    vf_function_destroy(fn);
    done(ctx);
}

static vf_status releasing_input_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor_release(in[0]); /* not the body's to release, and twice (unused: the trace holds no capture of it) */
    vf_tensor_release(in[0]);
    out[0] = vf_fill(ctx, VF_F32, 1, S4, 0.0);
    return VF_OK;
}

/* A variable goes into a traced body by reference (the caller's handle):
   a body that released it twice killed the caller's tensor, and the call
   then read the dead handle (use-after-poison found by fuzz_api in misuse
   mode). The trace fails instead. */
static void body_released_variable_input(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "taker", .body = releasing_input_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 1.0)), *y = NULL;
    CHECK(x);
    CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call", "taker", "released its input 0", NULL);
    vf_function_destroy(fn);
    done(ctx);
}

static vf_status recursive_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_function *self = *(vf_function **)user;
    vf_tensor *y = vf_neg(ctx, in[0]);
    vf_status s = vf_function_call(self, &y, out); /* no base case: would recurse forever */
    (void)ctx;
    return s;
}

static void recursion(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = NULL;
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "ouroboros", .body = recursive_body, .user = &fn,
                                                       .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_TRACE);
    CHECK(y == NULL);
    expect(ctx, VF_ERROR_TRACE, "'ouroboros'", "called while it is being traced", NULL);
    /* the function still works once the body is fixed? It has none: a
       second call fails the same way, it does not crash */
    CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_TRACE);
    expect(ctx, VF_ERROR_TRACE, "called while it is being traced", NULL);
    vf_function_destroy(fn);
    done(ctx);
}

static void eager_recursion(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_run_functions_eagerly(ctx, true); /* host code may recurse, but not forever */
    vf_function *fn = NULL;
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "ouroboros", .body = recursive_body, .user = &fn,
                                                       .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "'ouroboros'", "deep", "base case", NULL);
    vf_function_destroy(fn);
    done(ctx);
}

typedef struct {
    vf_function *f, *g;
} pair;

static vf_status f_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx;
    return vf_function_call(((pair *)user)->g, in, out);
}

static vf_status g_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *y = vf_exp(ctx, in[0]);
    return vf_function_call(((pair *)user)->f, &y, out);
}

static void mutual_recursion(vf_backend be)
{
    vf_context *ctx = make(be);
    pair p;
    p.f = vf_function_create(ctx, &(vf_function_desc){.name = "ping", .body = f_body, .user = &p, .n_inputs = 1,
                                                       .n_outputs = 1});
    p.g = vf_function_create(ctx, &(vf_function_desc){.name = "pong", .body = g_body, .user = &p, .n_inputs = 1,
                                                       .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    CHECK(vf_function_call(p.f, &x, &y) == VF_ERROR_TRACE);
    expect(ctx, VF_ERROR_TRACE, "'ping'", "called while it is being traced", NULL);
    vf_function_destroy(p.g);
    vf_function_destroy(p.f);
    done(ctx);
}

static vf_status scale_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *w = user;
    out[0] = vf_mul(ctx, vf_exp(ctx, in[0]), w); /* captures the variable w */
    return VF_OK;
}

static vf_function *scale_fn(vf_context *ctx)
{
    vf_tensor *w = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 2.0));
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "scale", .body = scale_body, .user = w,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    float v[4];
    CHECK(vf_function_call(fn, &x, &y) == VF_OK); /* a concrete function, captures, a plan */
    CHECK(vf_tensor_read(y, v, sizeof v) == VF_OK && v[0] == 2.0f);
    return fn;
}

static void function_destroy_after_context(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = scale_fn(ctx);
    vf_context_destroy(ctx);
    vf_function_destroy(fn); /* harmless: it only frees what is left */
}

static void function_call_after_context(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = scale_fn(ctx);
    vf_context_destroy(ctx);
    /* the function outlived its context: calls fail, stats stay readable */
    vf_tensor *y = NULL;
    CHECK(vf_function_call(fn, &y, &y) == VF_ERROR_INVALID_ARGUMENT);
    vf_function_stats st;
    CHECK(vf_function_stats_get(fn, &st) == VF_OK && st.calls == 1);
    vf_function_destroy(fn);
}

static void function_use_after_destroy(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_function *fn = scale_fn(ctx);
    vf_function_destroy(fn);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call", "'scale'", "destroyed", NULL);
    vf_function_destroy(fn);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_destroy", "'scale'", "already destroyed", NULL);
    vf_function_stats st;
    CHECK(vf_function_stats_get(fn, &st) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_stats_get", "destroyed", NULL);
    CHECK(vf_function_variable_count(fn) == 0);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_variable_count", "destroyed", NULL);
    CHECK(vf_function_save(fn, "/nonexistent/never-written.vkf") == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save", "destroyed", NULL);
    done(ctx);
}

/* ---- tapes ----------------------------------------------------------------- */

static void tape_after_end(vf_backend be)
{
    vf_context *ctx = make(be);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_mul(ctx, x, x);
    vf_tape_end(tp);
    vf_tensor *g = NULL;
    CHECK(vf_tape_gradient(tp, y, 1, &x, &g) == VF_ERROR_INVALID_ARGUMENT);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "tape #", "ended by vf_tape_end", NULL);
    vf_tape_end(tp);
    expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_end", "already ended", NULL);
    done(ctx);
}

/* ---- threading misuse --------------------------------------------------------
   Cases that share one context between threads go here (their own helpers
   and entries in the table below). */

/* ---- the parent side ---------------------------------------------------------- */

typedef struct {
    const char *name;
    void (*fn)(vf_backend be);
} misuse_case;

static const misuse_case cases[] = {
    {"use_after_release", use_after_release},
    {"use_after_scope", use_after_scope},
    {"double_release", double_release},
    {"release_after_scope", release_after_scope},
    {"accessors_after_release", accessors_after_release},
    {"variable_after_release", variable_after_release},
    {"released_into_control_flow", released_into_control_flow},
    {"escaped_symbolic", escaped_symbolic},
    {"released_body_output", released_body_output},
    {"body_released_variable_input", body_released_variable_input},
    {"recursion", recursion},
    {"mutual_recursion", mutual_recursion},
    {"eager_recursion", eager_recursion},
    {"function_destroy_after_context", function_destroy_after_context},
    {"function_call_after_context", function_call_after_context},
    {"function_use_after_destroy", function_use_after_destroy},
    {"tape_after_end", tape_after_end},
};

/* Runs one case in a child: true when the child exited with 0. */
static bool run_case(const misuse_case *c, vf_backend be)
{
    const char *bname = be == VF_BACKEND_CPU ? "cpu" : "vulkan";
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* cmocka's handlers would longjmp a crash back into the runner's
           copy in this child: a crash must end the child instead */
        const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS};
        for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
        alarm(120); /* a hang fails as a signal, not a stuck suite */
        c->fn(be);
        exit(0); /* exit, not _exit: LeakSanitizer runs at exit under the asan preset */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "FAIL misuse case %s (%s): the child died of signal %d (%s)\n", c->name, bname,
                WTERMSIG(status), strsignal(WTERMSIG(status)));
        return false;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "FAIL misuse case %s (%s): the child exited with %d (its stderr is above)\n", c->name,
                bname, WEXITSTATUS(status));
        return false;
    }
    return true;
}

/* Every case runs, so that one report lists all that fail. */
static void run_all(vf_backend be)
{
    int failed = 0, n = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n; i++) failed += !run_case(&cases[i], be);
    if (failed) fail_msg("%d of %d misuse cases failed on %s", failed, n, be == VF_BACKEND_CPU ? "cpu" : "vulkan");
}

static void test_cpu(void **state)
{
    (void)state;
    run_all(VF_BACKEND_CPU);
}

static void test_vulkan(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    run_all(VF_BACKEND_VULKAN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
