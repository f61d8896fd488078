"""einsum, tensordot, eye, linspace, sort / argsort, segment sums, divide_no_nan against NumPy."""
import numpy as np
import pytest

import vkfuse as tf

rng = np.random.default_rng(3)
A = rng.standard_normal((2, 3, 4)).astype(np.float32)
B = rng.standard_normal((4, 5)).astype(np.float32)
M = rng.standard_normal((3, 3)).astype(np.float32)


@pytest.mark.parametrize("eq,ops", [
    ("ijk,kl->ijl", (A, B)), ("ijk->", (A,)), ("ii->i", (M,)), ("ii", (M,)), ("ij,ij->i", (M, M)),
    ("ij->ji", (M,)), ("bij,bjk->bik", (A, A.transpose(0, 2, 1))), ("i,j->ij", (B[0], B[1])),
    ("ijk,kl", (A, B)), ("ij,jk,kl->il", (M, M, M)),
])
def test_einsum(eq, ops):
    np.testing.assert_allclose(tf.einsum(eq, *ops).numpy(), np.einsum(eq, *ops), rtol=1e-4, atol=1e-4)


def test_einsum_gradient():
    x, w = tf.constant(M), tf.Variable(B[:3, :2])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(tf.einsum("ij,jk->ik", x, w) ** 2)
    g = tape.gradient(y, w).numpy()
    np.testing.assert_allclose(g, 2 * M.T @ (M @ B[:3, :2]), rtol=1e-4, atol=1e-4)


def test_tensordot_eye_linalg():
    np.testing.assert_allclose(tf.tensordot(A, B, 1).numpy(), np.tensordot(A, B, 1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tf.tensordot(A, A, [[0, 2], [0, 2]]).numpy(),
                               np.tensordot(A, A, [[0, 2], [0, 2]]), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(tf.eye(2, 3).numpy(), np.eye(2, 3, dtype=np.float32))
    np.testing.assert_array_equal(tf.eye(2, batch_shape=[2], dtype=tf.int32).numpy(),
                                  np.broadcast_to(np.eye(2, dtype=np.int32), (2, 2, 2)))
    np.testing.assert_allclose(tf.linalg.trace(M).numpy(), np.trace(M), rtol=1e-5)
    np.testing.assert_allclose(tf.linalg.matvec(M, M[0]).numpy(), M @ M[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(tf.linalg.matrix_transpose(A).numpy(), A.transpose(0, 2, 1))
    np.testing.assert_allclose(tf.linspace(-1.0, 1.0, 5).numpy(), np.linspace(-1, 1, 5), rtol=1e-6)


def test_sort_segments_divide_no_nan():
    x = rng.standard_normal((3, 5)).astype(np.float32)
    np.testing.assert_array_equal(tf.sort(x).numpy(), np.sort(x, -1))
    np.testing.assert_array_equal(tf.sort(x, axis=0, direction="DESCENDING").numpy(), -np.sort(-x, 0))
    np.testing.assert_array_equal(tf.argsort(x).numpy(), np.argsort(x, -1, kind="stable"))
    i = np.array([4, -2, 7, 0], np.int32)
    np.testing.assert_array_equal(tf.sort(i).numpy(), np.sort(i))
    data = rng.standard_normal((4, 2)).astype(np.float32)
    ids = np.array([2, 0, 2, 1], np.int32)
    ref = np.zeros((3, 2), np.float32)
    np.add.at(ref, ids, data)
    np.testing.assert_allclose(tf.math.unsorted_segment_sum(data, ids, 3).numpy(), ref, rtol=1e-6)
    np.testing.assert_allclose(tf.math.segment_sum(data, [0, 1, 2, 2]).numpy(),
                               [data[0], data[1], data[2] + data[3]], rtol=1e-6)
    np.testing.assert_allclose(tf.math.unsorted_segment_mean(data, ids, 3).numpy(),
                               ref / np.maximum(np.bincount(ids, minlength=3), 1)[:, None], rtol=1e-6)
    np.testing.assert_array_equal(tf.math.divide_no_nan(tf.constant([1.0, 2.0, 0.0]), [0.0, 4.0, 0.0]).numpy(),
                                  [0.0, 0.5, 0.0])
