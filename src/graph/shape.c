/* The shape-and-dtype engine: the one place an op's input dtypes, the
 * attributes it reads and its result's dtype and shape are checked and
 * derived, from its op-table row. Every caller uses it: the eager entry
 * points (src/api/ops_*.c, with concrete shapes, after normalising
 * the user's arguments: negative axes, axis lists, matmul's vectors),
 * tracing (symbolic dims carried), the interpreter (each call's sizes),
 * plans, passes and the saved-file loader (untrusted graphs). The rules
 * work on the normalised attributes the backend sees (axes as a mask,
 * matmul operands of rank >= 2). Messages are the user-facing ones, naming
 * the op, the shapes and the fix; callers add where (a traced function's
 * node, a file's node). At run time what can still fail is a symbolic size
 * that does not fit the traced program (a batch of 100 added to a constant
 * of 128 rows).
 */
#include "graph/graph.h"
#include "util/dims.h"
#include "graph/uelem.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

static const char *sh(char *buf, size_t len, const vf_shape *s) { return vf_dims_fmt(buf, len, "", s->rank, s->dim, 0, NULL); }

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

/* ---- dtypes and attributes ------------------------------------------------ */

static void accepted_list(uint32_t mask, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int d = 0; d < VF_DTYPE_COUNT; d++)
        if (mask & VF_M(d)) {
            strncat(buf, buf[0] ? ", " : "", len - strlen(buf) - 1);
            strncat(buf, vf_dtype_name((vf_dtype)d), len - strlen(buf) - 1);
        }
}

vf_status vf_check_op_dtype(vf_op op, int i, vf_dtype dt, const vf_shape *s, vf_err *err)
{
    const vf_op_info *info = vf_op_get(op);
    if (vf_op_input_is_cond(op, i)) {
        if (dt == VF_BOOL) return VF_OK;
        return vf_err_set(err, VF_ERROR_DTYPE, "vf_%s: cond is %s but must be bool; make it with a comparison "
                          "(vf_greater, ...) or vf_cast(ctx, cond, VF_BOOL)", info->name, vf_dtype_name(dt));
    }
    if (vf_op_input_is_index(op, i)) {
        if (dt == VF_I32 || dt == VF_U32) return VF_OK;
        return vf_err_set(err, VF_ERROR_DTYPE, "vf_%s: %s are %s but must be i32 or u32 %sindices; "
                          "cast them with vf_cast", info->name, op == VF_OP_SPARSE_XENT ? "labels" : "indices",
                          vf_dtype_name(dt), op == VF_OP_SPARSE_XENT ? "class " : "");
    }
    if (info->accepts & VF_M(dt)) return VF_OK;
    char accepted[64], b[96];
    accepted_list(info->accepts, accepted, sizeof accepted);
    return vf_err_set(err, VF_ERROR_DTYPE, "vf_%s: input %d is %s %s but %s takes %s; convert it with vf_cast",
                      info->name, i, vf_dtype_name(dt), sh(b, sizeof b, s), info->name, accepted);
}

/* Every input against its role (condition, indices, data) and the data
   inputs against each other: vkfuse never promotes. */
static vf_status check_dtypes(vf_op op, const vf_dtype *in_dt, const vf_shape *in, vf_err *err)
{
    const vf_op_info *info = vf_op_get(op);
    int data = vf_op_data_input(op);
    for (int i = 0; i < info->arity; i++) {
        vf_status s = vf_check_op_dtype(op, i, in_dt[i], &in[i], err);
        if (s != VF_OK) return s;
        if (i > data && !vf_op_input_is_cond(op, i) && !vf_op_input_is_index(op, i) && in_dt[i] != in_dt[data])
            return vf_err_set(err, VF_ERROR_DTYPE, "vf_%s: inputs have different dtypes (%s and %s); vkfuse does "
                              "not promote implicitly — cast one with vf_cast", info->name,
                              vf_dtype_name(in_dt[data]), vf_dtype_name(in_dt[i]));
    }
    return VF_OK;
}

/* The attributes the op reads (its row's mask) against its inputs: the
   entry points normalise user arguments before they get here, so these
   only fail for graphs from elsewhere (a saved file). */
static vf_status check_attrs(vf_op op, const vf_attrs *a, const vf_shape *in, vf_err *err)
{
    const vf_op_info *info = vf_op_get(op);
    int r0 = info->arity ? in[0].rank : 0;
    int rd = info->arity ? in[vf_op_data_input(op)].rank : 0;
    if ((info->attrs & VF_ATTR_AXES) && (a->axes_mask >> r0))
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: reduces axes 0x%x of a rank-%d input", info->name,
                          a->axes_mask, r0);
    if ((info->attrs & VF_ATTR_AXIS) && (a->axis < 0 || a->axis >= (rd ? rd : 1)))
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: axis %d is out of range for rank %d", info->name,
                          a->axis, rd);
    if (info->attrs & VF_ATTR_PERM) {
        uint32_t seen = 0;
        for (int d = 0; d < r0; d++) {
            int p = a->perm[d];
            if (p < 0 || p >= r0 || ((seen >> p) & 1u))
                return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: perm is not a permutation of %d axes",
                                  info->name, r0);
            seen |= 1u << p;
        }
    }
    /* window attrs: a slice's begin / end are any int64 (clamped), its step
       non-zero; a pad's amounts are bounded so that sizes stay in int64 */
    for (int d = 0; (info->attrs & VF_ATTR_WINDOW) && d < r0; d++) {
        if ((op == VF_OP_SLICE || op == VF_OP_SLICE_GRAD) && (a->step[d] == 0 || a->step[d] == INT64_MIN))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: step[%d] is %lld; a step must be non-zero "
                              "(and above INT64_MIN)", info->name, d, (long long)a->step[d]);
        const int64_t big = (int64_t)1 << 40;
        if (op == VF_OP_PAD && (a->lo[d] < 0 || a->hi[d] < 0 || a->lo[d] > big || a->hi[d] > big ||
                                a->step[d] != 1))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_pad: dim %d pads %lld before and %lld after (step "
                              "%lld); amounts must be 0 .. 2^40 and the step 1", d, (long long)a->lo[d],
                              (long long)a->hi[d], (long long)a->step[d]);
    }
    if (info->attrs & VF_ATTR_CONV) {
        const vf_conv_attrs *c = &a->conv;
        for (int d = 0; d < 2; d++)
            if (c->stride[d] < 1 || c->dilation[d] < 1)
                return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: stride %d and dilation %d must be >= 1",
                                  info->name, c->stride[d], c->dilation[d]);
        for (int d = 0; d < 4; d++)
            if (c->pad[d] < 0)
                return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: pad %d is negative", info->name, c->pad[d]);
        if (c->groups < 1)
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: groups %d must be >= 1", info->name, c->groups);
        for (int d = 0; d < 2; d++)
            if (c->size[d] < 0 || (op == VF_OP_CONV2D && c->size[d] != 0) ||
                (op >= VF_OP_MAX_POOL2D && c->size[d] < 1))
                return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: size %d is invalid", info->name,
                                  c->size[d]);
    }
    if ((info->attrs & VF_ATTR_DTYPE) && !vf_dtype_valid((int)a->dtype))
        return vf_err_set(err, VF_ERROR_DTYPE, "vf_%s: target dtype %d is not a vf_dtype", info->name, (int)a->dtype);
    return VF_OK;
}

/* ---- shapes ------------------------------------------------------------------ */

static vf_status broadcast_fail(const char *op, int n, const vf_shape *in, int bad, vf_err *err)
{
    /* replay the failing dim to name the two sizes that clash */
    int r = 0;
    for (int i = 0; i < n; i++)
        if (in[i].rank > r) r = in[i].rank;
    int d = r + bad, culprit = n - 1;
    int64_t size = 1, s = 1;
    for (int i = 0; i < n; i++) {
        int k = d - (r - in[i].rank);
        if (k < 0) continue;
        s = in[i].dim[k];
        if (s == size || s == 1) continue;
        if (size == 1) {
            size = s;
            continue;
        }
        culprit = i;
        break;
    }
    char a[96], b[96];
    return vf_err_set(err, VF_ERROR_SHAPE,
                      "vf_%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld); sizes must be equal or 1 "
                      "when aligned at the last dim — reshape one input (vf_reshape)", op, sh(a, sizeof a, &in[0]),
                      sh(b, sizeof b, &in[culprit]), bad, (long long)size, (long long)s);
}

static vf_status infer_matmul(const vf_attrs *at, const vf_shape *a, const vf_shape *b, vf_shape *out,
                              vf_err *err)
{
    char sa[96], sb[96];
    if (a->rank < 2 || b->rank < 2)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_matmul: operands %s and %s need rank >= 2 here",
                          sh(sa, sizeof sa, a), sh(sb, sizeof sb, b));
    bool ta = at->trans_a, tb = at->trans_b;
    int am = ta ? a->rank - 1 : a->rank - 2, ak = ta ? a->rank - 2 : a->rank - 1;
    int bk = tb ? b->rank - 1 : b->rank - 2, bn = tb ? b->rank - 2 : b->rank - 1;
    if (a->dim[ak] != b->dim[bk])
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_matmul: inner dims differ: a %s%s has k=%lld, b %s%s has k=%lld; "
                          "a's last dim must equal b's second-to-last (or use the transpose flags of vf_matmul_ex)",
                          sh(sa, sizeof sa, a), ta ? " (transposed)" : "", (long long)a->dim[ak],
                          sh(sb, sizeof sb, b), tb ? " (transposed)" : "", (long long)b->dim[bk]);
    vf_shape ba = {.rank = a->rank - 2, .sym = a->sym}, bb = {.rank = b->rank - 2, .sym = b->sym};
    memcpy(ba.dim, a->dim, sizeof(int64_t) * (size_t)ba.rank);
    memcpy(bb.dim, b->dim, sizeof(int64_t) * (size_t)bb.rank);
    ba.sym &= (1u << ba.rank) - 1;
    bb.sym &= (1u << bb.rank) - 1;
    const vf_shape *both[2] = {&ba, &bb};
    int bad = 0;
    if (!vf_broadcast(2, both, out, &bad)) {
        int ia = ba.rank + bad, ib = bb.rank + bad;
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_matmul: batch dims of a %s and b %s do not broadcast (%lld vs %lld)",
                          sh(sa, sizeof sa, a), sh(sb, sizeof sb, b), (long long)(ia >= 0 ? ba.dim[ia] : 1),
                          (long long)(ib >= 0 ? bb.dim[ib] : 1));
    }
    int r = out->rank;
    out->dim[r] = a->dim[am];
    out->dim[r + 1] = b->dim[bn];
    if ((a->sym >> am) & 1u) out->sym |= 1u << r;
    if ((b->sym >> bn) & 1u) out->sym |= 1u << (r + 1);
    out->rank = r + 2;
    return VF_OK;
}

/* The output size along spatial dim d (0: height, 1: width) of a window of
   k taps over in elements: (in + pads - dilation * (k - 1) - 1) / stride + 1.
   An empty input (in 0) that the window does not fit with its padding has
   no output rows (the size clamped at 0, an empty result as TF gives):
   only a non-empty input smaller than the window is a mistake. */
static vf_status conv_out_dim(const char *op, const vf_conv_attrs *c, int d, int64_t in, int64_t k, int64_t *out,
                              vf_err *err)
{
    int64_t span = (int64_t)c->dilation[d] * (k - 1) + 1;
    int64_t padded = in + c->pad[2 * d] + c->pad[2 * d + 1];
    if (padded < span && in == 0) {
        *out = 0;
        return VF_OK;
    }
    if (padded < span)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the input's %s (%lld, %lld with padding) is smaller "
                          "than the dilated filter window (%lld); pad more (e.g. VF_PADDING_SAME) or use a "
                          "smaller filter or dilation", op, d ? "width" : "height", (long long)in,
                          (long long)padded, (long long)span);
    *out = (padded - span) / c->stride[d] + 1;
    return VF_OK;
}

/* conv2d: x [N, H, W, C], w [KH, KW, C/groups, O] -> [N, OH, OW, O]. Its
   backprop ops check their operands against the forward they undo:
   backprop_input (dy [N, OH, OW, O], w) -> dx [N, size, C],
   backprop_filter (x, dy) -> dw [size, C/groups, O]. The entry point has
   resolved SAME padding into pads. */
/* pooling: x [N, H, W, C] -> [N, OH, OW, C] over a size[0] x size[1]
   window; its gradients take x and dy (the pool's output shape) -> dx. */
static vf_status infer_pool(vf_op op, const vf_conv_attrs *c, int n_in, const vf_shape *in, vf_shape *out,
                            vf_err *err)
{
    const char *name = vf_op_get(op)->name;
    char sa[96], sb[96];
    const vf_shape *x = &in[0];
    if (x->rank != 4)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the input %s must be rank 4, NHWC [batch, height, width, "
                          "channels]", name, sh(sa, sizeof sa, x));
    if (x->sym & ~1u)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "vf_%s: only the batch dim of the input may be symbolic", name);
    if (c->size[0] < 1 || c->size[1] < 1 || c->groups != 1 || c->dilation[0] != 1 || c->dilation[1] != 1)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: window %d x %d must be >= 1 (groups and "
                          "dilations 1)", name, c->size[0], c->size[1]);
    int64_t OH = 0, OW = 0;   /* (set by conv_out_dim; -O2 cannot tell) */
    vf_status st = conv_out_dim(name, c, 0, x->dim[1], c->size[0], &OH, err);
    if (st == VF_OK) st = conv_out_dim(name, c, 1, x->dim[2], c->size[1], &OW, err);
    if (st != VF_OK) return st;
    *out = (vf_shape){.rank = 4, .sym = x->sym & 1u, .dim = {x->dim[0], OH, OW, x->dim[3]}};
    if (n_in == 2) {
        const vf_shape *dy = &in[1];
        if (!vf_shape_equal(dy, out))
            return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the output gradient %s is not the pool's output %s",
                              name, sh(sa, sizeof sa, dy), sh(sb, sizeof sb, out));
        *out = *x;
    }
    return VF_OK;
}

static vf_status infer_conv(vf_op op, const vf_conv_attrs *c, const vf_shape *in0, const vf_shape *in1,
                            vf_shape *out, vf_err *err)
{
    const char *name = vf_op_get(op)->name;
    char sa[96], sb[96];
    if (in0->rank != 4 || in1->rank != 4)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: operands %s and %s must both be rank 4: the input "
                          "NHWC [batch, height, width, channels], the filter HWIO [kh, kw, channels/groups, out]",
                          name, sh(sa, sizeof sa, in0), sh(sb, sizeof sb, in1));
    if ((in0->sym | in1->sym) & ~1u)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "vf_%s: only the batch dim of the input may be symbolic "
                          "(-1 in an input_signature); give height, width, channels and the filter fixed sizes",
                          name);
    int64_t g = c->groups;
    /* the forward's operands, as far as this op knows them */
    int64_t N, H, W, C, KH, KW, Cg, O;
    const vf_shape *dy = NULL;
    if (op == VF_OP_CONV2D) {
        N = in0->dim[0], H = in0->dim[1], W = in0->dim[2], C = in0->dim[3];
        KH = in1->dim[0], KW = in1->dim[1], Cg = in1->dim[2], O = in1->dim[3];
    } else if (op == VF_OP_CONV2D_BACKPROP_INPUT) {
        dy = in0;
        N = dy->dim[0], H = c->size[0], W = c->size[1];
        KH = in1->dim[0], KW = in1->dim[1], Cg = in1->dim[2], O = in1->dim[3], C = Cg * g;
    } else {
        dy = in1;
        N = in0->dim[0], H = in0->dim[1], W = in0->dim[2], C = in0->dim[3];
        KH = c->size[0], KW = c->size[1], O = dy->dim[3], Cg = C / g;
    }
    if (C % g != 0 || O % g != 0)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: groups = %lld must divide the input channels (%lld) and "
                          "the filter's output channels (%lld); pick a groups that divides both", name,
                          (long long)g, (long long)C, (long long)O);
    if (Cg * g != C)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the filter %s has %lld input channels but the input %s "
                          "has %lld channels in %lld group(s); the filter's dim 2 must be channels / groups = %lld",
                          name, sh(sb, sizeof sb, in1), (long long)Cg, sh(sa, sizeof sa, in0), (long long)C,
                          (long long)g, (long long)(C / g));
    if (KH < 1 || KW < 1)
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the filter has an empty window (%lld x %lld); kh and kw "
                          "must be >= 1", name, (long long)KH, (long long)KW);
    int64_t OH = 0, OW = 0;   /* (set by conv_out_dim; -O2 cannot tell) */
    vf_status st = conv_out_dim(name, c, 0, H, KH, &OH, err);
    if (st == VF_OK) st = conv_out_dim(name, c, 1, W, KW, &OW, err);
    if (st != VF_OK) return st;
    if (dy && (dy->dim[0] != N || dy->dim[1] != OH || dy->dim[2] != OW || dy->dim[3] != O))
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: the output gradient %s is not the forward's output "
                          "[%lld, %lld, %lld, %lld]", name, sh(sa, sizeof sa, dy), (long long)N, (long long)OH,
                          (long long)OW, (long long)O);
    *out = (vf_shape){.rank = 4};
    int64_t r[3][4] = {{N, OH, OW, O}, {N, H, W, C}, {KH, KW, Cg, O}};
    int which = op == VF_OP_CONV2D ? 0 : op == VF_OP_CONV2D_BACKPROP_INPUT ? 1 : 2;
    for (int d = 0; d < 4; d++) out->dim[d] = r[which][d];
    if (which < 2) out->sym = (dy ? dy->sym : in0->sym) & 1u; /* the batch */
    return VF_OK;
}

vf_status vf_infer_reshape(const vf_shape *x, const vf_shape *t, vf_shape *out, vf_err *err)
{
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
    char a[96], b[96];
    return vf_err_set(err, VF_ERROR_SHAPE, "vf_reshape: cannot reshape %s (%lld elements) to %s; the element count "
                      "must stay the same (a traced reshape of a symbolic input needs -1 for the dim that varies)",
                      sh(a, sizeof a, x), (long long)numel, sh(b, sizeof b, t));
}

vf_status vf_infer_op(vf_op op, const vf_attrs *a, int n_in, const vf_dtype *in_dt, const vf_shape *in,
                      vf_dtype *dt, vf_shape *out, vf_err *err)
{
    const vf_op_info *info = vf_op_get(op);
    if (op == VF_OP_USER_ELEMENTWISE) return vf_uelem_infer(a->uelem, n_in, in_dt, in, dt, out, err);
    if (n_in != info->arity)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: %d inputs given; the op takes %d", info->name, n_in,
                          info->arity);
    vf_status st = check_dtypes(op, in_dt, in, err);
    if (st == VF_OK) st = check_attrs(op, a, in, err);
    if (st != VF_OK) return st;
    const vf_shape *x = n_in ? &in[0] : NULL;
    int data = vf_op_data_input(op);
    *dt = info->result == VF_RESULT_BOOL ? VF_BOOL
        : info->result == VF_RESULT_I32 ? VF_I32
        : info->result == VF_RESULT_ATTR ? a->dtype
        : in_dt[data < n_in ? data : 0];
    switch (info->kind) {
    case VF_KIND_USER: /* resolved by its callbacks (graph/ukernel.c), never by a rule */
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "user_kernel: no shape rule; the graph holds KERNEL nodes");
    case VF_KIND_ELEMENTWISE: {
        const vf_shape *ptr[3] = {NULL, NULL, NULL};
        for (int i = 0; i < n_in && i < 3; i++) ptr[i] = &in[i];
        int bad = 0;
        if (!vf_broadcast(n_in, ptr, out, &bad)) return broadcast_fail(info->name, n_in, in, bad, err);
        return VF_OK;
    }
    case VF_KIND_REDUCTION: {
        bool arg = info->attrs & VF_ATTR_AXIS; /* argmax: one axis, never kept */
        *out = (vf_shape){0};
        for (int d = 0; d < x->rank; d++) {
            bool red = arg ? d == a->axis : ((a->axes_mask >> d) & 1u);
            if (red && !(a->keepdims && !arg)) continue;
            if (!red && ((x->sym >> d) & 1u)) out->sym |= 1u << out->rank;
            out->dim[out->rank++] = red ? 1 : x->dim[d];
        }
        return VF_OK;
    }
    case VF_KIND_ROW:
        if (info->index_in) { /* labels [...] and logits [..., C] -> [...] */
            const vf_shape *lab = &in[0], *lg = &in[1];
            bool ok = lg->rank == lab->rank + 1;
            for (int d = 0; ok && d < lab->rank; d++) ok = lab->dim[d] == lg->dim[d];
            if (!ok) {
                char sa[96], sb[96];
                return vf_err_set(err, VF_ERROR_SHAPE, "vf_%s: labels %s and logits %s do not match; logits must "
                                  "be labels' shape plus a classes dim, e.g. labels [N] with logits [N, C]",
                                  info->name, sh(sa, sizeof sa, lab), sh(sb, sizeof sb, lg));
            }
            *out = *lab;
            return VF_OK;
        }
        *out = *x;
        return VF_OK;
    case VF_KIND_MATMUL:
        return infer_matmul(a, &in[0], &in[1], out, err);
    case VF_KIND_MOVEMENT:
        if (op == VF_OP_SLICE || op == VF_OP_PAD) {
            /* a symbolic dim stays symbolic (the result's size follows it),
               except under a slice whose bounds both count from the same
               end: its size does not depend on the dim's */
            *out = *x;
            for (int d = 0; d < x->rank; d++) {
                int64_t start;
                out->dim[d] = op == VF_OP_SLICE ? vf_slice_dim(x->dim[d], a->lo[d], a->hi[d], a->step[d], &start)
                                                : vf_pad_dim(x->dim[d], a->lo[d], a->hi[d], a->step[d]);
                if (op == VF_OP_SLICE && ((x->sym >> d) & 1u) && vf_slice_fixed(x->dim[d], a->lo[d], a->hi[d], a->step[d]))
                    out->sym &= ~(1u << d);
            }
            return VF_OK;
        }
        if (op == VF_OP_SLICE_GRAD) { /* the shape of in[1], of which in[0] is a slice */
            const vf_shape *like = &in[1];
            bool ok = like->rank == x->rank;
            for (int d = 0; ok && d < x->rank; d++) {
                int64_t start;
                ok = vf_slice_dim(like->dim[d], a->lo[d], a->hi[d], a->step[d], &start) == x->dim[d];
            }
            if (!ok) {
                char sa[96], sb[96];
                return vf_err_set(err, VF_ERROR_SHAPE, "vf_slice_grad: %s is not the shape of the slice of %s",
                                  sh(sa, sizeof sa, x), sh(sb, sizeof sb, like));
            }
            *out = *like;
            return VF_OK;
        }
        if (op == VF_OP_CONCAT) {
            const vf_shape *y = &in[1];
            bool ok = x->rank == y->rank && a->axis < x->rank;
            for (int d = 0; ok && d < x->rank; d++) ok = d == a->axis || x->dim[d] == y->dim[d];
            if (!ok) {
                char sa[96], sb[96];
                return vf_err_set(err, VF_ERROR_SHAPE, "vf_concat: shapes %s and %s differ outside axis %d; every "
                                  "input must have the same rank and the same size in every other dim",
                                  sh(sa, sizeof sa, x), sh(sb, sizeof sb, y), a->axis);
            }
            *out = *x;
            out->sym |= y->sym;
            out->dim[a->axis] = x->dim[a->axis] + y->dim[a->axis];
            return VF_OK;
        }
        *out = (vf_shape){.rank = x->rank};
        for (int d = 0; d < x->rank; d++) {
            out->dim[d] = x->dim[a->perm[d]];
            if ((x->sym >> a->perm[d]) & 1u) out->sym |= 1u << d;
        }
        return VF_OK;
    case VF_KIND_CONV:
        if (op >= VF_OP_MAX_POOL2D && op <= VF_OP_AVG_POOL2D_GRAD) return infer_pool(op, &a->conv, n_in, in, out, err);
        return infer_conv(op, &a->conv, &in[0], &in[1], out, err);
    case VF_KIND_SOURCE: break; /* the shape is given (the node's), not inferred */
    case VF_KIND_INDEX: return vf_infer_index(op, a, in, out, err);
    }
    return vf_err_set(err, VF_ERROR_UNSUPPORTED, "vf_%s: no shape rule from inputs", info->name);
}

/* A slice the trace gave a static size although its input's dim was
   symbolic (vf_slice_fixed): later nodes were traced with that size, so a
   call whose dim is too small to hold the slice (x[:1] of 0 elements) is
   refused here instead of giving them another. Only slices with both
   bounds on one side are checked (fixed at a size beyond any real bound). */
static vf_status slice_kept(const vf_node *n, const vf_shape *x, const vf_shape *out, vf_err *err)
{
    if (n->shape.rank != out->rank) return VF_OK;   /* not traced yet */
    const vf_attrs *a = &n->attrs;
    for (int d = 0; d < out->rank; d++) {
        if (((n->shape.sym >> d) & 1u) || out->dim[d] == n->shape.dim[d] ||
            !vf_slice_fixed((int64_t)1 << 61, a->lo[d], a->hi[d], a->step[d]))
            continue;
        char sa[96];
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_slice of %s: dim %d gives %lld elements at this call, but the "
                          "trace fixed it at %lld (both bounds count from one end of a symbolic dim); give that dim "
                          "at least as many elements as the slice reaches at every call, or, for a slice meant to "
                          "clamp, a fixed size in the input_signature", sh(sa, sizeof sa, x), d, (long long)out->dim[d], (long long)n->shape.dim[d]);
    }
    return VF_OK;
}

vf_status vf_infer(const vf_node *n, const vf_dtype *in_dt, const vf_shape *in, vf_dtype *dt,
                   vf_shape *out, vf_err *err)
{
    switch (n->kind) {
    case VF_NODE_OP:
        if (vf_op_get(n->op)->kind == VF_KIND_SOURCE) {
            if (n->n_in)
                return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_%s: %d inputs given; the op takes 0",
                                  vf_op_get(n->op)->name, n->n_in);
            *out = n->shape;
            *dt = n->dtype;
            return VF_OK;
        }
        if (vf_infer_op(n->op, &n->attrs, n->n_in, in_dt, in, dt, out, err) != VF_OK) return err->status;
        return n->op == VF_OP_SLICE ? slice_kept(n, &in[0], out, err) : VF_OK;
    case VF_NODE_RESHAPE:
        *dt = in_dt[0];
        return vf_infer_reshape(&in[0], &n->target, out, err);
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
    case VF_NODE_HOST:
        *out = in[0];
        *dt = in_dt[0];
        return VF_OK;
    default:
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "shape inference: a %s node has no local rule",
                          vf_node_kind_name(n->kind));
    }
}
