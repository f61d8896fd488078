/* VKFUSE_CHECK: each kernel of a recorded plan against the CPU backend
 * (check.h). */
#include "plan/check.h"
#include "graph/uelem.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* NMSE above which a kernel disagrees, at least: f32 results of the same
   op differ by a few ulps (transcendentals, summation order:
   docs/TESTING.md), an NMSE of 1e-8 is a relative RMS error of 1e-4; f16 by
   an ulp (1e-3); integers and bools must be equal. A fixed limit is not
   enough where the result is ill-conditioned: a fused layer norm whose
   variance is E[x^2] - E[x]^2 over 20000 values of 100 +- 0.1 cancels
   almost every bit, and the device's f32 values then differ from the CPU's
   double ones by far more than 1e-8 while the kernel is right (the
   unfused plan computes the same). So the limit also grows with what
   rounding alone can do to this kernel's outputs, measured (see
   perturb): SENS_FACTOR times the NMSE between the CPU's result and the
   CPU's result from inputs perturbed as f32 arithmetic might. */
static double nmse_limit(vf_dtype t)
{
    switch (t) {
    case VF_F32: return 1e-8;
    case VF_F16: return 1e-5;
    default: return 0;
    }
}

#define SENS_FACTOR 16.0

typedef struct host_val {
    void *data;
    size_t bytes;
} host_val;

typedef struct fixed_write { /* a plan's write into a fixed buffer (an assign) */
    vf_buffer *buf;
    size_t offset, bytes;
    void *data;
} fixed_write;

struct vf_fcheck {
    char *fn, *glsl_dir;
    vf_exec *ex;
    vf_plan_loc (*loc)[4];
    int (*inter)[4];
    int *kernel, *node;
    const char **node_op;
    int n_ex;
    bool *internal;
    int *bind;
    int n_inter;
    vf_plan_guard *guards;
    vf_plan_pred *preds;
    int *pred_inter;
    int n_preds;
    host_val *fixed;        /* per exec and input: before the call */
    host_val *cpu;          /* per intermediate internal to a group: the CPU's value */
    host_val *cpu_p;        /* the same from the perturbed replay (perturb) */
    bool reported;          /* a kernel disagreed: keep its GLSL */
    fixed_write *writes;
    int n_writes, cap_writes;
    vf_host *host;          /* the replay runs there */
    const vf_backend_t *dev;/* the plan's backend: its values are read back from there */
    vf_err *err;            /* where a disagreement (or trouble) is reported */
    bool keep_glsl;         /* the GLSL directory stays even if every call agreed */
};

static size_t tref_bytes(const vf_tref *r)
{
    int64_t n = 1;
    for (int i = 0; i < r->rank; i++) n *= r->shape[i];
    return (size_t)n * vf_dtype_size(r->dtype);
}

static void *dup_mem(const void *p, size_t n)
{
    void *q = vf_malloc(n ? n : 1);
    if (q && n) memcpy(q, p, n);
    return q;
}

#define DUP(dst, src, n)                                                                    \
    do {                                                                                    \
        (dst) = (src) ? dup_mem((src), sizeof *(src) * (size_t)(n)) : NULL;                 \
        if ((src) && !(dst)) ok = false;                                                    \
    } while (0)

vf_fcheck *vf_fcheck_create(const vf_fcheck_desc *d, vf_host *host, const vf_backend_t *dev, vf_err *err)
{
    vf_fcheck *c = vf_calloc(1, sizeof *c);
    if (!c) {
        vf_err_set(err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': VKFUSE_CHECK: out of host memory (malloc failed)", d->fn);
        return NULL;
    }
    c->host = host, c->dev = dev, c->err = err;
    c->keep_glsl = d->keep_glsl;
    bool ok = true;
    c->fn = dup_mem(d->fn, strlen(d->fn) + 1);
    c->glsl_dir = d->glsl_dir ? dup_mem(d->glsl_dir, strlen(d->glsl_dir) + 1) : NULL;
    ok = c->fn && (!d->glsl_dir || c->glsl_dir);
    DUP(c->ex, d->execs, d->n_execs);
    DUP(c->loc, d->loc, d->n_execs);
    DUP(c->inter, d->inter, d->n_execs);
    DUP(c->kernel, d->kernel, d->n_execs);
    DUP(c->node, d->node, d->n_execs);
    DUP(c->node_op, d->node_op, d->n_execs);
    DUP(c->internal, d->internal, d->n_inter);
    DUP(c->bind, d->bind, d->n_inter);
    DUP(c->guards, d->guards, d->n_execs);
    DUP(c->preds, d->preds, d->n_preds);
    DUP(c->pred_inter, d->pred_inter, d->n_preds);
    c->n_ex = d->n_execs;
    c->n_inter = d->n_inter;
    c->n_preds = d->n_preds;
    c->fixed = vf_calloc((size_t)d->n_execs * 3 + 1, sizeof *c->fixed);
    c->cpu = vf_calloc((size_t)d->n_inter + 1, sizeof *c->cpu);
    c->cpu_p = vf_calloc((size_t)d->n_inter + 1, sizeof *c->cpu_p);
    ok = ok && c->fixed && c->cpu && c->cpu_p;
    if (!ok) {
        vf_err_set(c->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': VKFUSE_CHECK: out of host memory (malloc failed)", d->fn);
        vf_fcheck_free(c);
        return NULL;
    }
    return c;
}

static void drop_values(vf_fcheck *c)
{
    for (int i = 0; c->fixed && i < c->n_ex * 3; i++) free(c->fixed[i].data), c->fixed[i] = (host_val){0};
    for (int i = 0; c->cpu && i < c->n_inter; i++) free(c->cpu[i].data), c->cpu[i] = (host_val){0};
    for (int i = 0; c->cpu_p && i < c->n_inter; i++) free(c->cpu_p[i].data), c->cpu_p[i] = (host_val){0};
    for (int i = 0; i < c->n_writes; i++) free(c->writes[i].data);
    c->n_writes = 0;
}

/* When every call agreed, the GLSL files are of no use: the directory
   goes with the plan, unless it was asked for (keep_glsl: under
   VKFUSE_DUMP). */
static void remove_glsl(const vf_fcheck *c)
{
    if (c->keep_glsl) return;
    for (int x = 0; x < c->n_ex; x++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/exec%d.glsl", c->glsl_dir, x);
        remove(path);
    }
    rmdir(c->glsl_dir);
}

void vf_fcheck_free(vf_fcheck *c)
{
    if (!c) return;
    drop_values(c);
    if (c->glsl_dir && !c->reported) remove_glsl(c);
    free(c->cpu_p);
    free(c->fn), free(c->glsl_dir), free(c->ex), free(c->loc), free(c->inter), free(c->kernel);
    free(c->node), free(c->node_op), free(c->internal), free(c->bind), free(c->guards), free(c->preds);
    free(c->pred_inter), free(c->fixed), free(c->cpu), free(c->writes);
    free(c);
}

static vf_status oom(const vf_fcheck *c)
{
    return vf_err_set(c->err, VF_ERROR_OUT_OF_MEMORY, "vf_function '%s': VKFUSE_CHECK: out of host memory (malloc failed)", c->fn);
}

/* bytes of buf at offset into a new host copy. */
static vf_status download(const vf_fcheck *c, vf_buffer *buf, size_t offset, size_t bytes,
                          host_val *out)
{
    out->bytes = bytes;
    out->data = vf_malloc(bytes ? bytes : 1);
    if (!out->data) return oom(c);
    vf_status s = c->dev->iface->download(c->dev->self, buf, offset, out->data, bytes);
    if (s) return vf_err_set(c->err, s, "vf_function '%s': VKFUSE_CHECK: reading a value back: %s", c->fn, c->err->message);
    return VF_OK;
}

vf_status vf_fcheck_before(vf_fcheck *c)
{
    drop_values(c);
    for (int x = 0; x < c->n_ex; x++)
        for (int j = 0; j < c->ex[x].n_in; j++) {
            if (c->loc[x][j].kind != VF_PLAN_FIXED || c->inter[x][j] >= 0) continue;
            const vf_tref *r = &c->ex[x].in[j];
            vf_status s = download(c, r->buf, r->offset, tref_bytes(r), &c->fixed[x * 3 + j]);
            if (s) return s;
        }
    return VF_OK;
}

/* The value a tensor of exec x had when the device kernel read it (or,
   for an output, what the device wrote), as a new host copy. */
static vf_status value_of(vf_fcheck *c, const vf_plan_bind *binds, int x, int j,
                          const vf_tref *r, vf_plan_loc loc, int id, host_val *out)
{
    size_t bytes = tref_bytes(r);
    if (id >= 0 && c->internal[id]) {
        if (!c->cpu[id].data || c->cpu[id].bytes != bytes)
            return vf_err_set(c->err, VF_ERROR_DEVICE, "vf_function '%s': VKFUSE_CHECK: exec %d reads a group value"
                                                 " no earlier exec made", c->fn, x);
        out->bytes = bytes;
        out->data = dup_mem(c->cpu[id].data, bytes);
        return out->data ? VF_OK : oom(c);
    }
    if (id >= 0 && c->bind[id] >= 0) {
        const vf_plan_bind *b = &binds[c->bind[id]];
        return download(c, b->buf, b->offset + r->offset, bytes, out);
    }
    if (loc.kind == VF_PLAN_BIND) {
        const vf_plan_bind *b = &binds[loc.index];
        return download(c, b->buf, b->offset + r->offset, bytes, out);
    }
    if (loc.kind == VF_PLAN_FIXED) {
        for (int w = c->n_writes - 1; w >= 0; w--) /* the latest assign of it wins */
            if (c->writes[w].buf == r->buf && c->writes[w].offset == r->offset && c->writes[w].bytes == bytes) {
                out->bytes = bytes;
                out->data = dup_mem(c->writes[w].data, bytes);
                return out->data ? VF_OK : oom(c);
            }
        if (j >= 0 && j < 3 && c->fixed[x * 3 + j].data) {
            out->bytes = bytes;
            out->data = dup_mem(c->fixed[x * 3 + j].data, bytes);
            return out->data ? VF_OK : oom(c);
        }
        return download(c, r->buf, r->offset, bytes, out);
    }
    return vf_err_set(c->err, VF_ERROR_DEVICE, "vf_function '%s': VKFUSE_CHECK: exec %d tensor %d lives in the arena"
                                         " of a checked plan", c->fn, x, j);
}

/* The reduction length of an exec: how many rounded terms each output
   element may accumulate (1 for elementwise ops). */
static double red_len(const vf_exec *e)
{
    const vf_tref *a = &e->in[0];
    const vf_op_info *info = vf_op_get(e->op);
    double n = 1;
    if (info->kind == VF_KIND_MATMUL) return (double)a->shape[e->attrs.trans_a ? a->rank - 2 : a->rank - 1];
    if (info->kind == VF_KIND_ROW) {
        const vf_tref *r = &e->in[vf_op_data_input(e->op)]; /* the logits */
        return r->rank ? (double)r->shape[r->rank - 1] : 1;
    }
    if (info->kind != VF_KIND_REDUCTION) return 1;
    /* along one axis (argmax: its row reads attrs.axis) or over attrs.axes_mask */
    uint32_t mask = info->attrs & VF_ATTR_AXIS ? 1u << e->attrs.axis : e->attrs.axes_mask;
    for (int d = 0; d < a->rank; d++)
        if (mask >> d & 1u) n *= (double)a->shape[d];
    return n;
}

/* A copy of v with each float element x replaced by x * (1 + u * rel), u
   uniform in [-1, 1] from a fixed hash and rel = (L + 2) * 2^-24: the
   backward error of f32 arithmetic for an op accumulating L terms per
   output plus the rounding of the op and of the store; f16 values add the
   rounding of their storage (2^-11; their arithmetic is f32). Replaying
   the plan on such inputs shows how far rounding alone can move each
   output. */
static bool perturb(const host_val *v, vf_dtype t, double len, uint64_t seed, host_val *out)
{
    out->bytes = v->bytes;
    out->data = dup_mem(v->data, v->bytes);
    if (!out->data) return false;
    if (!vf_dtype_is_float(t)) return true;
    double rel = (len + 2) * 0x1p-24 + (t == VF_F16 ? 0x1p-11 : 0);
    int64_t n = (int64_t)(v->bytes / vf_dtype_size(t));
    uint64_t h = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    for (int64_t i = 0; i < n; i++) {
        h ^= h >> 31, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 29, h += 0x9e3779b97f4a7c15ull;
        double u = (double)(h >> 11) * 0x1p-52 - 1.0;
        double x = vf_load_f64(out->data, t, i);
        if (isfinite(x)) vf_store_f64(out->data, t, i, x * (1.0 + u * rel));
    }
    return true;
}

/* The op's name in reports: a user elementwise op's own. */
static const char *exec_name(const vf_exec *e)
{
    return vf_op_holds_uelem(e->op) && e->attrs.uelem ? e->attrs.uelem->name : vf_op_get(e->op)->name;
}

/* Runs exec x on the CPU backend with these inputs; out gets the result. */
static vf_status cpu_exec(vf_fcheck *c, int x, host_val *in, host_val *out)
{
    const vf_exec *e = &c->ex[x];
    out->bytes = tref_bytes(&e->out);
    out->data = vf_malloc(out->bytes ? out->bytes : 1);
    if (!out->data) return oom(c);
    const void *src[3] = {in[0].data, in[1].data, in[2].data};
    vf_status s = vf_host_exec(c->host, e, src, out->data);
    if (s) return vf_err_set(c->err, s, "vf_function '%s': VKFUSE_CHECK: exec %d (%s) on the CPU backend: %s", c->fn, x,
                          exec_name(e), c->host->err.message);
    return VF_OK;
}

typedef struct diff {
    double nmse;
    int64_t at;             /* the element with the largest error, or the first NaN/Inf mismatch */
    double dev, ref;
} diff;

static diff compare(vf_dtype t, const void *dev, const void *ref, int64_t n, bool skip_special)
{
    diff d = {0, -1, 0, 0};
    double se = 0, energy = 0, worst = -1;
    bool special = false;
    for (int64_t i = 0; i < n; i++) {
        double g = vf_load_f64(dev, t, i), r = vf_load_f64(ref, t, i);
        if (isnan(g) && isnan(r)) continue;
        if (isnan(g) || isnan(r) || ((isinf(g) || isinf(r)) && g != r)) {
            if (skip_special) continue;
            if (!special) d.at = i, d.dev = g, d.ref = r;
            special = true;
            continue;
        }
        if (isinf(r)) continue;
        double e = (g - r) * (g - r);
        se += e;
        energy += r * r;
        if (!special && e > worst) worst = e, d.at = i, d.dev = g, d.ref = r;
    }
    d.nmse = special ? INFINITY : se == 0 ? 0 : se / (energy > 0 ? energy : 1e-300);
    return d;
}

/* The report: the kernel, its graph nodes, its GLSL. */
static vf_status report(vf_fcheck *c, int x, const diff *d, double limit)
{
    int k = c->kernel[x], first = x;
    while (first > 0 && c->kernel[first - 1] == k) first--;
    char nodes[512] = "";
    size_t len = 0;
    for (int y = first; y < c->n_ex && c->kernel[y] == k && len + 48 < sizeof nodes; y++)
        len += (size_t)snprintf(nodes + len, sizeof nodes - len, "%s%%%d %s", y > first ? ", " : "", c->node[y],
                                c->node_op && c->node_op[y] ? c->node_op[y] : exec_name(&c->ex[y]));
    char glsl[600];
    if (c->glsl_dir) snprintf(glsl, sizeof glsl, "%s/exec%d.glsl", c->glsl_dir, first);
    else snprintf(glsl, sizeof glsl, "(not written: no directory for it)");
    vf_status s = vf_err_set(c->err, VF_ERROR_DEVICE,
                          "vf_function '%s': VKFUSE_CHECK: kernel %d (graph nodes %s) disagrees with the CPU"
                          " backend: the output of %%%d %s has NMSE %.3g > %.3g (element %lld: device %.9g, CPU"
                          " %.9g); its GLSL: %s",
                          c->fn, k, nodes, c->node[x], exec_name(&c->ex[x]), d->nmse, limit, (long long)d->at,
                          d->dev, d->ref, glsl);
    fprintf(stderr, "vkfuse: %s\n", c->err->message);
    c->reported = true;
    return s;
}

static vf_status add_write(vf_fcheck *c, const vf_tref *r, host_val *v)
{
    if (!vf_grow((void **)&c->writes, &c->cap_writes, c->n_writes + 1, sizeof *c->writes)) return oom(c);
    c->writes[c->n_writes++] = (fixed_write){r->buf, r->offset, v->bytes, v->data};
    v->data = NULL;
    return VF_OK;
}

/* Whether guarded exec x ran: its predicate as the device computed it. */
static vf_status guard_ran(vf_fcheck *c, const vf_plan_bind *binds, int x, bool *ran)
{
    *ran = true;
    if (!c->guards || c->guards[x].pred < 0) return VF_OK;
    const vf_plan_pred *p = &c->preds[c->guards[x].pred];
    host_val v = {0};
    vf_status s = value_of(c, binds, x, -1, &p->ref, p->loc, c->pred_inter[c->guards[x].pred], &v);
    if (!s) *ran = (vf_load_f64(v.data, p->ref.dtype, 0) != 0) == c->guards[x].when;
    free(v.data);
    return s;
}

/* A user kernel's call in parts (more than 3 inputs or more than one
   output, plan/plan.c), execs x .. *last: its C implementation run once
   on all its inputs (as the device read them), each output compared. */
static vf_status replay_user_parts(vf_fcheck *c, const vf_plan_bind *binds, int x, int *last)
{
    const vf_ukernel_exec *ux = c->ex[x].ux;
    const vf_ukernel *k = ux->k;
    int np = VF_UKERNEL_PARTS(k->n_in, k->n_out);
    *last = x + np - 1;
    if (*last >= c->n_ex)
        return vf_err_set(c->err, VF_ERROR_DEVICE, "vf_function '%s': VKFUSE_CHECK: kernel '%s' lacks parts", c->fn,
                          k->name);
    if (!k->cpu)
        return vf_err_set(c->err, VF_ERROR_UNSUPPORTED, "vf_function '%s': VKFUSE_CHECK: kernel '%s' has no C "
                          "implementation (desc.cpu) to check it against", c->fn, k->name);
    host_val in[VF_KERNEL_MAX_INPUTS] = {{0}}, ref[VF_KERNEL_MAX_OUTPUTS] = {{0}}, dev = {0};
    const void *src[VF_KERNEL_MAX_INPUTS];
    void *dst[VF_KERNEL_MAX_OUTPUTS];
    vf_status s = VF_OK;
    for (int i = 0; !s && i < k->n_in; i++) { /* input i: part i / 3, slot i % 3 */
        int p = x + i / 3, j = i % 3;
        s = value_of(c, binds, p, j, &c->ex[p].in[j], c->loc[p][j], c->inter[p][j], &in[i]);
        src[i] = in[i].data;
    }
    for (int j = 0; !s && j < k->n_out; j++) { /* zeroed, as the device's */
        ref[j].bytes = tref_bytes(&c->ex[x + j].out);
        ref[j].data = dst[j] = vf_calloc(ref[j].bytes ? ref[j].bytes : 1, 1);
        if (!ref[j].data) s = oom(c);
    }
    if (!s && (s = k->cpu(ux->shapes, src, dst, k->user)) != VF_OK)
        s = vf_err_set(c->err, VF_ERROR_DEVICE, "vf_function '%s': VKFUSE_CHECK: kernel '%s': its C implementation "
                       "returned %s", c->fn, k->name, vf_status_name((unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_DEVICE));
    for (int j = 0; !s && j < k->n_out; j++) {
        const vf_exec *e = &c->ex[x + j];
        int id = c->inter[x + j][3];
        if (id < 0 || c->bind[id] < 0) continue;
        s = value_of(c, binds, x + j, 3, &e->out, c->loc[x + j][3], id, &dev);
        int64_t n = (int64_t)(ref[j].bytes / vf_dtype_size(e->out.dtype));
        diff d = s ? (diff){0} : compare(e->out.dtype, dev.data, ref[j].data, n, false);
        if (!s && d.nmse > nmse_limit(e->out.dtype)) s = report(c, x + j, &d, nmse_limit(e->out.dtype));
        free(dev.data);
        dev.data = NULL;
    }
    for (int i = 0; i < k->n_in; i++) free(in[i].data);
    for (int j = 0; j < k->n_out; j++) free(ref[j].data);
    return s;
}

vf_status vf_fcheck_after(vf_fcheck *c, const vf_plan_bind *binds)
{
    vf_status s = VF_OK;
    for (int x = 0; !s && x < c->n_ex; x++) {
        bool ran = true;
        s = guard_ran(c, binds, x, &ran);
        if (s || !ran) continue;
        const vf_exec *e = &c->ex[x];
        if (vf_op_get(e->op)->kind == VF_KIND_USER && e->ux && (e->ux->k->n_in > 3 || e->ux->k->n_out > 1)) {
            s = replay_user_parts(c, binds, x, &x);
            continue;
        }
        host_val in[3] = {{0}}, pin[3] = {{0}}, ref = {0}, pref = {0}, dev = {0};
        for (int j = 0; !s && j < e->n_in; j++)
            s = value_of(c, binds, x, j, &e->in[j], c->loc[x][j], c->inter[x][j], &in[j]);
        if (!s) s = cpu_exec(c, x, in, &ref);
        /* the perturbed replay: group members read the perturbed values of
           earlier members, so the perturbation flows through the group as
           the device's rounding does */
        bool fl = vf_dtype_is_float(e->out.dtype);
        for (int j = 0; !s && fl && j < e->n_in; j++) {
            int jd = c->inter[x][j];
            const host_val *base = jd >= 0 && c->internal[jd] && c->cpu_p[jd].data ? &c->cpu_p[jd] : &in[j];
            if (!perturb(base, e->in[j].dtype, red_len(e), (uint64_t)x * 4 + (uint64_t)j, &pin[j])) s = oom(c);
        }
        if (!s && fl) s = cpu_exec(c, x, pin, &pref);
        int id = c->inter[x][3];
        if (!s && id >= 0 && c->internal[id]) { /* never in memory: later members read the CPU's */
            free(c->cpu[id].data);
            c->cpu[id] = ref;
            ref.data = NULL;
            free(c->cpu_p[id].data);
            c->cpu_p[id] = pref;
            pref.data = NULL;
        } else if (!s && id >= 0 && c->bind[id] >= 0) {
            s = value_of(c, binds, x, 3, &e->out, c->loc[x][3], id, &dev);
            int64_t n = (int64_t)(ref.bytes / vf_dtype_size(e->out.dtype));
            diff d = s ? (diff){0} : compare(e->out.dtype, dev.data, ref.data, n, false);
            double limit = nmse_limit(e->out.dtype);
            if (!s && fl) {
                double sens = compare(e->out.dtype, pref.data, ref.data, n, true).nmse;
                if (SENS_FACTOR * sens > limit) limit = SENS_FACTOR * sens;
            }
            if (!s && d.nmse > limit) s = report(c, x, &d, limit);
        } else if (!s && c->loc[x][3].kind == VF_PLAN_FIXED) { /* an assign: later reads see it */
            s = add_write(c, &e->out, &ref);
        }
        for (int j = 0; j < 3; j++) free(in[j].data), free(pin[j].data);
        free(ref.data);
        free(pref.data);
        free(dev.data);
    }
    drop_values(c);
    return s;
}

bool vf_fcheck_glsl_dir(const char *root, const char *fn, char *out, size_t len)
{
    static int counter;
    if (mkdir(root, 0777) != 0 && errno != EEXIST) {
        out[0] = '\0';
        return false;
    }
    char safe[64];
    size_t n = 0;
    for (const char *p = fn; *p && n + 1 < sizeof safe; p++)
        safe[n++] = (char)((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_');
    safe[n] = '\0';
    snprintf(out, len, "%s/vkfuse-check-%ld-%s-%d", root, (long)getpid(), safe, ++counter);
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        out[0] = '\0';
        return false;
    }
    return true;
}
