/* vf_partition: greedy fusion of a graph's nodes into groups (partition.h).
 *
 * Nodes are visited in SSA order. An elementwise node joins (and merges)
 * the groups of its producers when they are "open", have its output shape
 * and were formed since the last side-effect node; otherwise it starts a
 * group. A group closes as soon as one of its values is read by a node
 * outside it. That single rule keeps the partition schedulable: ordering
 * groups by their last member, every edge between two groups goes from an
 * earlier group to a later one. (Proof sketch: when node n merges open
 * groups, no member of them is read by any processed node outside them, so
 * every outside reader comes after n, in a group that ends after n.) It
 * also gives the "reduce in the middle" split: in y = exp(x) / sum(exp(x))
 * the reduction reads exp(x) and closes its group, so the division starts
 * a new one instead of forming a cycle through the reduction.
 *
 * Nothing is duplicated: a value read outside its group becomes a group
 * output and is stored once. Reductions and matmuls are never members of
 * an elementwise group, so they are never recomputed.
 */
#include "fusion/partition.h"
#include "fusion/sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_NODES 64

void vf_fusion_options_default(vf_fusion_options *opt)
{
    memset(opt, 0, sizeof *opt);
    const char *env = getenv("VKFUSE_FUSION");
    opt->enabled = !(env && strcmp(env, "0") == 0);
    /* Row groups are formed only when asked for: codegen_fused.c has no
       generator for them yet. Matmul groups: codegen_matmul_fused.c. */
    opt->fuse_rows = false;
    opt->fuse_matmul = true;
    opt->max_nodes = DEFAULT_MAX_NODES;
}

bool vf_fusible_elementwise(const vf_node *n)
{
    if (n->kind != VF_NODE_OP || (unsigned)n->op >= VF_OP_COUNT) return false;
    const vf_op_info *info = vf_op_get(n->op);
    return info->kind == VF_KIND_ELEMENTWISE || n->op == VF_OP_FILL;
}

const char *vf_group_kind_name(vf_group_kind k)
{
    static const char *const names[] = {"single", "elementwise_dag", "row_epilogue", "matmul_epilogue"};
    return (unsigned)k < VF_GROUP_KIND_COUNT ? names[k] : "?";
}

/* ---- working state ------------------------------------------------------ */

typedef struct {
    vf_group_kind kind;
    int parent;        /* union-find */
    int center;
    int epoch;
    bool open;
    int n_members;
    vf_shape shape;    /* output shape of the elementwise members */
} wgroup;

typedef struct {
    const vf_graph *g;
    const vf_fusion_options *opt;
    wgroup *w;
    int n_w;
    int *gid;          /* node -> working group (not yet resolved) */
    bool *is_out;      /* graph outputs */
    int *mark;         /* scratch per node for set counting */
    int stamp;
} pstate;

static int find(pstate *s, int x)
{
    while (s->w[x].parent != x) {
        s->w[x].parent = s->w[s->w[x].parent].parent;
        x = s->w[x].parent;
    }
    return x;
}

static int new_group(pstate *s, vf_group_kind kind, int epoch, const vf_shape *shape)
{
    int id = s->n_w++;
    wgroup *w = &s->w[id];
    memset(w, 0, sizeof *w);
    w->kind = kind;
    w->parent = id;
    w->center = -1;
    w->epoch = epoch;
    w->open = kind != VF_GROUP_SINGLE;
    if (shape) w->shape = *shape;
    return id;
}

/* Row ops the row kernels handle with fused code: along the last axis. */
static bool row_center(const vf_node *n)
{
    if (n->kind != VF_NODE_OP) return false;
    if (n->op == VF_OP_SPARSE_XENT) return true;
    return (n->op == VF_OP_SOFTMAX || n->op == VF_OP_LOG_SOFTMAX) && n->attrs.axis == n->shape.rank - 1;
}

/* Counts the tensors a group made of the groups in cand[] plus node n would
   bind: external inputs plus a bound on outputs (members already read
   outside or graph outputs, plus n). */
static int count_tensors(pstate *s, const int *cand, int nc, int n)
{
    const vf_graph *g = s->g;
    int stamp = ++s->stamp;
    int tensors = 0;
    /* mark members: mark = stamp; externals counted with mark = -stamp */
    for (int v = 0; v <= n; v++) {
        int r = v == n ? -1 : find(s, s->gid[v]);
        bool member = v == n;
        for (int c = 0; c < nc && !member; c++) member = r == cand[c];
        if (member) s->mark[v] = stamp;
    }
    for (int v = 0; v <= n; v++) {
        if (s->mark[v] != stamp) continue;
        const vf_node *nd = &g->nodes[v];
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k];
            if (s->mark[p] == stamp || s->mark[p] == -stamp) continue;
            s->mark[p] = -stamp;
            tensors++;
        }
        if (s->is_out[v] || v == n) tensors++;
    }
    return tensors;
}

static int members_of(pstate *s, const int *cand, int nc)
{
    int m = 1;
    for (int c = 0; c < nc; c++) m += s->w[cand[c]].n_members;
    return m;
}

/* The group node n (fusible elementwise, or a center) joins; -1: a new one. */
static int choose(pstate *s, int n, int epoch)
{
    const vf_node *nd = &s->g->nodes[n];
    int cand[3 * 4];
    int nc = 0;
    bool have_center = false;
    for (int k = 0; k < nd->n_in; k++) {
        int p = nd->in[k];
        int r = find(s, s->gid[p]);
        wgroup *w = &s->w[r];
        if (!w->open || w->epoch != epoch) continue;
        bool ok;
        if (w->kind == VF_GROUP_ELEMENTWISE_DAG) {
            ok = vf_shape_equal(&w->shape, &nd->shape) && vf_fusible_elementwise(nd);
            /* a row op's prologue: elementwise producers of the row input */
            if (row_center(nd)) {
                int x = nd->op == VF_OP_SPARSE_XENT ? 1 : 0;
                ok = k == x && vf_shape_equal(&w->shape, &s->g->nodes[p].shape) && !have_center;
            }
            if (nd->op == VF_OP_MATMUL) ok = false;   /* operands are read at many indices */
        } else {
            /* an epilogue: elementwise consumer of the center's output shape */
            ok = vf_fusible_elementwise(nd) && vf_shape_equal(&w->shape, &nd->shape) && !have_center;
            if (ok) have_center = true;
        }
        if (!ok) continue;
        bool dup = false;
        for (int c = 0; c < nc; c++) dup |= cand[c] == r;
        if (!dup && nc < (int)(sizeof cand / sizeof cand[0])) cand[nc++] = r;
    }
    int max_nodes = s->opt->max_nodes > 0 ? s->opt->max_nodes : DEFAULT_MAX_NODES;
    /* Drop candidates from the end until the merged group fits. */
    while (nc > 0 && (members_of(s, cand, nc) > max_nodes ||
                      count_tensors(s, cand, nc, n) > VF_GROUP_MAX_TENSORS))
        nc--;
    if (nc == 0) return -1;
    /* Merge into the center group if there is one, else the first. */
    int root = cand[0];
    for (int c = 0; c < nc; c++)
        if (s->w[cand[c]].kind != VF_GROUP_ELEMENTWISE_DAG) root = cand[c];
    for (int c = 0; c < nc; c++) {
        if (cand[c] == root) continue;
        s->w[root].n_members += s->w[cand[c]].n_members;
        s->w[cand[c]].parent = root;
    }
    return root;
}

static vf_status build(pstate *s, vf_partition_t *out, vf_err *err);

vf_status vf_partition(const vf_graph *g, const vf_fusion_options *opt, vf_partition_t *out, vf_err *err)
{
    memset(out, 0, sizeof *out);
    if (!g) return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "partition: no graph");
    vf_fusion_options defaults;
    if (!opt) {
        vf_fusion_options_default(&defaults);
        opt = &defaults;
    }
    pstate s = {.g = g, .opt = opt};
    int n = g->n;
    size_t cnt = (size_t)(n > 0 ? n : 1);
    s.w = calloc(cnt, sizeof *s.w);
    s.gid = calloc(cnt, sizeof *s.gid);
    s.is_out = calloc(cnt, sizeof *s.is_out);
    s.mark = calloc(cnt, sizeof *s.mark);
    vf_status st = VF_OK;
    if (!s.w || !s.gid || !s.is_out || !s.mark) {
        st = vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "partition: out of memory (%d nodes)", n);
        goto done;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0 && g->outputs[i] < n) s.is_out[g->outputs[i]] = true;

    int epoch = 0;
    for (int v = 0; v < n; v++) {
        const vf_node *nd = &g->nodes[v];
        for (int k = 0; k < nd->n_in; k++)
            if (nd->in[k] < 0 || nd->in[k] >= v) {
                st = vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                                "partition: node %d reads value %d, not an earlier node", v, nd->in[k]);
                goto done;
            }
        int grp = -1;
        if (opt->enabled) {
            bool ew = vf_fusible_elementwise(nd);
            bool row = !ew && opt->fuse_rows && row_center(nd);
            bool mm = !ew && opt->fuse_matmul && nd->kind == VF_NODE_OP && nd->op == VF_OP_MATMUL;
            if (ew || row) grp = choose(&s, v, epoch);
            if (grp >= 0) {
                s.w[grp].n_members++;
                if (row) {   /* the prologue group becomes the row group */
                    s.w[grp].kind = VF_GROUP_ROW_EPILOGUE;
                    s.w[grp].center = v;
                    s.w[grp].shape = nd->shape;
                }
            } else if (ew || row || mm) {
                vf_group_kind kind = ew ? VF_GROUP_ELEMENTWISE_DAG : row ? VF_GROUP_ROW_EPILOGUE
                                                                         : VF_GROUP_MATMUL_EPILOGUE;
                grp = new_group(&s, kind, epoch, &nd->shape);
                s.w[grp].n_members = 1;
                if (!ew) s.w[grp].center = v;
            }
        }
        if (grp < 0) grp = new_group(&s, VF_GROUP_SINGLE, epoch, NULL);
        s.gid[v] = grp;
        /* Readers outside a group close it (see the file comment). */
        int me = find(&s, grp);
        for (int k = 0; k < nd->n_in; k++) {
            int r = find(&s, s.gid[nd->in[k]]);
            if (r != me) s.w[r].open = false;
        }
        if (vf_node_has_effect(nd)) epoch++;
    }
    st = build(&s, out, err);
done:
    free(s.w);
    free(s.gid);
    free(s.is_out);
    free(s.mark);
    if (st) vf_partition_free(out);
    return st;
}

/* ---- the result --------------------------------------------------------- */

static vf_status build(pstate *s, vf_partition_t *out, vf_err *err)
{
    const vf_graph *g = s->g;
    int n = g->n;
    size_t cnt = (size_t)(n > 0 ? n : 1);
    int *last = malloc(cnt * sizeof *last);    /* working root -> last member */
    int *index = malloc(cnt * sizeof *index);  /* working root -> output group */
    out->group_of = malloc(cnt * sizeof *out->group_of);
    out->groups = calloc(cnt, sizeof *out->groups);
    vf_status st = VF_OK;
    if (!last || !index || !out->group_of || !out->groups) goto oom;
    for (int i = 0; i < s->n_w; i++) index[i] = -1;
    for (int v = 0; v < n; v++) last[find(s, s->gid[v])] = v;
    /* Groups in order of their last member: a valid order (file comment). */
    for (int v = 0; v < n; v++) {
        int r = find(s, s->gid[v]);
        if (last[r] != v) continue;
        index[r] = out->n_groups;
        vf_group *grp = &out->groups[out->n_groups++];
        grp->kind = s->w[r].kind;
        grp->center = s->w[r].center;
    }
    for (int v = 0; v < n; v++) {
        int gi = index[find(s, s->gid[v])];
        out->group_of[v] = gi;
        out->groups[gi].n_nodes++;
    }
    for (int i = 0; i < out->n_groups; i++) {
        vf_group *grp = &out->groups[i];
        grp->nodes = malloc((size_t)grp->n_nodes * sizeof *grp->nodes);
        if (!grp->nodes) goto oom;
        grp->n_nodes = 0;
    }
    for (int v = 0; v < n; v++) {
        vf_group *grp = &out->groups[out->group_of[v]];
        grp->nodes[grp->n_nodes++] = v;
    }
    /* inputs and outputs */
    int *seen = s->mark;
    for (int v = 0; v < n; v++) seen[v] = -1;
    for (int i = 0; i < out->n_groups; i++) {
        vf_group *grp = &out->groups[i];
        int cap_in = 0;
        for (int m = 0; m < grp->n_nodes; m++) cap_in += g->nodes[grp->nodes[m]].n_in;
        grp->inputs = malloc((size_t)(cap_in > 0 ? cap_in : 1) * sizeof *grp->inputs);
        grp->outputs = malloc((size_t)grp->n_nodes * sizeof *grp->outputs);
        if (!grp->inputs || !grp->outputs) goto oom;
        for (int m = 0; m < grp->n_nodes; m++) {
            const vf_node *nd = &g->nodes[grp->nodes[m]];
            for (int k = 0; k < nd->n_in; k++) {
                int p = nd->in[k];
                if (out->group_of[p] == i || seen[p] == i) continue;
                seen[p] = i;
                grp->inputs[grp->n_inputs++] = p;
            }
        }
    }
    bool *needed = (bool *)last;   /* reuse: n ints hold n bools */
    memset(needed, 0, cnt * sizeof *needed);
    for (int v = 0; v < n; v++) {
        if (s->is_out[v]) needed[v] = true;
        const vf_node *nd = &g->nodes[v];
        for (int k = 0; k < nd->n_in; k++)
            if (out->group_of[nd->in[k]] != out->group_of[v]) needed[nd->in[k]] = true;
    }
    for (int v = 0; v < n; v++) {
        vf_group *grp = &out->groups[out->group_of[v]];
        if (needed[v]) grp->outputs[grp->n_outputs++] = v;
    }
    for (int i = 0; i < out->n_groups; i++) {
        vf_group *grp = &out->groups[i];
        /* A fused group of one node is just that node. */
        if (grp->n_nodes == 1 && grp->kind != VF_GROUP_SINGLE) {
            grp->kind = VF_GROUP_SINGLE;
            grp->center = -1;
        }
        if (grp->kind == VF_GROUP_SINGLE) grp->center = -1;
        grp->may_alias_input = s->opt->enabled && grp->kind == VF_GROUP_ELEMENTWISE_DAG;
    }
    goto end;
oom:
    st = vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "partition: out of memory (%d nodes)", n);
end:
    free(last);
    free(index);
    return st;
}

void vf_partition_free(vf_partition_t *p)
{
    if (!p) return;
    for (int i = 0; p->groups && i < p->n_groups; i++) {
        free(p->groups[i].nodes);
        free(p->groups[i].inputs);
        free(p->groups[i].outputs);
    }
    free(p->groups);
    free(p->group_of);
    memset(p, 0, sizeof *p);
}

static void add_list(vf_sb *sb, const char *label, const int *v, int n)
{
    vf_sb_add(sb, " %s [", label);
    for (int i = 0; i < n; i++) vf_sb_add(sb, "%s%d", i ? " " : "", v[i]);
    vf_sb_puts(sb, "]");
}

char *vf_partition_to_string(const vf_graph *g, const vf_partition_t *p)
{
    vf_sb sb = {0};
    vf_sb_puts(&sb, "");
    for (int i = 0; i < p->n_groups; i++) {
        const vf_group *grp = &p->groups[i];
        vf_sb_add(&sb, "group %d %s", i, vf_group_kind_name(grp->kind));
        if (grp->center >= 0) vf_sb_add(&sb, " center %d (%s)", grp->center, vf_node_name(&g->nodes[grp->center]));
        add_list(&sb, "nodes", grp->nodes, grp->n_nodes);
        add_list(&sb, "in", grp->inputs, grp->n_inputs);
        add_list(&sb, "out", grp->outputs, grp->n_outputs);
        vf_sb_puts(&sb, "\n");
    }
    if (sb.oom) {
        vf_sb_free(&sb);
        return NULL;
    }
    return vf_sb_take(&sb);
}
