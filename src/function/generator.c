/* Generators (tf.random.Generator): random streams whose state lives on
 * the device and advances at every draw, eager or traced.
 *
 * The state is the draw number d, a u32 [2] variable (d_lo, d_hi; there
 * is no 64-bit dtype). A draw is the op RNG_UNIFORM / RNG_NORMAL of
 * (state, shape donor): counter-based Philox keyed by the seed with d in
 * the upper counter words (util/philox.h), so the draw is a pure function
 * of the state and the shape; the advance is the op RNG_ADVANCE (d + 1,
 * carry included) assigned to the state in place, as vf_assign_add is:
 * one small kernel (the same with u32 adds, a compare and a cast took
 * three to five dispatches per draw). Because the state is a variable,
 * everything else comes from it: a traced
 * function captures them by reference and its plan orders the draw's read
 * before the assigns (side effects, kept in order like assign_sub), so
 * each call draws new numbers; eager and traced draws share one sequence;
 * vf_function_save stores their values and a loaded function continues
 * from them; the eager kernel memo keys on the seed, not on d, so one
 * pipeline serves every draw.
 *
 * Why +1 per draw and not +blocks used: every draw owns 2^64 blocks of its
 * own, so no draw overlaps another whatever the sizes, and the advance
 * needs no size (a symbolic dim in a trace would make "+ numel" a value of
 * the call). A generator lives in a never-reused slot (handles.h): a
 * destroyed one is an error, not a crash. */
#include "api/api.h"
#include "function/trace.h"
#include "util/dtype.h"

#include <math.h>

struct vf_generator {
    vf_context *ctx;
    uint64_t seed;
    vf_tensor *state;      /* u32 [2] variable: the draw number (lo, hi) */
};



static vf_generator *generator_create(vf_context *ctx, uint64_t seed)
{
    VF_LOCKED(ctx);
    if (!ctx) return NULL;
    if (ctx->trace) {
        vf_fail(ctx, VF_ERROR_TRACE, "vf_generator_create: called while tracing a vf_function; create the "
                "generator outside the function body and use it there (its state is captured by reference, "
                "like a variable)");
        return NULL;
    }
    vf_generator *g = vf_handle_new(ctx, &ctx->generator_slots, sizeof(vf_generator), "vf_generator_create");
    if (!g) return NULL;
    g->ctx = ctx;
    g->seed = seed;
    const uint32_t zero[2] = {0, 0};
    vf_tensor *init = vf_tensor_from_host(ctx, VF_U32, 1, (int64_t[]){2}, zero);
    /* the scope the caller is in owns one reference until it ends; the
       generator holds its own */
    g->state = vf_tensor_hold(vf_variable(ctx, init));
    vf_tensor_release(init);
    if (!g->state) {
        vf_handle_kill(g, VF_DEATH_INTERNAL, false);
        return NULL;
    }
    return g;
}

/* One convention for failed creates (vkfuse.h): the reason is the
   thread's last error as well as the context's. */
vf_generator *vf_generator_create(vf_context *ctx, uint64_t seed)
{
    VF_LOCKED(ctx);
    vf_generator *g = generator_create(ctx, seed);
    return g ? g : vf_create_failed(ctx, VF_OK, "vf_generator_create");
}

/* gen is a live generator of ctx; else an error naming op. */
static bool gen_ok(vf_context *ctx, const char *op, const vf_generator *gen)
{
    if (!gen) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the generator is NULL; make one with vf_generator_create",
                op);
        return false;
    }
    vf_context *owner = vf_handle_context(gen, VF_HANDLE_GENERATOR);
    if (!owner) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the generator argument is not a vf_generator", op);
        return false;
    }
    if (owner != ctx) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: the generator belongs to another vf_context; make one "
                "in this context with vf_generator_create", op);
        return false;
    }
    vf_handle_state h = vf_handle_state_of(gen, VF_HANDLE_GENERATOR);
    if (h.what == VF_HANDLE_LIVE) return true;
    vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: generator #%llu was destroyed by vf_generator_destroy; create "
            "a new one with vf_generator_create", op, (unsigned long long)h.id);
    return false;
}

void vf_generator_destroy(vf_generator *gen)
{
    vf_context *ctx = gen ? vf_handle_context(gen, VF_HANDLE_GENERATOR) : NULL;
    if (!ctx) return; /* NULL, or no generator: there is no context to tell */
    VF_LOCKED(ctx);
    if (!gen_ok(ctx, "vf_generator_destroy", gen)) return;
    vf_tensor_drop(gen->state);
    vf_handle_kill(gen, VF_DEATH_DESTROY, false);
}

/* state = RNG_ADVANCE(state), in place like vf_assign_add: in a trace an
   op node and an assign (a side effect kept in call order; later reads of
   the state see the new value, trace.c). */
static bool advance(vf_context *ctx, vf_generator *g)
{
    vf_exec e = {.op = VF_OP_RNG_ADVANCE, .n_in = 1};
    e.in[0] = vf_tensor_ref(g->state);
    e.out = vf_tensor_ref(g->state);
    if (ctx->trace) return vf_trace_assign(ctx, &e, "vf_generator (state update)") == VF_OK;
    vf_status s = ctx->be.iface->exec(ctx->be.self, &e);
    if (s != VF_OK) vf_backend_failed(ctx, s, "vf_generator state update (%s backend)", ctx->be.iface->name);
    return s == VF_OK;
}

/* Draw op of dtype dt with like's shape, then the advance. like's data is
   never read. */
static vf_tensor *draw(vf_context *ctx, const char *name, vf_generator *g, vf_op op, vf_dtype dt,
                       vf_tensor *like)
{
    vf_exec e = {.op = op, .n_in = 2, .attrs.seed = g->seed, .attrs.dtype = dt};
    e.in[0] = vf_tensor_ref(g->state);
    e.in[1] = vf_tensor_ref(like);
    vf_tensor *empty, *out = vf_op_output(ctx, name, &e, false, &empty);
    if (!out && !empty) return NULL;
    if (out) {
        /* vf_run records the draw as reading the state before the advance */
        out = vf_run(ctx, &e, out);
        if (!out) return NULL;
    } else {
        out = empty; /* nothing drawn; the state still advances */
    }
    if (!advance(ctx, g)) {
        vf_tensor_release(out);
        return NULL;
    }
    return out;
}

static vf_tensor *draw_shape(vf_context *ctx, const char *name, vf_generator *gen, vf_op op, vf_dtype dtype,
                             int rank, const int64_t *shape)
{
    if (!ctx || !gen_ok(ctx, name, gen)) return NULL;
    if (!vf_dtype_valid((int)dtype) || (dtype != VF_F32 && dtype != VF_F16)) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: dtype %s; generators draw f32 or f16 (cast the result for others)",
                name, vf_dtype_valid((int)dtype) ? vf_dtype_name(dtype) : "(invalid)");
        return NULL;
    }
    int64_t numel;
    if (!vf_check_shape(ctx, name, rank, shape, &numel)) return NULL;
    /* the shape donor: a bool fill (a constant of the plan when traced) */
    vf_tensor *like = vf_fill(ctx, VF_BOOL, rank, shape, 0);
    if (!like) return NULL;
    vf_tensor *t = draw(ctx, name, gen, op, dtype, like);
    vf_tensor_release(like);
    return t;
}

vf_tensor *vf_generator_uniform(vf_context *ctx, vf_generator *gen, vf_dtype dtype, int rank, const int64_t *shape)
{
    VF_LOCKED(ctx);
    return draw_shape(ctx, "vf_generator_uniform", gen, VF_OP_RNG_UNIFORM, dtype, rank, shape);
}

vf_tensor *vf_generator_normal(vf_context *ctx, vf_generator *gen, vf_dtype dtype, int rank, const int64_t *shape)
{
    VF_LOCKED(ctx);
    return draw_shape(ctx, "vf_generator_normal", gen, VF_OP_RNG_NORMAL, dtype, rank, shape);
}

vf_tensor *vf_dropout(vf_context *ctx, vf_generator *gen, vf_tensor *x, double rate)
{
    VF_LOCKED(ctx);
    const char *name = "vf_dropout";
    if (!ctx || !x) return NULL;
    if (!gen_ok(ctx, name, gen) || !vf_check_input(ctx, name, x, 0)) return NULL;
    if (x->dtype != VF_F32 && x->dtype != VF_F16) {
        vf_fail(ctx, VF_ERROR_DTYPE, "%s: x is %s; dropout takes f32 or f16 (cast x with vf_cast)", name,
                vf_dtype_name(x->dtype));
        return NULL;
    }
    if (!(rate >= 0.0 && rate < 1.0)) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: rate %g is outside [0, 1); rate is the probability that an "
                "element is dropped (0: keep all, e.g. at inference)", name, rate);
        return NULL;
    }
    if (x->dtype == VF_F16 && 1.0 / (1.0 - rate) > 65504.0) {
        vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "%s: rate %.9g scales kept f16 elements by 1 / (1 - rate) = %g, "
                "above f16's largest value 65504; use a smaller rate or an f32 x", name, rate, 1.0 / (1.0 - rate));
        return NULL;
    }
    if (rate == 0.0) return vf_reshape(ctx, x, x->rank, x->shape); /* x itself, as a view: no draw */
    vf_tensor *u = draw(ctx, name, gen, VF_OP_RNG_UNIFORM, VF_F32, x);
    vf_tensor *r = vf_fill(ctx, VF_F32, 0, NULL, rate);
    vf_tensor *keep = vf_greater_equal(ctx, u, r);
    vf_tensor *scale = vf_fill(ctx, x->dtype, 0, NULL, 1.0 / (1.0 - rate));
    vf_tensor *zero = vf_fill(ctx, x->dtype, 0, NULL, 0.0);
    vf_tensor *scaled = vf_mul(ctx, x, scale);
    /* where, not mul by a 0/1 mask: dropped elements are 0 even where x is
       inf or NaN, and the gradient is dy * scale where kept, 0 elsewhere */
    vf_tensor *y = vf_where(ctx, keep, scaled, zero);
    vf_tensor_release(scaled);
    vf_tensor_release(zero);
    vf_tensor_release(scale);
    vf_tensor_release(keep);
    vf_tensor_release(r);
    vf_tensor_release(u);
    return y;
}
