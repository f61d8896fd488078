/* What this machine allows: a hand-written streaming add (docs/ARCHITECTURE.md's
 * recipe: 4 vec4 per invocation, workgroup-strided, local size 256) run
 * through our runtime, next to the generated eager vf_add and a host
 * memcpy, in one run. The ratio generated / hand-written is what codegen
 * controls; the absolute figures are the machine's.
 * Usage: bench_ceiling [--iters N]   (not a test: nothing asserted) */
#include "common.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vulkan/runtime.h"

static const char *ADD =
    "#version 450\n"
    "layout(local_size_x = 256) in;\n"
    "layout(push_constant) uniform P { uint n4; } p;\n"
    "layout(std430, binding = 0) readonly buffer A { vec4 a[]; };\n"
    "layout(std430, binding = 1) readonly buffer B { vec4 b[]; };\n"
    "layout(std430, binding = 2) writeonly buffer C { vec4 c[]; };\n"
    "void main() {\n"
    "    uint base = gl_WorkGroupID.x * 1024u + gl_LocalInvocationID.x;\n"
    "    for (uint j = 0u; j < 4u; j++) {\n"
    "        uint i = base + j * 256u;\n"
    "        if (i < p.n4) c[i] = a[i] + b[i];\n"
    "    }\n"
    "}\n";

#define N (16u << 20)

static int fail(vf_err *e)
{
    fprintf(stderr, "bench_ceiling: %s\n", e->message);
    return 1;
}

int main(int argc, char **argv)
{
    int iters = 10;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
        else {
            printf("usage: bench_ceiling [--iters N]\n");
            return strcmp(argv[i], "--help") ? 2 : 0;
        }
    }
    const double bytes = 3.0 * 4 * N;
    /* host memcpy of the same traffic (read 2, write 1 ~ copy 1.5x) */
    float *h0 = calloc(N, 4), *h1 = calloc(N, 4);
    if (!h0 || !h1) return 1;
    double best_cp = INFINITY;
    for (int i = 0; i <= iters; i++) {
        double t0 = vb_now();
        memcpy(h1, h0, (size_t)N * 4);
        double t = vb_now() - t0;
        if (i && t < best_cp) best_cp = t;
    }
    free(h0);
    free(h1);

    vf_err err = {0};
    vf_vk_options opt = {.device_index = -1};
    vf_backend_t be;
    char name[256];
    if (vf_vk_backend_create_ex(&err, &opt, NULL, &be, name, sizeof name) != VF_OK) return fail(&err);
    vf_vk_runtime *rt = vf_vk_runtime_of(&be);
    const vf_vk_pipeline *pipe;
    vf_buffer *a, *b, *c;
    if (vf_vk_runtime_glsl_pipeline(rt, ADD, "hand_add", 3, 4, &pipe) != VF_OK ||
        be.iface->alloc(be.self, (size_t)N * 4, &a) || be.iface->alloc(be.self, (size_t)N * 4, &b) ||
        be.iface->alloc(be.self, (size_t)N * 4, &c))
        return fail(&err);
    vf_vk_bind binds[3] = {{.buf = a, .access = VF_VK_READ}, {.buf = b, .access = VF_VK_READ},
                           {.buf = c, .access = VF_VK_WRITE}};
    uint32_t n4 = N / 4;
    double best_hand = INFINITY;
    for (int i = 0; i <= iters; i++) {
        double t0 = vb_now();
        vf_vk_dispatch_info d = {.pipe = pipe, .n_bindings = 3, .bindings = binds, .push = &n4, .push_size = 4,
                                 .groups = {(n4 + 1023) / 1024, 1, 1}};
        if (vf_vk_sched_dispatch(&rt->sched, &d) != VF_OK || vf_vk_sched_sync(&rt->sched) != VF_OK) return fail(&err);
        double t = vb_now() - t0;
        if (i && t < best_hand) best_hand = t;
    }
    /* the generated kernel for the same op, through the eager backend path */
    vf_exec e = {.op = VF_OP_ADD, .n_in = 2};
    e.in[0] = (vf_tref){.buf = a, .dtype = VF_F32, .rank = 1, .shape = {N}};
    e.in[1] = e.in[0];
    e.in[1].buf = b;
    e.out = e.in[0];
    e.out.buf = c;
    double best_gen = INFINITY;
    for (int i = 0; i <= iters; i++) {
        double t0 = vb_now();
        if (be.iface->exec(be.self, &e) != VF_OK || be.iface->sync(be.self) != VF_OK) return fail(&err);
        double t = vb_now() - t0;
        if (i && t < best_gen) best_gen = t;
    }
    printf("device: %s; best of %d, synced per call; c = a + b over 16M f32 (192 MiB moved)\n", name, iters);
    printf("host memcpy 64 MiB          %8.2f GB/s (copy bandwidth)\n", 2.0 * 4 * N / best_cp * 1e-9);
    printf("hand-written vec4 add       %8.2f GB/s\n", bytes / best_hand * 1e-9);
    printf("generated add (eager exec)  %8.2f GB/s   generated / hand-written %.2fx\n", bytes / best_gen * 1e-9,
           best_hand / best_gen);
    be.iface->free(be.self, a);
    be.iface->free(be.self, b);
    be.iface->free(be.self, c);
    be.iface->destroy(be.self);
    return 0;
}
