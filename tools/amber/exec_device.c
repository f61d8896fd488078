/* The device a test asks for: requirements checked, features enabled.
 *
 * vf_vk_device_create gives the instance (with the validation layer and
 * the messenger that prints and counts VKFUSE-VALIDATION lines), the
 * physical device and the compute queue family. Its VkDevice enables a
 * fixed feature set chosen for vkfuse's kernels, while a test must run
 * with exactly the features it names (so the validation layer flags a
 * shader using one it did not ask for). So we destroy that VkDevice and
 * create our own on the same physical device and queue family, with the
 * device tables from vf_vk_device_table_load, and put it in its place:
 * vf_vk_device_destroy then tears ours down with the rest. */
#include "exec.h"
#include "util/fault.h"
#include "feature_table.h"

#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A features (or properties) query / enable chain: the structs a test
   names, each once, in the order first named. */
#define MAX_STRUCT (AM_MAX_FEATURES + 4)

typedef struct chain {
    VkPhysicalDeviceFeatures2 f2;
    int idx[MAX_STRUCT];         /* struct table index */
    VkBaseOutStructure *st[MAX_STRUCT];
    int n;
} chain;

static void chain_free(chain *c)
{
    if (!c) return;
    for (int i = 0; i < c->n; i++) free(c->st[i]);
    free(c);
}

/* The chained copy of struct i (from tab), added zeroed on first use;
   NULL when out of memory or room. */
static unsigned char *chain_get(chain *c, const am_feat_struct *tab_i, int i)
{
    for (int k = 0; k < c->n; k++)
        if (c->idx[k] == i) return (unsigned char *)c->st[k];
    if (c->n >= MAX_STRUCT) return NULL;
    VkBaseOutStructure *b = vf_calloc(1, tab_i->size);
    if (!b) return NULL;
    b->sType = tab_i->stype;
    c->idx[c->n] = i;
    c->st[c->n++] = b;
    return (unsigned char *)b;
}

/* Links the chain's structs behind *head. */
static void link_chain(chain *c, void **head)
{
    void **next = head;
    *next = NULL;
    for (int k = 0; k < c->n; k++) {
        c->st[k]->pNext = NULL;
        *next = c->st[k];
        next = (void **)&c->st[k]->pNext;
    }
}

static am_status skip(am_result *res, const char *fmt, const char *a, const char *b)
{
    res->status = AM_SKIP;
    res->pos = (am_pos){0, 0};
    snprintf(res->msg, sizeof res->msg, fmt, a, b);
    return AM_SKIP;
}

static bool has_ext(const VkExtensionProperties *e, uint32_t n, const char *name)
{
    for (uint32_t i = 0; i < n; i++)
        if (!strcmp(e[i].extensionName, name)) return true;
    return false;
}

/* Sets feature `name` in want; false when out of memory or room. */
static bool request(chain *want, const char *name)
{
    int st;
    size_t off;
    if (!am_feature_lookup(name, &st, &off)) return true; /* unknown: refused before */
    VkBool32 t = VK_TRUE;
    if (st == AM_FEAT_CORE) {
        memcpy((unsigned char *)&want->f2.features + off, &t, sizeof t);
        return true;
    }
    unsigned char *p = chain_get(want, am_feat_struct_get(st), st);
    if (!p) return false;
    memcpy(p + off, &t, sizeof t);
    return true;
}

static bool granted(chain *have, const char *name)
{
    int st;
    size_t off;
    VkBool32 v = VK_FALSE;
    if (!am_feature_lookup(name, &st, &off)) return false;
    if (st == AM_FEAT_CORE) {
        memcpy(&v, (const unsigned char *)&have->f2.features + off, sizeof v);
    } else {
        for (int k = 0; k < have->n; k++)
            if (have->idx[k] == st) memcpy(&v, (unsigned char *)have->st[k] + off, sizeof v);
    }
    return v == VK_TRUE;
}

/* Is struct fs (core in fs->core, else by fs->ext) available on the
   device? Adds its extension to names when it is needed. */
static bool struct_available(const am_feat_struct *fs, uint32_t api, const VkExtensionProperties *ext, uint32_t n_ext,
                             const char **names, uint32_t *n_names, bool enable)
{
    if (fs->core != UINT32_MAX && api >= fs->core) return true;
    if (!fs->ext || !has_ext(ext, n_ext, fs->ext)) return false;
    if (enable) {
        bool dup = false;
        for (uint32_t k = 0; k < *n_names; k++) dup |= !strcmp(names[k], fs->ext);
        if (!dup) names[(*n_names)++] = fs->ext;
    }
    return true;
}

/* DEVICE_PROPERTY: each named VkBool32 property must be true. */
static am_status check_properties(am_exec *x, const am_script *s, const VkExtensionProperties *ext, uint32_t n_ext,
                                  am_result *res)
{
    if (!s->n_properties) return AM_PASS;
    vf_vk_device *d = &x->dev;
    chain *c = vf_calloc(1, sizeof *c);
    if (!c) return am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
    am_status st = AM_PASS;
    for (int i = 0; i < s->n_properties && st == AM_PASS; i++) {
        int si;
        size_t off;
        if (!am_property_lookup(s->property[i], &si, &off)) continue; /* refused by the parser */
        const am_feat_struct *ps = am_prop_struct_get(si);
        if (!struct_available(ps, d->api_version, ext, n_ext, NULL, NULL, false))
            st = skip(res, "device lacks %s (needs Vulkan 1.2 or %s)", ps->name, ps->ext);
        else if (!chain_get(c, ps, si))
            st = am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
    }
    if (st == AM_PASS) {
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
        link_chain(c, &p2.pNext);
        d->vki.vkGetPhysicalDeviceProperties2(d->phys, &p2);
        for (int i = 0; i < s->n_properties && st == AM_PASS; i++) {
            int si;
            size_t off;
            if (!am_property_lookup(s->property[i], &si, &off)) continue;
            VkBool32 v = VK_FALSE;
            for (int k = 0; k < c->n; k++)
                if (c->idx[k] == si) memcpy(&v, (unsigned char *)c->st[k] + off, sizeof v);
            if (v != VK_TRUE) st = skip(res, "device lacks property %s%s", s->property[i], "");
        }
    }
    chain_free(c);
    return st;
}

static am_status check_instance_exts(am_exec *x, const am_script *s, am_result *res)
{
    vf_vk_device *d = &x->dev;
    for (int i = 0; i < s->n_inst_ext; i++) {
        const char *e = s->inst_ext[i];
        /* Promoted to core in 1.1, which every vkfuse instance is. */
        if (!strcmp(e, "VK_KHR_get_physical_device_properties2") || !strcmp(e, "VK_KHR_external_memory_capabilities") ||
            !strcmp(e, "VK_KHR_device_group_creation") || !strcmp(e, "VK_KHR_external_fence_capabilities") ||
            !strcmp(e, "VK_KHR_external_semaphore_capabilities"))
            continue;
        if (!strcmp(e, "VK_EXT_debug_utils") && d->validation) continue;
        uint32_t n = 0;
        VF_VKG(d, vkEnumerateInstanceExtensionProperties, NULL, &n, NULL);
        VkExtensionProperties *p = vf_calloc(n ? n : 1, sizeof *p);
        if (!p) return am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
        VF_VKG(d, vkEnumerateInstanceExtensionProperties, NULL, &n, p);
        bool have = has_ext(p, n, e);
        free(p);
        if (!have) return skip(res, "instance extension %s not available%s", e, "");
        return skip(res, "instance extension %s: the vkfuse runtime creates the instance without it%s", e, "");
    }
    return AM_PASS;
}

am_status am_exec_device(am_exec *x, const am_script *s, const am_exec_opts *o, am_result *res)
{
    vf_vk_options env = {0};
    vf_vk_options_read(&env, getenv); /* the loader and the test limits, as a context would */
    vf_vk_device_options vo = {.device_index = o->device_index, .device_env = o->device_env,
                               .validation = o->validation, .loader = env.loader, .test_caps = env.test_caps,
                               .test_limits = env.test_limits};
    /* VKFUSE_FAULT / VKFUSE_FAULT_COUNT (src/util/fault.h), as a context reads them */
    if (vf_fault_setup(getenv("VKFUSE_FAULT"), getenv("VKFUSE_FAULT_COUNT"), &x->err) != VF_OK)
        return am_fail_at(res, (am_pos){0, 0}, "%s", x->err.message);
    if (vf_vk_device_create(&x->dev, &vo, &x->err) != VF_OK)
        return am_fail_at(res, (am_pos){0, 0}, "no Vulkan device: %s", x->err.message);
    x->have_dev = true;
    vf_vk_device *d = &x->dev;
    if (s->min_api && d->api_version < s->min_api) {
        char v[32];
        snprintf(v, sizeof v, "%u.%u", s->min_api >> 22, (s->min_api >> 12) & 0x3ff);
        return skip(res, "needs Vulkan %s, the device has less%s", v, "");
    }
    am_status st = check_instance_exts(x, s, res);
    if (st != AM_PASS) return st;

    uint32_t n_ext = 0;
    VF_VKI(d, vkEnumerateDeviceExtensionProperties, d->phys, NULL, &n_ext, NULL);
    VkExtensionProperties *ext = vf_calloc(n_ext ? n_ext : 1, sizeof *ext);
    if (!ext) return am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
    VF_VKI(d, vkEnumerateDeviceExtensionProperties, d->phys, NULL, &n_ext, ext);

    /* A feature of a struct the headers do not have cannot be asked for:
       the device is taken to lack it. */
    for (int i = 0; i < s->n_features; i++) {
        int fst;
        size_t off;
        if (am_feature_find(s->feature[i], &fst, &off) == AM_FEAT_UNKNOWN_STRUCT) {
            free(ext);
            return skip(res, "device lacks feature %s: its struct is not in the Vulkan headers this runner was built "
                             "with, so the device cannot be asked for it%s", s->feature[i], "");
        }
    }
    st = check_properties(x, s, ext, n_ext, res);
    if (st != AM_PASS) {
        free(ext);
        return st;
    }

    chain *want = vf_calloc(1, sizeof *want), *have = vf_calloc(1, sizeof *have);
    const char **names = vf_calloc(MAX_STRUCT + AM_MAX_FEATURES + 2, sizeof *names);
    st = AM_PASS;
    if (!want || !have || !names) {
        st = am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
        goto out;
    }
    bool ok = true;
    for (int i = 0; i < s->n_features; i++) ok &= request(want, s->feature[i]);
    /* SUBGROUP blocks need the subgroup size control features. */
    bool need_sg = s->subgroup_size != 0;
    for (int i = 0; i < s->n_pipelines; i++) {
        const am_pipeline *pl = &s->pipeline[i];
        if (pl->sg_varying || pl->sg_required) ok &= request(want, "SubgroupSizeControl.subgroupSizeControl");
        if (pl->sg_full) ok &= request(want, "SubgroupSizeControl.computeFullSubgroups");
        need_sg |= pl->sg_required != 0;
    }
    if (s->subgroup_size) ok &= request(want, "SubgroupSizeControl.subgroupSizeControl");
    if (!ok) {
        st = am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
        goto out;
    }

    /* Query only structs the device knows (core in its version or by
       extension): chaining an unknown one is invalid usage. */
    uint32_t n_names = 0;
    for (int k = 0; k < want->n; k++) {
        const am_feat_struct *fs = am_feat_struct_get(want->idx[k]);
        if (!struct_available(fs, d->api_version, ext, n_ext, names, &n_names, true)) {
            st = skip(res, "device lacks %s (%s)", fs->name, fs->ext ? fs->ext : "a newer Vulkan");
            goto out;
        }
        if (!chain_get(have, fs, want->idx[k])) {
            st = am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
            goto out;
        }
    }
    have->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    link_chain(have, &have->f2.pNext);
    d->vki.vkGetPhysicalDeviceFeatures2(d->phys, &have->f2);
    for (int i = 0; i < s->n_features; i++)
        if (!granted(have, s->feature[i])) {
            st = skip(res, "device lacks feature %s%s", s->feature[i], "");
            goto out;
        }
    for (int i = 0; i < s->n_pipelines; i++) {
        const am_pipeline *pl = &s->pipeline[i];
        if ((pl->sg_varying || pl->sg_required || s->subgroup_size) &&
            !granted(have, "SubgroupSizeControl.subgroupSizeControl")) {
            st = skip(res, "device lacks SubgroupSizeControl.subgroupSizeControl (SUBGROUP in %s)%s", pl->name, "");
            goto out;
        }
        if (pl->sg_full && !granted(have, "SubgroupSizeControl.computeFullSubgroups")) {
            st = skip(res, "device lacks SubgroupSizeControl.computeFullSubgroups (%s)%s", pl->name, "");
            goto out;
        }
    }
    if (need_sg || s->subgroup_size) {
        x->sg_props.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES;
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &x->sg_props};
        d->vki.vkGetPhysicalDeviceProperties2(d->phys, &p2);
        x->sg_props_valid = true;
        uint32_t want_size = s->subgroup_size;
        if (want_size && (want_size < x->sg_props.minSubgroupSize || want_size > x->sg_props.maxSubgroupSize)) {
            char v[16];
            snprintf(v, sizeof v, "%u", want_size);
            st = skip(res, "device lacks subgroup size %s%s", v, "");
            goto out;
        }
    }
    for (int i = 0; i < s->n_dev_ext; i++) {
        if (!has_ext(ext, n_ext, s->dev_ext[i])) {
            st = skip(res, "device lacks extension %s%s", s->dev_ext[i], "");
            goto out;
        }
        bool dup = false;
        for (uint32_t k = 0; k < n_names; k++) dup |= !strcmp(names[k], s->dev_ext[i]);
        if (!dup) names[n_names++] = s->dev_ext[i];
    }
    if (has_ext(ext, n_ext, "VK_KHR_portability_subset")) names[n_names++] = "VK_KHR_portability_subset";

    /* Our device replaces the runtime's. */
    VF_VKD(d, vkDeviceWaitIdle, d->device);
    d->vkd.vkDestroyDevice(d->device, NULL);
    d->device = VK_NULL_HANDLE;
    d->push_descriptors = false;
    want->f2.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2;
    link_chain(want, &want->f2.pNext);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = d->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &want->f2,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = n_names,
                              .ppEnabledExtensionNames = names};
    VkResult r = VF_VKI(d, vkCreateDevice, d->phys, &dci, NULL, &d->device);
    if (r != VK_SUCCESS) {
        d->device = VK_NULL_HANDLE;
        st = am_fail_at(res, (am_pos){0, 0}, "vkCreateDevice: %s", vf_vk_result_name(r));
        goto out;
    }
    if (vf_vk_device_table_load(&d->vki, d->device, &d->vkd, &x->err) != VF_OK) {
        st = am_fail_at(res, (am_pos){0, 0}, "%s", x->err.message);
        goto out;
    }
    d->vkd.vkGetDeviceQueue(d->device, d->queue_family, 0, &d->queue);
out:
    free(ext);
    chain_free(want);
    chain_free(have);
    free(names);
    return st;
}

/* Takes one more reference on a loaded shared object, never dropped, so
   the loader's dlclose at vkDestroyInstance leaves it mapped. */
static int pin(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    if (info->dlpi_name && info->dlpi_name[0]) (void)dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    return 0;
}

static int thread_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

bool am_exec_preload(const am_exec_opts *o)
{
    int threads = thread_count(); /* OpenBLAS's pool may already be there */
    vf_vk_options env = {0};
    vf_vk_options_read(&env, getenv);
    vf_vk_device *d = vf_calloc(1, sizeof *d);
    if (!d) return false;
    vf_err e = {0};
    bool ok = vf_vk_instance_create(d, o->validation, env.loader, &e) == VF_OK;
    if (ok) {
        uint32_t n = 0;
        d->vki.vkEnumeratePhysicalDevices(d->instance, &n, NULL); /* the drivers make their devices */
        dl_iterate_phdr(pin, NULL);
    }
    vf_vk_device_destroy(d);
    free(d);
    /* No driver thread may be left running into the fork. */
    return ok && thread_count() == threads;
}
