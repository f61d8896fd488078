/* AmberScript PIPELINE / DERIVE_PIPELINE and their bodies: ATTACH, BIND,
   SUBGROUP (the rest of the parser: parse_amber.c). */
#include "parse_amber.h"
#include "parse_util.h"

#include <string.h>

static am_status attach(ap_parser *p, am_pipeline *pl)
{
    int sh = -1;
    TRY(ap_find_shader(p, &sh));
    am_tok st = p->t;
    if (pl->shader >= 0 && pl->shader != sh)
        return ap_err(p, &st, "a compute pipeline takes one shader ('%s' is a second)", st.text);
    pl->shader = sh;
    while (ap_peek_is_word(p)) {
        NEXT(p);
        if (!strcmp(p->t.text, "ENTRY_POINT")) {
            TRY(ap_name(p, "an entry point", pl->entry));
        } else if (!strcmp(p->t.text, "TYPE")) {
            TRY(ap_word(p, "a shader type"));
            if (strcmp(p->t.text, "compute"))
                return ap_skip(p, &p->t, "graphics shaders not supported");
        } else if (!strcmp(p->t.text, "SPECIALIZE")) {
            uint64_t id;
            TRY(ap_uint_tok(p, "the specialization id", UINT32_MAX, &id));
            TRY(ap_keyword(p, "AS"));
            TRY(ap_word(p, "uint32, int32 or float"));
            am_scalar sc;
            if (!strcmp(p->t.text, "uint32"))
                sc = AM_U32;
            else if (!strcmp(p->t.text, "int32"))
                sc = AM_I32;
            else if (!strcmp(p->t.text, "float"))
                sc = AM_F32;
            else
                return ap_err(p, &p->t, "SPECIALIZE takes uint32, int32 or float, not '%s'", p->t.text);
            TRY(ap_word(p, "a value"));
            uint64_t bits;
            TRY(ap_value(p, sc, &bits, NULL));
            int k = 0;
            while (k < pl->n_spec && pl->spec[k].id != id) k++;
            if (k == pl->n_spec) {
                if (pl->n_spec >= AM_MAX_SPECS) return ap_err(p, &p->t, "too many SPECIALIZE%s", "");
                pl->n_spec++;
            }
            pl->spec[k].id = (uint32_t)id;
            pl->spec[k].bits = (uint32_t)bits;
        } else {
            return ap_err(p, &p->t, "unexpected '%s' in ATTACH", p->t.text);
        }
    }
    return ap_eol(p);
}

/* Numbers following a keyword, one per buffer of the binding. */
static am_status per_buffer_list(ap_parser *p, int n, uint64_t *out, bool allow_minus_one)
{
    for (int i = 0; i < n; i++) {
        TRY(ap_word(p, "a value per buffer"));
        if (allow_minus_one && !strcmp(p->t.text, "-1")) {
            out[i] = UINT64_MAX;
            continue;
        }
        if (!am_parse_uint(p->t.text, UINT32_MAX, &out[i]))
            return ap_err(p, &p->t, "'%s' is not a valid offset or range", p->t.text);
    }
    return AM_PASS;
}

/* AS kind [SAMPLER s] of a BIND BUFFER / BUFFER_ARRAY; *push when it
   was AS push_constant (nothing follows). */
static am_status bind_kind(ap_parser *p, am_pipeline *pl, am_binding *b, bool array, bool *push)
{
    static const struct {
        const char *name;
        am_bind_kind kind;
    } kinds[] = {{"storage", AM_BIND_STORAGE},
                 {"uniform", AM_BIND_UNIFORM},
                 {"storage_dynamic", AM_BIND_STORAGE_DYNAMIC},
                 {"uniform_dynamic", AM_BIND_UNIFORM_DYNAMIC},
                 {"storage_image", AM_BIND_STORAGE_IMAGE},
                 {"sampled_image", AM_BIND_SAMPLED_IMAGE},
                 {"combined_image_sampler", AM_BIND_COMBINED_IMAGE_SAMPLER},
                 {"uniform_texel_buffer", AM_BIND_UNIFORM_TEXEL},
                 {"storage_texel_buffer", AM_BIND_STORAGE_TEXEL}};
    TRY(ap_keyword(p, "AS"));
    TRY(ap_word(p, "a buffer type"));
    am_tok kind = p->t;
    if (!strcmp(kind.text, "push_constant")) {
        if (array) return ap_err(p, &kind, "a push_constant cannot be a %s", "BUFFER_ARRAY");
        if (pl->push_buf >= 0) return ap_err(p, &kind, "a pipeline has one push_constant buffer%s", "");
        pl->push_buf = b->buf[0];
        *push = true;
        return AM_PASS;
    }
    if (!strcmp(kind.text, "color") || !strcmp(kind.text, "depth_stencil") || !strcmp(kind.text, "resolve"))
        return ap_skip(p, &kind, "graphics attachments not supported");
    size_t k = 0;
    while (k < sizeof kinds / sizeof *kinds && strcmp(kinds[k].name, kind.text)) k++;
    if (k == sizeof kinds / sizeof *kinds) return ap_err(p, &kind, "unknown buffer type '%s'", kind.text);
    b->kind = kinds[k].kind;
    if (b->kind == AM_BIND_COMBINED_IMAGE_SAMPLER) {
        /* As in Amber, the SAMPLER comes right after the type. */
        NEXT(p);
        if (p->t.kind != AM_TOK_WORD || strcmp(p->t.text, "SAMPLER"))
            return ap_err(p, &p->t, "expecting SAMPLER for combined image sampler, got '%s'", ap_tok_desc(&p->t));
        TRY(ap_find_sampler(p, &b->sampler));
    }
    for (int i = 0; i < b->n; i++)
        if ((am_bind_is_image(b->kind) || b->kind == AM_BIND_UNIFORM_TEXEL || b->kind == AM_BIND_STORAGE_TEXEL) &&
            !p->s->buffer[b->buf[i]].has_fmt)
            return ap_err(p, &kind, "buffer '%s' has no format to be an image or texel buffer",
                          p->s->buffer[b->buf[i]].name);
    return AM_PASS;
}

static am_status bind(ap_parser *p, am_pipeline *pl)
{
    TRY(ap_word(p, "BUFFER, BUFFER_ARRAY or SAMPLER"));
    am_tok what = p->t;
    bool array = !strcmp(what.text, "BUFFER_ARRAY");
    bool sampler = !strcmp(what.text, "SAMPLER") || !strcmp(what.text, "SAMPLER_ARRAY");
    if (strcmp(what.text, "BUFFER") && !array && !sampler)
        return ap_err(p, &what, "expected BUFFER, BUFFER_ARRAY or SAMPLER, got '%s'", what.text);
    if (pl->n_bind >= AM_MAX_BINDINGS) return ap_err(p, &what, "too many bindings%s", "");
    am_binding *b = &pl->bind[pl->n_bind];
    memset(b, 0, sizeof *b);
    b->pos = what.pos;
    b->sampler = -1;
    if (sampler) {
        /* BIND SAMPLER s | SAMPLER_ARRAY s1 s2... DESCRIPTOR_SET x BINDING y */
        bool s_array = what.text[7] == '_';
        b->kind = AM_BIND_SAMPLER;
        do {
            if (b->n >= AM_MAX_ARRAY) return ap_err(p, &p->t, "SAMPLER_ARRAY holds at most %s samplers", "8");
            TRY(ap_find_sampler(p, &b->buf[b->n]));
            b->n++;
        } while (s_array && ap_peek_is_word(p) && !ap_peek_word(p, "DESCRIPTOR_SET") && !ap_peek_word(p, "KERNEL"));
        if (s_array && b->n < 2) return ap_err(p, &p->t, "expecting multiple sampler names for %s", "SAMPLER_ARRAY");
    } else do {
        if (b->n >= AM_MAX_ARRAY) return ap_err(p, &p->t, "BUFFER_ARRAY holds at most %s buffers", "8");
        TRY(ap_find_buffer(p, &b->buf[b->n]));
        b->desc_range[b->n] = UINT64_MAX;
        b->n++;
    } while (array && ap_peek_is_word(p) && !ap_peek_word(p, "AS"));
    if (array && b->n < 1) return ap_err(p, &p->t, "BUFFER_ARRAY needs a buffer%s", "");
    if (!sampler) {
        bool push = false;
        TRY(bind_kind(p, pl, b, array, &push));
        if (push) return ap_eol(p);
    }
    bool dynamic = b->kind == AM_BIND_STORAGE_DYNAMIC || b->kind == AM_BIND_UNIFORM_DYNAMIC;
    bool plain = b->kind <= AM_BIND_UNIFORM_DYNAMIC; /* DESCRIPTOR_OFFSET / RANGE */
    bool image = am_bind_is_image(b->kind);
    bool have_set = false, have_binding = false, have_offset = false;
    while (ap_peek_is_word(p)) {
        NEXT(p);
        am_tok kw = p->t;
        uint64_t v;
        if (!strcmp(kw.text, "DESCRIPTOR_SET")) {
            TRY(ap_uint_tok(p, "DESCRIPTOR_SET", AM_MAX_SET, &v));
            b->set = (uint32_t)v;
            have_set = true;
        } else if (!strcmp(kw.text, "BINDING")) {
            TRY(ap_uint_tok(p, "BINDING", AM_MAX_BINDING, &v));
            b->binding = (uint32_t)v;
            have_binding = true;
        } else if (!strcmp(kw.text, "BASE_MIP_LEVEL") && image) {
            TRY(ap_uint_tok(p, "BASE_MIP_LEVEL", 31, &v));
            for (int i = 0; i < b->n; i++) {
                uint32_t levels = p->s->buffer[b->buf[i]].mip_levels ? p->s->buffer[b->buf[i]].mip_levels : 1;
                if (v >= levels)
                    return ap_err(p, &p->t, "BASE_MIP_LEVEL %s is not below the image's MIP_LEVELS", p->t.text);
            }
            b->base_mip = (uint32_t)v;
        } else if (!strcmp(kw.text, "OFFSET")) {
            if (!dynamic) return ap_err(p, &kw, "OFFSET is for %s buffers", "storage_dynamic / uniform_dynamic");
            TRY(per_buffer_list(p, b->n, b->dyn_offset, false));
            have_offset = true;
        } else if (!strcmp(kw.text, "DESCRIPTOR_OFFSET") && plain) {
            TRY(per_buffer_list(p, b->n, b->desc_offset, false));
        } else if (!strcmp(kw.text, "DESCRIPTOR_RANGE") && plain) {
            TRY(per_buffer_list(p, b->n, b->desc_range, true));
            for (int i = 0; i < b->n; i++)
                if (b->desc_range[i] == 0) return ap_err(p, &p->t, "DESCRIPTOR_RANGE must not be %s", "0");
        } else if (!strcmp(kw.text, "KERNEL")) {
            return ap_skip(p, &kw, "OpenCL kernel arguments not supported");
        } else {
            return ap_err(p, &kw, "unexpected '%s' in BIND", kw.text);
        }
    }
    (void)have_set; /* DESCRIPTOR_SET defaults to 0, as in Amber */
    if (!have_binding) return ap_err(p, &p->t, "BIND needs BINDING%s", "");
    if (dynamic && !have_offset) return ap_err(p, &p->t, "a dynamic buffer needs %s", "OFFSET");
    for (int i = 0; i < pl->n_bind; i++)
        if (pl->bind[i].set == b->set && pl->bind[i].binding == b->binding)
            return ap_err(p, &what, "DESCRIPTOR_SET %s BINDING is already bound", "and");
    pl->n_bind++;
    return ap_eol(p);
}

static am_status on_off(ap_parser *p, bool *out)
{
    TRY(ap_word(p, "on or off"));
    if (!strcmp(p->t.text, "on"))
        *out = true;
    else if (!strcmp(p->t.text, "off"))
        *out = false;
    else
        return ap_err(p, &p->t, "expected on or off, got '%s'", p->t.text);
    return ap_eol(p);
}

static am_status subgroup(ap_parser *p, am_pipeline *pl)
{
    int sh = -1;
    am_tok at = p->t;
    TRY(ap_find_shader(p, &sh));
    if (sh != pl->shader) return ap_err(p, &p->t, "shader '%s' is not attached to this pipeline", p->t.text);
    TRY(ap_eol(p));
    for (;;) {
        NEXT(p);
        if (p->t.kind == AM_TOK_EOL) continue;
        if (p->t.kind == AM_TOK_EOF) return am_fail_at(p->res, at.pos, "SUBGROUP without END");
        if (!strcmp(p->t.text, "END")) return ap_eol(p);
        if (!strcmp(p->t.text, "FULLY_POPULATED")) {
            TRY(on_off(p, &pl->sg_full));
        } else if (!strcmp(p->t.text, "VARYING_SIZE")) {
            TRY(on_off(p, &pl->sg_varying));
        } else if (!strcmp(p->t.text, "REQUIRED_SIZE")) {
            TRY(ap_word(p, "a subgroup size, MIN or MAX"));
            uint64_t v;
            if (!strcmp(p->t.text, "MIN"))
                pl->sg_required = AM_SG_MIN;
            else if (!strcmp(p->t.text, "MAX"))
                pl->sg_required = AM_SG_MAX;
            else if (am_parse_uint(p->t.text, 128, &v) && v && !(v & (v - 1)))
                pl->sg_required = (uint32_t)v;
            else
                return ap_err(p, &p->t, "REQUIRED_SIZE must be a power of two up to 128, MIN or MAX, not '%s'",
                           p->t.text);
            TRY(ap_eol(p));
        } else {
            return ap_err(p, &p->t, "unexpected '%s' in SUBGROUP", p->t.text);
        }
    }
}

/* A pass flag as spirv-opt takes it ("--graphics-robust-access",
   "--scalar-replacement=100"): '--', then letters, digits and '-', and an
   optional '=' value without blanks or path separators. The flags become
   arguments of spirv-opt, so nothing that could name a file (-o, -Oconfig)
   gets through. */
static bool pass_flag_ok(const char *f)
{
    if (strncmp(f, "--", 2) || !f[2]) return false;
    const char *q = f + 2;
    for (; *q && *q != '='; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= '0' && *q <= '9') || *q == '-')) return false;
    if (*q == '=')
        for (q++; *q; q++)
            if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
                  *q == '-' || *q == '_' || *q == ',' || *q == ':' || *q == '.'))
                return false;
    return true;
}

/* SHADER_OPTIMIZATION shader NL flag... END: the spirv-opt passes Amber
   runs on that shader for this pipeline. */
static am_status shader_optimization(ap_parser *p, am_pipeline *pl)
{
    am_tok at = p->t;
    int sh;
    TRY(ap_find_shader(p, &sh));
    if (sh != pl->shader) /* as in Amber: the shader must be attached first */
        return ap_err(p, &p->t, "SHADER_OPTIMIZATION for '%s', which is not the attached shader", p->t.text);
    TRY(ap_eol(p));
    pl->n_opt = 0;
    for (;;) {
        NEXT(p);
        if (p->t.kind == AM_TOK_EOL) continue;
        if (p->t.kind == AM_TOK_EOF) return am_fail_at(p->res, at.pos, "SHADER_OPTIMIZATION without END");
        if (!strcmp(p->t.text, "END")) return ap_eol(p);
        if (!pass_flag_ok(p->t.text) || strlen(p->t.text) >= AM_OPT_FLAG_MAX)
            return ap_err(p, &p->t, "'%s' is not a spirv-opt pass flag", p->t.text);
        if (pl->n_opt >= AM_MAX_OPT_FLAGS) return ap_err(p, &p->t, "more than %s optimization flags", "16");
        strcpy(pl->opt[pl->n_opt++], p->t.text);
    }
}

am_status ap_cmd_pipeline(ap_parser *p, bool derive)
{
    am_tok at = p->t;
    am_script *s = p->s;
    if (s->n_pipelines >= AM_MAX_PIPELINES) return ap_err(p, &at, "more than %s pipelines", "64");
    am_pipeline *pl = &s->pipeline[s->n_pipelines];
    char nm[AM_NAME_MAX];
    if (!derive) {
        TRY(ap_word(p, "compute or graphics"));
        if (!strcmp(p->t.text, "graphics")) return ap_skip(p, &p->t, "graphics pipelines not supported");
        if (!strcmp(p->t.text, "raytracing")) return ap_skip(p, &p->t, "ray tracing pipelines not supported");
        if (strcmp(p->t.text, "compute")) return ap_err(p, &p->t, "unknown pipeline type '%s'", p->t.text);
    }
    TRY(ap_name(p, "a pipeline name", nm));
    am_tok name_tok = p->t;
    for (int i = 0; i < s->n_pipelines; i++)
        if (!strcmp(s->pipeline[i].name, nm)) return ap_err(p, &name_tok, "pipeline '%s' already defined", nm);
    if (derive) {
        TRY(ap_keyword(p, "FROM"));
        int parent = 0;
        TRY(ap_find_pipeline(p, &parent));
        *pl = s->pipeline[parent];
    } else {
        memset(pl, 0, sizeof *pl);
        pl->shader = -1;
        pl->push_buf = -1;
        strcpy(pl->entry, "main");
    }
    strcpy(pl->name, nm);
    pl->pos = at.pos;
    TRY(ap_eol(p));
    for (;;) {
        NEXT(p);
        if (p->t.kind == AM_TOK_EOL) continue;
        if (p->t.kind == AM_TOK_EOF) return am_fail_at(p->res, at.pos, "PIPELINE without END");
        const char *w = p->t.text;
        if (!strcmp(w, "END")) break;
        if (!strcmp(w, "ATTACH"))
            TRY(attach(p, pl));
        else if (!strcmp(w, "BIND"))
            TRY(bind(p, pl));
        else if (!strcmp(w, "SUBGROUP"))
            TRY(subgroup(p, pl));
        else if (!strcmp(w, "SHADER_OPTIMIZATION"))
            TRY(shader_optimization(p, pl));
        else if (!strcmp(w, "COMPILE_OPTIONS"))
            return ap_skip(p, &p->t, "OpenCL C compile options not supported");
        else if (!strcmp(w, "SET"))
            return ap_skip(p, &p->t, "OpenCL kernel arguments not supported");
        else if (!strcmp(w, "FRAMEBUFFER_SIZE") || !strcmp(w, "VERTEX_DATA") || !strcmp(w, "INDEX_DATA") ||
                 !strcmp(w, "POLYGON_MODE") || !strcmp(w, "DEPTH") || !strcmp(w, "STENCIL") ||
                 !strcmp(w, "BLEND") || !strcmp(w, "VIEWPORT") || !strcmp(w, "PATCH_CONTROL_POINTS"))
            return ap_err(p, &p->t, "'%s' is for graphics pipelines", w);
        else
            return ap_err(p, &p->t, "unknown pipeline command '%s'", w);
    }
    TRY(ap_eol(p));
    if (pl->shader < 0) return am_fail_at(p->res, at.pos, "pipeline '%s' has no ATTACHed shader", nm);
    s->n_pipelines++;
    return AM_PASS;
}
