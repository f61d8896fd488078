#include "limits_common.h"

const vf_device_caps lim_caps_lavapipe = {
    .is_cpu = true, .subgroup_size = 8, .subgroup_arithmetic = true, .subgroup_shuffle = true,
    .max_workgroup_invocations = 1024, .max_workgroup_size = {1024, 1024, 1024},
    .max_workgroup_count = {65535, 65535, 65535}, .shared_memory_bytes = 32768, .max_push_constants = 128,
    .max_storage_buffer_range = 1u << 27, .min_storage_buffer_offset_alignment = 16, .storage16 = true,
    .storage8 = true, .shader_float16 = true, .shader_int8 = true, .max_loop_iterations = 65535};

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

vf_tensor *lim_scalar(vf_context *ctx, float v) { return vf_tensor_from_host(ctx, VF_F32, 0, NULL, &v); }

vf_status lim_finish(vf_context *ctx, vf_tensor **out, int n)
{
    for (int i = 0; i < n; i++)
        if (!out[i]) return vf_status_get(ctx) ? vf_status_get(ctx) : VF_ERROR_INVALID_ARGUMENT;
    return VF_OK;
}

/* ---- running a program ---------------------------------------------------- */

static size_t spec_numel(const spec *sp)
{
    size_t n = 1;
    for (int d = 0; d < sp->rank; d++) n *= (size_t)sp->shape[d];
    return n;
}

static void *make_input(const spec *sp, uint64_t seed)
{
    size_t n = spec_numel(sp);
    void *x = malloc(n * 4);
    assert_non_null(x);
    if (sp->dtype == VF_F32) vt_fill_uniform(x, n, -2.0f, 2.0f, seed);
    else vt_fill_int(x, n, 0, C - 1, seed);
    return x;
}

typedef struct outputs {
    int n;
    vf_dtype dtype[MAX_OUT];
    size_t numel[MAX_OUT];
    void *data[MAX_OUT];
} outputs;

static void outputs_free(outputs *o)
{
    for (int i = 0; i < o->n; i++) free(o->data[i]);
    memset(o, 0, sizeof *o);
}

typedef enum { EAGER, TRACED, UNFUSED } mode;
static const char *const mode_name[] = {"eager", "traced fused", "traced unfused"};

static void run(vf_context *ctx, const program *p, void *const *host, mode m, outputs *res)
{
    memset(res, 0, sizeof *res);
    vf_scope_begin(ctx);
    vf_tensor *in[MAX_IN], *out[MAX_OUT] = {0};
    for (int i = 0; i < p->n_in; i++) {
        in[i] = vf_tensor_from_host(ctx, p->in[i].dtype, p->in[i].rank, p->in[i].shape, host[i]);
        assert_non_null(in[i]);
    }
    vf_status st;
    vf_function *fn = NULL;
    if (m == EAGER) {
        st = p->body(ctx, in, out, NULL);
    } else {
        fn = vf_function_create(ctx, &(vf_function_desc){.name = p->name, .body = p->body, .n_inputs = p->n_in,
                                                         .n_outputs = p->n_out, .unfused = m == UNFUSED});
        assert_non_null(fn);
        st = vf_function_call(fn, in, out);
    }
    if (st != VF_OK)
        fail_msg("%s (%s): %s: %s", p->name, mode_name[m], vf_status_name(st), vf_error_message(ctx));
    res->n = p->n_out;
    for (int i = 0; i < p->n_out; i++) {
        res->dtype[i] = vf_tensor_dtype(out[i]);
        res->numel[i] = (size_t)vf_tensor_numel(out[i]);
        res->data[i] = vt_read(out[i]);
    }
    if (fn) vf_function_destroy(fn);
    vf_scope_end(ctx);
}

static void compare(const program *p, mode m, const outputs *got, const outputs *want)
{
    assert_int_equal(got->n, want->n);
    for (int i = 0; i < want->n; i++) {
        char what[128];
        snprintf(what, sizeof what, "%s (%s) output %d", p->name, mode_name[m], i);
        assert_int_equal(got->dtype[i], want->dtype[i]);
        assert_int_equal(got->numel[i], want->numel[i]);
        if (want->dtype[i] == VF_F32)
            vt_assert_close_f32(got->data[i], want->data[i], want->numel[i], 1e-4, 1e-4, what);
        else
            vt_assert_equal_bytes(got->data[i], want->data[i], want->numel[i] * vf_dtype_size(want->dtype[i]), what);
    }
}

vf_context *lim_context(const char *limits)
{
    setenv("VKFUSE_TEST_LIMITS", limits, 1);
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    unsetenv("VKFUSE_TEST_LIMITS");
    return ctx;
}

void lim_check_program(const program *p, const char *limits)
{
    void *host[MAX_IN];
    for (int i = 0; i < p->n_in; i++) host[i] = make_input(&p->in[i], 100 + (uint64_t)i);
    vf_context *cpu = vt_context(VF_BACKEND_CPU);
    outputs want, got;
    run(cpu, p, host, EAGER, &want);
    vt_context_done(cpu);
    vf_context *vk = lim_context(limits);
    for (int m = EAGER; m <= UNFUSED; m++) {
        run(vk, p, host, (mode)m, &got);
        compare(p, (mode)m, &got, &want);
        outputs_free(&got);
    }
    vt_context_done(vk);
    outputs_free(&want);
    for (int i = 0; i < p->n_in; i++) free(host[i]);
}

