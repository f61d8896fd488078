"""tf.TensorArray: a list of same-shaped tensors, written one element at a
time and stacked at the end, as TF2 code collects a loop's results.

vkfuse's TensorArray is a Python list of tensors: it works eagerly and in
loops that run in Python (also inside a vkfuse.function, where a Python
loop is unrolled while tracing). A loop whose condition is a tensor
becomes one graph loop, whose variables must be tensors of a fixed shape;
a TensorArray written there is refused by AutoGraph with a message saying
how to write it instead (its ``_graph_loop_hint``).
"""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np

from . import _context, dtypes, errors
from ._core import L
from .tensor import Tensor, TensorShape, constant


class TensorArray:
    """``TensorArray(dtype, size=0, dynamic_size=False, element_shape=None)``:
    ``write(i, v)`` (eagerly it writes in place and returns the array, as
    TF's eager one; while tracing it returns a new array), ``read(i)``,
    ``stack()``, ``concat()``, ``gather(indices)``, ``unstack(t)``,
    ``scatter(indices, t)``, ``size()``."""

    _graph_loop_hint = (" A TensorArray lives in Python, so a graph loop cannot fill it: make the loop a "
                        "Python one (for i in range(n) with a Python n), or collect the rows in a tensor "
                        "made before the loop (rows = rows + vkfuse.one_hot(i, n)[:, None] * row, or "
                        "vkfuse.tensor_scatter_nd_add) and use it after the loop.")

    def __init__(self, dtype: Any, size: Any = None, dynamic_size: Any = None, clear_after_read: Any = None,
                 tensor_array_name: Any = None, handle: Any = None, flow: Any = None, infer_shape: bool = True,
                 element_shape: Any = None, colocate_with_first_write_call: bool = True,
                 name: Optional[str] = None) -> None:
        self._dtype = dtypes.as_dtype(dtype)
        n = 0 if size is None else _index(size, "size")
        if n < 0:
            raise errors.invalid(f"vkfuse.TensorArray: size must be >= 0, got {n}")
        self._dynamic = bool(dynamic_size)
        self._items: List[Optional[Tensor]] = [None] * n
        self._element_shape = None if element_shape is None else TensorShape(element_shape)

    @property
    def dtype(self) -> dtypes.DType:
        return self._dtype

    @property
    def dynamic_size(self) -> bool:
        return self._dynamic

    @property
    def element_shape(self) -> Optional[TensorShape]:
        return self._element_shape

    def size(self, name: Optional[str] = None) -> Tensor:
        return constant(len(self._items), dtype=dtypes.int32)

    def write(self, index: Any, value: Any, name: Optional[str] = None) -> "TensorArray":
        i = _index(index, "write")
        v = value if isinstance(value, Tensor) else constant(value, dtype=self._dtype)
        if v.dtype != self._dtype:
            raise errors.invalid(f"vkfuse.TensorArray.write: the array holds {self._dtype.name}, the value "
                                 f"is {v.dtype.name}; cast it first", "VF_ERROR_DTYPE")
        shape = TensorShape(v.shape)
        if self._element_shape is not None and tuple(self._element_shape) != tuple(shape):
            raise errors.invalid(f"vkfuse.TensorArray.write: element {i} has shape {shape}, the array's "
                                 f"elements are {self._element_shape}", "VF_ERROR_SHAPE")
        if _tracing():
            self = self._copy()  # traced code must use what write returns (as TF's graph arrays)
        self._element_shape = shape
        if i < 0:
            raise errors.invalid(f"vkfuse.TensorArray.write: index {i} is negative")
        if i >= len(self._items):
            if not self._dynamic:
                raise errors.invalid(f"vkfuse.TensorArray.write: index {i} is past the array's size "
                                     f"{len(self._items)}; make it with dynamic_size=True to grow it")
            self._items += [None] * (i + 1 - len(self._items))
        self._items[i] = v
        return self

    def read(self, index: Any, name: Optional[str] = None) -> Tensor:
        i = _index(index, "read")
        if not 0 <= i < len(self._items):
            raise errors.invalid(f"vkfuse.TensorArray.read: index {i} is outside the array's size "
                                 f"{len(self._items)}")
        return self._element(i)

    def _element(self, i: int) -> Tensor:
        v = self._items[i]
        if v is not None:
            return v
        if self._element_shape is None:
            raise errors.invalid(f"vkfuse.TensorArray: element {i} was never written and the element "
                                 "shape is unknown; write it (or give element_shape=) first")
        return constant(np.zeros(tuple(self._element_shape), self._dtype.as_numpy_dtype))

    def stack(self, name: Optional[str] = None) -> Tensor:
        """The elements along a new dim 0 (unwritten ones are zeros, as TF's)."""
        return self.gather(list(range(len(self._items))))

    def gather(self, indices: Any, name: Optional[str] = None) -> Tensor:
        from .array_ops import stack
        idx = [_index(i, "gather") for i in np.asarray(_host(indices)).reshape(-1)]
        for i in idx:
            if not 0 <= i < len(self._items):
                raise errors.invalid(f"vkfuse.TensorArray.gather: index {i} is outside the array's size "
                                     f"{len(self._items)}")
        if not idx:
            shape = tuple(self._element_shape) if self._element_shape is not None else ()
            return constant(np.zeros((0,) + shape, self._dtype.as_numpy_dtype))
        return stack([self._element(i) for i in idx], axis=0)

    def concat(self, name: Optional[str] = None) -> Tensor:
        """The elements joined along their dim 0."""
        from .array_ops import concat
        if not self._items:
            return constant(np.zeros((0,), self._dtype.as_numpy_dtype))
        return concat([self._element(i) for i in range(len(self._items))], axis=0)

    def unstack(self, value: Any, name: Optional[str] = None) -> "TensorArray":
        from .array_ops import unstack
        v = value if isinstance(value, Tensor) else constant(value, dtype=self._dtype)
        ta = self
        for i, row in enumerate(unstack(v, axis=0)):
            ta = ta.write(i, row)
        return ta

    def scatter(self, indices: Any, value: Any, name: Optional[str] = None) -> "TensorArray":
        from .array_ops import unstack
        v = value if isinstance(value, Tensor) else constant(value, dtype=self._dtype)
        ta = self
        for i, row in zip(np.asarray(_host(indices)).reshape(-1), unstack(v, axis=0)):
            ta = ta.write(int(i), row)
        return ta

    def identity(self) -> "TensorArray":
        return self

    def _copy(self) -> "TensorArray":
        c = TensorArray.__new__(TensorArray)
        c._dtype, c._dynamic, c._element_shape = self._dtype, self._dynamic, self._element_shape
        c._items = list(self._items)
        return c

    def close(self, name: Optional[str] = None) -> None:
        self._items = []

    def __repr__(self) -> str:
        return f"<vkfuse.TensorArray dtype={self._dtype.name} size={len(self._items)}>"


def _host(v: Any) -> Any:
    return v.numpy() if isinstance(v, Tensor) else v


def _index(v: Any, what: str) -> int:
    """A Python int from an int, a NumPy integer or an eager scalar tensor."""
    try:
        return int(_host(v))
    except (TypeError, ValueError, errors.OpError) as e:
        raise TypeError(f"vkfuse.TensorArray.{what}: the index must be a Python or scalar integer known "
                        f"now, got {v!r} ({e}).{TensorArray._graph_loop_hint}") from None


def _tracing() -> bool:
    return bool(L.vf_context_tracing(_context.context().handle))
