/* AmberScript parser, compute subset (google/amber docs/amber_script.md).
 *
 * One function per command. Every error names the token it stopped at.
 * Graphics and image commands are recognised only far enough to turn the
 * file into a SKIP with the reason: running the compute half of such a
 * file could report a PASS for a test that was never really run.
 *
 * This file: the token helpers, SHADER / VIRTUAL_FILE / BUFFER and the
 * statement loop. Pipelines are in parse_amber_pipeline.c, RUN / COPY /
 * CLEAR / EXPECT in parse_amber_cmds.c; parse_amber.h is what they share. */
#include "parse_amber.h"
#include "util/fault.h"
#include "feature_table.h"
#include "parse_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

am_status ap_err(ap_parser *p, const am_tok *t, const char *fmt, const char *arg)
{
    char m[512];
    snprintf(m, sizeof m, fmt, arg);
    return am_fail_at(p->res, t->pos, "%s", m);
}

const char *ap_tok_desc(const am_tok *t)
{
    return t->kind == AM_TOK_EOL ? "end of line" : t->kind == AM_TOK_EOF ? "end of file" : t->text;
}

/* Marks the file SKIP: it needs something this runner does not do. */
am_status ap_skip(ap_parser *p, const am_tok *t, const char *why)
{
    snprintf(p->s->skip, sizeof p->s->skip, "%s", why);
    p->s->skip_pos = t->pos;
    return AM_SKIP;
}

am_status ap_word(ap_parser *p, const char *what)
{
    NEXT(p);
    if (p->t.kind != AM_TOK_WORD) return ap_err(p, &p->t, "expected %s", what);
    if (p->t.too_long) return ap_err(p, &p->t, "%s is too long", what);
    return AM_PASS;
}

am_status ap_keyword(ap_parser *p, const char *kw)
{
    NEXT(p);
    if (p->t.kind != AM_TOK_WORD || strcmp(p->t.text, kw) != 0) {
        char m[AM_TOK_MAX + 64];
        snprintf(m, sizeof m, "expected %s, got '%s'", kw, ap_tok_desc(&p->t));
        return am_fail_at(p->res, p->t.pos, "%s", m);
    }
    return AM_PASS;
}

am_status ap_name(ap_parser *p, const char *what, char *out)
{
    TRY(ap_word(p, what));
    if (strlen(p->t.text) >= AM_NAME_MAX) return ap_err(p, &p->t, "%s is too long", what);
    strcpy(out, p->t.text);
    return AM_PASS;
}

am_status ap_eol(ap_parser *p)
{
    NEXT(p);
    if (p->t.kind == AM_TOK_WORD) return ap_err(p, &p->t, "unexpected '%s' at end of command", p->t.text);
    return AM_PASS;
}

am_status ap_uint_tok(ap_parser *p, const char *what, uint64_t max, uint64_t *out)
{
    NEXT(p);
    if (p->t.kind != AM_TOK_WORD) {
        char m[512];
        snprintf(m, sizeof m, "expected a number for %s, got %s", what, ap_tok_desc(&p->t));
        return am_fail_at(p->res, p->t.pos, "%s", m);
    }
    if (!am_parse_uint(p->t.text, max, out)) {
        char m[AM_TOK_MAX + 128];
        snprintf(m, sizeof m, "%s must be an integer in 0..%llu, got '%s'", what,
                 (unsigned long long)max, p->t.text);
        return am_fail_at(p->res, p->t.pos, "%s", m);
    }
    return AM_PASS;
}

bool ap_peek_word(ap_parser *p, const char *kw)
{
    const am_tok *t = am_lex_peek(&p->lx);
    return t->kind == AM_TOK_WORD && strcmp(t->text, kw) == 0;
}

bool ap_peek_is_word(ap_parser *p)
{
    return am_lex_peek(&p->lx)->kind == AM_TOK_WORD;
}

/* ---- SHADER / VIRTUAL_FILE ------------------------------------------- */

static am_status cmd_virtual_file(ap_parser *p)
{
    am_tok at = p->t;
    if (p->n_vf >= AP_MAX_VFILES) return ap_err(p, &at, "more than %s virtual files", "32");
    TRY(ap_word(p, "a virtual file path"));
    ap_vfile *v = &p->vf[p->n_vf];
    for (int i = 0; i < p->n_vf; i++)
        if (!strcmp(p->vf[i].path, p->t.text)) return ap_err(p, &p->t, "virtual file '%s' already defined", p->t.text);
    strcpy(v->path, p->t.text);
    TRY(ap_eol(p));
    bool eof;
    v->text = am_lex_raw_until_end(&p->lx, "END", &v->first_line, &eof);
    if (!v->text) return am_fail_at(p->res, at.pos, eof ? "VIRTUAL_FILE without END" : "out of host memory (malloc failed)");
    p->n_vf++;
    return AM_PASS;
}

static am_status cmd_shader(ap_parser *p)
{
    am_tok at = p->t;
    am_script *s = p->s;
    TRY(ap_word(p, "a shader type"));
    am_tok type = p->t;
    bool multi = !strcmp(type.text, "multi");
    if (strcmp(type.text, "compute") && !multi) {
        static const char *gfx[] = {"vertex", "fragment", "geometry", "tessellation_evaluation",
                                    "tessellation_control", "ray_generation", "any_hit",
                                    "closest_hit", "miss", "intersection", "callable"};
        for (size_t i = 0; i < sizeof gfx / sizeof *gfx; i++)
            if (!strcmp(type.text, gfx[i])) return ap_skip(p, &type, "graphics and ray tracing shaders not supported");
        return ap_err(p, &type, "unknown shader type '%s'", type.text);
    }
    if (s->n_shaders >= AM_MAX_SHADERS) return ap_err(p, &at, "more than %s shaders", "64");
    am_shader *sh = &s->shader[s->n_shaders];
    memset(sh, 0, sizeof *sh);
    sh->pos = at.pos;
    TRY(ap_name(p, "a shader name", sh->name));
    for (int i = 0; i < s->n_shaders; i++)
        if (!strcmp(s->shader[i].name, sh->name)) return ap_err(p, &p->t, "shader '%s' already defined", sh->name);
    /* Counted now, as a BUFFER is, so am_script_free frees a VIRTUAL_FILE's
       copied source when a later word of the line fails (fuzz_amber found
       that leak); a failed parse is never run. */
    s->n_shaders++;
    TRY(ap_word(p, "a shader format"));
    if (!strcmp(p->t.text, "GLSL"))
        sh->kind = AM_SRC_GLSL;
    else if (!strcmp(p->t.text, "SPIRV-ASM"))
        sh->kind = AM_SRC_SPIRV_ASM;
    else if (!strcmp(p->t.text, "SPIRV-HEX"))
        sh->kind = AM_SRC_SPIRV_HEX;
    else if (!strcmp(p->t.text, "HLSL") || !strcmp(p->t.text, "OPENCL-C") || !strcmp(p->t.text, "WGSL"))
        return ap_skip(p, &p->t, "HLSL, OpenCL C and WGSL shaders not supported");
    else
        return ap_err(p, &p->t, "unknown shader format '%s'", p->t.text);
    if (multi && sh->kind == AM_SRC_GLSL) return ap_err(p, &type, "a multi shader must be %s", "SPIR-V");
    bool from_file = false;
    while (ap_peek_is_word(p)) {
        NEXT(p);
        if (!strcmp(p->t.text, "TARGET_ENV")) {
            TRY(ap_word(p, "a target environment"));
            if (!am_parse_target_env(p->t.text, &sh->target_env))
                return ap_err(p, &p->t, "unknown TARGET_ENV '%s'", p->t.text);
        } else if (!strcmp(p->t.text, "FILE") || !strcmp(p->t.text, "VIRTUAL_FILE")) {
            bool virt = p->t.text[0] == 'V';
            TRY(ap_word(p, "a file path"));
            if (from_file) return ap_err(p, &p->t, "a second shader file ('%s'): give FILE or VIRTUAL_FILE once", p->t.text);
            from_file = true;
            int k = -1;
            for (int i = 0; i < p->n_vf; i++)
                if (!strcmp(p->vf[i].path, p->t.text)) k = i;
            if (k >= 0) {
                sh->source = vf_strdup(p->vf[k].text);
                if (!sh->source) return ap_err(p, &p->t, "out of host memory (malloc failed)%s", "");
                sh->source_line = p->vf[k].first_line;
            } else if (virt) {
                return ap_err(p, &p->t, "no VIRTUAL_FILE '%s' defined before this", p->t.text);
            } else if (strlen(p->t.text) >= sizeof sh->file) {
                return ap_err(p, &p->t, "path too long%s", "");
            } else {
                strcpy(sh->file, p->t.text); /* loaded by the runner, relative to the test */
            }
        } else {
            return ap_err(p, &p->t, "unexpected '%s' in SHADER", p->t.text);
        }
    }
    TRY(ap_eol(p));
    if (!from_file) {
        bool eof;
        sh->source = am_lex_raw_until_end(&p->lx, "END", &sh->source_line, &eof);
        if (!sh->source) return am_fail_at(p->res, at.pos, eof ? "SHADER without END" : "out of host memory (malloc failed)");
    }
    return AM_PASS;
}

/* ---- BUFFER ------------------------------------------------------------ */

am_status ap_value(ap_parser *p, am_scalar sc, uint64_t *bits, am_num *num)
{
    char why[160];
    am_num n;
    if (!am_num_parse(p->t.text, &n)) return ap_err(p, &p->t, "'%s' is not a number", p->t.text);
    if (!am_num_encode(&n, sc, bits, why, sizeof why)) {
        char m[AM_TOK_MAX + 200];
        snprintf(m, sizeof m, "'%s' %s", p->t.text, why);
        return am_fail_at(p->res, p->t.pos, "%s", m);
    }
    if (num) *num = n;
    return AM_PASS;
}

/* DATA values up to END; from a FILE TEXT (to_eof) the end of the file
   ends them too, as in Amber. */
am_status ap_buffer_data(ap_parser *p, am_buffer *b, bool to_eof)
{
    /* Values up to END, over as many lines as needed. Growth is bounded
       by the input: each value is at least one character. */
    size_t cap = 0, n = 0;
    uint32_t comp = 0;
    uint64_t elems = 0;
    for (;;) {
        NEXT(p);
        if (p->t.kind == AM_TOK_EOL) continue;
        if (p->t.kind == AM_TOK_EOF) {
            if (to_eof) break;
            return am_fail_at(p->res, b->pos, "BUFFER DATA without END");
        }
        if (!strcmp(p->t.text, "END")) break;
        uint64_t bits;
        TRY(ap_value(p, b->fmt.scalar, &bits, NULL));
        if (comp == 0) {
            if (n + b->fmt.stride > AM_MAX_BUFFER_BYTES) return ap_err(p, &p->t, "buffer too large%s", "");
            if (n + b->fmt.stride > cap) {
                size_t nc = cap ? cap * 2 : 256;
                while (nc < n + b->fmt.stride) nc *= 2;
                uint8_t *d = vf_realloc(b->data, nc);
                if (!d) return ap_err(p, &p->t, "out of host memory (malloc failed)%s", "");
                b->data = d;
                cap = nc;
            }
            memset(b->data + n, 0, b->fmt.stride);
            elems++;
        }
        am_store_bits(b->data + n + b->fmt.comp_off[comp], b->fmt.scalar, bits);
        if (++comp == b->fmt.n_comp) {
            comp = 0;
            n += b->fmt.stride;
        }
    }
    if (comp != 0) return ap_err(p, &p->t, "DATA ends inside an element (its components come in %s)",
                              b->fmt.n_comp == 1 ? "ones" : "groups");
    b->elements = elems;
    b->data_len = n;
    b->init = AM_INIT_DATA;
    return to_eof ? AM_PASS : ap_eol(p);
}

am_status am_buffer_parse_text(am_buffer *b, const char *text, size_t len, am_result *res)
{
    ap_parser *p = vf_calloc(1, sizeof *p);
    if (!p) return am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
    am_lex_init(&p->lx, text, len);
    p->res = res;
    free(b->data);
    b->data = NULL;
    b->data_len = 0;
    am_status st = ap_buffer_data(p, b, true);
    free(p);
    return st;
}

/* FILE [TEXT|BINARY|PNG] path: recorded here, read by the runner. */
static am_status buffer_file(ap_parser *p, am_buffer *b)
{
    TRY(ap_word(p, "TEXT, BINARY or a file path"));
    bool binary = false;
    if (!strcmp(p->t.text, "TEXT") || !strcmp(p->t.text, "BINARY")) {
        binary = p->t.text[0] == 'B';
        TRY(ap_word(p, "a file path"));
    } else if (!strcmp(p->t.text, "PNG")) {
        return ap_skip(p, &p->t, "PNG image files not supported (BUFFER FILE PNG)");
    } else {
        /* Amber reads a FILE without a kind as a PNG image. */
        return ap_skip(p, &p->t, "PNG image files not supported (BUFFER FILE without TEXT or BINARY is a PNG)");
    }
    if (strlen(p->t.text) >= sizeof b->file) return ap_err(p, &p->t, "path too long%s", "");
    strcpy(b->file, p->t.text);
    b->file_binary = binary;
    b->file_pos = p->t.pos;
    b->init = AM_INIT_DATA;
    return ap_eol(p);
}

/* A FILL, SERIES_FROM or INC_BY value. Amber takes a float literal there
   for an integer buffer and uses its (absent) integer value, 0: 0.0 is
   accepted as 0; any other float literal would silently become 0 in Amber,
   so it is an ERROR that says so. */
am_status ap_fill_value(ap_parser *p, am_buffer *b, am_num *out)
{
    am_num n;
    if (!am_scalar_is_float(b->fmt.scalar) && am_num_parse(p->t.text, &n) && n.is_float) {
        if (n.f != 0.0) {
            char m[AM_TOK_MAX * 2 + 200];
            snprintf(m, sizeof m,
                     "'%s' is a float literal for an integer buffer: Amber reads it as 0 here; write an integer",
                     p->t.text);
            return am_fail_at(p->res, p->t.pos, "%s", m);
        }
        memset(out, 0, sizeof *out); /* integer 0 */
        return AM_PASS;
    }
    uint64_t bits;
    return ap_value(p, b->fmt.scalar, &bits, out);
}

static am_status cmd_buffer(ap_parser *p)
{
    am_tok at = p->t;
    am_script *s = p->s;
    if (s->n_buffers >= AM_MAX_BUFFERS) return ap_err(p, &at, "more than %s buffers", "256");
    am_buffer *b = &s->buffer[s->n_buffers];
    memset(b, 0, sizeof *b);
    b->pos = at.pos;
    TRY(ap_name(p, "a buffer name", b->name));
    for (int i = 0; i < s->n_buffers; i++)
        if (!strcmp(s->buffer[i].name, b->name)) return ap_err(p, &p->t, "buffer '%s' already defined", b->name);
    /* Counted now so am_script_free frees its DATA even when parsing fails
       half-way; a failed parse is never run. */
    s->n_buffers++;
    TRY(ap_word(p, "DATA_TYPE or FORMAT"));
    if (!strcmp(p->t.text, "DATA_TYPE")) {
        TRY(ap_word(p, "a data type"));
        int r = am_parse_type(p->t.text, &b->fmt);
        if (r < 0) return ap_skip(p, &p->t, "image formats with packed or depth components not supported");
        if (r == 0) return ap_err(p, &p->t, "unknown data type '%s'", p->t.text);
        if (r == 2) am_set_format(b, p->t.text);
        b->fmt.layout = r == 2 ? AM_PACKED : AM_STD430;
        if (ap_peek_word(p, "STD140") || ap_peek_word(p, "STD430")) {
            NEXT(p);
            if (r == 2) return ap_err(p, &p->t, "a FORMAT type has no %s layout", p->t.text);
            b->fmt.layout = !strcmp(p->t.text, "STD140") ? AM_STD140 : AM_STD430;
        }
    } else if (!strcmp(p->t.text, "FORMAT")) {
        TRY(ap_word(p, "a format"));
        int r = am_parse_type(p->t.text, &b->fmt);
        if (r != 2) {
            if (r < 0 || !strncmp(p->t.text, "D", 1) || !strncmp(p->t.text, "S8", 2))
                return ap_skip(p, &p->t, "packed, depth and stencil formats not supported");
            return ap_err(p, &p->t, "unknown format '%s'", p->t.text);
        }
        am_set_format(b, p->t.text);
        b->fmt.layout = AM_PACKED;
        if (ap_peek_word(p, "FILE")) {
            am_fmt_finish(&b->fmt);
            b->has_fmt = true;
            NEXT(p);
            return buffer_file(p, b);
        }
        if (!ap_peek_word(p, "SIZE") && !ap_peek_word(p, "DATA")) {
            /* A bare FORMAT buffer is a graphics attachment, sized by the
               pipeline's framebuffer (compute images are IMAGE commands). */
            return ap_skip(p, &p->t, "FORMAT buffers without data (attachments) not supported");
        }
    } else {
        return ap_err(p, &p->t, "expected DATA_TYPE or FORMAT, got '%s'", p->t.text);
    }
    am_fmt_finish(&b->fmt);
    b->has_fmt = true;
    TRY(ap_word(p, "SIZE or DATA"));
    if (!strcmp(p->t.text, "DATA")) {
        TRY(ap_buffer_data(p, b, false)); /* values may start on the DATA line */
    } else if (!strcmp(p->t.text, "SIZE")) {
        uint64_t n;
        TRY(ap_uint_tok(p, "SIZE", AM_MAX_BUFFER_BYTES / b->fmt.stride, &n));
        b->elements = n;
        TRY(ap_word(p, "FILL, SERIES_FROM or FILE"));
        if (!strcmp(p->t.text, "FILE")) {
            b->elements = 0; /* the file's contents give the size, as in Amber */
            return buffer_file(p, b);
        }
        if (!strcmp(p->t.text, "FILL")) {
            TRY(ap_word(p, "a fill value"));
            TRY(ap_fill_value(p, b, &b->fill));
            b->init = AM_INIT_FILL;
        } else if (!strcmp(p->t.text, "SERIES_FROM")) {
            TRY(ap_word(p, "a start value"));
            TRY(ap_fill_value(p, b, &b->fill));
            TRY(ap_keyword(p, "INC_BY"));
            TRY(ap_word(p, "an increment"));
            TRY(ap_fill_value(p, b, &b->inc));
            b->init = AM_INIT_SERIES;
        } else {
            return ap_err(p, &p->t, "expected FILL, SERIES_FROM or FILE, got '%s'", p->t.text);
        }
        TRY(ap_eol(p));
    } else if (!strcmp(p->t.text, "WIDTH")) {
        return ap_image_extent(p, b); /* a 2D image: WIDTH w HEIGHT h [FILL|SERIES_FROM] */
    } else if (!strcmp(p->t.text, "MIP_LEVELS") || !strcmp(p->t.text, "SAMPLES")) {
        return ap_skip(p, &p->t, "FORMAT buffers without data (attachments) not supported");
    } else {
        return ap_err(p, &p->t, "expected SIZE or DATA, got '%s'", p->t.text);
    }
    return AM_PASS;
}

/* ---- lookups ----------------------------------------------------------- */

am_status ap_find_buffer(ap_parser *p, int *out)
{
    TRY(ap_word(p, "a buffer name"));
    for (int i = 0; i < p->s->n_buffers; i++)
        if (!strcmp(p->s->buffer[i].name, p->t.text)) {
            *out = i;
            return AM_PASS;
        }
    return ap_err(p, &p->t, "unknown buffer '%s'", p->t.text);
}

am_status ap_find_pipeline(ap_parser *p, int *out)
{
    TRY(ap_word(p, "a pipeline name"));
    for (int i = 0; i < p->s->n_pipelines; i++)
        if (!strcmp(p->s->pipeline[i].name, p->t.text)) {
            *out = i;
            return AM_PASS;
        }
    return ap_err(p, &p->t, "unknown pipeline '%s'", p->t.text);
}

am_status ap_find_shader(ap_parser *p, int *out)
{
    TRY(ap_word(p, "a shader name"));
    for (int i = 0; i < p->s->n_shaders; i++)
        if (!strcmp(p->s->shader[i].name, p->t.text)) {
            *out = i;
            return AM_PASS;
        }
    return ap_err(p, &p->t, "unknown shader '%s'", p->t.text);
}

/* ---- top level ---------------------------------------------------------- */

static am_status requirement(ap_parser *p)
{
    am_script *s = p->s;
    am_tok at = p->t;
    char (*list)[AM_REQ_NAME_MAX];
    int *n;
    bool feature = !strcmp(at.text, "DEVICE_FEATURE"), property = !strcmp(at.text, "DEVICE_PROPERTY");
    if (feature) {
        list = s->feature;
        n = &s->n_features;
    } else if (property) {
        list = s->property;
        n = &s->n_properties;
    } else if (!strcmp(at.text, "DEVICE_EXTENSION")) {
        list = s->dev_ext;
        n = &s->n_dev_ext;
    } else {
        list = s->inst_ext;
        n = &s->n_inst_ext;
    }
    TRY(ap_word(p, "a name")); /* any length a word may have (AM_TOK_MAX) */
    int st;
    size_t off;
    /* A struct the headers lack is checked when run (SKIP: the device
       cannot be asked); an unknown member of a known struct is a typo. */
    if (feature && am_feature_find(p->t.text, &st, &off) == AM_FEAT_UNKNOWN)
        return ap_err(p, &p->t, "unknown device feature '%s'", p->t.text);
    if (property && !am_property_lookup(p->t.text, &st, &off))
        return ap_err(p, &p->t, "unknown device property '%s' (known: FloatControlsProperties.<VkBool32 member>)",
                      p->t.text);
    for (int i = 0; i < *n; i++)
        if (!strcmp(list[i], p->t.text)) return ap_eol(p); /* repeated: harmless */
    if (*n >= AM_MAX_FEATURES) return ap_err(p, &p->t, "too many %s", at.text);
    strcpy(list[(*n)++], p->t.text);
    return ap_eol(p);
}

static am_status cmd_set(ap_parser *p)
{
    TRY(ap_keyword(p, "ENGINE_DATA"));
    TRY(ap_word(p, "an engine data name"));
    if (strcmp(p->t.text, "fence_timeout_ms")) return ap_err(p, &p->t, "unknown engine data '%s'", p->t.text);
    uint64_t v;
    TRY(ap_uint_tok(p, "fence_timeout_ms", UINT32_MAX, &v));
    p->s->fence_timeout_ms = (uint32_t)v;
    return ap_eol(p);
}

static am_status statement(ap_parser *p, bool in_repeat);

static am_status cmd_repeat(ap_parser *p)
{
    am_tok at = p->t;
    uint64_t n;
    TRY(ap_uint_tok(p, "the repeat count", AM_MAX_REPEAT, &n));
    if (n == 0) return ap_err(p, &p->t, "REPEAT count must be at least %s", "1");
    TRY(ap_eol(p));
    am_cmd *c = am_script_add_cmd(p->s);
    if (!c) return ap_err(p, &at, "too many commands%s", "");
    int idx = p->s->n_cmds - 1;
    c->kind = AM_CMD_REPEAT;
    c->pos = at.pos;
    c->count = (uint32_t)n;
    for (;;) {
        NEXT(p);
        if (p->t.kind == AM_TOK_EOL) continue;
        if (p->t.kind == AM_TOK_EOF) return am_fail_at(p->res, at.pos, "REPEAT without END");
        if (!strcmp(p->t.text, "END")) break;
        TRY(statement(p, true));
    }
    p->s->cmd[idx].body = (uint32_t)(p->s->n_cmds - idx - 1);
    return ap_eol(p);
}

static am_status statement(ap_parser *p, bool in_repeat)
{
    const char *w = p->t.text;
    if (p->t.too_long) return ap_err(p, &p->t, "unknown command (a %s-character word)", "very long");
    if (!strcmp(w, "RUN")) return ap_cmd_run(p);
    if (!strcmp(w, "EXPECT")) return ap_cmd_expect(p);
    if (!strcmp(w, "COPY")) return ap_cmd_copy(p);
    if (!strcmp(w, "CLEAR") || !strcmp(w, "CLEAR_COLOR") || !strcmp(w, "CLEAR_DEPTH") ||
        !strcmp(w, "CLEAR_STENCIL"))
        return ap_cmd_clear(p);
    if (in_repeat) {
        if (!strcmp(w, "REPEAT")) return ap_err(p, &p->t, "REPEAT cannot be nested%s", "");
        return ap_err(p, &p->t, "'%s' is not allowed inside REPEAT", w);
    }
    if (!strcmp(w, "SHADER")) return cmd_shader(p);
    if (!strcmp(w, "BUFFER")) return cmd_buffer(p);
    if (!strcmp(w, "PIPELINE")) return ap_cmd_pipeline(p, false);
    if (!strcmp(w, "DERIVE_PIPELINE")) return ap_cmd_pipeline(p, true);
    if (!strcmp(w, "REPEAT")) return cmd_repeat(p);
    if (!strcmp(w, "VIRTUAL_FILE")) return cmd_virtual_file(p);
    if (!strcmp(w, "DEVICE_FEATURE") || !strcmp(w, "DEVICE_PROPERTY") || !strcmp(w, "DEVICE_EXTENSION") ||
        !strcmp(w, "INSTANCE_EXTENSION"))
        return requirement(p);
    if (!strcmp(w, "SET")) return cmd_set(p);
    if (!strcmp(w, "IMAGE")) return ap_cmd_image(p);
    if (!strcmp(w, "SAMPLER")) return ap_cmd_sampler(p);
    if (!strcmp(w, "STRUCT")) return ap_skip(p, &p->t, "STRUCT buffers not supported");
    if (!strcmp(w, "DEBUG")) return ap_skip(p, &p->t, "DEBUG (shader debugger) not supported");
    if (!strcmp(w, "END")) return ap_err(p, &p->t, "END without a block to close%s", "");
    return ap_err(p, &p->t, "unknown command '%s'", w);
}

am_status am_parse_amber(const char *src, size_t len, am_script *s, am_result *res)
{
    ap_parser *p = vf_calloc(1, sizeof *p);
    if (!p) return am_fail_at(res, (am_pos){1, 1}, "out of host memory (malloc failed)");
    memset(s, 0, sizeof *s);
    am_lex_init(&p->lx, src, len);
    p->s = s;
    p->res = res;
    am_status st = AM_PASS;
    for (;;) {
        NEXT(p);
        if (p->t.kind == AM_TOK_EOF) break;
        if (p->t.kind == AM_TOK_EOL) continue;
        st = statement(p, false);
        if (st != AM_PASS) break;
    }
    for (int i = 0; i < p->n_vf; i++) free(p->vf[i].text);
    free(p);
    if (st == AM_SKIP) {
        res->status = AM_SKIP;
        res->pos = s->skip_pos;
        snprintf(res->msg, sizeof res->msg, "%s", s->skip);
    }
    return st;
}
