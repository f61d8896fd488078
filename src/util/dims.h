/* Dims as text, "[2,3,4]", for messages and dumps of every layer (one
 * formatter instead of one per layer). */
#ifndef VF_UTIL_DIMS_H
#define VF_UTIL_DIMS_H

#include <stddef.h>
#include <stdint.h>

/* prefix (a dtype's name, or "") then dims[0 .. rank) in brackets, comma
   separated; a dim whose bit is set in sym is written as sym_text (a
   symbolic dim: "?" in dumps, "-1" in signatures). buf always ends with a
   NUL; returns buf. */
const char *vf_dims_fmt(char *buf, size_t len, const char *prefix, int rank, const int64_t *dims, uint32_t sym,
                        const char *sym_text);

#endif
