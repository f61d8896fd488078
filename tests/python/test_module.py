"""tf.Module: variables through attributes; initializers; a TF2 tutorial-style training loop."""
import numpy as np

import vkfuse as tf


class Dense(tf.Module):
    def __init__(self, in_features, out_features, name=None):
        super().__init__(name=name)
        self.w = tf.Variable(tf.random.normal([in_features, out_features], seed=1), name="w")
        self.b = tf.Variable(tf.zeros([out_features]), name="b")

    def __call__(self, x):
        return tf.nn.relu(tf.matmul(x, self.w) + self.b)


class MLP(tf.Module):
    def __init__(self):
        super().__init__()
        self.layers = [Dense(3, 8), Dense(8, 1)]
        self.frozen = tf.Variable(1.0, trainable=False)

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x * self.frozen


def test_module_tracking_and_training():
    m = MLP()
    assert m.name == "mlp"
    assert len(m.variables) == 5 and len(m.trainable_variables) == 4 and len(m.non_trainable_variables) == 1
    assert len(m.submodules) == 2
    x = np.random.default_rng(0).standard_normal((32, 3)).astype(np.float32)
    y = np.abs(x).sum(1, keepdims=True)
    first = float(tf.reduce_mean((m(x) - y) ** 2))
    for _ in range(30):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((m(x) - y) ** 2)
        for v, g in zip(m.trainable_variables, tape.gradient(loss, m.trainable_variables)):
            v.assign_sub(0.02 * g)
    assert float(loss) < first


def test_initializers_and_helpers():
    assert tf.zeros_initializer()([2, 3]).numpy().sum() == 0
    assert tf.ones_initializer()([2], tf.int32).numpy().tolist() == [1, 1]
    np.testing.assert_array_equal(tf.constant_initializer(3.0)([2, 2]).numpy(), np.full((2, 2), 3.0))
    r = tf.random_normal_initializer(stddev=0.01, seed=2)([1000]).numpy()
    assert 0.005 < r.std() < 0.02
    u = tf.initializers.GlorotUniform(seed=3)([30, 20]).numpy()
    assert np.abs(u).max() <= np.sqrt(6 / 50) + 1e-6
    assert tf.executing_eagerly()
    with tf.name_scope("block"):
        assert tf.get_static_value(tf.constant([1, 2])).tolist() == [1, 2]
