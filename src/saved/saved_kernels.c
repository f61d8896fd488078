/* The kernel section of a saved function (format version 2,
 * docs/FORMAT.md): for each kernel its content key and SPIR-V words.
 *
 * Read in two passes. The first checks every entry's structure, whatever
 * the backend: keys non-zero and ascending, word counts in range and
 * inside the section, and each module's SPIR-V header and instruction
 * stream (every instruction's word count non-zero and inside the module;
 * an OpEntryPoint for GLCompute). The second, only on a backend that takes
 * kernel binaries (Vulkan), hands each module to it: the backend runs the
 * SPIR-V validator before caching it, so a module that is not valid SPIR-V
 * never reaches vkCreateShaderModule. The checksum of the whole file
 * (saved_read.c) has been verified before any of this. */
#include "saved/saved_rd.h"
#include "util/fault.h"

#include <stdlib.h>
#include <string.h>

#define SPV_OP_ENTRY_POINT 15u
#define SPV_MODEL_GLCOMPUTE 5u
#define SPV_MAX_BOUND 4194304u /* the universal limit on result ids, + 1 */

static uint32_t word_at(const uint8_t *p, size_t i)
{
    p += 4 * i;
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The module of nw words at r->pos; r->pos stays at its first word. */
static bool check_module(vf_saved_rd *r, uint32_t k, uint32_t nw)
{
    const uint8_t *m = r->p + r->pos;
    uint32_t magic = word_at(m, 0), version = word_at(m, 1), bound = word_at(m, 3), schema = word_at(m, 4);
    if (magic != VF_SAVED_SPIRV_MAGIC)
        return vf_saved_bad(r, "kernel %u: the SPIR-V magic is 0x%08x, not 0x%08x", k, magic, VF_SAVED_SPIRV_MAGIC);
    if ((version & 0xff0000ffu) != 0 || (version >> 16) != 1 || ((version >> 8) & 0xffu) > 6)
        return vf_saved_bad(r, "kernel %u: SPIR-V version word 0x%08x (1.0 .. 1.6)", k, version);
    if (bound == 0 || bound > SPV_MAX_BOUND || schema != 0)
        return vf_saved_bad(r, "kernel %u: SPIR-V id bound %u (1..%u) or schema %u (0)", k, bound, SPV_MAX_BOUND, schema);
    bool entry = false;
    for (size_t i = 5; i < nw;) {
        uint32_t w = word_at(m, i), count = w >> 16, op = w & 0xffffu;
        if (count == 0 || count > nw - i)
            return vf_saved_bad(r, "kernel %u: SPIR-V instruction at word %zu (opcode %u) has %u words; %zu are left",
                                k, i, op, count, (size_t)nw - i);
        if (op == SPV_OP_ENTRY_POINT && count >= 4 && word_at(m, i + 1) == SPV_MODEL_GLCOMPUTE) entry = true;
        i += count;
    }
    if (!entry) return vf_saved_bad(r, "kernel %u: the SPIR-V module has no GLCompute entry point", k);
    return true;
}

/* One entry's key and word count, checked against the previous key. */
static bool entry_head(vf_saved_rd *r, uint32_t k, uint64_t prev, uint64_t *key, uint32_t *nw)
{
    size_t at = r->pos;
    *key = U64("kernel key");
    *nw = U32("kernel word count");
    if (r->bad) return false;
    if (*key == 0 || (k > 0 && *key <= prev)) {
        r->pos = at;
        return vf_saved_bad(r, "kernel %u: key %016llx is zero or not above the one before (%016llx): keys ascend, "
                            "each once", k, (unsigned long long)*key, (unsigned long long)prev);
    }
    if (*nw < 5 || *nw > VF_SAVED_MAX_SPIRV_WORDS) {
        r->pos = at + 8;
        return vf_saved_bad(r, "kernel %u: %u SPIR-V words (5..%u)", k, *nw, VF_SAVED_MAX_SPIRV_WORDS);
    }
    return vf_saved_need(r, (size_t)*nw * 4, "kernel SPIR-V");
}

bool vf_saved_read_kernels(vf_saved_rd *r, vf_function *fn)
{
    uint32_t n = vf_saved_count(r, VF_SAVED_MAX_KERNELS, VF_SAVED_KERNEL_MIN, "kernel count");
    if (r->bad) return false;
    size_t first = r->pos;
    uint64_t key = 0, prev = 0;
    uint32_t nw = 0, most = 0;
    for (uint32_t k = 0; k < n; k++, prev = key) {
        if (!entry_head(r, k, prev, &key, &nw) || !check_module(r, k, nw)) return false;
        r->pos += (size_t)nw * 4;
        if (nw > most) most = nw;
    }
    vf_context *ctx = r->ctx;
    const vf_backend_iface *be = ctx->be.iface;
    if (!be->kernel_insert || n == 0) return true; /* no kernel binaries here: the graphs are enough */
    size_t last = r->pos;
    uint32_t *words = vf_malloc(sizeof *words * most);
    if (!words) {
        vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed) (%u SPIR-V words)", most);
        return r->bad = true, false;
    }
    r->pos = first;
    vf_keyset *ks = vf_function_kernels(fn);
    for (uint32_t k = 0; k < n && !r->bad; k++) {
        key = U64("kernel key");
        nw = U32("kernel word count");
        for (uint32_t i = 0; i < nw; i++) words[i] = word_at(r->p + r->pos, i);
        vf_status s = be->kernel_insert(ctx->be.self, key, words, nw);
        if (s == VF_ERROR_FORMAT) {
            vf_saved_bad(r, "kernel %u: %s", k, ctx->be_err.message);
            vf_err_clear(&ctx->be_err);
        } else if (s != VF_OK) {
            vf_backend_failed(ctx, s, "vf_function_load: '%s': kernel %u", r->what, k);
            r->bad = true;
        } else if (!vf_keyset_add(ks, key)) {
            vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
            r->bad = true;
        }
        r->pos += (size_t)nw * 4;
    }
    free(words);
    if (!r->bad) r->pos = last;
    return !r->bad;
}
