/* vkfuse: list devices, run the demo, AmberScript tests, profiles (more commands as they land). */
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
    {"profile", cmd_profile, "profile a built-in workload fused vs unfused vs CPU (--list, --json, --trace)"},
};

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return true;
    return false;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: vkfuse COMMAND [options]   (vkfuse COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nenvironment: VKFUSE_BACKEND=cpu|vulkan, VKFUSE_DEVICE=<index or name>, VKFUSE_VALIDATION=1,\n"
               "             VKFUSE_CACHE_DIR=<dir>, VKFUSE_PROFILE=1, VKFUSE_FUSION=0\nvkfuse %d.%d.%d\n",
            VKFUSE_VERSION_MAJOR, VKFUSE_VERSION_MINOR, VKFUSE_VERSION_PATCH);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
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
