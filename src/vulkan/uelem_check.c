/* User elementwise ops' GLSL checked at create time (backend.h,
 * vf_uelem_compile_check): the expression pasted into a small shader with
 * the generated kernels' prelude and the user's helpers, and nothing else,
 * so that an expression that does not compile is reported against its own
 * text instead of a fused kernel's line numbers. */
#include "backend.h"
#include "util/sb.h"
#include "vulkan/codegen/kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_status compile(vf_sb *s, const char *what, char *msg, size_t msglen)
{
    if (s->oom || !s->buf) {
        vf_sb_free(s);
        snprintf(msg, msglen, "out of host memory");
        return VF_ERROR_OUT_OF_MEMORY;
    }
    uint32_t *words = NULL;
    size_t n = 0;
    vf_status st = vf_glsl_compile(s->buf, what, &words, &n, msg, msglen);
    free(words);
    vf_sb_free(s);
    return st;
}

static void head(vf_sb *s, const char *prelude, const char *helpers)
{
    vf_sb_puts(s, "#version 450\n#extension GL_EXT_control_flow_attributes : enable\n"
                  "layout(local_size_x = 1) in;\n");
    vf_sb_puts(s, prelude);
    if (helpers) {
        vf_sb_puts(s, "\n#line 1\n");
        vf_sb_puts(s, helpers);
    }
    vf_sb_puts(s, "\n");
}

vf_status vf_uelem_compile_check(const char *expr, const char *helpers, int n_x, bool has_y, const char *what,
                                 char *msg, size_t msglen)
{
    const char *prelude = vf_shader_template("prelude.glsl");
    if (!prelude) {
        snprintf(msg, msglen, "the embedded prelude.glsl is missing");
        return VF_ERROR_COMPILE;
    }
    vf_sb s = {0};
    if (!expr) { /* the helpers alone: their errors in their own lines */
        head(&s, prelude, helpers);
        vf_sb_puts(&s, "void main() {}\n");
        return compile(&s, what, msg, msglen);
    }
    head(&s, prelude, helpers);
    vf_sb_puts(&s, "float vf_user_expr(");
    for (int k = 0; k < n_x; k++) vf_sb_add(&s, "%sfloat x%d", k ? ", " : "", k);
    if (has_y) vf_sb_add(&s, "%sfloat y", n_x ? ", " : "");
    vf_sb_puts(&s, ")\n{\n    return float(\n#line 1\n");
    vf_sb_puts(&s, expr);
    vf_sb_puts(&s, "\n    );\n}\nvoid main() {}\n");
    return compile(&s, what, msg, msglen);
}
