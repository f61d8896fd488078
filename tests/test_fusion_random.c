/* Randomized graphs through the compiled path: a seeded generator of DAGs
 * (elementwise unary and binary ops with broadcasting, where, last-axis,
 * first-axis and all-axes reductions, softmax, matmuls, reshape and
 * transpose round trips, one to three outputs, shapes with size-1 and odd
 * dims) traced as vf_functions and run on Vulkan fused, on Vulkan unfused
 * (vf_function_desc.unfused, what VKFUSE_FUSION=0 gives) and on the CPU backend.
 * Every output must match the CPU backend within a tolerance derived from
 * the ops on its path, and every recorded plan's arena must be within
 * 1.10x of the liveness lower bound of its intervals.
 *
 * Time-budgeted (tests/testutil.h vt_seeds): up to 300 cases or 20 s (at least 3),
 * whichever comes first (VKFUSE_RANDOM_BUDGET=<s> changes the budget);
 * VKFUSE_RANDOM_CASES=<n> runs exactly n cases, VKFUSE_RANDOM_SEED=<s>
 * starts at seed s (case i uses seed s + i). A failure prints the seed,
 * the generated program, the optimised graph and the first differing
 * output element; rerun that seed with VKFUSE_CHECK=1 to name the kernel
 * (docs/TESTING.md). */
#include "testutil.h"

#include "function/function.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_INSTR = 24,
    MAX_VALS = 3 + 2 * MAX_INSTR + 8, /* inputs, then up to two per instruction (magnitude caps) */
    MAX_OUT = 3,
};

typedef enum op {
    /* unary */
    U_NEG, U_ABS, U_RELU, U_TANH, U_SIGMOID, U_SIN, U_GELU, U_EXPT, U_SQRTA, U_LOG1A,
    /* binary, broadcasting */
    B_ADD, B_SUB, B_MUL, B_MAX, B_MIN, B_DIV, B_WHERE,
    /* reductions (keepdims) and rows */
    R_MEAN_LAST, R_MAX_LAST, R_MEAN_FIRST, R_MIN_ALL, R_SUM_LAST, SOFTMAX_LAST,
    /* others */
    MATMUL, TRANSPOSE, RESHAPE,
    N_OPS,
    CAP /* tanh inserted when magnitudes grow */
} op;

static const char *const op_name[] = {
    "neg", "abs", "relu", "tanh", "sigmoid", "sin", "gelu", "exp(tanh)", "sqrt(abs+0.25)", "log(abs+1)",
    "add", "sub", "mul", "maximum", "minimum", "div(a, abs b + 1)", "where(a > b, a, b)",
    "mean(axis 1)", "max(axis 1)", "mean(axis 0)", "min(all)", "sum(axis 1)/C", "softmax(axis 1)",
    "matmul(a, W)/C", "transpose, neg, transpose", "reshape [R*C], sigmoid, reshape [R, C]", "", "tanh (cap)"};

typedef struct instr {
    op o;
    int a, b;        /* value ids */
} instr;

typedef struct vshape {
    bool full_r, full_c; /* dim 0 is R (else 1), dim 1 is C (else 1) */
} vshape;

typedef struct program {
    uint64_t seed;
    int64_t R, C;
    int n_in;            /* inputs: 0 and 1 broadcast shapes of [R, C], 2: W [C, C] */
    vshape in_shape[3];
    instr ins[2 * MAX_INSTR + 8];
    int n_ins;           /* value id of ins[i]: n_in + i */
    int out[MAX_OUT], n_out;
    double mag[MAX_VALS], err[MAX_VALS]; /* per value: |value| bound and error bound */
    vshape shape[MAX_VALS];
    bool uses_w;
} program;

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int rng_int(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

static const int64_t dims[] = {1, 2, 3, 5, 7, 8, 13, 31, 33, 64, 97, 130};

#define F32_EPS 6e-8

/* Appends instruction (o, a, b) and sets the magnitude and error bounds of
   its value from its operands' (a rough forward error analysis: the
   operands' errors times the op's Lipschitz constant on the bounded
   range, plus the op's own rounding as docs/TESTING.md's table allows). */
static int emit(program *p, op o, int a, int b)
{
    int v = p->n_in + p->n_ins;
    p->ins[p->n_ins++] = (instr){o, a, b};
    double ma = p->mag[a], ea = p->err[a], mb = b >= 0 ? p->mag[b] : 0, eb = b >= 0 ? p->err[b] : 0;
    double m = ma, e = ea;
    vshape sh = p->shape[a];
    double n_c = (double)(sh.full_c ? p->C : 1), n_r = (double)(sh.full_r ? p->R : 1);
    const double tr = 1e-6 + 2e-6; /* transcendental: atol + rtol at |x| <= 1 */
    switch (o) {
    case U_NEG: case U_ABS: case U_RELU: break;
    case U_TANH: case CAP: m = ma < 1 ? ma : 1, e = ea + tr; break;
    case U_SIGMOID: m = 1, e = 0.25 * ea + tr; break;
    case U_SIN: m = ma < 1 ? ma : 1, e = ea + tr; break;
    case U_GELU: m = ma + 0.2, e = 1.13 * ea + tr * (1 + ma); break;
    case U_EXPT: m = 2.72, e = 2.72 * (ea + tr); break;
    case U_SQRTA: m = sqrt(ma + 0.25), e = ea + 1e-6 + 3e-7 * m; break;
    case U_LOG1A: m = log(ma + 1), e = ea + tr * (1 + m); break;
    case B_ADD: case B_SUB: m = ma + mb, e = ea + eb + F32_EPS * m; break;
    case B_MUL: m = ma * mb, e = ma * eb + mb * ea + F32_EPS * m; break;
    case B_MAX: case B_MIN: case B_WHERE: m = ma > mb ? ma : mb, e = ea > eb ? ea : eb; break;
    case B_DIV: m = ma, e = ea + ma * eb + 3e-7 * m; break;
    case R_MEAN_LAST: case R_SUM_LAST: e = ea + (8e-6 * sqrt(n_c) + 1e-5) * ma; sh.full_c = false; break;
    case R_MAX_LAST: sh.full_c = false; break;
    case R_MEAN_FIRST: e = ea + (8e-6 * sqrt(n_r) + 1e-5) * ma; sh.full_r = false; break;
    case R_MIN_ALL: sh.full_r = sh.full_c = false; break;
    case SOFTMAX_LAST: m = 1, e = 2 * ea + 1e-6 + 1e-5; break;
    case MATMUL: e = ea + (1.6e-4 * sqrt((double)p->C) + 1e-5) * ma; sh.full_c = true; break;
    case TRANSPOSE: break;
    case RESHAPE: m = 1, e = 0.25 * ea + tr; break;
    default: break;
    }
    if (b >= 0) sh.full_r = sh.full_r || p->shape[b].full_r, sh.full_c = sh.full_c || p->shape[b].full_c;
    p->mag[v] = m;
    p->err[v] = e;
    p->shape[v] = sh;
    return v;
}

/* A value id other than W (2): one of the last three, or any. */
static int pick(uint64_t *s, int nv, bool recent)
{
    if (recent && nv > 3) {
        int lo = nv - 3 > 3 ? nv - 3 : 3;
        return lo + rng_int(s, nv - lo);
    }
    int v = rng_int(s, nv - 1);
    return v >= 2 ? v + 1 : v;
}

static void generate(program *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->seed = seed;
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int i = 0; i < 4; i++) rng_next(&s);
    p->R = dims[rng_int(&s, (int)(sizeof dims / sizeof *dims))];
    p->C = dims[rng_int(&s, (int)(sizeof dims / sizeof *dims))];
    p->n_in = 3;
    p->in_shape[0] = (vshape){true, true};
    int k = rng_int(&s, 4); /* the second input: full, a row, a column or a scalar-like [1, 1] */
    p->in_shape[1] = (vshape){k == 0 || k == 2, k == 0 || k == 1};
    p->in_shape[2] = (vshape){true, true}; /* W: [C, C] */
    for (int i = 0; i < 2; i++) p->mag[i] = 2, p->err[i] = 0, p->shape[i] = p->in_shape[i];
    int n = 3 + rng_int(&s, MAX_INSTR - 3);
    for (int i = 0; i < n; i++) {
        int nv = p->n_in + p->n_ins;
        /* operands: mostly recent values (deep chains), sometimes any; never W */
        int a = pick(&s, nv, rng_int(&s, 3) != 0), b = pick(&s, nv, rng_int(&s, 2) != 0);
        op o = (op)rng_int(&s, N_OPS);
        vshape sa = p->shape[a];
        if ((o == MATMUL || o == TRANSPOSE) && !(sa.full_r && sa.full_c)) o = U_TANH;
        if (o == TRANSPOSE && p->R == p->C) o = U_NEG; /* keep it a real reshuffle of a non-square */
        if (o == MATMUL) p->uses_w = true;
        int v = emit(p, o, a, o >= B_ADD && o <= B_WHERE ? b : (o == MATMUL ? 2 : -1));
        if (p->mag[v] > 4) emit(p, CAP, v, -1);
    }
    /* outputs: the last value and up to two more distinct op results */
    int last = p->n_in + p->n_ins - 1;
    p->out[p->n_out++] = last;
    int extra = rng_int(&s, MAX_OUT);
    for (int i = 0; i < extra; i++) {
        int v = p->n_in + rng_int(&s, p->n_ins);
        bool dup = false;
        for (int j = 0; j < p->n_out; j++) dup = dup || p->out[j] == v;
        if (!dup) p->out[p->n_out++] = v;
    }
}

static void print_program(const program *p)
{
    fprintf(stderr, "seed %llu: R=%lld C=%lld, in0 [R, C], in1 [%s, %s], W [C, C]\n", (unsigned long long)p->seed,
            (long long)p->R, (long long)p->C, p->in_shape[1].full_r ? "R" : "1", p->in_shape[1].full_c ? "C" : "1");
    for (int i = 0; i < p->n_ins; i++) {
        const instr *in = &p->ins[i];
        int v = p->n_in + i;
        fprintf(stderr, "  v%d [%s, %s] = %s(v%d%s", v, p->shape[v].full_r ? "R" : "1", p->shape[v].full_c ? "C" : "1",
                op_name[in->o], in->a, in->b >= 0 ? ", v" : "");
        if (in->b >= 0) fprintf(stderr, "%d", in->b);
        fprintf(stderr, ")   |v| <= %.3g, err <= %.3g\n", p->mag[v], p->err[v]);
    }
    fprintf(stderr, "  outputs:");
    for (int k = 0; k < p->n_out; k++) fprintf(stderr, " v%d", p->out[k]);
    fprintf(stderr, "\n");
}

/* What the body needs: the program and the captured scalars of one context. */
typedef struct body_env {
    const program *p;
    vf_tensor *half, *quarter, *one, *inv_c;
} body_env;

static vf_status body(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    const body_env *env = user;
    const program *p = env->p;
    vf_tensor *v[MAX_VALS] = {in[0], in[1], in[2]};
    for (int i = 0; i < p->n_ins; i++) {
        const instr *s = &p->ins[i];
        vf_tensor *a = v[s->a], *b = s->b >= 0 ? v[s->b] : NULL, *r = NULL;
        switch (s->o) {
        case U_NEG: r = vf_neg(ctx, a); break;
        case U_ABS: r = vf_abs(ctx, a); break;
        case U_RELU: r = vf_relu(ctx, a); break;
        case U_TANH: case CAP: r = vf_tanh(ctx, a); break;
        case U_SIGMOID: r = vf_sigmoid(ctx, a); break;
        case U_SIN: r = vf_sin(ctx, a); break;
        case U_GELU: r = vf_gelu(ctx, a); break;
        case U_EXPT: r = vf_exp(ctx, vf_tanh(ctx, a)); break;
        case U_SQRTA: r = vf_sqrt(ctx, vf_add(ctx, vf_abs(ctx, a), env->quarter)); break;
        case U_LOG1A: r = vf_log(ctx, vf_add(ctx, vf_abs(ctx, a), env->one)); break;
        case B_ADD: r = vf_add(ctx, a, b); break;
        case B_SUB: r = vf_sub(ctx, a, b); break;
        case B_MUL: r = vf_mul(ctx, a, b); break;
        case B_MAX: r = vf_maximum(ctx, a, b); break;
        case B_MIN: r = vf_minimum(ctx, a, b); break;
        case B_DIV: r = vf_div(ctx, a, vf_add(ctx, vf_abs(ctx, b), env->one)); break;
        case B_WHERE: r = vf_where(ctx, vf_greater(ctx, a, b), a, b); break;
        case R_MEAN_LAST: r = vf_reduce_mean(ctx, a, 1, (int[]){1}, true); break;
        case R_MAX_LAST: r = vf_reduce_max(ctx, a, 1, (int[]){1}, true); break;
        case R_MEAN_FIRST: r = vf_reduce_mean(ctx, a, 1, (int[]){0}, true); break;
        case R_MIN_ALL: r = vf_reduce_min(ctx, a, 0, NULL, true); break;
        case R_SUM_LAST: {
            vf_tensor *inv = vf_tensor_dim(a, 1) == p->C ? env->inv_c : env->one;
            r = vf_mul(ctx, vf_reduce_sum(ctx, a, 1, (int[]){1}, true), inv);
            break;
        }
        case SOFTMAX_LAST: r = vf_softmax(ctx, a, 1); break;
        case MATMUL: r = vf_mul(ctx, vf_matmul(ctx, a, b), env->inv_c); break;
        case TRANSPOSE: r = vf_transpose(ctx, vf_neg(ctx, vf_transpose(ctx, a, NULL)), NULL); break;
        case RESHAPE: {
            int64_t r0 = vf_tensor_dim(a, 0), c0 = vf_tensor_dim(a, 1);
            vf_tensor *flat = vf_reshape(ctx, a, 1, (int64_t[]){r0 * c0});
            r = vf_reshape(ctx, vf_sigmoid(ctx, flat), 2, (int64_t[]){r0, c0});
            break;
        }
        default: break;
        }
        if (!r) return vf_status_get(ctx);
        v[p->n_in + i] = r;
    }
    for (int k = 0; k < p->n_out; k++) out[k] = v[p->out[k]];
    return VF_OK;
}

typedef struct run_result {
    float *out[MAX_OUT];
    int64_t numel[MAX_OUT];
    vf_function_stats fs;
    vf_fplan_stats ps;
    bool have_ps;
    char *graph;
} run_result;

static void result_free(run_result *r)
{
    for (int k = 0; k < MAX_OUT; k++) free(r->out[k]);
    free(r->graph);
    memset(r, 0, sizeof *r);
}

static const float half = 0.5f, quarter = 0.25f, one = 1.0f;

/* Runs p on ctx twice (the first call traces and builds the plan, the
   second runs the recorded plan) with fusion on or off. */
static void run_program(vf_context *ctx, const program *p, const float *const x[3], bool fuse, run_result *res)
{
    memset(res, 0, sizeof *res);
    vf_scope_begin(ctx);
    float inv_c = 1.0f / (float)p->C;
    body_env env = {p, vf_tensor_from_host(ctx, VF_F32, 0, NULL, &half),
                    vf_tensor_from_host(ctx, VF_F32, 0, NULL, &quarter),
                    vf_tensor_from_host(ctx, VF_F32, 0, NULL, &one), vf_tensor_from_host(ctx, VF_F32, 0, NULL, &inv_c)};
    int64_t s1[2] = {p->in_shape[1].full_r ? p->R : 1, p->in_shape[1].full_c ? p->C : 1};
    vf_tensor *in[3] = {vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){p->R, p->C}, x[0]),
                        vf_tensor_from_host(ctx, VF_F32, 2, s1, x[1]),
                        vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){p->C, p->C}, x[2])};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "random", .body = body, .user = &env,
                                                                  .n_inputs = 3, .n_outputs = p->n_out,
                                                                  .unfused = !fuse});
    assert_non_null(fn);
    vf_tensor *out[MAX_OUT] = {NULL};
    vf_status s = vf_function_call(fn, in, out);
    if (s == VF_OK) s = vf_function_call(fn, in, out);
    if (s != VF_OK) {
        print_program(p);
        fprintf(stderr, "vf_function_call: %s: %s\n", vf_status_name(s), vf_error_message(ctx));
        fail_msg("seed %llu: the call failed", (unsigned long long)p->seed);
    }
    for (int k = 0; k < p->n_out; k++) {
        res->out[k] = vt_read(out[k]);
        res->numel[k] = vf_tensor_numel(out[k]);
    }
    assert_int_equal(vf_function_stats_get(fn, &res->fs), VF_OK);
    res->have_ps = vf_function_plan_stats(fn, &res->ps);
    res->graph = vf_function_graph_text(fn);
    vf_function_destroy(fn);
    vf_scope_end(ctx);
}

static bool close_enough(float got, float want, double err)
{
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got);
    double tol = 4 * err + 1e-6 + 4e-6 * fabs((double)want);
    return fabs((double)got - (double)want) <= tol;
}

/* Every output of got against the CPU's; prints everything on a mismatch. */
static void compare(const program *p, const run_result *got, const run_result *cpu, const char *what)
{
    for (int k = 0; k < p->n_out; k++) {
        assert_int_equal(got->numel[k], cpu->numel[k]);
        double err = p->err[p->out[k]];
        for (int64_t i = 0; i < cpu->numel[k]; i++) {
            if (close_enough(got->out[k][i], cpu->out[k][i], err)) continue;
            print_program(p);
            fprintf(stderr, "%s: output %d (v%d) element %lld: got %.9g, CPU %.9g, allowed error %.3g\n", what, k,
                    p->out[k], (long long)i, got->out[k][i], cpu->out[k][i], 4 * err + 1e-6 + 4e-6 * fabs(cpu->out[k][i]));
            fprintf(stderr, "optimised graph:\n%s\n(rerun with VKFUSE_RANDOM_SEED=%llu VKFUSE_RANDOM_CASES=1 VKFUSE_CHECK=1 to name the kernel)\n",
                    got->graph ? got->graph : "(none)", (unsigned long long)p->seed);
            fail_msg("seed %llu: %s differs from the CPU backend", (unsigned long long)p->seed, what);
        }
    }
}

/* The arena of a recorded plan is within 10% of the liveness lower bound. */
static void check_peak(const program *p, const run_result *r, const char *what)
{
    if (!r->fs.planned || !r->have_ps) {
        print_program(p);
        fail_msg("seed %llu: %s ran no recorded plan", (unsigned long long)p->seed, what);
    }
    assert_int_equal(r->fs.arena_bytes, r->ps.arena_bytes);
    assert_int_equal(r->fs.peak_bytes, r->ps.arena_bytes + r->ps.output_bytes);
    if ((double)r->ps.arena_bytes > 1.10 * (double)r->ps.arena_lower_bound) {
        print_program(p);
        fail_msg("seed %llu: %s arena %lld bytes > 1.10 x lower bound %lld", (unsigned long long)p->seed, what,
                 (long long)r->ps.arena_bytes, (long long)r->ps.arena_lower_bound);
    }
}

typedef struct totals {
    int cases, outputs;
    int64_t kernels_fused, kernels_unfused, arena_fused, arena_unfused, bound_fused;
} totals;

static void run_case(vf_context *vk, vf_context *cpu, uint64_t seed, totals *t)
{
    program p;
    generate(&p, seed);
    float *x[3];
    size_t n[3] = {(size_t)(p.R * p.C), (size_t)((p.in_shape[1].full_r ? p.R : 1) * (p.in_shape[1].full_c ? p.C : 1)),
                   (size_t)(p.C * p.C)};
    for (int i = 0; i < 3; i++) {
        x[i] = malloc(n[i] * sizeof(float));
        vt_fill_uniform(x[i], n[i], i == 2 ? -1.0f : -2.0f, i == 2 ? 1.0f : 2.0f, seed * 3 + (uint64_t)i);
    }
    run_result rc, rf, ru;
    run_program(cpu, &p, (const float *const *)x, true, &rc);
    run_program(vk, &p, (const float *const *)x, true, &rf);
    run_program(vk, &p, (const float *const *)x, false, &ru);
    compare(&p, &rf, &rc, "Vulkan fused");
    compare(&p, &ru, &rc, "Vulkan unfused");
    check_peak(&p, &rf, "the fused plan");
    check_peak(&p, &ru, "the unfused plan");
    /* fusion never adds kernels */
    if (rf.fs.kernels > ru.fs.kernels) {
        print_program(&p);
        fail_msg("seed %llu: fused plan has %d kernels, unfused %d", (unsigned long long)seed, rf.fs.kernels,
                 ru.fs.kernels);
    }
    t->cases++;
    t->outputs += p.n_out;
    t->kernels_fused += rf.fs.kernels;
    t->kernels_unfused += ru.fs.kernels;
    t->arena_fused += rf.ps.arena_bytes;
    t->arena_unfused += ru.ps.arena_bytes;
    t->bound_fused += rf.ps.arena_lower_bound;
    result_free(&rc);
    result_free(&rf);
    result_free(&ru);
    for (int i = 0; i < 3; i++) free(x[i]);
}

static void test_random_graphs(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) skip();
    vt_seeds seeds;
    /* Seed 99 took 60 s (its matmul epilogue of branchy helpers, unrolled
       256 times, compiled that long on lavapipe; now a smaller register
       block: 6 s, test_fusion_matmul_glsl checks the block size). */
    vt_seeds_init(&seeds, 300, 3, 20);
    uint64_t seed0 = seeds.seed0, seed;
    vf_context *vk = vt_context(VF_BACKEND_VULKAN), *cpu = vt_context(VF_BACKEND_CPU);
    totals t = {0};
    while (vt_seeds_next(&seeds, &seed)) run_case(vk, cpu, seed, &t);
    vt_seeds_report(&seeds, "test_fusion_random");
    printf("%d random graphs (%d outputs) from seed %llu: %lld kernels fused, %lld unfused; arena %lld bytes fused"
           " (lower bound %lld), %lld unfused\n",
           t.cases, t.outputs, (unsigned long long)seed0, (long long)t.kernels_fused, (long long)t.kernels_unfused,
           (long long)t.arena_fused, (long long)t.bound_fused, (long long)t.arena_unfused);
    assert_true(t.kernels_fused < t.kernels_unfused); /* fusion happened somewhere */
    vt_context_done(cpu);
    vt_context_done(vk);
}

/* The generator itself: deterministic per seed, shapes as claimed. */
static void test_generator(void **state)
{
    (void)state;
    program a, b;
    int saw_one = 0, saw_odd = 0, saw_bcast = 0, ops[N_OPS + 2] = {0};
    for (uint64_t s = 1; s <= 400; s++) {
        generate(&a, s);
        generate(&b, s);
        assert_memory_equal(&a, &b, sizeof a);
        assert_true(a.n_out >= 1 && a.n_out <= MAX_OUT);
        saw_one += a.R == 1 || a.C == 1;
        saw_odd += (a.R % 2) && a.R > 1;
        saw_bcast += !(a.in_shape[1].full_r && a.in_shape[1].full_c);
        for (int i = 0; i < a.n_ins; i++) ops[a.ins[i].o]++;
    }
    assert_true(saw_one > 0 && saw_odd > 0 && saw_bcast > 0);
    for (int o = 0; o < N_OPS; o++) {
        if (!ops[o]) fprintf(stderr, "op %s never generated\n", op_name[o]);
        assert_true(ops[o] > 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_generator),
        cmocka_unit_test(test_random_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
