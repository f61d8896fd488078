/* vf_tape: recording ops and reverse-mode gradients (see tape.h and
 * docs/GRADIENTS.md). */
#include "frontend/tape.h"
#include "util/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vf_tape {
    vf_context *ctx;
    struct vf_tape *next;   /* the next outer active tape */
    vf_tape_entry *e;
    int n, cap;
    bool ended;
};

static bool key_eq(const vf_tref *a, const vf_tref *b)
{
    return a->buf == b->buf && a->offset == b->offset && a->dtype == b->dtype && a->rank == b->rank &&
           memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->rank) == 0;
}

/* The tensor behind an exec's input ref: any alias will do, they are the
   same value (and retaining one keeps the storage). */
static vf_tensor *resolve(vf_context *ctx, const vf_tref *r)
{
    for (vf_tensor *t = ctx->live; t; t = t->next) {
        vf_tref k = vf_tensor_ref(t);
        if ((t->st || t->sym_gen) && key_eq(&k, r)) return t;
    }
    return NULL;
}

static void push(vf_tape *tp, const vf_tape_entry *src)
{
    vf_context *ctx = tp->ctx;
    if (tp->n == tp->cap) {
        int cap = tp->cap ? tp->cap * 2 : 32;
        vf_tape_entry *e = realloc(tp->e, (size_t)cap * sizeof *e);
        if (!e) {
            vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape: out of host memory recording an op");
            return;
        }
        tp->e = e;
        tp->cap = cap;
    }
    vf_tape_entry *d = &tp->e[tp->n++];
    *d = *src;
    for (int i = 0; i < d->n_in; i++) vf_tensor_retain(d->in[i]);
    vf_tensor_retain(d->out);
}

static void record_all(vf_context *ctx, const vf_tape_entry *en)
{
    for (vf_tape *tp = ctx->tapes; tp; tp = tp->next) push(tp, en);
}

void vf_tape_record_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out)
{
    if (!ctx->tapes || ctx->tape_mute || !out) return;
    if (e->op == VF_OP_FILL || e->op == VF_OP_RANDOM_NORMAL) return; /* no inputs: constants */
    vf_tape_entry en = {.op = (int)e->op, .attrs = e->attrs, .n_in = e->n_in, .out = out};
    for (int i = 0; i < e->n_in; i++) {
        en.in_key[i] = e->in[i];
        en.in[i] = resolve(ctx, &e->in[i]);
    }
    en.out_key = vf_tensor_ref(out);
    record_all(ctx, &en);
}

void vf_tape_record(vf_context *ctx, int op, const vf_attrs *attrs, int n_in, vf_tensor *const *in,
                    vf_tensor *out)
{
    if (!ctx->tapes || ctx->tape_mute || !out) return;
    vf_tape_entry en = {.op = op, .attrs = *attrs, .n_in = n_in, .out = out};
    for (int i = 0; i < n_in; i++) {
        en.in[i] = in[i];
        en.in_key[i] = vf_tensor_ref(in[i]);
    }
    en.out_key = vf_tensor_ref(out);
    if (n_in == 1 && key_eq(&en.in_key[0], &en.out_key)) return; /* an alias: the same value */
    record_all(ctx, &en);
}

/* Tapes live in never-reused slots like tensors (handles.h): a tape per
   training step costs a state byte once ended, and a stale vf_tape * is an
   error. */
void vf_tape_slots_init(vf_context *ctx) { vf_handles_init(&ctx->tape_slots, VF_HANDLE_TAPE, sizeof(vf_tape)); }

/* The context ends: active tapes drop their entries (the tensors go next). */
void vf_tapes_free_all(vf_context *ctx)
{
    for (vf_tape *tp = ctx->tapes; tp; tp = tp->next) free(tp->e);
    ctx->tapes = NULL;
}

/* tp is a live tape; else the error goes to its context. */
static bool tape_alive(const vf_tape *tp, const char *op)
{
    vf_handle_state h = vf_handle_state_of(tp, VF_HANDLE_TAPE);
    if (h.what == VF_HANDLE_LIVE) return true;
    if (h.what == VF_HANDLE_DEAD)
        vf_fail(h.ctx, VF_ERROR_INVALID_ARGUMENT, "%s: tape #%llu was %sended by vf_tape_end; begin a new tape "
                "with vf_tape_begin (a tape records until it ends, and its gradients must be taken before)", op,
                (unsigned long long)h.id, strcmp(op, "vf_tape_end") == 0 ? "already " : "");
    return false;
}

vf_tape *vf_tape_begin(vf_context *ctx)
{
    if (!ctx) return NULL;
    vf_tape *tp = vf_handle_alloc(&ctx->tape_slots, ctx);
    if (!tp) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape_begin: out of host memory");
        return NULL;
    }
    tp->ctx = ctx;
    tp->next = ctx->tapes;
    ctx->tapes = tp;
    return tp;
}

static void unlink_tape(vf_tape *tp)
{
    for (vf_tape **p = &tp->ctx->tapes; *p; p = &(*p)->next)
        if (*p == tp) {
            *p = tp->next;
            return;
        }
}

void vf_tape_end(vf_tape *tp)
{
    if (!tp || !tape_alive(tp, "vf_tape_end")) return;
    unlink_tape(tp);
    for (int i = 0; i < tp->n; i++) {
        for (int j = 0; j < tp->e[i].n_in; j++) vf_tensor_release(tp->e[i].in[j]);
        vf_tensor_release(tp->e[i].out);
    }
    free(tp->e);
    vf_handle_kill(tp, VF_DEATH_TAPE_END, false);
}

/* ---- gradients ----------------------------------------------------------- */

typedef struct {
    vf_tref *key;
    vf_tensor **g;    /* NULL: no gradient yet */
    bool *made;       /* an entry on the tape produced this value */
    int n, cap;
} gmap;

static int gmap_find(const gmap *m, const vf_tref *k)
{
    for (int i = 0; i < m->n; i++)
        if (key_eq(&m->key[i], k)) return i;
    return -1;
}

static int gmap_add(gmap *m, const vf_tref *k)
{
    int i = gmap_find(m, k);
    if (i >= 0) return i;
    if (m->n == m->cap) {
        int cap = m->cap ? m->cap * 2 : 32;
        vf_tref *key = realloc(m->key, (size_t)cap * sizeof *key);
        if (key) m->key = key;
        vf_tensor **g = realloc(m->g, (size_t)cap * sizeof *g);
        if (g) m->g = g;
        bool *made = realloc(m->made, (size_t)cap * sizeof *made);
        if (made) m->made = made;
        if (!key || !g || !made) return -1;
        m->cap = cap;
    }
    m->key[m->n] = *k;
    m->g[m->n] = NULL;
    m->made[m->n] = false;
    return m->n++;
}

static const char *tensor_desc(char *buf, size_t len, const vf_tensor *t)
{
    char sh[VF_SHAPE_STR_LEN];
    snprintf(buf, len, "%s %s", vf_dtype_name(t->dtype), vf_shape_str(sh, sizeof sh, t->rank, t->shape));
    return buf;
}

static vf_status run_gradient(vf_tape *tp, vf_tensor *target, int n, vf_tensor *const *sources,
                              vf_tensor **grads)
{
    vf_context *ctx = tp->ctx;
    const char *name = "vf_tape_gradient";
    gmap m = {0};
    vf_status st = VF_OK;
    bool *dep = calloc((size_t)tp->n + 1, sizeof *dep);
    if (!dep) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    /* Forward: which entries depend on a source. Only those carry
       gradients, so an op off every source's path is never asked for one. */
    for (int i = 0; i < n; i++) {
        vf_tref k = vf_tensor_ref(sources[i]);
        if (gmap_add(&m, &k) < 0) goto oom;
    }
    for (int i = 0; i < tp->n; i++) {
        vf_tape_entry *e = &tp->e[i];
        for (int j = 0; j < e->n_in && !dep[i]; j++) dep[i] = gmap_find(&m, &e->in_key[j]) >= 0;
        if (!dep[i]) continue;
        int k = gmap_add(&m, &e->out_key);
        if (k < 0) goto oom;
        /* A value an earlier entry already produced (two views of one
           buffer with the same shape, e.g. x reshaped twice): the same
           value, so its gradient flows back through the first entry only;
           through both it would count twice. */
        if (m.made[k]) dep[i] = false;
        m.made[k] = true;
    }
    /* Seed: ones of the target's shape. */
    vf_tref tk = vf_tensor_ref(target);
    int ti = gmap_find(&m, &tk);
    if (ti >= 0) {
        m.g[ti] = vf_ad_broadcast(ctx, vf_ad_scalar(ctx, target->dtype, 1.0), target);
        if (!m.g[ti]) goto fail;
    }
    for (int i = tp->n - 1; i >= 0 && ti >= 0; i--) {
        vf_tape_entry *e = &tp->e[i];
        if (!dep[i]) continue;
        int oi = gmap_find(&m, &e->out_key);
        vf_tensor *g = oi >= 0 ? m.g[oi] : NULL;
        if (!g) continue;
        vf_grad_fn rule = vf_grad_rule(e);
        if (!rule) {
            char a[96], b[96];
            const char *op = e->op == VF_TAPE_RESHAPE ? "reshape" : vf_op_get((vf_op)e->op)->name;
            st = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                         "%s: the gradient flows through vf_%s (input %s, output %s; op %d of %d on the "
                         "tape), which is not differentiable; compute the target without it or keep "
                         "the sources off its path", name, op,
                         e->in[0] ? tensor_desc(a, sizeof a, e->in[0]) : "?",
                         tensor_desc(b, sizeof b, e->out), i + 1, tp->n);
            goto done;
        }
        vf_tensor *gin[3] = {NULL, NULL, NULL};
        if (!rule(ctx, e, g, gin)) goto fail;
        for (int j = 0; j < e->n_in; j++) {
            if (!gin[j] || gmap_find(&m, &e->in_key[j]) < 0) continue;
            int k = gmap_find(&m, &e->in_key[j]);
            m.g[k] = m.g[k] ? vf_add(ctx, m.g[k], gin[j]) : gin[j];
            if (!m.g[k]) goto fail;
        }
    }
    for (int i = 0; i < n; i++) {
        vf_tref k = vf_tensor_ref(sources[i]);
        vf_tensor *g = m.g[gmap_find(&m, &k)];
        /* an unused source: zeros of its shape, not an error */
        if (!g) g = vf_ad_broadcast(ctx, vf_ad_scalar(ctx, sources[i]->dtype, 0.0), sources[i]);
        else if (g->dtype != sources[i]->dtype) g = vf_cast(ctx, g, sources[i]->dtype);
        if (!g) goto fail;
        grads[i] = g;
    }
    goto done;
oom:
    st = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    goto done;
fail:
    st = ctx->err.status != VF_OK ? ctx->err.status
                                  : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: a gradient rule failed", name);
done:
    free(dep);
    free(m.key);
    free(m.g);
    free(m.made);
    return st;
}

vf_status vf_tape_gradient(vf_tape *tp, vf_tensor *target, int n, vf_tensor *const *sources,
                           vf_tensor **grads)
{
    if (!tp) return VF_ERROR_INVALID_ARGUMENT;
    if (!tape_alive(tp, "vf_tape_gradient")) return VF_ERROR_INVALID_ARGUMENT;
    vf_context *ctx = tp->ctx;
    const char *name = "vf_tape_gradient";
    if (!target) return ctx->err.status != VF_OK ? ctx->err.status
                                                 : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: target is NULL", name);
    if (n < 0 || (n > 0 && (!sources || !grads)))
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: n is %d with sources/grads %s; pass n >= 0 "
                       "and both arrays", name, n, sources && grads ? "set" : "NULL");
    for (int i = 0; i < n; i++) {
        grads[i] = NULL;
        if (!sources[i])
            return ctx->err.status != VF_OK ? ctx->err.status
                                            : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: source %d is NULL", name, i);
        if (!vf_check_input(ctx, name, sources[i], i + 1)) return ctx->err.status;
    }
    if (!vf_check_input(ctx, name, target, 0)) return ctx->err.status;
    if (!vf_dtype_is_float(target->dtype))
        return vf_fail(ctx, VF_ERROR_DTYPE, "%s: target is %s; gradients need a float target", name,
                       vf_dtype_name(target->dtype));
    /* The gradient's own ops are not recorded (on this tape or any other):
       higher-order gradients are not supported. Intermediates die with a
       scope; the results move to the caller's. */
    ctx->tape_mute++;
    vf_scope_begin(ctx);
    vf_tensor *tmp[64];
    vf_tensor **out = n <= 64 ? tmp : calloc((size_t)n, sizeof *out);
    vf_status st = out ? run_gradient(tp, target, n, sources, out)
                       : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory", name);
    for (int i = 0; i < n && st == VF_OK; i++) {
        /* a source itself (possible for an identity) must not be moved */
        grads[i] = out[i]->scope == ctx->n_scopes - 1 ? vf_keep(out[i]) : out[i];
    }
    vf_scope_end(ctx);
    if (out != tmp) free(out);
    ctx->tape_mute--;
    if (st != VF_OK)
        for (int i = 0; i < n; i++) grads[i] = NULL;
    return st;
}
