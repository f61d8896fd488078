/* The C side of bench/py_function.py (Python's vkfuse.function against the
 * same calls made from C), on the context VKFUSE_BACKEND picks:
 *   - call: a traced y = x * 2 + 1 on f32[4], one vf_function_call and the
 *     release of its result per call, no sync (what a Python call costs
 *     the library), in microseconds per call;
 *   - train_step: the train step of examples/train_step.c (softmax
 *     regression 784 -> 10, batch 128, tape gradients, the gradient
 *     clipped by vf_cond, vf_assign_sub), traced with input signature
 *     [-1,784], [-1], each step synced, in steps per second.
 * Each figure is the best of --rounds rounds (default 5) of --iters calls
 * (default 20000 calls, 200 steps). Not a test: the last line,
 * "summary bench_pycall key=value ...", is for the script.
 * Usage: bench_pycall [--iters N] [--steps N] [--rounds N] */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FEAT 784
#define CLASSES 10
#define BATCH 128

static vf_status affine(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(ctx, vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 2.0)), vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

typedef struct {
    vf_tensor *w, *b, *lr, *one;
} model;

static vf_status clip(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user; /* dw / |dw| (the threshold is 1) */
    out[0] = vf_div(ctx, in[0], in[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status keep(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    out[0] = in[0];
    return VF_OK;
}

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tensor *loss = NULL, *g[2];
    vf_status s = vb_softmax_regression_grads(ctx, in[0], in[1], m->w, m->b, &loss, g);
    if (s != VF_OK) return s;
    vf_tensor *norm = vf_norm(ctx, g[0]), *dw = NULL;
    s = vf_cond(ctx, vf_greater(ctx, norm, m->one), clip, keep, 2, (vf_tensor *[]){g[0], norm}, 1, &dw, m);
    if (s != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, dw))) != VF_OK) return s;
    if ((s = vf_assign_sub(m->b, vf_mul(ctx, m->lr, g[1]))) != VF_OK) return s;
    out[0] = loss;
    return VF_OK;
}

static int fail(vf_context *ctx)
{
    fprintf(stderr, "bench_pycall: %s\n", vf_error_message(ctx));
    vf_context_destroy(ctx);
    return 1;
}

int main(int argc, char **argv)
{
    int iters = 20000, steps = 200, rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        int *p = !strcmp(argv[i], "--iters") ? &iters : !strcmp(argv[i], "--steps") ? &steps
               : !strcmp(argv[i], "--rounds") ? &rounds : NULL;
        if (!p) return fprintf(stderr, "usage: bench_pycall [--iters N] [--steps N] [--rounds N]\n"), 2;
        *p = atoi(argv[i + 1]) > 0 ? atoi(argv[i + 1]) : 1;
    }
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fail(ctx);
    printf("device: %s\n", vf_device_name(ctx));

    vf_function *f = vf_function_create(ctx, &(vf_function_desc){.name = "affine", .body = affine, .n_inputs = 1,
                                                                  .n_outputs = 1});
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 1.0), *y = NULL;
    double best_call = INFINITY;
    for (int r = 0; r <= rounds && f; r++) { /* round 0 traces and warms up */
        double t0 = vb_now();
        for (int i = 0; i < iters; i++) {
            if (vf_function_call(f, &x, &y) != VF_OK) return fail(ctx);
            vf_tensor_release(y);
        }
        double t = (vb_now() - t0) / iters;
        if (r && t < best_call) best_call = t;
        if (vf_context_sync(ctx) != VF_OK) return fail(ctx);
    }
    if (!f) return fail(ctx);
    printf("call        %8.2f us per call (best of %d rounds of %d)\n", best_call * 1e6, rounds, iters);

    model m = {.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){FEAT, CLASSES}, 0.0)),
               .b = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, (int64_t[]){CLASSES}, 0.0)),
               .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.1), .one = vf_fill(ctx, VF_F32, 0, NULL, 1.0)};
    const vf_tensor_spec sig[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, FEAT}},
                                   {.dtype = VF_I32, .rank = 1, .shape = {-1}}};
    vf_function *step = vf_function_create(ctx, &(vf_function_desc){.name = "train_step", .body = train_step,
                                                                     .user = &m, .n_inputs = 2, .n_outputs = 1,
                                                                     .input_signature = sig});
    float *xs = malloc(sizeof *xs * BATCH * FEAT);
    int32_t labels[BATCH];
    if (!step || !xs) return fail(ctx);
    for (int i = 0; i < BATCH * FEAT; i++) xs[i] = (float)((i * 7919) % 1000) / 1000.0f;
    for (int i = 0; i < BATCH; i++) labels[i] = i % CLASSES;
    vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){BATCH, FEAT}, xs),
                        vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){BATCH}, labels)};
    free(xs);
    double best_step = INFINITY;
    for (int r = 0; r <= rounds; r++) {
        int n = r ? steps : 3;
        double t0 = vb_now();
        for (int i = 0; i < n; i++) {
            vf_tensor *loss = NULL;
            if (vf_function_call(step, in, &loss) != VF_OK || vf_context_sync(ctx) != VF_OK) return fail(ctx);
            vf_tensor_release(loss);
        }
        double t = (vb_now() - t0) / n;
        if (r && t < best_step) best_step = t;
    }
    vf_function_stats fs = {0};
    vf_function_stats_get(step, &fs);
    printf("train_step  %8.1f steps/s (best of %d rounds of %d; %d kernels, %d traces)\n", 1.0 / best_step, rounds,
           steps, fs.kernels, fs.traces);
    vb_summary("call_us", best_call * 1e6);
    vb_summary("steps_per_s", 1.0 / best_step);
    vb_summary_print("bench_pycall");
    vf_function_destroy(f);
    vf_function_destroy(step);
    vf_context_destroy(ctx);
    return 0;
}
