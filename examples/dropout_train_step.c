/* Dropout in a traced train step: a linear model 16 -> 1 trained on
 * y = x @ w_true with dropout (rate 0.2) on its inputs. The generator's
 * state lives on the device, so every call of the traced step draws a
 * new mask (a host seed would draw the same mask each call). The same
 * step also runs eagerly on a second model with a generator of the same
 * seed: the losses must agree (the same masks), the loss must fall well
 * below its start, and two calls must drop different elements. Exits
 * non-zero otherwise. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>

#define FEAT 16
#define BATCH 64
#define STEPS 25

typedef struct {
    vf_tensor *w, *lr;
    vf_generator *gen;
} model;

static vf_status train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    model *m = user;
    vf_tape *tape = vf_tape_begin(ctx);
    vf_tensor *h = vf_dropout(ctx, m->gen, in[0], 0.2); /* a new mask at every call */
    vf_tensor *err = vf_sub(ctx, vf_matmul(ctx, h, m->w), in[1]);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_mul(ctx, err, err), 0, NULL, false);
    vf_tensor *dw = NULL;
    vf_status s = vf_tape_gradient(tape, loss, 1, &m->w, &dw);
    vf_tape_end(tape);
    if (s != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, dw))) != VF_OK) return s;
    out[0] = loss;
    out[1] = h;
    return VF_OK;
}

static model make_model(vf_context *ctx)
{
    model m = {.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){FEAT, 1}, 0.0)),
               .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.1),
               .gen = vf_generator_create(ctx, 2026)};
    return m;
}

int main(void)
{
    vf_context *ctx;
    if (vf_context_create(NULL, &ctx) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    printf("device: %s\n", vf_device_name(ctx));
    vf_tensor *x = vf_random_normal(ctx, VF_F32, 2, (int64_t[]){BATCH, FEAT}, 1);
    vf_tensor *y = vf_matmul(ctx, x, vf_random_normal(ctx, VF_F32, 2, (int64_t[]){FEAT, 1}, 2));
    model traced = make_model(ctx), eager = make_model(ctx);
    vf_function *step = vf_function_create(ctx, &(vf_function_desc){.name = "train_step", .body = train_step,
                                                                   .user = &traced, .n_inputs = 2, .n_outputs = 2});
    float first = 0, last = 0, h0[BATCH * FEAT], h1[BATCH * FEAT];
    int bad = 0;
    for (int i = 0; i < STEPS && !bad; i++) {
        vf_scope_begin(ctx);
        vf_tensor *t[2] = {0}, *e[2] = {0};
        float lt = NAN, le = NAN;
        if (vf_function_call(step, (vf_tensor *[]){x, y}, t) != VF_OK || train_step(ctx, (vf_tensor *[]){x, y}, e, &eager) ||
            vf_tensor_read(t[0], &lt, sizeof lt) || vf_tensor_read(e[0], &le, sizeof le) ||
            (i < 2 && vf_tensor_read(t[1], i ? h1 : h0, sizeof h0))) {
            fprintf(stderr, "step %d: %s\n", i, vf_error_message(ctx));
            bad = 1;
        }
        vf_scope_end(ctx);
        if (i == 0) first = lt;
        last = lt;
        if (!bad && fabsf(lt - le) > 1e-4f * (1 + fabsf(le))) {
            fprintf(stderr, "step %d: traced loss %g, eager %g\n", i, lt, le);
            bad = 1;
        }
    }
    int same = 0;
    for (int i = 0; i < BATCH * FEAT; i++) same += (h0[i] == 0) == (h1[i] == 0);
    printf("loss %.4f -> %.4f over %d traced steps; the masks of calls 1 and 2 agree on %d of %d elements\n", first,
           last, STEPS, same, BATCH * FEAT);
    if (!bad && !(last < 0.5f * first)) bad = fprintf(stderr, "the loss did not fall enough\n") > 0;
    if (!bad && same == BATCH * FEAT) bad = fprintf(stderr, "two calls drew the same mask\n") > 0;
    vf_function_destroy(step);
    vf_generator_destroy(traced.gen);
    vf_generator_destroy(eager.gen);
    vf_context_destroy(ctx);
    return bad;
}
