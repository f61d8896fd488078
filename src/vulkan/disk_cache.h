/* Cache files on disk: a validated header, then the payload.
 *
 * Every file starts with a header naming what it is, the format version,
 * the device it was made for (vendorID, deviceID, driverVersion,
 * pipelineCacheUUID), the content key it was stored under, the payload
 * size and a payload checksum. A file whose header does not match in every
 * field is treated as absent (and so rewritten by the caller): a cache
 * never trusts what it reads. Writes go to a temp file renamed into place,
 * so readers see the old file or the new one, never half of one. */
#ifndef VF_VULKAN_DISK_CACHE_H
#define VF_VULKAN_DISK_CACHE_H

#include "vulkan/device.h"

#include <stddef.h>
#include <stdint.h>

#define VF_DISK_MAGIC_SPIRV "VFSPIRV"    /* 7 chars + NUL = 8 bytes */
#define VF_DISK_MAGIC_PIPELINE "VFPCACH"
#define VF_DISK_VERSION 1u

typedef struct vf_disk_header {
    char magic[8];
    uint32_t version;
    uint32_t vendor_id, device_id, driver_version;
    uint8_t uuid[VK_UUID_SIZE];
    uint64_t key;
    uint64_t payload_size;
    uint64_t checksum;
} vf_disk_header;

typedef enum {
    VF_DISK_OK,
    VF_DISK_MISSING,      /* no file */
    VF_DISK_CORRUPT,      /* short, wrong magic/version/size/checksum */
    VF_DISK_STALE,        /* made for another device or driver */
} vf_disk_result;

/* Creates dir and its parents. */
vf_status vf_disk_mkdirs(const char *dir, vf_err *err);

/* Reads <path>; on VF_DISK_OK *payload is malloc'd (caller frees). */
vf_disk_result vf_disk_read(const vf_vk_device *d, const char *path, const char *magic,
                            uint64_t key, void **payload, size_t *size);
/* Writes atomically; false on any I/O failure (the temp file is removed). */
bool vf_disk_write(const vf_vk_device *d, const char *path, const char *magic, uint64_t key,
                   const void *payload, size_t size);

#endif
