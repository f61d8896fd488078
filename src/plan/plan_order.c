/* The kernel order of a plan being built (plan_build.h): fusion into
 * groups, dependency levels, the exec permutation, and in-place reuse
 * candidates for the memory planner. */
#include "plan/plan_build.h"
#include "util/fault.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

void vf_pb_fusion_free(fusion *f)
{
    if (f->have_part) vf_partition_free(&f->part);
    for (int r = 0; f->have_bpart && r < f->n_bpart; r++)
        if (f->have_bpart[r]) vf_partition_free(&f->bpart[r]);
    free(f->bpart);
    free(f->have_bpart);
    free(f->members);
    free(f->fused);
    free(f->tens);
    free(f->tloc);
    free(f->tinter);
}

/* The group kinds handed to the backend as one vf_plan_fused kernel, and
   their kind in the backend contract. */
static bool fusable_kind(vf_group_kind k, vf_fused_kind *fk)
{
    switch (k) {
    case VF_GROUP_ELEMENTWISE_DAG: *fk = VF_FUSED_ELEMENTWISE; return true;
    case VF_GROUP_ROW_EPILOGUE: *fk = VF_FUSED_ROWS; return true;
    case VF_GROUP_MATMUL_EPILOGUE: *fk = VF_FUSED_MATMUL; return true;
    case VF_GROUP_CONV_EPILOGUE: *fk = VF_FUSED_CONV; return true;
    default: return false;
    }
}

bool vf_group_describe(const vf_graph *g, const vf_group *grp, vf_fused_member *mem, vf_fused_group *out)
{
    vf_fused_kind kind;
    if (!fusable_kind(grp->kind, &kind)) return false;
    for (int m = 0; m < grp->n_nodes; m++) {
        const vf_node *nd = &g->nodes[grp->nodes[m]];
        vf_fused_member *fm = &mem[m];
        fm->in[0] = fm->in[1] = fm->in[2] = 0;
        for (int k = 0; k < nd->n_in && k < 3; k++) {
            int mi = vf_group_member_index(grp, nd->in[k]);
            fm->in[k] = mi >= 0 ? VF_FUSED_MEMBER(mi) : vf_group_input_index(grp, nd->in[k]);
        }
        fm->out = -1;
        for (int o = 0; o < grp->n_outputs; o++)
            if (grp->outputs[o] == grp->nodes[m]) fm->out = grp->n_inputs + o;
    }
    *out = (vf_fused_group){.kind = kind, .n_members = grp->n_nodes, .members = mem,
                            .center = grp->center >= 0 ? vf_group_member_index(grp, grp->center) : -1,
                            .n_inputs = grp->n_inputs, .n_outputs = grp->n_outputs};
    return true;
}

/* One graph's nodes as walked into the plan: the top level, or a branch
   of a top-level COND (builder.br, its execs guarded). */
typedef struct walked {
    const vf_graph *g;
    const int *node_ex, *node_nex;
    const pval *v;
    bool top;
} walked;

/* The kernel order being made: ord[0..n) and each exec's kernel (step). */
typedef struct emit {
    builder *b;
    fusion *f;
    int *ord, *step;
    int n, steps, n_members;
    bool bparts;           /* the branches' partitions are used */
} emit;

/* A user kernel's call planned as parts (plan.c walk_kernel): node's
   execs. */
static bool user_parts(const walked *L, int node)
{
    return L->g->nodes[node].kind == VF_NODE_KERNEL && L->node_nex[node] > 1;
}

/* The parts of user kernel call `node` as one kernel: a VF_FUSED_USER
   group whose tensors are the call's inputs then its outputs, its
   members the parts (their execs next in ord, one step). */
static void add_user_group(emit *em, const walked *L, int node)
{
    builder *b = em->b;
    fusion *f = em->f;
    const vf_ukernel *k = L->g->nodes[node].uk;
    int x0 = L->node_ex[node], np = L->node_nex[node];
    vf_plan_fused *pf = &f->fused[f->n_fused++];
    vf_fused_member *mem = f->members + em->n_members;
    *pf = (vf_plan_fused){.first_exec = em->n, .n_execs = np, .loc = f->tloc + f->n_tens};
    pf->group = (vf_fused_group){.kind = VF_FUSED_USER, .n_members = np, .members = mem, .center = -1,
                                 .n_inputs = k->n_in, .n_outputs = k->n_out, .tensors = f->tens + f->n_tens};
    for (int p = 0; p < np; p++) {
        const vf_exec *e = &b->ex[x0 + p];
        mem[p] = (vf_fused_member){.in = {0, 0, 0}, .out = k->n_in + (p < k->n_out ? p : k->n_out - 1)};
        for (int q = 0; q < e->n_in; q++) mem[p].in[q] = 3 * p + q;
        em->ord[em->n] = x0 + p, em->step[em->n++] = em->steps;
    }
    em->steps++;
    em->n_members += np;
    for (int t = 0; t < k->n_in + k->n_out; t++) { /* input i: part i / 3 slot i % 3; output j: part j's out */
        int x = x0 + (t < k->n_in ? t / 3 : t - k->n_in), j = t < k->n_in ? t % 3 : 3;
        f->tens[f->n_tens] = j == 3 ? b->ex[x].out : b->ex[x].in[j];
        f->tloc[f->n_tens] = b->loc[x][j];
        f->tinter[f->n_tens++] = b->ref_inter[x][j];
    }
}

/* Execs [x, x1) as kernels of their own. */
static void add_singles(emit *em, int x, int x1)
{
    for (; x < x1 && em->n < em->b->n_ex; x++) em->ord[em->n] = x, em->step[em->n++] = em->steps++;
}

static void add_level(emit *em, const walked *L, const vf_partition_t *part);

/* Node `node` of L: a COND's branches as their own levels (fused as
   their partitions say, or in node order), a user kernel's parts as one
   kernel, any other node's execs one kernel each. */
static void add_node(emit *em, const walked *L, int node)
{
    builder *b = em->b;
    int x = L->node_ex[node], end = x + L->node_nex[node];
    if (L->top && L->g->nodes[node].kind == VF_NODE_COND && L->node_nex[node] > 0) {
        for (int r = 0; r < b->n_br; r++) {
            const vf_pb_branch *br = &b->br[r];
            if (br->cond != node) continue;
            add_singles(em, x, br->x0); /* the predicate's copy; the other branch's result copies */
            walked bl = {br->g, br->node_ex, br->node_nex, br->v, false};
            add_level(em, &bl, em->bparts && em->f->have_bpart[r] ? &em->f->bpart[r] : NULL);
            x = br->x1;
        }
        add_singles(em, x, end);
        return;
    }
    if (user_parts(L, node) && em->n + L->node_nex[node] <= b->n_ex) {
        add_user_group(em, L, node);
        return;
    }
    add_singles(em, x, end);
}

/* The kernels of L: its partition's groups (fusable ones as one
   vf_plan_fused each), or without one its nodes in order. */
static void add_level(emit *em, const walked *L, const vf_partition_t *part)
{
    builder *b = em->b;
    fusion *f = em->f;
    vf_fused_kind fk;
    for (int gi = 0; part && gi < part->n_groups; gi++) {
        const vf_group *grp = &part->groups[gi];
        bool fuse = fusable_kind(grp->kind, &fk);
        for (int m = 0; fuse && m < grp->n_nodes; m++) fuse = L->node_nex[grp->nodes[m]] == 1;
        if (!fuse || em->n + grp->n_nodes > b->n_ex) {
            for (int m = 0; m < grp->n_nodes; m++) add_node(em, L, grp->nodes[m]);
            continue;
        }
        vf_plan_fused *pf = &f->fused[f->n_fused++];
        *pf = (vf_plan_fused){.first_exec = em->n, .n_execs = grp->n_nodes, .loc = f->tloc + f->n_tens};
        vf_group_describe(L->g, grp, f->members + em->n_members, &pf->group);
        pf->group.tensors = f->tens + f->n_tens;
        em->n_members += grp->n_nodes;
        for (int t = 0; t < grp->n_inputs + grp->n_outputs; t++) {
            int val = t < grp->n_inputs ? grp->inputs[t] : grp->outputs[t - grp->n_inputs];
            f->tens[f->n_tens] = L->v[val].ref;
            f->tloc[f->n_tens] = L->v[val].loc;
            f->tinter[f->n_tens++] = L->v[val].inter;
        }
        for (int m = 0; m < grp->n_nodes; m++) {
            int node = grp->nodes[m];
            em->ord[em->n] = L->node_ex[node], em->step[em->n++] = em->steps;
            bool out = false;
            for (int o = 0; o < grp->n_outputs; o++) out = out || grp->outputs[o] == node;
            if (!out && L->v[node].inter >= 0) b->it[L->v[node].inter].internal = true;
        }
        em->steps++;
    }
    for (int i = 0; !part && i < L->g->n; i++) add_node(em, L, i);
}

/* Upper bounds of what L's fused groups take: groups, bound tensors,
   members. */
static void count_level(const walked *L, const vf_partition_t *part, int *n_dag, int *n_tens, int *n_mem)
{
    vf_fused_kind fk;
    for (int gi = 0; part && gi < part->n_groups; gi++)
        if (fusable_kind(part->groups[gi].kind, &fk)) {
            (*n_dag)++;
            *n_tens += part->groups[gi].n_inputs + part->groups[gi].n_outputs;
            *n_mem += part->groups[gi].n_nodes;
        }
    for (int i = 0; i < L->g->n; i++)
        if (user_parts(L, i)) {
            (*n_dag)++;
            *n_tens += L->g->nodes[i].uk->n_in + L->g->nodes[i].uk->n_out;
            *n_mem += L->node_nex[i];
        }
}

bool vf_pb_fusion(builder *b, const vf_graph *g, const pval *v, fusion *f, int *ord, int *step)
{
    for (int x = 0; x < b->n_ex; x++) ord[x] = step[x] = x;
    vf_fusion_options opt;
    vf_fusion_options_default(&opt);
    if (b->env->unfused) opt.enabled = false;
    if (b->env->be && b->env->be->iface->fused_max_nodes > 0) opt.max_nodes = b->env->be->iface->fused_max_nodes;
    opt.view = b->view;
    vf_err err = {0};
    if (opt.enabled) {
        vf_status ps = vf_partition(g, &opt, &f->part, &err);
        if (ps == VF_ERROR_OUT_OF_MEMORY) return false;
        f->have_part = ps == VF_OK; /* else the unfused plan, which is always valid */
    }
    /* The branches of the CONDs: partitioned on their own (no views in a
       branch), their groups guarded like the branch's every exec. */
    if (f->have_part && b->n_br) {
        f->bpart = vf_calloc((size_t)b->n_br, sizeof *f->bpart);
        f->have_bpart = vf_calloc((size_t)b->n_br, sizeof *f->have_bpart);
        if (!f->bpart || !f->have_bpart) return false;
        f->n_bpart = b->n_br;
        opt.view = NULL;
        for (int r = 0; r < b->n_br; r++) {
            vf_status ps = vf_partition(b->br[r].g, &opt, &f->bpart[r], &err);
            if (ps == VF_ERROR_OUT_OF_MEMORY) return false;
            f->have_bpart[r] = ps == VF_OK; /* else that branch in node order */
        }
    }
    walked top = {g, b->node_ex, b->node_nex, v, true};
    int n_dag = 0, n_tens = 0, n_mem = 0;
    count_level(&top, f->have_part ? &f->part : NULL, &n_dag, &n_tens, &n_mem);
    for (int r = 0; r < b->n_br; r++) {
        walked bl = {b->br[r].g, b->br[r].node_ex, b->br[r].node_nex, b->br[r].v, false};
        count_level(&bl, f->have_bpart && f->have_bpart[r] ? &f->bpart[r] : NULL, &n_dag, &n_tens, &n_mem);
    }
    if (!n_dag) return true;
    f->members = vf_calloc((size_t)n_mem, sizeof *f->members);
    f->fused = vf_calloc((size_t)n_dag, sizeof *f->fused);
    f->tens = vf_calloc((size_t)n_tens, sizeof *f->tens);
    f->tloc = vf_calloc((size_t)n_tens, sizeof *f->tloc);
    f->tinter = vf_calloc((size_t)n_tens, sizeof *f->tinter);
    if (!f->members || !f->fused || !f->tens || !f->tloc || !f->tinter) return false;
    emit em = {.b = b, .f = f, .ord = ord, .step = step, .bparts = f->have_bpart != NULL};
    if (f->have_part) add_level(&em, &top, &f->part);
    if (f->have_part && em.n == b->n_ex) return true;
    /* Not partitioned, or not every exec in exactly one group: the node
       order unfused (user kernels' parts still one kernel each). */
    for (int i = 0; i < b->n_it; i++) b->it[i].internal = false;
    f->n_fused = f->n_tens = 0;
    em = (emit){.b = b, .f = f, .ord = ord, .step = step};
    add_level(&em, &top, NULL);
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
/* The level a kernel touching intermediate id (writing it: write) must
   come after, at least lv. Views (plan_view.c) share bytes with their
   roots: a read waits for writes of id, of the views in it (wsub: the
   latest over id's subtree) and of the values it is a view of (their own
   writes, wl); a write also waits for the reads of all of those. Views
   of one root side by side do not wait for each other. */
static int after(const builder *b, int id, bool write, const int *wl, const int *rl, const int *wsub, const int *rsub,
                 int lv)
{
    int need = write ? (wsub[id] > rsub[id] ? wsub[id] : rsub[id]) : wsub[id];
    for (int a = b->it[id].parent; a >= 0; a = b->it[a].parent) {
        if (wl[a] > need) need = wl[a];
        if (write && rl[a] > need) need = rl[a];
    }
    return need >= 0 && need + 1 > lv ? need + 1 : lv;
}

bool vf_pb_schedule_levels(builder *b, fusion *fz, int *ord, int *step)
{
    int n = b->n_ex, nk = n ? step[n - 1] + 1 : 0;
    int *level = vf_calloc((size_t)nk + 1, sizeof *level), *kfirst = vf_malloc(sizeof(int) * ((size_t)nk + 1));
    int *wl = vf_malloc(sizeof(int) * ((size_t)b->n_it + 1)), *rl = vf_malloc(sizeof(int) * ((size_t)b->n_it + 1));
    int *wsub = vf_malloc(sizeof(int) * ((size_t)b->n_it + 1)), *rsub = vf_malloc(sizeof(int) * ((size_t)b->n_it + 1));
    int *nord = vf_malloc(sizeof(int) * ((size_t)n + 1)), *nstep = vf_malloc(sizeof(int) * ((size_t)n + 1));
    int *kpos = vf_malloc(sizeof(int) * ((size_t)nk + 1)), *start = vf_calloc((size_t)n + 2, sizeof(int));
    bool ok = level && kfirst && wl && rl && wsub && rsub && nord && nstep && kpos && start;
    for (int i = 0; ok && i < b->n_it; i++) wl[i] = rl[i] = wsub[i] = rsub[i] = -1;
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
                if (id >= 0) lv = after(b, id, j == 3, wl, rl, wsub, rsub, lv);
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
                int *l = j == 3 ? wl : rl, *sub = j == 3 ? wsub : rsub;
                if (l[id] < lv) l[id] = lv;
                for (int a = id; a >= 0; a = b->it[a].parent) /* a view's bytes are its roots' too */
                    if (sub[a] < lv) sub[a] = lv;
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
    free(level), free(kfirst), free(wl), free(rl), free(wsub), free(rsub), free(nord), free(nstep), free(kpos), free(start);
    return ok;
}

/* Reorders the execs as ord says and recounts every intermediate's
   lifetime in steps. false: out of host memory. */
bool vf_pb_reorder(builder *b, const int *ord, const int *step)
{
    int n = b->n_ex;
    vf_exec *ex = vf_malloc(sizeof *ex * (size_t)(n + 1));
    vf_plan_loc(*loc)[4] = vf_malloc(sizeof *loc * (size_t)(n + 1));
    int(*ri)[4] = vf_malloc(sizeof *ri * (size_t)(n + 1));
    vf_plan_guard *gd = vf_malloc(sizeof *gd * (size_t)(n + 1));
    int *en = vf_malloc(sizeof *en * (size_t)(n + 1));
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
    for (int i = 0; i < b->n_it; i++) b->it[i].first = b->it[i].last = -1;
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
    /* A view's uses are its root's: the root's bytes live from the first
       write of any view in it to the last use of any (plan_view.c). */
    for (int i = 0; i < b->n_it; i++) {
        int r = vf_pb_root(b, i, NULL);
        if (r == i) continue;
        inter *v = &b->it[i], *t = &b->it[r];
        if (v->first >= 0 && (t->first < 0 || v->first < t->first)) t->first = v->first;
        if (v->last > t->last) t->last = v->last;
    }
    for (int i = 0; i < b->n_it; i++) {
        if (b->it[i].first < 0) b->it[i].first = 0; /* never written here (read only, or unused) */
        if (b->it[i].last < b->it[i].first) b->it[i].last = b->it[i].first;
    }
    return true;
}

/* In-place reuse (docs/FUNCTIONS.md): an arena value written by an
   elementwise kernel (a fused group that allows it, or a single
   elementwise exec) may take the bytes of an arena value the kernel reads
   element for element (same element count and size, so the same index)
   and that dies there. The unfused fallback of a fused group must stay
   right too: every member reading the input runs no later than the member
   writing the output. Never with fusion off (the alias-free baseline),
   never for outputs or variables (not arena values), never guarded. */
static bool arena_value(const builder *b, int id)
{
    return id >= 0 && b->it[id].slot < 0 && !b->it[id].internal && b->it[id].parent < 0 && !b->it[id].viewed &&
           !b->it[id].fixed;
}

/* Does a kernel of the same dependency level as [x, x1) read `in`? Those
   run unordered with it (no barrier inside a level, see vf_pb_schedule_levels),
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

void vf_pb_inplace_candidates(const builder *b, const fusion *fz, const int *step, const int *arena_id, int n,
                               int *alias, bool *taken)
{
    for (int i = 0; i < n; i++) alias[i] = -1, taken[i] = false;
    if (!fz->have_part) return;
    for (int x = 0, gi = 0; x < b->n_ex; x++) {
        const vf_plan_fused *f = gi < fz->n_fused && fz->fused[gi].first_exec == x ? &fz->fused[gi++] : NULL;
        int x1 = f ? x + f->n_execs : x + 1;
        bool ok = b->guard[x].pred >= 0 ? false /* a branch's (ex_node is its COND) */
                : f ? fz->part.groups[fz->part.group_of[b->ex_node[x]]].may_alias_input
                    : vf_op_get(b->ex[x].op)->kind == VF_KIND_ELEMENTWISE;
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
                                fits = fits && y <= w && vf_pb_same_elements(&b->ex[y].in[k], &b->ex[w].out) &&
                                       vf_op_get(b->ex[y].op)->kind == VF_KIND_ELEMENTWISE;
                    if (!fits) continue;
                    alias[arena_id[o]] = arena_id[in];
                    taken[arena_id[in]] = true;
                }
        }
        x = x1 - 1;
    }
}
