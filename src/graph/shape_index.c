/* Shape rules of the indexing ops (VF_KIND_INDEX), the part of the
 * shape-and-dtype engine (shape.c) they need beyond the row's dtype and
 * attribute checks. Symbolic dims are carried as everywhere else: a dim
 * of the result is symbolic when the input dim it comes from is. */
#include "graph/graph.h"
#include "util/dims.h"
#include "util/dtype.h"

#include <stdio.h>

static const char *sh(char *buf, size_t len, const vf_shape *s) { return vf_dims_fmt(buf, len, "", s->rank, s->dim, 0, NULL); }

static void put(vf_shape *out, const vf_shape *from, int d)
{
    if ((from->sym >> d) & 1u) out->sym |= 1u << out->rank;
    out->dim[out->rank++] = from->dim[d];
}

/* gather's result: x.shape[:axis] + indices.shape + x.shape[axis+1:] */
static vf_status gathered(const char *op, const vf_shape *x, const vf_shape *idx, int axis, vf_shape *out,
                          vf_err *err)
{
    char a[96], b[96];
    if (x->rank == 0)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: x is a scalar; it needs rank >= 1 (reshape to [1])", op);
    if (x->rank - 1 + idx->rank > VF_MAX_RANK)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: x %s with indices %s would give rank %d, above VF_MAX_RANK "
                          "(%d); reshape the indices to fewer dims", op, sh(a, sizeof a, x), sh(b, sizeof b, idx),
                          x->rank - 1 + idx->rank, VF_MAX_RANK);
    *out = (vf_shape){0};
    for (int d = 0; d < axis; d++) put(out, x, d);
    for (int d = 0; d < idx->rank; d++) put(out, idx, d);
    for (int d = axis + 1; d < x->rank; d++) put(out, x, d);
    return VF_OK;
}

vf_status vf_infer_index(vf_op op, const vf_attrs *a, const vf_shape *in, vf_shape *out, vf_err *err)
{
    const char *name = vf_op_get(op)->name;
    switch (op) {
    case VF_OP_GATHER:
        return gathered(name, &in[0], &in[1], a->axis, out, err);
    case VF_OP_SCATTER_ADD: {
        vf_shape want;
        vf_status s = gathered(name, &in[0], &in[1], a->axis, &want, err);
        if (s != VF_OK) return s;
        if (!vf_shape_equal(&want, &in[2])) {
            char x[96], i[96], u[96], w[96];
            return vf_err_set(err, VF_ERROR_SHAPE, "vf_scatter_add: updates %s do not match x %s and indices %s "
                              "along axis %d; updates must have shape x.shape[:axis] + indices.shape + "
                              "x.shape[axis+1:] = %s (what vf_gather of x would give)", sh(u, sizeof u, &in[2]),
                              sh(x, sizeof x, &in[0]), sh(i, sizeof i, &in[1]), a->axis, sh(w, sizeof w, &want));
        }
        *out = in[0];
        return VF_OK;
    }
    case VF_OP_CUMSUM:
        if (in[0].rank == 0)
            return vf_err_set(err, VF_ERROR_SHAPE, "vf_cumsum: x is a scalar; it needs rank >= 1 (reshape to [1])");
        *out = in[0];
        return VF_OK;
    case VF_OP_TOP_K:
    case VF_OP_TOP_K_INDICES: {
        const vf_shape *x = &in[0];
        char xs[96];
        if (x->rank == 0)
            return vf_err_set(err, VF_ERROR_SHAPE, "vf_top_k: x is a scalar; it needs rank >= 1 (reshape to [1])");
        int64_t n = x->dim[x->rank - 1];
        double k = a->value;
        if (!(k >= 0 && k <= (double)n && k == (double)(int64_t)k))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_top_k: k = %g but x %s has %lld elements along its "
                              "last axis; k must be in [0, %lld]", k, sh(xs, sizeof xs, x), (long long)n,
                              (long long)n);
        *out = *x;
        out->dim[x->rank - 1] = (int64_t)k;
        out->sym &= ~(1u << (x->rank - 1));
        return VF_OK;
    }
    case VF_OP_RNG_UNIFORM:
    case VF_OP_RNG_NORMAL:
    case VF_OP_RNG_ADVANCE: {
        /* checked here for graphs from elsewhere (a saved file): the entry
           points (function/generator.c) only make valid ones */
        char s0[96];
        if (in[0].rank != 1 || in[0].dim[0] != 2 || in[0].sym)
            return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the generator state is %s but must be [2] (the draw "
                              "number's low and high words)", name, sh(s0, sizeof s0, &in[0]));
        if (op == VF_OP_RNG_ADVANCE) {
            *out = in[0];
            return VF_OK;
        }
        if (a->dtype != VF_F32 && a->dtype != VF_F16)
            return vf_err_set(err, VF_ERROR_DTYPE, "vf_%s: result dtype %s; draws are f32 or f16", name,
                              vf_dtype_name(a->dtype));
        *out = in[1]; /* the shape donor's dims, symbolic ones included */
        return VF_OK;
    }
    default: break;
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "vf_%s: no shape rule", name);
}
