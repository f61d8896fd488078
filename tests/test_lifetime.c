/* Tensor lifetime and errors: scopes, keep, retain/release, the sticky
 * first error with NULL propagation, messages that name op, shapes and
 * fix, and a context that stays usable after an error. Runs on both
 * backends; LeakSanitizer (the asan preset) checks that nothing leaks. */
#include "api/api.h"
#include "kernels_common.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define LT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LT_ASAN 1
#endif
#endif
#ifdef LT_ASAN
#include <sanitizer/lsan_interface.h>
#endif

static void each_backend(void (*fn)(vf_context *))
{
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    fn(cpu);
    vt_context_done(cpu);
    if (vt_have_vulkan()) {
        vf_context *vk = vt_context(VF_BACKEND_VULKAN);
        fn(vk);
        vt_context_done(vk);
    }
}

static void scopes(vf_context *ctx)
{
    int64_t sh[1] = {4};
    vf_tensor *kept;
    vf_tensor *retained;
    vf_scope_begin(ctx);
    {
        vf_tensor *a = vf_fill(ctx, VF_F32, 1, sh, 1.0);
        vf_tensor *b = vf_add(ctx, a, a);
        kept = vf_keep(b);
        retained = vf_tensor_retain(vf_mul(ctx, a, a));
        vf_tensor_release(vf_fill(ctx, VF_F32, 1, sh, 9.0)); /* early release of a scope-owned tensor */
    }
    vf_scope_end(ctx);
    float v[4];
    assert_int_equal(vf_tensor_read(kept, v, sizeof v), VF_OK);
    assert_true(v[0] == 2.0f && v[3] == 2.0f);
    assert_int_equal(vf_tensor_read(retained, v, sizeof v), VF_OK);
    assert_true(v[1] == 1.0f);
    vf_tensor_release(retained);
    /* nested scopes, keep moves one level only */
    vf_scope_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *inner = vf_keep(vf_fill(ctx, VF_I32, 1, sh, 3));
    vf_scope_end(ctx);
    assert_int_equal(vf_tensor_rank(inner), 1);
    vf_scope_end(ctx);
    /* unbalanced end is an error, not a crash */
    vf_scope_end(ctx);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_scope_end", "vf_scope_begin", NULL);
    /* reshape views keep storage alive after the source is released */
    vf_scope_begin(ctx);
    vf_tensor *src = vf_fill(ctx, VF_F32, 1, sh, 5.0);
    int64_t s2[2] = {2, -1};
    vf_tensor *view = vf_keep(vf_reshape(ctx, src, 2, s2));
    vf_scope_end(ctx);
    assert_int_equal(vf_tensor_dim(view, 1), 2);
    assert_int_equal(vf_tensor_read(view, v, sizeof v), VF_OK);
    assert_true(v[3] == 5.0f);
}

static void test_scopes(void **state)
{
    (void)state;
    each_backend(scopes);
}

static void errors(vf_context *ctx)
{
    int64_t s23[2] = {2, 3}, s4[1] = {4};
    vf_tensor *a = vf_fill(ctx, VF_F32, 2, s23, 1.0);
    vf_tensor *b = vf_fill(ctx, VF_F32, 1, s4, 1.0);
    /* the first error is kept; NULL propagates without new errors */
    vf_tensor *y = vf_exp(ctx, vf_mul(ctx, vf_add(ctx, a, b), a));
    assert_null(y);
    assert_int_equal(vf_status_get(ctx), VF_ERROR_SHAPE);
    const char *msg = vf_error_message(ctx);
    assert_non_null(strstr(msg, "vf_add"));
    assert_non_null(strstr(msg, "[2,3]"));
    assert_non_null(strstr(msg, "[4]"));
    assert_non_null(strstr(msg, "broadcast"));
    vf_tensor *c = vf_neg(ctx, vf_fill(ctx, VF_U32, 1, s4, 1.0)); /* a second error is not recorded over it */
    assert_null(c);
    assert_int_equal(vf_status_get(ctx), VF_ERROR_SHAPE);
    vf_error_clear(ctx);
    /* the context stays usable */
    float v[6];
    assert_int_equal(vf_tensor_read(vf_add(ctx, a, a), v, sizeof v), VF_OK);
    assert_true(v[5] == 2.0f);

    assert_null(vf_add(ctx, a, vf_fill(ctx, VF_I32, 2, s23, 1)));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_add", "f32", "i32", "vf_cast", NULL);
    assert_null(vf_exp(ctx, vf_fill(ctx, VF_I32, 1, s4, 1)));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_exp", "i32", "f32", NULL);
    assert_null(vf_where(ctx, a, a, a));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_where", "bool", NULL);
    assert_null(vf_matmul(ctx, a, a));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_matmul", "[2,3]", "k=3", NULL);
    int ax = 2;
    assert_null(vf_reduce_sum(ctx, a, 1, &ax, false));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_reduce_sum", "axis 2", NULL);
    int dup[2] = {0, -2};
    assert_null(vf_reduce_sum(ctx, a, 2, dup, false));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "twice", NULL);
    int64_t bad[2] = {4, 2};
    assert_null(vf_reshape(ctx, a, 2, bad));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_reshape", "[2,3]", "[4,2]", NULL);
    int perm[2] = {0, 0};
    assert_null(vf_transpose(ctx, a, perm));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "permutation", NULL);
    assert_null(vf_softmax(ctx, a, 5));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_softmax", "axis 5", NULL);
    int64_t neg[1] = {-3};
    assert_null(vf_fill(ctx, VF_F32, 1, neg, 0));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_fill", "-3", NULL);
    assert_null(vf_fill(ctx, (vf_dtype)42, 1, s4, 0));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "dtype 42", NULL);
    assert_null(vf_tensor_from_host(ctx, VF_F32, 1, s4, NULL));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "data is NULL", NULL);
    assert_null(vf_random_normal(ctx, VF_I32, 1, s4, 1));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_random_normal", NULL);
    float small[2];
    assert_int_equal(vf_tensor_read(a, small, sizeof small), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "24 bytes", "8", NULL);
    int64_t l3[1] = {3};
    assert_null(vf_sparse_softmax_cross_entropy(ctx, vf_fill(ctx, VF_I32, 1, l3, 0), a));
    vt_expect_error(ctx, VF_ERROR_SHAPE, "labels [3]", "logits [2,3]", NULL);
    assert_null(vf_sparse_softmax_cross_entropy(ctx, a, a));
    vt_expect_error(ctx, VF_ERROR_DTYPE, "labels", NULL);
    assert_int_equal(vf_tensor_dim(a, 7), -1);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_dim", NULL);
    /* a tensor of another context */
    vf_context *other = vt_context(VF_BACKEND_CPU);
    vf_tensor *foreign = vf_fill(other, VF_F32, 2, s23, 1);
    assert_null(vf_add(ctx, a, foreign));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "another vf_context", NULL);
    vt_context_done(other);
    /* still usable */
    assert_int_equal(vf_tensor_read(vf_sub(ctx, a, a), v, sizeof v), VF_OK);
    assert_true(v[0] == 0.0f);
}

static void test_errors(void **state)
{
    (void)state;
    each_backend(errors);
}

static void variables(vf_context *ctx)
{
    int64_t sh[2] = {2, 3};
    float init[6] = {1, 2, 3, 4, 5, 6}, v[6];
    vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, sh, init);
    vf_tensor *w = vf_variable(ctx, x);
    assert_true(vf_tensor_is_variable(w));
    assert_false(vf_tensor_is_variable(x));
    vf_tensor *before = vf_mul(ctx, w, w); /* reads the value before the assign */
    int64_t s3[1] = {3};
    float row[3] = {10, 20, 30};
    assert_int_equal(vf_assign_add(w, vf_tensor_from_host(ctx, VF_F32, 1, s3, row)), VF_OK); /* broadcast */
    assert_int_equal(vf_tensor_read(w, v, sizeof v), VF_OK);
    assert_true(v[0] == 11 && v[5] == 36);
    assert_int_equal(vf_tensor_read(before, v, sizeof v), VF_OK);
    assert_true(v[5] == 36.0f);
    int64_t sflat[1] = {6};
    vf_tensor *flat = vf_reshape(ctx, w, 1, sflat); /* a copy: not changed by later assigns */
    assert_int_equal(vf_assign_sub(w, vf_fill(ctx, VF_F32, 0, NULL, 1.0)), VF_OK);
    assert_int_equal(vf_assign(w, vf_mul(ctx, w, vf_fill(ctx, VF_F32, 0, NULL, 2.0))), VF_OK);
    assert_int_equal(vf_tensor_read(w, v, sizeof v), VF_OK);
    assert_true(v[0] == 20 && v[5] == 70);
    assert_int_equal(vf_tensor_read(flat, v, sizeof v), VF_OK);
    assert_true(v[0] == 11);
    /* x is unchanged: the variable owns its own storage */
    assert_int_equal(vf_tensor_read(x, v, sizeof v), VF_OK);
    assert_true(v[0] == 1);
    /* errors */
    assert_int_equal(vf_assign(x, x), VF_ERROR_INVALID_ARGUMENT);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "not a variable", "vf_variable", NULL);
    int64_t s4[1] = {4};
    assert_int_equal(vf_assign(w, vf_fill(ctx, VF_F32, 1, s4, 0)), VF_ERROR_SHAPE);
    vt_expect_error(ctx, VF_ERROR_SHAPE, "vf_assign", "[4]", "[2,3]", NULL);
    assert_int_equal(vf_assign(w, vf_fill(ctx, VF_I32, 2, sh, 0)), VF_ERROR_DTYPE);
    vt_expect_error(ctx, VF_ERROR_DTYPE, "vf_assign", "i32", NULL);
    vf_tensor *bv = vf_variable(ctx, vf_fill(ctx, VF_BOOL, 2, sh, 1));
    assert_int_equal(vf_assign_add(bv, bv), VF_ERROR_DTYPE);
    vt_expect_error(ctx, VF_ERROR_DTYPE, "add", NULL);
}

static void test_variables(void **state)
{
    (void)state;
    each_backend(variables);
}

/* Many short-lived tensors in a loop: memory comes back (checked by the
   device-bytes counter and by LeakSanitizer). */
static void churn(vf_context *ctx)
{
    int64_t sh[1] = {100000};
    vf_context_stats s0, s1;
    vf_context_sync(ctx);
    vf_context_stats_get(ctx, &s0);
    for (int i = 0; i < 200; i++) {
        vf_scope_begin(ctx);
        vf_tensor *a = vf_fill(ctx, VF_F32, 1, sh, i);
        vf_tensor *b = vf_exp(ctx, vf_neg(ctx, a));
        assert_non_null(b);
        vf_scope_end(ctx);
    }
    vf_context_sync(ctx);
    vf_context_stats_get(ctx, &s1);
    assert_true(s1.device_bytes_in_use <= s0.device_bytes_in_use);
}

static void test_churn(void **state)
{
    (void)state;
    each_backend(churn);
}

/* What a released tensor keeps until its context ends (handles are never
   reused, so a stale one is an error): its slot's page goes back to the
   system once every slot on it is dead, leaving a state byte and page
   tables. Measured as the resident bytes of the handle slabs after many
   scopes of tensors have ended: under a quarter byte per release, once the
   pages of dead slots' state bytes go back too (a byte each before:
   eager soak RSS grew by it). A tensor's struct is ~170 bytes, so keeping
   dead slots resident would fail by a factor of 340. */
static void release_cost(vf_context *ctx)
{
    enum { STEPS = 1000, PER_STEP = 100 };
    int64_t sh[1] = {2};
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, sh, 1.0), *first = NULL;
    for (int i = 0; i < STEPS; i++) {
        vf_scope_begin(ctx);
        vf_tensor *y = x;
        for (int k = 0; k < PER_STEP - 1; k++) y = vf_add(ctx, y, x);
        if (i == 100) first = y; /* past the slab's first page of state bytes */
        vf_tensor_release(vf_fill(ctx, VF_F32, 1, sh, 2.0)); /* released early, too */
        assert_non_null(y);
        vf_scope_end(ctx);
    }
    assert_int_equal(vf_context_sync(ctx), VF_OK);
    size_t resident = vf_handles_resident_bytes(&ctx->tensor_slots);
    double per_release = (double)resident / (STEPS * PER_STEP);
    printf("release_cost (%s): %zu resident bytes of tensor slabs after %d releases: %.2f bytes each "
           "(a slot is %zu)\n", vf_backend_get(ctx) == VF_BACKEND_CPU ? "cpu" : "vulkan", resident,
           STEPS * PER_STEP, per_release, ctx->tensor_slots.slot_size);
    /* the dead slots' pages and, once all their slots are dead, the pages
       of their state bytes went back: no byte per tensor is left (1 byte
       each while state bytes stayed; 0.33 while checking a slot page read
       given-back state pages back in; the rest is the slabs' first pages
       and the pages of the last slots) */
    assert_true(per_release < 0.25);
    /* an old handle, its state byte given back: still refused */
    assert_null(vf_neg(ctx, first));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "tensor #", "was released by", "no longer recorded", NULL);
    /* and the stale handles of all of them are still recognised */
    vf_scope_begin(ctx);
    vf_tensor *dead = vf_fill(ctx, VF_F32, 1, sh, 1.0);
    vf_scope_end(ctx);
    assert_null(vf_neg(ctx, dead));
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "tensor #", "vf_scope_end", NULL);
}

static void test_release_cost(void **state)
{
    (void)state;
    each_backend(release_cost);
}

static vf_status square_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* A tape still open when its context ends, holding the record of a traced
   function's call (shared records, not tensors): the context frees them
   (LeakSanitizer in the asan preset reported 200 + 384 bytes before). */
static void open_tape_at_destroy(vf_context *ctx)
{
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 2.0), *y = NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "square", .body = square_body,
        .n_inputs = 1, .n_outputs = 1});
    vf_tape *tp = vf_tape_begin(ctx);
    assert_non_null(tp);
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
    vf_function_destroy(fn);
    /* no vf_tape_end: the context ends with the tape open */
}

static void test_open_tape_at_destroy(void **state)
{
    (void)state;
    each_backend(open_tape_at_destroy);
}

/* A tensor kept into the root scope lives until vf_context_destroy; while
   the context lives it is owned, not leaked. Its slot is in an mmap'd slab
   that LeakSanitizer does not scan unless the library registers it, so a
   leak check before the destroy (fuzz_api never destroys its context) took
   its storage for a direct leak of 24 bytes (the vf_storage) and its buffer. */
static void root_scope_not_leaked(vf_context *ctx)
{
    int64_t sh[1] = {4};
    float data[4] = {1, 2, 3, 4};
    vf_scope_begin(ctx);
    vf_tensor *t = vf_keep(vf_tensor_from_host(ctx, VF_F32, 1, sh, data));
    vf_tensor *f = vf_keep(vf_fill(ctx, VF_F32, 1, sh, 2.0));
    vf_scope_end(ctx);
    assert_non_null(t);
    assert_non_null(f);
#ifdef LT_ASAN
    assert_int_equal(__lsan_do_recoverable_leak_check(), 0);
#endif
    float v[4];
    assert_int_equal(vf_tensor_read(t, v, sizeof v), VF_OK);
    assert_true(v[3] == 4.0f);
}

static void test_root_scope_not_leaked(void **state)
{
    (void)state;
    each_backend(root_scope_not_leaked);
}

/* ---- who holds a reference: the scope, the caller, the library ----------
   A tensor's references: its scope's ownership (one, until the scope ends
   or the caller releases a tensor it never retained), the caller's own
   (each vf_tensor_retain, dropped by one vf_tensor_release) and the
   library's (a tape that recorded it, a function that holds a variable),
   which the library drops itself. Each case walks one order of releases,
   scope ends and tape ends and must release every reference exactly once:
   no "already released" error (a double release) and, once its scope is
   gone, as many live tensors as before (no leak: the context would free a
   leaked tensor at its end, out of LeakSanitizer's sight). The cases
   differentiate s = sum(w * w) (gradient 2w = 3) after releasing the
   product y early. */

static int live_tensors(const vf_context *ctx)
{
    int n = 0;
    for (const vf_tensor *t = ctx->live; t; t = t->next) n++;
    return n;
}

static bool is_live(const vf_tensor *t) { return vf_handle_state_of(t, VF_HANDLE_TENSOR).what == VF_HANDLE_LIVE; }

static vf_tensor *square(vf_context *ctx, vf_tensor *w) { return vf_mul(ctx, w, w); }

/* d s / d w is want everywhere (the caller's scope ends its gradient) */
static void grad_is(vf_tape *tp, vf_tensor *s, vf_tensor *w, float want)
{
    vf_tensor *g = NULL;
    assert_int_equal(vf_tape_gradient(tp, s, 1, &w, &g), VF_OK);
    float v[3];
    assert_int_equal(vf_tensor_read(g, v, sizeof v), VF_OK);
    for (int i = 0; i < 3; i++) assert_true(fabsf(v[i] - want) <= 1e-5f * want);
    vf_tensor_release(g);
}

/* d sum(w * w) / d w = 2w: 3 everywhere for w = 1.5 */
static void grad_is_3(vf_tape *tp, vf_tensor *s, vf_tensor *w) { grad_is(tp, s, w, 3.0f); }

/* the issue's order: released in the scope, the tape ends after the scope */
static void rel_before_scope_end(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = square(ctx, w), *s = vt_sum(ctx, y);
    vf_tensor_release(y);
    assert_true(is_live(y)); /* the tape still holds it */
    s = vf_keep(s);
    vf_scope_end(ctx);
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
    assert_false(is_live(y));
}

/* the caller's own reference, dropped after the scope and after the tape */
static void rel_after_scope_end(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = vf_tensor_retain(square(ctx, w)), *s = vf_keep(vt_sum(ctx, y));
    vf_scope_end(ctx);
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
    assert_true(is_live(y)); /* the caller's reference */
    assert_int_equal(vf_tensor_dim(y, 0), 3);
    vf_tensor_release(y);
    assert_false(is_live(y));
}

/* retain + release is the caller's pair; the second release ends the
   scope's ownership, and the tape keeps the value for the gradient */
static void retain_release(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = square(ctx, w);
    vf_tensor_retain(y);
    vf_tensor_release(y);
    vf_tensor_release(y);
    vf_tensor *s = vt_sum(ctx, y);
    grad_is_3(tp, s, w);
    vf_scope_end(ctx);
    assert_true(is_live(y));
    vf_tape_end(tp);
    assert_false(is_live(y));
}

/* kept one level out of nested scopes, released in the middle one */
static void nested_scopes(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = vf_keep(square(ctx, w)), *s = vf_keep(vt_sum(ctx, y));
    vf_scope_end(ctx);
    vf_tensor_release(y);
    s = vf_keep(s);
    vf_scope_end(ctx);
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
}

/* a tape is persistent until it ends: gradients after the release, twice */
static void persistent_tape(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = square(ctx, w), *s = vf_keep(vt_sum(ctx, y));
    vf_tensor_release(y);
    vf_scope_end(ctx);
    grad_is_3(tp, s, w);
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
}

/* two tapes hold y: the inner one ends first, then the outer one (whose
   record of the inner gradient's ops holds more) */
static void nested_tapes(vf_context *ctx, vf_tensor *w)
{
    vf_tape *outer = vf_tape_begin(ctx), *inner = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = square(ctx, w), *s = vt_sum(ctx, y);
    vf_tensor_release(y);
    s = vf_keep(s);
    vf_scope_end(ctx);
    grad_is_3(inner, s, w);
    vf_tape_end(inner);
    assert_true(is_live(y));
    grad_is_3(outer, s, w);
    vf_tape_end(outer);
    assert_false(is_live(y));
}

/* the tape ends inside the scope: y goes with the tape's references, the
   rest with the scope */
static void tape_ends_first(vf_context *ctx, vf_tensor *w)
{
    vf_scope_begin(ctx);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *y = square(ctx, w), *s = vt_sum(ctx, y);
    vf_tensor_release(y);
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
    assert_false(is_live(y));
    assert_true(is_live(s));
    vf_scope_end(ctx);
    assert_false(is_live(s));
}

/* never released by the caller: the scope drops its ownership, the tape
   its references, in either order */
static void never_released(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = square(ctx, w), *s = vf_keep(vt_sum(ctx, y));
    vf_scope_end(ctx);
    assert_true(is_live(y));
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
    assert_false(is_live(y));
}

/* one release too many while only the tape holds y: refused (the tape's
   references are not the caller's to drop), the tape still works */
static void released_too_often(vf_context *ctx, vf_tensor *w)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = square(ctx, w), *s = vf_keep(vt_sum(ctx, y));
    vf_tensor_release(y);
    vf_tensor_release(y);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "tensor #", "released once too often",
                    "vf_tensor_retain", NULL);
    vf_scope_end(ctx);
    assert_true(is_live(y));
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
    assert_false(is_live(y));
}

/* a traced function holds the variables it was called with: the caller's
   release and the scope's end leave it its reference, and its end drops
   it (a library reference that is no tape) */
static void function_holds_variable(vf_context *ctx, vf_tensor *w)
{
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "square", .body = square_body,
        .n_inputs = 1, .n_outputs = 1});
    vf_scope_begin(ctx);
    vf_tensor *v = vf_variable(ctx, w), *y = NULL;
    assert_int_equal(vf_function_call(fn, &v, &y), VF_OK);
    vf_tensor_release(v);
    vf_scope_end(ctx);
    assert_true(is_live(v));
    vf_function_destroy(fn);
    assert_false(is_live(v));
}

/* a traced function's call on a tape is one record holding its inputs and
   outputs: the output released early stays the record's until the tape ends */
static void call_output_released(vf_context *ctx, vf_tensor *w)
{
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "square", .body = square_body,
        .n_inputs = 1, .n_outputs = 1});
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = NULL;
    assert_int_equal(vf_function_call(fn, &w, &y), VF_OK);
    vf_tensor *s = vt_sum(ctx, y);
    vf_tensor_release(y);
    s = vf_keep(s);
    vf_scope_end(ctx);
    assert_true(is_live(y));
    grad_is_3(tp, s, w);
    vf_tape_end(tp);
    assert_false(is_live(y));
    vf_function_destroy(fn);
}

static vf_status times_captured(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = vf_mul(ctx, in[0], *(vf_tensor **)user);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* a tensor the body captured (not a variable: read when traced, used by
   every call) is the function's too: released by the caller and out of
   its scope, the second call still reads it */
static void function_holds_capture(vf_context *ctx, vf_tensor *w)
{
    vf_tensor *c = NULL;
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "times_c", .body = times_captured,
        .user = &c, .n_inputs = 1, .n_outputs = 1});
    vf_scope_begin(ctx);
    c = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 2.0);
    vf_tensor *y = NULL;
    assert_int_equal(vf_function_call(fn, &w, &y), VF_OK);
    vf_tensor_release(c);
    vf_scope_end(ctx);
    assert_true(is_live(c));
    assert_int_equal(vf_function_call(fn, &w, &y), VF_OK);
    float v[3];
    assert_int_equal(vf_tensor_read(y, v, sizeof v), VF_OK);
    assert_true(v[0] == 3.0f && v[2] == 3.0f);
    vf_function_destroy(fn);
    assert_false(is_live(c));
}

static vf_status loop_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, vt_sum(ctx, in[0]), vt_scalar(ctx, 1e30));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status loop_square(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **seen = user;
    while (*seen) seen++;
    *seen = out[0] = vf_mul(ctx, in[0], in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* an eager loop under a tape: each earlier iteration's value leaves the
   caller's scope at once and lives as long as the tape (it stayed in the
   scope until the scope ended before); d sum(w^8) / dw = 8 w^7 */
static void loop_under_tape(vf_context *ctx, vf_tensor *w)
{
    vf_tensor *seen[4] = {0}, *x = w;
    vf_tape *tp = vf_tape_begin(ctx);
    assert_int_equal(vf_while_loop(ctx, loop_cond, loop_square, 1, &x, 3, seen), VF_OK);
    assert_true(x == seen[2]);
    vf_tensor *g = NULL, *s = vt_sum(ctx, x);
    assert_int_equal(vf_tape_gradient(tp, s, 1, &w, &g), VF_OK);
    assert_true(fabsf(vt_read1(vt_sum(ctx, g)) - 3 * 136.6875f) < 1e-3f);
    vf_tape_end(tp);
    assert_false(is_live(seen[0]));
    assert_false(is_live(seen[1]));
    assert_true(is_live(seen[2]));
}

/* a user kernel's call on a tape is a record like a function call's:
   d sum(w^3) / dw = 3 w^2 = 6.75 */
static void kernel_output_released(vf_context *ctx, vf_tensor *w)
{
    vf_kernel *k = vt_cube_kernel(ctx, true);
    vf_tape *tp = vf_tape_begin(ctx);
    vf_scope_begin(ctx);
    vf_tensor *y = NULL;
    assert_int_equal(vf_kernel_call(k, 1, &w, NULL, &y), VF_OK);
    vf_tensor *s = vt_sum(ctx, y);
    vf_tensor_release(y);
    s = vf_keep(s);
    vf_scope_end(ctx);
    assert_true(is_live(y));
    grad_is(tp, s, w, 6.75f);
    vf_tape_end(tp);
    assert_false(is_live(y));
    vf_kernel_destroy(k);
}

/* a loaded function's variables are its own (vf_function_variable): the
   caller holds no reference, so releasing one is refused, not taken from
   the function (which then released it again at its end) */
static void loaded_variable_released(vf_context *ctx, vf_tensor *w)
{
    vf_tensor *c = vf_variable(ctx, w);
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "times_v", .body = times_captured,
        .user = &c, .n_inputs = 1, .n_outputs = 1}), *back = NULL;
    vf_tensor *y = NULL;
    assert_int_equal(vf_function_call(fn, &w, &y), VF_OK);
    char path[256];
    snprintf(path, sizeof path, "%s/vf_lifetime_%d_%s.vkf", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid(),
             vf_backend_get(ctx) == VF_BACKEND_CPU ? "cpu" : "vk");
    assert_int_equal(vf_function_save(fn, path), VF_OK);
    vf_function_destroy(fn);
    assert_int_equal(vf_function_load(ctx, path, &back), VF_OK);
    remove(path);
    vf_tensor *v = vf_function_variable(back, 0);
    assert_true(is_live(v));
    vf_tensor_release(v);
    vt_expect_error(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_release", "released once too often", NULL);
    assert_int_equal(vf_function_call(back, &w, &y), VF_OK);
    float got[3];
    assert_int_equal(vf_tensor_read(y, got, sizeof got), VF_OK);
    assert_true(got[0] == 2.25f);
    vf_function_destroy(back);
    assert_false(is_live(v));
}

/* x * x + x, its product released in the branch (the Python binding
   releases what Python drops at once) */
static vf_status branch_release(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *t = vf_mul(ctx, in[0], in[0]);
    out[0] = vf_add(ctx, t, in[0]);
    vf_tensor_release(t);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* the gradient of a traced vf_cond taken in the body: d sum(x^2 + x) = 2x + 1 */
static vf_status taped_cond_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *x = in[0], *y = NULL, *pred = vf_less(ctx, vt_sum(ctx, x), vt_scalar(ctx, 1e30));
    vf_status s = vf_cond(ctx, pred, branch_release, branch_release, 1, &x, 1, &y, user);
    if (s == VF_OK) s = vf_tape_gradient(tp, vt_sum(ctx, y), 1, &x, &out[0]);
    vf_tape_end(tp);
    return s;
}

/* the same early release in a branch of a traced vf_cond, a tape open in
   the body: the branch's scope and the tape each drop their own reference */
static void traced_branch_release(vf_context *ctx, vf_tensor *w)
{
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "taped_cond", .body = taped_cond_body,
        .n_inputs = 1, .n_outputs = 1});
    vf_tensor *g = NULL;
    if (vf_function_call(fn, &w, &g) != VF_OK) fail_msg("%s", vf_error_message(ctx));
    float v[3];
    assert_int_equal(vf_tensor_read(g, v, sizeof v), VF_OK);
    assert_true(v[0] == 4.0f && v[2] == 4.0f);
    vf_function_destroy(fn);
}

static void references(vf_context *ctx)
{
    static void (*const cases[])(vf_context *, vf_tensor *) = {
        rel_before_scope_end, rel_after_scope_end, retain_release, nested_scopes, persistent_tape,
        nested_tapes, tape_ends_first, never_released, released_too_often, function_holds_variable,
        call_output_released, function_holds_capture, loop_under_tape, kernel_output_released,
        loaded_variable_released, traced_branch_release,
    };
    vf_tensor *w = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 1.5);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int before = live_tensors(ctx);
        vf_scope_begin(ctx);
        cases[i](ctx, w);
        vf_scope_end(ctx);
        if (vf_status_get(ctx) != VF_OK) fail_msg("case %zu: %s", i, vf_error_message(ctx));
        assert_int_equal(live_tensors(ctx), before);
    }
    vf_tensor_release(w);
}

static void test_references(void **state)
{
    (void)state;
    each_backend(references);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_variables),
        cmocka_unit_test(test_churn),
        cmocka_unit_test(test_release_cost),
        cmocka_unit_test(test_open_tape_at_destroy),
        cmocka_unit_test(test_root_scope_not_leaked),
        cmocka_unit_test(test_references),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
