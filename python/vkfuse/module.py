"""tf.Module (variables found through attributes), initializers, and small
top-level helpers (name_scope, executing_eagerly, get_static_value)."""
from __future__ import annotations

import re
from typing import Any, Iterator, List, Optional, Tuple

import numpy as np

from . import dtypes
from .tensor import Tensor, constant
from .variables import Variable


def _walk(obj: Any, seen: set) -> Iterator[Any]:
    """Everything reachable from a module's attributes (lists, tuples, dicts), depth first."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, Module):
        for k in sorted(vars(obj)):
            v = vars(obj)[k]
            yield v
            yield from _walk(v, seen)
    elif isinstance(obj, dict):
        for k in sorted(obj, key=str):
            yield obj[k]
            yield from _walk(obj[k], seen)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield v
            yield from _walk(v, seen)


class Module:
    """tf.Module: ``variables``, ``trainable_variables``, ``submodules`` found in attributes."""

    def __init__(self, name: Optional[str] = None) -> None:
        if name is None:
            # TF's camel to snake: MLP -> mlp, DenseLayer -> dense_layer, HTTPServer -> http_server
            name = re.sub(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))", r"_\1", type(self).__name__).lower()
        self._name = name

    @property
    def name(self) -> str:
        return getattr(self, "_name", type(self).__name__.lower())

    @property
    def name_scope(self) -> Any:
        return name_scope(self.name)

    def _flatten(self, pred: Any) -> Tuple[Any, ...]:
        out, ids = [], set()
        for v in _walk(self, set()):
            if pred(v) and id(v) not in ids:
                ids.add(id(v))
                out.append(v)
        return tuple(out)

    @property
    def variables(self) -> Tuple[Variable, ...]:
        return self._flatten(lambda v: isinstance(v, Variable))

    @property
    def trainable_variables(self) -> Tuple[Variable, ...]:
        return self._flatten(lambda v: isinstance(v, Variable) and v.trainable)

    @property
    def non_trainable_variables(self) -> Tuple[Variable, ...]:
        return self._flatten(lambda v: isinstance(v, Variable) and not v.trainable)

    @property
    def submodules(self) -> Tuple["Module", ...]:
        return self._flatten(lambda v: isinstance(v, Module) and v is not self)

    @classmethod
    def with_name_scope(cls, method: Any) -> Any:
        return method


class name_scope:  # noqa: N801 (TF's name)
    """tf.name_scope: accepted (vkfuse names no ops); ``with`` gives the
    scope's name, "name/", and ``.name`` is it, as TF's."""

    def __init__(self, name: str) -> None:
        self.name = str(name).rstrip("/") + "/" if name else ""

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc: Any) -> None:
        return None


def executing_eagerly() -> bool:
    """False while the current context traces a function body."""
    from . import _context
    from ._core import L
    f = getattr(L, "vf_context_tracing", None)
    ctx = _context.context()
    if f is None or ctx.closed:
        return True
    f.restype, f.argtypes = __import__("ctypes").c_bool, [__import__("ctypes").c_void_p]
    return not f(ctx.handle)


def get_static_value(tensor: Any, partial: bool = False) -> Any:
    return tensor.numpy() if isinstance(tensor, Tensor) else np.asarray(tensor)


# ---- initializers (tf.*_initializer and tf.initializers / keras-free) ----------
class Initializer:
    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        raise NotImplementedError


class zeros_initializer(Initializer):
    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        from .array_ops import zeros
        return zeros(shape, dtype)


class ones_initializer(Initializer):
    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        from .array_ops import ones
        return ones(shape, dtype)


class constant_initializer(Initializer):
    def __init__(self, value: Any = 0) -> None:
        self.value = value

    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        return constant(self.value, dtype, shape=list(shape))


class random_normal_initializer(Initializer):
    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: Optional[int] = None) -> None:
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        from . import random
        return random.normal(shape, self.mean, self.stddev, dtype, self.seed)


class random_uniform_initializer(Initializer):
    def __init__(self, minval: float = -0.05, maxval: float = 0.05, seed: Optional[int] = None) -> None:
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        from . import random
        return random.uniform(shape, self.minval, self.maxval, dtype, self.seed)


class glorot_uniform_initializer(Initializer):
    def __init__(self, seed: Optional[int] = None) -> None:
        self.seed = seed

    def __call__(self, shape: Any, dtype: Any = dtypes.float32, **kwargs: Any) -> Tensor:
        from . import random
        shape = [int(d) for d in shape]
        recep = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
        fan_in = shape[-2] * recep if len(shape) > 1 else shape[0]
        fan_out = shape[-1] * recep
        lim = float(np.sqrt(6.0 / max(fan_in + fan_out, 1)))
        return random.uniform(shape, -lim, lim, dtype, self.seed)


class _Initializers:
    Zeros = zeros_initializer
    Ones = ones_initializer
    Constant = constant_initializer
    RandomNormal = random_normal_initializer
    RandomUniform = random_uniform_initializer
    GlorotUniform = glorot_uniform_initializer
    zeros = zeros_initializer
    ones = ones_initializer
    constant = constant_initializer
    glorot_uniform = glorot_uniform_initializer


initializers = _Initializers()
