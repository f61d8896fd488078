"""TF2 programs in the style of TF's guides "Basic training loops",
"Custom training: walkthrough" and "Introduction to modules" (tf.Module
layers, Keras optimizers, losses and metrics, traced train steps,
saved_model and checkpoints), run with ``import vkfuse as tf``: the
trained values against NumPy's, trace counts against TF's."""
import numpy as np
import pytest

import vkfuse as tf
from tf2util import close


# ---- "Basic training loops" / "Custom training: walkthrough" ----

class MyModel(tf.Module):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.w = tf.Variable(5.0)
        self.b = tf.Variable(0.0)

    def __call__(self, x):
        return self.w * x + self.b


def test_basic_training_loop_linear():
    TRUE_W, TRUE_B, NUM = 3.0, 2.0, 201
    x = tf.linspace(-2.0, 2.0, NUM)
    x = tf.cast(x, tf.float32)
    noise = np.random.default_rng(0).standard_normal(NUM).astype(np.float32)
    y = x * TRUE_W + TRUE_B + noise

    def loss(target_y, predicted_y):
        return tf.reduce_mean(tf.square(target_y - predicted_y))

    model = MyModel()
    assert len(model.variables) == 2

    def train(model, x, y, learning_rate):
        with tf.GradientTape() as t:
            current_loss = loss(y, model(x))
        dw, db = t.gradient(current_loss, [model.w, model.b])
        model.w.assign_sub(learning_rate * dw)
        model.b.assign_sub(learning_rate * db)

    w, b = 5.0, 0.0
    xn, yn = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    for _ in range(10):
        train(model, x, y, learning_rate=0.1)
        r = w * xn + b - yn
        w, b = w - 0.1 * 2 * np.mean(r * xn), b - 0.1 * 2 * np.mean(r)
    assert model.w.numpy() == pytest.approx(w, rel=1e-4)
    assert model.b.numpy() == pytest.approx(b, rel=1e-4, abs=1e-5)


def test_custom_layers_and_keras_optimizer():
    class Dense(tf.Module):
        def __init__(self, in_features, out_features, name=None):
            super().__init__(name=name)
            self.w = tf.Variable(tf.random.normal([in_features, out_features]), name="w")
            self.b = tf.Variable(tf.zeros([out_features]), name="b")

        def __call__(self, x):
            return tf.nn.relu(tf.matmul(x, self.w) + self.b)

    class Sequential(tf.Module):
        def __init__(self, name=None):
            super().__init__(name=name)
            self.dense_1 = Dense(in_features=3, out_features=3)
            self.dense_2 = Dense(in_features=3, out_features=2)

        def __call__(self, x):
            return self.dense_2(self.dense_1(x))

    tf.random.set_seed(1)
    m = Sequential(name="the_model")
    assert m.name == "the_model" and m.name_scope.name == "the_model/"
    with tf.name_scope("block") as scope:
        assert scope == "block/"
    assert len(m.trainable_variables) == 4 and len(m.submodules) == 2
    x = tf.constant([[2.0, 2.0, 2.0]])
    d1 = m.dense_1
    ref = np.maximum(np.maximum(x.numpy() @ d1.w.numpy() + d1.b.numpy(), 0) @ m.dense_2.w.numpy()
                     + m.dense_2.b.numpy(), 0)
    close(m(x), ref, 1e-5)
    opt = tf.keras.optimizers.SGD(learning_rate=0.1)
    w0 = [v.numpy().copy() for v in m.trainable_variables]
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(m(x) ** 2)
    grads = tape.gradient(loss, m.trainable_variables)
    opt.apply_gradients(zip(grads, m.trainable_variables))
    for v, v0, g in zip(m.trainable_variables, w0, grads):
        close(v, v0 - 0.1 * g.numpy(), 1e-5)
    assert int(opt.iterations) == 1


def test_custom_training_walkthrough_mlp_adam():
    rng = np.random.default_rng(3)
    n = 120
    features = rng.standard_normal((n, 4)).astype(np.float32)
    labels = (features[:, 0] + 0.5 * features[:, 1] > 0).astype(np.int32) + \
        (features[:, 2] > 1).astype(np.int32)
    tf.random.set_seed(2)
    w1 = tf.Variable(tf.random.normal([4, 10], stddev=0.3))
    b1 = tf.Variable(tf.zeros([10]))
    w2 = tf.Variable(tf.random.normal([10, 3], stddev=0.3))
    b2 = tf.Variable(tf.zeros([3]))
    params = [w1, b1, w2, b2]

    def model(x):
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2

    def loss_fn(x, y):
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=model(x)))

    opt = tf.keras.optimizers.Adam(learning_rate=0.05)
    # Adam's first step against NumPy: each weight moves by about lr * sign(g)
    p0 = [p.numpy().copy() for p in params]
    with tf.GradientTape() as tape:
        l0 = loss_fn(features, labels)
    g0 = tape.gradient(l0, params)
    opt.apply_gradients(zip(g0, params))
    for p, a, g in zip(params, p0, g0):
        gn = g.numpy()
        m, v = 0.1 * gn, 0.001 * gn * gn
        step = 0.05 * (m / 0.1) / (np.sqrt(v / 0.001) + 1e-7)
        close(p, a - step, 1e-4)
    for _ in range(60):
        with tf.GradientTape() as tape:
            loss = loss_fn(features, labels)
        opt.apply_gradients(zip(tape.gradient(loss, params), params))
    assert float(loss) < 0.5 * float(l0)
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(model(features), axis=1, output_type=tf.int32),
                                          labels), tf.float32))
    assert float(acc) > 0.85


def test_keras_losses_and_metrics_walkthrough():
    # "Custom training: walkthrough": a loss object, Mean and accuracy metrics per epoch
    rng = np.random.default_rng(5)
    x = rng.standard_normal((30, 4)).astype(np.float32)
    y = rng.integers(0, 3, 30).astype(np.int32)
    logits = rng.standard_normal((30, 3)).astype(np.float32) * 2
    lg = logits.astype(np.float64)
    lse = np.log(np.exp(lg).sum(1))
    ce = lse - lg[np.arange(30), y]
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    close(loss_object(y_true=y, y_pred=logits), ce.mean(), 1e-5)
    probs = np.exp(lg - lse[:, None])
    close(tf.keras.losses.SparseCategoricalCrossentropy()(y, probs.astype(np.float32)), ce.mean(), 1e-5)
    w = rng.uniform(size=30).astype(np.float32)
    close(loss_object(y, logits, sample_weight=w), (ce * w).mean(), 1e-5)
    onehot = np.eye(3, dtype=np.float32)[y]
    close(tf.keras.losses.CategoricalCrossentropy(from_logits=True)(onehot, logits), ce.mean(), 1e-5)
    close(tf.keras.losses.MeanSquaredError()(x, x * 2), (x ** 2).mean(), 1e-5)
    z = (rng.uniform(size=(30, 3)) > 0.5).astype(np.float32)
    bce = np.maximum(lg, 0) - lg * z + np.log1p(np.exp(-np.abs(lg)))
    close(tf.keras.losses.BinaryCrossentropy(from_logits=True)(z, logits), bce.mean(), 1e-5)
    close(tf.keras.losses.binary_crossentropy(z, 1 / (1 + np.exp(-logits))), bce.mean(1), 1e-4)
    epoch_loss = tf.keras.metrics.Mean()
    epoch_acc = tf.keras.metrics.SparseCategoricalAccuracy()
    for i in range(0, 30, 10):
        epoch_loss.update_state(loss_object(y[i:i + 10], logits[i:i + 10]))
        epoch_acc.update_state(y[i:i + 10], logits[i:i + 10])
    close(epoch_loss.result(), np.mean([ce[i:i + 10].mean() for i in range(0, 30, 10)]), 1e-5)
    close(epoch_acc.result(), (logits.argmax(1) == y).mean(), 1e-6)
    epoch_acc.reset_state()
    assert float(epoch_acc.result()) == 0.0
    m = tf.keras.metrics.Mean()

    @tf.function
    def track(v):  # metrics keep variables, so they update in a traced step too
        m.update_state(v)

    track(tf.constant([1.0, 2.0]))
    track(tf.constant([6.0, 7.0]))
    assert float(m.result()) == 4.0
    acc2 = tf.keras.metrics.CategoricalAccuracy()
    close(acc2(onehot, logits), (logits.argmax(1) == y).mean(), 1e-6)


def test_traced_train_step_matches_eager():
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((64, 3)).astype(np.float32)
    ys = (xs @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)
    w = tf.Variable(tf.zeros([3, 1]))
    b = tf.Variable(tf.zeros([1]))

    @tf.function
    def train_step(x, y, lr):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(lr * dw)
        b.assign_sub(lr * db)
        return loss

    wn, bn = np.zeros((3, 1)), np.zeros(1)
    for _ in range(20):
        train_step(tf.constant(xs), tf.constant(ys), tf.constant(0.1))
        r = xs @ wn + bn - ys
        wn, bn = wn - 0.1 * 2 * xs.T @ r / 64, bn - 0.1 * 2 * r.mean(0)
    close(w, wn, 1e-4)
    close(b, bn, 1e-4)
    assert train_step.experimental_get_tracing_count() == 1


def test_traced_train_step_with_stateful_optimizers():
    # the guides' @tf.function train_step with a Keras optimizer: its slots and
    # step count are made on the first trace and updated at every call
    x = tf.constant([[1.0, 2.0], [0.5, -1.0]])

    def train(make_opt, traced):
        w = tf.Variable([[1.0], [2.0]])
        opt = make_opt()

        def step():
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.matmul(x, w) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
            return loss

        if traced:
            step = tf.function(step)
        for _ in range(4):
            step()
        return w.numpy(), int(opt.iterations), step

    for make_opt in (lambda: tf.keras.optimizers.Adam(0.1), lambda: tf.keras.optimizers.SGD(0.01, momentum=0.9),
                     lambda: tf.keras.optimizers.RMSprop(0.01)):
        eager_w, eager_n, _ = train(make_opt, False)
        traced_w, traced_n, fn = train(make_opt, True)
        close(traced_w, eager_w, 1e-5)
        assert eager_n == traced_n == 4 and fn.experimental_get_tracing_count() == 1

    class Lazy(tf.Module):  # two variables made on the first call, TF's 'if None' way
        def __init__(self):
            super().__init__()
            self.a = self.b = None

        @tf.function
        def __call__(self, x):
            if self.a is None:
                self.a = tf.Variable(np.float32(2.0))
            if self.b is None:
                self.b = tf.Variable(np.float32(10.0))
            self.a.assign_add(1.0)
            return x * self.a + self.b

    m = Lazy()
    assert float(m(tf.constant(1.0))) == 13.0 and float(m(tf.constant(1.0))) == 14.0
    assert float(m.a) == 4.0 and float(m.b) == 10.0


def test_walkthrough_traced_with_dataset_metrics_and_adam():
    # the walkthrough's loop with its train_step traced: batches of 32 and a last
    # one of 24 trace twice (as TF without an input_signature)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((120, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int32) + (x[:, 1] > 0.5).astype(np.int32)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(120, seed=1).batch(32)

    class Dense(tf.Module):
        def __init__(self, i, o, act=None):
            super().__init__()
            self.w = tf.Variable(tf.random.normal([i, o], stddev=0.5, seed=1))
            self.b = tf.Variable(tf.zeros([o]))
            self.act = act

        def __call__(self, v):
            z = v @ self.w + self.b
            return self.act(z) if self.act else z

    class Net(tf.Module):
        def __init__(self):
            super().__init__()
            self.l1 = Dense(4, 16, tf.nn.relu)
            self.l2 = Dense(16, 3)

        def __call__(self, v):
            return self.l2(self.l1(v))

    model = Net()
    opt = tf.keras.optimizers.Adam(0.05)
    loss_obj = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    train_loss = tf.keras.metrics.Mean()
    train_acc = tf.keras.metrics.SparseCategoricalAccuracy()

    @tf.function
    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            logits = model(xb)
            loss = loss_obj(yb, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        train_loss.update_state(loss)
        train_acc.update_state(yb, logits)
        return loss

    history = []
    for _ in range(12):
        train_loss.reset_state()
        train_acc.reset_state()
        for xb, yb in ds:
            train_step(xb, yb)
        history.append((float(train_loss.result()), float(train_acc.result())))
    assert history[-1][0] < 0.3 * history[0][0] and history[-1][1] > 0.9
    assert train_step.experimental_get_tracing_count() == 2 and int(opt.iterations) == 48
    logits = model(x).numpy()
    assert abs((logits.argmax(1) == y).mean() - history[-1][1]) < 0.1


# ---- saving ----

def test_save_and_load(tmp_path):
    class Adder(tf.Module):
        def __init__(self):
            super().__init__()
            self.k = tf.Variable(3.0)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def __call__(self, x):
            return x * self.k + 1.0

    m = Adder()
    close(m(tf.constant([1.0, 2.0])), [4.0, 7.0])
    path = str(tmp_path / "adder")
    tf.saved_model.save(m, path)
    loaded = tf.saved_model.load(path)
    close(loaded(tf.constant([1.0, 2.0, 3.0])), [4.0, 7.0, 10.0])


def test_checkpoints_of_modules_and_optimizers(tmp_path):
    # "Introduction to modules": Checkpoint(model=...).write / restore into a new model
    class Dense(tf.Module):
        def __init__(self, i, o):
            super().__init__()
            self.w = tf.Variable(tf.random.normal([i, o]))
            self.b = tf.Variable(tf.zeros([o]))

        def __call__(self, x):
            return tf.nn.relu(x @ self.w + self.b)

    class Seq(tf.Module):
        def __init__(self):
            super().__init__()
            self.dense_1 = Dense(3, 3)
            self.layers = [Dense(3, 2)]

        def __call__(self, x):
            return self.layers[0](self.dense_1(x))

    x = tf.constant([[2.0, 2.0, 2.0]])
    model, opt = Seq(), tf.keras.optimizers.Adam(0.1)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(x) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    ckpt = tf.train.Checkpoint(model=model, optimizer=opt)
    prefix = ckpt.write(str(tmp_path / "my_checkpoint"))
    names = dict(tf.train.list_variables(prefix))
    assert names["model/dense_1/w"] == [3, 3] and names["model/layers/0/b"] == [2]
    assert "optimizer/iterations" in names and "optimizer/slots/model/dense_1/w/m" in names
    fresh, fresh_opt = Seq(), tf.keras.optimizers.Adam(0.1)
    status = tf.train.Checkpoint(model=fresh, optimizer=fresh_opt).restore(prefix)
    status.assert_consumed()
    close(fresh(x), model(x))
    assert int(fresh_opt.iterations) == 1
    close(fresh_opt._slot(fresh.dense_1.w, "v"), opt._slot(model.dense_1.w, "v"))
    # numbered saves and the latest one, as TF's CheckpointManager
    step = tf.Variable(1)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(step=step, net=model), str(tmp_path / "ckpts"),
                                         max_to_keep=2)
    for _ in range(3):
        step.assign_add(1)
        manager.save()
    assert manager.latest_checkpoint.endswith("ckpt-3") and len(manager.checkpoints) == 2
    assert tf.train.latest_checkpoint(str(tmp_path / "ckpts")) == manager.latest_checkpoint
    step.assign(0)
    tf.train.Checkpoint(step=step, net=model).restore(manager.latest_checkpoint)
    assert int(step) == 4
    with pytest.raises(AssertionError):  # another structure: nothing matches
        tf.train.Checkpoint(model=Dense(2, 2)).restore(prefix).assert_consumed()
    wrong = Seq()
    wrong.dense_1 = Dense(2, 3)
    with pytest.raises(tf.errors.InvalidArgumentError):  # same path, other shape
        tf.train.Checkpoint(model=wrong).restore(prefix)
    with pytest.raises(tf.errors.NotFoundError):
        tf.train.Checkpoint(model=model).restore(str(tmp_path / "nothing"))
