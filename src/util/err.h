/* The sticky error record shared by the frontend and the backends.
 *
 * A context owns one vf_err; backends get a pointer to it at creation so a
 * Vulkan failure deep in the runtime lands in the same place as a shape
 * error in the frontend. Only the first error is kept (cairo's sticky
 * status): later failures are usually consequences of the first. */
#ifndef VF_UTIL_ERR_H
#define VF_UTIL_ERR_H

#include "vkfuse.h"

#include <stdarg.h>

typedef struct vf_err {
    vf_status status;
    char message[2048];
} vf_err;

/* Records status and the formatted message unless an error is already
   kept. Returns status, so `return vf_err_set(e, VF_ERROR_SHAPE, ...)`. */
vf_status vf_err_set(vf_err *e, vf_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
vf_status vf_err_vset(vf_err *e, vf_status status, const char *fmt, va_list ap);
void vf_err_clear(vf_err *e);
/* A failure of a backend that reports into be (its own record): records
   "<what>: <be's message>" in e (status VF_OK: be's status) and clears be;
   with nothing in be, "<what>" alone when status is a failure. Returns the
   status recorded. */
vf_status vf_err_backend(vf_err *e, vf_err *be, vf_status status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
vf_status vf_err_vbackend(vf_err *e, vf_err *be, vf_status status, const char *fmt, va_list ap);

#endif
