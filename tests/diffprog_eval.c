/* The two interpreters of random tensor programs (diffprog.h): the double
 * reference over refops.c (dp_ref) and the public API on any context,
 * eager or inside a traced body, with or without tapes (dp_build). The
 * generator: diffprog.c. */
#include "diffprog.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the double reference ------------------------------------------------ */

static dt *scalar(double x)
{
    dt *s = dt_new(0, NULL);
    s->v[0] = x;
    return s;
}

/* y = f(x, c) for a constant c, freeing x */
static dt *bin_c(db_op o, dt *x, double c)
{
    dt *s = scalar(c), *y = dt_binary(o, x, s);
    dt_free(s);
    dt_free(x);
    return y;
}
static dt *un(du_op o, dt *x)
{
    dt *y = dt_unary(o, x);
    dt_free(x);
    return y;
}
static dt *sq_plus(const dt *a, double c) { return bin_c(DB_ADD, dt_binary(DB_MUL, a, a), c); }

static dt *ref_reshape_keep(const dp_prog *p, dt *x, unsigned mask)
{
    int64_t s[DT_MAX_RANK];
    for (int i = 0; i < p->rank; i++) s[i] = (mask >> i) & 1 ? p->dim[i] : 1;
    dt *y = dt_reshape(x, p->rank, s);
    dt_free(x);
    return y;
}

static dt *ref_clamp(dt *x) { return bin_c(DB_MIN, bin_c(DB_MAX, x, -1000), 1000); }

static dt *ref_instr(const dp_prog *p, const dp_instr *in, dt *const *v, unsigned out_mask)
{
    const dt *a = v[in->a], *b = in->b >= 0 ? v[in->b] : NULL;
    bool fl = dp_is_float(p);
    switch (in->o) {
    case P_NEG: return dt_unary(DU_NEG, a);
    case P_ABS: return dt_unary(DU_ABS, a);
    case P_RELU: return dt_unary(DU_RELU, a);
    case P_TANH: return dt_unary(DU_TANH, a);
    case P_SIGMOID: return dt_unary(DU_SIGMOID, a);
    case P_SIN: return dt_unary(DU_SIN, a);
    case P_COS: return dt_unary(DU_COS, a);
    case P_GELU: return dt_unary(DU_GELU, a);
    case P_EXPT: return un(DU_EXP, dt_unary(DU_TANH, a));
    case P_SQRTS: return un(DU_SQRT, sq_plus(a, 0.25));
    case P_RSQRTS: return un(DU_RSQRT, sq_plus(a, 0.25));
    case P_LOGS: return un(DU_LOG, sq_plus(a, 1));
    case P_SQUARE: return dt_binary(DB_MUL, a, a);
    case P_SOFTPLUS: return dt_unary(DU_SOFTPLUS, a);
    case P_ERF: return dt_unary(DU_ERF, a);
    case P_ADD: return dt_binary(DB_ADD, a, b);
    case P_SUB: return dt_binary(DB_SUB, a, b);
    case P_MUL: return dt_binary(DB_MUL, a, b);
    case P_DIVS: {
        dt *den = fl ? sq_plus(b, 1) : bin_c(DB_ADD, dt_unary(DU_ABS, b), 1);
        dt *y = dt_binary(fl ? DB_DIV : DB_IDIV, a, den);
        dt_free(den);
        return y;
    }
    case P_POWS: {
        dt *base = sq_plus(a, 0.5), *ex = dt_unary(DU_TANH, b), *y = dt_binary(DB_POW, base, ex);
        dt_free(base), dt_free(ex);
        return y;
    }
    case P_MAX: return dt_binary(DB_MAX, a, b);
    case P_MIN: return dt_binary(DB_MIN, a, b);
    case P_CMP: {
        static const db_op ops[] = {DB_GREATER, DB_LESS, DB_LESS, DB_GREATER, DB_EQUAL, DB_NOT_EQUAL};
        /* greater_equal(a, b) = !less(a, b) and less_equal = !greater: no NaNs here */
        dt *c = dt_binary(ops[in->k], a, b);
        if (in->k == 1 || in->k == 3) c = bin_c(DB_EQUAL, c, 0);
        dt *y = dt_where(c, a, b);
        dt_free(c);
        return y;
    }
    case P_MASKW: return dt_where(v[3], a, b);
    case P_RED: {
        dt *r = dt_reduce((dr_op)in->k, a, in->axis, in->flag);
        return ref_reshape_keep(p, r, out_mask);
    }
    case P_SOFTMAX: return dt_softmax(a, in->axis, false);
    case P_LOGSOFTMAX: return dt_softmax(a, in->axis, true);
    case P_LNORM: {
        int last = p->rank - 1;
        dt *mu = dt_reduce(DR_MEAN, a, last, true), *d = dt_binary(DB_SUB, a, mu);
        dt *d2 = dt_binary(DB_MUL, d, d), *var = dt_reduce(DR_MEAN, d2, last, true);
        dt_free(mu), dt_free(d2);
        dt *r = un(DU_RSQRT, bin_c(DB_ADD, var, 0.1)), *y = dt_binary(DB_MUL, d, r);
        dt_free(d), dt_free(r);
        return y;
    }
    case P_NORM: {
        dt *n = bin_c(DB_ADD, dt_norm(a), 1), *y = dt_binary(DB_DIV, a, n);
        dt_free(n);
        return y;
    }
    case P_XENT: {
        /* -log_softmax(a)[label] along the last axis */
        dt *ls = dt_softmax(a, p->rank - 1, true);
        int64_t c = p->dim[p->rank - 1], rows = ls->n / c;
        int64_t s[DT_MAX_RANK];
        for (int i = 0; i < p->rank; i++) s[i] = i == p->rank - 1 ? 1 : p->dim[i];
        dt *y = dt_new(p->rank, s);
        for (int64_t r = 0; r < rows; r++) y->v[r] = -ls->v[r * c + (int64_t)v[4]->v[r]];
        dt_free(ls);
        return y;
    }
    case P_MATMUL: {
        double d = (double)p->dim[p->rank - 1];
        return bin_c(DB_MUL, dt_matmul(a, v[2], in->flag), d ? 1 / d : 1);
    }
    case P_EPI: {
        double d = (double)p->dim[p->rank - 1];
        dt *m = bin_c(DB_MUL, dt_matmul(a, v[2], false), d ? 1 / d : 1), *y = dt_binary(DB_ADD, m, b);
        dt_free(m);
        return un(DU_GELU, y);
    }
    case P_TRANSPOSE: return dt_unary(fl ? DU_SIGMOID : DU_NEG, a); /* a transpose and its inverse */
    case P_RESHAPE: return dt_unary(fl ? DU_TANH : DU_NEG, a);
    case P_ARGMAX: return ref_reshape_keep(p, dt_argmax(a, in->axis), out_mask);
    case P_CAST_F16: return dt_unary(DU_ROUND_F16, a);
    case P_CAST_INT: /* i32 programs: through f32 and back, exact */
        return fl ? bin_c(DB_MUL, un(DU_TRUNC_I32, bin_c(DB_MUL, dt_copy(a), 8)), 0.125) : dt_copy(a);
    case P_CAST_BOOL: return dt_unary(DU_NONZERO, a);
    case P_COND: {
        /* count(x0 > t) > numel / 2 (integer division) */
        double t = fl ? (in->k ? 0.25 : -0.25) : (in->k ? 0 : -1), cnt = 0;
        for (int64_t i = 0; i < v[0]->n; i++) cnt += v[0]->v[i] > t;
        bool pred = cnt > (double)(v[0]->n / 2);
        if (fl) return pred ? dt_unary(DU_TANH, a) : bin_c(DB_SUB, bin_c(DB_MUL, dt_unary(DU_SIGMOID, a), 2), 1);
        return pred ? bin_c(DB_ADD, dt_copy(a), 1) : dt_unary(DU_NEG, a);
    }
    case P_WHILE: {
        dt *x = dt_copy(a);
        for (int i = 0; i < in->k; i++)
            x = fl ? un(DU_TANH, bin_c(DB_MUL, x, 1.5)) : bin_c(DB_ADD, un(DU_NEG, x), 1);
        return x;
    }
    case P_CAP: return fl ? dt_unary(DU_TANH, a) : ref_clamp(dt_copy(a));
    default: return NULL;
    }
}

void dp_ref(const dp_prog *p, dt *const *in, dt **out)
{
    dt *v[DP_MAX_VALS] = {0};
    for (int i = 0; i < DP_N_IN; i++) v[i] = in[i];
    for (int i = 0; i < p->n_ins; i++) {
        int id = DP_N_IN + i;
        /* nothing is rounded: the error bound carries the f32/f16 rounding */
        v[id] = ref_instr(p, &p->ins[i], v, p->mask[id]);
    }
    for (int k = 0; k < p->n_out; k++) out[k] = dt_copy(v[p->out[k]]);
    for (int i = DP_N_IN; i < DP_N_IN + p->n_ins; i++) dt_free(v[i]);
}

/* ---- the public API ------------------------------------------------------ */

static vf_tensor *cst(vf_context *ctx, vf_dtype t, double x) { return vf_fill(ctx, t, 0, NULL, x); }

static vf_tensor *sq_plus_t(vf_context *ctx, vf_tensor *a, double c)
{
    return vf_add(ctx, vf_mul(ctx, a, a), cst(ctx, vf_tensor_dtype(a), c));
}

static vf_tensor *reshape_keep(vf_context *ctx, const dp_prog *p, vf_tensor *x, unsigned mask, bool infer)
{
    int64_t s[DT_MAX_RANK];
    for (int i = 0; i < p->rank; i++) s[i] = (mask >> i) & 1 ? p->dim[i] : 1;
    if (infer && p->rank > 0) {
        int64_t n = 1;
        for (int i = 0; i < p->rank; i++) n *= s[i];
        if (n > 0) s[0] = -1; /* infer the first dim (never from an empty tensor: ambiguous) */
    }
    return x ? vf_reshape(ctx, x, p->rank, s) : NULL;
}

typedef struct cf_user {
    vf_dtype dt;
    int k;
} cf_user;

static vf_status then_fn(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const cf_user *u = user;
    out[0] = u->dt == VF_I32 ? vf_add(ctx, in[0], cst(ctx, VF_I32, 1)) : vf_tanh(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status else_fn(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const cf_user *u = user;
    out[0] = u->dt == VF_I32 ? vf_neg(ctx, in[0])
                             : vf_sub(ctx, vf_mul(ctx, vf_sigmoid(ctx, in[0]), cst(ctx, u->dt, 2)), cst(ctx, u->dt, 1));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status loop_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const cf_user *u = user;
    out[0] = vf_less(ctx, in[0], cst(ctx, VF_I32, u->k));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status loop_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const cf_user *u = user;
    out[0] = vf_add(ctx, in[0], cst(ctx, VF_I32, 1));
    out[1] = u->dt == VF_I32 ? vf_add(ctx, vf_neg(ctx, in[1]), cst(ctx, VF_I32, 1))
                             : vf_tanh(ctx, vf_mul(ctx, in[1], cst(ctx, u->dt, 1.5)));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

static vf_tensor *api_instr(vf_context *ctx, const dp_prog *p, const dp_instr *in, vf_tensor *const *v,
                            unsigned out_mask)
{
    vf_tensor *a = v[in->a], *b = in->b >= 0 ? v[in->b] : NULL;
    vf_dtype vd = p->dt;
    bool fl = dp_is_float(p);
    switch (in->o) {
    case P_NEG: return vf_neg(ctx, a);
    case P_ABS: return vf_abs(ctx, a);
    case P_RELU: return vf_relu(ctx, a);
    case P_TANH: return vf_tanh(ctx, a);
    case P_SIGMOID: return vf_sigmoid(ctx, a);
    case P_SIN: return vf_sin(ctx, a);
    case P_COS: return vf_cos(ctx, a);
    case P_GELU: return vf_gelu(ctx, a);
    case P_EXPT: return vf_exp(ctx, vf_tanh(ctx, a));
    case P_SQRTS: return vf_sqrt(ctx, sq_plus_t(ctx, a, 0.25));
    case P_RSQRTS: return vf_rsqrt(ctx, sq_plus_t(ctx, a, 0.25));
    case P_LOGS: return vf_log(ctx, sq_plus_t(ctx, a, 1));
    case P_SQUARE: return vf_square(ctx, a);
    case P_SOFTPLUS: return vf_softplus(ctx, a);
    case P_ERF: return vf_erf(ctx, a);
    case P_ADD: return vf_add(ctx, a, b);
    case P_SUB: return vf_sub(ctx, a, b);
    case P_MUL: return vf_mul(ctx, a, b);
    case P_DIVS:
        return vf_div(ctx, a, fl ? sq_plus_t(ctx, b, 1) : vf_add(ctx, vf_abs(ctx, b), cst(ctx, vd, 1)));
    case P_POWS: return vf_pow(ctx, sq_plus_t(ctx, a, 0.5), vf_tanh(ctx, b));
    case P_MAX: return vf_maximum(ctx, a, b);
    case P_MIN: return vf_minimum(ctx, a, b);
    case P_CMP: {
        vf_tensor *(*const cmp[])(vf_context *, vf_tensor *, vf_tensor *) = {
            vf_greater, vf_greater_equal, vf_less, vf_less_equal, vf_equal, vf_not_equal};
        return vf_where(ctx, cmp[in->k](ctx, a, b), a, b);
    }
    case P_MASKW: {
        /* the mask as is, compared with true, or cast to the dtype and back */
        vf_tensor *m = v[3];
        if (in->k == 1) m = vf_equal(ctx, m, vf_fill(ctx, VF_BOOL, 0, NULL, 1));
        if (in->k == 2) m = vf_cast(ctx, vf_cast(ctx, m, vd), VF_BOOL);
        return vf_where(ctx, m, a, b);
    }
    case P_RED: {
        vf_tensor *(*const red[])(vf_context *, vf_tensor *, int, const int *, bool) = {
            vf_reduce_sum, vf_reduce_mean, vf_reduce_max, vf_reduce_min};
        int ax = in->axis;
        vf_tensor *r = red[in->k](ctx, a, ax < 0 ? 0 : 1, ax < 0 ? NULL : &ax, in->flag);
        return in->flag ? r : reshape_keep(ctx, p, r, out_mask, false);
    }
    case P_SOFTMAX: return vf_softmax(ctx, a, in->axis - p->rank); /* a negative axis */
    case P_LOGSOFTMAX: return vf_log_softmax(ctx, a, in->axis);
    case P_LNORM: {
        int last = -1;
        vf_tensor *d = vf_sub(ctx, a, vf_reduce_mean(ctx, a, 1, &last, true));
        vf_tensor *var = vf_reduce_mean(ctx, vf_mul(ctx, d, d), 1, &last, true);
        return vf_mul(ctx, d, vf_rsqrt(ctx, vf_add(ctx, var, cst(ctx, vd, 0.1))));
    }
    case P_NORM: return vf_div(ctx, a, vf_add(ctx, vf_norm(ctx, a), cst(ctx, vd, 1)));
    case P_XENT: return reshape_keep(ctx, p, vf_sparse_softmax_cross_entropy(ctx, v[4], a), out_mask, false);
    case P_MATMUL: case P_EPI: {
        double d = (double)p->dim[p->rank - 1];
        bool tb = in->o == P_MATMUL && in->flag;
        vf_tensor *m = vf_mul(ctx, tb ? vf_matmul_ex(ctx, a, v[2], false, true) : vf_matmul(ctx, a, v[2]),
                              cst(ctx, vd, d ? 1 / d : 1));
        return in->o == P_MATMUL ? m : vf_gelu(ctx, vf_add(ctx, m, b));
    }
    case P_TRANSPOSE: {
        int inv[DT_MAX_RANK];
        for (int k = 0; k < p->rank; k++) inv[in->perm[k]] = k;
        vf_tensor *t = vf_transpose(ctx, a, in->flag ? NULL : in->perm);
        t = fl ? vf_sigmoid(ctx, t) : vf_neg(ctx, t);
        return vf_transpose(ctx, t, in->flag ? NULL : inv);
    }
    case P_RESHAPE: {
        int64_t n = vf_tensor_numel(a);
        vf_tensor *f = vf_reshape(ctx, a, 1, (int64_t[]){in->flag && n > 0 ? -1 : n});
        f = fl ? vf_tanh(ctx, f) : vf_neg(ctx, f);
        return reshape_keep(ctx, p, f, out_mask, in->flag);
    }
    case P_ARGMAX: return reshape_keep(ctx, p, vf_cast(ctx, vf_argmax(ctx, a, in->axis), vd), out_mask, false);
    case P_CAST_F16: return vf_cast(ctx, vf_cast(ctx, a, VF_F16), vd);
    case P_CAST_INT:
        if (!fl) return vf_cast(ctx, vf_cast(ctx, a, VF_F32), VF_I32);
        return vf_mul(ctx, vf_cast(ctx, vf_cast(ctx, vf_mul(ctx, a, cst(ctx, vd, 8)), VF_I32), vd), cst(ctx, vd, 0.125));
    case P_CAST_BOOL: return vf_cast(ctx, vf_cast(ctx, a, VF_BOOL), vd);
    case P_COND: {
        double t = fl ? (in->k ? 0.25 : -0.25) : (in->k ? 0 : -1);
        vf_tensor *cnt = vf_reduce_sum(ctx, vf_cast(ctx, vf_greater(ctx, v[0], cst(ctx, vd, t)), VF_I32), 0, NULL, false);
        vf_tensor *pred = vf_greater(ctx, cnt, cst(ctx, VF_I32, (double)(vf_tensor_numel(v[0]) / 2)));
        if (!pred) return NULL;
        cf_user u = {vd, 0};
        vf_tensor *out = NULL;
        if (vf_cond(ctx, pred, then_fn, else_fn, 1, &a, 1, &out, &u) != VF_OK) return NULL;
        return out;
    }
    case P_WHILE: {
        cf_user u = {vd, in->k};
        vf_tensor *vars[2] = {cst(ctx, VF_I32, 0), a};
        if (!vars[0] || vf_while_loop(ctx, loop_cond, loop_body, 2, vars, 10, &u) != VF_OK) return NULL;
        return vars[1];
    }
    case P_CAP:
        return fl ? vf_tanh(ctx, a) : vf_minimum(ctx, vf_maximum(ctx, a, cst(ctx, vd, -1000)), cst(ctx, vd, 1000));
    default: return NULL;
    }
}

vf_status dp_build(vf_context *ctx, const dp_prog *p, vf_tensor *const *in, vf_tensor **out)
{
    vf_tensor *v[DP_MAX_VALS] = {0};
    for (int i = 0; i < DP_N_IN; i++) v[i] = in[i];
    for (int i = 0; i < p->n_ins; i++) {
        int id = DP_N_IN + i;
        v[id] = api_instr(ctx, p, &p->ins[i], v, p->mask[id]);
        if (!v[id]) {
            vf_status s = vf_status_get(ctx);
            return s != VF_OK ? s : VF_ERROR_INVALID_ARGUMENT;
        }
    }
    for (int k = 0; k < p->n_out; k++) out[k] = v[p->out[k]];
    return VF_OK;
}
