/* User kernels (vf_kernel_create / vf_kernel_call / vf_kernel_destroy,
 * docs/KERNELS.md): the desc checked and copied into a shared vf_ukernel
 * (graph/ukernel.h) with its SPIR-V, each call resolved (output shapes,
 * workgroup counts, push constants) the same way eagerly, while tracing
 * and when a traced graph runs (run.c), then one backend ukernel call or
 * one graph node. */
#include "api/api.h"
#include "kernels/kernels.h"
#include "api/hooks.h"
#include "util/dtype.h"
#include "util/hash.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vf_kernel {
    vf_context *ctx;           /* NULL once the context is destroyed */
    vf_ukernel *uk;
    struct vf_kernel *next;    /* the context's kernels */
};

static vf_status desc_fail(vf_context *ctx, vf_status s, const char *name, const char *fmt, const char *what,
                           long a, long b)
{
    char m[512];
    snprintf(m, sizeof m, fmt, what, a, b);
    return vf_fail(ctx, s, "vf_kernel_create: kernel '%s': %s", name, m);
}

/* Every field of the desc that can be wrong, with what to do instead. */
static bool check_desc(vf_context *ctx, const vf_kernel_desc *d, const char *name)
{
    const char *bad = NULL;
    long a = 0, b = 0;
    if (!d->glsl && !d->spirv) bad = "%sdesc.glsl and desc.spirv are both NULL; give the shader's GLSL source or its SPIR-V";
    else if (d->glsl && d->spirv) bad = "%sdesc.glsl and desc.spirv are both set; give one";
    else if (d->spirv && d->spirv_words == 0) bad = "%sdesc.spirv is set but desc.spirv_words is 0";
    else if (d->n_inputs < 0 || d->n_inputs > VF_KERNEL_MAX_INPUTS)
        bad = "%sdesc.n_inputs is %ld; it must be 0 .. %ld", a = d->n_inputs, b = VF_KERNEL_MAX_INPUTS;
    else if (d->n_outputs < 1 || d->n_outputs > VF_KERNEL_MAX_OUTPUTS)
        bad = "%sdesc.n_outputs is %ld; it must be 1 .. %ld", a = d->n_outputs, b = VF_KERNEL_MAX_OUTPUTS;
    else if (d->param_bytes % 4 || d->param_bytes > VF_KERNEL_MAX_PARAM_BYTES)
        bad = "%sdesc.param_bytes is %ld; it must be a multiple of 4, at most %ld", a = (long)d->param_bytes,
        b = VF_KERNEL_MAX_PARAM_BYTES;
    if (bad) return desc_fail(ctx, VF_ERROR_INVALID_ARGUMENT, name, bad, "", a, b), false;
    for (int i = 0; i < d->n_inputs; i++)
        if (!vf_dtype_valid((int)d->inputs[i]))
            return desc_fail(ctx, VF_ERROR_DTYPE, name, "%sdesc.inputs[%ld] is dtype %ld, not a vf_dtype", "", i,
                             (long)d->inputs[i]), false;
    for (int j = 0; j < d->n_outputs; j++) {
        const vf_tensor_spec *o = &d->outputs[j];
        if (!vf_dtype_valid((int)o->dtype))
            return desc_fail(ctx, VF_ERROR_DTYPE, name, "%sdesc.outputs[%ld].dtype is %ld, not a vf_dtype", "", j,
                             (long)o->dtype), false;
        if (d->output_shapes) continue;
        if (o->rank < 0 || o->rank > VF_MAX_RANK)
            return desc_fail(ctx, VF_ERROR_SHAPE, name, "%sdesc.outputs[%ld].rank is %ld; 0 .. 8 (or give "
                             "desc.output_shapes)", "", j, o->rank), false;
        for (int k = 0; k < o->rank; k++)
            if (o->shape[k] < 0)
                return desc_fail(ctx, VF_ERROR_SHAPE, name, "%sdesc.outputs[%ld] dim %ld is negative; fixed "
                                 "output shapes are concrete (give desc.output_shapes for shapes that follow "
                                 "the inputs)", "", j, k), false;
    }
    return true;
}

/* The shader's push-constant block against what each call pushes: the
   params (param_bytes), then one uint element count per input and output.
   A block that reads past that, a member across the end of the params, or
   a count that is not a 32-bit integer is refused, with the layout. */
static bool check_push(vf_context *ctx, const vf_ukernel *k, const vf_spirv_info *info)
{
    uint32_t pb = k->param_bytes, nt = (uint32_t)(k->n_in + k->n_out), total = pb + 4 * nt;
    char layout[192];
    snprintf(layout, sizeof layout, "the layout is desc.param_bytes = %u bytes of params from offset 0, then a uint "
             "element count per input and output (%d + %d) at offsets %u .. %u", pb, k->n_in, k->n_out, pb,
             total - 4);
    const char *who = "vf_kernel_create";
    if (info->push_size > total)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s': its push-constant block is %u bytes, but a "
                       "call pushes %u: %s; declare no more (or raise desc.param_bytes)", who, k->name,
                       info->push_size, total, layout), false;
    for (int m = 0; m < info->push_members; m++) {
        uint32_t off = info->push_member[m].offset, size = info->push_member[m].size;
        if (off < pb && off + size > pb)
            return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s': push-constant member %d (%u bytes at "
                           "offset %u) runs past the params into the element counts: %s", who, k->name, m, size,
                           off, layout), false;
        if (off >= pb && (!info->push_member[m].u32 || (off - pb) % 4))
            return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s': push-constant member %d at offset %u is "
                           "in the element counts, which are uints: %s; declare it uint, or give its params in "
                           "desc.param_bytes", who, k->name, m, off, layout), false;
    }
    return true;
}

/* The SPIR-V: compiled from GLSL, or the user's words copied; then its
   bindings checked against the kernel's tensors. */
static bool make_spirv(vf_context *ctx, const vf_kernel_desc *d, vf_ukernel *k, vf_spirv_info *info)
{
    char msg[2048];
    vf_status s;
    if (d->glsl) {
        s = vf_glsl_compile(d->glsl, k->name, &k->spirv, &k->n_words, msg, sizeof msg);
        if (s) {
            vf_fail(ctx, s, "vf_kernel_create: %s (line numbers are desc.glsl's)", msg);
            return false;
        }
    } else {
        k->spirv = vf_malloc(d->spirv_words * 4);
        if (!k->spirv) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_kernel_create: out of host memory"), false;
        memcpy(k->spirv, d->spirv, d->spirv_words * 4);
        k->n_words = d->spirv_words;
    }
    s = vf_spirv_inspect(k->spirv, k->n_words, info, msg, sizeof msg);
    if (s) {
        vf_fail(ctx, s == VF_ERROR_FORMAT ? VF_ERROR_INVALID_ARGUMENT : s, "vf_kernel_create: kernel '%s': %s",
                k->name, msg);
        return false;
    }
    int n_bind = k->n_in + k->n_out;
    if (info->bad_set) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_kernel_create: kernel '%s' declares binding %d in set %d; "
                "every tensor is in set 0 (layout(set = 0, binding = i))", k->name, info->bad_set_binding,
                info->bad_set);
        return false;
    }
    if (info->max_binding >= n_bind) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_kernel_create: kernel '%s' declares binding %d, but it has "
                "%d input(s) and %d output(s): bindings 0 .. %d (inputs, then outputs); fix the shader or "
                "desc.n_inputs / desc.n_outputs", k->name, info->max_binding, k->n_in, k->n_out, n_bind - 1);
        return false;
    }
    k->key = vf_hash64(k->spirv, k->n_words * 4, 0x75736b);
    return check_push(ctx, k, info);
}

static vf_kernel *kernel_create(vf_context *ctx, const vf_kernel_desc *desc)
{
    if (!ctx) return NULL;
    VF_LOCKED(ctx);
    if (!desc) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_kernel_create: desc is NULL");
        return NULL;
    }
    const char *name = desc->name && *desc->name ? desc->name : "user_kernel";
    if (!check_desc(ctx, desc, name)) return NULL;
    vf_kernel *h = vf_calloc(1, sizeof *h);
    vf_ukernel *k = vf_calloc(1, sizeof *k);
    if (!h || !k) {
        free(h);
        free(k);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_kernel_create: out of host memory");
        return NULL;
    }
    k->refs = 1;
    snprintf(k->name, sizeof k->name, "%s", name);
    k->n_in = desc->n_inputs;
    k->n_out = desc->n_outputs;
    memcpy(k->in_dt, desc->inputs, sizeof k->in_dt);
    memcpy(k->out_spec, desc->outputs, sizeof k->out_spec);
    k->param_bytes = desc->param_bytes;
    k->workgroup_size = desc->workgroup_size ? desc->workgroup_size : 64;
    memcpy(k->groups, desc->groups, sizeof k->groups);
    k->uninit = desc->uninitialized_outputs;
    k->side_effect = desc->side_effect;
    k->check_bounds = desc->check_bounds;
    k->output_shapes = desc->output_shapes;
    k->dispatch = desc->dispatch;
    k->cpu = desc->cpu;
    k->grad = desc->grad;
    k->user = desc->user;
    vf_spirv_info info;
    if (!make_spirv(ctx, desc, k, &info)) {
        vf_ukernel_release(k);
        free(h);
        return NULL;
    }
    /* the invocations per workgroup along x the default dispatch counts
       with: the specialisation constant, else the module's own size */
    k->per_group = info.spec0 || !info.local_size_x ? k->workgroup_size : info.local_size_x;
    h->ctx = ctx;
    h->uk = k;
    h->next = ctx->kernels;
    ctx->kernels = h;
    vf_context_on_destroy(ctx, VF_ON_DESTROY_KERNELS, vf_kernels_orphan_all);
    return h;
}

/* One convention for failed creates (vkfuse.h): the reason is the
   thread's last error as well as the context's. */
vf_kernel *vf_kernel_create(vf_context *ctx, const vf_kernel_desc *desc)
{
    VF_LOCKED(ctx);
    vf_kernel *k = kernel_create(ctx, desc);
    return k ? k : vf_create_failed(ctx, VF_OK, "vf_kernel_create");
}

void vf_kernel_destroy(vf_kernel *h)
{
    if (!h) return;
    vf_context *ctx = h->ctx;
    if (ctx) {
        VF_LOCKED(ctx);
        for (vf_kernel **p = &ctx->kernels; *p; p = &(*p)->next)
            if (*p == h) {
                *p = h->next;
                break;
            }
    }
    vf_ukernel_release(h->uk);
    free(h);
}

void vf_kernels_orphan_all(vf_context *ctx)
{
    for (vf_kernel *h = ctx->kernels; h; h = h->next) h->ctx = NULL;
    ctx->kernels = NULL;
}

static vf_status shape_fail(vf_context *ctx, const char *who, const vf_ukernel *k, const vf_tensor_spec *in,
                            vf_status s, const char *what)
{
    char shapes[512] = "", sh[VF_SHAPE_STR_LEN];
    size_t n = 0;
    for (int i = 0; i < k->n_in && n < sizeof shapes; i++)
        n += (size_t)snprintf(shapes + n, sizeof shapes - n, "%s%s %s", i ? ", " : "", vf_dtype_name(in[i].dtype),
                              vf_shape_str(sh, sizeof sh, in[i].rank, in[i].shape));
    return vf_fail(ctx, s, "%s: kernel '%s' on inputs (%s): %s", who, k->name, shapes, what);
}

vf_status vf_ukernel_prepare(vf_context *ctx, const vf_ukernel *k, const vf_tref *in, const void *params,
                             vf_tensor_spec *in_spec, vf_tensor_spec *out_spec, vf_kernel_shapes *shapes,
                             vf_ukernel_exec *x, const char *who)
{
    for (int i = 0; i < k->n_in; i++) {
        in_spec[i] = (vf_tensor_spec){.dtype = in[i].dtype, .rank = in[i].rank};
        memcpy(in_spec[i].shape, in[i].shape, sizeof(int64_t) * (size_t)in[i].rank);
    }
    char m[256];
    vf_status s = vf_ukernel_resolve(k, in_spec, params, out_spec, shapes, x, m, sizeof m);
    return s ? shape_fail(ctx, who, k, in_spec, s, m) : VF_OK;
}

static bool check_call(vf_kernel *h, int n, vf_tensor *const *in, const void *params, vf_tensor **out)
{
    vf_context *ctx = h->ctx;
    const vf_ukernel *k = h->uk;
    const char *who = "vf_kernel_call";
    if (n != k->n_in)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s' takes %d input(s), got %d", who, k->name,
                       k->n_in, n), false;
    if (!out) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s': out is NULL", who, k->name), false;
    if (k->param_bytes && !params)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s' takes %u bytes of params, but params is "
                       "NULL", who, k->name, k->param_bytes), false;
    if (n > 0 && !in) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s': in is NULL", who, k->name), false;
    for (int i = 0; i < n; i++) {
        if (!in[i]) /* an earlier op failed: its error is recorded already */
            return ctx->err.status ? false
                                   : (vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: kernel '%s': input %d is NULL", who,
                                              k->name, i), false);
        if (!vf_check_input(ctx, who, in[i], i)) return false;
        if (in[i]->dtype != k->in_dt[i])
            return vf_fail(ctx, VF_ERROR_DTYPE, "%s: kernel '%s' input %d is %s, but desc.inputs[%d] says %s "
                           "(vf_cast it)", who, k->name, i, vf_dtype_name(in[i]->dtype), i,
                           vf_dtype_name(k->in_dt[i])), false;
    }
    return true;
}

vf_status vf_kernel_call(vf_kernel *h, int n, vf_tensor *const *in, const void *params, vf_tensor **out)
{
    if (!h) return VF_ERROR_INVALID_ARGUMENT;
    vf_context *ctx = h->ctx;
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT; /* its context was destroyed */
    VF_LOCKED(ctx);
    vf_ukernel *k = h->uk;
    if (out)
        for (int j = 0; j < k->n_out; j++) out[j] = NULL;
    if (!check_call(h, n, in, params, out)) return ctx->err.status ? ctx->err.status : VF_ERROR_INVALID_ARGUMENT;
    return vf_ukernel_call(ctx, k, in, params, out);
}

vf_status vf_ukernel_call(vf_context *ctx, vf_ukernel *k, vf_tensor *const *in, const void *params, vf_tensor **out)
{
    const char *who = "vf_kernel_call";
    int n = k->n_in;
    for (int i = 0; i < n; i++)
        if (!in[i]) return ctx->err.status ? ctx->err.status : VF_ERROR_INVALID_ARGUMENT;
    vf_tref refs[VF_KERNEL_MAX_INPUTS], outs[VF_KERNEL_MAX_OUTPUTS];
    for (int i = 0; i < n; i++) refs[i] = vf_tensor_ref(in[i]);
    vf_tensor_spec in_spec[VF_KERNEL_MAX_INPUTS], out_spec[VF_KERNEL_MAX_OUTPUTS];
    vf_kernel_shapes shapes;
    vf_ukernel_exec x = {0};
    vf_status s = vf_ukernel_prepare(ctx, k, refs, params, in_spec, out_spec, &shapes, &x, who);
    if (s) return s;
    vf_tensor *made[VF_KERNEL_MAX_OUTPUTS] = {0};
    bool empty = x.empty;
    for (int j = 0; j < k->n_out && !s; j++) {
        made[j] = vf_tensor_new(ctx, who, out_spec[j].dtype, out_spec[j].rank, out_spec[j].shape);
        if (!made[j]) s = ctx->err.status;
        else empty = empty || made[j]->numel == 0;
    }
    if (!s && ctx->trace) {
        if (vf_tracer_of(ctx)->kernel(ctx, k, in, params, x.groups, made) < 0) s = ctx->err.status;
    } else if (!s && empty) {
        /* nothing to bind: the outputs are zeros (docs/KERNELS.md) */
        for (int j = 0; j < k->n_out && !s; j++)
            if (!vf_fill_into(ctx, made[j], 0.0)) s = ctx->err.status;
    } else if (!s) {
        for (int j = 0; j < k->n_out; j++) outs[j] = vf_tensor_ref(made[j]);
        x.in = refs;
        x.out = outs;
        s = vf_ukernel_launch(ctx, &x, who);
    }
    if (!s) s = vf_note_kernel(ctx, k, in, params, made);
    if (s) {
        for (int j = 0; j < k->n_out; j++) vf_tensor_release(made[j]);
        return s;
    }
    for (int j = 0; j < k->n_out; j++) out[j] = made[j];
    return VF_OK;
}

vf_ukernel *vf_kernel_match_live(vf_context *ctx, const vf_ukernel *k)
{
    for (vf_kernel *h = ctx->kernels; h; h = h->next) {
        const vf_ukernel *u = h->uk;
        bool same = !strcmp(u->name, k->name) && u->key == k->key && u->n_words == k->n_words &&
                    !memcmp(u->spirv, k->spirv, k->n_words * 4) && u->n_in == k->n_in && u->n_out == k->n_out &&
                    u->param_bytes == k->param_bytes && u->workgroup_size == k->workgroup_size &&
                    u->uninit == k->uninit && u->side_effect == k->side_effect && !u->check_bounds;
        for (int j = 0; same && j < k->n_in; j++) same = u->in_dt[j] == k->in_dt[j];
        for (int j = 0; same && j < k->n_out; j++) same = u->out_spec[j].dtype == k->out_spec[j].dtype;
        if (same) return h->uk;
    }
    return NULL;
}
