/* vf_last_error / vf_last_status (vkfuse.h, "Failed creates"), with the
 * two small entry points a binding needs before it has any handle:
 * vf_version and vf_free. */
#include "util/last_error.h"

#include <stdio.h>
#include <stdlib.h>

/* Per thread, as errno: a create failing on one thread never changes what
   another thread reads. */
static _Thread_local vf_err last;

vf_status vf_last_error_set(vf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    last.status = status;
    vsnprintf(last.message, sizeof last.message, fmt, ap);
    va_end(ap);
    return status;
}

void vf_last_error_take(vf_status status, const vf_err *e, const char *who)
{
    bool has = e && e->status != VF_OK;
    if (status == VF_OK) status = has ? e->status : VF_ERROR_INVALID_ARGUMENT;
    if (has) vf_last_error_set(status, "%s", e->message);
    else vf_last_error_set(status, "%s failed (status %d)", who, (int)status);
}

const char *vf_last_error(void) { return last.message; }

vf_status vf_last_status(void) { return last.status; }

/* free underneath: a binding (ctypes, cffi) cannot be sure which C
   library's free matches the one that allocated, so the library that
   allocated gives it back. */
void vf_free(void *p) { free(p); }

const char *vf_version(void) { return VF_VERSION_STRING; }
