/* Shared helpers of the Vulkan runtime tests (test_vulkan_*.c): runtimes
 * made and checked, an axpy kernel to dispatch, spawning the test binary
 * again, keeping the Vulkan libraries mapped for LSan.
 *
 * With VKFUSE_VALIDATION=1 (ctest) every runtime runs under the Khronos
 * validation layer with synchronisation validation; any message fails the
 * test (it is recorded in the vf_err, checked by rt_done, and ctest also
 * greps the output for VKFUSE-VALIDATION). */
#ifndef VF_VK_TEST_COMMON_H
#define VF_VK_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vulkan/codegen/kernel.h"
#include "vulkan/disk_cache.h"
#include "vulkan/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* VKFUSE_VALIDATION is set and not "0". */
bool want_validation(void);

typedef struct rt_handle {
    vf_err err;
    vf_backend_t be;
    vf_vk_runtime *rt;
    char name[256];
} rt_handle;

/* Creates a backend with o and x into *h (zeroed first); rt is set on success. */
vf_status rt_try(rt_handle *h, const vf_vk_options *o, const vf_vk_extra_options *x);
/* rt_try on the default device, validation as the environment says; fails
   the test if it cannot be made. */
void rt_make(rt_handle *h, const char *cache_dir, const vf_vk_extra_options *x);
/* Syncs and destroys h, asserting no error and no validation message. */
void rt_done(rt_handle *h);

/* c = a * k + b over n floats; push {uint n; float k;}. */
extern const char *const AXPY;

typedef struct axpy_push {
    uint32_t n;
    float k;
} axpy_push;

void axpy(rt_handle *h, const vf_vk_pipeline *p, vf_buffer *a, vf_buffer *b, vf_buffer *c,
          uint32_t n, float k);
/* A buffer of n floats, filled from x unless NULL. */
vf_buffer *alloc_upload(rt_handle *h, const float *x, uint32_t n);
const vf_vk_pipeline *axpy_pipeline(rt_handle *h);
/* Runs axpy over n elements and checks the result; returns after freeing. */
void run_axpy_check(rt_handle *h, uint32_t n);

/* Sets VKFUSE_TEST_CAPS (the codegen profile of contexts made next; NULL
   unsets it) and returns its previous value, which vt_restore_caps_env
   puts back (and frees). */
char *vt_set_caps_env(const char *v);
void vt_restore_caps_env(char *saved);

/* Runs this test binary again with argv[1..2] = arg1, arg2 and envp;
   returns its exit status. */
int spawn_self(const char *arg1, const char *arg2, char **envp);

/* Called first in each main(); see vk_test_common.c. */
void pin_vulkan_libraries(void);

#endif
