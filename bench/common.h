/* Shared by the benchmarks: a clock, timing a traced function, and the MLP
   train step of examples/mlp.c (bench_train, bench_startup). */
#ifndef VF_BENCH_COMMON_H
#define VF_BENCH_COMMON_H

#include <stdbool.h>
#include <vkfuse.h>

/* Monotonic seconds. */
double vb_now(void);

/* A machine-readable line for scripts (bench/peer/vs_torch.py): figures
   added with vb_summary during a run, printed by vb_summary_print as one
   line "summary <bench> key=value key=value ..." (keys [a-z0-9_], values
   %.6g; nan for a run that failed). */
void vb_summary(const char *key, double value);
void vb_summary_print(const char *bench);

/* The command line every benchmark takes: --iters N (default *iters),
   --quick (smaller sizes; *iters = quick_iters), --help, and the boolean
   flags of extra (NULL-terminated; each sets its *on). Returns -1 to go on,
   else the exit code (0 after --help, 2 after an unknown flag: the usage
   is printed). iters is at least 1. */
typedef struct vb_flag {
    const char *name; /* "--matmul-only" */
    bool *on;
} vb_flag;
int vb_args(int argc, char **argv, const char *bench, const vb_flag *extra, int *iters, bool *quick, int quick_iters);
/* A Vulkan and a CPU context for a comparison; false (both NULL, a message
   naming bench printed) when either cannot be made. */
bool vb_contexts(const char *bench, vf_context **vk, vf_context **cpu);

typedef struct vb_figures {
    double sec;              /* best seconds per call; INFINITY if none ran */
    vf_function_stats fs;
    bool ok;
} vb_figures;

/* Creates the function of d on ctx and calls it on in iters + 1 times,
   each call synced: the first traces, builds the plan and compiles and is
   not timed; sec is the best of the others. Failures print `who: message`
   and return ok = false. */
vb_figures vb_time_function(vf_context *ctx, const vf_function_desc *d, vf_tensor **in, int iters, const char *who);

/* The train step of examples/mlp.c: 784-512-512-10 ReLU MLP, mean sparse
   softmax cross-entropy, vf_tape gradients of the six variables, SGD with
   vf_assign_sub (or, with assign_last, the six new values first and then
   vf_assign: see docs/BENCHMARKS.md, "Training (MLP)"). */
#define VB_MLP_FEAT 784
#define VB_MLP_HIDDEN 512
#define VB_MLP_CLASSES 10

typedef struct vb_mlp {
    vf_tensor *w[3], *b[3]; /* variables */
    vf_tensor *lr;
    bool assign_last;
} vb_mlp;

/* He-initialised model (fixed seeds) owned by the current scope */
vb_mlp vb_mlp_make(vf_context *ctx);
/* a vf_body: in = x [batch,784] f32, labels [batch] i32; out = mean loss;
   user = the vb_mlp */
vf_status vb_mlp_train_step(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);
/* the traced step's input signature [-1,784] f32, [-1] i32 */
extern const vf_tensor_spec vb_mlp_signature[2];
/* x [batch,784] and labels [batch] on the host, malloc'ed: class centres
   plus noise, the same for every call. false when out of memory. */
bool vb_mlp_data(int64_t batch, float **x, int32_t **labels);

/* The seed's softmax regression 784 -> 10: *loss = mean sparse softmax
   cross-entropy of (x @ w + b) against labels, and g[0], g[1] its
   gradients for w and b, under a tape of its own (eager or traced). */
vf_status vb_softmax_regression_grads(vf_context *ctx, vf_tensor *x, vf_tensor *labels, vf_tensor *w,
                                      vf_tensor *b, vf_tensor **loss, vf_tensor *g[2]);

/* The peer benchmark's 256-op elementwise chain (vf_body; user unused) on
   in = x, a, c: add a, mul c, then sub a, neg (arith: |h| stays bounded)
   or tanh, exp (tanhexp: exp's argument is a tanh, so h stays in
   [1/e, e] after each cycle for x, a >= 0 and c = 0.5), in turn. */
#define VB_CHAIN_OPS 256
vf_status vb_chain_arith(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);
vf_status vb_chain_tanhexp(vf_context *ctx, vf_tensor *const *in, vf_tensor **out, void *user);

#endif
