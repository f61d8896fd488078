/* vf_tensor_copy_to: a tensor of one context copied into another (another
 * device, or another context on the same one), through the host. */
#include "api/api.h"
#include "util/fault.h"

#include <stdlib.h>

/* dst's error, under dst's lock only. */
static vf_tensor *fail_dst(vf_context *dst, vf_status s, const char *fmt, const char *arg)
{
    VF_LOCKED(dst);
    if (!(s == VF_ERROR_INVALID_ARGUMENT && dst->err.status != VF_OK)) vf_fail(dst, s, fmt, arg);
    return NULL;
}

vf_tensor *vf_tensor_copy_to(vf_context *dst, vf_tensor *t)
{
    /* No lock held here: the calls below take the source's context lock,
       then the destination's, one at a time, so two threads copying in
       opposite directions cannot deadlock. */
    if (!dst) return NULL;
    if (!t) return fail_dst(dst, VF_ERROR_INVALID_ARGUMENT, "vf_tensor_copy_to: tensor is NULL%s", "");
    if (vf_context_tracing(dst))
        return fail_dst(dst, VF_ERROR_TRACE, "vf_tensor_copy_to: %s is tracing a vf_function; copy between "
                        "contexts outside traced bodies", "the destination context");
    vf_context *src = vf_tensor_context(t);
    vf_dtype dt = vf_tensor_dtype(t);
    int rank = vf_tensor_rank(t);
    int64_t shape[VF_MAX_RANK] = {0};
    for (int a = 0; a < rank && a < VF_MAX_RANK; a++) shape[a] = vf_tensor_dim(t, a);
    size_t bytes = vf_tensor_bytes(t);
    void *data = rank >= 0 ? vf_malloc(bytes ? bytes : 1) : NULL;
    if (rank >= 0 && !data) return fail_dst(dst, VF_ERROR_OUT_OF_MEMORY, "vf_tensor_copy_to: %s", "out of host memory (malloc failed)");
    if (rank < 0 || vf_tensor_read(t, data, bytes) != VF_OK) {
        free(data);
        /* the source's context holds the reason */
        return fail_dst(dst, src && vf_status_get(src) != VF_OK ? vf_status_get(src) : VF_ERROR_INVALID_ARGUMENT,
                        "vf_tensor_copy_to: reading the source tensor failed: %s",
                        src ? vf_error_message(src) : "it is not a live tensor");
    }
    vf_tensor *r = vf_tensor_from_host(dst, dt, rank, shape, data);
    free(data);
    return r;
}
