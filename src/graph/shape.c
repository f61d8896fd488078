/* Shape inference on graph nodes.
 *
 * The frontend validates user calls with concrete shapes while tracing;
 * these rules re-derive every node's shape from its inputs' when a
 * concrete function runs with other sizes for its symbolic dims. They work
 * on the normalised attributes the backend sees (axes as a mask, matmul
 * operands of rank >= 2), so they are short; what can still fail here is a
 * symbolic size that does not fit the traced program (e.g. a batch of 100
 * added to a constant of 128 rows), reported with the op and the shapes.
 */
#include "graph/graph.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

static const char *sh(char *buf, size_t len, const vf_shape *s)
{
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int i = 0; i < s->rank && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)s->dim[i]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

bool vf_broadcast(int n, const vf_shape *const *in, vf_shape *out, int *bad_dim)
{
    int r = 0;
    for (int i = 0; i < n; i++)
        if (in[i]->rank > r) r = in[i]->rank;
    out->rank = r;
    out->sym = 0;
    for (int d = 0; d < r; d++) {
        int64_t size = 1;
        bool sym = false;
        for (int i = 0; i < n; i++) {
            int k = d - (r - in[i]->rank);
            if (k < 0) continue;
            int64_t s = in[i]->dim[k];
            bool s_sym = (in[i]->sym >> k) & 1u;
            if (s == 1 && !s_sym) continue;
            if (s == size) {
                sym = sym || s_sym;
                continue;
            }
            if (size == 1 && !sym) {
                size = s;
                sym = s_sym;
                continue;
            }
            if (s == 1) continue; /* a symbolic dim that is 1 this time broadcasts too */
            if (bad_dim) *bad_dim = d - r;
            return false;
        }
        out->dim[d] = size;
        if (sym) out->sym |= 1u << d;
    }
    return true;
}

static vf_status fail_shapes(vf_err *err, const char *op, const char *what, int n, const vf_shape *in)
{
    char buf[4][96];
    for (int i = 0; i < 4; i++) buf[i][0] = '\0';
    for (int i = 0; i < n && i < 4; i++) sh(buf[i], sizeof buf[i], &in[i]);
    return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: %s (inputs %s%s%s%s%s%s)", op, what, buf[0],
                      n > 1 ? ", " : "", buf[1], n > 2 ? ", " : "", buf[2], "");
}

static vf_status infer_matmul(const vf_node *n, const vf_shape *a, const vf_shape *b, vf_shape *out,
                              vf_err *err)
{
    if (a->rank < 2 || b->rank < 2)
        return fail_shapes(err, "matmul", "operands need rank >= 2 here", 2, (vf_shape[]){*a, *b});
    bool ta = n->attrs.trans_a, tb = n->attrs.trans_b;
    int am = ta ? a->rank - 1 : a->rank - 2, ak = ta ? a->rank - 2 : a->rank - 1;
    int bk = tb ? b->rank - 1 : b->rank - 2, bn = tb ? b->rank - 2 : b->rank - 1;
    if (a->dim[ak] != b->dim[bk]) {
        char what[96];
        snprintf(what, sizeof what, "inner dims differ (k=%lld vs %lld)", (long long)a->dim[ak],
                 (long long)b->dim[bk]);
        return fail_shapes(err, "matmul", what, 2, (vf_shape[]){*a, *b});
    }
    vf_shape ba = {.rank = a->rank - 2, .sym = a->sym}, bb = {.rank = b->rank - 2, .sym = b->sym};
    memcpy(ba.dim, a->dim, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dim, b->dim, sizeof(int64_t) * (size_t)bb.rank);
    ba.sym &= (1u << ba.rank) - 1;
    bb.sym &= (1u << bb.rank) - 1;
    const vf_shape *both[2] = {&ba, &bb};
    if (!vf_broadcast(2, both, out, NULL))
        return fail_shapes(err, "matmul", "batch dims do not broadcast", 2, (vf_shape[]){*a, *b});
    int r = out->rank;
    out->dim[r] = a->dim[am];
    out->dim[r + 1] = b->dim[bn];
    if ((a->sym >> am) & 1u) out->sym |= 1u << r;
    if ((b->sym >> bn) & 1u) out->sym |= 1u << (r + 1);
    out->rank = r + 2;
    return VF_OK;
}

static vf_status infer_reshape(const vf_node *n, const vf_shape *x, vf_shape *out, vf_err *err)
{
    const vf_shape *t = &n->target;
    int64_t numel = vf_shape_numel(x), known = 1;
    int infer = -1;
    *out = (vf_shape){.rank = t->rank};
    for (int i = 0; i < t->rank; i++) {
        out->dim[i] = t->dim[i];
        if (t->dim[i] == -1) infer = i;
        else known *= t->dim[i];
    }
    if (infer >= 0 && known == 0) {
        char a[96], b[96];
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_reshape: cannot reshape %s to %s: with a 0 among the other dims "
                          "the -1 could be any size (ambiguous, as in NumPy); give that dim explicitly",
                          sh(a, sizeof a, x), sh(b, sizeof b, t));
    }
    if (infer >= 0) {
        if (numel % known != 0) goto bad;
        out->dim[infer] = numel / known;
        if (x->sym) out->sym |= 1u << infer;
    }
    if (vf_shape_numel(out) != numel) goto bad;
    return VF_OK;
bad:;
    char a[96], b[96], what[512];
    snprintf(what, sizeof what, "cannot reshape %s (%lld elements) to %s; a traced reshape with a "
             "symbolic input needs -1 for the dim that varies", sh(a, sizeof a, x), (long long)numel,
             sh(b, sizeof b, t));
    return vf_err_set(err, VF_ERROR_SHAPE, "vf_reshape: %s", what);
}

static vf_status infer_op(const vf_node *n, const vf_dtype *in_dt, const vf_shape *in, vf_dtype *dt,
                          vf_shape *out, vf_err *err)
{
    const vf_op_info *info = vf_op_get(n->op);
    const vf_shape *x = n->n_in ? &in[0] : NULL;
    switch (info->kind) {
    case VF_KIND_ELEMENTWISE: {
        const vf_shape *ptr[3];
        for (int i = 0; i < n->n_in && i < 3; i++) ptr[i] = &in[i];
        int bad = 0;
        if (!vf_broadcast(n->n_in, ptr, out, &bad)) {
            char what[64];
            snprintf(what, sizeof what, "shapes do not broadcast at dim %d", bad);
            return fail_shapes(err, info->name, what, n->n_in, in);
        }
        *dt = info->result == VF_RESULT_BOOL ? VF_BOOL
            : info->result == VF_RESULT_ATTR ? n->attrs.dtype
            : in_dt[vf_op_data_input(n->op)];
        return VF_OK;
    }
    case VF_KIND_REDUCTION:
        *out = (vf_shape){0};
        *dt = n->op == VF_OP_ARGMAX ? VF_I32 : in_dt[0];
        for (int d = 0; d < x->rank; d++) {
            bool red = n->op == VF_OP_ARGMAX ? d == n->attrs.axis : ((n->attrs.axes_mask >> d) & 1u);
            if (red && !(n->attrs.keepdims && n->op != VF_OP_ARGMAX)) continue;
            if (!red && ((x->sym >> d) & 1u)) out->sym |= 1u << out->rank;
            out->dim[out->rank++] = red ? 1 : x->dim[d];
        }
        return VF_OK;
    case VF_KIND_ROW:
        if (n->op == VF_OP_SPARSE_XENT) {
            const vf_shape *lab = &in[0], *lg = &in[1];
            bool ok = lg->rank == lab->rank + 1;
            for (int d = 0; ok && d < lab->rank; d++) ok = lab->dim[d] == lg->dim[d];
            if (!ok) return fail_shapes(err, info->name, "labels and logits do not match", 2, in);
            *out = *lab;
            *dt = in_dt[1];
            return VF_OK;
        }
        *out = *x;
        *dt = in_dt[0];
        return VF_OK;
    case VF_KIND_MATMUL:
        *dt = in_dt[0];
        return infer_matmul(n, &in[0], &in[1], out, err);
    case VF_KIND_MOVEMENT:
        *out = (vf_shape){.rank = x->rank};
        for (int d = 0; d < x->rank; d++) {
            out->dim[d] = x->dim[n->attrs.perm[d]];
            if ((x->sym >> n->attrs.perm[d]) & 1u) out->sym |= 1u << d;
        }
        *dt = in_dt[0];
        return VF_OK;
    case VF_KIND_SOURCE:
        *out = n->shape;
        *dt = n->dtype;
        return VF_OK;
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "vf_%s: no shape rule", info->name);
}

vf_status vf_infer(const vf_node *n, const vf_dtype *in_dt, const vf_shape *in, vf_dtype *dt,
                   vf_shape *out, vf_err *err)
{
    switch (n->kind) {
    case VF_NODE_OP: return infer_op(n, in_dt, in, dt, out, err);
    case VF_NODE_RESHAPE:
        *dt = in_dt[0];
        return infer_reshape(n, &in[0], out, err);
    case VF_NODE_ASSIGN: {
        /* *out is the variable's shape; the value must broadcast to it */
        const vf_shape *v = &in[0];
        bool ok = v->rank <= out->rank;
        for (int i = 0; ok && i < v->rank; i++) {
            int64_t vs = v->dim[v->rank - 1 - i], ts = out->dim[out->rank - 1 - i];
            ok = vs == ts || vs == 1;
        }
        if (!ok) {
            char a[96], b[96];
            return vf_err_set(err, VF_ERROR_SHAPE, "vf_assign: value %s does not broadcast to the "
                              "variable's shape %s", sh(a, sizeof a, v), sh(b, sizeof b, out));
        }
        *dt = in_dt[0];
        return VF_OK;
    }
    case VF_NODE_PRINT:
        *out = in[0];
        *dt = in_dt[0];
        return VF_OK;
    default:
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "shape inference: a %s node has no local rule",
                          vf_node_kind_name(n->kind));
    }
}
