/* libFuzzer target for the saved-function loader (vf_function_load's
 * parser and validator, src/frontend/saved_read.c).
 *
 * Every input is loaded into a CPU-backend context and, when it loads,
 * destroyed again: a crash, a leak, a hang or an oversized allocation
 * (run.sh caps malloc) is a bug in the loader. With VKFUSE_FUZZ_SEEDS=<dir>
 * set, LLVMFuzzerInitialize first writes a few valid saved functions there
 * (a traced step with a variable, a tape, a cond, a while loop and a
 * symbolic batch dim; one without an input_signature), the seed corpus. */
#include "frontend/saved.h"
#include "vkfuse.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vf_context *ctx;

static vf_status print_branch(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_status s = vf_print(c, "seed", in[0]);
    out[0] = vf_relu(c, in[0]);
    return s;
}
static vf_status neg_branch(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(c, in[0]);
    return VF_OK;
}
static vf_status loop_cond(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(c, in[0], vf_fill(c, VF_F32, 0, NULL, 4.0));
    return VF_OK;
}
static vf_status loop_body(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_add(c, in[0], vf_fill(c, VF_F32, 0, NULL, 1.0));
    return VF_OK;
}

static vf_status step(vf_context *c, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *w = user;
    vf_tape *tp = vf_tape_begin(c);
    vf_tensor *logits = vf_matmul(c, in[0], w);
    vf_tensor *loss = vf_reduce_mean(c, vf_sparse_softmax_cross_entropy(c, in[1], logits), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(tp, loss, 1, &w, &g);
    vf_tape_end(tp);
    if (s != VF_OK) return s;
    vf_tensor *pred = vf_greater(c, loss, vf_fill(c, VF_F32, 0, NULL, 0.0));
    if ((s = vf_cond(c, pred, print_branch, neg_branch, 1, &logits, 1, &out[1], NULL)) != VF_OK) return s;
    vf_tensor *k = vf_fill(c, VF_F32, 0, NULL, 0.0);
    if ((s = vf_while_loop(c, loop_cond, loop_body, 1, &k, 0, NULL)) != VF_OK) return s;
    if ((s = vf_assign_sub(w, vf_mul(c, g, k))) != VF_OK) return s;
    out[0] = vf_transpose(c, vf_reshape(c, logits, 2, (int64_t[]){-1, 3}), (int[]){1, 0});
    return VF_OK;
}

static void write_seeds(const char *dir)
{
    vf_tensor *w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){4, 3}, 0.25));
    vf_tensor_spec sig[2] = {{VF_F32, 2, {-1, 4}}, {VF_I32, 1, {-1}}};
    for (int k = 0; k < 2; k++) {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "seed", .body = step, .user = w,
            .n_inputs = 2, .n_outputs = 2, .input_signature = k == 0 ? sig : NULL});
        vf_scope_begin(ctx);
        float x[8] = {1, -2, 3, 0.5f, -1, 2, 0, 1};
        int32_t y[2] = {0, 2};
        vf_tensor *in[2] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){2, 4}, x),
                            vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){2}, y)}, *out[2];
        char path[4096];
        snprintf(path, sizeof path, "%s/seed%d.vkf", dir, k);
        if (vf_function_call(fn, in, out) != VF_OK || vf_function_save(fn, path) != VF_OK)
            fprintf(stderr, "fuzz_saved: writing seed %s: %s\n", path, vf_error_message(ctx));
        vf_scope_end(ctx);
        vf_function_destroy(fn);
    }
    vf_error_clear(ctx);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    vf_context_desc d = {.backend = VF_BACKEND_CPU, .device_index = -1};
    if (vf_context_create(&d, &ctx) != VF_OK) {
        fprintf(stderr, "fuzz_saved: no CPU context: %s\n", vf_error_message(ctx));
        abort();
    }
    const char *seeds = getenv("VKFUSE_FUZZ_SEEDS");
    if (seeds && *seeds) write_seeds(seeds);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, data, size, "fuzz", &fn) == VF_OK) vf_function_destroy(fn);
    vf_error_clear(ctx);
    return 0;
}
