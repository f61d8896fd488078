/* Expectations on buffer contents, and buffer initial contents.
 *
 * Pure host code: the executor hands over mapped memory after the device
 * is idle. A failure names the EXPECT (its ordinal and line), the first
 * value that differs, its element and its byte offset in the buffer. */
#include "am.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *cmp_name(am_cmp c)
{
    static const char *n[] = {"EQ", "NE", "LT", "LE", "GT", "GE", "~="};
    return (unsigned)c < 7 ? n[c] : "?";
}

static uint64_t mask_of(am_scalar s)
{
    int n = am_scalar_size(s);
    return n == 8 ? UINT64_MAX : ((uint64_t)1 << (8 * n)) - 1;
}

static bool is_signed_int(am_scalar s)
{
    return s == AM_I8 || s == AM_I16 || s == AM_I32 || s == AM_I64;
}

/* EQ_BUFFER: equal numbers (NaN equal to NaN), integers bit for bit. */
static bool same_value(uint64_t x, uint64_t y, am_scalar s)
{
    if (!am_scalar_is_float(s)) return x == y;
    double a = am_bits_to_double(x, s), b = am_bits_to_double(y, s);
    return a == b || (a != a && b != b);
}

/* Amber's float equality (its verifier): the difference must not exceed
   tol, or tol percent of |want|. A NaN difference never exceeds anything,
   so in Amber a NaN matches every value, and every value a NaN. */
static bool amber_close(double g, double w, double tol, bool pct)
{
    double d = fabs(g - w);
    return pct ? !(d > (tol / 100.0) * fabs(w)) : !(d > tol);
}

/* Ordered comparisons fail, as in Amber, only when the opposite holds in
   the scalar's own arithmetic (so a NaN passes them all). */
static bool ordered(am_cmp cmp, uint64_t got, uint64_t want, am_scalar s)
{
    if (am_scalar_is_float(s)) {
        double g = am_bits_to_double(got, s), w = am_bits_to_double(want, s);
        switch (cmp) {
        case AM_CMP_LT: return !(g >= w);
        case AM_CMP_LE: return !(g > w);
        case AM_CMP_GT: return !(g <= w);
        default: return !(g < w);
        }
    }
    int o;
    if (is_signed_int(s)) {
        int64_t g = am_bits_to_i64(got, s), w = am_bits_to_i64(want, s);
        o = g < w ? -1 : g > w ? 1 : 0;
    } else {
        o = got < want ? -1 : got > want ? 1 : 0;
    }
    switch (cmp) {
    case AM_CMP_LT: return o < 0;
    case AM_CMP_LE: return o <= 0;
    case AM_CMP_GT: return o > 0;
    default: return o >= 0;
    }
}

static bool compare(const am_cmd *c, uint32_t comp, uint64_t got, uint64_t want)
{
    am_scalar s = c->fmt.scalar;
    bool fl = am_scalar_is_float(s);
    double g = fl ? am_bits_to_double(got, s) : 0, w = fl ? am_bits_to_double(want, s) : 0;
    if (c->n_tol && (c->cmp == AM_CMP_EQ || c->cmp == AM_CMP_APPROX)) {
        int k = comp < (uint32_t)c->n_tol ? (int)comp : 0;
        return amber_close(am_bits_to_double(got, s), am_bits_to_double(want, s), c->tol[k], c->tol_pct[k]);
    }
    switch (c->cmp) {
    /* Float EQ / NE without TOLERANCE: Amber's relative 1e-6 percent. */
    case AM_CMP_EQ: case AM_CMP_APPROX: return fl ? amber_close(g, w, 0.000001, true) : got == want;
    case AM_CMP_NE: return fl ? !amber_close(g, w, 0.000001, true) : got != want;
    default: return ordered(c->cmp, got, want, s);
    }
}

static am_status check_values(const am_script *s, const am_cmd *c, const uint8_t *data, uint64_t size,
                              am_result *res)
{
    const am_fmt *f = &c->fmt;
    const am_buffer *b = &s->buffer[c->buf];
    uint32_t k0 = 0;
    uint64_t base = c->offset;
    if (!s->vkscript) {
        /* AmberScript: IDX may name any component; values continue from it. */
        uint32_t in_elem = (uint32_t)(c->offset % f->stride);
        for (uint32_t k = 0; k < f->n_comp; k++)
            if (f->comp_off[k] == in_elem) k0 = k;
        base = c->offset - in_elem;
    }
    int sz = am_scalar_size(f->scalar);
    uint32_t bad = 0, first = 0;
    uint64_t first_off = 0, first_got = 0;
    for (uint32_t i = 0; i < c->n_values; i++) {
        uint64_t g = (uint64_t)k0 + i;
        uint32_t comp = (uint32_t)(g % f->n_comp);
        uint64_t off = base + (g / f->n_comp) * f->stride + f->comp_off[comp];
        if (off + (uint64_t)sz > size) {
            return am_fail_at(res, c->pos,
                              "EXPECT#%d reads past the end of '%s' (value %u at byte offset %" PRIu64
                              ", the buffer has %" PRIu64 " bytes)",
                              c->expect_no, b->name, i + 1, off, size);
        }
        uint64_t got = am_load_bits(data + off, f->scalar);
        if (!compare(c, comp, got, c->values[i])) {
            if (!bad) {
                first = i;
                first_off = off;
                first_got = got;
            }
            bad++;
        }
    }
    if (!bad) return AM_PASS;
    char ws[64], gs[64], ty[64];
    am_bits_format(c->values[first], f->scalar, ws, sizeof ws);
    am_bits_format(first_got, f->scalar, gs, sizeof gs);
    am_fmt_describe(f, ty, sizeof ty);
    uint64_t elem = (first_off) / f->stride;
    res->status = AM_FAIL;
    res->pos = c->pos;
    char tol[64] = "";
    if (c->n_tol && (c->cmp == AM_CMP_EQ || c->cmp == AM_CMP_APPROX)) {
        int k = (int)((k0 + first) % f->n_comp);
        k = k < c->n_tol ? k : 0;
        snprintf(tol, sizeof tol, " (tolerance %g%s)", c->tol[k], c->tol_pct[k] ? "%" : "");
    }
    snprintf(res->msg, sizeof res->msg,
             "EXPECT#%d (line %d) %s IDX %" PRIu64 " %s: value %u of %u, element %" PRIu64
             " at byte offset %" PRIu64 ": expected %s%s, got %s [%s; %u of %u values differ]",
             c->expect_no, c->pos.line, b->name, c->offset, cmp_name(c->cmp), first + 1, c->n_values, elem,
             first_off, ws, tol, gs, ty, bad, c->n_values);
    return AM_FAIL;
}

static am_status check_buffers(const am_script *s, const am_cmd *c, const uint8_t *a, uint64_t na,
                               const uint8_t *b, uint64_t nb, am_result *res)
{
    const am_fmt *f = &s->buffer[c->buf].fmt;
    const char *an = s->buffer[c->buf].name, *bn = s->buffer[c->buf2].name;
    res->pos = c->pos;
    if (na != nb) {
        res->status = AM_FAIL;
        snprintf(res->msg, sizeof res->msg, "EXPECT#%d (line %d) %s: sizes differ: %s has %" PRIu64
                 " bytes, %s has %" PRIu64, c->expect_no, c->pos.line, an, an, na, bn, nb);
        return AM_FAIL;
    }
    uint64_t elems = na / f->stride;
    int sz = am_scalar_size(f->scalar);
    double sum = 0;
    uint64_t n = 0;
    double hist_a[4][256], hist_b[4][256];
    bool emd = c->kind == AM_CMD_EXPECT_EMD;
    if (emd) {
        memset(hist_a, 0, sizeof hist_a);
        memset(hist_b, 0, sizeof hist_b);
    }
    for (uint64_t e = 0; e < elems; e++)
        for (uint32_t k = 0; k < f->n_comp; k++) {
            uint64_t off = e * f->stride + f->comp_off[k];
            if (off + (uint64_t)sz > na) continue;
            uint64_t x = am_load_bits(a + off, f->scalar), y = am_load_bits(b + off, f->scalar);
            if (c->kind == AM_CMD_EXPECT_EQ_BUFFER) {
                if (!same_value(x, y, f->scalar)) {
                    char xs[64], ys[64];
                    am_bits_format(x, f->scalar, xs, sizeof xs);
                    am_bits_format(y, f->scalar, ys, sizeof ys);
                    res->status = AM_FAIL;
                    snprintf(res->msg, sizeof res->msg,
                             "EXPECT#%d (line %d) %s EQ_BUFFER %s: element %" PRIu64 " component %u at byte offset %" PRIu64
                             ": %s has %s, %s has %s", c->expect_no, c->pos.line, an, bn, e, k, off, an, xs, bn, ys);
                    return AM_FAIL;
                }
            } else if (emd) {
                hist_a[k & 3][x & 0xff] += 1;
                hist_b[k & 3][y & 0xff] += 1;
                n++;
            } else {
                double d = am_bits_to_double(x, f->scalar) - am_bits_to_double(y, f->scalar);
                sum += d * d;
                n++;
            }
        }
    if (c->kind == AM_CMD_EXPECT_EQ_BUFFER) return AM_PASS;
    double metric = 0;
    if (emd) {
        /* Per channel: the earth mover's distance between the normalised
           histograms (sum of |CDF difference|), over 255 to lie in [0, 1];
           the worst channel counts. */
        uint64_t per = f->n_comp ? n / f->n_comp : 0;
        for (uint32_t k = 0; k < f->n_comp && k < 4 && per; k++) {
            double ca = 0, cb = 0, d = 0;
            for (int v = 0; v < 256; v++) {
                ca += hist_a[k][v] / (double)per;
                cb += hist_b[k][v] / (double)per;
                d += fabs(ca - cb);
            }
            d /= 255.0;
            if (d > metric) metric = d;
        }
    } else {
        metric = n ? sqrt(sum / (double)n) : 0;
    }
    if (metric <= c->tolerance) return AM_PASS;
    res->status = AM_FAIL;
    snprintf(res->msg, sizeof res->msg, "EXPECT#%d (line %d) %s %s %s: %s %.6g exceeds the tolerance %g",
             c->expect_no, c->pos.line, an, emd ? "EQ_HISTOGRAM_EMD_BUFFER" : "RMSE_BUFFER", bn,
             emd ? "EMD" : "RMSE", metric, c->tolerance);
    return AM_FAIL;
}

am_status am_check(const am_script *s, const am_cmd *c, const uint8_t *data, uint64_t size,
                   const uint8_t *data2, uint64_t size2, am_result *res)
{
    if (c->kind == AM_CMD_EXPECT_PROBE && c->buf >= 0 && c->buf < s->n_buffers)
        return am_check_probe(s, c, data, size, res);
    if (c->buf < 0 || c->buf >= s->n_buffers || (c->kind != AM_CMD_EXPECT && (c->buf2 < 0 || c->buf2 >= s->n_buffers)))
        return am_fail_at(res, c->pos, "EXPECT without its buffers");
    if (c->kind == AM_CMD_EXPECT) return check_values(s, c, data, size, res);
    return check_buffers(s, c, data, size, data2, size2, res);
}

void am_buffer_init(const am_buffer *b, uint8_t *dst, uint64_t bytes)
{
    memset(dst, 0, bytes);
    const am_fmt *f = &b->fmt;
    if (!b->has_fmt) return;
    if (b->init == AM_INIT_DATA) {
        /* No data: an empty FILE TEXT, or a FILE not loaded (parse only). */
        if (b->data) memcpy(dst, b->data, b->data_len < bytes ? b->data_len : bytes);
        return;
    }
    if (b->init != AM_INIT_FILL && b->init != AM_INIT_SERIES) return;
    char why[8];
    uint64_t start = 0, inc = 0, m = mask_of(f->scalar);
    am_num_encode(&b->fill, f->scalar, &start, why, sizeof why); /* validated by the parser */
    if (b->init == AM_INIT_SERIES) am_num_encode(&b->inc, f->scalar, &inc, why, sizeof why);
    bool fl = am_scalar_is_float(f->scalar);
    double fs = b->fill.hex ? (double)b->fill.mag : b->fill.f, fi = b->inc.hex ? (double)b->inc.mag : b->inc.f;
    uint64_t i = 0;
    for (uint64_t e = 0; e < b->elements; e++)
        for (uint32_t k = 0; k < f->n_comp; k++, i++) {
            uint64_t off = e * f->stride + f->comp_off[k];
            if (off + (uint64_t)am_scalar_size(f->scalar) > bytes) return;
            uint64_t bits = start;
            if (b->init == AM_INIT_SERIES) {
                if (fl) {
                    am_num n = {.is_float = true, .f = fs + fi * (double)i};
                    am_num_encode(&n, f->scalar, &bits, why, sizeof why);
                } else {
                    bits = (start + inc * i) & m; /* integers wrap in their width */
                }
            }
            am_store_bits(dst + off, f->scalar, bits);
        }
}

void am_dump(const am_buffer *b, const uint8_t *data, uint64_t size, char *buf, size_t len)
{
    size_t used = strlen(buf);
    const am_fmt *f = &b->fmt;
    int n = snprintf(buf + used, len - used, "  %s (%" PRIu64 " bytes):", b->name, size);
    if (n < 0 || (size_t)n >= len - used) return;
    used += (size_t)n;
    uint64_t elems = f->stride ? size / f->stride : 0;
    for (uint64_t e = 0; e < elems && e < 64; e++) {
        for (uint32_t k = 0; k < f->n_comp; k++) {
            uint64_t off = e * f->stride + f->comp_off[k];
            char v[64];
            am_bits_format(am_load_bits(data + off, f->scalar), f->scalar, v, sizeof v);
            n = snprintf(buf + used, len - used, "%s%s", k == 0 ? (e % 8 == 0 ? "\n    " : "  ") : ",", v);
            if (n < 0 || (size_t)n >= len - used) return;
            used += (size_t)n;
        }
    }
    snprintf(buf + used, len - used, "%s\n", elems > 64 ? "\n    ..." : "");
}
