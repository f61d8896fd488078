#include "util/dims.h"

#include <stdio.h>

const char *vf_dims_fmt(char *buf, size_t len, const char *prefix, int rank, const int64_t *dims, uint32_t sym,
                        const char *sym_text)
{
    size_t n = (size_t)snprintf(buf, len, "%s[", prefix);
    for (int i = 0; i < rank && n < len; i++) {
        if ((sym >> i) & 1u) n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? "," : "", sym_text);
        else n += (size_t)snprintf(buf + n, len - n, "%s%lld", i ? "," : "", (long long)dims[i]);
    }
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}
