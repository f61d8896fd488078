/* What an environment variable's value means, for those that read the
 * environment (src/api/context.c, the one getenv site of the library,
 * and the tools): the values are passed in, nothing here reads the
 * environment itself. */
#ifndef VF_UTIL_ENV_H
#define VF_UTIL_ENV_H

#include <stdbool.h>

/* A switch turned on: set, not empty and none of "0", "false", "off". */
bool vf_env_on(const char *v);
/* VKFUSE_LOG's value asks for information lines ("info" or "debug"). */
bool vf_env_log_info(const char *v);
/* v, or NULL where it is NULL or empty (unset and "" mean the default). */
const char *vf_env_value(const char *v);

/* The environment as a lookup (getenv, or a test's table). */
typedef char *(*vf_env_get)(const char *name);

#endif
