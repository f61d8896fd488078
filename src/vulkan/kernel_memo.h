/* The eager kernel memo: from what codegen reads of an exec to the kernel
 * it generated and the pipelines of its steps.
 *
 * An eager op used to run codegen on every call (build the GLSL text, hash
 * it, find the SPIR-V and the pipeline in the caches). The memo keys an
 * exec by everything codegen reads of it (kernel.h's vf_codegen_exec: the
 * op, its attrs, and per tensor its dtype, shape and 16-byte alignment;
 * the device's caps are the runtime's own) and keeps the generated
 * dispatches (push constants, workgroup counts, specialisation values;
 * the GLSL text itself is dropped once compiled) with their pipelines, so
 * an op called again with the same pattern and sizes builds no text and
 * hashes nothing. A hit still counts as a shader-cache memory hit and is
 * tracked for saved functions (vf_vk_shader_hit), as the lookup it
 * replaces was. Keys are compared in full (no trust in the hash alone).
 * Bounded: past VF_VK_MEMO_MAX entries it starts over. Not thread-safe:
 * the runtime is used under the context's lock.
 */
#ifndef VF_VULKAN_KERNEL_MEMO_H
#define VF_VULKAN_KERNEL_MEMO_H

#include "vulkan/codegen/kernel.h"
#include "util/hash.h"

#define VF_VK_MEMO_WORDS 96
#define VF_VK_MEMO_MAX 1024

struct vf_vk_pipeline;

typedef struct vf_vk_memo_entry {
    int n_key;
    uint64_t key[VF_VK_MEMO_WORDS];
    vf_gen_kernel k;                          /* step[i].glsl NULL */
    const struct vf_vk_pipeline *pipe[VF_KERNEL_MAX_STEPS];
    uint64_t spirv[VF_KERNEL_MAX_STEPS];  /* the shader cache's key of each step */
} vf_vk_memo_entry;

typedef struct vf_vk_memo {
    vf_hmap map;                          /* hash of key -> vf_vk_memo_entry* */
    int64_t hits, misses;
} vf_vk_memo;

/* The key of e into w (VF_VK_MEMO_WORDS words); 0: e is not memoised
   (RANDOM_NORMAL: its seed is a push constant that changes every call). */
int vf_vk_memo_key(const vf_exec *e, uint64_t *w);
/* The entry of key (n words); NULL: none. */
const vf_vk_memo_entry *vf_vk_memo_find(vf_vk_memo *m, const uint64_t *key, int n);
/* Moves *ent into the memo (the caller's copy is then empty) and returns
   the stored entry; NULL when out of memory (*ent stays the caller's). */
const vf_vk_memo_entry *vf_vk_memo_add(vf_vk_memo *m, vf_vk_memo_entry *ent);
void vf_vk_memo_free(vf_vk_memo *m);

#endif
