/* vkfuse: list devices, run the demo, AmberScript tests, profiles, saved functions (show, run). */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "vkfuse.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"devices", cmd_devices, "list Vulkan devices and mark the one vkfuse picks"},
    {"demo", cmd_demo, "x[1,784] @ w[784,10] + b, softmax: the chosen device against the CPU"},
    {"amber", cmd_amber, "run AmberScript / VkScript compute-shader tests"},
    {"profile", cmd_profile, "profile a built-in workload or a saved function fused vs unfused vs CPU"},
    {"saved", cmd_saved, "saved show FILE: a saved function's signatures, ops, variables, kernels"},
    {"run", cmd_run, "run a saved function on .npy inputs, write .npy outputs (--check: vs the CPU)"},
};

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return true;
    return false;
}

/* Every VKFUSE_* environment variable the library and the CLI read (the
   README's table says the same; tests/env_doc_test.sh checks that both
   name every one the sources read). */
static const char *const env_vars[][2] = {
    {"VKFUSE_BACKEND=cpu|vulkan|auto", "overrides VF_BACKEND_AUTO (the best GPU, else the CPU; vulkan: lavapipe too)"},
    {"VKFUSE_DEVICE=<index or name>", "the Vulkan device (a name that matches none is an error)"},
    {"VKFUSE_VALIDATION=1", "Khronos validation layer; messages become errors"},
    {"VKFUSE_VULKAN_LOADER=<path>", "this Vulkan loader instead of libvulkan.so.1"},
    {"VKFUSE_CACHE_DIR=<dir>", "SPIR-V and pipeline cache (default ~/.cache/vkfuse)"},
    {"VKFUSE_PROFILE=1", "GPU timestamps around every dispatch"},
    {"VKFUSE_FUSION=0", "one kernel per op in traced plans (the unfused baseline)"},
    {"VKFUSE_EAGER=1", "run vf_function bodies eagerly (debugging)"},
    {"VKFUSE_CHECK=1", "check every kernel of a traced plan against the CPU backend"},
    {"VKFUSE_DUMP=<dir>", "write traced graphs after every pass and every kernel's GLSL"},
    {"VKFUSE_LOG=info", "log retraces and shader compiles"},
    {"VKFUSE_EAGER_FUSE=0", "every eager op its own kernel (default: repeated eager chains fused)"},
    {"VKFUSE_TIERED=0", "plans start with their tuned matmul kernels (default on CPU devices: a quick tier)"},
    {"VKFUSE_COMPILE_THREADS=<n>", "threads compiling a traced function's kernels (default: the CPUs)"},
    {"VKFUSE_THREADS=<n>", "CPU backend threads, OpenBLAS's too (default: the CPUs)"},
    {"VKFUSE_MEMORY_CACHE=<size>", "freed device memory kept for reuse, e.g. 512M, 2G; 0: none (default: the heap)"},
    {"VKFUSE_TIMEOUT_MS=<ms>", "fail a GPU batch that runs longer; the device is then lost (default 120000)"},
    {"VKFUSE_DEVICE_MEMORY_LIMIT=<size>", "behave as if the device had this much memory (e.g. 256M)"},
    {"VKFUSE_FAULT=SITE:N[:KIND]", "fault injection: the N-th call at SITE fails (docs/RUNTIME.md)"},
    {"VKFUSE_FAULT_COUNT=1", "print each fault site's call count when a context is destroyed"},
    {"VKFUSE_NO_PLAN=1", "run traced functions node by node, without recorded plans"},
    {"VKFUSE_CPU_DNNL=0", "CPU backend: convolutions and pools without oneDNN (im2col + OpenBLAS, loops)"},
    {"VKFUSE_ROBUST=0", "no robustBufferAccess (default on where the device has it: a user kernel cannot write out of bounds)"},
    {"VKFUSE_TEST_LIMITS=...", "test only: smaller device limits, so that split dispatches run"},
    {"VKFUSE_TEST_CAPS=gpu", "test only: generate the GPU codegen profile on any device"},
    {"VKFUSE_TEST_STAGING=1", "test only: device memory treated as not host-visible (staging copies)"},
    {"VKFUSE_TEST_AMBER_CRASH=<text>", "test only: a `vkfuse amber` worker aborts on a file whose path has <text>"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: vkfuse COMMAND [options]   (vkfuse COMMAND --help for its options)\n"
               "       vkfuse --version\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nenvironment:\n");
    for (size_t i = 0; i < sizeof env_vars / sizeof *env_vars; i++)
        fprintf(f, "  %-32s %s\n", env_vars[i][0], env_vars[i][1]);
    fprintf(f, "\nvkfuse %d.%d.%d\n", VKFUSE_VERSION_MAJOR, VKFUSE_VERSION_MINOR, VKFUSE_VERSION_PATCH);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("vkfuse %d.%d.%d\n", VKFUSE_VERSION_MAJOR, VKFUSE_VERSION_MINOR, VKFUSE_VERSION_PATCH);
        return 0;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "vkfuse: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
