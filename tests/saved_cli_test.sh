#!/bin/bash
# vkfuse saved show / run / profile FILE end to end, as a new user would use
# them: saved_cli_make saves functions from C with .npy inputs and its own
# outputs; the CLI shows them, runs them on the CPU backend and on the
# Vulkan device (lavapipe here) and NumPy compares the outputs (bit-equal on
# the CPU backend, which the saving program used); a saved train step runs
# step by step through --save-variables; bad .npy files, a damaged saved
# file, missing user ops and bad arguments give their messages and exit
# codes (docs/CLI.md). Usage: saved_cli_test.sh VKFUSE SAVED_CLI_MAKE WORKDIR
set -u
cli=$1
make=$2
dir=$3
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir" || exit 1
fail() { echo "saved_cli_test: FAIL: $*" >&2; exit 1; }
py=/usr/bin/python3
"$py" -c "import numpy" 2>/dev/null || py=python3
"$py" -c "import numpy" 2>/dev/null || fail "no Python with NumPy (/usr/bin/python3 or python3)"
# expect RC MESSAGE CMD...: CMD exits RC and its stderr holds MESSAGE
expect() {
    local rc=$1 msg=$2
    shift 2
    "$@" > out.txt 2> err.txt
    local got=$?
    [ $got -eq "$rc" ] || { cat err.txt >&2; fail "'$*' exited $got, not $rc"; }
    grep -qF -- "$msg" err.txt || { cat err.txt >&2; fail "'$*': no '$msg' in its message"; }
}
# same A B [TOL]: the .npy files hold the same dtype, shape and values (within
# TOL); checked together by one NumPy run at the end (compare_all)
same() { echo "$1 $2 ${3:-0}" >> pairs.txt; }
compare_all() {
    "$py" - <<'PY' || fail "outputs differ from the references"
import numpy as np
for line in open("pairs.txt"):
    x, y, tol = line.split()
    a, b, tol = np.load(x), np.load(y), float(tol)
    assert a.dtype == b.dtype and a.shape == b.shape, (x, y, a.dtype, a.shape, b.dtype, b.shape)
    if tol == 0: assert np.array_equal(a, b), (x, y, a, b)
    else: assert np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol), (x, y, a, b)
PY
}

"$make" . > make.log || fail "saved_cli_make failed"

# ---- saved show
"$cli" saved show mlp.vkf --json --backend cpu > mlp.json || fail "saved show --json exited $?"
"$py" - <<'PY' || fail "saved show mlp.vkf --json"
import json
p = json.load(open("mlp.json"))
assert p["format_version"] == 2 and p["name"] == "mlp" and p["n_inputs"] == 1 and p["n_outputs"] == 2, p
assert p["input_signature"] == [{"dtype": "f32", "shape": [-1, 4]}], p["input_signature"]
[c] = p["concrete"]
assert c["inputs"] == [{"dtype": "f32", "shape": [-1, 4]}] and c["traced_inputs"] == [[5, 4]], c
assert c["outputs"] == [{"dtype": "f32", "shape": [-1, 3]}, {"dtype": "f32", "shape": []}], c["outputs"]
for op in ("matmul", "relu", "reduce_sum", "param", "capture"):
    assert c["ops"].get(op, 0) >= 1, (op, c["ops"])
assert sum(c["ops"].values()) == c["nodes"]
assert c["captures"] == 2 and c["variables"] == 0 and p["variables"] == [] and p["user_ops"] == []
assert c["per_call"]["kernels"] >= 1 and c["per_call"]["dispatches"] >= 1, c["per_call"]
PY
# the train step prints at every call (vf_print): on stderr, so that --json stays JSON
"$cli" saved show step.vkf --json > step.json 2> step.err || fail "saved show step.vkf exited $?"
"$py" - <<'PY' || fail "saved show step.vkf --json"
import json
p = json.load(open("step.json"))
assert p["variables"] == [{"name": "var0", "dtype": "f32", "shape": [4, 3], "bytes": 48}], p["variables"]
[c] = p["concrete"]
assert c["inputs"][1] == {"dtype": "i32", "shape": [-1]} and c["variables"] == 1
assert all(c["ops"].get(op) for op in ("cond", "while", "assign", "variable")), c["ops"]
PY
"$cli" saved show step.vkf --no-run > step.txt || fail "saved show step.vkf (text) exited $?"
grep -q "^  var0 f32\[4,3\], 48 bytes" step.txt || fail "saved show: no variable line"
grep -q "input_signature: (f32\[-1,4\], i32\[-1\])" step.txt || fail "saved show: no signature line"
grep -q "per call" step.txt && fail "saved show --no-run ran the function"
# a user op this process lacks: named, and everything else still shown (on
# the CPU backend its call cannot run: said per concrete function)
"$cli" saved show uelem.vkf --backend cpu > ue.txt || fail "saved show uelem.vkf exited $?"
grep -q "user elementwise op 'softplus': not created in this process" ue.txt || fail "saved show: softplus not named"
grep -q "cannot run here: .*softplus" ue.txt || fail "saved show: no reason the CPU backend cannot run it"
grep -q "nodes: .*softplus 1" ue.txt || fail "saved show: node counts missing"
"$cli" saved show uelem.vkf --backend vulkan --json > ue.json || fail "saved show uelem.vkf --backend vulkan exited $?"
"$py" - <<'PY' || fail "saved show uelem.vkf --json"
import json
p = json.load(open("ue.json"))
assert p["user_ops"] == [{"name": "softplus", "kind": "elementwise", "in_this_process": False}], p["user_ops"]
assert p["concrete"][0]["per_call"]["kernels"] >= 1, p["concrete"][0]["per_call"]
PY

# ---- run: the CPU backend gives the saving program's outputs bit for bit
"$cli" run mlp.vkf --in x.npy --out mlp_cpu --backend cpu > /dev/null || fail "run mlp.vkf exited $?"
same mlp_cpu/out0.npy mlp_ref0.npy
same mlp_cpu/out1.npy mlp_ref1.npy
"$py" -c "import numpy as np; np.save('xf.npy', np.asfortranarray(np.load('x.npy'))); assert np.load('xf.npy').flags.f_contiguous"
"$cli" run mlp.vkf --in xf.npy --out mlp_f --backend cpu > /dev/null || fail "run on a Fortran-order input exited $?"
same mlp_f/out0.npy mlp_ref0.npy
# lavapipe, checked against the CPU backend
"$cli" run mlp.vkf --in x.npy --out mlp_vk --backend vulkan --check > check.txt || fail "run --check exited $?"
grep -q "^  out0: " check.txt && grep -q "^  out1: " check.txt || fail "run --check printed no differences"
same mlp_vk/out0.npy mlp_ref0.npy 1e-5
same mlp_vk/out1.npy mlp_ref1.npy 1e-5
# every dtype, on both backends
for be in cpu vulkan; do
    "$cli" run dtypes.vkf --in dt_h.npy --in dt_i.npy --in dt_u.npy --in dt_b.npy --out dt_$be --backend $be > /dev/null ||
        fail "run dtypes.vkf --backend $be exited $?"
    for k in 0 1 2 3; do same dt_$be/out$k.npy dt_ref$k.npy; done
done
# a train step, step by step: --save-variables writes the next step's file (here over the one run)
cp step.vkf walk.vkf
"$cli" run walk.vkf --in sx.npy --in sy.npy --out s2 --backend cpu --save-variables walk.vkf > /dev/null 2>&1 ||
    fail "run walk.vkf --save-variables exited $?"
for k in 0 1 2; do same s2/out$k.npy step2_ref$k.npy; done
same s2/var0.npy step2_w.npy
"$cli" run walk.vkf --in sx.npy --in sy.npy --out s3 --backend cpu > /dev/null 2>&1 || fail "run walk.vkf again exited $?"
for k in 0 1 2; do same s3/out$k.npy step3_ref$k.npy; done
[ ! -e walk.vkf.tmp ] || fail "--save-variables left its temporary file"
"$cli" run step.vkf --in sx.npy --in sy.npy --out s2vk --backend vulkan > /dev/null 2>&1 || fail "run step.vkf on vulkan exited $?"
for k in 0 1 2; do same s2vk/out$k.npy step2_ref$k.npy 1e-4; done
# a user elementwise op: Vulkan runs the saved GLSL; the CPU backend cannot
# (and --check says it cannot check it, but writes the outputs)
expect 1 "user elementwise op 'softplus': not created in this process" "$cli" run uelem.vkf --in ue_x.npy --out ue_cpu --backend cpu
expect 1 "cannot be checked" "$cli" run uelem.vkf --in ue_x.npy --out ue_vk --backend vulkan --check
grep -q "wrote 1 output to ue_vk" out.txt || fail "run --check of an uncheckable function wrote no output"
same ue_vk/out0.npy ue_ref0.npy 1e-5

# a user kernel: the same, from its SPIR-V, at its traced size
"$cli" saved show kernel.vkf --no-run > k.txt || fail "saved show kernel.vkf exited $?"
grep -q "user kernel 'cube': not created in this process .* runs on Vulkan only and at its traced sizes" k.txt ||
    fail "saved show: the user kernel not named"
expect 1 "user kernel 'cube'" "$cli" run kernel.vkf --in ue_x.npy --out k_cpu --backend cpu
"$cli" run kernel.vkf --in ue_x.npy --out k_vk --backend vulkan > /dev/null || fail "run kernel.vkf on vulkan exited $?"
same k_vk/out0.npy k_ref0.npy 1e-5

# ---- bad files: exit 3, the file named with what is wrong
echo "not numpy" > text.npy
expect 3 "--in text.npy (input 0): text.npy: not a .npy file" "$cli" run mlp.vkf --in text.npy --out bad --backend cpu
head -c 100 x.npy > short.npy
expect 3 "short.npy: truncated" "$cli" run mlp.vkf --in short.npy --out bad --backend cpu
"$py" -c "import numpy as np; np.save('x64.npy', np.load('x.npy').astype(np.float64)); np.save('x5.npy', np.zeros((3, 5), np.float32))"
expect 3 "dtype '<f8' is not one vkfuse has" "$cli" run mlp.vkf --in x64.npy --out bad --backend cpu
expect 3 "--in x5.npy (input 0) fits no signature of mlp.vkf: its dim 1 is 5, the function takes 4" \
    "$cli" run mlp.vkf --in x5.npy --out bad --backend cpu
expect 3 "--in sy.npy (input 0) fits no signature of mlp.vkf: its dtype is int32" "$cli" run mlp.vkf --in sy.npy --out bad --backend cpu
expect 3 "mlp.vkf takes 1 input; 2 --in files were given" "$cli" run mlp.vkf --in x.npy --in x.npy --out bad --backend cpu
"$py" - <<'PY'
h = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 4096), }\n"
open("huge.npy", "wb").write(b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h)
PY
expect 3 "huge.npy: shape: more than 2^40 elements" "$cli" run mlp.vkf --in huge.npy --out bad --backend cpu
expect 3 "nosuch.vkf" "$cli" run nosuch.vkf --in x.npy --out bad --backend cpu
head -c 300 mlp.vkf > damaged.vkf
expect 3 "damaged.vkf" "$cli" saved show damaged.vkf --backend cpu
expect 3 "--out mlp.vkf is not a directory" "$cli" run mlp.vkf --in x.npy --out mlp.vkf --backend cpu
[ ! -e bad ] || fail "a failed run made its --out directory"

expect 1 "(--device nosuchgpu, passed as VKFUSE_DEVICE): vf_context_create: VKFUSE_DEVICE='nosuchgpu' matches no Vulkan device" \
    "$cli" run mlp.vkf --in x.npy --out bad --device nosuchgpu
[ ! -e bad ] || fail "a failed run made its --out directory"

# ---- bad arguments: exit 2
expect 2 "--out DIR is needed" "$cli" run mlp.vkf --in x.npy
expect 2 "unknown option '--frob'" "$cli" run mlp.vkf --frob
expect 2 "--backend gpu: give cpu, vulkan or auto" "$cli" run mlp.vkf --in x.npy --out o --backend gpu
expect 2 "unknown subcommand 'list'" "$cli" saved list mlp.vkf
expect 2 "--shrink is for the built-in workloads" "$cli" profile mlp.vkf --in x.npy --shrink 2

# ---- profile FILE: fused vs unfused vs CPU, --json and --trace
"$cli" profile mlp.vkf --in x.npy --iters 2 --json --trace trace.json > prof.json || fail "profile FILE exited $?"
"$cli" profile uelem.vkf --in ue_x.npy --iters 1 --json > prof_ue.json || fail "profile uelem.vkf exited $?"
"$py" - <<'PY' || fail "profile FILE --json"
import json
p = json.load(open("prof.json"))
assert p["file"] == "mlp.vkf" and p["workload"] == "mlp.vkf" and "'mlp'" in p["summary"], p["summary"]
f, u = p["fused"], p["unfused"]
assert f["planned"] and u["planned"] and f["kernels"] == len(f["kernel_list"]) >= 1
ops = sorted(o for k in u["kernel_list"] for o in k["ops"])
assert ops == ["add", "matmul", "reduce_sum", "relu"], ops
assert all(len(k["ops"]) == 1 for k in u["kernel_list"]) and f["kernels"] < u["kernels"], (f["kernels"], u["kernels"])
assert p["cpu"]["wall_us"] > 0 and p["cpu_skipped"] is None
assert p["max_abs_diff"]["fused_vs_cpu"] < 1e-5 and p["max_abs_diff"]["fused_vs_unfused"] < 1e-5
t = json.load(open("trace.json"))
assert [e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"] == \
    ["mlp.vkf fused call 4", "mlp.vkf unfused call 4"]
q = json.load(open("prof_ue.json"))
assert q["cpu"] is None and "softplus" in q["cpu_skipped"], q["cpu_skipped"]
assert q["fused"]["kernels"] >= 1 and any("softplus" in o for k in q["unfused"]["kernel_list"] for o in k["ops"])
PY
expect 3 "x5.npy (input 0) fits no signature" "$cli" profile mlp.vkf --in x5.npy
compare_all
echo "saved_cli_test: ok"
