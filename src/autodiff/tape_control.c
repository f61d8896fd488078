/* Gradients through traced vf_cond and vf_while_loop (see vf_tape_cf in
 * tape.h and docs/GRADIENTS.md).
 *
 * Eagerly, control flow needs nothing: the branch that ran and every
 * iteration are ordinary ops on the tape. Traced, the ops of a branch or
 * body are values of a subgraph that the enclosing graph cannot read, so
 * the node is recorded as one entry and its rule builds new control flow:
 *
 * - cond: a vf_cond on the same predicate whose branches each replay the
 *   forward branch (vf_replay_graph) on an inner tape and return its
 *   vector-Jacobian product (TF's cond gradient is a cond over the
 *   branches' gradients);
 * - while: a loop that counts the forward's iterations N, then a reverse
 *   loop for k = N-1 .. 0 that gets the state of iteration k and applies
 *   the body's VJP to the adjoint. A bounded loop (max_iterations M > 0)
 *   keeps the states in a stack [M, ...] per var, filled by the counting
 *   loop; an unbounded one recomputes state k from the initial values (an
 *   inner loop of k body steps: O(N^2) body evaluations, no memory per
 *   iteration). Both work for symbolic shapes.
 *
 * Both rules are ordinary op calls, so they are traced into the graph being
 * recorded (and optimised, fused, select-lowered like the forward), and
 * their own control flow is recorded on outer tapes: higher order works. */
#include "function/function.h"
#include "util/fault.h"
#include "autodiff/tape.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const GRAD = "vf_tape_gradient";

static vf_status oom(vf_context *ctx) { return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", GRAD); }

/* ---- recording ------------------------------------------------------------- */

static bool has_cc(const int *cc, int n, int ci)
{
    for (int k = 0; k < n; k++)
        if (cc[k] == ci) return true;
    return false;
}

/* The float trace captures read anywhere in g (nested subgraphs too). */
static bool collect_cc(const vf_graph *g, int **cc, int *n, int *cap)
{
    for (int i = 0; i < g->n; i++) {
        const vf_node *nd = &g->nodes[i];
        for (int s = 0; s < 2; s++)
            if (nd->sub[s] && !collect_cc(nd->sub[s], cc, n, cap)) return false;
        if (nd->kind != VF_NODE_CAPTURE || !vf_dtype_is_float(nd->dtype) || has_cc(*cc, *n, nd->index)) continue;
        if (!vf_grow((void **)cc, cap, *n + 1, sizeof **cc)) return false;
        (*cc)[(*n)++] = nd->index;
    }
    return true;
}

void vf_tape_record_control(vf_context *ctx, vf_node_kind kind, const vf_graph *sub0, const vf_graph *sub1,
                            int n_in, vf_tensor *const *in, int max_iterations, int n_out, vf_tensor *const *out)
{
    if (!ctx->tapes || !vf_tape_recording(ctx)) return;
    vf_tape_cf *cf = vf_calloc(1, sizeof *cf);
    int cap = 0;
    if (!cf || !collect_cc(sub0, &cf->cc, &cf->n_cc, &cap) || !collect_cc(sub1, &cf->cc, &cf->n_cc, &cap)) goto oom;
    cf->kind = kind;
    cf->sub[0] = sub0;
    cf->sub[1] = sub1;
    cf->n_explicit = sub1->n_explicit;
    cf->split = sub0->n_outer;
    cf->n_outer1 = sub1->n_outer;
    cf->max_iterations = max_iterations;
    cf->trace_gen = ctx->trace->gen;
    cf->n_in = n_in + sub0->n_outer + sub1->n_outer + cf->n_cc;
    cf->n_out = n_out;
    cf->in = vf_calloc((size_t)cf->n_in + 1, sizeof *cf->in);
    cf->in_key = vf_calloc((size_t)cf->n_in + 1, sizeof *cf->in_key);
    cf->out = vf_calloc((size_t)n_out + 1, sizeof *cf->out);
    cf->out_key = vf_calloc((size_t)n_out + 1, sizeof *cf->out_key);
    if (!cf->in || !cf->in_key || !cf->out || !cf->out_key) goto oom;
    int j = 0;
    for (int k = 0; k < n_in; k++) cf->in[j++] = vf_tensor_hold(in[k]);
    /* the subgraphs' outer captures: values of the graph being recorded or,
       lifted into it, of an enclosing one (keyed as the user's tensors are) */
    for (int s = 0; s < 2; s++) {
        const vf_graph *g = s ? sub1 : sub0;
        for (int k = 0; k < g->n_outer; k++) {
            vf_tensor *t = vf_trace_tensor_origin(ctx, g->outer[k]);
            if (!t) goto fail;
            cf->in[j++] = vf_tensor_hold(t);
        }
    }
    for (int k = 0; k < j; k++) cf->in_key[k] = vf_tensor_ref(cf->in[k]);
    for (int k = 0; k < cf->n_cc; k++) cf->in_key[j + k] = ctx->trace->caps[cf->cc[k]].ref;
    for (int k = 0; k < n_out; k++) {
        cf->out[k] = vf_tensor_hold(out[k]);
        cf->out_key[k] = vf_tensor_ref(out[k]);
    }
    vf_tape_entry en = {.op = VF_TAPE_CONTROL, .cf = cf};
    cf->refs = 1; /* ours while recording */
    vf_tape_record_entry(ctx, &en);
    vf_tape_cf_release(cf);
    return;
oom:
    oom(ctx);
fail:
    if (cf) {
        cf->refs = 1;
        vf_tape_cf_release(cf);
    }
}

static bool assigns(const vf_graph *g)
{
    for (int i = 0; i < g->n; i++) {
        const vf_node *nd = &g->nodes[i];
        if (nd->kind == VF_NODE_ASSIGN) return true;
        for (int k = 0; k < 2; k++)
            if (nd->sub[k] && assigns(nd->sub[k])) return true;
    }
    return false;
}

static bool same_key(const vf_tref *a, const vf_tref *b)
{
    return a->buf == b->buf && a->offset == b->offset && a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* The tensor whose key is r, if one is alive (a capture a source may be). */
static vf_tensor *live_with_key(vf_context *ctx, const vf_tref *r)
{
    for (vf_tensor *t = ctx->live; t; t = t->next) {
        if (!t->st || t->sym_gen) continue;
        vf_tref k = vf_tensor_ref(t);
        if (same_key(&k, r)) return t;
    }
    return NULL;
}

void vf_tape_record_call(vf_context *ctx, const struct vf_function *fn, const char *name, vf_body body, void *user,
                         const vf_graph *g, int n_in, vf_tensor *const *in, const vf_capture *caps, int n_caps, int n_out, vf_tensor *const *out)
{
    if (!ctx->tapes || !vf_tape_recording(ctx)) return;
    vf_tape_cf *cf = vf_calloc(1, sizeof *cf);
    if (!cf) goto oom;
    cf->call = true;
    cf->fn = fn;
    cf->body = body;
    cf->user = user;
    cf->assigns = assigns(g);
    cf->g = g;
    cf->caps = caps;
    cf->n_caps = n_caps;
    snprintf(cf->name, sizeof cf->name, "%s", name);
    cf->n_explicit = n_in;
    cf->cc = vf_calloc((size_t)n_caps + 1, sizeof *cf->cc);
    cf->in = vf_calloc((size_t)(n_in + n_caps) + 1, sizeof *cf->in);
    cf->in_key = vf_calloc((size_t)(n_in + n_caps) + 1, sizeof *cf->in_key);
    cf->out = vf_calloc((size_t)n_out + 1, sizeof *cf->out);
    cf->out_key = vf_calloc((size_t)n_out + 1, sizeof *cf->out_key);
    if (!cf->cc || !cf->in || !cf->in_key || !cf->out || !cf->out_key) goto oom;
    for (int k = 0; k < n_in; k++) {
        cf->in[k] = vf_tensor_hold(in[k]);
        cf->in_key[k] = vf_tensor_ref(in[k]);
    }
    /* captures a source may be: float tensors alive now (weights, variables),
       but not a variable input (passed by reference, the concrete function
       captures it too): its gradient is the input's, counted once */
    for (int c = 0; c < n_caps; c++) {
        vf_tensor *t = vf_dtype_is_float(caps[c].ref.dtype) ? live_with_key(ctx, &caps[c].ref) : NULL;
        for (int k = 0; t && k < n_in; k++)
            if (same_key(&cf->in_key[k], &caps[c].ref)) t = NULL;
        if (!t) continue;
        cf->cc[cf->n_cc++] = c;
        cf->in[n_in + cf->n_cc - 1] = vf_tensor_hold(t);
        cf->in_key[n_in + cf->n_cc - 1] = caps[c].ref;
    }
    cf->n_in = n_in + cf->n_cc;
    cf->n_out = n_out;
    for (int k = 0; k < n_out; k++) {
        cf->out[k] = vf_tensor_hold(out[k]);
        cf->out_key[k] = vf_tensor_ref(out[k]);
    }
    vf_tape_entry en = {.op = VF_TAPE_CONTROL, .cf = cf};
    cf->refs = 1;
    vf_tape_record_entry(ctx, &en);
    vf_tape_cf_release(cf);
    return;
oom:
    oom(ctx);
    if (cf) {
        cf->refs = 1;
        vf_tape_cf_release(cf);
    }
}

/* ---- shared ------------------------------------------------------------------ */

static vf_tensor *zeros_like(vf_context *ctx, vf_tensor *t)
{
    return vf_ad_broadcast(ctx, vf_ad_scalar(ctx, t->dtype, 0.0), t);
}

static bool key_float(const vf_tref *k) { return vf_dtype_is_float(k->dtype); }

/* ---- cond ---------------------------------------------------------------------- */

typedef struct {
    const vf_tape_cf *cf;
    int na, ns, nd;     /* explicit inputs of the gradient cond: na forward values, ns seeds; nd gradients */
    const int *out_f;   /* the float outputs (the seeds' outputs) */
    const int *d;       /* the differentiable ones among the na values */
} cond_rule;

/* A gradient branch: replays forward branch b on its params and returns
   the VJP with the seeds for the float inputs. */
static vf_status cond_grad_branch(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, const cond_rule *r, int b)
{
    const vf_tape_cf *cf = r->cf;
    int nx = cf->n_explicit, n0 = cf->split, n1 = cf->n_outer1;
    const vf_graph *g = cf->sub[b];
    vf_tensor **pp = vf_calloc((size_t)(nx + n0 + n1) + 1, sizeof *pp);
    vf_tensor **outs = vf_calloc((size_t)cf->n_out + 1, sizeof *outs);
    vf_tensor **targets = vf_calloc((size_t)r->ns + 1, sizeof *targets);
    vf_tensor **src = vf_calloc((size_t)r->nd + 1, sizeof *src);
    vf_status s = pp && outs && targets && src ? VF_OK : oom(ctx);
    vf_tape *tp = s == VF_OK ? vf_tape_begin(ctx) : NULL;
    if (s == VF_OK && !tp) s = ctx->err.status;
    if (s == VF_OK) {
        for (int k = 0; k < nx; k++) pp[k] = in[k];
        /* this branch's outer captures: then's follow the explicit inputs, else's follow then's */
        for (int k = 0; k < (b ? n1 : n0); k++) pp[nx + k] = in[nx + (b ? n0 : 0) + k];
        s = vf_replay_graph(ctx, g, pp, cf->n_cc, cf->cc, in + nx + n0 + n1, outs);
    }
    if (s == VF_OK) {
        for (int t = 0; t < r->ns; t++) targets[t] = outs[r->out_f[t]];
        for (int k = 0; k < r->nd; k++) src[k] = in[r->d[k]];
        s = vf_tape_vjp(tp, r->ns, targets, in + r->na, r->nd, src, out);
    }
    vf_tape_end(tp);
    free(pp);
    free(outs);
    free(targets);
    free(src);
    return s;
}
static vf_status cond_grad_then(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    return cond_grad_branch(ctx, in, out, user, 0);
}
static vf_status cond_grad_else(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    return cond_grad_branch(ctx, in, out, user, 1);
}

static bool grad_cond(vf_context *ctx, const vf_tape_cf *cf, vf_tensor *const *gout, vf_tensor **gin)
{
    int na = cf->n_in - 1;
    vf_tensor **args = vf_calloc((size_t)(na + cf->n_out) + 1, sizeof *args);
    int *out_f = vf_calloc((size_t)cf->n_out + 1, sizeof *out_f), *d = vf_calloc((size_t)na + 1, sizeof *d);
    vf_tensor **res = vf_calloc((size_t)na + 1, sizeof *res);
    vf_status s = args && out_f && d && res ? VF_OK : oom(ctx);
    int ns = 0, nd = 0;
    int first_cc = cf->n_in - cf->n_cc;
    for (int j = 1; s == VF_OK && j < cf->n_in; j++) {
        args[j - 1] = j < first_cc ? cf->in[j] : vf_trace_capture_tensor(ctx, cf->cc[j - first_cc], GRAD);
        if (!args[j - 1]) s = ctx->err.status;
        else if (key_float(&cf->in_key[j])) d[nd++] = j - 1;
    }
    for (int k = 0; s == VF_OK && k < cf->n_out; k++) {
        if (!vf_dtype_is_float(cf->out[k]->dtype)) continue;
        vf_tensor *seed = gout[k] ? gout[k] : zeros_like(ctx, cf->out[k]);
        if (!seed) s = ctx->err.status;
        out_f[ns] = k;
        args[na + ns++] = seed;
    }
    if (s == VF_OK && nd > 0) {
        cond_rule r = {cf, na, ns, nd, out_f, d};
        s = vf_cond(ctx, cf->in[0], cond_grad_then, cond_grad_else, na + ns, args, nd, res, &r);
    }
    for (int k = 0; s == VF_OK && k < nd; k++) gin[1 + d[k]] = res[k];
    free(args);
    free(out_f);
    free(d);
    free(res);
    return s == VF_OK;
}

/* ---- while ---------------------------------------------------------------------- */

typedef struct {
    const vf_tape_cf *cf;
    vf_tensor *const *v0;   /* the loop's initial values */
    vf_tensor *const *o0;   /* cond_fn's outer captures */
    vf_tensor *const *o1;   /* body_fn's outer captures */
    int nf, nb;
    const int *f;           /* float loop vars */
    const int *bcap;        /* float inputs of the body among cf->in (outer captures, concrete captures) */
    vf_tensor **stacks;     /* bounded loops: each var's value at the start of every iteration, [M, ...]; NULL: recompute */
} while_rule;

/* ---- the stack of a bounded loop ----------------------------------------------
   With max_iterations M > 0 the states fit a stack [M, shape] per loop var:
   iteration i writes its starting state to row i (where(iota == i)), the
   reverse loop reads row k (a masked sum over the rows). M x the state's
   size in memory and elementwise work per iteration instead of O(N^2) body
   steps. Bool vars (no sum), stacks past VF_STACK_MAX_BYTES and bounds past
   VF_STACK_MAX_ROWS recompute. */
#define VF_STACK_MAX_BYTES ((int64_t)256 << 20)
/* Past this many rows a loose bound (a safety max_iterations far above the
   usual count) would cost more per iteration than recomputing. */
#define VF_STACK_MAX_ROWS 65536

/* [M, 1, ..., 1] (rank + 1 dims) holding 0 .. M-1 */
static vf_tensor *iota(vf_context *ctx, int m, int rank)
{
    int32_t *v = vf_malloc(sizeof *v * (size_t)m);
    if (!v) return oom(ctx), NULL;
    for (int i = 0; i < m; i++) v[i] = i;
    int64_t sh[VF_MAX_RANK] = {m};
    for (int d = 1; d <= rank; d++) sh[d] = 1;
    vf_tensor *t = vf_tensor_from_host(ctx, VF_I32, rank + 1, sh, v);
    free(v);
    return t;
}

static bool stackable(const vf_tape_cf *cf)
{
    if (cf->max_iterations <= 0 || cf->max_iterations > VF_STACK_MAX_ROWS) return false;
    double bytes = 0; /* in double: M may be huge (a loose bound) */
    for (int k = 0; k < cf->n_explicit; k++) {
        const vf_tref *r = &cf->in_key[k];
        if (r->dtype == VF_BOOL || r->rank + 1 > VF_MAX_RANK) return false;
        double n = 1;
        for (int d = 0; d < r->rank; d++) n *= (double)r->shape[d];
        bytes += n * (double)vf_dtype_size(r->dtype) * (double)cf->max_iterations;
    }
    return bytes <= (double)VF_STACK_MAX_BYTES;
}

/* Row k of stack s (the state at the start of iteration k). */
static vf_tensor *stack_read(vf_context *ctx, vf_tensor *s, vf_tensor *k, int m)
{
    vf_tensor *ix = iota(ctx, m, s->rank - 1);
    vf_tensor *z = vf_ad_scalar(ctx, s->dtype, 0.0);
    return vf_reduce_sum(ctx, vf_where(ctx, vf_equal(ctx, ix, k), s, z), 1, (int[]){0}, false);
}

static vf_tensor *i32(vf_context *ctx, double v) { return vf_fill(ctx, VF_I32, 0, NULL, v); }

/* The forward body replayed on vars (n_explicit of them) into next. */
static vf_status body_step(vf_context *ctx, const while_rule *r, vf_tensor *const *vars, int n_cc, const int *cc,
                           vf_tensor *const *cc_t, vf_tensor **next)
{
    const vf_tape_cf *cf = r->cf;
    int nv = cf->n_explicit;
    vf_tensor **pp = vf_calloc((size_t)(nv + cf->n_outer1) + 1, sizeof *pp);
    if (!pp) return oom(ctx);
    for (int k = 0; k < nv; k++) pp[k] = vars[k];
    for (int k = 0; k < cf->n_outer1; k++) pp[nv + k] = r->o1[k];
    vf_status s = vf_replay_graph(ctx, cf->sub[1], pp, n_cc, cc, cc_t, next);
    free(pp);
    return s;
}

/* Counting loop: vars = the forward's vars and a count. */
static vf_status count_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const while_rule *r = user;
    const vf_tape_cf *cf = r->cf;
    int nv = cf->n_explicit;
    vf_tensor **pp = vf_calloc((size_t)(nv + cf->split) + 1, sizeof *pp);
    if (!pp) return oom(ctx);
    for (int k = 0; k < nv; k++) pp[k] = in[k];
    for (int k = 0; k < cf->split; k++) pp[nv + k] = r->o0[k];
    vf_status s = vf_replay_graph(ctx, cf->sub[0], pp, 0, NULL, NULL, out);
    free(pp);
    return s;
}
static vf_status count_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const while_rule *r = user;
    int nv = r->cf->n_explicit;
    vf_status s = body_step(ctx, r, in, 0, NULL, NULL, out);
    if (s == VF_OK) out[nv] = vf_add(ctx, in[nv], i32(ctx, 1));
    return s;
}

/* Stacking loop: vars = the forward's vars, a count, a stack per var. */
static vf_status keep_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const while_rule *r = user;
    int nv = r->cf->n_explicit, m = r->cf->max_iterations;
    for (int k = 0; k < nv; k++) {
        vf_tensor *ix = iota(ctx, m, in[k]->rank);
        out[nv + 1 + k] = vf_where(ctx, vf_equal(ctx, ix, in[nv]), in[k], in[nv + 1 + k]);
    }
    vf_status s = body_step(ctx, r, in, 0, NULL, NULL, out);
    if (s == VF_OK) out[nv] = vf_add(ctx, in[nv], i32(ctx, 1));
    return s;
}

/* Recomputing loop: vars = j and the forward's vars; j < k. */
static vf_status redo_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_less(ctx, in[0], *(vf_tensor *const *)user);
    return VF_OK;
}
static vf_status redo_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const while_rule *r = ((const while_rule *const *)user)[1];
    out[0] = vf_add(ctx, in[0], i32(ctx, 1));
    return body_step(ctx, r, in + 1, 0, NULL, NULL, out + 1);
}

/* Reverse loop: vars = k, the adjoints of the float vars, the accumulated
   gradients of the body's float captures. */
static vf_status back_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_greater_equal(ctx, in[0], i32(ctx, 0));
    return VF_OK;
}
static vf_status back_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const while_rule *r = user;
    const vf_tape_cf *cf = r->cf;
    int nv = cf->n_explicit, first_cc = cf->n_in - cf->n_cc;
    vf_tensor **state = vf_calloc((size_t)nv + 2, sizeof *state);
    vf_tensor **next = vf_calloc((size_t)nv + 1, sizeof *next);
    vf_tensor **cc_t = vf_calloc((size_t)cf->n_cc + 1, sizeof *cc_t);
    vf_tensor **targets = vf_calloc((size_t)r->nf + 1, sizeof *targets);
    vf_tensor **src = vf_calloc((size_t)(r->nf + r->nb) + 1, sizeof *src);
    vf_tensor **g = vf_calloc((size_t)(r->nf + r->nb) + 1, sizeof *g);
    vf_status s = state && next && cc_t && targets && src && g ? VF_OK : oom(ctx);
    /* the state at the start of iteration k: row k of the stacks, or k body
       steps from the initial values */
    if (s == VF_OK && r->stacks) {
        for (int k = 0; k < nv && s == VF_OK; k++) {
            state[1 + k] = stack_read(ctx, r->stacks[k], in[0], r->cf->max_iterations);
            if (!state[1 + k]) s = ctx->err.status;
        }
    } else if (s == VF_OK) {
        state[0] = i32(ctx, 0);
        for (int k = 0; k < nv; k++) state[1 + k] = r->v0[k];
        const void *u[2] = {in[0], r};
        s = vf_while_loop(ctx, redo_cond, redo_body, nv + 1, state, 0, (void *)u);
    }
    vf_tape *tp = s == VF_OK ? vf_tape_begin(ctx) : NULL;
    if (s == VF_OK && !tp) s = ctx->err.status;
    for (int k = 0; s == VF_OK && k < cf->n_cc; k++) {
        cc_t[k] = vf_trace_capture_tensor(ctx, cf->cc[k], GRAD);
        if (!cc_t[k]) s = ctx->err.status;
    }
    if (s == VF_OK) s = body_step(ctx, r, state + 1, cf->n_cc, cf->cc, cc_t, next);
    if (s == VF_OK) {
        for (int k = 0; k < r->nf; k++) {
            targets[k] = next[r->f[k]];
            src[k] = state[1 + r->f[k]];
        }
        for (int k = 0; k < r->nb; k++) {
            int j = r->bcap[k];
            src[r->nf + k] = j < first_cc ? cf->in[j] : cc_t[j - first_cc];
        }
        s = vf_tape_vjp(tp, r->nf, targets, in + 1, r->nf + r->nb, src, g);
    }
    vf_tape_end(tp);
    if (s == VF_OK) {
        out[0] = vf_sub(ctx, in[0], i32(ctx, 1));
        for (int k = 0; k < r->nf; k++) out[1 + k] = g[k];
        for (int k = 0; k < r->nb; k++) out[1 + r->nf + k] = vf_add(ctx, in[1 + r->nf + k], g[r->nf + k]);
    }
    free(state);
    free(next);
    free(cc_t);
    free(targets);
    free(src);
    free(g);
    return s;
}

static bool grad_while(vf_context *ctx, const vf_tape_cf *cf, vf_tensor *const *gout, vf_tensor **gin)
{
    int nv = cf->n_explicit, n0 = cf->split;
    int *f = vf_calloc((size_t)nv + 1, sizeof *f), *bcap = vf_calloc((size_t)cf->n_in + 1, sizeof *bcap);
    vf_tensor **count = vf_calloc((size_t)(2 * nv) + 2, sizeof *count);
    vf_tensor **back = vf_calloc((size_t)(1 + nv + cf->n_in) + 1, sizeof *back);
    vf_status s = f && bcap && count && back ? VF_OK : oom(ctx);
    int nf = 0, nb = 0;
    for (int k = 0; s == VF_OK && k < nv; k++)
        if (key_float(&cf->in_key[k])) f[nf++] = k;
    for (int j = nv + n0; s == VF_OK && j < cf->n_in; j++)
        if (key_float(&cf->in_key[j])) bcap[nb++] = j;
    while_rule r = {cf, cf->in, cf->in + nv, cf->in + nv + n0, nf, nb, f, bcap, NULL};
    bool stack = stackable(cf);
    if (s == VF_OK && nf + nb > 0) {
        /* N: the forward's iteration count, by the same loop with a counter
           (and the stacks of the states when the loop is bounded) */
        for (int k = 0; k < nv; k++) count[k] = cf->in[k];
        count[nv] = i32(ctx, 0);
        for (int k = 0; stack && k < nv; k++) {
            vf_tensor *ix = iota(ctx, cf->max_iterations, cf->in[k]->rank);
            count[nv + 1 + k] = ix ? vf_where(ctx, vf_equal(ctx, ix, ix), cf->in[k], cf->in[k]) : NULL;
        }
        for (int k = 0; k < (stack ? 2 * nv + 1 : nv + 1); k++)
            if (!count[k]) s = ctx->err.status != VF_OK ? ctx->err.status : oom(ctx);
        if (s == VF_OK)
            s = vf_while_loop(ctx, count_cond, stack ? keep_body : count_body, stack ? 2 * nv + 1 : nv + 1, count,
                              cf->max_iterations, &r);
        if (stack) r.stacks = count + nv + 1;
    }
    if (s == VF_OK && nf + nb > 0) {
        back[0] = vf_sub(ctx, count[nv], i32(ctx, 1));
        for (int k = 0; k < nf; k++) back[1 + k] = gout[f[k]] ? gout[f[k]] : zeros_like(ctx, cf->out[f[k]]);
        for (int k = 0; k < nb; k++) {
            int j = bcap[k];
            vf_tensor *like = j < cf->n_in - cf->n_cc ? cf->in[j] : vf_trace_capture_tensor(ctx, cf->cc[j - (cf->n_in - cf->n_cc)], GRAD);
            back[1 + nf + k] = like ? zeros_like(ctx, like) : NULL;
        }
        for (int k = 0; k < 1 + nf + nb; k++)
            if (!back[k]) s = ctx->err.status != VF_OK ? ctx->err.status : oom(ctx);
        if (s == VF_OK) s = vf_while_loop(ctx, back_cond, back_body, 1 + nf + nb, back, 0, &r);
    }
    for (int k = 0; s == VF_OK && k < nf; k++) gin[f[k]] = back[1 + k];
    for (int k = 0; s == VF_OK && k < nb; k++) gin[bcap[k]] = back[1 + nf + k];
    free(f);
    free(bcap);
    free(count);
    free(back);
    return s == VF_OK;
}

/* ---- an eager call of a traced function ------------------------------------------ */

/* The body runs again eagerly on an inner tape (the plan's kernels were
   not recorded): recomputing is what the function's own trace would do,
   and keeps every shape the call's own (symbolic dims included). A loaded
   function's graph is replayed in place of its body. */
static bool grad_call(vf_context *ctx, const vf_tape_cf *cf, vf_tensor *const *gout, vf_tensor **gin)
{
    if (vf_function_destroyed(cf->fn)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the gradient flows through a call of vf_function '%s', "
                "which was destroyed by vf_function_destroy before the gradient was taken (its body cannot run "
                "again); destroy the function after vf_tape_gradient", GRAD, cf->name);
        return false;
    }
    if (cf->assigns) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the gradient flows through a call of vf_function '%s', "
                "which assigns variables (running it again to differentiate it would assign again); %s", GRAD,
                cf->name, cf->body ? "begin the tape inside the function body instead (its gradient is then "
                "traced with it)" : "it was loaded from a file: call it inside a traced function whose body "
                "begins the tape (the loaded graph is inlined there, its assigns included)");
        return false;
    }
    /* a loaded function has no C body: its graph runs again instead */
    vf_replay_fn loaded = {cf->name, cf->g, cf->caps, cf->n_caps, false};
    vf_tensor **outs = vf_calloc((size_t)cf->n_out + 1, sizeof *outs);
    vf_tensor **targets = vf_calloc((size_t)cf->n_out + 1, sizeof *targets);
    vf_tensor **seeds = vf_calloc((size_t)cf->n_out + 1, sizeof *seeds);
    vf_tensor **src = vf_calloc((size_t)cf->n_in + 1, sizeof *src);
    vf_tensor **g = vf_calloc((size_t)cf->n_in + 1, sizeof *g);
    int *d = vf_calloc((size_t)cf->n_in + 1, sizeof *d);
    vf_status s = outs && targets && seeds && src && g && d ? VF_OK : oom(ctx);
    vf_tape *tp = s == VF_OK ? vf_tape_begin(ctx) : NULL;
    if (s == VF_OK && !tp) s = ctx->err.status;
    if (s == VF_OK)
        s = vf_call_body_scoped(ctx, cf->name, cf->body ? cf->body : vf_replay_body, cf->in, cf->n_out, outs,
                                cf->body ? cf->user : &loaded);
    int nt = 0, nd = 0;
    for (int k = 0; s == VF_OK && k < cf->n_out; k++) {
        if (!vf_dtype_is_float(outs[k]->dtype)) continue;
        targets[nt] = outs[k];
        seeds[nt] = gout[k] ? gout[k] : zeros_like(ctx, outs[k]);
        if (!seeds[nt++]) s = ctx->err.status;
    }
    for (int j = 0; j < cf->n_in; j++)
        if (key_float(&cf->in_key[j])) {
            d[nd] = j;
            src[nd++] = cf->in[j];
        }
    if (s == VF_OK) s = vf_tape_vjp(tp, nt, targets, seeds, nd, src, g);
    vf_tape_end(tp);
    for (int k = 0; s == VF_OK && k < nd; k++) gin[d[k]] = g[k];
    free(outs);
    free(targets);
    free(seeds);
    free(src);
    free(g);
    free(d);
    return s == VF_OK;
}

bool vf_grad_control(vf_context *ctx, const vf_tape_entry *e, vf_tensor *const *gout, vf_tensor **gin)
{
    const vf_tape_cf *cf = e->cf;
    if (cf->uk) return vf_grad_kernel(ctx, cf, gout, gin);
    if (cf->call) return grad_call(ctx, cf, gout, gin);
    if (!ctx->trace || ctx->trace->gen != cf->trace_gen) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the tape holds a traced vf_%s of a vf_function trace that "
                "has ended; compute gradients inside the function body that recorded them", GRAD,
                cf->kind == VF_NODE_COND ? "cond" : "while_loop");
        return false;
    }
    return cf->kind == VF_NODE_COND ? grad_cond(ctx, cf, gout, gin) : grad_while(ctx, cf, gout, gin);
}
