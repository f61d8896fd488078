/* Random tensor programs for the differential harness (test_differential.c):
 * one seeded generator with a forward error bound per value (diffprog.c),
 * two interpreters (diffprog_eval.c) — the public API (on any context,
 * eager or inside a traced body, with or without tapes) and the double
 * reference of refops.c.
 *
 * A program has a dtype (f32, f16 or i32; bools appear as masks,
 * comparisons and casts) and a base shape of rank 1..3 whose dims may be 0.
 * Every value has that rank; each of its dims is either the base dim or 1
 * (broadcast), recorded in a bit mask. Inputs: x0 (full), x1 (a random
 * mask), W [d, d] (d the last dim), a bool mask (a random mask) and i32
 * labels (the base shape without its last dim). */
#ifndef VF_DIFFPROG_H
#define VF_DIFFPROG_H

#include "refops.h"
#include "vkfuse.h"

#include <stdbool.h>
#include <stdint.h>

enum {
    DP_MAX_INSTR = 40,
    DP_MAX_VALS = 5 + 2 * DP_MAX_INSTR,
    DP_MAX_OUT = 3,
    DP_N_IN = 5,        /* x0, x1, W, mask, labels */
    DP_N_SRC = 3,       /* differentiated: x0, x1, W */
};

typedef enum dp_op {
    /* unary */
    P_NEG, P_ABS, P_RELU, P_TANH, P_SIGMOID, P_SIN, P_COS, P_GELU, P_EXPT, P_SQRTS, P_RSQRTS, P_LOGS,
    P_SQUARE, P_SOFTPLUS, P_ERF,
    /* binary (broadcasting) */
    P_ADD, P_SUB, P_MUL, P_DIVS, P_POWS, P_MAX, P_MIN, P_CMP, P_MASKW,
    /* reductions and rows */
    P_RED, P_SOFTMAX, P_LOGSOFTMAX, P_LNORM, P_NORM, P_XENT,
    /* matmul and its epilogue */
    P_MATMUL, P_EPI,
    /* movement */
    P_TRANSPOSE, P_RESHAPE,
    /* not differentiable */
    P_ARGMAX, P_CAST_F16, P_CAST_INT, P_CAST_BOOL,
    /* control flow */
    P_COND, P_WHILE,
    P_N_OPS,
    P_CAP, /* inserted: tanh (float) or a clamp to [-1000, 1000] (i32) */
} dp_op;

extern const char *const dp_op_name[];

typedef struct dp_instr {
    dp_op o;
    int a, b;
    int k;          /* P_RED: dr_op; P_CMP: which comparison; P_WHILE: trip count; P_COND: threshold sign */
    int axis;       /* reductions, softmax, argmax: -1 all (reductions only) */
    bool flag;      /* P_RED: keepdims; P_MATMUL/P_EPI: transpose_b; P_TRANSPOSE: perm NULL; P_RESHAPE: -1 */
    int perm[DT_MAX_RANK];
} dp_instr;

typedef struct dp_prog {
    uint64_t seed;
    vf_dtype dt;
    int rank;
    int64_t dim[DT_MAX_RANK];
    unsigned in1_mask, bool_mask;
    dp_instr ins[2 * DP_MAX_INSTR];
    int n_ins;                  /* value id of ins[i]: DP_N_IN + i */
    int out[DP_MAX_OUT], n_out;
    unsigned mask[DP_MAX_VALS];
    double mag[DP_MAX_VALS], err[DP_MAX_VALS];
    bool uses_w;
} dp_prog;

typedef enum dp_kind {
    DP_VALUES,      /* any op of the dtype */
    DP_GRAD,        /* differentiable ops only, small shapes, no control flow */
    DP_GRAD_CF,     /* as DP_GRAD with at least one vf_cond and one vf_while_loop */
    DP_HVP,         /* smooth differentiable ops only (second order by finite differences) */
} dp_kind;

void dp_generate(dp_prog *p, uint64_t seed, vf_dtype dtype, dp_kind kind);
/* Whether p computes in a float dtype (f32, f16) rather than i32. */
static inline bool dp_is_float(const dp_prog *p) { return p->dt != VF_I32; }
void dp_print(const dp_prog *p);
/* The shape of value v (its mask applied to the base shape). */
int dp_shape(const dp_prog *p, int v, int64_t *shape);
/* Input i's shape (x0, x1, W, mask, labels). */
int dp_in_shape(const dp_prog *p, int i, int64_t *shape);

/* The reference: outputs out[n_out] from inputs in[DP_N_IN] (dt, caller frees). */
void dp_ref(const dp_prog *p, dt *const *in, dt **out);

/* The program through the public API on ctx (eager or traced): in[DP_N_IN]
   -> out[n_out]; NULL result with the context's status on failure. */
vf_status dp_build(vf_context *ctx, const dp_prog *p, vf_tensor *const *in, vf_tensor **out);

#endif
