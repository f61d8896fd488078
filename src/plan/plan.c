/* Plans of concrete functions (plan.h).
 *
 * Building walks the graph once at the call's concrete sizes, exactly as
 * the node-by-node run does (same shape inference, same exec per node),
 * but instead of running each exec it records where each tensor lives:
 * params and outputs are per-call bindings, captures and constants fixed
 * buffers, every other op result an intermediate in the plan's arena at an
 * offset from the liveness planner (plan/memplan.h). Variables keep the
 * node-by-node semantics: an assign is a COPY into the variable's buffer
 * at its place in program order (which plan_assign.c removes where the
 * value's kernel can write the variable itself), a reshape of a variable
 * copies. Concats and slices may be views (plan_view.c).
 *
 * Fusion (plan/partition.h): the graph is partitioned and the execs put
 * in group order; each elementwise DAG, row or matmul group goes to the backend as one
 * vf_plan_fused. Liveness is counted in kernels, a fused group being one
 * step (its inputs live until it runs, its outputs from then), and values
 * internal to a group get no arena space: they are given offsets past the
 * arena (spill_bytes) that are only backed when the backend has to run
 * the group unfused. The branches of a guarded COND are walked into the
 * same exec list (their execs guarded) and kept (builder.br) so that
 * plan_order.c fuses each branch's groups too. VKFUSE_FUSION=0: one
 * kernel per op. The kernel order (fusion, dependency levels, in-place
 * candidates) is plan_order.c. */
#include "plan/plan.h"
#include "util/fault.h"
#include "plan/plan_build.h"
#include "plan/node_exec.h"
#include "plan/check.h"
#include "plan/partition.h"
#include "plan/memplan.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_ALIGN VF_PB_ALIGN

static void ucalls_free(plan_ucall **u, int n)
{
    for (int i = 0; i < n; i++) {
        if (u[i]) free(u[i]->params);
        free(u[i]);
    }
    free(u);
}

static bool flat_kind(vf_node_kind k)
{
    return k == VF_NODE_PARAM || k == VF_NODE_CAPTURE || k == VF_NODE_CONST || k == VF_NODE_OP ||
           k == VF_NODE_RESHAPE || k == VF_NODE_ASSIGN;
}

/* Plannable: flat nodes and user kernels (with their PROJs), HOST nodes
   at the top level (the plan is split at them, plan_split.c), and CONDs
   whose branches hold flat nodes and user kernels (no nested control
   flow, no PRINT: printing is a host decision; no HOST: a callback in a
   branch would need the host to know the predicate). */
bool vf_fplan_graph_ok(const vf_graph *g)
{
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        if (n->kind == VF_NODE_COND) {
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < n->sub[k]->n; j++) {
                    vf_node_kind sk = n->sub[k]->nodes[j].kind;
                    if (sk != VF_NODE_PROJ && sk != VF_NODE_KERNEL && !flat_kind(sk)) return false;
                }
        } else if (n->kind != VF_NODE_PROJ && n->kind != VF_NODE_KERNEL && n->kind != VF_NODE_HOST &&
                   !flat_kind(n->kind)) {
            return false;
        }
    }
    return true;
}

/* The per-node arrays of the graph being walked: the top level's, or
   (depth > 0) the branch's. */
static int *level_node_ex(builder *b) { return b->depth ? b->br[b->cur_br].node_ex : b->node_ex; }
static int *level_node_nex(builder *b) { return b->depth ? b->br[b->cur_br].node_nex : b->node_nex; }
static pval **level_tuple(builder *b) { return b->depth ? b->br[b->cur_br].tuple : b->tuple; }

static int new_inter(builder *b, vf_dtype dt, const vf_shape *s)
{
    if (!vf_grow((void **)&b->it, &b->cap_it, b->n_it + 1, sizeof *b->it)) {
        b->oom = true;
        return -1;
    }
    size_t bytes = (size_t)vf_shape_numel(s) * vf_dtype_size(dt);
    b->it[b->n_it] = (inter){.dt = dt, .shape = *s, .bytes = bytes, .first = b->n_ex, .last = b->n_ex, .slot = -1,
                             .parent = -1};
    return b->n_it++;
}

/* Appends exec e whose tensors are vals in[0..n_in-1] and out. */
bool vf_pb_add_exec(builder *b, const vf_exec *e, const pval *in, const pval *out)
{
    if (b->n_ex == b->cap_ex) {
        int cap = b->cap_ex ? b->cap_ex * 2 : 16;
        vf_exec *ex = vf_realloc(b->ex, (size_t)cap * sizeof *ex);
        if (ex) b->ex = ex;
        vf_plan_loc(*loc)[4] = ex ? vf_realloc(b->loc, (size_t)cap * sizeof *loc) : NULL;
        if (loc) b->loc = loc;
        int(*ri)[4] = loc ? vf_realloc(b->ref_inter, (size_t)cap * sizeof *ri) : NULL;
        if (ri) b->ref_inter = ri;
        vf_plan_guard *gd = ri ? vf_realloc(b->guard, (size_t)cap * sizeof *gd) : NULL;
        if (gd) b->guard = gd;
        int *en = gd ? vf_realloc(b->ex_node, (size_t)cap * sizeof *en) : NULL;
        if (!en) {
            b->oom = true;
            return false;
        }
        b->ex_node = en;
        b->cap_ex = cap;
    }
    int x = b->n_ex++;
    b->ex[x] = *e;
    b->guard[x] = b->cur;
    b->ex_node[x] = b->cur_node;
    for (int j = 0; j < 4; j++) {
        const pval *v = j == 3 ? out : j < e->n_in ? &in[j] : NULL;
        b->loc[x][j] = v ? v->loc : (vf_plan_loc){VF_PLAN_FIXED, 0};
        b->ref_inter[x][j] = v ? v->inter : -1;
        if (v && v->inter >= 0 && b->it[v->inter].last < x) b->it[v->inter].last = x;
    }
    return true;
}

/* A new intermediate value of dtype dt and shape s. */
pval vf_pb_inter_val(builder *b, vf_dtype dt, const vf_shape *s)
{
    int id = new_inter(b, dt, s);
    pval v = {.ref = {.dtype = dt, .rank = s->rank}, .loc = {VF_PLAN_ARENA, 0}, .inter = id};
    memcpy(v.ref.shape, s->dim, sizeof v.ref.shape);
    return v;
}

static bool walk(builder *b, const vf_graph *g, const vf_plan_value *params, const pval *sub, pval *v, vf_status *st);

static bool add_copy(builder *b, const pval *from, const pval *to)
{
    vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = from->ref, .out = to->ref};
    return !b->oom && vf_pb_add_exec(b, &e, from, to);
}

/* A user kernel's node. At most 3 inputs and one output: one exec (what
   an exec holds). More: its parts, execs that between them hold every
   tensor of the call (part p: inputs 3p .. 3p+2 and output p, the last
   output again where a part has no output of its own; attrs.axis = p),
   which vf_pb_fusion makes one kernel (a VF_FUSED_USER group) so the
   backend binds them all to the one dispatch. In a COND branch its execs
   are guarded like the branch's others. False when it cannot run in a
   plan at these sizes (the graph runs node by node, which reports any
   error with its message). */
static bool walk_kernel(builder *b, const vf_node *n, int id, pval *v)
{
    const vf_ukernel *k = n->uk;
    if (!k || k->loaded || k->check_bounds) return false;
    int parts = k->n_in > 3 || k->n_out > 1 ? VF_UKERNEL_PARTS(k->n_in, k->n_out) : 1;
    if (!vf_grow((void **)&b->ucalls, &b->cap_ucalls, b->n_ucalls + 1, sizeof *b->ucalls)) return !(b->oom = true);
    plan_ucall *u = vf_calloc(1, sizeof *u);
    void *params = k->param_bytes ? vf_malloc(k->param_bytes) : NULL;
    if (!u || (k->param_bytes && !params)) {
        free(u);
        free(params);
        return !(b->oom = true);
    }
    if (params) memcpy(params, n->data, k->param_bytes);
    u->params = params;
    b->ucalls[b->n_ucalls++] = u;
    pval in[VF_KERNEL_MAX_INPUTS];
    for (int i = 0; i < k->n_in; i++) {
        in[i] = v[n->in[i]];
        u->in[i] = (vf_tensor_spec){.dtype = in[i].ref.dtype, .rank = in[i].ref.rank};
        memcpy(u->in[i].shape, in[i].ref.shape, sizeof u->in[i].shape);
    }
    char msg[256];
    if (vf_ukernel_resolve(k, u->in, params, u->out, &u->shapes, &u->x, msg, sizeof msg) != VF_OK || u->x.empty)
        return false;
    pval *tuple = vf_calloc((size_t)k->n_out + 1, sizeof *tuple);
    if (!(level_tuple(b)[id] = tuple)) return !(b->oom = true);
    for (int j = 0; j < k->n_out; j++) {
        vf_shape os = {.rank = u->out[j].rank};
        memcpy(os.dim, u->out[j].shape, sizeof os.dim);
        tuple[j] = vf_pb_inter_val(b, u->out[j].dtype, &os);
    }
    for (int p = 0; p < parts && !b->oom; p++) {
        int i0 = 3 * p < k->n_in ? 3 * p : k->n_in, ni = k->n_in - i0 < 3 ? k->n_in - i0 : 3;
        const pval *o = &tuple[p < k->n_out ? p : k->n_out - 1];
        vf_exec e = {.op = VF_OP_USER_KERNEL, .n_in = ni, .out = o->ref, .ux = &u->x, .attrs.axis = p};
        for (int i = 0; i < ni; i++) e.in[i] = in[i0 + i].ref;
        if (!vf_pb_add_exec(b, &e, in + i0, o)) return false;
    }
    if (b->oom) return false;
    v[id] = (pval){.inter = -1};
    return true;
}

/* A COND at the top level: both branches go into the plan, their execs
   guarded by the predicate (decided on the device, vf_plan_guard), each
   ending with guarded copies of its results into the COND's outputs. */
static bool walk_cond(builder *b, const vf_node *n, int id, pval *v, vf_status *st)
{
    pval pv = v[n->in[0]];
    if (b->depth > 0 || pv.ref.dtype != VF_BOOL || pv.ref.rank != 0) return false;
    if (pv.inter < 0) { /* an input, capture or constant: a copy of it, at an offset a binding can take */
        pval c = vf_pb_inter_val(b, VF_BOOL, &(vf_shape){.rank = 0});
        if (b->oom || !add_copy(b, &pv, &c)) return false;
        pv = c;
    }
    if (!vf_grow((void **)&b->preds, &b->cap_preds, b->n_preds + 1, sizeof *b->preds) ||
        !vf_grow((void **)&b->pred_node, &b->cap_pred_node, b->n_preds + 1, sizeof *b->pred_node))
        return !(b->oom = true);
    int pred = b->n_preds++;
    b->preds[pred] = pv;
    b->pred_node[pred] = id;
    pval *tuple = vf_calloc((size_t)n->n_out + 1, sizeof *tuple);
    if (!(b->tuple[id] = tuple)) return !(b->oom = true);
    int ne = n->sub[0]->n_explicit;
    bool ok = true;
    for (int k = 0; ok && k < 2; k++) {
        const vf_graph *sg = n->sub[k];
        if (!vf_grow((void **)&b->br, &b->cap_br, b->n_br + 1, sizeof *b->br)) return !(b->oom = true);
        vf_pb_branch *br = &b->br[b->n_br++]; /* kept for fusing the branch (plan_order.c) */
        *br = (vf_pb_branch){.g = sg, .cond = id, .x0 = b->n_ex, .node_ex = vf_calloc((size_t)sg->n + 1, sizeof(int)),
                             .node_nex = vf_calloc((size_t)sg->n + 1, sizeof(int)),
                             .tuple = vf_calloc((size_t)sg->n + 1, sizeof(pval *)),
                             .v = vf_calloc((size_t)sg->n + 1, sizeof(pval))};
        pval *sp = vf_calloc((size_t)sg->n_params + 1, sizeof *sp), *sv = br->v;
        ok = sp && sv && br->node_ex && br->node_nex && br->tuple;
        if (!ok) b->oom = true;
        for (int p = 0; ok && p < sg->n_params; p++) /* the layout run_cond reads */
            sp[p] = v[n->in[p < sg->n_explicit ? 1 + p : 1 + ne + (k ? n->split : 0) + p - sg->n_explicit]];
        b->cur = (vf_plan_guard){pred, k == 0};
        b->cur_br = b->n_br - 1;
        b->depth++;
        ok = ok && walk(b, sg, NULL, sp, sv, st);
        b->depth--;
        b->br[b->cur_br].x1 = b->n_ex;
        for (int o = 0; ok && o < n->n_out; o++) {
            const pval *r = &sv[sg->outputs[o]];
            vf_shape rs = vf_tref_shape(&r->ref);
            if (k == 0) tuple[o] = vf_pb_inter_val(b, r->ref.dtype, &rs);
            vf_shape ts = vf_tref_shape(&tuple[o].ref);
            ok = !b->oom && r->ref.dtype == tuple[o].ref.dtype && vf_shape_equal(&rs, &ts) &&
                 vf_shape_numel(&rs) > 0 && add_copy(b, r, &tuple[o]);
        }
        b->cur = (vf_plan_guard){-1, false};
        free(sp);
    }
    if (!ok) return false;
    v[id] = (pval){.inter = -1};
    return true;
}

/* Building a segment: whether node i is this segment's to run; if not,
   v[i] is its import (bound after the graph's params) or absent. */
static bool seg_node(builder *b, const vf_graph *g, int i, pval *v)
{
    const vf_pb_seg *sg = b->seg;
    int ns = sg->node_seg[i];
    if (ns == VF_SEG_ANY || ns == sg->s) return true;
    int k = sg->import_of[i];
    if (k < 0) {
        v[i] = (pval){.inter = -1, .absent = true};
    } else {
        v[i] = (pval){.ref = sg->imports[k].ref, .loc = {VF_PLAN_BIND, g->n_params + k}, .inter = -1};
        v[i].ref.buf = NULL;
        v[i].ref.offset = 0;
    }
    b->node_ex[i] = -1;
    b->node_nex[i] = 0;
    return false;
}

/* Walks g (params: the call's, or sub: a branch's); false: not plannable
   (or out of memory: b->oom). */
static bool walk(builder *b, const vf_graph *g, const vf_plan_value *params, const pval *sub, pval *v, vf_status *st)
{
    const vf_plan_env *env = b->env;
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        if (b->seg && b->depth == 0 && !seg_node(b, g, i, v)) continue;
        pval in[3];
        for (int j = 0; j < n->n_in && j < 3; j++) in[j] = v[n->in[j]];
        for (int j = 0; j < n->n_in; j++)
            if (v[n->in[j]].absent) return false; /* the segmentation missed an import */
        int first = b->n_ex;
        if (b->depth == 0) b->cur_node = i; /* a branch's execs are its COND's */
        switch (n->kind) {
        case VF_NODE_PARAM: {
            if (sub) {
                v[i] = sub[n->index];
                break;
            }
            const vf_plan_value *p = &params[n->index];
            if (!p->ref.buf) return false;
            v[i] = (pval){.ref = p->ref, .loc = {VF_PLAN_BIND, n->index}, .inter = -1, .var = p->var};
            v[i].ref.buf = NULL;
            v[i].ref.offset = 0;
            break;
        }
        case VF_NODE_CAPTURE: {
            const vf_plan_value *c = &env->caps[n->index];
            if (!c->ref.buf) return false;
            v[i] = (pval){.ref = c->ref, .loc = {VF_PLAN_FIXED, 0}, .inter = -1, .var = c->var};
            break;
        }
        case VF_NODE_CONST: {
            vf_tref r;
            if ((*st = env->const_ref(env->user, n, &r)) != VF_OK) return false;
            if (!r.buf) return false;
            v[i] = (pval){.ref = r, .loc = {VF_PLAN_FIXED, 0}, .inter = -1};
            break;
        }
        case VF_NODE_OP: {
            if (n->n_in > 3) return false;
            vf_tref refs[3];
            for (int j = 0; j < n->n_in; j++) refs[j] = in[j].ref;
            vf_dtype dt;
            vf_shape os;
            vf_err err = {0};
            if (vf_node_infer_at(n, refs, &dt, &os, &err) != VF_OK || vf_shape_numel(&os) == 0) return false;
            /* an empty input of a non-empty result (a pad or concat of a
               symbolic dim that is 0 this call): the interpreter's rules */
            for (int j = 0; j < n->n_in; j++)
                if (vf_tref_numel(&refs[j]) == 0) return false;
            if ((vf_op_get(n->op)->flags & VF_OPF_VIEW) && vf_pb_try_view(b, g, i, in, &os, v + i)) break;
            if (b->oom) return false;
            v[i] = vf_pb_inter_val(b, dt, &os);
            vf_exec e = vf_node_op_exec(n, refs, &v[i].ref);
            if (b->oom || !vf_pb_add_exec(b, &e, in, &v[i])) return false;
            break;
        }
        case VF_NODE_RESHAPE: {
            vf_dtype dt;
            vf_shape out;
            vf_err err = {0};
            if (vf_node_infer_at(n, &in[0].ref, &dt, &out, &err) != VF_OK || vf_shape_numel(&out) == 0) return false;
            if (in[0].var) { /* the variable's value now, not after later assigns */
                v[i] = vf_pb_inter_val(b, in[0].ref.dtype, &out);
                vf_exec e = vf_node_copy_exec(&in[0].ref, &out, &v[i].ref);
                if (b->oom || !vf_pb_add_exec(b, &e, in, &v[i])) return false;
                break;
            }
            v[i] = in[0];
            vf_tref_reshape(&v[i].ref, &out);
            break;
        }
        case VF_NODE_ASSIGN: {
            const vf_plan_value *c = &env->caps[n->index];
            vf_shape vs = vf_tref_shape(&c->ref);
            vf_dtype dt;
            vf_err err = {0};
            if (!c->ref.buf || vf_node_infer_at(n, &in[0].ref, &dt, &vs, &err) != VF_OK) return false;
            pval var = {.ref = c->ref, .loc = {VF_PLAN_FIXED, 0}, .inter = -1, .var = true};
            bool self = in[0].loc.kind == VF_PLAN_FIXED && vf_node_assign_is_self(&in[0].ref, &c->ref);
            if (!self) {
                vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = in[0].ref, .out = c->ref};
                if (!vf_pb_add_exec(b, &e, in, &var)) return false;
            }
            v[i] = var;
            break;
        }
        case VF_NODE_COND:
            if (!walk_cond(b, n, i, v, st)) return false;
            break;
        case VF_NODE_KERNEL:
            if (!walk_kernel(b, n, i, v)) return false;
            break;
        case VF_NODE_PROJ:
            if (!level_tuple(b)[n->in[0]]) return false;
            v[i] = level_tuple(b)[n->in[0]][n->index];
            break;
        default: return false;
        }
        level_node_ex(b)[i] = b->n_ex > first ? first : -1;
        level_node_nex(b)[i] = b->n_ex - first;
    }
    return true;
}

static void builder_free(builder *b, int n_nodes)
{
    for (int r = 0; r < b->n_br; r++) {
        vf_pb_branch *br = &b->br[r];
        for (int i = 0; br->tuple && i < br->g->n; i++) free(br->tuple[i]);
        free(br->tuple), free(br->node_ex), free(br->node_nex), free(br->v);
    }
    free(b->br);
    for (int i = 0; b->tuple && i < n_nodes; i++) free(b->tuple[i]);
    free(b->tuple);
    free(b->node_nex);
    free(b->guard);
    free(b->ex_node);
    free(b->preds);
    free(b->pred_node);
    free(b->view);
    free(b->exported);
    free(b->ex);
    free(b->loc);
    free(b->ref_inter);
    free(b->it);
    free(b->node_ex);
    ucalls_free(b->ucalls, b->n_ucalls);
}

/* Where intermediate id lives: its output binding, the arena, or (internal
   to a fused group) past the arena. */
static void place(const builder *b, const vf_fplan *fp, int id, const size_t *off, vf_plan_loc *l, vf_tref *r)
{
    size_t at;
    id = vf_pb_root(b, id, &at); /* a view: at its offset in its root */
    if (b->it[id].fixed) { /* an assign's value written in place: the variable's buffer */
        *l = (vf_plan_loc){VF_PLAN_FIXED, 0};
        r->buf = b->it[id].fixed_ref.buf;
        r->offset = b->it[id].fixed_ref.offset + at;
        return;
    }
    if (b->it[id].slot >= 0) {
        *l = (vf_plan_loc){VF_PLAN_BIND, fp->n_params + b->it[id].slot};
        r->offset = at;
    } else {
        *l = (vf_plan_loc){VF_PLAN_ARENA, 0};
        r->offset = off[id] + at;
    }
    r->buf = NULL;
}

void vf_fplan_free(const vf_backend_t *be, vf_fplan *fp)
{
    if (!fp) return;
    if (fp->split) vf_pb_split_free(be, fp->split);
    if (fp->plan) be->iface->plan_destroy(be->self, fp->plan);
    vf_fcheck_free(fp->check);
    ucalls_free(fp->ucalls, fp->n_ucalls);
    free(fp->pshape);
    free(fp->slot_dt);
    free(fp->slot_shape);
    free(fp->out_slot);
    free(fp->out_view);
    free(fp);
}

/* VKFUSE_CHECK: every intermediate in memory gets an output slot of its
   own (no arena sharing, so each kernel's outputs can be read back), and
   each exec's graph node and kernel are kept for the report. */
static bool check_slots(builder *b, const vf_graph *g, vf_fplan *fp, const fusion *fz, int **ex_kernel)
{
    int cap = (b->seg ? b->seg->n_outs : g->n_outputs) + b->n_it + 1;
    vf_dtype *dt = vf_realloc(fp->slot_dt, sizeof *dt * (size_t)cap);
    if (dt) fp->slot_dt = dt;
    vf_shape *sh = vf_realloc(fp->slot_shape, sizeof *sh * (size_t)cap);
    if (sh) fp->slot_shape = sh;
    *ex_kernel = vf_malloc(sizeof **ex_kernel * (size_t)(b->n_ex + 1));
    if (!dt || !sh || !*ex_kernel) return false;
    for (int i = 0; i < b->n_it; i++) {
        inter *it = &b->it[i];
        if (it->slot >= 0 || it->internal) continue;
        it->slot = fp->n_slots++;
        fp->slot_dt[it->slot] = it->dt;
        fp->slot_shape[it->slot] = it->shape;
    }
    /* Kernel numbers in plan order: the execs of a fused group share one
       (they are contiguous), any other exec is a kernel of its own. Not the
       step: kernels of one dependency level share a step. */
    int *kn = *ex_kernel, k = -1, prev = -1;
    for (int x = 0; x < b->n_ex; x++) kn[x] = -1;
    for (int i = 0; i < fz->n_fused; i++)
        for (int y = 0; y < fz->fused[i].n_execs; y++) kn[fz->fused[i].first_exec + y] = i;
    for (int x = 0; x < b->n_ex; x++) {
        int group = kn[x];
        if (group < 0 || group != prev) k++;
        prev = group, kn[x] = k;
    }
    return true;
}

static vf_status make_check(builder *b, vf_fplan *fp, const vf_plan_desc *d, const int *ex_node,
                            const int *ex_kernel, const vf_plan_pred *preds)
{
    bool *internal = vf_malloc(sizeof *internal * (size_t)(b->n_it + 1));
    int *bind = vf_malloc(sizeof *bind * (size_t)(b->n_it + 1));
    int *pred_inter = vf_malloc(sizeof *pred_inter * (size_t)(b->n_preds + 1));
    vf_status s = VF_OK;
    if (internal && bind && pred_inter) {
        for (int i = 0; i < b->n_it; i++)
            internal[i] = b->it[i].internal, bind[i] = b->it[i].slot >= 0 ? fp->n_params + b->it[i].slot : -1;
        for (int k = 0; k < b->n_preds; k++) pred_inter[k] = b->preds[k].inter;
        vf_fcheck_desc cd = {
            .fn = b->env->name, .execs = b->ex, .loc = (const vf_plan_loc(*)[4])b->loc,
            .inter = (const int(*)[4])b->ref_inter, .kernel = ex_kernel, .node = ex_node, .n_execs = b->n_ex,
            .internal = internal, .bind = bind, .n_inter = b->n_it, .guards = d->guards, .preds = preds,
            .pred_inter = pred_inter, .n_preds = b->n_preds, .glsl_dir = d->glsl_dir, .keep_glsl = b->env->check_keep,
        };
        fp->check = vf_fcheck_create(&cd, b->env->check, b->env->be, b->env->err);
        if (!fp->check) s = b->env->err->status;
    } else {
        s = vf_err_set(b->env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", b->env->name);
    }
    free(internal);
    free(bind);
    free(pred_inter);
    return s;
}

/* Output slots, arena offsets, the backend plan. */
static vf_status finish(builder *b, const vf_graph *g, const pval *v, vf_fplan *fp, bool *ok)
{
    const vf_plan_env *env = b->env;
    *ok = false;
    int n_outs = b->seg ? b->seg->n_outs : g->n_outputs;
    const int *outs = b->seg ? b->seg->outs : g->outputs;
    for (int k = 0; k < n_outs; k++) {
        const pval *o = &v[outs[k]];
        if (o->inter < 0 || o->var) return VF_OK; /* params, captures, constants: node by node */
        inter *it = &b->it[o->inter];
        if (it->parent >= 0) return VF_OK; /* a view handed out (plan_view.c never makes one): node by node */
        if (it->slot < 0) {
            it->slot = fp->n_slots++;
            fp->slot_dt[it->slot] = it->dt;
            fp->slot_shape[it->slot] = it->shape;
        }
        fp->out_slot[k] = it->slot;
        fp->out_view[k] = vf_tref_shape(&o->ref);
    }
    fusion fz = {0};
    vf_mem_interval *iv = vf_malloc(sizeof *iv * (size_t)(b->n_it + 1));
    int *arena_id = vf_malloc(sizeof *arena_id * (size_t)(b->n_it + 1));
    size_t *aoff = vf_malloc(sizeof *aoff * (size_t)(b->n_it + 1)), *off = vf_malloc(sizeof *off * (size_t)(b->n_it + 1));
    int *ord = vf_malloc(sizeof *ord * (size_t)(b->n_ex + 1)), *step = vf_malloc(sizeof *step * (size_t)(b->n_ex + 1));
    int n = 0;
    size_t arena = 0, spill = 0;
    bool good = iv && arena_id && aoff && off && ord && step;
    good = good && vf_pb_fusion(b, g, v, &fz, ord, step) && vf_pb_assign_in_place(b, &fz, ord, step) &&
           vf_pb_schedule_levels(b, &fz, ord, step) && vf_pb_reorder(b, ord, step);
    bool check = good && env->check;
    int *ex_kernel = NULL;
    if (check) good = check_slots(b, g, fp, &fz, &ex_kernel);
    for (int i = 0; good && i < b->n_it; i++) {
        arena_id[i] = -1;
        if (b->it[i].parent >= 0 || b->it[i].fixed) continue; /* a view: in its root's bytes; in a variable */
        fp->st.intermediate_bytes += (int64_t)b->it[i].bytes;
        if (b->it[i].slot >= 0) {
            fp->st.output_bytes += (int64_t)b->it[i].bytes;
            continue;
        }
        arena_id[i] = -1;
        if (b->it[i].internal) continue;
        arena_id[i] = n;
        iv[n++] = (vf_mem_interval){b->it[i].bytes, b->it[i].first, b->it[i].last};
    }
    int *alias = good ? vf_malloc(sizeof *alias * (size_t)(n + 1)) : NULL;
    bool *taken = good ? vf_malloc(sizeof *taken * (size_t)(n + 1)) : NULL;
    good = good && alias && taken;
    if (good) vf_pb_inplace_candidates(b, &fz, step, arena_id, n, alias, taken);
    size_t bound = 0;
    good = good && vf_memplan_inplace(iv, n, alias, PLAN_ALIGN, aoff, &arena, &bound);
    free(alias);
    free(taken);
    fp->st.arena_lower_bound = (int64_t)bound;
    for (int i = 0; good && i < b->n_it; i++) {
        if (b->it[i].slot >= 0 || b->it[i].parent >= 0 || b->it[i].fixed) continue;
        if (arena_id[i] >= 0) {
            off[i] = aoff[arena_id[i]];
        } else {
            off[i] = arena + spill;
            spill += (b->it[i].bytes + PLAN_ALIGN - 1) & ~(size_t)(PLAN_ALIGN - 1);
        }
    }
    for (int x = 0; good && x < b->n_ex; x++)
        for (int j = 0; j < 4; j++) {
            int id = b->ref_inter[x][j];
            if (id >= 0) place(b, fp, id, off, &b->loc[x][j], j == 3 ? &b->ex[x].out : &b->ex[x].in[j]);
        }
    for (int t = 0; good && t < fz.n_tens; t++)
        if (fz.tinter[t] >= 0) place(b, fp, fz.tinter[t], off, &fz.tloc[t], &fz.tens[t]);
    vf_plan_pred *preds = vf_calloc((size_t)b->n_preds + 1, sizeof *preds);
    good = good && preds;
    for (int k = 0; good && k < b->n_preds; k++) {
        preds[k] = (vf_plan_pred){b->preds[k].ref, b->preds[k].loc, b->pred_node[k]};
        if (b->preds[k].inter >= 0) place(b, fp, b->preds[k].inter, off, &preds[k].loc, &preds[k].ref);
    }
    free(iv);
    free(arena_id);
    free(aoff);
    free(off);
    free(ord);
    free(step);
    if (!good) {
        vf_pb_fusion_free(&fz);
        free(preds);
        free(ex_kernel);
        return vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    }
    char glsl_dir[512] = "";
    if (check) vf_fcheck_glsl_dir(env->check_root, env->name, glsl_dir, sizeof glsl_dir);
    fp->st.arena_bytes = (int64_t)arena;
    vf_plan_desc d = {
        .execs = b->ex,
        .loc = (const vf_plan_loc(*)[4])b->loc,
        .n_execs = b->n_ex,
        .arena_bytes = arena,
        .n_binds = fp->n_params + fp->n_slots,
        .name = env->name,
        .fused = fz.fused,
        .n_fused = fz.n_fused,
        .spill_bytes = spill,
        .guards = b->n_preds ? b->guard : NULL,
        .preds = preds,
        .n_preds = b->n_preds,
        .exec_node = b->ex_node,
        .glsl_dir = glsl_dir[0] ? glsl_dir : NULL,
    };
    vf_status s = env->be->iface->plan_create(env->be->self, &d, &fp->plan);
    if (s == VF_OK && check) s = make_check(b, fp, &d, b->ex_node, ex_kernel, preds);
    free(preds);
    free(ex_kernel);
    int kernels = b->n_ex;
    for (int i = 0; i < fz.n_fused; i++) kernels -= fz.fused[i].n_execs - 1;
    vf_pb_fusion_free(&fz);
    if (s != VF_OK)
        return vf_err_backend(env->err, env->be_err, s, "vf_function '%s': recording its plan (%s backend)", env->name,
                              env->be->iface->name);
    vf_plan_info info = {.kernels = kernels, .dispatches = kernels};
    if (env->be->iface->plan_info) env->be->iface->plan_info(env->be->self, fp->plan, &info);
    fp->st.kernels = info.kernels;
    fp->st.dispatches = info.dispatches;
    *ok = true;
    return VF_OK;
}

vf_status vf_fplan_build(const vf_plan_env *env, const vf_graph *g, const vf_plan_value *params, vf_fplan **out)
{
    if (vf_graph_has_host(g)) return vf_pb_build_split(env, g, params, out);
    return vf_pb_build(env, g, params, NULL, out);
}

vf_status vf_pb_build(const vf_plan_env *env, const vf_graph *g, const vf_plan_value *params, const vf_pb_seg *seg,
                      vf_fplan **out)
{
    *out = NULL;
    builder b = {.env = env, .seg = seg, .view = vf_calloc((size_t)g->n + 1, sizeof(bool)),
                 .node_ex = vf_calloc((size_t)g->n + 1, sizeof(int)),
                 .node_nex = vf_calloc((size_t)g->n + 1, sizeof(int)), .tuple = vf_calloc((size_t)g->n + 1, sizeof(pval *)),
                 .cur = {-1, false}};
    pval *v = vf_calloc((size_t)g->n + 1, sizeof *v);
    vf_fplan *fp = vf_calloc(1, sizeof *fp);
    int np = g->n_params + (seg ? seg->n_imports : 0), no = seg ? seg->n_outs : g->n_outputs;
    if (fp) {
        fp->n_params = np;
        fp->n_outs = no;
        fp->pshape = vf_calloc((size_t)np + 1, sizeof *fp->pshape);
        fp->slot_dt = vf_calloc((size_t)no + 1, sizeof *fp->slot_dt);
        fp->slot_shape = vf_calloc((size_t)no + 1, sizeof *fp->slot_shape);
        fp->out_slot = vf_calloc((size_t)no + 1, sizeof *fp->out_slot);
        fp->out_view = vf_calloc((size_t)no + 1, sizeof *fp->out_view);
    }
    vf_status s = VF_OK;
    if (!v || !fp || !b.view || !vf_pb_mark_exported(&b, g) || !b.node_ex || !b.node_nex || !b.tuple || !fp->pshape || !fp->slot_dt || !fp->slot_shape || !fp->out_slot || !fp->out_view)
        s = vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    for (int i = 0; s == VF_OK && i < np; i++)
        fp->pshape[i] = vf_tref_shape(i < g->n_params ? &params[i].ref : &seg->imports[i - g->n_params].ref);
    bool ok = false;
    if (s == VF_OK && walk(&b, g, params, NULL, v, &s) && s == VF_OK) {
        fp->ucalls = b.ucalls; /* the plan's execs point into them */
        fp->n_ucalls = b.n_ucalls;
        b.ucalls = NULL;
        b.n_ucalls = 0;
        s = finish(&b, g, v, fp, &ok);
    }
    if (s == VF_OK && b.oom) s = vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    builder_free(&b, g->n);
    free(v);
    if (s != VF_OK || !ok) {
        vf_fplan_free(env->be, fp);
        return s;
    }
    *out = fp;
    return VF_OK;
}

bool vf_fplan_matches(const vf_fplan *fp, const vf_plan_value *params)
{
    for (int i = 0; i < fp->n_params; i++) {
        vf_shape s = vf_tref_shape(&params[i].ref);
        if (!vf_shape_equal(&s, &fp->pshape[i])) return false;
    }
    return true;
}

int vf_fplan_n_slots(const vf_fplan *fp) { return fp->n_slots; }

void vf_fplan_slot(const vf_fplan *fp, int k, vf_dtype *dt, vf_shape *shape)
{
    *dt = fp->slot_dt[k];
    *shape = fp->slot_shape[k];
}

int vf_fplan_output(const vf_fplan *fp, int k, vf_shape *view)
{
    *view = fp->out_view[k];
    return fp->out_slot[k];
}

vf_status vf_fplan_run(const vf_plan_env *env, vf_fplan *fp, const vf_plan_value *params, const vf_tref *slots)
{
    if (fp->split) return vf_pb_run_split(env, fp, params, slots);
    int nb = fp->n_params + fp->n_slots;
    vf_plan_bind *binds = vf_calloc((size_t)nb + 1, sizeof *binds);
    if (!binds) return vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    for (int i = 0; i < fp->n_params; i++) {
        const vf_tref *r = &params[i].ref;
        binds[i] = (vf_plan_bind){r->buf, r->offset, (size_t)vf_shape_numel(&fp->pshape[i]) * vf_dtype_size(r->dtype)};
    }
    for (int k = 0; k < fp->n_slots; k++) {
        const vf_tref *r = &slots[k];
        binds[fp->n_params + k] =
            (vf_plan_bind){r->buf, r->offset, (size_t)vf_shape_numel(&fp->slot_shape[k]) * vf_dtype_size(r->dtype)};
    }
    vf_status s = fp->check ? vf_fcheck_before(fp->check) : VF_OK;
    if (s == VF_OK) {
        s = env->be->iface->plan_run(env->be->self, fp->plan, binds, nb);
        if (s != VF_OK)
            s = vf_err_backend(env->err, env->be_err, s, "vf_function '%s': running its plan (%s backend)", env->name,
                               env->be->iface->name);
    }
    if (s == VF_OK && fp->check) s = vf_fcheck_after(fp->check, binds);
    free(binds);
    return s;
}

void vf_fplan_stats_get(const vf_fplan *fp, vf_fplan_stats *out) { *out = fp->st; }

int vf_fplan_n_parts(const vf_fplan *fp) { return fp->split ? fp->split->n_segs : 1; }

vf_plan *vf_fplan_part(const vf_fplan *fp, int i) { return fp->split ? fp->split->segs[i]->plan : fp->plan; }
