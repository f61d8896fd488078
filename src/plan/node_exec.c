/* Node semantics shared by the two walkers of concrete graphs (see
 * node_exec.h): one definition of what an OP, RESHAPE or ASSIGN node does. */
#include "plan/node_exec.h"

#include <string.h>

vf_shape vf_tref_shape(const vf_tref *r)
{
    vf_shape s = {.rank = r->rank};
    memcpy(s.dim, r->shape, sizeof s.dim);
    return s;
}

int64_t vf_tref_numel(const vf_tref *r)
{
    int64_t n = 1;
    for (int i = 0; i < r->rank; i++) n *= r->shape[i];
    return n;
}

void vf_tref_reshape(vf_tref *r, const vf_shape *s)
{
    r->rank = s->rank;
    memcpy(r->shape, s->dim, sizeof r->shape);
}

vf_status vf_node_infer_at(const vf_node *n, const vf_tref *in, vf_dtype *dt, vf_shape *out, vf_err *err)
{
    vf_dtype dts[3];
    vf_shape sh[3];
    if (n->n_in > 3)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "node takes %d inputs; a concrete walker reads at most 3",
                          n->n_in);
    for (int j = 0; j < n->n_in; j++) {
        dts[j] = in[j].dtype;
        sh[j] = vf_tref_shape(&in[j]);
    }
    return vf_infer(n, dts, sh, dt, out, err);
}

vf_exec vf_node_op_exec(const vf_node *n, const vf_tref *in, const vf_tref *out)
{
    vf_exec e = {.op = n->op, .attrs = n->attrs, .n_in = n->n_in, .out = *out};
    for (int j = 0; j < n->n_in; j++) e.in[j] = in[j];
    return e;
}

vf_exec vf_node_copy_exec(const vf_tref *src, const vf_shape *s, const vf_tref *out)
{
    vf_exec e = {.op = VF_OP_COPY, .n_in = 1, .in[0] = *src, .out = *out};
    vf_tref_reshape(&e.in[0], s);
    return e;
}

bool vf_node_assign_is_self(const vf_tref *value, const vf_tref *var)
{
    return value->buf == var->buf && value->offset == var->offset;
}
