"""Errors are exceptions (never crashes), tensors go when Python drops them, memory stays flat."""
import ctypes
import gc
import threading
import time

import numpy as np
import pytest

import vkfuse as tf
from vkfuse import _lib


def test_errors_are_tf_named_and_context_stays_usable():
    x = tf.constant([1.0, 2.0, 3.0])
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        tf.matmul(x, tf.constant([[1, 2]]))
    assert "matmul" in str(e.value) and e.value.status == "VF_ERROR_DTYPE"
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        tf.add(x, tf.ones([2]))
    assert e.value.status == "VF_ERROR_SHAPE"
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.reshape(x, [2, 2])
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.concat([x, tf.ones([2, 2])], 0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.split(x, 2)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.range(0, 5, 0)
    with pytest.raises(tf.errors.InvalidArgumentError):
        tf.nn.dropout(x, rate=1.5)
    with pytest.raises(tf.errors.OpError):
        tf.exp(tf.constant([1, 2]))
    with pytest.raises(TypeError):
        tf.constant("text")
    with pytest.raises(TypeError):
        tf.constant([1, 2], dtype=tf.int32) * 0.5
    with pytest.raises(TypeError):
        tf.cast(x, "complex64")
    np.testing.assert_array_equal((x + 1).numpy(), [2, 3, 4])  # still usable


def test_other_context_and_closed_context():
    ctx = tf.Context(backend="cpu")
    with ctx:
        a = tf.constant([1.0, 2.0])
        assert a.context is ctx
    b = tf.constant([1.0, 2.0])
    if b.context is not ctx:
        with pytest.raises(tf.errors.InvalidArgumentError, match="different contexts"):
            a + b
        np.testing.assert_array_equal(tf.copy_to(a, b.context).numpy(), [1, 2])
    v = tf.Variable(a)
    ctx.close()
    assert ctx.closed
    for f in (lambda: a.numpy(), lambda: a + 1, lambda: tf.exp(a), lambda: a.shape, lambda: v.assign([0.0, 0.0])):
        with pytest.raises(tf.errors.FailedPreconditionError, match="closed"):
            f()
    assert "closed" in repr(a)
    del a, v  # releases nothing, crashes nothing
    gc.collect()
    with pytest.raises(ValueError):
        tf.Context(backend="tpu")


def test_generator_of_closed_context():
    ctx = tf.Context(backend="cpu")
    g = tf.random.Generator.from_seed(1, ctx)
    ctx.close()
    with pytest.raises(tf.errors.FailedPreconditionError):
        g.normal([2])
    del g


def test_tape_of_closed_context():
    ctx = tf.Context(backend="cpu")
    with ctx:
        x = tf.Variable(1.0)
        with tf.GradientTape() as tape:
            y = x * x
    ctx.close()
    with pytest.raises(tf.errors.FailedPreconditionError):
        tape.gradient(y, x)


def live_bytes():
    return tf.context().stats()["device_bytes_in_use"]


def test_tensors_released_when_dropped():
    x = tf.ones([1024, 256])
    x.numpy()
    before = live_bytes()
    ys = [x * 2 for _ in range(8)]
    tf.context().sync()
    assert live_bytes() >= before + 8 * 1024 * 256 * 4
    del ys
    gc.collect()
    tf.context().sync()
    assert live_bytes() <= before + 64  # the cached scalar 2 may stay


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_eager_loop_holds_flat_memory():
    x = tf.constant(np.ones(64, np.float32))
    w = tf.Variable(np.ones(64, np.float32))

    def run(n):
        y = x
        for _ in range(n):
            y = tf.tanh(y * 0.5 + w)
            with tf.GradientTape() as tape:
                z = tf.reduce_sum(w * y)
            tape.gradient(z, w)
        return float(tf.reduce_sum(y))

    run(1500)  # on Vulkan: eager fusion compiles its kernels (RSS) in the first rounds
    tf.context().sync()
    gc.collect()
    b0, r0 = live_bytes(), rss_kib()
    run(3000)
    tf.context().sync()
    gc.collect()
    b1, r1 = live_bytes(), rss_kib()
    assert b1 <= b0, (b0, b1)
    assert r1 - r0 < 8 * 1024, (r0, r1)  # KiB: flat, not 3000 steps' worth of leaks


def sleeping_c_call(lib, ctx, ms):
    """One library call that takes ms milliseconds without using the CPU:
    vf_host_map with libc's usleep as the host function. usleep takes its
    first argument (the host function's `user`, a register on x86-64 and
    aarch64) as microseconds and returns 0, which is VF_OK."""
    libc = ctypes.CDLL(None)
    f = lib.vf_host_map
    f.restype = ctypes.c_void_p
    f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
    x = tf.ones([1])
    h = f(ctx.handle, x.handle, ctypes.cast(libc.usleep, ctypes.c_void_p), ms * 1000, b"sleep")
    assert h, tf.context().raise_error()
    lib.vf_tensor_release(h)


def test_gil_released_during_c_calls(lib=None):
    # A Python thread counts while the main thread is inside one C call that
    # sleeps 150 ms: it counts as fast as while the main thread sleeps in
    # Python only if the call released the GIL (ctypes.CDLL does for every
    # call; through a ctypes.PyDLL, which keeps it, it barely counts).
    ctx = tf.Context(backend="cpu")
    with ctx:
        count, stop = [0], [False]

        def spin():
            while not stop[0]:
                count[0] += 1

        def rate(f):
            c0, t0 = count[0], time.perf_counter()
            f()
            return (count[0] - c0) / (time.perf_counter() - t0)
        t = threading.Thread(target=spin)
        t.start()
        try:
            asleep = rate(lambda: time.sleep(0.15))
            in_c = rate(lambda: sleeping_c_call(lib or _lib.lib, ctx, 150))
        finally:
            stop[0] = True
            t.join()
    ctx.close()
    assert in_c > 0.5 * asleep, (in_c, asleep)


def test_threads_run_while_reading():
    # ctypes releases the GIL during C calls: two threads computing at once both finish.
    out = []

    def work():
        t = tf.ones([256, 256])
        for _ in range(5):
            t = tf.matmul(t, t) * (1 / 256)
        out.append(float(tf.reduce_sum(t)))

    ts = [threading.Thread(target=work) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert out == [65536.0, 65536.0]


def test_library_found():
    assert _lib.path and "vkfuse" in _lib.path
    assert tf.__version__



def test_python_level_misuse():
    with pytest.raises(TypeError, match="cannot be made directly"):
        tf.Tensor()
    with pytest.raises(TypeError, match="valid indices"):
        tf.ones([2])[1.5]
    with pytest.raises(RuntimeError, match="never recorded"):
        tf.GradientTape().gradient(tf.ones([1]), tf.ones([1]))
    for bad in (lambda: tf.zeros([-1]), lambda: tf.zeros([1] * 9), lambda: tf.range(1e10),
                lambda: tf.stack([tf.ones([2])] * 100), lambda: tf.gather(tf.ones([3]), [5]) if
                tf.context().backend == "cpu" else tf.reduce_sum(tf.ones([2]), axis=5)):
        with pytest.raises(tf.errors.InvalidArgumentError):
            bad()
    with pytest.raises((tf.errors.ResourceExhaustedError, tf.errors.UnimplementedError)):
        tf.zeros([1 << 40])  # no memory (CPU) / past the device's largest buffer (Vulkan)


def test_debugging_checks():
    tf.debugging.assert_equal(tf.constant([1, 2]), [1, 2])
    tf.debugging.assert_near(tf.constant([1.0]), [1.0 + 1e-7])
    tf.debugging.assert_less(tf.constant([1.0]), 2.0)
    tf.debugging.assert_shapes([(tf.ones([2, 3]), ("n", 3)), (tf.ones([2]), ("n",))])
    for bad in (lambda: tf.debugging.assert_equal(tf.constant([1, 2]), [1, 3]),
                lambda: tf.debugging.assert_near([1.0], [1.1]),
                lambda: tf.debugging.check_numerics(tf.constant([np.nan]), "nan here"),
                lambda: tf.debugging.assert_shapes([(tf.ones([2, 3]), ("n", 3)), (tf.ones([3]), ("n",))]),
                lambda: tf.debugging.assert_rank(tf.ones([2]), 2)):
        with pytest.raises(tf.errors.InvalidArgumentError):
            bad()


def os_threads():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def test_dropped_contexts_are_destroyed():
    # A Vulkan context (lavapipe) starts driver threads; a context Python
    # drops with its last tensor must be destroyed, or they pile up.
    def use_one():
        c = tf.Context(backend="vulkan")
        with c:
            return float(tf.reduce_sum(tf.ones([16]) * 2))
    use_one()
    gc.collect()
    before = os_threads()
    for _ in range(4):
        assert use_one() == 32.0
        gc.collect()
    assert os_threads() <= before, (before, os_threads())


def test_symbolic_tensor_dropped_after_a_failed_trace_leaves_no_error():
    # a body that fails keeps its symbolic tensors alive in the exception's
    # traceback; dropping them after the trace ended (its scope freed them)
    # must not leave an error on the context for the next op to report
    import gc

    @tf.function
    def fails(x):
        y = x * 2.0  # noqa: F841  (kept by the traceback)
        raise ValueError("boom")

    try:
        fails(tf.constant([1.0]))
    except ValueError as e:
        kept = e
    del kept
    gc.collect()
    with pytest.raises(tf.errors.InvalidArgumentError, match="vf_reshape"):
        tf.reshape(tf.constant([1.0, 2.0, 3.0]), [2, 2])
    assert float(tf.reduce_sum(tf.constant([1.0, 2.0]))) == 3.0
