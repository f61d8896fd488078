"""``vkfuse.data``: a small ``tf.data.Dataset`` for eager input pipelines.

Datasets of tensors (or nested tuples / dicts of them) sliced along the
first dim: ``from_tensor_slices``, ``from_tensors``, ``range``, then
``batch``, ``shuffle``, ``repeat``, ``map``, ``filter``, ``take``, ``skip``,
``enumerate``, ``zip``, ``prefetch`` / ``cache`` (accepted, no effect),
iterated eagerly in Python. Elements are vkfuse tensors. The data lives
in NumPy until an element is made, so shuffling and batching cost no
device work; shuffle's order comes from NumPy's generator seeded by
``seed`` (differs from TF's).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional

import numpy as np

from . import nest
from .tensor import Tensor, constant

AUTOTUNE = -1


def _to_np(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, Tensor) else np.asarray(x)


def _as_tensor(x: Any) -> Any:
    return x if isinstance(x, Tensor) else constant(x)


class Dataset:
    """An iterable of elements (tensors or structures of them)."""

    def __init__(self, make_iter: Callable[[], Iterator[Any]]) -> None:
        self._make = make_iter

    def __iter__(self) -> Iterator[Any]:
        return self._make()

    # ---- sources -----------------------------------------------------------
    @staticmethod
    def from_tensor_slices(tensors: Any, name: Optional[str] = None) -> "Dataset":
        tensors = _lists_as_arrays(tensors)
        flat = [_to_np(t) for t in nest.flatten(tensors)]
        n = flat[0].shape[0] if flat and flat[0].ndim else 0
        if any(a.ndim == 0 or a.shape[0] != n for a in flat):
            raise ValueError("vkfuse.data.Dataset.from_tensor_slices: every component needs the same first dim")

        def it() -> Iterator[Any]:
            for i in range(n):
                yield nest.pack_sequence_as(tensors, [constant(a[i]) for a in flat])
        return Dataset(it)

    @staticmethod
    def from_tensors(tensors: Any, name: Optional[str] = None) -> "Dataset":
        return Dataset(lambda: iter([nest.map_structure(_as_tensor, tensors)]))

    @staticmethod
    def range(*args: int, **kwargs: Any) -> "Dataset":  # noqa: A003
        return Dataset(lambda: (constant(np.int32(i)) for i in range(*args)))

    @staticmethod
    def zip(datasets: Any, name: Optional[str] = None) -> "Dataset":
        def it() -> Iterator[Any]:
            for parts in zip(*[iter(d) for d in nest.flatten(datasets)]):
                yield nest.pack_sequence_as(datasets, list(parts))
        return Dataset(it)

    # ---- transformations ---------------------------------------------------
    def batch(self, batch_size: int, drop_remainder: bool = False, **kwargs: Any) -> "Dataset":
        def it() -> Iterator[Any]:
            buf: List[Any] = []
            for e in self:
                buf.append(e)
                if len(buf) == batch_size:
                    yield _stack(buf)
                    buf = []
            if buf and not drop_remainder:
                yield _stack(buf)
        return Dataset(it)

    def shuffle(self, buffer_size: int, seed: Optional[int] = None,
                reshuffle_each_iteration: bool = True, name: Optional[str] = None) -> "Dataset":
        rng = np.random.default_rng(seed)

        def it() -> Iterator[Any]:
            r = rng if reshuffle_each_iteration else np.random.default_rng(seed)
            buf: List[Any] = []
            for e in self:
                buf.append(e)
                if len(buf) >= buffer_size:
                    yield buf.pop(int(r.integers(len(buf))))
            while buf:
                yield buf.pop(int(r.integers(len(buf))))
        return Dataset(it)

    def repeat(self, count: Optional[int] = None, name: Optional[str] = None) -> "Dataset":
        def it() -> Iterator[Any]:
            k = 0
            while count is None or count < 0 or k < count:
                empty = True
                for e in self:
                    empty = False
                    yield e
                if empty:
                    return
                k += 1
        return Dataset(it)

    def map(self, map_func: Callable[..., Any], num_parallel_calls: Any = None,
            deterministic: Any = None, name: Optional[str] = None) -> "Dataset":
        def it() -> Iterator[Any]:
            for e in self:
                yield map_func(*e) if isinstance(e, tuple) else map_func(e)
        return Dataset(it)

    def filter(self, predicate: Callable[..., Any], name: Optional[str] = None) -> "Dataset":
        def it() -> Iterator[Any]:
            for e in self:
                if bool(predicate(*e) if isinstance(e, tuple) else predicate(e)):
                    yield e
        return Dataset(it)

    def take(self, count: int, name: Optional[str] = None) -> "Dataset":
        def it() -> Iterator[Any]:
            if count < 0:
                yield from self
                return
            for i, e in enumerate(self):
                if i >= count:
                    return
                yield e
        return Dataset(it)

    def skip(self, count: int, name: Optional[str] = None) -> "Dataset":
        def it() -> Iterator[Any]:
            for i, e in enumerate(self):
                if i >= count:
                    yield e
        return Dataset(it)

    def enumerate(self, start: int = 0, name: Optional[str] = None) -> "Dataset":  # noqa: A003
        def it() -> Iterator[Any]:
            for i, e in enumerate(self, start):
                yield constant(np.int32(i)), e
        return Dataset(it)

    def prefetch(self, buffer_size: Any, name: Optional[str] = None) -> "Dataset":
        return self

    def cache(self, filename: str = "", name: Optional[str] = None) -> "Dataset":
        return self

    def as_numpy_iterator(self) -> Iterator[Any]:
        for e in self:
            yield nest.map_structure(lambda t: t.numpy() if isinstance(t, Tensor) else t, e)

    def cardinality(self) -> Tensor:
        return constant(np.int32(sum(1 for _ in self)))


def _stack(elems: List[Any]) -> Any:
    flat = [nest.flatten(e) for e in elems]
    cols = [constant(np.stack([_to_np(row[j]) for row in flat])) for j in range(len(flat[0]))]
    return nest.pack_sequence_as(elems[0], cols)


def _lists_as_arrays(x: Any) -> Any:
    """TF takes a Python list as one tensor (tuples and dicts are structure)."""
    if isinstance(x, list):
        return np.asarray(x)
    if isinstance(x, dict):
        return type(x)((k, _lists_as_arrays(v)) for k, v in x.items())
    if isinstance(x, tuple):
        items = [_lists_as_arrays(v) for v in x]
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    return x
