/* Entry points of matmul, reshape and transpose. */
#include "frontend/frontend.h"
#include "frontend/tape.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

vf_tensor *vf_matmul_ex(vf_context *ctx, vf_tensor *a, vf_tensor *b, bool ta, bool tb)
{
    VF_LOCKED(ctx);
    const char *name = "vf_matmul";
    if (!ctx || !a || !b) return NULL;
    if (!vf_check_input(ctx, name, a, 0) || !vf_check_input(ctx, name, b, 1)) return NULL;
    if (!vf_check_dtype(ctx, VF_OP_MATMUL, a, 0) || !vf_check_dtype(ctx, VF_OP_MATMUL, b, 1)) return NULL;
    if (a->dtype != b->dtype) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: operands are %s and %s; cast one with vf_cast", name,
                vf_dtype_name(a->dtype), vf_dtype_name(b->dtype));
        return NULL;
    }
    if (a->rank == 0 || b->rank == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: operand %d is a scalar; use vf_mul to scale", name,
                a->rank == 0 ? 0 : 1);
        return NULL;
    }
    /* Vectors become matrices as in NumPy; the added dims are dropped after. */
    vf_tref ra = vf_tensor_ref(a), rb = vf_tensor_ref(b);
    bool a_vec = a->rank == 1, b_vec = b->rank == 1;
    if (a_vec) { ra.rank = 2; ra.shape[1] = a->shape[0]; ra.shape[0] = 1; ta = false; }
    if (b_vec) { rb.rank = 2; rb.shape[0] = b->shape[0]; rb.shape[1] = 1; tb = false; }
    int64_t m = ta ? ra.shape[ra.rank - 1] : ra.shape[ra.rank - 2];
    int64_t k = ta ? ra.shape[ra.rank - 2] : ra.shape[ra.rank - 1];
    int64_t kb = tb ? rb.shape[rb.rank - 1] : rb.shape[rb.rank - 2];
    int64_t n = tb ? rb.shape[rb.rank - 2] : rb.shape[rb.rank - 1];
    char sa[VF_SHAPE_STR_LEN], sb[VF_SHAPE_STR_LEN];
    if (k != kb) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: inner dims differ: a %s%s has k=%lld, b %s%s has k=%lld; "
                "a's last dim must equal b's second-to-last (or use the transpose flags of vf_matmul_ex)",
                name, vf_shape_str(sa, sizeof sa, a->rank, a->shape), ta ? " (transposed)" : "",
                (long long)k, vf_shape_str(sb, sizeof sb, b->rank, b->shape), tb ? " (transposed)" : "",
                (long long)kb);
        return NULL;
    }
    /* batch dims broadcast */
    int batch_rank = (ra.rank > rb.rank ? ra.rank : rb.rank) - 2;
    int64_t shape[VF_MAX_RANK];
    for (int d = 0; d < batch_rank; d++) {
        int ia = d - (batch_rank - (ra.rank - 2)), ib = d - (batch_rank - (rb.rank - 2));
        int64_t da = ia >= 0 ? ra.shape[ia] : 1, db = ib >= 0 ? rb.shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: batch dims of a %s and b %s do not broadcast (%lld vs %lld)",
                    name, vf_shape_str(sa, sizeof sa, a->rank, a->shape),
                    vf_shape_str(sb, sizeof sb, b->rank, b->shape), (long long)da, (long long)db);
            return NULL;
        }
        shape[d] = da == 1 ? db : da;
    }
    int rank = batch_rank;
    int full_rank = batch_rank + 2;
    int64_t full[VF_MAX_RANK];
    memcpy(full, shape, sizeof(int64_t) * (size_t)batch_rank);
    full[batch_rank] = m;
    full[batch_rank + 1] = n;
    if (!a_vec) shape[rank++] = m;
    if (!b_vec) shape[rank++] = n;
    vf_tensor *out = vf_tensor_new(ctx, name, a->dtype, rank, shape);
    if (!out || out->numel == 0) return out;
    if (k == 0) {
        if (!vf_fill_into(ctx, out, vf_op_empty_value(VF_OP_MATMUL))) {
            vf_tensor_release(out);
            return NULL;
        }
        return out;
    }
    vf_exec e = {.op = VF_OP_MATMUL, .n_in = 2, .attrs.trans_a = ta, .attrs.trans_b = tb};
    e.in[0] = ra;
    e.in[1] = rb;
    e.out = vf_tensor_ref(out);
    e.out.rank = full_rank;
    memcpy(e.out.shape, full, sizeof full);
    if (ctx->trace) {
        out = vf_trace_exec(ctx, &e, out);
    } else {
        vf_status s = ctx->be.iface->exec(ctx->be.self, &e);
        if (s != VF_OK) {
            vf_backend_failed(ctx, s, "%s (%s backend)", name, ctx->be.iface->name);
            vf_tensor_release(out);
            return NULL;
        }
    }
    /* recorded here, not in vf_run: the exec's refs are the vector-expanded ones */
    vf_tensor *ab[2] = {a, b};
    vf_tape_record(ctx, VF_OP_MATMUL, &e.attrs, 2, ab, out);
    return out;
}

vf_tensor *vf_matmul(vf_context *ctx, vf_tensor *a, vf_tensor *b)
{
    VF_LOCKED(ctx);
    return vf_matmul_ex(ctx, a, b, false, false);
}

/* A copy of x into a fresh tensor of another shape (same numel). */
static vf_tensor *copy_as(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape)
{
    vf_tensor *out = vf_tensor_new(ctx, "vf_reshape", x->dtype, rank, shape);
    if (!out || out->numel == 0) return out;
    vf_exec e = {.op = VF_OP_COPY, .n_in = 1};
    e.in[0] = vf_tensor_ref(x);
    e.in[0].rank = out->rank;
    memcpy(e.in[0].shape, out->shape, sizeof out->shape);
    return vf_run(ctx, &e, out);
}

vf_tensor *vf_reshape(vf_context *ctx, vf_tensor *x, int rank, const int64_t *shape)
{
    VF_LOCKED(ctx);
    const char *name = "vf_reshape";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    if (rank < 0 || rank > VF_MAX_RANK || (rank > 0 && !shape)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: rank %d with shape %s is invalid", name, rank,
                shape ? "set" : "NULL");
        return NULL;
    }
    int64_t s[VF_MAX_RANK];
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < rank; i++) {
        s[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) {
                vf_fail(ctx, VF_ERROR_SHAPE, "%s: more than one dim is -1; at most one can be inferred", name);
                return NULL;
            }
            infer = i;
        } else if (shape[i] < 0) {
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: dim %d is %lld; dims must be >= 0 (or -1 to infer)", name, i,
                    (long long)shape[i]);
            return NULL;
        } else {
            known *= shape[i];
        }
    }
    if (infer >= 0 && known == 0) {
        char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: cannot reshape %s to %s: with a 0 among the other dims the -1 could be "
                "any size (ambiguous, as in NumPy); give that dim explicitly", name,
                vf_shape_str(a, sizeof a, x->rank, x->shape), vf_shape_str(b, sizeof b, rank, shape));
        return NULL;
    }
    if (infer >= 0) s[infer] = x->numel / known;
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) numel *= s[i];
    if (numel != x->numel || (infer >= 0 && known && x->numel % known)) {
        char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: cannot reshape %s (%lld elements) to %s; the element count "
                "must stay the same", name, vf_shape_str(a, sizeof a, x->rank, x->shape),
                (long long)x->numel, vf_shape_str(b, sizeof b, rank, shape));
        return NULL;
    }
    /* The copy of a variable is recorded as a reshape, not as its COPY. */
    ctx->tape_mute++;
    vf_tensor *out;
    if (ctx->trace) out = vf_trace_reshape(ctx, x, rank, shape, s); /* keeps the -1 */
    /* A variable's storage changes on assign; a view would see later values. */
    else if (x->is_variable) out = copy_as(ctx, x, rank, s);
    else out = vf_tensor_view(x, rank, s);
    ctx->tape_mute--;
    vf_attrs none = {0};
    vf_tape_record(ctx, VF_TAPE_RESHAPE, &none, 1, &x, out);
    return out;
}

vf_tensor *vf_transpose(vf_context *ctx, vf_tensor *x, const int *perm)
{
    VF_LOCKED(ctx);
    const char *name = "vf_transpose";
    if (!ctx || !x) return NULL;
    if (!vf_check_input(ctx, name, x, 0)) return NULL;
    int p[VF_MAX_RANK];
    uint32_t seen = 0;
    for (int i = 0; i < x->rank; i++) {
        p[i] = perm ? perm[i] : x->rank - 1 - i;
        int a = p[i] < 0 ? p[i] + x->rank : p[i];
        if (a < 0 || a >= x->rank || (seen & (1u << a))) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: perm is not a permutation of 0..%d (entry %d is %d)",
                    name, x->rank - 1, i, p[i]);
            return NULL;
        }
        seen |= 1u << a;
        p[i] = a;
    }
    int64_t shape[VF_MAX_RANK];
    bool identity = true;
    for (int i = 0; i < x->rank; i++) {
        shape[i] = x->shape[p[i]];
        identity = identity && p[i] == i;
    }
    if (identity && !x->is_variable) return vf_tensor_view(x, x->rank, shape);
    vf_tensor *out = vf_tensor_new(ctx, name, x->dtype, x->rank, shape);
    if (!out || out->numel == 0) return out;
    vf_exec e = {.op = identity ? VF_OP_COPY : VF_OP_TRANSPOSE, .n_in = 1};
    memcpy(e.attrs.perm, p, sizeof p);
    e.in[0] = vf_tensor_ref(x);
    return vf_run(ctx, &e, out);
}
