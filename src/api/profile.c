/* The profile of a vf_function's last call (profile.h): the backend's
 * per-kernel records of the plan it ran, with the graph nodes each kernel
 * computes. A fused kernel names its group's nodes itself; a kernel of one
 * exec is matched to its node here: the first node not yet matched, in
 * node order, that runs that op (execs of one node each come in node order
 * unfused and in group order fused, and groups keep dependency order).
 * The kernels of a traced vf_cond (its guard, its branches' ops) belong
 * to the COND node. */
#include "api/profile.h"
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

/* Fills the kernel records of p from the backend's profiles of the plans
   of one call, in run order (a split plan's segments); each plan's start
   times are placed on the first's time line. */
static vf_status kernels_from_plans(vf_context *ctx, vf_fprofile *p, const vf_graph *g, const vf_plan_prof *pp, int np)
{
    int nk = 0, total = 0;
    bool timed = np > 0;
    for (int q = 0; q < np; q++) {
        nk += pp[q].n_kernels;
        timed = timed && pp[q].timed;
        for (int i = 0; i < pp[q].n_kernels; i++) total += pp[q].kernels[i].nodes ? pp[q].kernels[i].n_nodes : 1;
    }
    p->k = vf_calloc((size_t)nk + 1, sizeof *p->k);
    p->names = vf_calloc((size_t)nk + 1, sizeof *p->names);
    p->nodes = vf_calloc((size_t)total + 1, sizeof *p->nodes);
    p->ops = vf_calloc((size_t)total + 1, sizeof *p->ops);
    bool *used = vf_calloc((size_t)g->n + 1, sizeof *used);
    if (!p->k || !p->names || !p->nodes || !p->ops || !used) {
        free(used);
        return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_profile: out of host memory (malloc failed)");
    }
    for (int q = 0; q < np; q++)
        for (int i = 0; i < pp[q].n_kernels; i++)
            for (int j = 0; pp[q].kernels[i].nodes && j < pp[q].kernels[i].n_nodes; j++)
                if (pp[q].kernels[i].nodes[j] >= 0 && pp[q].kernels[i].nodes[j] < g->n) used[pp[q].kernels[i].nodes[j]] = true;
    int at = 0, i = 0;
    vf_function_profile *pub = &p->pub;
    for (int q = 0; q < np; q++) {
        /* a later plan's run starts after the first's (one queue) */
        uint64_t shift = timed && pp[q].t0_ns > pp[0].t0_ns ? pp[q].t0_ns - pp[0].t0_ns : 0;
        for (int r = 0; r < pp[q].n_kernels; r++, i++) {
            const vf_plan_kernel_prof *b = &pp[q].kernels[r];
            vf_kernel_profile *k = &p->k[i];
            snprintf(p->names[i], sizeof p->names[i], "%s", b->name);
            *k = (vf_kernel_profile){.name = p->names[i], .dispatches = b->dispatches, .barriers = b->barriers,
                                     .gpu_ns = timed ? b->gpu_ns : 0, .start_ns = timed ? b->start_ns + shift : 0,
                                     .bytes_read = b->bytes_read, .bytes_written = b->bytes_written,
                                     .nodes = p->nodes + at, .node_ops = p->ops + at};
            if (b->nodes) { /* a fused group's, a vf_cond's guard and branches (its COND) */
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
        pub->dispatches += pp[q].dispatches;
        pub->barriers += pp[q].barriers;
        pub->gpu_ns += timed ? pp[q].gpu_ns : 0;
    }
    free(used);
    pub->n_kernels = nk;
    pub->kernels = p->k;
    pub->timestamps = timed;
    return VF_OK;
}

vf_status vf_fprofile_record(vf_context *ctx, vf_fprofile *p, const vf_graph *g, const vf_fplan *fp, bool eager,
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
    if (!fp) {
        snprintf(p->note, sizeof p->note, "ran node by node on the %s backend (no recorded plan: CPU backend, "
                 "vf_while_loop, printing, or VKFUSE_NO_PLAN): wall time only", ctx->be.iface->name);
        return VF_OK;
    }
    pub->planned = true;
    int np = ctx->be.iface->plan_profile ? vf_fplan_n_parts(fp) : 0;
    vf_plan_prof *pp = vf_calloc((size_t)np + 1, sizeof *pp);
    if (!pp) return vf_fail(ctx, VF_ERROR_OUT_OF_MEMORY, "vf_function_profile: out of host memory (malloc failed)");
    for (int q = 0; q < np; q++) {
        vf_status s = ctx->be.iface->plan_profile(ctx->be.self, vf_fplan_part(fp, q), &pp[q]);
        if (s != VF_OK) {
            free(pp);
            return vf_backend_failed(ctx, s, "vf_function_profile: reading the plan's timestamps");
        }
    }
    vf_status s = kernels_from_plans(ctx, p, g, pp, np);
    bool timed = np > 0 && pub->timestamps;
    free(pp);
    if (s != VF_OK) return s;
    if (!timed)
        snprintf(p->note, sizeof p->note, "device '%.100s' has no timestamps on its compute queue (timestampValidBits 0 "
                 "or timestampComputeAndGraphics false): wall time only", ctx->device_name);
    pub->note = p->note;
    return VF_OK;
}
