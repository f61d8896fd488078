/* AmberScript images and samplers: IMAGE, SAMPLER, and the WIDTH/HEIGHT
 * form of BUFFER. Keywords, defaults and checks follow Amber's parser
 * (src/amberscript/parser.cc), so a file Amber refuses is refused here
 * with the same reason, and a file it accepts means the same thing. */
#include "parse_amber.h"
#include "parse_util.h"

#include <stdio.h>
#include <string.h>

am_status ap_find_sampler(ap_parser *p, int *out)
{
    TRY(ap_word(p, "a sampler name"));
    for (int i = 0; i < p->s->n_samplers; i++)
        if (!strcmp(p->s->sampler[i].name, p->t.text)) {
            *out = i;
            return AM_PASS;
        }
    return ap_err(p, &p->t, "unknown sampler '%s'", p->t.text);
}

/* A positive 32-bit size after its keyword (WIDTH, HEIGHT, DEPTH). */
static am_status positive(ap_parser *p, const char *what, uint32_t *out)
{
    uint64_t v;
    TRY(ap_uint_tok(p, what, UINT32_MAX, &v));
    if (!v) return ap_err(p, &p->t, "%s must be positive", what);
    *out = (uint32_t)v;
    return AM_PASS;
}

/* elements = width * height * depth, bounded like SIZE. */
static am_status set_elements(ap_parser *p, am_buffer *b)
{
    uint64_t w = b->width ? b->width : 1, h = b->height ? b->height : 1, d = b->depth ? b->depth : 1;
    uint64_t max = AM_MAX_BUFFER_BYTES / b->fmt.stride;
    if (w > max || h > max || d > max || w * h > max || w * h * d > max)
        return ap_err(p, &p->t, "image too large (over %s bytes)", "1 GiB");
    b->elements = w * h * d;
    return AM_PASS;
}

/* FILL v | SERIES_FROM s INC_BY i (p->t is the keyword), then the end of
   the command. */
static am_status fill_rule(ap_parser *p, am_buffer *b)
{
    if (!strcmp(p->t.text, "FILL")) {
        TRY(ap_word(p, "a fill value"));
        TRY(ap_fill_value(p, b, &b->fill));
        b->init = AM_INIT_FILL;
    } else {
        if (b->fmt.n_comp != 1) /* Amber's rule */
            return ap_err(p, &p->t, "SERIES_FROM needs a scalar data type, not %s", "a vector or matrix");
        TRY(ap_word(p, "a start value"));
        TRY(ap_fill_value(p, b, &b->fill));
        TRY(ap_keyword(p, "INC_BY"));
        TRY(ap_word(p, "an increment"));
        TRY(ap_fill_value(p, b, &b->inc));
        b->init = AM_INIT_SERIES;
    }
    return ap_eol(p);
}

am_status ap_image_extent(ap_parser *p, am_buffer *b)
{
    TRY(positive(p, "WIDTH", &b->width));
    TRY(ap_keyword(p, "HEIGHT"));
    TRY(positive(p, "HEIGHT", &b->height));
    b->dim = 2;
    TRY(set_elements(p, b));
    if (ap_peek_word(p, "FILL") || ap_peek_word(p, "SERIES_FROM")) {
        NEXT(p);
        return fill_rule(p, b);
    }
    return ap_eol(p); /* no initializer: zeros */
}

/* DATA_TYPE t or FORMAT f of an IMAGE (p->t is the keyword). */
static am_status image_type(ap_parser *p, am_buffer *b, bool format)
{
    TRY(ap_word(p, format ? "a format" : "a data type"));
    int r = am_parse_type(p->t.text, &b->fmt);
    if (r < 0) return ap_skip(p, &p->t, "image formats with packed, depth or stencil components not supported");
    if (r == 0 || (format && r != 2))
        return ap_err(p, &p->t, format ? "unknown format '%s'" : "unknown data type '%s'", p->t.text);
    b->format[0] = '\0';
    if (r == 2) am_set_format(b, p->t.text);
    b->fmt.layout = r == 2 ? AM_PACKED : AM_STD430;
    am_fmt_finish(&b->fmt);
    b->has_fmt = true;
    return AM_PASS;
}

am_status ap_cmd_image(ap_parser *p)
{
    am_tok at = p->t;
    am_script *s = p->s;
    if (s->n_buffers >= AM_MAX_BUFFERS) return ap_err(p, &at, "more than %s buffers", "256");
    am_buffer *b = &s->buffer[s->n_buffers];
    memset(b, 0, sizeof *b);
    b->pos = at.pos;
    TRY(ap_name(p, "an image name", b->name));
    if (!strcmp(b->name, "DATA_TYPE") || !strcmp(b->name, "FORMAT"))
        return ap_err(p, &p->t, "missing IMAGE name before %s", b->name);
    for (int i = 0; i < s->n_buffers; i++)
        if (!strcmp(s->buffer[i].name, b->name)) return ap_err(p, &p->t, "buffer '%s' already defined", b->name);
    s->n_buffers++; /* so am_script_free frees its DATA whatever happens */
    bool w_set = false, h_set = false, d_set = false;
    while (ap_peek_is_word(p) && !ap_peek_word(p, "FILL") && !ap_peek_word(p, "SERIES_FROM") &&
           !ap_peek_word(p, "DATA")) {
        NEXT(p);
        am_tok kw = p->t;
        uint64_t v;
        if (!strcmp(kw.text, "DATA_TYPE") || !strcmp(kw.text, "FORMAT")) {
            TRY(image_type(p, b, kw.text[0] == 'F'));
        } else if (!strcmp(kw.text, "MIP_LEVELS")) {
            TRY(ap_uint_tok(p, "MIP_LEVELS", 32, &v));
            if (!v) return ap_err(p, &p->t, "MIP_LEVELS must be at least %s", "1");
            b->mip_levels = (uint32_t)v;
        } else if (!strcmp(kw.text, "DIM_1D") || !strcmp(kw.text, "DIM_2D") || !strcmp(kw.text, "DIM_3D")) {
            b->dim = (uint8_t)(kw.text[4] - '0');
        } else if (!strcmp(kw.text, "WIDTH")) {
            TRY(positive(p, "IMAGE WIDTH", &b->width));
            w_set = true;
        } else if (!strcmp(kw.text, "HEIGHT")) {
            TRY(positive(p, "IMAGE HEIGHT", &b->height));
            h_set = true;
        } else if (!strcmp(kw.text, "DEPTH")) {
            TRY(positive(p, "IMAGE DEPTH", &b->depth));
            d_set = true;
        } else if (!strcmp(kw.text, "SAMPLES")) {
            TRY(ap_uint_tok(p, "SAMPLES", 64, &v));
            if (!v || (v & (v - 1))) return ap_err(p, &p->t, "invalid sample count: %s", p->t.text);
            /* Amber never copies multisampled images; nothing to check. */
            if (v > 1) return ap_skip(p, &kw, "multisampled images not supported");
        } else {
            return ap_err(p, &kw, "unknown IMAGE command provided: %s", kw.text);
        }
    }
    /* Amber's checks, in its order. */
    if (b->dim == 3 && !d_set) return ap_err(p, &at, "expected IMAGE %s", "DEPTH");
    if ((b->dim == 2 || b->dim == 3) && !h_set) return ap_err(p, &at, "expected IMAGE %s", "HEIGHT");
    if (!w_set) return ap_err(p, &at, "expected IMAGE %s", "WIDTH");
    if (!b->has_fmt) return ap_err(p, &at, "IMAGE '%s' needs a DATA_TYPE or FORMAT", b->name);
    TRY(set_elements(p, b));
    uint64_t want = b->elements;
    if (!ap_peek_is_word(p)) return ap_eol(p); /* no initializer: zeros */
    NEXT(p);
    if (!strcmp(p->t.text, "DATA")) {
        am_tok data = p->t;
        TRY(ap_buffer_data(p, b, false));
        if (b->elements != want) {
            char m[128];
            snprintf(m, sizeof m, "%llu specified vs %llu provided", (unsigned long long)want,
                     (unsigned long long)b->elements);
            return ap_err(p, &data, "elements provided in DATA do not match the image size: %s", m);
        }
        return AM_PASS;
    }
    return fill_rule(p, b);
}

static am_status filter(ap_parser *p, bool *linear)
{
    TRY(ap_word(p, "linear or nearest"));
    if (!strcmp(p->t.text, "linear"))
        *linear = true;
    else if (!strcmp(p->t.text, "nearest"))
        *linear = false;
    else
        return ap_err(p, &p->t, "invalid filter '%s' (linear or nearest)", p->t.text);
    return AM_PASS;
}

/* Looks the current word up in names[]; its index, or -1. */
static int word_index(const char *w, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(w, names[i])) return i;
    return -1;
}

static am_status lod(ap_parser *p, float *out)
{
    TRY(ap_word(p, "a float"));
    am_num n;
    /* Amber wants a float token here: MIN_LOD 1 is refused, 1.0 taken. */
    if (!am_num_parse(p->t.text, &n) || !n.is_float)
        return ap_err(p, &p->t, "'%s' is not a float (write it with a '.')", p->t.text);
    *out = (float)n.f;
    return AM_PASS;
}

am_status ap_cmd_sampler(ap_parser *p)
{
    static const char *const addr[] = {"repeat", "mirrored_repeat", "clamp_to_edge", "clamp_to_border",
                                       "mirror_clamp_to_edge"};
    static const char *const border[] = {"float_transparent_black", "int_transparent_black", "float_opaque_black",
                                         "int_opaque_black", "float_opaque_white", "int_opaque_white"};
    static const char *const cmp[] = {"never", "less", "equal", "less_or_equal",
                                      "greater", "not_equal", "greater_or_equal", "always"};
    am_tok at = p->t;
    am_script *s = p->s;
    if (s->n_samplers >= AM_MAX_SAMPLERS) return ap_err(p, &at, "more than %s samplers", "32");
    am_sampler *sm = &s->sampler[s->n_samplers];
    memset(sm, 0, sizeof *sm);
    sm->pos = at.pos;
    sm->max_lod = 1.0f;
    TRY(ap_name(p, "a sampler name", sm->name));
    for (int i = 0; i < s->n_samplers; i++)
        if (!strcmp(s->sampler[i].name, sm->name))
            return ap_err(p, &p->t, "sampler '%s' already defined", sm->name);
    while (ap_peek_is_word(p)) {
        NEXT(p);
        am_tok kw = p->t;
        const char *w = kw.text;
        int k;
        if (!strcmp(w, "MAG_FILTER")) {
            TRY(filter(p, &sm->mag_linear));
        } else if (!strcmp(w, "MIN_FILTER")) {
            TRY(filter(p, &sm->min_linear));
        } else if (!strncmp(w, "ADDRESS_MODE_", 13) && (w[13] == 'U' || w[13] == 'V' || w[13] == 'W') && !w[14]) {
            TRY(ap_word(p, "an address mode"));
            if ((k = word_index(p->t.text, addr, 5)) < 0)
                return ap_err(p, &p->t, "invalid address mode '%s'", p->t.text);
            sm->addr[w[13] == 'U' ? 0 : w[13] == 'V' ? 1 : 2] = (am_addr_mode)k;
        } else if (!strcmp(w, "BORDER_COLOR")) {
            TRY(ap_word(p, "a border color"));
            if ((k = word_index(p->t.text, border, 6)) < 0)
                return ap_err(p, &p->t, "invalid BORDER_COLOR value '%s'", p->t.text);
            sm->border = k;
        } else if (!strcmp(w, "MIN_LOD")) {
            TRY(lod(p, &sm->min_lod));
        } else if (!strcmp(w, "MAX_LOD")) {
            TRY(lod(p, &sm->max_lod));
        } else if (!strcmp(w, "NORMALIZED_COORDS")) {
            sm->unnormalized = false;
        } else if (!strcmp(w, "UNNORMALIZED_COORDS")) {
            /* Amber also zeroes the LOD range (Vulkan requires it). */
            sm->unnormalized = true;
            sm->min_lod = sm->max_lod = 0.0f;
        } else if (!strcmp(w, "COMPARE")) {
            TRY(ap_word(p, "on or off"));
            if (strcmp(p->t.text, "on") && strcmp(p->t.text, "off"))
                return ap_err(p, &p->t, "invalid value for COMPARE: %s", p->t.text);
            sm->compare = !strcmp(p->t.text, "on");
        } else if (!strcmp(w, "COMPARE_OP")) {
            TRY(ap_word(p, "a compare op"));
            if ((k = word_index(p->t.text, cmp, 8)) < 0)
                return ap_err(p, &p->t, "invalid value for COMPARE_OP: %s", p->t.text);
            sm->compare_op = k;
        } else {
            return ap_err(p, &kw, "unexpected sampler parameter %s", w);
        }
    }
    TRY(ap_eol(p));
    if (sm->max_lod < sm->min_lod)
        return am_fail_at(p->res, at.pos, "max LOD needs to be greater than or equal to min LOD");
    s->n_samplers++;
    return AM_PASS;
}
