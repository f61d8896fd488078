"""vkfuse.profile: a traced call's per-kernel report as data, and its Perfetto trace."""
import json
import os

import numpy as np
import pytest

import vkfuse as tf


@tf.function
def mlp(x, w):
    return tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)) * 2.0 + 1.0)


def test_profile_report_and_trace(tmp_path):
    with tf.Context(profile=True):
        x = tf.constant(np.ones((4, 8), np.float32))
        w = tf.constant(np.full((8, 3), 0.5, np.float32))
        path = tmp_path / "call.json"
        p = tf.profile(mlp, x, w, trace=str(path))
        assert float(p.result) == pytest.approx(4 * 3 * (4.0 * 2 + 1))
        assert p.wall_ns > 0 and p.call >= 1 and p.trace_path == str(path)
        # both backends run a traced call as a plan (the CPU one runs its
        # kernels on host threads): the fused matmul group and the reduction
        assert p.planned and len(p.kernels) >= 2 and p.dispatches >= len(p.kernels)
        ops = [op for k in p.kernels for op in k.node_ops]
        assert "matmul" in ops and "reduce_sum" in ops
        assert all(k.name and len(k.nodes) == len(k.node_ops) for k in p.kernels)
        assert p.bytes_read == sum(k.bytes_read for k in p.kernels) > 0
        events = json.loads(path.read_text())["traceEvents"]
        assert any(e.get("ph") == "X" for e in events)
        # a plain callable is traced as a function; the second call runs the plan
        q = tf.profile(lambda a: a * 3.0, x)
        np.testing.assert_array_equal(q.result.numpy(), np.full((4, 8), 3.0, np.float32))
        assert tf.profile(mlp, x, w).call == p.call + 1


def test_profile_needs_a_profiling_context(tmp_path):
    with tf.Context(profile=False):
        x = tf.constant([1.0, 2.0])
        if os.environ.get("VKFUSE_PROFILE") == "1":
            pytest.skip("VKFUSE_PROFILE=1 turns profiling on for every context")
        with pytest.raises(tf.errors.FailedPreconditionError, match="profile=True"):
            tf.profile(mlp, x, x)
    with tf.Context(profile=True):
        x = tf.constant(np.ones((2, 2), np.float32))
        with pytest.raises(OSError, match="cannot write the trace file"):
            tf.profile(mlp, x, x, trace=str(tmp_path / "no" / "such" / "dir.json"))
