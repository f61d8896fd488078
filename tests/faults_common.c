/* The fault tests' context and fault setting (faults_common.h). */
#include "faults_common.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

vf_context *vt_fault_context(const char *cache_dir, bool profile, int64_t limit, vf_status *st)
{
    const char *v = getenv("VKFUSE_VALIDATION");
    vf_context_desc d = {.backend = VF_BACKEND_VULKAN, .validation = v && strcmp(v, "1") == 0,
                         .cache_dir = cache_dir, .profile = profile, .device_memory_limit = limit};
    vf_context *ctx = NULL;
    *st = vf_context_create(&d, &ctx);
    return ctx;
}

void vt_fault_set(const char *spec, bool count)
{
    vf_err e = {0};
    assert_int_equal(vf_fault_set(spec, count, &e), VF_OK);
}
