/* The saved-function tests' train step and file byte helpers
 * (saved_common.h). */
#include "saved_common.h"
#include "saved/saved.h"

static vf_status loud(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    /* a print keeps the cond a COND node (only the taken branch may print) */
    vf_status s = vf_print(ctx, "test_saved: positive branch, mean", vf_reduce_mean(ctx, in[0], 0, NULL, false));
    out[0] = vf_relu(ctx, in[0]);
    return s != VF_OK ? s : out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status quiet(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_neg(ctx, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status loop_cond(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_less(ctx, in[1], vf_fill(ctx, VF_F32, 0, NULL, 3.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}
static vf_status loop_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_mul(ctx, in[0], vf_fill(ctx, VF_F32, 0, NULL, 1.5));
    out[1] = vf_add(ctx, in[1], vf_fill(ctx, VF_F32, 0, NULL, 1.0));
    return out[0] && out[1] ? VF_OK : vf_status_get(ctx);
}

vf_status vt_train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vt_step_model *m = user;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, in[0], m->w), m->b);
    vf_tensor *loss = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    vf_tensor *g = NULL;
    vf_status s = vf_tape_gradient(tp, loss, 1, &m->w, &g);
    vf_tape_end(tp);
    if (s != VF_OK) return s;
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, logits, 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, -100.0));
    if ((s = vf_cond(ctx, pred, loud, quiet, 1, &logits, 1, &out[1], NULL)) != VF_OK) return s;
    vf_tensor *vars[2] = {vf_reduce_sum(ctx, logits, 0, NULL, false), vf_fill(ctx, VF_F32, 0, NULL, 0.0)};
    if ((s = vf_while_loop(ctx, loop_cond, loop_body, 2, vars, 0, NULL)) != VF_OK) return s;
    if ((s = vf_assign_sub(m->w, vf_mul(ctx, m->lr, g))) != VF_OK) return s;
    out[0] = loss;
    out[2] = vars[0];
    return VF_OK;
}

const vf_tensor_spec vt_step_sig[2] = {{VF_F32, 2, {-1, VT_FEAT}}, {VF_I32, 1, {-1}}};

void vt_step_inputs(vf_context *ctx, int64_t nb, uint64_t seed, vf_tensor **in)
{
    float x[64];
    int32_t y[16];
    vt_fill_uniform(x, (size_t)(nb * VT_FEAT), -1, 1, seed);
    vt_fill_int(y, (size_t)nb, 0, VT_CLS - 1, seed + 1);
    in[0] = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){nb, VT_FEAT}, x);
    in[1] = vf_tensor_from_host(ctx, VF_I32, 1, &nb, y);
}

uint32_t vt_rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
uint64_t vt_rd64(const uint8_t *p) { uint64_t v = 0; for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i); return v; }
void vt_wr64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }
void vt_wr32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }

void vt_saved_fix_up(uint8_t *b, size_t n)
{
    vt_wr64(b + 24, n);
    vt_wr64(b + n - 8, vf_fnv1a64(VF_FNV_INIT, b, n - 8));
}

size_t vt_saved_kernel_section(const uint8_t *b, uint32_t *count)
{
    uint32_t nsec = (uint32_t)b[16] | (uint32_t)b[17] << 8;
    const uint8_t *e = b + VF_SAVED_HEADER + (size_t)(nsec - 1) * VF_SAVED_ENTRY;
    assert_int_equal(b[8], 2);
    assert_int_equal(e[0], VF_SEC_KERNELS);
    size_t off = 0;
    for (int i = 0; i < 8; i++) off |= (size_t)e[8 + i] << (8 * i);
    *count = (uint32_t)b[off] | (uint32_t)b[off + 1] << 8 | (uint32_t)b[off + 2] << 16 | (uint32_t)b[off + 3] << 24;
    return off;
}
