/* NumPy .npy files (format versions 1.0, 2.0 and 3.0) for the CLI's
 * `vkfuse run` and `vkfuse profile FILE`: read into packed little-endian
 * C-order elements of a vkfuse dtype, written the same way. A .npy is
 * untrusted input: every field is checked before anything is allocated
 * (the data must be in the file, so a huge shape cannot allocate), and
 * every failure is a message naming the file and what is wrong, never a
 * crash. fuzz/fuzz_npy.c fuzzes npy_parse; tests/test_npy.c tests it. */
#ifndef VF_TOOLS_NPY_H
#define VF_TOOLS_NPY_H

#include "vkfuse.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* descr strings: f32 '<f4', f16 '<f2', i32 '<i4', u32 '<u4', bool '|b1'
   ('>' big-endian and '=' native are read too). */
typedef struct npy_array {
    vf_dtype dtype;
    int rank;                      /* 0 .. VF_MAX_RANK */
    int64_t shape[VF_MAX_RANK];
    int64_t numel;
    void *data;                    /* numel elements, C order, little-endian (malloc'd) */
    size_t bytes;
} npy_array;

/* Parses a whole .npy image of size bytes into *out (Fortran order
   transposed, big-endian swapped, bools made 0/1). false: *out is empty
   and msg says what is wrong (without a file name). */
bool npy_parse(const uint8_t *buf, size_t size, npy_array *out, char *msg, size_t len);
/* Reads path; false with "PATH: what is wrong" in msg. */
bool npy_read(const char *path, npy_array *out, char *msg, size_t len);
/* The .npy image (version 1.0, C order) of rank / shape / data
   (packed little-endian): malloc'd into *img (*size bytes). */
bool npy_encode(vf_dtype dt, int rank, const int64_t *shape, const void *data, uint8_t **img, size_t *size);
/* Writes the image to path; false with "PATH: ..." in msg. */
bool npy_write(const char *path, vf_dtype dt, int rank, const int64_t *shape, const void *data, char *msg,
               size_t len);
void npy_free(npy_array *a);
/* NumPy's name of a vkfuse dtype ("float32", ...). */
const char *npy_dtype_numpy(vf_dtype dt);

#endif
