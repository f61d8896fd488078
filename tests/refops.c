/* Double-precision reference ops (refops.h): straight loops over flat
 * indices decoded by div/mod, no strides shared with the library. */
#include "refops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

dt *dt_new(int rank, const int64_t *shape)
{
    dt *x = calloc(1, sizeof *x);
    if (!x) abort();
    x->rank = rank;
    x->n = 1;
    for (int i = 0; i < rank; i++) x->shape[i] = shape[i], x->n *= shape[i];
    x->v = calloc((size_t)(x->n ? x->n : 1), sizeof(double));
    if (!x->v) abort();
    return x;
}

dt *dt_copy(const dt *x)
{
    dt *y = dt_new(x->rank, x->shape);
    memcpy(y->v, x->v, (size_t)x->n * sizeof(double));
    return y;
}

void dt_free(dt *x)
{
    if (!x) return;
    free(x->v);
    free(x);
}

bool dt_same(const dt *a, const dt *b)
{
    if (a->rank != b->rank || a->n != b->n) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->shape[i] != b->shape[i]) return false;
    for (int64_t i = 0; i < a->n; i++)
        if (!(a->v[i] == b->v[i] || (isnan(a->v[i]) && isnan(b->v[i])))) return false;
    return true;
}

static double round_f16(double x)
{
    if (isnan(x) || isinf(x) || x == 0) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e);                 /* a = m * 2^e, m in [0.5, 1): unbiased exponent e - 1 */
    int q = e - 1 < -14 ? -14 : e - 1;
    double ulp = ldexp(1.0, q - 10);
    double r = nearbyint(a / ulp) * ulp; /* ties to even (default rounding mode) */
    if (r > 65504.0) r = INFINITY;
    return x < 0 ? -r : r;
}

static double trunc_i32(double x)
{
    if (isnan(x)) return 0;
    if (x >= 2147483647.0) return 2147483647.0;
    if (x <= -2147483648.0) return -2147483648.0;
    return trunc(x);
}

static double unary1(du_op o, double x)
{
    switch (o) {
    case DU_NEG: return -x;
    case DU_ABS: return fabs(x);
    case DU_RELU: return x > 0 ? x : 0;
    case DU_TANH: return tanh(x);
    case DU_SIGMOID: return 1 / (1 + exp(-x));
    case DU_SIN: return sin(x);
    case DU_COS: return cos(x);
    case DU_EXP: return exp(x);
    case DU_LOG: return log(x);
    case DU_SQRT: return sqrt(x);
    case DU_RSQRT: return 1 / sqrt(x);
    case DU_GELU: return 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    case DU_SOFTPLUS: return x > 0 ? x + log1p(exp(-x)) : log1p(exp(x));
    case DU_ERF: return erf(x);
    case DU_ROUND_F16: return round_f16(x);
    case DU_TRUNC_I32: return trunc_i32(x);
    case DU_NONZERO: return x != 0;
    }
    return NAN;
}

dt *dt_unary(du_op o, const dt *x)
{
    dt *y = dt_new(x->rank, x->shape);
    for (int64_t i = 0; i < x->n; i++) y->v[i] = unary1(o, x->v[i]);
    return y;
}

static double binary1(db_op o, double a, double b)
{
    switch (o) {
    case DB_ADD: return a + b;
    case DB_SUB: return a - b;
    case DB_MUL: return a * b;
    case DB_DIV: return a / b;
    case DB_IDIV: return b == 0 ? 0 : trunc(a / b);
    case DB_POW: return pow(a, b);
    case DB_MAX: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
    case DB_MIN: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
    case DB_GREATER: return a > b;
    case DB_LESS: return a < b;
    case DB_EQUAL: return a == b;
    case DB_NOT_EQUAL: return a != b;
    }
    return NAN;
}

/* The broadcast shape of a and b into out (rank max); false if they do not broadcast. */
static bool bshape(const dt *a, const dt *b, int *rank, int64_t *shape)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        shape[i] = da == 1 ? db : da;
    }
    *rank = r;
    return true;
}

/* Flat index into x of the element broadcast to flat index f of shape (rank r). */
static int64_t src_index(const dt *x, int64_t f, int r, const int64_t *shape)
{
    int64_t idx = 0, mul = 1;
    for (int i = r - 1; i >= 0; i--) {
        int64_t c = shape[i] ? f % shape[i] : 0;
        f = shape[i] ? f / shape[i] : 0;
        int ix = i - (r - x->rank);
        if (ix < 0) continue;
        if (x->shape[ix] != 1) idx += c * mul;
        mul *= x->shape[ix];
    }
    return idx;
}

dt *dt_binary(db_op o, const dt *a, const dt *b)
{
    int r;
    int64_t shape[DT_MAX_RANK];
    if (!bshape(a, b, &r, shape)) return NULL;
    dt *y = dt_new(r, shape);
    for (int64_t i = 0; i < y->n; i++)
        y->v[i] = binary1(o, a->v[src_index(a, i, r, shape)], b->v[src_index(b, i, r, shape)]);
    return y;
}

dt *dt_where(const dt *c, const dt *a, const dt *b)
{
    int r1, r;
    int64_t s1[DT_MAX_RANK] = {0}, shape[DT_MAX_RANK]; /* all of s1 is copied below */
    if (!bshape(a, b, &r1, s1)) return NULL;
    dt tmp = {.rank = r1};
    memcpy(tmp.shape, s1, sizeof s1);
    if (!bshape(c, &tmp, &r, shape)) return NULL;
    dt *y = dt_new(r, shape);
    for (int64_t i = 0; i < y->n; i++)
        y->v[i] = c->v[src_index(c, i, r, shape)] != 0 ? a->v[src_index(a, i, r, shape)]
                                                          : b->v[src_index(b, i, r, shape)];
    return y;
}

/* x viewed as [outer, len, inner] around axis (all: [1, n, 1]). */
static void split(const dt *x, int axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = 1, *inner = 1, *len = x->n;
    if (axis < 0) return;
    for (int i = 0; i < axis; i++) *outer *= x->shape[i];
    for (int i = axis + 1; i < x->rank; i++) *inner *= x->shape[i];
    *len = x->shape[axis];
}

static dt *reduced_shape(const dt *x, int axis, bool keepdims)
{
    int64_t shape[DT_MAX_RANK];
    int r = 0;
    for (int i = 0; i < x->rank; i++) {
        bool red = axis < 0 || i == axis;
        if (!red) shape[r++] = x->shape[i];
        else if (keepdims) shape[r++] = 1;
    }
    return dt_new(r, shape);
}

dt *dt_reduce(dr_op o, const dt *x, int axis, bool keepdims)
{
    dt *y = reduced_shape(x, axis, keepdims);
    int64_t outer, len, inner;
    split(x, axis, &outer, &len, &inner);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t c = 0; c < inner; c++) {
            double acc = o == DR_MAX ? -INFINITY : o == DR_MIN ? INFINITY : 0;
            bool nan = false;
            for (int64_t k = 0; k < len; k++) {
                double v = x->v[(a * len + k) * inner + c];
                nan = nan || isnan(v);
                if (o == DR_SUM || o == DR_MEAN) acc += v;
                else if (o == DR_MAX) acc = v > acc ? v : acc;
                else acc = v < acc ? v : acc;
            }
            if (o == DR_MEAN) acc = len ? acc / (double)len : NAN;
            if (nan) acc = NAN;
            y->v[a * inner + c] = acc;
        }
    return y;
}

dt *dt_argmax(const dt *x, int axis)
{
    dt *y = reduced_shape(x, axis, false);
    int64_t outer, len, inner;
    split(x, axis, &outer, &len, &inner);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t c = 0; c < inner; c++) {
            int64_t best = 0;
            for (int64_t k = 1; k < len; k++) {
                double v = x->v[(a * len + k) * inner + c], b = x->v[(a * len + best) * inner + c];
                if (isnan(b)) break;
                if (isnan(v) || v > b) best = k;
            }
            y->v[a * inner + c] = (double)best;
        }
    return y;
}

dt *dt_softmax(const dt *x, int axis, bool log_)
{
    dt *y = dt_new(x->rank, x->shape);
    int64_t outer, len, inner;
    split(x, axis, &outer, &len, &inner);
    for (int64_t a = 0; a < outer; a++)
        for (int64_t c = 0; c < inner; c++) {
            double m = -INFINITY, s = 0;
            for (int64_t k = 0; k < len; k++) m = fmax(m, x->v[(a * len + k) * inner + c]);
            for (int64_t k = 0; k < len; k++) s += exp(x->v[(a * len + k) * inner + c] - m);
            for (int64_t k = 0; k < len; k++) {
                double d = x->v[(a * len + k) * inner + c] - m;
                y->v[(a * len + k) * inner + c] = log_ ? d - log(s) : exp(d) / s;
            }
        }
    return y;
}

dt *dt_matmul(const dt *a, const dt *b, bool transpose_b)
{
    int64_t k = a->shape[a->rank - 1];
    int64_t n = transpose_b ? b->shape[0] : b->shape[1];
    int64_t rows = k ? a->n / k : 0;
    if (!k) { /* rows = product of the other dims */
        rows = 1;
        for (int i = 0; i < a->rank - 1; i++) rows *= a->shape[i];
    }
    int64_t shape[DT_MAX_RANK];
    for (int i = 0; i < a->rank - 1; i++) shape[i] = a->shape[i];
    shape[a->rank - 1] = n;
    dt *y = dt_new(a->rank, shape);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t i = 0; i < k; i++)
                acc += a->v[r * k + i] * (transpose_b ? b->v[j * k + i] : b->v[i * n + j]);
            y->v[r * n + j] = acc;
        }
    return y;
}

dt *dt_transpose(const dt *x, const int *perm)
{
    int64_t shape[DT_MAX_RANK];
    for (int i = 0; i < x->rank; i++) shape[i] = x->shape[perm[i]];
    dt *y = dt_new(x->rank, shape);
    int64_t coord[DT_MAX_RANK];
    for (int64_t f = 0; f < y->n; f++) {
        int64_t g = f;
        for (int i = x->rank - 1; i >= 0; i--) coord[perm[i]] = g % shape[i], g /= shape[i];
        int64_t src = 0;
        for (int i = 0; i < x->rank; i++) src = src * x->shape[i] + coord[i];
        y->v[f] = x->v[src];
    }
    return y;
}

dt *dt_reshape(const dt *x, int rank, const int64_t *shape)
{
    dt *y = dt_new(rank, shape);
    if (y->n != x->n) abort();
    memcpy(y->v, x->v, (size_t)x->n * sizeof(double));
    return y;
}

dt *dt_norm(const dt *x)
{
    dt *y = dt_new(0, NULL);
    double s = 0;
    for (int64_t i = 0; i < x->n; i++) s += x->v[i] * x->v[i];
    y->v[0] = sqrt(s);
    return y;
}
