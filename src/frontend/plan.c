/* Plans of concrete functions (plan.h).
 *
 * Building walks the graph once at the call's concrete sizes, exactly as
 * the node-by-node run does (same shape inference, same exec per node),
 * but instead of running each exec it records where each tensor lives:
 * params and outputs are per-call bindings, captures and constants fixed
 * buffers, every other op result an intermediate in the plan's arena at an
 * offset from the liveness planner (graph/memplan.h). Variables keep the
 * node-by-node semantics: an assign is a COPY into the variable's buffer
 * at its place in program order, a reshape of a variable copies.
 *
 * Fusion (fusion/partition.h): the graph is partitioned and the execs put
 * in group order; each elementwise DAG or matmul group goes to the backend as one
 * vf_plan_fused. Liveness is counted in kernels, a fused group being one
 * step (its inputs live until it runs, its outputs from then), and values
 * internal to a group get no arena space: they are given offsets past the
 * arena (spill_bytes) that are only backed when the backend has to run
 * the group unfused. VKFUSE_FUSION=0: one kernel per op. */
#include "frontend/plan.h"
#include "frontend/check.h"
#include "fusion/partition.h"
#include "graph/memplan.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

#define PLAN_ALIGN 256 /* the largest minStorageBufferOffsetAlignment Vulkan allows */

struct vf_fplan {
    int n_params;
    vf_shape *pshape;      /* per param: the sizes the plan is for */
    vf_plan *plan;
    int n_slots;           /* output buffers made per call */
    vf_dtype *slot_dt;
    vf_shape *slot_shape;
    int n_outs;
    int *out_slot;         /* per graph output */
    vf_shape *out_view;    /* per graph output: its shape (a view of the slot) */
    vf_fplan_stats st;
    vf_fcheck *check;      /* VKFUSE_CHECK: every kernel against the CPU backend */
};

typedef struct pval {
    vf_tref ref;
    vf_plan_loc loc;
    int inter;             /* intermediate id, -1: none */
    bool var;
} pval;

typedef struct inter {
    vf_dtype dt;
    vf_shape shape;
    size_t bytes;
    int first, last, slot; /* slot: output slot, -1: arena */
    bool internal;         /* inside a fused group: never in memory when fused */
} inter;

typedef struct builder {
    vf_run_state *rs;
    vf_exec *ex;
    vf_plan_loc (*loc)[4];
    int (*ref_inter)[4];
    int n_ex, cap_ex;
    inter *it;
    int n_it, cap_it;
    int *node_ex;          /* per top-level node: its first exec, -1: none */
    int *node_nex;         /* per top-level node: how many execs (a COND: its branches) */
    pval **tuple;          /* per top-level COND: its outputs */
    vf_plan_guard *guard;  /* per exec */
    int *ex_node;          /* per exec: its top-level node */
    int cur_node;          /* given to the execs being added */
    vf_plan_guard cur;     /* given to the execs being added */
    pval *preds;           /* of the CONDs */
    int n_preds, cap_preds;
    int depth;             /* inside a COND branch: > 0 */
    bool oom;
} builder;

/* The fused groups of a plan being built. */
typedef struct fusion {
    vf_partition_t part;
    bool have_part;
    vf_shape *shapes;      /* per node */
    vf_plan_fused *fused;
    int n_fused;
    vf_tref *tens;         /* every fused group's tensors, in a row */
    vf_plan_loc *tloc;
    int *tinter;
    int n_tens;
} fusion;

static vf_shape shape_of(const vf_tref *r)
{
    vf_shape s = {.rank = r->rank};
    memcpy(s.dim, r->shape, sizeof s.dim);
    return s;
}

static bool flat_kind(vf_node_kind k)
{
    return k == VF_NODE_PARAM || k == VF_NODE_CAPTURE || k == VF_NODE_CONST || k == VF_NODE_OP ||
           k == VF_NODE_RESHAPE || k == VF_NODE_ASSIGN;
}

/* Plannable: flat nodes, and CONDs whose branches are flat (no nested
   control flow, no PRINT: printing is a host decision). */
bool vf_fplan_graph_ok(const vf_graph *g)
{
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        if (n->kind == VF_NODE_COND) {
            for (int k = 0; k < 2; k++)
                for (int j = 0; j < n->sub[k]->n; j++)
                    if (!flat_kind(n->sub[k]->nodes[j].kind)) return false;
        } else if (n->kind != VF_NODE_PROJ && !flat_kind(n->kind)) {
            return false;
        }
    }
    return true;
}

static bool grow(void **p, int *cap, int n, size_t elem)
{
    if (n < *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static int new_inter(builder *b, vf_dtype dt, const vf_shape *s)
{
    if (!grow((void **)&b->it, &b->cap_it, b->n_it, sizeof *b->it)) {
        b->oom = true;
        return -1;
    }
    size_t bytes = (size_t)vf_shape_numel(s) * vf_dtype_size(dt);
    b->it[b->n_it] = (inter){.dt = dt, .shape = *s, .bytes = bytes, .first = b->n_ex, .last = b->n_ex, .slot = -1};
    return b->n_it++;
}

/* Appends exec e whose tensors are vals in[0..n_in-1] and out. */
static bool add_exec(builder *b, const vf_exec *e, const pval *in, const pval *out)
{
    if (b->n_ex == b->cap_ex) {
        int cap = b->cap_ex ? b->cap_ex * 2 : 16;
        vf_exec *ex = realloc(b->ex, (size_t)cap * sizeof *ex);
        if (ex) b->ex = ex;
        vf_plan_loc(*loc)[4] = ex ? realloc(b->loc, (size_t)cap * sizeof *loc) : NULL;
        if (loc) b->loc = loc;
        int(*ri)[4] = loc ? realloc(b->ref_inter, (size_t)cap * sizeof *ri) : NULL;
        if (ri) b->ref_inter = ri;
        vf_plan_guard *gd = ri ? realloc(b->guard, (size_t)cap * sizeof *gd) : NULL;
        if (gd) b->guard = gd;
        int *en = gd ? realloc(b->ex_node, (size_t)cap * sizeof *en) : NULL;
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
static pval inter_val(builder *b, vf_dtype dt, const vf_shape *s)
{
    int id = new_inter(b, dt, s);
    pval v = {.ref = {.dtype = dt, .rank = s->rank}, .loc = {VF_PLAN_ARENA, 0}, .inter = id};
    memcpy(v.ref.shape, s->dim, sizeof v.ref.shape);
    return v;
}

static bool walk(builder *b, const vf_graph *g, const vf_rval *params, const pval *sub, pval *v, vf_status *st);

static bool add_copy(builder *b, const pval *from, const pval *to)
{
    vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = from->ref, .out = to->ref};
    return !b->oom && add_exec(b, &e, from, to);
}

/* A COND at the top level: both branches go into the plan, their execs
   guarded by the predicate (decided on the device, vf_plan_guard), each
   ending with guarded copies of its results into the COND's outputs. */
static bool walk_cond(builder *b, const vf_node *n, int id, pval *v, vf_status *st)
{
    pval pv = v[n->in[0]];
    if (b->depth > 0 || pv.ref.dtype != VF_BOOL || pv.ref.rank != 0) return false;
    if (pv.inter < 0) { /* an input, capture or constant: a copy of it, at an offset a binding can take */
        pval c = inter_val(b, VF_BOOL, &(vf_shape){.rank = 0});
        if (b->oom || !add_copy(b, &pv, &c)) return false;
        pv = c;
    }
    if (!grow((void **)&b->preds, &b->cap_preds, b->n_preds, sizeof *b->preds)) return !(b->oom = true);
    int pred = b->n_preds++;
    b->preds[pred] = pv;
    pval *tuple = calloc((size_t)n->n_out + 1, sizeof *tuple);
    if (!(b->tuple[id] = tuple)) return !(b->oom = true);
    int ne = n->sub[0]->n_explicit;
    bool ok = true;
    for (int k = 0; ok && k < 2; k++) {
        const vf_graph *sg = n->sub[k];
        pval *sp = calloc((size_t)sg->n_params + 1, sizeof *sp), *sv = calloc((size_t)sg->n + 1, sizeof *sv);
        ok = sp && sv;
        for (int p = 0; ok && p < sg->n_params; p++) /* the layout run_cond reads */
            sp[p] = v[n->in[p < sg->n_explicit ? 1 + p : 1 + ne + (k ? n->split : 0) + p - sg->n_explicit]];
        b->cur = (vf_plan_guard){pred, k == 0};
        b->depth++;
        ok = ok && walk(b, sg, NULL, sp, sv, st);
        b->depth--;
        for (int o = 0; ok && o < n->n_out; o++) {
            const pval *r = &sv[sg->outputs[o]];
            vf_shape rs = shape_of(&r->ref);
            if (k == 0) tuple[o] = inter_val(b, r->ref.dtype, &rs);
            vf_shape ts = shape_of(&tuple[o].ref);
            ok = !b->oom && r->ref.dtype == tuple[o].ref.dtype && vf_shape_equal(&rs, &ts) &&
                 vf_shape_numel(&rs) > 0 && add_copy(b, r, &tuple[o]);
        }
        b->cur = (vf_plan_guard){-1, false};
        free(sp);
        free(sv);
    }
    if (!ok) return false;
    v[id] = (pval){.inter = -1};
    return true;
}

/* Walks g (params: the call's, or sub: a branch's); false: not plannable
   (or out of memory: b->oom). */
static bool walk(builder *b, const vf_graph *g, const vf_rval *params, const pval *sub, pval *v, vf_status *st)
{
    vf_run_state *rs = b->rs;
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        pval in[3];
        for (int j = 0; j < n->n_in && j < 3; j++) in[j] = v[n->in[j]];
        int first = b->n_ex;
        if (b->depth == 0) b->cur_node = i;
        switch (n->kind) {
        case VF_NODE_PARAM: {
            if (sub) {
                v[i] = sub[n->index];
                break;
            }
            const vf_rval *p = &params[n->index];
            if (!p->ref.buf) return false;
            v[i] = (pval){.ref = p->ref, .loc = {VF_PLAN_BIND, n->index}, .inter = -1, .var = p->var};
            v[i].ref.buf = NULL;
            v[i].ref.offset = 0;
            break;
        }
        case VF_NODE_CAPTURE: {
            const vf_capture *c = &rs->caps[n->index];
            if (!c->ref.buf) return false;
            v[i] = (pval){.ref = c->ref, .loc = {VF_PLAN_FIXED, 0}, .inter = -1, .var = c->is_var};
            break;
        }
        case VF_NODE_CONST: {
            vf_rval r;
            if ((*st = vf_run_const(rs, n, &r)) != VF_OK) return false;
            if (!r.ref.buf) return false;
            v[i] = (pval){.ref = r.ref, .loc = {VF_PLAN_FIXED, 0}, .inter = -1};
            break;
        }
        case VF_NODE_OP: {
            if (n->n_in > 3) return false;
            vf_dtype dts[3], dt;
            vf_shape sh[3], os;
            for (int j = 0; j < n->n_in; j++) dts[j] = in[j].ref.dtype, sh[j] = shape_of(&in[j].ref);
            vf_err err = {0};
            if (vf_infer(n, dts, sh, &dt, &os, &err) != VF_OK || vf_shape_numel(&os) == 0) return false;
            v[i] = inter_val(b, dt, &os);
            vf_exec e = {.op = n->op, .attrs = n->attrs, .n_in = n->n_in, .out = v[i].ref};
            for (int j = 0; j < n->n_in; j++) e.in[j] = in[j].ref;
            if (b->oom || !add_exec(b, &e, in, &v[i])) return false;
            break;
        }
        case VF_NODE_RESHAPE: {
            vf_dtype dt;
            vf_shape sh = shape_of(&in[0].ref), out;
            vf_err err = {0};
            if (vf_infer(n, &in[0].ref.dtype, &sh, &dt, &out, &err) != VF_OK || vf_shape_numel(&out) == 0) return false;
            if (in[0].var) { /* the variable's value now, not after later assigns */
                v[i] = inter_val(b, in[0].ref.dtype, &out);
                vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = in[0].ref, .out = v[i].ref};
                e.in[0].rank = out.rank;
                memcpy(e.in[0].shape, out.dim, sizeof e.in[0].shape);
                if (b->oom || !add_exec(b, &e, in, &v[i])) return false;
                break;
            }
            v[i] = in[0];
            v[i].ref.rank = out.rank;
            memcpy(v[i].ref.shape, out.dim, sizeof v[i].ref.shape);
            break;
        }
        case VF_NODE_ASSIGN: {
            const vf_capture *c = &rs->caps[n->index];
            vf_shape vs = shape_of(&c->ref), val = shape_of(&in[0].ref);
            vf_dtype dt;
            vf_err err = {0};
            if (!c->ref.buf || vf_infer(n, &in[0].ref.dtype, &val, &dt, &vs, &err) != VF_OK) return false;
            pval var = {.ref = c->ref, .loc = {VF_PLAN_FIXED, 0}, .inter = -1, .var = true};
            bool self = in[0].loc.kind == VF_PLAN_FIXED && in[0].ref.buf == c->ref.buf && in[0].ref.offset == c->ref.offset;
            if (!self) {
                vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = in[0].ref, .out = c->ref};
                if (!add_exec(b, &e, in, &var)) return false;
            }
            v[i] = var;
            break;
        }
        case VF_NODE_COND:
            if (!walk_cond(b, n, i, v, st)) return false;
            break;
        case VF_NODE_PROJ:
            if (b->depth > 0 || !b->tuple[n->in[0]]) return false;
            v[i] = b->tuple[n->in[0]][n->index];
            break;
        default: return false;
        }
        if (b->depth == 0) {
            b->node_ex[i] = b->n_ex > first ? first : -1;
            b->node_nex[i] = b->n_ex - first;
        }
    }
    return true;
}

static void builder_free(builder *b, int n_nodes)
{
    for (int i = 0; b->tuple && i < n_nodes; i++) free(b->tuple[i]);
    free(b->tuple);
    free(b->node_nex);
    free(b->guard);
    free(b->ex_node);
    free(b->preds);
    free(b->ex);
    free(b->loc);
    free(b->ref_inter);
    free(b->it);
    free(b->node_ex);
}

static void fusion_free(fusion *f)
{
    if (f->have_part) vf_partition_free(&f->part);
    free(f->shapes);
    free(f->fused);
    free(f->tens);
    free(f->tloc);
    free(f->tinter);
}

/* Partitions g and puts the execs in group order (ord, step: the kernel
   each exec belongs to). false: out of host memory. Without fusion, or if
   the graph cannot be partitioned, the order stays the node order. */
/* The group kinds handed to the backend as one vf_plan_fused kernel. */
static bool fusable_kind(vf_group_kind k)
{
    switch (k) {
    case VF_GROUP_ELEMENTWISE_DAG: return true;
    case VF_GROUP_ROW_EPILOGUE: return true;   /* codegen_rows.c */
    case VF_GROUP_MATMUL_EPILOGUE: return true; /* codegen_matmul.c */
    default: return false;
    }
}

static bool plan_fusion(builder *b, const vf_graph *g, const pval *v, fusion *f, int *ord, int *step)
{
    for (int x = 0; x < b->n_ex; x++) ord[x] = step[x] = x;
    vf_fusion_options opt;
    vf_fusion_options_default(&opt);
    if (b->rs->unfused) opt.enabled = false;
    vf_err err = {0};
    if (!opt.enabled) return true;
    vf_status ps = vf_partition(g, &opt, &f->part, &err);
    if (ps == VF_ERROR_OUT_OF_MEMORY) return false;
    if (ps != VF_OK) return true; /* the unfused plan is always valid */
    f->have_part = true;
    int n_dag = 0, n_tens = 0;
    for (int gi = 0; gi < f->part.n_groups; gi++)
        if (fusable_kind(f->part.groups[gi].kind)) {
            n_dag++;
            n_tens += f->part.groups[gi].n_inputs + f->part.groups[gi].n_outputs;
        }
    if (!n_dag) return true;
    f->shapes = calloc((size_t)g->n + 1, sizeof *f->shapes);
    f->fused = calloc((size_t)n_dag, sizeof *f->fused);
    f->tens = calloc((size_t)n_tens, sizeof *f->tens);
    f->tloc = calloc((size_t)n_tens, sizeof *f->tloc);
    f->tinter = calloc((size_t)n_tens, sizeof *f->tinter);
    if (!f->shapes || !f->fused || !f->tens || !f->tloc || !f->tinter) return false;
    for (int i = 0; i < g->n; i++) f->shapes[i] = shape_of(&v[i].ref);
    int n = 0, steps = 0;
    for (int gi = 0; gi < f->part.n_groups; gi++) {
        const vf_group *grp = &f->part.groups[gi];
        bool fuse = fusable_kind(grp->kind);
        for (int m = 0; fuse && m < grp->n_nodes; m++) fuse = b->node_nex[grp->nodes[m]] == 1;
        if (fuse && n + grp->n_nodes <= b->n_ex) {
            vf_plan_fused *pf = &f->fused[f->n_fused++];
            *pf = (vf_plan_fused){.graph = g, .group = grp, .shapes = f->shapes, .first_exec = n,
                                  .n_execs = grp->n_nodes, .tensors = f->tens + f->n_tens, .loc = f->tloc + f->n_tens};
            for (int t = 0; t < grp->n_inputs + grp->n_outputs; t++) {
                int val = t < grp->n_inputs ? grp->inputs[t] : grp->outputs[t - grp->n_inputs];
                f->tens[f->n_tens] = v[val].ref;
                f->tloc[f->n_tens] = v[val].loc;
                f->tinter[f->n_tens++] = v[val].inter;
            }
            for (int m = 0; m < grp->n_nodes; m++) {
                int node = grp->nodes[m];
                ord[n] = b->node_ex[node], step[n++] = steps;
                bool out = false;
                for (int o = 0; o < grp->n_outputs; o++) out = out || grp->outputs[o] == node;
                if (!out && v[node].inter >= 0) b->it[v[node].inter].internal = true;
            }
            steps++;
            continue;
        }
        for (int m = 0; m < grp->n_nodes; m++) /* all of a node's execs (a COND has many) */
            for (int x = 0; x < b->node_nex[grp->nodes[m]] && n < b->n_ex; x++)
                ord[n] = b->node_ex[grp->nodes[m]] + x, step[n++] = steps++;
    }
    if (n == b->n_ex) return true;
    /* Not every exec in exactly one group: keep the node order unfused. */
    for (int x = 0; x < b->n_ex; x++) ord[x] = step[x] = x;
    for (int i = 0; i < b->n_it; i++) b->it[i].internal = false;
    f->n_fused = f->n_tens = 0;
    return true;
}

/* Levels: kernel k's level is one more than that of every earlier kernel
   it depends on (it reads an intermediate one of them wrote, rewrites one
   they wrote or read -- a COND's outputs have a writer per branch -- or
   reads the predicate that guards it). A kernel that writes a variable
   (an assign) is a side effect: it waits for everything before it, and
   everything after waits for it. Kernels are then put in level order
   (stable), so independent kernels come together, the liveness planner
   sees them live together, and the recording (vulkan/plan.c) needs one
   barrier per level instead of one per dependent kernel. ord is
   rewritten and step becomes the level: liveness is counted in levels, so
   kernels of one level never share bytes (they run between the same two
   barriers). Fused groups follow their kernel. false: out of memory. */
static bool schedule_levels(builder *b, fusion *fz, int *ord, int *step)
{
    int n = b->n_ex, nk = n ? step[n - 1] + 1 : 0;
    int *level = calloc((size_t)nk + 1, sizeof *level), *kfirst = malloc(sizeof(int) * ((size_t)nk + 1));
    int *wl = malloc(sizeof(int) * ((size_t)b->n_it + 1)), *rl = malloc(sizeof(int) * ((size_t)b->n_it + 1));
    int *nord = malloc(sizeof(int) * ((size_t)n + 1)), *nstep = malloc(sizeof(int) * ((size_t)n + 1));
    int *kpos = malloc(sizeof(int) * ((size_t)nk + 1)), *start = calloc((size_t)n + 2, sizeof(int));
    bool ok = level && kfirst && wl && rl && nord && nstep && kpos && start;
    for (int i = 0; ok && i < b->n_it; i++) wl[i] = rl[i] = -1;
    int top = -1, floor = 0;
    for (int x = 0; ok && x < n; x++)
        if (x == 0 || step[x] != step[x - 1]) kfirst[step[x]] = x;
    for (int k = 0; ok && k < nk; k++) {
        int lv = floor, end = k + 1 < nk ? kfirst[k + 1] : n;
        bool effect = false;
        for (int x = kfirst[k]; x < end; x++) {
            int e = ord[x];
            for (int j = 0; j < 4; j++) {
                int id = b->ref_inter[e][j];
                if (j < 3 && j >= b->ex[e].n_in) continue;
                if (id >= 0 && wl[id] >= 0 && wl[id] + 1 > lv) lv = wl[id] + 1;
                if (j == 3 && id >= 0 && rl[id] >= 0 && rl[id] + 1 > lv) lv = rl[id] + 1;
            }
            if (b->guard[e].pred >= 0) {
                int id = b->preds[b->guard[e].pred].inter;
                if (id >= 0 && wl[id] >= 0 && wl[id] + 1 > lv) lv = wl[id] + 1;
            }
            effect = effect || b->loc[e][3].kind == VF_PLAN_FIXED;
        }
        if (effect && top + 1 > lv) lv = top + 1;
        level[k] = lv;
        if (lv > top) top = lv;
        if (effect) floor = lv + 1;
        for (int x = kfirst[k]; x < end; x++) { /* values of this kernel seen by later ones */
            int e = ord[x];
            for (int j = 0; j < 4; j++) {
                int id = b->ref_inter[e][j];
                if (id < 0 || (j < 3 && j >= b->ex[e].n_in)) continue;
                int *l = j == 3 ? wl : rl;
                if (l[id] < lv) l[id] = lv;
            }
            if (b->guard[e].pred >= 0 && b->preds[b->guard[e].pred].inter >= 0) {
                int id = b->preds[b->guard[e].pred].inter;
                if (rl[id] < lv) rl[id] = lv;
            }
        }
    }
    /* stable order by level (counting sort over levels) */
    for (int k = 0; ok && k < nk; k++) start[level[k] + 1]++;
    for (int l = 0; ok && l <= top; l++) start[l + 1] += start[l];
    int *korder = kpos; /* reused: korder[position] = kernel */
    for (int k = 0; ok && k < nk; k++) korder[start[level[k]]++] = k;
    int pos = 0;
    for (int r = 0; ok && r < nk; r++) {
        int k = korder[r], end = k + 1 < nk ? kfirst[k + 1] : n;
        for (int f = 0; f < fz->n_fused; f++) /* a fused group starts at its kernel's first exec */
            if (fz->fused[f].first_exec == kfirst[k]) fz->fused[f].first_exec = -1 - pos;
        for (int x = kfirst[k]; x < end; x++) nord[pos] = ord[x], nstep[pos++] = level[k];
    }
    if (ok) {
        for (int f = 0; f < fz->n_fused; f++) fz->fused[f].first_exec = -1 - fz->fused[f].first_exec;
        for (int i = 1; i < fz->n_fused; i++) /* by first_exec ascending, as vf_plan_desc wants */
            for (int j = i; j > 0 && fz->fused[j - 1].first_exec > fz->fused[j].first_exec; j--) {
                vf_plan_fused t = fz->fused[j];
                fz->fused[j] = fz->fused[j - 1];
                fz->fused[j - 1] = t;
            }
        memcpy(ord, nord, sizeof(int) * (size_t)n);
        memcpy(step, nstep, sizeof(int) * (size_t)n);
    }
    free(level), free(kfirst), free(wl), free(rl), free(nord), free(nstep), free(kpos), free(start);
    return ok;
}

/* Reorders the execs as ord says and recounts every intermediate's
   lifetime in steps. false: out of host memory. */
static bool reorder(builder *b, const int *ord, const int *step)
{
    int n = b->n_ex;
    vf_exec *ex = malloc(sizeof *ex * (size_t)(n + 1));
    vf_plan_loc(*loc)[4] = malloc(sizeof *loc * (size_t)(n + 1));
    int(*ri)[4] = malloc(sizeof *ri * (size_t)(n + 1));
    vf_plan_guard *gd = malloc(sizeof *gd * (size_t)(n + 1));
    int *en = malloc(sizeof *en * (size_t)(n + 1));
    if (!ex || !loc || !ri || !gd || !en) {
        free(ex), free(loc), free(ri), free(gd), free(en);
        return false;
    }
    for (int x = 0; x < n; x++) {
        ex[x] = b->ex[ord[x]];
        gd[x] = b->guard[ord[x]];
        en[x] = b->ex_node[ord[x]];
        memcpy(loc[x], b->loc[ord[x]], sizeof loc[x]);
        memcpy(ri[x], b->ref_inter[ord[x]], sizeof ri[x]);
    }
    free(b->ex), free(b->loc), free(b->ref_inter), free(b->guard), free(b->ex_node);
    b->ex = ex, b->loc = loc, b->ref_inter = ri, b->guard = gd, b->ex_node = en;
    for (int i = 0; i < b->n_it; i++) b->it[i].first = -1;
    for (int x = 0; x < n; x++) {
        int w = ri[x][3];
        if (w >= 0 && b->it[w].first < 0) b->it[w].first = b->it[w].last = step[x];
    }
    for (int x = 0; x < n; x++)
        for (int j = 0; j < 4; j++) {
            int id = ri[x][j];
            if (id >= 0 && b->it[id].last < step[x]) b->it[id].last = step[x];
        }
    for (int x = 0; x < n; x++) { /* a predicate lives until its last guarded exec has run */
        int id = gd[x].pred >= 0 ? b->preds[gd[x].pred].inter : -1;
        if (id >= 0 && b->it[id].last < step[x]) b->it[id].last = step[x];
    }
    for (int i = 0; i < b->n_it; i++)
        if (b->it[i].first < 0) b->it[i].first = b->it[i].last = 0;
    return true;
}

/* Where intermediate id lives: its output binding, the arena, or (internal
   to a fused group) past the arena. */
static void place(const builder *b, const vf_fplan *fp, int id, const size_t *off, vf_plan_loc *l, vf_tref *r)
{
    if (b->it[id].slot >= 0) {
        *l = (vf_plan_loc){VF_PLAN_BIND, fp->n_params + b->it[id].slot};
        r->offset = 0;
    } else {
        *l = (vf_plan_loc){VF_PLAN_ARENA, 0};
        r->offset = off[id];
    }
    r->buf = NULL;
}

void vf_fplan_free(vf_context *ctx, vf_fplan *fp)
{
    if (!fp) return;
    if (fp->plan) ctx->be.iface->plan_destroy(ctx->be.self, fp->plan);
    vf_fcheck_free(fp->check);
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
    int cap = g->n_outputs + b->n_it + 1;
    vf_dtype *dt = realloc(fp->slot_dt, sizeof *dt * (size_t)cap);
    if (dt) fp->slot_dt = dt;
    vf_shape *sh = realloc(fp->slot_shape, sizeof *sh * (size_t)cap);
    if (sh) fp->slot_shape = sh;
    *ex_kernel = malloc(sizeof **ex_kernel * (size_t)(b->n_ex + 1));
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
    bool *internal = malloc(sizeof *internal * (size_t)(b->n_it + 1));
    int *bind = malloc(sizeof *bind * (size_t)(b->n_it + 1));
    int *pred_inter = malloc(sizeof *pred_inter * (size_t)(b->n_preds + 1));
    vf_status s = VF_OK;
    if (internal && bind && pred_inter) {
        for (int i = 0; i < b->n_it; i++)
            internal[i] = b->it[i].internal, bind[i] = b->it[i].slot >= 0 ? fp->n_params + b->it[i].slot : -1;
        for (int k = 0; k < b->n_preds; k++) pred_inter[k] = b->preds[k].inter;
        vf_fcheck_desc cd = {
            .fn = b->rs->fn, .execs = b->ex, .loc = (const vf_plan_loc(*)[4])b->loc,
            .inter = (const int(*)[4])b->ref_inter, .kernel = ex_kernel, .node = ex_node, .n_execs = b->n_ex,
            .internal = internal, .bind = bind, .n_inter = b->n_it, .guards = d->guards, .preds = preds,
            .pred_inter = pred_inter, .n_preds = b->n_preds, .glsl_dir = d->glsl_dir,
        };
        fp->check = vf_fcheck_create(b->rs->ctx, &cd);
        if (!fp->check) s = b->rs->ctx->err.status;
    } else {
        s = vf_fail(b->rs->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory", b->rs->fn);
    }
    free(internal);
    free(bind);
    free(pred_inter);
    return s;
}

/* In-place reuse (docs/FUNCTIONS.md): an arena value written by an
   elementwise kernel (a fused group that allows it, or a single
   elementwise exec) may take the bytes of an arena value the kernel reads
   element for element (same element count and size, so the same index)
   and that dies there. The unfused fallback of a fused group must stay
   right too: every member reading the input runs no later than the member
   writing the output. Never with fusion off (the alias-free baseline),
   never for outputs or variables (not arena values), never guarded. */
static bool arena_value(const builder *b, int id) { return id >= 0 && b->it[id].slot < 0 && !b->it[id].internal; }

static bool same_elements(const vf_tref *a, const vf_tref *o)
{
    int64_t na = 1, no = 1;
    for (int d = 0; d < a->rank; d++) na *= a->shape[d];
    for (int d = 0; d < o->rank; d++) no *= o->shape[d];
    return na == no && vf_dtype_size(a->dtype) == vf_dtype_size(o->dtype);
}

/* Does a kernel of the same dependency level as [x, x1) read `in`? Those
   run unordered with it (no barrier inside a level, see schedule_levels),
   so writing over `in` there would race with their reads. Steps are
   levels and non-decreasing in plan order. */
static bool read_beside(const builder *b, const int *step, int x, int x1, int in)
{
    for (int y = x - 1; y >= 0 && step[y] == step[x]; y--)
        for (int k = 0; k < b->ex[y].n_in; k++)
            if (b->ref_inter[y][k] == in) return true;
    for (int y = x1; y < b->n_ex && step[y] == step[x]; y++)
        for (int k = 0; k < b->ex[y].n_in; k++)
            if (b->ref_inter[y][k] == in) return true;
    return false;
}

static void inplace_candidates(const builder *b, const fusion *fz, const int *step, const int *arena_id, int n,
                               int *alias, bool *taken)
{
    for (int i = 0; i < n; i++) alias[i] = -1, taken[i] = false;
    if (!fz->have_part) return;
    for (int x = 0, gi = 0; x < b->n_ex; x++) {
        const vf_plan_fused *f = gi < fz->n_fused && fz->fused[gi].first_exec == x ? &fz->fused[gi++] : NULL;
        int x1 = f ? x + f->n_execs : x + 1;
        bool ok = f ? f->group->may_alias_input
                    : vf_op_get(b->ex[x].op)->kind == VF_KIND_ELEMENTWISE && b->guard[x].pred < 0;
        for (int w = x; ok && w < x1; w++) {
            int o = b->ref_inter[w][3];
            if (!arena_value(b, o) || alias[arena_id[o]] >= 0) continue;
            for (int r = x; r <= w && alias[arena_id[o]] < 0; r++)
                for (int j = 0; j < b->ex[r].n_in && alias[arena_id[o]] < 0; j++) {
                    int in = b->ref_inter[r][j];
                    if (!arena_value(b, in) || taken[arena_id[in]] || b->it[in].last != step[x] ||
                        b->it[in].first >= step[x] || b->it[in].bytes != b->it[o].bytes)
                        continue;
                    if (read_beside(b, step, x, x1, in)) continue;
                    bool fits = true; /* every read of it in the kernel: element-wise, not after w */
                    for (int y = x; y < x1 && fits; y++)
                        for (int k = 0; k < b->ex[y].n_in; k++)
                            if (b->ref_inter[y][k] == in)
                                fits = fits && y <= w && same_elements(&b->ex[y].in[k], &b->ex[w].out) &&
                                       vf_op_get(b->ex[y].op)->kind == VF_KIND_ELEMENTWISE;
                    if (!fits) continue;
                    alias[arena_id[o]] = arena_id[in];
                    taken[arena_id[in]] = true;
                }
        }
        x = x1 - 1;
    }
}

/* Output slots, arena offsets, the backend plan. */
static vf_status finish(builder *b, const vf_graph *g, const pval *v, vf_fplan *fp, bool *ok)
{
    vf_context *ctx = b->rs->ctx;
    *ok = false;
    for (int k = 0; k < g->n_outputs; k++) {
        const pval *o = &v[g->outputs[k]];
        if (o->inter < 0 || o->var) return VF_OK; /* params, captures, constants: node by node */
        inter *it = &b->it[o->inter];
        if (it->slot < 0) {
            it->slot = fp->n_slots++;
            fp->slot_dt[it->slot] = it->dt;
            fp->slot_shape[it->slot] = it->shape;
        }
        fp->out_slot[k] = it->slot;
        fp->out_view[k] = shape_of(&o->ref);
    }
    fusion fz = {0};
    vf_mem_interval *iv = malloc(sizeof *iv * (size_t)(b->n_it + 1));
    int *arena_id = malloc(sizeof *arena_id * (size_t)(b->n_it + 1));
    size_t *aoff = malloc(sizeof *aoff * (size_t)(b->n_it + 1)), *off = malloc(sizeof *off * (size_t)(b->n_it + 1));
    int *ord = malloc(sizeof *ord * (size_t)(b->n_ex + 1)), *step = malloc(sizeof *step * (size_t)(b->n_ex + 1));
    int n = 0;
    size_t arena = 0, spill = 0;
    bool good = iv && arena_id && aoff && off && ord && step;
    good = good && plan_fusion(b, g, v, &fz, ord, step) && schedule_levels(b, &fz, ord, step) &&
           reorder(b, ord, step);
    bool check = good && vf_fcheck_wanted();
    int *ex_kernel = NULL;
    if (check) good = check_slots(b, g, fp, &fz, &ex_kernel);
    for (int i = 0; good && i < b->n_it; i++) {
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
    int *alias = good ? malloc(sizeof *alias * (size_t)(n + 1)) : NULL;
    bool *taken = good ? malloc(sizeof *taken * (size_t)(n + 1)) : NULL;
    good = good && alias && taken;
    if (good) inplace_candidates(b, &fz, step, arena_id, n, alias, taken);
    size_t bound = 0;
    good = good && vf_memplan_inplace(iv, n, alias, PLAN_ALIGN, aoff, &arena, &bound);
    free(alias);
    free(taken);
    fp->st.arena_lower_bound = (int64_t)bound;
    for (int i = 0; good && i < b->n_it; i++) {
        if (b->it[i].slot >= 0) continue;
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
    vf_plan_pred *preds = calloc((size_t)b->n_preds + 1, sizeof *preds);
    good = good && preds;
    for (int k = 0; good && k < b->n_preds; k++) {
        preds[k] = (vf_plan_pred){b->preds[k].ref, b->preds[k].loc};
        if (b->preds[k].inter >= 0) place(b, fp, b->preds[k].inter, off, &preds[k].loc, &preds[k].ref);
    }
    free(iv);
    free(arena_id);
    free(aoff);
    free(off);
    free(ord);
    free(step);
    if (!good) {
        fusion_free(&fz);
        free(preds);
        free(ex_kernel);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory", b->rs->fn);
    }
    char glsl_dir[512] = "";
    if (check) vf_fcheck_glsl_dir(b->rs->fn, glsl_dir, sizeof glsl_dir);
    fp->st.arena_bytes = (int64_t)arena;
    vf_plan_desc d = {
        .execs = b->ex,
        .loc = (const vf_plan_loc(*)[4])b->loc,
        .n_execs = b->n_ex,
        .arena_bytes = arena,
        .n_binds = fp->n_params + fp->n_slots,
        .name = b->rs->fn,
        .fused = fz.fused,
        .n_fused = fz.n_fused,
        .spill_bytes = spill,
        .guards = b->n_preds ? b->guard : NULL,
        .preds = preds,
        .n_preds = b->n_preds,
        .exec_node = b->ex_node,
        .glsl_dir = glsl_dir[0] ? glsl_dir : NULL,
    };
    vf_status s = ctx->be.iface->plan_create(ctx->be.self, &d, &fp->plan);
    if (s == VF_OK && check) s = make_check(b, fp, &d, b->ex_node, ex_kernel, preds);
    free(preds);
    free(ex_kernel);
    int kernels = b->n_ex;
    for (int i = 0; i < fz.n_fused; i++) kernels -= fz.fused[i].n_execs - 1;
    fusion_free(&fz);
    if (s != VF_OK)
        return vf_backend_failed(ctx, s, "vf_function '%s': recording its plan (%s backend)", b->rs->fn,
                                 ctx->be.iface->name);
    vf_plan_info info = {.kernels = kernels, .dispatches = kernels};
    if (ctx->be.iface->plan_info) ctx->be.iface->plan_info(ctx->be.self, fp->plan, &info);
    fp->st.kernels = info.kernels;
    fp->st.dispatches = info.dispatches;
    *ok = true;
    return VF_OK;
}

vf_status vf_fplan_build(vf_run_state *rs, const vf_graph *g, const vf_rval *params, vf_fplan **out)
{
    vf_context *ctx = rs->ctx;
    *out = NULL;
    builder b = {.rs = rs, .node_ex = calloc((size_t)g->n + 1, sizeof(int)),
                 .node_nex = calloc((size_t)g->n + 1, sizeof(int)), .tuple = calloc((size_t)g->n + 1, sizeof(pval *)),
                 .cur = {-1, false}};
    pval *v = calloc((size_t)g->n + 1, sizeof *v);
    vf_fplan *fp = calloc(1, sizeof *fp);
    int np = g->n_params;
    if (fp) {
        fp->n_params = np;
        fp->n_outs = g->n_outputs;
        fp->pshape = calloc((size_t)np + 1, sizeof *fp->pshape);
        fp->slot_dt = calloc((size_t)g->n_outputs + 1, sizeof *fp->slot_dt);
        fp->slot_shape = calloc((size_t)g->n_outputs + 1, sizeof *fp->slot_shape);
        fp->out_slot = calloc((size_t)g->n_outputs + 1, sizeof *fp->out_slot);
        fp->out_view = calloc((size_t)g->n_outputs + 1, sizeof *fp->out_view);
    }
    vf_status s = VF_OK;
    if (!v || !fp || !b.node_ex || !b.node_nex || !b.tuple || !fp->pshape || !fp->slot_dt || !fp->slot_shape || !fp->out_slot || !fp->out_view)
        s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory", rs->fn);
    for (int i = 0; s == VF_OK && i < np; i++) fp->pshape[i] = shape_of(&params[i].ref);
    bool ok = false;
    if (s == VF_OK && walk(&b, g, params, NULL, v, &s) && s == VF_OK) s = finish(&b, g, v, fp, &ok);
    if (s == VF_OK && b.oom) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory", rs->fn);
    builder_free(&b, g->n);
    free(v);
    if (s != VF_OK || !ok) {
        vf_fplan_free(ctx, fp);
        return s;
    }
    *out = fp;
    return VF_OK;
}

bool vf_fplan_matches(const vf_fplan *fp, const vf_rval *params)
{
    for (int i = 0; i < fp->n_params; i++) {
        vf_shape s = shape_of(&params[i].ref);
        if (!vf_shape_equal(&s, &fp->pshape[i])) return false;
    }
    return true;
}

vf_status vf_fplan_call(vf_run_state *rs, vf_fplan *fp, const vf_rval *params, vf_rval *outs)
{
    vf_context *ctx = rs->ctx;
    int nb = fp->n_params + fp->n_slots;
    vf_plan_bind *binds = calloc((size_t)nb + 1, sizeof *binds);
    vf_tensor **slots = calloc((size_t)fp->n_slots + 1, sizeof *slots);
    vf_status s = binds && slots ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory", rs->fn);
    for (int i = 0; s == VF_OK && i < fp->n_params; i++) {
        const vf_tref *r = &params[i].ref;
        binds[i] = (vf_plan_bind){r->buf, r->offset, (size_t)vf_shape_numel(&fp->pshape[i]) * vf_dtype_size(r->dtype)};
    }
    for (int k = 0; s == VF_OK && k < fp->n_slots; k++) {
        const vf_shape *sh = &fp->slot_shape[k];
        /* owned by the call's scope, like the node-by-node run's values */
        if (!(slots[k] = vf_tensor_new(ctx, "vf_function_call", fp->slot_dt[k], sh->rank, sh->dim))) {
            s = ctx->err.status;
            break;
        }
        vf_tref r = vf_tensor_ref(slots[k]);
        binds[fp->n_params + k] = (vf_plan_bind){r.buf, r.offset, (size_t)vf_shape_numel(sh) * vf_dtype_size(r.dtype)};
    }
    if (s == VF_OK && fp->check) s = vf_fcheck_before(fp->check, ctx);
    if (s == VF_OK) {
        s = ctx->be.iface->plan_run(ctx->be.self, fp->plan, binds, nb);
        if (s != VF_OK)
            s = vf_backend_failed(ctx, s, "vf_function '%s': running its plan (%s backend)", rs->fn, ctx->be.iface->name);
    }
    if (s == VF_OK && fp->check) s = vf_fcheck_after(fp->check, ctx, binds);
    for (int k = 0; s == VF_OK && k < fp->n_outs; k++) {
        vf_tensor *t = slots[fp->out_slot[k]];
        outs[k] = (vf_rval){.ref = vf_tensor_ref(t), .t = t};
        outs[k].ref.rank = fp->out_view[k].rank;
        memcpy(outs[k].ref.shape, fp->out_view[k].dim, sizeof outs[k].ref.shape);
    }
    if (s == VF_OK) {
        rs->dispatches += fp->st.dispatches;
        rs->peak_bytes = fp->st.arena_bytes + fp->st.output_bytes;
    }
    free(binds);
    free(slots);
    return s;
}

void vf_fplan_stats_get(const vf_fplan *fp, vf_fplan_stats *out) { *out = fp->st; }
