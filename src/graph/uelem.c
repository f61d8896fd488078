/* User elementwise ops' shared state (graph/uelem.h): lifetime, the
 * checks that keep an expression inside its expression, and the op's
 * shape-and-dtype rule. */
#include "graph/uelem.h"
#include "graph/graph.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *dup_str(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = vf_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

vf_uelem *vf_uelem_new(const char *name, int n_in, uint32_t dtypes, const char *expr, const char *helpers)
{
    static _Atomic uint64_t next_id = 1;
    vf_uelem *u = vf_calloc(1, sizeof *u);
    if (!u) return NULL;
    u->refs = 1;
    u->id = atomic_fetch_add(&next_id, 1);
    snprintf(u->name, sizeof u->name, "%s", name);
    u->n_in = n_in;
    u->dtypes = dtypes;
    u->expr = dup_str(expr);
    u->helpers = dup_str(helpers);
    if (!u->expr || (helpers && !u->helpers)) {
        vf_uelem_release(u);
        return NULL;
    }
    return u;
}

void vf_uelem_release(const vf_uelem *cu)
{
    vf_uelem *u = (vf_uelem *)cu;
    if (!u || --u->refs > 0) return;
    for (int i = 0; i < VF_ELEMENTWISE_MAX_INPUTS; i++) vf_uelem_release(u->grad[i]);
    free(u->expr);
    free(u->helpers);
    free(u);
}

/* The words helpers may not use: a binding, a block or shared memory
   would change the generated kernel's interface; main and barrier its
   control flow. */
static const char *const banned_words[] = {"layout", "buffer", "uniform", "shared", "main", "barrier", "in",
                                           "out", "inout", "coherent", "volatile", "restrict", NULL};

/* The op name as an identifier prefix: other characters become '_'. */
static void ident_prefix(const char *name, char *out, size_t len)
{
    size_t k = 0;
    for (; name[k] && k + 2 < len; k++) out[k] = isalnum((unsigned char)name[k]) ? name[k] : '_';
    out[k++] = '_';
    out[k] = '\0';
}

/* A name the helpers declare at file scope (a function, constant or struct
   after its type) must start with prefix: two ops' helpers share one fused
   kernel, and the kernel's own names are unprefixed. */
static bool declared_ok(const char *text, const char *prefix, char *msg, size_t len)
{
    char pre[64];
    ident_prefix(prefix, pre, sizeof pre);
    int paren = 0, brace = 0;
    bool prev_ident = false;
    for (const char *p = text; *p;) {
        unsigned char c = (unsigned char)*p;
        if (isalpha(c) || c == '_') {
            size_t n = 1;
            while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
            const char *q = p + n;
            while (isspace((unsigned char)*q)) q++;
            bool decl = paren == 0 && brace == 0 && prev_ident && *q && strchr("(=;[,{", *q);
            if (decl && (n < strlen(pre) || strncmp(p, pre, strlen(pre)))) {
                snprintf(msg, len, "desc.helpers declares '%.*s'; names declared by the helpers must start with "
                         "'%s' (the op's name), so that ops fused into one kernel cannot clash", (int)n, p, pre);
                return false;
            }
            prev_ident = true;
            p += n;
            continue;
        }
        if (!isspace(c)) prev_ident = false;
        paren += c == '(' ? 1 : c == ')' ? -1 : 0;
        brace += c == '{' ? 1 : c == '}' ? -1 : 0;
        p++;
    }
    return true;
}

bool vf_uelem_text_ok(const char *text, bool expr, const char *prefix, char *msg, size_t len)
{
    const char *what = expr ? "the expression" : "desc.helpers";
    int paren = 0, brace = 0;
    for (const char *p = text; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (c == '#' || c == '\\' || (c < 32 && c != '\n' && c != '\t' && c != '\r') || c > 126) {
            snprintf(msg, len, "%s holds '%s' (character %d at offset %d); only printable ASCII GLSL without "
                     "preprocessor lines or line continuations is allowed", what, c == '#' ? "#" : "\\x..", c,
                     (int)(p - text));
            return false;
        }
        if (c == '/' && (p[1] == '/' || p[1] == '*')) {
            snprintf(msg, len, "%s holds a comment at offset %d; remove it", what, (int)(p - text));
            return false;
        }
        if (expr && (c == ';' || c == '{' || c == '}')) {
            snprintf(msg, len, "the expression holds '%c' at offset %d; it must be one GLSL expression (put "
                     "statements in a function of desc.helpers and call it)", c, (int)(p - text));
            return false;
        }
        if (c == '(') paren++;
        if (c == ')' && --paren < 0) break;
        if (c == '{') brace++;
        if (c == '}' && --brace < 0) break;
        if (!expr && (isalpha(c) || c == '_') && (p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_'))) {
            size_t n = 1;
            while (isalnum((unsigned char)p[n]) || p[n] == '_') n++;
            for (int w = 0; banned_words[w]; w++)
                if (strlen(banned_words[w]) == n && !strncmp(p, banned_words[w], n)) {
                    snprintf(msg, len, "desc.helpers uses '%s' (offset %d); helpers are plain functions of "
                             "values: no bindings, blocks, shared memory, main, barriers or in/out parameters",
                             banned_words[w], (int)(p - text));
                    return false;
                }
            p += n - 1;
        }
    }
    if (paren || brace) {
        snprintf(msg, len, "%s has unbalanced %s", what, paren ? "parentheses" : "braces");
        return false;
    }
    if (!expr && prefix && !declared_ok(text, prefix, msg, len)) return false;
    if (expr) {
        const char *p = text;
        while (isspace((unsigned char)*p)) p++;
        if (!*p) {
            snprintf(msg, len, "the expression is empty");
            return false;
        }
    }
    return true;
}

vf_status vf_uelem_infer(const vf_uelem *u, int n_in, const vf_dtype *in_dt, const vf_shape *in, vf_dtype *dt,
                         vf_shape *out, vf_err *err)
{
    if (!u) return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "user_elementwise: the node has no op");
    if (n_in != u->n_in)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "vf_elementwise_call: op '%s' takes %d input(s), got %d; "
                          "pass desc.n_inputs tensors", u->name, u->n_in, n_in);
    for (int i = 0; i < n_in; i++) {
        if (!(u->dtypes & VF_M(in_dt[i]))) {
            char ok[64] = "";
            for (int d = 0; d < VF_DTYPE_COUNT; d++)
                if (u->dtypes & VF_M(d)) {
                    strncat(ok, ok[0] ? ", " : "", sizeof ok - strlen(ok) - 1);
                    strncat(ok, vf_dtype_name((vf_dtype)d), sizeof ok - strlen(ok) - 1);
                }
            return vf_err_set(err, VF_ERROR_DTYPE, "vf_elementwise_call: op '%s' input %d is %s, but the op takes "
                              "%s (desc.dtypes); convert it with vf_cast", u->name, i, vf_dtype_name(in_dt[i]), ok);
        }
        if (in_dt[i] != in_dt[0])
            return vf_err_set(err, VF_ERROR_DTYPE, "vf_elementwise_call: op '%s' inputs have different dtypes (%s "
                              "and %s); vkfuse does not promote implicitly, cast one with vf_cast", u->name,
                              vf_dtype_name(in_dt[0]), vf_dtype_name(in_dt[i]));
    }
    const vf_shape *ptr[VF_ELEMENTWISE_MAX_INPUTS] = {NULL, NULL, NULL};
    for (int i = 0; i < n_in; i++) ptr[i] = &in[i];
    int bad = 0;
    if (!vf_broadcast(n_in, ptr, out, &bad)) {
        char sh[VF_ELEMENTWISE_MAX_INPUTS][96];
        for (int i = 0; i < n_in; i++) vf_shape_fmt(sh[i], sizeof sh[i], in_dt[i], &in[i]);
        return vf_err_set(err, VF_ERROR_SHAPE, "vf_elementwise_call: op '%s': input shapes %s%s%s%s%s do not "
                          "broadcast (dim %d); sizes must be equal or 1 when aligned at the last dim — reshape "
                          "an input (vf_reshape)", u->name, sh[0], n_in > 1 ? ", " : "", n_in > 1 ? sh[1] : "",
                          n_in > 2 ? ", " : "", n_in > 2 ? sh[2] : "", bad);
    }
    *dt = in_dt[0];
    return VF_OK;
}
