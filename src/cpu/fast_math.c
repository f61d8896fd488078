/* f32 rows of exp, tanh, sigmoid, gelu and rsqrt (fast_math.h): each
 * element widened to double, the op-table reference's formula evaluated
 * with fast_math.h's polynomial exp / tanh (rsqrt: IEEE sqrt and divide,
 * libm's bits exactly), rounded once. The loops have no calls or branches,
 * so they vectorise, compiled for the wider vector units too (the best
 * picked at load). Built with -fno-math-errno (CMakeLists.txt): sqrt may
 * then be the vector instruction; the library never reads errno.
 */
#include "cpu/fast_math.h"

#include <stdatomic.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define FM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FM_CLONES
#endif

static _Atomic int64_t rows_run;

int64_t vf_cpu_fm_rows(void) { return atomic_load_explicit(&rows_run, memory_order_relaxed); }

/* The constants and evaluation order of op_table.c's references. */
#define GELU_C 0.7978845608028654
#define GELU_K 0.044715

FM_CLONES static void row_exp(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = (float)vf_fm_exp(a[i]);
}

FM_CLONES static void row_tanh(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = (float)vf_fm_tanh(a[i]);
}

FM_CLONES static void row_sigmoid(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = (float)(1.0 / (1.0 + vf_fm_exp(-(double)a[i])));
}

FM_CLONES static void row_gelu(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const double x = a[i];
        o[i] = (float)(0.5 * x * (1.0 + vf_fm_tanh(GELU_C * (x + GELU_K * x * x * x))));
    }
}

FM_CLONES static void row_rsqrt(const float *a, float *o, int64_t n)
{
    for (int64_t i = 0; i < n; i++) o[i] = (float)(1.0 / sqrt((double)a[i]));
}

void vf_cpu_fm_row(vf_op op, const float *a, float *o, int64_t n)
{
    switch (op) {
    case VF_OP_EXP: row_exp(a, o, n); break;
    case VF_OP_TANH: row_tanh(a, o, n); break;
    case VF_OP_SIGMOID: row_sigmoid(a, o, n); break;
    case VF_OP_GELU: row_gelu(a, o, n); break;
    case VF_OP_RSQRT: row_rsqrt(a, o, n); break;
    default: return;
    }
    atomic_fetch_add_explicit(&rows_run, 1, memory_order_relaxed);
}
