/* Shared helpers of the CPU backend tests (test_cpu_*.c): a fixture with
 * the backend, buffers, random data, the test's own decoding of elements and
 * its comparisons, all independent of the op table's scalar functions. */
#ifndef VF_CPU_TEST_COMMON_H
#define VF_CPU_TEST_COMMON_H

#include "backend.h"
#include "util/dtype.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* ---- tolerances (relative unless named _ABS) ------------------------------ */
/* +,-,*,/, max, min, neg, abs, relu, compares, casts: double then one
   rounding is what float arithmetic gives: exact. */
#define TOL_EXACT 0.0
/* Transcendentals: both sides round libm's double result to f32; allow one
   f32 ulp for libm differences and the gelu constant's last digit. */
#define TOL_F32_MATH 2.5e-7
/* f16 results: one f16 ulp (the f32 -> f16 step may round a tie differently). */
#define TOL_F16 1e-3
/* Reductions: double accumulation in a different order, rounded once to
   f32: within 1e-6 of the sum of magnitudes. */
#define TOL_REDUCE_F32 1e-6
#define TOL_REDUCE_F16 1e-3
/* softmax outputs in [0, 1] and log_softmax: double inside, one rounding. */
#define TOL_SOFTMAX 1e-6
#define TOL_SOFTMAX_ABS 1e-7
/* sgemm (f32 accumulation, blocked order): relative to sum |a||b|. */
#define TOL_MATMUL_F32 1e-5
#define TOL_MATMUL_F16 2e-3
/* random_normal pins: f32 logf/cosf/sinf vs. double math. */
#define TOL_RANDOM_PIN_ABS 2e-6
/* mean and std of 1e5 normals: standard error 0.0032 / 0.0022, 6 sigma. */
#define TOL_RANDOM_MOMENT 0.02

/* ---- fixture ----------------------------------------------------------------- */

typedef struct fx {
    vf_err err;
    vf_backend_t be;
    vf_buffer *bufs[256];
    int nbufs;
} fx;

/* cmocka setup/teardown: a CPU backend in *state, its buffers freed after. */
int setup(void **state);
int teardown(void **state);
void free_bufs(fx *f);

int64_t numel(int rank, const int64_t *shape);
/* A tensor ref on a new buffer of f, filled with data unless NULL. */
vf_tref mk(fx *f, vf_dtype dt, int rank, const int64_t *shape, const void *data);
/* t's contents in a malloc'd buffer (caller frees). */
void *dl(fx *f, const vf_tref *t);
/* Executes e, failing the test with the backend's message if it fails. */
void run(fx *f, const vf_exec *e);

/* Element i widened (test's own decoding). */
double getf(const void *p, vf_dtype t, int64_t i);
int64_t geti(const void *p, vf_dtype t, int64_t i);
/* Round a double reference to the storage dtype, back as double. */
double round_to(vf_dtype t, double v);
void expect_close(const char *what, int64_t i, double got, double want, double rtol, double atol);
/* Random data of a dtype, with some specials in floats and ints. */
void *gen(vf_dtype t, int64_t n, bool specials);

/* Flat index into an input broadcast to out, by div/mod (independent of the
   kernel's stride walk). */
int64_t bidx(int64_t flat, int orank, const int64_t *os, int irank, const int64_t *is);

/* A cast of n elements of src; the result malloc'd (caller frees). */
void *run_cast(fx *f, vf_dtype from, vf_dtype to, int64_t n, const void *src);
/* Casts src and compares the bytes with want. */
void cast_case(fx *f, vf_dtype from, vf_dtype to, int64_t n, const void *src, const void *want);

#define COUNT(a) (int)(sizeof(a) / sizeof((a)[0]))

#endif
