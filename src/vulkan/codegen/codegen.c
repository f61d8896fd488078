/* vf_codegen_exec: picks the generator for an op's kind, plus the shared
 * pieces every generated kernel uses (buffers, push block, typed loads and
 * stores with the cast rules, workgroup counts, final assembly). */
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/codegen/codegen_internal.h"
#include "util/dtype.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { const char *name; const char *text; } vf_embedded_shader;
extern const vf_embedded_shader vf_embedded_shaders[];

const char *vf_shader_template(const char *name)
{
    if (!name) return NULL;
    for (const vf_embedded_shader *s = vf_embedded_shaders; s->name; s++)
        if (strcmp(s->name, name) == 0) return s->text;
    return NULL;
}

void vf_kernel_free(vf_gen_kernel *k)
{
    if (!k) return;
    for (int i = 0; i < VF_KERNEL_MAX_STEPS; i++) {
        free(k->step[i].glsl);
        k->step[i].glsl = NULL;
    }
    k->n_steps = 0;
    k->scratch_bytes = 0;
}

int64_t cg_numel(const vf_tref *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++) n *= t->shape[i];
    return n;
}

typedef vf_status (*codegen_fn)(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err);

/* The GLSL generator of every op, indexed by op. The size check makes a new
   op (appended to the enum, graph/op.h) that has no entry here fail the
   build; test_op_table checks that no entry is NULL
   (vf_codegen_op_has_generator). */
static const codegen_fn generators[] = {
    [VF_OP_ADD] = vf_codegen_single, [VF_OP_SUB] = vf_codegen_single, [VF_OP_MUL] = vf_codegen_single,
    [VF_OP_DIV] = vf_codegen_single, [VF_OP_POW] = vf_codegen_single, [VF_OP_MAXIMUM] = vf_codegen_single,
    [VF_OP_MINIMUM] = vf_codegen_single,
    [VF_OP_GREATER] = vf_codegen_single, [VF_OP_GREATER_EQUAL] = vf_codegen_single,
    [VF_OP_LESS] = vf_codegen_single, [VF_OP_LESS_EQUAL] = vf_codegen_single, [VF_OP_EQUAL] = vf_codegen_single,
    [VF_OP_NOT_EQUAL] = vf_codegen_single,
    [VF_OP_WHERE] = vf_codegen_single,
    [VF_OP_NEG] = vf_codegen_single, [VF_OP_EXP] = vf_codegen_single, [VF_OP_LOG] = vf_codegen_single,
    [VF_OP_SQRT] = vf_codegen_single, [VF_OP_RSQRT] = vf_codegen_single, [VF_OP_ABS] = vf_codegen_single,
    [VF_OP_TANH] = vf_codegen_single, [VF_OP_SIGMOID] = vf_codegen_single, [VF_OP_RELU] = vf_codegen_single,
    [VF_OP_GELU] = vf_codegen_single, [VF_OP_SIN] = vf_codegen_single, [VF_OP_COS] = vf_codegen_single,
    [VF_OP_CAST] = vf_codegen_single, [VF_OP_COPY] = vf_codegen_single,
    [VF_OP_REDUCE_SUM] = vf_codegen_reduce, [VF_OP_REDUCE_MEAN] = vf_codegen_reduce,
    [VF_OP_REDUCE_MAX] = vf_codegen_reduce, [VF_OP_REDUCE_MIN] = vf_codegen_reduce, [VF_OP_NORM] = vf_codegen_reduce,
    [VF_OP_ARGMAX] = vf_codegen_reduce,
    [VF_OP_SOFTMAX] = vf_codegen_row, [VF_OP_LOG_SOFTMAX] = vf_codegen_row, [VF_OP_SPARSE_XENT] = vf_codegen_row,
    [VF_OP_MATMUL] = vf_codegen_matmul,
    [VF_OP_TRANSPOSE] = vf_codegen_transpose,
    [VF_OP_FILL] = vf_codegen_single,
    [VF_OP_RANDOM_NORMAL] = vf_codegen_random,
    [VF_OP_SQUARE] = vf_codegen_single,
    [VF_OP_SIGN] = vf_codegen_single, [VF_OP_FLOOR] = vf_codegen_single, [VF_OP_CEIL] = vf_codegen_single,
    [VF_OP_ROUND] = vf_codegen_single, [VF_OP_MOD] = vf_codegen_single,
    [VF_OP_LOGICAL_AND] = vf_codegen_single, [VF_OP_LOGICAL_OR] = vf_codegen_single,
    [VF_OP_LOGICAL_NOT] = vf_codegen_single,
    [VF_OP_ERF] = vf_codegen_single, [VF_OP_LOG1P] = vf_codegen_single, [VF_OP_EXPM1] = vf_codegen_single,
    [VF_OP_SOFTPLUS] = vf_codegen_single, [VF_OP_LEAKY_RELU] = vf_codegen_single,
    [VF_OP_CLIP] = vf_codegen_single, [VF_OP_STOP_GRADIENT] = vf_codegen_single,
    [VF_OP_REDUCE_PROD] = vf_codegen_reduce, [VF_OP_REDUCE_ANY] = vf_codegen_reduce,
    [VF_OP_REDUCE_ALL] = vf_codegen_reduce, [VF_OP_LOGSUMEXP] = vf_codegen_reduce,
    [VF_OP_SLICE] = vf_codegen_window, [VF_OP_PAD] = vf_codegen_window, [VF_OP_CONCAT] = vf_codegen_window,
    [VF_OP_SLICE_GRAD] = vf_codegen_window,
    [VF_OP_GATHER] = vf_codegen_index, [VF_OP_SCATTER_ADD] = vf_codegen_index, [VF_OP_IOTA] = vf_codegen_index,
    [VF_OP_CUMSUM] = vf_codegen_index, [VF_OP_TOP_K] = vf_codegen_index, [VF_OP_TOP_K_INDICES] = vf_codegen_index,
    [VF_OP_CONV2D] = vf_codegen_conv2d, [VF_OP_CONV2D_BACKPROP_INPUT] = vf_codegen_conv2d,
    [VF_OP_CONV2D_BACKPROP_FILTER] = vf_codegen_conv2d,
    [VF_OP_MAX_POOL2D] = vf_codegen_pool, [VF_OP_AVG_POOL2D] = vf_codegen_pool,
    [VF_OP_MAX_POOL2D_GRAD] = vf_codegen_pool, [VF_OP_AVG_POOL2D_GRAD] = vf_codegen_pool,
    [VF_OP_RNG_UNIFORM] = vf_codegen_index, [VF_OP_RNG_NORMAL] = vf_codegen_index,
    [VF_OP_RNG_ADVANCE] = vf_codegen_index,
    [VF_OP_USER_KERNEL] = vf_codegen_user,
    [VF_OP_USER_ELEMENTWISE] = vf_codegen_single,
};
_Static_assert(sizeof generators / sizeof generators[0] == VF_OP_COUNT,
               "every op needs a GLSL generator: add the new op's row to generators");

bool vf_codegen_op_has_generator(vf_op op) { return (unsigned)op < VF_OP_COUNT && generators[op]; }

vf_status vf_codegen_exec(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *out, vf_err *err)
{
    memset(out, 0, sizeof *out);
    if (!e || !caps || (unsigned)e->op >= VF_OP_COUNT)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "codegen: invalid op invocation");
    const vf_op_info *info = vf_op_get(e->op);
    if (cg_numel(&e->out) > (int64_t)UINT32_MAX)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "%s: output has %lld elements; kernels index with 32 bits (at most %u)",
                          info->name, (long long)cg_numel(&e->out), UINT32_MAX);
    if (!generators[e->op])
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "%s: no GLSL generator for this op", info->name);
    vf_status st = generators[e->op](e, caps, out, err);
    if (st != VF_OK) vf_kernel_free(out);
    return st;
}

/* ---- types -------------------------------------------------------------- */

vf_ctype cg_ctype_of(vf_dtype t)
{
    switch (t) {
    case VF_F32: case VF_F16: return VF_CT_FLOAT;
    case VF_I32: return VF_CT_INT;
    default: return VF_CT_UINT;   /* u32, and bool loaded as 0/1 */
    }
}

const char *cg_ctype_name(vf_ctype ct)
{
    static const char *const n[] = {"float", "int", "uint", "bool"};
    return n[ct];
}

const char *cg_dtype_tag(vf_dtype t) { return vf_dtype_name(t); }

bool cg_dtype_supported(const vf_exec *e, const vf_device_caps *caps, vf_dtype t, vf_err *err)
{
    const char *op = vf_op_get(e->op)->name;
    if (t == VF_F16 && !caps->storage16) {
        vf_err_set(err, VF_ERROR_UNSUPPORTED,
                   "%s: f16 tensors need 16-bit storage buffers (storageBuffer16BitAccess), which "
                   "this device lacks; cast to f32 first", op);
        return false;
    }
    if (t == VF_BOOL && !caps->storage8) {
        vf_err_set(err, VF_ERROR_UNSUPPORTED,
                   "%s: bool tensors need 8-bit storage buffers (storageBuffer8BitAccess), which "
                   "this device lacks", op);
        return false;
    }
    return true;
}

/* ---- building one dispatch ---------------------------------------------- */

void cg_begin(vf_cg *g, const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d)
{
    memset(g, 0, sizeof *g);
    g->e = e;
    g->caps = caps;
    g->err = err;
    g->d = d;
    memset(d, 0, sizeof *d);
}

void cg_abort(vf_cg *g)
{
    vf_sb_free(&g->decl);
    vf_sb_free(&g->body);
}

static const char *storage_type(int dtype, bool vec4)
{
    switch (dtype) {
    case VF_F32: return vec4 ? "vec4" : "float";
    case VF_I32: return vec4 ? "ivec4" : "int";
    case VF_U32: return vec4 ? "uvec4" : "uint";
    case VF_F16: return "uint16_t";   /* bits: conversions done by vf_h2f / vf_f2h */
    case VF_BOOL: return "uint8_t";
    default: return "uint";           /* scratch */
    }
}

vf_status cg_bind(vf_cg *g, int bind, int dtype, const char *name, bool readonly, bool vec4)
{
    if (g->status) return g->status;
    if (dtype >= 0 && !cg_dtype_supported(g->e, g->caps, (vf_dtype)dtype, g->err))
        return g->status = VF_ERROR_UNSUPPORTED;
    vf_dispatch *d = g->d;
    if (d->n_bindings >= VF_KERNEL_MAX_BINDINGS)
        return g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED, "codegen: too many bindings");
    if (dtype == VF_F16) g->ext |= CG_EXT_16BIT;
    if (dtype == VF_BOOL) g->ext |= CG_EXT_8BIT;
    int slot = d->n_bindings++;
    d->binding[slot] = bind;
    vf_sb_add(&g->decl, "layout(std430, set = 0, binding = %d) %sbuffer Buf%d { %s %s[]; };\n", slot,
              readonly ? "readonly " : "", slot, storage_type(dtype, vec4), name);
    return VF_OK;
}

vf_status cg_bind_texel(vf_cg *g, int bind, const char *name)
{
    if (g->status) return g->status;
    vf_dispatch *d = g->d;
    if (!g->caps->texel_reads)
        return g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED, "codegen: the device has no texel reads");
    if (d->n_bindings >= VF_KERNEL_MAX_BINDINGS)
        return g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED, "codegen: too many bindings");
    int slot = d->n_bindings++;
    d->binding[slot] = bind;
    d->texel |= 1u << slot;
    vf_sb_add(&g->decl, "layout(set = 0, binding = %d) uniform samplerBuffer %s;\n", slot, name);
    return VF_OK;
}

static void push_field(vf_cg *g, const char *name, char type, const void *v)
{
    if (g->status) return;
    if (g->n_push >= CG_MAX_PUSH_FIELDS || (g->n_push + 1) * 4 > (int)g->caps->max_push_constants) {
        g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED,
                               "%s: kernel needs more than %u bytes of push constants",
                               vf_op_get(g->e->op)->name, g->caps->max_push_constants);
        return;
    }
    snprintf(g->push_name[g->n_push], sizeof g->push_name[0], "%s", name);
    g->push_type[g->n_push] = type;
    memcpy(g->d->push + 4 * g->n_push, v, 4);
    g->n_push++;
    g->d->push_size = (uint32_t)(4 * g->n_push);
}

void cg_push_u32(vf_cg *g, const char *name, uint32_t v) { push_field(g, name, 'u', &v); }
void cg_push_i32(vf_cg *g, const char *name, int32_t v) { push_field(g, name, 'i', &v); }
void cg_push_f32(vf_cg *g, const char *name, float v) { push_field(g, name, 'f', &v); }

void cg_load_fn(vf_cg *g, const char *fn, const char *buf, vf_dtype dt, vf_ctype ct)
{
    const char *cn = cg_ctype_name(ct);
    vf_sb *s = &g->decl;
    if (ct == VF_CT_BOOL) {   /* where's condition; any non-zero is true */
        if (dt == VF_F32 || dt == VF_F16)
            vf_sb_add(s, "bool %s(uint i) { return %s != 0.0; }\n", fn,
                      dt == VF_F16 ? "vf_h2f(uint(BUF[i]))" : "BUF[i]");
        else
            vf_sb_add(s, "bool %s(uint i) { return uint(BUF[i]) != 0u; }\n", fn);
    } else {
        const char *raw;
        switch (dt) {
        case VF_F16: raw = "vf_h2f(uint(BUF[i]))"; break;
        case VF_BOOL: raw = "uint(BUF[i])"; break;
        default: raw = "BUF[i]"; break;
        }
        vf_sb_add(s, "%s %s(uint i) { return %s(%s); }\n", cn, fn, cn, raw);
    }
    /* the buffer name goes in by substitution so the format stays simple */
    char *src = vf_sb_take(s);
    memset(s, 0, sizeof *s);
    if (!src) {
        s->oom = true;
        return;
    }
    vf_sb_subst(s, src, "BUF", buf);
    free(src);
}

void cg_convert(vf_sb *s, vf_dtype dt, vf_ctype ct, const char *v)
{
    switch (dt) {
    case VF_F32:
        vf_sb_add(s, ct == VF_CT_BOOL ? "(%s ? 1.0 : 0.0)" : "float(%s)", v);
        break;
    case VF_F16:
        vf_sb_add(s, ct == VF_CT_BOOL ? "(%s ? 0x3c00u : 0u)" : "vf_f2h(float(%s))", v);
        break;
    case VF_I32:
        if (ct == VF_CT_FLOAT) vf_sb_add(s, "vf_f2i(%s)", v);
        else if (ct == VF_CT_BOOL) vf_sb_add(s, "(%s ? 1 : 0)", v);
        else vf_sb_add(s, "int(%s)", v);   /* u32 -> i32 wraps */
        break;
    case VF_U32:
        if (ct == VF_CT_FLOAT) vf_sb_add(s, "vf_f2u(%s)", v);
        else if (ct == VF_CT_BOOL) vf_sb_add(s, "(%s ? 1u : 0u)", v);
        else vf_sb_add(s, "uint(%s)", v);
        break;
    case VF_BOOL:
        if (ct == VF_CT_BOOL) vf_sb_add(s, "(%s ? 1u : 0u)", v);
        else if (ct == VF_CT_FLOAT) vf_sb_add(s, "(%s != 0.0 ? 1u : 0u)", v);   /* NaN -> 1 */
        else vf_sb_add(s, "(%s != %s ? 1u : 0u)", v, ct == VF_CT_INT ? "0" : "0u");
        break;
    }
}

void cg_store_fn(vf_cg *g, const char *fn, const char *buf, vf_dtype dt, vf_ctype ct)
{
    vf_sb *s = &g->decl;
    vf_sb_add(s, "void %s(uint i, %s v) { %s[i] = ", fn, cg_ctype_name(ct), buf);
    if (dt == VF_F16) vf_sb_puts(s, "uint16_t(");
    if (dt == VF_BOOL) vf_sb_puts(s, "uint8_t(");
    cg_convert(s, dt, ct, "v");
    if (dt == VF_F16 || dt == VF_BOOL) vf_sb_puts(s, ")");
    vf_sb_puts(s, "; }\n");
}

vf_status cg_groups_linear(vf_cg *g, uint64_t total)
{
    if (g->status) return g->status;
    if (total == 0) total = 1;
    if (total > UINT32_MAX)
        return g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED, "%s: %llu workgroups; kernels count them with 32 bits",
                                      vf_op_get(g->e->op)->name, (unsigned long long)total);
    uint64_t m[3], n[3], left = total;
    for (int i = 0; i < 3; i++) {
        m[i] = g->caps->max_workgroup_count[i] ? g->caps->max_workgroup_count[i] : 65535;
        n[i] = left < m[i] ? left : m[i];
        left = (left + n[i] - 1) / n[i];
    }
    /* Past x * y * z of the device (only with VKFUSE_TEST_LIMITS on any
       device made so far: 65535^3 is far past 2^32) the grid strides:
       main() runs the kernel for groups g, g + grid, ... (cg_finish). */
    if (n[0] * n[1] * n[2] < total) {
        g->grid = true;
        cg_push_u32(g, "vf_groups", (uint32_t)total);
        if (g->status)
            return g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED,
                                          "%s: %llu workgroups exceed the device's maxComputeWorkGroupCount"
                                          " (%llu x %llu x %llu) and the kernel has no push-constant room left"
                                          " to loop over them", vf_op_get(g->e->op)->name,
                                          (unsigned long long)total, (unsigned long long)m[0],
                                          (unsigned long long)m[1], (unsigned long long)m[2]);
    }
    for (int i = 0; i < 3; i++) g->d->groups[i] = (uint32_t)n[i];
    return VF_OK;
}

uint64_t cg_grid_rounds(const vf_device_caps *caps, uint64_t total)
{
    uint64_t grid = 1;
    for (int i = 0; i < 3; i++) grid *= caps->max_workgroup_count[i] ? caps->max_workgroup_count[i] : 65535;
    return total <= grid ? 1 : (total + grid - 1) / grid;
}

double cg_work_max(const vf_device_caps *caps) { return (double)(caps->is_cpu ? 1ull << 35 : 1ull << 41); }

vf_status cg_work_refused(const vf_device_caps *caps, const char *name, const char *what, double work,
                          int64_t images, vf_err *err)
{
    double most = cg_work_max(caps), per_image = images > 0 ? work / (double)images : work;
    return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                      "%s: about %.3g %s, more than one op may take (%.3g) to end well within the fence timeout: at "
                      "most %llu images per call with these sizes here; split the batch, or use the CPU backend",
                      name, work, what, most, (unsigned long long)(most / per_image));
}

uint32_t cg_loop_budget(const vf_device_caps *caps)
{
    /* a margin for the short loops every kernel has besides its main one
       (subgroup-combining trees, unrolled caches the compiler kept) */
    uint32_t m = caps->max_loop_iterations;
    if (!m) return UINT32_MAX;
    return m > 256 ? m - 64 : m / 2 + 1;
}

uint32_t cg_wg_for_loops(const vf_device_caps *caps, uint32_t wg, uint64_t len, uint32_t passes, bool pow2)
{
    uint64_t budget = cg_loop_budget(caps);
    uint64_t per_pass = budget / (passes ? passes : 1);
    if (per_pass == 0) per_pass = 1;
    uint64_t need = (len + per_pass - 1) / per_pass;   /* invocations sharing the loop */
    if (need <= wg) return wg;
    uint64_t want = 1;
    while (want < need && want < UINT32_MAX / 2) want *= 2;
    uint32_t w = cg_clamp_wg(caps, (uint32_t)want, pow2);
    if (w < wg) w = wg;
    return (len + w - 1) / w * passes <= budget ? w : 0;
}

uint32_t cg_clamp_wg(const vf_device_caps *caps, uint32_t want, bool pow2)
{
    uint32_t wg = want;
    if (caps->max_workgroup_invocations && wg > caps->max_workgroup_invocations) wg = caps->max_workgroup_invocations;
    if (caps->max_workgroup_size[0] && wg > caps->max_workgroup_size[0]) wg = caps->max_workgroup_size[0];
    if (wg < 1) wg = 1;
    if (pow2) {
        uint32_t w = 1;
        while (w <= wg / 2) w *= 2;
        wg = w;
    }
    return wg;
}

void cg_workgroup(vf_cg *g, uint32_t wg)
{
    g->d->spec[0] = wg ? wg : 1;
    if (g->d->n_spec < 1) g->d->n_spec = 1;
}

uint32_t cg_wg(const vf_cg *g) { return g->d->n_spec ? g->d->spec[0] : 1; }

void cg_spec(vf_cg *g, const char *name, uint32_t v)
{
    if (g->status) return;
    if (g->d->n_spec < 1) g->d->n_spec = 1;   /* id 0 stays the workgroup size */
    if (g->d->n_spec >= VF_KERNEL_MAX_SPEC) {
        g->status = vf_err_set(g->err, VF_ERROR_UNSUPPORTED, "codegen: more than %d specialisation constants",
                               VF_KERNEL_MAX_SPEC);
        return;
    }
    uint32_t id = g->d->n_spec++;
    snprintf(g->spec_name[id], sizeof g->spec_name[id], "%s", name);
    g->d->spec[id] = v;
}

vf_status cg_finish(vf_cg *g, const char *template_name)
{
    if (!g->status && (g->d->n_spec < 1 || g->d->spec[0] == 0))
        g->status = vf_err_set(g->err, VF_ERROR_INVALID_ARGUMENT, "codegen: kernel %s has no workgroup size",
                               g->d->name);
    if (g->status) {
        cg_abort(g);
        return g->status;
    }
    const char *prelude = vf_shader_template("prelude.glsl");
    const char *tmpl = template_name ? vf_shader_template(template_name) : "";
    if (!prelude || !tmpl) {
        cg_abort(g);
        return vf_err_set(g->err, VF_ERROR_COMPILE, "codegen: embedded shader %s is missing",
                          !prelude ? "prelude.glsl" : template_name);
    }
    vf_sb s = {0};
    vf_sb_puts(&s, "#version 450\n");
    if (g->ext & CG_EXT_16BIT) vf_sb_puts(&s, "#extension GL_EXT_shader_16bit_storage : require\n");
    if (g->ext & CG_EXT_8BIT) vf_sb_puts(&s, "#extension GL_EXT_shader_8bit_storage : require\n");
    if (g->ext & (CG_EXT_SUBGROUP | CG_EXT_BALLOT)) {
        vf_sb_puts(&s, "#extension GL_KHR_shader_subgroup_basic : require\n");
        vf_sb_puts(&s, "#extension GL_KHR_shader_subgroup_arithmetic : require\n");
    }
    if (g->ext & CG_EXT_BALLOT) vf_sb_puts(&s, "#extension GL_KHR_shader_subgroup_ballot : require\n");
    vf_sb_puts(&s, "#extension GL_EXT_control_flow_attributes : enable\n");
    vf_sb_add(&s, "\n// vkfuse generated kernel %s\n// %s\n\n", g->d->name, g->comment);
    /* sizes chosen from the device: specialisation constants (kernel.h) */
    vf_sb_puts(&s, "layout(local_size_x_id = 0, local_size_y = 1, local_size_z = 1) in;\n"
                   "const uint WG = gl_WorkGroupSize.x;   // specialisation constant 0\n");
    for (uint32_t i = 1; i < g->d->n_spec; i++)
        vf_sb_add(&s, "layout(constant_id = %u) const uint %s = 1u;   // specialisation constant %u\n", i,
                  g->spec_name[i], i);
    vf_sb_puts(&s, "\n");
    if (g->grid) vf_sb_puts(&s, "#define VF_GRID_STRIDE 1   // more workgroups than one dispatch has\n");
    vf_sb_puts(&s, prelude);
    vf_sb_puts(&s, "\nlayout(push_constant) uniform Push {\n");
    for (int i = 0; i < g->n_push; i++)
        vf_sb_add(&s, "    %s %s;\n", g->push_type[i] == 'f' ? "float" : g->push_type[i] == 'i' ? "int" : "uint",
                  g->push_name[i]);
    if (g->n_push == 0) vf_sb_puts(&s, "    uint unused;\n");
    vf_sb_puts(&s, "} pc;\n\n");
    if (g->decl.buf) vf_sb_puts(&s, g->decl.buf);
    vf_sb_puts(&s, "\n");
    if (g->body.buf) vf_sb_puts(&s, g->body.buf);
    if (template_name) {
        vf_sb_add(&s, "\n// ---- template %s ----\n", template_name);
        vf_sb_puts(&s, tmpl);
    }
    if (g->grid && !s.oom) {
        /* the kernel's main() becomes vf_gen_kernel(), run once per linear
           workgroup; its returns end one group, not the loop */
        char *src = vf_sb_take(&s);
        memset(&s, 0, sizeof s);
        if (src) vf_sb_subst(&s, src, "void main()", "void vf_gen_kernel()");
        else s.oom = true;
        free(src);
        vf_sb_puts(&s, "\n// grid stride: pc.vf_groups workgroups over the device's grid\n"
                       "void main()\n{\n"
                       "    uint grid = gl_NumWorkGroups.x * gl_NumWorkGroups.y * gl_NumWorkGroups.z;\n"
                       "    for (vf_gid = vf_grid_id(); vf_gid < pc.vf_groups; vf_gid += grid) {\n"
                       "        vf_gen_kernel();\n"
                       "        // uniform: the next group reuses the shared memory\n"
                       "        if (vf_gid + grid < pc.vf_groups) barrier();\n"
                       "    }\n}\n");
    }
    bool oom = g->decl.oom || g->body.oom;
    cg_abort(g);
    if (g->n_push == 0) g->d->push_size = 4;   /* the block is never empty */
    g->d->glsl = vf_sb_take(&s);
    if (oom || !g->d->glsl) {
        free(g->d->glsl);
        g->d->glsl = NULL;
        return vf_err_set(g->err, VF_ERROR_OUT_OF_MEMORY, "codegen: out of host memory (malloc failed) building GLSL");
    }
    for (int i = 0; i < 3; i++)
        if (g->d->groups[i] == 0) g->d->groups[i] = 1;
    return VF_OK;
}
