/* Dead-code elimination. */
#include "graph/passes.h"
#include "util/fault.h"

#include <stdlib.h>

int vf_pass_dce(vf_graph *g, vf_err *err)
{
    int removed = 0;
    for (int i = 0; i < g->n; i++)
        for (int k = 0; k < 2; k++)
            if (g->nodes[i].sub[k]) {
                int r = vf_pass_dce(g->nodes[i].sub[k], err);
                if (r < 0) return -1;
                removed += r;
            }
    bool *live = vf_calloc((size_t)(g->n ? g->n : 1), sizeof *live);
    if (!live) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "dce: out of host memory (malloc failed)");
        return -1;
    }
    for (int j = 0; j < g->n_outputs; j++) live[g->outputs[j]] = true;
    for (int i = 0; i < g->n; i++)
        if (vf_node_has_effect(&g->nodes[i]) || g->nodes[i].kind == VF_NODE_PARAM) live[i] = true;
    /* SSA order: a node's inputs come before it, so one backward sweep does */
    for (int i = g->n - 1; i >= 0; i--)
        if (live[i])
            for (int j = 0; j < g->nodes[i].n_in; j++) live[g->nodes[i].in[j]] = true;
    int dead = 0;
    for (int i = 0; i < g->n; i++) {
        live[i] = !live[i]; /* now: dead */
        dead += live[i];
    }
    bool ok = dead == 0 || vf_graph_remove(g, live);
    free(live);
    if (!ok) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "dce: out of host memory (malloc failed)");
        return -1;
    }
    return removed + dead;
}
