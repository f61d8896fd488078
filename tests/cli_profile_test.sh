#!/bin/bash
# vkfuse profile: --json prints one JSON object with the fused, unfused and
# CPU figures of chain8; --trace writes a Chrome / Perfetto trace; bad
# arguments exit 2. Usage: cli_profile_test.sh VKFUSE_BINARY WORKDIR
set -u
cli=$1
dir=$2
mkdir -p "$dir"
fail() { echo "cli_profile_test: FAIL: $*" >&2; exit 1; }

"$cli" profile chain8 --iters 2 --shrink 16 --json > "$dir/profile.json" || fail "profile --json exited $?"
"$cli" profile chain8 --iters 2 --shrink 16 --no-cpu --trace "$dir/trace.json" > "$dir/profile.txt" || fail "profile --trace exited $?"
grep -q "fused/unfused: kernels" "$dir/profile.txt" || fail "no ratio line in the text output"
grep -q "trace written to" "$dir/profile.txt" || fail "no trace line in the text output"

python3 - "$dir/profile.json" "$dir/trace.json" <<'PY' || fail "output check"
import json, sys
p = json.load(open(sys.argv[1]))          # one JSON object, nothing else on stdout
assert p["workload"] == "chain8", p["workload"]
assert p["iters"] == 2 and p["shrink"] == 16
for v in ("fused", "unfused"):
    r = p[v]
    assert r is not None, v
    assert r["planned"] and r["timestamps"], (v, r["note"])
    assert r["kernels"] == len(r["kernel_list"]) >= 1, v
    assert r["dispatches"] == sum(k["dispatches"] for k in r["kernel_list"])
    assert abs(r["gpu_us"] - sum(k["gpu_us"] for k in r["kernel_list"])) <= 1e-3 * r["gpu_us"] + 1
    assert 0 < r["gpu_us"] <= r["wall_us"], v
    assert r["bytes_read"] >= 4 * 2**20 and r["bytes_written"] >= 4 * 2**20
    ops = [o for k in r["kernel_list"] for o in k["ops"]]
    assert sorted(ops) == sorted(["mul", "add", "relu", "mul", "sigmoid", "mul", "sub", "abs"]), ops
u = p["unfused"]
assert u["kernels"] == 8 and all(len(k["nodes"]) == 1 for k in u["kernel_list"])
assert p["fused"]["kernels"] < u["kernels"]
assert p["cpu"]["wall_us"] > 0
assert p["max_abs_diff"]["fused_vs_cpu"] < 1e-3 and p["max_abs_diff"]["unfused_vs_cpu"] < 1e-3
assert p["ratios"]["kernels"] == p["fused"]["kernels"] / u["kernels"]
t = json.load(open(sys.argv[2]))
ev = t["traceEvents"]
tracks = [e for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
assert [x["args"]["name"] for x in tracks] == ["chain8 fused call 4", "chain8 unfused call 4"], tracks
calls = [e for e in ev if e["ph"] == "X" and e["cat"] == "call"]
kern = [e for e in ev if e["ph"] == "X" and e["cat"] == "kernel"]
assert len(calls) == 2 and len(kern) >= 2
for e in calls + kern:
    assert e["ts"] >= 0 and e["dur"] >= 0 and e["pid"] == 1
for e in kern:
    c = [c for c in calls if c["tid"] == e["tid"]][0]
    assert c["ts"] - 1e-3 <= e["ts"] and e["ts"] + e["dur"] <= c["ts"] + c["dur"] + 1e-3
PY

"$cli" profile nosuch > /dev/null 2> "$dir/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "unknown workload exited $rc, not 2"
grep -q "unknown workload 'nosuch'" "$dir/err.txt" || fail "no message for an unknown workload"
"$cli" profile chain8 --frobnicate > /dev/null 2> "$dir/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "a bad flag exited $rc, not 2"
grep -q "unknown option '--frobnicate'" "$dir/err.txt" || fail "no message for a bad flag"
"$cli" profile chain8 --iters 0 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--iters 0 exited $rc, not 2"
"$cli" profile chain8 --shrink 0 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--shrink 0 exited $rc, not 2"
"$cli" profile chain8 --shrink 257 > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || fail "--shrink 257 exited $rc, not 2"
"$cli" profile --list | grep -q "^compute_loss" || fail "--list lacks compute_loss"
# an unwritable --trace fails at once (exit 2), before any profiling
start=$(date +%s)
"$cli" profile all --trace /nonexistent-dir/x.json > "$dir/out.txt" 2> "$dir/err.txt"; rc=$?
[ $rc -eq 2 ] || fail "an unwritable --trace exited $rc, not 2"
grep -q "cannot write it" "$dir/err.txt" || fail "no message for an unwritable --trace"
[ ! -s "$dir/out.txt" ] || fail "profiled before finding the trace unwritable"
[ $(( $(date +%s) - start )) -lt 10 ] || fail "an unwritable --trace took more than 10 s to fail"
echo "cli_profile_test: ok"
