"""TF2-style programs, run as written with ``import vkfuse as tf``."""
import numpy as np

import vkfuse as tf


def test_eager_snippets():
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    y = tf.matmul(x, x) + 1
    assert y.numpy().tolist() == [[8.0, 11.0], [16.0, 23.0]]
    v = tf.Variable(tf.zeros([2]))
    v.assign([1.0, 2.0])
    v.assign_add(tf.ones([2]))
    v.assign_sub([0.5, 0.5])
    np.testing.assert_array_equal(v.numpy(), [1.5, 2.5])
    r = v.read_value()
    v.assign([9.0, 9.0])
    np.testing.assert_array_equal(r.numpy(), [1.5, 2.5])
    assert v.trainable and v.name == "Variable:0" and v.shape == (2,)
    c = tf.Variable(0)
    for i in tf.range(5):
        c.assign_add(i)
    assert int(c) == 10
    s = tf.constant([1, 2, 3])
    assert (s * 2).numpy().tolist() == [2, 4, 6]
    assert tf.reduce_sum(tf.cast(s > 1, tf.float32)).numpy() == 2.0


def test_mlp_training():
    rng = np.random.default_rng(0)
    n, d, h, k = 256, 4, 16, 3
    xs = rng.standard_normal((n, d)).astype(np.float32)
    true_w = rng.standard_normal((d, k)).astype(np.float32)
    ys = (xs @ true_w).argmax(1).astype(np.int32)
    tf.random.set_seed(0)
    w1 = tf.Variable(tf.random.normal([d, h], stddev=0.5))
    b1 = tf.Variable(tf.zeros([h]))
    w2 = tf.Variable(tf.random.normal([h, k], stddev=0.5))
    b2 = tf.Variable(tf.zeros([k]))
    params = [w1, b1, w2, b2]

    def model(x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2

    def loss_fn(x, y):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x)))

    first = float(loss_fn(xs, ys))
    for step in range(30):
        with tf.GradientTape() as tape:
            loss = loss_fn(xs, ys)
        grads = tape.gradient(loss, params)
        for p, g in zip(params, grads):
            p.assign_sub(1.0 * g)
    last = float(loss_fn(xs, ys))
    acc = float(tf.reduce_mean(tf.cast(tf.equal(tf.argmax(model(xs), axis=1), ys), tf.float32)))
    assert last < first * 0.5 and acc > 0.85, (first, last, acc)
    # The same forward pass in NumPy.
    hid = np.maximum(xs @ w1.numpy() + b1.numpy(), 0)
    np.testing.assert_allclose(model(xs).numpy(), hid @ w2.numpy() + b2.numpy(), rtol=1e-4, atol=1e-4)


def test_linear_regression_with_numpy_data():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((100, 1))  # float64 data, as NumPy makes it
    y = 3 * x + 2
    w, b = tf.Variable(0.0), tf.Variable(0.0)
    for _ in range(100):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(y - (w * x + b)))
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)
    assert abs(float(w) - 3) < 1e-2 and abs(float(b) - 2) < 1e-2


def test_cnn_forward_backward():
    rng = np.random.default_rng(2)
    x = tf.constant(rng.standard_normal((2, 8, 8, 1)).astype(np.float32))
    k = tf.Variable(tf.random.normal([3, 3, 1, 4], seed=1) * 0.3)
    dense = tf.Variable(tf.random.normal([4 * 4 * 4, 2], seed=2) * 0.1)
    with tf.GradientTape() as tape:
        h = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, k, strides=1, padding="SAME")), 2, 2, "VALID")
        logits = tf.matmul(tf.reshape(h, [2, -1]), dense)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=[0, 1], logits=logits))
    gk, gd = tape.gradient(loss, [k, dense])
    assert gk.shape == (3, 3, 1, 4) and gd.shape == (64, 2)
    assert np.isfinite(gk.numpy()).all() and np.abs(gd.numpy()).sum() > 0
