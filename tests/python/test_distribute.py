"""vkfuse.distribute with an in-process group (threads, no MPI): broadcast and allreduce;
tests/python/mpi_train.py runs the MPI path under mpirun (ctest python_mpi_np2)."""
import threading

import numpy as np
import pytest

import vkfuse as tf


def run_ranks(n, body):
    group = tf.distribute.LocalGroup(n)
    out, errs = [None] * n, []

    def rank(i):
        ctx = tf.Context(backend="cpu")
        try:
            with ctx:
                comm = tf.distribute.Communicator(local=group, rank=i, context=ctx)
                out[i] = body(comm, i)
                comm.close()
        except BaseException as e:  # noqa: BLE001 (reported below)
            errs.append(e)
        finally:
            ctx.close()
    ts = [threading.Thread(target=rank, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
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

