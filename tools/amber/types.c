/* Scalars, numbers and the std140/std430 layout of buffer elements. */
#include "am.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int am_scalar_size(am_scalar s)
{
    switch (s) {
    case AM_I8: case AM_U8: return 1;
    case AM_I16: case AM_U16: case AM_F16: return 2;
    case AM_I32: case AM_U32: case AM_F32: return 4;
    default: return 8;
    }
}

bool am_scalar_is_float(am_scalar s)
{
    return s == AM_F16 || s == AM_F32 || s == AM_F64;
}

static bool is_signed(am_scalar s)
{
    return s == AM_I8 || s == AM_I16 || s == AM_I32 || s == AM_I64;
}

const char *am_scalar_name(am_scalar s)
{
    static const char *names[] = {"int8", "int16", "int32", "int64", "uint8", "uint16",
                                  "uint32", "uint64", "float16", "float", "double"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "?";
}

static uint32_t round_up(uint32_t v, uint32_t a)
{
    return (v + a - 1) / a * a;
}

/* GLSL 4.60 section 7.6.2.2: a vector of 2 aligns to 2N, of 3 or 4 to 4N.
   A matrix is an array of its column vectors; in std140 an array element's
   alignment (and stride) rounds up to a vec4's. A buffer of plain T (not
   T[]) keeps T's own size, as Amber lays out its buffers. */
void am_fmt_finish(am_fmt *f)
{
    uint32_t n = (uint32_t)am_scalar_size(f->scalar);
    uint32_t rows = f->rows ? f->rows : 1, cols = f->cols ? f->cols : 1;
    f->rows = (uint8_t)rows;
    f->cols = (uint8_t)cols;
    f->n_comp = rows * cols;
    uint32_t vec_align, vec_size;
    if (f->layout == AM_PACKED) {
        vec_align = n;
        vec_size = rows * n;
    } else {
        vec_align = rows == 1 ? n : rows == 2 ? 2 * n : 4 * n;
        vec_size = rows == 3 ? 4 * n : rows * n; /* vec3's padding belongs to the element */
    }
    uint32_t col_stride = vec_size;
    if (cols > 1) {
        col_stride = round_up(vec_size, vec_align);
        if (f->layout == AM_STD140) col_stride = round_up(col_stride, 16);
    }
    for (uint32_t c = 0; c < cols; c++)
        for (uint32_t r = 0; r < rows; r++) f->comp_off[c * rows + r] = c * col_stride + r * n;
    uint32_t size = cols > 1 ? cols * col_stride : vec_size;
    if (f->array && f->layout == AM_STD140) size = round_up(size, 16);
    if (f->array && f->layout != AM_PACKED) size = round_up(size, vec_align);
    f->stride = size;
}

void am_fmt_describe(const am_fmt *f, char *buf, size_t len)
{
    const char *lay = f->layout == AM_STD140 ? " std140" : f->layout == AM_STD430 ? " std430" : "";
    if (f->cols > 1)
        snprintf(buf, len, "mat%ux%u<%s>%s%s", f->cols, f->rows, am_scalar_name(f->scalar),
                 f->array ? "[]" : "", lay);
    else if (f->rows > 1)
        snprintf(buf, len, "vec%u<%s>%s%s", f->rows, am_scalar_name(f->scalar), f->array ? "[]" : "",
                 lay);
    else
        snprintf(buf, len, "%s%s%s", am_scalar_name(f->scalar), f->array ? "[]" : "", lay);
}

bool am_num_parse(const char *tok, am_num *out)
{
    memset(out, 0, sizeof *out);
    const char *p = tok;
    if (*p == '+' || *p == '-') {
        out->neg = *p == '-';
        p++;
    }
    if (!*p) return false;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        if (!p[2] || out->neg) return false;
        uint64_t v = 0;
        for (const char *q = p + 2; *q; q++) {
            int d = isdigit((unsigned char)*q) ? *q - '0'
                    : isxdigit((unsigned char)*q) ? (tolower((unsigned char)*q) - 'a' + 10) : -1;
            if (d < 0) return false;
            if (v >> 60) out->sat = true; /* strtoull(16) saturates too */
            v = out->sat ? UINT64_MAX : v << 4 | (uint64_t)d;
        }
        out->hex = true;
        out->mag = v;
        out->f = (double)v;
        return true;
    }
    bool digits_only = true;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) digits_only = false;
    if (digits_only) {
        errno = 0;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (*end) return false;
        if (errno == ERANGE) out->sat = true; /* v is ULLONG_MAX, as Amber keeps it */
        else if (errno) return false;
        out->mag = v;
        out->f = out->neg ? -(double)v : (double)v;
        return true;
    }
    char *end;
    errno = 0;
    double d = strtod(tok, &end);
    if (*end || end == tok) return false;
    /* strtod also takes "infinity", "nan(...)", hex floats: fine for data. */
    out->is_float = true;
    out->f = d;
    return true;
}

/* float -> float16 as Amber converts buffer data (its float16_helper):
   the sign, the float's exponent rebiased by 112 and kept to 5 bits
   (values outside float16's range wrap, as in a release build of Amber),
   the mantissa truncated to 10 bits; a zero or denormal float exponent,
   or a result exponent of 0, gives a zero mantissa. No rounding, no
   infinity: the CTS's expected values encode exactly this conversion. */
uint16_t am_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = x >> 31, exp_bits = (x >> 23) & 0xffu;
    uint32_t exp = exp_bits == 0 ? 0 : (exp_bits - 112u) & 0x1fu;
    uint32_t man = exp == 0 ? 0 : x & 0x7fffffu;
    return (uint16_t)(sign << 15 | exp << 10 | man >> 13);
}

/* float16 -> float as Amber reads float16 data: a zero exponent is zero
   (denormals flushed, sign kept), any other exponent is rebiased by 112,
   so 0x7c00 reads as 65536, not infinity. */
float am_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp_bits = (h >> 10) & 0x1fu;
    uint32_t x = sign;
    if (exp_bits) x |= (exp_bits + 112u) << 23 | (uint32_t)(h & 0x3ffu) << 13;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

bool am_num_encode(const am_num *n, am_scalar s, uint64_t *bits, char *why, size_t why_len)
{
    int size = am_scalar_size(s);
    uint64_t mask = size == 8 ? UINT64_MAX : ((uint64_t)1 << (size * 8)) - 1;
    if (am_scalar_is_float(s)) {
        /* A hex literal is a number here too, as Amber converts it (0x10
           is 16.0), not a bit pattern. */
        double d = n->hex ? (double)n->mag : n->f;
        if (s == AM_F64) {
            memcpy(bits, &d, 8);
        } else if (s == AM_F32) {
            float f = (float)d;
            uint32_t u;
            memcpy(&u, &f, 4);
            *bits = u;
        } else {
            *bits = am_f32_to_f16((float)d);
        }
        return true;
    }
    if (n->is_float) {
        snprintf(why, why_len, "is not an integer (%s)", am_scalar_name(s));
        return false;
    }
    /* Amber keeps every integer literal as strtoull's uint64 (a negative
       one as its two's complement) and stores its low bytes. */
    uint64_t v = n->sat ? UINT64_MAX : n->neg ? (uint64_t)0 - n->mag : n->mag;
    *bits = v & mask;
    return true;
}

int64_t am_bits_to_i64(uint64_t bits, am_scalar s)
{
    switch (s) {
    case AM_I8: return (int8_t)(uint8_t)bits;
    case AM_I16: return (int16_t)(uint16_t)bits;
    case AM_I32: return (int32_t)(uint32_t)bits;
    case AM_I64: return (int64_t)bits;
    case AM_F16: case AM_F32: case AM_F64: {
        double d = am_bits_to_double(bits, s);
        return d != d ? 0 : d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d;
    }
    default: return (int64_t)bits;
    }
}

uint64_t am_bits_to_u64(uint64_t bits, am_scalar s)
{
    return is_signed(s) ? (uint64_t)am_bits_to_i64(bits, s) : bits;
}

double am_bits_to_double(uint64_t bits, am_scalar s)
{
    switch (s) {
    case AM_F16: return am_f16_to_f32((uint16_t)bits);
    case AM_F32: {
        uint32_t u = (uint32_t)bits;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case AM_F64: {
        double d;
        memcpy(&d, &bits, 8);
        return d;
    }
    default: return is_signed(s) ? (double)am_bits_to_i64(bits, s) : (double)bits;
    }
}

void am_bits_format(uint64_t bits, am_scalar s, char *buf, size_t len)
{
    if (am_scalar_is_float(s))
        snprintf(buf, len, "%.9g", am_bits_to_double(bits, s));
    else if (is_signed(s))
        snprintf(buf, len, "%" PRId64, am_bits_to_i64(bits, s));
    else
        snprintf(buf, len, "%" PRIu64, bits);
}

uint64_t am_load_bits(const uint8_t *p, am_scalar s)
{
    uint64_t v = 0;
    int n = am_scalar_size(s);
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

void am_store_bits(uint8_t *p, am_scalar s, uint64_t bits)
{
    int n = am_scalar_size(s);
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(bits >> (8 * i));
}

uint64_t am_buffer_bytes(const am_buffer *b)
{
    uint64_t n = b->has_fmt ? b->elements * b->fmt.stride : 0; /* elements are capped: no overflow */
    return n > b->min_bytes ? n : b->min_bytes;
}
