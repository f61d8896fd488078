/* Variables: tensors whose storage is overwritten in place by assigns.
 *
 * Reads are ordered with writes by the backend's queue (ops run in call
 * order), so an op that read a variable before an assign sees the old
 * value. Views never alias a variable (reshape/transpose copy), so an
 * assign changes only the variable itself. */
#include "api/api.h"
#include "function/trace.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

vf_tensor *vf_variable(vf_context *ctx, vf_tensor *initial)
{
    VF_LOCKED(ctx);
    if (!ctx || !initial) return NULL;
    if (!vf_check_input(ctx, "vf_variable", initial, 0)) return NULL;
    if (ctx->trace) {
        vf_fail(ctx, VF_ERROR_TRACE, "vf_variable: called while tracing a vf_function; create "
                "variables outside the function body and use them there (they are captured by reference)");
        return NULL;
    }
    vf_tensor *v = vf_tensor_new(ctx, "vf_variable", initial->dtype, initial->rank, initial->shape);
    if (!v) return NULL;
    v->is_variable = true;
    if (v->numel == 0) return v;
    vf_exec e = {.op = VF_OP_COPY, .n_in = 1};
    e.in[0] = vf_tensor_ref(initial);
    return vf_run(ctx, &e, v);
}

static vf_status assign_op(vf_op op, const char *name, vf_tensor *var, vf_tensor *value)
{
    if (!var) return VF_ERROR_INVALID_ARGUMENT;
    if (!vf_check_alive(NULL, name, var, 0)) return vf_tensor_dead_status(var);
    vf_context *ctx = var->ctx;
    if (!value) {
        /* a failed expression upstream: its error is already recorded */
        if (ctx->err.status != VF_OK) return ctx->err.status;
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: value is NULL", name);
    }
    if (!vf_check_input(ctx, name, value, 1)) return ctx->err.status;
    if (!var->is_variable)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                       "%s: the target is not a variable; make it with vf_variable(ctx, initial)", name);
    char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
    if (value->dtype != var->dtype)
        return vf_fail(ctx, VF_ERROR_DTYPE, "%s: variable is %s %s but value is %s; cast the value with vf_cast",
                       name, vf_dtype_name(var->dtype), vf_shape_str(a, sizeof a, var->rank, var->shape),
                       vf_dtype_name(value->dtype));
    /* value must broadcast to the variable's shape, which never changes */
    bool ok = value->rank <= var->rank;
    for (int i = 0; ok && i < value->rank; i++) {
        int64_t vs = value->shape[value->rank - 1 - i], ts = var->shape[var->rank - 1 - i];
        ok = vs == ts || vs == 1;
    }
    if (!ok)
        return vf_fail(ctx, VF_ERROR_SHAPE, "%s: value %s does not broadcast to the variable's shape %s; a "
                       "variable keeps its shape", name, vf_shape_str(b, sizeof b, value->rank, value->shape),
                       vf_shape_str(a, sizeof a, var->rank, var->shape));
    if (op != VF_OP_COPY && !vf_check_dtype(ctx, op, var, 0)) return ctx->err.status;
    if (var->numel == 0) return VF_OK;
    vf_exec e = {.op = op, .n_in = op == VF_OP_COPY ? 1 : 2};
    if (op == VF_OP_COPY) {
        e.in[0] = vf_tensor_ref(value);
    } else {
        e.in[0] = vf_tensor_ref(var); /* in place: out == in[0] exactly */
        e.in[1] = vf_tensor_ref(value);
    }
    e.out = vf_tensor_ref(var);
    if (ctx->trace) return vf_trace_assign(ctx, &e, name); /* a side-effect node, kept in order */
    vf_status s = ctx->be.iface->exec(ctx->be.self, &e);
    if (s != VF_OK) return vf_backend_failed(ctx, s, "%s (%s backend)", name, ctx->be.iface->name);
    return VF_OK;
}

/* The assigns lock the context found from var's slot: var may be a dead
   handle, whose memory must not be read (handles.h). */
vf_status vf_assign(vf_tensor *var, vf_tensor *value)
{
    VF_LOCKED(vf_tensor_context(var));
    return assign_op(VF_OP_COPY, "vf_assign", var, value);
}
vf_status vf_assign_add(vf_tensor *var, vf_tensor *value)
{
    VF_LOCKED(vf_tensor_context(var));
    return assign_op(VF_OP_ADD, "vf_assign_add", var, value);
}
vf_status vf_assign_sub(vf_tensor *var, vf_tensor *value)
{
    VF_LOCKED(vf_tensor_context(var));
    return assign_op(VF_OP_SUB, "vf_assign_sub", var, value);
}
