/* The pass pipeline and helpers shared by the passes. */
#include "graph/passes.h"
#include "util/fault.h"
#include "util/dtype.h"

#include <stdio.h>
#include <stdlib.h>

/* The pipeline in order; a NULL run is folding, the one pass that needs
   something from its caller (the evaluator). */
static const struct {
    const char *name;
    int (*run)(vf_graph *g, vf_err *err);
} passes[] = {
    {"cond_to_select", vf_pass_cond_to_select},
    {"simplify", vf_pass_simplify},
    {"fold", NULL},
    {"splat", vf_pass_splat},
    {"cse", vf_pass_cse},
    {"dce", vf_pass_dce},
};
#define N_PASSES ((int)(sizeof passes / sizeof *passes))

static void dump(const vf_graph *g, const char *dir, const char *name, int step, const char *what)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.%02d-%s.txt", dir, name, step, what);
    bool ok = vf_graph_dump_text(g, name, path);
    snprintf(path, sizeof path, "%s/%s.%02d-%s.dot", dir, name, step, what);
    ok = vf_graph_dump_dot(g, name, path) && ok;
    if (!ok) fprintf(stderr, "vkfuse: warning: VKFUSE_DUMP: could not write %s\n", path);
}

int vf_optimize(vf_graph *g, const vf_evaluator *ev, const char *dump_dir, const char *name, vf_err *err)
{
    int total = 0, step = 0;
    if (dump_dir) dump(g, dump_dir, name, step++, "traced");
    for (int round = 0; round < 4; round++) {
        int changed = 0;
        for (int p = 0; p < N_PASSES; p++) {
            int c = passes[p].run ? passes[p].run(g, err) : vf_pass_fold(g, ev, err);
            if (c < 0) return -1;
            changed += c;
            if (dump_dir) dump(g, dump_dir, name, step++, passes[p].name);
        }
        total += changed;
        if (!changed) break;
    }
    int c = vf_pass_fills(g, err);
    if (c < 0) return -1;
    if (dump_dir) dump(g, dump_dir, name, step++, "fills");
    return total + c;
}

bool vf_node_is_const(const vf_graph *g, int id)
{
    const vf_node *n = &g->nodes[id];
    return (n->kind == VF_NODE_CONST && n->data) || (n->kind == VF_NODE_OP && vf_op_is_literal(n->op));
}

bool vf_node_is_splat(const vf_graph *g, int id, double v)
{
    const vf_node *n = &g->nodes[id];
    if (n->kind == VF_NODE_OP && vf_op_is_literal(n->op)) {
        /* the value as stored: a fill of 1.0000001 into f16 is 1 */
        unsigned char tmp[8];
        vf_store_f64(tmp, n->dtype, 0, n->attrs.value);
        return vf_load_f64(tmp, n->dtype, 0) == v;
    }
    if (n->kind != VF_NODE_CONST || !n->data) return false;
    int64_t numel = vf_shape_numel(&n->shape);
    for (int64_t i = 0; i < numel; i++)
        if (vf_load_f64(n->data, n->dtype, i) != v) return false;
    return numel > 0;
}

int *vf_repl_new(const vf_graph *g)
{
    int *r = vf_malloc((size_t)(g->n ? g->n : 1) * sizeof *r);
    if (r)
        for (int i = 0; i < g->n; i++) r[i] = i;
    return r;
}
