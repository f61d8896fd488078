#include "vulkan/disk_cache.h"
#include "util/fault.h"
#include "util/hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define VF_CHECKSUM_SEED 0x5646434845434b53ull /* distinct from the content keys */

vf_status vf_disk_mkdirs(const char *dir, vf_err *err)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return vf_err_set(err, VF_ERROR_IO, "cache dir path too long: %s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0755) != 0 && errno != EEXIST)
            return vf_err_set(err, VF_ERROR_IO, "cannot create cache dir %s: %s", path,
                              strerror(errno));
        *p = c;
        if (c == '\0') break;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return vf_err_set(err, VF_ERROR_IO, "cache dir %s is not a directory", dir);
    return VF_OK;
}

static void fill_header(const vf_vk_device *d, vf_disk_header *h, const char *magic, uint64_t key,
                        const void *payload, size_t size)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, magic, sizeof h->magic);
    h->version = VF_DISK_VERSION;
    h->vendor_id = d->props.vendorID;
    h->device_id = d->props.deviceID;
    h->driver_version = d->props.driverVersion;
    memcpy(h->uuid, d->props.pipelineCacheUUID, VK_UUID_SIZE);
    h->key = key;
    h->payload_size = size;
    h->checksum = vf_hash64(payload, size, VF_CHECKSUM_SEED);
}

vf_disk_result vf_disk_read(const vf_vk_device *d, const char *path, const char *magic,
                            uint64_t key, void **payload, size_t *size)
{
    *payload = NULL;
    *size = 0;
    /* an injected read error (fault.h) reads as a damaged file */
    if (vf_fault_armed() && vf_fault_hit(VF_FAULT_cache_read)) return VF_DISK_CORRUPT;
    FILE *f = fopen(path, "rb");
    if (!f) return VF_DISK_MISSING;
    vf_disk_header h;
    vf_disk_result res = VF_DISK_CORRUPT;
    void *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < (long)sizeof h || fseek(f, 0, SEEK_SET) != 0 || fread(&h, sizeof h, 1, f) != 1)
        goto out;
    if (memcmp(h.magic, magic, sizeof h.magic) != 0 || h.version != VF_DISK_VERSION ||
        h.key != key || h.payload_size != (uint64_t)len - sizeof h)
        goto out;
    if (h.vendor_id != d->props.vendorID || h.device_id != d->props.deviceID ||
        h.driver_version != d->props.driverVersion ||
        memcmp(h.uuid, d->props.pipelineCacheUUID, VK_UUID_SIZE) != 0) {
        res = VF_DISK_STALE;
        goto out;
    }
    buf = vf_malloc(h.payload_size ? h.payload_size : 1);
    if (!buf || (h.payload_size && fread(buf, h.payload_size, 1, f) != 1)) goto out;
    if (vf_hash64(buf, h.payload_size, VF_CHECKSUM_SEED) != h.checksum) goto out;
    *payload = buf;
    *size = h.payload_size;
    buf = NULL;
    res = VF_DISK_OK;
out:
    free(buf);
    fclose(f);
    return res;
}

bool vf_disk_write(const vf_vk_device *d, const char *path, const char *magic, uint64_t key,
                   const void *payload, size_t size)
{
    char tmp[4200];
    if (vf_fault_armed() && vf_fault_hit(VF_FAULT_cache_write)) return false; /* injected (fault.h) */
    if (snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path) >= (int)sizeof tmp) return false;
    int fd = mkstemp(tmp);
    if (fd < 0) return false;
    vf_disk_header h;
    fill_header(d, &h, magic, key, payload, size);
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return false;
    }
    bool ok = fwrite(&h, sizeof h, 1, f) == 1 && (size == 0 || fwrite(payload, size, 1, f) == 1);
    ok = (fclose(f) == 0) && ok;
    /* mkstemp makes the file 0600; cache files are not secret. */
    if (ok) chmod(tmp, 0644);
    if (ok) ok = rename(tmp, path) == 0;
    if (!ok) unlink(tmp);
    return ok;
}
