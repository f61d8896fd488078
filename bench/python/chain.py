#!/usr/bin/env python3
"""The Python layer's cost per eager op: bench_startup's 256-op chain of small
ops (add, mul, sub, neg in turn on [64,64] f32, one read at the end) from
Python through the vkfuse package, the same chain in C (bench_startup, same
library), and in PyTorch's eager Python when torch is importable.

Usage: /usr/bin/python3 bench/python/chain.py [--build build/release] [--reps 20] [--no-torch]

Prints µs per op (median of --reps chains after a warm-up) per backend and
the difference Python - C: on the CPU backend an op runs when called, so the
whole time counts; on lavapipe the ops are queued and the device runs them
on its own threads, so the host part (until the last op returned, before the
read) is compared with C's host part.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHAIN_OPS = 256


def chain(h, a, c):
    for i in range(CHAIN_OPS):
        k = i % 4
        h = h + a if k == 0 else h * c if k == 1 else h - a if k == 2 else -h
    return h


def time_chain(make, read, reps):
    x, a, c = make()
    for _ in range(3):  # warm-up: on lavapipe eager fusion compiles its kernels in the background
        read(chain(x, a, c))
    tot, host = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        y = chain(x, a, c)
        t1 = time.perf_counter()
        read(y)
        t2 = time.perf_counter()
        host.append((t1 - t0) * 1e6 / CHAIN_OPS)
        tot.append((t2 - t0) * 1e6 / CHAIN_OPS)
    return statistics.median(tot), statistics.median(host), min(tot), min(host)


def inputs(np):
    x = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 17) * np.float32(0.1)
    a = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 5) * np.float32(0.2)
    c = np.full((64, 64), 0.5, np.float32)
    return x, a, c


def ours(backend, reps):
    import numpy as np
    import vkfuse as vf
    ctx = vf.Context(backend=backend)
    with ctx:
        r = time_chain(lambda: [vf.constant(v) for v in inputs(np)], lambda y: y.numpy(), reps)
    ctx.close()
    return r


def c_figures(build, reps):
    exe = os.path.join(build, "bench", "bench_startup")
    p = subprocess.run([exe, "--no-cold", "--reps", str(reps), "--chain8-n", "4096"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=900)
    if p.returncode != 0:
        raise RuntimeError(f"{exe} exited {p.returncode}: {p.stderr[-2000:]}")
    figs = {}
    for line in p.stdout.splitlines():
        if line.startswith("summary bench_startup"):
            figs.update({k: float(v) for k, v in (kv.split("=", 1) for kv in line.split()[2:])})
        if line.strip().startswith("of which host"):
            figs["chain_vk_host_us"] = float(line.split()[5])
    return figs


def torch_chain(reps):
    import torch
    x, a, c = (torch.from_numpy(v) for v in inputs(__import__("numpy")))
    with torch.no_grad():
        return time_chain(lambda: (x, a, c), lambda y: y.sum().item(), reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args()
    os.environ.setdefault("VKFUSE_LIBRARY", os.path.join(args.build, "libvkfuse.so"))
    sys.path.insert(0, os.path.join(ROOT, "python"))
    c = c_figures(args.build, args.reps)
    py_vk = ours("vulkan", args.reps)
    py_cpu = ours("cpu", args.reps)
    print(f"256-op chain [64,64] f32, eager, µs per op (median of {args.reps}); "
          "the machine's load makes these noisy")
    print(f"{'run':38s} {'total':>8s} {'host':>8s} {'best':>8s} {'host best':>10s}")
    print(f"{'C, cpu backend':38s} {c['chain_cpu_eager_us']:8.2f}")
    print(f"{'Python (vkfuse), cpu backend':38s} {py_cpu[0]:8.2f} {py_cpu[1]:8.2f} {py_cpu[2]:8.2f} {py_cpu[3]:10.2f}")
    print(f"{'C, lavapipe':38s} {c['chain_vk_eager_us']:8.2f} {c.get('chain_vk_host_us', float('nan')):8.2f}")
    print(f"{'Python (vkfuse), lavapipe':38s} {py_vk[0]:8.2f} {py_vk[1]:8.2f} {py_vk[2]:8.2f} {py_vk[3]:10.2f}")
    if not args.no_torch:
        try:
            t = torch_chain(args.reps)
            print(f"{'PyTorch eager (Python), CPU':38s} {t[0]:8.2f} {t[1]:8.2f} {t[2]:8.2f} {t[3]:10.2f}")
        except ImportError:
            print("PyTorch: not importable")
    print(f"Python over C per op: cpu backend {py_cpu[0] - c['chain_cpu_eager_us']:+.2f} µs (total), "
          f"lavapipe {py_vk[1] - c.get('chain_vk_host_us', float('nan')):+.2f} µs (host part)")
    print(f"summary python_chain py_cpu_us={py_cpu[0]:.4g} c_cpu_us={c['chain_cpu_eager_us']:.4g} "
          f"py_vk_host_us={py_vk[1]:.4g} c_vk_host_us={c.get('chain_vk_host_us', float('nan')):.4g}")


if __name__ == "__main__":
    main()
