/* An inclusive prefix scan (y[i] = x[0] + ... + x[i]) of f32 as user
 * kernels (docs/KERNELS.md): shared memory and subgroup operations, any
 * length, eagerly and inside a traced function.
 *
 * The scheme: `block_scan` scans each block of B = workgroup-size elements
 * (one workgroup per block) and writes each block's total to a second
 * output; the block totals are scanned the same way (recursively, until
 * one block is left); `add_offsets` adds to every element of block b the
 * scanned total of blocks 0 .. b-1. Blocks are numbered over a 2-D grid
 * of workgroups, so more blocks than the device's maxComputeWorkGroupCount
 * along x still run.
 *
 * Two shaders for block_scan, chosen at run time: with subgroup
 * arithmetic (vf_device_info.subgroup_arithmetic) each subgroup scans its
 * values with subgroupInclusiveAdd and the subgroups' totals go through
 * shared memory; without it a Hillis-Steele scan in shared memory does all
 * of it. The example checks both where the device has subgroup arithmetic.
 * Each kernel has a C implementation for the CPU backend
 * (VKFUSE_BACKEND=cpu). Results are compared exactly with vf_cumsum and a
 * double-precision host scan: the values are multiples of 1/8 whose sums
 * stay below 2^21, so every partial sum is exact in f32 whatever the order
 * of the additions. Exits non-zero on any difference. */
#include <vkfuse.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c, ...)                                                              \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "prefix_scan: " __VA_ARGS__);                          \
            fprintf(stderr, " (%s)\n", ctx ? vf_error_message(ctx) : "");          \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

/* Blocks are workgroups (x, y) numbered y * gl_NumWorkGroups.x + x; a
   workgroup past the last block returns (whole workgroups only, so the
   barriers stay in uniform control flow). */
#define BLOCK_ID "uint block = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;\n"

static const char scan_subgroup_glsl[] =
    "#version 450\n"
    "#extension GL_KHR_shader_subgroup_arithmetic : require\n"
    "layout(local_size_x_id = 0) in;\n"
    "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
    "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"       /* output 0: the block scans */
    "layout(std430, binding = 2) writeonly buffer S { float sums[]; };\n"    /* output 1: the block totals */
    "layout(push_constant) uniform P { uint n_x; uint n_y; uint n_sums; };\n"
    "shared float part[gl_WorkGroupSize.x];\n"                               /* per subgroup: its total */
    "void main() {\n"
    "    " BLOCK_ID
    "    if (block >= n_sums) return;\n"
    "    uint i = block * gl_WorkGroupSize.x + gl_LocalInvocationID.x;\n"
    "    float v = subgroupInclusiveAdd(i < n_x ? x[i] : 0.0);\n"
    /* the subgroup's last invocation holds its total (a last subgroup may be partial) */
    "    if (gl_SubgroupInvocationID == subgroupMax(gl_SubgroupInvocationID)) part[gl_SubgroupID] = v;\n"
    "    barrier();\n"
    "    for (uint k = 0u; k < gl_SubgroupID; k++) v += part[k];\n"
    "    if (i < n_x) y[i] = v;\n"
    "    if (gl_LocalInvocationID.x == gl_WorkGroupSize.x - 1u) sums[block] = v;\n"
    "}\n";

static const char scan_shared_glsl[] =
    "#version 450\n"
    "layout(local_size_x_id = 0) in;\n"
    "layout(std430, binding = 0) readonly buffer X { float x[]; };\n"
    "layout(std430, binding = 1) writeonly buffer Y { float y[]; };\n"
    "layout(std430, binding = 2) writeonly buffer S { float sums[]; };\n"
    "layout(push_constant) uniform P { uint n_x; uint n_y; uint n_sums; };\n"
    "shared float s[gl_WorkGroupSize.x];\n"
    "void main() {\n"
    "    " BLOCK_ID
    "    if (block >= n_sums) return;\n"
    "    uint l = gl_LocalInvocationID.x, i = block * gl_WorkGroupSize.x + l;\n"
    "    s[l] = i < n_x ? x[i] : 0.0;\n"
    "    for (uint off = 1u; off < gl_WorkGroupSize.x; off <<= 1) {\n"   /* Hillis-Steele */
    "        barrier();\n"
    "        float t = l >= off ? s[l - off] : 0.0;\n"
    "        barrier();\n"
    "        s[l] += t;\n"
    "    }\n"
    "    float v = s[l];\n"
    "    if (i < n_x) y[i] = v;\n"
    "    if (l == gl_WorkGroupSize.x - 1u) sums[block] = v;\n"
    "}\n";

static const char add_glsl[] =
    "#version 450\n"
    "layout(local_size_x_id = 0) in;\n"
    "layout(std430, binding = 0) readonly buffer Y { float y[]; };\n"
    "layout(std430, binding = 1) readonly buffer O { float offs[]; };\n"     /* scanned block totals */
    "layout(std430, binding = 2) writeonly buffer Z { float z[]; };\n"
    "layout(push_constant) uniform P { uint n_y; uint n_offs; uint n_z; };\n"
    "void main() {\n"
    "    " BLOCK_ID
    "    uint i = block * gl_WorkGroupSize.x + gl_LocalInvocationID.x;\n"
    "    if (i < n_z) z[i] = y[i] + (block > 0u ? offs[block - 1u] : 0.0);\n"
    "}\n";

typedef struct scanner {
    uint32_t wg;          /* elements per block: the workgroup size */
    vf_kernel *block, *add;
} scanner;

static int64_t blocks_of(int64_t n, uint32_t wg) { return (n + wg - 1) / wg; }

/* block_scan: output 0 like the input, output 1 one total per block */
static vf_status scan_shapes(vf_kernel_shapes *s, void *user)
{
    const scanner *sc = user;
    if (s->in[0].rank != 1) return VF_ERROR_SHAPE;
    s->out[0] = s->in[0];
    s->out[1].rank = 1;
    s->out[1].shape[0] = blocks_of(s->in[0].shape[0], sc->wg);
    return VF_OK;
}

static vf_status add_shapes(vf_kernel_shapes *s, void *user)
{
    (void)user;
    s->out[0].rank = 1;
    s->out[0].shape[0] = s->in[0].shape[0];
    return VF_OK;
}

/* One workgroup per block of input 0, on a 2-D grid when there are more
   blocks than one dimension allows (65535 is the least a device allows). */
static void block_groups(const vf_kernel_shapes *s, uint32_t wg, uint32_t g[3], void *user)
{
    (void)user;
    int64_t nb = blocks_of(s->in[0].shape[0], wg);
    g[0] = (uint32_t)(nb < 65535 ? nb : 65535);
    g[1] = (uint32_t)((nb + g[0] - 1) / g[0]);
    g[2] = 1;
}

static vf_status scan_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    const scanner *sc = user;
    const float *x = in[0];
    float *y = out[0], *sums = out[1];
    int64_t n = s->in[0].shape[0];
    for (int64_t b = 0; b * sc->wg < n; b++) {
        float acc = 0;
        for (int64_t i = b * sc->wg; i < n && i < (b + 1) * sc->wg; i++) y[i] = acc += x[i];
        sums[b] = acc;
    }
    return VF_OK;
}

static vf_status add_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    const scanner *sc = user;
    const float *y = in[0], *offs = in[1];
    float *z = out[0];
    for (int64_t i = 0; i < s->in[0].shape[0]; i++) {
        int64_t b = i / sc->wg;
        z[i] = y[i] + (b > 0 ? offs[b - 1] : 0.0f);
    }
    return VF_OK;
}

static bool make_scanner(vf_context *ctx, scanner *sc, uint32_t wg, bool subgroups)
{
    sc->wg = wg;
    sc->block = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = subgroups ? "block_scan_subgroup" : "block_scan_shared",
        .glsl = subgroups ? scan_subgroup_glsl : scan_shared_glsl, .n_inputs = 1, .n_outputs = 2,
        .inputs = {VF_F32}, .outputs = {{.dtype = VF_F32}, {.dtype = VF_F32}}, .output_shapes = scan_shapes,
        .workgroup_size = wg, .dispatch = block_groups, .cpu = scan_cpu, .user = sc,
        .uninitialized_outputs = true});
    sc->add = vf_kernel_create(ctx, &(vf_kernel_desc){
        .name = "add_offsets", .glsl = add_glsl, .n_inputs = 2, .n_outputs = 1, .inputs = {VF_F32, VF_F32},
        .outputs = {{.dtype = VF_F32}}, .output_shapes = add_shapes, .workgroup_size = wg, .dispatch = block_groups,
        .cpu = add_cpu, .user = sc, .uninitialized_outputs = true});
    return sc->block && sc->add;
}

static void free_scanner(scanner *sc)
{
    vf_kernel_destroy(sc->block);
    vf_kernel_destroy(sc->add);
}

/* The inclusive scan of the 1-D f32 tensor x; NULL on error (in ctx). */
static vf_tensor *scan(vf_context *ctx, const scanner *sc, vf_tensor *x)
{
    vf_tensor *part[2] = {NULL, NULL};
    if (vf_kernel_call(sc->block, 1, &x, NULL, part) != VF_OK) return NULL;
    if (vf_tensor_numel(x) <= sc->wg) return part[0]; /* one block: its scan is the answer */
    vf_tensor *in[2] = {part[0], scan(ctx, sc, part[1])}, *z = NULL;
    if (!in[1] || vf_kernel_call(sc->add, 2, in, NULL, &z) != VF_OK) return NULL;
    return z;
}

static vf_status scan_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    out[0] = scan(ctx, user, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* Whether the device vkfuse picks has subgroup arithmetic. */
static bool have_subgroup_arithmetic(void)
{
    vf_device_info d[16];
    char err[256];
    int n = vf_devices(d, 16, err, sizeof err);
    for (int i = 0; i < n && i < 16; i++)
        if (d[i].chosen) return d[i].subgroup_arithmetic;
    return false;
}

/* Scans n values eagerly and, when traced, through a vf_function; both
   must equal vf_cumsum and the host scan exactly. Returns the first index
   that differs, or -1. A function per size: the body's recursion (how
   many levels of block totals) follows the size, so one trace cannot
   serve every size. planned: whether its call ran one recorded plan. */
static int64_t check_size(vf_context *ctx, scanner *sc, int64_t n, bool traced, bool *planned)
{
    float *x = malloc(sizeof *x * (size_t)n), *got = malloc(sizeof *got * (size_t)n);
    float *cum = malloc(sizeof *cum * (size_t)n), *fgot = malloc(sizeof *fgot * (size_t)n);
    CHECK(x && got && cum && fgot, "out of memory");
    for (int64_t i = 0; i < n; i++) x[i] = (float)((int)((i * 7919) % 17) - 8) / 8.0f;
    vf_scope_begin(ctx);
    vf_tensor *tx = vf_tensor_from_host(ctx, VF_F32, 1, &n, x);
    vf_tensor *y = scan(ctx, sc, tx), *c = vf_cumsum(ctx, tx, 0, false, false), *fy = NULL;
    CHECK(y && c, "eager scan of %lld values", (long long)n);
    CHECK(vf_tensor_read(y, got, sizeof *got * (size_t)n) == VF_OK, "read");
    CHECK(vf_tensor_read(c, cum, sizeof *cum * (size_t)n) == VF_OK, "read");
    if (traced) {
        vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "scan", .body = scan_body,
                                                                       .user = sc, .n_inputs = 1, .n_outputs = 1});
        vf_function_stats st;
        CHECK(fn && vf_function_call(fn, &tx, &fy) == VF_OK, "traced scan of %lld values", (long long)n);
        CHECK(vf_tensor_read(fy, fgot, sizeof *fgot * (size_t)n) == VF_OK, "read");
        CHECK(vf_function_stats_get(fn, &st) == VF_OK, "stats");
        *planned = st.planned;
        vf_function_destroy(fn);
    }
    vf_scope_end(ctx);
    double acc = 0;
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        acc += x[i];
        if (got[i] != acc || cum[i] != acc || (traced && fgot[i] != acc)) bad = i;
    }
    if (bad >= 0)
        fprintf(stderr, "prefix_scan: %lld values: element %lld: eager %g, traced %g, vf_cumsum %g, host %g\n",
                (long long)n, (long long)bad, got[bad], traced ? fgot[bad] : NAN, cum[bad], acc);
    free(x), free(got), free(cum), free(fgot);
    return bad;
}

int main(void)
{
    vf_context *ctx = NULL;
    CHECK(vf_context_create(&(vf_context_desc){0}, &ctx) == VF_OK, "no context");
    bool sg = vf_backend_get(ctx) == VF_BACKEND_VULKAN && have_subgroup_arithmetic();
    printf("prefix_scan on %s (subgroup arithmetic: %s)\n", vf_device_name(ctx), sg ? "yes" : "no");
    static const int64_t sizes[] = {1, 63, 64, 65, 4096, 1000000};
    /* the shader the device can run first; the shared-memory one too where both can */
    for (int variant = sg ? 0 : 1; variant < 2; variant++) {
        scanner sc;
        CHECK(make_scanner(ctx, &sc, 64, variant == 0), "vf_kernel_create");
        bool planned = false;
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
            CHECK(check_size(ctx, &sc, sizes[k], true, &planned) < 0, "%s: %lld values",
                  variant ? "shared" : "subgroup", (long long)sizes[k]);
        printf("%s: sizes 1 .. 1e6 equal vf_cumsum and the host scan, eager and traced (1e6 traced: %s)\n",
               variant ? "shared memory" : "subgroups", planned ? "one recorded plan" : "node by node");
        free_scanner(&sc);
    }
    /* More blocks than one grid dimension holds: 8-element blocks, 65536 of them. */
    scanner small;
    CHECK(make_scanner(ctx, &small, 8, sg), "vf_kernel_create");
    int64_t n = 8 * 65535 + 1;
    CHECK(check_size(ctx, &small, n, false, NULL) < 0, "%lld values in 8-element blocks", (long long)n);
    printf("%lld values in %lld blocks of 8 (a 2-D grid): ok\n", (long long)n, (long long)blocks_of(n, 8));
    free_scanner(&small);
    vf_status st = vf_status_get(ctx);
    vf_context_destroy(ctx);
    return st == VF_OK ? 0 : 1;
}
