/* User kernels' shared state (graph/ukernel.h): one call resolved from its
 * inputs' dtypes and shapes, the same for an eager call, a traced node run
 * node by node and a recorded plan. */
#include "graph/ukernel.h"
#include "util/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t numel(const vf_tensor_spec *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

vf_status vf_ukernel_resolve(const vf_ukernel *k, const vf_tensor_spec *in_spec, const void *params,
                             vf_tensor_spec *out_spec, vf_kernel_shapes *shapes, vf_ukernel_exec *x, char *msg,
                             size_t len)
{
    memcpy(out_spec, k->out_spec, sizeof(vf_tensor_spec) * (size_t)k->n_out);
    *shapes = (vf_kernel_shapes){.n_inputs = k->n_in, .n_outputs = k->n_out, .in = in_spec, .out = out_spec,
                                 .params = params};
    if (k->output_shapes) {
        vf_status s = k->output_shapes(shapes, k->user);
        if (s != VF_OK) {
            snprintf(msg, len, "its output_shapes callback failed (returned %s)",
                     vf_status_name((unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_SHAPE));
            return (unsigned)s <= VF_ERROR_FORMAT ? s : VF_ERROR_SHAPE;
        }
    }
    for (int j = 0; j < k->n_out; j++) {
        out_spec[j].dtype = k->out_spec[j].dtype; /* the desc's, whatever the callback did */
        bool ok = out_spec[j].rank >= 0 && out_spec[j].rank <= VF_MAX_RANK;
        for (int d = 0; ok && d < out_spec[j].rank; d++) ok = out_spec[j].shape[d] >= 0;
        if (!ok) {
            snprintf(msg, len, "output %d has rank %d or a negative dim (from %s)", j, out_spec[j].rank,
                     k->output_shapes ? "its output_shapes callback" : "desc.outputs");
            return VF_ERROR_SHAPE;
        }
        int64_t n = 1;
        for (int d = 0; d < out_spec[j].rank; d++)
            if ((n *= out_spec[j].shape[d]) > (int64_t)UINT32_MAX) {
                snprintf(msg, len, "output %d has more than 2^32 - 1 elements", j);
                return VF_ERROR_SHAPE;
            }
    }
    /* push constants: the parameters, then the element counts */
    uint32_t off = k->param_bytes;
    bool empty = false;
    if (k->param_bytes) memcpy(x->push, params, k->param_bytes);
    for (int i = 0; i < k->n_in + k->n_out; i++) {
        const vf_tensor_spec *t = i < k->n_in ? &in_spec[i] : &out_spec[i - k->n_in];
        int64_t n = numel(t);
        if (n > (int64_t)UINT32_MAX) {
            snprintf(msg, len, "input %d has more than 2^32 - 1 elements", i);
            return VF_ERROR_SHAPE;
        }
        empty = empty || n == 0;
        uint32_t u = (uint32_t)n;
        memcpy(x->push + off, &u, 4);
        off += 4;
    }
    x->push_size = off;
    x->empty = empty;
    if (empty) { /* nothing runs: the callers make zeros */
        x->groups[0] = x->groups[1] = x->groups[2] = 1;
    } else if (k->dispatch) {
        uint32_t g[3] = {0, 0, 0};
        k->dispatch(shapes, k->per_group, g, k->user);
        memcpy(x->groups, g, sizeof g);
        if (!g[0] || !g[1] || !g[2]) {
            snprintf(msg, len, "its dispatch callback gave %u x %u x %u workgroups; each must be >= 1", g[0], g[1],
                     g[2]);
            return VF_ERROR_INVALID_ARGUMENT;
        }
    } else if (k->groups[0]) {
        for (int d = 0; d < 3; d++) x->groups[d] = k->groups[d] ? k->groups[d] : 1;
    } else {
        int64_t g = (numel(&out_spec[0]) + k->per_group - 1) / k->per_group;
        x->groups[0] = (uint32_t)(g < 1 ? 1 : g);
        x->groups[1] = x->groups[2] = 1;
    }
    x->k = k;
    x->shapes = shapes;
    return VF_OK;
}
