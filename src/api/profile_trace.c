/* Chrome / Perfetto trace JSON of profiled calls (vf_trace_file in
 * vkfuse.h): the "JSON trace event format", complete events ("ph":"X")
 * with ts and dur in microseconds, one track (tid) per added call, named
 * by thread_name metadata. Kernels are laid out from their GPU start
 * times, shifted so that the last kernel ends when the call does (GPU and
 * host clocks are not calibrated against each other). */
#include "vkfuse.h"
#include "util/fault.h"
#include "util/last_error.h"
#include "util/sb.h"
#include "util/grow.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tkernel {
    vf_kernel_profile p;        /* name, nodes and node_ops point nowhere: */
    char name[64];              /* ... the name kept here */
    char *nodes;                /* ... and the nodes as text: "%3 mul, %4 add" */
} tkernel;

typedef struct ttrack {
    char name[128];
    vf_function_profile p;      /* kernels and note point nowhere */
    tkernel *k;
} ttrack;

struct vf_trace_file {
    ttrack *t;
    int n, cap;
    char err[512];
};

/* s as a JSON string, quotes included. */
static void jb_str(vf_sb *b, const char *s)
{
    vf_sb_add(b, "\"");
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') vf_sb_add(b, "\\%c", *c);
        else if (*c < 0x20) vf_sb_add(b, "\\u%04x", *c);
        else vf_sb_add(b, "%c", *c);
    }
    vf_sb_add(b, "\"");
}

vf_trace_file *vf_trace_file_create(void)
{
    vf_trace_file *t = vf_calloc(1, sizeof(vf_trace_file));
    if (!t) vf_last_error_set(VF_ERROR_OUT_OF_MEMORY, "vf_trace_file_create: out of host memory (malloc failed)");
    return t;
}

void vf_trace_file_destroy(vf_trace_file *t)
{
    if (!t) return;
    for (int i = 0; i < t->n; i++) {
        for (int j = 0; j < t->t[i].p.n_kernels; j++) free(t->t[i].k[j].nodes);
        free(t->t[i].k);
    }
    free(t->t);
    free(t);
}

const char *vf_trace_file_error(const vf_trace_file *t) { return t ? t->err : ""; }

static char *nodes_text(const vf_kernel_profile *k)
{
    vf_sb b = {0};
    for (int i = 0; i < k->n_nodes; i++)
        vf_sb_add(&b, "%s%%%d %s", i ? ", " : "", k->nodes[i], k->node_ops && k->node_ops[i] ? k->node_ops[i] : "?");
    return vf_sb_take(&b); /* "" when there are none */
}

vf_status vf_trace_file_add(vf_trace_file *t, const char *track, const vf_function_profile *p)
{
    if (!t) return VF_ERROR_INVALID_ARGUMENT;
    if (!p || !p->profiled || (p->n_kernels > 0 && !p->kernels)) {
        snprintf(t->err, sizeof t->err, "vf_trace_file_add: %s; turn profiling on (vf_context_desc.profile or "
                 "VKFUSE_PROFILE=1) and pass vf_function_profile_get's result after a call",
                 !p ? "the profile is NULL" : !p->profiled ? "the profile is of a call that was not profiled"
                                                           : "the profile has kernels but no kernel array");
        return VF_ERROR_INVALID_ARGUMENT;
    }
    if (!vf_grow((void **)&t->t, &t->cap, t->n + 1, sizeof *t->t)) goto oom;
    ttrack *tr = &t->t[t->n];
    memset(tr, 0, sizeof *tr);
    tr->k = vf_calloc((size_t)p->n_kernels + 1, sizeof *tr->k);
    if (!tr->k) goto oom;
    tr->p = *p;
    for (int j = 0; j < p->n_kernels; j++) {
        const vf_kernel_profile *k = &p->kernels[j];
        tkernel *o = &tr->k[j];
        o->p = *k;
        o->p.name = NULL;
        o->p.nodes = NULL;
        o->p.node_ops = NULL;
        snprintf(o->name, sizeof o->name, "%s", k->name ? k->name : "kernel");
        if (!(o->nodes = nodes_text(k))) {
            for (int i = 0; i < j; i++) free(tr->k[i].nodes);
            free(tr->k);
            goto oom;
        }
    }
    tr->p.kernels = NULL;
    tr->p.note = NULL;
    if (track) snprintf(tr->name, sizeof tr->name, "%s", track);
    else snprintf(tr->name, sizeof tr->name, "call %d", t->n + 1);
    t->n++;
    return VF_OK;
oom:
    snprintf(t->err, sizeof t->err, "vf_trace_file_add: out of host memory (malloc failed)");
    return VF_ERROR_OUT_OF_MEMORY;
}

static double us(uint64_t ns) { return (double)ns / 1000.0; }

char *vf_trace_file_json(const vf_trace_file *t)
{
    if (!t) return NULL;
    vf_sb b = {0};
    uint64_t t0 = 0;
    for (int i = 0; i < t->n; i++)
        if (i == 0 || t->t[i].p.start_ns < t0) t0 = t->t[i].p.start_ns;
    vf_sb_add(&b, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
    vf_sb_add(&b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"vkfuse\"}}");
    for (int i = 0; i < t->n; i++) {
        const ttrack *tr = &t->t[i];
        const vf_function_profile *p = &tr->p;
        int tid = i + 1;
        double ts = us(p->start_ns - t0);
        vf_sb_add(&b, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":", tid);
        jb_str(&b, tr->name);
        vf_sb_add(&b, "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
               tid, tid);
        vf_sb_add(&b, ",\n{\"name\":");
        jb_str(&b, tr->name);
        vf_sb_add(&b, ",\"cat\":\"call\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{\"call\":%lld,"
               "\"kernels\":%d,\"dispatches\":%d,\"barriers\":%d,\"gpu_us\":%.3f,\"bytes_read\":%lld,"
               "\"bytes_written\":%lld,\"peak_bytes\":%lld,\"timestamps\":%s}}",
               tid, ts, us(p->wall_ns), (long long)p->call, p->n_kernels, p->dispatches, p->barriers, us(p->gpu_ns),
               (long long)p->bytes_read, (long long)p->bytes_written, (long long)p->peak_bytes,
               p->timestamps ? "true" : "false");
        /* The GPU part ends at the call's end. */
        uint64_t span = 0;
        for (int j = 0; j < p->n_kernels; j++)
            if (tr->k[j].p.start_ns + tr->k[j].p.gpu_ns > span) span = tr->k[j].p.start_ns + tr->k[j].p.gpu_ns;
        uint64_t shift = p->wall_ns > span ? p->wall_ns - span : 0;
        for (int j = 0; p->timestamps && j < p->n_kernels; j++) {
            const tkernel *k = &tr->k[j];
            vf_sb_add(&b, ",\n{\"name\":");
            jb_str(&b, k->name);
            vf_sb_add(&b, ",\"cat\":\"kernel\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,\"args\":{"
                   "\"dispatches\":%d,\"barriers\":%d,\"bytes_read\":%lld,\"bytes_written\":%lld,\"nodes\":",
                   tid, us(p->start_ns - t0 + shift + k->p.start_ns), us(k->p.gpu_ns), k->p.dispatches, k->p.barriers,
                   (long long)k->p.bytes_read, (long long)k->p.bytes_written);
            jb_str(&b, k->nodes);
            vf_sb_add(&b, "}}");
        }
    }
    vf_sb_add(&b, "\n]}\n");
    return vf_sb_take(&b);
}

vf_status vf_trace_file_write(vf_trace_file *t, const char *path)
{
    if (!t) return VF_ERROR_INVALID_ARGUMENT;
    if (!path || !*path) {
        snprintf(t->err, sizeof t->err, "vf_trace_file_write: path is %s; give a file name", path ? "empty" : "NULL");
        return VF_ERROR_INVALID_ARGUMENT;
    }
    char *json = vf_trace_file_json(t);
    if (!json) {
        snprintf(t->err, sizeof t->err, "vf_trace_file_write: out of host memory (malloc failed)");
        return VF_ERROR_OUT_OF_MEMORY;
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(t->err, sizeof t->err, "vf_trace_file_write: cannot create '%.400s': %s", path, strerror(errno));
        free(json);
        return VF_ERROR_IO;
    }
    size_t n = strlen(json);
    bool ok = fwrite(json, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    free(json);
    if (!ok) {
        snprintf(t->err, sizeof t->err, "vf_trace_file_write: writing '%.400s' failed: %s", path, strerror(errno));
        return VF_ERROR_IO;
    }
    t->err[0] = '\0';
    return VF_OK;
}
