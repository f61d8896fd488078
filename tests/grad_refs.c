/* The double-precision host references of the gradient cases
 * (grad_cases.h): NumPy broadcasting, reductions, softmax, matmul,
 * transpose, gather and cumsum over gc_dt tensors. */
#include "grad_cases.h"

#include <math.h>
#include <string.h>

int64_t gc_dnumel(const gc_dt *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->sh[d];
    return n;
}

/* The flat index into t of multi-index idx (of a rank-r broadcast result):
   right-aligned, size-1 dims of t broadcast. */
static int64_t bidx(const gc_dt *t, int r, const int64_t *idx)
{
    int64_t k = 0;
    for (int d = 0; d < t->rank; d++) {
        int64_t i = idx[r - t->rank + d];
        k = k * t->sh[d] + (t->sh[d] == 1 ? 0 : i);
    }
    return k;
}

void gc_unflat(int64_t k, int r, const int64_t *sh, int64_t *idx)
{
    for (int d = r - 1; d >= 0; d--) {
        idx[d] = sh[d] ? k % sh[d] : 0;
        k = sh[d] ? k / sh[d] : 0;
    }
}


/* out = f(a, b, c) with NumPy broadcasting of the n given operands. */
void gc_dmap(int n, const gc_dt *const *x, gc_f3 f, gc_dt *out)
{
    out->rank = 0;
    for (int i = 0; i < n; i++)
        if (x[i]->rank > out->rank) out->rank = x[i]->rank;
    for (int d = 0; d < out->rank; d++) {
        out->sh[d] = 1;
        for (int i = 0; i < n; i++) {
            int od = d - (out->rank - x[i]->rank);
            if (od >= 0 && x[i]->sh[od] != 1) out->sh[d] = x[i]->sh[od];
        }
    }
    int64_t idx[4];
    for (int64_t k = 0; k < gc_dnumel(out); k++) {
        gc_unflat(k, out->rank, out->sh, idx);
        double a = x[0]->v[bidx(x[0], out->rank, idx)];
        double b = n > 1 ? x[1]->v[bidx(x[1], out->rank, idx)] : 0;
        double c = n > 2 ? x[2]->v[bidx(x[2], out->rank, idx)] : 0;
        out->v[k] = f(a, b, c);
    }
}

/* Reduction over the axes in mask (0: all). */
void gc_dreduce(const gc_dt *x, int kind, uint32_t mask, bool keep, gc_dt *out)
{
    if (!mask) mask = (1u << x->rank) - 1;
    int64_t osh[4] = {1, 1, 1, 1};
    for (int d = 0; d < x->rank; d++) osh[d] = (mask >> d) & 1 ? 1 : x->sh[d];
    gc_dt full = {.rank = x->rank};
    memcpy(full.sh, osh, sizeof osh);
    int64_t no = gc_dnumel(&full), cnt[GC_MAXE] = {0};
    for (int64_t k = 0; k < no; k++)
        full.v[k] = kind == GC_R_MAX ? -INFINITY : kind == GC_R_MIN ? INFINITY : kind == GC_R_PROD ? 1 : 0;
    int64_t idx[4];
    for (int64_t k = 0; k < gc_dnumel(x); k++) {
        gc_unflat(k, x->rank, x->sh, idx);
        int64_t o = bidx(&full, x->rank, idx);
        double v = x->v[k];
        if (kind == GC_R_MAX) full.v[o] = fmax(full.v[o], v);
        else if (kind == GC_R_MIN) full.v[o] = fmin(full.v[o], v);
        else if (kind == GC_R_PROD) full.v[o] *= v;
        else full.v[o] += kind == GC_R_NORM ? v * v : kind == GC_R_LSE ? exp(v) : v; /* |v| <= 2: no shift needed */
        cnt[o]++;
    }
    for (int64_t k = 0; k < no; k++) {
        if (kind == GC_R_MEAN) full.v[k] /= (double)cnt[k];
        if (kind == GC_R_NORM) full.v[k] = sqrt(full.v[k]);
        if (kind == GC_R_LSE) full.v[k] = log(full.v[k]);
    }
    *out = full;
    if (!keep) {
        out->rank = 0;
        for (int d = 0; d < x->rank; d++)
            if (!((mask >> d) & 1)) out->sh[out->rank++] = x->sh[d];
    }
}

/* softmax / log_softmax along axis */
void gc_dsoftmax(const gc_dt *x, int axis, bool lg, gc_dt *out)
{
    *out = *x;
    int64_t n = x->sh[axis], inner = 1, outer = 1;
    for (int d = axis + 1; d < x->rank; d++) inner *= x->sh[d];
    for (int d = 0; d < axis; d++) outer *= x->sh[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < n; j++) m = fmax(m, x->v[(o * n + j) * inner + i]);
            for (int64_t j = 0; j < n; j++) s += exp(x->v[(o * n + j) * inner + i] - m);
            for (int64_t j = 0; j < n; j++) {
                double z = x->v[(o * n + j) * inner + i] - m;
                out->v[(o * n + j) * inner + i] = lg ? z - log(s) : exp(z) / s;
            }
        }
}

/* matmul with transposes, vector operands and batch broadcasting */
void gc_dmatmul(const gc_dt *a0, const gc_dt *b0, bool ta, bool tb, gc_dt *out)
{
    gc_dt a = *a0, b = *b0;
    bool av = a.rank == 1, bv = b.rank == 1;
    if (av) a.rank = 2, a.sh[1] = a.sh[0], a.sh[0] = 1;
    if (bv) b.rank = 2, b.sh[1] = 1;
    int ra = a.rank, rb = b.rank;
    int64_t m = ta ? a.sh[ra - 1] : a.sh[ra - 2], kk = ta ? a.sh[ra - 2] : a.sh[ra - 1];
    int64_t n = tb ? b.sh[rb - 2] : b.sh[rb - 1];
    gc_dt ba = {.rank = ra - 2}, bb = {.rank = rb - 2};
    memcpy(ba.sh, a.sh, sizeof(int64_t) * (size_t)(ra - 2));
    memcpy(bb.sh, b.sh, sizeof(int64_t) * (size_t)(rb - 2));
    gc_dt bo;
    const gc_dt *bx[2] = {&ba, &bb};
    ba.v[0] = bb.v[0] = 0;
    int rbo = ba.rank > bb.rank ? ba.rank : bb.rank;
    bo.rank = rbo;
    for (int d = 0; d < rbo; d++) {
        bo.sh[d] = 1;
        for (int i = 0; i < 2; i++) {
            int od = d - (rbo - bx[i]->rank);
            if (od >= 0 && bx[i]->sh[od] != 1) bo.sh[d] = bx[i]->sh[od];
        }
    }
    int64_t nb = gc_dnumel(&bo), idx[4];
    out->rank = 0;
    for (int d = 0; d < rbo; d++) out->sh[out->rank++] = bo.sh[d];
    if (!av) out->sh[out->rank++] = m;
    if (!bv) out->sh[out->rank++] = n;
    for (int64_t q = 0; q < nb; q++) {
        gc_unflat(q, rbo, bo.sh, idx);
        int64_t qa = bidx(&ba, rbo, idx), qb = bidx(&bb, rbo, idx);
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t p = 0; p < kk; p++) {
                    double x = a.v[qa * m * kk + (ta ? p * m + i : i * kk + p)];
                    double y = b.v[qb * kk * n + (tb ? j * kk + p : p * n + j)];
                    s += x * y;
                }
                out->v[(q * m + i) * n + j] = s;
            }
    }
}

void gc_dtranspose(const gc_dt *x, const int *perm, gc_dt *out)
{
    out->rank = x->rank;
    for (int d = 0; d < x->rank; d++) out->sh[d] = x->sh[perm[d]];
    int64_t idx[4], src[4];
    for (int64_t k = 0; k < gc_dnumel(out); k++) {
        gc_unflat(k, out->rank, out->sh, idx);
        for (int d = 0; d < x->rank; d++) src[perm[d]] = idx[d];
        int64_t f = 0;
        for (int d = 0; d < x->rank; d++) f = f * x->sh[d] + src[d];
        out->v[k] = x->v[f];
    }
}


/* y[o, j, c] = x[o, idx[j], c] with x as [outer, n, inner] */
void gc_dgather(const gc_dt *x, const int32_t *idx, int64_t J, int axis, gc_dt *y)
{
    int64_t outer = 1, inner = 1, n = x->sh[axis];
    for (int d = 0; d < axis; d++) outer *= x->sh[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->sh[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < J; j++)
            for (int64_t c = 0; c < inner; c++) y->v[(o * J + j) * inner + c] = x->v[(o * n + idx[j]) * inner + c];
}
void gc_dsquare_all(gc_dt *y)
{
    for (int64_t k = 0; k < gc_dnumel(y); k++) y->v[k] *= y->v[k];
}

/* cumsum along axis of [outer, n, inner] in double */
void gc_dcumsum(const gc_dt *x, int axis, bool excl, bool rev, gc_dt *y)
{
    *y = *x;
    int64_t outer = 1, n = x->sh[axis], inner = 1;
    for (int d = 0; d < axis; d++) outer *= x->sh[d];
    for (int d = axis + 1; d < x->rank; d++) inner *= x->sh[d];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t c = 0; c < inner; c++) {
            double acc = 0;
            for (int64_t p = 0; p < n; p++) {
                int64_t at = (o * n + (rev ? n - 1 - p : p)) * inner + c;
                double v = x->v[at];
                if (!excl) acc += v;
                y->v[at] = acc;
                if (excl) acc += v;
            }
        }
}
