#!/usr/bin/python3
"""The CPU backend's float transcendental rows against PyTorch, alternating.

Each round runs bench_cpu_math (the release build; vkfuse's CPU backend,
VKFUSE_THREADS=2) and then the same workloads in PyTorch with 2 threads and
with 1 (OMP_WAIT_POLICY=PASSIVE: its idle threads sleep between):
  - a 256-op chain on [64,64] f32, add, mul, tanh, exp in turn (values kept
    in [0.3, 3]): µs per op, vkfuse eager and traced, torch eager;
  - tanh and exp alone on [64,64] and [2048,1024]: µs per op.
Prints each round's figures and the medians over the rounds. Not a test:
timings are the machine's and its load's.
  /usr/bin/python3 bench/peer/cpu_math_vs_torch.py [--rounds N] [--build DIR]
"""
import argparse
import os
import re
import statistics
import subprocess
import time

os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ["OMP_NUM_THREADS"] = "2"
import torch  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_figures(threads, reps):
    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(1)
    x = (torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) % 17) * 0.1
    a = (torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) * 4 % 17) * 0.05
    c = torch.full((64, 64), 0.5)
    del g

    def chain():
        h = x
        for i in range(256):
            k = i % 4
            h = h + a if k == 0 else h * c if k == 1 else torch.tanh(h) if k == 2 else torch.exp(h)
        return h

    def timed(fn, ops, n):
        fn()
        t = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e6 / ops)
        return statistics.median(t)

    big = torch.rand(2048, 1024) * 8 - 4
    small = x.clone()
    with torch.no_grad():
        return {
            "chain": timed(chain, 256, reps),
            "tanh64": timed(lambda: torch.tanh(small), 1, reps * 20),
            "exp64": timed(lambda: torch.exp(small), 1, reps * 20),
            "tanh2m": timed(lambda: torch.tanh(big), 1, max(reps // 5, 3)),
            "exp2m": timed(lambda: torch.exp(big), 1, max(reps // 5, 3)),
        }


def vkfuse_figures(build, reps):
    env = dict(os.environ, VKFUSE_THREADS="2", OPENBLAS_NUM_THREADS="2")
    out = subprocess.run([os.path.join(build, "bench", "bench_cpu_math"), "--reps", str(reps)], env=env,
                         check=True, capture_output=True, text=True).stdout
    line = [l for l in out.splitlines() if l.startswith("summary bench_cpu_math")][0]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", line)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    args = ap.parse_args()
    rows = []
    for r in range(args.rounds):
        v = vkfuse_figures(args.build, args.reps)
        t2 = torch_figures(2, args.reps)
        t1 = torch_figures(1, args.reps)
        rows.append((v, t2, t1))
        print(f"round {r + 1}: chain µs/op: vkfuse eager {v['chain_eager_us']:.2f} traced {v['chain_traced_us']:.2f} "
              f"({int(v['chain_kernels'])} kernels); torch 2 threads {t2['chain']:.2f}, 1 thread {t1['chain']:.2f}")
        print(f"  tanh [64,64] µs: vkfuse {v['tanh64_us']:.2f} torch {t2['tanh64']:.2f} / {t1['tanh64']:.2f}; "
              f"exp [64,64]: {v['exp64_us']:.2f} / {t2['exp64']:.2f} / {t1['exp64']:.2f}")
        print(f"  tanh [2048,1024] µs: vkfuse {v['tanh2m_us']:.0f} torch {t2['tanh2m']:.0f} / {t1['tanh2m']:.0f}; "
              f"exp: {v['exp2m_us']:.0f} / {t2['exp2m']:.0f} / {t1['exp2m']:.0f}")

    def med(f):
        return statistics.median(f(row) for row in rows)

    ce, ct = med(lambda r: r[0]["chain_eager_us"]), med(lambda r: r[0]["chain_traced_us"])
    c2, c1 = med(lambda r: r[1]["chain"]), med(lambda r: r[2]["chain"])
    print(f"medians over {len(rows)} rounds, chain µs/op: vkfuse eager {ce:.2f}, traced {ct:.2f}; torch eager "
          f"2 threads {c2:.2f}, 1 thread {c1:.2f}; traced / torch(2) {ct / c2:.2f}x, / torch(1) {ct / c1:.2f}x")


if __name__ == "__main__":
    main()
