/* Tokenizer: see lex.h. */
#include "lex.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

void am_lex_init(am_lex *l, const char *src, size_t len)
{
    memset(l, 0, sizeof *l);
    l->src = src;
    l->len = len;
    l->line = 1;
    l->col = 1;
}

am_pos am_lex_here(const am_lex *l)
{
    return (am_pos){l->line, l->col};
}

static void advance(am_lex *l)
{
    if (l->src[l->i] == '\n') {
        l->line++;
        l->col = 1;
    } else {
        l->col++;
    }
    l->i++;
}

/* NUL bytes are treated as blanks: a hostile file cannot end a word early
   in a way the messages would hide. */
static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v' || c == '\0';
}

static void lex_scan(am_lex *l, am_tok *t)
{
    for (;;) {
        while (l->i < l->len && is_blank(l->src[l->i])) advance(l);
        if (l->i >= l->len) break;
        char c = l->src[l->i];
        if (c == '#') {
            while (l->i < l->len && l->src[l->i] != '\n') advance(l);
            continue;
        }
        if (c == '\\' && l->i + 1 < l->len &&
            (l->src[l->i + 1] == '\n' || (l->src[l->i + 1] == '\r' && l->i + 2 < l->len &&
                                          l->src[l->i + 2] == '\n'))) {
            while (l->src[l->i] != '\n') advance(l);
            advance(l);
            continue;
        }
        break;
    }
    t->pos = am_lex_here(l);
    t->text[0] = '\0';
    t->too_long = false;
    if (l->i >= l->len) {
        t->kind = AM_TOK_EOF;
        return;
    }
    if (l->src[l->i] == '\n') {
        t->kind = AM_TOK_EOL;
        advance(l);
        return;
    }
    t->kind = AM_TOK_WORD;
    size_t n = 0;
    while (l->i < l->len && !is_blank(l->src[l->i]) && l->src[l->i] != '\n' && l->src[l->i] != '#') {
        if (n + 1 < AM_TOK_MAX)
            t->text[n++] = l->src[l->i];
        else
            t->too_long = true;
        advance(l);
    }
    t->text[n] = '\0';
}

void am_lex_next(am_lex *l, am_tok *t)
{
    if (l->has_peek) {
        *t = l->peek;
        l->has_peek = false;
        return;
    }
    lex_scan(l, t);
}

const am_tok *am_lex_peek(am_lex *l)
{
    if (!l->has_peek) {
        lex_scan(l, &l->peek);
        l->has_peek = true;
    }
    return &l->peek;
}

void am_lex_skip_line(am_lex *l)
{
    if (l->has_peek) {
        l->has_peek = false;
        if (l->peek.kind != AM_TOK_WORD) return; /* EOL already consumed, or EOF */
    }
    while (l->i < l->len && l->src[l->i] != '\n') advance(l);
    if (l->i < l->len) advance(l);
}

/* First word of the line starting at i, trimmed, compared with `end`. */
static bool line_is_end(const char *s, size_t i, size_t len, const char *end)
{
    while (i < len && is_blank(s[i])) i++;
    size_t n = strlen(end);
    if (len - i < n || memcmp(s + i, end, n) != 0) return false;
    i += n;
    return i >= len || is_blank(s[i]) || s[i] == '\n' || s[i] == '#';
}

char *am_lex_raw_until_end(am_lex *l, const char *end, int *first_line, bool *eof)
{
    *eof = false;
    /* A pending peeked token means the caller already looked past the
       header line's end; only an EOL peek can be honoured here. */
    if (l->has_peek) {
        l->has_peek = false;
        if (l->peek.kind == AM_TOK_WORD) am_lex_skip_line(l);
        if (l->peek.kind == AM_TOK_EOF) {
            *eof = true;
            return NULL;
        }
    }
    *first_line = l->line;
    size_t start = l->i;
    for (;;) {
        if (l->i >= l->len) {
            *eof = true;
            return NULL;
        }
        size_t line_start = l->i;
        if (line_is_end(l->src, line_start, l->len, end)) {
            size_t n = line_start - start;
            char *out = vf_malloc(n + 1);
            if (!out) return NULL;
            memcpy(out, l->src + start, n);
            out[n] = '\0';
            /* NUL bytes would silently cut the shader short. */
            for (size_t k = 0; k < n; k++)
                if (out[k] == '\0') out[k] = ' ';
            am_lex_skip_line(l);
            return out;
        }
        while (l->i < l->len && l->src[l->i] != '\n') advance(l);
        if (l->i < l->len) advance(l);
    }
}
