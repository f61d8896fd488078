/* The softmax and log_softmax gradients along the last axis, f32, in one
 * pass per row instead of the rule's four kernels:
 *
 *   softmax:      dx = y * (g - sum(g * y))
 *   log_softmax:  dx = g - exp(y) * sum(g)
 *
 * (docs/GRADIENTS.md). The rule (src/autodiff/grad_rules.c) writes them
 * as ops: a multiply, a last-axis sum, a subtract and a multiply (or exp,
 * sum, multiply, subtract). Four walks over the rows, each writing its
 * value to memory, cost two to three times PyTorch's fused backward on
 * [2048, 1024]. Here each row is read twice (once for its sum, once for
 * the output) and written once, with the SAME roundings as those ops:
 * each product, difference and exp rounded to f32 as the eager kernels
 * store them, the sum accumulated in double in vf_cpu_reduce's order
 * (chunks of VF_CPU_CHUNK, cpu_sum.h's four lanes) and rounded to f32 as
 * its output is. So the rule's result does not depend on the path that
 * computes it: the eager gradient (the backend's row_grad), a traced
 * plan's unfused nodes and a fused row group give the same bits.
 *
 * Rows are split across the backend's threads (cpu_threads.h); each row
 * is computed as on one thread.
 */
#include "cpu/cpu.h"
#include "cpu/cpu_sum.h"
#include "cpu/cpu_threads.h"
#include "cpu/fast_math.h"

#include <stdatomic.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
/* Wider vectors where the CPU has them; no FMA contraction (the build's
   ISO C mode keeps it off), so every clone rounds as the ops do. */
#define RG_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define RG_CLONES
#endif

/* Elements per block: the exps of a block of rows (log_softmax) and the
   products of a chunk stay in L1. */
#define RG_BLOCK 4096
/* Elements per part: a part is worth waking a worker. */
#define RG_GRAIN 8192

static _Atomic int64_t grad_rows;

int64_t vf_cpu_softmax_grad_rows(void) { return atomic_load_explicit(&grad_rows, memory_order_relaxed); }

/* sum(g * y) of a row as reduce_sum of the stored product: each product
   rounded to f32, then vf_cpu_reduce's chunks and lanes, the total
   rounded to f32. y NULL: sum(g). Inlined, as the two below, into the
   clones that call them: each row without a call, compiled for the
   clone's target (short rows are mostly call overhead otherwise). */
#define RG_INLINE static inline __attribute__((always_inline))

RG_INLINE float row_sum(const float *g, const float *y, int64_t n)
{
    double buf[VF_CPU_CHUNK], acc = 0.0;
    for (int64_t s = 0; s < n; s += VF_CPU_CHUNK) {
        int64_t c = n - s < VF_CPU_CHUNK ? n - s : VF_CPU_CHUNK;
        if (y) {
            for (int64_t i = 0; i < c; i++) {
                float p = g[s + i] * y[s + i];
                buf[i] = p;
            }
        } else {
            for (int64_t i = 0; i < c; i++) buf[i] = g[s + i];
        }
        acc += vf_cpu_sum4(buf, c, false);
    }
    return (float)acc;
}

/* dx = y * (g - s), the difference rounded as the subtract stores it */
RG_INLINE void softmax_out(const float *g, const float *y, float *dx, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++) {
        float d = g[i] - s;
        dx[i] = y[i] * d;
    }
}

/* dx = g - e * s, e = exp(y) as the exp kernel gives it */
RG_INLINE void log_softmax_out(const float *g, const float *e, float *dx, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++) {
        float p = e[i] * s;
        dx[i] = g[i] - p;
    }
}

RG_CLONES static void softmax_rows(const float *g, const float *y, float *dx, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = g + r * n, *yr = y + r * n;
        softmax_out(gr, yr, dx + r * n, n, row_sum(gr, yr, n));
    }
}

RG_CLONES static void sums_of_rows(const float *g, float *s, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) s[r] = row_sum(g + r * n, NULL, n);
}

RG_CLONES static void log_softmax_rows(const float *g, const float *e, float *dx, const float *s, int64_t rows,
                                       int64_t n)
{
    for (int64_t r = 0; r < rows; r++) log_softmax_out(g + r * n, e + r * n, dx + r * n, n, s[r]);
}

void vf_cpu_softmax_grad_rows_f32(const float *g, const float *y, float *dx, int64_t rows, int64_t n, bool log_out)
{
    if (!log_out) {
        softmax_rows(g, y, dx, rows, n);
    } else {
        /* exp over a block of rows at once (one call of the exp kernel's
           row, which counts its calls), or over a chunk of a long row */
        float e[RG_BLOCK], s[RG_BLOCK];
        int64_t per = n <= RG_BLOCK ? RG_BLOCK / n : 1;
        for (int64_t r = 0; r < rows; r += per) {
            int64_t kb = rows - r < per ? rows - r : per;
            const float *gr = g + r * n, *yr = y + r * n;
            float *dr = dx + r * n;
            /* every row's sum first: dx may be g itself */
            sums_of_rows(gr, s, kb, n);
            if (n <= RG_BLOCK) {
                vf_cpu_fm_row(VF_OP_EXP, yr, e, kb * n);
                log_softmax_rows(gr, e, dr, s, kb, n);
                continue;
            }
            for (int64_t c0 = 0; c0 < n; c0 += RG_BLOCK) {
                int64_t c = n - c0 < RG_BLOCK ? n - c0 : RG_BLOCK;
                vf_cpu_fm_row(VF_OP_EXP, yr + c0, e, c);
                log_softmax_rows(gr + c0, e, dr + c0, s, 1, c);
            }
        }
    }
    atomic_fetch_add_explicit(&grad_rows, rows, memory_order_relaxed);
}

typedef struct rg_job {
    const float *g, *y;
    float *dx;
    int64_t n;
    bool log_out;
} rg_job;

static void rg_part(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)part, (void)parts;
    const rg_job *j = arg;
    vf_cpu_softmax_grad_rows_f32(j->g + lo * j->n, j->y + lo * j->n, j->dx + lo * j->n, hi - lo, j->n, j->log_out);
}

/* ---- sparse softmax cross entropy ---------------------------------------- */

/* d loss / d logits seeded with g per row: g * (softmax(x) - onehot(label))
   (grad_rules.c's g_xent), rounded as its ops: the softmax op's float
   rows, the subtract (x - 0 is x itself), the multiply. */
typedef struct xg_job {
    const float *g, *x;
    const void *labels;
    vf_dtype lt;
    float *dx;
    int64_t n;
} xg_job;

/* rows of softmax values d times their row's g, less g at the label */
RG_CLONES static void xent_rows(float *d, const int64_t *lab, const float *g, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++, d += n) {
        int64_t l = lab[r];
        float gr = g[r], at = l >= 0 && l < n ? d[l] - 1.0f : 0.0f;
        for (int64_t i = 0; i < n; i++) d[i] = gr * d[i];
        if (l >= 0 && l < n) d[l] = gr * at;
    }
}

static void xg_part(void *arg, int part, int parts, int64_t lo, int64_t hi)
{
    (void)part, (void)parts;
    const xg_job *j = arg;
    int64_t n = j->n, per = n <= RG_BLOCK ? RG_BLOCK / n : 1;
    for (int64_t r = lo; r < hi; r += per) {
        int64_t kb = hi - r < per ? hi - r : per;
        /* a block of rows' softmax at once (one count of the rows), then
           each row while it is in L1 */
        vf_cpu_fm_softmax_rows_f32(j->x + r * n, j->dx + r * n, kb, n, false);
        int64_t lab[RG_BLOCK];
        vf_cpu_load_i64(j->labels, j->lt, r, 1, kb, lab);
        xent_rows(j->dx + r * n, lab, j->g + r, kb, n);
    }
    atomic_fetch_add_explicit(&grad_rows, hi - lo, memory_order_relaxed);
}

/* in[0] g [...], in[1] logits [..., C], in[2] labels [...] (i32 / u32) */
static vf_status xent_grad(vf_cpu *cpu, const vf_exec *e)
{
    const vf_tref *g = &e->in[0], *x = &e->in[1], *lab = &e->in[2], *o = &e->out;
    bool ok = e->n_in == 3 && x->rank >= 1 && g->dtype == VF_F32 && x->dtype == VF_F32 && o->dtype == VF_F32 &&
              (lab->dtype == VF_I32 || lab->dtype == VF_U32) && o->rank == x->rank && g->rank == x->rank - 1 &&
              lab->rank == x->rank - 1;
    for (int d = 0; ok && d < x->rank; d++)
        ok = o->shape[d] == x->shape[d] &&
             (d == x->rank - 1 || (g->shape[d] == x->shape[d] && lab->shape[d] == x->shape[d]));
    if (!ok)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: the fused cross entropy gradient wants f32 g [...], f32 logits [..., C] and "
                          "i32 / u32 labels [...] (use the rule's ops otherwise)");
    int64_t n = x->shape[x->rank - 1], total = vf_cpu_numel(o);
    if (total == 0) return VF_OK;
    xg_job j = {.g = vf_cpu_ptr(g), .x = vf_cpu_ptr(x), .labels = vf_cpu_ptr(lab), .lt = lab->dtype,
                .dx = vf_cpu_ptr(o), .n = n};
    vf_cpu_parallel(cpu->workers, total / n, RG_GRAIN / n > 1 ? RG_GRAIN / n : 1, xg_part, &j);
    return VF_OK;
}

vf_status vf_cpu_softmax_grad(vf_cpu *cpu, const vf_exec *e)
{
    if (e->op == VF_OP_SPARSE_XENT) return xent_grad(cpu, e);
    const vf_tref *g = &e->in[0], *y = &e->in[1], *o = &e->out;
    bool ok = e->n_in == 2 && (e->op == VF_OP_SOFTMAX || e->op == VF_OP_LOG_SOFTMAX) && o->rank >= 1 &&
              e->attrs.axis == o->rank - 1 && g->dtype == VF_F32 && y->dtype == VF_F32 && o->dtype == VF_F32 &&
              g->rank == o->rank && y->rank == o->rank;
    for (int d = 0; ok && d < o->rank; d++) ok = g->shape[d] == o->shape[d] && y->shape[d] == o->shape[d];
    if (!ok)
        return vf_err_set(cpu->err, VF_ERROR_UNSUPPORTED,
                          "cpu backend: the fused softmax gradient wants f32 g, y and output of one shape, "
                          "along the last axis (use the rule's ops otherwise)");
    int64_t n = o->shape[o->rank - 1], total = vf_cpu_numel(o);
    if (total == 0) return VF_OK;
    rg_job j = {.g = vf_cpu_ptr(g), .y = vf_cpu_ptr(y), .dx = vf_cpu_ptr(o), .n = n,
                .log_out = e->op == VF_OP_LOG_SOFTMAX};
    vf_cpu_parallel(cpu->workers, total / n, RG_GRAIN / n > 1 ? RG_GRAIN / n : 1, rg_part, &j);
    return VF_OK;
}
