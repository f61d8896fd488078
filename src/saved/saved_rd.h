/* The saved-function reader's cursor and checked reads (saved_read.c),
 * shared with the kernel section's reader (saved_kernels.c). Every read
 * checks the bytes left in the current section; the first failure is
 * VF_ERROR_FORMAT with the file, section, byte offset and field, and makes
 * every later read fail (r->bad). */
#ifndef VF_FRONTEND_SAVED_RD_H
#define VF_FRONTEND_SAVED_RD_H

#include "saved/saved.h"

typedef struct vf_saved_rd {
    vf_context *ctx;
    const char *what;        /* the file, for messages */
    const uint8_t *p;        /* the whole file */
    size_t pos, end;         /* cursor and end of the current section */
    const char *sec;         /* the section's name */
    bool bad;
} vf_saved_rd;

/* Records the failure at r->pos (unless one is recorded); returns false. */
bool vf_saved_bad(vf_saved_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* n more bytes in the section, or a failure naming field. */
bool vf_saved_need(vf_saved_rd *r, size_t n, const char *field);
/* An n-byte little-endian integer (0 after a failure). */
uint64_t vf_saved_le(vf_saved_rd *r, int n, const char *field);
#define U8(f) ((unsigned)vf_saved_le(r, 1, f))
#define U32(f) ((uint32_t)vf_saved_le(r, 4, f))
#define U64(f) (vf_saved_le(r, 8, f))
/* A count of records of at least min bytes each, at most max. */
uint32_t vf_saved_count(vf_saved_rd *r, uint32_t max, size_t min, const char *field);

/* The kernel section (saved_kernels.c): checks every entry's structure;
   into a backend that takes kernel binaries, inserts them (the backend
   validates each module) and adds their keys to fn's kernels. */
bool vf_saved_read_kernels(vf_saved_rd *r, vf_function *fn);

/* A user kernel's node (saved_ukernel.c): the rest of node `id` (file
   index i) of g after its common fields: the kernel with its SPIR-V
   (validated, bindings checked) and no C callbacks (loaded). */
struct vf_graph;
bool vf_saved_get_kernel(vf_saved_rd *r, struct vf_graph *g, int id, int i);
/* A user elementwise op of node i (saved_uelem.c): its GLSL checked as
   vf_elementwise_create checks it, no C functions (loaded); refs 1, or
   NULL with the failure recorded. with_grads: a node's record (its
   gradients follow), else a gradient's inside one. */
struct vf_uelem;
struct vf_uelem *vf_saved_get_uelem(vf_saved_rd *r, int i, bool with_grads);

#endif
