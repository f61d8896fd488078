/* Elementwise ops (and CAST) on the CPU, driven by the op table.
 *
 * Generic path: the operands' layouts (broadcast strides) are simplified
 * into a loop nest; every innermost row is processed in chunks that are
 * widened to double (float ops) or int64 (integer and bool ops), mapped
 * through the row's reference scalar function and stored with the dtype's
 * rounding or 32-bit wrap. A new elementwise row in the op table therefore
 * needs nothing here.
 *
 * Fast paths (kernels_elementwise_fast.c): plain f32 loops for the ops
 * whose float result is bit for bit the reference's, and fast_math.c's
 * vector rows for exp, tanh, sigmoid, gelu, log, softplus and rsqrt
 * (within an f32 ulp of the reference).
 *
 * Large tensors are split across the backend's threads (cpu_threads.h) as
 * ranges of elements in output order: each element is computed as on one
 * thread, so the bits do not depend on the thread count.
 */
#include "cpu/cpu.h"
#include "cpu/cpu_threads.h"
#include "graph/uelem.h"

#include <math.h>
#include <string.h>

enum { OP_OUT = 0 }; /* operand 0 of the loop is out, 1..n_in the inputs */

/* ---- generic rows -------------------------------------------------------- */

/* CLASS_USER: a user elementwise op (graph/uelem.h), whose C function
   takes float rows: chunks are widened to double as for CLASS_FLOAT,
   narrowed to float for it and its result stored with the dtype's rounding. */
typedef enum { CLASS_FLOAT, CLASS_INT, CLASS_CAST, CLASS_USER } op_class;

typedef struct ew_ctx {
    const vf_exec *e;
    op_class cls;
    vf_scalar_f f;
    vf_scalar_i fi;
    const vf_uelem *ue;   /* CLASS_USER */
    bool is_unsigned;
    const void *in_base[3];
    void *out_base;
    /* CAST from a float dtype converts through double, else through int64 */
    bool cast_from_float;
} ew_ctx;

/* One innermost row of n elements at the given operand offsets; strides
   are the innermost loop strides. */
static void generic_row(const ew_ctx *c, const int64_t *off, const int64_t *st, int64_t n)
{
    const vf_exec *e = c->e;
    double fa[3][VF_CPU_CHUNK], fo[VF_CPU_CHUNK];
    int64_t ia[3][VF_CPU_CHUNK], io[VF_CPU_CHUNK];
    for (int64_t s = 0; s < n; s += VF_CPU_CHUNK) {
        int64_t m = n - s < VF_CPU_CHUNK ? n - s : VF_CPU_CHUNK;
        int64_t o = off[OP_OUT] + s * st[OP_OUT];
        /* out's innermost stride is 1 after simplification unless out has
           a single element per row; stores are contiguous from o. */
        if (c->cls == CLASS_USER) {
            float ua[3][VF_CPU_CHUNK], uo[VF_CPU_CHUNK];
            const float *up[3] = {ua[0], ua[1], ua[2]};
            for (int j = 0; j < e->n_in; j++) {
                vf_cpu_load_f64(c->in_base[j], e->in[j].dtype, off[j + 1] + s * st[j + 1], st[j + 1], m, fa[j]);
                for (int64_t i = 0; i < m; i++) ua[j][i] = (float)fa[j][i];
            }
            c->ue->cpu(m, up, uo, c->ue->user);
            for (int64_t i = 0; i < m; i++) fo[i] = uo[i];
            vf_cpu_store_f64(c->out_base, e->out.dtype, o, m, fo);
        } else if (c->cls == CLASS_FLOAT || (c->cls == CLASS_CAST && c->cast_from_float)) {
            for (int j = 0; j < e->n_in; j++)
                vf_cpu_load_f64(c->in_base[j], e->in[j].dtype, off[j + 1] + s * st[j + 1],
                                st[j + 1], m, fa[j]);
            if (c->cls == CLASS_CAST) {
                vf_cpu_store_f64(c->out_base, e->out.dtype, o, m, fa[0]);
                continue;
            }
            const double *b = e->n_in > 1 ? fa[1] : fa[0];
            const double *cc = e->n_in > 2 ? fa[2] : fa[0];
            for (int64_t i = 0; i < m; i++) fo[i] = c->f(fa[0][i], b[i], cc[i]);
            vf_cpu_store_f64(c->out_base, e->out.dtype, o, m, fo);
        } else {
            for (int j = 0; j < e->n_in; j++)
                vf_cpu_load_i64(c->in_base[j], e->in[j].dtype, off[j + 1] + s * st[j + 1],
                                st[j + 1], m, ia[j]);
            if (c->cls == CLASS_CAST) {
                vf_cpu_store_i64(c->out_base, e->out.dtype, o, m, ia[0]);
                continue;
            }
            const int64_t *b = e->n_in > 1 ? ia[1] : ia[0];
            const int64_t *cc = e->n_in > 2 ? ia[2] : ia[0];
            for (int64_t i = 0; i < m; i++) io[i] = c->fi(ia[0][i], b[i], cc[i], c->is_unsigned);
            vf_cpu_store_i64(c->out_base, e->out.dtype, o, m, io);
        }
    }
}

typedef struct ew_job {
    ew_ctx c;
    vf_cpu_loop l;
    int outer_rank;          /* dims [0, outer_rank) of l are the rows */
    int64_t inner;           /* elements per row */
    int64_t inner_st[VF_CPU_MAX_OPS];
    vf_cpu_fast_row fast;    /* NULL: generic_row */
} ew_job;

/* Elements [lo, hi) in output order: the tail of a row, whole rows, the
   head of a row. */
static void ew_part(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)part, (void)parts;
    const ew_job *j = arg;
    const ew_ctx *c = &j->c;
    int64_t i0 = lo % j->inner;
    vf_cpu_cursor cur;
    vf_cpu_cursor_seek(&j->l, j->outer_rank, lo / j->inner, &cur);
    while (lo < hi) {
        int64_t n = j->inner - i0 < hi - lo ? j->inner - i0 : hi - lo;
        int64_t off[VF_CPU_MAX_OPS];
        for (int k = 0; k < j->l.nops; k++) off[k] = cur.off[k] + i0 * j->inner_st[k];
        if (j->fast) {
            const void *in[3] = {NULL, NULL, NULL};
            for (int k = 0; k < c->e->n_in; k++)
                in[k] = (const char *)c->in_base[k] + off[k + 1] * (int64_t)vf_dtype_size(c->e->in[k].dtype);
            j->fast((char *)c->out_base + off[OP_OUT] * (int64_t)vf_dtype_size(c->e->out.dtype), in[0], in[1],
                    in[2], j->inner_st, n, vf_op_get(c->e->op)->cpu_f);
        } else {
            generic_row(c, off, j->inner_st, n);
        }
        lo += n;
        i0 = 0;
        vf_cpu_cursor_next(&j->l, j->outer_rank, &cur);
    }
}

static vf_status setup_class(vf_cpu *cpu, const vf_exec *e, ew_ctx *c)
{
    const vf_op_info *info = vf_op_get(e->op);
    if (e->op == VF_OP_USER_ELEMENTWISE) {
        c->cls = CLASS_USER;
        c->ue = e->attrs.uelem;
        if (!c->ue || !c->ue->cpu)
            return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED, "cpu backend: user elementwise op '%s' has no C "
                              "function (a loaded function keeps only its GLSL: run it on the Vulkan backend, "
                              "or trace it again with vf_elementwise_create's desc.cpu)",
                              c->ue ? c->ue->name : "?");
        return VF_OK;
    }
    if (e->op == VF_OP_CAST) {
        c->cls = CLASS_CAST;
        c->cast_from_float = vf_dtype_is_float(e->in[0].dtype);
        return VF_OK;
    }
    /* The data dtype picks the scalar function (where's in[0] is the bool
       condition: the row's data input carries it). */
    vf_dtype data = e->in[vf_op_data_input(e->op)].dtype;
    if (vf_dtype_is_float(data)) {
        c->cls = CLASS_FLOAT;
        c->f = info->cpu_f;
        if (!c->f)
            return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                              "cpu backend: op %s has no float kernel (dtype %s)", info->name,
                              vf_dtype_name(data));
    } else {
        c->cls = CLASS_INT;
        c->fi = info->cpu_i;
        c->is_unsigned = data != VF_I32; /* bool values are 0/1: unsigned */
        if (!c->fi)
            return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                              "cpu backend: op %s has no integer kernel (dtype %s)", info->name,
                              vf_dtype_name(data));
    }
    return VF_OK;
}

vf_status vf_cpu_elementwise(vf_cpu *cpu, const vf_exec *e)
{
    const vf_op_info *info = vf_op_get(e->op);
    int arity = e->op == VF_OP_USER_ELEMENTWISE && e->attrs.uelem ? e->attrs.uelem->n_in : info->arity;
    if (e->n_in != arity || e->n_in < 1 || e->n_in > 3)
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT,
                          "cpu backend: op %s given %d inputs, wants %d", info->name, e->n_in, arity);
    if (vf_cpu_numel(&e->out) == 0) return VF_OK;

    /* Same-dtype cast and copy are bit copies (keeps NaN payloads). */
    if (e->op == VF_OP_COPY || (e->op == VF_OP_CAST && e->in[0].dtype == e->out.dtype))
        return vf_cpu_broadcast_copy(cpu, e);

    ew_ctx c = {.e = e};
    vf_status s = setup_class(cpu, e, &c);
    if (s != VF_OK) return s;
    c.out_base = vf_cpu_ptr(&e->out);
    for (int j = 0; j < e->n_in; j++) c.in_base[j] = vf_cpu_ptr(&e->in[j]);

    ew_job j = {.c = c, .l = {.rank = e->out.rank, .nops = e->n_in + 1}};
    vf_cpu_loop *l = &j.l;
    for (int d = 0; d < l->rank; d++) l->dim[d] = e->out.shape[d];
    vf_cpu_contig_strides(l->rank, l->dim, l->st[OP_OUT]);
    for (int k = 0; k < e->n_in; k++)
        vf_cpu_broadcast_strides(e->in[k].rank, e->in[k].shape, l->rank, l->dim, l->st[k + 1]);
    vf_cpu_loop_simplify(l);

    /* Rank 0 after simplification: a single element. */
    j.inner = l->rank ? l->dim[l->rank - 1] : 1;
    if (l->rank)
        for (int k = 0; k < l->nops; k++) j.inner_st[k] = l->st[k][l->rank - 1];
    else
        j.inner_st[OP_OUT] = 1;
    j.outer_rank = l->rank ? l->rank - 1 : 0;
    j.fast = vf_cpu_fast_row_for(e, j.inner_st);
    int64_t total = vf_cpu_loop_count(l, 0, j.outer_rank) * j.inner;
    vf_cpu_parallel(cpu->workers, total, j.fast ? VF_CPU_GRAIN_FAST : VF_CPU_GRAIN_SLOW, ew_part, &j);
    return VF_OK;
}
