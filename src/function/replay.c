/* Replaying a traced subgraph as op calls (see vf_replay_graph in tape.h).
 *
 * The gradient of a traced vf_cond or vf_while_loop needs the branch's or
 * body's forward values inside the gradient's own subgraphs, where the
 * forward's values cannot be read (a subgraph sees only its params). So
 * the rules recompute them: each node of the forward subgraph is issued
 * again through the frontend (vf_run, vf_reshape, vf_cond, ...), which
 * traces it into the graph being recorded and records it on the active
 * tapes, exactly as if the user's body had been called again. Nested
 * control flow replays through vf_cond / vf_while_loop with bodies that
 * replay the nested subgraphs.
 *
 * A loaded function's graph is its body the same way (vf_replay_body): its
 * eager call's gradient replays it on an inner tape, and a call inside a
 * traced body inlines it (then assigns and prints run too). */
#include "util/fault.h"
#include "kernels/kernels.h"
#include "function/trace.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const vf_graph *g;
    vf_tensor *const *outer;  /* the tensors of g's capture params, in order */
    int n_cc;
    const int *cc;
    vf_tensor *const *cc_t;
    const vf_replay_fn *fn;   /* a loaded function's graph: its captures, effects */
} sub_ctx;

static vf_status replay(vf_context *ctx, const sub_ctx *sc, vf_tensor *const *explicit_in, vf_tensor **outs);

/* vf_cond and vf_while_loop pass one user pointer to both bodies. */
typedef struct { sub_ctx s[2]; } sub_pair;

static vf_status replay_first(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    return replay(ctx, &((sub_pair *)user)->s[0], in, out);
}
static vf_status replay_second(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    return replay(ctx, &((sub_pair *)user)->s[1], in, out);
}

/* The tensor a node's value stands for, in the graph being recorded now. */
static vf_tensor *capture_of(vf_context *ctx, const sub_ctx *sc, int ci)
{
    if (sc->fn) {
        if (ci >= 0 && ci < sc->fn->n_caps) return sc->fn->caps[ci].t;
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function '%s': its graph reads capture %d but the function "
                "has %d", sc->fn->name, ci, sc->fn->n_caps);
        return NULL;
    }
    for (int k = 0; k < sc->n_cc; k++)
        if (sc->cc[k] == ci) return sc->cc_t[k];
    return vf_trace_capture_tensor(ctx, ci, "vf_tape_gradient");
}

/* The result is sized from the inputs at hand (a loaded graph replayed at
   another size of a symbolic dim than it was traced at); sources keep the
   node's shape, as the interpreter gives them. */
static vf_tensor *replay_op(vf_context *ctx, const vf_node *n, vf_tensor **val)
{
    vf_exec e = {.op = n->op, .attrs = n->attrs, .n_in = n->n_in};
    for (int j = 0; j < n->n_in; j++) {
        if (!val[n->in[j]]) return NULL;
        e.in[j] = vf_tensor_ref(val[n->in[j]]);
    }
    vf_dtype dt = n->dtype;
    int rank = n->shape.rank;
    int64_t shape[VF_MAX_RANK];
    memcpy(shape, n->shape.dim, sizeof shape);
    if (vf_op_get(n->op)->kind != VF_KIND_SOURCE && !vf_infer_refs(ctx, n->op, &n->attrs, n->n_in, e.in, &dt, &rank, shape))
        return NULL;
    vf_tensor *out = vf_tensor_new(ctx, "vf_tape_gradient", dt, rank, shape);
    return out ? vf_run(ctx, &e, out) : NULL;
}

static vf_status fail_node(vf_context *ctx, const sub_ctx *sc, const vf_graph *g, int i, const char *why)
{
    if (sc->fn)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient: the gradient flows through a call of "
                       "vf_function '%s' (loaded from a file), whose graph has node %d (%s), which %s; keep the "
                       "sources off that call", sc->fn->name, i, vf_node_name(&g->nodes[i]), why);
    return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                   "vf_tape_gradient: the gradient flows through a traced vf_cond / vf_while_loop whose "
                   "subgraph has node %d (%s), which %s; keep the sources off that control flow or move "
                   "the %s out of it", i, vf_node_name(&g->nodes[i]), why, vf_node_name(&g->nodes[i]));
}

static vf_status replay(vf_context *ctx, const sub_ctx *sc, vf_tensor *const *explicit_in, vf_tensor **outs)
{
    const vf_graph *g = sc->g;
    vf_tensor **val = vf_calloc((size_t)g->n + 1, sizeof *val);
    vf_tensor ***tuple = vf_calloc((size_t)g->n + 1, sizeof *tuple);
    vf_status s = val && tuple ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape_gradient: out of host memory (malloc failed)");
    for (int i = 0; s == VF_OK && i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        switch (n->kind) {
        case VF_NODE_PARAM:
            val[i] = n->index < g->n_explicit ? explicit_in[n->index] : sc->outer[n->index - g->n_explicit];
            break;
        case VF_NODE_CAPTURE:
            val[i] = capture_of(ctx, sc, n->index);
            break;
        case VF_NODE_CONST:
            val[i] = vf_tensor_from_host(ctx, n->dtype, n->shape.rank, n->shape.dim, n->data);
            break;
        case VF_NODE_OP:
            val[i] = replay_op(ctx, n, val);
            break;
        case VF_NODE_RESHAPE:
            val[i] = vf_reshape(ctx, val[n->in[0]], n->target.rank, n->target.dim);
            break;
        case VF_NODE_PRINT: /* a gradient's replay: printed by the forward pass already */
            if (sc->fn && sc->fn->effects && val[n->in[0]]) s = vf_print(ctx, n->label, val[n->in[0]]);
            continue;
        case VF_NODE_ASSIGN:
            if (sc->fn && sc->fn->effects) {
                vf_tensor *var = capture_of(ctx, sc, n->index);
                s = var && val[n->in[0]] ? vf_assign(var, val[n->in[0]]) : ctx->err.status;
            } else {
                s = fail_node(ctx, sc, g, i, "assigns a variable (replaying it would assign again)");
            }
            continue;
        case VF_NODE_HOST:
            s = fail_node(ctx, sc, g, i, "calls a host callback (replaying it would call it again)");
            continue;
        case VF_NODE_PROJ:
            val[i] = tuple[n->in[0]] ? tuple[n->in[0]][n->index] : NULL;
            break;
        case VF_NODE_KERNEL: { /* the user kernel called again (kernels.c) */
            vf_tensor *in[VF_KERNEL_MAX_INPUTS];
            tuple[i] = vf_calloc((size_t)n->n_out + 1, sizeof *tuple[i]);
            if (!tuple[i]) {
                s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape_gradient: out of host memory (malloc failed)");
                continue;
            }
            for (int j = 0; j < n->n_in && j < VF_KERNEL_MAX_INPUTS; j++) in[j] = val[n->in[j]];
            s = vf_ukernel_call(ctx, n->uk, in, n->data, tuple[i]);
            continue;
        }
        case VF_NODE_COND:
        case VF_NODE_WHILE: {
            bool cond = n->kind == VF_NODE_COND;
            int n_exp = n->sub[1]->n_explicit, first = cond ? 1 : 0;
            vf_tensor **in = vf_calloc((size_t)n->n_in + 1, sizeof *in);
            tuple[i] = vf_calloc((size_t)n->n_out + 1, sizeof *tuple[i]);
            if (!in || !tuple[i]) {
                free(in);
                s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape_gradient: out of host memory (malloc failed)");
                continue;
            }
            for (int j = 0; j < n->n_in; j++) in[j] = val[n->in[j]];
            /* sub[0]'s captures follow the explicit inputs, sub[1]'s follow those */
            sub_pair p = {{{n->sub[0], in + first + n_exp, sc->n_cc, sc->cc, sc->cc_t, sc->fn},
                           {n->sub[1], in + first + n_exp + n->split, sc->n_cc, sc->cc, sc->cc_t, sc->fn}}};
            if (cond) {
                s = vf_cond(ctx, in[0], replay_first, replay_second, n_exp, in + 1, n->n_out, tuple[i], &p);
            } else {
                for (int k = 0; k < n->n_out; k++) tuple[i][k] = in[k];
                s = vf_while_loop(ctx, replay_first, replay_second, n_exp, tuple[i], n->max_iterations, &p);
            }
            free(in);
            continue;
        }
        default:
            s = fail_node(ctx, sc, g, i, "cannot be replayed");
            continue;
        }
        if (!val[i]) s = ctx->err.status != VF_OK ? ctx->err.status : fail_node(ctx, sc, g, i, "failed to replay");
    }
    for (int k = 0; s == VF_OK && k < g->n_outputs; k++) outs[k] = val[g->outputs[k]];
    for (int i = 0; tuple && i < g->n; i++) free(tuple[i]);
    free(tuple);
    free(val);
    return s;
}

vf_status vf_replay_graph(vf_context *ctx, const vf_graph *g, vf_tensor *const *params, int n_cc, const int *cc,
                          vf_tensor *const *cc_t, vf_tensor **outs)
{
    sub_ctx sc = {g, params + g->n_explicit, n_cc, cc, cc_t, NULL};
    return replay(ctx, &sc, params, outs);
}

vf_status vf_replay_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const vf_replay_fn *fn = user;
    sub_ctx sc = {.g = fn->g, .outer = in + fn->g->n_explicit, .fn = fn};
    return replay(ctx, &sc, in, out);
}
