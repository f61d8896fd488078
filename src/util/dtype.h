/* Element types: sizes, names, classes and f16 conversion. */
#ifndef VF_UTIL_DTYPE_H
#define VF_UTIL_DTYPE_H

#include "vkfuse.h"

#include <stdbool.h>
#include <stdint.h>

#define VF_DTYPE_COUNT 5

/* Bit masks of dtypes, for the op table's "accepts" column. */
#define VF_M(t) (1u << (t))
#define VF_MASK_FLOAT (VF_M(VF_F32) | VF_M(VF_F16))
#define VF_MASK_INT (VF_M(VF_I32) | VF_M(VF_U32))
#define VF_MASK_NUM (VF_MASK_FLOAT | VF_MASK_INT)
#define VF_MASK_ALL (VF_MASK_NUM | VF_M(VF_BOOL))

static inline bool vf_dtype_valid(int t) { return t >= VF_F32 && t <= VF_BOOL; }
static inline bool vf_dtype_is_float(vf_dtype t) { return t == VF_F32 || t == VF_F16; }

uint16_t vf_f32_to_f16(float f);   /* round to nearest even, keeps NaN/Inf */
float vf_f16_to_f32(uint16_t h);

/* Element i of a packed buffer of dtype t, widened to double / stored from
   double (with the cast rules of vf_cast: truncation, saturation, NaN -> 0). */
double vf_load_f64(const void *base, vf_dtype t, int64_t i);
void vf_store_f64(void *base, vf_dtype t, int64_t i, double v);

/* Host bool bytes: true when data's n bytes are all 0 or 1 (*copy = NULL),
   or when *copy got a malloc'd copy with every non-zero byte made 1 (free
   it); false when out of memory. Every path that takes bool bytes from the
   host goes through it, so kernels may rely on bools being 0 or 1. */
bool vf_bool_normalised(const void *data, int64_t n, void **copy);

#endif
