/* Entry points of matmul, reshape and transpose. */
#include "api/api.h"
#include "api/hooks.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

vf_tensor *vf_matmul_ex(vf_context *ctx, vf_tensor *a, vf_tensor *b, bool ta, bool tb)
{
    VF_LOCKED(ctx);
    const char *name = "vf_matmul";
    if (!ctx || !a || !b) return NULL;
    if (!vf_check_input(ctx, name, a, 0) || !vf_check_input(ctx, name, b, 1)) return NULL;
    /* dtypes first (the engine checks them again): their message comes first */
    if (!vf_check_dtype(ctx, VF_OP_MATMUL, a, 0) || !vf_check_dtype(ctx, VF_OP_MATMUL, b, 1)) return NULL;
    if (a->rank == 0 || b->rank == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: operand %d is a scalar; use vf_mul to scale", name,
                a->rank == 0 ? 0 : 1);
        return NULL;
    }
    /* Vectors become matrices as in NumPy; the added dims are dropped after. */
    vf_exec e = {.op = VF_OP_MATMUL, .n_in = 2};
    vf_tref *ra = &e.in[0], *rb = &e.in[1];
    *ra = vf_tensor_ref(a);
    *rb = vf_tensor_ref(b);
    bool a_vec = a->rank == 1, b_vec = b->rank == 1;
    if (a_vec) { ra->rank = 2; ra->shape[1] = a->shape[0]; ra->shape[0] = 1; ta = false; }
    if (b_vec) { rb->rank = 2; rb->shape[0] = b->shape[0]; rb->shape[1] = 1; tb = false; }
    e.attrs.trans_a = ta;
    e.attrs.trans_b = tb;
    vf_dtype dt;
    int full_rank;
    int64_t full[VF_MAX_RANK];
    if (!vf_infer_refs(ctx, VF_OP_MATMUL, &e.attrs, 2, e.in, &dt, &full_rank, full)) return NULL;
    int64_t k = ta ? ra->shape[ra->rank - 2] : ra->shape[ra->rank - 1];
    int rank = full_rank - 2;
    int64_t shape[VF_MAX_RANK];
    memcpy(shape, full, sizeof(int64_t) * (size_t)rank);
    if (!a_vec) shape[rank++] = full[full_rank - 2];
    if (!b_vec) shape[rank++] = full[full_rank - 1];
    vf_tensor *out = vf_tensor_new(ctx, name, dt, rank, shape);
    if (!out || out->numel == 0) return out;
    if (k == 0) { /* the row's value over an empty set */
        if (!vf_fill_into(ctx, out, vf_op_empty_value(VF_OP_MATMUL))) {
            vf_tensor_release(out);
            return NULL;
        }
        return out;
    }
    e.out = vf_tensor_ref(out);
    e.out.rank = full_rank;
    memcpy(e.out.shape, full, sizeof full);
    if (ctx->trace) {
        out = vf_tracer_of(ctx)->exec(ctx, &e, out);
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
    vf_note(ctx, VF_OP_MATMUL, &e.attrs, 2, ab, out);
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
    vf_shape from = {.rank = x->rank}, target = {.rank = rank}, to;
    memcpy(from.dim, x->shape, sizeof(int64_t) * (size_t)x->rank);
    bool infer = false;
    for (int i = 0; i < rank; i++) {
        target.dim[i] = shape[i];
        if (shape[i] == -1) {
            if (infer) {
                vf_fail(ctx, VF_ERROR_SHAPE, "%s: more than one dim is -1; at most one can be inferred", name);
                return NULL;
            }
            infer = true;
        } else if (shape[i] < 0) {
            vf_fail(ctx, VF_ERROR_SHAPE, "%s: dim %d is %lld; dims must be >= 0 (or -1 to infer)", name, i,
                    (long long)shape[i]);
            return NULL;
        }
    }
    vf_err err = {0};
    if (vf_infer_reshape(&from, &target, &to, &err) != VF_OK) {
        vf_fail(ctx, err.status, "%s", err.message);
        return NULL;
    }
    const int64_t *s = to.dim;
    /* The copy of a variable is recorded as a reshape, not as its COPY. */
    ctx->tape_mute++;
    vf_tensor *out;
    if (ctx->trace) out = vf_tracer_of(ctx)->reshape(ctx, x, rank, shape, s); /* keeps the -1 */
    /* A variable's storage changes on assign; a view would see later values. */
    else if (x->is_variable) out = copy_as(ctx, x, rank, s);
    else out = vf_tensor_view(x, rank, s);
    ctx->tape_mute--;
    vf_attrs none = {0};
    vf_note(ctx, VF_TAPE_RESHAPE, &none, 1, &x, out);
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
    bool identity = true;
    for (int i = 0; i < x->rank; i++) identity = identity && p[i] == i;
    if (identity && !x->is_variable) return vf_tensor_view(x, x->rank, x->shape);
    vf_exec e = {.op = VF_OP_TRANSPOSE, .n_in = 1};
    memcpy(e.attrs.perm, p, sizeof p);
    e.in[0] = vf_tensor_ref(x);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, false, &empty);
    if (!out) return empty;
    if (identity) e.op = VF_OP_COPY; /* a variable's copy */
    return vf_run(ctx, &e, out);
}

/* Here with vf_reshape (not with the gradient rules that use it most), so
   that the op entry points (vf_take's index column) need nothing above. */
vf_tensor *vf_ad_reshape(vf_context *ctx, vf_tensor *g, int rank, const int64_t *shape)
{
    if (!g) return NULL;
    int64_t s[VF_MAX_RANK];
    bool inferred = !ctx->trace;
    for (int i = 0; i < rank; i++) {
        s[i] = shape[i];
        if (!inferred && shape[i] != 1 && shape[i] != 0) {
            s[i] = -1;
            inferred = true;
        }
    }
    return vf_reshape(ctx, g, rank, s);
}
