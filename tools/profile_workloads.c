/* The built-in workloads of `vkfuse profile` (profile_workloads.h). */
#include "profile_workloads.h"

#include <stdlib.h>
#include <string.h>

static vf_tensor *scalar(vf_context *ctx, float v) { return vf_tensor_from_host(ctx, VF_F32, 0, NULL, &v); }

/* Normal samples times scale. */
static vf_tensor *normal(vf_context *ctx, int rank, const int64_t *shape, uint64_t seed, float scale)
{
    return vf_mul(ctx, vf_random_normal(ctx, VF_F32, rank, shape, seed), scalar(ctx, scale));
}

static vf_status done(vf_context *ctx, const wl_data *d, int n_in, int n_cap)
{
    for (int i = 0; i < n_in; i++)
        if (!d->in[i]) return vf_status_get(ctx);
    for (int i = 0; i < n_cap; i++)
        if (!d->cap[i]) return vf_status_get(ctx);
    return vf_context_sync(ctx);
}

/* chain8: x*1.5 + 0.5, relu, *0.9, sigmoid, *2, -1, abs over 16M f32.
   The scalars are captures: a vf_fill in the body would be a kernel of
   its own in both runs. */
static vf_status chain8_make(vf_context *ctx, wl_data *d, int64_t shrink)
{
    static const float kv[5] = {1.5f, 0.5f, 0.9f, 2.0f, 1.0f};
    for (int i = 0; i < 5; i++) d->cap[i] = scalar(ctx, kv[i]);
    d->in[0] = vf_random_normal(ctx, VF_F32, 1, (int64_t[]){(16 << 20) / shrink}, 1);
    return done(ctx, d, 1, 5);
}

static vf_status chain8_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    vf_tensor *h = vf_add(ctx, vf_mul(ctx, in[0], k[0]), k[1]);
    h = vf_sigmoid(ctx, vf_mul(ctx, vf_relu(ctx, h), k[2]));
    out[0] = vf_abs(ctx, vf_sub(ctx, vf_mul(ctx, h, k[3]), k[4]));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* softmax over the last axis of [4096, 1024]. */
static vf_status softmax_make(vf_context *ctx, wl_data *d, int64_t shrink)
{
    d->in[0] = normal(ctx, 2, (int64_t[]){4096 / shrink, 1024}, 2, 2.0f);
    return done(ctx, d, 1, 0);
}

static vf_status softmax_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    out[0] = vf_softmax(ctx, in[0], -1);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* layernorm over the last axis of [4096, 1024]: (x - mean) * rsqrt(var + eps) * gamma + beta. */
static vf_status layernorm_make(vf_context *ctx, wl_data *d, int64_t shrink)
{
    d->in[0] = normal(ctx, 2, (int64_t[]){4096 / shrink, 1024}, 3, 1.0f);
    d->cap[0] = vf_add(ctx, normal(ctx, 1, (int64_t[]){1024}, 4, 0.1f), scalar(ctx, 1.0f)); /* gamma */
    d->cap[1] = normal(ctx, 1, (int64_t[]){1024}, 5, 0.1f);                                   /* beta */
    d->cap[2] = scalar(ctx, 1e-5f);
    return done(ctx, d, 1, 3);
}

static vf_status layernorm_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **k = user;
    int ax = -1;
    vf_tensor *d = vf_sub(ctx, in[0], vf_reduce_mean(ctx, in[0], 1, &ax, true));
    vf_tensor *var = vf_reduce_mean(ctx, vf_mul(ctx, d, d), 1, &ax, true);
    out[0] = vf_add(ctx, vf_mul(ctx, vf_mul(ctx, d, vf_rsqrt(ctx, vf_add(ctx, var, k[2]))), k[0]), k[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* mlp: softmax(relu(relu(x W1 + b1) W2 + b2) W3 + b3), 784-512-512-10, batch 256. */
static vf_status mlp_make(vf_context *ctx, wl_data *d, int64_t shrink)
{
    d->in[0] = normal(ctx, 2, (int64_t[]){256 / shrink, 784}, 6, 1.0f);
    d->cap[0] = normal(ctx, 2, (int64_t[]){784, 512}, 7, 0.05f);
    d->cap[1] = normal(ctx, 1, (int64_t[]){512}, 8, 0.1f);
    d->cap[2] = normal(ctx, 2, (int64_t[]){512, 512}, 9, 0.06f);
    d->cap[3] = normal(ctx, 1, (int64_t[]){512}, 10, 0.1f);
    d->cap[4] = normal(ctx, 2, (int64_t[]){512, 10}, 11, 0.06f);
    d->cap[5] = normal(ctx, 1, (int64_t[]){10}, 12, 0.1f);
    return done(ctx, d, 1, 6);
}

static vf_status mlp_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **w = user;
    vf_tensor *h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, in[0], w[0]), w[1]));
    h = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, w[2]), w[3]));
    out[0] = vf_softmax(ctx, vf_add(ctx, vf_matmul(ctx, h, w[4]), w[5]), -1);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* compute_loss (the seed's): mean(sparse_softmax_cross_entropy(labels, x w + b)),
   x [256, 784], 10 classes. */
static vf_status loss_make(vf_context *ctx, wl_data *d, int64_t shrink)
{
    int32_t labels[256];
    int64_t batch = 256 / shrink;
    for (int i = 0; i < batch; i++) labels[i] = (i * 7 + 3) % 10;
    d->in[0] = normal(ctx, 2, (int64_t[]){batch, 784}, 13, 1.0f);
    d->in[1] = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){batch}, labels);
    d->cap[0] = normal(ctx, 2, (int64_t[]){784, 10}, 14, 0.05f);
    d->cap[1] = normal(ctx, 1, (int64_t[]){10}, 15, 0.1f);
    return done(ctx, d, 2, 2);
}

static vf_status loss_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor **m = user;
    vf_tensor *logits = vf_add(ctx, vf_matmul(ctx, in[0], m[0]), m[1]);
    out[0] = vf_reduce_mean(ctx, vf_sparse_softmax_cross_entropy(ctx, in[1], logits), 0, NULL, false);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* histogram: a user kernel (docs/KERNELS.md) counting 1M i32 values into
   256 bins with atomics, then the counts as f32 (a fused cast). The
   kernel is made in the body, so only the trace compiles it; the graph
   keeps it after vf_kernel_destroy. */
static const char hist_glsl[] =
    "layout(local_size_x_id = 0) in;\n"
    "layout(std430, binding = 0) readonly buffer In { int v[]; };\n"
    "layout(std430, binding = 1) buffer Out { uint bins[]; };\n"
    "layout(push_constant) uniform P { uint n_v; uint n_bins; };\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < n_v) atomicAdd(bins[uint(v[i]) % n_bins], 1u);\n"
    "}\n";

#define HIST_N (1 << 20)
#define HIST_BINS 256

static void hist_groups(const vf_kernel_shapes *s, uint32_t wg, uint32_t groups[3], void *user)
{
    (void)user;
    groups[0] = (uint32_t)((s->in[0].shape[0] + wg - 1) / wg);
    groups[1] = groups[2] = 1;
}

static vf_status hist_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const int32_t *v = in[0];
    uint32_t *bins = out[0];
    for (int64_t i = 0; i < s->in[0].shape[0]; i++) bins[(uint32_t)v[i] % HIST_BINS]++;
    return VF_OK;
}

static vf_status hist_make(vf_context *ctx, wl_data *d, int64_t shrink)
{
    int64_t n = HIST_N / shrink;
    int32_t *v = malloc(sizeof *v * (size_t)n);
    if (!v) return VF_ERROR_OUT_OF_MEMORY;
    uint32_t x = 12345;
    for (int64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        v[i] = (int32_t)(x >> 8);
    }
    d->in[0] = vf_tensor_from_host(ctx, VF_I32, 1, &n, v);
    free(v);
    return done(ctx, d, 1, 0);
}

static vf_status hist_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_kernel *k = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "histogram", .glsl = hist_glsl, .n_inputs = 1, .n_outputs = 1, .inputs = {VF_I32},
        .outputs = {{VF_U32, 1, {HIST_BINS}}}, .workgroup_size = 256, .dispatch = hist_groups, .cpu = hist_cpu});
    if (!k) return vf_status_get(ctx);
    vf_tensor *bins = NULL;
    vf_status s = vf_kernel_call(k, 1, in, NULL, &bins);
    vf_kernel_destroy(k);
    if (s) return s;
    out[0] = vf_cast(ctx, bins, VF_F32);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

const workload vf_workloads[] = {
    {"chain8", "8-op elementwise chain (mul add relu mul sigmoid mul sub abs) on 16M f32", 1, chain8_make,
     chain8_body},
    {"softmax", "softmax over the last axis of f32[4096,1024]", 1, softmax_make, softmax_body},
    {"layernorm", "layer norm over the last axis of f32[4096,1024] (mean, var, rsqrt, gamma, beta)", 1,
     layernorm_make, layernorm_body},
    {"mlp", "MLP forward 784-512-512-10, relu, softmax, batch 256", 1, mlp_make, mlp_body},
    {"compute_loss", "the seed's compute_loss: mean sparse softmax cross-entropy of x[256,784] w + b", 2,
     loss_make, loss_body},
    {"histogram", "a user kernel: 1M i32 values into 256 bins with atomics (docs/KERNELS.md), counts as f32", 1,
     hist_make, hist_body},
};
const int vf_n_workloads = (int)(sizeof vf_workloads / sizeof *vf_workloads);

const workload *wl_find(const char *name)
{
    for (int i = 0; i < vf_n_workloads; i++)
        if (!strcmp(vf_workloads[i].name, name)) return &vf_workloads[i];
    return NULL;
}
