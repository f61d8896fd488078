/* The CPU backend's runtime: its buffer cache (cpu_alloc.c), its worker
 * threads (cpu_threads.c) and the VKFUSE_THREADS setting. The kernels'
 * results are checked by test_cpu_elementwise / test_cpu_reduce; here they
 * are checked to be the same bits on every thread count. */
#include "cpu/cpu.h"
#include "cpu/cpu_threads.h"
#include "child.h"
#include "cpu_test_common.h"

#include "api/api.h"
#include "graph/op.h"
#include "vkfuse.h"

static vf_context_stats be_stats(const vf_backend_t *be)
{
    vf_context_stats st;
    memset(&st, 0, sizeof st);
    be->iface->stats(be->self, &st);
    return st;
}

/* ---- the buffer cache -------------------------------------------------------- */

/* A steady loop of allocations takes each buffer from the cache: only the
   first round allocates. */
static void alloc_loop_reuses_buffers(void **state)
{
    fx *f = *state;
    const size_t sizes[] = {1 << 20, 300000, 1000, 4};
    for (int round = 0; round < 50; round++) {
        vf_buffer *b[COUNT(sizes)];
        for (int i = 0; i < COUNT(sizes); i++) {
            assert_int_equal(f->be.iface->alloc(f->be.self, sizes[i], &b[i]), VF_OK);
            assert_int_equal(b[i]->size, sizes[i]);
            assert_int_equal((uintptr_t)b[i]->data % 64, 0);
            memset(b[i]->data, round, sizes[i]); /* the whole requested size is usable */
        }
        for (int i = 0; i < COUNT(sizes); i++) f->be.iface->free(f->be.self, b[i]);
    }
    vf_context_stats st = be_stats(&f->be);
    assert_int_equal(st.device_allocations, COUNT(sizes));
    assert_int_equal(st.device_bytes_in_use, 0);
    assert_true(st.device_bytes_cached >= (int64_t)(sizes[0] + sizes[1] + sizes[2] + sizes[3]));
    assert_int_equal(st.device_bytes_reserved, st.device_bytes_cached);
    assert_int_equal(f->be.iface->trim(f->be.self), VF_OK);
    st = be_stats(&f->be);
    assert_int_equal(st.device_bytes_cached, 0);
    assert_int_equal(st.device_bytes_reserved, 0);
}

/* Sizes of one class share buffers (1000 and 1020 bytes: the 1024 class);
   the next class does not; a live buffer is never handed out twice. */
static void alloc_size_classes(void **state)
{
    fx *f = *state;
    vf_buffer *a, *b, *c, *d;
    assert_int_equal(f->be.iface->alloc(f->be.self, 1000, &a), VF_OK);
    void *data = a->data;
    f->be.iface->free(f->be.self, a);
    assert_int_equal(f->be.iface->alloc(f->be.self, 1020, &b), VF_OK);
    assert_ptr_equal(b->data, data);
    assert_int_equal(b->size, 1020);
    assert_int_equal(f->be.iface->alloc(f->be.self, 1020, &c), VF_OK); /* b is live: a new one */
    assert_ptr_not_equal(c->data, data);
    assert_int_equal(f->be.iface->alloc(f->be.self, 1100, &d), VF_OK);
    assert_int_equal(be_stats(&f->be).device_allocations, 3);
    assert_int_equal(be_stats(&f->be).device_bytes_in_use, 1020 + 1020 + 1100);
    f->be.iface->free(f->be.self, b);
    f->be.iface->free(f->be.self, c);
    f->be.iface->free(f->be.self, d);
}

/* Freed buffers past the cache's capacity go back at once. */
static void alloc_cache_capacity(void **state)
{
    fx *f = *state;
    vf_cpu *cpu = f->be.self;
    cpu->cache_cap = 3 << 20;
    vf_buffer *b[4];
    for (int i = 0; i < 4; i++) assert_int_equal(f->be.iface->alloc(f->be.self, 1 << 20, &b[i]), VF_OK);
    for (int i = 0; i < 4; i++) f->be.iface->free(f->be.self, b[i]);
    vf_context_stats st = be_stats(&f->be);
    assert_int_equal(st.device_bytes_cached, 3 << 20);
    assert_int_equal(st.device_bytes_reserved, 3 << 20);
    f->be.iface->trim(f->be.self);
}

/* Through the API: an eager loop on a CPU context allocates in its first
   step only; vf_context_trim gives the cache back. */
static void eager_loop_stops_allocating(void **state)
{
    (void)state;
    vf_context_desc d = {.backend = VF_BACKEND_CPU};
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    int64_t shape[2] = {256, 512};
    vf_tensor *w = vf_fill(ctx, VF_F32, 2, shape, 0.5);
    int64_t after_first = 0;
    for (int step = 0; step < 10; step++) {
        vf_scope_begin(ctx);
        vf_tensor *y = vf_relu(ctx, vf_add(ctx, vf_mul(ctx, w, w), w));
        const int axis0[1] = {0};
        vf_tensor *s = vf_reduce_sum(ctx, y, 1, axis0, false);
        float out[512];
        assert_int_equal(vf_tensor_read(s, out, sizeof out), VF_OK);
        assert_true(out[0] == 0.75f * 256);
        vf_scope_end(ctx);
        vf_context_stats st;
        assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
        if (step == 0) after_first = st.device_allocations;
        assert_int_equal(st.device_allocations, after_first);
        assert_true(st.device_bytes_cached > 0);
    }
    assert_int_equal(vf_context_trim(ctx), VF_OK);
    vf_context_stats st;
    assert_int_equal(vf_context_stats_get(ctx, &st), VF_OK);
    assert_int_equal(st.device_bytes_cached, 0);
    assert_int_equal(st.device_bytes_reserved, st.device_bytes_in_use);
    vf_context_destroy(ctx);
}

/* vf_context_trim empties the host backend's cache too (the CPU backend
   a context keeps for constant folding and VKFUSE_CHECK). */
static void trim_reaches_host_backend(void **state)
{
    (void)state;
    vf_context *ctx = NULL;
    assert_int_equal(vf_context_create(NULL, &ctx), VF_OK);
    vf_ctx_lock(ctx);
    vf_host *h = vf_context_host(ctx);
    assert_non_null(h);
    vf_buffer *b;
    assert_int_equal(h->be.iface->alloc(h->be.self, 4096, &b), VF_OK);
    h->be.iface->free(h->be.self, b);
    vf_context_stats st = be_stats(&h->be);
    assert_int_equal(st.device_bytes_cached, 4096);
    vf_ctx_unlock(ctx);
    assert_int_equal(vf_context_trim(ctx), VF_OK);
    st = be_stats(&h->be);
    assert_int_equal(st.device_bytes_cached, 0);
    vf_context_destroy(ctx);
}

/* ---- worker threads ------------------------------------------------------------ */

typedef struct seen_parts {
    int64_t lo[8], hi[8];
    int calls[8];
} seen_parts;

static void record_part(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    seen_parts *s = arg;
    assert_true(parts == 4 && part >= 0 && part < 4);
    s->lo[part] = lo; /* each part its own slot: no race */
    s->hi[part] = hi;
    s->calls[part]++;
}

/* The cut is static: parts of at least `grain` items, at most one per
   thread, every item in exactly one part. */
static void parallel_cuts_statically(void **state)
{
    (void)state;
    vf_cpu_workers *w = vf_cpu_workers_create(4);
    assert_non_null(w);
    assert_int_equal(vf_cpu_parts(w, 10, 1), 4);
    assert_int_equal(vf_cpu_parts(w, 10, 5), 2);
    assert_int_equal(vf_cpu_parts(w, 10, 100), 1);
    for (int rep = 0; rep < 20; rep++) {
        seen_parts s = {{0}};
        vf_cpu_parallel(w, 10, 1, record_part, &s);
        const int64_t lo[4] = {0, 3, 6, 8}, hi[4] = {3, 6, 8, 10};
        for (int i = 0; i < 4; i++) {
            assert_int_equal(s.calls[i], 1);
            assert_int_equal(s.lo[i], lo[i]);
            assert_int_equal(s.hi[i], hi[i]);
        }
    }
    assert_int_equal(vf_cpu_workers_started(w), 3);
    vf_cpu_workers_destroy(w);
}

/* A child forked after the workers started has none of them: it runs
   every part itself, and destroying the pool there returns (it used to
   wait for the parent's workers forever). */
static vf_cpu_workers *forked_pool;

static void forked_child(vf_backend be)
{
    (void)be;
    seen_parts s = {{0}};
    vf_cpu_parallel(forked_pool, 10, 1, record_part, &s);
    for (int i = 0; i < 4; i++)
        if (s.calls[i] != 1) exit(1);
    vf_cpu_workers_destroy(forked_pool);
}

static void forked_child_runs_alone(void **state)
{
    (void)state;
    forked_pool = vf_cpu_workers_create(4);
    assert_non_null(forked_pool);
    seen_parts s = {{0}};
    vf_cpu_parallel(forked_pool, 10, 1, record_part, &s);
    assert_int_equal(vf_cpu_workers_started(forked_pool), 3);
    assert_true(vt_child_run("parallel in a forked child", forked_child, VF_BACKEND_CPU, 20));
    vf_cpu_parallel(forked_pool, 10, 1, record_part, &s); /* the parent's workers are still there */
    vf_cpu_workers_destroy(forked_pool);
}

/* One kernel of each kind on a backend of `threads` threads; the results'
   bytes concatenated into *out (caller frees), *started: the workers it
   started. */
enum { RN = 300, RC = 1000 };
static size_t run_kernels(int threads, const void *x, const void *y, const void *r, void **out, int *started)
{
    fx f = {0};
    assert_int_equal(vf_cpu_backend_create_threads(&f.err, threads, &f.be), VF_OK);
    assert_int_equal(vf_cpu_workers_threads(((vf_cpu *)f.be.self)->workers), threads);
    const int64_t sh[2] = {RN, RC}, row[1] = {RC}, col[2] = {RN, 1}, red0[1] = {RC}, red1[1] = {RN};
    vf_tref tx = mk(&f, VF_F32, 2, sh, x), ty = mk(&f, VF_F32, 2, sh, y), tr = mk(&f, VF_F32, 1, row, r);
    vf_tref tc = mk(&f, VF_F32, 2, col, x);
    int32_t labels[RN];
    for (int i = 0; i < RN; i++) labels[i] = (i * 37) % RC;
    vf_tref tl = mk(&f, VF_I32, 1, red1, labels);
    vf_exec ex[] = {
        {.op = VF_OP_ADD, .n_in = 2, .in = {tx, tr}},          /* fast row, broadcast */
        {.op = VF_OP_MAXIMUM, .n_in = 2, .in = {tc, ty}},      /* fast, the other side broadcast */
        {.op = VF_OP_EXP, .n_in = 1, .in = {tx}},               /* generic (double) row */
        {.op = VF_OP_POW, .n_in = 2, .in = {tx, tc}},           /* generic, broadcast */
        {.op = VF_OP_REDUCE_SUM, .n_in = 1, .in = {tx}, .attrs = {.axes_mask = 0x1}}, /* lanes */
        {.op = VF_OP_REDUCE_MAX, .n_in = 1, .in = {tx}, .attrs = {.axes_mask = 0x2}}, /* runs */
        {.op = VF_OP_SOFTMAX, .n_in = 1, .in = {tx}, .attrs = {.axis = 1}},
        {.op = VF_OP_LOG_SOFTMAX, .n_in = 1, .in = {tx}, .attrs = {.axis = 0}},
        {.op = VF_OP_SPARSE_XENT, .n_in = 2, .in = {tl, tx}},
    };
    size_t total = 0, at = 0;
    void *parts[COUNT(ex)];
    size_t bytes[COUNT(ex)];
    for (int i = 0; i < COUNT(ex); i++) {
        bool to_rows = ex[i].op == VF_OP_REDUCE_MAX || ex[i].op == VF_OP_SPARSE_XENT;
        const int64_t *os = ex[i].op == VF_OP_REDUCE_SUM ? red0 : to_rows ? red1 : sh;
        ex[i].out = mk(&f, VF_F32, ex[i].op == VF_OP_REDUCE_SUM || to_rows ? 1 : 2, os, NULL);
        run(&f, &ex[i]);
        parts[i] = dl(&f, &ex[i].out);
        bytes[i] = (size_t)numel(ex[i].out.rank, ex[i].out.shape) * 4;
        total += bytes[i];
    }
    char *all = malloc(total);
    assert_non_null(all);
    for (int i = 0; i < COUNT(ex); i++) {
        memcpy(all + at, parts[i], bytes[i]);
        at += bytes[i];
        free(parts[i]);
    }
    *started = vf_cpu_workers_started(((vf_cpu *)f.be.self)->workers);
    free_bufs(&f);
    f.be.iface->destroy(f.be.self);
    *out = all;
    return total;
}

/* Elementwise (fast and generic), reductions, softmax and sparse cross
   entropy give the same
   bits on 1, 2, 3 and 5 threads, and a backend of n threads starts n - 1
   workers for kernels this large. */
static void threads_same_bits(void **state)
{
    (void)state;
    void *x = gen(VF_F32, RN * RC, true), *y = gen(VF_F32, RN * RC, true), *r = gen(VF_F32, RC, true);
    void *one = NULL;
    int started = -1;
    size_t n1 = run_kernels(1, x, y, r, &one, &started);
    assert_int_equal(started, 0);
    const int counts[] = {2, 3, 5};
    for (int i = 0; i < COUNT(counts); i++) {
        void *got = NULL;
        size_t n = run_kernels(counts[i], x, y, r, &got, &started);
        assert_int_equal(n, n1);
        assert_int_equal(started, counts[i] - 1);
        assert_memory_equal(got, one, n);
        free(got);
    }
    free(one);
    free(x), free(y), free(r);
}

/* A small kernel stays on the calling thread: no worker is started. */
static void small_kernels_stay_serial(void **state)
{
    (void)state;
    fx f = {0};
    assert_int_equal(vf_cpu_backend_create_threads(&f.err, 4, &f.be), VF_OK);
    const int64_t sh[2] = {64, 64};
    vf_tref a = mk(&f, VF_F32, 2, sh, NULL);
    vf_exec e = {.op = VF_OP_ADD, .n_in = 2, .in = {a, a}, .out = a};
    run(&f, &e);
    assert_int_equal(vf_cpu_workers_started(((vf_cpu *)f.be.self)->workers), 0);
    free_bufs(&f);
    f.be.iface->destroy(f.be.self);
}

/* Every f32 elementwise op of one or two inputs (the fast rows and the
   reference-calling rows) gives, bit for bit, the op table's double
   function rounded to float, on values with NaN, infinities and signed
   zeros, both operands full and either broadcast; but exp, tanh, sigmoid,
   gelu, log and softplus, evaluated in float (src/cpu/fast_math.c), are held to their
   stated contract: that value or one ulp from it (tests/test_cpu_rows.c
   checks their bounds against the exact value over the f32 range). */
static void f32_rows_are_the_reference(void **state)
{
    fx *f = *state;
    enum { N = 64 };
    const int64_t sh[1] = {N}, one[1] = {1};
    float *x = gen(VF_F32, N, true), *y = gen(VF_F32, N, true);
    y[6] = NAN, y[7] = 0.0f, y[8] = -0.0f, x[9] = 2.5f, y[9] = 2.5f; /* pairs of specials, ties */
    int checked = 0;
    for (int op = 0; op < VF_OP_COUNT; op++) {
        const vf_op_info *info = vf_op_get((vf_op)op);
        if (info->kind != VF_KIND_ELEMENTWISE || !info->cpu_f || (info->arity != 1 && info->arity != 2) ||
            !(info->accepts & VF_M(VF_F32)) || op == VF_OP_CAST || op == VF_OP_COPY || info->cond_in)
            continue;
        bool cmp = info->result == VF_RESULT_BOOL;
        for (int bc = 0; bc < (info->arity == 2 ? 3 : 2); bc++) { /* 0: full, 1: a broadcast, 2: b broadcast */
            vf_exec e = {.op = (vf_op)op, .n_in = info->arity};
            e.in[0] = mk(f, VF_F32, 1, bc == 1 ? one : sh, x);
            if (info->arity == 2) e.in[1] = mk(f, VF_F32, 1, bc == 2 ? one : sh, y);
            e.out = mk(f, cmp ? VF_BOOL : VF_F32, 1, sh, NULL);
            run(f, &e);
            void *got = dl(f, &e.out);
            for (int i = 0; i < N; i++) {
                double a = x[bc == 1 ? 0 : i], b = info->arity == 2 ? y[bc == 2 ? 0 : i] : a;
                double r = info->cpu_f(a, b, a);
                if (cmp) {
                    assert_int_equal(((uint8_t *)got)[i], r != 0.0);
                } else {
                    float want = (float)r, have = ((float *)got)[i];
                    bool float_eval = op == VF_OP_EXP || op == VF_OP_TANH || op == VF_OP_SIGMOID ||
                                      op == VF_OP_GELU || op == VF_OP_LOG || op == VF_OP_SOFTPLUS;
                    if (float_eval && want == want && have == have && nextafterf(want, -INFINITY) <= have &&
                        have <= nextafterf(want, INFINITY) && signbit(want) == signbit(have))
                        continue;
                    if (memcmp(&want, &have, 4) != 0)
                        fail_msg("%s: element %d (a %g b %g): got %a want %a", info->name, i, a, b, (double)have,
                                 (double)want);
                }
            }
            free(got);
            free_bufs(f);
            checked++;
        }
    }
    assert_true(checked > 40);
    free(x), free(y);
}

/* ---- VKFUSE_THREADS ---------------------------------------------------------------- */

static void threads_setting_parsed(void **state)
{
    (void)state;
    vf_err err = {0};
    int n = -1;
    assert_int_equal(vf_cpu_threads_parse(NULL, &n, &err), VF_OK);
    assert_int_equal(n, 0);
    assert_int_equal(vf_cpu_threads_parse("", &n, &err), VF_OK);
    assert_int_equal(n, 0);
    assert_int_equal(vf_cpu_threads_parse("3", &n, &err), VF_OK);
    assert_int_equal(n, 3);
    const char *bad[] = {"0", "-2", "two", "4x", "257", " "};
    for (int i = 0; i < COUNT(bad); i++) {
        vf_err_clear(&err);
        assert_int_equal(vf_cpu_threads_parse(bad[i], &n, &err), VF_ERROR_INVALID_ARGUMENT);
        assert_int_equal(n, 0);
        assert_non_null(strstr(err.message, "VKFUSE_THREADS="));
        assert_non_null(strstr(err.message, "whole number from 1 to 256"));
    }
}

/* The context reads VKFUSE_THREADS: a bad value fails vf_context_create
   with the message, a good one sizes the CPU backend's workers. */
static void threads_setting_in_context(void **state)
{
    (void)state;
    vf_context_desc d = {.backend = VF_BACKEND_CPU};
    vf_context *ctx = NULL;
    setenv("VKFUSE_THREADS", "lots", 1);
    assert_int_equal(vf_context_create(&d, &ctx), VF_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(vf_error_message(ctx), "VKFUSE_THREADS=lots"));
    vf_context_destroy(ctx);
    setenv("VKFUSE_THREADS", "3", 1);
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    int64_t shape[1] = {1 << 18};
    vf_scope_begin(ctx);
    vf_tensor *a = vf_fill(ctx, VF_F32, 1, shape, 2.0);
    vf_tensor *b = vf_mul(ctx, a, a);
    float *v = malloc(sizeof(float) << 18);
    assert_non_null(v);
    assert_int_equal(vf_tensor_read(b, v, sizeof(float) << 18), VF_OK);
    assert_true(v[(1 << 18) - 1] == 4.0f);
    free(v);
    vf_scope_end(ctx);
    /* the workers that mul started: VKFUSE_THREADS - 1 */
    assert_int_equal(vf_cpu_workers_started(((vf_cpu *)ctx->be.self)->workers), 2);
    unsetenv("VKFUSE_THREADS");
    vf_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(alloc_loop_reuses_buffers, setup, teardown),
        cmocka_unit_test_setup_teardown(alloc_size_classes, setup, teardown),
        cmocka_unit_test_setup_teardown(alloc_cache_capacity, setup, teardown),
        cmocka_unit_test(eager_loop_stops_allocating),
        cmocka_unit_test(trim_reaches_host_backend),
        cmocka_unit_test(parallel_cuts_statically),
        cmocka_unit_test(forked_child_runs_alone),
        cmocka_unit_test(threads_same_bits),
        cmocka_unit_test(small_kernels_stay_serial),
        cmocka_unit_test_setup_teardown(f32_rows_are_the_reference, setup, teardown),
        cmocka_unit_test(threads_setting_parsed),
        cmocka_unit_test(threads_setting_in_context),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
