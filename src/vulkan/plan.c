/* Recorded plans (plan.h): building one.
 *
 * Once per plan: codegen of every exec, pipelines (through the shader and
 * pipeline caches), scratch buffers, one arena buffer for the
 * intermediates (offsets from the frontend's liveness planner), a
 * descriptor pool with one persistent set per dispatch (without push
 * descriptors) and one command buffer, which plan_record.c records with
 * its hazard barriers and runs. */
#include "vulkan/plan_internal.h"
#include "util/fault.h"
#include "vulkan/codegen/codegen_fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t tref_bytes(const vf_tref *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return (size_t)n * vf_dtype_size(t->dtype);
}

static bool same_tensor(const vf_tref *a, const vf_plan_loc *la, const vf_tref *b, const vf_plan_loc *lb)
{
    return la->kind == lb->kind && (la->kind != VF_PLAN_BIND || la->index == lb->index) &&
           a->buf == b->buf && a->offset == b->offset;
}

/* The binding of step slot `slot` from the exec's tensors. */
static vf_status check_loc(vf_vk_runtime *rt, const vf_plan *p, const vf_plan_desc *d, const vf_tref *r,
                           const vf_plan_loc *l, size_t bytes, int x, const char *what, int t)
{
    if ((l->kind == VF_PLAN_FIXED && !r->buf) || (l->kind == VF_PLAN_BIND && (l->index < 0 || l->index >= d->n_binds)) ||
        (l->kind == VF_PLAN_ARENA && r->offset + bytes > p->arena_size))
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: exec %d (%s) tensor %d has no valid location",
                          d->name, x, what, t);
    return VF_OK;
}

/* A binding of a fused group's kernel: VF_BIND_GROUP + t is tensor t of
   the group, its inputs then its outputs. */
static vf_status group_binding(vf_vk_runtime *rt, const vf_plan *p, const vf_plan_desc *d, const vf_plan_fused *f,
                               const vf_dispatch *st, int which, plan_binding *b)
{
    int t = which - VF_BIND_GROUP, n_in = f->group.n_inputs;
    if (t < 0 || t >= n_in + f->group.n_outputs)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT,
                          "plan %s: fused kernel %s binds group tensor %d of %d", d->name, st->name, t,
                          n_in + f->group.n_outputs);
    const vf_tref *r = &f->group.tensors[t];
    const vf_plan_loc *l = &f->loc[t];
    *b = (plan_binding){.kind = l->kind, .index = l->index, .buf = l->kind == VF_PLAN_FIXED ? r->buf : NULL,
                        .offset = r->offset, .bytes = tref_bytes(r), .access = t < n_in ? VF_VK_READ : VF_VK_WRITE};
    if (f->group.kind == VF_FUSED_USER && t >= n_in) b->access |= VF_VK_READ; /* atomics, read-modify-write */
    return check_loc(rt, p, d, r, l, b->bytes, f->first_exec, st->name, t);
}

static vf_status step_binding(vf_vk_runtime *rt, const vf_plan *p, const vf_plan_desc *d, int x,
                              const vf_plan_fused *f, const vf_dispatch *st, int slot, vf_buffer *scratch,
                              plan_binding *b)
{
    const vf_exec *e = &d->execs[x];
    int which = st->binding[slot];
    memset(b, 0, sizeof *b);
    if (which == VF_BIND_SCRATCH && scratch) {
        *b = (plan_binding){.kind = VF_PLAN_FIXED, .buf = scratch, .bytes = scratch->size,
                            .access = VF_VK_READ | VF_VK_WRITE};
        return VF_OK;
    }
    if (f && which >= VF_BIND_GROUP) return group_binding(rt, p, d, f, st, which, b);
    int t = which == VF_BIND_OUT ? 3 : which;
    if (which < 0 || (which != VF_BIND_OUT && which >= e->n_in) || which > VF_BIND_OUT)
        return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT,
                          "plan %s: kernel %s binding %d refers to tensor slot %d, which this %s op"
                          " does not have", d->name, st->name, slot, which, vf_op_get(e->op)->name);
    const vf_tref *r = t == 3 ? &e->out : &e->in[t];
    const vf_plan_loc *l = &d->loc[x][t];
    b->kind = l->kind;
    b->index = l->index;
    b->buf = l->kind == VF_PLAN_FIXED ? r->buf : NULL;
    b->offset = r->offset;
    b->bytes = tref_bytes(r);
    b->access = t == 3 ? VF_VK_WRITE : VF_VK_READ;
    if (t == 3)
        for (int i = 0; i < e->n_in; i++)
            if (same_tensor(&e->in[i], &d->loc[x][i], &e->out, l)) b->access |= VF_VK_READ; /* in-place */
    return check_loc(rt, p, d, r, l, b->bytes, x, vf_op_get(e->op)->name, t);
}

/* Adds the steps of kernel k: exec x's, or fused group f's (f not NULL). */
static vf_status add_kernel(vf_vk_runtime *rt, vf_plan *p, const vf_plan_desc *d, int x, const vf_plan_fused *f,
                            const vf_gen_kernel *k)
{
    vf_buffer *scratch = NULL;
    if (k->scratch_bytes) {
        vf_status s = vf_vk_mem_alloc(&rt->mem, k->scratch_bytes, 0, &scratch);
        if (s) return s;
        p->scratch[p->n_scratch++] = scratch;
    }
    const VkPhysicalDeviceLimits *L = &rt->dev.props.limits;
    int rec = -1;
    /* A fused group's execs share their guard (one COND branch): its
       first exec's guards every step of the kernel. */
    bool guarded = d->guards && d->guards[x].pred >= 0;
    if (k->n_steps) {
        /* the graph nodes it runs: a fused group's are its execs' */
        bool known = d->exec_node && (f || d->exec_node[x] >= 0);
        /* a user kernel's parts are all its one node; a guarded group's
           execs all name their COND */
        int nn = f && f->group.kind != VF_FUSED_USER && !guarded ? f->n_execs : 1;
        vf_status s = vf_vk_prof_kernel(rt, &p->prof, k->step[0].name, x, f ? f->n_execs : 1, d->execs[x].op,
                                        known ? &d->exec_node[x] : NULL, known ? nn : 0, &rec);
        if (s) return s;
        if (guarded) p->prof.k[rec].pred = d->guards[x].pred;
    }
    for (int i = 0; i < k->n_steps; i++) {
        const vf_dispatch *st = &k->step[i];
        plan_step *ps = &p->steps[p->n_steps];
        memset(ps, 0, sizeof *ps);
        vf_status s = vf_vk_runtime_dispatch_pipeline(rt, st, &ps->pipe);
        if (s) return s;
        for (int g = 0; g < 3; g++)
            if (st->groups[g] == 0 || st->groups[g] > L->maxComputeWorkGroupCount[g])
                return vf_err_set(rt->err, VF_ERROR_UNSUPPORTED,
                                  "plan %s: kernel %s: %u workgroups in dimension %d (device allows 1..%u)",
                                  d->name, st->name, st->groups[g], g, L->maxComputeWorkGroupCount[g]);
        ps->n_bindings = st->n_bindings;
        for (int j = 0; j < st->n_bindings; j++) {
            s = step_binding(rt, p, d, x, f, st, j, scratch, &ps->b[j]);
            if (s) return s;
        }
        memcpy(ps->push, st->push, sizeof ps->push);
        ps->push_size = st->push_size;
        memcpy(ps->groups, st->groups, sizeof ps->groups);
        ps->barrier_before = i > 0;
        ps->pred = -1;
        ps->slot = -1;
        ps->kernel = rec;
        ps->tier = -1;
        if (guarded) ps->pred = d->guards[x].pred, ps->when = d->guards[x].when;
        p->n_steps++;
    }
    if (k->n_steps) p->n_kernels++;
    return VF_OK;
}

/* ---- guards: the branches of a traced vf_cond ------------------------------ */

/* One thread per guarded step of one predicate: its indirect dispatch
   args are its workgroup counts when the predicate has the step's value,
   else zero (the dispatch does nothing). */
static const char GUARD_GLSL[] =
    "#version 450\n"
    "layout(local_size_x = 64) in;\n"
    "layout(std430, binding = 0) readonly buffer P { uint pred[]; };\n"
    "layout(std430, binding = 1) buffer T { uvec4 t[]; };\n"
    "layout(push_constant) uniform PC { uint first, count, n_slots, pad; } pc;\n"
    "void main() {\n"
    "    bool p = (pred[0] & 0xffu) != 0u;\n" /* a bool is one byte, at the binding's start */
    /* a grid stride: more steps than the device's workgroup count allows */
    "    for (uint i = gl_GlobalInvocationID.x; i < pc.count; i += gl_NumWorkGroups.x * 64u) {\n"
    "        uvec4 tp = t[pc.first + i];\n"
    "        t[pc.n_slots + pc.first + i] = p == (tp.w != 0u) ? uvec4(tp.xyz, 0u) : uvec4(0u);\n"
    "    }\n"
    "}\n";

typedef struct guard_push {
    uint32_t first, count, n_slots, pad;
} guard_push;

/* Puts a guard step before the first step of each predicate, gives every
   guarded step its slot and uploads the templates. */
static vf_status add_guards(vf_vk_runtime *rt, vf_plan *p, const vf_plan_desc *d)
{
    int n = 0;
    for (int i = 0; i < p->n_steps; i++) n += p->steps[i].pred >= 0;
    if (!n) return VF_OK;
    uint32_t (*tmpl)[4] = vf_calloc((size_t)n, sizeof *tmpl);
    plan_step *steps = vf_calloc((size_t)(p->n_steps + d->n_preds) + 1, sizeof *steps);
    vf_status s = tmpl && steps ? VF_OK : vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    if (!s) s = vf_vk_mem_alloc(&rt->mem, (size_t)n * 32, 16, &p->table);
    p->n_slots = n;
    int slot = 0, m = 0;
    for (int k = 0; !s && k < d->n_preds; k++) { /* slots: by predicate, then step order */
        int first = slot;
        for (int i = 0; i < p->n_steps; i++) {
            plan_step *ps = &p->steps[i];
            if (ps->pred != k) continue;
            ps->slot = slot;
            tmpl[slot][0] = ps->groups[0], tmpl[slot][1] = ps->groups[1], tmpl[slot][2] = ps->groups[2];
            tmpl[slot++][3] = ps->when;
        }
        if (slot > first) {
            guard_push gp = {(uint32_t)first, (uint32_t)(slot - first), (uint32_t)n, 0};
            memcpy(p->steps[p->n_steps + k].push, &gp, sizeof gp); /* parked past the end until placed */
        }
    }
    const vf_plan_pred *pr = d->preds;
    bool *placed = vf_calloc((size_t)d->n_preds + 1, sizeof *placed);
    if (!s && !placed) s = vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    for (int i = 0; !s && i < p->n_steps; i++) {
        int k = p->steps[i].pred;
        if (k >= 0 && (k >= d->n_preds || !pr)) {
            s = vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: a guard names predicate %d of %d",
                           d->name, k, d->n_preds);
            break;
        }
        if (k >= 0 && !placed[k]) {
            placed[k] = true;
            plan_step *g = &steps[m++];
            memset(g, 0, sizeof *g);
            s = vf_vk_runtime_glsl_pipeline(rt, GUARD_GLSL, "plan_guard", 2, sizeof(guard_push), &g->pipe);
            if (s) break;
            g->n_bindings = 2;
            g->b[0] = (plan_binding){.kind = pr[k].loc.kind, .index = pr[k].loc.index,
                                     .buf = pr[k].loc.kind == VF_PLAN_FIXED ? pr[k].ref.buf : NULL,
                                     .offset = pr[k].ref.offset, .bytes = 1, .access = VF_VK_READ};
            s = check_loc(rt, p, d, &pr[k].ref, &pr[k].loc, 1, i, "predicate", 0);
            g->b[1] = (plan_binding){.kind = VF_PLAN_FIXED, .buf = p->table, .bytes = (size_t)n * 32,
                                     .access = VF_VK_READ | VF_VK_WRITE};
            memcpy(g->push, p->steps[p->n_steps + k].push, sizeof(guard_push));
            g->push_size = sizeof(guard_push);
            guard_push gp;
            memcpy(&gp, g->push, sizeof gp);
            g->groups[0] = (gp.count + 63) / 64, g->groups[1] = g->groups[2] = 1;
            if (g->groups[0] > rt->dev.props.limits.maxComputeWorkGroupCount[0])
                g->groups[0] = rt->dev.props.limits.maxComputeWorkGroupCount[0];
            g->pred = g->slot = g->tier = -1;
            bool named = pr[k].node >= 0; /* the COND it decides */
            if (!s) s = vf_vk_prof_kernel(rt, &p->prof, "plan_guard", -1, 0, VF_OP_COPY, named ? &pr[k].node : NULL,
                                          named ? 1 : 0, &g->kernel);
            if (!s) p->prof.k[g->kernel].pred = k;
        }
        steps[m++] = p->steps[i];
    }
    free(placed);
    if (!s) {
        uint8_t *map = vf_vk_buffer_map(p->table);
        if (map) {
            memcpy(map, tmpl, (size_t)n * 16);
            s = vf_vk_mem_flush(&rt->mem, p->table, 0, (VkDeviceSize)n * 16);
        } else {
            s = vf_vk_sched_upload(&rt->sched, p->table, 0, tmpl, (VkDeviceSize)n * 16);
        }
    }
    if (!s) {
        free(p->steps);
        p->steps = steps;
        p->n_steps = m;
        steps = NULL;
    }
    free(steps);
    free(tmpl);
    return s;
}

static vf_status create_descriptors(vf_vk_runtime *rt, vf_plan *p)
{
    VkCommandBufferAllocateInfo cai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = rt->sched.cmd_pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    vf_status s = vf_vk_check(rt->err, VF_VKD(&rt->dev, vkAllocateCommandBuffers, rt->dev.device, &cai, &p->cmd),
                              "vkAllocateCommandBuffers");
    if (s || rt->dev.push_descriptors) return s;
    uint32_t n_desc = 0;
    for (int i = 0; i < p->n_steps; i++) n_desc += (uint32_t)p->steps[i].n_bindings;
    VkDescriptorPoolSize size[2] = {{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, n_desc ? n_desc : 1},
                                    {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, n_desc ? n_desc : 1}};
    VkDescriptorPoolCreateInfo pci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
        .maxSets = (uint32_t)(p->n_steps ? p->n_steps : 1),
        .poolSizeCount = 2,
        .pPoolSizes = size,
    };
    s = vf_vk_check(rt->err, VF_VKD(&rt->dev, vkCreateDescriptorPool, rt->dev.device, &pci, NULL, &p->pool),
                    "vkCreateDescriptorPool");
    for (int i = 0; !s && i < p->n_steps; i++) {
        if (!p->steps[i].n_bindings) continue;
        VkDescriptorSetAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
            .descriptorPool = p->pool,
            .descriptorSetCount = 1,
            .pSetLayouts = &p->steps[i].pipe->layout->set_layout,
        };
        s = vf_vk_check(rt->err, VF_VKD(&rt->dev, vkAllocateDescriptorSets, rt->dev.device, &ai, &p->steps[i].set),
                        "vkAllocateDescriptorSets");
    }
    return s;
}

/* Codegen of every fused group; ok[i]: its kernel is kern[i], else (the
   device cannot run it: VF_ERROR_UNSUPPORTED) its execs run one by one. */
static vf_status fused_kernels(vf_vk_runtime *rt, const vf_plan_desc *d, const vf_device_caps *caps,
                               vf_gen_kernel *kern, bool *ok, bool *spill)
{
    *spill = false;
    for (int i = 0; i < d->n_fused; i++) {
        const vf_plan_fused *f = &d->fused[i];
        if (f->first_exec < 0 || f->n_execs < 1 || f->first_exec + f->n_execs > d->n_execs ||
            (i && f->first_exec < d->fused[i - 1].first_exec + d->fused[i - 1].n_execs))
            return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: fused group %d covers execs %d..%d",
                              d->name, i, f->first_exec, f->first_exec + f->n_execs - 1);
        vf_fused_group grp = f->group;   /* its members: the plan's execs */
        grp.execs = d->execs + f->first_exec;
        if (grp.n_members != f->n_execs)
            return vf_err_set(rt->err, VF_ERROR_INVALID_ARGUMENT, "plan %s: fused group %d has %d members for %d execs",
                              d->name, i, grp.n_members, f->n_execs);
        vf_err err = {0};
        vf_status s = vf_codegen_group(&grp, caps, &kern[i], &err);
        ok[i] = s == VF_OK;
        if (s == VF_ERROR_UNSUPPORTED && grp.kind != VF_FUSED_USER) { /* a user kernel's parts never run alone */
            vf_kernel_free(&kern[i]);
            memset(&kern[i], 0, sizeof kern[i]);
            *spill = true;
        } else if (s) {
            return vf_err_set(rt->err, s, "plan %s: %s", d->name, err.message);
        }
    }
    return VF_OK;
}

/* The profile's per-step map and what each kernel's bindings touch. */
static vf_status prof_finish(vf_vk_runtime *rt, vf_plan *p)
{
    vf_status s = vf_vk_prof_finish(rt, &p->prof, p->n_steps);
    for (int i = 0; !s && i < p->n_steps; i++) {
        const plan_step *ps = &p->steps[i];
        vf_plan_kernel_prof *k = &p->prof.k[ps->kernel];
        p->prof.step_kernel[i] = ps->kernel;
        k->dispatches++;
        for (int j = 0; j < ps->n_bindings; j++) {
            if (ps->b[j].access & VF_VK_READ) k->bytes_read += (int64_t)ps->b[j].bytes;
            if (ps->b[j].access & VF_VK_WRITE) k->bytes_written += (int64_t)ps->b[j].bytes;
        }
    }
    return s;
}

/* VKFUSE_CHECK: the GLSL of the kernel starting at exec x, for the report
   to point at. A file that cannot be written is only a warning. */
static void write_glsl(const vf_plan_desc *d, int x, const vf_gen_kernel *k)
{
    if (!d->glsl_dir) return;
    char path[1024];
    snprintf(path, sizeof path, "%s/exec%d.glsl", d->glsl_dir, x);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "vkfuse: warning: VKFUSE_CHECK: cannot write %s\n", path);
        return;
    }
    for (int i = 0; i < k->n_steps; i++) {
        const vf_dispatch *st = &k->step[i];
        fprintf(f, "// plan %s, exec %d, step %d of %d: %s; specialisation constants", d->name, x, i + 1,
                k->n_steps, st->name);
        for (uint32_t c = 0; c < st->n_spec; c++) fprintf(f, " %u=%u", c, st->spec[c]);
        fprintf(f, " (0: workgroup size)\n%s\n", st->glsl ? st->glsl : "// a user kernel's own SPIR-V");
    }
    fclose(f);
}

/* Every step's shader of the plan's kernels (fused ones that compiled,
   kx[x] for the execs that run alone), compiled ahead in parallel. */
static vf_status prepare_shaders(vf_vk_runtime *rt, const vf_plan_desc *d, const vf_gen_kernel *kern, const bool *ok,
                                 const vf_gen_kernel *kx)
{
    int n = 0, cap = (d->n_fused + d->n_execs) * VF_KERNEL_MAX_STEPS;
    const char **glsl = vf_calloc((size_t)cap + 1, sizeof *glsl), **names = vf_calloc((size_t)cap + 1, sizeof *names);
    if (!glsl || !names) {
        free(glsl);
        free(names);
        return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    }
    for (int i = 0; i < d->n_fused; i++)
        for (int j = 0; ok[i] && j < kern[i].n_steps; j++) glsl[n] = kern[i].step[j].glsl, names[n++] = kern[i].step[j].name;
    for (int x = 0; x < d->n_execs; x++)
        for (int j = 0; j < kx[x].n_steps; j++)
            if (kx[x].step[j].glsl) glsl[n] = kx[x].step[j].glsl, names[n++] = kx[x].step[j].name; /* not SPIR-V */
    vf_status s = vf_vk_shaders_prepare(&rt->shaders, n, glsl, names);
    free(glsl);
    free(names);
    return s;
}

vf_status vf_vk_plan_create(vf_vk_runtime *rt, const vf_plan_desc *d, vf_plan **out)
{
    *out = NULL;
    vf_plan *p = vf_calloc(1, sizeof *p);
    if (!p) return vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    p->n_execs = d->n_execs;
    p->n_binds = d->n_binds;
    /* + n_preds: add_guards parks a guard's push constants past the end */
    p->steps = vf_calloc((size_t)d->n_execs * VF_KERNEL_MAX_STEPS + (size_t)d->n_preds + 1, sizeof *p->steps);
    p->scratch = vf_calloc((size_t)d->n_execs + 1, sizeof *p->scratch);
    p->recorded = vf_calloc((size_t)d->n_binds + 1, sizeof *p->recorded);
    vf_gen_kernel *kern = vf_calloc((size_t)d->n_fused + 1, sizeof *kern);
    bool *ok = vf_calloc((size_t)d->n_fused + 1, sizeof *ok), spill = false;
    vf_status s = p->steps && p->scratch && p->recorded && kern && ok
                ? VF_OK : vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    /* the first kernels: matmuls in their quick tier (plan_tier.c) */
    vf_device_caps caps = vf_vk_plan_quick_caps(rt);
    if (!s) s = fused_kernels(rt, d, &caps, kern, ok, &spill);
    /* The kernels of the execs that run alone, then every kernel's shader
       compiled ahead, in parallel (shader_prepare.c), then the steps. */
    vf_gen_kernel *kx = vf_calloc((size_t)d->n_execs + 1, sizeof *kx);
    if (!s && !kx) s = vf_err_set(rt->err, VF_ERROR_OUT_OF_MEMORY, "out of host memory (malloc failed)");
    for (int x = 0, g = 0; !s && x < d->n_execs; x++) {
        if (g < d->n_fused && d->fused[g].first_exec == x && ok[g++]) {
            x += d->fused[g - 1].n_execs - 1;
            continue;
        }
        vf_exec e = d->execs[x];
        if (x == rt->dev.test.wrong_exec && vf_op_get(e.op)->kind == VF_KIND_ELEMENTWISE && e.n_in == 1)
            e.op = e.op == VF_OP_NEG ? VF_OP_ABS : VF_OP_NEG; /* test hook (plan.h) */
        s = vf_codegen_exec(&e, &caps, &kx[x], rt->err);
    }
    if (!s) s = prepare_shaders(rt, d, kern, ok, kx);
    /* The values internal to a group get memory only when the group runs
       unfused. */
    p->arena_size = d->arena_bytes + (spill ? d->spill_bytes : 0);
    if (!s && p->arena_size) s = vf_vk_mem_alloc_arena(&rt->mem, p->arena_size, 256, &p->arena);
    for (int x = 0, g = 0; !s && x < d->n_execs; x++) {
        if (g < d->n_fused && d->fused[g].first_exec == x) {
            const vf_plan_fused *f = &d->fused[g];
            if (ok[g++]) {
                write_glsl(d, x, &kern[g - 1]);
                int first = p->n_steps;
                s = add_kernel(rt, p, d, x, f, &kern[g - 1]);
                if (!s) s = vf_vk_plan_tier_add(rt, p, d, x, f, &kern[g - 1], first);
                x += f->n_execs - 1;
                continue;
            }
        }
        write_glsl(d, x, &kx[x]);
        int first = p->n_steps;
        s = add_kernel(rt, p, d, x, NULL, &kx[x]);
        if (!s && x != rt->dev.test.wrong_exec) s = vf_vk_plan_tier_add(rt, p, d, x, NULL, &kx[x], first);
    }
    for (int x = 0; kx && x < d->n_execs; x++) vf_kernel_free(&kx[x]);
    free(kx);
    vf_vk_shaders_drop_ahead(&rt->shaders);
    for (int i = 0; kern && i < d->n_fused; i++) vf_kernel_free(&kern[i]);
    free(kern);
    free(ok);
    if (!s) s = add_guards(rt, p, d);
    if (!s) s = create_descriptors(rt, p);
    if (!s) s = prof_finish(rt, p);
    if (!s) vf_vk_plan_tier_start(rt, p);
    if (s) {
        vf_vk_plan_destroy(rt, p);
        return s;
    }
    *out = p;
    return VF_OK;
}

void vf_vk_plan_destroy(vf_vk_runtime *rt, vf_plan *p)
{
    if (!p) return;
    /* The command buffer and descriptor sets must outlive the last run. */
    if (p->serial) vf_vk_sched_wait(&rt->sched, p->serial);
    vf_vk_sched_drain(&rt->sched); /* the wait refuses on a lost device */
    vf_vk_plan_tier_free(p);
    vf_vk_prof_free(rt, &p->prof);
    const vf_vk_device_table *vk = &rt->dev.vkd;
    if (p->cmd) vk->vkFreeCommandBuffers(rt->dev.device, rt->sched.cmd_pool, 1, &p->cmd);
    if (p->pool) vk->vkDestroyDescriptorPool(rt->dev.device, p->pool, NULL);
    for (int i = 0; i < p->n_views; i++) vk->vkDestroyBufferView(rt->dev.device, p->views[i], NULL);
    free(p->views);
    if (p->arena) vf_vk_mem_free(&rt->mem, p->arena, rt->sched.completed);
    if (p->table) vf_vk_mem_free(&rt->mem, p->table, rt->sched.completed);
    for (int i = 0; i < p->n_scratch; i++) vf_vk_mem_free(&rt->mem, p->scratch[i], rt->sched.completed);
    free(p->steps);
    free(p->scratch);
    free(p->recorded);
    free(p);
}

void vf_vk_plan_info(const vf_plan *p, vf_plan_info *out)
{
    out->kernels = p->n_kernels;
    out->dispatches = p->n_steps;
    out->barriers = p->barriers;
}

vf_status vf_vk_plan_profile(vf_vk_runtime *rt, vf_plan *p, vf_plan_prof *out)
{
    memset(out, 0, sizeof *out);
    if (!p || !p->valid || !p->serial) return VF_OK;
    vf_status s = vf_vk_sched_wait(&rt->sched, p->serial);
    return s ? s : vf_vk_prof_collect(rt, &p->prof, p->barriers, out);
}
