/* libFuzzer target for the public API (include/vkfuse.h) as a user drives
 * it: the input bytes are a program of actions — tensors of random dtypes
 * and shapes (empty dims included) from host data, fills and random
 * normals; every op family with random operands, axes, permutations and
 * shapes, valid or not; nested scopes, vf_keep, retain and release;
 * variables and assigns; tapes (nested) and gradients; vf_cond and
 * vf_while_loop; traced functions whose bodies are sub-programs of the
 * same bytes (nested calls, two calls each, fused or unfused); reads.
 *
 * A crash, a sanitizer report, a leak, a hang, or a broken contract is a
 * bug: an op that returns NULL while the context's status was clear must
 * record a status and a non-empty message (the header's error contract),
 * and an op that returns a tensor must leave the status clear.
 *
 * VKFUSE_FUZZ_BACKEND=vulkan runs on the default Vulkan device (lavapipe
 * here), else the CPU backend. VKFUSE_FUZZ_MISUSE=1 also keeps released
 * and out-of-scope handles in the pool and uses them again, releases twice
 * and uses symbolic tensors after their trace: API misuse, which must give
 * an error, not undefined behaviour (off when unset; fuzz/run.sh, and so
 * CI, sets it to 1 unless told otherwise).
 * VKFUSE_FUZZ_VERBOSE=1 prints each action (to turn a crash into a repro).
 * VKFUSE_FUZZ_KEEP_FUNCTIONS=1 destroys the functions only at the end of
 * each input, after every tape (by default each at once after its calls:
 * a tape that recorded a call must survive that). */
#include "vkfuse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vf_context *ctx;
static bool misuse, verbose, keep_functions;
static vf_tensor *escaped; /* misuse: the last function body's result, used after its trace */

enum { MAX_KEPT = 16, SLOTS = 12, MAX_TAPES = 3, MAX_SCOPES = 6, MAX_DEPTH = 2, MAX_NUMEL = 1 << 14, MAX_ACTIONS = 200 };

typedef struct slot {
    vf_tensor *t;
    int scope;      /* the scope depth that owns it */
    bool retained;  /* the fuzzer owns one reference (released at the end) */
    bool stale;     /* released or out of scope (only kept with misuse) */
} slot;

typedef struct fz {
    const uint8_t *d;
    size_t n, i;
    slot s[SLOTS];
    vf_tape *tapes[MAX_TAPES];
    int n_tapes, depth, base_depth, call_depth, actions;
    bool traced;
} fz;

/* VKFUSE_FUZZ_KEEP_FUNCTIONS: functions (and their bodies' data) destroyed
   at the end of the input, after every tape (the library's own tapes in a
   gradient re-run a function body too, which may call others) */
static vf_function *kept[MAX_KEPT];
static void *kept_user[MAX_KEPT];
static int n_kept;

/* misuse: tensors vf_keep'd past the input's outer scope, up to the
   context's root scope, where they would live until vf_context_destroy;
   the context outlives every input, so each input releases its own (else
   a run grows by them input after input) */
enum { MAX_ROOTED = 64 };
static vf_tensor *rooted[MAX_ROOTED];
static int n_rooted;

static void note_rooted(vf_tensor *t)
{
    for (int k = 0; k < n_rooted; k++)
        if (rooted[k] == t) return;
    if (n_rooted < MAX_ROOTED) rooted[n_rooted++] = t;
}

static uint8_t u8(fz *f) { return f->i < f->n ? f->d[f->i++] : 0; }
static bool more(const fz *f) { return f->i < f->n && f->actions < MAX_ACTIONS; }

/* The contract after an action that made r (or NULL) from a clear status. */
static void check(vf_tensor *r)
{
    vf_status s = vf_status_get(ctx);
    const char *msg = vf_error_message(ctx);
    if (!r && s == VF_OK) {
        fprintf(stderr, "fuzz_api: an op returned NULL and recorded no error\n");
        abort();
    }
    if (s != VF_OK && (!msg || !*msg)) {
        fprintf(stderr, "fuzz_api: %s recorded without a message\n", vf_status_name(s));
        abort();
    }
    vf_error_clear(ctx);
}

/* A slot's tensor for use as an operand: live ones, stale ones only with misuse. */
static vf_tensor *get(fz *f)
{
    uint8_t k = u8(f);
    if (misuse && k == 255 && escaped) return escaped;
    slot *s = &f->s[k % SLOTS];
    if (!s->t || (s->stale && !misuse)) return NULL;
    return s->t;
}

static void put(fz *f, vf_tensor *t)
{
    if (!t) return;
    for (int k = 0; k < SLOTS; k++) /* an op may hand back its input (a loop of 0 iterations): one slot each */
        if (f->s[k].t == t) return;
    int k = u8(f) % SLOTS;
    slot *s = &f->s[k];
    if (s->retained && !s->stale) vf_tensor_release(s->t);
    *s = (slot){t, f->depth, false, false};
}

static int64_t numel_of(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i] < 0 ? 1 : shape[i];
    return n;
}

static const vf_dtype dtypes[] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
static const int64_t dim_pick[] = {0, 1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 130, 257, 1000, -1, -3};

static int shape_from(fz *f, int64_t *shape)
{
    int rank = u8(f) % 5;
    for (int i = 0; i < rank; i++) shape[i] = dim_pick[u8(f) % 16];
    return rank;
}

/* NULL and *skip when the shape is too big to be worth making. */
static vf_tensor *make_tensor(fz *f, bool *skip)
{
    int64_t shape[VF_MAX_RANK];
    vf_dtype dt = dtypes[u8(f) % 5];
    int rank = shape_from(f, shape);
    int how = u8(f) % 3;
    if ((*skip = numel_of(rank, shape) > MAX_NUMEL)) return NULL;
    if (how == 1) return vf_fill(ctx, dt, rank, shape, (double)(int8_t)u8(f) / 4);
    if (how == 2) return vf_random_normal(ctx, dt, rank, shape, u8(f));
    bool valid = true;
    for (int i = 0; i < rank; i++) valid = valid && shape[i] >= 0;
    size_t bytes = valid ? (size_t)numel_of(rank, shape) * vf_dtype_size(dt) : 0;
    uint8_t *data = malloc(bytes ? bytes : 1);
    if ((*skip = !data)) return NULL;
    for (size_t i = 0; i < bytes; i++) data[i] = u8(f);
    vf_tensor *t = vf_tensor_from_host(ctx, dt, rank, shape, data);
    free(data);
    return t;
}

/* The broadcast result of a and b would stay small. */
static bool small_pair(vf_tensor *a, vf_tensor *b)
{
    int ra = vf_tensor_rank(a), rb = vf_tensor_rank(b), r = ra > rb ? ra : rb;
    int64_t n = 1;
    for (int i = 0; i < r; i++) {
        int64_t da = i < r - ra ? 1 : vf_tensor_dim(a, i - (r - ra)), db = i < r - rb ? 1 : vf_tensor_dim(b, i - (r - rb));
        n *= da > db ? da : db;
    }
    return n <= MAX_NUMEL;
}

/* A matmul of a and b (transposed as flagged) would stay small: a bound on
   its output's size (batch dims of both counted). */
static bool small_matmul(vf_tensor *a, vf_tensor *b, bool ta, bool tb)
{
    int ra = vf_tensor_rank(a), rb = vf_tensor_rank(b);
    if (ra < 1 || rb < 1) return true; /* an error */
    int64_t n = 1;
    for (int i = 0; i < ra - 2; i++) n *= vf_tensor_dim(a, i);
    for (int i = 0; i < rb - 2; i++) n *= vf_tensor_dim(b, i);
    int64_t m = ra < 2 ? 1 : vf_tensor_dim(a, ta ? -1 : -2), c = rb < 2 ? 1 : vf_tensor_dim(b, tb ? -2 : -1);
    return n * m * c <= MAX_NUMEL && n <= MAX_NUMEL && m <= MAX_NUMEL;
}

static vf_tensor *(*const unary[])(vf_context *, vf_tensor *) = {
    vf_neg, vf_exp, vf_log, vf_sqrt, vf_rsqrt, vf_abs, vf_tanh, vf_sigmoid, vf_relu, vf_gelu, vf_sin, vf_cos,
    vf_norm};
static vf_tensor *(*const binary[])(vf_context *, vf_tensor *, vf_tensor *) = {
    vf_add, vf_sub, vf_mul, vf_div, vf_pow, vf_maximum, vf_minimum, vf_greater, vf_greater_equal, vf_less,
    vf_less_equal, vf_equal, vf_not_equal, vf_matmul, vf_sparse_softmax_cross_entropy};
static vf_tensor *(*const reduce[])(vf_context *, vf_tensor *, int, const int *, bool) = {
    vf_reduce_sum, vf_reduce_mean, vf_reduce_max, vf_reduce_min};

static void run_actions(fz *f, vf_tensor *const *in, int n_in, vf_tensor **out, int n_out);

/* ---- control flow and function bodies ------------------------------------ */

static vf_status then_fn(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(c, in[0]);
    return out[0] ? VF_OK : vf_status_get(c);
}
static vf_status else_fn(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(c, in[0], in[0]);
    return out[0] ? VF_OK : vf_status_get(c);
}
static vf_status loop_cond(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(c, vf_reduce_sum(c, in[0], 0, NULL, false), vf_fill(c, vf_tensor_dtype(in[0]), 0, NULL, 5));
    return out[0] ? VF_OK : vf_status_get(c);
}
static vf_status loop_body(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(c, in[0], vf_fill(c, vf_tensor_dtype(in[0]), 0, NULL, 1));
    return out[0] ? VF_OK : vf_status_get(c);
}

typedef struct body_prog {
    const uint8_t *d;
    size_t n;
    int call_depth;
    int n_in;
} body_prog;

/* A traced (or eager) function body: a sub-program of the input on its own
   pool, its inputs in the first slots; out[0] its last result. */
static vf_status body_fn(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const body_prog *b = user;
    fz g = {.d = b->d, .n = b->n, .call_depth = b->call_depth + 1, .traced = true};
    (void)c;
    run_actions(&g, in, b->n_in, out, 1);
    if (misuse && out[0]) escaped = out[0]; /* a symbolic tensor kept past its trace */
    return out[0] ? VF_OK : VF_ERROR_INVALID_ARGUMENT;
}

static void call_function(fz *f)
{
    size_t len = u8(f) % 48;
    if (len > f->n - f->i) len = f->n - f->i;
    body_prog *bpp = malloc(sizeof *bpp);
    if (!bpp) return;
    *bpp = (body_prog){f->d + f->i, len, f->call_depth, 1 + u8(f) % 2};
    body_prog bp = *bpp;
    f->i += len;
    vf_tensor *in[2] = {get(f), get(f)};
    if (!in[0] || (bp.n_in == 2 && !in[1])) {
        free(bpp);
        return;
    }
    uint8_t flags = u8(f);
    vf_tensor_spec sig[2];
    for (int k = 0; k < bp.n_in; k++) {
        sig[k].dtype = vf_tensor_dtype(in[k]);
        sig[k].rank = vf_tensor_rank(in[k]);
        for (int i = 0; i < sig[k].rank; i++) sig[k].shape[i] = (flags & 4) && i == 0 ? -1 : vf_tensor_dim(in[k], i);
    }
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "fuzz", .body = body_fn, .user = bpp,
        .n_inputs = bp.n_in, .n_outputs = 1, .unfused = flags & 1, .input_signature = (flags & 2) ? sig : NULL});
    check(fn ? (vf_tensor *)1 : NULL);
    if (!fn) {
        free(bpp);
        return;
    }
    for (int call = 0; call < 2; call++) {
        vf_tensor *out = NULL;
        vf_status s = vf_function_call(fn, in, &out);
        if (s == VF_OK) put(f, out);
        check(s == VF_OK ? out : NULL);
    }
    if (flags & 8) {
        char *text = vf_function_graph_text(fn);
        free(text);
    }
    if (keep_functions && n_kept < MAX_KEPT) {
        kept[n_kept] = fn, kept_user[n_kept++] = bpp;
        return;
    }
    /* A tape still open may have recorded this call: its gradient must not
       run the destroyed function's body (nor touch its freed user data). */
    vf_function_destroy(fn);
    free(bpp);
}

/* ---- actions ---------------------------------------------------------------- */

static void scope_end(fz *f)
{
    vf_scope_end(ctx);
    for (int k = 0; k < SLOTS; k++)
        if (f->s[k].t && f->s[k].scope == f->depth && !f->s[k].retained) {
            if (misuse) f->s[k].stale = true;
            else f->s[k] = (slot){0};
        }
    f->depth--;
}

static void action(fz *f)
{
    vf_tensor *a, *b, *r = NULL;
    uint8_t op = u8(f);
    if (verbose) fprintf(stderr, "fuzz_api: %*saction %d at byte %zu (scope depth %d, tapes %d)\n", 2 * f->call_depth, "",
                         op % 24, f->i - 1, f->depth, f->n_tapes);
    switch (op % 24) {
    case 0: case 1: {
        bool skip;
        if (!(r = make_tensor(f, &skip)) && skip) return;
        break;
    }
    case 2: case 3: case 4:
        if ((a = get(f))) r = unary[u8(f) % 13](ctx, a);
        else return;
        break;
    case 5: case 6: case 7: {
        int k = u8(f) % 15;
        a = get(f), b = get(f);
        if (!a || !b || !small_pair(a, b)) return;
        if (k == 13 && !small_matmul(a, b, false, false)) return;
        r = binary[k](ctx, a, b);
        break;
    }
    case 8: {
        int axes[VF_MAX_RANK], n = u8(f) % 3;
        for (int i = 0; i < n; i++) axes[i] = (int)(int8_t)u8(f) % 5;
        if (!(a = get(f))) return;
        r = reduce[u8(f) % 4](ctx, a, n, axes, u8(f) & 1);
        break;
    }
    case 9:
        if (!(a = get(f))) return;
        switch (u8(f) % 4) {
        case 0: r = vf_argmax(ctx, a, (int8_t)u8(f) % 5); break;
        case 1: r = vf_softmax(ctx, a, (int8_t)u8(f) % 5); break;
        case 2: r = vf_log_softmax(ctx, a, (int8_t)u8(f) % 5); break;
        default: r = vf_cast(ctx, a, dtypes[u8(f) % 5]); break;
        }
        break;
    case 10: {
        int64_t shape[VF_MAX_RANK];
        int rank = shape_from(f, shape);
        if (!(a = get(f))) return;
        r = vf_reshape(ctx, a, rank, shape);
        break;
    }
    case 11: {
        int perm[VF_MAX_RANK];
        if (!(a = get(f))) return;
        int rank = vf_tensor_rank(a);
        for (int i = 0; i < rank; i++) perm[i] = (int8_t)u8(f) % (rank + 1);
        r = vf_transpose(ctx, a, u8(f) & 1 ? NULL : perm);
        break;
    }
    case 12: {
        vf_tensor *c = get(f);
        a = get(f), b = get(f);
        if (!c || !a || !b || !small_pair(a, b) || !small_pair(c, a)) return;
        r = vf_where(ctx, c, a, b);
        break;
    }
    case 13:
        a = get(f), b = get(f);
        if (!a || !b) return;
        bool ta = u8(f) & 1, tb = u8(f) & 1;
        if (!small_matmul(a, b, ta, tb)) return;
        r = vf_matmul_ex(ctx, a, b, ta, tb);
        break;
    case 14:
        if (u8(f) & 1) {
            if (f->depth >= MAX_SCOPES) return;
            vf_scope_begin(ctx);
            f->depth++;
        } else if (f->depth > f->base_depth) {
            scope_end(f);
        }
        check((vf_tensor *)1);
        return;
    case 15: {
        slot *s = &f->s[u8(f) % SLOTS];
        if (!s->t || (s->stale && !misuse)) return;
        switch (u8(f) % 3) {
        case 0:
            if (!s->stale && s->scope > f->base_depth && !s->retained) vf_keep(s->t), s->scope--;
            else if (misuse && vf_keep(s->t)) note_rooted(s->t);
            break;
        case 1:
            if (!s->retained && !s->stale) vf_tensor_retain(s->t), s->retained = true;
            break;
        default:
            /* a body's inputs belong to its caller (the fuzzer's outer pool
               still holds them): releasing them is misuse */
            if (s->scope < f->base_depth && !misuse) break;
            vf_tensor_release(s->t);
            if (misuse) s->stale = true, s->retained = false;
            else *s = (slot){0};
        }
        vf_error_clear(ctx);
        return;
    }
    case 16:
        if (u8(f) & 1) {
            if (f->n_tapes < MAX_TAPES) f->tapes[f->n_tapes++] = vf_tape_begin(ctx);
        } else if (f->n_tapes > 0) {
            vf_tape_end(f->tapes[--f->n_tapes]);
        }
        vf_error_clear(ctx);
        return;
    case 17: {
        if (!f->n_tapes) return;
        vf_tape *tp = f->tapes[u8(f) % f->n_tapes];
        vf_tensor *target = get(f), *src[2] = {get(f), get(f)}, *g[2] = {NULL, NULL};
        int n = 1 + (u8(f) & 1);
        if (!target || !src[0] || (n == 2 && !src[1])) return;
        vf_status s = vf_tape_gradient(tp, target, n, src, g);
        if (s == VF_OK) put(f, g[0]), put(f, n == 2 ? g[1] : NULL);
        check(s == VF_OK ? g[0] : NULL);
        return;
    }
    case 18: {
        if (!(a = get(f))) return;
        void *buf = malloc(vf_tensor_bytes(a) + 1);
        if (!buf) return;
        vf_status s = vf_tensor_read(a, buf, vf_tensor_bytes(a) - (u8(f) == 7)); /* sometimes one byte short */
        free(buf);
        if (s != VF_OK && vf_status_get(ctx) == VF_OK && !f->traced) {
            fprintf(stderr, "fuzz_api: vf_tensor_read failed with a clear status\n");
            abort();
        }
        vf_error_clear(ctx);
        return;
    }
    case 19:
        if (!(a = get(f))) return;
        if (u8(f) & 1) r = vf_variable(ctx, a);
        else if ((b = get(f))) {
            vf_status (*const as[])(vf_tensor *, vf_tensor *) = {vf_assign, vf_assign_add, vf_assign_sub};
            as[u8(f) % 3](a, b);
            vf_error_clear(ctx);
            return;
        } else return;
        break;
    case 20: {
        vf_tensor *pred = get(f);
        if (!pred || !(a = get(f))) return;
        vf_status s = vf_cond(ctx, pred, then_fn, else_fn, 1, &a, 1, &r, NULL);
        if (s != VF_OK) r = NULL;
        break;
    }
    case 21: {
        if (!(a = get(f))) return;
        vf_tensor *vars[1] = {a};
        /* bounded: an unbounded loop whose condition never turns false is the user's hang */
        vf_status s = vf_while_loop(ctx, loop_cond, loop_body, 1, vars, 1 + u8(f) % 8, NULL);
        r = s == VF_OK ? vars[0] : NULL;
        break;
    }
    case 22:
        if (f->call_depth < MAX_DEPTH) call_function(f);
        vf_error_clear(ctx);
        return;
    default:
        if ((a = get(f))) vf_print(ctx, "fuzz", a);
        vf_error_clear(ctx);
        return;
    }
    check(r);
    put(f, r);
}

static void run_actions(fz *f, vf_tensor *const *in, int n_in, vf_tensor **out, int n_out)
{
    f->base_depth = f->depth;
    for (int k = 0; k < n_in && k < SLOTS; k++) f->s[k] = (slot){in[k], f->depth - 1, false, false};
    while (more(f)) {
        f->actions++;
        action(f);
    }
    for (int k = 0; k < n_out; k++) { /* a result that outlives the scopes ended below */
        out[k] = NULL;
        for (int j = SLOTS - 1; j >= 0 && !out[k]; j--)
            if (f->s[j].t && !f->s[j].stale && !f->s[j].retained && f->s[j].scope <= f->base_depth) out[k] = f->s[j].t;
    }
    while (f->n_tapes > 0) vf_tape_end(f->tapes[--f->n_tapes]);
    while (f->depth > f->base_depth) scope_end(f);
    for (int k = 0; k < SLOTS; k++)
        if (f->s[k].t && f->s[k].retained && !f->s[k].stale) vf_tensor_release(f->s[k].t);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *be = getenv("VKFUSE_FUZZ_BACKEND");
    const char *mu = getenv("VKFUSE_FUZZ_MISUSE");
    misuse = mu && *mu && strcmp(mu, "0") != 0;
    keep_functions = getenv("VKFUSE_FUZZ_KEEP_FUNCTIONS") != NULL;
    verbose = getenv("VKFUSE_FUZZ_VERBOSE") != NULL; /* the actions of a crash input, to write its repro */
    vf_context_desc d = {.backend = be && !strcmp(be, "vulkan") ? VF_BACKEND_VULKAN : VF_BACKEND_CPU,
                         .device_index = -1, .cache_dir = ""};
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "fuzz_api: no context: %s\n", vf_last_error());
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {.d = data, .n = size};
    vf_scope_begin(ctx);
    f.depth = 1;
    vf_tensor *out = NULL;
    run_actions(&f, NULL, 0, &out, 0);
    vf_scope_end(ctx);
    while (n_kept > 0) vf_function_destroy(kept[--n_kept]), free(kept_user[n_kept]);
    /* every scope of the input has ended: one still alive is in the root
       scope, and the release frees it (a dead one is an error, cleared) */
    while (n_rooted > 0) vf_tensor_release(rooted[--n_rooted]);
    vf_context_sync(ctx);
    vf_error_clear(ctx);
    return 0;
}
