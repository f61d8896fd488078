/* Entry points of the indexing ops (issue 13): gather and scatter_add.
 * Argument checks and normalisation (negative axes), the empty cases the
 * backends never see, then one vf_exec (vf_run: eager, traced, taped). */
#include "frontend/frontend.h"
#include "util/dtype.h"

#include <string.h>

/* x and indices usable, the indices i32 or u32, the axis normalised. */
static bool index_args(vf_context *ctx, const char *name, vf_op op, vf_tensor *x, vf_tensor *indices, int axis,
                       int *a)
{
    if (!vf_check_input(ctx, name, x, 0) || !vf_check_input(ctx, name, indices, 1)) return false;
    if (!vf_check_dtype(ctx, op, x, 0) || !vf_check_dtype(ctx, op, indices, 1)) return false;
    if (x->rank == 0) {
        vf_fail(ctx, VF_ERROR_SHAPE, "%s: x is a scalar; it needs rank >= 1 (reshape it to [1])", name);
        return false;
    }
    return vf_norm_axis(ctx, name, axis, x->rank, a);
}

vf_tensor *vf_gather(vf_context *ctx, vf_tensor *x, vf_tensor *indices, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_gather";
    if (!ctx || !x || !indices) return NULL;
    int a;
    if (!index_args(ctx, name, VF_OP_GATHER, x, indices, axis, &a)) return NULL;
    vf_exec e = {.op = VF_OP_GATHER, .n_in = 2, .attrs.axis = a};
    e.in[0] = vf_tensor_ref(x);
    e.in[1] = vf_tensor_ref(indices);
    vf_dtype dt;
    int rank;
    int64_t shape[VF_MAX_RANK];
    if (!vf_infer_refs(ctx, VF_OP_GATHER, &e.attrs, 2, e.in, &dt, &rank, shape)) return NULL;
    vf_tensor *out = vf_tensor_new(ctx, name, dt, rank, shape);
    if (!out || out->numel == 0) return out;
    if (x->shape[a] == 0) { /* indices but nothing to index: each of them is out of range */
        char xs[VF_SHAPE_STR_LEN];
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: axis %d of x %s has size 0, so every index is out of range",
                name, axis, vf_shape_str(xs, sizeof xs, x->rank, x->shape));
        vf_tensor_release(out);
        return NULL;
    }
    return vf_run(ctx, &e, out);
}

vf_tensor *vf_scatter_add(vf_context *ctx, vf_tensor *x, vf_tensor *indices, vf_tensor *updates, int axis)
{
    VF_LOCKED(ctx);
    const char *name = "vf_scatter_add";
    if (!ctx || !x || !indices || !updates) return NULL;
    int a;
    if (!index_args(ctx, name, VF_OP_SCATTER_ADD, x, indices, axis, &a)) return NULL;
    if (!vf_check_input(ctx, name, updates, 2) || !vf_check_dtype(ctx, VF_OP_SCATTER_ADD, updates, 2)) return NULL;
    vf_exec e = {.op = VF_OP_SCATTER_ADD, .n_in = 3, .attrs.axis = a};
    e.in[0] = vf_tensor_ref(x);
    e.in[1] = vf_tensor_ref(indices);
    e.in[2] = vf_tensor_ref(updates);
    vf_dtype dt;
    int rank;
    int64_t shape[VF_MAX_RANK];
    if (!vf_infer_refs(ctx, VF_OP_SCATTER_ADD, &e.attrs, 3, e.in, &dt, &rank, shape)) return NULL;
    vf_tensor *out = vf_tensor_new(ctx, name, dt, rank, shape);
    if (!out || out->numel == 0) return out;
    if (updates->numel == 0) { /* nothing to add: x itself (its gradient the identity's) */
        vf_exec c = {.op = VF_OP_COPY, .n_in = 1};
        c.in[0] = vf_tensor_ref(x);
        return vf_run(ctx, &c, out);
    }
    return vf_run(ctx, &e, out);
}
