/* The monotonic clock in nanoseconds, for the timings the stats and
 * VKFUSE_LOG report (compiles, pipeline creation). */
#ifndef VF_UTIL_CLOCK_H
#define VF_UTIL_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t vf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
