/* The offset planner of traced-function plans: intermediates whose
 * lifetimes do not overlap share arena space.
 *
 * Each buffer is an interval [first, last] of step indices (inclusive: the
 * step that writes it and the last step that reads it) and a size. Two
 * buffers may share bytes only if their intervals are disjoint; a step's
 * output therefore never shares bytes with that step's inputs.
 *
 * Greedy placement (the "greedy by size for offset calculation" of
 * Pisarchyk and Lee, 2020, as TFLite uses): buffers are placed one by one,
 * each at the lowest aligned offset where it fits between the buffers
 * already placed that are live at the same time. Three orders are tried
 * (biggest first; by first step, the left-edge order that is optimal when
 * all sizes are equal; biggest size x lifetime first), then, while above
 * the lower bound, up to 64 deterministic perturbations of the first
 * (a few swapped pairs); the lowest arena is kept. Close to the lower bound (the largest sum of live sizes at one
 * step) on real graphs: tests/test_fusion_random.c checks <= 1.10x on
 * every random graph; O(n^2) per order. */
#ifndef VF_GRAPH_MEMPLAN_H
#define VF_GRAPH_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct vf_mem_interval {
    size_t size;        /* bytes, > 0 */
    int first, last;    /* first <= last */
} vf_mem_interval;

/* Fills offsets[n] (each a multiple of align, a power of two) and returns
   the arena size; false only when out of host memory. */
bool vf_memplan(const vf_mem_interval *iv, int n, size_t align, size_t *offsets, size_t *total);

/* The lower bound of any plan: the largest sum of (aligned) sizes live at
   one step. */
size_t vf_memplan_lower_bound(const vf_mem_interval *iv, int n, size_t align);

/* vf_memplan with in-place reuse: alias[i] >= 0 (or alias NULL: none)
   says buffer i may take the bytes of buffer alias[i] (an elementwise
   kernel's output and an input that dies at that kernel, same aligned
   size): when alias[i] ends at the step where i starts and no other
   buffer took its bytes, the two are one buffer spanning both. bound gets
   the lower bound of the merged buffers (<= that of iv). */
bool vf_memplan_inplace(const vf_mem_interval *iv, int n, const int *alias, size_t align, size_t *offsets,
                        size_t *total, size_t *bound);

#endif
