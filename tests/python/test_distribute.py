"""vkfuse.distribute with an in-process group (threads, no MPI): broadcast and allreduce,
eager and traced; tests/python/mpi_train.py runs the MPI path under mpirun (ctest
python_mpi_np2). Every rank waits at most TIMEOUT s for the others and every join is
bounded, so that a deadlock between the ranks fails a case instead of hanging the suite."""
import os
import threading

import numpy as np
import pytest

import vkfuse as tf
from vkfuse import tensor as vkfuse_tensor


TIMEOUT = 10.0
BACKEND = os.environ.get("VKFUSE_BACKEND") or "cpu"


def run_ranks(n, body, backend=BACKEND):
    group = tf.distribute.LocalGroup(n)
    out, errs = [None] * n, []

    def rank(i):
        ctx = tf.Context(backend=backend)
        try:
            with ctx:
                comm = tf.distribute.Communicator(local=group, rank=i, context=ctx, timeout=TIMEOUT)
                out[i] = body(comm, i)
                comm.close()
        except BaseException as e:  # noqa: BLE001 (reported below)
            errs.append(e)
        finally:
            ctx.close()
    ts = [threading.Thread(target=rank, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(3 * TIMEOUT)
    if any(t.is_alive() for t in ts):
        # the group stays allocated: a stuck rank may still use it
        raise AssertionError(f"a rank is still running after {3 * TIMEOUT} s: the ranks deadlocked")
    group.close()
    if errs:
        raise errs[0]
    return out


def test_broadcast_and_allreduce():
    def body(comm, i):
        v = tf.Variable([float(i), 10.0 * i])
        comm.broadcast([v], root=1)
        mean = comm.allreduce([tf.constant([i + 1.0, 2.0 * i])], op="mean")[0]
        total = comm.allreduce(tf.constant([i + 1], dtype=tf.int32), op="sum")
        return v.numpy().tolist(), mean.numpy().tolist(), int(total[0]), comm.rank, comm.size
    res = run_ranks(3, body)
    for i, (v, mean, total, rank, size) in enumerate(res):
        assert v == [1.0, 10.0] and mean == [2.0, 2.0] and total == 6 and rank == i and size == 3


def test_errors():
    def body(comm, i):
        with pytest.raises(ValueError):
            comm.allreduce([tf.ones([2])], op="max")
        other = tf.Context(backend="cpu")
        with pytest.raises(tf.errors.InvalidArgumentError):
            with other:
                t = tf.ones([2])
            comm.allreduce([t])
        other.close()
        return True
    assert run_ranks(2, body) == [True, True]



def traced_step_body(comm, i):
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def step(x):
        with tf.GradientTape() as t:
            loss = tf.reduce_sum(w * x)
        g = comm.allreduce(t.gradient(loss, [w]))[0]
        w.assign_sub(0.5 * g)
        return g
    gs = [step(tf.constant([float(i + 1), 2.0 * i])).numpy().tolist() for _ in range(2)]
    return gs, w.numpy().tolist(), step.experimental_get_tracing_count()


def test_allreduce_in_a_traced_step():
    """comm.allreduce inside a vkfuse.function is the C library's traced node:
    one trace, the mean gradient at every call, the update in the graph. Many
    groups in a row: each rank traces while the other runs, which once hung
    (a rank released the other's tensors, waiting for the context lock the
    other held while it waited in the allreduce for this rank)."""
    for _ in range(40 if BACKEND == "cpu" else 8):
        for gs, w, traces in run_ranks(2, traced_step_body):
            assert gs == [[1.5, 1.0], [1.5, 1.0]] and w == [-0.5, 1.0] and traces == 1


def test_dropping_another_ranks_tensors():
    """A rank drops tensors of another rank's context (as Python's garbage
    collector does, on whichever thread it runs) while that rank waits in a
    traced allreduce for it, holding its context: one made eagerly, and one a
    traced body made and leaked (its trace freed it already). Neither may
    wait for that context: the release is done later by the context's own
    thread (before, the ranks deadlocked until the timeout)."""
    shared, ready = [], threading.Event()

    def body(comm, i):
        w = tf.Variable([1.0, 2.0])
        leaked = []

        @tf.function
        def step(x):
            leaked.append(x * 3.0)  # made by the body, kept past the trace
            return comm.allreduce([w * x], op="sum")[0]
        x = tf.constant([1.0, float(i)])
        first = step(x).numpy().tolist()  # traces on both ranks
        if i == 0:
            shared.extend([tf.constant([5.0]), leaked.pop()])
            ready.set()
            second = step(x)  # waits in the allreduce for rank 1, holding context 0
            # the leaked body tensor rank 1 dropped was left to this thread,
            # which released it at the end of that call
            assert id(comm._ctx) not in vkfuse_tensor.strays
        else:
            assert ready.wait(TIMEOUT)
            import time
            time.sleep(0.2)  # rank 0 is in its allreduce by now
            shared.clear()   # drops context 0's tensors on this thread
            second = step(x)
        return first, second.numpy().tolist()
    for first, second in run_ranks(2, body):
        assert first == second == [2.0, 2.0]
