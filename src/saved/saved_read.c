/* vf_function_load: reads and validates a saved function (docs/FORMAT.md).
 * Nothing in the file is trusted: the magic, version, declared size and
 * checksum come first; then every count and length is checked against the
 * bytes left in its section and against fixed limits before anything is
 * allocated, and every graph is checked as the runtime needs it (inputs
 * refer to earlier nodes, kinds/ops/dtypes/attrs in range, control-flow
 * arities consistent, shapes re-inferred and equal to the saved ones);
 * the kernel section (version 2) is read by saved_kernels.c. Errors are
 * VF_ERROR_FORMAT with the byte offset and the field. */
#include "saved/saved_rd.h"
#include "kernels/kernels.h"
#include "util/fault.h"
#include "graph/graph.h"
#include "graph/uelem.h"
#include "util/dtype.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool vf_saved_bad(vf_saved_rd *r, const char *fmt, ...)
{
    if (r->bad) return false;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    r->bad = true;
    vf_fail(r->ctx, VF_ERROR_FORMAT, "vf_function_load: '%s': %s section at byte %zu: %s; the file is damaged or "
            "not a saved vkfuse function (save it again with vf_function_save)", r->what, r->sec, r->pos, msg);
    return false;
}

bool vf_saved_need(vf_saved_rd *r, size_t n, const char *field)
{
    if (r->bad) return false;
    if (n > r->end - r->pos) return vf_saved_bad(r, "%s needs %zu bytes but the section has %zu left", field, n, r->end - r->pos);
    return true;
}

uint64_t vf_saved_le(vf_saved_rd *r, int n, const char *field)
{
    if (!vf_saved_need(r, (size_t)n, field)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)r->p[r->pos + (size_t)i] << (8 * i);
    r->pos += (size_t)n;
    return v;
}

uint32_t vf_saved_count(vf_saved_rd *r, uint32_t max, size_t min, const char *field)
{
    size_t at = r->pos;
    uint32_t n = U32(field);
    if (r->bad) return 0;
    if (n > max || (min && n > (r->end - r->pos) / min)) {
        r->pos = at;
        vf_saved_bad(r, "%s is %u (at most %u, and the section's %zu bytes left hold at most %zu)", field, n, max,
                     r->end - r->pos - 4, min ? (r->end - r->pos - 4) / min : (size_t)max);
        return 0;
    }
    return n;
}

static bool get_shape(vf_saved_rd *r, vf_shape *s, bool targets, const char *field)
{
    size_t at = r->pos;
    memset(s, 0, sizeof *s);
    unsigned rank = U8(field);
    uint32_t sym = targets ? 0 : U32(field);
    if (r->bad) return false;
    if (rank > VF_MAX_RANK || (sym >> rank) != 0) {
        r->pos = at;
        return vf_saved_bad(r, "%s: rank %u (at most %d) or symbolic-dim bits 0x%x beyond it", field, rank, VF_MAX_RANK, sym);
    }
    s->rank = (int)rank;
    s->sym = sym;
    int inferred = 0;
    double numel = 1;
    for (unsigned d = 0; d < rank; d++) {
        at = r->pos;
        int64_t v = (int64_t)U64(field);
        if (r->bad) return false;
        bool ok = v >= 0 && v <= ((int64_t)1 << 40);
        if (targets && v == -1 && !inferred++) ok = true;
        if (!ok) {
            r->pos = at;
            return vf_saved_bad(r, "%s: dim %u is %lld (0..2^40%s)", field, d, (long long)v, targets ? ", or one -1" : "");
        }
        s->dim[d] = v;
        numel *= v > 0 ? (double)v : 1;
    }
    if (numel > (double)((int64_t)1 << 40)) return vf_saved_bad(r, "%s: %g elements is more than 2^40", field, numel);
    return true;
}

static bool get_dtype(vf_saved_rd *r, vf_dtype *dt, const char *field)
{
    size_t at = r->pos;
    unsigned v = U8(field);
    if (r->bad) return false;
    if (!vf_dtype_valid((int)v)) {
        r->pos = at;
        return vf_saved_bad(r, "%s: dtype %u is not a vf_dtype (0..%d)", field, v, VF_BOOL);
    }
    *dt = (vf_dtype)v;
    return true;
}

/* ---- graphs -------------------------------------------------------------- */

typedef struct {
    int n_caps;
    const bool *cap_var;
    const vf_dtype *cap_dt;
    const vf_shape *cap_shape;
} gctx;

static vf_graph *get_graph(vf_saved_rd *r, const gctx *gc, vf_graph *parent, int depth);

/* Node i of g, read and checked against g's earlier nodes. */
static bool get_node(vf_saved_rd *r, const gctx *gc, vf_graph *g, int i, int depth)
{
    size_t at = r->pos;
    unsigned kind = U8("node kind"), dtv = U8("node dtype");
    uint32_t op = U32("node op");
    uint32_t n_in = vf_saved_count(r, VF_SAVED_MAX_IO, 4, "node input count");
    if (r->bad) return false;
    /* HOST: never saved (its callback is a pointer of the saving process) */
    if (kind >= VF_NODE_KIND_COUNT || kind == VF_NODE_HOST || op >= VF_OP_COUNT || !vf_dtype_valid((int)dtv)) {
        r->pos = at;
        return vf_saved_bad(r, "node %d: kind %u, op %u or dtype %u out of range", i, kind, op, dtv);
    }
    int small[16], *in = n_in <= 16 ? small : vf_malloc(sizeof *in * n_in);
    if (!in) return vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)"), r->bad = true, false;
    for (uint32_t k = 0; k < n_in && !r->bad; k++) {
        uint32_t v = U32("node input");
        if (!r->bad && v >= (uint32_t)i) vf_saved_bad(r, "node %d input %u is value %u, not an earlier node", i, k, v);
        else if (!r->bad && (g->nodes[v].kind == VF_NODE_COND || g->nodes[v].kind == VF_NODE_WHILE ||
                             g->nodes[v].kind == VF_NODE_KERNEL) != (kind == VF_NODE_PROJ))
            vf_saved_bad(r, "node %d input %u: only a proj node reads a cond/while/kernel tuple (and only one)", i, k);
        in[k] = (int)v;
    }
    int id = r->bad ? -1 : vf_graph_add(g, (vf_node_kind)kind, (int)n_in, in);
    if (in != small) free(in);
    if (r->bad) return false;
    if (id < 0) return vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)"), r->bad = true, false;
    vf_node *n = &g->nodes[id];
    n->op = (vf_op)op;
    n->dtype = (vf_dtype)dtv;
    get_shape(r, &n->shape, false, "node shape");
    n->index = (int)U32("node index");
    n->is_var = U8("node is_var") != 0;
    n->attrs.axes_mask = U32("attrs.axes_mask");
    n->attrs.keepdims = U8("attrs.keepdims") != 0;
    n->attrs.axis = (int)U32("attrs.axis");
    for (int d = 0; d < VF_MAX_RANK; d++) n->attrs.perm[d] = (int)U8("attrs.perm");
    n->attrs.trans_a = U8("attrs.trans_a") != 0;
    n->attrs.trans_b = U8("attrs.trans_b") != 0;
    n->attrs.dtype = (vf_dtype)U8("attrs.dtype");
    uint64_t bits = U64("attrs.value");
    memcpy(&n->attrs.value, &bits, sizeof bits);
    n->attrs.seed = U64("attrs.seed");
    if (n->kind == VF_NODE_OP && (vf_op_get(n->op)->attrs & VF_ATTR_WINDOW))
        for (int d = 0; d < VF_MAX_RANK; d++) {
            n->attrs.lo[d] = (int64_t)U64("attrs.lo");
            n->attrs.hi[d] = (int64_t)U64("attrs.hi");
            n->attrs.step[d] = (int64_t)U64("attrs.step");
        }
    /* window ops add their geometry (files before them hold none) */
    if (n->kind == VF_NODE_OP && (vf_op_get(n->op)->attrs & VF_ATTR_CONV)) {
        int32_t *f = &n->attrs.conv.stride[0];
        for (int k = 0; k < VF_CONV_ATTR_FIELDS; k++) f[k] = (int32_t)U32("attrs.conv");
    }
    /* a user elementwise op: the node holds the one reference (saved_uelem.c) */
    if (n->kind == VF_NODE_OP && vf_op_holds_uelem(n->op) && !r->bad &&
        !(n->attrs.uelem = vf_saved_get_uelem(r, i, true)))
        return false;
    /* the same op created in the loading context: its C functions come back */
    if (n->kind == VF_NODE_OP && vf_op_holds_uelem(n->op) && !r->bad) {
        vf_uelem *live = vf_uelem_match_live(r->ctx, n->attrs.uelem);
        if (live) {
            vf_uelem_release(n->attrs.uelem);
            n->attrs.uelem = vf_uelem_retain(live);
        }
    }
    if (r->bad) return false;
    vf_dtype in_dt[16];
    vf_shape ins[16];
    int ni = n->n_in < 16 ? n->n_in : 16;
    for (int k = 0; k < ni; k++) {
        in_dt[k] = g->nodes[n->in[k]].dtype;
        ins[k] = g->nodes[n->in[k]].shape;
    }
    switch (n->kind) {
    case VF_NODE_PARAM:
        if (n->n_in || n->index < 0 || n->index >= g->n_params) return vf_saved_bad(r, "node %d: param %d of %d", i, n->index, g->n_params);
        break;
    case VF_NODE_CAPTURE:
    case VF_NODE_ASSIGN: {
        if (n->index < 0 || n->index >= gc->n_caps) return vf_saved_bad(r, "node %d: capture %d of %d", i, n->index, gc->n_caps);
        if (n->kind == VF_NODE_CAPTURE && (n->n_in || n->is_var != gc->cap_var[n->index]))
            return vf_saved_bad(r, "node %d: capture %d is%s a variable", i, n->index, gc->cap_var[n->index] ? "" : " not");
        if (n->kind == VF_NODE_CAPTURE &&
            (n->dtype != gc->cap_dt[n->index] || !vf_shape_equal(&n->shape, &gc->cap_shape[n->index])))
            return vf_saved_bad(r, "node %d: capture %d's dtype or shape differs from the captured tensor's", i, n->index);
        if (n->kind == VF_NODE_ASSIGN && (n->n_in != 1 || !gc->cap_var[n->index]))
            return vf_saved_bad(r, "node %d: an assign needs one input and a variable", i);
        break;
    }
    case VF_NODE_CONST: {
        uint64_t bytes = U64("const bytes");
        if (r->bad) return false;
        if (n->n_in || bytes != (uint64_t)vf_shape_numel(&n->shape) * vf_dtype_size(n->dtype) || n->shape.sym)
            return vf_saved_bad(r, "node %d: a constant of %llu bytes for %s elements", i, (unsigned long long)bytes, "its shape's");
        if (!vf_saved_need(r, (size_t)bytes, "const data")) return false;
        n->data = vf_malloc(bytes ? (size_t)bytes : 1);
        if (!n->data) return vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)"), r->bad = true, false;
        memcpy(n->data, r->p + r->pos, (size_t)bytes);
        n->bytes = (size_t)bytes;
        r->pos += (size_t)bytes;
        break;
    }
    case VF_NODE_RESHAPE:
        if (!get_shape(r, &n->target, true, "reshape target")) return false;
        if (n->n_in != 1) return vf_saved_bad(r, "node %d: a reshape has one input", i);
        break;
    case VF_NODE_PRINT: {
        uint32_t len = vf_saved_count(r, VF_SAVED_MAX_NAME, 1, "print label length");
        if (r->bad) return false;
        if (n->n_in != 1) return vf_saved_bad(r, "node %d: a print has one input", i);
        n->label = vf_malloc((size_t)len + 1);
        if (!n->label) return vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)"), r->bad = true, false;
        memcpy(n->label, r->p + r->pos, len);
        n->label[len] = '\0';
        r->pos += len;
        break;
    }
    case VF_NODE_COND:
    case VF_NODE_WHILE: {
        n->n_out = (int)vf_saved_count(r, VF_SAVED_MAX_IO, 0, "tuple size");
        n->split = (int)U32("split");
        n->max_iterations = (int)U32("max_iterations");
        if (r->bad) return false;
        if (depth >= VF_SAVED_MAX_DEPTH) return vf_saved_bad(r, "control flow nested deeper than %d", VF_SAVED_MAX_DEPTH);
        for (int k = 0; k < 2; k++)
            if (!(n = &g->nodes[id], n->sub[k] = get_graph(r, gc, g, depth + 1))) return false;
        n = &g->nodes[id];
        const vf_graph *a = n->sub[0], *b = n->sub[1];
        bool ok;
        if (n->kind == VF_NODE_COND) {
            int ne = a->n_explicit;
            ok = n->n_in >= 1 && b->n_explicit == ne && n->split == a->n_params - ne &&
                 1 + ne + (a->n_params - ne) + (b->n_params - ne) == n->n_in && a->n_outputs == n->n_out &&
                 b->n_outputs == n->n_out && in_dt[0] == VF_BOOL;
        } else {
            int nv = n->n_out;
            ok = a->n_explicit == nv && b->n_explicit == nv && n->split == a->n_params - nv &&
                 nv + (a->n_params - nv) + (b->n_params - nv) == n->n_in && a->n_outputs == 1 && b->n_outputs == nv;
        }
        if (!ok) return vf_saved_bad(r, "node %d: the %s's inputs, params and outputs do not match its subgraphs", i,
                                     n->kind == VF_NODE_COND ? "cond" : "while");
        return true; /* shapes of the tuple: checked at run time */
    }
    case VF_NODE_PROJ:
        if (n->n_in != 1 || n->index < 0 || n->index >= g->nodes[n->in[0]].n_out)
            return vf_saved_bad(r, "node %d: proj %d of a tuple of %d", i, n->index, n->n_in == 1 ? g->nodes[n->in[0]].n_out : 0);
        /* a loaded kernel's output: the shape traced (a kernel bound to the
           context's live one keeps its own shape rule) */
        if (g->nodes[n->in[0]].kind == VF_NODE_KERNEL && g->nodes[n->in[0]].uk->loaded) {
            vf_ukernel *k = g->nodes[n->in[0]].uk;
            vf_tensor_spec *o = &k->out_spec[n->index];
            if (n->dtype != o->dtype) return vf_saved_bad(r, "node %d: kernel output %d's dtype differs", i, n->index);
            o->rank = n->shape.rank;
            memcpy(o->shape, n->shape.dim, sizeof o->shape);
        }
        return true;
    case VF_NODE_KERNEL:
        return vf_saved_get_kernel(r, g, id, i);
    case VF_NODE_OP:
        /* the fields the op reads are checked (by vf_infer below, with the
           input count and dtypes); the others are ignored (cleared) */
        n->attrs = vf_attrs_read(n->op, &n->attrs);
        break;
    default: break;
    }
    if (n->kind == VF_NODE_OP || n->kind == VF_NODE_RESHAPE || n->kind == VF_NODE_ASSIGN || n->kind == VF_NODE_PRINT) {
        vf_dtype dt;
        vf_shape out = n->kind == VF_NODE_ASSIGN ? gc->cap_shape[n->index] : (vf_shape){0};
        vf_err err = {0};
        if (n->kind == VF_NODE_ASSIGN && in_dt[0] != gc->cap_dt[n->index]) return vf_saved_bad(r, "node %d: assign of another dtype", i);
        if (vf_infer(n, in_dt, ins, &dt, &out, &err) != VF_OK) return vf_saved_bad(r, "node %d: %s", i, err.message);
        if (n->kind != VF_NODE_ASSIGN && (dt != n->dtype || !vf_shape_equal(&out, &n->shape)))
            return vf_saved_bad(r, "node %d (%s): the saved dtype/shape differs from the one its inputs give", i, vf_node_name(n));
    }
    return true;
}

static vf_graph *get_graph(vf_saved_rd *r, const gctx *gc, vf_graph *parent, int depth)
{
    uint32_t n = vf_saved_count(r, VF_SAVED_MAX_NODES, 56, "node count");
    uint32_t np = U32("param count"), ne = U32("explicit param count");
    uint32_t no = vf_saved_count(r, VF_SAVED_MAX_IO, 4, "output count");
    if (r->bad) return NULL;
    if (np > VF_SAVED_MAX_IO || ne > np) return vf_saved_bad(r, "params %u, explicit %u", np, ne), NULL;
    vf_graph *g = vf_graph_new(parent);
    int *outs = vf_malloc(sizeof *outs * ((size_t)no + 1));
    if (!g || !outs) {
        vf_graph_free(g);
        free(outs);
        vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
        r->bad = true;
        return NULL;
    }
    g->n_params = (int)np;
    g->n_explicit = (int)ne;
    for (uint32_t k = 0; k < no; k++) outs[k] = (int)U32("output");
    for (uint32_t i = 0; i < n && !r->bad; i++) get_node(r, gc, g, (int)i, depth);
    for (uint32_t k = 0; k < no && !r->bad; k++) {
        int o = outs[k];
        if (o < 0 || o >= g->n || g->nodes[o].kind == VF_NODE_COND || g->nodes[o].kind == VF_NODE_WHILE)
            vf_saved_bad(r, "graph output %u is value %d of %d nodes (or a tuple)", k, o, g->n);
    }
    if (!r->bad && !vf_graph_set_outputs(g, (int)no, outs)) {
        vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
        r->bad = true;
    }
    free(outs);
    if (r->bad) {
        vf_graph_free(g);
        return NULL;
    }
    return g;
}

/* ---- sections ------------------------------------------------------------ */

typedef struct {
    vf_tensor **t;       /* retained: made here */
    int n;
} tensors;

static void tensors_free(tensors *ts)
{
    for (int i = 0; i < ts->n; i++) vf_tensor_drop(ts->t[i]);
    free(ts->t);
}

static bool read_tensors(vf_saved_rd *r, tensors *ts)
{
    vf_context *ctx = r->ctx;
    uint32_t n = vf_saved_count(r, VF_SAVED_MAX_IO, 15, "tensor count");
    if (r->bad) return false;
    ts->t = vf_calloc((size_t)n + 1, sizeof *ts->t);
    if (!ts->t) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)"), false;
    for (uint32_t i = 0; i < n; i++) {
        bool var = U8("tensor is_variable") != 0;
        vf_dtype dt = VF_F32;
        vf_shape s;
        if (!get_dtype(r, &dt, "tensor dtype") || !get_shape(r, &s, false, "tensor shape")) return false;
        size_t at = r->pos;
        uint64_t bytes = U64("tensor bytes");
        if (r->bad) return false;
        if (s.sym || bytes != (uint64_t)vf_shape_numel(&s) * vf_dtype_size(dt)) {
            r->pos = at;
            return vf_saved_bad(r, "tensor %u: %llu bytes for its shape", i, (unsigned long long)bytes);
        }
        if (!vf_saved_need(r, (size_t)bytes, "tensor data")) return false;
        vf_scope_begin(ctx);
        vf_tensor *t = vf_tensor_from_host(ctx, dt, s.rank, s.dim, r->p + r->pos);
        if (t && var) t->is_variable = true; /* fresh storage of its own: as vf_variable makes, without its copy kernel */
        if (t) ts->t[ts->n++] = vf_tensor_hold(t);
        vf_scope_end(ctx);
        if (!t) return r->bad = true, false;
        r->pos += (size_t)bytes;
    }
    return true;
}

static bool read_function(vf_saved_rd *r, char *name, size_t len, int *n_in, int *n_out, vf_tensor_spec **sig)
{
    uint32_t nl = vf_saved_count(r, VF_SAVED_MAX_NAME, 1, "name length");
    if (r->bad) return false;
    snprintf(name, len, "%.*s", (int)nl, (const char *)r->p + r->pos);
    for (char *c = name; *c; c++)
        if ((unsigned char)*c < 32) *c = '?';
    r->pos += nl;
    *n_in = (int)vf_saved_count(r, VF_SAVED_MAX_IO, 0, "input count");
    *n_out = (int)vf_saved_count(r, VF_SAVED_MAX_IO, 0, "output count");
    unsigned has = U8("has input_signature");
    if (r->bad) return false;
    if (has > 1) return vf_saved_bad(r, "has input_signature is %u (0 or 1)", has);
    if (!has) return true;
    if ((size_t)*n_in > (r->end - r->pos) / 2) return vf_saved_bad(r, "an input_signature of %d specs", *n_in);
    *sig = vf_calloc((size_t)*n_in + 1, sizeof **sig);
    if (!*sig) return vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)"), false;
    for (int i = 0; i < *n_in; i++) {
        vf_dtype dt = VF_F32;
        if (!get_dtype(r, &dt, "signature dtype")) return false;
        unsigned rank = U8("signature rank");
        if (!r->bad && rank > VF_MAX_RANK) return vf_saved_bad(r, "signature rank %u", rank);
        (*sig)[i].dtype = dt;
        (*sig)[i].rank = (int)rank;
        for (unsigned d = 0; d < rank && !r->bad; d++) {
            int64_t v = (int64_t)U64("signature dim");
            if (!r->bad && (v < -1 || v > ((int64_t)1 << 40))) return vf_saved_bad(r, "signature dim %lld", (long long)v);
            (*sig)[i].shape[d] = v;
        }
    }
    return !r->bad;
}

static bool read_concrete(vf_saved_rd *r, vf_function *fn, int n_in, const vf_tensor_spec *sig, const tensors *ts)
{
    vf_context *ctx = r->ctx;
    if ((size_t)n_in > (r->end - r->pos) / 6) return vf_saved_bad(r, "%d inputs", n_in);
    vf_dtype *dt = vf_calloc((size_t)n_in + 1, sizeof *dt);
    vf_shape *sh = vf_calloc((size_t)n_in + 1, sizeof *sh);
    vf_capture *caps = NULL;
    bool *cv = NULL;
    vf_dtype *cd = NULL;
    vf_shape *cs = NULL;
    uint32_t nc = 0;
    vf_graph *g = NULL;
    if (!dt || !sh) goto oom;
    for (int i = 0; i < n_in && !r->bad; i++) {
        if (!get_dtype(r, &dt[i], "input dtype") || !get_shape(r, &sh[i], false, "input shape")) break;
        bool ok = !sig || (sig[i].dtype == dt[i] && sig[i].rank == sh[i].rank);
        for (int d = 0; ok && sig && d < sh[i].rank; d++)
            ok = sig[i].shape[d] == -1 ? ((sh[i].sym >> d) & 1u) : sig[i].shape[d] == sh[i].dim[d] && !((sh[i].sym >> d) & 1u);
        if (!ok) vf_saved_bad(r, "input %d does not match the input_signature", i);
    }
    nc = r->bad ? 0 : vf_saved_count(r, VF_SAVED_MAX_IO, 9, "capture count");
    if (r->bad) goto fail;
    caps = vf_calloc((size_t)nc + 1, sizeof *caps);
    cv = vf_calloc((size_t)nc + 1, sizeof *cv);
    cd = vf_calloc((size_t)nc + 1, sizeof *cd);
    cs = vf_calloc((size_t)nc + 1, sizeof *cs);
    if (!caps || !cv || !cd || !cs) goto oom;
    for (uint32_t k = 0; k < nc; k++) {
        size_t at = r->pos;
        uint32_t ti = U32("capture tensor");
        if (!get_shape(r, &cs[k], false, "capture shape")) goto fail;
        if (ti >= (uint32_t)ts->n) {
            r->pos = at;
            vf_saved_bad(r, "capture %u is tensor %u of %d", k, ti, ts->n);
            goto fail;
        }
        vf_tensor *t = ts->t[ti];
        if (cs[k].sym || vf_shape_numel(&cs[k]) != vf_tensor_numel(t)) {
            r->pos = at;
            vf_saved_bad(r, "capture %u's shape does not hold the %lld elements of its tensor", k, (long long)vf_tensor_numel(t));
            goto fail;
        }
        caps[k].t = vf_tensor_hold(t);
        caps[k].ref = vf_tensor_ref(t);
        caps[k].ref.rank = cs[k].rank;
        memcpy(caps[k].ref.shape, cs[k].dim, sizeof(int64_t) * (size_t)cs[k].rank);
        caps[k].is_var = cv[k] = vf_tensor_is_variable(t);
        cd[k] = vf_tensor_dtype(t);
    }
    gctx gc = {.n_caps = (int)nc, .cap_var = cv, .cap_dt = cd, .cap_shape = cs};
    g = get_graph(r, &gc, NULL, 0);
    if (!g) goto fail;
    if (g->n_params != n_in || g->n_explicit != n_in) {
        vf_saved_bad(r, "the graph has %d params (%d explicit) for %d inputs", g->n_params, g->n_explicit, n_in);
        goto fail;
    }
    int n_in2, n_out;
    const vf_tensor_spec *s2;
    vf_function_arity(fn, &n_in2, &n_out, &s2);
    if (g->n_outputs != n_out) {
        vf_saved_bad(r, "the graph has %d outputs; the function %d", g->n_outputs, n_out);
        goto fail;
    }
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].kind == VF_NODE_PARAM) g->nodes[i].shape.sym = sh[g->nodes[i].index].sym;
    free(cv), free(cd), free(cs);
    return vf_function_add_concrete(fn, dt, sh, g, caps, (int)nc) == VF_OK || (r->bad = true, false);
oom:
    vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
fail:
    r->bad = true;
    vf_graph_free(g);
    vf_captures_free(caps, (int)nc);
    free(dt), free(sh), free(cv), free(cd), free(cs);
    return false;
}

vf_status vf_saved_load_mem(vf_context *ctx, const void *data, size_t size, const char *what, vf_function **out)
{
    VF_LOCKED(ctx);
    vf_saved_rd rr = {.ctx = ctx, .what = what, .p = data, .end = size, .sec = "header"}, *r = &rr;
    char magic[8];
    if (size < VF_SAVED_HEADER + VF_SAVED_TRAILER) return vf_saved_bad(r, "the file has %zu bytes, less than a header", size), VF_ERROR_FORMAT;
    memcpy(magic, r->p, 8);
    if (memcmp(magic, VF_SAVED_MAGIC, 8) != 0) return vf_saved_bad(r, "the magic is not \"" VF_SAVED_MAGIC "\""), VF_ERROR_FORMAT;
    r->pos = 8;
    uint32_t version = U32("version");
    if (version < VF_SAVED_VERSION_MIN || version > VF_SAVED_VERSION) {
        r->pos = 8;
        vf_saved_bad(r, "format version %u; this library reads versions %u..%u%s", version, VF_SAVED_VERSION_MIN,
                     VF_SAVED_VERSION, version > VF_SAVED_VERSION ? " (the file is newer: upgrade vkfuse)" : "");
        return VF_ERROR_FORMAT;
    }
    /* version 1: function, tensors, concrete functions; 2: then the kernels */
    uint32_t min_sec = version >= 2 ? 4 : 3;
    (void)U32("flags");
    uint32_t nsec = U32("section count");
    (void)U32("reserved");
    uint64_t fsize = U64("file size");
    if (fsize != size) {
        r->pos = 24;
        return vf_saved_bad(r, "the header says %llu bytes but there are %zu (truncated or extended)", (unsigned long long)fsize, size),
               VF_ERROR_FORMAT;
    }
    uint64_t sum = 0;
    for (int i = 0; i < 8; i++) sum |= (uint64_t)r->p[size - 8 + (size_t)i] << (8 * i);
    if (sum != vf_fnv1a64(VF_FNV_INIT, r->p, size - 8)) {
        r->pos = size - 8;
        r->sec = "trailer";
        return vf_saved_bad(r, "the checksum (FNV-1a 64) does not match the contents"), VF_ERROR_FORMAT;
    }
    size_t body_end = size - VF_SAVED_TRAILER;
    if (nsec < min_sec || nsec > VF_SAVED_MAX_SECTIONS || nsec > (body_end - VF_SAVED_HEADER) / VF_SAVED_ENTRY) {
        r->pos = 16;
        return vf_saved_bad(r, "%u sections (%u..%u that fit the file)", nsec, min_sec, VF_SAVED_MAX_SECTIONS),
               VF_ERROR_FORMAT;
    }
    char name[VF_SAVED_MAX_NAME + 1] = "";
    int n_in = 0, n_out = 0;
    vf_tensor_spec *sig = NULL;
    tensors ts = {0};
    vf_function *fn = NULL;
    size_t table_end = VF_SAVED_HEADER + (size_t)nsec * VF_SAVED_ENTRY;
    for (uint32_t i = 0; i < nsec && !r->bad; i++) {
        r->sec = "section table";
        r->pos = VF_SAVED_HEADER + (size_t)i * VF_SAVED_ENTRY;
        r->end = table_end;
        uint32_t type = U32("section type");
        (void)U32("section reserved");
        uint64_t off = U64("section offset"), len = U64("section size");
        uint32_t want = i == 0 ? VF_SEC_FUNCTION : i == 1 ? VF_SEC_TENSORS
                        : version >= 2 && i + 1 == nsec ? VF_SEC_KERNELS : VF_SEC_CONCRETE;
        if (type != want) {
            r->pos -= 24;
            vf_saved_bad(r, "section %u has type %u; expected %u", i, type, want);
            break;
        }
        if (off < table_end || off > body_end || len > body_end - off) {
            r->pos -= 16;
            vf_saved_bad(r, "section %u at %llu size %llu lies outside bytes %zu..%zu", i, (unsigned long long)off,
                         (unsigned long long)len, table_end, body_end);
            break;
        }
        r->pos = (size_t)off;
        r->end = (size_t)(off + len);
        if (i == 0) {
            r->sec = "function";
            if (read_function(r, name, sizeof name, &n_in, &n_out, &sig) && !(fn = vf_function_new_loaded(ctx, name, n_in, n_out, sig)))
                r->bad = true;
        } else if (i == 1) {
            r->sec = "tensors";
            read_tensors(r, &ts);
        } else if (want == VF_SEC_CONCRETE) {
            r->sec = "concrete function";
            read_concrete(r, fn, n_in, sig, &ts);
        } else {
            r->sec = "kernel";
            vf_saved_read_kernels(r, fn);
        }
        if (!r->bad && r->pos != r->end) vf_saved_bad(r, "%zu bytes left over at the end of the section", r->end - r->pos);
    }
    tensors_free(&ts);
    free(sig);
    if (r->bad) {
        vf_function_destroy(fn);
        return ctx->err.status != VF_OK ? ctx->err.status : VF_ERROR_FORMAT;
    }
    *out = fn;
    return VF_OK;
}

static vf_status function_load(vf_context *ctx, const char *path, vf_function **out)
{
    VF_LOCKED(ctx);
    if (!ctx) return VF_ERROR_INVALID_ARGUMENT;
    if (!out || !path)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_load: %s is NULL", !path ? "path" : "out");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return vf_fail(ctx, VF_ERROR_IO, "vf_function_load: cannot open '%s': %s", path, strerror(errno));
    /* fopen succeeds on a directory (and a FIFO or device gives no size):
       only a regular file can be a saved function */
    struct stat st;
    bool stat_ok = fstat(fileno(f), &st) == 0;
    if (!stat_ok || !S_ISREG(st.st_mode)) {
        bool dir = stat_ok && S_ISDIR(st.st_mode);
        fclose(f);
        return vf_fail(ctx, VF_ERROR_IO, "vf_function_load: '%s' is %s, not a file; pass the path of the file "
                       "vf_function_save wrote", path, dir ? "a directory" : "not a regular file");
    }
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 0 || (uint64_t)size > VF_SAVED_MAX_FILE || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return size < 0 ? vf_fail(ctx, VF_ERROR_IO, "vf_function_load: cannot read '%s'", path)
                        : vf_fail(ctx, VF_ERROR_FORMAT, "vf_function_load: '%s' has %ld bytes, more than any saved "
                                  "function may (2^34)", path, size);
    }
    uint8_t *buf = vf_malloc((size_t)size + 1);
    if (!buf) {
        fclose(f);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed) for '%s' (%ld bytes)", path, size);
    }
    bool ok = fread(buf, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    vf_status s = ok ? vf_saved_load_mem(ctx, buf, (size_t)size, path, out)
                     : vf_fail(ctx, VF_ERROR_IO, "vf_function_load: reading '%s' failed", path);
    free(buf);
    return s;
}

/* One convention for failed creates (vkfuse.h): *out NULL, the reason the
   thread's last error as well as the context's. */
vf_status vf_function_load(vf_context *ctx, const char *path, vf_function **out)
{
    VF_LOCKED(ctx);
    vf_status s = function_load(ctx, path, out);
    if (s != VF_OK) {
        if (out) *out = NULL;
        vf_create_failed(ctx, s, "vf_function_load");
    }
    return s;
}
