/* Cases that must not crash or hang, each run in a child process of its
 * own (the misuse suites: tests/test_misuse.c, tests/test_misuse_threads.c).
 * A case passes when the child exits 0; a signal (SIGSEGV, ASan's SIGABRT
 * on a use-after-free, a stack overflow), a time-out (alarm) or a non-zero
 * exit fails it, with the child's stderr above the verdict.
 *
 * The child side uses plain checks, not cmocka: cmocka's state is the
 * parent's. */
#ifndef VF_TESTS_CHILD_H
#define VF_TESTS_CHILD_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkfuse.h"

/* Runs fn(be) in a forked child with the default signal handlers and
   alarm(limit_s) (a deadlock fails as SIGALRM instead of hanging the
   suite); true when it exited 0. "FAIL <what> (<backend>): why" on stderr
   otherwise. */
bool vt_child_run(const char *what, void (*fn)(vf_backend be), vf_backend be, unsigned limit_s);

/* A table of named cases, each run by vt_child_run on one backend; fails
   the cmocka test naming how many failed (every case runs, so that one
   report lists them all). */
typedef struct vt_child_case {
    const char *name;
    void (*fn)(vf_backend be);
} vt_child_case;
void vt_child_run_all(const vt_child_case *cases, int n, vf_backend be, unsigned limit_s);

/* ---- the child side ---- */

/* A context on be (validation when VKFUSE_VALIDATION=1); exits 3 if none. */
vf_context *vt_child_context(vf_backend be);
/* ctx's status is st and its message has every substring (NULL-terminated);
   then clears it. Exits the child (status 1) with what it got otherwise. */
void vt_child_expect(vf_context *ctx, vf_status st, ...);
/* The context still computes after the misuse, then goes away cleanly. */
void vt_child_done(vf_context *ctx);

#define VT_CHECK(cond)                                                               \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)

#endif
