/* Splitting a plan at its HOST nodes (segment.h: the model). */
#include "plan/segment.h"
#include "util/fault.h"

#include <stdlib.h>

bool vf_graph_has_host(const vf_graph *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].kind == VF_NODE_HOST) return true;
    return false;
}

void vf_segs_free(vf_segs *s)
{
    free(s->seg);
    free(s->hosts);
    *s = (vf_segs){0};
}

static bool is_var(const vf_node *n, const vf_plan_value *params, const vf_plan_value *caps)
{
    if (n->kind == VF_NODE_PARAM) return params[n->index].var;
    if (n->kind == VF_NODE_CAPTURE) return caps[n->index].var;
    return false;
}

static int max2(int a, int b) { return a > b ? a : b; }

bool vf_segs_plan(const vf_graph *g, const vf_plan_value *params, const vf_plan_value *caps, vf_segs *out)
{
    *out = (vf_segs){0};
    int n = g->n;
    bool *leaf = vf_calloc((size_t)n + 1, sizeof *leaf), *need = vf_calloc((size_t)n + 1, sizeof *need);
    bool *hostish = vf_calloc((size_t)n + 1, sizeof *hostish); /* a HOST node or a view of one */
    int *ph = vf_calloc((size_t)n + 1, sizeof *ph);
    out->seg = vf_calloc((size_t)n + 1, sizeof *out->seg);
    out->hosts = vf_calloc((size_t)n + 1, sizeof *out->hosts);
    bool ok = leaf && need && hostish && ph && out->seg && out->hosts;
    /* Phases, in program order. maxph: the latest phase an earlier node
       ends (a host node's results: its phase + 1); lastfx: the phase of
       the last effect; lasthost: of the last host node. */
    int maxph = 0, lastfx = 0, lasthost = 0, nph = 1;
    for (int i = 0; ok && i < n; i++) {
        const vf_node *nd = &g->nodes[i];
        if (nd->kind == VF_NODE_PARAM || nd->kind == VF_NODE_CAPTURE || nd->kind == VF_NODE_CONST ||
            (nd->kind == VF_NODE_RESHAPE && leaf[nd->in[0]] && !is_var(&g->nodes[nd->in[0]], params, caps))) {
            leaf[i] = true;
            continue;
        }
        if (nd->kind == VF_NODE_RESHAPE && hostish[nd->in[0]]) { /* a view of the host step's slot */
            hostish[i] = true;
            ph[i] = ph[nd->in[0]];
            continue;
        }
        int p = 0;
        for (int j = 0; j < nd->n_in; j++) {
            int x = nd->in[j];
            if (!leaf[x]) p = max2(p, hostish[x] ? ph[x] + 1 : ph[x]);
        }
        if (nd->kind == VF_NODE_HOST) { /* as early as its input allows, after earlier effects and hosts */
            hostish[i] = true;
            p = max2(p, max2(lasthost, lastfx));
            ph[i] = lasthost = p;
            maxph = max2(maxph, p + 1);
            continue;
        }
        p = max2(p, lastfx);
        if (vf_node_has_effect(nd)) p = lastfx = max2(p, maxph);
        ph[i] = p;
        maxph = max2(maxph, p);
        nph = max2(nph, p + 1);
    }
    /* A node of no inputs (a FILL: a splat its reader's kernel fuses) runs
       with its first reader, not as early as possible. */
    int *first = ok ? vf_malloc(sizeof *first * ((size_t)n + 1)) : NULL;
    ok = ok && first;
    for (int i = 0; ok && i < n; i++) first[i] = -1;
    for (int j = 0; ok && j < n; j++) {
        const vf_node *nd = &g->nodes[j];
        if (leaf[j]) continue;
        for (int k = 0; k < nd->n_in; k++) {
            int x = nd->in[k];
            if (!leaf[x] && (first[x] < 0 || ph[j] < first[x])) first[x] = ph[j];
        }
    }
    for (int i = 0; ok && i < n; i++) {
        const vf_node *nd = &g->nodes[i];
        if (!leaf[i] && nd->kind == VF_NODE_OP && nd->n_in == 0 && !vf_node_has_effect(nd) && first[i] > ph[i])
            ph[i] = first[i];
    }
    free(first);
    /* Per phase: whether host nodes follow it, whether it holds an effect
       (then it is not split: its order is the program's). */
    bool *hosts_at = ok ? vf_calloc((size_t)nph + 1, sizeof *hosts_at) : NULL;
    bool *fx = ok ? vf_calloc((size_t)nph + 1, sizeof *fx) : NULL;
    int *segid = ok ? vf_malloc(sizeof *segid * (size_t)(2 * nph + 2)) : NULL;
    ok = ok && hosts_at && fx && segid;
    for (int i = 0; ok && i < n; i++) {
        const vf_node *nd = &g->nodes[i];
        if (leaf[i] || (hostish[i] && nd->kind != VF_NODE_HOST)) continue;
        if (nd->kind == VF_NODE_HOST) {
            if (ph[i] < nph) hosts_at[ph[i]] = true;
            if (!leaf[nd->in[0]]) need[nd->in[0]] = true;
        } else if (vf_node_has_effect(nd)) {
            fx[ph[i]] = true;
        }
    }
    /* What the host nodes of a phase depend on in that phase: its first
       segment; the rest of the phase its second. */
    for (int i = n - 1; ok && i >= 0; i--) {
        const vf_node *nd = &g->nodes[i];
        if (!need[i] || leaf[i] || hostish[i]) continue;
        for (int j = 0; j < nd->n_in; j++) {
            int x = nd->in[j];
            if (!leaf[x] && !hostish[x] && ph[x] == ph[i]) need[x] = true;
        }
    }
    /* Segment ids: (phase, part) pairs that hold a node, in run order. */
    for (int k = 0; ok && k < 2 * nph; k++) segid[k] = -1;
    for (int i = 0; ok && i < n; i++) {
        if (leaf[i] || hostish[i]) continue;
        int p = ph[i], sub = hosts_at[p] && !fx[p] && !need[i] ? 1 : 0;
        segid[2 * p + sub] = 0;
    }
    int ns = 0;
    for (int k = 0; ok && k < 2 * nph; k++)
        if (segid[k] == 0) segid[k] = ns++;
    for (int i = 0; ok && i < n; i++) {
        const vf_node *nd = &g->nodes[i];
        if (leaf[i]) {
            out->seg[i] = VF_SEG_ANY;
        } else if (hostish[i] && nd->kind != VF_NODE_HOST) {
            out->seg[i] = VF_SEG_HOST; /* resolved with its host step (plan_split.c) */
        } else if (nd->kind == VF_NODE_HOST) {
            out->seg[i] = VF_SEG_HOST;
            int after = -1; /* the last segment of phases up to its own */
            for (int k = 0; k < 2 * (ph[i] + 1) && k < 2 * nph; k++)
                if (segid[k] >= 0) after = segid[k];
            out->hosts[out->n_hosts++] = (vf_seg_host){.node = i, .after = after};
        } else if (nd->kind == VF_NODE_PROJ) { /* with its tuple's node */
            out->seg[i] = out->seg[nd->in[0]];
        } else {
            int p = ph[i], sub = hosts_at[p] && !fx[p] && !need[i] ? 1 : 0;
            out->seg[i] = segid[2 * p + sub];
        }
    }
    out->n_segs = ns;
    free(leaf);
    free(need);
    free(hostish);
    free(ph);
    free(hosts_at);
    free(fx);
    free(segid);
    if (!ok) vf_segs_free(out);
    return ok;
}
