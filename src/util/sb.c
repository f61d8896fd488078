#include "util/sb.h"
#include "util/grow.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(vf_sb *sb, size_t extra)
{
    if (sb->oom) return false;
    if (!vf_grow_size((void **)&sb->buf, &sb->cap, sb->len + extra + 1, 1)) {
        sb->oom = true;
        return false;
    }
    return true;
}

void vf_sb_add(vf_sb *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        sb->oom = true;
        return;
    }
    if (!reserve(sb, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

void vf_sb_puts(vf_sb *sb, const char *s)
{
    size_t n = strlen(s);
    if (!reserve(sb, n)) return;
    memcpy(sb->buf + sb->len, s, n + 1);
    sb->len += n;
}

void vf_sb_subst(vf_sb *sb, const char *s, const char *from, const char *to)
{
    size_t fl = strlen(from);
    const char *p;
    while (fl && (p = strstr(s, from))) {
        size_t n = (size_t)(p - s);
        if (!reserve(sb, n)) return;
        memcpy(sb->buf + sb->len, s, n);
        sb->len += n;
        sb->buf[sb->len] = '\0';
        vf_sb_puts(sb, to);
        s = p + fl;
    }
    vf_sb_puts(sb, s);
}

char *vf_sb_take(vf_sb *sb)
{
    if (sb->oom || !reserve(sb, 0)) {
        vf_sb_free(sb);
        return NULL;
    }
    char *p = sb->buf;
    p[sb->len] = '\0';
    sb->buf = NULL;
    sb->len = sb->cap = 0;
    return p;
}

void vf_sb_free(vf_sb *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->cap = 0;
}
