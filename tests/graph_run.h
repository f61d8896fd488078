/* Running a hand-built vf_graph two ways and comparing: node by node on the
 * CPU backend (the oracle), and partitioned on the Vulkan runtime — fused
 * groups through vf_codegen_group and the scheduler, single nodes through
 * the backend's exec. Shared by the fusion and row-group tests. */
#ifndef VF_TEST_GRAPH_RUN_H
#define VF_TEST_GRAPH_RUN_H

#include "graph_build.h"
#include "vk_test_common.h"

#include <stdbool.h>

/* Bytes of value v's buffer (its elements, rounded up to 16). */
size_t vt_value_bytes(const vf_graph *g, int v);
/* The exec of node v with its inputs and output in bufs[value] (NULL: no
   buffers, for code generation alone). */
vf_exec vt_exec_of(const vf_graph *g, int v, vf_buffer **bufs);

typedef struct vt_graph_run {
    const vf_device_caps *caps;  /* NULL: the runtime's device */
    /* Fills parameter v's host bytes (zeroed, vt_value_bytes long). */
    void (*fill)(const vf_graph *g, int v, uint8_t *host, void *user);
    /* Whether the device's element i of output o (value v) is close
       enough to the CPU's; NULL: equal, or both NaN. */
    bool (*close)(const vf_graph *g, int o, int64_t i, double want, double got, void *user);
    void *user;
    const char *what;            /* named in failure messages */
    bool one_step;               /* every fused group must generate exactly one dispatch (else <= 1) */
} vt_graph_run;

/* Runs g both ways and asserts its outputs agree; returns the number of
   fused groups run on the device. */
int vt_run_partitioned(rt_handle *h, vf_backend_t *cpu, const vf_graph *g, const vt_graph_run *r);

#endif
