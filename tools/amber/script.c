/* The parsed test: dispatch to a parser, command list, freeing. */
#include "am.h"
#include "util/fault.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

am_status am_fail_at(am_result *res, am_pos pos, const char *fmt, ...)
{
    res->status = AM_ERROR;
    res->pos = pos;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->msg, sizeof res->msg, fmt, ap);
    va_end(ap);
    return AM_ERROR;
}

am_cmd *am_script_add_cmd(am_script *s)
{
    if (s->n_cmds >= AM_MAX_COMMANDS) return NULL;
    if (s->n_cmds == s->cap_cmds) {
        int cap = s->cap_cmds ? s->cap_cmds * 2 : 32;
        if (cap > AM_MAX_COMMANDS) cap = AM_MAX_COMMANDS;
        am_cmd *c = vf_realloc(s->cmd, (size_t)cap * sizeof *c);
        if (!c) return NULL;
        s->cmd = c;
        s->cap_cmds = cap;
    }
    am_cmd *c = &s->cmd[s->n_cmds++];
    memset(c, 0, sizeof *c);
    c->buf = c->buf2 = c->pipeline = -1;
    return c;
}

void am_script_free(am_script *s)
{
    for (int i = 0; i < s->n_shaders; i++) free(s->shader[i].source);
    for (int i = 0; i < s->n_buffers; i++) free(s->buffer[i].data);
    for (int i = 0; i < s->n_cmds; i++) {
        free(s->cmd[i].values);
        free(s->cmd[i].bytes);
    }
    free(s->cmd);
    memset(s, 0, sizeof *s);
}

/* "#!amber" at the very start (after an optional UTF-8 BOM) picks
   AmberScript; anything else is VkScript, as Amber itself decides. */
am_status am_parse(const char *src, size_t len, am_script *s, am_result *res)
{
    size_t off = 0;
    if (len >= 3 && (unsigned char)src[0] == 0xef && (unsigned char)src[1] == 0xbb &&
        (unsigned char)src[2] == 0xbf)
        off = 3;
    if (len - off >= 7 && memcmp(src + off, "#!amber", 7) == 0)
        return am_parse_amber(src, len, s, res);
    return am_parse_vkscript(src, len, s, res);
}
