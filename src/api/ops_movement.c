/* Entry points of the movement ops: slice, pad and concat run the window
 * ops of the op table (one kernel each, backend.h vf_window); the others
 * are built from them and from reshape and where, so that they trace,
 * fuse and differentiate as those do:
 * - stack: expand_dims of every part, then concat;
 * - split: slices;
 * - broadcast_to: where(true of the broadcast shape, x, x), an elementwise
 *   op that fuses with its consumers (its gradient sums the broadcast dims);
 * - tile: x with a size-1 dim before each tiled dim, broadcast there, and
 *   the pairs merged back (a reshape);
 * - expand_dims / squeeze: reshapes (views).
 * Concat of n parts is a balanced tree of binary concats (in[3] bounds an
 * exec's inputs): every element is copied about log2(n) times. */
#include "api/api.h"
#include "api/hooks.h"

#include <stdio.h>
#include <string.h>

/* A reshape of x to (rank, shape) that keeps one symbolic dim variable:
   sym_at is the result dim that follows x's symbolic dim (-1: none). */
static vf_tensor *reshape_sym(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape, int sym_at)
{
    int64_t s[VF_MAX_RANK];
    memcpy(s, shape, sizeof(int64_t) * (size_t)rank);
    if (sym_at >= 0 && ctx->trace) s[sym_at] = -1;
    return vf_reshape(ctx, x, rank, s);
}

static int one_sym(vf_context *ctx, const char *op, uint32_t sym)
{
    if (sym & (sym - 1)) {
        vf_fail(ctx, VF_ERROR_UNSUPPORTED, "%s: the input has more than one symbolic (-1) dim while tracing; a "
                "reshape can follow only one — give the others fixed sizes in the input_signature", op);
        return -2;
    }
    for (int d = 0; d < VF_MAX_RANK; d++)
        if ((sym >> d) & 1u) return d;
    return -1;
}

/* The status of the error an op recorded (one is, when it returned NULL). */
static vf_status failed(vf_context *ctx) { return ctx->err.status ? ctx->err.status : VF_ERROR_INVALID_ARGUMENT; }

/* Runs window op e (attrs set, inputs in e->in) into a new tensor. */
static vf_tensor *run_window(vf_context *ctx, const char *name, vf_exec *e)
{
    return vf_op_tail(ctx, name, e, true);
}

/* ---- slice ---------------------------------------------------------------- */

/* The eager slice as a view of x when its elements are one contiguous
   block of x at an offset that any device can bind (256 bytes: the
   largest minStorageBufferOffsetAlignment Vulkan allows); NULL otherwise,
   without an error. */
static vf_tensor *slice_view(vf_context *ctx, vf_tensor *x, const vf_attrs *a, int rank, const int64_t *shape)
{
    if (ctx->trace || x->is_variable || !x->st) return NULL;
    int64_t xs[VF_MAX_RANK], s = 1, off = 0, want = 1;
    for (int d = rank - 1; d >= 0; d--) {
        xs[d] = s;
        s *= x->shape[d];
    }
    for (int d = rank - 1; d >= 0; d--) {
        int64_t start;
        vf_slice_dim(x->shape[d], a->lo[d], a->hi[d], a->step[d], &start);
        off += start * xs[d];
        if (shape[d] > 1 && a->step[d] * xs[d] != want) return NULL;
        want *= shape[d];
    }
    size_t bytes = (size_t)off * vf_dtype_size(x->dtype);
    if ((x->offset + bytes) % 256 != 0) return NULL;
    vf_tensor *v = vf_tensor_view(x, rank, shape);
    if (v) v->offset += bytes;
    return v;
}

vf_tensor *vf_slice(vf_context *ctx, vf_tensor *x, const int64_t *begin, const int64_t *end, const int64_t *step)
{
    VF_LOCKED(ctx);
    const char *name = "vf_slice";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    vf_exec e = {.op = VF_OP_SLICE, .n_in = 1};
    for (int d = 0; d < x->rank; d++) {
        int64_t st = step ? step[d] : 1;
        /* INT64_MIN is refused rather than taken: the window arithmetic
           walks a negative step as -step, which it cannot negate */
        if (st == 0 || st == INT64_MIN) {
            if (st == 0)
                vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: step[%d] is 0; a step must be non-zero (negative steps "
                        "walk backwards)", name, d);
            else
                vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: step[%d] is INT64_MIN (%lld), which has no negation; "
                        "a negative step must be >= -INT64_MAX (-INT64_MAX takes the same one element)", name, d,
                        (long long)st);
            return NULL;
        }
        e.attrs.step[d] = st;
        e.attrs.lo[d] = begin ? begin[d] : st > 0 ? 0 : INT64_MAX;
        e.attrs.hi[d] = end ? end[d] : INT64_MAX;
    }
    e.in[0] = vf_tensor_ref(x);
    vf_dtype dt;
    int rank;
    int64_t shape[VF_MAX_RANK];
    if (!vf_infer_refs(ctx, VF_OP_SLICE, &e.attrs, 1, e.in, &dt, &rank, shape)) return NULL;
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) numel *= shape[d];
    if (numel > 0) {
        vf_tensor *v = slice_view(ctx, x, &e.attrs, rank, shape);
        if (v) {
            vf_note(ctx, VF_OP_SLICE, &e.attrs, 1, &x, v);
            return v;
        }
    }
    return run_window(ctx, name, &e);
}

vf_status vf_split(vf_context *ctx, vf_tensor *x, int n, const int64_t *sizes, int axis, vf_tensor **out)
{
    VF_LOCKED(ctx);
    const char *name = "vf_split";
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    if (!out || n < 1) {
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d parts into %s; give n >= 1 and an array of n "
                       "tensor pointers", name, n, out ? "out" : "NULL");
    }
    for (int i = 0; i < n; i++) out[i] = NULL;
    if (!x) return failed(ctx);
    if (!vf_check_input(ctx, name, x, 0)) return failed(ctx);
    int ax;
    if (!vf_norm_axis(ctx, name, axis, x->rank, &ax)) return failed(ctx);
    int64_t dim = x->shape[ax], part[4096], *p = part;
    if (n > 4096)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d parts; at most 4096", name, n);
    if (!sizes) {
        if (dim % n != 0)
            return vf_fail(ctx, VF_ERROR_SHAPE, "%s: dim %d of size %lld does not split into %d equal parts; give "
                           "the sizes instead", name, ax, (long long)dim, n);
        for (int i = 0; i < n; i++) p[i] = dim / n;
    } else {
        int infer = -1;
        int64_t known = 0;
        for (int i = 0; i < n; i++) {
            if (sizes[i] == -1 && infer < 0) {
                infer = i;
                continue;
            }
            if (sizes[i] < 0)
                return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: sizes[%d] is %lld; sizes are >= 0, one may be "
                               "-1 (the rest)", name, i, (long long)sizes[i]);
            p[i] = sizes[i];
            known += sizes[i];
        }
        if (infer >= 0) p[infer] = dim - known;
        if ((infer >= 0 && known > dim) || (infer < 0 && known != dim))
            return vf_fail(ctx, VF_ERROR_SHAPE, "%s: the sizes add up to %lld but dim %d has %lld elements", name,
                           (long long)known, ax, (long long)dim);
    }
    int64_t b[VF_MAX_RANK], e[VF_MAX_RANK], at = 0;
    for (int d = 0; d < x->rank; d++) b[d] = 0, e[d] = INT64_MAX;
    /* A symbolic dim varies from call to call: the part given as -1 takes
       what varies, the parts after it are placed from the end (negative
       bounds), so that every call splits right. Equal parts or sizes
       without a -1 cannot follow it. */
    bool sym = (vf_sym_dims(ctx, x, name) >> ax) & 1u;
    int var = -1;
    for (int i = 0; sizes && i < n && var < 0; i++)
        if (sizes[i] == -1) var = i;
    if (sym && n > 1 && var < 0)
        return vf_fail(ctx, VF_ERROR_UNSUPPORTED, "%s: dim %d is symbolic (-1) in the input_signature, so %s cannot "
                       "split it at every size; give the sizes with -1 for the part that varies", name, ax,
                       sizes ? "sizes without a -1" : "equal parts");
    int64_t after_var = 0;   /* elements after the varying part */
    for (int i = var + 1; sym && var >= 0 && i < n; i++) after_var += p[i];
    for (int i = 0; i < n; i++) {
        b[ax] = at;
        e[ax] = at + p[i];
        if (sym && var >= 0 && i >= var) { /* from the end: -after_var .. */
            int64_t rest = after_var;   /* elements after part i */
            for (int j = var + 1; j <= i; j++) rest -= p[j];
            b[ax] = i == var ? at : rest + p[i] ? -(rest + p[i]) : INT64_MAX;   /* MAX: empty at the end */
            e[ax] = rest ? -rest : INT64_MAX;
        }
        at += p[i];
        out[i] = vf_slice(ctx, x, b, e, NULL);
        if (!out[i]) {
            for (int j = 0; j < i; j++) {
                vf_tensor_release(out[j]);
                out[j] = NULL;
            }
            return failed(ctx);
        }
    }
    return VF_OK;
}

/* ---- pad ------------------------------------------------------------------ */

vf_tensor *vf_pad(vf_context *ctx, vf_tensor *x, const int64_t *before, const int64_t *after, double value)
{
    VF_LOCKED(ctx);
    const char *name = "vf_pad";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    vf_exec e = {.op = VF_OP_PAD, .n_in = 1, .attrs.value = value};
    for (int d = 0; d < x->rank; d++) {
        e.attrs.lo[d] = before ? before[d] : 0;
        e.attrs.hi[d] = after ? after[d] : 0;
        e.attrs.step[d] = 1;
        if (e.attrs.lo[d] < 0 || e.attrs.hi[d] < 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: dim %d pads %lld before and %lld after; amounts must be "
                    ">= 0 (use vf_slice to cut)", name, d, (long long)e.attrs.lo[d], (long long)e.attrs.hi[d]);
            return NULL;
        }
    }
    e.in[0] = vf_tensor_ref(x);
    if (x->numel == 0 && !ctx->trace) { /* nothing to read: all value */
        vf_dtype dt;
        int rank;
        int64_t shape[VF_MAX_RANK];
        if (!vf_infer_refs(ctx, VF_OP_PAD, &e.attrs, 1, e.in, &dt, &rank, shape)) return NULL;
        vf_tensor *out = vf_fill(ctx, dt, rank, shape, value);
        if (out) vf_note_constant(ctx, out);
        return out;
    }
    return run_window(ctx, name, &e);
}

vf_tensor *vf_slice_grad(vf_context *ctx, vf_tensor *g, vf_tensor *x, const vf_attrs *a)
{
    if (!g || !x) return NULL;
    vf_exec e = {.op = VF_OP_SLICE_GRAD, .n_in = 2};
    memcpy(e.attrs.lo, a->lo, sizeof e.attrs.lo);
    memcpy(e.attrs.hi, a->hi, sizeof e.attrs.hi);
    memcpy(e.attrs.step, a->step, sizeof e.attrs.step);
    e.in[0] = vf_tensor_ref(g);
    e.in[1] = vf_tensor_ref(x);
    if (g->numel == 0 && !ctx->trace) { /* an empty slice: nothing flows back */
        vf_tensor *out = vf_fill(ctx, g->dtype, x->rank, x->shape, 0.0);
        if (out) vf_note_constant(ctx, out);
        return out;
    }
    return run_window(ctx, "vf_slice_grad", &e);
}
/* ---- concat and stack ----------------------------------------------------- */

static vf_tensor *concat2(vf_context *ctx, vf_tensor *a, vf_tensor *b, int axis)
{
    if (!a || !b) return NULL;
    vf_exec e = {.op = VF_OP_CONCAT, .n_in = 2, .attrs.axis = axis};
    e.in[0] = vf_tensor_ref(a);
    e.in[1] = vf_tensor_ref(b);
    return run_window(ctx, "vf_concat", &e);
}

static vf_tensor *concat_tree(vf_context *ctx, int n, vf_tensor *const *xs, int axis)
{
    if (n == 1) return xs[0];
    int h = n / 2;
    return concat2(ctx, concat_tree(ctx, h, xs, axis), concat_tree(ctx, n - h, xs + h, axis), axis);
}

/* Checks the parts: live, of x0's dtype and rank, and (same_shape) of x0's
   shape or (else) of its sizes outside axis. */
static bool check_parts(vf_context *ctx, const char *name, int n, vf_tensor *const *xs, int axis, bool same_shape)
{
    vf_tensor *x0 = xs[0];
    for (int i = 0; i < n; i++) {
        if (!vf_check_input(ctx, name, xs[i], i)) return false;
        bool ok = xs[i]->rank == x0->rank;
        for (int d = 0; ok && d < x0->rank; d++) ok = (!same_shape && d == axis) || xs[i]->shape[d] == x0->shape[d];
        if (xs[i]->dtype != x0->dtype) {
            vf_fail(ctx, VF_ERROR_DTYPE, "%s: input %d is %s but input 0 is %s; every input must have one dtype "
                    "(vf_cast)", name, i, vf_dtype_name(xs[i]->dtype), vf_dtype_name(x0->dtype));
            return false;
        }
        if (!ok) {
            char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: input %d is %s but input 0 is %s; %s", name, i,
                    vf_shape_str(a, sizeof a, xs[i]->rank, xs[i]->shape), vf_shape_str(b, sizeof b, x0->rank, x0->shape),
                    same_shape ? "every input must have the same shape"
                               : "every input must have the same rank and the same size outside the axis");
            return false;
        }
    }
    return true;
}

static bool check_list(vf_context *ctx, const char *name, int n, vf_tensor *const *xs)
{
    if (n < 1 || !xs) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d inputs (xs %s); give n >= 1 tensors", name, n,
                xs ? "set" : "NULL");
        return false;
    }
    for (int i = 0; i < n; i++)
        if (!xs[i]) return false;   /* an earlier error: NULL in, NULL out */
    return true;
}

vf_tensor *vf_concat(vf_context *ctx, int n, vf_tensor *const *xs, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_concat";
    if (!ctx || !check_list(ctx, name, n, xs)) return NULL;
    int r = xs[0]->rank;
    if (!vf_check_input(ctx, name, xs[0], 0)) return NULL;
    if (r == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: input 0 is a scalar; concat joins along an axis (vf_stack joins scalars)",
                name);
        return NULL;
    }
    int ax;
    if (!vf_norm_axis(ctx, name, axis, r, &ax) || !check_parts(ctx, name, n, xs, ax, false)) return NULL;
    /* eagerly, empty parts add nothing (kernels never see empty tensors);
       traced, they stay: a symbolic part may be empty at one call only */
    vf_tensor *keep[64], **parts = keep;
    int m = 0;
    if (n > 64) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d inputs; at most 64 (concatenate groups of them)", name, n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (ctx->trace || xs[i]->numel > 0) parts[m++] = xs[i];
    if (m == 0) {
        int64_t shape[VF_MAX_RANK];
        memcpy(shape, xs[0]->shape, sizeof shape);
        shape[ax] = 0;
        for (int i = 0; i < n; i++) shape[ax] += xs[i]->shape[ax];
        vf_tensor *out = vf_tensor_new(ctx, name, xs[0]->dtype, r, shape);
        if (out) vf_note_constant(ctx, out);
        return out;
    }
    if (m == 1) return vf_reshape(ctx, parts[0], r, parts[0]->shape);   /* a view (a copy of a variable) */
    return concat_tree(ctx, m, parts, ax);
}

vf_tensor *vf_expand_dims(vf_context *ctx, vf_tensor *x, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_expand_dims";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    int ax;
    if (x->rank >= VF_MAX_RANK) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: x has rank %d already; at most %d dims", name, x->rank, VF_MAX_RANK);
        return NULL;
    }
    if (!vf_norm_axis(ctx, name, axis, x->rank + 1, &ax)) return NULL;
    int sd = one_sym(ctx, name, vf_sym_dims(ctx, x, name));
    if (sd == -2) return NULL;
    int64_t s[VF_MAX_RANK];
    for (int d = 0, k = 0; d <= x->rank; d++) s[d] = d == ax ? 1 : x->shape[k++];
    return reshape_sym(ctx, x, x->rank + 1, s, sd < 0 ? -1 : sd + (sd >= ax));
}

vf_tensor *vf_squeeze(vf_context *ctx, vf_tensor *x, int naxes, const int *axes)
{
    VF_LOCKED(ctx);
    const char *name = "vf_squeeze";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    if (naxes < 0 || naxes > x->rank || (naxes > 0 && !axes)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d axes (axes %s) for a rank-%d tensor", name, naxes,
                axes ? "set" : "NULL", x->rank);
        return NULL;
    }
    uint32_t sym = vf_sym_dims(ctx, x, name), drop = 0;
    for (int i = 0; i < naxes; i++) {
        int ax;
        if (!vf_norm_axis(ctx, name, axes[i], x->rank, &ax)) return NULL;
        if (x->shape[ax] != 1 || ((sym >> ax) & 1u)) {
            char b[VF_SHAPE_STR_LEN];
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: dim %d of %s is %s, not 1; only size-1 dims can be removed", name, ax,
                    vf_shape_str(b, sizeof b, x->rank, x->shape), (sym >> ax) & 1u ? "symbolic" : "larger");
            return NULL;
        }
        drop |= 1u << ax;
    }
    if (naxes == 0)
        for (int d = 0; d < x->rank; d++)
            if (x->shape[d] == 1 && !((sym >> d) & 1u)) drop |= 1u << d;
    int sd = one_sym(ctx, name, sym);
    if (sd == -2) return NULL;
    int64_t s[VF_MAX_RANK];
    int r = 0, at = -1;
    for (int d = 0; d < x->rank; d++)
        if (!((drop >> d) & 1u)) {
            if (d == sd) at = r;
            s[r++] = x->shape[d];
        }
    return reshape_sym(ctx, x, r, s, at);
}

vf_tensor *vf_stack(vf_context *ctx, int n, vf_tensor *const *xs, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_stack";
    if (!ctx || !check_list(ctx, name, n, xs)) return NULL;
    if (!vf_check_input(ctx, name, xs[0], 0)) return NULL;
    int ax;
    if (!vf_norm_axis(ctx, name, axis, xs[0]->rank + 1, &ax) || !check_parts(ctx, name, n, xs, 0, true)) return NULL;
    if (n > 64) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: %d inputs; at most 64 (stack groups of them)", name, n);
        return NULL;
    }
    vf_tensor *parts[64];
    for (int i = 0; i < n; i++)
        if (!(parts[i] = vf_expand_dims(ctx, xs[i], ax))) return NULL;
    return vf_concat(ctx, n, parts, ax);
}

/* ---- broadcast_to and tile ------------------------------------------------ */

/* x broadcast to shape (rank >= x's, sizes checked): where(true, x, x)
   with the true of the broadcast dims only (1 elsewhere), so the result
   keeps x's symbolic dims. */
static vf_tensor *broadcast(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape)
{
    int64_t c[VF_MAX_RANK];
    bool any = rank != x->rank;
    for (int d = 0; d < rank; d++) {
        int k = d - (rank - x->rank);
        c[d] = k >= 0 && x->shape[k] == shape[d] ? 1 : shape[d];
        any = any || c[d] != 1;
    }
    if (!any) return vf_reshape(ctx, x, x->rank, x->shape);
    vf_tensor *t = vf_fill(ctx, VF_BOOL, rank, c, 1.0);
    return vf_where(ctx, t, x, x);
}

vf_tensor *vf_broadcast_to(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape)
{
    VF_LOCKED(ctx);
    const char *name = "vf_broadcast_to";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    if (rank < x->rank || rank > VF_MAX_RANK || (rank > 0 && !shape)) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: target rank %d (shape %s) for a rank-%d input; the target needs at "
                "least x's rank and at most %d", name, rank, shape ? "set" : "NULL", x->rank, VF_MAX_RANK);
        return NULL;
    }
    int64_t s[VF_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        int k = d - (rank - x->rank);
        s[d] = shape[d] == -1 && k >= 0 ? x->shape[k] : shape[d];
        if (s[d] < 0 || (k >= 0 && x->shape[k] != s[d] && x->shape[k] != 1)) {
            char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: %s does not broadcast to %s (dim %d); x's dims must equal the "
                    "target's last dims or be 1 (-1 keeps x's size)", name,
                    vf_shape_str(a, sizeof a, x->rank, x->shape), vf_shape_str(b, sizeof b, rank, shape), d);
            return NULL;
        }
    }
    return broadcast(ctx, x, rank, s);
}

vf_tensor *vf_tile(vf_context *ctx, vf_tensor *x, const int64_t *reps)
{
    VF_LOCKED(ctx);
    const char *name = "vf_tile";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    if (x->rank > 0 && !reps) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: reps is NULL; give one count per dim", name);
        return NULL;
    }
    uint32_t sym = vf_sym_dims(ctx, x, name);
    int sd = one_sym(ctx, name, sym);
    if (sd == -2) return NULL;
    /* [.., n, ..] -> [.., 1, n, ..] for each tiled dim, broadcast to
       [.., r, n, ..], merged to [.., r * n, ..] */
    int64_t split[VF_MAX_RANK], wide[VF_MAX_RANK], out[VF_MAX_RANK];
    int r2 = 0, sym_split = -1;
    for (int d = 0; d < x->rank; d++) {
        if (reps[d] < 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: reps[%d] is %lld; counts are >= 0", name, d,
                    (long long)reps[d]);
            return NULL;
        }
        out[d] = reps[d] * x->shape[d];
        if (reps[d] != 1) {
            if (r2 >= VF_MAX_RANK) {
                vf_fail(ctx, VF_ERROR_UNSUPPORTED, "%s: tiling %d dims of a rank-%d tensor needs more than %d dims "
                        "on the way; tile fewer dims at once", name, x->rank, x->rank, VF_MAX_RANK);
                return NULL;
            }
            split[r2] = 1;
            wide[r2++] = reps[d];
        }
        if (d == sd) sym_split = r2;
        split[r2] = x->shape[d];
        wide[r2++] = x->shape[d];
    }
    if (r2 == x->rank) return vf_reshape(ctx, x, x->rank, x->shape);
    vf_tensor *t = reshape_sym(ctx, x, r2, split, sym_split);
    t = t ? broadcast(ctx, t, r2, wide) : NULL;
    return t ? reshape_sym(ctx, t, x->rank, out, sd) : NULL;
}
