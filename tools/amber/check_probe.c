/* EXPECT b IDX x y SIZE w h EQ_RGB|EQ_RGBA r g b [a] [TOLERANCE t...]:
 * Amber's image probe (src/verifier.cc, Verifier::Probe), on the texels
 * of an image buffer: rows of WIDTH texels, the rectangle inside
 * WIDTH x HEIGHT. Each component is read as Amber reads it: UNORM divided
 * by 2^bits - 1, SNORM by 2^(bits-1) - 1 (from the raw unsigned bits, as
 * Amber does), SRGB scaled then linearised (alpha only scaled), integer
 * and scaled formats unscaled, floats as they are; then compared with the
 * expected value / 255 within the tolerance (default 0.002, absolute; one
 * tolerance for all components unless four are given; a percentage is of
 * the texel's value). EQ_RGB ignores alpha. */
#include "am.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { M_UNORM, M_SNORM, M_SRGB, M_INT, M_FLOAT } mode;

typedef struct comp {
    int slot;                    /* 0..3 for R, G, B, A; -1: not compared (X) */
    int bits;
} comp;

/* The components of b's format, in memory order; false if there is none. */
static bool components(const am_buffer *b, comp *out, int *n, mode *m)
{
    const am_fmt *f = &b->fmt;
    *n = 0;
    if (!b->format[0]) { /* a plain DATA_TYPE: its components are R, G, B, A */
        if (f->cols != 1) return false;
        for (int i = 0; i < f->rows && i < 4; i++) out[(*n)++] = (comp){i, am_scalar_size(f->scalar) * 8};
        *m = am_scalar_is_float(f->scalar) ? M_FLOAT : M_INT;
        return *n > 0;
    }
    const char *p = b->format, *us = strchr(p, '_');
    if (!us) return false;
    while (p < us && *n < 4) {
        const char *slots = "RGBA";
        const char *k = strchr(slots, *p);
        int slot = k ? (int)(k - slots) : -1;
        int bits = (int)strtol(p + 1, (char **)&p, 10);
        out[(*n)++] = (comp){slot, bits};
    }
    const char *suf = us + 1;
    *m = !strcmp(suf, "UNORM") ? M_UNORM : !strcmp(suf, "SNORM") ? M_SNORM : !strcmp(suf, "SRGB") ? M_SRGB
       : !strcmp(suf, "SFLOAT") ? M_FLOAT : M_INT; /* UINT, SINT, and USCALED/SSCALED unscaled as in Amber's release builds */
    return *n > 0;
}

static double read_comp(const uint8_t *p, int bits, mode m)
{
    uint64_t raw = 0;
    memcpy(&raw, p, (size_t)bits / 8); /* little-endian host, as the buffers */
    if (m == M_FLOAT) {
        if (bits == 16) return am_f16_to_f32((uint16_t)raw);
        if (bits == 32) {
            float f;
            memcpy(&f, p, 4);
            return f;
        }
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    return (double)raw;
}

static double scale(double v, int bits, mode m, int slot)
{
    double full = bits >= 64 ? 18446744073709551615.0 : (double)((1ull << bits) - 1);
    switch (m) {
    case M_UNORM: return v / full;
    case M_SNORM: return v / (double)((1ull << (bits - 1)) - 1);
    case M_SRGB:
        v /= full;
        if (slot == 3) return v;
        return v <= 0.04045 ? v / 12.92 : pow((v + 0.055) / 1.055, 2.4);
    default: return v;
    }
}

am_status am_check_probe(const am_script *s, const am_cmd *c, const uint8_t *data, uint64_t size, am_result *res)
{
    const am_buffer *b = &s->buffer[c->buf];
    comp cs[4];
    int n;
    mode m;
    if (!components(b, cs, &n, &m))
        return am_fail_at(res, c->pos, "EXPECT#%d: '%s' has no texel format to probe", c->expect_no, b->name);
    uint64_t fw = b->width ? b->width : 1, fh = b->height ? b->height : 1;
    uint64_t x = c->probe[0], y = c->probe[1], w = c->probe[2], h = c->probe[3];
    if (x + w > fw || y + h > fh)
        return am_fail_at(res, c->pos, "EXPECT#%d: texels (%llu, %llu) to (%llu, %llu) are outside the %llux%llu image '%s'",
                          c->expect_no, (unsigned long long)x, (unsigned long long)y, (unsigned long long)(x + w - 1),
                          (unsigned long long)(y + h - 1), (unsigned long long)fw, (unsigned long long)fh, b->name);
    uint64_t ts = b->fmt.stride, row = fw * ts;
    if ((y + h - 1) * row + (x + w) * ts > size)
        return am_fail_at(res, c->pos, "EXPECT#%d reads past the end of '%s' (%llu bytes)", c->expect_no, b->name,
                          (unsigned long long)size);
    double tol[4];
    bool pct[4];
    for (int k = 0; k < 4; k++) {
        int t = c->n_tol == 4 ? k : 0;
        tol[k] = c->n_tol ? c->tol[t] : 0.002;
        pct[k] = c->n_tol ? c->tol_pct[t] : false;
    }
    uint64_t bad = 0, bx = 0, by = 0;
    double got[4] = {0, 0, 0, 0};
    for (uint64_t j = 0; j < h; j++)
        for (uint64_t i = 0; i < w; i++) {
            const uint8_t *t = data + (y + j) * row + (x + i) * ts;
            double v[4] = {0, 0, 0, 0};
            bool ok = true;
            for (int k = 0, off = 0; k < n; off += cs[k].bits / 8, k++) {
                int sl = cs[k].slot;
                if (sl < 0 || (sl == 3 && !c->probe_rgba)) continue;
                v[sl] = scale(read_comp(t + off, cs[k].bits, m), cs[k].bits, m, sl);
                double diff = fabs(c->rgba[sl] - v[sl]);
                if (pct[sl] ? diff > tol[sl] / 100.0 * fabs(v[sl]) : diff > tol[sl]) ok = false;
            }
            if (!ok && !bad++) {
                bx = x + i;
                by = y + j;
                memcpy(got, v, sizeof got);
            }
        }
    if (!bad) return AM_PASS;
    /* Amber reports normalized formats on the 0..255 scale. */
    double k255 = (m == M_UNORM || m == M_SNORM || m == M_SRGB) ? 255.0 : 1.0;
    int nv = c->probe_rgba ? 4 : 3;
    char want[128] = "", have[128] = "";
    for (int k = 0; k < nv; k++) {
        size_t lw = strlen(want), lh = strlen(have);
        snprintf(want + lw, sizeof want - lw, "%s%g", k ? ", " : "", c->rgba[k] * k255);
        snprintf(have + lh, sizeof have - lh, "%s%g", k ? ", " : "", got[k] * k255);
    }
    res->status = AM_FAIL;
    res->pos = c->pos;
    snprintf(res->msg, sizeof res->msg,
             "EXPECT#%d (line %d) %s IDX %llu %llu SIZE %llu %llu %s: texel (%llu, %llu): expected %s, got %s "
             "[%llu of %llu texels differ]",
             c->expect_no, c->pos.line, b->name, (unsigned long long)x, (unsigned long long)y, (unsigned long long)w,
             (unsigned long long)h, c->probe_rgba ? "EQ_RGBA" : "EQ_RGB", (unsigned long long)bx,
             (unsigned long long)by, want, have, (unsigned long long)bad, (unsigned long long)(w * h));
    return AM_FAIL;
}
