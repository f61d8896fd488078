/* One file from path to verdict: read, parse, load shader files, run. */
#include "exec.h"
#include "util/fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reads at most max bytes; NULL with a message otherwise. */
static char *read_file(const char *path, size_t max, size_t *len, char *why, size_t why_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, why_len, "cannot open: %s", strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = vf_malloc(cap + 1);
    while (buf) {
        if (n == cap) {
            if (cap >= max) {
                /* One more byte tells a file of exactly max bytes apart. */
                char extra;
                if (fread(&extra, 1, 1, f) == 0 && !ferror(f)) break;
                snprintf(why, why_len, "larger than %zu bytes", max);
                free(buf);
                buf = NULL;
                break;
            }
            cap = cap * 2 > max ? max : cap * 2;
            char *nb = vf_realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (buf && ferror(f)) {
        snprintf(why, why_len, "read error");
        free(buf);
        buf = NULL;
    } else if (!buf && !why[0]) {
        snprintf(why, why_len, "out of host memory (malloc failed)");
    }
    fclose(f);
    if (buf) {
        buf[n] = '\0';
        *len = n;
    }
    return buf;
}

static am_status load_shader_files(am_script *s, const char *dir, am_result *res)
{
    for (int i = 0; i < s->n_shaders; i++) {
        am_shader *sh = &s->shader[i];
        if (sh->source || !sh->file[0]) continue;
        char path[4096];
        if (sh->file[0] == '/')
            snprintf(path, sizeof path, "%s", sh->file);
        else
            snprintf(path, sizeof path, "%s/%s", dir, sh->file);
        char why[256] = "";
        size_t len;
        sh->source = read_file(path, AM_MAX_SOURCE, &len, why, sizeof why);
        if (!sh->source) return am_fail_at(res, sh->pos, "SHADER FILE %s: %s", sh->file, why);
        for (size_t k = 0; k < len; k++)
            if (!sh->source[k]) sh->source[k] = ' ';
        sh->source_line = 1;
    }
    return AM_PASS;
}

/* BUFFER ... FILE TEXT|BINARY: TEXT is parsed like DATA values, BINARY
   is the buffer's bytes (elements: whole strides of them), as in Amber. */
static am_status load_buffer_files(am_script *s, const char *dir, am_result *res)
{
    for (int i = 0; i < s->n_buffers; i++) {
        am_buffer *b = &s->buffer[i];
        if (!b->file[0]) continue;
        char path[4096];
        if (b->file[0] == '/')
            snprintf(path, sizeof path, "%s", b->file);
        else
            snprintf(path, sizeof path, "%s/%s", dir, b->file);
        char why[256] = "";
        size_t len;
        char *data = read_file(path, b->file_binary ? AM_MAX_DATA_FILE : AM_MAX_SOURCE, &len, why, sizeof why);
        if (!data) return am_fail_at(res, b->file_pos, "BUFFER %s FILE %s: %s", b->name, b->file, why);
        if (b->file_binary) {
            free(b->data);
            b->data = (uint8_t *)data;
            b->data_len = len;
            b->elements = len / b->fmt.stride;
            b->min_bytes = len;
            continue;
        }
        am_result r = {0};
        am_status st = am_buffer_parse_text(b, data, len, &r);
        free(data);
        if (st != AM_PASS)
            return am_fail_at(res, b->file_pos, "BUFFER %s FILE %s:%d:%d: %s", b->name, b->file, r.pos.line,
                              r.pos.col, r.msg);
    }
    return AM_PASS;
}

void am_run_file(const char *path, const am_exec_opts *o, am_result *res)
{
    memset(res, 0, sizeof *res);
    char why[256] = "";
    size_t len = 0;
    char *src = read_file(path, AM_MAX_SOURCE, &len, why, sizeof why);
    if (!src) {
        am_fail_at(res, (am_pos){0, 0}, "%s", why);
        return;
    }
    am_script *s = vf_calloc(1, sizeof *s);
    if (!s) {
        free(src);
        am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
        return;
    }
    am_status st = am_parse(src, len, s, res);
    free(src);
    if (st == AM_PASS) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
            *slash = '\0';
        else
            strcpy(dir, ".");
        st = load_shader_files(s, o->dir ? o->dir : dir, res);
        if (st == AM_PASS) st = load_buffer_files(s, o->dir ? o->dir : dir, res);
    }
    if (st == AM_PASS) {
        am_exec *x = vf_calloc(1, sizeof *x);
        if (!x) {
            am_fail_at(res, (am_pos){0, 0}, "out of host memory (malloc failed)");
        } else {
            st = am_exec_device(x, s, o, res);
            if (st == AM_PASS) st = am_exec_run(x, s, o, res);
            int64_t msgs = x->dev.validation_messages;
            bool hung = x->hung;
            am_exec_destroy(x);
            msgs = msgs > x->dev.validation_messages ? msgs : x->dev.validation_messages;
            free(x);
            if (msgs > 0 && (st == AM_PASS || st == AM_FAIL)) {
                /* A test that passed with validation errors has not passed. */
                if (st == AM_PASS) {
                    res->status = AM_FAIL;
                    res->pos = (am_pos){0, 0};
                    snprintf(res->msg, sizeof res->msg, "the validation layer reported %lld message(s)",
                             (long long)msgs);
                }
            }
            res->hung = hung;
        }
    }
    am_script_free(s);
    free(s);
}
