/* vf_function's signatures: the input_signature check, matching a call
 * against the concrete functions, and explaining a retrace (function_impl.h). */
#include "function/function_impl.h"
#include "util/dims.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

static const char *spec_str(char *buf, size_t len, vf_dtype dt, const vf_shape *s)
{
    return vf_dims_fmt(buf, len, vf_dtype_name(dt), s->rank, s->dim, s->sym, "-1");
}

vf_shape vf_fsig_shape(const vf_tensor_spec *sp)
{
    vf_shape s = {.rank = sp->rank};
    for (int i = 0; i < sp->rank; i++) {
        s.dim[i] = sp->shape[i];
        if (sp->shape[i] == -1) s.sym |= 1u << i;
    }
    return s;
}

/* Checks the call against the input_signature. */
vf_status vf_fsig_check(vf_function *fn, vf_tensor *const *in)
{
    for (int i = 0; i < fn->n_in; i++) {
        const vf_tensor_spec *sp = &fn->sig[i];
        const vf_tensor *t = in[i];
        int bad = -1;
        bool ok = t->dtype == sp->dtype && t->rank == sp->rank;
        for (int k = 0; ok && k < t->rank; k++)
            if (sp->shape[k] != -1 && sp->shape[k] != t->shape[k]) ok = false, bad = k;
        if (ok) continue;
        char want[1024] = "", got[128], sh[VF_SHAPE_STR_LEN], one[128];
        for (int j = 0; j < fn->n_in; j++) {
            vf_shape s = vf_fsig_shape(&fn->sig[j]);
            size_t n = strlen(want);
            snprintf(want + n, sizeof want - n, "%s%s", j ? ", " : "", spec_str(one, sizeof one, fn->sig[j].dtype, &s));
        }
        snprintf(got, sizeof got, "%s%s", vf_dtype_name(t->dtype), vf_shape_str(sh, sizeof sh, t->rank, t->shape));
        vf_shape s = vf_fsig_shape(sp);
        return vf_fail(fn->ctx, t->dtype != sp->dtype ? VF_ERROR_DTYPE : VF_ERROR_SHAPE,
                       "vf_function_call: '%s' input %d is %s but its input_signature says %s%s; the signature is "
                       "(%s) where -1 is any size", fn->name, i, got, spec_str(one, sizeof one, sp->dtype, &s),
                       t->dtype != sp->dtype ? " (dtype differs)" : t->rank != sp->rank ? " (rank differs)" : bad >= 0 ? " (a fixed dim differs)" : "",
                       want);
    }
    return VF_OK;
}

/* A variable passed as an input goes by reference, as TF passes
   variables: the body gets the variable itself (reads see its current
   value, assigns change it), so the concrete function captures that
   variable and serves only calls that pass it again. */
static bool same_var(const concrete *c, int i, const vf_tensor *t)
{
    return !c->var || c->var[i] == (t->is_variable ? t : NULL);
}

bool vf_fsig_matches(const concrete *c, int n, vf_tensor *const *in)
{
    for (int i = 0; i < n; i++) {
        const vf_tensor *t = in[i];
        if (t->dtype != c->dt[i] || t->rank != c->shape[i].rank || !same_var(c, i, t)) return false;
        for (int k = 0; k < t->rank; k++)
            if (!((c->shape[i].sym >> k) & 1u) && c->shape[i].dim[k] != t->shape[k]) return false;
    }
    return true;
}

/* Why in does not match c: "input 0 dim 0: traced 128, got 100". */
int vf_fsig_explain(const concrete *c, int n, vf_tensor *const *in, char *buf, size_t len)
{
    for (int i = 0; i < n; i++) {
        const vf_tensor *t = in[i];
        if (t->dtype != c->dt[i]) {
            snprintf(buf, len, "input %d dtype: traced %s, got %s", i, vf_dtype_name(c->dt[i]), vf_dtype_name(t->dtype));
            return i;
        }
        if (t->rank != c->shape[i].rank) {
            snprintf(buf, len, "input %d rank: traced %d, got %d", i, c->shape[i].rank, t->rank);
            return i;
        }
        for (int k = 0; k < t->rank; k++)
            if (c->shape[i].dim[k] != t->shape[k]) {
                snprintf(buf, len, "input %d dim %d: traced %lld, got %lld", i, k, (long long)c->shape[i].dim[k],
                         (long long)t->shape[k]);
                return i;
            }
        if (!same_var(c, i, t)) {
            snprintf(buf, len, "input %d: traced with %s, got %s", i, c->var[i] ? "a variable" : "a value",
                     t->is_variable ? (c->var[i] ? "another variable (variables go by reference)" : "a variable")
                                    : "a value");
            return i;
        }
    }
    snprintf(buf, len, "no concrete function yet");
    return -1;
}

void vf_fsig_note_retrace(vf_function *fn, vf_tensor *const *in)
{
    int who = vf_fsig_explain(&fn->cfs[fn->n_cf - 1], fn->n_in, in, fn->reason, sizeof fn->reason);
    fn->stats.retraces++;
    if (who >= 0) fn->changes[who]++;
    if (fn->ctx->opt.log_info) fprintf(stderr, "vkfuse: info: vf_function '%s' retraces (%d): %s\n", fn->name, fn->stats.retraces, fn->reason);
    if (fn->stats.retraces >= VF_RETRACE_WARN && !fn->warned) {
        int most = 0;
        for (int i = 1; i < fn->n_in; i++)
            if (fn->changes[i] > fn->changes[most]) most = i;
        fprintf(stderr, "vkfuse: warning: vf_function '%s' has retraced %d times; input %d keeps changing (last: "
                "%s). Every trace costs time and memory: give the function an input_signature with -1 for the "
                "dims that vary (vf_function_desc.input_signature), so that one trace serves every size\n",
                fn->name, fn->stats.retraces, most, fn->reason);
        fn->warned = true;
    }
}
