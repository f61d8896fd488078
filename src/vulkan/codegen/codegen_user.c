/* A user kernel's call in a plan (docs/KERNELS.md): no GLSL is generated.
 * Step 1 zeroes the output (the FILL kernel every eager fill uses) unless
 * the kernel writes every element itself; the last step is the user's
 * SPIR-V with the call's push constants, workgroup counts and workgroup
 * size (specialisation constant 0). Both steps carry the kernel's name, so
 * profiles show it. The plan puts a barrier between the steps, as between
 * any kernel's steps.
 *
 * A call with more than 3 inputs or more than one output is a group of
 * parts (VF_FUSED_USER, plan/plan.c): the same steps, one zeroing step per
 * output, every binding a group tensor (its inputs, then its outputs). */
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/codegen/codegen_internal.h"

#include <stdio.h>
#include <string.h>

/* The last step, the user's SPIR-V with the call's push constants,
   workgroup counts and workgroup size; the caller sets its bindings. */
static vf_dispatch *user_step(vf_gen_kernel *out, const vf_ukernel_exec *x)
{
    const vf_ukernel *k = x->k;
    vf_dispatch *d = &out->step[out->n_steps++];
    memset(d, 0, sizeof *d);
    d->spirv = k->spirv;
    d->spirv_words = k->n_words;
    d->spirv_key = k->key;
    snprintf(d->name, sizeof d->name, "%s", k->name);
    memcpy(d->push, x->push, x->push_size);
    d->push_size = x->push_size;
    memcpy(d->groups, x->groups, sizeof d->groups);
    d->n_spec = 1;
    d->spec[0] = k->workgroup_size;
    return d;
}

vf_status vf_codegen_user(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err)
{
    const vf_ukernel_exec *x = e->ux;
    if (!x || !x->k || e->n_in < 0 || e->n_in > 3 || x->push_size > VF_PUSH_MAX)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "user_kernel: an exec without its call");
    const vf_ukernel *k = x->k;
    if (k->n_in != e->n_in || k->n_out != 1)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "user_kernel '%s': a part of a call runs only with the "
                          "others (a VF_FUSED_USER group)", k->name);
    if (!k->uninit) {
        vf_exec f = {.op = VF_OP_FILL, .attrs.dtype = e->out.dtype, .out = e->out};
        vf_status s = vf_codegen_single(&f, caps, out, err);
        if (s) return s;
        for (int i = 0; i < out->n_steps; i++) snprintf(out->step[i].name, sizeof out->step[i].name, "%s", k->name);
    }
    if (out->n_steps >= VF_KERNEL_MAX_STEPS) return vf_err_set(err, VF_ERROR_UNSUPPORTED, "user_kernel: too many steps");
    vf_dispatch *d = user_step(out, x);
    d->n_bindings = e->n_in + 1;
    for (int i = 0; i < e->n_in; i++) d->binding[i] = VF_BIND_IN0 + i;
    d->binding[e->n_in] = VF_BIND_OUT;
    return VF_OK;
}

vf_status vf_codegen_user_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err)
{
    const vf_ukernel_exec *x = grp->execs[0].ux;
    if (!x || !x->k || grp->n_inputs != x->k->n_in || grp->n_outputs != x->k->n_out ||
        x->push_size > VF_PUSH_MAX || grp->n_inputs + grp->n_outputs > VF_KERNEL_MAX_BINDINGS)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "user_kernel: a group of parts without its call");
    const vf_ukernel *k = x->k;
    int nt = k->n_in + k->n_out;
    for (int j = 0; j < k->n_out && !k->uninit; j++) {
        vf_exec f = {.op = VF_OP_FILL, .attrs.dtype = grp->tensors[k->n_in + j].dtype,
                     .out = grp->tensors[k->n_in + j]};
        vf_gen_kernel one;
        vf_status s = vf_codegen_single(&f, caps, &one, err);
        if (s) return s;
        if (out->n_steps + one.n_steps >= VF_KERNEL_MAX_STEPS) {
            vf_kernel_free(&one);
            return vf_err_set(err, VF_ERROR_UNSUPPORTED, "user_kernel: too many steps");
        }
        for (int i = 0; i < one.n_steps; i++) { /* the FILL's output is group tensor n_in + j */
            vf_dispatch *d = &out->step[out->n_steps++];
            *d = one.step[i];
            snprintf(d->name, sizeof d->name, "%s", k->name);
            for (int b = 0; b < d->n_bindings; b++)
                if (d->binding[b] == VF_BIND_OUT) d->binding[b] = VF_BIND_GROUP + k->n_in + j;
        }
    }
    vf_dispatch *d = user_step(out, x);
    d->n_bindings = nt;
    for (int t = 0; t < nt; t++) d->binding[t] = VF_BIND_GROUP + t;
    return VF_OK;
}
