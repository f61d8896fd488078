/* A user elementwise op in a saved function (docs/FORMAT.md, "User
 * elementwise ops"): name, inputs, dtypes, expression, helpers and its
 * gradients' the same way. A loaded op has no C function: it runs on the
 * Vulkan backend only (the CPU backend fails naming it, docs/KERNELS.md).
 * The GLSL is checked as vf_elementwise_create checks it, so a crafted
 * file cannot paste code into a generated kernel. */
#include "api/api.h"
#include "saved/saved_rd.h"
#include "graph/uelem.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A length-prefixed string (malloc'd, NUL-terminated), NULL on failure. */
static char *get_str(vf_saved_rd *r, const char *field)
{
    uint32_t len = vf_saved_count(r, 1u << 20, 1, field);
    if (r->bad || !vf_saved_need(r, len, field)) return NULL;
    char *s = vf_malloc((size_t)len + 1);
    if (!s) {
        vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory");
        r->bad = true;
        return NULL;
    }
    memcpy(s, r->p + r->pos, len);
    s[len] = '\0';
    r->pos += len;
    if (strlen(s) != len) {
        free(s);
        vf_saved_bad(r, "%s holds a NUL byte", field);
        return NULL;
    }
    return s;
}

vf_uelem *vf_saved_get_uelem(vf_saved_rd *r, int i, bool with_grads)
{
    char *name = get_str(r, "user op name");
    unsigned n_in = U8("user op inputs");
    uint32_t dtypes = U32("user op dtypes");
    bool grad_of = U8("user op grad_of") != 0;
    char *expr = r->bad ? NULL : get_str(r, "user op expression");
    char *helpers = !r->bad && U8("user op has helpers") ? get_str(r, "user op helpers") : NULL;
    vf_uelem *u = NULL;
    char msg[2048];
    if (r->bad) goto done;
    /* a node's op may be a gradient's (a traced backward); a gradient inside
       an op's record always is one */
    if (n_in < 1 || n_in > VF_ELEMENTWISE_MAX_INPUTS || !dtypes || (dtypes & ~VF_MASK_FLOAT) ||
        (!with_grads && !grad_of) || (grad_of && n_in < 2)) {
        vf_saved_bad(r, "node %d: user op of %u inputs, dtypes 0x%x", i, n_in, dtypes);
        goto done;
    }
    /* the prefix rule is about clashes, checked at create; safety here */
    if (!vf_uelem_text_ok(expr, true, NULL, msg, sizeof msg) ||
        (helpers && !vf_uelem_text_ok(helpers, false, NULL, msg, sizeof msg))) {
        vf_saved_bad(r, "node %d: user op '%s': %s", i, name, msg);
        goto done;
    }
    int n_x = grad_of ? (int)n_in - 1 : (int)n_in;
    const char *as_grad[VF_ELEMENTWISE_MAX_INPUTS] = {expr};
    char what[32];
    if (vf_uelem_compile_check(helpers, n_x, grad_of ? NULL : expr, grad_of ? as_grad : NULL, what, sizeof what, msg,
                               sizeof msg) != VF_OK) {
        vf_saved_bad(r, "node %d: user op '%s': %s does not compile: %s", i, name, what, msg);
        goto done;
    }
    if (!(u = vf_uelem_new(name, (int)n_in, dtypes, expr, helpers))) {
        vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory");
        r->bad = true;
        goto done;
    }
    u->loaded = true;
    u->grad_of = grad_of;
    for (unsigned k = 0; with_grads && k < n_in; k++) {
        if (!U8("user op has gradient") || r->bad) continue;
        if (n_in >= VF_ELEMENTWISE_MAX_INPUTS || grad_of) {
            vf_saved_bad(r, "node %d: user op '%s' of %u inputs%s with a gradient", i, name, n_in,
                         grad_of ? " (itself a gradient)" : "");
            break;
        }
        if (!(u->grad[k] = vf_saved_get_uelem(r, i, false))) break;
        if (u->grad[k]->n_in != (int)n_in + 1) {
            vf_saved_bad(r, "node %d: user op '%s': gradient %u takes %d inputs", i, name, k, u->grad[k]->n_in);
            break;
        }
    }
    if (r->bad) {
        vf_uelem_release(u);
        u = NULL;
    }
done:
    free(name);
    free(expr);
    free(helpers);
    return u;
}
