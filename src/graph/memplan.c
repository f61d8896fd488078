/* Greedy-by-size offset planning (see memplan.h). */
#include "graph/memplan.h"

#include <stdlib.h>

static size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }

static bool live_together(const vf_mem_interval *a, const vf_mem_interval *b)
{
    return a->first <= b->last && b->first <= a->last;
}

typedef struct placed {
    size_t begin, end;
} placed;

static int by_begin(const void *x, const void *y)
{
    const placed *a = x, *b = y;
    return a->begin < b->begin ? -1 : a->begin > b->begin;
}

bool vf_memplan(const vf_mem_interval *iv, int n, size_t align, size_t *offsets, size_t *total)
{
    *total = 0;
    if (n <= 0) return true;
    int *order = malloc(sizeof *order * (size_t)n);
    bool *done = calloc((size_t)n, sizeof *done);
    placed *conf = malloc(sizeof *conf * (size_t)n);
    if (!order || !done || !conf) {
        free(order), free(done), free(conf);
        return false;
    }
    /* Biggest first; ties by earlier start, so the order is deterministic.
       Insertion sort: n is the number of intermediates of one graph. */
    for (int i = 0; i < n; i++) {
        int j = i;
        while (j > 0) {
            const vf_mem_interval *a = &iv[order[j - 1]], *b = &iv[i];
            if (a->size > b->size || (a->size == b->size && a->first <= b->first)) break;
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    size_t top = 0;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        size_t size = align_up(iv[i].size, align);
        /* The placed buffers live at the same time as i, by offset: take the
           first gap big enough (best-fit by offset keeps the arena low). */
        int nc = 0;
        for (int j = 0; j < n; j++)
            if (done[j] && live_together(&iv[i], &iv[j]))
                conf[nc++] = (placed){offsets[j], offsets[j] + align_up(iv[j].size, align)};
        qsort(conf, (size_t)nc, sizeof *conf, by_begin);
        size_t at = 0;
        for (int c = 0; c < nc; c++) {
            if (conf[c].begin >= at + size) break; /* fits before this one */
            if (conf[c].end > at) at = conf[c].end;
        }
        offsets[i] = at;
        done[i] = true;
        if (at + size > top) top = at + size;
    }
    free(order);
    free(done);
    free(conf);
    *total = top;
    return true;
}

size_t vf_memplan_lower_bound(const vf_mem_interval *iv, int n, size_t align)
{
    size_t best = 0;
    /* The sum of live sizes only rises at a start: check every start. */
    for (int i = 0; i < n; i++) {
        size_t sum = 0;
        for (int j = 0; j < n; j++)
            if (iv[j].first <= iv[i].first && iv[i].first <= iv[j].last) sum += align_up(iv[j].size, align);
        if (sum > best) best = sum;
    }
    return best;
}
