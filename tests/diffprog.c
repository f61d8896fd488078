/* Random tensor programs (diffprog.h): the seeded generator with each
 * value's mask, magnitude and forward error bound, and the program's
 * printout. The two interpreters that run a program: diffprog_eval.c. */
#include "diffprog.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char *const dp_op_name[] = {
    "neg", "abs", "relu", "tanh", "sigmoid", "sin", "cos", "gelu", "exp(tanh a)", "sqrt(a*a+0.25)",
    "rsqrt(a*a+0.25)", "log(a*a+1)", "square", "softplus", "erf",
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
    bool f16 = p->dt == VF_F16, fl = dp_is_float(p);
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
    case P_CAP: if (dp_is_float(p)) m = ma < 1 ? ma : 1, e = ea + tr; else m = ma < 1000 ? ma : 1000; break;
    case P_SIGMOID: m = 1, e = 0.25 * ea + tr; break;
    case P_GELU: m = ma + 0.2, e = 1.13 * ea + tr * (1 + ma); break;
    case P_EXPT: m = 2.72, e = 2.72 * (ea + 2 * tr); break;
    case P_SQRTS: m = sqrt(ma * ma + 0.25), e = ea + 2 * tr * (1 + m); break;
    case P_RSQRTS: m = 2, e = 8 * ma * ea + 2 * tr * 4; break;
    case P_LOGS: m = log(ma * ma + 1), e = 2 * ma * ea + tr * (2 + m); break;
    case P_SQUARE: m = ma * ma, e = ea * (2 * ma + ea) + eps * m; break;
    case P_SOFTPLUS: m = ma + 0.7, e = ea + tr * (1 + m); break;   /* Lipschitz 1 */
    case P_ERF: m = ma < 1 ? ma : 1, e = 1.13 * ea + tr; break;    /* Lipschitz 2/sqrt(pi) */
    case P_ADD: case P_SUB: m = ma + mb, e = ea + eb + eps * m; break;
    case P_MUL: m = ma * mb, e = ma * eb + mb * ea + eps * m; break;
    case P_DIVS:
        if (dp_is_float(p)) m = ma, e = ea + 2 * ma * mb * eb + 3 * eps * m + (f16 ? 2e-3 * ma : 0);
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
    case P_TRANSPOSE: if (dp_is_float(p)) m = 1, e = 0.25 * ea + tr; break;
    case P_RESHAPE: if (dp_is_float(p)) m = ma < 1 ? ma : 1, e = ea + tr; break;
    case P_ARGMAX: m = (double)len, e = 0; mk = p->mask[a] & ~(1u << in.axis); break;
    case P_CAST_F16: e = ea + 1e-3 * ma; break;
    case P_CAST_INT: m = fl ? ma + 1 : ma, e = 0; break;
    case P_CAST_BOOL: m = 1, e = 0; break;
    case P_COND:
        if (dp_is_float(p)) m = ma < 1 ? ma : 1, e = ea + tr;
        else m = ma + 1;
        break;
    case P_WHILE:
        if (dp_is_float(p)) {
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
    bool fl = dp_is_float(p);
    switch (o) {
    case P_TANH: case P_SIGMOID: case P_SIN: case P_COS: case P_GELU: case P_EXPT: case P_SQRTS: case P_RSQRTS:
    case P_LOGS: case P_SOFTPLUS: case P_ERF: case P_POWS: case P_SOFTMAX: case P_LOGSOFTMAX: case P_LNORM: case P_NORM: case P_XENT:
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
        if (!op_allowed(p, o, kind)) o = dp_is_float(p) ? P_TANH : P_NEG;
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
            in.k = rint_(&s, dp_is_float(p) ? 4 : 3);
            if (!dp_is_float(p) && in.k == DR_MEAN) in.k = DR_MIN;
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
        if (p->mag[v] > (dp_is_float(p) ? 4 : 1000)) emit(p, (dp_instr){.o = P_CAP, .a = v, .b = -1});
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
