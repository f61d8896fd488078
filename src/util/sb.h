/* The string builder: a growable NUL-terminated string, for GLSL source,
 * graph dumps, trace JSON and messages. vf_sb b = {0} is an empty one.
 *
 * Appends never fail loudly: an allocation failure sets `oom` and later
 * appends do nothing, so callers can append freely and check once at the
 * end (vf_sb_take returns NULL; the caller turns that into
 * VF_ERROR_OUT_OF_MEMORY). */
#ifndef VF_UTIL_SB_H
#define VF_UTIL_SB_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vf_sb {
    char *buf;
    size_t len, cap;
    bool oom;
} vf_sb;

void vf_sb_add(vf_sb *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void vf_sb_puts(vf_sb *sb, const char *s);
/* Appends s with every occurrence of `from` replaced by `to`. */
void vf_sb_subst(vf_sb *sb, const char *s, const char *from, const char *to);
/* Hands the buffer to the caller (malloc'd, NUL-terminated; "" when nothing
   was appended) or NULL on oom, and leaves sb empty. */
char *vf_sb_take(vf_sb *sb);
void vf_sb_free(vf_sb *sb);

#endif
