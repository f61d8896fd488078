"""Data-parallel training over MPI (mpi4py): run by ctest as
`mpirun -n 2 python3 tests/python/mpi_train.py`. Each rank trains on its
shard; gradients are averaged with allreduce. Checks: every rank ends with
the same weights, the averaged gradient equals the full batch's gradient
(computed on each rank), and the loss goes down."""
import os
import sys

import numpy as np
from mpi4py import MPI

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import vkfuse as tf  # noqa: E402

comm_w = MPI.COMM_WORLD
rank, size = comm_w.Get_rank(), comm_w.Get_size()
comm = tf.distribute.Communicator(comm_w)
assert (comm.rank, comm.size) == (rank, size)

rng = np.random.default_rng(0)  # the same data on every rank; each takes its shard
x_all = rng.standard_normal((64 * size, 4)).astype(np.float32)
y_all = (x_all @ np.array([1.0, -2.0, 0.5, 3.0], np.float32) > 0).astype(np.int32)
x, y = x_all[rank::size], y_all[rank::size]
tf.random.set_seed(100 + rank)  # different on each rank until the broadcast
w = tf.Variable(tf.random.normal([4, 2]))
b = tf.Variable(tf.zeros([2]))
comm.broadcast([w, b], root=0)


def loss_fn(xs, ys):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=ys, logits=xs @ w + b))


first = float(loss_fn(x_all, y_all))
for step in range(20):
    with tf.GradientTape() as tape:
        loss = loss_fn(x, y)
    grads = comm.allreduce(tape.gradient(loss, [w, b]), op="mean")
    if step == 0:
        with tf.GradientTape() as tape:
            full = loss_fn(x_all, y_all)
        ref = tape.gradient(full, [w, b])
        for g, r in zip(grads, ref):
            np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-4, atol=1e-5)
    w.assign_sub(0.5 * grads[0])
    b.assign_sub(0.5 * grads[1])
last = float(loss_fn(x_all, y_all))


# The same step traced: allreduce is the library's traced node inside the
# function; one trace, and the ranks' averaged update in the graph.
@tf.function
def train_step(xs, ys):
    with tf.GradientTape() as tape:
        loss = loss_fn(xs, ys)
    gw, gb = comm.allreduce(tape.gradient(loss, [w, b]), op="mean")
    w.assign_sub(0.5 * gw)
    b.assign_sub(0.5 * gb)
    return gw


w0 = w.numpy()
with tf.GradientTape() as tape:
    full = loss_fn(x_all, y_all)
ref_w = tape.gradient(full, w).numpy()
np.testing.assert_allclose(train_step(x, y).numpy(), ref_w, rtol=1e-4, atol=1e-5)
np.testing.assert_allclose(w.numpy(), w0 - 0.5 * ref_w, rtol=1e-4, atol=1e-5)
for _ in range(5):
    train_step(x, y)
assert train_step.experimental_get_tracing_count() == 1
last = float(loss_fn(x_all, y_all))
ws = comm_w.allgather(w.numpy())
assert all(np.array_equal(ws[0], v) for v in ws), "ranks diverged"
assert last < first * 0.7, (first, last)
comm.close()
print(f"rank {rank}/{size}: loss {first:.4f} -> {last:.4f}")
