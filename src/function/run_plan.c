/* The frontend side of recorded plans: src/plan builds and runs them in
 * terms of graphs, trefs and the backend contract; here the tensors and
 * scopes are bound around it: the storage of params, captures and
 * constants (made once per concrete function, run.c), the output tensors
 * each call makes in the innermost scope, and the context's backend,
 * error records and options. */
#include "function/function.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

vf_plan_value *vf_plan_values(const vf_rval *v, int n)
{
    vf_plan_value *pv = vf_calloc((size_t)n + 1, sizeof *pv);
    for (int i = 0; pv && i < n; i++) pv[i] = (vf_plan_value){.ref = v[i].ref, .var = v[i].var};
    return pv;
}

static vf_plan_value *captures_of(const vf_capture *c, int n)
{
    vf_plan_value *pv = vf_calloc((size_t)n + 1, sizeof *pv);
    for (int i = 0; pv && i < n; i++) pv[i] = (vf_plan_value){.ref = c[i].ref, .var = c[i].is_var};
    return pv;
}

static vf_status const_ref(void *user, const vf_node *n, vf_tref *out)
{
    vf_rval r;
    vf_status s = vf_run_const(user, n, &r);
    *out = r.ref;
    return s;
}

static vf_status host_step(void *user, const vf_node *n, const vf_tref *in, const vf_tref *out)
{
    vf_run_state *rs = user;
    return vf_host_apply(rs->ctx, n, in, out);
}

/* What every plan call needs of the context. */
static vf_plan_env plan_env(vf_run_state *rs)
{
    vf_context *ctx = rs->ctx;
    return (vf_plan_env){.be = &ctx->be, .err = &ctx->err, .be_err = &ctx->be_err, .name = rs->fn,
                         .const_ref = const_ref, .host = host_step, .user = rs, .unfused = rs->unfused || ctx->opt.fusion_off};
}

vf_status vf_run_plan_build(vf_run_state *rs, const vf_graph *g, const vf_plan_value *params, vf_fplan **out)
{
    vf_context *ctx = rs->ctx;
    *out = NULL;
    vf_plan_env env = plan_env(rs);
    vf_plan_value *caps = captures_of(rs->caps, rs->n_caps);
    if (!caps) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
    env.caps = caps;
    env.check_root = ctx->opt.check_root;
    vf_status s = VF_OK;
    if (ctx->opt.check) {
        env.check = vf_context_host(ctx);
        if (!env.check)
            s = vf_fail(ctx, ctx->host.err.status, "vf_function '%s': VKFUSE_CHECK: no CPU backend: %s", rs->fn,
                        ctx->host.err.message);
        /* a directory under VKFUSE_DUMP was asked for: it stays */
        env.check_keep = ctx->opt.dump_dir[0] != '\0';
    }
    if (s == VF_OK) s = vf_fplan_build(&env, g, params, out);
    free(caps);
    return s;
}

vf_status vf_run_plan_call(vf_run_state *rs, vf_fplan *fp, const vf_plan_value *params, int n_out, vf_rval *outs)
{
    vf_context *ctx = rs->ctx;
    int ns = vf_fplan_n_slots(fp);
    vf_tensor **slots = vf_calloc((size_t)ns + 1, sizeof *slots);
    vf_tref *refs = vf_calloc((size_t)ns + 1, sizeof *refs);
    vf_status s = slots && refs ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", rs->fn);
    for (int k = 0; s == VF_OK && k < ns; k++) {
        vf_dtype dt;
        vf_shape sh;
        vf_fplan_slot(fp, k, &dt, &sh);
        /* owned by the call's scope, like the node-by-node run's values */
        if (!(slots[k] = vf_tensor_new(ctx, "vf_function_call", dt, sh.rank, sh.dim))) {
            s = ctx->err.status;
            break;
        }
        refs[k] = vf_tensor_ref(slots[k]);
    }
    vf_plan_env env = plan_env(rs);
    if (s == VF_OK) s = vf_fplan_run(&env, fp, params, refs);
    for (int k = 0; s == VF_OK && k < n_out; k++) {
        vf_shape view;
        vf_tensor *t = slots[vf_fplan_output(fp, k, &view)];
        outs[k] = (vf_rval){.ref = vf_tensor_ref(t), .t = t};
        outs[k].ref.rank = view.rank;
        memcpy(outs[k].ref.shape, view.dim, sizeof outs[k].ref.shape);
    }
    if (s == VF_OK) {
        vf_fplan_stats st;
        vf_fplan_stats_get(fp, &st);
        rs->dispatches += st.dispatches;
        rs->peak_bytes = st.arena_bytes + st.output_bytes;
    }
    free(slots);
    free(refs);
    return s;
}
