/* VKFUSE_TEST_LIMITS: a smaller device for tests (device.h).
 *
 * The limits that force kernels to split their work (workgroup counts,
 * storage-buffer range, loop iterations) are only reached on real devices
 * by tensors of hundreds of megabytes. Lowering them makes the same split
 * paths run on tensors of a few kilobytes, so every CI run covers them.
 * The limits are lowered where every layer reads them (the physical
 * device's limits and the codegen caps), once, when the device is made. */
#include "vulkan/device.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vf_status bad(vf_err *err, const char *spec, const char *why)
{
    return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                      "VKFUSE_TEST_LIMITS=%s: %s (expected name=value,... with max_groups >= 1,"
                      " max_buffer >= 256 bytes, max_loop >= 16)", spec, why);
}

static uint64_t lower(uint64_t have, uint64_t want) { return have && have < want ? have : want; }

vf_status vf_vk_test_limits_apply(vf_vk_device *d, const char *spec, vf_err *err)
{
    if (!spec || !*spec) return VF_OK;
    char buf[256];
    if (strlen(spec) >= sizeof buf) return bad(err, spec, "too long");
    snprintf(buf, sizeof buf, "%s", spec);
    VkPhysicalDeviceLimits *L = &d->props.limits;
    vf_device_caps *c = &d->caps;
    char *save = NULL;
    for (char *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) return bad(err, spec, "an item without '='");
        *eq = '\0';
        const char *val = eq + 1;
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(val, &end, 10);
        if (!*val || *end || errno || *val == '-' || v > UINT32_MAX)
            return bad(err, spec, "a value that is not a number below 2^32");
        if (strcmp(item, "max_groups") == 0) {
            if (v < 1) return bad(err, spec, "max_groups below 1");
            for (int i = 0; i < 3; i++) {
                L->maxComputeWorkGroupCount[i] = (uint32_t)lower(L->maxComputeWorkGroupCount[i], v);
                c->max_workgroup_count[i] = L->maxComputeWorkGroupCount[i];
            }
        } else if (strcmp(item, "max_buffer") == 0) {
            if (v < 256) return bad(err, spec, "max_buffer below 256 bytes");
            L->maxStorageBufferRange = (uint32_t)lower(L->maxStorageBufferRange, v);
            c->max_storage_buffer_range = L->maxStorageBufferRange;
        } else if (strcmp(item, "max_loop") == 0) {
            if (v < 16) return bad(err, spec, "max_loop below 16");
            c->max_loop_iterations = (uint32_t)lower(c->max_loop_iterations, v);
        } else {
            return bad(err, spec, "an unknown limit");
        }
    }
    return VF_OK;
}
