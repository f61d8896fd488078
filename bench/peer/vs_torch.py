#!/usr/bin/python3
"""vkfuse against PyTorch on the CPU, side by side.

The same workloads (same shapes, batch, optimizer; 2 threads each) run
through vkfuse's C benchmarks (bench/, the release build) and through
PyTorch, in turns in one process tree: each round runs every workload once
with vkfuse and once with torch (which goes first alternates by round), and
every round gives one ratio per pair. The table shows the median of each
side and the median of the per-round ratios, as "vkfuse speed vs torch":
above 1, vkfuse is faster.

Workloads:
  - MLP 784-512-512-10 train step, batch 256, SGD (bench_train): steps/s;
    vkfuse traced and eager, on the CPU backend and on Vulkan (lavapipe);
  - the tiny transformer train step of examples/transformer.c (batch 32 x
    12 tokens, d_model 32, one block, dropout 0.1, Adam): ms per step;
  - conv 3x3 + bias + relu forward for bench_conv's 3 layers (ms), and the
    conv's input and filter gradients (dx + dw) for them;
  - a 256-op elementwise chain on [64,64] (bench_startup): us per op, eager
    and traced (torch: torch.jit.trace);
  - matmul 1024^3 (bench_matmul --matmul-only): GFLOP/s;
  - cold first MLP step with empty caches, in a new process (bench_startup
    --child, fresh cache directories): seconds from the process's start to
    its exit; torch: a new python3 that imports torch and runs one step.

Threads: OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=LP_NUM_THREADS=2 for vkfuse
(OpenBLAS, lavapipe); OMP_NUM_THREADS=2, OMP_WAIT_POLICY=PASSIVE and
torch.set_num_threads(2) for torch (its idle threads sleep, so they do not
slow down the vkfuse runs between).

Setup (Debian 12; PyTorch from Debian, no pip), then run from the
repository root:
  apt-get install -y --no-install-recommends python3-torch python3-numpy
  cmake --preset release && cmake --build --preset release -j2
  /usr/bin/python3 bench/peer/vs_torch.py            # 3 rounds, a few minutes
  /usr/bin/python3 bench/peer/vs_torch.py --smoke    # 1 short round: does it still run?
  /usr/bin/python3 bench/peer/vs_torch.py --only transformer --rounds 5   # one workload
Not a test: timings are the machine's and its load's (the load average is
printed at the start and the end).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
THREADS = "2"

# Torch reads these when it is imported: set before the import below.
os.environ["OMP_NUM_THREADS"] = THREADS
os.environ["MKL_NUM_THREADS"] = THREADS
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"

CONV_LAYERS = [(32, 12, 8, 8), (32, 28, 16, 32), (8, 14, 64, 64)]  # bench_conv's: N, H=W, C, O
CHAIN_OPS = 256


def loadavg():
    with open("/proc/loadavg") as f:
        return f.read().strip()


# ---- vkfuse: the C benchmarks ------------------------------------------------

def ours_env(cache_dir):
    env = dict(os.environ)
    # VKFUSE_TIMEOUT_MS: a cold lavapipe step on a busy machine can wait on
    # its fence past the default 120 s
    env.update(OPENBLAS_NUM_THREADS=THREADS, OMP_NUM_THREADS=THREADS, LP_NUM_THREADS=THREADS,
               VKFUSE_CACHE_DIR=cache_dir, VKFUSE_TIMEOUT_MS="900000")
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("VKFUSE_BACKEND", None)
    return env


def run_ours(cmd, env, timeout=1800):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("%s exited %d:\n%s%s" % (" ".join(cmd), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
    return p.stdout


def summary(out, bench):
    """The figures of the line "summary <bench> key=value ..." (bench/common.h)."""
    for line in out.splitlines():
        if line.startswith("summary " + bench + " ") or line == "summary " + bench:
            return {k: float(v) for k, v in (kv.split("=", 1) for kv in line.split()[2:])}
    raise RuntimeError("no 'summary %s' line in:\n%s" % (bench, out[-2000:]))


def cold_dirs():
    d = tempfile.mkdtemp(prefix="vs_torch_cold.")
    return d, {"XDG_CACHE_HOME": d, "VKFUSE_CACHE_DIR": os.path.join(d, "vkfuse"),
               "MESA_SHADER_CACHE_DIR": os.path.join(d, "mesa_shader_cache")}


def timed_process(cmd, env):
    t0 = time.perf_counter()
    out = run_ours(cmd, env)
    return time.perf_counter() - t0, out


class Ours:
    def __init__(self, build, cache_dir, smoke):
        self.bench = os.path.join(build, "bench")
        self.example = os.path.join(build, "examples", "example_transformer")
        self.env = ours_env(cache_dir)
        self.smoke = smoke

    def mlp(self):
        it = ["--iters", "2", "--rounds", "1", "--warmup", "1"] if self.smoke else ["--iters", "12", "--rounds", "2", "--warmup", "2"]
        s = summary(run_ours([os.path.join(self.bench, "bench_train"), "--batch", "256", "--no-profile"] + it, self.env),
                    "bench_train")
        return {"cpu traced": s["cpu_traced_steps_s"], "cpu eager": s["cpu_eager_steps_s"],
                "lavapipe traced": s["vk_fused_steps_s"], "lavapipe eager": s["vk_eager_steps_s"]}

    def transformer(self):
        r = {}
        for name, backend in (("cpu traced", "cpu"), ("lavapipe traced", "vulkan")):
            env = dict(self.env, VKFUSE_BACKEND=backend)
            out = run_ours([self.example], env)
            m = re.search(r"traced step: median ([0-9.]+) ms", out)
            if not m:
                raise RuntimeError("example_transformer printed no step time:\n" + out[-2000:])
            r[name] = float(m.group(1))
        return r

    def conv(self):
        it = ["--iters", "1"] if self.smoke else ["--iters", "5"]
        s = summary(run_ours([os.path.join(self.bench, "bench_conv"), "--core"] + it, self.env), "bench_conv")
        fwd, grad = {}, {}
        for i in range(len(CONV_LAYERS)):
            fwd[i] = {"cpu": s["l%d_cpu_fwd_ms" % i], "lavapipe": s["l%d_vk_fwd_ms" % i]}
            grad[i] = {"cpu": s["l%d_cpu_grad_ms" % i], "lavapipe": s["l%d_vk_grad_ms" % i]}
        return fwd, grad

    def chain(self):
        reps = "3" if self.smoke else "20"
        s = summary(run_ours([os.path.join(self.bench, "bench_startup"), "--no-cold", "--reps", reps,
                              "--chain8-n", "4096"], self.env), "bench_startup")
        return ({"cpu eager": s["chain_cpu_eager_us"], "lavapipe eager": s["chain_vk_eager_us"]},
                {"cpu traced": s["chain_cpu_traced_us"], "lavapipe traced": s["chain_vk_traced_us"]})

    def matmul(self):
        it = ["--iters", "1"] if self.smoke else ["--iters", "3"]
        s = summary(run_ours([os.path.join(self.bench, "bench_matmul"), "--matmul-only"] + it, self.env), "bench_matmul")
        return {"cpu": s["mm1024x1024x1024_cpu_gflops"], "lavapipe": s["mm1024x1024x1024_vk_gflops"]}

    def cold(self, with_vulkan):
        r = {}
        for name, child in (("cpu", "mlp_cpu"), ("lavapipe", "mlp")):
            if name == "lavapipe" and not with_vulkan:
                continue
            d, extra = cold_dirs()
            try:
                env = dict(self.env, **extra)
                sec, out = timed_process([os.path.join(self.bench, "bench_startup"), "--child", child], env)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            if "result " not in out:
                raise RuntimeError("bench_startup --child %s printed no result:\n%s" % (child, out[-2000:]))
            r[name] = sec
        return r


# ---- torch -----------------------------------------------------------------------

TORCH_COLD = r"""
import time; t0 = time.perf_counter()
import torch; torch.set_num_threads(2)
t1 = time.perf_counter()
m = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                        torch.nn.Linear(512, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.05)
x = torch.randn(256, 784); y = torch.randint(0, 10, (256,))
opt.zero_grad(set_to_none=True)
loss = torch.nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); loss.item()
print("result import_ms=%.3f first_ms=%.3f" % ((t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3))
"""


class Torch:
    def __init__(self, smoke):
        import numpy as np
        import torch
        torch.set_num_threads(int(THREADS))
        torch.manual_seed(0)
        self.np, self.torch, self.smoke = np, torch, smoke
        self.cold_parts = []  # (import s, first step s) of each cold process

    def median_time(self, fn, warmup, reps):
        for _ in range(warmup):
            fn()
        t = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
        return statistics.median(t), min(t)

    def mlp(self):
        torch = self.torch
        nn = torch.nn
        m = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = torch.optim.SGD(m.parameters(), lr=0.05)
        centres = torch.randn(10, 784)
        y = torch.randint(0, 10, (256,))
        x = centres[y] + 0.5 * torch.randn(256, 784)

        def step():
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            loss.item()

        med, _ = self.median_time(step, 1 if self.smoke else 2, 2 if self.smoke else 12)
        return 1.0 / med

    def transformer(self):
        """examples/transformer.c's model and step, in torch (Adam, dropout 0.1)."""
        torch, np = self.torch, self.np
        nn, F = torch.nn, torch.nn.functional
        DIGITS, L, D, H, B = 8, 6, 32, 2, 32
        V, T, HD, FF = DIGITS + 1, 2 * L, D // 2, 4 * D

        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                s_in = 1 / D ** 0.5
                self.tok = nn.Parameter(torch.randn(V, D) * 0.5)
                self.pos = nn.Parameter(torch.randn(T, D) * 0.5)
                self.ln1, self.ln2, self.lnf = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
                self.wqkv = nn.Parameter(torch.randn(D, 3 * D) * s_in)
                self.wo = nn.Parameter(torch.randn(D, D) * s_in / 2 ** 0.5)
                self.w1 = nn.Parameter(torch.randn(D, FF) * s_in)
                self.b1 = nn.Parameter(torch.zeros(FF))
                self.w2 = nn.Parameter(torch.randn(FF, D) / FF ** 0.5 / 2 ** 0.5)
                self.b2 = nn.Parameter(torch.zeros(D))
                self.wout = nn.Parameter(torch.randn(D, V) * s_in)
                self.register_buffer("causal", torch.ones(T, T, dtype=torch.bool).tril())

            def heads(self, t):
                return t.reshape(-1, T, H, HD).transpose(1, 2)

            def forward(self, ids):
                x = self.tok[ids] + self.pos
                q, k, v = (self.heads(t) for t in (self.ln1(x) @ self.wqkv).split(D, dim=-1))
                s = (q @ k.transpose(-1, -2)) * (1 / HD ** 0.5)
                s = s.masked_fill(~self.causal, float("-inf"))
                o = (s.softmax(-1) @ v).transpose(1, 2).reshape(-1, T, D) @ self.wo
                x = x + F.dropout(o, 0.1, self.training)
                h = F.gelu(self.ln2(x) @ self.w1 + self.b1)
                x = x + F.dropout(h @ self.w2 + self.b2, 0.1, self.training)
                return self.lnf(x) @ self.wout

        model = LM()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-8)
        rng = np.random.default_rng(1)

        def step():
            xs = rng.integers(0, DIGITS, size=(B, L))
            ys = xs[:, ::-1]
            ids = np.concatenate([xs, np.full((B, 1), DIGITS), ys[:, :-1]], axis=1)
            ids_t, y_t = torch.from_numpy(np.ascontiguousarray(ids)), torch.from_numpy(np.ascontiguousarray(ys))
            opt.zero_grad(set_to_none=True)
            logits = model(ids_t)[:, L:, :]
            loss = F.cross_entropy(logits.reshape(-1, V), y_t.reshape(-1))
            loss.backward()
            opt.step()
            loss.item()

        # as the example: 60 steps, the first 5 not timed
        med, _ = self.median_time(step, 5, 55)
        return med * 1e3

    def conv(self):
        torch = self.torch
        F = torch.nn.functional
        iters = 1 if self.smoke else 5
        fwd, grad = {}, {}
        for i, (n, hw, c, o) in enumerate(CONV_LAYERS):
            x, w, b = torch.randn(n, c, hw, hw), torch.randn(o, c, 3, 3), torch.randn(o)
            g = torch.randn(n, o, hw, hw)
            with torch.no_grad():
                _, best = self.median_time(lambda: F.relu(F.conv2d(x, w, b, padding=1)), 1, iters)
            fwd[i] = best * 1e3

            def dx_dw():
                torch.nn.grad.conv2d_input(x.shape, w, g, padding=1)
                torch.nn.grad.conv2d_weight(x, w.shape, g, padding=1)

            _, best = self.median_time(dx_dw, 1, iters)
            grad[i] = best * 1e3
        return fwd, grad

    def chain(self):
        torch = self.torch
        x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) % 17 * 0.1
        a = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) % 5 * 0.2
        c = torch.full((64, 64), 0.5)

        def chain(x, a, c):
            h = x
            for i in range(CHAIN_OPS):
                k = i % 4
                h = h + a if k == 0 else h * c if k == 1 else h - a if k == 2 else -h
            return h

        reps = 3 if self.smoke else 20
        with torch.no_grad():
            eager, _ = self.median_time(lambda: chain(x, a, c).sum().item(), 1, reps)
            traced_fn = torch.jit.trace(chain, (x, a, c))
            traced, _ = self.median_time(lambda: traced_fn(x, a, c).sum().item(), 3, reps)
        return eager * 1e6 / CHAIN_OPS, traced * 1e6 / CHAIN_OPS

    def matmul(self):
        torch = self.torch
        a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
        _, best = self.median_time(lambda: torch.mm(a, b), 1, 1 if self.smoke else 3)
        return 2.0 * 1024 ** 3 / best * 1e-9

    def cold(self):
        env = dict(os.environ)
        t0 = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", TORCH_COLD], env=env, stdout=subprocess.PIPE, text=True, timeout=600)
        sec = time.perf_counter() - t0
        m = re.search(r"result import_ms=([0-9.]+) first_ms=([0-9.]+)", p.stdout)
        if p.returncode != 0 or not m:
            raise RuntimeError("the cold torch process failed:\n" + p.stdout)
        self.cold_parts.append((float(m.group(1)) * 1e-3, float(m.group(2)) * 1e-3))
        return sec


# ---- pairs --------------------------------------------------------------------------

class Table:
    """Per (workload, vkfuse variant): the figures of each round and their ratios."""

    def __init__(self):
        self.rows = {}
        self.failed = []

    def add(self, workload, unit, higher_better, variant, ours, torch):
        r = self.rows.setdefault((workload, variant), {"unit": unit, "hb": higher_better, "ours": [], "torch": [],
                                                       "ratio": []})
        r["ours"].append(ours)
        r["torch"].append(torch)
        r["ratio"].append(ours / torch if higher_better else torch / ours)

    def print(self, rounds):
        print("| workload | vkfuse run | unit | vkfuse | torch | vkfuse speed vs torch |")
        print("|---|---|---|---|---|---|")
        for (w, v), r in self.rows.items():
            med = statistics.median
            print("| %s | %s | %s | %.4g | %.4g | %.3gx |" % (w, v, r["unit"], med(r["ours"]), med(r["torch"]),
                                                           med(r["ratio"])))
        print("\n(medians of %d round%s; the last column is the median of the per-round ratios, "
              "above 1: vkfuse faster)" % (rounds, "" if rounds == 1 else "s"))
        if self.failed:
            print("failed (left out of their rounds): " + ", ".join(self.failed))


WORKLOADS = ("MLP", "transformer", "conv", "chain", "matmul", "cold")


def round_once(t, ours, torch, torch_first, cold_vulkan, only=WORKLOADS):
    def pair(name, ours_fn, torch_fn):
        """Both sides of one workload, or None (the failure on stderr, or not
        in only): one workload failing leaves the others' figures."""
        if name not in only:
            return None
        try:
            if torch_first:
                b = torch_fn()
                return ours_fn(), b
            a = ours_fn()
            return a, torch_fn()
        except Exception as e:  # noqa: BLE001 (any failure: report it and go on)
            print("vs_torch: %s failed: %s" % (name, e), file=sys.stderr)
            t.failed.append(name)
            return None

    p = pair("MLP", ours.mlp, torch.mlp)
    for v, x in (p[0].items() if p else ()):
        t.add("MLP train step, batch 256", "steps/s", True, v, x, p[1])
    p = pair("transformer", ours.transformer, torch.transformer)
    for v, x in (p[0].items() if p else ()):
        t.add("transformer train step", "ms", False, v, x, p[1])
    p = pair("conv", ours.conv, torch.conv)
    for i, (n, hw, c, oc) in enumerate(CONV_LAYERS if p else ()):
        (of, og), (tf, tg) = p
        name = "[%d,%d,%d,%d] -> %d" % (n, hw, hw, c, oc)
        for v in ("cpu", "lavapipe"):
            t.add("conv3x3+bias+relu " + name, "ms", False, v, of[i][v], tf[i])
        for v in ("cpu", "lavapipe"):
            t.add("conv dx+dw " + name, "ms", False, v, og[i][v], tg[i])
    p = pair("chain", ours.chain, torch.chain)
    if p:
        (oe, ot), (te, tt) = p
        for v, x in oe.items():
            t.add("256-op chain [64,64], eager", "us/op", False, v, x, te)
        for v, x in ot.items():
            t.add("256-op chain [64,64], traced (torch.jit.trace)", "us/op", False, v, x, tt)
    p = pair("matmul", ours.matmul, torch.matmul)
    for v, x in (p[0].items() if p else ()):
        t.add("matmul 1024^3", "GFLOP/s", True, v, x, p[1])
    p = pair("cold", lambda: ours.cold(cold_vulkan), torch.cold)
    for v, x in (p[0].items() if p else ()):
        t.add("cold first MLP step, new process", "s", False, v, x, p[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"), help="vkfuse build directory")
    ap.add_argument("--rounds", type=int, default=3, help="pairs per workload (default 3)")
    ap.add_argument("--smoke", action="store_true", help="one short round: checks that the script still runs")
    ap.add_argument("--no-cold-vulkan", action="store_true",
                    help="leave out the cold lavapipe process (it compiles every kernel: tens of seconds)")
    ap.add_argument("--only", default=",".join(WORKLOADS),
                    help="comma-separated workloads to run, of " + ", ".join(WORKLOADS) + " (default: all)")
    a = ap.parse_args()
    only = a.only.split(",")
    for w in only:
        if w not in WORKLOADS:
            sys.exit("vs_torch: --only: no workload %r (there are %s)" % (w, ", ".join(WORKLOADS)))
    needs = {"MLP": "bench/bench_train", "transformer": "examples/example_transformer", "conv": "bench/bench_conv",
             "chain": "bench/bench_startup", "matmul": "bench/bench_matmul", "cold": "bench/bench_startup"}
    for exe in sorted({needs[w] for w in only}):
        if not os.access(os.path.join(a.build, exe), os.X_OK):
            sys.exit("vs_torch: no %s in %s: cmake --preset release && cmake --build --preset release" % (exe, a.build))
    rounds = 1 if a.smoke else max(1, a.rounds)
    import torch as _t
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    build = os.path.relpath(a.build, ROOT) if os.path.abspath(a.build).startswith(ROOT + os.sep) else a.build
    print("vkfuse vs PyTorch %s on the CPU, %s threads each; %s; build %s" % (_t.__version__, THREADS, start, build))
    print("load average at start: %s" % loadavg())
    cache = tempfile.mkdtemp(prefix="vs_torch_cache.")  # the steady runs' kernels: compiled in round 1
    try:
        ours, torch = Ours(a.build, cache, a.smoke), Torch(a.smoke)
        t = Table()
        for r in range(rounds):
            print("round %d of %d (%s first) ..." % (r + 1, rounds, "torch" if r % 2 else "vkfuse"), file=sys.stderr)
            round_once(t, ours, torch, r % 2 == 1, not a.no_cold_vulkan, only)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    print("load average at end: %s\n" % loadavg())
    t.print(rounds)
    if torch.cold_parts:
        print("torch's cold processes: import torch %.3g s, then model and first step %.3g s (medians)"
              % (statistics.median(c[0] for c in torch.cold_parts), statistics.median(c[1] for c in torch.cold_parts)))
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
