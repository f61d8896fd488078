/* vf_codegen_conv_group: one kernel for a VF_FUSED_CONV group (backend.h):
 * the direct conv2d kernel of codegen_conv.c with the group's elementwise
 * members applied to every output element before the store (bias add
 * over channels, activation, scale, a residual add, ...), as matmul groups
 * do (codegen_matmul_fused.c): the conv's f32 sum is member t<center>, the
 * other members are evaluated in SSA order as locals with their op-table
 * GLSL (codegen_member.c), every group output is stored once and the
 * members' values never touch memory.
 *
 * Extra inputs are read at their broadcast index against the output
 * [N, OH, OW, O], from the element's coordinates: the flat index i when
 * the input has the output's shape, `o` when it is per channel ([O],
 * [1, O], ...), 0 when it is a scalar, and otherwise the sum of the
 * coordinates it does not broadcast times its strides (push constants).
 * An operand that an epilogue member also reads (x + conv(x, w), a
 * residual) is read through the operand's binding.
 */
#include "vulkan/codegen/codegen_fused.h"
#include "vulkan/codegen/codegen_conv.h"
#include "util/dtype.h"

#include <stdio.h>
#include <string.h>

enum { CI_NONE, CI_FLAT, CI_CHANNEL, CI_SCALAR, CI_STRIDED };

typedef struct cf_state {
    const vf_fused_group *grp;
    int center, x_in, w_in;
    int how[VF_KERNEL_MAX_BINDINGS];            /* CI_*: how each input is read by the epilogue */
    uint32_t stride[VF_KERNEL_MAX_BINDINGS][4]; /* CI_STRIDED: per output dim, 0 where it broadcasts */
    bool pushed[CG_MAX_MEMBERS];
    vf_err *err;
} cf_state;

/* How input s (aligned at the trailing dims) is indexed from the output's
   coordinates. */
static int classify(const vf_tref *s, const vf_tref *out, uint32_t stride[4])
{
    uint64_t st = 1;
    bool full = true, scalar = true, chan = true;
    for (int d = 3; d >= 0; d--) {
        int j = d - (4 - s->rank);
        int64_t n = j >= 0 ? s->shape[j] : 1;
        stride[d] = n == 1 ? 0 : (uint32_t)st;
        st *= (uint64_t)n;
        if (n != out->shape[d]) full = false;
        if (n != 1) scalar = false;
        if (n != 1 && d != 3) chan = false;
    }
    return full ? CI_FLAT : scalar ? CI_SCALAR : chan ? CI_CHANNEL : CI_STRIDED;
}

static const char *buf_name(const cf_state *st, int t, char nm[32])
{
    if (t == st->x_in) return "in0";
    if (t == st->w_in) return "in1";
    snprintf(nm, 32, "x%d", t);
    return nm;
}

static vf_status cf_bind(vf_cg *g, void *user)
{
    cf_state *st = user;
    const vf_fused_group *grp = st->grp;
    for (int t = 0; t < grp->n_inputs; t++) {
        char nm[32];
        cg_bind(g, VF_BIND_GROUP + t, grp->tensors[t].dtype, buf_name(st, t, nm), true, false);
    }
    for (int o = 0; o < grp->n_outputs; o++) {
        char nm[32];
        snprintf(nm, sizeof nm, "y%d", o);
        cg_bind(g, VF_BIND_GROUP + grp->n_inputs + o, grp->tensors[grp->n_inputs + o].dtype, nm, false, false);
    }
    return g->status;
}

static void value_ref(vf_sb *s, int src, void *user)
{
    (void)user;
    if (src < 0) vf_sb_add(s, "t%d", VF_FUSED_MEMBER(src));
    else vf_sb_add(s, "x%d", src);
}

static vf_status cf_emit(vf_cg *g, void *user)
{
    cf_state *st = user;
    const vf_fused_group *grp = st->grp;
    vf_sb *s = &g->decl;
    for (int t = 0; t < grp->n_inputs; t++)   /* strides after the conv's geometry */
        for (int d = 0; st->how[t] == CI_STRIDED && d < 4; d++)
            if (st->stride[t][d]) {
                char nm[24];
                snprintf(nm, sizeof nm, "xs%d_%d", t, d);
                cg_push_u32(g, nm, st->stride[t][d]);
            }
    cg_push_fills(g, grp, st->pushed);
    for (int t = 0; t < grp->n_inputs; t++) {
        if (st->how[t] == CI_NONE) continue;
        vf_dtype dt = grp->tensors[t].dtype;
        char fn[32], nm[32];
        snprintf(fn, sizeof fn, "ldx%d", t);
        cg_load_fn(g, fn, buf_name(st, t, nm), dt, cg_ctype_of(dt));
    }
    cg_group_stores(g, grp, "sty", "y");
    for (int m = 0; m < grp->n_members; m++) {
        if (m == st->center) continue;
        vf_status rc = cg_member_fn(s, grp, m, st->err);
        if (rc) return rc;
    }
    vf_sb_puts(s, "\n// the epilogue of y[n][oh][ow][o] (flat index i): every member of the group, then the stores\n"
                  "void epi(uint i, uint n, uint oh, uint ow, uint o, float acc)\n{\n");
    static const char *const coord[4] = {"n", "oh", "ow", "o"};
    for (int t = 0; t < grp->n_inputs; t++) {
        if (st->how[t] == CI_NONE) continue;
        vf_sb_add(s, "    %s x%d = ldx%d(", cg_ctype_name(cg_ctype_of(grp->tensors[t].dtype)), t, t);
        switch (st->how[t]) {
        case CI_FLAT: vf_sb_puts(s, "i"); break;
        case CI_CHANNEL: vf_sb_puts(s, "o"); break;
        case CI_SCALAR: vf_sb_puts(s, "0u"); break;
        default:
            for (int d = 0, terms = 0; d < 4; d++)
                if (st->stride[t][d]) vf_sb_add(s, "%s%s * pc.xs%d_%d", terms++ ? " + " : "", coord[d], t, d);
        }
        vf_sb_puts(s, ");\n");
    }
    for (int m = 0; m < grp->n_members; m++) {
        if (m != st->center) cg_member_eval(s, grp, m, "    ", value_ref, NULL, st->pushed);
        else vf_sb_add(s, "    float t%d = acc;   // conv2d\n", m);
    }
    for (int o = 0; o < grp->n_outputs; o++) vf_sb_add(s, "    sty%d(i, t%d);\n", o, cg_output_member(grp, o));
    vf_sb_puts(s, "}\n");
    return g->status;
}

vf_status vf_codegen_conv_group(const vf_fused_group *grp, const vf_device_caps *caps, vf_gen_kernel *k, vf_err *err)
{
    memset(k, 0, sizeof *k);
    int center = grp->center;
    if (grp->kind != VF_FUSED_CONV || center < 0 || center >= grp->n_members ||
        grp->execs[center].op != VF_OP_CONV2D)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "conv group: no conv2d at its center");
    if (grp->n_outputs == 0) return VF_OK;   /* dead: nothing runs */
    if (grp->n_members > CG_MAX_MEMBERS || grp->n_inputs + grp->n_outputs > VF_KERNEL_MAX_BINDINGS)
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "conv group: %d members and %d tensors (at most %d and %d)",
                          grp->n_members, grp->n_inputs + grp->n_outputs, CG_MAX_MEMBERS, VF_KERNEL_MAX_BINDINGS);
    const vf_exec *cv = &grp->execs[center];
    const vf_tref *out = &cv->out;
    cf_state st = {.grp = grp, .center = center, .err = err};
    st.x_in = grp->members[center].in[0];
    st.w_in = grp->members[center].in[1];
    if (st.x_in < 0 || st.w_in < 0)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "conv group: an operand is computed inside the group");
    if (st.x_in == st.w_in)   /* one tensor as both operands: its two reads would need two bindings */
        return vf_err_set(err, VF_ERROR_UNSUPPORTED, "conv group: the same tensor is input and filter; its nodes "
                          "run one by one");
    if (out->rank != 4)
        return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "conv group: result of rank %d", out->rank);
    for (int m = 0; m < grp->n_members; m++) {
        const vf_exec *e = &grp->execs[m];
        if (m == center) continue;
        if (!cg_member_op(e->op))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "conv group: member %d (%s) is not elementwise", m,
                              vf_op_get(e->op)->name);
        bool splat = e->op == VF_OP_FILL && grp->members[m].out < 0;   /* a literal: any shape */
        if (!splat && (e->out.rank != 4 || memcmp(e->out.shape, out->shape, sizeof(int64_t) * 4)))
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT,
                              "conv group: member %d (%s) does not have the conv's output shape", m,
                              vf_op_get(e->op)->name);
        for (int q = 0; q < e->n_in; q++) {
            int t = grp->members[m].in[q];
            if (t >= 0 && st.how[t] == CI_NONE) st.how[t] = classify(&grp->tensors[t], out, st.stride[t]);
        }
    }
    for (int t = 0; t < grp->n_inputs; t++)
        if (grp->tensors[t].rank > 4)
            return vf_err_set(err, VF_ERROR_INVALID_ARGUMENT, "conv group: input %d of rank %d", t,
                              grp->tensors[t].rank);

    /* the conv as an op of its own: its kernel sees only dtypes and shapes */
    vf_exec e = *cv;
    e.in[0].buf = e.in[1].buf = e.out.buf = NULL;
    e.in[0].offset = e.in[1].offset = e.out.offset = 0;

    char tag[24], what[160];
    snprintf(tag, sizeof tag, "convfused%d", grp->n_members);
    int wl = snprintf(what, sizeof what, "an epilogue of %d op(s):", grp->n_members - 1);
    for (int m = 0; m < grp->n_members && wl < (int)sizeof what - 24; m++)
        if (m != center) wl += snprintf(what + wl, sizeof what - (size_t)wl, " %s", vf_op_get(grp->execs[m].op)->name);
    cg_conv_epilogue epi = {.bind = cf_bind, .emit = cf_emit, .user = &st, .tag = tag, .what = what};
    vf_status s = cg_conv2d(&e, caps, &epi, k, err);
    if (s != VF_OK) vf_kernel_free(k);
    return s;
}
