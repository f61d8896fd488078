/* Benchmark helpers (common.h). */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

double vb_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static char summary_line[4096];
static size_t summary_used;

void vb_summary(const char *key, double value)
{
    if (summary_used >= sizeof summary_line) return;
    int w = snprintf(summary_line + summary_used, sizeof summary_line - summary_used, " %s=%.6g", key,
                     isfinite(value) ? value : NAN);
    if (w > 0) summary_used += (size_t)w;
}

void vb_summary_print(const char *bench)
{
    printf("summary %s%s\n", bench, summary_line);
    fflush(stdout);
    summary_used = 0;
    summary_line[0] = '\0';
}

vb_figures vb_time_function(vf_context *ctx, const vf_function_desc *d, vf_tensor **in, int iters, const char *who)
{
    vb_figures f = {.sec = INFINITY};
    vf_function *fn = vf_function_create(ctx, d);
    if (!fn) {
        fprintf(stderr, "%s: %s\n", who, vf_error_message(ctx));
        return f;
    }
    for (int i = 0; i <= iters; i++) {
        vf_scope_begin(ctx);
        vf_tensor *y[8] = {NULL};
        vf_context_sync(ctx);
        double t0 = vb_now();
        vf_status s = vf_function_call(fn, in, y);
        if (s == VF_OK) s = vf_context_sync(ctx);
        double t = vb_now() - t0;
        vf_scope_end(ctx);
        if (s != VF_OK) {
            fprintf(stderr, "%s: %s\n", who, vf_error_message(ctx));
            vf_function_destroy(fn);
            return f;
        }
        if (i && t < f.sec) f.sec = t;
    }
    f.ok = vf_function_stats_get(fn, &f.fs) == VF_OK;
    vf_function_destroy(fn);
    return f;
}

const vf_tensor_spec vb_mlp_signature[2] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, VB_MLP_FEAT}},
                                            {.dtype = VF_I32, .rank = 1, .shape = {-1}}};

vf_status vb_mlp_train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vb_mlp *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], m->w[0]), m->b[0]));
    h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, m->w[1]), m->b[1]));
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, h, m->w[2]), m->b[2]);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    vf_tensor *vars[6] = {m->w[0], m->b[0], m->w[1], m->b[1], m->w[2], m->b[2]}, *g[6] = {0};
    vf_status s = vf_tape_gradient(tape, loss, 6, vars, g);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    vf_tensor *nv[6];
    for (int i = 0; i < 6 && m->assign_last; i++) nv[i] = vf_sub(ctx, vars[i], vf_mul(ctx, m->lr, g[i]));
    for (int i = 0; i < 6; i++)
        if ((s = m->assign_last ? vf_assign(vars[i], nv[i]) : vf_assign_sub(vars[i], vf_mul(ctx, m->lr, g[i]))) !=
            VF_OK)
            return s;
    out[0] = loss;
    return VF_OK;
}

vb_mlp vb_mlp_make(vf_context *ctx)
{
    static const int64_t dims[4] = {VB_MLP_FEAT, VB_MLP_HIDDEN, VB_MLP_HIDDEN, VB_MLP_CLASSES};
    vb_mlp m = {.lr = vf_fill(ctx, VF_F32, 0, NULL, 0.05)};
    for (int i = 0; i < 3; i++) {
        vf_tensor *w = vf_mul(ctx, vf_random_normal(ctx, VF_F32, 2, &dims[i], 42 + (uint64_t)i),
                              vf_fill(ctx, VF_F32, 0, NULL, sqrt(2.0 / (double)dims[i])));
        m.w[i] = vf_variable(ctx, w);
        m.b[i] = vf_variable(ctx, vf_fill(ctx, VF_F32, 1, &dims[i + 1], 0.0));
    }
    return m;
}

bool vb_mlp_data(int64_t batch, float **x, int32_t **labels)
{
    enum { F = VB_MLP_FEAT, C = VB_MLP_CLASSES };
    float *hx = malloc(sizeof(float) * (size_t)batch * F), *centre = malloc(sizeof(float) * C * F);
    int32_t *hy = malloc(sizeof(int32_t) * (size_t)batch);
    if (!hx || !hy || !centre) {
        free(hx), free(hy), free(centre);
        return false;
    }
    uint64_t seed = 88172645463325252ull;
#define UNIFORM() (seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17, (double)(seed >> 11) / 9007199254740992.0)
    for (int i = 0; i < C * F; i++) centre[i] = (float)(UNIFORM() * 2.0 - 1.0) * 0.2f;
    for (int64_t i = 0; i < batch; i++) {
        hy[i] = (int32_t)(UNIFORM() * C) % C;
        for (int j = 0; j < F; j++) hx[i * F + j] = centre[hy[i] * F + j] + (float)(UNIFORM() - 0.5) * 0.4f;
    }
#undef UNIFORM
    free(centre);
    *x = hx, *labels = hy;
    return true;
}

int vb_args(int argc, char **argv, const char *bench, const vb_flag *extra, int *iters, bool *quick, int quick_iters)
{
    for (int i = 1; i < argc; i++) {
        bool known = false;
        for (const vb_flag *f = extra; f && f->name; f++)
            if (!strcmp(argv[i], f->name)) *f->on = known = true;
        if (known) continue;
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            *iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--quick")) {
            *quick = true, *iters = quick_iters;
        } else {
            printf("usage: %s [--iters N] [--quick]", bench);
            for (const vb_flag *f = extra; f && f->name; f++) printf(" [%s]", f->name);
            printf("\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    if (*iters < 1) *iters = 1;
    return -1;
}

bool vb_contexts(const char *bench, vf_context **vk, vf_context **cpu)
{
    vf_context_desc dv = {.backend = VF_BACKEND_VULKAN}, dc = {.backend = VF_BACKEND_CPU};
    *vk = *cpu = NULL;
    if (vf_context_create(&dv, vk) == VF_OK && vf_context_create(&dc, cpu) == VF_OK) return true;
    fprintf(stderr, "%s: could not create the contexts: %s\n", bench,
            vf_last_error());
    vf_context_destroy(*vk);
    vf_context_destroy(*cpu);
    *vk = *cpu = NULL;
    return false;
}

vf_status vb_softmax_regression_grads(vf_context *ctx, vf_tensor *x, vf_tensor *labels, vf_tensor *w,
                                      vf_tensor *b, vf_tensor **loss, vf_tensor *g[2])
{
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, x, w), b);
    *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, labels, logits), 0, NULL, false);
    g[0] = g[1] = NULL;
    vf_status s = vf_tape_gradient(tape, *loss, 2, (vf_tensor *[]){w, b}, g);
    vf_tape_end(tape);
    return s;
}

static vf_status chain(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, bool tanhexp)
{
    vf_tensor *h = in[0];
    for (int i = 0; i < VB_CHAIN_OPS; i++)
        switch (i % 4) {
        case 0: h = vf_add(ctx, h, in[1]); break;
        case 1: h = vf_mul(ctx, h, in[2]); break;
        case 2: h = tanhexp ? vf_tanh(ctx, h) : vf_sub(ctx, h, in[1]); break;
        default: h = tanhexp ? vf_exp(ctx, h) : vf_neg(ctx, h); break;
        }
    out[0] = h;
    return h ? VF_OK : vf_status_get(ctx);
}

vf_status vb_chain_arith(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    return chain(ctx, in, out, false);
}

vf_status vb_chain_tanhexp(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    return chain(ctx, in, out, true);
}
