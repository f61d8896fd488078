/* Constants made in a traced body as splats: a FILL (a shape and one
 * value, no data input) costs nothing when it is a value of the kernel
 * that reads it, and a kernel per call when it is a value of its own.
 *
 * vf_pass_splat runs with the other passes until nothing changes: a CONST
 * whose elements are all one value (what folding makes of ops computed
 * only from fills) becomes a FILL, as does a reshape or transpose of a
 * FILL, so the rest of the pipeline sees one kind of constant.
 *
 * vf_pass_fills runs once after them (CSE would merge its copies again):
 * every elementwise reader of a FILL gets a FILL of its own, placed right
 * before it, which the partition (plan/partition.c) lets join the reader's
 * fusion group and codegen pushes as a constant. The other uses (graph
 * outputs, reductions, matmuls, control flow, assigns, prints, reshapes)
 * read one materialised value: the FILL when it is an output or large, a
 * CONST when it is small (made once per concrete function and kept, like
 * any constant). */
#include "graph/passes.h"
#include "util/fault.h"
#include "util/dtype.h"

#include <stdlib.h>
#include <string.h>

static bool is_fill(const vf_node *n) { return n->kind == VF_NODE_OP && vf_op_is_literal(n->op); }

static void make_fill(vf_node *n, double value)
{
    free(n->in);
    free(n->data);
    n->in = NULL;
    n->n_in = 0;
    n->data = NULL;
    n->bytes = 0;
    n->kind = VF_NODE_OP;
    n->op = VF_OP_FILL;
    n->attrs = (vf_attrs){.value = value, .dtype = n->dtype};
}

/* Whether CONST n holds one value in every element, bit for bit, that a
   FILL stores back exactly (*v): NaN payloads and mixed -0 / +0 stay
   CONSTs. Only small ones (what folding makes): a large constant from the
   host read by a matmul is uploaded once, a FILL would run every call. */
static bool const_splat(const vf_node *n, double *v)
{
    if (n->kind != VF_NODE_CONST || !n->data || n->shape.sym) return false;
    int64_t numel = vf_shape_numel(&n->shape);
    size_t es = vf_dtype_size(n->dtype);
    if (numel <= 0 || numel > VF_FOLD_MAX_ELEMS || n->bytes != (size_t)numel * es) return false;
    const unsigned char *d = n->data;
    for (int64_t i = 1; i < numel; i++)
        if (memcmp(d, d + (size_t)i * es, es) != 0) return false;
    unsigned char back[8] = {0};
    *v = vf_load_f64(d, n->dtype, 0);
    vf_store_f64(back, n->dtype, 0, *v);
    return memcmp(back, d, es) == 0;
}

int vf_pass_splat(vf_graph *g, vf_err *err)
{
    int changed = 0;
    for (int i = 0; i < g->n; i++) {
        vf_node *n = &g->nodes[i];
        for (int k = 0; k < 2; k++)
            if (n->sub[k]) {
                int r = vf_pass_splat(n->sub[k], err);
                if (r < 0) return -1;
                changed += r;
            }
        double v;
        if (const_splat(n, &v)) {
            make_fill(n, v);
            changed++;
            continue;
        }
        /* same elements, another shape: a fill of that shape */
        bool moves = n->kind == VF_NODE_RESHAPE || (n->kind == VF_NODE_OP && (vf_op_get(n->op)->flags & VF_OPF_PERMUTE));
        if (moves && n->n_in == 1 && is_fill(&g->nodes[n->in[0]]) && !n->shape.sym) {
            make_fill(n, g->nodes[n->in[0]].attrs.value);
            changed++;
        }
    }
    return changed;
}

/* Whether node n reads its inputs where a fusion group can hold them as
   values of its kernel: an elementwise op. */
static bool splat_reader(const vf_node *n)
{
    return n->kind == VF_NODE_OP && vf_op_get(n->op)->kind == VF_KIND_ELEMENTWISE;
}

/* FILL n as a CONST of its value (n small). false: out of memory. */
static bool materialise(vf_node *n)
{
    size_t es = vf_dtype_size(n->dtype), numel = (size_t)vf_shape_numel(&n->shape);
    unsigned char *d = vf_malloc(numel * es);
    if (!d) return false;
    vf_store_f64(d, n->dtype, 0, n->attrs.value);
    for (size_t i = 1; i < numel; i++) memcpy(d + i * es, d, es);
    n->kind = VF_NODE_CONST;
    n->data = d;
    n->bytes = numel * es;
    n->attrs = (vf_attrs){0};
    return true;
}

static int fills_fail(vf_err *err)
{
    vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "fills: out of host memory (malloc failed)");
    return -1;
}

int vf_pass_fills(vf_graph *g, vf_err *err)
{
    int changed = 0;
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < 2; k++)
            if (g->nodes[i].sub[k]) {
                int r = vf_pass_fills(g->nodes[i].sub[k], err);
                if (r < 0) return -1;
                changed += r;
            }
    int n = g->n, copies = 0;
    size_t cnt = (size_t)(n ? n : 1);
    bool *kept = vf_calloc(cnt, sizeof *kept);   /* a FILL with uses other than splat readers */
    bool *out = vf_calloc(cnt, sizeof *out);     /* a graph output */
    bool *own = vf_calloc(cnt, sizeof *own);     /* a FILL read by one splat reader, right after it: left as is */
    int *readers = vf_calloc(cnt, sizeof *readers), *map = vf_malloc(cnt * sizeof *map);
    if (!kept || !out || !own || !readers || !map) {
        free(kept), free(out), free(own), free(readers), free(map);
        return fills_fail(err);
    }
    for (int i = 0; i < n; i++) {
        const vf_node *nd = &g->nodes[i];
        for (int j = 0; j < nd->n_in; j++) {
            int p = nd->in[j];
            bool first = true;   /* one copy per reader, however many inputs it reads it as */
            for (int q = 0; q < j; q++) first = first && nd->in[q] != p;
            if (!is_fill(&g->nodes[p]) || !first) continue;
            readers[p]++;
            if (!splat_reader(nd)) kept[p] = true;
        }
    }
    /* An output stays a FILL: a plan writes it into the output with one
       kernel, where an output that is a CONST makes the whole graph run
       node by node (plan/plan.c). Its other readers read it there. */
    for (int j = 0; j < g->n_outputs; j++) kept[g->outputs[j]] = out[g->outputs[j]] = true;
    /* A FILL whose one reader is a splat reader with only FILLs between
       them (what this pass makes) keeps its place: the pass is idempotent. */
    for (int i = 0, r = 0; i < n; i++) {
        if (!is_fill(&g->nodes[i]) || kept[i] || readers[i] != 1) continue;
        if (r <= i)
            for (r = i + 1; r < n && is_fill(&g->nodes[r]);) r++;
        for (int j = 0; r < n && splat_reader(&g->nodes[r]) && j < g->nodes[r].n_in; j++) own[i] |= g->nodes[r].in[j] == i;
    }
    for (int i = 0; i < n; i++) {
        const vf_node *nd = &g->nodes[i];
        for (int j = 0; splat_reader(nd) && j < nd->n_in; j++) {
            int p = nd->in[j];
            bool first = true;
            for (int q = 0; q < j; q++) first = first && nd->in[q] != p;
            if (first && is_fill(&g->nodes[p]) && !own[p]) copies++;
        }
    }
    /* Nothing to do: every FILL read by a splat reader is its own, and none is small and kept. */
    bool work = copies > 0;
    for (int i = 0; i < n && !work; i++) work = kept[i] && !out[i] && is_fill(&g->nodes[i]) && vf_node_kept_fill(&g->nodes[i]);
    if (!work) {
        free(kept), free(out), free(own), free(readers), free(map);
        return changed;
    }
    vf_node *nodes = vf_calloc((size_t)(n + copies) + 1, sizeof *nodes);
    if (!nodes) {
        free(kept), free(out), free(own), free(readers), free(map);
        return fills_fail(err);
    }
    int m = 0;
    bool ok = true;
    for (int i = 0; i < n; i++) {
        vf_node *nd = &g->nodes[i];
        if (is_fill(nd) && readers[i] > 0 && !kept[i] && !own[i]) {   /* every reader has its own copy */
            free(nd->in);   /* a FILL owns nothing else */
            map[i] = -1;
            continue;
        }
        if (splat_reader(nd))
            for (int j = 0; j < nd->n_in; j++) {
                int p = nd->in[j];   /* p < 0: a copy made for an earlier input */
                if (p < 0 || !is_fill(&g->nodes[p]) || own[p]) continue;
                int copy = m++;
                nodes[copy] = (vf_node){.kind = VF_NODE_OP, .op = VF_OP_FILL, .attrs = g->nodes[p].attrs,
                                        .dtype = g->nodes[p].dtype, .shape = g->nodes[p].shape};
                for (int q = j; q < nd->n_in; q++)
                    if (nd->in[q] == p) nd->in[q] = -2 - copy;   /* marked: already the new id */
                changed++;
            }
        for (int j = 0; j < nd->n_in; j++) nd->in[j] = nd->in[j] <= -2 ? -2 - nd->in[j] : map[nd->in[j]];
        map[i] = m;
        nodes[m] = *nd;   /* g->nodes[i] stays a FILL for the copies of later readers */
        if (is_fill(nd) && kept[i] && !out[i] && vf_node_kept_fill(nd)) {
            ok = ok && materialise(&nodes[m]);
            changed++;
        }
        m++;
    }
    for (int j = 0; j < g->n_outputs; j++) g->outputs[j] = map[g->outputs[j]];
    free(g->nodes);
    g->nodes = nodes;
    g->n = g->cap = m;
    free(kept), free(out), free(own), free(readers), free(map);
    return ok ? changed : fills_fail(err);
}
