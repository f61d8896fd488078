/* User elementwise ops (vf_elementwise_create / vf_elementwise_call /
 * vf_elementwise_destroy, docs/KERNELS.md "User elementwise ops"): the desc
 * checked, every expression kept inside its expression (graph/uelem.c) and
 * compiled on its own (vulkan/uelem_check.c), then a shared vf_uelem that
 * calls put into VF_OP_USER_ELEMENTWISE execs like any elementwise op:
 * eager (one generated kernel, or the C function on the CPU backend),
 * traced (a node that fuses) and taped (its gradient rule below). */
#include "api/api.h"
#include "kernels/kernels.h"
#include "api/hooks.h"
#include "graph/uelem.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vf_elementwise_op {
    vf_context *ctx;           /* NULL once the context is destroyed */
    vf_uelem *u;
    struct vf_elementwise_op *next;   /* the context's ops */
};

static const char *const who_create = "vf_elementwise_create";

/* The expression `text` (what: "desc.expr") checked token by token. */
static bool check_expr(vf_context *ctx, const char *name, const char *text, const char *what)
{
    char msg[512];
    if (vf_uelem_text_ok(text, true, NULL, msg, sizeof msg)) return true;
    return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': %s: %s", who_create, name, what, msg), false;
}

static bool check_desc(vf_context *ctx, const vf_elementwise_desc *d, const char *name, bool *has_grad)
{
    const char *bad = NULL;
    if (d->n_inputs < 1 || d->n_inputs > VF_ELEMENTWISE_MAX_INPUTS)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': desc.n_inputs is %d; it must be 1 .. %d",
                       who_create, name, d->n_inputs, VF_ELEMENTWISE_MAX_INPUTS), false;
    /* a field of the desc, not a tensor's dtype: VF_ERROR_INVALID_ARGUMENT
       as every bad desc (the header's promise) */
    if (d->dtypes & ~VF_MASK_FLOAT)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': desc.dtypes is 0x%x; only (1u << VF_F32) and "
                       "(1u << VF_F16) are supported (the expression is computed in float)", who_create, name,
                       d->dtypes), false;
    if (!d->expr) bad = "desc.expr is NULL; give the GLSL expression over x0 ..";
    else if (!d->cpu) bad = "desc.cpu is NULL; give the C function (the CPU backend, constant folding and "
                            "VKFUSE_CHECK run it)";
    if (bad) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': %s", who_create, name, bad), false;
    *has_grad = false;
    for (int i = 0; i < VF_ELEMENTWISE_MAX_INPUTS; i++) {
        bool e = d->grad_expr[i] != NULL, c = d->grad_cpu[i] != NULL;
        if (i >= d->n_inputs && (e || c))
            return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': desc.grad_expr[%d] / grad_cpu[%d] set, "
                           "but the op has %d input(s)", who_create, name, i, i, d->n_inputs), false;
        if (e != c)
            return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': desc.grad_%s[%d] is set but "
                           "desc.grad_%s[%d] is NULL; a gradient needs both its GLSL expression and its C function",
                           who_create, name, e ? "expr" : "cpu", i, e ? "cpu" : "expr", i), false;
        *has_grad = *has_grad || e;
    }
    if (*has_grad && d->n_inputs > VF_ELEMENTWISE_MAX_INPUTS - 1)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': a gradient's op reads the inputs and y, so a "
                       "differentiable op takes at most %d inputs (it has %d)", who_create, name,
                       VF_ELEMENTWISE_MAX_INPUTS - 1, d->n_inputs), false;
    return true;
}

static vf_elementwise_op *elementwise_create(vf_context *ctx, const vf_elementwise_desc *desc)
{
    if (!ctx) return NULL;
    VF_LOCKED(ctx);
    if (!desc) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: desc is NULL", who_create);
        return NULL;
    }
    const char *name = desc->name && *desc->name ? desc->name : "user_elementwise";
    bool has_grad;
    if (!check_desc(ctx, desc, name, &has_grad)) return NULL;
    char msg[2048], what[32];
    if (desc->helpers && !vf_uelem_text_ok(desc->helpers, false, name, msg, sizeof msg)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: op '%s': %s", who_create, name, msg);
        return NULL;
    }
    if (!check_expr(ctx, name, desc->expr, "desc.expr")) return NULL;
    for (int i = 0; i < desc->n_inputs; i++) {
        snprintf(what, sizeof what, "desc.grad_expr[%d]", i);
        if (desc->grad_expr[i] && !check_expr(ctx, name, desc->grad_expr[i], what)) return NULL;
    }
    vf_status cs = vf_uelem_compile_check(desc->helpers, desc->n_inputs, desc->expr, desc->grad_expr, what,
                                          sizeof what, msg, sizeof msg);
    if (cs) {
        const char *text = !strcmp(what, "desc.expr") ? desc->expr
                         : !strncmp(what, "desc.grad_expr[", 15) ? desc->grad_expr[what[15] - '0'] : NULL;
        vf_fail(ctx, cs, "%s: op '%s': %s%s%s%s does not compile (variables: x0 .. x%d%s; line numbers are %s's): %s",
                who_create, name, what, text ? " `" : "", text ? text : "", text ? "`" : "", desc->n_inputs - 1,
                text && text != desc->expr ? " and y" : "", what, msg);
        return NULL;
    }
    uint32_t dtypes = desc->dtypes ? desc->dtypes : VF_M(VF_F32);
    vf_elementwise_op *h = vf_calloc(1, sizeof *h);
    vf_uelem *u = vf_uelem_new(name, desc->n_inputs, dtypes, desc->expr, desc->helpers);
    bool ok = h && u;
    if (ok) {
        u->cpu = desc->cpu;
        u->user = desc->user;
    }
    for (int i = 0; ok && i < desc->n_inputs; i++) {
        if (!desc->grad_expr[i]) continue;
        char gname[64];
        snprintf(gname, sizeof gname, "%.38s_grad%d", name, i);
        vf_uelem *g = u->grad[i] = vf_uelem_new(gname, desc->n_inputs + 1, dtypes, desc->grad_expr[i],
                                                 desc->helpers);
        ok = g != NULL;
        if (g) {
            g->cpu = desc->grad_cpu[i];
            g->user = desc->user;
            g->grad_of = true;
        }
    }
    if (!ok) {
        vf_uelem_release(u);
        free(h);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory", who_create);
        return NULL;
    }
    h->ctx = ctx;
    h->u = u;
    h->next = ctx->uelems;
    ctx->uelems = h;
    vf_context_on_destroy(ctx, VF_ON_DESTROY_UELEMS, vf_uelems_orphan_all);
    return h;
}

/* One convention for failed creates (vkfuse.h): the reason is the
   thread's last error as well as the context's. */
vf_elementwise_op *vf_elementwise_create(vf_context *ctx, const vf_elementwise_desc *desc)
{
    VF_LOCKED(ctx);
    vf_elementwise_op *op = elementwise_create(ctx, desc);
    return op ? op : vf_create_failed(ctx, VF_OK, who_create);
}

void vf_elementwise_destroy(vf_elementwise_op *h)
{
    if (!h) return;
    vf_context *ctx = h->ctx;
    if (ctx) {
        VF_LOCKED(ctx);
        for (vf_elementwise_op **p = &ctx->uelems; *p; p = &(*p)->next)
            if (*p == h) {
                *p = h->next;
                break;
            }
    }
    vf_uelem_release(h->u);
    free(h);
}

void vf_uelems_orphan_all(vf_context *ctx)
{
    for (vf_elementwise_op *h = ctx->uelems; h; h = h->next) h->ctx = NULL;
    ctx->uelems = NULL;
}

vf_tensor *vf_uelem_apply(vf_context *ctx, const vf_uelem *u, vf_tensor *const *in)
{
    for (int i = 0; i < u->n_in; i++)
        if (!in[i]) return NULL; /* an earlier op failed: its error is recorded */
    vf_exec e = {.op = VF_OP_USER_ELEMENTWISE, .n_in = u->n_in, .attrs.uelem = u};
    for (int i = 0; i < u->n_in; i++) {
        if (!vf_check_input(ctx, u->name, in[i], i)) return NULL;
        e.in[i] = vf_tensor_ref(in[i]);
    }
    return vf_op_tail(ctx, "vf_elementwise_call", &e, true);
}

vf_tensor *vf_elementwise_call(vf_elementwise_op *h, int n, vf_tensor *const *in)
{
    if (!h || !h->ctx) return NULL; /* its context was destroyed */
    vf_context *ctx = h->ctx;
    VF_LOCKED(ctx);
    const vf_uelem *u = h->u;
    if (n != u->n_in) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_elementwise_call: op '%s' takes %d input(s) (desc.n_inputs), "
                "got %d", u->name, u->n_in, n);
        return NULL;
    }
    if (!in) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_elementwise_call: op '%s': in is NULL", u->name);
        return NULL;
    }
    return vf_uelem_apply(ctx, u, in);
}

static bool same_text(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same_uelem(const vf_uelem *a, const vf_uelem *b)
{
    return !strcmp(a->name, b->name) && a->n_in == b->n_in && a->dtypes == b->dtypes && a->grad_of == b->grad_of &&
           same_text(a->expr, b->expr) && same_text(a->helpers, b->helpers);
}

vf_uelem *vf_uelem_match_live(vf_context *ctx, const vf_uelem *u)
{
    for (vf_elementwise_op *h = ctx->uelems; h; h = h->next) {
        const vf_uelem *live = h->u;
        if (!u->grad_of) {
            bool same = same_uelem(live, u);
            /* the gradients the file has must be the live op's too */
            for (int i = 0; same && i < u->n_in; i++)
                same = !u->grad[i] || (live->grad[i] && same_uelem(live->grad[i], u->grad[i]));
            if (same) return h->u;
            continue;
        }
        for (int i = 0; i < live->n_in; i++) /* a traced backward's node: one of the live op's gradients */
            if (live->grad[i] && same_uelem(live->grad[i], u)) return live->grad[i];
    }
    return NULL;
}
