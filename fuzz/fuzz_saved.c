/* libFuzzer target for the saved-function loader (vf_function_load's
 * parser and validator, src/saved/saved_read.c).
 *
 * Every input is loaded into a CPU-backend context and, when it loads,
 * described (vf_function_info_get, what `vkfuse saved show` prints: its
 * counts must agree) and destroyed again, then loaded once more with its size field and checksum
 * fixed up (else nearly every mutation stops at the checksum): a crash, a
 * leak, a hang or an oversized allocation (run.sh caps malloc) is a bug in
 * the loader. With VKFUSE_FUZZ_SEEDS=<dir>
 * set, LLVMFuzzerInitialize first writes a few valid saved functions there
 * (a traced step with a variable, a tape, a cond, a while loop and a
 * symbolic batch dim; one without an input_signature), the seed corpus,
 * with stand-in SPIR-V modules in their kernel sections (format version 2):
 * on the CPU backend the kernel section's structure is checked, then
 * ignored. */
#include "saved/saved.h"
#include "vkfuse.h"
#include "vkfuse_saved.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static vf_context *ctx;

/* A minimal valid compute module (main, local size 1, returns). */
#define MIN_SPIRV_WORDS 35
static const uint32_t min_spirv[MIN_SPIRV_WORDS] = {
    0x07230203, 0x00010000, 0, 5, 0, (2 << 16) | 17, 1, (3 << 16) | 14, 0, 1,
    (5 << 16) | 15, 5, 1, 0x6E69616D, 0, (6 << 16) | 16, 1, 17, 1, 1, 1, (2 << 16) | 19, 2,
    (3 << 16) | 33, 3, 2, (5 << 16) | 54, 2, 1, 0, 3, (2 << 16) | 248, 4, (1 << 16) | 253, (1 << 16) | 56,
};

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
        /* the CPU backend has no kernel binaries: stand-in modules fill the
           kernel section (two in seed0, one in seed1) */
        vf_saved_kernel extra[2] = {{0x0123456789abcdefull, min_spirv, MIN_SPIRV_WORDS},
                                    {0x7edcba9876543210ull, min_spirv, MIN_SPIRV_WORDS}};
        uint8_t *bytes = NULL;
        size_t n = 0;
        FILE *f = NULL;
        if (vf_function_call(fn, in, out) != VF_OK || vf_saved_write_mem(fn, extra, 2 - k, &bytes, &n) != VF_OK)
            fprintf(stderr, "fuzz_saved: making seed %s: %s\n", path, vf_error_message(ctx));
        else if (!(f = fopen(path, "wb")) || fwrite(bytes, 1, n, f) != n)
            fprintf(stderr, "fuzz_saved: writing seed %s failed\n", path);
        if (f) fclose(f);
        free(bytes);
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

static void load(const uint8_t *data, size_t size)
{
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, data, size, "fuzz", &fn) == VF_OK) {
        vf_function_info *info = vf_function_info_get(fn);
        for (int c = 0; info && c < info->n_concrete; c++) {
            int total = 0;
            for (int k = 0; k < info->concrete[c].n_ops; k++) total += info->concrete[c].ops[k].count;
            if (total != info->concrete[c].n_nodes || info->concrete[c].n_inputs != info->n_inputs) abort();
        }
        free(info);
        vf_function_destroy(fn);
    }
    vf_error_clear(ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    load(data, size);
    /* Almost every mutation breaks the checksum, which the loader checks
       first: again with the header's size and the checksum made to match,
       so mutations reach the sections' parsers (the kernel section too). */
    if (size < VF_SAVED_HEADER + VF_SAVED_TRAILER || memcmp(data, VF_SAVED_MAGIC, 8) != 0) return 0;
    uint8_t *b = malloc(size);
    if (!b) return 0;
    memcpy(b, data, size);
    uint64_t sum;
    for (int i = 0; i < 8; i++) b[24 + i] = (uint8_t)((uint64_t)size >> (8 * i));
    sum = vf_fnv1a64(VF_FNV_INIT, b, size - VF_SAVED_TRAILER);
    for (int i = 0; i < 8; i++) b[size - 8 + (size_t)i] = (uint8_t)(sum >> (8 * i));
    load(b, size);
    free(b);
    return 0;
}
