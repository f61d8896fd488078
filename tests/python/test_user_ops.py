"""vkfuse.elementwise: a GLSL expression plus a NumPy function, with a gradient."""
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
