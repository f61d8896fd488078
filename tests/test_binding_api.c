/* What a binding (ctypes, cffi) relies on in the C API: vf_version,
 * vf_free, explicit lengths (vf_tensor_shape, vf_function_io_count), and
 * one convention for failed creates (vkfuse.h): a create that fails hands
 * out NULL, keeps nothing (ASan's leak check) and leaves its status and
 * message in the calling thread's vf_last_status / vf_last_error, also
 * when no context exists. Fault injection (VKFUSE_FAULT through the test
 * hook vf_fault_set) fails each create's allocations one by one. */
#include "faults_common.h"
#include "testutil.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_version(void **state)
{
    (void)state;
    assert_string_equal(vf_version(), VF_VERSION_STRING);
    assert_string_equal(vf_version(), "0.2.0");
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", VF_VERSION_MAJOR, VF_VERSION_MINOR, VF_VERSION_PATCH);
    assert_string_equal(vf_version(), want);
    /* the older macro names still compile and agree */
    assert_int_equal(VKFUSE_VERSION_MINOR, VF_VERSION_MINOR);
}

/* The status of a failed create must be the thread's, its message must
   name the create, and the handle must be NULL. */
static void expect_failed(vf_status got, vf_status want, const void *handle, const char *words)
{
    if (got != want || handle || vf_last_status() != want)
        fail_msg("a create that should fail with %s (\"%s\"): returned %s, %s handle, vf_last_status() %s",
                 vf_status_name(want), words, vf_status_name(got), handle ? "a" : "no", vf_status_name(vf_last_status()));
    if (!strstr(vf_last_error(), words)) fail_msg("vf_last_error() \"%s\" does not say \"%s\"", vf_last_error(), words);
}

/* A failed vf_context_create hands out no context (it used to hand out one
   to destroy), and says why without one. */
static void test_context_create_fails_clean(void **state)
{
    (void)state;
    vf_context *ctx = (vf_context *)&ctx; /* not NULL: the create must clear it */
    vf_context_desc d = {.backend = (vf_backend)99};
    vf_status s = vf_context_create(&d, &ctx);
    expect_failed(s, VF_ERROR_INVALID_ARGUMENT, ctx, "backend 99 is not a vf_backend");
    /* vf_error_message(NULL) is the same reason: older code printing
       vf_error_message(ctx) after the failure prints it */
    assert_string_equal(vf_error_message(NULL), vf_last_error());
    expect_failed(vf_context_create(&d, NULL), VF_ERROR_INVALID_ARGUMENT, NULL, "out is NULL");
    /* a bad environment variable, read at creation */
    setenv("VKFUSE_THREADS", "many", 1);
    ctx = (vf_context *)&ctx;
    d = (vf_context_desc){.backend = VF_BACKEND_CPU};
    s = vf_context_create(&d, &ctx);
    unsetenv("VKFUSE_THREADS");
    expect_failed(s, VF_ERROR_INVALID_ARGUMENT, ctx, "VKFUSE_THREADS");
    /* a success leaves the last error alone (errno's rule) */
    assert_int_equal(vf_context_create(&d, &ctx), VF_OK);
    assert_non_null(ctx);
    assert_int_equal(vf_last_status(), VF_ERROR_INVALID_ARGUMENT);
    vt_context_done(ctx);
}

/* Vulkan's creation sites failing (injected) give no context, the status
   and a message naming the site. */
static void test_context_create_vulkan_faults(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    static const char *const sites[] = {"vkCreateInstance", "vkCreateDevice", "vkAllocateMemory"};
    int failed = 0;
    for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s:1+", sites[i]);
        vt_fault_set(spec, false);
        vf_status s = VF_OK;
        vf_context *ctx = vt_fault_context(NULL, false, 0, &s);
        vt_fault_set(NULL, false);
        if (s == VF_OK) { /* a site this context did not need at creation */
            vt_context_done(ctx);
            continue;
        }
        failed++;
        assert_null(ctx);
        assert_int_equal(vf_last_status(), s);
        if (!strstr(vf_last_error(), sites[i]))
            fail_msg("VKFUSE_FAULT=%s: \"%s\" does not name the site", spec, vf_last_error());
    }
    assert_true(failed >= 2); /* the instance and the device are made at creation */
    /* and a context made afterwards works */
    vf_status s;
    vf_context *ctx = vt_fault_context(NULL, false, 0, &s);
    assert_int_equal(s, VF_OK);
    vt_context_done(ctx);
}

static vf_status ident_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)ctx, (void)user;
    out[0] = vf_add(ctx, in[0], in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_generator *made_in_body;
static vf_status gen_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    made_in_body = vf_generator_create(ctx, 1);
    out[0] = in[0];
    return VF_OK;
}

static void double_cpu(int64_t n, const float *const *in, float *out, void *user)
{
    (void)user;
    for (int64_t i = 0; i < n; i++) out[i] = 2 * in[0][i];
}

/* Each create with bad input: NULL, the status in the context and the
   thread, a message naming the create. Each failure follows another
   create's, so a create that forgot to record would be caught by the
   message still naming the one before. */
static void test_creates_bad_input(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    expect_failed(VF_ERROR_INVALID_ARGUMENT, VF_ERROR_INVALID_ARGUMENT, vf_function_create(ctx, NULL),
                  "vf_function_create");
    assert_int_equal(vf_status_get(ctx), VF_ERROR_INVALID_ARGUMENT);
    vf_error_clear(ctx);
    expect_failed(VF_ERROR_INVALID_ARGUMENT, VF_ERROR_INVALID_ARGUMENT, vf_kernel_create(ctx, NULL), "vf_kernel_create");
    vf_error_clear(ctx);
    vf_elementwise_desc ed = {.n_inputs = 1, .expr = "x0 * 2.0; x0", .cpu = double_cpu};
    expect_failed(VF_ERROR_INVALID_ARGUMENT, VF_ERROR_INVALID_ARGUMENT, vf_elementwise_create(ctx, &ed),
                  "vf_elementwise_create");
    vf_error_clear(ctx);
    vf_function *fn = (vf_function *)&fn;
    vf_status s = vf_function_load(ctx, "/nonexistent/binding.vkf", &fn);
    expect_failed(s, VF_ERROR_IO, fn, "/nonexistent/binding.vkf");
    vf_error_clear(ctx);
    fn = (vf_function *)&fn;
    s = vf_function_load(ctx, NULL, &fn);
    expect_failed(s, VF_ERROR_INVALID_ARGUMENT, fn, "vf_function_load: path is NULL");
    vf_error_clear(ctx);
    /* a generator made while tracing is refused */
    vf_function_desc fd = {.name = "gen", .body = gen_body, .n_inputs = 1, .n_outputs = 1};
    vf_function *gf = vf_function_create(ctx, &fd);
    vf_scope_begin(ctx);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){3}, 1.0), *y = NULL;
    made_in_body = (vf_generator *)&made_in_body;
    vf_function_call(gf, &x, &y);
    vf_scope_end(ctx);
    expect_failed(VF_ERROR_TRACE, VF_ERROR_TRACE, made_in_body, "vf_generator_create: called while tracing");
    vf_function_destroy(gf);
    vf_error_clear(ctx);
    /* no context at all */
    expect_failed(VF_ERROR_INVALID_ARGUMENT, VF_ERROR_INVALID_ARGUMENT, vf_tape_begin(NULL), "vf_tape_begin: ctx is NULL");
    expect_failed(VF_ERROR_INVALID_ARGUMENT, VF_ERROR_INVALID_ARGUMENT, vf_generator_create(NULL, 1),
                  "vf_generator_create: ctx is NULL");
    expect_failed(VF_ERROR_INVALID_ARGUMENT, VF_ERROR_INVALID_ARGUMENT, vf_function_create(NULL, &fd),
                  "vf_function_create: ctx is NULL");
    vt_context_done(ctx);
}

/* One create under test: makes *h on ctx (a fresh context when ctx is
   NULL: then *h is the context) and returns its status; kill frees it. */
typedef struct {
    const char *name;
    vf_status (*make)(vf_context *ctx, void **h);
    void (*kill)(void *h);
    bool fresh; /* on a fresh context each time: its first one allocates (handle slabs) */
} create_case;

static const char *saved_path;

static vf_status mk_context(vf_context *ctx, void **h)
{
    (void)ctx;
    vf_context_desc d = {.backend = VF_BACKEND_CPU};
    return vf_context_create(&d, (vf_context **)h);
}
static void kill_context(void *h) { vf_context_destroy(h); }
static vf_status mk_function(vf_context *ctx, void **h)
{
    vf_function_desc fd = {.name = "ident", .body = ident_body, .n_inputs = 1, .n_outputs = 1,
                           .input_signature = (vf_tensor_spec[]){{VF_F32, 1, {-1}}}};
    *h = vf_function_create(ctx, &fd);
    return *h ? VF_OK : vf_status_get(ctx);
}
static void kill_function(void *h) { vf_function_destroy(h); }
static vf_status mk_load(vf_context *ctx, void **h) { return vf_function_load(ctx, saved_path, (vf_function **)h); }
static vf_status mk_generator(vf_context *ctx, void **h)
{
    *h = vf_generator_create(ctx, 7);
    return *h ? VF_OK : vf_status_get(ctx);
}
static void kill_generator(void *h) { vf_generator_destroy(h); }
static vf_status mk_tape(vf_context *ctx, void **h)
{
    *h = vf_tape_begin(ctx);
    return *h ? VF_OK : vf_status_get(ctx);
}
static void kill_tape(void *h) { vf_tape_end(h); }
static vf_status mk_elementwise(vf_context *ctx, void **h)
{
    vf_elementwise_desc ed = {.name = "twice", .n_inputs = 1, .expr = "2.0 * x0", .cpu = double_cpu};
    *h = vf_elementwise_create(ctx, &ed);
    return *h ? VF_OK : vf_status_get(ctx);
}
static void kill_elementwise(void *h) { vf_elementwise_destroy(h); }
static vf_status mk_trace_file(vf_context *ctx, void **h)
{
    (void)ctx;
    *h = vf_trace_file_create();
    return *h ? VF_OK : vf_last_status();
}
static void kill_trace_file(void *h) { vf_trace_file_destroy(h); }

static const create_case cases[] = {
    {"vf_context_create", mk_context, kill_context},
    {"vf_function_create", mk_function, kill_function},
    {"vf_function_load", mk_load, kill_function},
    {"vf_generator_create", mk_generator, kill_generator, true},
    {"vf_tape_begin", mk_tape, kill_tape, true},
    {"vf_elementwise_create", mk_elementwise, kill_elementwise},
    {"vf_trace_file_create", mk_trace_file, kill_trace_file},
};

/* Every allocation of each create failing in turn (at most 24 of them,
   evenly spread, first and last included): a failure hands out NULL,
   leaks nothing, and vf_last_status / vf_last_error say it was memory;
   the context stays usable. */
static void test_creates_under_malloc_faults(void **state)
{
    (void)state;
    char path[] = "/tmp/vf_binding_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    saved_path = path;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    {
        void *h = NULL;
        assert_int_equal(mk_function(ctx, &h), VF_OK);
        vf_scope_begin(ctx);
        vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 1.0), *y = NULL;
        assert_int_equal(vf_function_call(h, &x, &y), VF_OK);
        vf_scope_end(ctx);
        assert_int_equal(vf_function_save(h, path), VF_OK);
        kill_function(h);
    }
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const create_case *cc = &cases[c];
        void *h = NULL;
        vf_context *on = cc->fresh ? vt_context(VF_BACKEND_CPU) : ctx;
        vt_fault_set(NULL, true);
        assert_int_equal(cc->make(on, &h), VF_OK);
        int64_t n = vf_fault_count(VF_FAULT_malloc);
        vt_fault_set(NULL, false);
        cc->kill(h);
        if (on != ctx) vt_context_done(on);
        if (n == 0) fail_msg("%s allocated nothing through vf_malloc: the sweep tests nothing", cc->name);
        int failed = 0;
        const int most = 24;
        for (int i = 0; i < most && i < n; i++) {
            int64_t k = n <= most ? i + 1 : 1 + (int64_t)i * (n - 1) / (most - 1);
            char spec[32];
            snprintf(spec, sizeof spec, "malloc:%lld", (long long)k);
            h = (void *)&h;
            on = cc->fresh ? vt_context(VF_BACKEND_CPU) : ctx;
            vt_fault_set(spec, false);
            vf_status s = cc->make(on, &h);
            vt_fault_set(NULL, false);
            if (s == VF_OK) { /* an allocation whose failure the create works around */
                cc->kill(h);
                if (on != ctx) vt_context_done(on);
                continue;
            }
            failed++;
            if (h) fail_msg("%s, VKFUSE_FAULT=%s: failed with %s but handed out a handle", cc->name, spec,
                            vf_status_name(s));
            if (vf_last_status() != s)
                fail_msg("%s, VKFUSE_FAULT=%s: returned %s, vf_last_status() %s", cc->name, spec, vf_status_name(s),
                         vf_status_name(vf_last_status()));
            if (!strstr(vf_last_error(), "memory"))
                fail_msg("%s, VKFUSE_FAULT=%s: \"%s\" does not say memory", cc->name, spec, vf_last_error());
            vf_error_clear(on);
            if (on != ctx) vt_context_done(on);
        }
        if (!failed) fail_msg("%s: no allocation failing made it fail", cc->name);
        /* the context still works */
        assert_int_equal(cc->make(ctx, &h), VF_OK);
        cc->kill(h);
    }
    vt_context_done(ctx);
    unlink(path);
}

/* Lengths a binding needs without guessing: a tensor's shape with its
   rank, a (loaded) function's input and output counts. Text the library
   returns goes back through vf_free. */
static void test_lengths_and_free(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    vf_scope_begin(ctx);
    vf_tensor *t = vf_fill(ctx, VF_F32, 3, (int64_t[]){2, 3, 5}, 0.0);
    int64_t shape[VF_MAX_RANK] = {0};
    assert_int_equal(vf_tensor_shape(t, NULL, 0), 3);
    assert_int_equal(vf_tensor_shape(t, shape, 2), 3); /* only max dims written */
    assert_int_equal(shape[0], 2);
    assert_int_equal(shape[1], 3);
    assert_int_equal(shape[2], 0);
    assert_int_equal(vf_tensor_shape(t, shape, VF_MAX_RANK), 3);
    assert_int_equal(shape[2], 5);
    assert_int_equal(vf_tensor_shape(NULL, shape, VF_MAX_RANK), -1);
    vf_scope_end(ctx);

    vf_function_desc fd = {.name = "ident", .body = ident_body, .n_inputs = 1, .n_outputs = 1};
    vf_function *fn = vf_function_create(ctx, &fd);
    int ni = 0, no = 0;
    assert_int_equal(vf_function_io_count(fn, &ni, &no), VF_OK);
    assert_int_equal(ni, 1);
    assert_int_equal(no, 1);
    assert_int_equal(vf_function_io_count(NULL, &ni, &no), VF_ERROR_INVALID_ARGUMENT);
    assert_int_equal(ni, -1);
    assert_int_equal(no, -1);
    vf_free(vf_function_graph_text(fn)); /* none yet: NULL, a no-op */
    vf_scope_begin(ctx);
    vf_tensor *x = vf_fill(ctx, VF_F32, 1, (int64_t[]){4}, 1.0), *y = NULL;
    assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
    vf_scope_end(ctx);
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    vf_free(text);
    vf_trace_file *tf = vf_trace_file_create();
    char *json = vf_trace_file_json(tf);
    assert_non_null(json);
    vf_free(json);
    vf_trace_file_destroy(tf);
    vf_free(NULL);
    vf_function_destroy(fn);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_context_create_fails_clean),
        cmocka_unit_test(test_context_create_vulkan_faults),
        cmocka_unit_test(test_creates_bad_input),
        cmocka_unit_test(test_creates_under_malloc_faults),
        cmocka_unit_test(test_lengths_and_free),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
