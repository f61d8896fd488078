"""Every exposed op against a NumPy reference."""
import numpy as np
import pytest

import vkfuse as tf

rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
B = rng.standard_normal((3, 4)).astype(np.float32)
P = (np.abs(A) + 0.5).astype(np.float32)
I = rng.integers(-5, 6, (3, 4)).astype(np.int32)
J = rng.integers(1, 4, (3, 4)).astype(np.int32)


def close(t, ref, tol=1e-5):
    got = t.numpy() if isinstance(t, tf.Tensor) else np.asarray(t)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype == bool or got.dtype == bool:
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol, atol=tol)


def erf(x):
    import math
    return np.vectorize(math.erf)(x).astype(np.float32)


UNARY = [
    (tf.exp, np.exp, A), (tf.math.log, np.log, P), (tf.sqrt, np.sqrt, P), (tf.square, np.square, A),
    (tf.tanh, np.tanh, A), (tf.abs, np.abs, A), (tf.negative, np.negative, A),
    (tf.sigmoid, lambda x: 1 / (1 + np.exp(-x)), A), (tf.math.rsqrt, lambda x: 1 / np.sqrt(x), P),
    (tf.sin, np.sin, A), (tf.cos, np.cos, A), (tf.sign, np.sign, A), (tf.floor, np.floor, A * 3),
    (tf.math.ceil, np.ceil, A * 3), (tf.round, np.round, A * 3), (tf.math.log1p, np.log1p, P),
    (tf.math.expm1, np.expm1, A), (tf.math.softplus, lambda x: np.log1p(np.exp(x)), A),
    (tf.math.erf, erf, A), (tf.nn.relu, lambda x: np.maximum(x, 0), A),
    (tf.nn.relu6, lambda x: np.clip(x, 0, 6), A * 8), (tf.nn.elu, lambda x: np.where(x > 0, x, np.expm1(x)), A),
    (tf.nn.leaky_relu, lambda x: np.where(x > 0, x, 0.2 * x), A),
    (tf.nn.gelu, lambda x: 0.5 * x * (1 + erf(x / np.sqrt(2))), A),
    (lambda x: tf.nn.gelu(x, approximate=True),
     lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), A),
    (tf.nn.silu, lambda x: x / (1 + np.exp(-x)), A), (tf.math.reciprocal, lambda x: 1 / x, P),
    (tf.math.log_sigmoid, lambda x: -np.log1p(np.exp(-x)), A),
    (tf.stop_gradient, lambda x: x, A), (tf.identity, lambda x: x, A),
    (tf.abs, np.abs, I), (tf.square, np.square, I), (tf.negative, np.negative, I),
]


@pytest.mark.parametrize("i", range(len(UNARY)))
def test_unary(i):
    op, ref, x = UNARY[i]
    close(op(tf.constant(x)), ref(x), 2e-5)


BINARY = [
    (tf.add, np.add, A, B), (tf.subtract, np.subtract, A, B), (tf.multiply, np.multiply, A, B),
    (tf.divide, np.divide, A, P), (tf.maximum, np.maximum, A, B), (tf.minimum, np.minimum, A, B),
    (tf.pow, np.power, P, B), (tf.math.floormod, np.mod, A * 4, P), (tf.math.floordiv, np.floor_divide, A * 4, P),
    (tf.math.squared_difference, lambda a, b: (a - b) ** 2, A, B),
    (tf.add, np.add, I, J), (tf.math.floormod, np.mod, I, J), (tf.math.floordiv, np.floor_divide, I, J),
    (tf.multiply, np.multiply, I, J), (tf.divide, lambda a, b: a / b, I, J),
    (tf.greater, np.greater, A, B), (tf.greater_equal, np.greater_equal, A, B), (tf.less, np.less, A, B),
    (tf.less_equal, np.less_equal, A, B), (tf.equal, np.equal, I, J), (tf.not_equal, np.not_equal, I, J),
    (tf.add, np.add, A, B[0]), (tf.multiply, np.multiply, A[:, :1], B[0]),
]


@pytest.mark.parametrize("i", range(len(BINARY)))
def test_binary(i):
    op, ref, a, b = BINARY[i]
    close(op(tf.constant(a), tf.constant(b)), ref(a, b), 2e-5)


def test_logical():
    a, b = A > 0, B > 0
    ta, tb = tf.constant(a), tf.constant(b)
    close(tf.logical_and(ta, tb), a & b)
    close(tf.logical_or(ta, tb), a | b)
    close(tf.math.logical_xor(ta, tb), a ^ b)
    close(tf.logical_not(ta), ~a)
    close(ta & tb, a & b)
    close(ta | tb, a | b)
    close(~ta, ~a)


def test_operators_and_broadcasting():
    x = tf.constant(A)
    close(x + 1, A + 1)
    close(2 - x, 2 - A)
    close(x * 2.5, A * 2.5)
    close(1 / tf.constant(P), 1 / P)
    close(x ** 2, A ** 2)
    close(-x, -A)
    close(abs(x), np.abs(A))
    close(x @ tf.constant(B.T), A @ B.T, 1e-4)
    close(x < 0, A < 0)
    close(x >= B, A >= B)
    close(x == x, np.ones_like(A, bool))
    close(tf.constant(I) // 2, I // 2)
    close(tf.constant(I) % 3, I % 3)
    close(x // 0.5, A // 0.5)
    r = B + x  # ndarray on the left: __array_priority__ hands it to the tensor
    assert isinstance(r, tf.Tensor)
    close(r, A + B)
    close(x + B[0], A + B[0])
    assert (x == None) is False  # noqa: E711


REDUCE = [
    (tf.reduce_sum, np.sum), (tf.reduce_mean, np.mean), (tf.reduce_max, np.max),
    (tf.reduce_min, np.min), (tf.reduce_prod, np.prod),
    (tf.reduce_logsumexp, lambda x, axis=None, keepdims=False: np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))),
    (tf.math.reduce_variance, np.var), (tf.math.reduce_std, np.std),
]


@pytest.mark.parametrize("i", range(len(REDUCE)))
@pytest.mark.parametrize("axis,keepdims", [(None, False), (0, False), (1, True), ([0, 1], False), (-1, False)])
def test_reduce(i, axis, keepdims):
    op, ref = REDUCE[i]
    close(op(tf.constant(A), axis=axis, keepdims=keepdims),
          ref(A, axis=tuple(axis) if isinstance(axis, list) else axis, keepdims=keepdims), 1e-4)


def test_reduce_int_bool():
    close(tf.reduce_sum(tf.constant(I), axis=1), I.sum(1))
    close(tf.reduce_max(tf.constant(I)), I.max())
    close(tf.reduce_mean(tf.constant(J)), np.int32(J.sum() // J.size))
    close(tf.reduce_any(tf.constant(A > 1), axis=0), (A > 1).any(0))
    close(tf.reduce_all(tf.constant(A > -3)), (A > -3).all())
    close(tf.math.count_nonzero(tf.constant(I)), np.count_nonzero(I))


def test_argmax_cumsum_topk():
    close(tf.argmax(tf.constant(A), axis=1), A.argmax(1))
    close(tf.argmax(tf.constant(A)), A.argmax(0))
    close(tf.math.argmin(tf.constant(A), axis=1), A.argmin(1))
    close(tf.cumsum(tf.constant(A), axis=1), np.cumsum(A, 1), 1e-5)
    close(tf.cumsum(tf.constant(A), axis=0, exclusive=True), np.cumsum(A, 0) - A, 1e-5)
    v, i = tf.math.top_k(tf.constant(A), k=2)
    close(v, -np.sort(-A, 1)[:, :2])
    close(i, np.argsort(-A, 1, kind="stable")[:, :2])


def test_matmul_variants():
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((2, 5, 4)).astype(np.float32)
    close(tf.matmul(a, b, transpose_b=True), a @ b.transpose(0, 2, 1), 1e-4)
    close(tf.matmul(tf.constant(a), b, transpose_b=True), a @ b.transpose(0, 2, 1), 1e-4)
    close(tf.matmul(a.transpose(0, 2, 1), b.transpose(0, 2, 1), transpose_a=True),
          a @ b.transpose(0, 2, 1), 1e-4)


def test_creation():
    close(tf.zeros([2, 3]), np.zeros((2, 3), np.float32))
    close(tf.ones((2,), dtype=tf.int32), np.ones(2, np.int32))
    close(tf.fill([2, 2], 7), np.full((2, 2), 7, np.int32))
    close(tf.fill([2], 0.5), np.full(2, 0.5, np.float32))
    close(tf.zeros_like(tf.constant(I)), np.zeros_like(I))
    close(tf.ones_like(A), np.ones_like(A))
    close(tf.range(5), np.arange(5, dtype=np.int32))
    close(tf.range(1, 10, 3), np.arange(1, 10, 3, dtype=np.int32))
    close(tf.range(0.0, 1.0, 0.25), np.arange(0, 1, 0.25, dtype=np.float32))
    close(tf.range(10, 0, -2), np.arange(10, 0, -2, dtype=np.int32))
    assert tf.constant(5).dtype == tf.int32 and tf.constant(5).shape == ()
    assert tf.constant(5.0).dtype == tf.float32
    assert tf.constant(True).dtype == tf.bool
    assert tf.constant(np.float64(1.5)).dtype == tf.float32  # float64 narrowed
    assert tf.constant([1, 2], dtype=tf.float32).dtype == tf.float32
    assert tf.constant(np.ones(3, np.float16)).dtype == tf.float16
    assert tf.constant(np.ones(3, np.uint32)).dtype == tf.uint32
    close(tf.constant(0.0, shape=[2, 3]), np.zeros((2, 3), np.float32))
    close(tf.constant([1, 2, 3, 4], shape=(2, 2)), np.array([[1, 2], [3, 4]], np.int32))
    close(tf.constant([tf.constant(1.0), tf.constant(2.0)]), np.array([1, 2], np.float32))
    close(tf.convert_to_tensor([[1.5]]), np.array([[1.5]], np.float32))
    close(tf.cast(tf.constant(A), tf.int32), A.astype(np.int32))
    close(tf.cast(tf.constant(I), tf.bool), I != 0)
    close(tf.cast(tf.constant(A), tf.float16), A.astype(np.float16), 1e-3)


def test_shape_ops():
    x = tf.constant(A)
    close(tf.reshape(x, [4, 3]), A.reshape(4, 3))
    close(tf.reshape(x, [-1]), A.reshape(-1))
    close(tf.transpose(x), A.T)
    t3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    close(tf.transpose(t3, perm=[1, 0, 2]), t3.transpose(1, 0, 2))
    close(tf.concat([x, tf.constant(B)], axis=0), np.concatenate([A, B], 0))
    close(tf.concat([A, B], -1), np.concatenate([A, B], -1))
    close(tf.stack([x, B], axis=1), np.stack([A, B], 1))
    parts = tf.split(x, 2, axis=1)
    for p, r in zip(parts, np.split(A, 2, 1)):
        close(p, r)
    parts = tf.split(x, [1, -1], axis=0)
    close(parts[0], A[:1])
    close(parts[1], A[1:])
    for p, r in zip(tf.unstack(x), A):
        close(p, r)
    close(tf.expand_dims(x, 0), A[None])
    close(tf.squeeze(tf.constant(A[:, :1])), A[:, 0])
    close(tf.squeeze(tf.constant(A[None]), axis=[0]), A)
    close(tf.tile(x, [2, 1]), np.tile(A, (2, 1)))
    close(tf.pad(x, [[1, 0], [0, 2]]), np.pad(A, [[1, 0], [0, 2]]))
    close(tf.pad(x, [[1, 1], [1, 1]], constant_values=3), np.pad(A, 1, constant_values=3))
    close(tf.broadcast_to(tf.constant(A[0]), [3, 4]), np.broadcast_to(A[0], (3, 4)))
    close(tf.reverse(x, [1]), A[:, ::-1])
    close(tf.shape(x), np.array([3, 4], np.int32))
    assert int(tf.size(x)) == 12 and int(tf.rank(x)) == 2


def test_indexing():
    t = rng.standard_normal((4, 5, 6)).astype(np.float32)
    x = tf.constant(t)
    for key in [1, -1, (1, 2), (slice(1, 3),), (slice(None, None, 2),), (slice(None, None, -1),),
                (Ellipsis, 0), (None, 1), (slice(1, 3), slice(None, None, 2), None, Ellipsis),
                (slice(-3, -1), 0, slice(4, 1, -2)), (Ellipsis, None), (slice(10, 20),),
                (0, Ellipsis, slice(None, 2))]:
        close(x[key], t[key])
    assert x.shape[1:] == (5, 6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        x[4]
    with pytest.raises(tf.errors.InvalidArgumentError):
        x[0, 0, 0, 0]
    close(tf.constant(A)[tf.constant(1)], A[1])


def test_gather_one_hot_where():
    x = tf.constant(A)
    close(tf.gather(x, [2, 0]), A[[2, 0]])
    close(tf.gather(x, tf.constant([[1, 3]]), axis=1), A[:, [[1, 3]]])
    close(tf.one_hot([0, 2, 1], 3), np.eye(3, dtype=np.float32)[[0, 2, 1]])
    close(tf.one_hot([0, 2], 3, on_value=5, off_value=-1), np.array([[5, -1, -1], [-1, -1, 5]], np.int32))
    close(tf.one_hot([0, 2], 3, axis=0), np.eye(3, dtype=np.float32)[[0, 2]].T)
    close(tf.where(x > 0, x, tf.zeros_like(x)), np.where(A > 0, A, 0))
    close(tf.where(A > 0, 1.0, B), np.where(A > 0, 1.0, B))
    close(tf.where(tf.constant(A > 0)), np.argwhere(A > 0))
    close(tf.boolean_mask(x, A[:, 0] > 0), A[A[:, 0] > 0])


def test_norms_and_clips():
    x = tf.constant(A)
    close(tf.norm(x), np.linalg.norm(A), 1e-5)
    close(tf.norm(x, axis=1), np.linalg.norm(A, axis=1), 1e-5)
    close(tf.norm(x, ord=1, axis=0), np.abs(A).sum(0), 1e-5)
    n = np.linalg.norm(A)
    close(tf.clip_by_norm(x, 1.0), A * 1.0 / max(n, 1.0), 1e-5)
    close(tf.clip_by_norm(x, 100.0), A, 1e-5)
    close(tf.clip_by_value(x, -0.5, 0.5), np.clip(A, -0.5, 0.5))
    gs, gn = tf.clip_by_global_norm([x, tf.constant(B)], 1.0)
    g = np.sqrt((A ** 2).sum() + (B ** 2).sum())
    close(gn, g, 1e-5)
    close(gs[1], B / max(g, 1.0), 1e-5)
    close(tf.math.l2_normalize(x, axis=1), A / np.linalg.norm(A, axis=1, keepdims=True), 1e-5)
    close(tf.add_n([x, x, B]), 2 * A + B)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_nn():
    x = tf.constant(A)
    close(tf.nn.softmax(x), softmax(A))
    close(tf.nn.softmax(x, axis=0), softmax(A, 0))
    close(tf.nn.log_softmax(x), np.log(softmax(A)), 1e-5)
    labels = np.array([0, 3, 1], np.int32)
    close(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=x),
          -np.log(softmax(A))[np.arange(3), labels], 1e-5)
    onehot = np.eye(4, dtype=np.float32)[labels]
    close(tf.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=x),
          -(onehot * np.log(softmax(A))).sum(-1), 1e-5)
    z = (B > 0).astype(np.float32)
    close(tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=x),
          np.maximum(A, 0) - A * z + np.log1p(np.exp(-np.abs(A))), 1e-5)
    close(tf.nn.l2_loss(x), (A ** 2).sum() / 2, 1e-5)
    close(tf.nn.bias_add(x, B[0]), A + B[0])
    m, v = tf.nn.moments(x, axes=[0])
    close(m, A.mean(0), 1e-5)
    close(v, A.var(0), 1e-5)
    d = tf.nn.dropout(tf.ones([1000]), rate=0.25).numpy()
    assert set(np.unique(d)) <= {0.0, np.float32(1 / 0.75)}
    assert 650 < np.count_nonzero(d) < 850


def conv_ref(x, w, stride, pad):
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    if pad == "SAME":
        oh, ow = -(-h // stride), -(-wd // stride)
        ph = max((oh - 1) * stride + kh - h, 0)
        pw = max((ow - 1) * stride + kw - wd, 0)
        x = np.pad(x, [[0, 0], [ph // 2, ph - ph // 2], [pw // 2, pw - pw // 2], [0, 0]])
    oh = (x.shape[1] - kh) // stride + 1
    ow = (x.shape[2] - kw) // stride + 1
    out = np.zeros((n, oh, ow, o), np.float32)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def pool_ref(x, k, s, fn):
    n, h, w, c = x.shape
    oh, ow = (h - k) // s + 1, (w - k) // s + 1
    out = np.zeros((n, oh, ow, c), np.float32)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j, :] = fn(x[:, i * s:i * s + k, j * s:j * s + k, :], axis=(1, 2))
    return out


@pytest.mark.parametrize("stride,pad", [(1, "VALID"), (2, "SAME"), (1, "SAME")])
def test_conv_pool(stride, pad):
    x = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    close(tf.nn.conv2d(x, w, strides=stride, padding=pad), conv_ref(x, w, stride, pad), 1e-4)
    close(tf.nn.conv2d(x, w, strides=[1, stride, stride, 1], padding=pad), conv_ref(x, w, stride, pad), 1e-4)
    close(tf.nn.max_pool2d(x, ksize=2, strides=2, padding="VALID"), pool_ref(x, 2, 2, np.max))
    close(tf.nn.avg_pool2d(x, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID"),
          pool_ref(x, 2, 1, np.mean), 1e-5)


def test_random():
    a = tf.random.normal([1000], seed=3).numpy()
    b = tf.random.normal([1000], seed=3).numpy()
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean()) < 0.15 and 0.85 < a.std() < 1.15
    u = tf.random.uniform([1000], minval=2, maxval=5).numpy()
    assert u.min() >= 2 and u.max() < 5 and 3.3 < u.mean() < 3.7
    k = tf.random.uniform([1000], minval=0, maxval=4, dtype=tf.int32).numpy()
    assert set(np.unique(k)) == {0, 1, 2, 3}
    g1, g2 = tf.random.Generator.from_seed(7), tf.random.Generator.from_seed(7)
    np.testing.assert_array_equal(g1.normal([5]).numpy(), g2.normal([5]).numpy())
    assert not np.array_equal(g1.normal([5]).numpy(), g1.normal([5]).numpy())
    tf.random.set_seed(11)
    r1 = tf.random.uniform([4]).numpy()
    tf.random.set_seed(11)
    np.testing.assert_array_equal(r1, tf.random.uniform([4]).numpy())
    t = tf.random.truncated_normal([2000], stddev=2.0).numpy()
    assert np.abs(t).max() <= 4.0 + 1e-6
    n = tf.random.normal([3, 2], mean=5.0, stddev=0.1, dtype=tf.float16)
    assert n.dtype == tf.float16 and n.shape == (3, 2)


def test_numpy_interop():
    x = tf.constant(A)
    assert isinstance(np.asarray(x), np.ndarray)
    np.testing.assert_array_equal(np.asarray(x), A)
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert isinstance(tf.constant(5).numpy(), np.int32)
    assert float(tf.constant(2.5)) == 2.5 and int(tf.constant(3)) == 3
    assert bool(tf.constant(True)) and not bool(tf.constant([0.0]))
    assert len(x) == 3
    assert [r.shape for r in x] == [(4,)] * 3
    assert repr(tf.constant(5)) == "<vkfuse.Tensor: shape=(), dtype=int32, numpy=5>"
    assert "shape=(2,), dtype=float32" in repr(tf.constant([1.0, 2.0]))
    assert x.shape.as_list() == [3, 4] and x.shape.rank == 2 and x.shape.num_elements() == 12
    assert x.ndim == 2 and x.dtype == tf.float32 and x.dtype == np.float32 and x.dtype == "float32"
    with pytest.raises(ValueError):
        bool(x)
    with pytest.raises(TypeError):
        hash(x)
    d = {x.ref(): 1}
    assert d[x.ref()] == 1


def test_scalar_text_as_tf():
    assert str(tf.constant(2.7182817)) == "vkfuse.Tensor(2.7182817, shape=(), dtype=float32)"
    assert repr(tf.constant(5.0)) == "<vkfuse.Tensor: shape=(), dtype=float32, numpy=5.0>"
    assert repr(tf.constant(True)) == "<vkfuse.Tensor: shape=(), dtype=bool, numpy=True>"


def test_integer_pow_and_matmul():
    close(tf.pow(tf.constant(I), 2), I ** 2)
    close(tf.constant([2, 3]) ** 3, np.array([8, 27], np.int32))
    close(2 ** tf.constant([1, 4]), np.array([2, 16], np.int32))
    m = rng.integers(-9, 10, (3, 4)).astype(np.int32)
    close(tf.matmul(m, m.T), m @ m.T)
    close(tf.constant(m) @ tf.constant(m.T), m @ m.T)


def test_format_spec():
    loss = tf.constant(0.123456)
    assert f"{loss:.3f}" == "0.123" and f"{tf.constant(7):d}" == "7" and f"{tf.constant(7):>3}" == "  7"
    assert f"{loss}" == str(loss)


def test_roll_embedding_categorical():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    close(tf.roll(x, shift=1, axis=1), np.roll(x, 1, 1))
    close(tf.roll(x, shift=[-1, 2], axis=[0, 1]), np.roll(x, (-1, 2), (0, 1)))
    close(tf.nn.embedding_lookup(x, [2, 0]), x[[2, 0]])
    logits = np.log(np.array([[0.7, 0.2, 0.1], [0.0001, 0.0001, 0.9998]], np.float32))
    s = tf.random.categorical(logits, 4000, seed=5).numpy()
    assert s.shape == (2, 4000)
    freq = np.bincount(s[0], minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.7, 0.2, 0.1], atol=0.04)
    assert (s[1] == 2).mean() > 0.99


def test_nd_indexing_meshgrid():
    t = rng.standard_normal((3, 4, 2)).astype(np.float32)
    idx = np.array([[0, 1], [2, 3], [0, 1]], np.int32)
    close(tf.gather_nd(t, idx), t[idx[:, 0], idx[:, 1]])
    close(tf.gather_nd(t, [[1, 2, 0]]), t[1, 2, 0][None])
    ref = t.copy()
    upd = rng.standard_normal((3, 2)).astype(np.float32)
    np.add.at(ref, (idx[:, 0], idx[:, 1]), upd)
    close(tf.tensor_scatter_nd_add(t, idx, upd), ref, 1e-6)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.gather_nd(t, [[3, 0]])
    a, b = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.float32)
    for ind in ("xy", "ij"):
        for got, want in zip(tf.meshgrid(a, b, indexing=ind), np.meshgrid(a, b, indexing=ind)):
            close(got, want)
    close(tf.math.reduce_euclidean_norm(A, axis=1), np.linalg.norm(A, axis=1), 1e-5)


def test_stateless_random():
    a = tf.random.stateless_normal([100], seed=[1, 2]).numpy()
    np.testing.assert_array_equal(a, tf.random.stateless_normal([100], seed=[1, 2]).numpy())
    assert not np.array_equal(a, tf.random.stateless_normal([100], seed=[2, 1]).numpy())
    u = tf.random.stateless_uniform([100], seed=(3, 4), minval=-1.0, maxval=1.0).numpy()
    assert u.min() >= -1 and u.max() < 1
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.random.stateless_normal([2], seed=[1])


def test_tensor_text_as_tf():
    # TF writes NumPy's repr after numpy= and starts text that spans lines
    # on a line of its own, in repr and in str alike
    assert repr(tf.constant([1.0, 2.0])) == \
        "<vkfuse.Tensor: shape=(2,), dtype=float32, numpy=array([1., 2.], dtype=float32)>"
    assert repr(tf.constant([[1, 2], [3, 4]])) == \
        "<vkfuse.Tensor: shape=(2, 2), dtype=int32, numpy=\narray([[1, 2],\n       [3, 4]], dtype=int32)>"
    assert str(tf.constant([[1.0, 2.0], [3.0, 4.0]])) == \
        "vkfuse.Tensor(\n[[1. 2.]\n [3. 4.]], shape=(2, 2), dtype=float32)"


def test_dtype_text_as_tf():
    assert str(tf.float32) == "<dtype: 'float32'>" and str(tf.constant([1]).dtype) == "<dtype: 'int32'>"
    assert repr(tf.float16) == "vkfuse.float16"
