/* A tiny growable string for building GLSL source.
 *
 * Appends never fail loudly: an allocation failure sets `oom` and later
 * appends do nothing, so generators can append freely and check once at
 * the end (the caller turns oom into VF_ERROR_OUT_OF_MEMORY). */
#ifndef VF_FUSION_SB_H
#define VF_FUSION_SB_H

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
/* Hands the buffer to the caller (malloc'd, NUL-terminated) or NULL on oom. */
char *vf_sb_take(vf_sb *sb);
void vf_sb_free(vf_sb *sb);

#endif
