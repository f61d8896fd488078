/* vf_tape: recording ops and reverse-mode gradients (see tape.h and
 * docs/GRADIENTS.md). */
#include "autodiff/tape.h"
#include "graph/uelem.h"
#include "util/fault.h"
#include "function/trace.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vf_tape {
    vf_context *ctx;
    struct vf_tape *next;   /* the next outer active tape */
    vf_tape_entry *e;
    int n, cap;
    bool ended;
    /* Where it was begun: ops record only in the same trace (0: eager) at
       the same or a deeper frame (a branch or body traced inside). A tape
       begun outside a vf_function does not see the body's symbolic ops. */
    uint64_t gen;
    int depth;
    bool busy;              /* computing a gradient: its own ops are not recorded on it */
};

static uint64_t cur_gen(const vf_context *ctx) { return ctx->trace ? ctx->trace->gen : 0; }
static int cur_depth(const vf_context *ctx) { return ctx->trace ? ctx->trace->depth : 0; }

static bool records(const vf_tape *tp)
{
    const vf_context *ctx = tp->ctx;
    return !tp->busy && tp->gen == cur_gen(ctx) && cur_depth(ctx) >= tp->depth;
}

bool vf_tape_recording(vf_context *ctx)
{
    if (ctx->tape_mute) return false;
    for (vf_tape *tp = ctx->tapes; tp; tp = tp->next)
        if (records(tp)) return true;
    return false;
}

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

/* Whether an entry holds a user elementwise op: the pseudo-ops
   (VF_TAPE_RESHAPE, VF_TAPE_CONTROL) are past the op table's end. */
static bool holds_uelem(int op) { return op >= 0 && op < VF_OP_COUNT && vf_op_holds_uelem((vf_op)op); }

static void push(vf_tape *tp, const vf_tape_entry *src)
{
    vf_context *ctx = tp->ctx;
    if (!vf_grow((void **)&tp->e, &tp->cap, tp->n + 1, sizeof *tp->e)) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape: out of host memory (malloc failed) recording an op");
        return;
    }
    vf_tape_entry *d = &tp->e[tp->n++];
    *d = *src;
    if (d->cf) {
        d->cf->refs++;
        return;
    }
    for (int i = 0; i < d->n_in; i++) vf_tensor_hold(d->in[i]);
    vf_tensor_hold(d->out);
    if (holds_uelem(d->op)) vf_uelem_retain(d->attrs.uelem); /* its gradient needs it */
}

static void record_all(vf_context *ctx, const vf_tape_entry *en)
{
    for (vf_tape *tp = ctx->tapes; tp; tp = tp->next)
        if (records(tp)) push(tp, en);
}

void vf_tape_cf_release(vf_tape_cf *cf)
{
    if (!cf || --cf->refs > 0) return;
    for (int j = 0; j < cf->n_in; j++) vf_tensor_drop(cf->in[j]);
    for (int k = 0; k < cf->n_out; k++) vf_tensor_drop(cf->out[k]);
    free(cf->in);
    free(cf->in_key);
    free(cf->out);
    free(cf->out_key);
    free(cf->cc);
    vf_ukernel_release(cf->uk);
    free(cf->params);
    free(cf);
}

void vf_tape_record_entry(vf_context *ctx, const vf_tape_entry *en) { record_all(ctx, en); }

void vf_tape_record_exec(vf_context *ctx, const vf_exec *e, vf_tensor *out)
{
    if (!ctx->tapes || !out || !vf_tape_recording(ctx)) return;
    if (vf_op_get(e->op)->kind == VF_KIND_SOURCE) return; /* no inputs: constants */
    vf_tape_entry en = {.op = (int)e->op, .attrs = e->attrs, .n_in = e->n_in, .out = out};
    for (int i = 0; i < e->n_in; i++) {
        en.in_key[i] = e->in[i];
        en.in[i] = resolve(ctx, &e->in[i]);
    }
    en.out_key = vf_tensor_ref(out);
    record_all(ctx, &en);
}

void vf_tape_record_constant(vf_context *ctx, vf_tensor *out)
{
    if (!ctx->tapes || !out || !vf_tape_recording(ctx)) return;
    vf_tape_entry en = {.op = VF_OP_FILL, .n_in = 0, .out = out};
    en.out_key = vf_tensor_ref(out);
    record_all(ctx, &en);
}

void vf_tape_record(vf_context *ctx, int op, const vf_attrs *attrs, int n_in, vf_tensor *const *in,
                    vf_tensor *out)
{
    if (!ctx->tapes || !out || !vf_tape_recording(ctx)) return;
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

/* The context ends: active tapes drop their entries (the tensors go next). */
void vf_tapes_free_all(vf_context *ctx)
{
    for (vf_tape *tp = ctx->tapes; tp; tp = tp->next) {
        /* control-flow and call records are shared by reference count, not
           owned by the tensors that vf_tensor_free_all frees next */
        for (int i = 0; i < tp->n; i++) {
            if (tp->e[i].cf) vf_tape_cf_release(tp->e[i].cf);
            if (holds_uelem(tp->e[i].op)) vf_uelem_release(tp->e[i].attrs.uelem);
        }
        free(tp->e);
    }
    ctx->tapes = NULL;
}

/* The context of a tape, live or ended (its slot remembers): what the
   entry points lock. NULL for NULL or a pointer that is no tape. */
static vf_context *tape_context(const vf_tape *tp)
{
    return tp ? vf_handle_context(tp, VF_HANDLE_TAPE) : NULL;
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

/* What the API layer calls to note ops on the tapes (hooks.h). */
static const vf_tape_hooks tape_hooks = {
    .record_exec = vf_tape_record_exec,
    .record = vf_tape_record,
    .record_constant = vf_tape_record_constant,
    .record_kernel = vf_tape_record_kernel,
    .record_control = vf_tape_record_control,
    .record_call = vf_tape_record_call,
};

static vf_tape *tape_begin(vf_context *ctx)
{
    VF_LOCKED(ctx);
    if (!ctx) return NULL;
    vf_tape *tp = vf_handle_new(ctx, &ctx->tape_slots, sizeof(vf_tape), "vf_tape_begin");
    if (!tp) return NULL;
    tp->ctx = ctx;
    tp->gen = cur_gen(ctx);
    tp->depth = cur_depth(ctx);
    tp->next = ctx->tapes;
    ctx->tapes = tp;
    /* from now on the API layer notes ops on the tapes (hooks.h) */
    ctx->tapes_hooks = &tape_hooks;
    vf_context_on_destroy(ctx, VF_ON_DESTROY_TAPES, vf_tapes_free_all);
    vf_ctx_lock(ctx); /* held until vf_tape_end: the tape records this thread's ops only (lock.h) */
    return tp;
}

/* One convention for failed creates (vkfuse.h): the reason is the
   thread's last error as well as the context's. */
vf_tape *vf_tape_begin(vf_context *ctx)
{
    VF_LOCKED(ctx);
    vf_tape *tp = tape_begin(ctx);
    return tp ? tp : vf_create_failed(ctx, VF_OK, "vf_tape_begin");
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
    /* A live tape's thread holds the lock (vf_tape_begin): a thread that
       does not, while another does, has no open tape, and waiting would
       deadlock (as in vf_scope_end). */
    vf_context *owner = tape_context(tp);
    bool took = false;
    if (owner && !vf_ctx_locked_here(owner) && !(took = vf_ctx_trylock(owner))) {
        vf_ctx_fail_unlocked(owner, VF_ERROR_INVALID_ARGUMENT,
                             "vf_tape_end: tape #%llu is not an open tape of this thread; a tape belongs to the "
                             "thread that began it: end it on the thread that called vf_tape_begin",
                             (unsigned long long)vf_handle_id(tp, VF_HANDLE_TAPE));
        return;
    }
    VF_LOCKED(owner);
    if (took) vf_ctx_unlock(owner); /* VF_LOCKED holds it now */
    if (!tp || !tape_alive(tp, "vf_tape_end")) return;
    unlink_tape(tp);
    for (int i = 0; i < tp->n; i++) {
        if (tp->e[i].cf) {
            vf_tape_cf_release(tp->e[i].cf);
            continue;
        }
        for (int j = 0; j < tp->e[i].n_in; j++) vf_tensor_drop(tp->e[i].in[j]);
        vf_tensor_drop(tp->e[i].out);
        if (holds_uelem(tp->e[i].op)) vf_uelem_release(tp->e[i].attrs.uelem);
    }
    vf_context *ctx = tp->ctx;
    free(tp->e);
    vf_handle_kill(tp, VF_DEATH_TAPE_END, false);
    vf_ctx_unlock(ctx); /* the hold vf_tape_begin took */
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
        vf_tref *key = vf_realloc(m->key, (size_t)cap * sizeof *key);
        if (key) m->key = key;
        vf_tensor **g = vf_realloc(m->g, (size_t)cap * sizeof *g);
        if (g) m->g = g;
        bool *made = vf_realloc(m->made, (size_t)cap * sizeof *made);
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

/* An entry's inputs and outputs, for ops (n_in <= 3, one output) and
   control flow alike. */
static int e_nin(const vf_tape_entry *e) { return e->cf ? e->cf->n_in : e->n_in; }
static const vf_tref *e_inkey(const vf_tape_entry *e, int j) { return e->cf ? &e->cf->in_key[j] : &e->in_key[j]; }
static int e_nout(const vf_tape_entry *e) { return e->cf ? e->cf->n_out : 1; }
static const vf_tref *e_outkey(const vf_tape_entry *e, int k) { return e->cf ? &e->cf->out_key[k] : &e->out_key; }

static const char *entry_name(const vf_tape_entry *e)
{
    if (e->op == VF_TAPE_RESHAPE) return "reshape";
    if (e->op == VF_TAPE_CONTROL)
        return e->cf->uk ? e->cf->uk->name
             : e->cf->call ? "function_call" : e->cf->kind == VF_NODE_COND ? "cond" : "while_loop";
    return vf_op_get((vf_op)e->op)->name;
}

/* Adds gin to the gradient of the value with key k (if it carries one). */
static bool accumulate(vf_context *ctx, gmap *m, const vf_tref *k, vf_tensor *gin)
{
    int i = gin ? gmap_find(m, k) : -1;
    if (i < 0) return true;
    m->g[i] = m->g[i] ? vf_add(ctx, m->g[i], gin) : gin;
    return m->g[i] != NULL;
}

/* The reverse pass: targets[t] seeded with seeds[t] (NULL: ones). strict:
   a target the tape did not record is an error (the public entry point);
   else it contributes nothing (a constant output of a replayed branch). */
static vf_status run_gradient(vf_tape *tp, int n_t, vf_tensor *const *targets, vf_tensor *const *seeds, bool strict,
                              bool null_unconnected, int n, vf_tensor *const *sources, vf_tensor **grads)
{
    vf_context *ctx = tp->ctx;
    const char *name = "vf_tape_gradient";
    gmap m = {0};
    vf_status st = VF_OK;
    bool *dep = vf_calloc((size_t)tp->n + 1, sizeof *dep);
    vf_tensor **gout = NULL, **gin = NULL;
    if (!dep) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", name);
    /* Forward: which entries depend on a source. Only those carry
       gradients, so an op off every source's path is never asked for one. */
    for (int i = 0; i < n; i++) {
        vf_tref k = vf_tensor_ref(sources[i]);
        if (gmap_add(&m, &k) < 0) goto oom;
    }
    int max_io = 3;
    for (int i = 0; i < tp->n; i++) {
        vf_tape_entry *e = &tp->e[i];
        if (e_nin(e) > max_io) max_io = e_nin(e);
        if (e_nout(e) > max_io) max_io = e_nout(e);
        for (int j = 0; j < e_nin(e) && !dep[i]; j++) dep[i] = gmap_find(&m, e_inkey(e, j)) >= 0;
        if (!dep[i]) continue;
        bool fresh = false;
        for (int o = 0; o < e_nout(e); o++) {
            int k = gmap_add(&m, e_outkey(e, o));
            if (k < 0) goto oom;
            /* A value an earlier entry already produced (two views of one
               buffer with the same shape, e.g. x reshaped twice): the same
               value, so its gradient flows back through the first entry
               only; through both it would count twice. */
            fresh = fresh || !m.made[k];
            m.made[k] = true;
        }
        if (!fresh) dep[i] = false;
    }
    gout = vf_calloc((size_t)max_io, sizeof *gout);
    gin = vf_calloc((size_t)max_io, sizeof *gin);
    if (!gout || !gin) goto oom;
    /* Seeds: ones of each target's shape unless given. */
    bool any = false;
    for (int t = 0; t < n_t; t++) {
        vf_tref tk = vf_tensor_ref(targets[t]);
        int ti = gmap_find(&m, &tk);
        if (ti < 0 && strict) {
            /* Recorded but off every source's path: zeros (as TF's None).
               Never recorded: the tape cannot know what it depends on. */
            bool seen = false;
            for (int i = 0; i < tp->n && !seen; i++)
                for (int o = 0; o < e_nout(&tp->e[i]) && !seen; o++) seen = key_eq(e_outkey(&tp->e[i], o), &tk);
            if (!seen) {
                char a[96];
                st = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                             "%s: the target (%s) was not recorded by this tape: it was computed before "
                             "vf_tape_begin, by this tape's own vf_tape_gradient, outside the traced function the "
                             "tape is in, or is a constant (vf_fill, vf_tensor_from_host); compute it from the "
                             "sources after vf_tape_begin", name, tensor_desc(a, sizeof a, targets[t]));
                goto done;
            }
        }
        if (ti < 0) continue;
        vf_tensor *seed = seeds && seeds[t] ? seeds[t]
                                            : vf_ad_broadcast(ctx, vf_ad_scalar(ctx, targets[t]->dtype, 1.0), targets[t]);
        if (!seed || !accumulate(ctx, &m, &tk, seed)) goto fail;
        any = true;
    }
    for (int i = tp->n - 1; i >= 0 && any; i--) {
        vf_tape_entry *e = &tp->e[i];
        if (!dep[i]) continue;
        bool has = false;
        for (int o = 0; o < e_nout(e); o++) {
            int oi = gmap_find(&m, e_outkey(e, o));
            gout[o] = oi >= 0 ? m.g[oi] : NULL;
            has = has || gout[o];
        }
        if (!has) continue;
        for (int j = 0; j < e_nin(e); j++) gin[j] = NULL;
        if (e->cf) {
            if (!vf_grad_control(ctx, e, gout, gin)) goto fail;
        } else {
            vf_grad_fn rule = vf_grad_fn_of(e);
            if (!rule) {
                char a[96], b[96];
                st = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                             "%s: the gradient flows through vf_%s (input %s, output %s; op %d of %d on the "
                             "tape), which is not differentiable; compute the target without it or keep "
                             "the sources off its path", name, entry_name(e),
                             e->in[0] ? tensor_desc(a, sizeof a, e->in[0]) : "?",
                             tensor_desc(b, sizeof b, e->out), i + 1, tp->n);
                goto done;
            }
            if (!rule(ctx, e, gout[0], gin)) goto fail;
        }
        for (int j = 0; j < e_nin(e); j++)
            if (!accumulate(ctx, &m, e_inkey(e, j), gin[j])) goto fail;
    }
    for (int i = 0; i < n; i++) {
        vf_tref k = vf_tensor_ref(sources[i]);
        vf_tensor *g = m.g[gmap_find(&m, &k)];
        /* a source the targets do not depend on: zeros of its shape, or
           NULL when asked (TF's UnconnectedGradients.NONE) */
        if (!g && null_unconnected) {
            grads[i] = NULL;
            continue;
        }
        if (!g) g = vf_ad_broadcast(ctx, vf_ad_scalar(ctx, sources[i]->dtype, 0.0), sources[i]);
        else if (g->dtype != sources[i]->dtype) g = vf_cast(ctx, g, sources[i]->dtype);
        if (!g) goto fail;
        grads[i] = g;
    }
    goto done;
oom:
    st = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", name);
    goto done;
fail:
    st = ctx->err.status != VF_OK ? ctx->err.status
                                  : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: a gradient rule failed", name);
done:
    free(dep);
    free(gout);
    free(gin);
    free(m.key);
    free(m.g);
    free(m.made);
    return st;
}

/* Empty values carry no gradient but an empty one, and the tape cannot
   tell them apart (they have no memory, so no key; ops that produce
   nothing run no kernel and record nothing): an empty source gets zeros of
   its shape, and when every source or every target is empty nothing is
   asked of the tape (a target computed from empty tensors only is then
   not an unrecorded target, just a constant). The rest go to
   run_gradient. */
static vf_status empty_sources(vf_tape *tp, int n_t, vf_tensor *const *targets, vf_tensor *const *seeds,
                               bool strict, bool nul, int n, vf_tensor *const *sources, vf_tensor **out)
{
    vf_context *ctx = tp->ctx;
    bool all_targets_empty = n_t > 0;
    for (int t = 0; t < n_t; t++) all_targets_empty = all_targets_empty && targets[t]->numel == 0;
    int ne = 0;
    for (int i = 0; i < n; i++) ne += sources[i]->numel != 0;
    if (ne == n && !all_targets_empty) return run_gradient(tp, n_t, targets, seeds, strict, nul, n, sources, out);
    vf_tensor **src = vf_calloc((size_t)ne + 1, sizeof *src), **g = vf_calloc((size_t)ne + 1, sizeof *g);
    if (!src || !g) {
        free(src);
        free(g);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tape_gradient: out of host memory (malloc failed)");
    }
    for (int i = 0, k = 0; i < n; i++)
        if (sources[i]->numel != 0) src[k++] = sources[i];
    vf_status st = ne > 0 && !all_targets_empty ? run_gradient(tp, n_t, targets, seeds, strict, nul, ne, src, g) : VF_OK;
    for (int i = 0, k = 0; i < n && st == VF_OK; i++) {
        vf_tensor *si = sources[i];
        bool from_g = si->numel != 0 && !all_targets_empty;
        out[i] = from_g ? g[k++] : vf_fill(ctx, si->dtype, si->rank, si->shape, 0.0);
        if (si->numel != 0 && all_targets_empty) k++;
        if (!out[i] && !(from_g && nul)) st = ctx->err.status;
    }
    free(src);
    free(g);
    return st;
}

static vf_status gradient(vf_tape *tp, int n_t, vf_tensor *const *targets, vf_tensor *const *seeds, bool strict,
                          bool nul, int n, vf_tensor *const *sources, vf_tensor **grads)
{
    if (!tp) return VF_ERROR_INVALID_ARGUMENT;
    if (!tape_alive(tp, "vf_tape_gradient")) return VF_ERROR_INVALID_ARGUMENT;
    vf_context *ctx = tp->ctx;
    const char *name = "vf_tape_gradient";
    for (int t = 0; t < n_t; t++) {
        if (!targets[t]) return ctx->err.status != VF_OK ? ctx->err.status
                                                         : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: target is NULL", name);
        if (!vf_check_input(ctx, name, targets[t], 0)) return ctx->err.status;
        if (!vf_dtype_is_float(targets[t]->dtype))
            return vf_fail(ctx, VF_ERROR_DTYPE, "%s: target is %s; gradients need a float target", name,
                           vf_dtype_name(targets[t]->dtype));
    }
    if (n < 0 || (n > 0 && (!sources || !grads)))
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: n is %d with sources/grads %s; pass n >= 0 "
                       "and both arrays", name, n, sources && grads ? "set" : "NULL");
    for (int i = 0; i < n; i++) grads[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!sources[i])
            return ctx->err.status != VF_OK ? ctx->err.status
                                            : vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: source %d is NULL", name, i);
        if (!vf_check_input(ctx, name, sources[i], i + 1)) return ctx->err.status;
        /* only float values carry gradients; an integer source would only
           ever get zeros, which hides the mistake */
        if (!vf_dtype_is_float(sources[i]->dtype)) {
            char sh[VF_SHAPE_STR_LEN];
            return vf_fail(ctx, VF_ERROR_DTYPE, "%s: source %d is %s %s; gradients exist only for float "
                           "sources (cast it to a float type before the ops to differentiate)", name, i,
                           vf_dtype_name(sources[i]->dtype),
                           vf_shape_str(sh, sizeof sh, sources[i]->rank, sources[i]->shape));
        }
    }
    if (tp->busy)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: this tape is already computing a gradient", name);
    /* The gradient's own ops are not recorded on this tape, but are on the
       other active tapes (an outer tape differentiates them again: higher
       order). Intermediates die with a scope; the results move to the
       caller's. */
    tp->busy = true;
    vf_scope_begin(ctx);
    vf_tensor *tmp[64];
    vf_tensor **out = n <= 64 ? tmp : vf_calloc((size_t)n, sizeof *out);
    vf_status st = out ? empty_sources(tp, n_t, targets, seeds, strict, nul, n, sources, out)
                       : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", name);
    for (int i = 0; i < n && st == VF_OK; i++) {
        /* a source itself (possible for an identity) must not be moved */
        grads[i] = !out[i] ? NULL : out[i]->scope == ctx->n_scopes - 1 ? vf_keep(out[i]) : out[i];
    }
    vf_scope_end(ctx);
    if (out != tmp) free(out);
    tp->busy = false;
    if (st != VF_OK)
        for (int i = 0; i < n; i++) grads[i] = NULL;
    return st;
}

vf_status vf_tape_gradient_ex(vf_tape *tp, vf_tensor *target, int n, vf_tensor *const *sources, vf_tensor **grads,
                              unsigned flags)
{
    VF_LOCKED(tape_context(tp));
    if (!tp) return VF_ERROR_INVALID_ARGUMENT;
    if (!tape_alive(tp, "vf_tape_gradient")) return VF_ERROR_INVALID_ARGUMENT;
    if (!target)
        return tp->ctx->err.status != VF_OK ? tp->ctx->err.status
                                            : vf_fail(tp->ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient: target is NULL");
    if (flags & ~VF_TAPE_UNCONNECTED_NULL)
        return vf_fail(tp->ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tape_gradient_ex: flags 0x%x has unknown bits; pass 0 "
                       "or VF_TAPE_UNCONNECTED_NULL", flags);
    return gradient(tp, 1, &target, NULL, true, (flags & VF_TAPE_UNCONNECTED_NULL) != 0, n, sources, grads);
}

vf_status vf_tape_gradient(vf_tape *tp, vf_tensor *target, int n, vf_tensor *const *sources, vf_tensor **grads)
{
    VF_LOCKED(tape_context(tp));
    return vf_tape_gradient_ex(tp, target, n, sources, grads, 0);
}

vf_status vf_tape_vjp(vf_tape *tp, int n_t, vf_tensor *const *targets, vf_tensor *const *seeds, int n,
                      vf_tensor *const *sources, vf_tensor **grads)
{
    return gradient(tp, n_t, targets, seeds, false, false, n, sources, grads);
}
