/* Assigns written in place: the kernel computing an assign's value writes
 * it straight into the variable's buffer, and the assign's copy kernel
 * goes (an optimizer's update, v = v - lr * g, is one kernel instead of a
 * kernel and a copy, and its value needs no arena bytes).
 *
 * The plan (plan.c) records an assign as a COPY of the value into the
 * variable at its place in program order; the copy writes a FIXED buffer,
 * so the dependency levels treat it as an effect (everything before it
 * runs first, everything after it after). Here, once the kernel order is
 * known and before the levels, a copy goes when moving its write onto the
 * value's kernel W changes nothing a program can see:
 *
 * - the value is an arena intermediate written by W alone (not guarded,
 *   not a view or viewed, not handed out, not a predicate) and has the
 *   variable's size;
 * - W's kernel reads the variable only element for element at the index
 *   it writes, no later than W (an elementwise kernel: v - lr * g), or not
 *   at all (a matmul whose result is assigned);
 * - no kernel between W's kernel and the copy reads or writes the
 *   variable (they would see the new value early);
 * - no kernel after the copy writes the variable while the value is still
 *   read (the value now lives in the variable's bytes).
 *
 * W then writes a FIXED buffer and becomes the effect in the copy's
 * place. Never under VKFUSE_CHECK or with fusion off (the baselines). */
#include "plan/plan_build.h"
#include "util/dtype.h"

#include <string.h>

/* Whether tensor j of exec e (at loc l) touches the variable's bytes
   [v->offset, v->offset + vbytes) in its buffer. */
static bool touches(const vf_plan_loc *l, const vf_tref *t, const vf_tref *v, size_t vbytes)
{
    if (l->kind != VF_PLAN_FIXED || t->buf != v->buf) return false;
    size_t a = t->offset, b = t->offset + vf_pb_bytes(t);
    return a < v->offset + vbytes && v->offset < b;
}

static bool reads_var(const builder *b, int e, const vf_tref *v, size_t vbytes)
{
    for (int j = 0; j < b->ex[e].n_in; j++)
        if (touches(&b->loc[e][j], &b->ex[e].in[j], v, vbytes)) return true;
    return false;
}

static bool writes_var(const builder *b, int e, const vf_tref *v, size_t vbytes)
{
    return touches(&b->loc[e][3], &b->ex[e].out, v, vbytes);
}

/* The kernel holding position p: [*k0, *k1) positions, its fused group
   (-1: a single exec). */
static int kernel_at(const fusion *fz, int p, int *k0, int *k1)
{
    for (int f = 0; f < fz->n_fused; f++)
        if (p >= fz->fused[f].first_exec && p < fz->fused[f].first_exec + fz->fused[f].n_execs) {
            *k0 = fz->fused[f].first_exec, *k1 = *k0 + fz->fused[f].n_execs;
            return f;
        }
    *k0 = p, *k1 = p + 1;
    return -1;
}

static bool is_pred(const builder *b, int id)
{
    for (int k = 0; k < b->n_preds; k++)
        if (b->preds[k].inter == id) return true;
    return false;
}

/* Whether the copy at position px (of value u into variable *v) can go;
   *pw: the position of u's writer. */
static bool can_elide(const builder *b, const fusion *fz, const int *ord, int n, int px, int *pw)
{
    int x = ord[px], u = b->ref_inter[x][0];
    const vf_tref *v = &b->ex[x].out;
    size_t vb = vf_pb_bytes(v);
    if (u < 0 || b->guard[x].pred >= 0) return false;
    const inter *it = &b->it[u];
    if (it->parent >= 0 || it->viewed || it->slot >= 0 || it->internal || it->fixed || it->bytes != vb || is_pred(b, u))
        return false;
    int w = -1;
    for (int p = 0; p < n; p++)
        if (b->ref_inter[ord[p]][3] == u) {
            if (w >= 0) return false; /* written twice (a vf_cond's branches) */
            w = p;
        }
    if (w < 0 || w > px || b->guard[ord[w]].pred >= 0) return false;
    int k0, k1, f = kernel_at(fz, w, &k0, &k1);
    for (int p = k0; p < k1; p++) { /* W's kernel: the variable read element for element, no later than W */
        int e = ord[p];
        if (writes_var(b, e, v, vb)) return false;
        if (!reads_var(b, e, v, vb)) continue;
        if (p > w || vf_op_get(b->ex[e].op)->kind != VF_KIND_ELEMENTWISE) return false;
        /* an elementwise group, or a matmul's epilogue (its center, reading
           other tensors, was let through above only if it does not read
           the variable); a row group's prologue feeds whole rows */
        if (f >= 0 && fz->fused[f].group.kind != VF_FUSED_ELEMENTWISE && fz->fused[f].group.kind != VF_FUSED_MATMUL)
            return false;
        for (int j = 0; j < b->ex[e].n_in; j++)
            if (touches(&b->loc[e][j], &b->ex[e].in[j], v, vb) &&
                (b->ex[e].in[j].offset != v->offset || !vf_pb_same_elements(&b->ex[e].in[j], &b->ex[ord[w]].out)))
                return false;
    }
    for (int p = k1; p < px; p++) /* nothing in between sees the variable */
        if (reads_var(b, ord[p], v, vb) || writes_var(b, ord[p], v, vb)) return false;
    int last = -1; /* the value's last reader after the copy */
    for (int p = px + 1; p < n; p++)
        for (int j = 0; j < b->ex[ord[p]].n_in; j++)
            if (b->ref_inter[ord[p]][j] == u) last = p;
    for (int p = px + 1; p < last; p++)
        if (writes_var(b, ord[p], v, vb)) return false;
    *pw = w;
    return true;
}

bool vf_pb_assign_in_place(builder *b, fusion *fz, int *ord, int *step)
{
    if (b->env->check || b->env->unfused || !fz->have_part) return true;
    int n = b->n_ex;
    for (int px = 0; px < n; px++) {
        int x = ord[px], w;
        if (b->ex[x].op != VF_OP_COPY || b->loc[x][3].kind != VF_PLAN_FIXED || !can_elide(b, fz, ord, n, px, &w))
            continue;
        bool alone = (px == 0 || step[px - 1] != step[px]) && (px + 1 == n || step[px + 1] != step[px]);
        if (!alone) continue; /* a copy is a kernel of its own (never fused) */
        /* W writes the variable; the value lives there */
        int u = b->ref_inter[x][0], e = ord[w];
        b->it[u].fixed = true;
        b->it[u].fixed_ref = b->ex[x].out;
        b->loc[e][3] = b->loc[x][3];
        for (int t = 0; t < fz->n_tens; t++)
            if (fz->tinter[t] == u) fz->tloc[t] = b->loc[x][3];
        /* the copy goes: positions after it move up, their kernels down one */
        for (int p = px; p + 1 < n; p++) ord[p] = ord[p + 1], step[p] = step[p + 1] - 1;
        for (int f = 0; f < fz->n_fused; f++)
            if (fz->fused[f].first_exec > px) fz->fused[f].first_exec--;
        n--, px--;
    }
    b->n_ex = n;
    return true;
}
