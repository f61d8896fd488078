/* The softmax and log_softmax gradients on the CPU backend: the reverse
 * pass alone, eager (a tape's vector-Jacobian product of y = op(x) with
 * seed g: the gradient rule's kernels and nothing else), and traced
 * (a vf_function of x, g computing op(x) and that gradient, next to one
 * computing op(x) alone, so the difference is the gradient's share), over
 * [2048,1024], [256,10] (an MLP's logits) and [32,2,12,12] (attention).
 * Sparse softmax cross entropy's gradient by the logits, eager, over
 * [256,10] and [2048,1024]. Best of --iters synced calls; microseconds
 * per call.
 * Usage: bench_rowgrad [--iters N] [--quick]   (not a test: nothing asserted) */
#include "autodiff/tape.h"
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "vkfuse.h"

typedef struct rg_case {
    const char *name;
    int rank;
    int64_t shape[4];
} rg_case;

typedef struct rg_user {
    bool log;  /* log_softmax */
    bool grad; /* the gradient too */
} rg_user;

static vf_tensor *row_op(vf_context *ctx, bool log, vf_tensor *x)
{
    return log ? vf_log_softmax(ctx, x, -1) : vf_softmax(ctx, x, -1);
}

/* out[0] = op(x), or the gradient of op at x with seed g */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const rg_user *u = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *y = row_op(ctx, u->log, in[0]);
    vf_status s = VF_OK;
    if (u->grad)
        s = vf_tape_vjp(tape, 1, &y, &in[1], 1, &in[0], &out[0]);
    else
        out[0] = y;
    vf_tape_end(tape);
    return s;
}

/* Best seconds of the eager reverse pass alone. */
static double eager_grad(vf_context *ctx, bool log, vf_tensor *x, vf_tensor *g, int iters)
{
    double best = INFINITY;
    vf_scope_begin(ctx);
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *y = row_op(ctx, log, x);
    vf_context_sync(ctx);
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        vf_tensor *dx = NULL;
        double t0 = vb_now();
        vf_status s = vf_tape_vjp(tape, 1, &y, &g, 1, &x, &dx);
        if (s == VF_OK) s = vf_context_sync(ctx);
        double t = vb_now() - t0;
        vf_scope_end(ctx);
        if (s != VF_OK) {
            fprintf(stderr, "bench_rowgrad: %s\n", vf_error_message(ctx));
            exit(1);
        }
        if (i && t < best) best = t;
    }
    vf_tape_end(tape);
    vf_scope_end(ctx);
    return best;
}

int main(int argc, char **argv)
{
    int iters = 20;
    bool quick = false;
    int rc = vb_args(argc, argv, "bench_rowgrad", NULL, &iters, &quick, 3);
    if (rc >= 0) return rc;
    vf_context *ctx = NULL;
    if (vf_context_create(&(vf_context_desc){.backend = VF_BACKEND_CPU}, &ctx) != VF_OK) {
        fprintf(stderr, "bench_rowgrad: no CPU context\n");
        return 1;
    }
    static const rg_case cases[] = {
        {"[2048,1024]", 2, {2048, 1024}}, {"[256,10]", 2, {256, 10}}, {"[32,2,12,12]", 4, {32, 2, 12, 12}}};
    printf("%-13s %-12s %12s %14s %14s\n", "op", "shape", "eager grad", "traced fwd+grad", "traced fwd");
    for (int c = 0; c < (int)(sizeof cases / sizeof cases[0]); c++) {
        if (quick && c == 0) continue;
        for (int lg = 0; lg < 2; lg++) {
            const rg_case *k = &cases[c];
            vf_scope_begin(ctx);
            vf_tensor *in[2] = {vf_random_normal(ctx, VF_F32, k->rank, k->shape, 7),
                                vf_random_normal(ctx, VF_F32, k->rank, k->shape, 8)};
            int n_iters = k->shape[0] * k->shape[1] > 100000 ? iters : iters * 10;
            double te = eager_grad(ctx, lg, in[0], in[1], n_iters);
            rg_user ug = {.log = lg, .grad = true}, uf = {.log = lg};
            vf_function_desc d = {.name = "rowgrad", .body = body, .user = &ug, .n_inputs = 2, .n_outputs = 1};
            vb_figures fg = vb_time_function(ctx, &d, in, n_iters, "bench_rowgrad");
            d.user = &uf;
            vb_figures ff = vb_time_function(ctx, &d, in, n_iters, "bench_rowgrad");
            const char *op = lg ? "log_softmax" : "softmax";
            printf("%-13s %-12s %9.1f us %11.1f us %11.1f us\n", op, k->name, te * 1e6, fg.sec * 1e6, ff.sec * 1e6);
            char key[64];
            snprintf(key, sizeof key, "%s_%d_eager_us", op, c);
            vb_summary(key, te * 1e6);
            snprintf(key, sizeof key, "%s_%d_traced_us", op, c);
            vb_summary(key, fg.sec * 1e6);
            vf_scope_end(ctx);
        }
    }
    /* sparse softmax cross entropy's gradient by the logits: the losses
       [L] seeded with g [L] */
    static const int64_t xs[2][2] = {{256, 10}, {2048, 1024}};
    for (int c = 0; c < (quick ? 1 : 2); c++) {
        vf_scope_begin(ctx);
        int64_t L = xs[c][0];
        int32_t *lab = malloc((size_t)L * sizeof *lab);
        for (int64_t i = 0; i < L; i++) lab[i] = (int32_t)(i * 7 % xs[c][1]);
        vf_tensor *labels = vf_tensor_from_host(ctx, VF_I32, 1, &L, lab);
        free(lab);
        vf_tensor *logits = vf_random_normal(ctx, VF_F32, 2, xs[c], 9), *g = vf_random_normal(ctx, VF_F32, 1, &L, 10);
        vf_tape *tape = vf_tape_begin(ctx);
        vf_tensor *loss = vf_sparse_softmax_cross_entropy(ctx, labels, logits);
        double best = INFINITY;
        int n_iters = c ? iters : iters * 10;
        for (int i = 0; i <= n_iters; i++) {
            vf_scope_begin(ctx);
            vf_tensor *dx = NULL;
            double t0 = vb_now();
            vf_status st = vf_tape_vjp(tape, 1, &loss, &g, 1, &logits, &dx);
            if (st == VF_OK) st = vf_context_sync(ctx);
            double t = vb_now() - t0;
            vf_scope_end(ctx);
            if (st != VF_OK) {
                fprintf(stderr, "bench_rowgrad: %s\n", vf_error_message(ctx));
                return 1;
            }
            if (i && t < best) best = t;
        }
        vf_tape_end(tape);
        printf("%-13s [%lld,%lld] %9.1f us\n", "xent", (long long)xs[c][0], (long long)xs[c][1], best * 1e6);
        char key[64];
        snprintf(key, sizeof key, "xent_%d_eager_us", c);
        vb_summary(key, best * 1e6);
        vf_scope_end(ctx);
    }
    vb_summary_print("rowgrad");
    vf_context_destroy(ctx);
    return 0;
}
