/* Compiling a plan's shaders in parallel (vf_vk_shaders_prepare).
 *
 * A traced function's first call compiles every kernel of its plan; one
 * after the other, a cold MLP step waited about 3 s for shaderc alone on a
 * 2-core machine. The kernels are independent and a shaderc compiler may
 * be shared by threads, so the ones that neither cache holds are compiled
 * here on a few threads, before the plan asks for them one by one. The
 * results wait in c->ahead; vf_vk_shader_get takes each as if it had just
 * compiled it (counted, logged, written to the disk cache, an error
 * reported there), so what a user sees does not depend on the threads.
 * The threads live for one call: no pool to own, nothing left running. */
#include "vulkan/shader_cache.h"
#include "util/fault.h"
#include "util/clock.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    void *compiler;
    uint32_t target_env_version;
    const char *const *glsl;
    const char *const *names;
    const int *job;          /* index into glsl/names of each job */
    vf_vk_compiled *out;     /* one per job */
    int n_jobs;
    atomic_int next;
} prep_work;

static void *worker(void *arg)
{
    prep_work *w = arg;
    for (;;) {
        int j = atomic_fetch_add(&w->next, 1);
        if (j >= w->n_jobs) return NULL;
        int i = w->job[j];
        uint64_t key = w->out[j].key;
        vf_vk_shader_compile_raw(w->compiler, w->target_env_version, w->glsl[i],
                                 w->names[i] && *w->names[i] ? w->names[i] : "kernel", &w->out[j]);
        w->out[j].key = key;
        w->out[j].ahead = true;
    }
}

bool vf_vk_shader_on_hand(const vf_vk_shaders *c, uint64_t key)
{
    if (vf_vk_shader_find(c, key)) return true;
    for (int i = 0; i < c->n_ahead; i++)
        if (c->ahead[i].key == key && !c->ahead[i].taken) return true;
    char path[4200];
    return vf_vk_shader_path(c, key, path, sizeof path) && access(path, R_OK) == 0;
}

vf_status vf_vk_shaders_prepare(vf_vk_shaders *c, int n, const char *const *glsl, const char *const *names)
{
    if (c->compile_threads <= 1 || n < 2) return VF_OK;
    int *job = vf_malloc(sizeof *job * (size_t)n);
    vf_vk_compiled *out = vf_calloc((size_t)n, sizeof *out);
    if (!job || !out) {
        free(job);
        free(out);
        return vf_err_set(c->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed) (compiling ahead)");
    }
    int n_jobs = 0;
    for (int i = 0; i < n; i++) {
        if (!glsl[i]) continue;
        uint64_t key = vf_vk_shader_key(c, glsl[i]);
        bool dup = vf_vk_shader_on_hand(c, key);
        for (int j = 0; j < n_jobs && !dup; j++) dup = out[j].key == key;
        if (dup) continue;
        out[n_jobs].key = key;
        job[n_jobs++] = i;
    }
    /* One kernel to compile gains nothing from a thread; a compiler that
       cannot be made is reported by vf_vk_shader_get as without threads. */
    if (n_jobs < 2 || vf_vk_shaders_compiler(c) != VF_OK) {
        free(job);
        free(out);
        return VF_OK;
    }
    prep_work w = {.compiler = c->compiler, .target_env_version = c->target_env_version, .glsl = glsl,
                   .names = names, .job = job, .out = out, .n_jobs = n_jobs};
    atomic_init(&w.next, 0);
    enum { MAX_THREADS = 16 };
    pthread_t th[MAX_THREADS];
    int want = c->compile_threads < n_jobs ? c->compile_threads : n_jobs, started = 0;
    if (want > MAX_THREADS) want = MAX_THREADS;
    /* The calling thread is one of the workers; a thread that cannot be
       started leaves its share to the others. */
    for (int t = 1; t < want; t++)
        if (pthread_create(&th[started], NULL, worker, &w) == 0) started++;
    int64_t t0 = vf_now_ns();
    worker(&w);
    for (int t = 0; t < started; t++) pthread_join(th[t], NULL);
    free(job);
    if (c->log_info) {
        int64_t sum = 0;
        for (int j = 0; j < n_jobs; j++) sum += out[j].ns;
        fprintf(stderr, "vkfuse: compiled %d kernels ahead on %d threads in %.2f ms (%.2f ms of compiles)\n",
                n_jobs, started + 1, (double)(vf_now_ns() - t0) / 1e6, (double)sum / 1e6);
    }

    vf_vk_compiled *grown = vf_realloc(c->ahead, sizeof *grown * (size_t)(c->n_ahead + n_jobs));
    if (!grown) {   /* nothing lost but the work: vf_vk_shader_get compiles them again */
        for (int j = 0; j < n_jobs; j++) free(out[j].words);
        free(out);
        return VF_OK;
    }
    c->ahead = grown;
    memcpy(c->ahead + c->n_ahead, out, sizeof *out * (size_t)n_jobs);
    c->n_ahead += n_jobs;
    free(out);
    return VF_OK;
}

bool vf_vk_shaders_add_ahead(vf_vk_shaders *c, vf_vk_compiled *r)
{
    vf_vk_compiled *grown = vf_realloc(c->ahead, sizeof *grown * (size_t)(c->n_ahead + 1));
    if (!grown) return false;
    c->ahead = grown;
    r->ahead = true;
    r->taken = false;
    c->ahead[c->n_ahead++] = *r;
    memset(r, 0, sizeof *r);
    return true;
}

void vf_vk_shaders_drop_ahead(vf_vk_shaders *c)
{
    for (int i = 0; i < c->n_ahead; i++) free(c->ahead[i].words);
    free(c->ahead);
    c->ahead = NULL;
    c->n_ahead = 0;
}
