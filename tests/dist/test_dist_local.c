/* vkfuse_dist inside one process: N threads, one context each (two
 * contexts on one device, as lavapipe allows; or the CPU backend), no MPI.
 * Usage: test_dist_local N. Each thread checks eager and traced
 * allreduce, a broadcast, and that weights made on rank 0's context reach
 * the others with vf_tensor_copy_to; then the failure cases: a rank that
 * leaves is named at once, a rank that does not come is named at the
 * timeout and, when it comes later, told that the others gave up waiting
 * for it. Exits non-zero on any failure. */
#include <vkfuse_dist.h>

#include "sym_step.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int N;
static vf_dist_local *group, *group2, *group3;
static vf_tensor *w0;          /* made on the main thread's context, copied by every rank
                                  (no thread holds a scope open on it: its calls never wait) */
static pthread_barrier_t made;
static int failures;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

#define CHECK(c, ...)                                                            \
    do {                                                                         \
        if (!(c)) {                                                              \
            pthread_mutex_lock(&mu);                                             \
            fprintf(stderr, "rank %d line %d: ", r, __LINE__);                   \
            fprintf(stderr, __VA_ARGS__);                                        \
            fprintf(stderr, "\n");                                               \
            failures++;                                                          \
            pthread_mutex_unlock(&mu);                                           \
        }                                                                        \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *t[2] = {vf_mul(ctx, in[0], in[0]), vf_cast(ctx, in[0], VF_I32)};
    return vf_dist_allreduce(user, 2, t, VF_DIST_SUM, out);
}

static void *rank_main(void *arg)
{
    int r = (int)(intptr_t)arg;
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) {
        CHECK(0, "context: %s", vf_error_message(ctx));
        return NULL;
    }
    vf_dist *d = NULL;
    vf_status s = vf_dist_create(ctx, &(vf_dist_desc){.local = group, .local_rank = r, .timeout_s = 20}, &d);
    CHECK(s == VF_OK, "vf_dist_create: %s", vf_dist_create_error());
    if (!d) goto out;
    CHECK(vf_dist_rank(d) == r && vf_dist_size(d) == N, "rank %d size %d", vf_dist_rank(d), vf_dist_size(d));
    vf_scope_begin(ctx);
    /* eager: f32 mean, i32 sum, f16 sum, bool or */
    float xf[5];
    int32_t xi[5];
    uint16_t xh[5];
    uint8_t xb[5];
    for (int k = 0; k < 5; k++) {
        xf[k] = (float)(r * 10 + k), xi[k] = r - k, xb[k] = (uint8_t)(k == r);
        xh[k] = (uint16_t)(0x3c00 + (r << 10)); /* 1, 2, 4, ...: 2^r */
    }
    const int64_t five = 5;
    vf_tensor *in[4] = {vf_tensor_from_host(ctx, VF_F32, 1, &five, xf), vf_tensor_from_host(ctx, VF_I32, 1, &five, xi),
                        vf_tensor_from_host(ctx, VF_F16, 1, &five, xh), vf_tensor_from_host(ctx, VF_BOOL, 1, &five, xb)};
    vf_tensor *o[4] = {0};
    s = vf_dist_allreduce(d, 2, in, VF_DIST_MEAN, o);
    CHECK(s == VF_OK, "%s", vf_dist_error_message(d));
    if (s == VF_OK) s = vf_dist_allreduce(d, 2, in + 2, VF_DIST_SUM, o + 2);
    CHECK(s == VF_OK, "%s", vf_dist_error_message(d));
    if (s == VF_OK) {
        float f[5];
        int32_t i[5];
        uint16_t h[5];
        uint8_t b[5];
        vf_tensor_read(o[0], f, sizeof f), vf_tensor_read(o[1], i, sizeof i);
        vf_tensor_read(o[2], h, sizeof h), vf_tensor_read(o[3], b, sizeof b);
        for (int k = 0; k < 5; k++) {
            double mf = 0, si = 0, sh = 0;
            for (int q = 0; q < N; q++) mf += q * 10 + k, si += q - k, sh += 1 << q;
            CHECK(f[k] == (float)(mf / N), "f32 mean[%d] %g want %g", k, f[k], mf / N);
            CHECK(i[k] == (int32_t)(si / N), "i32 mean[%d] %d want %d", k, i[k], (int32_t)(si / N));
            uint16_t want = 0;
            for (int e = 0; e < 30; e++) if ((double)(1 << e) <= sh && sh < (double)(2 << e)) want = (uint16_t)((e + 15) << 10 | (uint16_t)((sh / (1 << e) - 1) * 1024));
            CHECK(h[k] == want, "f16 sum[%d] %04x want %04x", k, h[k], want);
            CHECK(b[k] == (k < N), "bool or[%d] %d", k, b[k]);
        }
    }
    /* traced: the same node as over MPI */
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "local", .body = body, .user = d, .n_inputs = 1, .n_outputs = 2});
    vf_tensor *t[2] = {0};
    s = vf_function_call(fn, in, t);
    CHECK(s == VF_OK, "traced: %s", vf_error_message(ctx));
    if (s == VF_OK) {
        float f[5];
        int32_t i[5];
        vf_tensor_read(t[0], f, sizeof f), vf_tensor_read(t[1], i, sizeof i);
        for (int k = 0; k < 5; k++) {
            double sq = 0, si = 0;
            for (int q = 0; q < N; q++) sq += (double)(q * 10 + k) * (q * 10 + k), si += q * 10 + k;
            CHECK(f[k] == (float)sq && i[k] == (int32_t)si, "traced [%d]: %g %d want %g %g", k, f[k], i[k], sq, si);
        }
    }
    vf_function_destroy(fn);
    /* a symbolic batch: one trace serves two batch sizes, each a plan split
       at the reduction (Vulkan) */
    sym_step ss = {.d = d, .w = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){3, 2}, sym_w)};
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "sym", .body = sym_body, .user = &ss, .n_inputs = 1,
                                                      .n_outputs = 2, .input_signature = sym_sig});
    for (int64_t b = 4; b <= 7; b += 3) {
        float xs[7 * 3], g[6], per[7];
        for (int64_t i = 0; i < b; i++)
            for (int j = 0; j < 3; j++) xs[i * 3 + j] = sym_x(r, i, j);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){b, 3}, xs), *so[2] = {0};
        s = vf_function_call(fn, &x, so);
        CHECK(s == VF_OK, "symbolic batch %ld: %s", (long)b, vf_error_message(ctx));
        if (s != VF_OK) break;
        vf_tensor_read(so[0], g, sizeof g), vf_tensor_read(so[1], per, sizeof(float) * (size_t)b);
        double e = sym_error(N, b, g, per);
        CHECK(e < 1e-3, "symbolic batch %ld: off by %g", (long)b, e);
        vf_function_stats fst;
        vf_function_stats_get(fn, &fst);
        CHECK(fst.traces == 1 && (vf_backend_get(ctx) != VF_BACKEND_VULKAN || (fst.planned && fst.submits_per_call == 2)),
              "symbolic batch %ld: %d traces, planned %d, %d submits", (long)b, fst.traces, fst.planned, fst.submits_per_call);
    }
    vf_function_destroy(fn);
    /* two tensors with the symbolic dim in one call: two packed passes */
    fn = vf_function_create(ctx, &(vf_function_desc){.name = "sym2", .body = sym2_body, .user = &ss, .n_inputs = 1,
                                                      .n_outputs = 3, .input_signature = sym_sig});
    for (int64_t b = 4; b <= 7; b += 3) {
        float xs[7 * 3], g[6], per[7], p[7 * 2];
        for (int64_t i = 0; i < b; i++)
            for (int j = 0; j < 3; j++) xs[i * 3 + j] = sym_x(r, i, j);
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){b, 3}, xs), *so[3] = {0};
        s = vf_function_call(fn, &x, so);
        CHECK(s == VF_OK, "two symbolic, batch %ld: %s", (long)b, vf_error_message(ctx));
        if (s != VF_OK) break;
        vf_tensor_read(so[0], g, sizeof g), vf_tensor_read(so[1], per, sizeof(float) * (size_t)b);
        vf_tensor_read(so[2], p, sizeof(float) * 2 * (size_t)b);
        double e = sym2_error(N, b, g, per, p);
        CHECK(e < 1e-3, "two symbolic, batch %ld: off by %g", (long)b, e);
        vf_function_stats fst;
        vf_function_stats_get(fn, &fst);
        CHECK(fst.traces == 1 && (vf_backend_get(ctx) != VF_BACKEND_VULKAN || fst.planned),
              "two symbolic, batch %ld: %d traces, planned %d", (long)b, fst.traces, fst.planned);
    }
    CHECK(sym_host_nodes(fn) == 2, "two symbolic: %d host nodes, want 2", sym_host_nodes(fn));
    vf_function_destroy(fn);
    /* weights made on another context reach every context by copy; a
       broadcast then overwrites whatever each rank had */
    vf_tensor *mine = vf_tensor_copy_to(ctx, w0);
    CHECK(mine && vf_tensor_context(mine) == ctx, "copy_to: %s", vf_error_message(ctx));
    vf_tensor *var = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){4, 3}, r + 1.0));
    s = vf_dist_broadcast(d, 1, &var, 0);
    CHECK(s == VF_OK, "broadcast: %s", vf_dist_error_message(d));
    float a[12], b[12];
    if (mine && vf_tensor_read(mine, a, sizeof a) == VF_OK && vf_tensor_read(var, b, sizeof b) == VF_OK)
        for (int k = 0; k < 12; k++) CHECK(b[k] == 1.0f && a[k] == a[k], "broadcast [%d] %g", k, b[k]);
    vf_scope_end(ctx);
    vf_dist_destroy(d);

    /* a rank that leaves: the others fail at once naming it */
    if (vf_dist_create(ctx, &(vf_dist_desc){.local = group2, .local_rank = r, .timeout_s = 30}, &d) == VF_OK) {
        if (r == 1) {
            vf_dist_destroy(d);
        } else {
            double t0 = now();
            s = vf_dist_allreduce(d, 0, NULL, VF_DIST_SUM, NULL);
            CHECK(s == VF_ERROR_DEVICE && strstr(vf_dist_error_message(d), "rank 1 failed or left") && now() - t0 < 10,
                  "left: %s %s", vf_status_name(s), vf_dist_error_message(d));
            vf_dist_destroy(d);
        }
    }
    /* a rank that does not come: the timeout; when it comes after that, it
       is told the others gave up waiting for it */
    if (vf_dist_create(ctx, &(vf_dist_desc){.local = group3, .local_rank = r, .timeout_s = 0.5}, &d) == VF_OK) {
        if (r != 1) {
            double t0 = now();
            s = vf_dist_allreduce(d, 0, NULL, VF_DIST_SUM, NULL);
            CHECK(s == VF_ERROR_DEVICE && strstr(vf_dist_error_message(d), "did not arrive within 0.5 s") &&
                      now() - t0 >= 0.5,
                  "timeout: %s %s", vf_status_name(s), vf_dist_error_message(d));
        }
        pthread_barrier_wait(&made);
        if (r == 1) {
            s = vf_dist_allreduce(d, 0, NULL, VF_DIST_SUM, NULL);
            CHECK(s == VF_ERROR_DEVICE && strstr(vf_dist_error_message(d), "the others gave up waiting for this rank"),
                  "late: %s %s", vf_status_name(s), vf_dist_error_message(d));
        }
        pthread_barrier_wait(&made);
        vf_dist_destroy(d);
    }
out:
    CHECK(vf_status_get(ctx) == VF_OK, "%s", vf_error_message(ctx));
    vf_context_destroy(ctx);
    return NULL;
}

int main(int argc, char **argv)
{
    N = argc > 1 ? atoi(argv[1]) : 2;
    if (N < 2 || N > 5) return fprintf(stderr, "usage: test_dist_local N (2 .. 5)\n"), 2;
    /* a failed create says why, as vf_dist_create does (vkfuse.h's one convention) */
    if (vf_dist_local_create(0) || !strstr(vf_dist_create_error(), "vf_dist_local_create: 0 ranks"))
        return fprintf(stderr, "vf_dist_local_create(0): no reason given: \"%s\"\n", vf_dist_create_error()), 1;
    group = vf_dist_local_create(N), group2 = vf_dist_local_create(N), group3 = vf_dist_local_create(N);
    pthread_barrier_init(&made, NULL, (unsigned)N);
    vf_context *main_ctx;
    if (vf_context_create(NULL, &main_ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(main_ctx)), 1;
    w0 = vf_random_normal(main_ctx, VF_F32, 2, (int64_t[]){4, 3}, 7);
    pthread_t th[5];
    for (int r = 0; r < N; r++) pthread_create(&th[r], NULL, rank_main, (void *)(intptr_t)r);
    for (int r = 0; r < N; r++) pthread_join(th[r], NULL);
    pthread_barrier_destroy(&made);
    vf_context_destroy(main_ctx);
    vf_dist_local_destroy(group), vf_dist_local_destroy(group2), vf_dist_local_destroy(group3);
    printf("test_dist_local: %d ranks in one process: %s\n", N, failures ? "FAILED" : "ok");
    return failures != 0;
}
