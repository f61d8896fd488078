/* A traced step whose input batch is symbolic (input_signature {-1, 3}),
 * shared by test_dist (MPI ranks) and test_dist_local (threads): the
 * gradient of sum((x W)^2) with respect to the static weight W [3, 2] and
 * the per-example losses [B], summed over the ranks inside the step (one
 * host node, one collective call). Rank r's x[i][j] is sym_x(r, i, j).
 *
 * sym2_body reduces the predictions x W [B, 2] too: two f32 tensors with
 * the symbolic dim, which one packed buffer cannot take (its split back
 * has one size to infer), so the class is packed twice: two host nodes,
 * two collective calls (dist_traced.c). */
#ifndef VKFUSE_TEST_SYM_STEP_H
#define VKFUSE_TEST_SYM_STEP_H

#include <vkfuse_dist.h>

#include <stdlib.h>
#include <string.h>

typedef struct sym_step {
    vf_dist *d;
    vf_tensor *w;
} sym_step;

static const float sym_w[6] = {0.5f, -1.0f, 0.25f, 2.0f, -0.75f, 1.0f};
static const vf_tensor_spec sym_sig[1] = {{.dtype = VF_F32, .rank = 2, .shape = {-1, 3}}};

static float sym_x(int r, int64_t i, int j) { return (float)(r + 1) * 0.25f * (float)((i * 3 + j) % 5 - 2); }

static vf_status sym_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    sym_step *st = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *p = vf_matmul(ctx, in[0], st->w);
    vf_tensor *per = vf_reduce_sum(ctx, vf_mul(ctx, p, p), 1, (int[]){1}, false);
    vf_tensor *t[2] = {NULL, per};
    vf_status s = vf_tape_gradient(tape, vf_reduce_sum(ctx, per, 0, NULL, false), 1, &st->w, &t[0]);
    vf_tape_end(tape);
    return s == VF_OK ? vf_dist_allreduce(st->d, 2, t, VF_DIST_SUM, out) : s;
}

/* {grad W [3, 2], per [B], p = x W [B, 2]} */
static vf_status sym2_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    sym_step *st = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *p = vf_matmul(ctx, in[0], st->w);
    vf_tensor *per = vf_reduce_sum(ctx, vf_mul(ctx, p, p), 1, (int[]){1}, false);
    vf_tensor *t[3] = {NULL, per, p};
    vf_status s = vf_tape_gradient(tape, vf_reduce_sum(ctx, per, 0, NULL, false), 1, &st->w, &t[0]);
    vf_tape_end(tape);
    return s == VF_OK ? vf_dist_allreduce(st->d, 3, t, VF_DIST_SUM, out) : s;
}

static double sym_worse(double err, double got, double want)
{
    double d = got > want ? got - want : want - got;
    return d > err || d != d ? d : err; /* NaN counts as worse */
}

/* The largest |got - want| of a step at batch b over `size` ranks
   (g: [3, 2], per: [b]; want in double). */
static double sym_error(int size, int64_t b, const float *g, const float *per)
{
    double want_g[6] = {0}, err = 0;
    for (int64_t i = 0; i < b; i++) {
        double want_per = 0;
        for (int r = 0; r < size; r++)
            for (int k = 0; k < 2; k++) {
                double p = 0;
                for (int j = 0; j < 3; j++) p += (double)sym_x(r, i, j) * sym_w[j * 2 + k];
                want_per += p * p;
                for (int j = 0; j < 3; j++) want_g[j * 2 + k] += 2 * (double)sym_x(r, i, j) * p;
            }
        err = sym_worse(err, per[i], want_per);
    }
    for (int k = 0; k < 6; k++) err = sym_worse(err, g[k], want_g[k]);
    return err;
}

/* sym_error, and the predictions p [b, 2] summed over the ranks */
static double sym2_error(int size, int64_t b, const float *g, const float *per, const float *p)
{
    double err = sym_error(size, b, g, per);
    for (int64_t i = 0; i < b; i++)
        for (int k = 0; k < 2; k++) {
            double want = 0;
            for (int r = 0; r < size; r++)
                for (int j = 0; j < 3; j++) want += (double)sym_x(r, i, j) * sym_w[j * 2 + k];
            err = sym_worse(err, p[i * 2 + k], want);
        }
    return err;
}

/* Host nodes of a traced allreduce in fn's graph. */
static int sym_host_nodes(vf_function *fn)
{
    char *text = vf_function_graph_text(fn);
    int nodes = text ? 0 : -1;
    for (const char *q = text; q && (q = strstr(q, "\"vf_dist_allreduce\"")); q++) nodes++;
    free(text);
    return nodes;
}

#endif
