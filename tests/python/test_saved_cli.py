"""A function saved from Python, shown and run by the `vkfuse` command line
(docs/CLI.md): `vkfuse saved show --json` describes it and `vkfuse run` on
.npy inputs gives the outputs the Python function gave, on the CPU backend
and on the device the suite runs on."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np

import vkfuse as tf
from vkfuse import _lib


def _cli() -> Path:
    """The vkfuse command of the build whose library this process loaded
    (build/<preset>/libvkfuse.so -> build/<preset>/tools/vkfuse)."""
    exe = Path(_lib.path).resolve().parent / "tools" / "vkfuse"
    assert exe.exists(), f"no vkfuse command next to {_lib.path}: build the tools target of that build"
    return exe


def test_python_saved_function_runs_from_the_shell(tmp_path):
    @tf.function(input_signature=[tf.TensorSpec(shape=[None, 3], dtype=tf.float32),
                                  tf.TensorSpec(shape=[3], dtype=tf.float32)])
    def f(x, b):
        return tf.nn.softmax(x * 2.0 + b), tf.reduce_sum(x, axis=1)

    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    want = [t.numpy() for t in f(x, b)]
    saved = tmp_path / "f.vkf"
    tf.saved_model.save(f, saved)

    show = subprocess.run([_cli(), "saved", "show", saved, "--json"], capture_output=True, text=True)
    assert show.returncode == 0, show.stderr
    info = json.loads(show.stdout)
    assert (info["name"], info["n_inputs"], info["n_outputs"]) == ("f", 2, 2)
    assert info["input_signature"] == [{"dtype": "f32", "shape": [-1, 3]}, {"dtype": "f32", "shape": [3]}]
    assert info["concrete"][0]["ops"]["softmax"] == 1

    # another batch size than the traced one: the signature's -1 dim; a
    # Fortran-order file for the first input
    x7 = np.asfortranarray(rng.standard_normal((7, 3)).astype(np.float32))
    want7 = [t.numpy() for t in f(x7, b)]
    np.save(tmp_path / "x.npy", x7)
    np.save(tmp_path / "b.npy", b)
    for backend in ("cpu", os.environ.get("VKFUSE_BACKEND", "cpu")):
        out = tmp_path / ("out_" + backend)
        run = subprocess.run([_cli(), "run", saved, "--in", tmp_path / "x.npy", "--in", tmp_path / "b.npy",
                              "--out", out, "--backend", backend], capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        for k in range(2):
            got = np.load(out / f"out{k}.npy")
            np.testing.assert_allclose(got, want7[k], rtol=1e-5, atol=1e-6)
    assert want[0].shape == (5, 3)

    # a wrong input: exit 3 and a message naming the signature
    np.save(tmp_path / "bad.npy", np.zeros((2, 4), np.float32))
    bad = subprocess.run([_cli(), "run", saved, "--in", tmp_path / "bad.npy", "--in", tmp_path / "b.npy",
                          "--out", tmp_path / "o"], capture_output=True, text=True)
    assert bad.returncode == 3 and "bad.npy" in bad.stderr, bad.stderr
