/* vf_function_info (include/vkfuse_saved.h): what a traced or loaded
 * function holds, read from its concrete functions' graphs, for tools
 * that show a saved file without its C code (`vkfuse saved show`); and
 * vf_saved_file_version, the header's version alone. The answer is one
 * malloc'd block whose arrays point into it, so that a caller frees it
 * with one call whatever it holds. */
#include "api/api.h"
#include "api/lock.h"
#include "saved/saved.h"
#include "vkfuse_saved.h"
#include "graph/graph.h"
#include "graph/uelem.h"
#include "util/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The op counts and user ops of one walk over a graph and its subgraphs. */
typedef struct walk {
    vf_op_count *ops;
    int n_ops, cap_ops;
    vf_user_op_info *users;
    int n_users, cap_users;
    int nodes;
    bool oom;
} walk;

static void *grow(void *p, int *cap, int want, size_t size, bool *oom)
{
    if (want <= *cap) return p;
    int c = *cap ? *cap * 2 : 16;
    while (c < want) c *= 2;
    void *q = vf_realloc(p, (size_t)c * size);
    if (!q) {
        *oom = true;
        return p;
    }
    *cap = c;
    return q;
}

static void count_op(walk *w, const char *name)
{
    for (int i = 0; i < w->n_ops; i++)
        if (!strcmp(w->ops[i].op, name)) {
            w->ops[i].count++;
            return;
        }
    w->ops = grow(w->ops, &w->cap_ops, w->n_ops + 1, sizeof *w->ops, &w->oom);
    if (w->oom) return;
    vf_op_count *o = &w->ops[w->n_ops++];
    snprintf(o->op, sizeof o->op, "%s", name);
    o->count = 1;
}

static void add_user(walk *w, const char *name, bool kernel, bool have_c)
{
    for (int i = 0; i < w->n_users; i++)
        if (w->users[i].kernel == kernel && !strcmp(w->users[i].name, name)) return;
    w->users = grow(w->users, &w->cap_users, w->n_users + 1, sizeof *w->users, &w->oom);
    if (w->oom) return;
    vf_user_op_info *u = &w->users[w->n_users++];
    snprintf(u->name, sizeof u->name, "%s", name);
    u->kernel = kernel;
    u->have_c = have_c;
}

static void walk_graph(walk *w, const vf_graph *g, int depth)
{
    if (!g || depth > VF_SAVED_MAX_DEPTH) return; /* a loaded graph is at most this deep */
    for (int i = 0; i < g->n && !w->oom; i++) {
        const vf_node *n = &g->nodes[i];
        w->nodes++;
        count_op(w, vf_node_name(n));
        if (n->kind == VF_NODE_KERNEL && n->uk) add_user(w, n->uk->name, true, !n->uk->loaded);
        if (n->kind == VF_NODE_OP && n->op == VF_OP_USER_ELEMENTWISE && n->attrs.uelem)
            add_user(w, n->attrs.uelem->name, false, n->attrs.uelem->cpu != NULL);
        for (int s = 0; s < 2; s++) walk_graph(w, n->sub[s], depth + 1);
    }
}

static int by_count(const void *a, const void *b)
{
    const vf_op_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->op, y->op);
}

/* Every array of the block starts 8-byte aligned. */
static size_t r8(size_t n) { return (n + 7) & ~(size_t)7; }

static void spec_of(vf_tensor_spec *sp, vf_dtype dt, const vf_shape *s)
{
    memset(sp, 0, sizeof *sp);
    sp->dtype = dt;
    sp->rank = s->rank;
    for (int d = 0; d < s->rank; d++) sp->shape[d] = (s->sym >> d) & 1u ? -1 : s->dim[d];
}

/* Bytes of the block and the walks of every concrete function. */
static size_t plan_block(const vf_function *fn, walk *ws, walk *all, int n_cf, int n_in)
{
    size_t bytes = r8(sizeof(vf_function_info)) + r8(sizeof(vf_tensor_spec) * (size_t)n_in) +
                   r8(sizeof(vf_concrete_info) * (size_t)n_cf);
    for (int i = 0; i < n_cf; i++) {
        const vf_dtype *dt;
        const vf_shape *shape;
        const vf_graph *g;
        const vf_capture *caps;
        int n_caps;
        vf_function_concrete_get(fn, i, &dt, &shape, &g, &caps, &n_caps);
        walk_graph(&ws[i], g, 0);
        walk_graph(all, g, 0);
        bytes += r8(sizeof(vf_tensor_spec) * (size_t)n_in) + r8(sizeof(vf_tensor_spec) * (size_t)g->n_outputs) +
                 r8(sizeof(int64_t) * VF_MAX_RANK * (size_t)n_in) + r8(sizeof(vf_op_count) * (size_t)ws[i].n_ops);
    }
    return bytes + r8(sizeof(vf_user_op_info) * (size_t)all->n_users);
}

vf_function_info *vf_function_info_get(vf_function *fn)
{
    vf_context *ctx = fn ? vf_function_context(fn) : NULL;
    VF_LOCKED(ctx);
    if (vf_function_usable(fn, "vf_function_info_get") != VF_OK) return NULL;
    int n_in, n_out;
    const vf_tensor_spec *sig;
    vf_function_arity(fn, &n_in, &n_out, &sig);
    int n_cf = vf_function_n_concrete(fn);
    walk *ws = vf_calloc((size_t)n_cf + 1, sizeof *ws), all = {0};
    vf_function_info *info = NULL;
    if (!ws) goto oom;
    size_t bytes = plan_block(fn, ws, &all, n_cf, n_in);
    bool oom = all.oom;
    for (int i = 0; i < n_cf; i++) oom = oom || ws[i].oom;
    if (oom || !(info = vf_calloc(1, bytes))) goto oom;
    /* the arrays follow the struct, every one of 8-byte-aligned elements */
    char *p = (char *)info + r8(sizeof *info);
    snprintf(info->name, sizeof info->name, "%s", vf_function_name_get(fn));
    info->n_inputs = n_in;
    info->n_outputs = n_out;
    info->has_signature = sig != NULL;
    info->signature = (vf_tensor_spec *)p;
    p += r8(sizeof(vf_tensor_spec) * (size_t)n_in);
    if (sig) memcpy(info->signature, sig, sizeof *sig * (size_t)n_in);
    else info->signature = NULL;
    info->n_concrete = n_cf;
    info->concrete = (vf_concrete_info *)p;
    p += r8(sizeof(vf_concrete_info) * (size_t)n_cf);
    for (int i = 0; i < n_cf; i++) {
        const vf_dtype *dt;
        const vf_shape *shape;
        const vf_graph *g;
        const vf_capture *caps;
        int n_caps;
        vf_function_concrete_get(fn, i, &dt, &shape, &g, &caps, &n_caps);
        vf_concrete_info *c = &info->concrete[i];
        c->n_inputs = n_in;
        c->n_outputs = g->n_outputs;
        c->inputs = (vf_tensor_spec *)p;
        p += r8(sizeof(vf_tensor_spec) * (size_t)n_in);
        c->outputs = (vf_tensor_spec *)p;
        p += r8(sizeof(vf_tensor_spec) * (size_t)g->n_outputs);
        c->traced_inputs = (int64_t *)p;
        p += r8(sizeof(int64_t) * VF_MAX_RANK * (size_t)n_in);
        for (int j = 0; j < n_in; j++) {
            spec_of(&c->inputs[j], dt[j], &shape[j]);
            for (int d = 0; d < shape[j].rank; d++) c->traced_inputs[j * VF_MAX_RANK + d] = shape[j].dim[d];
        }
        for (int j = 0; j < g->n_outputs; j++) {
            const vf_node *o = &g->nodes[g->outputs[j]];
            spec_of(&c->outputs[j], o->dtype, &o->shape);
        }
        c->n_nodes = ws[i].nodes;
        c->n_ops = ws[i].n_ops;
        c->ops = (vf_op_count *)p;
        p += r8(sizeof(vf_op_count) * (size_t)ws[i].n_ops);
        if (ws[i].n_ops) memcpy(c->ops, ws[i].ops, sizeof *c->ops * (size_t)ws[i].n_ops);
        qsort(c->ops, (size_t)c->n_ops, sizeof *c->ops, by_count);
        c->n_captures = n_caps;
        for (int k = 0; k < n_caps; k++) c->n_variables += caps[k].is_var;
    }
    info->n_user_ops = all.n_users;
    info->user_ops = (vf_user_op_info *)p;
    if (all.n_users) memcpy(info->user_ops, all.users, sizeof *all.users * (size_t)all.n_users);
    goto done;
oom:
    vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_info_get: out of host memory (malloc failed)");
done:
    for (int i = 0; ws && i < n_cf; i++) free(ws[i].ops), free(ws[i].users);
    free(ws);
    free(all.ops);
    free(all.users);
    return info;
}

vf_status vf_saved_file_version(const char *path, uint32_t *version)
{
    if (!path || !version) return VF_ERROR_INVALID_ARGUMENT;
    FILE *f = fopen(path, "rb");
    if (!f) return VF_ERROR_IO;
    unsigned char h[12];
    size_t got = fread(h, 1, sizeof h, f);
    fclose(f);
    if (got < sizeof h || memcmp(h, VF_SAVED_MAGIC, 8) != 0) return VF_ERROR_FORMAT;
    *version = (uint32_t)h[8] | (uint32_t)h[9] << 8 | (uint32_t)h[10] << 16 | (uint32_t)h[11] << 24;
    return VF_OK;
}
