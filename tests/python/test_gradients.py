"""GradientTape: gradients against central finite differences, and the tape's API."""
import numpy as np
import pytest

import vkfuse as tf

rng = np.random.default_rng(1)


def fd_grad(f, xs, eps=1e-2):
    """Central differences of sum(f(*xs)) computed in float64 NumPy-side through vkfuse."""
    grads = []
    for k, x in enumerate(xs):
        g = np.zeros_like(x, dtype=np.float64)
        for idx in np.ndindex(x.shape):
            hi = [v.copy() for v in xs]
            lo = [v.copy() for v in xs]
            hi[k][idx] += eps
            lo[k][idx] -= eps
            fp = float(tf.reduce_sum(f(*[tf.constant(v) for v in hi])))
            fm = float(tf.reduce_sum(f(*[tf.constant(v) for v in lo])))
            g[idx] = (fp - fm) / (2 * eps)
        grads.append(g)
    return grads


def check(f, *xs, tol=2e-2):
    xs = [np.asarray(x, np.float32) for x in xs]
    ts = [tf.constant(x) for x in xs]
    with tf.GradientTape() as tape:
        for t in ts:
            tape.watch(t)
        y = f(*ts)
    got = tape.gradient(y, ts)
    for g, r in zip(got, fd_grad(f, xs)):
        np.testing.assert_allclose(g.numpy(), r, rtol=tol, atol=tol)


X = rng.standard_normal((2, 3)).astype(np.float32)
Y = rng.standard_normal((2, 3)).astype(np.float32)
POS = np.abs(X) + 0.5
W = rng.standard_normal((3, 2)).astype(np.float32)

CASES = [
    (lambda a, b: a * b + a, X, Y), (lambda a, b: a / b, X, POS), (lambda a, b: a - 2 * b, X, Y),
    (lambda a, b: tf.maximum(a, b), X, Y + 0.05), (lambda a: tf.exp(a), X), (lambda a: tf.math.log(a), POS),
    (lambda a: tf.sqrt(a), POS), (lambda a: tf.tanh(a), X), (lambda a: tf.sigmoid(a), X),
    (lambda a: tf.nn.relu(a), X + 0.05), (lambda a: tf.nn.gelu(a), X), (lambda a: tf.square(a) ** 1.5, POS),
    (lambda a, w: tf.matmul(a, w), X, W), (lambda a: tf.nn.softmax(a) * tf.constant(Y), X),
    (lambda a: tf.nn.log_softmax(a) * tf.constant(Y), X), (lambda a: tf.reduce_mean(a, axis=0) ** 2, X),
    (lambda a: tf.reduce_max(a, axis=1), X), (lambda a: tf.norm(a), X),
    (lambda a: tf.transpose(a) * tf.constant(W), X), (lambda a: tf.reshape(a, [3, 2]) * tf.constant(W), X),
    (lambda a: a[:, 1:] * 3, X), (lambda a: tf.concat([a, a * 2], 0), X),
    (lambda a: tf.gather(a, [1, 1, 0], axis=1) ** 2, X), (lambda a: tf.where(a > 0, a * a, -a), X),
    (lambda a: tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[2, 0], logits=a), X),
    (lambda a: tf.clip_by_norm(a, 1.0), X), (lambda a: tf.reduce_logsumexp(a, axis=1), X),
    (lambda a: tf.math.softplus(a) + tf.math.erf(a), X),
]


@pytest.mark.parametrize("i", range(len(CASES)))
def test_finite_differences(i):
    f, *xs = CASES[i]
    check(f, *xs)


def test_conv_gradient():
    x = rng.standard_normal((1, 4, 4, 2)).astype(np.float32)
    w = rng.standard_normal((2, 2, 2, 2)).astype(np.float32)
    check(lambda a, b: tf.nn.conv2d(a, b, 1, "SAME"), x, w, tol=3e-2)
    check(lambda a: tf.nn.avg_pool2d(a, 2, 2, "VALID") * 3, x)


def test_variables_nested_structures():
    v1 = tf.Variable([[1.0, 2.0]])
    v2 = tf.Variable([3.0])
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(v1 * v1) + tf.reduce_sum(v2 * v1)
    g = tape.gradient(y, {"a": [v1], "b": (v2,)})
    assert list(g) == ["a", "b"] and isinstance(g["a"], list) and isinstance(g["b"], tuple)
    np.testing.assert_allclose(g["a"][0].numpy(), [[2 + 3, 4 + 3]])
    np.testing.assert_allclose(g["b"][0].numpy(), [3.0])


def test_list_targets_and_output_gradients():
    x = tf.constant([1.0, 2.0])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        a, b = x * x, 3 * x
    np.testing.assert_allclose(tape.gradient([a, b], x).numpy(), [2 + 3, 4 + 3])
    np.testing.assert_allclose(tape.gradient(a, x, output_gradients=tf.constant([10.0, 1.0])).numpy(), [20, 4])
    del tape


def test_persistent_and_single_use():
    x = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = x * x
        z = y * x
    assert float(tape.gradient(y, x)) == 6.0
    assert float(tape.gradient(z, x)) == 27.0
    with tf.GradientTape() as t1:
        t1.watch(x)
        y = x * x
    assert float(t1.gradient(y, x)) == 6.0
    with pytest.raises(RuntimeError):
        t1.gradient(y, x)


def test_higher_order():
    x = tf.Variable(2.0)
    with tf.GradientTape() as t3:
        with tf.GradientTape() as t2:
            with tf.GradientTape() as t1:
                y = x * x * x
            dy = t1.gradient(y, x)
        d2y = t2.gradient(dy, x)
    d3y = t3.gradient(d2y, x)
    assert (float(dy), float(d2y), float(d3y)) == (12.0, 12.0, 6.0)


def test_stop_recording_and_stop_gradient():
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = x * x
        with tape.stop_recording():
            z = x * x  # a constant to the tape
        w = y + z * x
    assert float(tape.gradient(w, x)) == pytest.approx(2 * 3 + 9)
    with tf.GradientTape() as tape:
        y = x * tf.stop_gradient(x)
    assert float(tape.gradient(y, x)) == 3.0


def test_unconnected_source_gets_none_or_zeros():
    """TF's default UnconnectedGradients.NONE gives None; 'zero' gives zeros of the source's shape."""
    x, u, s = tf.Variable(1.0), tf.Variable([1.0, 2.0]), tf.Variable(3.0)
    with tf.GradientTape(persistent=True) as tape:
        y = x * 2 + tf.stop_gradient(s * s)
        c = tf.reduce_sum(u * u)
    gx, gu, gs = tape.gradient(y, [x, u, s])
    assert float(gx) == 2.0
    assert gu is None and gs is None
    assert tape.gradient(c, {"x": x, "s": s}) == {"x": None, "s": None}
    gx, gu = tape.gradient(y, [x, u], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert float(gx) == 2.0
    np.testing.assert_array_equal(gu.numpy(), [0.0, 0.0])
    assert tape.gradient(y, u, unconnected_gradients="zero").shape == (2,)
    with pytest.raises(ValueError, match="unconnected_gradients"):
        tape.gradient(y, u, unconnected_gradients="zeros")
    # an optimizer skips a None gradient, as TF's does
    opt = tf.optimizers.SGD(0.5)
    opt.apply_gradients(zip(tape.gradient(y, [x, u]), [x, u]))
    assert float(x) == 0.0
    np.testing.assert_array_equal(u.numpy(), [1.0, 2.0])


def test_tape_errors():
    x = tf.constant([1, 2])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = x * 2
    assert tape.gradient(y, x) is None  # integer sources have no gradient: None, as TF
    with pytest.raises(ValueError):
        tf.GradientTape().watch(3)
