/* Numbers, target environments and type names for both parsers. */
#include "parse_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool am_parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    am_num n;
    if (!am_num_parse(s, &n) || n.is_float || n.sat || (n.neg && n.mag) || n.mag > max) return false;
    *out = n.mag;
    return true;
}

bool am_parse_target_env(const char *s, uint32_t *out)
{
    static const struct {
        const char *name;
        uint32_t v;
    } envs[] = {
        {"spv1.0", AM_ENV_SPV | 0},       {"spv1.1", AM_ENV_SPV | 1},       {"spv1.2", AM_ENV_SPV | 2},
        {"spv1.3", AM_ENV_SPV | 3},       {"spv1.4", AM_ENV_SPV | 4},       {"spv1.5", AM_ENV_SPV | 5},
        {"spv1.6", AM_ENV_SPV | 6},       {"vulkan1.0", AM_ENV_VULKAN | 0}, {"vulkan1.1", AM_ENV_VULKAN | 1},
        {"vulkan1.2", AM_ENV_VULKAN | 2}, {"vulkan1.3", AM_ENV_VULKAN | 3},
        {"vulkan1.1spv1.4", AM_ENV_VULKAN | 1 | 0x1000},
    };
    for (size_t i = 0; i < sizeof envs / sizeof *envs; i++)
        if (!strcmp(s, envs[i].name)) {
            *out = envs[i].v;
            return true;
        }
    return false;
}

static bool scalar_name(const char *s, size_t n, am_scalar *out)
{
    static const struct {
        const char *name;
        am_scalar s;
    } t[] = {{"int8", AM_I8},     {"int16", AM_I16},   {"int32", AM_I32},     {"int64", AM_I64},
             {"uint8", AM_U8},    {"uint16", AM_U16},  {"uint32", AM_U32},    {"uint64", AM_U64},
             {"float16", AM_F16}, {"float", AM_F32},   {"double", AM_F64},    {"fp16", AM_F16}};
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        if (strlen(t[i].name) == n && !strncmp(s, t[i].name, n)) {
            *out = t[i].s;
            return true;
        }
    return false;
}

/* R32G32_SFLOAT and friends: equal-width components, a numeric suffix. */
static int parse_format(const char *s, am_fmt *out)
{
    const char *us = strchr(s, '_');
    if (!us) return 0;
    int comps = 0, bits = -1;
    bool mixed = false;
    const char *p = s;
    while (p < us) {
        if (!strchr("RGBAX", *p)) {
            if (*p == 'D' || *p == 'S' || *p == 'E') return -1; /* depth, stencil, shared exponent */
            return 0;
        }
        p++;
        char *end;
        long b = strtol(p, &end, 10);
        if (end == p || b <= 0 || b > 64) return 0;
        if (bits >= 0 && b != bits) mixed = true;
        bits = (int)b;
        comps++;
        p = end;
    }
    if (comps == 0 || comps > 4) return 0;
    const char *suffix = us + 1;
    if (strchr(suffix, '_')) return -1; /* _PACK32, _BLOCK ... */
    bool sfloat = !strcmp(suffix, "SFLOAT"), uintish = !strcmp(suffix, "UINT") || !strcmp(suffix, "UNORM") ||
                                               !strcmp(suffix, "USCALED") || !strcmp(suffix, "SRGB");
    bool sintish = !strcmp(suffix, "SINT") || !strcmp(suffix, "SNORM") || !strcmp(suffix, "SSCALED");
    if (!sfloat && !uintish && !sintish) return !strcmp(suffix, "UFLOAT") ? -1 : 0;
    if (mixed || (bits != 8 && bits != 16 && bits != 32 && bits != 64)) return -1;
    if (sfloat && bits == 8) return 0;
    memset(out, 0, sizeof *out);
    if (sfloat)
        out->scalar = bits == 16 ? AM_F16 : bits == 32 ? AM_F32 : AM_F64;
    else if (uintish)
        out->scalar = bits == 8 ? AM_U8 : bits == 16 ? AM_U16 : bits == 32 ? AM_U32 : AM_U64;
    else
        out->scalar = bits == 8 ? AM_I8 : bits == 16 ? AM_I16 : bits == 32 ? AM_I32 : AM_I64;
    out->rows = (uint8_t)comps;
    out->cols = 1;
    return 2;
}

int am_parse_type(const char *s, am_fmt *out)
{
    memset(out, 0, sizeof *out);
    size_t n = strlen(s);
    bool array = n > 2 && s[n - 2] == '[' && s[n - 1] == ']';
    if (array) n -= 2;
    int rows = 1, cols = 1;
    const char *inner = s;
    size_t inner_n = n;
    if (n > 6 && !strncmp(s, "vec", 3) && s[3] >= '2' && s[3] <= '4' && s[4] == '<' && s[n - 1] == '>') {
        rows = s[3] - '0';
        inner = s + 5;
        inner_n = n - 6;
    } else if (n > 9 && !strncmp(s, "mat", 3) && s[3] >= '2' && s[3] <= '4' && s[4] == 'x' && s[5] >= '2' &&
               s[5] <= '4' && s[6] == '<' && s[n - 1] == '>') {
        cols = s[3] - '0';
        rows = s[5] - '0';
        inner = s + 7;
        inner_n = n - 8;
    }
    am_scalar sc;
    if (scalar_name(inner, inner_n, &sc)) {
        out->scalar = sc;
        out->rows = (uint8_t)rows;
        out->cols = (uint8_t)cols;
        out->array = array;
        return 1;
    }
    if (array || rows != 1 || cols != 1) return 0;
    return parse_format(s, out);
}

bool am_parse_glsl_type(const char *s, am_fmt *out)
{
    memset(out, 0, sizeof *out);
    static const struct {
        const char *prefix; /* vector / matrix prefix */
        const char *scalar; /* scalar name */
        am_scalar s;
    } t[] = {
        {"vec", "float", AM_F32},    {"dvec", "double", AM_F64},   {"ivec", "int", AM_I32},
        {"uvec", "uint", AM_U32},    {"i8vec", "int8_t", AM_I8},   {"u8vec", "uint8_t", AM_U8},
        {"i16vec", "int16_t", AM_I16}, {"u16vec", "uint16_t", AM_U16}, {"i64vec", "int64_t", AM_I64},
        {"u64vec", "uint64_t", AM_U64}, {"f16vec", "float16_t", AM_F16},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        size_t pl = strlen(t[i].prefix);
        if (!strcmp(s, t[i].scalar)) {
            out->scalar = t[i].s;
            out->rows = out->cols = 1;
            return true;
        }
        if (!strncmp(s, t[i].prefix, pl) && s[pl] >= '2' && s[pl] <= '4' && !s[pl + 1]) {
            out->scalar = t[i].s;
            out->rows = (uint8_t)(s[pl] - '0');
            out->cols = 1;
            return true;
        }
    }
    /* matN, matNxM, dmatN, dmatNxM, f16matN... (columns x rows) */
    am_scalar sc = AM_F32;
    const char *p = s;
    if (!strncmp(p, "dmat", 4)) {
        sc = AM_F64;
        p += 4;
    } else if (!strncmp(p, "f16mat", 6)) {
        sc = AM_F16;
        p += 6;
    } else if (!strncmp(p, "mat", 3)) {
        p += 3;
    } else {
        return false;
    }
    if (p[0] < '2' || p[0] > '4') return false;
    int c = p[0] - '0', r = c;
    if (p[1] == 'x') {
        if (p[2] < '2' || p[2] > '4' || p[3]) return false;
        r = p[2] - '0';
    } else if (p[1]) {
        return false;
    }
    out->scalar = sc;
    out->cols = (uint8_t)c;
    out->rows = (uint8_t)r;
    return true;
}

void am_set_format(am_buffer *b, const char *name)
{
    size_t n = strlen(name);
    if (n >= sizeof b->format) n = sizeof b->format - 1; /* longer than any format name */
    memcpy(b->format, name, n);
    b->format[n] = '\0';
}
