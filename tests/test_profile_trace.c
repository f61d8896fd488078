/* The Chrome / Perfetto trace of profiled calls (vf_trace_file): two calls
 * as two tracks, their events checked with a small JSON parser (a DOM, for
 * structure checks; tested here too), the file written equal to the text,
 * write errors, an empty trace. The per-kernel records: test_profile.c. */
#include "testutil.h"
#include "profile_common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- a small JSON parser (a DOM, for structure checks) -------------------- */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jkind;

typedef struct jval {
    jkind kind;
    double num;
    char *str;                  /* J_STR; also the key of an object member */
    struct jval *items;         /* J_ARR, J_OBJ (members: str is the key) */
    int n;
} jval;

typedef struct jp {
    const char *s;
    bool bad;
} jp;

static void jskip(jp *p)
{
    while (*p->s && isspace((unsigned char)*p->s)) p->s++;
}

static char *jstring(jp *p)
{
    if (*p->s != '"') return p->bad = true, NULL;
    p->s++;
    size_t cap = 16, n = 0;
    char *o = malloc(cap);
    while (*p->s && *p->s != '"') {
        char c = *p->s++;
        if ((unsigned char)c < 0x20) p->bad = true;
        if (c == '\\') {
            char e = *p->s++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++)
                    if (!isxdigit((unsigned char)*p->s++)) p->bad = true;
                c = '?';
            } else if (strchr("\"\\/bfnrt", e) && e) {
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e;
            } else {
                p->bad = true;
                break;
            }
        }
        if (n + 2 > cap) o = realloc(o, cap *= 2);
        o[n++] = c;
    }
    if (*p->s != '"') p->bad = true;
    else p->s++;
    o[n] = '\0';
    return o;
}

static void jparse(jp *p, jval *v, int depth)
{
    memset(v, 0, sizeof *v);
    jskip(p);
    if (depth > 32) {
        p->bad = true;
        return;
    }
    char c = *p->s;
    if (c == '{' || c == '[') {
        v->kind = c == '{' ? J_OBJ : J_ARR;
        p->s++;
        jskip(p);
        if (*p->s == (c == '{' ? '}' : ']')) {
            p->s++;
            return;
        }
        for (;;) {
            v->items = realloc(v->items, sizeof *v->items * (size_t)(v->n + 1));
            jval *it = &v->items[v->n++];
            char *key = NULL;
            if (c == '{') {
                jskip(p);
                key = jstring(p);
                jskip(p);
                if (*p->s != ':') p->bad = true;
                else p->s++;
            }
            jparse(p, it, depth + 1);
            if (c == '{') {
                if (it->kind != J_STR) it->str = key;
                else {
                    /* keep the key; a string value's text moves to num-less str2 via swap */
                    char *val = it->str;
                    it->str = key;
                    it->items = malloc(sizeof *it->items);
                    memset(it->items, 0, sizeof *it->items);
                    it->items[0].kind = J_STR;
                    it->items[0].str = val;
                    it->n = -1; /* a string member: its value is items[0].str */
                }
            }
            jskip(p);
            if (*p->s == ',') {
                p->s++;
                continue;
            }
            if (*p->s == (c == '{' ? '}' : ']')) {
                p->s++;
                return;
            }
            p->bad = true;
            return;
        }
    } else if (c == '"') {
        v->kind = J_STR;
        v->str = jstring(p);
    } else if (!strncmp(p->s, "true", 4) || !strncmp(p->s, "false", 5)) {
        v->kind = J_BOOL;
        v->num = *p->s == 't';
        p->s += *p->s == 't' ? 4 : 5;
    } else if (!strncmp(p->s, "null", 4)) {
        p->s += 4;
    } else {
        char *end;
        v->kind = J_NUM;
        v->num = strtod(p->s, &end);
        if (end == p->s) p->bad = true;
        p->s = end;
    }
}

static void jfree(jval *v)
{
    if (v->n < 0) {
        free(v->items[0].str);
        free(v->items);
        free(v->str);
        return;
    }
    for (int i = 0; i < v->n; i++) jfree(&v->items[i]);
    free(v->items);
    free(v->str);
}

/* Member `key` of object o (NULL if none). */
static const jval *jget(const jval *o, const char *key)
{
    if (!o || o->kind != J_OBJ) return NULL;
    for (int i = 0; i < o->n; i++)
        if (o->items[i].str && !strcmp(o->items[i].str, key)) return &o->items[i];
    return NULL;
}

static const char *jget_str(const jval *o, const char *key)
{
    const jval *v = jget(o, key);
    return v && v->n == -1 ? v->items[0].str : NULL;
}

static bool jparse_text(const char *text, jval *root)
{
    jp p = {text, false};
    jparse(&p, root, 0);
    jskip(&p);
    return !p.bad && *p.s == '\0';
}

static void test_json_parser(void **state)
{
    (void)state;
    jval v;
    assert_true(jparse_text("{\"a\":[1,2.5,-3e2],\"b\":\"x\\\"y\",\"c\":{\"d\":true}}", &v));
    assert_int_equal(jget(&v, "a")->n, 3);
    assert_true(jget(&v, "a")->items[2].num == -300.0);
    assert_string_equal(jget_str(&v, "b"), "x\"y");
    jfree(&v);
    const char *bad[] = {"{\"a\":1,}", "[1 2]", "{\"a\" 1}", "\"open", "{} x", "[1,]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        jval w;
        if (jparse_text(bad[i], &w)) fail_msg("accepted bad JSON: %s", bad[i]);
        jfree(&w);
    }
}

/* Two profiled calls as two tracks: the JSON parses, has one thread_name
   and one call event per track and one event per kernel, with ts and dur
   numbers in microseconds that sit inside their call. */
static void test_trace_json(void **state)
{
    (void)state;
    vf_context *ctx = vt_profiling_context(VF_BACKEND_VULKAN);
    vt_prof_run r;
    vt_prof_run_make(ctx, &r);
    vf_trace_file *t = vf_trace_file_create();
    assert_non_null(t);
    int kernels = 0;
    double dispatches = 0, written = 0; /* the kernels' own figures, summed */
    for (int i = 0; i < 2; i++) {
        vt_prof_run_call(ctx, &r);
        vf_function_profile p;
        assert_int_equal(vf_function_profile_get(r.fn, &p), VF_OK);
        assert_int_equal(vf_trace_file_add(t, i ? "second \"call\"" : NULL, &p), VF_OK);
        kernels += p.n_kernels;
        for (int j = 0; j < p.n_kernels; j++) {
            dispatches += p.kernels[j].dispatches;
            written += (double)p.kernels[j].bytes_written;
        }
    }
    char *json = vf_trace_file_json(t);
    assert_non_null(json);
    jval root;
    if (!jparse_text(json, &root)) fail_msg("the trace is not valid JSON:\n%s", json);
    const jval *ev = jget(&root, "traceEvents");
    assert_non_null(ev);
    assert_int_equal(ev->kind, J_ARR);
    int names = 0, calls = 0, kern = 0;
    double call_ts[3] = {0}, call_end[3] = {0};
    for (int i = 0; i < ev->n; i++) {
        const jval *e = &ev->items[i];
        assert_int_equal(e->kind, J_OBJ);
        const char *ph = jget_str(e, "ph"), *name = jget_str(e, "name"), *cat = jget_str(e, "cat");
        assert_non_null(ph);
        assert_non_null(name);
        const jval *tid = jget(e, "tid"), *pid = jget(e, "pid");
        assert_true(tid && tid->kind == J_NUM && pid && pid->kind == J_NUM);
        if (!strcmp(ph, "M")) {
            if (!strcmp(name, "thread_name")) {
                names++;
                const char *tn = jget_str(jget(e, "args"), "name");
                assert_non_null(tn);
                if (tid->num == 1) assert_string_equal(tn, "call 1");
                if (tid->num == 2) assert_string_equal(tn, "second \"call\"");
            }
            continue;
        }
        assert_string_equal(ph, "X");
        const jval *ts = jget(e, "ts"), *dur = jget(e, "dur");
        assert_true(ts && ts->kind == J_NUM && dur && dur->kind == J_NUM);
        assert_true(ts->num >= 0 && dur->num >= 0);
        int k = (int)tid->num;
        assert_true(k == 1 || k == 2);
        assert_non_null(cat);
        if (!strcmp(cat, "call")) {
            calls++;
            call_ts[k] = ts->num;
            call_end[k] = ts->num + dur->num;
            assert_non_null(jget(jget(e, "args"), "gpu_us"));
        } else {
            assert_string_equal(cat, "kernel");
            kern++;
            const jval *a = jget(e, "args");
            assert_non_null(jget(a, "dispatches"));
            assert_non_null(jget(a, "bytes_read"));
            dispatches -= jget(a, "dispatches")->num;
            written -= jget(a, "bytes_written")->num;
            assert_non_null(strstr(jget_str(a, "nodes"), "%"));
            /* inside its call (calls come before their kernels) */
            assert_true(ts->num >= call_ts[k] - 1e-3 && ts->num + dur->num <= call_end[k] + 1e-3);
        }
    }
    assert_int_equal(names, 2);
    assert_int_equal(calls, 2);
    assert_int_equal(kern, kernels);
    assert_true(dispatches == 0 && written == 0); /* each kernel's figures, as profiled */
    assert_true(call_ts[1] == 0.0); /* relative to the first call */
    assert_true(call_ts[2] >= call_end[1]);
    jfree(&root);
    /* the file holds the same text */
    char path[] = "/tmp/vkfuse_trace_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(vf_trace_file_write(t, path), VF_OK);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = strlen(json);
    char *back = calloc(n + 2, 1);
    assert_int_equal(fread(back, 1, n + 1, f), n);
    fclose(f);
    assert_string_equal(back, json);
    free(back);
    remove(path);
    free(json);
    /* a file that cannot be written */
    assert_int_equal(vf_trace_file_write(t, "/nonexistent-dir/x/trace.json"), VF_ERROR_IO);
    assert_non_null(strstr(vf_trace_file_error(t), "/nonexistent-dir/x/trace.json"));
    assert_int_equal(vf_trace_file_write(t, ""), VF_ERROR_INVALID_ARGUMENT);
    vf_trace_file_destroy(t);
    /* an empty trace is valid JSON with no events but the process name */
    t = vf_trace_file_create();
    json = vf_trace_file_json(t);
    assert_true(jparse_text(json, &root));
    assert_int_equal(jget(&root, "traceEvents")->n, 1);
    jfree(&root);
    free(json);
    vf_trace_file_destroy(t);
    vf_function_destroy(r.fn);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest cpu_tests[] = {
        cmocka_unit_test(test_json_parser),
    };
    int fails = cmocka_run_group_tests_name("profile_trace_host", cpu_tests, NULL, NULL);
    if (!vt_have_vulkan()) return fails;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_json),
    };
    return fails + cmocka_run_group_tests_name("profile_trace", tests, NULL, NULL);
}
