/* The AmberScript parser's internals, shared by its three files and by
 * nothing else (the parser's entry point is am_parse_amber in am.h):
 *   parse_amber.c           token helpers, SHADER / VIRTUAL_FILE / BUFFER,
 *                           the statement loop
 *   parse_amber_pipeline.c  PIPELINE / DERIVE_PIPELINE and their bodies
 *   parse_amber_cmds.c      RUN, COPY, CLEAR and EXPECT
 * Every helper reads the next token into p->t and, on an error, fills
 * p->res naming the token it stopped at (ap_err) or marks the file SKIP
 * (ap_skip); each returns AM_PASS to go on. */
#ifndef VF_AMBER_PARSE_AMBER_H
#define VF_AMBER_PARSE_AMBER_H

#include "am.h"
#include "lex.h"

#include <stdbool.h>
#include <stdint.h>

#define AP_MAX_VFILES 32

typedef struct ap_vfile {
    char path[AM_TOK_MAX];
    char *text;
    int first_line;
} ap_vfile;

typedef struct ap_parser {
    am_lex lx;
    am_script *s;
    am_result *res;
    am_tok t;                    /* the last token read */
    ap_vfile vf[AP_MAX_VFILES];
    int n_vf;
} ap_parser;

#define NEXT(p) am_lex_next(&(p)->lx, &(p)->t)
#define TRY(x)                                                                                     \
    do {                                                                                           \
        am_status st_ = (x);                                                                       \
        if (st_ != AM_PASS) return st_;                                                            \
    } while (0)

/* ---- token helpers (parse_amber.c) ------------------------------------- */

/* Fails at t with fmt, whose one %s is arg. */
am_status ap_err(ap_parser *p, const am_tok *t, const char *fmt, const char *arg);
/* The token's text, or "end of line" / "end of file". */
const char *ap_tok_desc(const am_tok *t);
/* Marks the file SKIP: it needs something this runner does not do. */
am_status ap_skip(ap_parser *p, const am_tok *t, const char *why);
/* The next token is a word (what names it in the error). */
am_status ap_word(ap_parser *p, const char *what);
/* The next token is the word kw. */
am_status ap_keyword(ap_parser *p, const char *kw);
/* A word short enough for a name, copied to out (AM_NAME_MAX bytes). */
am_status ap_name(ap_parser *p, const char *what, char *out);
/* The command ends here. */
am_status ap_eol(ap_parser *p);
/* An integer in 0..max. */
am_status ap_uint_tok(ap_parser *p, const char *what, uint64_t max, uint64_t *out);
/* Whether the next token is the word kw / any word (consumes nothing). */
bool ap_peek_word(ap_parser *p, const char *kw);
bool ap_peek_is_word(ap_parser *p);
/* The current token as a value of scalar type sc: its bits, and the
   number as written when num is not NULL. */
am_status ap_value(ap_parser *p, am_scalar sc, uint64_t *bits, am_num *num);
/* The next word names a defined buffer / pipeline / shader: its index. */
am_status ap_find_buffer(ap_parser *p, int *out);
am_status ap_find_pipeline(ap_parser *p, int *out);
am_status ap_find_shader(ap_parser *p, int *out);

/* BUFFER DATA values (to the end of the text when to_eof), and one FILL /
   SERIES_FROM / INC_BY value (parse_amber.c). */
am_status ap_buffer_data(ap_parser *p, am_buffer *b, bool to_eof);
am_status ap_fill_value(ap_parser *p, am_buffer *b, am_num *out);

/* ---- commands; p->t holds the command's first word -------------------- */

/* IMAGE NAME ..., SAMPLER NAME ..., and BUFFER ... WIDTH w HEIGHT h after
   WIDTH (parse_amber_image.c). */
am_status ap_cmd_image(ap_parser *p);
am_status ap_cmd_sampler(ap_parser *p);
am_status ap_image_extent(ap_parser *p, am_buffer *b);
/* The next word names a defined SAMPLER: its index. */
am_status ap_find_sampler(ap_parser *p, int *out);

/* PIPELINE compute NAME ... END, or DERIVE_PIPELINE NAME FROM PARENT ... END
   (parse_amber_pipeline.c). */
am_status ap_cmd_pipeline(ap_parser *p, bool derive);
/* parse_amber_cmds.c */
am_status ap_cmd_run(ap_parser *p);
am_status ap_cmd_copy(ap_parser *p);
am_status ap_cmd_clear(ap_parser *p);
am_status ap_cmd_expect(ap_parser *p);

#endif
