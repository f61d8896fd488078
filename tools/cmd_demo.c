/* vkfuse demo: the seed's first example, logits = x[1,784] @ w[784,10] + b
 * and their softmax, on the chosen device and on the CPU backend. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "vkfuse.h"

static vf_status run(vf_context *ctx, float logits[10], float probs[10])
{
    int64_t xs[2] = {1, 784}, ws[2] = {784, 10}, bs[1] = {10};
    vf_scope_begin(ctx);
    vf_tensor *x = vf_random_normal(ctx, VF_F32, 2, xs, 1);
    vf_tensor *w = vf_mul(ctx, vf_random_normal(ctx, VF_F32, 2, ws, 2), vf_fill(ctx, VF_F32, 0, NULL, 0.05));
    vf_tensor *b = vf_fill(ctx, VF_F32, 1, bs, 0.1);
    vf_tensor *y = vf_add(ctx, vf_matmul(ctx, x, w), b);
    vf_tensor *p = vf_softmax(ctx, y, -1);
    vf_status s = p ? vf_tensor_read(y, logits, 10 * sizeof(float)) : vf_status_get(ctx);
    if (s == VF_OK) s = vf_tensor_read(p, probs, 10 * sizeof(float));
    vf_scope_end(ctx);
    return s;
}

int cmd_demo(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: vkfuse demo\n\nRuns logits = x[1,784] @ w[784,10] + b and softmax(logits) with x, w drawn by\n"
               "vf_random_normal (same seed on both backends), on the chosen device and on the\n"
               "CPU backend, and prints logits, probabilities and the largest difference.\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "vkfuse demo: unexpected argument '%s' (try --help)\n", argv[1]);
        return 2;
    }
    vf_context *dev = NULL, *cpu = NULL;
    vf_context_desc cd = {.backend = VF_BACKEND_CPU};
    if (vf_context_create(NULL, &dev) != VF_OK || vf_context_create(&cd, &cpu) != VF_OK) {
        fprintf(stderr, "vkfuse demo: %s\n", vf_last_error());
        vf_context_destroy(dev);
        vf_context_destroy(cpu);
        return 1;
    }
    float ld[10], pd[10], lc[10], pc[10];
    int rc = 0;
    if (run(dev, ld, pd) != VF_OK) {
        fprintf(stderr, "vkfuse demo on %s: %s\n", vf_device_name(dev), vf_error_message(dev));
        rc = 1;
    } else if (run(cpu, lc, pc) != VF_OK) {
        fprintf(stderr, "vkfuse demo on the CPU: %s\n", vf_error_message(cpu));
        rc = 1;
    } else {
        printf("device: %s\nlogits = x[1,784] @ w[784,10] + b, probs = softmax(logits)\n\n", vf_device_name(dev));
        printf("class      logits(dev)     logits(cpu)      probs(dev)      probs(cpu)\n");
        double dl = 0, dp = 0, sum = 0;
        for (int i = 0; i < 10; i++) {
            printf("%5d  %14.7f  %14.7f  %14.7f  %14.7f\n", i, ld[i], lc[i], pd[i], pc[i]);
            dl = fmax(dl, fabs(ld[i] - lc[i]));
            dp = fmax(dp, fabs(pd[i] - pc[i]));
            sum += pd[i];
        }
        printf("\nsum of probs (dev) %.7f\nmax |dev - cpu|: logits %.3g, probs %.3g\n", sum, dl, dp);
        if (!(dl < 1e-3 && dp < 1e-4)) {
            fprintf(stderr, "vkfuse demo: the device and the CPU disagree\n");
            rc = 1;
        }
    }
    vf_context_destroy(dev);
    vf_context_destroy(cpu);
    return rc;
}
