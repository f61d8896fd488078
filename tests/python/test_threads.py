"""Threads of one process using vkfuse at once, each on its own context:
tracing and calling vkfuse.functions (one shared function object and
functions of their own), graph conds, variables a trace creates, prints in
the graph, tapes and stop_recording, eager ops; every result against NumPy.
The package's state of a call in progress (releases deferred while a body
runs, a body's depth, the traces' variable scopes and prints, a tape's
stop_recording) is per thread: shared, one thread released another's
tensors at the wrong time and on the wrong context (errors, crashes, or a
hang when that context's thread waited for this one), or recorded nothing
while another thread was in stop_recording.

Joins are bounded, so that a deadlock fails a case instead of hanging."""
import io
import os
import threading

import numpy as np

import vkfuse as tf

BACKEND = os.environ.get("VKFUSE_BACKEND") or "cpu"
JOIN_S = 60.0


def run_threads(n, work):
    """work(i) on n threads at once (a barrier starts them together); the results."""
    out, errs = [None] * n, []
    start = threading.Barrier(n)

    def run(i):
        try:
            start.wait(JOIN_S)
            out[i] = work(i)
        except BaseException as e:  # noqa: BLE001 (reported below)
            errs.append(e)
    ts = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in ts), f"a thread is still running after {JOIN_S} s: deadlock"
    if errs:
        raise errs[0]
    return out


@tf.function
def shared_step(x, w):
    """One function object called by every thread, each with its own context:
    a trace per context. A tape, a graph cond and a reduction."""
    with tf.GradientTape() as t:
        t.watch(w)
        y = tf.reduce_sum(tf.tanh(x * w))
    g = t.gradient(y, w)
    if tf.reduce_sum(x) > 0:
        z = g * 2.0
    else:
        z = g - 1.0
    return y, z


def ref_shared_step(x, w):
    y = np.tanh(x * w).sum()
    g = x * (1 - np.tanh(x * w) ** 2)
    return y, g * 2.0 if x.sum() > 0 else g - 1.0


def test_threads_trace_and_call_functions_on_their_own_contexts():
    rounds = 6 if BACKEND == "cpu" else 3

    def work(i):
        ctx = tf.Context(backend=BACKEND)
        rng = np.random.default_rng(i)
        printed = io.StringIO()
        try:
            with ctx:
                v = None

                @tf.function
                def own(x):
                    nonlocal v
                    if v is None:  # a variable the first trace creates (lifted)
                        v = tf.Variable(tf.ones([5]) * float(i))
                    v.assign_add(x)
                    tf.print("rank", i, output_stream=printed)
                    return tf.reduce_mean(v * x) + tf.cast(tf.size(x), tf.float32)
                acc = np.full(5, float(i), np.float32)
                for r in range(rounds):
                    # a new shape now and then: traces again while others run
                    x = (rng.standard_normal(5 if r % 3 else 4) * (1 if r % 2 else -1)).astype(np.float32)
                    w = rng.standard_normal(x.shape).astype(np.float32)
                    y, z = shared_step(tf.constant(x), tf.constant(w))
                    ry, rz = ref_shared_step(x, w)
                    np.testing.assert_allclose(y.numpy(), ry, rtol=1e-4, atol=1e-5)
                    np.testing.assert_allclose(z.numpy(), rz, rtol=1e-4, atol=1e-5)
                    x5 = rng.standard_normal(5).astype(np.float32)
                    acc += x5
                    np.testing.assert_allclose(own(tf.constant(x5)).numpy(), (acc * x5).mean() + 5,
                                               rtol=1e-4, atol=1e-5)
                    e = tf.matmul(tf.constant(x5[None]), tf.constant(x5[:, None]))  # eager
                    np.testing.assert_allclose(e.numpy(), [[x5 @ x5]], rtol=1e-4)
                np.testing.assert_allclose(v.numpy(), acc, rtol=1e-4, atol=1e-5)
                assert own.experimental_get_tracing_count() == 1
                assert printed.getvalue() == f"rank {i}\n" * rounds
        finally:
            ctx.close()
        return True
    assert run_threads(4, work) == [True] * 4


def test_stop_recording_is_the_threads_own():
    """A tape's stop_recording on one thread does not stop another thread's tape."""
    inside, recorded = threading.Event(), threading.Event()

    def work(i):
        ctx = tf.Context(backend=BACKEND)
        try:
            with ctx:
                x = tf.constant([1.0, 2.0])
                with tf.GradientTape() as t:
                    t.watch(x)
                    if i == 0:
                        with t.stop_recording():
                            inside.set()
                            assert recorded.wait(JOIN_S)  # thread 1 records meanwhile
                            y = x * x
                        return t.gradient(y, x)  # stopped: no gradient
                    assert inside.wait(JOIN_S)
                    y = x * x
                recorded.set()
                return t.gradient(y, x).numpy().tolist()
        finally:
            recorded.set()
            ctx.close()
    stopped, grad = run_threads(2, work)
    assert stopped is None and grad == [2.0, 4.0]
