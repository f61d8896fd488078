/* The saved-function commands' shared steps (saved_cli.h): contexts,
 * loading, .npy inputs checked against the function's signatures before
 * the library sees them (so that a message names the file), outputs read
 * back as packed elements. */
#include "saved_cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *sc_spec_str(char *buf, size_t len, const vf_tensor_spec *s)
{
    size_t n = (size_t)snprintf(buf, len, "%s[", vf_dtype_name(s->dtype));
    for (int d = 0; d < s->rank && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? "," : "", (long long)s->shape[d]);
    if (n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

bool sc_backend_ok(const char *cmd, const char *backend)
{
    if (!backend || !strcmp(backend, "cpu") || !strcmp(backend, "vulkan") || !strcmp(backend, "auto")) return true;
    fprintf(stderr, "vkfuse %s: --backend %s: give cpu, vulkan or auto\n", cmd, backend);
    return false;
}

/* Sets (or, with val NULL, leaves) an environment variable for the next
   vf_context_create; the previous value is restored by restore_env. */
typedef struct saved_env {
    const char *name;
    char *old;
    bool had, set;
} saved_env;

static void set_env(saved_env *e, const char *name, const char *val)
{
    e->name = name;
    e->set = val != NULL;
    if (!val) return;
    const char *o = getenv(name);
    e->had = o != NULL;
    e->old = o ? strdup(o) : NULL;
    setenv(name, val, 1);
}

static void restore_env(saved_env *e)
{
    if (!e->set) return;
    if (e->had && e->old) setenv(e->name, e->old, 1);
    else unsetenv(e->name);
    free(e->old);
}

vf_context *sc_context(const char *cmd, const char *backend, const char *device, bool profile, bool fusion_off,
                       bool check)
{
    vf_context_desc d = {.profile = profile};
    if (backend && !strcmp(backend, "cpu")) d.backend = VF_BACKEND_CPU;
    else if (backend && !strcmp(backend, "vulkan")) d.backend = VF_BACKEND_VULKAN;
    /* the library reads these when a context is created: the CLI's options
       are the environment variables' for this one context */
    saved_env e[3];
    set_env(&e[0], "VKFUSE_DEVICE", device);
    set_env(&e[1], "VKFUSE_FUSION", fusion_off ? "0" : NULL);
    set_env(&e[2], "VKFUSE_CHECK", check ? "1" : NULL);
    vf_context *ctx = NULL;
    vf_status s = vf_context_create(&d, &ctx);
    for (int i = 0; i < 3; i++) restore_env(&e[i]);
    if (s != VF_OK) {
        fprintf(stderr, "vkfuse %s: cannot create a %s context%s%s%s: %s\n", cmd, backend ? backend : "default",
                device ? " (--device " : "", device ? device : "", device ? ", passed as VKFUSE_DEVICE)" : "",
                vf_last_error());
        vf_context_destroy(ctx);
        return NULL;
    }
    return ctx;
}

vf_function *sc_load(vf_context *ctx, const char *cmd, const char *file, int *rc)
{
    vf_function *fn = NULL;
    vf_status s = vf_function_load(ctx, file, &fn);
    if (s == VF_OK) return fn;
    fprintf(stderr, "vkfuse %s: %s\n", cmd, vf_error_message(ctx));
    *rc = s == VF_ERROR_IO || s == VF_ERROR_FORMAT ? SC_BAD_FILE : SC_RUN_FAILED;
    return NULL;
}

bool sc_read_inputs(const char *cmd, sc_inputs *in)
{
    char msg[600];
    for (int i = 0; i < in->n; i++)
        if (!npy_read(in->path[i], &in->a[i], msg, sizeof msg)) {
            fprintf(stderr, "vkfuse %s: --in %s (input %d): %s\n", cmd, in->path[i], i, msg);
            return false;
        }
    return true;
}

void sc_free_inputs(sc_inputs *in)
{
    for (int i = 0; i < in->n; i++) npy_free(&in->a[i]);
}

/* Why a does not fit spec s, or NULL. */
static const char *misfit(const npy_array *a, const vf_tensor_spec *s, char *buf, size_t len)
{
    if (a->dtype != s->dtype) {
        snprintf(buf, len, "its dtype is %s (%s), the function takes %s", npy_dtype_numpy(a->dtype),
                 vf_dtype_name(a->dtype), vf_dtype_name(s->dtype));
        return buf;
    }
    if (a->rank != s->rank) {
        snprintf(buf, len, "it has %d dims, the function takes %d", a->rank, s->rank);
        return buf;
    }
    for (int d = 0; d < s->rank; d++)
        if (s->shape[d] != -1 && s->shape[d] != a->shape[d]) {
            snprintf(buf, len, "its dim %d is %lld, the function takes %lld", d, (long long)a->shape[d],
                     (long long)s->shape[d]);
            return buf;
        }
    return NULL;
}

bool sc_check_inputs(const char *cmd, const char *file, const vf_function_info *info, const sc_inputs *in)
{
    if (in->n != info->n_inputs) {
        fprintf(stderr, "vkfuse %s: %s takes %d input%s; %d --in file%s given (one --in per input, in order)\n", cmd,
                file, info->n_inputs, info->n_inputs == 1 ? "" : "s", in->n, in->n == 1 ? " was" : "s were");
        return false;
    }
    /* the input that fits no concrete function, from the first that fails the most inputs' check in order */
    char why[256] = "", best[256] = "";
    int worst = -1;
    for (int c = 0; c < info->n_concrete; c++) {
        const vf_concrete_info *ci = &info->concrete[c];
        int bad = -1;
        for (int j = 0; j < in->n && bad < 0; j++)
            if (misfit(&in->a[j], &ci->inputs[j], why, sizeof why)) bad = j;
        if (bad < 0) return true;
        if (bad > worst) worst = bad, snprintf(best, sizeof best, "%s", why);
    }
    if (info->n_concrete == 0) {
        fprintf(stderr, "vkfuse %s: %s has no concrete function to run\n", cmd, file);
        return false;
    }
    fprintf(stderr, "vkfuse %s: --in %s (input %d) fits no signature of %s: %s. It takes:\n", cmd, in->path[worst],
            worst, file, best);
    for (int c = 0; c < info->n_concrete; c++) {
        const vf_concrete_info *ci = &info->concrete[c];
        fprintf(stderr, "  (");
        for (int j = 0; j < ci->n_inputs; j++) {
            char s[160];
            fprintf(stderr, "%s%s", j ? ", " : "", sc_spec_str(s, sizeof s, &ci->inputs[j]));
        }
        fprintf(stderr, ")\n");
    }
    fprintf(stderr, "  (-1: any size; NumPy dtypes: f32 float32, f16 float16, i32 int32, u32 uint32, bool bool)\n");
    return false;
}

int sc_missing_user_ops(const vf_function_info *info, FILE *f, const char *prefix)
{
    int n = 0;
    for (int i = 0; i < info->n_user_ops; i++) {
        const vf_user_op_info *u = &info->user_ops[i];
        if (u->have_c) continue;
        n++;
        if (f)
            fprintf(f, "%s%s '%s': not created in this process (its C function is the saving program's), so it "
                    "runs on Vulkan only%s, from the file's %s\n", prefix, u->kernel ? "user kernel" : "user elementwise op",
                    u->name, u->kernel ? " and at its traced sizes" : "", u->kernel ? "SPIR-V" : "GLSL");
    }
    return n;
}

bool sc_make_tensors(vf_context *ctx, const char *cmd, const sc_inputs *in, vf_tensor **t)
{
    for (int i = 0; i < in->n; i++) {
        const npy_array *a = &in->a[i];
        t[i] = vf_tensor_from_host(ctx, a->dtype, a->rank, a->shape, a->data);
        if (!t[i]) {
            fprintf(stderr, "vkfuse %s: --in %s: %s\n", cmd, in->path[i], vf_error_message(ctx));
            return false;
        }
    }
    return true;
}

void *sc_read_tensor(vf_context *ctx, const char *cmd, vf_tensor *t, size_t *bytes)
{
    *bytes = (size_t)vf_tensor_numel(t) * vf_dtype_size(vf_tensor_dtype(t));
    void *p = malloc(*bytes ? *bytes : 1);
    if (!p) {
        fprintf(stderr, "vkfuse %s: out of host memory (%zu bytes)\n", cmd, *bytes);
        return NULL;
    }
    if (vf_tensor_read(t, p, *bytes) != VF_OK) {
        fprintf(stderr, "vkfuse %s: reading an output back: %s\n", cmd, vf_error_message(ctx));
        free(p);
        return NULL;
    }
    return p;
}

static double half(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m | 0x400, e - 25);
    return h & 0x8000 ? -v : v;
}

double sc_value(vf_dtype dt, const void *data, int64_t i)
{
    switch (dt) {
    case VF_F32: return ((const float *)data)[i];
    case VF_F16: return half(((const uint16_t *)data)[i]);
    case VF_I32: return ((const int32_t *)data)[i];
    case VF_U32: return ((const uint32_t *)data)[i];
    case VF_BOOL: return ((const uint8_t *)data)[i];
    }
    return NAN;
}

int sc_prints_to_stderr(void)
{
    fflush(stdout);
    int saved = dup(STDOUT_FILENO);
    if (saved >= 0 && dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        close(saved);
        return -1;
    }
    return saved;
}

void sc_prints_restore(int saved)
{
    if (saved < 0) return;
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
}

void sc_jstr(const char *s)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c < 0x20) printf("\\u%04x", *c);
        else putchar(*c);
    }
    putchar('"');
}
