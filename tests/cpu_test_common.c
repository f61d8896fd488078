/* Shared helpers of the CPU backend tests; see cpu_test_common.h. */
#include "cpu_test_common.h"

int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f || vf_cpu_backend_create(&f->err, &f->be) != VF_OK) return -1;
    *state = f;
    return 0;
}

void free_bufs(fx *f)
{
    for (int i = 0; i < f->nbufs; i++) f->be.iface->free(f->be.self, f->bufs[i]);
    f->nbufs = 0;
}

int teardown(void **state)
{
    fx *f = *state;
    free_bufs(f);
    f->be.iface->destroy(f->be.self);
    free(f);
    return 0;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(double lo, double hi) { return lo + (hi - lo) * (double)(rng() >> 11) * 0x1p-53; }

int64_t numel(int rank, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < rank; d++) n *= shape[d];
    return n;
}

vf_tref mk(fx *f, vf_dtype dt, int rank, const int64_t *shape, const void *data)
{
    vf_tref t = {.dtype = dt, .rank = rank};
    for (int d = 0; d < rank; d++) t.shape[d] = shape[d];
    size_t bytes = (size_t)numel(rank, shape) * vf_dtype_size(dt);
    assert_true(f->nbufs < 256);
    assert_int_equal(f->be.iface->alloc(f->be.self, bytes ? bytes : 1, &t.buf), VF_OK);
    f->bufs[f->nbufs++] = t.buf;
    if (data && bytes) assert_int_equal(f->be.iface->upload(f->be.self, t.buf, 0, data, bytes), VF_OK);
    return t;
}

void *dl(fx *f, const vf_tref *t)
{
    size_t bytes = (size_t)numel(t->rank, t->shape) * vf_dtype_size(t->dtype);
    void *p = malloc(bytes ? bytes : 1);
    assert_non_null(p);
    assert_int_equal(f->be.iface->download(f->be.self, t->buf, t->offset, p, bytes), VF_OK);
    return p;
}

void run(fx *f, const vf_exec *e)
{
    vf_status s = f->be.iface->exec(f->be.self, e);
    if (s != VF_OK) fail_msg("exec failed: %s", f->err.message);
}

/* Element i widened (test's own decoding). */
double getf(const void *p, vf_dtype t, int64_t i)
{
    switch (t) {
    case VF_F32: return ((const float *)p)[i];
    case VF_F16: return vf_f16_to_f32(((const uint16_t *)p)[i]);
    case VF_I32: return ((const int32_t *)p)[i];
    case VF_U32: return ((const uint32_t *)p)[i];
    case VF_BOOL: return ((const uint8_t *)p)[i];
    }
    return 0;
}
int64_t geti(const void *p, vf_dtype t, int64_t i) { return (int64_t)getf(p, t, i); }

/* Round a double reference to the storage dtype, back as double. */
double round_to(vf_dtype t, double v)
{
    if (t == VF_F16) return vf_f16_to_f32(vf_f32_to_f16((float)v));
    if (t == VF_F32) return (float)v;
    return v;
}

void expect_close(const char *what, int64_t i, double got, double want, double rtol, double atol)
{
    if (isnan(want) && isnan(got)) return;
    if (isinf(want) && got == want) return;
    if (fabs(got - want) <= atol + rtol * fabs(want)) return;
    fail_msg("%s: element %lld: got %.9g, want %.9g", what, (long long)i, got, want);
}

/* Random data of a dtype, with some specials in floats and ints. */
void *gen(vf_dtype t, int64_t n, bool specials)
{
    void *p = malloc((size_t)(n ? n : 1) * vf_dtype_size(t));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        double v = urand(-4, 4);
        switch (t) {
        case VF_F32: ((float *)p)[i] = (float)v; break;
        case VF_F16: ((uint16_t *)p)[i] = vf_f32_to_f16((float)v); break;
        case VF_I32: ((int32_t *)p)[i] = (rng() & 3) ? (int32_t)(rng() % 41) - 20 : (int32_t)(uint32_t)rng(); break;
        case VF_U32: ((uint32_t *)p)[i] = (rng() & 3) ? (uint32_t)(rng() % 41) : (uint32_t)rng(); break;
        case VF_BOOL: ((uint8_t *)p)[i] = rng() & 1; break;
        }
    }
    if (specials && n >= 7 && (t == VF_F32)) {
        float *q = p;
        q[1] = NAN, q[2] = INFINITY, q[3] = -INFINITY, q[4] = 0.0f, q[5] = -0.0f;
    }
    if (specials && n >= 3 && t == VF_I32) {
        int32_t *q = p;
        q[0] = INT32_MAX, q[1] = INT32_MIN, q[2] = 0;
    }
    if (specials && n >= 3 && t == VF_U32) {
        uint32_t *q = p;
        q[0] = UINT32_MAX, q[1] = 0x80000000u, q[2] = 0;
    }
    return p;
}

/* Flat index into an input broadcast to out, by div/mod (independent of the
   kernel's stride walk). */
int64_t bidx(int64_t flat, int orank, const int64_t *os, int irank, const int64_t *is)
{
    int64_t idx = 0, mul = 1;
    for (int d = orank - 1; d >= 0; d--) {
        int64_t c = flat % os[d];
        flat /= os[d];
        int k = d - (orank - irank);
        if (k >= 0) {
            if (is[k] != 1) idx += c * mul;
            mul *= is[k];
        }
    }
    return idx;
}

/* ---- cast ------------------------------------------------------------------ */

void *run_cast(fx *f, vf_dtype from, vf_dtype to, int64_t n, const void *src)
{
    vf_exec e = {.op = VF_OP_CAST, .n_in = 1, .attrs.dtype = to};
    e.in[0] = mk(f, from, 1, &n, src);
    e.out = mk(f, to, 1, &n, NULL);
    run(f, &e);
    return dl(f, &e.out);
}

void cast_case(fx *f, vf_dtype from, vf_dtype to, int64_t n, const void *src, const void *want)
{
    void *got = run_cast(f, from, to, n, src);
    if (memcmp(got, want, (size_t)n * vf_dtype_size(to)) != 0) {
        for (int64_t i = 0; i < n; i++)
            fprintf(stderr, "  cast %s->%s [%lld]: got %.9g want %.9g\n", vf_dtype_name(from),
                    vf_dtype_name(to), (long long)i, getf(got, to, i), getf(want, to, i));
        fail_msg("cast %s -> %s", vf_dtype_name(from), vf_dtype_name(to));
    }
    free(got);
}
