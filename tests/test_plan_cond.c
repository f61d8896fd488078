/* vf_cond in recorded plans beyond what test_function_plan.c's guarded
 * cond covers: a guarded branch fused like the rest of a plan (an
 * elementwise chain with a softmax as one row kernel, a matmul with its
 * bias and relu as one kernel, each guarded), and user kernels inside
 * guarded branches (one part and several parts, with a gradient through
 * the branch) planned like built-in ops. Kernel counts come from
 * vf_function_stats and the profile; values are checked against eager,
 * the CPU backend and the unfused plan, both branches taken, at two
 * sizes. */
#include "testutil.h"
#include "profile_common.h"
#include "kernels_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { COLS = 16, THEN_CHAIN = 60, ELSE_CHAIN = 63 };

static const int64_t g_rows[2] = {37, 300};

typedef struct caps {
    vf_tensor *w, *b; /* [COLS, COLS], [COLS] */
} caps;

/* then: 60 unary ops, softmax over the rows (one row kernel with the
   chain), then relu(s @ w + b) (one matmul kernel): 67 nodes, too many
   for cond_to_select. The ops are cheap ones (neg, abs): lavapipe's LLVM
   takes seconds to compile a row kernel of 60 transcendentals. */
static vf_status then_fused(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    caps *c = user;
    vf_tensor *h = in[0];
    for (int i = 0; i < THEN_CHAIN; i++) h = i % 2 ? vf_abs(ctx, h) : vf_neg(ctx, h);
    h = vf_softmax(ctx, h, -1);
    out[0] = vf_relu(ctx, vf_add(ctx, vf_matmul(ctx, h, c->w), c->b));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* else: 63 unary ops and a product with the input: one elementwise kernel
   of 64 members (the partition's limit). */
static vf_status else_fused(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    (void)user;
    vf_tensor *h = in[0];
    for (int i = 0; i < ELSE_CHAIN; i++) h = i % 2 ? vf_neg(ctx, h) : vf_abs(ctx, h);
    out[0] = vf_mul(ctx, h, in[0]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* y = cond(mean(x) > 0, then_fused, else_fused)(x) * 3 */
static vf_status fused_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vt_scalar(ctx, 0.0));
    vf_tensor *y = NULL;
    vf_status s = vf_cond(ctx, pred, then_fused, else_fused, 1, in, 1, &y, user);
    if (s != VF_OK) return s;
    out[0] = vf_mul(ctx, y, vt_scalar(ctx, 3.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static const vf_tensor_spec g_sig = {.dtype = VF_F32, .rank = 2, .shape = {-1, COLS}};

static void make_caps(vf_context *ctx, caps *c)
{
    float w[COLS * COLS], b[COLS];
    vt_fill_uniform(w, COLS * COLS, -0.5f, 0.5f, 31);
    vt_fill_uniform(b, COLS, -0.2f, 0.2f, 32);
    c->w = vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){COLS, COLS}, w);
    c->b = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){COLS}, b);
    assert_true(c->w && c->b);
}

/* x [rows, COLS]: positive (mean > 0, the then branch) or negative. */
static float *make_x(int64_t rows, int sign, uint64_t seed)
{
    float *x = malloc(sizeof *x * (size_t)(rows * COLS));
    assert_non_null(x);
    vt_fill_uniform(x, (size_t)(rows * COLS), 0.1f, 1.5f, seed);
    for (int64_t i = 0; i < rows * COLS; i++) x[i] *= (float)sign;
    return x;
}

/* The COND's node id in the optimised graph, from its text dump. */
static int cond_node(vf_function *fn)
{
    char *text = vf_function_graph_text(fn);
    assert_non_null(text);
    int id = -1;
    for (char *line = strtok(text, "\n"); line && id < 0; line = strtok(NULL, "\n")) {
        int n;
        char name[32];
        if (strncmp(line, "  %", 3) == 0 && sscanf(line, " %%%d = %31[a-z_](", &n, name) == 2 && !strcmp(name, "cond"))
            id = n;
    }
    free(text);
    return id;
}

/* Kernels of the last call's profile that belong to the COND (its guard
   and its branches' kernels); *guards: how many of them are guards. */
static int cond_kernels(vf_function *fn, int *guards)
{
    int id = cond_node(fn);
    assert_true(id >= 0);
    vf_function_profile p;
    assert_int_equal(vf_function_profile_get(fn, &p), VF_OK);
    assert_true(p.profiled && p.planned);
    int n = 0;
    *guards = 0;
    for (int i = 0; i < p.n_kernels; i++) {
        const vf_kernel_profile *k = &p.kernels[i];
        if (k->n_nodes < 1 || k->nodes[0] != id) continue;
        assert_int_equal(k->n_nodes, 1); /* a fused kernel of a branch names the COND once */
        *guards += !strcmp(k->name, "plan_guard");
        n++;
    }
    return n;
}

/* Fused: mean, greater, the guard, then's row kernel, matmul kernel and
   result copy, else's one kernel and copy, the final mul. Unfused: every
   op of both branches a kernel. */
enum {
    TOP_KERNELS = 3,                    /* mean, greater, mul */
    TOP_UNFUSED = 5,                    /* and the fills of 0 and 3 (push constants when fused) */
    THEN_FUSED = 3, ELSE_FUSED = 2,     /* fused kernels + the result copy */
    THEN_UNFUSED = THEN_CHAIN + 4 + 1,  /* + softmax, matmul, add, relu; copy */
    ELSE_UNFUSED = ELSE_CHAIN + 1 + 1,  /* + mul; copy */
    CPU_TOP = 3,                        /* the CPU backend's plan: mean, greater, mul */
    CPU_THEN = 1 + 1 + 1,               /* the row group in one pass (cpu_rows.c), matmul + epilogue, copy */
    CPU_ELSE = 1 + 1,                   /* the chain and mul in one pass, copy */
};

static void test_branch_fusion(void **state)
{
    (void)state;
    vf_context *ctx = vt_group_vk, *cpu = vt_group_cpu;
    caps vc, cc;
    make_caps(ctx, &vc);
    make_caps(cpu, &cc);
    vf_function_desc d = {.name = "cond_fused", .body = fused_body, .user = &vc, .n_inputs = 1, .n_outputs = 1,
                          .input_signature = &g_sig};
    vf_function *fn = vf_function_create(ctx, &d);
    d.name = "cond_unfused", d.unfused = true;
    vf_function *ufn = vf_function_create(ctx, &d);
    d.name = "cond_cpu", d.unfused = false, d.user = &cc;
    vf_function *cfn = vf_function_create(cpu, &d);
    assert_true(fn && ufn && cfn);
    for (int call = 0; call < 4; call++) {
        int64_t rows = g_rows[call / 2];
        int sign = call % 2 ? -1 : 1;
        float *xs = make_x(rows, sign, 40 + (uint64_t)call);
        vf_scope_begin(ctx);
        vf_scope_begin(cpu);
        int64_t shape[2] = {rows, COLS};
        vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 2, shape, xs), *cx = vf_tensor_from_host(cpu, VF_F32, 2, shape, xs);
        vf_tensor *y = NULL, *uy = NULL, *cy = NULL, *ey = NULL;
        assert_int_equal(vf_function_call(fn, &x, &y), VF_OK);
        int guards = 0, in_cond = cond_kernels(fn, &guards);
        assert_int_equal(vf_function_call(ufn, &x, &uy), VF_OK);
        assert_int_equal(vf_function_call(cfn, &cx, &cy), VF_OK);
        assert_int_equal(fused_body(ctx, &x, &ey, &vc), VF_OK); /* eager */
        float *got = vt_read(y), *un = vt_read(uy), *want = vt_read(cy), *eager = vt_read(ey);
        size_t n = (size_t)(rows * COLS);
        vt_assert_close_f32(got, want, n, 1e-4, 1e-4, "fused guarded cond vs cpu");
        vt_assert_close_f32(got, eager, n, 1e-5, 1e-5, "fused guarded cond vs eager");
        vt_assert_close_f32(got, un, n, 1e-5, 1e-5, "fused guarded cond vs unfused");
        free(got), free(un), free(want), free(eager), free(xs);
        vf_function_stats fs, us;
        assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
        assert_int_equal(vf_function_stats_get(ufn, &us), VF_OK);
        assert_true(fs.planned && us.planned);
        assert_int_equal(fs.submits_per_call, 1);
        if (fs.kernels != TOP_KERNELS + THEN_FUSED + ELSE_FUSED || us.kernels != TOP_UNFUSED + THEN_UNFUSED + ELSE_UNFUSED)
            fail_msg("call %d: %d kernels fused, %d unfused; want %d and %d", call, fs.kernels, us.kernels,
                     TOP_KERNELS + THEN_FUSED + ELSE_FUSED, TOP_UNFUSED + THEN_UNFUSED + ELSE_UNFUSED);
        /* The CPU backend's plan (docs/PROFILING.md): its kernels are the
           execs and passes of both branches (the row group and the else
           chain are one pass each, the matmul and its epilogue one), as
           many dispatches; no submits or barriers. */
        vf_function_stats cs;
        assert_int_equal(vf_function_stats_get(cfn, &cs), VF_OK);
        assert_true(cs.planned);
        assert_int_equal(cs.kernels, CPU_TOP + CPU_THEN + CPU_ELSE);
        assert_int_equal(cs.dispatches_per_call, cs.kernels);
        assert_int_equal(cs.submits_per_call, 0);
        assert_int_equal(cs.barriers_per_call, 0);
        /* the branches' kernels and the one guard covering them all */
        assert_int_equal(guards, 1);
        assert_int_equal(in_cond, 1 + THEN_FUSED + ELSE_FUSED);
        vf_scope_end(ctx);
        vf_scope_end(cpu);
    }
    vf_function_stats fs;
    assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
    assert_int_equal(fs.traces, 1);
    assert_int_equal(fs.plans, 2); /* one per size */
    vf_function_destroy(fn);
    vf_function_destroy(ufn);
    vf_function_destroy(cfn);
    vf_tensor_release(vc.w), vf_tensor_release(vc.b), vf_tensor_release(cc.w), vf_tensor_release(cc.b);
}

/* ---- user kernels in guarded branches ------------------------------------- */

/* twice_sq: two outputs (a plan runs it as parts, one kernel): 2x and x^2 */
static const char twice_sq_glsl[] =
    "layout(local_size_x_id = 0) in;\n"
    "layout(binding = 0) readonly buffer X { float x[]; };\n"
    "layout(binding = 1) writeonly buffer A { float a[]; };\n"
    "layout(binding = 2) writeonly buffer B { float b[]; };\n"
    "layout(push_constant) uniform P { uint nx; uint na; uint nb; };\n"
    "void main() { uint i = gl_GlobalInvocationID.x; if (i < na) { a[i] = 2.0 * x[i]; b[i] = x[i] * x[i]; } }\n";

static vf_status twice_sq_cpu(const vf_kernel_shapes *s, const void *const *in, void *const *out, void *user)
{
    (void)user;
    const float *x = in[0];
    float *a = out[0], *b = out[1];
    for (int64_t i = 0; i < vt_spec_numel(&s->out[0]); i++) a[i] = 2 * x[i], b[i] = x[i] * x[i];
    return VF_OK;
}

typedef struct ukernels {
    vf_kernel *cube, *twice_sq;
} ukernels;

static void make_kernels(vf_context *ctx, ukernels *k)
{
    k->cube = vt_cube_kernel(ctx, true);
    k->twice_sq = vf_kernel_create(ctx, &(vf_kernel_desc){.name = "twice_sq", .glsl = twice_sq_glsl, .n_inputs = 1,
                                                          .n_outputs = 2, .output_shapes = vt_same_shape,
                                                          .cpu = twice_sq_cpu});
    assert_true(k->cube && k->twice_sq);
}

/* then: cube(x) * 0.5 + 1; else: 2x - x^2 (both from twice_sq) */
static vf_status then_cube(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    ukernels *k = user;
    vf_tensor *y = NULL;
    vf_status s = vf_kernel_call(k->cube, 1, in, NULL, &y);
    if (s) return s;
    out[0] = vf_add(ctx, vf_mul(ctx, y, vt_scalar(ctx, 0.5)), vt_scalar(ctx, 1.0));
    return out[0] ? VF_OK : vf_status_get(ctx);
}

static vf_status else_twice_sq(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    ukernels *k = user;
    vf_tensor *ab[2] = {NULL, NULL};
    vf_status s = vf_kernel_call(k->twice_sq, 1, in, NULL, ab);
    if (s) return s;
    out[0] = vf_sub(ctx, ab[0], ab[1]);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* out[0] = cond(mean(x) > 0, then_cube, else_twice_sq)(x) */
static vf_status ukernel_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vt_scalar(ctx, 0.0));
    return vf_cond(ctx, pred, then_cube, else_twice_sq, 1, in, 1, &out[0], user);
}

/* else for the gradient: -cube(x) (both branches are traced, so the tape
   needs a gradient of every kernel in them: twice_sq has none) */
static vf_status else_neg_cube(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    ukernels *k = user;
    vf_tensor *y = NULL;
    vf_status s = vf_kernel_call(k->cube, 1, in, NULL, &y);
    if (s) return s;
    out[0] = vf_neg(ctx, y);
    return out[0] ? VF_OK : vf_status_get(ctx);
}

/* out[0] = cond(pred, then_cube, else_neg_cube)(x), out[1] = d sum(out[0]) / dx */
static vf_status ukernel_grad_body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vf_tape *tp = vf_tape_begin(ctx);
    vf_tensor *pred = vf_greater(ctx, vf_reduce_mean(ctx, in[0], 0, NULL, false), vt_scalar(ctx, 0.0));
    vf_status s = vf_cond(ctx, pred, then_cube, else_neg_cube, 1, in, 1, &out[0], user);
    if (!s) s = vf_tape_gradient(tp, vt_sum(ctx, out[0]), 1, &in[0], &out[1]);
    vf_tape_end(tp);
    return s;
}

/* Reference of ukernel_body (grad false) or ukernel_grad_body (true). */
static void ukernel_ref(const float *x, size_t n, bool pos, bool grad, float *y, float *dy)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        if (!grad) {
            y[i] = (float)(pos ? v * v * v * 0.5 + 1 : 2 * v - v * v);
        } else {
            y[i] = (float)(pos ? 0.5 * v * v * v + 1 : -v * v * v);
            dy[i] = (float)(pos ? 1.5 * v * v : -3 * v * v);
        }
    }
}

/* One function of `body` (n_out outputs) on Vulkan and the CPU backend,
   called with both branches at both sizes: values against eager and the
   reference; on Vulkan planned, one submit, its kernel counts, and the
   same values as the function with unfused = true. */
static void run_ukernel_case(vf_body body, int n_out, bool grad, int vk_kernels)
{
    vf_context *ctxs[2] = {vt_group_vk, vt_group_cpu};
    for (int c = 0; c < 2; c++) {
        vf_context *ctx = ctxs[c];
        ukernels k;
        make_kernels(ctx, &k);
        vf_tensor_spec sig = {.dtype = VF_F32, .rank = 1, .shape = {-1}};
        vf_function_desc d = {.name = grad ? "ukernel_grad" : "ukernel", .body = body, .user = &k, .n_inputs = 1,
                              .n_outputs = n_out, .input_signature = &sig};
        vf_function *fn = vf_function_create(ctx, &d);
        d.unfused = true;
        vf_function *ufn = vf_function_create(ctx, &d);
        assert_true(fn && ufn);
        for (int call = 0; call < 4; call++) {
            int64_t n = g_rows[call / 2];
            bool pos = call % 2 == 0;
            float *xs = make_x(n, pos ? 1 : -1, 60 + (uint64_t)call);
            vf_scope_begin(ctx);
            vf_tensor *x = vf_tensor_from_host(ctx, VF_F32, 1, &n, xs), *y[2] = {NULL, NULL}, *e[2] = {NULL, NULL};
            vf_tensor *u[2] = {NULL, NULL};
            assert_int_equal(vf_function_call(fn, &x, y), VF_OK);
            assert_int_equal(vf_function_call(ufn, &x, u), VF_OK);
            assert_int_equal(body(ctx, &x, e, &k), VF_OK); /* eager */
            float *want = malloc(sizeof *want * (size_t)n * 2);
            assert_non_null(want);
            ukernel_ref(xs, (size_t)n, pos, grad, want, want + n);
            for (int o = 0; o < n_out; o++) {
                float *got = vt_read(y[o]), *eager = vt_read(e[o]), *un = vt_read(u[o]);
                vt_assert_close_f32(got, want + o * n, (size_t)n, 1e-5, 1e-5, o ? "gradient vs reference" : "vs reference");
                vt_assert_close_f32(got, eager, (size_t)n, 1e-6, 1e-6, o ? "gradient vs eager" : "vs eager");
                vt_assert_close_f32(got, un, (size_t)n, 1e-6, 1e-6, o ? "gradient vs unfused" : "vs unfused");
                free(got), free(eager), free(un);
            }
            free(want), free(xs);
            vf_function_stats fs, us;
            assert_int_equal(vf_function_stats_get(fn, &fs), VF_OK);
            assert_int_equal(vf_function_stats_get(ufn, &us), VF_OK);
            if (c == 0) { /* Vulkan: the whole call is one recorded plan */
                if (!fs.planned || !us.planned) fail_msg("call %d: '%s' ran node by node", call, d.name);
                assert_int_equal(fs.submits_per_call, 1);
                assert_int_equal(fs.kernels, vk_kernels);
            } else {
                assert_true(fs.planned); /* the CPU backend's plan runs the kernel's C function */
            }
            vf_scope_end(ctx);
        }
        vf_function_destroy(fn);
        vf_function_destroy(ufn);
        vf_kernel_destroy(k.cube);
        vf_kernel_destroy(k.twice_sq);
    }
}

/* Vulkan kernels: mean, greater; then: cube, mul+add fused, copy; else:
   twice_sq (its two parts one kernel), sub, copy. */
static void test_ukernel_in_branch(void **state)
{
    (void)state;
    run_ukernel_case(ukernel_body, 1, false, 2 + 3 + 3);
}

static void test_ukernel_in_branch_gradient(void **state)
{
    (void)state;
    /* the forward as above (else: cube, neg, copy); the backward, whose
       branches are cheap, is a select: one fused kernel */
    run_ukernel_case(ukernel_grad_body, 2, true, 2 + 3 + 3 + 1);
}

int main(void)
{
    if (!vt_have_vulkan()) return 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_branch_fusion),
        cmocka_unit_test(test_ukernel_in_branch),
        cmocka_unit_test(test_ukernel_in_branch_gradient),
    };
    return cmocka_run_group_tests_name("plan_cond", tests, vt_group_setup_profiling, vt_group_teardown);
}
