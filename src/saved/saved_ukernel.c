/* A user kernel's node in a saved function (docs/FORMAT.md, "Kernel
 * nodes"): the kernel's name, dtypes, params, workgroup size and counts at
 * the traced sizes, flags and SPIR-V. A loaded kernel has no C callbacks:
 * its output shapes and workgroup counts are the traced ones (its PROJ
 * nodes' shapes), so it runs at the traced input sizes only, and on the
 * CPU backend it has no implementation — unless the loading context has
 * the same kernel (name, SPIR-V, layout): then the node runs that one, as
 * a custom op library registered before loading does in TensorFlow
 * (docs/KERNELS.md). */
#include "api/api.h"
#include "kernels/kernels.h"
#include "saved/saved_rd.h"
#include "graph/graph.h"
#include "util/dtype.h"
#include "util/hash.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool oom(vf_saved_rd *r)
{
    vf_fail(r->ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_load: out of host memory (malloc failed)");
    r->bad = true;
    return false;
}

bool vf_saved_get_kernel(vf_saved_rd *r, vf_graph *g, int id, int i)
{
    vf_node *n = &g->nodes[id];
    vf_ukernel *k = vf_calloc(1, sizeof *k);
    if (!k) return oom(r);
    k->refs = 1;
    k->loaded = true;
    n->uk = k; /* freed with the graph on any failure below */
    uint32_t len = vf_saved_count(r, VF_SAVED_MAX_NAME, 1, "kernel name length");
    if (r->bad) return false;
    snprintf(k->name, sizeof k->name, "%.*s", (int)(len < sizeof k->name ? len : sizeof k->name - 1),
             (const char *)r->p + r->pos);
    r->pos += len;
    uint32_t n_out = U32("kernel outputs");
    if (r->bad) return false;
    if (n->n_in > VF_KERNEL_MAX_INPUTS || n_out < 1 || n_out > VF_KERNEL_MAX_OUTPUTS)
        return vf_saved_bad(r, "node %d: a kernel of %d inputs and %u outputs", i, n->n_in, n_out);
    k->n_in = n->n_in;
    k->n_out = n->n_out = (int)n_out;
    for (int j = 0; j < k->n_out; j++) k->out_spec[j].dtype = (vf_dtype)U8("kernel output dtype");
    for (int j = 0; j < k->n_in; j++) k->in_dt[j] = (vf_dtype)U8("kernel input dtype");
    k->param_bytes = U32("kernel param bytes");
    if (r->bad) return false;
    for (int j = 0; j < k->n_out; j++)
        if (!vf_dtype_valid((int)k->out_spec[j].dtype)) return vf_saved_bad(r, "node %d: kernel output dtype", i);
    for (int j = 0; j < k->n_in; j++)
        if (!vf_dtype_valid((int)k->in_dt[j]) || g->nodes[n->in[j]].dtype != k->in_dt[j])
            return vf_saved_bad(r, "node %d: kernel input %d's dtype differs from its input node's", i, j);
    if (k->param_bytes > VF_KERNEL_MAX_PARAM_BYTES || k->param_bytes % 4)
        return vf_saved_bad(r, "node %d: %u bytes of kernel params", i, k->param_bytes);
    if (!vf_saved_need(r, k->param_bytes, "kernel params")) return false;
    if (k->param_bytes) {
        if (!(n->data = vf_malloc(k->param_bytes))) return oom(r);
        memcpy(n->data, r->p + r->pos, k->param_bytes);
        n->bytes = k->param_bytes;
        r->pos += k->param_bytes;
    }
    k->workgroup_size = U32("kernel workgroup size");
    for (int d = 0; d < 3; d++) k->groups[d] = n->kgroups[d] = U32("kernel workgroups");
    k->uninit = U8("kernel uninitialized_outputs") != 0;
    k->side_effect = U8("kernel side_effect") != 0;
    uint64_t words = U64("kernel SPIR-V words");
    if (r->bad) return false;
    if (!k->workgroup_size || !k->groups[0] || !k->groups[1] || !k->groups[2])
        return vf_saved_bad(r, "node %d: kernel workgroup size or counts of 0", i);
    if (words < 5 || words > VF_SAVED_MAX_SPIRV_WORDS) return vf_saved_bad(r, "node %d: %llu SPIR-V words", i,
                                                                           (unsigned long long)words);
    if (!vf_saved_need(r, (size_t)words * 4, "kernel SPIR-V")) return false;
    if (!(k->spirv = vf_malloc((size_t)words * 4))) return oom(r);
    for (uint64_t w = 0; w < words; w++) k->spirv[w] = U32("kernel SPIR-V");
    k->n_words = (size_t)words;
    k->per_group = k->workgroup_size;
    /* the module as vf_kernel_create checks it, so a damaged one never reaches a driver */
    vf_spirv_info info;
    char msg[1024];
    if (vf_spirv_inspect(k->spirv, k->n_words, &info, msg, sizeof msg) != VF_OK)
        return vf_saved_bad(r, "node %d: kernel '%s': %s", i, k->name, msg);
    if (info.bad_set || info.max_binding >= k->n_in + k->n_out)
        return vf_saved_bad(r, "node %d: kernel '%s' declares bindings it does not have", i, k->name);
    k->key = vf_hash64(k->spirv, k->n_words * 4, 0x75736b);
    /* the same kernel created in the loading context: the node runs it, with
       its callbacks (C implementation, shapes, dispatch, gradient) */
    vf_ukernel *live = vf_kernel_match_live(r->ctx, k);
    if (live) {
        n->uk = vf_ukernel_retain(live);
        vf_ukernel_release(k);
    }
    return true;
}
