/* vf_window_of (backend.h): the one description of the window ops (slice,
 * pad, concat) that the CPU kernel and the GLSL generator both walk, so
 * the two backends cannot disagree on what an op means. */
#include "backend.h"

#include <string.h>

bool vf_window_of(const vf_exec *e, vf_window *w)
{
    memset(w, 0, sizeof *w);
    const vf_tref *x = &e->in[0];
    int r = e->out.rank;
    if (r != x->rank || r > VF_MAX_RANK) return false;
    w->rank = r;
    for (int d = 0; d < r; d++) {
        w->out[d] = e->out.shape[d];
        w->mul[d] = 1;
        w->div[d] = 1;
        w->size[0][d] = x->shape[d];
    }
    switch (e->op) {
    case VF_OP_SLICE:
        w->n_src = 1;
        for (int d = 0; d < r; d++) {
            int64_t start, len = vf_slice_dim(x->shape[d], e->attrs.lo[d], e->attrs.hi[d], e->attrs.step[d], &start);
            if (len != w->out[d]) return false;
            /* a dim of at most one element reads its start only: any step
               (-INT64_MAX too) is step 1 there, which 32-bit kernels take */
            w->mul[d] = len > 1 ? e->attrs.step[d] : 1;
            w->off[0][d] = start;
        }
        return true;
    case VF_OP_PAD:
        w->n_src = 1;
        w->has_fill = true;
        for (int d = 0; d < r; d++) {
            if (vf_pad_dim(x->shape[d], e->attrs.lo[d], e->attrs.hi[d], e->attrs.step[d]) != w->out[d]) return false;
            w->off[0][d] = -e->attrs.lo[d];
            w->div[d] = e->attrs.step[d];
            /* a dim that only copies (nothing added) needs no test */
            if (e->attrs.lo[d] || e->attrs.hi[d] || (e->attrs.step[d] > 1 && x->shape[d] > 1)) w->check[0] |= 1u << d;
        }
        return true;
    case VF_OP_SLICE_GRAD: {
        /* output o (an index of in[1]) holds g[t / |step|] with t = o - start
           (t = start - o downwards) when that is a multiple of |step| in range */
        const vf_tref *like = &e->in[1];
        if (e->n_in != 2 || like->rank != r) return false;
        w->n_src = 1;
        w->has_fill = true;   /* 0 (attrs.value is 0: not read) */
        for (int d = 0; d < r; d++) {
            int64_t start, s = e->attrs.step[d];
            int64_t len = vf_slice_dim(like->shape[d], e->attrs.lo[d], e->attrs.hi[d], s, &start);
            if (len != x->shape[d] || like->shape[d] != w->out[d]) return false;
            if (len <= 1) s = s > 0 ? 1 : -1;   /* one element: the step's size does not matter (as above) */
            w->mul[d] = s > 0 ? 1 : -1;
            w->off[0][d] = s > 0 ? -start : start;
            w->div[d] = s > 0 ? s : -s;
            /* every output index is a source element only for a whole-dim slice */
            if (!(len == w->out[d] && w->div[d] == 1 && start == (s > 0 ? 0 : len - 1))) w->check[0] |= 1u << d;
        }
        return true;
    }
    case VF_OP_CONCAT: {
        const vf_tref *y = &e->in[1];
        int a = e->attrs.axis;
        if (e->n_in != 2 || y->rank != r || a < 0 || a >= r) return false;
        w->n_src = 2;
        for (int d = 0; d < r; d++) {
            w->size[1][d] = y->shape[d];
            if (d != a && (x->shape[d] != w->out[d] || y->shape[d] != w->out[d])) return false;
        }
        if (x->shape[a] + y->shape[a] != w->out[a]) return false;
        w->off[1][a] = -x->shape[a];
        w->check[0] = 1u << a;   /* source 1 holds the rest */
        return true;
    }
    default: return false;
    }
}
