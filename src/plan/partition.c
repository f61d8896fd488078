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
 * output and is stored once. Reductions, matmuls and convolutions are never
 * members of an elementwise group, so they are never recomputed. A matmul
 * or a conv2d starts a group of its own that its elementwise consumers of
 * its output shape join (the epilogue: bias add, activation).
 */
#include "plan/partition.h"
#include "util/fault.h"
#include "util/sb.h"
#include "util/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_NODES 64

void vf_fusion_options_default(vf_fusion_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->enabled = true; /* off: VKFUSE_FUSION=0 or vf_function_desc.unfused (the caller's plan env) */
    /* Row groups: codegen_rows.c; matmul groups: codegen_matmul_fused.c;
       conv groups: codegen_conv_fused.c. */
    opt->fuse_rows = true;
    opt->fuse_matmul = true;
    opt->fuse_conv = true;
    opt->max_nodes = DEFAULT_MAX_NODES;
}

bool vf_fusible_elementwise(const vf_node *n)
{
    if (n->kind != VF_NODE_OP || (unsigned)n->op >= VF_OP_COUNT) return false;
    const vf_op_info *info = vf_op_get(n->op);
    return info->kind == VF_KIND_ELEMENTWISE || (info->flags & VF_OPF_LITERAL);
}

/* Whether n is an op whose row has `flag`. */
static bool op_has(const vf_node *n, uint32_t flag)
{
    return n->kind == VF_NODE_OP && (unsigned)n->op < VF_OP_COUNT && (vf_op_get(n->op)->flags & flag);
}

/* Window ops (their row's VF_OPF_WINDOW_READ) read their inputs at computed
   indices: in an elementwise group they start it (their inputs are group
   inputs, in memory) and their consumers join; row and matmul groups have
   no such read. */
static bool window_reader(const vf_node *n) { return op_has(n, VF_OPF_WINDOW_READ); }

/* The epilogue group n centers (its row's), NONE for other nodes. */
static vf_epilogue epilogue_of(const vf_node *n)
{
    return n->kind == VF_NODE_OP && (unsigned)n->op < VF_OP_COUNT ? vf_op_get(n->op)->epilogue : VF_EPILOGUE_NONE;
}

const char *vf_group_kind_name(vf_group_kind k)
{
    static const char *const names[] = {"single", "elementwise_dag", "row_epilogue", "matmul_epilogue",
                                          "conv_epilogue"};
    return (unsigned)k < VF_GROUP_KIND_COUNT ? names[k] : "?";
}

int vf_group_member_index(const vf_group *grp, int v)
{
    for (int m = 0; m < grp->n_nodes; m++)
        if (grp->nodes[m] == v) return m;
    return -1;
}

int vf_group_input_index(const vf_group *grp, int v)
{
    for (int k = 0; k < grp->n_inputs; k++)
        if (grp->inputs[k] == v) return k;
    return -1;
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
    bool window;       /* has a window member (slice, pad, concat, slice_grad) */
} wgroup;

typedef struct {
    const vf_graph *g;
    const vf_fusion_options *opt;
    wgroup *w;
    int n_w;
    int *gid;          /* node -> working group (not yet resolved) */
    bool *is_out;      /* graph outputs */
    int *readers;      /* nodes reading each value */
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

/* Row nodes ("centers", their row's `row`): softmax / log_softmax along the
   last axis, sparse_xent, and sum / mean / max / min / prod / logsumexp over
   the last axis only with keepdims, all of a float dtype. Returns the index
   of the row input (the data input) or -1. */
static int row_input(const vf_graph *g, const vf_node *n)
{
    if (n->kind != VF_NODE_OP || n->n_in < 1) return -1;
    int x = vf_op_data_input(n->op);
    if (x >= n->n_in) return -1;
    const vf_node *in = &g->nodes[n->in[x]];
    if (in->shape.rank < 1 || !vf_dtype_is_float(in->dtype)) return -1;
    switch (vf_op_get(n->op)->row) {
    case VF_ROW_CENTER_LABELS: return x;
    case VF_ROW_CENTER_AXIS: return n->attrs.axis == n->shape.rank - 1 ? x : -1;
    case VF_ROW_CENTER_REDUCE: return n->attrs.keepdims && n->attrs.axes_mask == 1u << (in->shape.rank - 1) ? x : -1;
    default: return -1;
    }
}

static bool row_center(const vf_graph *g, const vf_node *n) { return row_input(g, n) >= 0; }

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

/* Whether working group r is one FILL read only by node n and not a graph
   output: a splat (a value broadcast to whatever reads it), which may join
   n's group whatever its shape. graph/passes_fills.c gives every
   elementwise reader a FILL of its own. */
static bool splat_for(pstate *s, int r, int n)
{
    if (s->w[r].kind != VF_GROUP_ELEMENTWISE_DAG || s->w[r].n_members != 1) return false;
    const vf_node *nd = &s->g->nodes[n];
    for (int k = 0; k < nd->n_in; k++) {
        int p = nd->in[k];
        const vf_node *f = &s->g->nodes[p];
        if (find(s, s->gid[p]) == r)
            return op_has(f, VF_OPF_LITERAL) && s->readers[p] == 1 && !s->is_out[p];
    }
    return false;
}

/* Whether elementwise node nd may be a member of a row group of row shape
   `row` when it reads member value p: its shape is the row's, the kept
   per-row shape [..., 1] or the dropped one [...] (sparse_xent losses), and
   a per-row value feeds only per-row or row-wide values. */
static bool row_member_ok(const vf_graph *g, const vf_node *nd, int p, const vf_shape *row)
{
    vf_row_class c = vf_row_classify_shape(&nd->shape, row), pc = vf_row_classify_shape(&g->nodes[p].shape, row);
    if (c == VF_ROW_NONE || pc == VF_ROW_NONE) return false;
    return pc == c || (c == VF_ROW_WIDE && pc == VF_ROW_SCALAR);
}

/* Every external input of every member of a would-be row group (cand[]
   plus n) can be indexed by the row kernel (vf_row_input_index). */
static bool row_inputs_ok(pstate *s, const int *cand, int nc, int n, const vf_shape *row)
{
    const vf_graph *g = s->g;
    for (int v = 0; v <= n; v++) {
        bool member = v == n;
        int r = v == n ? -1 : find(s, s->gid[v]);
        for (int c = 0; c < nc && !member; c++) member = r == cand[c];
        if (!member) continue;
        const vf_node *nd = &g->nodes[v];
        if (op_has(nd, VF_OPF_LITERAL)) continue;   /* a literal: no input, any shape */
        vf_row_class where = row_center(g, nd) ? VF_ROW_WIDE : vf_row_classify_shape(&nd->shape, row);
        if (where == VF_ROW_NONE) return false;
        for (int k = 0; k < nd->n_in; k++) {
            int p = nd->in[k];
            bool pin = p == n;
            int pr = find(s, s->gid[p]);
            for (int c = 0; c < nc && !pin; c++) pin = pr == cand[c];
            if (pin) continue;
            vf_row_class w = where;
            if (nd->kind == VF_NODE_OP && vf_op_get(nd->op)->row == VF_ROW_CENTER_LABELS)
                w = vf_op_input_is_index(nd->op, k) ? VF_ROW_DROPPED : VF_ROW_WIDE;
            uint32_t rs, cs;
            if (!vf_row_input_index_shape(&g->nodes[p].shape, row, w, &rs, &cs)) return false;
        }
    }
    return true;
}

/* The group node n (fusible elementwise, or a center) joins; -1: a new one. */
static int choose(pstate *s, int n, int epoch)
{
    const vf_graph *g = s->g;
    const vf_node *nd = &g->nodes[n];
    int cand[3 * 4];
    int nc = 0;
    int rx = row_center(g, nd) ? row_input(g, nd) : -1;
    /* the row shape of the group n would end up in, if a row group */
    const vf_shape *row = rx >= 0 ? &g->nodes[nd->in[rx]].shape : NULL;
    int special = -1;   /* the one row / matmul / conv candidate */
    for (int k = 0; k < nd->n_in; k++) {
        int p = nd->in[k];
        int r = find(s, s->gid[p]);
        wgroup *w = &s->w[r];
        if (!w->open || w->epoch != epoch) continue;
        bool ok;
        if (rx < 0 && vf_fusible_elementwise(nd) && splat_for(s, r, n)) {
            ok = true;
        } else if (w->kind == VF_GROUP_ELEMENTWISE_DAG) {
            ok = vf_shape_equal(&w->shape, &nd->shape) && vf_fusible_elementwise(nd);
            /* a row op's prologue: elementwise producers of the row input */
            if (rx >= 0) ok = k == rx && vf_shape_equal(&w->shape, &g->nodes[p].shape);
            if (epilogue_of(nd) != VF_EPILOGUE_NONE) ok = false;   /* operands are read at many indices */
        } else if (w->kind == VF_GROUP_ROW_EPILOGUE) {
            /* elementwise members over the same rows, or another row op of a
               row-wide member */
            if (rx >= 0) ok = k == rx && vf_shape_equal(&w->shape, row);
            else ok = vf_fusible_elementwise(nd) && row_member_ok(g, nd, p, &w->shape);
            if (ok && special >= 0 && !(s->w[special].kind == VF_GROUP_ROW_EPILOGUE &&
                                        vf_shape_equal(&s->w[special].shape, &w->shape)))
                ok = false;
            if (ok && !row) row = &w->shape;
        } else {
            /* a matmul or conv epilogue: elementwise consumer of its output shape */
            ok = vf_fusible_elementwise(nd) && vf_shape_equal(&w->shape, &nd->shape) && special < 0 && !row;
        }
        if (!ok) continue;
        if (w->kind != VF_GROUP_ELEMENTWISE_DAG && special < 0) special = r;
        bool dup = false;
        for (int c = 0; c < nc; c++) dup |= cand[c] == r;
        if (!dup && nc < (int)(sizeof cand / sizeof cand[0])) cand[nc++] = r;
    }
    /* a group with a window member stays elementwise */
    if (row || special >= 0)
        for (int c = 0; c < nc; c++)
            if (s->w[cand[c]].window) {
                memmove(&cand[c], &cand[c + 1], sizeof cand[0] * (size_t)(nc - c - 1));
                nc--, c--;
            }
    /* an elementwise group merged into a row group must be over its rows */
    if (row)
        for (int c = 0; c < nc; c++)
            if (s->w[cand[c]].kind == VF_GROUP_ELEMENTWISE_DAG && !(rx < 0 && splat_for(s, cand[c], n)) &&
                vf_row_classify_shape(&s->w[cand[c]].shape, row) == VF_ROW_NONE) {
                memmove(&cand[c], &cand[c + 1], sizeof cand[0] * (size_t)(nc - c - 1));
                nc--, c--;
            }
    int max_nodes = s->opt->max_nodes > 0 ? s->opt->max_nodes : DEFAULT_MAX_NODES;
    /* Drop candidates from the end until the merged group fits. */
    for (;;) {
        if (nc == 0) break;
        const vf_shape *rs = NULL;
        if (rx >= 0) rs = &g->nodes[nd->in[rx]].shape;
        for (int c = 0; c < nc && !rs; c++)
            if (s->w[cand[c]].kind == VF_GROUP_ROW_EPILOGUE) rs = &s->w[cand[c]].shape;
        if (members_of(s, cand, nc) <= max_nodes && count_tensors(s, cand, nc, n) <= VF_GROUP_MAX_TENSORS &&
            (!rs || row_inputs_ok(s, cand, nc, n, rs)))
            break;
        nc--;
    }
    if (nc == 0) return -1;
    /* Merge into the center group if there is one, else the first. */
    int root = cand[0];
    for (int c = 0; c < nc; c++)
        if (s->w[cand[c]].kind != VF_GROUP_ELEMENTWISE_DAG) root = cand[c];
    for (int c = 0; c < nc; c++) {
        if (cand[c] == root) continue;
        s->w[root].n_members += s->w[cand[c]].n_members;
        s->w[root].window = s->w[root].window || s->w[cand[c]].window;
        s->w[cand[c]].parent = root;
    }
    /* the root may be a splat of another shape: the group has n's (a row
       prologue gets its row shape from the caller) */
    if (s->w[root].kind == VF_GROUP_ELEMENTWISE_DAG && rx < 0) s->w[root].shape = nd->shape;
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
    s.w = vf_calloc(cnt, sizeof *s.w);
    s.gid = vf_calloc(cnt, sizeof *s.gid);
    s.is_out = vf_calloc(cnt, sizeof *s.is_out);
    s.mark = vf_calloc(cnt, sizeof *s.mark);
    s.readers = vf_calloc(cnt, sizeof *s.readers);
    vf_status st = VF_OK;
    if (!s.w || !s.gid || !s.is_out || !s.mark || !s.readers) {
        st = vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "partition: out of host memory (malloc failed; %d nodes)", n);
        goto done;
    }
    for (int i = 0; i < g->n_outputs; i++)
        if (g->outputs[i] >= 0 && g->outputs[i] < n) s.is_out[g->outputs[i]] = true;
    for (int v = 0; v < n; v++) {   /* distinct readers (checked against SSA order below) */
        const vf_node *nd = &g->nodes[v];
        for (int k = 0; k < nd->n_in; k++) {
            bool first = nd->in[k] >= 0 && nd->in[k] < n;
            for (int q = 0; q < k && first; q++) first = nd->in[q] != nd->in[k];
            if (first) s.readers[nd->in[k]]++;
        }
    }

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
        if (opt->enabled && !(opt->view && opt->view[v])) {
            bool ew = vf_fusible_elementwise(nd);
            bool row = !ew && opt->fuse_rows && row_center(g, nd);
            bool mm = !ew && opt->fuse_matmul && epilogue_of(nd) == VF_EPILOGUE_MATMUL;
            bool cv = !ew && opt->fuse_conv && epilogue_of(nd) == VF_EPILOGUE_CONV;
            if (window_reader(nd)) { /* starts a group that its consumers may join */
                grp = new_group(&s, VF_GROUP_ELEMENTWISE_DAG, epoch, &nd->shape);
                s.w[grp].n_members = 0;
                s.w[grp].window = true;
                ew = true;
            } else if (ew || row) {
                grp = choose(&s, v, epoch);
            }
            if (grp >= 0) {
                s.w[grp].n_members++;
                if (row && s.w[grp].kind != VF_GROUP_ROW_EPILOGUE) {   /* a prologue becomes a row group */
                    s.w[grp].kind = VF_GROUP_ROW_EPILOGUE;
                    s.w[grp].center = v;
                    s.w[grp].shape = g->nodes[nd->in[row_input(g, nd)]].shape;
                }
            } else if (ew || row || mm || cv) {
                vf_group_kind kind = ew ? VF_GROUP_ELEMENTWISE_DAG : row ? VF_GROUP_ROW_EPILOGUE
                                   : mm ? VF_GROUP_MATMUL_EPILOGUE : VF_GROUP_CONV_EPILOGUE;
                grp = new_group(&s, kind, epoch, row ? &g->nodes[nd->in[row_input(g, nd)]].shape : &nd->shape);
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
    free(s.readers);
    if (st) vf_partition_free(out);
    return st;
}

/* ---- the result --------------------------------------------------------- */

static vf_status build(pstate *s, vf_partition_t *out, vf_err *err)
{
    const vf_graph *g = s->g;
    int n = g->n;
    size_t cnt = (size_t)(n > 0 ? n : 1);
    int *last = vf_malloc(cnt * sizeof *last);    /* working root -> last member */
    int *index = vf_malloc(cnt * sizeof *index);  /* working root -> output group */
    out->group_of = vf_malloc(cnt * sizeof *out->group_of);
    out->groups = vf_calloc(cnt, sizeof *out->groups);
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
        grp->nodes = vf_malloc((size_t)grp->n_nodes * sizeof *grp->nodes);
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
        grp->inputs = vf_malloc((size_t)(cap_in > 0 ? cap_in : 1) * sizeof *grp->inputs);
        grp->outputs = vf_malloc((size_t)grp->n_nodes * sizeof *grp->outputs);
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
    st = vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "partition: out of host memory (malloc failed; %d nodes)", n);
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
