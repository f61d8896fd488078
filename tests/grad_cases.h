/* The gradient rule cases of tests/test_tape.c: one case per op and
 * broadcast pattern with a gradient rule (the grad field of its op-table row,
 * defined in src/autodiff/grad_rules.c), each an op call and a double-precision host
 * reference of the same function (gc_dt tensors), plus what every check
 * of them shares: the weighted objective sum_k w_k f(x)_k, the tape's
 * gradients of it, and seeded inputs away from the kinks of abs/relu. */
#ifndef VF_TESTS_GRAD_CASES_H
#define VF_TESTS_GRAD_CASES_H

#include <stdbool.h>
#include <stdint.h>

#include "vkfuse.h"

#define GC_MAXE 256 /* elements of a reference tensor */

typedef struct {
    int rank;
    int64_t sh[4];
    double v[GC_MAXE];
} gc_dt;

typedef vf_tensor *(*fn_t)(vf_context *ctx, vf_tensor **in);
typedef void (*ref_t)(const gc_dt *in, gc_dt *out);

typedef struct {
    const char *name;
    fn_t f;
    ref_t r;
    int n;
    int rank[3];
    int64_t shape[3][4];
    float lo, hi;
} gc_case;

extern const gc_case gc_cases[];
extern const int gc_n_cases;

int64_t gc_dnumel(const gc_dt *t);
/* Elements of input i of c. */
int64_t gc_numel(const gc_case *c, int i);
/* sum_k w_k f(x)_k in double (y: f(x)): what the finite differences see. */
double gc_objective(const gc_case *c, const gc_dt *in, gc_dt *y);
/* The weights w_k as a tensor shaped like y. */
vf_tensor *gc_weights_like(vf_context *ctx, vf_tensor *y);
/* The forward value and the tape's gradients of every input (malloc'd). */
void gc_tape_grads(vf_context *ctx, const gc_case *c, float **data, float **y_out, float **grads);
/* Seeded inputs of c (malloc'd, one array per input). */
void gc_fill_case(const gc_case *c, float **data, uint64_t seed);

/* ---- double-precision references (grad_refs.c) ---- */
typedef double (*gc_f3)(double, double, double);
enum { GC_R_SUM, GC_R_MEAN, GC_R_MAX, GC_R_MIN, GC_R_NORM, GC_R_PROD, GC_R_LSE };
/* The row-major index idx[r] of flat element k of shape sh. */
void gc_unflat(int64_t k, int r, const int64_t *sh, int64_t *idx);
/* out = f(a, b, c) with NumPy broadcasting of the n given operands. */
void gc_dmap(int n, const gc_dt *const *x, gc_f3 f, gc_dt *out);
/* Reduction of kind (GC_R_*) over the axes in mask (0: all). */
void gc_dreduce(const gc_dt *x, int kind, uint32_t mask, bool keep, gc_dt *out);
/* softmax (lg: log_softmax) along axis. */
void gc_dsoftmax(const gc_dt *x, int axis, bool lg, gc_dt *out);
/* a @ b, either transposed; batched over leading dims. */
void gc_dmatmul(const gc_dt *a, const gc_dt *b, bool ta, bool tb, gc_dt *out);
void gc_dtranspose(const gc_dt *x, const int *perm, gc_dt *out);
/* y[o, j, c] = x[o, idx[j], c] with x as [outer, n, inner] around axis. */
void gc_dgather(const gc_dt *x, const int32_t *idx, int64_t J, int axis, gc_dt *y);
/* y = y * y elementwise. */
void gc_dsquare_all(gc_dt *y);
/* cumsum along axis (excl: exclusive, rev: from the end). */
void gc_dcumsum(const gc_dt *x, int axis, bool excl, bool rev, gc_dt *y);

#endif
