/* Tensors and their lifetime: scopes, references, storage, host I/O. */
#include "api/api.h"
#include "util/dims.h"
#include "api/hooks.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *vf_shape_str(char *buf, size_t len, int rank, const int64_t *shape)
{
    return vf_dims_fmt(buf, len, "", rank, shape, 0, NULL);
}

bool vf_check_shape(vf_context *ctx, const char *op, int rank, const int64_t *shape, int64_t *numel)
{
    if (rank < 0 || rank > VF_MAX_RANK) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: rank %d is out of range; use 0..%d", op, rank,
                VF_MAX_RANK);
        return false;
    }
    if (rank > 0 && !shape) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: shape is NULL for rank %d; pass %d dims", op,
                rank, rank);
        return false;
    }
    int64_t n = 1;
    bool overflow = false, empty = false;
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 0) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: dim %d is %lld; dims must be >= 0", op, i,
                    (long long)shape[i]);
            return false;
        }
        if (shape[i] == 0) empty = true;
        else if (n > ((int64_t)1 << 50) / shape[i]) overflow = true;
        else n *= shape[i];
    }
    if (empty) n = 0;
    else if (overflow) {
        char s[VF_SHAPE_STR_LEN];
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: shape %s has more than 2^50 elements", op,
                vf_shape_str(s, sizeof s, rank, shape));
        return false;
    }
    *numel = n;
    return true;
}

/* A dead handle's message: how it died and what to do instead. */
static bool dead_handle(vf_context *ctx, const char *op, const vf_handle_state *h, int index)
{
    char who[96];
    const char *vf = strncmp(op, "vf_", 3) ? "vf_" : "";
    if (index >= 0) snprintf(who, sizeof who, "input %d is tensor #%llu, which", index, (unsigned long long)h->id);
    else snprintf(who, sizeof who, "tensor #%llu", (unsigned long long)h->id);
    if (h->symbolic && h->death == VF_DEATH_SCOPE) {
        vf_fail(ctx, VF_ERROR_TRACE,
                "%s%s: %s was a symbolic tensor of a vf_function trace, freed when its scope ended: the trace "
                "has ended (it leaked out of the function body, e.g. kept in a global) or an inner scope of the "
                "body did; return it as an output of the function instead (or vf_keep it out of the inner scope)",
                vf, op, who);
        return false;
    }
    bool again = strcmp(op, "vf_tensor_release") == 0;
    const char *fix = h->death == VF_DEATH_SCOPE
        ? "the scope that owned it ended; move it to the enclosing scope with vf_keep, or hold a reference "
          "with vf_tensor_retain (and release it when done)"
        : h->death == VF_DEATH_RELEASE
        ? "its last reference was released; release a tensor after its last use, or hold another reference "
          "with vf_tensor_retain"
        : h->death == VF_DEATH_FORGOTTEN
        ? "use a tensor only while the scope that owns it is open or a reference to it is held"
        : "it was never valid";
    vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s%s: %s was %sreleased by %s: %s", vf, op, who, again ? "already " : "",
            vf_death_name(h->death), fix);
    return false;
}

bool vf_check_alive(vf_context *ctx, const char *op, const vf_tensor *t, int index)
{
    vf_handle_state h = vf_handle_state_of(t, VF_HANDLE_TENSOR);
    if (h.what == VF_HANDLE_LIVE) return true;
    if (h.what == VF_HANDLE_DEAD) return dead_handle(ctx ? ctx : h.ctx, op, &h, index);
    if (ctx)
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s%s: %s is not a vf_tensor handle (a pointer the library never "
                "returned, or a vf_tape)", strncmp(op, "vf_", 3) ? "vf_" : "", op, index >= 0 ? "the input" : "the tensor");
    return false;
}

bool vf_check_input(vf_context *ctx, const char *op, const vf_tensor *t, int index)
{
    if (!vf_check_alive(ctx, op, t, index)) return false;
    if (t->sym_gen && t->ctx == ctx) return vf_tracer_of(ctx)->check(ctx, t, op, index) == VF_OK;
    if (t->ctx != ctx) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                "%s: input %d belongs to another vf_context; tensors cannot cross contexts "
                "(read it with vf_tensor_read and recreate it with vf_tensor_from_host)", op, index);
        return false;
    }
    return true;
}

/* ---- scopes ----------------------------------------------------------- */

static bool scope_add(vf_context *ctx, int depth, vf_tensor *t)
{
    vf_scope *s = &ctx->scopes[depth];
    if (!vf_grow((void **)&s->items, &s->cap, s->n + 1, sizeof *s->items)) return false;
    t->scope = depth;
    t->slot = s->n;
    s->items[s->n++] = t;
    return true;
}

static void scope_remove(vf_context *ctx, vf_tensor *t)
{
    vf_scope *s = &ctx->scopes[t->scope];
    vf_tensor *last = s->items[--s->n];
    s->items[t->slot] = last;
    last->slot = t->slot;
    t->scope = -1;
}

void vf_scope_begin(vf_context *ctx)
{
    if (!ctx) return;
    VF_LOCKED(ctx);
    int old = ctx->cap_scopes;
    if (!vf_grow((void **)&ctx->scopes, &ctx->cap_scopes, ctx->n_scopes + 1, sizeof *ctx->scopes)) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_scope_begin: out of host memory (malloc failed)");
        return;
    }
    memset(ctx->scopes + old, 0, (size_t)(ctx->cap_scopes - old) * sizeof *ctx->scopes);
    ctx->scopes[ctx->n_scopes++].n = 0;
    vf_ctx_lock(ctx); /* held until the matching vf_scope_end: the scope is this thread's (lock.h) */
}

static void tensor_destroy(vf_tensor *t, int how);

void vf_scope_end(vf_context *ctx)
{
    if (!ctx) return;
    /* A thread with a scope open holds the lock (vf_scope_begin), so one
       that does not, while another thread does, has none: the open scopes
       are the other thread's. Waiting for its hold would deadlock when it
       waits for this one (lock.h): fail at once instead. */
    bool took = false;
    if (!vf_ctx_locked_here(ctx) && !(took = vf_ctx_trylock(ctx))) {
        vf_ctx_fail_unlocked(ctx, VF_ERROR_INVALID_ARGUMENT,
                             "vf_scope_end: no open scope on this thread while another thread holds the context; "
                             "a scope belongs to the thread that began it: end it with vf_scope_end on the "
                             "thread that called vf_scope_begin");
        return;
    }
    VF_LOCKED(ctx);
    if (took) vf_ctx_unlock(ctx); /* VF_LOCKED holds it now */
    if (ctx->n_scopes <= 1) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                "vf_scope_end: no open scope; every vf_scope_end needs a vf_scope_begin before it");
        return;
    }
    vf_scope *s = &ctx->scopes[ctx->n_scopes - 1];
    while (s->n > 0) {
        vf_tensor *t = s->items[s->n - 1];
        scope_remove(ctx, t);
        if (--t->refs == 0) tensor_destroy(t, VF_DEATH_SCOPE);
    }
    ctx->n_scopes--;
    vf_ctx_unlock(ctx); /* the hold vf_scope_begin took */
}

vf_tensor *vf_keep(vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    if (!t) return NULL;
    if (!vf_check_alive(NULL, "vf_keep", t, -1)) return NULL;
    if (t->scope <= 0) return t;
    vf_context *ctx = t->ctx;
    int to = t->scope - 1;
    scope_remove(ctx, t);
    if (!scope_add(ctx, to, t)) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_keep: out of host memory (malloc failed)");
        if (--t->refs == 0) tensor_destroy(t, VF_DEATH_SCOPE);
        return NULL;
    }
    return t;
}

vf_tensor *vf_tensor_retain(vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    if (!t || !vf_check_alive(NULL, "vf_tensor_retain", t, -1)) return NULL;
    t->refs++;
    return t;
}

static void storage_release(vf_context *ctx, vf_storage *st)
{
    if (!st || --st->refs > 0) return;
    if (st->buf && ctx->be.iface) ctx->be.iface->free(ctx->be.self, st->buf);
    free(st);
}

/* The slot stays, marked dead with how (handles.h): later uses of t are
   errors that say so. */
static void tensor_destroy(vf_tensor *t, int how)
{
    vf_context *ctx = t->ctx;
    if (t->scope >= 0) scope_remove(ctx, t);
    if (t->prev) t->prev->next = t->next;
    else ctx->live = t->next;
    if (t->next) t->next->prev = t->prev;
    storage_release(ctx, t->st);
    /* a dead slot points at nothing: LeakSanitizer scans the slabs (handles.c),
       and a stale pointer there could hide a real leak at a reused address */
    t->st = NULL;
    t->prev = t->next = NULL;
    if (how) vf_handle_kill(t, (vf_death)how, t->sym_gen != 0); /* 0: the context ends, its slabs go next */
}

/* A function body's own release of one of its variable inputs: they go
   by reference (function.c), so the reference is the caller's, and the
   caller's variable would die with the function. Refused with an error
   naming the function and the input, so the trace fails and nothing dies.
   Only the body's direct calls count (one lock level below the call):
   releases inside other calls are the library's own (a tape ending). */
static bool body_input_release(vf_tensor *t)
{
    vf_context *ctx = t->ctx;
    if (!t->is_variable || !ctx->body.vars || vf_ctx_lock_depth(ctx) != ctx->body.depth + 1) return false;
    for (int i = 0; i < ctx->body.n; i++)
        if (ctx->body.vars[i] == t) {
            vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                    "vf_tensor_release: the body of '%s' released its input %d (tensor #%llu), a variable passed "
                    "by reference; a function body must not release its inputs, which belong to the caller (the "
                    "release is ignored)", ctx->body.fn, i,
                    (unsigned long long)vf_handle_state_of(t, VF_HANDLE_TENSOR).id);
            return true;
        }
    return false;
}

static void release_locked(vf_tensor *t);

/* A release never waits for another thread's hold of the context: it is
   queued and done by the holder (lock.h), so that a thread dropping a
   tensor of a context another thread is using (Python's garbage collector
   runs wherever it runs) cannot deadlock against that thread waiting for
   this one (a collective, a join). */
void vf_tensor_release(vf_tensor *t)
{
    vf_context *ctx = vf_tensor_context(t);
    bool took = false;
    if (ctx && !vf_ctx_locked_here(ctx)) {
        if (vf_ctx_trylock(ctx)) took = true;
        else if (vf_ctx_queue_release(ctx, t)) return;
        /* else out of host memory for the queue: wait for the lock instead */
    }
    VF_LOCKED(ctx);
    release_locked(t);
    if (took) vf_ctx_unlock(ctx);
}

void vf_tensor_release_queued(vf_context *ctx)
{
    for (;;) {
        int n;
        void **q = vf_ctx_take_releases(ctx, &n);
        if (!q) return;
        /* As a release that waited for the lock: one whose tensor died
           meanwhile (its scope ended) is the "already released" error. */
        for (int i = 0; i < n; i++) release_locked(q[i]);
        free(q);
    }
}

static void release_locked(vf_tensor *t)
{
    if (!t || !vf_check_alive(NULL, "vf_tensor_release", t, -1)) return;
    if (body_input_release(t)) return;
    /* Whose reference goes: the caller's own (vf_tensor_retain) first, then
       the scope's ownership, ended early; never the library's (a tape's),
       which it drops itself. Counting a tape's reference as the caller's
       took it here and left the scope owning the tensor, so the scope's end
       dropped one more and the tape's end found it freed. */
    bool owned = t->scope >= 0;
    if (t->refs - t->held - (owned ? 1 : 0) == 0) {
        if (!owned) {
            vf_fail(t->ctx, VF_ERROR_INVALID_ARGUMENT,
                    "vf_tensor_release: tensor #%llu was released once too often: its scope no longer owns it "
                    "and every reference taken with vf_tensor_retain was released (it lives on only while the "
                    "library holds it: a gradient tape until vf_tape_end, a function that holds a variable); "
                    "release a tensor once per vf_tensor_retain, plus once to end its scope's ownership early "
                    "(the release is ignored)", (unsigned long long)vf_handle_state_of(t, VF_HANDLE_TENSOR).id);
            return;
        }
        scope_remove(t->ctx, t);
    }
    if (--t->refs == 0) tensor_destroy(t, VF_DEATH_RELEASE);
}

vf_tensor *vf_tensor_hold(vf_tensor *t)
{
    if (!t || !vf_check_alive(NULL, "vf_tensor_retain", t, -1)) return NULL;
    t->refs++;
    t->held++;
    return t;
}

void vf_tensor_drop(vf_tensor *t)
{
    if (!t || !vf_check_alive(NULL, "vf_tensor_release", t, -1)) return;
    t->held--;
    if (--t->refs == 0) tensor_destroy(t, VF_DEATH_RELEASE);
}

void vf_tensor_disown(vf_tensor *t)
{
    if (!t || !vf_check_alive(NULL, "vf_tensor_release", t, -1) || t->scope < 0) return;
    scope_remove(t->ctx, t);
    if (--t->refs == 0) tensor_destroy(t, VF_DEATH_RELEASE);
}

/* Frees every tensor of ctx, whoever holds it: tensors die with their
   context (and their slots with its slabs). */
void vf_tensor_free_all(vf_context *ctx)
{
    for (int i = 0; i < ctx->n_scopes; i++) ctx->scopes[i].n = 0;
    while (ctx->live) {
        ctx->live->scope = -1;
        tensor_destroy(ctx->live, 0);
    }
}

/* ---- creation ---------------------------------------------------------- */

static vf_tensor *tensor_alloc(vf_context *ctx, const char *op, vf_dtype dtype, int rank,
                               const int64_t *shape, int64_t *numel)
{
    if (!ctx->be.iface) {
        vf_fail(ctx, VF_ERROR_DEVICE, "%s: this context has no backend (its creation failed)", op);
        return NULL;
    }
    if (!vf_dtype_valid((int)dtype)) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: dtype %d is not a vf_dtype", op, (int)dtype);
        return NULL;
    }
    if (!vf_check_shape(ctx, op, rank, shape, numel)) return NULL;
    vf_tensor *t = vf_handle_alloc(&ctx->tensor_slots, ctx); /* zeroed, never reused */
    if (!t) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        return NULL;
    }
    t->ctx = ctx;
    t->dtype = dtype;
    t->rank = rank;
    for (int i = 0; i < rank; i++) t->shape[i] = shape[i];
    t->numel = *numel;
    t->refs = 1;
    t->scope = -1;
    if (!scope_add(ctx, ctx->n_scopes - 1, t)) {
        vf_handle_kill(t, VF_DEATH_INTERNAL, false);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        return NULL;
    }
    t->next = ctx->live;
    if (ctx->live) ctx->live->prev = t;
    ctx->live = t;
    return t;
}

vf_tensor *vf_tensor_new(vf_context *ctx, const char *op, vf_dtype dtype, int rank, const int64_t *shape)
{
    VF_ASSERT_LOCKED(ctx);
    int64_t numel;
    vf_tensor *t = tensor_alloc(ctx, op, dtype, rank, shape, &numel);
    if (t && ctx->trace) { /* symbolic: the trace hooks give it a value */
        t->sym_gen = ctx->trace_gen;
        t->sym_value = -1;
        return t;
    }
    if (!t || numel == 0) return t;
    vf_storage *st = vf_calloc(1, sizeof *st);
    if (!st) {
        vf_tensor_release(t);
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "%s: out of host memory (malloc failed)", op);
        return NULL;
    }
    st->refs = 1;
    st->bytes = (size_t)numel * vf_dtype_size(dtype);
    vf_status s = ctx->be.iface->alloc(ctx->be.self, st->bytes, &st->buf);
    if (s != VF_OK) {
        char sh[VF_SHAPE_STR_LEN];
        vf_backend_failed(ctx, s, "%s: could not allocate %zu bytes for a %s %s tensor", op, st->bytes,
                          vf_dtype_name(dtype), vf_shape_str(sh, sizeof sh, rank, shape));
        free(st);
        vf_tensor_release(t);
        return NULL;
    }
    t->st = st;
    return t;
}

vf_tensor *vf_tensor_view(vf_tensor *src, int rank, const int64_t *shape)
{
    VF_ASSERT_LOCKED(src->ctx);
    int64_t numel;
    vf_tensor *t = tensor_alloc(src->ctx, "vf_reshape", src->dtype, rank, shape, &numel);
    if (!t) return NULL;
    if (src->ctx->trace) {
        t->sym_gen = src->ctx->trace_gen;
        return vf_tracer_of(src->ctx)->view(src, t);
    }
    t->st = src->st;
    t->offset = src->offset;
    if (t->st) t->st->refs++;
    return t;
}

vf_tref vf_tensor_ref(const vf_tensor *t)
{
    vf_tref r = {.buf = t->st ? t->st->buf : NULL, .offset = t->offset, .dtype = t->dtype, .rank = t->rank};
    for (int i = 0; i < t->rank; i++) r.shape[i] = t->shape[i];
    if (t->sym_gen) vf_tracer_of(t->ctx)->ref(t, &r);
    return r;
}

vf_tensor *vf_run(vf_context *ctx, vf_exec *e, vf_tensor *out)
{
    VF_ASSERT_LOCKED(ctx);
    e->out = vf_tensor_ref(out);
    if (ctx->trace) {
        out = vf_tracer_of(ctx)->exec(ctx, e, out);
        vf_note_exec(ctx, e, out); /* gradient tapes (tape.c) */
        return out;
    }
    vf_status s = ctx->be.iface->exec(ctx->be.self, e);
    if (s != VF_OK) {
        vf_backend_failed(ctx, s, "vf_%s (%s backend)", vf_op_get(e->op)->name, ctx->be.iface->name);
        vf_tensor_release(out);
        return NULL;
    }
    vf_note_exec(ctx, e, out);
    return out;
}

bool vf_fill_into(vf_context *ctx, vf_tensor *t, double value)
{
    VF_ASSERT_LOCKED(ctx);
    if (t->numel == 0) return true;
    vf_exec e = {.op = VF_OP_FILL, .attrs.value = value, .out = vf_tensor_ref(t)};
    if (ctx->trace) { /* recorded as a fill node bound to t */
        vf_tensor *r = vf_tracer_of(ctx)->exec(ctx, &e, vf_tensor_retain(t));
        vf_tensor_release(r);
        return r != NULL;
    }
    vf_status s = ctx->be.iface->exec(ctx->be.self, &e);
    if (s != VF_OK) vf_backend_failed(ctx, s, "vf_fill (%s backend)", ctx->be.iface->name);
    return s == VF_OK;
}

vf_tensor *vf_tensor_from_host(vf_context *ctx, vf_dtype dtype, int rank, const int64_t *shape,
                               const void *data)
{
    if (!ctx) return NULL;
    VF_LOCKED(ctx);
    vf_tensor *t = vf_tensor_new(ctx, "vf_tensor_from_host", dtype, rank, shape);
    if (!t || t->numel == 0) return t;
    if (!data) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_from_host: data is NULL for %lld elements",
                (long long)t->numel);
        vf_tensor_release(t);
        return NULL;
    }
    /* Bool bytes other than 0 and 1 (masks made from uint8_t images) are
       stored as 1, so every backend and kernel sees the same value. */
    void *norm = NULL;
    if (dtype == VF_BOOL && !vf_bool_normalised(data, t->numel, &norm)) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_tensor_from_host: out of host memory (malloc failed)");
        vf_tensor_release(t);
        return NULL;
    }
    if (norm) data = norm;
    if (t->sym_gen) {
        t = vf_tracer_of(t->ctx)->constant(t, data); /* a constant of the traced graph */
        free(norm);
        return t;
    }
    vf_status s = ctx->be.iface->upload(ctx->be.self, t->st->buf, 0, data, t->st->bytes);
    free(norm);
    if (s != VF_OK) {
        vf_backend_failed(ctx, s, "vf_tensor_from_host: upload of %zu bytes", t->st->bytes);
        vf_tensor_release(t);
        return NULL;
    }
    return t;
}

vf_tensor *vf_fill(vf_context *ctx, vf_dtype dtype, int rank, const int64_t *shape, double value)
{
    if (!ctx) return NULL;
    VF_LOCKED(ctx);
    vf_tensor *t = vf_tensor_new(ctx, "vf_fill", dtype, rank, shape);
    if (!t) return NULL;
    if (!vf_fill_into(ctx, t, value)) {
        vf_tensor_release(t);
        return NULL;
    }
    return t;
}

vf_tensor *vf_random_normal(vf_context *ctx, vf_dtype dtype, int rank, const int64_t *shape, uint64_t seed)
{
    if (!ctx) return NULL;
    VF_LOCKED(ctx);
    if (!vf_dtype_valid((int)dtype) || !vf_dtype_is_float(dtype)) {
        vf_fail(ctx, VF_ERROR_DTYPE, "vf_random_normal: dtype %s is not a float type; use VF_F32 or VF_F16",
                vf_dtype_name(dtype));
        return NULL;
    }
    vf_tensor *t = vf_tensor_new(ctx, "vf_random_normal", dtype, rank, shape);
    if (!t || t->numel == 0) return t;
    vf_exec e = {.op = VF_OP_RANDOM_NORMAL, .attrs.seed = seed};
    return vf_run(ctx, &e, t);
}

vf_status vf_tensor_read(vf_tensor *t, void *dst, size_t bytes)
{
    if (!t) return VF_ERROR_INVALID_ARGUMENT;
    VF_LOCKED(vf_tensor_context(t));
    if (!vf_check_alive(NULL, "vf_tensor_read", t, -1)) return vf_tensor_dead_status(t);
    vf_context *ctx = t->ctx;
    if (t->sym_gen) return vf_tracer_of(t->ctx)->read_error(t);
    size_t need = (size_t)t->numel * vf_dtype_size(t->dtype);
    if (bytes < need || (need && !dst)) {
        char sh[VF_SHAPE_STR_LEN];
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT,
                       "vf_tensor_read: the %s %s tensor needs %zu bytes but dst has %zu%s", vf_dtype_name(t->dtype),
                       vf_shape_str(sh, sizeof sh, t->rank, t->shape), need, bytes, dst ? "" : " (dst is NULL)");
    }
    if (need == 0) return VF_OK;
    vf_status s = ctx->be.iface->download(ctx->be.self, t->st->buf, t->offset, dst, need);
    if (s != VF_OK) return vf_backend_failed(ctx, s, "vf_tensor_read: download of %zu bytes", need);
    return VF_OK;
}

/* The status a check of dead t recorded: VF_ERROR_TRACE for a symbolic one. */
vf_status vf_tensor_dead_status(const vf_tensor *t)
{
    vf_handle_state h = vf_handle_state_of(t, VF_HANDLE_TENSOR);
    return h.what == VF_HANDLE_DEAD && h.symbolic ? VF_ERROR_TRACE : VF_ERROR_INVALID_ARGUMENT;
}

/* The getters take the lock: on a dead handle they record an error. */
#define ALIVE(op) (t && vf_check_alive(NULL, op, t, -1))
vf_dtype vf_tensor_dtype(const vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    return ALIVE("vf_tensor_dtype") ? t->dtype : VF_F32;
}
int vf_tensor_rank(const vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    return ALIVE("vf_tensor_rank") ? t->rank : -1;
}
int64_t vf_tensor_numel(const vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    return ALIVE("vf_tensor_numel") ? t->numel : -1;
}
size_t vf_tensor_bytes(const vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    return ALIVE("vf_tensor_bytes") ? (size_t)t->numel * vf_dtype_size(t->dtype) : 0;
}
bool vf_tensor_is_variable(const vf_tensor *t)
{
    VF_LOCKED(vf_tensor_context(t));
    return ALIVE("vf_tensor_is_variable") && t->is_variable;
}

/* Where t's errors go; known even after t died (its slot remembers). */
vf_context *vf_tensor_context(const vf_tensor *t)
{
    return t ? vf_handle_context(t, VF_HANDLE_TENSOR) : NULL; /* lock-free: the entry points lock with it */
}

int64_t vf_tensor_dim(const vf_tensor *t, int axis)
{
    VF_LOCKED(vf_tensor_context(t));
    if (!ALIVE("vf_tensor_dim")) return -1;
    int a = axis < 0 ? axis + t->rank : axis;
    if (a < 0 || a >= t->rank) {
        vf_fail(t->ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_dim: axis %d is out of range for rank %d",
                axis, t->rank);
        return -1;
    }
    return t->shape[a];
}

int vf_tensor_shape(const vf_tensor *t, int64_t *shape, int max)
{
    VF_LOCKED(vf_tensor_context(t));
    if (!ALIVE("vf_tensor_shape")) return -1;
    for (int d = 0; shape && d < t->rank && d < max; d++) shape[d] = t->shape[d];
    return t->rank;
}
