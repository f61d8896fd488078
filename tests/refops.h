/* The differential harness's reference: every op of the public API
 * computed in double precision on plain arrays, written from the op's
 * definition (header and docs/), independent of both backends. Shapes are
 * NumPy's (row-major, broadcasting aligned at the trailing dims). A dt is
 * one malloc'd tensor; every function returns a new one (free with
 * dt_free) and takes ownership of nothing. */
#ifndef VF_REFOPS_H
#define VF_REFOPS_H

#include <stdbool.h>
#include <stdint.h>

enum { DT_MAX_RANK = 4 };

typedef struct dt {
    int rank;
    int64_t shape[DT_MAX_RANK];
    int64_t n;
    double *v;
} dt;

typedef enum {
    DU_NEG, DU_ABS, DU_RELU, DU_TANH, DU_SIGMOID, DU_SIN, DU_COS, DU_EXP, DU_LOG, DU_SQRT, DU_RSQRT, DU_GELU,
    DU_SOFTPLUS, DU_ERF,
    DU_ROUND_F16,   /* storage in f16 and back (round to nearest even, overflow to inf) */
    DU_TRUNC_I32,   /* cast to i32: toward zero, NaN 0, saturating */
    DU_NONZERO,     /* cast to bool: x != 0 */
} du_op;

typedef enum {
    DB_ADD, DB_SUB, DB_MUL, DB_DIV, DB_IDIV /* integer: toward zero, x/0 = 0 */, DB_POW, DB_MAX, DB_MIN,
    DB_GREATER, DB_LESS, DB_EQUAL, DB_NOT_EQUAL,
} db_op;

typedef enum { DR_SUM, DR_MEAN, DR_MAX, DR_MIN } dr_op;

dt *dt_new(int rank, const int64_t *shape);
dt *dt_copy(const dt *x);
void dt_free(dt *x);
/* Same shape and (NaN-aware) values within nothing: used by the harness's
   own self-test. */
bool dt_same(const dt *a, const dt *b);

dt *dt_unary(du_op o, const dt *x);
dt *dt_binary(db_op o, const dt *a, const dt *b);   /* NULL when the shapes do not broadcast */
dt *dt_where(const dt *c, const dt *a, const dt *b);
/* Over one axis (axis >= 0) or all (axis < 0). */
dt *dt_reduce(dr_op o, const dt *x, int axis, bool keepdims);
dt *dt_argmax(const dt *x, int axis);               /* first maximum, a NaN counts as the maximum */
dt *dt_softmax(const dt *x, int axis, bool log);
/* [..., m, k] @ [k, n] (b rank 2; a rank 1 is a row, dropped), optionally b transposed. */
dt *dt_matmul(const dt *a, const dt *b, bool transpose_b);
dt *dt_transpose(const dt *x, const int *perm);
dt *dt_reshape(const dt *x, int rank, const int64_t *shape);
dt *dt_norm(const dt *x);                            /* L2 over all elements: a scalar */

#endif
