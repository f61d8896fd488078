/* The hazard tracker (src/vulkan/hazard.h) on its own, without a device:
 * which accesses conflict, the levels of recorded plans, the barriers of
 * call order, the test hook and the counting. The barrier command goes to
 * a stand-in for vkCmdPipelineBarrier that records what it was given. The
 * scheduler and plans using it on a device: test_vulkan_dispatch.c
 * (test_hazards), test_function_plan.c, test_sync_validation.c. */
#include "testutil.h"

#include "vulkan/hazard.h"

#include <stdint.h>

static int n_calls;
static VkPipelineStageFlags last_dst_stage;
static VkAccessFlags last_dst_access;

static VKAPI_ATTR void VKAPI_CALL fake_barrier(VkCommandBuffer cmd, VkPipelineStageFlags src,
                                               VkPipelineStageFlags dst, VkDependencyFlags dep, uint32_t n_mem,
                                               const VkMemoryBarrier *mem, uint32_t n_buf,
                                               const VkBufferMemoryBarrier *buf, uint32_t n_img,
                                               const VkImageMemoryBarrier *img)
{
    (void)cmd, (void)src, (void)dep, (void)n_buf, (void)buf, (void)n_img, (void)img;
    assert_int_equal(n_mem, 1);
    n_calls++;
    last_dst_stage = dst;
    last_dst_access = mem->dstAccessMask;
}

static vf_vk_device_table vk = {.vkCmdPipelineBarrier = fake_barrier};

static VkBuffer buffer(uintptr_t i) { return (VkBuffer)i; }

static vf_vk_access acc(uintptr_t b, VkDeviceSize begin, VkDeviceSize end, unsigned mode)
{
    return (vf_vk_access){buffer(b), begin, end, mode, 0};
}

/* Read after write, write after read and write after write conflict; read
   after read, disjoint ranges and other buffers do not. */
static void test_conflicts(void **state)
{
    (void)state;
    vf_vk_hazards h;
    vf_vk_hazards_init(&h, &vk, NULL);
    vf_vk_access w = acc(1, 0, 100, VF_VK_WRITE), r = acc(2, 0, 100, VF_VK_READ);
    assert_true(vf_vk_hazard_add(&h, &w, 1, 0));
    assert_true(vf_vk_hazard_add(&h, &r, 1, 0));
    struct { vf_vk_access a; int level; } cases[] = {
        {acc(1, 50, 60, VF_VK_READ), 1},   /* RAW */
        {acc(1, 99, 200, VF_VK_WRITE), 1}, /* WAW, one byte shared */
        {acc(2, 10, 20, VF_VK_WRITE), 1},  /* WAR */
        {acc(2, 10, 20, VF_VK_READ), 0},   /* RAR */
        {acc(1, 100, 200, VF_VK_READ), 0}, /* after the written range */
        {acc(3, 0, 100, VF_VK_WRITE), 0},  /* another buffer */
        {acc(2, 0, 100, VF_VK_READ | VF_VK_WRITE), 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(vf_vk_hazard_level(&h, &cases[i].a, 1, 0), cases[i].level);
    assert_int_equal(n_calls, 0);
    vf_vk_hazards_free(&h);
}

/* Levels: one above the highest conflicting level at or above the floor. */
static void test_levels(void **state)
{
    (void)state;
    vf_vk_hazards h;
    vf_vk_hazards_init(&h, &vk, NULL);
    vf_vk_access a0 = acc(1, 0, 8, VF_VK_WRITE), a3 = acc(2, 0, 8, VF_VK_WRITE);
    assert_true(vf_vk_hazard_add(&h, &a0, 1, 0));
    assert_true(vf_vk_hazard_add(&h, &a3, 1, 3));
    vf_vk_access both[2] = {acc(1, 0, 8, VF_VK_READ), acc(2, 0, 8, VF_VK_READ)};
    assert_int_equal(vf_vk_hazard_level(&h, both, 2, 0), 4);
    assert_int_equal(vf_vk_hazard_level(&h, both, 1, 0), 1);
    assert_int_equal(vf_vk_hazard_level(&h, both, 1, 2), 2); /* level 0 is below the floor */
    assert_int_equal(vf_vk_hazard_level(&h, both + 1, 1, 5), 5);
    vf_vk_hazard_clear(&h);
    assert_int_equal(vf_vk_hazard_level(&h, both, 2, 0), 0);
    vf_vk_hazards_free(&h);
}

/* Call order: a barrier before conflicting work only, which clears what
   is tracked; forced barriers; the counts; the barrier's scope. */
static void test_call_order(void **state)
{
    (void)state;
    n_calls = 0;
    vf_vk_hazards h;
    vf_vk_hazards_init(&h, &vk, NULL);
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    vf_vk_access w = acc(1, 0, 64, VF_VK_WRITE), r = acc(1, 0, 64, VF_VK_READ), o = acc(2, 0, 64, VF_VK_WRITE);
    assert_true(vf_vk_hazard_track(&h, cmd, &w, 1, false));
    assert_true(vf_vk_hazard_track(&h, cmd, &o, 1, false)); /* independent */
    assert_int_equal(h.barriers, 0);
    assert_true(vf_vk_hazard_track(&h, cmd, &r, 1, false)); /* RAW */
    assert_int_equal(h.barriers, 1);
    assert_int_equal(h.n, 1); /* only what came after the barrier */
    assert_true(vf_vk_hazard_track(&h, cmd, &o, 1, false)); /* o was written before the barrier */
    assert_int_equal(h.barriers, 1);
    assert_true(vf_vk_hazard_track(&h, cmd, &o, 1, true));
    assert_int_equal(h.barriers, 2);
    assert_int_equal(n_calls, 2);
    assert_int_equal(last_dst_stage, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
    vf_vk_hazard_barrier(&h, cmd, VF_VK_BARRIER_INDIRECT | VF_VK_BARRIER_HOST);
    assert_int_equal(h.barriers, 3);
    assert_int_equal(h.n, 0);
    assert_true(last_dst_stage & VK_PIPELINE_STAGE_HOST_BIT);
    assert_true(last_dst_stage & VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT);
    assert_true(last_dst_access & VK_ACCESS_INDIRECT_COMMAND_READ_BIT);
    assert_true(last_dst_access & VK_ACCESS_HOST_READ_BIT);
    vf_vk_hazards_free(&h);
}

/* The test hook leaves out as many due barriers as it says, never a forced
   one, and they are not counted. */
static void test_drop_hook(void **state)
{
    (void)state;
    n_calls = 0;
    int drop = 1;
    vf_vk_hazards h;
    vf_vk_hazards_init(&h, &vk, &drop);
    assert_true(vf_vk_hazard_due(&h, VK_NULL_HANDLE, 0, true));
    assert_int_equal(drop, 1);
    assert_false(vf_vk_hazard_due(&h, VK_NULL_HANDLE, 0, false));
    assert_int_equal(drop, 0);
    assert_true(vf_vk_hazard_due(&h, VK_NULL_HANDLE, 0, false));
    assert_int_equal(h.barriers, 2);
    assert_int_equal(n_calls, 2);
    vf_vk_hazards_free(&h);
}

/* Many accesses: the tracked list grows and keeps every one. */
static void test_many(void **state)
{
    (void)state;
    vf_vk_hazards h;
    vf_vk_hazards_init(&h, &vk, NULL);
    for (int i = 0; i < 5000; i++) {
        vf_vk_access a = acc(1, (VkDeviceSize)i * 16, (VkDeviceSize)i * 16 + 16, VF_VK_WRITE);
        assert_true(vf_vk_hazard_add(&h, &a, 1, i % 7));
    }
    assert_int_equal(h.n, 5000);
    vf_vk_access r = acc(1, 4999 * 16, 4999 * 16 + 1, VF_VK_READ);
    assert_int_equal(vf_vk_hazard_level(&h, &r, 1, 0), 4999 % 7 + 1);
    vf_vk_hazards_free(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conflicts), cmocka_unit_test(test_levels),   cmocka_unit_test(test_call_order),
        cmocka_unit_test(test_drop_hook), cmocka_unit_test(test_many),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
