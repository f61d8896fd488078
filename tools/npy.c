/* NumPy .npy reader and writer (npy.h). The header is a Python dict
 * literal, {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), },
 * parsed by a small strict tokenizer: the three keys once each, nothing
 * else. The shape's element count times the element size must equal the
 * bytes after the header exactly, which bounds every allocation by the
 * file's size. */
#include "npy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1u << 20) /* NumPy itself writes < 64 KiB */
#define NPY_MAX_FILE ((int64_t)1 << 40)

static bool fail(char *msg, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool fail(char *msg, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (len) vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return false;
}

const char *npy_dtype_numpy(vf_dtype dt)
{
    switch (dt) {
    case VF_F32: return "float32";
    case VF_F16: return "float16";
    case VF_I32: return "int32";
    case VF_U32: return "uint32";
    case VF_BOOL: return "bool";
    }
    return "?";
}

static const char *descr_of(vf_dtype dt)
{
    switch (dt) {
    case VF_F32: return "<f4";
    case VF_F16: return "<f2";
    case VF_I32: return "<i4";
    case VF_U32: return "<u4";
    case VF_BOOL: return "|b1";
    }
    return NULL;
}

static size_t dsize(vf_dtype dt) { return dt == VF_F16 ? 2 : dt == VF_BOOL ? 1 : 4; }

/* ---- the header dict ------------------------------------------------------ */

typedef struct hdr {
    const char *p, *end;
    char *msg;
    size_t len;
} hdr;

static void skip_ws(hdr *h)
{
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static bool expect(hdr *h, char c, const char *where)
{
    skip_ws(h);
    if (h->p >= h->end || *h->p != c)
        return fail(h->msg, h->len, "header: expected '%c' %s, found %s", c, where,
                    h->p >= h->end ? "the end of the header" : "another character");
    h->p++;
    return true;
}

/* A quoted string ('...' or "...", no escapes) into out. */
static bool get_str(hdr *h, char *out, size_t n, const char *what)
{
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"'))
        return fail(h->msg, h->len, "header: %s is not a quoted string", what);
    char q = *h->p++;
    const char *s = h->p;
    while (h->p < h->end && *h->p != q && *h->p != '\\') h->p++;
    if (h->p >= h->end || *h->p != q) return fail(h->msg, h->len, "header: %s: unterminated or escaped string", what);
    size_t l = (size_t)(h->p - s);
    h->p++;
    if (l >= n) return fail(h->msg, h->len, "header: %s is longer than %zu characters", what, n - 1);
    memcpy(out, s, l);
    out[l] = '\0';
    return true;
}

static bool get_bool(hdr *h, bool *v)
{
    skip_ws(h);
    size_t left = (size_t)(h->end - h->p);
    if (left >= 4 && !memcmp(h->p, "True", 4)) return *v = true, h->p += 4, true;
    if (left >= 5 && !memcmp(h->p, "False", 5)) return *v = false, h->p += 5, true;
    return fail(h->msg, h->len, "header: 'fortran_order' is neither True nor False");
}

/* (d0, d1, ...) with at most VF_MAX_RANK dims, each 0 .. 2^40. */
static bool get_shape(hdr *h, npy_array *a)
{
    if (!expect(h, '(', "to open 'shape'")) return false;
    a->rank = 0;
    for (;;) {
        skip_ws(h);
        if (h->p < h->end && *h->p == ')') {
            h->p++;
            return true;
        }
        if (h->p >= h->end || *h->p < '0' || *h->p > '9')
            return fail(h->msg, h->len, "header: 'shape' holds something other than non-negative whole numbers");
        int64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            v = v * 10 + (*h->p++ - '0');
            if (v > NPY_MAX_FILE)
                return fail(h->msg, h->len, "header: 'shape' dim %d is larger than 2^40", a->rank);
        }
        if (a->rank == VF_MAX_RANK)
            return fail(h->msg, h->len, "header: 'shape' has more than %d dims (vkfuse's most)", VF_MAX_RANK);
        a->shape[a->rank++] = v;
        skip_ws(h);
        if (h->p < h->end && *h->p == ',') h->p++;
        else if (h->p >= h->end || *h->p != ')')
            return fail(h->msg, h->len, "header: 'shape' dims are not separated by ','");
    }
}

static bool get_descr(hdr *h, npy_array *a, bool *swap)
{
    char d[32];
    skip_ws(h);
    if (h->p < h->end && *h->p == '[')
        return fail(h->msg, h->len, "header: 'descr' is a structured dtype; vkfuse reads plain arrays of float32, "
                    "float16, int32, uint32 or bool");
    if (!get_str(h, d, sizeof d, "'descr'")) return false;
    char order = d[0];
    const char *t = d + 1;
    if (order != '<' && order != '>' && order != '=' && order != '|') order = '=', t = d;
    static const struct { const char *t; vf_dtype dt; } known[] = {
        {"f4", VF_F32}, {"f2", VF_F16}, {"i4", VF_I32}, {"u4", VF_U32}, {"b1", VF_BOOL},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(t, known[i].t)) {
            a->dtype = known[i].dt;
            *swap = order == '>' && a->dtype != VF_BOOL;
            return true;
        }
    return fail(h->msg, h->len, "dtype '%s' is not one vkfuse has (float32 '<f4', float16 '<f2', int32 '<i4', "
                "uint32 '<u4', bool '|b1'); convert it first, e.g. np.save(path, a.astype(np.float32))", d);
}

static bool parse_header(hdr *h, npy_array *a, bool *fortran, bool *swap)
{
    bool seen[3] = {false, false, false};
    static const char *const keys[3] = {"descr", "fortran_order", "shape"};
    if (!expect(h, '{', "at the start of the header dict")) return false;
    for (;;) {
        skip_ws(h);
        if (h->p < h->end && *h->p == '}') {
            h->p++;
            break;
        }
        char key[32];
        if (!get_str(h, key, sizeof key, "a key")) return false;
        int k = 0;
        while (k < 3 && strcmp(key, keys[k])) k++;
        if (k == 3) return fail(h->msg, h->len, "header: unknown key '%s' (a .npy header has descr, fortran_order "
                                "and shape)", key);
        if (seen[k]) return fail(h->msg, h->len, "header: key '%s' appears twice", key);
        seen[k] = true;
        if (!expect(h, ':', "after a key")) return false;
        bool ok = k == 0 ? get_descr(h, a, swap) : k == 1 ? get_bool(h, fortran) : get_shape(h, a);
        if (!ok) return false;
        skip_ws(h);
        if (h->p < h->end && *h->p == ',') h->p++;
        else if (h->p >= h->end || *h->p != '}') return fail(h->msg, h->len, "header: entries not separated by ','");
    }
    for (int k = 0; k < 3; k++)
        if (!seen[k]) return fail(h->msg, h->len, "header: no '%s' key", keys[k]);
    skip_ws(h);
    if (h->p != h->end) return fail(h->msg, h->len, "header: text after the dict's '}'");
    return true;
}

/* ---- element layout -------------------------------------------------------- */

static void swap_bytes(uint8_t *p, int64_t n, size_t es)
{
    for (int64_t i = 0; i < n; i++, p += es)
        for (size_t b = 0; b < es / 2; b++) {
            uint8_t t = p[b];
            p[b] = p[es - 1 - b];
            p[es - 1 - b] = t;
        }
}

/* src in Fortran order (first index fastest) into dst in C order. */
static void from_fortran(uint8_t *dst, const uint8_t *src, const npy_array *a, size_t es)
{
    int64_t idx[VF_MAX_RANK] = {0}, fstride[VF_MAX_RANK];
    int64_t s = 1;
    for (int d = 0; d < a->rank; d++) fstride[d] = s, s *= a->shape[d];
    for (int64_t i = 0; i < a->numel; i++) {
        int64_t off = 0;
        for (int d = 0; d < a->rank; d++) off += idx[d] * fstride[d];
        memcpy(dst + (size_t)i * es, src + (size_t)off * es, es);
        for (int d = a->rank - 1; d >= 0; d--) {  /* the C-order index, last dim fastest */
            if (++idx[d] < a->shape[d]) break;
            idx[d] = 0;
        }
    }
}

void npy_free(npy_array *a)
{
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}

bool npy_parse(const uint8_t *buf, size_t size, npy_array *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    if (size < 10 || memcmp(buf, NPY_MAGIC, 6) != 0)
        return fail(msg, len, "not a .npy file: it does not start with \\x93NUMPY (%zu bytes)", size);
    unsigned major = buf[6], minor = buf[7];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (size < 12) return fail(msg, len, "truncated: %zu bytes, shorter than a version %u.%u header", size, major, minor);
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        hstart = 12;
    } else {
        return fail(msg, len, "format version %u.%u; vkfuse reads 1.0, 2.0 and 3.0", major, minor);
    }
    if (hlen > NPY_MAX_HEADER) return fail(msg, len, "header length %zu is more than %u bytes", hlen, NPY_MAX_HEADER);
    if (hlen > size - hstart)
        return fail(msg, len, "truncated: the header needs %zu bytes but the file has %zu after its start", hlen,
                    size - hstart);
    hdr h = {(const char *)buf + hstart, (const char *)buf + hstart + hlen, msg, len};
    bool fortran = false, swap = false;
    if (!parse_header(&h, out, &fortran, &swap)) {
        memset(out, 0, sizeof *out);
        return false;
    }
    size_t es = dsize(out->dtype), have = size - hstart - hlen;
    int64_t n = 1;
    for (int d = 0; d < out->rank; d++) {
        if (out->shape[d] && n > NPY_MAX_FILE / out->shape[d]) {
            memset(out, 0, sizeof *out);
            return fail(msg, len, "shape: more than 2^40 elements, more than any file here can hold");
        }
        n *= out->shape[d];
    }
    for (int d = 0; d < out->rank; d++) if (out->shape[d] == 0) n = 0;
    if ((uint64_t)n * es != have) {
        int64_t want = n * (int64_t)es;
        memset(out, 0, sizeof *out);
        return fail(msg, len, "%s: its shape needs %lld data bytes (%lld elements of %zu bytes) but the file has %zu "
                    "after the header", (uint64_t)want > have ? "truncated" : "trailing bytes", (long long)want,
                    (long long)n, es, have);
    }
    out->numel = n;
    out->bytes = have;
    out->data = malloc(have ? have : 1);
    if (!out->data) {
        memset(out, 0, sizeof *out);
        return fail(msg, len, "out of host memory (%zu bytes)", have);
    }
    const uint8_t *src = buf + hstart + hlen;
    if (fortran && out->rank > 1) from_fortran(out->data, src, out, es);
    else if (have) memcpy(out->data, src, have);
    if (swap) swap_bytes(out->data, n, es);
    if (out->dtype == VF_BOOL)
        for (int64_t i = 0; i < n; i++) ((uint8_t *)out->data)[i] = ((uint8_t *)out->data)[i] != 0;
    return true;
}

bool npy_read(const char *path, npy_array *out, char *msg, size_t len)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return fail(msg, len, "%s: cannot open it: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return fail(msg, len, "%s: not a regular file", path);
    }
    if ((int64_t)st.st_size > NPY_MAX_FILE) {
        fclose(f);
        return fail(msg, len, "%s: %lld bytes, more than vkfuse reads (2^40)", path, (long long)st.st_size);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        fclose(f);
        return fail(msg, len, "%s: out of host memory (%zu bytes)", path, size);
    }
    size_t got = fread(buf, 1, size, f);
    bool rd_err = ferror(f);
    fclose(f);
    if (rd_err || got != size) {
        free(buf);
        return fail(msg, len, "%s: read %zu of its %zu bytes", path, got, size);
    }
    char why[400];
    bool ok = npy_parse(buf, size, out, why, sizeof why);
    free(buf);
    if (!ok) return fail(msg, len, "%s: %s", path, why);
    return true;
}

bool npy_encode(vf_dtype dt, int rank, const int64_t *shape, const void *data, uint8_t **img, size_t *size)
{
    const char *descr = descr_of(dt);
    if (!descr || rank < 0 || rank > VF_MAX_RANK) return false;
    char h[512];
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    int64_t numel = 1;
    for (int d = 0; d < rank; d++) {
        n += snprintf(h + n, sizeof h - (size_t)n, "%lld,%s", (long long)shape[d], d + 1 < rank ? " " : "");
        numel *= shape[d];
    }
    if (rank > 1) n--; /* NumPy writes (2, 3), with a trailing comma for one dim only: (3,) */
    n += snprintf(h + n, sizeof h - (size_t)n, "), }");
    /* pad with spaces and a newline so that the data starts 64-byte aligned */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1, bytes = (size_t)numel * dsize(dt);
    uint8_t *b = malloc(10 + hlen + bytes + 1);
    if (!b) return false;
    memcpy(b, NPY_MAGIC, 6);
    b[6] = 1;
    b[7] = 0;
    b[8] = (uint8_t)(hlen & 0xff);
    b[9] = (uint8_t)(hlen >> 8);
    memcpy(b + 10, h, (size_t)n);
    memset(b + 10 + n, ' ', pad);
    b[10 + hlen - 1] = '\n';
    if (bytes) memcpy(b + 10 + hlen, data, bytes);
    *img = b;
    *size = 10 + hlen + bytes;
    return true;
}

bool npy_write(const char *path, vf_dtype dt, int rank, const int64_t *shape, const void *data, char *msg, size_t len)
{
    uint8_t *img;
    size_t size;
    if (!npy_encode(dt, rank, shape, data, &img, &size)) return fail(msg, len, "%s: out of host memory", path);
    FILE *f = fopen(path, "wb");
    if (!f) {
        free(img);
        return fail(msg, len, "%s: cannot write it: %s", path, strerror(errno));
    }
    bool ok = fwrite(img, 1, size, f) == size;
    ok = fclose(f) == 0 && ok;
    free(img);
    if (!ok) return fail(msg, len, "%s: writing failed: %s", path, strerror(errno));
    return true;
}
