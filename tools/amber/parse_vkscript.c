/* VkScript parser (VkRunner / Amber "vk_script"), compute subset.
 *
 * A VkScript file is a list of [sections]. Compute tests use [require],
 * [compute shader] (GLSL), [compute shader spirv] (assembly) and [test].
 * The test section is turned into the same commands AmberScript gives:
 * each ssbo / ubo binding becomes a buffer bound to every dispatch, data
 * writes become WRITE commands (they happen between dispatches, in
 * order), push constants a hidden buffer, probes EXPECTs. */
#include "am.h"
#include "util/fault.h"
#include "lex.h"
#include "parse_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { SEC_NONE, SEC_REQUIRE, SEC_SHADER, SEC_TEST, SEC_COMMENT } section;

typedef struct vk_parser {
    am_script *s;
    am_result *res;
    am_lex lx;                   /* over one line */
    am_tok t;
    am_layout ssbo_layout, ubo_layout, push_layout;
    double tol[4];
    bool tol_pct[4];
    int n_tol;
    char entry[AM_NAME_MAX];
    int push_buf;
    bool ubo[AM_MAX_BUFFERS];    /* per buffer: bound as a UBO */
    uint32_t set[AM_MAX_BUFFERS], binding[AM_MAX_BUFFERS];
} vk_parser;

#define TRY(x)                                                                                     \
    do {                                                                                           \
        am_status st_ = (x);                                                                       \
        if (st_ != AM_PASS) return st_;                                                            \
    } while (0)

static am_status fail(vk_parser *p, am_pos pos, const char *fmt, const char *arg)
{
    char m[512];
    snprintf(m, sizeof m, fmt, arg);
    return am_fail_at(p->res, pos, "%s", m);
}

static am_status skip(vk_parser *p, am_pos pos, const char *why)
{
    snprintf(p->s->skip, sizeof p->s->skip, "%s", why);
    p->s->skip_pos = pos;
    return AM_SKIP;
}

static bool next_word(vk_parser *p)
{
    am_lex_next(&p->lx, &p->t);
    return p->t.kind == AM_TOK_WORD;
}

static am_status word(vk_parser *p, const char *what)
{
    if (!next_word(p)) return fail(p, p->t.pos, "expected %s", what);
    if (p->t.too_long) return fail(p, p->t.pos, "%s is too long", what);
    return AM_PASS;
}

static am_status end_of_line(vk_parser *p)
{
    if (next_word(p)) return fail(p, p->t.pos, "unexpected '%s'", p->t.text);
    return AM_PASS;
}

static am_status uint_word(vk_parser *p, const char *what, uint64_t max, uint64_t *out)
{
    TRY(word(p, what));
    if (!am_parse_uint(p->t.text, max, out)) return fail(p, p->t.pos, "'%s' is not a valid number here", p->t.text);
    return AM_PASS;
}

/* "3" or "1:3" (set:binding); finds or creates the buffer. */
static am_status binding_buffer(vk_parser *p, bool ubo, int *out)
{
    TRY(word(p, "a binding"));
    am_tok bt = p->t;
    uint64_t set = 0, binding;
    char *colon = strchr(bt.text, ':');
    if (colon) {
        *colon = '\0';
        if (!am_parse_uint(bt.text, AM_MAX_SET, &set) || !am_parse_uint(colon + 1, AM_MAX_BINDING, &binding))
            return fail(p, bt.pos, "bad set:binding%s", "");
    } else if (!am_parse_uint(bt.text, AM_MAX_BINDING, &binding)) {
        return fail(p, bt.pos, "'%s' is not a binding number", bt.text);
    }
    am_script *s = p->s;
    for (int i = 0; i < s->n_buffers; i++)
        if (i != p->push_buf && p->set[i] == set && p->binding[i] == binding) {
            if (p->ubo[i] != ubo) return fail(p, bt.pos, "binding used both as ssbo and as %s", "ubo");
            *out = i;
            return AM_PASS;
        }
    if (s->n_buffers >= AM_MAX_BUFFERS) return fail(p, bt.pos, "too many buffers%s", "");
    am_buffer *b = &s->buffer[s->n_buffers];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s%u:%u", ubo ? "ubo" : "ssbo", (unsigned)set, (unsigned)binding);
    b->fmt.scalar = AM_U8;
    b->fmt.layout = AM_PACKED;
    am_fmt_finish(&b->fmt);
    b->has_fmt = true;
    b->pos = bt.pos;
    p->ubo[s->n_buffers] = ubo;
    p->set[s->n_buffers] = (uint32_t)set;
    p->binding[s->n_buffers] = (uint32_t)binding;
    *out = s->n_buffers++;
    return AM_PASS;
}

static am_status type_word(vk_parser *p, am_layout layout, am_fmt *f)
{
    TRY(word(p, "a type"));
    if (!am_parse_glsl_type(p->t.text, f)) return fail(p, p->t.pos, "unknown type '%s'", p->t.text);
    f->layout = layout;
    /* Consecutive values fill consecutive elements at the element's own
       size, as Amber lays them out: no std140 array rounding, so a float
       after a float is 4 bytes on even in a std140 ubo. */
    f->array = false;
    am_fmt_finish(f);
    return AM_PASS;
}

/* The values of a data or probe command: rest of the line. */
static am_status values(vk_parser *p, am_cmd *c, am_pos at)
{
    size_t cap = 0;
    while (next_word(p)) {
        if (c->n_values == cap) {
            size_t nc = cap ? cap * 2 : 16;
            uint64_t *v = vf_realloc(c->values, nc * sizeof *v);
            if (!v) return fail(p, p->t.pos, "out of host memory (malloc failed)%s", "");
            c->values = v;
            cap = nc;
        }
        am_num n;
        char why[160];
        if (!am_num_parse(p->t.text, &n)) return fail(p, p->t.pos, "'%s' is not a number", p->t.text);
        if (!am_num_encode(&n, c->fmt.scalar, &c->values[c->n_values], why, sizeof why)) {
            char m[AM_TOK_MAX + 200];
            snprintf(m, sizeof m, "'%s' %s", p->t.text, why);
            return fail(p, p->t.pos, "%s", m);
        }
        c->n_values++;
    }
    if (!c->n_values) return fail(p, at, "no values given%s", "");
    return AM_PASS;
}

/* Byte extent of writing/reading n values of fmt at offset. */
static uint64_t extent(const am_cmd *c)
{
    uint32_t last = c->n_values - 1;
    return c->offset + (uint64_t)(last / c->fmt.n_comp) * c->fmt.stride +
           c->fmt.comp_off[last % c->fmt.n_comp] + (uint64_t)am_scalar_size(c->fmt.scalar);
}

static am_status data_write(vk_parser *p, int buf, am_layout layout, am_pos at)
{
    am_cmd *c = am_script_add_cmd(p->s);
    if (!c) return fail(p, at, "too many commands%s", "");
    c->kind = AM_CMD_WRITE;
    c->pos = at;
    c->buf = buf;
    TRY(type_word(p, layout, &c->fmt));
    TRY(uint_word(p, "an offset", AM_MAX_BUFFER_BYTES, &c->offset));
    TRY(values(p, c, at));
    uint64_t end = extent(c);
    if (end > AM_MAX_BUFFER_BYTES) return fail(p, at, "write past %s", "1 GiB");
    am_buffer *b = &p->s->buffer[buf];
    if (end > b->min_bytes) b->min_bytes = end;
    return AM_PASS;
}

static am_status buffer_cmd(vk_parser *p, bool ubo, am_pos at)
{
    int buf;
    TRY(binding_buffer(p, ubo, &buf));
    TRY(word(p, "a size or subdata"));
    if (!strcmp(p->t.text, "subdata")) return data_write(p, buf, ubo ? p->ubo_layout : p->ssbo_layout, at);
    if (!strcmp(p->t.text, "layout")) return fail(p, p->t.pos, "'layout' goes before the binding%s", "");
    uint64_t size;
    if (!am_parse_uint(p->t.text, AM_MAX_BUFFER_BYTES, &size) || !size)
        return fail(p, p->t.pos, "expected a size in bytes or subdata, got '%s'", p->t.text);
    am_buffer *b = &p->s->buffer[buf];
    if (size > b->min_bytes) b->min_bytes = size;
    return end_of_line(p);
}

static am_status layout_cmd(vk_parser *p, am_layout *which, int n)
{
    am_layout l = AM_STD430;
    bool have = false;
    while (next_word(p)) {
        if (!strcmp(p->t.text, "std140")) {
            l = AM_STD140;
            have = true;
        } else if (!strcmp(p->t.text, "std430")) {
            l = AM_STD430;
            have = true;
        } else if (!strcmp(p->t.text, "row_major")) {
            return skip(p, p->t.pos, "row_major matrix layout not supported");
        } else if (strcmp(p->t.text, "column_major")) {
            return fail(p, p->t.pos, "unknown layout '%s'", p->t.text);
        }
    }
    if (!have) return AM_PASS;
    for (int i = 0; i < n; i++) which[i] = l;
    return AM_PASS;
}

static int pipeline_for_entry(vk_parser *p)
{
    am_script *s = p->s;
    for (int i = 0; i < s->n_pipelines; i++)
        if (!strcmp(s->pipeline[i].entry, p->entry)) return i;
    if (s->n_pipelines >= AM_MAX_PIPELINES) return -1;
    am_pipeline *pl = &s->pipeline[s->n_pipelines];
    memset(pl, 0, sizeof *pl);
    snprintf(pl->name, sizeof pl->name, "compute:%.48s", p->entry);
    strcpy(pl->entry, p->entry);
    pl->shader = 0;
    pl->push_buf = -1;
    return s->n_pipelines++;
}

static am_status probe(vk_parser *p, am_pos at)
{
    TRY(word(p, "ssbo"));
    if (strcmp(p->t.text, "ssbo")) return skip(p, p->t.pos, "graphics probes not supported");
    am_cmd *c = am_script_add_cmd(p->s);
    if (!c) return fail(p, at, "too many commands%s", "");
    c->kind = AM_CMD_EXPECT;
    c->pos = at;
    c->expect_no = ++p->s->n_expects;
    TRY(type_word(p, p->ssbo_layout, &c->fmt));
    TRY(binding_buffer(p, false, &c->buf));
    TRY(uint_word(p, "an offset", AM_MAX_BUFFER_BYTES, &c->offset));
    TRY(word(p, "a comparison"));
    static const char *ops[] = {"==", "!=", "<", "<=", ">", ">=", "~="};
    int op = -1;
    for (int i = 0; i < 7; i++)
        if (!strcmp(p->t.text, ops[i])) op = i;
    if (op < 0) return fail(p, p->t.pos, "unknown comparison '%s'", p->t.text);
    c->cmp = (am_cmp)op;
    if (c->cmp == AM_CMP_APPROX) {
        c->n_tol = p->n_tol;
        memcpy(c->tol, p->tol, sizeof c->tol);
        memcpy(c->tol_pct, p->tol_pct, sizeof c->tol_pct);
    }
    return values(p, c, at);
}

static am_status test_line(vk_parser *p)
{
    am_tok first = p->t;
    const char *w = first.text;
    am_pos at = first.pos;
    if (!strcmp(w, "ssbo")) {
        if (am_lex_peek(&p->lx)->kind == AM_TOK_WORD && !strcmp(am_lex_peek(&p->lx)->text, "layout")) {
            am_lex_next(&p->lx, &p->t);
            return layout_cmd(p, &p->ssbo_layout, 1);
        }
        return buffer_cmd(p, false, at);
    }
    if (!strcmp(w, "ubo")) {
        if (am_lex_peek(&p->lx)->kind == AM_TOK_WORD && !strcmp(am_lex_peek(&p->lx)->text, "layout")) {
            am_lex_next(&p->lx, &p->t);
            return layout_cmd(p, &p->ubo_layout, 1);
        }
        return buffer_cmd(p, true, at);
    }
    if (!strcmp(w, "uniform") || !strcmp(w, "push")) {
        const am_tok *nx = am_lex_peek(&p->lx);
        if (nx->kind == AM_TOK_WORD && !strcmp(nx->text, "ubo")) {
            am_lex_next(&p->lx, &p->t);
            int buf;
            TRY(binding_buffer(p, true, &buf));
            return data_write(p, buf, p->ubo_layout, at);
        }
        if (nx->kind == AM_TOK_WORD && !strcmp(nx->text, "layout")) {
            am_lex_next(&p->lx, &p->t);
            return layout_cmd(p, &p->push_layout, 1);
        }
        am_script *s = p->s;
        if (p->push_buf < 0) {
            if (s->n_buffers >= AM_MAX_BUFFERS) return fail(p, at, "too many buffers%s", "");
            am_buffer *b = &s->buffer[s->n_buffers];
            memset(b, 0, sizeof *b);
            strcpy(b->name, "push constants");
            b->fmt.scalar = AM_U8;
            b->fmt.layout = AM_PACKED;
            am_fmt_finish(&b->fmt);
            b->has_fmt = true;
            b->pos = at;
            p->push_buf = s->n_buffers++;
        }
        return data_write(p, p->push_buf, p->push_layout, at);
    }
    if (!strcmp(w, "layout")) {
        am_layout *all[3] = {&p->ssbo_layout, &p->ubo_layout, &p->push_layout};
        am_layout l = p->ssbo_layout;
        TRY(layout_cmd(p, &l, 1));
        for (int i = 0; i < 3; i++) *all[i] = l;
        return AM_PASS;
    }
    if (!strcmp(w, "compute")) {
        TRY(word(p, "workgroup counts or entrypoint"));
        if (!strcmp(p->t.text, "entrypoint")) {
            TRY(word(p, "an entry point name"));
            if (strlen(p->t.text) >= AM_NAME_MAX) return fail(p, p->t.pos, "name too long%s", "");
            strcpy(p->entry, p->t.text);
            return end_of_line(p);
        }
        uint64_t g[3];
        if (!am_parse_uint(p->t.text, UINT32_MAX, &g[0])) return fail(p, p->t.pos, "'%s' is not a workgroup count", p->t.text);
        TRY(uint_word(p, "a workgroup count", UINT32_MAX, &g[1]));
        TRY(uint_word(p, "a workgroup count", UINT32_MAX, &g[2]));
        TRY(end_of_line(p));
        int pl = pipeline_for_entry(p);
        am_cmd *c = pl < 0 ? NULL : am_script_add_cmd(p->s);
        if (!c) return fail(p, at, "too many commands%s", "");
        c->kind = AM_CMD_RUN;
        c->pos = at;
        c->pipeline = pl;
        for (int i = 0; i < 3; i++) c->groups[i] = (uint32_t)g[i];
        return AM_PASS;
    }
    if (!strcmp(w, "tolerance")) {
        p->n_tol = 0;
        while (next_word(p)) {
            char txt[AM_TOK_MAX];
            snprintf(txt, sizeof txt, "%s", p->t.text);
            size_t l = strlen(txt);
            bool pct = l > 1 && txt[l - 1] == '%';
            if (pct) txt[l - 1] = '\0';
            am_num n;
            if (!am_num_parse(txt, &n) || n.neg) return fail(p, p->t.pos, "bad tolerance '%s'", p->t.text);
            if (p->n_tol >= 4) return fail(p, p->t.pos, "at most four tolerances%s", "");
            p->tol[p->n_tol] = n.f;
            p->tol_pct[p->n_tol++] = pct;
        }
        if (!p->n_tol) return fail(p, at, "tolerance needs a value%s", "");
        return AM_PASS;
    }
    if (!strcmp(w, "probe")) return probe(p, at);
    static const char *gfx[] = {"draw", "clear", "relative", "vertex", "depth", "stencil", "topology", "patch"};
    for (size_t i = 0; i < sizeof gfx / sizeof *gfx; i++)
        if (!strcmp(w, gfx[i])) return skip(p, at, "graphics commands not supported");
    return fail(p, at, "unknown test command '%s'", w);
}

static am_status require_line(vk_parser *p)
{
    am_tok t = p->t;
    am_script *s = p->s;
    if (!strcmp(t.text, "vulkan")) {
        TRY(word(p, "a version"));
        unsigned a = 0, b = 0, c = 0;
        char extra;
        int n = sscanf(p->t.text, "%u.%u.%u%c", &a, &b, &c, &extra);
        if (n < 2 || n > 3 || a > 9 || b > 99) return fail(p, p->t.pos, "bad Vulkan version '%s'", p->t.text);
        s->min_api = (a << 22) | (b << 12) | c; /* VK_MAKE_API_VERSION(0, a, b, c) */
        return end_of_line(p);
    }
    if (!strcmp(t.text, "subgroup_size")) {
        uint64_t v;
        TRY(uint_word(p, "a subgroup size", 128, &v));
        if (!v || (v & (v - 1))) return fail(p, p->t.pos, "subgroup_size must be a power of two%s", "");
        s->subgroup_size = (uint32_t)v;
        return end_of_line(p);
    }
    if (!strcmp(t.text, "framebuffer") || !strcmp(t.text, "depthstencil") || !strcmp(t.text, "fbsize"))
        return AM_PASS; /* graphics-only: irrelevant to compute */
    if (!strncmp(t.text, "VK_", 3)) {
        if (strlen(t.text) >= AM_REQ_NAME_MAX || s->n_dev_ext >= AM_MAX_FEATURES)
            return fail(p, t.pos, "too many or too long extension names%s", "");
        strcpy(s->dev_ext[s->n_dev_ext++], t.text);
        return end_of_line(p);
    }
    char canon[AM_REQ_NAME_MAX * 2];
    if (!am_feature_canonical(t.text, canon, sizeof canon) || strlen(canon) >= AM_REQ_NAME_MAX)
        return fail(p, t.pos, "unknown requirement '%s'", t.text);
    if (s->n_features >= AM_MAX_FEATURES) return fail(p, t.pos, "too many features%s", "");
    strcpy(s->feature[s->n_features++], canon);
    return end_of_line(p);
}

/* [section name] from a trimmed line. */
static am_status header(vk_parser *p, const char *line, size_t n, am_pos at, section *sec, am_src_kind *kind)
{
    if (n < 2 || line[n - 1] != ']') return fail(p, at, "unterminated section header%s", "");
    char name[64];
    size_t k = n - 2 < sizeof name - 1 ? n - 2 : sizeof name - 1;
    memcpy(name, line + 1, k);
    name[k] = '\0';
    if (!strcmp(name, "require")) *sec = SEC_REQUIRE;
    else if (!strcmp(name, "test")) *sec = SEC_TEST;
    else if (!strcmp(name, "comment")) *sec = SEC_COMMENT;
    else if (!strcmp(name, "compute shader")) { *sec = SEC_SHADER; *kind = AM_SRC_GLSL; }
    else if (!strcmp(name, "compute shader spirv")) { *sec = SEC_SHADER; *kind = AM_SRC_SPIRV_ASM; }
    else if (!strcmp(name, "compute shader binary")) { *sec = SEC_SHADER; *kind = AM_SRC_SPIRV_HEX; }
    else if (strstr(name, "shader") || !strcmp(name, "vertex data") || !strcmp(name, "indices"))
        return skip(p, at, "graphics shaders and vertex data not supported");
    else
        return fail(p, at, "unknown section [%s]", name);
    return AM_PASS;
}

static am_status finish_shader(vk_parser *p, const char *src, size_t start, size_t end, am_src_kind kind,
                               int first_line, am_pos at)
{
    am_script *s = p->s;
    if (s->n_shaders) return fail(p, at, "a second compute shader%s", "");
    am_shader *sh = &s->shader[0];
    memset(sh, 0, sizeof *sh);
    strcpy(sh->name, "compute");
    sh->kind = kind;
    sh->pos = at;
    sh->source_line = first_line;
    sh->source = vf_malloc(end - start + 1);
    if (!sh->source) return fail(p, at, "out of host memory (malloc failed)%s", "");
    memcpy(sh->source, src + start, end - start);
    sh->source[end - start] = '\0';
    for (size_t i = 0; i < end - start; i++)
        if (!sh->source[i]) sh->source[i] = ' ';
    s->n_shaders = 1;
    return AM_PASS;
}

/* Does the line src[i..e) end in a line continuation: a '\' word right
   before the newline (or "\r\n"), as Amber's tokenizer takes it? A '\'
   inside a comment is not one: the comment runs to the end of the line. */
static bool continued(const char *src, size_t i, size_t e)
{
    size_t b = e;
    if (b > i && src[b - 1] == '\r') b--;
    if (b == i || src[b - 1] != '\\') return false;
    if (b - 1 > i && src[b - 2] != ' ' && src[b - 2] != '\t') return false; /* part of a word */
    for (size_t k = i; k < b - 1; k++)
        if (src[k] == '#' && (k == i || src[k - 1] == ' ' || src[k - 1] == '\t')) return false;
    return true;
}

static am_status parse_lines(vk_parser *p, const char *src, size_t len)
{
    section sec = SEC_NONE;
    am_src_kind kind = AM_SRC_GLSL;
    size_t shader_start = 0;
    int shader_line = 0;
    am_pos shader_pos = {0, 0};
    int line = 1;
    for (size_t i = 0; i <= len;) {
        size_t e = i;
        while (e < len && src[e] != '\n') e++;
        /* trimmed view of the line */
        size_t a = i, b = e;
        while (a < b && (src[a] == ' ' || src[a] == '\t' || src[a] == '\r')) a++;
        while (b > a && (src[b - 1] == ' ' || src[b - 1] == '\t' || src[b - 1] == '\r')) b--;
        am_pos at = {line, (int)(a - i) + 1};
        bool is_header = a < b && src[a] == '[';
        if (is_header || e >= len) {
            if (sec == SEC_SHADER) {
                size_t stop = is_header ? i : len;
                TRY(finish_shader(p, src, shader_start, stop, kind, shader_line, shader_pos));
            }
        }
        if (is_header) {
            TRY(header(p, src + a, b - a, at, &sec, &kind));
            if (sec == SEC_SHADER) {
                shader_start = e < len ? e + 1 : len;
                shader_line = line + 1;
                shader_pos = at;
                if (e >= len) TRY(finish_shader(p, src, len, len, kind, shader_line, shader_pos));
            }
        } else if (sec != SEC_SHADER && sec != SEC_COMMENT && a < b && src[a] != '#') {
            if (sec == SEC_NONE) return fail(p, at, "expected a [section] header%s", "");
            /* Continued lines are one command; the lexer skips each
               "\ newline" and counts the lines, so positions stay right. */
            int joined = 0;
            for (size_t seg = i; e < len && continued(src, seg, e); joined++) {
                seg = e + 1;
                e = seg;
                while (e < len && src[e] != '\n') e++;
            }
            am_lex_init(&p->lx, src + i, e - i);
            p->lx.line = line;
            am_lex_next(&p->lx, &p->t);
            if (p->t.kind == AM_TOK_WORD) {
                if (p->t.too_long) return fail(p, p->t.pos, "word too long%s", "");
                TRY(sec == SEC_REQUIRE ? require_line(p) : test_line(p));
            }
            line += joined;
        }
        line++;
        i = e + 1;
    }
    return AM_PASS;
}

am_status am_parse_vkscript(const char *src, size_t len, am_script *s, am_result *res)
{
    memset(s, 0, sizeof *s);
    s->vkscript = true;
    vk_parser *p = vf_calloc(1, sizeof *p);
    if (!p) return am_fail_at(res, (am_pos){1, 1}, "out of host memory (malloc failed)");
    p->s = s;
    p->res = res;
    p->ssbo_layout = AM_STD430;
    p->ubo_layout = AM_STD140;
    p->push_layout = AM_STD430;
    p->n_tol = 1;
    p->tol[0] = 0.01; /* VkRunner's default for ~= */
    p->push_buf = -1;
    strcpy(p->entry, "main");
    am_status st = parse_lines(p, src, len);
    if (st == AM_PASS && s->n_pipelines && !s->n_shaders)
        st = am_fail_at(res, s->cmd[0].pos, "compute without a [compute shader] section");
    if (st == AM_PASS) {
        /* Every buffer is bound to every dispatch, as VkRunner does. */
        for (int k = 0; k < s->n_pipelines; k++) {
            am_pipeline *pl = &s->pipeline[k];
            pl->push_buf = p->push_buf;
            for (int i = 0; i < s->n_buffers && st == AM_PASS; i++) {
                if (i == p->push_buf) continue;
                if (pl->n_bind >= AM_MAX_BINDINGS) {
                    st = am_fail_at(res, s->buffer[i].pos, "too many bindings");
                    break;
                }
                am_binding *b = &pl->bind[pl->n_bind++];
                memset(b, 0, sizeof *b);
                b->kind = p->ubo[i] ? AM_BIND_UNIFORM : AM_BIND_STORAGE;
                b->set = p->set[i];
                b->binding = p->binding[i];
                b->n = 1;
                b->buf[0] = i;
                b->desc_range[0] = UINT64_MAX;
                b->pos = s->buffer[i].pos;
            }
        }
    }
    free(p);
    if (st == AM_SKIP) {
        res->status = AM_SKIP;
        res->pos = s->skip_pos;
        snprintf(res->msg, sizeof res->msg, "%s", s->skip);
    }
    return st;
}
