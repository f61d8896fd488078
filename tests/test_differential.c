/* The differential harness (in the spirit of ggml's test-backend-ops):
 * seeded random programs (tests/diffprog.c: every op of the API and every
 * composition kind — elementwise DAGs with broadcasting, row groups
 * (softmax, log_softmax, layer norm, cross entropy), matmuls and their
 * epilogues, reductions over one axis or all with and without keepdims,
 * transposes and reshapes, casts through f16/i32/bool, where on bool
 * masks, vf_cond and vf_while_loop) on random shapes of rank 1-3 that
 * include empty dims and long dims, in f32, f16 and i32, each evaluated
 *
 *   CPU eager, CPU traced, Vulkan eager, Vulkan traced fused and Vulkan
 *   traced unfused (vf_function_desc.unfused; traced calls run twice:
 *   trace + plan build, then the recorded plan)
 *
 * and checked against a double-precision reference computed here
 * (tests/refops.c, written from the ops' definitions, sharing no code with
 * either backend) within a forward error bound per value. Gradients: the
 * same programs under a vf_tape, d sum(out_k * cot_k) / d {x0, x1, W}
 * against central finite differences of the double reference; through
 * vf_cond and vf_while_loop; and second order (a tape inside a tape: a
 * Hessian-vector product) against finite differences of those.
 *
 * Time-budgeted (tests/testutil.h vt_seeds): each random test runs seeds
 * 1, 2, ... until its budget (VKFUSE_RANDOM_BUDGET=<s> for every test) or
 * exactly VKFUSE_RANDOM_CASES=<n>, and all of them together stop after
 * VKFUSE_DIFF_TOTAL seconds (default 60, 30 in the sanitizer build; each its minimum of cases);
 * VKFUSE_RANDOM_SEED=<s> starts at s. A failure prints the program, the
 * seed, the mode and the element, and the command line that reruns it
 * alone (VKFUSE_DIFF_TEST=<test> runs only that random test). ctest runs
 * it again under VKFUSE_TEST_LIMITS (tiny dispatch limits: the split
 * paths) and VKFUSE_TEST_CAPS=gpu (the GPU codegen profile). */
#include "diffprog.h"
#include "refops.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_T_IN = DP_N_IN + DP_MAX_OUT + DP_N_SRC, MAX_T_OUT = DP_MAX_OUT + 2 * DP_N_SRC };

typedef enum run_kind { RK_VALUES, RK_GRAD, RK_HVP } run_kind;

typedef struct mode {
    const char *name;
    vf_backend be;
    bool traced, unfused;
} mode;

static const mode modes[] = {
    {"CPU eager", VF_BACKEND_CPU, false, false},
    {"CPU traced", VF_BACKEND_CPU, true, false},
    {"Vulkan eager", VF_BACKEND_VULKAN, false, false},
    {"Vulkan traced fused", VF_BACKEND_VULKAN, true, false},
    {"Vulkan traced unfused", VF_BACKEND_VULKAN, true, true},
};
enum { N_MODES = sizeof modes / sizeof *modes };

static vf_context *ctxs[2]; /* CPU, Vulkan */

static const char *test_name = "";

/* ---- f16 bits, the test's own ------------------------------------------- */

static uint16_t f16_bits(double r) /* r exactly representable (rounded by refops' DU_ROUND_F16) */
{
    uint16_t sign = signbit(r) ? 0x8000 : 0;
    double a = fabs(r);
    if (isinf(a)) return sign | 0x7c00;
    if (a == 0) return sign;
    if (a < ldexp(1, -14)) return sign | (uint16_t)(a / ldexp(1, -24));
    int e;
    frexp(a, &e);
    return sign | (uint16_t)((e - 1 + 15) << 10) | (uint16_t)((a / ldexp(1, e - 1) - 1) * 1024);
}

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return h & 0x8000 ? -v : v;
}

/* ---- data ------------------------------------------------------------------ */

typedef struct host_in {
    vf_dtype dtype;
    int rank;
    int64_t shape[DT_MAX_RANK];
    dt *ref;      /* the values in double (exactly the uploaded ones) */
    void *bytes;  /* packed in dtype */
} host_in;

static void host_make(host_in *h, vf_dtype dtype, int rank, const int64_t *shape, double lo, double hi,
                      uint64_t seed)
{
    h->dtype = dtype, h->rank = rank;
    memcpy(h->shape, shape, sizeof(int64_t) * (size_t)rank);
    h->ref = dt_new(rank, shape);
    size_t n = (size_t)h->ref->n;
    h->bytes = calloc(n ? n : 1, vf_dtype_size(dtype));
    assert_non_null(h->bytes);
    if (dtype == VF_I32 || dtype == VF_BOOL) {
        int32_t *t = malloc((n ? n : 1) * sizeof *t);
        vt_fill_int(t, n, (int32_t)lo, (int32_t)hi, seed);
        for (size_t i = 0; i < n; i++) {
            h->ref->v[i] = dtype == VF_BOOL ? t[i] != 0 : t[i];
            if (dtype == VF_I32) ((int32_t *)h->bytes)[i] = t[i];
            else ((uint8_t *)h->bytes)[i] = t[i] == 3 ? 255 : (uint8_t)t[i]; /* raw bytes 0, 1, 2, 255: true is any non-zero */
        }
        free(t);
        return;
    }
    float *t = malloc((n ? n : 1) * sizeof *t);
    vt_fill_uniform(t, n, (float)lo, (float)hi, seed);
    for (size_t i = 0; i < n; i++) {
        if (dtype == VF_F16) {
            dt one = {.n = 1, .v = &(double){t[i]}};
            dt *r = dt_unary(DU_ROUND_F16, &one);
            h->ref->v[i] = r->v[0];
            ((uint16_t *)h->bytes)[i] = f16_bits(r->v[0]);
            dt_free(r);
        } else {
            h->ref->v[i] = t[i];
            ((float *)h->bytes)[i] = t[i];
        }
    }
    free(t);
}

static void host_free(host_in *h)
{
    dt_free(h->ref);
    free(h->bytes);
    memset(h, 0, sizeof *h);
}

static double elem(const void *p, vf_dtype t, int64_t i)
{
    switch (t) {
    case VF_F32: return ((const float *)p)[i];
    case VF_F16: return f16_value(((const uint16_t *)p)[i]);
    case VF_I32: return ((const int32_t *)p)[i];
    case VF_U32: return ((const uint32_t *)p)[i];
    default: return ((const uint8_t *)p)[i];
    }
}

/* ---- one case -------------------------------------------------------------- */

typedef struct dcase {
    dp_prog p;
    run_kind rk;
    int n_in;                  /* program inputs + cotangents (+ directions) */
    host_in in[MAX_T_IN];
    int n_res;                 /* outputs: values, then grads, then Hessian-vector products */
    dt *want[MAX_T_OUT];
    double tol_abs[MAX_T_OUT]; /* grads: absolute tolerance per result */
} dcase;

typedef struct body_env {
    const dcase *c;
} body_env;

static vf_tensor *dot_sum(vf_context *ctx, int n, vf_tensor *const *a, vf_tensor *const *b)
{
    vf_tensor *t = NULL;
    for (int k = 0; k < n; k++) {
        vf_tensor *s = vf_reduce_sum(ctx, vf_mul(ctx, a[k], b[k]), 0, NULL, false);
        t = t ? vf_add(ctx, t, s) : s;
    }
    return t;
}

/* The body shared by eager runs and traced functions: the program, and
   with a tape its gradients, and with a tape in a tape its HVPs. */
static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const dcase *c = ((const body_env *)user)->c;
    const dp_prog *p = &c->p;
    if (c->rk == RK_VALUES) return dp_build(ctx, p, in, out);
    vf_tape *outer = c->rk == RK_HVP ? vf_tape_begin(ctx) : NULL;
    vf_tape *tp = vf_tape_begin(ctx);
    vf_status s = dp_build(ctx, p, in, out);
    vf_tensor *target = s == VF_OK ? dot_sum(ctx, p->n_out, out, in + DP_N_IN) : NULL;
    if (s == VF_OK && !target) s = vf_status_get(ctx);
    if (s == VF_OK) s = vf_tape_gradient(tp, target, DP_N_SRC, in, out + p->n_out);
    vf_tape_end(tp);
    if (outer) {
        vf_tensor *t2 = s == VF_OK ? dot_sum(ctx, DP_N_SRC, out + p->n_out, in + DP_N_IN + p->n_out) : NULL;
        if (s == VF_OK && !t2) s = vf_status_get(ctx);
        if (s == VF_OK) s = vf_tape_gradient(outer, t2, DP_N_SRC, in, out + p->n_out + DP_N_SRC);
        vf_tape_end(outer);
    }
    return s;
}

/* T(inputs) = sum_k sum(ref_out_k * cot_k) in double. */
static double ref_target(const dcase *c, dt *const *in)
{
    dt *out[DP_MAX_OUT];
    dp_ref(&c->p, in, out);
    double t = 0;
    for (int k = 0; k < c->p.n_out; k++) {
        const dt *cot = c->in[DP_N_IN + k].ref;
        for (int64_t i = 0; i < out[k]->n; i++) t += out[k]->v[i] * cot->v[i];
        dt_free(out[k]);
    }
    return t;
}

/* Central differences of T over every element of x0, x1 and W into g[3]. */
static void ref_grad(const dcase *c, dt *const *in, dt **g)
{
    dt *x[DP_N_IN];
    for (int i = 0; i < DP_N_IN; i++) x[i] = dt_copy(in[i]);
    for (int j = 0; j < DP_N_SRC; j++) {
        g[j] = dt_new(x[j]->rank, x[j]->shape);
        for (int64_t i = 0; i < x[j]->n; i++) {
            double x0 = x[j]->v[i], h = 1e-5 * (1 + fabs(x0));
            x[j]->v[i] = x0 + h;
            double tp = ref_target(c, x);
            x[j]->v[i] = x0 - h;
            double tm = ref_target(c, x);
            x[j]->v[i] = x0;
            g[j]->v[i] = (tp - tm) / (2 * h);
        }
    }
    for (int i = 0; i < DP_N_IN; i++) dt_free(x[i]);
}

static double max_abs(const dt *x)
{
    double m = 0;
    for (int64_t i = 0; i < x->n; i++) m = fmax(m, fabs(x->v[i]));
    return m;
}

static void case_make(dcase *c, uint64_t seed, vf_dtype dtype, dp_kind kind)
{
    memset(c, 0, sizeof *c);
    dp_generate(&c->p, seed, dtype, kind);
    const dp_prog *p = &c->p;
    c->rk = kind == DP_VALUES ? RK_VALUES : kind == DP_HVP ? RK_HVP : RK_GRAD;
    int64_t s[DT_MAX_RANK];
    bool fl = dtype != VF_I32;
    int r = dp_in_shape(p, 0, s);
    host_make(&c->in[0], dtype, r, s, fl ? -2 : -3, fl ? 2 : 3, seed * 11 + 1);
    r = dp_in_shape(p, 1, s);
    host_make(&c->in[1], dtype, r, s, fl ? -2 : -3, fl ? 2 : 3, seed * 11 + 2);
    r = dp_in_shape(p, 2, s);
    host_make(&c->in[2], dtype, r, s, -1, 1, seed * 11 + 3);
    r = dp_in_shape(p, 3, s);
    host_make(&c->in[3], VF_BOOL, r, s, 0, seed % 2 ? 3 : 1, seed * 11 + 4); /* odd seeds: bytes other than 0/1 */
    r = dp_in_shape(p, 4, s);
    int64_t classes = p->dim[p->rank - 1];
    host_make(&c->in[4], VF_I32, r, s, 0, classes > 0 ? (double)classes - 1 : 0, seed * 11 + 5);
    c->n_in = DP_N_IN;
    dt *refin[DP_N_IN];
    for (int i = 0; i < DP_N_IN; i++) refin[i] = c->in[i].ref;
    dp_ref(p, refin, c->want);
    c->n_res = p->n_out;
    if (c->rk == RK_VALUES) return;
    for (int k = 0; k < p->n_out; k++) {
        const dt *o = c->want[k];
        host_make(&c->in[c->n_in++], dtype, o->rank, o->shape, -1, 1, seed * 11 + 6 + (uint64_t)k);
    }
    ref_grad(c, refin, c->want + c->n_res);
    for (int j = 0; j < DP_N_SRC; j++) c->tol_abs[c->n_res + j] = 2e-3 * (1 + max_abs(c->want[c->n_res + j]));
    c->n_res += DP_N_SRC;
    if (c->rk != RK_HVP) return;
    /* H v = (G(x + h v) - G(x - h v)) / 2h, G the finite-difference gradient */
    for (int j = 0; j < DP_N_SRC; j++) {
        const dt *x = c->in[j].ref;
        host_make(&c->in[c->n_in++], dtype, x->rank, x->shape, -1, 1, seed * 11 + 9 + (uint64_t)j);
    }
    const double h = 1e-3;
    dt *xp[DP_N_IN], *xm[DP_N_IN], *gp[DP_N_SRC], *gm[DP_N_SRC];
    for (int i = 0; i < DP_N_IN; i++) {
        xp[i] = dt_copy(refin[i]), xm[i] = dt_copy(refin[i]);
        if (i >= DP_N_SRC) continue;
        const dt *v = c->in[DP_N_IN + p->n_out + i].ref;
        for (int64_t e = 0; e < xp[i]->n; e++) xp[i]->v[e] += h * v->v[e], xm[i]->v[e] -= h * v->v[e];
    }
    ref_grad(c, xp, gp);
    ref_grad(c, xm, gm);
    for (int j = 0; j < DP_N_SRC; j++) {
        dt *hv = dt_new(gp[j]->rank, gp[j]->shape);
        for (int64_t e = 0; e < hv->n; e++) hv->v[e] = (gp[j]->v[e] - gm[j]->v[e]) / (2 * h);
        c->want[c->n_res + j] = hv;
        c->tol_abs[c->n_res + j] = 5e-3 * (1 + max_abs(hv));
        dt_free(gp[j]), dt_free(gm[j]);
    }
    c->n_res += DP_N_SRC;
    for (int i = 0; i < DP_N_IN; i++) dt_free(xp[i]), dt_free(xm[i]);
}

static void case_free(dcase *c)
{
    for (int i = 0; i < c->n_in; i++) host_free(&c->in[i]);
    for (int k = 0; k < c->n_res; k++) dt_free(c->want[k]);
}

static const char *result_name(const dcase *c, int k, char *buf, size_t n)
{
    static const char *const src[] = {"x0", "x1", "W"};
    if (k < c->p.n_out) snprintf(buf, n, "output %d (v%d)", k, c->p.out[k]);
    else if (k < c->p.n_out + DP_N_SRC) snprintf(buf, n, "gradient d/d%s", src[k - c->p.n_out]);
    else snprintf(buf, n, "Hessian-vector product d/d%s", src[k - c->p.n_out - DP_N_SRC]);
    return buf;
}

static void fail_case(const dcase *c, const mode *m, int call, const char *why)
{
    dp_print(&c->p);
    fprintf(stderr, "%s (%s, call %d): %s\n", m->name, test_name, call, why);
    fprintf(stderr, "rerun alone: VKFUSE_RANDOM_SEED=%llu VKFUSE_RANDOM_CASES=1 VKFUSE_DIFF_TEST=%s "
            "tests/test_differential   (VKFUSE_CHECK=1 names a wrong kernel)\n",
            (unsigned long long)c->p.seed, test_name);
    fail_msg("seed %llu: %s: %s", (unsigned long long)c->p.seed, m->name, why);
}

/* One result against the reference. */
static void compare(const dcase *c, const mode *m, int call, int k, vf_tensor *t)
{
    char name[96], why[512];
    const dt *w = c->want[k];
    vf_dtype dtype = vf_tensor_dtype(t);
    bool shape_ok = vf_tensor_rank(t) == w->rank;
    for (int i = 0; shape_ok && i < w->rank; i++) shape_ok = vf_tensor_dim(t, i) == w->shape[i];
    if (!shape_ok) {
        snprintf(why, sizeof why, "%s has rank %d, dim 0 %lld; the reference rank %d", result_name(c, k, name, sizeof name),
                 vf_tensor_rank(t), (long long)vf_tensor_dim(t, 0), w->rank);
        fail_case(c, m, call, why);
    }
    void *got = vt_read(t);
    bool is_grad = k >= c->p.n_out;
    double err = is_grad ? 0 : c->p.err[c->p.out[k]];
    bool f16 = dtype == VF_F16, exact = dtype == VF_I32;
    for (int64_t i = 0; i < w->n; i++) {
        double g = elem(got, dtype, i), r = w->v[i], tol;
        if (is_grad) tol = c->tol_abs[k] + 2e-3 * fabs(r);
        else if (exact) tol = 0;
        else tol = 4 * err + (f16 ? 2e-3 : 1e-6) + (f16 ? 2e-3 : 4e-6) * fabs(r);
        bool ok = isnan(r) ? isnan(g) : !isnan(g) && fabs(g - r) <= tol;
        if (ok) continue;
        snprintf(why, sizeof why, "%s element %lld of %lld: got %.9g, reference %.9g, allowed error %.3g",
                 result_name(c, k, name, sizeof name), (long long)i, (long long)w->n, g, r, tol);
        free(got);
        fail_case(c, m, call, why);
    }
    free(got);
}

static void run_mode(const dcase *c, const mode *m)
{
    vf_context *ctx = ctxs[m->be == VF_BACKEND_VULKAN];
    body_env env = {c};
    vf_scope_begin(ctx);
    vf_tensor *in[MAX_T_IN], *out[MAX_T_OUT] = {0};
    for (int i = 0; i < c->n_in; i++) {
        const host_in *h = &c->in[i];
        in[i] = vf_tensor_from_host(ctx, h->dtype, h->rank, h->shape, h->bytes);
    }
    char why[1024];
    if (!m->traced) {
        vf_status s = vf_status_get(ctx);
        if (s == VF_OK) s = body(ctx, in, out, &env);
        if (s != VF_OK) {
            snprintf(why, sizeof why, "%s: %s", vf_status_name(s), vf_error_message(ctx));
            vf_error_clear(ctx);
            vf_scope_end(ctx);
            fail_case(c, m, 0, why);
        }
        for (int k = 0; k < c->n_res; k++) compare(c, m, 0, k, out[k]);
        vf_scope_end(ctx);
        return;
    }
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "differential", .body = body, .user = &env,
        .n_inputs = c->n_in, .n_outputs = c->n_res, .unfused = m->unfused});
    assert_non_null(fn);
    for (int call = 1; call <= 2; call++) {
        vf_status s = vf_function_call(fn, in, out);
        if (s != VF_OK) {
            snprintf(why, sizeof why, "vf_function_call: %s: %s", vf_status_name(s), vf_error_message(ctx));
            vf_error_clear(ctx);
            vf_function_destroy(fn);
            vf_scope_end(ctx);
            fail_case(c, m, call, why);
        }
        for (int k = 0; k < c->n_res; k++) compare(c, m, call, k, out[k]);
    }
    vf_function_destroy(fn);
    vf_scope_end(ctx);
}

static void run_case(uint64_t seed, vf_dtype dtype, dp_kind kind)
{
    dcase c;
    case_make(&c, seed, dtype, kind);
    for (int m = 0; m < N_MODES; m++) {
        if (modes[m].be == VF_BACKEND_VULKAN && !ctxs[1]) continue;
        run_mode(&c, &modes[m]);
    }
    case_free(&c);
}

static void run_random(const char *name, vf_dtype dtype, dp_kind kind, long max_cases, double budget_s,
                       long min_cases)
{
    test_name = name;
    const char *only = getenv("VKFUSE_DIFF_TEST");
    if (only && *only && strcmp(only, name) != 0) return;
    /* the whole binary stays within VKFUSE_DIFF_TOTAL seconds (default 60, halved in the sanitizer build):
       a test whose turn comes late gets what is left, and its minimum */
    static double deadline;
    if (!deadline) {
        long total = vt_env_long("VKFUSE_DIFF_TOTAL", -1);
        deadline = vt_now() + (total >= 0 ? (double)total : vt_budget_default(60));
    }
    vt_seeds seeds;
    vt_seeds_init(&seeds, max_cases, min_cases, budget_s);
    if (!seeds.fixed && seeds.budget_s > deadline - vt_now()) {
        seeds.budget_s = deadline - vt_now(); /* its minimum of cases still runs */
    }
    uint64_t seed;
    while (vt_seeds_next(&seeds, &seed)) run_case(seed, dtype, kind);
    vt_seeds_report(&seeds, name);
}

static int setup(void **state)
{
    (void)state;
    ctxs[0] = vt_context(VF_BACKEND_CPU);
    ctxs[1] = vt_have_vulkan() ? vt_context(VF_BACKEND_VULKAN) : NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    vt_context_done(ctxs[0]);
    if (ctxs[1]) vt_context_done(ctxs[1]);
    return 0;
}

/* ---- the tests ------------------------------------------------------------- */

static void test_values_f32(void **state) { (void)state, run_random("test_values_f32", VF_F32, DP_VALUES, 400, 20, 2); }
static void test_values_f16(void **state) { (void)state, run_random("test_values_f16", VF_F16, DP_VALUES, 200, 8, 1); }
static void test_values_i32(void **state) { (void)state, run_random("test_values_i32", VF_I32, DP_VALUES, 200, 8, 3); }
static void test_grad(void **state) { (void)state, run_random("test_grad", VF_F32, DP_GRAD, 200, 10, 2); }
/* Gradients through traced vf_cond and vf_while_loop (issue row 1). */
static void test_grad_control_flow(void **state)
{
    (void)state, run_random("test_grad_control_flow", VF_F32, DP_GRAD_CF, 100, 5, 3);
}
/* A tape inside a tape: Hessian-vector products (issue row 3). */
static void test_grad_second_order(void **state)
{
    (void)state, run_random("test_grad_second_order", VF_F32, DP_HVP, 100, 5, 4);
}

/* The reference itself, on values worked out by hand. */
static void test_reference(void **state)
{
    (void)state;
    dt *a = dt_new(2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) a->v[i] = i - 2; /* [[-2 -1 0] [1 2 3]] */
    dt *s0 = dt_reduce(DR_SUM, a, 0, false), *m1 = dt_reduce(DR_MAX, a, 1, true), *am = dt_argmax(a, 0);
    assert_true(s0->rank == 1 && s0->v[0] == -1 && s0->v[1] == 1 && s0->v[2] == 3);
    assert_true(m1->rank == 2 && m1->shape[1] == 1 && m1->v[0] == 0 && m1->v[1] == 3);
    assert_true(am->v[0] == 1 && am->v[2] == 1);
    dt *t = dt_transpose(a, (int[]){1, 0});
    assert_true(t->shape[0] == 3 && t->v[1] == 1 && t->v[2] == -1);
    dt *w = dt_new(2, (int64_t[]){3, 1});
    w->v[0] = 1, w->v[1] = 10, w->v[2] = 100;
    dt *mm = dt_matmul(a, w, false);
    assert_true(mm->shape[0] == 2 && mm->shape[1] == 1 && mm->v[0] == -12 && mm->v[1] == 321);
    dt *sm = dt_softmax(a, 1, false);
    assert_true(fabs(sm->v[2] - 1 / (1 + exp(-1) + exp(-2))) < 1e-15);
    dt *f = dt_new(1, (int64_t[]){4});
    f->v[0] = 1 + ldexp(1, -11), f->v[1] = 1 + 3 * ldexp(1, -11), f->v[2] = 65520, f->v[3] = ldexp(3, -26);
    dt *h = dt_unary(DU_ROUND_F16, f);
    assert_true(h->v[0] == 1 && h->v[1] == 1 + ldexp(1, -9) && isinf(h->v[2]) && h->v[3] == ldexp(1, -24));
    assert_int_equal(f16_bits(1.0), 0x3c00);
    assert_true(f16_value(0x3c00) == 1 && f16_value(0x0001) == ldexp(1, -24) && f16_value(0xc000) == -2);
    dt *q = dt_new(1, (int64_t[]){2}), *d = dt_new(1, (int64_t[]){2});
    q->v[0] = -7, q->v[1] = 7, d->v[0] = 2, d->v[1] = 0;
    dt *qd = dt_binary(DB_IDIV, q, d);
    assert_true(qd->v[0] == -3 && qd->v[1] == 0);
    dt *free_list[] = {a, s0, m1, am, t, w, mm, sm, f, h, q, d, qd};
    for (size_t i = 0; i < sizeof free_list / sizeof *free_list; i++) dt_free(free_list[i]);
}

/* The generator: deterministic, every op, empty and long dims, every mask. */
static void test_generator(void **state)
{
    (void)state;
    static dp_prog a, b;
    int ops[P_N_OPS + 2] = {0}, empty = 0, longdim = 0, bcast = 0, iops[P_N_OPS + 2] = {0};
    for (uint64_t s = 1; s <= 600; s++) {
        dp_generate(&a, s, VF_F32, DP_VALUES);
        dp_generate(&b, s, VF_F32, DP_VALUES);
        assert_memory_equal(&a, &b, sizeof a);
        for (int i = 0; i < a.n_ins; i++) ops[a.ins[i].o]++;
        for (int i = 0; i < a.rank; i++) empty += a.dim[i] == 0, longdim += a.dim[i] > 256;
        bcast += a.in1_mask != (1u << a.rank) - 1;
        dp_generate(&a, s, VF_I32, DP_VALUES);
        for (int i = 0; i < a.n_ins; i++) iops[a.ins[i].o]++;
        dp_generate(&a, s, VF_F32, DP_GRAD_CF);
        bool cond = false, loop = false;
        for (int i = 0; i < a.n_ins; i++) cond |= a.ins[i].o == P_COND, loop |= a.ins[i].o == P_WHILE;
        assert_true(cond && loop);
        dp_generate(&a, s, VF_F32, DP_HVP);
        for (int i = 0; i < a.n_ins; i++) assert_true(a.ins[i].o != P_RELU && a.ins[i].o != P_MAX);
    }
    for (int o = 0; o < P_N_OPS; o++) {
        if (!ops[o]) fprintf(stderr, "op %s never generated\n", dp_op_name[o]);
        assert_true(ops[o] > 0);
    }
    static const dp_op int_ops[] = {P_NEG, P_ABS, P_RELU, P_SQUARE, P_ADD, P_SUB, P_MUL, P_DIVS, P_MAX, P_MIN, P_CMP, P_MASKW,
                                    P_RED, P_TRANSPOSE, P_RESHAPE, P_ARGMAX, P_CAST_INT, P_CAST_BOOL, P_COND, P_WHILE};
    for (size_t i = 0; i < sizeof int_ops / sizeof *int_ops; i++) assert_true(iops[int_ops[i]] > 0);
    assert_true(empty > 0 && longdim > 0 && bcast > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference),
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_values_f32),
        cmocka_unit_test(test_values_f16),
        cmocka_unit_test(test_values_i32),
        cmocka_unit_test(test_grad),
        cmocka_unit_test(test_grad_control_flow),
        cmocka_unit_test(test_grad_second_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
