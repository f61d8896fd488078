/* vf_codegen_matmul_group: one kernel for a VF_FUSED_MATMUL group
 * (backend.h): the matmul tile kernel of codegen_matmul.c with the
 * group's elementwise members applied to every output element before the
 * store (bias add, activation, scale, ...).
 *
 * The template hands epi(b, r, c, acc) the f32 accumulator of C[b][r][c].
 * The matmul's value is rounded to its dtype (f16: through f16 bits, as
 * the unfused kernel stores it), the other members are evaluated in SSA
 * order as locals with their op table GLSL expressions (one function per
 * member; results converted to the compute type of their dtype with the
 * cast rules: codegen_member.c, as for the other kinds), and every group output is stored
 * once — the matmul value too, when it is read outside the group.
 *
 * Extra inputs (not the operands) are read at their broadcast index,
 * built from (b, r, c): a column part (c when the input has the N dim), a
 * row part (r times its row length when it has the M dim) and a batch
 * part: none (no batch dims), b times its matrix size (the output's batch
 * dims exactly), or per-dim strides pushed as constants (anything else).
 * Which case applies is baked in; sizes and strides are push constants.
 * An operand that an epilogue member also reads is read through the
 * operand's binding. Members' results never touch memory.
 */
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/codegen/codegen_matmul.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

#define MF_MAX_BATCH (VF_MAX_RANK - 2)
#define MF_MAX_NODES 64

enum { MF_BATCH_NONE, MF_BATCH_FULL, MF_BATCH_STRIDED };

typedef struct mf_input {
    bool row, col;            /* has the M / N dim (size > 1) */
    int batch;                /* MF_BATCH_* */
    uint64_t stride[MF_MAX_BATCH];   /* STRIDED: per non-1 output batch dim */
    bool epi;                 /* read by an epilogue member */
} mf_input;

typedef struct mf_state {
    const vf_fused_group *grp;
    int center;               /* the matmul's member index */
    int a_in, b_in;           /* group input index of the operands */
    int n_ob;                 /* non-1 output batch dims */
    uint64_t ob[MF_MAX_BATCH];
    mf_input in[VF_KERNEL_MAX_BINDINGS];
    vf_err *err;
    bool pushed[CG_MAX_MEMBERS]; /* fills read from push constants (cg_push_fills) */
} mf_state;

/* Broadcast class of group input t against the output [batch..., M, N]. */
static void classify(mf_state *st, int t, const vf_tref *out)
{
    const vf_tref *s = &st->grp->tensors[t];
    mf_input *in = &st->in[t];
    int R = out->rank, Ri = s->rank;
    in->row = Ri >= 2 && s->shape[Ri - 2] != 1;
    in->col = Ri >= 1 && s->shape[Ri - 1] != 1;
    uint64_t inner = (in->row ? (uint64_t)out->shape[R - 2] : 1) * (in->col ? (uint64_t)out->shape[R - 1] : 1);
    bool any = false, full = true;
    int od = 0;
    for (int d = 0; d < R - 2; d++) {
        int j = d - (R - Ri);
        int64_t n = j >= 0 ? s->shape[j] : 1;
        if (n != 1) any = true;
        if (n != out->shape[d]) full = false;
        if (out->shape[d] == 1) continue;
        uint64_t stride = 0;
        if (n != 1) {
            stride = inner;
            for (int q = j + 1; q < Ri - 2; q++) stride *= (uint64_t)s->shape[q];
        }
        in->stride[od++] = stride;
    }
    in->batch = !any ? MF_BATCH_NONE : full ? MF_BATCH_FULL : MF_BATCH_STRIDED;
}

static vf_status mf_bind(vf_cg *cg, const cg_mm_layout *l, void *user)
{
    mf_state *st = user;
    const vf_fused_group *grp = st->grp;
    bool strided = false;
    for (int t = 0; t < grp->n_inputs; t++) {
        vf_dtype dt = grp->tensors[t].dtype;
        char nm[32];
        if (t == st->a_in) cg_bind(cg, VF_BIND_GROUP + t, dt, l->vec_a ? "A4" : "A", true, l->vec_a);
        if (t == st->b_in) cg_bind(cg, VF_BIND_GROUP + t, dt, l->vec_b ? "B4" : "B", true, l->vec_b);
        if (t != st->a_in && t != st->b_in) {
            snprintf(nm, sizeof nm, "x%d", t);
            cg_bind(cg, VF_BIND_GROUP + t, dt, nm, true, false);
        }
        if (st->in[t].epi && st->in[t].batch == MF_BATCH_STRIDED) {
            strided = true;
            for (int d = 0; d < st->n_ob; d++) {
                snprintf(nm, sizeof nm, "xs%d_%d", t, d);
                cg_push_u32(cg, nm, (uint32_t)st->in[t].stride[d]);
            }
        }
    }
    for (int d = 0; strided && d < st->n_ob; d++) {
        char nm[32];
        snprintf(nm, sizeof nm, "ob%d", d);
        cg_push_u32(cg, nm, (uint32_t)st->ob[d]);
    }
    for (int o = 0; o < grp->n_outputs; o++) {
        char nm[32];
        snprintf(nm, sizeof nm, "y%d", o);
        cg_bind(cg, VF_BIND_GROUP + grp->n_inputs + o, grp->tensors[grp->n_inputs + o].dtype, nm, false, false);
    }
    return cg->status;
}

/* The value name inside epi(): tM for members, xK for inputs. */
static void value_ref(vf_sb *s, int src, void *user)
{
    (void)user;
    if (src < 0) vf_sb_add(s, "t%d", VF_FUSED_MEMBER(src));
    else vf_sb_add(s, "x%d", src);
}

/* The loads of the inputs the epilogue reads, and the per-member op
   functions, into decl. */
static vf_status emit_decls(vf_cg *cg, mf_state *st, const cg_mm_layout *l)
{
    const vf_fused_group *grp = st->grp;
    vf_sb *s = &cg->decl;
    for (int t = 0; t < grp->n_inputs; t++) {
        if (!st->in[t].epi) continue;
        vf_dtype dt = grp->tensors[t].dtype;
        vf_ctype ct = cg_ctype_of(dt);
        char fn[32], nm[32];
        snprintf(fn, sizeof fn, "ldx%d", t);
        bool va = t == st->a_in && l->vec_a, vb = t == st->b_in && l->vec_b;
        if (va || vb)
            vf_sb_add(s, "float %s(uint i) { return %s[i >> 2][i & 3u]; }\n", fn, va ? "A4" : "B4");
        else {
            snprintf(nm, sizeof nm, "x%d", t);
            cg_load_fn(cg, fn, t == st->a_in ? "A" : t == st->b_in ? "B" : nm, dt, ct);
        }
    }
    cg_group_stores(cg, grp, "sty", "y");
    for (int m = 0; m < grp->n_members; m++) {
        if (m == st->center) continue;
        vf_status rc = cg_member_fn(s, grp, m, st->err);
        if (rc) return rc;
    }
    return VF_OK;
}

/* The broadcast index of input t in epi(). */
static void index_expr(vf_sb *s, const mf_state *st, int t)
{
    const mf_input *in = &st->in[t];
    const char *inner = in->row && in->col ? "(pc.M * pc.N)" : in->row ? "pc.M" : in->col ? "pc.N" : "1u";
    int terms = 0;
    if (in->batch == MF_BATCH_FULL) {
        vf_sb_add(s, "b * %s", inner);
        terms++;
    } else if (in->batch == MF_BATCH_STRIDED) {
        for (int d = 0; d < st->n_ob; d++)
            if (in->stride[d]) vf_sb_add(s, "%sbc%d * pc.xs%d_%d", terms++ ? " + " : "", d, t, d);
    }
    if (in->row) vf_sb_add(s, "%sr%s", terms++ ? " + " : "", in->col ? " * pc.N" : "");
    if (in->col) vf_sb_add(s, "%sc", terms++ ? " + " : "");
    if (!terms) vf_sb_puts(s, "0u");
}

static vf_status mf_emit(vf_cg *cg, const cg_mm_layout *l, void *user)
{
    mf_state *st = user;
    const vf_fused_group *grp = st->grp;
    cg_push_fills(cg, grp, st->pushed);   /* after the matmul's own fields */
    vf_status rc = emit_decls(cg, st, l);
    if (rc) return rc;
    vf_sb *s = &cg->decl;
    vf_sb_puts(s, "\n// the epilogue of C[b][r][c]: every member of the group, then the stores\n"
                  "void epi(uint b, uint r, uint c, float acc)\n{\n    uint i = (b * pc.M + r) * pc.N + c;\n");
    bool strided = false;
    for (int t = 0; t < grp->n_inputs; t++) strided |= st->in[t].epi && st->in[t].batch == MF_BATCH_STRIDED;
    if (strided) {   /* coordinates of b along the output's batch dims */
        vf_sb_puts(s, "    uint bq = b;\n");
        for (int d = st->n_ob - 1; d >= 0; d--) {
            if (d > 0) vf_sb_add(s, "    uint bc%d = bq %% pc.ob%d; bq /= pc.ob%d;\n", d, d, d);
            else vf_sb_add(s, "    uint bc0 = bq;\n");
        }
    }
    for (int t = 0; t < grp->n_inputs; t++) {
        if (!st->in[t].epi) continue;
        vf_dtype dt = grp->tensors[t].dtype;
        vf_sb_add(s, "    %s x%d = ldx%d(", cg_ctype_name(cg_ctype_of(dt)), t, t);
        index_expr(s, st, t);
        vf_sb_puts(s, ");\n");
    }
    for (int m = 0; m < grp->n_members; m++) {
        if (m != st->center) {
            cg_member_eval(s, grp, m, "    ", value_ref, NULL, st->pushed);
            continue;
        }
        /* the accumulator rounded to the matmul's dtype, as the unfused kernel stores it */
        vf_dtype dt = grp->execs[m].out.dtype;
        vf_sb_add(s, "    %s t%d = ", cg_ctype_name(cg_ctype_of(dt)), m);
        cg_to_ctype(s, dt, VF_CT_FLOAT, "acc");
        vf_sb_puts(s, ";   // matmul\n");
    }
    for (int o = 0; o < grp->n_outputs; o++) vf_sb_add(s, "    sty%d(i, t%d);\n", o, cg_output_member(grp, o));
    vf_sb_puts(s, "}\n");
    return VF_OK;
}

vf_status vf_codegen_matmul_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    memset(k, 0, sizeof *k);
    int center = grp->center;
    if (grp->kind != VF_FUSED_MATMUL || center < 0 || center >= grp->n_members ||
        grp->execs[center].op != VF_OP_MATMUL)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "matmul group: no matmul at its center");
    if (grp->n_outputs == 0) return VF_OK;   /* dead: nothing runs */
    if (grp->n_members > MF_MAX_NODES || grp->n_inputs > VF_KERNEL_MAX_BINDINGS - 1)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "matmul group: %d members and %d inputs (at most %d and %d)",
                          grp->n_members, grp->n_inputs, MF_MAX_NODES, VF_KERNEL_MAX_BINDINGS - 1);
    const vf_exec *mm = &grp->execs[center];
    const vf_tref *out = &mm->out;
    mf_state st = {.grp = grp, .center = center, .err = err};
    st.a_in = grp->members[center].in[0];
    st.b_in = grp->members[center].in[1];
    if (st.a_in < 0 || st.b_in < 0)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "matmul group: an operand is computed inside the group");
    if (mm->in[0].rank < 2 || mm->in[1].rank < 2)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED,
                          "matmul group: a vector operand (rank 1, its dim dropped from the result) is not "
                          "fused yet; its nodes run one by one");
    if (out->rank < 2 || out->rank - 2 > MF_MAX_BATCH)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "matmul group: result of rank %d", out->rank);
    int n_bind = grp->n_inputs + grp->n_outputs + (st.a_in == st.b_in ? 1 : 0);
    if (n_bind > VF_KERNEL_MAX_BINDINGS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "matmul group: %d tensors exceed the %d bindings of a kernel",
                          n_bind, VF_KERNEL_MAX_BINDINGS);
    for (int m = 0; m < grp->n_members; m++) {
        const vf_exec *e = &grp->execs[m];
        if (m == center) continue;
        if (!cg_member_op(e->op))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "matmul group: member %d (%s) is not elementwise", m,
                              vf_op_get(e->op)->name);
        bool splat = e->op == VF_OP_FILL && grp->members[m].out < 0;   /* a literal: any shape */
        if (!splat && (e->out.rank != out->rank || memcmp(e->out.shape, out->shape, sizeof(int64_t) * (size_t)out->rank)))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                              "matmul group: member %d (%s) does not have the matmul's output shape", m,
                              vf_op_get(e->op)->name);
        for (int q = 0; q < e->n_in; q++) {
            int t = grp->members[m].in[q];
            if (t >= 0) st.in[t].epi = true;
        }
    }
    for (int d = 0; d < out->rank - 2; d++)
        if (out->shape[d] != 1) st.ob[st.n_ob++] = (uint64_t)out->shape[d];
    for (int t = 0; t < grp->n_inputs; t++)
        if (st.in[t].epi) classify(&st, t, out);

    /* the matmul as an op of its own: the tile kernel sees only dtypes and shapes */
    vf_exec e = *mm;
    e.in[0].buf = e.in[1].buf = e.out.buf = NULL;
    e.in[0].offset = e.in[1].offset = e.out.offset = 0;

    char tag[16], what[160];
    snprintf(tag, sizeof tag, "mmfused%d", grp->n_members);
    int wl = snprintf(what, sizeof what, "an epilogue of %d op(s):", grp->n_members - 1);
    for (int m = 0; m < grp->n_members && wl < (int)sizeof what - 24; m++)
        if (m != center) wl += snprintf(what + wl, sizeof what - (size_t)wl, " %s", vf_op_get(grp->execs[m].op)->name);
    cg_mm_epilogue epi = {.bind = mf_bind, .emit = mf_emit, .user = &st, .tag = tag, .what = what};
    vf_status s = cg_matmul(&e, caps, &epi, k, err);
    if (s != VF_OK) vf_kernel_free(k);
    return s;
}
