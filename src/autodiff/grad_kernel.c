/* The gradients of what users write (autodiff stage): a user kernel's call
 * recorded on the tapes as one entry and its rule (the kernel's own grad
 * callback, checked), and the rule of a user elementwise op (its gradient
 * expressions, themselves user elementwise ops). The kernels stage below
 * hands its calls here through the tape hooks (api/hooks.h). */
#include "api/api.h"
#include "kernels/kernels.h"
#include "autodiff/tape.h"
#include "graph/uelem.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <stdio.h>
#include <string.h>

/* ---- user kernels ------------------------------------------------------- */

vf_status vf_tape_record_kernel(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params,
                                vf_tensor *const *out)
{
    if (!ctx->tapes || !vf_tape_recording(ctx)) return VF_OK;
    vf_tape_cf *cf = vf_calloc(1, sizeof *cf);
    if (cf) {
        cf->refs = 1;
        cf->kind = VF_NODE_KERNEL;
        cf->in = vf_calloc((size_t)k->n_in + 1, sizeof *cf->in);
        cf->in_key = vf_calloc((size_t)k->n_in + 1, sizeof *cf->in_key);
        cf->out = vf_calloc((size_t)k->n_out + 1, sizeof *cf->out);
        cf->out_key = vf_calloc((size_t)k->n_out + 1, sizeof *cf->out_key);
        cf->params = k->param_bytes ? vf_malloc(k->param_bytes) : NULL;
    }
    if (!cf || !cf->in || !cf->in_key || !cf->out || !cf->out_key || (k->param_bytes && !cf->params)) {
        vf_tape_cf_release(cf);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_kernel_call: out of host memory (tape)");
    }
    cf->uk = vf_ukernel_retain(k);
    if (k->param_bytes) memcpy(cf->params, params, k->param_bytes);
    snprintf(cf->name, sizeof cf->name, "%s", k->name);
    for (int i = 0; i < k->n_in; i++) {
        cf->in[i] = vf_tensor_hold(in[i]);
        cf->in_key[i] = vf_tensor_ref(in[i]);
    }
    cf->n_in = k->n_in;
    for (int j = 0; j < k->n_out; j++) {
        cf->out[j] = vf_tensor_hold(out[j]);
        cf->out_key[j] = vf_tensor_ref(out[j]);
    }
    cf->n_out = k->n_out;
    vf_tape_entry en = {.op = VF_TAPE_CONTROL, .cf = cf};
    vf_tape_record_entry(ctx, &en);
    vf_tape_cf_release(cf);
    return VF_OK;
}

bool vf_grad_kernel(vf_context *ctx, const vf_tape_cf *cf, vf_tensor *const *gout, vf_tensor **gin)
{
    const vf_ukernel *k = cf->uk;
    const char *who = "vf_tape_gradient";
    if (!k->grad)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the gradient flows through kernel '%s', which has no "
                       "gradient (desc.grad is NULL%s); give one, or keep the sources off its path", who, k->name,
                       k->loaded ? ": a loaded function keeps no C callbacks" : ""), false;
    vf_tensor_spec in_spec[VF_KERNEL_MAX_INPUTS], out_spec[VF_KERNEL_MAX_OUTPUTS];
    for (int i = 0; i < k->n_in; i++) {
        in_spec[i] = (vf_tensor_spec){.dtype = cf->in[i]->dtype, .rank = cf->in[i]->rank};
        memcpy(in_spec[i].shape, cf->in[i]->shape, sizeof in_spec[i].shape);
    }
    for (int j = 0; j < k->n_out; j++) {
        out_spec[j] = (vf_tensor_spec){.dtype = cf->out[j]->dtype, .rank = cf->out[j]->rank};
        memcpy(out_spec[j].shape, cf->out[j]->shape, sizeof out_spec[j].shape);
    }
    vf_kernel_shapes sh = {.n_inputs = k->n_in, .n_outputs = k->n_out, .in = in_spec, .out = out_spec,
                           .params = cf->params};
    vf_tensor *g[VF_KERNEL_MAX_INPUTS] = {0};
    vf_status s = k->grad(ctx, &sh, cf->in, cf->out, gout, g, k->user);
    if (s != VF_OK)
        return vf_fail(ctx, (unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_INVALID_ARGUMENT,
                       "%s: kernel '%s': its grad callback returned %s", who, k->name,
                       vf_status_name((unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_INVALID_ARGUMENT)), false;
    for (int i = 0; i < k->n_in; i++) {
        if (!g[i]) continue;
        if (!vf_check_input(ctx, who, g[i], i)) return false;
        char a[VF_SHAPE_STR_LEN], b[VF_SHAPE_STR_LEN];
        if (g[i]->dtype != cf->in[i]->dtype || g[i]->rank != cf->in[i]->rank ||
            memcmp(g[i]->shape, cf->in[i]->shape, sizeof(int64_t) * (size_t)g[i]->rank))
            return vf_fail(ctx, VF_ERROR_SHAPE, "%s: kernel '%s': its grad callback gave input %d a gradient %s %s; "
                           "it must be the input's %s %s", who, k->name, i, vf_dtype_name(g[i]->dtype),
                           vf_shape_str(a, sizeof a, g[i]->rank, g[i]->shape), vf_dtype_name(cf->in[i]->dtype),
                           vf_shape_str(b, sizeof b, cf->in[i]->rank, cf->in[i]->shape)), false;
        gin[i] = g[i];
    }
    return true;
}

/* ---- user elementwise ops ----------------------------------------------- */

/* d x_i = unbroadcast(g * grad_i(x.., y)): the gradient's op is itself a
   user elementwise op, so the backward fuses like the forward. */
static bool g_uelem(vf_context *ctx, const vf_tape_entry *e, vf_tensor *g, vf_tensor **gin)
{
    const vf_uelem *u = e->attrs.uelem;
    bool any = false;
    for (int i = 0; i < u->n_in; i++) any = any || u->grad[i];
    if (!any)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient: the gradient flows through user "
                       "elementwise op '%s', which has no gradient (desc.grad_expr is NULL%s); give one, or keep the "
                       "sources off its path", u->name, u->loaded ? ": a loaded function keeps only what was saved" : ""),
               false;
    vf_tensor *args[VF_ELEMENTWISE_MAX_INPUTS + 1];
    for (int i = 0; i < u->n_in; i++) args[i] = e->in[i];
    args[u->n_in] = e->out;
    for (int i = 0; i < u->n_in; i++) {
        if (!u->grad[i]) continue; /* no gradient flows to input i */
        gin[i] = vf_ad_unbroadcast(ctx, vf_mul(ctx, g, vf_uelem_apply(ctx, u->grad[i], args)), e->in[i]);
        if (!gin[i]) return false;
    }
    return true;
}

const vf_grad_rule vf_grad_uelem = {g_uelem};
