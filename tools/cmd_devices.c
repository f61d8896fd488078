/* vkfuse devices: every Vulkan device with its type, which one a Vulkan
 * context uses, and what the default (VF_BACKEND_AUTO) picks and why. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "vkfuse.h"

int cmd_devices(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: vkfuse devices\n\nLists every Vulkan device: name, vendor, type, driver, API version,\n"
               "subgroup size, shared memory, fp16. '*' marks the device a Vulkan context uses\n"
               "(discrete > integrated > virtual > cpu, or VKFUSE_DEVICE=<index or name>), and the\n"
               "last line says what the default (VF_BACKEND_AUTO) picks and why: the best GPU,\n"
               "else the CPU backend (a Vulkan driver on the CPU only with VKFUSE_BACKEND=vulkan).\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "vkfuse devices: unexpected argument '%s' (try --help)\n", argv[1]);
        return 2;
    }
    vf_device_info info[16];
    char err[512] = "";
    int n = vf_devices(info, 16, err, sizeof err);
    char why[1024] = "";
    vf_backend b = vf_auto_backend(NULL, why, sizeof why);
    const char *pick = b == VF_BACKEND_VULKAN ? "Vulkan" : b == VF_BACKEND_CPU ? "the CPU backend (OpenBLAS)" : "none";
    if (n <= 0) {
        printf("no Vulkan devices%s%s\n", err[0] ? ": " : "", err);
        printf("default (VF_BACKEND_AUTO): %s: %s\n", pick, why);
        return 0;
    }
    for (int i = 0; i < n && i < 16; i++) {
        const vf_device_info *d = &info[i];
        printf("%c %d: %s (%s)\n", d->chosen ? '*' : ' ', i, d->name, d->type);
        printf("     vendor %s (0x%04x), device 0x%04x, type %s\n", d->vendor, d->vendor_id, d->device_id, d->type);
        printf("     driver %s (version 0x%x), Vulkan %u.%u.%u\n", d->driver, d->driver_version,
               d->api_version >> 22, (d->api_version >> 12) & 0x3ff, d->api_version & 0xfff);
        printf("     subgroup %u, shared memory %u KiB, max storage buffer %llu MiB, fp16 %s, 16-bit storage %s\n",
               d->subgroup_size, d->shared_memory_bytes / 1024,
               (unsigned long long)(d->max_storage_buffer_range >> 20), d->fp16 ? "yes" : "no",
               d->storage16 ? "yes" : "no");
        if (d->memory_budget_bytes)
            printf("     memory %llu MiB, budget %llu MiB now (VK_EXT_memory_budget)\n",
                   (unsigned long long)(d->memory_heap_bytes >> 20), (unsigned long long)(d->memory_budget_bytes >> 20));
        else
            printf("     memory %llu MiB (no VK_EXT_memory_budget: no budget reported)\n",
                   (unsigned long long)(d->memory_heap_bytes >> 20));
    }
    if (n > 16) printf("(%d more not shown)\n", n - 16);
    printf("default (VF_BACKEND_AUTO): %s: %s\n", pick, why);
    return 0;
}
