/* The saved-function tests' shared parts (test_saved.c, test_saved_damaged.c):
 * the traced train step they save and load (a tape, an assign_sub on a
 * variable, a vf_cond that stays a COND node, a vf_while_loop, a symbolic
 * batch dim) and byte helpers for the file layout of docs/FORMAT.md. */
#ifndef VKFUSE_TESTS_SAVED_COMMON_H
#define VKFUSE_TESTS_SAVED_COMMON_H

#include "testutil.h"

#define VT_FEAT 4
#define VT_CLS 3

typedef struct {
    vf_tensor *w, *b, *lr;
} vt_step_model;

/* in: x [-1,4] f32, y [-1] i32; out: loss, cond result [-1,3], loop value;
   user: a vt_step_model (w a variable). */
vf_status vt_train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);
/* vt_train_step's input signature (batch dim symbolic). */
extern const vf_tensor_spec vt_step_sig[2];
/* A batch of nb rows for vt_train_step, from seed. */
void vt_step_inputs(vf_context *ctx, int64_t nb, uint64_t seed, vf_tensor **in);

/* Little-endian reads and writes in a file's bytes. */
uint32_t vt_rd32(const uint8_t *p);
uint64_t vt_rd64(const uint8_t *p);
void vt_wr32(uint8_t *p, uint32_t v);
void vt_wr64(uint8_t *p, uint64_t v);
/* The kernel section of a version-2 file (the last section): its offset
   and its kernel count. */
size_t vt_saved_kernel_section(const uint8_t *b, uint32_t *count);
/* n bytes of b as a consistent file: size field and checksum fixed up. */
void vt_saved_fix_up(uint8_t *b, size_t n);

#endif
