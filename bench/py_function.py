#!/usr/bin/env python3
"""Python's vkfuse.function against the same traced calls from C
(bench_pycall), on the backend VKFUSE_BACKEND picks (cpu or vulkan):

  call        y = x * 2 + 1 on f32[4], traced: microseconds per call from
              Python (the result dropped, so released) and from C; the
              difference is what the Python layer adds per call.
  train_step  the seed's clipped softmax-regression step (784 -> 10, batch
              128, input_signature [None, 784], [None]), each step synced:
              steps per second from Python and from C.

The two sides take turns, --rounds rounds each (a round of C is one run of
bench_pycall), so that the load of other processes on a shared machine
falls on both alike; each reports its best round. Usage:
  python3 bench/py_function.py [--build build/release] [--rounds 5] [--iters 20000] [--steps 200]
"""
import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def c_round(build, args):
    exe = os.path.join(build, "bench", "bench_pycall")
    out = subprocess.run([exe, "--iters", str(args.iters), "--steps", str(args.steps), "--rounds", "1"],
                         capture_output=True, text=True, check=True).stdout
    line = [l for l in out.splitlines() if l.startswith("summary bench_pycall")][-1]
    return {k: float(v) for k, v in re.findall(r"(\w+)=(\S+)", line)}


def py_side(args):
    """A generator: each next() runs one round and yields its figures."""
    import vkfuse as tf
    import numpy as np

    @tf.function
    def affine(x):
        return x * 2.0 + 1.0

    x = tf.fill([4], 1.0)

    w = tf.Variable(tf.zeros([784, 10]))
    b = tf.Variable(tf.zeros([10]))

    @tf.function(input_signature=[tf.TensorSpec([None, 784], tf.float32), tf.TensorSpec([None], tf.int32)])
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = tf.matmul(x, w) + b
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        dw, db = tape.gradient(loss, [w, b])
        norm = tf.norm(dw)
        if norm > 1.0:
            dw = dw / norm
        w.assign_sub(0.1 * dw)
        b.assign_sub(0.1 * db)
        return loss

    i = np.arange(128 * 784)
    xs = tf.constant((((i * 7919) % 1000) / 1000.0).astype(np.float32).reshape(128, 784))
    ys = tf.constant((np.arange(128) % 10).astype(np.int32))
    ctx = tf.context()

    def timed(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    timed(lambda: affine(x), 100)  # traces and warms up
    timed(lambda: (train_step(xs, ys), ctx.sync()), 3)
    while True:
        call = timed(lambda: affine(x), args.iters)
        ctx.sync()
        step = timed(lambda: (train_step(xs, ys), ctx.sync()), args.steps)
        assert affine.experimental_get_tracing_count() == 1 and train_step.experimental_get_tracing_count() == 1
        yield {"call_us": call * 1e6, "steps_per_s": 1.0 / step, "device": ctx.device_name}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(HERE, "..", "build", "release"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--steps", type=int, default=200)
    args = p.parse_args()
    os.environ.setdefault("VKFUSE_LIBRARY", os.path.join(args.build, "libvkfuse.so"))
    rounds = py_side(args)
    c = {"call_us": float("inf"), "steps_per_s": 0.0}
    py = dict(c)
    for _ in range(args.rounds):
        for best, got in ((c, c_round(args.build, args)), (py, next(rounds))):
            best["call_us"] = min(best["call_us"], got["call_us"])
            best["steps_per_s"] = max(best["steps_per_s"], got["steps_per_s"])
            best["device"] = got.get("device", "")
    print("device: %s" % py["device"])
    print("%-12s %12s %12s %12s" % ("", "Python", "C", "difference"))
    print("%-12s %9.2f us %9.2f us %+9.2f us" % ("call", py["call_us"], c["call_us"], py["call_us"] - c["call_us"]))
    print("%-12s %8.1f /s  %8.1f /s  %+10.1f %%" % ("train_step", py["steps_per_s"], c["steps_per_s"],
                                                  100.0 * (py["steps_per_s"] / c["steps_per_s"] - 1.0)))


if __name__ == "__main__":
    main()
