/* conv2d, the pools and their gradients through oneDNN, loaded at run time
   (dnnl_conv.h). */
#include "cpu/dnnl_conv.h"
#include "util/fault.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic int64_t runs, made, bias_runs, filter_reuses;

#if VF_HAVE_DNNL
#include <dlfcn.h>
#include <dnnl.h>

/* The entry points used, looked up once by the constructor. */
static struct {
    bool ok;
    char error[256];
    dnnl_status_t (*engine_create)(dnnl_engine_t *, dnnl_engine_kind_t, size_t);
    dnnl_status_t (*engine_destroy)(dnnl_engine_t);
    dnnl_status_t (*stream_create)(dnnl_stream_t *, dnnl_engine_t, unsigned);
    dnnl_status_t (*stream_wait)(dnnl_stream_t);
    dnnl_status_t (*stream_destroy)(dnnl_stream_t);
    dnnl_status_t (*md_init_by_tag)(dnnl_memory_desc_t *, int, const dnnl_dims_t, dnnl_data_type_t,
                                    dnnl_format_tag_t);
    dnnl_status_t (*conv_fwd_init)(dnnl_convolution_desc_t *, dnnl_prop_kind_t, dnnl_alg_kind_t,
                                   const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                   const dnnl_memory_desc_t *, const dnnl_memory_desc_t *, const dnnl_dims_t,
                                   const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t);
    dnnl_status_t (*conv_bwd_data_init)(dnnl_convolution_desc_t *, dnnl_alg_kind_t, const dnnl_memory_desc_t *,
                                        const dnnl_memory_desc_t *, const dnnl_memory_desc_t *, const dnnl_dims_t,
                                        const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t);
    dnnl_status_t (*conv_bwd_weights_init)(dnnl_convolution_desc_t *, dnnl_alg_kind_t, const dnnl_memory_desc_t *,
                                           const dnnl_memory_desc_t *, const dnnl_memory_desc_t *,
                                           const dnnl_memory_desc_t *, const dnnl_dims_t, const dnnl_dims_t,
                                           const dnnl_dims_t, const dnnl_dims_t);
    dnnl_status_t (*pd_create)(dnnl_primitive_desc_t *, const_dnnl_op_desc_t, const_dnnl_primitive_attr_t,
                               dnnl_engine_t, const_dnnl_primitive_desc_t);
    dnnl_status_t (*pd_destroy)(dnnl_primitive_desc_t);
    dnnl_status_t (*prim_create)(dnnl_primitive_t *, const_dnnl_primitive_desc_t);
    dnnl_status_t (*prim_execute)(const_dnnl_primitive_t, dnnl_stream_t, int, const dnnl_exec_arg_t *);
    dnnl_status_t (*prim_destroy)(dnnl_primitive_t);
    dnnl_status_t (*mem_create)(dnnl_memory_t *, const dnnl_memory_desc_t *, dnnl_engine_t, void *);
    dnnl_status_t (*mem_set_handle)(dnnl_memory_t, void *);
    dnnl_status_t (*mem_destroy)(dnnl_memory_t);
    const dnnl_memory_desc_t *(*pd_query_md)(const_dnnl_primitive_desc_t, dnnl_query_t, int);
    int (*md_equal)(const dnnl_memory_desc_t *, const dnnl_memory_desc_t *);
    dnnl_status_t (*reorder_pd_create)(dnnl_primitive_desc_t *, const dnnl_memory_desc_t *, dnnl_engine_t,
                                       const dnnl_memory_desc_t *, dnnl_engine_t, const_dnnl_primitive_attr_t);
    dnnl_status_t (*pool_fwd_init)(dnnl_pooling_v2_desc_t *, dnnl_prop_kind_t, dnnl_alg_kind_t,
                                   const dnnl_memory_desc_t *, const dnnl_memory_desc_t *, const dnnl_dims_t,
                                   const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t);
    dnnl_status_t (*pool_bwd_init)(dnnl_pooling_v2_desc_t *, dnnl_alg_kind_t, const dnnl_memory_desc_t *,
                                   const dnnl_memory_desc_t *, const dnnl_dims_t, const dnnl_dims_t,
                                   const dnnl_dims_t, const dnnl_dims_t, const dnnl_dims_t);
} dn;

__attribute__((constructor)) static void dnnl_load(void)
{
    /* libgomp reads the variable when it is loaded, which dlopen does here */
    bool set = !getenv("OMP_WAIT_POLICY");
    if (set) setenv("OMP_WAIT_POLICY", "passive", 0);
    void *h = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (set) unsetenv("OMP_WAIT_POLICY");
    if (!h) {
        const char *e = dlerror();
        snprintf(dn.error, sizeof dn.error, "oneDNN could not be loaded (%s); install Debian's libdnnl2",
                 e ? e : "libdnnl.so.2 not found");
        return;
    }
    struct {
        void **fn;
        const char *name;
    } syms[] = {
        {(void **)&dn.engine_create, "dnnl_engine_create"},
        {(void **)&dn.engine_destroy, "dnnl_engine_destroy"},
        {(void **)&dn.stream_create, "dnnl_stream_create"},
        {(void **)&dn.stream_wait, "dnnl_stream_wait"},
        {(void **)&dn.stream_destroy, "dnnl_stream_destroy"},
        {(void **)&dn.md_init_by_tag, "dnnl_memory_desc_init_by_tag"},
        {(void **)&dn.conv_fwd_init, "dnnl_dilated_convolution_forward_desc_init"},
        {(void **)&dn.conv_bwd_data_init, "dnnl_dilated_convolution_backward_data_desc_init"},
        {(void **)&dn.conv_bwd_weights_init, "dnnl_dilated_convolution_backward_weights_desc_init"},
        {(void **)&dn.pd_create, "dnnl_primitive_desc_create"},
        {(void **)&dn.pd_destroy, "dnnl_primitive_desc_destroy"},
        {(void **)&dn.prim_create, "dnnl_primitive_create"},
        {(void **)&dn.prim_execute, "dnnl_primitive_execute"},
        {(void **)&dn.prim_destroy, "dnnl_primitive_destroy"},
        {(void **)&dn.mem_create, "dnnl_memory_create"},
        {(void **)&dn.mem_set_handle, "dnnl_memory_set_data_handle"},
        {(void **)&dn.mem_destroy, "dnnl_memory_destroy"},
        {(void **)&dn.pd_query_md, "dnnl_primitive_desc_query_md"},
        {(void **)&dn.md_equal, "dnnl_memory_desc_equal"},
        {(void **)&dn.reorder_pd_create, "dnnl_reorder_primitive_desc_create"},
        {(void **)&dn.pool_fwd_init, "dnnl_pooling_v2_forward_desc_init"},
        {(void **)&dn.pool_bwd_init, "dnnl_pooling_v2_backward_desc_init"},
    };
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].fn = dlsym(h, syms[i].name))) {
            snprintf(dn.error, sizeof dn.error, "the oneDNN library loaded has no %s (oneDNN 2.x is needed)",
                     syms[i].name);
            return;
        }
    dn.ok = true;
    /* h stays open for the life of the process: primitives live in it */
}

/* What a primitive is made for: the op and every size and attribute that
   shapes it (zero-filled, compared as bytes). */
typedef struct {
    int64_t op, N, H, W, C, KH, KW, O, OH, OW, G;
    int64_t stride[2], dilation[2], pad[4];
    int64_t bias; /* conv2d only: 1 when the primitive adds a bias vector */
} conv_key;

/* Few shapes recur in a loop (a network's layers, three ops each): more
   than this and the least recently used primitive is replaced. */
#define CACHE_SIZE 24

/* The primitive is made for our NHWC images and the filter layout oneDNN's
   fastest kernel wants (channels blocked by the vector width); an operand
   whose layout differs from ours (the filter, HWIO) is reordered into or
   out of a buffer the entry keeps. */
typedef struct {
    conv_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[4];        /* the exec's in[0], in[1], out and the bias, in our layouts */
    dnnl_memory_t inner[4];      /* NULL, or the operand in the primitive's layout */
    dnnl_primitive_t reorder[4]; /* with inner: mem -> inner (inputs), inner -> mem (out) */
    int arg[4];                  /* their oneDNN argument names; 0: not an argument */
    /* The bytes of in[1] (the filter) that inner[1] holds reordered, so
       that an unchanged filter is not reordered again: compared by value,
       not by buffer, so no write to the filter (an assign, an optimizer
       step, a host write) can leave a stale copy in use. NULL: none. */
    void *filter;
    bool filter_valid;
    /* max pool's gradient: the forward pass first, for the argmax of each
       window (ws), its result thrown away (y) */
    dnnl_primitive_t pre;
    dnnl_memory_t y, ws;
    uint64_t used;               /* the tick of the last run; 0: empty slot */
} conv_entry;

struct vf_cpu_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    uint64_t tick;
    conv_entry cache[CACHE_SIZE];
};

vf_cpu_dnnl *vf_cpu_dnnl_create(void)
{
    if (!dn.ok) return NULL;
    vf_cpu_dnnl *d = vf_calloc(1, sizeof *d);
    if (!d) return NULL;
    if (dn.engine_create(&d->engine, dnnl_cpu, 0) != dnnl_success) {
        free(d);
        return NULL;
    }
    if (dn.stream_create(&d->stream, d->engine, dnnl_stream_default_flags) != dnnl_success) {
        dn.engine_destroy(d->engine);
        free(d);
        return NULL;
    }
    return d;
}

static void entry_free(conv_entry *c)
{
    for (int i = 0; i < 4; i++) {
        if (c->mem[i]) dn.mem_destroy(c->mem[i]);
        if (c->inner[i]) dn.mem_destroy(c->inner[i]);
        if (c->reorder[i]) dn.prim_destroy(c->reorder[i]);
    }
    if (c->prim) dn.prim_destroy(c->prim);
    if (c->pre) dn.prim_destroy(c->pre);
    if (c->y) dn.mem_destroy(c->y);
    if (c->ws) dn.mem_destroy(c->ws);
    free(c->filter);
    memset(c, 0, sizeof *c);
}

void vf_cpu_dnnl_destroy(vf_cpu_dnnl *d)
{
    if (!d) return;
    for (int i = 0; i < CACHE_SIZE; i++) entry_free(&d->cache[i]);
    dn.stream_destroy(d->stream);
    dn.engine_destroy(d->engine);
    free(d);
}

/* The key of exec e, or false when its refs are not a well-formed f32
   conv (the caller's own checks then report it) or have an empty dim. */
static bool key_of(const vf_exec *e, const vf_tref *bias, conv_key *k)
{
    const vf_tref *x, *w, *y, *a = &e->in[0], *b = &e->in[1], *o = &e->out;
    if (e->n_in != 2 || a->rank != 4 || b->rank != 4 || o->rank != 4 || a->dtype != VF_F32 ||
        b->dtype != VF_F32 || o->dtype != VF_F32)
        return false;
    if (e->op == VF_OP_CONV2D) x = a, w = b, y = o;
    else if (e->op == VF_OP_CONV2D_BACKPROP_INPUT) y = a, w = b, x = o;
    else if (e->op == VF_OP_CONV2D_BACKPROP_FILTER) x = a, y = b, w = o;
    else return false;
    const vf_conv_attrs *at = &e->attrs.conv;
    memset(k, 0, sizeof *k);
    *k = (conv_key){.op = e->op, .N = x->shape[0], .H = x->shape[1], .W = x->shape[2], .C = x->shape[3],
                    .KH = w->shape[0], .KW = w->shape[1], .O = w->shape[3], .OH = y->shape[1],
                    .OW = y->shape[2], .G = at->groups,
                    .stride = {at->stride[0], at->stride[1]}, .dilation = {at->dilation[0], at->dilation[1]},
                    .pad = {at->pad[0], at->pad[1], at->pad[2], at->pad[3]}};
    if (k->G < 1 || k->C % k->G || k->O % k->G || w->shape[2] * k->G != k->C || y->shape[0] != k->N ||
        y->shape[3] != k->O)
        return false;
    if (bias) {
        if (e->op != VF_OP_CONV2D || bias->dtype != VF_F32 || vf_cpu_numel(bias) != k->O) return false;
        k->bias = 1;
    }
    for (const int64_t *v = &k->N; v <= &k->G; v++)
        if (*v <= 0) return false; /* empty: the fallback writes the zeros */
    return true;
}

/* A reorder from a to b into *r. */
static bool reorder_make(vf_cpu_dnnl *d, const dnnl_memory_desc_t *a, const dnnl_memory_desc_t *b, dnnl_primitive_t *r)
{
    dnnl_primitive_desc_t pd;
    if (dn.reorder_pd_create(&pd, a, d->engine, b, d->engine, NULL) != dnnl_success) return false;
    bool ok = dn.prim_create(r, pd) == dnnl_success;
    dn.pd_destroy(pd);
    return ok;
}

/* Builds the primitive for k into c (its memories in our layouts with no
   data yet; c is freed by the caller on failure). */
static bool entry_make(vf_cpu_dnnl *d, const conv_key *k, conv_entry *c)
{
    dnnl_memory_desc_t user[4], any[3]; /* x, w, y, the bias */
    dnnl_dims_t xd = {k->N, k->C, k->H, k->W}, yd = {k->N, k->O, k->OH, k->OW}, bd = {k->O};
    /* HWIO with the groups' filters side by side along O is oneDNN's hwigo */
    dnnl_dims_t wd = {k->G, k->O / k->G, k->C / k->G, k->KH, k->KW};
    int wn = k->G > 1 ? 5 : 4;
    const int64_t *wdims = k->G > 1 ? wd : wd + 1;
    if (dn.md_init_by_tag(&user[0], 4, xd, dnnl_f32, dnnl_nhwc) != dnnl_success ||
        dn.md_init_by_tag(&user[1], wn, wdims, dnnl_f32, k->G > 1 ? dnnl_hwigo : dnnl_hwio) != dnnl_success ||
        dn.md_init_by_tag(&user[2], 4, yd, dnnl_f32, dnnl_nhwc) != dnnl_success ||
        dn.md_init_by_tag(&user[3], 1, bd, dnnl_f32, dnnl_x) != dnnl_success ||
        dn.md_init_by_tag(&any[0], 4, xd, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dn.md_init_by_tag(&any[1], wn, wdims, dnnl_f32, dnnl_format_tag_any) != dnnl_success ||
        dn.md_init_by_tag(&any[2], 4, yd, dnnl_f32, dnnl_format_tag_any) != dnnl_success)
        return false;
    /* Images and their gradients stay NHWC: oneDNN's direct kernels read
       and write it as fast as its blocked layouts, which would cost a
       reorder each way (docs/BENCHMARKS.md). The filter is small; oneDNN
       picks its layout. */
    any[0] = user[0], any[2] = user[2];
    /* Except the filter gradient with fewer than 16 channels (a vector) on
       either side: there oneDNN 2.6's direct kernel took 9x the time of
       its GEMM-based one on our own layouts (docs/BENCHMARKS.md). */
    if (k->op == VF_OP_CONV2D_BACKPROP_FILTER && ((k->C / k->G) % 16 || (k->O / k->G) % 16))
        memcpy(any, user, sizeof any);
    /* A bias (conv2d only) is added by the kernel to its f32 sums,
       instead of by a pass of its own over y afterwards. */
    const dnnl_memory_desc_t *bias = k->bias ? &user[3] : NULL;
    /* oneDNN counts dilation from 0 (dense), we from 1 */
    dnnl_dims_t st = {k->stride[0], k->stride[1]}, dl = {k->dilation[0] - 1, k->dilation[1] - 1};
    dnnl_dims_t pl = {k->pad[0], k->pad[2]}, pr = {k->pad[1], k->pad[3]};
    dnnl_convolution_desc_t fwd, bwd;
    if (dn.conv_fwd_init(&fwd, dnnl_forward_training, dnnl_convolution_direct, &any[0], &any[1], bias, &any[2], st,
                         dl, pl, pr) != dnnl_success)
        return false;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    if (dn.pd_create(&fpd, &fwd, NULL, d->engine, NULL) != dnnl_success) return false;
    bool ok = true;
    int which[4] = {0, 0, 0, 3}; /* the exec's operands as indices of user: in[0], in[1], out, the bias */
    if (k->op == VF_OP_CONV2D) {
        pd = fpd, fpd = NULL;
        c->arg[0] = DNNL_ARG_SRC, c->arg[1] = DNNL_ARG_WEIGHTS, c->arg[2] = DNNL_ARG_DST;
        c->arg[3] = bias ? DNNL_ARG_BIAS : 0;
        which[0] = 0, which[1] = 1, which[2] = 2;
    } else if (k->op == VF_OP_CONV2D_BACKPROP_INPUT) {
        ok = dn.conv_bwd_data_init(&bwd, dnnl_convolution_direct, &any[0], &any[1], &any[2], st, dl, pl, pr) ==
                 dnnl_success &&
             dn.pd_create(&pd, &bwd, NULL, d->engine, fpd) == dnnl_success;
        c->arg[0] = DNNL_ARG_DIFF_DST, c->arg[1] = DNNL_ARG_WEIGHTS, c->arg[2] = DNNL_ARG_DIFF_SRC;
        which[0] = 2, which[1] = 1, which[2] = 0;
    } else {
        ok = dn.conv_bwd_weights_init(&bwd, dnnl_convolution_direct, &any[0], &any[1], NULL, &any[2], st, dl, pl,
                                      pr) == dnnl_success &&
             dn.pd_create(&pd, &bwd, NULL, d->engine, fpd) == dnnl_success;
        c->arg[0] = DNNL_ARG_SRC, c->arg[1] = DNNL_ARG_DIFF_DST, c->arg[2] = DNNL_ARG_DIFF_WEIGHTS;
        which[0] = 0, which[1] = 2, which[2] = 1;
    }
    if (fpd) dn.pd_destroy(fpd);
    if (!ok) return false;
    for (int i = 0; i < 4 && ok; i++) {
        if (!c->arg[i]) continue;
        const dnnl_memory_desc_t *want = dn.pd_query_md(pd, dnnl_query_exec_arg_md, c->arg[i]);
        const dnnl_memory_desc_t *ours = &user[which[i]];
        ok = want && dn.mem_create(&c->mem[i], ours, d->engine, DNNL_MEMORY_NONE) == dnnl_success;
        if (!ok || dn.md_equal(want, ours)) continue;
        ok = dn.mem_create(&c->inner[i], want, d->engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
             (i != 2 ? reorder_make(d, ours, want, &c->reorder[i]) : reorder_make(d, want, ours, &c->reorder[i]));
    }
    ok = ok && dn.prim_create(&c->prim, pd) == dnnl_success;
    dn.pd_destroy(pd); /* the primitive keeps what it needs */
    c->key = *k;
    return ok;
}

/* Runs reorder r from a to b. */
static bool reorder_run(vf_cpu_dnnl *d, dnnl_primitive_t r, dnnl_memory_t a, dnnl_memory_t b)
{
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, a}, {DNNL_ARG_TO, b}};
    return dn.prim_execute(r, d->stream, 2, args) == dnnl_success;
}

static bool is_pool(int64_t op)
{
    return op == VF_OP_MAX_POOL2D || op == VF_OP_AVG_POOL2D || op == VF_OP_MAX_POOL2D_GRAD ||
           op == VF_OP_AVG_POOL2D_GRAD;
}

/* The key of pool exec e (the window in KH, KW), as key_of. */
static bool pool_key_of(const vf_exec *e, conv_key *k)
{
    bool grad = e->op == VF_OP_MAX_POOL2D_GRAD || e->op == VF_OP_AVG_POOL2D_GRAD;
    const vf_tref *x = &e->in[0], *y = grad ? &e->in[1] : &e->out;
    if (!is_pool(e->op) || e->n_in != (grad ? 2 : 1) || x->rank != 4 || y->rank != 4 || x->dtype != VF_F32 ||
        y->dtype != VF_F32 || e->out.dtype != VF_F32 || y->shape[0] != x->shape[0] || y->shape[3] != x->shape[3])
        return false;
    const vf_conv_attrs *at = &e->attrs.conv;
    *k = (conv_key){.op = e->op, .N = x->shape[0], .H = x->shape[1], .W = x->shape[2], .C = x->shape[3],
                    .KH = at->size[0], .KW = at->size[1], .O = x->shape[3], .OH = y->shape[1], .OW = y->shape[2],
                    .G = 1, .stride = {at->stride[0], at->stride[1]},
                    .pad = {at->pad[0], at->pad[1], at->pad[2], at->pad[3]}};
    for (const int64_t *v = &k->N; v <= &k->G; v++)
        if (*v <= 0) return false;
    return true;
}

/* Builds the pool primitive for k into c, on NHWC as it is. Our max takes
   the first maximum in row-major window order, as oneDNN's workspace
   records it; our average divides by the window's positions inside the
   input, oneDNN's avg_exclude_padding. */
static bool pool_entry_make(vf_cpu_dnnl *d, const conv_key *k, conv_entry *c)
{
    dnnl_memory_desc_t xm, ym;
    dnnl_dims_t xd = {k->N, k->C, k->H, k->W}, yd = {k->N, k->C, k->OH, k->OW};
    if (dn.md_init_by_tag(&xm, 4, xd, dnnl_f32, dnnl_nhwc) != dnnl_success ||
        dn.md_init_by_tag(&ym, 4, yd, dnnl_f32, dnnl_nhwc) != dnnl_success)
        return false;
    dnnl_dims_t st = {k->stride[0], k->stride[1]}, ker = {k->KH, k->KW}, dl = {0, 0};
    dnnl_dims_t pl = {k->pad[0], k->pad[2]}, pr = {k->pad[1], k->pad[3]};
    bool max = k->op == VF_OP_MAX_POOL2D || k->op == VF_OP_MAX_POOL2D_GRAD;
    bool grad = k->op == VF_OP_MAX_POOL2D_GRAD || k->op == VF_OP_AVG_POOL2D_GRAD;
    dnnl_alg_kind_t alg = max ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding;
    dnnl_pooling_v2_desc_t fwd, bwd;
    dnnl_primitive_desc_t fpd = NULL, pd = NULL;
    if (dn.pool_fwd_init(&fwd, grad ? dnnl_forward_training : dnnl_forward_inference, alg, &xm, &ym, st, ker, dl,
                         pl, pr) != dnnl_success ||
        dn.pd_create(&fpd, &fwd, NULL, d->engine, NULL) != dnnl_success)
        return false;
    bool ok = true;
    c->key = *k;
    for (int i = 0; i < 3 && ok; i++)
        ok = dn.mem_create(&c->mem[i], i == 0 || (i == 2 && grad) ? &xm : &ym, d->engine, DNNL_MEMORY_NONE) ==
             dnnl_success;
    if (!grad) {
        c->arg[0] = DNNL_ARG_SRC, c->arg[2] = DNNL_ARG_DST;
        ok = ok && dn.prim_create(&c->prim, fpd) == dnnl_success;
        dn.pd_destroy(fpd);
        return ok;
    }
    c->arg[1] = DNNL_ARG_DIFF_DST, c->arg[2] = DNNL_ARG_DIFF_SRC;
    ok = ok && dn.pool_bwd_init(&bwd, alg, &xm, &ym, st, ker, dl, pl, pr) == dnnl_success &&
         dn.pd_create(&pd, &bwd, NULL, d->engine, fpd) == dnnl_success && dn.prim_create(&c->prim, pd) == dnnl_success;
    if (ok && max) {
        const dnnl_memory_desc_t *ws = dn.pd_query_md(fpd, dnnl_query_workspace_md, 0);
        ok = ws && dn.mem_create(&c->ws, ws, d->engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
             dn.mem_create(&c->y, &ym, d->engine, DNNL_MEMORY_ALLOCATE) == dnnl_success &&
             dn.prim_create(&c->pre, fpd) == dnnl_success;
    }
    if (pd) dn.pd_destroy(pd);
    dn.pd_destroy(fpd);
    return ok;
}

/* The cached primitive for k, made (over the least recently used slot)
   when missing; NULL when oneDNN cannot make it. */
static conv_entry *entry_get(vf_cpu_dnnl *d, const conv_key *k)
{
    conv_entry *lru = &d->cache[0];
    for (int i = 0; i < CACHE_SIZE; i++) {
        conv_entry *c = &d->cache[i];
        if (c->used && !memcmp(&c->key, k, sizeof *k)) return c;
        if (c->used < lru->used) lru = c;
    }
    entry_free(lru);
    if (!(is_pool(k->op) ? pool_entry_make(d, k, lru) : entry_make(d, k, lru))) {
        entry_free(lru);
        return NULL;
    }
    atomic_fetch_add(&made, 1);
    return lru;
}

/* Reorders the filter (in[1] of conv2d and its input gradient) from
   ref's memory into c->inner[1] unless it holds these very values already
   (a frozen or inference filter; a training step's changed filter costs
   a compare that stops at the first difference, and a copy). For small
   layers the reorder primitive's run is a measurable part of the call
   (docs/BENCHMARKS.md). */
static bool filter_reorder(vf_cpu_dnnl *d, conv_entry *c, const vf_tref *ref)
{
    size_t n = (size_t)vf_cpu_numel(ref) * sizeof(float); /* fixed by the key */
    const void *p = vf_cpu_ptr(ref);
    if (c->filter_valid && !memcmp(c->filter, p, n)) {
        atomic_fetch_add(&filter_reuses, 1);
        return true;
    }
    c->filter_valid = false; /* until the reorder has run */
    if (!reorder_run(d, c->reorder[1], c->mem[1], c->inner[1])) return false;
    if (!c->filter) c->filter = vf_malloc(n); /* none: reordered every call */
    if (c->filter) memcpy(c->filter, p, n);
    c->filter_valid = c->filter != NULL;
    return true;
}

/* Runs exec e (with bias vector b, or NULL) with the cached primitive for
   k. */
static bool run(vf_cpu_dnnl *d, const vf_exec *e, const vf_tref *b, const conv_key *k)
{
    conv_entry *c = entry_get(d, k);
    if (!c) return false;
    c->used = ++d->tick;
    const vf_tref *ref[4] = {&e->in[0], &e->in[1], &e->out, b};
    bool wcache = e->op == VF_OP_CONV2D || e->op == VF_OP_CONV2D_BACKPROP_INPUT;
    dnnl_exec_arg_t args[4];
    int n = 0;
    for (int i = 0; i < 4; i++) {
        if (!c->arg[i]) continue;
        if (dn.mem_set_handle(c->mem[i], vf_cpu_ptr(ref[i])) != dnnl_success) return false;
        if (i != 2 && c->reorder[i] &&
            !(i == 1 && wcache ? filter_reorder(d, c, ref[i]) : reorder_run(d, c->reorder[i], c->mem[i], c->inner[i])))
            return false;
        args[n++] = (dnnl_exec_arg_t){c->arg[i], c->inner[i] ? c->inner[i] : c->mem[i]};
    }
    if (c->pre) {
        if (dn.mem_set_handle(c->mem[0], vf_cpu_ptr(ref[0])) != dnnl_success) return false;
        dnnl_exec_arg_t pa[3] = {{DNNL_ARG_SRC, c->mem[0]}, {DNNL_ARG_DST, c->y}, {DNNL_ARG_WORKSPACE, c->ws}};
        if (dn.prim_execute(c->pre, d->stream, 3, pa) != dnnl_success) return false;
        args[n++] = (dnnl_exec_arg_t){DNNL_ARG_WORKSPACE, c->ws};
    }
    /* the stream is in order: each step sees the one before complete */
    if (dn.prim_execute(c->prim, d->stream, n, args) != dnnl_success ||
        (c->reorder[2] && !reorder_run(d, c->reorder[2], c->inner[2], c->mem[2])) ||
        dn.stream_wait(d->stream) != dnnl_success)
        return false; /* the fallback then overwrites whatever was written */
    atomic_fetch_add(&runs, 1);
    if (b) atomic_fetch_add(&bias_runs, 1);
    return true;
}

bool vf_cpu_dnnl_conv(vf_cpu_dnnl *d, const vf_exec *e, const vf_tref *bias)
{
    conv_key k;
    return d && key_of(e, bias, &k) && run(d, e, bias, &k);
}

bool vf_cpu_dnnl_pool(vf_cpu_dnnl *d, const vf_exec *e)
{
    conv_key k;
    return d && pool_key_of(e, &k) && run(d, e, NULL, &k);
}

const char *vf_cpu_dnnl_unavailable(void) { return dn.ok ? "" : dn.error; }

#else /* built without dnnl.h */

vf_cpu_dnnl *vf_cpu_dnnl_create(void) { return NULL; }
void vf_cpu_dnnl_destroy(vf_cpu_dnnl *d) { (void)d; }
bool vf_cpu_dnnl_conv(vf_cpu_dnnl *d, const vf_exec *e, const vf_tref *bias)
{
    (void)d, (void)e, (void)bias;
    return false;
}
bool vf_cpu_dnnl_pool(vf_cpu_dnnl *d, const vf_exec *e)
{
    (void)d, (void)e;
    return false;
}
const char *vf_cpu_dnnl_unavailable(void) { return "vkfuse was built without oneDNN's dnnl.h (libdnnl-dev)"; }

#endif

int64_t vf_cpu_dnnl_runs(void) { return atomic_load(&runs); }
int64_t vf_cpu_dnnl_made(void) { return atomic_load(&made); }
int64_t vf_cpu_dnnl_bias_runs(void) { return atomic_load(&bias_runs); }
int64_t vf_cpu_dnnl_filter_reuses(void) { return atomic_load(&filter_reuses); }
