/* Fused elementwise groups on the CPU backend (cpu_fused.h).
 *
 * The output shape is walked as a loop nest over every tensor of the
 * group (inputs broadcast, outputs contiguous), its dims merged where all
 * tensors allow, and each innermost row is cut into chunks of CHUNK
 * elements. For a chunk, every member runs in turn over CHUNK values:
 * group inputs are read where they lie, a member's value is a typed
 * CHUNK-element temporary (or, for a group output, the output's own
 * memory for that chunk), so values between members stay in L1.
 *
 * Why the results are the eager kernels' bit for bit (a NaN's sign aside:
 * NaN + NaN takes either operand's, as the compiled loop orders them): a member's value is
 * kept in its dtype, exactly as the eager op stores it, and read back as
 * the eager op reads memory (vf_cpu_load_f64 / _i64, the same op-table
 * function, vf_cpu_store_f64 / _i64). The f32 fast loops are limited to
 * ops where float arithmetic equals the double result rounded to float
 * (+ - * / sqrt: double rounding is innocuous for these; the others are
 * exact), which is what the eager kernels compute; exp, tanh, sigmoid,
 * gelu, log, softplus and rsqrt run the eager kernels' own rows
 * (fast_math.h).
 */
#include "cpu/cpu_fused.h"
#include "cpu/fast_math.h"
#include "graph/uelem.h"
#include "util/dtype.h"
#include "util/fault.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK VF_CPU_FUSED_CHUNK

typedef vf_cpu_opnd opnd;

/* ---- which groups -------------------------------------------------------- */

static bool same_shape(const vf_tref *a, int rank, const int64_t *dim)
{
    if (a->rank != rank) return false;
    for (int d = 0; d < rank; d++)
        if (a->shape[d] != dim[d]) return false;
    return true;
}

static bool is_splat(const vf_fused_group *g, int m)
{
    return g->execs[m].op == VF_OP_FILL && g->members[m].out < 0;
}

bool vf_cpu_fused_op_known(const vf_exec *e)
{
    const vf_op_info *info = vf_op_get(e->op);
    if (e->op == VF_OP_FILL) return true;
    if (info->kind != VF_KIND_ELEMENTWISE) return false;
    if (e->op == VF_OP_USER_ELEMENTWISE) return e->attrs.uelem && e->attrs.uelem->cpu;
    if (e->op == VF_OP_CAST || e->op == VF_OP_COPY) return true;
    if (e->n_in != info->arity || e->n_in < 1 || e->n_in > 3) return false;
    vf_dtype data = e->in[vf_op_data_input(e->op)].dtype;
    return vf_dtype_is_float(data) ? info->cpu_f != NULL : info->cpu_i != NULL;
}

bool vf_cpu_fused_supported(const vf_fused_group *g)
{
    if (g->kind != VF_FUSED_ELEMENTWISE || g->n_outputs < 1 || g->n_inputs + g->n_outputs > VF_FUSED_MAX_TENSORS)
        return false;
    const vf_tref *o = &g->tensors[g->n_inputs];
    for (int k = 0; k < g->n_outputs; k++)
        if (!same_shape(&g->tensors[g->n_inputs + k], o->rank, o->shape)) return false;
    for (int m = 0; m < g->n_members; m++) {
        const vf_exec *e = &g->execs[m];
        const vf_fused_member *mb = &g->members[m];
        if (!vf_cpu_fused_op_known(e)) return false;
        if (is_splat(g, m)) continue;
        if (!same_shape(&e->out, o->rank, o->shape)) return false;
        for (int k = 0; k < e->n_in; k++) {
            int src = mb->in[k];
            if (src >= g->n_inputs) return false;
            if (src < 0) {
                int j = -1 - src;
                if (j >= m || (!is_splat(g, j) && !same_shape(&g->execs[j].out, o->rank, o->shape))) return false;
            }
        }
        if (mb->out >= 0 && (mb->out < g->n_inputs || mb->out >= g->n_inputs + g->n_outputs)) return false;
    }
    return true;
}

/* ---- one member over a chunk -------------------------------------------- */

/* The hot loops are compiled for the wider vector units too, the best one
   picked at load (GCC's target_clones): the library itself is built for
   baseline x86-64. Not under the sanitizers, whose runtimes are built for
   the baseline. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define VF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VF_CLONES
#endif

/* A contiguous float view of an f32 operand (a broadcast one spread into
   tmp). */
VF_CLONES static const float *f32_row(const opnd *a, int64_t m, float *tmp)
{
    if (a->st == 1) return a->p;
    const float *src = a->p;
    if (a->st == 0) { /* a broadcast value: a plain splat loop vectorises */
        const float v = src[0];
        for (int64_t i = 0; i < m; i++) tmp[i] = v;
        return tmp;
    }
    for (int64_t i = 0; i < m; i++) tmp[i] = src[i * a->st];
    return tmp;
}

static const uint8_t *bool_row(const opnd *a, int64_t m, uint8_t *tmp)
{
    if (a->st == 1) return a->p;
    const uint8_t *src = a->p;
    for (int64_t i = 0; i < m; i++) tmp[i] = src[i * a->st];
    return tmp;
}

/* The f32 loops: ops whose float result equals the double result rounded
   to float. False: not one of them (or other dtypes). */
VF_CLONES static bool f32_fast(const vf_exec *e, const opnd *in, void *out, int64_t m, float (*tmp)[CHUNK])
{
    bool f2f = e->out.dtype == VF_F32;
    for (int k = 0; k < e->n_in; k++)
        if (in[k].dt != (e->op == VF_OP_WHERE && k == 0 ? VF_BOOL : VF_F32)) return false;
    float *o = out;
    uint8_t *ob = out;
    const float *a = e->n_in > 0 && e->op != VF_OP_WHERE ? f32_row(&in[0], m, tmp[0]) : NULL;
    const float *b = e->n_in > 1 ? f32_row(&in[1], m, tmp[1]) : NULL;
    switch (e->op) {
#define LOOP2(OPR)                                       \
    if (!f2f) return false;                              \
    for (int64_t i = 0; i < m; i++) o[i] = a[i] OPR b[i]; \
    return true;
    case VF_OP_ADD: LOOP2(+)
    case VF_OP_SUB: LOOP2(-)
    case VF_OP_MUL: LOOP2(*)
    case VF_OP_DIV: LOOP2(/)
#undef LOOP2
    case VF_OP_MAXIMUM:
        if (!f2f) return false;
        for (int64_t i = 0; i < m; i++) o[i] = isnan(a[i]) || isnan(b[i]) ? NAN : (a[i] > b[i] ? a[i] : b[i]);
        return true;
    case VF_OP_MINIMUM:
        if (!f2f) return false;
        for (int64_t i = 0; i < m; i++) o[i] = isnan(a[i]) || isnan(b[i]) ? NAN : (a[i] < b[i] ? a[i] : b[i]);
        return true;
    case VF_OP_NEG:
        if (!f2f) return false;
        for (int64_t i = 0; i < m; i++) o[i] = -a[i];
        return true;
    case VF_OP_RELU:
        if (!f2f) return false;
        for (int64_t i = 0; i < m; i++) o[i] = a[i] < 0.0f ? 0.0f : a[i];
        return true;
    case VF_OP_SQUARE:
        if (!f2f) return false;
        for (int64_t i = 0; i < m; i++) o[i] = a[i] * a[i];
        return true;
    case VF_OP_SQRT:
        if (!f2f) return false;
        for (int64_t i = 0; i < m; i++) o[i] = sqrtf(a[i]);
        return true;
    case VF_OP_EXP:
    case VF_OP_TANH:
    case VF_OP_SIGMOID:
    case VF_OP_GELU:
    case VF_OP_RSQRT:
    case VF_OP_LOG:
    case VF_OP_SOFTPLUS: /* the eager rows' own (kernels_elementwise_fast.c) */
        if (!f2f) return false;
        vf_cpu_fm_row(e->op, a, o, m);
        return true;
#define CMP(OPR)                                                    \
    if (e->out.dtype != VF_BOOL) return false;                      \
    for (int64_t i = 0; i < m; i++) ob[i] = (uint8_t)(a[i] OPR b[i]); \
    return true;
    case VF_OP_GREATER: CMP(>)
    case VF_OP_GREATER_EQUAL: CMP(>=)
    case VF_OP_LESS: CMP(<)
    case VF_OP_LESS_EQUAL: CMP(<=)
    case VF_OP_EQUAL: CMP(==)
    case VF_OP_NOT_EQUAL: CMP(!=)
#undef CMP
    case VF_OP_WHERE: {
        if (!f2f) return false;
        const uint8_t *c = bool_row(&in[0], m, (uint8_t *)tmp[2]);
        const float *x = f32_row(&in[1], m, tmp[0]), *y = f32_row(&in[2], m, tmp[1]);
        /* a bit select, so that the loop vectorises (a branch per element
           did not); bool bytes other than 0/1 count as true, as in eager */
        uint32_t *ou = out;
        const uint32_t *xu = (const uint32_t *)x, *yu = (const uint32_t *)y;
        for (int64_t i = 0; i < m; i++) {
            uint32_t k = 0u - (uint32_t)(c[i] != 0);
            ou[i] = (xu[i] & k) | (yu[i] & ~k);
        }
        return true;
    }
    default: return false;
    }
}

/* Work arrays of one chunk. */
typedef struct chunk_tmp {
    double fa[3][CHUNK], fo[CHUNK];
    int64_t ia[3][CHUNK], io[CHUNK];
    float ft[3][CHUNK];
} chunk_tmp;

static void bit_copy(const opnd *a, vf_dtype dt, void *out, int64_t m)
{
    size_t es = vf_dtype_size(dt);
    if (a->st == 1) {
        memmove(out, a->p, (size_t)m * es);
        return;
    }
    for (int64_t i = 0; i < m; i++) memcpy((char *)out + (size_t)i * es, (const char *)a->p + (size_t)(i * a->st) * es, es);
}

size_t vf_cpu_fused_tmp_bytes(void) { return sizeof(chunk_tmp); }

void vf_cpu_fused_eval(const vf_exec *e, const opnd *in, void *out, int64_t m, void *tmp)
{
    chunk_tmp *t = tmp;
    if (e->op == VF_OP_FILL) {
        double v = e->attrs.value;
        for (int64_t i = 0; i < m; i++) t->fo[i] = v;
        vf_cpu_store_f64(out, e->out.dtype, 0, m, t->fo);
        return;
    }
    if (e->op == VF_OP_COPY || (e->op == VF_OP_CAST && in[0].dt == e->out.dtype)) {
        bit_copy(&in[0], e->out.dtype, out, m);
        return;
    }
    if (f32_fast(e, in, out, m, t->ft)) return;
    const vf_op_info *info = vf_op_get(e->op);
    if (e->op == VF_OP_USER_ELEMENTWISE) {
        const vf_uelem *ue = e->attrs.uelem;
        const float *up[3] = {t->ft[0], t->ft[1], t->ft[2]};
        float uo[CHUNK];
        for (int k = 0; k < e->n_in; k++) {
            vf_cpu_load_f64(in[k].p, in[k].dt, 0, in[k].st, m, t->fa[k]);
            for (int64_t i = 0; i < m; i++) t->ft[k][i] = (float)t->fa[k][i];
        }
        ue->cpu(m, up, uo, ue->user);
        for (int64_t i = 0; i < m; i++) t->fo[i] = uo[i];
        vf_cpu_store_f64(out, e->out.dtype, 0, m, t->fo);
        return;
    }
    bool from_float = vf_dtype_is_float(e->op == VF_OP_CAST ? in[0].dt : e->in[vf_op_data_input(e->op)].dtype);
    if (from_float) {
        for (int k = 0; k < e->n_in; k++) vf_cpu_load_f64(in[k].p, in[k].dt, 0, in[k].st, m, t->fa[k]);
        if (e->op == VF_OP_CAST) {
            vf_cpu_store_f64(out, e->out.dtype, 0, m, t->fa[0]);
            return;
        }
        const double *a = t->fa[0], *b = e->n_in > 1 ? t->fa[1] : a, *c = e->n_in > 2 ? t->fa[2] : a;
        for (int64_t i = 0; i < m; i++) t->fo[i] = info->cpu_f(a[i], b[i], c[i]);
        vf_cpu_store_f64(out, e->out.dtype, 0, m, t->fo);
        return;
    }
    for (int k = 0; k < e->n_in; k++) vf_cpu_load_i64(in[k].p, in[k].dt, 0, in[k].st, m, t->ia[k]);
    if (e->op == VF_OP_CAST) {
        vf_cpu_store_i64(out, e->out.dtype, 0, m, t->ia[0]);
        return;
    }
    bool is_unsigned = e->in[vf_op_data_input(e->op)].dtype != VF_I32; /* bool values are 0/1 */
    const int64_t *a = t->ia[0], *b = e->n_in > 1 ? t->ia[1] : a, *c = e->n_in > 2 ? t->ia[2] : a;
    for (int64_t i = 0; i < m; i++) t->io[i] = info->cpu_i(a[i], b[i], c[i], is_unsigned);
    vf_cpu_store_i64(out, e->out.dtype, 0, m, t->io);
}

/* ---- the walk ----------------------------------------------------------------- */

typedef struct walk {
    int rank, nt;
    int64_t dim[VF_MAX_RANK];
    int64_t st[VF_FUSED_MAX_TENSORS][VF_MAX_RANK];
} walk;

bool vf_cpu_fused_overlaps(const vf_tref *a, const vf_tref *b)
{
    if (!a->buf || a->buf != b->buf) return false;
    size_t na = (size_t)vf_cpu_numel(a) * vf_dtype_size(a->dtype), nb = (size_t)vf_cpu_numel(b) * vf_dtype_size(b->dtype);
    return a->offset < b->offset + nb && b->offset < a->offset + na;
}

size_t vf_cpu_fused_scratch_bytes(int n_members)
{
    return sizeof(chunk_tmp) + (size_t)n_members * (CHUNK * 4 + sizeof(opnd) + 3 * sizeof(int));
}

/* The chunk temporary (slot) of each member: a member's value is needed
   until its last reader, so slots are reused as values die, and a chain
   of any length runs in two (its chunks stay in L1 however many members
   the group has). Splats keep theirs (computed once per run, before any
   chunk: they are given theirs first), and so do
   the values copied out at the end of each chunk (in place); a member's
   slot is never one of its inputs' (the eval loops may read after they
   write). slot[m] -1: none (the value is written to its output). last,
   stack: nm ints of scratch each. */
static void assign_slots(const vf_fused_group *g, bool in_place, int *slot, int *last, int *stack)
{
    int nm = g->n_members, top = 0, fresh = 0;
    for (int m = 0; m < nm; m++) last[m] = is_splat(g, m) || (in_place && g->members[m].out >= 0) ? nm : m;
    for (int m = 0; m < nm; m++)
        for (int k = 0; k < g->execs[m].n_in && k < 3; k++) {
            int src = g->members[m].in[k];
            if (src < 0 && last[-1 - src] < m) last[-1 - src] = m;
        }
    for (int m = 0; m < nm; m++) /* splats first: written before any chunk, they hold their slot throughout */
        slot[m] = is_splat(g, m) ? fresh++ : -1;
    for (int m = 0; m < nm; m++) {
        if (!is_splat(g, m) && (g->members[m].out < 0 || in_place)) slot[m] = top ? stack[--top] : fresh++;
        /* then the slots of the values that die here (each once: an input
           read twice is released at its first sight only) */
        for (int k = 0; k < g->execs[m].n_in && k < 3; k++) {
            int j = g->members[m].in[k] < 0 ? -1 - g->members[m].in[k] : -1;
            if (j >= 0 && last[j] == m && slot[j] >= 0) stack[top++] = slot[j], last[j] = -1;
        }
        if (last[m] == m && slot[m] >= 0) stack[top++] = slot[m]; /* read by no one */
    }
}

vf_status vf_cpu_fused_run(vf_cpu *cpu, const vf_fused_group *g, void *scratch)
{
    const vf_tref *T = g->tensors, *o = &T[g->n_inputs];
    int nt = g->n_inputs + g->n_outputs, nm = g->n_members;
    if (vf_cpu_numel(o) == 0) return VF_OK;
    walk w = {.rank = o->rank, .nt = nt};
    for (int d = 0; d < o->rank; d++) w.dim[d] = o->shape[d];
    for (int t = 0; t < nt; t++)
        vf_cpu_broadcast_strides(T[t].rank, T[t].shape, o->rank, o->shape, w.st[t]);
    vf_cpu_dims_simplify(&w.rank, w.dim, w.nt, w.st);
    /* an output written in place of an input: members write temporaries,
       copied out once the whole chunk is computed */
    bool in_place = false;
    for (int k = g->n_inputs; k < nt; k++)
        for (int j = 0; j < g->n_inputs; j++) in_place |= vf_cpu_fused_overlaps(&T[k], &T[j]);
    /* typed chunk temporaries (4 bytes: the widest dtype), shared as
       values die (assign_slots) */
    (void)cpu;
    chunk_tmp *tmp = scratch; /* its layout: vf_cpu_fused_scratch_bytes */
    uint8_t *vals = (uint8_t *)(tmp + 1);
    opnd *val = (opnd *)(vals + (size_t)nm * CHUNK * 4);
    int *slot = (int *)(val + nm), *last = slot + nm;
    memset(val, 0, (size_t)nm * sizeof *val);
    assign_slots(g, in_place, slot, last, last + nm);
    /* splats: computed once, broadcast to every chunk */
    for (int m = 0; m < nm; m++)
        if (is_splat(g, m)) {
            vf_cpu_fused_eval(&g->execs[m], NULL, vals + (size_t)slot[m] * CHUNK * 4, 1, tmp);
            val[m] = (opnd){vals + (size_t)slot[m] * CHUNK * 4, 0, g->execs[m].out.dtype};
        }
    int64_t inner = w.rank ? w.dim[w.rank - 1] : 1;
    int outer = w.rank ? w.rank - 1 : 0;
    int64_t rows = 1, idx[VF_MAX_RANK] = {0}, off[VF_FUSED_MAX_TENSORS] = {0};
    for (int d = 0; d < outer; d++) rows *= w.dim[d];
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t s = 0; s < inner; s += CHUNK) {
            int64_t n = inner - s < CHUNK ? inner - s : CHUNK;
            for (int m = 0; m < nm; m++) {
                if (is_splat(g, m)) continue;
                const vf_exec *e = &g->execs[m];
                const vf_fused_member *mb = &g->members[m];
                opnd in[3];
                for (int k = 0; k < e->n_in; k++) {
                    int src = mb->in[k];
                    if (src < 0) {
                        in[k] = val[-1 - src];
                    } else {
                        int64_t st = w.rank ? w.st[src][w.rank - 1] : 0;
                        size_t es = vf_dtype_size(T[src].dtype);
                        in[k] = (opnd){(const char *)T[src].buf->data + T[src].offset +
                                           (size_t)(off[src] + s * st) * es,
                                       st, T[src].dtype};
                    }
                }
                void *dst = vals + (size_t)(slot[m] >= 0 ? slot[m] : 0) * CHUNK * 4;
                if (mb->out >= 0 && !in_place)
                    dst = (char *)T[mb->out].buf->data + T[mb->out].offset +
                          (size_t)(off[mb->out] + s) * vf_dtype_size(T[mb->out].dtype);
                vf_cpu_fused_eval(e, in, dst, n, tmp);
                val[m] = (opnd){dst, 1, e->out.dtype};
            }
            for (int m = 0; in_place && m < nm; m++) {
                int t = g->members[m].out;
                if (t < 0) continue;
                size_t es = vf_dtype_size(T[t].dtype);
                memcpy((char *)T[t].buf->data + T[t].offset + (size_t)(off[t] + s) * es, val[m].p, (size_t)n * es);
            }
        }
        for (int d = outer - 1; d >= 0; d--) { /* the next row: last outer dim fastest */
            for (int t = 0; t < nt; t++) off[t] += w.st[t][d];
            if (++idx[d] < w.dim[d]) break;
            for (int t = 0; t < nt; t++) off[t] -= w.st[t][d] * w.dim[d];
            idx[d] = 0;
        }
    }
    return VF_OK;
}

/* ---- matmul and conv epilogues --------------------------------------------- */

void vf_cpu_epilogue_free(vf_cpu_epilogue *ep)
{
    free(ep->execs);
    free(ep->members);
    memset(ep, 0, sizeof *ep);
}

/* The member of conv group g that adds a bias to the conv's value, the
   center's only reader (its group input in *bias), or -1 (cpu_fused.h). */
static int bias_member(const vf_fused_group *g, int *bias)
{
    int c = g->center, found = -1;
    const vf_exec *ce = &g->execs[c];
    if (g->kind != VF_FUSED_CONV || ce->op != VF_OP_CONV2D || ce->out.dtype != VF_F32 || ce->out.rank != 4 ||
        g->members[c].out >= 0)
        return -1;
    for (int m = 0; m < g->n_members; m++) {
        if (m == c) continue;
        const vf_exec *e = &g->execs[m];
        const vf_fused_member *mb = &g->members[m];
        int reads = 0, k = 0;
        for (int j = 0; j < e->n_in && j < 3; j++)
            if (mb->in[j] == VF_FUSED_MEMBER(c)) reads++, k = j;
        if (!reads) continue;
        if (found >= 0 || reads != 1 || e->op != VF_OP_ADD || e->n_in != 2) return -1;
        const vf_tref *b = &e->in[1 - k];
        int src = mb->in[1 - k];
        if (src < 0 || b->dtype != VF_F32 || e->out.dtype != VF_F32 || b->rank < 1 ||
            b->shape[b->rank - 1] != ce->out.shape[3] || !same_shape(&e->out, 4, ce->out.shape))
            return -1;
        for (int d = 0; d < b->rank - 1; d++)
            if (b->shape[d] != 1) return -1;
        found = m, *bias = src;
    }
    return found;
}

bool vf_cpu_epilogue_make(const vf_fused_group *g, vf_cpu_epilogue *ep)
{
    memset(ep, 0, sizeof *ep);
    int c = g->center, nm = g->n_members, ni = g->n_inputs;
    if ((g->kind != VF_FUSED_MATMUL && g->kind != VF_FUSED_CONV) || c < 0 || c >= nm || nm < 2) return false;
    int bias = -1, add = bias_member(g, &bias);
    ep->execs = vf_calloc((size_t)nm, sizeof *ep->execs);
    ep->members = vf_calloc((size_t)nm, sizeof *ep->members);
    int *at = vf_calloc((size_t)nm, sizeof *at); /* old member -> new member */
    bool ok = ep->execs && ep->members && at;
    int n = 0;
    for (int m = 0; ok && m < nm; m++) {
        if (m == c) continue;
        const vf_fused_member *mb = &g->members[m];
        vf_fused_member nb = {.out = mb->out >= ni ? mb->out + 1 : mb->out};
        if (m == add && mb->out < 0) {
            at[m] = -1; /* its value is the center's now */
            continue;
        }
        for (int k = 0; k < 3; k++) {
            int src = mb->in[k];
            if (src >= 0) nb.in[k] = src;              /* inputs keep their numbers */
            else if (-1 - src == c) nb.in[k] = ni;     /* the center's value: the new input */
            else if (-1 - src < m && at[-1 - src] < 0) nb.in[k] = ni; /* the folded add's: the center's */
            else if (-1 - src < m) nb.in[k] = VF_FUSED_MEMBER(at[-1 - src]);
            else ok = false;
        }
        ep->execs[n] = g->execs[m];
        if (m == add) { /* a group output: copied from the center's value */
            ep->execs[n].op = VF_OP_COPY;
            ep->execs[n].n_in = 1;
            ep->execs[n].in[0] = g->execs[c].out;
            nb.in[0] = ni, nb.in[1] = nb.in[2] = 0;
        }
        ep->members[n] = nb;
        for (int k = 0; k < ep->execs[n].n_in && k < 3; k++)
            if (nb.in[k] >= 0 && nb.in[k] < 64) ep->reads |= 1ull << nb.in[k];
        at[m] = n++;
    }
    free(at);
    ep->group = (vf_fused_group){.kind = VF_FUSED_ELEMENTWISE, .n_members = n, .execs = ep->execs,
                                 .members = ep->members, .center = -1, .n_inputs = ni + 1,
                                 .n_outputs = g->n_outputs - (g->members[c].out >= 0 ? 1 : 0)};
    ep->center = c;
    ep->bias = add >= 0 ? bias : -1;
    /* the epilogue's tensors exist only at run time; check its shape rules
       against the group's own tensors (the center's value: its exec's out) */
    vf_tref *t = ok ? vf_calloc((size_t)(ni + 1 + g->n_outputs), sizeof *t) : NULL;
    if (t) {
        for (int i = 0; i < ni; i++) t[i] = g->tensors[i];
        t[ni] = g->execs[c].out;
        int o = ni + 1;
        for (int k = 0; k < g->n_outputs; k++) t[o + k] = g->tensors[ni + k];
        ep->group.tensors = t;
        ok = ep->group.n_outputs == g->n_outputs && vf_cpu_fused_supported(&ep->group);
        ep->group.tensors = NULL;
        free(t);
    } else {
        ok = false;
    }
    if (!ok) vf_cpu_epilogue_free(ep);
    return ok;
}
