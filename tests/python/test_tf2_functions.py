"""TF2 programs in the style of TF's guides "Better performance with
tf.function" and "Introduction to graphs and tf.function" (retracing
rules, input_signature, print vs tf.print, AutoGraph loops, TensorArray,
functional control flow) and tf.random, run with ``import vkfuse as tf``:
values against NumPy, trace counts and printed text against TF's."""
import numpy as np
import pytest

import vkfuse as tf
from tf2util import close


# ---- "Better performance with tf.function" / "Introduction to graphs" ----

def test_function_retracing_rules(capsys):
    @tf.function
    def double(a):
        print("Tracing with", a)
        return a + a

    assert double(tf.constant(1)).numpy() == 2
    assert double(tf.constant(1.1)).numpy() == pytest.approx(2.2)
    assert double(tf.constant(2)).numpy() == 4  # same signature: no retrace
    out = capsys.readouterr().out
    assert out.count("Tracing with") == 2
    assert double.experimental_get_tracing_count() == 2

    @tf.function
    def f(x, n):
        return x * n

    f(tf.constant(1.0), 2)
    f(tf.constant(1.0), 2)
    f(tf.constant(1.0), 3)  # new Python value: retrace
    f(tf.constant([1.0, 2.0]), 3)  # new shape: retrace
    assert f.experimental_get_tracing_count() == 3
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
        double.get_concrete_function(tf.TensorSpec([None], tf.float32))(tf.constant([1, 2]))


def test_function_input_signature():
    @tf.function(input_signature=(tf.TensorSpec(shape=[None], dtype=tf.int32),))
    def next_collatz(x):
        print("Tracing with", x)
        return tf.where(x % 2 == 0, x // 2, 3 * x + 1)

    assert next_collatz(tf.constant([1, 2])).numpy().tolist() == [4, 1]
    assert next_collatz(tf.constant([1, 2, 3, 4, 5])).numpy().tolist() == [4, 1, 10, 2, 16]
    assert next_collatz.experimental_get_tracing_count() == 1
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        next_collatz(tf.constant([[1, 2], [3, 4]]))
    with pytest.raises((TypeError, ValueError, tf.errors.InvalidArgumentError)):
        next_collatz(tf.constant([1.0, 2.0]))

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def column_means(x):  # tf.shape follows the None dim at every call
        n = tf.shape(x)[0]
        return tf.reduce_sum(x, axis=0) / tf.cast(n, tf.float32), tf.shape(x), tf.zeros_like(x), tf.ones_like(x)

    for rows in (3, 5):
        xs = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        mean, shp, z, o = column_means(tf.constant(xs))
        close(mean, xs.mean(0))
        assert shp.numpy().tolist() == [rows, 2] and z.shape == (rows, 2) and o.shape == (rows, 2)
        assert float(tf.reduce_sum(o)) == rows * 2
    assert column_means.experimental_get_tracing_count() == 1

    @tf.function
    def shaped(x):  # static shapes: ops that take a shape read tf.shape's value
        return tf.reshape(x, [tf.shape(x)[0], -1]), tf.fill(tf.shape(x)[1:], 2.0), tf.zeros(tf.shape(x))

    a, b, c = shaped(tf.ones([2, 3, 2]))
    assert a.shape == (2, 6) and b.shape == (3, 2) and c.shape == (2, 3, 2)


def test_function_print_vs_tf_print(capsys):
    @tf.function
    def g(x):
        print("python side effect")
        tf.print("graph side effect", x)
        return x * 2

    g(tf.constant(1))
    g(tf.constant(2))
    captured = capsys.readouterr()
    assert captured.out.count("python side effect") == 1
    assert captured.err.count("graph side effect") == 2
    assert "graph side effect 2" in captured.err
    tf.print(tf.constant([[1, 2], [3, 4]]))
    assert capsys.readouterr().err.strip() == "[[1 2]\n [3 4]]"
    tf.print("x:", tf.constant(1.5), tf.constant([True, False]), {"a": tf.constant(1), "b": [tf.constant([1.5, 2.0])]})
    assert capsys.readouterr().err == "x: 1.5 [1 0] {'a': 1, 'b': [[1.5 2]]}\n"
    tf.print(tf.range(100))
    assert capsys.readouterr().err == "[0 1 2 ... 97 98 99]\n"

    @tf.function
    def h(x):
        tf.print("h", {"x": x, "n": 2}, (x * 2,), sep="|")
        return x

    h(tf.constant([1, 2]))
    h(tf.constant([3, 4]))
    assert capsys.readouterr().err == "h|{'x': [1 2], 'n': 2}|([2 4],)\nh|{'x': [3 4], 'n': 2}|([6 8],)\n"


def test_function_autograph_loops():
    @tf.function
    def sum_even(items):
        s = 0
        for c in items:
            if c % 2 > 0:
                continue
            s += c
        return s

    assert sum_even(tf.constant([10, 12, 15, 20])).numpy() == 42

    @tf.function
    def fizz(n):
        total = tf.constant(0.0)
        i = tf.constant(0)
        while i < n:
            total += tf.cast(i, tf.float32) * 0.5
            i += 1
        return total

    assert fizz(tf.constant(10)).numpy() == pytest.approx(22.5)

    @tf.function
    def loop_range(n):
        acc = tf.zeros([2])
        for i in tf.range(n):
            acc = acc + tf.cast(i, tf.float32)
        return acc

    close(loop_range(tf.constant(5)), [10.0, 10.0])
    assert loop_range.experimental_get_tracing_count() == 1
    loop_range(tf.constant(7))
    assert loop_range.experimental_get_tracing_count() == 1


def test_tensorarray():
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
    acc = tf.constant(0.0)
    x = tf.constant([1.0, 2.0, 3.0, 4.0])
    for i in tf.range(4):  # eager: a Python loop over tensors
        acc = acc + x[i]
        ta = ta.write(i, acc)
    close(ta.stack(), [1.0, 3.0, 6.0, 10.0])
    ta = tf.TensorArray(tf.int32, size=3)
    ta.write(0, 5).write(1, 6)  # eager arrays write in place, as TF's
    ta.write(2, 7)
    assert ta.stack().numpy().tolist() == [5, 6, 7]
    assert ta.read(1).numpy() == 6 and ta.size().numpy() == 3
    assert ta.gather([2, 0]).numpy().tolist() == [7, 5]
    with pytest.raises(tf.errors.InvalidArgumentError):
        ta.write(3, 1)  # not dynamic_size
    with pytest.raises(tf.errors.InvalidArgumentError):
        ta.write(0, tf.constant([1, 2]))  # another element shape
    u = tf.TensorArray(tf.float32, size=2).unstack(tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    close(u.read(1), [3.0, 4.0])
    close(u.concat(), [1.0, 2.0, 3.0, 4.0])
    z = tf.TensorArray(tf.float32, size=2, element_shape=[2]).write(1, [1.0, 1.0])
    close(z.stack(), [[0.0, 0.0], [1.0, 1.0]])  # unwritten elements are zeros

    @tf.function
    def squares(x):  # a Python loop, unrolled while tracing
        ta = tf.TensorArray(tf.float32, size=3)
        for i in range(3):
            ta = ta.write(i, x[i] * x[i])
        return ta.stack()

    close(squares(tf.constant([1.0, 2.0, 3.0])), [1.0, 4.0, 9.0])
    close(squares(tf.constant([2.0, 2.0, 2.0])), [4.0, 4.0, 4.0])

    @tf.function
    def cumulative(x):  # a graph loop: refused, saying what to do instead
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        for i in tf.range(tf.shape(x)[0]):
            ta = ta.write(i, x[i])
        return ta.stack()

    with pytest.raises((TypeError, ValueError)) as e:
        cumulative(tf.constant([1.0, 2.0]))
    assert "TensorArray" in str(e.value) and "Python" in str(e.value)


def test_function_early_return_and_cond():
    @tf.function
    def bucket(x):  # early returns in an if/elif chain on tensors; Python numbers become tensors
        if x < 0:
            return -1
        elif x < 10:
            return 1
        return 2

    assert [int(bucket(tf.constant(v))) for v in (-5, 3, 50)] == [-1, 1, 2]
    assert bucket.experimental_get_tracing_count() == 1

    @tf.function
    def clip_relu(x):
        if tf.reduce_max(x) > 5.0:
            x = tf.clip_by_value(x, 0.0, 5.0)
        return tf.nn.relu(x)

    close(clip_relu(tf.constant([-1.0, 7.0])), [0.0, 5.0])
    close(clip_relu(tf.constant([-1.0, 3.0])), [0.0, 3.0])


def test_function_variables_and_graph_side_effects():
    v = tf.Variable(1.0)

    @tf.function
    def bump(x):
        v.assign_add(x)
        return v.read_value()

    assert bump(tf.constant(2.0)).numpy() == 3.0
    assert bump(tf.constant(2.0)).numpy() == 5.0
    assert v.numpy() == 5.0
    external_list = []

    @tf.function
    def side_effect(x):
        external_list.append(x)
        return x + 1

    side_effect(tf.constant(1.0))
    side_effect(tf.constant(2.0))
    assert len(external_list) == 1

    class Count(tf.Module):
        def __init__(self):
            super().__init__()
            self.count = None

        @tf.function
        def __call__(self):
            if self.count is None:
                self.count = tf.Variable(0)
            self.count.assign_add(1)
            return self.count

    c = Count()
    c()
    assert int(c()) == 2


def test_run_functions_eagerly_and_structures():
    @tf.function
    def get_mse(y_true, y_pred):
        sq_diff = tf.pow(y_true - y_pred, 2)
        return tf.reduce_mean(sq_diff)

    y_true = tf.random.uniform([5], maxval=10, dtype=tf.int32)
    y_pred = tf.random.uniform([5], maxval=10, dtype=tf.int32)
    ref = int(np.mean((y_true.numpy() - y_pred.numpy()) ** 2))
    assert get_mse(y_true, y_pred).numpy() == ref
    tf.config.run_functions_eagerly(True)
    try:
        assert get_mse(y_true, y_pred).numpy() == ref
    finally:
        tf.config.run_functions_eagerly(False)

    @tf.function
    def dict_fn(d):
        return {"sum": d["a"] + d["b"], "prod": d["a"] * d["b"]}

    out = dict_fn({"a": tf.constant(2.0), "b": tf.constant(3.0)})
    assert out["sum"].numpy() == 5.0 and out["prod"].numpy() == 6.0


def test_functional_control_flow():
    # "Introduction to graphs": tf.cond / tf.while_loop, eagerly and traced
    assert tf.cond(tf.constant(True), lambda: 1, lambda: 2) == 1
    (i,) = tf.while_loop(lambda i: i < 3, lambda i: (i + 1,), [tf.constant(0)])
    assert int(i) == 3
    assert int(tf.while_loop(lambda i: i < 3, lambda i: i + 1, tf.constant(0))) == 3
    n, s = tf.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + tf.cast(i, tf.float32)), (0, 0.0))
    assert int(n) == 5 and float(s) == 10.0

    @tf.function
    def f(x):
        y, d = tf.cond(tf.reduce_sum(x) > 0, lambda: (x * 2, {"n": tf.constant(1)}),
                       lambda: (x - 1, {"n": 2}))
        _, acc = tf.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * 2.0), [tf.constant(0), x])
        (k,) = tf.while_loop(lambda i: True, lambda i: (i + 1,), [tf.constant(0)], maximum_iterations=7)
        return y, d["n"], acc, k

    y, d, acc, k = f(tf.constant([1.0, 2.0]))
    close(y, [2.0, 4.0]); close(acc, [16.0, 32.0])
    assert int(d) == 1 and int(k) == 7
    y, d, acc, k = f(tf.constant([-1.0, -2.0]))
    close(y, [-2.0, -3.0]); close(acc, [-16.0, -32.0])
    assert int(d) == 2 and f.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError):
        tf.function(lambda x: tf.cond(x > 0, lambda: (x, x), lambda: x))(tf.constant(1.0))
    close(tf.map_fn(lambda v: v * v, tf.constant([1.0, 2.0, 3.0])), [1.0, 4.0, 9.0])
    assert tf.map_fn(lambda t: t[0] + t[1], (tf.constant([1, 2]), tf.constant([10, 20]))).numpy().tolist() == [11, 22]
    close(tf.scan(lambda a, v: a + v, tf.constant([1.0, 2.0, 3.0])), [1.0, 3.0, 6.0])
    close(tf.scan(lambda a, v: a * v, tf.constant([1.0, 2.0, 3.0]), initializer=tf.constant(2.0)), [2.0, 4.0, 12.0])
    assert int(tf.foldl(lambda a, v: a + v, tf.constant([1, 2, 3]))) == 6
    assert int(tf.foldr(lambda a, v: a - v, tf.constant([1, 2, 3]), initializer=10)) == 4
    close(tf.function(lambda x: tf.map_fn(tf.reduce_sum, x))(tf.ones([3, 2])), [2.0, 2.0, 2.0])


# ---- tf.random ----

def test_random_seeds_shapes_statistics():
    tf.random.set_seed(5)
    a = tf.random.normal([2000], mean=1.0, stddev=2.0)
    tf.random.set_seed(5)
    b = tf.random.normal([2000], mean=1.0, stddev=2.0)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.dtype == tf.float32 and a.shape == (2000,)
    assert abs(float(tf.reduce_mean(a)) - 1.0) < 0.2 and abs(float(tf.math.reduce_std(a)) - 2.0) < 0.2
    u = tf.random.uniform([3, 1000], minval=-1, maxval=3)
    assert u.shape == (3, 1000) and float(tf.reduce_min(u)) >= -1 and float(tf.reduce_max(u)) < 3
    ui = tf.random.uniform([1000], minval=0, maxval=5, dtype=tf.int32)
    assert ui.dtype == tf.int32 and set(np.unique(ui.numpy())) <= set(range(5))
    t = tf.random.truncated_normal([2000])
    assert float(tf.reduce_max(tf.abs(t))) <= 2.0 + 1e-6
    g = tf.random.Generator.from_seed(1)
    g2 = tf.random.Generator.from_seed(1)
    np.testing.assert_array_equal(g.normal([4]).numpy(), g2.normal([4]).numpy())
    s1 = tf.random.stateless_normal([3], seed=[1, 2])
    s2 = tf.random.stateless_normal([3], seed=[1, 2])
    np.testing.assert_array_equal(s1.numpy(), s2.numpy())
    sh = tf.random.shuffle(tf.range(10))
    assert sorted(sh.numpy().tolist()) == list(range(10))
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        tf.random.uniform([3], minval=0, dtype=tf.int32)
    su = tf.random.stateless_uniform([4000], seed=[3, 4], minval=2.0, maxval=4.0)
    assert 2.0 <= float(tf.reduce_min(su)) and float(tf.reduce_max(su)) < 4.0
    assert abs(float(tf.reduce_mean(su)) - 3.0) < 0.05 and abs(float(tf.math.reduce_variance(su)) - 1 / 3) < 0.03


def test_random_inside_function():
    @tf.function
    def noisy(x):  # draws at every call, as TF's stateful random ops in a tf.function
        return (x + tf.random.uniform(tf.shape(x)), x + tf.random.normal([3], seed=7),
                tf.random.stateless_normal([3], seed=[1, 2]), tf.random.truncated_normal([3]),
                tf.random.stateless_uniform([3], seed=[5, 6], maxval=10, dtype=tf.int32))

    x = tf.zeros([3])
    a, b = noisy(x), noisy(x)
    assert a[0].shape == (3,) and a[4].dtype == tf.int32
    assert not np.array_equal(a[0].numpy(), b[0].numpy())
    assert not np.array_equal(a[1].numpy(), b[1].numpy())
    np.testing.assert_array_equal(a[2].numpy(), b[2].numpy())  # stateless: the seed decides
    np.testing.assert_array_equal(a[2].numpy(), tf.random.stateless_normal([3], seed=[1, 2]).numpy())
    np.testing.assert_array_equal(a[4].numpy(), b[4].numpy())
    assert float(tf.reduce_max(tf.abs(a[3]))) <= 2.0 and 0.0 <= float(tf.reduce_min(a[0])) < 1.0
    assert noisy.experimental_get_tracing_count() == 1
