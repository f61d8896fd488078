#include "util/env.h"

#include <string.h>
#include <strings.h>

bool vf_env_on(const char *v)
{
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "off") != 0;
}

bool vf_env_log_info(const char *v)
{
    return v && (strcasecmp(v, "info") == 0 || strcasecmp(v, "debug") == 0);
}

const char *vf_env_value(const char *v)
{
    return v && *v ? v : NULL;
}
