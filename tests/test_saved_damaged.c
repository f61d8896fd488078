/* Damaged saved files (docs/FORMAT.md) fail to load with VF_ERROR_FORMAT
 * and a message naming the byte: truncated at every section boundary and
 * at random points, bit flips, a newer version, huge counts, flips behind a
 * recomputed checksum; the kernel section's structural checks (counts,
 * keys, SPIR-V header and instruction words, the entry point), invalid
 * SPIR-V rejected by the validator on Vulkan and ignored on the CPU
 * backend; version-1 files (no kernel section) still load. The file is
 * the train step of saved_common.c; round trips: test_saved.c. */
#include "testutil.h"
#include "saved_common.h"
#include "saved/saved.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A minimal valid compute module (spirv-val --target-env vulkan1.2): main,
   local size 1, returns. */
#define MIN_SPIRV_WORDS 35
static const uint32_t min_spirv[MIN_SPIRV_WORDS] = {
    0x07230203, 0x00010000, 0, 5, 0,
    (2 << 16) | 17, 1,                        /* OpCapability Shader */
    (3 << 16) | 14, 0, 1,                     /* OpMemoryModel Logical GLSL450 */
    (5 << 16) | 15, 5, 1, 0x6E69616D, 0,      /* OpEntryPoint GLCompute %1 "main" */
    (6 << 16) | 16, 1, 17, 1, 1, 1,           /* OpExecutionMode %1 LocalSize 1 1 1 */
    (2 << 16) | 19, 2,                        /* %2 = OpTypeVoid */
    (3 << 16) | 33, 3, 2,                     /* %3 = OpTypeFunction %2 */
    (5 << 16) | 54, 2, 1, 0, 3,               /* %1 = OpFunction %2 None %3 */
    (2 << 16) | 248, 4,                       /* %4 = OpLabel */
    (1 << 16) | 253,                          /* OpReturn */
    (1 << 16) | 56,                           /* OpFunctionEnd */
};

static uint8_t *saved_bytes(vf_context *ctx, size_t *n)
{
    static vt_step_model m;
    m = (vt_step_model){.w = vf_variable(ctx, vf_fill(ctx, VF_F32, 2, (int64_t[]){VT_FEAT, VT_CLS}, 0.5)),
                .b = vf_fill(ctx, VF_F32, 1, (int64_t[]){VT_CLS}, 0.1), .lr = vf_fill(ctx, VF_F32, 0, NULL, 0.1)};
    vf_function *fn = vf_function_create(ctx, &(vf_function_desc){.name = "step", .body = vt_train_step, .user = &m,
        .n_inputs = 2, .n_outputs = 3, .input_signature = vt_step_sig});
    vf_scope_begin(ctx);
    vf_tensor *in[2], *out[3];
    vt_step_inputs(ctx, 2, 1, in);
    assert_int_equal(vf_function_call(fn, in, out), VF_OK);
    vf_scope_end(ctx);
    /* the CPU backend has no kernel binaries: two small valid modules stand
       in for them, so the damage below reaches the kernel section too */
    vf_saved_kernel extra[2] = {{0x2222222222222222ull, min_spirv, MIN_SPIRV_WORDS},
                                {0x1111111111111111ull, min_spirv, MIN_SPIRV_WORDS}};
    uint8_t *b = NULL;
    assert_int_equal(vf_saved_write_mem(fn, extra, 2, &b, n), VF_OK);
    vf_function_destroy(fn);
    return b;
}


/* loads n bytes; must fail with VF_ERROR_FORMAT (or, if allowed, succeed) */
static int expect_format(vf_context *ctx, const uint8_t *b, size_t n, bool may_load, const char *what, size_t at)
{
    vf_function *fn = NULL;
    vf_status s = vf_saved_load_mem(ctx, b, n, "damaged", &fn);
    if (s == VF_OK && may_load) {
        vf_function_destroy(fn);
        return 1;
    }
    if (s != VF_ERROR_FORMAT) fail_msg("%s at %zu: got %s (%s)", what, at, vf_status_name(s), vf_error_message(ctx));
    assert_null(fn);
    assert_non_null(strstr(vf_error_message(ctx), "at byte"));
    vf_error_clear(ctx);
    return 0;
}

static void test_damaged_files(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    size_t n;
    uint8_t *orig = saved_bytes(ctx, &n), *b = malloc(n);
    uint32_t nsec = (uint32_t)orig[16] | (uint32_t)orig[17] << 8;
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, orig, n, "intact", &fn) != VF_OK) fail_msg("intact: %s", vf_error_message(ctx));
    vf_function_destroy(fn);
    int loaded = 0;
    /* truncated at every section boundary, as is and made consistent */
    for (uint32_t i = 0; i < nsec; i++) {
        const uint8_t *e = orig + VF_SAVED_HEADER + (size_t)i * VF_SAVED_ENTRY;
        size_t cuts[2] = {(size_t)vt_rd64(e + 8), (size_t)(vt_rd64(e + 8) + vt_rd64(e + 16))};
        for (int k = 0; k < 2; k++) {
            if (cuts[k] >= n) continue;
            memcpy(b, orig, n);
            expect_format(ctx, b, cuts[k], false, "truncated at a section boundary", cuts[k]);
            if (cuts[k] >= VF_SAVED_HEADER + VF_SAVED_TRAILER && cuts[k] + 8 < n) {
                vt_saved_fix_up(b, cuts[k] + 8);
                expect_format(ctx, b, cuts[k] + 8, false, "truncated at a section boundary (consistent)", cuts[k]);
            }
        }
    }
    /* truncated at random points; every byte of the header and table */
    uint64_t r = 12345;
    for (int t = 0; t < 300; t++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t cut = t < 100 ? (size_t)t : (size_t)(r >> 33) % n;
        memcpy(b, orig, n);
        expect_format(ctx, b, cut, false, "truncated", cut);
        if (cut >= VF_SAVED_HEADER + VF_SAVED_TRAILER + 8) {
            vt_saved_fix_up(b, cut);
            expect_format(ctx, b, cut, false, "truncated (consistent)", cut);
        }
    }
    /* one flipped bit anywhere: the checksum (or the header) catches it */
    for (size_t i = 0; i < n; i++) {
        memcpy(b, orig, n);
        b[i] ^= (uint8_t)(1u << (i % 8));
        expect_format(ctx, b, n, false, "bit flip", i);
    }
    /* flips behind a recomputed checksum: the parser's checks; loading may
       succeed (a changed constant), it must never crash or leak */
    for (int t = 0; t < 2000; t++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        size_t i = VF_SAVED_HEADER + (size_t)(r >> 33) % (n - VF_SAVED_HEADER - 8);
        memcpy(b, orig, n);
        b[i] ^= (uint8_t)(1u << ((r >> 20) % 8));
        vt_saved_fix_up(b, n);
        loaded += expect_format(ctx, b, n, true, "bit flip (checksum fixed)", i);
    }
    /* most flips land in checked fields; some in data (constants, values) */
    print_message("flips behind a fixed checksum: %d of 2000 still loaded (changed data)\n", loaded);
    assert_true(loaded < 2000);
    /* a newer version */
    memcpy(b, orig, n);
    vt_wr32(b + 8, VF_SAVED_VERSION + 1);
    vt_saved_fix_up(b, n);
    assert_int_equal(vf_saved_load_mem(ctx, b, n, "newer", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "version 3", "newer", NULL);
    /* huge counts: the name length, the tensor count, the node count */
    const char *fields[3] = {"name length", "tensor count", "node count"};
    for (int k = 0; k < 3; k++) {
        memcpy(b, orig, n);
        size_t off;
        if (k < 2) off = (size_t)vt_rd64(orig + VF_SAVED_HEADER + (size_t)k * VF_SAVED_ENTRY + 8);
        else { /* the graph of the first concrete function: after the inputs and captures */
            size_t p = (size_t)vt_rd64(orig + VF_SAVED_HEADER + 2 * VF_SAVED_ENTRY + 8);
            for (int i = 0; i < 2; i++) p += 1 + 5 + 8 * (size_t)orig[p + 1];
            uint32_t nc = (uint32_t)orig[p] | (uint32_t)orig[p + 1] << 8;
            p += 4;
            for (uint32_t c = 0; c < nc; c++) p += 4 + 5 + 8 * (size_t)orig[p + 4];
            off = p;
        }
        vt_wr32(b + off, 0xFFFFFFF0u);
        vt_saved_fix_up(b, n);
        assert_int_equal(vf_saved_load_mem(ctx, b, n, "huge", &fn), VF_ERROR_FORMAT);
        vt_expect_error(ctx, VF_ERROR_FORMAT, fields[k], "at byte", NULL);
    }
    /* not a saved function; no file */
    memcpy(b, orig, n);
    b[0] = 'X';
    assert_int_equal(vf_saved_load_mem(ctx, b, n, "foreign", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "magic", NULL);
    assert_int_equal(vf_function_load(ctx, "/nonexistent/vkfuse.vkf", &fn), VF_ERROR_IO);
    vt_expect_error(ctx, VF_ERROR_IO, "cannot open", NULL);
    /* a directory opens but is no file (it gave VF_ERROR_FORMAT "9223372036854775807 bytes") */
    assert_int_equal(vf_function_load(ctx, "/", &fn), VF_ERROR_IO);
    vt_expect_error(ctx, VF_ERROR_IO, "'/' is a directory, not a file", NULL);
    assert_null(fn);
    free(b);
    free(orig);
    vt_context_done(ctx);
}

/* ---- the kernel section -------------------------------------------------- */

/* b (n bytes, a consistent file) damaged by f at the kernel section (off,
   its first kernel at off + 4): VF_ERROR_FORMAT naming want. */
static void expect_kernel_damage(vf_context *ctx, uint8_t *b, size_t n, const char *what, const char *want)
{
    vt_saved_fix_up(b, n);
    vf_function *fn = NULL;
    vf_status s = vf_saved_load_mem(ctx, b, n, "damaged", &fn);
    if (s != VF_ERROR_FORMAT) fail_msg("%s: got %s (%s)", what, vf_status_name(s), vf_error_message(ctx));
    assert_null(fn);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "kernel section at byte", want, NULL);
}

/* Damage to the kernel section of orig (n bytes, at least two kernels):
   every structural check fails with VF_ERROR_FORMAT; a module that is
   well-formed but invalid SPIR-V is rejected on Vulkan (the validator)
   and ignored on the CPU backend. */
static void kernel_damage(vf_context *ctx, const uint8_t *orig, size_t n, bool vulkan)
{
    uint32_t nk;
    size_t off = vt_saved_kernel_section(orig, &nk), k0 = off + 4;
    assert_true(nk >= 2);
    uint32_t nw0 = vt_rd32(orig + k0 + 8);
    size_t k1 = k0 + 12 + 4 * (size_t)nw0, w0 = k0 + 12;
    uint8_t *b = malloc(n);
    vf_function *fn = NULL;
    /* a flipped bit in the SPIR-V: the checksum covers it */
    memcpy(b, orig, n);
    b[w0 + 4 * 7] ^= 0x10;
    assert_int_equal(vf_saved_load_mem(ctx, b, n, "flipped", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "checksum", NULL);
    struct { size_t at; uint32_t v; bool wide; const char *want; } cases[] = {
        {off, 0xFFFFFFF0u, false, "kernel count is 4294967280"},
        {off, nk - 1, false, "left over"},
        {k0, 0, true, "key 0000000000000000 is zero"},
        {k1, 0, true, "not above the one before"},
        {k0 + 8, 0xFFFFFFF0u, false, "4294967280 SPIR-V words"},
        {k0 + 8, 4, false, "4 SPIR-V words"},
        {w0, 0xDEADBEEFu, false, "SPIR-V magic is 0xdeadbeef"},
        {w0 + 4, 0x00020000u, false, "SPIR-V version word"},
        {w0 + 12, 0, false, "id bound 0"},
        {w0 + 20, 0x00000011u, false, "has 0 words"},       /* the first instruction's word count */
        {w0 + 20, 0xFFFF0011u, false, "has 65535 words"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(b, orig, n);
        if (cases[i].wide) vt_wr64(b + cases[i].at, cases[i].at == k1 ? vt_rd64(orig + k0) : cases[i].v);
        else vt_wr32(b + cases[i].at, cases[i].v);
        expect_kernel_damage(ctx, b, n, cases[i].want, cases[i].want);
    }
    /* no GLCompute entry point: the entry point's execution model */
    memcpy(b, orig, n);
    for (size_t i = 5; i < nw0; i += vt_rd32(b + w0 + 4 * i) >> 16)
        if ((vt_rd32(b + w0 + 4 * i) & 0xffffu) == 15) vt_wr32(b + w0 + 4 * (i + 1), 4); /* Kernel */
    expect_kernel_damage(ctx, b, n, "no entry point", "no GLCompute entry point");
    /* truncated inside the kernel section, made consistent */
    for (size_t cut = off; cut < n - 8; cut += (n - 8 - off) / 7 + 1) {
        memcpy(b, orig, n);
        vt_saved_fix_up(b, cut + 8);
        expect_format(ctx, b, cut + 8, false, "truncated in the kernel section", cut);
    }
    /* well-formed but not valid SPIR-V: OpFunctionEnd (the last word of the
       last module) made an unknown opcode, under a key nothing cached has */
    size_t last = k0;
    for (uint32_t k = 0; k + 1 < nk; k++) last += 12 + 4 * (size_t)vt_rd32(orig + last + 8);
    uint32_t nwl = vt_rd32(orig + last + 8);
    memcpy(b, orig, n);
    vt_wr64(b + last, ~0ull);
    assert_int_equal(vt_rd32(b + last + 12 + 4 * ((size_t)nwl - 1)), (1u << 16) | 56u);
    vt_wr32(b + last + 12 + 4 * ((size_t)nwl - 1), (1u << 16) | 0x7FFFu);
    vt_saved_fix_up(b, n);
    vf_status s = vf_saved_load_mem(ctx, b, n, "invalid module", &fn);
    if (vulkan) {
        assert_int_equal(s, VF_ERROR_FORMAT);
        vt_expect_error(ctx, VF_ERROR_FORMAT, "kernel section at byte", "SPIR-V validator rejects it", NULL);
        assert_null(fn);
    } else {
        if (s != VF_OK) fail_msg("invalid module on the CPU backend: %s", vf_error_message(ctx));
        vf_function_destroy(fn);
    }
    free(b);
}

/* A version-2 file as version 1 wrote it: no kernel section. */
static uint8_t *as_version1(const uint8_t *b, size_t n, size_t *n1)
{
    uint32_t nk, nsec = vt_rd32(b + 16);
    size_t off = vt_saved_kernel_section(b, &nk), table_end = VF_SAVED_HEADER + (size_t)nsec * VF_SAVED_ENTRY;
    *n1 = off - VF_SAVED_ENTRY + 8;
    uint8_t *v = malloc(*n1);
    memcpy(v, b, VF_SAVED_HEADER + (size_t)(nsec - 1) * VF_SAVED_ENTRY);
    memcpy(v + table_end - VF_SAVED_ENTRY, b + table_end, off - table_end);
    vt_wr32(v + 8, 1);
    vt_wr32(v + 16, nsec - 1);
    for (uint32_t i = 0; i + 1 < nsec; i++) {
        uint8_t *e = v + VF_SAVED_HEADER + (size_t)i * VF_SAVED_ENTRY;
        vt_wr64(e + 8, vt_rd64(e + 8) - VF_SAVED_ENTRY);
    }
    vt_saved_fix_up(v, *n1);
    (void)n;
    return v;
}

static void test_kernel_section_cpu(void **state)
{
    (void)state;
    vf_context *ctx = vt_context(VF_BACKEND_CPU);
    size_t n, n1;
    uint8_t *orig = saved_bytes(ctx, &n);
    kernel_damage(ctx, orig, n, false);
    /* version 1 (no kernel section) still loads; a version-1 file with one is wrong */
    uint8_t *v1 = as_version1(orig, n, &n1);
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, v1, n1, "version 1", &fn) != VF_OK) fail_msg("version 1: %s", vf_error_message(ctx));
    assert_int_equal(vf_function_variable_count(fn), 1);
    vf_function_destroy(fn);
    vt_wr32(orig + 8, 1);
    vt_saved_fix_up(orig, n);
    assert_int_equal(vf_saved_load_mem(ctx, orig, n, "v1 with kernels", &fn), VF_ERROR_FORMAT);
    vt_expect_error(ctx, VF_ERROR_FORMAT, "has type 4; expected 3", NULL);
    free(v1);
    free(orig);
    vt_context_done(ctx);
}

/* On Vulkan: the kernels of a real saved function, damaged; loaded into a
   fresh context (its memory cache does not hold them yet). */
static void test_kernel_section_vulkan(void **state)
{
    (void)state;
    if (!vt_have_vulkan()) return;
    vf_context *ctx = vt_context(VF_BACKEND_VULKAN);
    size_t n;
    uint8_t *orig = saved_bytes(ctx, &n);
    uint32_t nk;
    vt_saved_kernel_section(orig, &nk);
    print_message("saved on Vulkan (with two stand-ins): %u kernels\n", nk);
    vt_context_done(ctx);
    ctx = vt_context(VF_BACKEND_VULKAN);
    kernel_damage(ctx, orig, n, true);
    /* the intact file loads, its kernels validated and cached: no compiles */
    vf_function *fn = NULL;
    if (vf_saved_load_mem(ctx, orig, n, "intact", &fn) != VF_OK) fail_msg("intact: %s", vf_error_message(ctx));
    vf_context_stats st;
    vf_context_stats_get(ctx, &st);
    assert_int_equal(st.shader_compiles, 0);
    vf_function_destroy(fn);
    vt_context_done(ctx);
    /* the CPU backend checks the kernels and ignores them */
    ctx = vt_context(VF_BACKEND_CPU);
    if (vf_saved_load_mem(ctx, orig, n, "on cpu", &fn) != VF_OK) fail_msg("on cpu: %s", vf_error_message(ctx));
    vf_function_destroy(fn);
    free(orig);
    vt_context_done(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_damaged_files),
        cmocka_unit_test(test_kernel_section_cpu),
        cmocka_unit_test(test_kernel_section_vulkan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
