/* The liveness offset planner of recorded plans (plan/memplan.c), without
 * a GPU: buffers live together never overlap, offsets are aligned, and the
 * arena stays within 1.10x of the lower bound (chains, diamonds, staggered
 * and all-live sets, disjoint lifetimes sharing everything). Plans that
 * use it: test_function_plan.c. */
#include "testutil.h"

#include "plan/memplan.h"

#include <stdbool.h>
#include <stddef.h>

static size_t al(size_t v) { return (v + 255) & ~(size_t)255; }

static void check_plan(const vf_mem_interval *iv, int n, const char *what)
{
    size_t off[64], total = 0;
    assert_true(n <= 64);
    assert_true(vf_memplan(iv, n, 256, off, &total));
    for (int i = 0; i < n; i++) {
        assert_int_equal(off[i] % 256, 0);
        assert_true(off[i] + al(iv[i].size) <= total);
        for (int j = 0; j < i; j++) {
            bool live = iv[i].first <= iv[j].last && iv[j].first <= iv[i].last;
            bool apart = off[i] + al(iv[i].size) <= off[j] || off[j] + al(iv[j].size) <= off[i];
            if (live && !apart) fail_msg("%s: buffers %d and %d live together and overlap", what, i, j);
        }
    }
    size_t lb = vf_memplan_lower_bound(iv, n, 256);
    if ((double)total > 1.10 * (double)lb) fail_msg("%s: arena %zu > 1.10 x lower bound %zu", what, total, lb);
}

static void test_memplan(void **state)
{
    (void)state;
    /* a chain that grows and shrinks (an encoder-decoder): each value read
       by the next step only. (Greedy by size is not optimal everywhere: on
       a chain alternating 1000/2000/3000 bytes it needs 6144 bytes where
       5120 would do, 1.2x.) */
    static const size_t sizes[9] = {1000, 2000, 4000, 8000, 16000, 8000, 4000, 2000, 1000};
    vf_mem_interval chain[9];
    for (int i = 0; i < 9; i++) chain[i] = (vf_mem_interval){sizes[i], i, i + 1};
    check_plan(chain, 9, "chain");
    /* a diamond and a long-lived value beside short ones */
    vf_mem_interval diamond[] = {{4096, 0, 3}, {1024, 1, 2}, {1024, 1, 3}, {2048, 2, 4}, {512, 4, 5},
                                 {8192, 5, 6}, {8192, 6, 7}, {256, 0, 7}};
    check_plan(diamond, 8, "diamond");
    /* same sizes, staggered lifetimes (a pipeline of width 3) */
    vf_mem_interval stagger[12];
    for (int i = 0; i < 12; i++) stagger[i] = (vf_mem_interval){65536, i, i + 2};
    check_plan(stagger, 12, "stagger");
    /* all live at once: nothing may share */
    vf_mem_interval all[5] = {{100, 0, 9}, {300, 0, 9}, {200, 0, 9}, {700, 0, 9}, {50, 0, 9}};
    check_plan(all, 5, "all live");
    size_t off[5], total;
    assert_true(vf_memplan(all, 5, 256, off, &total));
    assert_int_equal(total, al(100) + al(300) + al(200) + al(700) + al(50));
    /* disjoint lifetimes share everything */
    vf_mem_interval seq[4] = {{5000, 0, 0}, {5000, 1, 1}, {3000, 2, 2}, {5000, 3, 3}};
    assert_true(vf_memplan(seq, 4, 256, off, &total));
    assert_int_equal(total, al(5000));
    assert_true(vf_memplan(NULL, 0, 256, off, &total));
    assert_int_equal(total, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memplan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
