/*
 * vkfuse — user kernels: your own compute shaders as ops.
 *
 * Part of the public API; included by vkfuse.h (include either). The
 * conventions of vkfuse.h hold here: sticky errors in the context, results
 * owned by the innermost scope, zero-initialised descs take the defaults.
 */
#ifndef VKFUSE_KERNEL_H
#define VKFUSE_KERNEL_H

#include "vkfuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- User kernels (docs/KERNELS.md) ----------------------------------------
   Your own compute shader as an op: GLSL (compiled by vkfuse with shaderc)
   or SPIR-V words, run on vkfuse tensors eagerly and inside traced
   functions, on the Vulkan backend by the shader and on the CPU backend by
   an optional C implementation.

   The shader's interface (docs/KERNELS.md has examples):
   - set 0, binding i: input i (i < n_inputs), binding n_inputs + j:
     output j, all storage buffers holding the packed row-major elements
     (f32: float, i32: int, u32: uint, f16: float16_t with
     GL_EXT_shader_16bit_storage, bool: uint8_t with
     GL_EXT_shader_8bit_storage). A binding the kernel does not have, or a
     set other than 0, is refused by vf_kernel_create.
   - one push-constant block: first the param_bytes bytes of parameters
     given to each vf_kernel_call, then (at byte offset param_bytes) one
     uint per input, then per output: its element count. A block larger
     than that, or whose members disagree with it (one across the end of
     the params, a count that is not a 32-bit integer), is refused by
     vf_kernel_create.
   - the workgroup size: declare `layout(local_size_x_id = 0) in;` to get
     desc.workgroup_size (default 64) as a specialisation constant, or fix
     your own local size (then set desc.workgroup_size to its x size, or
     give groups / a dispatch callback).
   - GLSL without a `#version` line gets `#version 450`; compile errors
     are VF_ERROR_COMPILE with shaderc's message, in your source's line
     numbers.
   Outputs start as zeros (so histograms can atomicAdd into them) unless
   desc.uninitialized_outputs. Indexing out of bounds is undefined as in
   any shader; use the element counts of the push constants
   (desc.check_bounds finds writes past an output). */
typedef struct vf_kernel vf_kernel;

#define VF_KERNEL_MAX_INPUTS 8
#define VF_KERNEL_MAX_OUTPUTS 8
#define VF_KERNEL_MAX_PARAM_BYTES 64

/* The shapes of one call, given to the callbacks: in[n_inputs] as passed,
   out[n_outputs] (dtype from desc.outputs, shape as the output_shapes
   callback set it, or desc.outputs' shape). params: param_bytes bytes. */
typedef struct vf_kernel_shapes {
    int n_inputs, n_outputs;
    const vf_tensor_spec *in;
    vf_tensor_spec *out;
    const void *params;
} vf_kernel_shapes;

/* Sets s->out[j].rank and .shape (the dtype is preset; leave it). Return
   VF_OK, or an error status: the call then fails with that status and a
   message naming the kernel and the input shapes. */
typedef vf_status (*vf_kernel_shape_fn)(vf_kernel_shapes *s, void *user);
/* Sets groups[3], the workgroup counts of the call (each >= 1). */
typedef void (*vf_kernel_dispatch_fn)(const vf_kernel_shapes *s, uint32_t workgroup_size, uint32_t groups[3],
                                      void *user);
/* The C implementation (CPU backend): in[i] / out[j] point at the packed
   elements (out zeroed unless desc.uninitialized_outputs). Return VF_OK or
   an error status (the call fails with it). */
typedef vf_status (*vf_kernel_cpu_fn)(const vf_kernel_shapes *s, const void *const *in, void *const *out,
                                      void *user);
/* The gradient: given the call's inputs, its outputs and the gradients of
   the outputs (grad_out[j], of output j's shape; NULL where no gradient
   reaches it), sets grad_in[i] to the gradient of input i (a tensor made
   by ops and kernel calls on ctx, of input i's shape and dtype) or NULL
   for none. It runs while a tape computes gradients, eager or traced, so
   it must only use vkfuse ops. */
typedef vf_status (*vf_kernel_grad_fn)(vf_context *ctx, const vf_kernel_shapes *s, vf_tensor *const *in,
                                       vf_tensor *const *out, vf_tensor *const *grad_out, vf_tensor **grad_in,
                                       void *user);

/* All-zero fields take the defaults named. */
typedef struct vf_kernel_desc {
    const char *name;            /* profiles, dumps, messages; NULL: "user_kernel" (at most 47 chars used) */
    const char *glsl;            /* compute shader source; or: */
    const uint32_t *spirv;       /* SPIR-V words of a compute shader (entry point "main") */
    size_t spirv_words;
    int n_inputs;                /* 0 .. VF_KERNEL_MAX_INPUTS */
    int n_outputs;               /* 1 .. VF_KERNEL_MAX_OUTPUTS */
    vf_dtype inputs[VF_KERNEL_MAX_INPUTS]; /* each input's dtype (a call with another fails) */
    /* each output's dtype; its rank and shape too when output_shapes is NULL */
    vf_tensor_spec outputs[VF_KERNEL_MAX_OUTPUTS];
    vf_kernel_shape_fn output_shapes;  /* NULL: desc.outputs' shapes */
    uint32_t param_bytes;        /* push-constant parameters per call: a multiple of 4, at most
                                    VF_KERNEL_MAX_PARAM_BYTES */
    uint32_t workgroup_size;     /* specialisation constant 0; 0: 64 */
    uint32_t groups[3];          /* fixed workgroup counts (0s: 1); used when dispatch is NULL and
                                    groups[0] > 0 */
    /* NULL and groups[0] == 0: ceil(elements of output 0 / workgroup_size) groups along x */
    vf_kernel_dispatch_fn dispatch;
    vf_kernel_cpu_fn cpu;        /* NULL: the kernel fails on the CPU backend (VF_ERROR_UNSUPPORTED) */
    vf_kernel_grad_fn grad;      /* NULL: not differentiable (a tape through it fails) */
    void *user;                  /* passed to every callback */
    bool uninitialized_outputs;  /* outputs are not zeroed first: the shader writes every element */
    bool side_effect;            /* traced: keep the call even when no output is used */
    /* Debugging: each output gets a guard tail after its elements, filled
       with a canary; a call whose kernel wrote into it fails with
       VF_ERROR_INVALID_ARGUMENT ("kernel 'x' wrote past the end of output
       j (n elements)"). Costs a buffer, an upload, a copy and a wait per
       output and call; traced calls of such a kernel run node by node.
       VKFUSE_CHECK=1 turns it on for every kernel's eager call. */
    bool check_bounds;
} vf_kernel_desc;

/* Compiles (GLSL) or validates (SPIR-V) the shader and checks its
   bindings against the desc. NULL with the error recorded in ctx
   (VF_ERROR_COMPILE for a shader that does not compile, with the
   compiler's message; VF_ERROR_INVALID_ARGUMENT for a bad desc). A kernel
   may outlive its context: vf_kernel_destroy then only frees it, and
   calls return VF_ERROR_INVALID_ARGUMENT. */
VF_API vf_kernel *vf_kernel_create(vf_context *ctx, const vf_kernel_desc *desc);
/* Runs k on in[n_inputs] (n must equal desc.n_inputs) with params
   (desc.param_bytes bytes; may be NULL when param_bytes is 0); out[n_outputs]
   receives new tensors owned by the caller's innermost scope. Eagerly it
   runs at once (queued like any op); while tracing it records a node of
   the graph. The error is also recorded in k's context. */
VF_API vf_status vf_kernel_call(vf_kernel *k, int n, vf_tensor *const *in, const void *params, vf_tensor **out);
/* Frees k. Traced functions that call it keep working: they hold the
   kernel's SPIR-V and callbacks until they go themselves. */
VF_API void vf_kernel_destroy(vf_kernel *k);


/* ---- User elementwise ops (docs/KERNELS.md, "User elementwise ops") -------
   A GLSL expression over the inputs x0, x1, x2 (broadcast like a built-in
   binary op's) and a C function computing the same: called like an op, it
   joins the kernels vkfuse generates (a traced function fuses it with the
   elementwise ops around it, the epilogue of a matmul or reduction
   included). Inputs share one dtype, the result has it too; the expression
   is computed in float (f16 inputs are read as float, the result rounded
   back). The expression may call GLSL built-ins and the functions of
   desc.helpers; it may not contain ';', '{', '}', '#', comments or
   unbalanced parentheses, and is compiled on its own at create time. */
typedef struct vf_elementwise_op vf_elementwise_op;

#define VF_ELEMENTWISE_MAX_INPUTS 3

/* The C implementation over n elements: in[i] points at n floats of input
   i (broadcast and converted to float by vkfuse), out at n floats to set.
   A gradient's function gets n_inputs + 1 arrays: the inputs, then the
   op's output y. Called by the CPU backend, constant folding and
   VKFUSE_CHECK; it must compute what the expression does. */
typedef void (*vf_elementwise_fn)(int64_t n, const float *const *in, float *out, void *user);

typedef struct vf_elementwise_desc {
    const char *name;        /* messages, dumps, kernels' comments; NULL: "user_elementwise" (<= 47 chars) */
    int n_inputs;            /* 1 .. VF_ELEMENTWISE_MAX_INPUTS (2 with a gradient) */
    uint32_t dtypes;         /* bits (1u << VF_F32) | (1u << VF_F16); 0: f32 only; another bit is a
                                bad desc (VF_ERROR_INVALID_ARGUMENT) */
    const char *expr;        /* GLSL float expression over x0 .. x<n_inputs-1> */
    const char *helpers;     /* optional GLSL functions the expressions call (file scope; no
                                '#', layout, buffer, uniform, shared); every name they declare
                                starts with the op's name and '_' (ops fused into one kernel
                                must not clash) */
    vf_elementwise_fn cpu;   /* required: the same function in C */
    /* Optional gradient, per input i: d y / d x_i as a GLSL expression over
       x0 .. and y (the op's output), and its C function (inputs then y).
       The tape multiplies it by the incoming gradient and sums it over the
       dims input i was broadcast along. All NULL: not differentiable. */
    const char *grad_expr[VF_ELEMENTWISE_MAX_INPUTS];
    vf_elementwise_fn grad_cpu[VF_ELEMENTWISE_MAX_INPUTS];
    void *user;              /* passed to every C function */
} vf_elementwise_desc;

/* Checks the desc and compiles each expression on its own (with the
   helpers) so that a bad one fails here: VF_ERROR_COMPILE with shaderc's
   message naming the expression, VF_ERROR_INVALID_ARGUMENT for a bad desc
   or a forbidden token. NULL with the error recorded in ctx. */
VF_API vf_elementwise_op *vf_elementwise_create(vf_context *ctx, const vf_elementwise_desc *desc);
/* Applies op to in[n] (n must be desc.n_inputs; dtypes equal and in
   desc.dtypes; shapes broadcast): a new tensor of the innermost scope, or
   NULL with the error recorded (a NULL input gives NULL). Eagerly one
   kernel; traced a node that fuses; taped like any op. */
VF_API vf_tensor *vf_elementwise_call(vf_elementwise_op *op, int n, vf_tensor *const *in);
/* Frees the handle. Traced functions and tapes that use the op keep what
   they need until they go themselves. After the context is destroyed it
   only frees. */
VF_API void vf_elementwise_destroy(vf_elementwise_op *op);

#ifdef __cplusplus
}
#endif
#endif /* VKFUSE_KERNEL_H */
