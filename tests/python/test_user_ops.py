"""vkfuse.elementwise: a GLSL expression plus a NumPy function, with a gradient."""
import gc

import numpy as np
import pytest

import vkfuse as tf


def test_elementwise_values_and_gradient():
    op = tf.elementwise(expr="x0 * x0 + x1", fn=lambda a, b: a * a + b, name="py_sqplus",
                        grad=[("2.0 * x0", lambda a, b, y: 2 * a), ("1.0", lambda a, b, y: np.ones_like(a))])
    a = np.array([[1.0, -2.0, 3.0]], np.float32)
    b = np.array([[0.5], [1.5]], np.float32)
    x, z = tf.constant(a), tf.constant(b)
    with tf.GradientTape() as tape:
        tape.watch([x, z])
        y = op(x, z) * 3
    np.testing.assert_allclose(y.numpy(), 3 * (a * a + b), rtol=1e-6)
    gx, gz = tape.gradient(y, [x, z])
    np.testing.assert_allclose(gx.numpy(), [6 * a[0] * 2], rtol=1e-6)
    np.testing.assert_allclose(gz.numpy(), [[9.0], [9.0]], rtol=1e-6)
    np.testing.assert_allclose(op(x, 1.0).numpy(), a * a + 1, rtol=1e-6)


def test_elementwise_errors():
    with pytest.raises(tf.errors.InternalError, match="does not compile"):
        tf.elementwise(expr="x0 +* 2", fn=lambda a: a, name="py_bad_expr")
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.elementwise(expr="x0; x0", fn=lambda a: a, name="py_bad_token")
    op = tf.elementwise(expr="x0 * 2.0", fn=lambda a: a / 0 if False else 1 // 0, name="py_raises")
    x = tf.constant([1.0, 2.0])
    if tf.context().backend == "cpu":
        with pytest.raises(ZeroDivisionError):
            op(x)
    else:
        np.testing.assert_array_equal(op(x).numpy(), [2.0, 4.0])  # the GLSL expression ran
    with pytest.raises(TypeError):
        op(x, x)
    np.testing.assert_array_equal((x + 1).numpy(), [2.0, 3.0])


AFFINE = """
layout(local_size_x_id = 0) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { float scale; float shift; uint nx; uint ny; };
void main() { uint i = gl_GlobalInvocationID.x; if (i < ny) y[i] = x[i] * scale + shift; }
"""


def test_kernel_glsl_and_numpy():
    k = tf.kernel(glsl=AFFINE, inputs=[tf.float32], outputs=[tf.float32], params="ff", name="py_affine",
                  output_shapes=lambda s, a, b: s, cpu=lambda x, a, b: x * a + b)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(k(x, params=(2.0, 0.5)).numpy(), x * 2 + 0.5)
    fixed = tf.kernel(glsl=AFFINE, inputs=[tf.float32], outputs=[(tf.float32, [4])], params="ff",
                      name="py_affine4", cpu=lambda x, a, b: x[:4] * a + b)
    np.testing.assert_allclose(fixed(np.ones(4, np.float32), params=(3.0, 1.0)).numpy(), [4, 4, 4, 4])


def test_kernel_errors():
    with pytest.raises(tf.errors.InternalError):
        tf.kernel(glsl="void main() { oops }", inputs=[tf.float32], outputs=[(tf.float32, [1])], name="py_broken")
    k = tf.kernel(glsl=AFFINE, inputs=[tf.float32], outputs=[tf.float32], params="ff", name="py_affine_err",
                  output_shapes=lambda s, a, b: s if a > 0 else 1 // 0, cpu=lambda x, a, b: x * a + b)
    with pytest.raises(ZeroDivisionError):
        k(tf.ones([2]), params=(-1.0, 0.0))
    with pytest.raises(tf.errors.InvalidArgumentError):
        k(tf.ones([2], dtype=tf.int32), params=(1.0, 0.0))
    np.testing.assert_allclose(k(tf.ones([2]), params=(1.0, 1.0)).numpy(), [2, 2])


# y0 = a * x0 * x1, y1 = x0 + x1 (two inputs, two outputs, a parameter)
MULADD = """
layout(local_size_x_id = 0) in;
layout(binding = 0) readonly buffer X0 { float x0[]; };
layout(binding = 1) readonly buffer X1 { float x1[]; };
layout(binding = 2) writeonly buffer Y0 { float y0[]; };
layout(binding = 3) writeonly buffer Y1 { float y1[]; };
layout(push_constant) uniform P { float a; uint n_x0; uint n_x1; uint n_y0; uint n_y1; };
void main() { uint i = gl_GlobalInvocationID.x;
    if (i < n_y0) { y0[i] = a * x0[i] * x1[i]; y1[i] = x0[i] + x1[i]; } }
"""


def muladd_grad(xs, ys, gs, a):
    x0, x1 = xs
    g0, g1 = gs  # None where no gradient reaches an output
    d0 = (g0 * x1 * a if g0 is not None else 0.0) + (g1 if g1 is not None else 0.0)
    d1 = (g0 * x0 * a if g0 is not None else None)
    if g1 is not None:
        d1 = g1 if d1 is None else d1 + g1
    return [d0, d1]


def muladd(grad=muladd_grad):
    return tf.kernel(glsl=MULADD, inputs=[tf.float32, tf.float32], outputs=[tf.float32, tf.float32],
                     params="f", name="py_muladd", output_shapes=lambda s0, s1, a: [s0, s0],
                     cpu=lambda x0, x1, a: [a * x0 * x1, x0 + x1], grad=grad)


def test_kernel_gradient_eager_and_traced():
    k = muladd()
    A, B = rng_vals(5, 1), rng_vals(5, 2)
    x0, x1 = tf.Variable(A), tf.Variable(B)
    with tf.GradientTape(persistent=True) as tape:
        y0, y1 = k(x0, x1, params=(3.0,))
        loss = tf.reduce_sum(y0 * y0) + tf.reduce_sum(y1)
        only0 = tf.reduce_sum(y0)
    g0, g1 = tape.gradient(loss, [x0, x1])
    y = 3 * A * B
    np.testing.assert_allclose(g0.numpy(), 2 * y * 3 * B + 1, rtol=1e-5)
    np.testing.assert_allclose(g1.numpy(), 2 * y * 3 * A + 1, rtol=1e-5)
    np.testing.assert_allclose(tape.gradient(only0, x1).numpy(), 3 * A, rtol=1e-5)  # y1 gets no gradient
    del tape

    @tf.function
    def step(a, b):
        with tf.GradientTape() as t:
            t.watch([a, b])
            p, q = k(a, b, params=(0.5,))
            s = tf.reduce_sum(p * q)
        return t.gradient(s, [a, b])

    for _ in range(2):
        ga, gb = step(tf.constant(A), tf.constant(B))
        p, q = 0.5 * A * B, A + B
        np.testing.assert_allclose(ga.numpy(), 0.5 * B * q + p, rtol=1e-5)
        np.testing.assert_allclose(gb.numpy(), 0.5 * A * q + p, rtol=1e-5)
    assert step.experimental_get_tracing_count() == 1


def rng_vals(n, seed):
    return np.random.default_rng(seed).uniform(0.5, 2.0, n).astype(np.float32)


def test_kernel_gradient_errors_and_memory():
    x = tf.Variable(rng_vals(4, 3))
    plain = tf.kernel(glsl=AFFINE, inputs=[tf.float32], outputs=[tf.float32], params="ff", name="py_nograd",
                      output_shapes=lambda s, a, b: s, cpu=lambda x, a, b: a * x + b)
    with tf.GradientTape() as tape:
        y = tf.reduce_sum(plain(x, params=(2.0, 1.0)))
    with pytest.raises(tf.errors.InvalidArgumentError, match="py_nograd"):
        tape.gradient(y, x)

    def bad(xs, ys, gs, a):
        raise KeyError("from the user's grad")
    with tf.GradientTape() as tape:
        y0, _ = muladd(bad)(x, x, params=(1.0,))
        y = tf.reduce_sum(y0)
    with pytest.raises(KeyError, match="from the user's grad"):
        tape.gradient(y, x)
    with tf.GradientTape() as tape:
        y0, _ = muladd(lambda xs, ys, gs, a: [gs[0]])(x, x, params=(1.0,))
        y = tf.reduce_sum(y0)
    with pytest.raises(ValueError, match="1 gradients for 2 inputs"):
        tape.gradient(y, x)
    # the context stays usable, and repeated gradients hold no memory
    k = muladd()
    before = None
    for i in range(60):
        with tf.GradientTape() as tape:
            y0, y1 = k(x, x * 2.0, params=(1.0,))
            y = tf.reduce_sum(y0 + y1)
        g = tape.gradient(y, x)
        np.testing.assert_allclose(g.numpy(), 4 * x.numpy() + 3, rtol=1e-5)
        del tape, y0, y1, y, g
        if i == 9:
            gc.collect()
            tf.context().sync()
            before = tf.context().stats()["device_bytes_in_use"]
    gc.collect()
    tf.context().sync()
    assert tf.context().stats()["device_bytes_in_use"] <= before
