/* Saved functions (vf_function_save / vf_function_load, saved_*.c; the
 * file format is docs/FORMAT.md) and the accessors of function.c they use to
 * read a function's concrete functions and to build a function without a
 * body from loaded ones. */
#ifndef VF_FRONTEND_SAVED_H
#define VF_FRONTEND_SAVED_H

#include "function/trace.h"

/* ---- accessors (function.c) ---- */
const char *vf_function_name_get(const vf_function *fn);
vf_context *vf_function_context(const vf_function *fn);
/* VF_OK when fn is neither destroyed nor orphaned by its context's end
   (the error is recorded where there is a context). */
vf_status vf_function_usable(const vf_function *fn, const char *op);
void vf_function_arity(const vf_function *fn, int *n_in, int *n_out, const vf_tensor_spec **sig);
int vf_function_n_concrete(const vf_function *fn);
/* Concrete function i: per-input dtypes and shapes (sym bits set), its
   optimised graph and its captures. */
void vf_function_concrete_get(const vf_function *fn, int i, const vf_dtype **dt, const vf_shape **shape,
                              const vf_graph **g, const vf_capture **caps, int *n_caps);
/* The content keys of the kernels fn's calls got from the backend (and,
   for a loaded function, those its file brought). */
vf_keyset *vf_function_kernels(vf_function *fn);
/* A function without a body (it can only run the concrete functions added
   to it); sig NULL or n_in specs (copied). NULL with the error in ctx. */
vf_function *vf_function_new_loaded(vf_context *ctx, const char *name, int n_in, int n_out,
                                    const vf_tensor_spec *sig);
/* Adds a concrete function; takes ownership of dt, shape, g and caps (also
   on failure, when they are freed). */
vf_status vf_function_add_concrete(vf_function *fn, vf_dtype *dt, vf_shape *shape, vf_graph *g,
                                   vf_capture *caps, int n_caps);

/* ---- the file format (docs/FORMAT.md) ---- */
#define VF_SAVED_MAGIC "VKFUSEFN"     /* 8 bytes */
#define VF_SAVED_VERSION 2u           /* written; readers take 1 (no kernel section) and 2 */
#define VF_SAVED_VERSION_MIN 1u
#define VF_SAVED_HEADER 32u           /* magic, version, flags, n_sections, reserved, file size */
#define VF_SAVED_ENTRY 24u            /* a section table entry: type, reserved, offset, size */
#define VF_SAVED_TRAILER 8u           /* FNV-1a 64 of every byte before it */
enum { VF_SEC_FUNCTION = 1, VF_SEC_TENSORS = 2, VF_SEC_CONCRETE = 3, VF_SEC_KERNELS = 4 };
/* Limits a loader enforces before allocating. */
#define VF_SAVED_MAX_SECTIONS 4096u
#define VF_SAVED_MAX_NAME 4096u
#define VF_SAVED_MAX_NODES (1u << 20)
#define VF_SAVED_MAX_DEPTH 32
#define VF_SAVED_MAX_IO 65536u        /* inputs, outputs, captures, node inputs */
#define VF_SAVED_MAX_FILE ((uint64_t)1 << 34)
#define VF_SAVED_MAX_KERNELS 65536u
#define VF_SAVED_MAX_SPIRV_WORDS (1u << 22) /* 16 MiB per module */
#define VF_SAVED_SPIRV_MAGIC 0x07230203u
#define VF_SAVED_KERNEL_MIN 32u       /* key, word count, the 5-word SPIR-V header */

/* One kernel of the kernel section: its content key (the shader cache's,
   vulkan/shader_cache.h) and its SPIR-V. */
typedef struct vf_saved_kernel {
    uint64_t key;
    const uint32_t *words;
    size_t n_words;
} vf_saved_kernel;

/* FNV-1a 64 over n bytes, continuing from h (start: VF_FNV_INIT). */
#define VF_FNV_INIT 0xcbf29ce484222325ull
static inline uint64_t vf_fnv1a64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ---- writer (saved_write.c) ---- */
/* The bytes vf_function_save writes (*out malloc'd, *size bytes). extra:
   kernels stored besides those the backend has for fn (tests and fuzz
   seeds on the CPU backend); a key the backend has keeps the backend's. */
vf_status vf_saved_write_mem(vf_function *fn, const vf_saved_kernel *extra, int n_extra, uint8_t **out, size_t *size);

/* ---- loader (saved_read.c, saved_kernels.c) ---- */
/* vf_function_load from memory (also the fuzzer's entry point); what
   names the source in messages. */
vf_status vf_saved_load_mem(vf_context *ctx, const void *data, size_t size, const char *what, vf_function **out);

#endif
