/* AmberScript RUN, COPY, CLEAR and EXPECT (the rest of the parser:
   parse_amber.c). */
#include "parse_amber.h"
#include "util/fault.h"
#include "parse_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static am_cmd *new_cmd(ap_parser *p, am_cmd_kind kind, am_pos pos)
{
    am_cmd *c = am_script_add_cmd(p->s);
    if (c) {
        c->kind = kind;
        c->pos = pos;
    }
    return c;
}

am_status ap_cmd_run(ap_parser *p)
{
    am_tok at = p->t;
    bool timed = false;
    if (ap_peek_word(p, "TIMED_EXECUTION")) {
        NEXT(p);
        timed = true;
    }
    int pl = -1;
    TRY(ap_find_pipeline(p, &pl));
    uint64_t g[3];
    const am_tok *nx = am_lex_peek(&p->lx);
    if (nx->kind == AM_TOK_WORD && (!strcmp(nx->text, "DRAW_RECT") || !strcmp(nx->text, "DRAW_GRID") ||
                                    !strcmp(nx->text, "DRAW_ARRAY")))
        return ap_skip(p, nx, "graphics draws not supported");
    for (int i = 0; i < 3; i++) TRY(ap_uint_tok(p, "a workgroup count", UINT32_MAX, &g[i]));
    TRY(ap_eol(p));
    am_cmd *c = new_cmd(p, AM_CMD_RUN, at.pos);
    if (!c) return ap_err(p, &at, "too many commands%s", "");
    c->pipeline = pl;
    c->timed = timed;
    for (int i = 0; i < 3; i++) c->groups[i] = (uint32_t)g[i];
    return AM_PASS;
}

static bool same_fmt(const am_fmt *a, const am_fmt *b)
{
    return a->scalar == b->scalar && a->rows == b->rows && a->cols == b->cols && a->stride == b->stride;
}

am_status ap_cmd_copy(ap_parser *p)
{
    am_tok at = p->t;
    int a = -1, b = -1;
    TRY(ap_find_buffer(p, &a));
    TRY(ap_keyword(p, "TO"));
    TRY(ap_find_buffer(p, &b));
    am_tok bt = p->t;
    if (a == b) return ap_err(p, &bt, "COPY of '%s' onto itself", bt.text);
    const am_buffer *ba = &p->s->buffer[a], *bb = &p->s->buffer[b];
    if (!same_fmt(&ba->fmt, &bb->fmt)) return ap_err(p, &bt, "COPY needs buffers of one data type ('%s' differs)", bt.text);
    TRY(ap_eol(p));
    am_cmd *c = new_cmd(p, AM_CMD_COPY, at.pos);
    if (!c) return ap_err(p, &at, "too many commands%s", "");
    c->buf = a;
    c->buf2 = b;
    return AM_PASS;
}

am_status ap_cmd_clear(ap_parser *p)
{
    am_tok at = p->t;
    int pl = -1;
    TRY(ap_find_pipeline(p, &pl));
    /* Every pipeline that parses here is a compute pipeline. */
    return ap_err(p, &at, "%s needs a graphics pipeline", at.text);
}

static am_status tolerance(ap_parser *p, am_cmd *c)
{
    while (ap_peek_is_word(p)) {
        const am_tok *nx = am_lex_peek(&p->lx);
        am_num n;
        char txt[AM_TOK_MAX];
        snprintf(txt, sizeof txt, "%s", nx->text);
        size_t l = strlen(txt);
        bool pct = l > 1 && txt[l - 1] == '%';
        if (pct) txt[l - 1] = '\0';
        if (!am_num_parse(txt, &n)) break;
        NEXT(p);
        if (c->n_tol >= 4) return ap_err(p, &p->t, "TOLERANCE takes at most four values%s", "");
        if (n.neg || n.hex) return ap_err(p, &p->t, "a tolerance must be a non-negative number, not '%s'", p->t.text);
        c->tol[c->n_tol] = n.f;
        c->tol_pct[c->n_tol] = pct;
        c->n_tol++;
    }
    if (c->n_tol == 0) {
        NEXT(p);
        return ap_err(p, &p->t, "TOLERANCE needs a value, got '%s'", ap_tok_desc(&p->t));
    }
    return AM_PASS;
}

static am_status expect_buffers(ap_parser *p, am_cmd *c, am_tok cmp)
{
    TRY(ap_find_buffer(p, &c->buf2));
    am_tok bt = p->t;
    const am_buffer *a = &p->s->buffer[c->buf], *b = &p->s->buffer[c->buf2];
    if (!same_fmt(&a->fmt, &b->fmt))
        return ap_err(p, &bt, "'%s' has a different data type", bt.text);
    if (!strcmp(cmp.text, "EQ_BUFFER")) {
        c->kind = AM_CMD_EXPECT_EQ_BUFFER;
        return ap_eol(p);
    }
    c->kind = !strcmp(cmp.text, "RMSE_BUFFER") ? AM_CMD_EXPECT_RMSE : AM_CMD_EXPECT_EMD;
    if (c->kind == AM_CMD_EXPECT_EMD && am_scalar_size(a->fmt.scalar) != 1)
        return ap_err(p, &cmp, "%s compares 8-bit components only", cmp.text);
    TRY(ap_keyword(p, "TOLERANCE"));
    TRY(ap_word(p, "a tolerance"));
    am_num n;
    if (!am_num_parse(p->t.text, &n) || n.neg)
        return ap_err(p, &p->t, "a tolerance must be a non-negative number, not '%s'", p->t.text);
    c->tolerance = n.f;
    return ap_eol(p);
}

/* IDX x [y SIZE w h] EQ_RGB|EQ_RGBA r g b [a] [TOLERANCE t...]: the image
   probe, parsed as Amber parses it (p->t is x; values 0..255 kept as
   value / 255; at most 3 tolerances for RGB, 4 for RGBA). */
static am_status expect_probe(ap_parser *p, am_cmd *c)
{
    uint64_t v;
    c->kind = AM_CMD_EXPECT_PROBE;
    if (c->offset > UINT32_MAX) return ap_err(p, &p->t, "invalid X value in EXPECT command%s", "");
    c->probe[0] = (uint32_t)c->offset;
    TRY(ap_uint_tok(p, "Y", UINT32_MAX, &v));
    c->probe[1] = (uint32_t)v;
    NEXT(p);
    if (p->t.kind != AM_TOK_WORD || strcmp(p->t.text, "SIZE"))
        return ap_err(p, &p->t, "an EXPECT with x and y needs SIZE w h, got '%s'", ap_tok_desc(&p->t));
    for (int i = 2; i < 4; i++) {
        TRY(ap_uint_tok(p, i == 2 ? "the width" : "the height", INT32_MAX, &v));
        if (!v) return ap_err(p, &p->t, "invalid %s in EXPECT command", i == 2 ? "width" : "height");
        c->probe[i] = (uint32_t)v;
    }
    TRY(ap_word(p, "EQ_RGB or EQ_RGBA"));
    if (strcmp(p->t.text, "EQ_RGB") && strcmp(p->t.text, "EQ_RGBA"))
        return ap_err(p, &p->t, "unknown comparator type in EXPECT: %s", p->t.text);
    c->probe_rgba = !strcmp(p->t.text, "EQ_RGBA");
    for (int i = 0; i < (c->probe_rgba ? 4 : 3); i++) {
        TRY(ap_uint_tok(p, "a color value (0..255)", 255, &v));
        c->rgba[i] = (double)((float)v / 255.f); /* Amber keeps a float */
    }
    if (ap_peek_word(p, "TOLERANCE")) {
        NEXT(p);
        TRY(tolerance(p, c));
        if (!c->probe_rgba && c->n_tol > 3)
            return ap_err(p, &p->t, "TOLERANCE for an RGB comparison has a maximum of %s values", "3");
    }
    return ap_eol(p);
}

am_status ap_cmd_expect(ap_parser *p)
{
    am_tok at = p->t;
    int b = -1;
    TRY(ap_find_buffer(p, &b));
    am_cmd *c = new_cmd(p, AM_CMD_EXPECT, at.pos);
    if (!c) return ap_err(p, &at, "too many commands%s", "");
    c->buf = b;
    c->expect_no = ++p->s->n_expects;
    const am_buffer *buf = &p->s->buffer[b];
    c->fmt = buf->fmt;
    TRY(ap_word(p, "IDX or a buffer comparison"));
    am_tok cmp = p->t;
    if (!strcmp(cmp.text, "EQ_BUFFER") || !strcmp(cmp.text, "RMSE_BUFFER") ||
        !strcmp(cmp.text, "EQ_HISTOGRAM_EMD_BUFFER"))
        return expect_buffers(p, c, cmp);
    if (strcmp(cmp.text, "IDX")) return ap_err(p, &cmp, "expected IDX, got '%s'", cmp.text);
    TRY(ap_uint_tok(p, "IDX (a byte offset)", AM_MAX_BUFFER_BYTES, &c->offset));
    am_tok idx = p->t;
    uint64_t dummy;
    if (ap_peek_is_word(p) && am_parse_uint(am_lex_peek(&p->lx)->text, UINT32_MAX, &dummy))
        return expect_probe(p, c);
    uint32_t in_elem = (uint32_t)(c->offset % c->fmt.stride);
    bool on_comp = false;
    for (uint32_t i = 0; i < c->fmt.n_comp; i++) on_comp |= c->fmt.comp_off[i] == in_elem;
    if (!on_comp) {
        char m[160];
        snprintf(m, sizeof m, "IDX %llu is not the byte offset of a component (elements are %u bytes)",
                 (unsigned long long)c->offset, c->fmt.stride);
        return am_fail_at(p->res, idx.pos, "%s", m);
    }
    TRY(ap_word(p, "a comparison"));
    if (!strcmp(p->t.text, "TOLERANCE")) {
        TRY(tolerance(p, c));
        TRY(ap_word(p, "EQ"));
        if (strcmp(p->t.text, "EQ")) return ap_err(p, &p->t, "TOLERANCE goes with EQ, not '%s'", p->t.text);
    }
    static const char *ops[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
    int op = -1;
    for (int i = 0; i < 6; i++)
        if (!strcmp(p->t.text, ops[i])) op = i;
    if (op < 0) {
        if (!strcmp(p->t.text, "EQ_RGB") || !strcmp(p->t.text, "EQ_RGBA"))
            return ap_err(p, &p->t, "%s needs IDX x y SIZE w h", p->t.text);
        return ap_err(p, &p->t, "unknown comparison '%s'", p->t.text);
    }
    c->cmp = (am_cmp)op;
    size_t cap = 0;
    while (ap_peek_is_word(p)) {
        NEXT(p);
        if (c->n_values == cap) {
            size_t nc = cap ? cap * 2 : 16;
            uint64_t *v = vf_realloc(c->values, nc * sizeof *v);
            if (!v) return ap_err(p, &p->t, "out of host memory (malloc failed)%s", "");
            c->values = v;
            cap = nc;
        }
        TRY(ap_value(p, c->fmt.scalar, &c->values[c->n_values], NULL));
        c->n_values++;
    }
    if (c->n_values == 0) {
        NEXT(p);
        return ap_err(p, &p->t, "EXPECT needs values after the comparison, got '%s'", ap_tok_desc(&p->t));
    }
    return ap_eol(p);
}
