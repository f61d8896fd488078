/* libFuzzer target for the CLI's .npy reader (tools/npy.c), built by
 * fuzz/run.sh with the parser fuzzers. Whatever the bytes, npy_parse must
 * return without a crash, leak or oversized allocation; what it accepts
 * must be consistent (the element count times the dtype's size is the
 * data's length, bools are 0 or 1) and must come back the same through
 * npy_encode and npy_parse again. */
#include "npy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    npy_array a;
    char msg[512];
    if (!npy_parse(data, size, &a, msg, sizeof msg)) {
        if (a.data || !msg[0]) abort(); /* a failure leaves nothing and says why */
        return 0;
    }
    size_t es = a.dtype == VF_F16 ? 2 : a.dtype == VF_BOOL ? 1 : 4;
    int64_t n = 1;
    for (int d = 0; d < a.rank; d++) n *= a.shape[d];
    if (a.rank < 0 || a.rank > VF_MAX_RANK || n != a.numel || (size_t)n * es != a.bytes) abort();
    for (int64_t i = 0; a.dtype == VF_BOOL && i < n; i++)
        if (((uint8_t *)a.data)[i] > 1) abort();
    uint8_t *img;
    size_t img_size;
    if (npy_encode(a.dtype, a.rank, a.shape, a.data, &img, &img_size)) {
        npy_array b;
        if (!npy_parse(img, img_size, &b, msg, sizeof msg)) abort();
        if (b.dtype != a.dtype || b.rank != a.rank || b.bytes != a.bytes ||
            memcmp(b.shape, a.shape, sizeof a.shape) != 0 || (a.bytes && memcmp(a.data, b.data, a.bytes) != 0))
            abort();
        npy_free(&b);
        free(img);
    }
    npy_free(&a);
    return 0;
}
