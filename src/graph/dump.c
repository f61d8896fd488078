/* Text and DOT dumps of graphs (VKFUSE_DUMP, tests, logs).
 *
 * Text form, one node per line, subgraphs indented:
 *     %3 = add(%1, %2) : f32[?,4]
 *     %5 = cond(%4, %0) then { ... } else { ... } -> 1
 */
#include "graph/graph.h"
#include "graph/uelem.h"
#include "util/dtype.h"
#include "util/sb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void attrs_text(vf_sb *b, const vf_node *n)
{
    const vf_attrs *a = &n->attrs;
    switch (n->kind) {
    case VF_NODE_OP: { /* the fields the op reads (its row's mask) */
        uint32_t m = vf_op_get(n->op)->attrs;
        if (m & VF_ATTR_AXES) vf_sb_add(b, " {axes=0x%x%s}", a->axes_mask, a->keepdims ? " keepdims" : "");
        if (m & VF_ATTR_AXIS) vf_sb_add(b, " {axis=%d}", a->axis);
        if ((m & VF_ATTR_TRANS) && (a->trans_a || a->trans_b))
            vf_sb_add(b, " {trans_a=%d trans_b=%d}", a->trans_a, a->trans_b);
        if (m & VF_ATTR_PERM) {
            vf_sb_add(b, " {perm=");
            for (int i = 0; i < n->shape.rank; i++) vf_sb_add(b, "%s%d", i ? "," : "", a->perm[i]);
            vf_sb_add(b, "}");
        }
        if (m & VF_ATTR_DTYPE) vf_sb_add(b, " {to=%s}", vf_dtype_name(a->dtype));
        if (m & VF_ATTR_VALUE) vf_sb_add(b, " {value=%g}", a->value);
        if (m & VF_ATTR_SEED) vf_sb_add(b, " {seed=%llu}", (unsigned long long)a->seed);
        if (m & VF_ATTR_WINDOW) { /* lo:hi:step per dim, as NumPy writes a slice */
            vf_sb_add(b, " {%s=", n->op == VF_OP_PAD ? "pad" : "slice");
            for (int i = 0; i < n->shape.rank; i++)
                vf_sb_add(b, "%s%lld:%lld:%lld", i ? "," : "", (long long)a->lo[i], (long long)a->hi[i],
                          (long long)a->step[i]);
            vf_sb_add(b, "}");
        }
        if (m & VF_ATTR_CONV)
            vf_sb_add(b, " {strides=%d,%d dilations=%d,%d pads=%d,%d,%d,%d groups=%d}", a->conv.stride[0],
                      a->conv.stride[1], a->conv.dilation[0], a->conv.dilation[1], a->conv.pad[0], a->conv.pad[1],
                      a->conv.pad[2], a->conv.pad[3], a->conv.groups);
        if ((m & VF_ATTR_CONV) && (a->conv.size[0] || a->conv.size[1]))
            vf_sb_add(b, " {size=%d,%d}", a->conv.size[0], a->conv.size[1]);
        if ((m & VF_ATTR_UELEM) && a->uelem) vf_sb_add(b, " {expr=%s}", a->uelem->expr);
        break;
    }
    case VF_NODE_PARAM: vf_sb_add(b, " #%d", n->index); break;
    case VF_NODE_CAPTURE: vf_sb_add(b, " #%d%s", n->index, n->is_var ? " (by reference)" : ""); break;
    case VF_NODE_ASSIGN: vf_sb_add(b, " -> variable #%d", n->index); break;
    case VF_NODE_PROJ: vf_sb_add(b, " .%d", n->index); break;
    case VF_NODE_PRINT:
    case VF_NODE_HOST: vf_sb_add(b, " \"%s\"", n->label ? n->label : ""); break;
    case VF_NODE_RESHAPE:
        vf_sb_add(b, " {to=[");
        for (int i = 0; i < n->target.rank; i++) vf_sb_add(b, "%s%lld", i ? "," : "", (long long)n->target.dim[i]);
        vf_sb_add(b, "]}");
        break;
    case VF_NODE_CONST:
        if (n->bytes && n->data) {
            int64_t numel = vf_shape_numel(&n->shape);
            vf_sb_add(b, " {");
            for (int64_t i = 0; i < numel && i < 4; i++)
                vf_sb_add(b, "%s%g", i ? " " : "", vf_load_f64(n->data, n->dtype, i));
            vf_sb_add(b, "%s}", numel > 4 ? " ..." : "");
        }
        break;
    case VF_NODE_WHILE:
        if (n->max_iterations > 0) vf_sb_add(b, " {max_iterations=%d}", n->max_iterations);
        break;
    default: break;
    }
}

static void graph_text(vf_sb *b, const vf_graph *g, int depth)
{
    char s[160];
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        vf_sb_add(b, "%*s", depth * 4 + 2, "");
        if (n->kind != VF_NODE_ASSIGN && n->kind != VF_NODE_PRINT) vf_sb_add(b, "%%%d = ", i);
        vf_sb_add(b, "%s(", vf_node_name(n));
        for (int j = 0; j < n->n_in; j++) vf_sb_add(b, "%s%%%d", j ? ", " : "", n->in[j]);
        vf_sb_add(b, ")");
        attrs_text(b, n);
        if (n->kind == VF_NODE_KERNEL) vf_sb_add(b, " [user kernel] -> %d values", n->n_out);
        if (n->kind == VF_NODE_COND || n->kind == VF_NODE_WHILE) {
            const char *names[2][2] = {{"then", "else"}, {"cond", "body"}};
            vf_sb_add(b, " -> %d values\n", n->n_out);
            for (int k = 0; k < 2; k++) {
                vf_sb_add(b, "%*s%s (%d params) {\n", depth * 4 + 4, "", names[n->kind == VF_NODE_WHILE][k],
                          n->sub[k] ? n->sub[k]->n_params : 0);
                if (n->sub[k]) graph_text(b, n->sub[k], depth + 1);
                vf_sb_add(b, "%*s}\n", depth * 4 + 4, "");
            }
            continue;
        }
        if (n->kind != VF_NODE_ASSIGN && n->kind != VF_NODE_PRINT)
            vf_sb_add(b, " : %s", vf_shape_fmt(s, sizeof s, n->dtype, &n->shape));
        vf_sb_add(b, "\n");
    }
    vf_sb_add(b, "%*sreturn(", depth * 4 + 2, "");
    for (int j = 0; j < g->n_outputs; j++) vf_sb_add(b, "%s%%%d", j ? ", " : "", g->outputs[j]);
    vf_sb_add(b, ")\n");
}

char *vf_graph_to_string(const vf_graph *g, const char *name)
{
    vf_sb b = {0};
    vf_sb_add(&b, "graph %s (%d params) {\n", name ? name : "", g->n_params);
    graph_text(&b, g, 0);
    vf_sb_add(&b, "}\n");
    return vf_sb_take(&b);
}

static bool write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

bool vf_graph_dump_text(const vf_graph *g, const char *name, const char *path)
{
    char *t = vf_graph_to_string(g, name);
    bool ok = t && write_file(path, t);
    free(t);
    return ok;
}

/* DOT: one cluster per subgraph; node names are g<graph>_<id>. */
static void graph_dot(vf_sb *b, const vf_graph *g, int *counter)
{
    int me = (*counter)++;
    char s[160];
    for (int i = 0; i < g->n; i++) {
        const vf_node *n = &g->nodes[i];
        const char *shape = vf_node_has_effect(n) ? "box, style=filled, fillcolor=lightpink"
                          : n->kind == VF_NODE_OP ? "box" : "ellipse";
        vf_sb_add(b, "  g%d_%d [shape=%s, label=\"%%%d %s", me, i, shape, i, vf_node_name(n));
        if (n->kind != VF_NODE_COND && n->kind != VF_NODE_WHILE && n->kind != VF_NODE_ASSIGN &&
            n->kind != VF_NODE_PRINT && n->kind != VF_NODE_KERNEL)
            vf_sb_add(b, "\\n%s", vf_shape_fmt(s, sizeof s, n->dtype, &n->shape));
        vf_sb_add(b, "\"];\n");
        for (int j = 0; j < n->n_in; j++) vf_sb_add(b, "  g%d_%d -> g%d_%d;\n", me, n->in[j], me, i);
        for (int k = 0; k < 2; k++) {
            if (!n->sub[k]) continue;
            int sub = *counter;
            vf_sb_add(b, "  subgraph cluster_%d {\n  label=\"%%%d %s\";\n", sub, i,
                      n->kind == VF_NODE_COND ? (k ? "else" : "then") : (k ? "body" : "cond"));
            graph_dot(b, n->sub[k], counter);
            vf_sb_add(b, "  }\n");
        }
    }
    for (int j = 0; j < g->n_outputs; j++) vf_sb_add(b, "  g%d_%d -> g%d_ret;\n", me, g->outputs[j], me);
    vf_sb_add(b, "  g%d_ret [shape=plaintext, label=\"return\"];\n", me);
}

bool vf_graph_dump_dot(const vf_graph *g, const char *name, const char *path)
{
    vf_sb b = {0};
    int counter = 0;
    vf_sb_add(&b, "digraph \"%s\" {\n  rankdir=TB;\n", name ? name : "graph");
    graph_dot(&b, g, &counter);
    vf_sb_add(&b, "}\n");
    char *t = vf_sb_take(&b);
    bool ok = t && write_file(path, t);
    free(t);
    return ok;
}
