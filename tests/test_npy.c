/* The CLI's .npy reader and writer (tools/npy.c): round trips of every
 * dtype, Fortran order and big-endian files as NumPy writes them, and
 * every kind of bad file failing with a message that says what is wrong
 * (the file named by npy_read). fuzz/fuzz_npy.c fuzzes the same parser. */
#include "npy.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A .npy image with header text hdr (padded as NumPy pads) and data. */
static size_t image(uint8_t *buf, const char *hdr, const void *data, size_t bytes)
{
    size_t n = strlen(hdr), pad = (64 - (10 + n + 1) % 64) % 64, hlen = n + pad + 1;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (uint8_t)(hlen & 0xff);
    buf[9] = (uint8_t)(hlen >> 8);
    memcpy(buf + 10, hdr, n);
    memset(buf + 10 + n, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    memcpy(buf + 10 + hlen, data, bytes);
    return 10 + hlen + bytes;
}

static void round_trips(void **state)
{
    (void)state;
    const float f[6] = {1, -2, 3.5f, 0, 1e-3f, 7};
    const uint16_t h[6] = {0x3c00, 0xc000, 1, 2, 3, 0x7bff};
    const int32_t i[6] = {-1, 0, 1, 2147483647, -2147483647 - 1, 5};
    const uint32_t u[6] = {0, 1, 0xffffffffu, 4, 5, 6};
    const uint8_t b[6] = {1, 0, 1, 1, 0, 0};
    const void *data[5] = {f, h, i, u, b};
    const vf_dtype dts[5] = {VF_F32, VF_F16, VF_I32, VF_U32, VF_BOOL};
    const int64_t shapes[3][2] = {{2, 3}, {6, 0}, {1, 6}};
    for (int k = 0; k < 5; k++)
        for (int s = 0; s < 4; s++) {
            int rank = s == 3 ? 0 : s == 1 ? 1 : 2; /* (2,3), (6,), (1,6), () */
            const int64_t *shape = s == 3 ? NULL : shapes[s];
            uint8_t *img;
            size_t size;
            assert_true(npy_encode(dts[k], rank, shape, data[k], &img, &size));
            assert_int_equal((size - (size_t)(rank ? 6 : 1) * vf_dtype_size(dts[k])) % 64, 0); /* data aligned */
            npy_array a;
            char msg[400];
            assert_true(npy_parse(img, size, &a, msg, sizeof msg));
            assert_int_equal(a.dtype, dts[k]);
            assert_int_equal(a.rank, rank);
            for (int d = 0; d < rank; d++) assert_int_equal(a.shape[d], shape[d]);
            assert_int_equal(a.numel, rank ? 6 : 1);
            assert_memory_equal(a.data, data[k], a.bytes);
            npy_free(&a);
            free(img);
        }
}

static void layouts(void **state)
{
    (void)state;
    uint8_t buf[512];
    npy_array a;
    char msg[400];
    /* Fortran order: a (2, 3) array stored column by column */
    const float fcol[6] = {1, 4, 2, 5, 3, 6}, c[6] = {1, 2, 3, 4, 5, 6};
    size_t n = image(buf, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", fcol, sizeof fcol);
    assert_true(npy_parse(buf, n, &a, msg, sizeof msg));
    assert_memory_equal(a.data, c, sizeof c);
    npy_free(&a);
    /* rank 3 Fortran: element (i,j,k) at i + 2j + 4k */
    int32_t f3[8], c3[8];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++)
            for (int k = 0; k < 2; k++) f3[i + 2 * j + 4 * k] = c3[4 * i + 2 * j + k] = 100 * i + 10 * j + k;
    n = image(buf, "{'shape': (2, 2, 2), 'fortran_order': True, 'descr': '<i4'}", f3, sizeof f3);
    assert_true(npy_parse(buf, n, &a, msg, sizeof msg));
    assert_memory_equal(a.data, c3, sizeof c3);
    npy_free(&a);
    /* big-endian, double quotes, version 2.0 */
    const uint8_t be[8] = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0};
    n = image(buf, "{\"descr\": \">f4\", \"fortran_order\": False, \"shape\": (2,)}", be, sizeof be);
    assert_true(npy_parse(buf, n, &a, msg, sizeof msg));
    assert_true(((float *)a.data)[0] == 1.0f && ((float *)a.data)[1] == -2.0f);
    npy_free(&a);
    uint8_t v2[600];
    memcpy(v2, "\x93NUMPY\x02\x00", 8);
    size_t hl = n - 10 - sizeof be;
    v2[8] = (uint8_t)hl, v2[9] = (uint8_t)(hl >> 8), v2[10] = v2[11] = 0;
    memcpy(v2 + 12, buf + 10, n - 10);
    assert_true(npy_parse(v2, n + 2, &a, msg, sizeof msg));
    assert_true(((float *)a.data)[1] == -2.0f);
    npy_free(&a);
    /* bools other than 0/1 read as 1 */
    const uint8_t bb[3] = {0, 2, 255};
    n = image(buf, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", bb, 3);
    assert_true(npy_parse(buf, n, &a, msg, sizeof msg));
    assert_memory_equal(a.data, ((uint8_t[]){0, 1, 1}), 3);
    npy_free(&a);
}

/* hdr with data bytes fails with a message containing want. */
static void bad(const char *hdr, size_t bytes, const char *want)
{
    uint8_t buf[1024] = {0}, zero[256] = {0};
    size_t n = image(buf, hdr, zero, bytes);
    npy_array a;
    char msg[400] = "";
    assert_false(npy_parse(buf, n, &a, msg, sizeof msg));
    assert_null(a.data);
    if (!strstr(msg, want)) fail_msg("header %s: message '%s' lacks '%s'", hdr, msg, want);
}

static void bad_files(void **state)
{
    (void)state;
    npy_array a;
    char msg[400];
    assert_false(npy_parse((const uint8_t *)"PK\x03\x04 not an npy at all", 24, &a, msg, sizeof msg));
    assert_non_null(strstr(msg, "not a .npy file"));
    assert_false(npy_parse((const uint8_t *)"\x93NUMPY\x01\x00\xff\x00{", 11, &a, msg, sizeof msg));
    assert_non_null(strstr(msg, "truncated"));
    assert_false(npy_parse((const uint8_t *)"\x93NUMPY\x04\x00\x01\x00{", 11, &a, msg, sizeof msg));
    assert_non_null(strstr(msg, "format version 4.0"));
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, "truncated");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28, "trailing bytes");
    bad("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16, "dtype '<f8' is not one vkfuse has");
    bad("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 16, "astype(np.float32)");
    bad("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8, "structured dtype");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", 0, "more than 2^40");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0, "larger than 2^40");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4, "more than 8 dims");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4, "non-negative whole numbers");
    bad("{'descr': '<f4', 'fortran_order': False, }", 4, "no 'shape' key");
    bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "appears twice");
    bad("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (), }", 4, "neither True nor False");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", 4, "unknown key 'extra'");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': () junk", 4, "not separated");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': ()} junk", 4, "text after");
    bad("{'descr: '<f4'", 4, "unknown key");
    bad("{'descr': '<f4", 4, "unterminated");
    bad("", 0, "expected '{'");
}

static void files(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_npy_XXXXXX", path[128], msg[600];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/a.npy", dir);
    const int32_t v[3] = {1, 2, 3};
    assert_true(npy_write(path, VF_I32, 1, (int64_t[]){3}, v, msg, sizeof msg));
    npy_array a;
    assert_true(npy_read(path, &a, msg, sizeof msg));
    assert_int_equal(a.dtype, VF_I32);
    assert_memory_equal(a.data, v, sizeof v);
    npy_free(&a);
    /* truncate it: the message names the file */
    assert_int_equal(truncate(path, 70), 0);
    assert_false(npy_read(path, &a, msg, sizeof msg));
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "truncated"));
    remove(path);
    assert_false(npy_read(path, &a, msg, sizeof msg));
    assert_non_null(strstr(msg, "cannot open it"));
    assert_false(npy_read(dir, &a, msg, sizeof msg));
    assert_non_null(strstr(msg, "not a regular file"));
    snprintf(path, sizeof path, "%s/no/such/dir.npy", dir);
    assert_false(npy_write(path, VF_F32, 0, NULL, v, msg, sizeof msg));
    assert_non_null(strstr(msg, "cannot write it"));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trips),
        cmocka_unit_test(layouts),
        cmocka_unit_test(bad_files),
        cmocka_unit_test(files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
