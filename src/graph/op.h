/* The op table: one enum, one row per op. This is the single place an op
 * is defined — its name, arity, kind, the dtypes it takes and the roles of
 * its inputs, its value over an empty set (and with an empty input), how
 * the partitioner groups it, what the passes and plans may do with it
 * (flags), the attributes it reads, its
 * reference scalar semantics (used by the CPU backend), its GLSL
 * expression (used by codegen). Its gradient rule is an op call, above this
 * layer: the autodiff stage keeps the rules in a table of its own, indexed
 * by op (src/autodiff/grad_table.c). Adding an elementwise op means the
 * enum entry (at the end: the numbers are stored), its row, its entry in
 * each backend's dispatch table (cpu_backend.c cpu_kernels, codegen.c
 * generators: the build fails without it), its entry point in
 * src/api/ops_*.c and include/vkfuse.h, its rule in
 * src/autodiff/grad_rules.c and its row in grad_table.c, and tests.
 */
#ifndef VF_GRAPH_OP_H
#define VF_GRAPH_OP_H

#include "vkfuse.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* APPEND ONLY: saved functions store these numbers (docs/FORMAT.md), so a
   new op goes at the end, before VF_OP_COUNT, and no op is ever removed,
   moved or renumbered; op_table.c pins every number with a static
   assertion. */
typedef enum vf_op {
    /* elementwise binary, result dtype = input dtype */
    VF_OP_ADD, VF_OP_SUB, VF_OP_MUL, VF_OP_DIV, VF_OP_POW, VF_OP_MAXIMUM, VF_OP_MINIMUM,
    /* elementwise binary, result VF_BOOL */
    VF_OP_GREATER, VF_OP_GREATER_EQUAL, VF_OP_LESS, VF_OP_LESS_EQUAL, VF_OP_EQUAL,
    VF_OP_NOT_EQUAL,
    /* elementwise ternary: where(cond, a, b) */
    VF_OP_WHERE,
    /* elementwise unary */
    VF_OP_NEG, VF_OP_EXP, VF_OP_LOG, VF_OP_SQRT, VF_OP_RSQRT, VF_OP_ABS, VF_OP_TANH,
    VF_OP_SIGMOID, VF_OP_RELU, VF_OP_GELU, VF_OP_SIN, VF_OP_COS,
    VF_OP_CAST,  /* attrs.dtype is the target */
    VF_OP_COPY,  /* identity; also broadcasts its input to the output shape */
    /* reductions over attrs.axes_mask of the input */
    VF_OP_REDUCE_SUM, VF_OP_REDUCE_MEAN, VF_OP_REDUCE_MAX, VF_OP_REDUCE_MIN, VF_OP_NORM,
    VF_OP_ARGMAX, /* along attrs.axis, I32 result without that axis */
    /* row ops along attrs.axis */
    VF_OP_SOFTMAX, VF_OP_LOG_SOFTMAX,
    VF_OP_SPARSE_XENT, /* in[0] labels [...], in[1] logits [..., C] -> [...] */
    VF_OP_MATMUL,      /* attrs.trans_a / trans_b; batch dims broadcast */
    VF_OP_TRANSPOSE,   /* attrs.perm */
    /* sources: no inputs */
    VF_OP_FILL,          /* attrs.value */
    VF_OP_RANDOM_NORMAL, /* attrs.seed; see util/philox.h */
    /* appended (numbers are stored): elementwise unary */
    VF_OP_SQUARE,
    /* appended: the math ops of issue 13, kept together */
    VF_OP_SIGN, VF_OP_FLOOR, VF_OP_CEIL, VF_OP_ROUND,
    VF_OP_MOD,                                             /* floor mod: sign of the divisor */
    VF_OP_LOGICAL_AND, VF_OP_LOGICAL_OR, VF_OP_LOGICAL_NOT, /* VF_BOOL */
    VF_OP_ERF, VF_OP_LOG1P, VF_OP_EXPM1, VF_OP_SOFTPLUS,
    VF_OP_LEAKY_RELU,     /* in[1]: alpha, a scalar of x's dtype */
    VF_OP_CLIP,           /* in[1], in[2]: the bounds, scalars of x's dtype */
    VF_OP_STOP_GRADIENT,  /* identity; no gradient flows through */
    VF_OP_REDUCE_PROD, VF_OP_REDUCE_ANY, VF_OP_REDUCE_ALL, VF_OP_LOGSUMEXP,
    /* appended: movement ops with a window (attrs.lo / hi / step; see
       vf_window in backend.h for what each reads) */
    VF_OP_SLICE,   /* NumPy basic slicing, lo/hi/step as the user gave them (resolved per size) */
    VF_OP_PAD,     /* lo / hi elements of attrs.value before / after each dim (step 1) */
    VF_OP_CONCAT,  /* in[0] then in[1] along attrs.axis */
    VF_OP_SLICE_GRAD, /* in[0] (a slice's gradient) scattered into zeros of in[1]'s shape at the
                         positions slice lo/hi/step of in[1] takes; in[1] only gives the shape */
    /* appended: indexing (issue 13; kind VF_KIND_INDEX, backend.h says what
       each exec holds) */
    VF_OP_GATHER,       /* in[0] x, in[1] i32 indices; attrs.axis */
    VF_OP_SCATTER_ADD,  /* in[0] x, in[1] i32 indices, in[2] updates; attrs.axis */
    VF_OP_IOTA,         /* source: element i (row-major) is i; vf_range and vf_one_hot build on it */
    VF_OP_CUMSUM,       /* along attrs.axis; trans_a: exclusive, trans_b: reverse (fields reused so
                           that saved files keep their layout) */
    VF_OP_TOP_K,        /* the k largest along the last axis, sorted; k in attrs.value */
    VF_OP_TOP_K_INDICES,/* their indices (I32), the same order */
    /* appended (numbers are stored): convolution and pooling (issue 13) */
    VF_OP_CONV2D, /* in[0] x [N, H, W, C], in[1] w [KH, KW, C/groups, O]; attrs.conv */
    /* conv2d's gradients (their own ops: strided windows have no cheap
       expression as a conv2d); attrs.conv is the forward's geometry */
    VF_OP_CONV2D_BACKPROP_INPUT,  /* in[0] dy, in[1] w -> dx [N, size, C] */
    VF_OP_CONV2D_BACKPROP_FILTER, /* in[0] x, in[1] dy -> dw [size, C/groups, O] */
    /* pooling over a size[0] x size[1] window of each channel (attrs.conv:
       strides and pads; dilations 1, groups 1); padding never counts */
    VF_OP_MAX_POOL2D, VF_OP_AVG_POOL2D,
    /* their gradients: in[0] x (max: the argmax; avg: the shape), in[1] dy -> dx */
    VF_OP_MAX_POOL2D_GRAD, VF_OP_AVG_POOL2D_GRAD,
    /* appended (numbers are stored): generators (issue 13; kind
       VF_KIND_INDEX: own kernels, never fused). The state is a u32 [2]
       tensor (d_lo, d_hi): the draw number d. Draws: in[0] the state, in[1]
       gives only the result's shape (its data is never read); attrs.seed:
       the key, attrs.dtype: the result's (f32 / f16). Blocks and mappings:
       util/philox.h. RNG_ADVANCE: the state plus 1 (with the carry into
       d_hi), what a generator assigns to its state after each draw. */
    VF_OP_RNG_UNIFORM, VF_OP_RNG_NORMAL, VF_OP_RNG_ADVANCE,
    /* appended (issue 14): a user kernel's call inside a plan (kind
       VF_KIND_USER; traced graphs hold VF_NODE_KERNEL nodes, never this op) */
    VF_OP_USER_KERNEL,
    /* appended (issue 14): a user elementwise op (graph/uelem.h): attrs.uelem
       gives its expression and C function; 1 .. 3 inputs as it says */
    VF_OP_USER_ELEMENTWISE,
    VF_OP_COUNT
} vf_op;

typedef enum {
    VF_KIND_ELEMENTWISE,
    VF_KIND_REDUCTION,
    VF_KIND_ROW,        /* softmax-like: a reduction and a map along one axis */
    VF_KIND_MATMUL,
    VF_KIND_MOVEMENT,
    VF_KIND_SOURCE,
    VF_KIND_INDEX,      /* gather-like (data-dependent addressing) and scans along an axis
                           (cumsum): an own kernel, never fused (shape rules in
                           graph/shape_index.c) */
    VF_KIND_CONV,     /* conv2d (pooling): a window slid over H and W of NHWC */
    VF_KIND_USER,     /* a user kernel (graph/ukernel.h): its own SPIR-V, never fused */
} vf_op_kind;

typedef enum { VF_RESULT_SAME, VF_RESULT_BOOL, VF_RESULT_I32, VF_RESULT_ATTR } vf_result_rule;

/* PROD: products; LSE: log-sum-exp, shifted by the running max. */
typedef enum { VF_COMBINE_NONE, VF_COMBINE_SUM, VF_COMBINE_MAX, VF_COMBINE_MIN, VF_COMBINE_PROD,
               VF_COMBINE_LSE } vf_combine;

/* The value of an op over an empty set (a reduction whose reduced dims
   hold no element, a matmul with k = 0, a cross-entropy with no class):
   what the eager entry points and the interpreter store instead of running
   a kernel (backends never see such an exec). Ops without such a set (the
   result is empty whenever an input is) keep UNDEFINED. */
typedef enum { VF_EMPTY_UNDEFINED, VF_EMPTY_ZERO, VF_EMPTY_NAN, VF_EMPTY_ONE, VF_EMPTY_NEG_INF } vf_empty;

/* What the result is when an input is empty but the result is not, for
   ops whose `empty` is UNDEFINED (the interpreter, for sizes that become
   empty only at run time; the eager entry points apply the same rules). */
typedef enum {
    VF_EMPTY_IN_UNDEFINED,    /* an error: max, min, argmax of nothing */
    VF_EMPTY_IN_FILL_VALUE,   /* every element is attrs.value (pad of an empty input) */
    VF_EMPTY_IN_FILL_ZERO,    /* zeros (slice_grad of an empty slice: no gradient) */
    VF_EMPTY_IN_COPY_OTHER,   /* the other input (concat with an empty side) */
    VF_EMPTY_IN_COPY_FIRST,   /* in[0] unchanged (scatter_add with no updates) */
    VF_EMPTY_IN_NO_INDEX,     /* an error: every index is out of range (gather along a 0 axis) */
} vf_empty_in;

/* How an op centers a row group of the partitioner (plan/partition.c):
   its row input (the data input) is read along its last axis, and
   elementwise producers and consumers over the same rows fuse with it. */
typedef enum {
    VF_ROW_CENTER_NONE,
    VF_ROW_CENTER_AXIS,     /* along attrs.axis, when that is the last axis (softmax) */
    VF_ROW_CENTER_REDUCE,   /* over the last axis only, with keepdims (sum, max, ...) */
    VF_ROW_CENTER_LABELS,   /* always: the rows of the data input, one per label; the
                               index inputs (labels) are read once per row (cross-entropy) */
} vf_row_center;

/* The group an op centers with an elementwise epilogue (plan/partition.c). */
typedef enum { VF_EPILOGUE_NONE, VF_EPILOGUE_MATMUL, VF_EPILOGUE_CONV } vf_epilogue;

/* Per-op facts of the passes and the plan, as bits of a row's `flags`. */
enum {
    /* every element is attrs.value (fill): a literal that joins any
       elementwise group, and a constant for folding */
    VF_OPF_LITERAL = 1u << 0,
    /* reads its inputs at computed indices (the window ops: backend.h
       vf_window): starts an elementwise group its consumers may join */
    VF_OPF_WINDOW_READ = 1u << 1,
    /* never folded on the host: out-of-range indices are the device's to
       handle (an error on the CPU backend, zeros on Vulkan) */
    VF_OPF_NO_FOLD = 1u << 2,
    /* a plan may make its result a view of its inputs' memory instead of a
       kernel (plan/plan_view.c: slice, concat) */
    VF_OPF_VIEW = 1u << 3,
    /* its result holds its input's elements in another order only
       (transpose): of a fill, it is a fill (graph/passes_fills.c) */
    VF_OPF_PERMUTE = 1u << 4,
};

/* Reference semantics of an elementwise op, one function per class of
   dtype. Float ops are computed in double and rounded to the storage type;
   integer ops take and return the values as int64 and the caller wraps the
   result to 32 bits (two's complement), so i32 and u32 overflow wrap as
   they do in GLSL. For WHERE, a is the condition (0 or 1). */
typedef double (*vf_scalar_f)(double a, double b, double c);
typedef int64_t (*vf_scalar_i)(int64_t a, int64_t b, int64_t c, bool is_unsigned);

typedef struct vf_op_info {
    const char *name;        /* "add": used in messages, dumps, kernel names */
    int arity;               /* tensor inputs */
    vf_op_kind kind;
    uint32_t accepts;        /* dtype mask (util/dtype.h) of the data inputs */
    vf_result_rule result;
    /* elementwise only */
    vf_scalar_f cpu_f;       /* NULL: not defined on floats */
    vf_scalar_i cpu_i;       /* NULL: not defined on integers */
    /* GLSL expressions over a, b, c (the loaded inputs, already of the
       compute type: float for f32/f16, int for i32, uint for u32, bool for
       VF_BOOL). May call the helpers of shaders/prelude.glsl (vf_pow,
       vf_max, vf_min, vf_tanh, vf_log, vf_sqrt, vf_rsqrt, vf_sin, vf_cos,
       vf_floor, vf_ceil, vf_round, vf_mod, vf_imod, vf_erf, vf_log1p,
       vf_expm1, vf_softplus).
       glsl_u NULL: same as glsl_i. */
    const char *glsl_f, *glsl_i, *glsl_u;
    /* reductions only */
    vf_combine combine;
    bool square_first;       /* norm */
    bool divide_by_count;    /* mean */
    bool sqrt_after;         /* norm */
    /* Inputs that are not data of the `accepts` dtypes: bit i set = input
       i is a VF_BOOL condition (where's cond) / holds i32 or u32 indices
       (sparse cross-entropy's labels). The other inputs share one dtype,
       that of the first of them (vf_op_data_input). */
    uint8_t cond_in, index_in;
    vf_empty empty;          /* the value over an empty set */
    vf_empty_in empty_in;    /* the result when an input is empty (empty UNDEFINED only) */
    vf_row_center row;       /* how it centers a row group */
    vf_epilogue epilogue;    /* the epilogue group it centers */
    uint32_t flags;          /* VF_OPF_* bits */
    uint32_t attrs;          /* VF_ATTR_* bits: the vf_attrs fields the op reads */
} vf_op_info;

extern const vf_op_info vf_op_table[VF_OP_COUNT];

static inline const vf_op_info *vf_op_get(vf_op op) { return &vf_op_table[op]; }

/* The first input that carries the op's data dtype (where: 1, sparse
   cross-entropy: 1, the logits; otherwise 0): the dtype of the result (for
   VF_RESULT_SAME) and of the kernel's compute type. */
static inline int vf_op_data_input(vf_op op)
{
    const vf_op_info *info = &vf_op_table[op];
    int i = 0;
    while (i < info->arity && (((info->cond_in | info->index_in) >> i) & 1u)) i++;
    return i;
}
/* Whether input i of op is a VF_BOOL condition (loaded as bool by kernels). */
static inline bool vf_op_input_is_cond(vf_op op, int i) { return (vf_op_table[op].cond_in >> i) & 1u; }
/* Whether input i of op holds i32 / u32 indices. */
static inline bool vf_op_input_is_index(vf_op op, int i) { return (vf_op_table[op].index_in >> i) & 1u; }
/* The number stored for an empty set (the row's `empty`, not UNDEFINED). */
static inline double vf_op_empty_value(vf_op op)
{
    switch (vf_op_table[op].empty) {
    case VF_EMPTY_NAN: return NAN;
    case VF_EMPTY_ONE: return 1.0;
    case VF_EMPTY_NEG_INF: return -INFINITY;
    default: return 0.0;
    }
}

/* The fields of vf_attrs, as bits of a row's `attrs` mask: the fields an
   op reads. The mask drives the text dump (each field in its own format),
   saving (fields the op does not read are written as 0), loading (only
   those fields are checked; the others are cleared) and CSE (two nodes of
   one op are equal when these fields are). */
enum {
    VF_ATTR_AXES = 1u << 0,  /* axes_mask and keepdims */
    VF_ATTR_AXIS = 1u << 1,
    VF_ATTR_PERM = 1u << 2,
    VF_ATTR_TRANS = 1u << 3, /* trans_a and trans_b */
    VF_ATTR_DTYPE = 1u << 4,
    VF_ATTR_VALUE = 1u << 5,
    VF_ATTR_SEED = 1u << 6,
    VF_ATTR_WINDOW = 1u << 7, /* lo, hi and step */
    VF_ATTR_CONV = 1u << 8,  /* conv: the window geometry */
    VF_ATTR_UELEM = 1u << 9, /* uelem: the user elementwise op */
};

/* Whether op holds a user elementwise op in attrs.uelem (a node, exec
   or tape entry of it holds a reference: graph/uelem.h). */
static inline bool vf_op_holds_uelem(vf_op op) { return (vf_op_table[op].attrs & VF_ATTR_UELEM) != 0; }
/* Whether every element of op's result is attrs.value (VF_OPF_LITERAL). */
static inline bool vf_op_is_literal(vf_op op) { return (vf_op_table[op].flags & VF_OPF_LITERAL) != 0; }

/* The geometry of a convolution or pooling op, resolved by the entry point: every
   field explicit and valid (SAME padding already turned into pads), so the
   backends and the saved form see one meaning. */
typedef struct vf_conv_attrs {
    int32_t stride[2];    /* H, W; >= 1 */
    int32_t dilation[2];  /* H, W; >= 1 */
    int32_t pad[4];       /* top, bottom, left, right; >= 0 */
    int32_t groups;       /* >= 1; divides C and O */
    int32_t size[2];      /* backprop ops: the result's spatial size (the input's H, W or the
                             filter's KH, KW), which dy does not determine; conv2d: 0 */
} vf_conv_attrs;
/* vf_conv_attrs as saved: its int32 fields in order (no padding). */
#define VF_CONV_ATTR_FIELDS 11

/* Attributes of one op invocation; fields unused by an op stay zero. */
typedef struct vf_attrs {
    uint32_t axes_mask;      /* reductions: bit a set = axis a of the input is reduced */
    bool keepdims;
    int axis;                /* argmax, softmax: non-negative */
    int perm[VF_MAX_RANK];   /* transpose: out dim i = in dim perm[i] */
    bool trans_a, trans_b;   /* matmul */
    vf_dtype dtype;          /* cast target */
    double value;            /* fill */
    uint64_t seed;           /* random_normal */
    /* slice: begin, end, step per input dim as the user gave them (NumPy
       basic slicing, resolved against each call's sizes by vf_slice_dim);
       pad: elements before (lo) and after (hi) each dim, step 1 */
    int64_t lo[VF_MAX_RANK], hi[VF_MAX_RANK], step[VF_MAX_RANK];
    vf_conv_attrs conv;      /* conv2d */
    /* user elementwise op (graph/uelem.h); a node holds a reference */
    const struct vf_uelem *uelem;
} vf_attrs;

/* NumPy basic slicing of one dim of size n: begin and end count from the
   end when negative and are clamped to the dim (INT64_MAX / INT64_MIN: to
   the end / the start in the step's direction), step != 0. Returns the
   result's size and sets *start to the index of its first element. */
int64_t vf_slice_dim(int64_t n, int64_t begin, int64_t end, int64_t step, int64_t *start);
/* Whether that slice has the same size at every size >= n: both bounds
   count from the same end of the dim (x[:1], x[2:5], x[-3:], x[-1:-4:-1];
   not x[1:]) and n already holds them. A traced slice of a symbolic dim
   whose size is fixed this way has a static dim (graph/shape.c). */
bool vf_slice_fixed(int64_t n, int64_t begin, int64_t end, int64_t step);
/* The size of a padded dim of n elements (pad: lo, hi, step). */
int64_t vf_pad_dim(int64_t n, int64_t lo, int64_t hi, int64_t step);

/* a with the fields op does not read set to 0 (op_table.c). */
vf_attrs vf_attrs_read(vf_op op, const vf_attrs *a);
/* Whether a and b agree on every field op reads. */
bool vf_attrs_equal(vf_op op, const vf_attrs *a, const vf_attrs *b);

#endif
