/* Greedy offset planning (see memplan.h). */
#include "plan/memplan.h"
#include "util/fault.h"

#include <stdint.h>
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

/* Places the buffers in the given order, each at the lowest offset where
   it fits among the placed ones live at the same time; returns the top. */
static size_t place_in_order(const vf_mem_interval *iv, int n, size_t align, const int *order, bool *done,
                             placed *conf, size_t *offsets)
{
    for (int j = 0; j < n; j++) done[j] = false;
    size_t top = 0;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        size_t size = align_up(iv[i].size, align);
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
    return top;
}

/* Whether buffer a goes before b in ordering `how`; ties by index, so
   every order is deterministic. */
static bool before(const vf_mem_interval *iv, int how, int a, int b)
{
    const vf_mem_interval *x = &iv[a], *y = &iv[b];
    switch (how) {
    case 0: /* biggest first, then earlier start */
        if (x->size != y->size) return x->size > y->size;
        if (x->first != y->first) return x->first < y->first;
        break;
    case 1: /* by start: the left-edge order, optimal when sizes are equal */
        if (x->first != y->first) return x->first < y->first;
        if (x->size != y->size) return x->size > y->size;
        break;
    default: { /* biggest size x lifetime first */
        double px = (double)x->size * (x->last - x->first + 1), py = (double)y->size * (y->last - y->first + 1);
        if (px != py) return px > py;
        break;
    }
    }
    return a < b;
}

#define VF_MEMPLAN_ORDERS 3
#define VF_MEMPLAN_SHUFFLES 64 /* tries of perturbed orders while above the lower bound */

bool vf_memplan(const vf_mem_interval *iv, int n, size_t align, size_t *offsets, size_t *total)
{
    *total = 0;
    if (n <= 0) return true;
    int *order = vf_malloc(sizeof *order * (size_t)n);
    bool *done = vf_calloc((size_t)n, sizeof *done);
    placed *conf = vf_malloc(sizeof *conf * (size_t)n);
    size_t *trial = vf_malloc(sizeof *trial * (size_t)n);
    if (!order || !done || !conf || !trial) {
        free(order), free(done), free(conf), free(trial);
        return false;
    }
    /* Greedy placement in a few orders, keeping the lowest arena: biggest
       first is best on most graphs, by start wins when many buffers have
       one size (small tensors padded to the alignment). Insertion sort: n
       is the number of intermediates of one graph. */
    size_t best = 0, bound = vf_memplan_lower_bound(iv, n, align);
    uint64_t rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    for (int how = 0; how < VF_MEMPLAN_ORDERS + VF_MEMPLAN_SHUFFLES && (how == 0 || best > bound); how++) {
        if (how < VF_MEMPLAN_ORDERS) {
            for (int i = 0; i < n; i++) {
                int j = i;
                while (j > 0 && !before(iv, how, order[j - 1], i)) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = i;
            }
        } else { /* a few swaps of the best-first order: escapes ties */
            for (int i = 0; i < n; i++) {
                int j = i;
                while (j > 0 && !before(iv, 0, order[j - 1], i)) {
                    order[j] = order[j - 1];
                    j--;
                }
                order[j] = i;
            }
            for (int k = 0; k < 1 + how % 4 && n > 1; k++) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                int a = (int)(rng % (uint64_t)n), b = (int)((rng >> 32) % (uint64_t)n);
                int t = order[a];
                order[a] = order[b], order[b] = t;
            }
        }
        size_t top = place_in_order(iv, n, align, order, done, conf, trial);
        if (how == 0 || top < best) {
            best = top;
            for (int i = 0; i < n; i++) offsets[i] = trial[i];
        }
    }
    free(order);
    free(done);
    free(conf);
    free(trial);
    *total = best;
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

bool vf_memplan_inplace(const vf_mem_interval *iv, int n, const int *alias, size_t align, size_t *offsets,
                        size_t *total, size_t *bound)
{
    *total = *bound = 0;
    if (n <= 0) return true;
    int *order = vf_malloc(sizeof *order * (size_t)n), *group = vf_malloc(sizeof *group * (size_t)n);
    int *tail = vf_malloc(sizeof *tail * (size_t)n);
    vf_mem_interval *g = vf_malloc(sizeof *g * (size_t)n);
    size_t *goff = vf_malloc(sizeof *goff * (size_t)n);
    bool ok = order && group && tail && g && goff;
    int ng = 0;
    /* By first step, so that a buffer's chain is built before it is
       extended; a buffer joins the group of the one it may alias when that
       one ends where it starts, has its (aligned) size and is still the
       group's last member (one output per dying input). */
    for (int i = 0; ok && i < n; i++) {
        int j = i;
        while (j > 0 && iv[order[j - 1]].first > iv[i].first) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (int i = 0; ok && i < n; i++) group[i] = -1; /* not visited yet */
    for (int k = 0; ok && k < n; k++) {
        int i = order[k], a = alias ? alias[i] : -1;
        if (a >= 0 && a < n && a != i && group[a] >= 0 && tail[group[a]] == a && iv[a].last == iv[i].first &&
            iv[a].first < iv[i].first && align_up(iv[a].size, align) == align_up(iv[i].size, align)) {
            group[i] = group[a];
            tail[group[i]] = i;
            g[group[i]].last = iv[i].last;
            continue;
        }
        group[i] = ng;
        tail[ng] = i;
        g[ng++] = iv[i];
    }
    ok = ok && vf_memplan(g, ng, align, goff, total);
    if (ok) {
        for (int i = 0; i < n; i++) offsets[i] = goff[group[i]];
        *bound = vf_memplan_lower_bound(g, ng, align);
    }
    free(order), free(group), free(tail), free(g), free(goff);
    return ok;
}
