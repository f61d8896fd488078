/* User elementwise ops' GLSL checked at create time (backend.h,
 * vf_uelem_compile_check): the expressions pasted into a small shader with
 * the user's helpers and nothing else (no prelude, no bindings, no push
 * constants: names the op must not reach fail), so that an expression that
 * does not compile is reported against its own text instead of a fused
 * kernel's line numbers. */
#include "backend.h"
#include "util/hash.h"
#include "util/sb.h"

#include <shaderc/shaderc.h>

#include <stdatomic.h>
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
    /* parsed and checked only: no optimisation (the kernel that holds the
       expression is compiled, optimised, when it is generated) */
    vf_status st = VF_OK;
    shaderc_compiler_t c = shaderc_compiler_initialize();
    shaderc_compile_options_t o = c ? shaderc_compile_options_initialize() : NULL;
    shaderc_compilation_result_t r = NULL;
    if (o) {
        shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_zero);
        shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
        r = shaderc_compile_into_spv(c, s->buf, strlen(s->buf), shaderc_compute_shader, what, "main", o);
    }
    if (!r) {
        snprintf(msg, msglen, "shaderc failed to start");
        st = VF_ERROR_COMPILE;
    } else if (shaderc_result_get_compilation_status(r) != shaderc_compilation_status_success) {
        const char *m = shaderc_result_get_error_message(r);
        snprintf(msg, msglen, "%s", m && *m ? m : "(no message)");
        size_t n = strlen(msg);
        while (n && msg[n - 1] == '\n') msg[--n] = '\0';
        st = VF_ERROR_COMPILE;
    }
    shaderc_result_release(r);
    if (o) shaderc_compile_options_release(o);
    if (c) shaderc_compiler_release(c);
    vf_sb_free(s);
    return st;
}

static void head(vf_sb *s, const char *helpers)
{
    /* the extensions every generated kernel enables (cg_finish) */
    vf_sb_puts(s, "#version 450\n#extension GL_EXT_control_flow_attributes : enable\nlayout(local_size_x = 1) in;\n");
    if (helpers) {
        vf_sb_puts(s, "#line 1\n");
        vf_sb_puts(s, helpers);
    }
    vf_sb_puts(s, "\n");
}

/* expr as a function of the inputs (and y) whose body starts at line 1
   and whose closing parenthesis stays on the expression's last line: an
   error found there (`x0 +` meets the ')') is on a line of the text. */
static void wrap(vf_sb *s, int k, const char *expr, int n_x, bool has_y)
{
    vf_sb_add(s, "float vf_user_expr%d(", k);
    for (int i = 0; i < n_x; i++) vf_sb_add(s, "%sfloat x%d", i ? ", " : "", i);
    if (has_y) vf_sb_add(s, "%sfloat y", n_x ? ", " : "");
    vf_sb_puts(s, ")\n{\n    return float(\n#line 1\n");
    vf_sb_puts(s, expr);
    vf_sb_puts(s, " );\n}\n");
}

/* Sources that compiled (their hashes): a program that makes the same op
   in every context, or many times, compiles its check once. A racing
   write loses an entry at worst. */
#define CHECKED_SLOTS 64
static _Atomic uint64_t checked[CHECKED_SLOTS];

vf_status vf_uelem_compile_check(const char *helpers, int n_x, const char *expr, const char *const *grads,
                                 char *what, size_t what_len, char *msg, size_t msglen)
{
    /* everything in one shader (one compile: shaderc takes tens of ms even
       for a few lines); on a failure each part alone, to name it */
    vf_sb s = {0};
    head(&s, helpers);
    if (expr) wrap(&s, 0, expr, n_x, false);
    for (int i = 0; grads && i < VF_ELEMENTWISE_MAX_INPUTS; i++)
        if (grads[i]) wrap(&s, i + 1, grads[i], n_x, true);
    vf_sb_puts(&s, "void main() {}\n");
    uint64_t h = s.buf ? vf_hash64(s.buf, strlen(s.buf), 0x7565636b) | 1 : 0;
    if (h && atomic_load(&checked[h % CHECKED_SLOTS]) == h) {
        vf_sb_free(&s);
        return VF_OK;
    }
    snprintf(what, what_len, "the op's GLSL");
    vf_status st = compile(&s, "all", msg, msglen);
    if (st == VF_OK) {
        atomic_store(&checked[h % CHECKED_SLOTS], h);
        return VF_OK;
    }
    if (st != VF_ERROR_COMPILE) return st;
    if (helpers) {
        head(&s, helpers);
        vf_sb_puts(&s, "void main() {}\n");
        snprintf(what, what_len, "desc.helpers");
        if ((st = compile(&s, what, msg, msglen)) != VF_OK) return st;
    }
    for (int k = 0; k <= VF_ELEMENTWISE_MAX_INPUTS; k++) {
        const char *e = k ? (grads ? grads[k - 1] : NULL) : expr;
        if (!e) continue;
        head(&s, helpers);
        wrap(&s, k, e, n_x, k > 0);
        vf_sb_puts(&s, "void main() {}\n");
        if (k) snprintf(what, what_len, "desc.grad_expr[%d]", k - 1);
        else snprintf(what, what_len, "desc.expr");
        if ((st = compile(&s, what, msg, msglen)) != VF_OK) return st;
    }
    snprintf(what, what_len, "the op's GLSL");
    return VF_ERROR_COMPILE;   /* together only (a helper named like a wrapper) */
}
