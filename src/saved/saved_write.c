/* vf_function_save: a function's concrete functions (optimised graphs,
 * input signatures), the values of the tensors they capture (which of them
 * are variables) and the SPIR-V of the kernels its calls used into one
 * checksummed little-endian file (docs/FORMAT.md);
 * and the variables of a function (vf_function_variable). */
#include "saved/saved.h"
#include "graph/uelem.h"
#include "util/fault.h"
#include "util/dtype.h"
#include "util/grow.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *w, const void *d, size_t n)
{
    if (w->oom) return;
    if (!vf_grow_size((void **)&w->p, &w->cap, w->n + n, 1)) {
        w->oom = true;
        return;
    }
    if (n) memcpy(w->p + w->n, d, n);
    w->n += n;
}

static void put_u8(wbuf *w, unsigned v)
{
    uint8_t b = (uint8_t)v;
    put(w, &b, 1);
}
static void put_u32(wbuf *w, uint32_t v)
{
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 4);
}
static void put_u64(wbuf *w, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, 8);
}
static void put_f64(wbuf *w, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    put_u64(w, u);
}
static void set_u64(wbuf *w, size_t at, uint64_t v)
{
    if (w->oom) return;
    for (int i = 0; i < 8; i++) w->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static void put_shape(wbuf *w, const vf_shape *s)
{
    put_u8(w, (unsigned)s->rank);
    put_u32(w, s->sym);
    for (int d = 0; d < s->rank; d++) put_u64(w, (uint64_t)s->dim[d]);
}

static void put_str(wbuf *w, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

static void put_graph(wbuf *w, const vf_graph *g);

/* A user elementwise op (docs/FORMAT.md, "User elementwise ops"): its name,
   inputs, dtypes and GLSL, and its gradients' the same way (one level);
   never its C functions, which cannot be saved. */
static void put_uelem(wbuf *w, const vf_uelem *u, bool with_grads)
{
    put_str(w, u->name);
    put_u8(w, (unsigned)u->n_in);
    put_u32(w, u->dtypes);
    put_u8(w, u->grad_of);
    put_str(w, u->expr);
    put_u8(w, u->helpers != NULL);
    if (u->helpers) put_str(w, u->helpers);
    if (!with_grads) return;
    for (int i = 0; i < u->n_in; i++) {
        put_u8(w, u->grad[i] != NULL);
        if (u->grad[i]) put_uelem(w, u->grad[i], false);
    }
}

static void put_node(wbuf *w, const vf_node *n)
{
    put_u8(w, (unsigned)n->kind);
    put_u8(w, (unsigned)n->dtype);
    put_u32(w, (uint32_t)n->op);
    put_u32(w, (uint32_t)n->n_in);
    for (int i = 0; i < n->n_in; i++) put_u32(w, (uint32_t)n->in[i]);
    put_shape(w, &n->shape);
    put_u32(w, (uint32_t)n->index);
    put_u8(w, n->is_var);
    /* attrs: every field, 0 where the op does not read it (the row's mask) */
    vf_attrs a = n->kind == VF_NODE_OP ? vf_attrs_read(n->op, &n->attrs) : n->attrs;
    put_u32(w, a.axes_mask);
    put_u8(w, a.keepdims);
    put_u32(w, (uint32_t)a.axis);
    for (int d = 0; d < VF_MAX_RANK; d++) put_u8(w, (unsigned)a.perm[d]);
    put_u8(w, a.trans_a);
    put_u8(w, a.trans_b);
    put_u8(w, (unsigned)a.dtype);
    put_f64(w, a.value);
    put_u64(w, a.seed);
    /* only ops that read them (appended ops: files without them stay readable) */
    if (n->kind == VF_NODE_OP && (vf_op_get(n->op)->attrs & VF_ATTR_WINDOW))
        for (int d = 0; d < VF_MAX_RANK; d++) {
            put_u64(w, (uint64_t)a.lo[d]);
            put_u64(w, (uint64_t)a.hi[d]);
            put_u64(w, (uint64_t)a.step[d]);
        }
    if (n->kind == VF_NODE_OP && (vf_op_get(n->op)->attrs & VF_ATTR_CONV)) {
        const int32_t *f = &a.conv.stride[0]; /* its int32 fields in order */
        for (int k = 0; k < VF_CONV_ATTR_FIELDS; k++) put_u32(w, (uint32_t)f[k]);
    }
    if (n->kind == VF_NODE_OP && vf_op_holds_uelem(n->op)) put_uelem(w, n->attrs.uelem, true);
    switch (n->kind) {
    case VF_NODE_RESHAPE:
        put_u8(w, (unsigned)n->target.rank);
        for (int d = 0; d < n->target.rank; d++) put_u64(w, (uint64_t)n->target.dim[d]);
        break;
    case VF_NODE_CONST:
        put_u64(w, n->bytes);
        put(w, n->data, n->bytes);
        break;
    case VF_NODE_PRINT: put_str(w, n->label); break;
    case VF_NODE_COND:
    case VF_NODE_WHILE:
        put_u32(w, (uint32_t)n->n_out);
        put_u32(w, (uint32_t)n->split);
        put_u32(w, (uint32_t)n->max_iterations);
        put_graph(w, n->sub[0]);
        put_graph(w, n->sub[1]);
        break;
    case VF_NODE_KERNEL: { /* the kernel itself: its SPIR-V, not its C callbacks (docs/KERNELS.md) */
        const vf_ukernel *k = n->uk;
        put_str(w, k->name);
        put_u32(w, (uint32_t)n->n_out);
        for (int j = 0; j < n->n_out; j++) put_u8(w, (unsigned)k->out_spec[j].dtype);
        for (int i = 0; i < n->n_in; i++) put_u8(w, (unsigned)k->in_dt[i]);
        put_u32(w, k->param_bytes);
        if (k->param_bytes) put(w, n->data, k->param_bytes);
        put_u32(w, k->workgroup_size);
        for (int d = 0; d < 3; d++) put_u32(w, n->kgroups[d]);
        put_u8(w, k->uninit);
        put_u8(w, k->side_effect);
        put_u64(w, k->n_words);
        for (size_t i = 0; i < k->n_words; i++) put_u32(w, k->spirv[i]);
        break;
    }
    default: break;
    }
}

static void put_graph(wbuf *w, const vf_graph *g)
{
    put_u32(w, (uint32_t)g->n);
    put_u32(w, (uint32_t)g->n_params);
    put_u32(w, (uint32_t)g->n_explicit);
    put_u32(w, (uint32_t)g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) put_u32(w, (uint32_t)g->outputs[i]);
    for (int i = 0; i < g->n; i++) put_node(w, &g->nodes[i]);
}

/* The distinct tensors the concrete functions capture (a variable captured
   by two of them, or with two shapes, is one tensor). */
typedef struct {
    vf_tensor **t;
    int n, cap;
} tset;

static int tset_index(tset *s, vf_tensor *t)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i] == t) return i;
    if (!vf_grow((void **)&s->t, &s->cap, s->n + 1, sizeof *s->t)) return -1;
    s->t[s->n] = t;
    return s->n++;
}

static int kernel_cmp(const void *a, const void *b)
{
    uint64_t x = ((const vf_saved_kernel *)a)->key, y = ((const vf_saved_kernel *)b)->key;
    return x < y ? -1 : x > y;
}

/* The kernel section: the SPIR-V the backend holds for the keys fn's calls
   used (a key no longer held is left out: it is compiled on first use),
   then the extra ones; ascending by key, each key once. */
static vf_status put_kernels(wbuf *w, vf_function *fn, const vf_saved_kernel *extra, int n_extra)
{
    vf_context *ctx = vf_function_context(fn);
    const vf_keyset *ks = vf_function_kernels(fn);
    if (ks->oom) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_save: out of host memory (malloc failed) (kernel keys)");
    const vf_backend_iface *be = ctx->be.iface;
    size_t cap = (be->kernel_binary ? ks->n : 0) + (size_t)n_extra;
    vf_saved_kernel *k = vf_malloc(sizeof *k * (cap + 1));
    if (!k) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_save: out of host memory (malloc failed)");
    size_t n = 0;
    for (size_t i = 0; be->kernel_binary && i < ks->n; i++) {
        const uint32_t *words;
        size_t nw;
        if (ks->keys[i] && be->kernel_binary(ctx->be.self, ks->keys[i], &words, &nw))
            k[n++] = (vf_saved_kernel){ks->keys[i], words, nw};
    }
    size_t from_backend = n;
    for (int i = 0; i < n_extra; i++) {
        bool dup = false;
        for (size_t j = 0; j < from_backend && !dup; j++) dup = k[j].key == extra[i].key;
        if (!dup) k[n++] = extra[i];
    }
    qsort(k, n, sizeof *k, kernel_cmp);
    size_t m = 0; /* extras repeating a key */
    for (size_t i = 0; i < n; i++)
        if (m == 0 || k[m - 1].key != k[i].key) k[m++] = k[i];
    vf_status s = VF_OK;
    if (m > VF_SAVED_MAX_KERNELS)
        s = vf_fail(ctx, VF_ERROR_UNSUPPORTED, "vf_function_save: '%s' uses %zu kernels; a file holds at most %u",
                    vf_function_name_get(fn), m, VF_SAVED_MAX_KERNELS);
    for (size_t i = 0; s == VF_OK && i < m; i++)
        if (!k[i].key || k[i].n_words < 5 || k[i].n_words > VF_SAVED_MAX_SPIRV_WORDS || k[i].words[0] != VF_SAVED_SPIRV_MAGIC)
            s = vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save: kernel %016llx is not a SPIR-V module of "
                        "5..%u words (key non-zero)", (unsigned long long)k[i].key, VF_SAVED_MAX_SPIRV_WORDS);
    put_u32(w, s == VF_OK ? (uint32_t)m : 0);
    for (size_t i = 0; s == VF_OK && i < m; i++) {
        put_u64(w, k[i].key);
        put_u32(w, (uint32_t)k[i].n_words);
        for (size_t j = 0; j < k[i].n_words; j++) put_u32(w, k[i].words[j]);
    }
    free(k);
    return s;
}

static vf_status write_file(vf_context *ctx, const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return vf_fail(ctx, VF_ERROR_IO, "vf_function_save: cannot create '%s'; check the directory and its permissions", path);
    bool ok = fwrite(p, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (!ok) {
        remove(path);
        return vf_fail(ctx, VF_ERROR_IO, "vf_function_save: writing '%s' failed (disk full?)", path);
    }
    return VF_OK;
}

vf_status vf_function_save(vf_function *fn, const char *path)
{
    VF_LOCKED(fn ? vf_function_context(fn) : NULL);
    vf_status u = vf_function_usable(fn, "vf_function_save");
    if (u != VF_OK) return u;
    vf_context *ctx = vf_function_context(fn);
    if (!path) return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save: '%s': path is NULL", vf_function_name_get(fn));
    uint8_t *p = NULL;
    size_t n = 0;
    vf_status s = vf_saved_write_mem(fn, NULL, 0, &p, &n);
    if (s == VF_OK) s = write_file(ctx, path, p, n);
    free(p);
    return s;
}

/* A HOST node's callback is a pointer into this process: no file holds it. */
static const vf_node *host_node(const vf_graph *g)
{
    for (int i = 0; g && i < g->n; i++) {
        if (g->nodes[i].kind == VF_NODE_HOST) return &g->nodes[i];
        const vf_node *h = host_node(g->nodes[i].sub[0]);
        if (!h) h = host_node(g->nodes[i].sub[1]);
        if (h) return h;
    }
    return NULL;
}

vf_status vf_saved_write_mem(vf_function *fn, const vf_saved_kernel *extra, int n_extra, uint8_t **out, size_t *out_size)
{
    VF_LOCKED(fn ? vf_function_context(fn) : NULL);
    *out = NULL;
    *out_size = 0;
    vf_context *ctx = vf_function_context(fn);
    int n_in, n_out;
    const vf_tensor_spec *sig;
    vf_function_arity(fn, &n_in, &n_out, &sig);
    int ncf = vf_function_n_concrete(fn);
    const char *name = vf_function_name_get(fn);
    if (ncf == 0)
        return vf_fail(ctx, VF_ERROR_INVALID_ARGUMENT, "vf_function_save: '%s' has no concrete function yet; call it "
                       "once (with every signature it must serve) before saving it", name);
    tset ts = {0};
    size_t nsec = 3 + (size_t)ncf; /* function, tensors, concrete functions, kernels */
    uint64_t *sec_off = vf_calloc(nsec + 1, sizeof *sec_off), *sec_size = vf_calloc(nsec + 1, sizeof *sec_size);
    vf_status s = sec_off && sec_size ? VF_OK : vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_save: out of host memory (malloc failed)");
    for (int c = 0; s == VF_OK && c < ncf; c++) {
        const vf_dtype *dt;
        const vf_shape *sh;
        const vf_graph *g;
        const vf_capture *caps;
        int n_caps;
        vf_function_concrete_get(fn, c, &dt, &sh, &g, &caps, &n_caps);
        const vf_node *h = host_node(g);
        if (h) {
            s = vf_fail(ctx, VF_ERROR_UNSUPPORTED, "vf_function_save: '%s' calls the host callback '%s' "
                        "(vf_host_map): a file cannot hold it", name, h->label);
            break;
        }
        for (int k = 0; k < n_caps; k++)
            if (tset_index(&ts, caps[k].t) < 0) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_save: out of host memory (malloc failed)");
    }
    wbuf w = {0};
    /* header and section table; sizes and offsets patched below */
    put(&w, VF_SAVED_MAGIC, 8);
    put_u32(&w, VF_SAVED_VERSION);
    put_u32(&w, 0);
    put_u32(&w, (uint32_t)nsec);
    put_u32(&w, 0);
    put_u64(&w, 0);
    size_t table = w.n;
    for (size_t i = 0; i < nsec; i++) {
        put_u32(&w, i == 0 ? VF_SEC_FUNCTION : i == 1 ? VF_SEC_TENSORS : i + 1 == nsec ? VF_SEC_KERNELS : VF_SEC_CONCRETE);
        put_u32(&w, 0);
        put_u64(&w, 0);
        put_u64(&w, 0);
    }
    /* section 0: the function */
    size_t at = w.n;
    put_str(&w, name);
    put_u32(&w, (uint32_t)n_in);
    put_u32(&w, (uint32_t)n_out);
    put_u8(&w, sig != NULL);
    for (int i = 0; sig && i < n_in; i++) {
        put_u8(&w, (unsigned)sig[i].dtype);
        put_u8(&w, (unsigned)sig[i].rank);
        for (int d = 0; d < sig[i].rank; d++) put_u64(&w, (uint64_t)sig[i].shape[d]);
    }
    if (s == VF_OK) sec_off[0] = at, sec_size[0] = w.n - at;
    /* section 1: captured tensors with their values */
    at = w.n;
    put_u32(&w, (uint32_t)ts.n);
    for (int i = 0; s == VF_OK && i < ts.n; i++) {
        vf_tensor *t = ts.t[i];
        vf_shape shp = {.rank = vf_tensor_rank(t)};
        for (int d = 0; d < shp.rank; d++) shp.dim[d] = vf_tensor_dim(t, d);
        size_t bytes = vf_tensor_bytes(t);
        void *data = vf_malloc(bytes ? bytes : 1);
        if (!data) {
            s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_save: out of host memory (malloc failed)");
            break;
        }
        if (bytes && (s = vf_tensor_read(t, data, bytes)) != VF_OK) {
            free(data);
            break;
        }
        put_u8(&w, vf_tensor_is_variable(t));
        put_u8(&w, (unsigned)vf_tensor_dtype(t));
        put_shape(&w, &shp);
        put_u64(&w, bytes);
        put(&w, data, bytes);
        free(data);
    }
    if (s == VF_OK) sec_off[1] = at, sec_size[1] = w.n - at;
    /* sections 2..: concrete functions */
    for (int c = 0; s == VF_OK && c < ncf; c++) {
        const vf_dtype *dt;
        const vf_shape *sh;
        const vf_graph *g;
        const vf_capture *caps;
        int n_caps;
        vf_function_concrete_get(fn, c, &dt, &sh, &g, &caps, &n_caps);
        at = w.n;
        for (int i = 0; i < n_in; i++) {
            put_u8(&w, (unsigned)dt[i]);
            put_shape(&w, &sh[i]);
        }
        put_u32(&w, (uint32_t)n_caps);
        for (int k = 0; k < n_caps; k++) {
            vf_shape cs = {.rank = caps[k].ref.rank};
            memcpy(cs.dim, caps[k].ref.shape, sizeof(int64_t) * (size_t)cs.rank);
            put_u32(&w, (uint32_t)tset_index(&ts, caps[k].t));
            put_shape(&w, &cs);
        }
        put_graph(&w, g);
        sec_off[2 + c] = at, sec_size[2 + c] = w.n - at;
    }
    /* the last section: the kernels' SPIR-V */
    at = w.n;
    if (s == VF_OK) s = put_kernels(&w, fn, extra, n_extra);
    if (s == VF_OK) sec_off[nsec - 1] = at, sec_size[nsec - 1] = w.n - at;
    for (size_t i = 0; s == VF_OK && i < nsec; i++) {
        set_u64(&w, table + i * VF_SAVED_ENTRY + 8, sec_off[i]);
        set_u64(&w, table + i * VF_SAVED_ENTRY + 16, sec_size[i]);
    }
    set_u64(&w, 24, w.n + VF_SAVED_TRAILER);
    if (s == VF_OK && !w.oom) put_u64(&w, vf_fnv1a64(VF_FNV_INIT, w.p, w.n));
    if (s == VF_OK && w.oom) s = vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_save: out of host memory (malloc failed)");
    if (s == VF_OK) {
        *out = w.p;
        *out_size = w.n;
    } else {
        free(w.p);
    }
    free(ts.t);
    free(sec_off);
    free(sec_size);
    return s;
}

/* The variables of fn: every distinct variable its concrete functions
   capture, in the order of first capture. *oom: the set of them could not
   grow (the count is then short). */
static vf_tensor *nth_variable(vf_function *fn, int want, int *count, bool *oom)
{
    *oom = false;
    tset seen = {0};
    int n = 0;
    vf_tensor *hit = NULL;
    for (int c = 0; c < vf_function_n_concrete(fn); c++) {
        const vf_dtype *dt;
        const vf_shape *sh;
        const vf_graph *g;
        const vf_capture *caps;
        int n_caps;
        vf_function_concrete_get(fn, c, &dt, &sh, &g, &caps, &n_caps);
        for (int k = 0; k < n_caps; k++) {
            if (!caps[k].is_var) continue;
            int before = seen.n;
            if (tset_index(&seen, caps[k].t) < 0) {
                *oom = true;
                break;
            }
            if (seen.n == before) continue;
            if (n == want) hit = caps[k].t;
            n++;
        }
    }
    free(seen.t);
    if (count) *count = n;
    return hit;
}

int vf_function_variable_count(vf_function *fn)
{
    VF_LOCKED(fn ? vf_function_context(fn) : NULL);
    int n = 0;
    bool oom = false;
    if (vf_function_usable(fn, "vf_function_variable_count") == VF_OK) nth_variable(fn, -1, &n, &oom);
    if (oom) vf_fail(vf_function_context(fn), VF_ERROR_OUT_OF_MEMORY,
                     "vf_function_variable_count: out of host memory (malloc failed)");
    return n;
}

vf_tensor *vf_function_variable(vf_function *fn, int i)
{
    VF_LOCKED(fn ? vf_function_context(fn) : NULL);
    if (vf_function_usable(fn, "vf_function_variable") != VF_OK) return NULL;
    int n = 0;
    bool oom = false;
    vf_tensor *t = nth_variable(fn, i, &n, &oom);
    if (!t && oom) vf_fail(vf_function_context(fn), VF_ERROR_OUT_OF_MEMORY,
                           "vf_function_variable: out of host memory (malloc failed)");
    else if (!t) vf_fail(vf_function_context(fn), VF_ERROR_INVALID_ARGUMENT, "vf_function_variable: '%s' has %d variables; "
                    "index %d is out of range", vf_function_name_get(fn), n, i);
    return t;
}
