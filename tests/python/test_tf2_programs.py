"""TF2 programs in the style of TF's guides "Introduction to tensors",
"Introduction to Variables" and "Introduction to gradients and automatic
differentiation", run with ``import vkfuse as tf``: values against NumPy,
behaviour (dtypes, shapes, exceptions, printed text) against what
TensorFlow 2 documents. test_tf2_functions.py and test_tf2_training.py
hold the tf.function and training-loop programs."""
import numpy as np
import pytest

import vkfuse as tf
from tf2util import close


# ---- "Introduction to tensors" ----

def test_tensor_basics_and_dtypes():
    rank_0 = tf.constant(4)
    rank_1 = tf.constant([2.0, 3.0, 4.0])
    rank_2 = tf.constant([[1, 2], [3, 4], [5, 6]], dtype=tf.float16)
    assert rank_0.dtype == tf.int32 and rank_0.shape == ()
    assert rank_1.dtype == tf.float32 and rank_1.shape == (3,)
    assert rank_2.dtype == tf.float16 and rank_2.shape.as_list() == [3, 2]
    assert repr(rank_0) == "<tf.Tensor: shape=(), dtype=int32, numpy=4>".replace("tf.", "vkfuse.")
    # TF's text with the module's name, as repr
    assert str(rank_1) == "vkfuse.Tensor([2. 3. 4.], shape=(3,), dtype=float32)"
    assert tf.rank(rank_2).numpy() == 2 and tf.size(rank_2).numpy() == 6
    assert tf.size(rank_2).dtype == tf.int32
    assert rank_2.ndim == 2 and len(rank_2) == 3
    a = tf.constant([[1, 2], [3, 4]])
    b = tf.ones([2, 2], dtype=tf.int32)
    assert (tf.add(a, b).numpy() == [[2, 3], [4, 5]]).all()
    assert (tf.multiply(a, b).numpy() == a.numpy()).all()
    assert (tf.matmul(tf.cast(a, tf.float32), tf.cast(b, tf.float32)).numpy() == [[3, 3], [7, 7]]).all()
    c = tf.constant([[4.0, 5.0], [10.0, 1.0]])
    assert tf.reduce_max(c).numpy() == 10.0
    assert tf.math.argmax(c).numpy().tolist() == [1, 0]
    close(tf.nn.softmax(c), np.exp(c.numpy()) / np.exp(c.numpy()).sum(-1, keepdims=True))
    # Python scalars adopt the tensor's dtype; int + float tensors do not promote
    assert (tf.constant([1, 2]) + 1).dtype == tf.int32
    assert (tf.constant([1.0, 2.0], dtype=tf.float16) * 2.5).dtype == tf.float16
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError)):
        tf.constant([1, 2]) + tf.constant([1.0, 2.0])
    with pytest.raises(TypeError):
        tf.constant([1, 2]) * 0.5
    assert tf.cast(tf.constant([2.7, -2.7]), tf.int32).numpy().tolist() == [2, -2]
    f64 = tf.constant([2.2, 3.3, 4.4], dtype=tf.float64)
    f16 = tf.cast(f64, dtype=tf.float16)
    u8 = tf.cast(f16, dtype=tf.uint8)
    assert u8.numpy().tolist() == [2, 3, 4]
    assert tf.constant(True).dtype == tf.bool
    assert tf.convert_to_tensor(np.arange(3, dtype=np.int32)).dtype == tf.int32


def test_devices_listing():
    # the first lines of many TF programs
    cpus = tf.config.list_physical_devices("CPU")
    gpus = tf.config.list_physical_devices("GPU")
    assert [d.device_type for d in cpus] == ["CPU"] and cpus[0].name == "/physical_device:CPU:0"
    assert len(gpus) == len(tf.devices()) and all(d.name.startswith("/physical_device:GPU:") for d in gpus)
    assert tf.config.list_physical_devices() == cpus + gpus
    with tf.device("/GPU:0" if gpus else "/CPU:0"):
        a = tf.constant([1.0, 2.0]) * 2
    assert (a + tf.ones([2])).numpy().tolist() == [3.0, 5.0]
    assert tf.dtypes.cast(tf.constant([1.7]), tf.int32).numpy().tolist() == [1]


def test_broadcasting():
    x = tf.constant([1, 2, 3])
    y = tf.constant(2)
    z = tf.constant([2, 2, 2])
    assert (tf.multiply(x, 2).numpy() == (x * y).numpy()).all()
    assert ((x * z).numpy() == [2, 4, 6]).all()
    x = tf.reshape(x, [3, 1])
    y = tf.range(1, 5)
    r = tf.multiply(x, y)
    assert r.shape == (3, 4)
    assert (r.numpy() == np.arange(1, 4)[:, None] * np.arange(1, 5)).all()
    b = tf.broadcast_to(tf.constant([1, 2, 3]), [3, 3])
    assert b.numpy().tolist() == [[1, 2, 3]] * 3
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.constant([1.0, 2.0, 3.0]) + tf.constant([1.0, 2.0])
    n = np.ones((2, 1), np.float32) + tf.constant([1.0, 2.0, 3.0])
    assert isinstance(n, tf.Tensor) and n.shape == (2, 3)


def test_indexing_and_slicing():
    rank_1 = tf.constant([0, 1, 1, 2, 3, 5, 8, 13, 21, 34])
    n = rank_1.numpy()
    assert rank_1[0].numpy() == 0 and rank_1[-1].numpy() == 34
    assert rank_1[:].numpy().tolist() == n.tolist()
    assert rank_1[4:].numpy().tolist() == n[4:].tolist()
    assert rank_1[:-4].numpy().tolist() == n[:-4].tolist()
    assert rank_1[2:-3].numpy().tolist() == n[2:-3].tolist()
    assert rank_1[::2].numpy().tolist() == n[::2].tolist()
    assert rank_1[::-1].numpy().tolist() == n[::-1].tolist()
    assert rank_1[7:2:-2].numpy().tolist() == n[7:2:-2].tolist()
    m = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = tf.constant(m)
    for idx in [(1, 1), (slice(None), 1), (Ellipsis, 0), (1, Ellipsis, slice(None, None, -1)),
                (None, slice(None), 2), (slice(None), tf.newaxis, 1, slice(1, 3)),
                (-1, -2, -3), (slice(None, None, -1), slice(None), slice(3, 0, -2))]:
        np.testing.assert_array_equal(t[idx].numpy(), m[idx])
    assert t[..., tf.newaxis].shape == (2, 3, 4, 1)
    np.testing.assert_array_equal(tf.strided_slice(t, [0, 1, 0], [2, 3, 4], [1, 1, 2]).numpy(),
                                  m[0:2, 1:3, 0:4:2])
    np.testing.assert_array_equal(tf.strided_slice(t, [0, 0, 0], [0, 2, 0], [1, 1, 1], begin_mask=1,
                                                   end_mask=5).numpy(), m[:, 0:2, :])
    np.testing.assert_array_equal(tf.strided_slice(t, [1, 0], [2, 3], shrink_axis_mask=1).numpy(), m[1, 0:3])
    np.testing.assert_array_equal(tf.strided_slice(t, [0, 3], [0, 0], [1, -1], ellipsis_mask=1).numpy(),
                                  m[..., 3:0:-1])
    with pytest.raises((IndexError, tf.errors.InvalidArgumentError)):
        rank_1[10]


def test_shapes_and_reshape():
    x = tf.constant([[1], [2], [3]])
    assert x.shape.as_list() == [3, 1]
    assert tf.shape(x).numpy().tolist() == [3, 1] and tf.shape(x).dtype == tf.int32
    r = tf.reshape(x, [1, 3])
    assert r.shape == (1, 3)
    t = tf.zeros([3, 2, 5])
    assert tf.reshape(t, [-1]).shape == (30,)
    assert tf.reshape(t, [3 * 2, 5]).shape == (6, 5)
    assert tf.reshape(t, [3, -1]).shape == (3, 10)
    assert tf.reshape(t, tf.constant([5, 6])).shape == (5, 6)
    assert tf.reshape(t, tf.shape(t)[:1].numpy().tolist() + [-1]).shape == (3, 10)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.reshape(t, [7, -1])
    assert tf.ones([2, 3]).shape == [2, 3] and tf.ones([2, 3]).shape != [3, 2]
    assert t.shape[:-1] + [7] == [3, 2, 7] and (t.shape[:1] + [7]).as_list() == [3, 7]
    s = tf.zeros([3, 2, 4, 5]).shape
    assert s[0] == 3 and s[-1] == 5 and s.rank == 2 + 2 and s.num_elements() == 120
    assert tf.squeeze(tf.zeros([1, 3, 1])).shape == (3,)
    assert tf.expand_dims(tf.zeros([3]), -1).shape == (3, 1)
    assert tf.transpose(tf.zeros([2, 3, 4]), perm=[2, 0, 1]).shape == (4, 2, 3)


def test_reductions():
    m = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7
    t = tf.constant(m)
    close(tf.reduce_sum(t), m.sum())
    close(tf.reduce_sum(t, axis=[0, 2]), m.sum(axis=(0, 2)))
    close(tf.reduce_mean(t, axis=-1, keepdims=True), m.mean(-1, keepdims=True))
    assert tf.reduce_mean(t, axis=-1, keepdims=True).shape == (2, 3, 1)
    close(tf.reduce_max(t, axis=(1, -1)), m.max(axis=(1, 2)))
    close(tf.reduce_min(t, 1), m.min(1))
    close(tf.reduce_prod(t[:, :, :2] / 10, axis=[1]), (m[:, :, :2] / 10).prod(1))
    close(tf.math.reduce_std(t, axis=0), m.std(0), 1e-4)
    close(tf.math.reduce_variance(t), m.var(), 1e-3)
    close(tf.reduce_logsumexp(t, axis=2), np.log(np.exp(m).sum(2)), 1e-4)
    assert tf.reduce_mean(tf.constant([1, 2])).numpy() == 1  # integer mean stays integer
    assert tf.reduce_any(t > 15).numpy() and not tf.reduce_all(t > -8).numpy() is False
    assert tf.argmax(t, axis=-1).numpy().tolist() == m.argmax(-1).tolist()
    assert tf.math.count_nonzero(tf.constant([0.0, 1.0, 2.0])).numpy() == 2


def test_math_numerics_edge_cases():
    big = tf.constant([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 1000.0]])
    b = big.numpy().astype(np.float64)
    ref = np.exp(b - b.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    close(tf.nn.softmax(big), ref)
    shifted = b - b.max(-1, keepdims=True)
    close(tf.nn.log_softmax(big), shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)), 1e-4)
    assert np.isfinite(tf.nn.log_softmax(big).numpy()).all()
    close(tf.nn.softmax(big, axis=0), np.exp(b - b.max(0)) / np.exp(b - b.max(0)).sum(0))
    x = tf.constant([-100.0, -1.0, 0.0, 1.0, 100.0])
    xn = x.numpy().astype(np.float64)
    close(tf.math.sigmoid(x), 1 / (1 + np.exp(-xn)))
    close(tf.math.softplus(x), np.logaddexp(0, xn), 1e-4)
    close(tf.math.log_sigmoid(x), -np.logaddexp(0, -xn), 1e-4)
    close(tf.math.log1p(tf.constant([1e-7, 1.0])), np.log1p([1e-7, 1.0]))
    close(tf.math.expm1(tf.constant([1e-7, 1.0])), np.expm1([1e-7, 1.0]))
    close(tf.math.divide_no_nan(tf.constant([1.0, 2.0]), tf.constant([0.0, 4.0])), [0.0, 0.5])
    assert tf.math.is_nan(tf.constant([np.nan, 1.0])).numpy().tolist() == [True, False]
    close(tf.math.floormod(tf.constant([-7, 7]), 3), [2, 1])
    close(tf.math.floordiv(tf.constant([-7.0, 7.0]), 2.0), [-4.0, 3.0])
    close(tf.math.squared_difference(tf.constant([1.0, 5.0]), 3.0), [4.0, 4.0])
    close(tf.math.erf(tf.constant([0.5])), [0.5204998778])
    close(tf.math.l2_normalize(tf.constant([3.0, 4.0])), [0.6, 0.8])
    vals, idx = tf.math.top_k(tf.constant([1.0, 5.0, 3.0, 4.0]), k=2)
    assert vals.numpy().tolist() == [5.0, 4.0] and idx.numpy().tolist() == [1, 3]
    close(tf.math.pow(tf.constant(2.0), 10), 1024.0)
    assert (tf.constant([1, 2, 3]) ** 2).numpy().tolist() == [1, 4, 9]


def test_nn_losses():
    rng = np.random.default_rng(1)
    logits = rng.standard_normal((5, 4)).astype(np.float32) * 3
    labels = np.array([0, 3, 1, 2, 3], np.int32)
    lse = np.log(np.exp(logits.astype(np.float64)).sum(-1))
    ref = lse - logits[np.arange(5), labels]
    close(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits), ref, 1e-4)
    onehot = np.eye(4, dtype=np.float32)[labels]
    close(tf.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=logits), ref, 1e-4)
    soft = np.full((5, 4), 0.25, np.float32)
    close(tf.nn.softmax_cross_entropy_with_logits(labels=soft, logits=logits),
          lse - logits.mean(-1), 1e-4)
    z = rng.uniform(size=(5, 4)).astype(np.float32)
    x = logits.astype(np.float64)
    close(tf.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=logits),
          np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x))), 1e-4)
    close(tf.nn.l2_loss(tf.constant(logits)), (logits.astype(np.float64) ** 2).sum() / 2, 1e-4)
    mean, var = tf.nn.moments(tf.constant(logits), axes=[0])
    close(mean, logits.mean(0), 1e-5)
    close(var, logits.var(0), 1e-4)
    y = tf.nn.batch_normalization(tf.constant(logits), mean, var, offset=0.5, scale=2.0,
                                  variance_epsilon=1e-3)
    close(y, (logits - logits.mean(0)) / np.sqrt(logits.var(0) + 1e-3) * 2.0 + 0.5, 1e-4)
    close(tf.nn.relu(tf.constant([-1.0, 2.0])), [0.0, 2.0])
    close(tf.nn.leaky_relu(tf.constant([-1.0, 2.0]), alpha=0.2), [-0.2, 2.0])
    with pytest.raises((tf.errors.InvalidArgumentError, ValueError)):
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels[:3], logits=logits)


# ---- "Introduction to Variables" ----

def test_variable_semantics():
    my_tensor = tf.constant([[1.0, 2.0], [3.0, 4.0]])
    my_variable = tf.Variable(my_tensor)
    bool_variable = tf.Variable([False, False, False, True])
    assert my_variable.shape == (2, 2) and my_variable.dtype == tf.float32
    assert bool_variable.dtype == tf.bool
    assert tf.math.argmax(my_variable).numpy().tolist() == [1, 1]
    assert repr(my_variable).startswith("<tf.Variable 'Variable:0' shape=(2, 2) dtype=float32, numpy=".replace("tf.", "vkfuse."))
    a = tf.Variable([2.0, 3.0])
    r = a.assign([1, 2])
    assert r.numpy().tolist() == [1.0, 2.0]
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        a.assign([1.0, 2.0, 3.0])
    b = tf.Variable(a)
    a.assign([5, 6])
    assert a.numpy().tolist() == [5.0, 6.0] and b.numpy().tolist() == [1.0, 2.0]
    assert a.assign_add([2, 3]).numpy().tolist() == [7.0, 9.0]
    assert a.assign_sub([7, 9]).numpy().tolist() == [0.0, 0.0]
    step = tf.Variable(1, trainable=False)
    assert not step.trainable and step.dtype == tf.int32
    named = tf.Variable(my_tensor, name="Mark")
    assert named.name == "Mark:0"
    assert (a + 1).__class__ is tf.Tensor or not isinstance(a + 1, tf.Variable)
    v = tf.Variable(0.0)
    v.assign(v + 1.5)
    assert float(v) == 1.5
    with pytest.raises((tf.errors.InvalidArgumentError, TypeError, ValueError)):
        tf.Variable(1).assign(2.5)
    # sliced assignment, as TF's v[...].assign
    m = tf.Variable([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    ref = m.numpy().copy()
    m[0, 1].assign(9.0)
    m[:, 2].assign([7.0, 8.0])
    m[1].assign_add(1.0)
    m[::-1, 0].assign_sub([1.0, 2.0])
    ref[0, 1] = 9.0
    ref[:, 2] = [7.0, 8.0]
    ref[1] += 1.0
    ref[::-1, 0] -= [1.0, 2.0]
    np.testing.assert_array_equal(m.numpy(), ref)
    assert m[0].numpy().tolist() == ref[0].tolist()
    with pytest.raises(tf.errors.InvalidArgumentError):
        m[0].assign([1.0, 2.0])
    k = tf.Variable([1, 2, 3])
    k[1:].assign([5, 6])
    assert k.numpy().tolist() == [1, 5, 6]


# ---- "Introduction to gradients and automatic differentiation" ----

def test_gradient_tape_basics():
    x = tf.Variable(3.0)
    with tf.GradientTape() as tape:
        y = x ** 2
    assert tape.gradient(y, x).numpy() == 6.0
    w = tf.Variable(tf.random.normal((3, 2)), name="w")
    b = tf.Variable(tf.zeros(2, dtype=tf.float32), name="b")
    xx = [[1.0, 2.0, 3.0]]
    with tf.GradientTape(persistent=True) as tape:
        y = xx @ w + b
        loss = tf.reduce_mean(y ** 2)
    dl_dw, dl_db = tape.gradient(loss, [w, b])
    assert dl_dw.shape == w.shape
    grads = tape.gradient(loss, {"w": w, "b": b})
    close(grads["b"], dl_db)
    yv = (np.array(xx, np.float32) @ w.numpy() + b.numpy())
    close(dl_db, yv[0], 1e-4)
    close(dl_dw, np.array(xx).T @ yv, 1e-4)
    del tape


def test_tape_watch_and_trainable():
    x0 = tf.Variable(3.0, name="x0")
    x1 = tf.Variable(3.0, name="x1", trainable=False)
    x2 = tf.Variable(2.0, name="x2") + 1.0
    with tf.GradientTape() as tape:
        y = (x0 ** 2) + (x1 ** 2) + (x2 ** 2)
    grad = tape.gradient(y, [x0, x1, x2])
    assert grad[0].numpy() == 6.0
    assert grad[1] is None  # TF: a non-trainable variable is not watched
    x = tf.constant(3.0)
    with tf.GradientTape() as g:
        g.watch(x)
        y = x * x
    assert g.gradient(y, x).numpy() == 6.0
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch(x1)
        y = x0 ** 2 + x1 ** 3
    gx0, gx1 = tape.gradient(y, [x0, x1])
    assert gx0 is None and gx1.numpy() == 27.0
    with tf.GradientTape() as tape:
        y = x0 * x1
    g0, g1 = tape.gradient(y, [x0, x1], unconnected_gradients=tf.UnconnectedGradients.ZERO)
    assert g0.numpy() == 3.0 and g1.numpy() == 0.0 and g1.dtype == tf.float32
    xi = tf.constant([1, 2])
    with tf.GradientTape() as tape:
        tape.watch(xi)
        yi = xi * 2
    assert tape.gradient(yi, xi, unconnected_gradients="zero").numpy().tolist() == [0, 0]
    with tf.GradientTape() as tape:
        y = x0 * 2
    with pytest.raises(RuntimeError):
        tape.gradient(y, x0)
        tape.gradient(y, x0)


def test_gradient_of_list_target_and_stop():
    x = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        y0 = x ** 2
        y1 = 1 / x
    assert tape.gradient({"y0": y0, "y1": y1}, x).numpy() == pytest.approx(4 - 0.25)
    x = tf.Variable(2.0)
    with tf.GradientTape() as tape:
        y = x * [3.0, 4.0]
    assert tape.gradient(y, x).numpy() == 7.0
    xs = tf.linspace(-10.0, 10.0, 201)
    with tf.GradientTape() as tape:
        tape.watch(xs)
        ys = tf.nn.sigmoid(xs)
    dys = tape.gradient(ys, xs)
    s = 1 / (1 + np.exp(-xs.numpy().astype(np.float64)))
    close(dys, s * (1 - s), 1e-5)
    x = tf.Variable(2.0)
    y = tf.Variable(3.0)
    with tf.GradientTape() as t:
        x_sq = x * x
        with t.stop_recording():
            y_sq = y * y
        z = x_sq + y_sq
    g = t.gradient(z, {"x": x, "y": y})
    assert g["x"].numpy() == 4.0
    with tf.GradientTape() as t:
        z = x * tf.stop_gradient(y)
    assert t.gradient(z, x).numpy() == 3.0


def test_higher_order_and_jacobian():
    x = tf.Variable(1.0)
    with tf.GradientTape() as t2:
        with tf.GradientTape() as t1:
            y = x * x * x
        dy_dx = t1.gradient(y, x)
    d2y_dx2 = t2.gradient(dy_dx, x)
    assert dy_dx.numpy() == 3.0 and d2y_dx2.numpy() == 6.0
    x = tf.linspace(-2.0, 2.0, 5)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = tf.nn.sigmoid(x)
    j = tape.jacobian(y, x)
    s = tf.nn.sigmoid(x).numpy()
    close(j, np.diag(s * (1 - s)))
    w = tf.Variable(tf.random.normal([3, 2]))
    xb = tf.random.normal([4, 3])
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(xb)
        yb = tf.matmul(xb, w)
    bj = tape.batch_jacobian(yb, xb)
    assert bj.shape == (4, 2, 3)
    close(bj, np.broadcast_to(w.numpy().T, (4, 2, 3)), 1e-5)
    jw = tape.jacobian(yb, w)
    assert jw.shape == (4, 2, 3, 2)
    close(jw[1, 0, :, 0], xb.numpy()[1], 1e-6)
    close(jw[1, 0, :, 1], np.zeros(3))
    v = tf.Variable([1.0, 2.0])
    with tf.GradientTape() as once:  # non-persistent: one jacobian, then spent
        z = v ** 2
    close(once.jacobian(z, v), np.diag([2.0, 4.0]))
    with pytest.raises(RuntimeError):
        once.gradient(z, v)


def test_gradient_through_control_flow_and_integers():
    x = tf.constant(1.0)
    v0 = tf.Variable(2.0)
    v1 = tf.Variable(2.0)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        if x > 0.0:
            result = v0
        else:
            result = v1 ** 2
    assert tape.gradient(result, v0).numpy() == 1.0
    xi = tf.Variable(2)
    with tf.GradientTape() as g:
        yi = xi * xi
    assert g.gradient(yi, xi) is None  # TF: integer sources get no gradient


def test_unconnected_sources_get_none():
    x0 = tf.Variable(3.0)
    x2 = tf.Variable(2.0) + 1.0  # made before the tape: not watched
    x3 = tf.constant(3.0)
    with tf.GradientTape(persistent=True) as tape:
        y = x0 ** 2
        with tape.stop_recording():
            z = x0 * 2.0
    g = tape.gradient(y, [x0, x2, x3])
    assert g[0].numpy() == 6.0 and g[1] is None and g[2] is None
    assert tape.gradient(z, x0) is None
    v1 = tf.Variable(2.0)
    assert tape.gradient(y, v1) is None


def test_small_composites():
    close(tf.math.xlogy(tf.constant([0.0, 2.0]), tf.constant([0.0, 3.0])), [0.0, 2 * np.log(3.0)])
    close(tf.math.multiply_no_nan(tf.constant([np.inf, 2.0]), tf.constant([0.0, 3.0])), [0.0, 6.0])
    close(tf.math.scalar_mul(2.0, tf.constant([1.0, 2.0])), [2.0, 4.0])
    close(tf.math.softmax(tf.constant([1.0, 1.0])), [0.5, 0.5])
    close(tf.math.log_softmax(tf.constant([1.0, 1.0])), np.log([0.5, 0.5]))
    close(tf.nn.softsign(tf.constant([-3.0, 1.0])), [-0.75, 0.5])
    close(tf.nn.compute_average_loss(tf.constant([1.0, 3.0])), 2.0)
    close(tf.nn.compute_average_loss(tf.constant([1.0, 3.0]), global_batch_size=4), 1.0)
    assert tf.nn.top_k(tf.constant([1.0, 3.0, 2.0]), 2).indices.numpy().tolist() == [1, 2]
    assert tf.sequence_mask([1, 3], 4).numpy().tolist() == [[True, False, False, False], [True, True, True, False]]
    assert tf.sequence_mask(tf.constant([2, 0]), dtype=tf.float32).numpy().tolist() == [[1.0, 1.0], [0.0, 0.0]]
    ds = tf.data.Dataset.from_tensor_slices([1.0, 2.0]).map(lambda v: v * 2)  # a list is one tensor, as TF
    assert [float(v) for v in ds] == [2.0, 4.0]
    pairs = list(tf.data.Dataset.from_tensor_slices(([1, 2], [[1.0], [2.0]])))
    assert int(pairs[1][0]) == 2 and pairs[1][1].shape == (1,)


# ---- odds and ends TF programs use ----

def test_misc_array_ops():
    t = tf.constant([[1, 2, 3], [4, 5, 6]])
    assert tf.concat([t, t], axis=-1).shape == (2, 6)
    assert tf.stack([t, t], axis=1).shape == (2, 2, 3)
    parts = tf.split(tf.range(12), 3)
    assert [p.numpy().tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    a, b = tf.split(tf.zeros([4, 6]), [2, 4], axis=1)
    assert a.shape == (4, 2) and b.shape == (4, 4)
    assert tf.gather(t, [1, 0]).numpy().tolist() == [[4, 5, 6], [1, 2, 3]]
    assert tf.gather(t, [2, 0], axis=1).numpy().tolist() == [[3, 1], [6, 4]]
    assert tf.one_hot([0, 2], depth=3).numpy().tolist() == [[1, 0, 0], [0, 0, 1]]
    assert tf.one_hot([0, 2], depth=3).dtype == tf.float32
    assert tf.where(t > 3, t, -t).numpy().tolist() == [[-1, -2, -3], [4, 5, 6]]
    assert tf.where(t > 4).numpy().tolist() == [[1, 1], [1, 2]]
    assert tf.boolean_mask(t, [True, False]).numpy().tolist() == [[1, 2, 3]]
    assert tf.tile(tf.constant([1, 2]), [2]).numpy().tolist() == [1, 2, 1, 2]
    assert tf.pad(t, [[1, 0], [0, 1]]).shape == (3, 4)
    assert tf.reverse(t, [1]).numpy().tolist() == [[3, 2, 1], [6, 5, 4]]
    assert tf.zeros_like(t).dtype == tf.int32 and tf.ones_like(t, dtype=tf.float32).dtype == tf.float32
    assert tf.fill([2], 7).numpy().tolist() == [7, 7]
    assert tf.range(0, 1, 0.25).numpy().tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tf.range(5, delta=2).numpy().tolist() == [0, 2, 4]
    assert tf.math.cumsum(tf.constant([1, 2, 3]), exclusive=True).numpy().tolist() == [0, 1, 3]
    assert tf.math.cumsum(tf.constant([1, 2, 3]), reverse=True).numpy().tolist() == [6, 5, 3]
    u = tf.unstack(t, axis=1)
    assert len(u) == 3 and u[0].numpy().tolist() == [1, 4]
    assert tf.add_n([t, t, t]).numpy().tolist() == (3 * t.numpy()).tolist()
    close(tf.clip_by_norm(tf.constant([3.0, 4.0]), 1.0), [0.6, 0.8])
    clipped, gn = tf.clip_by_global_norm([tf.constant([3.0]), tf.constant([4.0])], 1.0)
    assert float(gn) == pytest.approx(5.0) and float(clipped[1]) == pytest.approx(0.8)
    assert tf.math.reduce_sum(tf.constant([True, True, False]) & tf.constant([True, False, False])).numpy() == 1 \
        if False else tf.reduce_sum(tf.cast(tf.logical_and([True, True], [True, False]), tf.int32)).numpy() == 1
    assert [int(v) for v in tf.constant([3, 4])] == [3, 4]
    assert tf.math.maximum(tf.constant([1, 5]), 3).numpy().tolist() == [3, 5]


def test_dataset_training_loop():
    xs = np.arange(20, dtype=np.float32).reshape(10, 2)
    ys = xs.sum(1)
    ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(4)
    batches = list(ds)
    assert len(batches) == 3 and batches[-1][0].shape == (2, 2)
    w = tf.Variable(tf.zeros([2]))
    opt = tf.keras.optimizers.SGD(0.001)
    for x, y in ds.repeat(3):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((tf.reduce_sum(x * w, axis=1) - y) ** 2)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
    assert float(loss) < float(tf.reduce_mean(ys[8:] ** 2))
