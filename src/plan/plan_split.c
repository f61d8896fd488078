/* Plans split at HOST nodes (plan/segment.h says where): one plan per
 * segment, built by plan.c like any plan but over its own nodes, and the
 * host steps between them.
 *
 * Memory across segments: a value one segment makes and a later one, a
 * host step or the caller reads is an output of its segment, so it lives
 * in a slot of its own (made per call, never aliased); each segment's
 * arena holds only what lives and dies inside it. A host step reads its
 * input's slot where it is (mapped, function/run_plan.c) and writes its
 * result into a slot of its own, or into the input's slot when nothing
 * else reads that value (in place: no copy at all). */
#include "plan/plan_build.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdlib.h>
#include <string.h>

void vf_pb_split_free(const vf_backend_t *be, vf_fsplit *sp)
{
    if (!sp) return;
    for (int s = 0; s < sp->n_segs; s++) {
        vf_fplan_free(be, sp->segs[s]);
        if (sp->imp_slot) free(sp->imp_slot[s]);
        if (sp->imp_view) free(sp->imp_view[s]);
    }
    free(sp->segs);
    free(sp->slot0);
    free(sp->n_imp);
    free(sp->imp_slot);
    free(sp->imp_view);
    free(sp->hosts);
    free(sp);
}

/* What the split build knows of a value made by a segment or host step. */
typedef struct sval {
    bool known;
    int slot;
    vf_shape view;
} sval;

typedef struct split_build {
    vf_fplan *fp;
    int cap_slots;
} split_build;

static int new_slot(split_build *sb, vf_dtype dt, const vf_shape *shape)
{
    vf_fplan *fp = sb->fp;
    int cap = sb->cap_slots;
    if (!vf_grow((void **)&fp->slot_dt, &cap, fp->n_slots + 1, sizeof *fp->slot_dt)) return -1;
    cap = sb->cap_slots;
    if (!vf_grow((void **)&fp->slot_shape, &cap, fp->n_slots + 1, sizeof *fp->slot_shape)) return -1;
    sb->cap_slots = cap;
    fp->slot_dt[fp->n_slots] = dt;
    fp->slot_shape[fp->n_slots] = *shape;
    return fp->n_slots++;
}

/* The host steps that run once segment `after` is submitted; false: not
   plannable (or out of memory: *oom). */
static bool add_hosts(split_build *sb, const vf_graph *g, const vf_segs *sg, int after, const int *uses, sval *val,
                      bool *oom)
{
    vf_fsplit *sp = sb->fp->split;
    for (int h = 0; h < sg->n_hosts; h++) {
        if (sg->hosts[h].after != after) continue;
        int id = sg->hosts[h].node, x = g->nodes[id].in[0];
        if (!val[x].known) return false;
        vf_fsplit_host *hs = &sp->hosts[sp->n_hosts++];
        *hs = (vf_fsplit_host){.node = &g->nodes[id], .after = after, .in_slot = val[x].slot, .shape = val[x].view};
        /* in place when the host step is the only reader of a kernel's result */
        bool in_place = uses[x] == 1 && g->nodes[x].kind == VF_NODE_OP;
        hs->out_slot = in_place ? hs->in_slot : new_slot(sb, g->nodes[id].dtype, &hs->shape);
        if (hs->out_slot < 0) return !(*oom = true);
        val[id] = (sval){.known = true, .slot = hs->out_slot, .view = hs->shape};
        /* reshapes of its result: views of its slot */
        for (int y = id + 1; y < g->n; y++) {
            const vf_node *ny = &g->nodes[y];
            if (ny->kind != VF_NODE_RESHAPE || sg->seg[y] != VF_SEG_HOST || !val[ny->in[0]].known || val[y].known) continue;
            vf_dtype dt = ny->dtype;
            vf_shape os;
            vf_err err = {0};
            if (vf_infer(ny, &dt, &val[ny->in[0]].view, &dt, &os, &err) != VF_OK) return false;
            val[y] = (sval){.known = true, .slot = val[ny->in[0]].slot, .view = os};
        }
    }
    return true;
}

vf_status vf_pb_build_split(const vf_plan_env *env, const vf_graph *g, const vf_plan_value *params, vf_fplan **out)
{
    *out = NULL;
    int n = g->n;
    vf_segs sg;
    if (!vf_segs_plan(g, params, env->caps, &sg))
        return vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    int S = sg.n_segs;
    bool *exp = vf_calloc((size_t)n + 1, sizeof *exp);
    int *uses = vf_calloc((size_t)n + 1, sizeof *uses), *imp = vf_malloc(sizeof *imp * ((size_t)S * n + 1));
    int *list = vf_malloc(sizeof *list * ((size_t)n + 1));
    sval *val = vf_calloc((size_t)n + 1, sizeof *val);
    vf_plan_value *ipv = vf_calloc((size_t)n + 1, sizeof *ipv);
    vf_fplan *fp = vf_calloc(1, sizeof *fp);
    vf_fsplit *sp = fp ? (fp->split = vf_calloc(1, sizeof *sp)) : NULL;
    bool ok = exp && uses && imp && list && val && ipv && fp && sp, oom = !ok;
    if (ok) {
        fp->n_params = g->n_params;
        fp->n_outs = g->n_outputs;
        fp->pshape = vf_calloc((size_t)g->n_params + 1, sizeof *fp->pshape);
        fp->out_slot = vf_calloc((size_t)g->n_outputs + 1, sizeof *fp->out_slot);
        fp->out_view = vf_calloc((size_t)g->n_outputs + 1, sizeof *fp->out_view);
        sp->segs = vf_calloc((size_t)S + 1, sizeof *sp->segs);
        sp->slot0 = vf_calloc((size_t)S + 1, sizeof *sp->slot0);
        sp->n_imp = vf_calloc((size_t)S + 1, sizeof *sp->n_imp);
        sp->imp_slot = vf_calloc((size_t)S + 1, sizeof *sp->imp_slot);
        sp->imp_view = vf_calloc((size_t)S + 1, sizeof *sp->imp_view);
        sp->hosts = vf_calloc((size_t)sg.n_hosts + 1, sizeof *sp->hosts);
        ok = !(oom = !fp->pshape || !fp->out_slot || !fp->out_view || !sp->segs || !sp->slot0 || !sp->n_imp ||
                     !sp->imp_slot || !sp->imp_view || !sp->hosts);
    }
    if (ok) sp->n_segs = S;
    for (int i = 0; ok && i < g->n_params; i++) fp->pshape[i] = vf_tref_shape(&params[i].ref);
    for (int k = 0; ok && k < S * n; k++) imp[k] = -1;
    /* Who reads what across segments: imports, exports, host inputs. */
    for (int j = 0; ok && j < n; j++) {
        const vf_node *nd = &g->nodes[j];
        if (sg.seg[j] == VF_SEG_ANY) continue; /* a leaf reads leaves */
        for (int k = 0; k < nd->n_in; k++) {
            int x = nd->in[k];
            uses[x]++;
            bool from_host = sg.seg[x] == VF_SEG_HOST;
            if (sg.seg[x] == VF_SEG_ANY) {
                ok = nd->kind != VF_NODE_HOST; /* a host step reads a kernel's result (a slot) */
            } else if (nd->kind == VF_NODE_HOST) {
                if (!from_host) exp[x] = true;
            } else if (sg.seg[x] != sg.seg[j]) {
                int *at = &imp[(size_t)sg.seg[j] * n + x];
                if (*at < 0) *at = sp->n_imp[sg.seg[j]]++;
                if (!from_host) exp[x] = true;
            }
        }
    }
    for (int k = 0; ok && k < g->n_outputs; k++) {
        int o = g->outputs[k];
        uses[o]++;
        ok = sg.seg[o] != VF_SEG_ANY; /* a param, capture or constant out: node by node, as unsplit plans */
        if (sg.seg[o] >= 0) exp[o] = true;
    }
    split_build sb = {.fp = fp};
    vf_status st = VF_OK;
    ok = ok && add_hosts(&sb, g, &sg, -1, uses, val, &oom);
    for (int s = 0; ok && s < S; s++) {
        int no = 0, ni = sp->n_imp[s];
        for (int x = 0; x < n; x++)
            if (exp[x] && sg.seg[x] == s) list[no++] = x;
        sp->imp_slot[s] = vf_calloc((size_t)ni + 1, sizeof **sp->imp_slot);
        sp->imp_view[s] = vf_calloc((size_t)ni + 1, sizeof **sp->imp_view);
        if (!sp->imp_slot[s] || !sp->imp_view[s]) {
            ok = !(oom = true);
            break;
        }
        for (int x = 0; ok && x < n; x++) {
            int k = imp[(size_t)s * n + x];
            if (k < 0) continue;
            ok = val[x].known;
            if (!ok) break;
            sp->imp_slot[s][k] = val[x].slot;
            sp->imp_view[s][k] = val[x].view;
            ipv[k] = (vf_plan_value){.ref = {.dtype = fp->slot_dt[val[x].slot], .rank = val[x].view.rank}};
            memcpy(ipv[k].ref.shape, val[x].view.dim, sizeof ipv[k].ref.shape);
        }
        vf_pb_seg ps = {.node_seg = sg.seg, .s = s, .import_of = imp + (size_t)s * n, .imports = ipv,
                        .n_imports = ni, .outs = list, .n_outs = no};
        if (ok) st = vf_pb_build(env, g, params, &ps, &sp->segs[s]);
        vf_fplan *seg = sp->segs[s];
        ok = ok && st == VF_OK && seg;
        if (!ok) break;
        sp->slot0[s] = fp->n_slots;
        for (int k = 0; ok && k < seg->n_slots; k++) ok = !(oom = new_slot(&sb, seg->slot_dt[k], &seg->slot_shape[k]) < 0);
        for (int e = 0; ok && e < no; e++)
            val[list[e]] = (sval){.known = true, .slot = sp->slot0[s] + seg->out_slot[e], .view = seg->out_view[e]};
        vf_fplan_stats *a = &fp->st, *b = &seg->st;
        a->kernels += b->kernels, a->dispatches += b->dispatches, a->arena_bytes += b->arena_bytes;
        a->output_bytes += b->output_bytes, a->intermediate_bytes += b->intermediate_bytes;
        a->arena_lower_bound += b->arena_lower_bound;
        ok = ok && add_hosts(&sb, g, &sg, s, uses, val, &oom);
    }
    for (int k = 0; ok && k < g->n_outputs; k++) {
        const sval *o = &val[g->outputs[k]];
        ok = o->known;
        fp->out_slot[k] = o->slot;
        fp->out_view[k] = o->view;
    }
    if (oom && st == VF_OK)
        st = vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    free(exp), free(uses), free(imp), free(list), free(val), free(ipv);
    vf_segs_free(&sg);
    if (st != VF_OK || !ok) {
        vf_fplan_free(env->be, fp);
        return st;
    }
    *out = fp;
    return VF_OK;
}

vf_status vf_pb_run_split(const vf_plan_env *env, vf_fplan *fp, const vf_plan_value *params, const vf_tref *slots)
{
    const vf_fsplit *sp = fp->split;
    int np = fp->n_params, most = 0;
    for (int s = 0; s < sp->n_segs; s++)
        if (sp->n_imp[s] > most) most = sp->n_imp[s];
    vf_plan_value *pv = vf_calloc((size_t)(np + most) + 1, sizeof *pv);
    if (!pv) return vf_err_set(env->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': out of host memory (malloc failed)", env->name);
    if (np) memcpy(pv, params, sizeof *pv * (size_t)np);
    vf_status st = VF_OK;
    int h = 0;
    for (int s = -1; st == VF_OK && s < sp->n_segs; s++) {
        if (s >= 0) {
            for (int k = 0; k < sp->n_imp[s]; k++) {
                pv[np + k] = (vf_plan_value){.ref = slots[sp->imp_slot[s][k]]};
                pv[np + k].ref.rank = sp->imp_view[s][k].rank;
                memcpy(pv[np + k].ref.shape, sp->imp_view[s][k].dim, sizeof pv[np + k].ref.shape);
            }
            st = vf_fplan_run(env, sp->segs[s], pv, slots + sp->slot0[s]);
        }
        for (; st == VF_OK && h < sp->n_hosts && sp->hosts[h].after == s; h++) {
            const vf_fsplit_host *hs = &sp->hosts[h];
            vf_tref in = slots[hs->in_slot], o = slots[hs->out_slot];
            in.rank = o.rank = hs->shape.rank;
            memcpy(in.shape, hs->shape.dim, sizeof in.shape);
            memcpy(o.shape, hs->shape.dim, sizeof o.shape);
            st = env->host(env->user, hs->node, &in, &o);
        }
    }
    free(pv);
    return st;
}
