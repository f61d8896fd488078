/* The window ops on the CPU (slice, pad, concat, slice_grad): one walk of the output
 * over the vf_window description (backend.h) that the GLSL generator reads
 * too. Elements are moved as bytes (1, 2 or 4), so every dtype works and
 * NaN payloads survive; pad's value is stored once with the cast rules.
 * The output is walked row by row (its last dim): the outer coordinates
 * decide each source's row and whether it holds the row at all, and only
 * the last dim is tested per element, or, where its steps are 1 (a plain
 * slice, pad or concat), each source's stretch of a row is one memcpy. */
#include "cpu/cpu.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic int64_t run_calls;

int64_t vf_cpu_window_runs(void) { return atomic_load_explicit(&run_calls, memory_order_relaxed); }

/* Source k's element index along one dim for output coordinate o, or -1
   when the source does not hold it. */
static int64_t src_coord(const vf_window *w, int k, int d, int64_t o)
{
    int64_t t = o * w->mul[d] + w->off[k][d];
    if (!((w->check[k] >> d) & 1u)) return t;
    if (t < 0 || t % w->div[d] != 0 || t / w->div[d] >= w->size[k][d]) return -1;
    return t / w->div[d];
}

/* One output row of `inner` elements when the last dim has unit steps:
   source k holds the columns [lo, hi) of the row (all of them without the
   test), the first source holding a column gives it, else the fill (or,
   without one, the last source); each stretch is one memcpy. */
static void copy_runs(const vf_window *w, const uint8_t *const *src, const int64_t *base, const bool *holds,
                      const uint8_t *fill, size_t es, uint8_t *out, int64_t inner)
{
    int d = w->rank - 1;
    int64_t lo[2] = {0, 0}, hi[2] = {0, 0};
    for (int k = 0; k < w->n_src; k++) {
        if (!holds[k]) continue;
        lo[k] = 0;
        hi[k] = inner;
        if ((w->check[k] >> d) & 1u) {
            int64_t a = -w->off[k][d], b = w->size[k][d] - w->off[k][d];
            lo[k] = a < 0 ? 0 : a > inner ? inner : a;
            hi[k] = b < lo[k] ? lo[k] : b > inner ? inner : b;
        }
    }
    for (int64_t j = 0; j < inner;) {
        int64_t end = inner;
        int pick = -1;
        for (int k = 0; k < w->n_src; k++) {
            bool last = k == w->n_src - 1 && !w->has_fill;
            if (last || (j >= lo[k] && j < hi[k])) {
                pick = k;
                if (!last && hi[k] < end) end = hi[k];
                break;
            }
            if (lo[k] > j && lo[k] < hi[k] && lo[k] < end) end = lo[k]; /* k takes over there */
        }
        if (pick < 0) {
            for (int64_t i = j; i < end; i++) memcpy(out + (size_t)i * es, fill, es);
        } else {
            int64_t s = j + w->off[pick][d];
            memcpy(out + (size_t)j * es, src[pick] + (size_t)(base[pick] + s) * es, (size_t)(end - j) * es);
        }
        j = end;
    }
}

vf_status vf_cpu_window(vf_cpu *cpu, const vf_exec *e)
{
    vf_window w;
    if (!vf_window_of(e, &w))
        return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: %s: shapes do not match its attributes",
                          vf_op_get(e->op)->name);
    size_t es = vf_dtype_size(e->out.dtype);
    for (int k = 0; k < w.n_src; k++)
        if (e->in[k].dtype != e->out.dtype)
            return vf_err_set(cpu->err, VF_ERROR_INVALID_ARGUMENT, "cpu backend: %s: input %d is %s, output %s",
                              vf_op_get(e->op)->name, k, vf_dtype_name(e->in[k].dtype), vf_dtype_name(e->out.dtype));
    uint8_t fill[8] = {0};
    if (w.has_fill) vf_store_f64(fill, e->out.dtype, 0, e->attrs.value);
    int r = w.rank;
    int64_t st[2][VF_MAX_RANK];
    const uint8_t *src[2];
    for (int k = 0; k < w.n_src; k++) {
        vf_cpu_contig_strides(r, w.size[k], st[k]);
        src[k] = vf_cpu_ptr(&e->in[k]);
    }
    uint8_t *out = vf_cpu_ptr(&e->out);
    int64_t inner = r ? w.out[r - 1] : 1, rows = vf_cpu_numel(&e->out) / (inner ? inner : 1);
    int64_t c[VF_MAX_RANK] = {0};   /* outer coordinates of the row */
    /* unit steps along the last dim: each source's part of a row is one
       run (a plain slice, pad or concat) */
    bool runs = r && w.mul[r - 1] == 1 && w.div[r - 1] == 1;
    if (runs) atomic_fetch_add_explicit(&run_calls, 1, memory_order_relaxed);
    for (int64_t row = 0; row < rows; row++) {
        int64_t base[2];
        bool holds[2];
        for (int k = 0; k < w.n_src; k++) {
            base[k] = 0;
            holds[k] = true;
            for (int d = 0; d < r - 1 && holds[k]; d++) {
                int64_t s = src_coord(&w, k, d, c[d]);
                holds[k] = s >= 0;
                base[k] += s * st[k][d];
            }
        }
        if (runs)
            copy_runs(&w, src, base, holds, fill, es, out + (size_t)(row * inner) * es, inner);
        else
            for (int64_t j = 0; j < inner; j++) {
                const uint8_t *from = fill;
                for (int k = 0; k < w.n_src; k++) {
                    bool last = k == w.n_src - 1 && !w.has_fill; /* holds what the others do not */
                    int64_t s = r ? src_coord(&w, k, r - 1, j) : 0;
                    if (last || (holds[k] && s >= 0)) {
                        from = src[k] + (size_t)(base[k] + s) * es;
                        break;
                    }
                }
                memcpy(out + (size_t)(row * inner + j) * es, from, es);
            }
        for (int d = r - 2; d >= 0; d--) {
            if (++c[d] < w.out[d]) break;
            c[d] = 0;
        }
    }
    return VF_OK;
}
