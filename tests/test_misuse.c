/* The misuse suite: every lifetime and API misuse a user can commit, each
 * in a child process of its own, on both backends. A case passes when the
 * child exits normally after the library returned the expected status and
 * message; a signal (SIGSEGV, ASan's SIGABRT on a use-after-free, a stack
 * overflow) or a wrong message fails it. Under the asan preset the child
 * also runs LeakSanitizer at exit, so a misuse may not leak either.
 *
 * The harness (fork, signals, alarm, the child-side checks) is
 * tests/child.c; threading misuse is tests/test_misuse_threads.c. */
#include "child.h"
#include "testutil.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static const int64_t S4[1] = {4};

/* ---- tensors ---------------------------------------------------------------- */

static void use_after_release(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(t);
    vf_tensor *keep_busy = vf_fill(ctx, VF_F32, 1, S4, 7.0); /* would reuse t's memory */
    VT_CHECK(vf_add(ctx, t, keep_busy) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_add", "input 0", "tensor #", "released by vf_tensor_release", NULL);
    float v[4];
    VT_CHECK(vf_tensor_read(t, v, sizeof v) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_read", "released by vf_tensor_release", NULL);
    vt_child_done(ctx);
}

static void use_after_scope(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_scope_end(ctx);
    vf_tensor *other = vf_fill(ctx, VF_F32, 1, S4, 3.0);
    VT_CHECK(vf_mul(ctx, other, t) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_mul", "input 1", "tensor #", "released by vf_scope_end", "vf_keep",
           NULL);
    float v[4];
    VT_CHECK(vf_tensor_read(t, v, sizeof v) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_read", "vf_scope_end", NULL);
    VT_CHECK(vf_reduce_sum(ctx, t, 0, NULL, false) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_reduce_sum", "vf_scope_end", NULL);
    VT_CHECK(vf_matmul(ctx, t, t) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_matmul", "vf_scope_end", NULL);
    VT_CHECK(vf_reshape(ctx, t, 1, S4) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_reshape", "vf_scope_end", NULL);
    vt_child_done(ctx);
}

static void double_release(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(t);
    vf_tensor_release(t);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "tensor #", "already released", NULL);
    /* a retained tensor released once more than retained */
    vf_tensor *r = vf_tensor_retain(vf_fill(ctx, VF_F32, 1, S4, 1.0));
    vf_tensor_release(r);
    vf_tensor_release(r);
    VT_CHECK(vf_status_get(ctx) == VF_OK);
    vf_tensor_release(r);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "already released", NULL);
    vt_child_done(ctx);
}

static void release_after_scope(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_scope_end(ctx);
    vf_tensor_release(t);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "already released by vf_scope_end", NULL);
    VT_CHECK(vf_keep(t) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_keep", "vf_scope_end", NULL);
    VT_CHECK(vf_tensor_retain(t) == NULL);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_retain", "vf_scope_end", NULL);
    vt_child_done(ctx);
}

static void accessors_after_release(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *t = vf_fill(ctx, VF_F32, 2, (int64_t[]){2, 2}, 1.0);
    vf_tensor_release(t);
    VT_CHECK(vf_tensor_rank(t) == -1);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_rank", "released", NULL);
    VT_CHECK(vf_tensor_dim(t, 0) == -1);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_dim", "released", NULL);
    VT_CHECK(vf_tensor_numel(t) == -1);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_numel", "released", NULL);
    VT_CHECK(vf_tensor_bytes(t) == 0);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_bytes", "released", NULL);
    VT_CHECK(!vf_tensor_is_variable(t));
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_is_variable", "released", NULL);
    vf_tensor_dtype(t);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_dtype", "released", NULL);
    VT_CHECK(vf_tensor_context(t) == ctx); /* where its errors go: still known */
    vt_child_done(ctx);
}

static void variable_after_release(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *w = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 1.0));
    vf_tensor *one = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(w);
    VT_CHECK(vf_assign_add(w, one) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_assign_add", "released", NULL);
    vf_tensor *v = vf_variable(ctx, one);
    vf_tensor_release(one);
    VT_CHECK(vf_assign(v, one) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_assign", "input 1", "released", NULL);
    vt_child_done(ctx);
}

static vf_status never(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)in, (void)out, (void)user;
    fprintf(stderr, "a body ran on a released tensor\n");
    exit(1);
}

static void released_into_control_flow(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tensor_release(x);
    VT_CHECK(vf_print(ctx, "x", x) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_print", "released", NULL);
    vf_tensor *vars[1] = {x};
    VT_CHECK(vf_while_loop(ctx, never, never, 1, vars, 1, NULL) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_while_loop", "released", NULL);
    vf_tensor *pred = vf_fill(ctx, VF_BOOL, 0, NULL, 1);
    VT_CHECK(vf_cond(ctx, pred, never, never, 1, vars, 0, NULL, NULL) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_cond", "released", NULL);
    vf_tensor *src[1] = {x}, *g[1];
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_fill(ctx, VF_F32, 1, S4, 2.0);
    VT_CHECK(vf_tape_gradient(tp, y, 1, src, g) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "released", NULL);
    vf_tape_end(tp);
    vt_child_done(ctx);
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
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "leaky", .body = leaky_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_OK);
    vf_tensor *filler = vf_fill(ctx, VF_F32, 1, S4, 1.0); /* would reuse the escaped tensor's memory */
    VT_CHECK(vf_add(ctx, escaped, filler) == NULL);
    vt_child_expect(ctx, VF_ERROR_TRACE, "vf_add", "input 0", "symbolic", "trace", "has ended", NULL);
    float v[4];
    VT_CHECK(vf_tensor_read(escaped, v, sizeof v) == VF_ERROR_TRACE);
    vt_child_expect(ctx, VF_ERROR_TRACE, "vf_tensor_read", "symbolic", NULL);
    vf_tensor_release(escaped);
    vt_child_expect(ctx, VF_ERROR_TRACE, "vf_tensor_release", "symbolic", NULL);
    VT_CHECK(vf_mul(ctx, filler, escaped_retained) == NULL);
    vt_child_expect(ctx, VF_ERROR_TRACE, "vf_mul", "input 1", "symbolic", "has ended", NULL);
    VT_CHECK(vf_tensor_read(escaped_retained, v, sizeof v) == VF_ERROR_TRACE);
    vt_child_expect(ctx, VF_ERROR_TRACE, "vf_tensor_read", "symbolic", "has ended", NULL);
    vf_tensor_release(escaped_retained); /* the caller's reference: fine to drop */
    VT_CHECK(vf_status_get(ctx) == VF_OK);
    vf_function_destroy(fn);
    vt_child_done(ctx);
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
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "giver", .body = releasing_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call", "output", "released by vf_tensor_release", NULL);
    vf_tensor *pred = vf_fill(ctx, VF_BOOL, 0, NULL, 1);
    VT_CHECK(vf_cond(ctx, pred, releasing_body, releasing_body, 1, &x, 1, &y, NULL) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_cond", "output 0", "released by vf_tensor_release", NULL);
    vf_function_destroy(fn);
    vt_child_done(ctx);
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
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "taker", .body = releasing_input_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 1.0)), *y = NULL;
    VT_CHECK(x);
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "'taker'", "released its input 0",
                    "variable passed by reference", "ignored", NULL);
    vf_function_destroy(fn);
    VT_CHECK(vf_assign_add(x, x) == VF_OK); /* the releases were refused: the caller's variable lives */
    vt_child_done(ctx);
}

static vf_status release_once_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[1], in[0]); /* uses the variable (the trace captures it) */
    vf_tensor_release(in[1]);           /* then drops the caller's reference, once */
    return VF_OK;
}

/* Released once, the variable stayed alive through the call (the function
   held a reference of its own) and the call succeeded with no message;
   the caller's variable then died when the function was destroyed. The
   release is refused at trace time, naming the function and the input,
   and the caller's variable outlives the function. */
static void body_released_variable_input_once(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "dropper", .body = release_once_body,
                                                                    .n_inputs = 2, .n_outputs = 1});
    vf_tensor *in[2] = {vf_fill(ctx, VF_F32, 1, S4, 3.0), vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 2.0))};
    vf_tensor *y = NULL;
    VT_CHECK(vf_function_call(fn, in, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "'dropper'", "released its input 1",
                    "tensor #", NULL);
    vf_function_destroy(fn);
    float v[4];
    VT_CHECK(vf_tensor_read(in[1], v, sizeof v) == VF_OK && v[0] == 2.0f);
    VT_CHECK(vf_assign_add(in[1], in[0]) == VF_OK);
    VT_CHECK(vf_tensor_read(in[1], v, sizeof v) == VF_OK && v[3] == 5.0f);
    vt_child_done(ctx);
}

static vf_status retain_release_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tape *tp = vf_tape_begin(ctx); /* the tape holds the input and lets go at its end: the library's release */
    out[0] = vf_mul(ctx, in[0], in[0]);
    vf_tape_end(tp);
    return VF_OK;
}

/* Releases inside other calls (a tape ending in the body) are the
   library's: not refused, the call works. */
static void body_tape_on_variable_input(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "taped", .body = retain_release_body,
                                                                    .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, S4, 3.0)), *y = NULL;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_OK);
    float v[4];
    VT_CHECK(vf_tensor_read(y, v, sizeof v) == VF_OK && v[0] == 9.0f);
    vf_function_destroy(fn);
    VT_CHECK(vf_tensor_read(x, v, sizeof v) == VF_OK && v[0] == 3.0f);
    vt_child_done(ctx);
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
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = NULL;
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "ouroboros", .body = recursive_body, .user = &fn,
                                                       .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_TRACE);
    VT_CHECK(y == NULL);
    vt_child_expect(ctx, VF_ERROR_TRACE, "'ouroboros'", "called while it is being traced", NULL);
    /* the function still works once the body is fixed? It has none: a
       second call fails the same way, it does not crash */
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_TRACE);
    vt_child_expect(ctx, VF_ERROR_TRACE, "called while it is being traced", NULL);
    vf_function_destroy(fn);
    vt_child_done(ctx);
}

static void eager_recursion(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_run_functions_eagerly(ctx, true); /* host code may recurse, but not forever */
    vf_function *fn = NULL;
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "ouroboros", .body = recursive_body, .user = &fn,
                                                       .n_inputs = 1, .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT && !y);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "'ouroboros'", "deep", "base case", NULL);
    vf_function_destroy(fn);
    vt_child_done(ctx);
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
    vf_context *ctx = vt_child_context(be);
    pair p;
    p.f = vf_function_create(ctx, &(vf_function_desc){.name = "ping", .body = f_body, .user = &p, .n_inputs = 1,
                                                       .n_outputs = 1});
    p.g = vf_function_create(ctx, &(vf_function_desc){.name = "pong", .body = g_body, .user = &p, .n_inputs = 1,
                                                       .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    VT_CHECK(vf_function_call(p.f, &x, &y) == VF_ERROR_TRACE);
    vt_child_expect(ctx, VF_ERROR_TRACE, "'ping'", "called while it is being traced", NULL);
    vf_function_destroy(p.g);
    vf_function_destroy(p.f);
    vt_child_done(ctx);
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
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_OK); /* a concrete function, captures, a plan */
    VT_CHECK(vf_tensor_read(y, v, sizeof v) == VF_OK && v[0] == 2.0f);
    return fn;
}

static void function_destroy_after_context(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = scale_fn(ctx);
    vf_context_destroy(ctx);
    vf_function_destroy(fn); /* harmless: it only frees what is left */
}

static void function_call_after_context(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = scale_fn(ctx);
    vf_context_destroy(ctx);
    /* the function outlived its context: calls fail, stats stay readable */
    vf_tensor *y = NULL;
    VT_CHECK(vf_function_call(fn, &y, &y) == VF_ERROR_INVALID_ARGUMENT);
    vf_function_stats st;
    VT_CHECK(vf_function_stats_get(fn, &st) == VF_OK && st.calls == 1);
    vf_function_destroy(fn);
}

static void function_use_after_destroy(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_function *fn = scale_fn(ctx);
    vf_function_destroy(fn);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 0.0), *y = NULL;
    VT_CHECK(vf_function_call(fn, &x, &y) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_call", "'scale'", "destroyed", NULL);
    vf_function_destroy(fn);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_destroy", "'scale'", "already destroyed", NULL);
    vf_function_stats st;
    VT_CHECK(vf_function_stats_get(fn, &st) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_stats_get", "destroyed", NULL);
    VT_CHECK(vf_function_variable_count(fn) == 0);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_variable_count", "destroyed", NULL);
    int n_in = 0, n_out = 0;
    VT_CHECK(vf_function_io_count(fn, &n_in, &n_out) == VF_ERROR_INVALID_ARGUMENT && n_in == -1 && n_out == -1);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_io_count", "destroyed", NULL);
    VT_CHECK(vf_function_save(fn, "/nonexistent/never-written.vkf") == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save", "destroyed", NULL);
    vt_child_done(ctx);
}

/* ---- tapes ----------------------------------------------------------------- */

static void tape_after_end(vf_backend be)
{
    vf_context *ctx = vt_child_context(be);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, S4, 1.0);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = vf_mul(ctx, x, x);
    vf_tape_end(tp);
    vf_tensor *g = NULL;
    VT_CHECK(vf_tape_gradient(tp, y, 1, &x, &g) == VF_ERROR_INVALID_ARGUMENT);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient", "tape #", "ended by vf_tape_end", NULL);
    vf_tape_end(tp);
    vt_child_expect(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_end", "already ended", NULL);
    vt_child_done(ctx);
}

/* ---- the parent side ---------------------------------------------------------- */

static const vt_child_case cases[] = {
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
    {"body_released_variable_input_once", body_released_variable_input_once},
    {"body_tape_on_variable_input", body_tape_on_variable_input},
    {"recursion", recursion},
    {"mutual_recursion", mutual_recursion},
    {"eager_recursion", eager_recursion},
    {"function_destroy_after_context", function_destroy_after_context},
    {"function_call_after_context", function_call_after_context},
    {"function_use_after_destroy", function_use_after_destroy},
    {"tape_after_end", tape_after_end},
};

static void run_all(vf_backend be)
{
    vt_child_run_all(cases, (int)(sizeof cases / sizeof *cases), be, 120);
}

VT_PER_BACKEND(run_all)

int main(void)
{
    const struct CMUnitTest tests[] = {
        VT_PER_BACKEND_TESTS(run_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
