/* Elementwise kernels (every VF_KIND_ELEMENTWISE row, FILL) and
 * RANDOM_NORMAL.
 *
 * The op's GLSL comes from its op-table row (glsl_f / glsl_i / glsl_u),
 * wrapped in a function `vf_op(a, b, c)` over the compute types, so a new
 * row needs no change here. Shapes are collapsed first: size-1 output dims
 * vanish and adjacent dims that every input broadcasts (or not) in the
 * same way merge. The resulting broadcast pattern is baked into the index
 * arithmetic; the collapsed sizes are push constants.
 *
 * Fast path (pattern with one dim, i.e. no input broadcasts except whole
 * scalars, 4-byte dtypes, numel % 4 == 0, 16-byte aligned): vec4 loads and
 * stores, 4 vec4 per invocation, workgroup-strided (base + j * WG) so that
 * neighbouring invocations touch neighbouring memory on each step.
 * The workgroup size WG (256 within the device's limits) is a
 * specialisation constant (kernel.h).
 */
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define EW_LOCAL 256u   /* wanted; clamped to the device by cg_clamp_wg */
#define EW_PER_THREAD 4u

static const char *vec_type(vf_dtype t)
{
    return t == VF_F32 ? "vec4" : t == VF_I32 ? "ivec4" : "uvec4";
}

static bool is4(vf_dtype t) { return t == VF_F32 || t == VF_I32 || t == VF_U32; }

static const char *const in_names[3] = {"in0", "in1", "in2"};
static const char *const arg_names[3] = {"a", "b", "c"};

/* Emits the index arithmetic that turns output index `i` into the element
   index of every input (idx0..), walking the collapsed dims innermost
   first. Broadcast dims contribute nothing to that input's index. */
static void emit_index(vf_sb *s, const cg_pattern *p, int n_in)
{
    if (n_in == 0) return;
    if (p->ndims == 1) {
        for (int k = 0; k < n_in; k++)
            vf_sb_add(s, "        uint idx%d = %s;\n", k, (p->bcast[0] >> k) & 1 ? "0u" : "i");
        return;
    }
    vf_sb_puts(s, "        uint rest = i;\n");
    for (int k = 0; k < n_in; k++) vf_sb_add(s, "        uint idx%d = 0u, st%d = 1u;\n", k, k);
    for (int d = p->ndims - 1; d >= 0; d--) {
        vf_sb_add(s, "        {   // dim %d\n", d);
        if (d > 0)
            vf_sb_add(s, "            uint c = rest %% pc.d%d; rest /= pc.d%d;\n", d, d);
        else
            vf_sb_puts(s, "            uint c = rest;\n");
        for (int k = 0; k < n_in; k++) {
            if ((p->bcast[d] >> k) & 1) continue;
            vf_sb_add(s, "            idx%d += c * st%d;", k, k);
            if (d > 0) vf_sb_add(s, " st%d *= pc.d%d;", k, d);
            vf_sb_puts(s, "\n");
        }
        vf_sb_puts(s, "        }\n");
    }
}

static void fill_bits(const vf_exec *e, uint32_t *bits)
{
    uint8_t tmp[4] = {0};
    vf_store_f64(tmp, e->out.dtype, 0, e->attrs.value);
    memcpy(bits, tmp, 4);   /* little-endian: f16 / bool land in the low bits */
}

vf_status vf_codegen_elementwise(const vf_exec *e, const vf_device_caps *caps, vf_kernel *k, vf_err *err)
{
    const vf_op_info *info = vf_op_get(e->op);
    int n_in = info->arity;
    bool fill = info->kind == VF_KIND_SOURCE;
    int data = e->op == VF_OP_WHERE ? 1 : 0;   /* where(cond, a, b): a is the data */
    vf_dtype dt = n_in ? e->in[data].dtype : e->out.dtype;
    const char *expr = fill ? "" : cg_pick_expr(info, dt);
    if (!expr)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL expression for dtype %s in the op table",
                          info->name, vf_dtype_name(dt));
    vf_ctype ct[3];
    for (int i = 0; i < n_in; i++)
        ct[i] = (e->op == VF_OP_WHERE && i == 0) ? VF_CT_BOOL : cg_ctype_of(e->in[i].dtype);
    vf_ctype rt = info->result == VF_RESULT_BOOL ? VF_CT_BOOL : cg_ctype_of(dt);

    cg_pattern p;
    const vf_tref *ins[3] = {&e->in[0], &e->in[1], &e->in[2]};
    cg_collapse(&e->out, ins, n_in, &p);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    bool vec4 = p.ndims == 1 && numel % 4 == 0 && is4(e->out.dtype) && e->out.offset % 16 == 0;
    for (int i = 0; i < n_in; i++) {
        bool scalar = (p.bcast[0] >> i) & 1;
        if (!scalar && (!is4(e->in[i].dtype) || e->in[i].offset % 16 != 0)) vec4 = false;
    }

    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    vf_dispatch *d = g.d;

    /* name and header comment */
    int nl = snprintf(d->name, sizeof d->name, "%s", info->name);
    vf_dtype last = (vf_dtype)-1;
    for (int i = 0; i < n_in; i++) {
        if (e->in[i].dtype != last) nl += snprintf(d->name + nl, sizeof d->name - (size_t)(nl < 64 ? nl : 63),
                                                   "_%s", cg_dtype_tag(e->in[i].dtype));
        last = e->in[i].dtype;
        if (nl >= (int)sizeof d->name) nl = sizeof d->name - 1;
    }
    if (e->out.dtype != last && nl < (int)sizeof d->name - 1)
        nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "_%s", cg_dtype_tag(e->out.dtype));
    bool any_b = false;
    for (int dd = 0; dd < p.ndims; dd++) any_b |= p.bcast[dd] != 0;
    if (nl > (int)sizeof d->name - 1) nl = sizeof d->name - 1;
    if (vec4 && nl < (int)sizeof d->name - 1) {
        nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "_v4");
    } else if (any_b && n_in > 0) {
        for (int i = 0; i < n_in && nl < (int)sizeof d->name - 1; i++) {
            nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, i ? "_" : "_b");
            for (int dd = 0; dd < p.ndims && nl < (int)sizeof d->name - 1; dd++)
                nl += snprintf(d->name + nl, sizeof d->name - (size_t)nl, "%d", (p.bcast[dd] >> i) & 1);
        }
    }
    int cl = snprintf(g.comment, sizeof g.comment, "op %s:", info->name);
    for (int i = 0; i < n_in && cl < (int)sizeof g.comment; i++) {
        cl += snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, " %s%s", i ? ", " : "",
                       cg_dtype_tag(e->in[i].dtype));
    }
    if (cl < (int)sizeof g.comment)
        cl += snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, " -> %s; %d collapsed dim(s)",
                       cg_dtype_tag(e->out.dtype), p.ndims);
    for (int i = 0; i < n_in && cl < (int)sizeof g.comment; i++) {
        cl += snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, "; in%d broadcasts ", i);
        for (int dd = 0; dd < p.ndims && cl < (int)sizeof g.comment; dd++)
            cl += snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, "%c", (p.bcast[dd] >> i) & 1 ? '1' : '0');
    }
    if (vec4 && cl < (int)sizeof g.comment)
        snprintf(g.comment + cl, sizeof g.comment - (size_t)cl, "; vec4 fast path");

    /* buffers: inputs, then the output */
    for (int i = 0; i < n_in; i++) {
        bool scalar = (p.bcast[0] >> i) & 1 && p.ndims == 1;
        cg_bind(&g, VF_BIND_IN0 + i, e->in[i].dtype, in_names[i], true, vec4 && !scalar);
    }
    cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, vec4);
    if (g.status) {
        cg_abort(&g);
        return g.status;
    }

    cg_push_u32(&g, "numel", (uint32_t)(vec4 ? numel / 4 : numel));
    if (p.ndims > 1)
        for (int dd = 0; dd < p.ndims; dd++) {
            char nm[16];
            snprintf(nm, sizeof nm, "d%d", dd);
            cg_push_u32(&g, nm, (uint32_t)p.size[dd]);
        }
    uint32_t fbits = 0;
    if (fill) {
        fill_bits(e, &fbits);
        cg_push_u32(&g, "bits", fbits);
    }

    /* helpers: loads, store, the op */
    vf_sb *s = &g.body;
    for (int i = 0; i < n_in; i++) {
        char fn[16];
        snprintf(fn, sizeof fn, "ld%d", i);
        if (!vec4 || ((p.bcast[0] >> i) & 1)) cg_load_fn(&g, fn, in_names[i], e->in[i].dtype, ct[i]);
    }
    if (fill) {
        const char *conv = e->out.dtype == VF_F32 ? "uintBitsToFloat(pc.bits)"
                         : e->out.dtype == VF_I32 ? "int(pc.bits)"
                         : e->out.dtype == VF_F16 ? "uint16_t(pc.bits)"
                         : e->out.dtype == VF_BOOL ? "uint8_t(pc.bits)" : "pc.bits";
        vf_sb_add(s, "#define VF_FILL_VALUE %s\n\n", conv);
    } else {
        if (!vec4) cg_store_fn(&g, "st", "outv", e->out.dtype, rt);
        vf_sb_add(s, "// the op-table expression of %s for %s\n%s vf_op(", info->name, vf_dtype_name(dt),
                  cg_ctype_name(rt));
        for (int i = 0; i < n_in; i++) vf_sb_add(s, "%s%s %s", i ? ", " : "", cg_ctype_name(ct[i]), arg_names[i]);
        vf_sb_add(s, ")\n{\n    return %s;\n}\n\n", expr);
    }

    cg_workgroup(&g, cg_clamp_wg(caps, EW_LOCAL, false));
    uint32_t per_group = cg_wg(&g) * EW_PER_THREAD;
    vf_sb_add(s, "void main()\n{\n    uint base = vf_group_id() * (WG * %uu) + gl_LocalInvocationID.x;\n",
              EW_PER_THREAD);
    if (vec4) {
        for (int i = 0; i < n_in; i++)
            if ((p.bcast[0] >> i) & 1) vf_sb_add(s, "    %s s%d = ld%d(0u);\n", cg_ctype_name(ct[i]), i, i);
    }
    vf_sb_add(s, "    [[unroll]] for (uint j = 0u; j < %uu; j++) {\n        uint i = base + j * WG;\n"
                 "        if (i >= pc.numel) return;\n", EW_PER_THREAD);
    if (fill) {
        vf_sb_add(s, "        outv[i] = %s(VF_FILL_VALUE);\n", vec4 ? vec_type(e->out.dtype) : "");
    } else if (vec4) {
        for (int i = 0; i < n_in; i++)
            if (!((p.bcast[0] >> i) & 1)) vf_sb_add(s, "        %s v%d = in%d[i];\n", vec_type(e->in[i].dtype), i, i);
        vf_sb_add(s, "        %s r;\n", vec_type(e->out.dtype));
        static const char comp[4] = {'x', 'y', 'z', 'w'};
        for (int c = 0; c < 4; c++) {
            vf_sb v = {0};
            vf_sb_puts(&v, "vf_op(");
            for (int i = 0; i < n_in; i++) {
                if ((p.bcast[0] >> i) & 1) vf_sb_add(&v, "%ss%d", i ? ", " : "", i);
                else vf_sb_add(&v, "%sv%d.%c", i ? ", " : "", i, comp[c]);
            }
            vf_sb_puts(&v, ")");
            vf_sb_add(s, "        r.%c = ", comp[c]);
            if (v.oom) s->oom = true;
            cg_convert(s, e->out.dtype, rt, v.buf ? v.buf : "");
            vf_sb_puts(s, ";\n");
            vf_sb_free(&v);
        }
        vf_sb_puts(s, "        outv[i] = r;\n");
    } else {
        emit_index(s, &p, n_in);
        vf_sb_puts(s, "        st(i, vf_op(");
        for (int i = 0; i < n_in; i++) vf_sb_add(s, "%sld%d(idx%d)", i ? ", " : "", i, i);
        vf_sb_puts(s, "));\n");
    }
    vf_sb_puts(s, "    }\n}\n");

    uint64_t items = vec4 ? numel / 4 : numel;
    cg_groups_linear(&g, (items + per_group - 1) / per_group);
    return cg_finish(&g, NULL);
}

/* RANDOM_NORMAL: invocation k writes elements 2k and 2k+1 (philox.glsl). */
vf_status vf_codegen_random(const vf_exec *e, const vf_device_caps *caps, vf_kernel *k, vf_err *err)
{
    k->n_steps = 1;
    vf_cg g;
    cg_begin(&g, e, caps, err, &k->step[0]);
    snprintf(g.d->name, sizeof g.d->name, "random_normal_%s", cg_dtype_tag(e->out.dtype));
    snprintf(g.comment, sizeof g.comment,
             "op random_normal -> %s: Philox-4x32-10 pair k = elements 2k, 2k+1 (util/philox.h)",
             cg_dtype_tag(e->out.dtype));
    if (!vf_dtype_is_float(e->out.dtype)) {
        cg_abort(&g);
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "random_normal: dtype %s is not a float type",
                          vf_dtype_name(e->out.dtype));
    }
    cg_bind(&g, VF_BIND_OUT, e->out.dtype, "outv", false, false);
    uint64_t numel = (uint64_t)cg_numel(&e->out);
    cg_push_u32(&g, "numel", (uint32_t)numel);
    cg_push_u32(&g, "seed_lo", (uint32_t)e->attrs.seed);
    cg_push_u32(&g, "seed_hi", (uint32_t)(e->attrs.seed >> 32));
    cg_store_fn(&g, "st", "outv", e->out.dtype, VF_CT_FLOAT);
    const char *philox = vf_shader_template("philox.glsl");
    if (!philox) {
        cg_abort(&g);
        return vf_err_set(err, VF_ERROR_COMPILE, "codegen: embedded shader philox.glsl is missing");
    }
    vf_sb_puts(&g.body, philox);
    cg_workgroup(&g, cg_clamp_wg(caps, EW_LOCAL, false));
    vf_sb_puts(&g.body, "\nvoid main()\n{\n"
                       "    uint k = vf_group_id() * WG + gl_LocalInvocationID.x;\n"
                       "    uint i = 2u * k;\n"
                       "    if (i >= pc.numel) return;\n"
                       "    vec2 r = vf_normal_pair(uvec2(pc.seed_lo, pc.seed_hi), k, 0u);\n"
                       "    st(i, r.x);\n"
                       "    if (i + 1u < pc.numel) st(i + 1u, r.y);\n}\n");
    uint64_t pairs = (numel + 1) / 2;
    cg_groups_linear(&g, (pairs + cg_wg(&g) - 1) / cg_wg(&g));
    return cg_finish(&g, NULL);
}
