/* Fault injection: the spec, the per-site counters (fault.h). */
#include "util/fault.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define VF_FAULT_MAX_RULES 32

typedef struct fault_rule {
    vf_fault_site site;
    int64_t n;          /* the call (1-based) that fails */
    bool and_later;     /* "N+": and every later one */
    vf_fault_kind kind;
} fault_rule;

atomic_bool vf_fault_armed_;

/* Written only while no call is counted (setup before the first context's
   backend, the test hook between runs); read by vf_fault_hit. */
static fault_rule rules[VF_FAULT_MAX_RULES];
static int n_rules;
static bool counting;
static _Atomic int64_t counts[VF_FAULT_N_SITES];

#define VF_FAULT_NAME(name) #name,
static const char *const site_names[VF_FAULT_N_SITES] = {
    VF_FAULT_VK_SITES(VF_FAULT_NAME) "shaderc", "cache_read", "cache_write", "malloc",
};
#undef VF_FAULT_NAME

static const char *const kind_names[] = {
    "none", "oom_device", "oom_host", "device_lost", "init_failed", "fail", "timeout",
};

const char *vf_fault_site_name(vf_fault_site s)
{
    return (unsigned)s < VF_FAULT_N_SITES ? site_names[s] : "?";
}

const char *vf_fault_kind_name(vf_fault_kind k)
{
    return (unsigned)k < sizeof kind_names / sizeof *kind_names ? kind_names[k] : "?";
}

int64_t vf_fault_count(vf_fault_site s)
{
    return (unsigned)s < VF_FAULT_N_SITES ? atomic_load(&counts[s]) : 0;
}

/* The failure a site has when no KIND is given: what its real failure
   would most likely be. */
static vf_fault_kind natural_kind(vf_fault_site s)
{
    switch (s) {
    case VF_FAULT_vkCreateInstance:
    case VF_FAULT_vkCreateDevice: return VF_FAULT_INIT_FAILED;
    case VF_FAULT_vkAllocateMemory: return VF_FAULT_OOM_DEVICE;
    case VF_FAULT_vkQueueSubmit:
    case VF_FAULT_vkWaitForFences:
    case VF_FAULT_vkGetFenceStatus:
    case VF_FAULT_vkDeviceWaitIdle:
    case VF_FAULT_vkGetQueryPoolResults: return VF_FAULT_DEVICE_LOST;
    case VF_FAULT_vkMapMemory:
    case VF_FAULT_shaderc:
    case VF_FAULT_cache_read:
    case VF_FAULT_cache_write: return VF_FAULT_FAIL;
    default: return VF_FAULT_OOM_HOST; /* the other Vulkan functions, malloc */
    }
}

/* Whether KIND means anything at SITE (a compile cannot lose the device). */
static bool kind_fits(vf_fault_site s, vf_fault_kind k)
{
    if (s < VF_FAULT_shaderc) return k != VF_FAULT_TIMEOUT || s == VF_FAULT_vkWaitForFences;
    if (s == VF_FAULT_shaderc) return k == VF_FAULT_FAIL || k == VF_FAULT_OOM_HOST;
    if (s == VF_FAULT_malloc) return k == VF_FAULT_OOM_HOST || k == VF_FAULT_FAIL;
    return k == VF_FAULT_FAIL;
}

static vf_status bad(vf_err *err, const char *spec, const char *what, size_t len, const char *why)
{
    return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                      "VKFUSE_FAULT=%s: '%.*s' %s; the form is SITE:N[:KIND] or SITE:N+[:KIND], several"
                      " separated by commas, with SITE a Vulkan function (vkAllocateMemory, vkQueueSubmit, ...),"
                      " shaderc, cache_read, cache_write or malloc, N >= 1, and KIND oom_device, oom_host,"
                      " device_lost, init_failed, fail or timeout (docs/RUNTIME.md, \"Faults\")",
                      spec, (int)len, what, why);
}

/* One "SITE:N[+][:KIND]" of len chars at p. */
static vf_status parse_rule(const char *spec, const char *p, size_t len, fault_rule *r, vf_err *err)
{
    const char *c1 = memchr(p, ':', len);
    if (!c1) return bad(err, spec, p, len, "has no ':N'");
    size_t site_len = (size_t)(c1 - p);
    int site = -1;
    for (int i = 0; i < VF_FAULT_N_SITES; i++)
        if (strlen(site_names[i]) == site_len && strncmp(site_names[i], p, site_len) == 0) site = i;
    if (site < 0) return bad(err, spec, p, len, "names no fault site");
    const char *num = c1 + 1, *end = p + len;
    const char *c2 = memchr(num, ':', (size_t)(end - num));
    const char *num_end = c2 ? c2 : end;
    int64_t n = 0;
    const char *q = num;
    for (; q < num_end && *q >= '0' && *q <= '9'; q++) {
        if (n > INT64_MAX / 10 - 10) return bad(err, spec, p, len, "has a call number too large");
        n = n * 10 + (*q - '0');
    }
    if (q == num || n < 1) return bad(err, spec, p, len, "needs a call number N >= 1 after the ':'");
    r->and_later = q < num_end && *q == '+';
    if (r->and_later) q++;
    if (q != num_end) return bad(err, spec, p, len, "has junk after the call number");
    r->site = (vf_fault_site)site;
    r->n = n;
    r->kind = natural_kind(r->site);
    if (c2) {
        size_t klen = (size_t)(end - c2 - 1);
        int kind = -1;
        for (int k = 1; k < (int)(sizeof kind_names / sizeof *kind_names); k++)
            if (strlen(kind_names[k]) == klen && strncmp(kind_names[k], c2 + 1, klen) == 0) kind = k;
        if (kind < 0) return bad(err, spec, p, len, "names no fault kind");
        r->kind = (vf_fault_kind)kind;
        if (!kind_fits(r->site, r->kind)) return bad(err, spec, p, len, "asks for a kind of failure that site cannot have");
    }
    return VF_OK;
}

static vf_status parse(const char *spec, fault_rule *out, int *n_out, vf_err *err)
{
    *n_out = 0;
    if (!spec || !*spec) return VF_OK;
    const char *p = spec;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len == 0) return bad(err, spec, p, 0, "is an empty entry");
        if (*n_out == VF_FAULT_MAX_RULES) return bad(err, spec, p, len, "is one entry too many (32 at most)");
        vf_status s = parse_rule(spec, p, len, &out[*n_out], err);
        if (s) return s;
        (*n_out)++;
        if (!comma) return VF_OK;
        p = comma + 1;
    }
}

static atomic_bool hooked; /* vf_fault_set was called: the environment is not read */

static vf_status set_rules(const char *spec, bool count, vf_err *err);

vf_status vf_fault_set(const char *spec, bool count, vf_err *err)
{
    atomic_store(&hooked, true);
    return set_rules(spec, count, err);
}

static vf_status set_rules(const char *spec, bool count, vf_err *err)
{
    fault_rule r[VF_FAULT_MAX_RULES];
    int n = 0;
    vf_status s = parse(spec, r, &n, err);
    if (s) return s;
    atomic_store(&vf_fault_armed_, false);
    memcpy(rules, r, sizeof r);
    n_rules = n;
    counting = count;
    for (int i = 0; i < VF_FAULT_N_SITES; i++) atomic_store(&counts[i], 0);
    atomic_store(&vf_fault_armed_, n > 0 || count);
    return VF_OK;
}

static pthread_once_t setup_once = PTHREAD_ONCE_INIT;
static vf_err setup_err;
static const char *setup_spec, *setup_count;

static void setup_from_env(void)
{
    bool c = setup_count && *setup_count && strcmp(setup_count, "0") != 0;
    if (!atomic_load(&hooked)) set_rules(setup_spec, c, &setup_err);
}

vf_status vf_fault_setup(const char *spec, const char *count, vf_err *err)
{
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu); /* the values the once-function reads */
    setup_spec = spec;
    setup_count = count;
    pthread_once(&setup_once, setup_from_env);
    pthread_mutex_unlock(&mu);
    if (setup_err.status) return vf_err_set(err, setup_err.status, "%s", setup_err.message);
    return VF_OK;
}

vf_fault_kind vf_fault_hit(vf_fault_site site)
{
    int64_t n = atomic_fetch_add(&counts[site], 1) + 1;
    for (int i = 0; i < n_rules; i++) {
        const fault_rule *r = &rules[i];
        if (r->site == site && (n == r->n || (r->and_later && n > r->n))) return r->kind;
    }
    return VF_FAULT_KIND_NONE;
}

void vf_fault_report(void)
{
    if (!counting) return;
    for (int i = 0; i < VF_FAULT_N_SITES; i++) {
        int64_t n = atomic_load(&counts[i]);
        if (n) fprintf(stderr, "vkfuse: fault count: %s %lld\n", site_names[i], (long long)n);
    }
}
