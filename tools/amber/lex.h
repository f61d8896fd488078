/* Tokenizer shared by the AmberScript and VkScript parsers.
 *
 * Words are runs of non-blank characters; '#' starts a comment to the end
 * of the line; the end of a line is a token of its own (AmberScript
 * commands end there); a backslash just before a newline joins lines.
 * Every token carries its 1-based line and column so an error can point
 * at it. Shader bodies are not tokenized: am_lex_raw_until_end hands back
 * the lines verbatim. */
#ifndef VF_AMBER_LEX_H
#define VF_AMBER_LEX_H

#include "am.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum { AM_TOK_WORD, AM_TOK_EOL, AM_TOK_EOF } am_tok_kind;

#define AM_TOK_MAX 256

typedef struct am_tok {
    am_tok_kind kind;
    char text[AM_TOK_MAX];       /* NUL-terminated; longer words are cut (and flagged) */
    bool too_long;
    am_pos pos;
} am_tok;

typedef struct am_lex {
    const char *src;
    size_t len, i;
    int line, col;
    bool has_peek;
    am_tok peek;
} am_lex;

void am_lex_init(am_lex *l, const char *src, size_t len);
/* The next token (words, EOL, EOF). */
void am_lex_next(am_lex *l, am_tok *t);
/* Looks at the next token without consuming it. */
const am_tok *am_lex_peek(am_lex *l);
/* Skips to just after the next end of line (the rest of a command line). */
void am_lex_skip_line(am_lex *l);
/* From the start of the next line, collects raw lines until a line whose
   first word is `end` (that line is consumed; the rest of it may only be a
   comment). Returns a malloc'd NUL-terminated copy, or NULL with *eof set
   when the input ends first (or on allocation failure, *eof clear).
   *first_line gets the line number of the first collected line. */
char *am_lex_raw_until_end(am_lex *l, const char *end, int *first_line, bool *eof);
/* Position of the next unread character. */
am_pos am_lex_here(const am_lex *l);

#endif
