"""``vkfuse.debugging``: tf.debugging's eager checks (values read to the host)."""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import errors
from ._core import tensor as _t
from .tensor import Tensor


def _np(x: Any) -> np.ndarray:
    return np.asarray(x.numpy() if isinstance(x, Tensor) else x)


def _fail(message: Optional[str], what: str) -> None:
    raise errors.invalid((message + ": " if message else "") + what)


def assert_equal(x: Any, y: Any, message: Optional[str] = None, summarize: Any = None,
                 name: Optional[str] = None) -> None:
    a, b = _np(x), _np(y)
    if not np.all(a == b):
        _fail(message, f"assert_equal failed: {a} != {b}")


def assert_near(x: Any, y: Any, rtol: Any = None, atol: Any = None, message: Optional[str] = None,
                summarize: Any = None, name: Optional[str] = None) -> None:
    a, b = _np(x), _np(y)
    eps = float(np.finfo(np.float32).eps) * 10
    if not np.allclose(a, b, rtol=eps if rtol is None else rtol, atol=eps if atol is None else atol):
        _fail(message, f"assert_near failed: {a} is not near {b}")


def assert_all_finite(t: Any, message: str, name: Optional[str] = None) -> Tensor:
    x = _t(t)
    if not np.all(np.isfinite(_np(x))):
        _fail(message, "the tensor has NaN or Inf values")
    return x


check_numerics = assert_all_finite


def _cmp(op: Any, what: str) -> Any:
    def check(x: Any, y: Any, message: Optional[str] = None, summarize: Any = None,
              name: Optional[str] = None) -> None:
        if not np.all(op(_np(x), _np(y))):
            _fail(message, f"{what} failed")
    return check


assert_less = _cmp(np.less, "assert_less")
assert_less_equal = _cmp(np.less_equal, "assert_less_equal")
assert_greater = _cmp(np.greater, "assert_greater")
assert_greater_equal = _cmp(np.greater_equal, "assert_greater_equal")


def assert_rank(x: Any, rank: int, message: Optional[str] = None, name: Optional[str] = None) -> None:
    if _t(x).ndim != int(rank):
        _fail(message, f"assert_rank failed: rank {_t(x).ndim}, expected {rank}")


def assert_shapes(shapes: Any, data: Any = None, summarize: Any = None, message: Optional[str] = None,
                  name: Optional[str] = None) -> None:
    """Each (tensor, [dim names or sizes]) entry; a name must mean the same size everywhere."""
    sizes: dict = {}
    for t, spec in shapes:
        shape = _t(t).shape
        if len(shape) != len(spec):
            _fail(message, f"assert_shapes: shape {list(shape)} does not have rank {len(spec)} of {list(spec)}")
        for d, s in zip(shape, spec):
            if isinstance(s, int):
                if d != s:
                    _fail(message, f"assert_shapes: {list(shape)} is not {list(spec)}")
            elif sizes.setdefault(s, d) != d:
                _fail(message, f"assert_shapes: dim {s!r} is {sizes[s]} and {d}")
