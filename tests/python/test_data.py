"""vkfuse.data.Dataset: slices, batches, shuffle, repeat, map, filter, take, zip, enumerate."""
import numpy as np

import vkfuse as tf


def test_pipeline():
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    y = np.arange(5, dtype=np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    first = next(iter(ds))
    assert isinstance(first, tuple) and first[0].numpy().tolist() == [0, 1] and int(first[1]) == 0
    batches = list(ds.batch(2))
    assert [b[0].shape for b in batches] == [(2, 2), (2, 2), (1, 2)]
    assert [b[1].numpy().tolist() for b in ds.batch(2, drop_remainder=True)] == [[0, 1], [2, 3]]
    shuffled = [int(e[1]) for e in ds.shuffle(5, seed=1)]
    assert sorted(shuffled) == list(range(5))
    assert len(list(ds.repeat(3))) == 15 and len(list(ds.repeat().take(7))) == 7
    doubled = ds.map(lambda a, b: (a * 2, b)).filter(lambda a, b: b % 2 == 0)
    assert [int(b) for _, b in doubled] == [0, 2, 4]
    assert [e.numpy().tolist() for e in tf.data.Dataset.range(3).skip(1)] == [1, 2]
    d = tf.data.Dataset.from_tensor_slices({"a": x, "b": y}).batch(5).prefetch(tf.data.AUTOTUNE)
    (only,) = list(d)
    np.testing.assert_array_equal(only["a"].numpy(), x)
    z = tf.data.Dataset.zip((tf.data.Dataset.range(2), tf.data.Dataset.range(2)))
    assert [(int(a), int(b)) for a, b in z] == [(0, 0), (1, 1)]
    assert [int(i) for i, _ in ds.enumerate()] == list(range(5))
    assert int(ds.cardinality()) == 5
    assert list(ds.take(1).as_numpy_iterator())[0][0].tolist() == [0.0, 1.0]


def test_training_over_batches():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 2)).astype(np.float32)
    y = x @ np.array([[2.0], [-1.0]], np.float32)
    w = tf.Variable(tf.zeros([2, 1]))
    for _ in range(5):
        for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).shuffle(64, seed=0).batch(16):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((xb @ w - yb) ** 2)
            w.assign_sub(0.2 * tape.gradient(loss, w))
    np.testing.assert_allclose(w.numpy().ravel(), [2.0, -1.0], atol=0.05)
