/* Recorded plans on the CPU backend (backend.h, "Plans").
 *
 * A traced function on the CPU backend used to run node by node: every
 * intermediate a fresh buffer, every node looked up, shaped and checked
 * again at each call, so tracing made a step slower than eager. A plan
 * does that work once: the execs are copied with their locations, the
 * memory planner's arena is one buffer for all intermediates, and a run
 * is a walk over the execs with each tensor's storage filled in from the
 * arena or the call's bindings. Fused groups run as one pass over
 * cache-sized blocks where cpu_fused.c can (elementwise groups: their
 * intermediates never written whole; row groups row by row, cpu_rows.c),
 * else member by member, the values
 * between them in the arena's spill region (what the contract allows
 * when a backend cannot fuse a group); there a softmax gradient's four
 * members run as its one kernel (kernels_row_grad.c, the same bits). A user kernel's call in parts runs
 * its C implementation once on all its tensors. The branches of a traced
 * vf_cond are guarded execs: the predicate's byte is read on the host.
 *
 * Results are the eager kernels' exactly: each member is the same
 * op-table function at the same precision, its value rounded to its
 * dtype as if stored.
 */
#include "cpu/cpu.h"
#include "cpu/cpu_fused.h"
#include "util/clock.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vf_plan {
    char name[64];
    int n_execs;
    vf_exec *execs;
    vf_plan_loc (*loc)[4];
    int *group_at;                /* per exec: the fused group starting there, else -1 */
    int n_grads;                  /* softmax gradients in groups run member by member (cpu_fused.h) */
    vf_cpu_row_grad *grads;       /* their members, as indices of the plan's execs */
    int *grad_at;                 /* per exec: the gradient it is one of the ops of, else -1; NULL: none */
    int n_fused;
    vf_plan_fused *fused;         /* members, tensors and loc copied */
    bool *block;                  /* per group: run as a whole (one pass, an epilogue or a user kernel) */
    vf_cpu_epilogue *ep;          /* per group: MATMUL / CONV with an epilogue pass (ep.execs set) */
    vf_plan_guard *guards;        /* NULL: none guarded */
    int n_preds;
    vf_plan_pred *preds;
    int *exec_node;               /* per exec: its graph node, -1: unknown (profiles) */
    int n_binds;
    size_t arena_bytes;
    vf_buffer *arena;             /* arena + spill; NULL when both are 0 */
    void *scratch;                /* the passes' chunk temporaries (cpu_fused.h), sized for the largest */
    int kernels;
    /* profiles: one record per kernel of the last run */
    bool ran;
    uint64_t t0;                  /* the last run's start */
    int n_prof;
    vf_plan_kernel_prof *prof;
    int *prof_of;                 /* per exec: its kernel's record, -1 when inside a group */
};

static vf_status oom(vf_cpu *cpu, const char *name)
{
    return vf_err_set(cpu->err, VF_ERROR_OUT_OF_MEMORY, "plan %s: out of host memory (malloc failed)", name);
}

static void *dup_array(const void *src, size_t n, size_t size)
{
    void *p = vf_malloc(n * size + 1);
    if (p && n) memcpy(p, src, n * size);
    return p;
}

void vf_cpu_plan_destroy(void *self, vf_plan *p)
{
    if (!p) return;
    for (int i = 0; i < p->n_fused; i++) {
        if (p->ep) vf_cpu_epilogue_free(&p->ep[i]);
        free((void *)p->fused[i].group.members);
        free((void *)p->fused[i].group.tensors);
        free((void *)p->fused[i].loc);
    }
    if (p->arena) vf_cpu_iface()->free(self, p->arena);
    free(p->scratch);
    free(p->execs);
    free(p->loc);
    free(p->group_at);
    free(p->grads);
    free(p->grad_at);
    free(p->fused);
    free(p->block);
    free(p->ep);
    free(p->guards);
    free(p->preds);
    free(p->exec_node);
    free(p->prof);
    free(p->prof_of);
    free(p);
}

/* The softmax gradients' ops in ROWS groups run member by member (too
   big for one pass): each one kernel, kernels_row_grad.c's, at its last
   op, instead of four (cpu_fused.h). All four under the same guard. */
static vf_status find_grads(vf_cpu *cpu, vf_plan *p)
{
    for (int i = 0; i < p->n_fused; i++) {
        vf_fused_group grp = p->fused[i].group;
        if (grp.kind != VF_FUSED_ROWS || p->block[i]) continue;
        grp.execs = p->execs + p->fused[i].first_exec;
        for (int m = 0; m < grp.n_members; m++) {
            vf_cpu_row_grad rg;
            if (!vf_cpu_rows_grad_match(&grp, m, &rg)) continue;
            int first = p->fused[i].first_exec;
            bool ok = true;
            for (int k = 0; k < 4; k++) {
                int x = first + rg.m[k];
                ok = ok && (!p->grad_at || p->grad_at[x] < 0) &&
                     (!p->guards || (p->guards[x].pred == p->guards[first + m].pred &&
                                     p->guards[x].when == p->guards[first + m].when));
            }
            if (!ok) continue;
            if (!p->grad_at) {
                if (!(p->grad_at = vf_malloc((size_t)p->n_execs * sizeof *p->grad_at))) return oom(cpu, p->name);
                for (int x = 0; x < p->n_execs; x++) p->grad_at[x] = -1;
            }
            vf_cpu_row_grad *more = vf_realloc(p->grads, (size_t)(p->n_grads + 1) * sizeof *more);
            if (!more) return oom(cpu, p->name);
            p->grads = more;
            rg.g_at += first, rg.y_at += first;
            for (int k = 0; k < 4; k++) p->grad_at[rg.m[k] += first] = p->n_grads;
            p->grads[p->n_grads++] = rg;
        }
    }
    return VF_OK;
}

static vf_status copy_fused(vf_cpu *cpu, vf_plan *p, const vf_plan_desc *d)
{
    p->fused = vf_calloc((size_t)d->n_fused + 1, sizeof *p->fused);
    p->block = vf_calloc((size_t)d->n_fused + 1, sizeof *p->block);
    p->ep = vf_calloc((size_t)d->n_fused + 1, sizeof *p->ep);
    if (!p->fused || !p->block || !p->ep) return oom(cpu, d->name);
    p->n_fused = d->n_fused;
    for (int i = 0; i < d->n_fused; i++) {
        const vf_plan_fused *f = &d->fused[i];
        int nt = f->group.n_inputs + f->group.n_outputs;
        if (f->first_exec < 0 || f->n_execs < 1 || f->first_exec + f->n_execs > d->n_execs ||
            f->group.n_members != f->n_execs || p->group_at[f->first_exec] >= 0)
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: fused group %d covers execs %d..%d",
                              d->name, i, f->first_exec, f->first_exec + f->n_execs - 1);
        vf_plan_fused *g = &p->fused[i];
        *g = *f;
        g->group.members = dup_array(f->group.members, (size_t)f->n_execs, sizeof *f->group.members);
        g->group.tensors = dup_array(f->group.tensors, (size_t)nt, sizeof *f->group.tensors);
        g->loc = dup_array(f->loc, (size_t)nt, sizeof *f->loc);
        g->group.execs = NULL;
        if (!g->group.members || !g->group.tensors || !g->loc) return oom(cpu, d->name);
        p->group_at[f->first_exec] = i;
    }
    return VF_OK;
}

vf_status vf_cpu_plan_create(void *self, const vf_plan_desc *d, vf_plan **out)
{
    vf_cpu *cpu = self;
    *out = NULL;
    vf_plan *p = vf_calloc(1, sizeof *p);
    if (!p) return oom(cpu, d->name);
    snprintf(p->name, sizeof p->name, "%s", d->name ? d->name : "?");
    p->n_execs = d->n_execs;
    p->n_binds = d->n_binds;
    p->execs = dup_array(d->execs, (size_t)d->n_execs, sizeof *d->execs);
    p->loc = dup_array(d->loc, (size_t)d->n_execs, sizeof *d->loc);
    p->group_at = vf_malloc(((size_t)d->n_execs + 1) * sizeof *p->group_at);
    p->prof_of = vf_malloc(((size_t)d->n_execs + 1) * sizeof *p->prof_of);
    vf_status s = p->execs && p->loc && p->group_at && p->prof_of ? VF_OK : oom(cpu, d->name);
    for (int x = 0; !s && x < d->n_execs; x++) p->group_at[x] = -1;
    if (!s) {
        p->exec_node = vf_malloc(((size_t)d->n_execs + 1) * sizeof *p->exec_node);
        if (!p->exec_node) s = oom(cpu, d->name);
        for (int x = 0; !s && x < d->n_execs; x++) p->exec_node[x] = d->exec_node ? d->exec_node[x] : -1;
    }
    if (!s) s = copy_fused(cpu, p, d);
    if (!s && d->guards) {
        p->guards = dup_array(d->guards, (size_t)d->n_execs, sizeof *d->guards);
        if (!p->guards) s = oom(cpu, d->name);
    }
    if (!s && d->n_preds) {
        p->preds = dup_array(d->preds, (size_t)d->n_preds, sizeof *d->preds);
        p->n_preds = d->n_preds;
        if (!p->preds) s = oom(cpu, d->name);
    }
    for (int x = 0; !s && p->guards && x < d->n_execs; x++)
        if (p->guards[x].pred >= d->n_preds)
            s = vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: exec %d is guarded by predicate %d of %d",
                           d->name, x, p->guards[x].pred, d->n_preds);
    /* which groups run as one pass; the others need the spill region */
    bool spill = false;
    for (int i = 0; !s && i < p->n_fused; i++) {
        vf_fused_group grp = p->fused[i].group;
        grp.execs = p->execs + p->fused[i].first_exec;
        if (grp.kind == VF_FUSED_USER) {
            p->block[i] = true;
        } else if (grp.kind == VF_FUSED_MATMUL || grp.kind == VF_FUSED_CONV) {
            p->block[i] = vf_cpu_epilogue_make(&grp, &p->ep[i]);
            spill = true; /* the center's value lives there */
        } else if (grp.kind == VF_FUSED_ROWS) {
            p->block[i] = vf_cpu_rows_supported(&grp);
            spill = true; /* member by member when a run finds its outputs overlapping its inputs */
        } else {
            p->block[i] = vf_cpu_fused_supported(&grp);
            spill |= !p->block[i];
        }
    }
    if (!s) s = find_grads(cpu, p);
    int most = 0; /* members of the largest pass */
    for (int i = 0; i < p->n_fused; i++)
        if (p->block[i] && p->fused[i].group.kind != VF_FUSED_USER) {
            int nm = p->ep[i].execs ? p->ep[i].group.n_members : p->fused[i].n_execs;
            if (nm > most) most = nm;
        }
    size_t scratch = most ? vf_cpu_fused_scratch_bytes(most) : 0;
    if (most && vf_cpu_rows_scratch_bytes(most) > scratch) scratch = vf_cpu_rows_scratch_bytes(most);
    if (!s && most && !(p->scratch = vf_malloc(scratch))) s = oom(cpu, d->name);
    p->arena_bytes = d->arena_bytes + (spill ? d->spill_bytes : 0);
    if (!s && p->arena_bytes) s = vf_cpu_iface()->alloc(cpu, p->arena_bytes, &p->arena);
    /* the kernels: an exec outside a group, or a group run as one pass, is
       one; a group run member by member is as many as it has members */
    for (int x = 0; !s && x < p->n_execs;) {
        int g = p->group_at[x];
        if (g >= 0 && p->block[g]) {
            p->kernels++;
            x += p->fused[g].n_execs;
        } else {
            p->kernels++;
            x++;
        }
    }
    if (!s) {
        p->prof = vf_calloc((size_t)p->kernels + 1, sizeof *p->prof);
        if (!p->prof) s = oom(cpu, d->name);
    }
    if (s) {
        vf_cpu_plan_destroy(cpu, p);
        return s;
    }
    *out = p;
    return VF_OK;
}

/* The storage of tensor r (location l) for this run. */
static vf_status resolve(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, const vf_tref *r,
                         const vf_plan_loc *l, vf_tref *out)
{
    *out = *r;
    switch (l->kind) {
    case VF_PLAN_FIXED: return VF_OK;
    case VF_PLAN_ARENA:
        out->buf = p->arena;
        return VF_OK;
    case VF_PLAN_BIND:
        if (l->index < 0 || l->index >= n_binds)
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: binding %d of %d", p->name, l->index,
                              n_binds);
        out->buf = binds[l->index].buf;
        out->offset = binds[l->index].offset + r->offset;
        return VF_OK;
    }
    return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: a tensor without a location", p->name);
}

static vf_status resolve_exec(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int x,
                              vf_exec *e)
{
    *e = p->execs[x];
    vf_status s = resolve(cpu, p, binds, n_binds, &p->execs[x].out, &p->loc[x][3], &e->out);
    for (int j = 0; !s && j < e->n_in && j < 3; j++)
        s = resolve(cpu, p, binds, n_binds, &p->execs[x].in[j], &p->loc[x][j], &e->in[j]);
    return s;
}

static vf_status run_exec(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int x)
{
    vf_exec e;
    vf_status s = resolve_exec(cpu, p, binds, n_binds, x, &e);
    return s ? s : vf_cpu_exec(cpu, &e);
}

/* Exec x of a group run member by member: the last of a softmax
   gradient's ops runs the gradient's kernel, the three before it nothing
   (only it reads their values). Where that would read g or y after they
   are overwritten (the output partly over either, or another member
   between the four writing over either: the ops read them earlier), each
   op runs as its kernel. The check depends only on the run's storage, so
   all four ops decide alike. */
static vf_status run_member(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int x)
{
    int i = p->grad_at ? p->grad_at[x] : -1;
    if (i < 0) return run_exec(cpu, p, binds, n_binds, x);
    const vf_cpu_row_grad *rg = &p->grads[i];
    int d = rg->m[3];
    vf_exec e = {.op = rg->op, .n_in = 2, .attrs.axis = p->execs[d].out.rank - 1};
    vf_status s = resolve(cpu, p, binds, n_binds, &p->execs[rg->g_at].in[rg->g_in], &p->loc[rg->g_at][rg->g_in],
                          &e.in[0]);
    if (!s)
        s = resolve(cpu, p, binds, n_binds, &p->execs[rg->y_at].in[rg->y_in], &p->loc[rg->y_at][rg->y_in], &e.in[1]);
    if (!s) s = resolve(cpu, p, binds, n_binds, &p->execs[d].out, &p->loc[d][3], &e.out);
    if (s) return s;
    bool clash = false;
    for (int k = 0; k < 2; k++)
        clash |= vf_cpu_fused_overlaps(&e.out, &e.in[k]) &&
                 !(e.out.buf == e.in[k].buf && e.out.offset == e.in[k].offset);
    int lo = rg->m[0] < rg->m[1] ? rg->m[0] : rg->m[1];
    for (int y = lo + 1; y < d && !clash; y++) {
        if (p->grad_at[y] == i) continue;
        vf_tref o;
        if ((s = resolve(cpu, p, binds, n_binds, &p->execs[y].out, &p->loc[y][3], &o))) return s;
        clash = vf_cpu_fused_overlaps(&o, &e.in[0]) || vf_cpu_fused_overlaps(&o, &e.in[1]);
    }
    if (clash) return run_exec(cpu, p, binds, n_binds, x);
    return x == d ? vf_cpu_softmax_grad(cpu, &e) : VF_OK;
}

/* A matmul or conv group: the center alone (a conv2d with its bias folded
   in where it has one), then the other members as one elementwise pass
   reading its value (cpu_fused.h). */
static vf_status run_epilogue(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int gi)
{
    const vf_plan_fused *f = &p->fused[gi];
    const vf_cpu_epilogue *ep = &p->ep[gi];
    int ni = f->group.n_inputs, nt = ni + 1 + f->group.n_outputs, cx = f->first_exec + ep->center;
    vf_tref t[VF_FUSED_MAX_TENSORS + 1];
    if (nt > VF_FUSED_MAX_TENSORS + 1)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: a fused group of %d tensors", p->name, nt);
    vf_status s = VF_OK;
    for (int k = 0; !s && k < ni; k++) s = resolve(cpu, p, binds, n_binds, &f->group.tensors[k], &f->loc[k], &t[k]);
    if (!s && ep->bias >= 0) { /* conv2d + bias in one kernel (cpu_fused.h) */
        vf_exec e;
        s = resolve_exec(cpu, p, binds, n_binds, cx, &e);
        if (!s) s = vf_cpu_conv_bias(cpu, &e, &t[ep->bias]);
    } else if (!s) {
        s = run_exec(cpu, p, binds, n_binds, cx);
    }
    if (!s) s = resolve(cpu, p, binds, n_binds, &p->execs[cx].out, &p->loc[cx][3], &t[ni]);
    for (int k = 0; !s && k < f->group.n_outputs; k++)
        s = resolve(cpu, p, binds, n_binds, &f->group.tensors[ni + k], &f->loc[ni + k], &t[ni + 1 + k]);
    if (s) return s;
    for (int k = 0; k < ni; k++) /* not read by the pass: no say in its walk (cpu_fused.h) */
        if (k >= 64 || !(ep->reads >> k & 1)) t[k].rank = 0;
    vf_fused_group grp = ep->group;
    grp.tensors = t;
    return vf_cpu_fused_run(cpu, &grp, p->scratch);
}

/* A group's members one by one, the values between them in the spill
   region. */
static vf_status run_members(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int gi)
{
    const vf_plan_fused *f = &p->fused[gi];
    vf_status s = VF_OK;
    for (int x = f->first_exec; !s && x < f->first_exec + f->n_execs; x++) s = run_exec(cpu, p, binds, n_binds, x);
    return s;
}

/* A fused group: its tensors resolved, then one pass (cpu_fused.c, row
   groups cpu_rows.c), one
   call of a user kernel, or its members one by one. */
static vf_status run_group(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int gi)
{
    const vf_plan_fused *f = &p->fused[gi];
    int nt = f->group.n_inputs + f->group.n_outputs;
    if (p->ep[gi].execs) return run_epilogue(cpu, p, binds, n_binds, gi);
    if (!p->block[gi]) return run_members(cpu, p, binds, n_binds, gi);
    vf_tref t[VF_FUSED_MAX_TENSORS];
    if (nt > VF_FUSED_MAX_TENSORS)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: a fused group of %d tensors", p->name, nt);
    for (int k = 0; k < nt; k++) {
        vf_status s = resolve(cpu, p, binds, n_binds, &f->group.tensors[k], &f->loc[k], &t[k]);
        if (s) return s;
    }
    if (f->group.kind == VF_FUSED_USER) { /* inputs then outputs: the call's */
        const vf_exec *e0 = &p->execs[f->first_exec];
        if (!e0->ux)
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: a user kernel group without its call",
                              p->name);
        vf_ukernel_exec x = *e0->ux;
        x.in = t;
        x.out = t + f->group.n_inputs;
        return vf_cpu_ukernel(cpu, &x);
    }
    vf_fused_group grp = f->group;
    grp.execs = p->execs + f->first_exec;
    grp.tensors = t;
    if (grp.kind == VF_FUSED_ROWS)
        return vf_cpu_rows_run(&grp, p->scratch) ? VF_OK : run_members(cpu, p, binds, n_binds, gi);
    return vf_cpu_fused_run(cpu, &grp, p->scratch);
}

static int64_t tref_bytes(const vf_tref *t) { return vf_cpu_numel(t) * (int64_t)vf_dtype_size(t->dtype); }

/* What a kernel's tensors hold, read and written (profiles). */
static void kernel_bytes(const vf_plan *p, int x, int g, vf_plan_kernel_prof *kp)
{
    if (g >= 0) {
        const vf_fused_group *grp = &p->fused[g].group;
        for (int t = 0; t < grp->n_inputs + grp->n_outputs; t++)
            *(t < grp->n_inputs ? &kp->bytes_read : &kp->bytes_written) += tref_bytes(&grp->tensors[t]);
        return;
    }
    const vf_exec *e = &p->execs[x];
    for (int j = 0; j < e->n_in && j < 3; j++) kp->bytes_read += tref_bytes(&e->in[j]);
    kp->bytes_written += tref_bytes(&e->out);
}

static vf_status guard_open(vf_cpu *cpu, const vf_plan *p, const vf_plan_bind *binds, int n_binds, int x, bool *run)
{
    *run = true;
    if (!p->guards || p->guards[x].pred < 0) return VF_OK;
    const vf_plan_pred *pr = &p->preds[p->guards[x].pred];
    vf_tref r;
    vf_status s = resolve(cpu, p, binds, n_binds, &pr->ref, &pr->loc, &r);
    if (s) return s;
    if (!r.buf || r.offset >= r.buf->size)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: predicate %d outside its buffer", p->name,
                          p->guards[x].pred);
    bool v = ((const uint8_t *)r.buf->data)[r.offset] != 0;
    *run = v == p->guards[x].when;
    return VF_OK;
}

vf_status vf_cpu_plan_run(void *self, vf_plan *p, const vf_plan_bind *binds, int n_binds)
{
    vf_cpu *cpu = self;
    if (n_binds < p->n_binds)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: %d bindings for %d", p->name, n_binds,
                          p->n_binds);
    int64_t t0 = vf_now_ns();
    p->t0 = (uint64_t)t0;
    int k = 0;
    vf_status s = VF_OK;
    for (int x = 0; !s && x < p->n_execs;) {
        int g = p->group_at[x];
        bool whole = g >= 0 && p->block[g];
        int n = whole ? p->fused[g].n_execs : 1;
        bool run = true;
        s = guard_open(cpu, p, binds, n_binds, x, &run);
        int64_t start = vf_now_ns();
        if (!s && run) s = whole ? run_group(cpu, p, binds, n_binds, g) : run_member(cpu, p, binds, n_binds, x);
        int64_t end = vf_now_ns();
        if (k < p->kernels) {
            vf_plan_kernel_prof *kp = &p->prof[k];
            const vf_exec *e = &p->execs[x];
            memset(kp, 0, sizeof *kp);
            snprintf(kp->name, sizeof kp->name, "%s%s", whole ? "fused_" : "", vf_op_get(e->op)->name);
            kp->first_exec = x;
            kp->n_execs = n;
            kp->op = e->op;
            kp->pred = p->guards && p->guards[x].pred >= 0 ? p->guards[x].pred : -1;
            kp->dispatches = run;
            kp->gpu_ns = run ? (uint64_t)(end > start ? end - start : 1) : 0; /* ran: never 0 */
            kp->start_ns = (uint64_t)(start - t0);
            if (p->exec_node[x] >= 0) {
                kp->nodes = &p->exec_node[x];
                kp->n_nodes = whole && p->fused[g].group.kind != VF_FUSED_USER ? n : 1;
            }
            if (run) kernel_bytes(p, x, whole ? g : -1, kp);
            k++;
        }
        x += n;
    }
    p->n_prof = k;
    p->ran = s == VF_OK;
    return s;
}

void vf_cpu_plan_info(void *self, const vf_plan *p, vf_plan_info *out)
{
    (void)self;
    out->kernels = p->kernels;
    out->dispatches = p->kernels;
    out->barriers = 0;
}

vf_status vf_cpu_plan_profile(void *self, vf_plan *p, vf_plan_prof *out)
{
    (void)self;
    memset(out, 0, sizeof *out);
    if (!p->ran) return VF_OK;
    out->timed = true; /* wall time per kernel: the CPU runs them one after another */
    out->t0_ns = p->t0;
    out->n_kernels = p->n_prof;
    out->kernels = p->prof;
    for (int k = 0; k < p->n_prof; k++) {
        out->dispatches += p->prof[k].dispatches;
        out->gpu_ns += p->prof[k].gpu_ns;
    }
    return VF_OK;
}
