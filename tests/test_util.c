/* src/util's containers: the growth helper (vf_grow, vf_grow_size), the
 * string builder (vf_sb), the hash map (vf_hmap) and the key set. */
#include "testutil.h"

#include "util/grow.h"
#include "util/hash.h"
#include "util/keyset.h"
#include "util/sb.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Doubling from 16, a jump past a doubling when more is needed, the
   contents kept, nothing done when there is room. */
static void test_grow(void **state)
{
    (void)state;
    int *v = NULL, cap = 0;
    assert_true(vf_grow((void **)&v, &cap, 1, sizeof *v));
    assert_int_equal(cap, 16);
    for (int i = 0; i < 16; i++) v[i] = i;
    int *before = v;
    assert_true(vf_grow((void **)&v, &cap, 16, sizeof *v));
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 16);
    assert_true(vf_grow((void **)&v, &cap, 17, sizeof *v));
    assert_int_equal(cap, 32);
    assert_true(vf_grow((void **)&v, &cap, 200, sizeof *v));
    assert_int_equal(cap, 256);
    for (int i = 0; i < 16; i++) assert_int_equal(v[i], i);
    free(v);
}

/* A size nothing can hold fails, leaving the array and its capacity as
   they were. */
static void test_grow_overflow(void **state)
{
    (void)state;
    int *v = NULL, cap = 0;
    assert_true(vf_grow((void **)&v, &cap, 4, sizeof *v));
    v[3] = 7;
    int *before = v;
    assert_false(vf_grow((void **)&v, &cap, INT_MAX, SIZE_MAX / 4));
    assert_ptr_equal(v, before);
    assert_int_equal(cap, 16);
    assert_int_equal(v[3], 7);
    size_t zc = 16;
    assert_false(vf_grow_size((void **)&v, &zc, SIZE_MAX / 2 + 2, 1));
    assert_int_equal(zc, 16);
    free(v);

    char *b = NULL;
    size_t bc = 0;
    assert_true(vf_grow_size((void **)&b, &bc, 5000, 1));
    assert_int_equal(bc, 8192);
    free(b);
}

static void test_sb(void **state)
{
    (void)state;
    vf_sb sb = {0};
    char *empty = vf_sb_take(&sb);
    assert_non_null(empty);
    assert_string_equal(empty, "");
    free(empty);
    for (int i = 0; i < 1000; i++) vf_sb_add(&sb, "%d,", i % 10);
    vf_sb_puts(&sb, "|");
    vf_sb_subst(&sb, "a$Xb$X", "$X", "yz");
    assert_false(sb.oom);
    char *s = vf_sb_take(&sb);
    assert_non_null(s);
    assert_int_equal(strlen(s), 2000 + 1 + 6);
    assert_memory_equal(s, "0,1,2,", 6);
    assert_string_equal(s + 2000, "|ayzbyz");
    assert_null(sb.buf);
    free(s);
}

static void test_hmap_keyset(void **state)
{
    (void)state;
    vf_hmap m = {0};
    static int vals[1000];
    for (int i = 0; i < 1000; i++) assert_true(vf_hmap_put(&m, vf_hash64(&i, sizeof i, 0), &vals[i]));
    assert_true(vf_hmap_put(&m, 0, &vals[0])); /* key 0 is allowed */
    assert_int_equal(m.n, 1001);
    for (int i = 0; i < 1000; i++) assert_ptr_equal(vf_hmap_get(&m, vf_hash64(&i, sizeof i, 0)), &vals[i]);
    assert_ptr_equal(vf_hmap_get(&m, 0), &vals[0]);
    vf_hmap_free(&m);

    vf_keyset ks = {0};
    for (uint64_t k = 100; k > 0; k--) assert_true(vf_keyset_add(&ks, k * 3));
    assert_true(vf_keyset_add(&ks, 30)); /* already there */
    assert_int_equal(ks.n, 100);
    for (size_t i = 1; i < ks.n; i++) assert_true(ks.keys[i - 1] < ks.keys[i]);
    assert_true(vf_keyset_has(&ks, 300));
    assert_false(vf_keyset_has(&ks, 301));
    vf_keyset_free(&ks);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grow),
        cmocka_unit_test(test_grow_overflow),
        cmocka_unit_test(test_sb),
        cmocka_unit_test(test_hmap_keyset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
