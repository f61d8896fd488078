"""``vkfuse.train``: tf.train.Checkpoint (write / read / save / restore),
CheckpointManager, latest_checkpoint and list_variables.

A checkpoint holds the values of the variables reachable from the objects
given to Checkpoint(name=object): variables, Modules (through their
attributes, lists, tuples and dicts), optimizers (their step count and
slots, named after the variables they belong to) and other checkpoints.
Each variable is named by its path of attribute names, as TF's object
graph does ("model/dense_1/w"), so a new program with the same structure
restores it. The file is NumPy's .npz format (not TF's format):
``<prefix>.index``; ``save`` numbers the prefixes and records the latest in
a ``checkpoint`` file of the directory, as TF.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from . import errors
from .module import Module
from .optimizers import Optimizer
from .variables import Variable


def _walk(obj: Any, path: str, out: Dict[str, Variable], seen: set, opts: List[Tuple[str, Optimizer]]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Variable):
        out.setdefault(path, obj)
    elif isinstance(obj, Optimizer):
        opts.append((path, obj))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _walk(v, f"{path}/{i}", out, seen, opts)
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            _walk(obj[k], f"{path}/{k}", out, seen, opts)
    elif isinstance(obj, Checkpoint):
        for k in sorted(obj._objects):
            _walk(obj._objects[k], f"{path}/{k}", out, seen, opts)
    elif isinstance(obj, Module):
        for k in sorted(vars(obj)):
            _walk(vars(obj)[k], f"{path}/{k}", out, seen, opts)


def _variables(root: "Checkpoint") -> Tuple[Dict[str, Variable], List[Tuple[str, Optimizer]]]:
    out: Dict[str, Variable] = {}
    opts: List[Tuple[str, Optimizer]] = []
    for k in sorted(root._objects):
        _walk(root._objects[k], k, out, set(), opts)
    return out, opts


class _Status:
    def __init__(self, unused: List[str], missing: List[str]) -> None:
        self._unused, self._missing = unused, missing

    def assert_consumed(self) -> "_Status":
        if self._unused or self._missing:
            raise AssertionError(f"vkfuse.train.Checkpoint: not matched: in the file {self._unused}, "
                                 f"in the objects {self._missing}")
        return self

    def assert_existing_objects_matched(self) -> "_Status":
        if self._missing:
            raise AssertionError(f"vkfuse.train.Checkpoint: objects not in the file: {self._missing}")
        return self

    def expect_partial(self) -> "_Status":
        return self


class Checkpoint:
    """tf.train.Checkpoint(**objects)."""

    def __init__(self, root: Any = None, **kwargs: Any) -> None:
        self._objects = dict(kwargs)
        if root is not None:
            self._objects["root"] = root
        self.save_counter = 0

    def _state(self) -> Dict[str, np.ndarray]:
        named, opts = _variables(self)
        state = {k: v.numpy() for k, v in named.items()}
        by_id = {id(v): k for k, v in named.items()}
        for path, opt in opts:
            state[f"{path}/iterations"] = np.asarray(int(opt.iterations), np.int32)
            for vid, slots in opt._slots.items():
                if vid in by_id:
                    for name, s in slots.items():
                        state[f"{path}/slots/{by_id[vid]}/{name}"] = s.numpy()
        return state

    def write(self, file_prefix: str, options: Any = None) -> str:
        prefix = os.fspath(file_prefix)
        d = os.path.dirname(prefix)
        if d:
            os.makedirs(d, exist_ok=True)
        with open(prefix + ".index", "wb") as f:  # a file object: savez adds no suffix
            np.savez(f, **self._state())
        return prefix

    def save(self, file_prefix: str, options: Any = None) -> str:
        self.save_counter += 1
        path = self.write(f"{os.fspath(file_prefix)}-{self.save_counter}")
        _record_latest(path)
        return path

    def read(self, save_path: str, options: Any = None) -> _Status:
        path = os.fspath(save_path)
        try:
            with np.load(path + ".index") as z:
                saved = {k: z[k] for k in z.files}
        except OSError as e:
            raise errors.NotFoundError(None, None, f"vkfuse.train.Checkpoint: cannot read {path}.index: {e}",
                                       "VF_ERROR_IO") from None
        named, opts = _variables(self)
        missing = []
        for k, v in named.items():
            if k not in saved:
                missing.append(k)
                continue
            if tuple(saved[k].shape) != tuple(v.shape):
                raise errors.invalid(f"vkfuse.train.Checkpoint: '{k}' has shape {tuple(v.shape)}, the "
                                     f"checkpoint's {tuple(saved[k].shape)}", "VF_ERROR_SHAPE")
            v.assign(saved[k].astype(v.dtype.as_numpy_dtype))
        used = set(named)
        for path, opt in opts:
            key = f"{path}/iterations"
            if key in saved:
                opt.iterations.assign(int(saved[key]))
                used.add(key)
            for k in saved:
                if k.startswith(f"{path}/slots/"):
                    var_path, name = k[len(path) + 7:].rsplit("/", 1)
                    if var_path in named:
                        opt._slot(named[var_path], name).assign(saved[k])
                        used.add(k)
        return _Status(sorted(set(saved) - used), missing)

    restore = read


def _record_latest(path: str) -> None:
    d = os.path.dirname(path) or "."
    with open(os.path.join(d, "checkpoint"), "w") as f:
        f.write('model_checkpoint_path: "%s"\n' % os.path.basename(path))


def latest_checkpoint(checkpoint_dir: str, latest_filename: Optional[str] = None) -> Optional[str]:
    try:
        with open(os.path.join(os.fspath(checkpoint_dir), latest_filename or "checkpoint")) as f:
            for line in f:
                if line.startswith("model_checkpoint_path:"):
                    return os.path.join(os.fspath(checkpoint_dir), line.split('"')[1])
    except OSError:
        pass
    return None


def list_variables(ckpt_dir_or_file: str) -> List[Tuple[str, List[int]]]:
    path = os.fspath(ckpt_dir_or_file)
    if os.path.isdir(path):
        path = latest_checkpoint(path) or path
    with np.load(path + ".index") as z:
        return sorted((k, list(z[k].shape)) for k in z.files)


class CheckpointManager:
    """Numbered saves of a Checkpoint in a directory, keeping the last max_to_keep."""

    def __init__(self, checkpoint: Checkpoint, directory: str, max_to_keep: Optional[int] = 5,
                 checkpoint_name: str = "ckpt", **kwargs: Any) -> None:
        self._ckpt, self.directory = checkpoint, os.fspath(directory)
        self._keep, self._name = max_to_keep, checkpoint_name
        self.checkpoints: List[str] = []

    @property
    def latest_checkpoint(self) -> Optional[str]:
        return latest_checkpoint(self.directory)

    def save(self, checkpoint_number: Optional[int] = None, **kwargs: Any) -> str:
        if checkpoint_number is not None:
            self._ckpt.save_counter = int(checkpoint_number) - 1
        path = self._ckpt.save(os.path.join(self.directory, self._name))
        self.checkpoints.append(path)
        while self._keep is not None and len(self.checkpoints) > self._keep:
            old = self.checkpoints.pop(0)
            try:
                os.remove(old + ".index")
            except OSError:
                pass
        return path
