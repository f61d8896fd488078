/* Random tensor programs (diffprog.h): generator, error bounds, the double
 * reference interpreter and the public-API interpreter. */
#include "diffprog.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const dp_op_name[] = {
    "neg", "abs", "relu", "tanh", "sigmoid", "sin", "cos", "gelu", "exp(tanh a)", "sqrt(a*a+0.25)",
    "rsqrt(a*a+0.25)", "log(a*a+1)", "square",
    "add", "sub", "mul", "a/(b*b+1)", "pow(a*a+0.5, tanh b)", "maximum", "minimum", "where(cmp(a,b),a,b)",
    "where(mask [== true | cast twice],a,b)",
    "reduce", "softmax", "log_softmax", "layer_norm(last)", "a/(norm(a)+1)", "sparse_xent(labels,a)",
    "matmul(a,W)/d", "gelu(matmul(a,W)/d+b)",
    "transpose,f,transpose back", "reshape flat,f,reshape back",
    "cast(argmax(a))", "cast(cast(a,f16))", "cast(cast(8a,i32))/8", "cast(cast(a,bool))",
    "cond(count(x0>t)>n/2)", "while(i<k)",
    "", "cap"};

static const char *const red_name[] = {"sum", "mean", "max", "min"};
static const char *const cmp_name[] = {"greater", "greater_equal", "less", "less_equal", "equal", "not_equal"};

/* ---- generator ---------------------------------------------------------- */

static uint64_t rnext(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static int rint_(uint64_t *s, int n) { return (int)(rnext(s) % (uint64_t)n); }

static unsigned full_mask(const dp_prog *p) { return (1u << p->rank) - 1; }

int dp_shape(const dp_prog *p, int v, int64_t *shape)
{
    for (int i = 0; i < p->rank; i++) shape[i] = (p->mask[v] >> i) & 1 ? p->dim[i] : 1;
    return p->rank;
}

int dp_in_shape(const dp_prog *p, int i, int64_t *shape)
{
    int64_t d = p->dim[p->rank - 1];
    switch (i) {
    case 0: case 1: return dp_shape(p, i, shape);
    case 2: shape[0] = shape[1] = p->uses_w ? d : 1; return 2;
    case 3:
        for (int k = 0; k < p->rank; k++) shape[k] = (p->bool_mask >> k) & 1 ? p->dim[k] : 1;
        return p->rank;
    default:
        for (int k = 0; k < p->rank - 1; k++) shape[k] = p->dim[k];
        return p->rank - 1;
    }
}

/* Elements along axis of value v (axis < 0: all of them). */
static int64_t axis_len(const dp_prog *p, int v, int axis)
{
    int64_t s[DT_MAX_RANK], n = 1;
    dp_shape(p, v, s);
    if (axis >= 0) return s[axis];
    for (int i = 0; i < p->rank; i++) n *= s[i];
    return n;
}

static bool is_float(const dp_prog *p) { return p->dt != VF_I32; }

/* Appends an instruction, its value's mask, magnitude and error bound (a
   forward error analysis as in test_fusion_random.c: the operands' errors
   through the op's Lipschitz constant on the bounded range, plus its own
   rounding: f32 or f16 per stored result). */
static int emit(dp_prog *p, dp_instr in)
{
    int v = DP_N_IN + p->n_ins;
    p->ins[p->n_ins++] = in;
    int a = in.a, b = in.b;
    double ma = p->mag[a], ea = p->err[a], mb = b >= 0 ? p->mag[b] : 0, eb = b >= 0 ? p->err[b] : 0;
    bool f16 = p->dt == VF_F16, fl = is_float(p);
    double eps = f16 ? 1e-3 : 1.2e-7;          /* one rounding of a stored result, relative */
    double tr = f16 ? 2e-3 : 3e-6;             /* a transcendental's own error at |x| <= ~1 */
    unsigned mk = p->mask[a] | (b >= 0 ? p->mask[b] : 0);
    double m = ma, e = ea;
    int64_t len = axis_len(p, a, in.axis);
    double d = (double)p->dim[p->rank - 1];
    switch (in.o) {
    case P_NEG: case P_ABS: case P_RELU: break;
    case P_TANH: case P_SIN: m = ma < 1 ? ma : 1, e = ea + tr; break;
    case P_COS: m = 1, e = ea + tr; break;
    case P_CAP: if (is_float(p)) m = ma < 1 ? ma : 1, e = ea + tr; else m = ma < 1000 ? ma : 1000; break;
    case P_SIGMOID: m = 1, e = 0.25 * ea + tr; break;
    case P_GELU: m = ma + 0.2, e = 1.13 * ea + tr * (1 + ma); break;
    case P_EXPT: m = 2.72, e = 2.72 * (ea + 2 * tr); break;
    case P_SQRTS: m = sqrt(ma * ma + 0.25), e = ea + 2 * tr * (1 + m); break;
    case P_RSQRTS: m = 2, e = 8 * ma * ea + 2 * tr * 4; break;
    case P_LOGS: m = log(ma * ma + 1), e = 2 * ma * ea + tr * (2 + m); break;
    case P_SQUARE: m = ma * ma, e = ea * (2 * ma + ea) + eps * m; break;
    case P_ADD: case P_SUB: m = ma + mb, e = ea + eb + eps * m; break;
    case P_MUL: m = ma * mb, e = ma * eb + mb * ea + eps * m; break;
    case P_DIVS:
        if (is_float(p)) m = ma, e = ea + 2 * ma * mb * eb + 3 * eps * m + (f16 ? 2e-3 * ma : 0);
        else m = ma;
        break;
    case P_POWS: m = pow(ma * ma + 0.5, 1) + 2, e = (m * (2 * ma * ea + eb) + tr) * 4 * (1 + log(ma * ma + 1)); break;
    case P_MAX: case P_MIN: case P_CMP: case P_MASKW:
        m = ma > mb ? ma : mb, e = ea > eb ? ea : eb;
        if (in.o == P_MASKW) mk |= p->bool_mask; /* the mask broadcasts too */
        break;
    case P_RED:
        if (in.k == DR_SUM) m = ma * (double)len, e = (double)len * ea + (8e-6 * sqrt((double)len) + 1e-5 + eps) * m;
        else if (in.k == DR_MEAN) e = ea + (8e-6 * sqrt((double)len) + 1e-5 + eps) * ma;
        mk = in.axis < 0 ? 0 : p->mask[a] & ~(1u << in.axis);
        break;
    case P_SOFTMAX: m = 1, e = 2 * ea + 1e-6 + 1e-5 + 2 * eps; break;
    case P_LOGSOFTMAX: m = 2 * ma + log((double)len + 1), e = 2 * ea + 1e-5 * (1 + m) + 2 * eps * m; break;
    case P_LNORM: m = sqrt(d + 1) * 2 + 1, e = (ea * 2 * sqrt(10.0) * (1 + ma * ma) + 1e-5 + 4 * eps) * (1 + m); break;
    case P_NORM: m = ma < 1 ? ma : 1, e = 2 * ea + 1e-5 + 2 * eps; break;
    case P_XENT: m = 2 * ma + log(d + 1), e = 2 * ea + 1e-5 * (1 + m) + 2 * eps * m; mk &= ~(1u << (p->rank - 1)); break;
    case P_MATMUL: e = ea + (1.6e-4 * sqrt(d) + 1e-5 + (f16 ? 1e-2 : 0)) * ma; mk |= 1u << (p->rank - 1); break;
    case P_EPI:
        m = ma + mb + 0.2;
        e = 1.13 * (ea + eb + (1.6e-4 * sqrt(d) + 1e-5 + (f16 ? 1e-2 : 0)) * ma) + tr * (1 + m);
        mk |= 1u << (p->rank - 1);
        break;
    case P_TRANSPOSE: if (is_float(p)) m = 1, e = 0.25 * ea + tr; break;
    case P_RESHAPE: if (is_float(p)) m = ma < 1 ? ma : 1, e = ea + tr; break;
    case P_ARGMAX: m = (double)len, e = 0; mk = p->mask[a] & ~(1u << in.axis); break;
    case P_CAST_F16: e = ea + 1e-3 * ma; break;
    case P_CAST_INT: m = fl ? ma + 1 : ma, e = 0; break;
    case P_CAST_BOOL: m = 1, e = 0; break;
    case P_COND:
        if (is_float(p)) m = ma < 1 ? ma : 1, e = ea + tr;
        else m = ma + 1;
        break;
    case P_WHILE:
        if (is_float(p)) {
            for (int i = 0; i < in.k; i++) m = 1, e = 1.5 * e + tr;
        } else m = ma + in.k;
        break;
    default: break;
    }
    if (f16 && in.o != P_ARGMAX && in.o != P_CAST_INT && in.o != P_CAST_BOOL) e += 3 * eps * m;
    if (!fl) e = 0; /* integer results are exact */
    p->mask[v] = mk;
    p->mag[v] = m;
    p->err[v] = e;
    return v;
}

/* An operand: one of the value ids other than W, mask and labels (2..4);
   mostly one of the last three (deep chains). */
static int pick(uint64_t *s, const dp_prog *p, bool recent)
{
    int nv = p->n_ins; /* instruction values */
    if (recent && nv > 0) {
        int lo = nv > 3 ? nv - 3 : 0;
        return DP_N_IN + lo + rint_(s, nv - lo);
    }
    int k = rint_(s, nv + 2);
    return k < 2 ? k : DP_N_IN + k - 2;
}

static bool op_allowed(const dp_prog *p, dp_op o, dp_kind kind)
{
    bool fl = is_float(p);
    switch (o) {
    case P_TANH: case P_SIGMOID: case P_SIN: case P_COS: case P_GELU: case P_EXPT: case P_SQRTS: case P_RSQRTS:
    case P_LOGS: case P_POWS: case P_SOFTMAX: case P_LOGSOFTMAX: case P_LNORM: case P_NORM: case P_XENT:
    case P_MATMUL: case P_EPI:
        return fl;
    case P_ABS: case P_RELU: case P_MAX: case P_MIN: case P_CMP:
        return kind != DP_HVP;
    case P_ARGMAX: case P_CAST_INT: case P_CAST_BOOL: return kind == DP_VALUES;
    case P_CAST_F16: return kind == DP_VALUES && p->dt == VF_F32;
    case P_COND: case P_WHILE: return kind == DP_VALUES || kind == DP_GRAD_CF;
    default: return true;
    }
}

static const int64_t dims_big[] = {0, 1, 2, 3, 5, 7, 8, 13, 31, 33, 64, 97, 130};
static const int64_t dims_small[] = {0, 1, 2, 3, 4, 5, 7};

void dp_generate(dp_prog *p, uint64_t seed, vf_dtype dtype, dp_kind kind)
{
    memset(p, 0, sizeof *p);
    p->seed = seed;
    p->dt = dtype;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 0x51ED2701ull + (uint64_t)dtype * 7919 + (uint64_t)kind * 104729;
    for (int i = 0; i < 4; i++) rnext(&s);
    bool small = kind != DP_VALUES;
    p->rank = 1 + rint_(&s, 3);
    for (;;) {
        int64_t n = 1;
        for (int i = 0; i < p->rank; i++) {
            p->dim[i] = small ? dims_small[rint_(&s, 7)] : dims_big[rint_(&s, 13)];
            if (p->dim[i] == 0 && rint_(&s, 2)) p->dim[i] = 3; /* empty dims: about 1 in 20 */
            n *= p->dim[i];
        }
        if (n <= (small ? 96 : 8192)) break;
    }
    /* every tenth seed (3, 13, ...) has an empty dim, so every time budget reaches some */
    if (seed % 10 == 3) p->dim[rint_(&s, p->rank)] = 0;
    /* sometimes one long dim: past a (test-overridden) dispatch limit */
    if (!small && p->rank <= 2 && rint_(&s, 6) == 0) p->dim[0] = p->rank == 1 ? 40000 + rint_(&s, 3000) : 100 + rint_(&s, 50);
    unsigned full = full_mask(p);
    p->in1_mask = (unsigned)rint_(&s, (int)full + 1);
    p->bool_mask = (unsigned)rint_(&s, (int)full + 1);
    p->mask[0] = full, p->mask[1] = p->in1_mask;
    p->mag[0] = p->mag[1] = dtype == VF_I32 ? 3 : 2;
    p->mask[2] = 3, p->mag[2] = 1;
    int n = 3 + rint_(&s, small ? 10 : 18);
    bool need_cond = kind == DP_GRAD_CF, need_while = kind == DP_GRAD_CF;
    for (int i = 0; i < n || need_cond || need_while; i++) {
        dp_instr in = {.b = -1};
        in.a = pick(&s, p, rint_(&s, 3) != 0);
        int b = pick(&s, p, rint_(&s, 2) != 0);
        dp_op o = (dp_op)rint_(&s, P_N_OPS);
        if (need_cond && i >= n) o = P_COND;
        else if (need_while && i >= n) o = P_WHILE;
        if (!op_allowed(p, o, kind)) o = is_float(p) ? P_TANH : P_NEG;
        unsigned ma = p->mask[in.a];
        bool long_last = p->dim[p->rank - 1] > 256; /* W [d, d] would be huge */
        if ((o == P_MATMUL || o == P_EPI) && (!((ma >> (p->rank - 1)) & 1) || long_last)) o = P_SIN;
        if (o == P_XENT && (ma != full || p->dim[p->rank - 1] == 0 || long_last)) o = P_GELU;
        if (o == P_TRANSPOSE && p->rank < 2) o = P_RESHAPE;
        if (o >= P_ARGMAX && o <= P_CAST_BOOL && o != P_CAST_F16) in.a = rint_(&s, 2); /* exact inputs only */
        in.o = o;
        switch (o) {
        case P_ADD: case P_SUB: case P_MUL: case P_DIVS: case P_POWS: case P_MAX: case P_MIN: case P_EPI:
            in.b = b;
            break;
        case P_CMP: in.b = b, in.k = rint_(&s, 6); break;
        case P_MASKW: in.b = b, in.k = rint_(&s, 3); break;
        case P_RED: {
            in.k = rint_(&s, is_float(p) ? 4 : 3);
            if (!is_float(p) && in.k == DR_MEAN) in.k = DR_MIN;
            if (kind == DP_HVP && in.k >= DR_MAX) in.k = DR_SUM;
            in.axis = rint_(&s, p->rank + 1) - 1;
            in.flag = rint_(&s, 2);
            if (axis_len(p, in.a, in.axis) == 0 && in.k != DR_SUM) in.k = DR_SUM; /* mean NaN, max an error */
            break;
        }
        case P_SOFTMAX: case P_LOGSOFTMAX: in.axis = rint_(&s, p->rank); break;
        case P_ARGMAX:
            in.axis = rint_(&s, p->rank);
            if (axis_len(p, in.a, in.axis) == 0) in.o = P_CAST_BOOL; /* argmax of nothing: an error */
            break;
        case P_MATMUL: in.flag = rint_(&s, 2); break;
        case P_TRANSPOSE: {
            in.flag = rint_(&s, 3) == 0;
            for (int k = 0; k < p->rank; k++) in.perm[k] = in.flag ? p->rank - 1 - k : k;
            if (!in.flag)
                while (in.perm[0] == 0 && in.perm[1] == 1 && (p->rank < 3 || in.perm[2] == 2))
                    for (int k = p->rank - 1; k > 0; k--) { /* a random non-identity permutation */
                        int j = rint_(&s, k + 1), t = in.perm[k];
                        in.perm[k] = in.perm[j], in.perm[j] = t;
                    }
            break;
        }
        case P_RESHAPE: in.flag = rint_(&s, 2); break;
        case P_COND: in.k = rint_(&s, 2); need_cond = false; break;
        case P_WHILE: in.k = rint_(&s, 4); need_while = false; break;
        default: break;
        }
        if (in.o == P_MATMUL || in.o == P_EPI) p->uses_w = true;
        int v = emit(p, in);
        if (p->mag[v] > (is_float(p) ? 4 : 1000)) emit(p, (dp_instr){.o = P_CAP, .a = v, .b = -1});
    }
    int last = DP_N_IN + p->n_ins - 1;
    p->out[p->n_out++] = last;
    int extra = rint_(&s, DP_MAX_OUT);
    for (int i = 0; i < extra; i++) {
        int v = DP_N_IN + rint_(&s, p->n_ins);
        bool dup = false;
        for (int j = 0; j < p->n_out; j++) dup = dup || p->out[j] == v;
        if (!dup) p->out[p->n_out++] = v;
    }
}

static void print_mask(const dp_prog *p, unsigned m)
{
    fprintf(stderr, "[");
    for (int i = 0; i < p->rank; i++)
        fprintf(stderr, "%s%lld", i ? ", " : "", (long long)((m >> i) & 1 ? p->dim[i] : 1));
    fprintf(stderr, "]");
}

void dp_print(const dp_prog *p)
{
    fprintf(stderr, "program seed %llu, %s, base shape ", (unsigned long long)p->seed, vf_dtype_name(p->dt));
    print_mask(p, full_mask(p));
    fprintf(stderr, ": v0 x0, v1 x1 ");
    print_mask(p, p->in1_mask);
    fprintf(stderr, ", v2 W [d, d], v3 mask ");
    print_mask(p, p->bool_mask);
    fprintf(stderr, ", v4 labels\n");
    for (int i = 0; i < p->n_ins; i++) {
        const dp_instr *in = &p->ins[i];
        int v = DP_N_IN + i;
        fprintf(stderr, "  v%d ", v);
        print_mask(p, p->mask[v]);
        fprintf(stderr, " = %s", dp_op_name[in->o]);
        if (in->o == P_RED) fprintf(stderr, " %s axis %d keepdims %d", red_name[in->k], in->axis, in->flag);
        if (in->o == P_CMP) fprintf(stderr, " %s", cmp_name[in->k]);
        if (in->o == P_SOFTMAX || in->o == P_LOGSOFTMAX || in->o == P_ARGMAX) fprintf(stderr, " axis %d", in->axis);
        if (in->o == P_WHILE) fprintf(stderr, " k=%d", in->k);
        if (in->o == P_TRANSPOSE)
            fprintf(stderr, " perm %s%d %d %d", in->flag ? "NULL=" : "", in->perm[0], in->perm[1], in->perm[2]);
        fprintf(stderr, "(v%d", in->a);
        if (in->b >= 0) fprintf(stderr, ", v%d", in->b);
        fprintf(stderr, ")   |v| <= %.3g, err <= %.3g\n", p->mag[v], p->err[v]);
    }
    fprintf(stderr, "  outputs:");
    for (int k = 0; k < p->n_out; k++) fprintf(stderr, " v%d", p->out[k]);
    fprintf(stderr, "\n");
}

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
    bool fl = is_float(p);
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
    bool fl = is_float(p);
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
