"""Optimizers against NumPy implementations of Keras 2's update rules."""
import numpy as np
import pytest

import vkfuse as tf

G = [np.array([0.5, -1.0], np.float32), np.array([0.1, 0.2], np.float32), np.array([-0.3, 0.4], np.float32)]


def run(opt):
    v = tf.Variable([1.0, 2.0])
    for g in G:
        opt.apply_gradients(zip([tf.constant(g), None], [v, tf.Variable(0.0)]))
    return v.numpy()


def test_sgd():
    np.testing.assert_allclose(run(tf.keras.optimizers.SGD(0.1)), [1.0, 2.0] - 0.1 * sum(G), rtol=1e-6)
    w, m = np.array([1.0, 2.0]), np.zeros(2)
    wn, mn = w.copy(), np.zeros(2)
    for g in G:
        m = 0.9 * m - 0.1 * g
        w = w + m
        mn = 0.9 * mn - 0.1 * g
        wn = wn + 0.9 * mn - 0.1 * g
    np.testing.assert_allclose(run(tf.keras.optimizers.SGD(0.1, momentum=0.9)), w, rtol=1e-5)
    np.testing.assert_allclose(run(tf.optimizers.SGD(0.1, momentum=0.9, nesterov=True)), wn, rtol=1e-5)


def test_adam_rmsprop():
    w, m, v = np.array([1.0, 2.0]), np.zeros(2), np.zeros(2)
    for t, g in enumerate(G, 1):
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - 0.01 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-7)
    np.testing.assert_allclose(run(tf.keras.optimizers.Adam(0.01)), w, rtol=1e-5)
    w, s = np.array([1.0, 2.0]), np.zeros(2)
    for g in G:
        s = 0.9 * s + 0.1 * g * g
        w = w - 0.01 * g / (np.sqrt(s) + 1e-7)
    np.testing.assert_allclose(run(tf.keras.optimizers.RMSprop(0.01)), w, rtol=1e-5)


def test_minimize():
    x = tf.Variable(3.0)
    opt = tf.keras.optimizers.SGD(learning_rate=0.1)
    for _ in range(50):
        opt.minimize(lambda: (x - 1.0) ** 2, [x])
    assert abs(float(x) - 1.0) < 1e-3 and opt.iterations == 50
    with pytest.raises(AttributeError):
        tf.keras.layers  # noqa: B018 (only optimizers are there)
