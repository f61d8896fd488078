/* The Vulkan runtime's environment knobs (vf_vk_options), parsed here in the
 * backend contract so that every creator of a Vulkan backend (the context,
 * the Amber runner, tests) reads them alike; the lookup is the caller's, so
 * the library's one getenv site stays src/api/context.c. */
#include "backend.h"
#include "util/env.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

void vf_vk_options_read(vf_vk_options *o, vf_env_get get)
{
    o->loader = get("VKFUSE_VULKAN_LOADER");
    o->test_caps = get("VKFUSE_TEST_CAPS");
    o->test_limits = get("VKFUSE_TEST_LIMITS");
    o->test_staging = vf_env_on(get("VKFUSE_TEST_STAGING"));
    const char *rb = vf_env_value(get("VKFUSE_ROBUST"));
    o->no_robust = rb && strcmp(rb, "0") == 0;
    o->dump_dir = vf_env_value(get("VKFUSE_DUMP"));
    o->log_info = vf_env_log_info(get("VKFUSE_LOG"));
    o->timeout_ms = vf_env_value(get("VKFUSE_TIMEOUT_MS"));             /* parsed (and refused) by the backend */
    o->memory_limit = vf_env_value(get("VKFUSE_DEVICE_MEMORY_LIMIT")); /* the same */
    char *end = NULL;
    /* a count from 1 to 64; anything else: the default */
    const char *ct = vf_env_value(get("VKFUSE_COMPILE_THREADS"));
    long n = ct ? strtol(ct, &end, 10) : 0;
    o->compile_threads = ct && end != ct && *end == '\0' && n >= 1 && n <= 64 ? (int)n : 0;
    const char *tiered = vf_env_value(get("VKFUSE_TIERED"));
    o->tiered_off = tiered && strcmp(tiered, "0") == 0;
    /* Mesa's own switch (22.3 also reads the deprecated GLSL name), read
       as Mesa reads it: 1, true or yes */
    const char *mesa[2] = {get("MESA_SHADER_CACHE_DISABLE"), get("MESA_GLSL_CACHE_DISABLE")};
    for (int i = 0; i < 2; i++)
        if (mesa[i] && (!strcmp(mesa[i], "1") || !strcasecmp(mesa[i], "true") || !strcasecmp(mesa[i], "yes")))
            o->driver_cache_off = true;
    o->memory_cache = vf_env_value(get("VKFUSE_MEMORY_CACHE")); /* parsed (and refused) by the backend */
}
