/* Growth by doubling, for the arrays vkfuse keeps as (pointer, count,
 * capacity):
 *
 *   if (!vf_grow((void **)&s->items, &s->cap, s->n + 1, sizeof *s->items)) return oom;
 *   s->items[s->n++] = x;
 *
 * The capacity doubles (from 16 elements) until `need` fit. On failure
 * (out of memory, or a size past what size_t / int can count) the array
 * and its capacity are left as they were and false is returned. */
#ifndef VF_UTIL_GROW_H
#define VF_UTIL_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* *p holds *cap elements of elem bytes; makes room for `need`. */
bool vf_grow(void **p, int *cap, int need, size_t elem);
/* The same with a size_t capacity (byte buffers, long key lists). */
bool vf_grow_size(void **p, size_t *cap, size_t need, size_t elem);

#endif
