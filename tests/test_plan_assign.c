/* Assigns written in place (src/plan/plan_assign.c): the kernel making an
 * assign's value writes the variable itself and the copy goes, where no
 * program can tell; and every case where the copy must stay (the old
 * value read after the value's kernel, the value read after a later
 * assign of the variable, a kernel reading the variable other than
 * element for element, a returned value).
 *
 * Each program runs three calls traced on Vulkan, traced unfused (every
 * assign a copy: the baseline), traced on the CPU backend and eagerly,
 * and is checked against its double-precision reference: outputs and the
 * variables after every call. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define N 64   /* elements of each variable and input */
#define CALLS 3

typedef struct acase {
    const char *name;
    vf_body body;
    int n_vars;
    /* one call of the program in double: vars updated in place, out [N] */
    void (*ref)(double (*var)[N], const double *x, double *out);
    int kernels;           /* kernels of the fused plan (each copy that stays is one) */
    bool square;           /* the variables are [8, 8] (read by matmul / softmax themselves: a
                              reshape of a variable would be a copy) */
} acase;

typedef struct vars {
    vf_tensor *v[3];
} vars;

static double start(int k, int i) { return (double)((i * 7 + k * 5) % 13) / 8.0 - 0.7; }
static double input(int i) { return (double)((i * 3) % 11) / 10.0 - 0.4; }

/* ---- programs ------------------------------------------------------------ */

/* v = v - 0.5 * x; out = x + 1: one kernel writes v */
static vf_status sgd(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    vf_status st = vf_assign(s->v[0], vf_sub(ctx, s->v[0], vf_mul(ctx, vt_scalar(ctx, 0.5), in[0])));
    out[0] = vf_add(ctx, in[0], vt_scalar(ctx, 1));
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void sgd_ref(double (*v)[N], const double *x, double *out)
{
    for (int i = 0; i < N; i++) v[0][i] -= 0.5 * x[i], out[i] = x[i] + 1;
}

/* m = 0.9 m + 0.1 x; p = p - 0.2 m (the new m, read after its assign):
   both in place */
static vf_status momentum(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    vf_tensor *m = vf_add(ctx, vf_mul(ctx, s->v[0], vt_scalar(ctx, 0.9)), vf_mul(ctx, in[0], vt_scalar(ctx, 0.1)));
    vf_status st = vf_assign(s->v[0], m);
    if (st == VF_OK) st = vf_assign(s->v[1], vf_sub(ctx, s->v[1], vf_mul(ctx, m, vt_scalar(ctx, 0.2))));
    out[0] = vf_exp(ctx, in[0]);
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void momentum_ref(double (*v)[N], const double *x, double *out)
{
    for (int i = 0; i < N; i++) {
        v[0][i] = 0.9 * v[0][i] + 0.1 * x[i];
        v[1][i] -= 0.2 * v[0][i];
        out[i] = exp(x[i]);
    }
}

/* u = v - 1, then r = v * 3 reads the old v after u's kernel, then
   assign(v, u): the copy stays (r must see the old value) */
static vf_status read_between(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    vf_tensor *u = vf_sub(ctx, s->v[0], vt_scalar(ctx, 1));
    vf_tensor *r = vf_add(ctx, vf_mul(ctx, s->v[0], vt_scalar(ctx, 3)), in[0]);
    vf_status st = vf_assign(s->v[0], u);
    out[0] = r;
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void read_between_ref(double (*v)[N], const double *x, double *out)
{
    for (int i = 0; i < N; i++) out[i] = v[0][i] * 3 + x[i], v[0][i] -= 1;
}

/* u = v + x; assign(v, u); assign(v, u * 2); out = u - 1: u is read
   after v is assigned again, so u keeps memory of its own */
static vf_status reassigned(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    vf_tensor *u = vf_add(ctx, s->v[0], in[0]);
    vf_status st = vf_assign(s->v[0], u);
    if (st == VF_OK) st = vf_assign(s->v[0], vf_mul(ctx, u, vt_scalar(ctx, 2)));
    out[0] = vf_sub(ctx, u, vt_scalar(ctx, 1));
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void reassigned_ref(double (*v)[N], const double *x, double *out)
{
    for (int i = 0; i < N; i++) {
        double u = v[0][i] + x[i];
        v[0][i] = 2 * u, out[i] = u - 1;
    }
}

/* v = v @ w (variables [8, 8]): the matmul reads all of v while it
   writes: a copy; w = exp(x as [8, 8]) @ 0.125: a matmul not reading w,
   in place */
static vf_status matmuls(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    int64_t sq[2] = {8, 8};
    vf_status st = vf_assign(s->v[0], vf_matmul(ctx, s->v[0], s->v[1]));
    if (st == VF_OK)
        st = vf_assign(s->v[1], vf_matmul(ctx, vf_reshape(ctx, vf_exp(ctx, in[0]), 2, sq), vf_fill(ctx, VF_F32, 2, sq, 0.125)));
    out[0] = vf_neg(ctx, in[0]);
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void matmuls_ref(double (*v)[N], const double *x, double *out)
{
    double nv[N] = {0}, nw[N] = {0};
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            for (int k = 0; k < 8; k++) nv[r * 8 + c] += v[0][r * 8 + k] * v[1][k * 8 + c], nw[r * 8 + c] += exp(x[r * 8 + k]) * 0.125;
    for (int i = 0; i < N; i++) v[0][i] = nv[i], v[1][i] = nw[i], out[i] = -x[i];
}

/* v = v - 0.5 * (e @ e), e = exp(x as [8, 8]) (v [8, 8]): the update in
   the matmul's epilogue reads v element for element: in place */
static vf_status epilogue(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    vf_tensor *e = vf_reshape(ctx, vf_exp(ctx, in[0]), 2, (int64_t[]){8, 8});
    vf_status st = vf_assign(s->v[0], vf_sub(ctx, s->v[0], vf_mul(ctx, vt_scalar(ctx, 0.5), vf_matmul(ctx, e, e))));
    out[0] = vf_sin(ctx, in[0]);
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void epilogue_ref(double (*v)[N], const double *x, double *out)
{
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++) {
            double acc = 0;
            for (int k = 0; k < 8; k++) acc += exp(x[r * 8 + k]) * exp(x[k * 8 + c]);
            v[0][r * 8 + c] -= 0.5 * acc;
        }
    for (int i = 0; i < N; i++) out[i] = sin(x[i]);
}

/* v = softmax(v) * 2 (v [8, 8]; a row kernel reads v's whole row): a copy */
static vf_status rows(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    vf_status st = vf_assign(s->v[0], vf_mul(ctx, vf_softmax(ctx, s->v[0], -1), vt_scalar(ctx, 2)));
    out[0] = vf_add(ctx, in[0], in[0]);
    return st ? st : out[0] ? VF_OK : vf_status_get(ctx);
}
static void rows_ref(double (*v)[N], const double *x, double *out)
{
    for (int r = 0; r < 8; r++) {
        double mx = -INFINITY, sum = 0;
        for (int c = 0; c < 8; c++) mx = fmax(mx, v[0][r * 8 + c]);
        for (int c = 0; c < 8; c++) sum += exp(v[0][r * 8 + c] - mx);
        for (int c = 0; c < 8; c++) v[0][r * 8 + c] = 2 * exp(v[0][r * 8 + c] - mx) / sum;
    }
    for (int i = 0; i < N; i++) out[i] = 2 * x[i];
}

/* out = v * 2 and assign(v, out): the value is returned, a copy */
static vf_status returned(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user)
{
    vars *s = user;
    out[0] = vf_add(ctx, vf_mul(ctx, s->v[0], vt_scalar(ctx, 2)), in[0]);
    return vf_assign(s->v[0], out[0]);
}
static void returned_ref(double (*v)[N], const double *x, double *out)
{
    for (int i = 0; i < N; i++) v[0][i] = out[i] = 2 * v[0][i] + x[i];
}

static const acase cases[] = {
    {"sgd", sgd, 1, sgd_ref, 2},                       /* mul+sub into v; add */
    {"momentum", momentum, 2, momentum_ref, 3},        /* m, p in place; exp */
    {"read_between", read_between, 1, read_between_ref, 3},
    {"reassigned", reassigned, 1, reassigned_ref, 4},  /* u, its copy; u*2 in place; u-1 */
    {"matmuls", matmuls, 2, matmuls_ref, 5, true},     /* v@w, its copy; exp+fill+matmul in place; neg */
    {"epilogue", epilogue, 1, epilogue_ref, 3, true}, /* exp; matmul+mul+sub in place; sin */
    {"rows", rows, 1, rows_ref, 3, true},              /* softmax*2, copy; add */
    {"returned", returned, 1, returned_ref, 2},        /* mul+add (returned), copy */
};

/* ---- the harness --------------------------------------------------------- */

typedef enum { FUSED, UNFUSED, CPU, EAGER, N_RUNS } run_kind;

/* CALLS calls of c; every call's outputs and variables into out / var. */
static void run(const acase *c, run_kind k, float out[CALLS][N], float var[CALLS][3][N], int *kernels)
{
    vf_context *ctx = k == CPU ? vt_group_cpu : vt_group_vk;
    vf_scope_begin(ctx);
    vars s = {0};
    for (int j = 0; j < c->n_vars; j++) {
        float v0[N];
        for (int i = 0; i < N; i++) v0[i] = (float)start(j, i);
        s.v[j] = c->square ? vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 2, (int64_t[]){8, 8}, v0))
                           : vf_variable(ctx, vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, v0));
    }
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = c->name, .body = c->body, .user = &s,
                                                                   .n_inputs = 1, .n_outputs = 1,
                                                                   .unfused = k == UNFUSED});
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)input(i);
    for (int call = 0; call < CALLS; call++) {
        vf_scope_begin(ctx);
        vf_tensor *in = vf_tensor_from_host(ctx, VF_F32, 1, (int64_t[]){N}, x), *o = NULL;
        vf_status st = k == EAGER ? c->body(ctx, &in, &o, &s) : vf_function_call(fn, &in, &o);
        if (st != VF_OK) fail_msg("%s: %s", c->name, vf_error_message(ctx));
        assert_int_equal(vf_tensor_read(o, out[call], sizeof out[call]), VF_OK);
        for (int j = 0; j < c->n_vars; j++) assert_int_equal(vf_tensor_read(s.v[j], var[call][j], N * sizeof(float)), VF_OK);
        vf_scope_end(ctx);
    }
    vf_function_stats st;
    assert_int_equal(vf_function_stats_get(fn, &st), VF_OK);
    if (kernels) *kernels = k == FUSED || k == UNFUSED ? (st.planned ? st.kernels : -1) : 0;
    vf_function_destroy(fn);
    vf_scope_end(ctx); /* the variables */
}

static void test_case(void **state)
{
    const acase *c = *state;
    if (!vt_have_vulkan()) return;
    static float out[N_RUNS][CALLS][N], var[N_RUNS][CALLS][3][N];
    int kernels = 0, unfused_kernels = 0;
    for (int k = 0; k < N_RUNS; k++)
        run(c, (run_kind)k, out[k], var[k], k == FUSED ? &kernels : k == UNFUSED ? &unfused_kernels : NULL);
    double v[3][N], x[N], want[N];
    for (int j = 0; j < 3; j++)
        for (int i = 0; i < N; i++) v[j][i] = start(j, i);
    for (int i = 0; i < N; i++) x[i] = input(i);
    for (int call = 0; call < CALLS; call++) {
        c->ref(v, x, want);
        for (int i = 0; i < N; i++) {
            if (fabs(out[FUSED][call][i] - want[i]) > 1e-5 + 1e-5 * fabs(want[i]))
                fail_msg("%s call %d: out[%d] = %.9g, want %.9g", c->name, call, i, out[FUSED][call][i], want[i]);
            for (int j = 0; j < c->n_vars; j++)
                if (fabs(var[FUSED][call][j][i] - v[j][i]) > 1e-5 + 1e-5 * fabs(v[j][i]))
                    fail_msg("%s call %d: var%d[%d] = %.9g, want %.9g", c->name, call, j, i, var[FUSED][call][j][i],
                             v[j][i]);
        }
        for (int k = 1; k < N_RUNS; k++) {
            vt_assert_close_f32(out[FUSED][call], out[k][call], N, 1e-6, 1e-6, c->name);
            for (int j = 0; j < c->n_vars; j++)
                vt_assert_close_f32(var[FUSED][call][j], var[k][call][j], N, 1e-6, 1e-6, "variable");
        }
    }
    if (kernels != c->kernels) /* after the values: a wrong elision shows as a wrong value first */
        fail_msg("%s: the fused plan has %d kernels, want %d (unfused: %d)", c->name, kernels, c->kernels, unfused_kernels);
}

int main(void)
{
    enum { NC = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[NC];
    for (int i = 0; i < NC; i++)
        tests[i] = (struct CMUnitTest){.name = cases[i].name, .test_func = test_case, .initial_state = (void *)&cases[i]};
    return cmocka_run_group_tests(tests, vt_group_setup, vt_group_teardown);
}
