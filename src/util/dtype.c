#include "util/dtype.h"
#include "util/fault.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[VF_DTYPE_COUNT] = {"f32", "f16", "i32", "u32", "bool"};
static const size_t dtype_sizes[VF_DTYPE_COUNT] = {4, 2, 4, 4, 1};

const char *vf_dtype_name(vf_dtype t) { return vf_dtype_valid(t) ? dtype_names[t] : "invalid-dtype"; }
size_t vf_dtype_size(vf_dtype t) { return vf_dtype_valid(t) ? dtype_sizes[t] : 0; }

uint16_t vf_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0)); /* Inf / NaN */
    int32_t e = (int32_t)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00u); /* overflow to Inf */
    if (e <= 0) {                                   /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) h++; /* may carry into Inf: correct */
    return (uint16_t)h;
}

float vf_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (man << 13);
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

double vf_load_f64(const void *base, vf_dtype t, int64_t i)
{
    switch (t) {
    case VF_F32: return ((const float *)base)[i];
    case VF_F16: return vf_f16_to_f32(((const uint16_t *)base)[i]);
    case VF_I32: return ((const int32_t *)base)[i];
    case VF_U32: return ((const uint32_t *)base)[i];
    case VF_BOOL: return ((const uint8_t *)base)[i] ? 1.0 : 0.0;
    }
    return 0.0;
}

/* Float to integer: truncate, saturate, NaN -> 0 (defined, unlike C's cast). */
static int32_t sat_i32(double v)
{
    if (isnan(v)) return 0;
    if (v >= 2147483647.0) return INT32_MAX;
    if (v <= -2147483648.0) return INT32_MIN;
    return (int32_t)v;
}

static uint32_t sat_u32(double v)
{
    if (isnan(v) || v <= 0.0) return 0;
    if (v >= 4294967295.0) return UINT32_MAX;
    return (uint32_t)v;
}

void vf_store_f64(void *base, vf_dtype t, int64_t i, double v)
{
    switch (t) {
    case VF_F32: ((float *)base)[i] = (float)v; break;
    case VF_F16: ((uint16_t *)base)[i] = vf_f32_to_f16((float)v); break;
    case VF_I32: ((int32_t *)base)[i] = sat_i32(v); break;
    case VF_U32: ((uint32_t *)base)[i] = sat_u32(v); break;
    case VF_BOOL: ((uint8_t *)base)[i] = v != 0.0; break;
    }
}

bool vf_bool_normalised(const void *data, int64_t n, void **copy)
{
    const uint8_t *b = data;
    *copy = NULL;
    int64_t i = 0;
    while (i < n && b[i] <= 1) i++;
    if (i == n) return true;
    uint8_t *c = vf_malloc((size_t)n);
    if (!c) return false;
    for (int64_t j = 0; j < n; j++) c[j] = b[j] != 0;
    *copy = c;
    return true;
}
