#!/usr/bin/python3
"""vkfuse against PyTorch on the CPU, side by side.

The same workloads (same shapes, batch, optimizer; 2 threads each) run
through vkfuse's C benchmarks (bench/, the release build) and through
PyTorch, in turns in one process tree: each round runs every workload once
with vkfuse and once with each torch configuration (whether vkfuse or torch
goes first alternates by round), and every round gives one ratio per pair.
The table shows the median of each side and the median of the per-round
ratios, as "vkfuse speed vs torch": above 1, vkfuse is faster.

Torch configurations (--torch-coretype, default "installed,SkylakeX"):
torch as installed, and torch with OPENBLAS_CORETYPE set to an OpenBLAS
core name. Why: Debian's torch calls Debian's OpenBLAS (0.3.21), which
on a VM's CPU that names itself "Intel Xeon Processor" (AVX-512) takes the
core for a Prescott and runs its SSE3 kernels (sgemm at a quarter of the
speed its SkylakeX kernels reach), while vkfuse's own OpenBLAS copy runs
SkylakeX kernels. OpenBLAS reads the variable when it is loaded, so each
configuration's torch runs in a worker process of its own (this script
with --torch-worker), started once and kept across the rounds; the header
prints the core each worker's OpenBLAS says it runs (openblas_get_corename).

Workloads:
  - MLP 784-512-512-10 train step, batch 256, SGD (bench_train): steps/s;
    vkfuse traced and eager, on the CPU backend and on Vulkan (lavapipe);
  - the tiny transformer train step of examples/transformer.c (batch 32 x
    12 tokens, d_model 32, one block, dropout 0.1, Adam): ms per step;
  - conv 3x3 + bias + relu forward for bench_conv's 3 layers (ms), and the
    conv's input and filter gradients (dx + dw) for them;
  - a 256-op elementwise chain on [64,64] (bench_startup): us per op, eager
    and traced (torch: torch.jit.trace); two op mixes, each a 4-cycle:
    add, mul, sub, neg ("chain"), and add, mul, tanh, exp ("chain with
    tanh/exp", bench_startup --chain-mix tanhexp; exp's argument is a tanh,
    so nothing overflows). Each side's result (its sum) is checked against
    torch eager's: a difference past the tolerance fails the run;
  - matmul 1024^3 (bench_matmul --matmul-only): GFLOP/s;
  - cold MLP train steps with empty caches, each in a new process
    (bench_startup --child, fresh cache directories), three figures: the
    seconds from the process's start to the first step's result (the loss
    read back), from the start to the exit of a process that makes one
    step, and from the start to the exit of a process that makes two (on
    lavapipe the exit waits for the tuned kernels the library compiles off
    the calls: seconds); torch: a new python3 that imports torch and makes
    one or two steps.

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
  /usr/bin/python3 bench/peer/vs_torch.py --only conv --build DIR   # one workload, another build
  /usr/bin/python3 bench/peer/vs_torch.py --torch-coretype installed  # torch as installed only
  /usr/bin/python3 bench/peer/vs_torch.py --each-round   # and every round's figures, under the table
Not a test: timings are the machine's and its load's (the load average is
printed at the start and the end).
"""
import argparse
import ctypes
import json
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
# chain mixes: bench_startup's --chain-mix name, the rows' label
CHAIN_MIXES = {"chain": ("arith", "256-op chain [64,64]"),
               "chain-tanhexp": ("tanhexp", "256-op chain with tanh/exp [64,64]")}
# how far a chain's result may be from torch eager's: of the sum of its
# magnitudes (float32 rounding, fused multiply-adds, each library's tanh and exp)
CHAIN_TOL = {"arith": 1e-4, "tanhexp": 1e-3}


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


def timed_process(cmd, env, timeout=1800):
    """Runs cmd; returns (seconds from its start to the first line of its
    stdout that starts with "result ", seconds from its start to its exit,
    its stdout). stderr goes to a file, not a pipe: nothing blocks on it."""
    with tempfile.TemporaryFile(mode="w+") as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        first, lines = None, []
        try:
            for line in p.stdout:  # the child flushes its "result" line at once
                if first is None and line.startswith("result "):
                    first = time.perf_counter() - t0
                lines.append(line)
            rc = p.wait(timeout=timeout)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        total = time.perf_counter() - t0
        out = "".join(lines)
        if rc != 0 or first is None:
            err.seek(0)
            raise RuntimeError("%s exited %d%s:\n%s%s" % (" ".join(cmd), rc, "" if first else ", no result line",
                                                       out[-2000:], err.read()[-2000:]))
    return first, total, out


class Ours:
    def __init__(self, build, cache_dir, smoke):
        self.bench = os.path.join(build, "bench")
        self.example = os.path.join(build, "examples", "example_transformer")
        self.env = ours_env(cache_dir)
        self.smoke = smoke
        self.cold_parts = {}  # per variant: (first call s, second call s) of each cold round

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

    def chain(self, mix):
        """{"cpu eager": (us per op, sum, sum of magnitudes), ...}"""
        reps = "3" if self.smoke else "20"
        s = summary(run_ours([os.path.join(self.bench, "bench_startup"), "--no-cold", "--reps", reps,
                              "--chain8-n", "4096", "--chain-mix", mix], self.env), "bench_startup")
        r = {}
        for backend, key in (("cpu", "cpu"), ("lavapipe", "vk")):
            for how in ("eager", "traced"):
                k = "chain_%s_%s" % (key, how)
                r[backend + " " + how] = (s[k + "_us"], s[k + "_sum"], s[k + "_abssum"])
        return r

    def matmul(self):
        it = ["--iters", "1"] if self.smoke else ["--iters", "3"]
        s = summary(run_ours([os.path.join(self.bench, "bench_matmul"), "--matmul-only"] + it, self.env), "bench_matmul")
        return {"cpu": s["mm1024x1024x1024_cpu_gflops"], "lavapipe": s["mm1024x1024x1024_vk_gflops"]}

    def cold(self, with_vulkan):
        """{"cpu": {"first": s, "exit1": s, "exit2": s}, "lavapipe": ...}:
        a process of one step (its first result and its exit) and one of two
        steps (its exit), each on fresh cache directories"""
        r = {}
        for name, child in (("cpu", "mlp_cpu"), ("lavapipe", "mlp")):
            if name == "lavapipe" and not with_vulkan:
                continue
            r[name] = {}
            for calls in (1, 2):
                d, extra = cold_dirs()
                try:
                    env = dict(self.env, **extra)
                    first, total, out = timed_process([os.path.join(self.bench, "bench_startup"), "--child", child,
                                                       "--calls", str(calls)], env)
                finally:
                    shutil.rmtree(d, ignore_errors=True)
                m = re.search(r"^result ctx_ms=[0-9.]+ first_ms=([0-9.]+)", out, re.M)
                m2 = re.search(r"^calls n=2 last_ms=([0-9.]+)", out, re.M)
                if not m or (calls == 2 and not m2):
                    raise RuntimeError("bench_startup --child %s --calls %d: no %s line:\n%s"
                                       % (child, calls, "result" if not m else "calls", out[-2000:]))
                if calls == 1:
                    r[name]["first"] = first
                    first_call = float(m.group(1)) * 1e-3
                else:
                    self.cold_parts.setdefault(name, []).append((first_call, float(m2.group(1)) * 1e-3))
                r[name]["exit%d" % calls] = total
        return r


# ---- torch -----------------------------------------------------------------------

# argv[1]: the number of steps; the "result" line is flushed after the first
TORCH_COLD = r"""
import sys, time; t0 = time.perf_counter()
import torch; torch.set_num_threads(2)
t1 = time.perf_counter()
m = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                        torch.nn.Linear(512, 10))
opt = torch.optim.SGD(m.parameters(), lr=0.05)
x = torch.randn(256, 784); y = torch.randint(0, 10, (256,))
for i in range(int(sys.argv[1])):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(m(x), y); loss.backward(); opt.step(); loss.item()
    if i == 0:
        print("result import_ms=%.3f first_ms=%.3f" % ((t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3), flush=True)
print("calls n=%s" % sys.argv[1])
"""


def openblas_core():
    """The core name the OpenBLAS loaded in this process runs kernels for,
    or None where none is loaded (a torch built on MKL, say)."""
    with open("/proc/self/maps") as f:
        libs = sorted(set(line.split()[-1] for line in f if "openblas" in line.lower() and "/" in line))
    for lib in libs:
        try:
            fn = ctypes.CDLL(lib).openblas_get_corename
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_char_p
        return fn().decode()
    return None


class Torch:
    """The torch side of every workload, in the worker process (--torch-worker)."""

    def __init__(self, smoke):
        import numpy as np
        import torch
        torch.set_num_threads(int(THREADS))
        torch.manual_seed(0)
        self.np, self.torch, self.smoke = np, torch, smoke

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

    def chain(self, mix):
        """bench_startup's chain (inputs, op mix): {"eager": (us per op, sum,
        sum of magnitudes), "traced": ...}"""
        torch = self.torch
        x = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) % 17 * 0.1
        a = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) % 5 * 0.2
        c = torch.full((64, 64), 0.5)

        def arith(x, a, c):
            h = x
            for i in range(CHAIN_OPS):
                k = i % 4
                h = h + a if k == 0 else h * c if k == 1 else h - a if k == 2 else -h
            return h

        def tanhexp(x, a, c):
            h = x
            for i in range(CHAIN_OPS):
                k = i % 4
                h = h + a if k == 0 else h * c if k == 1 else torch.tanh(h) if k == 2 else torch.exp(h)
            return h

        chain = {"arith": arith, "tanhexp": tanhexp}[mix]
        reps = 3 if self.smoke else 20
        r = {}
        with torch.no_grad():
            # as bench_startup: each run ends with the result on the host
            eager, _ = self.median_time(lambda: chain(x, a, c).sum().item(), 1, reps)
            h = chain(x, a, c).double()
            r["eager"] = (eager * 1e6 / CHAIN_OPS, h.sum().item(), h.abs().sum().item())
            traced_fn = torch.jit.trace(chain, (x, a, c))
            traced, _ = self.median_time(lambda: traced_fn(x, a, c).sum().item(), 3, reps)
            h = traced_fn(x, a, c).double()
            r["traced"] = (traced * 1e6 / CHAIN_OPS, h.sum().item(), h.abs().sum().item())
        return r

    def matmul(self):
        torch = self.torch
        a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
        _, best = self.median_time(lambda: torch.mm(a, b), 1, 1 if self.smoke else 3)
        return 2.0 * 1024 ** 3 / best * 1e-9

    def conv_lists(self):
        fwd, grad = self.conv()
        return [fwd[i] for i in range(len(CONV_LAYERS))], [grad[i] for i in range(len(CONV_LAYERS))]


def worker_main(smoke):
    """--torch-worker: one JSON request a line on stdin ({"call": name,
    "args": [...]}), one JSON answer a line on stdout ({"ok": true, "value":
    ...} or {"ok": false, "error": ...}); the first line out says torch's
    version and its OpenBLAS core. Anything torch prints goes to stderr."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    t = Torch(smoke)
    proto.write(json.dumps({"version": t.torch.__version__, "core": openblas_core()}) + "\n")
    calls = {"mlp": t.mlp, "transformer": t.transformer, "conv": t.conv_lists, "chain": t.chain,
             "matmul": t.matmul}
    for line in sys.stdin:
        req = json.loads(line)
        try:
            ans = {"ok": True, "value": calls[req["call"]](*req.get("args", []))}
        except Exception as e:  # noqa: BLE001 (the parent reports it and goes on)
            ans = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        proto.write(json.dumps(ans) + "\n")
    return 0


class TorchConfig:
    """One torch configuration: its worker process, kept across the rounds,
    and its cold processes (new ones, with the same environment)."""

    def __init__(self, coretype, smoke):
        self.coretype = coretype  # None: torch as installed
        self.label = "torch as installed" if coretype is None else "torch with %s kernels" % coretype
        self.env = dict(os.environ)
        self.env.pop("OPENBLAS_CORETYPE", None)
        if coretype is not None:
            self.env["OPENBLAS_CORETYPE"] = coretype
        self.cold_parts = []  # (import s, first step s) of each cold process
        cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker"] + (["--smoke"] if smoke else [])
        self.proc = subprocess.Popen(cmd, env=self.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     bufsize=1)
        hello = self.proc.stdout.readline()
        if not hello:
            raise RuntimeError("the torch worker (%s) did not start" % self.label)
        h = json.loads(hello)
        self.version, self.core = h["version"], h["core"]

    def call(self, name, *args):
        self.proc.stdin.write(json.dumps({"call": name, "args": list(args)}) + "\n")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the torch worker (%s) exited" % self.label)
        ans = json.loads(line)
        if not ans["ok"]:
            raise RuntimeError("%s: %s" % (self.label, ans["error"]))
        return ans["value"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)

    def cold(self):
        """{"first": s, "exit1": s, "exit2": s}, as Ours.cold"""
        r = {}
        for steps in (1, 2):
            first, total, out = timed_process([sys.executable, "-c", TORCH_COLD, str(steps)], self.env, timeout=600)
            m = re.search(r"result import_ms=([0-9.]+) first_ms=([0-9.]+)", out)
            if not m or ("calls n=%d" % steps) not in out:
                raise RuntimeError("the cold torch process (%s) failed:\n%s" % (self.label, out))
            if steps == 1:
                self.cold_parts.append((float(m.group(1)) * 1e-3, float(m.group(2)) * 1e-3))
                r["first"] = first
            r["exit%d" % steps] = total
        return r


# ---- pairs --------------------------------------------------------------------------

class Table:
    """Per (workload, vkfuse variant): the figures of each round and, per
    torch configuration, torch's figures and the ratios."""

    def __init__(self, configs):
        self.configs = configs
        self.rows = {}
        self.failed = []
        self.checks = {}  # chain label: the largest difference from torch eager's result, of every round

    def add(self, workload, unit, higher_better, variant, ours, torch):
        """torch: one figure per configuration, in self.configs' order"""
        r = self.rows.setdefault((workload, variant), {"unit": unit, "hb": higher_better, "ours": [],
                                                       "torch": [[] for _ in self.configs],
                                                       "ratio": [[] for _ in self.configs]})
        r["ours"].append(ours)
        for k, x in enumerate(torch):
            r["torch"][k].append(x)
            r["ratio"][k].append(ours / x if higher_better else x / ours)

    def print(self, rounds, each_round=False):
        labels = [c.label for c in self.configs]
        print("| workload | vkfuse run | unit | vkfuse | " + " | ".join(labels) + " | " +
              " | ".join("vs " + lb for lb in labels) + " |")
        print("|---" * (4 + 2 * len(labels)) + "|")
        med = statistics.median
        for (w, v), r in self.rows.items():
            print("| %s | %s | %s | %.4g | " % (w, v, r["unit"], med(r["ours"])) +
                  " | ".join("%.4g" % med(x) for x in r["torch"]) + " | " +
                  " | ".join("%.3gx" % med(x) for x in r["ratio"]) + " |")
        print("\n(medians of %d round%s; the \"vs\" columns are the medians of the per-round ratios, "
              "vkfuse's speed over torch's: above 1, vkfuse faster)" % (rounds, "" if rounds == 1 else "s"))
        for label, (worst, tol) in self.checks.items():
            print("%s: every result within %.2g of torch eager's (its sum, relative to the sum of its magnitudes; "
                  "tolerance %.2g)" % (label, worst, tol))
        if each_round:
            print("\neach round, in order (vkfuse / %s):" % " / ".join(labels))
            for (w, v), r in self.rows.items():
                print("  %s, %s: %s" % (w, v, ", ".join(
                    " / ".join("%.4g" % x for x in (o,) + tuple(tc[i] for tc in r["torch"]))
                    for i, o in enumerate(r["ours"]))))
        if self.failed:
            print("failed (left out of their rounds): " + ", ".join(self.failed))


WORKLOADS = ("MLP", "transformer", "conv", "chain", "chain-tanhexp", "matmul", "cold")


def check_chain(mix, ours, torch_eager, cfg):
    """Each vkfuse run's and torch traced's result against torch eager's:
    |sum - torch eager's sum| <= CHAIN_TOL * torch eager's sum of magnitudes.
    A miss is a failure of the workload (the exit status says so)."""
    _, ref, mag = torch_eager
    tol = CHAIN_TOL[mix] * mag
    worst = 0.0
    for who, (_, x, _) in ours:
        diff = abs(x - ref)
        worst = max(worst, diff / mag if mag else diff)
        if not diff <= tol:
            raise RuntimeError("chain %s: %s's result sums to %.9g, %s eager's to %.9g (tolerance %.3g)"
                               % (mix, who, x, cfg.label, ref, tol))
    return worst


def round_once(t, ours, configs, torch_first, cold_vulkan, only=WORKLOADS):
    def pair(name, ours_fn, torch_fn):
        """vkfuse's figures and each torch configuration's (a list), or None
        (the failure on stderr): one workload failing leaves the others'
        figures; None too for a workload that --only leaves out."""
        if name not in only:
            return None
        try:
            if torch_first:  # and the configurations in turn the other way round
                b = [torch_fn(c) for c in reversed(configs)][::-1]
                return ours_fn(), b
            a = ours_fn()
            return a, [torch_fn(c) for c in configs]
        except Exception as e:  # noqa: BLE001 (any failure: report it and go on)
            print("vs_torch: %s failed: %s" % (name, e), file=sys.stderr)
            t.failed.append(name)
            return None

    p = pair("MLP", ours.mlp, lambda c: c.call("mlp"))
    for v, x in (p[0].items() if p else ()):
        t.add("MLP train step, batch 256", "steps/s", True, v, x, p[1])
    p = pair("transformer", ours.transformer, lambda c: c.call("transformer"))
    for v, x in (p[0].items() if p else ()):
        t.add("transformer train step", "ms", False, v, x, p[1])
    p = pair("conv", ours.conv, lambda c: c.call("conv"))
    for i, (n, hw, c, oc) in enumerate(CONV_LAYERS if p else ()):
        (of, og), tc = p
        name = "[%d,%d,%d,%d] -> %d" % (n, hw, hw, c, oc)
        for v in ("cpu", "lavapipe"):
            t.add("conv3x3+bias+relu " + name, "ms", False, v, of[i][v], [x[0][i] for x in tc])
        for v in ("cpu", "lavapipe"):
            t.add("conv dx+dw " + name, "ms", False, v, og[i][v], [x[1][i] for x in tc])
    for w, (mix, label) in CHAIN_MIXES.items():
        p = pair(w, lambda: ours.chain(mix), lambda c: c.call("chain", mix))
        if not p:
            continue
        try:
            worst = 0.0
            for cfg, tr in zip(configs, p[1]):
                worst = max(worst, check_chain(mix, list(p[0].items()) + [("torch traced", tr["traced"])],
                                               tr["eager"], cfg))
        except RuntimeError as e:
            print("vs_torch: %s failed: %s" % (w, e), file=sys.stderr)
            t.failed.append(w)
            continue
        t.checks[label] = (max(worst, t.checks.get(label, (0.0,))[0]), CHAIN_TOL[mix])
        for how in ("eager", "traced"):
            for v, x in p[0].items():
                if v.endswith(how):
                    t.add("%s, %s%s" % (label, how, " (torch.jit.trace)" if how == "traced" else ""), "us/op", False,
                          v, x[0], [tr[how][0] for tr in p[1]])
    p = pair("matmul", ours.matmul, lambda c: c.call("matmul"))
    for v, x in (p[0].items() if p else ()):
        t.add("matmul 1024^3", "GFLOP/s", True, v, x, p[1])
    p = pair("cold", lambda: ours.cold(cold_vulkan), lambda c: c.cold())
    for key, what in (("first", "cold MLP, new process: start to first step's result"),
                      ("exit1", "cold MLP, new process of 1 step: start to exit"),
                      ("exit2", "cold MLP, new process of 2 steps: start to exit")):
        for v, x in (p[0].items() if p else ()):
            t.add(what, "s", False, v, x[key], [tc[key] for tc in p[1]])


def main():
    if "--torch-worker" in sys.argv[1:]:
        return worker_main("--smoke" in sys.argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"), help="vkfuse build directory")
    ap.add_argument("--rounds", type=int, default=3, help="pairs per workload (default 3)")
    ap.add_argument("--smoke", action="store_true", help="one short round: checks that the script still runs")
    ap.add_argument("--only", default=",".join(WORKLOADS),
                    help="comma-separated workloads to run, of %s (default: all)" % ", ".join(WORKLOADS))
    ap.add_argument("--no-cold-vulkan", action="store_true",
                    help="leave out the cold lavapipe processes (each compiles the step's kernels: seconds)")
    ap.add_argument("--each-round", action="store_true", help="print every round's figures under the table too")
    ap.add_argument("--torch-coretype", default="installed,SkylakeX",
                    help="comma-separated torch configurations: 'installed' (torch as installed) or an OpenBLAS "
                         "core name for OPENBLAS_CORETYPE (default: installed,SkylakeX)")
    a = ap.parse_args()
    only = tuple(w for w in a.only.split(",") if w)
    for w in only:
        if w not in WORKLOADS:
            sys.exit("vs_torch: --only %s: no such workload; pick of %s" % (w, ", ".join(WORKLOADS)))
    cores = [None if c.lower() == "installed" else c for c in a.torch_coretype.split(",") if c]
    if not cores or len(set(cores)) != len(cores):
        sys.exit("vs_torch: --torch-coretype %s: name each configuration once, e.g. installed,SkylakeX"
                 % a.torch_coretype)
    needs = {"MLP": "bench/bench_train", "transformer": "examples/example_transformer", "conv": "bench/bench_conv",
             "chain": "bench/bench_startup", "chain-tanhexp": "bench/bench_startup", "matmul": "bench/bench_matmul",
             "cold": "bench/bench_startup"}
    for exe in sorted(set(needs[w] for w in only)):
        if not os.access(os.path.join(a.build, exe), os.X_OK):
            sys.exit("vs_torch: no %s in %s: cmake --preset release && cmake --build --preset release" % (exe, a.build))
    rounds = 1 if a.smoke else max(1, a.rounds)
    start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    build = os.path.relpath(a.build, ROOT) if os.path.abspath(a.build).startswith(ROOT + os.sep) else a.build
    load_start = loadavg()
    configs = []
    cache = tempfile.mkdtemp(prefix="vs_torch_cache.")  # the steady runs' kernels: compiled in round 1
    try:
        for c in cores:
            configs.append(TorchConfig(c, a.smoke))
            if c is not None and configs[-1].core is not None and configs[-1].core.lower() != c.lower():
                print("vs_torch: warning: with OPENBLAS_CORETYPE=%s torch's OpenBLAS runs %s kernels"
                      % (c, configs[-1].core), file=sys.stderr)
        print("vkfuse vs PyTorch %s on the CPU, %s threads each; %s; build %s"
              % (configs[0].version, THREADS, start, build))
        for c in configs:
            print("%s: OpenBLAS core %s" % (c.label, c.core or "? (no OpenBLAS loaded)"))
        print("load average at start: %s" % load_start)
        ours = Ours(a.build, cache, a.smoke)
        t = Table(configs)
        for r in range(rounds):
            print("round %d of %d (%s first) ..." % (r + 1, rounds, "torch" if r % 2 else "vkfuse"), file=sys.stderr)
            round_once(t, ours, configs, r % 2 == 1, not a.no_cold_vulkan, only)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        for c in configs:
            c.close()
    print("load average at end: %s\n" % loadavg())
    t.print(rounds, a.each_round)
    for v, parts in ours.cold_parts.items():
        print("vkfuse %s, cold processes: the first call (trace, plan, compiles, run, loss read) %.3g s, the "
              "second %.3g s (medians)" % (v, statistics.median(x[0] for x in parts),
                                          statistics.median(x[1] for x in parts)))
    for c in configs:
        if c.cold_parts:
            print("%s, cold processes: import torch %.3g s, then model and first step %.3g s (medians)"
                  % (c.label, statistics.median(x[0] for x in c.cold_parts),
                     statistics.median(x[1] for x in c.cold_parts)))
    return 1 if t.failed else 0


if __name__ == "__main__":
    sys.exit(main())
