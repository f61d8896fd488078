/* Elementwise ops (and CAST) on the CPU, driven by the op table.
 *
 * Generic path: the operands' layouts (broadcast strides) are simplified
 * into a loop nest; every innermost row is processed in chunks that are
 * widened to double (float ops) or int64 (integer and bool ops), mapped
 * through the row's reference scalar function and stored with the dtype's
 * rounding or 32-bit wrap. A new elementwise row in the op table therefore
 * needs nothing here.
 *
 * Fast path: f32 add/sub/mul/div rows with unit or zero strides are plain
 * float loops. For these four ops float arithmetic gives exactly the double
 * result rounded to float, so the fast path agrees bit for bit.
 */
#include "cpu/cpu.h"
#include "graph/uelem.h"

#include <math.h>
#include <string.h>

enum { OP_OUT = 0 }; /* operand 0 of the loop is out, 1..n_in the inputs */

/* ---- f32 fast rows --------------------------------------------------------- */

#define FAST_ROW(name, OPER)                                                                     \
    static void name(float *o, const float *a, const float *b, int64_t sa, int64_t sb, int64_t n) \
    {                                                                                            \
        if (sa && sb) {                                                                          \
            for (int64_t i = 0; i < n; i++) o[i] = a[i] OPER b[i];                               \
        } else if (sb) {                                                                         \
            const float x = a[0];                                                                \
            for (int64_t i = 0; i < n; i++) o[i] = x OPER b[i];                                  \
        } else if (sa) {                                                                         \
            const float y = b[0];                                                                \
            for (int64_t i = 0; i < n; i++) o[i] = a[i] OPER y;                                  \
        } else {                                                                                 \
            const float r = a[0] OPER b[0];                                                      \
            for (int64_t i = 0; i < n; i++) o[i] = r;                                            \
        }                                                                                        \
    }

FAST_ROW(row_add_f32, +)
FAST_ROW(row_sub_f32, -)
FAST_ROW(row_mul_f32, *)
FAST_ROW(row_div_f32, /)

typedef void (*fast_row_fn)(float *, const float *, const float *, int64_t, int64_t, int64_t);

static fast_row_fn fast_row_for(const vf_exec *e, const vf_cpu_loop *l)
{
    if (e->n_in != 2 || e->out.dtype != VF_F32 || e->in[0].dtype != VF_F32 ||
        e->in[1].dtype != VF_F32)
        return NULL;
    /* The innermost strides must be unit or broadcast for the plain loops. */
    if (l->rank > 0) {
        int d = l->rank - 1;
        if (l->st[OP_OUT][d] != 1) return NULL;
        for (int j = 1; j <= 2; j++)
            if (l->st[j][d] != 0 && l->st[j][d] != 1) return NULL;
    }
    switch (e->op) {
    case VF_OP_ADD: return row_add_f32;
    case VF_OP_SUB: return row_sub_f32;
    case VF_OP_MUL: return row_mul_f32;
    case VF_OP_DIV: return row_div_f32;
    default: return NULL;
    }
}

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

    vf_cpu_loop l = {.rank = e->out.rank, .nops = e->n_in + 1};
    for (int d = 0; d < l.rank; d++) l.dim[d] = e->out.shape[d];
    vf_cpu_contig_strides(l.rank, l.dim, l.st[OP_OUT]);
    for (int j = 0; j < e->n_in; j++)
        vf_cpu_broadcast_strides(e->in[j].rank, e->in[j].shape, l.rank, l.dim, l.st[j + 1]);
    vf_cpu_loop_simplify(&l);

    /* Rank 0 after simplification: a single element. */
    int64_t inner = l.rank ? l.dim[l.rank - 1] : 1;
    int64_t inner_st[VF_CPU_MAX_OPS] = {0};
    if (l.rank)
        for (int j = 0; j < l.nops; j++) inner_st[j] = l.st[j][l.rank - 1];
    int outer_rank = l.rank ? l.rank - 1 : 0;
    int64_t rows = vf_cpu_loop_count(&l, 0, outer_rank);

    fast_row_fn fast = fast_row_for(e, &l);
    vf_cpu_cursor cur;
    vf_cpu_cursor_init(&cur, l.nops);
    for (int64_t r = 0; r < rows; r++) {
        if (fast) {
            fast((float *)c.out_base + cur.off[0], (const float *)c.in_base[0] + cur.off[1],
                 (const float *)c.in_base[1] + cur.off[2], inner_st[1], inner_st[2], inner);
        } else {
            generic_row(&c, cur.off, inner_st, inner);
        }
        vf_cpu_cursor_next(&l, outer_rank, &cur);
    }
    return VF_OK;
}
