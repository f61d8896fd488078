#include "util/err.h"

#include <stdio.h>

vf_status vf_err_vset(vf_err *e, vf_status status, const char *fmt, va_list ap)
{
    if (!e || status == VF_OK) return status;
    if (e->status != VF_OK) return status; /* keep the first */
    e->status = status;
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    return status;
}

vf_status vf_err_set(vf_err *e, vf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vf_err_vset(e, status, fmt, ap);
    va_end(ap);
    return status;
}

void vf_err_clear(vf_err *e)
{
    e->status = VF_OK;
    e->message[0] = '\0';
}

vf_status vf_err_vbackend(vf_err *e, vf_err *be, vf_status status, const char *fmt, va_list ap)
{
    char what[1024];
    vsnprintf(what, sizeof what, fmt, ap);
    if (be->status != VF_OK) {
        if (status == VF_OK) status = be->status;
        vf_err_set(e, status, "%s: %s", what, be->message);
    } else if (status != VF_OK) {
        vf_err_set(e, status, "%s", what);
    }
    vf_err_clear(be);
    return status;
}

vf_status vf_err_backend(vf_err *e, vf_err *be, vf_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    status = vf_err_vbackend(e, be, status, fmt, ap);
    va_end(ap);
    return status;
}

/* Here, the lowest layer, because every layer names statuses in its messages. */
static const char *const status_names[] = {
    "VF_OK", "VF_ERROR_INVALID_ARGUMENT", "VF_ERROR_SHAPE", "VF_ERROR_DTYPE",
    "VF_ERROR_OUT_OF_MEMORY", "VF_ERROR_DEVICE", "VF_ERROR_UNSUPPORTED", "VF_ERROR_COMPILE",
    "VF_ERROR_TRACE", "VF_ERROR_IO", "VF_ERROR_FORMAT",
};

const char *vf_status_name(vf_status s)
{
    if ((unsigned)s < sizeof status_names / sizeof *status_names) return status_names[s];
    return "VF_ERROR_UNKNOWN";
}
