/* The calling thread's last failed create, for vf_last_error /
 * vf_last_status (vkfuse.h, "Failed creates"): a create that fails may
 * leave no context to hold its message (vf_context_create), so every
 * create also leaves it here. */
#ifndef VF_UTIL_LAST_ERROR_H
#define VF_UTIL_LAST_ERROR_H

#include "util/err.h"

/* Records status and the formatted message as this thread's last failed
   create. Returns status, so `return vf_last_error_set(VF_ERROR_..., ...)`. */
vf_status vf_last_error_set(vf_status status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A create failed with `status`: records it (VF_OK: e's status) and e's
   message (a context's sticky error, where the create wrote why). With no
   message in e (or e NULL), "<who> failed" instead, so that a failed
   create always leaves a reason. */
void vf_last_error_take(vf_status status, const vf_err *e, const char *who);

#endif
