/* Shared machinery of the GLSL generators (codegen_*.c).
 *
 * A generator builds one dispatch at a time with a vf_cg: it declares the
 * storage buffers (cg_bind), push-constant fields (cg_push_*), typed load /
 * store helpers, writes main() into g->body, and cg_finish() assembles the
 * whole source: version, extensions, a header comment, the prelude, the
 * push block, declarations and body. Push fields are named, so the GLSL
 * depends only on the kernel's pattern while the sizes travel as values:
 * one pipeline serves every size with that pattern. Likewise the
 * workgroup size (cg_workgroup) and any other size chosen from the device
 * (cg_spec) are specialisation constants (kernel.h): the GLSL says WG, SG,
 * TS..., the values travel in d->spec, and one SPIR-V serves every device
 * limit; the workgroup counts are computed from the same values.
 */
#ifndef VF_FUSION_CODEGEN_INTERNAL_H
#define VF_FUSION_CODEGEN_INTERNAL_H

#include "vulkan/codegen/kernel.h"
#include "util/sb.h"

/* Compute types: what a loaded element becomes in the shader. */
typedef enum { VF_CT_FLOAT, VF_CT_INT, VF_CT_UINT, VF_CT_BOOL } vf_ctype;

enum {
    CG_EXT_16BIT = 1u << 0,
    CG_EXT_8BIT = 1u << 1,
    CG_EXT_SUBGROUP = 1u << 2,       /* basic + arithmetic */
    CG_EXT_BALLOT = 1u << 3,         /* subgroupBroadcast */
};

#define CG_MAX_PUSH_FIELDS (VF_PUSH_MAX / 4)

typedef struct vf_cg {
    const vf_exec *e;
    const vf_device_caps *caps;
    vf_err *err;
    vf_dispatch *d;
    vf_sb decl;                  /* helper functions after the push block */
    vf_sb body;                  /* main() and what it needs */
    unsigned ext;
    int n_push;
    char push_name[CG_MAX_PUSH_FIELDS][24];
    char push_type[CG_MAX_PUSH_FIELDS];   /* 'u' uint, 'i' int, 'f' float */
    char spec_name[VF_KERNEL_MAX_SPEC][16];   /* constant_id 1.. (0 is WG) */
    char comment[512];           /* header comment: op, dtypes, pattern */
    bool grid;                   /* cg_groups_linear: a grid-stride loop in main() */
    vf_status status;            /* first failure while building */
} vf_cg;

/* Starts building dispatch d of kernel generation for e. */
void cg_begin(vf_cg *g, const vf_exec *e, const vf_device_caps *caps, vf_err *err, vf_dispatch *d);
/* Declares the next storage buffer: `T name[]` where T is the storage type
   of dtype (vec4 / ivec4 / uvec4 when vec4 is set, 4-byte dtypes only);
   dtype < 0 declares the scratch buffer (uint). Checks device support. */
vf_status cg_bind(vf_cg *g, int bind, int dtype, const char *name, bool readonly, bool vec4);
/* A read-only f32 tensor as a uniform texel buffer `name` (samplerBuffer:
   texelFetch(name, int(i)) is vec4 i of the tensor), where
   caps->texel_reads; the dispatch's texel mask marks its slot. */
vf_status cg_bind_texel(vf_cg *g, int bind, const char *name);
void cg_push_u32(vf_cg *g, const char *name, uint32_t v);
void cg_push_i32(vf_cg *g, const char *name, int32_t v);
void cg_push_f32(vf_cg *g, const char *name, float v);
/* Emits `CT fn(uint i)` loading element i of buffer buf (dtype) as ct. */
void cg_load_fn(vf_cg *g, const char *fn, const char *buf, vf_dtype dt, vf_ctype ct);
/* Emits `void fn(uint i, CT v)` storing v (of compute type ct) converted
   with the cast rules to dtype dt. */
void cg_store_fn(vf_cg *g, const char *fn, const char *buf, vf_dtype dt, vf_ctype ct);
/* The conversion expression (32-bit storage-compatible) of value v. */
void cg_convert(vf_sb *sb, vf_dtype dt, vf_ctype ct, const char *v);
/* Converts expression v of compute type ct to the compute type of dt with
   the cast rules (f16: rounded through f16 bits). (codegen_member.c) */
void cg_to_ctype(vf_sb *s, vf_dtype dt, vf_ctype ct, const char *v);
/* The op-table GLSL expression of op `info` for data of dtype `data`
   (f32 / f16: glsl_f, i32: glsl_i, u32 and bool: glsl_u or else glsl_i);
   NULL: none. */
const char *cg_pick_expr(const vf_op_info *info, vf_dtype data);

/* An elementwise pattern: the output's dims without size-1 dims, adjacent
   dims that every input broadcasts alike merged. (codegen_member.c) */
typedef struct cg_pattern {
    int ndims;
    uint64_t size[VF_MAX_RANK];
    uint32_t bcast[VF_MAX_RANK];   /* bit k: input k broadcasts this dim */
} cg_pattern;
/* in[k] (aligned at the trailing dims) broadcast to out; a scalar output
   gives one dim of size 1 that every input broadcasts. */
void cg_collapse(const vf_tref *out, const vf_tref *const *in, int n_in, cg_pattern *p);
/* Groups for `total` linear workgroups: x, then y, then z as each
   dimension's maxComputeWorkGroupCount runs out. The shader recovers the
   index with vf_group_id() (prelude) and must ignore indices >= total (the
   grid rounds up). Past x * y * z at their limits, main() loops over the
   groups (a grid stride, with a push constant vf_groups). */
vf_status cg_groups_linear(vf_cg *g, uint64_t total);
/* How often each invocation runs main() when `total` linear workgroups
   exceed the device's grid (cg_groups_linear strides over them): its loops
   run that many times, so per-invocation loop counts multiply by it. */
uint64_t cg_grid_rounds(const vf_device_caps *caps, uint64_t total);
/* The most work (loop steps of all invocations together, each a
   multiply-add or a comparison) one op may take, so that it ends well
   within the 120 s fence timeout: 2^35 on a CPU-type device (lavapipe
   runs convolutions at about 1.9e9 multiply-adds a second on an idle
   2-core machine: 18 s), 2^41 on a GPU. conv2d and its gradients and the
   pools refuse past it (scatter_add and top_k have bounds of their own). */
double cg_work_max(const vf_device_caps *caps);
/* VF_ERROR_UNSUPPORTED for a window op of `work` steps (what: their kind)
   past cg_work_max over `images` images, naming the most images per call. */
vf_status cg_work_refused(const vf_device_caps *caps, const char *name, const char *what, double work,
                          int64_t images, vf_err *err);
/* Loop iterations one invocation of a kernel may spend on its main loops
   (caps.max_loop_iterations less a margin); UINT32_MAX when unbounded. */
uint32_t cg_loop_budget(const vf_device_caps *caps);
/* The workgroup size, at least wg, with which `passes` loops over `len`
   elements shared by the workgroup's invocations stay within the loop
   budget (clamped like cg_clamp_wg); 0 when no workgroup is big enough. */
uint32_t cg_wg_for_loops(const vf_device_caps *caps, uint32_t wg, uint64_t len, uint32_t passes, bool pow2);
/* want clamped to the device's workgroup limits (invocations and X size),
   at least 1; pow2: rounded down to a power of two as well. */
uint32_t cg_clamp_wg(const vf_device_caps *caps, uint32_t want, bool pow2);
/* The workgroup size of this dispatch: specialisation constant 0, WG in
   the GLSL (local size (WG, 1, 1)). Must be set before cg_finish. */
void cg_workgroup(vf_cg *g, uint32_t wg);
/* The value cg_workgroup set: what workgroup counts are computed with. */
uint32_t cg_wg(const vf_cg *g);
/* Declares `layout(constant_id = i) const uint name = 1u;` with the next
   free id (1, 2, ...) and records value v for it in d->spec. */
void cg_spec(vf_cg *g, const char *name, uint32_t v);
/* Assembles the source into d->glsl. */
vf_status cg_finish(vf_cg *g, const char *template_name);
/* Frees partial state after a failure. */
void cg_abort(vf_cg *g);

/* Names and types. */
vf_ctype cg_ctype_of(vf_dtype t);
const char *cg_ctype_name(vf_ctype ct);
const char *cg_dtype_tag(vf_dtype t);   /* "f32" ... */
bool cg_dtype_supported(const vf_exec *e, const vf_device_caps *caps, vf_dtype t, vf_err *err);

/* Generators, one per op kind. */
vf_status vf_codegen_random(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
/* generators: RNG_UNIFORM / RNG_NORMAL / RNG_ADVANCE (codegen_random.c) */
vf_status vf_codegen_rng(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_transpose(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_window(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
/* The window ops' index arithmetic (codegen_window.c), shared with the
   fused groups that read through one: whether window w of e fits 32-bit
   index arithmetic; `bool OK = ...; uint IDX = ...;` for source q from int
   coordinates COORD0.., and those coordinates of flat index FLAT in shape. */
vf_status cg_window_check(const vf_exec *e, const vf_window *w, vf_err *err);
void cg_window_source(vf_sb *s, const vf_window *w, int q, const char *coord, const char *ok, const char *idx,
                      const char *push, const char *indent);
/* Pushes source q's offsets as int fields <name>0.. (what `push` names in
   cg_window_source): one kernel serves every offset (a slice's begin). */
void cg_window_push(vf_cg *g, const vf_window *w, int q, const char *name);
void cg_coords(vf_sb *s, int rank, const int64_t *shape, const char *flat, const char *coord, const char *indent);
vf_status vf_codegen_conv2d(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_pool(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_reduce(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_row(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_matmul(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
/* indexing ops (codegen_index.c) */
vf_status vf_codegen_index(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
/* top_k / top_k_indices (codegen_topk.c) and cumsum (codegen_cumsum.c),
   called by vf_codegen_index */
vf_status vf_codegen_top_k(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
vf_status vf_codegen_cumsum(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);
/* scatter_add (codegen_scatter.c), called by vf_codegen_index */
vf_status vf_codegen_scatter(const vf_exec *e, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err);

int64_t cg_numel(const vf_tref *t);

#endif
