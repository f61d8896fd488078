/* The window ops on the CPU (slice, pad, concat, slice_grad): one walk of the output
 * over the vf_window description (backend.h) that the GLSL generator reads
 * too. Elements are moved as bytes (1, 2 or 4), so every dtype works and
 * NaN payloads survive; pad's value is stored once with the cast rules.
 * The output is walked row by row (its last dim): the outer coordinates
 * decide each source's row and whether it holds the row at all, and only
 * the last dim is tested per element. */
#include "cpu/cpu.h"

#include <string.h>

/* Source k's element index along one dim for output coordinate o, or -1
   when the source does not hold it. */
static int64_t src_coord(const vf_window *w, int k, int d, int64_t o)
{
    int64_t t = o * w->mul[d] + w->off[k][d];
    if (!((w->check[k] >> d) & 1u)) return t;
    if (t < 0 || t % w->div[d] != 0 || t / w->div[d] >= w->size[k][d]) return -1;
    return t / w->div[d];
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
        for (int64_t j = 0; j < inner; j++) {
            const uint8_t *from = fill;
            for (int k = 0; k < w.n_src; k++) {
                bool last = k == w.n_src - 1 && !w.has_fill;   /* holds what the others do not */
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
