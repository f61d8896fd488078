/* The profile of a vf_function's last call (profile.h): the backend's
 * per-kernel records of the plan it ran, with the graph nodes each kernel
 * computes. A fused kernel names its group's nodes itself; a kernel of one
 * exec is matched to its node here: the first node not yet matched, in
 * node order, that runs that op (execs of one node each come in node order
 * unfused and in group order fused, and groups keep dependency order).
 * The kernels of a traced vf_cond (its guard, its branches' ops) belong
 * to the COND node. */
#include "frontend/profile.h"
#include "util/fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t vf_profile_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vf_fprofile_free(vf_fprofile *p)
{
    free(p->k);
    free(p->names);
    free(p->nodes);
    free(p->ops);
    memset(p, 0, sizeof *p);
}

static bool runs_op(const vf_node *n, vf_op op, const char *kernel)
{
    if (n->kind == VF_NODE_OP) return n->op == op;
    /* a user kernel's exec runs its KERNEL node, known by the kernel's name */
    if (n->kind == VF_NODE_KERNEL) return op == VF_OP_USER_KERNEL && n->uk && !strcmp(n->uk->name, kernel);
    /* assigns, and reshapes of variables, are copies in a plan */
    return op == VF_OP_COPY && (n->kind == VF_NODE_ASSIGN || n->kind == VF_NODE_RESHAPE);
}

/* A node's op name for a record: a static string (readers such as the CLI
   keep them past the function); a user kernel's own name, which its graph
   holds, is the record's name instead. */
static const char *op_name(const vf_node *n)
{
    return n->kind == VF_NODE_KERNEL ? vf_op_get(VF_OP_USER_KERNEL)->name : vf_node_name(n);
}

/* Fills the kernel records of p from the backend's plan profile. */
static vf_status kernels_from_plan(vf_context *ctx, vf_fprofile *p, const vf_graph *g, const vf_plan_prof *pp)
{
    int nk = pp->n_kernels, total = 0;
    for (int i = 0; i < nk; i++) total += pp->kernels[i].nodes ? pp->kernels[i].n_nodes : 1;
    p->k = vf_calloc((size_t)nk + 1, sizeof *p->k);
    p->names = vf_calloc((size_t)nk + 1, sizeof *p->names);
    p->nodes = vf_calloc((size_t)total + 1, sizeof *p->nodes);
    p->ops = vf_calloc((size_t)total + 1, sizeof *p->ops);
    bool *used = vf_calloc((size_t)g->n + 1, sizeof *used);
    if (!p->k || !p->names || !p->nodes || !p->ops || !used) {
        free(used);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_profile: out of host memory (malloc failed)");
    }
    for (int i = 0; i < nk; i++)
        for (int j = 0; pp->kernels[i].nodes && j < pp->kernels[i].n_nodes; j++)
            if (pp->kernels[i].nodes[j] >= 0 && pp->kernels[i].nodes[j] < g->n) used[pp->kernels[i].nodes[j]] = true;
    /* predicate k belongs to the k-th top-level COND (plans number them in node order) */
    int n_cond = 0;
    for (int n = 0; n < g->n; n++) n_cond += g->nodes[n].kind == VF_NODE_COND;
    int *conds = vf_calloc((size_t)n_cond + 1, sizeof *conds);
    if (!conds) {
        free(used);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_profile: out of host memory (malloc failed)");
    }
    for (int n = 0, c = 0; n < g->n; n++)
        if (g->nodes[n].kind == VF_NODE_COND) conds[c++] = n;
    int at = 0;
    vf_function_profile *pub = &p->pub;
    for (int i = 0; i < nk; i++) {
        const vf_plan_kernel_prof *b = &pp->kernels[i];
        vf_kernel_profile *k = &p->k[i];
        snprintf(p->names[i], sizeof p->names[i], "%s", b->name);
        *k = (vf_kernel_profile){.name = p->names[i], .dispatches = b->dispatches, .barriers = b->barriers,
                                 .gpu_ns = pp->timed ? b->gpu_ns : 0, .start_ns = pp->timed ? b->start_ns : 0,
                                 .bytes_read = b->bytes_read, .bytes_written = b->bytes_written,
                                 .nodes = p->nodes + at, .node_ops = p->ops + at};
        if (b->pred >= 0) {
            if (b->pred < n_cond) {
                p->nodes[at] = conds[b->pred];
                p->ops[at++] = vf_node_name(&g->nodes[conds[b->pred]]);
                k->n_nodes = 1;
            }
        } else if (b->nodes) {
            for (int j = 0; j < b->n_nodes; j++)
                if (b->nodes[j] >= 0 && b->nodes[j] < g->n) {
                    p->nodes[at] = b->nodes[j];
                    p->ops[at++] = op_name(&g->nodes[b->nodes[j]]);
                    k->n_nodes++;
                }
        } else if (b->first_exec >= 0) {
            for (int n = 0; n < g->n; n++)
                if (!used[n] && runs_op(&g->nodes[n], b->op, b->name)) {
                    used[n] = true;
                    p->nodes[at] = n;
                    p->ops[at++] = op_name(&g->nodes[n]);
                    k->n_nodes = 1;
                    break;
                }
        }
        pub->bytes_read += k->bytes_read;
        pub->bytes_written += k->bytes_written;
    }
    free(used);
    free(conds);
    pub->n_kernels = nk;
    pub->kernels = p->k;
    pub->dispatches = pp->dispatches;
    pub->barriers = pp->barriers;
    pub->gpu_ns = pp->timed ? pp->gpu_ns : 0;
    pub->timestamps = pp->timed;
    return VF_OK;
}

vf_status vf_fprofile_record(vf_context *ctx, vf_fprofile *p, const vf_graph *g, bool planned, bool eager,
                             uint64_t start_ns, uint64_t wall_ns, int64_t peak_bytes, int64_t call)
{
    vf_fprofile_free(p);
    vf_function_profile *pub = &p->pub;
    pub->profiled = true;
    pub->note = p->note;
    pub->start_ns = start_ns;
    pub->wall_ns = wall_ns;
    pub->peak_bytes = peak_bytes;
    pub->call = call;
    if (eager) {
        snprintf(p->note, sizeof p->note, "the body ran eagerly (vf_run_functions_eagerly / VKFUSE_EAGER): "
                 "wall time only");
        return VF_OK;
    }
    if (!planned) {
        snprintf(p->note, sizeof p->note, "ran node by node on the %s backend (no recorded plan: CPU backend, "
                 "vf_while_loop, printing, or VKFUSE_NO_PLAN): wall time only", ctx->be.iface->name);
        return VF_OK;
    }
    pub->planned = true;
    vf_plan_prof pp = {0};
    if (ctx->be.iface->plan_profile) {
        vf_status s = ctx->be.iface->plan_profile(ctx->be.self, &pp);
        if (s != VF_OK) return vf_backend_failed(ctx, s, "vf_function_profile: reading the plan's timestamps");
    }
    vf_status s = kernels_from_plan(ctx, p, g, &pp);
    if (s != VF_OK) return s;
    if (!pp.timed)
        snprintf(p->note, sizeof p->note, "device '%.100s' has no timestamps on its compute queue (timestampValidBits 0 "
                 "or timestampComputeAndGraphics false): wall time only", ctx->device_name);
    pub->note = p->note;
    return VF_OK;
}
