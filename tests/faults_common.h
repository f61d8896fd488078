/* The fault tests' shared parts (test_faults.c, test_faults_device.c,
 * test_faults_host.c): a Vulkan context with the fields they vary, and
 * faults set in-process through the test hook vf_fault_set (util/fault.h). */
#ifndef VKFUSE_TESTS_FAULTS_COMMON_H
#define VKFUSE_TESTS_FAULTS_COMMON_H

#include "testutil.h"

#include <stdbool.h>

/* A Vulkan context (validation as VKFUSE_VALIDATION says) with cache_dir
   (NULL: the default), profiling when profile and device memory limit
   limit (0: none); *st is vf_context_create's status, which the caller
   checks: a fault may make it fail. */
vf_context *vt_fault_context(const char *cache_dir, bool profile, int64_t limit, vf_status *st);
/* Sets the faults of spec (NULL: none), counting each site's calls when
   count, every site's counter zeroed; fails the test if spec is not valid. */
void vt_fault_set(const char *spec, bool count);

#endif
